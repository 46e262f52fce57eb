"""hl.scatter and hl.gather: update definitions that store several values to several sites.

Ports Halide's test/correctness/multiple_scatter.cpp (each of its cases) and scatter.cpp (a
reduction whose sites an RDom scatters: the bounds of its stages); Halide's Python bindings have
no test of scatter/gather. Results are checked against numpy closed forms, pyhalide's reference
evaluator and, where the same algorithm runs there cheaply, real Halide 21 (`import halide`: the
builders below take the module, so one function writes the algorithm for both). Then what Halide
accepts and refuses (errors name the Func, or the place a scatter is out of place), the bounds
of scattering stages, schedules (vectorized, unrolled, parallel, atomic, GPU), printing and
schedule replay, and a property: random permutations scattered, against numpy.
"""

from __future__ import annotations

import halide
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyhalide as hl
from pyhalide import reference

CUDA = hl.Target("host-cuda")

# The sorting network of multiple_scatter.cpp: 19 compare-and-swap links that sort 8 values.
NETWORK = np.array([[0, 1], [2, 3], [4, 5], [6, 7], [0, 2], [1, 3], [4, 6], [5, 7], [1, 2], [5, 6], [0, 4],
                    [3, 7], [1, 5], [2, 6], [1, 4], [3, 6], [2, 4], [3, 5], [3, 4]], np.int32)


def _realized(f, sizes, target=None) -> list[np.ndarray]:
    out = f.realize(sizes, target) if target is not None else f.realize(sizes)
    buffers = [out] if isinstance(out, hl.Buffer | halide.Buffer) else list(out)
    return [np.asarray(b) for b in buffers]


def _agree(build, sizes) -> list[np.ndarray]:
    """build(module) realized by pyhalide, by its reference evaluator and by Halide: all equal.
    Returns pyhalide's arrays (one per Tuple element)."""
    ours = _realized(build(hl), sizes)
    others = (("reference", reference.realize(build(hl), sizes)), ("Halide", _realized(build(halide), sizes)))
    for name, other in others:
        assert len(other) == len(ours)
        for got, want in zip(ours, other):
            np.testing.assert_array_equal(got, want, err_msg=f"pyhalide vs {name}")
    return ours


# ------------------------------------------------------------------------------ multiple_scatter
def _sorting_network_rdom(h, data):
    """Halide's sorted1: the network's links are an RDom over a buffer of index pairs, so the
    sites are data-dependent; unsafe_promise_clamped says they lie in [0, 7]."""
    x, y = h.Var("x"), h.Var("y")
    network, inp = h.Buffer(NETWORK), h.Buffer(data)
    f = h.Func("sorted1")
    f[x, y] = inp[x, y]
    r = h.RDom([(0, len(NETWORK))])
    lo = h.unsafe_promise_clamped(network[0, r], 0, 7)
    hi = h.unsafe_promise_clamped(network[1, r], 0, 7)
    f[x, h.scatter([lo, hi])] = h.gather([h.min(f[x, lo], f[x, hi]), h.max(f[x, lo], f[x, hi])])
    f.vectorize(x, 8).update().vectorize(x, 8)
    return f


def _sorting_network_unrolled(h, data, vectorize: bool = True):
    """Halide's sorted2: the whole network as one update of eight sites, each value a min/max
    tree over the column's eight reads (joint CSE shares them); vectorized as Halide's test
    schedules it, or left unscheduled."""
    x, y = h.Var("x"), h.Var("y")
    inp = h.Buffer(data)
    f = h.Func("sorted2")
    f[x, y] = inp[x, y]
    values = [f[x, i] for i in range(8)]
    for lo, hi in NETWORK:
        values[lo], values[hi] = h.min(values[lo], values[hi]), h.max(values[lo], values[hi])
    f[x, h.scatter(list(range(8)))] = h.gather(values)
    if vectorize:
        f.vectorize(x, 8).update().vectorize(x, 8)
    return f


