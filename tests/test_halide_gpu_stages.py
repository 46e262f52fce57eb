"""The GPU schedules of Halide's tests of stages, reductions and small image pipelines, ported
to pyhalide's CUDA backend: the `target.has_gpu_feature()` branches of
test/correctness/{reduction_non_rectangular, tuple_reduction, compute_with, multiple_outputs,
chunk, convolution, convolution_multiple_kernels, dilate3x3, median3x3, lots_of_loop_invariants,
trim_no_ops} and test/error/thread_id_outside_block_id. Each pipeline and schedule is the one
Halide's test writes, run on the serial and the emulated CUDA device (and on a GPU where there
is one), its result checked against numpy or the Halide test's closed form. Sizes are smaller
than Halide's where the emulated device (a g++ compile per pipeline, a std::thread per GPU
thread) would make them slow.

trim_no_ops counts the Selects and ifs of the lowered Stmt (compile_to_module's) with an
IRVisitor where Halide adds a custom lowering pass (C++ only). Not ported: the CPU-only parts of
these tests, among them reduction_non_rectangular's tracing checks (a JIT trace handler is C++
only; its GPU cases install none) and tuple_reduction's last case."""

from __future__ import annotations

import numpy as np
import pytest

import pyhalide as hl
from pyhalide.ir_mutator import IRVisitor

CUDA = hl.Target("host-cuda")




def _xy(w: int, h: int):
    """Coordinate arrays (x, y) of a w x h image, indexed [y, x] as pyhalide's buffers are."""
    yy, xx = np.mgrid[0:h, 0:w]
    return xx, yy


def _random_image(w: int, h: int, dtype, seed: int) -> np.ndarray:
    """A w x h image of random bytes (Halide's tests fill theirs with rand() & 0xff)."""
    return np.random.default_rng(seed).integers(0, 256, size=(h, w)).astype(dtype)


# ------------------------------------------------------------------------------ reduction_non_rectangular
def _update_at_x10(w: int, h: int) -> np.ndarray:
    """x + y, plus 3 where the RDom [0, 100)^2 where r.x < r.y and r.x == 10 reaches."""
    xx, yy = _xy(w, h)
    return xx + yy + np.where((xx == 10) & (yy < 100) & (xx < yy), 3, 0)


def test_reduction_non_rectangular_init_on_gpu_update_on_cpu(device):
    """Ports reduction_non_rectangular's init_on_gpu_update_on_cpu: the pure stage gpu_tile 4x4,
    the update over an RDom restricted by two where clauses (r.x < r.y, r.x == 10) on the CPU;
    the update's values must reach the host after the GPU wrote the initial ones."""
    x, y, xi, yi = hl.vars("x y xi yi")
    f = hl.Func("f")
    f[x, y] = x + y
    r = hl.RDom([hl.Range(0, 100), hl.Range(0, 100)])
    r.where(r.x < r.y)
    r.where(~(r.x != 10))
    f[r.x, r.y] += 3
    f.gpu_tile(x, y, xi, yi, 4, 4)
    got = np.asarray(f.realize([200, 200], CUDA))
    np.testing.assert_array_equal(got, _update_at_x10(200, 200))


def test_reduction_non_rectangular_init_on_cpu_update_on_gpu(device):
    """Ports reduction_non_rectangular's init_on_cpu_update_on_gpu: the same where-restricted
    update (its clauses in the other order) gpu_tile'd over the RVars themselves, 4x4 (the outer
    RVars keep their names), the pure stage on the CPU."""
    x, y = hl.vars("x y")
    f = hl.Func("f")
    f[x, y] = x + y
    r = hl.RDom([hl.Range(0, 100), hl.Range(0, 100)])
    r.where(~(r.x != 10))
    r.where(r.x < r.y)
    f[r.x, r.y] += 3
    rxi, ryi = hl.RVar("rxi"), hl.RVar("ryi")
    f.update(0).gpu_tile(r.x, r.y, r.x, r.y, rxi, ryi, 4, 4)
    got = np.asarray(f.realize([200, 200], CUDA))
    np.testing.assert_array_equal(got, _update_at_x10(200, 200))


