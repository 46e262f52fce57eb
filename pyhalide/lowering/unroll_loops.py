"""Unroll loops marked unrolled: one copy of the body per iteration, the variable bound by a let.

Assumes: extents have been simplified. Guarantees: no unrolled For remains. An extent that is a
constant once the enclosing lets are substituted (a producer's region `max - min + 1` computed
per iteration of an outer loop) unrolls to that many copies; an extent with only a constant upper
bound unrolls to that many copies, each guarded by `i < extent` (as Halide does); any other is an
error naming the loop.
"""

from __future__ import annotations

from .. import ir
from ..bounds import Interval, bounds_of_expr, constant_bound
from ..errors import CompileError
from ..ir_mutator import IRMutator, binding, substitute_lets
from ..ir_printer import expr_to_string
from ..simplify import simplify


class _Unroll(IRMutator):
    statements_only = True

    def __init__(self):
        super().__init__()
        self.lets: dict[str, ir.Expr] = {}  # enclosing LetStmts
        self.loops: dict[str, ir.For] = {}  # enclosing loops

    def visit_LetStmt(self, s):
        with binding(self.lets, s.name, s.value):
            body = self.mutate(s.body)
        return s if body is s.body else ir.LetStmt(s.name, s.value, body)

    def visit_For(self, s):
        with binding(self.loops, s.name, s):
            body = self.mutate(s.body)
        if s.for_type != ir.UNROLLED:
            return s if body is s.body else ir.For(s.name, s.min, s.extent, s.for_type, body)
        extent, guarded = self._constant_extent(s)
        copies = []
        for i in range(extent):
            copy = body
            if guarded:
                copy = ir.IfThenElse(ir.LT(ir.make_const(s.extent.type, i), s.extent), copy, None)
            copies.append(ir.LetStmt(s.name, ir.Add(s.min, ir.make_const(s.min.type, i)), copy))
        return ir.make_block(copies)

    def _constant_extent(self, s) -> tuple[int, bool]:
        """(copies, whether each needs a guard)."""
        extent = ir.const_int(s.extent)
        if extent is not None:
            return extent, False
        e = simplify(substitute_lets(s.extent, self.lets))
        extent = ir.const_int(e)
        if extent is not None:
            return extent, False
        most = constant_bound(e, upper=True)
        if most is None:  # through the enclosing loops' ranges
            ranges = {name: Interval(loop.min, simplify(ir.Add(loop.min, ir.Sub(loop.extent, ir.make_const(
                loop.extent.type, 1))))) for name, loop in self.loops.items()}
            bound = bounds_of_expr(e, ranges).max
            most = None if bound is None else constant_bound(simplify(bound), upper=True)
        if most is None:
            raise CompileError(f"Can't unroll loop {s.name}: its extent ({expr_to_string(s.extent)}) is not a "
                               "constant and has no constant upper bound. "
                               "Split it by a constant factor first (unroll(x, n)).")
        return max(most, 0), True


def unroll_loops(stmt: ir.Stmt) -> ir.Stmt:
    return _Unroll().mutate(stmt)
