"""Func.memoize(): a memoized Func's values are kept in the memoization cache across realizations,
keyed on the box computed, the Params it reads and memoize_tag's tags (as Halide's
test/correctness/memoize.cpp checks, by counting the calls of an extern stage)."""

from __future__ import annotations

import numpy as np
import pytest

import pyhalide as hl
from pyhalide import memoization


@pytest.fixture(autouse=True)
def empty_cache():
    memoization.cleanup()
    yield
    memoization.set_size(0)  # the default
    memoization.cleanup()


def counting_stage(calls: list, value=lambda: 42):
    """A Python extern stage filling its output with value(), counting the calls that compute."""

    def stage(out):
        if not out.is_bounds_query():
            calls.append(1)
            out.as_array()[...] = value()
        return 0

    return stage


def extern_pipeline(calls, memoize=True, sizes=None):
    x, y = hl.Var("x"), hl.Var("y")
    counted, out = hl.Func("counted"), hl.Func("out")
    counted.define_extern("count_calls", [], hl.UInt(8), 2)
    out[x, y] = counted[x, y] + 1
    counted.compute_root()
    if memoize:
        counted.memoize()
    p = hl.Pipeline(out)
    p.set_jit_externs({"count_calls": counting_stage(calls)})
    return p


def test_a_memoized_extern_stage_runs_once():
    calls: list = []
    p = extern_pipeline(calls)
    for _ in range(3):
        np.testing.assert_array_equal(np.asarray(p.realize([16, 8])), np.full((8, 16), 43))
    assert len(calls) == 1
    np.testing.assert_array_equal(np.asarray(p.realize([16, 9])), np.full((9, 16), 43))  # another box
    assert len(calls) == 2
    calls.clear()
    unmemoized = extern_pipeline(calls, memoize=False)
    unmemoized.realize([16, 8])
    unmemoized.realize([16, 8])
    assert len(calls) == 2


def test_the_key_follows_the_params_the_func_reads_through_others():
    x = hl.Var("x")
    p, unused = hl.Param(hl.Float(32), "scale"), hl.Param(hl.Int(32), "unused")
    base, f, out = hl.Func("base"), hl.Func("f"), hl.Func("out")
    base[x] = hl.f32(x) * p  # inlined into f: f's key has p
    f[x] = base[x] + 1
    out[x] = f[x] + hl.f32(unused)
    f.compute_root().memoize().trace_stores()
    stores = []
    out_p = hl.Pipeline(out)
    import io
    from contextlib import redirect_stdout

    for scale, u in [(2.0, 0), (2.0, 5), (3.0, 5), (2.0, 7), (-0.0, 0), (0.0, 0)]:
        p.set(scale)
        unused.set(u)
        text = io.StringIO()
        with redirect_stdout(text):
            result = np.asarray(out_p.realize([4]))
        stores.append(text.getvalue().count("Store f"))
        np.testing.assert_array_equal(result, np.arange(4, dtype=np.float32) * np.float32(scale) + 1 + u)
    # computed for scale 2, 3, -0.0 and 0.0 (the key keeps a float's bits); reused otherwise
    assert stores == [4, 0, 4, 0, 4, 4]


def test_tuple_funcs_and_a_changed_definition_are_kept_apart(capfd):
    x = hl.Var("x")
    f, out = hl.Func("tf"), hl.Func("tout")
    f[x] = (x * 2, hl.f64(x) / 4)
    out[x] = hl.f64(f[x][0]) + f[x][1]
    f.compute_root().memoize()
    want = np.arange(6) * 2 + np.arange(6) / 4
    np.testing.assert_array_equal(np.asarray(out.realize([6])), want)
    assert memoization.entries() == 1
    np.testing.assert_array_equal(np.asarray(out.realize([6])), want)
    assert memoization.entries() == 1
    f[x] = (f[x][0] + 1, f[x][1])  # an update: the same Func computes other values
    np.testing.assert_array_equal(np.asarray(out.realize([6])), want + 1)
    assert memoization.entries() == 2


def test_memoized_inside_parallel_tiles():
    """Computed per row of a parallel loop: each row's box is its own key; worker threads call
    the cache."""
    x, y = hl.Var("x"), hl.Var("y")
    k = hl.Param(hl.Int(32), "k")
    f, g = hl.Func("rowf"), hl.Func("rowg")
    f[x, y] = x * y + k
    g[x, y] = f[x, y] + f[x + 1, y]
    f.compute_at(g, y).memoize()
    g.parallel(y)
    xx, yy = np.meshgrid(np.arange(32), np.arange(24))
    for kv in (1, 2, 1):
        k.set(kv)
        np.testing.assert_array_equal(np.asarray(g.realize([32, 24])), xx * yy + (xx + 1) * yy + 2 * kv)
    assert memoization.entries() == 2 * 24


