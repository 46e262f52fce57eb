"""How print() and trace events show a value, as Halide's runtime does: integers in decimal,
float32 with six decimals (%f), float64 in scientific notation (%e) (float16 too, in trace
events), and booleans printed by print() as true or false. One rule for every backend."""

from __future__ import annotations

from ..types import Type


def printf_conversion(t: Type, traced: bool) -> str:
    """The printf conversion of one value of (scalar) type t in a print (traced: a trace event);
    "%s" is a boolean printed as true / false."""
    if t.is_bool() and not traced:
        return "%s"
    if t.is_float():
        return "%e" if t.bits == 64 or (t.bits == 16 and traced) else "%f"
    return "%lld" if t.is_int() or t.is_bool() else "%llu"
