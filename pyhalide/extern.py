"""Extern stages (Halide's Func.define_extern): a Func computed by a C function.

The function is `int NAME(halide_buffer_t *in..., T expr..., halide_buffer_t *out...)`, the
arguments in the order given, one output buffer per value of the Func. As in Halide it is first
asked, twice, with Func inputs and outputs that have no host memory (a bounds query): the first
call may widen the output's region (what the stage computes), the second writes into each Func
input's `dim[d].min`/`.extent` the region it needs. Then it is called to compute, once per
iteration of the loops its schedule made of its dimensions. A nonzero result fails the pipeline.
The JIT finds NAME among the process's symbols (a library loaded with `ctypes.CDLL(path,
mode=ctypes.RTLD_GLOBAL)`) or in Pipeline.set_jit_externs (JITExterns: Python functions too).

The definition is kept as IR so that lowering's graph passes see the inputs as calls: each value
of the Func is `extern_stage(name, mangling, args...)`, where a Func input is a call of it (the
graph edge; its coordinates mean nothing), an image is `extern_image(code, bits, its descriptor
variables)` (named by them: lowering renames them with the image) and an expression is
`extern_expr(e)`. bounds_inference makes the queries, schedule_functions the calls,
storage_flattening their buffers, codegen/extern_calls.py the code.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from enum import Enum

import numpy as np

from . import ir
from .errors import HalideError
from .expr import Expr, to_ir
from .ir_mutator import called_names
from .types import TYPE_CODES, Handle, Int, Type

EXTERN_STAGE = "extern_stage"  # the value of an extern Func (see the module docstring)
EXTERN_EXPR = "extern_expr"
EXTERN_IMAGE = "extern_image"
# Lowering's forms, made by schedule_functions and bounds_inference, turned into buffers by
# storage_flattening:
EXTERN_INPUT = "extern_input"  # (Call of the input at the region's first corner, at its last)
EXTERN_OUTPUT = "extern_output"  # (Call of the stage itself at its region's first corner, at its last)
# What codegen sees: ir.MAKE_BUFFER, ir.BUFFER_FIELD, ir.CALL_EXTERN
MAKE_BUFFER, BUFFER_FIELD, CALL_EXTERN = ir.MAKE_BUFFER, ir.BUFFER_FIELD, ir.CALL_EXTERN

_I32 = Int(32)


class NameMangling(Enum):
    """hl.NameMangling: how the function's name is spelled in the object (pyhalide calls C names)."""

    Default = 0
    C = 1
    CPlusPlus = 2


class ExternFuncArgument:
    """hl.ExternFuncArgument: a Func, Buffer, ImageParam or expression passed to an extern stage."""

    def __init__(self, value=None):
        from .buffer import Buffer
        from .func import Func
        from .param import OutputImageParam, Param

        self.kind, self.value = "undefined", value
        if value is None:
            return
        if isinstance(value, ExternFuncArgument):
            self.kind, self.value = value.kind, value.value
        elif isinstance(value, Func):
            self.kind = "func"
        elif isinstance(value, Buffer | OutputImageParam):
            self.kind = "buffer" if isinstance(value, Buffer) else "image_param"
        elif isinstance(value, Expr | Param | int | float) and not isinstance(value, bool):
            self.kind, self.value = "expr", to_ir(value)
        else:
            raise HalideError(f"An extern stage's argument must be a Func, Buffer, ImageParam or expression; "
                              f"got {type(value).__name__}")

    def defined(self) -> bool:
        return self.kind != "undefined"

    def is_func(self) -> bool:
        return self.kind == "func"

    def is_expr(self) -> bool:
        return self.kind == "expr"

    def is_buffer(self) -> bool:
        return self.kind == "buffer"

    def is_image_param(self) -> bool:
        return self.kind == "image_param"


