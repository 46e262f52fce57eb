"""BFloat(16): the type, its promotion rules and constants, conversions from and to every type,
arithmetic, compares, math functions, Params, ImageParams and numpy buffers (ml_dtypes'
bfloat16), updates, the C and CUDA backends. Halide's semantics: a bfloat16 operation is the
float32 operation on the converted values, its result rounded to bfloat16 (to nearest, ties to
even, by Halide's integer formula); a conversion to bfloat16 goes through float32. Checked bit for
bit against the real Halide 21 (whose buffers of bfloat16 have no numpy form: the bits go in and
out as uint16), against ml_dtypes' bfloat16 arithmetic, and against the reference evaluator."""

from __future__ import annotations

import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest
from test_float16 import schedule_1d

import pyhalide as hl
from pyhalide import ir, reference
from pyhalide.expr import to_ir
from pyhalide.simplify import simplify

BF16 = ml_dtypes.bfloat16
LIBS = ["pyhalide", "halide"]


def _lib(name: str):
    if name == "pyhalide":
        return hl
    return pytest.importorskip("halide", reason="the real Halide (pip install halide) is the oracle")


def _round_through_float32(values) -> np.ndarray:
    """bfloat16 bits of float32(values), by Halide's formula, computed here in numpy."""
    bits = np.asarray(values, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def _float32_of(bits) -> np.ndarray:
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def _bfloats(n_random: int = 400) -> np.ndarray:
    """bfloat16 bits of every kind: zeros, subnormals, normals of all exponents, the largest,
    infinities, NaN; then random ones."""
    special = [0.0, -0.0, 2.0**-133, -(2.0**-133), 2.0**-126, 1.0, -1.0, 0.5, 1.5, 2.0, 3.0, 0.1, 1 / 3, 255.0,
               256.0, 257.0, 3.3895313892515355e38, -3.3895313892515355e38, np.inf, -np.inf, np.nan]
    rng = np.random.default_rng(16)
    bits = rng.integers(0, 0x7F80, n_random, dtype=np.uint16) | (rng.integers(0, 2, n_random, dtype=np.uint16) << 15)
    return np.concatenate([_round_through_float32(special), bits])


def assert_same_bits(got, want, what=""):
    """Equal as bfloat16 bits (given as bits or as bfloat16 arrays), any NaN matching any NaN."""
    got, want = (np.asarray(v).view(np.uint16) if np.asarray(v).dtype == BF16 else np.asarray(v, np.uint16)
                 for v in (got, want))
    nan = np.isnan(_float32_of(got)) & np.isnan(_float32_of(want))
    bad = np.flatnonzero((got != want) & ~nan)
    assert bad.size == 0, f"{what}: {bad.size} differ, first at {bad[0]}: {got[bad[0]]:#06x} != {want[bad[0]]:#06x}"


# ------------------------------------------------------------------------------ the type
@pytest.mark.parametrize("lib", LIBS)
def test_the_bfloat16_type(lib):
    """BFloat(16) as Halide has it: a float type (is_float and is_bfloat) of 16 bits, +-inf as its
    limits, representing only itself among the types of 16 bits or fewer."""
    h = _lib(lib)
    t = h.BFloat(16)
    assert t.is_float() and t.is_bfloat() and t.bits() == 16 and t.bytes() == 2 and str(t) == "bfloat16"
    assert repr(t) == "<halide.Type bfloat16>" and str(t.with_lanes(4)) == "bfloat16x4"
    assert not h.Float(16).is_bfloat() and not h.Float(32).is_bfloat()
    assert repr(t.max()) == "<halide.Expr of type bfloat16: infh>"
    assert repr(t.min()) == "<halide.Expr of type bfloat16: -infh>"
    assert h.Float(32).can_represent(t) and h.Float(64).can_represent(t)
    assert not t.can_represent(h.Float(16)) and not h.Float(16).can_represent(t)
    assert not t.can_represent(h.UInt(8)) and not t.can_represent(h.Float(32)) and t.can_represent(t)
    assert t != h.Float(16)


def test_the_bfloat16_type_in_pyhalide():
    """What pyhalide adds: hl.TypeCode.BFloat (Halide's bindings lack it), ml_dtypes' numpy type."""
    t = hl.BFloat(16)
    assert hl.Type(hl.TypeCode.BFloat, 16, 4) == hl.BFloat(16, 4) and t.code() == hl.TypeCode.BFloat
    assert t.to_numpy() == BF16 and hl.Buffer(np.zeros(4, BF16)).type() == t
    assert t.max_value() == float(ml_dtypes.finfo(BF16).max) == -t.min_value()
    with pytest.raises(hl.HalideError, match="bits must be 16"):
        hl.BFloat(32)


@pytest.mark.parametrize("lib", LIBS)
def test_promotion_rules_as_halide(lib):
    """The types of mixed expressions, the same in pyhalide and Halide: bfloat16 with float32 or
    float64 is the wider; with float16 (same width), the second operand's type; with an integer
    it stays bfloat16; a Python float is a float32 constant; math functions compute in float32
    (but abs and round keep bfloat16)."""
    h = _lib(lib)
    x = h.Var("x")
    a = h.cast(h.BFloat(16), x)
    half = h.cast(h.Float(16), x)
    cases = {
        "a + f32": (a + h.cast(h.Float(32), x), "float32"),
        "a * f64": (a * h.cast(h.Float(64), x), "float64"),
        "a + f16": (a + half, "float16"),
        "f16 + a": (half + a, "bfloat16"),
        "a + int": (a + 1, "bfloat16"),
        "u8 * a": (h.cast(h.UInt(8), x) * a, "bfloat16"),
        "a + 1.5": (a + 1.5, "float32"),
        "a / 2": (a / 2, "bfloat16"),
        "a % 3": (a % 3, "bfloat16"),
        "-a": (-a, "bfloat16"),
        "sqrt": (h.sqrt(a), "float32"),
        "floor": (h.floor(a), "float32"),
        "sin": (h.sin(a), "float32"),
        "pow": (h.pow(a, a), "float32"),
        "a ** 2": (h.pow(a, 2), "bfloat16"),
        "atan2": (h.atan2(a, a), "float32"),
        "abs": (h.abs(a), "bfloat16"),
        "round": (h.round(a), "bfloat16"),
        "min": (h.min(a, x), "bfloat16"),
        "clamp": (h.clamp(a, 0, 1), "bfloat16"),
        "select": (h.select(a > 1, a, 2), "bfloat16"),
        "a < 1": (a < 1, "bool"),
        "is_nan": (h.is_nan(a), "bool"),
        "reinterpret": (h.reinterpret(h.UInt(16), a), "uint16"),
    }
    for what, (e, want) in cases.items():
        assert str(e.type()) == want, what


@pytest.mark.parametrize("lib", LIBS)
def test_functions_halide_refuses_for_bfloat16(lib):
    h = _lib(lib)
    a = h.cast(h.BFloat(16), h.Var("x"))
    for fn in (h.fast_inverse, h.fast_inverse_sqrt, h.erf):
        with pytest.raises(Exception, match="only takes"):
            fn(a)


def test_constants_round_as_halide_does():
    """A bfloat16 constant holds its value rounded to float32 and then to bfloat16, ties to even
    (Halide's bfloat16_t of a double); folding two rounds the float32 result, as the compiled code."""
    bf = hl.BFloat(16)
    assert ir.make_const(bf, 0.1).value == float(BF16(np.float32(0.1)))
    tie = 1 + 2.0**-8  # halfway between 1 and the next bfloat16: ties to even, 1
    assert ir.FloatImm(bf, tie).value == 1.0
    assert ir.FloatImm(bf, 1 + 3 * 2.0**-8).value == 1 + 2.0**-6  # (a tie up to even)
    # rounded twice: tie + 2**-40 is a float32 tie, so it rounds to 1, not up
    assert ir.FloatImm(bf, tie + 2.0**-40).value == 1.0
    assert ir.FloatImm(bf, 3.4e38).value == np.inf
    folded = simplify(to_ir(hl.cast(bf, hl.f32(0.1)) * hl.cast(bf, 3)))
    assert isinstance(folded, ir.FloatImm) and folded.value == float(_float32_of(_round_through_float32(
        np.float32(float(BF16(np.float32(0.1)))) * np.float32(3)))[()])
    x = hl.Var("x")
    f = hl.Func("f")
    f[x] = hl.cast(bf, hl.f32(0.1)) * hl.cast(bf, 3) + hl.cast(bf, x)
    want = (np.float32(folded.value) + np.arange(4, dtype=np.float32))
    assert_same_bits(np.asarray(f.realize([4])), _round_through_float32(want))


# ------------------------------------------------------------------------------ conversions
def _run(h, src: np.ndarray, build, how="vectorize16"):
    x = h.Var("x")
    inp = h.Buffer(src)
    f = h.Func("f")
    f[x] = build(h, inp[x])
    schedule_1d(f, x, how, h, 64)
    return np.array(np.asarray(f.realize([src.size])))


def _to_bits(h, e):
    return h.reinterpret(h.UInt(16), e)


def _from_bits(h, e):
    return h.reinterpret(h.BFloat(16), e)


def _float32_edges() -> np.ndarray:
    """float32 values around every rounding case: ties of both parities, just above and below,
    the largest finite bfloat16 and what overflows, subnormals, infinities, NaNs."""
    rng = np.random.default_rng(32)
    bits = rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32)
    kept = rng.integers(0, 1 << 16, 2000, dtype=np.uint32) << 16
    ties = np.concatenate([kept | 0x8000, kept | 0x7FFF, kept | 0x8001, kept, kept | 0xFFFF])
    special = np.array([0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001,
                        0x80008000, 0x00018000], np.uint32)
    return np.concatenate([bits, ties, special]).view(np.float32)


