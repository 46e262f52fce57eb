"""Cases a review of this session's fixes found, each written with the result Halide 21 gives
(checked side by side with `import halide`): undef in an RDom predicate, sites undef under
different conditions, a Param split twice by the same factor, a race test whose coefficients
cancel, and the bounds of a narrow division."""

from __future__ import annotations

import numpy as np
import pytest

import pyhalide as hl

x = hl.Var("x")


def test_undef_in_an_rdom_predicate_keeps_its_defined_part():
    """h(x) = select(x even, x, undef) inlined into where(h(r) > 2): the condition is r > 2 (the
    undef arm drops out, as Halide's RemoveUndef leaves a branch condition); it crashed codegen."""
    h, f = hl.Func("h"), hl.Func("f")
    h[x] = hl.select(x % 2 == 0, x, hl.undef(hl.Int(32)))
    f[x] = 0
    r = hl.RDom([(0, 8)])
    r.where(h[r.x] > 2)
    f[r.x] = f[r.x] + 100
    assert np.asarray(f.realize([8])).tolist() == [0, 0, 0, 100, 100, 100, 100, 100]


def test_store_sites_undef_under_different_conditions_are_refused():
    """As Halide: a store's coordinates conditionally undef must share their condition."""
    y = hl.Var("y")
    f = hl.Func("f")
    f[x, y] = (0, 0)
    r = hl.RDom([(0, 10)])
    a0 = hl.clamp(hl.select(r.x < 2, 13, hl.undef(hl.Int(32))), 0, 20)
    a1 = hl.clamp(hl.select(r.x < 5, 23, hl.undef(hl.Int(32))), 0, 20)
    f[a0, a1] = (f[a0, a1][0] + 10, f[a0, a1][1] + 5)
    with pytest.raises(hl.HalideError, match="should have the same conditions"):
        f.realize([30, 30])


@pytest.mark.parametrize("factor", [3, 4, 10])
def test_a_param_split_split_again_by_the_same_param_rounds_up(factor):
    """split(x, xo, xi, p).split(xo, a, b, p): the second split's Auto tail rounds up, as Halide
    proves (the first split's ShiftInwards already keeps it inside); it read before the output."""
    p = hl.Param(hl.Int(32), "p")
    f = hl.Func("f")
    xo, xi, a, b = hl.Var("xo"), hl.Var("xi"), hl.Var("a"), hl.Var("b")
    f[x] = x + 1
    f.split(x, xo, xi, p).split(xo, a, b, p)
    p.set(factor)
    assert np.asarray(f.realize([10])).tolist() == list(range(1, 11))


def test_the_race_test_drops_coefficients_that_cancel():
    """f(r * (p - p + 2)) = f(2r + 1) + r in parallel: the sites are 2r and 2r' + 1, which never
    meet; the cancelled term of p left the site looking non-affine, and it was refused."""
    p = hl.Param(hl.Int(32), "p")
    f = hl.Func("f")
    f[x] = x
    r = hl.RDom([(0, 8)])
    f[r.x * (p - p + 2)] = f[2 * r.x + 1] + r.x
    f.update().parallel(r.x)
    p.set(5)
    want = np.arange(20)
    want[0:16:2] = want[1:17:2] + np.arange(8)
    assert np.asarray(f.realize([20])).tolist() == want.tolist()


def test_a_narrow_division_by_a_constant_stays_within_the_quotients():
    """int16 h(x) / 1000 lies in [-33, 32] whatever h is (division cannot leave the type): the
    input read at it + 150 is within [117, 182]; it was taken as the whole int16 range."""
    im = hl.ImageParam(hl.Int(32), 1, "im")
    im.set(hl.Buffer(np.arange(300, dtype=np.int32) * 7))
    h, f = hl.Func("h"), hl.Func("f")
    h[x] = hl.cast(hl.Int(16), x - 3) * hl.cast(hl.Int(16), 20000)
    f[x] = im[hl.cast(hl.Int(32), h[x] / 1000) + 150]
    h.compute_root()
    hv = (((np.arange(10) - 3) * 20000 + 2**15) % 2**16 - 2**15)
    want = (np.floor_divide(hv, 1000) + 150) * 7
    assert np.asarray(f.realize([10])).tolist() == want.tolist()


@pytest.mark.parametrize("constrain, want", [
    (lambda o: o.dim(0).set_extent(5), (0, 9)),
    (lambda o: o.dim(0).set_bounds(2, 5), (2, 9)),
    (lambda o: o.dim(0).set_min(o.dim(0).extent() - 10), (3, 17)),
    (lambda o: o.dim(0).set_min(-o.dim(0).extent()), (-13, 17)),
])
def test_a_bounds_query_takes_the_outputs_constraints(constrain, want):
    """infer_input_bounds(sizes) queries the output too (a bounds-query buffer): its constraints
    give its shape, smaller or shifted (the input regions as Halide 21 infers them)."""
    x = hl.Var("x")
    im = hl.ImageParam(hl.Int(32), 1, "query_in")
    h = hl.Func("query_out")
    h[x] = im[x] + im[x + 4]
    constrain(h.output_buffer())
    h.infer_input_bounds([13])
    b = im.get()
    assert (b.dim(0).min(), b.dim(0).extent()) == want
