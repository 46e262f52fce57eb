"""The remaining cases of Halide's test/correctness/rfactor.cpp (v21.0.0), ported to Python.

Each builder takes the module (`hl` for pyhalide, `halide` for real Halide 21) and whether to
apply the rfactor schedule, so one piece of code builds both. `_agree` realizes pyhalide's
scheduled pipeline, pyhalide's reference evaluator on the unscheduled algorithm and Halide 21's
scheduled pipeline, and checks all three equal; most tests also check a closed form. Only the
output-correctness half of each Halide case is ported (its call-graph half inspects C++ IR).
The complex multiply, argmin and saturating add cases live in test_rfactor_tuples.py.
"""

from __future__ import annotations

import operator
import re

import halide
import numpy as np
import pytest

import pyhalide as hl
from pyhalide import reference


def _arrays(out) -> list[np.ndarray]:
    buffers = [out] if isinstance(out, hl.Buffer | halide.Buffer) else list(out)
    return [np.asarray(b) for b in buffers]


def _agree(build, sizes, with_halide=True, target=None) -> list[np.ndarray]:
    """build(module, scheduled) realized by pyhalide (scheduled), by the reference evaluator
    (the algorithm alone) and by Halide 21 (scheduled): all equal (NaNs match NaNs). target(module),
    if given, is the target both compilers use. Returns pyhalide's arrays."""
    def run(h):
        func = build(h, True)
        return _arrays(func.realize(sizes) if target is None else func.realize(sizes, target(h)))

    ours = run(hl)
    others = [("reference", reference.realize(build(hl, False), sizes))]
    if with_halide:
        others.append(("Halide", run(halide)))
    for name, other in others:
        assert len(other) == len(ours)
        for got, want in zip(ours, other):
            np.testing.assert_array_equal(got, want, err_msg=f"pyhalide vs {name}")
    return ours


def _grid(*extents) -> list[np.ndarray]:
    """Coordinate arrays over [0, extent) per dimension, in numpy order (the last Halide
    dimension first), like the arrays a realization returns."""
    return list(reversed(np.meshgrid(*[np.arange(e) for e in reversed(extents)], indexing="ij")))


def _in(v, lo, extent):
    return (lo <= v) & (v < lo + extent)


# ------------------------------------------------------------------------------ single values
def test_self_assignment_rfactor():
    """An update that stores each value back unchanged can be rfactored and leaves g as it was."""
    def build(h, scheduled):
        x, y = h.Var("x"), h.Var("y")
        g = h.Func("g")
        g[x, y] = x + y
        r = h.RDom([(0, 10), (0, 10)])
        g[r.x, r.y] = g[r.x, r.y]
        if scheduled:
            g.update(0).rfactor(r.y, h.Var("u")).compute_root()
        return g

    (im,) = _agree(build, [10, 10])
    x, y = _grid(10, 10)
    np.testing.assert_array_equal(im, x + y)


def _sum_of_coordinates_and_rdom(h):
    """Halide's f(x, y) = x + y at root, g(x, y) = 40, and r over [10, 30) x [30, 70)."""
    x, y = h.Var("x"), h.Var("y")
    f, g = h.Func("f"), h.Func("g")
    f[x, y] = x + y
    f.compute_root()
    g[x, y] = 40
    return x, y, f, g, h.RDom([(10, 20), (30, 40)])


def test_simple_rfactor():
    """A max over a 2-D RDom writing g(r.x, r.y), rfactored over r.y into a vectorized intermediate."""
    def build(h, scheduled):
        x, y, f, g, r = _sum_of_coordinates_and_rdom(h)
        g[r.x, r.y] = h.max(g[r.x, r.y] + f[r.x, r.y], g[r.x, r.y])
        if scheduled:
            g.reorder_storage(y, x)
            u = h.Var("u")
            intm = g.update(0).rfactor(r.y, u)
            intm.compute_root()
            intm.vectorize(u, 8)
            intm.update(0).vectorize(r.x, 2)
        return g

    (im,) = _agree(build, [80, 80])
    x, y = _grid(80, 80)
    np.testing.assert_array_equal(im, np.where(_in(x, 10, 20) & _in(y, 30, 40), np.maximum(40 + x + y, 40), 40))


