"""Halide's functions on Exprs: select, min/max, clamp, casts, math, bit operations, print."""

from __future__ import annotations

import itertools

import numpy as np

from . import ir
from .errors import HalideError
from .expr import (
    Expr,
    as_expr,
    cast_ir,
    coerce_python,
    const_from_python,
    cxx_type_name,
    fold_cast,
    is_python_number,
    logical_not_ir,
    match_types,
    to_ir,
    wrap,
)
from .ir_mutator import IRVisitor, free_variables, has_call, map_children
from .ir_printer import expr_to_string
from .types import Bool, Float, Int, Type, UInt, promote

_is_python_number = is_python_number


# ---------------------------------------------------------------- selection
def _outputs(ref) -> int:
    try:
        return ref.function().outputs()
    except HalideError:  # an undefined Func: its call fails later, as an Expr
        return 1


def _expr_like(v) -> bool:
    """Whether Halide's bindings take v as an Expr: Expr-likes and Python numbers, but not a call of
    a Func that returns a Tuple."""
    from .func import FuncRef, FuncTupleElementRef

    if isinstance(v, FuncRef) and not isinstance(v, FuncTupleElementRef):
        return _outputs(v) == 1
    return isinstance(v, Expr | bool | int | float | np.bool_ | np.number) or hasattr(v, "_as_expr")


def _tuple_like(v) -> bool:
    """A list, tuple, or other sequence (not a string, Buffer or Expr-like), as Halide's bindings
    convert to a Tuple."""
    from .buffer import Buffer

    return (isinstance(v, list | tuple) or (hasattr(v, "__len__") and hasattr(v, "__getitem__"))) and not (
        isinstance(v, str | bytes | Buffer) or _expr_like(v))


def _tuple_ir(v) -> list[ir.Expr] | None:
    """The elements of a Tuple-like (a sequence of Expr-likes, or a call of a Tuple-valued Func), or None."""
    from .func import FuncRef, FuncTupleElementRef

    if isinstance(v, FuncRef) and not isinstance(v, FuncTupleElementRef):
        n = _outputs(v)
        return [to_ir(v)] if n == 1 else [to_ir(v[i]) for i in range(n)]
    if not _tuple_like(v):
        return None
    items = [v[i] for i in range(len(v))]
    if not all(_expr_like(e) for e in items):
        return None
    return [to_ir(e) for e in items]


def _select_arg_error(expected: str, arg):
    return HalideError(f"Error: select(): Expected {expected} but got {type(arg).__name__}: {arg}\n")


def _select_expr_arg(arg) -> ir.Expr:
    if not _expr_like(arg):
        raise _select_arg_error("Expr", arg)
    return to_ir(arg)


def _select_tuple_arg(arg) -> list[ir.Expr]:
    values = _tuple_ir(arg)
    if values is None:
        raise _select_arg_error("Tuple", arg)
    return values


def _as_const_int(e: ir.Expr) -> int | None:
    """Halide's as_const_int: a signed integer constant (bool and unsigned constants are not)."""
    if type(e) is ir.Broadcast:
        e = e.value
    return e.value if type(e) is ir.IntImm and e.type.is_int() else None


def _select_ir(c: ir.Expr, t: ir.Expr, f: ir.Expr) -> ir.Expr:
    """Halide's select(Expr, Expr, Expr): an integer constant takes the other value's type; the
    values must otherwise have one type (select does not promote, as arithmetic does)."""
    if _as_const_int(c) is not None:
        c = fold_cast(Bool(t.type.lanes), c)
    if _as_const_int(t) is not None:
        t = fold_cast(f.type, t)
    if _as_const_int(f) is not None:
        f = fold_cast(t.type, f)
    if not c.type.is_bool():
        raise HalideError("Error: The first argument to a select must be a boolean:\n"
                          f"  {wrap(c)} has type {cxx_type_name(c.type)}\n")
    if t.type != f.type:
        raise HalideError("Error: The second and third arguments to a select do not have a matching type:\n"
                          f"  {wrap(t)} has type {cxx_type_name(t.type)}\n"
                          f"  {wrap(f)} has type {cxx_type_name(f.type)}\n")
    if t.type.lanes > 1 and c.type.lanes == 1:
        c = ir.Broadcast(c, t.type.lanes)
    return ir.Select(c, t, f)


_TUPLE_SIZES = "Error: select() on Tuples requires all Tuples to have identical sizes.\n"