@pytest.mark.parametrize("how", ["serial", "vectorize16", "parallel"])
def test_every_bfloat16_converts_to_float32_exactly(how):
    bits = np.arange(1 << 16, dtype=np.uint16)
    got = _run(hl, bits, lambda h, v: h.cast(h.Float(32), _from_bits(h, v)), how)
    np.testing.assert_array_equal(got.view(np.uint32), _float32_of(bits).view(np.uint32))


@pytest.mark.parametrize("how", ["serial", "vectorize16", "parallel"])
def test_float32_rounds_to_nearest_even(how):
    """Halide's formula, also against ml_dtypes' rounding (NaNs: any NaN)."""
    values = _float32_edges()
    got = _run(hl, values, lambda h, v: _to_bits(h, h.cast(h.BFloat(16), v)), how)
    np.testing.assert_array_equal(got, _round_through_float32(values))
    # (Halide's formula carries a NaN whose payload is under 0x8000 into an infinity; ml_dtypes
    # keeps it a NaN)
    number = ~np.isnan(values)
    with np.errstate(invalid="ignore"):
        assert_same_bits(got[number], values[number].astype(BF16), "against ml_dtypes")


_SOURCES = {
    "float64": np.array([1 + 2.0**-8 + 2.0**-40, 1 + 2.0**-8, 0.1, -1e300, 1e-300, 3.3961e38, np.nan, -np.inf, 7.0,
                         -2.5 - 2.0**-9], np.float64),
    "int32": np.array([0, 1, -1, 257, 259, 16777217, -16777219, 2**31 - 1, -(2**31), 33554435], np.int32),
    "uint8": np.arange(256, dtype=np.uint8),
    "int64": np.array([2**62 + 2**40, -(2**63), 12345678901, 3, -7], np.int64),
    "uint16": np.array([0, 1, 257, 65535, 32769, 4095], np.uint16),
    "float16": np.array([0.1, -65504, np.inf, 6.1e-5, 1.5, np.nan], np.float16),
}