def _sum_of_difference(h):
    """g(x, y) = 1, then += f(r.x, r.y) = r.x - r.y over [10, 30) x [20, 50), its RVars reordered."""
    x, y = h.Var("x"), h.Var("y")
    f, g = h.Func("f"), h.Func("g")
    r = h.RDom([(10, 20), (20, 30)])
    f[x, y] = x - y
    f.compute_root()
    g[x, y] = 1
    g[r.x, r.y] += f[r.x, r.y]
    return g, r


def _check_sum_of_difference(im):
    x, y = _grid(80, 80)
    np.testing.assert_array_equal(im, np.where(_in(x, 10, 20) & _in(y, 20, 30), x - y + 1, 1))


def test_reorder_split_rfactor():
    """Two rfactors of one update: over (the outer half of r.x, r.y), then over r.y again, the first
    intermediate computed inside the second's loop over the outer half."""
    def build(h, scheduled):
        g, r = _sum_of_difference(h)
        if scheduled:
            g.update(0).reorder(r.y, r.x)
            rxo, rxi = h.RVar("rxo"), h.RVar("rxi")
            g.update(0).split(r.x, rxo, rxi, 2)
            u, v = h.Var("u"), h.Var("v")
            intm1 = g.update(0).rfactor([(rxo, u), (r.y, v)])
            intm2 = g.update(0).rfactor(r.y, v)
            intm2.compute_root()
            intm1.compute_at(intm2, rxo)
        return g

    _check_sum_of_difference(_agree(build, [80, 80])[0])


def test_multiple_split_rfactor():
    """A second rfactor of the merged update, after splitting r.y twice with GuardWithIf, keeping
    three RVars as Vars."""
    def build(h, scheduled):
        g, r = _sum_of_difference(h)
        if scheduled:
            g.update(0).reorder(r.y, r.x)
            rxo, rxi = h.RVar("rxo"), h.RVar("rxi")
            ryo, ryi, ryoo, ryoi = h.RVar("ryo"), h.RVar("ryi"), h.RVar("ryoo"), h.RVar("ryoi")
            u, v, w = h.Var("u"), h.Var("v"), h.Var("w")
            g.update(0).split(r.x, rxo, rxi, 2)
            intm1 = g.update(0).rfactor([(rxo, u), (r.y, v)])
            g.update(0).split(r.y, ryo, ryi, 2, h.TailStrategy.GuardWithIf)
            g.update(0).split(ryo, ryoo, ryoi, 4, h.TailStrategy.GuardWithIf)
            intm2 = g.update(0).rfactor([(rxo, u), (ryoo, v), (ryoi, w)])
            intm2.compute_root()
            intm1.compute_root()
        return g

    _check_sum_of_difference(_agree(build, [80, 80])[0])


def test_reorder_fuse_wrapper_rfactor():
    """rfactor of an update whose r.x and r.y were fused, the intermediate computed inside g's loop
    and reading f through a wrapper (f.in_(intm))."""
    def build(h, scheduled):
        x, y, z = h.Var("x"), h.Var("y"), h.Var("z")
        f, g = h.Func("f"), h.Func("g")
        r = h.RDom([(5, 10), (5, 10), (5, 10)])
        f[x, y, z] = x + y + z
        g[x, y, z] = 1
        g[r.x, r.y, r.z] += f[r.x, r.y, r.z]
        if scheduled:
            g.update(0).reorder(r.y, r.x)
            rf = h.RVar("rf")
            g.update(0).fuse(r.x, r.y, rf)
            g.update(0).reorder(r.z, rf)
            intm = g.update(0).rfactor(r.z, h.Var("u"))
            rfi, rfo = h.RVar("rfi"), h.RVar("rfo")
            intm.update(0).split(rf, rfi, rfo, 2)
            intm.compute_at(g, r.z)
            f.in_(intm).compute_root()
            f.compute_root()
        return g

    (im,) = _agree(build, [20, 20, 20])
    x, y, z = _grid(20, 20, 20)
    np.testing.assert_array_equal(im, np.where(_in(x, 5, 10) & _in(y, 5, 10) & _in(z, 5, 10), x + y + z + 1, 1))


