"""hl.propagate_adjoints: every derivative is checked against central finite differences of the
forward pipeline (in Float(64), so the two agree to about 1e-7), which is an oracle independent of
how the adjoints are built; a few hand-derived values follow Halide's own autodiff tests, and the
same pipelines run through the real Halide (when installed) give the same adjoints."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyhalide as hl

F64 = hl.Float(64)


def finite_differences(loss: hl.Func, array: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """d loss / d array, element by element; the array is the memory of a Buffer loss reads."""
    grad = np.zeros_like(array)
    flat, g = array.reshape(-1), grad.reshape(-1)
    for i in range(flat.size):
        keep = flat[i]
        flat[i] = keep + eps
        up = float(np.asarray(loss.realize()))
        flat[i] = keep - eps
        down = float(np.asarray(loss.realize()))
        flat[i] = keep
        g[i] = (up - down) / (2 * eps)
    return grad


def adjoint_of(d: hl.Derivative, buffer: hl.Buffer, array: np.ndarray) -> np.ndarray:
    return np.asarray(d[buffer].realize(list(reversed(array.shape))))


def check_gradient(loss: hl.Func, *inputs: tuple[hl.Buffer, np.ndarray], tol: float = 1e-6):
    d = hl.propagate_adjoints(loss)
    for buffer, array in inputs:
        want = finite_differences(loss, array)
        got = adjoint_of(d, buffer, array)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f"d loss / d {buffer.name()}")
    return d


def total(f: hl.Func, *extents: int) -> hl.Func:
    """A scalar loss: the sum of f over [0, extents)."""
    r = hl.RDom([(0, e) for e in extents])
    loss = hl.Func(f"{f.name()}_loss")
    loss[()] = hl.f64(0)
    loss[()] += f[tuple(r[i] for i in range(len(extents)))] if len(extents) > 1 else f[r.x]
    return loss


def data(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.5, 1.5, size=shape)


# ---------------------------------------------------------------- Halide's Python test
def test_halide_python_autodiff_test():
    """python_bindings/test/correctness/autodiff.py of Halide: the pure definition overwritten at
    0, a Param, and each way of asking for an adjoint."""
    x = hl.Var("x")
    b = hl.Buffer(hl.Float(32), [3])
    p = hl.Param(hl.Float(32), "p", 1)
    b[0], b[1], b[2] = 1.0, 2.0, 3.0
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    f[x] = b[x]
    f[0] = 4.0
    g[x] = f[x] * 5.0 * p
    r = hl.RDom([(0, 3)])
    h[()] = 0.0
    h[()] += g[r.x]
    d = hl.propagate_adjoints(h)
    assert list(np.asarray(d[f].realize([3]))) == [0.0, 5.0, 5.0]
    assert list(np.asarray(d[f, 0].realize([3]))) == [5.0, 5.0, 5.0]
    assert list(np.asarray(d[b].realize([3]))) == [0.0, 5.0, 5.0]
    assert abs(float(np.asarray(d[p].realize())) - 45.0) < 1e-6
    assert d[f].name() == f"{f.name()}_0_d_def__" and d[f, 0].name() == f"{f.name()}_1_d_def__"


# ---------------------------------------------------------------- stencils and boundaries
def test_blur_with_clamped_edges():
    a = data(9)
    inp = hl.Buffer(a, "inp")
    x = hl.Var("x")
    c = hl.Func("c")
    c[x] = inp[hl.clamp(x, 0, 8)]
    b = hl.Func("b")
    b[x] = (c[x - 1] + 2 * c[x] + c[x + 1]) / 4.0
    sq = hl.Func("sq")
    sq[x] = b[x] * b[x]
    d = check_gradient(total(sq, 9), (inp, a))
    blur = np.asarray(b.realize([9]))
    np.testing.assert_allclose(np.asarray(d[b].realize([9])), 2 * blur, rtol=1e-12)


@pytest.mark.parametrize("condition", ["repeat_edge", "constant_exterior", "mirror_image", "mirror_interior",
                                       "repeat_image"])
def test_2d_blur_through_boundary_conditions(condition):
    a = data(5, 6, seed=1)
    inp = hl.Buffer(a, "inp")
    bc = getattr(hl.BoundaryConditions, condition)
    c = bc(inp, hl.f64(0.25)) if condition == "constant_exterior" else bc(inp)
    x, y = hl.Var("x"), hl.Var("y")
    bx = hl.Func("bx")
    bx[x, y] = c[x - 1, y] + c[x, y] * 2 + c[x + 2, y]
    by = hl.Func("by")
    by[x, y] = hl.sin(bx[x, y - 1] + bx[x, y + 1]) * bx[x, y]
    check_gradient(total(by, 6, 5), (inp, a))


def test_resampling_transpose_and_division():
    a = data(6, 8, seed=2)
    inp = hl.Buffer(a, "inp")
    x, y = hl.Var("x"), hl.Var("y")
    t = hl.Func("t")
    t[x, y] = inp[y, x]  # a transpose: t is 6 wide, 8 high
    down = hl.Func("down")
    down[x, y] = t[2 * x, y] + t[2 * x + 1, y] / (1.0 + t[2 * x, y])
    up = hl.Func("up")
    up[x, y] = hl.lerp(down[x // 2, y], down[(x + 1) // 2, y], hl.f64(0.25)) * hl.f64(x + 1)
    check_gradient(total(up, 5, 8), (inp, a))


def test_math_functions():
    a = data(7, seed=3) * 0.5 + 0.1  # inside every function's domain
    inp = hl.Buffer(a, "inp")
    x = hl.Var("x")
    v = inp[x]
    f = hl.Func("f")
    f[x] = (hl.sqrt(v) + hl.exp(v) + hl.log(v) + hl.sin(v) * hl.cos(v) + hl.tan(v) + hl.asin(v) + hl.acos(v / 2)
            + hl.atan(v) + hl.sinh(v) + hl.cosh(v) + hl.tanh(v) + hl.asinh(v) + hl.acosh(v + 1.5) + hl.atanh(v / 2)
            + hl.erf(v) + hl.pow(v, v + 1) + hl.atan2(v, v * v + 1) + hl.hypot(v, 2 * v) + hl.abs(v - hl.f64(0.6))
            + hl.max(v, hl.f64(0.7)) * hl.min(v, hl.f64(0.6)) + hl.select(v > 0.5, v * v, -v) + hl.floor(v * 3) * v
            + v % hl.f64(0.3) + hl.fast_inverse(v))
    check_gradient(total(f, 7), (inp, a), tol=1e-5)


def test_integer_parts_carry_no_derivative():
    a = data(6, seed=4)
    inp = hl.Buffer(a, "inp")
    x = hl.Var("x")
    idx = hl.Func("idx")
    idx[x] = hl.i32(inp[x] * 3) % 6  # data-dependent, integer: no derivative flows through it
    f = hl.Func("f")
    f[x] = inp[idx[x]] * inp[x] + hl.f64(idx[x])
    check_gradient(total(f, 6), (inp, a))


def test_shared_subexpressions_in_call_arguments():
    """A definition's common subexpressions become lets (CSE): the calls' arguments inside them
    must be seen whole by the forward bounds."""
    a = data(8, seed=18)
    inp = hl.Buffer(a, "inp")
    x = hl.Var("x")
    c = hl.Func("c")
    c[x] = inp[hl.clamp(x, 0, 7)]
    at = (x * 3 + 1) % 8
    f = hl.Func("f")
    f[x] = c[at] * c[at] + hl.sin(c[at + 1]) * c[at]
    check_gradient(total(f, 8), (inp, a))


# ---------------------------------------------------------------- updates
def test_additive_update_and_rdom_convolution():
    a, k = data(8, seed=5), data(3, seed=6)
    inp, kernel = hl.Buffer(a, "inp"), hl.Buffer(k, "kernel")
    x = hl.Var("x")
    c = hl.Func("c")
    c[x] = inp[hl.clamp(x, 0, 7)]
    s = hl.RDom([(0, 3)])
    conv = hl.Func("conv")
    conv[x] = hl.f64(0)
    conv[x] += c[x + s.x] * kernel[s.x]
    sq = hl.Func("sq")
    sq[x] = conv[x] * conv[x]
    check_gradient(total(sq, 8), (inp, a), (kernel, k))


def test_histogram_scatter():
    """Halide's test_histogram: an additive update at data-dependent points."""
    x = hl.Var("x")
    index = hl.Buffer(np.array([2, 2, 1, 3], dtype=np.int32), "index")
    k = hl.Buffer(np.array([0.5, 1.0, 1.5, 2.0, 2.5], dtype=np.float32), "k")
    hist = hl.Func("hist")
    hist[x] = 0.0
    r = hl.RDom([(0, 4)])
    hist[hl.clamp(index[r.x], 0, 3)] += k[r.x]
    rd = hl.RDom([(0, 4)])
    loss = hl.Func("loss")
    loss[()] = 0.0
    loss[()] += hist[rd.x] * hl.f32(rd.x + 1)
    d = hl.propagate_adjoints(loss)
    assert list(np.asarray(d[k].realize([5]))) == [3.0, 3.0, 2.0, 4.0, 0.0]


