"""Compilation targets: Halide's target strings ("host", "x86-64-linux-avx2-cuda"), checked.

A target names an architecture, bit width, OS, processor tuning and features, and parses and
prints as Halide 21's does. Every feature Halide 21 defines is accepted by name (so Halide scripts
parse); compiling for a target is refused, naming the feature, when no backend of pyhalide can
honour it (`require_supported`). The CPU backend JIT-compiles for the host CPU and all of its
vector features, so instruction-set features (avx2, avx512 ...) only describe the host.
"""

from __future__ import annotations

import os
import platform
import sys
from enum import Enum
from typing import TYPE_CHECKING

from .errors import HalideError

if TYPE_CHECKING:
    from .expr import Expr

# Instruction-set features: the CPU backend always uses every feature the host has.
_ISA = {
    "sse41", "avx", "avx2", "fma", "fma4", "f16c", "avx512", "avx512_knl", "avx512_skylake", "avx512_cannonlake",
    "avx512_sapphirerapids", "avx512_zen4", "avx512_zen5", "avxvnni", "avx10_1", "x86apx",
}
# Features with no effect on what pyhalide generates for the CPU.
_NEUTRAL = {"jit", "strict_float", "no_runtime", "user_context", "c_plus_plus_name_mangling", "embed_bitcode"}
# Features pyhalide implements as Halide does: check_unsafe_promises (lowering/strip_promises.py).
_IMPLEMENTED = {"check_unsafe_promises"}
# pyhalide's own: allow fused multiply-adds (Halide contracts unless strict_float; pyhalide doesn't unless asked).
# fuzz_float_stores: each float stored loses its lowest mantissa bit (lowering/fuzz_float_stores.py).
_PYHALIDE = {"fp_contract", "fuzz_float_stores"}
GPU_FEATURES = {"cuda", "opencl", "metal", "vulkan", "d3d12compute", "webgpu"}
_CUDA_CAPABILITIES = {f"cuda_capability_{c}" for c in (30, 32, 35, 50, 61, 70, 75, 80, 86)}
# A capability feature is the least a GPU must have: kernels are compiled for the GPU that runs
# them (gpu_runtime.Device._compile). Every capability Halide names is accepted; in practice the
# GPU is 7.5 or newer, the oldest that CUDA 13's driver and compilers support.
_CUDA_SUPPORTED = {"cuda"} | _CUDA_CAPABILITIES
SUPPORTED_FEATURES = _ISA | _NEUTRAL | _PYHALIDE | _IMPLEMENTED | _CUDA_SUPPORTED
DEFAULT_CUDA_CAPABILITY = 70
# What ahead-of-time compilation adds: other OSes (AOT_OSES) and ARM's features, and no bounds query (pyhalide's
# object files never answer one).
AOT_FEATURES = {"armv7s", "no_neon", "arm_dot_prod", "arm_fp16", "armv81a", "armv82a", "armv83a", "armv84a",
                "armv85a", "armv86a", "armv87a", "armv88a", "armv89a", "no_bounds_query"}
# Halide 21's other features: known names, but no pyhalide backend implements them yet.
_OTHER = {
    "debug", "no_asserts", "no_bounds_query", "armv7s", "no_neon", "vsx", "power_arch_2_07", "cl_doubles",
    "cl_half", "cl_atomics64", "egl", "large_buffers", "hexagon_dma", "hvx",
    "hvx_v62", "hvx_v65", "hvx_v66", "hvx_v68", "soft_float_abi", "msan", "tsan",
    "asan", "trace_loads", "trace_stores", "trace_realizations", "trace_pipeline",
    "enable_llvm_loop_opt", "enable_backtraces", "wasm_mvponly", "wasm_simd128", "wasm_threads", "wasm_bulk_memory",
    "sve", "sve2",
    "arm_dot_prod", "arm_fp16", "llvm_large_code_model", "rvv", "armv8a", "armv81a", "armv82a", "armv83a", "armv84a",
    "armv85a", "armv86a", "armv87a", "armv88a", "armv89a", "sanitizer_coverage", "spirv", "vk_int8", "vk_int16",
    "vk_int64", "vk_float16", "vk_float64", "vk_v10", "vk_v12", "vk_v13", "semihosting", "simulator",
}
# The profiler (codegen/profiler.py) samples from a Python thread: JIT-compiled CPU code only.
PROFILE_FEATURES = {"profile", "profile_by_timer"}
KNOWN_FEATURES = SUPPORTED_FEATURES | PROFILE_FEATURES | GPU_FEATURES | _CUDA_CAPABILITIES | _OTHER
_TRACE_ALL = ("trace_loads", "trace_realizations", "trace_stores")