def test_non_trivial_lhs_rfactor():
    """A scattering update, f(clamp(a(r), ...), clamp(b(r), ...)) += c(r), rfactored over r.x and
    r.y with r.z split in the intermediate; g reads f."""
    def build(h, scheduled):
        x, y, z = h.Var("x"), h.Var("y"), h.Var("z")
        a, b, c, f, g = (h.Func(n) for n in "abcfg")
        r = h.RDom([(5, 10), (5, 10), (5, 10)])
        a[x, y, z] = x
        b[x, y, z] = x + y
        c[x, y, z] = x + y + z
        for producer in (a, b, c):
            producer.compute_root()
        f[x, y] = 1
        f[h.clamp(a[r.x, r.y, r.z], 0, 19), h.clamp(b[r.x, r.y, r.z], 0, 29)] += c[r.x, r.y, r.z]
        f.compute_root()
        g[x, y, z] = 2 * f[x, y]
        if scheduled:
            intm = f.update(0).rfactor([(r.x, h.Var("u")), (r.y, h.Var("v"))])
            intm.update(0).split(r.z, h.RVar("rzo"), h.RVar("rzi"), 2)
            intm.compute_root()
        return g

    (im,) = _agree(build, [20, 20, 20])
    want = np.ones((20, 20), np.int32)  # f, indexed [y, x]
    for rx in range(5, 15):
        for ry in range(5, 15):
            if rx + ry < 20:  # f's y = b = rx + ry; rows past 19 are outside g's region
                want[rx + ry, rx] += sum(rx + ry + rz for rz in range(5, 15))
    np.testing.assert_array_equal(im, np.broadcast_to(2 * want, (20, 20, 20)))


def test_simple_rfactor_with_specialize():
    """rfactor applied only under specialize(p >= 10): both the specialized and the generic path
    compute the min."""
    def build(h, scheduled, p_value):
        x, y, f, g, r = _sum_of_coordinates_and_rdom(h)
        g[r.x, r.y] = h.min(f[r.x, r.y] + 2, g[r.x, r.y])
        p = h.Param(h.Int(32), "p")
        p.set(p_value)
        if scheduled:
            u = h.Var("u")
            intm = g.update(0).specialize(p >= 10).rfactor(r.y, u)
            intm.compute_root()
            intm.vectorize(u, 8)
            intm.update(0).vectorize(r.x, 2)
        return g

    x, y = _grid(80, 80)
    want = np.where(_in(x, 10, 20) & _in(y, 30, 40), np.minimum(x + y + 2, 40), 40)
    for p_value in (0, 20):
        (im,) = _agree(lambda h, s, p_value=p_value: build(h, s, p_value), [80, 80])
        np.testing.assert_array_equal(im, want)