def test_reduction_non_rectangular_gpu_intermediate_computed_if_param(device):
    """Ports reduction_non_rectangular's gpu_intermediate_computed_if_param: two updates over
    [0, 100)^2, one where p > 3 (adds 2g), one where p <= 3 (adds h + g); the first specialized
    on p >= 2 to a GPU tile over its RVars, h a GPU stage of its own, g and h compute_root.
    p = 5 gives 3(x + y) inside the RDom, p = 0 gives 2(x + y) + 10; x + y outside."""
    x, y, xi, yi = hl.vars("x y xi yi")
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    p = hl.Param(hl.Int(32), "p")
    g[x, y] = x + y
    h[x, y] = 10
    f[x, y] = x + y
    r1 = hl.RDom([hl.Range(0, 100), hl.Range(0, 100)])
    r1.where(p > 3)
    f[r1.x, r1.y] += 2 * g[r1.x, r1.y]
    r2 = hl.RDom([hl.Range(0, 100), hl.Range(0, 100)])
    r2.where(p <= 3)
    f[r2.x, r2.y] += h[r2.x, r2.y] + g[r2.x, r2.y]
    r1xi, r1yi = hl.RVar("r1xi"), hl.RVar("r1yi")
    f.update(0).specialize(p >= 2).gpu_tile(r1.x, r1.y, r1xi, r1yi, 4, 4)
    g.compute_root()
    h.compute_root()
    h.gpu_tile(x, y, xi, yi, 8, 8)

    xx, yy = _xy(200, 200)
    inside = (xx < 100) & (yy < 100)
    p.set(5)
    np.testing.assert_array_equal(np.asarray(f.realize([200, 200], CUDA)), np.where(inside, 3 * (xx + yy), xx + yy))
    p.set(0)
    np.testing.assert_array_equal(np.asarray(f.realize([200, 200], CUDA)),
                                  np.where(inside, 2 * (xx + yy) + 10, xx + yy))


# ------------------------------------------------------------------------------ tuple_reduction
def _tuple_size(device) -> int:
    return 1024 if device == "gpu" else 64


def test_tuple_reduction_on_gpu(device):
    """Ports tuple_reduction's first case: a Tuple (x + y, x - y) whose update swaps and doubles
    its elements (both read before either is written), pure stage and update gpu_tile 16x16
    with named block Vars. Equals ((x - y) * 2, (x + y) * 2) (Halide: 1024^2; here 64^2)."""
    x, y, xo, yo, xi, yi = hl.vars("x y xo yo xi yi")
    f = hl.Func("f")
    f[x, y] = (x + y, x - y)
    f[x, y] = (f[x, y][1] * 2, f[x, y][0] * 2)
    f.gpu_tile(x, y, xo, yo, xi, yi, 16, 16)
    f.update().gpu_tile(x, y, xo, yo, xi, yi, 16, 16)
    n = _tuple_size(device)
    a, b = f.realize([n, n], CUDA)
    xx, yy = _xy(n, n)
    np.testing.assert_array_equal(np.asarray(a), (xx - yy) * 2)
    np.testing.assert_array_equal(np.asarray(b), (xx + yy) * 2)


def _swap_and_increment(steps: int):
    x, y = hl.vars("x y")
    f = hl.Func("f")
    f[x, y] = (x + y, x - y)
    for _ in range(steps):
        f[x, y] = (f[x, y][1] + 1, f[x, y][0] + 1)
    return f, x, y