def test_overwriting_updates():
    """Halide's test_sparse_update and test_rdom_update: points an update overwrites pass nothing back
    to what the pure definition read there."""
    a = data(5, seed=7)
    inp = hl.Buffer(a, "inp")
    x = hl.Var("x")
    fi = hl.Func("fi")
    fi[x] = inp[x]
    out = hl.Func("out")
    out[x] = fi[x] * fi[x]
    out[1] = hl.f64(0)
    out[2] = 2.0 * fi[1] * fi[3]
    r0, r1 = hl.RDom([(3, 2)]), hl.RDom([(0, 1)])
    out[r0.x] = inp[r0.x - 1] * 3.0 + out[r0.x]
    out[r1.x] = out[r1.x] * out[r1.x]
    check_gradient(total(out, 5), (inp, a))


def test_max_pooling_routes_the_adjoint_to_the_first_winner():
    """hl.maximum over a window (max pooling): the adjoint goes to the first element, in the RDom's
    order, that no earlier one equals (ReLU's zeros tie)."""
    a = data(8, 6, seed=19) - 0.9
    inp = hl.Buffer(a, "inp")
    x, y = hl.Var("x"), hl.Var("y")
    relu = hl.Func("relu")
    relu[x, y] = hl.max(inp[x, y], hl.f64(0))
    r = hl.RDom([(0, 2), (0, 2)])
    pool = hl.Func("pool")
    pool[x, y] = hl.maximum(relu[2 * x + r.x, 2 * y + r.y])
    out = hl.Func("out")
    out[x, y] = pool[x, y] * pool[x, y] * hl.f64(x + 2 * y + 1)
    loss = total(out, 3, 4)
    d = check_gradient(loss, (inp, a))
    want = np.zeros_like(a)
    for py in range(4):
        for px in range(3):
            window = np.maximum(a[2 * py:2 * py + 2, 2 * px:2 * px + 2], 0)
            ry, rx = np.unravel_index(np.argmax(window), window.shape)  # the first, row by row
            if a[2 * py + ry, 2 * px + rx] > 0:
                want[2 * py + ry, 2 * px + rx] = 2 * window.max() * (px + 2 * py + 1)
    np.testing.assert_allclose(adjoint_of(d, inp, a), want, rtol=1e-12)


