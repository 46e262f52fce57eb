"""Halide's tests of warp lanes and of arithmetic, casts and layouts in GPU kernels
(register_shuffle, vector_cast, interleave_rgb, interleave_x, mul_div_mod, strict_fma,
bool_predicate_cast, float16_t, gpu_f16_intrinsics, inverse, widening_reduction, issue_3926),
ported to pyhalide's CUDA backend: the schedule each test gives a GPU target, run on the serial
and the emulated CUDA device (and on a GPU where there is one), its result checked against numpy
or the closed form the Halide test uses. Sizes are smaller than Halide's where the emulated device
(a g++ compile per pipeline, a std::thread per GPU thread) would make them slow.

Not ported: vector_shuffle builds its vectors with Internal::Shuffle, which Halide's Python
bindings do not expose; strict_fma's fma() is not in Halide 21's Python bindings either (its
strict_float half is ported). The last section tests what pyhalide gained for these ports
(specialize_fail, align_storage, storage that inner thread loops share)."""

from __future__ import annotations

import numpy as np
import pytest

import pyhalide as hl

CUDA = hl.Target("host-cuda")
GT = hl.TailStrategy




# ------------------------------------------------------------------------------ register_shuffle
def test_register_shuffle_convolution(device):
    """Ports register_shuffle's small convolution: g(x, y) = f(x - 1, y) + f(x + 1, y) of a uint8
    f, g's x tile (32, RoundUp) warp lanes, f's wrapper computed per row of the tile with its x
    split by 32 into lanes and an unrolled outer loop (34 values over 32 lanes, read across
    lanes). Equals 2 (x + y) in uint8."""
    x, y, xo, xi, yi = hl.vars("x y xo xi yi")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = hl.cast(hl.UInt(8), x + y)
    g[x, y] = f[x - 1, y] + f[x + 1, y]
    g.gpu_tile(x, y, xi, yi, 32, 2, GT.RoundUp).gpu_lanes(xi)
    f.compute_root()
    f.in_(g).compute_at(g, yi).split(x, xo, xi, 32, GT.RoundUp).gpu_lanes(xi).unroll(xo)
    got = np.asarray(g.realize([32, 4], CUDA))
    yy, xx = np.mgrid[0:4, 0:32]
    np.testing.assert_array_equal(got, (2 * (xx + yy)).astype(np.uint8))


def test_register_shuffle_broadcast(device):
    """Ports register_shuffle's broadcast (outer product): c(x, y) = a(x) + 100 b(y) in 32x32
    tiles, x in lanes and y a serial loop in each block; a's and b's wrappers computed per block
    in lanes and stored in registers, so each lane holds one a and one b and every lane reads
    every b. Equals x + 100 y exactly."""
    x, y, xi, yi = hl.vars("x y xi yi")
    a, b, c = hl.Func("a"), hl.Func("b"), hl.Func("c")
    a[x] = hl.cast(hl.Float(32), x)
    b[y] = hl.cast(hl.Float(32), y)
    c[x, y] = a[x] + 100 * b[y]
    a.compute_root()
    b.compute_root()
    c.tile(x, y, xi, yi, 32, 32, GT.RoundUp).gpu_blocks(x, y).gpu_lanes(xi)
    a.in_(c).compute_at(c, x).gpu_lanes(x).store_in(hl.MemoryType.Register)
    b.in_(c).compute_at(c, x).gpu_lanes(y).store_in(hl.MemoryType.Register)
    got = np.asarray(c.realize([32, 32], CUDA))
    yy, xx = np.mgrid[0:32, 0:32]
    np.testing.assert_array_equal(got, (xx + 100 * yy).astype(np.float32))


def test_register_shuffle_vectorized_broadcast(device):
    """Ports register_shuffle's vectorized broadcast: the same outer product in 64x64 tiles,
    each lane a 2-vector of x, the rows split by 64 with an unrolled pair (yii) and the rest
    (yi) GPU threads; a's and b's wrappers computed per thread row, 2-vectors in lanes."""
    x, y, xi, yi, yii = hl.vars("x y xi yi yii")
    a, b, c = hl.Func("a"), hl.Func("b"), hl.Func("c")
    a[x] = hl.cast(hl.Float(32), x)
    b[y] = hl.cast(hl.Float(32), y)
    c[x, y] = a[x] + 100 * b[y]
    a.compute_root()
    b.compute_root()
    (c.tile(x, y, xi, yi, 64, 64, GT.RoundUp).gpu_blocks(x, y).split(yi, yi, yii, 64).unroll(yii, 2)
     .gpu_threads(yi).vectorize(xi, 2).gpu_lanes(xi))
    a.in_(c).compute_at(c, yi).vectorize(x, 2).gpu_lanes(x)
    b.in_(c).compute_at(c, yi).vectorize(y, 2).gpu_lanes(y)
    got = np.asarray(c.realize([64, 64], CUDA))
    yy, xx = np.mgrid[0:64, 0:64]
    np.testing.assert_array_equal(got, (xx + 100 * yy).astype(np.float32))


def _stencil_chain(width: int, size):
    """register_shuffle's masked stencil chain: three 3-tap box filters of x + y, each stage
    computed per output row in lanes, the output in `width`-wide tiles (its footprint on the
    input 6 wider, so some lanes are idle). Equals 27 (x + y)."""
    x, y, xi, yi = hl.vars("x y xi yi")
    a, b, c, d = hl.Func("a"), hl.Func("b"), hl.Func("c"), hl.Func("d")
    a[x, y] = x + y
    a.compute_root()
    b[x, y] = a[x - 1, y] + a[x, y] + a[x + 1, y]
    c[x, y] = b[x - 1, y] + b[x, y] + b[x + 1, y]
    d[x, y] = c[x - 1, y] + c[x, y] + c[x + 1, y]
    d.gpu_tile(x, y, xi, yi, width, 2).gpu_lanes(xi)
    for stage in (a.in_(), b, c):
        stage.compute_at(d, yi).gpu_lanes(x)
    got = np.asarray(d.realize(size, CUDA))
    yy, xx = np.mgrid[0:size[1], 0:size[0]]
    np.testing.assert_array_equal(got, 27 * (xx + yy))


