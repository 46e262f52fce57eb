"""Halide 21's C++ correctness tests (batch 04), ported to pyhalide: the same algorithms,
schedules and checks, with expectations computed independently in numpy / plain Python.

Parts that need C++-only APIs (custom lowering passes, trace / malloc / error handlers, extern C
functions, Internal:: IR) are left out; each test's docstring names the Halide test it ports.
Tests for pyhalide bugs found while porting are marked xfail(strict=True)."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

import pyhalide as hl


def _grid(w, h):
    """(xx, yy) index arrays of shape (h, w): numpy's layout of a [w, h] Buffer."""
    yy, xx = np.mgrid[0:h, 0:w]
    return xx, yy


def _eq(buf, expected):
    got = np.asarray(buf)
    assert got.shape == np.shape(expected)
    np.testing.assert_array_equal(got, expected)


def _raises(fn):
    try:
        fn()
    except Exception:  # noqa: BLE001 - Halide and pyhalide raise different error classes
        return True
    return False


def _bounds(im):
    b = im.get()
    return [(b.dim(i).min(), b.dim(i).extent()) for i in range(b.dimensions())]


# ----------------------------------------------------------------------------------------------
# async_order, bool_predicate_cast, bounds


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_async_producers_computed_at_consumer_rows(mode):
    """Halide's correctness/async_order.cpp: async producers at the consumer's rows."""
    p1, p2, c = hl.Func("p1"), hl.Func("p2"), hl.Func("c")
    x, y = hl.Var("x"), hl.Var("y")
    p1[x, y] = x + y
    p2[x, y] = p1[x, y]
    c[x, y] = p1[x, y - 1] + p2[x, y + 1]
    c.compute_root()
    if mode == 0:
        p1.compute_at(c, y)
        p2.compute_at(c, y).async_()
    elif mode == 1:
        p1.compute_root()
        p2.store_root().compute_at(c, y).async_()
    else:
        p1.store_root().compute_at(c, y).async_()
        p2.store_root().compute_at(c, y).async_()
    c.bound(x, 0, 16).bound(y, 0, 16)
    xx, yy = _grid(16, 16)
    _eq(c.realize([16, 16]), 2 * (xx + yy))


def test_bool_cast_to_uint8():
    """Halide's correctness/bool_predicate_cast.cpp: cast(UInt(8), a >= 32)."""
    x, y = hl.Var("x"), hl.Var("y")
    inp, test = hl.Func("input"), hl.Func("test")
    inp[x, y] = hl.cast(hl.UInt(8), x + y)
    test[x, y] = hl.cast(hl.UInt(8), inp[x, y] >= 32)
    out = np.asarray(test.realize([96, 96]))
    xx, yy = _grid(96, 96)
    assert out.dtype == np.uint8
    _eq(out, (xx + yy >= 32).astype(np.uint8))


def test_max_min_clamp():
    """Halide's correctness/bounds.cpp: max, min and clamp of the coordinates."""
    x, y = hl.Var("x"), hl.Var("y")
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    f[x, y] = hl.max(x, y)
    g[x, y] = hl.min(x, y)
    h[x, y] = hl.clamp(x + y, 20, 100)
    xx, yy = _grid(32, 32)
    _eq(f.realize([32, 32]), np.maximum(xx, yy))
    _eq(g.realize([32, 32]), np.minimum(xx, yy))
    _eq(h.realize([32, 32]), np.clip(xx + yy, 20, 100))


# ----------------------------------------------------------------------------------------------
# bounds_of_abs


def _abs_index(case, x):
    if case == "int8":
        return hl.abs(hl.cast(hl.Int(8), x))
    if case == "int16":
        return hl.abs(hl.cast(hl.Int(16), x))
    if case == "float":
        return hl.cast(hl.Int(32), hl.abs(hl.cast(hl.Float(32), x)))
    if case == "reflect":
        return 100 - hl.cast(hl.Int(32), hl.abs(100 - (x % 200)))
    return hl.cast(hl.Int(32), hl.clamp(hl.abs(hl.f32(1.0) / (x + hl.f32(0.1))), -50, 50))


@pytest.mark.parametrize("case,extent", [("int8", 129), ("int16", 32769), ("float", 11111),
                                         ("reflect", 101), ("clamp", 51)])
def test_bounds_of_abs_are_tight(case, extent):
    """Halide's correctness/bounds_of_abs.cpp: input region inferred through abs()."""
    inp = hl.ImageParam(hl.Int(32), 1, "input")
    x = hl.Var("x")
    f = hl.Func("f")
    f[x] = inp[_abs_index(case, x)]
    out = hl.Buffer(hl.Int(32), [12345])
    out.set_min([-1234])
    f.infer_input_bounds(out)
    assert _bounds(inp) == [(0, extent)]


# ----------------------------------------------------------------------------------------------
# cast


def test_cast_result_types():
    """Halide's correctness/cast.cpp: types of mixed-type arithmetic (Python's += is plain +)."""
    x = hl.Var("x")
    ints = [hl.cast(hl.Int(b), x) for b in (8, 16, 32, 64)]
    uints = [hl.cast(hl.UInt(b), x) for b in (8, 16, 32, 64)]
    for i in range(4):
        for j in range(i):
            assert (ints[i] + ints[j]).type() == ints[i].type()
            assert (uints[i] + uints[j]).type() == uints[i].type()
            assert (ints[i] + uints[j]).type() == ints[i].type()
            assert (uints[i] + ints[j]).type() == ints[i].type()
        assert (ints[i] + 1).type() == ints[i].type()
        assert (1 + ints[i]).type() == ints[i].type()
        assert (ints[i] + hl.f32(1.0)).type() == hl.Float(32)
        assert (uints[i] + hl.f32(1.0)).type() == hl.Float(32)
        a = ints[i]
        a += hl.f32(1.0) + uints[i]
        assert a.type() == hl.Float(32)
    assert hl.cast(hl.Float(32), x).type() == hl.Float(32)
    assert hl.cast(hl.Float(64), x).type() == hl.Float(64)


# ----------------------------------------------------------------------------------------------
# compute_at_reordered_update_stage (compute_with_inlined: test_halide_compute_with_stages.py)


def test_compute_at_reordered_update_stage():
    """Halide's correctness/compute_at_reordered_update_stage.cpp: store_at x, compute_at y."""
    g, f = hl.Func("g"), hl.Func("f")
    x, y = hl.Var("x"), hl.Var("y")
    f[x, y] = x + y
    g[x, y] = 0
    g[x, y] += f[x, y]
    g.update().reorder(y, x)
    f.store_at(g, x).compute_at(g, y)
    xx, yy = _grid(10, 10)
    _eq(g.realize([10, 10]), xx + yy)


def _zeros_buffer(w, h):
    return hl.Buffer(np.zeros((h, w), dtype=np.int32))


def test_param_and_output_buffer_constraints():
    """Halide's correctness/constraints.cpp: set_bounds / set_stride constraints are checked."""
    x, y = hl.Var("x"), hl.Var("y")
    param = hl.ImageParam(hl.Int(32), 2, "param")
    image1, image2 = _zeros_buffer(128, 73), _zeros_buffer(144, 23)
    f = hl.Func("f")
    f[x, y] = param[x, y] * 2
    param.dim(0).set_bounds(0, 128)
    param.set(image1)
    f.realize([20, 20])
    assert _raises(lambda: (param.set(image2), f.realize([20, 20])))

    g = hl.Func("g")
    g[x, y] = x * y
    g.output_buffer().dim(0).set_stride(2)
    assert _raises(lambda: g.realize(image1))

    h = hl.Func("h")
    h[x, y] = x * y
    h.output_buffer().dim(0).set_stride(1).set_bounds(
        0, (h.output_buffer().dim(0).extent() / 8) * 8).dim(1).set_bounds(0, 73)
    out = _zeros_buffer(128, 73)
    h.realize(out)
    xx, yy = _grid(128, 73)
    _eq(out, xx * yy)


def test_pipeline_requirements():
    """Halide's correctness/constraints.cpp: Pipeline.add_requirement conditions."""
    x, y = hl.Var("x"), hl.Var("y")
    param = hl.ImageParam(hl.Int(32), 2, "param_req")
    image1, image2 = _zeros_buffer(128, 73), _zeros_buffer(144, 23)
    f = hl.Func("f_req")
    f[x, y] = param[x, y] * 2
    rmin, rext = hl.Param(hl.Int(32), "rmin"), hl.Param(hl.Int(32), "rext")
    rmin.set(0)
    rext.set(128)
    pf = hl.Pipeline(f)
    pf.add_requirement((param.dim(0).min() == rmin) & (param.dim(0).extent() == rext),
                       "Custom message:", param.dim(0).min(), param.dim(0).max())
    param.set(image1)
    pf.realize([20, 20])
    assert _raises(lambda: (param.set(image2), pf.realize([20, 20])))

    g = hl.Func("g_req")
    g[x, y] = x * y
    pg = hl.Pipeline(g)
    rstride = hl.Param(hl.Int(32), "rstride")
    rstride.set(2)
    pg.add_requirement(g.output_buffer().dim(0).stride() == rstride)
    assert _raises(lambda: pg.realize(image1))

    h = hl.Func("h_req")
    h[x, y] = x * y
    ph = hl.Pipeline(h)
    ob = h.output_buffer()
    ph.add_requirement(ob.dim(0).stride() == 1)
    ph.add_requirement(ob.dim(0).min() == 0)
    ph.add_requirement(ob.dim(0).extent() % 8 == 0)
    ph.add_requirement(ob.dim(1).min() == 0)
    ph.add_requirement(ob.dim(1).extent() == 73)
    out = _zeros_buffer(128, 73)
    ph.realize(out)
    xx, yy = _grid(128, 73)
    _eq(out, xx * yy)


def test_requirement_on_output_buffer_of_a_renamed_func():
    """Halide's correctness/constraints.cpp: add_requirement on a second Func named "h"."""
    x, y = hl.Var("x"), hl.Var("y")
    first = hl.Func("h")
    first[x, y] = x
    h = hl.Func("h")
    h[x, y] = x * y
    ph = hl.Pipeline(h)
    ph.add_requirement(h.output_buffer().dim(0).stride() == 1)
    xx, yy = _grid(3, 2)
    _eq(ph.realize([3, 2]), xx * yy)


def test_setting_a_constraint_violating_buffer_is_checked_at_realize():
    """Halide's correctness/constraints.cpp: param.set(image2) itself succeeds."""
    x, y = hl.Var("x"), hl.Var("y")
    param = hl.ImageParam(hl.Int(32), 2, "param")
    f = hl.Func("f")
    f[x, y] = param[x, y] * 2
    param.dim(0).set_bounds(0, 128)
    param.set(_zeros_buffer(144, 23))
    assert _raises(lambda: f.realize([20, 20]))


# ----------------------------------------------------------------------------------------------
# deinterleave4, early_out, fast_trigonometric, float16_t_constants


