"""Halide's CUDA atomics tests and its GPU error tests, ported to pyhalide.

Correctness (test/correctness/atomics.cpp, the CUDA and CUDAVectorize backends of its test
table): histograms updated with atomic() from GPU threads, a compare-and-swap update (min of a
sum), a chain of predicated updates and an rfactor'd histogram, for each element type Halide
runs on CUDA (uint32, int32, float32, uint64, int64, float64; Halide refuses 8/16-bit atomics
on CUDA, which pyhalide makes with a compare-and-swap of the word holding them).
To keep the emulated device's g++ compiles few, one Pipeline holds the six types' copies of a
case (one output Func per type, each scheduled as Halide's test schedules it); every output is
checked against a numpy model, and each pipeline is realized several times so that races would
show. The Tuple / mutex / store_at / extern / async cases of atomics.cpp, and all of
atomic_tuples.cpp, run on the CPU only in Halide and are not ported here.

Errors (test/error/*): schedules Halide refuses for a GPU target at compile time. Each must
raise hl.HalideError naming the Func and the reason, on every device: the serial one too, since
the target (host-cuda) and not the device decides what is legal. error/host_inside_gpu_loop is not
ported: its host() directive is not in Halide 21's Python bindings. Two of Halide's error tests
are programs pyhalide runs instead: an 8-bit atomic histogram, and a 5-D buffer on the GPU (a
placeholder that Halide 21 itself compiles).
"""

from __future__ import annotations

import numpy as np
import pytest

import pyhalide as hl

CUDA = hl.Target("host-cuda")
RUNS = 3  # realizations per pipeline: a missing atomic shows up as a race on the emulated device

# the element types Halide's atomics test runs on CUDA, and their numpy equivalents
GPU_ATOMIC_TYPES = {
    "uint32": (hl.UInt(32), np.uint32),
    "int32": (hl.Int(32), np.int32),
    "float32": (hl.Float(32), np.float32),
    "uint64": (hl.UInt(64), np.uint64),
    "int64": (hl.Int(64), np.int64),
    "float64": (hl.Float(64), np.float64),
}


# ------------------------------------------------------------------------------ schedules
def _atomic_on_gpu(stage, r, vectorize: bool, factor: int = 32, override: bool = False, tag: str = ""):
    """Halide's CUDA schedule for an atomic update over RVar r: split by `factor`, the outer part
    GPU blocks, the inner GPU threads; CUDAVectorize splits the inner part again by 4, makes the
    outer of that the threads and vectorizes the rest."""
    ro, ri, rio, rii = (hl.RVar(f"{n}{tag}") for n in ("ro", "ri", "rio", "rii"))
    s = stage.atomic(True) if override else stage.atomic()
    s = s.split(r, ro, ri, factor)
    if vectorize:
        s.split(ri, rio, rii, 4).gpu_blocks(ro).gpu_threads(rio).vectorize(rii)
    else:
        s.gpu_blocks(ro).gpu_threads(ri)


def _realize_each_type(build, sizes):
    """Build one output per element type, realize them together RUNS times; {type: [arrays]}."""
    outs = [build(t, name) for name, (t, _) in GPU_ATOMIC_TYPES.items()]
    p = hl.Pipeline(outs)
    runs = []
    for _ in range(RUNS):
        got = p.realize(sizes, CUDA)
        runs.append([np.asarray(b).copy() for b in got])
    return {name: [run[i] for run in runs] for i, name in enumerate(GPU_ATOMIC_TYPES)}


def _check_all(results, want_of_dtype):
    bad = []
    for name, runs in results.items():
        dtype = GPU_ATOMIC_TYPES[name][1]
        want = want_of_dtype(dtype)
        for k, got in enumerate(runs):
            if got.dtype != dtype or got.shape != want.shape or not np.array_equal(got, want):
                bad.append(f"{name} (run {k}): got {got.tolist()} ({got.dtype}), want {want.tolist()}")
    assert not bad, "\n".join(bad)


