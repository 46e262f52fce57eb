"""Compilation targets. Only the host CPU is compiled for JIT; the string form follows Halide."""

from __future__ import annotations

import os
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Target:
    """A target such as "host" or "x86-64-linux-avx512"; features are kept as a sorted tuple."""

    os: str = "linux"
    arch: str = "x86"
    bits: int = 64
    features: tuple = field(default_factory=tuple)

    def __init__(self, spec: str = "host"):
        parts = spec.split("-") if spec and spec != "host" else []
        object.__setattr__(self, "os", "linux")
        object.__setattr__(self, "arch", "x86")
        object.__setattr__(self, "bits", 64)
        feats = []
        for p in parts:
            if p in ("x86", "arm", "riscv"):
                object.__setattr__(self, "arch", p)
            elif p in ("32", "64"):
                object.__setattr__(self, "bits", int(p))
            elif p in ("linux", "osx", "windows"):
                object.__setattr__(self, "os", p)
            elif p != "host":
                feats.append(p)
        object.__setattr__(self, "features", tuple(sorted(feats)))

    def has_feature(self, name: str) -> bool:
        return name in self.features

    def has_gpu_feature(self) -> bool:
        return any(f in ("cuda", "opencl", "metal", "vulkan") for f in self.features)

    def with_feature(self, name: str) -> Target:
        return Target(str(self) + "-" + name)

    def __str__(self):
        return "-".join([self.arch, str(self.bits), self.os, *self.features])


def get_host_target() -> Target:
    return Target("host")


def get_target_from_environment() -> Target:
    return Target(os.environ.get("HL_TARGET", "host"))


def get_jit_target_from_environment() -> Target:
    return Target(os.environ.get("HL_JIT_TARGET", "host"))
