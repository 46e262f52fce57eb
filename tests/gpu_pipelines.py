"""GPU-scheduled pipelines for the CUDA tests: each builder returns (pipeline, sizes, expected).

`expected` is what the same algorithm computes with no schedule on the CPU (pyhalide's default
schedule, checked against numpy elsewhere), so a test compares a GPU schedule with the meaning.
"""

from __future__ import annotations

import numpy as np

import pyhalide as hl

TS = hl.TailStrategy


def _v(*names):
    return [hl.Var(n) for n in names]


def _cpu(outputs, sizes):
    """The unscheduled pipeline's result (a fresh copy of the algorithm, run on the CPU)."""
    out = hl.Pipeline(outputs).realize(sizes, hl.Target("host"))
    return [np.array(np.asarray(b)) for b in (out if isinstance(out, list) else [out])]


def blur(schedule: bool = True, width=37, height=29):
    """Halide's 3x3 uint16 blur: blur_x computed per block in shared memory."""
    x, y, xo, yo, xi, yi = _v("x", "y", "xo", "yo", "xi", "yi")
    rng = np.random.default_rng(1)
    inp = hl.Buffer(rng.integers(0, 65535, (height + 2, width + 2), dtype=np.uint16), name="gblur_in")
    blur_x, blur_y = hl.Func("gblur_x"), hl.Func("gblur_y")
    blur_x[x, y] = (inp[x, y] + inp[x + 1, y] + inp[x + 2, y]) / 3
    blur_y[x, y] = (blur_x[x, y] + blur_x[x, y + 1] + blur_x[x, y + 2]) / 3
    if schedule:
        blur_y.gpu_tile(x, y, xo, yo, xi, yi, 16, 8, TS.GuardWithIf)
        blur_x.compute_at(blur_y, xo).gpu_threads(x, y)
    return blur_y, [width, height]


def gemm(schedule: bool = True, n=48):
    """float32 C = A B with 16x16 output tiles: per k-tile, the threads load A and B tiles into
    shared memory, meet at a barrier, and accumulate in a shared accumulator."""
    x, y, xo, yo, xi, yi = _v("x", "y", "xo", "yo", "xi", "yi")
    rng = np.random.default_rng(2)
    a = hl.Buffer(rng.random((n, n), dtype=np.float32), name="ggemm_a")  # a[k, y]
    b = hl.Buffer(rng.random((n, n), dtype=np.float32), name="ggemm_b")  # b[x, k]
    k = hl.RDom([(0, n)], name="gk")
    a_tile, b_tile, prod, out = hl.Func("ga_tile"), hl.Func("gb_tile"), hl.Func("gprod"), hl.Func("ggemm")
    a_tile[x, y] = a[x, y]
    b_tile[x, y] = b[x, y]
    prod[x, y] = 0.0
    prod[x, y] += a_tile[k.x, y] * b_tile[x, k.x]
    out[x, y] = prod[x, y]
    if schedule:
        ko, ki = hl.RVar("gko"), hl.RVar("gki")
        out.gpu_tile(x, y, xo, yo, xi, yi, 16, 16)
        prod.compute_at(out, xo).gpu_threads(x, y)
        prod.update().split(k.x, ko, ki, 16).reorder(ki, x, y, ko).gpu_threads(x, y)
        a_tile.compute_at(prod, ko).gpu_threads(x, y)
        b_tile.compute_at(prod, ko).gpu_threads(x, y)
    return out, [n, n]


def histogram(schedule: bool = True):
    """A scatter: every pixel adds one to its bin with an atomic compare-and-swap."""
    x = hl.Var("x")
    rng = np.random.default_rng(3)
    inp = hl.Buffer(rng.integers(0, 256, (30, 41), dtype=np.uint8), name="ghist_in")
    r = hl.RDom([(0, 41), (0, 30)], name="ghr")
    hist = hl.Func("ghist")
    hist[x] = 0
    hist[hl.i32(inp[r.x, r.y]) % 32] += 1
    if schedule:
        hist.gpu_tile(x, hl.Var("hxo"), hl.Var("hxi"), 8)
        hist.update().atomic().gpu_tile(r.x, r.y, hl.RVar("grxo"), hl.RVar("gryo"), hl.RVar("grxi"),
                                        hl.RVar("gryi"), 8, 4, TS.GuardWithIf)
    return hist, [32]