@pytest.mark.parametrize("source", sorted(_SOURCES))
@pytest.mark.parametrize("lib", LIBS)
def test_casts_to_bfloat16_go_through_float32(source, lib):
    """Every type to bfloat16: float32 of the value, then rounded (twice for float64 and wide
    integers, as Halide rounds)."""
    h = _lib(lib)
    values = np.resize(_SOURCES[source], 256)  # (at least a vector)
    got = _run(h, values, lambda h, v: _to_bits(h, h.cast(h.BFloat(16), v)))
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got, _round_through_float32(values.astype(np.float32)))


_TARGETS = ["float32", "float64", "int32", "uint8", "int16", "float16", "bool"]


@pytest.mark.parametrize("target", _TARGETS)
@pytest.mark.parametrize("lib", LIBS)
def test_casts_from_bfloat16_as_from_float32(target, lib):
    """bfloat16 to every type is float32's conversion of its (exact) float32 value (to bool: the
    lowest bit of the value truncated, as Halide); the values in range of the target type (a float
    out of an integer type's range converts to anything)."""
    h = _lib(lib)
    f32 = np.array([0.0, -0.0, 1.0, -1.5, 2.75, 100.0, -128.0, 127.0, 255.0, 3.0e38, 1e-39, np.inf, np.nan, 0.5, -0.5,
                    6.5e4, 7.0e4], np.float32)
    bits = _round_through_float32(np.resize(f32, 64))  # (at least a vector)
    dtype = np.dtype(np.bool_ if target == "bool" else target)
    exact = _float32_of(bits)
    if dtype.kind in "iub":
        info = np.iinfo(np.int8 if target == "bool" else dtype)
        keep = np.isfinite(exact) & (exact >= info.min) & (exact <= info.max)
        bits, exact = bits[keep], exact[keep]
    if target == "float16" and lib == "halide":  # (Halide 21 converts a float32 NaN to a float16 infinity)
        bits, exact = bits[~np.isnan(exact)], exact[~np.isnan(exact)]
    code = {"f": "Float", "i": "Int", "u": "UInt", "b": "UInt"}[dtype.kind]
    t = h.Bool() if target == "bool" else getattr(h, code)(dtype.itemsize * 8)
    got = _run(h, bits, lambda h, v: h.cast(t, _from_bits(h, v)))
    with np.errstate(all="ignore"):
        want = (np.trunc(exact).astype(np.int64) & 1) != 0 if target == "bool" else exact.astype(dtype)
    np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------------------ arithmetic
