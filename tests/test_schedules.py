"""Specific schedules: Halide's blur and gemm schedules, vector code in the assembly, threads,
and schedules as data (JSON and Python source)."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import pyhalide as hl
from pyhalide.schedule import apply_schedule_json, schedule_to_json

x, y = hl.Var("x"), hl.Var("y")
xi, yi, xo, yo, u = hl.Var("xi"), hl.Var("yi"), hl.Var("xo"), hl.Var("yo"), hl.Var("u")


def blur_numpy(img):
    bx = ((img[:, :-2] + img[:, 1:-1] + img[:, 2:]) // 3).astype(img.dtype)
    return ((bx[:-2] + bx[1:-1] + bx[2:]) // 3).astype(img.dtype)


def halide_blur(img):
    inp = hl.Buffer(img, name="blur_input")
    blur_x, blur_y = hl.Func("blur_x"), hl.Func("blur_y")
    blur_x[x, y] = (inp[x - 1, y] + inp[x, y] + inp[x + 1, y]) / 3
    blur_y[x, y] = (blur_x[x, y - 1] + blur_x[x, y] + blur_x[x, y + 1]) / 3
    return blur_x, blur_y


def apply_halide_blur_schedule(blur_x, blur_y):
    blur_y.split(y, y, yi, 32).parallel(y).vectorize(x, 16)
    blur_x.store_at(blur_y, y).compute_at(blur_y, x).vectorize(x, 16)


@pytest.mark.parametrize("shape", [(1922, 2562), (67, 53)])
def test_halide_blur_schedule(shape):
    img = np.random.default_rng(0).integers(0, 65536, shape, dtype=np.uint16)
    blur_x, blur_y = halide_blur(img)
    apply_halide_blur_schedule(blur_x, blur_y)
    out = hl.Buffer(hl.UInt(16), [shape[1] - 2, shape[0] - 2])
    out.set_min([1, 1])
    blur_y.realize(out)
    assert np.array_equal(np.asarray(out), blur_numpy(img))


@pytest.mark.parametrize("width", [45, 48, 53])
@pytest.mark.parametrize("store", [False, True])
@pytest.mark.parametrize("tail", [hl.TailStrategy.GuardWithIf, hl.TailStrategy.ShiftInwards])
def test_vectors_inside_guarded_vectors_stay_in_bounds(width, store, tail):
    """A producer computed per guarded vector of its consumer reads the input only where the
    guards let it (or, shifting inwards, just inside the region): the bounds of the consumer's
    window keep min and max correlated, as Halide's do."""
    img = np.random.default_rng(1).integers(0, 65536, (40, width + 2), dtype=np.uint16)
    blur_x, blur_y = halide_blur(img)
    blur_y.split(y, yo, yi, 8).vectorize(x, 16, hl.TailStrategy.GuardWithIf)
    blur_x.compute_at(blur_y, x).vectorize(x, 16, tail)
    if store:
        blur_x.store_at(blur_y, yo)
    out = hl.Buffer(hl.UInt(16), [width, 38])
    out.set_min([1, 1])
    blur_y.realize(out)
    assert np.array_equal(np.asarray(out), blur_numpy(img))


def gemm(n, a, b):
    A, B = hl.Buffer(a, name="A"), hl.Buffer(b, name="B")
    k = hl.RDom([(0, n)], name="k")
    prod, out = hl.Func("prod"), hl.Func("gemm_out")
    prod[x, y] = 0.0
    prod[x, y] += A[k, y] * B[x, k]
    out[x, y] = prod[x, y]
    return prod, out, k


def apply_gemm_schedule(prod, out, k, vec=16):
    """Tiles of the output, a reduction split and rfactored, the intermediate computed per tile row."""
    ki = hl.RVar("ki")
    xy = hl.Var("xy")
    out.tile(x, y, xi, yi, 2 * vec, 8).fuse(x, y, xy).parallel(xy).vectorize(xi, vec).unroll(yi)
    prod.compute_at(out, xy).vectorize(x, vec)
    prod.update(0).reorder(x, y, k).vectorize(x, vec).unroll(y)
    intm = prod.update(0).split(k, k, ki, 4).rfactor(ki, u)
    intm.compute_at(out, xy).vectorize(x, vec).unroll(u)
    intm.update(0).reorder(x, u, y).vectorize(x, vec).unroll(u)
    return intm