class TargetArgumentError(HalideError, TypeError):
    """Arguments no Target constructor takes: a TypeError, as Halide's bindings raise."""


class TargetOS(str, Enum):  # noqa: UP042 - not StrEnum: str() prints TargetOS.Linux, as Halide's does
    """Halide's hl.TargetOS; each member is also its name in target strings."""

    OSUnknown = "os_unknown"
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

    ArchUnknown = "arch_unknown"
    X86 = "x86"
    ARM = "arm"
    Hexagon = "hexagon"
    POWERPC = "powerpc"
    RISCV = "riscv"
    WebAssembly = "wasm"


class TargetProcessorTune(str, Enum):  # noqa: UP042 - as TargetOS
    """Halide's hl.TargetProcessorTune: which CPU to tune for; each member is its target-string name."""

    TuneGeneric = "tune_generic"
    TuneAMDFam10 = "tune_amdfam10"
    TuneBdVer1 = "tune_bdver1"
    TuneBdVer2 = "tune_bdver2"
    TuneBdVer3 = "tune_bdver3"
    TuneBdVer4 = "tune_bdver4"
    TuneBtVer1 = "tune_btver1"
    TuneBtVer2 = "tune_btver2"
    TuneK8 = "tune_k8"
    TuneK8_SSE3 = "tune_k8_sse3"
    TuneZnVer1 = "tune_znver1"
    TuneZnVer2 = "tune_znver2"
    TuneZnVer3 = "tune_znver3"
    TuneZnVer4 = "tune_znver4"
    TuneZnVer5 = "tune_znver5"


class DeviceAPI(Enum):
    """Halide's hl.DeviceAPI: where a loop runs or a buffer's device copy lives (`None` is a
    member name: reach it as getattr(hl.DeviceAPI, "None"), as in Halide's bindings)."""

    locals()["None"] = 0
    Host = 1
    Default_GPU = 2
    CUDA = 3
    OpenCL = 4
    Metal = 5
    Hexagon = 6
    HexagonDma = 7
    D3D12Compute = 8
    Vulkan = 9
    WebGPU = 10

    def __int__(self) -> int:
        return self.value


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
    **{f"cuda_capability_{c}": f"CUDACapability{c}" for c in (30, 32, 35, 50, 61, 70, 75, 80, 86)},
}

# FeatureEnd is Halide's "no feature" (what target_feature_for_device_api(Host) returns);
# HVX_128 is HVX's old name, an alias, as in Halide.
TargetFeature = Enum("TargetFeature", [*((_feature_member(f), f) for f in sorted(KNOWN_FEATURES)),
                                       ("HVX_128", "hvx"), ("FeatureEnd", "")], type=str)
TargetFeature.__doc__ = "Halide's hl.TargetFeature; each member is also its name in target strings."

_ARCH_NAMES = {a.value: a for a in TargetArch}
_OS_NAMES = {o.value: o for o in TargetOS}
_TUNE_NAMES = {p.value: p for p in TargetProcessorTune}
_TOKEN_ALIASES = {"hvx_128": "hvx"}  # Halide parses both names as one feature, and prints both

# Features Halide refuses on an architecture (Target::validate_features).
_X86_ONLY = {"avx", "avx2", "avxvnni", "avx512", "avx512_cannonlake", "avx512_knl", "avx512_sapphirerapids",
             "avx512_skylake", "avx512_zen4", "avx512_zen5", "f16c", "fma", "fma4", "sse41"}
_WASM = {"wasm_bulk_memory", "wasm_mvponly", "wasm_simd128", "wasm_threads"}
_BAD_FEATURES = {
    TargetArch.X86: {"arm_dot_prod", "arm_fp16", "armv7s", "armv81a", "no_neon", "power_arch_2_07", "rvv", "sve",
                     "sve2", "vsx"} | _WASM,
    TargetArch.ARM: _X86_ONLY | {"power_arch_2_07", "rvv", "vsx"} | _WASM,
    TargetArch.WebAssembly: _X86_ONLY | {"arm_dot_prod", "arm_fp16", "armv7s", "armv81a", "hvx", "hvx_v62",
                                         "hvx_v65", "hvx_v66", "hvx_v68", "no_neon", "power_arch_2_07", "rvv",
                                         "sve", "sve2", "vsx"},
}


