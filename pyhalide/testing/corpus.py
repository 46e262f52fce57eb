"""A corpus of small pipelines for schedule fuzzing.

Each entry of CASES is a function `build() -> Case` that defines a fresh copy of the algorithm
(schedules mutate Funcs, so every example builds again). Sizes are small so one realize takes
milliseconds once compiled. Inputs are deterministic (seeded numpy arrays).

A Case lists the Funcs a schedule may touch (`funcs`: the intermediates and the outputs, producers
first). Inputs that a schedule could make the pipeline read beyond (RoundUp and ShiftInwards
splits of intermediates grow the regions they compute) are reached through boundary conditions
or clamped coordinates, so that every valid schedule reads only inside the input buffers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import pyhalide as hl


@dataclass
class Case:
    name: str
    outputs: list  # the output Funcs, realized together as hl.Pipeline(outputs)
    sizes: list[int]
    funcs: list  # the Funcs a schedule may touch: intermediates and outputs
    reassociates: bool = False  # float results may change when a schedule reorders a reduction
    mins: list[int] | None = None  # the output region's min (None: all zero)
    notes: str = ""
    extra: dict = field(default_factory=dict)

    def pipeline(self) -> hl.Pipeline:
        """The pipeline of the outputs (one object per Case, so it compiles once)."""
        if "pipeline" not in self.extra:
            self.extra["pipeline"] = hl.Pipeline(self.outputs)
        return self.extra["pipeline"]

    def realize(self) -> list[np.ndarray]:
        """Run the pipeline with pyhalide; one array per output and Tuple element (numpy order)."""
        p = self.pipeline()
        if self.mins is None:
            result = p.realize(self.sizes)
        else:
            bufs = []
            for f in self.outputs:
                for t in f.types():
                    b = hl.Buffer(t, self.sizes)
                    b.set_min(*self.mins)
                    bufs.append(b)
            result = p.realize(bufs)
        if not isinstance(result, list):
            result = [result]
        return [np.array(np.asarray(b)) for b in result]

    def reference(self) -> list[np.ndarray]:
        from pyhalide import reference

        return [np.asarray(a) for a in reference.realize(self.outputs, self.sizes, self.mins)]


CASES: dict[str, Callable[[], Case]] = {}


def case(fn: Callable[[], Case]) -> Callable[[], Case]:
    CASES[fn.__name__] = fn
    return fn


def _ints(shape, dtype, seed: int, lo: int | None = None, hi: int | None = None) -> np.ndarray:
    info = np.iinfo(dtype)
    lo = info.min if lo is None else lo
    hi = info.max if hi is None else hi
    return np.random.default_rng(seed).integers(lo, hi + 1, shape, dtype=dtype)


def _vars(*names):
    return [hl.Var(n) for n in names]


# ---------------------------------------------------------------------------------------- cases
@case
def blur() -> Case:
    """Halide's separable 3x3 blur, uint16 (wrapping), repeat_edge boundary."""
    x, y = _vars("x", "y")
    inp = hl.Buffer(_ints((29, 37), np.uint16, 1), name="blur_in")
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    blur_x, blur_y = hl.Func("blur_x"), hl.Func("blur_y")
    blur_x[x, y] = (clamped[x - 1, y] + clamped[x, y] + clamped[x + 1, y]) / 3
    blur_y[x, y] = (blur_x[x, y - 1] + blur_x[x, y] + blur_x[x, y + 1]) / 3
    return Case("blur", [blur_y], [37, 29], [clamped, blur_x, blur_y])


@case
def stencil_chain() -> Case:
    """Four int32 stencil stages; s1 and s2 each have two consumers."""
    x, y = _vars("x", "y")
    inp = hl.Buffer(_ints((23, 31), np.int16, 2, -1000, 1000), name="chain_in")
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    s1, s2, s3, out = hl.Func("s1"), hl.Func("s2"), hl.Func("s3"), hl.Func("chain_out")
    s1[x, y] = hl.i32(clamped[x - 1, y]) + 2 * hl.i32(clamped[x, y]) + hl.i32(clamped[x + 1, y + 1])
    s2[x, y] = s1[x, y - 1] - s1[x, y + 1] + s1[x, y] * 3
    s3[x, y] = hl.max(s2[x - 2, y], s2[x + 1, y]) + hl.min(s1[x, y - 2], s2[x, y + 2])
    out[x, y] = s3[x - 1, y - 1] + s3[x + 1, y + 1] - s2[x, y]
    return Case("stencil_chain", [out], [31, 23], [clamped, s1, s2, s3, out])