@pytest.mark.parametrize("n", [128, 100])
def test_gemm_schedule_with_rfactor(n):
    rng = np.random.default_rng(1)
    a = rng.random((n, n), dtype=np.float32)
    b = rng.random((n, n), dtype=np.float32)
    prod, out, k = gemm(n, a, b)
    apply_gemm_schedule(prod, out, k)
    res = np.asarray(out.realize([n, n]))
    assert np.allclose(res, a @ b, rtol=1e-5, atol=1e-4)  # rfactor reassociates the sum


def test_vectorized_code_uses_the_widest_vector_registers(tmp_path):
    from pyhalide.codegen.jit import host_target

    f = hl.Func("vec_add")
    data = hl.Buffer(np.arange(1024, dtype=np.float32), name="vdata")
    f[x] = data[x] * 2.0 + 1.0
    f.vectorize(x, 16)
    asm = tmp_path / "vec.s"
    f.compile_to_assembly(str(asm))
    text = asm.read_text()
    # 16 x float32 is one 512-bit register where the host has AVX-512, else two 256-bit ones
    wide = "zmm" if "+avx512f" in host_target().features else "ymm"
    assert re.search(rf"v(mul|add|fmadd\w*)ps\s[^\n]*%{wide}", text), f"no {wide} arithmetic"
    out = np.asarray(f.realize([1024]))
    assert np.array_equal(out, np.arange(1024, dtype=np.float32) * 2 + 1)


def test_vectorized_tail_with_guard_matches():
    f = hl.Func("guarded")
    f[x, y] = x * 3 + y
    f.vectorize(x, 8, hl.TailStrategy.GuardWithIf)
    out = np.asarray(f.realize([13, 3]))
    xs, ys = np.meshgrid(np.arange(13), np.arange(3))
    assert np.array_equal(out, xs * 3 + ys)


def test_folded_sliding_window_of_a_root_producer_is_right():
    """A window two columns wide each side, over two rows, folded into 8 columns: the loop that
    fills it stores through `x % 8`. LLVM 22's loop vectorizer stored a vector of such stores
    as if `x % 8` did not wrap (found by the random-schedule suite); pyhalide vectorizes only
    what the schedule says, so the result is right."""
    data = np.arange(5 * 19, dtype=np.int32).reshape(5, 19)
    inp = hl.Buffer(data, name="fold_in")
    edge = hl.BoundaryConditions.repeat_edge(inp)
    window, out = hl.Func("fold_window"), hl.Func("fold_out")
    window[x, y] = edge[x, y]
    out[x, y] = window[x + 2, y + 1] + window[x - 2, y]
    out.compute_root()
    window.compute_at(out, x).store_at(out, y)
    edge.compute_root()
    got = np.asarray(out.realize([5, 8]))
    padded = np.pad(data, ((0, 4), (2, 2)), mode="edge")  # [y, x + 2]
    assert np.array_equal(got, padded[1:9, 4:9] + padded[0:8, 0:5])


def test_parallel_results_do_not_depend_on_thread_count():
    code = (
        "import numpy as np, pyhalide as hl\n"
        "x, y = hl.Var('x'), hl.Var('y')\n"
        "f = hl.Func('par'); g = hl.Func('par_out')\n"
        "f[x, y] = x * 7 + y * 13\n"
        "g[x, y] = f[x - 1, y] + f[x + 1, y]\n"
        "g.parallel(y).vectorize(x, 8)\n"
        "f.compute_at(g, y).parallel(x, 4)\n"
        "print(int(np.asarray(g.realize([101, 77])).astype(np.int64).sum()))\n"
    )
    sums = set()
    for threads in ("1", "2", "4"):
        env = dict(os.environ, HL_NUM_THREADS=threads)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        sums.add(out.stdout.strip())
    xs, ys = np.meshgrid(np.arange(101), np.arange(77))
    expected = ((xs - 1) * 7 + ys * 13) + ((xs + 1) * 7 + ys * 13)
    assert sums == {str(int(expected.sum()))}


