"""Illegal schedules raise hl.HalideError naming the Func, the stage and the dimension.

Some are refused by the directive itself, some when the pipeline is lowered (realize); the tests
that don't depend on which say so and accept either.
"""

from __future__ import annotations

import numpy as np
import pytest

import pyhalide as hl

pytestmark = pytest.mark.usefixtures("fresh_func_names")  # the messages checked name Funcs "f", "cs"...

x, y = hl.Var("x"), hl.Var("y")
xo, xi, yo, yi = hl.Var("xo"), hl.Var("xi"), hl.Var("yo"), hl.Var("yi")


def pointwise(name="f"):
    f = hl.Func(name)
    f[x, y] = x + y
    return f


def cumsum(name="cs"):
    """f[r] = f[r] + f[r - 1]: each iteration of r reads what the previous one wrote."""
    r = hl.RDom([(1, 9)], name="r")
    f = hl.Func(name)
    f[x] = x
    f[r] = f[r] + f[r - 1]
    return f, r


def transpose_scan(name="ts"):
    """An update over a 2-D RDom that is not an associative reduction (it overwrites)."""
    r = hl.RDom([(0, 4), (0, 3)], name="r2")
    f = hl.Func(name)
    f[x, y] = x * 10 + y
    f[r.x, r.y] = f[r.x, r.y] * 2 + f[r.y, r.x]
    return f, r


# ----------------------------------------------------------------------------- loop structure
def test_split_of_unknown_var():
    f = pointwise()
    with pytest.raises(hl.HalideError, match=r"In schedule for f\.s0: split of unknown dimension z") as e:
        f.split(hl.Var("z"), xo, xi, 4)
    assert "y, x" in str(e.value)  # the loops that do exist, outermost first


def test_split_of_unknown_var_in_update():
    f, r = cumsum()
    with pytest.raises(hl.HalideError, match=r"In schedule for cs\.s1: split of unknown dimension x "):
        f.update(0).split(x, xo, xi, 2)  # the update's only loop is r


def test_split_of_a_var_already_split_away():
    f = pointwise()
    f.split(x, xo, xi, 4)
    with pytest.raises(hl.HalideError, match=r"In schedule for f\.s0: split of unknown dimension x "):
        f.split(x, hl.Var("a"), hl.Var("b"), 2)


@pytest.mark.parametrize("factor", [0, -3])
def test_split_factor_must_be_positive(factor):
    f = pointwise()
    with pytest.raises(hl.HalideError, match=rf"In schedule for f\.s0: split of x: the split factor must be "
                                             rf"positive, got {factor}"):
        f.split(x, xo, xi, factor)


@pytest.mark.parametrize("method,what", [("vectorize", "the vector width"), ("unroll", "the unroll factor"),
                                         ("parallel", "the task size")])
def test_loop_kind_factors_must_be_positive(method, what):
    f = pointwise()
    with pytest.raises(hl.HalideError, match=rf"In schedule for f\.s0: {method} of x: {what} must be positive, "
                                             r"got 0"):
        getattr(f, method)(x, 0)


def test_split_into_the_same_name_twice():
    f = pointwise()
    with pytest.raises(hl.HalideError, match=r"In schedule for f\.s0: split of x needs two different names"):
        f.split(x, xi, xi, 4)


def test_split_into_a_name_already_used():
    f = pointwise()
    with pytest.raises(hl.HalideError, match=r"In schedule for f\.s0: split of x would create a second dimension "
                                             r"named y"):
        f.split(x, y, xi, 4)


def test_fuse_with_itself():
    f = pointwise()
    with pytest.raises(hl.HalideError, match=r"In schedule for f\.s0: can't fuse x with itself"):
        f.fuse(x, x, hl.Var("t"))


def test_reorder_names_a_dimension_twice():
    f = pointwise()
    with pytest.raises(hl.HalideError, match=r"In schedule for f\.s0: reorder names a dimension twice"):
        f.reorder(x, x)


def test_reorder_of_unknown_var():
    f = pointwise()
    with pytest.raises(hl.HalideError, match=r"In schedule for f\.s0: reorder of unknown dimension c "):
        f.reorder(x, hl.Var("c"))


