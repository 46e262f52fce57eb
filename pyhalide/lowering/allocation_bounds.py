"""Allocation bounds: give each Realize the box its Func's stages write inside it.

Assumes: every stage's loop bounds are final (bounds inference, then sliding window, which moves
where each iteration starts). Guarantees: every Provide to f lies inside f's Realize, over all
iterations of the loops between its store and compute levels, including iterations a split runs
past its guard; so does every call of f, where a consumer reads f past the region f computes
(env.read_past_region); a dimension given align_storage starts and ends on its alignment. Each
Realize outside the loops is preceded by a check, in 64 bits, that its box holds at most 2^31-1
elements (indices into it are 32-bit); a constant box too large is refused when compiling. Every
Int(32) let outside the loops gets its 64-bit shadow here (wide_bounds), for this check and the
buffer checks.
"""

from __future__ import annotations

from .. import ir
from ..bounds import Interval, box_touched, interval_union
from ..buffer import MAX_ELEMENTS
from ..errors import CompileError
from ..ir_mutator import IRMutator, free_variables
from ..simplify import simplify
from ..types import Int
from .bounds_inference import read_bound, require_bounded
from .wide_bounds import I64, widened, with_shadow

_ONE = ir.make_const(Int(32), 1)
_ONE64, _CAP = ir.make_const(I64, 1), ir.make_const(I64, MAX_ELEMENTS + 1)


def _extent64(lo: ir.Expr, hi: ir.Expr, extent: ir.Expr, shadowed: set[str]) -> ir.Expr:
    """One dimension's extent in 64 bits. A constant box is worked out exactly from its ends
    (constant folding in 32 bits would wrap); otherwise the simplified 32-bit extent is computed
    in 64 bits, which is as exact (the simplifier's rules hold in exact arithmetic) and far
    shorter than the box's own ends."""
    if not free_variables(lo) and not free_variables(hi):
        return simplify(ir.Add(ir.Sub(widened(hi, shadowed), widened(lo, shadowed)), _ONE64))
    return widened(extent, shadowed)


def _size_check(name: str, box, shadowed: set[str]) -> ir.Stmt | None:
    """Assert that the box's element count, saturated at 2^31 so that it cannot wrap, fits 32-bit
    indices. box: (min, max, simplified extent) per dimension."""
    extents = [_extent64(lo, hi, extent, shadowed) for lo, hi, extent in box]
    constants = [ir.const_int(e) for e in extents]
    if None not in constants:  # known now: refuse or pass when compiling
        n = 1
        for c in constants:
            n *= max(c, 0)
        if n > MAX_ELEMENTS:
            raise CompileError(f"Total allocation for buffer {name} is at least {n} elements, which exceeds the "
                               f"maximum of {MAX_ELEMENTS} (index arithmetic is 32-bit)")
        return None
    count = _ONE64
    for extent in extents:  # saturated, so the product cannot wrap 64 bits either
        count = ir.Min(ir.Mul(count, ir.Min(ir.Max(extent, ir.make_const(I64, 0)), _CAP)), _CAP)
    elements = ir.Variable(f"{name}.elements$i64", I64)  # named once: the condition and the message use it
    check = ir.AssertStmt(ir.LE(elements, ir.make_const(I64, MAX_ELEMENTS)),
                          f"Total allocation for buffer {name} is at least {{}} elements, which exceeds the maximum "
                          f"of {MAX_ELEMENTS} (index arithmetic is 32-bit)", (elements,))
    return ir.LetStmt(elements.name, count, check)


def _aligned(iv: Interval, alignment: ir.Expr) -> Interval:
    """iv widened to start at a multiple of alignment and to span a multiple of it (align_storage)."""
    lo = simplify(ir.Mul(ir.Div(iv.min, alignment), alignment))
    chunks = ir.Add(ir.Div(ir.Sub(iv.max, lo), alignment), _ONE)
    return Interval(lo, simplify(ir.Sub(ir.Add(lo, ir.Mul(chunks, alignment)), _ONE)))


