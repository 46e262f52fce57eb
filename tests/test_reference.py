"""The numpy reference evaluator (pyhalide.reference) against numpy written by hand here.

Where the real Halide 21 Python bindings are installed, a few pipelines are also built with them
(the same code, since the APIs match) as a second, independent oracle.
"""

import math

import numpy as np
import pytest

import pyhalide as hl
from pyhalide import reference
from pyhalide.reference import evaluate_expr
from pyhalide.reference import realize as ref_realize

x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")


def one(f, sizes, mins=None):
    (out,) = ref_realize(f, sizes, mins)
    return out


def rng(seed=0):
    return np.random.default_rng(seed)


# ---------------------------------------------------------------- pointwise
def test_pointwise_uint8_wraps_and_shape():
    img = rng(1).integers(0, 256, (6, 7), dtype=np.uint8)
    b = hl.Buffer(img)
    f = hl.Func("f")
    f[x, y] = b[x, y] * 3 + hl.u8(x) - hl.u8(y)
    out = one(f, [7, 6])
    assert out.shape == (6, 7) and out.dtype == np.uint8
    xs, ys = np.meshgrid(np.arange(7), np.arange(6))
    want = ((img.astype(np.int64) * 3 + xs - ys) % 256).astype(np.uint8)
    np.testing.assert_array_equal(out, want)


def test_realize_with_mins_and_buffer_mins():
    img = np.arange(30, dtype=np.int32).reshape(5, 6)
    b = hl.Buffer(img).set_min(10, 20)
    f = hl.Func("f")
    f[x, y] = b[x, y] + x * 100 + y * 10000
    out = one(f, [4, 3], mins=[11, 21])
    ys, xs = np.mgrid[21:24, 11:15]
    np.testing.assert_array_equal(out, img[1:4, 1:5] + xs * 100 + ys * 10000)


def test_buffer_without_reversed_axes():
    img = np.arange(12, dtype=np.int16).reshape(3, 4)
    b = hl.Buffer(img, reverse_axes=False)  # Halide [x, y] is numpy [x, y]
    f = hl.Func("f")
    f[x, y] = b[x, y]
    np.testing.assert_array_equal(one(f, [3, 4]), img.T)


def test_three_dimensional_axes():
    img = rng(2).integers(-100, 100, (4, 5, 3), dtype=np.int16)
    b = hl.Buffer(img)  # axes reversed: b[i, j, k] is img[k, j, i]
    f = hl.Func("f")
    f[x, y, c] = b[x, y, c] * 2
    out = one(f, [3, 5, 4])
    np.testing.assert_array_equal(out, (img * 2).astype(np.int16))


def test_params_and_image_params():
    p = hl.Param(hl.Int(16), "p", -3)
    fp = hl.Param(hl.Float(32), "fp", 0.1)
    ip = hl.ImageParam(hl.Float(32), 2, "ip")
    img = rng(3).random((4, 5), dtype=np.float32)
    ip.set(hl.Buffer(img))
    f = hl.Func("f")
    f[x, y] = ip[x, y] * fp + hl.f32(p) + hl.f32(ip.width())
    out = one(f, [5, 4])
    want = img * np.float32(0.1) + np.float32(-3) + np.float32(5)
    np.testing.assert_array_equal(out, want.astype(np.float32))


