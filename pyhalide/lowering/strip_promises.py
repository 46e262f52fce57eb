"""Drop the promises bounds inference relied on (`promise_clamped(value, min, max)`, the user's
`unsafe_promise_clamped(value, min, max)`, `within_region(value, min, max)` and
`predicate_loads(cond)` -> value).

Assumes: bounds inference and sliding window are done. Guarantees: no promise_clamped remains, so
later passes (the vectorizer looking for dense Ramps) see the plain index arithmetic. With the
target feature check_unsafe_promises, each unsafe_promise_clamped becomes a `require` of the
promise instead (Halide's lower_unsafe_promises): a broken promise stops the pipeline with
"Requirement Failed: (...) from unsafe_promise_clamped".
"""

from __future__ import annotations

from .. import ir
from ..bounds import PREDICATE_LOADS, UNSAFE_PROMISE_CLAMPED, WITHIN_REGION
from ..ir_mutator import IRMutator, has_call
from ..ir_printer import expr_to_string

_PROMISES = frozenset(("promise_clamped", UNSAFE_PROMISE_CLAMPED, WITHIN_REGION, PREDICATE_LOADS))


class _Strip(IRMutator):
    def __init__(self, check_unsafe: bool = False):
        super().__init__()
        self.memo: dict[int, tuple] = {}
        self.check_unsafe = check_unsafe

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
        if c.call_type == ir.INTRINSIC and c.name == UNSAFE_PROMISE_CLAMPED and self.check_unsafe:
            value, lo, hi = (self.mutate(a) for a in c.args[:3])
            held = ir.And(ir.GE(value, lo), ir.LE(value, hi))
            text = f"({expr_to_string(held)}) from unsafe_promise_clamped".replace("{", "{{").replace("}", "}}")
            return ir.Call(c.type, "require", (held, value, ir.StringImm("Requirement Failed: " + text)), ir.INTRINSIC)
        if c.call_type == ir.INTRINSIC and c.name in _PROMISES:
            return self.mutate(c.args[0])
        return self.default(c)


def strip_promises(stmt: ir.Stmt, check_unsafe: bool = False) -> ir.Stmt:
    """check_unsafe: the target has check_unsafe_promises (see the module's docstring)."""
    return _Strip(check_unsafe).mutate(stmt)
