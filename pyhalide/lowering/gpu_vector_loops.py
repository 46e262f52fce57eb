"""Inside GPU loops, vectorized loops become unrolled ones (CUDA targets only).

A GPU thread is scalar: the CUDA backend emits no vector types yet, so a loop the schedule
vectorizes inside a kernel is unrolled instead, which computes the same (each lane one copy of
the body) and lets nvcc pair neighbouring loads. Runs before unrolling and vectorizing.
It also refuses a GPU thread (or lane) loop outside every GPU block loop, as Halide's lowering does
(so compile_to_lowered_stmt refuses it too, not only code generation).
"""

from __future__ import annotations

from .. import ir
from ..errors import CompileError
from ..ir_mutator import IRMutator
from ..schedule import GPU_BLOCK, GPU_LOOP_KINDS


class _UnrollVectorsInKernels(IRMutator):
    statements_only = True

    def __init__(self):
        super().__init__()
        self.in_kernel = False
        self.in_block = False

    def visit_For(self, s):
        if s.for_type in GPU_LOOP_KINDS and s.for_type != GPU_BLOCK and not self.in_block:
            raise CompileError(f"GPU thread loop {s.name} is not inside any gpu_blocks loop: a kernel's thread loops "
                               "go inside its block loops (gpu_tile makes both)")
        outer, outer_block = self.in_kernel, self.in_block
        self.in_kernel = outer or s.for_type in GPU_LOOP_KINDS
        self.in_block = outer_block or s.for_type == GPU_BLOCK
        body = self.mutate(s.body)
        self.in_kernel, self.in_block = outer, outer_block
        for_type = ir.UNROLLED if outer and s.for_type == ir.VECTORIZED else s.for_type
        if body is s.body and for_type == s.for_type:
            return s
        return ir.For(s.name, s.min, s.extent, for_type, body)


def gpu_vector_loops(stmt: ir.Stmt) -> ir.Stmt:
    return _UnrollVectorsInKernels().mutate(stmt)