def test_unknown_tail_strategy():
    f = pointwise()
    with pytest.raises(hl.HalideError, match=r"In schedule for f\.s0: unknown tail strategy 'Sideways'"):
        f.split(x, xo, xi, 4, "Sideways")


# ------------------------------------------------------------------------ RVars and updates
@pytest.mark.parametrize("method,verb", [("vectorize", "vectorize"), ("parallel", "parallelize")])
def test_loop_kind_of_rvar_with_a_carried_dependency(method, verb):
    f, r = cumsum()
    with pytest.raises(hl.HalideError, match=rf"In schedule for cs\.s1: can't {verb} RVar r\$x: different "
                                             r"iterations may write the same element of cs \(a race\)"):
        getattr(f.update(0), method)(r.x)


def test_vectorize_rvar_of_a_histogram_is_a_race():
    img = hl.Buffer(np.arange(12, dtype=np.uint8).reshape(3, 4) % 5, name="hist_src")
    r = hl.RDom(img, name="ri")
    h = hl.Func("h")
    h[x] = 0
    h[hl.i32(img[r.x, r.y])] += 1
    with pytest.raises(hl.HalideError, match=r"In schedule for h\.s1: can't vectorize RVar ri\$x: .*"
                                             r"\.atomic\(\)"):
        h.update(0).vectorize(r.x, 4)


def _loops_and_log(f):
    f.update(0)._stage()  # the stage's loops exist once it is scheduled
    return [(d.name, d.for_type) for d in f._schedule.stages[1].dims], list(f._schedule.log)


@pytest.mark.parametrize("method", ["vectorize", "parallel", "tile"])
def test_a_refused_directive_changes_nothing(method):
    """A directive of several steps (split, then mark; splits, then reorder) is applied whole or not
    at all, so the schedule and the log that replays it agree."""
    f, r = transpose_scan("ts_" + method)
    before = _loops_and_log(f)
    with pytest.raises(hl.HalideError):
        if method == "tile":
            # the two splits are legal; putting r.y's inner loop inside r.x's is not
            f.update(0).tile(r.x, r.y, hl.RVar("rxo"), hl.RVar("ryo"), hl.RVar("rxi"), hl.RVar("ryi"), 2, 2,
                             hl.TailStrategy.GuardWithIf)
        else:
            getattr(f.update(0), method)(r.x, 2)
    assert _loops_and_log(f) == before
    f.update(0).split(r.x, hl.RVar("rxo"), hl.RVar("rxi"), 2, hl.TailStrategy.GuardWithIf)  # still schedulable
    assert [d.name for d in f._schedule.stages[1].dims][:2] == ["rxi", "rxo"]


def test_vectorize_rvar_of_a_histogram_after_atomic_is_accepted():
    img = hl.Buffer(np.arange(12, dtype=np.uint8).reshape(3, 4) % 5, name="hist_src2")
    r = hl.RDom(img, name="ra")
    h = hl.Func("h2")
    h[x] = 0
    h[hl.clamp(hl.i32(img[r.x, r.y]), 0, 4)] += 1
    h.update(0).atomic().parallel(r.y)
    assert np.array_equal(np.asarray(h.realize([5])), np.bincount(np.asarray(img).ravel(), minlength=5))


def test_reorder_rvars_of_a_non_associative_update():
    f, r = transpose_scan()
    with pytest.raises(hl.HalideError, match=r"In schedule for ts\.s1: can't reorder RVars r2\$x, r2\$y because it "
                                             r"may change the meaning of the algorithm"):
        f.update(0).reorder(r.y, r.x)


def test_reorder_rvars_of_an_associative_update_is_accepted():
    r = hl.RDom([(0, 4), (0, 3)], name="r3")
    f = hl.Func("assoc")
    f[x] = 0
    f[x] += (x + 1) * r.x + r.y
    f.update(0).reorder(r.y, r.x)
    want = [sum((i + 1) * a + b for a in range(4) for b in range(3)) for i in range(5)]
    assert np.asarray(f.realize([5])).tolist() == want