@case
def histogram() -> Case:
    """An RDom over an input image; the update writes at a data-dependent, clamped index."""
    x, y = _vars("x", "y")
    img = _ints((30, 40), np.uint8, 3)
    inp = hl.Buffer(img, name="hist_in")
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    scaled, hist, out = hl.Func("scaled"), hl.Func("hist"), hl.Func("hist_out")
    scaled[x, y] = (hl.i32(clamped[x, y]) * 7 + x) % 53
    r = hl.RDom([(0, 40), (0, 30)], name="hr")
    hist[x] = 0
    hist[hl.clamp(scaled[r.x, r.y] - 3, 0, 47)] += 1
    out[x] = hist[x] * 3 + hist[hl.max(x - 1, 0)]
    return Case("histogram", [out], [48], [clamped, scaled, hist, out])


@case
def argmin_window() -> Case:
    """Where each 3x4 window's minimum is: a Tuple reduction whose value and coordinates are read
    by the output. The values in a window the output reads are distinct: a schedule may reorder
    an argmin's RVars (as Halide's may), which changes which of equal minima wins (ties are
    tested in tests/test_rfactor_tuples.py and against Halide by the differential fuzz)."""
    x, y = _vars("x", "y")
    img = np.fromfunction(lambda j, i: (i * 5 + j * 17) % 251, (30, 30)).astype(np.uint8)
    clamped = hl.BoundaryConditions.repeat_edge(hl.Buffer(img, name="am_in"))
    r = hl.RDom([(0, 3), (0, 4)], name="ar")
    am, out = hl.Func("argmin_win"), hl.Func("argmin_out")
    am[x, y] = hl.Tuple([hl.u8(255), hl.i32(-1)])
    best, new = am[x, y][0], clamped[x + r.x, y + r.y]
    am[x, y] = hl.Tuple([hl.min(best, new), hl.select(best < new, am[x, y][1], r.x + 3 * r.y)])
    out[x, y] = hl.i32(am[x, y][0]) * 16 + am[x, y][1]
    return Case("argmin_window", [out], [13, 11], [clamped, am, out])


@case
def matmul_f32() -> Case:
    """float32 matrix multiply with an RDom; reordering the reduction reassociates the sums."""
    x, y = _vars("x", "y")
    rng = np.random.default_rng(4)
    a = rng.random((20, 13), dtype=np.float32)  # A[k, y]
    b = rng.random((13, 24), dtype=np.float32)  # B[x, k]
    A = hl.BoundaryConditions.repeat_edge(hl.Buffer(a, name="mm_A"))
    B = hl.BoundaryConditions.repeat_edge(hl.Buffer(b, name="mm_B"))
    k = hl.RDom([(0, 13)], name="k")
    C, out = hl.Func("C"), hl.Func("mmf_out")
    C[x, y] = 0.0
    C[x, y] += A[k, y] * B[x, k]
    out[x, y] = C[x, y] * 0.5 + C[x, y - 1]
    return Case("matmul_f32", [out], [24, 20], [A, B, C, out], reassociates=True)


@case
def matmul_i32() -> Case:
    """int32 matrix multiply over a 2-D RDom, as the output's own update."""
    x, y = _vars("x", "y")
    A = hl.Buffer(_ints((19, 11), np.int32, 5, -50, 50), name="mi_A")  # A[k, y]
    B = hl.Buffer(_ints((11, 17), np.int32, 6, -50, 50), name="mi_B")  # B[x, k]
    bias = hl.Func("bias")
    bias[x] = x * 3 - 7
    r = hl.RDom([(0, 11), (0, 2)], name="mr")
    C = hl.Func("Ci")
    C[x, y] = bias[x]
    C[x, y] += A[r.x, y] * B[x, r.x] * (r.y + 1)
    return Case("matmul_i32", [C], [17, 19], [bias, C])


