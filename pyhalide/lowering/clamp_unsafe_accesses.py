"""Clamp unsafe accesses: a Func's value used as a coordinate is clamped to the values its
definition can take, as Halide's clamp_unsafe_accesses.

Bounds inference sizes what `g(h(x))` reads of g by the values h can take (its function value
bounds: `h(x) = clamp(x, 0, 9)` reads g over [0, 9]). Where h's storage holds points h did not
compute (a consumer's RoundUp split or vector tail reads past the region h was computed for),
the value read there is whatever the memory held, and as a coordinate it could reach past g's
storage. Clamping such a call of h to its value bounds keeps every coordinate where bounds
inference said; where h is computed inside the consumer's own production, what it computed
covers every read and no clamp is needed.

Assumes: runs after inlining, before bounds inference. Guarantees: a call of a Func whose value
bounds are narrower than its type, made (directly or through a let) inside another call's
coordinates, is clamped to those bounds unless that Func is realized inside the production
being built.
"""

from __future__ import annotations

from .. import ir
from ..bounds import func_value_bounds, narrower_than_type
from ..ir_mutator import IRMutator, has_call


def clamp_unsafe_accesses(stmt: ir.Stmt) -> ir.Stmt:
    return _Clamp().mutate(stmt)


class _Clamp(IRMutator):
    def __init__(self):
        super().__init__()
        self.indexing = False  # inside a Func's or an image's coordinates
        self.realized_in_production: list[str] = []
        self.lets_in_indexing: dict[str, bool] = {}  # let name -> used inside coordinates

    def mutate(self, node):
        if isinstance(node, ir.Expr) and not has_call(node) and not (self.indexing and isinstance(node, ir.Variable)):
            return node  # (no call below: nothing to clamp, no let to mark but a variable itself)
        return super().mutate(node)

    def visit_ProducerConsumer(self, s):
        if not s.is_producer:
            return self.default(s)
        saved, self.realized_in_production = self.realized_in_production, []
        try:
            return self.default(s)
        finally:
            self.realized_in_production = saved

    def visit_Realize(self, s):
        self.realized_in_production.append(s.name)
        try:
            return self.default(s)
        finally:
            self.realized_in_production.pop()

    def visit_Variable(self, v):
        if self.indexing and v.name in self.lets_in_indexing:
            self.lets_in_indexing[v.name] = True
        return v

    def _let(self, node, make):
        saved = self.lets_in_indexing.get(node.name)
        self.lets_in_indexing[node.name] = False
        body = self.mutate(node.body)
        used = self.lets_in_indexing.pop(node.name)
        if saved is not None:
            self.lets_in_indexing[node.name] = saved
        outer, self.indexing = self.indexing, self.indexing or used
        value = self.mutate(node.value)
        self.indexing = outer
        return node if value is node.value and body is node.body else make(node.name, value, body)

    def visit_Let(self, e):
        return self._let(e, ir.Let)

    def visit_LetStmt(self, s):
        return self._let(s, ir.LetStmt)

    def visit_Call(self, c):
        if c.call_type == ir.HALIDE and self.indexing and c.func is not None \
                and c.name not in self.realized_in_production:
            bounds = func_value_bounds(c.func, c.value_index)
            if narrower_than_type(bounds, c.type):
                args = tuple(self.mutate(a) for a in c.args)
                call = c if all(a is b for a, b in zip(args, c.args)) else \
                    ir.Call(c.type, c.name, args, c.call_type, c.value_index, c.func, c.image)
                return ir.Max(ir.Min(call, bounds.max), bounds.min)
        outer = self.indexing
        self.indexing = outer or c.call_type in (ir.HALIDE, ir.IMAGE)
        try:
            return self.default(c)
        finally:
            self.indexing = outer
