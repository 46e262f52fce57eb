"""Loop partitioning and the guards the simplifier settles: GuardWithIf tails leave the steady
state of their loops, and what is computed does not change."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyhalide as hl
from pyhalide import ir
from pyhalide.ir_mutator import IRVisitor, children
from pyhalide.lower import lower

x, y = hl.Var("x"), hl.Var("y")
xo, xi = hl.Var("xo"), hl.Var("xi")


def _final_stmt(func):
    seen = []
    lower([func], hook=lambda name, stmt: seen.append(stmt))
    return seen[-1]


class _Loops(IRVisitor):
    """Every For, with the number of IfThenElse nodes inside its body."""

    def __init__(self):
        super().__init__()
        self.loops = []

    def visit_For(self, s):
        self.loops.append((s.name, _count(s.body, ir.IfThenElse)))
        self.visit_children(s)


def _count(node, *kinds) -> int:
    """How many nodes of these IR classes node holds (itself included)."""
    stack, n = [node], 0
    while stack:
        top = stack.pop()
        n += isinstance(top, kinds)
        stack.extend(children(top))
    return n


def _loops(stmt):
    v = _Loops()
    v.visit(stmt)
    return v.loops


def _register_tiled_sum(a: np.ndarray, tile: int):
    """out(x, y) = sum over k of A(k, y) * (x + k), its update tiled by `tile` along x with
    GuardWithIf, the tile unrolled inside the reduction."""
    A = hl.Buffer(a, "A")
    k = hl.RDom([hl.Range(0, a.shape[1])], name="k")
    f = hl.Func("tiled_sum")
    f[x, y] = 0
    f[x, y] += A[k, y] * (x + k)
    f.update(0).split(x, xo, xi, tile, hl.TailStrategy.GuardWithIf).reorder(xi, k, xo, y).unroll(xi)
    return f


def test_guard_with_if_leaves_the_steady_state_of_a_register_tile():
    a = np.random.default_rng(0).integers(-50, 50, (7, 13), dtype=np.int32)
    width = 20  # not a multiple of the tile of 6
    f = _register_tiled_sum(a, 6)
    loops = _loops(_final_stmt(f))
    xo_loops = [ifs for name, ifs in loops if name == "tiled_sum.s1.x.xo"]
    assert len(xo_loops) == 2, loops  # the steady state and the last, partial tile
    assert xo_loops[0] == 0 and xo_loops[1] > 0, loops  # the guards are only in the epilogue
    out = np.asarray(f.realize([width, a.shape[0]]))
    xs = np.arange(width)[None, :, None]
    ks = np.arange(a.shape[1])[None, None, :]
    assert np.array_equal(out, (a[:, None, :] * (xs + ks)).sum(axis=2))


def test_loops_the_simplifier_settles_keep_no_guard():
    """A tile that divides the extent, and a loop of one iteration, need no guard and no loop."""
    f = hl.Func("divides")
    f[x, y] = x + y
    f.split(x, xo, xi, 4, hl.TailStrategy.GuardWithIf).split(y, hl.Var("yo"), hl.Var("yi"), 1)
    f.bound(x, 0, 16).bound(y, 0, 3)
    stmt = _final_stmt(f)
    assert all(ifs == 0 for _, ifs in _loops(stmt)), _loops(stmt)
    assert not any(name.endswith(".yi") for name, _ in _loops(stmt))
    assert np.array_equal(np.asarray(f.realize([16, 3])), np.add.outer(np.arange(3), np.arange(16)))


@settings(max_examples=40, deadline=None)
@given(coef=st.integers(-4, 4).filter(bool), offset=st.integers(-30, 30), limit=st.integers(-30, 60),
       p=st.integers(-10, 10), extent=st.integers(0, 40), strict=st.booleans())
def test_partitioned_predicates_compute_what_the_predicate_says(coef, offset, limit, p, extent, strict):
    """A predicate affine in the reduction variable, either way round and strict or not, with a
    Param in it: the partitioned loop adds exactly the terms the predicate admits."""
    param = hl.Param(hl.Int(32), "p")
    param.set(p)
    r = hl.RDom([hl.Range(0, extent)], name="r")
    lhs = coef * r.x + offset + param
    r.where(lhs < limit if strict else lhs <= limit)
    f = hl.Func("pred_sum")
    f[x] = 0
    f[x] += r.x + x
    out = np.asarray(f.realize([3]))
    rs = np.arange(extent)
    lhs_v = coef * rs + offset + p
    keep = rs[lhs_v < limit] if strict else rs[lhs_v <= limit]
    assert np.array_equal(out, np.array([keep.sum() + len(keep) * i for i in range(3)]))


def test_partitioned_loop_bounds_are_in_the_ir():
    """A predicate's loop has a steady state with no test in it, and an epilogue with the test
    (none when the bounds are constant: the simplifier drops its iterations, all false)."""
    p = hl.Param(hl.Int(32), "limit")
    for limit, expected in ((p, [0, 1]), (200, [0])):
        r = hl.RDom([hl.Range(0, 100)], name="r")
        r.where(r.x * 3 < limit)
        f = hl.Func("where_sum")
        f[x] = 0
        f[x] += r.x
        names = [(n, ifs) for n, ifs in _loops(_final_stmt(f)) if n.endswith("r$x")]
        assert [ifs for _, ifs in names] == expected, names
        p.set(200)
        assert np.asarray(f.realize([1]))[0] == sum(v for v in range(100) if v * 3 < 200)


def test_sliding_window_steady_state_computes_one_row_without_a_loop():
    """Halide's blur schedule (blur_x slides down strips of blur_y): after the strip's first
    row, each step computes exactly the one new row of blur_x, with no loop or select around it."""
    yi = hl.Var("yi")
    inp = hl.Buffer(np.arange(40 * 70, dtype=np.uint16).reshape(40, 70), name="sw_in")
    bx, by = hl.Func("sw_bx"), hl.Func("sw_by")
    bx[x, y] = (inp[x, y] + inp[x + 1, y] + inp[x + 2, y]) / 3
    by[x, y] = (bx[x, y] + bx[x, y + 1] + bx[x, y + 2]) / 3
    # whole vectors and strips: no ShiftInwards tail to partition
    by.bound(x, 0, 64).bound(y, 0, 32).split(y, y, yi, 8).vectorize(x, 16)
    bx.store_at(by, y).compute_at(by, x).vectorize(x, 16)
    names = [name for name, _ in _loops(_final_stmt(by))]
    # the strip's first row (three rows of sw_bx), then the steady state: no sw_bx row loop in it
    assert names.count("sw_by.s0.y.yi") == 1 and names.count("sw_bx.s0.y") == 1, names
    assert names.index("sw_bx.s0.y") < names.index("sw_by.s0.y.yi"), names
    a = np.asarray(inp).astype(np.int64)
    rows = (a[:, :-2] + a[:, 1:-1] + a[:, 2:]) // 3
    want = (rows[:-2] + rows[1:-1] + rows[2:]) // 3
    np.testing.assert_array_equal(np.asarray(by.realize([64, 32])), want[:32, :64])


class _ScalarMinsOf(IRVisitor):
    """Scalar Mins and Maxes whose operands mention a given loop variable."""

    def __init__(self, v: str):
        super().__init__()
        self.v, self.count = v, 0

    def _check(self, e):
        from pyhalide.ir_mutator import free_variables

        if e.type.lanes == 1 and self.v in free_variables(e):
            self.count += 1
        self.visit_children(e)

    visit_Min = visit_Max = _check


def _loop_bodies(stmt, name):
    found = []

    class Find(IRVisitor):
        def visit_For(self, s):
            if s.name == name:
                found.append(s)
            self.visit_children(s)

    Find().visit(stmt)
    return found


def test_shift_inwards_min_leaves_the_steady_state():
    """`vectorize(x, 16)` of a width that is not a multiple of 16: the last vector is shifted
    inwards with min(x_o * 16 + x_min, x_max - 15). The steady state has no min; the epilogue keeps
    it, and the result is what it was."""
    inp = hl.Buffer(np.arange(100, dtype=np.int32), "si_in")
    f = hl.Func("si")
    f[x] = inp[x] * 2 + 1
    f.vectorize(x, 16)
    loops = _loop_bodies(_final_stmt(f), "si.s0.x.x")
    assert len(loops) == 2, loops  # steady state and epilogue
    mins = []
    for loop in loops:
        finder = _ScalarMinsOf("si.s0.x.x")
        finder.visit(loop.body)
        mins.append(finder.count)
    assert mins[0] == 0 and mins[1] > 0, mins
    for width in (16, 37, 100):
        assert np.array_equal(np.asarray(f.realize([width])), np.arange(width) * 2 + 1)


@settings(max_examples=40, deadline=None)
@given(width=st.integers(1, 40), lo=st.integers(-6, 6), shift=st.integers(-8, 8), size=st.integers(1, 12))
def test_clamped_coordinates_are_partitioned_into_prologue_steady_state_and_epilogue(width, lo, shift, size):
    """clamp(x + shift, 0, size - 1) over an output that starts before, inside or after the input:
    the prologue's and epilogue's iterations keep the clamp, the steady state drops it."""
    data = np.arange(size, dtype=np.int32) * 5 + 3
    p = hl.Param(hl.Int(32), "shift")
    p.set(shift)
    f = hl.Func("clamped")
    f[x] = hl.Buffer(data, "cl_in")[hl.clamp(x + p, 0, size - 1)]
    out = hl.Buffer(hl.Int(32), [width])
    out.set_min([lo])
    f.realize(out)
    want = data[np.clip(np.arange(lo, lo + width) + shift, 0, size - 1)]
    assert np.array_equal(np.asarray(out), want)


@settings(max_examples=40, deadline=None)
@given(width=st.integers(8, 90), lo=st.integers(-40, 40), shift=st.integers(-20, 20), size=st.integers(1, 70))
def test_vectorized_clamps_leave_the_steady_state(width, lo, shift, size):
    """A vectorized boundary condition: each vector tests whether its lanes need the clamp
    (`all_true(ramp <= w - 1 && ramp >= 0)`), and the loop is partitioned on that test as Halide
    does, so the steady state loads densely with no test; the result is the clamped one wherever
    the output starts, whatever the widths (at least a vector: ShiftInwards)."""
    data = np.arange(size, dtype=np.int32) * 7 - 5
    p = hl.Param(hl.Int(32), "vshift")
    p.set(shift)
    f = hl.Func("vclamped")
    f[x] = hl.BoundaryConditions.repeat_edge(hl.Buffer(data, "vcl_in"))[x + p] * 3
    f.vectorize(x, 8)
    out = hl.Buffer(hl.Int(32), [width])
    out.set_min([lo])
    f.realize(out)
    assert np.array_equal(np.asarray(out), data[np.clip(np.arange(lo, lo + width) + shift, 0, size - 1)] * 3)


def test_the_steady_state_of_a_vectorized_clamp_has_no_lane_test():
    data = np.arange(500, dtype=np.float32)
    f = hl.Func("vsteady")
    f[x] = hl.BoundaryConditions.repeat_edge(hl.Buffer(data, "vst_in"))[x - 3] * 2
    f.vectorize(x, 16)
    f.compile_jit()
    loops = [n for n in _loops(_final_stmt(f)) if n[0] == "vsteady.s0.x.x"]
    assert len(loops) == 3 and loops[1][1] == 0 and loops[0][1] > 0, loops  # prologue, steady state, epilogue


def _reflected(kind: str, coords: np.ndarray, n: int) -> np.ndarray:
    """Where each coordinate reads an image of n pixels under a boundary condition (numpy)."""
    if kind == "repeat_image":
        return coords % n
    period = 2 * n if kind == "mirror_image" else 2 * n - 2
    t = coords % period
    return np.where(t < n, t, period - 1 - t if kind == "mirror_image" else period - t)


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(["mirror_image", "mirror_interior", "repeat_image", "constant_exterior"]),
       width=st.integers(8, 90), lo=st.integers(-60, 60), shift=st.integers(-20, 20), size=st.integers(2, 40),
       vector=st.booleans())
def test_boundary_condition_selects_leave_the_steady_state(kind, width, lo, shift, size, vector):
    """As Halide's: the boundary conditions that read another coordinate outside the image select
    `clamp(likely(x))` inside it; loops (scalar) and vector iterations (all lanes inside) drop the
    select in their steady state. The values are the boundary condition's, wherever the output
    starts, whatever the image and output widths."""
    data = np.arange(size, dtype=np.int32) * 7 - 5
    p = hl.Param(hl.Int(32), "bshift")
    p.set(shift)
    img = hl.Buffer(data, "bsel_in")
    bc = getattr(hl.BoundaryConditions, kind)
    b = bc(img, -1) if kind == "constant_exterior" else bc(img)
    f = hl.Func("bsel")
    f[x] = b[x + p] * 3 + b[x - 1]
    if vector:
        f.vectorize(x, 8)
    out = hl.Buffer(hl.Int(32), [width])
    out.set_min([lo])
    f.realize(out)
    coords = np.arange(lo, lo + width)

    def read(c):
        if kind == "constant_exterior":
            return np.where((c >= 0) & (c < size), data[np.clip(c, 0, size - 1)], -1)
        return data[_reflected(kind, c, size)]

    assert np.array_equal(np.asarray(out), read(coords + shift) * 3 + read(coords - 1))


@pytest.mark.parametrize("vector", [False, True])
@pytest.mark.parametrize("kind", ["mirror_image", "mirror_interior", "repeat_image"])
def test_the_steady_state_of_a_reflecting_boundary_condition_has_no_select(kind, vector):
    """The loop over x is partitioned: its steady state reads x directly (no select; vectorized,
    no lane test either), its prologue and epilogue keep the boundary condition."""
    name = f"rsteady_{kind}_{vector}"
    f = hl.Func(name)
    f[x] = getattr(hl.BoundaryConditions, kind)(hl.Buffer(np.arange(100, dtype=np.float32), name + "_in"))[x - 3]
    loop = f"{name}.s0.x"
    if vector:
        f.vectorize(x, 8)
        loop += ".x"
    loops = _loops_named(_final_stmt(f), loop)
    assert len(loops) == 3, loops
    selects = [_count(s.body, ir.Select) for s in loops]
    ifs = [_count(s.body, ir.IfThenElse) for s in loops]
    assert selects[1] == ifs[1] == 0 and selects[0] > 0 and selects[2] > 0, (selects, ifs)
    assert not vector or ifs[0] > 0 and ifs[2] > 0
    xs = np.arange(-20, 130)
    out = hl.Buffer(hl.Float(32), [150])
    out.set_min([-20])
    f.realize(out)
    np.testing.assert_array_equal(np.asarray(out), _reflected(kind, xs - 3, 100).astype(np.float32))


class _LoopsNamed(IRVisitor):
    def __init__(self, name):
        super().__init__()
        self.name, self.found = name, []

    def visit_For(self, s):
        if s.name == self.name:
            self.found.append(s)
        self.visit_children(s)


def _loops_named(stmt, name):
    v = _LoopsNamed(name)
    v.visit(stmt)
    return v.found


@settings(max_examples=40, deadline=None)
@given(cells=st.integers(1, 9), size=st.integers(1, 30), shift=st.integers(-6, 6), taps=st.sampled_from([4, 20]))
def test_a_boundary_clamp_inlined_in_a_reduction_leaves_the_steady_state(cells, size, shift, taps):
    """bilateral_grid's histogram: each cell sums `taps` pixels of a repeat_edge input (clamp(
    likely(taps * x + r - shift), ...) below an inlined Let). With a short reduction loop (4
    iterations) the loop over cells is partitioned, as Halide does: its steady state reads
    without the clamp for every r, and the 4-iteration loops are left whole; with a long one
    (20) the reduction loop itself is. Either way the result is the clamped sum."""
    data = np.arange(size, dtype=np.int32) * 3 + 1
    r = hl.RDom([hl.Range(0, taps)], "bc_r")
    p = hl.Param(hl.Int(32), "bc_shift")
    p.set(shift)
    f = hl.Func("bc_sum")
    f[x] = 0
    f[x] += hl.BoundaryConditions.repeat_edge(hl.Buffer(data, "bc_in"))[taps * x + r.x - p]
    f.update(0).reorder(r.x, x)
    stmt = _final_stmt(f)
    cell_loops, tap_loops = _loops_named(stmt, "bc_sum.s1.x"), _loops_named(stmt, "bc_sum.s1.bc_r$x")
    if taps == 4:
        # prologue, steady state (no clamp), epilogue
        assert len(cell_loops) == 3 and _count(cell_loops[1].body, ir.Min, ir.Max) == 0
        assert len(tap_loops) == 3 and all(ir.const_int(lp.extent) == 4 for lp in tap_loops)
    else:
        assert len(cell_loops) == 1 and len(tap_loops) == 3 and _count(tap_loops[1].body, ir.Min, ir.Max) == 0
    got = np.asarray(f.realize([cells]))
    want = [sum(data[np.clip(taps * c + k - shift, 0, size - 1)] for k in range(taps)) for c in range(cells)]
    np.testing.assert_array_equal(got, want)


def test_a_division_settled_in_one_loop_range_is_not_reused_in_another():
    """The simplifier settles `(39 - xi) / 6` to a constant inside a loop over xi; simplified once
    with xi in [0, 4) (6) it must still be worked out again with xi in [4, 6) (5). The answer
    was kept on the node as if no loop range had decided it, so a partitioned loop's epilogue
    (after its prologue) kept the steady state's extent: a GuardWithIf tail ran unguarded."""
    from pyhalide.simplify import simplify

    i32 = ir.Int(32)
    xi = ir.Variable("xi")
    e = ir.Div(ir.Sub(ir.make_const(i32, 39), xi), ir.make_const(i32, 6))

    def loop(lo, extent):
        return ir.For("xi", ir.make_const(i32, lo), ir.make_const(i32, extent), ir.SERIAL,
                      ir.Evaluate(ir.Call(i32, "f", (e,), ir.EXTERN)))

    first, second = simplify(ir.make_block([loop(0, 4), loop(4, 2)])).stmts
    assert ir.const_int(first.body.value.args[0]) == 6 and ir.const_int(second.body.value.args[0]) == 5


