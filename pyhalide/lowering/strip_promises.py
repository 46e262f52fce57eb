"""Drop the promises bounds inference relied on (`promise_clamped(value, min, max)` -> value).

Assumes: bounds inference and sliding window are done. Guarantees: no promise_clamped remains, so
later passes (the vectorizer looking for dense Ramps) see the plain index arithmetic.
"""

from __future__ import annotations

from .. import ir
from ..ir_mutator import IRMutator


class _Strip(IRMutator):
    def visit_Call(self, c):
        if c.call_type == ir.INTRINSIC and c.name == "promise_clamped":
            return self.mutate(c.args[0])
        return self.default(c)


def strip_promises(stmt: ir.Stmt) -> ir.Stmt:
    return _Strip().mutate(stmt)
