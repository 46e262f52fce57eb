"""Specialise the lowered Stmt for buffers whose dimension 0 is dense (stride 1).

Assumes: the Stmt is lowered and simplified; the caller compiles it for one buffer layout, and the
pipeline checks at each call that those buffers really are dense. Guarantees: `b.stride.0` of each
dense buffer is the constant 1, and every expression that mentioned it is simplified again, so
unit-stride accesses become dense Ramps (vector loads and stores).
"""

from __future__ import annotations

from .. import ir
from ..ir_mutator import IRMutator, substitute
from ..simplify import simplify


def specialize_unit_strides(stmt, dense_buffers: list[str]):
    if not dense_buffers:
        return stmt
    one = ir.make_const(ir.Int(32), 1)
    return KnownValues({f"{name}.stride.0": one for name in dense_buffers}).mutate(stmt)


class KnownValues(IRMutator):
    """Variables replaced by constants, and each expression that mentioned one simplified again
    (on its own: the whole Stmt again costs up to a second)."""

    def __init__(self, values: dict):
        super().__init__()
        self.values = values
        self.memo: dict[int, tuple] = {}

    def mutate(self, node):
        if node is None:
            return None
        hit = self.memo.get(id(node))
        if hit is None:
            if isinstance(node, ir.Expr):
                new = substitute(self.values, node)
                result = node if new is node else simplify(new)
            else:
                result = super().mutate(node)
            hit = self.memo[id(node)] = (node, result)
        return hit[1]
