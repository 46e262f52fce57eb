"""Ports of Halide 21's C++ correctness tests (batch 03) to pyhalide.

Each test names the Halide test it comes from; expectations are computed with numpy / plain Python.
"""

import ctypes
import math

import numpy as np
import pytest

import pyhalide as hl


def _trace_lines(capfd, fn, prefix):
    """Run fn() and return (its result, the trace lines written to stdout starting with prefix)."""
    capfd.readouterr()
    result = fn()
    ctypes.CDLL(None).fflush(None)
    out = capfd.readouterr().out
    return result, [line for line in out.splitlines() if line.startswith(prefix)]


def test_vectorized_print_returns_its_argument():
    """Halide's correctness/vector_print_bug.cpp: print() of a vectorized Var."""
    f, x = hl.Func("f"), hl.Var("x")
    f[x] = hl.print(x)
    f.vectorize(x, 4)
    assert np.asarray(f.realize([8])).tolist() == list(range(8))


def test_split_reusing_inner_name():
    """Halide's correctness/split_reuse_inner_name_bug.cpp: splits that reuse the old var name."""
    x, x0, x1, x2, x3 = (hl.Var(n) for n in ("x", "x0", "x1", "x2", "x3"))
    f = hl.Func("f")
    f[x] = x + 1
    f.compute_root().split(x, x0, x, 16).split(x, x, x1, 2).split(x, x2, x, 4).split(x, x, x3, 2)
    assert (np.asarray(f.realize([1024])) == np.arange(1024) + 1).all()


def test_vectorized_load_from_unaligned_embedded_buffer():
    """Halide's correctness/non_vector_aligned_embeded_buffer.cpp: unaligned embedded buffer."""
    storage = np.arange(5, dtype=np.int32) * 7
    foo = hl.Buffer(storage[1:])
    f, x = hl.Func("f"), hl.Var("x")
    f[x] = foo[x]
    f.vectorize(x, 4)
    f.output_buffer().dim(0).set_min(0)
    assert (np.asarray(f.realize([4])) == storage[1:]).all()


def test_compute_at_update_rvar():
    """Halide's correctness/update_chunk.cpp: a Func computed inside a reduction's update."""
    f, g = hl.Func("f"), hl.Func("g")
    x, y = hl.Var("x"), hl.Var("y")
    r = hl.RDom([(0, 10)])
    f[x, y] = x * y
    g[x, y] = 0
    g[x, r.x] = f[r.x, x] + 1
    f.compute_at(g, r.x)
    out = np.asarray(g.realize([10, 10]))
    yy, xx = np.mgrid[0:10, 0:10]
    assert (out == xx * yy + 1).all()


def test_register_allocation_bounded_by_input_constraint():
    """Halide's correctness/respect_input_constraint_in_bounds_inference.cpp: set_extent bounds f."""
    im = hl.ImageParam(hl.Float(32), 1, "im")
    f, g, x = hl.Func("f"), hl.Func("g"), hl.Var("x")
    f[x] = x
    g[x] = f[x % im.dim(0).extent()]
    im.dim(0).set_extent(16)
    f.compute_root().store_in(hl.MemoryType.Register)
    g.compile_jit()
    im.set(hl.Buffer(np.zeros(16, dtype=np.float32)))
    assert (np.asarray(g.realize([40])) == np.arange(40) % 16).all()


def test_embedded_image_simplified_away():
    """Halide's correctness/simplified_away_embedded_image.cpp: in(x, y) - in(x, y)."""
    inp = hl.Buffer(np.full((32, 32), 3.5, dtype=np.float32))
    x, y, foo = hl.Var("x"), hl.Var("y"), hl.Func("foo")
    foo[x, y] = inp[x, y] - inp[x, y]
    out = hl.Buffer(hl.Float(32), [32, 32])
    foo.realize(out)
    assert (np.asarray(out) == 0).all()