def test_unroll_and_split_tails():
    for tail in (hl.TailStrategy.GuardWithIf, hl.TailStrategy.ShiftInwards, hl.TailStrategy.RoundUp):
        src = hl.Func("unroll_src")
        src[x] = x * x
        f = hl.Func("unrolled")
        f[x] = src[x] + 1
        src.compute_root().split(x, xo, xi, 3, tail).unroll(xi)
        f.unroll(x, 2, hl.TailStrategy.GuardWithIf)
        assert list(np.asarray(f.realize([7]))) == [v * v + 1 for v in range(7)]


@pytest.mark.parametrize("tail", [hl.TailStrategy.ShiftInwards, hl.TailStrategy.GuardWithIf])
def test_a_producer_region_of_constant_or_bounded_size_unrolls(tail):
    """A producer computed per tile of 8 (plus its 2-wide window) has a region whose extent is
    `max - min + 1` of lets the tile loop sets: 10 once they are substituted, so unroll(x)
    needs no split (Halide's GPU gemm unrolls its per-k slivers of A and B this way). Under
    GuardWithIf the last tile's region is shorter: the copies are guarded by the extent's
    constant upper bound, as Halide unrolls such loops."""
    from pyhalide.ir_printer import stmt_to_string
    from pyhalide.lower import lower

    src = hl.Func("ur_src")
    src[x] = x * 3
    f = hl.Func("ur_f")
    f[x] = src[x] + src[x + 1] + src[x + 2]
    xo, xi = hl.Var("xo"), hl.Var("xi")
    f.split(x, xo, xi, 8, tail)
    src.compute_at(f, xo).unroll(x)
    text = stmt_to_string(lower([f]).stmt)
    assert "for<" not in text.split("produce ur_src")[1].split("consume ur_src")[0]  # the loop is gone
    assert text.count("ur_src[") >= 10 + 3
    got = np.asarray(f.realize([21]))
    np.testing.assert_array_equal(got, [3 * (3 * v + 3) for v in range(21)])


def test_schedule_json_round_trip_and_python_source():
    img = np.random.default_rng(2).integers(0, 65536, (40, 70), dtype=np.uint16)
    blur_x, blur_y = halide_blur(img)
    apply_halide_blur_schedule(blur_x, blur_y)
    text = schedule_to_json([blur_x, blur_y])
    source = blur_y.to_python_source() + blur_x.to_python_source()
    assert "blur_y.split(hl.Var('y'), hl.Var('y'), hl.Var('yi'), 32" in source
    assert "blur_x.store_at(hl.LoopLevel(blur_y, hl.Var('y'), -1))" in source

    fresh_x, fresh_y = halide_blur(img)
    apply_schedule_json([fresh_x, fresh_y], text)
    assert schedule_to_json([fresh_x, fresh_y]) == text
    out = hl.Buffer(hl.UInt(16), [68, 38])
    out.set_min([1, 1])
    fresh_y.realize(out)
    assert np.array_equal(np.asarray(out), blur_numpy(img))

    # the Python source, run against a fresh algorithm, gives the same schedule
    src_x, src_y = halide_blur(img)
    exec(source.replace("hl.LoopLevel(blur_y,", "hl.LoopLevel(blur_y_func,"),
         {"hl": hl, "blur_y": src_y, "blur_x": src_x, "blur_y_func": src_y})
    assert schedule_to_json([src_x, src_y]) == text


def test_rfactor_round_trips_through_json():
    rng = np.random.default_rng(3)
    a, b = rng.random((32, 32), dtype=np.float32), rng.random((32, 32), dtype=np.float32)
    prod, out, k = gemm(32, a, b)
    intm = apply_gemm_schedule(prod, out, k, vec=8)
    text = schedule_to_json([prod, out, intm])
    p2, o2, _ = gemm(32, a, b)
    apply_schedule_json([p2, o2], text)
    res = np.asarray(o2.realize([32, 32]))
    assert np.allclose(res, a @ b, rtol=1e-5, atol=1e-4)


