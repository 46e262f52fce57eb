"""Ports of Halide 21's C++ correctness tests (batch 05) to pyhalide.

Each test names the Halide test it comes from; expectations are computed with numpy / plain Python.
"""

import ctypes
import re

import numpy as np
import pytest

import pyhalide as hl


def _captured(capfd, fn):
    """Run fn() and return (its result, all it wrote to stdout and stderr)."""
    capfd.readouterr()
    result = fn()
    ctypes.CDLL(None).fflush(None)
    captured = capfd.readouterr()
    return result, captured.out + captured.err


def _grid(w, h):
    """Coordinate arrays X, Y of shape (h, w), as np.asarray lays out a [w, h] buffer."""
    yy, xx = np.mgrid[0:h, 0:w]
    return xx, yy


# --- gameoflife ---


def _life_reference(board, steps):
    b = board.astype(np.int32)
    for _ in range(steps):
        n = sum(np.roll(np.roll(b, dy, 0), dx, 1)
                for dy in (-1, 0, 1) for dx in (-1, 0, 1) if (dx, dy) != (0, 0))
        b = ((n == 3) | ((b != 0) & (n == 2))).astype(np.int32)
    return b


def _life_step(inp, n):
    x, y = hl.Var(), hl.Var()
    if n == 1:
        src = hl.Func()
        src[x, y] = inp[x, y]
    else:
        src = _life_step(inp, n - 1)
        src.compute_root()
    w, h = inp.width(), inp.height()
    west, east, north, south = (x + w - 1) % w, (x + 1) % w, (y + h - 1) % h, (y + 1) % h
    nb = (src[west, north] + src[x, north] + src[east, north] + src[west, y] + src[east, y]
          + src[west, south] + src[x, south] + src[east, south])
    out = hl.Func()
    out[x, y] = hl.select((nb == 3) | ((src[x, y] != 0) & (nb == 2)),
                          hl.cast(hl.UInt(8), 1), hl.cast(hl.UInt(8), 0))
    return out


def _random_board():
    return (np.random.default_rng(5).integers(0, 256, (32, 32)) < 128).astype(np.uint8)


def test_game_of_life_one_and_two_steps_per_realize():
    """Halide's correctness/gameoflife.cpp: one- and two-step pipelines on a torus agree."""
    board = _random_board()
    inp = hl.ImageParam(hl.UInt(8), 2)
    one, two = _life_step(inp, 1), _life_step(inp, 2)
    b1, b2 = board.copy(), board.copy()
    for i in range(4):
        for _ in range(2):
            inp.set(hl.Buffer(b1))
            b1 = np.asarray(one.realize([32, 32])).copy()
        inp.set(hl.Buffer(b2))
        b2 = np.asarray(two.realize([32, 32])).copy()
        ref = _life_reference(board, 2 * (i + 1))
        assert (b1 == ref).all() and (b2 == ref).all(), i


def test_game_of_life_as_a_ping_pong_reduction():
    """Halide's correctness/gameoflife.cpp: 21 steps as one reduction over a 2-slice buffer."""
    board = _random_board()
    inp = hl.ImageParam(hl.UInt(8), 2)
    life = hl.Func("life")
    x, y, z = hl.Var(), hl.Var(), hl.Var()
    life[x, y, z] = inp[x, y]
    w, h = inp.width(), inp.height()
    t = hl.RDom([(0, w), (0, h), (0, 21)])
    last = (t.z + 1) % 2
    west, east = (t.x + w - 1) % w, (t.x + 1) % w
    north, south = (t.y + h - 1) % h, (t.y + 1) % h
    nb = (life[west, north, last] + life[t.x, north, last] + life[east, north, last]
          + life[west, t.y, last] + life[east, t.y, last] + life[west, south, last]
          + life[t.x, south, last] + life[east, south, last])
    alive = life[t.x, t.y, last] != hl.cast(hl.UInt(8), 0)
    life[t.x, t.y, t.z % 2] = hl.select((nb == 3) | (alive & (nb == 2)),
                                        hl.cast(hl.UInt(8), 1), hl.cast(hl.UInt(8), 0))
    life.compute_root()
    out = hl.Func("out")
    out[x, y] = life[x, y, 1]
    inp.set(hl.Buffer(board))
    result = np.asarray(out.realize([32, 32]))
    # Slice 1 is last written by step 19, i.e. it holds 20 steps.
    assert (result == _life_reference(board, 20)).all()


# --- lerp ---

_NP = {"bool": np.bool_, "u8": np.uint8, "i8": np.int8, "u16": np.uint16, "i16": np.int16,
       "u32": np.uint32, "f32": np.float32}
_HT = {"bool": hl.Bool(), "u8": hl.UInt(8), "i8": hl.Int(8), "u16": hl.UInt(16),
       "i16": hl.Int(16), "u32": hl.UInt(32), "f32": hl.Float(32)}


def _wrapped(v, t):
    """The C++ conversion of v to the type named t (integers wrap)."""
    if t == "f32":
        return float(np.float32(v))
    if t == "bool":
        return bool(v)
    bits = 8 * np.dtype(_NP[t]).itemsize
    v = int(v) % (1 << bits)
    return v - (1 << bits) if t.startswith("i") and v >= 1 << (bits - 1) else v


def _int_values(idx, lo, scale, offset, t):
    bits = 1 if t == "bool" else 8 * np.dtype(_NP[t]).itemsize
    v = ((idx + lo) * scale + offset) % (1 << bits)
    if t in ("i8", "i16"):
        v = np.where(v >= 1 << (bits - 1), v - (1 << bits), v)
    return v.astype(np.float64)


# (value type, weight type, zero (min, extent, offset, scale), one (...), weight (...)),
# Halide's cases with the extents cut to at most 24.
_LERP_CASES = [
    ("bool", "u8", (0, 2, 0, 1), (0, 2, 0, 1), (0, 24, 0, 11)),
    ("u8", "u8", (0, 24, 0, 11), (0, 24, 3, 11), (0, 24, 0, 11)),
    ("i8", "u8", (0, 24, -128, 11), (0, 24, -120, 11), (0, 24, 0, 11)),
    ("u8", "f32", (0, 24, 0, 11), (0, 24, 0, 11), (0, 24, 0, 11 / 255.0)),
    ("i8", "f32", (0, 24, -128, 11), (0, 24, -128, 11), (0, 24, 0, 11 / 255.0)),
    ("u16", "u16", (0, 24, 0, 2731), (65535, 1, 0, 1), (0, 24, 255, 11)),
    ("u16", "u16", (65535, 1, 0, 1), (0, 24, 0, 2731), (0, 24, 255, 11)),
    ("u16", "u8", (0, 1, 0, 1), (65535, 1, 0, 1), (0, 24, 1, 11)),
    ("u16", "u32", (0, 1, 0, 1), (65535, 1, 0, 1), (-(1 << 31), 24, 255 * 65535, 1)),
    ("u32", "u8", (0, 1, 0, 1), (0x80000000, 1, 0, 1), (0, 24, 0, 11)),
    ("u32", "u16", (0, 1, 0, 1), (0x80000000, 1, 0, 1), (0, 24, 0, 2731)),
    ("u16", "f32", (0, 1, 0, 1), (65535, 1, 0, 1), (0, 24, 0, 255.0 / 65535.0)),
    ("i16", "u16", (0, 24, -32768, 2731), (0, 1, 0, 1), (0, 24, 0, 255)),
    ("f32", "f32", (0, 20, 0, .05), (0, 20, 0, .05), (0, 20, 0, .05)),
    ("f32", "u8", (0, 20, -5, .5), (0, 20, 0, .5), (0, 24, 0, 11)),
    ("f32", "u16", (0, 20, -5, .5), (0, 20, 0, .5), (0, 24, 0, 257 * 11)),
    ("f32", "u32", (0, 20, -5, .5), (0, 20, 0, .5), (-(1 << 31), 24, 255 * 65535, 1)),
]


