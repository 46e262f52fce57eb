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
    """A Tuple Func memoized; then one asked for under the same name with an update more (a
    realized Func takes no new definition, as in Halide): its values are computed, not reused."""
    x = hl.Var("x")

    def pipeline(updated: bool):
        f, out = hl.Func("tf"), hl.Func("tout")
        f[x] = (x * 2, hl.f64(x) / 4)
        if updated:
            f[x] = (f[x][0] + 1, f[x][1])
        out[x] = hl.f64(f[x][0]) + f[x][1]
        f.compute_root().memoize()
        return out

    out = pipeline(False)
    want = np.arange(6) * 2 + np.arange(6) / 4
    np.testing.assert_array_equal(np.asarray(out.realize([6])), want)
    assert memoization.entries() == 1
    np.testing.assert_array_equal(np.asarray(out.realize([6])), want)
    assert memoization.entries() == 1
    np.testing.assert_array_equal(np.asarray(pipeline(True).realize([6])), want + 1)
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
    with pytest.raises(hl.HalideError, match="a tag .* may read Params but not a Func, an image or a loop variable"):
        out.realize([4])


def evicted_pipeline(calls: list, eviction_key):
    """An extern stage of one Param (returned) memoized with eviction_key(param), counting calls."""
    x, y = hl.Var("x"), hl.Var("y")
    which = hl.Param(hl.Int(32), "which")
    counted, out = hl.Func("evicted"), hl.Func("evictout")
    counted.define_extern("count_calls", [which], hl.UInt(8), 2)
    out[x, y] = counted[x, y]
    counted.compute_root().memoize(hl.EvictionKey(eviction_key(which)))
    p = hl.Pipeline(out)
    p.set_jit_externs({"count_calls": lambda _, o: counting_stage(calls)(o)})
    return p, which


def test_eviction_keys_and_the_cache_size():
    calls: list = []
    p, which = evicted_pipeline(calls, lambda w: w + 100)
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
    with pytest.raises(hl.HalideError, match="Can't compile Pipeline with memoized output Func: memo_out"):
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
            "f.compute_root().memoize().trace_stores().trace_realizations()\n"
            "for v in (1, 1, 2, 1, 2):\n    p.set(v); out.realize([3])\n")
        run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-2000:]
        text = run.stdout + run.stderr
        counts.append((text.count("Store f"), text.count("Produce f")))
    # p = 1 and p = 2 computed, three elements each; each realization's production traced, hit or not
    assert counts == [(6, 5), (6, 5)]


def test_two_memoized_funcs_with_different_keys():
    """Each memoized Func's cache calls have a signature of their own (its key's values)."""
    x, y = hl.Var("x"), hl.Var("y")
    p = hl.Param(hl.Int(32), "p")
    f1, f2, out = hl.Func("one_d"), hl.Func("two_d"), hl.Func("sum_of_both")
    f1[x] = x
    f2[x, y] = (x + p, hl.f32(y))
    out[x, y] = f1[x] + f2[x, y][0] + hl.i32(f2[x, y][1])
    f1.compute_root().memoize()
    f2.compute_root().memoize()
    p.set(3)
    xx, yy = np.meshgrid(np.arange(4), np.arange(2))
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(out.realize([4, 2])), 2 * xx + 3 + yy)
    assert memoization.entries() == 2


def test_a_production_skip_stages_skips_is_not_kept():
    """f is used only where p holds: where it does not, nothing is computed, and nothing kept."""
    x = hl.Var("x")
    p = hl.Param(hl.Bool(), "use_f")
    f, out = hl.Func("maybe_used"), hl.Func("maybe_out")
    f[x] = x * 3 + 1
    out[x] = hl.select(p, f[x], 0)
    f.compute_root().memoize()
    for used in (False, True, False, True):
        p.set(used)
        np.testing.assert_array_equal(np.asarray(out.realize([4])), np.arange(4) * 3 + 1 if used else 0)
    assert memoization.entries() == 1


