"""Ahead-of-time compilation: a pipeline as an object file that C code calls as it calls Halide's.

The object is one LLVM module, linked from three parts:
- the pipeline, compiled as the JIT compiles it (calling_convention.py: numpy-shaped array headers
  and an int64 scalars block), every function of it internal;
- the runtime it calls: the heap (heap.py) and, for x86-64 Linux, the thread pool (thread_pool.py,
  which needs that OS's futex and x86's `pause`); for other targets parallel loops run on the
  calling thread. Internal too: each object has its own. `halide_error(void *user_context, const
  char *message)` is weak, so a program may define its own, as with Halide's runtime; the default
  writes the message to stderr. print() and tracing write to stderr, as Halide's runtime does;
- the entry, in Halide's calling convention: `int NAME(halide_buffer_t *input, ..., T param, ...,
  halide_buffer_t *output, ...)`, the arguments in the order given and the outputs last. Before
  anything runs it checks every buffer (not NULL, a host pointer, its type and dimensions,
  dimension 0 dense unless its stride constraint was removed, the constant constraints compiled
  in, at most 2^31 - 1 elements apart) and every Param's range (with the target's user_context
  feature, a `void *__user_context` comes first, and halide_error gets it); then it builds the headers and
  the scalars block, calls the pipeline and turns a failed check into the message the JIT raises.
  A failure calls halide_error with the message and returns -1. `NAME_argv(void **args)` takes
  the same arguments through an array (pointers to the scalars, the buffers), as Halide's does.
Buffers the algorithm names directly (not ImageParams) are embedded in the object as constants.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir as ll

from .. import debug_to_file
from ..errors import HalideError, InternalError
from ..lower import finish_lowering
from ..target import TargetArch, TargetOS, get_host_target
from ..types import TYPE_CODES, Type
from . import heap, jit, thread_pool
from .calling_convention import ERROR_VALUES, NP_DATA, NP_DIMS, NP_STRIDES
from .llvm import CodeGen
from .llvm_types import F64, I8, I32, I64, PTR, VOID, llvm_type

I16 = ll.IntType(16)

MAX_SPAN = 2**31 - 1  # the farthest element from a buffer's first, as the JIT allows
FAILED = -1  # what the entry returns on any failure (halide_error has the message)
_HEADER_WORDS = 6  # the numpy-shaped header the pipeline reads: data at 16, dims at 32, strides at 40
_TEXT = 1024  # bytes of a formatted error message; longer ones are cut
_HEAP_KEEP = {64: 1 << 30, 32: 256 << 20}  # bytes the heap keeps for reuse (the JIT's depends on the machine)
_SC_NPROCESSORS_ONLN = 84  # glibc's value: the thread count where HL_NUM_THREADS is unset


@dataclass(frozen=True)
class EntryArgument:
    """One argument of the C entry: a buffer (an ImageParam or an output) or a Param's value."""

    name: str  # the user's name
    type: Type
    dimensions: int  # a buffer's; 0 for a scalar
    is_buffer: bool
    is_output: bool = False
    index: int | None = None  # in lowered.buffers or lowered.scalars; None: an argument the pipeline ignores
    value_range: tuple = (None, None)  # a Param's min and max values
    is_user_context: bool = False  # the `void *__user_context` first argument (the target's user_context feature)

    @property
    def c_name(self) -> str:
        """Its name in the C declaration, as Halide's headers write it."""
        if self.is_user_context:
            return "__user_context"
        safe = re.sub(r"\W", "_", self.name)
        return f"_{safe}_buffer" if self.is_buffer else f"_{safe}"


@dataclass(frozen=True)
class BufferChecks:
    """What the entry checks of one buffer besides its type and dimensions: dimension 0 dense (its
    stride 1, Halide's default constraint) and (field, dimension, value) constants compiled in."""

    dense: bool
    constants: tuple = ()
    host_alignment: int = 0  # set_host_alignment's bytes, checked at entry (0: none)


@dataclass(frozen=True)
class Machine:
    """The CPU and OS an object is for, as LLVM names them."""

    triple: str
    cpu: str
    features: str
    pointer_bits: int
    object_suffix: str
    threads: bool  # the thread pool (x86-64 Linux); else parallel loops run on the caller

    @property
    def x86(self) -> bool:
        return "+sse2" in self.features.split(",")

    @property
    def elf(self) -> bool:
        return "-linux" in self.triple