@pytest.mark.parametrize("vt, wt, zero, one, weight", _LERP_CASES)
def test_lerp_value_and_weight_types(vt, wt, zero, one, weight):
    """Halide's correctness/lerp.cpp: lerp over ranges of values and weights, many types."""
    params = []
    for (_, _, offset, scale), t in ((zero, vt), (one, vt), (weight, wt)):
        for v in (scale, offset):
            p = hl.Param(_HT[t])
            p.set(_wrapped(v, t))
            params.append(p)
    zs, zo, os_, oo, ws, wo = params
    zv, ov, wv = hl.Var(), hl.Var(), hl.Var()
    f = hl.Func("lerp_test")
    f[zv, ov, wv] = hl.lerp(hl.cast(_HT[vt], (zv + zero[0]) * zs + zo),
                            hl.cast(_HT[vt], (ov + one[0]) * os_ + oo),
                            hl.cast(_HT[wt], (wv + weight[0]) * ws + wo))
    out = hl.Buffer(_HT[vt], [zero[1], one[1], weight[1]])
    f.realize(out)
    got = np.asarray(out).astype(np.float64)  # [k, j, i]

    def values(spec, t):
        lo, ext, offset, scale = spec
        idx = np.arange(ext, dtype=np.int64)
        if t == "f32":
            return ((idx + lo).astype(np.float32) * np.float32(scale)
                    + np.float32(offset)).astype(np.float64)
        return _int_values(idx, lo, scale, offset, t)

    z, o = values(zero, vt), values(one, vt)
    a = values(weight, wt)
    if wt != "f32":
        a = a / ((1 << (8 * np.dtype(_NP[wt]).itemsize)) - 1)
    z, o, a = z[None, None, :], o[None, :, None], a[:, None, None]
    full = z * (1.0 - a) + o * a
    if vt == "f32":
        exp = full.astype(np.float32).astype(np.float64)
        d = np.abs(got - exp)
        ok = (d < 1e-4) | (d < 2e-7 * np.maximum(np.abs(got), np.abs(exp)))
        assert ok.all()
    else:
        full = np.where(full < 0, full - 0.5, full + 0.5)
        exp = (full >= 1) if vt == "bool" else np.trunc(full)
        assert (got == exp).all(), np.argwhere(got != exp)[:5]


def test_lerp_of_constants():
    """Halide's correctness/lerp.cpp: lerp(0, u32 1023, 0.5f) quantizes the weight to 0x7fffffff."""
    f = hl.Func("lerp_constants")
    f[()] = hl.lerp(0, hl.cast(hl.UInt(32), 1023), hl.f32(0.5))
    assert int(np.asarray(f.realize([]))[()]) == 511


def test_vectorized_lerp_with_int32_casts_at_the_ends():
    """Halide's correctness/lerp.cpp: weight 0 gives a, weight 1 gives b (int32 values)."""
    i, j = np.meshgrid(np.arange(16), np.arange(16))  # [j, i]
    a_img = ((i << 4) + j).astype(np.uint8)
    b_img = (((15 - i) << 4) + (15 - j)).astype(np.uint8)
    a, b = hl.ImageParam(hl.UInt(8), 2), hl.ImageParam(hl.UInt(8), 2)
    x, y, w = hl.Var(), hl.Var(), hl.Param(hl.Float(32))
    f = hl.Func()
    f[x, y] = hl.lerp(hl.cast(hl.Int(32), a[x, y]), hl.cast(hl.Int(32), b[x, y]), w)
    f.vectorize(x, 4)
    a.set(hl.Buffer(a_img))
    b.set(hl.Buffer(b_img))
    w.set(0.0)
    assert (np.asarray(f.realize([16, 16])) == a_img).all()
    w.set(1.0)
    assert (np.asarray(f.realize([16, 16])) == b_img).all()


# --- math ---


def _math_args(dt, steps, start, end):
    v = float(start) + np.arange(steps) * (float(end) - float(start)) / steps
    if np.issubdtype(dt, np.floating):
        return v.astype(dt)
    return np.trunc(v).astype(np.int64).astype(dt)


def _c_round(v):
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


_PI = float(np.float32(3.1415))
_MATH_1 = [
    ("abs", np.abs, -1000, 1000), ("sqrt", np.sqrt, 0, 1000000),
    ("sin", np.sin, -5 * _PI, 5 * _PI), ("cos", np.cos, -5 * _PI, 5 * _PI),
    ("tan", np.tan, -0.49 * _PI, 0.49 * _PI), ("asin", np.arcsin, -1, 1),
    ("acos", np.arccos, -1, 1), ("atan", np.arctan, -256, 100),
    ("sinh", np.sinh, -5 * _PI, 5 * _PI), ("cosh", np.cosh, 0, 1),
    ("tanh", np.tanh, -5 * _PI, 5 * _PI), ("asinh", np.arcsinh, -10, 10),
    ("acosh", np.arccosh, 1, 10), ("atanh", np.arctanh, -1, 1), ("round", _c_round, -15, 15),
    ("exp", np.exp, 0, 20), ("log", np.log, 1, 1000000), ("floor", np.floor, -25, 25),
    ("ceil", np.ceil, -25, 25), ("trunc", np.trunc, -25, 25),
]
_MATH_2 = [("atan2", np.arctan2, -20, 20, -2, 2.001), ("pow", np.power, -10, 10, -4, 4),
           ("absd", lambda a, b: np.abs(a - b), -25, 25, -25, 25)]


def _float_close(exp, got):
    exp, got = exp.astype(np.float64), got.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        d = np.abs(exp - got)
        rel = d / np.maximum(np.abs(exp), np.abs(got))
    return (exp == got) | (np.isnan(exp) & np.isnan(got)) | (d < 1e-4) | (rel < 1.25e-6)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_float_math_functions(dt):
    """Halide's correctness/math.cpp: one- and two-argument float math against numpy."""
    x = hl.Var("x")
    for name, ref, start, end in _MATH_1:
        data = _math_args(dt, 256, start, end)
        f = hl.Func("test_" + name)
        f[x] = getattr(hl, name)(hl.Buffer(data)[x])
        with np.errstate(all="ignore"):
            exp = ref(data)
        assert _float_close(exp, np.asarray(f.realize([256]))).all(), name
    for name, ref, s1, e1, s2, e2 in _MATH_2:
        data = np.ascontiguousarray(np.stack([_math_args(dt, 256, s1, e1),
                                              _math_args(dt, 256, s2, e2)], axis=1))
        buf = hl.Buffer(data)
        f = hl.Func("test_" + name)
        f[x] = getattr(hl, name)(buf[0, x], buf[1, x])
        with np.errstate(all="ignore"):
            exp = ref(data[:, 0], data[:, 1])
        assert _float_close(exp, np.asarray(f.realize([256]))).all(), name


@pytest.mark.parametrize("dt", [np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32])
def test_integer_abs_and_absd(dt):
    """Halide's correctness/math.cpp: abs and absd of integers over their whole range."""
    x = hl.Var("x")
    info = np.iinfo(dt)
    if info.min < 0:
        data = _math_args(dt, 255, -info.max, info.max)
        f = hl.Func("test_abs")
        f[x] = hl.abs(hl.Buffer(data)[x])
        got = np.asarray(f.realize([255]))
        assert got.dtype == np.dtype(dt.__name__.replace("int", "uint"))
        assert (got.astype(np.int64) == np.abs(data.astype(np.int64))).all()
    a, b = _math_args(dt, 256, info.min, info.max), _math_args(dt, 256, info.min, info.max)
    buf = hl.Buffer(np.ascontiguousarray(np.stack([a, b[::-1]], axis=1)))
    f = hl.Func("test_absd")
    f[x] = hl.absd(buf[0, x], buf[1, x])
    got = np.asarray(f.realize([256])).astype(np.int64)
    assert (got == np.abs(a.astype(np.int64) - b[::-1].astype(np.int64))).all()


