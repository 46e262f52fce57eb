"""LLVM types for pyhalide types, and the type suffixes of LLVM's overloaded intrinsics."""

from __future__ import annotations

from llvmlite import ir as ll
from llvmlite.ir import instructions

from ..types import Type

I1, I8, I32, I64 = ll.IntType(1), ll.IntType(8), ll.IntType(32), ll.IntType(64)
PTR = ll.PointerType()
F16, F32, F64 = ll.HalfType(), ll.FloatType(), ll.DoubleType()
_FLOATS = {16: F16, 32: F32, 64: F64}
VOID = ll.VoidType()


def llvm_type(t: Type, memory: bool = False) -> ll.Type:
    """The LLVM type of t; booleans are i1 in registers and i8 in memory; a bfloat16 is its bits
    (lowering/emulate_bfloat16.py), an i16."""
    if t.is_bfloat():
        base = ll.IntType(16)
    elif t.is_float():
        base = _FLOATS[t.bits]
    elif t.is_bool():
        base = I8 if memory else I1
    elif t.is_handle():
        base = PTR
    else:
        base = ll.IntType(t.bits)
    return base if t.lanes == 1 else ll.VectorType(base, t.lanes)


def type_suffix(t: Type) -> str:
    """How LLVM names an overload for t: `f32`, `i16`, `v8f32`."""
    s = f"{'f' if t.is_float() else 'i'}{t.bits}"
    return s if t.lanes == 1 else f"v{t.lanes}{s}"


def double_to_half(b: ll.IRBuilder, v):
    """fptrunc of double (or vector of double) to half, correctly rounded, without the libcall
    (__truncdfhf2) LLVM makes of it on x86, which the JIT does not resolve: round to float32 by
    round-to-odd (truncate toward zero, the last bit set if inexact; float32's 24 bits are more
    than half's 11 + 2, so rounding that to half rounds once), then float32 -> half (F16C)."""
    vec = v.type.count if isinstance(v.type, ll.VectorType) else None

    def of(t):
        return ll.VectorType(t, vec) if vec else t

    f = b.fptrunc(v, of(F32))  # to nearest: one step too far from zero, or exact
    back = b.fpext(f, of(F64))
    magnitude = ll.Constant(of(I64), [(1 << 63) - 1] * vec if vec else (1 << 63) - 1)

    def abs_bits(d):  # ordered as the magnitudes are
        return b.and_(b.bitcast(d, of(I64)), magnitude)

    too_far = b.icmp_unsigned(">", abs_bits(back), abs_bits(v))
    inexact = b.fcmp_ordered("!=", back, v)
    bits = b.sub(b.bitcast(f, of(I32)), b.zext(too_far, of(I32)))
    odd = b.or_(bits, b.zext(inexact, of(I32)))
    return b.fptrunc(b.bitcast(odd, of(F32)), of(F16))


def atomic_store(builder: ll.IRBuilder, value: ll.Value, ptr: ll.Value) -> None:
    """A monotonic atomic store through an opaque pointer (llvmlite's helper wants a typed one)."""
    builder._insert(instructions.StoreAtomicInstr(builder.block, value, ptr, "monotonic", value.type.width // 8))
