"""Running CUDA kernels: compiling their source, device memory with Halide's dirty bits, launching.

A `Device` is the thin launcher interface: compile a translation unit, allocate, copy, launch,
synchronize. Three implement it: `PyCudaDevice` (pycuda, the `cuda` extra), `CudaBindingsDevice`
(NVIDIA's cuda-bindings, where pycuda is missing) and `EmulatedDevice`, which compiles the same
CUDA C as C++ for the CPU and runs each block's threads as std::threads with a real barrier and
separate "device" memory: the generated code and the copy protocol are tested without a GPU.
$PYHALIDE_CUDA_DEVICE (pycuda, cuda-bindings, emulated) picks one; by default the first of
pycuda and cuda-bindings that finds a GPU. PYHALIDE_CUDA_DEVICE=serial, read when a pipeline is
compiled, makes no kernels at all: the CPU backend runs the GPU loop nest with its block and
thread loops as serial loops, the cheapest check that a GPU schedule keeps the meaning.

The host code calls `GpuRun.callback(op, args, n)` (an address in the scalars array) to launch a
kernel or copy a buffer; a GpuRun lives for one call of the pipeline and tracks every buffer the
kernels touch by its host address: its device copy and which copy is newer (Halide's host and
device dirty bits). As in Halide, the hl.Buffers the kernels use keep their device copies, and
that state, across calls (until copy_to_host, device_free, or the Buffer's end); a bare numpy
array's is copied back and freed when the call ends.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from ..errors import HalideError
from ..lowering.gpu_kernels import MAX_GRID_DIMS, MAX_SHARED_BYTES, Kernel, block_size_problem
from ..types import Int
from .jit import cache_root

LAUNCH, COPY_TO_HOST, HOST_WRITTEN, FREE = 0, 1, 2, 3
OPS = {"gpu_launch": LAUNCH, "gpu_copy_to_host": COPY_TO_HOST, "gpu_host_written": HOST_WRITTEN, "gpu_free": FREE}
VECTOR_ALIGNMENT = 16  # bytes: the widest vector load kernels make (float4)
GPU_FAILED = -2  # what the pipeline returns when a runtime call failed (the error is kept in the GpuRun)
CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_int64), ctypes.c_int32)


class DeviceUnavailable(HalideError):
    """A CUDA target was asked to run where a part it needs (package, driver, GPU) is missing."""


# ---------------------------------------------------------------------------- compiling
def _cache_path(kind: str, key_text: str, suffix: str) -> Path:
    key = hashlib.sha256(key_text.encode()).hexdigest()[:32]
    root = cache_root() / "cuda"
    root.mkdir(parents=True, exist_ok=True)
    return root / f"{kind}-{key}{suffix}"


def nvcc_path() -> str | None:
    found = shutil.which("nvcc")
    if found is None and os.path.exists("/usr/local/cuda/bin/nvcc"):
        found = "/usr/local/cuda/bin/nvcc"
    return found


_NVRTC = []


def _nvrtc():
    """cuda-bindings' NVRTC module if it imports and finds libnvrtc, else None (nvcc then)."""
    if not _NVRTC:
        try:
            from cuda.bindings import nvrtc

            err, *_ = nvrtc.nvrtcVersion()
            _NVRTC.append(nvrtc if err == nvrtc.nvrtcResult.NVRTC_SUCCESS else None)
        except Exception:  # noqa: BLE001 - not installed, or its library not found
            _NVRTC.append(None)
    return _NVRTC[0]


def compile_ptx(source: str, capability: int, fp_contract: bool = False) -> str:
    """PTX for compute capability `capability` (NVRTC where installed, else nvcc), cached on disk
    by source, architecture and options. Floats are not contracted into FMAs unless asked, so GPU
    results match the CPU's bit for bit (transcendental functions aside)."""
    return _compile(source, capability, fp_contract, machine_code=False).decode()


def compile_cubin(source: str, capability: int, fp_contract: bool = False) -> bytes:
    """Machine code (a cubin) for sm_<capability>, what a device loads: unlike PTX, which the
    driver compiles and refuses when it is newer than the driver, a cubin from a newer toolkit of
    the same major version loads (CUDA's minor-version compatibility)."""
    return _compile(source, capability, fp_contract, machine_code=True)


