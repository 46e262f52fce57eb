"""Halide's GPU correctness tests (test/correctness/*gpu*, cuda_*), ported to pyhalide's CUDA
backend: each pipeline and schedule as Halide's test writes it, run on the serial and the
emulated CUDA device (and on a GPU where there is one), its result checked against numpy or the
closed form the Halide test uses. Sizes are smaller than Halide's where the emulated device (a
g++ compile per pipeline, a std::thread per GPU thread) would make them slow; what each test is
about is kept."""

from __future__ import annotations

import numpy as np
import pytest

import pyhalide as hl
from pyhalide.codegen import gpu_runtime

CUDA = hl.Target("host-cuda")
GT = hl.TailStrategy




# ------------------------------------------------------------------------------ hello_gpu
def test_hello_gpu(device):
    """Ports hello_gpu: a float Func x * y + 2.4 over 32x32, gpu_tile 8x8, matches x * y + 2.4."""
    x, y, xi, yi = hl.vars("x y xi yi")
    f = hl.Func("f")
    f[x, y] = x * y + hl.f32(2.4)
    f.gpu_tile(x, y, xi, yi, 8, 8)
    got = np.asarray(f.realize([32, 32], CUDA))
    j, i = np.mgrid[0:32, 0:32]
    want = (i * j).astype(np.float32) + np.float32(2.4)
    np.testing.assert_allclose(got, want, atol=1e-3, rtol=0)


# ------------------------------------------------------------------------------ gpu_condition_lifting
def test_gpu_condition_lifting(device):
    """Ports gpu_condition_lifting (Halide issue 4297): y split by 32 with GuardWithIf over an
    extent of 10, reordered (x, z, yi, yo), and yo, yi and z all made GPU block loops (no thread
    loops; the guard's condition must not be lifted out of the kernel). All zeros."""
    x, y, z, yo, yi = hl.vars("x y z yo yi")
    f = hl.Func("f")
    f[x, y, z] = 0
    f.split(y, yo, yi, 32, GT.GuardWithIf).reorder(x, z, yi, yo).gpu_blocks(yo).gpu_blocks(yi).gpu_blocks(z)
    got = np.asarray(f.realize([10, 10, 10], CUDA))
    np.testing.assert_array_equal(got, np.zeros((10, 10, 10), np.int32))


# ------------------------------------------------------------------------------ gpu_data_flows
def test_gpu_data_flows(device):
    """Ports gpu_data_flows: every way data moves between host and device. Pipeline 1: input ->
    host stage -> GPU stage -> host stage -> output; pipeline 2: input -> GPU stage -> GPU output.
    Each output, copied to the host, is the closed form of the stages."""
    n = 1024
    data = (np.arange(n, dtype=np.int32) * 17 + 83)

    inp = hl.ImageParam(hl.Int(32), 1, "in1")
    f, g, out = hl.Func("f"), hl.Func("g"), hl.Func("out")
    x, xi = hl.vars("x xi")
    f[x] = inp[x] + 1
    g[x] = f[x] * 2
    out[x] = g[x] + 3
    f.compute_root()
    g.compute_root().gpu_tile(x, xi, 16)
    out.compute_root()
    input1 = hl.Buffer(data.copy())
    inp.set(input1)
    output1 = hl.Buffer(hl.Int(32), [n])
    out.realize(output1, CUDA)
    output1.copy_to_host()
    np.testing.assert_array_equal(np.asarray(output1), (data + 1) * 2 + 3)

    inp2 = hl.ImageParam(hl.Int(32), 1, "in2")
    f2, out2 = hl.Func("f"), hl.Func("out")
    f2[x] = inp2[x] + 1
    out2[x] = f2[x] * 2
    f2.compute_root().gpu_tile(x, xi, 16)
    out2.compute_root().gpu_tile(x, xi, 16)
    inp2.set(hl.Buffer(data.copy()))
    output2 = hl.Buffer(hl.Int(32), [n])
    out2.realize(output2, CUDA)
    output2.copy_to_host()
    np.testing.assert_array_equal(np.asarray(output2), (data + 1) * 2)


# ------------------------------------------------------------------------------ gpu_different_blocks_threads_dimensions
def test_gpu_different_blocks_threads_dimensions(device, passes_in_forked_child):
    """Ports gpu_different_blocks_threads_dimensions: one block dimension (y) but two thread
    dimensions (xi, yi), with a serial loop (x) between them, and a producer stored in Heap
    memory computed at that serial loop with two thread dimensions of its own. Halide's test only
    compiles it; here it also runs and equals x + y (on the emulated device in a forked child, so
    that a kernel writing outside its memory fails this test only)."""
    x, y, xi, yi = hl.vars("x y xi yi")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + y
    g[x, y] = f[x, y]
    g.tile(x, y, xi, yi, 16, 16).gpu_blocks(y).gpu_threads(xi, yi)
    f.compute_at(g, x).store_in(hl.MemoryType.Heap).gpu_threads(x, y)
    g.compile_jit(CUDA)
    yy, xx = np.mgrid[0:32, 0:48]

    def check():
        got = np.asarray(g.realize([48, 32], CUDA))
        np.testing.assert_array_equal(got, xx + yy)
        return True

    if device == "emulated":
        assert passes_in_forked_child(check), "the kernel crashed or computed a wrong result"
    else:
        check()