# ------------------------------------------------------------------------------ atomics.cpp
@pytest.mark.parametrize("vectorize", [False, True], ids=["CUDA", "CUDAVectorize"])
def test_atomics_parallel_hist(device, vectorize):
    """Ports atomics.cpp test_parallel_hist (CUDA, CUDAVectorize): hist(im(r)) += 1 over 10000
    values of (x*x) % 7, the update atomic() (Halide proves it associative: no override) with r
    split by 32 into GPU blocks and threads (and, vectorized, the threads' part split by 4 and
    vectorized). Each bin must hold its exact count, for every CUDA atomic type."""
    img, bins = 10000, 7

    def build(t, name):
        x = hl.Var("x")
        r = hl.RDom([(0, img)])
        im, hist = hl.Func(f"ph_im_{name}"), hl.Func(f"ph_hist_{name}")
        im[x] = (x * x) % bins
        hist[x] = hl.cast(t, 0)
        hist[im[r]] += hl.cast(t, 1)
        hist.compute_root()
        _atomic_on_gpu(hist.update(), r, vectorize, tag=name)
        return hist

    counts = np.bincount((np.arange(img) ** 2) % bins, minlength=bins)
    _check_all(_realize_each_type(build, [bins]), lambda dt: counts.astype(dt))


@pytest.mark.parametrize("vectorize", [False, True], ids=["CUDA", "CUDAVectorize"])
def test_atomics_parallel_cas_update(device, vectorize):
    """Ports atomics.cpp test_parallel_cas_update (CUDA, CUDAVectorize): hist(im(r)) =
    min(hist(im(r)) + 1, 100) over 1000 values of (x*x) % 13, which no atomic add can do (a
    compare-and-swap loop), scheduled atomic(override_associativity_test=True) over GPU blocks
    and threads as Halide does. Each bin is its count capped at 100."""
    img, bins = 1000, 13

    def build(t, name):
        x = hl.Var("x")
        r = hl.RDom([(0, img)])
        im, hist = hl.Func(f"cas_im_{name}"), hl.Func(f"cas_hist_{name}")
        im[x] = (x * x) % bins
        hist[x] = hl.cast(t, 0)
        hist[im[r]] = hl.min(hist[im[r]] + hl.cast(t, 1), hl.cast(t, 100))
        hist.compute_root()
        _atomic_on_gpu(hist.update(), r, vectorize, override=True, tag=name)
        return hist

    want = np.zeros(bins, np.int64)
    for i in range(img):
        k = (i * i) % bins
        want[k] = min(want[k] + 1, 100)
    _check_all(_realize_each_type(build, [bins]), lambda dt: want.astype(dt))


def _predicated_model(img: int, bins: int) -> np.ndarray:
    c = np.zeros(bins, np.int64)
    for i in range(0, img, 2):  # r.where(r % 2 == 0)
        k = (i * i) % bins
        c[k] += 1
        c[k] -= 1
        c[k] = min(c[k] + 1, 100)
    for i in range(img):  # r2.where(0 < hist(im(r2)) < 90), checked per iteration
        k = (i * i) % bins
        if 0 < c[k] < 90:
            c[k] -= 1
    for i in range(img):
        k = (i * i) % bins
        if 0 < c[k] < 90:
            c[k] = min(c[k] + 1, 100)
    return c


