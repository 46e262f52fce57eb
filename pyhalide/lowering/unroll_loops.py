"""Unroll loops marked unrolled: one copy of the body per iteration, the variable bound by a let.

Assumes: extents have been simplified. Guarantees: no unrolled For remains. An extent that is a
constant once the enclosing lets are substituted (a producer's region `max - min + 1` computed
per iteration of an outer loop) unrolls to that many copies; an extent with only a constant upper
bound unrolls to that many copies, each guarded by `i < extent` (as Halide does); any other is an
error naming the loop.
"""

from __future__ import annotations

from .. import ir
from ..bounds import Interval, bounds_of_expr
from ..errors import CompileError
from ..ir_mutator import IRMutator, free_variables, substitute
from ..ir_printer import expr_to_string
from ..simplify import simplify

_SUBSTITUTION_ROUNDS = 8  # lets of lets: a region's extent names its min and max, which name loop variables


class _Unroll(IRMutator):
    statements_only = True

    def __init__(self):
        super().__init__()
        self.lets: dict[str, ir.Expr] = {}  # enclosing LetStmts
        self.loops: dict[str, Interval] = {}  # enclosing loops' ranges

    def visit_LetStmt(self, s):
        outer = self.lets.get(s.name)
        self.lets[s.name] = s.value
        body = self.mutate(s.body)
        if outer is None:
            del self.lets[s.name]
        else:
            self.lets[s.name] = outer
        return s if body is s.body else ir.LetStmt(s.name, s.value, body)

    def visit_For(self, s):
        outer = self.loops.get(s.name)
        self.loops[s.name] = Interval(s.min, simplify(ir.Add(s.min, ir.Sub(s.extent, ir.make_const(s.extent.type, 1)))))
        try:
            body = self.mutate(s.body)
        finally:
            if outer is None:
                del self.loops[s.name]
            else:
                self.loops[s.name] = outer
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
        e = s.extent
        for _ in range(_SUBSTITUTION_ROUNDS):
            known = {k: self.lets[k] for k in free_variables(e) if k in self.lets}
            if not known:
                break
            e = substitute(known, e)
        e = simplify(e)
        extent = ir.const_int(e)
        if extent is not None:
            return extent, False
        bound = bounds_of_expr(e, dict(self.loops)).max
        most = None if bound is None else _constant_bound(simplify(bound), upper=True)
        if most is None:
            raise CompileError(f"Can't unroll loop {s.name}: its extent ({expr_to_string(s.extent)}) is not a "
                               "constant and has no constant upper bound. "
                               "Split it by a constant factor first (unroll(x, n)).")
        return max(most, 0), True


def _constant_bound(e: ir.Expr, upper: bool) -> int | None:
    """A constant that e never exceeds (upper) or never falls below, where its shape shows one:
    the max of a region clamped by a min (a GuardWithIf tail) has one, whatever the other side."""
    value = ir.const_int(e)
    if value is not None:
        return value
    if isinstance(e, (ir.Min, ir.Max)):
        a, b = _constant_bound(e.a, upper), _constant_bound(e.b, upper)
        if isinstance(e, ir.Min) == upper:  # the upper bound of a min (lower of a max): either side's
            known = [v for v in (a, b) if v is not None]
            return (min if upper else max)(known) if known else None
        return None if a is None or b is None else (max if upper else min)(a, b)
    if isinstance(e, ir.Add):
        a, b = _constant_bound(e.a, upper), _constant_bound(e.b, upper)
        return None if a is None or b is None else a + b
    if isinstance(e, ir.Sub):
        a, b = _constant_bound(e.a, upper), _constant_bound(e.b, not upper)
        return None if a is None or b is None else a - b
    if isinstance(e, ir.Select):
        a, b = _constant_bound(e.true_value, upper), _constant_bound(e.false_value, upper)
        return None if a is None or b is None else (max if upper else min)(a, b)
    return None


def unroll_loops(stmt: ir.Stmt) -> ir.Stmt:
    return _Unroll().mutate(stmt)
