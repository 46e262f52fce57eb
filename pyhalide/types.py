"""Scalar and vector types, and Halide's rules for combining them."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from enum import Enum

import numpy as np

from .errors import HalideError

INT, UINT, FLOAT, HANDLE, BFLOAT = "int", "uint", "float", "handle", "bfloat"


class TypeCode(Enum):
    """Halide's hl.TypeCode (halide_type_code_t), what `Type.code()` returns."""

    Int = 0
    UInt = 1
    Float = 2
    Handle = 3
    BFloat = 4

    def __int__(self) -> int:
        return self.value


class _Count(int):
    """An int that can also be called, so `t.bits` (pyhalide) and `t.bits()` (Halide's
    bindings) both read a Type's width."""

    __slots__ = ()

    def __call__(self) -> int:
        return int(self)


class _Code(str):
    """A type code that reads as a string ("int": what pyhalide compares) and, called, as
    Halide's hl.TypeCode: `t.code()`."""

    __slots__ = ()

    def __call__(self) -> TypeCode:
        return _TYPECODE_OF[self]


_CODE_NAMES = {TypeCode.Int: INT, TypeCode.UInt: UINT, TypeCode.Float: FLOAT, TypeCode.Handle: HANDLE,
               TypeCode.BFloat: BFLOAT}
_TYPECODE_OF = {name: member for member, name in _CODE_NAMES.items()}
# halide_type_code_t's number of each code (in halide_buffer_t's, trace tags, extern stage calls)
TYPE_CODES = {name: member.value for member, name in _CODE_NAMES.items()}
# a code given as a string, a _Code or an hl.TypeCode -> the one _Code object for it
_CODES = {**{name: _Code(name) for name in _TYPECODE_OF}, **{m: _Code(n) for m, n in _CODE_NAMES.items()}}
# the widths pyhalide computes in
_VALID_BITS = {INT: (8, 16, 32, 64), UINT: (1, 8, 16, 32, 64), FLOAT: (16, 32, 64), HANDLE: (64,), BFLOAT: (16,)}


def _code_of(code) -> _Code:
    try:
        return _CODES[code]
    except (KeyError, TypeError):
        raise HalideError(
            f"Type code must be an hl.TypeCode (Int, UInt, Float, Handle or BFloat), got {code!r}") from None