def test_a_histograms_tiled_rvar_keeps_its_guard_in_the_partitioned_tail():
    """Found by the schedule fuzz: a histogram's update tiled 6 x 1 (40 columns: a guarded tail),
    its column loop outermost and the padded input computed inside it with aligned bounds. The
    outer loop's epilogue (columns 4 and 5 of each tile) ran the last tile too: 60 extra counts."""
    img = (np.arange(30 * 40).reshape(30, 40) * 37 % 251).astype(np.uint8)
    inp = hl.Buffer(img, name="tiled_hist_in")
    padded = hl.BoundaryConditions.repeat_edge(inp)
    r = hl.RDom([(0, 40), (0, 30)], name="thr")
    hist = hl.Func("tiled_hist")
    hist[x] = 0
    hist[hl.clamp(hl.i32(padded[r.x, r.y]) % 53 - 3, 0, 47)] += 1
    rxi, ryi = hl.RVar("rxi"), hl.RVar("ryi")
    hist.update(0).tile(r.x, r.y, rxi, ryi, 6, 1, hl.TailStrategy.Auto).reorder(ryi, r.y, rxi)
    padded.compute_at(hist, rxi).align_bounds(padded.args()[0], 2, 0)
    want = np.bincount(np.clip(img.astype(np.int64) % 53 - 3, 0, 47).ravel(), minlength=48)
    assert np.array_equal(np.asarray(hist.realize([48])), want)