def _select_tuples(c, t: list, f: list) -> list:
    """select of Tuples, element by element; c is one condition or a Tuple of them."""
    conds = c if isinstance(c, list) else [c] * len(t)
    if not len(conds) == len(t) == len(f):
        raise HalideError(_TUPLE_SIZES)
    return [_select_ir(ci, a, b) for ci, a, b in zip(conds, t, f)]


def select(*args):
    """select(c, a, b) or select(c1, v1, c2, v2, ..., default): the first value whose condition holds.

    Values may be Tuples (Python tuples or calls of Tuple-valued Funcs), with one condition or a
    Tuple of conditions; the result is then an hl.Tuple. As in Halide, conditions and values are
    read from the last pair backwards."""
    if len(args) < 3:
        raise ValueError("select() must have at least 3 arguments")
    if len(args) % 2 != 1:
        raise ValueError("select() must have an odd number of arguments")
    if _expr_like(args[0]) and _expr_like(args[1]):
        cond_of, value_of, combine = _select_expr_arg, _select_expr_arg, _select_ir
    else:
        conditions = args[0:-1:2]
        if any(_expr_like(c) for c in conditions) and not all(_expr_like(c) for c in conditions):
            raise HalideError("Error: select() on Tuples may not mix Expr and Tuple for the condition elements.\n")
        cond_of = _select_expr_arg if _expr_like(args[0]) else _select_tuple_arg
        value_of, combine = _select_tuple_arg, _select_tuples
    false_case = value_of(args[-1])
    for pos in range(len(args) - 1, 1, -2):
        true_case = value_of(args[pos - 1])
        false_case = combine(cond_of(args[pos - 2]), true_case, false_case)
    if isinstance(false_case, list):
        from .func import Tuple

        return Tuple([wrap(e) for e in false_case])
    return wrap(false_case)


def _mux_ir(index: ir.Expr, values: list[ir.Expr]) -> ir.Expr:
    """values[index] as Halide lowers its mux: an out-of-range index picks the last value."""
    if not values:
        raise HalideError("Error: mux() requires a non-empty vector of values\n")
    if any(v.type != values[0].type for v in values):
        raise HalideError("Error: mux() requires all the values to have the same type.\n")
    if len(values) <= _MUX_CHAIN:
        result = values[-1]
        for k in range(len(values) - 2, -1, -1):
            result = _select_ir(ir.EQ(index, ir.make_const(index.type, k)), values[k], result)
        return result

    # A long mux is a balanced tree of selects (as many as a chain, but log n deep): an unrolled
    # loop over its index then substitutes and simplifies one path per copy, not the whole chain.
    def tree(lo: int, hi: int) -> ir.Expr:
        if hi - lo == 1:
            return values[lo]
        mid = (lo + hi) // 2
        return _select_ir(ir.LT(index, ir.make_const(index.type, mid)), tree(lo, mid), tree(mid, hi))

    return _select_ir(ir.LT(index, ir.make_const(index.type, 0)), values[-1], tree(0, len(values)))


_MUX_CHAIN = 8  # a mux of at most this many values is a chain of selects, `index == k` each


def mux(index, values):
    """values[index] (the last value where index is out of range). values is a list of Exprs, a
    Tuple (a call of a Tuple-valued Func) to pick an element from, or a list of Tuples, giving an
    hl.Tuple. The values must have one type."""
    i = to_ir(index)
    from .func import FuncRef, FuncTupleElementRef, Tuple

    if isinstance(values, FuncRef) and not isinstance(values, FuncTupleElementRef):
        return wrap(_mux_ir(i, _tuple_ir(values)))
    values = [values[k] for k in range(len(values))]
    if all(_expr_like(v) for v in values):
        return wrap(_mux_ir(i, [to_ir(v) for v in values]))
    tuples = [_tuple_ir(v) for v in values]
    if any(t is None for t in tuples):
        raise TypeError("mux() takes a list of Exprs, a Tuple, or a list of Tuples")
    if any(len(t) != len(tuples[0]) for t in tuples):
        raise HalideError("Error: mux() of Tuples requires all the Tuples to have the same size.\n")
    return Tuple([wrap(_mux_ir(i, [t[k] for t in tuples])) for k in range(len(tuples[0]))])