def test_race_check_judges_a_producer_by_the_last_stage_that_reads_it():
    """g is read by both stages of out and computed at x, stored at y, in each; x is parallel in
    the pure stage only. Halide judges the race by the loops of the last stage that uses g (the
    update's, serial), runs it, and each parallel iteration writes its own elements: pyhalide
    accepts it too (found by the differential fuzz). With the update's x parallel, both refuse."""
    def build(parallel_update: bool):
        img = (np.arange(14 * 14, dtype=np.int32).reshape(14, 14) * 7) % 13
        g, out = hl.Func("lr_g"), hl.Func("lr_out")
        g[x, y] = hl.Buffer(img, "lr_in")[x, y] * 2 + y
        out[x, y] = g[x, y] + 1
        out[x, y] += g[x + 1, y] * 3
        out.parallel(y).parallel(x)
        out.update(0).reorder(x, y)
        if parallel_update:
            out.update(0).parallel(x)
        g.compute_at(out, x).store_at(out, y)
        return out, img

    out, img = build(False)
    g = img * 2 + np.arange(14)[:, None]
    want = g[:9, :5] + 1 + g[:9, 1:6] * 3
    np.testing.assert_array_equal(np.asarray(out.realize([5, 9])), want)
    out, _ = build(True)
    with pytest.raises(hl.CompileError, match=r"lr_g\S* is stored outside the parallel loop over lr_out\S*\.s1\.x"):
        out.realize([5, 9])


