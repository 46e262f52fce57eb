"""Scheduling features beyond loop structure: atomic updates, specialize, wrappers (in_),
sliding window and storage folding, bound / align_bounds / reorder_storage, fp_contract."""

import re

import numpy as np
import pytest

import pyhalide as hl

x, y = hl.Var("x"), hl.Var("y")


def test_parallel_histogram_needs_atomic_and_then_matches():
    img = np.random.default_rng(0).integers(0, 256, 20000, dtype=np.uint8)
    inp = hl.Buffer(img, name="hist_in")
    r = hl.RDom([(0, img.size)])
    h = hl.Func("hist_atomic")
    h[x] = 0
    h[hl.i32(inp[r])] += 1
    with pytest.raises(hl.HalideError, match=r"can't parallelize RVar .* \(a race\)"):
        h.update(0).parallel(r)
    h.update(0).atomic().parallel(r, 500)
    assert np.array_equal(np.asarray(h.realize([256])), np.bincount(img, minlength=256))


def test_atomic_float_maximum():
    data = np.random.default_rng(1).random(5000).astype(np.float32)
    buf = hl.Buffer(data, name="amax_in")
    r = hl.RDom([(0, data.size)])
    m = hl.Func("amax")
    m[x] = -1.0
    m[r.x % 4] = hl.max(m[r.x % 4], buf[r])
    m.update(0).atomic().parallel(r, 100)
    expected = [data[k::4].max() for k in range(4)]
    assert np.array_equal(np.asarray(m.realize([4])), np.array(expected, np.float32))


def test_specialize_picks_the_schedule_by_condition(tmp_path):
    inp = hl.ImageParam(hl.Float(32), 2, "spec_in")
    f = hl.Func("specialized")
    f[x, y] = inp[x, y] * 2.0 + 1.0
    f.specialize(inp.width() % 16 == 0).vectorize(x, 16)
    f.specialize(inp.width() >= 4).vectorize(x, 4, hl.TailStrategy.GuardWithIf)
    for w in (32, 10, 3):
        a = np.random.default_rng(w).random((5, w), dtype=np.float32)
        inp.set(hl.Buffer(a))
        assert np.array_equal(np.asarray(f.realize([w, 5])), a * 2 + 1)
    stmt = tmp_path / "spec.stmt"
    f.compile_to_lowered_stmt(str(stmt))
    assert "((spec_in.extent.0 % 16) == 0)" in stmt.read_text()


def test_specialized_schedules_are_not_json():
    from pyhalide.schedule import schedule_to_json

    p = hl.Param(hl.Int(32), "spec_p", 3)
    f = hl.Func("spec_json")
    f[x] = x + p
    f.specialize(p > 2).vectorize(x, 4)
    with pytest.raises(hl.HalideError, match="specialize"):
        schedule_to_json([f])


def test_wrappers_for_one_consumer_and_for_all():
    f = hl.Func("wrapped")
    f[x, y] = x + y * 3
    g = hl.Func("wrap_consumer")
    g[x, y] = f[x, y] + f[x + 1, y]
    h = hl.Func("wrap_out")
    h[x, y] = g[x, y] * 2 + f[x, y]
    f.compute_root()
    g.compute_root()
    w = f.in_(g)
    assert w.name() == "wrapped_in_wrap_consumer"
    w.compute_at(g, y).vectorize(x, 4)
    xs, ys = np.meshgrid(np.arange(10), np.arange(4))
    expected = ((xs + ys * 3) + (xs + 1 + ys * 3)) * 2 + (xs + ys * 3)
    assert np.array_equal(np.asarray(h.realize([10, 4])), expected)
    f.in_().compute_root()
    assert np.array_equal(np.asarray(h.realize([10, 4])), expected)
    with pytest.raises(hl.HalideError, match="does not call"):
        f.in_(h.in_())


