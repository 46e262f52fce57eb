"""Schedules the real Halide runs that pyhalide once refused or failed to compile, found by the
differential fuzzer (tests/test_differential_fuzz.py). Each input here is exactly as large as
the algorithm reads, so a schedule that made pyhalide read past it would be refused; the results
are checked against numpy, so these run without Halide installed."""

from __future__ import annotations

import re

import numpy as np
import pytest

import pyhalide as hl

x, y = hl.Var("x"), hl.Var("y")


def _downsample(rows: int):
    """down(x, y) = mean of two input columns, up(x, y) reads down at x / 2 and x / 2 + 1."""
    img = np.arange(4 * rows, dtype=np.int32).reshape(rows, 4) * 7 % 50
    inp = hl.Buffer(img, "down_in")
    down, up = hl.Func("down"), hl.Func("up")
    down[x, y] = (inp[2 * x, y] + inp[2 * x + 1, y]) / 2
    up[x, y] = down[x / 2, y] + down[x / 2 + 1, y] * 3
    want = (img[:, 0:4:2] + img[:, 1:4:2]) // 2
    return down, up, (want[:, :1] + want[:, 1:2] * 3)


def test_unrolling_an_unrolled_loop_again_rounds_up_inside_the_first_split():
    """As Halide resolves an Auto tail: a loop that descends from the outer loop of a ShiftInwards
    split at least as large rounds up (that split already keeps it inside the region); shifting
    it inwards again moved a 2-row region to rows -2 and -1."""
    down, up, want = _downsample(2)
    down.unroll(y, 2).unroll(y, 2).compute_root()
    np.testing.assert_array_equal(np.asarray(up.realize([1, 2])), want)


def test_vectorize_then_unroll_by_a_smaller_factor_stays_in_the_region():
    """Halide's own example of the rule: f.vectorize(x, 8).unroll(x, 4)."""
    img = np.arange(12, dtype=np.int32)
    inp = hl.Buffer(img, "vu_in")
    f, g = hl.Func("vu_f"), hl.Func("vu_g")
    f[x] = inp[x] * 2
    g[x] = f[x] + 1
    f.compute_root().vectorize(x, 8).unroll(x, 4)
    np.testing.assert_array_equal(np.asarray(g.realize([12])), img * 2 + 1)


def _running_sum(width: int, height: int):
    img = (np.arange(width * height, dtype=np.int32).reshape(height, width) * 5) % 17
    inp = hl.Buffer(img, "scan_in")
    s, out = hl.Func("scan"), hl.Func("scan_out")
    r = hl.RDom([hl.Range(1, width - 1)], "r")
    s[x, y] = inp[x, y]
    s[r.x, y] = s[r.x - 1, y] + s[r.x, y]
    out[x, y] = s[x + 1, y] - s[x, y]
    sums = np.cumsum(img, axis=1, dtype=np.int32)
    return s, out, sums[:, 1:] - sums[:, :-1]


def test_a_split_by_one_of_a_fused_loop_keeps_the_rows_of_the_region():
    """A split by 1 has no tail (Halide neither shifts nor guards it), and the fused loop's
    coordinates, fused / extent and fused % extent, stay inside the region (their bounds, for a
    divisor known to be positive, were taken as if it could be negative: row -14)."""
    for tail in (hl.TailStrategy.Auto, hl.TailStrategy.ShiftInwards, hl.TailStrategy.GuardWithIf):
        s, out, want = _running_sum(14, 1)
        xy, xo, xi = hl.Var("xy"), hl.Var("xo"), hl.Var("xi")
        s.fuse(x, y, xy).split(xy, xo, xi, 1, tail)
        np.testing.assert_array_equal(np.asarray(out.realize([2, 1])), want[:, :2])


