"""Halide's integer intrinsics that avoid overflow, built from ordinary Exprs: widening and
saturating arithmetic, halving adds, rounding-to-zero division, plus fract, evaluate (and
evaluate_may_gpu), vars and funcs. Each widens both operands to twice their bits (the intrinsics
exist for 8-, 16- and 32-bit integers), computes exactly there, and narrows as Halide defines:
saturating, or wrapping for halving_sub."""

from __future__ import annotations

from . import ir
from .errors import HalideError
from .expr import Expr, cast_ir, match_types, to_ir, wrap
from .types import Type


def _same_integers(name: str, a, b) -> tuple[ir.Expr, ir.Expr]:
    x, y = match_types(a, b)
    t = x.type
    if not (t.is_int() or t.is_uint()) or t.is_bool():
        raise HalideError(f"{name} takes integers, got {t}")
    return x, y


def _wide(name: str, t: Type, signed: bool | None = None) -> Type:
    if t.bits > 32:
        raise HalideError(f"{name} of {t}: there is no integer type twice as wide")
    code = t.code if signed is None else ("int" if signed else "uint")
    return Type(code, t.bits * 2, t.lanes)


def _clamped_to(t: Type, e: ir.Expr) -> ir.Expr:
    lo, hi = ir.make_const(e.type, t.min_value()), ir.make_const(e.type, t.max_value())
    return cast_ir(t, ir.Max(ir.Min(e, hi), lo))


def _in_wide(name: str, a, b, op, signed: bool | None = None) -> tuple[Type, ir.Expr]:
    """The operands' type, and op of them computed exactly in the type of twice the bits."""
    x, y = _same_integers(name, a, b)
    w = _wide(name, x.type, signed)
    return x.type, op(cast_ir(w, x), cast_ir(w, y))


def widening_add(a, b) -> Expr:
    """a + b in the type of twice the bits (same signedness): never overflows."""
    return wrap(_in_wide("widening_add", a, b, ir.Add)[1])


def widening_sub(a, b) -> Expr:
    """a - b in the signed type of twice the bits (unsigned inputs give a signed result)."""
    return wrap(_in_wide("widening_sub", a, b, ir.Sub, signed=True)[1])


def widening_mul(a, b) -> Expr:
    """a * b in the type of twice the bits: never overflows."""
    return wrap(_in_wide("widening_mul", a, b, ir.Mul)[1])


def saturating_add(a, b) -> Expr:
    """a + b clamped to the operands' type instead of wrapping."""
    return wrap(_clamped_to(*_in_wide("saturating_add", a, b, ir.Add, signed=True)))


def saturating_sub(a, b) -> Expr:
    """a - b clamped to the operands' type instead of wrapping."""
    return wrap(_clamped_to(*_in_wide("saturating_sub", a, b, ir.Sub, signed=True)))


def _halved(name: str, a, b, op, plus_one: bool) -> Expr:
    t, e = _in_wide(name, a, b, op, signed=True)
    if plus_one:
        e = ir.Add(e, ir.make_const(e.type, 1))
    return wrap(cast_ir(t, ir.Div(e, ir.make_const(e.type, 2))))  # Halide's division floors


def halving_add(a, b) -> Expr:
    """(a + b) / 2 rounded down, without overflow."""
    return _halved("halving_add", a, b, ir.Add, False)


def rounding_halving_add(a, b) -> Expr:
    """(a + b + 1) / 2 rounded down, without overflow."""
    return _halved("rounding_halving_add", a, b, ir.Add, True)


def halving_sub(a, b) -> Expr:
    """(a - b) / 2 rounded down, computed without overflow and wrapped to the operands' type."""
    return _halved("halving_sub", a, b, ir.Sub, False)


def div_round_to_zero(a, b) -> Expr:
    """Integer division rounding toward zero (C's), where Halide's `/` rounds down."""
    x, y = _same_integers("div_round_to_zero", a, b)
    return wrap(_truncated_quotient(x, y))


def mod_round_to_zero(a, b) -> Expr:
    """The remainder of div_round_to_zero: it has the sign of a (C's %)."""
    x, y = _same_integers("mod_round_to_zero", a, b)
    return wrap(ir.Sub(x, ir.Mul(_truncated_quotient(x, y), y)))


def _truncated_quotient(x: ir.Expr, y: ir.Expr) -> ir.Expr:
    t = x.type
    q = ir.Div(x, y)
    if t.is_uint():
        return q
    zero = ir.make_const(t, 0)
    # Halide's remainder is never negative: a negative a with a remainder rounded away from zero
    step = ir.Select(ir.GT(y, zero), ir.make_const(t, 1), ir.make_const(t, -1))
    inexact = ir.And(ir.LT(x, zero), ir.NE(ir.Mod(x, y), zero))
    return ir.Select(inexact, ir.Add(q, step), q)


def fract(e) -> Expr:
    """x - trunc(x): the fractional part, with x's sign (non-floats are cast to Float(32) first)."""
    from .operators import trunc

    x = to_ir(e)
    if not x.type.is_float():
        x = cast_ir(Type("float", 32, x.type.lanes), x)
    return wrap(ir.Sub(x, to_ir(trunc(wrap(x)))))


def _evaluation_values(e) -> list:
    """What evaluate accepts, as Halide's bindings read it: one Expr-like, or a non-empty tuple or
    list of them."""
    from .operators import _expr_like

    if _expr_like(e):
        return [e]
    if isinstance(e, tuple | list) and e and all(_expr_like(v) for v in e):
        return list(e)
    raise ValueError("Expected an Expr or tuple-of-Expr.")


def _evaluate(e, may_gpu: bool):
    from .func import Func, Tuple
    from .target import get_jit_target_from_environment

    values = _evaluation_values(e)
    f = Func(f"evaluate_func_{len(values)}")
    f[()] = values[0] if len(values) == 1 else Tuple(values)
    if may_gpu and get_jit_target_from_environment().has_gpu_feature():
        f.gpu_single_thread()  # Halide's schedule_scalar
    result = f.realize([])
    return result[()] if len(values) == 1 else tuple(b[()] for b in result)


def evaluate(e):
    """The value of an expression (or a tuple of them) that depends on no variable, as Python numbers."""
    return _evaluate(e, may_gpu=False)


def evaluate_may_gpu(e):
    """evaluate, run on the GPU (as one thread) when the JIT target ($HL_JIT_TARGET) has a GPU
    feature; on the CPU otherwise."""
    return _evaluate(e, may_gpu=True)


def vars(names: str):
    """hl.vars("x y z"): a tuple of Vars of those names."""
    from .var import Var

    return tuple(Var(n) for n in names.split())


def funcs(names: str):
    """hl.funcs("f g"): a tuple of Funcs of those names."""
    from .func import Func

    return tuple(Func(n) for n in names.split())