@pytest.mark.parametrize("pure_on_gpu", [True, False], ids=["pure_and_odd_updates", "odd_updates_only"])
def test_tuple_reduction_alternating_cpu_and_gpu(pure_on_gpu, device):
    """Ports tuple_reduction's second and third cases: ten updates that swap a Tuple's elements
    and add 1 to both, the odd ones gpu_tile 16x16 (and in the second case the pure stage too),
    the others left on the CPU (unscheduled): the Tuple's buffers go to the device and back at
    every step. Equals (x + y + 10, x - y + 10)."""
    f, x, y = _swap_and_increment(10)
    xo, yo, xi, yi = hl.vars("xo yo xi yi")
    if pure_on_gpu:
        f.gpu_tile(x, y, xo, yo, xi, yi, 16, 16)
    for i in range(10):
        f.update(i).unscheduled()
        if i & 1:
            f.update(i).gpu_tile(x, y, xo, yo, xi, yi, 16, 16)
    n = _tuple_size(device)
    a, b = f.realize([n, n], CUDA)
    xx, yy = _xy(n, n)
    np.testing.assert_array_equal(np.asarray(a), xx + yy + 10)
    np.testing.assert_array_equal(np.asarray(b), xx - yy + 10)


def test_tuple_reduction_each_step_reads_one_element(device):
    """Ports tuple_reduction's fourth case: each of ten updates reads only the Tuple's second
    element of the step before (so only that buffer need move between host and device), the
    even updates gpu_tile 16x16. Equals (x - y + 1008, x - y + 1010)."""
    x, y, xo, yo, xi, yi = hl.vars("x y xo yo xi yi")
    f = hl.Func("f")
    f[x, y] = (x + y - 1000, x - y + 1000)
    for _ in range(10):
        f[x, y] = (f[x, y][1] - 1, f[x, y][1] + 1)
    for i in range(10):
        f.update(i).unscheduled()
        if i & 1 == 0:
            f.update(i).gpu_tile(x, y, xo, yo, xi, yi, 16, 16)
    n = _tuple_size(device)
    a, b = f.realize([n, n], CUDA)
    xx, yy = _xy(n, n)
    np.testing.assert_array_equal(np.asarray(a), xx - yy + 1008)
    np.testing.assert_array_equal(np.asarray(b), xx - yy + 1010)


# ------------------------------------------------------------------------------ compute_with
def test_compute_with_multiple_outputs_on_gpu(device):
    """Ports compute_with's multiple_outputs_on_gpu: two outputs of different sizes (550^2 and
    110^2) reading one compute_root input, each compute_root gpu_tile 8x8, g computed with f at
    the block loop x aligned at the end; realized into a Realization and copied to the host,
    both equal the same Funcs computed unscheduled on the CPU (and 100 - (x + y + 1), 2x + y + 1)."""
    fs, gs = (550, 110) if device != "emulated" else (110, 22)
    x, y = hl.vars("x y")
    ref_in, ref_f, ref_g = hl.Func("q"), hl.Func("f"), hl.Func("g")
    ref_in[x, y] = x + y + 1
    ref_f[x, y] = 100 - ref_in[x, y]
    ref_g[x, y] = x + ref_in[x, y]
    f_ref, g_ref = np.asarray(ref_f.realize([fs, fs])), np.asarray(ref_g.realize([gs, gs]))

    inp, f, g = hl.Func("input"), hl.Func("f"), hl.Func("g")
    inp[x, y] = x + y + 1
    f[x, y] = 100 - inp[x, y]
    g[x, y] = x + inp[x, y]
    inp.compute_root()
    xi, yi = hl.vars("xi yi")
    f.compute_root().gpu_tile(x, y, xi, yi, 8, 8)
    g.compute_root().gpu_tile(x, y, xi, yi, 8, 8)
    g.compute_with(f, x, hl.LoopAlignStrategy.AlignEnd)
    f_im, g_im = hl.Buffer(hl.Int(32), [fs, fs]), hl.Buffer(hl.Int(32), [gs, gs])
    r = hl.Realization([f_im, g_im])
    hl.Pipeline([f, g]).realize(r, CUDA)
    r[0].copy_to_host()
    r[1].copy_to_host()
    np.testing.assert_array_equal(np.asarray(f_im), f_ref)
    np.testing.assert_array_equal(np.asarray(g_im), g_ref)
    xx, yy = _xy(fs, fs)
    np.testing.assert_array_equal(f_ref, 100 - (xx + yy + 1))
    np.testing.assert_array_equal(g_ref, 2 * xx[:gs, :gs] + yy[:gs, :gs] + 1)


