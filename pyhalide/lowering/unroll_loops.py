"""Unroll loops marked unrolled: one copy of the body per iteration, the variable bound by a let.

Assumes: extents have been simplified. Guarantees: no unrolled For remains; an unrolled loop whose
extent is not a constant is an error naming the loop.
"""

from __future__ import annotations

from .. import ir
from ..errors import CompileError
from ..ir_mutator import IRMutator
from ..ir_printer import expr_to_string


class _Unroll(IRMutator):
    statements_only = True

    def visit_For(self, s):
        body = self.mutate(s.body)
        if s.for_type != ir.UNROLLED:
            return s if body is s.body else ir.For(s.name, s.min, s.extent, s.for_type, body)
        extent = ir.const_int(s.extent)
        if extent is None:
            raise CompileError(f"Can't unroll loop {s.name}: its extent ({expr_to_string(s.extent)}) is not a "
                               "constant. "
                               "Split it by a constant factor first (unroll(x, n)).")
        copies = [ir.LetStmt(s.name, ir.Add(s.min, ir.make_const(s.min.type, i)), body) for i in range(extent)]
        return ir.make_block(copies)


def unroll_loops(stmt: ir.Stmt) -> ir.Stmt:
    return _Unroll().mutate(stmt)