def _arithmetic(h, a, b):
    """bfloat16 operations as uint16 bits, and compares as uint8."""
    bits = [a + b, a - b, a * b, a / b, a % b, -a, h.min(a, b), h.max(a, b), h.abs(a), h.absd(a, b), a * b + a,
            (a - b) / (a + b), h.round(a), h.select(a < b, a, b + 1), a * 3 - 2]
    compares = [a < b, a <= b, a == b, a != b, a > b, a >= b, h.is_nan(a), h.is_inf(a), h.is_finite(a)]
    floats = [h.sqrt(a), h.floor(a), h.trunc(a), a + h.cast(h.Float(32), b)]
    return ([_to_bits(h, e) for e in bits] + [h.cast(h.UInt(8), e) for e in compares] + floats)


def _arithmetic_numpy(av, bv):
    """The same in numpy: each operation in float32 on the exact values, rounded to bfloat16."""
    a, b = _float32_of(av), _float32_of(bv)

    def r(v):
        return _round_through_float32(v)

    def f(bits):
        return _float32_of(bits)

    with np.errstate(all="ignore"):
        mod = a - b * np.floor(a / b)
        bits = [r(a + b), r(a - b), r(a * b), r(a / b), r(mod), r(np.float32(0) - a), r(np.where(a < b, a, b)),
                r(np.where(a > b, a, b)), r(np.where(a >= 0, a, 0 - a)), r(np.where(a < b, b - a, a - b)),
                r(f(r(a * b)) + a), r(f(r(a - b)) / f(r(a + b))), r(np.rint(a)), np.where(a < b, av, r(b + 1)),
                r(f(r(a * 3)) - 2)]
        compares = [a < b, ~(b < a), a == b, a != b, a > b, ~(a < b), np.isnan(a), np.isinf(a), np.isfinite(a)]
        floats = [np.sqrt(a), np.floor(a), np.trunc(a), a + b]
    return bits + [c.astype(np.uint8) for c in compares] + floats


def _realize_arithmetic(h, av, bv, how):
    x = h.Var("x")
    a, b = h.Buffer(av), h.Buffer(bv)
    f = h.Func("f")
    f[x] = tuple(_arithmetic(h, _from_bits(h, a[x]), _from_bits(h, b[x])))
    schedule_1d(f, x, how, h, 32)
    target = h.get_jit_target_from_environment()
    if h is not hl:  # (Halide's JIT otherwise fuses a % b's a - b * floor(a / b) into one rounding)
        target = target.with_feature(h.TargetFeature.StrictFloat)
    return [np.array(np.asarray(v)) for v in f.realize([av.size], target)]