# ------------------------------------------------------------------------------ multiple_outputs
def test_multiple_outputs_tuple_producer(device):
    """Ports multiple_outputs' first case: a compute_root Tuple (x, sin(x)) read by a consumer
    gpu_tile 8 that adds its elements; equals x + sin(x) (Halide only realizes it)."""
    x, xi = hl.vars("x xi")
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = (x, hl.sin(x))
    f.compute_root()
    t = f[x]
    g[x] = t[0] + t[1]
    g.gpu_tile(x, xi, 8)
    got = np.asarray(g.realize([100], CUDA))
    i = np.arange(100, dtype=np.float32)
    np.testing.assert_allclose(got, i + np.sin(i), rtol=1e-6, atol=1e-6)


def test_multiple_outputs_argmax_on_single_thread(device):
    """Ports multiple_outputs' second case: an argmax of sin(x * y) over [0, 100)^2 as a 3-Tuple
    reduction (best x, best y, best value) run on one GPU thread; the best value is near 1, and
    the whole Tuple is numpy's first maximum."""
    x, y = hl.vars("x y")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = hl.sin(x * y)
    f.compute_root()
    r = hl.RDom([hl.Range(0, 100), hl.Range(0, 100)])
    g[()] = (0, 0, f[0, 0])
    best_x, best_y, best_so_far = g[()][0], g[()][1], g[()][2]
    nxt = f[r.x, r.y]
    g[()] = hl.select(nxt > best_so_far, hl.Tuple([r.x, r.y, nxt]), hl.Tuple([best_x, best_y, best_so_far]))
    g.gpu_single_thread()
    bx, by, best = (np.asarray(b)[()] for b in g.realize([], CUDA))
    assert best >= 0.9999
    ry, rx = np.mgrid[0:100, 0:100]
    values = np.sin((rx * ry).astype(np.float32))
    first = np.argmax(values.ravel())  # r.x innermost: the row-major order of [r.y, r.x]
    assert (by, bx) == np.unravel_index(first, values.shape)
    assert best == pytest.approx(values.max(), abs=1e-6)


def test_multiple_outputs_of_different_sizes(device):
    """Ports multiple_outputs' third case: two outputs gpu_tile 8, of 100 and 10 elements,
    realized together into given Buffers; Halide asserts both are device-dirty afterwards (here,
    where pyhalide copies results back to a Buffer without a device allocation, when they were
    given one), and copied back they are 100x and x."""
    x, xi = hl.vars("x xi")
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = 100 * x
    g[x] = x
    f.gpu_tile(x, xi, 8)
    g.gpu_tile(x, xi, 8)
    f_im, g_im = hl.Buffer(hl.Int(32), [100]), hl.Buffer(hl.Int(32), [10])
    f_im.device_malloc()
    g_im.device_malloc()
    hl.Pipeline([f, g]).realize([f_im, g_im], CUDA)
    if device != "serial":  # serial GPU loops write the host copy
        assert f_im.device_dirty() and g_im.device_dirty()
    f_im.copy_to_host()
    g_im.copy_to_host()
    np.testing.assert_array_equal(np.asarray(f_im), 100 * np.arange(100))
    np.testing.assert_array_equal(np.asarray(g_im), np.arange(10))