@case
def scan() -> Case:
    """Cumulative sums along x, then along y (an integral image): updates that carry a dependency."""
    x, y = _vars("x", "y")
    W, H = 23, 17
    inp = hl.Buffer(_ints((H, W), np.uint8, 7), name="scan_in")
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    row, col = hl.Func("row"), hl.Func("col")
    rx = hl.RDom([(1, W - 1)], name="rx")
    ry = hl.RDom([(1, H - 1)], name="ry")
    row[x, y] = hl.i32(clamped[x, y])
    row[rx, y] = row[rx, y] + row[rx - 1, y]
    col[x, y] = row[x, y]
    col[x, ry] += col[x, ry - 1]
    return Case("scan", [col], [W, H], [clamped, row, col])


@case
def pyramid() -> Case:
    """Downsample by 2 twice, then upsample by 2 twice (nearest and averaged)."""
    x, y = _vars("x", "y")
    inp = hl.Buffer(_ints((24, 32), np.uint8, 8), name="pyr_in")
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    d1, d2, u1, out = hl.Func("d1"), hl.Func("d2"), hl.Func("u1"), hl.Func("pyr_out")
    c = hl.u16(clamped[2 * x - 1, 2 * y]) + 2 * hl.u16(clamped[2 * x, 2 * y]) + hl.u16(clamped[2 * x + 1, 2 * y + 1])
    d1[x, y] = c / 4
    d2[x, y] = (d1[2 * x, 2 * y] + d1[2 * x + 1, 2 * y + 1]) / 2
    u1[x, y] = (d2[x / 2, y / 2] * 3 + d2[(x + 1) / 2, (y + 1) / 2]) / 4
    out[x, y] = hl.i32(u1[x / 2, y / 2]) - hl.i32(clamped[x, y])
    return Case("pyramid", [out], [30, 22], [clamped, d1, d2, u1, out])


@case
def tuples() -> Case:
    """Tuple-valued Funcs: a pure Tuple stage, a Tuple reduction, and a Tuple output."""
    x, y = _vars("x", "y")
    inp = hl.Buffer(_ints((21, 26), np.uint8, 9), name="tup_in")
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    mm, acc, out = hl.Func("minmax"), hl.Func("acc"), hl.Func("tup_out")
    mm[x, y] = hl.Tuple(hl.min(clamped[x - 1, y], clamped[x + 1, y]), hl.max(clamped[x, y - 1], clamped[x, y + 1]))
    r = hl.RDom([(-1, 3)], name="tr")
    acc[x, y] = hl.Tuple(hl.i32(0), hl.f32(0))
    # half-integers summed in float32 are exact here, so any order of the sum gives the same bits
    acc[x, y] = hl.Tuple(acc[x, y][0] + hl.i32(mm[x + r, y][0]), acc[x, y][1] + hl.f32(mm[x, y + r][1]) * 0.5)
    out[x, y] = hl.Tuple(acc[x, y][0] - hl.i32(mm[x, y][1]), acc[x, y][1])
    return Case("tuples", [out], [26, 21], [clamped, mm, acc, out])


@case
def rdom_where() -> Case:
    """Updates over RDoms with `where`: a disc dilation, and a predicate on the pure Var."""
    x, y = _vars("x", "y")
    inp = hl.Buffer(_ints((19, 25), np.uint8, 10), name="where_in")
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    dil, g, out = hl.Func("dilate"), hl.Func("wsum"), hl.Func("where_out")
    r = hl.RDom([(-2, 5), (-2, 5)], name="disc")
    r.where(r.x * r.x + r.y * r.y <= 4)
    dil[x, y] = clamped[x, y]
    dil[x, y] = hl.max(dil[x, y], clamped[x + r.x, y + r.y])
    r2 = hl.RDom([(0, 4)], name="wr")
    r2.where((x + y + r2) % 3 != 0)
    g[x, y] = hl.i32(dil[x, y])
    g[x, y] += hl.i32(dil[x + r2, y]) * (r2 + 1)
    out[x, y] = g[x, y] - g[x, y - 1]
    return Case("rdom_where", [out], [25, 19], [clamped, dil, g, out])