@pytest.mark.parametrize("vectorize", [False, True], ids=["CUDA", "CUDAVectorize"])
def test_atomics_predicated_hist(device, vectorize):
    """Ports atomics.cpp test_predicated_hist (CUDA, CUDAVectorize): over the even values of an
    RDom (r.where(r % 2 == 0)) three updates, += 1, -= 1 and the capped compare-and-swap, each
    atomic(True) on GPU blocks and threads; then two unscheduled updates over an RDom whose
    predicate reads hist itself (0 < hist < 90), which stay serial. Compared with a sequential
    model of the five updates."""
    img, bins = 1000, 13

    def build(t, name):
        x = hl.Var("x")
        r = hl.RDom([(0, img)])
        r.where(r % 2 == 0)
        im, hist = hl.Func(f"pr_im_{name}"), hl.Func(f"pr_hist_{name}")
        im[x] = (x * x) % bins
        one, cap = hl.cast(t, 1), hl.cast(t, 100)
        hist[x] = hl.cast(t, 0)
        hist[im[r]] += one
        hist[im[r]] -= one
        hist[im[r]] = hl.min(hist[im[r]] + one, cap)
        r2 = hl.RDom([(0, img)])
        r2.where((hist[im[r2]] > hl.cast(t, 0)) & (hist[im[r2]] < hl.cast(t, 90)))
        hist[im[r2]] -= one
        hist[im[r2]] = hl.min(hist[im[r2]] + one, cap)
        hist.update(3).unscheduled()
        hist.update(4).unscheduled()
        hist.compute_root()
        for u in range(3):
            _atomic_on_gpu(hist.update(u), r, vectorize, override=True, tag=f"{name}_{u}")
        return hist

    want = _predicated_model(img, bins)
    _check_all(_realize_each_type(build, [bins]), lambda dt: want.astype(dt))


@pytest.mark.parametrize("vectorize", [False, True], ids=["CUDA", "CUDAVectorize"])
def test_atomics_hist_compute_at(device, vectorize):
    """Ports atomics.cpp test_hist_compute_at (CUDA, CUDAVectorize): final(x, y) =
    hist((x + y) % 53), final compute_root and parallel over y, hist (1000 values of
    (x*x) % 53) computed per row of final, its update atomic() on GPU blocks and threads: the
    kernels are launched from inside a parallel CPU loop. Each of the 10x10 outputs is its bin."""
    img, bins = 1000, 53

    def build(t, name):
        x, y = hl.Var("x"), hl.Var("y")
        r = hl.RDom([(0, img)])
        im, hist, final = (hl.Func(f"ca_{n}_{name}") for n in ("im", "hist", "final"))
        im[x] = (x * x) % bins
        hist[x] = hl.cast(t, 0)
        hist[im[r]] += hl.cast(t, 1)
        final[x, y] = hist[(x + y) % bins]
        final.compute_root().parallel(y)
        hist.compute_at(final, y)
        _atomic_on_gpu(hist.update(), r, vectorize, tag=name)
        return final

    counts = np.bincount((np.arange(img) ** 2) % bins, minlength=bins)
    yy, xx = np.mgrid[0:10, 0:10]
    want = counts[(xx + yy) % bins]
    _check_all(_realize_each_type(build, [10, 10]), lambda dt: want.astype(dt))


@pytest.mark.parametrize("vectorize", [False, True], ids=["CUDA", "CUDAVectorize"])
def test_atomics_hist_rfactor(device, vectorize):
    """Ports atomics.cpp test_hist_rfactor (CUDA, CUDAVectorize): a 100x100 histogram of
    ((x+1)*(y+1)) % 7, rfactor'd over r.y into an intermediate (compute_root) whose update is
    atomic over r.x: split by 8 into GPU blocks and threads (CUDA), or atomic(True), split by
    32 then 4, vectorized (CUDAVectorize). hist sums the intermediate's rows."""
    img, bins = 100, 7

    def build(t, name):
        x, y = hl.Var("x"), hl.Var("y")
        r = hl.RDom([(0, img), (0, img)])
        im, hist = hl.Func(f"rf_im_{name}"), hl.Func(f"rf_hist_{name}")
        im[x, y] = ((x + 1) * (y + 1)) % bins
        hist[x] = hl.cast(t, 0)
        hist[im[r.x, r.y]] += hl.cast(t, 1)
        intermediate = hist.update().rfactor(r.y, y)
        intermediate.compute_root()
        hist.compute_root()
        if vectorize:
            _atomic_on_gpu(intermediate.update(), r.x, True, factor=32, override=True, tag=name)
        else:
            _atomic_on_gpu(intermediate.update(), r.x, False, factor=8, tag=name)
        return hist

    i, j = np.meshgrid(np.arange(img), np.arange(img))
    counts = np.bincount((((i + 1) * (j + 1)) % bins).ravel(), minlength=bins)
    _check_all(_realize_each_type(build, [bins]), lambda dt: counts.astype(dt))