def _compile(source: str, capability: int, fp_contract: bool, machine_code: bool) -> bytes:
    arch = f"{'sm' if machine_code else 'compute'}_{capability}"
    options = [f"--gpu-architecture={arch}", f"--fmad={'true' if fp_contract else 'false'}", "-std=c++17"]
    nvrtc = _nvrtc()
    tool = "nvrtc" if nvrtc is not None else nvcc_path()
    if tool is None:
        raise DeviceUnavailable("Compiling CUDA kernels needs NVRTC (pip install 'pyhalide[cuda]') or nvcc on PATH; "
                                "neither was found")
    path = _cache_path("cubin" if machine_code else "ptx", "\0".join([tool, *options, source]),
                       ".cubin" if machine_code else ".ptx")
    if path.exists():
        return path.read_bytes()
    compiled = (_nvrtc_compile(nvrtc, source, options, machine_code) if nvrtc is not None
                else _nvcc_compile(tool, source, options, machine_code))
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(compiled)
    os.replace(tmp, path)
    return compiled


def _nvrtc_compile(nvrtc, source: str, options: list[str], machine_code: bool) -> bytes:
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"pyhalide.cu", 0, [], [])
    opts = [o.encode() for o in options]
    (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise HalideError(f"NVRTC failed to compile the generated CUDA code ({' '.join(options)}):\n"
                          f"{log.decode(errors='replace')}")
    get_size, get = ((nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN) if machine_code
                     else (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX))
    _, size = get_size(prog)
    out = b" " * size
    get(prog, out)
    nvrtc.nvrtcDestroyProgram(prog)
    return out if machine_code else out.rstrip(b"\0 ")


def _nvcc_compile(nvcc: str, source: str, options: list[str], machine_code: bool) -> bytes:
    arch = options[0].split("=")[1]
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d, "k.cu"), Path(d, "k.out")
        src.write_text(source)
        r = subprocess.run([nvcc, "-cubin" if machine_code else "-ptx", f"-arch={arch}", options[1], options[2],
                            str(src), "-o", str(out)], capture_output=True, text=True)
        if r.returncode != 0:
            raise HalideError(f"nvcc failed to compile the generated CUDA code:\n{r.stderr}")
        return out.read_bytes()


@dataclass(frozen=True)
class KernelResources:
    """What ptxas reports for one kernel."""

    name: str
    registers: int
    spill_stores: int
    spill_loads: int
    shared_bytes: int
    stack_bytes: int


def ptxas_report(ptx: str, capability: int) -> dict[str, KernelResources]:
    """Registers, spills, shared memory and stack per kernel, from `ptxas -v` (which also proves the
    PTX assembles for sm_<capability>)."""
    ptxas = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
    with tempfile.TemporaryDirectory() as d:
        src = Path(d, "k.ptx")
        src.write_text(ptx)
        r = subprocess.run([ptxas, f"-arch=sm_{capability}", "-v", str(src), "-o", os.devnull],
                           capture_output=True, text=True)
    if r.returncode != 0:
        raise HalideError(f"ptxas rejected the PTX for sm_{capability}:\n{r.stderr}")
    report, name, stack, spills = {}, None, 0, (0, 0)
    for line in r.stderr.splitlines():
        if m := re.search(r"Compiling entry function '(\w+)'", line):
            name = m.group(1)
        elif m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line):
            stack, spills = int(m.group(1)), (int(m.group(2)), int(m.group(3)))
        elif (m := re.search(r"Used (\d+) registers", line)) and name is not None:
            smem = re.search(r"(\d+) bytes smem", line)
            report[name] = KernelResources(name, int(m.group(1)), spills[0], spills[1],
                                           int(smem.group(1)) if smem else 0, stack)
    return report


# ---------------------------------------------------------------------------- devices
# A kernel of one thread that spins for a given number of nanoseconds of the GPU's global timer.
_DELAY_SOURCE = r"""
extern "C" __global__ void hl_delay(long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < (unsigned long long)ns);
}
"""
_DELAY = SimpleNamespace(name="hl_delay")
_DELAY_NS = 500_000  # longer than the host takes to launch a kernel between two events