def _feature_name(feature) -> str:
    """A feature's target-string name, from a TargetFeature or (pyhalide's own use) its name."""
    if isinstance(feature, TargetFeature):
        return feature.value
    if isinstance(feature, str):
        name = _TOKEN_ALIASES.get(feature, feature)
        if name not in KNOWN_FEATURES:
            raise HalideError(f"unknown target feature {feature!r}")
        return name
    raise HalideError(f"A target feature is an hl.TargetFeature, got {feature!r}")


# The OSes ahead-of-time code is compiled for (with AOT_FEATURES).
AOT_OSES = (TargetOS.Linux, TargetOS.Android, TargetOS.Windows, TargetOS.OSX, TargetOS.IOS)


class Target:
    """A target such as "host" or "x86-64-linux-avx512", mutable as Halide's is (set_feature,
    and the os, arch, bits and processor_tune attributes)."""

    __hash__ = None  # mutable, and unhashable as in Halide's bindings

    def __init__(self, *args):
        """Target(): arch_unknown-0-os_unknown; Target("x86-64-linux-avx2") ("" or "host..." start
        from this machine); or as Halide's typed constructors: Target(os, arch, bits),
        Target(os, arch, bits, processor_tune), Target(os, arch, bits, [features]) and
        Target(os, arch, bits, processor_tune, [features])."""
        self._os, self._arch, self._bits = TargetOS.OSUnknown, TargetArch.ArchUnknown, 0
        self._tune, self.vector_bits, self._features = TargetProcessorTune.TuneGeneric, 0, set()
        if not args:
            return
        if len(args) == 1 and isinstance(args[0], str):
            self._from_string(args[0])
            return
        os_, arch, bits, *rest = args if len(args) >= 3 else (None, None, None)
        tune = rest.pop(0) if rest and isinstance(rest[0], TargetProcessorTune) else TargetProcessorTune.TuneGeneric
        features = rest.pop(0) if rest else []
        if (rest or not isinstance(os_, TargetOS) or not isinstance(arch, TargetArch) or not isinstance(bits, int)
                or isinstance(bits, bool) or not isinstance(features, list | tuple)
                or not all(isinstance(f, TargetFeature) for f in features)):
            raise TargetArgumentError(
                "Target(): incompatible constructor arguments: Target(os, arch, bits[, processor_tune][, features]) "
                "takes a TargetOS, a TargetArch and 32 or 64 bits, then optionally a TargetProcessorTune and a "
                f"list of TargetFeatures; got {', '.join(map(repr, args))}")
        self._os, self._arch, self._bits, self._tune = os_, arch, bits, tune
        self._features = {f.value for f in features} - {""}
        self._validate_features()

    # --- parsing and printing, as Halide's Target.cpp ---
    def _from_string(self, spec: str) -> None:
        if not spec:
            self._assign(_host())
        else:
            reason = self._merge(spec)
            if reason is None and self._has_unknowns():
                reason = "the arch, bits and os must all be given, or the string must start with host"
            if reason is not None:
                raise HalideError(
                    f"Did not understand Halide target {spec}: {reason}. Expected format is "
                    "arch-bits-os-processor-feature1-feature2-..., or host-feature1-...; "
                    f"on this machine the host target is {_host()}")
        self._validate_features()

    def _merge(self, spec: str) -> str | None:
        """Halide's merge_string: read spec's tokens into self; None, or why spec is not a target."""
        seen = set()
        features_given = False
        for i, tok in enumerate(spec.split("-")):
            kind = None
            if tok == "host":
                if i > 0:
                    return "'host' may only be the first token"
                self._assign(_host())
            elif tok in ("32", "64", "0"):
                kind, self._bits = "bits", int(tok)
            elif tok in _ARCH_NAMES:
                kind, self._arch = "arch", _ARCH_NAMES[tok]
            elif tok in _OS_NAMES:
                kind, self._os = "os", _OS_NAMES[tok]
            elif tok in _TUNE_NAMES:
                kind, self._tune = "processor", _TUNE_NAMES[tok]
            elif tok in KNOWN_FEATURES or tok in _TOKEN_ALIASES:
                self._features.add(_TOKEN_ALIASES.get(tok, tok))
                features_given = True
            elif tok == "trace_all":
                self._features.update(_TRACE_ALL)
                features_given = True
            elif tok.startswith("vector_bits_") and tok[len("vector_bits_"):].isdigit():
                self.vector_bits = int(tok[len("vector_bits_"):])
            else:
                return f"unknown target feature {tok!r}"
            if kind is not None:
                if kind in seen:
                    return f"the {kind} is given twice"
                seen.add(kind)
        if "arch" in seen and "bits" not in seen:
            return "an arch needs its bits"
        if "bits" in seen and self._bits == 0 and not (
                "arch" in seen and self._arch is TargetArch.ArchUnknown and "os" in seen
                and self._os is TargetOS.OSUnknown and not features_given):
            return "0 bits is only for arch_unknown-0-os_unknown, without features"
        return None

    def _has_unknowns(self) -> bool:
        return self._os is TargetOS.OSUnknown or self._arch is TargetArch.ArchUnknown or self._bits == 0

    def _validate_features(self) -> None:
        for f in sorted(self._features & _BAD_FEATURES.get(self._arch, set())):
            raise HalideError(f"Target feature {f} is incompatible with the Target's architecture. (target({self}))")

    @staticmethod
    def validate_target_string(name: str) -> bool:
        """Whether name is a complete target string (arch, bits and os known), as Halide's."""
        t = Target()
        return t._merge(name) is None and not t._has_unknowns()

    def to_string(self) -> str:
        parts = [self._arch.value, str(self._bits), self._os.value]
        if self._tune is not TargetProcessorTune.TuneGeneric:
            parts.append(self._tune.value)
        names = sorted(self._features | ({"hvx_128"} if "hvx" in self._features else set()))
        text = "-".join(parts + names)
        if self._features.issuperset(_TRACE_ALL):
            text = text.replace("-".join(_TRACE_ALL), "trace_all")
        return text + (f"-vector_bits_{self.vector_bits}" if self.vector_bits else "")

    def __str__(self):
        return self.to_string()

    def __repr__(self):
        return f"<halide.Target {self.to_string()}>"

    def __eq__(self, other):
        if not isinstance(other, Target):
            return NotImplemented
        return (self._os, self._arch, self._bits, self._tune, self.vector_bits, self._features) == (
            other._os, other._arch, other._bits, other._tune, other.vector_bits, other._features)

    # --- the fields, read and written as in Halide's bindings ---
    @property
    def os(self) -> TargetOS:
        return self._os

    @os.setter
    def os(self, value: TargetOS) -> None:
        self._os = _checked(value, TargetOS, "os")

    @property
    def arch(self) -> TargetArch:
        return self._arch

    @arch.setter
    def arch(self, value: TargetArch) -> None:
        self._arch = _checked(value, TargetArch, "arch")

    @property
    def bits(self) -> int:
        return self._bits

    @bits.setter
    def bits(self, value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"Target.bits is an int, got {value!r}")
        self._bits = value

    @property
    def processor_tune(self) -> TargetProcessorTune:
        return self._tune

    @processor_tune.setter
    def processor_tune(self, value: TargetProcessorTune) -> None:
        self._tune = _checked(value, TargetProcessorTune, "processor_tune")

    @property
    def features(self) -> tuple:
        """The feature names, sorted (pyhalide's; Halide's bindings have only has_feature)."""
        return tuple(sorted(self._features))

    # --- features ---
    def has_feature(self, feature) -> bool:
        name = _feature_name(feature)
        return name == "" or name in self._features

    def features_any_of(self, features) -> bool:
        return any(self.has_feature(f) for f in features)

    def features_all_of(self, features) -> bool:
        return all(self.has_feature(f) for f in features)

    def set_feature(self, f, value: bool = True) -> None:
        name = _feature_name(f)
        if name:
            (self._features.add if value else self._features.discard)(name)

    def set_features(self, features, value: bool = True) -> None:
        for f in features:
            self.set_feature(f, value)

    def with_feature(self, feature) -> Target:
        t = self._copy()
        t.set_feature(feature)
        return t

    def without_feature(self, feature) -> Target:
        t = self._copy()
        t.set_feature(feature, False)
        return t

    def has_gpu_feature(self) -> bool:
        return not self._features.isdisjoint(GPU_FEATURES)

    def has_large_buffers(self) -> bool:
        return "large_buffers" in self._features

    def maximum_buffer_size(self) -> int:
        """The largest buffer, in bytes, the target's code addresses (Halide's rule)."""
        return 2**63 - 1 if self._bits == 64 and self.has_large_buffers() else 2**31 - 1

    def supports_device_api(self, api: DeviceAPI) -> bool:
        if api in (DeviceAPI["None"], DeviceAPI.Host):
            return True
        if api is DeviceAPI.Default_GPU:
            return self.has_gpu_feature()
        if api is DeviceAPI.HexagonDma:
            return "hexagon_dma" in self._features
        return self.has_feature(target_feature_for_device_api(api))

    def supports_type(self, t, device: DeviceAPI | None = None) -> bool:
        """Whether t (its width) can be computed on this target, or on its device API `device`."""
        f = self._features
        if device is None:
            if t.bits != 64:
                return True
            no_64 = {"metal", "d3d12compute", "webgpu"}
            if t.is_float():
                return (f.isdisjoint(no_64) and ("opencl" not in f or "cl_doubles" in f)
                        and ("vulkan" not in f or "vk_float64" in f))
            return f.isdisjoint(no_64) and ("vulkan" not in f or "vk_int64" in f)
        if device is DeviceAPI.Default_GPU:
            device = _default_device_api(self)
        integer = t.is_int() or t.is_uint()
        if device is DeviceAPI.Hexagon:
            return t.lanes == 1 if t.is_float() or t.bits == 64 else True
        if device is DeviceAPI.Metal:
            return t.bits != 64
        if device is DeviceAPI.OpenCL:
            return "cl_doubles" in f if t.is_float() and t.bits == 64 else True
        if device in (DeviceAPI.D3D12Compute, DeviceAPI.WebGPU):
            return t.bits < 64
        if device is DeviceAPI.Vulkan:
            need = {(True, 64): "vk_float64", (True, 16): "vk_float16", (False, 64): "vk_int64",
                    (False, 16): "vk_int16", (False, 8): "vk_int8"}.get((t.is_float(), t.bits))
            return need is None or (not t.is_float() and not integer) or need in f
        return True

    def natural_vector_size(self, t) -> int:
        """Lanes of t's element type in one vector register of this target, by Halide's rules."""
        if self._has_unknowns():
            raise HalideError(f"natural_vector_size cannot be used on a Target with Unknown values ({self})")
        f, size = self._features, t.bytes()
        integer = t.is_int() or t.is_uint()
        if self._arch is TargetArch.ARM:
            if self.vector_bits and ("sve2" in f or (t.is_float() and "sve" in f)):
                return self.vector_bits // (size * 8)
            return 16 // size
        if self._arch is TargetArch.Hexagon:
            if not integer:
                return 1
            if "hvx" not in f:
                raise HalideError(f"Target {self} uses the hexagon arch without the target feature hvx")
            return 128 // size
        if self._arch is TargetArch.X86:
            bw = {"avx512_skylake", "avx512_cannonlake", "avx512_zen4", "avx512_zen5", "avx512_sapphirerapids"}
            if (integer and not f.isdisjoint(bw)) or (t.is_float() and not f.isdisjoint(bw | {"avx512",
                                                                                              "avx512_knl"})):
                return 64 // size
            if not f.isdisjoint({"avx2", "avx512", "avx512_knl"}) or (not integer and "avx" in f):
                return 32 // size
            return 16 // size
        if self._arch is TargetArch.WebAssembly:
            return 16 // size if "wasm_simd128" in f else 1
        if self._arch is TargetArch.RISCV:
            return self.vector_bits // (size * 8) if self.vector_bits and "rvv" in f else 1
        return 16 // size

    # --- pyhalide's questions ---
    def supported(self) -> bool:
        """Whether pyhalide can compile for this target (require_supported says why not)."""
        try:
            self.require_supported()
        except HalideError:
            return False
        return True

    def require_supported(self, ahead_of_time: bool = False) -> None:
        """Refuse, naming it, what no pyhalide backend compiles for: another CPU than this host's
        kind, or a feature (a GPU API other than CUDA included) it can't honour. Whether this
        machine can *run* CUDA code is host_supports_target_device's question. Ahead of time
        (an object file), x86 and ARM CPUs of 32 or 64 bits under the OSes of AOT_OSES compile
        too, without GPU features (kernels are launched from Python only)."""
        if ahead_of_time:
            if (self._arch not in (TargetArch.X86, TargetArch.ARM) or self._bits not in (32, 64)
                    or self._os not in AOT_OSES):
                raise HalideError(f"Target {self}: pyhalide compiles ahead of time for x86 and ARM CPUs of 32 or 64 "
                                  f"bits under {', '.join(o.value for o in AOT_OSES)} "
                                  f"(not {self._arch.value}-{self._bits}-{self._os.value})")
            if "c_plus_plus_name_mangling" in self._features:
                raise HalideError(f"Target {self}: pyhalide's ahead-of-time entry points have C names "
                                  "(c_plus_plus_name_mangling is not supported)")
            gpu = sorted(self._features & (GPU_FEATURES | _CUDA_CAPABILITIES))
            if gpu:
                raise HalideError(f"Target {self}: ahead-of-time code runs on the CPU only ({gpu[0]!r}); GPU "
                                  "kernels are launched from Python (compile_to_cuda writes their source)")
        elif self._arch is not TargetArch.X86 or self._bits != 64 or self._os is not TargetOS.Linux:
            raise HalideError(f"Target {self}: pyhalide compiles only for the host, an x86-64 Linux CPU "
                              f"(not {self._arch.value}-{self._bits}-{self._os.value})")
        profile = sorted(self._features & PROFILE_FEATURES)
        if profile and (ahead_of_time or self._features & GPU_FEATURES):
            raise HalideError(f"Target {self}: the profiler ({profile[0]!r}) samples pipelines JIT-compiled for the "
                              "host CPU only (not " + ("ahead-of-time code)" if ahead_of_time else "GPU kernels)"))
        supported = SUPPORTED_FEATURES | PROFILE_FEATURES | (AOT_FEATURES if ahead_of_time else set())
        for f in sorted(self._features):
            if f not in supported:
                kind = "GPU API" if f in GPU_FEATURES | _CUDA_CAPABILITIES else "feature"
                raise HalideError(f"Target {self}: no pyhalide backend supports the {kind} {f!r}")
        if any(f.startswith("cuda_capability_") for f in self._features) and "cuda" not in self._features:
            raise HalideError(f"Target {self}: a cuda_capability feature needs the cuda feature too")

    def cuda_capability(self) -> int:
        """The highest cuda_capability_NN feature (70 without one): kernels are compiled to PTX
        for it, which the driver compiles for newer GPUs too."""
        caps = [int(f.rsplit("_", 1)[1]) for f in self._features if f.startswith("cuda_capability_")]
        return max(caps, default=DEFAULT_CUDA_CAPABILITY)

    def _copy(self) -> Target:
        t = Target()
        t._assign(self)
        return t

    def _assign(self, other: Target) -> None:
        self._os, self._arch, self._bits, self._tune = other._os, other._arch, other._bits, other._tune
        self.vector_bits, self._features = other.vector_bits, set(other._features)