@dataclass(frozen=True, slots=True, init=False)
class Type:
    """A Halide type: a code (int, uint, float, handle, bfloat), a bit width and a lane count.

    Bool is UInt(1), as in Halide. BFloat(16) (bfloat16: float32's exponent, 8 bits of
    significand) counts as a float, as in Halide: `is_float()` is true for it. `code`, `bits`
    and `lanes` read as attributes or, as in Halide's bindings, as methods: `t.bits()`,
    `t.code()` (an hl.TypeCode).
    """

    code: str
    bits: int
    lanes: int

    def __init__(self, code=None, bits=None, lanes=None):
        """Type(code, bits, lanes) as in Halide (lanes defaults to 1 here); Type() is Halide's
        empty handle type, handle0."""
        if code is None and bits is None and lanes is None:
            code, bits, lanes = _CODES[HANDLE], 0, 0
        else:
            code = _code_of(code)
            bits, lanes = operator.index(bits), 1 if lanes is None else operator.index(lanes)
            if bits not in _VALID_BITS[code]:
                widths = ", ".join(map(str, _VALID_BITS[code]))
                raise HalideError(f"Type({code}, {bits}, {lanes}): pyhalide's {code} types have {widths} bits")
            if lanes < 1:
                raise HalideError(f"Type({code}, {bits}, {lanes}): a type has at least one lane")
        object.__setattr__(self, "code", code)
        object.__setattr__(self, "bits", _Count(bits))
        object.__setattr__(self, "lanes", _Count(lanes))

    # --- queries, named as in Halide's Python bindings ---
    def is_int(self) -> bool:
        return self.code == INT

    def is_uint(self) -> bool:
        return self.code == UINT

    def is_float(self) -> bool:
        return self.code == FLOAT or self.code == BFLOAT

    def is_bfloat(self) -> bool:
        return self.code == BFLOAT

    def is_bool(self) -> bool:
        return self.code == UINT and self.bits == 1

    def is_handle(self) -> bool:
        return self.code == HANDLE

    def is_vector(self) -> bool:
        return self.lanes > 1

    def is_scalar(self) -> bool:
        return self.lanes == 1

    def __eq__(self, other):
        # types are compared all the time while building IR, mostly with the very same object
        if self is other:
            return True
        if type(other) is not Type:
            return NotImplemented
        return self.code == other.code and self.bits == other.bits and self.lanes == other.lanes

    def with_lanes(self, lanes: int) -> Type:
        return self if lanes == self.lanes else _interned(self.code, self.bits, lanes)

    def with_bits(self, bits: int) -> Type:
        return self if bits == self.bits else _interned(self.code, bits, self.lanes)

    def with_code(self, code) -> Type:
        code = _code_of(code)
        return self if code == self.code else _interned(code, self.bits, self.lanes)

    def element_of(self) -> Type:
        return self if self.lanes == 1 else _interned(self.code, self.bits, 1)

    def bytes(self) -> int:
        return (self.bits + 7) // 8

    def max_value(self):
        """The largest finite value of the type, as a Python number."""
        if self.is_int():
            return (1 << (self.bits - 1)) - 1
        if self.is_uint():
            return (1 << self.bits) - 1
        if self.is_bfloat():
            return _BFLOAT16_MAX
        if self.is_float():
            return float(np.finfo(self.to_numpy()).max)
        raise HalideError(f"Type {self} has no maximum")

    def min_value(self):
        """The smallest finite value of the type, as a Python number."""
        if self.is_int():
            return -(1 << (self.bits - 1))
        if self.is_uint():
            return 0
        if self.is_float():
            return -self.max_value()
        raise HalideError(f"Type {self} has no minimum")

    def max(self):
        """The largest value, as an Expr (+inf for floats), as in Halide's Type.max()."""
        return self._limit(self.max_value(), float("inf"))

    def min(self):
        """The smallest value, as an Expr (-inf for floats), as in Halide's Type.min()."""
        return self._limit(self.min_value(), float("-inf"))

    def _limit(self, value, float_value):
        from .expr import wrap
        from .ir import make_const

        return wrap(make_const(self, float_value if self.is_float() else value))

    def can_represent(self, value) -> bool:
        """Whether every value of Type `value` (Halide's bindings), or the number `value`, fits."""
        if isinstance(value, Type):
            return self._can_represent_type(value)
        if isinstance(value, bool):
            value = int(value)
        if self.is_float():
            return True
        if isinstance(value, float):
            if not value.is_integer():
                return False
            value = int(value)
        return self.min_value() <= value <= self.max_value()

    def _can_represent_type(self, other: Type) -> bool:
        """Halide's Type::can_represent(Type)."""
        if self == other:
            return True
        if self.lanes != other.lanes:
            return False
        if self.is_int():
            return (other.is_int() and other.bits <= self.bits) or (other.is_uint() and other.bits < self.bits)
        if self.is_uint():
            return other.is_uint() and other.bits <= self.bits
        if self.is_bfloat():
            return other.is_bfloat() and other.bits <= self.bits
        if other.is_bfloat():
            return self.is_float() and self.bits > other.bits
        if self.is_float():
            return ((other.is_float() and other.bits <= self.bits) or (self.bits == 64 and other.bits <= 32)
                    or (self.bits == 32 and other.bits <= 16) or (self.bits == 16 and other.bits <= 8))
        return False

    def is_max(self, value) -> bool:
        """Whether the int64 `value` is the type's largest value (Halide's Type::is_max)."""
        value = _int64(self, "is_max", value)
        if value <= 0:
            return False
        if self.is_int():
            return value == (1 << (self.bits - 1)) - 1
        return self.is_uint() and value == (1 << self.bits) - 1

    def is_min(self, value) -> bool:
        """Whether the int64 `value` is the type's smallest value (Halide's Type::is_min)."""
        value = _int64(self, "is_min", value)
        if self.is_int():
            return value == -(1 << (self.bits - 1))
        return self.is_uint() and value == 0

    def same_handle_type(self, other: Type) -> bool:
        """Whether two handle types point to the same C++ type. pyhalide's handles carry no C++
        type, so, as Halide's types without one, any two match."""
        if not isinstance(other, Type):
            raise TypeError(f"same_handle_type takes an hl.Type, got {other!r}")
        return True

    def to_numpy(self) -> np.dtype:
        if self.is_bool():
            return np.dtype(np.bool_)
        if self.is_bfloat():
            return bfloat16_dtype()
        key = (self.code, self.bits)
        try:
            return _TO_NUMPY[key]
        except KeyError:
            raise HalideError(f"Type {self} has no numpy equivalent") from None

    def __str__(self) -> str:
        if self.is_bool():
            base = "bool"
        else:
            base = f"{self.code}{self.bits}"
        return f"{base}x{self.lanes}" if self.lanes > 1 else base

    def __repr__(self) -> str:  # as Halide's bindings print it; str() is the bare name
        return f"<halide.Type {self}>"


_TO_NUMPY = {
    (INT, 8): np.dtype(np.int8),
    (INT, 16): np.dtype(np.int16),
    (INT, 32): np.dtype(np.int32),
    (INT, 64): np.dtype(np.int64),
    (UINT, 8): np.dtype(np.uint8),
    (UINT, 16): np.dtype(np.uint16),
    (UINT, 32): np.dtype(np.uint32),
    (UINT, 64): np.dtype(np.uint64),
    (FLOAT, 16): np.dtype(np.float16),
    (FLOAT, 32): np.dtype(np.float32),
    (FLOAT, 64): np.dtype(np.float64),
}