def encode_arguments(owner: str, params) -> tuple:
    """The IR of an extern stage's arguments (see the module docstring)."""
    encoded = []
    for i, p in enumerate(params):
        a = ExternFuncArgument(p)
        if a.kind == "func":
            f = a.value
            if f.name() == owner:
                raise HalideError(f"Extern Func {owner} has itself as an argument (argument {i})")
            if not f.defined():
                raise HalideError(f"Extern stage {owner}: its argument {i}, Func {f.name()}, has not been defined")
            for j, t in enumerate(f.types()):
                zeros = tuple(ir.make_const(_I32, 0) for _ in range(f.dimensions()))
                encoded.append(ir.Call(t, f.name(), zeros, ir.HALIDE, value_index=j, func=f))
        elif a.kind == "expr":
            if called_names(a.value):
                raise HalideError(f"Extern stage {owner}: its argument {i} reads a Func or an image; pass the Func "
                                  "itself instead")
            encoded.append(ir.Call(a.value.type, EXTERN_EXPR, (a.value,), ir.INTRINSIC))
        elif a.kind in ("buffer", "image_param"):
            image = a.value
            if image.dimensions() == 0:
                raise HalideError(f"Extern stage {owner}: its argument {i}, {image.name()}, has no dimensions; pass "
                                  "its value as an expression")
            t = image.type()
            fields = tuple(ir.Variable(f"{image.name()}.{field}.{d}", _I32, ref=image)
                           for d in range(image.dimensions()) for field in ("min", "extent", "stride"))
            encoded.append(ir.Call(Handle(), EXTERN_IMAGE, (*_type_args(t), *fields), ir.INTRINSIC))
        else:
            raise HalideError(f"Extern stage {owner}: its argument {i} is undefined")
    return tuple(encoded)


def image_name(marker: ir.Call) -> str:
    """The image an extern_image argument passes, by its descriptor variables' names."""
    return marker.args[2].name.rsplit(".", 2)[0]


def _type_args(t: Type) -> tuple:
    return ir.make_const(_I32, TYPE_CODES[t.code]), ir.make_const(_I32, t.bits)


@dataclass(frozen=True)
class ExternCall:
    """An extern Func's definition, read back from its IR."""

    name: str
    mangling: int
    args: tuple  # the encoded arguments, in order

    def func_inputs(self):
        """(slot, the Call of the input) of each Func input: one slot per value of a Tuple Func."""
        return [(k, a) for k, a in enumerate(self.args) if isinstance(a, ir.Call) and a.call_type == ir.HALIDE]


def extern_call(f) -> ExternCall | None:
    """f's extern definition, or None when f is defined by expressions (or not at all)."""
    init = f._init
    if init is None:
        return None
    v = init.values[0]
    if not (isinstance(v, ir.Call) and v.call_type == ir.INTRINSIC and v.name == EXTERN_STAGE):
        return None
    return ExternCall(v.args[0].value, ir.const_int(v.args[1]), tuple(v.args[2:]))


def is_extern(f) -> bool:
    return extern_call(f) is not None


def make_buffer(ident: str, buffer: str, t: Type, offset, dims) -> ir.Call:
    """A halide_buffer_t on the stack: over `buffer` from element `offset` (no host: "") with
    (min, extent, stride) per dimension."""
    fields = tuple(e for d in dims for e in d)
    return ir.Call(Handle(), MAKE_BUFFER, (ir.StringImm(ident), ir.StringImm(buffer), *_type_args(t),
                                           ir.make_const(_I32, len(dims)), offset, *fields), ir.INTRINSIC)


def find_symbol(name: str) -> int | None:
    """The address of a C function this process has loaded (globally), or None."""
    try:
        return ctypes.cast(getattr(ctypes.CDLL(None), name), ctypes.c_void_p).value
    except AttributeError:
        return None


_C_SCALARS = {("int", 8): ctypes.c_int8, ("int", 16): ctypes.c_int16, ("int", 32): ctypes.c_int32,
              ("int", 64): ctypes.c_int64, ("uint", 1): ctypes.c_bool, ("uint", 8): ctypes.c_uint8,
              ("uint", 16): ctypes.c_uint16, ("uint", 32): ctypes.c_uint32, ("uint", 64): ctypes.c_uint64,
              ("float", 32): ctypes.c_float, ("float", 64): ctypes.c_double}


def c_type(t: Type):
    """The ctypes type an extern stage's function takes for an argument of type t."""
    return ctypes.POINTER(HalideBuffer) if t.is_handle() else _C_SCALARS[(t.code, t.bits)]