def test_what_a_tag_stands_for_and_what_it_does_not():
    """A Param read outside the tag is still keyed on; a tag with no tags keys on its value."""
    x = hl.Var("x")
    p = hl.Param(hl.Int(32), "tp")
    f, out = hl.Func("tag_outside"), hl.Func("tag_outside_out")
    f[x] = hl.memoize_tag(x * p, 7) + p
    out[x] = f[x]
    f.compute_root().memoize()
    g, gout = hl.Func("tag_alone"), hl.Func("tag_alone_out")
    g[x] = hl.memoize_tag(p * 2) + x
    gout[x] = g[x]
    g.compute_root().memoize()
    for v in (1, 2, 3):
        p.set(v)
        np.testing.assert_array_equal(np.asarray(out.realize([3])), np.arange(3) * v + v)
        np.testing.assert_array_equal(np.asarray(gout.realize([3])), np.arange(3) + 2 * v)
    img = hl.ImageParam(hl.Int(32), 1, "half_tagged")
    h, hout = hl.Func("half_tagged_f"), hl.Func("half_tagged_out")
    h[x] = hl.memoize_tag(img[x], p) + img[x + 1]  # img is read outside the tag too: Halide refuses
    hout[x] = h[x]
    h.compute_root().memoize()
    img.set(hl.Buffer(np.arange(8, dtype=np.int32)))
    with pytest.raises(hl.HalideError, match="Buffer parameter half_tagged encountered"):
        hout.realize([4])


def test_a_new_compilation_keeps_entries_of_its_own():
    """As Halide's (one namespace per compilation): storage reordered, a Buffer the algorithm
    names changed and a new Pipeline all compute again."""
    x, y = hl.Var("x"), hl.Var("y")
    f, out = hl.Func("relaid"), hl.Func("relaid_out")
    f[x, y] = x + 10 * y
    out[x, y] = f[x, y]
    f.compute_root().memoize()
    want = np.array([[0, 1, 2], [10, 11, 12]])
    np.testing.assert_array_equal(np.asarray(out.realize([3, 2])), want)
    f.reorder_storage(y, x)
    np.testing.assert_array_equal(np.asarray(out.realize([3, 2])), want)
    data = np.arange(4, dtype=np.int32)
    g, gout = hl.Func("from_buffer"), hl.Func("from_buffer_out")
    g[x] = hl.Buffer(data)[x] * 2
    gout[x] = g[x]
    g.compute_root().memoize()
    np.testing.assert_array_equal(np.asarray(hl.Pipeline(gout).realize([4])), data * 2)
    data[:] = 100
    np.testing.assert_array_equal(np.asarray(hl.Pipeline(gout).realize([4])), np.full(4, 200))


def test_negative_eviction_keys_evict():
    calls: list = []
    p, w = evicted_pipeline(calls, lambda w: w - 10)
    w.set(3)
    p.realize([4, 4])
    memoization.evict(-7)
    p.realize([4, 4])
    assert len(calls) == 2


def test_what_else_halide_refuses_or_keys():
    x = hl.Var("x")
    f, out = hl.Func("inlined_memo"), hl.Func("inlined_memo_out")
    f[x] = x
    out[x] = f[x]
    f.memoize()
    with pytest.raises(hl.HalideError, match="Cannot memoize function inlined_memo because the function is scheduled "
                                             "inline"):
        out.realize([2])
    buf = hl.Buffer(np.arange(4, dtype=np.int32))
    e, eout = hl.Func("extern_of_buffer"), hl.Func("extern_of_buffer_out")
    e.define_extern("anything", [buf], hl.Int(32), 1)
    eout[x] = e[x]
    e.compute_root().memoize()
    with pytest.raises(hl.HalideError, match="Buffer parameter .* encountered in computed_cached computation"):
        eout.realize([2])
    # a buffer's dimension is a value the key holds
    g, gout = hl.Func("reads_extent"), hl.Func(hl.Int(32), 1, "reads_extent_out")
    g[x] = x + gout.output_buffer().dim(0).extent()
    gout[x] = g[x]
    g.compute_root().memoize()
    np.testing.assert_array_equal(np.asarray(gout.realize([4])), np.arange(4) + 4)
    np.testing.assert_array_equal(np.asarray(gout.realize([5])), np.arange(5) + 5)


def test_memoize_tags_in_schedules_and_ahead_of_time_code(tmp_path):
    """A tag in a schedule's expressions computes its value; code for another process (a
    Module's object file) keeps no cache and calls none."""
    x, xi = hl.Var("x"), hl.Var("xi")
    p = hl.Param(hl.Int(32), "sched_p")
    f, out = hl.Func("tag_in_schedule"), hl.Func("tag_in_schedule_out")
    f[x] = x * 2
    out[x] = f[x]
    f.compute_root().bound(x, 0, hl.memoize_tag(p + 1, 5)).split(x, x, xi, hl.memoize_tag(p - 1, 2))
    out.specialize(hl.memoize_tag(p, 1) > 2)
    p.set(3)
    np.testing.assert_array_equal(np.asarray(out.realize([4])), np.arange(4) * 2)
    f.memoize()
    m = hl.Pipeline(out).compile_to_module([p], "memoized_aot")
    m.compile({"object": str(tmp_path / "memoized_aot.o")})
    assert b"pyhalide_memoization" not in (tmp_path / "memoized_aot.o").read_bytes()