def test_rdom_with_predicate_rfactor():
    """rfactor of an RDom with two where() predicates, the intermediate tiled, fused, parallel and
    vectorized over r.z."""
    def build(h, scheduled):
        x, y, z = h.Var("x"), h.Var("y"), h.Var("z")
        f, g = h.Func("f"), h.Func("g")
        f[x, y, z] = x + y + z
        f.compute_root()
        g[x, y, z] = 1
        r = h.RDom([(5, 10), (5, 10), (0, 20)])
        r.where(r.x < r.y)
        r.where(r.x + 2 * r.y <= r.z)
        g[r.x, r.y, r.z] += f[r.x, r.y, r.z]
        if scheduled:
            u, v, ui, vi, t = h.Var("u"), h.Var("v"), h.Var("ui"), h.Var("vi"), h.Var("t")
            intm = g.update(0).rfactor([(r.y, u), (r.x, v)])
            intm.compute_root()
            intm.tile(u, v, ui, vi, 2, 2).fuse(u, v, t).parallel(t)
            intm.update(0).vectorize(r.z, 2)
        return g

    (im,) = _agree(build, [20, 20, 20])
    x, y, z = _grid(20, 20, 20)
    inside = _in(x, 5, 10) & _in(y, 5, 10) & (x < y) & (x + 2 * y <= z)
    np.testing.assert_array_equal(im, np.where(inside, x + y + z + 1, 1))


def test_histogram_rfactor():
    """A histogram over an image's RDom, rfactored over rows into an intermediate parallel over
    them; buckets 10 to 19 read back through a consumer."""
    data = np.random.default_rng(0).integers(0, 256, (32, 48)).astype(np.float32)

    def build(h, scheduled):
        x = h.Var("x")
        inp = h.Buffer(data)
        hist, g = h.Func("hist"), h.Func("g")
        r = h.RDom(inp)
        hist[x] = 0
        hist[h.clamp(h.i32(inp[r.x, r.y]), 0, 255)] += 1
        hist.compute_root()
        g[x] = hist[x + 10]
        if scheduled:
            u = h.Var("u")
            intm = hist.update(0).rfactor(r.y, u)
            intm.compute_root()
            intm.update(0).parallel(u)
        return g

    (im,) = _agree(build, [10])
    np.testing.assert_array_equal(im, np.bincount(data.astype(np.int64).ravel(), minlength=256)[10:20])


def test_parallel_dot_product_rfactor():
    """A dot product rfactored twice: over the outer pieces (computed in parallel), then, inside
    each, over the innermost eighths (vectorized)."""
    def build(h, scheduled):
        x = h.Var("x")
        a, b, dot = h.Func("a"), h.Func("b"), h.Func("dot")
        a[x] = x
        b[x] = x + 2
        a.compute_root()
        b.compute_root()
        r = h.RDom([(0, 1024)])
        dot[()] = 0
        dot[()] += a[r.x] * b[r.x]
        if scheduled:
            rxo, rxi, rxio, rxii = h.RVar("rxo"), h.RVar("rxi"), h.RVar("rxio"), h.RVar("rxii")
            u, v = h.Var("u"), h.Var("v")
            dot.update(0).split(r.x, rxo, rxi, 128)
            intm1 = dot.update(0).rfactor(rxo, u)
            intm1.update(0).split(rxi, rxio, rxii, 8)
            intm2 = intm1.update(0).rfactor(rxii, v)
            intm2.compute_at(intm1, u)
            intm2.update(0).vectorize(v, 8)
            intm1.compute_root()
            intm1.update(0).parallel(u)
        return dot

    (im,) = _agree(build, [])
    i = np.arange(1024, dtype=np.int64)
    assert int(im[()]) == int(np.sum(i * (i + 2)))


# ------------------------------------------------------------------------------ Tuples
def _tuple_reduction(h, partial):
    """g(x, y) = (1, 3), then over r = [10, 30) x [30, 70): the first element += f0 + 3, the second
    min'ed with f1 (or, when partial, left as it is)."""
    x, y = h.Var("x"), h.Var("y")
    f, g = h.Func("f"), h.Func("g")
    f[x, y] = h.Tuple([x + y, x - y])
    f.compute_root()
    r = h.RDom([(10, 20), (30, 40)])
    g[x, y] = h.Tuple([1, 3])
    second = g[x, y][1] if partial else h.min(g[x, y][1], f[r.x, r.y][1])
    g[x, y] = h.Tuple([g[x, y][0] + f[r.x, r.y][0] + 3, second])
    return g, r