# --- infer_arguments ---


def _infer_arguments_pipeline():
    input1 = hl.ImageParam(hl.UInt(8), 3, "input1")
    input2 = hl.ImageParam(hl.UInt(8), 2, "input2")
    height, width = hl.Param(hl.Int(32), "height"), hl.Param(hl.Int(32), "width")
    thresh = hl.Param(hl.UInt(8), "thresh")
    frac = hl.Param(hl.Float(32), "frac", 22.5)
    frac.set_range(hl.f32(11.25), hl.f32(1e30))
    z_unsigned = hl.Param(hl.UInt(64), "z_unsigned", 0xdeadbeef)
    z_unsigned.set_range(hl.cast(hl.UInt(64), 1), hl.u64(0xf00dcafedeadbeef))
    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
    f = hl.Func("f")
    f[x, y, c] = frac * (input1[hl.clamp(x, 0, height), hl.clamp(y, 0, width), c]
                         + hl.min(thresh, input2[x, y])) + (0 * z_unsigned)
    return f, input1, frac, thresh


def _defined(e):
    return e is not None and e.defined()


def test_infer_arguments_order_kinds_types_and_explicit_estimates():
    """Halide's correctness/infer_arguments.cpp: buffers first, then scalars by name."""
    f, input1, frac, thresh = _infer_arguments_pipeline()
    args = f.infer_arguments()
    assert [a.name for a in args] == ["input1", "input2", "frac", "height", "thresh", "width",
                                      "z_unsigned"]
    assert [a.kind == hl.ArgumentKind.InputBuffer for a in args] == [True] * 2 + [False] * 5
    assert [a.dimensions for a in args] == [3, 2, 0, 0, 0, 0, 0]
    assert [a.type for a in args[2:]] == [hl.Float(32), hl.Int(32), hl.UInt(8), hl.Int(32),
                                          hl.UInt(64)]
    est = [a.argument_estimates for a in args]
    assert [_defined(e.scalar_min) for e in est] == [False, False, True, False, False, False, True]
    assert [_defined(e.scalar_max) for e in est] == [False, False, True, False, False, False, True]
    assert not _defined(est[0].scalar_def) and not _defined(est[1].scalar_def)
    assert hl.evaluate(est[2].scalar_def) == 22.5 and hl.evaluate(est[2].scalar_min) == 11.25
    assert abs(hl.evaluate(est[2].scalar_max) - 1e30) < 1e23
    assert hl.evaluate(est[6].scalar_def) == 0xdeadbeef
    assert hl.evaluate(est[6].scalar_min) == 1
    assert hl.evaluate(est[6].scalar_max) == 0xf00dcafedeadbeef

    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
    fa, fb, ft = hl.Func("f_a"), hl.Func("f_b"), hl.Func("f_tuple")
    fa[x, y, c] = input1[x, y, c] * frac
    fb[x, y, c] = input1[x, y, c] + thresh
    ft[x, y, c] = (fa[x, y, c], fb[x, y, c])
    args = ft.infer_arguments()
    assert [a.name for a in args] == ["input1", "frac", "thresh"]
    assert [a.dimensions for a in args] == [3, 0, 0]
    assert [a.type for a in args[1:]] == [hl.Float(32), hl.UInt(8)]


def test_infer_arguments_every_scalar_has_a_default():
    """Halide's correctness/infer_arguments.cpp: every scalar argument has a defined scalar_def."""
    f, *_ = _infer_arguments_pipeline()
    est = [a.argument_estimates for a in f.infer_arguments()]
    assert [_defined(e.scalar_def) for e in est] == [False, False] + [True] * 5
    assert [hl.evaluate(e.scalar_def) for e in est[3:6]] == [0, 0, 0]


# --- trim_no_ops ---


def test_trimmed_no_op_inequality_updates():
    """Halide's correctness/trim_no_ops.cpp: updates whose selects are no-ops on some ranges."""
    f, x = hl.Func("f"), hl.Var("x")
    f[x] = x
    f[x] += hl.select((x > 10) & (x < 20), 1, 0)
    f[x] += hl.select(x < 10, 0, 1)
    f[x] *= hl.select((x > 20) & (x < 30), 2, 1)
    f[x] = hl.select((x >= 60) & (x <= 100), 100 - f[x], f[x])
    xs = np.arange(100)
    exp = (xs + ((xs > 10) & (xs < 20)) + (xs >= 10)) * np.where((xs > 20) & (xs < 30), 2, 1)
    exp = np.where(xs >= 60, 100 - exp, exp)
    assert (np.asarray(f.realize([100])) == exp).all()


def test_trimmed_no_op_equality_update():
    """Halide's correctness/trim_no_ops.cpp: select((x == 10) && (x < y), 1, 0)."""
    f, x, y = hl.Func("f"), hl.Var("x"), hl.Var("y")
    f[x, y] = x + y
    f[x, y] += hl.select((x == 10) & (x < y), 1, 0)
    xx, yy = _grid(100, 100)
    assert (np.asarray(f.realize([100, 100])) == xx + yy + ((xx == 10) & (xx < yy))).all()


def test_tiled_histogram_with_clamped_predicated_domain():
    """Halide's correctness/trim_no_ops.cpp: a 4-D tiled histogram over a 74 x 74 image."""
    f, hist, x, y = hl.Func("f"), hl.Func("hist"), hl.Var("x"), hl.Var("y")
    f[x, y] = hl.cast(hl.UInt(8), (x * 37 + y * 101 + (x * y) % 13) % 256)
    f.compute_root()
    r = hl.RDom([(0, 10), (0, 10), (0, 10), (0, 10)])
    xi, yi = r[0] + r[2] * 10, r[1] + r[3] * 10
    hist[x] = 0
    hist[f[hl.clamp(xi, 0, 73), hl.clamp(yi, 0, 73)]] += hl.select(
        (xi >= 0) & (xi <= 73) & (yi >= 0) & (yi <= 73), 1, 0)
    fx, fy = _grid(74, 74)
    vals = (fx * 37 + fy * 101 + (fx * fy) % 13) % 256
    assert (np.asarray(hist.realize([256])) == np.bincount(vals.ravel(), minlength=256)).all()


def test_tiled_triangle_with_undef_arm():
    """Halide's correctness/trim_no_ops.cpp: select(2x < y, 5, undef) tiled 4x4: a triangle."""
    f, x, y = hl.Func("f"), hl.Var("x"), hl.Var("y")
    f[x, y] = hl.select(2 * x < y, 5, hl.undef(hl.Int(32)))
    f.tile(x, y, hl.Var("xi"), hl.Var("yi"), 4, 4)
    out = hl.Buffer(np.full((20, 20), -1, dtype=np.int32))
    f.realize(out)
    xx, yy = _grid(20, 20)
    assert (np.asarray(out) == np.where(2 * xx < yy, 5, -1)).all()


# --- deferred_loop_level ---

_DEFERRED_NESTS = {
    "at_x": """produce outer1:
  for c:
    for y:
      for x:
        produce inner1:
          inner1(...) = ...
        consume inner1:
          outer1(...) = ...""",
    "inlined": """produce outer2:
  for c:
    for y:
      for x:
        outer2(...) = ...""",
    "root": """produce inner3:
  for c:
    for y:
      for x:
        inner3(...) = ...
consume inner3:
  produce outer3:
    for c:
      for y:
        for x:
          outer3(...) = ...""",
    "y_store_root": """store inner4:
  produce outer4:
    for c:
      for y:
        produce inner4:
          for x:
            inner4(...) = ...
        consume inner4:
          for x:
            outer4(...) = ...""",
    "y_store_inlined": """produce outer5:
  for c:
    for y:
      produce inner5:
        for x:
          inner5(...) = ...
      consume inner5:
        for x:
          outer5(...) = ...""",
}


