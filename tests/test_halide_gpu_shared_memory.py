"""Ports of Halide's GPU correctness tests about shared, heap and register storage inside
kernels, thread-loop fusion and barriers (test/correctness/*.cpp in Halide), run on pyhalide's
CUDA backend: serially on the CPU, on the emulated device (the CUDA C compiled as C++ with real
threads and barriers), and on a GPU where there is one. Sizes are smaller than Halide's where
the emulated device would otherwise take long; the schedules are Halide's."""

from __future__ import annotations

import gc
import os
import pickle
import signal
import traceback
import weakref

import numpy as np
import pytest

import pyhalide as hl

CUDA = hl.Target("host-cuda")
TS = hl.TailStrategy
MT = hl.MemoryType



def _isolated(fn):
    """fn() (which returns an array), run in a forked child on the emulated device, so that a
    kernel that crashes the process fails its test instead of ending the run."""
    if os.environ.get("PYHALIDE_CUDA_DEVICE") != "emulated" or not hasattr(os, "fork"):
        return fn()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: send back (ok, value or exception) and leave at once
        os.close(read)
        signal.alarm(120)
        try:
            reply = (True, fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the parent to raise
            reply = (False, exc)
        try:
            data = pickle.dumps(reply)
        except Exception:  # noqa: BLE001 - an exception that does not pickle: its text
            data = pickle.dumps((False, RuntimeError("".join(traceback.format_exception(reply[1])))))
        with os.fdopen(write, "wb") as out:
            out.write(data)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as inp:
        data = inp.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        pytest.fail(f"the emulated CUDA device crashed: signal {os.WTERMSIG(status)} "
                    f"({signal.Signals(os.WTERMSIG(status)).name})")
    ok, value = pickle.loads(data)
    if not ok:
        raise value
    return value


def _realize(f, sizes, target=CUDA):
    return _isolated(lambda: np.array(np.asarray(f.realize(sizes, target))))


def _grid(*sizes):
    """Coordinate arrays in numpy's (.., y, x) order for a Halide region of the given sizes."""
    return np.meshgrid(*[np.arange(s) for s in reversed(sizes)], indexing="ij")[::-1]


# ----------------------------------------------------------------------------- fuse_gpu_threads
def test_fuse_gpu_threads(device):
    """Port of fuse_gpu_threads: a tuple-valued producer vectorized and spread over the threads
    of the consumer's 64x16 tiles (the consumer vectorized by 4 over tx) must fuse into a
    16x16 thread block; Halide checks every thread loop runs over [0, 15]. Here: the one kernel
    is launched with 16x16x1 threads, and the result, with the sizes given by Params used in
    bound() and the input's constraints, is input + input."""
    from pyhalide.lower import finish_lowering, lower

    x, y, bx, by, tx, ty = hl.vars("x y bx by tx ty")
    width, height = hl.Param(hl.Int(32), "width"), hl.Param(hl.Int(32), "height")
    inp = hl.ImageParam(hl.Int(32), 2, "input")
    tup, consumer = hl.Func("tuple"), hl.Func("consumer")
    tup[x, y] = (inp[x, y], inp[x, y])
    consumer[x, y] = inp[x, y] + tup[x, y][0]
    inp.dim(0).set_bounds(0, width).dim(1).set_bounds(0, height).set_stride(width)
    consumer.compute_root().bound(x, 0, width).bound(y, 0, height) \
        .tile(x, y, bx, by, tx, ty, 64, 16, TS.ShiftInwards) \
        .vectorize(tx, 4, TS.ShiftInwards).gpu_blocks(bx, by).gpu_threads(tx, ty)
    tup.compute_at(consumer, bx).vectorize(x, 4, TS.RoundUp).gpu_threads(x, y)

    kernels = []
    finish_lowering(lower([consumer], CUDA).stmt, ["input", "consumer"], kernels=kernels)
    assert [k.threads for k in kernels] == [(16, 16, 1)]

    w, h = 128, 32
    data = (np.arange(w * h, dtype=np.int32).reshape(h, w) * 7) % 1000
    inp.set(hl.Buffer(data, "input_data"))
    width.set(w)
    height.set(h)
    np.testing.assert_array_equal(_realize(consumer, [w, h]), 2 * data)


# ----------------------------------------------------------------------------- gpu_dynamic_shared
@pytest.mark.parametrize("per_thread", [False, True])
@pytest.mark.parametrize("memory_type", [MT.GPUShared, MT.Heap])
def test_gpu_dynamic_shared(per_thread, memory_type, device):
    """Port of gpu_dynamic_shared: f computed per block (over the block's threads) or per thread,
    stored in shared or heap memory, where the amount of f each block needs, f(x) and f(2x),
    grows with the block index; g(x) = f(x) + f(2x) = 3x."""
    x, xi = hl.vars("x xi")
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = x
    g[x] = f[x] + f[2 * x]
    g.gpu_tile(x, xi, 16)
    if per_thread:
        f.compute_at(g, xi)
    else:
        f.compute_at(g, x).gpu_threads(x)
    f.store_in(memory_type)
    np.testing.assert_array_equal(_realize(g, [100]), 3 * np.arange(100))


# --------------------------------------------------------------------- gpu_mixed_shared_mem_types
def test_gpu_mixed_shared_mem_types(device):
    """Port of gpu_mixed_shared_mem_types: nine producers of different types (8 to 64-bit ints,
    float32), alternately in heap and shared memory, computed per block over its threads and
    summed as uint64; out(x) = 9 * (x / 16) + the sum of the offsets."""
    types = [hl.Int(8), hl.Int(16), hl.Int(32), hl.Int(64), hl.UInt(8), hl.UInt(16), hl.UInt(32), hl.UInt(64),
             hl.Float(32)]
    x, xi = hl.vars("x xi")
    out = hl.Func("out")
    e = hl.cast(hl.UInt(64), 0)
    offset = 0
    for i, t in enumerate(types):
        off = 0
        if t.is_int() or t.is_uint():
            # Halide computes 1 << (bits - 4) in a C int; for 64 bits that overflows, so the
            # offset (an int32 Expr either way) is taken as for 32 bits there.
            off = (1 << (min(t.bits(), 32) - 4)) + 17
        offset += off
        fi = hl.Func(f"mixed_f{i}")
        fi[x] = hl.cast(t, x / 16 + off)
        e = e + hl.cast(hl.UInt(64), fi[x])
        fi.compute_at(out, x).gpu_threads(x)
        fi.store_in(MT.GPUShared if i & 1 else MT.Heap)
    out[x] = e
    out.gpu_tile(x, xi, 23)
    got = _realize(out, [23 * 5])
    want = len(types) * (np.arange(23 * 5, dtype=np.uint64) // 16) + offset
    assert got.dtype == np.uint64
    np.testing.assert_array_equal(got, want)


# --------------------------------------------------------------- gpu_non_monotonic_shared_mem_size
def test_gpu_non_monotonic_shared_mem_size_1d(device):
    """Port of gpu_non_monotonic_shared_mem_size, case 1: the part of f one 32-wide block of g
    reads, f(x * (255 - x)), is non-monotonic in the block index; sized by naive interval
    arithmetic it would exceed shared memory, sized per block it fits."""
    x, xi = hl.vars("x xi")
    f, g = hl.Func("f"), hl.Func("g")
    size, tile = 256, 32
    f[x] = x
    g[x] = f[x * (size - 1 - x)]
    g.gpu_tile(x, xi, tile)
    f.compute_at(g, x)
    xs = np.arange(size)
    np.testing.assert_array_equal(_realize(g, [size]), xs * (size - 1 - xs))


@pytest.mark.parametrize("case", [2, 3, 4])
def test_gpu_non_monotonic_shared_mem_size_2d(case, device):
    """Port of gpu_non_monotonic_shared_mem_size, cases 2-4: f(x * (w - 1 - x), y * (h - 1 - y))
    computed per block, non-monotonic in both dimensions: in shared memory (case 2), in heap
    memory (case 3: each block its slice of one global allocation), and one producer in each
    (case 4)."""
    x, y, xi, yi = hl.vars("x y xi yi")
    g = hl.Func("g")
    if case == 2:
        w, h, tw, th = 64, 31, 2, 4
    elif case == 3:
        w, h, tw, th = 64, 64, 2, 2
    else:
        w, h, tw, th = 32, 32, 2, 2
    f1 = hl.Func("f1")
    f1[x, y] = x + y
    fx, fy = x * (w - 1 - x), y * (h - 1 - y)
    if case == 4:
        f2 = hl.Func("f2")
        f2[x, y] = x + y
        g[x, y] = f1[fx, fy] + f2[fx, fy]
    else:
        g[x, y] = f1[fx, fy]
    g.gpu_tile(x, y, xi, yi, tw, th)
    f1.compute_at(g, x)
    if case == 3:
        f1.store_in(MT.Heap)
    if case == 4:
        f1.store_in(MT.Heap)
        f2.compute_at(g, x).store_in(MT.GPUShared)
    gx, gy = _grid(w, h)
    want = gx * (w - 1 - gx) + gy * (h - 1 - gy)
    if case == 4:
        want = 2 * want
    np.testing.assert_array_equal(_realize(g, [w, h]), want)


# ------------------------------------------------------------------------ gpu_reuse_shared_memory
MEMORY_TYPES = [MT.GPUShared, MT.Heap]


@pytest.mark.parametrize("memory_type", MEMORY_TYPES)
def test_gpu_reuse_shared_memory_multi_thread_type(memory_type, device):
    """Port of gpu_reuse_shared_memory's multi_thread_type_test: a chain of five producers of
    mixed widths (uint8/16/32), each computed per 1x1 block over its own threads, whose shared
    (or heap) storage Halide reuses; every output is 32."""
    x, y, z, tx, ty = hl.vars("x y z thread_x thread_y")
    f1, f2, f3, f4, f5, f6 = (hl.Func(f"f{i}") for i in range(1, 7))
    f1[x, y, z] = hl.cast(hl.UInt(8), 1)
    f2[x, y, z] = hl.cast(hl.UInt(32), f1[x + 1, y, z] + f1[x, y + 1, z])
    f3[x, y, z] = hl.cast(hl.UInt(16), f2[x + 1, y, z] + f2[x, y + 1, z])
    f4[x, y, z] = hl.cast(hl.UInt(16), f3[x + 1, y, z] + f3[x, y + 1, z])
    f5[x, y, z] = hl.cast(hl.UInt(32), f4[x + 1, y, z] + f4[x, y + 1, z])
    f6[x, y, z] = hl.cast(hl.UInt(8), f5[x + 1, y, z] + f5[x, y + 1, z])
    f6.compute_root().gpu_tile(x, y, tx, ty, 1, 1)
    for fi in (f5, f4, f3, f2, f1):
        fi.compute_at(f6, x).gpu_threads(x, y).store_in(memory_type)
    sizes = [24, 24, 2]
    got = _realize(f6, sizes)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, np.full(sizes[::-1], 32, np.uint8))


@pytest.mark.parametrize("memory_type", MEMORY_TYPES)
def test_gpu_reuse_shared_memory_pyramid(memory_type, device):
    """Port of gpu_reuse_shared_memory's pyramid_test: ten levels, each reading the previous at
    2x, all computed per 3x4 block of the last, each split so its threads cover it; every
    output is 1."""
    levels = 10
    x, y, xo, xi, tx, ty = hl.vars("x y xo xi thread_x thread_y")
    funcs = [hl.Func(f"pyr{i}") for i in range(levels)]
    funcs[0][x, y] = 1
    for i in range(1, levels):
        funcs[i][x, y] = funcs[i - 1][2 * x, y]
    funcs[-1].compute_root().gpu_tile(x, y, tx, ty, 3, 4)
    for i in range(levels - 2, -1, -1):
        funcs[i].compute_at(funcs[-1], x).split(x, xo, xi, 1 << (levels - i - 1)) \
            .gpu_threads(xo, y).store_in(memory_type)
    sizes = [100, 100]
    np.testing.assert_array_equal(_realize(funcs[-1], sizes), np.ones(sizes[::-1], np.int32))


@pytest.mark.parametrize("memory_type", MEMORY_TYPES)
def test_gpu_reuse_shared_memory_inverted_pyramid(memory_type, device):
    """Port of gpu_reuse_shared_memory's inverted_pyramid_test: six levels, each reading the
    previous at half resolution, computed per 64x64 block of the last over 4x4 threads; every
    output is 1."""
    levels = 6
    x, y, xi, yi, xii, yii = hl.vars("x y xi yi xii yii")
    size = 8 * 16 * 4
    funcs = [hl.Func(f"ipyr{i}") for i in range(levels)]
    funcs[0][x, y] = 1
    for i in range(1, levels):
        funcs[i][x, y] = funcs[i - 1][x / 2, y]
    funcs[-1].compute_root().tile(x, y, xi, yi, 64, 64).gpu_blocks(x, y) \
        .tile(xi, yi, xii, yii, 16, 16).gpu_threads(xi, yi)
    for i in range(levels - 2, -1, -1):
        funcs[i].compute_at(funcs[-1], x).tile(x, y, xi, yi, 4, 4).gpu_threads(xi, yi).store_in(memory_type)
    funcs[-1].bound(x, 0, size).bound(y, 0, size)
    np.testing.assert_array_equal(_realize(funcs[-1], [size, size]), np.ones((size, size), np.int32))


@pytest.mark.parametrize("memory_type", MEMORY_TYPES)
def test_gpu_reuse_shared_memory_dynamic(memory_type, device):
    """Port of gpu_reuse_shared_memory's dynamic_shared_test: three producers per block whose
    sizes grow with the block index (each reads x and 2x), each split over 16 threads;
    f4(x) = 27x."""
    x, xo, xi, txo = hl.vars("x xo xi thread_xo")
    f1, f2, f3, f4 = (hl.Func(f"dyn{i}") for i in range(1, 5))
    f1[x] = x
    f2[x] = f1[x] + f1[2 * x]
    f3[x] = f2[x] + f2[2 * x]
    f4[x] = f3[x] + f3[2 * x]
    f4.split(x, xo, xi, 16).gpu_tile(xo, txo, 16)
    for fi in (f3, f2, f1):
        fi.compute_at(f4, xo).split(x, xo, xi, 16).gpu_threads(xi).store_in(memory_type)
    n = 500
    np.testing.assert_array_equal(_realize(f4, [n]), 27 * np.arange(n))


@pytest.mark.parametrize("memory_type", MEMORY_TYPES)
def test_gpu_reuse_shared_memory_repeated_realization(memory_type, device):
    """Port of gpu_reuse_shared_memory's repeated_realization_test: a tuple-valued producer
    realized once per iteration of an unrolled serial loop above the thread loops (so several
    copies of its block-level allocation share a name); c(x, y) = (x + y) + (x - (y + 1))."""
    x, y, xo, yo, xi, yi, ky = hl.vars("x y xo yo xi yi ky")
    p, c = hl.Func("p"), hl.Func("c")
    p[x, y] = (x + y, x - y)
    c[x, y] = p[x, y][0] + p[x, y + 1][1]
    c.tile(x, y, xo, yo, xi, yi, 32, 32).split(yi, ky, yi, 8).gpu_blocks(xo, yo) \
        .reorder(xi, yi, ky, xo, yo).gpu_threads(xi, yi).unroll(ky)
    p.compute_at(c, ky).store_in(memory_type)
    gx, gy = _grid(64, 64)
    np.testing.assert_array_equal(_realize(c, [64, 64]), (gx + gy) + (gx - (gy + 1)))


def test_gpu_reuse_shared_memory_repeated_register_realization(device):
    """Port of gpu_reuse_shared_memory's repeated_register_realization_test: a tuple-valued
    producer in registers, realized per iteration of an unrolled loop inside the thread loops;
    c(x) = 2 (x + 1) + (x - 1)."""
    x, xo, xi, u = hl.vars("x xo xi u")
    p, c = hl.Func("p"), hl.Func("c")
    p[x] = (x + 1, x - 1)
    c[x] = p[x][0] * 2 + p[x][1]
    c.split(x, xo, xi, 8).gpu_blocks(xo).split(xi, xi, u, 2).gpu_threads(xi).unroll(u)
    p.compute_at(c, u).store_in(MT.Register)
    xs = np.arange(256)
    np.testing.assert_array_equal(_realize(c, [256]), (xs + 1) * 2 + (xs - 1))


# ----------------------------------------------------------------------------- gpu_thread_barrier
def test_gpu_thread_barrier_flips(device):
    """Port of gpu_thread_barrier, first part: f computed per 16x8 block and flipped ten times in
    place, rows then columns, through scratch space, each update over the block's threads (the
    stages race unless separated by barriers); g = f(0, 0) + f(9, 7) = 709 everywhere."""
    x, y, xi, yi = hl.vars("x y xi yi")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + 100 * y
    passes = 10
    for _ in range(passes):
        rx = hl.RDom([hl.Range(0, 10)])
        f[rx + 10, y] = f[9 - rx, y]
        f[rx, y] = f[rx + 10, y]
        ry = hl.RDom([hl.Range(0, 8)])
        f[x, ry + 8] = f[x, 7 - ry]
        f[x, ry] = f[x, ry + 8]
    g[x, y] = f[0, 0] + f[9, 7]
    g.gpu_tile(x, y, xi, yi, 16, 8)
    f.compute_at(g, x)
    for i in range(passes):
        f.update(4 * i + 0).gpu_threads(y)
        f.update(4 * i + 1).gpu_threads(y)
        f.update(4 * i + 2).gpu_threads(x)
        f.update(4 * i + 3).gpu_threads(x)
    sizes = [64, 40]
    np.testing.assert_array_equal(_realize(g, sizes), np.full(sizes[::-1], 7 * 100 + 9))


def _undef_stages():
    x, y, xi, yi = hl.vars("x y xi yi")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = 0
    f[x, y] += hl.undef(hl.Int(32))
    f[x, y] += x + 100 * y
    f[x, y] += hl.undef(hl.Int(32))
    f[x, y] += y * 100 + x
    g[x, y] = f[0, 0] + f[7, 7]
    g.gpu_tile(x, y, xi, yi, 8, 8)
    f.compute_at(g, x)
    f.gpu_threads(x, y)
    f.update(0).gpu_threads(x, y)
    f.update(1).gpu_threads(x, y)
    f.update(2).gpu_threads(x, y)
    return g


def test_gpu_thread_barrier_undef_stages(device):
    """Port of gpu_thread_barrier, second part: f with undef update stages, per block over the
    block's threads. Halide counts three thread barriers in the lowered kernel (after the pure
    definition, between the two defined updates, between f and g); here the generated CUDA has
    three __syncthreads, and g = f(0, 0) + f(7, 7) = 2 * 707 (the undef stages are dropped)."""
    g = _undef_stages()
    source = hl.Pipeline(g).cuda_source(CUDA)
    kernels = source[source.index('extern "C" __global__'):]
    assert kernels.count("__syncthreads();") == 3
    sizes = [16, 16]
    np.testing.assert_array_equal(_realize(_undef_stages(), sizes), np.full(sizes[::-1], 2 * 707))


# -------------------------------------------------------------------- gpu_vectorized_shared_memory
def test_gpu_vectorized_shared_memory(device):
    """Port of gpu_vectorized_shared_memory (an OpenCL test in Halide, run here on CUDA): g and
    its update computed per block in shared memory, split over threads and vectorized by 4;
    h(x) = 4x + 90."""
    x, xo, xi = hl.vars("x xo xi")
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    f[x] = x
    g[x] = f[x - 1] + f[x + 1]
    r = hl.RDom([hl.Range(0, 10)])
    g[x] += hl.sum(r)
    h[x] = g[x - 1] + g[x + 1]
    f.compute_root()
    h.split(x, xo, xi, 16).vectorize(xi, 4).gpu_threads(xi).gpu_blocks(xo)
    g.compute_at(h, xo)
    g.split(x, xo, xi, 4).gpu_threads(xo).vectorize(xi)
    g.update().split(x, xo, xi, 4).gpu_threads(xo).vectorize(xi)
    np.testing.assert_array_equal(_realize(h, [512]), 4 * np.arange(512) + 90)


# -------------------------------------------------------------------------- shared_self_references
def test_shared_self_references(device):
    """Port of shared_self_references: updates of f that both use one Expr referring to f
    itself; once the Expr and f are gone, f is freed (Halide checks this under valgrind). Also
    the values: f(0) = f(1) = f(2) = 2, f computed at the root and read by a GPU kernel."""
    def build():
        x = hl.Var("x")
        f = hl.Func("f")
        f[x] = x
        e = f[2]
        f[0] = e
        f[1] = e
        return f

    f = build()
    ref = weakref.ref(f)
    del f
    gc.collect()
    assert ref() is None

    x, xo, xi = hl.vars("x xo xi")
    f = build()
    g = hl.Func("g")
    g[x] = f[x]
    g.gpu_tile(x, xo, xi, 8)
    f.compute_root()
    np.testing.assert_array_equal(_realize(g, [16]), [2, 2, 2, *range(3, 16)])


# --------------------------------------------------------------------- gpu_register_at_block_level
N_REG = 128


def _check_register_case(g, sizes, want):
    np.testing.assert_array_equal(_realize(g, sizes), want)


def test_gpu_register_at_block_level_one_element_per_thread(device):
    """Port of gpu_register_at_block_level, case 1: f in registers at block level, one element
    per thread, each thread reading back its own; g = 2 (x + 1000 y)."""
    x, y, xi, yi = hl.vars("x y xi yi")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + y * 1000
    g[x, y] = f[x, y] * 2
    g.gpu_tile(x, y, x, y, xi, yi, 16, 16)
    f.compute_at(g, x).store_in(MT.Register).gpu_threads(x, y)
    gx, gy = _grid(N_REG, N_REG)
    _check_register_case(g, [N_REG, N_REG], (gx + gy * 1000) * 2)


def test_gpu_register_at_block_level_several_elements_per_thread(device):
    """Port of gpu_register_at_block_level, case 2: each thread computes 4 unrolled elements of
    f in registers (computed per thread) and reads them back; g = 3 (x + 1000 y)."""
    x, y, xi, yi, xii = hl.vars("x y xi yi xii")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + y * 1000
    g[x, y] = f[x, y] + f[x, y] * 2
    g.gpu_tile(x, y, x, y, xi, yi, 32, 8).split(xi, xi, xii, 4).unroll(xii)
    f.compute_at(g, xi).store_in(MT.Register).unroll(x).unroll(y)
    gx, gy = _grid(N_REG, N_REG)
    _check_register_case(g, [N_REG, N_REG], (gx + gy * 1000) * 3)


def test_gpu_register_at_block_level_tile_per_thread(device):
    """Port of gpu_register_at_block_level, case 3: f in registers at block level, a 2x2 tile
    per thread walked by serial loops, matching the consumer's 2x2 tile per thread;
    g = 2 (x + 1000 y)."""
    x, y, xo, yo, xi, yi, xii, yii = hl.vars("x y xo yo xi yi xii yii")
    fxo, fyo, fxi, fyi = hl.vars("fxo fyo fxi fyi")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + y * 1000
    g[x, y] = f[x, y] * 2
    g.split(x, xo, xi, 32).split(y, yo, yi, 32).split(xi, xi, xii, 2).split(yi, yi, yii, 2) \
        .reorder(xii, yii, xi, yi, xo, yo).gpu_blocks(xo, yo).gpu_threads(xi, yi)
    f.compute_at(g, xo).store_in(MT.Register).split(x, fxo, fxi, 2).split(y, fyo, fyi, 2) \
        .reorder(fxi, fyi, fxo, fyo).gpu_threads(fxo, fyo)
    gx, gy = _grid(N_REG, N_REG)
    _check_register_case(g, [N_REG, N_REG], (gx + gy * 1000) * 2)


def test_gpu_register_at_block_level_two_stages(device):
    """Port of gpu_register_at_block_level, case 4: a pure definition and an update in
    registers at block level, both over the same threads; g = 2 (x + y)."""
    x, y, xi, yi = hl.vars("x y xi yi")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + y
    f[x, y] += x + y
    g[x, y] = f[x, y]
    g.gpu_tile(x, y, x, y, xi, yi, 16, 16)
    f.compute_at(g, x).store_in(MT.Register).gpu_threads(x, y)
    f.update().gpu_threads(x, y)
    gx, gy = _grid(N_REG, N_REG)
    _check_register_case(g, [N_REG, N_REG], 2 * (gx + gy))


def test_gpu_register_at_block_level_wrapper(device):
    """Port of gpu_register_at_block_level, case 5: a 2x2 unrolled tile per thread in registers
    at block level, read back through a wrapper computed per thread; g = 2 (x + 100 y)."""
    x, y, xi, yi, xii, yii = hl.vars("x y xi yi xii yii")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + y * 100
    g[x, y] = f[x, y] * 2
    g.tile(x, y, xi, yi, 32, 16).tile(xi, yi, xii, yii, 2, 2).gpu_blocks(x, y).gpu_threads(xi, yi) \
        .unroll(xii).unroll(yii)
    f.compute_at(g, x).store_in(MT.Register).tile(x, y, xii, yii, 2, 2).gpu_threads(x, y).unroll(xii).unroll(yii)
    f.in_().compute_at(g, xi).unroll(x).unroll(y)
    gx, gy = _grid(N_REG, N_REG)
    _check_register_case(g, [N_REG, N_REG], (gx + gy * 100) * 2)


# ----------------------------------------------------------------- gpu_store_in_register_with_no_lanes_loop
def test_gpu_store_in_register_with_no_lanes_loop(device):
    """Port of gpu_store_in_register_with_no_lanes_loop: f in registers per thread, fully
    unrolled, where the consumer's GuardWithIf tail makes the amount needed vary (so the
    allocation takes its upper bound); g(x, y) = x + y on a size not a multiple of the tile."""
    x, y, xi, yi, xii, yii = hl.vars("x y xi yi xii yii")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + y
    g[x, y] = f[x, y]
    g.compute_root().gpu_tile(x, y, xi, yi, 64, 16, TS.GuardWithIf).tile(xi, yi, xii, yii, 2, 2) \
        .unroll(xii).unroll(yii)
    f.compute_at(g, xi).store_in(MT.Register).unroll(x).unroll(y)
    sizes = [123, 71]
    gx, gy = _grid(*sizes)
    np.testing.assert_array_equal(_realize(g, sizes), gx + gy)


# ------------------------------------------------------------- gpu_dynamic_and_register_realization
def test_gpu_dynamic_and_register_realization(device):
    """Port of gpu_dynamic_and_register_realization: with only the output scheduled (gpu_tile,
    GuardWithIf), h_blur is realized twice in one kernel, as a scalar for v_blur's pure
    definition and as a window sized by the radius Param for its update; compared with a numpy
    separable blur of radius 3, shifted right by 4 and cast to int16."""
    x, y, xi, yi = hl.vars("x y xi yi")
    inp = hl.Func("input")
    inp[x, y] = hl.cast(hl.Int(16), (x * 7 + y * 13) % 100)
    radius = hl.Param(hl.Int(32), "radius")
    radius.set(3)
    h_blur, v_blur, result = hl.Func("h_blur"), hl.Func("v_blur"), hl.Func("result")
    rh = hl.RDom([hl.Range(1, radius)], "rh")
    h_blur[x, y] = hl.cast(hl.Int(32), inp[x, y])
    h_blur[x, y] += hl.cast(hl.Int(32), inp[x - rh.x, y]) + hl.cast(hl.Int(32), inp[x + rh.x, y])
    rv = hl.RDom([hl.Range(1, radius)], "rv")
    v_blur[x, y] = h_blur[x, y]
    v_blur[x, y] += h_blur[x, y - rv.x] + h_blur[x, y + rv.x]
    result[x, y] = hl.cast(hl.Int(16), v_blur[x, y] >> 4)
    result.gpu_tile(x, y, xi, yi, 16, 16, TS.GuardWithIf)

    r, w, h = 3, 33, 33
    gx, gy = _grid(w + 4 * r, h + 4 * r)
    src = ((gx - 2 * r) * 7 + (gy - 2 * r) * 13) % 100  # src[j, i] = input(i - 2r, j - 2r); % as Halide's
    # hb[j, i] = h_blur(i, j - r) for i in [0, w), j - r in [-r, h + r)
    hb = sum(src[r:r + h + 2 * r, 2 * r + d:2 * r + d + w] for d in range(-r, r + 1))
    vb = sum(hb[r + d:r + d + h] for d in range(-r, r + 1))
    want = (vb >> 4).astype(np.int16)
    got = _realize(result, [w, h])
    assert got.dtype == np.int16
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- dynamic_allocation_in_gpu_kernel
def test_dynamic_allocation_in_gpu_kernel(device):
    """Port of dynamic_allocation_in_gpu_kernel: five producers per block in heap memory whose
    size depends on a Param p, one per thread, alternating float and int; for each p,
    g(x, y) = 64 x + 64 y + 64 p + 320."""
    x, y, xi, yi = hl.vars("x y xi yi")
    f1, f2, f3, f4, f5, f6, g = (hl.Func(n) for n in "f1 f2 f3 f4 f5 f6 g".split())
    p = hl.Param(hl.Int(32), "p")
    f1[x, y] = hl.cast(hl.Float(32), x + y)
    f2[x, y] = hl.cast(hl.Int(32), f1[x, y] + f1[x + 1, y + 1])
    f3[x, y] = hl.cast(hl.Float(32), f2[x, y] + f2[x + 1, y + 1])
    f4[x, y] = hl.cast(hl.Int(32), f3[x, y] + f3[x + 1, y + 1])
    f5[x, y] = hl.cast(hl.Int(32), f4[x, y] + f4[x + 1, y + 1])
    f6[x, y] = hl.cast(hl.Float(32), f5[x, y] + f5[x + 1, y + 1])
    g[x, y] = f6[x, y] + f6[x + p, y + p]
    g.gpu_tile(x, y, xi, yi, 16, 8)
    for fi in (f1, f2, f3, f4, f5):
        fi.compute_at(g, x).store_in(MT.Heap)
    f6.compute_at(g, xi)
    w = h = 128
    gx, gy = _grid(w, h)
    for i in range(10):
        p.set(i)
        got = _realize(g, [w, h])
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, (64 * gx + 64 * gy + 64 * i + 320).astype(np.float32))


