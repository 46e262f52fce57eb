"""Specialise the lowered Stmt for the buffer dimensions known when compiling.

Assumes: the Stmt is lowered and simplified; `constants` maps `buffer.field.dimension` (field:
min, extent or stride) to its value, for the input Buffers bound in the algorithm (not
ImageParams: their whole shape) and for the dimensions of outputs and ImageParams constrained to a
constant (checked before every call); the caller compiles again whenever one of them changes (the
compiled pipeline's key includes them). Guarantees: each such name is that constant, and every
expression that mentioned one is simplified again, so boundary clamps, index arithmetic and the
buffer checks fold, as Halide's JIT compiles a bound Buffer (its shape is part of the pipeline)
and as Halide compiles a constrained dimension.
"""

from __future__ import annotations

from .. import ir
from .unit_strides import KnownValues


def specialize_bound_shapes(stmt, constants: dict[str, int]):
    values = {name: ir.make_const(ir.Int(32), int(v)) for name, v in constants.items()
              if -(1 << 31) <= v < (1 << 31)}  # (a larger one stays a variable, checked as before)
    return KnownValues(values).mutate(stmt) if values else stmt