# ------------------------------------------------------------------------------ test/error
def test_atomics_gpu_8_bit(device, fresh_func_names):
    """Ports error/atomics_gpu_8_bit, where pyhalide goes further than Halide: a uint8 histogram
    (10000 values of (x*x) % 7) updated atomic() on GPU blocks and threads (split by 8). CUDA has
    no 8-bit atomic add, so Halide refuses it; pyhalide updates the byte with a compare-and-swap
    of the 32-bit word holding it, and the counts wrap modulo 256 as the serial update's do."""
    x = hl.Var("x")
    r = hl.RDom([(0, 10000)])
    im, hist = hl.Func("im"), hl.Func("hist")
    im[x] = (x * x) % 7
    hist[x] = hl.u8(0)
    hist[im[r]] += hl.u8(1)
    hist.compute_root()
    ro, ri = hl.RVar("ro"), hl.RVar("ri")
    hist.update().atomic().split(r, ro, ri, 8).gpu_blocks(ro).gpu_threads(ri)
    xs = np.arange(10000, dtype=np.int64)
    want = (np.bincount((xs * xs) % 7, minlength=7) % 256).astype(np.uint8)
    np.testing.assert_array_equal(np.asarray(hist.realize([7], CUDA)), want)


def test_error_atomics_gpu_mutex(device, fresh_func_names):
    """Ports error/atomics_gpu_mutex: f(r) = (f(r)[1] + 1, f(r)[0] + 1), a Tuple update whose
    components feed each other, atomic() over GPU blocks and threads. It needs a mutex, which
    GPU threads cannot take (warps would deadlock): a compile error naming f's update (on the CPU
    the same update runs under a lock: tests/test_tuple_atomics.py)."""
    x = hl.Var("x")
    r = hl.RDom([(0, 10000)])
    f = hl.Func("f")
    f[x] = hl.Tuple(1, 0)
    f[r] = hl.Tuple(f[r][1] + 1, f[r][0] + 1)
    f.compute_root()
    with pytest.raises(hl.HalideError, match=r"Stage f\.s1 is atomic\(\) and stores several values \(a Tuple"):
        ro, ri = hl.RVar("ro"), hl.RVar("ri")
        f.update().atomic().split(r, ro, ri, 8).gpu_blocks(ro).gpu_threads(ri)
        f.realize([10000], CUDA)


def test_five_d_gpu_buffer(device, fresh_func_names):
    """Ports error/five_d_gpu_buffer, whose C++ fails unconditionally ("I should not have
    successfully compiled"; Halide 21 compiles the pipeline): a 5-D Func computed on the GPU
    (blocks over v3, v4, threads over v1, v2), read back by a 1-D consumer. pyhalide's device
    buffers have any number of dimensions: it computes the pipeline."""
    v = [hl.Var(f"v{i}") for i in range(5)]
    f, g = hl.Func("f"), hl.Func("g")
    f[v] = v[0] + 2 * v[1] + 4 * v[2] + 8 * v[3] + 16 * v[4]
    f.compute_root().gpu_blocks(v[3], v[4]).gpu_threads(v[1], v[2])
    i = v[0]
    g[i] = f[i % 2, (i / 2) % 2, (i / 4) % 2, (i / 8) % 2, (i / 16) % 2]
    np.testing.assert_array_equal(np.asarray(g.realize([32], CUDA)), np.arange(32))


# pyhalide's message for a block-level register Func (gpu_kernels.py), then the reason
_IN_REGISTERS = r"Func {} is stored in registers at the block level of kernel \S+, but "


