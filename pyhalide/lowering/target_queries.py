"""Target queries (`target_arch_is`, `target_bits`, `target_has_feature`, `target_os_is`,
`target_natural_vector_size`) become constants of the target being compiled for, as in Halide:
the same algorithm asks differently of each target (a specialize() on a feature, an RDom as
wide as the vector).

Assumes: inlining is done (inlined definitions may ask too). Guarantees: no target query
remains, so bounds inference and everything after see constants.
"""

from __future__ import annotations

from .. import ir
from ..ir_mutator import IRMutator
from ..target import TARGET_QUERY, answer_target_query


class _Resolve(IRMutator):
    def __init__(self, target):
        super().__init__()
        self.target = target

    def visit_Call(self, c):
        if c.call_type == ir.INTRINSIC and c.name == TARGET_QUERY:
            return answer_target_query(c, self.target)
        return self.default(c)


def resolve_target_queries(stmt: ir.Stmt, target) -> ir.Stmt:
    return _Resolve(target).mutate(stmt)