def test_min_reduction_from_a_starting_value_that_wins_ties():
    a, b = data(6, seed=20), data(8, seed=21)
    start, inp = hl.Buffer(a, "start"), hl.Buffer(b, "inp")
    x = hl.Var("x")
    r = hl.RDom([(0, 3)])
    low = hl.Func("low")
    low[x] = start[x] * hl.f64(0.9)
    low[x] = hl.min(low[x], hl.sin(inp[x + r.x]) + hl.f64(0.5))
    loss = total(low, 6)
    check_gradient(loss, (start, a), (inp, b))
    tied = hl.Func("tied")
    tied[x] = hl.f64(1)
    tied[x] = hl.max(tied[x], hl.min(inp[x + r.x], hl.f64(1)))  # never above 1: the start keeps it
    d = hl.propagate_adjoints(total(tied, 6))
    assert np.asarray(d[inp].realize([8])).tolist() == [0.0] * 8


def test_update_reading_the_point_it_writes():
    """f(x) = f(x) * f(x) needs f as it was before the update (Halide refuses this one)."""
    a = data(4, seed=8)
    inp = hl.Buffer(a, "inp")
    x, y = hl.Var("x"), hl.Var("y")
    f = hl.Func("f")
    f[x] = inp[x]
    f[x] = f[x] * f[x] + inp[x]
    f[x] = hl.sin(f[x])
    g = hl.Func("g")
    g[x, y] = hl.f64(0)
    g[x, 0] = f[x]
    g[x, 1] = g[x, 0] * g[x, 0] + f[x]
    check_gradient(total(g, 4, 2), (inp, a))


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_scans(direction):
    """Halide's test_horner_polynomial and test_nonlinear_order_dependent_rdom: each iteration
    reads what the one before wrote, so adjoints flow back through a reverse scan."""
    co, a = data(6, seed=9), data(3, seed=10)
    coeffs, inp = hl.Buffer(co, "coeffs"), hl.Buffer(a, "inp")
    x, y = hl.Var("x"), hl.Var("y")
    r = hl.RDom([(0, 6)])
    poly = hl.Func("poly")
    poly[x, y] = inp[x]
    if direction == "forward":
        poly[x, r.x + 1] = hl.tanh(poly[x, r.x]) * poly[x, r.x] + coeffs[r.x] * hl.f64(x + 1)
        last = 6
    else:
        poly[x, 5 - r.x] = hl.sin(poly[x, 6 - r.x]) * hl.f64(x + 1) + coeffs[r.x] * poly[x, 7 - r.x]
        last = 0
    final = hl.Func("final")
    final[x] = poly[x, last]
    check_gradient(total(final, 3), (inp, a), (coeffs, co))


