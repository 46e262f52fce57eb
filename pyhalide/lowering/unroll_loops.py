"""Unroll loops marked unrolled: one copy of the body per iteration, the variable bound by a let.

Assumes: extents have been simplified. Guarantees: no unrolled For remains. An extent that is a
constant once the enclosing lets are substituted (a producer's region `max - min + 1` computed
per iteration of an outer loop) unrolls to that many copies; an extent with only a constant upper
bound unrolls to that many copies, each guarded by `i < extent` (as Halide does); any other is an
error naming the loop, or with HL_PERMIT_FAILED_UNROLL=1 a serial loop (as Halide, with a warning).
"""

from __future__ import annotations

import os
import sys

from .. import ir
from ..bounds import constant_upper_bound_within
from ..errors import CompileError
from ..ir_mutator import LetScopeMutator, binding
from ..ir_printer import expr_to_string


class _Unroll(LetScopeMutator):
    def __init__(self):
        super().__init__()
        self.loops: dict[str, ir.For] = {}  # enclosing loops

    def visit_For(self, s):
        with binding(self.loops, s.name, s):
            body = self.mutate(s.body)
        if s.for_type != ir.UNROLLED:
            return s if body is s.body else ir.For(s.name, s.min, s.extent, s.for_type, body)
        extent, exact = constant_upper_bound_within(s.extent, self.lets, self.loops)
        if extent is None:
            why = f"Can't unroll loop {s.name}: its extent ({expr_to_string(s.extent)}) is not a constant"
            if os.environ.get("HL_PERMIT_FAILED_UNROLL") == "1":  # Halide's escape hatch: a serial loop
                print(f"Warning: {why}. Treating it as serial.", file=sys.stderr)
                return ir.For(s.name, s.min, s.extent, ir.SERIAL, body)
            raise CompileError(f"{why} and has no constant upper bound. "
                               "Split it by a constant factor first (unroll(x, n)), or set HL_PERMIT_FAILED_UNROLL=1 "
                               "to run it as a serial loop.")
        copies = []
        for i in range(max(extent, 0)):
            copy = body
            if not exact:
                copy = ir.IfThenElse(ir.LT(ir.make_const(s.extent.type, i), s.extent), copy, None)
            copies.append(ir.LetStmt(s.name, ir.Add(s.min, ir.make_const(s.min.type, i)), copy))
        return ir.make_block(copies)


def unroll_loops(stmt: ir.Stmt) -> ir.Stmt:
    return _Unroll().mutate(stmt)