def test_multiple_outputs_inferred_realization(device):
    """Ports multiple_outputs' fourth case: a float output and a (uint8, int16) Tuple output, both
    gpu_tile 8, realized over 100 elements into a Realization the pipeline allocates; three
    buffers of those types, 100x, x and x + 1."""
    x, xi = hl.vars("x xi")
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = hl.cast(hl.Float(32), 100 * x)
    g[x] = (hl.cast(hl.UInt(8), x), hl.cast(hl.Int(16), x + 1))
    f.gpu_tile(x, xi, 8)
    g.gpu_tile(x, xi, 8)
    r = hl.Pipeline([f, g]).realize([100], CUDA)
    assert len(r) == 3
    f_im, g0, g1 = (np.asarray(b) for b in r)
    assert (f_im.dtype, g0.dtype, g1.dtype) == (np.float32, np.uint8, np.int16)
    i = np.arange(100)
    np.testing.assert_array_equal(f_im, 100 * i)
    np.testing.assert_array_equal(g0, i)
    np.testing.assert_array_equal(g1, i + 1)


def test_multiple_outputs_calling_each_other(device):
    """Ports multiple_outputs' fifth case: three outputs of different dimensionalities that call
    each other (f, a 2-Tuple h of f, a 3-Tuple g of f and h), only g on the GPU (gpu_tile 1x1).
    As Halide asserts, g is written on the device (device-dirty) and f's and h's outputs,
    computed on the host, are copied to the device for g to read (their device copies up to
    date). pyhalide keeps a device copy across calls only for a Buffer that has one (otherwise
    it copies the results back and frees it), so the outputs are given device allocations first.
    Every value is the closed form: f = x, h = (x + 17, x - 17), g = (2(x + y), (x + 17)y, x - 19)."""
    x, y, xi, yi = hl.vars("x y xi yi")
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    f[x] = x
    h[x] = (f[x] + 17, f[x] - 17)
    g[x, y] = (f[x + y] * 2, h[x][0] * y, h[x][1] - 2)
    g.gpu_tile(x, y, xi, yi, 1, 1)
    f_im = hl.Buffer(hl.Int(32), [100])
    g_ims = [hl.Buffer(hl.Int(32), [20, 20]) for _ in range(3)]
    h_ims = [hl.Buffer(hl.Int(32), [50]) for _ in range(2)]
    for b in (f_im, *g_ims, *h_ims):
        b.device_malloc()
    hl.Pipeline([h, g, f]).realize([*h_ims, *g_ims, f_im], CUDA)
    if device != "serial":  # serial GPU loops use the host copies only
        assert all(b.device_dirty() for b in g_ims)
        assert not any(b.host_dirty() for b in (f_im, *h_ims))
    for b in g_ims:
        b.copy_to_host()
    i = np.arange(100)
    np.testing.assert_array_equal(np.asarray(f_im), i)
    np.testing.assert_array_equal(np.asarray(h_ims[0]), i[:50] + 17)
    np.testing.assert_array_equal(np.asarray(h_ims[1]), i[:50] - 17)
    xx, yy = _xy(20, 20)
    np.testing.assert_array_equal(np.asarray(g_ims[0]), 2 * (xx + yy))
    np.testing.assert_array_equal(np.asarray(g_ims[1]), (xx + 17) * yy)
    np.testing.assert_array_equal(np.asarray(g_ims[2]), xx - 19)


# ------------------------------------------------------------------------------ chunk
def test_chunk(device):
    """Ports chunk: g(x, y) = f(x + 1, y) + f(x - 1, y), gpu_tile 8x8 with named block Vars, f
    computed per block (at the block loop xo) in GPU shared memory with its own 2-D thread
    loops. Equals 2x over 32x32."""
    x, y, xo, yo, xi, yi = hl.vars("x y xo yo xi yi")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = hl.cast(hl.Int(32), x)
    g[x, y] = f[x + 1, y] + f[x - 1, y]
    g.gpu_tile(x, y, xo, yo, xi, yi, 8, 8)
    f.compute_at(g, xo).gpu_threads(x, y).store_in(hl.MemoryType.GPUShared)
    got = np.asarray(g.realize([32, 32], CUDA))
    xx, _ = _xy(32, 32)
    np.testing.assert_array_equal(got, 2 * xx)


