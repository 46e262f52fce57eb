"""Allocation bounds: give each Realize the box its Func's stages write inside it.

Assumes: every stage's loop bounds are final (bounds inference, then sliding window, which moves
where each iteration starts). Guarantees: every Provide to f lies inside f's Realize, over all
iterations of the loops between its store and compute levels, including iterations a split runs
past its guard. Each Realize is preceded by a check, in 64 bits, that its box holds at most 2^31-1
elements (indices into it are 32-bit); a constant box too large is refused when compiling. Every
Int(32) let gets its 64-bit shadow here (wide_bounds), for this check and the buffer checks.
"""

from __future__ import annotations

from .. import ir
from ..bounds import box_touched
from ..buffer import MAX_ELEMENTS
from ..errors import CompileError
from ..ir_mutator import IRMutator
from ..simplify import simplify
from ..types import Int
from .bounds_inference import require_bounded
from .wide_bounds import I64, widened, with_shadow

_ONE = ir.make_const(Int(32), 1)
_ONE64, _CAP = ir.make_const(I64, 1), ir.make_const(I64, MAX_ELEMENTS + 1)


def _size_check(name: str, box, shadowed: set[str]) -> ir.Stmt | None:
    """Assert that the box's element count, saturated at 2^31 so that it cannot wrap, fits 32-bit indices."""
    count = _ONE64
    for lo, hi in box:
        extent = ir.Max(ir.Add(ir.Sub(widened(hi, shadowed), widened(lo, shadowed)), _ONE64), ir.make_const(I64, 0))
        count = ir.Min(ir.Mul(count, ir.Min(extent, _CAP)), _CAP)
    count = simplify(count)
    n = ir.const_int(count)
    if n is not None:
        if n > MAX_ELEMENTS:
            raise CompileError(f"Total allocation for buffer {name} is at least {n} elements, which exceeds the "
                               f"maximum of {MAX_ELEMENTS} (index arithmetic is 32-bit)")
        return None
    return ir.AssertStmt(ir.LE(count, ir.make_const(I64, MAX_ELEMENTS)),
                         f"Total allocation for buffer {name} is at least {{}} elements, which exceeds the maximum "
                         f"of {MAX_ELEMENTS} (index arithmetic is 32-bit)", (count,))


class _SizeRealizes(IRMutator):
    statements_only = True

    def __init__(self):
        super().__init__()
        self.shadowed: set[str] = set()  # the lets in scope that have 64-bit shadows

    def visit_LetStmt(self, s):
        outer = set(self.shadowed)
        if s.value.type == Int(32):
            self.shadowed.add(s.name)
        else:
            self.shadowed.discard(s.name)
        body = self.mutate(s.body)
        self.shadowed = outer
        return with_shadow(s, body, outer)

    def visit_Realize(self, r):
        body = self.mutate(r.body)
        f = r.func
        box = box_touched(body, r.name, include_provides=True, include_calls=False)
        bounds, extremes = [], []
        for d, var in enumerate(f._pure_args):
            iv = require_bounded(f, var, box[d] if box else None, "the storage of its own stages")
            bounds.append((iv.min, simplify(ir.Add(ir.Sub(iv.max, iv.min), _ONE))))
            extremes.append((iv.min, iv.max))
        realize = ir.Realize(r.name, r.types, tuple(bounds), body, r.func, r.folds)
        check = _size_check(r.name, extremes, self.shadowed)
        return realize if check is None else ir.make_block([check, realize])


def allocation_bounds(stmt: ir.Stmt) -> ir.Stmt:
    return _SizeRealizes().mutate(stmt)