def byte_histogram(schedule: bool = True):
    """8-bit counts that wrap (over 256 pixels per bin), neighbouring bins sharing a 32-bit word:
    the atomic byte update swaps the whole word."""
    x = hl.Var("x")
    rng = np.random.default_rng(8)
    inp = hl.Buffer(rng.integers(0, 256, (40, 50), dtype=np.uint8), name="gbyte_in")
    r = hl.RDom([(0, 50), (0, 40)], name="gbr")
    hist = hl.Func("gbyte_hist")
    hist[x] = hl.u8(0)
    hist[hl.i32(inp[r.x, r.y]) % 6] += hl.u8(1)
    if schedule:
        hist.gpu_tile(x, hl.Var("bxo"), hl.Var("bxi"), 8)
        hist.update().atomic().gpu_tile(r.x, r.y, hl.RVar("gbxo"), hl.RVar("gbyo"), hl.RVar("gbxi"),
                                        hl.RVar("gbyi"), 16, 8, TS.GuardWithIf)
    return hist, [6]


def scatter_max(schedule: bool = True):
    """An atomic update that is not an add: a compare-and-swap loop per element (float32 max)."""
    x = hl.Var("x")
    rng = np.random.default_rng(6)
    inp = hl.Buffer(rng.standard_normal((17, 23), dtype=np.float32), name="gsmax_in")
    r = hl.RDom([(0, 23), (0, 17)], name="gsr")
    m = hl.Func("gsmax")
    m[x] = hl.f32(-1e30)
    key = hl.i32(hl.abs(inp[r.x, r.y]) * 100) % 8
    m[key] = hl.max(m[key], inp[r.x, r.y])
    if schedule:
        m.gpu_tile(x, hl.Var("mxo"), hl.Var("mxi"), 8)
        m.update().atomic().gpu_tile(r.x, hl.RVar("gsro"), hl.RVar("gsri"), 16, TS.GuardWithIf)
    return m, [8]


def mixed(schedule: bool = True):
    """A GPU stage, a CPU stage reading it, a GPU stage reading both: copies both ways."""
    x, y, xo, yo, xi, yi = _v("x", "y", "xo", "yo", "xi", "yi")
    inp = hl.Buffer(np.arange(24 * 20, dtype=np.int32).reshape(20, 24), name="gmix_in")
    f, g, h = hl.Func("gmix_f"), hl.Func("gmix_g"), hl.Func("gmix_h")
    f[x, y] = inp[x, y] * 3
    g[x, y] = f[x, y] + 1
    h[x, y] = g[x, y] * 2 + f[x, y]
    if schedule:
        f.compute_root().gpu_tile(x, y, xo, yo, xi, yi, 8, 4)
        g.compute_root()
        h.gpu_tile(x, y, xo, yo, xi, yi, 4, 4, TS.GuardWithIf)
    return h, [23, 19]


def registers(schedule: bool = True):
    """A producer computed per thread (local memory), 3-D gpu_tile, a single-thread update."""
    x, y, c = _v("x", "y", "c")
    xo, yo, co, xi, yi, ci = _v("xo", "yo", "co", "xi", "yi", "ci")
    inp = hl.Buffer(np.arange(3 * 10 * 13, dtype=np.float32).reshape(3, 10, 13) / 7, name="greg_in")
    f, g, out = hl.Func("greg_f"), hl.Func("greg_g"), hl.Func("greg_out")
    f[x, y, c] = inp[x, y, c] * 2 + 1
    g[x, y, c] = f[x, y, c] - f[x + 1, y, c] * 0.5
    out[x, y, c] = g[x, y, c]
    out[0, 0, 0] = out[0, 0, 0] + g[3, 2, 1]
    if schedule:
        g.compute_root().gpu_tile(x, y, c, xo, yo, co, xi, yi, ci, 4, 4, 2, TS.GuardWithIf)
        f.compute_at(g, xi)
        out.gpu_tile(x, y, xo, yo, xi, yi, 8, 8, TS.GuardWithIf)
        out.update().gpu_single_thread()
    return out, [11, 10, 3]


