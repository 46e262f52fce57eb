"""Allocation bounds: give each Realize the box its Func's stages write inside it.

Assumes: every stage's loop bounds are final (bounds inference, then sliding window, which moves
where each iteration starts). Guarantees: every Provide to f lies inside f's Realize, over all
iterations of the loops between its store and compute levels, including iterations a split runs
past its guard.
"""

from __future__ import annotations

from .. import ir
from ..bounds import box_touched
from ..ir_mutator import IRMutator
from ..simplify import simplify
from ..types import Int
from .bounds_inference import require_bounded

_ONE = ir.make_const(Int(32), 1)


class _SizeRealizes(IRMutator):
    statements_only = True
    def visit_Realize(self, r):
        body = self.mutate(r.body)
        f = r.func
        box = box_touched(body, r.name, include_provides=True, include_calls=False)
        bounds = []
        for d, var in enumerate(f._pure_args):
            iv = require_bounded(f, var, box[d] if box else None, "the storage of its own stages")
            bounds.append((iv.min, simplify(ir.Add(ir.Sub(iv.max, iv.min), _ONE))))
        return ir.Realize(r.name, r.types, tuple(bounds), body, r.func, r.folds)


def allocation_bounds(stmt: ir.Stmt) -> ir.Stmt:
    return _SizeRealizes().mutate(stmt)
