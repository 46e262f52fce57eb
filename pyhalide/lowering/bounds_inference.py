"""Bounds inference: define every `f.s<k>.<var>.min/.max`, and check inputs and outputs.

Assumes: the nest from schedule_functions, with inlining done. Consumers are processed before
their producers, so the region a producer must compute is the box of its calls in its consume
body, written in terms of its consumers' (already defined) bounds. For a Func with updates, the
pure stage also covers what the updates read and write of it. All lets go at the top of the
pipeline, followed by the entry checks: input buffers must cover the box the pipeline reads, and
the region computed of each output must lie inside its buffer. Nothing is computed before them.
"""

from __future__ import annotations

from .. import ir
from ..bounds import Interval, box_touched
from ..errors import CompileError
from ..ir_mutator import IRVisitor
from ..simplify import simplify
from ..types import Int
from .schedule_functions import dim_bound, stage_dims


def buffer_names(f) -> list[str]:
    """Names of the buffers holding f's values: f itself, or f.0, f.1 ... for Tuples."""
    n = len(f.types())
    return [f.name()] if n == 1 else [f"{f.name()}.{k}" for k in range(n)]


def buffer_field(buffer: str, field: str, dim: int) -> ir.Variable:
    return ir.Variable(f"{buffer}.{field}.{dim}", Int(32))


class _FindProduceConsume(IRVisitor):
    def __init__(self, name: str):
        super().__init__()
        self.name = name
        self.produce = None
        self.consume = None

    def visit_ProducerConsumer(self, pc):
        if pc.name == self.name:
            if pc.is_producer:
                self.produce = pc
            else:
                self.consume = pc
        self.visit_children(pc)


def _require(f, dim_name: str, iv: Interval, who: str) -> Interval:
    if iv.min is None or iv.max is None:
        side = "below" if iv.min is None else "above"
        raise CompileError(
            f"Can't infer the region of {f.name()} required by {who}: dimension {dim_name} is unbounded "
            f"{side}. Clamp the coordinates used to access {f.name()}."
        )
    return iv


def bounds_inference(stmt: ir.Stmt, env) -> ir.Stmt:
    lets: list[tuple[str, ir.Expr]] = []
    checks: list[ir.Stmt] = []
    one = ir.make_const(Int(32), 1)
    for f in reversed(env.order):
        finder = _FindProduceConsume(f.name())
        finder.visit(stmt)
        box = box_touched(finder.consume.body, f.name()) if finder.consume is not None else None
        required: list[Interval] = []
        for d, var in enumerate(f._pure_args):
            iv = box[d] if box is not None else None
            if env.is_output(f):
                out = buffer_names(f)[0]
                lo = buffer_field(out, "min", d)
                hi = ir.Sub(ir.Add(lo, buffer_field(out, "extent", d)), one)
                if iv is not None:
                    _require(f, var, iv, "the other outputs")
                    lo, hi = ir.Min(lo, iv.min), ir.Max(hi, iv.max)
                iv = Interval(lo, hi)
            elif iv is None:
                raise CompileError(f"Func {f.name()} is realized but never used")
            required.append(_require(f, var, iv, "its consumers"))
        for d, var in enumerate(f._pure_args):
            lets.append((f"{f.name()}.{var}.min", simplify(required[d].min)))
            lets.append((f"{f.name()}.{var}.max", simplify(required[d].max)))
        req_var = {
            var: (ir.Variable(f"{f.name()}.{var}.min", Int(32)), ir.Variable(f"{f.name()}.{var}.max", Int(32)))
            for var in f._pure_args
        }
        n_stages = len(f.definitions())
        for s in range(1, n_stages):
            for var, pure in stage_dims(f, s):
                if pure:
                    lets.append((dim_bound(f, s, var, "min").name, req_var[var][0]))
                    lets.append((dim_bound(f, s, var, "max").name, req_var[var][1]))
        footprint = None
        if n_stages > 1:
            updates = ir.make_block(finder.produce.body.stmts[1:])
            footprint = box_touched(updates, f.name(), include_provides=True)
        for d, var in enumerate(f._pure_args):
            lo, hi = req_var[var]
            if footprint is not None:
                iv = _require(f, var, footprint[d], "its own update definitions")
                lo, hi = simplify(ir.Min(lo, iv.min)), simplify(ir.Max(hi, iv.max))
            lets.append((dim_bound(f, 0, var, "min").name, lo))
            lets.append((dim_bound(f, 0, var, "max").name, hi))
        if env.is_output(f):
            checks.extend(_output_checks(f))
    checks = _input_checks(stmt, env) + checks
    body = ir.make_block([*checks, stmt])
    for name, value in reversed(lets):
        body = ir.LetStmt(name, value, body)
    return body


def _range_checks(kind: str, buffer: str, dim: int, lo: ir.Expr, hi: ir.Expr) -> list[ir.Stmt]:
    bmin = buffer_field(buffer, "min", dim)
    bmax = ir.Sub(ir.Add(bmin, buffer_field(buffer, "extent", dim)), ir.make_const(Int(32), 1))
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


def _output_checks(f) -> list[ir.Stmt]:
    out = []
    for buf in buffer_names(f):
        for d, var in enumerate(f._pure_args):
            out += _range_checks("Output", buf, d, dim_bound(f, 0, var, "min"), dim_bound(f, 0, var, "max"))
    return out


def _input_checks(stmt: ir.Stmt, env) -> list[ir.Stmt]:
    from .environment import collect_inputs

    images, _ = collect_inputs(stmt)
    out = []
    for name in sorted(images):
        box = box_touched(stmt, name)
        if box is None:
            continue
        for d, iv in enumerate(box):
            if iv.min is None or iv.max is None:
                raise CompileError(
                    f"Can't infer the region of input {name} the pipeline reads: dimension {d} is unbounded. "
                    f"Clamp the coordinates used to access {name} (or use a BoundaryConditions wrapper)."
                )
            out += _range_checks("Input", name, d, iv.min, iv.max)
    return out
