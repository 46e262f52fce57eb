"""The front-end Expr: a handle on an IR expression with Python operators and Halide's typing rules."""

from __future__ import annotations

import math
import struct
import sys
import warnings

import numpy as np

from . import ir
from .errors import HalideError
from .types import Bool, Float, Int, Type, promote, rounded


class Expr:
    """An expression in the algorithm language. Wraps an immutable IR node.

    `hl.Expr()` is the undefined Expr; `hl.Expr(3)` is an Int(32) constant, `hl.Expr(1.5)` Float(32).
    """

    __slots__ = ("_ir",)

    def __init__(self, value=None):
        self._ir = None if value is None else to_ir(value)

    # Subclasses (Var, FuncRef, Param ...) compute their IR lazily.
    def ir(self) -> ir.Expr:
        if self._ir is None:
            raise HalideError("Use of an undefined Expr")
        return self._ir

    def defined(self) -> bool:
        return self._ir is not None

    def type(self) -> Type:
        return self.ir().type

    def __bool__(self):
        from .errors import HalideValueError
        from .ir_printer import expr_to_string

        raise HalideValueError(
            f"The halide.Expr ({expr_to_string(self.ir())}) cannot be converted to a bool. If this error occurs "
            "using the 'and'/'or' keywords, consider using the '&'/'|' operators instead."
        )

    def __hash__(self):
        return id(self)

    def __str__(self):  # the expression alone, as error messages quote it (Halide's str is its repr)
        from .ir_printer import expr_to_string

        return expr_to_string(self.ir()) if self.defined() else "<undefined halide.Expr>"

    def __repr__(self):  # as Halide's bindings print it
        return f"<halide.Expr of type {self.type()}: {self}>" if self.defined() else "<undefined halide.Expr>"

    def logical_not(self) -> Expr:
        """!e, as Halide's bindings offer it on every Expr-like (Var, FuncRef, Param ...)."""
        return logical_not_ir(to_ir(self))

    # arithmetic
    def __add__(self, o):
        return binary(ir.Add, self, o)

    def __radd__(self, o):
        return binary(ir.Add, o, self)

    def __sub__(self, o):
        return binary(ir.Sub, self, o)

    def __rsub__(self, o):
        return binary(ir.Sub, o, self)

    def __mul__(self, o):
        return binary(ir.Mul, self, o)

    def __rmul__(self, o):
        return binary(ir.Mul, o, self)

    def __truediv__(self, o):
        return binary(ir.Div, self, o)

    def __rtruediv__(self, o):
        return binary(ir.Div, o, self)

    def __floordiv__(self, o):
        return floor_div(self, o)

    def __rfloordiv__(self, o):
        return floor_div(o, self)

    def __mod__(self, o):
        return binary(ir.Mod, self, o)

    def __rmod__(self, o):
        return binary(ir.Mod, o, self)

    def __pow__(self, o):
        from .operators import pow as hl_pow

        return hl_pow(self, o)

    def __rpow__(self, o):
        from .operators import pow as hl_pow

        return hl_pow(o, self)

    def __neg__(self):
        e = self.ir()
        return wrap(ir.Sub(ir.make_const(e.type, 0), e))

    def __pos__(self):
        return self

    def __abs__(self):
        from .operators import abs as hl_abs

        return hl_abs(self)

    # comparisons
    def __eq__(self, o):
        return binary(ir.EQ, self, o)

    def __ne__(self, o):
        return binary(ir.NE, self, o)

    def __lt__(self, o):
        return binary(ir.LT, self, o)

    def __le__(self, o):
        return binary(ir.LE, self, o)

    def __gt__(self, o):
        return binary(ir.GT, self, o)

    def __ge__(self, o):
        return binary(ir.GE, self, o)

    # logic and bits
    def __and__(self, o):
        return bitwise("bitwise_and", ir.And, self, o)

    def __rand__(self, o):
        return bitwise("bitwise_and", ir.And, o, self)

    def __or__(self, o):
        return bitwise("bitwise_or", ir.Or, self, o)

    def __ror__(self, o):
        return bitwise("bitwise_or", ir.Or, o, self)

    def __xor__(self, o):
        return bitwise("bitwise_xor", ir.NE, self, o)

    def __rxor__(self, o):
        return bitwise("bitwise_xor", ir.NE, o, self)

    def __invert__(self):
        e = self.ir()
        if e.type.is_bool():
            return wrap(ir.Not(e))
        if e.type.is_float():
            raise HalideError(f"~ of a float Expr ({e.type})")
        return wrap(ir.Call(e.type, "bitwise_not", (e,), ir.INTRINSIC))

    def __lshift__(self, o):
        return shift("shift_left", self, o)

    def __rlshift__(self, o):
        return shift("shift_left", o, self)

    def __rshift__(self, o):
        return shift("shift_right", self, o)

    def __rrshift__(self, o):
        return shift("shift_right", o, self)