def _fold(op, args) -> Expr:
    """min / max of two or more: the last two first, as Halide's bindings fold them; a Python
    number is an Expr of its own type (Int(32), Float(32)) there, not one of the other's."""
    if len(args) == 1 and isinstance(args[0], list | tuple):
        args = args[0]
    if len(args) < 2:
        raise HalideError(f"{op.__name__.lower()} needs at least two arguments")
    result = as_expr(args[-1])
    for a in reversed(args[:-1]):
        result = wrap(op(*match_types(as_expr(a), result)))
    return result


def min(*args) -> Expr:
    return _fold(ir.Min, args)


def max(*args) -> Expr:
    return _fold(ir.Max, args)


def clamp(a, min_val, max_val) -> Expr:
    """clamp(a, lo, hi): the bounds take a's type."""
    e = to_ir(a)
    lo = fold_cast(e.type, coerce_python(min_val, e.type) if _is_python_number(min_val) else to_ir(min_val))
    hi = fold_cast(e.type, coerce_python(max_val, e.type) if _is_python_number(max_val) else to_ir(max_val))
    return wrap(ir.Max(ir.Min(e, hi), lo))


# ---------------------------------------------------------------- casts
def cast(t: Type, e) -> Expr:
    """e converted to t. (A Python float is taken exactly here, where Halide's bindings would first
    round it to float32: pyhalide's own tests cast doubles to Float(64) this way.)"""
    if not isinstance(t, Type):
        raise HalideError(f"cast: first argument must be an hl.Type, got {t!r}")
    if isinstance(e, float):
        e = ir.FloatImm(Float(64), e)
    elif isinstance(e, int) and not Int(64).can_represent(e):
        return wrap(ir.make_const(t, e))  # (an unsigned 64-bit value; Halide's bindings take none past int64)
    elif _is_python_number(e):
        e = const_from_python(e)
    return wrap(fold_cast(t, to_ir(e)))  # (a constant folds, as in Halide)


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
        # A float type's range runs from -inf to inf (Halide's Type::min/max), so clamping to it
        # changes nothing: a value too large for t becomes inf, as Halide's does.
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
    x, y = match_types(as_expr(a), as_expr(b))
    t = x.type if x.type.is_float() else x.type.with_code("uint")
    return wrap(ir.Call(t, "absd", (x, y), ir.INTRINSIC))