@pytest.mark.parametrize("i, case", list(enumerate(_DEFERRED_NESTS, 1)))
def test_loop_levels_set_after_scheduling(capfd, i, case):
    """Halide's correctness/deferred_loop_level.cpp: LoopLevel.set() after compute_at/store_at."""
    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
    inner, outer = hl.Func(f"inner{i}"), hl.Func(f"outer{i}")
    inner[x, y, c] = hl.sin(hl.cast(hl.Float(32), x + y + c))
    compute_at, store_at = hl.LoopLevel(), hl.LoopLevel()
    inner.compute_at(compute_at).store_at(store_at)
    outer[x, y, c] = hl.cos(hl.cast(hl.Float(32), inner[x, y, c]))
    levels = {"at_x": (hl.LoopLevel(outer, x), hl.LoopLevel(outer, x)),
              "inlined": (hl.LoopLevel.inlined(), hl.LoopLevel.inlined()),
              "root": (hl.LoopLevel.root(), hl.LoopLevel.root()),
              "y_store_root": (hl.LoopLevel(outer, y), hl.LoopLevel.root()),
              "y_store_inlined": (hl.LoopLevel(outer, y), hl.LoopLevel.inlined())}[case]
    compute_at.set(levels[0])
    store_at.set(levels[1])
    out = np.asarray(outer.realize([3, 2, 2]))
    cc, yy, xx = np.mgrid[0:2, 0:2, 0:3]
    assert np.allclose(out, np.cos(np.sin((xx + yy + cc).astype(np.float32))), atol=1e-6)
    _, text = _captured(capfd, outer.print_loop_nest)
    assert text.strip() == _DEFERRED_NESTS[case]


# --- func_clone ---


def test_clone_in_returns_the_same_clone():
    """Halide's correctness/func_clone.cpp: repeated clone_in calls give one clone."""
    x, y = hl.Var("x"), hl.Var("y")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + y
    g[x, y] = f[x, y]
    clone = f.clone_in(g)
    assert clone.name() != f.name()
    assert all(f.clone_in(g).name() == clone.name() for _ in range(5))
    d, e, f, g, h = (hl.Func(n) for n in "defgh")
    d[x, y] = x + y
    for fn in (e, f, g, h):
        fn[x, y] = d[x, y]
    assert d.clone_in([e, f, g]).name() == d.clone_in([g, f, e]).name()


def test_clone_computed_at_root_and_shared_clones():
    """Halide's correctness/func_clone.cpp: func_clone and multiple_funcs_sharing_clone."""
    x, y = hl.Var("x"), hl.Var("y")
    xx, _ = _grid(64, 64)
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = x
    g[x, y] = f[x]
    f.clone_in(g).compute_root()
    f.compute_root()
    assert (np.asarray(g.realize([64, 64])) == xx).all()

    f, g1, g2, g3 = hl.Func("f"), hl.Func("g1"), hl.Func("g2"), hl.Func("g3")
    f[x] = x
    for g in (g1, g2, g3):
        g[x, y] = f[x]
    f.compute_root()
    f.clone_in([g1, g2]).compute_root()
    for im in hl.Pipeline([g1, g2, g3]).realize([64, 64]):
        assert (np.asarray(im) == xx).all()


def test_clone_used_by_updates_defined_after_it():
    """Halide's correctness/func_clone.cpp: update_defined_after_clone with specialize."""
    x, y, xi = hl.Var("x"), hl.Var("y"), hl.Var("xi")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + y
    g[x, y] = f[x, y]
    clone = f.clone_in(g)
    r = hl.RDom([(0, 100), (0, 100)])
    r.where(r.x < r.y)
    g[r.x, r.y] += 2 * f[r.x, r.y]
    param = hl.Param(hl.Bool())
    g.specialize(param).vectorize(x, 8).unroll(x, 2).split(x, x, xi, 4).parallel(x)
    rxo, rxi = hl.RVar("rxo"), hl.RVar("rxi")
    g.update(0).split(r.x, rxo, rxi, 2).unroll(rxi)
    f.compute_root()
    clone.compute_root().vectorize(x, 8).unroll(x, 2).split(x, x, xi, 4).parallel(x)
    xx, yy = _grid(150, 150)
    exp = np.where((xx <= 99) & (yy <= 99) & (xx < yy), 3 * (xx + yy), xx + yy)
    for value in (False, True):
        param.set(value)
        assert (np.asarray(g.realize([150, 150])) == exp).all(), value


def test_clones_of_mutated_funcs_and_clones_of_clones():
    """Halide's correctness/func_clone.cpp: clone_depend_on_mutated_func and clone_on_clone."""
    x, y = hl.Var("x"), hl.Var("y")
    xx, yy = _grid(25, 25)
    a, b, c, d, e, f = (hl.Func(n) for n in "abcdef")
    a[x, y] = x + y
    b[x, y] = a[x, y] + 1
    e[x, y] = a[x, y] + 2
    c[x, y] = b[x, y] + 2
    d[x, y] = c[x, y] + 3
    f[x, y] = c[x, y] + 4
    a.clone_in(b).compute_root()
    c.clone_in(f).compute_root()
    for fn in (a, b, c, d, e, f):
        fn.compute_root()
    got = [np.asarray(im) for im in hl.Pipeline([d, e, f]).realize([25, 25])]
    for im, k in zip(got, (6, 2, 7)):
        assert (im == xx + yy + k).all()

    a, b, c, d, e, f = (hl.Func(n) for n in "abcdef")
    a[x, y] = x + y
    b[x, y] = a[x, y] + 1
    c[x, y] = b[x, y] + 2
    d[x, y] = b[x, y] + 3
    e[x, y] = a[x, y] + b[x, y]
    f[x, y] = a[x, y] + b[x, y] + 1
    b.clone_in([d, f]).compute_root()
    a_in_be = a.clone_in([b, e]).compute_root()
    a_in_be.clone_in(e).compute_root()
    for fn in (a, b, c, d, e, f):
        fn.compute_root()
    got = [np.asarray(im) for im in hl.Pipeline([c, d, e, f]).realize([25, 25])]
    exps = [xx + yy + 3, xx + yy + 4, 2 * (xx + yy) + 1, 2 * (xx + yy) + 2]
    for im, exp in zip(got, exps):
        assert (im == exp).all()


def test_clone_of_a_reduction_rewrites_its_self_references():
    """Halide's correctness/func_clone.cpp: clone_reduction, each copy computed at its consumer."""
    x, r = hl.Var(), hl.RDom([(0, 8)])
    s, f, g = hl.Func("sum"), hl.Func("f"), hl.Func("g")
    s[x] += r * x
    f[x] = s[x]
    g[x] = s[x]
    s.clone_in(g).compute_at(g, x)
    s.compute_at(f, x)
    for im in hl.Pipeline([f, g]).realize([128]):
        assert (np.asarray(im) == 28 * np.arange(128)).all()


# --- async ---


