"""Calling a compiled pipeline: marshal numpy arrays and Params, run, turn failures into errors."""

from __future__ import annotations

import ctypes
import os
import struct

import numpy as np

from ..errors import HalideError, RuntimeCheckError
from .jit import JITFunction
from .llvm import CodeGen

SYMBOL = "pyhalide_pipeline"
_MAX_ELEMENTS = 2**31 - 1  # index arithmetic is 32-bit, as in Halide


_threads = {"forked": False}


def _after_fork_in_child():
    _threads["forked"] = True  # libgomp is not fork-safe: a forked child runs serially


os.register_at_fork(after_in_child=_after_fork_in_child)


def num_threads() -> int:
    """Threads for parallel loops: HL_NUM_THREADS as in Halide, else every core."""
    if _threads["forked"]:
        return 1
    env = os.environ.get("HL_NUM_THREADS")
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            raise HalideError(f"HL_NUM_THREADS must be a positive integer, got {env!r}") from None
    return os.cpu_count() or 1


def _with_unit_strides(stmt, dense_buffers: list[str]):
    """Specialise a lowered Stmt for buffers whose dimension 0 has stride 1 (checked per call)."""
    if not dense_buffers:
        return stmt
    from .. import ir
    from ..ir_mutator import substitute
    from ..simplify import simplify

    one = ir.make_const(ir.Int(32), 1)
    return simplify(substitute({f"{name}.stride.0": one for name in dense_buffers}, stmt))


class CompiledPipeline:
    """Native code for one lowered pipeline and one choice of buffer axis orders."""

    def __init__(self, lowered, layouts: tuple, target=None):
        self.lowered = lowered
        self.axis_maps = [list(axes) for axes, _ in layouts]
        self.layouts = layouts
        dense = [b.name for b, (_, is_dense) in zip(lowered.buffers, layouts) if is_dense and b.dimensions]
        stmt = _with_unit_strides(lowered.stmt, dense)
        contract = target is not None and target.has_feature("fp_contract")
        cg = CodeGen(lowered, stmt, SYMBOL, self.axis_maps, fp_contract=contract)
        self.llvm_ir = cg.generate()
        self.layout = cg.layout
        self.asserts = cg.asserts
        self._jit = JITFunction(self.llvm_ir, SYMBOL)
        n = len(lowered.buffers) + 1
        proto = ctypes.CFUNCTYPE(ctypes.c_int32, *([ctypes.py_object] * n))
        self._fn = proto(self._jit.address)
        self._dtypes = [b.type.to_numpy() for b in lowered.buffers]
        self._float_params = [(self.layout.param_slots[s.name], s.type.is_float()) for s in lowered.scalars]

    def run(self, buffers: list, param_values: list) -> None:
        """Run on hl.Buffers (outputs first, then inputs, as in lowered.buffers) and Param values."""
        sc = np.zeros(self.layout.size, dtype=np.int64)
        arrays = []
        dense_flags = [d for _, d in self.layouts]
        for spec, buf, dtype, axes, dense in zip(self.lowered.buffers, buffers, self._dtypes, self.axis_maps,
                                                 dense_flags):
            arr = buf._array
            if arr.dtype != dtype:
                raise HalideError(f"Buffer {spec.name} has type {buf.type()} but the pipeline needs {spec.type}")
            if arr.ndim != spec.dimensions:
                raise HalideError(
                    f"Buffer {spec.name} has {arr.ndim} dimensions but the pipeline needs {spec.dimensions}"
                )
            if buf._axis != axes:
                raise HalideError(f"Buffer {spec.name}: axis order differs from the one compiled for")
            if dense and arr.ndim and arr.strides[axes[0]] != arr.itemsize and arr.shape[axes[0]] > 1:
                raise HalideError(f"Buffer {spec.name}: dimension 0 is not dense, unlike the one compiled for")
            if not (arr.flags.c_contiguous or arr.flags.f_contiguous):
                if any(s % arr.itemsize for s in arr.strides):
                    raise HalideError(f"Buffer {spec.name} has strides not a multiple of its element size")
            if arr.size > _MAX_ELEMENTS:
                raise HalideError(f"Buffer {spec.name} has {arr.size} elements; at most 2^31-1 are supported")
            if spec.is_output and not arr.flags.writeable:
                raise HalideError(f"Output buffer {spec.name} is read-only")
            slots = self.layout.min_slots[spec.name]
            for d, m in enumerate(buf._mins):
                sc[slots[d]] = m
            arrays.append(arr)
        sc[self.layout.threads_slot] = num_threads()
        for (slot, is_float), v in zip(self._float_params, param_values):
            sc[slot] = struct.unpack("<q", struct.pack("<d", v))[0] if is_float else v
        rc = self._fn(*arrays, sc)
        if rc != 0:
            self._raise(rc, sc)

    def _raise(self, rc: int, sc: np.ndarray):
        message, nargs = self.asserts[rc - 1]
        base = self.layout.error_slot + 1
        values = [int(v) for v in sc[base : base + nargs]]
        raise RuntimeCheckError(message.format(*values))
