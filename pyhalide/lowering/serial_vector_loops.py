"""Vectorized loops become serial loops, for the C backend (compile_to_c).

The C source is scalar and portable: a loop the schedule vectorizes is printed as a loop over its
lanes, which computes the same (a vectorized loop means what the serial loop means) and which C
compilers vectorize where the target has vectors. Runs where vectorize_loops would.

A C compiler vectorizes innermost loops, so a lane loop that holds a loop nest (a vectorized x
outside a reduction over r: `for x.v { for r { ... } }`) is moved inside it, lets and all, as
far as the nest is perfect and its bounds do not depend on the lanes: the lanes of a vectorized
loop are independent (Halide computes them at once), so the order of (lane, r) pairs is free.
"""

from __future__ import annotations

from .. import ir
from ..ir_mutator import IRMutator, free_variables


class _SerialVectorLoops(IRMutator):
    statements_only = True

    def visit_For(self, s):
        body = self.mutate(s.body)
        if s.for_type == ir.VECTORIZED:
            return _lanes_innermost(ir.For(s.name, s.min, s.extent, ir.SERIAL, body))
        return s if body is s.body else ir.For(s.name, s.min, s.extent, s.for_type, body)


def _lanes_innermost(lanes: ir.For) -> ir.For:
    """The lane loop moved inside the loops it perfectly nests (see the module docstring)."""
    lets, inner = [], lanes.body
    while isinstance(inner, ir.LetStmt):
        lets.append(inner)
        inner = inner.body
    if not isinstance(inner, ir.For) or inner.for_type not in (ir.SERIAL, ir.UNROLLED):
        return lanes
    varying = {lanes.name, *(let.name for let in lets)}
    if free_variables(inner.min) & varying or free_variables(inner.extent) & varying:
        return lanes
    body = inner.body
    for let in reversed(lets):
        body = ir.LetStmt(let.name, let.value, body)
    moved = _lanes_innermost(ir.For(lanes.name, lanes.min, lanes.extent, ir.SERIAL, body))
    return ir.For(inner.name, inner.min, inner.extent, inner.for_type, moved)


def serial_vector_loops(stmt: ir.Stmt) -> ir.Stmt:
    return _SerialVectorLoops().mutate(stmt)