def wrap(node: ir.Expr) -> Expr:
    e = Expr.__new__(Expr)
    e._ir = node
    return e


def is_python_number(v) -> bool:
    """True for plain numbers (which take the type of the Expr they meet), false for Expr-likes."""
    return not isinstance(v, Expr | ir.Expr) and not hasattr(v, "_as_expr")


def warn_outside_package(message: str, category=RuntimeWarning):
    """Warn at the user's line (the first frame outside pyhalide), as Halide's C++ bindings do."""
    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] == "pyhalide":
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def float_literal(value: float) -> float:
    """A Python float as Halide's bindings read it: a float32, with a RuntimeWarning when that
    changes its bits (0.75 is exact and silent; 0.1 warns)."""
    value = float(value)
    with np.errstate(over="ignore"):
        rounded = float(np.float32(value))
    if struct.pack("<d", rounded) != struct.pack("<d", value):
        warn_outside_package(
            f"The floating-point value {value:.17f} will be interpreted as a float32 by Halide and lose precision; "
            "add an explicit `f32()` or `f64()`` cast to avoid this warning."
        )
    return rounded


def cxx_type_name(t: Type) -> str:
    """A type as Halide's C++ messages print it (bool is uint1)."""
    base = "uint1" if t.is_bool() else f"{t.code}{t.bits}"
    return base if t.lanes == 1 else f"{base}x{t.lanes}"


def cxx_const_text(t: Type, value) -> str:
    """A constant as Halide's C++ IR printer writes it in messages: 44, (uint8)44, 2.500000f."""
    if t.is_float():
        return f"{float(value):f}" + {16: "h", 32: "f"}.get(t.bits, "")
    if t.is_int() and t.bits == 32:
        return str(value)
    return f"({cxx_type_name(t)}){value}"


def _int_fits(t: Type, value: int) -> bool:
    """Halide's Type::can_represent(int64): exactly, for float types too."""
    if t.is_float():
        as_float = rounded(t, value)
        return math.isfinite(as_float) and int(as_float) == value
    return t.element_of().can_represent(value)


def _representable_int(value: int, t: Type) -> ir.Expr:
    """Halide's operator(Expr, int): the int takes the Expr's type, if that keeps its value."""
    if not _int_fits(t, value):
        scalar = t.element_of()
        shown = value & 1 if scalar.is_bool() else ir.make_const(scalar, value).value  # the bits Halide keeps
        raise HalideError(
            f"Error: Integer constant {value} will be implicitly coerced to type {cxx_type_name(scalar)}, "
            f"which changes its value to {cxx_const_text(scalar, shown)}.\n"
        )
    return ir.make_const(t, value)


