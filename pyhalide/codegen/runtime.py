"""Calling a compiled pipeline: marshal numpy arrays and Params, run, turn failures into errors."""

from __future__ import annotations

import ctypes
import os
import sys

import numpy as np

from .. import debug_to_file, memoization
from ..buffer import MAX_ELEMENTS
from ..errors import HalideError, LayoutMismatch, RuntimeCheckError
from ..extern import JITExterns, find_symbol
from ..ir_mutator import cycle_collector_paused
from ..lower import finish_lowering
from ..lowering.copy_graph import to_user_names
from ..types import bfloat16_bits
from . import interrupts
from .cuda import cuda_source
from .gpu_runtime import GPU_FAILED, GpuRun, cuda_device, gpu_loops_run_serially
from .jit import JITFunction
from .llvm import CodeGen
from .profiler import Profiler, last_report

SYMBOL = "pyhalide_pipeline"
DIRECT_SYMBOL = f"{SYMBOL}_direct"  # the entry as a Python builtin (calling_convention.define_direct_entry)


class _MethodDef(ctypes.Structure):
    """CPython's PyMethodDef."""

    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p), ("ml_flags", ctypes.c_int),
                ("ml_doc", ctypes.c_char_p)]


_METH_FASTCALL = 0x80
_new_builtin = ctypes.pythonapi.PyCFunction_NewEx
_new_builtin.restype = ctypes.py_object
_new_builtin.argtypes = [ctypes.POINTER(_MethodDef), ctypes.py_object, ctypes.py_object]


def _builtin(address: int, name: str):
    """A Python builtin function whose C implementation is the METH_FASTCALL function at address,
    and the definition it points to (to keep alive as long as the function)."""
    definition = _MethodDef(name.encode(), address, _METH_FASTCALL, None)
    return _new_builtin(ctypes.byref(definition), None, None), definition


_threads: dict = {}


def num_threads() -> int:
    """Threads for parallel loops: HL_NUM_THREADS (read once, as Halide's runtime does), else
    every core. A forked child has them too: the pool starts its own workers there."""
    n = _threads.get("count")
    if n is None:
        env = os.environ.get("HL_NUM_THREADS")
        try:
            n = max(1, int(env)) if env else (os.cpu_count() or 1)
        except ValueError:
            raise HalideError(f"HL_NUM_THREADS must be a positive integer, got {env!r}") from None
        _threads["count"] = n
    return n


def as_printed(line: str) -> str:
    """A trace's pipeline events name the pipeline as its C function is named: a Func's unique
    name upy$1 makes `Begin pipeline upy_1.0()`, as Halide prints."""
    if line.startswith(("Begin pipeline ", "End pipeline ")):
        return line.replace("$", "_")
    return line


@ctypes.CFUNCTYPE(None, ctypes.c_char_p)
def _write_text(text: bytes) -> None:
    """Where print() and tracing write: Python's sys.stdout, as in Halide's bindings (so output
    interleaves with the program's own prints and can be captured)."""
    sys.stdout.write(as_printed(text.decode(errors="replace")))


_TEXT_ADDRESS = ctypes.cast(_write_text, ctypes.c_void_p).value


class UserNames:
    """A pipeline whose generated names lowering renamed (copy_graph.py): its runtime errors,
    reworded in the user's names (its trace lines are written in them as it is lowered)."""

    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping

    def text(self, text: str) -> str:
        return to_user_names(text, self.mapping)


def dense_buffers(lowered, layouts: tuple) -> list[str]:
    """The buffers whose dimension 0 the layouts say is dense (stride 1)."""
    return [b.name for b, (_, is_dense) in zip(lowered.buffers, layouts) if is_dense and b.dimensions]


