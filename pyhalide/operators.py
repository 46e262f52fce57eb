"""Halide's functions on Exprs: select, min/max, clamp, casts, math, bit operations, print."""

from __future__ import annotations

from . import ir
from .errors import HalideError
from .expr import Expr, cast_ir, coerce_python, is_python_number, match_types, to_ir, wrap
from .types import Bool, Float, Int, Type, UInt, promote

_is_python_number = is_python_number


# ---------------------------------------------------------------- selection
def select(*args) -> Expr:
    """select(c, a, b) or select(c1, v1, c2, v2, ..., default): the first value whose condition holds."""
    if len(args) < 3 or len(args) % 2 == 0:
        raise HalideError("select takes (cond, true_value, false_value) or pairs followed by a default")
    values = list(args[1::2]) + [args[-1]]
    exprs = [to_ir(v) for v in values if not _is_python_number(v)]
    if exprs:
        t = exprs[0].type
        for e in exprs[1:]:
            t = promote(t, e.type)
        for v in values:
            if _is_python_number(v):
                t = coerce_python(v, t).type  # a float literal makes an integer select Float(32)
    else:
        t = to_ir(values[0]).type
        for v in values[1:]:
            t = promote(t, to_ir(v).type)
    ir_values = [coerce_python(v, t) if _is_python_number(v) else cast_ir(t, to_ir(v)) for v in values]
    result = ir_values[-1]
    conds = args[0:-1:2]
    for cond, value in reversed(list(zip(conds, ir_values[:-1]))):
        c = to_ir(cond)
        if not c.type.is_bool():
            raise HalideError(f"select condition has type {c.type}, not bool")
        result = ir.Select(c, value, result)
    return wrap(result)


def mux(index, values) -> Expr:
    """values[index], where an out-of-range index selects the last value (as in Halide)."""
    values = list(values)
    if not values:
        raise HalideError("mux needs at least one value")
    i = to_ir(index)
    if not (i.type.is_int() or i.type.is_uint()):
        raise HalideError(f"mux index has type {i.type}, not an integer")
    args = []
    for k, v in enumerate(values[:-1]):
        args += [wrap(i) == k, v]
    if not args:
        return wrap(to_ir(values[0]))
    return select(*args, values[-1])


def _fold(op, args) -> Expr:
    if len(args) == 1 and isinstance(args[0], list | tuple):
        args = args[0]
    if len(args) < 2:
        raise HalideError(f"{op.__name__.lower()} needs at least two arguments")
    result = args[0]
    for a in args[1:]:
        x, y = match_types(result, a)
        result = wrap(op(x, y))
    return result


def min(*args) -> Expr:
    return _fold(ir.Min, args)


def max(*args) -> Expr:
    return _fold(ir.Max, args)


def clamp(a, min_val, max_val) -> Expr:
    """clamp(a, lo, hi): the bounds take a's type."""
    e = to_ir(a)
    lo = coerce_python(min_val, e.type) if _is_python_number(min_val) else cast_ir(e.type, to_ir(min_val))
    hi = coerce_python(max_val, e.type) if _is_python_number(max_val) else cast_ir(e.type, to_ir(max_val))
    return wrap(ir.Max(ir.Min(e, hi), lo))


# ---------------------------------------------------------------- casts
def cast(t: Type, e) -> Expr:
    if not isinstance(t, Type):
        raise HalideError(f"cast: first argument must be an hl.Type, got {t!r}")
    if _is_python_number(e):
        return wrap(ir.make_const(t, e) if not t.is_float() else ir.make_const(t, float(e)))
    return wrap(cast_ir(t, to_ir(e)))


def reinterpret(t: Type, e) -> Expr:
    x = to_ir(e)
    if t.bits * t.lanes != x.type.bits * x.type.lanes:
        raise HalideError(f"reinterpret: {x.type} and {t} have different sizes")
    return wrap(ir.Reinterpret(t, x))


