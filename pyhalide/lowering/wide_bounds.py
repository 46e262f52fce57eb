"""64-bit shadows of the 32-bit bounds, for the checks that a region fits.

A bound such as `x * 2^30` wraps in 32 bits; a check computed in 32 bits would then pass and
the pipeline read or allocate outside what it checked. Allocation bounds gives every Int(32)
let `n` a shadow let `n$i64` holding the same value computed in Int(64) from the shadows before
it; the checks (allocation sizes, buffer regions) are written over the shadows, and the
simplifier drops the shadows no check uses.
"""

from __future__ import annotations

from .. import ir
from ..errors import InternalError
from ..extern import CALL_EXTERN
from ..ir_mutator import calls_out
from ..types import Int

I32, I64 = Int(32), Int(64)
SUFFIX = "$i64"
_ARITHMETIC = (ir.Add, ir.Sub, ir.Mul, ir.Div, ir.Mod, ir.Min, ir.Max)


def widened(e: ir.Expr, shadowed: set[str], memo: dict | None = None) -> ir.Expr:
    """e computed in Int(64) throughout; the lets in `shadowed` are read from their shadows. A
    subexpression shared by several parents is widened once, and stays shared (the bounds of
    nested pyramid levels are DAGs whose trees are exponentially large)."""
    if e.type != I32:
        return e
    memo = {} if memo is None else memo
    hit = memo.get(id(e))
    if hit is not None:
        return hit[1]
    if isinstance(e, ir.IntImm):
        result = ir.make_const(I64, e.value)
    elif isinstance(e, ir.Call) and e.call_type == ir.INTRINSIC and e.name == CALL_EXTERN:
        raise InternalError("wide bounds: an extern stage's call is not a bound to widen")
    elif isinstance(e, ir.Variable) and e.name in shadowed:
        result = ir.Variable(e.name + SUFFIX, I64)
    elif isinstance(e, _ARITHMETIC):
        result = type(e)(widened(e.a, shadowed, memo), widened(e.b, shadowed, memo))
    elif isinstance(e, ir.Select):
        result = ir.Select(e.condition, widened(e.true_value, shadowed, memo), widened(e.false_value, shadowed, memo))
    else:
        result = ir.Cast(I64, e)
    memo[id(e)] = (e, result)  # (keeps e alive, so its id stays unique)
    return result


def with_shadow(s: ir.LetStmt, body: ir.Stmt, shadowed: set[str]) -> ir.LetStmt:
    """The let s over body, with its shadow (if it is an Int(32) let) between them. A value an
    extern stage's call gives (or that reads what it wrote) is a 32-bit number whatever it
    computed: its shadow is that number (the call is never made twice)."""
    if s.value.type == I32:
        shadow = ir.Cast(I64, ir.Variable(s.name, I32)) if calls_out(s.value) else widened(s.value, shadowed)
        body = ir.LetStmt(s.name + SUFFIX, shadow, body)
    return ir.LetStmt(s.name, s.value, body)


def shadows_of(lets) -> set[str]:
    """The names among (name, value) lets whose shadows are among them."""
    names = {name for name, _ in lets}
    return {name[: -len(SUFFIX)] for name in names if name.endswith(SUFFIX)}