@case
def multi_output() -> Case:
    """hl.Pipeline([f, g]): a shared intermediate, and one used by a single output."""
    x, y = _vars("x", "y")
    inp = hl.Buffer(_ints((18, 27), np.uint8, 11), name="mo_in")
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    a, b, f, g = hl.Func("mo_a"), hl.Func("mo_b"), hl.Func("mo_f"), hl.Func("mo_g")
    a[x, y] = hl.i16(clamped[x, y]) * 3 - 100
    b[x, y] = a[x - 1, y] + a[x + 1, y]
    f[x, y] = b[x, y - 1] + b[x, y + 1]
    g[x, y] = a[x, y] * 2 - a[x, y + 2]
    return Case("multi_output", [f, g], [27, 18], [clamped, a, b, f, g])


@case
def multi_update() -> Case:
    """A Func with four update stages of different shapes."""
    x, y = _vars("x", "y")
    inp = hl.Buffer(_ints((15, 22), np.uint8, 12), name="mu_in")
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    f, out = hl.Func("mu_f"), hl.Func("mu_out")
    f[x, y] = hl.i32(clamped[x, y])
    f[x, y] += x * 2 - y
    r = hl.RDom([(0, 10)], name="mur")
    f[r, y] = f[r, y] * 3 + f[r + 1, y]
    f[x, 2] = f[x, 1] + f[x, 3]
    rr = hl.RDom([(0, 3), (1, 4)], name="mur2")
    f[x, y] = f[x, y] + rr.x * rr.y
    out[x, y] = f[x, y] + f[x + 1, y - 1]
    return Case("multi_update", [out], [20, 15], [clamped, f, out])


@case
def three_d() -> Case:
    """(x, y, c): a per-channel gain, a spatial stencil, and a channel shuffle."""
    x, y, c = _vars("x", "y", "c")
    inp = hl.Buffer(_ints((3, 13, 17), np.uint8, 13), name="rgb_in")  # [x=17, y=13, c=3]
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    gain, bright, blur, out = hl.Func("gain"), hl.Func("bright"), hl.Func("blur3"), hl.Func("rgb_out")
    gain[c] = c * 2 + 1
    bright[x, y, c] = hl.i16(clamped[x, y, c]) * hl.i16(gain[c])
    blur[x, y, c] = (bright[x - 1, y, c] + bright[x + 1, y, c] + bright[x, y - 1, c] + bright[x, y + 1, c]) / 4
    out[x, y, c] = blur[x, y, c] - blur[x, y, (c + 1) % 3] / 2
    return Case("three_d", [out], [17, 13, 3], [clamped, gain, bright, blur, out])


@case
def image_param() -> Case:
    """An ImageParam and two Params (int and float), coordinates clamped by hand."""
    x, y = _vars("x", "y")
    ip = hl.ImageParam(hl.UInt(8), 2, "ip_in")
    ip.set(hl.Buffer(_ints((16, 21), np.uint8, 14)))
    off = hl.Param(hl.Int(32), "off", 3)
    gain = hl.Param(hl.Float(32), "gain", 1.5)
    a, out = hl.Func("ip_a"), hl.Func("ip_out")
    # products by 1.5 and 0.25 of bytes and their sums are exact in float32
    a[x, y] = hl.f32(ip[hl.clamp(x + off, 0, ip.width() - 1), hl.clamp(y - 1, 0, ip.height() - 1)]) * gain
    out[x, y] = hl.u8_sat(a[x, y] + a[x + 1, y] * 0.25 - a[x, y + off] * 0.5)
    return Case("image_param", [out], [21, 16], [a, out])