class _SizeRealizes(IRMutator):
    statements_only = True

    def __init__(self, read_past_region: set[str]):
        super().__init__()
        self.read_past_region = read_past_region  # Funcs whose reads count too (not only writes)
        self.in_scope: list[str] = []  # the names of the lets around the statement being visited
        self.shadowed: set[str] = set()  # the lets in scope that have 64-bit shadows
        self.loops = 0  # Fors around the statement being visited

    def visit_For(self, s):
        self.loops += 1
        result = self.default(s)
        self.loops -= 1
        return result

    def visit_LetStmt(self, s):
        self.in_scope.append(s.name)
        try:
            return self._let(s)
        finally:
            self.in_scope.pop()

    def _let(self, s):
        if self.loops:  # checks are made outside loops only, so only the lets there need shadows
            return self.default(s)
        was_shadowed = s.name in self.shadowed
        (self.shadowed.add if s.value.type == Int(32) else self.shadowed.discard)(s.name)
        body = self.mutate(s.body)
        (self.shadowed.add if was_shadowed else self.shadowed.discard)(s.name)
        return with_shadow(s, body, self.shadowed)

    def visit_Realize(self, r):
        body = self.mutate(r.body)
        f = r.func
        # What iterations past a stage's region read (bounds.WITHIN_REGION) was not computed,
        # but lies in the storage all the same.
        box = box_touched(body, r.name, include_provides=True, include_calls=False)
        if f.name() in self.read_past_region:
            box = self._with_reads(body, r.name, f, box)
        bounds, sized, checks = [], [], []
        for d, var in enumerate(f._pure_args):
            iv = require_bounded(f, var, box[d] if box else None, "the storage of its own stages")
            if var in f._schedule.aligns:
                iv = _aligned(iv, ir.make_const(Int(32), f._schedule.aligns[var]))
            extent = simplify(ir.Add(ir.Sub(iv.max, iv.min), _ONE))
            if var in f._schedule.storage_bounds:
                extent = self._storage_bound(f, var, extent, checks)
                iv = Interval(iv.min, simplify(ir.Sub(ir.Add(iv.min, extent), _ONE)))
            bounds.append((iv.min, extent))
            sized.append((iv.min, iv.max, extent))
        realize = ir.Realize(r.name, r.types, tuple(bounds), body, r.func, r.folds)
        # Outside loops only: there a region is a function of the pipeline's inputs and sizes
        # (where `x * p` wraps); inside, the boxes are long expressions of the loop variables and
        # checking each in 64 bits doubled the lowering time of the deepest apps.
        check = None if self.loops else _size_check(r.name, sized, self.shadowed)
        return ir.make_block([*checks, *([check] if check is not None else []), realize])

    @staticmethod
    def _storage_bound(f, var: str, needed: ir.Expr, checks: list) -> ir.Expr:
        """bound_storage's extent for var, with Halide's check, when the pipeline runs, that the
        stages need no more than it (the lets that would show a constant need are not in scope
        here; where the check is sure to fail, Halide also fails only when it runs)."""
        bound = f._schedule.storage_bounds[var]
        fits = simplify(ir.LE(needed, bound))
        if not ir.is_const(fits, 1):
            checks.append(ir.AssertStmt(fits, f"The explicit allocation bound ({{}}) of dimension {var} of {f.name()} "
                                        "is too small to store the required region ({}).", (bound, needed)))
        return bound


    def _with_reads(self, body, name: str, f, box):
        """The box also covering what f's consumers read (bounds_inference.read_bound names it
        where the Realize is inside those lets; elsewhere the reads in body are walked)."""
        read = [(read_bound(f.name(), v, "min"), read_bound(f.name(), v, "max")) for v in f._pure_args]
        if not all(lo.name in self.in_scope and hi.name in self.in_scope for lo, hi in read):
            return box_touched(body, name, include_provides=True)
        if box is None:
            return [Interval(lo, hi) for lo, hi in read]
        return [interval_union(iv, Interval(lo, hi)) for iv, (lo, hi) in zip(box, read)]


def allocation_bounds(stmt: ir.Stmt, read_past_region: set[str]) -> ir.Stmt:
    return _SizeRealizes(read_past_region).mutate(stmt)
