"""64-bit shadows of the 32-bit bounds, for the checks that a region fits.

A bound such as `x * 2^30` wraps in 32 bits; a check computed in 32 bits would then pass and
the pipeline read or allocate outside what it checked. Allocation bounds gives every Int(32)
let `n` a shadow let `n$i64` holding the same value computed in Int(64) from the shadows before
it; the checks (allocation sizes, buffer regions) are written over the shadows, and the
simplifier drops the shadows no check uses.
"""

from __future__ import annotations

from .. import ir
from ..types import Int

I32, I64 = Int(32), Int(64)
SUFFIX = "$i64"
_ARITHMETIC = (ir.Add, ir.Sub, ir.Mul, ir.Div, ir.Mod, ir.Min, ir.Max)


def widened(e: ir.Expr, shadowed: set[str]) -> ir.Expr:
    """e computed in Int(64) throughout; the lets in `shadowed` are read from their shadows."""
    if e.type != I32:
        return e
    if isinstance(e, ir.IntImm):
        return ir.make_const(I64, e.value)
    if isinstance(e, ir.Variable) and e.name in shadowed:
        return ir.Variable(e.name + SUFFIX, I64)
    if isinstance(e, _ARITHMETIC):
        return type(e)(widened(e.a, shadowed), widened(e.b, shadowed))
    if isinstance(e, ir.Select):
        return ir.Select(e.condition, widened(e.true_value, shadowed), widened(e.false_value, shadowed))
    return ir.Cast(I64, e)


def with_shadow(s: ir.LetStmt, body: ir.Stmt, shadowed: set[str]) -> ir.LetStmt:
    """The let s over body, with its shadow (if it is an Int(32) let) between them."""
    if s.value.type == I32:
        body = ir.LetStmt(s.name + SUFFIX, widened(s.value, shadowed), body)
    return ir.LetStmt(s.name, s.value, body)


def shadows_of(lets) -> set[str]:
    """The names among (name, value) lets whose shadows are among them."""
    names = {name for name, _ in lets}
    return {name[: -len(SUFFIX)] for name in names if name.endswith(SUFFIX)}