def test_reorder_race_free_rvars_of_a_non_associative_update_is_accepted():
    """RVars whose distinct values write distinct elements, each update reading only the element it
    writes (Halide's PureRVars), may be reordered whatever the update computes."""
    r = hl.RDom([(0, 4), (0, 3)], name="rp")
    f = hl.Func("pure_rvars")
    f[x, y] = x + y
    f[r.x, r.y] = f[r.x, r.y] * 2 + r.x
    f.update(0).reorder(r.y, r.x)
    yy, xx = np.mgrid[0:3, 0:4]
    np.testing.assert_array_equal(np.asarray(f.realize([4, 3])), (xx + yy) * 2 + xx)


def test_loops_split_and_fused_from_race_free_rvars_may_run_in_parallel():
    """The loops a split or a fuse makes of race-free RVars are race free too (as Halide's
    PureRVar is inherited): parallel and gpu_threads accept them; of a scan's RVar, not."""
    r = hl.RDom([(0, 16), (0, 4)], name="rq")
    f = hl.Func("pure_split")
    f[x, y] = x
    f[r.x, r.y] = f[r.x, r.y] * 3 + r.y
    rxo, rxi, t = hl.RVar("rxo"), hl.RVar("rxi"), hl.RVar("t")
    f.update(0).split(r.x, rxo, rxi, 4).fuse(rxo, r.y, t).parallel(t).parallel(rxi)
    yy, xx = np.mgrid[0:4, 0:16]
    np.testing.assert_array_equal(np.asarray(f.realize([16, 4])), xx * 3 + yy)
    cs, rc = cumsum()
    with pytest.raises(hl.HalideError, match=r"can't parallelize RVar ri: different iterations may write"):
        cs.update(0).split(rc.x, hl.RVar("ro"), hl.RVar("ri"), 2).parallel(hl.RVar("ri"))


def test_reorder_rvars_of_an_update_whose_store_depends_on_its_func():
    """An update that adds 1 where f (read at the RVars) is small is not a reduction whose RVars
    may be reordered: the condition deciding the store reads what earlier iterations wrote."""
    r = hl.RDom([(0, 3), (0, 3)], name="rc")
    f = hl.Func("counted")
    f[x] = x
    f[0] = hl.select(f[r.x + r.y] < 4, f[0] + 1, hl.undef(hl.Int(32)))
    with pytest.raises(hl.HalideError, match=r"In schedule for counted\.s1: can't reorder RVars"):
        f.update(0).reorder(r.y, r.x)


def test_update_reading_other_values_of_a_pure_var_is_refused():
    """Halide's rule: recursive references use each pure Var of the left-hand side in its place."""
    r = hl.RDom([(1, 5)], name="rs0")
    f = hl.Func("wave0")
    f[x, y] = x + y
    with pytest.raises(hl.HalideError, match=r"In update definition 0 of Func wave0: all recursive references to "
                                             r"wave0 must contain the same pure variables in the same places"):
        f[x, r] = f[x, r] + f[x - 1, r - 1]


def test_reorder_pure_var_across_rvar_when_the_update_reads_other_values_of_it():
    # the RDom's predicate reads f at x - 1: an x computed before another x changes what it reads
    r = hl.RDom([(1, 5)], name="rs")
    f = hl.Func("wave")
    f[x, y] = x + y
    r.where(f[x - 1, r - 1] % 2 == 0)
    f[x, r] = f[x, r] + 1
    with pytest.raises(hl.HalideError, match=r"In schedule for wave\.s1: can't reorder pure Var x across RVar rs\$x: "
                                             r"the update reads wave at other values of x"):
        f.update(0).reorder(x, r.x)  # x innermost, r outside it


def test_reorder_split_pure_var_across_rvar_when_the_update_reads_other_values_of_it():
    r = hl.RDom([(1, 5)], name="rs2")
    f = hl.Func("wave2")
    f[x, y] = x + y
    r.where(f[x - 1, r - 1] % 2 == 0)
    f[x, r] = f[x, r] + 1
    f.update(0).split(x, xo, xi, 2)
    with pytest.raises(hl.HalideError, match=r"In schedule for wave2\.s1: can't reorder pure Var \w+ across RVar "
                                             r"rs2\$x"):
        f.update(0).reorder(xi, r.x)


