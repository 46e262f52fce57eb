"""Constant folding with Halide's semantics: wrap-around integers, Euclidean division, div by 0 = 0."""

from __future__ import annotations

import math

from .. import ir
from ..types import Type, rounded


def euclid_div(a: int, b: int) -> int:
    if b == 0:
        return 0
    q = a // b if b > 0 else -(a // -b)
    return q


def euclid_mod(a: int, b: int) -> int:
    if b == 0:
        return 0
    return a - euclid_div(a, b) * b


def _float(t: Type, v: float) -> float:
    """Round a Python float to t's precision."""
    return rounded(t, v) if t.bits < 64 else float(v)


def fold_binary(node: ir.BinaryOp, a, b) -> ir.Expr | None:
    """Fold a binary op of two constants (scalars), or return None."""
    t = node.a.type
    if isinstance(node, ir.CompareOp):
        result = {
            ir.EQ: a == b,
            ir.NE: a != b,
            ir.LT: a < b,
            ir.LE: not b < a,  # (as Halide: a <= b is !(b < a), a >= b !(a < b); true with a NaN)
            ir.GT: a > b,
            ir.GE: not a < b,
        }[type(node)]
        return ir.make_const(node.type, int(result))
    if isinstance(node, ir.And):
        return ir.make_const(t, int(bool(a) and bool(b)))
    if isinstance(node, ir.Or):
        return ir.make_const(t, int(bool(a) or bool(b)))
    if t.is_float():
        if isinstance(node, ir.Add):
            v = a + b
        elif isinstance(node, ir.Sub):
            v = a - b
        elif isinstance(node, ir.Mul):
            v = a * b
        elif isinstance(node, ir.Div):
            if b == 0:
                return None  # leave inf/nan to run time
            v = a / b
        elif isinstance(node, ir.Mod):
            if b == 0:
                return None
            v = a - b * math.floor(a / b)
        elif isinstance(node, ir.Min):  # as at run time (Halide's Funcs): a < b ? a : b, a NaN gives b
            v = a if a < b else b
        elif isinstance(node, ir.Max):  # a > b ? a : b
            v = a if a > b else b
        else:
            return None
        return ir.make_const(t, _float(t, v))
    if isinstance(node, ir.Add):
        v = a + b
    elif isinstance(node, ir.Sub):
        v = a - b
    elif isinstance(node, ir.Mul):
        v = a * b
    elif isinstance(node, ir.Div):
        v = euclid_div(a, b)
    elif isinstance(node, ir.Mod):
        v = euclid_mod(a, b)
    elif isinstance(node, ir.Min):
        v = min(a, b)
    elif isinstance(node, ir.Max):
        v = max(a, b)
    else:
        return None
    if t.is_int() and t.bits >= 32 and isinstance(node, ir.Add | ir.Sub | ir.Mul) and not t.can_represent(v):
        # As Halide's simplifier: signed 32- and 64-bit overflow is undefined, so a sum, difference
        # or product of constants that overflows becomes a marker, an error if it reaches code.
        return signed_integer_overflow(t)
    return ir.make_const(t, v)


SIGNED_INTEGER_OVERFLOW = "signed_integer_overflow"


_overflows = [0]  # how many markers this process made: while none, no Stmt holds one


def signed_integer_overflow(t: Type) -> ir.Expr:
    """Halide's make_signed_integer_overflow: what a constant fold that overflows t leaves."""
    _overflows[0] += 1
    return ir.Call(t, SIGNED_INTEGER_OVERFLOW, (ir.IntImm(ir.Int(32), 0),), ir.INTRINSIC)


def check_no_signed_integer_overflow(stmt: ir.Stmt) -> ir.Stmt:
    """stmt, unless a constant fold that overflowed survives in it (Halide's error at codegen)."""
    from ..errors import CompileError
    from ..ir_mutator import IRVisitor

    if not _overflows[0]:
        return stmt  # (the common case: no walk of the whole Stmt)

    class Find(IRVisitor):
        visit_once = True

        def visit_Call(self, c):
            if c.name == SIGNED_INTEGER_OVERFLOW and c.call_type == ir.INTRINSIC:
                raise CompileError("Signed integer overflow occurred during constant-folding. Signed integer overflow "
                                   "for int32 and int64 is undefined behavior in Halide.")
            self.visit_children(c)

    if stmt is not None:
        Find().visit(stmt)
    return stmt


def fold_cast(t: Type, e: ir.Expr) -> ir.Expr | None:
    """Fold a Cast of a scalar constant; None where run time semantics are unspecified."""
    v = ir.const_value(e)
    if v is None or t.lanes != 1:
        return None
    src = e.type
    if t.is_float():
        return ir.make_const(t, _float(t, float(v)))
    if t.is_bool():  # the lowest bit (of a float truncated toward zero; NaN and inf: false), as Halide casts
        return ir.make_const(t, int(v) & 1 if math.isfinite(v) else 0)
    if src.is_float():
        if math.isnan(v) or math.isinf(v):
            return None
        iv = int(v)  # truncation toward zero
        if not t.can_represent(iv):
            return None
        return ir.make_const(t, iv)
    return ir.make_const(t, int(v))  # wraps (signed sources were already sign-correct)