def test_scan_along_the_outer_rvar_of_two():
    """Each r.x is its own chain; the scan runs along r.y (the outer RVar), reversed in the adjoint."""
    a, w = data(4, seed=16), data(3, seed=17)
    inp, weights = hl.Buffer(a, "inp"), hl.Buffer(w, "weights")
    x, y = hl.Var("x"), hl.Var("y")
    r = hl.RDom([(0, 4), (0, 3)])
    chain = hl.Func("chain")
    chain[x, y] = hl.f64(0)
    chain[x, 0] = inp[x]
    chain[r.x, r.y + 1] = hl.sin(chain[r.x, r.y]) * weights[r.y] + inp[r.x] * 0.5
    last = hl.Func("last")
    last[x] = chain[x, 3] * chain[x, 2]
    check_gradient(total(last, 4), (inp, a), (weights, w))


def test_tuples_and_params():
    a = data(5, seed=11)
    inp = hl.Buffer(a, "inp")
    p = hl.Param(F64, "p", 1.5)
    x = hl.Var("x")
    t = hl.Func("t")
    t[x] = (inp[x] * p, hl.exp(inp[x]) - p)
    t[x] = (t[x][0] + t[x][1], t[x][1] * 2.0)
    f = hl.Func("f")
    f[x] = t[x][0] * t[x][1] + hl.sqrt(t[x][1] * t[x][1] + 1)
    loss = total(f, 5)
    d = check_gradient(loss, (inp, a))
    eps = 1e-6
    p.set(1.5 + eps)
    up = float(np.asarray(loss.realize()))
    p.set(1.5 - eps)
    down = float(np.asarray(loss.realize()))
    p.set(1.5)
    assert abs(float(np.asarray(d[p].realize())) - (up - down) / (2 * eps)) < 1e-5


def test_rdom_predicate_and_two_dimensional_rdom():
    a = data(6, 6, seed=12)
    inp = hl.Buffer(a, "inp")
    r = hl.RDom([(0, 6), (0, 6)])
    r.where(r.x + r.y < 7)
    loss = hl.Func("loss")
    loss[()] = hl.f64(0)
    loss[()] += inp[r.x, r.y] * inp[r.y, r.x] * hl.f64(r.x + 1)
    check_gradient(loss, (inp, a))


def test_inline_reductions_and_a_select_guard():
    a = data(7, seed=13)
    inp = hl.Buffer(a, "inp")
    x = hl.Var("x")
    r = hl.RDom([(-1, 3)])
    f = hl.Func("f")
    f[x] = hl.sum(inp[hl.clamp(x + r.x, 0, 6)] * hl.f64(r.x + 2))
    g = hl.Func("g")
    g[x] = hl.select(x > 2, f[x] / inp[x], f[x] * 0.5)  # Halide's test_select_guard
    check_gradient(total(g, 7), (inp, a))


def test_custom_adjoint_and_region():
    """propagate_adjoints(f, buffer) and (f, func, [(min, max), ...]): Halide's Region here is
    (min, max), inclusive."""
    a = data(4, 3, seed=14)
    inp = hl.Buffer(a, "inp")
    x, y = hl.Var("x"), hl.Var("y")
    f = hl.Func("f")
    f[x, y] = inp[x, y] * inp[x, y]
    weights = np.arange(12, dtype=np.float64).reshape(4, 3)
    d = hl.propagate_adjoints(f, hl.Buffer(weights, "w"))
    np.testing.assert_allclose(adjoint_of(d, inp, a), 2 * a * weights)
    adj = hl.Func("adj")
    adj[x, y] = hl.f64(x + 10 * y)
    d = hl.propagate_adjoints(f, adj, [(1, 2), (0, 2)])  # x in [1, 2], y in [0, 2]
    want = np.zeros_like(a)
    for yy in range(0, 3):
        for xx in range(1, 3):
            want[yy, xx] = 2 * a[yy, xx] * (xx + 10 * yy)
    np.testing.assert_allclose(adjoint_of(d, inp, a), want)


