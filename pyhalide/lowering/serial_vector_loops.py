"""Vectorized loops become serial loops, for the C backend (compile_to_c).

The C source is scalar and portable: a loop the schedule vectorizes is printed as a loop over its
lanes, which computes the same (a vectorized loop means what the serial loop means) and which C
compilers vectorize where the target has vectors. Runs where vectorize_loops would.
"""

from __future__ import annotations

from .. import ir
from ..ir_mutator import IRMutator


class _SerialVectorLoops(IRMutator):
    statements_only = True

    def visit_For(self, s):
        body = self.mutate(s.body)
        for_type = ir.SERIAL if s.for_type == ir.VECTORIZED else s.for_type
        if body is s.body and for_type == s.for_type:
            return s
        return ir.For(s.name, s.min, s.extent, for_type, body)


def serial_vector_loops(stmt: ir.Stmt) -> ir.Stmt:
    return _SerialVectorLoops().mutate(stmt)