# ------------------------------------------------------------------------------ gpu_free_sync
def test_gpu_free_sync(device):
    """Ports gpu_free_sync: a slow kernel (a 100-term sum of fourth roots) realized again and
    again, its output's device memory freed after each call: the free must wait for the kernel.
    Halide only checks that this does not crash (1024x1024, 10 times); here 64x64, 4 times on
    the emulations, each result checked against numpy (summed in the same order)."""
    x, y, xi, yi = hl.vars("x y xi yi")
    r = hl.RDom([hl.Range(0, 100)])
    f = hl.Func("f")
    f[x, y] = hl.sum(hl.sqrt(hl.sqrt(hl.sqrt(hl.sqrt(x + y + r)))))
    f.gpu_tile(x, y, xi, yi, 16, 16)
    size, times = (1024, 10) if device == "gpu" else (64, 4)
    yy, xx = np.mgrid[0:size, 0:size]
    want = np.zeros((size, size), np.float32)
    for k in range(100):
        want += np.sqrt(np.sqrt(np.sqrt(np.sqrt((xx + yy + k).astype(np.float32)))))
    for _ in range(times):
        got = np.asarray(f.realize([size, size], CUDA))
        np.testing.assert_allclose(got, want, rtol=1e-5)


# ------------------------------------------------------------------------------ gpu_jit_explicit_copy_to_device
@pytest.mark.parametrize("api_passed", ["positional", "keyword"])
def test_gpu_jit_explicit_copy_to_device(api_passed, device):
    """Ports gpu_jit_explicit_copy_to_device: two inputs, one copied to the device explicitly
    (copy_to_device clears host_dirty), one given a device allocation with device_malloc (host
    still dirty, so the pipeline must copy it); the dirty bits follow Halide's, and a + b + 2 is
    7 everywhere. For each device API pyhalide has (Default_GPU and CUDA; OpenCL is skipped as in
    Halide where it is unavailable), given to gpu_tile after the tail strategy as Halide's test
    does (positional, which Halide's Python bindings accept too) or by keyword."""
    for api in (hl.DeviceAPI.Default_GPU, hl.DeviceAPI.CUDA):
        a, b = hl.Buffer(hl.Float(32), [100, 100]), hl.Buffer(hl.Float(32), [100, 100])

        assert not a.host_dirty()
        a.fill(2.0)
        assert not a.has_device_allocation()
        assert a.host_dirty()
        a.copy_to_device(api)
        assert a.has_device_allocation()
        assert not a.host_dirty()

        assert not b.host_dirty()
        b.fill(3.0)
        assert not b.has_device_allocation()
        assert b.host_dirty()
        b.device_malloc(api)
        assert b.has_device_allocation()
        assert b.host_dirty()

        f = hl.Func("f")
        x, y, tx, ty = hl.vars("x y tx ty")
        f[x, y] = a[x, y] + b[x, y] + 2
        if api_passed == "positional":
            f.gpu_tile(x, y, tx, ty, 8, 8, GT.Auto, api)
        else:
            f.gpu_tile(x, y, tx, ty, 8, 8, GT.Auto, device_api=api)
        out = f.realize([100, 100], CUDA)
        np.testing.assert_array_equal(np.asarray(out), np.full((100, 100), 7.0, np.float32))


