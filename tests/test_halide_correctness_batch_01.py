"""Ports of Halide 21's C++ correctness tests (batch 01) to pyhalide.

Each test names the Halide test it comes from; expectations are computed with numpy / plain Python.
"""

import math
import random

import numpy as np
import pytest

import pyhalide as hl


def _wrap32(v):
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _raises(fn):
    """Whether fn() raised (pyhalide reports user errors as exceptions)."""
    try:
        fn()
    except Exception:
        return True
    return False


def test_explicit_inline_reductions():
    """Halide's correctness/explicit_inline_reductions.cpp: nested inline sum/product with RDoms."""
    f = hl.Func("f")
    x, y = hl.Var("x"), hl.Var("y")
    r1, r2, r3 = (hl.RDom([(0, 10)], n) for n in ("r1", "r2", "r3"))
    f[x, y] = hl.product(hl.sum(r1, r1.x + r3.x) + hl.sum(r2, r2.x * 2 + r3.x))
    f[r1.x, y] += hl.product(r3, hl.sum(r2, r1.x + r2.x + r3.x))
    out = np.asarray(f.realize([10, 10]))
    init = 1
    for c in range(10):
        init = _wrap32(init * (135 + 20 * c))
    for xx in range(10):
        upd = 1
        for c in range(10):
            upd = _wrap32(upd * sum(xx + k + c for k in range(10)))
        assert (out[:, xx] == _wrap32(init + upd)).all()


def test_two_vector_args():
    """Halide's correctness/two_vector_args.cpp: g(x, x) read in a vectorized loop."""
    f, g = hl.Func("f"), hl.Func("g")
    x, y = hl.Var("x"), hl.Var("y")
    g[x, y] = x + y
    f[x, y] = g[x, x]
    f.vectorize(x, 4)
    assert np.asarray(f.realize([4, 4])).tolist() == [[0, 2, 4, 6]] * 4


def test_shifted_image_indexing():
    """Halide's correctness/shifted_image.cpp: a Buffer with non-zero mins indexes from its mins."""
    buf = hl.Buffer(hl.Int(32), [10, 10, 10, 10])
    buf.set_min([100, 300, 500, 400])
    arr = np.asarray(buf)
    arr.reshape(-1)[:] = np.arange(10000)
    assert buf[100, 300, 500, 400] == 0
    assert buf[101, 300, 500, 401] == 1 + 1000
    x = hl.Var("x")
    f = hl.Func("f")
    f[x] = buf[100 + x, 300, 500, 401]
    assert np.asarray(f.realize([5])).tolist() == [1000 + i for i in range(5)]


def test_vector_extern_sqrt():
    """Halide's correctness/vector_extern.cpp: vectorized sqrt."""
    x = hl.Var("x")
    f = hl.Func("f")
    f[x] = hl.sqrt(hl.cast(hl.Float(32), x))
    f.vectorize(x, 4)
    out = np.asarray(f.realize([32]))
    assert np.abs(out - np.sqrt(np.arange(32, dtype=np.float32))).max() <= 0.001


def _calc(a):
    prod = hl.cast(hl.Int(64), a) * hl.cast(hl.Int(64), a)
    scaled = (prod + (1 << 30)) >> 31
    return hl.cast(hl.Int(32), hl.clamp(scaled, hl.Int(32).min(), hl.Int(32).max()))


def _calc_ref(a):
    s = (a * a + (1 << 30)) >> 31
    return max(min(s, 2**31 - 1), -(2**31))