def _async_case(n):
    """Halide's async.cpp case n (its opaque `expensive(v)` extern returns v: the identity here)."""
    x, y = hl.Var("x"), hl.Var("y")
    p, c = hl.Func("producer"), hl.Func("consumer")
    if n == 0:
        p[x, y] = x + y
        c[x, y] = p[x - 1, y - 1] + p[x + 1, y + 1]
        c.compute_root()
        p.compute_root().async_()
        return c, (16, 16), lambda xx, yy: 2 * (xx + yy)
    if n in (1, 2):
        p[x] = x
        sign = 1 if n == 1 else -1
        c[x] = p[sign * x] + p[sign * x - sign]
        p.store_root().fold_storage(x, 8, n == 1).compute_at(c, x).async_()
        c.compute_root()
        return c, (16,), lambda xx: sign * (2 * xx - 1)
    if n in (3, 4, 5):
        p[x, y] = x + y
        if n == 5:
            c[x, y] = p[x - 1, y] + p[x + 1, y]
            p.store_root().fold_storage(x, 8).fold_storage(y, 2).compute_at(c, x).async_()
        else:
            c[x, y] = p[x - 1, y - 1] + p[x + 1, y + 1]
            p.store_root().fold_storage(y, 8).compute_at(c, y if n == 3 else x).async_()
        c.compute_root()
        return c, (16, 16), lambda xx, yy: 2 * (xx + yy)
    if n in (6, 7, 8):
        p1, p2 = hl.Func("producer_1"), hl.Func("producer_2")
        p1[x, y] = x
        p2[x, y] = y
        c[x, y] = p1[x - 1, y] + p1[x + 1, y] + p2[x - 2, y] + p2[x + 2, y]
        for q in (p1, p2):
            if n == 6:
                q.compute_root().async_()
            elif n == 7:
                q.compute_at(c, y).async_()
            else:
                q.compute_at(c, x).store_at(c, y).async_()
        if n != 6:
            c.parallel(y)
        return c, (16, 16), lambda xx, yy: 2 * (xx + yy)
    if n == 9:
        f0, f1, f2 = hl.Func("f0"), hl.Func("f1"), hl.Func("f2")
        f0[x, y] = x + y
        f1[x, y] = f0[x - 1, y - 1] + f0[x + 1, y + 1]
        f2[x, y] = f1[x - 1, y - 1] + f1[x + 1, y + 1]
        f2.compute_root()
        f1.compute_at(f2, y).async_()
        f0.compute_at(f1, x).async_()
        return f2, (16, 16), lambda xx, yy: 4 * (xx + yy)
    if n == 10:
        p1, c1 = hl.Func("producer_1"), hl.Func("consumer_1")
        p2, c2 = hl.Func("producer_2"), hl.Func("consumer_2")
        p1[x, y] = x + y
        c1[x, y] = p1[x - 1, y] + p1[x + 1, y]
        p2[x, y] = c1[x, y - 1] + c1[x, y + 1]
        c2[x, y] = p2[x - 1, y] + p2[x + 1, y]
        c2.compute_root()
        p2.store_at(c2, y).compute_at(c2, x).async_()
        c1.store_root().compute_at(c2, y).async_()
        p1.store_at(c2, y).compute_at(c1, x).async_()
        return c2, (16, 16), lambda xx, yy: 8 * (xx + yy)
    if n in (11, 12):
        s = 1 if n == 11 else -1
        p[x, y] = x + y
        c[x, y] = p[x - 1, s * hl.min(y - 1, 15)] + p[x + 1, s * hl.min(y + 1, 17)]
        c.compute_root()
        p.store_root().fold_storage(y, 8, n == 11).compute_at(c, y).async_()
        return c, (64, 64), lambda xx, yy: (2 * xx + s * np.minimum(yy - 1, 15)
                                            + s * np.minimum(yy + 1, 17))
    if n == 13:
        p[x, y] = x + y
        c[x, y] = p[x, 2 * y - 1] + p[x, 2 * y] + p[x, 2 * y + 1] + p[x, 2 * y + 2]
        c.compute_root()
        p.store_root().fold_storage(y, 8).compute_at(c, y).async_()
        return c, (16, 64), lambda xx, yy: 4 * xx + 8 * yy + 2
    if n == 14:
        p[x, y] = x + y
        b = 3 * (y / 2)
        c[x, y] = hl.select(y % 2 == 0, p[x, b - 1] + 5 * p[x, b] + 3 * p[x, b + 1],
                            3 * p[x, b + 1] + 5 * p[x, b + 2] + p[x, b + 3])
        c.compute_root().align_bounds(y, 2).unroll(y, 2)
        p.store_root().fold_storage(y, 8).compute_at(c, y).async_()
        return c, (64, 64), lambda xx, yy: (9 * xx + ((3 * yy - 1) >> 1) + 2 * ((3 * yy) >> 1)
                                            + 3 * ((3 * yy + 1) >> 1) + 2 * ((3 * yy + 2) >> 1)
                                            + ((3 * yy + 3) >> 1))
    friend = hl.Func("producer_friend")
    friend[x, y] = x + y
    p[x, y] = x + y + friend[x, y]
    c[x, y] = p[x, y]
    p.compute_root().async_()
    c.compute_root()
    friend.compute_at(p, hl.Var.outermost())
    return c, (64, 64), lambda xx, yy: 2 * (xx + yy)


@pytest.mark.parametrize("n", range(16))
def test_async_producers(n):
    """Halide's correctness/async.cpp: async producers with sliding, folding, nesting."""
    out, size, ref = _async_case(n)
    got = np.asarray(out.realize(list(size)))
    if len(size) == 1:
        assert (got == ref(np.arange(size[0]))).all()
    else:
        assert (got == ref(*_grid(*size))).all()


# --- boundary_conditions ---

_BW = _BH = 32
_BC_DATA = (np.arange(_BW)[None, :] + np.arange(_BH)[:, None] * _BW).astype(np.uint8)


def _bc_reference(kind, xs, ys):
    w, h = _BW, _BH
    if kind == "constant_exterior":
        inside = (xs >= 0) & (ys >= 0) & (xs < w) & (ys < h)
        return np.where(inside, _BC_DATA[np.clip(ys, 0, h - 1), np.clip(xs, 0, w - 1)], 42)
    if kind == "repeat_edge":
        mx, my = np.clip(xs, 0, w - 1), np.clip(ys, 0, h - 1)
    elif kind == "repeat_image":
        mx, my = xs % w, ys % h
    elif kind == "mirror_image":
        mx = np.where(xs < 0, -(xs + 1), xs) % (2 * w)
        mx = np.where(mx > w - 1, 2 * w - 1 - mx, mx)
        my = np.where(ys < 0, -(ys + 1), ys) % (2 * h)
        my = np.where(my > h - 1, 2 * h - 1 - my, my)
    else:
        mx = np.abs(xs) % (2 * w - 2)
        mx = np.where(mx > w - 1, 2 * w - 2 - mx, mx)
        my = np.abs(ys) % (2 * h - 2)
        my = np.where(my > h - 1, 2 * h - 2 - my, my)
    return _BC_DATA[my, mx]


@pytest.mark.parametrize("partition", ["Auto", "Never"])
@pytest.mark.parametrize("vector_width", [1, 8])
@pytest.mark.parametrize("kind", ["repeat_edge", "constant_exterior", "repeat_image",
                                  "mirror_image", "mirror_interior"])
def test_boundary_conditions(kind, vector_width, partition):
    """Halide's correctness/boundary_conditions.cpp: Func/Buffer sources, partial bounds."""
    x, y = hl.Var("x"), hl.Var("y")
    buf = hl.Buffer(_BC_DATA)
    src = hl.Func("input_f")
    src[x, y] = buf[x, y]
    fn = getattr(hl.BoundaryConditions, kind)
    extra = (42,) if kind == "constant_exterior" else ()
    undefined = hl.Range(hl.Expr(), hl.Expr())
    full = [(0, _BW), (0, _BH)]
    cases = [(fn(src, *extra, full), -25, 100, -25, 100),
             (fn(buf, *extra, full), -25, 100, -25, 100),
             (fn(buf, *extra, [undefined, hl.Range(0, _BH)]), 0, _BW, -25, 100),
             (fn(buf, *extra, [hl.Range(0, _BW), undefined]), -25, 100, 0, _BH),
             (fn(buf, *extra), -25, 100, -25, 100)]
    for bounded, mx, ex, my, ey in cases:
        g = hl.Func("g")
        g[x, y] = bounded[x, y]
        if vector_width != 1:
            g.vectorize(x, vector_width)
        g.partition(x, getattr(hl.Partition, partition))
        g.partition(y, getattr(hl.Partition, partition))
        out = hl.Buffer(hl.UInt(8), [ex, ey])
        out.set_min([mx, my])
        g.realize(out)
        ys, xs = np.mgrid[my:my + ey, mx:mx + ex]
        assert (np.asarray(out) == _bc_reference(kind, xs, ys)).all(), (mx, my)


