"""Buffer checks: before computing anything, assert that every input buffer covers the box the
pipeline reads of it and that every output buffer covers the box its stages write.

Assumes: final loop bounds (after sliding window). Guarantees: the asserts go right after the
lets that open the pipeline (the root Funcs' bounds), so they name those lets instead of
repeating their expressions, and run before any production. An output is written where its
stages' loops go, which RoundUp or ShiftInwards splits can take beyond the region asked for, so
the written box itself is checked. A branch not taken counts as touching nothing.

The checks compute in 64 bits, over the 64-bit shadows of the bounds lets (see wide_bounds): a
wrapped bound would let the pipeline read outside its input after the check passed.
"""

from __future__ import annotations

import functools

from .. import ir
from ..bounds import box_touched, index_guards
from ..cse import ValueNumbering, common_subexpression_elimination
from ..errors import CompileError
from ..ir import is_const
from ..ir_mutator import free_variables, substitute
from ..ir_printer import expr_to_string
from ..schedule import TailStrategy
from ..simplify import simplify
from ..types import Int
from .bounds_inference import buffer_field, buffer_names, require_bounded
from .environment import collect_inputs
from .wide_bounds import I64, shadows_of, widened

_ONE = ir.make_const(I64, 1)


def _range_checks(kind: str, buffer: str, dim: int, lo: ir.Expr, hi: ir.Expr, shadowed: set[str]) -> list[ir.Stmt]:
    lo, hi = widened(lo, shadowed), widened(hi, shadowed)
    bmin = widened(buffer_field(buffer, "min", dim), shadowed)
    bmax = ir.Sub(ir.Add(bmin, widened(buffer_field(buffer, "extent", dim), shadowed)), _ONE)
    return [
        ir.AssertStmt(
            ir.GE(lo, bmin),
            f"{kind} buffer {buffer} is accessed at {{}}, which is before the min ({{}}) in dimension {dim}",
            (lo, bmin),
        ),
        ir.AssertStmt(
            ir.LE(hi, bmax),
            f"{kind} buffer {buffer} is accessed at {{}}, which is beyond the max ({{}}) in dimension {dim}",
            (hi, bmax),
        ),
    ]


def _same_shape_checks(buffers: list[str], dims: int) -> list[ir.Stmt]:
    """The buffers of a Tuple-valued output must all have its first element's mins and extents
    (Halide's constraint): one element's buffer may not be smaller than what is computed."""
    checks = []
    for other in buffers[1:]:
        for d in range(dims):
            for field in ("min", "extent"):
                a, b = buffer_field(other, field, d), buffer_field(buffers[0], field, d)
                checks.append(ir.AssertStmt(ir.EQ(a, b), f"Constraint violated: {other}.{field}.{d} ({{}}) == "
                                                         f"{buffers[0]}.{field}.{d} ({{}})", (a, b)))
    return checks


def _splits_past_the_end(f, var: str) -> str:
    """What in f's schedule can write past the region asked for in var: its RoundUp splits (and
    the splits of the loops they make), named for the error message."""
    found, names = [], {var}
    for k, stage in enumerate(f._schedule.stages):
        for sp in stage.splits:
            if sp.kind == "split" and sp.old in names:
                names |= {sp.outer, sp.inner}
                if sp.tail == TailStrategy.RoundUp and sp.may_exceed_one():
                    old, outer, inner = (n.rsplit(".", 1)[-1] for n in (sp.old, sp.outer, sp.inner))
                    found.append(f"{'stage ' + str(k) + ' ' if k else ''}split({old}, {outer}, {inner}, "
                                 f"{expr_to_string(sp.factor_expr())}, {sp.tail})")
    if not found:
        return ""
    return (f" (Func {f.name()}'s {', '.join(found)} rounds {var} up to a multiple of the factor: realize a "
            f"multiple of it, or split with TailStrategy.GuardWithIf)")


def _resolved(e: ir.Expr, lets: dict) -> ir.Expr:
    """e with the lets it uses (and those they use) substituted."""
    while used := free_variables(e) & lets.keys():
        e = substitute({name: lets[name] for name in used}, e)
    return e


def _writes_beyond(buf: str, box: list, lets: list) -> bool:
    """Whether the written box may differ from the region asked for."""
    lets = dict(lets)
    for d, (lo, hi) in enumerate(box):
        bmin = buffer_field(buf, "min", d)
        bmax = ir.Sub(ir.Add(bmin, buffer_field(buf, "extent", d)), ir.make_const(Int(32), 1))
        if not (is_const(simplify(ir.Sub(_resolved(lo, lets), bmin)), 0)
                and is_const(simplify(ir.Sub(_resolved(hi, lets), bmax)), 0)):
            return True
    return False


def _output_checks(stmt, f, shadowed: set[str], lets: list, env) -> list[ir.Stmt]:
    out = _same_shape_checks(buffer_names(f), len(f._pure_args))
    box = box_touched(stmt, f.name(), include_provides=True, include_calls=False, for_checks=True)
    if box is None:  # nothing stored (every value undef): the buffer is left as it is
        return out
    written = [(iv.min, iv.max) for iv in
               (require_bounded(f, var, box[d], "its own stages") for d, var in enumerate(f._pure_args))]
    hints = [_splits_past_the_end(f, var) for var in f._pure_args]
    for buf in buffer_names(f):
        if _writes_beyond(buf, written, lets):
            env.grown_outputs[buf] = (lets, written)
        for d, (lo, hi) in enumerate(written):
            checks = _range_checks("Output", buf, d, lo, hi, shadowed)
            if hints[d]:
                checks = [ir.AssertStmt(c.condition, c.message + hints[d], c.args) for c in checks]
            out += checks
    return out