def test_second_order():
    """Halide's test_second_order: the adjoint of an adjoint."""
    x = hl.Var("x")
    a = np.array([1.5], dtype=np.float64)
    inp = hl.Buffer(a, "inp")
    f = hl.Func("f")
    f[x] = inp[x] * inp[x] * inp[x]  # f = x^3, f' = 3x^2, f'' = 6x
    loss = hl.Func("loss")
    loss[()] = f[0]
    d = hl.propagate_adjoints(loss)
    first = d[inp]
    assert abs(float(np.asarray(first.realize([1]))[0]) - 3 * 1.5**2) < 1e-12
    second_loss = hl.Func("second_loss")
    second_loss[()] = first[0]
    d2 = hl.propagate_adjoints(second_loss)
    assert abs(float(np.asarray(d2[inp].realize([1]))[0]) - 6 * 1.5) < 1e-12


def test_scheduled_adjoints_compute_the_same():
    a = data(64, 48, seed=15)
    inp = hl.Buffer(a, "inp")
    x, y = hl.Var("x"), hl.Var("y")
    c = hl.BoundaryConditions.repeat_edge(inp)
    b = hl.Func("b")
    b[x, y] = c[x - 1, y] + c[x + 1, y] * c[x, y + 1]
    loss = hl.Func("loss")
    r = hl.RDom([(0, 48), (0, 64)])
    loss[()] = hl.f64(0)
    loss[()] += b[r.x, r.y] * b[r.x, r.y]
    d = hl.propagate_adjoints(loss)
    plain = adjoint_of(d, inp, a)
    xo, yo, xi, yi = hl.Var("xo"), hl.Var("yo"), hl.Var("xi"), hl.Var("yi")
    d[b].compute_root().tile(x, y, xo, yo, xi, yi, 16, 8).vectorize(xi, 4).parallel(yo)
    d[inp].compute_root().parallel(y).vectorize(x, 8)
    np.testing.assert_array_equal(adjoint_of(d, inp, a), plain)


# ---------------------------------------------------------------- Halide's C++ autodiff cases
def _values(f: hl.Func, *sizes: int) -> list:
    return np.asarray(f.realize(list(sizes)) if sizes else f.realize()).ravel().tolist()


def test_halide_cases_implicit_vars_tuple_diagonal_and_bounds():
    x, y = hl.Var("x"), hl.Var("y")
    r2, r4 = hl.RDom([(0, 2)]), hl.RDom([(0, 4)])
    inp = hl.Buffer(np.array([1.0, 2.0], np.float32), "inp")
    copy = hl.Func("copy")
    copy[hl._] = inp[hl._]
    loss = hl.Func("loss")
    loss[()] += copy[r2.x]
    d = hl.propagate_adjoints(loss)
    assert _values(d[inp], 2) == [1.0, 1.0] and _values(d[copy], 2) == [1.0, 1.0]

    inp3 = hl.Buffer(np.array([1.0, 2.0, 3.0], np.float32), "inp3")
    pair = hl.Func("pair")
    pair[x] = (inp3[x], inp3[x + 1])
    pair[x] = (pair[x][0] + 1.0, pair[x][1] + 1.0)
    total_ = hl.Func("total")
    total_[x] = pair[x][0] + pair[x][1]
    loss = hl.Func("loss_t")
    loss[()] += total_[r2.x]
    d = hl.propagate_adjoints(loss)
    assert [np.asarray(b).tolist() for b in d[pair].realize([2])] == [[1.0, 1.0], [1.0, 1.0]]
    assert _values(d[inp3], 3) == [1.0, 2.0, 1.0]

    inp5 = hl.Buffer(np.arange(5, dtype=np.float32), "inp5")
    diag = hl.Func("diag")
    diag[x, y] = 0.0
    diag[x, x] = inp5[x] + inp5[x + 1]
    r44 = hl.RDom([(0, 4), (0, 4)])
    loss = hl.Func("loss_d")
    loss[()] += diag[r44.x, r44.y]
    assert _values(hl.propagate_adjoints(loss)[inp5], 5) == [1.0, 2.0, 2.0, 2.0, 1.0]

    inb = hl.Buffer(np.arange(1, 6, dtype=np.float32), "inb")
    f, g = hl.Func("fb"), hl.Func("gb")
    f[x] += inb[x] * inb[x + 1]
    g[x] += f[x] * inb[x]
    loss = hl.Func("loss_b")
    loss[()] += g[r4]
    d = hl.propagate_adjoints(loss)
    assert _values(d[f], 4) == [1.0, 2.0, 3.0, 4.0]
    assert _values(d[inb], 5) == [4.0, 13.0, 28.0, 49.0, 16.0]