def test_reorder_pure_var_across_rvar_when_the_update_reads_only_its_own_point_is_accepted():
    f, r = hl.Func("rows"), hl.RDom([(1, 5)], name="rr")
    f[x, y] = x * y + 1
    f[r, y] = f[r, y] + f[r - 1, y]  # y is only read at y
    f.update(0).reorder(y, r.x)
    f.realize([6, 3])


@pytest.mark.parametrize("tail", [hl.TailStrategy.RoundUp, hl.TailStrategy.ShiftInwards])
def test_split_rvar_with_a_tail_that_changes_the_domain(tail):
    f, r = cumsum()
    with pytest.raises(hl.HalideError, match=rf"In schedule for cs\.s1: can't split RVar r\$x with TailStrategy "
                                             rf"{tail}"):
        f.update(0).split(r.x, hl.RVar("ro"), hl.RVar("ri"), 4, tail)


def test_shift_inwards_in_an_update():
    """Refused either by split (as Halide does) or when the pipeline is lowered."""
    f = hl.Func("upd")
    f[x] = x
    f[x] += 1
    with pytest.raises(hl.HalideError, match=r"In schedule for upd\.s1: TailStrategy ShiftInwards is not legal in an "
                                             r"update definition"):
        f.update(0).split(x, xo, xi, 4, hl.TailStrategy.ShiftInwards)
        f.realize([10])


def test_round_up_of_an_inner_split_in_an_update():
    """Halide: "Can't use TailStrategy::RoundUp for splitting xi in update definition": the inner
    split would apply the update twice to some points. Refused by split or by lowering."""
    f, g = hl.Func("rup"), hl.Func("rup_out")
    f[x] = x
    f[x] += 1
    g[x] = f[x]
    f.compute_root()
    with pytest.raises(hl.HalideError, match=r"rup.*RoundUp"):
        f.update(0).split(x, xo, xi, 8).split(xi, hl.Var("xio"), hl.Var("xii"), 3, hl.TailStrategy.RoundUp)
        g.realize([10])


def test_round_up_of_what_descends_from_an_inner_split_in_an_update():
    """As Halide refuses them: the outer loop of a split of an inner dimension, and a fuse with
    one, step through the inner dimension's fixed extent, so rounding them up revisits points."""
    a, b, a0, a1, fused = (hl.Var(n) for n in ("a", "b", "a0", "a1", "fused"))
    f = hl.Func("rup_outer")
    f[x, y] = x + y
    f[x, y] += 1
    with pytest.raises(hl.HalideError, match=r"rup_outer.*RoundUp for splitting x\.xi\.a"):
        f.update(0).split(x, xo, xi, 8).split(xi, a, b, 1).split(a, a0, a1, 3, hl.TailStrategy.RoundUp)
        f.realize([16, 2])
    g = hl.Func("rup_fused")
    g[x, y] = x + y
    g[x, y] += 1
    with pytest.raises(hl.HalideError, match=r"rup_fused.*RoundUp"):
        g.update(0).split(x, xo, xi, 8).fuse(xi, y, fused).split(fused, a0, a1, 3, hl.TailStrategy.RoundUp)
        g.realize([16, 2])


def test_auto_tail_of_an_inner_split_in_an_update_is_correct():
    """Halide resolves Auto to GuardWithIf there; whatever it resolves to, no point is updated twice."""
    f, g = hl.Func("auto_in"), hl.Func("auto_out")
    f[x] = x
    f[x] += 1
    g[x] = f[x]
    f.compute_root()
    f.update(0).split(x, xo, xi, 8).split(xi, hl.Var("xio"), hl.Var("xii"), 3)
    assert np.asarray(g.realize([10])).tolist() == list(range(1, 11))


# ------------------------------------------------------------------------------- placement
def producer_consumer():
    f, g = hl.Func("prod"), hl.Func("cons")
    f[x, y] = x * y
    g[x, y] = f[x, y] + f[x + 1, y]
    return f, g


