"""hl.require(condition, value, error_args...): the value where the condition holds; where it
fails, the pipeline stops with "Requirement Failed: (condition) values...", the values those at
the first point that failed (Halide's require, as a precondition checked while computing)."""

from __future__ import annotations

import numpy as np
import pytest

import pyhalide as hl
from pyhalide import reference


def _guarded(schedule=None):
    p = hl.Param(hl.Int(32), "limit", 10)
    x, y = hl.Var("x"), hl.Var("y")
    f = hl.Func("checked")
    f[x, y] = hl.require(x + y < p, hl.f32(x * 10 + y) / 4, "at", x, y, "the value would be", hl.f32(x) / 2)
    out = hl.Func("out")
    out[x, y] = f[x, y] + 1
    if schedule:
        schedule(f, out, x, y)
    return p, out


SCHEDULES = {
    "inline": None,
    "root, vectorized": lambda f, out, x, y: f.compute_root().vectorize(x, 4),
    "at out's rows, parallel": lambda f, out, x, y: (f.compute_at(out, y), out.parallel(y).vectorize(x, 8)),
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_the_value_where_the_condition_holds(name):
    """Every point inside the limit: the value, under any schedule (vector lanes included)."""
    p, out = _guarded(SCHEDULES[name])
    got = np.asarray(out.realize([4, 3]))
    xs, ys = np.meshgrid(np.arange(4), np.arange(3))
    np.testing.assert_array_equal(got, ((xs * 10 + ys) / 4 + 1).astype(np.float32))


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_the_first_failing_point_stops_the_pipeline(name):
    """A point past the limit: a HalideError at run time naming the condition, the strings, and
    the values at the first failing point in the loop order (x fastest: x + y = 10 first at
    (7, 3) of a 8x6 output, under every schedule here; vector lanes report their own point)."""
    p, out = _guarded(SCHEDULES[name])
    with pytest.raises(hl.HalideError, match=r"Requirement Failed: \(limit > \(x \+ y\)\) at 7 3 the value would "
                                             r"be 3\.500000"):
        out.realize([8, 6])
    p.set(20)
    assert np.asarray(out.realize([8, 6])).shape == (6, 8)


def test_the_reference_evaluator_checks_it_too():
    """pyhalide.reference (the test oracle) computes the value, and fails the same way."""
    p, out = _guarded()
    np.testing.assert_array_equal(reference.realize([out], [4, 3])[0], np.asarray(out.realize([4, 3])))
    with pytest.raises(hl.HalideError, match=r"Requirement Failed: \(limit > \(x \+ y\)\) at 7 3"):
        reference.realize([out], [8, 6])


def test_bad_arguments_are_refused():
    x = hl.Var("x")
    with pytest.raises(hl.HalideError, match="require: the condition has type int32, not bool"):
        hl.require(x, x)
    with pytest.raises(hl.HalideError, match="at most 8 Expr error arguments"):
        hl.require(x > 0, x, *([x] * 9))


def test_a_require_in_a_gpu_kernel_is_refused(device):
    """A GPU kernel cannot stop the pipeline with an error: refused, on every device, with the
    kernel named."""
    x, xi = hl.Var("x"), hl.Var("xi")
    f = hl.Func("f")
    f[x] = hl.require(x < 100, x * 2)
    f.gpu_tile(x, xi, 8)
    with pytest.raises(hl.HalideError, match="hl.require inside a GPU kernel is not supported"):
        f.realize([16], hl.Target("host-cuda"))