def test_a_func_with_an_update_left_unscheduled_is_computed_inside_its_consumer(tmp_path):
    """Halide cannot inline a Func with an update: it computes it in the innermost loop of the
    stage that uses it (here per output pixel, so a pixel's row of sums is all it needs)."""
    s, out, want = _running_sum(9, 3)
    np.testing.assert_array_equal(np.asarray(out.realize([8, 3])), want)
    out.compile_to_lowered_stmt(str(tmp_path / "scan.stmt"), [])
    nest = (tmp_path / "scan.stmt").read_text()
    assert nest.index(f"({out.name()}.s0.x,") < nest.index(f"produce {s.name()} {{")


def test_a_func_realized_in_a_serial_and_a_parallel_loop_compiles():
    """g is realized twice (once per stage of out that reads it); the parallel loop around the
    second realization captured the first one's pointer, which LLVM rejected."""
    img = (np.arange(8 * 7, dtype=np.int32).reshape(7, 8) * 3) % 11
    inp = hl.Buffer(img, "two_in")
    g, out = hl.Func("twice_g"), hl.Func("twice_out")
    g[x, y] = inp[x, y] * 2 + y
    out[x, y] = g[x, y] + 1
    out[x, y] += g[x + 1, y] * 3
    g.parallel(x).compute_at(out, y)
    out.update(0).parallel(y).vectorize(x, 4)
    got = np.asarray(out.realize([4, 7]))
    gv = img * 2 + np.arange(7, dtype=np.int32)[:, None]
    np.testing.assert_array_equal(got, gv[:, :4] + 1 + gv[:, 1:5] * 3)


def _chain(rows: int):
    img = (np.arange(4 * rows, dtype=np.int32).reshape(rows, 4) * 7) % 31
    inp = hl.Buffer(img, "chain_in")
    f, g, out = hl.Func("chain_f"), hl.Func("chain_g"), hl.Func("chain_out")
    f[x, y] = inp[x, y] * 3
    g[x, y] = f[x, y] + 1
    out[x, y] = g[x, y] - y
    return f, g, out, img * 3 + 1 - np.arange(rows, dtype=np.int32)[:, None]


def test_a_split_past_the_region_does_not_grow_what_producers_compute():
    """As in Halide: g split by 7 over 5 rows runs past its region (RoundUp) or before it
    (ShiftInwards); f, computed outside g's loops, is computed over the 5 rows g needs, and what
    g's extra rows read of f comes from f's storage, uncomputed, into rows nobody reads. f's
    input has exactly 5 rows."""
    yo, yi = hl.Var("yo"), hl.Var("yi")
    for tail in (hl.TailStrategy.RoundUp, hl.TailStrategy.ShiftInwards):
        for at_root in (True, False):
            f, g, out, want = _chain(5)
            g.split(y, yo, yi, 7, tail)
            g.compute_root() if at_root else g.compute_at(out, y)
            f.compute_root()
            np.testing.assert_array_equal(np.asarray(out.realize([4, 5])), want)


def test_a_split_past_the_region_still_may_not_read_past_an_input():
    """What the extra rows read of an input is checked as Halide checks it: refused."""
    yo, yi = hl.Var("yo"), hl.Var("yi")
    f, g, out, _ = _chain(5)
    f.split(y, yo, yi, 7, hl.TailStrategy.RoundUp).compute_root()
    with pytest.raises(hl.HalideError, match="chain_in"):
        out.realize([4, 5])