def test_halide_cases_guards_params_print_random():
    x = hl.Var("x")
    ing = hl.Buffer(np.array([0.0, 1.0], np.float32), "ing")
    v = ing[x]
    f = hl.Func("guarded")
    f[x] = (hl.select(v > 0.0, (x + 1) / v, v) + hl.select(v > 0.0, hl.sqrt(v), 1.0)
            + hl.select(v > 0.0, hl.atan2(1.0, v), 2.0 * v) + hl.select(v > 0.0, hl.log(v), 3.0 * v))
    loss = hl.Func("loss_g")
    loss[()] += f[hl.RDom(ing)]
    assert _values(hl.propagate_adjoints(loss)[ing], 2) == [6.0, -1.0]  # no NaN from the branch not taken

    param = hl.Param(hl.Float(32), "param", 2.0)
    image = hl.ImageParam(hl.Float(32), 1, "image")
    image.set(hl.Buffer(np.array([1.0, 0.0], np.float32)))
    f = hl.Func("fp")
    f[()] = param * param * image.width() * image[0]
    d = hl.propagate_adjoints(f)
    assert _values(d[param]) == [8.0] and _values(d[image], 2) == [8.0, 0.0]

    r1 = hl.RDom([(0, 1)])
    inp = hl.Buffer(np.array([3.0], np.float32), "inpp")
    out = hl.Func("printed")
    out[()] += hl.print(inp[r1])
    assert _values(hl.propagate_adjoints(out)[inp], 1) == [1.0]

    one = hl.Func("one")
    one[()] = 1.0
    noisy = hl.Func("noisy")
    noisy[x] += hl.random_float() * one[()] + r1
    assert _values(hl.propagate_adjoints(noisy)[one]) == _values(noisy, 1)  # random numbers are constants


def test_halide_cases_change_of_var_and_rdom_predicate():
    x, y, a, b = hl.Var("x"), hl.Var("y"), hl.Var("a"), hl.Var("b")
    grid = np.add.outer(np.arange(5), np.arange(5)).astype(np.float32)
    target = np.multiply.outer(np.arange(5), np.arange(5)).astype(np.float32)
    inp, tgt = hl.Buffer(grid, "grid"), hl.Buffer(target, "target")
    xy, ab = hl.Func("xy"), hl.Func("ab")
    xy[x, y] = inp[x, y]
    ab[a, b] = xy[a, b]
    r = hl.RDom([(0, 5), (0, 5)])
    loss = hl.Func("loss_c")
    loss[()] += hl.pow(ab[r.x, r.y] - tgt[r.x, r.y], 2)
    np.testing.assert_allclose(np.asarray(hl.propagate_adjoints(loss)[inp].realize([5, 5])), 2 * (grid - target))

    inc = hl.Buffer(np.add.outer(np.arange(7), np.arange(7)).astype(np.float32), "inc")
    rc = hl.RDom([(0, 7), (0, 7)])
    rc.where((rc.x - 3) * (rc.x - 3) + (rc.y - 3) * (rc.y - 3) <= 10)
    circle = hl.Func("circle")
    circle[x, y] = inc[x, y]
    circle[rc.x, rc.y] *= 2.0
    full = hl.RDom([(0, 7), (0, 7)])
    loss = hl.Func("loss_r")
    loss[()] += circle[full.x, full.y]
    want = [[2.0 if (i - 3) ** 2 + (j - 3) ** 2 <= 10 else 1.0 for i in range(7)] for j in range(7)]
    assert np.asarray(hl.propagate_adjoints(loss)[inc].realize([7, 7])).tolist() == want


def test_halide_cases_resampling_floor_ceil_down_and_upsampling():
    x, y = hl.Var("x"), hl.Var("y")
    i0 = hl.Buffer(np.array([[0.3, 1.8]], np.float32), "i0")
    i1 = hl.Buffer(np.array([[1.0, 2.0, 4.0]], np.float32), "i1")
    c0, c1 = hl.Func("c0"), hl.Func("c1")
    c0[x, y] = i0[hl.clamp(x, 0, 1), hl.clamp(y, 0, 0)]
    c1[x, y] = i1[hl.clamp(x, 0, 2), hl.clamp(y, 0, 0)]
    fx = hl.cast(hl.Int(32), hl.clamp(hl.floor(c0[x, y]), 0.0, 1.0))
    wx = c0[x, y] - fx
    interpolated = hl.Func("interpolated")
    interpolated[x, y] = c1[fx, y] * (1.0 - wx) + c1[fx + 1, y] * wx
    r = hl.RDom([(0, 2), (0, 1)])
    loss = hl.Func("loss_i")
    loss[()] += interpolated[r.x, r.y]
    d = hl.propagate_adjoints(loss)
    np.testing.assert_allclose(_values(d[c0], 2, 1), [1.0, 2.0], rtol=1e-6)
    np.testing.assert_allclose(_values(d[c1], 3, 1), [0.7, 0.5, 0.8], rtol=1e-6)

    inp = hl.Buffer(np.array([1.0, 2.0, 3.0], np.float32), "inp3")
    floor_out, ceil_out, both = hl.Func("floor_out"), hl.Func("ceil_out"), hl.Func("both")
    floor_out[x] = inp[hl.cast(hl.Int(32), hl.floor(x / 4.0))]
    ceil_out[x] = inp[hl.cast(hl.Int(32), hl.ceil(x / 4.0))]
    both[x] = ceil_out[x] + floor_out[x]
    r8 = hl.RDom([(0, 8)])
    loss = hl.Func("loss_f")
    loss[()] += both[r8.x]
    assert _values(hl.propagate_adjoints(loss)[inp], 3) == [5.0, 8.0, 3.0]

    ten = hl.Buffer(np.arange(10, dtype=np.float32), "ten")
    down = hl.Func("down")
    r4 = hl.RDom([(0, 4)])
    down[x] += ten[4 * x + r4]
    loss = hl.Func("loss_down")
    loss[()] += down[hl.RDom([(0, 2)])]
    assert _values(hl.propagate_adjoints(loss)[ten], 10) == [1.0] * 8 + [0.0, 0.0]

    four = hl.Buffer(np.arange(4, dtype=np.float32), "four")
    up = hl.Func("up")
    up[x] = four[x / 4]
    loss = hl.Func("loss_up")
    loss[()] += up[hl.RDom([(0, 16)])]
    assert _values(hl.propagate_adjoints(loss)[four], 4) == [4.0] * 4