class JITExterns:
    """The functions a pipeline's extern stages call that are not symbols of the process
    (Pipeline.set_jit_externs): ctypes function pointers, addresses, or Python callables, which
    are given a C signature from the extern stages that call them. A Python callable gets each
    buffer as a HalideBuffer (its `as_array()` a numpy view) and each expression as a number; it
    returns None or 0 for success. Should it raise, the stage fails with a nonzero result and the
    exception is kept (`raised`) to chain to the pipeline's error."""

    def __init__(self, externs: dict):
        for name, fn in externs.items():
            if not isinstance(name, str) or not (isinstance(fn, ctypes._CFuncPtr | int) or callable(fn)):
                raise HalideError(f"set_jit_externs: {name!r} must name a ctypes function, an address or a "
                                  f"Python callable, got {fn!r}")
        self.externs = dict(externs)
        self.raised: list[BaseException] = []
        self._entries: dict = {}  # the C entries made here, alive while the code may call them

    def address(self, name: str, arg_types: list[Type]) -> int | None:
        """The address to call for `name` (taking arguments of these types), or None if it is not
        one of these."""
        fn = self.externs.get(name)
        if fn is None:
            return None
        if isinstance(fn, int):
            return fn
        if not isinstance(fn, ctypes._CFuncPtr):  # one C entry per signature, made once
            key = (name, tuple(arg_types))
            if key not in self._entries:
                self._entries[key] = ctypes.CFUNCTYPE(ctypes.c_int, *map(c_type, arg_types))(self._wrapped(fn))
            fn = self._entries[key]
        return ctypes.cast(fn, ctypes.c_void_p).value

    @staticmethod
    def raise_error(externs: JITExterns | None, error: Exception):
        """Raise `error`, from the exception a Python extern stage raised, where one did."""
        raised = externs.raised if externs is not None else []
        if raised:
            cause = raised[0]
            raised.clear()
            raise error from cause
        raise error

    def _wrapped(self, fn):
        def call(*args):
            try:
                result = fn(*(a.contents if isinstance(a, ctypes._Pointer) else a for a in args))
                return 0 if result is None else int(result)
            except BaseException as e:  # noqa: BLE001 - it cannot cross the C call: kept, reported after it
                self.raised.append(e)
                return -1

        return call


# ---------------------------------------------------------------- halide_buffer_t, for ctypes
class Dimension(ctypes.Structure):
    _fields_ = [("min", ctypes.c_int32), ("extent", ctypes.c_int32), ("stride", ctypes.c_int32),
                ("flags", ctypes.c_uint32)]