_X86_FEATURES = {
    "sse41": "+sse4.1", "avx": "+avx", "avx2": "+avx2,+fma,+f16c", "fma": "+fma", "f16c": "+f16c",
    "avx512": "+avx512f,+avx512cd", "avx512_knl": "+avx512f,+avx512cd",
    "avx512_skylake": "+avx512f,+avx512cd,+avx512bw,+avx512dq,+avx512vl",
    "avx512_cannonlake": "+avx512f,+avx512cd,+avx512bw,+avx512dq,+avx512vl,+avx512ifma,+avx512vbmi",
    "avx512_sapphirerapids": "+avx512f,+avx512cd,+avx512bw,+avx512dq,+avx512vl,+avx512bf16,+avx512vnni,+avxvnni",
    "avx512_zen4": "+avx512f,+avx512cd,+avx512bw,+avx512dq,+avx512vl,+avx512bf16,+avx512vnni",
    "avx512_zen5": "+avx512f,+avx512cd,+avx512bw,+avx512dq,+avx512vl,+avx512bf16,+avx512vnni",
    "avxvnni": "+avxvnni",
}
_ARM_FEATURES = {"arm_dot_prod": "+dotprod", "arm_fp16": "+fullfp16",
                 **{f"armv8{k}a": f"+v8.{k}a" for k in range(1, 10)}}
_TRIPLES = {  # (arch, bits, os) -> LLVM triple
    (TargetArch.X86, 64, TargetOS.Linux): "x86_64-unknown-linux-gnu",
    (TargetArch.X86, 64, TargetOS.Android): "x86_64-unknown-linux-android",
    (TargetArch.X86, 64, TargetOS.Windows): "x86_64-pc-windows-msvc",
    (TargetArch.X86, 64, TargetOS.OSX): "x86_64-apple-macosx10.15",
    (TargetArch.X86, 64, TargetOS.IOS): "x86_64-apple-ios13.0-simulator",
    (TargetArch.X86, 32, TargetOS.Linux): "i686-unknown-linux-gnu",
    (TargetArch.X86, 32, TargetOS.Android): "i686-unknown-linux-android",
    (TargetArch.X86, 32, TargetOS.Windows): "i686-pc-windows-msvc",
    (TargetArch.X86, 32, TargetOS.OSX): "i386-apple-macosx10.7",
    (TargetArch.X86, 32, TargetOS.IOS): "i386-apple-ios9.0-simulator",
    (TargetArch.ARM, 64, TargetOS.Linux): "aarch64-unknown-linux-gnu",
    (TargetArch.ARM, 64, TargetOS.Android): "aarch64-unknown-linux-android",
    (TargetArch.ARM, 64, TargetOS.Windows): "aarch64-pc-windows-msvc",
    (TargetArch.ARM, 64, TargetOS.OSX): "arm64-apple-macosx11.0",
    (TargetArch.ARM, 64, TargetOS.IOS): "arm64-apple-ios13.0",
    (TargetArch.ARM, 32, TargetOS.Linux): "armv7-unknown-linux-gnueabihf",
    (TargetArch.ARM, 32, TargetOS.Android): "armv7-none-linux-androideabi",
    (TargetArch.ARM, 32, TargetOS.Windows): "thumbv7-pc-windows-msvc",
    (TargetArch.ARM, 32, TargetOS.IOS): "armv7-apple-ios9.0",
}


def machine_for(target, portable: bool = False) -> Machine:
    """The Machine for an hl.Target: this host's CPU where the target is the host's (same OS, arch,
    bits and instruction set features), else (or `portable`: for any CPU with the target's
    features) a generic CPU of the arch with the target's features."""
    key = (target.arch, target.bits, target.os)
    triple = _TRIPLES.get(key)
    if triple is None:
        raise HalideError(f"Target {target}: no ahead-of-time code for {target.arch.value}-{target.bits}-"
                          f"{target.os.value}")
    suffix = ".obj" if target.os is TargetOS.Windows else ".o"
    threads = key == (TargetArch.X86, 64, TargetOS.Linux)
    host = get_host_target()
    if (not portable and key == (host.arch, host.bits, host.os)
            and set(target.features) & set(_X86_FEATURES) == set(host.features) & set(_X86_FEATURES)):
        info = jit.host_target()
        return Machine(info.triple, info.cpu, info.features, target.bits, suffix, threads)
    features = set(target.features)
    if target.arch is TargetArch.X86:
        flags = ["+" + f for f in x86_llvm_features(target)]
        cpu = "x86-64" if target.bits == 64 else "pentium4"
    else:
        if target.bits == 32 and "armv7s" in features:
            triple = triple.replace("armv7-", "armv7s-")
        flags = ["-neon" if "no_neon" in features else "+neon"]
        flags += [_ARM_FEATURES[name] for name in sorted(features & set(_ARM_FEATURES))]
        cpu = "swift" if "armv7s" in features else "cortex-a9" if target.bits == 32 else "generic"
    return Machine(triple, cpu, ",".join(dict.fromkeys(flags)), target.bits, suffix, threads)