def _loop_kinds(stmt, prefix):
    """(for_type, whether an IfThenElse is its body) of each loop named prefix + something."""
    found = []

    class _Visit(IRVisitor):
        def visit_For(self, s):
            if s.name.startswith(prefix):
                found.append((s.name[len(prefix):], s.for_type, isinstance(s.body, ir.IfThenElse)))
            self.visit_children(s)

    _Visit().visit(stmt)
    return found


def _edge_read(name):
    """g(x, y) = 3 * in(clamp(x), clamp(y)) + x: a 10 x 10 image read through repeat_edge, and
    what it should be over [-3, 17) x [-4, 16)."""
    inp = hl.Func(name + "_in")
    inp[x, y] = x + 2 * y
    inp.compute_root()
    g = hl.Func(name)
    g[x, y] = hl.BoundaryConditions.repeat_edge(inp, [(0, 10), (0, 10)])[x, y] * 3 + x
    yy, xx = np.mgrid[-4:16, -3:17]
    return g, 3 * (np.clip(xx, 0, 9) + 2 * np.clip(yy, 0, 9)) + xx


@pytest.mark.parametrize("policy, loops", [
    # Auto: the clamps of x leave the steady state of the innermost loop only
    ("auto", {"x": 3, "y": 1}),
    ("never x", {"x": 1, "y": 1}),
    ("never all", {"x": 1, "y": 1}),
    # Always: y too (its prologue, steady state and epilogue each hold x's three loops)
    ("always y", {"x": 9, "y": 3}),
    ("always y, never x", {"x": 3, "y": 3}),
    ("always all", {"x": 9, "y": 3}),
    ("parallel y", {"x": 3, "y": 1}),
    # a parallel loop is partitioned by an if in its body: a copy of x's loops in each branch
    ("parallel always y", {"x": 6, "y": 1}),
])
def test_partition_policies_decide_which_loops_are_partitioned(policy, loops):
    """hl.Partition.Never leaves a loop whole, Always partitions it where Auto's heuristics would
    not (an outer loop, a parallel one), as Halide's policies do; what is computed is the same."""
    name = "pp_" + policy.replace(" ", "_").replace(",", "")
    g, want = _edge_read(name)
    if "never x" in policy:
        g.partition(x, hl.Partition.Never)
    if "parallel" in policy:
        g.parallel(y)
    if "always y" in policy:
        g.always_partition(y)
    if policy == "never all":
        g.never_partition_all()
    if policy == "always all":
        g.always_partition_all()
    found = _loop_kinds(_final_stmt(g), name + ".s0.")
    assert {v: sum(n == v for n, _, _ in found) for v in "xy"} == loops, found
    if "parallel" in policy:
        [(_, kind, if_body)] = [f for f in found if f[0] == "y"]
        assert kind == ir.PARALLEL and if_body == ("always" in policy)
    out = hl.Buffer(hl.Int(32), [20, 20])
    out.set_min([-3, -4])
    g.realize(out)
    np.testing.assert_array_equal(np.asarray(out), want)