def _input_checks(stmt: ir.Stmt, shadowed: set[str]) -> list[ir.Stmt]:
    images, _ = collect_inputs(stmt)
    out = []
    for name in sorted(images):
        box = box_touched(stmt, name, for_checks=True)
        if box is None:
            continue
        for d, iv in enumerate(box):
            if iv.min is None or iv.max is None:
                raise CompileError(
                    f"Can't infer the region of input {name} the pipeline reads: dimension {d} is unbounded. "
                    f"Clamp the coordinates used to access {name} (or use a BoundaryConditions wrapper)."
                )
            out += _range_checks("Input", name, d, iv.min, iv.max, shadowed)
    return out


_INT32_MIN, _INT32_MAX = ir.make_const(I64, -(2**31)), ir.make_const(I64, 2**31 - 1)


def _is_int32_by_nature(e: ir.Expr) -> bool:
    """A 64-bit bound that holds an int32 value whatever happens: a constant in range, or a 32-bit
    name that is not a shadowed let (a parameter, a buffer field)."""
    c = ir.const_int(e)
    if c is not None:
        return -(2**31) <= c < 2**31
    return isinstance(e, ir.Cast) and isinstance(e.value, ir.Variable) and e.value.type == Int(32)


def _overflow_checks(stmt: ir.Stmt, shadowed: set[str]) -> list[ir.Stmt]:
    """The values the coordinates take a min, max or quotient of must be 32-bit
    integers (computed in 64 bits, over the shadows), else the 32-bit arithmetic wraps there,
    and the region the checks above cover is not the one the code reads or writes:
    `g[min(x * 2**28, 1000)]` reads g at -2**31 for x = 8. Halide leaves such an overflow
    undefined; pyhalide refuses it before anything runs. One check per side for the whole
    pipeline (a split's tail clamp puts one in nearly every coordinate), naming the coordinates."""
    # (a bound's id, of its canonical node, without its constant) -> (the node, the constant to
    # check with): bounds equal in value are one node, found in time linear in the graph (hashing
    # nested pyramid levels' bounds, DAGs, as trees took exponential time)
    lows: dict[int, tuple[ir.Expr, int]] = {}
    highs: dict[int, tuple[ir.Expr, int]] = {}
    where: dict[str, set[int]] = {}
    numbering = ValueNumbering()
    memo: dict = {}  # widened's, shared by all the bounds (they share subexpressions)
    for guard in index_guards(stmt):
        for bound, found in ((guard.interval.min, lows), (guard.interval.max, highs)):
            if bound is None:
                continue
            wide = widened(bound, shadowed, memo)
            if _is_int32_by_nature(wide):
                continue
            if guard.condition is not None:  # (a branch not taken asks nothing)
                wide = ir.Select(guard.condition, wide, ir.make_const(I64, 0))
            wide = numbering.canonical(wide)
            # `b + c` for several c: only the extreme c needs checking
            base, offset = (wide.a, ir.const_int(wide.b)) if isinstance(wide, ir.Add) and ir.is_const(wide.b) \
                else (wide, 0)
            pick = min if found is lows else max
            found[id(base)] = (base, pick(found.get(id(base), (base, offset))[1], offset))
            where.setdefault(guard.callee, set()).add(guard.dim)
    named = ", ".join(f"the bounds of loop {callee}" if None in dims else
                      f"{callee} (dimension {', '.join(map(str, sorted(dims)))})"
                      for callee, dims in sorted(where.items()))
    message = (f"A coordinate (of {named}) is computed through the value {{}}, which is beyond 32-bit "
               "integers: the index arithmetic would wrap (a signed 32-bit overflow)")
    checks = []
    for side, found, pick, holds in (("low", lows, ir.Min, lambda v: ir.GE(v, _INT32_MIN)),
                                     ("high", highs, ir.Max, lambda v: ir.LE(v, _INT32_MAX))):
        if found:
            extreme = functools.reduce(pick, (ir.Add(b, ir.make_const(I64, c)) if c else b for b, c in found.values()))
            # (the bounds of nested pyramid levels share subexpressions: as lets, each is computed once)
            name = f"coordinates.{side}$i64"
            value = ir.Variable(name, I64)
            checks.append(ir.LetStmt(name, common_subexpression_elimination(extreme, f"coordinates.{side}.shared"),
                                     ir.AssertStmt(holds(value), message, (value,))))
    return checks


def buffer_checks(stmt: ir.Stmt, env) -> ir.Stmt:
    lets = []
    while isinstance(stmt, ir.LetStmt):
        lets.append((stmt.name, stmt.value))
        stmt = stmt.body
    shadowed = shadows_of(lets)
    checks = _input_checks(stmt, shadowed)
    for f in env.outputs:
        checks.extend(_output_checks(stmt, f, shadowed, lets, env))
    checks.extend(_overflow_checks(stmt, shadowed))
    body = ir.make_block([*checks, stmt])
    for name, value in reversed(lets):
        body = ir.LetStmt(name, value, body)
    return body