def saturating_cast(t: Type, e) -> Expr:
    """Cast with clamping to t's range instead of wrapping."""
    x = to_ir(e) if not _is_python_number(e) else to_ir(Expr(e))
    src = x.type
    if src.element_of() == t.element_of():
        return wrap(x)
    if t.is_float():
        if src.is_float() and src.bits > t.bits:
            x = ir.Max(ir.Min(x, ir.make_const(src, t.max_value())), ir.make_const(src, t.min_value()))
        return wrap(cast_ir(t, x))
    if src.is_float():
        # t.max_value() + 1 and t.min_value() are powers of two (or 0), exact in every float type; t.max_value()
        # itself may not be (2**31 - 1 in float32), so clamping in float could not reach it.
        # Values in (t.min_value(), t.max_value() + 1) truncate to a value in range. (NaN is undefined.)
        too_big = ir.GE(x, ir.make_const(src, float(t.max_value() + 1)))
        too_small = ir.LE(x, ir.make_const(src, float(t.min_value())))
        inner = ir.Select(too_small, ir.make_const(t, t.min_value()), cast_ir(t, x))
        return wrap(ir.Select(too_big, ir.make_const(t, t.max_value()), inner))
    lo = builtins_max(src.min_value(), t.min_value())
    hi = builtins_min(src.max_value(), t.max_value())
    if lo > src.min_value():
        x = ir.Max(x, ir.make_const(src, lo))
    if hi < src.max_value():
        x = ir.Min(x, ir.make_const(src, hi))
    return wrap(cast_ir(t, x))


import builtins  # noqa: E402

builtins_min, builtins_max = builtins.min, builtins.max


def _concise(t: Type, saturating: bool):
    def f(e):
        return saturating_cast(t, e) if saturating else cast(t, e)

    f.__name__ = f"{t}{'_sat' if saturating else ''}"
    f.__doc__ = f"Cast to {t}{' with saturation' if saturating else ''}."
    return f


i8, i16, i32, i64 = (_concise(Int(b), False) for b in (8, 16, 32, 64))
u8, u16, u32, u64 = (_concise(UInt(b), False) for b in (8, 16, 32, 64))
f32, f64 = _concise(Float(32), False), _concise(Float(64), False)
i8_sat, i16_sat, i32_sat, i64_sat = (_concise(Int(b), True) for b in (8, 16, 32, 64))
u8_sat, u16_sat, u32_sat, u64_sat = (_concise(UInt(b), True) for b in (8, 16, 32, 64))


# ---------------------------------------------------------------- arithmetic helpers
def abs(a) -> Expr:
    """|a|; for signed integers the result is the unsigned type of the same width, as in Halide."""
    x = to_ir(a)
    if x.type.is_float():
        return wrap(ir.Call(x.type, "abs", (x,), ir.INTRINSIC))
    t = x.type.with_code("uint") if x.type.is_int() else x.type
    return wrap(ir.Call(t, "abs", (x,), ir.INTRINSIC))


def absd(a, b) -> Expr:
    """|a - b| computed without overflow; unsigned for integer inputs."""
    x, y = match_types(a, b)
    t = x.type if x.type.is_float() else x.type.with_code("uint")
    return wrap(ir.Call(t, "absd", (x, y), ir.INTRINSIC))


def lerp(zero_val, one_val, weight) -> Expr:
    """zero*(1-w) + one*w for floating-point values."""
    z, o = match_types(zero_val, one_val)
    if not z.type.is_float():
        raise HalideError(f"lerp of {z.type} values is not supported yet; cast to a float type first")
    w = to_ir(weight) if not _is_python_number(weight) else coerce_python(weight, z.type)
    w = cast_ir(z.type, w)
    one = ir.make_const(z.type, 1.0)
    return wrap(ir.Add(ir.Mul(z, ir.Sub(one, w)), ir.Mul(o, w)))


def logical_not(a) -> Expr:
    x = to_ir(a)
    if not x.type.is_bool():
        raise HalideError(f"logical_not of {x.type}")
    return wrap(ir.Not(x))


def logical_and(a, b) -> Expr:
    return wrap(ir.And(*match_types(a, b)))


def logical_or(a, b) -> Expr:
    return wrap(ir.Or(*match_types(a, b)))


def likely(e) -> Expr:
    x = to_ir(e)
    return wrap(ir.Call(x.type, "likely", (x,), ir.INTRINSIC))


