"""Func.debug_to_file: the file pyhalide writes is byte for byte the one Halide 21 writes, for each
format (.npy, .tmp, .mat, .tiff), type and dimension count, from the same program and schedule
(but the upper halves of a TIFF header's 16-bit tag values, which Halide leaves unset)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

import pyhalide as hl

TYPES = ["uint8", "int16", "uint16", "int32", "float32", "float64", "bool"]


def written(halide, path: Path, type_name: str, dims: int, schedule: str) -> bytes:
    """f over `dims` dimensions, written by debug_to_file to `path`, read through g."""
    vs = [halide.Var(n) for n in "xyzw"[:dims]]
    t = {"bool": halide.Bool(), "float32": halide.Float(32), "float64": halide.Float(64)}.get(type_name)
    if t is None:
        t = (halide.UInt if type_name.startswith("u") else halide.Int)(int(type_name.lstrip("uint")))
    value = sum((v * k for v, k in zip(vs, (1, 10, 100, 1000))), halide.Expr(3))
    f, g = halide.Func("dumped"), halide.Func("reads_dumped")
    f[vs] = value % 2 == 1 if type_name == "bool" else halide.cast(t, value * 7 - 40)
    g[vs] = f[vs]
    if schedule == "root":
        f.compute_root()
    elif schedule == "output":
        g, f = f, g  # (f the output itself)
    else:  # per row of g: each realization writes the file again; the last one stays
        f.compute_at(g, vs[1])
    (f if schedule != "output" else g).debug_to_file(str(path))
    g.realize([5, 4, 3, 2][:dims])
    return path.read_bytes()


def unset_halves(data: bytes) -> list[int]:
    """The offsets of the bytes Halide's TIFF header leaves unset: the upper half of each 16-bit
    (type 3) tag value."""
    count = struct.unpack_from("<h", data, 8)[0]
    return [10 + 12 * k + off for k in range(count) if struct.unpack_from("<h", data, 10 + 12 * k + 2)[0] == 3
            for off in (10, 11)]


@pytest.mark.parametrize("ext,dims", [("npy", 1), ("npy", 2), ("npy", 4), ("tmp", 3), ("mat", 1), ("mat", 3),
                                      ("tiff", 2), ("tiff", 3)])
@pytest.mark.parametrize("type_name", TYPES)
def test_same_bytes_as_halide(tmp_path, ext, dims, type_name):
    halide = pytest.importorskip("halide", reason="the real Halide (pip install halide) is the oracle")
    (tmp_path / "halide").mkdir()
    (tmp_path / "pyhalide").mkdir()
    want = written(halide, tmp_path / "halide" / f"dumped.{ext}", type_name, dims, "root")
    got = written(hl, tmp_path / "pyhalide" / f"dumped.{ext}", type_name, dims, "root")
    assert len(got) == len(want)
    skip = set(unset_halves(want)) if ext == "tiff" else set()
    assert [i for i in range(len(want)) if want[i] != got[i] and i not in skip] == []


@pytest.mark.parametrize("schedule", ["output", "per_row"])
def test_each_realization_writes_the_file(tmp_path, schedule):
    """An output writes once the pipeline is done; a Func computed per row of its consumer writes
    the file at the end of each row's realization (the last row's stays), as Halide does."""
    halide = pytest.importorskip("halide", reason="the real Halide (pip install halide) is the oracle")
    (tmp_path / "halide").mkdir()
    (tmp_path / "pyhalide").mkdir()
    want = written(halide, tmp_path / "halide" / "dumped.tmp", "int32", 2, schedule)
    got = written(hl, tmp_path / "pyhalide" / "dumped.tmp", "int32", 2, schedule)
    assert got == want
    if schedule == "per_row":
        # one row: x by 1 of the last y, 3 + x + 10 * 3 ...
        assert struct.unpack_from("<5i", got) == (5, 1, 1, 1, 7)
        np.testing.assert_array_equal(np.frombuffer(got[20:], np.int32), (3 + np.arange(5) + 30) * 7 - 40)


def test_what_is_not_written_says_so(tmp_path):
    x = hl.Var("x")
    f, g = hl.Func("dumped_pair"), hl.Func("reads_dumped_pair")
    f[x] = (x, x + 1)
    g[x] = f[x][0] + f[x][1]
    f.compute_root().debug_to_file(str(tmp_path / "pair.npy"))
    with pytest.raises(hl.HalideError, match="doesn't handle functions with multiple values"):
        g.realize([4])
    h, k = hl.Func("dumped_one"), hl.Func("reads_dumped_one")
    h[x] = x
    k[x] = h[x] * 2
    h.compute_root().debug_to_file(str(tmp_path / "one.npy"))
    with pytest.raises(hl.HalideError, match="debug_to_file writes its files from the JIT"):
        k.compile_to_object(str(tmp_path / "k.o"), [], "k")
    with pytest.raises(hl.HalideError, match="Failed to dump function dumped_one to file .*missing/one.npy with "
                                             "error -23"):
        h.debug_to_file(str(tmp_path / "missing" / "one.npy"))
        k.realize([4])
    with pytest.raises(hl.HalideError, match="needs a file name"):
        h.debug_to_file("")