class Device:
    """The launcher interface. Device addresses are ints; arguments of a launch are (value, Type)
    pairs, the Type None for a device pointer."""

    name = "device"

    capability = 0  # the GPU's compute capability, 10 * major + minor

    def load(self, source: str, kernels: list[Kernel], target):
        """The kernels of a translation unit, compiled for this GPU and loaded."""
        return self.load_binary(self._compile(source, target), [k.name for k in kernels])

    def load_binary(self, binary: bytes, names: list[str]):
        raise NotImplementedError

    def _compile(self, source: str, target) -> bytes:
        """Machine code for this GPU's own architecture: the target's cuda_capability is the
        least a GPU must have (CUDA 13's compilers no longer build for 7.0, the default)."""
        if target.cuda_capability() > self.capability:
            raise DeviceUnavailable(f"Target {target} asks for CUDA compute capability "
                                    f"{target.cuda_capability() / 10:.1f}; this GPU has {self.capability / 10:.1f}")
        return compile_cubin(source, self.capability, target.has_feature("fp_contract"))

    def malloc(self, nbytes: int) -> int:
        raise NotImplementedError

    def free(self, address: int) -> None:
        raise NotImplementedError

    def to_device(self, address: int, host: int, nbytes: int) -> None:
        raise NotImplementedError

    def to_host(self, host: int, address: int, nbytes: int) -> None:
        raise NotImplementedError

    def launch(self, module, kernel: Kernel, grid: tuple, block: tuple, shared_bytes: int, args: list) -> None:
        """Run kernel on a grid of blocks of `block` threads with `shared_bytes` of dynamic shared
        memory each."""
        raise NotImplementedError

    def synchronize(self) -> None:
        pass

    # Kernel timing for benchmarks: with `profiling` on, every launch adds its kernel's time on
    # the device (CUDA events) to kernel_ms[kernel name]; the launch then waits for the kernel.
    # Before the first event the GPU is kept busy by a kernel that waits (hl_delay), so the
    # events and the kernel run back to back: timed from an idle GPU, the start event would be
    # stamped when the host began the launch, adding the host's launch time (tens of
    # microseconds through Python) to every kernel.
    profiling = False
    _delay = None

    def timed_launch(self, module, kernel: Kernel, grid: tuple, block: tuple, shared_bytes: int, args: list) -> None:
        if not self.profiling:
            self.launch(module, kernel, grid, block, shared_bytes, args)
            return
        if self.capability:
            if self._delay is None:
                self._delay = self.load_binary(compile_cubin(_DELAY_SOURCE, self.capability), [_DELAY.name])
            self.launch(self._delay, _DELAY, (1, 1, 1), (1, 1, 1), 0, [(_DELAY_NS, Int(64))])
        start, stop = self.event(), self.event()
        self.record(start)
        self.launch(module, kernel, grid, block, shared_bytes, args)
        self.record(stop)
        ms = self.elapsed_ms(start, stop)
        self.kernel_ms[kernel.name] = self.kernel_ms.get(kernel.name, 0.0) + ms

    def event(self):
        return None

    def record(self, event) -> None:
        pass

    def elapsed_ms(self, start, stop) -> float:
        return 0.0