# --- image_wrapper ---


def _image(fn, size, name="img"):
    """An ImageParam holding fn over a grid; returns it and the numpy data it must outlive."""
    img = hl.ImageParam(hl.Int(32), len(size), name)
    data = fn(np.arange(size[0])) if len(size) == 1 else fn(*_grid(*size))
    data = np.ascontiguousarray(data.astype(np.int32))
    img.set(hl.Buffer(data))
    return img, data


def test_image_param_in_returns_the_same_wrapper():
    """Halide's correctness/image_wrapper.cpp: repeated img.in_() calls give one wrapper."""
    x, y = hl.Var("x"), hl.Var("y")
    img = hl.ImageParam(hl.Int(32), 2)
    f = hl.Func("f")
    f[x, y] = img[x, y]
    wrapper = img.in_(f)
    assert all(img.in_(f).name() == wrapper.name() for _ in range(5))
    img = hl.ImageParam(hl.Int(32), 2)
    f = hl.Func("f")
    f[x, y] = img[x, y]
    assert img.in_().name() == img.in_().name()
    img = hl.ImageParam(hl.Int(32), 2)
    e, f, g, h = (hl.Func(n) for n in "efgh")
    for fn in (e, f, g, h):
        fn[x, y] = img[x, y]
    assert img.in_([e, f, g]).name() == img.in_([g, f, e]).name()


def test_image_param_in_refuses_a_list_overlapping_an_existing_wrapper():
    """Halide's correctness/image_wrapper.cpp: a second wrapper for a Func is refused."""
    x, y = hl.Var("x"), hl.Var("y")
    img = hl.ImageParam(hl.Int(32), 2)
    e, f = hl.Func("e"), hl.Func("f")
    e[x, y] = img[x, y]
    f[x, y] = img[x, y]
    img.in_(f)
    with pytest.raises(Exception, match="already has a wrapper"):
        img.in_([e, f])


def test_custom_image_wrappers():
    """Halide's correctness/image_wrapper.cpp: func_wrapper and multiple_funcs_sharing_wrapper."""
    x, y = hl.Var("x"), hl.Var("y")
    xx, _ = _grid(64, 64)
    img, keep = _image(lambda v: v, [64])
    g = hl.Func("g")
    g[x, y] = img[x]
    img.in_(g).compute_root()
    assert (np.asarray(g.realize([64, 64])) == xx).all()
    g1, g2, g3 = hl.Func("g1"), hl.Func("g2"), hl.Func("g3")
    for g in (g1, g2, g3):
        g[x, y] = img[x]
    img.in_([g1, g2]).compute_root()
    for im in hl.Pipeline([g1, g2, g3]).realize([64, 64]):
        assert (np.asarray(im) == xx).all()
    del keep


def test_func_of_image_param_is_its_own_func():
    """Halide's correctness/image_wrapper.cpp: `Func img_f = img` is the image's defined Func."""
    img, keep = _image(lambda v: 3 * v, [8])
    img_f = hl.Func(img)
    assert img_f.defined()
    x, h = hl.Var("x"), hl.Func("h")
    h[x] = img_f[x] + 1
    assert (np.asarray(h.realize([8])) == 3 * np.arange(8) + 1).all()
    del keep


def test_global_image_wrapper_tiled_inside_consumer_tiles():
    """Halide's correctness/image_wrapper.cpp: global_wrapper with the image's Func at root."""
    x, y, xi, yi, t = hl.Var("x"), hl.Var("y"), hl.Var("xi"), hl.Var("yi"), hl.Var("t")
    img, keep = _image(lambda a, b: a + b, [200, 200])
    g, h = hl.Func("g"), hl.Func("h")
    g[x, y] = img[x, y]
    h[x, y] = g[x, y] + img[x, y]
    wrapper = img.in_()
    hl.Func(img).compute_root()
    h.compute_root().tile(x, y, xi, yi, 16, 16).fuse(x, y, t).parallel(t)
    g.compute_at(h, yi)
    wrapper.compute_at(h, yi).tile(hl._0, hl._1, xi, yi, 8, 8).fuse(xi, yi, t).vectorize(t, 4)
    assert (np.asarray(h.realize([200, 200])) == 2 * keep).all()


def test_image_wrapper_used_by_later_updates_and_of_an_update_func():
    """Halide's correctness/image_wrapper.cpp: update_defined_after_wrapper and rdom_wrapper."""
    x, y, xi = hl.Var("x"), hl.Var("y"), hl.Var("xi")
    _0 = hl._0
    img, keep = _image(lambda a, b: a + b, [150, 150])
    g = hl.Func("g")
    g[x, y] = img[x, y]
    wrapper = img.in_(g)
    r = hl.RDom([(0, 100), (0, 100)])
    r.where(r.x < r.y)
    g[r.x, r.y] += 2 * img[r.x, r.y]
    param = hl.Param(hl.Bool())
    g.specialize(param).vectorize(x, 8).unroll(x, 2).split(x, x, xi, 4).parallel(x)
    rxo, rxi = hl.RVar("rxo"), hl.RVar("rxi")
    g.update(0).split(r.x, rxo, rxi, 2).unroll(rxi)
    wrapper.compute_root().vectorize(_0, 8).unroll(_0, 2).split(_0, _0, xi, 4).parallel(_0)
    xx, yy = _grid(150, 150)
    exp = np.where((xx <= 99) & (yy <= 99) & (xx < yy), 3 * (xx + yy), xx + yy)
    for value in (False, True):
        param.set(value)
        assert (np.asarray(g.realize([150, 150])) == exp).all(), value

    img2, keep2 = _image(lambda a, b: a + b, [32, 32])
    g = hl.Func("g")
    g[x, y] = 10
    g[x, y] += 2 * img2[x, x]
    r = hl.RDom([(0, 32), (0, 32)])
    g[r.x, r.y] += 3 * img2[r.y, r.y]
    wrapper = g.in_().compute_root()
    g.compute_at(wrapper, x)
    xx, yy = _grid(32, 32)
    assert (np.asarray(wrapper.realize([32, 32])) == 4 * xx + 6 * yy + 10).all()
    del keep, keep2


def test_global_and_custom_image_wrappers_and_wrappers_of_wrappers():
    """Halide's correctness/image_wrapper.cpp: global_and_custom, depend_on_mutated, on_wrapper."""
    x, y, xo, xi = hl.Var("x"), hl.Var("y"), hl.Var("xo"), hl.Var("xi")
    _0 = hl._0
    xx, yy = _grid(64, 64)
    img, keep = _image(lambda v: v, [64])
    g, res = hl.Func("g"), hl.Func("result")
    g[x, y] = img[x]
    res[x, y] = img[x] + g[x, y]
    img.in_(g).compute_at(g, x)
    img.in_().compute_at(res, y)
    g.compute_at(res, y)
    assert (np.asarray(res.realize([64, 64])) == 2 * xx).all()

    img2, keep2 = _image(lambda a, b: a + b, [64, 64])
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    f[x, y] = img2[x, y]
    g[x, y] = f[x, y]
    h[x, y] = g[x, y]
    f.compute_at(g, y).vectorize(x, 8)
    g.compute_root()
    img_in_f = img2.in_(f)
    g.in_(h).compute_root().compute_at(h, y).vectorize(x, 8)
    img_in_f.compute_at(f, y).split(_0, xo, xi, 8)
    assert (np.asarray(h.realize([64, 64])) == xx + yy).all()

    g, h = hl.Func("g"), hl.Func("h")
    g[x, y] = img2[x, y] + img2[x, y]
    img_in_g = img2.in_(g).compute_root()
    img_in_img_in_g = img2.in_(img_in_g).compute_root()
    h[x, y] = g[x, y] + img2[x, y] + img_in_img_in_g[x, y]
    g.compute_root()
    img2.in_(h).compute_root()
    g.in_(h).compute_root()
    assert (np.asarray(h.realize([64, 64])) == 4 * (xx + yy)).all()
    del keep, keep2