def _columns(width: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.integers(-2**31, 2**31, size=(8, width), dtype=np.int64).astype(np.int32)


def test_sorting_network_over_an_rdom():
    """Ports multiple_scatter's first case: 128 columns of 8 values sorted by the network run as
    an RDom over its links (the sites from a buffer, bounded by unsafe_promise_clamped), pure and
    update vectorized by 8. Each column is numpy's sort of it; Halide and the reference agree."""
    data = _columns(128)
    (got,) = _agree(lambda h: _sorting_network_rdom(h, data), [128, 8])
    np.testing.assert_array_equal(got, np.sort(data, axis=0))


def test_sorting_network_fully_unrolled():
    """Ports multiple_scatter's second case: the network unrolled into one update that scatters
    to all eight rows at once (one big multi-scatter, "asking a lot of CSE"), vectorized by 8.
    The same sorted columns; Halide and the reference agree."""
    data = _columns(128)
    (got,) = _agree(lambda h: _sorting_network_unrolled(h, data), [128, 8])
    np.testing.assert_array_equal(got, np.sort(data, axis=0))


def _rotation(h, data):
    """Halide's in-place rotation: each RDom point moves the four points of one orbit of a
    quarter turn at once (all four read before any is written)."""
    sz = data.shape[0]
    x, y = h.Var("x"), h.Var("y")
    inp = h.Buffer(data)
    rot = h.Func("rot")
    rot[x, y] = inp[x, y]
    r = h.RDom([(0, (sz + 1) // 2), (0, sz // 2)])
    src_x = [r.x, sz - 1 - r.y, sz - 1 - r.x, r.y]
    src_y = [r.y, r.x, sz - 1 - r.y, sz - 1 - r.x]
    dst_x, dst_y = src_x[1:] + src_x[:1], src_y[1:] + src_y[:1]
    rot[h.scatter(dst_x), h.scatter(dst_y)] = rot[h.gather(src_x), h.gather(src_y)]
    return rot


def test_rotate_a_square_in_place():
    """Ports multiple_scatter's square rotation: a 17x17 uint8 image rotated a quarter turn in
    place, four sites per iteration; output(x, y) = input(y, 16 - x)."""
    sz = 17
    data = np.random.default_rng(1).integers(0, 256, size=(sz, sz), dtype=np.uint8)
    (got,) = _agree(lambda h: _rotation(h, data), [sz, sz])
    yy, xx = np.mgrid[0:sz, 0:sz]
    np.testing.assert_array_equal(got, data[sz - 1 - xx, yy])


def test_complex_product_as_an_atomic_parallel_scatter():
    """Ports multiple_scatter's complex multiplication modulo 256, the real and imaginary parts
    two sites of one Func: the update scatters both from one gather, atomic(True) and parallel
    over the RDom (pyhalide runs the loads and stores under a lock). Inputs have odd real and
    even imaginary parts, so the product does not vanish modulo 256 (Halide's random inputs make
    it 0 + 0i, which any result matches); it equals the serial product. (Halide 21 drops the
    first store of such an atomic scatter and gets it wrong: it is not the oracle here.)"""
    rng = np.random.default_rng(2)
    data = (rng.integers(0, 128, size=(100, 2)) * 2 + [1, 0]).astype(np.uint8)
    x = hl.Var("x")
    inp = hl.Buffer(data)

    def product(parallel: bool):
        prod = hl.Func("prod")
        r = hl.RDom([(0, 100)])
        prod[x] = hl.cast(hl.UInt(8), hl.mux(x, [1, 0]))
        prod[hl.scatter([0, 1])] = hl.gather([prod[0] * inp[0, r] - prod[1] * inp[1, r],
                                              prod[0] * inp[1, r] + prod[1] * inp[0, r]])
        if parallel:
            prod.update().atomic(True).parallel(r)
        return prod

    re, im = 1, 0
    for a, b in data.astype(int):
        re, im = (re * a - im * b) % 256, (re * b + im * a) % 256
    assert (re, im) != (0, 0)
    np.testing.assert_array_equal(_realized(product(False), [2])[0], [re, im])
    np.testing.assert_array_equal(reference.realize(product(False), [2])[0], [re, im])
    for _ in range(3):  # (a race would show as a different result from run to run)
        np.testing.assert_array_equal(_realized(product(True), [2])[0], [re, im])


def _bubble_sort(h):
    """Halide's lexicographic bubble sort of a Tuple-valued Func: the RDom's predicate says
    which neighbours to swap, and the swap is one scatter of a Tuple gathered from both."""
    x = h.Var("x")
    f = h.Func("f")
    f[x] = (13 - (x % 10), h.cast(h.UInt(8), x * 17))
    r = h.RDom([(0, 99), (0, 99)])
    r.where(r.x < 99 - r.y)
    a, b = f[r.x], f[r.x + 1]
    r.where((a[0] > b[0]) | ((a[0] == b[0]) & (a[1] > b[1])))
    f[h.scatter([r.x, r.x + 1])] = f[h.gather([r.x + 1, r.x])]
    return f


def test_bubble_sort_of_tuples():
    """Ports multiple_scatter's bubble sort: 100 (int, uint8) pairs swapped by a scatter of a
    Tuple where the predicate finds them out of order; the result is the pairs sorted."""
    first, second = _agree(_bubble_sort, [100])
    i = np.arange(100)
    want = sorted(zip((13 - i % 10).tolist(), ((i * 17) % 256).tolist()))
    assert list(zip(first.tolist(), second.tolist())) == want


def test_scatter_without_gather_broadcasts():
    """Ports multiple_scatter's scatter without a gather: f(scatter(0, 1, 2, 3)) = 5 stores the
    one value at four sites (over 5 points: 5 5 5 5 0)."""
    def build(h):
        x = h.Var("x")
        f = h.Func("f")
        f[x] = 0
        f[h.scatter([0, 1, 2, 3])] = 5
        return f

    np.testing.assert_array_equal(_agree(build, [5])[0], [5, 5, 5, 5, 0])


def test_gather_without_scatter_keeps_the_last():
    """Ports multiple_scatter's gather without a scatter: f(3) = gather(1, 9) stores both at one
    site, left to right, so 9 is what remains."""
    def build(h):
        x = h.Var("x")
        f = h.Func("f")
        f[x] = 0
        f[3] = h.gather([1, 9])
        return f

    np.testing.assert_array_equal(_agree(build, [5])[0], [0, 0, 0, 9, 0])


# ------------------------------------------------------------------------------ scatter.cpp
def test_scatter_cpp_bounds_of_an_rdom_scatter():
    """Ports scatter.cpp: f(r, y) = f(r - 1, y) + 100 over r in [-10, 10), read by g(x, y) =
    f(x + 5, y + 5) over 10x1: the pure step must cover what the update reads (r - 1 from -11)
    and g reads, the update what g reads. g(i) = 1617 + 100 i for i < 5, else 17."""
    def build(h):
        x, y = h.Var("x"), h.Var("y")
        f, g = h.Func("f"), h.Func("g")
        r = h.RDom([(-10, 20)])
        f[x, y] = 17
        f[r, y] = f[r - 1, y] + 100
        g[x, y] = f[x + 5, y + 5]
        f.compute_root()
        return g

    (got,) = _agree(build, [10, 1])
    np.testing.assert_array_equal(got[0], [1617 + 100 * i if i < 5 else 17 for i in range(10)])


# ------------------------------------------------------------------------------ semantics
def test_a_swap_reads_both_values_before_storing():
    """f[scatter(1, 2)] = f[gather(2, 1)] swaps: both sites are read before either is written."""
    def build(h):
        x = h.Var("x")
        f = h.Func("f")
        f[x] = x
        f[h.scatter([1, 2])] = f[h.gather([2, 1])]
        return f

    np.testing.assert_array_equal(_agree(build, [4])[0], [0, 2, 1, 3])


def test_every_element_reads_the_values_before_the_iteration():
    """f[x] = f[x] + gather(1, 2) computes both sums from the old f(x) (the second store keeps
    0 + 2, not 0 + 1 + 2); scatter(x + 1, x) with gather(10, 20) at the same pure point."""
    def build(h):
        x = h.Var("x")
        f = h.Func("f")
        f[x] = 0
        f[x] = f[x] + h.gather([1, 2])
        return f

    np.testing.assert_array_equal(_agree(build, [4])[0], [2, 2, 2, 2])


def test_gathers_in_a_pure_definition_and_through_inlining():
    """A pure definition's gather stores each element at the one site (its Vars): the last
    remains, also inside a call's argument (g[x + gather(0, 1)] is g[x + 1]), and through a
    Func inlined into another (Halide's results)."""
    def build(h):
        x = h.Var("x")
        g, f, out = h.Func("g"), h.Func("f"), h.Func("out")
        g[x] = h.gather([x, x * 3])
        f[x] = g[x + h.gather([0, 1])] * 10
        out[x] = f[x] + g[x]
        f.compute_root()
        return out

    np.testing.assert_array_equal(_agree(build, [4])[0], [(3 * (i + 1)) * 10 + 3 * i for i in range(4)])


def test_an_inlined_gather_keeps_its_last_element_under_any_schedule():
    """g(x) = gather(1, 2) read by an update that scatters two sites: g is 2 everywhere, inlined
    or computed at root, so both sites get 12. (Halide pairs an inlined g's elements with the
    scatter's, giving 11 and 12, and 12 and 12 only with g computed at root: pyhalide's result
    does not depend on the schedule.)"""
    def build(h, root: bool):
        x = h.Var("x")
        g, f = h.Func("g"), h.Func("f")
        g[x] = h.gather([h.Expr(1), h.Expr(2)])
        f[x] = 0
        f[h.scatter([0, 1])] = g[0] + 10
        if root:
            g.compute_root()
        return f

    want = _realized(build(halide, True), [3])[0]
    np.testing.assert_array_equal(want, [12, 12, 0])
    for root in (False, True):
        np.testing.assert_array_equal(_realized(build(hl, root), [3])[0], want)
        np.testing.assert_array_equal(reference.realize(build(hl, root), [3])[0], want)


def test_scatter_of_tuples_and_broadcast_elements():
    """A Tuple-valued update with a gather per element, and one that is a plain Expr (the same
    value at every site): f(0) = (5, 7, -1), f(1) = (6, 8, -1)."""
    def build(h):
        x = h.Var("x")
        f = h.Func("f")
        f[x] = (x, x * 2, x * 3)
        f[h.scatter([0, 1])] = (h.gather([5, 6]), h.gather([7, 8]), -1)
        return f

    a, b, c = _agree(build, [4])
    np.testing.assert_array_equal(a, [5, 6, 2, 3])
    np.testing.assert_array_equal(b, [7, 8, 4, 6])
    np.testing.assert_array_equal(c, [-1, -1, 6, 9])


def test_scattered_sites_in_several_dimensions_with_select():
    """Scatters combine with arithmetic and select element by element, in two dimensions:
    f(x + scatter(1, 0), y + scatter(0, 2)) = 2 * gather(x, y) over an RDom, with a select of
    gathers choosing what each site gets."""
    def build(h):
        x, y = h.Var("x"), h.Var("y")
        f = h.Func("f")
        f[x, y] = x + 10 * y
        r = h.RDom([(0, 3), (0, 2)])
        f[r.x + h.scatter([1, 0]), r.y + h.scatter([0, 2])] = 2 * h.select(r.x > 0, h.gather([r.x, r.y]),
                                                                            h.gather([-r.x, -r.y]))
        return f

    (got,) = _agree(build, [5, 5])
    want = np.add.outer(10 * np.arange(5), np.arange(5))
    for ry in range(2):
        for rx in range(3):
            want[ry, rx + 1] = 2 * (rx if rx > 0 else -rx)
            want[ry + 2, rx] = 2 * (ry if rx > 0 else -ry)
    np.testing.assert_array_equal(got, want)


def test_the_footprint_covers_every_scattered_site_and_gathered_read():
    """Bounds inference counts each element: f computed at root for g over [0, 10) is computed
    where the update reads it (f(20), f(-7)) and written where it scatters (f(-3), f(12)); g
    reads f(-3) = 20 and f(12) = -7 when realized over [-5, 15)."""
    def build(h):
        x = h.Var("x")
        f, g = h.Func("f"), h.Func("g")
        f[x] = x
        f[h.scatter([-3, 12])] = h.gather([f[20], f[-7]])
        g[x] = f[x]
        f.compute_root()
        return g

    g = build(hl)
    out = hl.Buffer(hl.Int(32), [20])
    out.set_min([-5])
    g.realize(out)
    want = np.arange(-5, 15)
    want[-3 + 5], want[12 + 5] = 20, -7
    np.testing.assert_array_equal(np.asarray(out), want)
    np.testing.assert_array_equal(reference.realize(build(hl), [20], [-5])[0], want)


# ------------------------------------------------------------------------------ schedules
def test_scatters_under_vector_unrolled_and_parallel_loops():
    """One scattering update (a column's neighbours swapped along an RDom, each site also
    shifted by the lane's x) under each kind of loop: the pure Var vectorized (sites that vary
    by lane), split with a guarded tail, parallel, the RDom unrolled. Each agrees with the
    reference and with Halide's unscheduled result."""
    def build(h, schedule):
        x, y, xo, xi = h.Var("x"), h.Var("y"), h.Var("xo"), h.Var("xi")
        f = h.Func("f")
        f[x, y] = x * 7 + y * y
        r = h.RDom([(0, 5)])
        f[x, h.scatter([r, (r + x) % 6])] = h.gather([f[x, (r + x) % 6], f[x, r]])
        schedule(f.update(), x, xo, xi, r)
        return f

    schedules = [
        lambda s, x, xo, xi, r: s.vectorize(x, 8),
        lambda s, x, xo, xi, r: s.split(x, xo, xi, 8, hl.TailStrategy.GuardWithIf).vectorize(xi),
        lambda s, x, xo, xi, r: s.parallel(x),
        lambda s, x, xo, xi, r: s.unroll(r).parallel(x, 4),
        lambda s, x, xo, xi, r: s.reorder(x, r).vectorize(x, 4),
    ]
    want = _realized(build(halide, lambda *a: None), [21, 6])[0]
    np.testing.assert_array_equal(reference.realize(build(hl, lambda *a: None), [21, 6])[0], want)
    for schedule in schedules:
        np.testing.assert_array_equal(_realized(build(hl, schedule), [21, 6])[0], want)


def test_a_scattering_producer_computed_inside_its_consumer():
    """The sorting network as a producer computed per tile of its consumer (compute_at): each
    tile's columns sorted, the region each computes covering all eight scattered rows."""
    data = _columns(64)
    x, y, xo, xi = hl.vars("x y xo xi")
    f = _sorting_network_unrolled(hl, data)
    out = hl.Func("out")
    out[x, y] = f[x, 7 - y] * 2
    out.split(x, xo, xi, 16)
    f.compute_at(out, xo)
    np.testing.assert_array_equal(np.asarray(out.realize([64, 8])), np.sort(data, axis=0)[::-1] * 2)


@settings(max_examples=12, deadline=None)
@given(data=st.data(), k=st.integers(1, 4), unroll=st.booleans())
def test_random_sites_scattered_k_at_a_time(data, k, unroll):
    """Property: values scattered k per iteration to sites from a buffer (a permutation, or any
    sites, repeats kept by the last store) are where numpy's in-order stores put them."""
    count = data.draw(st.integers(1, 12), label="iterations")
    n = count * k
    if data.draw(st.booleans(), label="permutation"):
        sites = np.random.default_rng(data.draw(st.integers(0, 2**16))).permutation(n).astype(np.int32)
    else:
        sites = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=n, max_size=n)), np.int32)
    values = np.arange(100, 100 + n, dtype=np.int32)
    x = hl.Var("x")
    site_in, value_in = hl.ImageParam(hl.Int(32), 1, "sites"), hl.ImageParam(hl.Int(32), 1, "values")
    iterations = hl.Param(hl.Int(32), "iterations", count)
    r = hl.RDom([(0, iterations)])
    f = hl.Func("f")
    f[x] = -1
    f[hl.scatter([hl.unsafe_promise_clamped(site_in[r * k + j], 0, iterations * k - 1) for j in range(k)])] = \
        hl.gather([value_in[r * k + j] for j in range(k)])
    if unroll:
        f.update().unroll(r, 2)
    site_in.set(hl.Buffer(sites))
    value_in.set(hl.Buffer(values))
    want = np.full(n, -1, np.int32)
    for site, value in zip(sites, values):
        want[site] = value
    np.testing.assert_array_equal(np.asarray(f.realize([n])), want)
    np.testing.assert_array_equal(reference.realize(f, [n])[0], want)


def test_scatter_on_the_gpu(device):
    """The fully unrolled sorting network with both stages gpu_tile'd: the eight rows of each
    column stored by one GPU thread, on each device (Halide allows it: the scatter is plain
    stores in the kernel)."""
    data = _columns(64)
    f = _sorting_network_unrolled(hl, data, vectorize=False)
    x, xi = f.args()[0], hl.Var("xi")
    f.gpu_tile(x, xi, 16).update().gpu_tile(x, xi, 16)
    got = f.realize([64, 8], CUDA)
    got.copy_to_host()
    np.testing.assert_array_equal(np.asarray(got), np.sort(data, axis=0))


def test_an_atomic_scatter_inside_a_gpu_kernel_is_refused(device):
    """An atomic() update that scatters needs a lock, which a GPU kernel lacks: refused naming
    the stage, on each device (Halide's PTX backend refuses mutex atomics too)."""
    x, r_o, r_i = hl.Var("x"), hl.RVar("ro"), hl.RVar("ri")
    f = hl.Func("acc")
    f[x] = 0
    r = hl.RDom([(0, 64)])
    f[hl.scatter([0, 1])] = f[hl.gather([0, 1])] + hl.gather([r, 2 * r])
    f.update().atomic().split(r, r_o, r_i, 16).gpu_blocks(r_o).gpu_threads(r_i)
    with pytest.raises(hl.HalideError, match=r"acc\.s1 is atomic\(\) and stores several values"):
        f.realize([2], CUDA)


# ------------------------------------------------------------------------------ what is refused
def _refusal(build, match: str, halide_too: bool = True):
    """build(pyhalide) raises a HalideError matching `match`; with halide_too, so does Halide's
    (at definition or when realized)."""
    with pytest.raises(hl.HalideError, match=match):
        f = build(hl)
        f.realize([4])
    if halide_too:
        with pytest.raises(halide.HalideError):
            f = build(halide)
            f.realize([4])


def test_scatters_and_gathers_of_different_sizes_are_refused():
    """gather(1, 2, 3) for scatter(0, 1): refused naming the Func and both sizes (Halide refuses
    it when lowering: "Expression tuples of mismatched sizes")."""
    def build(h):
        x = h.Var("x")
        f = h.Func("mismatched")
        f[x] = 0
        f[h.scatter([0, 1])] = h.gather([1, 2, 3])
        return f

    _refusal(build, r"update definition 0 of Func mismatched: scatters and gathers of different sizes \(2 vs 3\)")


def test_a_nested_scatter_is_refused():
    """A scatter inside a scatter's element: refused naming the Func (as Halide)."""
    def build(h):
        x = h.Var("x")
        f = h.Func("nested")
        f[x] = 0
        f[h.scatter([h.scatter([0, 1]), 2])] = 3
        return f

    _refusal(build, r"Func nested: a scatter or gather nested inside another")


def test_a_scatter_in_a_pure_definition_is_refused():
    """A pure definition's arguments are its Vars: a scatter there is refused (as Halide), and so
    is a pure Var inside an update's scatter (Halide's doc example f(scatter(x, x)) included)."""
    def pure(h):
        x = h.Var("x")
        f = h.Func("pure_scatter")
        f[h.scatter([x, x])] = 1
        return f

    def pure_var_inside(h):
        x = h.Var("x")
        f = h.Func("var_inside")
        f[x] = 0
        f[h.scatter([x, x])] = h.gather([3, 5])
        return f

    _refusal(pure, r"pure definition of Func pure_scatter: argument 1 .* is not a pure Var")
    _refusal(pure_var_inside, r"update definition 0 of Func var_inside: pure Var x must appear unadorned")


def test_scatter_gather_outside_a_definition_is_refused():
    """Only a definition's arguments and values scatter: an RDom's bounds (Halide: "used outside
    of a Func definition"), a where() predicate (Halide fails with "Unknown intrinsic"), bound()
    (as Halide) and specialize() (which Halide takes, with no meaning) are refused."""
    x = hl.Var("x")
    two = hl.gather([hl.Expr(2), hl.Expr(3)])
    with pytest.raises(hl.HalideError, match=r"outside of a Func definition \(in the extent of dimension 0 of RDom"):
        hl.RDom([(0, two)])
    r = hl.RDom([(0, 3)])
    with pytest.raises(hl.HalideError, match=r"outside of a Func definition \(in the where\(\) predicate of RDom"):
        r.where(hl.gather([r.x > 0, r.x < 2]))
    f = hl.Func("elsewhere")
    f[x] = x
    with pytest.raises(hl.HalideError, match=r"outside of a Func definition \(in Func elsewhere.bound of x\)"):
        f.bound(x, 0, two)
    with pytest.raises(hl.HalideError, match=r"outside of a Func definition \(in the specialize\(\) condition"):
        f.specialize(hl.gather([x > 0, x < 0]))

    def rdom_extent(h):
        g = h.Func("g")
        xv = h.Var("x")
        g[xv] = 0
        g[h.RDom([(0, h.gather([h.Expr(2), h.Expr(3)]))]).x] = 1
        return g

    def bound(h):
        g = h.Func("g")
        xv = h.Var("x")
        g[xv] = xv
        g.bound(xv, 0, h.gather([h.Expr(4), h.Expr(5)]))
        return g

    for build in (rdom_extent, bound):
        with pytest.raises(halide.HalideError, match="outside of a Func definition"):
            build(halide).realize([4])


def test_elements_must_share_a_type():
    """Python numbers take the Expr elements' type (gather(u8, 2) is u8); Exprs of different
    types, which Halide would reinterpret as the first one's (garbage), are refused, and so is
    a scatter of nothing (which crashes Halide)."""
    assert hl.gather([hl.u8(1), 2]).type() == hl.UInt(8)
    with pytest.raises(hl.HalideError, match=r"gather\(\) of elements of different types \(uint8, float32\)"):
        hl.gather([hl.u8(1), 2.5])
    with pytest.raises(hl.HalideError, match=r"scatter\(\) needs at least one element"):
        hl.scatter([])
    assert str(hl.scatter(1, 2)) == str(hl.scatter([1, 2])) == "scatter_gather(1, 2)"


def test_an_rvar_only_inside_a_scatter_may_not_run_in_parallel():
    """Distinct iterations of an RVar that appears only inside a scatter may write one site, so
    parallel and vectorize are refused without atomic() (as Halide). atomic() alone is refused
    too: the update is no associative reduction (Halide 21 says the same); overriding that test
    allows it (the stores then run under a lock)."""
    x = hl.Var("x")
    f = hl.Func("racy")
    f[x] = 0
    r = hl.RDom([(0, 16)])
    f[hl.scatter([r, r + 16])] = hl.gather([r, 2 * r])
    with pytest.raises(hl.HalideError, match=r"racy.*can't parallelize RVar"):
        f.update().parallel(r)
    with pytest.raises(hl.HalideError, match=r"racy.*can't vectorize RVar"):
        f.update().vectorize(r, 4)
    with pytest.raises(hl.HalideError, match=r"racy.*can't parallelize RVar .* atomic\(\) update that is not an "
                                             r"associative, commutative reduction"):
        f.update().atomic().parallel(r)
    f.update().atomic(override_associativity_test=True).parallel(r)
    want = np.concatenate([np.arange(16), 2 * np.arange(16)])
    np.testing.assert_array_equal(np.asarray(f.realize([32])), want)


def test_a_require_failing_under_a_scatters_lock_releases_it():
    """An atomic scatter's stores run under a lock: a require() in its values that fails there
    leaves the pipeline with its error and the lock released, so the next call (valid input)
    runs to the end instead of spinning on it."""
    import threading

    x = hl.Var("x")
    limit = hl.Param(hl.Int(32), "limit")
    f = hl.Func("guarded_scatter")
    f[x] = 0
    r = hl.RDom([(0, 16)])
    f[hl.scatter([r, r + 16])] = hl.gather([hl.require(r < limit, r, "r is", r), 2 * r])
    f.update().atomic(override_associativity_test=True).parallel(r)  # the sites are distinct
    limit.set(4)
    with pytest.raises(hl.HalideError, match="r is"):
        f.realize([32])
    limit.set(16)
    done = []
    worker = threading.Thread(target=lambda: done.append(np.asarray(f.realize([32]))), daemon=True)
    worker.start()
    worker.join(60)
    assert done, "the second call never returned: the lock stayed held"
    np.testing.assert_array_equal(done[0], np.concatenate([np.arange(16), 2 * np.arange(16)]))


# ------------------------------------------------------------------------------ printing and replay
def test_printing_and_schedule_replay(tmp_path):
    """A scattering update prints as Halide's scatter_gather Call (update_args/values, the
    lowered statement: one store per element after the shared loads), and its schedule goes
    through JSON and Python source onto the same algorithm built again."""
    data = _columns(32)
    f = _sorting_network_rdom(hl, data)
    assert "scatter_gather(" in str(f.update_args(0)[1])
    assert "scatter_gather(min(" in str(f.update_value(0))
    f.compile_to_lowered_stmt(str(tmp_path / "sorted.stmt"), [])
    text = (tmp_path / "sorted.stmt").read_text()
    assert "scatter_gather" not in text and text.count(f"{f.name()}[") >= 4
    assert ".update(0).vectorize(" in f.to_python_source()
    text_json = hl.Pipeline(f).schedule_to_json()
    again = _sorting_network_rdom(hl, data)
    again.reset_schedule()
    hl.Pipeline(again).apply_schedule_json(text_json)
    assert hl.Pipeline(again).schedule_to_json() == text_json
    np.testing.assert_array_equal(np.asarray(again.realize([32, 8])), np.sort(data, axis=0))


# ------------------------------------------------------------------------------ unsafe_promise_clamped
def test_unsafe_promise_clamped_bounds_a_data_dependent_site():
    """A histogram whose bins come from a buffer, promised in [0, 7] with unsafe_promise_clamped:
    bounds inference takes the promise (the sorting network above needs it), so no clamp is
    needed; an undefined bound leaves that side to the type."""
    x = hl.Var("x")
    data = np.array([3, 1, 4, 1, 5, 2, 6, 5, 3, 5], np.int32)
    b = hl.Buffer(data)
    r = hl.RDom([(0, len(data))])
    h = hl.Func("hist")
    h[x] = 0
    h[hl.unsafe_promise_clamped(b[r], 0, 7)] += 1
    np.testing.assert_array_equal(np.asarray(h.realize([8])), np.bincount(data, minlength=8))
    assert str(hl.unsafe_promise_clamped(hl.u8(x), 0, hl.Expr())) == \
        "unsafe_promise_clamped(uint8(x), (uint8)0, (uint8)255)"