_N_BITS = 15  # outputs of _arithmetic that are bfloat16 bits


def _compare_outputs(got, want, what):
    for k, (g, w) in enumerate(zip(got, want)):
        if k < _N_BITS:
            assert_same_bits(g, w, f"{what}, output {k}")
        elif g.dtype == np.float32:
            same = (g == w) | (np.isnan(g) & np.isnan(w))
            assert same.all(), f"{what}, output {k}: {g[~same][:4]} != {w[~same][:4]}"
        else:
            np.testing.assert_array_equal(g, w, f"{what}, output {k}")


@pytest.mark.parametrize("how", ["serial", "vectorize8", "vectorize16", "parallel"])
def test_arithmetic_rounds_each_operation(how):
    """+ - * / %, negation, min, max, abs, absd, round, select, compares and float tests of
    bfloat16 values of every kind: each operation in float32, rounded to bfloat16."""
    av = _bfloats()
    bv = np.roll(av, 7)
    got = _realize_arithmetic(hl, av, bv, how)
    _compare_outputs(got, _arithmetic_numpy(av, bv), how)


_ROUND = 12  # the output of _arithmetic that is round(a)


@pytest.mark.parametrize("how", ["serial", "vectorize16"])
def test_arithmetic_as_halide(how):
    """The same, bit for bit as the real Halide computes it, but for round:
    Halide 21 rounds a bfloat16 through an int16 (garbage from 32768 up) and gives +0.0 where
    the nearest integer is -0.0; pyhalide rounds as float32's roundeven (tested above)."""
    halide = _lib("halide")
    av = _bfloats()
    bv = np.roll(av, 7)
    got, want = _realize_arithmetic(hl, av, bv, how), _realize_arithmetic(halide, av, bv, how)
    small = np.abs(_float32_of(av)) < 32768
    got[_ROUND], want[_ROUND] = (_round_through_float32(_float32_of(v[small]) + np.float32(0))
                                 for v in (got[_ROUND], want[_ROUND]))  # (-0.0 + 0 is +0.0)
    _compare_outputs(got, want, how)


def test_reference_evaluator_computes_as_halide():
    """The reference evaluator (on ml_dtypes' bfloat16 arrays) agrees with the compiled code."""
    av = _bfloats(100)
    bv = np.roll(av, 5)
    x = hl.Var("x")
    a, b = hl.Buffer(av), hl.Buffer(bv)
    f = hl.Func("f")
    f[x] = tuple(_arithmetic(hl, _from_bits(hl, a[x]), _from_bits(hl, b[x])))
    want = reference.realize(f, [av.size])
    _compare_outputs([np.asarray(v) for v in f.realize([av.size])], [np.asarray(w) for w in want], "reference")