def test_a_producer_vectorized_along_its_whole_dimension_does_not_slide_there():
    """down is vectorized over all of x (no split), stored per row of up and computed per
    pixel: sliding it along up's x would leave a vector loop of varying extent (what the last
    pixel did not compute). Halide runs this schedule; pyhalide computes the whole small region
    each time instead (found by the differential fuzz)."""
    img = (np.arange(20 * 9, dtype=np.int32).reshape(9, 20) * 5) % 17
    inp = hl.Buffer(img, "vs_in")
    down, up = hl.Func("vs_down"), hl.Func("vs_up")
    down[x, y] = (inp[2 * x, y] + inp[2 * x + 1, y]) / 2
    up[x, y] = hl.select(x % 2 == 0, down[x / 2, y], down[x / 2 + 1, y] * 3) + x / 2
    down.vectorize(x).compute_at(up, x).store_at(up, y)
    got = np.asarray(up.realize([5, 6]))
    d = (img[:, 0::2] + img[:, 1::2]) // 2
    xs = np.arange(5)
    want = np.where(xs % 2 == 0, d[:6, xs // 2], d[:6, xs // 2 + 1] * 3) + xs // 2
    np.testing.assert_array_equal(got, want)


def test_a_whole_dimension_vectorized_inside_a_fused_loop_has_the_constant_width_its_lets_give():
    """f vectorized over all of x, computed per iteration of out's fused (x, y) loop: its x
    extent is `f.x.max - f.x.min + 1` of lets that are both the fused loop's x, so 1 once they
    are substituted (Halide runs this; pyhalide refused it, found by the differential fuzz)."""
    img = (np.arange(12 * 12, dtype=np.int32).reshape(12, 12) * 7) % 11
    f, out = hl.Func("fv_f"), hl.Func("fv_out")
    xy = hl.Var("fv_xy")
    f[x, y] = hl.Buffer(img, "fv_in")[x, y] * 3 + 1
    out[x, y] = f[x, y] * y
    f.vectorize(x).compute_at(out, xy)
    out.fuse(x, y, xy).parallel(xy)
    np.testing.assert_array_equal(np.asarray(out.realize([4, 10])), (img[:10, :4] * 3 + 1) * np.arange(10)[:, None])


def test_a_producer_computed_inside_a_guarded_split_stays_inside_the_input():
    """blur_y split by 16 with GuardWithIf over a 28-wide output, blur_x computed per x: the last
    tile's iterations past the end compute blur_x where the clamped x says (Halide clamps the
    split's variable inside the guarded loops, a promise_clamped), not past the input's edge."""
    img = (np.arange(20 * 30, dtype=np.int32).reshape(20, 30) * 7) % 13
    inp = hl.Buffer(img, "gw_in")
    bx, by = hl.Func("gw_bx"), hl.Func("gw_by")
    bx[x, y] = inp[x - 1, y] + inp[x, y] + inp[x + 1, y]
    by[x, y] = bx[x, y - 1] + bx[x, y] + bx[x, y + 1]
    by.split(x, xo, xi, 16, hl.TailStrategy.GuardWithIf)
    bx.compute_at(by, xi)
    out = hl.Buffer(hl.Int(32), [28, 18])
    out.set_min([1, 1])
    by.realize(out)
    b = img[:, :-2] + img[:, 1:-1] + img[:, 2:]
    np.testing.assert_array_equal(np.asarray(out), (b[:-2] + b[1:-1] + b[2:])[:18, :28])


def test_guarded_splits_of_many_consumers_ask_only_for_what_they_read():
    """camera_pipe with the denoised mosaic and its four deinterleaved planes computed per tile of
    the output, each split by GuardWithIf (16x8, the planes' regions clamped by the output's
    bounds): Halide runs it. The region of the raw input the pipeline reads, checked before it
    runs, was bounded loosely (rows from -8, where the first read is row 8): the tail's clamp
    `y = min(y.unguarded, y.max)` took y.max's lower bound, which loses the correlations among
    four consumers' regions; under its guard, y is y.unguarded (and still at most y.max)."""
    import apps

    app = apps.load("camera_pipe")
    inputs = app.inputs("small")
    built = app.build(hl, inputs)
    tile = app.tile_cells(hl, built, gpu=False)
    app.stages_per_tile(hl, built, ("denoised", "g_gr", "r_r", "b_b", "g_gb"), tile, gpu=False)
    built.funcs["curve"].compute_root()
    assert app.check(app.realize(hl, built), app.reference(inputs))


def test_a_func_computed_at_the_outermost_of_a_compute_with_parent():
    """f computed with g at y, p (read by both) computed at g's Var.outermost(): p is computed
    once, in g's one-iteration outermost loop, which f's outermost loop is fused into (f's runs
    at g's value, as its other fused loops), so both read it there."""
    from pyhalide import ir
    from pyhalide.ir_mutator import IRVisitor
    from pyhalide.lower import lower

    class Loops(IRVisitor):
        def visit_For(self, s):
            loops[s.name] = s
            self.visit_children(s)

    p, f, g = hl.Func("cwo_p"), hl.Func("cwo_f"), hl.Func("cwo_g")
    p[x, y] = x * 10 + y
    f[x, y] = p[x, y] + p[x + 1, y]
    g[x, y] = p[x, y + 1] * 2
    f.compute_root().compute_with(g, y)
    g.compute_root()
    p.compute_at(g, hl.Var.outermost())
    loops = {}
    lower([f, g], hook=lambda name, stmt: Loops().visit(stmt) if name == "schedule functions" else None)
    fused = loops["cwo_f.s0.__outermost"]
    assert isinstance(fused.min, ir.Variable) and fused.min.name == "cwo_g.s0.__outermost"
    a, b = hl.Buffer(hl.Int(32), [8, 6]), hl.Buffer(hl.Int(32), [5, 7])
    hl.Pipeline([f, g]).realize([a, b])
    yy, xx = np.mgrid[0:6, 0:8]
    np.testing.assert_array_equal(np.asarray(a), 20 * xx + 2 * yy + 10)
    yy, xx = np.mgrid[0:7, 0:5]
    np.testing.assert_array_equal(np.asarray(b), 20 * xx + 2 * yy + 2)


def _same_as_unscheduled(pipeline, output: str, sizes: list[int], schedule) -> None:
    """A pipeline of pyhalide.testing.differential, scheduled by schedule(funcs), computes what
    it computes unscheduled."""
    want = np.asarray(pipeline(hl).funcs[output].realize(sizes)).copy()
    funcs = pipeline(hl).funcs
    schedule(funcs)
    np.testing.assert_array_equal(np.asarray(funcs[output].realize(sizes)), want)


def test_a_producer_sliding_along_a_vectorized_updates_loop_keeps_its_window():
    """g is realized once per stage of out. Each Realize slides along its own loop and is folded
    by its own window: the pure stage's window (one element) once folded the update's too, whose
    vector iterations need two."""
    from pyhalide.testing.differential import _update_reads

    def schedule(f):
        f["upd_out"].update(0).vectorize(hl.Var("x"), 2)
        f["upd_g"].compute_at(f["upd_out"], hl.Var("x")).store_at(f["upd_out"], hl.Var("y"))

    _same_as_unscheduled(_update_reads, "upd_out", [1, 1], schedule)


def test_a_whole_loop_vectorized_inside_a_sliding_window_is_one_vector_wide():
    """blur_x's rows are split by 3 and the outer loop vectorized whole; blur_x slides down
    blur_y's y loop, so that loop's extent is `(y - select(first, y, y + 2) + 2) / 3 + 1`: its
    bound follows each arm of the select (1), where bounding the select alone found none
    (Halide runs this schedule)."""
    from pyhalide.testing.differential import _blur

    def schedule(f):
        x, y, yo, yi = (hl.Var(n) for n in ("x", "y", "yo", "yi"))
        f["blur_x"].split(y, yo, yi, 3, hl.TailStrategy.PredicateLoads).vectorize(yo)
        f["blur_y"].reorder(y, x)
        f["blur_x"].compute_at(f["blur_y"], y).store_at(f["blur_y"], x)

    _same_as_unscheduled(_blur, "blur_y", [3, 12], schedule)


def test_a_shift_inwards_window_smaller_than_its_factor_reads_only_what_halide_reads():
    """down's rows, unrolled by 4, are computed per 4 points of up's fused loop. A ShiftInwards
    split's last start is written from the region's max, not min + extent: the input check once
    bounded those two apart and asked for rows from -8 (Halide runs this schedule)."""
    from pyhalide.testing.differential import _resample

    def schedule(f):
        x, y, xo, xi, xy = (hl.Var(n) for n in ("x", "y", "xo", "xi", "xy"))
        f["down"].split(x, xo, xi, 7, hl.TailStrategy.GuardWithIf).unroll(xi).unroll(y, 4)
        f["up"].fuse(x, y, xy).unroll(xy, 4)
        f["down"].compute_at(f["up"], xy)

    _same_as_unscheduled(_resample, "up", [1, 12], schedule)


def test_a_reduction_vectorized_inside_a_vectorized_consumer_keeps_one_histogram_per_lane():
    """hist (an update, so computed inside out's vector loop, one copy per lane) is itself
    vectorized: its pure definition's 2-lane stores are a vector of an inner loop. Zipped with
    out's two lanes they zeroed one bin of each copy (garbage bins; found by the differential
    fuzz against Halide). Such a vector of vectors keeps the outer loop serial."""
    from pyhalide.testing.differential import _histogram

    def schedule(f):
        f["hist"].vectorize(hl.Var("x"), 2)
        f["hist_out"].vectorize(hl.Var("x"), 2)

    _same_as_unscheduled(_histogram, "hist_out", [3, 2], schedule)


@pytest.mark.parametrize("outer_factor", [2, 5])
def test_a_guarded_splits_outer_loop_shifted_inwards_reads_only_what_halide_reads(outer_factor):
    """g's x is split by 3 with a guard, then the outer loop by 2 (or 5) shifted inwards: on a
    one-pixel-wide output the shift starts x below 0, where g computes values no one reads. As
    in Halide, what those iterations read is not required of f (computed at root): the input
    check once asked for x from -3 (or -12) and refused a schedule Halide runs."""
    from pyhalide.testing.differential import _pointwise

    def schedule(f):
        x, y, xo, xi, xoo, xoi = (hl.Var(n) for n in ("x", "y", "xo", "xi", "xoo", "xoi"))
        f["pw_f"].compute_root().vectorize(y, 2)
        f["pw_g"].split(x, xo, xi, 3, hl.TailStrategy.GuardWithIf)
        f["pw_g"].split(xo, xoo, xoi, outer_factor, hl.TailStrategy.ShiftInwardsAndBlend)
        f["pw_g"].compute_at(f["pw_out"], y)

    _same_as_unscheduled(_pointwise, "pw_out", [1, 4], schedule)


def _hx_hy_by():
    """Two branches of one input; hy and by are computed per row of out, their y loops fused by
    compute_with (by over two rows: align_bounds), hx stored per row of out and computed per
    column of hy."""
    img = ((np.arange(20 * 28).reshape(20, 28) * 37) % 4000).astype(np.uint16)
    clamped = hl.BoundaryConditions.repeat_edge(hl.Buffer(img, "cw_in"))
    f, hx, hy, by, out = (hl.Func(n) for n in ("cw_f", "cw_hx", "cw_hy", "cw_by", "cw_out"))
    f[x, y] = hl.f32(clamped[x, y]) * 0.25
    by[x, y] = f[x, y - 1] + f[x, y] + f[x, y + 1]
    hx[x, y] = f[x - 2, y] - f[x + 2, y]
    hy[x, y] = hx[x, y - 2] + hx[x, y + 2]
    out[x, y] = hl.i32(by[x, y]) - hl.i32(hy[x, y] * 0.5)
    pad = np.pad(img.astype(np.float32) * 0.25, 2, mode="edge")  # [y + 2, x + 2]
    h = pad[:, :-4] - pad[:, 4:]
    want = (pad[1:-3, 2:-2] + pad[2:-2, 2:-2] + pad[3:-1, 2:-2]).astype(np.int32) - \
        ((h[0:-4] + h[4:]) * np.float32(0.5)).astype(np.int32)
    return out, hy, hx, by, want


def test_a_window_does_not_slide_past_iterations_a_compute_with_guard_skips():
    """hx slides along the y loop that compute_with fuses for hy and by. That loop starts a row
    before hy's (by's region is aligned to two rows), and the guard keeps hy, and hx with it,
    from that first iteration: the next one must compute hx's whole window, not its newest row
    (it read uninitialized rows; found by the schedule fuzz)."""
    out, hy, hx, by, want = _hx_hy_by()
    xo, xi, xio, xii = (hl.Var(n) for n in ("xo", "xi", "xio", "xii"))
    hy.compute_at(out, y).split(x, xo, xi, 9).split(xi, xio, xii, 1)
    hx.compute_at(hy, xio).store_at(out, y)
    by.compute_at(out, y).align_bounds(y, 2, 0).compute_with(hy, y, hl.LoopAlignStrategy.AlignEnd)
    np.testing.assert_array_equal(np.asarray(out.realize([28, 20])), want)


def test_a_window_slides_inside_a_guarded_tail(tmp_path):
    """A GuardWithIf tail's guard holds for a first run of iterations: every iteration before
    one that runs has run, so the producer still slides there."""
    out, hy, hx, by, want = _hx_hy_by()
    yo, yi = hl.Var("yo"), hl.Var("yi")
    out.split(y, yo, yi, 8, hl.TailStrategy.GuardWithIf)
    hy.compute_at(out, yi)
    hx.compute_at(out, yi).store_at(out, yo)
    np.testing.assert_array_equal(np.asarray(out.realize([28, 20])), want)
    out.compile_to_lowered_stmt(str(tmp_path / "out.stmt"), [])
    stmt = (tmp_path / "out.stmt").read_text()
    assert re.search(r"let cw_hx(\$\d+)?\.s0\.y\.min = select\(", stmt), "hx slides along yi"