def const_from_python(value) -> ir.Expr:
    """A Python number as an IR constant, with the types Halide's bindings give it: bool, Int(32),
    Int(64) past int32, Float(32) for a float (warning where that rounds). numpy scalars keep
    their dtype."""
    if isinstance(value, bool | np.bool_):
        return ir.IntImm(Bool(), int(bool(value)))
    if isinstance(value, np.number):
        from .types import from_numpy

        return ir.make_const(from_numpy(value.dtype), value.item())
    if isinstance(value, int):
        if Int(32).can_represent(value):
            return ir.IntImm(Int(32), value)
        if Int(64).can_represent(value):
            return ir.IntImm(Int(64), value)
        raise HalideError(f"Integer constant {value} does not fit in 64 bits")
    if isinstance(value, float):
        return ir.FloatImm(Float(32), float_literal(value))
    raise HalideError(f"Cannot convert {value!r} of type {type(value).__name__} to an Expr")


def to_ir(value) -> ir.Expr:
    """Convert anything Expr-like (Expr, Var, FuncRef, Param, RDom, Python number) to an IR node."""
    if isinstance(value, Expr):
        return value.ir()
    if isinstance(value, ir.Expr):
        return value
    as_expr = getattr(value, "_as_expr", None)
    if as_expr is not None:
        return as_expr().ir()
    return const_from_python(value)


def coerce_python(value, t: Type) -> ir.Expr:
    """A Python number meeting an Expr of type t, as Halide's bindings combine them: an int that
    fits in 32 bits takes t (an error if that changes its value); a wider int that t cannot hold
    is an Int(64) constant, and a float a Float(32) one (warning if rounded), either widened to t
    where t is the wider type. The result may so differ from t; callers promote."""
    if isinstance(value, bool | np.bool_):
        value = int(value)
    if isinstance(value, np.number):
        value = value.item()
    if not isinstance(value, int | float):
        raise HalideError(f"Can't combine {value!r} (a {type(value).__name__}) with an Expr of type {t}")
    if t.is_handle():
        if isinstance(value, float):
            raise HalideError(f"Can't do arithmetic on opaque pointer types: an Expr of type {t}, {value}")
        raise HalideError(f"Integer constant {value} will be implicitly coerced to type {t}, but Halide does not "
                          "support pointer arithmetic.")
    if isinstance(value, int):
        if Int(32).can_represent(value) or (not t.is_float() and _int_fits(t, value)):
            # (Halide's bindings make an int past 32 bits an Int(64) constant even where t holds it:
            # pyhalide keeps such an int in t, as its tests of u32 / (2**32 - 1) expect.)
            return _representable_int(value, t)
        if not Int(64).can_represent(value):  # past int64 Halide's bindings take it as a double
            value = float(value)
        else:
            c = ir.IntImm(Int(64), value)
            return fold_cast(promote(t, c.type), c)
    c = ir.FloatImm(Float(32), float_literal(value))
    return fold_cast(promote(t, c.type), c) if t.is_float() else ir.make_const(Float(32, t.lanes), c.value)


def fold_cast(t: Type, e: ir.Expr) -> ir.Expr:
    """cast_ir, folding a constant as Halide's cast() does (make_const): a float truncated toward
    zero, then the integer's low bits (a bool takes the lowest: cast(Bool, 2) is false)."""
    if t.is_handle() != e.type.is_handle():
        if t.is_handle():
            raise HalideError(f'Can\'t cast "{wrap(e)}" to a handle. The only legal cast from scalar types to a handle '
                              f'is: reinterpret(Handle(), cast<uint64_t>({wrap(e)}));')
        raise HalideError(f'Can\'t cast handle "{wrap(e)}" to type {t}. The only legal cast from handles to scalar '
                          f'types is: reinterpret(UInt(64), {wrap(e)});')
    if e.type == t or type(e) not in (ir.IntImm, ir.FloatImm):
        return cast_ir(t, e)
    value = e.value
    if not t.is_float():
        if not math.isfinite(value):
            return cast_ir(t, e)
        value = int(value)
        if t.element_of().is_bool():
            value &= 1
    return ir.make_const(t, value)


def as_expr(value):
    """A Python number as the Expr Halide's bindings make of it when a function takes an Expr
    (Int(32), Int(64) past it, Float(32)); anything else as it is."""
    return wrap(const_from_python(value)) if is_python_number(value) else value


