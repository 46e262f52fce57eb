"""Estimates: the sizes a Func or input is expected to have, for an autoscheduler to plan with.

As in Halide, estimates are data kept beside the algorithm, not schedule: lowering, the schedule's
JSON and source, and the structural hash never read them. They are checked when set (each is a
constant integer min and an extent of at least 1, within Int(32)), so an autoscheduler can take
them as plain ints: `Func.estimates()` and `ImageParam.estimates()` give one `(min, extent)` per
dimension (None where unset), `Param.estimate()` a value (None when unset).
"""

from __future__ import annotations

import operator

from . import ir
from .errors import HalideError

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def _as_int(where: str, what: str, value) -> int:
    """`value` as a Python int, or a HalideError saying why it can't be an estimate."""
    from .expr import Expr, to_ir

    if isinstance(value, bool):
        raise HalideError(f"{where}: the {what} must be an integer, got {value!r}")
    if isinstance(value, Expr):
        e = to_ir(value)
        v = ir.const_int(e) if not e.type.is_bool() else None
        if v is None:
            kind = "a float" if e.type.is_float() else "not a constant"
            raise HalideError(f"{where}: the {what} must be a constant integer, got {value} ({kind})")
        return v
    try:
        return operator.index(value)  # int, numpy integers
    except TypeError:
        raise HalideError(f"{where}: the {what} must be an integer, got {value!r}") from None


def check_estimate(where: str, min, extent) -> tuple[int, int]:
    """One dimension's (min, extent) as ints: constant integers, extent >= 1, all of it in Int(32)."""
    lo, n = _as_int(where, "min", min), _as_int(where, "extent", extent)
    if n < 1:
        raise HalideError(f"{where}: the extent must be at least 1, got min {lo}, extent {n}")
    if lo < _INT32_MIN or n > _INT32_MAX or lo + n - 1 > _INT32_MAX:
        raise HalideError(f"{where}: min {lo}, extent {n} does not fit in Int(32) "
                          f"([{_INT32_MIN}, {_INT32_MAX}])")
    return lo, n


def estimate_list(owner: str, names: list[str], estimates) -> list[tuple[int, int]]:
    """The argument of set_estimates (one hl.Range or (min, extent) pair per dimension, in order)
    checked whole, for `owner` ("Func f", "ImageParam im") with dimensions called `names` (None:
    unnamed)."""
    from .var import Range

    if isinstance(estimates, Range) or not isinstance(estimates, list | tuple):
        raise HalideError(f"{owner}.set_estimates takes a list of hl.Range or (min, extent) pairs, one per "
                          f"dimension, got {estimates!r}")
    if len(estimates) != len(names):
        raise HalideError(f"{owner} has {len(names)} dimensions, but the estimates passed to set_estimates "
                          f"contain {len(estimates)} pairs")
    out = []
    for i, (name, e) in enumerate(zip(names, estimates)):
        where = f"{owner}.set_estimates: dimension {i}" + ("" if name is None else f" ({name})")
        if isinstance(e, Range):
            e = (e.min, e.extent)
        if not isinstance(e, list | tuple) or len(e) != 2:
            raise HalideError(f"{where}: expected an hl.Range or a (min, extent) pair, got {e!r}")
        out.append(check_estimate(where, *e))
    return out
