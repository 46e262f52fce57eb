"""Loads at a small constant stride, and of x / k at a known phase (codegen/x86.py): dense vector
loads covering the span, joined by one shuffle. Bit-exact at every stride, width and offset;
nothing past the last element used is read (a guard page right after the buffer); and the
shuffle is a two-source permute."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyhalide as hl
from pyhalide.codegen import x86


@settings(max_examples=40, deadline=None)
@given(stride=st.integers(2, 4), lanes=st.sampled_from([4, 8, 16, 32]), offset=st.integers(0, 3),
       dtype=st.sampled_from(["float32", "int16", "uint8", "int32"]), n=st.integers(1, 70))
def test_strided_loads_are_exact(stride, lanes, offset, dtype, n):
    data = (np.arange(stride * n + offset + 4) * 7 % 251).astype(dtype)
    x = hl.Var("x")
    inp = hl.Buffer(data, "inp")
    f = hl.Func("f")
    f[x] = inp[stride * x + offset] + inp[stride * x + offset + 1] + inp[(x + offset) / stride]
    f.vectorize(x, lanes, hl.TailStrategy.GuardWithIf)
    out = np.asarray(f.realize([n]))
    idx = stride * np.arange(n) + offset
    up = data[(np.arange(n) + offset) // stride]
    np.testing.assert_array_equal(out, (data[idx] + data[idx + 1] + up).astype(dtype))


_GUARDED = textwrap.dedent("""
    import ctypes, mmap, numpy as np, pyhalide as hl
    page = mmap.PAGESIZE
    region = mmap.mmap(-1, 2 * page, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    libc = ctypes.CDLL(None)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    assert libc.mprotect(base + page, page, 0) == 0  # the second page: no access at all
    n = 64
    count = 2 * (n - 1) + 1  # exactly the elements f reads: the last one ends the first page
    data = np.frombuffer(region, np.float32, count, page - 4 * count)
    data[:] = np.arange(count)
    x = hl.Var("x")
    f = hl.Func("f")
    f[x] = hl.Buffer(data, "inp")[2 * x]
    f.vectorize(x, 16)
    out = np.asarray(f.realize([n]))
    assert (out == np.arange(0, count, 2)).all()
    # an upsampling by 2, each phase of the loop (even and odd starts) ending at the same last element
    for start in (0, 1):
        m = 2 * count - 1 - start
        g = hl.Func("g")
        g[x] = hl.Buffer(data, "inp")[(x + start) / 2]
        g.vectorize(x, 16)
        out = np.asarray(g.realize([m]))
        assert (out == data[(np.arange(m) + start) // 2]).all()
    print("ok")
""")


def test_strided_loads_read_nothing_past_the_last_element():
    run = subprocess.run([sys.executable, "-c", _GUARDED], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), (run.returncode, run.stderr[-2000:])


def test_stride_two_is_loads_and_a_permute(tmp_path):
    x = hl.Var("x")
    inp = hl.Buffer(np.arange(256, dtype=np.float32), "inp")
    f = hl.Func("f")
    f[x] = inp[2 * x]
    f.vectorize(x, 16)
    f.compile_to_assembly(str(tmp_path / "f.s"), [], "f")
    asm = (tmp_path / "f.s").read_text()
    if "zmm" in asm:  # AVX-512: one two-source permute per 16 lanes, no lane-by-lane inserts
        assert re.search(r"\bvpermt2ps\b|\bvpermi2ps\b|\bvshufps\b", asm), asm
    assert "vinsertps" not in asm and "vgatherdps" not in asm, asm


@settings(max_examples=40, deadline=None)
@given(a=st.integers(0, 1), b=st.integers(-2, 2), lanes=st.sampled_from([8, 16, 64]), start=st.integers(-5, 5),
       dtype=st.sampled_from(["uint8", "int16", "float32"]), n=st.integers(1, 150))
def test_an_upsampling_inlined_into_an_upsampling_is_exact(a, b, lanes, start, dtype, n):
    """up2 reads up1 at (x + a) / 2 and up1 reads the input at (x + b) / 2, both inlined into a
    vectorized loop whose start (the output's min, a parameter) has any parity: the index is
    one quotient of a ramp by 4 (simplify), loaded as a dense span and a shuffle."""
    data = (np.arange(64) * 7 % 251).astype(dtype)
    x = hl.Var("x")
    inp = hl.Buffer(data, "inp")
    up1, up2 = hl.Func("up1"), hl.Func("up2")
    up1[x] = inp[(x + b) / 2 + 8]
    up2[x] = up1[(x + a) / 2] + up1[(x + 1 - a) / 2]
    up2.vectorize(x, lanes, hl.TailStrategy.GuardWithIf)
    out = hl.Buffer(getattr(hl, {"uint8": "UInt", "int16": "Int", "float32": "Float"}[dtype])(8 if dtype == "uint8" else
                    16 if dtype == "int16" else 32), [n])
    out.set_min([start])
    up2.realize(out)
    xs = np.arange(start, start + n)

    def up1_np(v):
        return data[(v + b) // 2 + 8]

    want = (up1_np((xs + a) // 2) + up1_np((xs + 1 - a) // 2)).astype(dtype)
    np.testing.assert_array_equal(np.asarray(out), want)


def test_an_upsampling_of_an_upsampling_loads_no_lane_by_lane(tmp_path):
    """The index of an upsampling of an upsampling at an unknown phase: one quotient ramp."""
    x = hl.Var("x")
    start = hl.Param(hl.Int(32), "start")
    inp = hl.Buffer(np.arange(1024, dtype=np.uint8), "inp")
    up1, up2 = hl.Func("up1"), hl.Func("up2")
    up1[x] = inp[x / 2]
    up2[x] = up1[(x + start) / 2]
    up2.vectorize(x, 64)
    up2.compile_to_assembly(str(tmp_path / "up.s"), [start], "up")
    asm = (tmp_path / "up.s").read_text()
    # lane by lane, each of the 64 lanes is a byte load and an insert; a dense span and a
    # shuffle per phase insert at most the span's one extra element, into a few lanes
    assert asm.count("vpinsrb") < 16 and "vpextrd" not in asm, asm


@settings(max_examples=40, deadline=None)
@given(dtype=st.sampled_from(["uint8", "int8", "uint16", "int16"]), size=st.integers(1, 300),
       lanes=st.sampled_from([8, 16, 32, 64]), n=st.integers(1, 200), seed=st.integers(0, 2**16),
       slow_gathers=st.booleans())
def test_a_narrow_table_read_per_lane_is_exact(dtype, size, lanes, n, seed, slow_gathers):
    """A table of 8- or 16-bit elements computed by the pipeline, read at data-dependent indices
    in a vector loop: a gather of the 32-bit words at the elements, truncated (or, for a CPU
    whose gathers are slow, lane by lane). The last element is read too (its word runs into the
    storage's padding)."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, size, n).astype(np.int32)
    idx[rng.integers(0, n)] = size - 1
    x = hl.Var("x")
    t = getattr(hl, {"u": "UInt", "i": "Int"}[dtype[0]])(int(dtype.lstrip("uint")))
    indices = hl.Buffer(idx, "indices")
    table, f = hl.Func("table"), hl.Func("lookup")
    table[x] = hl.cast(t, x * 37 + 11)
    f[x] = table[hl.clamp(indices[x], 0, size - 1)]
    table.compute_root().bound(x, 0, size)
    f.vectorize(x, lanes, hl.TailStrategy.GuardWithIf)
    want = (np.arange(size, dtype=np.int64) * 37 + 11).astype(dtype)[idx]
    with x86.host_gathers_slow(slow_gathers):
        np.testing.assert_array_equal(np.asarray(f.realize([n])), want)


@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from(["uint8", "int8", "uint16", "int16"]), size=st.integers(1, 40),
       rows=st.integers(1, 3), step=st.sampled_from([1, 2, -1]), lanes=st.sampled_from([8, 16, 64]),
       n=st.integers(1, 100), seed=st.integers(0, 2**16), slow_gathers=st.booleans())
def test_a_narrow_input_table_read_per_lane_is_exact(dtype, size, rows, step, lanes, n, seed, slow_gathers):
    """A table of 8- or 16-bit elements given as an input (a numpy view: rows apart in memory,
    every other column, or reversed), read at data-dependent indices in a vector loop: the
    32-bit words read never start past the buffer's last word, and lanes near its end take
    their element out of the word that ends there (tables under a word: lane by lane)."""
    rng = np.random.default_rng(seed)
    base = rng.integers(-128, 127, (rows, size * abs(step))).astype(dtype)
    table = base[:, ::step]
    xs, ys = rng.integers(0, size, n).astype(np.int32), rng.integers(0, rows, n).astype(np.int32)
    xs[rng.integers(0, n)], ys[rng.integers(0, n)] = size - 1, rows - 1
    x = hl.Var("x")
    tab, ix, iy = hl.Buffer(table, "tab"), hl.Buffer(xs, "ix"), hl.Buffer(ys, "iy")
    f = hl.Func("lookup")
    f[x] = tab[hl.clamp(ix[x], 0, size - 1), hl.clamp(iy[x], 0, rows - 1)]
    f.vectorize(x, lanes, hl.TailStrategy.GuardWithIf)
    with x86.host_gathers_slow(slow_gathers):
        np.testing.assert_array_equal(np.asarray(f.realize([n])), table[ys, xs])


@pytest.mark.parametrize("slow_gathers", [False, True])
def test_narrow_tables_are_gathered_in_words(tmp_path, slow_gathers):
    """A uint16 table the pipeline computes, and one given as an input: vpgatherdd (16 lanes an
    instruction), not a load and an insert per lane; on a CPU whose gathers are slow
    (x86.SLOW_GATHERS), a load per lane and no gather."""
    from pyhalide.codegen.jit import host_target

    x = hl.Var("x")
    indices = hl.Buffer(np.arange(64, dtype=np.uint8), "indices")
    table, f = hl.Func("table"), hl.Func("lookup")
    table[x] = hl.u16(x * 3)
    f[x] = table[hl.i32(indices[x])]
    table.compute_root()
    f.vectorize(x, 32)
    g = hl.Func("lookup_input")
    g[x] = hl.Buffer(np.arange(256, dtype=np.uint16), "input_table")[hl.i32(indices[x])]
    g.vectorize(x, 32)
    with x86.host_gathers_slow(slow_gathers):
        for h in (f, g):
            h.compile_to_assembly(str(tmp_path / "h.s"), [], "h")
            asm = (tmp_path / "h.s").read_text()
            if slow_gathers:
                assert "vpgather" not in asm and asm.count("movzwl") + asm.count("vpinsrw") >= 32, asm
            elif "+avx2" in host_target().features.split(","):
                assert "vpgatherdd" in asm and "vpinsrw" not in asm, asm
        np.testing.assert_array_equal(np.asarray(f.realize([64])), np.arange(64, dtype=np.uint16) * 3)
        np.testing.assert_array_equal(np.asarray(g.realize([64])), np.arange(64, dtype=np.uint16))


@pytest.mark.parametrize("slow_gathers", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "uint8", "int16"])
def test_a_vector_across_rows_of_a_stride_known_at_run_time_is_exact(slow_gathers, dtype):
    """A transpose vectorized along the input's columns: lane i reads at base + i * stride, the
    stride a buffer's row pitch (a gather, or on a CPU whose gathers are slow a load per lane,
    each address a step from the last); the vector tail guarded."""
    rng = np.random.default_rng(5)
    img = rng.integers(0, 120, (37, 45)).astype(dtype)
    x, y = hl.Var("x"), hl.Var("y")
    t = hl.Func("transposed")
    t[x, y] = hl.Buffer(img, "img")[y, x] + 1
    t.vectorize(x, 16, hl.TailStrategy.GuardWithIf)
    with x86.host_gathers_slow(slow_gathers):
        got = np.asarray(t.realize([37, 45]))
    np.testing.assert_array_equal(got, img.T + 1)


@pytest.mark.parametrize("slow_gathers", [False, True])
@pytest.mark.parametrize("padded", [False, True])
def test_a_float16_table_read_per_lane_is_exact(slow_gathers, padded):
    """Half floats gathered as 32-bit words are cut to their 16 bits, then taken as halves (a
    truncation straight to half floats is not LLVM IR): from the pipeline's own padded storage
    and from an input, whose last words are shifted."""
    data = (np.arange(37) * 0.75 - 9).astype(np.float16)
    idx = ((np.arange(50) * 7) % 37).astype(np.int32)
    idx[-1] = 36
    x = hl.Var("x")
    indices = hl.Buffer(idx, "indices")
    if padded:
        table = hl.Func("table")
        table[x] = hl.Buffer(data, "data")[x]
        table.compute_root().bound(x, 0, 37)
    else:
        table = hl.Buffer(data, "data")
    f = hl.Func("lookup")
    f[x] = table[hl.clamp(indices[x], 0, 36)]
    f.vectorize(x, 16, hl.TailStrategy.GuardWithIf)
    with x86.host_gathers_slow(slow_gathers):
        np.testing.assert_array_equal(np.asarray(f.realize([50])), data[idx])