def _checked(value, enum, field: str):
    if not isinstance(value, enum):
        raise TypeError(f"Target.{field} is an hl.{enum.__name__}, got {value!r}")
    return value


def _default_device_api(t: Target) -> DeviceAPI:
    """Halide's get_default_device_api_for_target."""
    f = t._features
    for feature, api in (("metal", DeviceAPI.Metal), ("opencl", DeviceAPI.OpenCL), ("cuda", DeviceAPI.CUDA)):
        if feature in f:
            return api
    if t._arch is not TargetArch.Hexagon and "hvx" in f:
        return DeviceAPI.Hexagon
    for feature, api in (("hexagon_dma", DeviceAPI.HexagonDma), ("d3d12compute", DeviceAPI.D3D12Compute),
                         ("vulkan", DeviceAPI.Vulkan), ("webgpu", DeviceAPI.WebGPU)):
        if feature in f:
            return api
    return DeviceAPI.Host


def target_feature_for_device_api(api: DeviceAPI) -> TargetFeature:
    """The feature that selects a device API (FeatureEnd for the host and the default GPU)."""
    if not isinstance(api, DeviceAPI):
        raise TypeError(f"target_feature_for_device_api takes an hl.DeviceAPI, got {api!r}")
    return {DeviceAPI.CUDA: TargetFeature.CUDA, DeviceAPI.OpenCL: TargetFeature.OpenCL,
            DeviceAPI.Metal: TargetFeature.Metal, DeviceAPI.Hexagon: TargetFeature.HVX,
            DeviceAPI.D3D12Compute: TargetFeature.D3D12Compute, DeviceAPI.Vulkan: TargetFeature.Vulkan,
            DeviceAPI.WebGPU: TargetFeature.WebGPU}.get(api, TargetFeature.FeatureEnd)