class HalideType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class HalideBuffer(ctypes.Structure):
    """halide_buffer_t, as HalideRuntime.h lays it out."""

    _fields_ = [("device", ctypes.c_uint64), ("device_interface", ctypes.c_void_p), ("host", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("type", HalideType), ("dimensions", ctypes.c_int32),
                ("dim", ctypes.POINTER(Dimension)), ("padding", ctypes.c_void_p)]

    def is_bounds_query(self) -> bool:
        """No memory: the buffer asks what region is needed (Halide's is_bounds_query)."""
        return not self.host and not self.device

    def as_array(self) -> np.ndarray:
        """A numpy view of the host memory, axes reversed as hl.Buffer's (dimension 0 is numpy's
        last): writing it writes the buffer."""
        if not self.host:
            raise HalideError("A bounds query's buffer has no memory to view")
        codes = {v: k for k, v in TYPE_CODES.items()}
        dtype = np.dtype(bool) if self.type.bits == 1 else Type(codes[self.type.code], self.type.bits).to_numpy()
        dims = [self.dim[d] for d in reversed(range(self.dimensions))]
        strides = [d.stride * dtype.itemsize for d in dims]
        lo = sum(min(0, (d.extent - 1) * s) for d, s in zip(dims, strides))
        hi = sum(max(0, (d.extent - 1) * s) for d, s in zip(dims, strides)) + dtype.itemsize
        if any(d.extent <= 0 for d in dims):
            return np.zeros([max(d.extent, 0) for d in dims], dtype)
        memory = (ctypes.c_char * (hi - lo)).from_address(self.host + lo)
        return np.ndarray([d.extent for d in dims], dtype, memory, -lo, strides)


class BoundsQueries:
    """The bounds queries of extern stages among the lets that open a lowered pipeline, run here
    (infer_input_bounds): a make_buffer becomes a HalideBuffer, a query calls the function, a
    field read reads it. An image in `queried` (no memory yet) is passed without memory, so the
    function says what it needs of it (`image_regions`, (min, max) per dimension, the union over
    queries); one bound to memory is passed with its host pointer."""

    def __init__(self, jit_externs: JITExterns | None, hosts: dict[str, int], queried: set[str]):
        self.jit_externs, self.hosts, self.queried = jit_externs, hosts, queried
        self.buffers: dict[str, HalideBuffer] = {}
        self.image_regions: dict[str, list[tuple[int, int]]] = {}

    def value(self, name: str, e: ir.Expr, written: ir.Expr) -> ir.Expr | None:
        """The let `name = e` (`written`, with its other lets substituted) run: its value, or None
        where it is none of these or depends on what is not known."""
        if not (isinstance(e, ir.Call) and e.call_type == ir.INTRINSIC and e.name in (MAKE_BUFFER, CALL_EXTERN)):
            return self._with_fields_read(e)
        args = [ir.const_int(a) if isinstance(a, ir.IntImm) else a for a in e.args]
        if e.name == MAKE_BUFFER:
            _, buffer, code, bits, dims, _offset, *fields = args
            if buffer.value or any(not isinstance(f, int) for f in fields):
                return None
            self.buffers[name] = buffer_struct(code, bits, [tuple(fields[3 * d:3 * d + 3]) for d in range(dims)])
            return None
        if e.args[1].value == "query":
            return self._call(e.args[0].value, e.args[2:], written.args[2:])
        return None

    def _with_fields_read(self, e: ir.Expr) -> ir.Expr | None:
        """e with the buffer fields it reads replaced by their values, simplified; None if that is
        not a constant."""
        from .ir_mutator import IRMutator
        from .simplify import simplify

        buffers = self.buffers

        class ReadFields(IRMutator):
            def visit_Call(self, c):
                if c.call_type == ir.INTRINSIC and c.name == BUFFER_FIELD:
                    buffer, d, field, _ = c.args
                    b = buffers.get(buffer.name) if isinstance(buffer, ir.Variable) else None
                    if b is not None:
                        return ir.make_const(_I32, getattr(b.dim[ir.const_int(d)], field.value))
                return self.default(c)

        v = simplify(ReadFields().mutate(e))
        return v if ir.is_const(v) else None

    def _call(self, fn: str, args, written_args) -> ir.Expr | None:
        values, types, images = [], [], []
        for a, w in zip(args, written_args):
            if isinstance(a, ir.Variable) and a.name in self.buffers:
                values.append(ctypes.pointer(self.buffers[a.name]))
                types.append(Handle())
            elif isinstance(a, ir.Call) and a.name == EXTERN_EXPR and ir.is_const(a.args[0]):
                values.append(c_type(a.type)(ir.const_value(a.args[0])))
                types.append(a.type)
            elif isinstance(a, ir.Call) and a.name == EXTERN_IMAGE and all(ir.is_const(f) for f in a.args):
                name, (code, bits, *fields) = image_name(w), (ir.const_int(f) for f in a.args)
                b = buffer_struct(code, bits, [tuple(fields[3 * d:3 * d + 3]) for d in range(len(fields) // 3)])
                if name not in self.queried:
                    b.host = self.hosts.get(name)
                images.append((name, b))
                values.append(ctypes.pointer(b))
                types.append(Handle())
            else:
                return None
        address = self.jit_externs.address(fn, types) if self.jit_externs is not None else None
        address = address or find_symbol(fn)
        if address is None:
            raise HalideError(f"Extern stage function {fn} is not loaded in this process")
        result = ctypes.CFUNCTYPE(ctypes.c_int, *map(c_type, types))(address)(*values)
        if result != 0:
            JITExterns.raise_error(self.jit_externs, HalideError(
                f"Bounds inference call to external stage {fn} returned non-zero value: {result}"))
        for name, b in images:
            if name in self.queried:
                region = [(b.dim[d].min, b.dim[d].min + b.dim[d].extent - 1) for d in range(b.dimensions)]
                known = self.image_regions.get(name)
                self.image_regions[name] = region if known is None else \
                    [(min(lo, k_lo), max(hi, k_hi)) for (lo, hi), (k_lo, k_hi) in zip(region, known)]
        return ir.make_const(_I32, result)


def buffer_struct(code: int, bits: int, dims, array: np.ndarray | None = None) -> HalideBuffer:
    """A halide_buffer_t of (min, extent, stride) per dimension, over `array` from its first
    element (it keeps the array alive), or without memory (a bounds query's)."""
    shape = (Dimension * max(len(dims), 1))(*(Dimension(*d, 0) for d in dims))
    b = HalideBuffer()
    b.host = None if array is None else array.ctypes.data
    b.type = HalideType(code, bits, 1)
    b.dimensions = len(dims)
    b.dim = shape
    b._keep = (array, shape)
    return b
