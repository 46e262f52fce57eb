"""Inside GPU loops, vectorized loops become unrolled ones (CUDA targets only).

A GPU thread is scalar: the CUDA backend emits no vector types yet, so a loop the schedule
vectorizes inside a kernel is unrolled instead, which computes the same (each lane one copy of
the body) and lets nvcc pair neighbouring loads. Runs before unrolling and vectorizing.
"""

from __future__ import annotations

from .. import ir
from ..ir_mutator import IRMutator
from ..schedule import GPU_LOOP_KINDS


class _UnrollVectorsInKernels(IRMutator):
    statements_only = True

    def __init__(self):
        super().__init__()
        self.in_kernel = False

    def visit_For(self, s):
        outer = self.in_kernel
        self.in_kernel = outer or s.for_type in GPU_LOOP_KINDS
        body = self.mutate(s.body)
        self.in_kernel = outer
        for_type = ir.UNROLLED if outer and s.for_type == ir.VECTORIZED else s.for_type
        if body is s.body and for_type == s.for_type:
            return s
        return ir.For(s.name, s.min, s.extent, for_type, body)


def gpu_vector_loops(stmt: ir.Stmt) -> ir.Stmt:
    return _UnrollVectorsInKernels().mutate(stmt)