@case
def divmod_negative() -> Case:
    """Euclidean / and % by negative numbers and by zero (which gives zero)."""
    x, y = _vars("x", "y")
    inp = hl.Buffer(_ints((17, 19), np.int16, 15, -60, 60), name="dm_in")
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    a, q, r, out = hl.Func("dm_a"), hl.Func("dm_q"), hl.Func("dm_r"), hl.Func("dm_out")
    a[x, y] = hl.i32(clamped[x, y])
    q[x, y] = a[x, y] / (y - 7) + a[x, y] % (x - 9) + (a[x, y] - 13) / -3 + a[x, y] % -7
    r[x, y] = q[x - 1, y] // -4 + (q[x, y] - x) % (-(y % 5) - 1)
    out[x, y] = r[x, y] * 2 + q[x, y + 1] % -5 + (x - 10) / -3
    return Case("divmod_negative", [out], [19, 17], [clamped, a, q, r, out])


@case
def boundaries() -> Case:
    """mirror_image, constant_exterior, mirror_interior and repeat_image, over a region with negative mins."""
    x, y = _vars("x", "y")
    img = _ints((15, 19), np.uint8, 16)
    bufs = [hl.Buffer(img, name=f"bc_in{i}") for i in range(4)]
    m = hl.BoundaryConditions.mirror_image(bufs[0])
    ce = hl.BoundaryConditions.constant_exterior(bufs[1], 7)
    mi = hl.BoundaryConditions.mirror_interior(bufs[2])
    ri = hl.BoundaryConditions.repeat_image(bufs[3])
    a, b, out = hl.Func("bc_a"), hl.Func("bc_b"), hl.Func("bc_out")
    a[x, y] = hl.i32(m[x - 3, y + 2]) + hl.i32(ce[x + 2, y - 1]) * 2
    b[x, y] = a[x, y] - hl.i32(mi[x, y - 4]) + hl.i32(ri[x + 5, y])
    out[x, y] = b[x - 1, y] + b[x + 1, y + 1]
    return Case("boundaries", [out], [27, 23], [m, ce, mi, ri, a, b, out], mins=[-4, -3])


@case
def inline_reductions() -> Case:
    """hl.sum, hl.maximum, hl.minimum and hl.argmax inside pure definitions."""
    x, y = _vars("x", "y")
    inp = hl.Buffer(_ints((18, 23), np.uint8, 17), name="ir_in")
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    r = hl.RDom([(-1, 3), (-1, 3)], name="box")
    r2 = hl.RDom([(0, 4)], name="row4")
    s = hl.sum(hl.i32(clamped[x + r.x, y + r.y]), "local_sum")
    mx = hl.maximum(clamped[x + r.x, y + r.y], "local_max")
    mn = hl.minimum(hl.i16(clamped[x + r2, y]) - 50, "local_min")
    am = hl.argmax(clamped[x, y + r2], "local_argmax")
    blur, out = hl.Func("ir_blur"), hl.Func("ir_out")
    blur[x, y] = s / 9
    out[x, y] = blur[x, y] + hl.i32(mx) * 2 - hl.i32(mn) + am[0] * 100
    funcs = [clamped, s.function(), mx.function(), mn.function(), am[0].function(), blur, out]
    return Case("inline_reductions", [out], [23, 18], funcs)


@case
def local_laplacian_lite() -> Case:
    """A small multi-branch graph: two blurs of one input meeting again, with a float stage."""
    x, y = _vars("x", "y")
    inp = hl.Buffer(_ints((20, 28), np.uint16, 18, 0, 4000), name="ll_in")
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    f = hl.Func("ll_f")
    f[x, y] = hl.f32(clamped[x, y]) * 0.25  # exact
    bx, by, hx, hy, out = (hl.Func(n) for n in ("ll_bx", "ll_by", "ll_hx", "ll_hy", "ll_out"))
    bx[x, y] = f[x - 1, y] + f[x, y] + f[x + 1, y]
    by[x, y] = bx[x, y - 1] + bx[x, y] + bx[x, y + 1]
    hx[x, y] = f[x - 2, y] - f[x + 2, y]
    hy[x, y] = hx[x, y - 2] + hx[x, y + 2]
    out[x, y] = hl.i32(by[x, y]) - hl.i32(hy[x, y] * 0.5)
    return Case("local_laplacian_lite", [out], [28, 20], [clamped, f, bx, by, hx, hy, out])


