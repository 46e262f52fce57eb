"""Compilation targets: Halide's target strings ("host", "x86-64-linux-avx2-cuda"), checked.

A target names an architecture, bit width, OS and features. Every feature Halide 21 defines is
accepted by name (so Halide scripts parse); a target is refused, naming the feature, when no
backend of pyhalide can honour it. The CPU backend JIT-compiles for the host CPU and all of its
vector features, so instruction-set features (avx2, avx512 ...) only describe the host.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import Enum

from .errors import HalideError

# Instruction-set features: the CPU backend always uses every feature the host has.
_ISA = {
    "sse41", "avx", "avx2", "fma", "fma4", "f16c", "avx512", "avx512_knl", "avx512_skylake", "avx512_cannonlake",
    "avx512_sapphirerapids", "avx512_zen4", "avx512_zen5", "avxvnni", "avx10_1", "x86apx",
}
# Features with no effect on what pyhalide generates for the CPU.
_NEUTRAL = {"jit", "strict_float", "no_runtime", "user_context", "c_plus_plus_name_mangling", "embed_bitcode"}
# pyhalide's own: allow fused multiply-adds (Halide contracts unless strict_float; pyhalide doesn't unless asked).
_PYHALIDE = {"fp_contract"}
GPU_FEATURES = {"cuda", "opencl", "metal", "vulkan", "d3d12compute", "webgpu", "openglcompute"}
_CUDA_CAPABILITIES = {f"cuda_capability_{c}" for c in (30, 32, 35, 50, 61, 70, 75, 80, 86, 89)}
# The CUDA backend (codegen/cuda.py) compiles for compute capability 7.0 and up (atomicCAS on
# 16-bit words, independent thread scheduling); older capabilities are known names, refused.
_CUDA_SUPPORTED = {"cuda"} | {f"cuda_capability_{c}" for c in (70, 75, 80, 86, 89)}
SUPPORTED_FEATURES = _ISA | _NEUTRAL | _PYHALIDE | _CUDA_SUPPORTED
DEFAULT_CUDA_CAPABILITY = 70
# Halide 21's other features: known names, but no pyhalide backend implements them yet.
_OTHER = {
    "debug", "no_asserts", "no_bounds_query", "armv7s", "no_neon", "vsx", "power_arch_2_07", "cl_doubles",
    "cl_half", "cl_atomics64", "egl", "profile", "profile_by_timer", "large_buffers", "hexagon_dma", "hvx",
    "hvx_128", "hvx_v62", "hvx_v65", "hvx_v66", "hvx_v68", "fuzz_float_stores", "soft_float_abi", "msan", "tsan",
    "asan", "trace_loads", "trace_stores", "trace_realizations", "trace_pipeline", "check_unsafe_promises",
    "enable_llvm_loop_opt", "enable_backtraces", "wasm_mvponly", "wasm_simd128", "wasm_threads", "wasm_bulk_memory",
    "sve", "sve2",
    "arm_dot_prod", "arm_fp16", "llvm_large_code_model", "rvv", "armv8a", "armv81a", "armv82a", "armv83a", "armv84a",
    "armv85a", "armv86a", "armv87a", "armv88a", "armv89a", "sanitizer_coverage", "spirv", "vk_int8", "vk_int16",
    "vk_int64", "vk_float16", "vk_float64", "vk_v10", "vk_v12", "vk_v13", "semihosting", "simulator",
}
KNOWN_FEATURES = SUPPORTED_FEATURES | GPU_FEATURES | _CUDA_CAPABILITIES | _OTHER

class TargetOS(str, Enum):  # noqa: UP042 - not StrEnum: str() prints TargetOS.Linux, as Halide's does
    """Halide's hl.TargetOS; each member is also its name in target strings."""

    OSUnknown = ""
    Linux = "linux"
    Windows = "windows"
    OSX = "osx"
    Android = "android"
    IOS = "ios"
    QuRT = "qurt"
    NoOS = "noos"
    Fuchsia = "fuchsia"
    wasmrt = "wasmrt"


class TargetArch(str, Enum):  # noqa: UP042 - as TargetOS
    """Halide's hl.TargetArch; each member is also its name in target strings."""

    ArchUnknown = ""
    X86 = "x86"
    ARM = "arm"
    Hexagon = "hexagon"
    POWERPC = "powerpc"
    RISCV = "riscv"
    WebAssembly = "wasm"


