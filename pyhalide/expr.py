"""The front-end Expr: a handle on an IR expression with Python operators and Halide's typing rules."""

from __future__ import annotations

import numpy as np

from . import ir
from .errors import HalideError
from .types import Bool, Float, Int, Type, promote


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
        raise HalideError(
            "An Expr has no truth value: use hl.select for conditions, and & | ~ instead of and/or/not"
        )

    def __hash__(self):
        return id(self)

    def __str__(self):  # the expression alone, as error messages quote it (Halide's str is its repr)
        from .ir_printer import expr_to_string

        return expr_to_string(self.ir()) if self.defined() else "<undefined Expr>"

    def __repr__(self):  # as Halide's bindings print it
        return f"<halide.Expr of type {self.type()}: {self}>" if self.defined() else "<halide.Expr undefined>"

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


def const_from_python(value) -> ir.Expr:
    """A Python number as an IR constant, with Halide's default types."""
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
        return ir.make_const(Float(32), value)
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
    """A Python number combined with an Expr of type t takes t's type, as in Halide."""
    if isinstance(value, bool | np.bool_):
        value = int(value)
    if isinstance(value, np.number):
        value = value.item()
    if not isinstance(value, int | float):
        raise HalideError(f"Can't combine {value!r} (a {type(value).__name__}) with an Expr of type {t}")
    if isinstance(value, float):
        if t.is_float():
            return ir.make_const(t, value)
        return ir.make_const(Float(32, t.lanes), value)
    if t.is_float():
        return ir.make_const(t, float(value))
    if t.is_bool():
        if value in (0, 1):
            return ir.make_const(t, value)
        raise HalideError(f"Integer constant {value} cannot be combined with a boolean Expr")
    if not t.element_of().can_represent(value):
        raise HalideError(
            f"Integer constant {value} will be implicitly coerced to type {t.element_of()}, "
            "which changes its value"
        )
    return ir.make_const(t, value)


def match_types(a, b) -> tuple[ir.Expr, ir.Expr]:
    """Both operands as IR of one common type, by Halide's promotion rules."""
    a_py, b_py = is_python_number(a), is_python_number(b)
    if a_py and b_py:
        return const_from_python(a), const_from_python(b)
    if a_py:
        bi = to_ir(b)
        ai = coerce_python(a, bi.type)
        if ai.type != bi.type:  # int Expr with a float literal: both become Float(32)
            bi = cast_ir(ai.type, bi)
        return ai, bi
    if b_py:
        ai = to_ir(a)
        bi = coerce_python(b, ai.type)
        if ai.type != bi.type:
            ai = cast_ir(bi.type, ai)
        return ai, bi
    ai, bi = to_ir(a), to_ir(b)
    t = promote(ai.type, bi.type)
    return cast_ir(t, ai), cast_ir(t, bi)


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