# --- the host, found as Halide's calculate_host_target finds it ---
_HOST: list[Target] = []


def _amd_tune(family: int, model: int, sse3: bool) -> TargetProcessorTune:
    """Halide's get_amd_processor: the AMD CPU generation to tune for, from cpuid's family and model."""
    P = TargetProcessorTune
    if family == 0xF:
        return P.TuneK8_SSE3 if sse3 else P.TuneK8
    if family == 0x15:
        for lo, hi, tune in ((0x60, 0x7F, P.TuneBdVer4), (0x30, 0x3F, P.TuneBdVer3), (0x10, 0x1F, P.TuneBdVer2),
                             (0x02, 0x02, P.TuneBdVer2), (0x00, 0x0F, P.TuneBdVer1)):
            if lo <= model <= hi:
                return tune
        return P.TuneGeneric
    if family == 0x17:
        if 0x30 <= model <= 0x3F or model == 0x71:
            return P.TuneZnVer2
        return P.TuneZnVer1 if model <= 0x0F else P.TuneGeneric
    if family == 0x19:
        if any(lo <= model <= hi for lo, hi in ((0x50, 0x5F), (0x40, 0x4F), (0x30, 0x3F), (0x20, 0x2F), (0, 0x0F))):
            return P.TuneZnVer3
        if any(lo <= model <= hi for lo, hi in ((0xA0, 0xAF), (0x60, 0x7F), (0x10, 0x1F))):
            return P.TuneZnVer4
        return P.TuneGeneric
    return {0x10: P.TuneAMDFam10, 0x14: P.TuneBtVer1, 0x16: P.TuneBtVer2, 0x1A: P.TuneZnVer5}.get(family, P.TuneGeneric)


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields in /proc/cpuinfo (empty where there is none)."""
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                info[key.strip()] = value.strip()
    except OSError:
        pass
    return info


def _x86_host_features(bits: int) -> tuple[TargetProcessorTune, set[str]]:
    """The tuning and instruction-set features Halide finds with cpuid, read from the flags
    Linux reports for the same cpuid bits."""
    info = _cpuinfo()
    flags = set(info.get("flags", "").split())
    family, model = int(info.get("cpu family", "0") or 0), int(info.get("model", "0") or 0)
    tune = TargetProcessorTune.TuneGeneric
    if info.get("vendor_id") == "AuthenticAMD":
        tune = _amd_tune(family, model, "pni" in flags)
        base = {"sse41", "avx", "f16c", "fma", "avx2", "avx512", "avx512_skylake", "avx512_cannonlake", "avx512_zen4"}
        if tune is TargetProcessorTune.TuneZnVer4:
            return tune, base
        if tune is TargetProcessorTune.TuneZnVer5:
            return tune, base | {"avxvnni", "avx512_zen5"}
    features = {name for flag, name in (("sse4_1", "sse41"), ("avx", "avx"), ("f16c", "f16c"), ("fma", "fma"))
                if flag in flags}
    if bits == 64 and {"avx", "f16c", "rdrand"} <= flags:
        if "avx2" in flags:
            features.add("avx2")
        if {"avx512f", "avx512cd"} <= flags:
            features.add("avx512")
            if {"avx512pf", "avx512er"} <= flags:
                features.add("avx512_knl")
            if {"avx512vl", "avx512bw", "avx512dq"} <= flags:
                features.add("avx512_skylake")
                if "avx512ifma" in flags:
                    features.add("avx512_cannonlake")
                    if "avx_vnni" in flags:
                        features.add("avxvnni")
                        if "avx512_bf16" in flags:
                            features.add("avx512_sapphirerapids")
    return tune, features


def _host() -> Target:
    """This machine as a Target (found once): its OS, arch, bits, tuning and CPU features."""
    if not _HOST:
        t = Target()
        t._os = {"linux": TargetOS.Linux, "win32": TargetOS.Windows, "darwin": TargetOS.OSX}.get(
            sys.platform, TargetOS.OSUnknown)
        t._bits = 64 if sys.maxsize > 2**32 else 32
        machine = platform.machine().lower()
        if machine in ("x86_64", "amd64", "i386", "i686", "x86"):
            t._arch = TargetArch.X86
            if t._os is TargetOS.Linux:
                t._tune, t._features = _x86_host_features(t._bits)
        elif machine.startswith(("arm", "aarch64")):
            t._arch = TargetArch.ARM
        elif machine.startswith("riscv"):
            t._arch = TargetArch.RISCV
        elif machine.startswith(("ppc", "powerpc")):
            t._arch = TargetArch.POWERPC
        _HOST.append(t)
    return _HOST[0]


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
    """A Target of one's own from a Target, a target string, or None (the JIT target:
    $HL_JIT_TARGET or the host); a copy, since Targets are mutable."""
    if target is None:
        return get_jit_target_from_environment()
    if isinstance(target, str):
        return Target(target)
    if not isinstance(target, Target):
        raise HalideError(f"target must be an hl.Target or a target string, got {target!r}")
    return target._copy()


def get_host_target() -> Target:
    """This machine: OS, arch, bits, tuning and the CPU's features (no GPU features), as Halide finds them."""
    return _host()._copy()