def _tuple_schedule(h, g, r):
    """rfactor over r.y, then the intermediate's outer half of r.x rfactored again, with tiles."""
    x, y, xi, yi = h.Var("x"), h.Var("y"), h.Var("xi"), h.Var("yi")
    g.reorder(y, x)
    g.update(0).tile(x, y, xi, yi, 4, 4)
    u = h.Var("u")
    intm1 = g.update(0).rfactor(r.y, u)
    rxo, rxi = h.RVar("rxo"), h.RVar("rxi")
    intm1.tile(x, y, xi, yi, 4, 4)
    intm1.update(0).split(r.x, rxo, rxi, 2)
    intm2 = intm1.update(0).rfactor(rxo, h.Var("v"))
    intm2.compute_at(intm1, rxo)
    intm1.update(0).parallel(u, 2)
    intm1.compute_root()


@pytest.mark.parametrize("partial", [False, True], ids=["tuple", "tuple_partial_reduction"])
def test_tuple_rfactor(partial):
    """tuple_rfactor_test and tuple_partial_reduction_rfactor_test: a Tuple reduction (a sum and a
    min, or a sum and an element the update leaves alone) rfactored twice."""
    def build(h, scheduled):
        g, r = _tuple_reduction(h, partial)
        if scheduled:
            _tuple_schedule(h, g, r)
        return g

    first, second = _agree(build, [80, 80])
    rx, ry = np.arange(10, 30)[:, None], np.arange(30, 70)[None, :]
    assert (first == 1 + int(np.sum(rx + ry + 3))).all()
    assert (second == (3 if partial else min(3, int(np.min(rx - ry))))).all()


def test_tuple_specialize_rdom_predicate_rfactor():
    """A Tuple product and sum over a predicated RDom, rfactored under specializations on an int
    and a bool Param (and again, generically), for all four settings of the Params."""
    def build(h, scheduled, p_value, q_value):
        x, y, z = h.Var("x"), h.Var("y"), h.Var("z")
        f, g = h.Func("f"), h.Func("g")
        f[x, y, z] = h.Tuple([x + y + z, x - y + z])
        f.compute_root()
        r = h.RDom([(5, 20), (5, 20), (5, 20)])
        r.where(r.x * r.x + r.z * r.z <= 200)
        r.where(r.y * r.z + r.z * r.z > 100)
        g[x, y] = h.Tuple([1, 3])
        g[x, y] = h.Tuple([g[x, y][0] * f[r.x, r.y, r.z][0], g[x, y][1] + 2 * f[r.x, r.y, r.z][1]])
        p, q = h.Param(h.Int(32), "p"), h.Param(h.Bool(), "q")
        p.set(p_value)
        q.set(q_value)
        if scheduled:
            u, v, w, t = h.Var("u"), h.Var("v"), h.Var("w"), h.Var("t")
            intm1 = g.update(0).specialize(p >= 5).rfactor([(r.y, v), (r.z, w)])
            intm1.update(0).parallel(v, 4)
            intm1.compute_root()
            rxo, rxi = h.RVar("rxo"), h.RVar("rxi")
            intm1.update(0).split(r.x, rxo, rxi, 2)
            intm1.update(0).specialize(q).rfactor(rxi, t).compute_root()
            intm1.update(0).specialize(h.logical_not(q)).rfactor(rxo, t).compute_root()
            intm4 = g.update(0).rfactor([(r.x, u), (r.z, w)]).compute_root()
            intm4.update(0).vectorize(u)
        return g

    rx, ry, rz = np.meshgrid(np.arange(5, 25), np.arange(5, 25), np.arange(5, 25), indexing="ij")
    inside = (rx * rx + rz * rz <= 200) & (ry * rz + rz * rz > 100)
    product = np.prod((rx + ry + rz)[inside].astype(np.int32), dtype=np.int32)
    total = 3 + 2 * int(np.sum((rx - ry + rz)[inside]))
    for p_value in (10, 0):
        for q_value in (True, False):
            first, second = _agree(lambda h, s, p=p_value, q=q_value: build(h, s, p, q), [10, 10])
            assert (first == product).all() and (second == total).all()