# ------------------------------------------------------------------------------ buffers and params
@pytest.mark.parametrize("how", ["serial", "vectorize8", "parallel"])
def test_numpy_bfloat16_buffers_params_and_image_params(how):
    """ml_dtypes' bfloat16 arrays in and out, shared without copies; a bfloat16 Param; a bfloat16
    intermediate Func stored at root."""
    rng = np.random.default_rng(3)
    values = rng.normal(0, 100, 200).astype(BF16)
    im = hl.ImageParam(hl.BFloat(16), 1, "im")
    p = hl.Param(hl.BFloat(16), "p", 0.5)
    x = hl.Var("x")
    mid = hl.Func("mid")
    mid[x] = im[x] * p + hl.cast(hl.BFloat(16), x)
    out = hl.Func("out")
    out[x] = hl.max(mid[x], mid[x + 1]) - im[x] / 7
    mid.compute_root()
    schedule_1d(out, x, how)
    schedule_1d(mid, x, how)
    im.set(values)
    p.set(0.3)
    result = hl.Buffer(hl.BFloat(16), [values.size - 1])
    out.realize(result)
    a = _float32_of(values.view(np.uint16))
    pb = _float32_of(_round_through_float32(0.3))
    m = _float32_of(_round_through_float32(_float32_of(_round_through_float32(a * pb)) + np.arange(a.size)))
    want = _round_through_float32(np.maximum(m[:-1], m[1:]) - _float32_of(_round_through_float32(a[:-1] / 7)))
    assert np.asarray(result).dtype == BF16
    assert_same_bits(np.asarray(result), want)
    # the same with Halide, the bits in and out as uint16
    halide = pytest.importorskip("halide")
    him = halide.ImageParam(halide.BFloat(16), 1, "im")
    hp = halide.Param(halide.Float(32), "p", 0.5)  # (Halide's bindings cannot set a bfloat16 Param)
    hx = halide.Var("x")
    hmid = halide.Func("mid")
    hmid[hx] = him[hx] * halide.cast(halide.BFloat(16), hp) + halide.cast(halide.BFloat(16), hx)
    hout = halide.Func("out")
    hout[hx] = halide.reinterpret(halide.UInt(16), halide.max(hmid[hx], hmid[hx + 1]) - him[hx] / 7)
    hmid.compute_root()
    bits_in = halide.Buffer(values.view(np.uint16).copy())
    wrap = halide.Func("wrap")
    wrap[hx] = halide.reinterpret(halide.BFloat(16), bits_in[hx])
    wrap.compute_root()
    him.set(wrap.realize([values.size]))
    hp.set(0.3)
    strict = halide.get_jit_target_from_environment().with_feature(halide.TargetFeature.StrictFloat)
    assert_same_bits(np.asarray(hout.realize([values.size - 1], strict)), want, "halide")


def test_a_sum_in_bfloat16_rounds_every_step():
    """An update f[x] += in[r]: each addition rounded to bfloat16 (a long sum stalls where the
    step is under half a unit), as Halide computes it."""
    values = np.full(600, 1.0, BF16)
    x = hl.Var("x")
    r = hl.RDom([(0, values.size)])
    inp = hl.Buffer(values)
    f = hl.Func("f")
    f[x] = hl.cast(hl.BFloat(16), 0)
    f[x] = f[x] + inp[r] * hl.cast(hl.BFloat(16), x + 1)
    got = np.asarray(f.realize([3]))
    acc = np.zeros(3, np.float32)
    for _ in range(values.size):
        acc = _float32_of(_round_through_float32(acc + np.arange(1, 4, dtype=np.float32)))
    assert_same_bits(got, _round_through_float32(acc))
    assert float(got[0]) == 256.0  # (256 + 1 is a tie, to even: 256, for ever)
    assert_same_bits(reference.realize(f, [3])[0], got, "reference")


def test_serialized_pipeline_keeps_bfloat16(tmp_path):
    x = hl.Var("x")
    f = hl.Func("f")
    f[x] = hl.cast(hl.BFloat(16), x) * hl.cast(hl.BFloat(16), hl.f32(0.1))
    path = str(tmp_path / "bf.hlpipe")
    hl.serialize_pipeline(hl.Pipeline(f), path)
    loaded = hl.deserialize_pipeline(path, {})
    assert_same_bits(np.asarray(loaded.realize([50])), np.asarray(f.realize([50])))


def test_a_pipeline_without_bfloat16_is_not_rewritten():
    """emulate_bfloat16 walks the statements only and returns the very same Stmt."""
    from pyhalide.lowering.emulate_bfloat16 import emulate_bfloat16

    x = hl.Var("x")
    f = hl.Func("f")
    f[x] = hl.cast(hl.Float(16), x) * 2 + hl.f32(1)
    f.vectorize(x, 8)
    seen = {}
    hl.lower.lower(f, hook=lambda name, s: seen.__setitem__(name, s) if name == "specialize residues" else None)
    assert emulate_bfloat16(seen["specialize residues"]) is seen["specialize residues"]