def match_types(a, b) -> tuple[ir.Expr, ir.Expr]:
    """Both operands as IR of one common type, by Halide's promotion rules."""
    a_py, b_py = is_python_number(a), is_python_number(b)
    if a_py and b_py:
        ai, bi = const_from_python(a), const_from_python(b)
    elif a_py:
        bi = to_ir(b)
        ai = coerce_python(a, bi.type)
    elif b_py:
        ai = to_ir(a)
        bi = coerce_python(b, ai.type)
    else:
        ai, bi = to_ir(a), to_ir(b)
    if ai.type != bi.type and (ai.type.is_handle() or bi.type.is_handle()):
        raise HalideError(f"Can't do arithmetic on opaque pointer types: {wrap(ai)}, {wrap(bi)}")
    t = promote(ai.type, bi.type)
    return fold_cast(t, ai), fold_cast(t, bi)


def logical_not_ir(e: ir.Expr) -> Expr:
    """Halide's operator!: only of a boolean."""
    if not e.type.is_bool():
        raise HalideError("Error: argument of Not is not a bool\n")
    return wrap(ir.Not(e))


def cast_ir(t: Type, e: ir.Expr) -> ir.Expr:
    if e.type == t:
        return e
    if e.type.lanes != t.lanes:
        if e.type.lanes == 1:
            e = ir.Broadcast(e, t.lanes)
            if e.type == t:
                return e
        else:
            raise HalideError(f"Cannot cast {e.type} to {t}: lane counts differ")
    return ir.Cast(t, e)


def binary(op, a, b) -> Expr:
    ai, bi = match_types(a, b)
    return wrap(op(ai, bi))


def floor_div(a, b) -> Expr:
    ai, bi = match_types(a, b)
    if ai.type.is_float():
        from .operators import floor

        return floor(wrap(ir.Div(ai, bi)))
    return wrap(ir.Div(ai, bi))


def bitwise(intrinsic: str, bool_op, a, b) -> Expr:
    ai, bi = match_types(a, b)
    if ai.type.is_bool():
        return wrap(bool_op(ai, bi))
    if ai.type.is_float():
        raise HalideError(f"{intrinsic} of float Exprs ({ai.type})")
    return wrap(ir.Call(ai.type, intrinsic, (ai, bi), ir.INTRINSIC))


def shift(intrinsic: str, a, b) -> Expr:
    """a << b / a >> b with Halide's typing: the result has a's type (widened to b's bit width if b
    is wider); b keeps its signedness (a negative signed amount shifts the other way). A Python int
    amount becomes an unsigned constant of a's width, a negative one reversing the direction."""
    if is_python_number(b) and not is_python_number(a):
        ai = to_ir(a)
        if ai.type.is_float():
            raise HalideError(f"{intrinsic} of float Exprs ({ai.type})")
        if isinstance(b, float | np.floating):
            raise HalideError(f"{intrinsic}: the shift amount {b!r} is not an integer")
        amount = int(b)
        if amount < 0:
            intrinsic = "shift_right" if intrinsic == "shift_left" else "shift_left"
            amount = -amount
        ut = ai.type.with_code("uint") if not ai.type.is_bool() else ai.type
        if not ut.element_of().can_represent(amount):
            raise HalideError(f"{intrinsic}: shift amount {amount} does not fit in {ut.element_of()}")
        return wrap(ir.Call(ai.type, intrinsic, (ai, ir.make_const(ut, amount)), ir.INTRINSIC))
    ai, bi = (to_ir(int(v) if isinstance(v, bool | np.bool_) else v) for v in (a, b))
    for e in (ai, bi):
        if e.type.is_float():
            raise HalideError(f"{intrinsic} of float Exprs ({e.type})")
    bits = max(ai.type.bits, bi.type.bits)  # widen the narrower, keeping its signedness (bool is uint)
    ai, bi = cast_ir(ai.type.with_bits(bits), ai), cast_ir(bi.type.with_bits(bits), bi)
    return wrap(ir.Call(ai.type, intrinsic, (ai, bi), ir.INTRINSIC))