def test_register_shuffle_masked_stencil_chain(device):
    """Ports register_shuffle's stencil chain with masked lanes: 24-wide output tiles (30 lanes of
    input used of a warp of 32), over 24x2."""
    _stencil_chain(24, [24, 2])


def test_register_shuffle_masked_stencil_chain_half_warps(device):
    """Ports register_shuffle's stencil chain in half warps: 10-wide output tiles (16 lanes) over
    24x2, so the last tile is partial."""
    _stencil_chain(10, [24, 2])


def test_register_shuffle_shift_depends_on_y(device):
    """Ports register_shuffle's shuffle whose shift depends on the row: b(x, y) = a(x + y, y), a
    computed per row of b's 16x8 tile in lanes. Equals x + 2y."""
    x, y, xi, yi = hl.vars("x y xi yi")
    a, b = hl.Func("a"), hl.Func("b")
    a[x, y] = x + y
    b[x, y] = a[x + y, y]
    b.gpu_tile(x, y, xi, yi, 16, 8, GT.RoundUp).gpu_lanes(xi)
    a.compute_at(b, yi).gpu_lanes(x)
    got = np.asarray(b.realize([32, 32], CUDA))
    yy, xx = np.mgrid[0:32, 0:32]
    np.testing.assert_array_equal(got, xx + 2 * yy)