class EmulatedDevice(Device):
    """The CPU as a pretend GPU: kernels are the generated CUDA C compiled with g++ (threads of a
    block run as std::threads, __syncthreads is a std::barrier), device memory is separate host
    memory, so a missing copy shows up as a wrong result."""

    name = "emulated"

    def __init__(self):
        self._blocks: dict[int, ctypes.Array] = {}
        self.kernel_ms: dict[str, float] = {}

    def event(self):
        return [0.0]

    def record(self, event) -> None:
        import time

        event[0] = time.perf_counter()

    def elapsed_ms(self, start, stop) -> float:
        return (stop[0] - start[0]) * 1e3

    def load(self, source, kernels, target):
        cxx = shutil.which("g++")
        if cxx is None:
            raise DeviceUnavailable("The emulated CUDA device compiles kernels with g++, which is not installed")
        path = _cache_path("emulated", source, ".so")
        if not path.exists():
            with tempfile.TemporaryDirectory() as d:
                src = Path(d, "k.cpp")
                src.write_text(source)
                out = Path(d, "k.so")
                r = subprocess.run([cxx, "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "-w", str(src), "-o",
                                    str(out)], capture_output=True, text=True)
                if r.returncode != 0:
                    raise HalideError(f"g++ failed to compile the generated CUDA code for emulation:\n{r.stderr}")
                os.replace(out, path)
        lib = ctypes.CDLL(str(path))
        entries = {}
        for k in kernels:
            fn = getattr(lib, k.name + "_emulated")
            fn.argtypes = [ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int), ctypes.c_int64,
                           ctypes.POINTER(ctypes.c_int64)]
            fn.restype = None
            entries[k.name] = fn
        return lib, entries

    def malloc(self, nbytes):
        block = (ctypes.c_uint8 * max(nbytes, 1))()
        address = ctypes.addressof(block)
        self._blocks[address] = block
        return address

    def free(self, address):
        self._blocks.pop(address, None)

    def to_device(self, address, host, nbytes):
        ctypes.memmove(address, host, nbytes)

    def to_host(self, host, address, nbytes):
        ctypes.memmove(host, address, nbytes)

    def launch(self, module, kernel, grid, block, shared_bytes, args):
        packed = (ctypes.c_int64 * max(len(args), 1))()
        for i, (v, t) in enumerate(args):
            packed[i] = int(np.float64(v).view(np.int64)) if t is not None and t.is_float() else int(v)
        fn = module[1][kernel.name]
        fn((ctypes.c_int64 * 3)(*grid), (ctypes.c_int * 3)(*block), shared_bytes, packed)


def _check_block(kernel: Kernel, block: tuple, shared_bytes: int) -> None:
    """A block sized at the launch must fit the GPU (what was known when compiling was checked then)."""
    problem = block_size_problem(kernel.name, block)
    if problem:
        raise HalideError(f"{problem} (the block's size for these inputs)")
    if kernel.shared_bytes + shared_bytes > MAX_SHARED_BYTES:
        raise HalideError(f"Kernel {kernel.name} needs {kernel.shared_bytes + shared_bytes} bytes of shared memory "
                          f"per block for these inputs; a block has at most {MAX_SHARED_BYTES}: use smaller tiles")


def _numpy_arg(value, t):
    return np.intp(value) if t is None else np.dtype(t.to_numpy()).type(value)


def _ctypes_arg(value, t):
    """A scalar kernel argument as ctypes holds it; a float16 (which ctypes lacks) as its bits."""
    if t.is_float() and t.bits == 16:
        return ctypes.c_uint16(int(np.float16(value).view(np.uint16)))
    return np.ctypeslib.as_ctypes_type(t.to_numpy())(value)


class PyCudaDevice(Device):
    name = "pycuda"

    def __init__(self):
        import pycuda.driver as drv  # ImportError without pycuda or libcuda

        drv.init()
        if drv.Device.count() == 0:
            raise DeviceUnavailable("pycuda found no CUDA GPU")
        self.drv = drv
        self.context = drv.Device(int(os.environ.get("HL_GPU_DEVICE", "0"))).retain_primary_context()
        self.context.push()
        self._allocations = {}
        self.kernel_ms: dict[str, float] = {}
        cap = drv.Context.get_device().compute_capability()
        self.capability = cap[0] * 10 + cap[1]

    def load_binary(self, binary: bytes, names: list[str]):
        module = self.drv.module_from_buffer(binary)
        return {name: module.get_function(name) for name in names}

    def malloc(self, nbytes):
        a = self.drv.mem_alloc(max(nbytes, 1))
        self._allocations[int(a)] = a
        return int(a)

    def free(self, address):
        a = self._allocations.pop(address, None)
        if a is not None:
            a.free()

    def to_device(self, address, host, nbytes):
        self.drv.memcpy_htod(address, (ctypes.c_uint8 * nbytes).from_address(host))

    def to_host(self, host, address, nbytes):
        self.drv.memcpy_dtoh((ctypes.c_uint8 * nbytes).from_address(host), address)

    def launch(self, module, kernel, grid, block, shared_bytes, args):
        module[kernel.name](*[_numpy_arg(v, t) for v, t in args], grid=tuple(int(g) for g in grid),
                            block=tuple(int(b) for b in block), shared=int(shared_bytes))

    def synchronize(self):
        self.drv.Context.synchronize()

    def event(self):
        return self.drv.Event()

    def record(self, event) -> None:
        event.record()

    def elapsed_ms(self, start, stop) -> float:
        stop.synchronize()
        return stop.time_since(start)