# ------------------------------------------------------------------------------ gpu_large_alloc
def test_gpu_large_alloc(device):
    """Ports gpu_large_alloc: two compute_root GPU stages over a 10 MB image each (2560x1024
    int32), g = clamp(max(x, y), 20, 100). On the emulated device (a std::thread per GPU
    thread) the image is 1/16 of that."""
    x, y, xi, yi = hl.vars("x y xi yi")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = hl.max(x, y)
    g[x, y] = hl.clamp(f[x, y], 20, 100)
    f.compute_root().gpu_tile(x, y, xi, yi, 16, 16)
    g.compute_root().gpu_tile(x, y, xi, yi, 16, 16)
    w, h = (1024 * 10 // 4, 1024) if device != "emulated" else (640, 256)
    got = np.asarray(g.realize([w, h], CUDA))
    yy, xx = np.mgrid[0:h, 0:w]
    np.testing.assert_array_equal(got, np.clip(np.maximum(xx, yy), 20, 100))


# ------------------------------------------------------------------------------ gpu_many_kernels
def test_gpu_many_kernels(device):
    """Ports gpu_many_kernels: many small different kernels (adders of 1, 2, ... n), each its own
    pipeline, run in sequence ping-ponging two 32x32 buffers; then all again (compiled kernels
    reused); then again after the buffers' device memory is freed (pyhalide has no
    device_release to drop the device context). The result is n(n+1)/2 everywhere each time.
    Halide has 70 kernels; the emulated device, which compiles each with g++, gets 3."""
    n = {"serial": 20, "emulated": 3, "gpu": 70}[device]
    x, y, xi, yi = hl.vars("x y xi yi")
    inp = hl.ImageParam(hl.Int(32), 2, "input")
    adders = []
    for i in range(1, n + 1):
        f = hl.Func("adder")
        f[x, y] = inp[x, y] + i
        f.compute_root().gpu_tile(x, y, xi, yi, 16, 16)
        adders.append(f)
    store_a, store_b = hl.Buffer(hl.Int(32), [32, 32]), hl.Buffer(hl.Int(32), [32, 32])

    def run_all():
        buf_in, buf_out = store_a, store_b
        buf_in.fill(0)
        for f in adders:
            inp.set(buf_in)
            f.realize(buf_out, CUDA)
            buf_in, buf_out = buf_out, buf_in
        buf_in.copy_to_host()
        np.testing.assert_array_equal(np.asarray(buf_in), np.full((32, 32), n * (n + 1) // 2, np.int32))

    run_all()
    run_all()
    store_a.device_free()
    store_b.device_free()
    run_all()


# ------------------------------------------------------------------------------ gpu_mixed_dimensionality
def test_gpu_mixed_dimensionality(device):
    """Ports gpu_mixed_dimensionality: a chain of four Funcs, each with an update, whose GPU
    loops have different dimensionalities: out's pure stage 3-D blocks and threads, its update
    2-D; h computed per block with 2-D threads and a 1-D-threaded update; g and f computed inside
    h's threads. Equals x + y + z + 4 (Halide: 64^3; here 16x16x8)."""
    f, g, h, out = hl.Func("f"), hl.Func("g"), hl.Func("h"), hl.Func("out")
    x, y, z = hl.vars("x y z")
    f[x, y, z] = x + y + z
    f[x, y, z] += 1
    g[x, y, z] = f[x, y, z]
    g[x, y, z] += 1
    h[x, y, z] = g[x, y, z]
    h[x, y, z] += 1
    out[x, y, z] = h[x, y, z]
    out[x, y, z] += 1
    xi, yi, zi = hl.vars("xi yi zi")
    out.gpu_tile(x, y, z, xi, yi, zi, 4, 4, 4)
    out.update().gpu_tile(x, y, xi, yi, 4, 4)
    h.compute_at(out, x).gpu_threads(x, y)
    h.update().gpu_threads(x)
    g.compute_at(h, x)
    g.update()
    f.compute_at(g, x)
    f.update()
    sx, sy, sz = (64, 64, 64) if device == "gpu" else (16, 16, 8)
    got = np.asarray(out.realize([sx, sy, sz], CUDA))
    zz, yy, xx = np.mgrid[0:sz, 0:sy, 0:sx]
    np.testing.assert_array_equal(got, xx + yy + zz + 4)


# ------------------------------------------------------------------------------ gpu_multi_kernel
def test_gpu_multi_kernel(device):
    """Ports gpu_multi_kernel: three kernels in a chain (floor of a float division, a sqrt, a
    round to int32), each gpu_tile 32; equals the same float32 arithmetic in numpy."""
    x, xi = hl.vars("x xi")
    k1, k2, k3 = hl.Func("kernel1"), hl.Func("kernel2"), hl.Func("kernel3")
    k1[x] = hl.floor((x + hl.f32(0.5)) / hl.f32(3.0))
    k2[x] = hl.sqrt(4 * x * x) + k1[x]
    k3[x] = hl.cast(hl.Int(32), hl.round(x + k2[x]))
    k1.gpu_tile(x, xi, 32).compute_root()
    k2.gpu_tile(x, xi, 32).compute_root()
    k3.gpu_tile(x, xi, 32)
    got = np.asarray(k3.realize([256], CUDA))
    i = np.arange(256)
    a = np.floor((i.astype(np.float32) + np.float32(0.5)) / np.float32(3.0))
    b = np.sqrt((4 * i * i).astype(np.float32)) + a
    want = np.round(i.astype(np.float32) + b).astype(np.int32)  # round half to even, as Halide's round
    np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------------------ gpu_non_contiguous_copy
X_OFF, Y_OFF, Z_OFF, W_OFF = 4, 8, 2, 4
X_SIZE, Y_SIZE, Z_SIZE, W_SIZE = 16, 16, 3, 3


def _non_contiguous_setup():
    """A 80x60x10x10 buffer and a view of it with every stride doubled (16x16x3x3 elements at
    (4, 8, 2, 4)), the mask of the view's elements, and the Func the GPU writes into the view."""
    full = hl.Buffer(hl.Int(32), [80, 60, 10, 10])
    arr = np.asarray(full)  # (w, z, y, x), the same memory
    view = arr[W_OFF:W_OFF + 2 * W_SIZE:2, Z_OFF:Z_OFF + 2 * Z_SIZE:2,
               Y_OFF:Y_OFF + 2 * Y_SIZE:2, X_OFF:X_OFF + 2 * X_SIZE:2]
    cropped = hl.Buffer(view)
    assert np.shares_memory(np.asarray(cropped), arr)
    in_sub = np.zeros(arr.shape, bool)
    in_sub[W_OFF:W_OFF + 2 * W_SIZE:2, Z_OFF:Z_OFF + 2 * Z_SIZE:2,
           Y_OFF:Y_OFF + 2 * Y_SIZE:2, X_OFF:X_OFF + 2 * X_SIZE:2] = True
    x, y, z, w, xi, yi = hl.vars("x y z w xi yi")
    f = hl.Func("f")
    f[x, y, z, w] = 3 * x + 2 * y + z + 4 * w
    f.gpu_tile(x, y, xi, yi, 16, 16)
    f.output_buffer().dim(0).set_stride(hl.Expr())
    return full, cropped, in_sub, f


def _non_contiguous_expected(in_sub):
    w, z, y, x = np.indices(in_sub.shape)
    inside = 3 * ((x - X_OFF) // 2) + 2 * ((y - Y_OFF) // 2) + (z - Z_OFF) // 2 + 4 * ((w - W_OFF) // 2)
    return np.where(in_sub, inside, 4 * x + 3 * y + 2 * z + w).astype(np.int32)


def test_gpu_non_contiguous_copy(device):
    """Ports gpu_non_contiguous_copy: a GPU pipeline writes into a view of a bigger buffer with
    every stride doubled (the output's stride-1 constraint dropped); the host then writes the
    rest of the big buffer (a Func whose value is undef inside the view, as Halide's test does);
    copying the view back from the device must touch only the view's own elements."""
    full, cropped, in_sub, f = _non_contiguous_setup()
    f.realize(cropped, CUDA)
    x, y, z, w = hl.vars("x y z w")
    test = ((x >= X_OFF) & (x < X_OFF + X_SIZE * 2) & (y >= Y_OFF) & (y < Y_OFF + Y_SIZE * 2) &
            (z >= Z_OFF) & (z < Z_OFF + Z_SIZE * 2) & (w >= W_OFF) & (w < W_OFF + W_SIZE * 2) &
            (x % 2 == 0) & (y % 2 == 0) & (z % 2 == 0) & (w % 2 == 0))
    outside = hl.select(test, hl.undef(hl.Int(32)), 4 * x + 3 * y + 2 * z + w)
    hl.lambda_func(x, y, z, w, outside).realize(full)
    cropped.copy_to_host()
    np.testing.assert_array_equal(np.asarray(full), _non_contiguous_expected(in_sub))


def test_gpu_non_contiguous_copy_kept_on_device(device):
    """gpu_non_contiguous_copy as Halide runs it: the output view stays on the device (nothing
    is copied back until asked; here the view is given its device allocation beforehand), the
    host writes every element of the big buffer outside the view (numpy here), and then
    copy_to_host of the view must write only its own elements."""
    full, cropped, in_sub, f = _non_contiguous_setup()
    cropped.device_malloc()
    f.realize(cropped, CUDA)
    assert cropped.device_dirty() == (device != "serial")  # serial GPU loops write the host copy
    w, z, y, x = np.indices(in_sub.shape)
    arr = np.asarray(full)
    arr[~in_sub] = (4 * x + 3 * y + 2 * z + w)[~in_sub]
    cropped.copy_to_host()
    np.testing.assert_array_equal(np.asarray(full), _non_contiguous_expected(in_sub))


# ------------------------------------------------------------------------------ gpu_param_allocation
def test_gpu_param_allocation(device):
    """Ports gpu_param_allocation: a per-thread allocation (f computed at the thread loop xi)
    whose size, 3 * slices + 1 rows, depends on a Param with a declared range [1, 256] (the bound
    the kernel's array gets). g(x, y) = sum_r (x + r) + slices, in closed form."""
    f, g = hl.Func("f"), hl.Func("g")
    x, y, xi, yi = hl.vars("x y xi yi")
    slices = hl.Param(hl.Int(32), "slices")
    r = hl.RDom([hl.Range(0, 3 * slices + 1)])
    slices.set_range(1, 256)
    f[x, y] = x + y
    g[x, y] = hl.sum(f[x, r]) + slices
    g.compute_root().gpu_tile(x, y, xi, yi, 16, 16)
    f.compute_at(g, xi)
    slices.set(32)
    size = 1024 if device == "gpu" else 32
    got = np.asarray(g.realize([size, size], CUDA))
    s, n = 32, 3 * 32 + 1
    xx = np.broadcast_to(np.arange(size), (size, size))
    np.testing.assert_array_equal(got, n * xx + n * (n - 1) // 2 + s)


# ------------------------------------------------------------------------------ gpu_specialize
def test_gpu_specialize_cpu_or_gpu(device):
    """Ports the first half of gpu_specialize: h tiled either on the GPU (gpu_tile 4x4) or on
    the CPU (8x8 tiles, fused, parallel), chosen by a Param<bool>; a size-1 split in the GPU
    specialization makes a loop t in both, so g can be computed at h.t (its GPU version with
    thread loops), and the same trick on g gives f a loop xi to be computed at. Both values of
    the Param equal 6x + 5y (Halide: 1024x1024; here 64x64)."""
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    x, y = hl.vars("x y")
    use_gpu = hl.Param(hl.Bool(), "use_gpu")
    f[x, y] = x + y
    g[x, y] = f[x - 1, y + 1] + f[x + 1, y - 1] + x
    h[x, y] = g[x + 1, y - 1] + g[x - 1, y + 1] + y
    xo, yo, xi, yi, t = hl.vars("xo yo xi yi t")
    h.compute_root().specialize(use_gpu).gpu_tile(x, y, xi, yi, 4, 4)
    h.tile(x, y, xo, yo, xi, yi, 8, 8).fuse(xo, yo, t).parallel(t)
    h.specialize(use_gpu).split(x, x, t, 1).serial(t)
    g.compute_at(h, t)
    g.specialize(use_gpu).gpu_threads(x, y)
    g.specialize(use_gpu).split(x, x, xi, 1).serial(xi)
    g.rename(x, xi)
    f.compute_at(g, xi)
    size = 1024 if device == "gpu" else 64
    use_gpu.set(True)
    out1 = np.asarray(h.realize([size, size], CUDA))
    use_gpu.set(False)
    out2 = np.asarray(h.realize([size, size], CUDA))
    yy, xx = np.mgrid[0:size, 0:size]
    np.testing.assert_array_equal(out1, 6 * xx + 5 * yy)
    np.testing.assert_array_equal(out2, 6 * xx + 5 * yy)


def test_gpu_specialize_thread_loops(device):
    """Ports the second half of gpu_specialize: a producer computed per GPU block whose thread
    loops depend on a Param<bool> (4x4 tiles, threads over the tiles; otherwise 8x8 tiles,
    threads over the tile index). With the Param true, g equals 2x + y."""
    f, g = hl.Func("f"), hl.Func("g")
    x, y = hl.vars("x y")
    p = hl.Param(hl.Bool(), "p")
    f[x, y] = x + y
    g[x, y] = f[x, y] + x
    xo, yo, xi, yi = hl.vars("xo yo xi yi")
    f.specialize(p).tile(x, y, xi, yi, 4, 4).gpu_threads(x, y)
    f.tile(x, y, xo, yo, xi, yi, 8, 8).gpu_threads(xo, yo)
    f.compute_at(g, x)
    g.tile(x, y, xi, yi, 2, 2).gpu_blocks(x, y)
    p.set(True)
    got = np.asarray(g.realize([32, 32], CUDA))
    yy, xx = np.mgrid[0:32, 0:32]
    np.testing.assert_array_equal(got, 2 * xx + yy)


# ------------------------------------------------------------------------------ specialize_to_gpu
def test_specialize_to_gpu(device):
    """Ports specialize_to_gpu: three compute_root stages, each on the GPU or the CPU by its own
    Param<bool>; all eight combinations give the all-CPU result (compared as Halide does, with
    evaluate of a sum of absolute differences), which is also numpy's."""
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    inp = hl.ImageParam(hl.Int(32), 1, "in")
    x, xi = hl.vars("x xi")
    f[x] = inp[x] + inp[x + 1]
    g[x] = f[x * 2]
    h[x] = g[x] - 7
    gpu_f, gpu_g, gpu_h = (hl.Param(hl.Bool(), n) for n in ("gpu_f", "gpu_g", "gpu_h"))
    f.compute_root().specialize(gpu_f).gpu_tile(x, x, xi, 16)
    g.compute_root().specialize(gpu_g).gpu_tile(x, x, xi, 16)
    h.compute_root().specialize(gpu_h).gpu_tile(x, x, xi, 16)
    i = np.arange(256, dtype=np.int32)
    data = i * 17 + 43 + i * i
    inp.set(hl.Buffer(data))
    out, reference = hl.Buffer(hl.Int(32), [128]), hl.Buffer(hl.Int(32), [128])
    for p in (gpu_f, gpu_g, gpu_h):
        p.set(False)
    h.realize(reference, CUDA)
    k = np.arange(128)
    np.testing.assert_array_equal(np.asarray(reference), data[2 * k] + data[2 * k + 1] - 7)
    for combo in range(1, 8):
        gpu_f.set(bool(combo & 1))
        gpu_g.set(bool(combo & 2))
        gpu_h.set(bool(combo & 4))
        h.realize(out, CUDA)
        r = hl.RDom(out)
        err = hl.evaluate(hl.sum(hl.cast(hl.UInt(32), hl.abs(out[r] - reference[r]))))
        assert err == 0, f"combination {combo}"
        np.testing.assert_array_equal(np.asarray(out), np.asarray(reference))


# ------------------------------------------------------------------------------ gpu_sum_scan
def test_gpu_sum_scan(device):
    """Ports gpu_sum_scan: a prefix sum in blocks of 16 on the GPU: a scan within each block
    (one GPU block each, serial inside), a scan of the blocks' totals on a single GPU thread
    into a scratch column at x = -1, then each block's offset added by 16 threads; read out
    through a second kernel with out bounded to a multiple of 16. Equals numpy's cumsum
    (Halide: 16384 elements; here 512)."""
    B = 16
    n = 1024 * 16 if device == "gpu" else 512
    f = hl.Func("f")
    x, y = hl.vars("x y")
    im = hl.ImageParam(hl.Int(32), 1, "im")
    blocks = im.width() // B
    f[x, y] = 0
    f.compute_root().gpu_blocks(y).gpu_threads(x)
    r1 = hl.RDom([hl.Range(0, B)])
    f[r1, y] = im[y * B + r1] + f[r1 - 1, y]
    f.update(0).gpu_blocks(y)
    r2 = hl.RDom([hl.Range(1, blocks - 1)])
    f[-1, r2] = f[B - 1, r2 - 1] + f[-1, r2 - 1]
    f.update(1).gpu_single_thread()
    r3 = hl.RDom([hl.Range(0, B)])
    f[r3, y] += f[-1, y]
    f.update(2).gpu_blocks(y).gpu_threads(r3)
    out = hl.Func("out")
    out[x] = f[x % B, x // B]
    xi = hl.Var("xi")
    out.gpu_tile(x, xi, B)
    out.bound(x, 0, im.width() // B * B)
    data = np.floor(np.sin(np.arange(n, dtype=np.float32)) * 100).astype(np.int32)
    im.set(hl.Buffer(data))
    got = np.asarray(out.realize([n], CUDA))
    np.testing.assert_array_equal(got, np.cumsum(data, dtype=np.int64).astype(np.int32))


# ------------------------------------------------------------------------------ gpu_transpose
def test_gpu_transpose(device):
    """Ports gpu_transpose: out(x, y) = in(y, x), tiled 64x64 (tiles fused into the y block
    index), each tile into 16x16 subtiles (fused into the x block index), 16x16 threads; the
    input wrapper is computed per subtile (shared memory) with its own 2-D threads. Halide uses
    256x256; here 128x128."""
    size = 256 if device == "gpu" else 128
    inp = hl.ImageParam(hl.UInt(8), 2, "in")
    x, y = hl.vars("x y")
    in_func = hl.Func("in_func")
    in_func[x, y] = inp[x, y]
    out = hl.Func("out")
    out[x, y] = in_func[y, x]
    xi, yi, xo, yo, xii, xio, yii, yio = hl.vars("xi yi xo yo xii xio yii yio")
    tile_idx, subtile_idx = hl.vars("tile_idx subtile_idx")
    (out.tile(x, y, xo, yo, xi, yi, 64, 64)
        .fuse(xo, yo, tile_idx)
        .tile(xi, yi, xio, yio, xii, yii, 16, 16)
        .fuse(xio, yio, subtile_idx)
        .gpu_blocks(subtile_idx, tile_idx)
        .gpu_threads(xii, yii))
    in_func.compute_at(out, subtile_idx).gpu_threads(x, y)
    yy, xx = np.mgrid[0:size, 0:size]
    data = (xx * 17 + yy).astype(np.uint8)
    inp.set(hl.Buffer(data))
    got = np.asarray(out.realize([size, size], CUDA))
    np.testing.assert_array_equal(got, (yy * 17 + xx).astype(np.uint8))
    np.testing.assert_array_equal(got, data.T)


# ------------------------------------------------------------------------------ gpu_vectorize
def _vectorized_gpu_tile(f, x, y, xi, yi):
    f.gpu_tile(x, y, xi, yi, 8, 8, GT.GuardWithIf).vectorize(xi, 4, GT.GuardWithIf)


def test_gpu_vectorize(device):
    """Ports gpu_vectorize: gpu_tile 8x8 with the thread loop xi vectorized by 4 (GuardWithIf),
    for three pipelines: x * y + 2.4; the same plus an input image; and a select on the input
    (+1 or -1 around 32) plus the input. Each matches numpy within Halide's 0.001."""
    yy, xx = np.mgrid[0:32, 0:32]
    xy = (xx * yy).astype(np.float32)
    image = (xx + yy).astype(np.float32)

    x, y, xi, yi = hl.vars("x y xi yi")
    f = hl.Func("f")
    f[x, y] = x * y + hl.f32(2.4)
    _vectorized_gpu_tile(f, x, y, xi, yi)
    np.testing.assert_allclose(np.asarray(f.realize([32, 32], CUDA)), xy + np.float32(2.4), atol=1e-3, rtol=0)

    im = hl.ImageParam(hl.Float(32), 2, "im")
    f2 = hl.Func("f")
    f2[x, y] = x * y + hl.f32(2.4) + im[x, y]
    _vectorized_gpu_tile(f2, x, y, xi, yi)
    im.set(hl.Buffer(image))
    np.testing.assert_allclose(np.asarray(f2.realize([32, 32], CUDA)), xy + np.float32(2.4) + image, atol=1e-3, rtol=0)

    im3 = hl.ImageParam(hl.Float(32), 2, "im")
    f3 = hl.Func("f")
    f3[x, y] = hl.select(im3[x, y] > 32.0, hl.f32(1.0), hl.f32(-1.0)) + im3[x, y]
    _vectorized_gpu_tile(f3, x, y, xi, yi)
    im3.set(hl.Buffer(image))
    want = np.where(image > 32, 1.0, -1.0).astype(np.float32) + image
    np.testing.assert_allclose(np.asarray(f3.realize([32, 32], CUDA)), want, atol=1e-3, rtol=0)


# ------------------------------------------------------------------------------ parallel_gpu_nested
def test_parallel_gpu_nested(device):
    """Ports parallel_gpu_nested: kernels launched from inside a parallel CPU loop (z parallel,
    x and y gpu_tile 16x16), with a Param in the kernel; equals x * y + 3z + 1 (Halide: 64^3;
    here 32x32x8)."""
    x, y, z, xi, yi = hl.vars("x y z xi yi")
    f = hl.Func("f")
    k = hl.Param(hl.Int(32), "k")
    k.set(3)
    f[x, y, z] = x * y + z * k + 1
    f.gpu_tile(x, y, xi, yi, 16, 16)
    f.parallel(z)
    sx, sy, sz = (64, 64, 64) if device == "gpu" else (32, 32, 8)
    got = np.asarray(f.realize([sx, sy, sz], CUDA))
    zz, yy, xx = np.mgrid[0:sz, 0:sy, 0:sx]
    np.testing.assert_array_equal(got, xx * yy + zz * 3 + 1)


# ------------------------------------------------------------------------------ gpu_bounds_inference_failure
def test_gpu_bounds_inference_failure(device):
    """Ports gpu_bounds_inference_failure (Halide issue 3221, once an assertion failure in
    bounds inference): two reductions used by two differences, one of them compute_root with a
    GPU block loop over p and nothing else, both read by a select. Halide's test expects it to
    compile for host-cuda; here it also runs: every value is 0."""
    x, y, p, d = hl.vars("x y p d")
    f1, f2 = hl.Func("f1"), hl.Func("f2")
    f1[x, y, p] = 0
    f2[x, y, p] = 0
    r = hl.RDom([hl.Range(0, 10), hl.Range(0, 10)])
    b1, b2 = hl.Func("b1"), hl.Func("b2")
    b1[p] = hl.f32(0.0)
    b1[p] += f1[r.x, r.y, p]
    b2[p] = hl.f32(0.0)
    b2[p] += f2[r.x, r.y, p]
    d1, d2 = hl.Func("d1"), hl.Func("d2")
    d1[p] = b1[p] - b2[p]
    d2[p] = b2[p] - b1[p]
    result = hl.Func("result")
    result[d, p] = hl.select(d == 0, d1[p], d2[p])
    d2.compute_root().gpu_blocks(p)
    result.compile_jit(hl.Target("host-cuda"))
    got = np.asarray(result.realize([2, 8], CUDA))
    np.testing.assert_array_equal(got, np.zeros((8, 2), np.float32))


# ------------------------------------------------------------------------------ invalid_gpu_loop_nests
def _invalid_nest(case, f, g, v, p):
    v0, v1, v2, v3, v4, v5, v6, v7 = v
    if case == "threads_without_blocks_on_output":
        g.gpu_threads(v0)
    elif case == "threads_without_blocks_on_compute_root":
        f.compute_root().gpu_threads(v0)
        g.gpu_blocks(v1).gpu_threads(v0)
    elif case == "too_many_block_loops":
        g.gpu_blocks(v0, v1).gpu_blocks(v2, v3)
    elif case == "too_many_thread_loops":
        g.gpu_threads(v0, v1).gpu_threads(v2, v3).gpu_blocks(v4)
    elif case == "threads_outside_blocks":
        g.gpu_blocks(v0).gpu_threads(v1)
    elif case == "blocks_inside_blocks":
        g.gpu_blocks(v0)
        f.compute_at(g, v0).gpu_blocks(v0)
    elif case == "compute_at_between_block_loops":
        g.gpu_blocks(v0, v1)
        f.compute_at(g, v1)
    elif case == "too_many_nested_thread_loops":
        g.gpu_threads(v0, v1).gpu_blocks(v2, v3)
        f.compute_at(g, v0).gpu_threads(v0, v1)
    elif case == "too_many_nested_thread_loops_in_specialization":
        g.gpu_threads(v0, v1).gpu_blocks(v2, v3)
        f.compute_at(g, v0).gpu_threads(v0).specialize(p).gpu_threads(v1)
    elif case == "serial_loop_between_block_loops":
        g.gpu_blocks(v5, v7)


INVALID_NESTS = ["threads_without_blocks_on_output", "threads_without_blocks_on_compute_root",
                 "too_many_block_loops", "too_many_thread_loops", "threads_outside_blocks",
                 "blocks_inside_blocks", "compute_at_between_block_loops", "too_many_nested_thread_loops",
                 "too_many_nested_thread_loops_in_specialization", "serial_loop_between_block_loops"]


@pytest.mark.parametrize("case", INVALID_NESTS)
def test_invalid_gpu_loop_nests(case, device):
    """Ports invalid_gpu_loop_nests: ten GPU loop nests Halide refuses when compiling (threads
    with no blocks around them, more than 3 block or thread dimensions, threads outside blocks,
    blocks inside blocks, a Func computed between two block loops, too many thread dimensions
    once nesting (or a specialization) is counted, a serial loop between block loops) of two
    8-D Funcs: each is an HalideError from compile_jit, whichever way the device runs."""
    v = hl.vars("v0 v1 v2 v3 v4 v5 v6 v7")
    p = hl.Param(hl.Bool(), "p")
    f, g = hl.Func("f"), hl.Func("g")
    f[tuple(v)] = v[0]
    g[tuple(v)] = f[tuple(v)]
    _invalid_nest(case, f, g, v, p)
    with pytest.raises(hl.HalideError) as info:
        g.compile_jit(CUDA)
    message = str(info.value)
    assert message and "Internal" not in type(info.value).__name__, message


# ------------------------------------------------------------------------------ cuda_8_bit_dot_product
DOT_TYPES = [  # (Out, A, B) as Halide's test lists them
    (hl.Int(32), hl.Int(8), hl.Int(8)), (hl.Int(32), hl.Int(8), hl.UInt(8)),
    (hl.Int(32), hl.UInt(8), hl.Int(8)), (hl.UInt(32), hl.UInt(8), hl.UInt(8)),
    (hl.Int(32), hl.Int(16), hl.Int(8)), (hl.Int(32), hl.Int(16), hl.UInt(8)),
    (hl.Int(32), hl.UInt(16), hl.Int(8)), (hl.UInt(32), hl.UInt(16), hl.UInt(8)),
    (hl.Int(32), hl.Int(8), hl.Int(16)), (hl.Int(32), hl.Int(8), hl.UInt(16)),
    (hl.Int(32), hl.UInt(8), hl.Int(16)), (hl.UInt(32), hl.UInt(16), hl.UInt(8)),
]
_NP = {str(t): np.dtype(n) for t, n in [(hl.Int(8), "int8"), (hl.UInt(8), "uint8"), (hl.Int(16), "int16"),
                                        (hl.UInt(16), "uint16"), (hl.Int(32), "int32"),
                                        (hl.UInt(32), "uint32")]}
# the emulated device compiles each pipeline with g++: it runs a sample of the combinations
_DOT_EMULATED = [(0, 4), (1, 4), (3, 4), (5, 4), (7, 16), (8, 4)]


def _dot_product(out_t, a_t, b_t, factor, target):
    x, y, xi, yi = hl.vars("x y xi yi")
    in_a, in_b = hl.Func("in_a"), hl.Func("in_b")
    in_a[x, y] = hl.cast(a_t, x - y * 17)
    in_a.compute_root()
    in_b[x, y] = hl.cast(b_t, x * 3 + y * 7)
    in_b.compute_root()
    g = hl.Func("g")
    r = hl.RDom([hl.Range(0, factor * 4)])
    g[x, y] += hl.cast(out_t, in_a[r, x]) * in_b[r, y]
    h = hl.Func("h")
    h[x, y] = g[x, y]
    g.update().atomic().vectorize(r, factor).unroll(r)
    h.gpu_tile(x, y, xi, yi, 32, 8, GT.RoundUp)
    out = hl.Buffer(out_t, [128, 128])
    h.realize(out, target)
    out.copy_to_host()

    rr = np.arange(factor * 4)
    idx = np.arange(128)
    a = (rr[None, :] - idx[:, None] * 17).astype(_NP[str(a_t)])  # a[x, r]
    b = (rr[None, :] * 3 + idx[:, None] * 7).astype(_NP[str(b_t)])  # b[y, r]
    want = np.einsum("xr,yr->yx", a.astype(np.int64), b.astype(np.int64)).astype(_NP[str(out_t)])
    np.testing.assert_array_equal(np.asarray(out), want, err_msg=f"{a_t} x {b_t} -> {out_t}, factor {factor}")
    return hl.Pipeline(h).cuda_source(target)


def _dot_products(cases, target):
    for index, factor in cases:
        out_t, a_t, b_t = DOT_TYPES[index]
        source = _dot_product(out_t, a_t, b_t, factor, target)
        kernels = source[source.index('extern "C" __global__'):]
        # g lives in each thread's own array: its atomic update is a plain one (CUDA's atomics
        # work on global and shared memory only)
        assert "atomic" not in kernels, kernels
        # each four products: bytes by bytes one dp4a, 16-bit values by bytes two dp2a (Halide
        # greps its PTX for them; the helpers are those instructions in inline PTX)
        if a_t.bits() == b_t.bits() == 8:
            assert kernels.count("hl_dp4a_") == factor, kernels
        else:
            assert kernels.count("hl_dp2a_lo_") == kernels.count("hl_dp2a_hi_") == factor, kernels


def test_cuda_8_bit_dot_product(device):
    """Ports cuda_8_bit_dot_product: g(x, y) += Out(a(r, x)) * b(r, y) over 4 * factor terms of
    8- and 16-bit inputs (twelve type combinations, factor 4 and 16), the update atomic,
    vectorized by factor and unrolled, h gpu_tile 32x8 RoundUp over 128x128, on Halide's target
    host-cuda-cuda_capability_61. Each equals numpy's sums (wrapping as the output type does),
    and each four products are one dp4a (bytes by bytes) or two dp2a (16-bit values by bytes), as
    Halide's test checks in its PTX. Halide's loop over a vector width its body never uses is
    dropped. The emulated device runs a sample, every signedness and both instructions."""
    cases = [(i, f) for i in range(len(DOT_TYPES)) for f in (4, 16)]
    _dot_products(_DOT_EMULATED if device == "emulated" else cases, hl.Target("host-cuda-cuda_capability_61"))


@pytest.mark.skipif(gpu_runtime.nvcc_path() is None and gpu_runtime._nvrtc() is None,
                    reason="neither nvcc nor NVRTC is installed")
def test_cuda_8_bit_dot_product_kernels_use_the_dot_product_instructions():
    """The PTX nvcc (or NVRTC) makes of the dot product's kernels holds the dp4a and dp2a
    instructions of the operands' signedness (what Halide's test greps for)."""
    for index, wanted in [(1, "dp4a.s32.u32"), (5, "dp2a.lo.s32.u32"), (8, "dp2a.hi.s32.s32")]:
        out_t, a_t, b_t = DOT_TYPES[index]
        x, y = hl.vars("x y")
        in_a, in_b, g, h = hl.Func("in_a"), hl.Func("in_b"), hl.Func("g"), hl.Func("h")
        in_a[x, y] = hl.cast(a_t, x - y)
        in_b[x, y] = hl.cast(b_t, x + y)
        r = hl.RDom([hl.Range(0, 8)])
        g[x, y] += hl.cast(out_t, in_a[r, x]) * in_b[r, y]
        h[x, y] = g[x, y]
        in_a.compute_root()
        in_b.compute_root()
        g.update().atomic().vectorize(r, 4).unroll(r)
        xi, yi = hl.vars("xi yi")
        h.gpu_tile(x, y, xi, yi, 32, 8, GT.RoundUp)
        ptx = gpu_runtime.compile_ptx(hl.Pipeline(h).cuda_source(CUDA), 80)
        assert wanted in ptx, (index, wanted)


def test_cuda_8_bit_dot_product_on_capability_70(device):
    """cuda_8_bit_dot_product's pipeline on host-cuda-cuda_capability_70: a sample of the type
    combinations, the same checks."""
    cases = [(0, 4)] if device == "emulated" else [(0, 16), (3, 4), (7, 16), (10, 4)]
    _dot_products(cases, hl.Target("host-cuda-cuda_capability_70"))


# ------------------------------------------------------------------------------ gpu_arg_types
def test_gpu_arg_types(device):
    """Ports gpu_arg_types: an int16 Param passed to a kernel (select(foo > x, 255, foo + x) in
    int16), the GPU result equal to the same Expr computed on the CPU, and to numpy."""
    x, tx = hl.vars("x tx")
    foo = hl.Param(hl.Int(16), "foo")
    e = hl.select(foo > x, hl.cast(hl.Int(16), 255), foo + hl.cast(hl.Int(16), x))
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = e
    g[x] = e
    foo.set(-1)
    f.gpu_tile(x, tx, 8)
    out = f.realize([256], CUDA)
    out2 = g.realize([256])
    out.copy_to_host()
    np.testing.assert_array_equal(np.asarray(out), np.asarray(out2))
    i = np.arange(256)
    want = np.where(-1 > i, 255, (np.int16(-1) + i.astype(np.int16))).astype(np.int16)
    np.testing.assert_array_equal(np.asarray(out), want)