def test_wrappers_in_an_rdom_predicate():
    """Halide's correctness/image_wrapper.cpp: wrapper_on_rdom_predicate."""
    x, y = hl.Var("x"), hl.Var("y")
    img, keep = _image(lambda a, b: a + b, [120, 120])
    g, h = hl.Func("g"), hl.Func("h")
    g[x, y] = 10
    h[x, y] = 5
    r = hl.RDom([(0, 100), (0, 100)])
    r.where(img[r.x, r.y] + h[r.x, r.y] < 50)
    g[r.x, r.y] += h[r.x, r.y]
    h.in_().store_root().compute_at(g, r.y)
    img.in_(g).compute_at(g, r.x)
    h.compute_root()
    xx, yy = _grid(120, 120)
    exp = np.where((xx <= 99) & (yy <= 99) & (xx + yy + 5 < 50), 15, 10)
    assert (np.asarray(g.realize([120, 120])) == exp).all()
    del keep


def test_two_fold_and_multi_fold_transposing_wrappers():
    """Halide's correctness/image_wrapper.cpp: two_fold_wrapper and multi_folds_wrapper."""
    n = 64
    x, y, xi, yi = hl.Var("x"), hl.Var("y"), hl.Var("xi"), hl.Var("yi")
    _0, _1 = hl._0, hl._1
    xx, yy = _grid(n, n)
    img, keep = _image(lambda a, b: 2 * a + 3 * b, [n, n])
    out = hl.Func("output")
    out[x, y] = img[y, x]
    out.tile(x, y, xi, yi, 8, 8)
    w1 = img.in_(out).compute_at(out, x).vectorize(_0).unroll(_1)
    w1.in_(out).compute_at(out, x).unroll(_0).unroll(_1)
    assert (np.asarray(out.realize([n, n])) == 3 * xx + 2 * yy).all()

    g, h = hl.Func("g"), hl.Func("h")
    g[x, y] = img[y, x]
    g.compute_root().tile(x, y, xi, yi, 8, 8)
    i_g = img.in_(g).compute_root().tile(_0, _1, xi, yi, 8, 8).vectorize(xi).unroll(yi)
    i_g_g = i_g.in_(g).compute_root().tile(_0, _1, xi, yi, 8, 8).unroll(xi).unroll(yi)
    h[x, y] = i_g_g[y, x]
    i_g_g_h = i_g_g.in_(h).compute_at(h, x).vectorize(_0).unroll(_1)
    i_g_g_h.in_(h).compute_at(h, x).unroll(_0).unroll(_1)
    h.compute_root().tile(x, y, xi, yi, 8, 8)
    for im in hl.Pipeline([g, h]).realize([n, n]):
        assert (np.asarray(im) == 3 * xx + 2 * yy).all()
    del keep


# --- reduction_non_rectangular ---

_N = 200


def _stores(text, name):
    """Coordinates of the traced stores to name."""
    pattern = re.compile(r"^Store " + re.escape(name) + r"\.0\(([^)]*)\) = ", re.M)
    return [tuple(int(v) for v in m.group(1).split(",")) for m in pattern.finditer(text)]


def test_rdom_where_equality_inequality_and_split_fuse():
    """Halide's correctness/reduction_non_rectangular.cpp: equality_inequality, split_fuse."""
    x, y = hl.Var("x"), hl.Var("y")
    xx, yy = _grid(_N, _N)
    f = hl.Func("f_0")
    f[x, y] = x + y
    r = hl.RDom([(0, 100), (0, 100)])
    r.where(r.x < r.y)
    r.where(~(r.x != 10))
    f[r.x, r.y] += 1
    exp = xx + yy + ((xx == 10) & (yy <= 99) & (xx < yy))
    assert (np.asarray(f.realize([_N, _N])) == exp).all()

    f = hl.Func("f_1")
    f[x, y] = x + y
    r = hl.RDom([(0, 100), (0, 100)])
    r.where(r.x < r.y)
    f[r.x, r.y] += 1
    rxo, rxi, fused = hl.RVar(), hl.RVar(), hl.RVar()
    f.update().reorder(r.y, r.x)
    f.update().split(r.x, rxo, rxi, 4)
    f.update().fuse(rxi, r.y, fused)
    exp = xx + yy + ((xx <= 99) & (yy <= 99) & (xx < yy))
    assert (np.asarray(f.realize([_N, _N])) == exp).all()


def test_rdom_predicate_with_a_free_variable():
    """Halide's correctness/reduction_non_rectangular.cpp: free_variable_bound (z extent 16)."""
    x, y, z = hl.Var("x"), hl.Var("y"), hl.Var("z")
    f = hl.Func("f_2")
    f[x, y, z] = x + y + z
    r = hl.RDom([(0, 100), (0, 100)], "r")
    r.where(r.x < r.y + z)
    f[r.x, r.y, z] += 1
    zz, yy, xx = np.mgrid[0:16, 0:_N, 0:_N]
    exp = xx + yy + zz + ((xx <= 99) & (yy <= 99) & (xx < yy + zz))
    assert (np.asarray(f.realize([_N, _N, 16])) == exp).all()


def test_rdom_predicate_calling_funcs(capfd):
    """Halide's correctness/reduction_non_rectangular.cpp: func_call_inside_bound (+ inline)."""
    x, y = hl.Var("x"), hl.Var("y")
    xx, yy = _grid(_N, _N)
    inside = (xx <= 99) & (yy <= 99)
    f, g = hl.Func("f_3"), hl.Func("g_3")
    g[x] = x
    f[x, y] = x + y
    r = hl.RDom([(0, 100), (0, 100)], "r")
    r.where(r.x < g[r.y + 10])
    f[r.x, r.y] += 1
    g.compute_root()
    g.trace_stores()
    out, text = _captured(capfd, lambda: f.realize([_N, _N]))
    assert (np.asarray(out) == xx + yy + (inside & (xx < yy + 10))).all()
    st = _stores(text, "g_3")
    assert len(st) == 100 and all(10 <= c[0] <= 109 for c in st)

    f, g, h = hl.Func("f_4"), hl.Func("g_4"), hl.Func("h_4")
    g[x] = x
    h[x] = 2 * x
    f[x, y] = x + y
    r = hl.RDom([(0, 100), (0, 100)], "r")
    r.where(r.x < g[r.y] + h[r.x])
    f[r.x, r.y] += 1
    assert (np.asarray(f.realize([_N, _N])) == xx + yy + (inside & (xx < yy + 2 * xx))).all()


def _two_linear_bounds(suffix):
    x, y = hl.Var("x"), hl.Var("y")
    f, g = hl.Func("f_" + suffix), hl.Func("g_" + suffix)
    g[x, y] = x + y
    f[x, y] = x + y
    r = hl.RDom([(0, 100), (0, 100)])
    r.where(2 * r.x + 30 < r.y)
    r.where(r.y >= 100 - r.x)
    f[r.x, r.y] += 2 * g[r.x, r.y]
    g.compute_root()
    g.trace_stores()
    return f


def test_rdom_with_two_linear_predicates_values(capfd):
    """Halide's correctness/reduction_non_rectangular.cpp: two_linear_bounds, the values."""
    out, _ = _captured(capfd, lambda: _two_linear_bounds("5v").realize([_N, _N]))
    xx, yy = _grid(_N, _N)
    cond = (xx <= 99) & (yy <= 99) & (2 * xx + 30 < yy) & (yy >= 100 - xx)
    assert (np.asarray(out) == np.where(cond, 3 * (xx + yy), xx + yy)).all()


