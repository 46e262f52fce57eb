"""Fuzz float stores (target feature `fuzz_float_stores`, as Halide's): every stored float value
loses the lowest bit of its mantissa. A pipeline whose output then changes a lot is one whose
results will differ across CPUs (with or without fused multiply-adds): a test of the test.

Assumes: storage is flattened (Stores). Guarantees: each Store of a float type stores the value
with its least significant bit cleared, through an unsigned integer of its width.
"""

from __future__ import annotations

from .. import ir
from ..ir_mutator import IRMutator
from ..types import UInt


def fuzz_float_stores(stmt: ir.Stmt) -> ir.Stmt:
    return _Fuzz().mutate(stmt)


class _Fuzz(IRMutator):
    statements_only = True

    def visit_Store(self, s):
        t = s.value.type
        if not t.is_float():
            return s
        bits = UInt(t.bits, t.lanes)
        mask = ir.make_const(bits, (1 << t.bits) - 2)
        cleared = ir.Call(bits, "bitwise_and", (ir.Reinterpret(bits, s.value), mask), ir.INTRINSIC)
        return ir.Store(s.name, ir.Reinterpret(t, cleared), s.index, s.predicate)