# ------------------------------------------------------------------------------ convolution
def _tent_blur(image: np.ndarray) -> np.ndarray:
    """The 3x3 tent filter (1 2 1 / 2 4 2 / 1 2 1) of image's interior, in uint16 as Halide's
    test sums it; [1:-1, 1:-1] of the result is meaningful."""
    a = image.astype(np.int64)
    out = np.zeros_like(a)
    weights = np.array([[1, 2, 1], [2, 4, 2], [1, 2, 1]])
    for dy in range(3):
        for dx in range(3):
            out[1:-1, 1:-1] += weights[dy, dx] * a[dy:dy + a.shape[0] - 2, dx:dx + a.shape[1] - 2]
    return out.astype(np.uint16)


def test_convolution(device):
    """Ports convolution: a 3x3 tent over a clamped uint16 input, as an update over RDom(tent)
    (pure stage gpu_tile 16x16; the update reordered to put the RDom outside and gpu_tile'd, one
    kernel per tap) and as an inline sum (gpu_tile 16x16, the sum a loop in each thread). Both
    equal numpy's in the interior (128x48 as in Halide)."""
    w, h = 128, 48
    image = _random_image(w, h, np.uint16, seed=1)
    inp = hl.Buffer(image)
    tent = hl.Buffer(np.array([[1, 2, 1], [2, 4, 2], [1, 2, 1]], np.uint16))  # tent(x, y) = [y][x]
    x, y = hl.vars("x y")
    inp_f = hl.Func("input")
    inp_f[x, y] = inp[hl.clamp(x, 0, w - 1), hl.clamp(y, 0, h - 1)]
    inp_f.compute_root()
    r = hl.RDom(tent)
    blur1, blur2 = hl.Func("blur1"), hl.Func("blur2")
    blur1[x, y] += tent[r.x, r.y] * inp_f[x + r.x - 1, y + r.y - 1]
    blur2[x, y] = hl.sum(tent[r.x, r.y] * inp_f[x + r.x - 1, y + r.y - 1])
    xi, yi = hl.vars("xi yi")
    blur1.gpu_tile(x, y, xi, yi, 16, 16)
    blur1.update().reorder(x, y, r.x, r.y).gpu_tile(x, y, xi, yi, 16, 16)
    blur2.gpu_tile(x, y, xi, yi, 16, 16)
    out1 = np.asarray(blur1.realize([w, h], CUDA))
    out2 = np.asarray(blur2.realize([w, h], CUDA))
    want = _tent_blur(image)
    np.testing.assert_array_equal(out1[1:-1, 1:-1], want[1:-1, 1:-1])
    np.testing.assert_array_equal(out2[1:-1, 1:-1], want[1:-1, 1:-1])


# ------------------------------------------------------------------------------ convolution_multiple_kernels
def test_convolution_multiple_kernels(device):
    """Ports convolution_multiple_kernels: two 3x3 box kernels of different types (uint16 of 1s,
    uint32 of 2s), both compute_root, summed against a clamped uint16 input inside one stage
    gpu_tile 16x16 (the kernels' buffers read from the device). Equals three times the 3x3 box
    sum in the interior (64x16 as in Halide)."""
    w, h = 64, 16
    image = _random_image(w, h, np.uint16, seed=2)
    inp = hl.Buffer(image)
    x, y = hl.vars("x y")
    inp_f = hl.Func("input")
    inp_f[x, y] = inp[hl.clamp(x, 0, w - 1), hl.clamp(y, 0, h - 1)]
    inp_f.compute_root()
    box1, box2 = hl.Func("box1"), hl.Func("box2")
    box1[x, y] = hl.cast(hl.UInt(16), 1)
    box2[x, y] = hl.cast(hl.UInt(32), 2)
    box1.compute_root()
    box2.compute_root()
    r = hl.RDom([hl.Range(-1, 3), hl.Range(-1, 3)])
    blur = hl.Func("blur")
    blur[x, y] = (hl.sum(box1[r.x, r.y] * inp_f[x + r.x, y + r.y])
                  + hl.sum(hl.cast(hl.UInt(16), box2[r.x, r.y]) * inp_f[x + r.x, y + r.y]))
    xi, yi = hl.vars("xi yi")
    blur.gpu_tile(x, y, xi, yi, 16, 16)
    got = np.asarray(blur.realize([w, h], CUDA))
    a = image.astype(np.int64)
    box = sum(a[1 + dy:h - 1 + dy, 1 + dx:w - 1 + dx] for dy in (-1, 0, 1) for dx in (-1, 0, 1))
    np.testing.assert_array_equal(got[2:-2, 2:-2], (3 * box).astype(np.uint16)[1:-1, 1:-1])


