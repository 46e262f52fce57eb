"""Func.debug_to_file: a Func's values written to a file each time it is computed, in the formats
Halide's runtime writes (its bytes: .npy, .tiff/.tif, .mat, and otherwise Halide's .tmp), by a
function the generated code calls with the filename and a halide_buffer_t over the Func's region.

As Halide's, the elements are written with dimension 0 varying fastest (an .npy file declares the
shape in Halide's order, x first, with C order, as Halide's does), at most 4 dimensions.
"""

from __future__ import annotations

import ctypes
import functools
import struct

import numpy as np

from .extern import HalideBuffer

SYMBOL = "halide_debug_to_file"  # what the generated code calls (codegen/runtime.py links it)
FAILED = -23  # Halide's halide_error_code_debug_to_file_failed

# (code, bits) -> (npy descr, mat (class, type), tmp type, tiff sample format); 0 / -1: not written
_FORMATS = {(2, 32): ("<f4", (7, 7), 0, 3), (2, 64): ("<f8", (6, 9), 1, 3), (1, 8): ("|u1", (9, 2), 2, 1),
            (1, 1): ("|u1", (9, 2), 2, 1), (0, 8): ("|i1", (8, 1), 3, 2), (1, 16): ("<u2", (11, 4), 4, 1),
            (0, 16): ("<i2", (10, 3), 5, 2), (1, 32): ("<u4", (13, 6), 6, 1), (0, 32): ("<i4", (12, 5), 7, 2),
            (1, 64): ("<u8", (15, 13), 8, 1), (0, 64): ("<i8", (14, 12), 9, 2), (2, 16): ("<f2", (0, 0), -1, 0)}


def write(filename: str, buf: HalideBuffer) -> int:
    """Write the buffer as Halide's halide_debug_to_file does; 0, or FAILED."""
    formats = _FORMATS.get((buf.type.code, buf.type.bits))
    if not buf.host or buf.dimensions > 4 or formats is None:
        return FAILED
    npy, mat, tmp, tiff = formats
    bytes_per_element = max(buf.type.bits // 8, 1)
    shape = [buf.dim[d].extent for d in range(buf.dimensions)] + [1] * (4 - buf.dimensions)
    # dimension 0 fastest: numpy's view (axes reversed) in C order
    data = np.ascontiguousarray(buf.as_array()).tobytes()
    if filename.endswith(".npy"):
        header = _npy_header(npy, shape[:buf.dimensions])
    elif filename.endswith((".tiff", ".tif")):
        if tiff == 0:
            return FAILED
        header = _tiff_header(shape, bytes_per_element, len(data), tiff)
    elif filename.endswith(".mat"):
        if mat[1] == 0:
            return FAILED
        header = _mat_header(filename, buf.dimensions, shape, mat, len(data))
        data += bytes(7 - ((len(data) - 1) & 7))
    else:
        if tmp < 0:
            return FAILED
        header = struct.pack("<5i", *shape, tmp)
    try:
        with open(filename, "wb") as f:
            f.write(header + data)
    except OSError:
        return FAILED
    return 0


def _npy_header(descr: str, shape: list[int]) -> bytes:
    dims = ",".join(map(str, shape)) + ("," if len(shape) == 1 else "")
    text = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': ({dims})}}\n".encode()
    padding = -(8 + 2 + len(text)) % 64
    text += b" " * padding
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text


def _tiff_header(shape: list[int], bytes_per_element: int, payload: int, sample_format: int) -> bytes:
    width, height = shape[0], shape[1]
    if shape[3] in (0, 1) and shape[2] < 5:
        channels, depth = shape[2], 1
    else:
        channels, depth = shape[3], shape[2]
    size = 8 + 2 + 15 * 12 + 4 + 16  # Halide's packed halide_tiff_header
    width_resolution = 8 + 2 + 15 * 12 + 4
    tags = [(256, 4, 1, width), (257, 4, 1, height), (258, 3, 1, bytes_per_element * 8), (259, 3, 1, 1),
            (262, 3, 1, 2 if channels >= 3 else 1), (273, 4, channels, size), (277, 3, 1, channels),
            (278, 4, 1, height),
            (279, 4, channels, payload if channels == 1 else size + channels * 4),
            (282, 5, 1, width_resolution), (283, 5, 1, width_resolution + 8), (284, 3, 1, 2), (296, 3, 1, 1),
            (339, 3, 1, sample_format), (32997, 4, 1, depth)]
    out = struct.pack("<hhih", 0x4949, 42, 8, len(tags))
    for code, kind, count, value in tags:  # (a 16-bit value's upper half: zero here, unset in Halide's)
        out += struct.pack("<Hhi", code, kind, count) + struct.pack("<i" if kind != 3 else "<hxx", value)
    out += struct.pack("<i4i", 0, 1, 1, 1, 1)
    if channels > 1:
        plane = width * height * depth * bytes_per_element
        out += struct.pack(f"<{channels}i", *(size + channels * 8 + k * plane for k in range(channels)))
        out += struct.pack(f"<{channels}i", *([plane] * channels))
    return out


def _mat_header(filename: str, dimensions: int, shape: list[int], mat: tuple, payload: int) -> bytes:
    stem = filename[:filename.rindex(".")]
    name = stem[stem.rfind("/") + 1:].encode()
    padded_name = (len(name) + 7) & ~7
    dims = max(dimensions, 2)
    padded_dims = (dims + 1) & ~1
    padding = 7 - ((payload - 1) & 7)
    text = b"MATLAB 5.0 MAT-file, produced by Halide"
    out = text + b" " * (124 - len(text)) + b"\x00\x01IM"
    out += struct.pack("<8I", 14, 40 + padded_dims * 4 + padded_name + payload + padding, 6, 8, mat[0], 1, 5, dims * 4)
    out += struct.pack(f"<{padded_dims}i", *shape[:padded_dims])
    out += struct.pack("<2I", 1, len(name)) + name + bytes(padded_name - len(name))
    return out + struct.pack("<2I", mat[1], payload)


@functools.cache
def address() -> int:
    """The address of the function the generated code calls: `int (const char *, halide_buffer_t *)`."""
    entry = _ENTRY(lambda filename, buf: write(filename.decode(), buf.contents))
    _KEEP.append(entry)
    return ctypes.cast(entry, ctypes.c_void_p).value


_ENTRY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(HalideBuffer))
_KEEP: list = []  # the ctypes entry, alive as long as the process