class CudaBindingsDevice(Device):
    name = "cuda-bindings"

    def __init__(self):
        from cuda.bindings import driver  # ImportError without cuda-bindings

        self.cu = driver
        self._check(driver.cuInit(0)[0], "cuInit")
        err, count = driver.cuDeviceGetCount()
        if err != driver.CUresult.CUDA_SUCCESS or count == 0:
            raise DeviceUnavailable("cuda-bindings found no CUDA GPU")
        err, dev = driver.cuDeviceGet(int(os.environ.get("HL_GPU_DEVICE", "0")))
        err, self.context = driver.cuDevicePrimaryCtxRetain(dev)
        self._check(driver.cuCtxSetCurrent(self.context)[0], "cuCtxSetCurrent")
        major = driver.cuDeviceGetAttribute(driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                            dev)[1]
        minor = driver.cuDeviceGetAttribute(driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                            dev)[1]
        self.capability = major * 10 + minor
        self.kernel_ms: dict[str, float] = {}

    def _check(self, err, what: str) -> None:
        if err != self.cu.CUresult.CUDA_SUCCESS:
            raise HalideError(f"CUDA driver call {what} failed: {err}")

    def _ctx(self):
        self._check(self.cu.cuCtxSetCurrent(self.context)[0], "cuCtxSetCurrent")

    def load_binary(self, binary: bytes, names: list[str]):
        self._ctx()
        err, module = self.cu.cuModuleLoadData(binary)
        self._check(err, "cuModuleLoadData")
        functions = {}
        for name in names:
            err, fn = self.cu.cuModuleGetFunction(module, name.encode())
            self._check(err, "cuModuleGetFunction")
            functions[name] = fn
        return module, functions

    def malloc(self, nbytes):
        self._ctx()
        err, ptr = self.cu.cuMemAlloc(max(nbytes, 1))
        self._check(err, "cuMemAlloc")
        return int(ptr)

    def free(self, address):
        self._ctx()  # a DeviceAllocation is freed on whichever thread drops it last
        self._check(self.cu.cuMemFree(address)[0], "cuMemFree")

    def to_device(self, address, host, nbytes):
        self._check(self.cu.cuMemcpyHtoD(address, host, nbytes)[0], "cuMemcpyHtoD")

    def to_host(self, host, address, nbytes):
        self._check(self.cu.cuMemcpyDtoH(host, address, nbytes)[0], "cuMemcpyDtoH")

    def launch(self, module, kernel, grid, block, shared_bytes, args):
        # kernelParams as the driver takes it, an array of pointers to the values (the one form
        # every cuda-bindings version accepts as a plain address)
        values = [ctypes.c_void_p(v) if t is None else _ctypes_arg(v, t) for v, t in args]
        params = (ctypes.c_void_p * max(len(values), 1))(*[ctypes.addressof(v) for v in values])
        err = self.cu.cuLaunchKernel(module[1][kernel.name], *(int(g) for g in grid), *(int(b) for b in block),
                                     int(shared_bytes), 0, ctypes.addressof(params), 0)[0]
        self._check(err, f"cuLaunchKernel({kernel.name})")

    def synchronize(self):
        self._check(self.cu.cuCtxSynchronize()[0], "cuCtxSynchronize")

    def event(self):
        err, ev = self.cu.cuEventCreate(0)
        self._check(err, "cuEventCreate")
        return ev

    def record(self, event) -> None:
        self._check(self.cu.cuEventRecord(event, 0)[0], "cuEventRecord")

    def elapsed_ms(self, start, stop) -> float:
        self._check(self.cu.cuEventSynchronize(stop)[0], "cuEventSynchronize")
        err, ms = self.cu.cuEventElapsedTime(start, stop)
        self._check(err, "cuEventElapsedTime")
        for ev in (start, stop):
            self.cu.cuEventDestroy(ev)
        return float(ms)