def test_sliding_window_folds_storage(tmp_path):
    img = np.random.default_rng(2).integers(0, 65536, (70, 40), dtype=np.uint16)
    inp = hl.Buffer(img, name="slide_in")
    bx, by = hl.Func("slide_x"), hl.Func("slide_y")
    bx[x, y] = (inp[x - 1, y] + inp[x, y] + inp[x + 1, y]) / 3
    by[x, y] = (bx[x, y - 1] + bx[x, y] + bx[x, y + 1]) / 3
    bx.store_root().compute_at(by, y)
    out = hl.Buffer(hl.UInt(16), [38, 68])
    out.set_min([1, 1])
    by.realize(out)
    b = ((img[:, :-2] + img[:, 1:-1] + img[:, 2:]) // 3).astype(np.uint16)
    assert np.array_equal(np.asarray(out), ((b[:-2] + b[1:-1] + b[2:]) // 3).astype(np.uint16))
    stmt = tmp_path / "slide.stmt"
    by.compile_to_lowered_stmt(str(stmt))
    text = stmt.read_text()
    assert "allocate slide_x[uint16 * slide_x.extent.0 * 4]" in text  # 3 rows live, folded to 4
    assert "select((slide_y.s0.y > slide_y.min.1)" in text  # later rows compute one new row


def test_fold_storage_sets_the_fold_where_the_window_fits_and_refuses_one_too_small(tmp_path):
    img = np.random.default_rng(3).integers(0, 1000, (40, 30)).astype(np.int32)

    def build():
        inp = hl.BoundaryConditions.repeat_edge(hl.Buffer(img, "fold_in"))
        bx, by = hl.Func("fold_x"), hl.Func("fold_y")
        bx[x, y] = inp[x - 1, y] + inp[x, y] + inp[x + 1, y]
        by[x, y] = bx[x, y - 1] + bx[x, y] + bx[x, y + 1]
        return bx, by

    _, by = build()
    want = np.asarray(by.realize([30, 40]))
    for extent, rows in ((3, 3), (5, 5), (2, None)):
        bx, by = build()
        bx.store_root().compute_at(by, y).fold_storage(y, extent)
        if rows is None:
            with pytest.raises(hl.HalideError, match=rf"{re.escape(bx.name())}.fold_storage\(y, 2\): each iteration "
                                                      rf"of loop {re.escape(by.name())}.s0.y needs 3 coordinates of y"):
                by.realize([30, 40])
            continue
        assert np.array_equal(np.asarray(by.realize([30, 40])), want)
        stmt = tmp_path / f"fold{extent}.stmt"
        by.compile_to_lowered_stmt(str(stmt))
        assert f"allocate {bx.name()}[int32 * {bx.name()}.extent.0 * {rows}]" in stmt.read_text()
        copy = build()[1]  # the directive survives the schedule's JSON round trip
        hl.Pipeline(copy).apply_schedule_json(hl.Pipeline(by).schedule_to_json())
        assert np.array_equal(np.asarray(copy.realize([30, 40])), want)
    bx, by = build()  # not sliding (computed at root): stored whole, computed the same
    bx.compute_root().fold_storage(y, 2)
    assert np.array_equal(np.asarray(by.realize([30, 40])), want)
    with pytest.raises(hl.HalideError, match=r"fold_storage\(y, \.\.\.\): the extent must be an integer in "
                                              r"\[1, 2147483647\], got 0\.5"):
        bx.fold_storage(y, 0.5)


def test_bound_and_align_bounds():
    f = hl.Func("bounded_src")
    f[x] = x * 2
    g = hl.Func("bounded")
    g[x] = f[x] + f[x + 3]
    f.compute_root().align_bounds(x, 8)
    g.bound(x, 0, 10)
    assert list(np.asarray(g.realize([10]))) == [4 * v + 6 for v in range(10)]
    with pytest.raises(hl.HalideError, match="Bounds given for bounded in x"):
        g.realize([12])


def test_align_extent_keeps_the_min_and_rounds_the_extent_up(capsys):
    """g over [0, 10) needs f over [1, 12]: align_extent(x, 8) computes [1, 16], where
    align_bounds(x, 8) would compute [0, 15]; a schedule record keeps it."""
    def pipeline():
        f, g = hl.Func("extent_src"), hl.Func("extent_out")
        f[x] = x * 2
        g[x] = f[x + 1] + f[x + 3]
        return f, g

    f, g = pipeline()
    f.compute_root().align_extent(x, 8).trace_realizations()
    assert list(np.asarray(g.realize([10]))) == [4 * v + 8 for v in range(10)]
    assert "Begin realization extent_src.0(1, 16)" in capsys.readouterr().out
    f2, g2 = pipeline()
    hl.Pipeline(g2).apply_schedule_json(hl.Pipeline(g).schedule_to_json())
    assert f2._schedule.bounds == {"x": ("align_extent", 8, None)}
    f3, g3 = pipeline()
    f3.align_extent(x, 4)
    assert list(np.asarray(g3.realize([3]))) == [8, 12, 16]
    assert re.search(r"align the bounds of dimension x of function extent_src\S* to have modulus/remainder "
                     r"\[4, \(undefined\)\]", capsys.readouterr().out)
    with pytest.raises(hl.HalideError, match=r"align_extent of x: the modulus must be positive, got 0"):
        f3.align_extent(x, 0)


def test_reorder_storage_changes_layout_not_results(tmp_path):
    f = hl.Func("col_major")
    f[x, y] = x * 10 + y
    g = hl.Func("reads_col_major")
    g[x, y] = f[x, y] + 1
    f.compute_root().reorder_storage(y, x)
    xs, ys = np.meshgrid(np.arange(5), np.arange(3))
    assert np.array_equal(np.asarray(g.realize([5, 3])), xs * 10 + ys + 1)
    stmt = tmp_path / "cm.stmt"
    g.compile_to_lowered_stmt(str(stmt))
    # x now has the stride of a whole column (the extent of y); y is innermost
    assert "col_major[(((col_major.s0.x - reads_col_major.min.0) * col_major.extent.1) + (col_major.s0.y" in \
        stmt.read_text()


def test_fp_contract_uses_fused_multiply_add(tmp_path):
    a = hl.Buffer(np.random.default_rng(3).random(256, dtype=np.float32), name="fma_a")
    f = hl.Func("fma")
    f[x] = a[x] * 3.0 + 1.0
    f.vectorize(x, 16)
    exact = np.asarray(f.realize([256])).copy()
    assert np.array_equal(exact, a.to_numpy() * np.float32(3) + np.float32(1))
    f.compile_jit(hl.Target("host-fp_contract"))
    fused = np.asarray(f.realize([256]))
    assert np.allclose(fused, exact, rtol=1e-6)
    asm = tmp_path / "fma.s"
    f.compile_to_assembly(str(asm))
    assert "vfmadd" in asm.read_text()
    g = hl.Func("fma2")  # the target given to compile_to_assembly counts too
    g[x] = a[x] * 3.0 + 1.0
    g.vectorize(x, 16)
    g.compile_to_assembly(str(asm), [])
    assert "vfmadd" not in asm.read_text()
    g.compile_to_assembly(str(asm), [], "fma2", hl.Target("host-fp_contract"))
    assert "vfmadd" in asm.read_text()


def test_three_dimensional_tile_and_bound_extent():
    c = hl.Var("c")
    xo, yo, co, xi, yi, ci = (hl.Var(n) for n in ("xo", "yo", "co", "xi", "yi", "ci"))
    f = hl.Func("tile3")
    f[x, y, c] = x + 10 * y + 100 * c
    f.tile(x, y, c, xo, yo, co, xi, yi, ci, 4, 3, 2, hl.TailStrategy.GuardWithIf).vectorize(xi)
    out = np.asarray(f.realize([9, 5, 3]))
    cs, ys, xs = np.meshgrid(np.arange(3), np.arange(5), np.arange(9), indexing="ij")
    assert np.array_equal(out, xs + 10 * ys + 100 * cs)
    g = hl.Func("bounded_extent_src")
    g[x] = x * 3
    h = hl.Func("bounded_extent")
    h[x] = g[x] + g[x + 1]
    g.compute_root().bound_extent(x, 8)
    assert list(np.asarray(h.realize([7]))) == [6 * v + 3 for v in range(7)]
    with pytest.raises(hl.HalideError, match="Bounds given for bounded_extent_src in x"):
        h.realize([9])


def test_fuse_puts_the_fused_loop_where_the_inner_one_was(capsys):
    """As in Halide: fuse(x, c, t) of f[x, y, c] iterates y outside t (t covers x and c)."""
    x, y, c, t = hl.Var("x"), hl.Var("y"), hl.Var("c"), hl.Var("t")
    f = hl.Func("fused3")
    f[x, y, c] = x + 10 * y + 100 * c
    f.fuse(x, c, t)
    f.print_loop_nest()
    loops = [line.split()[1].rstrip(":") for line in capsys.readouterr().out.splitlines() if "for " in line]
    assert loops[0] == "y" and len(loops) == 2
    want = np.fromfunction(lambda c_, y_, x_: x_ + 10 * y_ + 100 * c_, (2, 4, 3), dtype=np.int32)
    assert np.array_equal(np.asarray(f.realize([3, 4, 2])), want)


def test_vector_loops_run_without_boundary_clamps_where_they_change_nothing():
    """repeat_edge clamps its coordinates; a vector iteration whose lanes are all inside runs a
    copy without the clamps, whose loads are dense (the edges keep the clamped gathers)."""
    from pyhalide import ir
    from pyhalide.ir_mutator import IRVisitor
    from pyhalide.lower import lower
    from pyhalide.lowering.unit_strides import specialize_unit_strides

    img = np.random.default_rng(3).random((9, 37), dtype=np.float32)
    src = hl.BoundaryConditions.repeat_edge(hl.Buffer(img, name="edge_in"))
    f = hl.Func("edge_blur")
    f[x, y] = src[x - 1, y] + src[x, y] * 2 + src[x + 1, y + 1]
    f.vectorize(x, 8)
    pad = np.pad(img, 1, mode="edge")
    want = pad[1:-1, :-2] + pad[1:-1, 1:-1] * np.float32(2) + pad[2:, 2:]
    assert np.array_equal(np.asarray(f.realize([37, 9])), want)

    class Branches(IRVisitor):
        def __init__(self):
            super().__init__()
            self.found = []

        def visit_IfThenElse(self, s):
            if isinstance(s.condition, ir.Call) and s.condition.name == "all_true":
                self.found.append(s)
            self.visit_children(s)

    stmt = specialize_unit_strides(lower([f]).stmt, ["edge_in", "edge_blur"])
    branches = Branches()
    branches.visit(stmt)
    # the vector loop is partitioned (its ShiftInwards tail): the steady state and the last
    # iteration each have the branch
    assert len(branches.found) == 2
    for branch in branches.found:
        loads = {}
        for case in ("then_case", "else_case"):
            class Loads(IRVisitor):
                def visit_Load(self, e, case=case, loads=loads):
                    loads.setdefault(case, []).append(e.index)
                    self.visit_children(e)
            Loads().visit(getattr(branch, case))
        assert len(loads["then_case"]) == 3 and all(
            isinstance(i, ir.Ramp) and ir.const_int(i.stride) == 1 for i in loads["then_case"])
        assert not any(isinstance(i, ir.Ramp) for i in loads["else_case"])  # gathers at the edges


def test_vector_stores_with_a_constant_stride():
    """Vectorizing across rows of a Func with a constant row length stores with stride 8; the
    unrolled phases of a split dimension store with stride 2. Both are written lane by lane."""
    g, h, out = hl.Func("rows_g"), hl.Func("phase_h"), hl.Func("strided_out")
    xo, xi = hl.Var("xo"), hl.Var("xi")
    g[x, y] = x + 10 * y
    h[x, y] = g[x, y] * 3 - x
    out[x, y] = h[x, y] + g[x, y]
    g.compute_root().bound(x, 0, 8).reorder(y, x).vectorize(y, 4)
    h.compute_root().split(x, xo, xi, 2).reorder(xi, xo).unroll(xi).vectorize(xo, 4)
    out.bound(x, 0, 8)
    want = np.fromfunction(lambda y_, x_: (x_ + 10 * y_) * 4 - x_, (12, 8), dtype=np.int32)
    assert np.array_equal(np.asarray(out.realize([8, 12])), want)


@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("t", [hl.UInt(8), hl.Int(16), hl.Float(32)], ids=str)
def test_vector_loads_of_x_over_a_constant_read_one_span(k, t):
    """inp[(x + c) / k] with x vectorized (an upsample, a Bayer mosaic's planes) is loaded as one
    dense span and a shuffle chosen by the remainder, not lane by lane; right for every phase
    of the vector's start, negative ones included, and reading only elements the lanes use
    (the input is exactly the region read)."""
    from pyhalide import ir
    from pyhalide.ir_mutator import IRVisitor
    from pyhalide.lower import finish_lowering, lower

    lanes = 4 * k
    lo, n, c = -7, 61, 2  # output x in [lo, lo + n): the vector starts at every remainder
    first, last = (lo + c) // k, (lo + n - 1 + c) // k
    data = (np.arange(last - first + 1) * 37 % 251).astype(t.to_numpy())
    inp = hl.Buffer(data, name=f"qr_in_{k}")
    inp.set_min([first])
    f = hl.Func(f"qr_{k}")
    f[x] = inp[(x + c) // k] * 2
    f.vectorize(x, lanes, hl.TailStrategy.ShiftInwards)
    out = hl.Buffer(t, [n])
    out.set_min([lo])
    f.realize(out)
    xs = np.arange(lo, lo + n)
    assert np.array_equal(np.asarray(out), (data[(xs + c) // k - first] * 2).astype(data.dtype))

    class Indices(IRVisitor):
        def __init__(self):
            super().__init__()
            self.names = []

        def visit_Load(self, e):
            self.names.append(e.index.name if isinstance(e.index, ir.Call) else type(e.index).__name__)
            self.visit_children(e)

    found = Indices()
    found.visit(finish_lowering(lower(f).stmt, [inp.name(), f.name()]))
    assert found.names and set(found.names) == {"quotient_ramp"}


def _windows_of(f):
    """The sliding windows lowering finds for f's pipeline: (Func, fold width) pairs."""
    from pyhalide.lowering.bounds_inference import bounds_inference
    from pyhalide.lowering.environment import build_environment
    from pyhalide.lowering.inline import inline_functions
    from pyhalide.lowering.schedule_functions import schedule_functions
    from pyhalide.lowering.sliding_window import sliding_window

    env = build_environment([f])
    stmt = bounds_inference(inline_functions(schedule_functions(env), env), env)
    return sorted((w.func, w.width) for w in sliding_window(stmt, env)[1])


def test_a_chain_of_line_buffers_all_slide():
    """c reads b and a, b reads a; both stored per image and computed per row of c. b slides
    first; a's rows then depend on b's slid region (a select on the first row), and a slides
    too. Unsharp mask and camera_pipe rely on this."""
    img = np.random.default_rng(4).integers(0, 1000, (40, 24)).astype(np.int32)
    inp = hl.Buffer(img, name="chain_in")
    a, b, c = hl.Func("chain_a"), hl.Func("chain_b"), hl.Func("chain_c")
    a[x, y] = inp[x, y] * 2
    b[x, y] = a[x, y - 1] + a[x, y + 1]
    c[x, y] = b[x, y - 1] + b[x, y + 1] + a[x, y]
    a.store_root().compute_at(c, y)
    b.store_root().compute_at(c, y)
    out = hl.Buffer(hl.Int(32), [24, 36])
    out.set_min([0, 2])
    c.realize(out)
    a_ = img * 2
    b_ = a_[:-2] + a_[2:]  # rows 1 .. 38
    want = b_[0:36] + b_[2:38] + a_[2:38]  # c rows 2 .. 37
    assert np.array_equal(np.asarray(out), want)
    assert _windows_of(c) == [("chain_a", 5), ("chain_b", 3)]


def test_an_upsampling_chain_slides_at_every_level(tmp_path):
    """A pyramid collapsed per output row (local_laplacian's schedule): level 1's rows move every
    other output row, level 2's every fourth. Each level slides (a row it already has is not
    computed again) although its region stays put for some rows, and level 1 folds to the four
    rows asked for; level 2, whose window the arithmetic cannot bound, keeps whole storage."""
    img = np.random.default_rng(6).integers(0, 1000, (9, 12)).astype(np.int32)
    inp = hl.Buffer(img, name="up_in")
    l1, l2, out = hl.Func("up_l1"), hl.Func("up_l2"), hl.Func("up_out")
    l2[x, y] = inp[x, y] * 3
    l1[x, y] = l2[x, y / 2] + l2[x, (y + 1) / 2] + y
    out[x, y] = l1[x, y / 2] * 2 + l1[x, (y + 1) / 2]
    l1.store_root().compute_at(out, y).fold_storage(y, 4)
    l2.store_root().compute_at(out, y)
    got = np.asarray(out.realize([12, 30]))
    ys = np.arange(30)
    l2_ = img * 3
    l1_ = l2_[np.arange(16) // 2] + l2_[(np.arange(16) + 1) // 2] + np.arange(16)[:, None]
    assert np.array_equal(got, l1_[ys // 2] * 2 + l1_[(ys + 1) // 2])
    assert _windows_of(out) == [("up_l1", 2), ("up_l2", 0)]
    out.compile_to_lowered_stmt(str(tmp_path / "up.stmt"), [])
    stmt = (tmp_path / "up.stmt").read_text()
    for level in ("up_l1", "up_l2"):  # each level's rows start past what it has computed before
        assert f"for<serial> ({level}.s0.y, {level}.s0.y.min," in stmt


def test_sliding_through_a_guarded_split_consumer_computes_every_row():
    """Regression (fuzzer): a producer computed inside a GuardWithIf-split consumer in a chain
    of line buffers used to skip rows, and one computed at the split's inner loop wrote past
    its allocation."""
    yi_ = hl.Var("yi_")
    c, a, b, out = hl.Func("g_c"), hl.Func("g_a"), hl.Func("g_b"), hl.Func("g_out")
    c[x, y] = x * 100 + y
    a[x, y] = c[x, y - 1]
    b[x, y] = a[x, y]
    out[x, y] = b[x, y] + b[x, y + 1]
    b.compute_at(out, y).store_root()
    c.compute_at(out, y).store_root()
    a.compute_at(b, x).split(y, y, yi_, 2, hl.TailStrategy.GuardWithIf)
    yy, xx = np.mgrid[0:4, 0:3]
    assert np.array_equal(np.asarray(out.realize([3, 4])), (xx * 100 + yy - 1) + (xx * 100 + yy))

    m, a2, b2, out2 = hl.Func("h_m"), hl.Func("h_a"), hl.Func("h_b"), hl.Func("h_out")
    m[x, y] = x * 7 + y
    a2[x, y] = m[x, y + 2]
    b2[x, y] = a2[x, y]
    out2[x, y] = b2[x, y] + b2[x, y + 1]
    b2.compute_at(out2, y).store_root()
    a2.compute_at(out2, y).split(y, hl.Var("yo_"), yi_, 3, hl.TailStrategy.GuardWithIf)
    m.compute_at(a2, yi_).store_root()
    yy, xx = np.mgrid[0:23, 0:4]
    for _ in range(3):
        assert np.array_equal(np.asarray(out2.realize([4, 23])), (xx * 7 + yy + 2) + (xx * 7 + yy + 3))


def test_exact_splits_of_bounded_loops_need_no_clamp():
    """A split by 2 of a loop bounded to 64, unrolled inside a vectorized loop: the simplifier
    knows the loops' ranges, so min(xo * 2, 62) goes away and both phases store with stride 2
    from a ramp (no min, no gather)."""
    from pyhalide import ir
    from pyhalide.ir_mutator import IRVisitor
    from pyhalide.lower import lower

    xo_, xi_ = hl.Var("xo_"), hl.Var("xi_")
    f = hl.Func("phases")
    f[x, y] = hl.select(x % 2 == 0, x * 3, y - x)
    f.bound(x, 0, 64).split(x, xo_, xi_, 2).reorder(xi_, xo_).unroll(xi_).vectorize(xo_, 8)
    want = np.fromfunction(lambda y_, x_: np.where(x_ % 2 == 0, x_ * 3, y_ - x_), (5, 64), dtype=np.int32)
    assert np.array_equal(np.asarray(f.realize([64, 5])), want)

    class Stores(IRVisitor):
        def __init__(self):
            super().__init__()
            self.indices, self.selects = [], 0

        def visit_Store(self, s):
            self.indices.append(s.index)
            self.visit_children(s)

        def visit_Select(self, e):
            self.selects += 1
            self.visit_children(e)

    found = Stores()
    found.visit(lower([f]).stmt)
    assert len(found.indices) == 2 and all(isinstance(i, ir.Ramp) for i in found.indices)
    assert found.selects == 0  # x % 2 is known in each phase


def test_realize_grows_outputs_the_schedule_writes_past_and_returns_the_region_asked_for():
    """As Halide: realize(sizes) allocates what the schedule writes (RoundUp splits, vectors
    wider than the output, ShiftInwards past the start, an update's split) and returns a view of
    the sizes; realize(buffer) into a buffer too small stays an error."""
    xo, xi = hl.Var("xo"), hl.Var("xi")
    rounded = hl.Func("grow_rounded")
    rounded[x] = x * 3
    rounded.split(x, xo, xi, 8, hl.TailStrategy.RoundUp)
    assert np.asarray(rounded.realize([10])).tolist() == [3 * i for i in range(10)]
    wide = hl.Func("grow_wide")
    wide[x, y] = x + 10 * y
    wide.vectorize(x, 16)
    got = wide.realize([5, 3])
    assert (got.width(), got.height()) == (5, 3)
    assert np.array_equal(np.asarray(got), np.arange(5)[None, :] + 10 * np.arange(3)[:, None])
    shifted = hl.Func("grow_shifted")
    shifted[x] = x - 2
    shifted.split(x, xo, xi, 8, hl.TailStrategy.ShiftInwards)
    assert np.asarray(shifted.realize([5])).tolist() == [-2, -1, 0, 1, 2]
    r = hl.RDom([(0, 5)])
    upd = hl.Func("grow_update")
    upd[x] = 0
    upd[x] += x * r.x
    upd.update().split(x, xo, xi, 4)
    assert np.asarray(upd.realize([6])).tolist() == [10 * i for i in range(6)]
    plain = hl.Func("grow_plain")
    plain[x] = x + 1
    a, b = hl.Pipeline([rounded, plain]).realize([10])
    assert np.asarray(a).tolist() == [3 * i for i in range(10)] and np.asarray(b).tolist() == list(range(1, 11))
    with pytest.raises(hl.HalideError, match=r"grow_rounded is accessed at 15, which is beyond the max \(9\)"):
        rounded.realize(hl.Buffer(hl.Int(32), [10]))


def test_an_update_fused_across_a_bounded_dimension_keeps_the_pure_stage_vectorizable():
    """The fused loop's parts span exactly their own loops' ranges (promised to bounds
    inference), so the pure stage's y stays the constant 19 that bound() gave and vectorizes."""
    r = hl.RDom([(0, 3)])
    f = hl.Func("fused_update")
    f[x, y] = x * 3 - 7
    f[x, y] += (x + r.x) * y
    f.bound(y, 0, 19).vectorize(y)
    f.update(0).fuse(x, y, hl.Var("xy"))
    xs, ys = np.arange(6)[None, :], np.arange(19)[:, None]
    assert np.array_equal(np.asarray(f.realize([6, 19])), xs * 3 - 7 + (3 * xs + 3) * ys)


def test_compute_at_without_a_stage_follows_the_stages_that_use_the_producer():
    """As Halide (its lesson 9): `producer.compute_at(consumer, x)` places the producer in the x
    loop of the one stage that uses it, or gives each stage that uses it its own realization."""
    px = hl.Var("x")
    for uses in ("pure", "update", "both"):
        producer, consumer = hl.Func(f"sa_producer_{uses}"), hl.Func(f"sa_consumer_{uses}")
        producer[px] = px * 17
        consumer[px] = 2 * producer[px] if uses in ("pure", "both") else px
        consumer[px] += producer[px] if uses in ("update", "both") else 1
        producer.compute_at(consumer, px)
        want = np.arange(10) * 17 * (2 if uses != "update" else 0) + (np.arange(10) if uses == "update" else 0)
        want = want + (np.arange(10) * 17 if uses != "pure" else 1)
        np.testing.assert_array_equal(np.asarray(consumer.realize([10])), want)


def test_update_values_follow_halides_type_rules():
    ux = hl.Var("x")
    widened = hl.Func("ut_widened")
    widened[ux] = 0
    widened[ux] += hl.u8(ux + 250)  # int32 + uint8 is int32
    assert list(np.asarray(widened.realize([3]))) == [250, 251, 252]
    narrow = hl.Func("ut_narrow")
    narrow[ux] = hl.u8(1)
    with pytest.raises(hl.HalideError, match="has type int32, but pure definition has type uint8"):
        narrow[ux] += hl.i32(ux) * 3


def test_rfactor_keeps_the_rvar_names_of_the_split():
    """As Halide (its lesson 18): after rfactor the intermediate's loops keep the RVars' names."""
    hx, u, v = hl.Var("x"), hl.Var("u"), hl.Var("v")
    img = np.random.default_rng(7).integers(0, 256, (16, 20), dtype=np.uint8)
    inp = hl.Buffer(img, name="rn_in")
    hist = hl.Func("rn_hist")
    hist[hx] = 0
    r = hl.RDom([(0, 20), (0, 16)])
    hist[hl.i32(inp[r.x, r.y]) // 32] += 1
    rxo, rxi, ryo, ryi = hl.RVar("rxo"), hl.RVar("rxi"), hl.RVar("ryo"), hl.RVar("ryi")
    hist.update().split(r.x, rxo, rxi, 4).split(r.y, ryo, ryi, 4)
    intm = hist.update().rfactor([(rxo, u), (ryo, v)])
    intm.compute_root().update().parallel(u).parallel(v)
    intm.update().reorder(rxi, ryi, u, v)
    np.testing.assert_array_equal(np.asarray(hist.realize([8])), np.bincount(img.ravel() // 32, minlength=8))


def test_rfactor_of_a_split_that_does_not_divide_reads_only_the_rdom():
    """As in Halide: 2000 rows in bands of 63 leave the last band 47 short. Its guarded-off
    iterations must not ask for input past the RDom (the bounds check once refused the input as
    too small: accessed at 2015)."""
    y, u = hl.Var("y"), hl.Var("u")
    img = np.random.default_rng(3).integers(0, 100, (5, 2000)).astype(np.int32)
    inp = hl.Buffer(img, name="rf_tail_in")
    r = hl.RDom([(0, 2000)], name="r")
    rows = hl.Func("rf_tail")
    rows[y] = 0
    rows[y] += inp[r.x, y]
    ro, ri = hl.RVar("ro"), hl.RVar("ri")
    intm = rows.update().split(r.x, ro, ri, 63).rfactor(ro, u)
    intm.compute_root().update().parallel(u)
    np.testing.assert_array_equal(np.asarray(rows.realize([5])), img.sum(axis=1))


def test_clone_in_gives_consumers_their_own_copy():
    cx, cy = hl.Var("x"), hl.Var("y")
    f, g, h = hl.Func("cl_f"), hl.Func("cl_g"), hl.Func("cl_h")
    f[cx, cy] = cx + cy
    f[cx, cy] += 1  # the clone's update reads the clone
    g[cx, cy] = 2 * f[cx, cy] + 3
    h[cx, cy] = f[cx, cy] - 1
    out = hl.Func("cl_out")
    out[cx, cy] = g[cx, cy] + h[cx, cy]
    clone = f.clone_in(g)
    assert f.clone_in(g) is clone and clone.name() == "cl_f_clone_in_cl_g"
    clone.compute_root()
    h.compute_root()
    f.compute_at(h, cx)
    xs, ys = np.meshgrid(np.arange(5), np.arange(4))
    np.testing.assert_array_equal(np.asarray(out.realize([5, 4])), 2 * (xs + ys + 1) + 3 + xs + ys)
    p = hl.Pipeline(out)
    text = p.schedule_to_json()
    assert "clone_in" in text


def test_async_ring_buffer_hoist_storage_and_outermost_keep_the_values():
    """Halide's async_, ring_buffer and hoist_storage are recorded and run synchronously (the same
    values); Var.outermost() is the level around a stage's whole loop nest (Halide's lesson 24)."""
    ox, oy, oc = hl.Var("x"), hl.Var("y"), hl.Var("c")
    producer, consumer = hl.Func("as_producer"), hl.Func("as_consumer")
    producer[ox, oy, oc] = ox * 10 + oy + oc * 100
    consumer[ox, oy, oc] = producer[ox, oy, oc] * 2
    producer.async_().compute_at(consumer, oc).store_at(consumer, hl.Var.outermost()).fold_storage(oc, 2)
    want = (np.arange(4)[None, None, :] * 10 + np.arange(3)[None, :, None] + np.arange(2)[:, None, None] * 100) * 2
    np.testing.assert_array_equal(np.asarray(consumer.realize([4, 3, 2])), want)
    p2, c2 = hl.Func("as_p2"), hl.Func("as_c2")
    p2[ox, oy] = ox + oy
    c2[ox, oy] = p2[ox, oy] - 1
    yo, yi = hl.Var("yo"), hl.Var("yi")
    c2.split(oy, yo, yi, 2)
    p2.compute_at(c2, yo).async_().hoist_storage(c2, hl.Var.outermost()).ring_buffer(2)
    text = hl.Pipeline(c2).schedule_to_json()
    assert all(d in text for d in ("async_", "hoist_storage", "ring_buffer"))
    xs, ys = np.meshgrid(np.arange(5), np.arange(6))
    np.testing.assert_array_equal(np.asarray(c2.realize([5, 6])), xs + ys - 1)


def test_memoize_is_recorded_and_computes_the_same_values():
    """memoize() of a Func with an update: the values are the same from the cache (see
    test_memoization.py); the directive replays from JSON. An eviction key (hl.EvictionKey or an
    Expr) is accepted as in Halide, a float one refused as Halide refuses it, anything else a
    TypeError; a second key, different from the first, is refused as Halide refuses it."""
    mx = hl.Var("x")
    f, out = hl.Func("memo_f"), hl.Func("memo_out")
    f[mx] = mx * 3
    f[mx] += 1
    out[mx] = f[mx] * 2
    f.compute_root().memoize()
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(out.realize([4])), (np.arange(4) * 3 + 1) * 2)
    assert "memoize" in hl.Pipeline(out).schedule_to_json()
    f.memoize(hl.Expr(1)).memoize().memoize(hl.EvictionKey(mx * 0 + 7))  # (memoize() drops the first key)
    np.testing.assert_array_equal(np.asarray(out.realize([4])), (np.arange(4) * 3 + 1) * 2)
    with pytest.raises(hl.HalideError, match="Can't use floating-point types as a memoization eviction key"):
        hl.EvictionKey(hl.f32(2.0))
    with pytest.raises(TypeError, match="eviction key must be an hl.EvictionKey or an Expr"):
        f.memoize(1)
    with pytest.raises(hl.HalideError, match=r"memo_f: can't redefine memoize eviction key\. First definition is: "
                                             r"\(\(x \* 0\) \+ 7\) new definition is: 8"):
        f.memoize(hl.Expr(8))


def test_image_param_wrappers_are_scheduled_on_their_own():
    """ImageParam.in_(f), as in Halide's lesson 19: f reads the image through a wrapper Func
    (arguments _0, _1) that can be computed per tile."""
    wx, wy = hl.Var("x"), hl.Var("y")
    img = hl.ImageParam(hl.Int(32), 2, "iw_img")
    blur = hl.Func("iw_blur")
    blur[wx, wy] = img[wx, wy] + img[wx + 1, wy + 1]
    other = hl.Func("iw_other")
    other[wx, wy] = blur[wx, wy] * img[wx, wy]
    xo, yo, xi, yi = (hl.Var(n) for n in ("xo", "yo", "xi", "yi"))
    blur.compute_root().tile(wx, wy, xo, yo, xi, yi, 4, 4)
    tile = img.in_(blur)
    assert img.in_(blur) is tile
    tile.compute_at(blur, xo).vectorize(hl._0, 4)
    a = np.arange(70, dtype=np.int32).reshape(7, 10)
    img.set(hl.Buffer(a))
    got = np.asarray(other.realize([8, 4]))
    np.testing.assert_array_equal(got, (a[:4, :8] + a[1:5, 1:9]) * a[:4, :8])
    assert "iw_img_im_in_iw_blur" in hl.Pipeline(other).schedule_to_json()  # the wrapper's own schedule


def test_the_image_func_is_one_func_that_every_read_goes_through(capfd):
    """As Halide: hl.Func(img) is the image's own Func (the same one each time), computing it at
    root makes every other read of the image read its buffer, img.in_() wraps it, and its
    schedule (the wrappers too) replays from JSON onto a fresh build of the algorithm, where no
    hl.Func(img) was asked for yet."""

    def build():
        x, y = hl.Var("x"), hl.Var("y")
        img = hl.ImageParam(hl.Int(32), 2, "own_img")
        g, h = hl.Func("own_g"), hl.Func("own_h")
        g[x, y] = img[x, y] * 2
        h[x, y] = g[x, y] + img[x + 1, y]
        return img, h

    img, h = build()
    assert hl.Func(img) is hl.Func(img) and hl.Func(img).name() == "own_img_im"
    hl.Func(img).compute_root().trace_stores()
    img.in_(h)
    a = np.arange(90, dtype=np.int32).reshape(9, 10)
    img.set(hl.Buffer(a))
    expected = 2 * a[:8, :8] + a[:8, 1:9]
    np.testing.assert_array_equal(np.asarray(h.realize([8, 8])), expected)
    # one production at root, of what g reads and what h's wrapper reads: x in [0, 8], y in [0, 7]
    stores = [line for line in capfd.readouterr().out.splitlines() if line.startswith("Store own_img_im.")]
    assert len(stores) == 9 * 8
    record = hl.Pipeline(h).schedule_to_json()
    assert '"own_img_im_in_own_h"' in record

    img2, h2 = build()
    hl.Pipeline(h2).apply_schedule_json(record)
    assert hl.Pipeline(h2).schedule_to_json() == record
    img2.set(hl.Buffer(a))
    np.testing.assert_array_equal(np.asarray(h2.realize([8, 8])), expected)


def test_a_specialization_on_an_extent_unrolls_a_loop_over_it():
    """As Halide (its lesson 16): inside `specialize(out.dim(2).extent() == 3)` the channel loop
    has extent 3, so `unroll(c)` unrolls it; other extents take the general loop nest."""
    inp = hl.ImageParam(hl.UInt(8), 3, "rgb_in")
    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
    f = hl.Func("rgb_out")
    f[x, y, c] = inp[x, y, c] * 2 + c
    f.specialize(f.output_buffer().dim(2).extent() == 3).reorder(c, x, y).unroll(c)
    a = np.arange(3 * 4 * 5, dtype=np.uint8).reshape(3, 4, 5)
    inp.set(hl.Buffer(a))
    channels = np.arange(3, dtype=np.uint8)[:, None, None]
    np.testing.assert_array_equal(np.asarray(f.realize([5, 4, 3])), a * 2 + channels)
    np.testing.assert_array_equal(np.asarray(f.realize([5, 4, 2])), a[:2] * 2 + channels[:2])


def test_constant_constraints_are_known_when_unrolling_and_checked_on_every_call():
    """As Halide (its lesson 16, interleaved): `set_bounds(0, 3)` on the channel dimension of the
    input and output makes the channel loop's extent 3, so `unroll(c)` unrolls it. The constants
    are compiled in, so a buffer that breaks one is refused, passed to a Callable or bound to
    the ImageParam (when the pipeline runs: set() takes any buffer, as Halide's)."""
    inp = hl.ImageParam(hl.UInt(8), 3, "interleaved_in")
    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
    f = hl.Func("interleaved_out")
    f[x, y, c] = inp[x, y, c] + hl.u8(c)
    for b in (inp, f.output_buffer()):
        b.dim(0).set_stride(3)
        b.dim(2).set_stride(1).set_bounds(0, 3)
    f.reorder(c, x, y).unroll(c).vectorize(x, 16)
    src = hl.Buffer.make_interleaved(hl.UInt(8), 37, 5, 3)
    np.asarray(src)[...] = np.arange(3 * 5 * 37, dtype=np.uint8).reshape(3, 5, 37)
    inp.set(src)
    out = hl.Buffer.make_interleaved(hl.UInt(8), 37, 5, 3)
    f.realize(out)
    channels = np.arange(3, dtype=np.uint8)[:, None, None]
    np.testing.assert_array_equal(np.asarray(out), np.asarray(src) + channels)
    call = f.compile_to_callable([inp])  # (compiled for Halide's default layout, then for this one)
    again = hl.Buffer.make_interleaved(hl.UInt(8), 37, 5, 3)
    call(src, again)
    np.testing.assert_array_equal(np.asarray(again), np.asarray(src) + channels)
    planar = hl.Buffer(hl.UInt(8), [37, 5, 3])
    with pytest.raises(hl.HalideError, match=r"Constraint violated: interleaved_\w+.stride.0 \(1\) == 3"):
        call(planar, hl.Buffer(hl.UInt(8), [37, 5, 3]))
    inp.set(planar)
    with pytest.raises(hl.HalideError, match="stride"):
        f.realize(hl.Buffer.make_interleaved(hl.UInt(8), 37, 5, 3))


def test_a_callable_takes_buffers_of_any_layout():
    """As Halide's Callable: a strided numpy array or an interleaved Buffer runs (on code compiled
    for its layout, once), and computes what the default layout computes."""
    inp = hl.ImageParam(hl.Float(32), 2, "any_layout_in")
    x, y = hl.Var("x"), hl.Var("y")
    f = hl.Func("any_layout_out")
    f[x, y] = inp[x, y] * 2 + hl.f32(x)
    f.vectorize(x, 8)
    call = f.compile_to_callable([inp])
    a = np.arange(12 * 40, dtype=np.float32).reshape(12, 40)
    expected = a[:, ::2] * 2 + np.arange(20, dtype=np.float32)
    for image in (np.ascontiguousarray(a[:, ::2]), a[:, ::2]):  # dense, then strided
        out = np.zeros((12, 20), np.float32)
        call(image, out)
        np.testing.assert_array_equal(out, expected)
    strided_out = np.zeros((12, 40), np.float32)[:, ::2]
    call(a[:, ::2], strided_out)
    np.testing.assert_array_equal(strided_out, expected)
    transposed = hl.Buffer(np.ascontiguousarray(a[:, ::2].T), reverse_axes=False)  # dimension 1 dense
    out = np.zeros((12, 20), np.float32)
    call(transposed, out)
    np.testing.assert_array_equal(out, expected)


def test_atomic_parallel_rvars_need_an_associative_update_as_in_halide():
    """atomic() lets an RVar run in parallel only where the order the iterations update an
    element in cannot matter: an associative, commutative reduction, or a value that neither
    reads f nor uses an RVar. Otherwise refused naming the stage, as Halide 21 refuses it, unless
    the test is overridden."""
    r = hl.RDom([(0, 64)])
    mixed = hl.Func("atomic_mixed")
    mixed[x] = 0
    mixed[r % 4] = mixed[r % 4] * 2 + r
    with pytest.raises(hl.HalideError, match=r"atomic_mixed\S*: can't parallelize RVar .* atomic\(\) update that is "
                                             r"not an associative, commutative reduction"):
        mixed.update(0).atomic().parallel(r)
    mixed.update(0).atomic(override_associativity_test=True).parallel(r)  # the user's word for it
    constant = hl.Func("atomic_constant")
    constant[x] = x
    constant[r % 4] = 7
    constant.update(0).atomic().parallel(r, 8)
    assert np.asarray(constant.realize([6])).tolist() == [7, 7, 7, 7, 4, 5]
    summed = hl.Func("atomic_sum")
    summed[x] = 0
    summed[r % 4] = summed[r % 4] + r
    summed.update(0).atomic().vectorize(r, 8)
    assert np.asarray(summed.realize([4])).tolist() == [sum(range(k, 64, 4)) for k in range(4)]


def test_rvar_reorders_follow_halides_associativity_test():
    """RVar loops may swap where the update is an associative reduction or writes a value that
    neither reads f nor uses an RVar (Halide's two tests); atomic() alone is no licence, as in
    Halide 21 (the user's override_associativity_test is)."""
    r = hl.RDom([(0, 4), (0, 4)])
    mixed = hl.Func("reorder_mixed")
    mixed[x] = 0
    mixed[x] = mixed[x] * 2 + r.x + r.y * 3
    with pytest.raises(hl.HalideError, match=r"reorder_mixed\S*: can't reorder RVars .* not an associative reduction"):
        mixed.update(0).atomic().reorder(r.y, r.x)
    mixed.update(0).atomic(override_associativity_test=True).reorder(r.y, r.x)  # the user's word for it
    constant = hl.Func("reorder_constant")
    constant[x] = x
    constant[r.x + r.y] = 5
    constant.update(0).reorder(r.y, r.x)
    assert np.asarray(constant.realize([9])).tolist() == [5] * 7 + [7, 8]
