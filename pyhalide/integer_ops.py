"""Halide's integer intrinsics that avoid overflow, built from ordinary Exprs: widening and
saturating arithmetic, halving adds, rounding-to-zero division, rounding and widening shifts,
multiply-shifts, extract_bits and concat_bits; plus fract, the value-preserving hints
(strict_float, likely_if_innermost, unsafe_promise_clamped), evaluate (and evaluate_may_gpu),
vars and funcs. The widening ones compute exactly in the type of twice the bits (8-, 16- and
32-bit integers) and narrow as Halide defines: saturating, or wrapping for halving_sub."""

from __future__ import annotations

import builtins

from . import ir
from .bounds import UNSAFE_PROMISE_CLAMPED
from .errors import HalideError
from .expr import Expr, as_expr, cast_ir, coerce_python, is_python_number, match_types, to_ir, wrap
from .types import Type


def _same_integers(name: str, a, b) -> tuple[ir.Expr, ir.Expr]:
    """Both operands in one integer type (Halide's match_types; a Python number is an Expr of its
    own type first, as Halide's bindings pass it)."""
    x, y = match_types(as_expr(a), as_expr(b))
    return _integer(name, x), y


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


def _integer(name: str, e) -> ir.Expr:
    """e as IR, which must be an integer (not bool)."""
    x = to_ir(e)
    if not (x.type.is_int() or x.type.is_uint()) or x.type.is_bool():
        raise HalideError(f"{name} takes integers, got {x.type}")
    return x


def _widen_right(name: str, a, b, op) -> Expr:
    x, y = _integer(name, a), _integer(name, b)
    if x.type.bits != 2 * y.type.bits or x.type.lanes != y.type.lanes:
        raise HalideError(f"{name}: the first operand must have twice the bits of the second, got {x.type} and "
                          f"{y.type}")
    return wrap(op(x, cast_ir(x.type, y)))


def widen_right_add(a, b) -> Expr:
    """a + b, where a has twice b's bits: b widened, the sum wrapping in a's type."""
    return _widen_right("widen_right_add", a, b, ir.Add)


def widen_right_sub(a, b) -> Expr:
    """a - b, where a has twice b's bits: b widened, the difference wrapping in a's type."""
    return _widen_right("widen_right_sub", a, b, ir.Sub)


def widen_right_mul(a, b) -> Expr:
    """a * b, where a has twice b's bits: b widened, the product wrapping in a's type."""
    return _widen_right("widen_right_mul", a, b, ir.Mul)


def _widened_for_shift(name: str, a, b) -> ir.Expr:
    """a in twice its bits, after taking the bits of a wider Expr shift (Halide's match_bits)."""
    x = _integer(name, a)
    if not is_python_number(b):
        bits = _integer(name, b).type.bits
        if bits > x.type.bits:
            x = cast_ir(x.type.with_bits(bits), x)
    return cast_ir(_wide(name, x.type), x)


def widening_shift_left(a, b) -> Expr:
    """a << b in the type of twice a's bits (a negative b shifts right, as `<<` does)."""
    return wrap(_widened_for_shift("widening_shift_left", a, b)) << b


def widening_shift_right(a, b) -> Expr:
    """a >> b in the type of twice a's bits (a negative b shifts left, as `>>` does)."""
    return wrap(_widened_for_shift("widening_shift_right", a, b)) >> b


def _rounded_right_shift(x: Expr, b: Expr) -> Expr:
    """x >> b (b > 0) rounded to the nearest integer, ties up: the floor plus the last bit shifted
    out. (x + (1 << (b - 1))) >> b without the add, which could overflow; it fits x's type."""
    return (x >> b) + ((x >> (b - 1)) & 1)


def _constant_shift(name: str, a, b: int) -> tuple[Expr, Expr]:
    """a, and a Python int shift as Halide's bindings take it: an unsigned constant of a's bits,
    positive (the caller's direction) or negated (the other direction)."""
    x = wrap(_integer(name, a))
    t = to_ir(x).type.with_code("uint").element_of()
    if not t.can_represent(builtins.abs(b)):
        raise HalideError(f"{name}: the shift {b} does not fit in {t}")
    return x, wrap(ir.make_const(t, builtins.abs(b)))


def rounding_shift_right(a, b) -> Expr:
    """a >> b rounded to the nearest integer (ties up); a negative b shifts left, wrapping."""
    if isinstance(b, int) and not isinstance(b, bool):
        x, shift = _constant_shift("rounding_shift_right", a, b)
        return rounding_shift_right(x, shift) if b >= 0 else rounding_shift_left(x, shift)
    x, shift = wrap(_integer("rounding_shift_right", a)), wrap(_integer("rounding_shift_right", b))
    left = x if to_ir(shift).type.is_uint() else x << (0 - shift)
    return wrap(ir.Select(to_ir(shift > 0), to_ir(_rounded_right_shift(x, shift)), to_ir(left)))


def rounding_shift_left(a, b) -> Expr:
    """a << b, wrapping; a negative b shifts right rounding to the nearest integer (ties up)."""
    if isinstance(b, int) and not isinstance(b, bool):
        x, shift = _constant_shift("rounding_shift_left", a, b)
        return rounding_shift_left(x, shift) if b >= 0 else rounding_shift_right(x, shift)
    x, shift = wrap(_integer("rounding_shift_left", a)), wrap(_integer("rounding_shift_left", b))
    if to_ir(shift).type.is_uint():
        return x << shift
    return wrap(ir.Select(to_ir(shift >= 0), to_ir(x << shift), to_ir(_rounded_right_shift(x, 0 - shift))))