def get_target_from_environment() -> Target:
    """$HL_TARGET, or the host target."""
    spec = os.environ.get("HL_TARGET", "")
    return Target(spec) if spec else get_host_target()


def get_jit_target_from_environment() -> Target:
    """$HL_JIT_TARGET (which must be this machine's OS, arch and bits), or the host, with jit."""
    spec = os.environ.get("HL_JIT_TARGET", "")
    t = Target(spec) if spec else get_host_target()
    host = _host()
    if (t._os, t._arch, t._bits) != (host._os, host._arch, host._bits):
        raise HalideError(f"HL_JIT_TARGET must match the host OS, architecture, and bit width. "
                          f"HL_JIT_TARGET was {spec}. Host is {host}.")
    if "no_bounds_query" in t._features:
        raise HalideError("The Halide JIT requires the use of bounds query, but HL_JIT_TARGET was specified "
                          f"with no_bounds_query: {spec}")
    t.set_feature("jit")
    return t


# ------------------------------------------------------------------ target queries in Exprs
# An intrinsic call target_query(kind, what) that lowering answers for the target it compiles
# for (lowering/target_queries.py); `what` names the arch, OS or feature, or, for
# natural_vector_size, is a zero of the type asked about (as Halide prints it).
TARGET_QUERY = "target_query"