def x86_llvm_features(target) -> list[str]:
    """The LLVM features (names without their +) that code for an x86 target may use."""
    features = set(target.features)
    flags = ["sse2", "sse3", "ssse3"] if "sse41" in features or target.bits == 64 else ["sse2"]
    flags += [f[1:] for name in sorted(features & set(_X86_FEATURES)) for f in _X86_FEATURES[name].split(",")]
    return list(dict.fromkeys(flags))


@dataclass
class ObjectCode:
    """A pipeline compiled ahead of time: the optimised LLVM module and what it is for."""

    fn_name: str
    arguments: list[EntryArgument]
    machine: Machine
    module: object  # llvmlite.binding.ModuleRef
    target_machine: object
    _object: bytes | None = None

    def object_file(self) -> bytes:
        """The object (emitted once: a static library and an object asked together share it)."""
        if self._object is None:
            with jit.llvm_lock():
                self._object = self.target_machine.emit_object(self.module)
        return self._object

    def assembly(self) -> str:
        with jit.llvm_lock():
            return self.target_machine.emit_assembly(self.module)

    def bitcode(self) -> bytes:
        with jit.llvm_lock():
            return self.module.as_bitcode()

    def llvm_assembly(self) -> str:
        return str(self.module)

    def exported_symbols(self) -> list[str]:
        """The functions the object defines for others to call (a static library's index)."""
        return [f.name for f in self.module.functions
                if not f.is_declaration and f.linkage in (llvm.Linkage.external, llvm.Linkage.weak_any)]


def compile_object(lowered, stmt, arguments: list[EntryArgument], fn_name: str, target,
                   checks: dict[str, BufferChecks], constants: dict[str, int], portable: bool = False) -> ObjectCode:
    """The pipeline (lowered, its Stmt `stmt` before the layout passes) as an object for `target`,
    entered through `fn_name` with these arguments. `checks`: per buffer passed in (ImageParams
    and outputs), what the entry checks; `constants`: their `buffer.field.dimension` values
    compiled in, which the entry checks (embedded Buffers' are added here); `portable`: for any
    CPU with the target's features, not tuned for this one (see machine_for)."""
    require_c_identifier(fn_name)
    machine = machine_for(target, portable)
    dense = [b.name for b in lowered.buffers if b.dimensions and (b.name not in checks or checks[b.name].dense)]
    constants = {**constants, **embedded_constants(lowered)}
    stmt = finish_lowering(stmt, dense, buffer_constants=constants, x86=machine.x86)
    impl = f"{fn_name}.pipeline"
    cg = CodeGen(lowered, stmt, impl, [list(range(b.dimensions)) for b in lowered.buffers],
                 fp_contract=target.has_feature("fp_contract"), cpu_features=machine.features,
                 cpu=machine.cpu,
                 pointer_bits=machine.pointer_bits)
    cg.generate(python_entry=False)
    if debug_to_file.SYMBOL in cg.extern_functions:
        raise HalideError(f"{fn_name}: debug_to_file writes its files from the JIT's runtime; pyhalide's "
                          "ahead-of-time objects do not (realize the pipeline to write them)")
    _Entry(cg, lowered, arguments, fn_name, checks, machine).define()
    runtime = [heap.module_ir(_HEAP_KEEP[machine.pointer_bits], machine.x86, ll.IntType(machine.pointer_bits)),
               thread_pool.module_ir() if machine.threads else _serial_pool_ir()]
    with jit.llvm_lock():
        jit.initialize_all_targets()
        mod = llvm.parse_assembly(str(cg.module))
        for text in runtime:
            mod.link_in(llvm.parse_assembly(text))
        for fn in mod.functions:
            if not fn.is_declaration:
                fn.linkage = (llvm.Linkage.weak_any if fn.name == "halide_error" else llvm.Linkage.external
                              if fn.name in (fn_name, f"{fn_name}_argv") else llvm.Linkage.internal)
        for g in mod.global_variables:
            if not g.is_declaration:
                g.linkage = llvm.Linkage.internal
        mod.triple = machine.triple
        mod.verify()
        tm = llvm.Target.from_triple(machine.triple).create_target_machine(
            cpu=machine.cpu, features=machine.features, opt=3, reloc="pic", codemodel="default")
        jit.run_optimizations(mod, tm)
    return ObjectCode(fn_name, arguments, machine, mod, tm)