def test_vectorized_double_upsample():
    """Halide's correctness/deinterleave4.cpp: u(x) = f(x / 2 + 1) twice, vectorized."""
    x = hl.Var("x")

    def build():
        i = hl.Func("in")
        i[x] = x
        i.compute_root()
        u1, u2 = hl.Func("u1"), hl.Func("u2")
        u1[x] = i[x / 2 + 1]
        u2[x] = u1[x / 2 + 1]
        return u2

    f1, f2 = build(), build()
    f2.bound(x, 0, 64).vectorize(x)
    xs = np.arange(64)
    expected = (xs // 2 + 1) // 2 + 1
    _eq(f1.realize([64]), expected)
    _eq(f2.realize([64]), expected)


def test_early_out_with_param_dependent_parallel_task_size():
    """Halide's correctness/early_out.cpp: RDom.where(!test()) plus a specialized parallel."""
    height = hl.Param(hl.Int(32), "height")
    y = hl.Var("y")
    test_rows, test, output = hl.Func("test_rows"), hl.Func("test"), hl.Func("output")
    test_rows[y] = y < 100
    test[()] = hl.cast(hl.Bool(), False)
    ry = hl.RDom([(0, 1024)])
    ry.where(~test[()])
    test[()] = test_rows[ry.x]
    output[()] = hl.select(test[()], hl.cast(hl.UInt(8), 0), hl.cast(hl.UInt(8), 1))
    num_slices = (height + 255) / 256
    slice_size = (height + num_slices - 1) / num_slices
    test_rows.in_().compute_root().specialize(height > slice_size).parallel(
        y, slice_size, hl.TailStrategy.ShiftInwards)
    output.compile_jit()
    height.set(1000)
    assert output.realize([])[()] == 0


def test_fast_sin_cos():
    """Halide's correctness/fast_trigonometric.cpp: fast_sin / fast_cos within 1e-5."""
    x = hl.Var("x")
    t = x / hl.f32(1000.0)
    two_pi = np.float32(2.0) * np.float32(np.pi)
    tp = hl.f32(float(two_pi))
    sin_f, cos_f = hl.Func("sin_f"), hl.Func("cos_f")
    sin_f[x] = hl.fast_sin(-tp * t + (1 - t) * tp)
    cos_f[x] = hl.fast_cos(-tp * t + (1 - t) * tp)
    sin_f.vectorize(x, 8)
    cos_f.vectorize(x, 8)
    alpha = np.arange(1000, dtype=np.float32) / np.float32(1000)
    xv = (-two_pi * alpha + (np.float32(1) - alpha) * two_pi).astype(np.float64)
    assert np.abs(np.sin(xv) - np.asarray(sin_f.realize([1000]))).max() <= 1e-5
    assert np.abs(np.cos(xv) - np.asarray(cos_f.realize([1000]))).max() <= 1e-5


_F16_CASES = [(0.0, 0x0000), (-0.0, 0x8000), (math.inf, 0x7C00), (-math.inf, 0xFC00),
              (1.0 / (1 << 24), 0x0001), (-1.0 / (1 << 24), 0x8001), (65504, 0x7BFF),
              (-65504, 0xFBFF), (0.1, 0x2E66), (0.3, 0x34CD), (4091, 0x6BFE), (-4091, 0xEBFE),
              (1000000, 0x7C00), (-1000000, 0xFC00)]


def test_float16_constants():
    """Halide's correctness/float16_t_constants.cpp: double constants cast to Float(16)."""
    x = hl.Var("x")

    def const16(v):
        f = hl.Func("f")
        f[x] = hl.cast(hl.Float(16), hl.f64(v))
        return f

    for v, bits in _F16_CASES:
        assert int(np.asarray(const16(v).realize([1])).view(np.uint16)[0]) == bits, v
    nan = int(np.asarray(const16(math.nan).realize([1])).view(np.uint16)[0])
    assert nan & 0x7C00 == 0x7C00 and nan & 0x03FF > 0

    def back(v):
        g = hl.Func("g")
        g[x] = hl.cast(hl.Float(64), const16(v)[x])
        return float(np.asarray(g.realize([1]))[0])

    assert back(0.0) == 0 and math.copysign(1, back(0.0)) > 0
    assert back(-0.0) == 0 and math.copysign(1, back(-0.0)) < 0
    assert back(math.inf) == math.inf and back(-math.inf) == -math.inf
    assert math.isnan(back(math.nan))


# ----------------------------------------------------------------------------------------------
# func_wrapper


def test_func_wrapper_names_are_reused():
    """Halide's correctness/func_wrapper.cpp: in() returns the same wrapper each time."""
    x, y = hl.Var("x"), hl.Var("y")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + y
    g[x, y] = f[x, y]
    w = f.in_(g)
    assert all(f.in_(g).name() == w.name() for _ in range(5))
    assert f.in_().name() == f.in_().name()
    d, e, f2, g2, h = [hl.Func(n) for n in ("d", "e", "f2", "g2", "h")]
    d[x, y] = x + y
    for k in (e, f2, g2, h):
        k[x, y] = d[x, y]
    assert d.in_([e, f2, g2]).name() == d.in_([g2, f2, e]).name()


def test_func_wrappers_shared_global_and_custom():
    """Halide's correctness/func_wrapper.cpp: shared, global and custom wrappers."""
    x, y = hl.Var("x"), hl.Var("y")
    xx, yy = _grid(64, 64)
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = x
    g[x, y] = f[x]
    f.in_(g).compute_root()
    f.compute_root()
    _eq(g.realize([64, 64]), xx)

    f, g1, g2, g3 = [hl.Func(n) for n in ("f", "g1", "g2", "g3")]
    f[x] = x
    for gi in (g1, g2, g3):
        gi[x, y] = f[x]
    f.compute_root()
    f.in_([g1, g2]).compute_root()
    for b in hl.Pipeline([g1, g2, g3]).realize([64, 64]):
        _eq(b, xx)

    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    f[x, y] = x + y
    g[x, y] = f[x, y]
    h[x, y] = g[x, y] + f[x, y]
    xi, yi, t = hl.Var("xi"), hl.Var("yi"), hl.Var("t")
    wrapper = f.in_()
    f.compute_root()
    h.compute_root().tile(x, y, xi, yi, 16, 16).fuse(x, y, t).parallel(t)
    g.compute_at(h, yi)
    wrapper.compute_at(h, yi).tile(x, y, xi, yi, 8, 8).fuse(xi, yi, t).vectorize(t, 4)
    _eq(h.realize([64, 64]), 2 * (xx + yy))

    f, g, result = hl.Func("f"), hl.Func("g"), hl.Func("result")
    f[x] = x
    g[x, y] = f[x]
    result[x, y] = f[x] + g[x, y]
    f.in_(g).compute_at(g, x)
    f.in_().compute_at(result, y)
    f.compute_root()
    g.compute_at(result, y)
    _eq(result.realize([64, 64]), 2 * xx)


def test_func_wrapper_with_updates_and_rdoms():
    """Halide's correctness/func_wrapper.cpp: wrappers around funcs with update definitions."""
    x, y = hl.Var("x"), hl.Var("y")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + y
    g[x, y] = f[x, y]
    wrapper = f.in_(g)
    r = hl.RDom([(0, 100), (0, 100)])
    r.where(r.x < r.y)
    g[r.x, r.y] += 2 * f[r.x, r.y]
    param = hl.Param(hl.Bool(), "param")
    xi, rxo, rxi = hl.Var("xi"), hl.RVar("rxo"), hl.RVar("rxi")
    g.specialize(param).vectorize(x, 8).unroll(x, 2).split(x, x, xi, 4).parallel(x)
    g.update(0).split(r.x, rxo, rxi, 2).unroll(rxi)
    f.compute_root()
    wrapper.compute_root().vectorize(x, 8).unroll(x, 2).split(x, x, xi, 4).parallel(x)
    xx, yy = _grid(120, 120)
    inside = (xx <= 99) & (yy <= 99) & (xx < yy)
    for pv in (False, True):
        param.set(pv)
        _eq(g.realize([120, 120]), np.where(inside, 3 * (xx + yy), xx + yy))

    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + y
    g[x, y] = 10
    g[x, y] += 2 * f[x, x]
    r = hl.RDom([(0, 32), (0, 32)])
    g[r.x, r.y] += 3 * f[r.y, r.y]
    wrapper = g.in_().compute_root()
    g.compute_at(wrapper, x)
    f.compute_root()
    xx, yy = _grid(32, 32)
    _eq(wrapper.realize([32, 32]), 4 * xx + 6 * yy + 10)

    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    f[x, y] = x + y
    g[x, y] = 10
    h[x, y] = 5
    r = hl.RDom([(0, 100), (0, 100)])
    r.where(f[r.x, r.y] + h[r.x, r.y] < 50)
    g[r.x, r.y] += h[r.x, r.y]
    h.in_().store_root().compute_at(g, r.y)
    f.in_(g).compute_at(g, r.x)
    f.compute_root()
    h.compute_root()
    xx, yy = _grid(120, 120)
    _eq(g.realize([120, 120]), np.where((xx <= 99) & (yy <= 99) & (xx + yy + 5 < 50), 15, 10))


def test_func_wrappers_of_wrappers():
    """Halide's correctness/func_wrapper.cpp: wrappers of mutated funcs and of wrappers."""
    x, y = hl.Var("x"), hl.Var("y")
    xx, yy = _grid(64, 64)
    e, f, g, h = [hl.Func(n) for n in "efgh"]
    e[x, y] = x + y
    f[x, y] = e[x, y]
    g[x, y] = f[x, y]
    h[x, y] = g[x, y]
    xo, xi = hl.Var("xo"), hl.Var("xi")
    e.compute_root()
    f.compute_at(g, y).vectorize(x, 8)
    g.compute_root()
    e_in_f = e.in_(f)
    g.in_(h).compute_root().compute_at(h, y).vectorize(x, 8)
    e_in_f.compute_at(f, y).split(x, xo, xi, 8)
    _eq(h.realize([64, 64]), xx + yy)

    e, f, g, h = [hl.Func(n) for n in "efgh"]
    e[x, y] = x + y
    f[x, y] = e[x, y]
    g[x, y] = f[x, y] + e[x, y]
    f_in_g = f.in_(g).compute_root()
    f_in_f_in_g = f.in_(f_in_g).compute_root()
    h[x, y] = g[x, y] + f[x, y] + f_in_f_in_g[x, y]
    e.compute_root()
    f.compute_root()
    g.compute_root()
    f.in_(h).compute_root()
    g.in_(h).compute_root()
    _eq(h.realize([64, 64]), 4 * (xx + yy))

    inp, out = hl.Func("input"), hl.Func("output")
    inp[x, y] = 2 * x + 3 * y
    inp.compute_root()
    out[x, y] = inp[y, x]
    yi = hl.Var("yi")
    out.tile(x, y, xi, yi, 8, 8)
    a = inp.in_(out).compute_at(out, x).vectorize(x).unroll(y)
    a.in_(out).compute_at(out, x).unroll(x).unroll(y)
    _eq(out.realize([64, 64]), 3 * xx + 2 * yy)

    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    f[x, y] = 2 * x + 3 * y
    f.compute_root()
    g[x, y] = f[y, x]
    g.compute_root().tile(x, y, xi, yi, 8, 8).vectorize(xi).unroll(yi)
    f_in_g = f.in_(g).compute_root().tile(x, y, xi, yi, 8, 8).vectorize(xi).unroll(yi)
    f_in_g_in_g = f_in_g.in_(g).compute_root().tile(x, y, xi, yi, 8, 8).unroll(xi).unroll(yi)
    h[x, y] = f_in_g_in_g[y, x]
    a = f_in_g_in_g.in_(h).compute_at(h, x).vectorize(x).unroll(y)
    a.in_(h).compute_at(h, x).unroll(x).unroll(y)
    h.compute_root().tile(x, y, xi, yi, 8, 8)
    rg, rh = hl.Pipeline([g, h]).realize([64, 64])
    _eq(rg, 3 * xx + 2 * yy)
    _eq(rh, 3 * xx + 2 * yy)


def test_lots_of_func_wrappers():
    """Halide's correctness/func_wrapper.cpp: 100 funcs sharing wrappers of one func."""
    common = hl.Func("common")
    v = hl.Var("v")
    common[v] = v
    common.compute_root()
    funcs, prev = [], common
    for i in range(100):
        f = hl.Func(f"f{i}")
        f[v] = common[v] + prev[v]
        prev = f
        funcs.append(f)
        if i % 5 == 4:
            funcs[i].compute_root()
            for j in range(i - 4, i):
                funcs[j].compute_at(funcs[i], v)
            common.in_(funcs[i - 4:i + 1]).compute_at(funcs[i], v)
    funcs[-1].compile_jit()
    _eq(funcs[-1].realize([10]), 101 * np.arange(10))


# ----------------------------------------------------------------------------------------------
# gather, hoist_loop_invariant_if_statements, implicit_args


@pytest.mark.parametrize("dt", [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32])
def test_lut_gather(dt):
    """Halide's correctness/gather.cpp: lut(clamp(input(x, 0)), clamp(input(x, 1)))."""
    rng = np.random.default_rng(0)
    w_img, h_img, w_lut, h_lut = 128, 8, 256, 1
    inp = np.zeros((2, w_img), dtype=dt)
    for row, m in ((0, w_lut), (1, h_lut)):
        v = rng.integers(0, 1 << 31, w_img).astype(dt).astype(np.int64)
        inp[row] = np.fmod(v, m).astype(dt)
    lut = rng.integers(0, 1 << 31, (h_lut, w_lut)).astype(dt)
    input_b, lut_b = hl.Buffer(inp), hl.Buffer(lut)
    x, y = hl.Var("x"), hl.Var("y")
    lut_vtcm, output_vtcm, output = hl.Func("lut_vtcm"), hl.Func("output_vtcm"), hl.Func("output")
    xc = hl.clamp(hl.cast(hl.Int(32), input_b[x, 0]), 0, w_lut - 1)
    yc = hl.clamp(hl.cast(hl.Int(32), input_b[x, 1]), 0, h_lut - 1)
    lut_vtcm[x, y] = lut_b[x, y]
    output_vtcm[x, y] = lut_vtcm[xc, yc]
    output[x, y] = output_vtcm[x, y]
    out = np.asarray(output.realize([w_img, h_img]))
    xs = np.clip(inp[0].astype(np.int64), 0, w_lut - 1)
    ys = np.clip(inp[1].astype(np.int64), 0, h_lut - 1)
    assert out.dtype == dt
    _eq(out, np.broadcast_to(lut[ys, xs], (h_img, w_img)))


def test_select_of_undef_under_bool_param():
    """Halide's correctness/hoist_loop_invariant_if_statements.cpp: the values (p true)."""
    f, g = hl.Func("f"), hl.Func("g")
    x, y = hl.Var("x"), hl.Var("y")
    p = hl.Param(hl.Bool(), "p")
    f[x, y] = hl.select(p, x + y, hl.undef(hl.Int(32)))
    g[x, y] = hl.select(p, f[x, y], hl.undef(hl.Int(32)))
    f.compute_at(g, x)
    p.set(True)
    xx, yy = _grid(64, 64)
    _eq(g.realize([64, 64]), xx + yy)


def test_implicit_args():
    """Halide's correctness/implicit_args.cpp: the _ placeholder on both sides."""
    x, y, z, w = hl.Var("x"), hl.Var("y"), hl.Var("z"), hl.Var("w")
    _ = hl._
    im1 = hl.ImageParam(hl.Int(32), 3, "im1")
    assert im1.dimensions() == 3
    im1.set(hl.lambda_func(x, y, z, x * y * z).realize([10, 10, 10]))
    im2 = hl.lambda_func(x, y, x + y).realize([10, 10])
    assert im2.dimensions() == 2 and im2[4, 6] == 10

    f = hl.Func("f")
    f[x, _] = im1[_] + im2[x, _] + im2[_]
    k, j, i, xs = np.meshgrid(*[np.arange(2)] * 4, indexing="ij")
    _eq(f.realize([2, 2, 2, 2]), i * j * k + xs + i + i + j)
    assert f.dimensions() == 4

    g = hl.Func("g")
    g[_] = f[2, 2, _] + im2[hl.Expr(1), _]
    f.compute_root()
    assert g.dimensions() == 2
    ii, jj = _grid(10, 10)
    _eq(g.realize([10, 10]), 2 * ii * jj + 2 + 2 + 2 + ii + 1 + ii)

    im3 = hl.lambda_func(x, y, z, w, (x << 24) | (y << 16) | (z << 8) | w).realize([10] * 4)
    L, K, J, I = np.meshgrid(*[np.arange(10)] * 4, indexing="ij")
    t = hl.Func("t")
    t[_, x, y] = im3[_, y, x]
    _eq(t.realize([10] * 4), (I << 24) | (J << 16) | (L << 8) | K)
    h = hl.Func("h")
    h[_, x, y] = im3[y, _, x] + im3[y, x, _]
    _eq(h.realize([10] * 4), ((L << 24) | (I << 16) | (J << 8) | K)
        + ((L << 24) | (K << 16) | (I << 8) | J))
    h2 = hl.Func("h2")
    h2[_, x] = im3[_, x] + im3[x, x, _]
    _eq(h2.realize([10] * 4), ((I << 24) | (J << 16) | (K << 8) | L)
        + ((L << 24) | (L << 16) | (I << 8) | J))


# ----------------------------------------------------------------------------------------------
# inline_reduction, interleave_x, lambda, let_in_rdom_bound, lots_of_loop_invariants


def test_inline_reductions_over_a_window():
    """Halide's correctness/inline_reduction.cpp: sum/product/maximum/minimum of a 3x3 window."""
    x, y = hl.Var("x"), hl.Var("y")
    r = hl.RDom([(-1, 3), (-1, 3)])
    inp = hl.Func("input")
    inp[x, y] = hl.cast(hl.Float(32), x * y + 1)
    iv = inp[x + r.x, y + r.y]
    lv = hl.Func("local_variance")
    mean = hl.sum(iv) / hl.f32(9.0)
    lv[x, y] = hl.sum(iv * iv) / hl.f32(81.0) - mean * mean
    xx, yy = _grid(10, 10)
    vals = np.stack([((xx + rx) * (yy + ry) + 1).astype(np.float32)
                     for rx in (-1, 0, 1) for ry in (-1, 0, 1)])
    m = vals.sum(0) / np.float32(9)
    assert np.abs((vals * vals).sum(0) / np.float32(81) - m * m
                  - np.asarray(lv.realize([10, 10]))).max() <= 1e-3

    lp, lmax, lmin = hl.Func("lp"), hl.Func("lmax"), hl.Func("lmin")
    lp[x, y] = hl.product(iv)
    lmax[x, y] = hl.maximum(iv)
    lmin[x, y] = hl.minimum(iv)
    min_x, min_y = hl.Func("min_x"), hl.Func("min_y")
    kx, ky = hl.RDom([(-1, 3)]), hl.RDom([(-1, 3)])
    min_x[x, y] = hl.minimum(inp[x + kx.x, y])
    min_y[x, y] = hl.minimum(min_x[x, y + ky.x])
    for f in (lp, lmax, lmin, min_y):
        f.vectorize(x, 4)
    prod = np.asarray(lp.realize([10, 10]))
    ratio = (np.prod(vals.astype(np.float64), axis=0) + 10) / (prod + 10)
    assert ((ratio >= 0.99) & (ratio <= 1.01)).all()
    _eq(lmax.realize([10, 10]), vals.max(0))
    _eq(lmin.realize([10, 10]), vals.min(0))
    _eq(min_y.realize([10, 10]), vals.min(0))


def test_inline_reductions_with_implicit_args():
    """Halide's correctness/inline_reduction.cpp: inline reductions over f(_, r)."""
    _, x, y = hl._, hl.Var("x"), hl.Var("y")
    zz, yy, xx = np.mgrid[0:10, 0:10, 0:10]
    in3 = (xx * 100.0 + yy * 10.0 + (zz + 5 % 10)).astype(np.float32)
    input_3d = hl.Buffer(in3)
    all_z = hl.RDom([(input_3d.dim(2).min(), input_3d.dim(2).extent())])
    s, p, mi, ma = hl.Func("s"), hl.Func("p"), hl.Func("mi"), hl.Func("ma")
    s[_] = hl.sum(input_3d[_, all_z.x])
    p[_] = hl.product(input_3d[_, all_z.x])
    mi[_] = hl.minimum(input_3d[_, all_z.x])
    ma[_, y] = hl.maximum(input_3d[_, y, all_z.x])
    ami, ama = hl.Func("ami"), hl.Func("ama")
    ami[_] = hl.argmin(input_3d[_, all_z.x])[0]
    ama[x, _] = hl.argmax(input_3d[x, _, all_z.x])[0]
    assert np.abs(np.asarray(s.realize([10, 10])) - in3.sum(0)).max() <= 1e-3
    assert np.allclose(np.asarray(p.realize([10, 10])), np.prod(in3.astype(np.float64), 0),
                       rtol=1e-4)
    _eq(mi.realize([10, 10]), in3.min(0))
    _eq(ma.realize([10, 10]), in3.max(0))
    _eq(ami.realize([10, 10]), in3.argmin(0))
    _eq(ama.realize([10, 10]), in3.argmax(0))


def test_inline_minimum_maximum_of_constants_and_infinities():
    """Halide's correctness/inline_reduction.cpp: minimum / maximum of r * -0.5 and r * inf."""

    def evaluate(e):
        f = hl.Func("ev")
        f[()] = e
        return f.realize([])[()]

    inf = math.inf
    r11, r10 = hl.RDom([(0, 11)]), hl.RDom([(1, 10)])
    assert evaluate(hl.minimum(r11.x * hl.f32(-0.5))) == -5.0
    assert evaluate(hl.minimum(r11.x * hl.cast(hl.Float(64), hl.f32(-0.5)))) == -5.0
    assert evaluate(hl.minimum(hl.strict_float(r10.x * hl.f32(inf)))) == inf
    assert evaluate(hl.minimum(hl.strict_float(r10.x * hl.f64(inf)))) == inf
    assert evaluate(hl.maximum(hl.strict_float(r10.x * hl.f32(-inf)))) == -inf
    assert evaluate(hl.maximum(hl.strict_float(r10.x * hl.f64(-inf)))) == -inf


def test_interleaved_select_tiled_and_vectorized():
    """Halide's correctness/interleave_x.cpp: select(x % 2 == 0, 3, 7) as uint16."""
    x, y, xo, yo = hl.Var("x"), hl.Var("y"), hl.Var("xo"), hl.Var("yo")
    f = hl.Func("interleaved")
    f[x, y] = hl.select(x % 2 == 0, hl.cast(hl.UInt(16), 3), hl.cast(hl.UInt(16), 7))
    f.tile(x, y, xo, yo, x, y, 8, 8).vectorize(x)
    out = np.asarray(f.realize([128, 128]))
    xx, _ = _grid(128, 128)
    assert out.dtype == np.uint16
    _eq(out, np.where(xx % 2 == 0, 3, 7))


def test_lambda_funcs():
    """Halide's correctness/lambda.cpp: lambda_func with vars and implicit args."""
    x, y, z = hl.Var("x"), hl.Var("y"), hl.Var("z")
    _ = hl._
    f = hl.Func("f")
    f[x, y] = x * y
    g = hl.lambda_func(x, y, x * y)
    xx, yy = _grid(10, 10)
    _eq(hl.lambda_func(_, f[_] - g[_] + hl.lambda_func(x, y, x + y)[_]).realize([10, 10]),
        xx + yy)
    h = hl.Func("h")
    h[x, y, z] = x + y * y + z * z * z
    Z, Y, X = np.mgrid[0:10, 0:10, 0:10]
    _eq(hl.lambda_func(_, z, h[_, z]).realize([10, 10, 10]), X + Y * Y + Z * Z * Z)


def test_param_dependent_rdom_extent():
    """Halide's correctness/let_in_rdom_bound.cpp, without the Internal Let: extent ((p+8)/p)^2."""
    p = hl.Param(hl.Int(32), "p")
    x = hl.Var("x")
    q = (p + 8) / p
    r = hl.RDom([(0, q * q)])
    f = hl.Func("f")
    f[x] = 0
    f[x] += r.x
    p.set(3)
    b = ((3 + 8) // 3) ** 2
    _eq(f.realize([10]), np.full(10, b * (b - 1) // 2))


def test_lots_of_loop_invariants():
    """Halide's correctness/lots_of_loop_invariants.cpp: sum of 100 (c+i)^2 * (x+i) terms."""
    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
    e = hl.Expr(0)
    for i in range(100):
        e = e + (c + i) * (c + i) * (x + i)
    f = hl.Func("f")
    f[x, y, c] = e
    C, _, X = np.mgrid[0:3, 0:4, 0:32]
    _eq(f.realize([32, 4, 3]), sum((C + i) * (C + i) * (X + i) for i in range(100)))


# ----------------------------------------------------------------------------------------------
# median3x3, mul_div_mod


def test_median3x3():
    """Halide's correctness/median3x3.cpp: separable min/max/mid median, vectorized."""

    def mid3(a, b, c):
        return hl.max(hl.min(hl.max(a, b), c), hl.min(a, b))

    w = h = 64
    inn = np.random.default_rng(1).integers(0, 256, (h, w)).astype(np.uint8)
    x, y = hl.Var("x"), hl.Var("y")
    inp = hl.BoundaryConditions.constant_exterior(hl.Buffer(inn), 0)
    inp.compute_root()
    max_x, min_x, mid_x = hl.Func("max_x"), hl.Func("min_x"), hl.Func("mid_x")
    max_x[x, y] = hl.max(inp[x - 1, y], inp[x, y], inp[x + 1, y])
    min_x[x, y] = hl.min(inp[x - 1, y], inp[x, y], inp[x + 1, y])
    mid_x[x, y] = mid3(inp[x - 1, y], inp[x, y], inp[x + 1, y])
    min_max, max_min, mid_mid = hl.Func("min_max"), hl.Func("max_min"), hl.Func("mid_mid")
    min_max[x, y] = hl.min(max_x[x, y - 1], max_x[x, y], max_x[x, y + 1])
    max_min[x, y] = hl.max(min_x[x, y - 1], min_x[x, y], min_x[x, y + 1])
    mid_mid[x, y] = mid3(mid_x[x, y - 1], mid_x[x, y], mid_x[x, y + 1])
    med = hl.Func("median3x3")
    med[x, y] = mid3(min_max[x, y], max_min[x, y], mid_mid[x, y])
    med.vectorize(x, hl.get_jit_target_from_environment().natural_vector_size(hl.UInt(8)))
    out = np.asarray(med.realize([w, h]))
    win = np.stack([inn[1 + dy:h - 1 + dy, 1 + dx:w - 1 + dx]
                    for dy in (-1, 0, 1) for dx in (-1, 0, 1)])
    _eq(out[1:-1, 1:-1], np.median(win, axis=0).astype(np.uint8))


def _ubits(unique, i, j):
    u = np.uint64
    mi, mj, mk, ml, mu = u(982451653), u(776531491), u(573259391), u(373587883), u(275604541)
    s32 = u(32)
    with np.errstate(over="ignore"):
        bits = ((u(unique) * mu + i) * mi + j) * mj
        bits = (bits ^ (bits >> s32)) * mk
        bits = (bits ^ (bits >> s32)) * ml
        bits = (bits ^ (bits >> s32)) * mi
        bits = (bits ^ (bits >> s32)) * mu
    return bits


def _mdm_init(dt, unique, n=32):
    """mul_div_mod.cpp's init(): hashed values, salted with min/max, min/max in the corner."""
    i, j = np.meshgrid(np.arange(n, dtype=np.uint64), np.arange(n, dtype=np.uint64))
    info = np.iinfo(dt)
    u, salt = _ubits(unique, i, j), _ubits(unique | 0x100, i, j)
    if info.min < 0:
        mx, mn = int(info.max), int(info.min)
        v = u.view(np.int64)
        v = np.where(v < 0, v | (~np.int64(0) ^ np.int64(mx)), v & np.int64(mx))
        vs = salt.view(np.int64)
        v = np.where(np.fmod(vs, 50) == 0, np.where(vs & 0x1000000, mx, mn), v)
        lo, hi = mn, mx
    else:
        mx = int(info.max)
        v = u & np.uint64(mx)
        v = np.where(salt % np.uint64(50) == 0,
                     np.where(salt & np.uint64(0x1000000), np.uint64(mx), np.uint64(0)), v)
        lo, hi = 0, mx
    r = v.astype(dt)
    r[0, 0], r[0, 1] = lo, hi
    r[1, 0], r[1, 1] = (lo, hi) if unique & 1 else (hi, lo)
    return r


def _htype(dt):
    info = np.iinfo(dt)
    return (hl.Int if info.min < 0 else hl.UInt)(info.bits)


_u8, _u16, _u32, _i8, _i16, _i32 = np.uint8, np.uint16, np.uint32, np.int8, np.int16, np.int32
_MULS = [(_u8, _u8, _u8), (_u16, _u16, _u16), (_u32, _u32, _u32), (_i8, _i8, _i8),
         (_i16, _i16, _i16), (_i32, _i32, _i32), (_u8, _u8, _u16), (_u16, _u16, _u32),
         (_i8, _i8, _i16), (_i16, _i16, _i32), (_u16, _u32, _u32), (_i16, _i32, _i32),
         (_u16, _i32, _i32)]


@pytest.mark.parametrize("vw", [1, 8])
def test_wrapping_multiplication(vw):
    """Halide's correctness/mul_div_mod.cpp: cast(rt, a) * cast(rt, b) wraps like C."""
    x, y = hl.Var("x"), hl.Var("y")
    for t1, t2, rt in _MULS:
        a, b = _mdm_init(t1, 1), _mdm_init(t2, 2)
        ab, bb = hl.Buffer(a), hl.Buffer(b)
        f = hl.Func("f")
        f[x, y] = hl.cast(_htype(rt), ab[x, y]) * hl.cast(_htype(rt), bb[x, y])
        if vw > 1:
            f.vectorize(x, vw)
        out = np.asarray(f.realize([32, 32]))
        with np.errstate(over="ignore"):
            want = (a.astype(np.int64).view(np.uint64) * b.astype(np.int64).view(np.uint64))
        assert out.dtype == rt
        _eq(out, want.astype(rt))


@pytest.mark.parametrize("vw", [1, 8])
def test_euclidean_division_and_modulus(vw):
    """Halide's correctness/mul_div_mod.cpp: (a/b)*b + a%b == a and 0 <= a%b < |b|."""
    x, y = hl.Var("x"), hl.Var("y")
    for t in (_u8, _u16, _u32, _i8, _i16, _i32):
        a, b = _mdm_init(t, 1), _mdm_init(t, 2)
        b[b == 0] = 1
        info = np.iinfo(t)
        if info.min < 0:
            fix = (a == info.min) & (b == -1)
            a[fix] = a[fix] + 1
        ab, bb = hl.Buffer(a), hl.Buffer(b)
        f = hl.Func("f")
        f[x, y] = hl.Tuple([ab[x, y] / bb[x, y], ab[x, y] % bb[x, y]])
        if vw > 1:
            f.vectorize(x, vw)
        q, r = (np.asarray(o).astype(object) for o in f.realize([32, 32]))
        A, B = a.astype(object), b.astype(object)
        assert (q * B + r == A).all(), t
        assert ((r >= 0) & (r < abs(B))).all(), t


# ----------------------------------------------------------------------------------------------
# multipass_constraints, negative_split_factors, obscure_image_references


def _multipass_pipeline():
    inp = hl.ImageParam(hl.Float(32), 2, "in")
    out = hl.Func("out")
    x, y = hl.Var("x"), hl.Var("y")
    out[x, y] = inp[x + 1, y + 1] + inp[x - 1, y - 1]
    out[x, y] += hl.f32(3.0)
    out.update().vectorize(x, 4)
    o = out.output_buffer()
    inp.dim(0).set_bounds(inp.dim(1).min() - 5, inp.dim(1).extent() + o.dim(0).extent())
    o.dim(0).set_bounds(0, hl.select(o.dim(0).extent() < 22, o.dim(0).extent() + 1,
                                     o.dim(0).extent()))
    return inp, out


def test_multipass_constraints_on_an_allocated_output():
    """Halide's correctness/multipass_constraints.cpp, with an allocated 7x8 output at (2, 2)."""
    inp, out = _multipass_pipeline()
    ob = hl.Buffer(hl.Float(32), [7, 8])
    ob.set_min([2, 2])
    out.infer_input_bounds(ob)
    assert _bounds(inp) == [(-4, 18), (1, 10)]


def test_multipass_constraints_bounds_query():
    """Halide's correctness/multipass_constraints.cpp: a bounds query with sizes [7, 8]."""
    inp, out = _multipass_pipeline()
    out.infer_input_bounds([7, 8])
    assert _bounds(inp) == [(-6, 34), (-1, 10)]


def test_negative_split_factor_is_an_error():
    """Halide's correctness/negative_split_factors.cpp: parallel(x, p) with p = -17 fails."""
    split = hl.Param(hl.Int(32), "split")
    f = hl.Func("f")
    x = hl.Var("x")
    f[x] = x

    def go():
        f.parallel(x, split)
        split.set(-17)
        f.realize([32])

    assert _raises(go)


def test_obscure_image_references():
    """Halide's correctness/obscure_image_references.cpp: im1.width() and im2(j) in an RDom."""
    im1 = hl.ImageParam(hl.UInt(8), 1, "im1")
    a2 = np.zeros(10, dtype=np.uint8)
    im2 = hl.Buffer(a2)
    im3 = hl.Buffer(np.zeros(20, dtype=np.uint8))
    j = hl.Param(hl.Int(32), "j")
    f, x = hl.Func("f"), hl.Var("x")
    f[x] = x + im1.width()
    r = hl.RDom([(0, hl.cast(hl.Int(32), hl.clamp(im2[j], 0, 99)))])
    f[r.x] = 37
    im2[3] = 10
    j.set(3)
    im1.set(im3)
    i = np.arange(100)
    _eq(f.realize([100]), np.where(i < 10, 37, i + 20))


# ----------------------------------------------------------------------------------------------
# parallel_fork


@pytest.mark.parametrize("schedule", ["serial", "parallel", "async_root", "async_compute_at"])
def test_parallel_fork_schedules(schedule):
    """Halide's correctness/parallel_fork.cpp: its schedules, with x + y / x - y for the extern."""
    x, y, z = hl.Var("x"), hl.Var("y"), hl.Var("z")
    both, f, g = hl.Func("both"), hl.Func("f"), hl.Func("g")
    f[x, y] = x + y
    g[x, y] = x - y
    both[x, y, z] = hl.select(z == 0, f[x, y], g[x, y])
    both.compute_root().bound(z, 0, 2)
    if schedule == "serial":
        f.compute_root()
        g.compute_root()
    elif schedule == "parallel":
        both.parallel(z)
        f.compute_at(both, z)
        g.compute_at(both, z)
    elif schedule == "async_root":
        f.compute_root().async_()
        g.compute_root().async_()
    else:
        both.parallel(z)
        f.compute_at(both, z).async_()
        g.compute_at(both, z).async_()
    Z, Y, X = np.mgrid[0:2, 0:10, 0:10]
    _eq(both.realize([10, 10, 2]), np.where(Z == 0, X + Y, X - Y))


# ----------------------------------------------------------------------------------------------
# parallel_scatter, partition_loops


@pytest.mark.parametrize("parallel", [False, True])
def test_scatter_into_histogram_bins(parallel):
    """Halide's correctness/parallel_scatter.cpp: hist(squares(r) % 10, x) = squares(x)."""
    squares, hist = hl.Func("squares"), hl.Func("hist")
    b, x = hl.Var("b"), hl.Var("x")
    squares[x] = x * x
    hist[b, x] = 0
    r = hl.RDom([(0, 100)])
    hist[squares[r.x] % 10, x] = squares[x]
    ro, ri = hl.RVar("ro"), hl.RVar("ri")
    hist.update().split(r.x, ro, ri, 8).reorder(ro, x, ri)
    if parallel:
        hist.update().atomic().parallel(ri).parallel(x).vectorize(ro)
    has = np.isin(np.arange(10), np.arange(100) ** 2 % 10)
    j = np.arange(100)[:, None]
    _eq(hist.realize([10, 100]), np.where(has[None, :], j * j, 0))


def test_partition_loops_with_boundary_condition():
    """Halide's correctness/partition_loops.cpp: repeat_edge read at x + g(x, y, 0)."""
    w = 64
    C, Y, X = np.mgrid[0:3, 0:w, 0:w]
    inn = (X + Y + C).astype(np.uint8)
    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
    clamped = hl.BoundaryConditions.repeat_edge(hl.Buffer(inn))
    f, g, h, output = hl.Func("f"), hl.Func("g"), hl.Func("h"), hl.Func("output")
    g[x, y, c] = x + y + c
    g[x, y, 0] = x
    h[x, y] = clamped[x + g[x, y, 0], y, 2]
    f[x, y, c] = hl.select(h[x, y] < x + y, x + y, y + c)
    f.compute_root()
    output[x, y, c] = hl.cast(hl.Float(32), f[x, y, c])
    hv = inn[2][Y[0], np.minimum(2 * X[0], w - 1)].astype(np.int64)
    _eq(output.realize([w, w, 3]),
        np.where((hv < X[0] + Y[0])[None], (X[0] + Y[0])[None], Y + C).astype(np.float32))

    xo, xi, fused = hl.Var("xo"), hl.Var("xi"), hl.Var("yxi")
    f2 = hl.Func("f2")
    f2[x, y] = x + y
    f2.split(x, xo, xi, 2, hl.TailStrategy.PredicateStores).fuse(y, xi, fused)
    xx, yy = _grid(100, 100)
    _eq(hl.Pipeline(f2).realize([100, 100]), xx + yy)


# ----------------------------------------------------------------------------------------------
# predicated_store_load


@pytest.mark.parametrize("ts", ["Predicate", "PredicateLoads", "PredicateStores"])
def test_predicated_vector_tail(ts):
    """Halide's correctness/predicated_store_load.cpp: predicated tail strategies."""
    size = 73
    x, y = hl.Var("x"), hl.Var("y")
    f, g = hl.Func("f"), hl.Func("g")
    p = hl.ImageParam(hl.Int(32), 2, "p")
    f[x, y] = p[x, y]
    g[x, y] = f[x, y]
    f.compute_root()
    f.vectorize(x, 32, getattr(hl.TailStrategy, ts))
    bs = (size + 31) // 32 * 32 if ts == "PredicateStores" else size
    arr = np.ascontiguousarray(_grid(bs, size)[0].astype(np.int32))
    p.set(hl.Buffer(arr))
    _eq(g.realize([size, size]), _grid(size, size)[0])


def test_predicated_tail_with_scalar_and_negative_stride_loads():
    """Halide's correctness/predicated_store_load.cpp: scalar load, stride -1 dense loads."""
    x, y = hl.Var("x"), hl.Var("y")
    f, g = hl.Func("f"), hl.Func("g")
    g[x] = 10
    f[x, y] = x + g[0]
    g.compute_at(f, y)
    f.vectorize(x, 32, hl.TailStrategy.Predicate)
    xx, yy = _grid(73, 73)
    _eq(f.realize([73, 73]), xx + 10)

    f, g = hl.Func("f"), hl.Func("g")
    g[x, y] = x * y
    g.compute_root()
    f[x, y] = hl.select(x < 23, g[73 - x, y] * 2 + g[20 - x, y], hl.undef(hl.Int(32)))
    f.vectorize(x, 32, hl.TailStrategy.Predicate)
    out = np.asarray(f.realize([73, 73]))
    m = xx < 23
    _eq(out[m], ((73 - xx) * yy * 2 + (20 - xx) * yy)[m])


def _pred_update(kind):
    x, y = hl.Var("x"), hl.Var("y")
    f, g = hl.Func("f"), hl.Func("g")
    g[x, y] = x * y if kind == "multi" else x + y
    g.compute_root()
    if kind == "multi":
        r = hl.RDom([(0, 100), (0, 100)])
        r.where(r.x + r.y < 57)
        r.where(r.x * r.y + r.x * r.x < 490)
        f[x, y] = 10
        f[r.x, r.y] = g[100 - r.x, r.y] * 2 + g[67 - r.x, r.y]
        xx, yy = _grid(100, 100)
        m = (xx + yy < 57) & (xx * yy + xx * xx < 490)
        want = np.where(m, (100 - xx) * yy * 2 + (67 - xx) * yy, 10)
    elif kind == "scalarized":
        r = hl.RDom([(0, 100), (0, 100)])
        r.where(r.x + r.y < r.x * r.y)
        f[x, y] = 10
        f[r.x, r.y] += g[2 * r.x, r.y] + g[2 * r.x + 1, r.y]
        xx, yy = _grid(170, 170)
        m = (xx < 100) & (yy < 100) & (xx + yy < xx * yy)
        want = np.where(m, 10 + 4 * xx + 1 + 2 * yy, 10)
    elif kind == "scalar_load":
        r = hl.RDom([(0, 80), (0, 80)])
        r.where(r.x + r.y < 48)
        f[x, y] = 10
        f[r.x, r.y] += 1 + hl.max(g[0, 1], g[2 * r.x + 1, r.y])
        xx, yy = _grid(160, 160)
        m = (xx < 80) & (yy < 80) & (xx + yy < 48)
        want = np.where(m, 11 + np.maximum(1, 2 * xx + 1 + yy), 10)
    elif kind == "scalar_store":
        r = hl.RDom([(0, 80), (0, 80)])
        r.where(r.x + r.y < 48)
        f[x, y] = 10
        f[13, 13] = hl.max(g[0, 1], g[2 * r.x + 1, r.y])
        f.update(0).allow_race_conditions()
        want = np.full((160, 160), 10)
        want[13, 13] = 48  # the last point of the domain is r = (0, 47)
    else:
        r = hl.RDom([(0, 100), (0, 100)])
        r.where(r.x + r.y < r.x * r.y)
        f[x, y] = 10
        f[r.x, r.y] += hl.abs(r.x * r.y) + g[2 * r.x + 1, r.y]
        xx, yy = _grid(160, 160)
        m = (xx < 100) & (yy < 100) & (xx + yy < xx * yy)
        want = np.where(m, 10 + xx * yy + 2 * xx + 1 + yy, 10)
    f.update(0).vectorize(r.x, 32)
    _eq(f.realize([want.shape[1], want.shape[0]]), want)


@pytest.mark.parametrize("kind", ["multi", "scalarized", "scalar_load", "scalar_store",
                                  "pure_call"])
def test_vectorized_update_over_predicated_rdom(kind):
    """Halide's correctness/predicated_store_load.cpp: vectorized RVars with where() clauses."""
    _pred_update(kind)


def test_predicate_not_dependent_on_vectorized_rvar():
    """Halide's correctness/predicated_store_load.cpp: where() on r.z, r.z vectorized."""
    x, y, z = hl.Var("x"), hl.Var("y"), hl.Var("z")
    f, g = hl.Func("f"), hl.Func("g")
    g[x, y, z] = x + y + z
    g.compute_root()
    r = hl.RDom([(0, 20), (0, 20), (0, 20)])
    r.where(r.z * r.z < 47)
    f[x, y, z] = 10
    f[r.x, r.y, 1] = hl.max(g[0, 1, 2], g[r.x + 1, r.y, 2])
    f.update(0).allow_race_conditions()
    f.update(0).vectorize(r.z, 32)
    want = np.full((40, 40, 40), 10)
    xx, yy = _grid(20, 20)
    want[1, :20, :20] = np.maximum(3, xx + yy + 3)
    _eq(f.realize([40, 40, 40]), want)


def test_no_op_stores_vectorized_over_strided_rdom():
    """Halide's correctness/predicated_store_load.cpp: f(2 r.x + 1, r.y) = f(2 r.x + 1, r.y)."""
    x, y = hl.Var("x"), hl.Var("y")
    f = hl.Func("f")
    r = hl.RDom([(0, 80), (0, 80)])
    r.where(r.x + r.y < 47)
    f[x, y] = x + y
    f[2 * r.x + 1, r.y] = f[2 * r.x + 1, r.y]
    f[2 * r.x, 3 * r.y] = f[2 * r.x, 3 * r.y]
    f.update(0).vectorize(r.x, 32)
    f.update(1).vectorize(r.y, 32)
    xx, yy = _grid(240, 240)
    _eq(f.realize([240, 240]), xx + yy)


def test_vectorized_predicated_loads_at_constant_index_and_lut():
    """Halide's correctness/predicated_store_load.cpp: input(r.x % 2, y); lut scatter; atomic."""
    inn = np.random.default_rng(2).integers(-20, 20, (100, 100)).astype(np.int32)
    f, x, y = hl.Func("f"), hl.Var("x"), hl.Var("y")
    inp = hl.ImageParam(hl.Int(32), 2, "input")
    inp.set(hl.Buffer(inn))
    r = hl.RDom([(0, 100)])
    f[x, y] = x + y
    f[r.x, y] = hl.clamp(hl.select((r.x % 2) == 0, r.x, y) + inp[r.x % 2, y], 0, 10)
    f.update().vectorize(r.x, 32)
    xx, yy = _grid(100, 100)
    _eq(f.realize([100, 100]), np.clip(np.where(xx % 2 == 0, xx, yy) + inn[yy, xx % 2], 0, 10))

    lut = hl.Buffer(np.zeros((6, 2), dtype=np.int32))
    dst = hl.Func("dst")
    r = hl.RDom([(0, 6)])
    dst[x] = hl.f32(0.0)
    dst[hl.clamp(lut[0, r.x], 0, 99)] += hl.f32(1.0)
    dst.output_buffer().dim(0).set_min(0).set_extent(100)
    dst.update().allow_race_conditions().vectorize(r.x, 4)
    out = np.asarray(dst.realize([100]))
    assert out[1:].sum() == 0 and out[0] >= 1

    fin = hl.ImageParam(hl.Float(32), 1, "in")
    fa = hl.Func("fa")
    r = hl.RDom([(0, 20)])
    fa[x] = hl.f32(0.0)
    fa[x] += fin[r.x] + x
    fa.update().vectorize(x, 8, hl.TailStrategy.GuardWithIf).atomic().parallel(r.x)
    fa.compile_jit()
    vals = np.arange(20, dtype=np.float32)
    fin.set(hl.Buffer(vals))
    _eq(fa.realize([13]), vals.sum() + 20 * np.arange(13, dtype=np.float32))


# ----------------------------------------------------------------------------------------------
# pseudostack_shares_slots, reduction_chain, reorder_rvars


def _stack_chain_ref(n, xs, with_downsample):
    if n == 0:
        return (xs & 0xFF).astype(np.uint8)
    if with_downsample and n == 10:
        return _stack_chain_ref(n - 1, xs // 4, with_downsample)
    a = _stack_chain_ref(n - 1, xs - 1, with_downsample).astype(np.int64)
    return (a + _stack_chain_ref(n - 1, xs + 1, with_downsample)).astype(np.uint8)


def test_stack_chain_split_by_param():
    """Halide's correctness/pseudostack_shares_slots.cpp: values (malloc counts are C++-only)."""
    x = hl.Var("x")
    chain = [hl.Func("in")]
    chain[0][x] = hl.cast(hl.UInt(8), x)
    for i in range(1, 20):
        nxt = hl.Func(f"c{i}")
        nxt[x] = chain[-1][x - 1] + chain[-1][x + 1]
        chain.append(nxt)
    p = hl.Param(hl.Int(32), "p")
    xo, xi = hl.Var("xo"), hl.Var("xi")
    chain[-1].split(x, xo, xi, p)
    for c in chain[:-1]:
        c.compute_at(chain[-1], xo).store_in(hl.MemoryType.Stack)
    p.set(200)
    _eq(chain[-1].realize([800]), _stack_chain_ref(19, np.arange(800, dtype=np.int64), False))


def test_stack_chain_split_by_constant():
    """Halide's correctness/pseudostack_shares_slots.cpp, split by a constant: values."""
    x = hl.Var("x")
    chain = [hl.Func("in")]
    chain[0][x] = hl.cast(hl.UInt(8), x)
    for i in range(1, 20):
        nxt = hl.Func(f"c{i}")
        nxt[x] = chain[-1][x / 4] if i == 10 else chain[-1][x - 1] + chain[-1][x + 1]
        chain.append(nxt)
    xo, xi = hl.Var("xo"), hl.Var("xi")
    chain[-1].split(x, xo, xi, 160)
    for c in chain[:-1]:
        c.compute_at(chain[-1], xo).store_in(hl.MemoryType.Stack)
    _eq(chain[-1].realize([640]), _stack_chain_ref(19, np.arange(640, dtype=np.int64), True))


def test_reduction_chain_on_the_diagonal():
    """Halide's correctness/reduction_chain.cpp: updates of g(x, x) with store_at funcs."""
    f0, f1, f2, g, out = [hl.Func(n) for n in ("f0", "f1", "f2", "g", "out")]
    x, y = hl.Var("x"), hl.Var("y")
    f0[x, y] = 0
    f1[x, y] = 1
    f2[x, y] = 2
    g[x, y] = 0
    g[x, x] = g[x, x - 1] + g[x, x + 1] + f0[x, x]
    g[y, y] = g[y - 1, y] + g[y + 1, y] + f1[y, y]
    g[x, x] = g[x, x - 1] + g[x, x + 1] + f2[x, x]
    out[x, y] = g[x - 1, y - 1] + g[x + 1, y + 1]
    g.store_root().compute_at(out, x)
    f0.store_at(out, x).compute_at(g, x)
    f1.store_at(out, x).compute_at(g, y)
    f2.store_at(out, x).compute_at(g, x)
    _eq(out.realize([10, 10]), 4 * np.eye(10, dtype=np.int32))


def test_reordered_rvars():
    """Halide's correctness/reorder_rvars.cpp: reordering pure vars and RVars, and an SAT."""
    x, y = hl.Var("x"), hl.Var("y")
    r1 = hl.RDom([(0, 10), (1, 10)])
    r2 = hl.RDom([(0, 10), (3, 10), (0, 5)])

    def make(name):
        f = hl.Func(name)
        f[x, y] = x + y
        f[x, y] += r1.x * r1.y
        f[x, r2.x] -= r2.z * f[x, r2.x + r2.y]
        return f

    f, g = make("f"), make("g")
    g.reorder(y, x)
    g.update(0).reorder(r1.y, y, x, r1.x)
    g.update(1).reorder(r2.x, x, r2.y, r2.z)
    g.compute_root()
    f.compute_root()
    out = hl.Func("out")
    out[x, y] = hl.Tuple([f[x, y], g[x, y]])
    want = np.fromfunction(lambda yy, xx: xx + yy, (40, 40), dtype=np.int64)
    want += sum(a * b for a in range(10) for b in range(1, 11))
    for rz in range(5):
        for ry in range(3, 13):
            for rx in range(10):
                want[rx, :] -= rz * want[rx + ry, :]
    fo, go = out.realize([20, 20])
    _eq(fo, want[:20, :20])
    _eq(go, want[:20, :20])

    inp, sat = hl.Func("input"), hl.Func("sat")
    inp[x, y] = x * y
    sat[x, y] = inp[x, y]
    r = hl.RDom([(1, 99)])
    sat[x, r.x] += sat[x, r.x - 1]
    sat[r.x, y] += sat[r.x - 1, y]
    xo, xi = hl.Var("xo"), hl.Var("xi")
    sat.update().split(x, xo, xi, 4).reorder(xi, r.x, xo).vectorize(xi).parallel(xo)
    sat.update(1).parallel(y)
    xx, yy = _grid(100, 100)
    _eq(sat.realize([100, 100]), np.cumsum(np.cumsum(xx * yy, axis=0), axis=1))


# ----------------------------------------------------------------------------------------------
# shared_self_references, specialize


def test_shared_self_reference_expr():
    """Halide's correctness/shared_self_references.cpp: one Expr f(2) used in two updates."""
    f, x = hl.Func("f"), hl.Var("x")
    f[x] = x
    e = f[2]
    f[0] = e
    f[1] = e
    del e
    _eq(f.realize([4]), [2, 2, 2, 3])


def test_specialize_on_param_and_output_width():
    """Halide's correctness/specialize.cpp: nested specializations give the same values."""
    param = hl.Param(hl.Bool(), "param")
    f, x = hl.Func("f"), hl.Var("x")
    f[x] = hl.select(param, x * 3, x * 17)
    cond = f.output_buffer().width() >= 4
    f.specialize(cond).vectorize(x, 4)
    f.specialize(cond).specialize(param)
    f.specialize(param)
    for n in (100, 3):
        for pv, m in ((True, 3), (False, 17)):
            param.set(pv)
            out = hl.Buffer(hl.Int(32), [n])
            f.realize(out)
            _eq(out, m * np.arange(n))

    f1, f2, g1, g2, out = [hl.Func(n) for n in ("f1", "f2", "g1", "g2", "out")]
    f1[x] = x + 7
    g1[x] = f1[x] + f1[x + 1]
    f2[x] = x * 34
    g2[x] = f2[x] + f2[x - 1]
    out[x] = hl.select(param, g1[x], g2[x])
    f1.compute_root()
    g1.compute_root()
    f2.compute_root()
    out.specialize(param)
    xs = np.arange(100)
    param.set(True)
    _eq(out.realize([100]), 2 * xs + 15)
    param.set(False)
    _eq(out.realize([100]), 68 * xs - 34)


def test_specialize_on_input_stride():
    """Halide's correctness/specialize.cpp: specialize on im.dim(0).stride() == 1."""
    im = hl.ImageParam(hl.Int(32), 1, "im")
    im.dim(0).set_stride(hl.Expr())
    f, x = hl.Func("f"), hl.Var("x")
    f[x] = im[x]
    f.specialize((im.dim(0).stride() == 1) & (im.width() >= 8)).vectorize(x, 8)
    f.infer_input_bounds([5])
    assert _bounds(im) == [(0, 5)]
    arr = np.arange(100, dtype=np.int32) * 3
    im.set(hl.Buffer(arr))
    _eq(f.realize([100]), arr)
    arr2 = (np.arange(400, dtype=np.int32) * 7).reshape(100, 4)
    im.set(hl.Buffer(arr2[:, 0]))
    _eq(f.realize([100]), arr2[:, 0])


def test_specialized_updates_and_unrolled_bounds():
    """Halide's correctness/specialize.cpp: RDom(start, size) updates; unroll under specialize."""
    f, x, y = hl.Func("f"), hl.Var("x"), hl.Var("y")
    start, size = hl.Param(hl.Int(32), "start"), hl.Param(hl.Int(32), "size")
    r = hl.RDom([(start, size)])
    f[x] = x
    f[r.x] = 10 - r.x
    f.update().specialize(size == 1)
    f.update().specialize(size == 0)
    start.set(0)
    size.set(1)
    want = np.arange(100)
    want[0] = 10
    _eq(f.realize([100]), want)

    im = hl.ImageParam(hl.Int(32), 2, "im")
    f = hl.Func("f2")
    f[x, y] = im[x, y]
    cond = f.output_buffer().width() >= 4
    f.reorder(y, x).unroll(y, 2).reorder(x, y)
    f.specialize(cond).vectorize(x, 4)
    f.infer_input_bounds([3, 1])
    b = _bounds(im)
    assert b[0][1] == 3 and b[1][1] == 2


def test_specialize_chain_and_cond_combinations():
    """Halide's correctness/specialize.cpp: specialize(w >= 4) chain; cond1 && cond2 specs."""
    im = hl.ImageParam(hl.Int(32), 1, "im")
    f, g, h, out = [hl.Func(n) for n in ("f", "g", "h", "out")]
    x, y = hl.Var("x"), hl.Var("y")
    f[x] = im[x]
    g[x] = f[x]
    h[x] = g[x]
    out[x] = h[x]
    w = out.output_buffer().dim(0).extent()
    out.output_buffer().dim(0).set_min(0)
    f.compute_root().specialize(w >= 4).vectorize(x, 4)
    g.compute_root().vectorize(x, 4)
    h.compute_root().vectorize(x, 4)
    out.specialize(w >= 4).vectorize(x, 4)
    arr = np.array([5, 6, 7], dtype=np.int32)
    im.set(hl.Buffer(arr))
    o = hl.Buffer(hl.Int(32), [3])
    out.realize(o)
    _eq(o, arr)

    for both in (True, False):
        im2 = hl.ImageParam(hl.Int(32), 2, "im2")
        c1, c2 = hl.Param(hl.Bool(), "c1"), hl.Param(hl.Bool(), "c2")
        f, out = hl.Func("f"), hl.Func("out")
        f[x, y] = im2[x, y]
        out[x, y] = f[x, y]
        f.compute_at(out, x).specialize((c1 & c2) if both else c1).vectorize(
            x, 4, hl.TailStrategy.RoundUp)
        out.compute_root().specialize(c1 & c2).vectorize(x, 4, hl.TailStrategy.RoundUp)
        arr2 = np.arange(9, dtype=np.int32).reshape(3, 3)
        im2.set(hl.Buffer(arr2))
        c1.set(False)
        c2.set(False)
        o = hl.Buffer(hl.Int(32), [3, 3])
        out.realize(o)
        _eq(o, arr2)


def test_specialized_away_branch_needs_no_input():
    """Halide's correctness/specialize.cpp: select(param, im(x), 0), param false, im 10 wide."""
    im = hl.ImageParam(hl.Int(32), 1, "im")
    param = hl.Param(hl.Bool(), "param")
    f, x = hl.Func("f"), hl.Var("x")
    f[x] = hl.select(param, im[x], 0)
    f.specialize(param)
    param.set(False)
    arr = np.ones(10, dtype=np.int32)
    im.set(hl.Buffer(arr))
    _eq(f.realize([100]), np.zeros(100))


@pytest.mark.parametrize("case", ["shift", "or_condition", "outer_condition"])
def test_specialized_input_bounds(case):
    """Halide's correctness/specialize.cpp: infer_input_bounds under specialize()."""
    p = hl.Param(hl.Int(32), "p")
    f, x = hl.Func("f"), hl.Var("x")
    if case == "shift":
        im = hl.ImageParam(hl.Int(32), 1, "im")
        param = hl.Param(hl.Bool(), "param")
        f[x] = hl.select(param, im[x + 10], im[x - 10])
        f.specialize(param)
        param.set(True)
        f.infer_input_bounds([100])
        assert _bounds(im)[0][0] == 10
        return
    im = hl.ImageParam(hl.Int(32), 2, "im")
    if case == "or_condition":
        test = (p > 73) | (p * p + p + 1 == 0)
        f[x] = hl.select(test, im[x, 0], im[0, x])
        f.specialize(test)
    else:
        f[x] = hl.select(p > 50, im[x, 0], im[0, x])
        f.specialize(p > 73)
    p.set(100)
    f.infer_input_bounds([10])
    assert [e for _, e in _bounds(im)] == [10, 1]


def test_pruned_specializations_and_specialize_fail():
    """Halide's correctness/specialize.cpp: constant-true/false specializations; specialize_fail."""
    xs = np.arange(100)
    for variant in range(3):
        x, p = hl.Var("x"), hl.Param(hl.Int(32), "p")
        const_false, const_true = hl.Expr(0) == hl.Expr(1), hl.Expr(0) == hl.Expr(0)
        f = hl.Func("f")
        f[x] = x
        f.specialize(p == 0).vectorize(x, 32)
        if variant == 0:
            f.specialize(const_false).vectorize(x, 8)
            f.vectorize(x, 4)
        elif variant == 1:
            f.specialize(const_true).vectorize(x, 16)
            f.specialize(const_false).vectorize(x, 4)
            f.specialize(p == 42).vectorize(x, 8)
            f.specialize(const_true)
            f.specialize(hl.Expr(1) == hl.Expr(1))
        else:
            f.specialize(const_true).vectorize(x, 16)
        for pv in (0, 42):
            p.set(pv)
            _eq(f.realize([100]), xs)

    x, p = hl.Var("x"), hl.Param(hl.Int(32), "p")
    f = hl.Func("f")
    f[x] = x
    f.specialize(p == 0)
    f.specialize_fail("Unhandled Param value encountered.")
    f.specialize(p == 0).vectorize(x, 32)
    p.set(0)
    _eq(f.realize([100]), xs)
    p.set(1)
    assert _raises(lambda: f.realize([100]))


# ----------------------------------------------------------------------------------------------
# split_store_compute, storage_folding, strided_load


def test_store_root_compute_at_rows():
    """Halide's correctness/split_store_compute.cpp: g.store_root().compute_at(h, y)."""
    x, y = hl.Var("x"), hl.Var("y")
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    f[x, y] = hl.max(x, y)
    g[x, y] = 17 * f[x, y]
    h[x, y] = g[x, y - 1] + g[x - 1, y] + g[x, y] + g[x + 1, y] + g[x, y + 1]
    g.store_root()
    g.compute_at(h, y)
    f.compute_root()
    i, j = _grid(32, 32)
    m = np.maximum
    _eq(h.realize([32, 32]),
        17 * (m(i - 1, j) + m(i + 1, j) + m(i, j) + m(i, j - 1) + m(i, j + 1)))


@pytest.mark.parametrize("mode", range(4))
def test_storage_folding_of_3d_stencil(mode):
    """Halide's correctness/storage_folding.cpp: store_root/compute_at, fold_storage(y, 3)."""
    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y, c] = x
    g[x, y, c] = f[x - 1, y + 1, c] + f[x, y - 1, c]
    if mode == 0:
        f.store_root().compute_at(g, x)
    elif mode == 1:
        f.store_root().compute_at(g, x)
        g.specialize(g.output_buffer().width() > 4).vectorize(x, 4)
    else:
        f.store_root().compute_at(g, y).fold_storage(y, 3)
        if mode == 3:
            f.reorder(c, x, y).reorder_storage(c, x, y)
            g.reorder(c, x, y).reorder_storage(c, x, y)
    _, _, X = np.mgrid[0:3, 0:100, 0:50]
    _eq(g.realize([50, 100, 3]), 2 * X - 1)


@pytest.mark.parametrize("kind", range(8))
def test_storage_folding_2d(kind):
    """Halide's correctness/storage_folding.cpp: values of the folded 2-D pipelines."""
    x, y = hl.Var("x"), hl.Var("y")
    f, g = hl.Func("f"), hl.Func("g")
    g[x, y] = x * y
    n = 96  # a multiple of 8, as bound(y, 0, (height / 8) * 8) needs
    xx, yy = _grid(n, n)
    if kind == 0:
        f[x, y] = g[2 * x, 2 * y] + g[2 * x + 1, 2 * y + 1]
        g.compute_at(f, x).store_root()
        want = (2 * xx) * (2 * yy) + (2 * xx + 1) * (2 * yy + 1)
    elif kind == 1:
        f[x, y] = g[x, 2 * y] + g[x + 3, 2 * y + 1]
        g.compute_at(f, x).store_root()
        want = xx * (2 * yy) + (xx + 3) * (2 * yy + 1)
    elif kind == 2:
        f[x, y] = g[2 * x, y] + g[2 * x + 1, y + 3]
        g.compute_at(f, x).store_root()
        want = (2 * xx) * yy + (2 * xx + 1) * (yy + 3)
    elif kind == 3:
        f[x, y] = g[x, y]
        yo, yi = hl.Var("yo"), hl.Var("yi")
        f.bound(y, 0, (f.output_buffer().height() / 8) * 8).split(y, yo, yi, 8)
        g.compute_at(f, yo).store_root()
        want = xx * yy
    elif kind == 4:
        f[x, y] = g[2 * x, y] + g[2 * x + 1, y + 2]
        g.compute_at(f, x).store_root().fold_storage(y, 3)
        want = (2 * xx) * yy + (2 * xx + 1) * (yy + 2)
    elif kind == 5:
        f[x, y] = g[x, y / 2] + g[x, y / 2 + 1]
        g.compute_at(f, x).store_root()
        want = xx * (yy // 2) + xx * (yy // 2 + 1)
    elif kind == 6:
        h = hl.Func("h")
        h[x, y] = x * y
        g = hl.Func("g2")
        g[x, y] = h[x, y / 2] + h[x, y / 2 + 1]
        f[x, y] = g[x, y / 2] + g[x, y / 2 + 1]
        h.compute_at(f, y).store_root().fold_storage(y, 4)
        g.compute_at(f, y).store_root().fold_storage(y, 2)

        def cg(a, b):
            return a * (b // 2) + a * (b // 2 + 1)

        want = cg(xx, yy // 2) + cg(xx, yy // 2 + 1)
    else:
        g[x, y] = x
        f[x, y] = g[x - 1, y + 1] + g[x, y - 1]
        g.store_root().compute_at(f, y).fold_storage(y, 3)
        f.specialize(f.output_buffer().width() > 4).vectorize(x, 4)
        want = 2 * xx - 1
    _eq(f.realize([n, n]), want)


def test_fold_storage_with_align_bounds():
    """Halide's correctness/storage_folding.cpp: fold_storage(y, 4).align_bounds(y, 2)."""
    x, y = hl.Var("x"), hl.Var("y")
    inp, a, b, output = hl.Func("input"), hl.Func("a"), hl.Func("b"), hl.Func("output")
    xo, yo, line, chunk = hl.Var("xo"), hl.Var("yo"), hl.Var("line"), hl.Var("chunk")
    inp[x, y] = x
    a[x, y] = inp[x, y]
    b[x, y] = hl.select(y % 2 == 0, a[x, y / 2], a[x, y / 2 + 1])
    c = hl.lambda_func(x, y, b[x, y])
    output[x, y] = c[x, y]
    rup = hl.TailStrategy.RoundUp
    output.bound(y, 0, 64).compute_root().split(y, line, y, 2, rup).split(
        line, chunk, line, 32, rup)
    c.tile(x, y, xo, yo, x, y, 2, 2, rup).compute_at(output, line).store_at(output, chunk)
    a.tile(x, y, xo, yo, x, y, 2, 2, rup).compute_at(c, yo).store_at(
        output, chunk).fold_storage(y, 4).align_bounds(y, 2)
    _eq(output.realize([64, 64]), _grid(64, 64)[0])


def test_strided_loads_vectorized():
    """Halide's correctness/strided_load.cpp: im(2 x) then f(2 x), vectorized by 16."""
    arr = np.random.default_rng(3).integers(-128, 128, 1697).astype(np.int8)
    im = hl.Buffer(arr)
    f, g, x = hl.Func("f"), hl.Func("g"), hl.Var("x")
    f[x] = im[2 * x]
    f.compute_root().vectorize(x, 16).bound(x, 0, 849)
    g[x] = f[2 * x]
    g.compute_root().vectorize(x, 16).bound(x, 0, 425)
    _eq(g.realize([425]), arr[0:1697:4])


# ----------------------------------------------------------------------------------------------
# truncated_pyramid


def test_truncated_pyramid():
    """Halide's correctness/truncated_pyramid.cpp (deterministic input, fewer levels)."""
    levels, size = 10, 40
    x, y = hl.Var("x"), hl.Var("y")
    inp = hl.Func("input")
    inp[x, y] = hl.cast(hl.Float(32), (x * 7 + y * 3) % 17)
    inp.compute_root()
    width, height = hl.Param(hl.Int(32), "width"), hl.Param(hl.Int(32), "height")
    sizes = [(width, height)]
    for _ in range(1, levels):
        sizes.append(((sizes[-1][0] + 1) / 2, (sizes[-1][1] + 1) / 2))
    big = hl.max(width, height) > 32
    gwi = hl.TailStrategy.GuardWithIf
    down = [inp]
    for i in range(1, levels):
        bounded = hl.BoundaryConditions.repeat_edge(down[i - 1],
                                                    [(0, sizes[i][0]), (0, sizes[i][1])])
        ds, d = hl.Func(f"ds{i}"), hl.Func(f"down{i}")
        ds[x, y] = bounded[2 * x - 1, 2 * y - 1] + bounded[2 * x + 2, 2 * y + 2]
        d[x, y] = hl.select(hl.max(sizes[i][0], sizes[i][1]) > 5, ds[x, y], hl.f32(0.0))
        d.compute_root().specialize(big).vectorize(x, 16).parallel(y, 16, gwi)
        down.append(d)
    up = [None] * levels
    up[-1] = down[-1]
    for i in range(levels - 2, -1, -1):
        us, u = hl.Func(f"us{i}"), hl.Func(f"up{i}")
        us[x, y] = up[i + 1][x / 2 - 1, y / 2 - 1] + up[i + 1][x / 2 + 1, y / 2 + 1]
        u[x, y] = hl.select(hl.max(sizes[i][0], sizes[i][1]) > 5, down[i][x, y] - us[x, y],
                            down[i][x, y])
        u.compute_root().specialize(big).vectorize(x, 16).parallel(y, 16, gwi)
        up[i] = u

    sz = [size]
    for _ in range(1, levels):
        sz.append((sz[-1] + 1) // 2)
    f32 = np.float32

    @functools.cache
    def rd(i, px, py):
        if i == 0:
            return f32((px * 7 + py * 3) % 17)
        if sz[i] <= 5:
            return f32(0)

        def c(v):
            return min(max(v, 0), sz[i] - 1)

        a = rd(i - 1, c(2 * px - 1), c(2 * py - 1))
        return f32(a + rd(i - 1, c(2 * px + 2), c(2 * py + 2)))

    @functools.cache
    def ru(i, px, py):
        if i == levels - 1 or sz[i] <= 5:
            return rd(i, px, py)
        u = f32(ru(i + 1, px // 2 - 1, py // 2 - 1) + ru(i + 1, px // 2 + 1, py // 2 + 1))
        return f32(rd(i, px, py) - u)

    width.set(size)
    height.set(size)
    want = np.array([[ru(0, i, j) for i in range(size)] for j in range(size)], dtype=np.float32)
    _eq(up[0].realize([size, size]), want)


# ----------------------------------------------------------------------------------------------
# tuple_update_ops, uninitialized_read, unrolled_reduction, vector_bounds_inference


def test_tuple_update_ops():
    """Halide's correctness/tuple_update_ops.cpp, updates spelled out (no Tuple += in Python)."""
    n = 32
    xx, yy = _grid(n, n)
    x, y, i, j = hl.Var("x"), hl.Var("y"), hl.Var("i"), hl.Var("j")
    _ = hl._
    f = hl.Func("f")
    f[x, y] += x + y
    _eq(f.realize([n, n]), xx + yy)

    f = hl.Func("f")
    f[x, y] = hl.Tuple([0, 0])
    f[x, y] = hl.Tuple([f[x, y][0] + 4, f[x, y][1] + 8])
    f[x, y] = hl.Tuple([f[x, y][0] * (x + y), f[x, y][1] * (x + 13)])
    f[x, y] = hl.Tuple([f[x, y][0] / 2, f[x, y][1] / 2])
    f[x, y] = hl.Tuple([f[x, y][0] - x, f[x, y][1] - y])
    a, b = f.realize([n, n])
    _eq(a, xx + 2 * yy)
    _eq(b, 4 * (xx + 13) - yy)

    f, g = hl.Func("f"), hl.Func("g")
    g[i, j] = i + j
    f[x, _] = hl.Tuple([hl.cast(hl.Int(16), x), hl.cast(hl.Int(32), g[_])])
    f[x, _] = hl.Tuple([f[x, _][0] + hl.cast(hl.Int(16), 2 * x),
                        f[x, _][1] + hl.cast(hl.Int(32), x)])
    m = 12
    a, b = (np.asarray(t) for t in f.realize([m, m, m]))
    J, I, X = np.mgrid[0:m, 0:m, 0:m]
    assert a.dtype == np.int16 and b.dtype == np.int32
    _eq(a, 3 * X)
    _eq(b, X + I + J)

    f = hl.Func("f")
    f[x, y] = hl.Tuple([x + 13, x + y])
    f[x, y] = hl.Tuple([f[x, y][0] * f[x, y][0], f[x, y][1] * f[x, y][1]])
    a, b = f.realize([n, n])
    _eq(a, (xx + 13) ** 2)
    _eq(b, (xx + yy) ** 2)

    f = hl.Func("f")
    f[x, y] = hl.Tuple([x + y])
    f[x, y] = f[x, y] + x
    f[x, y] = f[x, y] * f[x, y]
    _eq(f.realize([n, n]), (2 * xx + yy) ** 2)


def test_indexing_a_non_tuple_funcref_is_an_error():
    """Halide's correctness/tuple_update_ops.cpp: a 1-element Tuple makes a plain Func."""
    f, x = hl.Func("f"), hl.Var("x")
    f[x] = hl.Tuple([x + 1])
    assert _raises(lambda: f[x][0])


def test_vectorized_producer_of_a_one_pixel_output():
    """Halide's correctness/uninitialized_read.cpp: the value (the trace check is C++-only)."""
    f, g, h, x = hl.Func("f"), hl.Func("g"), hl.Func("h"), hl.Var("x")
    f[x] = x
    f.compute_root()
    g[x] = f[x] + 1
    g.compute_root().vectorize(x, 4)
    h[x] = g[x] + 2
    h.output_buffer().dim(0).set_bounds(0, 1)
    _eq(h.realize([1]), [3])


def test_unrolled_split_reduction():
    """Halide's correctness/unrolled_reduction.cpp: split and unrolled RVar, unrolled z."""
    noise_a = np.random.default_rng(4).random(32).astype(np.float32)
    noise = hl.Buffer(noise_a)
    x, y, z = hl.Var("x"), hl.Var("y"), hl.Var("z")
    f, g = hl.Func("f"), hl.Func("g")
    r = hl.RDom([(0, 32)])
    g[x, y] = hl.f32(0.0)
    g[r.x, y] += noise[r.x]
    f[x, y, z] = g[x, y] + g[x + 1, y]
    rxo, rxi = hl.RVar("rxo"), hl.RVar("rxi")
    g.compute_at(f, y).update().split(r.x, rxo, rxi, 2).unroll(rxi)
    f.unroll(z, 2)
    gv = np.zeros(65, dtype=np.float32)
    gv[:32] = noise_a
    _eq(f.realize([64, 8, 4]), np.broadcast_to(gv[:64] + gv[1:65], (4, 8, 64)))


def test_vector_bounds_inference():
    """Halide's correctness/vector_bounds_inference.cpp: vectorized producers, stencil reads."""
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    x, y = hl.Var("x"), hl.Var("y")
    h[x] = x
    g[x] = h[x - 1] + h[x + 1]
    f[x, y] = (g[x - 1] + g[x + 1]) + y
    h.compute_root().vectorize(x, 4)
    g.compute_root().vectorize(x, 4)
    xx, yy = _grid(36, 2)
    _eq(f.realize([36, 2]), 4 * xx + yy)


# ----------------------------------------------------------------------------------------------
# vector_reductions


def _vector_reduction(dst_lanes, rf, src, wf, op):
    kind, bits = src
    dbits = bits * wf
    np_t = {("u", 8): np.uint8, ("i", 8): np.int8, ("u", 16): np.uint16, ("i", 16): np.int16,
            ("u", 32): np.uint32, ("i", 32): np.int32, ("u", 64): np.uint64,
            ("i", 64): np.int64, ("f", 16): np.float16, ("f", 32): np.float32,
            ("f", 64): np.float64}
    hl_t = {"u": hl.UInt, "i": hl.Int, "f": hl.Float}[kind]
    src_np, dst_np = np_t[(kind, bits)], np_t[(kind, dbits)]
    rng = np.random.default_rng(5)
    n = 32
    if kind == "f":
        data = rng.random(n * rf + 48).astype(src_np)
    else:
        data = rng.integers(0 if kind == "u" else -4, 8, n * rf + 48).astype(src_np)
    buf = hl.Buffer(data)
    x, xo, xi, rx = hl.Var("x"), hl.Var("xo"), hl.Var("xi"), hl.RVar("rx")
    r = hl.RDom([(0, rf)])
    dt = hl_t(dbits)
    rhs = hl.cast(dt, buf[x * rf + r.x])
    rhs2 = hl.cast(dt, buf[x * rf + r.x + 32])
    f = hl.Func("f")
    if op == "add":
        f[x] = hl.cast(dt, 0)
        f[x] = f[x] + rhs
    elif op == "mul":
        f[x] = hl.cast(dt, 1)
        f[x] = f[x] * rhs
    elif op == "max":
        f[x] = dt.min()
        f[x] = hl.max(f[x], rhs)
    elif op == "min":
        f[x] = dt.max()
        f[x] = hl.min(f[x], rhs)
    elif op == "or":
        f[x] = hl.cast(hl.Bool(), False)
        f[x] = f[x] | (rhs > hl.cast(dt, 5))
    elif op == "and":
        f[x] = hl.cast(hl.Bool(), True)
        f[x] = f[x] & (rhs > hl.cast(dt, 5))
    else:
        f[x] = hl.cast(dt, 0)
        f[x] = f[x] + rhs * rhs2
    f.compute_root().update().split(x, xo, xi, dst_lanes).fuse(r.x, xi, rx).atomic().vectorize(rx)
    idx = np.arange(n)[:, None] * rf + np.arange(rf)[None, :]
    a, b = data[idx].astype(dst_np), data[idx + 32].astype(dst_np)
    with np.errstate(over="ignore"):
        want = {"add": lambda: a.sum(axis=1, dtype=dst_np),
                "mul": lambda: a.prod(axis=1, dtype=dst_np),
                "max": lambda: a.max(axis=1), "min": lambda: a.min(axis=1),
                "or": lambda: (a > 5).any(axis=1), "and": lambda: (a > 5).all(axis=1),
                "dot": lambda: (a * b).sum(axis=1, dtype=dst_np)}[op]()
    got = np.asarray(f.realize([n]))
    assert np.abs(got.astype(np.float64) - want.astype(np.float64)).max() <= 1e-3


@pytest.mark.parametrize("dst_lanes,rf,src,wf,op", [
    (1, 2, ("u", 8), 1, "add"), (1, 4, ("u", 8), 2, "dot"), (3, 3, ("i", 8), 4, "add"),
    (1, 3, ("i", 16), 1, "mul"), (3, 2, ("u", 16), 2, "dot"), (1, 4, ("i", 32), 1, "max"),
    (3, 4, ("u", 32), 1, "min"), (1, 2, ("i", 32), 2, "mul"), (3, 3, ("i", 64), 1, "dot"),
    (1, 4, ("u", 8), 1, "or"), (3, 2, ("i", 16), 1, "and"), (1, 3, ("f", 32), 1, "add"),
    (3, 4, ("f", 32), 2, "dot"), (1, 2, ("f", 64), 1, "max"), (3, 3, ("f", 64), 1, "mul")])
def test_vectorized_horizontal_reductions(dst_lanes, rf, src, wf, op):
    """Halide's correctness/vector_reductions.cpp: atomic vectorized reductions of fused RVars."""
    _vector_reduction(dst_lanes, rf, src, wf, op)


# ----------------------------------------------------------------------------------------------
# vectorize_nested, vectorized_reduction_bug


@pytest.mark.parametrize("ts", ["RoundUp", "GuardWithIf", "Predicate"])
def test_vectorize_2d_tile(ts):
    """Halide's correctness/vectorize_nested.cpp: tile, vectorize both inner dimensions."""
    f = hl.Func("f")
    x, y, xi, yi = hl.Var("x"), hl.Var("y"), hl.Var("xi"), hl.Var("yi")
    f[x, y] = 3 * x + y
    f.compute_root().tile(x, y, x, y, xi, yi, 8, 4, getattr(hl.TailStrategy, ts)).vectorize(
        xi).vectorize(yi)
    w, h = (32, 24) if ts == "RoundUp" else (33, 22)
    xx, yy = _grid(w, h)
    _eq(f.realize([w, h]), 3 * xx + yy)


def test_vectorize_nested_with_update_inner_for_and_compute_at():
    """Halide's correctness/vectorize_nested.cpp: inlined update, inner loop, compute_at."""
    x, y, c, xi, yi = hl.Var("x"), hl.Var("y"), hl.Var("c"), hl.Var("xi"), hl.Var("yi")
    gwi = hl.TailStrategy.GuardWithIf
    f, inl = hl.Func("f"), hl.Func("inlined")
    r = hl.RDom([(0, 10)], "r")
    inl[x] = x
    inl[x] += r.x
    f[x, y] = inl[x] + 2 * y
    f.compute_root().tile(x, y, x, y, xi, yi, 8, 4, gwi).vectorize(xi).vectorize(yi)
    xx, yy = _grid(33, 22)
    _eq(f.realize([33, 22]), xx + 2 * yy + 45)

    f = hl.Func("f3")
    f[x, y, c] = 3 * x + y + 7 * c
    f.compute_root().tile(x, y, x, y, xi, yi, 8, 4, gwi).reorder(c, xi, yi, x, y).vectorize(
        xi).vectorize(yi)
    C, Y, X = np.mgrid[0:3, 0:22, 0:33]
    _eq(f.realize([33, 22, 3]), 3 * X + Y + 7 * C)

    xii = hl.Var("xii")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = 3 * x + y
    g[x, y] = f[x, y] + f[x + 1, y]
    g.split(x, x, xi, 8, gwi).split(xi, xi, xii, 2, gwi).vectorize(xi).vectorize(xii)
    f.compute_at(g, xii).vectorize(x)
    xx, yy = _grid(35, 17)
    _eq(g.realize([35, 17]), 6 * xx + 3 + 2 * yy)

    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = 3 * x + y
    g[x, y] = f[x, y] + f[x + 1, y]
    g.split(x, x, xi, 8).vectorize(xi)
    f.compute_at(g, xi).vectorize(x)
    xx, yy = _grid(16, 16)
    _eq(g.realize([16, 16]), 6 * xx + 3 + 2 * yy)


def test_vectorize_all_dimensions_and_let_order():
    """Halide's correctness/vectorize_nested.cpp: every loop vectorized; nested split lets."""
    f = hl.Func("f")
    x, y, xi, yi = hl.Var("x"), hl.Var("y"), hl.Var("xi"), hl.Var("yi")
    f[x, y] = 3 * x + y
    f.compute_root().tile(x, y, x, y, xi, yi, 4, 2, hl.TailStrategy.GuardWithIf).vectorize(
        x).vectorize(y).vectorize(xi).vectorize(yi)
    f.bound(x, 0, 12).bound(y, 0, 10)
    xx, yy = _grid(12, 10)
    _eq(f.realize([12, 10]), 3 * xx + yy)

    yo, yoi, yoio, yoii = hl.Var("yo"), hl.Var("yoi"), hl.Var("yoio"), hl.Var("yoii")
    f = hl.Func("f")
    f[x, y] = x + y
    f.split(y, yo, yi, 8, hl.TailStrategy.Auto).split(
        yo, yo, yoi, 4, hl.TailStrategy.RoundUp).vectorize(yoi).vectorize(yi).split(
        yoi, yoio, yoii, 2, hl.TailStrategy.Auto)
    xx, yy = _grid(128, 128)
    _eq(f.realize([128, 128]), xx + yy)

    inp = hl.ImageParam(hl.UInt(8), 2, "in")
    xin, yin, xo = hl.Var("x_inner"), hl.Var("y_inner"), hl.Var("xo")
    out = hl.Func("out")
    out[xin, yin] = inp[xin, yin]
    out.split(xin, xo, xin, 8, hl.TailStrategy.RoundUp).split(
        yin, yo, yin, 8, hl.TailStrategy.GuardWithIf).vectorize(xin).vectorize(yin)
    out.compile_jit()
    arr = (np.arange(20 * 16) % 251).astype(np.uint8).reshape(20, 16)
    inp.set(hl.Buffer(arr))
    _eq(out.realize([16, 20]), arr)


def test_vectorized_reductions_inside_select_and_split():
    """Halide's correctness/vectorized_reduction_bug.cpp: both cases."""
    s, foo = hl.Func("sum"), hl.Func("foo")
    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
    r = hl.RDom([(1, 2)], "r")
    s[x, y] += r.x
    foo[x, y, c] = hl.select(c == 3, 255, s[x, y])
    foo.vectorize(c, 4)
    _eq(foo.realize([2, 2, 4]),
        np.broadcast_to(np.where(np.arange(4) == 3, 255, 3)[:, None, None], (4, 2, 2)))

    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    h[x, y] = x + y
    h.compute_root()
    g[x, y] = 0
    g[x, 0] = hl.sum(h[x, hl.RDom([(0, 120)]).x])
    f[y, x] = g[x, y]
    xo = hl.Var("x_outer")
    f.split(x, xo, x, 16)
    g.compute_at(f, xo)
    g.update(0).vectorize(x)
    f.compute_root()
    xx, yy = _grid(100, 100)
    _eq(f.realize([100, 100]), np.where(xx == 0, 120 * yy + 120 * 119 // 2, 0))