def _query(t, kind: str, what):
    from . import ir
    from .expr import wrap

    return wrap(ir.Call(t, TARGET_QUERY, (ir.StringImm(kind), what), ir.INTRINSIC))


def target_arch_is(arch) -> Expr:
    """Whether the target compiled for has this TargetArch (a bool Expr)."""
    from . import ir
    from .types import Bool

    if not isinstance(arch, TargetArch):
        raise HalideError(f"target_arch_is takes an hl.TargetArch, got {arch!r}")
    return _query(Bool(), "arch_is", ir.StringImm(arch.value))


def target_os_is(os_) -> Expr:
    """Whether the target compiled for has this TargetOS (a bool Expr)."""
    from . import ir
    from .types import Bool

    if not isinstance(os_, TargetOS):
        raise HalideError(f"target_os_is takes an hl.TargetOS, got {os_!r}")
    return _query(Bool(), "os_is", ir.StringImm(os_.value))


def target_has_feature(feature) -> Expr:
    """Whether the target compiled for has this TargetFeature (a bool Expr)."""
    from . import ir
    from .types import Bool

    return _query(Bool(), "has_feature", ir.StringImm(_feature_name(feature)))


def target_bits() -> Expr:
    """The target's bits (32 or 64), as an int32 Expr."""
    from . import ir
    from .types import Int

    return _query(Int(32), "bits", ir.StringImm(""))


def target_natural_vector_size(t) -> Expr:
    """Lanes of type t in one vector of the target compiled for, as an int32 Expr."""
    from . import ir
    from .types import Int, Type

    if not isinstance(t, Type):
        raise HalideError(f"target_natural_vector_size takes an hl.Type, got {t!r}")
    return _query(Int(32), "natural_vector_size", ir.make_const(t.element_of(), 0))


def answer_target_query(call, target: Target):
    """The constant a target_query Call has for this target."""
    from . import ir
    from .types import Bool, Int

    kind, what = call.args[0].value, call.args[1]
    if kind == "arch_is":
        return ir.make_const(Bool(), target.arch.value == what.value)
    if kind == "os_is":
        return ir.make_const(Bool(), target.os.value == what.value)
    if kind == "has_feature":
        return ir.make_const(Bool(), target.has_feature(what.value))
    if kind == "bits":
        return ir.make_const(Int(32), target.bits)
    return ir.make_const(Int(32), target.natural_vector_size(what.type))