# ------------------------------------------------------------------------------ bounds and tiles
def test_check_allocation_bound(capfd):
    """f computed at the outer half of g's split r.x and the rfactor intermediate computed there
    too: each realization of f (read from trace_realizations' printout) covers just the values one
    outer iteration reads, two (one in the last), the same boxes Halide 21 realizes."""
    def build(h, scheduled):
        x, u = h.Var("x"), h.Var("u")
        f, g = h.Func("f"), h.Func("g")
        r = h.RDom([(0, 31)])
        f[x] = x
        g[x] = 1
        g[r.x] += f[r.x]
        if scheduled:
            rxo, rxi = h.RVar("rxo"), h.RVar("rxi")
            g.update(0).split(r.x, rxo, rxi, 2)
            f.compute_at(g, rxo)
            g.update(0).rfactor([(rxo, u)]).compute_at(g, rxo)
            f.trace_realizations()
        return g

    boxes = {}
    for h in (hl, halide):
        capfd.readouterr()
        im = np.asarray(build(h, True).realize([23]))
        out = capfd.readouterr()
        np.testing.assert_array_equal(im, np.arange(23) + 1)
        found = re.findall(r"^Begin realization f(?:\$\d+)?\.0\((-?\d+), (-?\d+)\)$", out.out + out.err, re.M)
        boxes[h.__name__] = [(int(lo), int(extent)) for lo, extent in found]
    assert set(boxes["pyhalide"]) == {(lo, 2) for lo in range(0, 30, 2)} | {(30, 1)}
    assert boxes["pyhalide"] == boxes["halide"]  # the same boxes in the same order (once per x of g)
    np.testing.assert_array_equal(reference.realize(build(hl, False), [23])[0], np.arange(23) + 1)


def test_rfactor_tile_reorder():
    """A histogram over an 8x8 image whose update is rfactored over both RVars, the intermediate's
    update tiled and parallel over both tile indices."""
    data = np.random.default_rng(1).integers(0, 256, (8, 8)).astype(np.uint8)

    def build(h, scheduled):
        x = h.Var("x")
        inp = h.Buffer(data)
        f = h.Func("f")
        r = h.RDom([(0, 8), (0, 8)])
        f[x] = 0
        f[inp[r.x, r.y] % 8] += 1
        if scheduled:
            u, v, ui, vi = h.Var("u"), h.Var("v"), h.Var("ui"), h.Var("vi")
            (f.update(0).rfactor([(r.x, u), (r.y, v)]).compute_root()
             .update(0).tile(u, v, ui, vi, 4, 4).parallel(u).parallel(v))
        return f

    (im,) = _agree(build, [8])
    np.testing.assert_array_equal(im, np.bincount(data.ravel() % 8, minlength=8))


def test_inlined_rfactor_with_disappearing_rvar():
    """A sum whose value reads the RDom only through an inlined Func (g(r, x) = in1(x)), split with
    GuardWithIf and rfactored over the outer piece, compiles and sums. (Halide's case inlines g
    with internal APIs, beyond Python's reach; here lowering inlines it.)"""
    data = np.arange(5, dtype=np.float32) * 0.5 + 1

    def build(h, scheduled):
        in1 = h.ImageParam(h.Float(32), 1, "in1")
        in1.set(h.Buffer(data))
        x, rv, u = h.Var("x"), h.Var("r"), h.Var("u")
        f, g, sum1 = h.Func("f"), h.Func("g"), h.Func("sum1")
        rdom = h.RDom([(0, 16)])
        g[rv, x] = in1[x]
        sum1[x] = h.f32(0)
        sum1[x] += g[rdom, x]
        f[x] = sum1[x]
        if scheduled:
            (sum1.compute_root().update(0)
             .split(rdom.x, h.RVar("ro"), h.RVar("ri"), 8, h.TailStrategy.GuardWithIf)
             .rfactor([(h.RVar("ro"), u)]).compute_root())
            f.compile_jit()
        return f

    (im,) = _agree(build, [5])
    np.testing.assert_array_equal(im, 16 * data)