@case
def reduction_chain() -> Case:
    """A column sum feeding a row sum (2-D RDom), both intermediates, int32."""
    x, y = _vars("x", "y")
    inp = hl.Buffer(_ints((16, 20), np.uint8, 19), name="rc_in")
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    colsum, win, out = hl.Func("rc_colsum"), hl.Func("rc_win"), hl.Func("rc_out")
    ry = hl.RDom([(0, 16)], name="rcy")
    colsum[x] = 0
    colsum[x] += hl.i32(clamped[x, ry])
    rw = hl.RDom([(-2, 5), (0, 2)], name="rcw")
    win[x, y] = y
    win[x, y] += colsum[x + rw.x] * (rw.y + 1) - hl.i32(clamped[x, y + rw.y])
    out[x, y] = win[x, y] - colsum[x]
    return Case("reduction_chain", [out], [20, 16], [clamped, colsum, win, out])


@case
def scatter_network() -> Case:
    """hl.scatter/gather: columns of 8 sorted in place by a compare-and-swap network read from a
    buffer (an RDom over its links, two sites each, bounded by unsafe_promise_clamped), then a
    rotation of three rows in one update, read by a stencil."""
    x, y = _vars("x", "y")
    inp = hl.Buffer(_ints((8, 23), np.int16, 20), name="sn_in")
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    links = hl.Buffer(np.array([[0, 1], [2, 3], [4, 5], [6, 7], [0, 2], [1, 3], [4, 6], [5, 7], [1, 2], [5, 6],
                                [0, 4], [3, 7], [1, 5], [2, 6], [1, 4], [3, 6], [2, 4], [3, 5], [3, 4]], np.int32),
                      name="sn_links")
    sort, out = hl.Func("sn_sort"), hl.Func("sn_out")
    sort[x, y] = hl.i32(clamped[x, y])
    r = hl.RDom([(0, 19)], name="snr")
    lo = hl.unsafe_promise_clamped(links[0, r], 0, 7)
    hi = hl.unsafe_promise_clamped(links[1, r], 0, 7)
    sort[x, hl.scatter(lo, hi)] = hl.gather(hl.min(sort[x, lo], sort[x, hi]), hl.max(sort[x, lo], sort[x, hi]))
    sort[x, hl.scatter(0, 3, 7)] = hl.gather(sort[x, 3], sort[x, 7], sort[x, 0] * 2)
    out[x, y] = sort[x - 1, y] + 2 * sort[x, y] - sort[x + 1, 7 - y]
    return Case("scatter_network", [out], [23, 8], [clamped, sort, out])


@case
def bfloat16_stages() -> Case:
    """bfloat16 storage and arithmetic (each operation in float32, rounded): a blur of an input of
    halves, a column sum over an RDom (exact in bfloat16 whatever order a schedule gives it: its
    values are halves under 128), a select, and a rounding multiply, stored as bfloat16."""
    import ml_dtypes

    x, y = _vars("x", "y")
    halves = _ints((21, 27), np.int32, 21, 0, 15).astype(np.float32) / 2
    inp = hl.Buffer(halves.astype(ml_dtypes.bfloat16), name="bf_in")
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    bf = hl.BFloat(16)
    row, col, out = hl.Func("bf_row"), hl.Func("bf_col"), hl.Func("bf_out")
    row[x, y] = clamped[x - 1, y] + clamped[x, y] + clamped[x + 1, y]
    r = hl.RDom([(-1, 3)], name="bfr")
    col[x, y] = hl.cast(bf, 0)
    col[x, y] += row[x, y + r]
    out[x, y] = hl.select(col[x, y] > 30, col[x, y] - 30, hl.cast(bf, col[x, y] * hl.f32(0.3)) + row[x, y])
    return Case("bfloat16_stages", [out], [27, 21], [clamped, row, col, out])