# ---------------------------------------------------------------------- vectorized_gpu_allocation
def test_vectorized_gpu_allocation(device):
    """Port of vectorized_gpu_allocation (Halide issue 3061): a 1x1 sum over an input, bounded
    to 2x2x3 and vectorized over the 3 channels inside the thread loops; the output equals the
    input."""
    x, y, c, xo, xi, yo, yi, co, ci = hl.vars("x y c xo xi yo yi co ci")
    data = np.arange(12, dtype=np.float32).reshape(3, 2, 2)
    inp = hl.Buffer(data, "input")
    func = hl.Func("func")
    r = hl.RDom([hl.Range(0, 1), hl.Range(0, 1)])
    func[x, y, c] = hl.sum(inp[x + r.x, y + r.y, c])
    func.bound(x, 0, 2).bound(y, 0, 2).bound(c, 0, 3) \
        .split(x, xo, xi, 2).split(y, yo, yi, 2).split(c, co, ci, 3) \
        .gpu_blocks(xo, yo, co).gpu_threads(xi, yi).reorder(xi, yi, ci, xo, yo, co).vectorize(ci)

    def run():
        output = hl.Buffer(hl.Float(32), [2, 2, 3])
        func.realize(output, CUDA)
        return np.array(np.asarray(output))

    np.testing.assert_array_equal(_isolated(run), data)