_devices: dict[str, Device] = {}
_IMPLEMENTATIONS = {"pycuda": PyCudaDevice, "cuda-bindings": CudaBindingsDevice, "emulated": EmulatedDevice}


_MISSING = {"pycuda": "pycuda is not installed (pip install 'pyhalide[cuda]')",
            "cuda-bindings": "cuda-bindings is not installed (pip install cuda-bindings)"}


def _open(kind: str) -> Device:
    """The device of that kind, opened once; DeviceUnavailable says what it lacks."""
    device = _devices.get(kind)
    if device is None:
        try:
            device = _devices[kind] = _IMPLEMENTATIONS[kind]()
        except ImportError as e:
            missing = f"{kind}: no CUDA driver (libcuda.so.1)" if "libcuda" in str(e) else _MISSING.get(kind, str(e))
            raise DeviceUnavailable(missing) from None
        except DeviceUnavailable:
            raise
        except Exception as e:  # the driver's own error (no device, driver too old, ...)
            raise DeviceUnavailable(f"{kind}: {e}") from None
    return device


def gpu_loops_run_serially() -> bool:
    return os.environ.get("PYHALIDE_CUDA_DEVICE") == "serial"


def cuda_device() -> Device:
    """The device CUDA pipelines run on ($PYHALIDE_CUDA_DEVICE, else the first launcher with a GPU);
    DeviceUnavailable says what is missing."""
    wanted = os.environ.get("PYHALIDE_CUDA_DEVICE")
    if wanted == "serial":  # no kernels run; Buffers' device copies are the emulated device's memory
        return _open("emulated")
    if wanted:
        if wanted not in _IMPLEMENTATIONS:
            raise HalideError(f"PYHALIDE_CUDA_DEVICE must be one of {', '.join(_IMPLEMENTATIONS)} or serial, got "
                              f"{wanted!r}")
        return _open(wanted)
    reasons = []
    for kind in ("pycuda", "cuda-bindings"):
        try:
            return _open(kind)
        except DeviceUnavailable as e:
            reasons.append(str(e))
    raise DeviceUnavailable("No CUDA GPU can run this pipeline: " + "; ".join(reasons) +
                            ". (PYHALIDE_CUDA_DEVICE=emulated runs the kernels on the CPU, for testing.)")


def cuda_unavailable_reason() -> str | None:
    try:
        cuda_device()
    except HalideError as e:
        return str(e)
    return None


# ---------------------------------------------------------------------------- one call
class DeviceAllocation:
    """Device memory, freed once nothing refers to it: a Buffer's device copy and the views of it
    (crops, slices) share one, so a view keeps it alive after the Buffer it came from is gone."""

    def __init__(self, device: Device, nbytes: int):
        self.address = device.malloc(nbytes)
        finalizer = weakref.finalize(self, device.free, self.address)
        finalizer.atexit = False  # the driver may be gone by then; the process's memory goes anyway


