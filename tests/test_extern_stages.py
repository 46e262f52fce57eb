"""Extern stages (Func.define_extern): a Func computed by a C function of this process, with
Halide's two bounds queries (the first may widen what the stage computes, the second says what it
needs of its Func inputs). The cases follow Halide's test/correctness/extern_*.cpp; the functions
are in extern_stages.c, built here into a library loaded globally, where the JIT finds them (as
Halide's JIT does). Each result is checked against numpy, pyhalide's reference evaluator (which
calls the same functions through ctypes) and, where it is installed, the real Halide. The last
tests give a pipeline Python functions as its extern stages (Pipeline.set_jit_externs)."""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import pyhalide as hl
from pyhalide import reference
from pyhalide.testing.halide_buffer import c_compiler

CC = c_compiler()

x, y, xi, yi = hl.Var("x"), hl.Var("y"), hl.Var("xi"), hl.Var("yi")


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    if CC is None:
        pytest.skip("no C compiler to build the extern stage functions")
    library = tmp_path_factory.mktemp("extern") / "libextern_stages.so"
    source = Path(__file__).with_name("extern_stages.c")
    subprocess.run([CC, "-O2", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return ctypes.CDLL(str(library), mode=ctypes.RTLD_GLOBAL)


def counter(lib, name: str) -> int:
    return ctypes.c_int.in_dll(lib, name).value


def reset(lib, *names: str) -> None:
    for name in names:
        ctypes.c_int.in_dll(lib, name).value = 0


def squares_from(lo: int, n: int) -> np.ndarray:
    return np.array([(i * i) % 256 for i in range(lo, lo + n)], np.uint8)


def flip_pipeline(halide, input_array, schedule):
    """extern_stage.cpp: g(x) = input(-x) + f(-x) computed by flip_x, h(x) = g(x) * 2."""
    inp = halide.Buffer(input_array, "flip_input")
    inp.set_min([-99])
    f, g, h = halide.Func("f"), halide.Func("g"), halide.Func("h")
    vx, vxi = halide.Var("x"), halide.Var("xi")
    f[vx] = vx * vx
    g.define_extern("flip_x", [inp, f], halide.UInt(8), 1)
    h[vx] = g[vx] * 2
    schedule(f, g, h, vx, vxi)
    return h


SCHEDULES = {
    # Halide's own: both inside h's parallel, vectorized, unrolled loop
    "inside_a_parallel_loop": lambda f, g, h, vx, vxi: (
        f.compute_at(h, vx), g.compute_at(h, vx), h.vectorize(vx, 8).unroll(vx, 2).split(vx, vx, vxi, 4).parallel(vx)),
    "root": lambda f, g, h, vx, vxi: (f.compute_root(), g.compute_root()),
    # f computed once for every iteration of the loop g is called in: the queries made there for
    # all of them say how much
    "input_outside_the_loop": lambda f, g, h, vx, vxi: (
        f.compute_root(), g.compute_at(h, vx), h.split(vx, vx, vxi, 8)),
    # unscheduled, an extern stage is computed in the innermost loop of its consumer (as Halide)
    "default": lambda f, g, h, vx, vxi: f.compute_root(),
}


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_extern_stage_reads_a_buffer_and_a_func(lib, schedule):
    want = (4 * np.arange(100) ** 2).astype(np.uint8)
    input_array = squares_from(-99, 100)
    h = flip_pipeline(hl, input_array, SCHEDULES[schedule])
    reset(lib, "calls_flip", "queries_flip")
    got = np.asarray(h.realize([100]))
    np.testing.assert_array_equal(got, want)
    assert counter(lib, "calls_flip") >= 1 and counter(lib, "queries_flip") >= 2 * counter(lib, "calls_flip")
    np.testing.assert_array_equal(reference.realize(h, [100])[0], want)
    halide = pytest.importorskip("halide")
    np.testing.assert_array_equal(np.asarray(flip_pipeline(halide, input_array, SCHEDULES[schedule]).realize([100])),
                                  want)


def test_computed_once_per_realization_at_root(lib):
    h = flip_pipeline(hl, squares_from(-99, 100), SCHEDULES["root"])
    reset(lib, "calls_flip", "queries_flip")
    h.realize([100])
    # two bounds queries (the second with the region the first settled), then the call
    assert (counter(lib, "queries_flip"), counter(lib, "calls_flip")) == (2, 1)


def test_loop_nest_matches_halides(lib, capsys):
    h = flip_pipeline(hl, squares_from(-99, 100), SCHEDULES["default"])
    h.print_loop_nest()
    want = "produce f: for x: f(...) = ... consume f: produce h: for x: produce g: consume g: h(...) = ..."
    assert capsys.readouterr().out.split() == want.split()


def make_data_pipeline(halide):
    """extern_producer.cpp: a source whose bounds query rounds its region out to multiples of 10
    columns and at least 40 rows (it checks it is then asked to compute exactly that)."""
    vx, vy, vxi, vyi = (halide.Var(n) for n in ("x", "y", "xi", "yi"))
    source, sink = halide.Func("source"), halide.Func("sink")
    source.define_extern("make_data", [], halide.Int(32), [vx, vy])
    source.align_storage(vx, 32)
    sink[vx, vy] = source[vx, vy] - (vx + vy) % 61
    sink.tile(vx, vy, vxi, vyi, 32, 32)
    source.compute_at(sink, vx)
    return sink


def test_a_bounds_query_may_widen_what_the_stage_computes(lib):
    sink = make_data_pipeline(hl)
    np.testing.assert_array_equal(np.asarray(sink.realize([100, 100])), 0)
    np.testing.assert_array_equal(reference.realize(sink, [100, 100])[0], 0)
    halide = pytest.importorskip("halide")
    np.testing.assert_array_equal(np.asarray(make_data_pipeline(halide).realize([100, 100])), 0)


def test_tuple_valued_extern_stage(lib):
    multi, sink = hl.Func("multi"), hl.Func("sink_multi")
    multi.define_extern("make_data_multi", [], [hl.Int(32), hl.Int(32)], [x, y])
    sink[x, y] = multi[x, y][0] - (x + y) % 61 + multi[x, y][1] - (x + y + 15) % 61
    sink.tile(x, y, xi, yi, 32, 32)
    multi.compute_at(sink, x)
    np.testing.assert_array_equal(np.asarray(sink.realize([100, 100])), 0)
    np.testing.assert_array_equal(reference.realize(sink, [100, 100])[0], 0)


def test_extern_stage_as_an_output_of_the_pipeline(lib):
    """multiple_outputs_extern.cpp: the extern stage is an output beside its consumer."""
    inp = hl.Buffer(squares_from(-99, 100), "flip_input")
    inp.set_min([-99])
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    f[x] = x * x
    g.define_extern("flip_x", [inp, f], hl.UInt(8), 1)
    h[x] = g[x] * 2
    f.compute_root()
    h.vectorize(x, 8).unroll(x, 2).split(x, x, xi, 4).parallel(x)
    h_buf, g_buf = hl.Buffer(hl.UInt(8), [100]), hl.Buffer(hl.UInt(8), [100])
    hl.Pipeline([h, g]).realize([h_buf, g_buf])
    np.testing.assert_array_equal(np.asarray(h_buf), (4 * np.arange(100) ** 2).astype(np.uint8))
    np.testing.assert_array_equal(np.asarray(g_buf), (2 * np.arange(100) ** 2).astype(np.uint8))


def test_image_param_and_expression_arguments(lib):
    """extern_bounds_inference.cpp's pipeline: two translations of one image, one at root and one
    per row of tiles."""
    im = hl.ImageParam(hl.UInt(8), 2, "im")
    t1, t2, g = hl.Func("t1"), hl.Func("t2"), hl.Func("g")
    t1.define_extern("translate", [im, 3, 7], hl.UInt(8), 2)
    t2.define_extern("translate", [im, hl.Expr(8), hl.Expr(17)], hl.UInt(8), 2)
    g[x, y] = t1[x, y] + t2[x, y]
    t1.compute_root()
    t2.compute_at(g, y)
    g.tile(x, y, xi, yi, 2, 4)
    data = np.random.default_rng(1).integers(0, 100, (60, 50)).astype(np.uint8)
    im.set(hl.Buffer(data))
    want = data[7:27, 3:33] + data[17:37, 8:38]
    np.testing.assert_array_equal(np.asarray(g.realize([30, 20])), want)
    np.testing.assert_array_equal(reference.realize(g, [30, 20])[0], want)


def test_func_input_with_two_dimensions_and_a_scalar(lib):
    """row_sums(in, w, out): out(y) = the sum of in(x, y) over x in [0, w), float to double; the
    input's region (all w columns of the rows asked) comes from the query alone."""
    w = hl.Param(hl.Int(32), "w", 13)
    pic, sums, out = hl.Func("pic"), hl.Func("sums"), hl.Func("out")
    pic[x, y] = hl.f32(x) * 0.5 + hl.f32(y)
    sums.define_extern("row_sums", [pic, w], hl.Float(64), 1)
    out[y] = sums[y] + 1
    pic.compute_root().parallel(y).vectorize(x, 8)
    sums.compute_at(out, y)
    out.split(y, y, yi, 5)
    rows = np.arange(20, dtype=np.float64)
    want = (0.5 * np.arange(13)).sum() + 13 * rows + 1
    np.testing.assert_array_equal(np.asarray(out.realize([20])), want)
    np.testing.assert_array_equal(reference.realize(out, [20])[0], want)


@pytest.mark.parametrize("at_root", [False, True])
def test_output_widened_inside_a_loop_moves_inside_the_outer_query(lib, at_root):
    """extern_output_expansion.cpp: the stage computes multiples of 17 elements; computed per
    10-element iteration of h, each iteration's widened region is moved down inside the region
    the query for all iterations widened to (as Halide moves it), so f, at root, covers it."""

    def pipeline(halide):
        f, g, h, vx, vxo = halide.Func("f"), halide.Func("g"), halide.Func("h"), halide.Var("x"), halide.Var("xo")
        f[vx] = vx * vx
        g.define_extern("expand_to_17", [f], halide.Int(32), 1)
        h[vx] = g[vx] * 2
        h.split(vx, vxo, vx, 10)
        f.compute_root()
        g.compute_root() if at_root else g.compute_at(h, vxo)
        return h

    want = 2 * np.arange(100) ** 3
    np.testing.assert_array_equal(np.asarray(pipeline(hl).realize([100])), want)
    np.testing.assert_array_equal(reference.realize(pipeline(hl), [100])[0], want)
    halide = pytest.importorskip("halide")
    np.testing.assert_array_equal(np.asarray(pipeline(halide).realize([100])), want)


def tiled_pipeline(halide, case: str):
    """extern_consumer_tiled.cpp ("tiled": the stage's loops tiled, the outer ones real, the input
    computed per tile) and extern_partial.cpp ("rows", "columns": one dimension made a serial
    loop, the input computed per iteration)."""
    vx, vy, vxo, vyo = (halide.Var(n) for n in ("x", "y", "xo", "yo"))
    inp, out = halide.Func("tile_input"), halide.Func("tile_output")
    inp[vx, vy] = vx * vy
    out.define_extern("copy_plus_xcoord", [inp], halide.Int(32), [vx, vy])
    if case == "tiled":
        out.compute_root().tile(vx, vy, vxo, vyo, vx, vy, 10, 10).parallel(vyo)
        inp.compute_at(out, vxo)
    elif case == "columns":
        out.compute_root().reorder(vy, vx).serial(vx)
        inp.compute_at(out, vx)
    else:
        out.compute_root().serial(vy)
        inp.compute_at(out, vy)
    return out


@pytest.mark.parametrize("case", ["tiled", "columns", "rows"])
def test_extern_stage_with_loops_of_its_own(lib, case):
    w, h = (75, 35) if case == "tiled" else (100, 100)  # (uneven tiles)
    xs, ys = np.arange(w)[None, :], np.arange(h)[:, None]
    want = xs * ys + xs
    np.testing.assert_array_equal(np.asarray(tiled_pipeline(hl, case).realize([w, h])), want)
    np.testing.assert_array_equal(reference.realize(tiled_pipeline(hl, case), [w, h])[0], want)
    halide = pytest.importorskip("halide")
    np.testing.assert_array_equal(np.asarray(tiled_pipeline(halide, case).realize([w, h])), want)


def test_output_storage_reordered(lib):
    """extern_reorder_storage.cpp: the stage gets its output with y innermost, as stored."""
    data = (np.arange(20)[:, None] + np.arange(30)[None, :]).astype(np.uint8)
    im = hl.ImageParam(hl.UInt(8), 2, "reordered_input")
    f, g = hl.Func("reordered"), hl.Func("reads_reordered")
    f.define_extern("copy_and_check_strides", [im], hl.UInt(8), [x, y])
    g[x, y] = f[x, y]
    f.compute_root().reorder_storage(y, x)
    im.set(hl.Buffer(data))
    np.testing.assert_array_equal(np.asarray(g.realize([30, 20])), data)


def test_failures_are_halide_errors(lib):
    fails = hl.Func("fails")
    fails.define_extern("always_fails", [], hl.Float(32), 1)
    with pytest.raises(hl.HalideError, match="Call to external stage always_fails returned non-zero value: -7"):
        fails.realize([100])
    query_fails = hl.Func("query_fails")
    query_fails.define_extern("query_fails", [], hl.Float(32), 1)
    with pytest.raises(hl.HalideError, match="Bounds inference call to external stage query_fails returned "
                                             "non-zero value: 3"):
        query_fails.realize([100])


def test_a_query_that_shrinks_the_region_is_refused(lib):
    """A stage that says it will compute less than its consumers read would leave them reading
    past its buffer: refused before it runs."""
    shrinks, out = hl.Func("shrinks"), hl.Func("reads_shrinks")
    shrinks.define_extern("shrinks", [], hl.Float(32), 1)
    out[x] = shrinks[x]
    shrinks.compute_root()
    with pytest.raises(hl.HalideError, match=r"extern stage shrinks \(shrinks\) gave it the region \[0, 8\] to "
                                             r"compute in dimension 0, which does not cover the \[0, 9\]"):
        out.realize([10])


@pytest.mark.parametrize("variant", [0, 1])
def test_an_iteration_asking_past_what_its_loop_asked_for_is_clamped(lib, variant):
    """non_nesting_extern_bounds_query.cpp: g's query for one row asks past what its query for
    all rows asked (further right, or far off); f, computed per row, is computed for that request
    clamped into the query for all rows, as Halide clamps it (the function checks what it got)."""

    def pipeline(halide):
        vx, vy = halide.Var("x"), halide.Var("y")
        f, g, h = halide.Func("nesting_f"), halide.Func("nesting_g"), halide.Func("nesting_h")
        f[vx, vy] = vx + vy
        g.define_extern("misbehaving_extern_stage", [f, halide.Expr(variant)], halide.Int(32), 2)
        h[vx, vy] = g[vx, vy]
        g.compute_at(h, vy)
        f.compute_at(h, vy)
        return h

    np.testing.assert_array_equal(np.asarray(pipeline(hl).realize([200, 200])), variant)
    halide = pytest.importorskip("halide")
    np.testing.assert_array_equal(np.asarray(pipeline(halide).realize([200, 200])), variant)


def test_refusals(lib):
    f, g = hl.Func("inlined_input"), hl.Func("reads_inlined_input")
    f[x] = x
    g.define_extern("flip_x", [hl.Buffer(np.zeros(4, np.uint8)), f], hl.UInt(8), 1)
    with pytest.raises(hl.HalideError, match="Func inlined_input cannot be scheduled to be computed inline, because "
                                             "it is used in the externally-computed function reads_inlined_input"):
        g.realize([4])
    with pytest.raises(hl.HalideError, match="already has an extern definition"):
        g.define_extern("flip_x", [], hl.UInt(8), 1)
    with pytest.raises(hl.HalideError, match="with a pure definition cannot have an extern definition"):
        f.define_extern("flip_x", [], hl.UInt(8), 1)
    with pytest.raises(hl.HalideError, match="cannot be given a pure or update definition"):
        g[x] = hl.u8(x)
    with pytest.raises(hl.HalideError, match="extern Func"):
        g.value()
    assert g.is_extern() and not f.is_extern() and g.extern_function_name() == "flip_x"
    f.compute_root()
    g.vectorize(g.args()[0], 4)
    with pytest.raises(hl.HalideError, match=r"Externally defined Func reads_inlined_input cannot have loop type "
                                             r"vectorized \(_0\.v"):
        g.realize([4])
    with pytest.raises(hl.HalideError, match="compute_with\\(\\) on extern Func reads_inlined_input is not allowed"):
        g.compute_with(f, x)
    with pytest.raises(hl.HalideError, match="reads_inlined_input is an extern stage; it has no loops"):
        f.compute_with(g, g.args()[0])
    missing = hl.Func("calls_a_missing_function")
    missing.define_extern("no_such_function_anywhere", [], hl.Int(32), 1)
    with pytest.raises(hl.HalideError, match="no_such_function_anywhere is not loaded in this process"):
        missing.realize([4])
    with pytest.raises(hl.HalideError, match="not in C or CUDA source"):
        missing.compile_to_c("/dev/null", [], "missing")
    with pytest.raises(hl.HalideError, match="CPU targets only"):
        missing.compile_jit(hl.Target("host-cuda"))


def test_stored_outside_the_loop_it_is_computed_in(lib):
    """many_small_extern_stages.cpp (g computed per row of h, stored at root), and extern_producer's
    source so stored: each call writes its crop of the storage, sized by the queries for all
    iterations."""
    f, g, h = hl.Func("small_f"), hl.Func("small_g"), hl.Func("small_h")
    f[x, y] = x * x + y
    g.define_extern("copy", [f], hl.Int(32), 2)
    r = hl.RDom([(0, 100)])
    h[x, y] += r.x * (g[x, y] - f[x, y])
    f.compute_at(h, y)
    g.compute_at(h, y).store_root()
    np.testing.assert_array_equal(np.asarray(h.realize([10, 10])), 0)
    source, sink = hl.Func("stored_apart"), hl.Func("reads_stored_apart")
    source.define_extern("make_data", [], hl.Int(32), [x, y])
    sink[x, y] = source[x, y] - (x + y) % 61
    sink.tile(x, y, xi, yi, 32, 32)
    source.compute_at(sink, x).store_root()
    np.testing.assert_array_equal(np.asarray(sink.realize([100, 100])), 0)


def bounds_inference_pipeline(halide, case: int):
    """extern_bounds_inference.cpp's three cases: an image translated by an extern stage (1); two
    translations, one at root, one per row of tiles (2); one per row, beside a Func reading the
    image, under an update (3). Returns (the ImageParam, the output)."""
    vx, vy, vxi, vyi = (halide.Var(n) for n in ("x", "y", "xi", "yi"))
    im = halide.ImageParam(halide.UInt(8), 2, "inferred")
    f1, f2, g = halide.Func("translated"), halide.Func("translated_more"), halide.Func("both")
    f1.define_extern("translate", [im, halide.Expr(3), halide.Expr(7)], halide.UInt(8), 2)
    if case == 1:
        return im, f1
    if case == 2:
        f2.define_extern("translate", [im, halide.Expr(8), halide.Expr(17)], halide.UInt(8), 2)
        g[vx, vy] = f1[vx, vy] + f2[vx, vy]
        f1.compute_root()
        f2.compute_at(g, vy)
        g.tile(vx, vy, vxi, vyi, 2, 4)
        return im, g
    f2[vx, vy] = im[vx + 8, vy + 17]
    g[vx, vy] = f1[vx, vy]
    g[vx, vy] += f2[vx, vy]
    f1.compute_at(g, vy)
    f2.compute_at(g, vx)
    g.reorder(vy, vx).vectorize(vy, 4)
    g.update().unscheduled()
    return im, g


@pytest.mark.parametrize("case", [1, 2, 3])
def test_infer_input_bounds_asks_the_extern_stages(lib, case):
    """infer_input_bounds runs the extern stages' bounds queries (the image passed without memory):
    the image is sized for what they and the other Funcs read, as Halide sizes it."""
    want = (3, 30, 7, 20) if case == 1 else (3, 35, 7, 30)

    def inferred(halide):
        im, out = bounds_inference_pipeline(halide, case)
        out.infer_input_bounds([30, 20])
        b = im.get()
        assert (b.dim(0).min(), b.dim(0).extent(), b.dim(1).min(), b.dim(1).extent()) == want
        return im, out

    im, out = inferred(hl)
    data = np.asarray(im.get())
    data[...] = np.random.default_rng(case).integers(0, 100, data.shape)
    got = np.asarray(out.realize([30, 20]))
    first = data[0:20, 0:30]  # (the image starts at (3, 7): this is (x + 3, y + 7))
    np.testing.assert_array_equal(got, first if case == 1 else first + data[10:30, 5:35])
    inferred(pytest.importorskip("halide"))


def test_autoscheduler_computes_extern_stages_and_their_inputs(lib):
    """The autoscheduler computes an extern stage at root, untiled, and never inlines the Funcs it
    reads; the rest it schedules as usual."""
    inp = hl.Buffer(squares_from(-99, 100), "flip_input")
    inp.set_min([-99])
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    f[x] = x * x
    g.define_extern("flip_x", [inp, f], hl.UInt(8), 1)
    h[x] = g[x] * 2 + f[x]
    h.set_estimate(x, 0, 96)
    results = hl.Pipeline(h).apply_autoscheduler(hl.Target("host"), hl.AutoschedulerParams("Adams2019"))
    assert "f['g'].compute_root()" in results.schedule_source
    i = np.arange(96)
    np.testing.assert_array_equal(np.asarray(h.realize([96])), (2 * ((2 * i * i) % 256)) % 256 + i * i)


def test_ahead_of_time_object_calls_the_function(lib, tmp_path):
    """An object from compile_to_object leaves the function for the linker to find."""
    from pyhalide.testing.halide_buffer import halide_buffer

    im = hl.ImageParam(hl.UInt(8), 2, "im")
    t = hl.Func("t")
    t.define_extern("translate", [im, 3, 7], hl.UInt(8), 2)
    obj = tmp_path / "translate_pipeline.o"
    t.compile_to_object(str(obj), [im], "translate_pipeline")
    library = tmp_path / "libtranslate_pipeline.so"
    subprocess.run([CC, "-shared", "-o", str(library), str(obj), "-lpthread"], check=True)
    pipeline = ctypes.CDLL(str(library))
    data = np.random.default_rng(2).integers(0, 255, (40, 50)).astype(np.uint8)
    out = np.zeros((20, 30), np.uint8)
    assert pipeline.translate_pipeline(ctypes.byref(halide_buffer(data)), ctypes.byref(halide_buffer(out))) == 0
    np.testing.assert_array_equal(out, data[7:27, 3:33])


# ---------------------------------------------------------------- extern stages written in Python
def cumulative_sum(inp, out):
    """out(x, y) = the sum of inp(0..x, y): each row's prefix sums, which no pointwise Func computes.
    A bounds query asks for columns 0 up to the last output column of the output's rows."""
    if inp.is_bounds_query():
        inp.dim[0].min, inp.dim[0].extent = 0, out.dim[0].min + out.dim[0].extent
        inp.dim[1].min, inp.dim[1].extent = out.dim[1].min, out.dim[1].extent
        return 0
    a, o = inp.as_array(), out.as_array()  # numpy views: [y, x]
    x0, y0 = out.dim[0].min - inp.dim[0].min, out.dim[1].min - inp.dim[1].min
    o[...] = np.cumsum(a, axis=1, dtype=np.int64)[y0:y0 + o.shape[0], x0:x0 + o.shape[1]]
    return 0


def prefix_pipeline():
    pic, sums, out = hl.Func("pic"), hl.Func("prefix_sums"), hl.Func("prefix_out")
    pic[x, y] = x + 3 * y
    sums.define_extern("cumulative_sum", [pic], hl.Int(64), [x, y])
    out[x, y] = sums[x, y] * 2
    pic.compute_root()
    sums.compute_at(out, y)
    out.split(y, y, yi, 4).parallel(y)
    return out


def test_python_extern_stage(capsys):
    out = prefix_pipeline()
    p = hl.Pipeline(out)
    p.set_jit_externs({"cumulative_sum": cumulative_sum})
    assert list(p.get_jit_externs()) == ["cumulative_sum"]
    got = np.asarray(p.realize([20, 12]))
    pic = np.arange(20)[None, :] + 3 * np.arange(12)[:, None]
    want = 2 * np.cumsum(pic, axis=1)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(reference.realize(out, [20, 12], jit_externs={"cumulative_sum": cumulative_sum})[0],
                                  want)
    # a Callable keeps the pipeline's functions
    callable_ = p.compile_to_callable([])
    result = hl.Buffer(hl.Int(64), [20, 12])
    callable_(result)
    np.testing.assert_array_equal(np.asarray(result), want)
    # realized into the same buffer again after the functions changed: the new ones run
    p.realize(result)

    def doubled(inp, out):
        status = cumulative_sum(inp, out)
        if not out.is_bounds_query():
            out.as_array()[...] *= 2
        return status

    p.set_jit_externs({"cumulative_sum": doubled})
    p.realize(result)
    np.testing.assert_array_equal(np.asarray(result), 2 * want)


def test_python_extern_stage_that_raises():
    def broken(inp, out):
        if not inp.is_bounds_query():
            raise ValueError("broken on purpose")
        return cumulative_sum(inp, out)

    p = hl.Pipeline(prefix_pipeline())
    p.set_jit_externs({"cumulative_sum": broken})
    with pytest.raises(hl.HalideError, match="Call to external stage cumulative_sum returned non-zero value: -1") as e:
        p.realize([20, 12])
    assert isinstance(e.value.__cause__, ValueError)
    with pytest.raises(hl.HalideError, match="must name a ctypes function"):
        p.set_jit_externs({"cumulative_sum": 3.5})


def test_python_extern_stage_without_its_function():
    with pytest.raises(hl.HalideError, match="cumulative_sum is not loaded in this process.*set_jit_externs"):
        prefix_pipeline().realize([20, 12])


# ---------------------------------------------------------------- random pipelines around an extern stage
def shift_and_widen(dx: int, dy: int, round_to: int):
    """A Python extern stage: out(x, y) = inp(x + dx, y + dy) + x; its first bounds query rounds
    its region out to multiples of `round_to` columns (what it computes is wider than asked)."""

    def stage(inp, out):
        if out.is_bounds_query():
            lo, hi = out.dim[0].min, out.dim[0].min + out.dim[0].extent
            lo, hi = lo - lo % round_to, hi + (-hi) % round_to
            out.dim[0].min, out.dim[0].extent = lo, hi - lo
        if inp.is_bounds_query():
            inp.dim[0].min, inp.dim[0].extent = out.dim[0].min + dx, out.dim[0].extent
            inp.dim[1].min, inp.dim[1].extent = out.dim[1].min + dy, out.dim[1].extent
            return 0
        if out.is_bounds_query():
            return 0
        a, o = inp.as_array(), out.as_array()
        ox, oy = out.dim[0].min + dx - inp.dim[0].min, out.dim[1].min + dy - inp.dim[1].min
        cols = np.arange(out.dim[0].min, out.dim[0].min + out.dim[0].extent, dtype=np.int32)
        o[...] = a[oy:oy + o.shape[0], ox:ox + o.shape[1]] + cols[None, :]
        return 0

    return stage


@given(data=st.data())
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_schedules_around_an_extern_stage(data):
    """p -> extern g (shifted, widened) -> h, a 3-point stencil of g: every placement of p and g
    (root, per row or per tile of h, g left unscheduled, p inside g's own loops), g's dimensions
    split into loops, h's loops split, vectorized or parallel; against numpy."""
    dx, dy = data.draw(st.integers(-3, 3)), data.draw(st.integers(-3, 3))
    round_to = data.draw(st.sampled_from([1, 3, 8]))
    w, ht = data.draw(st.integers(1, 40)), data.draw(st.integers(1, 20))
    p, g, h = hl.Func("fuzz_p"), hl.Func("fuzz_g"), hl.Func("fuzz_h")
    p[x, y] = x * 7 + y * 3
    g.define_extern("shift_and_widen", [p], hl.Int(32), [x, y])
    h[x, y] = g[x - 1, y] + 2 * g[x, y] + g[x + 1, y]
    tile = data.draw(st.sampled_from([None, (4, 2), (8, 8)]))
    if tile:
        h.tile(x, y, xi, yi, *tile)
    h_loops = ([x, y] if tile else [y]) + [None]
    g_at = data.draw(st.sampled_from(["root", "default", *[f"h.{v}" for v in ("y", "x") if tile or v == "y"]]))
    if g_at == "root":
        g.compute_root()
    elif g_at != "default":
        g.compute_at(h, x if g_at == "h.x" else y)
        if data.draw(st.booleans()):
            g.store_root()
            g_at += " stored at root"
    # g's own loops: its columns split, the outer part a loop (serial or parallel), the inner
    # part its function's; or its rows a loop
    g_loops = data.draw(st.sampled_from(["none", "split x", "parallel split x", "rows"]))
    gx = hl.Var("gx")
    if g_loops == "rows":
        g.serial(y)
    elif g_loops != "none":
        g.split(x, gx, x, data.draw(st.integers(1, 7))).reorder(x, y, gx)  # (extern dimensions innermost)
        if g_loops.startswith("parallel"):
            g.parallel(gx)
    # (g split inside h's loops, p computed outside them: each iteration's calls may start below
    # the region the queries for all of them asked for, which is refused; not drawn)
    outside_ok = g_at == "root" or g_loops in ("none", "rows")
    places = (["root"] if outside_ok else []) + (["with g"] if g_at.startswith("h.") else [])
    places += ["in g"] if g_loops != "none" else []
    p_at = data.draw(st.sampled_from(places))
    if p_at == "root":
        p.compute_root()
    elif p_at == "in g":
        p.compute_at(g, y if g_loops == "rows" else gx)
    else:
        p.compute_at(h, x if g_at.startswith("h.x") else y)
    if data.draw(st.booleans()):
        h.vectorize(xi if tile else x, 4)
    if data.draw(st.booleans()) and h_loops[0] is not None and "stored" not in g_at:  # (else a race, refused)
        h.parallel(y)
    note(f"dx={dx} dy={dy} round_to={round_to} size={w}x{ht} tile={tile} g at {g_at} ({g_loops}), p at {p_at}")
    pipeline = hl.Pipeline(h)
    pipeline.set_jit_externs({"shift_and_widen": shift_and_widen(dx, dy, round_to)})
    got = np.asarray(pipeline.realize([w, ht]))
    xs, ys = np.arange(-1, w + 1), np.arange(ht)
    gv = (xs[None, :] + dx) * 7 + (ys[:, None] + dy) * 3 + xs[None, :]
    np.testing.assert_array_equal(got, gv[:, :-2] + 2 * gv[:, 1:-1] + gv[:, 2:])


def test_skipped_stages_are_queried_but_not_called():
    """skip_stages_external_array_functions.cpp, its first case: of two extern stages read through
    a select, both are asked their bounds (twice each) and only the one selected is called."""
    queries, calls = [0, 0], [0, 0]

    def call_counter(inp, add, idx, out):
        if inp.is_bounds_query():
            queries[idx] += 1
            inp.dim[0].min, inp.dim[0].extent = out.dim[0].min, out.dim[0].extent
            return 0
        calls[idx] += 1
        out.as_array()[:] = inp.as_array() + add
        return 0

    toggle = hl.Param(hl.Bool(), "skip_toggle")
    f1, f2, f3, f4 = (hl.Func(f"skip_f{k}") for k in range(1, 5))
    f1[x] = hl.u8(x)
    f2.define_extern("call_counter", [f1, 1, 0], hl.UInt(8), 1)
    f3.define_extern("call_counter", [f1, 2, 1], hl.UInt(8), 1)
    f4[x] = hl.select(toggle, f2[x], f3[x])
    for f in (f1, f2, f3):
        f.compute_root()
    p = hl.Pipeline(f4)
    p.set_jit_externs({"call_counter": call_counter})
    for on in (True, False):
        queries[:], calls[:] = [0, 0], [0, 0]
        toggle.set(on)
        np.testing.assert_array_equal(np.asarray(p.realize([10])), np.arange(10) + (1 if on else 2))
        assert queries == [2, 2] and calls == ([1, 0] if on else [0, 1])


def test_sort_as_an_extern_stage():
    """extern_sort.cpp: an extern stage sorts its input (numpy's sort here)."""

    def sort_buffer(inp, out):
        if inp.is_bounds_query():
            inp.dim[0].min, inp.dim[0].extent = out.dim[0].min, out.dim[0].extent
            return 0
        out.as_array()[:] = np.sort(inp.as_array())
        return 0

    data, ordered = hl.Func("unsorted"), hl.Func("sorted")
    data[x] = hl.sin(hl.f32(x))
    data.compute_root()
    ordered.define_extern("sort_buffer", [data], hl.Float(32), 1)
    p = hl.Pipeline(ordered)
    p.set_jit_externs({"sort_buffer": sort_buffer})
    np.testing.assert_array_equal(np.asarray(p.realize([100])),
                                  np.sort(np.asarray(hl.lambda_func(x, hl.sin(hl.f32(x))).realize([100]))))


def test_zero_dimensional_extern_stage_with_its_input_at_its_outermost_loop():
    """extern_consumer.cpp: a stage of no dimensions (a sink) reads a Func computed at its
    Var.outermost(), over the region expressions say; it is called once."""
    seen = []

    def dump(inp, lo, n, out):
        if inp.is_bounds_query():
            inp.dim[0].min, inp.dim[0].extent = lo, n
            return 0
        seen.append(inp.as_array().copy())
        return 0

    source, sink = hl.Func("dumped"), hl.Func("dump_sink")
    source[x] = x * x
    sink.define_extern("dump", [source, hl.Param(hl.Int(32), "dump_min", 2), hl.Param(hl.Int(32), "dump_n", 10)],
                       hl.Int(32), 0)
    source.compute_at(sink, hl.Var.outermost())
    p = hl.Pipeline(sink)
    p.set_jit_externs({"dump": dump})
    p.realize()
    assert len(seen) == 1
    np.testing.assert_array_equal(seen[0], np.arange(2, 12) ** 2)