# ------------------------------------------------------------------------------ other backends
def test_c_source_computes_bfloat16_with_integer_conversions(tmp_path):
    """compile_to_c: bfloat16 buffers are uint16_t, computed in float with the same rounding;
    the source compiles with g++."""
    if shutil.which("g++") is None:
        pytest.skip("needs g++")
    im = hl.ImageParam(hl.BFloat(16), 1, "im")
    x = hl.Var("x")
    f = hl.Func("f")
    f[x] = im[x] * im[x] + hl.cast(hl.BFloat(16), 1)
    path = tmp_path / "bf.cpp"
    f.compile_to_c(str(path), [im], "bf")
    source = path.read_text()
    assert "const uint16_t *__restrict__ const v_im = (const uint16_t *)" in source and "hl_half" not in source
    subprocess.run(["g++", "-std=c++17", "-c", "-O1", str(path), "-o", str(tmp_path / "bf.o")], check=True)


def _cuda_pipeline():
    im = hl.ImageParam(hl.BFloat(16), 2, "im")
    p = hl.Param(hl.BFloat(16), "p", 1.0)
    x, y, xi, yi = hl.Var("x"), hl.Var("y"), hl.Var("xi"), hl.Var("yi")
    f = hl.Func("f")
    f[x, y] = (im[x, y] * p + hl.cast(hl.BFloat(16), y), hl.sqrt(im[x, y]))
    f.gpu_tile(x, y, xi, yi, 8, 8)
    return f, im, p


def test_bfloat16_in_cuda_kernels(device):
    """The same bfloat16 arithmetic in a CUDA kernel (serial and emulated devices, a GPU where
    there is one), its Param passed as bits."""
    f, im, p = _cuda_pipeline()
    values = np.abs(np.random.default_rng(5).normal(0, 10, (8, 16))).astype(BF16)
    im.set(hl.Buffer(values))
    p.set(1 + 2.0**-7)
    got = f.realize([16, 8], hl.Target("host-cuda"))
    for b in got:
        b.copy_to_host()
    a = _float32_of(values.view(np.uint16))
    pb = _float32_of(_round_through_float32(1 + 2.0**-7))
    ys = np.arange(8, dtype=np.float32)[:, None]
    assert_same_bits(np.asarray(got[0]), _round_through_float32(_float32_of(_round_through_float32(a * pb)) + ys))
    np.testing.assert_array_equal(np.asarray(got[1]), np.sqrt(a))


@pytest.mark.parametrize("capability", [80, 90])
def test_bfloat16_kernels_compile_for_the_gpu(capability):
    from pyhalide.codegen import gpu_runtime

    if gpu_runtime.nvcc_path() is None and gpu_runtime._nvrtc() is None:
        pytest.skip("neither nvcc nor NVRTC is installed")
    source = hl.Pipeline([_cuda_pipeline()[0]]).cuda_source(hl.Target("host-cuda"))
    assert "const uint16_t *__restrict__" in source
    report = gpu_runtime.ptxas_report(gpu_runtime.compile_ptx(source, capability), capability)
    assert report and all(r.spill_stores == 0 for r in report.values())


# ------------------------------------------------------------------------------ other features
def test_atomic_parallel_histogram_in_bfloat16():
    """A scatter of bfloat16 additions under atomic() and parallel: each a compare-and-swap of the
    16 bits, the addition in float32 rounded (0.5 steps are exact up to 256)."""
    x, r = hl.Var("x"), hl.RDom([(0, 1000)])
    keys = hl.Buffer(np.arange(1000, dtype=np.int32) * 7)
    h = hl.Func("h")
    h[x] = hl.cast(hl.BFloat(16), 0)
    h[keys[r] % 4] += hl.cast(hl.BFloat(16), 0.5)
    h.update().atomic().parallel(r)
    np.testing.assert_array_equal(np.asarray(h.realize([4])).astype(np.float32), [125.0] * 4)


def test_print_and_trace_show_bfloat16_values(capfd):
    """As float32 (Halide's runtime prints a bfloat16 trace value as nothing at all)."""
    x = hl.Var("x")
    f = hl.Func("f")
    f[x] = hl.print(hl.cast(hl.BFloat(16), x) / 3, "is f")
    f.trace_stores()
    f.realize([2])
    out = capfd.readouterr().out
    assert "0.333984 is f" in out and f"Store {f.name()}.0(1) = 0.333984" in out
    assert 'tag = "func_type_and_dim: 1 4 16 1' in out  # (halide_type_bfloat is 4)