def test_rfactor_of_fused_rvars_and_after_fusing_pure_vars():
    """rfactor after fuse, as Halide allows: of the RVar two RVars fused into (u then runs over
    the fused reduction), and of an RVar of a stage whose pure Vars were fused."""
    img = (np.arange(7 * 9, dtype=np.int32).reshape(7, 9) * 11) % 64
    inp = hl.Buffer(img.astype(np.uint8), "rf_in")
    r = hl.RDom([hl.Range(0, 9), hl.Range(0, 7)], "r")
    hist = hl.Func("rf_hist")
    hist[x] = 0
    hist[hl.cast(hl.Int(32), inp[r.x, r.y]) / 8] += 1
    fused, u = hl.RVar("fused"), hl.Var("u")
    intm = hist.update(0).fuse(r.x, r.y, fused).rfactor(fused, u)
    intm.compute_root().update(0).parallel(u)
    np.testing.assert_array_equal(np.asarray(hist.realize([8])), np.bincount(img.ravel() // 8, minlength=8))

    a = (np.arange(5 * 6, dtype=np.int32).reshape(5, 6) % 7)
    b = (np.arange(6 * 4, dtype=np.int32).reshape(6, 4) % 5)
    A, B = hl.Buffer(a, "rf_a"), hl.Buffer(b, "rf_b")
    k = hl.RDom([hl.Range(0, 6)], "k")
    mm = hl.Func("rf_mm")
    mm[x, y] = 0
    mm[x, y] += A[k.x, y] * B[x, k.x]
    xy = hl.Var("xy")
    mm.update(0).fuse(x, y, xy)
    mm.update(0).rfactor(k.x, u).compute_at(mm, k.x)
    np.testing.assert_array_equal(np.asarray(mm.realize([4, 5])), a @ b)


def test_predicate_loads_and_round_up_and_blend_write_the_whole_last_block():
    """Halide predicates only the loads of PredicateLoads and RoundUpAndBlend splits: the loop
    writes its whole last block, so a realize of 1 row grows the output to the 6 rows the split
    writes (and returns the 1 asked for). Everything upstream is then computed for 6 rows: g's
    unroll by 3 fits, instead of shifting to rows -2..0 and reading the input there."""
    yo, yi = hl.Var("yo"), hl.Var("yi")
    for tail in (hl.TailStrategy.PredicateLoads, hl.TailStrategy.RoundUpAndBlend):
        f, g, out, want = _chain(6)
        out.split(y, yo, yi, 6, tail)
        g.unroll(y, 3).compute_root()
        got = out.realize([4, 1])
        assert got.dim(1).extent() == 1
        np.testing.assert_array_equal(np.asarray(got), want[:1])


def test_shift_inwards_and_blend_of_a_pure_definition_shifts_inwards():
    """The blend keeps an update from applying twice; a pure definition shifts as ShiftInwards
    does (here by more than the extent: rows -2..0 of g, which reads no input)."""
    yo, yi = hl.Var("yo"), hl.Var("yi")
    f, g, out, want = _chain(1)
    g.split(y, yo, yi, 3, hl.TailStrategy.ShiftInwardsAndBlend).compute_root()
    f.compute_root()
    np.testing.assert_array_equal(np.asarray(out.realize([4, 1])), want)


def test_a_fused_and_rounded_up_producer_does_not_slide_over_its_own_rows():
    """The producer is stored at root and computed per pixel of the reduction; fusing its x and y
    and rounding the fused loop up computes a second row per pixel, so its rows may not slide
    and fold into one (the second row overwrote the first: wrong histograms)."""
    img = (np.arange(6 * 8, dtype=np.int32).reshape(6, 8) * 13) % 41
    inp = hl.Buffer(img.astype(np.uint8), "fold_in")
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    r = hl.RDom([hl.Range(0, 8), hl.Range(0, 6)], "r")
    hist = hl.Func("fold_hist")
    hist[x] = 0
    hist[hl.clamp(hl.i32(clamped[r.x, r.y]) % 16, 0, 15)] += 1
    fused, fo, fi = hl.Var("fused"), hl.Var("fo"), hl.Var("fi")
    c = clamped  # the boundary condition's Func, scheduled like any other
    c.compute_at(hist, r.x).store_root()
    c.fuse(c.args()[0], c.args()[1], fused).split(fused, fo, fi, 2, hl.TailStrategy.RoundUp)
    np.testing.assert_array_equal(np.asarray(hist.realize([16])), np.bincount(img.ravel() % 16, minlength=16))


def test_storage_outside_a_gpu_loop_computed_inside_it_is_refused(tmp_path):
    """As Halide refuses it: each GPU thread would update the shared storage at once (the
    emulated device showed the race as wrong sums)."""
    img = np.arange(6 * 8, dtype=np.int32).reshape(6, 8)
    inp = hl.Buffer(img, "gpu_race_in")
    f, out = hl.Func("gpu_race_f"), hl.Func("gpu_race_out")
    r = hl.RDom([hl.Range(0, 4)], "r")
    f[x, y] = inp[x, y]
    f[r, y] = f[r, y] * 3 + f[r + 1, y]
    out[x, y] = f[x, y] + f[x + 1, y]
    xb, xt = hl.Var("xb"), hl.Var("xt")
    out.bound(x, 0, 6).gpu_tile(x, xb, xt, 2)
    f.compute_at(out, xt).store_at(out, y)
    with pytest.raises(hl.HalideError, match="gpu_race_f is stored outside the gpu_block loop"):
        out.compile_to_lowered_stmt(str(tmp_path / "race.stmt"), [], target=hl.Target("host-cuda"))


def test_a_producer_computed_per_vector_of_a_fused_loop_reads_only_its_rows():
    """mm is computed per 2-wide vector of out's fused (x, y) loop: one or two rows of mm each
    time. Its row loop, for (y, min, (max - min) + 1), ends at max; worked out as min + extent - 1,
    the two copies of min varied on their own and the check asked for row 18 of a 10-row input."""
    a = (np.arange(10 * 7, dtype=np.int32).reshape(10, 7) * 5) % 9
    b = (np.arange(7 * 11, dtype=np.int32).reshape(7, 11) * 3) % 8
    A, B = hl.Buffer(a, "fv_a"), hl.Buffer(b, "fv_b")
    k = hl.RDom([hl.Range(0, 7)], "k")
    mm, out = hl.Func("fv_mm"), hl.Func("fv_out")
    mm[x, y] = 0
    mm[x, y] += A[k.x, y] * B[x, k.x]
    out[x, y] = mm[x, y] + 1
    xy = hl.Var("xy")
    out.fuse(x, y, xy).vectorize(xy, 2)
    np.testing.assert_array_equal(np.asarray(out.realize([11, 10])), a @ b + 1)


def test_a_producer_read_by_two_stages_is_stored_where_each_stage_stores_it():
    """compute_at(out, x) with store_at(out, y) (or store_root) where both of out's stages read g:
    as Halide does, g is computed in each stage's x loop and stored at each stage's y loop (or
    once at root for both)."""
    img = (np.arange(12 * 11, dtype=np.int32).reshape(11, 12) * 7) % 23
    for store in ("y", "root"):
        inp = hl.Buffer(img, "two_stage_in")
        g, out = hl.Func("two_stage_g"), hl.Func("two_stage_out")
        g[x, y] = inp[x, y] * 2 + y
        out[x, y] = g[x, y] + 1
        out[x, y] += g[x + 1, y] * 3
        g.compute_at(out, x)
        g.store_at(out, y) if store == "y" else g.store_root()
        gv = img * 2 + np.arange(11, dtype=np.int32)[:, None]
        np.testing.assert_array_equal(np.asarray(out.realize([11, 10])), gv[:10, :11] + 1 + gv[:10, 1:12] * 3)


def test_a_shifted_split_of_a_stored_func_does_not_recompute_it_from_stale_values():
    """blur_x, stored at root and computed per column of blur_y, is split by 2: ShiftInwards over
    a 1-column region, so each iteration also recomputes the previous column, into the shared
    storage. Its input Func (computed per column too) must then cover that column as well, or
    stale values overwrite what the last iteration stored. Halide 21 gets 1044 pixels wrong here;
    found by the extended schedule fuzz."""
    img = (np.arange(9 * 11, dtype=np.uint16).reshape(9, 11) * 37) % 1000
    inp = hl.Buffer(img, "stale_in")
    rep, blur_x, blur_y = hl.Func("stale_rep"), hl.Func("stale_bx"), hl.Func("stale_by")
    rep[x, y] = hl.BoundaryConditions.repeat_edge(inp)[x, y]
    blur_x[x, y] = (rep[x - 1, y] + rep[x, y] + rep[x + 1, y]) / 3
    blur_y[x, y] = (blur_x[x, y - 1] + blur_x[x, y] + blur_x[x, y + 1]) / 3
    blur_x.compute_at(blur_y, x).store_root().split(x, hl.Var("xo"), hl.Var("xi"), 2)
    rep.compute_at(blur_y, x)
    pad = np.pad(img.astype(np.int64), 1, mode="edge")
    bx = ((pad[:, :-2] + pad[:, 1:-1] + pad[:, 2:]) % 65536) // 3
    want = ((bx[:-2] + bx[1:-1] + bx[2:]) % 65536) // 3
    np.testing.assert_array_equal(np.asarray(blur_y.realize([11, 9])), want)


def test_a_bound_by_an_input_size_runs_and_refuses_to_become_a_record():
    """Halide's interpolate generator bounds its output by the input's width and height: a
    bound over Exprs, fine to run; a schedule record holds constants only, so it says why not."""
    x, y = hl.Var("x"), hl.Var("y")
    im = hl.ImageParam(hl.Float(32), 2, "sb_in")
    out = hl.Func("sb_out")
    out[x, y] = im[x, y] * 2
    out.bound(x, 0, im.width()).bound_extent(y, im.height())
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    im.set(hl.Buffer(data))
    np.testing.assert_array_equal(np.asarray(out.realize([4, 3])), data * 2)
    with pytest.raises(hl.HalideError, match=r"Bounds given for sb_out in x \(from 0 to 3\) do not cover"):
        out.realize([5, 3])
    with pytest.raises(hl.HalideError, match="bounds a Var by an Expr that is not a constant"):
        hl.Pipeline(out).schedule_to_json()
    from pyhalide.schedule import schedule_to_python

    assert schedule_to_python([out]).splitlines() == [
        f"# sb_out.bound(hl.Var('{v}'), ...) over Exprs: not written as source" for v in "xy"]


def test_two_funcs_given_one_name_are_two_funcs():
    """As in Halide, a second Func given a name is named `name$1` when made (its local_laplacian
    generator names every pyramid level's upsampling `upy`), so loop levels and records name
    each one; records name them as a fresh process would (see Pipeline.funcs_by_name)."""
    x = hl.Var("x")
    given = hl.Func("same_level")
    levels = [given]
    levels[0][x] = x * 3
    for _ in range(2):
        up = hl.Func("same_level")
        up[x] = levels[-1][x] + levels[-1][x + 1]
        levels.append(up)
    assert all(re.fullmatch(r"same_level\$\d+", f.name()) for f in levels[1:])
    assert len({f.name() for f in levels}) == 3
    levels[0].compute_root()
    levels[1].compute_root().vectorize(x, 4)
    want = np.array([12 * (i + 1) for i in range(8)])  # 3x + 3(x+1) + 3(x+1) + 3(x+2)
    np.testing.assert_array_equal(np.asarray(levels[2].realize([8])), want)
    extra = hl.Func("same_extra")
    extra[x] = x + 7
    top = hl.Func("same_level")
    top[x] = levels[2][x] + extra[x]
    extra.compute_at(top, x)  # top's own loop: its name says which same_level
    np.testing.assert_array_equal(np.asarray(top.realize([8])), want + np.arange(8) + 7)
    record = hl.Pipeline(top).schedule_to_json()
    assert hl.Pipeline(top).funcs_by_name() == dict(zip(["same_level", "same_extra", "same_level$1",
                                                         "same_level$2", "same_level$3"],
                                                        [top, extra, levels[2], levels[1], levels[0]]))
    assert '"func": "same_level", "kind": "at"' in record  # extra is computed at top's loop
    # the same program built again (names same_level$4...): the record applies to it as it is
    again = [hl.Func("same_level")]
    again[0][x] = x * 3
    for _ in range(2):
        up = hl.Func("same_level")
        up[x] = again[-1][x] + again[-1][x + 1]
        again.append(up)
    extra2, top2 = hl.Func("same_extra"), hl.Func("same_level")
    extra2[x] = x + 7
    top2[x] = again[2][x] + extra2[x]
    hl.Pipeline(top2).apply_schedule_json(record)
    assert hl.Pipeline(top2).schedule_to_json() == record
    assert extra2._schedule.compute_level.func_name == top2.name()
    np.testing.assert_array_equal(np.asarray(top2.realize([8])), want + np.arange(8) + 7)


def test_a_whole_loop_vectorized_in_a_narrowed_tail_gets_its_bound_as_lanes(tmp_path):
    """vectorize(xy) with no factor, on a producer computed per tile of a PredicateLoads split:
    Halide's region is the whole tile (6 points); pyhalide narrows it in the last tile, where its
    extent is `max(...)`, no longer a constant. The loop gets its bound's 6 lanes, guarded."""
    img = (np.arange(11 * 3, dtype=np.int32).reshape(3, 11) * 7) % 23  # f covers the last tile
    inp = hl.Buffer(img, "tail_vec_in")
    f, g = hl.Func("tail_vec_f"), hl.Func("tail_vec_g")
    xy, xo, xi = hl.Var("xy"), hl.Var("xo"), hl.Var("xi")
    f[x, y] = inp[x, y] * 3
    g[x, y] = f[x, y] + f[x + 1, y]
    g.split(x, xo, xi, 5, hl.TailStrategy.PredicateLoads)
    f.compute_at(g, xo).fuse(x, y, xy).vectorize(xy)
    np.testing.assert_array_equal(np.asarray(g.realize([7, 3])), img[:, :7] * 3 + img[:, 1:8] * 3)
    g.compile_to_lowered_stmt(str(tmp_path / "g.stmt"), [])
    stmt = (tmp_path / "g.stmt").read_text()
    assert "let tail_vec_f.s0.x = ramp(tail_vec_f.x.min, 1, 6)" in stmt, "steady tiles compute f as one vector"


def test_a_fused_loop_of_an_update_rounds_up():
    """fuse(x, y, xy).split(xy, ..., RoundUp) in an update, as Halide runs it: past its end the
    fused loop only moves past the last row, so no point is updated twice; the rows it adds are
    computed (the input covers them) and not read."""
    img = (np.arange(5 * 4, dtype=np.int32).reshape(4, 5) * 7) % 23  # one more row than the output
    inp = hl.Buffer(img, "fused_up_in")
    f, g = hl.Func("fused_up_f"), hl.Func("fused_up_g")
    xy, o, i = hl.Var("xy"), hl.Var("o"), hl.Var("i")
    f[x, y] = x + y
    f[x, y] = f[x, y] * 2 + inp[x, y]
    g[x, y] = f[x, y] + 1
    f.compute_root().update().fuse(x, y, xy).split(xy, o, i, 4, hl.TailStrategy.RoundUp)
    xs, ys = np.meshgrid(np.arange(5), np.arange(3))
    np.testing.assert_array_equal(np.asarray(g.realize([5, 3])), (xs + ys) * 2 + img[:3] + 1)


def test_an_update_split_past_the_region_does_not_grow_its_pure_stage():
    """As in Halide: a running sum along x whose update is vectorized along y by 8 (RoundUp)
    over the one row each consumer iteration needs. The pure stage computes that row alone (its
    input has exactly 2 rows); the update's extra lanes read and write the Func's storage,
    uncomputed, in rows nobody reads. Found by the differential fuzz, with a specialization."""
    img = (np.arange(2 * 8, dtype=np.int32).reshape(2, 8) * 5) % 17
    inp = hl.Buffer(img, "run_in")
    scan, out = hl.Func("run"), hl.Func("run_out")
    r = hl.RDom([hl.Range(1, 7)], "r")
    selector = hl.Param(hl.Int(32), "selector")
    scan[x, y] = inp[x, y]
    scan[r.x, y] = scan[r.x - 1, y] + scan[r.x, y]
    out[x, y] = scan[x + 1, y] - scan[x, y]
    scan.update(0).vectorize(y, 8)
    scan.update(0).specialize(selector >= 2).vectorize(y, 4)
    scan.compute_at(out, x)
    sums = np.cumsum(img, axis=1, dtype=np.int32)
    for value in (0, 3):
        selector.set(value)
        np.testing.assert_array_equal(np.asarray(out.realize([7, 2])), sums[:, 1:] - sums[:, :-1])