def test_partition_always_fails_where_there_is_nothing_to_partition():
    """Halide's message, with the loop's name; a vectorized loop set to Always is gone before
    loops are partitioned (as in Halide: no error); a GuardWithIf tail's outer loop partitions
    (Always) or stays whole (Never)."""
    f = hl.Func("pa_nothing")
    f[x, y] = x + y
    f.partition(x, hl.Partition.Always)
    with pytest.raises(hl.CompileError, match=r"^Loop Partition Policy is set to Always for pa_nothing\.s0\.x, "
                                              r"but no loop partitioning was performed\.$"):
        f.realize([8, 8])
    g = hl.Func("pa_all")
    g[x, y] = x + y
    g.always_partition_all()
    with pytest.raises(hl.CompileError, match=r"Always for pa_all\.s0\.x, but no loop partitioning"):
        g.realize([8, 8])
    h = hl.Func("pa_vector")
    h[x, y] = x + y
    h.vectorize(x, 4).partition(x, hl.Partition.Always)
    np.testing.assert_array_equal(np.asarray(h.realize([8, 8])), np.add.outer(np.arange(8), np.arange(8)))
    for policy, xo_loops in ((hl.Partition.Always, 3), (hl.Partition.Never, 1)):
        t = hl.Func(f"pa_tail_{policy}")
        t[x] = x * 2
        t.split(x, xo, xi, 8, hl.TailStrategy.GuardWithIf).partition(xo, policy)
        np.testing.assert_array_equal(np.asarray(t.realize([20])), 2 * np.arange(20))
        assert sum(n == "x.xo" for n, _, _ in _loop_kinds(_final_stmt(t), f"pa_tail_{policy}.s0.")) == xo_loops