def test_rdom_with_two_linear_predicates_bounds_the_producer(capfd):
    """Halide's correctness/reduction_non_rectangular.cpp: two_linear_bounds, g's 34 x 34 box."""
    _, text = _captured(capfd, lambda: _two_linear_bounds("5").realize([_N, _N]))
    st = _stores(text, "g_5")
    assert len(st) == 34 * 34
    assert {a for a, _ in st} == set(range(1, 35)) and {b for _, b in st} == set(range(66, 100))


def test_rdom_circle_and_param_predicates(capfd):
    """Halide's correctness/reduction_non_rectangular.cpp: circle_bound, computed_if_param."""
    x, y = hl.Var("x"), hl.Var("y")
    xx, yy = _grid(_N, _N)
    inside = (xx <= 99) & (yy <= 99)
    f, g = hl.Func("f_6"), hl.Func("g_6")
    g[x, y] = x
    f[x, y] = x + y
    r = hl.RDom([(0, 100), (0, 100)])
    r.where(r.x * r.x + r.y * r.y <= 100)
    f[r.x, r.y] += g[r.x, r.y]
    g.compute_at(f, r.y)
    g.trace_stores()
    out, text = _captured(capfd, lambda: f.realize([_N, _N]))
    assert (np.asarray(out) == xx + yy + np.where(inside & (xx * xx + yy * yy <= 100), xx, 0)).all()
    st = _stores(text, "g_6")
    assert len(st) == 100 * 100 and all(0 <= a <= 99 and 0 <= b <= 99 for a, b in st)

    f, g, p = hl.Func("f_7"), hl.Func("g_7"), hl.Param(hl.Int(32))
    g[x, y] = x + y
    f[x, y] = x + y
    r = hl.RDom([(0, 100), (0, 100)])
    r.where(p > 3)
    f[r.x, r.y] += 2 * g[r.x, r.y]
    g.compute_root()
    g.trace_stores()
    p.set(5)
    out, text = _captured(capfd, lambda: f.realize([_N, _N]))
    assert (np.asarray(out) == np.where(inside, 3 * (xx + yy), xx + yy)).all()
    st = _stores(text, "g_7")
    assert len(st) == 100 * 100 and all(0 <= a <= 99 and 0 <= b <= 99 for a, b in st)
    p.set(0)
    out, text = _captured(capfd, lambda: f.realize([_N, _N]))
    assert (np.asarray(out) == xx + yy).all() and _stores(text, "g_7") == []


@pytest.mark.parametrize("tiled", [True, False])
def test_rdom_producer_bounds_depend_on_output(capfd, tiled):
    """Halide's correctness/reduction_non_rectangular.cpp: intermediate_bound_depend_on_output."""
    x, y = hl.Var("x"), hl.Var("y")
    name = "g_8" if tiled else "g_9"
    f, g = hl.Func("f" + name[1:]), hl.Func(name)
    g[x, y] = x
    f[x, y] = x + y
    r = hl.RDom([(0, 200), (0, 200)], "r")
    r.where(r.x < r.y)
    if tiled:
        f[r.x, r.y] += g[r.x, r.y]
        rxi, ryi = hl.RVar("rxi"), hl.RVar("ryi")
        f.update(0).tile(r.x, r.y, rxi, ryi, 8, 8)
        f.update(0).reorder(rxi, ryi, r.x, r.y)
        g.compute_at(f, ryi)
    else:
        f[r.x, r.y] = g[r.x, r.y]
        g.compute_at(f, r.y)
    g.trace_stores()
    out, text = _captured(capfd, lambda: f.realize([_N, _N]))
    xx, yy = _grid(_N, _N)
    exp = xx + yy + np.where(xx < yy, xx, 0) if tiled else np.where(xx < yy, xx, xx + yy)
    assert (np.asarray(out) == exp).all()
    st = _stores(text, name)
    assert len(st) == 200 * 199 // 2 and all(0 <= a < b <= 199 for a, b in st)


def test_rdom_predicates_referencing_funcs_own_values():
    """Halide's correctness/reduction_non_rectangular.cpp: self_reference_bound."""
    x, y = hl.Var("x"), hl.Var("y")
    f, g = hl.Func("f_10"), hl.Func("g_10")
    f[x, y] = x + y
    g[x, y] = 10
    r1 = hl.RDom([(0, 100), (0, 100)], "r1")
    r1.where(f[r1.x, r1.y] >= 40)
    r1.where(f[r1.x, r1.y] != 50)
    f[r1.x, r1.y] += 1
    f.compute_root()
    r2 = hl.RDom([(0, 50), (0, 50)], "r2")
    r2.where(f[r2.x, r2.y] < 30)
    g[r2.x, r2.y] += f[r2.x, r2.y]
    xx, yy = _grid(_N, _N)
    s = xx + yy
    e1 = s + ((xx <= 99) & (yy <= 99) & (s >= 40) & (s != 50))
    assert (np.asarray(f.realize([_N, _N])) == e1).all()
    exp = 10 + np.where((xx <= 49) & (yy <= 49) & (e1 < 30), e1, 0)
    assert (np.asarray(g.realize([_N, _N])) == exp).all()


def test_rdom_predicate_on_a_random_tuple_element():
    """Halide's correctness/reduction_non_rectangular.cpp: random_float_bound."""
    x, y = hl.Var("x"), hl.Var("y")
    f = hl.Func("f_11")
    f[x, y] = (hl.random_float() < 0.5, x + y)
    r = hl.RDom([(0, 100), (0, 100)])
    r.where(f[r.x, r.y][0])
    f[r.x, r.y] = (f[r.x, r.y][0], f[r.x, r.y][1] + 10)
    b0, b1 = (np.asarray(b) for b in f.realize([_N, _N]))
    xx, yy = _grid(_N, _N)
    taken = b0.astype(bool)
    assert (b1 == xx + yy + np.where((xx <= 99) & (yy <= 99) & taken, 10, 0)).all()
    assert 19000 <= int(taken.sum()) <= 21000


def test_newton_iterations_stop_when_converged():
    """Halide's correctness/reduction_non_rectangular.cpp: newton_method."""
    x = hl.Var("x")
    inv = hl.Func("inverse")
    bits = ~hl.reinterpret(hl.UInt(32), hl.cast(hl.Float(32), x + 1))
    inv[x] = (hl.f32(-0.25) * hl.reinterpret(hl.Float(32), bits), 0)
    r = hl.RDom([(0, 10)])
    r.where(hl.abs(inv[x][0] * (x + 1) - 1) > hl.f32(0.001))
    inv[x] = (inv[x][0] * (2 - (x + 1) * inv[x][0]), r + 1)
    v0, v1 = (np.asarray(b) for b in inv.realize([128]))
    assert (np.abs(np.arange(1, 129, dtype=np.float32) * v0 - 1) <= 0.001).all()
    assert (v1 < 10).all()


def test_vectorized_predicated_rvar():
    """Halide's correctness/reduction_non_rectangular.cpp: vectorize_predicated_rvar."""
    x, y = hl.Var("x"), hl.Var("y")
    f = hl.Func("f")
    f[x, y] = 0
    w = (f.output_buffer().width() / 2) * 2
    h = (f.output_buffer().height() / 2) * 2
    r = hl.RDom([(1, w - 2), (1, h - 2)])
    r.where((r.x + r.y) % 2 == 0)
    f[r.x, r.y] += 10
    f.update(0).unroll(r.x, 2).allow_race_conditions().vectorize(r.x, 8)
    xx, yy = _grid(_N, _N)
    inner = (xx >= 1) & (xx < _N - 1) & (yy >= 1) & (yy < _N - 1) & ((xx + yy) % 2 == 0)
    assert (np.asarray(f.realize([_N, _N])) == np.where(inner, 10, 0)).all()
