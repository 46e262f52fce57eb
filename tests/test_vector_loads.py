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
from hypothesis import given, settings
from hypothesis import strategies as st

import pyhalide as hl


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