def test_an_input_image_needs_a_memoize_tag():
    x = hl.Var("x")
    img = hl.ImageParam(hl.Int(32), 1, "img")
    version = hl.Param(hl.Int(32), "version")
    f, out = hl.Func("readsimg"), hl.Func("imgout")
    f[x] = img[x] * 2
    out[x] = f[x]
    f.compute_root().memoize()
    img.set(hl.Buffer(np.arange(8, dtype=np.int32)))
    with pytest.raises(hl.HalideError, match="Buffer parameter img encountered in computed_cached computation"):
        out.realize([8])

    f2, out2 = hl.Func("tagged"), hl.Func("taggedout")
    f2[x] = hl.memoize_tag(img[x] * 2, version)
    out2[x] = f2[x]
    f2.compute_root().memoize()
    version.set(1)
    np.testing.assert_array_equal(np.asarray(out2.realize([8])), np.arange(8) * 2)
    img.set(hl.Buffer(np.full(8, 5, dtype=np.int32)))
    # the tag says the image is the same: the kept values come back (the user's promise, as Halide)
    np.testing.assert_array_equal(np.asarray(out2.realize([8])), np.arange(8) * 2)
    version.set(2)
    np.testing.assert_array_equal(np.asarray(out2.realize([8])), np.full(8, 10))


def test_a_tag_may_not_read_a_loop_variable():
    x = hl.Var("x")
    f, out = hl.Func("badtag"), hl.Func("badtagout")
    f[x] = hl.memoize_tag(x * 2, x)
    out[x] = f[x]
    f.compute_root().memoize()
    with pytest.raises(hl.HalideError, match="a tag .* may read Params but not a Func or a loop variable"):
        out.realize([4])


def test_eviction_keys_and_the_cache_size():
    calls: list = []
    x, y = hl.Var("x"), hl.Var("y")
    which = hl.Param(hl.Int(32), "which")
    counted, out = hl.Func("evicted"), hl.Func("evictout")
    counted.define_extern("count_calls", [which], hl.UInt(8), 2)
    out[x, y] = counted[x, y]
    counted.compute_root().memoize(hl.EvictionKey(which + 100))
    p = hl.Pipeline(out)
    p.set_jit_externs({"count_calls": lambda w, o: counting_stage(calls)(o)})
    for w in (1, 2, 1, 2):
        which.set(w)
        p.realize([10, 10])
    assert len(calls) == 2
    memoization.evict(101)  # the entry made with which = 1
    for w in (1, 2):
        which.set(w)
        p.realize([10, 10])
    assert len(calls) == 3
    memoization.set_size(150)  # one 100-byte result fits
    which.set(3)
    p.realize([10, 10])
    which.set(2)
    p.realize([10, 10])
    assert len(calls) == 5 and memoization.entries() == 1


def test_what_halide_refuses_to_memoize():
    x, y = hl.Var("x"), hl.Var("y")
    f, g = hl.Func("memo_out"), hl.Func("memo_g")
    f[x] = x
    f.memoize()
    with pytest.raises(hl.HalideError, match="Function memo_out cannot be memoized because it an output of pipeline"):
        f.realize([4])
    g[x, y] = f[x] + y
    f.compute_at(g, y).store_root()
    with pytest.raises(hl.HalideError, match="compute and storage scheduled at different loop levels"):
        g.realize([4, 4])


def test_halide_agrees_on_what_is_computed(tmp_path):
    """One script run with each library: the stores traced show what was computed."""
    pytest.importorskip("halide")
    import subprocess
    import sys

    counts = []
    for lib in ("halide", "pyhalide"):
        script = tmp_path / f"count_{lib}.py"
        script.write_text(
            f"import {lib} as hl\nx = hl.Var('x'); p = hl.Param(hl.Int(32), 'p')\n"
            "f, out = hl.Func('f'), hl.Func('out')\nf[x] = x + p\nout[x] = f[x]\n"
            "f.compute_root().memoize().trace_stores()\n"
            "for v in (1, 1, 2, 1, 2):\n    p.set(v); out.realize([3])\n")
        run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-2000:]
        counts.append((run.stdout + run.stderr).count("Store f"))
    assert counts == [6, 6]  # p = 1 and p = 2 computed, three elements each