# ------------------------------------------------------------------------------ dilate3x3
def test_dilate3x3(device):
    """Ports dilate3x3: a 3x3 max of a repeat_edge uint8 input (a max over x, then over y of
    that), the output gpu_tile 16x16. Equals numpy's 3x3 max in the interior (128x48 as in
    Halide)."""
    w, h = 128, 48
    image = _random_image(w, h, np.uint8, seed=3)
    x, y = hl.vars("x y")
    inp = hl.BoundaryConditions.repeat_edge(hl.Buffer(image))
    inp.compute_root()
    max_x, dilate = hl.Func("max_x"), hl.Func("dilate3x3")
    max_x[x, y] = hl.max(inp[x - 1, y], inp[x, y], inp[x + 1, y])
    dilate[x, y] = hl.max(max_x[x, y - 1], max_x[x, y], max_x[x, y + 1])
    xi, yi = hl.vars("xi yi")
    dilate.gpu_tile(x, y, xi, yi, 16, 16)
    got = np.asarray(dilate.realize([w, h], CUDA))
    windows = np.lib.stride_tricks.sliding_window_view(image, (3, 3))
    np.testing.assert_array_equal(got[1:-1, 1:-1], windows.max(axis=(2, 3)))


# ------------------------------------------------------------------------------ median3x3
def _mid3(a, b, c):
    return hl.max(hl.min(hl.max(a, b), c), hl.min(a, b))


def test_median3x3(device):
    """Ports median3x3: a 3x3 median of a constant_exterior uint8 input as the middle of (the
    min of row maxes, the max of row mins, the middle of row middles), the output gpu_tile 16x16.
    Equals numpy's median of each 3x3 window in the interior (Halide: 256x256; here 64x64 on
    the emulated device)."""
    w = h = 64 if device == "emulated" else 256
    image = _random_image(w, h, np.uint8, seed=4)
    x, y = hl.vars("x y")
    inp = hl.BoundaryConditions.constant_exterior(hl.Buffer(image), 0)
    inp.compute_root()
    max_x, min_x, mid_x = hl.Func("max_x"), hl.Func("min_x"), hl.Func("mid_x")
    max_x[x, y] = hl.max(inp[x - 1, y], inp[x, y], inp[x + 1, y])
    min_x[x, y] = hl.min(inp[x - 1, y], inp[x, y], inp[x + 1, y])
    mid_x[x, y] = _mid3(inp[x - 1, y], inp[x, y], inp[x + 1, y])
    min_max, max_min, mid_mid = hl.Func("min_max"), hl.Func("max_min"), hl.Func("mid_mid")
    min_max[x, y] = hl.min(max_x[x, y - 1], max_x[x, y], max_x[x, y + 1])
    max_min[x, y] = hl.max(min_x[x, y - 1], min_x[x, y], min_x[x, y + 1])
    mid_mid[x, y] = _mid3(mid_x[x, y - 1], mid_x[x, y], mid_x[x, y + 1])
    median = hl.Func("median3x3")
    median[x, y] = _mid3(min_max[x, y], max_min[x, y], mid_mid[x, y])
    xi, yi = hl.vars("xi yi")
    median.gpu_tile(x, y, xi, yi, 16, 16)
    got = np.asarray(median.realize([w, h], CUDA))
    windows = np.lib.stride_tricks.sliding_window_view(image, (3, 3)).reshape(h - 2, w - 2, 9)
    np.testing.assert_array_equal(got[1:-1, 1:-1], np.median(windows, axis=2).astype(np.uint8))