def test_rfactor_precise_bounds():
    """A sum over a 10x10 input tiled 4x4 (so the tiles run past the edge, guarded) and rfactored
    over the inner RVars of the tile (Halide issue 8600)."""
    data = np.random.default_rng(2).integers(0, 256, (10, 10)).astype(np.uint8)

    def build(h, scheduled):
        x, y = h.Var("x"), h.Var("y")
        inp = h.Buffer(data)
        r = h.RDom([(0, 10), (0, 10)])
        f = h.Func("f")
        f[()] = 0
        f[()] += h.i32(inp[r.x, r.y])
        if scheduled:
            rxo, rxi, ryo, ryi = h.RVar("rxo"), h.RVar("rxi"), h.RVar("ryo"), h.RVar("ryi")
            intm = f.update(0).tile(r.x, r.y, rxo, ryo, rxi, ryi, 4, 4).rfactor([(rxi, x), (ryi, y)])
            intm.compute_root()
        return f

    (im,) = _agree(build, [])
    assert int(im[()]) == int(data.astype(np.int64).sum())


# ------------------------------------------------------------------------------ NaN-aware max
_NAN_ROWS = np.array([
    [np.nan, 0.29, 0.19, 0.68, 0.44, 0.40, 0.39, 0.53, 0.23, 0.21, 0.85, 0.19, 0.37, 0.03, 0.14, 0.64],
    [0.98, 0.65, 0.86, 0.16, 0.14, 0.91, 0.74, 0.99, 0.91, 0.01, 0.11, 0.59, 0.05, 0.90, 0.93, np.nan],
    [0.84, 0.14, 0.99, 0.19, 0.63, 0.12, 0.51, 0.67, np.nan, 0.34, 0.89, 0.93, 0.72, 0.69, 0.58, 0.63],
    [0.44, 0.12, 0.00, 0.30, 0.80, 0.88, 0.95, 0.12, 0.90, 0.99, 0.67, 0.71, 0.35, 0.67, 0.18, 0.93],
], np.float32)


@pytest.mark.parametrize("logical", [False, True], ids=["bitwise_or", "logical_or"])
def test_isnan_max_rfactor(logical):
    """A max that keeps a NaN once it has seen one (select(acc > v | is_nan(acc), acc, v)), with
    the condition joined by | or by logical or, split by 8 and rfactored over the inner piece,
    under StrictFloat. (Halide 21's Python has no logical_or; its | on bools builds the same Or.)"""
    def build(h, scheduled):
        either = getattr(h, "logical_or", operator.or_) if logical else operator.or_
        inp = h.ImageParam(h.Float(32), 2, "in")
        inp.set(h.Buffer(_NAN_ROWS))
        r = h.RDom([(0, 16)])
        y = h.Var("y")
        reduce = h.Func("reduce")
        reduce[y] = h.Float(32).min()
        acc, value = reduce[y], h.f32(inp[r.x, y])
        reduce[y] = h.select(either(acc > value, h.is_nan(acc)), acc, value)
        if scheduled:
            reduce.update(0).split(r.x, r.x, h.RVar("ri"), 8).rfactor(h.RVar("ri"), h.Var("u"))
        return reduce

    def strict(h):
        return h.get_jit_target_from_environment().with_feature(h.TargetFeature.StrictFloat)

    (im,) = _agree(build, [4], target=strict)
    np.testing.assert_array_equal(im, [np.nan, np.nan, np.nan, np.float32(0.99)])