def test_compute_at_a_loop_the_consumer_does_not_have():
    f, g = producer_consumer()
    f.compute_at(g, hl.Var("z"))
    with pytest.raises(hl.HalideError, match=r"Func prod is computed at cons\.s0\.z, but stage 0 of cons has no loop "
                                             r"z \(its loops, outermost first, are: y, x\)"):
        g.realize([4, 4])


@pytest.mark.parametrize("store_outside", [False, True])
def test_a_use_outside_the_loop_computing_it_is_refused(store_outside):
    """f computed per x of out, but read by g, computed per y of out (before that x loop runs):
    refused, as Halide refuses it, also when f is stored at y (its storage then encloses the use,
    but nothing has been computed into it yet: the JIT read garbage there)."""
    f, g, out = hl.Func("f"), hl.Func("g"), hl.Func("out")
    f[x, y] = x + y
    g[x, y] = f[x, y] * 2
    out[x, y] = g[x, y] + f[x, y]
    g.compute_at(out, y)
    f.compute_at(out, x)
    if store_outside:
        f.store_at(out, y)
    with pytest.raises(hl.CompileError, match=r"Func f is computed at LoopLevel\(out, x, stage -1\), but it is also "
                                              r"used outside that loop"):
        out.realize([3, 3])


def test_storage_at_a_loop_a_specialization_split_away_is_refused():
    """f stored at out.y and computed at out.x, where a specialization of out splits y: in that
    branch f has no storage (Halide refuses it too; pyhalide's code generator failed on it)."""
    f, out = hl.Func("f"), hl.Func("out")
    f[x, y] = x * y
    out[x, y] = f[x, y] + 1
    sel = hl.Param(hl.Int(32), "sel", 0)
    out.specialize(sel >= 1).split(y, yo, yi, 2)
    f.compute_at(out, x).store_at(out, y)
    with pytest.raises(hl.CompileError, match=r"Func f is computed at LoopLevel\(out, x, stage -1\), but it is also "
                                              r"used outside that loop"):
        out.realize([3, 3])


def test_compute_at_a_loop_split_away():
    f, g = producer_consumer()
    g.split(x, xo, xi, 2)
    f.compute_at(g, x)
    with pytest.raises(hl.HalideError, match=r"Func prod is computed at cons\.s0\.x, but stage 0 of cons has no loop "
                                             r"x \(its loops, outermost first, are: y, xo, xi\)"):
        g.realize([4, 4])


def test_compute_at_a_stage_that_does_not_exist():
    f, g = producer_consumer()
    f.compute_at(hl.LoopLevel(g, x, 3))
    with pytest.raises(hl.HalideError, match=r"Func prod is computed at stage 3 of cons, which has 1 stages"):
        g.realize([4, 4])


def test_compute_at_a_func_that_is_inlined():
    f, g = producer_consumer()
    h = hl.Func("top")
    h[x, y] = g[x, y] * 2
    f.compute_at(g, x)  # g is inlined into h by default
    with pytest.raises(hl.HalideError, match=r"Func prod is computed at cons\.x, but cons is inlined"):
        h.realize([4, 4])


def test_compute_at_a_func_not_in_the_pipeline():
    f, g = producer_consumer()
    other = pointwise("other")
    f.compute_at(other, x)
    with pytest.raises(hl.HalideError, match=r"Func prod is computed at other, which is not used by this pipeline"):
        g.realize([4, 4])


def test_compute_at_a_loop_that_does_not_enclose_all_uses():
    f, g = producer_consumer()
    h = hl.Func("user2")
    h[x, y] = g[x, y] + f[x, y]
    g.compute_root()
    f.compute_at(g, x)  # h uses f too, outside g's loops
    with pytest.raises(hl.HalideError, match=r"Func prod is computed at .*cons.*, but it is also used outside that "
                                             r"loop"):
        h.realize([4, 4])


def test_store_inside_compute():
    f, g = producer_consumer()
    f.compute_at(g, y).store_at(g, x)
    with pytest.raises(hl.HalideError, match=r"Func prod is stored at .*cons\.s0\.x but computed at .*cons\.s0\.y, "
                                             r"which is not inside it: the store level must be at or outside"):
        g.realize([4, 4])


