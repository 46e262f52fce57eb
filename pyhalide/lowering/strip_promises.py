"""Drop the promises bounds inference relied on (`promise_clamped(value, min, max)`, the user's
`unsafe_promise_clamped(value, min, max)`, `within_region(value, min, max)` and
`predicate_loads(cond)` -> value).

Assumes: bounds inference and sliding window are done. Guarantees: no promise_clamped remains, so
later passes (the vectorizer looking for dense Ramps) see the plain index arithmetic.
"""

from __future__ import annotations

from .. import ir
from ..bounds import PREDICATE_LOADS, UNSAFE_PROMISE_CLAMPED, WITHIN_REGION
from ..ir_mutator import IRMutator, has_call

_PROMISES = frozenset(("promise_clamped", UNSAFE_PROMISE_CLAMPED, WITHIN_REGION, PREDICATE_LOADS))


class _Strip(IRMutator):
    def __init__(self):
        super().__init__()
        self.memo: dict[int, tuple] = {}

    def mutate(self, node):
        # an expression's result depends on it alone: shared subtrees are stripped once
        if not isinstance(node, ir.Expr):
            return super().mutate(node)
        if not has_call(node):
            return node  # no call, so no promise
        hit = self.memo.get(id(node))
        if hit is not None:
            return hit[1]
        result = super().mutate(node)
        self.memo[id(node)] = (node, result)  # keeps node alive, so its id stays unique
        return result

    def visit_Call(self, c):
        if c.call_type == ir.INTRINSIC and c.name in _PROMISES:
            return self.mutate(c.args[0])
        return self.default(c)


def strip_promises(stmt: ir.Stmt) -> ir.Stmt:
    return _Strip().mutate(stmt)