# ------------------------------------------------------------------------------ lots_of_loop_invariants
def test_lots_of_loop_invariants(device):
    """Ports lots_of_loop_invariants: f(x, y, c) = sum over i < 100 of (c + i)^2 * (x + i), a
    hundred invariants of the GPU thread loops for loop-invariant code motion to hoist, gpu_tile
    8x8. Halide only realizes it (1024x1024x3); here 64x32x3 (16x16x3 emulated), checked against
    numpy's int32 (wrapping) sum."""
    x, y, c = hl.vars("x y c")
    e = hl.Expr(0)
    for i in range(100):
        e += (c + i) * (c + i) * (x + i)
    f = hl.Func("f")
    f[x, y, c] = e
    xi, yi = hl.vars("xi yi")
    f.gpu_tile(x, y, xi, yi, 8, 8)
    w, h = (16, 16) if device == "emulated" else (64, 32)
    got = np.asarray(f.realize([w, h, 3], CUDA))
    cc, _, xx = np.mgrid[0:3, 0:h, 0:w]
    want = sum((cc + i) ** 2 * (xx + i) for i in range(100))
    np.testing.assert_array_equal(got, want.astype(np.int32))


# ------------------------------------------------------------------------------ trim_no_ops
class _CountConditionals(IRVisitor):
    """How many Selects and IfThenElses a lowered Stmt holds."""

    def __init__(self):
        super().__init__()
        self.selects = self.ifs = 0

    def visit_Select(self, node):
        self.selects += 1
        self.visit_children(node)

    def visit_IfThenElse(self, node):
        self.ifs += 1
        self.visit_children(node)


def test_trim_no_ops_select_not_simplified_on_gpu(device):
    """Ports trim_no_ops' GPU case: an update over [0, 100)^2 adding select(r.x < r.y && r.x ==
    10, 3, undef), gpu_tile 4x4 over its RVars. Lowered for host-cuda, the select becomes one
    if around the store (no Select left) and the GPU thread loop r.x is not trimmed by it, since
    the condition depends on the block loop r.y; the result has 3 added where x == 10 < y < 100."""
    x, y = hl.vars("x y")
    f = hl.Func("f")
    f[x, y] = x + y
    r = hl.RDom([hl.Range(0, 100), hl.Range(0, 100)])
    f[r.x, r.y] += hl.select((r.x < r.y) & (r.x == 10), 3, hl.undef(hl.Int(32)))
    rxi, ryi = hl.RVar("rxi"), hl.RVar("ryi")
    f.update(0).gpu_tile(r.x, r.y, rxi, ryi, 4, 4)
    im = np.asarray(f.realize([200, 200], CUDA))
    module = hl.Pipeline(f).compile_to_module([], "", CUDA)
    count = _CountConditionals()
    count.visit(module.lowered.stmt)
    assert count.selects == 0, str(module)
    assert count.ifs == 1, str(module)
    np.testing.assert_array_equal(im, _update_at_x10(200, 200))


# ------------------------------------------------------------------------------ error/thread_id_outside_block_id
def test_error_thread_id_outside_block_id(device):
    """Ports error/thread_id_outside_block_id: gpu_tile(x, xo, xi, 16) then reorder(xo, xi),
    which puts the thread loop xi outside the block loop xo. compile_jit for host-cuda raises an
    HalideError that says a thread loop is outside the block loops."""
    x, xo, xi = hl.vars("x xo xi")
    f = hl.Func("f")
    f[x] = x
    f.gpu_tile(x, xo, xi, 16).reorder(xo, xi)
    with pytest.raises(hl.HalideError) as info:
        f.compile_jit(CUDA)
    message = str(info.value)
    assert "Internal" not in type(info.value).__name__, message
    assert "thread" in message.lower() and "block" in message.lower(), message