@pytest.mark.parametrize("kind", ["parallel", "vectorized"])
def test_store_outside_a_parallel_or_vectorized_loop_computed_inside_it(kind):
    f, g = producer_consumer()
    g.parallel(y) if kind == "parallel" else g.vectorize(y)
    f.compute_at(g, x).store_root()
    with pytest.raises(hl.HalideError, match=rf"Func prod is stored outside the {kind} loop over cons\.s0\.y but "
                                             r"computed within it. This is a potential race condition"):
        g.realize([4, 4])


def test_compute_at_itself():
    f = pointwise()
    with pytest.raises(hl.HalideError, match=r"Func f can't be computed at a loop of itself"):
        f.compute_at(f, x)


def test_an_output_is_computed_at_root_whatever_its_compute_level():
    """As in Halide: a Func scheduled inside another (or inline) can still be realized on its own."""
    f, g = producer_consumer()
    g.compute_at(f, x)
    want = [[i * j + (i + 1) * j for i in range(4)] for j in range(4)]
    assert np.asarray(g.realize([4, 4])).tolist() == want
    f.store_root().compute_at(g, y).vectorize(x, 4)
    assert np.asarray(f.realize([3, 2])).tolist() == [[0, 0, 0], [0, 1, 2]]
    assert np.asarray(g.realize([4, 4])).tolist() == want  # and, as an intermediate, where it was put
    f.compute_inline()
    assert np.asarray(f.realize([3, 2])).tolist() == [[0, 0, 0], [0, 1, 2]]


def test_func_with_updates_cannot_be_inlined():
    f, g = hl.Func("acc"), hl.Func("acc_out")
    f[x] = x
    f[x] += 2
    g[x] = f[x]
    f.compute_inline()
    with pytest.raises(hl.HalideError, match=r"Func acc has update definitions and cannot be inlined"):
        g.realize([4])


def test_inlined_func_with_vectorized_loops():
    f, g = producer_consumer()
    f.vectorize(x, 4)
    with pytest.raises(hl.HalideError, match=r"Cannot vectorize dimension x\.v\.?\d+ of function prod because the "
                                            r"function is scheduled inline"):
        g.realize([8, 4])


def test_inlined_func_with_split_loops_warns_as_halide_does(capsys):
    """Halide ignores the splits of an inlined Func, with a warning on stdout."""
    f, g = producer_consumer()
    xo, xi = hl.Var("xo"), hl.Var("xi")
    f.split(x, xo, xi, 4)
    want = np.asarray(producer_consumer()[1].realize([8, 4]))
    assert np.array_equal(np.asarray(g.realize([8, 4])), want)
    assert "Warning: It is meaningless to split variable x of function prod into x.xo * 4 + x.xi because prod is " \
        "scheduled inline." in capsys.readouterr().out


# ------------------------------------------------------------------------- Func-level directives
def test_bound_of_a_var_the_func_does_not_have():
    f = pointwise()
    with pytest.raises(hl.HalideError, match=r"Func f\.bound: c is not a pure Var of f \(its Vars are x, y\)"):
        f.bound(hl.Var("c"), 0, 4)


def test_bound_with_negative_extent():
    f = pointwise()
    with pytest.raises(hl.HalideError, match=r"Func f\.bound: extent of x must be non-negative, got -1"):
        f.bound(x, 0, -1)


def test_align_bounds_modulus_must_be_positive():
    f = pointwise()
    with pytest.raises(hl.HalideError, match=r"Func f\.align_bounds of x: the modulus must be positive, got 0"):
        f.align_bounds(x, 0)


def test_reorder_storage_names_a_var_twice():
    f = pointwise()
    with pytest.raises(hl.HalideError, match=r"Func f\.reorder_storage names a Var twice"):
        f.reorder_storage(x, x)


def test_reorder_storage_of_unknown_var():
    f = pointwise()
    with pytest.raises(hl.HalideError, match=r"Func f\.reorder_storage: c is not a pure Var of f"):
        f.reorder_storage(hl.Var("c"), x)
