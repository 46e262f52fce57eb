"""Prefetches: each `prefetch` directive becomes loops of prefetch instructions.

Assumes: Realizes are sized and the buffer checks are made (a prefetch reads nothing: what it
fetches is neither required of producers nor checked against the inputs). Guarantees: at the top
of each iteration of the stage's loop `at`, for the box of `name` that the loop's body touches in
iteration `from + offset` of loop `from` (its inner loops as intervals), serial loops over the
box's outer dimensions and over its rows in steps of a cache line evaluate
`prefetch(name(coordinates))`: storage flattening makes that an address, code generation an
llvm.prefetch (one per vector lane inside vectorized loops; none at GPU loops: a kernel gets no
CPU cache hints). Where the box leaves the buffer (the Func's realization, or an input's or
output's buffer), it is clamped into it (Clamp), the prefetch skipped (GuardWithIf), or made
anyway (NonFaulting: a prefetch does not fault).
"""

from __future__ import annotations

from .. import ir
from ..bounds import box_touched
from ..errors import CompileError
from ..ir_mutator import IRMutator, substitute
from ..schedule import PrefetchBoundStrategy
from ..simplify import simplify
from ..types import Int
from .bounds_inference import buffer_field, buffer_names
from .environment import pipeline_inputs
from .schedule_functions import loop_name, stage_schedule

_I32 = Int(32)
CACHE_LINE = 64  # bytes


def _c(v: int) -> ir.Expr:
    return ir.make_const(_I32, v)


class _Inject(IRMutator):
    statements_only = True

    def __init__(self, env, at_loops: dict):
        super().__init__()
        self.env = env
        self.at_loops = at_loops  # loop name -> [(stage's Func, Prefetch, from loop name)]
        self.realized: dict[str, tuple] = {}  # Func name -> the bounds of its enclosing Realize

    def visit_Realize(self, r):
        saved = self.realized.get(r.name)
        self.realized[r.name] = r.bounds
        body = self.mutate(r.body)
        if saved is None:
            del self.realized[r.name]
        else:
            self.realized[r.name] = saved
        return r if body is r.body else ir.Realize(r.name, r.types, r.bounds, body, r.func, r.folds)

    def visit_For(self, s):
        body = self.mutate(s.body)
        if s.for_type in (ir.GPU_BLOCK, ir.GPU_THREAD, ir.GPU_LANE):  # a CPU cache hint: none in a kernel
            return s if body is s.body else ir.For(s.name, s.min, s.extent, s.for_type, body)
        fetches = [self._prefetch(f, p, from_loop, body, s) for f, p, from_loop in self.at_loops.get(s.name, [])]
        if fetches or body is not s.body:
            return ir.For(s.name, s.min, s.extent, s.for_type, ir.make_block([*fetches, body]))
        return s

    def _prefetch(self, f, p, from_loop: str, body: ir.Stmt, at: ir.For) -> ir.Stmt:
        where = f"Func {f.name()}: prefetch of {p.name} at {p.at} from {p.from_}"
        ahead = substitute({from_loop: ir.Add(ir.Variable(from_loop, _I32), _c(p.offset))}, body)
        box = box_touched(ahead, p.name, include_provides=True)
        if box is None:
            raise CompileError(f"{where}: the loop {p.at} does not use {p.name}")
        if any(iv.min is None or iv.max is None for iv in box):
            raise CompileError(f"{where}: the region of {p.name} it would fetch is unbounded")
        element, buffers, call = self._target(p.name, where)
        lo, hi = [iv.min for iv in box], [iv.max for iv in box]
        limits = self._limits(p.name, buffers[0], len(box))
        guard = None
        if p.strategy == PrefetchBoundStrategy.Clamp:
            lo = [ir.Min(ir.Max(a, b0), b1) for a, (b0, b1) in zip(lo, limits)]
            hi = [ir.Max(ir.Min(a, b1), b0) for a, (b0, b1) in zip(hi, limits)]
        elif p.strategy == PrefetchBoundStrategy.GuardWithIf:
            for a, b, (b0, b1) in zip(lo, hi, limits):
                inside = ir.And(ir.GE(a, b0), ir.LE(b, b1))
                guard = inside if guard is None else ir.And(guard, inside)
        stmts = []
        step = max(1, CACHE_LINE // element.bytes())
        prefix = f"{f.name()}.prefetch.{p.name}"
        for k in range(len(buffers)):  # (each buffer of a Tuple)
            coords = [ir.Variable(f"{prefix}.{d}", _I32) for d in range(len(box))]
            if coords:
                coords[0] = ir.Add(lo[0], ir.Mul(ir.Variable(f"{prefix}.line", _I32), _c(step)))
            s: ir.Stmt = ir.Evaluate(ir.Call(element, "prefetch", (call(coords, k),), ir.INTRINSIC))
            if coords:
                lines = ir.Div(ir.Add(ir.Sub(hi[0], lo[0]), _c(step)), _c(step))
                s = ir.For(f"{prefix}.line", _c(0), simplify(lines), ir.SERIAL, s)
            for d in range(1, len(box)):
                s = ir.For(f"{prefix}.{d}", lo[d], simplify(ir.Add(ir.Sub(hi[d], lo[d]), _c(1))), ir.SERIAL, s)
            stmts.append(s)
        result = ir.make_block(stmts)
        return result if guard is None else ir.IfThenElse(simplify(guard), result)

    def _target(self, name: str, where: str):
        """The element type, buffer names and a call maker of the Func or image prefetched."""
        g = self.env.funcs.get(name)
        if g is not None:
            if name in self.env.inlined:
                raise CompileError(f"{where}: {name} is inlined, so it has no buffer to prefetch")
            if name not in self.realized and not self.env.is_output(g):
                raise CompileError(f"{where}: {name} is not allocated there (it is stored inside that loop): "
                                   "prefetch it at a loop inside its store level, or store it further out")
            return g.types()[0], buffer_names(g), \
                lambda coords, k: ir.Call(g.types()[k], name, tuple(coords), ir.HALIDE, func=g, value_index=k)
        image = pipeline_inputs(self.env)[0].get(name)
        if image is None:
            raise CompileError(f"{where}: {name} is not a Func or an input image of this pipeline")
        return image.type(), [name], lambda coords, k: ir.Call(image.type(), name, tuple(coords), ir.IMAGE, image=image)

    def _limits(self, name: str, buffer: str, dims: int) -> list[tuple]:
        """(first, last) coordinate of each dimension of the buffer: the Func's Realize, else the
        buffer the pipeline is given (an input or an output)."""
        bounds = self.realized.get(name)
        if bounds is not None:
            return [(lo, ir.Sub(ir.Add(lo, ext), _c(1))) for lo, ext in bounds]
        return [(buffer_field(buffer, "min", d),
                 ir.Sub(ir.Add(buffer_field(buffer, "min", d), buffer_field(buffer, "extent", d)), _c(1)))
                for d in range(dims)]


def inject_prefetches(stmt: ir.Stmt, env) -> ir.Stmt:
    at_loops: dict[str, list] = {}
    for f in env.order:
        for s in range(len(f.definitions())):
            sched = stage_schedule(f, s)
            for special in [sched, *(sp for _, sp in sched.specializations)]:
                for p in special.prefetches:
                    at, from_ = special.find(p.at), special.find(p.from_)
                    entry = (f, p, loop_name(f, s, from_.internal))
                    fetches = at_loops.setdefault(loop_name(f, s, at.internal), [])
                    if entry not in fetches:  # (specializations copy the stage's prefetches)
                        fetches.append(entry)
    return _Inject(env, at_loops).mutate(stmt) if at_loops else stmt