def _feature_member(name: str) -> str:
    """Halide's TargetFeature spelling of a feature string: avx512_skylake -> AVX512_Skylake."""
    return _FEATURE_MEMBERS.get(name) or "".join(p.capitalize() for p in name.split("_"))


# Halide's member names where they are not the capitalised words of the feature string
_FEATURE_MEMBERS = {
    "jit": "JIT", "sse41": "SSE41", "avx": "AVX", "avx2": "AVX2", "avxvnni": "AVXVNNI", "fma": "FMA", "fma4": "FMA4",
    "f16c": "F16C", "armv7s": "ARMv7s", "no_neon": "NoNEON", "vsx": "VSX", "power_arch_2_07": "POWER_ARCH_2_07",
    "cuda": "CUDA", "opencl": "OpenCL", "cl_doubles": "CLDoubles", "cl_half": "CLHalf", "cl_atomics64": "CLAtomics64",
    "egl": "EGL", "metal": "Metal", "c_plus_plus_name_mangling": "CPlusPlusMangling", "hvx": "HVX",
    "hvx_v62": "HVX_v62", "hvx_v65": "HVX_v65", "hvx_v66": "HVX_v66", "hvx_v68": "HVX_v68", "msan": "MSAN",
    "avx512": "AVX512", "avx512_knl": "AVX512_KNL", "avx512_skylake": "AVX512_Skylake",
    "avx512_cannonlake": "AVX512_Cannonlake", "avx512_sapphirerapids": "AVX512_SapphireRapids",
    "avx512_zen4": "AVX512_Zen4", "avx512_zen5": "AVX512_Zen5", "d3d12compute": "D3D12Compute", "tsan": "TSAN",
    "asan": "ASAN", "enable_llvm_loop_opt": "EnableLLVMLoopOpt", "wasm_mvponly": "WasmMvpOnly",
    "wasm_simd128": "WasmSimd128", "webgpu": "WebGPU", "sve": "SVE", "sve2": "SVE2", "arm_dot_prod": "ARMDotProd",
    "arm_fp16": "ARMFp16", "llvm_large_code_model": "LLVMLargeCodeModel", "rvv": "RVV", "spirv": "SPIRV",
    "vulkan": "Vulkan", "vk_int8": "VulkanInt8", "vk_int16": "VulkanInt16", "vk_int64": "VulkanInt64",
    "vk_float16": "VulkanFloat16", "vk_float64": "VulkanFloat64", "vk_v10": "VulkanV10", "vk_v12": "VulkanV12",
    "vk_v13": "VulkanV13", "avx10_1": "AVX10_1", "x86apx": "X86APX", "fp_contract": "FPContract",
    "soft_float_abi": "SoftFloatABI",
    **{f"armv8{k}a": f"ARMv8{k}a" for k in ("", "1", "2", "3", "4", "5", "6", "7", "8", "9")},
    **{f"cuda_capability_{c}": f"CUDACapability{c}" for c in (30, 32, 35, 50, 61, 70, 75, 80, 86, 89)},
}

_ARCHES = tuple(a.value for a in TargetArch if a.value)
_OSES = tuple(o.value for o in TargetOS if o.value)