def one_block(schedule: bool = True):
    """The gpu(bx, tx) form, and a kernel of one block: the whole output split by its size."""
    x, xo, xi = _v("x", "xo", "xi")
    f, g = hl.Func("gto_f"), hl.Func("gto_g")
    f[x] = x * x - 7
    g[x] = f[x] + f[x + 1]
    if schedule:
        f.compute_root().split(x, xo, xi, 32, TS.GuardWithIf).gpu(xo, xi)
        g.bound(x, 0, 50).gpu_tile(x, xo, xi, 50)
    return g, [50]


def sized_at_launch(schedule: bool = True):
    """Sizes only the launch knows, as Halide allows: a producer computed per block whose part
    grows with the block (f(x) + f(2x): its thread loop and its shared memory sized by the host's
    loop over the blocks, dynamic shared memory), and a block of as many threads as the output
    is wide (gpu_blocks(y).gpu_threads(x))."""
    x, y, xi = _v("x", "y", "xi")
    f, g, out = hl.Func("gsl_f"), hl.Func("gsl_g"), hl.Func("gsl_out")
    f[x] = x * 3 - 1
    g[x] = f[x] + f[2 * x]
    out[x, y] = g[x] * (y + 1)
    if schedule:
        g.compute_root().gpu_tile(x, xi, 16)
        f.compute_at(g, x).gpu_threads(x)
        out.gpu_blocks(y).gpu_threads(x)
    return out, [40, 3]


def curve(schedule: bool = True):
    """The shape of Halide's GPU tutorial (lesson 12): a lookup table computed by its own kernel,
    a clamped and sharpened uint8 image, unrolled colour channels, the padded input per tile."""
    x, y, c, i, xo, yo, xi, yi = _v("x", "y", "c", "i", "xo", "yo", "xi", "yi")
    rng = np.random.default_rng(5)
    img = hl.Buffer(rng.integers(0, 256, (3, 21, 30), dtype=np.uint8), name="gcurve_in")
    lut, padded, sharpen, curved = hl.Func("glut"), hl.Func("gpadded"), hl.Func("gsharpen"), hl.Func("gcurved")
    lut[i] = hl.u8(hl.clamp(hl.sqrt(i / 255.0) * 255.0, 0, 255))
    padded[x, y, c] = hl.u16(img[hl.clamp(x, 0, 29), hl.clamp(y, 0, 20), c])
    sharpen[x, y, c] = padded[x, y, c] * 2 - (padded[x - 1, y, c] + padded[x, y - 1, c] + padded[x + 1, y, c]
                                             + padded[x, y + 1, c]) / 4
    curved[x, y, c] = lut[hl.clamp(sharpen[x, y, c], 0, 255)]
    if schedule:
        block, thread = hl.Var("block"), hl.Var("thread")
        lut.compute_root().split(i, block, thread, 16).gpu_blocks(block).gpu_threads(thread)
        curved.reorder(c, x, y).bound(c, 0, 3).unroll(c).gpu_tile(x, y, xo, yo, xi, yi, 8, 8)
        padded.compute_at(curved, xo).gpu_threads(x, y)
    return curved, [30, 21, 3]


BUILDERS = {"curve": curve, "blur": blur, "gemm": gemm, "histogram": histogram, "byte_histogram": byte_histogram,
            "mixed": mixed, "scatter_max": scatter_max, "registers": registers, "one_block": one_block,
            "sized_at_launch": sized_at_launch}


def expected(name: str) -> list[np.ndarray]:
    out, sizes = BUILDERS[name](schedule=False)
    return _cpu([out], sizes)