# ---------------------------------------------------------------- stencils and boundary conditions
@pytest.mark.parametrize("dtype", [np.float32, np.uint16])
def test_blur_3x3_repeat_edge(dtype):
    g = rng(4)
    img = (g.random((64, 64)) * 1000).astype(dtype)
    b = hl.Buffer(img)
    clamped = hl.BoundaryConditions.repeat_edge(b)
    bx, by = hl.Func("bx"), hl.Func("by")
    bx[x, y] = (clamped[x - 1, y] + clamped[x, y] + clamped[x + 1, y]) / 3
    by[x, y] = (bx[x, y - 1] + bx[x, y] + bx[x, y + 1]) / 3
    out = one(by, [64, 64])
    p = np.pad(img, 1, mode="edge")
    if dtype == np.float32:
        h = (p[:, :-2] + p[:, 1:-1] + p[:, 2:]) / np.float32(3)
        want = (h[:-2] + h[1:-1] + h[2:]) / np.float32(3)
    else:
        h = ((p[:, :-2] + p[:, 1:-1] + p[:, 2:]) // 3).astype(dtype)  # uint16 sums wrap
        want = ((h[:-2] + h[1:-1] + h[2:]) // 3).astype(dtype)
    np.testing.assert_array_equal(out, want.astype(dtype))


def test_boundary_conditions_on_a_sub_window():
    img = np.arange(12, dtype=np.int32).reshape(3, 4)
    b = hl.Buffer(img)
    fs = {
        "repeat_edge": hl.BoundaryConditions.repeat_edge(b),
        "constant_exterior": hl.BoundaryConditions.constant_exterior(b, -1),
        "repeat_image": hl.BoundaryConditions.repeat_image(b),
        "mirror_image": hl.BoundaryConditions.mirror_image(b),
        "mirror_interior": hl.BoundaryConditions.mirror_interior(b),
    }
    modes = {"repeat_edge": "edge", "repeat_image": "wrap", "mirror_image": "symmetric",
             "mirror_interior": "reflect"}
    for name, f in fs.items():
        out = one(f, [10, 9], mins=[-3, -3])
        if name == "constant_exterior":
            want = np.pad(img, 3, mode="constant", constant_values=-1)
        else:
            want = np.pad(img, 3, mode=modes[name])
        np.testing.assert_array_equal(out, want, err_msg=name)


def test_out_of_bounds_read_names_image_dimension_and_coordinate():
    b = hl.Buffer(np.zeros((4, 5), np.uint8), name="input")
    f = hl.Func("f")
    f[x, y] = b[x - 1, y]
    with pytest.raises(hl.HalideError, match=r"input.*-1.*dimension 0"):
        ref_realize(f, [5, 4])
    g = hl.Func("g")
    g[x, y] = b[x, y + 2]
    with pytest.raises(hl.HalideError, match=r"input.*\b5\b.*dimension 1"):
        ref_realize(g, [5, 4])


def test_select_does_not_read_on_lanes_it_does_not_take():
    img = np.arange(8, dtype=np.int32)
    b = hl.Buffer(img)
    f = hl.Func("f")
    f[x] = hl.select(x > 0, b[x - 1], 0) + hl.select(x < 7, b[hl.min(x + 1, 100)], 100)
    out = one(f, [8])
    want = np.concatenate([[0], img[:-1]]) + np.concatenate([img[1:], [100]])
    np.testing.assert_array_equal(out, want)


# ---------------------------------------------------------------- reductions
@pytest.fixture(params=["batched", "serial"])
def serial_or_batched(request, monkeypatch):
    """Run updates batched (the default) or one RVar iteration at a time, which must agree."""
    if request.param == "serial":
        monkeypatch.setattr(reference, "_BLOCK_ELEMENTS", 1)
    return request.param


def test_histogram_with_where(serial_or_batched):
    img = rng(5).integers(0, 32, (64, 64), dtype=np.uint8)
    b = hl.Buffer(img)
    r = hl.RDom([(0, 64), (0, 64)])
    r.where(r.x < r.y)
    hist = hl.Func("hist")
    hist[x] = 0
    hist[hl.i32(b[r.x, r.y])] += 1
    out = one(hist, [32])
    ys, xs = np.mgrid[0:64, 0:64]
    want = np.bincount(img[xs < ys], minlength=32).astype(np.int32)
    np.testing.assert_array_equal(out, want)


def test_histogram_grows_beyond_requested_region(serial_or_batched):
    # writes land outside [0, 4): the Func is computed over what the update needs, not only what was asked
    vals = np.array([0, 9, 9, 2, 7, 9], np.int32)
    b = hl.Buffer(vals)
    r = hl.RDom([(0, 6)])
    h = hl.Func("h")
    h[x] = x * 100
    h[b[r]] += 1
    np.testing.assert_array_equal(one(h, [4]), [1, 100, 201, 300])
    np.testing.assert_array_equal(one(h, [3], mins=[7]), [701, 800, 903])


def test_matmul_float32_exact_order_and_int32(serial_or_batched):
    g = rng(6)
    a = g.random((32, 32), dtype=np.float32)
    bm = g.random((32, 32), dtype=np.float32)
    A, B = hl.Buffer(a), hl.Buffer(bm)
    k = hl.RDom([(0, 32)])
    C = hl.Func("C")
    C[x, y] = 0.0
    C[x, y] += A[k, y] * B[x, k]
    want = np.zeros((32, 32), np.float32)
    for kk in range(32):
        want += a[:, kk : kk + 1] * bm[kk : kk + 1, :]
    np.testing.assert_array_equal(one(C, [32, 32]), want)

    ai = g.integers(-50, 50, (16, 24), dtype=np.int32)
    bi = g.integers(-50, 50, (24, 8), dtype=np.int32)
    Ai, Bi = hl.Buffer(ai), hl.Buffer(bi)
    kk = hl.RDom([(0, 24)])
    D = hl.Func("D")
    D[x, y] = hl.sum(Ai[kk, y] * Bi[x, kk])
    np.testing.assert_array_equal(one(D, [8, 16]), ai @ bi)


def test_cumulative_sum_scans(serial_or_batched):
    img = rng(7).integers(-1000, 1000, (12, 10), dtype=np.int32)
    b = hl.Buffer(img)
    inp = hl.Func("inp")
    inp[x, y] = b[x, y]
    # scan along y, vectorized over x, reading a Func (not an image) one row at a time
    r = hl.RDom([(1, 11)])
    s = hl.Func("s")
    s[x, y] = inp[x, y]
    s[x, r] = s[x, r - 1] + inp[x, r]
    np.testing.assert_array_equal(one(s, [10, 12]), np.cumsum(img, axis=0))
    # 1-D scan along x of one row, then a second update reading the result
    rx = hl.RDom([(1, 9)])
    t = hl.Func("t")
    t[x] = inp[x, 3]
    t[rx] = t[rx - 1] + t[rx]
    t[x] = t[x] * 2
    np.testing.assert_array_equal(one(t, [10]), 2 * np.cumsum(img[3]))


def test_scan_needs_value_left_of_the_requested_region():
    f = hl.Func("f")
    r = hl.RDom([(0, 5)])
    f[x] = x + 10
    f[r] = f[r - 1] * 2  # reads f[-1] = 9 from the pure definition
    np.testing.assert_array_equal(one(f, [6]), [18, 36, 72, 144, 288, 15])


def test_last_write_wins_and_update_order(serial_or_batched):
    f = hl.Func("f")
    r = hl.RDom([(0, 10)])
    f[x] = -1
    f[r % 3] = r  # iterations 9, 7, 8 are the last to write 0, 1, 2
    f[x] = f[x] + 1000 * (x % 2)
    np.testing.assert_array_equal(one(f, [4]), [9, 1007, 8, 999])


def test_reads_before_and_after_writes_in_rvar_order(serial_or_batched):
    n = 12
    r = hl.RDom([(0, n - 1)])
    back = hl.Func("back")  # reads points that later iterations write: sees the old values
    back[x] = x * x
    back[r] = back[r + 1] - back[r]
    fwd = hl.Func("fwd")  # reads the point the previous iteration wrote: a running sum
    fwd[x] = x * x
    fwd[r + 1] = fwd[r] + fwd[r + 1]
    sq = np.arange(n) ** 2
    want_back = sq.copy()
    want_back[:-1] = sq[1:] - sq[:-1]
    np.testing.assert_array_equal(one(back, [n]), want_back)
    np.testing.assert_array_equal(one(fwd, [n]), np.cumsum(sq))


def test_where_with_pure_var_and_2d_rdom(serial_or_batched):
    img = rng(13).integers(0, 10, (6, 8), dtype=np.int32)
    b = hl.Buffer(img)
    r = hl.RDom([(0, 8)])
    r.where(r.x <= x)  # prefix sums per row, by a predicate on the pure Var
    f = hl.Func("f")
    f[x, y] = 0
    f[x, y] += b[r, y]
    np.testing.assert_array_equal(one(f, [8, 6]), np.cumsum(img, axis=1))


def test_rvar_order_is_x_innermost(serial_or_batched):
    # the last iteration (r.x = 2, r.y = 3) wins at one point
    f = hl.Func("f")
    r = hl.RDom([(0, 3), (0, 4)])
    f[()] = 0
    f[()] = r.x * 10 + r.y
    assert one(f, []) == 23
    g = hl.Func("g")
    g[()] = 0
    g[()] = g[()] * 7 + r.x + 3 * r.y  # order-dependent: a Horner evaluation
    want = 0
    for ry in range(4):
        for rx in range(3):
            want = want * 7 + rx + 3 * ry
    assert one(g, []) == np.int32(np.int64(want).astype(np.int32))


def test_rdom_with_param_bounds_and_image_extent():
    n = hl.Param(hl.Int(32), "n", 5)
    vals = np.arange(1, 9, dtype=np.int32)
    b = hl.Buffer(vals)
    r = hl.RDom([(0, n)])
    f = hl.Func("f")
    f[()] = 0
    f[()] += b[r]
    assert one(f, []) == 15
    r2 = hl.RDom(b)
    g = hl.Func("g")
    g[()] = 0
    g[()] += b[r2]
    assert one(g, []) == 36


def test_reduction_over_2d_domain_with_pure_var_per_row():
    img = rng(8).integers(0, 100, (5, 7), dtype=np.int32)
    b = hl.Buffer(img)
    r = hl.RDom([(0, 7)])
    rowmax = hl.Func("rowmax")
    rowmax[y] = hl.maximum(b[r, y])
    rowmin = hl.Func("rowmin")
    rowmin[y] = hl.minimum(b[r, y])
    prod = hl.Func("prod")
    prod[y] = hl.product(hl.i64(b[r, y] % 5 + 1))
    np.testing.assert_array_equal(one(rowmax, [5]), img.max(axis=1))
    np.testing.assert_array_equal(one(rowmin, [5]), img.min(axis=1))
    np.testing.assert_array_equal(one(prod, [5]), np.prod(img.astype(np.int64) % 5 + 1, axis=1))


def test_inline_sum_and_argmax():
    img = rng(9).integers(0, 50, (6, 8), dtype=np.int32)
    img[2, 3] = img[4, 1] = 99  # two maxima: argmax picks the first in RDom order (x innermost)
    b = hl.Buffer(img)
    r = hl.RDom([(0, 8), (0, 6)])
    total = hl.Func("total")
    total[()] = hl.sum(b[r.x, r.y])
    am = hl.Func("am")
    best = hl.argmax(b[r.x, r.y])
    am[()] = (best[0], best[1], best[2])
    assert one(total, []) == img.sum()
    bx, by, bv = ref_realize(am, [])
    assert (int(bx), int(by), int(bv)) == (3, 2, 99)
    amin = hl.Func("amin")
    lo = hl.argmin(b[r.x, r.y] + 0)
    amin[()] = (lo[0], lo[1])
    mx, my = ref_realize(amin, [])
    iy, ix = np.unravel_index(np.argmin(img), img.shape)
    assert (int(mx), int(my)) == (ix, iy)


def test_inline_sum_with_blur_box_float():
    img = rng(10).random((16, 16), dtype=np.float32)
    b = hl.Buffer(img)
    cl = hl.BoundaryConditions.repeat_edge(b)
    r = hl.RDom([(-1, 3), (-1, 3)])
    f = hl.Func("f")
    f[x, y] = hl.sum(cl[x + r.x, y + r.y]) / 9.0
    p = np.pad(img, 1, mode="edge")
    acc = np.zeros((16, 16), np.float32)
    for ry in range(3):
        for rx in range(3):
            acc = acc + p[ry : ry + 16, rx : rx + 16]
    np.testing.assert_array_equal(one(f, [16, 16]), acc / np.float32(9))


# ---------------------------------------------------------------- tuples
def test_tuple_func_and_tuple_update():
    f = hl.Func("f")
    f[x, y] = (x + y, hl.f32(x) * 0.5, hl.u8(y))
    r = hl.RDom([(0, 3)])
    f[x, y] = (f[x, y][0] + r, f[x, y][1] * 2.0, f[x, y][2] + hl.u8(f[x, y][0]))
    a, b, cc = ref_realize(f, [4, 2])
    ys, xs = np.mgrid[0:2, 0:4]
    v0, v1, v2 = xs + ys, xs * np.float32(0.5), ys.astype(np.uint8)
    for rr in range(3):
        v0, v1, v2 = v0 + rr, v1 * np.float32(2), (v2 + (v0.astype(np.uint8))).astype(np.uint8)
    np.testing.assert_array_equal(a, v0)
    np.testing.assert_array_equal(b, v1.astype(np.float32))
    np.testing.assert_array_equal(cc, v2)
    assert (a.dtype, b.dtype, cc.dtype) == (np.int32, np.float32, np.uint8)
    g = hl.Func("g")
    g[x] = f[x, 1][1] + hl.f32(f[x, 0][0])
    np.testing.assert_array_equal(one(g, [4]), v1[1] + v0[0].astype(np.float32))


def test_several_outputs():
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = x * 2
    g[x] = (f[x] + 1, hl.f64(x))
    a, b, cc = ref_realize([f, g], [3])
    np.testing.assert_array_equal(a, [0, 2, 4])
    np.testing.assert_array_equal(b, [1, 3, 5])
    np.testing.assert_array_equal(cc, [0.0, 1.0, 2.0])


# ---------------------------------------------------------------- integer semantics
def _euclid(a, b, bits, signed):
    if b == 0:
        return 0, 0
    q = a // b
    if a - q * b < 0:  # Python floors; Euclid keeps the remainder non-negative
        q += 1
    r = a - q * b
    m = 1 << bits
    q %= m
    if signed and q >= m // 2:
        q -= m
    return q, r


@pytest.mark.parametrize("t", [hl.Int(8), hl.UInt(8), hl.Int(16), hl.Int(32)])
def test_euclidean_div_mod_tables(t):
    dt = t.to_numpy()
    lo, hi = (t.min_value(), t.max_value()) if t.bits == 8 else (-300, 300)
    vals = np.arange(lo, hi + 1)
    if t.bits == 32:
        vals = np.concatenate([vals, [t.min_value(), t.min_value() + 1, t.max_value()]])
    if t.bits > 8:
        divs = np.concatenate([np.arange(-9, 10), [t.min_value(), t.max_value(), -128, 127]])
    else:
        divs = vals
    a, b = np.meshgrid(vals.astype(dt), divs.astype(dt), indexing="ij")
    ea = hl.Func("ea")
    A, B = hl.Buffer(a), hl.Buffer(b)
    ea[x, y] = (A[x, y] / B[x, y], A[x, y] % B[x, y])
    q, r = ref_realize(ea, [a.shape[1], a.shape[0]])
    assert q.dtype == dt and r.dtype == dt
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            ai, bi = int(a[i, j]), int(b[i, j])
            if t.bits == 32 and ai == t.min_value() and bi == -1:
                continue  # overflows: undefined in Halide
            wq, wr = _euclid(ai, bi, t.bits, t.is_int())
            assert (int(q[i, j]), int(r[i, j])) == (wq, wr), (ai, bi)


def test_div_mod_halide_examples():
    assert evaluate_expr(hl.Expr(-7) / -2) == 4
    assert evaluate_expr(hl.Expr(-7) % -2) == 1
    assert evaluate_expr(hl.Expr(7) / -2) == -3
    assert evaluate_expr(hl.Expr(7) % -2) == 1
    assert evaluate_expr(hl.Expr(-16) / 32) == -1
    assert evaluate_expr(hl.Expr(5) / 0) == 0
    assert evaluate_expr(hl.Expr(5) % 0) == 0
    assert evaluate_expr(hl.Expr(-7.5) % 2.0) == np.float32(0.5)
    assert evaluate_expr(hl.Expr(7.0) // 2.0) == np.float32(3.0)
    assert evaluate_expr(hl.Expr(-7.0) / 2.0) == np.float32(-3.5)


def test_promotion_and_wrap():
    u = hl.cast(hl.UInt(8), 250)
    e = u + 10  # stays uint8
    assert evaluate_expr(e).dtype == np.uint8 and evaluate_expr(e) == 4
    s = hl.cast(hl.Int(16), -32768)
    assert evaluate_expr(s - 1) == 32767
    m = hl.cast(hl.UInt(32), 5) + hl.cast(hl.Int(32), -7)  # mixed signedness: int32
    v = evaluate_expr(m)
    assert v.dtype == np.int32 and v == -2


def test_casts_and_saturating_casts():
    vals = np.array([-300.7, -128.5, -1.5, -0.5, 0.0, 0.5, 1.99, 127.5, 255.5, 300.2, 70000.0], np.float32)
    b = hl.Buffer(vals)
    sat = {
        hl.u8_sat: (0, 255), hl.i8_sat: (-128, 127), hl.u16_sat: (0, 65535), hl.i16_sat: (-32768, 32767),
    }
    for fn, (lo, hi) in sat.items():
        f = hl.Func("f")
        f[x] = fn(b[x])
        out = one(f, [len(vals)])
        np.testing.assert_array_equal(out, np.trunc(np.clip(vals, lo, hi)).astype(out.dtype))
    # int -> int casts wrap; signed to wider unsigned sign-extends; float -> int truncates
    assert evaluate_expr(hl.u16(hl.i8(-1))) == 65535
    assert evaluate_expr(hl.u8(hl.Expr(300))) == 44
    assert evaluate_expr(hl.i8(hl.u8(200))) == -56
    assert evaluate_expr(hl.u64(hl.i32(-2))) == 2**64 - 2
    assert evaluate_expr(hl.i32(hl.Expr(-2.7))) == -2
    assert evaluate_expr(hl.i32(hl.Expr(2.7))) == 2
    assert not evaluate_expr(hl.cast(hl.Bool(), hl.Expr(0.25)))  # (the lowest bit of 0, as Halide folds it)
    assert evaluate_expr(hl.cast(hl.Bool(), hl.Expr(3))) and not evaluate_expr(hl.cast(hl.Bool(), hl.Expr(2)))
    assert evaluate_expr(hl.f32(hl.i64(2**40 + 1))) == np.float32(2**40)
    # saturating between integer types
    ints = hl.Buffer(np.array([-40000, -200, -1, 0, 200, 40000, 70000], np.int32))
    f = hl.Func("f")
    f[x] = (hl.u8_sat(ints[x]), hl.i8_sat(ints[x]), hl.u16_sat(ints[x]), hl.i16_sat(ints[x]))
    outs = ref_realize(f, [7])
    raw = np.array([-40000, -200, -1, 0, 200, 40000, 70000])
    for o, (lo, hi) in zip(outs, [(0, 255), (-128, 127), (0, 65535), (-32768, 32767)]):
        np.testing.assert_array_equal(o, np.clip(raw, lo, hi))
    big = hl.Buffer(np.array([0, 2**63 - 1, 2**63, 2**64 - 1], np.uint64))
    g = hl.Func("g")
    g[x] = (hl.i64_sat(big[x]), hl.u8_sat(big[x]), hl.i32_sat(big[x]))
    a, bb, cc = ref_realize(g, [4])
    np.testing.assert_array_equal(a, [0, 2**63 - 1, 2**63 - 1, 2**63 - 1])
    np.testing.assert_array_equal(bb, [0, 255, 255, 255])
    np.testing.assert_array_equal(cc, [0, 2**31 - 1, 2**31 - 1, 2**31 - 1])


def test_bit_operations():
    v = hl.Buffer(np.array([0, 1, -1, -128, 96, 127], np.int8))
    f = hl.Func("f")
    f[x] = (hl.popcount(v[x]), hl.count_leading_zeros(v[x]), hl.count_trailing_zeros(v[x]),
            ~v[x], v[x] ^ 0x55, v[x] & 0x0F, v[x] | 3, hl.abs(v[x]))
    pc, clz, ctz, inv, xo, an, orr, ab = ref_realize(f, [6])
    np.testing.assert_array_equal(pc, [0, 1, 8, 1, 2, 7])
    np.testing.assert_array_equal(clz, [8, 7, 0, 0, 1, 1])
    np.testing.assert_array_equal(ctz, [8, 0, 0, 7, 5, 0])
    np.testing.assert_array_equal(inv, [-1, -2, 0, 127, -97, -128])
    np.testing.assert_array_equal(xo, np.array([0, 1, -1, -128, 96, 127], np.int8) ^ np.int8(0x55))
    np.testing.assert_array_equal(an, [0, 1, 15, 0, 0, 15])
    np.testing.assert_array_equal(orr, [3, 3, -1, -125, 99, 127])
    assert ab.dtype == np.uint8
    np.testing.assert_array_equal(ab, [0, 1, 1, 128, 96, 127])
    # shifts: a negative signed amount shifts the other way (checked against Halide 21)
    a = hl.Buffer(np.array([1, -8, 100, 7, -128], np.int8))
    s = hl.Buffer(np.array([-1, -1, 3, 7, 1], np.int8))
    g = hl.Func("g")
    g[x] = (a[x] << s[x], a[x] >> s[x])
    shl, shr = ref_realize(g, [5])
    np.testing.assert_array_equal(shl, [0, -4, 32, -128, 0])
    np.testing.assert_array_equal(shr, [2, -16, 12, 0, -64])
    u = hl.Buffer(np.array([0x80000000, 1, 0], np.uint32))
    h = hl.Func("h")
    h[x] = (u[x] >> 31, u[x] << 31, hl.count_leading_zeros(u[x]), hl.absd(u[x], hl.u32(1)))
    r1, r2, r3, r4 = ref_realize(h, [3])
    np.testing.assert_array_equal(r1, [1, 0, 0])
    np.testing.assert_array_equal(r2, [0, 0x80000000, 0])
    np.testing.assert_array_equal(r3, [0, 31, 32])
    np.testing.assert_array_equal(r4, [0x7FFFFFFF, 0, 1])


def test_absd_and_abs_of_extremes():
    a = hl.Buffer(np.array([127, -128, 5, -100], np.int8))
    b = hl.Buffer(np.array([-128, 127, 5, 100], np.int8))
    f = hl.Func("f")
    f[x] = (hl.absd(a[x], b[x]), hl.abs(a[x]))
    d, ab = ref_realize(f, [4])
    assert d.dtype == np.uint8
    np.testing.assert_array_equal(d, [255, 255, 0, 200])
    np.testing.assert_array_equal(ab, [127, 128, 5, 100])


def test_reinterpret():
    b = hl.Buffer(np.array([1.0, -2.0], np.float32))
    f = hl.Func("f")
    f[x] = hl.reinterpret(hl.UInt(32), b[x])
    np.testing.assert_array_equal(one(f, [2]), np.array([1.0, -2.0], np.float32).view(np.uint32))


# ---------------------------------------------------------------- floats
def test_float_math_matches_numpy():
    v = np.linspace(-0.9, 0.9, 13, dtype=np.float32)
    b = hl.Buffer(v)
    fns = {
        hl.sin: np.sin, hl.cos: np.cos, hl.tan: np.tan, hl.exp: np.exp, hl.atan: np.arctan,
        hl.asin: np.arcsin, hl.acos: np.arccos, hl.tanh: np.tanh, hl.sinh: np.sinh, hl.cosh: np.cosh,
        hl.asinh: np.arcsinh, hl.atanh: np.arctanh, hl.floor: np.floor, hl.ceil: np.ceil,
        hl.trunc: np.trunc, hl.round: np.rint,
    }
    for hf, nf in fns.items():
        f = hl.Func("f")
        f[x] = hf(b[x])
        out = one(f, [13])
        assert out.dtype == np.float32
        np.testing.assert_allclose(out, nf(v), rtol=1e-6, atol=1e-7, err_msg=hf.__name__)
    f = hl.Func("f")
    f[x] = (hl.sqrt(hl.abs(b[x])), hl.log(hl.abs(b[x]) + 1), hl.erf(b[x]), hl.pow(hl.abs(b[x]), 1.5),
            hl.atan2(b[x], 0.5), hl.hypot(b[x], 2.0), hl.acosh(hl.abs(b[x]) + 1))
    outs = ref_realize(f, [13])
    want = [np.sqrt(np.abs(v)), np.log(np.abs(v) + 1), [math.erf(t) for t in v], np.abs(v) ** 1.5,
            np.arctan2(v, 0.5), np.hypot(v, 2.0), np.arccosh(np.abs(v) + 1)]
    for o, w in zip(outs, want):
        np.testing.assert_allclose(o, np.asarray(w, np.float32), rtol=2e-6)
    # integer arguments compute in Float(32); round is to even
    assert evaluate_expr(hl.sqrt(hl.Expr(16))).dtype == np.float32
    assert evaluate_expr(hl.round(hl.Expr(2.5))) == 2.0
    d = hl.Buffer(np.array([0.5, 1.5, -2.5, 1e300], np.float64))
    g = hl.Func("g")
    g[x] = hl.round(d[x])
    out = one(g, [4])
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, [0.0, 2.0, -2.0, 1e300])


def test_float_tests_and_nan():
    b = hl.Buffer(np.array([np.nan, np.inf, -1.0, 0.0], np.float32))
    f = hl.Func("f")
    f[x] = (hl.is_nan(b[x]), hl.is_inf(b[x]), hl.is_finite(b[x]))
    n, i, fi = ref_realize(f, [4])
    np.testing.assert_array_equal(n, [True, False, False, False])
    np.testing.assert_array_equal(i, [False, True, False, False])
    np.testing.assert_array_equal(fi, [False, False, True, True])


def test_select_mux_clamp_lerp_print():
    f = hl.Func("f")
    f[x] = hl.select(x < 2, x * 10, x == 2, -1, x + 100)
    np.testing.assert_array_equal(one(f, [5]), [0, 10, -1, 103, 104])
    g = hl.Func("g")
    g[x] = hl.mux(x, [5, 6, 7])  # out of range picks the last value
    np.testing.assert_array_equal(one(g, [5], mins=[-1]), [7, 5, 6, 7, 7])
    h = hl.Func("h")
    h[x] = hl.clamp(x * 3, 2, 7)
    np.testing.assert_array_equal(one(h, [4]), [2, 3, 6, 7])
    li = hl.Func("li")
    li[x] = hl.lerp(hl.f32(x), 10.0, 0.25)
    np.testing.assert_allclose(one(li, [3]), [2.5, 3.25, 4.0])
    p = hl.Func("p")
    p[x] = hl.print(x * 2, "is twice", x)
    np.testing.assert_array_equal(one(p, [3]), [0, 2, 4])


# ---------------------------------------------------------------- growth, multi-stage, errors
def test_consumers_asking_different_regions():
    img = np.arange(40, dtype=np.int32)
    b = hl.Buffer(img)
    p = hl.Func("p")
    p[x] = b[x] * 2
    q1, q2 = hl.Func("q1"), hl.Func("q2")
    q1[x] = p[x + 30]
    q2[x] = p[x] + p[x + 5] + q1[x]
    np.testing.assert_array_equal(one(q2, [10]), 2 * (img[:10] + img[5:15] + img[30:40]))


def test_each_stage_covers_what_later_stages_read():
    # stage 2 reads f[3..6] after stage 1, although only f[0..3] is asked for (checked with Halide 21)
    f = hl.Func("f")
    r = hl.RDom([(0, 4)])
    f[x] = x
    f[x] = f[x] * 2
    f[r] = f[r + 3] + 1
    g = hl.Func("g")
    g[x] = f[x]
    np.testing.assert_array_equal(one(g, [4]), [7, 9, 11, 13])
    np.testing.assert_array_equal(one(f, [4]), [7, 9, 11, 13])


def test_predicates_and_sites_that_read_the_func_see_earlier_iterations():
    # an update's where() and left-hand side read what earlier iterations of the same batch wrote
    f = hl.Func("f")
    f[x] = 1
    r = hl.RDom([(0, 10)])
    r.where(f[r] > 0)
    f[r + 1] = 0  # f(1) = 0 stops the iteration r = 1, and so on: alternate ones and zeros
    np.testing.assert_array_equal(one(f, [11]), [1, 0] * 5 + [1])
    g = hl.Func("g")
    g[x] = x + 1
    r2 = hl.RDom([(0, 4)])
    g[hl.clamp(g[r2], 0, 5)] = 0  # r2 = 1 reads g(1), which r2 = 0 has just set to 0
    np.testing.assert_array_equal(one(g, [6]), [0, 0, 3, 0, 5, 6])


def test_small_requests_from_serial_loops_are_exact():
    # an order-dependent update reads a pure Func (several stages deep) one point per iteration
    img = rng(11).integers(0, 9, 300, dtype=np.int32)
    b = hl.Buffer(img)
    g1, g2 = hl.Func("g1"), hl.Func("g2")
    g1[x] = b[hl.clamp(x, 0, 299)] + 1
    g2[x] = g1[x - 1] * g1[x + 1]
    r = hl.RDom([(0, 298)])
    acc = hl.Func("acc")
    acc[()] = hl.u32(0)
    acc[()] = acc[()] * 3 + hl.u32(g2[r + 1])  # uint32 wraps (int32 overflow is undefined)
    want = 0
    for i in range(298):
        want = (want * 3 + (int(img[i]) + 1) * (int(img[i + 2]) + 1)) & 0xFFFFFFFF
    assert one(acc, []) == want


def test_errors():
    f = hl.Func("undefined")
    g = hl.Func("g")
    with pytest.raises(hl.HalideError):
        g[x] = f[x]
    p = hl.Param(hl.Int(32), "unset")
    h = hl.Func("h")
    h[x] = x + p
    with pytest.raises(hl.HalideError, match="unset"):
        ref_realize(h, [3])
    k = hl.Func("k")
    k[x, y] = x
    with pytest.raises(hl.HalideError, match="dimensions"):
        ref_realize(k, [3])
    ip = hl.ImageParam(hl.UInt(8), 1, "unbound")
    m = hl.Func("m")
    m[x] = ip[x]
    with pytest.raises(hl.HalideError, match="unbound"):
        ref_realize(m, [3])
    with pytest.raises(hl.HalideError, match="free variable"):
        evaluate_expr(hl.Var("zz") + 1)


def test_evaluate_expr_broadcasts_env():
    a, b = hl.Var("a"), hl.Var("b")
    out = evaluate_expr(a * 10 + b, {"a": np.arange(3).reshape(3, 1), "b": np.arange(4)})
    assert out.dtype == np.int32 and out.shape == (3, 4)
    np.testing.assert_array_equal(out, np.arange(3)[:, None] * 10 + np.arange(4))


# ---------------------------------------------------------------- Halide 21 as a second oracle
def _pipelines(h):
    """The same algorithms built with either pyhalide or halide (module h)."""
    X, Y = h.Var("x"), h.Var("y")
    g = np.random.default_rng(12)
    img = g.integers(0, 256, (20, 24), dtype=np.uint8)
    fimg = g.random((20, 24), dtype=np.float32) * 4 - 2
    B = h.Buffer(img)
    F = h.Buffer(fimg)
    out = {"_keep": (img, fimg)}  # Halide's Buffer does not keep the numpy array alive

    cl = h.BoundaryConditions.repeat_edge(B)
    bx = h.Func("bx")
    bx[X, Y] = (h.u16(cl[X - 1, Y]) + cl[X, Y] * 2 + cl[X + 1, Y] - cl[X, Y + 2]) / 3
    out["blur"] = (bx, [24, 20])

    m = h.Func("m")
    m[X, Y] = h.select(F[X, Y] > 0, h.sqrt(F[X, Y]) % 0.75, h.exp(F[X, Y]) // h.f32(-0.3)) + h.i8(F[X, Y] * 40) / 3
    out["mixed"] = (m, [24, 20])

    r = h.RDom([(0, 24), (0, 20)])
    r.where((r.x + r.y) % 3 != 0)
    hist = h.Func("hist")
    hist[X] = h.u16(0)
    hist[h.i32(B[r.x, r.y]) / 16] += h.u16(1)
    out["hist"] = (hist, [16])

    s = h.Func("s")
    rs = h.RDom([(1, 19)])
    s[X, Y] = h.i16(B[X, Y]) - 128
    s[X, rs] = s[X, rs - 1] * 3 - s[X, rs] / 7
    out["scan"] = (s, [24, 20])

    ii = h.Func("ii")
    ii[X, Y] = (h.i32(B[X, Y]) - 100) * (X - 7) % (Y - 9)
    out["divmod"] = (ii, [24, 20])

    ct = h.Func("ct")
    ct[X, Y] = h.i16_sat(F[X, Y] * 20000.0) + h.i16(h.u8_sat(F[X, Y] * 100.0))
    out["sat"] = (ct, [24, 20])

    rx = h.RDom([(0, 24)])
    am = h.Func("am")
    best = h.argmax(B[rx.x, Y] / 8)  # many ties: the first in RDom order wins
    am[Y] = h.Tuple([best[0], best[1]])
    out["argmax"] = (am, [20])

    sh = h.Func("sh")
    v = h.i8(B[X, Y]) - 100
    amount = h.i8(X % 11) - 5  # negative amounts shift the other way
    sh[X, Y] = h.Tuple([v << amount, v >> amount, h.popcount(v), h.count_leading_zeros(v),
                        h.count_trailing_zeros(h.u16(B[X, Y]) * 8), h.absd(v, h.i8(Y))])
    out["bits"] = (sh, [24, 20])

    tu = h.Func("tu")
    rt = h.RDom([(0, 5)])
    tu[X, Y] = h.Tuple([X + Y, h.u8(Y)])
    tu[X, Y] = h.Tuple([tu[X, Y][0] * 2 + rt.x, tu[X, Y][1] + h.u8(tu[X, Y][0])])
    out["tuple_update"] = (tu, [6, 5])
    return out


def test_against_halide():
    halide = pytest.importorskip("halide")
    mine = _pipelines(hl)
    theirs = _pipelines(halide)
    for name, (f, sizes) in mine.items():
        if name == "_keep":
            continue
        gots = ref_realize(f, sizes)
        hf, hs = theirs[name]
        wants = hf.realize(hs)
        if isinstance(wants, halide.Buffer):
            wants = [wants]
        wants = [np.asarray(wants[i]) for i in range(len(wants))]  # a Realization for Tuples
        assert len(gots) == len(wants), name
        for i, (got, want) in enumerate(zip(gots, wants)):
            label = f"{name}[{i}]"
            assert got.dtype == want.dtype, label
            if got.dtype.kind == "f":
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=label)
            else:
                np.testing.assert_array_equal(got, want, err_msg=label)