def test_reduction_with_hard_to_bound_store_index():
    """Halide's correctness/dynamic_reduction_bounds.cpp: store index divided by a hypot()."""
    inp = hl.ImageParam(hl.Float(32), 2, "input")
    x, y, z = hl.Var("x"), hl.Var("y"), hl.Var("z")
    dom = hl.RDom([(0, inp.width() * 8)])
    f = hl.Func("f")
    hard = hl.cast(hl.Int(32), hl.hypot(inp.width(), inp.height()))
    f[x, y, z] = 1
    f[x, y, dom.x / hard] += 1
    f.compile_jit()
    inp.set(hl.Buffer(np.zeros((32, 32), dtype=np.float32)))
    out = np.asarray(f.realize([10, 10, 16]))
    h = int(math.hypot(32, 32))
    exp = np.ones(16, dtype=np.int64)
    for d in range(32 * 8):
        if d // h < 16:
            exp[d // h] += 1
    assert (out == exp[:, None, None]).all()


def test_vectorized_load_of_bool_func():
    """Halide's correctness/bool_compute_root_vectorize.cpp: vector of 8 bools from compute_root."""
    x, y = hl.Var("x"), hl.Var("y")
    pred, selector = hl.Func("pred"), hl.Func("selector")
    pred[x, y] = x < y
    selector[x, y] = hl.select(pred[x, y], 1, 0)
    pred.compute_root()
    selector.compute_root().vectorize(x, 8)
    rng = hl.RDom([(0, 100), (0, 100)])
    assert hl.evaluate_may_gpu(hl.sum(selector[rng.x, rng.y])) == 4950


def test_compare_vars():
    """Halide's correctness/compare_vars.cpp: select(x == y, 1, 0)."""
    f, x, y = hl.Func("f"), hl.Var("x"), hl.Var("y")
    f[x, y] = hl.select(x == y, 1, 0)
    assert (np.asarray(f.realize([10, 10])) == np.eye(10)).all()


def test_permit_failed_unroll(monkeypatch):
    """Halide's correctness/failed_unroll.cpp: unroll of a non-constant loop with the env hack."""
    monkeypatch.setenv("HL_PERMIT_FAILED_UNROLL", "1")
    f, x = hl.Func("f"), hl.Var("x")
    f[x] = 3
    f.unroll(x)
    assert (np.asarray(f.realize([17])) == 3).all()


def test_strict_float_bounds():
    """Halide's correctness/strict_float_bounds.cpp: bounds of cast<int>(float param) with StrictFloat."""
    t = hl.get_jit_target_from_environment().with_feature(hl.TargetFeature.StrictFloat)
    x = hl.Var("x")
    inp = hl.ImageParam(hl.Float(32), 1, "input")
    fp = hl.Param(hl.Float(32), "f_param")
    out = hl.Func("output")
    out[x] = inp[x + hl.cast(hl.Int(32), fp)]
    inp.set(hl.Buffer(np.full(1, 2.5, dtype=np.float32)))
    fp.set(0.0)
    assert out.realize([1], t)[0] == 2.5


def test_vectorize_mixed_widths():
    """Halide's correctness/vectorize_mixed_widths.cpp: producer vectorized by 8, consumer by 16."""
    x, xo, xi = hl.Var("x"), hl.Var("xo"), hl.Var("xi")
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = 2 * x
    g[x] = f[x] / 2
    f.compute_at(g, x).split(x, xo, xi, 16).vectorize(xi, 8).unroll(xi)
    g.compute_root().vectorize(x, 16)
    assert np.asarray(g.realize([16])).tolist() == list(range(16))


@pytest.mark.parametrize("bits", [32, 16])
def test_bounds_of_clamp_with_multiplied_param(bits):
    """Halide's correctness/bounds_of_multiply.cpp: clamp(x, 0, bound * 2 - 1) for int32/int16."""
    bound = hl.Param(hl.Int(bits), "bound")
    inp = hl.ImageParam(hl.UInt(8), 1, "in")
    x, f = hl.Var("x"), hl.Func("f")
    f[x] = inp[hl.clamp(x, 0, bound * 2 - 1)]
    data = np.arange(10, dtype=np.uint8) * 3
    inp.set(hl.Buffer(data))
    bound.set(5)
    assert (np.asarray(f.realize([200])) == data[np.clip(np.arange(200), 0, 9)]).all()


def test_parallel_loop_with_inner_allocation():
    """Halide's correctness/parallel_alloc.cpp: compute_at inside a parallel loop, realized twice."""
    for _ in range(3):
        x, y = hl.Var("x"), hl.Var("y")
        f, g = hl.Func("f"), hl.Func("g")
        g[x, y] = x * y
        f[x, y] = g[x - 1, y] + g[x + 1, y]
        g.compute_at(f, y)
        f.parallel(y)
        im = f.realize([8, 8])
        f.realize(im)
        yy, xx = np.mgrid[0:8, 0:8]
        assert (np.asarray(im) == (xx - 1) * yy + (xx + 1) * yy).all()


def test_shadowed_bound_with_unroll():
    """Halide's correctness/shadowed_bound.cpp: bound(c, 0, 4) inside a region that needs c."""
    f, g = hl.Func("f"), hl.Func("g")
    x, y, c, xi, yi = hl.Var("x"), hl.Var("y"), hl.Var("c"), hl.Var("xi"), hl.Var("yi")
    f[x, y, c] = x + y + c
    g[x, y, c] = f[x, y, c] + f[x, y, 3]
    g.compute_root().tile(x, y, xi, yi, 32, 32)
    f.compute_at(g, x).bound(c, 0, 4).unroll(c)
    cc, yy, xx = np.mgrid[0:4, 0:64, 0:64]
    assert (np.asarray(g.realize([64, 64, 4])) == 2 * (xx + yy) + cc + 3).all()


def test_vectorized_load_from_vectorized_allocation():
    """Halide's correctness/vectorized_load_from_vectorized_allocation.cpp (size 16)."""
    size = 16
    f, g = hl.Func("f"), hl.Func("g")
    x, y, z = hl.Var("x"), hl.Var("y"), hl.Var("z")
    g[x, y, z] = x
    f[x, y, z] = 100
    r = hl.RDom([(0, size), (0, size), (0, size)])
    f[r.x, r.y, r.z] += 2 * g[r.x * r.z, r.y, r.z]
    f.update(0).vectorize(r.z, 8)
    g.compute_at(f, r.y)
    g.bound_extent(x, size * size)
    zz, yy, xx = np.mgrid[0:size, 0:size, 0:size]
    assert (np.asarray(f.realize([size, size, size])) == 100 + 2 * xx * zz).all()


def test_multi_way_select():
    """Halide's correctness/multi_way_select.cpp: an 8-way select against a table of updates."""
    f, g, x = hl.Func("f"), hl.Func("g"), hl.Var("x")
    cases = [3, 7, 24, 5, 37, 91, 33, 14]
    f[x] = hl.select(x == 0, cases[0], x == 1, cases[1], x == 2, cases[2], x == 3, cases[3],
                     x == 4, cases[4], x == 5, cases[5], x == 6, cases[6], cases[7])
    g[x] = 0
    for i, c in enumerate(cases):
        g[i] = c
    r = hl.RDom([(0, 8)])
    assert hl.evaluate_may_gpu(hl.sum(hl.abs(g[r.x] - f[r.x]))) == 0
    assert np.asarray(f.realize([10])).tolist() == cases + [14, 14]


def _parallel_rvar_funcs():
    x, y = hl.Var("x"), hl.Var("y")
    r = hl.RDom([(0, 12), (0, 10)])
    r2 = hl.RDom([(0, 12)])
    fs = [hl.Func("f0"), hl.Func("f1")]
    for f in fs:
        f[x, y] = x + y
        f[r.x, r.y] += 1
        f[r.x, r.y] += f[r.x + 20, r.y]
        f[2 * r2.x + 1, 0] += f[2 * r2.x, 0]
        f[r2.x, 0] += f[r2.x - 1, 1]
    return fs, r, r2


def _parallel_rvar_reference(w, h):
    vals = {}

    def get(a, b):
        return vals.get((a, b), a + b)

    for yy in range(10):
        for xx in range(12):
            vals[(xx, yy)] = get(xx, yy) + 1
    for yy in range(10):
        for xx in range(12):
            vals[(xx, yy)] = get(xx, yy) + get(xx + 20, yy)
    for i in range(12):
        vals[(2 * i + 1, 0)] = get(2 * i + 1, 0) + get(2 * i, 0)
    for i in range(12):
        vals[(i, 0)] = get(i, 0) + get(i - 1, 1)
    return np.array([[get(a, b) for a in range(w)] for b in range(h)])


def test_parallel_rvar_serial_reference():
    """Halide's correctness/parallel_rvar.cpp: the unscheduled pipeline's values."""
    (f, _), _, _ = _parallel_rvar_funcs()
    assert (np.asarray(f.realize([20, 20])) == _parallel_rvar_reference(20, 20)).all()


def test_parallel_rvar_tiled_fused_parallel():
    """Halide's correctness/parallel_rvar.cpp: tile + fuse + parallel of a pointwise update."""
    (f, _), r, _ = _parallel_rvar_funcs()
    rxo, ryo, rxi, ryi, rt = (hl.RVar(n) for n in ("rxo", "ryo", "rxi", "ryi", "rt"))
    f.update(0).tile(r.x, r.y, rxo, ryo, rxi, ryi, 4, 2).fuse(rxo, ryo, rt).parallel(rt)
    assert (np.asarray(f.realize([20, 20])) == _parallel_rvar_reference(20, 20)).all()


def test_parallel_rvar_self_reading_updates():
    """Halide's correctness/parallel_rvar.cpp: parallel/vectorized updates that read f itself."""
    (f, g), r, r2 = _parallel_rvar_funcs()
    rxo, ryo, rxi, ryi, rt = (hl.RVar(n) for n in ("rxo", "ryo", "rxi", "ryi", "rt"))
    f.compute_root()
    f.update(0).tile(r.x, r.y, rxo, ryo, rxi, ryi, 4, 2).fuse(rxo, ryo, rt).parallel(rt)
    f.update(1).parallel(r.x).parallel(r.y).unroll(r.y, 2)
    f.update(2).vectorize(r2.x, 4).unroll(r2.x)
    f.update(3).parallel(r2.x, 4)
    assert (np.asarray(f.realize([20, 20])) == _parallel_rvar_reference(20, 20)).all()


@pytest.mark.parametrize("update, schedule", [
    ("f[r.x + 1] = f[r.x] + 1", "parallel"),  # reads what the previous iteration stored
    ("f[2 * r.x] = f[2 * r.x + 2] + 1", "vectorize"),  # reads what the next one stores
    ("f[r.x % 4] = f[r.x % 4] + 1", "parallel"),  # several iterations store one element
    ("f[0] = f[0] + r.x", "vectorize"),  # every iteration stores one element
    ("f[r.x] = f[11 - r.x] + 1", "parallel"),  # one iteration reads what another stores
])
def test_parallel_rvar_real_races_are_still_refused(update, schedule):
    """What Halide's race test must refuse stays refused: iterations that meet (the counterpart
    of parallel_rvar.cpp's accepted updates)."""
    f, x = hl.Func("f"), hl.Var("x")
    r = hl.RDom([(0, 12)])
    f[x] = x
    exec(update, {"f": f, "r": r})
    with pytest.raises(hl.HalideError, match="race"):
        getattr(f.update(0), schedule)(r.x) if schedule == "parallel" else f.update(0).vectorize(r.x, 4)


def test_cascaded_filters_with_many_specializations():
    """Halide's correctness/cascaded_filters.cpp: 30 chained blurs, store_root, 10 specializations."""
    x = hl.Var("x")
    divisor = hl.Param(hl.Int(32), "divisor")
    data = (np.sin(10 * np.arange(1000, dtype=np.float32)) + 1).astype(np.float32)
    stages = [hl.Func("S0")]
    stages[0][x] = hl.Buffer(data)[x]
    for i in range(30):
        b = hl.Func(f"S{i + 1}")
        b[x] = (stages[-1][x] + stages[-1][x + 1]) / divisor
        stages.append(b)
    for s in stages[:-1]:
        s.store_root().compute_at(stages[-1], x)
    for i in range(1, 11):
        stages[-1].specialize(divisor == i)
    divisor.set(2)
    result = np.asarray(stages[-1].realize([10]))
    cur = data
    for _ in range(30):
        cur = ((cur[:-1] + cur[1:]) / np.float32(2)).astype(np.float32)
    assert np.abs(result - 1.0).sum() < 0.01
    assert np.allclose(result, cur[:10], atol=1e-5)


def _circle_pipeline():
    f, inn = hl.Func("f"), hl.Func("in")
    x, y = hl.Var("x"), hl.Var("y")
    inn[x, y] = x + y
    inn.compute_root()
    f[x, y] = 0
    t = hl.cast(hl.Int(32), hl.ceil(hl.sqrt(hl.cast(hl.Float(32), hl.max(0, 100 - y * y)))))
    f[x, y] += hl.select((x > -t) & (x < t), inn[x, y], 0)
    return f, inn


def test_iterate_over_circle_values():
    """Halide's correctness/iterate_over_circle.cpp: values of a select-bounded update."""
    f, _ = _circle_pipeline()
    exp = np.zeros((20, 20), dtype=np.int64)
    for yy in range(20):
        tt = math.ceil(math.sqrt(max(0, 100 - yy * yy)))
        for xx in range(20):
            if -tt < xx < tt:
                exp[yy, xx] = xx + yy
    assert (np.asarray(f.realize([20, 20])) == exp).all()


def test_iterate_over_circle_loads_only_inside(capfd):
    """Halide's correctness/iterate_over_circle.cpp: 'in' is loaded only inside the circle."""
    f, inn = _circle_pipeline()
    inn.trace_loads()
    _, loads = _trace_lines(capfd, lambda: f.realize([20, 20]), "Load in")
    inside = sum(1 for yy in range(20) for xx in range(20) if xx * xx + yy * yy < 100)
    assert len(loads) == inside


def test_recursive_box_filters_tuple_atomic_vectorize():
    """Halide's correctness/recursive_box_filters.cpp: Tuple recursion with atomic(true).vectorize."""
    x, f, h = hl.Var("x"), hl.Func("f"), hl.Func("h")
    f[x] = x
    f.compute_root()
    size = 256
    h[x] = (hl.undef(hl.Int(32)), hl.undef(hl.Int(32)))
    h[0] = (f[0], f[0])
    h[1] = (f[1] + f[0], f[1] + f[0])
    r = hl.RDom([(2, size - 2)])
    blur2 = f[r.x] + f[r.x - 1]
    h[r.x] = (blur2, blur2 + h[r.x - 2][0])
    h.update(2).atomic(True).vectorize(r.x, 16)
    h.update(0).unscheduled()
    h.update(1).unscheduled()
    r0, r1 = hl.Buffer(hl.Int(32), [size]), hl.Buffer(hl.Int(32), [size])
    h.realize([r0, r1])
    i = np.arange(3, size)
    assert (np.asarray(r0)[3:] == 2 * i - 1).all()
    assert (np.asarray(r1)[3:] == 4 * i - 6).all()


@pytest.mark.parametrize("mode", ["unroll", "vectorize"])
def test_unroll_with_extent_implied_by_specialization(mode):
    """Halide's correctness/unroll_loop_with_implied_constant_bounds.cpp: extent from specialize."""
    inter, o1, o2 = hl.Func("intermediate"), hl.Func("output1"), hl.Func("output2")
    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
    inter[x, y, c] = x + y + c
    o1[x, y, c] = inter[x, y, c]
    o2[x, y, c] = inter[x, y, c]
    three = ((o1.output_buffer().dim(2).extent() == 3) & (o1.output_buffer().dim(2).min() == 0)
             & (o2.output_buffer().dim(2).extent() == 3) & (o2.output_buffer().dim(2).min() == 0))
    getattr(inter.compute_root().specialize(three), mode)(c)
    p = hl.Pipeline([o1, o2])
    p.compile_jit()
    for nc in (3, 2):
        a, b = p.realize([5, 4, nc])
        cc, yy, xx = np.mgrid[0:nc, 0:4, 0:5]
        assert (np.asarray(a) == xx + yy + cc).all()
        assert (np.asarray(b) == xx + yy + cc).all()


@pytest.mark.parametrize("bits", [8, 16])
def test_narrow_predicated_vectors(bits):
    """Halide's correctness/narrow_predicates.cpp: GuardWithIf vectors of u8/u16 with selects/BCs."""
    t, dt = hl.UInt(bits), {8: np.uint8, 16: np.uint16}[bits]
    x = hl.Var("x")
    bc = hl.BoundaryConditions
    f = hl.Func("f")
    f[x] = hl.cast(t, x)
    f.compute_root()
    i = np.arange(1000)
    m = (i - 10) % 200
    mi = (i - 10) % 198
    cases = [
        (f[x], i),
        (hl.select(x < 50, f[x], hl.cast(t, 17)), np.where(i < 50, i, 17)),
        (hl.select(x > 50, f[x], hl.cast(t, 17)), np.where(i > 50, i, 17)),
        (bc.repeat_edge(f, [(10, 100)])[x], np.clip(i, 10, 109)),
        (bc.repeat_image(f, [(10, 100)])[x], 10 + (i - 10) % 100),
        (bc.constant_exterior(f, hl.cast(t, 17), [(10, 100)])[x],
         np.where((i >= 10) & (i < 110), i, 17)),
        (bc.mirror_image(f, [(10, 100)])[x], 10 + np.where(m < 100, m, 199 - m)),
        (bc.mirror_interior(f, [(10, 100)])[x], 10 + np.where(mi < 100, mi, 198 - mi)),
    ]
    for e, exp in cases:
        g1, g2 = hl.Func("g1"), hl.Func("g2")
        g1[x] = e
        g2[x] = e
        g1.vectorize(x, 64, hl.TailStrategy.GuardWithIf)
        b1, b2 = hl.Buffer(t, [1000]), hl.Buffer(t, [1000])
        g1.realize(b1)
        g2.realize(b2)
        assert (np.asarray(b1) == exp.astype(dt)).all()
        assert (np.asarray(b2) == exp.astype(dt)).all()


@pytest.mark.parametrize("tname", ["f32", "f64", "i32", "u32", "i16", "u16", "i8", "u8"])
def test_mod_is_euclidean(tname):
    """Halide's correctness/mod.cpp: x % 2 and (-x) % 4 for every numeric type."""
    t = {"f32": hl.Float(32), "f64": hl.Float(64), "i32": hl.Int(32), "u32": hl.UInt(32),
         "i16": hl.Int(16), "u16": hl.UInt(16), "i8": hl.Int(8), "u8": hl.UInt(8)}[tname]
    x, f, nf = hl.Var("x"), hl.Func("f"), hl.Func("nf")
    f[x] = hl.cast(t, x) % 2
    assert (np.asarray(f.realize([16])) == np.arange(16) % 2).all()
    nf[x] = hl.cast(t, -x) % 4
    i = np.arange(1, 16)
    if tname[0] == "u":
        exp = ((2 ** t.bits()) - i) % 4
    else:
        exp = (4 - i % 4) % 4
    assert (np.asarray(nf.realize([16]))[1:] == exp).all()


def test_constant_type_is_preserved():
    """Halide's correctness/constant_type.cpp: buffer(x) + 1 and 1 + buffer(x) keep the type."""
    for t in [hl.UInt(8), hl.UInt(16), hl.UInt(32), hl.Int(8), hl.Int(16), hl.Int(32),
              hl.Float(32), hl.Float(64)]:
        f, x = hl.Func("f"), hl.Var("x")
        f[x] = hl.cast(t, 1)
        im = f.realize([10])
        assert f.type() == t
        assert (np.asarray(im) == 1).all()
        assert (im[x] + 1).type() == t
        assert (1 + im[x]).type() == t


def test_histogram_equalize():
    """Halide's correctness/histogram_equalize.cpp: histogram, cdf and rescale (200x200)."""
    w = h = 200
    data = ((np.random.default_rng(0).integers(0, 256, size=(h, w)) // 2) + 64).astype(np.uint8)
    inp = hl.Buffer(data)
    hist, cdf, equalized, rescaled = (hl.Func(n) for n in ("hist", "cdf", "eq", "rescaled"))
    r, ri = hl.RDom(inp), hl.RDom([(0, 255)])
    x, y, i = hl.Var("x"), hl.Var("y"), hl.Var("i")
    hist[inp[r.x, r.y]] += 1
    cdf[i] = 0
    cdf[ri.x] = cdf[ri.x - 1] + hist[ri.x]
    equalized[x, y] = cdf[inp[x, y]]
    hist.compute_root()
    cdf.compute_root()
    rescaled[x, y] = hl.cast(hl.UInt(8), (equalized[x, y] * 256) / (w * h))
    out = np.asarray(rescaled.realize([w, h]))
    c = np.cumsum(np.bincount(data.ravel(), minlength=256))
    c[255] = 0  # cdf is only defined by the update over [0, 255)
    assert (out == ((c[data] * 256) // (w * h)).astype(np.uint8)).all()
    oh = np.bincount((out // 16).ravel(), minlength=16)
    correct = w * h // 16
    assert ((oh >= correct // 2) & (oh <= 2 * correct)).all()


def test_partial_realization():
    """Halide's correctness/partial_realization.cpp: histogram of x + y; RoundUp tile strides."""
    im, hist = hl.Func("im"), hl.Func("hist")
    x, y, xi, yi = hl.Var("x"), hl.Var("y"), hl.Var("xi"), hl.Var("yi")
    im[x, y] = x + y
    r = hl.RDom([(0, 100), (0, 100)])
    hist[im[r.x, r.y]] += 1
    assert (np.asarray(hist.realize([100])) == np.arange(100) + 1).all()
    f = hl.Func("f")
    f[x, y] = x + y
    f.tile(x, y, xi, yi, 16, 8, hl.TailStrategy.RoundUp)
    buf = f.realize([30, 20])
    assert (buf.dim(0).extent(), buf.dim(1).extent()) == (30, 20)
    assert (buf.dim(0).stride(), buf.dim(1).stride()) == (1, 32)
    for yy in range(20):
        for xx in range(30):
            assert buf[xx, yy] == xx + yy


@pytest.mark.parametrize("half", ["float16", "bfloat16"])
def test_half_float_comparisons(half):
    """Halide's correctness/float16_t_comparison.cpp: bit patterns and comparisons of halves."""
    t, mant, emask = {"float16": (hl.Float(16), 10, 0x7C00),
                      "bfloat16": (hl.BFloat(16), 7, 0x7F80)}[half]

    def c(v):
        return hl.cast(t, hl.f64(v))

    def ev(e):
        return bool(hl.evaluate(e))

    def bits(e):
        return int(hl.evaluate(hl.reinterpret(hl.UInt(16), e)))

    one, opt = c(1.0), c(1.25)
    assert bits(one) == (emask >> 1) & emask
    assert bits(opt) == ((emask >> 1) & emask) | (1 << (mant - 2))
    assert not ev(one == opt) and ev(one != opt) and ev(one < opt) and ev(one <= opt)
    assert ev(opt > one) and ev(opt >= one) and ev(one >= one) and ev(one == one)
    m1 = -one
    assert ev(m1 < one) and ev(one > m1)
    nan = c(float("nan"))
    assert ev(nan != nan) and not ev(nan == nan)
    assert ev(c(0.0) == c(-0.0))
    pinf, ninf = c(float("inf")), c(float("-inf"))
    assert ev(pinf > ninf) and ev(ninf < pinf) and ev(one < pinf) and ev(m1 < pinf)
    assert ev(one > ninf) and ev(m1 > ninf)


def test_bounds_inference_with_outer_split_unroll():
    """Halide's correctness/bounds_inference_outer_split.cpp: values (not the allocation size)."""
    x, y, xout, xin = hl.Var("x"), hl.Var("y"), hl.Var("xout"), hl.Var("xin")
    inp = hl.ImageParam(hl.Int(16), 2, "input")
    ic, ic2, ss, sc, sc2 = (hl.Func(n) for n in ("input_cpy", "input_cpy_2", "sum_stage",
                                                 "sum_stage_cpy", "sum_stage_cpy_2"))
    ic[x, y] = inp[x, y]
    ic2[x, y] = ic[x, y]
    ss[x, y] = ic2[x, y - 4] + ic2[x, y - 3] + ic2[x, y - 2] + ic2[x, y - 1] + ic2[x, y]
    sc[x, y] = ss[x, y]
    sc2[x, y] = sc[x, y]
    sc2.bound(x, 0, 512).bound(y, 0, 64)
    ic.compute_at(sc, y)
    ic2.compute_at(sc, xout).split(x, xout, xin, 32).unroll(xout, 4)
    sc.compute_at(sc2, y).split(x, xout, xin, 32).unroll(xout, 4)
    data = np.random.default_rng(1).integers(-100, 100, size=(68, 512)).astype(np.int16)
    buf = hl.Buffer(data)
    buf.set_min([0, -4])
    inp.set(buf)
    exp = (data[0:64] + data[1:65] + data[2:66] + data[3:67] + data[4:68]).astype(np.int16)
    assert (np.asarray(sc2.realize([512, 64])) == exp).all()


def _popc(a):
    return bin(int(a)).count("1")


def _clz(a):
    return 8 - int(a).bit_length()


def _ctz(a):
    a = int(a)
    return 8 if a == 0 else (a & -a).bit_length() - 1


@pytest.mark.parametrize("vectorize", [False, True])
def test_popc_clz_ctz_bounds(vectorize):
    """Halide's correctness/popc_clz_ctz_bounds.cpp: LUT indexed by popcount/clz/ctz of a u8."""
    inp = hl.ImageParam(hl.UInt(8), 1, "in")
    mp = np.array([4, 2, 8, 5, 1, 7, 0, 3, 6], dtype=np.uint8)
    mapping = hl.Buffer(mp)
    data = np.random.default_rng(0).integers(0, 256, size=16).astype(np.uint8)
    data[:2] = [0, 255]
    x, f = hl.Var("x"), hl.Func("f")
    f[x] = (mapping[hl.popcount(inp[x])], mapping[hl.count_leading_zeros(inp[x])],
            mapping[hl.count_trailing_zeros(inp[x])])
    if vectorize:
        f.vectorize(x, 8)
    inp.set(hl.Buffer(data))
    p, lz, tz = (np.asarray(b) for b in f.realize([16]))
    assert p.tolist() == [mp[_popc(d)] for d in data]
    assert lz.tolist() == [mp[_clz(d)] for d in data]
    assert tz.tolist() == [mp[_ctz(d)] for d in data]


def _stencil_chain(iters):
    x, y = hl.Var("x"), hl.Var("y")
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    f[x] = hl.sin(hl.cast(hl.Float(32), x))
    g[x, y] = hl.undef(hl.Float(32))
    g[x, x] = f[x]
    for _ in range(iters):
        g[x, x + 1] = g[x, x]
        g[x, x - 1] = g[x, x]
        g[y, y] = (g[y, y] + g[y - 1, y] + g[y + 1, y]) / 3.0
    g.compute_root()
    h[x] = g[x, x]
    return g, h


def test_stencil_chain_in_update_definitions_values():
    """Halide's correctness/stencil_chain_in_update_definitions.cpp: values of the diagonal blur."""
    iters, oe = 27, 19
    _, h = _stencil_chain(iters)
    out = np.asarray(h.realize([oe]))
    diag = {i: np.float32(math.sin(i)) for i in range(-iters, oe + iters)}
    for k in range(iters):
        diag = {i: np.float32((np.float32(diag[i] + diag[i - 1]) + diag[i + 1]) / np.float32(3))
                for i in range(-iters + k + 1, oe + iters - k - 1)}
    assert np.allclose(out, [diag[i] for i in range(oe)], atol=1e-5)


def test_stencil_chain_in_update_definitions_store_count(capfd):
    """Halide's correctness/stencil_chain_in_update_definitions.cpp: number of stores to g."""
    iters, oe = 27, 19
    g, h = _stencil_chain(iters)
    g.trace_stores()
    _, stores = _trace_lines(capfd, lambda: h.realize([oe]), "Store g")
    first = oe + 2 * iters
    expected = first + 2 * (iters * (oe + 2 + first) // 2) + iters * (oe + first - 2) // 2
    assert len(stores) == expected


def _some_tiles_pipeline():
    bitmap = hl.ImageParam(hl.Bool(), 2, "bitmap")
    image = hl.ImageParam(hl.Float(32), 2, "image")
    ts = 16
    x, y, xi, yi = hl.Var("x"), hl.Var("y"), hl.Var("xi"), hl.Var("yi")
    tiled, brighter = hl.Func("tiled"), hl.Func("brighter")
    ot, output = hl.Func("output_tiles"), hl.Func("output")
    tiled[xi, yi, x, y] = image[x * ts + xi, y * ts + yi]
    brighter[xi, yi, x, y] = hl.pow(tiled[xi, yi, x, y], hl.f32(0.8))
    ot[xi, yi, x, y] = hl.select(bitmap[x, y], brighter[xi, yi, x, y], tiled[xi, yi, x, y])
    output[x, y] = ot[x % ts, y % ts, x / ts, y / ts]
    ext = (image.dim(0).extent() / ts) * ts
    output.bound(x, 0, ext).bound(y, 0, ext).tile(x, y, xi, yi, ts, ts)
    output.vectorize(xi, 4)
    brighter.compute_at(ot, x)
    ot.compute_at(output, x)
    bm = np.zeros((6, 6), dtype=bool)
    bm[5, 5] = True
    bitmap.set(hl.Buffer(bm))
    yy, xx = np.mgrid[0:6 * ts, 0:6 * ts]
    img = ((np.sin((xx + yy).astype(np.float32)) + 1) / 2).astype(np.float32)
    image.set(hl.Buffer(img))
    exp = np.where(bm[yy // ts, xx // ts], img ** 0.8, img)
    return output, brighter, exp, (bm, img)  # keep the input arrays alive


def test_process_some_tiles_values():
    """Halide's correctness/process_some_tiles.cpp: per-tile select of an expensive stage."""
    output, _, exp, _keep = _some_tiles_pipeline()
    assert np.allclose(np.asarray(output.realize([96, 96])), exp, atol=1e-3)


def test_process_some_tiles_computes_only_active_tile(capfd):
    """Halide's correctness/process_some_tiles.cpp: 'brighter' runs for one 16x16 tile only."""
    output, brighter, _, _keep = _some_tiles_pipeline()
    brighter.trace_stores()
    _, stores = _trace_lines(capfd, lambda: output.realize([96, 96]), "Store brighter")
    assert len(stores) == 16 * 16


def test_undef_fibonacci_and_tuple_ping_pong():
    """Halide's correctness/undef.cpp: undef pure definitions and alternating undef Tuple parts."""
    x = hl.Var("x")
    r = hl.RDom([(2, 100)])
    f1, f2 = hl.Func("f1"), hl.Func("f2")
    f1[x] = 0
    f1[r.x] = f1[r.x - 1] + f1[r.x - 2]
    f2[x] = hl.undef(hl.Int(32))
    f2[0] = 0
    f2[1] = 0
    f2[r.x] = f2[r.x - 1] + f2[r.x - 2]
    assert (np.asarray(f1.realize([102])) == 0).all()
    assert (np.asarray(f2.realize([102])) == 0).all()
    rx = hl.RDom([(0, 100)])
    f3 = hl.Func("f3")
    f3[x] = (hl.undef(hl.Float(32)), hl.sin(hl.cast(hl.Float(32), x)))
    left, right = hl.max(rx.x - 1, 0), hl.min(rx.x + 1, 99)
    for _ in range(10):
        f3[rx.x] = ((f3[rx.x][1] + f3[left][1] + f3[right][1]) / 3, hl.undef(hl.Float(32)))
        f3[rx.x] = (hl.undef(hl.Float(32)), (f3[rx.x][0] + f3[left][0] + f3[right][0]) / 3)
    o1 = hl.Buffer(np.full(100, 17, dtype=np.float32))
    o2 = hl.Buffer(np.full(100, 18, dtype=np.float32))
    f3.realize([o1, o2])
    i = np.arange(100)
    lo, hi = np.maximum(i - 1, 0), np.minimum(i + 1, 99)
    v = np.sin(i.astype(np.float32))
    for _ in range(10):
        a = (v + v[lo] + v[hi]) / 3
        v = (a + a[lo] + a[hi]) / 3
    assert np.allclose(np.asarray(o1), a, atol=1e-5)
    assert np.allclose(np.asarray(o2), v, atol=1e-5)


def test_undef_in_inlined_select_skips_store():
    """Halide's correctness/undef.cpp: g(x) = select(x == 0, f(x), -f(1 - x)), f partly undef."""
    x, f, g = hl.Var("x"), hl.Func("f"), hl.Func("g")
    f[x] = hl.select(x == 0, x + 1, hl.undef(hl.Int(32)))
    g[x] = hl.select(x == 0, f[x], -f[1 - x])
    out = hl.Buffer(np.full(4, 17, dtype=np.int32))
    g.realize(out)
    assert np.asarray(out).tolist() == [1, -1, 17, 17]


def test_lots_of_dimensions():
    """Halide's correctness/lots_of_dimensions.cpp: an 8-D u64 pipeline with nonzero mins."""
    ext = [2, 3, 4, 5, 6, 7, 2, 3]
    mins = [90, 80, 70, 60, 50, 40, 30, 20]
    u = np.meshgrid(*[np.arange(m, m + e, dtype=np.uint64) for m, e in zip(mins, ext)],
                    indexing="ij")
    vals = (((u[0] + u[1]) * u[2] + u[3]) * u[4] + u[5]) * u[6] + u[7]
    arr = np.ascontiguousarray(vals.transpose(list(range(7, -1, -1))))
    inb = hl.Buffer(hl.UInt(64), ext)
    np.asarray(inb)[...] = arr
    inb.set_min(mins)
    outb = hl.Buffer(hl.UInt(64), ext)
    outb.set_min(mins)
    assert inb[mins] == int(vals[(0,) * 8])
    inp = hl.ImageParam(hl.UInt(64), 8, "input")
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    vs = [hl.Var(f"v{i}") for i in range(8)]
    f[vs] = hl.pow(inp[vs], 2)
    g[vs] = f[vs] - 2
    h[vs] = g[vs] - 1
    f.compute_root().parallel(vs[7])
    g.compute_root().parallel(vs[7])
    inp.set(inb)
    h.realize(outb)
    assert (np.asarray(outb) == arr * arr - np.uint64(3)).all()


@pytest.mark.parametrize("xs", [3, 4])
@pytest.mark.parametrize("bits", [8, 16, 32])
def test_interleave_and_deinterleave_rgb(xs, bits):
    """Halide's correctness/interleave_rgb.cpp: vectorized (de)interleave with x stride 3 or 4."""
    t, dt = hl.UInt(bits), {8: np.uint8, 16: np.uint16, 32: np.uint32}[bits]
    w, h = 255, 16
    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
    src, il = hl.Func("input"), hl.Func("interleaved")
    src[x, y, c] = hl.cast(t, x * 3 + y * 5 + c)
    il[x, y, c] = src[x, y, c]
    src.compute_root()
    il.reorder(c, x, y).bound(c, 0, 3)
    il.output_buffer().dim(0).set_stride(xs).dim(2).set_stride(1).set_extent(3)
    il.vectorize(x, 16, hl.TailStrategy.GuardWithIf).unroll(c)
    arr = np.full((h, w, xs), 7, dtype=dt)
    il.realize(hl.Buffer(arr.transpose(1, 0, 2), reverse_axes=False).cropped(2, 0, 3))
    yy, xx, cc = np.mgrid[0:h, 0:w, 0:xs]
    assert (arr == np.where(cc < 3, (xx * 3 + yy * 5 + cc).astype(dt), 7)).all()

    inp = hl.ImageParam(t, 3, "input")
    inp.dim(0).set_stride(xs)
    inp.dim(2).set_min(0).set_extent(3).set_stride(1)
    d = hl.Func("deinterleaved")
    d[x, y, c] = inp[x, y, c]
    d.reorder(c, x, y).bound(c, 0, 3)
    d.vectorize(x, 16, hl.TailStrategy.GuardWithIf).unroll(c)
    arr2 = np.random.default_rng(xs).integers(0, 2 ** 16, size=(h, w, xs)).astype(dt)
    inp.set(hl.Buffer(arr2.transpose(1, 0, 2), reverse_axes=False).cropped(2, 0, 3))
    out = hl.Buffer(t, [w, h, 3])
    d.realize(out)
    assert (np.asarray(out) == arr2[:, :, :3].transpose(2, 0, 1)).all()


def _tuple_undef_buffers(n):
    a_val = np.int32(-559038737)  # 0xdeadbeef
    b_val = np.int32(-267531522)  # 0xf00dcafe
    return (hl.Buffer(np.full((n, n), a_val, dtype=np.int32)),
            hl.Buffer(np.full((n, n), b_val, dtype=np.int32)), a_val, b_val)


def test_tuple_undef_in_select_of_update():
    """Halide's correctness/tuple_undef.cpp (test 2): undef Tuple element and select(.., undef)."""
    n = 32
    x, y, f = hl.Var("x"), hl.Var("y"), hl.Func("f")
    f[x, y] = (x, y)
    f[x, y] = (hl.undef(hl.Int(32)), hl.select(x < 20, 20 * f[x, y][0], hl.undef(hl.Int(32))))
    a, b, _, _ = _tuple_undef_buffers(n)
    f.realize([a, b])
    yy, xx = np.mgrid[0:n, 0:n]
    assert (np.asarray(a) == xx).all()
    assert (np.asarray(b) == np.where(xx < 20, 20 * xx, yy)).all()


def test_tuple_undef_pure_element_keeps_output():
    """Halide's correctness/tuple_undef.cpp (test 1): (x + y, undef) then (f0 + undef, f1 + 2)."""
    n = 32
    x, y, f = hl.Var("x"), hl.Var("y"), hl.Func("f")
    f[x, y] = (x + y, hl.undef(hl.Int(32)))
    f[x, y] = (f[x, y][0] + hl.undef(hl.Int(32)), f[x, y][1] + 2)
    a, b, _, b_val = _tuple_undef_buffers(n)
    f.realize([a, b])
    yy, xx = np.mgrid[0:n, 0:n]
    assert (np.asarray(a) == xx + yy).all()
    assert (np.asarray(b) == b_val + 2).all()


def test_tuple_undef_in_store_coordinates():
    """Halide's correctness/tuple_undef.cpp (test 3): clamp(select(r < 2, 13, undef)) as index."""
    n = 128
    x, y, f = hl.Var("x"), hl.Var("y"), hl.Func("f")
    f[x, y] = (0, 0)
    r = hl.RDom([(0, 10)])
    a0 = hl.clamp(hl.select(r.x < 2, 13, hl.undef(hl.Int(32))), 0, 100)
    a1 = hl.clamp(hl.select(r.x < 2, 23, hl.undef(hl.Int(32))), 0, 100)
    f[a0, a1] = (f[a0, a1][0] + 10, f[a0, a1][1] + 5)
    a, b, _, _ = _tuple_undef_buffers(n)
    f.realize([a, b])
    yy, xx = np.mgrid[0:n, 0:n]
    hit = (xx == 13) & (yy == 23)
    assert (np.asarray(a) == np.where(hit, 20, 0)).all()
    assert (np.asarray(b) == np.where(hit, 10, 0)).all()


def test_tuple_undef_everywhere_stores_nothing():
    """Halide's correctness/tuple_undef.cpp (test 4): f = (undef, undef) leaves the outputs alone."""
    x, y, f = hl.Var("x"), hl.Var("y"), hl.Func("f")
    f[x, y] = (hl.undef(hl.Int(32)), hl.undef(hl.Int(32)))
    a, b, a_val, b_val = _tuple_undef_buffers(8)
    f.realize([a, b])
    assert (np.asarray(a) == a_val).all()
    assert (np.asarray(b) == b_val).all()