@dataclass
class DeviceCopy:
    """A buffer's device copy and Halide's dirty bits: which of host and device is newer."""

    device: Device
    address: int
    nbytes: int
    offset: int  # bytes from the start of the device copy to the host pointer's element
    host_dirty: bool = True
    device_dirty: bool = False
    kept: bool = False  # an hl.Buffer holds it across calls (else it is freed at the end of the call)
    allocation: DeviceAllocation | None = None  # the device memory (address is inside it)
    elements: np.ndarray | None = None  # the host array, where known: its elements are this copy's

    def _spans_gaps(self) -> bool:
        """Whether the bytes the elements span hold others (a strided view, a crop's parent's)."""
        return self.elements is not None and self.elements.nbytes != self.nbytes

    def _staged(self, view: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The device copy's bytes read into host memory, and the elements' view of them."""
        staged = np.empty(self.nbytes, np.uint8)
        self.device.to_host(staged.ctypes.data, self.address, self.nbytes)
        return staged, np.ndarray(view.shape, view.dtype, buffer=staged, offset=self.offset, strides=view.strides)

    def copy_to_host(self, host: int) -> None:
        """The device copy's elements back to the host array at `host` (the address of its
        element at the host pointer). A view whose elements do not fill the bytes they span goes
        through a staging copy, so the host's bytes between them are left alone."""
        self.device.synchronize()
        if self._spans_gaps():
            self.elements[...] = self._staged(self.elements)[1]
        else:
            self.device.to_host(host - self.offset, self.address, self.nbytes)
        self.device_dirty = False

    def copy_to_device(self, host: int) -> None:
        """The host array's elements to the device copy; as copy_to_host, a view with gaps writes
        its own elements only (the device bytes between them may be another buffer's newer ones)."""
        if self._spans_gaps():
            staged, view = self._staged(self.elements)
            view[...] = self.elements
            self.device.to_device(self.address, staged.ctypes.data, self.nbytes)
        else:
            self.device.to_device(self.address, host - self.offset, self.nbytes)
        self.host_dirty = False

    def allocate(self) -> None:
        """Device memory for the copy, placed so that the element at the host pointer is
        aligned to VECTOR_ALIGNMENT bytes: kernels load aligned runs of elements as vectors."""
        self.allocation = DeviceAllocation(self.device, self.nbytes + VECTOR_ALIGNMENT)
        start = self.allocation.address
        self.address = start + (-(start + self.offset)) % VECTOR_ALIGNMENT

    def view(self, parent: np.ndarray, view: np.ndarray) -> DeviceCopy:
        """The device copy of `view`, an array of some of `parent`'s elements (a crop, a slice):
        the same device memory, laid out as on the host, and the same dirty bits, as Halide's
        device_crop and device_slice."""
        offset, nbytes = span(view)
        shift = view.__array_interface__["data"][0] - parent.__array_interface__["data"][0]
        return DeviceCopy(self.device, self.address + self.offset + shift - offset, nbytes, offset, self.host_dirty,
                          self.device_dirty, True, self.allocation, view)

    def aligned(self) -> bool:
        """Whether the element at the host pointer is where kernels' vector accesses assume."""
        return (self.address + self.offset) % VECTOR_ALIGNMENT == 0

    def free(self) -> None:
        """Drop this copy's hold on the device memory (freed when no view holds it either)."""
        self.allocation = None
        self.address = 0


def span(arr: np.ndarray) -> tuple[int, int]:
    """(bytes before the data pointer, total bytes) that an array's elements occupy."""
    lo = sum(min(0, (n - 1) * s) for n, s in zip(arr.shape, arr.strides) if n > 0)
    hi = sum(max(0, (n - 1) * s) for n, s in zip(arr.shape, arr.strides) if n > 0)
    return -lo, (hi - lo + arr.itemsize) if arr.size else 0