def test_halide_case_second_order_convolution():
    x = hl.Var("x")
    inp = hl.Buffer(np.arange(10, dtype=np.float32) / 10, "input")
    target = hl.Buffer(np.arange(1, 11, dtype=np.float32) / 10, "target")
    kernel = hl.Buffer(np.ones(3, np.float32), "kernel")
    edge = hl.BoundaryConditions.repeat_edge(inp)
    rc, rl = hl.RDom([(0, 3)]), hl.RDom([(0, 9)])
    conv = hl.Func("conv")
    conv[x] += edge[x + rc - 1] * kernel[rc]
    loss0 = hl.Func("loss0")
    loss0[()] += hl.pow(conv[rl] - target[rl], 2.0)
    d = hl.propagate_adjoints(loss0)
    loss1 = hl.Func("loss1")
    loss1[()] += d[inp][rl]
    d2 = hl.propagate_adjoints(loss1)
    c, t = np.asarray(conv.realize([9])), np.arange(1, 10, dtype=np.float32) / 10
    d_conv = np.asarray(d[conv].realize([9]))
    np.testing.assert_allclose(d_conv, 2 * (c - t), rtol=1e-5, atol=1e-6)
    d2_conv = np.asarray(d2[conv].realize([9]))
    np.testing.assert_allclose(d2_conv, [6.0] * 8 + [4.0], rtol=1e-6)
    d2_input = np.asarray(d2[inp].realize([10]))
    want = [2 * d2_conv[0] + d2_conv[1], *(d2_conv[i - 1] + d2_conv[i] + d2_conv[i + 1] for i in range(1, 8)),
            d2_conv[7] + d2_conv[8], d2_conv[8]]
    np.testing.assert_allclose(d2_input, want, rtol=1e-6)


def test_a_scan_reading_points_it_overwrites_later_is_refused():
    """Halide's test_reverse_scan (f(r) = f(4 - r)) expects the derivative of every point reading
    the original values, but iterations 3 and 4 read what iterations 1 and 0 wrote; pyhalide
    refuses rather than differentiate a different program."""
    x = hl.Var("x")
    inp = hl.Buffer(np.arange(5, dtype=np.float32), "inr")
    rev = hl.Func("reversed")
    rev[x] = inp[x]
    r = hl.RDom(inp)
    rev[r.x] = rev[4 - r.x]
    loss = hl.Func("loss_s")
    loss[()] += rev[r.x] * (r.x + 1.0)
    with pytest.raises(hl.HalideError, match=rf"update 0 of Func {re.escape(rev.name())} reads"):
        hl.propagate_adjoints(loss)


# ---------------------------------------------------------------- random pipelines
_UNARY = [("sin", hl.sin), ("tanh", hl.tanh), ("square", lambda v: v * v),
          ("exp_small", lambda v: hl.exp(v * hl.f64(0.1))), ("sqrt_pos", lambda v: hl.sqrt(v * v + 1)),
          ("neg", lambda v: -v)]
_BINARY = [("+", lambda a, b: a + b), ("-", lambda a, b: a - b), ("*", lambda a, b: a * b),
           ("/", lambda a, b: a / (b * b + 1)), ("max", hl.max), ("min", hl.min)]


