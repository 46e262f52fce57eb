"""Compilation targets: Halide's target strings ("host", "x86-64-linux-avx2-cuda"), checked.

A target names an architecture, bit width, OS and features. Every feature Halide 21 defines is
accepted by name (so Halide scripts parse); a target is refused, naming the feature, when no
backend of pyhalide can honour it. The CPU backend JIT-compiles for the host CPU and all of its
vector features, so instruction-set features (avx2, avx512 ...) only describe the host.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .errors import HalideError

# Instruction-set features: the CPU backend always uses every feature the host has.
_ISA = {
    "sse41", "avx", "avx2", "fma", "fma4", "f16c", "avx512", "avx512_knl", "avx512_skylake", "avx512_cannonlake",
    "avx512_sapphirerapids", "avx512_zen4", "avx512_zen5", "avxvnni", "avx10_1", "x86_apx",
}
# Features with no effect on what pyhalide generates for the CPU.
_NEUTRAL = {"jit", "strict_float", "no_runtime", "user_context", "c_plus_plus_name_mangling", "embed_bitcode"}
# pyhalide's own: allow fused multiply-adds (Halide contracts unless strict_float; pyhalide doesn't unless asked).
_PYHALIDE = {"fp_contract"}
SUPPORTED_FEATURES = _ISA | _NEUTRAL | _PYHALIDE

GPU_FEATURES = {"cuda", "opencl", "metal", "vulkan", "d3d12compute", "webgpu", "openglcompute"}
_CUDA_CAPABILITIES = {f"cuda_capability_{c}" for c in (30, 32, 35, 50, 61, 70, 75, 80, 86, 89)}
# Halide 21's other features: known names, but no pyhalide backend implements them yet.
_OTHER = {
    "debug", "no_asserts", "no_bounds_query", "armv7s", "no_neon", "vsx", "power_arch_2_07", "cl_doubles",
    "cl_half", "cl_atomics64", "egl", "profile", "profile_by_timer", "large_buffers", "hexagon_dma", "hvx",
    "hvx_128", "hvx_v62", "hvx_v65", "hvx_v66", "hvx_v68", "fuzz_float_stores", "soft_float_abi", "msan", "tsan",
    "asan", "trace_loads", "trace_stores", "trace_realizations", "trace_pipeline", "check_unsafe_promises",
    "enable_llvm_loop_opt", "wasm_mvp", "wasm_simd128", "wasm_threads", "wasm_bulk_memory", "sve", "sve2",
    "arm_dot_prod", "arm_fp16", "llvm_large_code_model", "rvv", "armv81a", "armv82a", "armv83a", "armv84a",
    "armv85a", "armv86a", "armv87a", "armv88a", "armv89a", "sanitizer_coverage", "spirv", "vk_int8", "vk_int16",
    "vk_int64", "vk_float16", "vk_float64", "vk_v10", "vk_v12", "vk_v13", "semihosting", "simulator",
}
KNOWN_FEATURES = SUPPORTED_FEATURES | GPU_FEATURES | _CUDA_CAPABILITIES | _OTHER

_ARCHES = ("x86", "arm", "powerpc", "hexagon", "wasm", "riscv")
_OSES = ("linux", "osx", "windows", "android", "ios", "qurt", "noos", "fuchsia", "wasmrt")


@dataclass(frozen=True)
class Target:
    """A target such as "host" or "x86-64-linux-avx512"; features are kept as a sorted tuple."""

    os: str = "linux"
    arch: str = "x86"
    bits: int = 64
    features: tuple = field(default_factory=tuple)

    def __init__(self, spec: str = "host"):
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
        object.__setattr__(self, "os", os_name)
        object.__setattr__(self, "arch", arch)
        object.__setattr__(self, "bits", bits)
        object.__setattr__(self, "features", tuple(sorted(set(feats))))

    def has_feature(self, name: str) -> bool:
        return name in self.features

    def has_gpu_feature(self) -> bool:
        return any(f in GPU_FEATURES for f in self.features)

    def with_feature(self, name: str) -> Target:
        return Target(str(self) + "-" + name)

    def without_feature(self, name: str) -> Target:
        return Target("-".join([self.arch, str(self.bits), self.os, *(f for f in self.features if f != name)]))

    def require_supported(self) -> None:
        """Refuse, naming it, what no pyhalide backend compiles for: another CPU than this host's
        kind, or a feature (GPU APIs included, until a GPU backend exists) it can't honour."""
        if self.arch != "x86" or self.bits != 64 or self.os != "linux":
            raise HalideError(f"Target {self}: pyhalide compiles only for the host, an x86-64 Linux CPU "
                              f"(not {self.arch}-{self.bits}-{self.os})")
        for f in self.features:
            if f not in SUPPORTED_FEATURES:
                kind = "GPU API" if f in GPU_FEATURES | _CUDA_CAPABILITIES else "feature"
                raise HalideError(f"Target {self}: no pyhalide backend supports the {kind} {f!r}")

    def __str__(self):
        return "-".join([self.arch, str(self.bits), self.os, *self.features])


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