def test_bound_small_allocations_overflowing_simplification():
    """Halide's correctness/bound_small_allocations.cpp: int64 products clamped back to int32."""
    x, y = hl.Var("x"), hl.Var("y")
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    f[x, y] = _calc(hl.max(x + (1 << 28), -(1 << 29) + (1 << 28)))
    g[x, y] = _calc(f[x, y]) + f[x, y] / 4 + (1 << 30)
    h[x, y] = _calc(g[x, y]) + g[x, y] / 4 + (1 << 30)
    h.vectorize(x, 8).compute_root()
    out = np.asarray(h.realize([16, 4]))
    for xx in range(16):
        fv = _calc_ref(max(xx + (1 << 28), -(1 << 29) + (1 << 28)))
        gv = _wrap32(_calc_ref(fv) + fv // 4 + (1 << 30))
        hv = _wrap32(_calc_ref(gv) + gv // 4 + (1 << 30))
        assert (out[:, xx] == hv).all()


def test_unroll_dynamic_loop():
    """Halide's correctness/unroll_dynamic_loop.cpp: unrolled GuardWithIf split, stack producer."""
    x, xo, xi = hl.Var("x"), hl.Var("xo"), hl.Var("xi")
    f, g = hl.Func("f"), hl.Func("g")
    inp = hl.Buffer(np.arange(100, dtype=np.float32) * 2.0)
    f[x] = inp[x] * 3
    g[x] = f[x] * 2
    g.split(x, xo, xi, 8, hl.TailStrategy.GuardWithIf).unroll(xi)
    f.compute_at(g, xo).unroll(x).store_in(hl.MemoryType.Stack)
    assert (np.asarray(g.realize([23])) == np.arange(23) * 12.0).all()


def test_realize_condition_depends_on_tuple():
    """Halide's correctness/realize_condition_depends_on_tuple.cpp: skippable tuple realization."""
    p = hl.Param(hl.Int(32), "p")
    f, g, h, out = hl.Func("f"), hl.Func("g"), hl.Func("h"), hl.Func("out")
    f[()] = (p, p)
    g[()] = (hl.Expr(4), hl.Expr(4))
    h[()] = g[()][1]
    out[()] = hl.select(f[()][1] == 3, h[()], 17)
    f.compute_root()
    g.compute_root()
    h.compute_root()
    for pv, exp in [(3, 4), (5, 17)]:
        p.set(pv)
        assert out.realize([])[()] == exp


def test_bounds_inference_chunk():
    """Halide's correctness/bounds_inference_chunk.cpp: stencil producer computed per row."""
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    x, y = hl.Var("x"), hl.Var("y")
    h[x, y] = x + y
    g[x, y] = (h[x - 1, y - 1] + h[x + 1, y + 1]) / 2
    f[x, y] = (g[x - 1, y - 1] + g[x + 1, y + 1]) / 2
    h.compute_root()
    g.compute_at(f, y)
    yy, xx = np.mgrid[0:32, 0:32]
    assert (np.asarray(f.realize([32, 32])) == xx + yy).all()


def test_fused_where_inner_extent_is_zero():
    """Halide's correctness/fused_where_inner_extent_is_zero.cpp: fused producer, empty RDoms."""
    f, g = hl.Func("f"), hl.Func("g")
    x, y, fused = hl.Var("x"), hl.Var("y"), hl.Var("fused")
    f[x, y] = x + y
    inner, outer = hl.Param(hl.Int(32), "inner"), hl.Param(hl.Int(32), "outer")
    r = hl.RDom([(0, inner), (0, outer)])
    g[x, y] = 0
    g[r.x, r.y] = f[r.x, r.y]
    f.compute_root().fuse(x, y, fused)
    for i in range(3):
        for o in range(3):
            inner.set(i)
            outer.set(o)
            exp = np.zeros((10, 10), dtype=np.int32)
            for yy in range(o):
                for xx in range(i):
                    exp[yy, xx] = xx + yy
            assert (np.asarray(g.realize([10, 10])) == exp).all()


def test_chunk_sharing():
    """Halide's correctness/chunk_sharing.cpp: three producers computed at the same row."""
    x, y, i, j = hl.Var("x"), hl.Var("y"), hl.Var("i"), hl.Var("j")
    a, b, c, d = hl.Func("a"), hl.Func("b"), hl.Func("c"), hl.Func("d")
    a[i, j] = i + j
    b[i, j] = a[i, j] + 1
    c[i, j] = a[i, j] * 2
    d[x, y] = b[x, y] + c[x, y]
    c.compute_at(d, y)
    b.compute_at(d, y)
    a.compute_at(d, y)
    yy, xx = np.mgrid[0:32, 0:32]
    assert (np.asarray(d.realize([32, 32])) == 3 * (xx + yy) + 1).all()


def test_left_shift_negative():
    """Halide's correctness/left_shift_negative.cpp: a << b == a * (1 << b) for negative int16 a."""
    x = hl.Var("x")
    f, g, h1, h2, powers = (hl.Func(n) for n in ("f", "g", "h1", "h2", "powers"))
    f[x] = hl.cast(hl.Int(16), -x)
    g[x] = hl.cast(hl.UInt(16), x % 8)
    f.compute_root()
    g.compute_root()
    h1[x] = f[x] << g[x]
    powers[x] = hl.cast(hl.Int(16), 1) << g[x]
    powers.compute_root()
    h2[x] = f[x] * powers[x]
    h1.vectorize(x, 16)
    h2.vectorize(x, 16)
    im1, im2 = np.asarray(h1.realize([1024])), np.asarray(h2.realize([1024]))
    xs = np.arange(1024)
    exp = ((-xs * (1 << (xs % 8)) + 32768) % 65536 - 32768).astype(np.int16)
    assert (im1 == exp).all() and (im2 == exp).all()


def _check_mux(buf):
    out = np.asarray(buf)
    for xx in range(out.shape[1]):
        assert out[:, xx].tolist() == [xx, 456, 789, 789]


def test_mux_of_expr_list():
    """Halide's correctness/mux.cpp: mux(c, {x, 456, 789}) clamps c to the last value."""
    x, c = hl.Var("x"), hl.Var("c")
    f = hl.Func("f")
    f[x, c] = hl.mux(c, [x, 456, 789])
    _check_mux(f.realize([20, 4]))


def test_mux_of_tuple():
    """Halide's correctness/mux.cpp: mux(c, Tuple(f(x))) selects one element of f's Tuple."""
    x, c = hl.Var("x"), hl.Var("c")
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = (x, 456, 789)
    g[x, c] = hl.mux(c, hl.Tuple(f[x]))
    assert g.outputs() == 1
    _check_mux(g.realize([20, 4]))


def test_stack_allocations_values():
    """Halide's correctness/stack_allocations.cpp: producers computed inside vectorized tiles."""
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    x, y, xi, yi = hl.Var("x"), hl.Var("y"), hl.Var("xi"), hl.Var("yi")
    f[x, y] = x + y
    g[x, y] = f[x - 1, y + 1] * f[x + 1, y - 1]
    h[x, y] = g[x + 1, y + 1] + g[x - 1, y - 1]
    f.compute_at(h, x)
    g.compute_at(h, x)
    h.tile(x, y, xi, yi, 4, 3).vectorize(xi)
    Y, X = np.mgrid[0:10, 0:10]

    def gr(a, b):
        return (a - 1 + b + 1) * (a + 1 + b - 1)

    assert (np.asarray(h.realize([10, 10])) == gr(X + 1, Y + 1) + gr(X - 1, Y - 1)).all()


def test_parallel_nested():
    """Halide's correctness/parallel_nested_1.cpp: parallel loops nested in a parallel loop."""
    x, y, z = hl.Var("x"), hl.Var("y"), hl.Var("z")
    f, g = hl.Func("f"), hl.Func("g")
    k = hl.Param(hl.Int(32), "k")
    k.set(3)
    f[x, y, z] = x * y + z * k + 1
    g[x, y, z] = f[x, y, z] + 2
    f.parallel(x)
    f.parallel(y)
    g.parallel(z)
    f.compute_at(g, z)
    n = 16
    Z, Y, X = np.mgrid[0:n, 0:n, 0:n]
    assert (np.asarray(g.realize([n, n, n])) == X * Y + Z * 3 + 3).all()


def test_vectorized_assert():
    """Halide's correctness/vectorized_assert.cpp: bound_storage check fails inside a vector loop."""
    f, g = hl.Func("f"), hl.Func("g")
    x = hl.Var("x")
    p = hl.Param(hl.Int(32), "p")
    f[x] = x
    f[x] += 1
    g[x] = f[x] + f[2 * x + p]
    g.vectorize(x, 8)
    f.bound_storage(x, 32)
    g.compile_jit()
    p.set(256)
    assert _raises(lambda: g.realize([128]))
    p.set(0)
    xs = np.arange(8)
    assert (np.asarray(g.realize([8])) == (xs + 1) + (2 * xs + 1)).all()


def test_memoize_cloned_values():
    """Halide's correctness/memoize_cloned.cpp: a memoized Func and its memoized clone."""
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    x, y = hl.Var("x"), hl.Var("y")
    f[x, y] = x + 0 * y
    g[x, y] = f[x, y] * 2
    h[x, y] = f[x, y] + g[x, y]
    h.compute_root()
    g.compute_root()
    f.clone_in(h).compute_at(h, y).memoize()
    f.compute_at(g, y).memoize()
    h.bound(x, 0, 64).bound(y, 0, 8)
    for _ in range(2):
        assert (np.asarray(h.realize([64, 8])) == 3 * np.arange(64)[None, :]).all()


def test_reduction_predicate_not_racing():
    """Halide's correctness/reduction_predicate_racing.cpp: parallel RVars with safe predicates."""
    x = hl.Var("x")
    f = hl.Func("f1")
    r = hl.RDom([(1, 10)])
    f[x] = 1
    r.where(f[0] == 1)
    f[r.x] = 2
    f.update().parallel(r.x)
    assert np.asarray(f.realize([12])).tolist() == [1] + [2] * 10 + [1]

    f = hl.Func("f2")
    r = hl.RDom([(0, 10)])
    f[x] = 1
    r.where(f[r.x] == 1)
    f[r.x] = 2
    f.update().parallel(r.x)
    assert np.asarray(f.realize([12])).tolist() == [2] * 10 + [1] * 2


def test_reduction_predicate_odd_writes_even_reads():
    """Halide's correctness/reduction_predicate_racing.cpp: writes odd entries, predicate reads even."""
    x = hl.Var("x")
    f = hl.Func("f3")
    r = hl.RDom([(0, 10)])
    f[x] = 1
    r.where(f[2 * r.x] == 1)
    f[2 * r.x + 1] = 2
    f.update().parallel(r.x)
    assert np.asarray(f.realize([22])).tolist() == [1, 2] * 10 + [1, 1]


def test_compute_inside_guard():
    """Halide's correctness/compute_inside_guard.cpp: split by a factor depending on the output."""
    inp = hl.ImageParam(hl.UInt(8), 1, "input")
    x, xo, xi = hl.Var("x"), hl.Var("xo"), hl.Var("xi")
    inter, output = hl.Func("intermediate"), hl.Func("output")
    inter[x] = inp[x]
    output[x] = inter[x]
    output.compute_root().split(x, xo, xi, output.output_buffer().width() / 8,
                                hl.TailStrategy.GuardWithIf)
    inter.compute_at(output, xi).unroll(x).store_in(hl.MemoryType.Register)
    data = (np.arange(123) * 7 % 256).astype(np.uint8)
    inp.set(hl.Buffer(data))
    obuf = hl.Buffer(hl.UInt(8), [123])
    output.realize(obuf)
    assert (np.asarray(obuf) == data).all()


def test_concat_select_of_two_producers():
    """Halide's correctness/concat.cpp: select between two compute_root producers."""
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    x = hl.Var("x")
    f[x] = x + 1
    g[x] = x + 2
    h[x] = hl.select(x < 100, f[x], g[x])
    f.compute_root()
    g.compute_root()
    h.compute_root()
    xs = np.arange(200)
    assert (np.asarray(h.realize([200])) == np.where(xs < 100, xs + 1, xs + 2)).all()


def test_stream_compaction():
    """Halide's correctness/stream_compaction.cpp: scatter through a cumulative sum with undef."""
    f, cum_sum, ones = hl.Func("f"), hl.Func("cum_sum"), hl.Func("ones")
    x = hl.Var("x")
    f[x] = hl.select((x % 7 == 0) | (x % 5 == 0), 1, 0)
    f.compute_root()
    cum_sum[x] = 0
    r = hl.RDom([(0, 1000)])
    cum_sum[r.x + 1] = f[r.x] + cum_sum[r.x]
    cum_sum.compute_root()
    ones[x] = -1
    ones[hl.clamp(cum_sum[r.x], 0, 1000)] = hl.select(f[r.x] == 1, r.x, hl.undef(hl.Int(32)))
    ones.update().allow_race_conditions().parallel(r.x, 50)
    vals = [v for v in range(1000) if v % 5 == 0 or v % 7 == 0]
    exp = np.full(1001, -1)
    exp[: len(vals)] = vals
    assert (np.asarray(ones.realize([1001])) == exp).all()


def test_vector_tile():
    """Halide's correctness/vector_tile.cpp: tile() taking lists of vars, on Funcs and Stages."""
    i, j, io, jo = hl.Var("i"), hl.Var("j"), hl.Var("io"), hl.Var("jo")
    J, I = np.mgrid[0:64, 0:64]
    f = hl.Func("f1")
    f[i, j] = i * j
    f.tile([i, j], [io, jo], [i, j], [8, 8], hl.TailStrategy.RoundUp)
    assert (np.asarray(f.realize([64, 64])) == I * J).all()
    f = hl.Func("f2")
    f[i, j] = i * j
    f.tile([i, j], [io, jo], [i, j], [8, 8])
    assert (np.asarray(f.realize([64, 64])) == I * J).all()
    f = hl.Func("f3")
    f[i, j] = 0
    f[i, j] += i * j
    f.update(0).tile([i, j], [io, jo], [i, j], [8, 8])
    assert (np.asarray(f.realize([64, 64])) == I * J).all()


def test_many_dimensions():
    """Halide's correctness/many_dimensions.cpp: a 20-dimensional Func sampled at two sites."""
    rng = random.Random(1234)
    vs = [hl.Var(f"v{k}") for k in range(20)]
    f, g = hl.Func("f"), hl.Func("g")
    x, y = hl.Var("x"), hl.Var("y")
    e = hl.Expr(0)
    for v in vs:
        e = e + v
    f[vs] = e
    spec1, spec2 = [], []
    for _ in range(20):
        s1 = [rng.getrandbits(1) for _ in range(3)]
        s2 = [rng.getrandbits(1) for _ in range(3)]
        if rng.getrandbits(3) & 4:
            s1 = s2
        spec1.append(s1)
        spec2.append(s2)

    def site(spec):
        out = []
        for c, ux, uy in spec:
            ex = hl.Expr(c)
            if ux:
                ex = ex + x
            if uy:
                ex = ex + y
            out.append(ex % 2)
        return out

    def site_ref(spec, xx, yy):
        return sum((c + ux * xx + uy * yy) % 2 for c, ux, uy in spec)

    g[x, y] = f[site(spec1)] + f[site(spec2)]
    f.compute_at(g, x)
    out = np.asarray(g.realize([6, 6]))
    for yy in range(6):
        for xx in range(6):
            assert out[yy, xx] == site_ref(spec1, xx, yy) + site_ref(spec2, xx, yy)


def test_bounds_query():
    """Halide's correctness/bounds_query.cpp: infer_input_bounds allocates the input, then fill it."""
    n = 64
    first, second = hl.Func("first"), hl.Func("second")
    x, y = hl.Var("x"), hl.Var("y")
    tmp = hl.ImageParam(hl.Int(32), 2, "tmp")
    first[x, y] = x + y
    second[x, y] = tmp[x - 1, y - 1] + tmp[x + 3, y + 1]
    out = hl.Buffer(hl.Int(32), [n, n])
    second.infer_input_bounds(out)
    b = tmp.get()
    assert (b.dim(0).min(), b.dim(0).extent()) == (-1, n + 4)
    assert (b.dim(1).min(), b.dim(1).extent()) == (-1, n + 2)
    first.realize(b)
    second.realize(out)
    Y, X = np.mgrid[0:n, 0:n]
    assert (np.asarray(out) == (X - 1 + Y - 1) + (X + 3 + Y + 1)).all()


def test_half_native_interleave():
    """Halide's correctness/half_native_interleave.cpp: widening ops vectorized at native width."""
    w = 256
    data = np.random.RandomState(1).randint(0, 256, w).astype(np.uint8)
    inp = hl.Buffer(data)
    x = hl.Var("x")
    i16, prod, sm, diff = (hl.Func(n) for n in ("input_16", "product", "sum", "difference"))
    i16[x] = hl.cast(hl.Int(16), inp[x])
    prod[x] = i16[x] * 2
    sm[x] = i16[x] + 2
    diff[x] = i16[x] - 2
    target = hl.get_jit_target_from_environment()
    vs = target.natural_vector_size(hl.UInt(8))
    d = data.astype(np.int16)
    for fn, exp in ((prod, d * 2), (sm, d + 2), (diff, d - 2)):
        fn.vectorize(x, vs)
        out = np.asarray(fn.realize([w], target))
        assert out.dtype == np.int16 and (out == exp).all()


def test_partition_max_filter_values():
    """Halide's correctness/partition_max_filter.cpp: 3x3 max filter over repeat_edge."""
    w, h = 40, 24
    data = np.random.RandomState(2).randint(0, 256, (h, w)).astype(np.uint8)
    x, y = hl.Var("x"), hl.Var("y")
    clamped = hl.BoundaryConditions.repeat_edge(hl.Buffer(data))
    max_x, max_y = hl.Func("max_x"), hl.Func("max_y")
    max_x[x, y] = hl.max(clamped[x - 1, y], clamped[x, y], clamped[x + 1, y])
    max_y[x, y] = hl.max(max_x[x, y - 1], max_x[x, y], max_x[x, y + 1])
    p = np.pad(data, 1, mode="edge")
    mx = np.maximum(np.maximum(p[:, :-2], p[:, 1:-1]), p[:, 2:])
    exp = np.maximum(np.maximum(mx[:-2], mx[1:-1]), mx[2:])
    assert (np.asarray(max_y.realize([w, h])) == exp).all()


def test_convolution_multiple_kernels():
    """Halide's correctness/convolution_multiple_kernels.cpp: two box kernels of different types."""
    w, h = 32, 12
    data = np.random.RandomState(3).randint(0, 256, (h, w)).astype(np.uint16)
    inb = hl.Buffer(data)
    x, y = hl.Var("x"), hl.Var("y")
    inp, box1, box2, blur = hl.Func("input"), hl.Func("box1"), hl.Func("box2"), hl.Func("blur")
    inp[x, y] = inb[hl.clamp(x, 0, w - 1), hl.clamp(y, 0, h - 1)]
    inp.compute_root()
    box1[x, y] = hl.cast(hl.UInt(16), 1)
    box2[x, y] = hl.cast(hl.UInt(32), 2)
    box1.compute_root()
    box2.compute_root()
    r = hl.RDom([(-1, 3), (-1, 3)])
    blur[x, y] = (hl.sum(box1[r.x, r.y] * inp[x + r.x, y + r.y])
                  + hl.sum(hl.cast(hl.UInt(16), box2[r.x, r.y]) * inp[x + r.x, y + r.y]))
    out = np.asarray(blur.realize([w, h]))
    p = np.pad(data.astype(np.int64), 1, mode="edge")
    s = sum(p[1 + dy:1 + dy + h, 1 + dx:1 + dx + w] for dy in (-1, 0, 1) for dx in (-1, 0, 1))
    assert out.dtype == np.uint16 and (out == (s * 3) % 65536).all()


def test_unsafe_promise_clamped():
    """Halide's correctness/unsafe_promises.cpp: promised bounds drive LUT bounds inference."""
    x = hl.Var("x")
    data = (np.arange(100) * 10).astype(np.uint16)
    lut_data = np.sin(np.arange(1024, dtype=np.float32) * np.float32(2 * 3.1415 / 1024))
    lut_data = lut_data.astype(np.float32)
    f = hl.Func("f1")
    inp, lut = hl.ImageParam(hl.UInt(16), 1, "in1"), hl.ImageParam(hl.Float(32), 1, "lut1")
    f[x] = lut[hl.unsafe_promise_clamped(inp[x], 0, 1023)]
    lut.dim(0).set_bounds(0, 1024)
    inp.set(hl.Buffer(data))
    lut.set(hl.Buffer(lut_data))
    assert (np.asarray(f.realize([100])) == lut_data[data]).all()

    for lo, hi, exp in ((hl.Expr(), 99, (0, 100)), (10, hl.Expr(), (10, 246))):
        inp, lut = hl.ImageParam(hl.UInt(8), 1, "in"), hl.ImageParam(hl.Float(32), 1, "lut")
        f = hl.Func("f")
        f[x] = lut[hl.unsafe_promise_clamped(inp[x], lo, hi)]
        f.infer_input_bounds([10])
        assert (lut.get().dim(0).min(), lut.get().dim(0).extent()) == exp


def test_in_place_select_with_undef():
    """Halide's correctness/in_place.cpp: select(.., undef) leaves the other entries untouched."""
    x = hl.Var("x")
    src = np.sin(np.arange(100, dtype=np.float32)).astype(np.float32)
    data = hl.Buffer(src.copy())
    h = hl.Func("h")
    h[x] = hl.select(x % 2 == 0, hl.f32(1.0), hl.undef(hl.Float(32)))
    h.vectorize(x, 4)
    h.realize(data)
    exp = src.copy()
    exp[::2] = 1.0
    assert np.abs(np.asarray(data) - exp).max() <= 0.001


def test_in_place_scan():
    """Halide's correctness/in_place.cpp: f(x) = undef; f(r) += f(r - 1) scans the buffer in place."""
    x = hl.Var("x")
    f = hl.Func("f")
    f[x] = hl.undef(hl.Float(32))
    r = hl.RDom([(1, 99)])
    f[r.x] += f[r.x - 1]
    src = np.sin(np.arange(100, dtype=np.float32)).astype(np.float32)
    data = hl.Buffer(src.copy())
    f.realize(data)
    assert np.abs(np.asarray(data) - np.cumsum(src.astype(np.float64))).sum() < 1e-3


def test_parameter_constraints():
    """Halide's correctness/parameter_constraints.cpp: a Param outside its set range is an error."""
    f, g = hl.Func("f"), hl.Func("g")
    x, y = hl.Var("x"), hl.Var("y")
    p = hl.Param(hl.Float(32), "p")
    inp = hl.Buffer(np.arange(400, dtype=np.float32).reshape(20, 20))
    p.set_range(1, 10)
    g[x, y] = inp[x, y] + hl.f32(1.0)
    g.compute_root()
    f[x, y] = g[hl.cast(hl.Int(32), x / p), y]
    p.set(2.0)
    Y, X = np.mgrid[0:20, 0:20]
    assert (np.asarray(f.realize([20, 20])) == Y * 20 + X // 2 + 1).all()
    p.set(0.0)
    assert _raises(lambda: f.realize([20, 20]))
    p.set(11.0)
    assert _raises(lambda: f.realize([20, 20]))
    q = hl.Param(hl.Int(32), "q", 3)
    q.set_min_value(1)
    q.set_max_value(5)
    h = hl.Func("h")
    h[x] = x * q
    assert np.asarray(h.realize([3])).tolist() == [0, 3, 6]
    q.set(6)
    assert _raises(lambda: h.realize([3]))


@pytest.mark.parametrize("bits,signed", [(8, False), (8, True), (16, False), (16, True),
                                         (32, False), (32, True)])
def test_div_by_zero(bits, signed):
    """Halide's correctness/div_by_zero.cpp: x / 0 == x % 0 == 0; min / -1 == min."""
    t = hl.Int(bits) if signed else hl.UInt(bits)
    a, b = hl.Param(t, "a"), hl.Param(t, "b")
    a.set(5)
    b.set(0)
    assert hl.evaluate(a / b) == 0 and hl.evaluate(a % b) == 0
    assert hl.evaluate(hl.cast(t, 5) / hl.cast(t, 0)) == 0
    assert hl.evaluate(hl.cast(t, 5) % hl.cast(t, 0)) == 0
    if signed and bits < 32:
        mn = -(1 << (bits - 1))
        a.set(mn)
        b.set(-1)
        assert hl.evaluate(a / b) == mn and hl.evaluate(a % b) == 0
        assert hl.evaluate(hl.cast(t, mn) / hl.cast(t, -1)) == mn
        assert hl.evaluate(hl.cast(t, mn) % hl.cast(t, -1)) == 0


def test_div_by_zero_in_shifted_vector():
    """Halide's correctness/div_by_zero.cpp: ShiftInwards overcompute divides by zero safely."""
    f, x = hl.Func("f"), hl.Var("x")
    f[x] = 256 / (x + 1)
    f.vectorize(x, 8, hl.TailStrategy.ShiftInwards)
    assert np.asarray(f.realize([5])).tolist() == [256 // (i + 1) for i in range(5)]


def test_for_each_element():
    """Halide's correctness/for_each_element.cpp: visit every site of a cropped and a 0-d buffer."""
    im = hl.Buffer(hl.Int(32), [30, 20, 3]).cropped(0, 5, 20).cropped(1, 4, 10)
    assert (im.dim(0).min(), im.dim(0).extent(), im.dim(1).min()) == (5, 20, 4)

    def fill(pos):
        xx, yy, cc = pos
        im[xx, yy, cc] = 10 * xx + 5 * yy + cc

    im.for_each_element(fill)
    seen = []

    def triple(pos):
        xx, yy, cc = pos
        assert im[xx, yy, cc] == 10 * xx + 5 * yy + cc
        im[xx, yy, cc] = im[xx, yy, cc] * 3
        seen.append(tuple(pos))

    im.for_each_element(triple)
    assert sorted(seen) == sorted((a, b, c) for a in range(5, 25) for b in range(4, 14)
                                  for c in range(3))
    for c in range(3):
        for yy in range(4, 14):
            for xx in range(5, 25):
                assert im[xx, yy, c] == (10 * xx + 5 * yy + c) * 3
    s = hl.Buffer.make_scalar(hl.Int(32))
    s[()] = 5

    def inc(pos):
        s[()] = s[()] + 1

    s.for_each_element(inc)
    assert s[()] == 6


def test_split_update_by_non_factor():
    """Halide's correctness/split_by_non_factor.cpp: update splits whose factor does not divide."""
    x, xo, xi, xio, xii = (hl.Var(n) for n in ("x", "xo", "xi", "xio", "xii"))
    f = hl.Func("f1")
    f[x] = 0
    f[x] += x
    f.update().unroll(x, 2, hl.TailStrategy.GuardWithIf)
    assert np.asarray(f.realize([3])).tolist() == [0, 1, 2]

    f = hl.Func("f2")
    f[x] = x
    f[x] += 3
    sum_size = hl.Param(hl.Int(32), "sum_size")
    r = hl.RDom([(0, sum_size)])
    f[0] += f[r.x]
    f.update(0).vectorize(x, 8, hl.TailStrategy.GuardWithIf)
    f.update(1).unroll(r.x, 4)
    for i, j in ((1, 0), (3, 1), (5, 4), (9, 6), (13, 12)):
        sum_size.set(j)
        ref = [k + 3 for k in range(i)]
        for k in range(j):
            ref[0] += ref[k]
        assert np.asarray(f.realize([i])).tolist() == ref

    f, g, h = hl.Func("f3"), hl.Func("g3"), hl.Func("h3")
    g[x] = x - 3
    h[x] = x * 7
    f[x] = 0
    f[x] += g[x] + h[x]
    f.update().split(x, xo, xi, 7, hl.TailStrategy.GuardWithIf)
    g.compute_at(f, xo)
    h.compute_at(f, xi)
    assert np.asarray(f.realize([15])).tolist() == [(i - 3) + i * 7 for i in range(15)]

    f, g = hl.Func("f4"), hl.Func("g4")
    f[x] = x
    f[x] += 1
    f.compute_root()
    f.update().split(x, xo, xi, 4).split(xi, xio, xii, 6)
    g[x] = f[x]
    assert np.asarray(g.realize([32])).tolist() == [i + 1 for i in range(32)]


def test_out_constraint():
    """Halide's correctness/out_constraint.cpp: output bounds tied to an input's constrained bounds."""
    size = 10
    inp = hl.ImageParam(hl.UInt(8), 1, "input")
    inp.dim(0).set_bounds(0, size)
    x = hl.Var("x")
    f = hl.Func("f1")
    f[x] = inp[x]
    f.output_buffer().dim(0).set_bounds(inp.dim(0).min(), inp.dim(0).extent())
    f.compile_jit()
    inp.set(hl.Buffer(np.full(size, 42, dtype=np.uint8)))
    assert (np.asarray(f.realize([size])) == 42).all()

    f = hl.Func("f2")
    f[x] = hl.undef(hl.UInt(8))
    r = hl.RDom(inp)
    f[r.x] = hl.cast(hl.UInt(8), 42)
    f.compile_jit()
    inp.set(hl.Buffer(np.zeros(size, dtype=np.uint8)))
    assert (np.asarray(f.realize([size])) == 42).all()


def _input_bounds(inp):
    b = inp.get()
    return b.dim(0).min(), b.dim(0).extent()


def test_bounds_of_func_values():
    """Halide's correctness/bounds_of_func.cpp: the range of a Func's values bounds the reads."""
    x = hl.Var("x")
    inp = hl.ImageParam(hl.Float(32), 1, "in")
    output = hl.Buffer(hl.Float(32), [1024])
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = hl.clamp(x, 10, 20)
    f.compute_root()
    g[x] = inp[hl.Expr(f[x])]
    g.infer_input_bounds(output)
    assert _input_bounds(inp) == (10, 11)

    f, g, h = hl.Func("f3"), hl.Func("g3"), hl.Func("h3")
    f[x] = hl.min(x, 100)
    f.compute_root()
    g[x] = hl.max(f[x] - 10, 0)
    g.compute_root()
    h[x] = inp[hl.Expr(g[hl.Expr(g[hl.Expr(g[x])])])]
    inp.reset()
    h.infer_input_bounds(output)
    assert _input_bounds(inp) == (0, 91)

    fs = []
    f = hl.Func("t0")
    f[x] = (hl.clamp(x, 0, 2), hl.clamp(x, 1, 3))
    f.compute_root()
    fs.append(f)
    for i in range(1, 20):
        f = hl.Func(f"t{i}")
        prev = fs[i - 1]
        f[x] = (prev[x][0] + prev[x][1], prev[x][1] - prev[x][0])
        f.compute_root()
        fs.append(f)
    h = hl.Func("h4")
    h[x] = inp[fs[19][x][0] + fs[19][x][1]]
    inp.reset()
    h.infer_input_bounds(output)
    assert _input_bounds(inp) == (-1049600, 2097153)


def test_bounds_of_func_depending_on_param():
    """Halide's correctness/bounds_of_func.cpp: a Func's value range may depend on a Param."""
    x = hl.Var("x")
    inp = hl.ImageParam(hl.Float(32), 1, "in")
    p = hl.Param(hl.Int(32), "p")
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = hl.clamp(x, 10, p)
    f.compute_root()
    g[x] = inp[hl.Expr(f[x])]
    p.set(20)
    g.infer_input_bounds(hl.Buffer(hl.Float(32), [1024]))
    assert _input_bounds(inp) == (10, 11)


@pytest.mark.parametrize("vw", [0, 4, 32])
def test_require(vw):
    """Halide's correctness/require.cpp: require() fails at run time only when its condition does."""
    p1_ok, p2 = 7829, 7919
    rw = vw if vw else 1
    a, b = hl.Param(hl.Int(32), "p1"), hl.Param(hl.Int(32), "p2")
    x = hl.Var("x")
    s, f = hl.Func("s"), hl.Func("f")
    s[x] = a + b
    f[x] = hl.require(s[x] == p1_ok, s[x] * p2 + x, hl.Expr(p1_ok), s[x])
    if vw:
        s.vectorize(x, vw).compute_root()
        f.vectorize(x, vw)
    a.set(1)
    b.set(2)
    assert _raises(lambda: f.realize([rw]))
    b.set(p1_ok - 1)
    assert np.asarray(f.realize([rw])).tolist() == [p1_ok * p2 + i for i in range(rw)]

    inp = hl.ImageParam(hl.Int(32), 2, "input")
    clamped = hl.BoundaryConditions.repeat_edge(inp, [(0, 64), (0, hl.require(a == b, a))])
    zeros = np.zeros((64, 64), dtype=np.int32)
    inp.set(hl.Buffer(zeros))
    a.set(16)
    b.set(15)
    assert _raises(lambda: clamped.realize([64, 3]))
    b.set(16)
    assert (np.asarray(clamped.realize([64, 3])) == 0).all()


def test_argmax_by_update():
    """Halide's correctness/argmax.cpp: argmax written as select updates, and inline argmax/argmin."""
    x, y = hl.Var("x"), hl.Var("y")
    f, amf = hl.Func("f"), hl.Func("arg_max_f")
    f[x] = x * (100 - x)
    r = hl.RDom([(0, 100)])
    amf[()] = 0
    amf[()] = hl.select(f[r.x] > f[hl.clamp(amf[()], 0, 100)], r.x, amf[()])
    assert hl.evaluate(amf[()]) == 50

    g, amg = hl.Func("g"), hl.Func("arg_max_g")
    r = hl.RDom([(0, 100), (0, 100)])
    g[x, y] = x * (100 - x) + y * (80 - y)
    g.compute_root()
    amg[()] = (0, 0, g[0, 0])
    amg[()] = hl.select(g[r.x, r.y] > amg[()][2], hl.Tuple([r.x, r.y, g[r.x, r.y]]), amg[()])
    assert [int(v) for v in hl.evaluate(tuple(amg[()][i] for i in range(3)))] == [50, 40, 4100]
    assert [int(v) for v in hl.evaluate(hl.argmax(g[r.x, r.y]))] == [50, 40, 4100]
    # the first minimum in (x inner, y outer) order
    vals = [(xx * (100 - xx) + yy * (80 - yy), xx, yy) for yy in range(100) for xx in range(100)]
    mn = min(v for v, _, _ in vals)
    first = next((xx, yy) for v, xx, yy in vals if v == mn)
    assert [int(v) for v in hl.evaluate(hl.argmin(g[r.x, r.y]))] == [first[0], first[1], mn]


@pytest.mark.parametrize("init", [-1, 0, 5, 100])
def test_argmax_in_place_elementwise_tuple(init):
    """Halide's correctness/argmax.cpp: in-place argmax at h(init) over Tuple elements."""
    x = hl.Var("x")
    h, amh = hl.Func("h"), hl.Func("amh")
    r = hl.RDom([(0, 100)])
    h[x] = (x * (100 - x), x)
    h[init] = hl.select(h[init][0] >= h[r.x][0], hl.Tuple([h[init][0], h[init][1]]),
                        hl.Tuple([h[r.x][0], h[r.x][1]]))
    amh[()] = h[init]
    assert [int(v) for v in hl.evaluate((amh[()][0], amh[()][1]))] == [2500, 50]


def test_argmax_in_place_tuple_of_funcref():
    """Halide's correctness/argmax.cpp: select(.., Tuple(h(init)), Tuple(h(r))) in an update."""
    x = hl.Var("x")
    h, amh = hl.Func("h"), hl.Func("amh")
    r = hl.RDom([(0, 100)])
    h[x] = (x * (100 - x), x)
    h[0] = hl.select(h[0][0] >= h[r.x][0], hl.Tuple(h[0]), hl.Tuple(h[r.x]))
    amh[()] = h[0]
    assert [int(v) for v in hl.evaluate((amh[()][0], amh[()][1]))] == [2500, 50]


def _inv_fact(n):
    v = 1.0
    for i in range(2, n + 1):
        v /= i
    return float(np.float32(v))


def _rms(a, b):
    ra, rb = hl.Buffer(a), hl.Buffer(b)
    r = hl.RDom(rb)
    fn = hl.Func("rms")
    fn[()] = hl.sqrt(hl.sum(hl.pow(ra[r.x] - rb[r.x], 2)))
    return float(fn.realize([])[()])


def test_integer_powers():
    """Halide's correctness/integer_powers.cpp: Taylor series with integer powers of x."""
    x = hl.Var("x")
    xf = hl.strict_float(x / hl.f32(256.0))
    n = 256 * 5
    xs = np.arange(n) / 256.0
    y1 = hl.f32(0.0)
    for k in range(20):
        y1 = y1 + hl.pow(-1, k) * hl.pow(xf, 1 + 2 * k) * hl.f32(_inv_fact(1 + 2 * k))
    y2 = hl.f32(1.0)
    for k in range(20, 0, -1):
        y2 = 1 - (y2 * hl.pow(xf, 2)) / (2 * k * (2 * k + 1))
    y2 = y2 * xf
    s1, s2, se = hl.Func("s1"), hl.Func("s2"), hl.Func("se")
    s1[x] = y1
    s2[x] = y2
    se[x] = hl.sin(xf)
    a1, a2, ex = (np.asarray(fn.realize([n])).copy() for fn in (s1, s2, se))
    assert np.abs(ex - np.sin(xs)).max() < 1e-5
    assert _rms(a1, ex) <= 1e-4 and _rms(a2, ex) <= 1e-4

    xf = xf + 1
    y1 = hl.f32(0.0)
    for k in range(20):
        y1 = y1 + hl.pow(xf, -k) * hl.f32(_inv_fact(k))
    y2 = hl.f32(0.0)
    for k in range(20, 0, -1):
        y2 = 1 + y2 / (k * xf)
    e1, e2, ee = hl.Func("e1"), hl.Func("e2"), hl.Func("ee")
    e1[x] = y1
    e2[x] = y2
    ee[x] = hl.exp(hl.f32(1.0) / xf)
    a1, a2, ex = (np.asarray(fn.realize([n])).copy() for fn in (e1, e2, ee))
    assert np.abs(ex - np.exp(1.0 / (xs + 1))).max() < 1e-5
    assert _rms(a1, ex) <= 1e-4 and _rms(a2, ex) <= 1e-4


@pytest.mark.parametrize("bits", [16, 32])
def test_bit_counting(bits):
    """Halide's correctness/bit_counting.cpp: popcount, count_leading/trailing_zeros vectorized."""
    nt = np.uint16 if bits == 16 else np.uint32
    rng = np.random.RandomState(4)
    vals = []
    for i in range(256):
        v = i if i < 16 else (0xFFFFFFFF - i if i < 32 else int(rng.randint(0, 2**31)))
        vals.append(v & ((1 << bits) - 1))
    inp = hl.Buffer(np.array(vals, dtype=nt))
    x = hl.Var("x")
    for op, ref in (
        (hl.popcount, lambda v: bin(v).count("1")),
        (hl.count_leading_zeros, lambda v: bits - v.bit_length()),
        (hl.count_trailing_zeros, lambda v: bits if v == 0 else (v & -v).bit_length() - 1),
    ):
        f = hl.Func("f")
        f[x] = op(inp[x])
        f.vectorize(x, 16)
        out = np.asarray(f.realize([256]))
        assert out.dtype == nt
        assert out.tolist() == [ref(v) for v in vals]


def test_multi_pass_reduction():
    """Halide's correctness/multi_pass_reduction.cpp: scans, clobbers, unrolled fib, integral image."""
    x, y = hl.Var("x"), hl.Var("y")
    f = hl.Func("f1")
    f[x] = hl.sin(x)
    r1 = hl.RDom([(1, 10)])
    f[r1.x] = f[r1.x - 1] + f[r1.x]
    f[10 - r1.x] = f[10 - r1.x + 1] + f[10 - r1.x]
    ref = [float(np.sin(np.float32(i))) for i in range(11)]
    for i in range(1, 11):
        ref[i] += ref[i - 1]
    for i in range(9, -1, -1):
        ref[i] += ref[i + 1]
    assert np.abs(np.asarray(f.realize([11])) - np.array(ref)).max() <= 1e-4

    f, g = hl.Func("f2"), hl.Func("g2")
    g[x] = x * x
    f[x] = x
    r = hl.RDom([(1, 10)])
    f[r.x] = f[r.x] + f[r.x - 1]
    f[17] = 8
    f[109] = 4
    r2 = hl.RDom([(4, 5)])
    f[r2.x] = g[r2.x]
    g.compute_at(f, r2.x)
    c = list(range(110))
    for i in range(1, 11):
        c[i] += c[i - 1]
    c[17], c[109] = 8, 4
    for i in range(4, 9):
        c[i] = i * i
    assert np.asarray(f.realize([110])).tolist() == c

    f = hl.Func("fib")
    f[x] = 1
    for i in range(2, 20):
        f[i] = f[i - 1] + f[i - 2]
    ref = [1, 1]
    for _ in range(2, 20):
        ref.append(ref[-1] + ref[-2])
    assert np.asarray(f.realize([20])).tolist() == ref

    n = 32
    f = hl.Func("integral")
    f[x, y] = hl.sin(x + y)
    r = hl.RDom([(1, n - 1)])
    f[x, r.x] += f[x, r.x - 1]
    f[r.x, y] += f[r.x - 1, y]
    f.update(0).vectorize(x, 4)
    f.update(1).reorder(r.x, y).parallel(y)
    Y, X = np.mgrid[0:n, 0:n]
    ref = np.sin((X + Y).astype(np.float32)).astype(np.float64)
    ref = np.cumsum(np.cumsum(ref, axis=0), axis=1)
    assert np.abs(np.asarray(f.realize([n, n])) - ref).max() <= 1e-3


def test_widening_reduction():
    """Halide's correctness/widening_reduction.cpp: i16 sums narrowed with u8_sat."""
    w, h = 256, 6
    rng = np.random.RandomState(5)
    ind = rng.randint(0, 256, (h, w)).astype(np.uint8)
    kd = (rng.randint(0, 8, (3, 3)) - 4).astype(np.int8)
    kernel = hl.Buffer(kd)
    kernel.set_min([-1, -1])
    x, y = hl.Var("x"), hl.Var("y")
    r = hl.RDom([(-1, 3), (-1, 3)])
    inp = hl.BoundaryConditions.repeat_edge(hl.Buffer(ind))
    inp.compute_root()
    vs = hl.get_jit_target_from_environment().natural_vector_size(hl.UInt(8))
    pad = np.pad(ind.astype(np.int64), 1, mode="edge")
    conv = sum(pad[1 + ry:1 + ry + h, 1 + rx:1 + rx + w] * int(kd[ry + 1, rx + 1])
               for ry in (-1, 0, 1) for rx in (-1, 0, 1))

    f = hl.Func("f1")
    f[x, y] = hl.u8_sat(hl.sum(hl.i16(inp[x + r.x, y + r.y]) * kernel[r.x, r.y]) / 16)
    f.vectorize(x, vs)
    assert (np.asarray(f.realize([w, h])) == np.clip(conv // 16, 0, 255)).all()

    f, g = hl.Func("f2"), hl.Func("g2")
    f[x, y] = (hl.i16(0), hl.i8(0))
    f[x, y] = (f[x, y][0] + hl.i16(inp[x + r.x, y + r.y]) * kernel[r.x, r.y],
               f[x, y][1] + kernel[r.x, r.y])
    g[x, y] = hl.u8_sat((f[x, y][0] + f[x, y][1]) / 16)
    g.vectorize(x, vs)
    exp = np.clip((conv + int(kd.astype(np.int64).sum())) // 16, 0, 255)
    assert (np.asarray(g.realize([w, h])) == exp).all()

    f, g = hl.Func("f3"), hl.Func("g3")
    f[x, y] = hl.i16(inp[x, y])
    g[x, y] = hl.u8_sat((f[x, y] + f[x + 1, y]) / 2)
    g.vectorize(x, vs)
    g.output_buffer().dim(0).set_min(0).set_extent(w - 2)
    g.output_buffer().dim(1).set_min(0).set_extent(h)
    i64 = ind.astype(np.int64)
    assert (np.asarray(g.realize([w - 2, h])) == (i64[:, :w - 2] + i64[:, 1:w - 1]) // 2).all()


def test_fit_function_gradient_descent():
    """Halide's correctness/fit_function.cpp: propagate_adjoints gradient descent on a polynomial."""
    coeffs = hl.ImageParam(hl.Float(64), 1, "coeffs")
    lr = hl.Param(hl.Float(64), "learning_rate")
    order, samples = hl.Param(hl.Int(32), "order"), hl.Param(hl.Int(32), "samples")
    x, y = hl.Var("x"), hl.Var("y")
    cf = hl.Func("coeffs_f")
    cf[x] = coeffs[x]
    fx = (x / hl.cast(hl.Float(64), samples)) * hl.f64(math.pi / 2)
    r = hl.RDom([(0, order)])
    rf = order - 1 - r.x
    approx_sin, exact_sin, err = hl.Func("approx_sin"), hl.Func("exact_sin"), hl.Func("err")
    approx_sin[x, y] = hl.cast(hl.Float(64), 0)
    approx_sin[x, rf] = (approx_sin[x, rf + 1] * fx + cf[rf]) * fx
    exact_sin[x] = hl.sin(fx)
    err[x] = hl.pow((approx_sin[x, 0] - exact_sin[x]) / exact_sin[x], 2)
    d = hl.RDom([(1, samples - 1)])
    average_err = hl.Func("average_err")
    average_err[()] = hl.sum(err[d.x]) / samples
    dd = hl.propagate_adjoints(average_err)
    new_coeffs = hl.Func("new_coeffs")
    new_coeffs[x] = coeffs[x] - lr * dd[cf][x]
    err.compute_root().vectorize(x, 4)
    new_coeffs.compute_root().vectorize(x, 4)
    approx_sin.compute_root().vectorize(x, 4).update().vectorize(x, 4)
    exact_sin.compute_root().vectorize(x, 4)
    average_err.compute_root()
    cf.compute_root()

    terms, s = 8, 200
    c = np.zeros(terms)
    c[0] = 1
    for i in range(1, terms):
        c[i] = -c[i - 1] / (i * 2 * (i * 2 + 1))
    c[1:] *= 1.01  # start away from the optimum, so the error is well above rounding noise
    cbuf = hl.Buffer(hl.Float(64), [terms])
    np.asarray(cbuf)[:] = c
    e = hl.Buffer.make_scalar(hl.Float(64))
    order.set(terms)
    samples.set(s)
    coeffs.set(cbuf)
    lr.set(0.00001)
    p = hl.Pipeline([average_err, new_coeffs])
    xs = np.arange(1, s) / s * (math.pi / 2)
    powers = np.array([xs ** (2 * k + 1) for k in range(terms)])
    errs = []
    for _ in range(20):
        p.realize([e, cbuf])
        rel = (c @ powers - np.sin(xs)) / np.sin(xs)
        grad = (2 * rel / np.sin(xs) * powers).sum(axis=1) / s
        assert e[()] == pytest.approx((rel ** 2).sum() / s, rel=1e-6)
        c = c - 0.00001 * grad
        assert np.allclose(np.asarray(cbuf), c, rtol=1e-6, atol=1e-12)
        errs.append(e[()])
    assert errs[-1] < errs[0]


def test_tuple_reduction():
    """Halide's correctness/tuple_reduction.cpp: Tuple updates that swap and increment elements."""
    n = 32
    x, y = hl.Var("x"), hl.Var("y")
    Y, X = np.mgrid[0:n, 0:n]

    def get(f):
        res = f.realize([n, n])
        return np.asarray(res[0]), np.asarray(res[1])

    f = hl.Func("f1")
    f[x, y] = (x + y, x - y)
    f[x, y] = (f[x, y][1] * 2, f[x, y][0] * 2)
    a, b = get(f)
    assert (a == (X - Y) * 2).all() and (b == (X + Y) * 2).all()

    f = hl.Func("f2")
    f[x, y] = (x + y, x - y)
    for _ in range(10):
        f[x, y] = (f[x, y][1] + 1, f[x, y][0] + 1)
    f.parallel(y)
    for i in range(10):
        f.update(i).unscheduled()
        if i & 1:
            f.update(i).vectorize(x, 8)
    a, b = get(f)
    assert (a == X + Y + 10).all() and (b == X - Y + 10).all()

    f = hl.Func("f4")
    f[x, y] = (x + y - 1000, x - y + 1000)
    for _ in range(10):
        f[x, y] = (f[x, y][1] - 1, f[x, y][1] + 1)
    for i in range(0, 10, 2):
        f.update(i).vectorize(x, 4)
    a, b = get(f)
    assert (a == X - Y + 1008).all() and (b == X - Y + 1010).all()


_F32_IN = [-2.6, -2.5, -2.3, -1.5, -1.0, -0.5, -0.49999997, -0.2, -0.0, 2.6, 2.5, 2.3, 1.5, 1.0,
           0.5, 0.49999997, 0.2, 0.0, 8388609, -8388609, 16777216, -16777218]
_F64_IN = [-2.6, -2.5, -2.3, -1.5, -1.0, -0.5, -0.49999999999999994, -0.2, -0.0, 2.6, 2.5, 2.3,
           1.5, 1.0, 0.5, 0.49999999999999994, 0.2, 0.0, 8388609, -8388610, 16777216, -16777218,
           4503599627370497, -4503599627370497]


@pytest.mark.parametrize("name", ["round", "floor", "ceil", "trunc"])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_round(name, dt):
    """Halide's correctness/round.cpp: round (to even), floor, ceil, trunc, scalar and vector."""
    data = np.array(_F32_IN if dt == np.float32 else _F64_IN, dtype=dt)
    inp = hl.Buffer(data)
    exp = {"round": np.rint, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc}[name](data)
    x = hl.Var("x")
    for vw in (1, 4, 8):
        f = hl.Func("f")
        f[x] = getattr(hl, name)(inp[x])
        if vw > 1:
            f.vectorize(x, vw)
        out = np.asarray(f.realize([len(data)]))
        assert out.dtype == dt
        assert (out == exp).all() and (np.signbit(out) == np.signbit(exp)).all()


_T = hl.TailStrategy
_ROUNDING = {_T.RoundUp, _T.RoundUpAndBlend, _T.PredicateLoads, _T.PredicateStores}
_SHIFTING = {_T.ShiftInwards, _T.ShiftInwardsAndBlend}


def _check_tails(out, tails):
    sizes = [1024]
    if not any(t in _ROUNDING for t in tails):
        sizes.append(130)
        if not any(t in _SHIFTING for t in tails):
            sizes.append(3)
    for s in sizes:
        assert (np.asarray(out.realize([s])) == np.arange(s)).all(), (tails, s)


@pytest.mark.parametrize("t1,t2", [
    (_T.RoundUp, _T.PredicateLoads), (_T.GuardWithIf, _T.ShiftInwards),
    (_T.PredicateStores, _T.RoundUpAndBlend), (_T.ShiftInwardsAndBlend, _T.GuardWithIf),
    (_T.GuardWithIf, _T.GuardWithIf), (_T.ShiftInwards, _T.PredicateStores),
])
def test_nested_tail_strategies_two_stages(t1, t2):
    """Halide's correctness/nested_tail_strategies.cpp: producer split inside consumer tiles."""
    inp, f, g = hl.Func("in"), hl.Func("f"), hl.Func("g")
    x, xo, xi = hl.Var("x"), hl.Var("xo"), hl.Var("xi")
    inp[x] = x
    f[x] = inp[x]
    g[x] = f[x]
    g.split(x, xo, xi, 64, t1)
    f.compute_at(g, xo).split(x, xo, xi, 8, t2)
    inp.compute_root()
    _check_tails(g, [t1, t2])


@pytest.mark.parametrize("t1,t2,t3", [
    (_T.GuardWithIf, _T.RoundUpAndBlend, _T.PredicateLoads),
    (_T.ShiftInwardsAndBlend, _T.GuardWithIf, _T.ShiftInwards),
])
def test_nested_tail_strategies_three_stages(t1, t2, t3):
    """Halide's correctness/nested_tail_strategies.cpp: three stages, each at the next's tiles."""
    inp, f, g, h = hl.Func("in"), hl.Func("f"), hl.Func("g"), hl.Func("h")
    x, xo, xi, xio, xii = (hl.Var(n) for n in ("x", "xo", "xi", "xio", "xii"))
    inp[x] = x
    f[x] = inp[x]
    g[x] = f[x]
    h[x] = g[x]
    h.split(x, xo, xi, 128, t1).split(xi, xio, xii, 64)
    g.compute_at(h, xio).split(x, xo, xi, 8, t2)
    f.compute_at(h, xo).split(x, xo, xi, 8, t3)
    inp.compute_root()
    _check_tails(h, [t1, t2, t3])


def test_nested_tail_strategies_reversed_splits():
    """Halide's correctness/nested_tail_strategies.cpp: outer split of the outer var, four tails."""
    tails = [_T.GuardWithIf, _T.ShiftInwards, _T.PredicateStores, _T.GuardWithIf]
    inp, f, g, h = hl.Func("in"), hl.Func("f"), hl.Func("g"), hl.Func("h")
    x, xo, xi, xoo, xoi = (hl.Var(n) for n in ("x", "xo", "xi", "xoo", "xoi"))
    inp[x] = x
    f[x] = inp[x]
    g[x] = f[x]
    h[x] = g[x]
    h.split(x, xo, xi, 64, tails[0]).split(xo, xoo, xoi, 2, tails[1])
    g.compute_at(h, xoi).split(x, xo, xi, 8, tails[2])
    f.compute_at(h, xoo).split(x, xo, xi, 8, tails[3])
    inp.compute_root()
    _check_tails(h, tails)


def test_logical_conditions():
    """Halide's correctness/logical.cpp: vectorized &&, ||, ! in select conditions."""
    w, h = 128, 32
    data = (np.arange(w * h).reshape(h, w) & 0xFF).astype(np.uint8)
    inp = hl.Buffer(data)
    d = data.astype(np.int64)
    x, y = hl.Var("x"), hl.Var("y")
    Y, X = np.mgrid[0:h, 0:w]
    u255, u0 = hl.cast(hl.UInt(8), 255), hl.cast(hl.UInt(8), 0)

    f = hl.Func("f1")
    v = inp[x, y]
    f[x, y] = hl.select(((v > 10) & (v < 20)) | ((v > 40) & ~(v > 50)), u255, u0)
    f.vectorize(x, 8)
    exp = np.where(((d > 10) & (d < 20)) | ((d > 40) & ~(d > 50)), 255, 0)
    assert (np.asarray(f.realize([w, h])) == exp).all()

    f = hl.Func("f2")
    cc = v > 10
    f[x, y] = hl.select((cc & (v < 20)) | ((v > 40) & hl.logical_not(cc)), u255, u0)
    f.vectorize(x, 8)
    exp = np.where(((d > 10) & (d < 20)) | ((d > 40) & ~(d > 10)), 255, 0)
    assert (np.asarray(f.realize([w, h])) == exp).all()

    f = hl.Func("f3")
    f[x, y] = hl.select((x < 10) | (x > 20) | (y < 10) | (y > 20), 0, v)
    f.vectorize(x, 128)
    exp = np.where((X < 10) | (X > 20) | (Y < 10) | (Y > 20), 0, d)
    assert (np.asarray(f.realize([w, h])) == exp).all()

    f = hl.Func("f4")
    f[x, y] = hl.select(v > hl.Expr(10), u255, u0)
    f.vectorize(x, 8)
    assert (np.asarray(f.realize([w, h])) == np.where(d > 10, 255, 0)).all()


@pytest.mark.parametrize("n,w", [(8, 16), (8, 32), (16, 32)])
def test_logical_select_condition_of_other_width(n, w):
    """Halide's correctness/logical.cpp: select whose condition is narrower than its values."""
    width, height = 64, 8
    x, y = hl.Var("x"), hl.Var("y")
    in_wide, in_narrow, f = hl.Func("in_wide"), hl.Func("in_narrow"), hl.Func("f")
    in_wide[x, y] = hl.cast(hl.UInt(w), y + x * 3)
    in_wide.compute_root()
    in_narrow[x, y] = hl.cast(hl.UInt(n), x * y + x - 17)
    in_narrow.compute_root()
    f[x, y] = hl.select(in_narrow[x, y] > 10, in_wide[x, y * 2], in_wide[x, y * 2 + 1])
    cpu, vec, out = hl.Func("cpu"), hl.Func("vec"), hl.Func("out")
    cpu[x, y] = f[x, y]
    vec[x, y] = f[x, y]
    out[x, y] = (hl.cast(hl.UInt(32), cpu[x, y]), hl.cast(hl.UInt(32), vec[x, y]))
    cpu.compute_root()
    vec.compute_root()
    vec.vectorize(x, 8)
    r = out.realize([width, height])
    Y, X = np.mgrid[0:height, 0:width]
    exp = np.where((X * Y + X - 17) % (1 << n) > 10, (2 * Y + X * 3) % (1 << w),
                   (2 * Y + 1 + X * 3) % (1 << w))
    assert (np.asarray(r[0]) == exp).all() and (np.asarray(r[1]) == exp).all()


def _printed(capfd, fn):
    capfd.readouterr()
    result = fn()
    captured = capfd.readouterr()
    return result, (captured.out + captured.err).splitlines()


def test_print_mixed_arguments(capfd):
    """Halide's correctness/print.cpp: print() of ints, strings, a float and a uint, per element."""
    x = hl.Var("x")
    f = hl.Func("f")
    f[x] = hl.print(x * x, "the answer is", hl.f32(42.0), "unsigned", hl.cast(hl.UInt(32), 145))
    res, lines = _printed(capfd, lambda: np.asarray(f.realize([10])).tolist())
    assert res == [i * i for i in range(10)]
    assert len(lines) == 10
    for i, line in enumerate(lines):
        parts = line.split()
        assert int(parts[0]) == i * i and parts[1:4] == ["the", "answer", "is"]
        assert float(parts[4]) == 42.0 and parts[5] == "unsigned" and int(parts[6]) == 145


def test_print_when_with_percent_string(capfd):
    """Halide's correctness/print.cpp: print_when prints once, and "%s" is printed as-is."""
    x = hl.Var("x")
    p = hl.Param(hl.Int(32), "param")
    p.set(127)
    f = hl.Func("f")
    f[x] = hl.print_when(x == 3, x * x, "g", hl.f32(42.0), "%s", p)
    res, lines = _printed(capfd, lambda: np.asarray(f.realize([10])).tolist())
    assert res == [i * i for i in range(10)]
    assert len(lines) == 1
    parts = lines[0].split()
    assert int(parts[0]) == 9 and parts[1] == "g" and float(parts[2]) == 42.0
    assert parts[3] == "%s" and int(parts[4]) == 127


def test_print_float32_like_printf_f(capfd):
    """Halide's correctness/print.cpp: a printed float32 reads like C's "%f"."""
    x = hl.Var("x")
    special = [0.0, -0.0, math.inf, -math.inf, math.nan, float(np.float32(1e-45)),
               -float(np.float32(1e-45)), float(np.finfo(np.float32).tiny),
               float(np.finfo(np.float32).max), 1.0 - 1.0 / (1 << 22), 1.5e-3, -12345.678]
    data = np.array(special + list(np.random.RandomState(6).standard_normal(20) * 1e3),
                    dtype=np.float32)
    inp = hl.Buffer(data)
    f = hl.Func("f")
    f[x] = hl.print(inp[x])
    vals, lines = _printed(capfd, lambda: np.asarray(f.realize([len(data)])).copy())
    assert len(lines) == len(data)
    for line, v in zip(lines, vals, strict=True):
        assert line.replace("-nan", "nan") == f"{float(v):f}".replace("-nan", "nan")


def test_print_float64_like_printf_e(capfd):
    """Halide's correctness/print.cpp: a printed float64 reads like C's "%e"."""
    x = hl.Var("x")
    data = np.array([0.0, -2.9e-161, 1.5e300, 12345.678, -1.0, math.inf], dtype=np.float64)
    inp = hl.Buffer(data)
    f = hl.Func("f")
    f[x] = hl.print(inp[x])
    vals, lines = _printed(capfd, lambda: np.asarray(f.realize([len(data)])).copy())
    assert lines == [f"{float(v):e}" for v in vals]


def test_print_vectorized(capfd):
    """Halide's correctness/print.cpp: vectorized print and print_when print lanes in order."""
    x = hl.Var("x")
    f = hl.Func("f")
    f[x] = hl.print(x * 3)
    f.vectorize(x, 32)
    res, lines = _printed(capfd, lambda: np.asarray(f.realize([128])).tolist())
    assert res == [i * 3 for i in range(128)] and lines == [str(i * 3) for i in range(128)]
    g = hl.Func("g")
    g[x] = hl.print_when(x % 2 == 0, x * 3)
    g.vectorize(x, 32)
    _, lines = _printed(capfd, lambda: g.realize([128]))
    assert lines == [str(i * 6) for i in range(64)]


def test_print_long_message(capfd):
    """Halide's correctness/print.cpp: a single message longer than 8K is cut to 8191 characters."""
    x = hl.Var("x")
    f = hl.Func("f")
    f[x] = hl.print(*[x + i for i in range(2000)])
    capfd.readouterr()
    f.realize([1])
    captured = capfd.readouterr()
    assert len(captured.out + captured.err) == 8191


_W = _H = 16


def _isnan_case(make, exp):
    x, y = hl.Var("x"), hl.Var("y")
    f = hl.Func("f")
    f[x, y] = make(x, y)
    f.vectorize(x, 8)
    assert (np.asarray(f.realize([_W, _H])) == exp).all()


def test_isnan_isinf_isfinite():
    """Halide's correctness/isnan.cpp: is_nan/is_inf/is_finite under strict_float and on inputs."""
    Y, X = np.mgrid[0:_H, 0:_W]
    with np.errstate(all="ignore"):
        sq = np.sqrt((X - Y).astype(np.float32))
        ratio = ((X - _W // 2).astype(np.float32) / (Y - _H // 2).astype(np.float32))
    exp_nan = np.where(X - Y < 0, 0.0, 1.0)
    exp_inf = np.where(np.isinf(ratio), 1.0, 0.0)
    exp_fin = np.where(np.isfinite(ratio), 1.0, 0.0)
    one, zero = hl.f32(1.0), hl.f32(0.0)

    def ratio_e(x, y):
        return hl.cast(hl.Float(32), x - _W // 2) / hl.cast(hl.Float(32), y - _H // 2)

    _isnan_case(lambda x, y: hl.strict_float(hl.select(hl.is_nan(hl.sqrt(x - y)), zero, one)),
                exp_nan)
    in1, in2 = hl.ImageParam(hl.Float(32), 2, "in1"), hl.ImageParam(hl.Float(32), 2, "in2")
    b1, b2 = hl.Buffer(sq.astype(np.float32)), hl.Buffer(ratio.astype(np.float32))
    in1.set(b1)
    in2.set(b2)
    _isnan_case(lambda x, y: hl.select(hl.is_nan(in1[x, y]), zero, one), exp_nan)
    _isnan_case(lambda x, y: hl.strict_float(hl.select(hl.is_inf(ratio_e(x, y)), one, zero)),
                exp_inf)
    _isnan_case(lambda x, y: hl.select(hl.is_inf(in2[x, y]), one, zero), exp_inf)
    _isnan_case(lambda x, y: hl.strict_float(hl.select(hl.is_finite(ratio_e(x, y)), one, zero)),
                exp_fin)
    _isnan_case(lambda x, y: hl.select(hl.is_finite(in2[x, y]), one, zero), exp_fin)