class GpuRun:
    """The device side of one call of a pipeline with kernels."""

    _local = threading.local()

    def __init__(self, device: Device, module, kernels: list[Kernel]):
        self.device, self.module, self.kernels = device, module, kernels
        self.copies: dict[int, DeviceCopy] = {}
        self.owners: dict[int, object] = {}  # host address -> the hl.Buffer to give its device copy
        self.error: BaseException | None = None

    def register(self, arr: np.ndarray, buffer) -> None:
        """A pipeline buffer (`buffer`: the hl.Buffer it is, None for a bare array). A Buffer's
        device copy is used where it has one, else made when a kernel first uses the buffer and
        given to the Buffer, as Halide's pipelines give the Buffers they use device allocations;
        a bare array's lasts for the call."""
        host = arr.__array_interface__["data"][0]
        kept = None if buffer is None else buffer._device_copy
        if kept is not None and not kept.aligned():
            # a view into a device allocation whose first element is not aligned as kernels'
            # vector accesses need: this call works on an aligned copy of its own, through the host
            buffer.copy_to_host()
            buffer.set_host_dirty()
            kept = buffer = None
        if kept is not None:
            if kept.device is not self.device:
                raise HalideError(f"A buffer lives on the {kept.device.name} device, but this pipeline runs on "
                                  f"{self.device.name}: copy_to_host() and device_free() it first")
            self.copies[host] = kept
        elif host not in self.copies:
            offset, nbytes = span(arr)
            self.copies[host] = DeviceCopy(self.device, 0, nbytes, offset, elements=arr)
            if buffer is not None:
                self.owners[host] = buffer

    def _copy_for(self, host: int, nbytes: int) -> DeviceCopy:
        c = self.copies.get(host)
        if c is None:  # an allocation of the host code, not written by the host: nothing to copy
            c = self.copies[host] = DeviceCopy(self.device, 0, nbytes, 0, host_dirty=False)
        if c.nbytes < 0:  # the host wrote it before any kernel used it
            c.nbytes = nbytes
        if c.address == 0:
            c.allocate()
            owner = self.owners.pop(host, None)
            if owner is not None:
                owner._device_copy, c.kept = c, True
        if c.host_dirty:
            c.copy_to_device(host)
        return c

    def _launch(self, args) -> None:
        """args: the kernel's index, the grid, the block, the dynamic shared bytes, then per buffer
        its host address and size, then the scalars (gpu_kernels' `gpu_launch`)."""
        kernel = self.kernels[args[0]]
        grid, block, shared_bytes = tuple(args[1:4]), tuple(args[4:7]), args[7]
        for d, (g, most) in enumerate(zip(grid, MAX_GRID_DIMS)):
            if g > most:
                raise HalideError(f"Kernel {kernel.name} needs {g} GPU blocks in dimension {'xyz'[d]}; at most "
                                  f"{most} fit")
        if min(grid) <= 0:
            return
        _check_block(kernel, block, shared_bytes)
        launch_args, written, k = [], [], 8
        for b in kernel.buffers:
            c = self._copy_for(args[k], args[k + 1])
            launch_args.append((c.address + c.offset, None))
            if b.written:
                written.append(c)
            k += 2
        for (_, t), bits in zip(kernel.scalars, args[k:]):
            launch_args.append((np.int64(bits).view(np.float64) if t.is_float() else bits, t))
        self.device.timed_launch(self.module, kernel, grid, block, shared_bytes, launch_args)
        for c in written:
            c.device_dirty = True

    def copy_to_host(self, host: int) -> None:
        c = self.copies.get(host)
        if c is not None and c.device_dirty:
            c.copy_to_host(host)

    def _dispatch(self, op: int, args: list[int]) -> None:
        if op == LAUNCH:
            self._launch(args)
        elif op == COPY_TO_HOST:
            self.copy_to_host(args[0])
        elif op == HOST_WRITTEN:
            c = self.copies.get(args[0])
            if c is None:  # no device copy yet: the first launch that uses it makes one (and knows its size)
                self.copies[args[0]] = DeviceCopy(self.device, 0, -1, 0)
            else:
                c.host_dirty, c.device_dirty = True, False
        elif op == FREE:
            c = self.copies.pop(args[0], None)
            if c is not None:
                c.free()

    def finish(self, outputs: list[np.ndarray]) -> None:
        """After the call: outputs back to the host unless a Buffer keeps them on the device (as
        Halide's realize into a Buffer leaves them); the call's own device copies freed."""
        try:
            self.device.synchronize()
            for arr in outputs:
                c = self.copies.get(arr.__array_interface__["data"][0])
                if c is not None and not c.kept:
                    self.copy_to_host(arr.__array_interface__["data"][0])
        finally:
            for c in self.copies.values():
                if not c.kept:
                    c.free()
            self.copies.clear()

    @classmethod
    def current(cls) -> GpuRun:
        return cls._local.run

    @classmethod
    def make_callback(cls):
        """The C function the host code calls; it finds the calling thread's GpuRun."""

        def callback(op, args_ptr, n):
            run = getattr(cls._local, "run", None)
            if run is None:
                return GPU_FAILED
            try:
                run._dispatch(op, [args_ptr[i] for i in range(n)])
            except BaseException as e:  # noqa: BLE001 -- re-raised by the caller after the native code returns
                run.error = e
                return GPU_FAILED
            return 0

        return CALLBACK(callback)
