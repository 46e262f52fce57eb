"""Calling ahead-of-time code from Python through ctypes: halide_buffer_t (HalideRuntime.h's
layout) over numpy arrays, and an object file (or compile_to_c's source) built into a shared library
to load. The tests and `benchmarks.aot` call compile_to_object's output this way."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np

from ..extern import Dimension, HalideBuffer, HalideType

_CODES = {"i": 0, "u": 1, "f": 2, "b": 1}


def halide_buffer(arr: np.ndarray, mins=None) -> HalideBuffer:
    """A halide_buffer_t over a numpy array, axes reversed (Halide's dimension 0 is numpy's last),
    at `mins` (default 0); it keeps the array alive."""
    n = arr.ndim
    dims = (Dimension * max(n, 1))()
    for d in range(n):
        axis = n - 1 - d
        dims[d] = Dimension(mins[d] if mins else 0, arr.shape[axis], arr.strides[axis] // arr.itemsize, 0)
    buf = HalideBuffer()
    buf.host = arr.ctypes.data
    code = 4 if arr.dtype.name == "bfloat16" else _CODES[arr.dtype.kind]  # (halide_type_bfloat: ml_dtypes')
    buf.type = HalideType(code, 1 if arr.dtype.kind == "b" else arr.itemsize * 8, 1)
    buf.dimensions = n
    buf.dim = dims
    buf._keep = (arr, dims)
    return buf


def c_compiler() -> str | None:
    return shutil.which("cc") or shutil.which("gcc")


def cxx_compiler() -> str | None:
    return shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")


# How the tests build compile_to_c's source: warnings are errors, so the C backend writes none.
CXX_FLAGS = ("-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-pthread")


def load_c_source(source: Path, library: Path, c_files=(), flags=()) -> ctypes.CDLL:
    """compile_to_c's source (with C files, such as a program's own halide_error) built into
    the shared library `library` (CXX_FLAGS, then `flags`), loaded."""
    objects = []
    for c_file in map(Path, c_files):
        objects.append(str(c_file.with_suffix(".o")))
        subprocess.run([c_compiler(), "-c", "-fPIC", "-o", objects[-1], str(c_file)], check=True)
    built = subprocess.run([cxx_compiler(), *CXX_FLAGS, *flags, "-o", str(library), str(source), *objects],
                           capture_output=True, text=True)
    if built.returncode:
        raise RuntimeError(f"{source} did not build:\n{built.stderr}")
    return ctypes.CDLL(str(library))


def load_object(obj: Path, library: Path) -> ctypes.CDLL:
    """An object file linked into the shared library `library`, loaded."""
    subprocess.run([c_compiler(), "-shared", "-o", str(library), str(obj), "-lpthread"], check=True,
                   capture_output=True)
    return ctypes.CDLL(str(library))