# ---------------------------------------------------------------- math
def _float_arg(e) -> ir.Expr:
    x = to_ir(e)
    return x if x.type.is_float() else cast_ir(Float(32, x.type.lanes), x)


def _math1(name: str):
    def f(e) -> Expr:
        x = _float_arg(e)
        return wrap(ir.Call(x.type, name, (x,), ir.EXTERN))

    f.__name__ = name
    f.__doc__ = f"{name} in floating point (integers are converted to Float(32))."
    return f


sqrt, exp, log = _math1("sqrt"), _math1("exp"), _math1("log")
sin, cos, tan = _math1("sin"), _math1("cos"), _math1("tan")
asin, acos, atan = _math1("asin"), _math1("acos"), _math1("atan")
sinh, cosh, tanh = _math1("sinh"), _math1("cosh"), _math1("tanh")
asinh, acosh, atanh = _math1("asinh"), _math1("acosh"), _math1("atanh")
floor, ceil, round, trunc = _math1("floor"), _math1("ceil"), _math1("round"), _math1("trunc")
erf = _math1("erf")


def _math2(name: str):
    def f(a, b) -> Expr:
        x, y = match_types(_float_arg(a) if not _is_python_number(a) else a, b)
        if not x.type.is_float():
            x, y = cast_ir(Float(32), x), cast_ir(Float(32), y)
        return wrap(ir.Call(x.type, name, (x, y), ir.EXTERN))

    f.__name__ = name
    return f


pow = _math2("pow")
atan2 = _math2("atan2")
hypot = _math2("hypot")


def fast_inverse(e) -> Expr:
    x = _float_arg(e)
    return wrap(ir.Div(ir.make_const(x.type, 1.0), x))


def fast_inverse_sqrt(e) -> Expr:
    x = _float_arg(e)
    return wrap(ir.Div(ir.make_const(x.type, 1.0), to_ir(sqrt(wrap(x)))))


def fast_exp(e) -> Expr:
    return exp(e)


def fast_log(e) -> Expr:
    return log(e)


def fast_pow(a, b) -> Expr:
    return pow(a, b)


def _float_test(name: str):
    def f(e) -> Expr:
        x = to_ir(e)
        if not x.type.is_float():
            raise HalideError(f"{name} of a non-float Expr ({x.type})")
        return wrap(ir.Call(Bool(x.type.lanes), name, (x,), ir.INTRINSIC))

    f.__name__ = name
    return f


is_nan, is_inf, is_finite = _float_test("is_nan"), _float_test("is_inf"), _float_test("is_finite")


# ---------------------------------------------------------------- bits
def _int_unary(name: str, result_signed_int: bool = False):
    def f(e) -> Expr:
        x = to_ir(e)
        if x.type.is_float():
            raise HalideError(f"{name} of a float Expr ({x.type})")
        t = Int(32, x.type.lanes) if result_signed_int else x.type
        return wrap(ir.Call(t, name, (x,), ir.INTRINSIC))

    f.__name__ = name
    return f


popcount = _int_unary("popcount")
count_leading_zeros = _int_unary("count_leading_zeros")
count_trailing_zeros = _int_unary("count_trailing_zeros")


# ---------------------------------------------------------------- debugging
def print(*args) -> Expr:
    """Print the arguments when evaluated (to stderr); returns the first argument's value."""
    return print_when(True, *args)


def print_when(condition, *args) -> Expr:
    if not args:
        raise HalideError("print needs at least one argument")
    parts = []
    for a in args:
        parts.append(ir.StringImm(a) if isinstance(a, str) else to_ir(a))
    first = next((p for p in parts if not isinstance(p, ir.StringImm)), None)
    if first is None:
        raise HalideError("print needs at least one Expr argument, whose value it returns")
    c = to_ir(condition) if not isinstance(condition, bool) else ir.IntImm(Bool(), int(condition))
    if not c.type.is_bool():
        raise HalideError(f"print_when condition has type {c.type}, not bool")
    return wrap(ir.Call(first.type, "print", (c, *parts), ir.INTRINSIC))