@dataclass(frozen=True)
class Target:
    """A target such as "host" or "x86-64-linux-avx512"; features are kept as a sorted tuple."""

    os: str = "linux"
    arch: str = "x86"
    bits: int = 64
    features: tuple = field(default_factory=tuple)

    def __init__(self, spec: str | TargetOS = "host", arch=None, bits=None, features=()):
        """Target("x86-64-linux-avx2"), or as Halide's typed constructor: Target(os, arch, bits, [features])."""
        if isinstance(spec, TargetOS):
            if not isinstance(arch, TargetArch) or bits not in (32, 64):
                raise HalideError(f"Target(os, arch, bits, features) takes a TargetOS, a TargetArch and 32 or 64, "
                                  f"got {spec!r}, {arch!r}, {bits!r}")
            spec = "-".join([arch.value, str(bits), spec.value, *(_feature_name(f) for f in features)])
        if not isinstance(spec, str):
            raise HalideError(f"Target takes a target string such as 'host-avx2', got {spec!r}")
        parts = spec.split("-") if spec else []
        if parts and parts[0] == "host":
            parts = parts[1:]
        arch, bits, os_name, feats = "x86", 64, "linux", []
        for p in parts:
            if p in _ARCHES:
                arch = p
            elif p in ("32", "64"):
                bits = int(p)
            elif p in _OSES:
                os_name = p
            elif p in KNOWN_FEATURES:
                feats.append(p)
            else:
                raise HalideError(f"Target {spec!r}: unknown target feature {p!r}")
        object.__setattr__(self, "os", TargetOS(os_name))
        object.__setattr__(self, "arch", TargetArch(arch))
        object.__setattr__(self, "bits", bits)
        object.__setattr__(self, "features", tuple(sorted(set(feats))))

    def has_feature(self, name) -> bool:
        return _feature_name(name) in self.features

    def supported(self) -> bool:
        """Whether pyhalide can compile for this target (require_supported says why not)."""
        try:
            self.require_supported()
        except HalideError:
            return False
        return True

    def natural_vector_size(self, t) -> int:
        """Lanes of type t in one vector register of this target (the host's widest without ISA features)."""
        if "avx512" in self.features or any(f.startswith("avx512_") for f in self.features):
            bits = 512
        elif "avx2" in self.features or "avx" in self.features:
            bits = 256
        else:
            bits = 128
        return max(1, bits // max(8, t.bits))

    def has_gpu_feature(self) -> bool:
        return any(f in GPU_FEATURES for f in self.features)

    def cuda_capability(self) -> int:
        """The highest cuda_capability_NN feature (70 without one): kernels are compiled to PTX
        for it, which the driver compiles for newer GPUs too."""
        caps = [int(f.rsplit("_", 1)[1]) for f in self.features if f.startswith("cuda_capability_")]
        return max(caps, default=DEFAULT_CUDA_CAPABILITY)

    def with_feature(self, name) -> Target:
        return Target(str(self) + "-" + _feature_name(name))

    def without_feature(self, name) -> Target:
        name = _feature_name(name)
        return Target("-".join([self.arch.value, str(self.bits), self.os.value,
                                *(f for f in self.features if f != name)]))

    def require_supported(self) -> None:
        """Refuse, naming it, what no pyhalide backend compiles for: another CPU than this host's
        kind, or a feature (a GPU API other than CUDA included) it can't honour. Whether this
        machine can *run* CUDA code is host_supports_target_device's question."""
        if self.arch != "x86" or self.bits != 64 or self.os != "linux":
            raise HalideError(f"Target {self}: pyhalide compiles only for the host, an x86-64 Linux CPU "
                              f"(not {self.arch.value}-{self.bits}-{self.os.value})")
        for f in self.features:
            if f not in SUPPORTED_FEATURES:
                kind = "GPU API" if f in GPU_FEATURES | _CUDA_CAPABILITIES else "feature"
                raise HalideError(f"Target {self}: no pyhalide backend supports the {kind} {f!r}")
        if any(f.startswith("cuda_capability_") for f in self.features) and "cuda" not in self.features:
            raise HalideError(f"Target {self}: a cuda_capability feature needs the cuda feature too")

    def __str__(self):
        return "-".join([self.arch.value, str(self.bits), self.os.value, *self.features])

    def __repr__(self):
        return f"<halide.Target {self}>"


TargetFeature = Enum("TargetFeature", {_feature_member(f): f for f in sorted(KNOWN_FEATURES)}, type=str)
TargetFeature.__doc__ = "Halide's hl.TargetFeature; each member is also its name in target strings."


def _feature_name(feature) -> str:
    if isinstance(feature, TargetFeature):
        return feature.value
    if isinstance(feature, str):
        return feature
    raise HalideError(f"A target feature is a TargetFeature or its name, got {feature!r}")


def host_supports_target_device(target) -> bool:
    """Whether this machine can run target's device code: the CPU always; CUDA where a launcher
    finds a driver and a GPU (codegen/gpu_runtime.py says which is missing)."""
    target = resolve_target(target)
    if not target.has_gpu_feature():
        return True
    if "cuda" not in target.features:
        return False
    from .codegen.gpu_runtime import cuda_unavailable_reason

    return cuda_unavailable_reason() is None


def resolve_target(target) -> Target:
    """An hl.Target from a Target, a target string, or None (the JIT target: $HL_JIT_TARGET or host)."""
    if target is None:
        return get_jit_target_from_environment()
    if isinstance(target, str):
        return Target(target)
    if not isinstance(target, Target):
        raise HalideError(f"target must be an hl.Target or a target string, got {target!r}")
    return target


def get_host_target() -> Target:
    return Target("host")


def get_target_from_environment() -> Target:
    return Target(os.environ.get("HL_TARGET", "host"))


def get_jit_target_from_environment() -> Target:
    return Target(os.environ.get("HL_JIT_TARGET", "host"))
