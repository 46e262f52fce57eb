"""How runtime.py calls the generated function, and how the function reports a failure.

The function is `i32 NAME(ptr array_0, ..., ptr array_n, ptr scalars)`, called through
NAME_direct, a Python builtin (define_direct_entry). Each array is a numpy ndarray object itself
(its PyObject pointer): the function reads its data pointer, dimensions and strides from
numpy's stable C layout (PyArrayObject), because getting a data pointer in Python costs
microseconds per array and reading it here costs nothing. `scalars` is an
int64 ndarray holding, in order: each buffer's min per dimension, each Param (integers
sign-extended, floats as the bits of a double), the thread count, the address of the interrupt
flag (interrupts.py), the address of the GPU runtime's callback (gpu_runtime.py; 0 without
kernels), the address of the text callback that print and tracing write through (runtime.py),
then the error record: the failed check's code and up to ERROR_VALUES
values for its message. The function returns 0, that code (1 + the failed assert's id), or
INTERRUPTED.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from llvmlite import ir as ll

from ..errors import InternalError
from ..types import Type
from .llvm_types import F32, F64, I8, I32, I64, PTR, double_to_half, llvm_type

if TYPE_CHECKING:
    from .llvm import CodeGen

# numpy's PyArrayObject layout (stable C API): data at 16, nd at 24, dimensions, strides
NP_DATA, NP_DIMS, NP_STRIDES = 16, 32, 40
ERROR_VALUES = 8  # values an assert can report


@dataclass
class ScalarLayout:
    """Where each value lives in the int64 `scalars` array passed at every call."""

    min_slots: dict[str, list[int]] = field(default_factory=dict)
    param_slots: dict[str, int] = field(default_factory=dict)
    threads_slot: int = 0
    interrupt_slot: int = 0
    gpu_slot: int = 0
    print_slot: int = 0
    profiler_slot: int = 0  # the profiler's state array (codegen/profiler.py), where profiled
    error_slot: int = 0
    size: int = 0


def declare_entry(module: ll.Module, name: str, buffers: int) -> ll.Function:
    return ll.Function(module, ll.FunctionType(I32, [PTR] * (buffers + 1)), name)


# The Python C API functions the direct entry calls; the JIT links them to this process's.
PYTHON_API = ("PyEval_SaveThread", "PyEval_RestoreThread", "PyLong_FromLong")


def define_direct_entry(module: ll.Module, entry: ll.Function) -> str:
    """`PyObject *NAME_direct(PyObject *self, PyObject *const *args, Py_ssize_t nargs)`: the entry
    as a Python builtin function (METH_FASTCALL; runtime.py makes one of it), so that a call
    costs what calling a builtin does instead of a ctypes foreign call (which, after a pipeline
    has swept the caches, took 10 us to get through). It releases the GIL around the entry, as
    ctypes does, and returns the entry's code as an int. Its caller passes exactly the entry's
    arguments (the arrays, then the scalars array)."""
    name = f"{entry.name}_direct"
    fn = ll.Function(module, ll.FunctionType(PTR, [PTR, PTR, I64]), name)
    save = ll.Function(module, ll.FunctionType(PTR, []), PYTHON_API[0])
    restore = ll.Function(module, ll.FunctionType(ll.VoidType(), [PTR]), PYTHON_API[1])
    as_int = ll.Function(module, ll.FunctionType(PTR, [I64]), PYTHON_API[2])
    b = ll.IRBuilder(fn.append_basic_block("entry"))
    args = [b.load(b.gep(fn.args[1], [ll.Constant(I64, k)], source_etype=PTR), typ=PTR)
            for k in range(len(entry.args))]
    thread = b.call(save, [])
    code = b.call(entry, args)
    b.call(restore, [thread])
    b.ret(b.call(as_int, [b.sext(code, I64)]))
    return name


def scalar_ptr(b: ll.IRBuilder, scalars, slot: int):
    return b.gep(scalars, [ll.Constant(I64, slot)], source_etype=I64)


def bind_arguments(cg: CodeGen, lowered, axis_maps: list[list[int]]) -> ScalarLayout:
    """Read the arguments of the entry function being emitted; bind each buffer's host pointer,
    `NAME.min.D`, `NAME.extent.D`, `NAME.stride.D` (in elements) and each Param by name."""
    b, f = cg.b, cg.f
    args = list(f.fn.args)
    f.scalars = _load(b, PTR, _field(b, args[-1], NP_DATA))
    layout = ScalarLayout()
    slot = 0
    for buf, obj, axes in zip(lowered.buffers, args[:-1], axis_maps):
        layout.min_slots[buf.name] = list(range(slot, slot + buf.dimensions))
        slot += buf.dimensions
        f.hosts[buf.name] = _load(b, PTR, _field(b, obj, NP_DATA))
        dims = _load(b, PTR, _field(b, obj, NP_DIMS))
        strides = _load(b, PTR, _field(b, obj, NP_STRIDES))
        esize = ll.Constant(I64, buf.type.bytes())
        last = None  # the largest element offset from the host pointer, for narrow types
        for d, axis in enumerate(axes):
            ext = _load(b, I64, b.gep(dims, [ll.Constant(I64, axis)], source_etype=I64))
            stride = _load(b, I64, b.gep(strides, [ll.Constant(I64, axis)], source_etype=I64))
            stride = b.sdiv(stride, esize)  # numpy's strides are in bytes
            lo = _load(b, I64, scalar_ptr(b, f.scalars, layout.min_slots[buf.name][d]))
            cg.bind(f"{buf.name}.min.{d}", b.trunc(lo, I32))
            cg.bind(f"{buf.name}.extent.{d}", b.trunc(ext, I32))
            cg.bind(f"{buf.name}.stride.{d}", b.trunc(stride, I32))
            if buf.type.bytes() < 4:
                reach = b.mul(b.sub(ext, ll.Constant(I64, 1)), stride)
                reach = b.select(b.icmp_signed("<", reach, ll.Constant(I64, 0)), ll.Constant(I64, 0), reach)
                last = reach if last is None else b.add(last, reach)
        if buf.type.bytes() < 4 and buf.dimensions:
            # the last element whose 32-bit word ends inside the buffer (x86.load's gathers)
            last = b.sub(last, ll.Constant(I64, 4 // buf.type.bytes() - 1))
            cg.bind(f"{buf.name}.last_word", b.trunc(last, I32))
    for s in lowered.scalars:
        layout.param_slots[s.name] = slot
        raw = _load(b, I64, scalar_ptr(b, f.scalars, slot))
        slot += 1
        cg.bind(s.name, _from_int64(b, raw, s.type))
    layout.threads_slot = slot
    layout.interrupt_slot = slot + 1
    layout.gpu_slot = slot + 2
    layout.print_slot = slot + 3
    layout.profiler_slot = slot + 4
    layout.error_slot = slot + 5
    layout.size = slot + 6 + ERROR_VALUES
    return layout


def store_error_values(cg: CodeGen, args) -> None:
    """Values for a failed check's message, into the error record (floats as double bits)."""
    store_error_llvm_values(cg, [(cg.expr(a), a.type) for a in args])