class CompiledPipeline:
    """Native code for one lowered pipeline and one choice of buffer axis orders."""

    def __init__(self, lowered, layouts: tuple, target=None, buffer_constants: dict | None = None,
                 jit_externs: JITExterns | None = None):
        self.lowered = lowered
        self.axis_maps = [list(axes) for axes, _ in layouts]
        self.layouts = layouts
        dense = dense_buffers(lowered, layouts)
        contract = target is not None and target.has_feature("fp_contract")
        self.target = target
        cuda = target is not None and target.has_feature("cuda")
        serial = cuda and gpu_loops_run_serially()
        self.kernels = [] if cuda and not serial else None
        self.host_only_gpu = serial
        with cycle_collector_paused():
            stmt = finish_lowering(lowered.stmt, dense, kernels=self.kernels, buffer_constants=buffer_constants,
                                   gpu_loops_serial=serial)
            cg = CodeGen(lowered, stmt, SYMBOL, self.axis_maps, fp_contract=contract, gpu_loops_serial=serial)
            self.llvm_ir = cg.generate()
        self.cuda_source = cuda_source(self.kernels) if self.kernels else None
        self.layout = cg.layout
        self.asserts = cg.asserts
        self.jit_externs = jit_externs
        externs = {}
        for name, arg_types in sorted(cg.extern_functions.items()):
            if name == debug_to_file.SYMBOL:
                externs[name] = debug_to_file.address()
                continue
            if name.startswith(memoization.SYMBOLS):
                externs[name] = memoization.address(name, arg_types)
                continue
            address = jit_externs.address(name, arg_types) if jit_externs is not None else None
            if address is not None:
                externs[name] = address
            elif find_symbol(name) is None:
                raise HalideError(f"Extern stage function {name} is not loaded in this process: load the library "
                                  "that defines it with ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL), or give it to "
                                  "Pipeline.set_jit_externs")
        self._jit = JITFunction(self.llvm_ir, SYMBOL, also=(DIRECT_SYMBOL,), externs=externs)
        self._fn, self._fn_definition = _builtin(self._jit.address_of(DIRECT_SYMBOL), SYMBOL)
        self._specs = []
        for spec, (axes, dense) in zip(lowered.buffers, layouts):
            dtype = spec.type.to_numpy()
            slots = self.layout.min_slots[spec.name]
            self._specs.append((spec, spec.is_output, dtype, spec.dimensions, list(axes), axes[0] if axes else 0,
                                dense, dtype.itemsize, slots))
        # (slot, passed as a double, passed as bfloat16 bits: what emulate_bfloat16 computes with)
        self._params = [(self.layout.param_slots[s.name], s.type.is_float() and not s.type.is_bfloat(),
                         s.type.is_bfloat()) for s in lowered.scalars]
        self._has_float_params = any(is_float for _, is_float, _ in self._params)
        self._template = np.zeros(self.layout.size, dtype=np.int64)
        self._template[self.layout.interrupt_slot] = interrupts.FLAG_ADDRESS
        self._template[self.layout.print_slot] = _TEXT_ADDRESS
        self._modules = {}  # per device kind, the loaded kernels
        self.profiler = None
        if cg.profiler_ids is not None:
            names = [lowered.env.user_names.get(n, n) for n in cg.profiler_ids]
            self.profiler = Profiler(names, cg.profiler_stack)
            self._template[self.layout.profiler_slot] = self.profiler.address
        if self.cuda_source is not None:
            self._gpu_callback = GpuRun.make_callback()
            self._template[self.layout.gpu_slot] = ctypes.cast(self._gpu_callback, ctypes.c_void_p).value

    def run(self, buffers: list, param_values: list, names: UserNames | None = None) -> None:
        """Run on buffers (outputs first, then inputs, as in lowered.buffers) and Param values;
        what it prints and its errors in `names`' user names.

        Each buffer is an hl.Buffer, or a numpy array taken as an hl.Buffer of it would be
        (axes reversed, mins 0). This is the per-call path: checks are cheap and done once."""
        arrays, scalars = self.prepare(buffers)
        self.call(arrays, buffers, scalars, param_values, names)

    def prepare(self, buffers: list) -> tuple[list, np.ndarray]:
        """The arrays to pass and the scalar block holding the buffers' mins, once the buffers
        are checked against what was compiled for: both stay valid while the buffers' arrays,
        shapes and mins do (a caller may keep them for the next call)."""
        sc = self._template.copy()
        arrays = []
        for (spec, is_output, dtype, ndim, axes, axis0, dense, itemsize, slots), buf in zip(self._specs, buffers):
            if type(buf) is np.ndarray:
                arr, mins, buf_axes = buf, None, None
            else:
                arr, mins, buf_axes = buf._array, buf._mins, buf._axis
                if buf._dirty_without_device and not is_output:
                    raise HalideError(f"Input buffer {spec.name} is dirty on device (set_device_dirty), but it has no "
                                      "device allocation to copy its values back to the host from")
            if (arr.dtype is not dtype and arr.dtype != dtype) or arr.ndim != ndim:
                raise HalideError(f"Buffer {spec.name} is {arr.dtype} with {arr.ndim} dimensions, but the pipeline "
                                  f"needs {spec.type} with {ndim}")
            if buf_axes is not None and buf_axes != axes or buf_axes is None and ndim > 1 and axes[0] != ndim - 1:
                raise LayoutMismatch(f"Buffer {spec.name}: axis order differs from the one compiled for")
            flags = arr.flags
            if ndim:
                if dense and arr.strides[axis0] != itemsize and arr.shape[axis0] > 1:
                    raise LayoutMismatch(f"Buffer {spec.name}: dimension 0 is not dense, unlike the one compiled for")
                if not flags.c_contiguous and any(st % itemsize for st in arr.strides):
                    raise HalideError(f"Buffer {spec.name} has strides not a multiple of its element size")
                if arr.size > MAX_ELEMENTS:
                    raise HalideError(f"Buffer {spec.name} has {arr.size} elements; at most 2^31-1 are supported")
            if is_output and not flags.writeable:
                raise HalideError(f"Output buffer {spec.name} is read-only")
            if mins and any(mins):
                for d, m in enumerate(mins):
                    sc[slots[d]] = m
            arrays.append(arr)
        return arrays, sc

    def call(self, arrays: list, buffers: list, sc: np.ndarray, param_values: list,
             names: UserNames | None) -> None:
        """Run on what prepare made of the same buffers (sc: its scalar block, or a copy of it,
        written into here), with these Param values."""
        sc[self.layout.threads_slot] = num_threads()
        if self._params:
            as_float = sc.view(np.float64) if self._has_float_params else None
            for (slot, is_float, is_bfloat), v in zip(self._params, param_values):
                if is_float:
                    as_float[slot] = v
                else:
                    sc[slot] = bfloat16_bits(v) if is_bfloat else v
        interrupts.arm()
        if self.cuda_source is not None:
            rc = self._run_with_gpu(arrays, buffers, sc)
        else:
            rc = self._run_on_host(arrays, buffers, sc)
        if rc != 0:
            if rc == interrupts.INTERRUPTED:
                interrupts.raise_interrupt()
            self._raise(rc, sc, names)

    def _run_on_host(self, arrays: list, buffers: list, sc) -> int:
        """Host code only (no GPU, or GPU loops run as serial loops): a Buffer whose device copy is
        newer is read back first, and one the pipeline writes is then newer on the host."""
        on_device = [(buf, spec[1]) for buf, spec in zip(buffers, self._specs)
                     if getattr(buf, "_device_copy", None) is not None]
        for buf, _ in on_device:
            buf.copy_to_host()
        if self.profiler is None:
            rc = self._fn(*arrays, sc)
        else:
            rc = self.profiler.run(lambda: self._fn(*arrays, sc), self._profiled_name())
            sys.stdout.write(str(last_report()))  # as Halide's JIT reports each realization
        for buf, is_output in on_device:
            if is_output:
                buf.set_host_dirty()
        return rc

    def _profiled_name(self) -> str:
        """The pipeline's name in the report: its first output's."""
        name = next(b.source.name() for b in self.lowered.buffers if b.is_output)
        return self.lowered.env.user_names.get(name, name)

    def _run_with_gpu(self, arrays: list, buffers: list, sc) -> int:
        device = cuda_device()
        module = self._modules.get(device.name)
        if module is None:
            module = self._modules[device.name] = device.load(self.cuda_source, self.kernels, self.target)
        run = GpuRun(device, module, self.kernels)
        for arr, buf in zip(arrays, buffers):
            run.register(arr, None if type(buf) is np.ndarray else buf)
        outer = getattr(GpuRun._local, "run", None)
        GpuRun._local.run = run
        try:
            rc = self._fn(*arrays, sc)
        finally:
            GpuRun._local.run = outer
            if run.error is None:
                run.finish([a for a, spec in zip(arrays, self._specs) if spec[1]])
            else:
                run.finish([])
        if rc == GPU_FAILED:
            raise run.error
        return rc

    def _raise(self, rc: int, sc: np.ndarray, names: UserNames | None):
        message, floats = self.asserts[rc - 1]
        base = self.layout.error_slot + 1
        raw = sc[base : base + len(floats)].astype(np.int64)
        values = [f"{float(r.view(np.float64)):f}" if is_float else int(r) for r, is_float in zip(raw, floats)]
        message = message.format(*values)
        JITExterns.raise_error(self.jit_externs, RuntimeCheckError(message if names is None else names.text(message)))