@st.composite
def random_pipelines(draw):
    """A chain of 1-D stages, each a random expression of the previous stages at random offsets
    (clamped into the input at the start)."""
    steps = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["unary", "binary", "update", "downsample"]))
        steps.append((kind, draw(st.integers(0, len(_UNARY) - 1)), draw(st.integers(0, len(_BINARY) - 1)),
                      draw(st.integers(-2, 2)), draw(st.integers(-2, 2))))
    return steps


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_pipelines(), st.integers(0, 1000))
def test_random_pipelines_match_finite_differences(steps, seed):
    a = data(10, seed=seed)
    inp = hl.Buffer(a, "inp")
    x = hl.Var("x")
    funcs = [hl.Func("in0")]
    funcs[0][x] = inp[hl.clamp(x, 0, 9)]
    for i, (kind, u, b, o1, o2) in enumerate(steps):
        prev = funcs[-1]
        f = hl.Func(f"s{i}")
        if kind == "unary":
            f[x] = _UNARY[u][1](prev[x + o1])
        elif kind == "binary":
            f[x] = _BINARY[b][1](prev[x + o1], funcs[(u % len(funcs))][x + o2])
        elif kind == "update":
            f[x] = prev[x]
            r = hl.RDom([(0, 3)])
            f[x] += _UNARY[u][1](prev[x + r.x + o1]) * 0.5
        else:
            f[x] = prev[2 * x + o1] + prev[x // 2 + o2]
        funcs.append(f)
    check_gradient(total(funcs[-1], 6), (inp, a), tol=1e-5)


# ---------------------------------------------------------------- what is refused
def test_refused_updates_say_why():
    x = hl.Var("x")
    inp = hl.Buffer(data(4), "inp")
    r = hl.RDom([(0, 4)])
    prod = hl.Func("prod")
    prod[()] = hl.f64(1)
    prod[()] = prod[()] * inp[r.x]  # each iteration overwrites the one point, and not by max or +
    with pytest.raises(hl.HalideError, match=rf"update 0 of Func {re.escape(prod.name())} may write a point more than"):
        hl.propagate_adjoints(prod)
    ints = hl.Func("ints")
    ints[x] = x
    with pytest.raises(hl.HalideError, match="no float values"):
        hl.propagate_adjoints(ints)
    f = hl.Func("f")
    f[x] = inp[x]
    loss = total(f, 4)
    d = hl.propagate_adjoints(loss)
    with pytest.raises(hl.HalideError, match="does not depend on other"):
        d[hl.Func("other")]
    with pytest.raises(hl.HalideError, match="has 0 update definitions; no update 2"):
        d[f, 2]


# ---------------------------------------------------------------- the real Halide as a second oracle
_HALIDE_PROGRAM = textwrap.dedent('''
    import json, sys
    import numpy as np
    hl = __import__(sys.argv[1])
    keep = []
    def buf(values, name):
        a = np.array(values, dtype=np.float32)
        keep.append(a)
        return hl.Buffer(a, name)
    x, y = hl.Var("x"), hl.Var("y")
    inp, k = buf([1, 2, 4, 7, 3, 5], "inp"), buf([2, 1, 0.5], "k")
    c = hl.BoundaryConditions.repeat_edge(inp)
    s = hl.RDom([(0, 3)])
    conv = hl.Func("conv")
    conv[x] = 0.0
    conv[x] += c[x + s.x - 1] * k[s.x]
    act = hl.Func("act")
    act[x] = hl.tanh(conv[x] * 0.1) + hl.max(conv[x], 8.0) / (c[x] + 1)
    r = hl.RDom([(0, 6)])
    loss = hl.Func("loss")
    loss[()] = 0.0
    loss[()] += act[r.x] * act[r.x]
    d = hl.propagate_adjoints(loss)
    out = {"inp": np.asarray(d[inp].realize([6])).tolist(), "k": np.asarray(d[k].realize([3])).tolist(),
           "conv": np.asarray(d[conv].realize([6])).tolist(), "act": np.asarray(d[act].realize([6])).tolist()}
    print(json.dumps(out))
''')


def test_adjoints_match_the_real_halide(tmp_path):
    pytest.importorskip("halide")
    program = tmp_path / "program.py"
    program.write_text(_HALIDE_PROGRAM)
    results = {}
    for module in ("halide", "pyhalide"):
        done = subprocess.run([sys.executable, str(program), module], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        assert done.returncode == 0, done.stderr
        results[module] = json.loads(done.stdout.strip().splitlines()[-1])
    for name in ("inp", "k", "conv", "act"):
        np.testing.assert_allclose(results["pyhalide"][name], results["halide"][name], rtol=1e-5, atol=1e-6,
                                   err_msg=name)