def store_error_llvm_values(cg: CodeGen, values) -> None:
    """store_error_values of (LLVM value, its scalar Type) pairs."""
    if len(values) > ERROR_VALUES:
        raise InternalError(f"codegen: an assert reports {len(values)} values; at most {ERROR_VALUES} fit")
    b = cg.b
    for k, (v, t) in enumerate(values):
        if t.is_float():
            v64 = b.bitcast(cg.cast(v, t, Type("float", 64)), I64)
        else:
            v64 = cg.cast(v, t, Type("int", 64))
        b.store(v64, scalar_ptr(b, cg.f.scalars, cg.layout.error_slot + 1 + k))


def store_error_code(cg: CodeGen, code: int) -> None:
    cg.b.store(ll.Constant(I64, code), scalar_ptr(cg.b, cg.f.scalars, cg.layout.error_slot))


def _field(b: ll.IRBuilder, obj, offset: int):
    return b.gep(obj, [ll.Constant(I64, offset)], source_etype=I8)


def _load(b: ll.IRBuilder, ty, ptr):
    return b.load(ptr, typ=ty)


def _from_int64(b: ll.IRBuilder, raw, t: Type):
    if t.is_float() and not t.is_bfloat():  # (a bfloat16 comes as its bits)
        d = b.bitcast(raw, F64)
        return d if t.bits == 64 else b.fptrunc(d, F32) if t.bits == 32 else double_to_half(b, d)
    if t.is_bool():
        return b.icmp_unsigned("!=", raw, ll.Constant(I64, 0))
    return b.trunc(raw, llvm_type(t)) if t.bits < 64 else raw
