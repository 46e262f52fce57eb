"""Specialise the lowered Stmt for the shapes of the Buffers the algorithm names directly.

Assumes: the Stmt is lowered and simplified; `shapes` holds, for each input Buffer bound in the
algorithm (not an ImageParam), its min, extent and stride per dimension, and the caller compiles
again whenever one of them changes (the compiled pipeline's key includes them). Guarantees: each
`b.min.d`, `b.extent.d` and `b.stride.d` of such a buffer is that constant, and every expression
that mentioned one is simplified again, so boundary clamps, index arithmetic and the buffer
checks fold, as Halide's JIT compiles a bound Buffer (its shape is part of the pipeline).
"""

from __future__ import annotations

from .. import ir
from .unit_strides import KnownValues


def specialize_bound_shapes(stmt, shapes: dict):
    """shapes: buffer name -> ((min, extent, stride) per dimension)."""
    values = {f"{name}.{field}.{d}": ir.make_const(ir.Int(32), int(v))
              for name, dims in shapes.items() for d, dim in enumerate(dims)
              for field, v in zip(("min", "extent", "stride"), dim)
              if -(1 << 31) <= v < (1 << 31)}  # (a larger one stays a variable, checked as before)
    return KnownValues(values).mutate(stmt) if values else stmt
