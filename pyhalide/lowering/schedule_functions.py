"""Build the loop nest: one Realize per computed Func, its stages' loops, then its consumers.

Assumes: the environment's realization order (producers first). Guarantees: every computed Func f
has `Realize f { produce f {stages}; consume f {...} }` (outputs have no Realize), loops named
`f.s<stage>.<var>` whose bounds are the free variables `f.s<stage>.<var>.min/.max`, which
bounds inference defines next.
"""

from __future__ import annotations

from .. import ir
from ..ir_mutator import substitute
from ..types import Int


def stage_prefix(f, stage: int) -> str:
    return f"{f.name()}.s{stage}."


def stage_dims(f, stage: int) -> list[tuple[str, bool]]:
    """The loop dimensions of a stage, innermost first, as (name, is_pure_var)."""
    d = f.definitions()[stage]
    if stage == 0:
        return [(v, True) for v in f._pure_args]
    lhs_vars = {a.name for a in d.args if isinstance(a, ir.Variable) and a.ref is None}
    return [(rv.name, False) for rv in d.rvars] + [(v, True) for v in f._pure_args if v in lhs_vars]


def dim_bound(f, stage: int, var: str, which: str) -> ir.Variable:
    return ir.Variable(f"{stage_prefix(f, stage)}{var}.{which}", Int(32))


def build_stage(f, stage: int) -> ir.Stmt:
    """The loop nest of one definition of f, with symbolic bounds for its pure dimensions."""
    d = f.definitions()[stage]
    prefix = stage_prefix(f, stage)
    dims = stage_dims(f, stage)
    subst = {name: ir.Variable(prefix + name, Int(32)) for name, _ in dims}
    rvar_bounds = {rv.name: rv for rv in d.rvars}
    values = tuple(substitute(subst, v) for v in d.values)
    args = tuple(substitute(subst, a) for a in d.args)
    body: ir.Stmt = ir.Provide(f.name(), values, args, func=f)
    if d.predicate is not None:
        body = ir.IfThenElse(substitute(subst, d.predicate), body)
    one = ir.make_const(Int(32), 1)
    for name, pure in dims:
        if pure:
            lo = dim_bound(f, stage, name, "min")
            extent = ir.Add(ir.Sub(dim_bound(f, stage, name, "max"), lo), one)
        else:
            rv = rvar_bounds[name]
            lo, extent = substitute(subst, rv.min), substitute(subst, rv.extent)
        body = ir.For(prefix + name, lo, extent, ir.SERIAL, body)
    return body


def build_produce(f) -> ir.Stmt:
    stages = [build_stage(f, s) for s in range(len(f.definitions()))]
    return ir.ProducerConsumer(f.name(), True, ir.make_block(stages))


def schedule_functions(env) -> ir.Stmt:
    """Nest the realizations of all computed Funcs at root, consumers innermost."""
    stmt: ir.Stmt = ir.make_block([])
    one = ir.make_const(Int(32), 1)
    for f in reversed(env.order):
        produce = build_produce(f)
        consume = ir.ProducerConsumer(f.name(), False, stmt)
        body = ir.make_block([produce, consume])
        if env.is_output(f):
            stmt = body
            continue
        bounds = tuple(
            (dim_bound(f, 0, v, "min"), ir.Add(ir.Sub(dim_bound(f, 0, v, "max"), dim_bound(f, 0, v, "min")), one))
            for v in f._pure_args
        )
        stmt = ir.Realize(f.name(), tuple(f.types()), bounds, body, func=f)
    return stmt
