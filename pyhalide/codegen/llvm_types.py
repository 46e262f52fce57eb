"""LLVM types for pyhalide types, and the type suffixes of LLVM's overloaded intrinsics."""

from __future__ import annotations

from llvmlite import ir as ll

from ..types import Type

I1, I8, I32, I64 = ll.IntType(1), ll.IntType(8), ll.IntType(32), ll.IntType(64)
PTR = ll.PointerType()
F32, F64 = ll.FloatType(), ll.DoubleType()
VOID = ll.VoidType()


def llvm_type(t: Type, memory: bool = False) -> ll.Type:
    """The LLVM type of t; booleans are i1 in registers and i8 in memory."""
    if t.is_float():
        base = F32 if t.bits == 32 else F64
    elif t.is_bool():
        base = I8 if memory else I1
    elif t.is_handle():
        base = PTR
    else:
        base = ll.IntType(t.bits)
    return base if t.lanes == 1 else ll.VectorType(base, t.lanes)


def type_suffix(t: Type) -> str:
    """How LLVM names an overload for t: `f32`, `i16`, `v8f32`."""
    s = "f32" if t.is_float() and t.bits == 32 else "f64" if t.is_float() else f"i{t.bits}"
    return s if t.lanes == 1 else f"v{t.lanes}{s}"