def lerp(zero_val, one_val, weight) -> Expr:
    """zero*(1-w) + one*w, as Halide computes it: in floats for float values; for integer values
    (up to 32 bits) with the weight, float in [0, 1] or unsigned over its whole range, scaled to
    the values' width and the blend rounded to nearest, exactly (Halide's lower_lerp)."""
    z, o = to_ir(zero_val), to_ir(one_val)
    w = const_from_python(weight) if is_python_number(weight) else to_ir(weight)
    # Halide's rule, not the arithmetic operators' promotion: a signed integer constant takes the
    # other value's type (lerp(0, u8, w) is uint8); any other mismatch is an error.
    if _is_const_signed_int(z):
        z = fold_cast(o.type, z)
    if _is_const_signed_int(o):
        o = fold_cast(z.type, o)
    if z.type != o.type:
        raise HalideError(f"Can't lerp between {expr_to_string(z)} of type {z.type} and {expr_to_string(o)} of "
                          f"different type {o.type}")
    if not (w.type.is_uint() or w.type.is_float()):
        raise HalideError(f"A lerp weight must be an unsigned integer or a float, but lerp weight "
                          f"{expr_to_string(w)} has type {w.type}.")
    t = z.type
    if not t.is_float() and t.bits > 32:
        raise HalideError("Lerping between 64-bit integers is not supported")
    cw = ir.const_value(w)
    if not t.is_float() and w.type.is_float() and cw is not None and not 0.0 <= cw <= 1.0:
        raise HalideError(f"Floating-point weight for lerp with integer arguments is {cw}, which is not in "
                          "the range [0.0, 1.0].")
    if t.is_float():
        return wrap(_float_lerp(z, o, w))
    if t.is_bool():
        half = ir.make_const(w.type, 0.5 if w.type.is_float() else w.type.max_value() // 2)
        return wrap(ir.Select(ir.GT(w, half), o, z))
    return wrap(_integer_lerp(z, o, w))


def _is_const_signed_int(e: ir.Expr) -> bool:
    """Halide's as_const_int: a signed integer constant, or a broadcast of one."""
    if type(e) is ir.Broadcast:
        e = e.value
    return type(e) is ir.IntImm and e.type.is_int()


def _float_lerp(z: ir.Expr, o: ir.Expr, w: ir.Expr) -> ir.Expr:
    if w.type.is_uint():  # an unsigned weight spans [0, 1] over its range
        w = ir.Div(cast_ir(z.type, w), ir.make_const(z.type, float(2 ** w.type.bits - 1)))
    ct = promote(z.type, w.type)  # (a float64 weight blends float32 values in float64)
    if ct.bits == 16:  # float16 and bfloat16 as Halide: the whole blend in float32, rounded once
        ct = Float(32, ct.lanes)
    w = cast_ir(ct, w)
    blend = ir.Add(ir.Mul(cast_ir(ct, z), ir.Sub(ir.make_const(ct, 1.0), w)), ir.Mul(cast_ir(ct, o), w))
    return cast_ir(z.type, blend)


def _integer_lerp(z: ir.Expr, o: ir.Expr, w: ir.Expr) -> ir.Expr:
    """In the unsigned type of the values' width (signed values biased into it), the weight
    scaled to that width: (z * (max - w) + o * w + max / 2) / max in twice the width."""
    t = z.type
    bits = t.bits
    ct, wide = UInt(bits), UInt(2 * bits)
    bias = ir.make_const(ct, -t.min_value() if t.is_int() else 0)  # the signed minimum, as unsigned
    z, o = ir.Sub(cast_ir(ct, z), bias), ir.Sub(cast_ir(ct, o), bias)  # (wrapping)
    top = ir.make_const(ct, ct.max_value())
    if w.type.is_float():
        scale = ir.make_const(Float(64), 4294967295.0) if bits == 32 else ir.make_const(w.type, float(ct.max_value()))
        typed = cast_ir(ct, ir.Mul(scale, cast_ir(scale.type, w)))
    elif w.type.bits == bits:
        typed = w
    else:
        factor, left, shift = 1, builtins.abs(w.type.bits - bits), builtins.min(bits, w.type.bits)
        while left:
            factor, left, shift = factor + (factor << shift), left - shift, shift * 2
        if w.type.bits < bits:  # spread the weight's bits over the wider range (0xab -> 0xabab)
            typed = ir.Mul(cast_ir(ct, w), ir.make_const(ct, factor))
        else:
            typed = cast_ir(ct, ir.Div(w, ir.make_const(w.type, factor)))
    inverse = ir.Sub(top, typed)
    blend = ir.Add(ir.Mul(cast_ir(wide, z), cast_ir(wide, inverse)), ir.Mul(cast_ir(wide, o), cast_ir(wide, typed)))
    divisor = ir.make_const(wide, ct.max_value())
    rounded = ir.Div(ir.Add(blend, ir.make_const(wide, ct.max_value() // 2)), divisor)
    return cast_ir(t, ir.Add(cast_ir(ct, rounded), bias))


UNDEF = "undef"


def undef(t: Type) -> Expr:
    """Halide's undef(type): in an update, a Tuple element left as it was (`f[x] = (f[x][0] + 1,
    hl.undef(f.types()[1]))`); pyhalide rewrites it to the element's current value."""
    if not isinstance(t, Type):
        raise HalideError(f"undef takes an hl.Type, got {t!r}")
    return wrap(ir.Call(t, UNDEF, (), ir.INTRINSIC))


def is_undef(v) -> bool:
    e = getattr(v, "_ir", None) if isinstance(v, Expr) else None
    return is_undef_ir(e)


def is_undef_ir(e) -> bool:
    return isinstance(e, ir.Call) and e.call_type == ir.INTRINSIC and e.name == UNDEF


def defined_where(e: ir.Expr) -> tuple[ir.Expr | None, ir.Expr | None]:
    """Halide's undef inside an expression: (e without undef, the condition under which e is
    defined, None for always); (None, None) where e is never defined. An operation on an undef
    value is undef; a select picks a defined branch only where its condition chooses it (so
    `select(c, undef, v)` is v where c is false, and nothing elsewhere: a store left out)."""
    if not has_call(e) or not _holds_undef(e):
        return e, None
    done: dict[int, tuple] = {}  # by node: a shared subexpression is worked out once

    def walk(e):
        hit = done.get(id(e))
        if hit is None:
            hit = done[id(e)] = (e, _defined_where(e, walk))  # (e kept: its id stays its own)
        return hit[1]

    return walk(e)


def _defined_where(e: ir.Expr, walk) -> tuple[ir.Expr | None, ir.Expr | None]:
    if is_undef_ir(e):
        return None, None
    if isinstance(e, ir.Select):
        (c, c_when), (t, t_when), (f, f_when) = (walk(x) for x in (e.condition, e.true_value, e.false_value))
        if c is None or (t is None and f is None):
            return None, None
        if t is None:
            value, when = f, _both(ir.Not(c), f_when)
        elif f is None:
            value, when = t, _both(c, t_when)
        else:
            value = ir.Select(c, t, f)
            when = None if t_when is None and f_when is None else ir.Select(c, t_when or _TRUE, f_when or _TRUE)
        return value, _both(c_when, when)
    if isinstance(e, ir.Let):  # (a condition naming the let's variable keeps the let)
        (value, v_when), (body, b_when) = walk(e.value), walk(e.body)
        if value is None and body is not None and e.name not in free_variables(body):
            return body, b_when  # (an undef value the body never reads: as Halide, only that name is dead)
        if value is None or body is None:
            return None, None
        if b_when is not None and e.name in free_variables(b_when):
            b_when = ir.Let(e.name, value, b_when)
        return ir.Let(e.name, value, body), _both(v_when, b_when)
    conditions = []

    def strip(child):
        value, when = walk(child)
        conditions.append(when)
        if value is None:
            raise _Undefined
        return value

    try:
        value = map_children(e, strip)
    except _Undefined:
        return None, None
    when = None
    for c in conditions:
        when = _both(when, c)
    return value, when


class _FindUndef(IRVisitor):
    visit_once = True

    def __init__(self):
        super().__init__()
        self.found = False

    def visit_Call(self, e):
        self.found = self.found or is_undef_ir(e)
        self.visit_children(e)


def _holds_undef(e: ir.Expr) -> bool:
    finder = _FindUndef()
    finder.visit(e)
    return finder.found


_TRUE = ir.make_const(Bool(), True)


class _Undefined(Exception):
    """An undef operand makes the whole operation undef."""


def _both(a: ir.Expr | None, b: ir.Expr | None) -> ir.Expr | None:
    return b if a is None else a if b is None else ir.And(a, b)


def logical_not(a) -> Expr:
    """!a, of a boolean."""
    return logical_not_ir(to_ir(a))


def logical_and(a, b) -> Expr:
    return wrap(ir.And(*match_types(a, b)))


def logical_or(a, b) -> Expr:
    return wrap(ir.Or(*match_types(a, b)))


def likely(e) -> Expr:
    x = to_ir(e)
    return wrap(ir.Call(x.type, "likely", (x,), ir.INTRINSIC))


# ---------------------------------------------------------------- random numbers
# Halide's random_float/int/uint make a "random" call tagged with a number of its own; a Func's
# definition then replaces it (lower_random) with a hash of the seed, that number, the
# definition's free variables and a tag of the definition, so each call site and each Func draws
# independently, and the same point always draws the same value.
_random_numbers = itertools.count()  # Halide's random_number_counter
_random_tags = itertools.count()  # Halide's random_variable_counter: one per definition


def _random_call(t: Type, seed, what: str, seed_types: tuple, allowed: str) -> ir.Expr:
    args = []
    number = next(_random_numbers)
    if seed is not None:
        s = to_ir(seed)
        if s.type not in seed_types:
            raise HalideError(f"Error: The seed passed to {what} must have type {allowed}, but instead is "
                              f"{wrap(s)} of type {cxx_type_name(s.type)}\n")
        args.append(s)
    args.append(ir.IntImm(Int(32), number))
    return ir.Call(t, "random", tuple(args), ir.INTRINSIC)


def random_float(seed=None) -> Expr:
    """A uniform float in [0, 1], a fixed pseudo-random function of the point (and the seed)."""
    return wrap(_random_call(Float(32), seed, "random_float", (Int(32),), "Int(32)"))


def random_uint(seed=None) -> Expr:
    """A uniform UInt(32), a fixed pseudo-random function of the point (and the seed)."""
    return wrap(_random_call(UInt(32), seed, "random_int", (Int(32), UInt(32)), "Int(32) or UInt(32)"))


def random_int(seed=None) -> Expr:
    """random_uint's bits as an Int(32)."""
    return wrap(ir.Reinterpret(Int(32), to_ir(random_uint(seed))))


_C0, _C1, _C2 = 576942909, 1121052041, 1040796640  # Halide's: C1 odd and C2 even make a permutation
_U32 = UInt(32)


_let_names = itertools.count()


def _let_name() -> str:
    """A unique Let name that is not a generated name (lowering renames generated names in
    Variables, not in Lets); it ends in a letter, as no generated name does."""
    return f"random_{next(_let_names)}_h"


def _uint_const(e: ir.Expr) -> int | None:
    return e.value if type(e) is ir.IntImm and e.type.is_uint() and not e.type.is_bool() else None


def _rng32(x: ir.Expr) -> ir.Expr:
    """A fixed pseudo-random permutation of the 32-bit unsigned integers: (C2 x + C1) x + C0."""
    i = _uint_const(x)
    if i is not None:
        return ir.make_const(_U32, ((_C2 * i + _C1) * i + _C0) % 2**32)
    c = ir.make_const
    return ir.Add(ir.Mul(ir.Add(ir.Mul(c(_U32, _C2), x), c(_U32, _C1)), x), c(_U32, _C0))


def _random_bits(terms: list[ir.Expr]) -> ir.Expr:
    """Halide's hash of Int(32)/UInt(32) terms: permute, add the next term, permute again ..."""
    result = _rng32(fold_cast(_U32, terms[0]))
    for e in terms[1:]:
        r, k = _uint_const(result), _uint_const(e)
        if r is not None and k is not None:
            result = _rng32(ir.make_const(_U32, r + k))
        else:
            name = _let_name()
            result = ir.Let(name, ir.Add(result, fold_cast(_U32, e)), _rng32(ir.Variable(name, _U32)))
    # The low bytes have a poor period: mix in the high ones (through a Let, so the hash appears once).
    name = _let_name()
    r = wrap(ir.Variable(name, _U32))
    return ir.Let(name, result, to_ir(r ^ (r >> 16)))


def _random_float_of(terms: list[ir.Expr]) -> ir.Expr:
    """Exponent 0 and 23 random mantissa bits: a float in [1, 2), less one (clamped for bounds inference)."""
    bits = (127 << 23) | (wrap(_random_bits(terms)) >> 9)
    f = ir.Sub(ir.Reinterpret(Float(32), to_ir(bits)), ir.FloatImm(Float(32), 1.0))
    return ir.Max(ir.Min(f, ir.FloatImm(Float(32), 1.0)), ir.FloatImm(Float(32), 0.0))


def next_random_tag() -> int:
    """A new tag for one definition's random calls (Halide's random_variable_counter)."""
    return next(_random_tags)


def lower_random(e: ir.Expr, free_vars, tag: int) -> ir.Expr:
    """Replace e's random calls with their values at the point named by free_vars (the definition's
    pure Vars, then its RVars, as IR), as Halide does when a Func is defined."""
    from .ir_mutator import IRMutator

    extra = [*reversed([*free_vars, ir.IntImm(Int(32), tag)])]  # the tag, then innermost variables last

    class _LowerRandom(IRMutator):
        def visit_Call(self, op):
            if op.name != "random" or op.call_type != ir.INTRINSIC:
                return self.default(op)
            terms = [*op.args, *extra]
            if op.type == Float(32):
                return _random_float_of(terms)
            if op.type == Int(32):
                return fold_cast(Int(32), _random_bits(terms))
            return _random_bits(terms)

    return _LowerRandom().mutate(e)


# ---------------------------------------------------------------- math
def _float_arg(e) -> ir.Expr:
    x = to_ir(e)
    return x if x.type.is_float() else cast_ir(Float(32, x.type.lanes), x)


def _math1(name: str):
    def f(e) -> Expr:
        x = _float_arg(e)
        if x.type.is_bfloat() and name != "round":  # (as Halide: in float32; round keeps bfloat16)
            if name == "erf":
                raise HalideError("erf only takes float arguments")
            x = cast_ir(Float(32, x.type.lanes), x)
        return wrap(ir.Call(x.type, name, (x,), ir.EXTERN))

    f.__name__ = name
    f.__doc__ = f"{name} in floating point (integers and bfloat16 are converted to Float(32))."
    return f


sqrt, exp, log = _math1("sqrt"), _math1("exp"), _math1("log")
sin, cos, tan = _math1("sin"), _math1("cos"), _math1("tan")
asin, acos, atan = _math1("asin"), _math1("acos"), _math1("atan")
sinh, cosh, tanh = _math1("sinh"), _math1("cosh"), _math1("tanh")
asinh, acosh, atanh = _math1("asinh"), _math1("acosh"), _math1("atanh")
floor, ceil, round, trunc = _math1("floor"), _math1("ceil"), _math1("round"), _math1("trunc")
erf = _math1("erf")


def _math2(name: str):
    """A two-argument math function whose first argument picks the type, as in Halide: Float(64)
    or Float(16) stays, anything else is Float(32); the second argument is cast to it."""
    def f(a, b) -> Expr:
        x, y = to_ir(a), to_ir(b)
        t = x.type.element_of() if x.type.element_of() in (Float(64), Float(16)) else Float(32)
        lanes = builtins_max(x.type.lanes, y.type.lanes)
        x, y = cast_ir(t.with_lanes(lanes), x), cast_ir(t.with_lanes(lanes), y)
        return wrap(ir.Call(x.type, name, (x, y), ir.EXTERN))

    f.__name__ = name
    return f


atan2 = _math2("atan2")
_float_pow = _math2("pow")


def _integer_power(e: ir.Expr, p: int) -> ir.Expr:
    """e ** p by repeated squaring in e's own type (1 / e ** -p for p < 0), as Halide's pow
    computes a constant integer power."""
    if p == 0:
        return ir.make_const(e.type, 1)
    if p == 1:
        return e
    if p < 0:
        return ir.Div(ir.make_const(e.type, 1), _integer_power(e, -p))
    half = _integer_power(e, p >> 1)
    square = ir.Mul(half, half)
    return ir.Mul(square, e) if p & 1 else square


def _constant_integer(e: ir.Expr) -> int | None:
    """A signed integer constant's value (Halide's as_const_int); else None."""
    if isinstance(e, ir.Broadcast):
        e = e.value
    return e.value if isinstance(e, ir.IntImm) and e.type.is_int() else None


def pow(a, b) -> Expr:
    """a ** b: a constant integer power is repeated multiplication in a's type (so integers stay
    integers); otherwise pow in floating point, of a's type if Float(64) or Float(16), else Float(32)."""
    power = _constant_integer(to_ir(b))
    if power is not None:
        return wrap(_integer_power(to_ir(a), power))
    return _float_pow(a, b)


def hypot(a, b) -> Expr:
    """sqrt(a * a + b * b), in the arithmetic of a and b (Halide's definition)."""
    x, y = wrap(to_ir(a)), wrap(to_ir(b))
    return sqrt(x * x + y * y)


def _fast_float_arg(e, name: str) -> ir.Expr:
    x = _float_arg(e)
    if x.type.is_bfloat():
        raise HalideError(f"{name} only takes float16 or float32 arguments")
    return x


def fast_inverse(e) -> Expr:
    x = _fast_float_arg(e, "fast_inverse")
    return wrap(ir.Div(ir.make_const(x.type, 1.0), x))


def fast_inverse_sqrt(e) -> Expr:
    x = _fast_float_arg(e, "fast_inverse_sqrt")
    return wrap(ir.Div(ir.make_const(x.type, 1.0), to_ir(sqrt(wrap(x)))))


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


def require(condition, value, *error_args) -> Expr:
    """`value`, where `condition` holds; where it does not, the pipeline stops with the error
    "Requirement Failed: (condition) error_args..." (Halide's require: a precondition checked as
    the value is computed). `error_args` are Exprs (their values at the first point that failed)
    or strings."""
    from .codegen.calling_convention import ERROR_VALUES

    c = to_ir(condition) if not isinstance(condition, bool) else ir.IntImm(Bool(), int(condition))
    if not c.type.is_bool():
        raise HalideError(f"require: the condition has type {c.type}, not bool")
    v = to_ir(value)
    shown = str(wrap(c))
    shown = shown if shown.startswith("(") and shown.endswith(")") else f"({shown})"
    text = [shown.replace("{", "{{").replace("}", "}}")]
    values = []
    for a in error_args:
        if isinstance(a, str):
            text.append(a.replace("{", "{{").replace("}", "}}"))
        else:
            values.append(to_ir(a))
            text.append("{}")
    if len(values) > ERROR_VALUES:
        raise HalideError(f"require: at most {ERROR_VALUES} Expr error arguments are reported, got {len(values)}")
    message = ir.StringImm("Requirement Failed: " + " ".join(text))
    return wrap(ir.Call(v.type, "require", (c, v, message, *values), ir.INTRINSIC))


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