def _product_shifted(name: str, a, b, q, rounding: bool) -> Expr:
    t, product = _in_wide(name, a, b, ir.Mul)
    shift = wrap(_integer(name, q))
    shifted = wrap(product) >> shift
    if rounding:
        shifted = wrap(ir.Select(to_ir(shift > 0), to_ir(_rounded_right_shift(wrap(product), shift)), to_ir(shifted)))
    return wrap(_clamped_to(t, to_ir(shifted)))


def mul_shift_right(a, b, q) -> Expr:
    """(a * b) >> q, the product exact in twice the bits, the result saturated to a's type."""
    return _product_shifted("mul_shift_right", a, b, q, False)


def rounding_mul_shift_right(a, b, q) -> Expr:
    """(a * b) >> q rounded to the nearest integer (ties up), saturated to a's type."""
    return _product_shifted("rounding_mul_shift_right", a, b, q, True)


def extract_bits(t: Type, e, lsb) -> Expr:
    """The bits of e from lsb up, as many as t has, as a t (bits above e's are zero)."""
    x = _integer_or_float("extract_bits", e)
    u = Type("uint", x.type.bits, x.type.lanes)
    shifted = wrap(ir.Reinterpret(u, x) if x.type != u else x) >> lsb
    out = cast_ir(Type("uint", t.bits, x.type.lanes), to_ir(shifted))
    return wrap(out if t.is_uint() else ir.Reinterpret(t.with_lanes(x.type.lanes), out))


def concat_bits(parts) -> Expr:
    """The bits of the parts side by side, the first least significant: n parts of one integer
    type make an integer of n times the bits and the same signedness."""
    xs = [_integer("concat_bits", p) for p in parts]
    if not xs or any(x.type != xs[0].type for x in xs):
        raise HalideError(f"concat_bits takes one or more Exprs of one integer type, got "
                          f"{', '.join(str(x.type) for x in xs) or 'none'}")
    t, n = xs[0].type, len(xs)
    if t.bits * n > 64:
        raise HalideError(f"concat_bits: {n} parts of {t} make more than 64 bits")
    wide = Type("uint", t.bits * n, t.lanes)
    narrow = Type("uint", t.bits, t.lanes)
    total = None
    for k, x in enumerate(xs):
        bits = cast_ir(wide, x if t.is_uint() else ir.Reinterpret(narrow, x))
        term = wrap(bits) << wrap(ir.make_const(wide, k * t.bits))
        total = term if total is None else total | term
    out = to_ir(total)
    return wrap(out if t.is_uint() else ir.Reinterpret(Type(t.code, t.bits * n, t.lanes), out))


def _integer_or_float(name: str, e) -> ir.Expr:
    x = to_ir(e)
    if x.type.is_bool():
        raise HalideError(f"{name} takes a number, got {x.type}")
    return x


def strict_float(e) -> Expr:
    """e, with float arithmetic left exactly as written: pyhalide never reassociates floats."""
    return wrap(to_ir(e))


def likely_if_innermost(e) -> Expr:
    """e, marked likely where it is in the innermost loop: a hint for loop partitioning, which
    pyhalide's own partitioning makes without it (the value is e)."""
    return wrap(to_ir(e))


MEMOIZE_TAG = "memoize_tag"


def memoize_tag(result, *tags) -> Expr:
    """result, whose value a memoized Func's cache key takes to be given by the tags (Params, say
    a hash of an input image's contents), not by what result reads: a memoized computation may
    read an input image through it. Lowering keeps result and adds the tags to the key
    (lowering/memoization.py)."""
    value = to_ir(result)
    return wrap(ir.Call(value.type, MEMOIZE_TAG, (value, *(to_ir(t) for t in tags)), ir.INTRINSIC))


def unsafe_promise_clamped(value, lo, hi) -> Expr:
    """value, which the caller promises lies in [lo, hi] (an undefined Expr: no bound on that
    side). Bounds inference takes the promise, so a Func read or written at data-dependent sites
    (a scatter to indices from a buffer) needs no clamp; nothing checks it, and it is dropped
    before code generation (strip_promises)."""
    v = to_ir(value)
    t = v.type

    def bound(b, what: str, default) -> ir.Expr:
        if isinstance(b, Expr) and not b.defined():
            return ir.make_const(t, default)
        e = coerce_python(b, t) if is_python_number(b) else to_ir(b)
        if e.type != t and not t.can_represent(e.type):
            raise HalideError(f"unsafe_promise_clamped {what} argument (type {e.type}) could not be cast losslessly "
                              f"to {t}")
        return cast_ir(t, e)

    bounds = (bound(lo, "min", t.min_value()), bound(hi, "max", t.max_value()))
    return wrap(ir.Call(t, UNSAFE_PROMISE_CLAMPED, (v, *bounds), ir.INTRINSIC))


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
    return wrap(x) - trunc(wrap(x))  # (of a bfloat16, trunc is a float32: so is the difference, as Halide's)


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