_BFLOAT16_MAX = float(np.uint32(0x7F7F0000).view(np.float32))


def bfloat16_dtype() -> np.dtype:
    """numpy's bfloat16: ml_dtypes' (numpy has none of its own; JAX and TensorFlow use this one)."""
    try:
        import ml_dtypes
    except ImportError:  # (a dependency of pyhalide; this is for an installation without it)
        raise HalideError("bfloat16 as a numpy type needs the ml_dtypes package: pip install ml_dtypes") from None
    return np.dtype(ml_dtypes.bfloat16)


def bfloat16_bits(value):
    """The bits of the bfloat16 Halide makes of a number (an int) or of a numpy array of them (a
    uint16 array): rounded to float32 first, then to the nearest bfloat16, ties to even, by
    Halide's integer formula (Float16.cpp, and the code EmulateFloat16Math generates), so that
    folded constants and the reference evaluator give what the compiled code computes."""
    with np.errstate(over="ignore"):
        bits = np.asarray(value, np.float32).view(np.uint32).astype(np.uint64)
    nearest = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return int(nearest) if nearest.ndim == 0 else nearest


def bfloat16_value(bits: int) -> float:
    """The number a bfloat16's bits hold."""
    return float(np.uint32(bits << 16).view(np.float32))


def rounded(t: Type, value: float) -> float:
    """A number rounded to the float type t (of fewer than 64 bits), as Halide rounds constants."""
    if t.is_bfloat():
        return bfloat16_value(bfloat16_bits(value))
    with np.errstate(over="ignore"):
        return float(t.to_numpy().type(value))


# One object per type made here (Types are immutable): equality then mostly finds the same object.
_INTERNED: dict[tuple[str, int, int], Type] = {}


def _int64(t: Type, method: str, value) -> int:
    """An int64 argument, refused as Halide's bindings refuse it (TypeError)."""
    if isinstance(value, float | np.floating):
        raise TypeError(f"{t!r}.{method}() takes an integer, got {value!r}")
    value = operator.index(value)
    if not -(1 << 63) <= value < (1 << 63):
        raise TypeError(f"{t!r}.{method}({value}): the value does not fit in an int64")
    return value


def _interned(code: str, bits: int, lanes: int) -> Type:
    t = _INTERNED.get((code, bits, lanes))
    if t is None:
        t = _INTERNED[(code, bits, lanes)] = Type(code, bits, lanes)
    return t


def Int(bits: int, lanes: int = 1) -> Type:
    if bits not in (8, 16, 32, 64):
        raise HalideError(f"Int({bits}): bits must be 8, 16, 32 or 64")
    return _interned(INT, bits, lanes)


def UInt(bits: int, lanes: int = 1) -> Type:
    if bits not in (1, 8, 16, 32, 64):
        raise HalideError(f"UInt({bits}): bits must be 1, 8, 16, 32 or 64")
    return _interned(UINT, bits, lanes)


def Float(bits: int, lanes: int = 1) -> Type:
    if bits not in (16, 32, 64):
        raise HalideError(f"Float({bits}): bits must be 16, 32 or 64")
    return _interned(FLOAT, bits, lanes)


def BFloat(bits: int, lanes: int = 1) -> Type:
    """Halide's bfloat type: bfloat16, computed as Halide computes it, in float32 with each result
    rounded to bfloat16."""
    if bits != 16:
        raise HalideError(f"BFloat({bits}): bits must be 16")
    return _interned(BFLOAT, bits, lanes)


def Bool(lanes: int = 1) -> Type:
    return _interned(UINT, 1, lanes)


def Handle(lanes: int = 1) -> Type:
    return _interned(HANDLE, 64, lanes)


def from_numpy(dtype) -> Type:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return Bool()
    for (code, bits), dt in _TO_NUMPY.items():
        if dt == dtype:
            return Type(code, bits)
    if dtype.name == "bfloat16" and dtype == bfloat16_dtype():
        return BFloat(16)
    raise HalideError(f"numpy dtype {dtype} has no Halide equivalent")


def promote(ta: Type, tb: Type) -> Type:
    """The common type of two operand types, by Halide's match_types rules."""
    if ta == tb:
        return ta
    lanes = max(ta.lanes, tb.lanes)
    a, b = ta.element_of(), tb.element_of()
    if a == b:
        result = a
    elif a.is_float() and not b.is_float():
        result = a
    elif b.is_float() and not a.is_float():
        result = b
    elif a.is_float() and b.is_float():  # (of equal widths, float16 and bfloat16: b's)
        result = a if a.bits > b.bits else b
    elif a.code == b.code:
        result = a if a.bits >= b.bits else b
    else:
        # Mixed signedness: signed, of the larger width.
        result = Type(INT, max(a.bits, b.bits, 8))
    return result.with_lanes(lanes)