def test_register_shuffle_bilinear_upsample(device):
    """Ports register_shuffle's bilinear upsample: upx then upy of f = x + y, 128x64 output tiles
    in 4x8 pieces per lane (4 vectorized), threads over the rows of pieces; upx computed per
    thread (x unrolled by 4 in lanes, y unrolled); f's wrapper staged per thread with its storage
    aligned to 64, 2-vectors, split by 32 into lanes (GuardWithIf), the rest unrolled. The output
    starts at 0. Equals (x + y - 1) / 2 exactly."""
    x, y, xi, yi, xii, yii = hl.vars("x y xi yi xii yii")
    f, upx, upy = hl.Func("f"), hl.Func("upx"), hl.Func("upy")
    f[x, y] = hl.cast(hl.Float(32), x + y)
    f.compute_root()
    upx[x, y] = hl.f32(0.25) * f[(x // 2) - 1 + 2 * (x % 2), y] + hl.f32(0.75) * f[x // 2, y]
    upy[x, y] = hl.f32(0.25) * upx[x, (y // 2) - 1 + 2 * (y % 2)] + hl.f32(0.75) * upx[x, y // 2]
    (upy.tile(x, y, xi, yi, 128, 64, GT.RoundUp).tile(xi, yi, xii, yii, 4, 8).vectorize(xii)
     .gpu_blocks(x, y).gpu_threads(yi).gpu_lanes(xi))
    upx.compute_at(upy, yi).unroll(x, 4).gpu_lanes(x).unroll(y)
    (f.in_().compute_at(upy, yi).align_storage(x, 64).vectorize(x, 2, GT.RoundUp)
     .split(x, x, xi, 32, GT.GuardWithIf).reorder(xi, y, x).gpu_lanes(xi).unroll(x).unroll(y))
    upy.output_buffer().dim(0).set_min(0).dim(1).set_min(0)
    got = np.asarray(upy.realize([128, 128], CUDA))
    yy, xx = np.mgrid[0:128, 0:128]
    np.testing.assert_array_equal(got, (xx + yy - 1).astype(np.float32) / np.float32(2))


def _box_downsample(tile: tuple[int, int], lanes: int, size: int):
    """register_shuffle's box downsample by 8: three pairwise sums along x (s1, s2, s3) of
    f = x + y, each computed per output row of s4, split by `lanes` into lanes (RoundUp, the
    rest unrolled); f's wrapper in 2-vectors over 2 * lanes. Equals (8x + y) * 8 + 28."""
    x, y, xi, yi = hl.vars("x y xi yi")
    f = hl.Func("f")
    f[x, y] = hl.cast(hl.Float(32), x + y)
    f.compute_root()
    s1, s2, s3, s4 = hl.Func("s1"), hl.Func("s2"), hl.Func("s3"), hl.Func("s4")
    s1[x, y] = f[2 * x, y] + f[2 * x + 1, y]
    s2[x, y] = s1[2 * x, y] + s1[2 * x + 1, y]
    s3[x, y] = s2[2 * x, y] + s2[2 * x + 1, y]
    s4[x, y] = s3[x, y]
    s4.gpu_tile(x, y, xi, yi, tile[0], tile[1], GT.RoundUp).vectorize(xi, 2).gpu_lanes(xi)
    for s in (s3, s2, s1):
        s.compute_at(s4, yi).split(x, x, xi, lanes, GT.RoundUp).gpu_lanes(xi).unroll(x)
    f.in_().compute_at(s4, yi).split(x, x, xi, 2 * lanes, GT.RoundUp).vectorize(xi, 2).gpu_lanes(xi).unroll(x)
    got = np.asarray(s4.realize([size, size], CUDA))
    yy, xx = np.mgrid[0:size, 0:size]
    np.testing.assert_array_equal(got, ((xx * 8 + yy) * 8 + 28).astype(np.float32))


def test_register_shuffle_box_downsample(device):
    """Ports register_shuffle's box downsample by 8 summed within a warp: 64x1 output tiles (2
    per lane), stages over 32 lanes, 64x64."""
    _box_downsample((64, 1), 32, 64)


def test_register_shuffle_box_downsample_narrow_tiles(device):
    """Ports register_shuffle's box downsample with narrow 8x16 tiles, so one warp covers several
    rows: stages over 4 lanes, 32x32."""
    _box_downsample((8, 16), 4, 32)


def test_register_shuffle_lut_in_registers(device):
    """Ports register_shuffle's look-up table: curved(x, y) = lut(buf(x, y)) of a random uint8
    image, lut(x) = uint16(x) + 1; curved in 32x32 tiles (threads over rows, lanes over x); the
    LUT's wrapper loaded per block (shared) in 4-vectors over lanes, and its wrapper's wrapper
    loaded from there per row into each warp's lanes. Equals buf + 1 (Halide: 256x256; the
    emulated device 64x64)."""
    size = 64 if device == "emulated" else 256
    rng = np.random.default_rng(3)
    buf = hl.Buffer(rng.integers(0, 256, (size, size), dtype=np.uint8))
    x, y, xi, yi, xo = hl.vars("x y xi yi xo")
    lut, curved = hl.Func("lut"), hl.Func("curved")
    lut[x] = hl.cast(hl.UInt(16), x) + 1
    curved[x, y] = lut[buf[x, y]]
    curved.compute_root().tile(x, y, xi, yi, 32, 32).gpu_blocks(x, y).gpu_threads(yi).gpu_lanes(xi)
    lut.compute_root()
    lut.in_().compute_at(curved, x).split(x, xo, xi, 32 * 4).vectorize(xi, 4).gpu_lanes(xi).unroll(xo)
    lut.in_().in_().compute_at(curved, yi).split(x, xo, xi, 32 * 4).vectorize(xi, 4).gpu_lanes(xi).unroll(xo)
    got = np.asarray(curved.realize([size, size], CUDA))
    np.testing.assert_array_equal(got, np.asarray(buf).astype(np.uint16) + 1)


def test_register_shuffle_rfactor_reduction(device):
    """Ports register_shuffle's reduction by warp shuffles: b(y) = sum over r < 1024 of a(r, y),
    c(y) = b(y) in blocks of 8 rows, a thread per row; b's update split by 8 and rfactored over
    the inner part (u), the intermediate computed per row with its pure and update stages in
    lanes over u. Equals sum (x + y) = 1024 y + 523776 (Halide: 256 rows; here 64)."""
    x, y, yo, yi, ylane, u = hl.vars("x y yo yi ylane u")
    ro, ri = hl.RVar("ro"), hl.RVar("ri")
    a, b, c = hl.Func("a"), hl.Func("b"), hl.Func("c")
    a[x, y] = x + y
    a.compute_root()
    r = hl.RDom([hl.Range(0, 1024)])
    b[y] = 0
    b[y] += a[r, y]
    c[y] = b[y]
    warp = 8
    c.split(y, yo, yi, warp).split(yi, yi, ylane, 1).gpu_blocks(yo).gpu_threads(yi, ylane)
    intm = b.update().split(r.x, ri, ro, warp).reorder(ri, ro).rfactor(ro, u)
    intm.compute_at(c, yi).update().gpu_lanes(u)
    intm.gpu_lanes(u)
    rows = 256 if device == "gpu" else 64
    got = np.asarray(c.realize([rows], CUDA))
    np.testing.assert_array_equal(got, 1024 * np.arange(rows) + 1023 * 1024 // 2)


def test_register_shuffle_fast_pow_chain(device):
    """Ports register_shuffle's check against a combinatorial explosion: ten nested
    fast_pow(e, e + 1) of x, gpu_tile 32, over 1024 values; Halide only checks that it compiles
    and runs, so does this (a std::thread per GPU thread makes it 128 on the emulated device)."""
    x, xo, xi = hl.vars("x xo xi")
    e = x
    for _ in range(10):
        e = hl.fast_pow(e, e + 1)
    f = hl.Func("f")
    f[x] = e
    f.gpu_tile(x, xo, xi, 32)
    f.realize([128 if device == "emulated" else 1024], CUDA)


# ------------------------------------------------------------------------------ vector_cast
_CAST_TYPES = [(hl.Float(32), np.float32), (hl.Float(64), np.float64), (hl.UInt(8), np.uint8),
               (hl.UInt(16), np.uint16), (hl.UInt(32), np.uint32), (hl.Int(8), np.int8), (hl.Int(16), np.int16),
               (hl.Int(32), np.int32)]


# the emulated device compiles each pipeline with g++ (about a second a kernel): it runs a sample
# in which every type is a source once and a destination once (float to int, int to float,
# double to float, narrowing, signed to unsigned and back)
_CAST_EMULATED = [(0, 2), (1, 0), (2, 1), (3, 5), (4, 7), (5, 4), (6, 3), (7, 6)]


def _casts(pairs, seed: int):
    """Each (source, destination) pair of _CAST_TYPES as its own Func, gpu_tile 64, realized as
    one pipeline over 1024 values (rand() & 0xffff) / 512 of the source type."""
    x, y, xo, xi = hl.vars("x y xo xi")
    rng = np.random.default_rng(seed)
    raw = (rng.integers(0, 1 << 31, 1024) & 0xFFFF) / 512.0
    funcs, wants = [], []
    for a, b in pairs:
        (a_t, a_np), (b_t, b_np) = _CAST_TYPES[a], _CAST_TYPES[b]
        data = raw.astype(a_np)
        f = hl.Func(f"cast_{a}_{b}")
        f[x, y] = hl.cast(b_t, hl.Buffer(data.reshape(1, 1024), f"in_{a}_{b}")[x, y])
        f.gpu_tile(x, xo, xi, 64)
        funcs.append(f)
        wants.append((data.astype(b_np), f"{a_t} -> {b_t}"))
    outs = hl.Pipeline(funcs).realize([1024, 1], CUDA)
    for out, (want, what) in zip(outs, wants):
        np.testing.assert_array_equal(np.asarray(out)[0], want, err_msg=what)


def test_vector_cast(device):
    """Ports vector_cast's GPU schedule: cast<B>(input) of 1024 values (rand() & 0xffff) / 512 in
    each type A (float, double, 8-, 16- and 32-bit ints) into each type B, gpu_tile 64 (Halide's
    vector widths only change which types it asks supports_type about: CUDA has them all). Each
    cast is its own Func; all those of a source type are realized as one pipeline. Each equals C's
    cast (numpy's astype, for these values). The emulated device runs a sample."""
    if device == "emulated":
        _casts(_CAST_EMULATED, 0)
        return
    for a in range(len(_CAST_TYPES)):
        _casts([(a, b) for b in range(len(_CAST_TYPES))], a)


# ------------------------------------------------------------------------------ interleave_rgb
_INTERLEAVE_TYPES = [(hl.UInt(8), np.uint8), (hl.UInt(16), np.uint16), (hl.UInt(32), np.uint32)]
# the emulated device (a g++ compile per pipeline) runs each type once, each stride at least once
_INTERLEAVE_EMULATED = {(0, 3), (1, 4), (2, 3)}


def _interleave_sample(device: str, type_index: int, x_stride: int) -> None:
    if device == "emulated" and (type_index, x_stride) not in _INTERLEAVE_EMULATED:
        pytest.skip("the emulated device runs a sample of the types and strides")


@pytest.mark.parametrize("x_stride", [3, 4])
@pytest.mark.parametrize("type_index", range(3), ids=["uint8", "uint16", "uint32"])
def test_interleave_rgb_interleave(type_index, x_stride, device):
    """Ports interleave_rgb's interleave: input(x, y, c) = x * 3 + y * 5 + c written, c innermost
    and bounded to [0, 3), into a 255x128 buffer whose channels are densest with x's stride 3 or
    4, cropped to its first 3 channels (c stride 1, x stride constrained), gpu_tile 16x16; the
    buffer is filled with 7 and copied to the device first, and the fourth channel (x stride 4)
    must still hold 7 afterwards."""
    _interleave_sample(device, type_index, x_stride)
    t, t_np = _INTERLEAVE_TYPES[type_index]
    x, y, c, xi, yi = hl.vars("x y c xi yi")
    inp, interleaved = hl.Func("input"), hl.Func("interleaved")
    inp[x, y, c] = hl.cast(t, x * 3 + y * 5 + c)
    interleaved[x, y, c] = inp[x, y, c]
    inp.compute_root()
    interleaved.reorder(c, x, y).bound(c, 0, 3)
    interleaved.output_buffer().dim(0).set_stride(x_stride).dim(2).set_stride(1).set_extent(3)
    interleaved.gpu_tile(x, y, xi, yi, 16, 16)
    buff = hl.Buffer.make_interleaved(t, 255, 128, x_stride)
    buff.fill(7)
    buff.copy_to_device()
    # Halide's test crops a second handle to the same buffer in place, so the buffer realized
    # into is the one copied back; here the crop is a view of its own, device-dirty after the run
    cropped = buff.cropped(2, 0, 3)
    interleaved.realize(cropped, CUDA)
    cropped.copy_to_host()
    cc, yy, xx = np.mgrid[0:x_stride, 0:128, 0:255]
    want = np.where(cc < 3, xx * 3 + yy * 5 + cc, 7).astype(t_np)
    np.testing.assert_array_equal(np.asarray(buff), want)


@pytest.mark.parametrize("x_stride", [3, 4])
@pytest.mark.parametrize("type_index", range(3), ids=["uint8", "uint16", "uint32"])
def test_interleave_rgb_deinterleave(type_index, x_stride, device):
    """Ports interleave_rgb's deinterleave: an ImageParam whose channels are densest (x stride 3
    or 4 constrained, c stride 1, min 0, extent 3) of random values, copied by a Func with c
    innermost and bounded, gpu_tile 16x16, into a planar 255x128x3 buffer."""
    _interleave_sample(device, type_index, x_stride)
    t, t_np = _INTERLEAVE_TYPES[type_index]
    x, y, c, xi, yi = hl.vars("x y c xi yi")
    inp = hl.ImageParam(t, 3, "input")
    inp.dim(0).set_stride(x_stride)
    inp.dim(2).set_min(0).set_extent(3).set_stride(1)
    deinterleaved = hl.Func("deinterleaved")
    deinterleaved[x, y, c] = inp[x, y, c]
    deinterleaved.reorder(c, x, y).bound(c, 0, 3)
    deinterleaved.gpu_tile(x, y, xi, yi, 16, 16)
    input_buf = hl.Buffer.make_interleaved(t, 255, 128, x_stride)
    rng = np.random.default_rng(type_index * 2 + x_stride)
    np.asarray(input_buf)[...] = rng.integers(0, 1 << 31, np.asarray(input_buf).shape).astype(t_np)
    input_buf.crop(2, 0, 3)
    inp.set(input_buf)
    buff = hl.Buffer(t, [255, 128, 3])
    deinterleaved.realize(buff, CUDA)
    buff.copy_to_host()
    np.testing.assert_array_equal(np.asarray(buff), np.asarray(input_buf))


# ------------------------------------------------------------------------------ interleave_x
def test_interleave_x(device):
    """Ports interleave_x: select(x % 2 == 0, 3, 7) in uint16 over 128x128, gpu_tile 16x16."""
    x, y, tx, ty = hl.vars("x y tx ty")
    interleaved = hl.Func("interleaved")
    interleaved[x, y] = hl.select(x % 2 == 0, hl.cast(hl.UInt(16), 3), hl.cast(hl.UInt(16), 7))
    interleaved.gpu_tile(x, y, tx, ty, 16, 16)
    got = np.asarray(interleaved.realize([128, 128], CUDA))
    want = np.broadcast_to(np.where(np.arange(128) % 2 == 0, 3, 7).astype(np.uint16), (128, 128))
    np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------------------ mul_div_mod
_PRIMES = dict(mi=982451653, mj=776531491, mk=573259391, ml=373587883, mu=275604541)
_INT_TYPES = {"u8": (hl.UInt(8), np.uint8), "u16": (hl.UInt(16), np.uint16), "u32": (hl.UInt(32), np.uint32),
              "i8": (hl.Int(8), np.int8), "i16": (hl.Int(16), np.int16), "i32": (hl.Int(32), np.int32)}


def _ubits(unique: int, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """mul_div_mod's poor pseudo-random 64-bit numbers of (unique, i, j), in wrapping uint64."""
    p = {k: np.uint64(v) for k, v in _PRIMES.items()}
    bits = ((np.uint64(unique) * p["mu"] + i) * p["mi"] + j) * p["mj"]
    for m in ("mk", "ml", "mi", "mu"):
        bits = (bits ^ (bits >> np.uint64(32))) * p[m]
    return bits


def _test_image(np_t, unique: int, width: int, height: int) -> np.ndarray:
    """mul_div_mod's init(): pseudo-random values over the type's range, one in 50 salted with
    its min or max, and the top-left 2x2 corner its extremes. Shape (height, width): [j, i]."""
    j, i = np.mgrid[0:height, 0:width].astype(np.uint64)
    info = np.iinfo(np_t)
    v = _ubits(unique, i, j)
    salt = _ubits(unique | 0x100, i, j).view(np.int64)
    if info.min < 0:
        signed = v.view(np.int64)
        v = np.where(signed < 0, signed | ~np.int64(info.max), signed & np.int64(info.max))
    else:
        v = v & np.uint64(info.max)
    v = np.where(salt % 50 == 0, np.where(salt & 0x1000000, info.max, info.min), v).astype(np_t)
    odd = unique & 1
    v[0, 0], v[0, 1] = info.min, info.max
    v[1, 0], v[1, 1] = (info.min, info.max) if odd else (info.max, info.min)
    return v


_MULS = [("u8", "u8", "u8"), ("u16", "u16", "u16"), ("u32", "u32", "u32"), ("i8", "i8", "i8"),
         ("i16", "i16", "i16"), ("i32", "i32", "i32"),  # non-widening
         ("u8", "u8", "u16"), ("u16", "u16", "u32"), ("i8", "i8", "i16"), ("i16", "i16", "i32"),  # widening
         ("u16", "u32", "u32"), ("i16", "i32", "i32"), ("u16", "i32", "i32")]  # mixed
_DIVS = ["u8", "u16", "u32", "i8", "i16", "i32"]
_MDM_W, _MDM_H = 256, 16  # Halide: 1024x1024; 16-wide tiles of the widest vectors need 256


def _mdm_schedule(f, vector_width: int):
    xi, yi = hl.vars("xi yi")
    if vector_width > 1:
        f.vectorize(f.args()[0], vector_width)
    f.compute_root().gpu_tile(f.args()[0], f.args()[1], xi, yi, 16, 16)


def _mul(vector_width: int):
    """mul_div_mod's mul<T1, T2, RT> for every listed type triple, as one pipeline: each product
    equals the product in 64 bits wrapped to RT."""
    x, y = hl.vars("x y")
    funcs, wants = [], []
    for k, (t1, t2, rt) in enumerate(_MULS):
        a = _test_image(_INT_TYPES[t1][1], 1, _MDM_W, _MDM_H)
        b = _test_image(_INT_TYPES[t2][1], 2, _MDM_W, _MDM_H)
        f = hl.Func(f"mul_{t1}_{t2}_{rt}")
        rt_hl, rt_np = _INT_TYPES[rt]
        f[x, y] = hl.cast(rt_hl, hl.Buffer(a, f"a{k}")[x, y]) * hl.cast(rt_hl, hl.Buffer(b, f"b{k}")[x, y])
        _mdm_schedule(f, vector_width)
        funcs.append(f)
        with np.errstate(over="ignore"):
            wants.append(((a.astype(np.int64) * b.astype(np.int64)).astype(rt_np), f"{t1} * {t2} -> {rt}"))
    for out, (want, what) in zip(hl.Pipeline(funcs).realize([_MDM_W, _MDM_H], CUDA), wants):
        np.testing.assert_array_equal(np.asarray(out), want, err_msg=f"{what}, vector width {vector_width}")


def _div_mod(vector_width: int):
    """mul_div_mod's div_mod<T> for each integer type, as one pipeline of Tuple-valued Funcs
    (a / b, a % b): b's zeros made 1 and a's min over -1 made min + 1; then q * b + r == a (in 64
    bits) and 0 <= r < |b|, Euclidean division."""
    x, y = hl.vars("x y")
    funcs, cases = [], []
    for t in _DIVS:
        t_hl, t_np = _INT_TYPES[t]
        a = _test_image(t_np, 1, _MDM_W, _MDM_H)
        b = _test_image(t_np, 2, _MDM_W, _MDM_H)
        b[b == 0] = 1
        lo = np.iinfo(t_np).min
        if lo < 0:
            a[(a == lo) & (b == -1)] += 1
        ae, be = hl.Buffer(a, f"a_{t}")[x, y], hl.Buffer(b, f"b_{t}")[x, y]
        f = hl.Func(f"div_mod_{t}")
        f[x, y] = (ae / be, ae % be)
        _mdm_schedule(f, vector_width)
        funcs.append(f)
        cases.append((t, a.astype(np.int64), b.astype(np.int64)))
    outs = hl.Pipeline(funcs).realize([_MDM_W, _MDM_H], CUDA)
    for k, (t, a, b) in enumerate(cases):
        q, r = np.asarray(outs[2 * k]).astype(np.int64), np.asarray(outs[2 * k + 1]).astype(np.int64)
        what = f"{t}, vector width {vector_width}"
        np.testing.assert_array_equal(q * b + r, a, err_msg=f"(a / b) * b + a % b != a: {what}")
        assert np.all((r >= 0) & ((r < np.abs(b)) | (b == np.iinfo(_INT_TYPES[t][1]).min))), what


# Halide's vector widths for CUDA: 1 to 16; the emulated device (a g++ compile per pipeline) runs 16
@pytest.mark.parametrize("vector_width", [1, 2, 4, 8, 16])
def test_mul_div_mod(vector_width, device):
    """Ports mul_div_mod's GPU schedule (TiledGPU): x vectorized by the width, then compute_root
    and gpu_tile 16x16, of products of 13 type combinations (non-widening, widening, mixed) and
    Euclidean quotients and remainders of 6 integer types, over test images whose corners hold
    the types' extremes (Halide: 1024x1024; here 256x16). The simplifier comparisons (CPU
    constant folding) are not ported."""
    if device == "emulated" and vector_width != 16:
        pytest.skip("the emulated device runs vector width 16 (16 lanes unrolled per thread) only")
    _mul(vector_width)
    _div_mod(vector_width)


# ------------------------------------------------------------------------------ strict_fma
def test_strict_fma_strict_float_on_the_gpu(device):
    """Ports strict_fma's GPU schedule (float only, as Halide's test): g(x) = strict_float(
    float(x) * b + c), gpu_tile 32, with b = 1.111111111 and c = 1.0101010101, over 1024 values.
    The product and the sum are each rounded to float (no fused multiply-add): g equals numpy's
    float32 arithmetic exactly, and differs from the fused result (x * b exact in float64, then
    + c rounded once) by at most 1 ULP, somewhere by exactly 1. Halide's fma() is not in its
    Python bindings, so its half of the test is not ported."""
    x, xo, xi = hl.vars("x xo xi")
    b, c = hl.Param(hl.Float(32), "b"), hl.Param(hl.Float(32), "c")
    g = hl.Func("g")
    g[x] = hl.strict_float(hl.cast(hl.Float(32), x) * b + c)
    g.gpu_tile(x, xo, xi, 32)
    bv, cv = np.float32(1.111111111), np.float32(1.0101010101)
    b.set(float(bv))
    c.set(float(cv))
    out = g.realize([1024], CUDA)
    out.copy_to_host()
    got = np.asarray(out)
    i = np.arange(1024, dtype=np.float32)
    np.testing.assert_array_equal(got, i * bv + cv)
    fused = (i.astype(np.float64) * np.float64(bv) + np.float64(cv)).astype(np.float32)
    ulps = np.abs(got.view(np.int32).astype(np.int64) - fused.view(np.int32))
    assert ulps.max() == 1, "strict_float must keep the product and the sum rounded apart"


# ------------------------------------------------------------------------------ bool_predicate_cast
def test_bool_predicate_cast(device):
    """Ports bool_predicate_cast: uint8(input(x, y) >= 32) of a uint8 input x + y, gpu_tile 8x8,
    over 96x96: 1 where x + y >= 32, else 0."""
    x, y, xi, yi = hl.vars("x y xi yi")
    inp, test = hl.Func("input"), hl.Func("test")
    inp[x, y] = hl.cast(hl.UInt(8), x + y)
    test[x, y] = hl.cast(hl.UInt(8), inp[x, y] >= 32)
    test.gpu_tile(x, y, xi, yi, 8, 8)
    got = np.asarray(test.realize([96, 96], CUDA))
    yy, xx = np.mgrid[0:96, 0:96]
    np.testing.assert_array_equal(got, (xx + yy >= 32).astype(np.uint8))


# ------------------------------------------------------------------------------ float16_t
def test_float16_t_passed_to_a_kernel(device):
    """Ports float16_t's GPU part: a float16 ImageParam (all 0.0625) and a float16 Param (2) in a
    kernel, output(x, y) = x * y * (sqrt(input) * mul) in float16, gpu_tile 8x8 over 8x8: each
    value has the bits of float16((x * y) / 2)."""
    x, y, xi, yi = hl.vars("x y xi yi")
    inp = hl.ImageParam(hl.Float(16), 2, "input")
    mul = hl.Param(hl.Float(16), "mul")
    output = hl.Func("output")
    output[x, y] = x * y * (hl.sqrt(inp[x, y]) * mul)
    output.gpu_tile(x, y, xi, yi, 8, 8)
    mul.set(2.0)
    inp.set(hl.Buffer(np.full((8, 8), 0.0625, np.float16)))
    buf = output.realize([8, 8], CUDA)
    buf.copy_to_host()
    yy, xx = np.mgrid[0:8, 0:8]
    want = ((xx * yy) / 2.0).astype(np.float16)
    np.testing.assert_array_equal(np.asarray(buf).view(np.uint16), want.view(np.uint16))


# ------------------------------------------------------------------------------ gpu_f16_intrinsics
def _f16_curve(x, y):
    val = hl.cast(hl.Float(16), hl.cast(hl.Float(16), x + y) + hl.f32(1.0))
    clamp_val = hl.clamp(hl.cast(hl.Float(16), hl.f32(0.1)) * val, hl.cast(hl.Float(16), 0), hl.cast(hl.Float(16), 1))
    return hl.cast(hl.Float(16), hl.select(clamp_val > 1, hl.cast(hl.Float(32), hl.abs(clamp_val)), hl.cast(
        hl.Float(32), hl.fast_pow(clamp_val, hl.cast(hl.Float(16), hl.f32(1.0 / 2.2))))))


def test_gpu_f16_intrinsics(device):
    """Ports gpu_f16_intrinsics (Halide runs it on Metal and OpenCL with half support only; here
    on CUDA): a float16 curve (clamp, abs, fast_pow and a select of float16 values) gpu_tile 8x8
    over 64x64 is within 0.01 of the same Func computed on the CPU; and Funcs of float16
    infinity, negative infinity and NaN, gpu_tile 8, give those values."""
    x, y, xi, xo, yi, yo = hl.vars("x y xi xo yi yo")
    output, output_cpu = hl.Func("output"), hl.Func("output_cpu")
    output[x, y] = _f16_curve(x, y)
    output_cpu[x, y] = _f16_curve(x, y)
    output.gpu_tile(x, y, xo, yo, xi, yi, 8, 8)
    out = output.realize([64, 64], CUDA)
    out2 = output_cpu.realize([64, 64])
    out.copy_to_host()
    np.testing.assert_allclose(np.asarray(out).astype(np.float32), np.asarray(out2).astype(np.float32),
                               atol=0.01, rtol=0)

    special = {"inf": np.float16(np.inf), "neg_inf": np.float16(-np.inf), "nan": np.float16(np.nan)}
    for name, value in special.items():
        f = hl.Func(name)
        f[x] = hl.cast(hl.Float(16), float(value))
        f.gpu_tile(x, xo, xi, 8)
        got = f.realize([8], CUDA)
        got.copy_to_host()
        np.testing.assert_array_equal(np.asarray(got).view(np.uint16), np.full(8, value).view(np.uint16), err_msg=name)


# ------------------------------------------------------------------------------ inverse
def test_inverse_on_the_gpu(device):
    """Ports inverse's GPU part: fast_inverse(v) and fast_inverse_sqrt(v) of v = 1.34x + 1.0142,
    gpu_tile 16 over 10000 values, against p / v and p / sqrt(v) on the CPU (p a Param 1.0, so
    nothing folds): the mantissas agree but for the last 13 bits (Halide prints mismatches but
    does not fail; here they fail). The emulated device (a std::thread per GPU thread) computes
    the first 2048."""
    x, xi = hl.vars("x xi")
    v = x * hl.f32(1.34) + hl.f32(1.0142)
    p = hl.Param(hl.Float(32), "p")
    p.set(1.0)
    f1, g1, f5, g5 = hl.Func("f1"), hl.Func("g1"), hl.Func("f5"), hl.Func("g5")
    f1[x] = p / v
    g1[x] = p / hl.sqrt(v)
    f5[x] = hl.fast_inverse(v)
    g5[x] = hl.fast_inverse_sqrt(v)
    f5.gpu_tile(x, xi, 16)
    g5.gpu_tile(x, xi, 16)
    n = 2048 if device == "emulated" else 10000
    for exact, fast in ((f1, f5), (g1, g5)):
        want = np.asarray(exact.realize([n]))
        got = fast.realize([n], CUDA)
        got.copy_to_host()
        a, b = np.asarray(got).view(np.uint32).astype(np.int64), want.view(np.uint32).astype(np.int64)
        same_exponent = (a >> 23) == (b >> 23)
        assert np.all(~same_exponent | (np.abs(a - b) < 1 << 13)), fast.name()


# ------------------------------------------------------------------------------ widening_reduction
def _widening_setup(size: int):
    rng = np.random.default_rng(7)
    data = rng.integers(0, 256, (size, size), dtype=np.uint8)
    weights = (rng.integers(0, 8, (3, 3)) - 4).astype(np.int8)  # [ry + 1, rx + 1]
    kernel = hl.Buffer(weights, "kernel")
    kernel.set_min([-1, -1])
    inp = hl.BoundaryConditions.repeat_edge(hl.Buffer(data, "in"))
    inp.compute_root()
    return data, weights, kernel, inp


def _weighted_sums(data: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The 3x3 sums of int16(in) * kernel over the interior (int16 arithmetic cannot overflow
    here): [y - 1, x - 1] for 1 <= x, y < size - 1."""
    n = data.shape[0]
    total = np.zeros((n - 2, n - 2), np.int32)
    for ry in (-1, 0, 1):
        for rx in (-1, 0, 1):
            total += data[1 + ry:n - 1 + ry, 1 + rx:n - 1 + rx].astype(np.int32) * int(weights[ry + 1, rx + 1])
    return total


def _u8_sat_div(v: np.ndarray, d: int) -> np.ndarray:
    return np.clip(v // d, 0, 255).astype(np.uint8)


def test_widening_reduction(device):
    """Ports widening_reduction's GPU schedules (gpu_tile 16x16), over the interior of a random
    uint8 image with repeat_edge (Halide: 256x256; the emulated device 64x64): u8_sat of the sum
    of int16(in) * an int8 3x3 kernel (with mins -1, -1), / 16; the same as a Tuple reduction
    (the products, and the kernel's own sum in int8) added before narrowing; and u8_sat of the
    int16 average of neighbours, with the output's mins and extents constrained (W - 2 by H)."""
    size = 64 if device == "emulated" else 256
    data, weights, kernel, inp = _widening_setup(size)
    x, y, xi, yi = hl.vars("x y xi yi")
    r = hl.RDom([hl.Range(-1, 3), hl.Range(-1, 3)])
    sums = _weighted_sums(data, weights)

    f = hl.Func("f")
    f[x, y] = hl.u8_sat(hl.sum(hl.i16(inp[x + r.x, y + r.y]) * kernel[r.x, r.y]) / 16)
    f.gpu_tile(x, y, xi, yi, 16, 16)
    got = np.asarray(f.realize([size, size], CUDA))
    np.testing.assert_array_equal(got[1:-1, 1:-1], _u8_sat_div(sums, 16))

    ft, g = hl.Func("ft"), hl.Func("g")
    ft[x, y] = (hl.i16(0), hl.i8(0))
    ft[x, y] = (ft[x, y][0] + hl.i16(inp[x + r.x, y + r.y]) * kernel[r.x, r.y], ft[x, y][1] + kernel[r.x, r.y])
    g[x, y] = hl.u8_sat((ft[x, y][0] + ft[x, y][1]) / 16)
    g.gpu_tile(x, y, xi, yi, 16, 16)
    got = np.asarray(g.realize([size, size], CUDA))
    np.testing.assert_array_equal(got[1:-1, 1:-1], _u8_sat_div(sums + int(weights.sum()), 16))

    fa, ga = hl.Func("fa"), hl.Func("ga")
    fa[x, y] = hl.i16(inp[x, y])
    ga[x, y] = hl.u8_sat((fa[x, y] + fa[x + 1, y]) / 2)
    ga.gpu_tile(x, y, xi, yi, 16, 16)
    ga.output_buffer().dim(0).set_min(0).set_extent(size - 2)
    ga.output_buffer().dim(1).set_min(0).set_extent(size)
    got = np.asarray(ga.realize([size - 2, size], CUDA))
    want = (data[:, :size - 2].astype(np.int16) + data[:, 1:size - 1]) // 2
    np.testing.assert_array_equal(got[1:-1, :size - 3], want[1:-1, :size - 3].astype(np.uint8))


# ------------------------------------------------------------------------------ issue_3926
@pytest.mark.parametrize("gpu", [False, True], ids=["as_written", "gpu_tile"])
def test_issue_3926(gpu, device):
    """Ports issue_3926: g(x, y) = f(x) + select(param, 1, 2), tiled 8x8 (GuardWithIf) in two
    specializations (param and !param) with specialize_fail after them, and f's wrapper computed
    at the tiles' inner x, realized over 34x34 with param false (x + 2) and true (x + 1). As
    written the schedule has no GPU loops (realized on host-cuda); the gpu_tile version is the one
    Halide's test leaves in a comment, each specialization's tiles GPU blocks and threads."""
    x, y, tx, ty = hl.vars("x y tx ty")
    param = hl.Param(hl.Bool(), "param")
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = x
    g[x, y] = f[x] + hl.select(param, 1, 2)
    for condition in (param, ~param):
        if gpu:
            g.specialize(condition).gpu_tile(x, y, tx, ty, 8, 8, GT.GuardWithIf)
        else:
            g.specialize(condition).tile(x, y, tx, ty, 8, 8, GT.GuardWithIf)
    g.specialize_fail("Unknown")
    f.in_().compute_at(g, tx)
    out = hl.Buffer(hl.Int(32), [34, 34])
    xx = np.broadcast_to(np.arange(34, dtype=np.int32), (34, 34))
    for value, add in ((False, 2), (True, 1)):
        param.set(value)
        g.realize(out, CUDA)
        out.copy_to_host()
        np.testing.assert_array_equal(np.asarray(out), xx + add)


# ------------------------------------------------------------------------------ what the ports needed of pyhalide
def test_specialize_fail_is_the_error_where_no_specialization_applies():
    """specialize_fail (which issue_3926 uses) as Halide has it: the pipeline fails with its
    message where no specialization's condition holds, the stage runs its specializations where
    one does, and no specialization may be added after it, nor a second specialize_fail."""
    x, xi = hl.vars("x xi")
    p = hl.Param(hl.Bool(), "p")
    f = hl.Func("f")
    f[x] = x + hl.select(p, 1, 2)
    f.specialize(p).split(x, x, xi, 4)
    f.specialize_fail("no fast path")
    with pytest.raises(hl.HalideError, match="Cannot add new specializations after specialize_fail"):
        f.specialize(~p)
    with pytest.raises(hl.HalideError, match="Only one specialize_fail"):
        f.specialize_fail("again")
    p.set(True)
    np.testing.assert_array_equal(np.asarray(f.realize([8])), np.arange(8) + 1)
    p.set(False)
    with pytest.raises(hl.HalideError, match=r"A schedule specialized with specialize_fail\(\) was chosen: no fast"):
        f.realize([8])


def test_func_computed_by_inner_thread_loops_is_shared_by_them(device):
    """What register_shuffle's schedules rely on, with gpu_threads instead of gpu_lanes: f
    computed at g's outer thread loop (yi) by a thread loop of its own over x, each thread a
    part, and read by g's inner thread loop (xi) at x - 1 and x + 1, which other threads
    computed: the threads of a row share f (block-level storage with a barrier between f and g,
    as serial loops would compute it). Equals 2 (x + y)."""
    x, y, xi, yi = hl.vars("x y xi yi")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + y
    g[x, y] = f[x - 1, y] + f[x + 1, y]
    g.gpu_tile(x, y, xi, yi, 16, 4)
    f.compute_at(g, yi).gpu_threads(x)
    got = np.asarray(g.realize([32, 8], CUDA))
    yy, xx = np.mgrid[0:8, 0:32]
    np.testing.assert_array_equal(got, 2 * (xx + yy))


def test_align_storage_aligns_the_allocation(tmp_path):
    """align_storage (which register_shuffle's bilinear upsample uses) as Halide has it: f,
    read over [3, 14], is stored from 0 over 16 coordinates with an alignment of 8, the values
    unchanged; the directive survives the schedule's JSON round trip."""
    x = hl.Var("x")

    def build():
        f, g = hl.Func("f"), hl.Func("g")
        f[x] = x * 2
        g[x] = f[x + 3] + f[x + 5]
        g.bound(x, 0, 10)
        return f, g

    f, g = build()
    f.compute_root().align_storage(x, 8)
    stmt = tmp_path / "aligned.stmt"
    g.compile_to_lowered_stmt(str(stmt))
    assert f"allocate {f.name()}[int32 * 16]" in stmt.read_text()
    want = 4 * np.arange(10) + 16
    np.testing.assert_array_equal(np.asarray(g.realize([10])), want)
    copy = build()[1]
    hl.Pipeline(copy).apply_schedule_json(hl.Pipeline(g).schedule_to_json())
    np.testing.assert_array_equal(np.asarray(copy.realize([10])), want)
    with pytest.raises(hl.HalideError, match="align_storage of x: the alignment must be positive"):
        f.align_storage(x, 0)


@pytest.mark.parametrize("specialized", [False, True])
def test_lanes_share_a_func_computed_inside_another_lane_func(specialized, device):
    """A chain of lane-level Funcs nested one in another: h computed per row of f (whose rows
    start where g's thread row does), f per row of g's tile, each in lanes; with f specialized on
    a Param, h sits in both branches. h and f are each shared by the lanes of a row (as
    register_shuffle's schedules need). Equals 4 (x + 2y)."""
    x, y, xi, yi = hl.vars("x y xi yi")
    h, f, g = hl.Func("h"), hl.Func("f"), hl.Func("g")
    p = hl.Param(hl.Bool(), "p")
    h[x, y] = x + 2 * y
    f[x, y] = h[x - 1, y] + h[x + 1, y] + hl.select(p, 0, 0)
    g[x, y] = f[x, y - 1] + f[x, y + 1]
    g.gpu_tile(x, y, xi, yi, 32, 2).gpu_lanes(xi)
    f.compute_at(g, yi).gpu_lanes(x)
    if specialized:
        f.specialize(p)
    h.compute_at(f, y).gpu_lanes(x)
    yy, xx = np.mgrid[0:4, 0:32]
    for value in (True, False):
        p.set(value)
        np.testing.assert_array_equal(np.asarray(g.realize([32, 4], CUDA)), 4 * (xx + 2 * yy))
