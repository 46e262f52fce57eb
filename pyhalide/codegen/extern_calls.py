"""Extern stages in LLVM (see pyhalide/extern.py): halide_buffer_t's built on the stack, the call
of the C function, its result checked, and the fields its bounds query wrote read back."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir as ll

from .. import ir
from ..extern import BUFFER_FIELD, CALL_EXTERN, MAKE_BUFFER
from ..types import TYPE_CODES, Int, Type
from . import calling_convention
from .llvm_types import I8, I32, I64, PTR, llvm_type

if TYPE_CHECKING:
    from .llvm import CodeGen

I16 = ll.IntType(16)
# halide_dimension_t {int32 min, extent, stride; uint32 flags} and halide_buffer_t {uint64 device;
# void *device_interface; uint8 *host; uint64 flags; {uint8 code, bits; uint16 lanes} type;
# int32 dimensions; halide_dimension_t *dim; void *padding}, as HalideRuntime.h lays them out
DIMENSION_T = ll.LiteralStructType([I32, I32, I32, I32])
BUFFER_T = ll.LiteralStructType([I64, PTR, PTR, I64, I8, I8, I16, I32, PTR, PTR])
_HOST, _CODE, _BITS, _LANES, _DIMENSIONS, _DIM = 2, 4, 5, 6, 7, 8
_FIELDS = {"min": 0, "extent": 1, "stride": 2}
_CODE_NAMES = {v: k for k, v in TYPE_CODES.items()}
_MESSAGES = {"query": "Bounds inference call to external stage {name} returned non-zero value: {{}}",
             "compute": "Call to external stage {name} returned non-zero value: {{}}"}


def _member(b: ll.IRBuilder, struct, struct_t, index: int):
    """A pointer to field `index` of the struct `struct` points at (an alloca's typed pointer, or
    an opaque one)."""
    indices = [ll.Constant(I32, 0), ll.Constant(I32, index)]
    return b.gep(struct, indices, source_etype=struct_t) if struct.type.is_opaque else b.gep(struct, indices)


def make_buffer(cg: CodeGen, e: ir.Call):
    """make_buffer(id, buffer, code, bits, dimensions, offset, min/extent/stride...): a pointer to
    a halide_buffer_t on the stack (allocated once per call of the function), over `buffer` from
    element `offset`, or with no host where the buffer is ""."""
    ident, name, code, bits, dims, offset, *fields = e.args
    n = ir.const_int(dims)
    b = cg.b
    buf = cg.alloca_in_entry(BUFFER_T, ident.value)
    shape = cg.alloca_in_entry(DIMENSION_T, f"{ident.value}.dim", ll.Constant(I64, max(n, 1)))
    b.store(ll.Constant(BUFFER_T, None), buf)
    if name.value:
        t = Type(_CODE_NAMES[ir.const_int(code)], ir.const_int(bits))
        host = b.gep(cg._host(name.value), [cg.index64(offset)], source_etype=llvm_type(t, memory=True))
        b.store(host, _member(b, buf, BUFFER_T, _HOST))
    b.store(ll.Constant(I8, ir.const_int(code)), _member(b, buf, BUFFER_T, _CODE))
    b.store(ll.Constant(I8, ir.const_int(bits)), _member(b, buf, BUFFER_T, _BITS))
    b.store(ll.Constant(I16, 1), _member(b, buf, BUFFER_T, _LANES))
    b.store(ll.Constant(I32, n), _member(b, buf, BUFFER_T, _DIMENSIONS))
    b.store(shape, _member(b, buf, BUFFER_T, _DIM))
    for d in range(n):
        values = [cg.expr(f) for f in fields[3 * d:3 * d + 3]] + [ll.Constant(I32, 0)]
        for k, v in enumerate(values):
            b.store(v, _member(b, b.gep(shape, [ll.Constant(I64, d)]), DIMENSION_T, k))
    return buf


def buffer_field(cg: CodeGen, e: ir.Call):
    """buffer_field(buffer, d, field, after): dim[d].field of a halide_buffer_t; `after` (the
    result of the call that wrote it) orders the read after that call."""
    buffer, d, field, after = e.args
    cg.expr(after)
    b = cg.b
    shape = b.load(_member(b, cg.expr(buffer), BUFFER_T, _DIM), typ=PTR)
    dim = b.gep(shape, [ll.Constant(I64, ir.const_int(d))], source_etype=DIMENSION_T)
    return b.load(_member(b, dim, DIMENSION_T, _FIELDS[field.value]), typ=I32)


def call_extern(cg: CodeGen, e: ir.Call):
    """call_extern(name, mode, args...): `int name(args...)`; a nonzero result fails the pipeline
    with Halide's message for a bounds query or a computation."""
    name, mode, *args = e.args
    values = [cg.expr(a) for a in args]
    fn = cg.declare(name.value, I32, [llvm_type(a.type) for a in args])
    cg.extern_functions[name.value] = [a.type for a in args]
    b = cg.b
    result = b.call(fn, values)
    if mode.value.startswith("memoize "):  # the memoization cache's: a lookup's result is whether it hit
        return result
    assert_id = len(cg.asserts)
    if mode.value.startswith("debug "):  # debug_to_file's call: (filename, buffer)
        message = f"Failed to dump function {mode.value[6:]} to file {args[0].value} with error {{}}"
    else:
        message = _MESSAGES[mode.value].format(name=name.value)
    cg.asserts.append((message.replace("{", "{{").replace("}", "}}").replace("{{}}", "{}"), (False,)))
    with b.if_then(b.icmp_signed("!=", result, ll.Constant(I32, 0)), likely=False):
        calling_convention.store_error_llvm_values(cg, [(result, Int(32))])
        cg.return_error(assert_id + 1)
    return result


EMITTERS = {MAKE_BUFFER: make_buffer, BUFFER_FIELD: buffer_field, CALL_EXTERN: call_extern}