def _xy():
    return (hl.Var(n) for n in ("x", "y", "xi", "yi"))


def test_error_gpu_register_crosstalk(device, fresh_func_names):
    """Ports error/gpu_register_crosstalk: f in registers, computed at g's block loop by all
    the block's threads (16x16), and g reads f(x - 1, y - 1), which a neighbouring thread
    stored: no thread has it in its own registers."""
    x, y, xi, yi = _xy()
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + y * 1000
    g[x, y] = f[x, y] * 2 + f[x - 1, y - 1]
    g.gpu_tile(x, y, x, y, xi, yi, 16, 16)
    f.compute_at(g, x).store_in(hl.MemoryType.Register).gpu_threads(x, y)
    with pytest.raises(hl.HalideError, match=_IN_REGISTERS.format("f") + r"threads .* both touch"):
        g.compile_jit(CUDA)


def test_error_gpu_register_shifted_between_threads(device, fresh_func_names):
    """Ports error/gpu_register_shifted_between_threads: g in registers at f's block loop, one
    thread per site, but f(x, y) reads g(2x, 2y), a site some other thread stored."""
    x, y, xi, yi = _xy()
    g, f = hl.Func("g"), hl.Func("f")
    g[x, y] = x + y
    f[x, y] = g[2 * x, 2 * y]
    f.gpu_tile(x, y, x, y, xi, yi, 16, 16)
    g.compute_at(f, x).store_in(hl.MemoryType.Register).gpu_threads(x, y)
    with pytest.raises(hl.HalideError, match=_IN_REGISTERS.format("g") + r"its accesses place threads differently"):
        f.compile_jit(CUDA)


def test_error_gpu_register_stages_disagree(device, fresh_func_names):
    """Ports error/gpu_register_stages_disagree: f in registers at g's block loop, its pure
    stage with threads (x, y) and its update reordered to threads (y, x), so the update reads
    sites the transposed thread initialised."""
    x, y, xi, yi = _xy()
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + y
    f[x, y] += x + y
    g[x, y] = f[x, y]
    g.gpu_tile(x, y, x, y, xi, yi, 16, 16)
    f.compute_at(g, x).store_in(hl.MemoryType.Register).gpu_threads(x, y)
    f.update().reorder(y, x).gpu_threads(y, x)
    with pytest.raises(hl.HalideError, match=_IN_REGISTERS.format("f") + r"its accesses place threads differently"):
        g.compile_jit(CUDA)


def test_error_gpu_register_stored_by_one_thread(device, fresh_func_names):
    """Ports error/gpu_register_stored_by_one_thread: a scalar f() = 42 in registers at g's
    block loop with no thread loops of its own: only one thread stores it, every thread reads
    its own (unwritten) copy."""
    x, y, xi, yi = _xy()
    f, g = hl.Func("f"), hl.Func("g")
    f[()] = 42
    g[x, y] = f[()] + x
    g.gpu_tile(x, y, x, y, xi, yi, 16, 16)
    f.compute_at(g, x).store_in(hl.MemoryType.Register)
    with pytest.raises(hl.HalideError, match=_IN_REGISTERS.format("f") + r"it is used outside the GPU thread loops"):
        g.compile_jit(CUDA)


def test_error_gpu_register_stored_by_one_warp(device, fresh_func_names):
    """Ports error/gpu_register_stored_by_one_warp: g(x) in registers at f's block loop with
    gpu_threads(x) only: the threads of row y == 0 store it, all rows read it."""
    x, y, xi, yi = _xy()
    g, f = hl.Func("g"), hl.Func("f")
    g[x] = x
    f[x, y] = g[x]
    f.gpu_tile(x, y, x, y, xi, yi, 16, 16)
    g.compute_at(f, x).store_in(hl.MemoryType.Register).gpu_threads(x)
    with pytest.raises(hl.HalideError, match=_IN_REGISTERS.format("g") + r"threads .* both touch"):
        f.compile_jit(CUDA)