def require_c_identifier(fn_name: str) -> None:
    if not re.fullmatch(r"[A-Za-z_]\w*", fn_name):
        raise HalideError(f"compile_to: the function name {fn_name!r} is not a C identifier")


def embedded_array(buf) -> np.ndarray:
    """A Buffer's elements as an array whose axis d is the Buffer's dimension d, dimension 0 dense."""
    arr = buf._array
    return np.asfortranarray(np.transpose(arr, buf._axis)) if arr.ndim else arr


def embedded_constants(lowered) -> dict[str, int]:
    """`buffer.field.dimension` -> value for the Buffers the algorithm names, as embedded."""
    out = {}
    for name, buf in lowered.bound_inputs:
        arr = embedded_array(buf)
        for d in range(arr.ndim):
            out.update({f"{name}.min.{d}": buf._mins[d], f"{name}.extent.{d}": arr.shape[d],
                        f"{name}.stride.{d}": arr.strides[d] // arr.itemsize})
    return out


def _serial_pool_ir() -> str:
    """pyhalide_par_for for targets without the thread pool: the task, on the calling thread (a
    task takes iterations until none are left, so one call runs them all)."""
    m = ll.Module("pyhalide_serial_pool")
    fn = ll.Function(m, ll.FunctionType(VOID, [PTR, PTR, I32]), thread_pool.SYMBOL)
    b = ll.IRBuilder(fn.append_basic_block("entry"))
    b.call(thread_pool.Callee(fn.args[0], thread_pool.TASK), [fn.args[1]])
    b.ret_void()
    return str(m)


def halide_type_code(t: Type) -> int:
    """halide_type_t's code for t (a bool is a 1-bit uint)."""
    return 1 if t.is_bool() else TYPE_CODES[t.code]


def c_scalar_type(t: Type) -> ll.Type:
    """The LLVM type of a Param's value in the C entry."""
    if t.is_float() and t.bits == 16 or t.is_handle() or t.lanes != 1:
        raise HalideError(f"compile_to: a Param of type {t} cannot be an argument of ahead-of-time code")
    return I8 if t.is_bool() else llvm_type(t)


def entry_types(arguments: list[EntryArgument]) -> list[ll.Type]:
    """The LLVM types of the C entry's parameters."""
    return [PTR if a.is_buffer or a.is_user_context else c_scalar_type(a.type) for a in arguments]


def printf_escaped(name: str) -> str:
    """A name as literal text of a printf format."""
    return name.replace("%", "%%")


def printf_format_of(message: str, floats: tuple) -> str:
    """A message of the pipeline's asserts (Python's `{}` fields) as a printf format."""
    out, k = [], 0
    for literal, field in re.findall(r"((?:[^{}]|\{\{|\}\})*)(\{[^{}]*\})?", message):
        out.append(literal.replace("%", "%%").replace("{{", "{").replace("}}", "}"))
        if field:
            out.append("%f" if floats[k] else "%lld")
            k += 1
    return "".join(out)


class _Entry:
    """The C entry and its _argv twin, emitted into the pipeline's module (see the module docstring)."""

    def __init__(self, cg: CodeGen, lowered, arguments, fn_name, checks, machine):
        self.cg, self.lowered, self.arguments, self.fn_name = cg, lowered, arguments, fn_name
        self.checks, self.machine = checks, machine
        self.m = cg.module
        self.size_t = ll.IntType(machine.pointer_bits)
        self.dim_t = ll.LiteralStructType([I32, I32, I32, I32])
        type_t = ll.LiteralStructType([I8, I8, I16])
        self.buffer_t = ll.LiteralStructType([I64, PTR, PTR, I64, type_t, I32, PTR, PTR])

    def declare(self, name, ret, args, var_arg=False):
        fn = self.m.globals.get(name)
        return fn if fn is not None else ll.Function(self.m, ll.FunctionType(ret, args, var_arg=var_arg), name)

    def define(self) -> None:
        self._define_halide_error()
        types = entry_types(self.arguments)
        fn = ll.Function(self.m, ll.FunctionType(I32, types), self.fn_name)
        for a, arg in zip(self.arguments, fn.args):
            arg.name = a.c_name
        self.fn = fn
        # what halide_error gets: the caller's user context, where the target has one
        self.user_context = next((v for a, v in zip(self.arguments, fn.args) if a.is_user_context),
                                 ll.Constant(PTR, None))
        b = self.b = ll.IRBuilder(fn.append_basic_block("entry"))
        self.text = self._alloca(ll.ArrayType(I8, _TEXT), "message")
        layout = self.cg.layout
        scalars = self._alloca(ll.ArrayType(I64, layout.size), "scalars")
        b.call(self.declare("llvm.memset.p0.i64", VOID, [PTR, I8, I64, ll.IntType(1)]),
               [scalars, ll.Constant(I8, 0), ll.Constant(I64, layout.size * 8), ll.Constant(ll.IntType(1), 0)])
        self.scalars, self.scalars_type = scalars, ll.ArrayType(I64, layout.size)
        headers = [self._header(spec.dimensions) for spec in self.lowered.buffers]
        by_index = {(a.is_buffer, a.index): (a, v) for a, v in zip(self.arguments, fn.args) if a.index is not None}
        for i, (spec, header) in enumerate(zip(self.lowered.buffers, headers)):
            if (True, i) in by_index:
                self._bind_buffer(spec, by_index[True, i][1], header)
            else:
                self._embed_buffer(spec, header)
        for i, spec in enumerate(self.lowered.scalars):
            a, value = by_index[False, i]
            self._bind_scalar(a, spec, value)
        self._store_slot(layout.threads_slot, self._thread_count())
        flag = ll.GlobalVariable(self.m, I32, f"{self.fn_name}.interrupt_flag")
        flag.linkage, flag.initializer = "internal", ll.Constant(I32, 0)
        self._store_slot(layout.interrupt_slot, self.b.ptrtoint(flag, I64))
        self._store_slot(layout.print_slot, self.b.ptrtoint(self._print_function(), I64))
        scalars_header = self._header(0)
        self._store_field(scalars_header, NP_DATA, scalars)
        impl = self.m.globals[self.cg.fn_name]
        code = self.b.call(impl, [*headers, scalars_header])
        self._report_failed_assert(code)
        self._define_argv(types)

    # -- the parts of the entry
    def _alloca(self, ty: ll.Type, name: str):
        """Stack memory in the entry, as an opaque pointer (as the pipeline's code takes them)."""
        p = self.b.alloca(ty, name=name)
        p.type = PTR
        return p

    def _header(self, dimensions: int):
        """A numpy-shaped header for the pipeline (calling_convention.py), with its own dims and
        strides arrays."""
        header = self._alloca(ll.ArrayType(I64, _HEADER_WORDS), "header")
        if dimensions:
            self._store_field(header, NP_DIMS, self._alloca(ll.ArrayType(I64, dimensions), "dims"))
            self._store_field(header, NP_STRIDES, self._alloca(ll.ArrayType(I64, dimensions), "strides"))
        return header

    def _store_field(self, header, offset: int, value) -> None:
        self.b.store(value, self.b.gep(header, [ll.Constant(I64, offset)], source_etype=I8))

    def _array_of(self, header, offset: int):
        return self.b.load(self.b.gep(header, [ll.Constant(I64, offset)], source_etype=I8), typ=PTR)

    def _store_slot(self, slot: int, value) -> None:
        self.b.store(value, self.b.gep(self.scalars, [ll.Constant(I64, 0), ll.Constant(I64, slot)],
                                       source_etype=self.scalars_type))

    def _field(self, buffer, *indices):
        return self.b.gep(buffer, [ll.Constant(I32, k) for k in (0, *indices)], source_etype=self.buffer_t)

    def _bind_buffer(self, spec, buffer, header) -> None:
        b, name = self.b, printf_escaped(spec.name)
        kind = "Output" if spec.is_output else "Input"
        self._fail_unless(b.icmp_unsigned("!=", buffer, ll.Constant(PTR, None)),
                          f"{kind} buffer {name} is NULL")
        host = b.load(self._field(buffer, 2), typ=PTR)
        self._fail_unless(b.icmp_unsigned("!=", host, ll.Constant(PTR, None)),
                          f"{kind} buffer {name} has no host memory: pyhalide's ahead-of-time code does not "
                          "answer bounds queries; pass an allocated buffer")
        alignment = self.checks[spec.name].host_alignment
        if alignment > 1:
            offset = b.urem(b.ptrtoint(host, I64), ll.Constant(I64, alignment))
            self._fail_unless(b.icmp_unsigned("==", offset, ll.Constant(I64, 0)),
                              f"The host pointer of {name} is not aligned to a {alignment} bytes boundary.", [])
        code = b.load(self._field(buffer, 4, 0), typ=I8)
        bits = b.load(self._field(buffer, 4, 1), typ=I8)
        t = spec.type
        same = b.and_(b.icmp_unsigned("==", code, ll.Constant(I8, halide_type_code(t))),
                      b.icmp_unsigned("==", bits, ll.Constant(I8, t.bits)))
        self._fail_unless(same, f"{kind} buffer {name} has type {t}, but the buffer passed in has type code %d "
                          "and %d bits", [b.zext(code, I32), b.zext(bits, I32)])
        dims = b.load(self._field(buffer, 5), typ=I32)
        self._fail_unless(b.icmp_signed("==", dims, ll.Constant(I32, spec.dimensions)),
                          f"{kind} buffer {name} requires a buffer of exactly {spec.dimensions} dimensions, but the "
                          "buffer passed in has %d dimensions", [dims])
        self._store_field(header, NP_DATA, host)
        dim_array = b.load(self._field(buffer, 6), typ=PTR)
        extents, strides = self._array_of(header, NP_DIMS), self._array_of(header, NP_STRIDES)
        checks = self.checks[spec.name]
        span = ll.Constant(I64, 0)
        for d in range(spec.dimensions):
            values = {}
            for k, fld in enumerate(("min", "extent", "stride")):
                ptr = b.gep(dim_array, [ll.Constant(I32, d), ll.Constant(I32, k)], source_etype=self.dim_t)
                values[fld] = b.load(ptr, typ=I32)
            constraints = [(fld, c) for fld, dim, c in checks.constants if dim == d]
            if d == 0 and checks.dense and all(fld != "stride" for fld, _ in constraints):
                constraints.append(("stride", 1))
            for fld, c in constraints:
                self._fail_unless(b.icmp_signed("==", values[fld], ll.Constant(I32, c)),
                                  f"Constraint violated: {name}.{fld}.{d} (%d) == {c} ({c})", [values[fld]])
            extent, stride = b.sext(values["extent"], I64), b.sext(values["stride"], I64)
            self._fail_unless(b.icmp_signed(">=", extent, ll.Constant(I64, 0)),
                              f"{kind} buffer {name} has extent %lld in dimension {d}", [extent])
            reach = b.mul(b.sub(extent, ll.Constant(I64, 1)), b.select(
                b.icmp_signed("<", stride, ll.Constant(I64, 0)), b.neg(stride), stride))
            reach = b.select(b.icmp_signed(">", extent, ll.Constant(I64, 0)), reach, ll.Constant(I64, 0))
            span = b.add(span, reach)
            b.store(extent, b.gep(extents, [ll.Constant(I64, d)], source_etype=I64))
            b.store(b.mul(stride, ll.Constant(I64, t.bytes())), b.gep(strides, [ll.Constant(I64, d)],
                                                                       source_etype=I64))
            self._store_slot(self.cg.layout.min_slots[spec.name][d], b.sext(values["min"], I64))
        self._fail_unless(b.icmp_signed("<=", span, ll.Constant(I64, MAX_SPAN)),
                          f"{kind} buffer {name} reaches %lld elements past its first; at most 2^31-1 are "
                          "supported", [span])

    def _embed_buffer(self, spec, header) -> None:
        """A Buffer the algorithm names: its elements, dimension 0 dense, as a constant of the object."""
        buf = spec.source
        arr = embedded_array(buf)
        data = bytearray(arr.tobytes(order="F")) or bytearray(1)
        g = ll.GlobalVariable(self.m, ll.ArrayType(I8, len(data)), f"{self.fn_name}.{spec.name}.data")
        g.linkage, g.global_constant, g.align = "internal", True, 64
        g.initializer = ll.Constant(ll.ArrayType(I8, len(data)), data)
        self._store_field(header, NP_DATA, g)
        extents, strides = self._array_of(header, NP_DIMS), self._array_of(header, NP_STRIDES)
        for d in range(spec.dimensions):
            self.b.store(ll.Constant(I64, arr.shape[d]), self.b.gep(extents, [ll.Constant(I64, d)], source_etype=I64))
            self.b.store(ll.Constant(I64, arr.strides[d]), self.b.gep(strides, [ll.Constant(I64, d)],
                                                                       source_etype=I64))
            self._store_slot(self.cg.layout.min_slots[spec.name][d], ll.Constant(I64, buf._mins[d]))

    def _bind_scalar(self, a: EntryArgument, spec, value) -> None:
        b, t = self.b, a.type
        if t.is_float():
            wide = b.fpext(value, F64) if t.bits < 64 else value
            fmt, shown = "%f", wide
        elif t.is_bool():
            wide = b.zext(b.icmp_unsigned("!=", value, ll.Constant(I8, 0)), I64)
            fmt, shown = "%lld", wide
        else:
            wide = (b.sext if t.is_int() else b.zext)(value, I64) if t.bits < 64 else value
            fmt, shown = ("%lld" if t.is_int() else "%llu"), wide
        lo, hi = a.value_range
        for bound, op, word in ((lo, ">=", "at least"), (hi, "<=", "at most")):
            if bound is None:
                continue
            if t.is_float():
                ok = b.fcmp_ordered(op, wide, ll.Constant(F64, float(bound)))
            else:
                ok = (b.icmp_signed if t.is_int() else b.icmp_unsigned)(op, wide, ll.Constant(I64, int(bound)))
            self._fail_unless(ok, f"Parameter {printf_escaped(a.name)} is {fmt} but must be {word} {bound}", [shown])
        self._store_slot(self.cg.layout.param_slots[spec.name], b.bitcast(wide, I64) if t.is_float() else wide)

    def _thread_count(self):
        """HL_NUM_THREADS if set to a positive number, else the processors online (1 without the pool)."""
        if not self.machine.threads:
            return ll.Constant(I64, 1)
        b = self.b
        env = b.call(self.declare("getenv", PTR, [PTR]), [self._string("HL_NUM_THREADS")])
        has_env = b.icmp_unsigned("!=", env, ll.Constant(PTR, None))
        with b.if_else(has_env) as (then, otherwise):
            with then:
                from_env = b.call(self.declare("atoi", I32, [PTR]), [env])
                env_block = b.block
            with otherwise:
                none_block = b.block
        given = b.phi(I32)
        given.add_incoming(from_env, env_block)
        given.add_incoming(ll.Constant(I32, 0), none_block)
        online = b.call(self.declare("sysconf", I64, [I32]), [ll.Constant(I32, _SC_NPROCESSORS_ONLN)])
        online = b.select(b.icmp_signed("<", online, ll.Constant(I64, 1)), ll.Constant(I64, 1), online)
        return b.select(b.icmp_signed(">", given, ll.Constant(I32, 0)), b.sext(given, I64), online)

    def _report_failed_assert(self, code) -> None:
        """0 returned as is; a failed assert's code (1 + its id) as halide_error(message) and -1."""
        b = self.b
        done, failed = self.fn.append_basic_block("done"), self.fn.append_basic_block("failed")
        b.cbranch(b.icmp_signed("==", code, ll.Constant(I32, 0)), done, failed)
        b.position_at_end(done)
        b.ret(ll.Constant(I32, 0))
        b.position_at_end(failed)
        other = self.fn.append_basic_block("unknown")
        switch = b.switch(code, other)
        layout = self.cg.layout
        for k, (message, floats) in enumerate(self.cg.asserts):
            block = self.fn.append_basic_block(f"assert{k}")
            switch.add_case(ll.Constant(I32, k + 1), block)
            b.position_at_end(block)
            values = []
            for j, is_float in enumerate(floats):
                raw = b.load(b.gep(self.scalars, [ll.Constant(I64, 0), ll.Constant(I64, layout.error_slot + 1 + j)],
                                   source_etype=self.scalars_type), typ=I64)
                values.append(b.bitcast(raw, F64) if is_float else raw)
            self._report(printf_format_of(message, floats), values)
            b.ret(ll.Constant(I32, FAILED))
        b.position_at_end(other)
        b.ret(code)

    def _fail_unless(self, condition, fmt: str, values=()) -> None:
        """Report fmt (a printf format of `values`) and return -1 unless condition holds."""
        if len(values) > ERROR_VALUES:
            raise InternalError("an entry check reports too many values")
        b = self.b
        ok, bad = self.fn.append_basic_block("ok"), self.fn.append_basic_block("check_failed")
        b.cbranch(condition, ok, bad)
        b.position_at_end(bad)
        self._report(fmt, list(values))
        b.ret(ll.Constant(I32, FAILED))
        b.position_at_end(ok)

    def _report(self, fmt: str, values: list) -> None:
        snprintf = self.declare("snprintf", I32, [PTR, self.size_t, PTR], var_arg=True)
        self.b.call(snprintf, [self.text, ll.Constant(self.size_t, _TEXT), self._string(fmt), *values])
        self.b.call(self.m.globals["halide_error"], [self.user_context, self.text])

    def _string(self, s: str):
        return self.cg.string_constant(s)

    # -- the runtime services the entry points the pipeline at
    def _write_to_stderr(self, b: ll.IRBuilder, text) -> None:
        length = b.call(self.declare("strlen", self.size_t, [PTR]), [text])
        b.call(self.declare("write", self.size_t, [I32, PTR, self.size_t]), [ll.Constant(I32, 2), text, length])

    def _define_halide_error(self) -> None:
        """The default halide_error (weak): the message and a newline on stderr."""
        fn = ll.Function(self.m, ll.FunctionType(VOID, [PTR, PTR]), "halide_error")
        b = ll.IRBuilder(fn.append_basic_block("entry"))
        self._write_to_stderr(b, fn.args[1])
        self._write_to_stderr(b, self._string("\n"))
        b.ret_void()

    def _print_function(self):
        """What print() and tracing call with each line: stderr, as Halide's runtime prints."""
        fn = ll.Function(self.m, ll.FunctionType(VOID, [PTR]), f"{self.fn_name}.print")
        fn.linkage = "internal"
        b = ll.IRBuilder(fn.append_basic_block("entry"))
        self._write_to_stderr(b, fn.args[0])
        b.ret_void()
        return fn

    def _define_argv(self, types) -> None:
        """`int NAME_argv(void **args)`: args[i] points to scalar argument i (or the user
        context), or is buffer argument i (the halide_buffer_t *), as Halide's argv entries take them."""
        fn = ll.Function(self.m, ll.FunctionType(I32, [PTR]), f"{self.fn_name}_argv")
        b = ll.IRBuilder(fn.append_basic_block("entry"))
        values = []
        for k, (a, ty) in enumerate(zip(self.arguments, types)):
            slot = b.load(b.gep(fn.args[0], [ll.Constant(I64, k)], source_etype=PTR), typ=PTR)
            values.append(slot if a.is_buffer else b.load(slot, typ=ty))
        b.ret(b.call(self.fn, values))


def static_library(members: list[tuple[str, bytes, list[str]]]) -> bytes:
    """An ar archive (System V / GNU format, with the symbol index ELF linkers need) of
    (member name, object bytes, symbols it defines)."""
    names = b"".join(name.encode() + b"/\n" for name, _, _ in members)
    use_name_table = any(len(name) > 15 for name, _, _ in members)

    def header(name: bytes, size: int) -> bytes:
        return b"%-16s%-12d%-6d%-6d%-8s%-10d`\n" % (name, 0, 0, 0, b"644", size)

    def padded(data: bytes) -> bytes:
        return data + b"\n" * (len(data) % 2)

    symbols = [(s, k) for k, (_, _, syms) in enumerate(members) for s in syms]
    index_size = 4 + 4 * len(symbols) + sum(len(s) + 1 for s, _ in symbols)
    offset = 8 + 60 + index_size + index_size % 2
    if use_name_table:
        offset += 60 + len(names) + len(names) % 2
    offsets, name_offsets, position = [], [], 0
    for name, data, _ in members:
        offsets.append(offset)
        name_offsets.append(position)
        position += len(name) + 2
        offset += 60 + len(data) + len(data) % 2
    index = struct.pack(">I", len(symbols)) + b"".join(struct.pack(">I", offsets[k]) for _, k in symbols)
    index += b"".join(s.encode() + b"\0" for s, _ in symbols)
    out = [b"!<arch>\n", header(b"/", len(index)), padded(index)]
    if use_name_table:
        out += [header(b"//", len(names)), padded(names)]
    for (name, data, _), at in zip(members, name_offsets):
        label = b"/%d" % at if use_name_table else name.encode() + b"/"
        out += [header(label, len(data)), padded(data)]
    return b"".join(out)