def test_autoscheduled_bfloat16_pipeline_computes_right():
    im = hl.ImageParam(hl.BFloat(16), 2, "im")
    x, y = hl.Var("x"), hl.Var("y")
    a, b = hl.Func("a"), hl.Func("b")
    a[x, y] = im[x, y] + im[x + 1, y]
    b[x, y] = a[x, y] * a[x, y + 1] - hl.cast(hl.BFloat(16), 1)
    b.set_estimates([(0, 128), (0, 128)])
    im.set_estimates([(0, 129), (0, 129)])
    p = hl.Pipeline(b)
    p.apply_autoscheduler(hl.Target("host"), hl.AutoschedulerParams("Adams2019"))
    im.set(np.random.default_rng(1).normal(size=(129, 129)).astype(BF16))
    assert_same_bits(np.asarray(p.realize([128, 128])), reference.realize(b, [128, 128])[0])


def test_an_extern_stage_gets_bfloat16_buffers():
    """A Python extern stage sees halide_type_bfloat buffers, as numpy bfloat16 views."""
    x = hl.Var("x")
    src = hl.Func("src")
    src[x] = hl.cast(hl.BFloat(16), x) * hl.cast(hl.BFloat(16), 0.25)

    def double(inp, out):
        if inp.is_bounds_query():
            inp.dim[0].min, inp.dim[0].extent = out.dim[0].min, out.dim[0].extent
            return 0
        out.as_array()[:] = inp.as_array().astype(np.float32) * 2
        return 0

    ext = hl.Func("ext")
    ext.define_extern("double_bf16", [src], hl.BFloat(16), 1)
    src.compute_root()
    p = hl.Pipeline(ext)
    p.set_jit_externs({"double_bf16": double})
    got = np.asarray(p.realize([6]))
    assert got.dtype == BF16
    np.testing.assert_array_equal(got.astype(np.float32), np.arange(6) * 0.5)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("kind", ["bfloat16", "float16"])
def test_lerp_of_16_bit_floats_rounds_once(lib, kind):
    """lerp of bfloat16 (and float16) values is the float32 blend rounded once, as Halide computes
    it (rounding each of its four operations gave other bits)."""
    h = _lib(lib)
    t = h.BFloat(16) if kind == "bfloat16" else h.Float(16)
    x = h.Var("x")
    f, o = h.Func("f"), h.Func("o")
    f[x] = h.cast(t, x) * h.cast(t, h.f32(1.1))
    o[x] = h.reinterpret(h.UInt(16), h.lerp(f[x], f[x + 1], h.cast(t, h.f32(0.3))))
    target = h.get_jit_target_from_environment()
    if h is not hl:
        target = target.with_feature(h.TargetFeature.StrictFloat)
    got = np.asarray(o.realize([64], target))
    dtype = BF16 if kind == "bfloat16" else np.float16
    v = (np.arange(65, dtype=np.float32) * np.float32(dtype(np.float32(1.1)))).astype(dtype).astype(np.float32)
    w = np.float32(dtype(np.float32(0.3)))
    want = (v[:-1] * (np.float32(1) - w) + v[1:] * w).astype(dtype).view(np.uint16)
    np.testing.assert_array_equal(got, want)
    if h is hl:
        np.testing.assert_array_equal(reference.realize(o, [64])[0], want)


def test_reference_rounds_nans_by_halides_formula():
    """A NaN whose low 16 bits carry into the sign (0x7fffffff -> 0x8000): the reference evaluator
    rounds as Halide and the compiled code do, not as ml_dtypes (which keeps it a NaN)."""
    x = hl.Var("x")
    bits = hl.cast(hl.UInt(32), x) * hl.u32(0x8000) + hl.u32(0x7FFFFFFF)
    f = hl.Func("f")
    f[x] = hl.reinterpret(hl.UInt(16), hl.cast(hl.BFloat(16), hl.reinterpret(hl.Float(32), bits)) * hl.cast(
        hl.BFloat(16), 1))
    want = _round_through_float32((np.arange(3, dtype=np.uint32) * 0x8000 + 0x7FFFFFFF).view(np.float32))
    np.testing.assert_array_equal(np.asarray(f.realize([3])), want)
    np.testing.assert_array_equal(reference.realize(f, [3])[0], want)
    assert want[0] == 0x8000
