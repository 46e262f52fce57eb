"""Float(16) on the CPU: its type and promotion rules, constants, arithmetic, casts from and to
every type, comparisons, select, math functions, Params and ImageParams, under serial,
vectorized and parallel schedules. Halide's semantics: each float16 operation's result is the
exact result rounded to float16 (to nearest, ties to even), which is what numpy's float16 ufuncs
compute; math functions compute in float32 and round the result. Checked bit for bit against
numpy, and against the real Halide 21 where it runs the same pipeline (its JIT cannot convert
float64 to float16 on x86: it leaves the libcall __truncdfhf2 unresolved)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import pyhalide as hl
from pyhalide import ir, reference
from pyhalide.expr import to_ir
from pyhalide.simplify import simplify

LIBS = ["pyhalide", "halide"]
F16 = np.float16


def _lib(name: str):
    """pyhalide, or the real Halide (skipping where it is not installed)."""
    if name == "pyhalide":
        return hl
    return pytest.importorskip("halide", reason="the real Halide (pip install halide) is the oracle")


def _halves() -> np.ndarray:
    """Every kind of float16: zeros, subnormals, normals of all exponents, the largest, infinities, NaN."""
    special = [0.0, -0.0, 2.0**-24, -(2.0**-24), 2.0**-14 - 2.0**-24, 2.0**-14, 1.0, -1.0, 0.5, 1.5, 2.0, 3.0,
               0.1, 1 / 3, 1024.5, 2047.0, 2049.0, 65504.0, -65504.0, np.inf, -np.inf, np.nan]
    rng = np.random.default_rng(16)
    bits = rng.integers(0, 0x7C00, 200, dtype=np.uint16) | (rng.integers(0, 2, 200, dtype=np.uint16) << 15)
    return np.concatenate([np.array(special, F16), bits.view(F16)])


def assert_same_bits(got, want, what=""):
    """Equal as float16 bits, any NaN matching any NaN."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, what
    nan = np.isnan(got) & np.isnan(want)
    g, w = got.view(np.uint16)[~nan], want.view(np.uint16)[~nan]
    bad = np.flatnonzero(g != w)
    assert bad.size == 0, f"{what}: {bad.size} differ, first {got[~nan][bad[0]]!r} != {want[~nan][bad[0]]!r}"


def schedule_1d(f, x, how: str, h=hl, split: int = 16):
    """serial (as it is), vectorize8, vectorize16, or parallel (split, vectorized by 8), in library h
    (pyhalide or Halide)."""
    if how == "vectorize8":
        f.vectorize(x, 8)
    elif how == "vectorize16":
        f.vectorize(x, 16)
    elif how == "parallel":
        xo, xi = h.Var("xo"), h.Var("xi")
        f.split(x, xo, xi, split).parallel(xo).vectorize(xi, 8)


# ------------------------------------------------------------------------------ the type
def test_the_float16_type():
    """Float(16) is a float type of 16 bits, numpy's float16; its limits are +-inf as Exprs
    (as Halide's Type.max()/min()) and +-65504 as values."""
    t = hl.Float(16)
    assert t.is_float() and t.bits() == 16 and t.lanes() == 1 and str(t) == "float16"
    assert t.to_numpy() == np.float16 and hl.Type(hl.TypeCode.Float, 16, 4) == hl.Float(16, 4)
    assert t.max_value() == 65504.0 and t.min_value() == -65504.0
    assert to_ir(t.max()).value == np.inf and to_ir(t.min()).value == -np.inf
    assert hl.Float(32).can_represent(t) and not t.can_represent(hl.Float(32)) and t.can_represent(hl.UInt(1))
    assert hl.Buffer(np.zeros(4, F16)).type() == t
    assert repr(t.max()) == "<halide.Expr of type float16: infh>"  # as Halide prints it


@pytest.mark.parametrize("lib", LIBS)
def test_promotion_rules_as_halide(lib):
    """The types of mixed expressions, the same in pyhalide and Halide: float16 with a wider float
    is the wider float; with an integer it stays float16; a Python float is a float32 constant in
    Halide's bindings, so it widens a float16 Expr to float32; math functions keep float16 (but
    fast_pow computes in float32); clamp's bounds take the Expr's type."""
    h = _lib(lib)
    x = h.Var("x")
    a = h.cast(h.Float(16), x)
    cases = {
        "a + f32": (a + h.cast(h.Float(32), x), "float32"),
        "a * f64": (a * h.cast(h.Float(64), x), "float64"),
        "a + int": (a + 1, "float16"),
        "i8 * a": (h.cast(h.Int(8), x) * a, "float16"),
        "i64 - a": (h.cast(h.Int(64), x) - a, "float16"),
        "a + 1.5": (a + 1.5, "float32"),
        "a / 2": (a / 2, "float16"),
        "-a": (-a, "float16"),
        "sqrt": (h.sqrt(a), "float16"),
        "sin": (h.sin(a), "float16"),
        "pow": (h.pow(a, a), "float16"),
        "atan2": (h.atan2(a, a), "float16"),
        "floor": (h.floor(a), "float16"),
        "abs": (h.abs(a), "float16"),
        "fast_pow": (h.fast_pow(a, a), "float32"),
        "clamp": (h.clamp(a, 0.0, 1.0), "float16"),
        "min with 0.5": (h.min(a, 0.5), "float32"),
        "a < 0.5": (a < 0.5, "bool"),
    }
    for what, (e, want) in cases.items():
        assert str(e.type()) == want, what


def test_constants_are_rounded_to_float16():
    """A float16 constant holds its value rounded to float16 (round to nearest even), and folding
    two of them rounds the result, as the compiled code would."""
    half = hl.Float(16)
    assert ir.make_const(half, 0.1).value == float(F16(0.1))
    tie = 1 + 2.0**-11  # halfway between 1 and the next float16: ties to even, 1
    assert ir.FloatImm(half, tie).value == 1.0
    assert ir.FloatImm(half, tie + 2.0**-40).value == float(F16(tie + 2.0**-40)) > 1.0
    assert ir.FloatImm(half, 70000.0).value == np.inf
    folded = simplify(to_ir(hl.cast(half, hl.f32(0.1)) * hl.cast(half, 3)))
    assert isinstance(folded, ir.FloatImm) and folded.value == float(F16(0.1) * F16(3))
    assert simplify(to_ir(hl.cast(half, hl.f64(tie + 2.0**-40)))).value == float(F16(tie + 2.0**-40))
    x = hl.Var("x")
    f = hl.Func("f")
    f[x] = hl.cast(hl.Float(16), hl.f32(0.1)) * hl.cast(hl.Float(16), 3) + hl.cast(hl.Float(16), x)
    assert_same_bits(np.asarray(f.realize([4])), F16(0.1) * F16(3) + np.arange(4, dtype=F16))


# ------------------------------------------------------------------------------ arithmetic
def _arith_outputs(h, a, b):
    return [a + b, a - b, a * b, a / b, -a, h.min(a, b), h.max(a, b), a * b + a, (a - b) / (a + b)]


def _arith_numpy(a, b):
    with np.errstate(all="ignore"):
        # Halide's float min/max (strict_float): a < b ? a : b and a > b ? a : b (a NaN gives b)
        mn = np.where(a < b, a, b)
        mx = np.where(a > b, a, b)
        # (Halide's -a is 0 - a: -(0) is +0)
        return [a + b, a - b, a * b, a / b, F16(0) - a, mn, mx, a * b + a, (a - b) / (a + b)]


@pytest.mark.parametrize("how", ["serial", "vectorize8", "vectorize16", "parallel"])
def test_arithmetic_rounds_each_operation(how):
    """+ - * / negation, min, max and short chains of them on float16 buffers (zeros,
    subnormals, the largest value, infinities, NaN): each operation rounded to float16, as numpy's
    float16 arithmetic, for serial, vectorized and parallel schedules."""
    av = _halves()
    bv = np.roll(av, 7)
    n = av.size
    x = hl.Var("x")
    a, b = hl.Buffer(av), hl.Buffer(bv)
    f = hl.Func("f")
    f[x] = tuple(_arith_outputs(hl, a[x], b[x]))
    schedule_1d(f, x, how)
    got = f.realize([n])
    for i, want in enumerate(_arith_numpy(av, bv)):
        assert_same_bits(np.asarray(got[i]), want, f"output {i}")


def test_arithmetic_as_halide():
    """The same float16 arithmetic, vectorized, bit for bit as the real Halide computes it."""
    halide = _lib("halide")
    av = _halves()
    av = av[~np.isnan(av)]  # (no NaN: what min/max make of it differs between code generators)
    bv = np.roll(av, 5)
    results = []
    for h in (hl, halide):
        x = h.Var("x")
        a, b = h.Buffer(av), h.Buffer(bv)
        f = h.Func("f")
        f[x] = h.Tuple(_arith_outputs(h, a[x], b[x])) if h is halide else tuple(_arith_outputs(h, a[x], b[x]))
        f.vectorize(x, 8)
        results.append([np.asarray(r) for r in f.realize([av.size])])
    for i, (mine, theirs) in enumerate(zip(*results)):
        # (not -a: pyhalide computes Halide's 0 - a, +0 for a = 0, where Halide's codegen negates, -0;
        # nor a * b + a, which Halide's fast-math flags let LLVM fuse into one rounding)
        if i not in (4, 7):
            assert_same_bits(mine, theirs, f"output {i}")


# ------------------------------------------------------------------------------ casts
_INT_EDGES = [0, 1, -1, 2047, 2049, 2051, 4097, 65504, 65519, 65520, -65519, -65520, 100000, 2**24 + 1,
              2**31 - 1, -(2**31), 2**53 + 1, 2**62 + 1, 2**63 - 1, -(2**63)]
_FLOAT_EDGES = [0.0, -0.0, 1 + 2.0**-11, 1 + 3 * 2.0**-11, 65504.0, 65519.99, 65520.0, -65520.0, 2.0**-24,
                2.0**-25, 2.0**-25 * 1.0001, 2.0**-26, 0.1, 1e10, -1e-10, np.inf, -np.inf, np.nan]
# float64 values where rounding to float32 first, then to float16, would round twice wrongly
_DOUBLE_TRAPS = [1 + 2.0**-11 + 2.0**-40, 1 + 2.0**-11 - 2.0**-40, 1 + 3 * 2.0**-11 - 2.0**-45,
                 -(2048 + 1 + 2.0**-30), 2.0**-25 + 2.0**-60, 65520 - 2.0**-30, 1e-300, -1e300, 2.0**200]
_NUMERIC = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.float32,
            np.float64]


def _values_of(dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        values = _FLOAT_EDGES + (_DOUBLE_TRAPS if dtype == np.float64 else [])
        with np.errstate(over="ignore"):
            return np.array(values, dtype)
    info = np.iinfo(dtype)
    values = [v for v in _INT_EDGES if info.min <= v <= info.max] + [info.min, info.max]
    return np.resize(np.array(values, dtype), 16)  # (at least two vectors)


@pytest.mark.parametrize("dtype", _NUMERIC, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("how", ["serial", "vectorize8"])
def test_cast_to_float16(dtype, how):
    """Casts to float16 from every type, at the values where rounding is hard (ties, the overflow
    threshold 65520, integers past float32's precision, float64 values a rounding through float32
    would round twice): correctly rounded, as numpy's astype."""
    v = _values_of(dtype)
    x = hl.Var("x")
    f = hl.Func("f")
    f[x] = hl.cast(hl.Float(16), hl.Buffer(v)[x])
    schedule_1d(f, x, how)
    with np.errstate(over="ignore"):
        want = v.astype(F16)
    assert_same_bits(np.asarray(f.realize([v.size])), want)


@pytest.mark.parametrize("dtype", [d for d in _NUMERIC if d not in (np.uint64, np.float64)],
                         ids=lambda d: np.dtype(d).name)
def test_cast_to_float16_as_halide(dtype):
    """The same casts bit for bit as the real Halide (which cannot run float64 -> float16 here, and
    whose Python Buffers do not hold uint64)."""
    halide = _lib("halide")
    v = _values_of(dtype)
    results = []
    for h in (hl, halide):
        x = h.Var("x")
        f = h.Func("f")
        f[x] = h.cast(h.Float(16), h.Buffer(v)[x])
        f.vectorize(x, 8)
        results.append(np.asarray(f.realize([v.size])))
    assert_same_bits(*results)


@pytest.mark.parametrize("dtype", _NUMERIC, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("how", ["serial", "vectorize8"])
def test_cast_from_float16(dtype, how):
    """Casts from float16: to float32 and float64 exactly (subnormals, infinities and NaN too);
    to an integer type by truncation toward zero, for the values the type holds."""
    dtype = np.dtype(dtype)
    v = _halves()
    if dtype.kind != "f":
        info = np.iinfo(dtype)
        t = np.trunc(v.astype(np.float64))
        v = v[np.isfinite(v) & (t >= info.min) & (t <= info.max)]
    x = hl.Var("x")
    f = hl.Func("f")
    f[x] = hl.cast(hl.Type(hl.TypeCode.Float if dtype.kind == "f" else
                           hl.TypeCode.Int if dtype.kind == "i" else hl.TypeCode.UInt, dtype.itemsize * 8),
                   hl.Buffer(v)[x])
    schedule_1d(f, x, how)
    got = np.asarray(f.realize([v.size]))
    want = v.astype(dtype)
    if dtype.kind == "f":
        nan = np.isnan(want)
        assert np.isnan(got[nan]).all()
        np.testing.assert_array_equal(got[~nan].view(f"u{dtype.itemsize}"), want[~nan].view(f"u{dtype.itemsize}"))
    else:
        np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------------------ comparisons and select
@pytest.mark.parametrize("how", ["serial", "vectorize8"])
def test_comparisons_select_and_predicates(how):
    """Comparisons of float16 values (-0 == 0; a NaN makes < and == false, and <= true: Halide's
    a <= b is !(b < a)), select between float16 values and is_nan / is_inf / is_finite."""
    av = _halves()
    bv = np.roll(av, 3)
    x = hl.Var("x")
    a, b = hl.Buffer(av), hl.Buffer(bv)
    f = hl.Func("f")
    f[x] = (a[x] < b[x], a[x] <= b[x], a[x] == b[x], a[x] != b[x], hl.is_nan(a[x]), hl.is_inf(a[x]),
            hl.is_finite(a[x]), hl.select(a[x] > b[x], a[x] * hl.cast(hl.Float(16), 2), b[x]))
    schedule_1d(f, x, how)
    got = [np.asarray(r) for r in f.realize([av.size])]
    with np.errstate(all="ignore"):
        want = [av < bv, ~(bv < av), av == bv, av != bv, np.isnan(av), np.isinf(av), np.isfinite(av),
                np.where(av > bv, av * F16(2), bv)]
    for i, (g, w) in enumerate(zip(got[:7], want[:7])):
        np.testing.assert_array_equal(g.astype(bool), w, f"output {i}")
    assert_same_bits(got[7], want[7], "select")


# ------------------------------------------------------------------------------ math
_EXACT = {"sqrt": np.sqrt, "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc,
          "abs": np.abs}
_TRANSCENDENTAL = {"exp": np.exp, "log": np.log, "sin": np.sin, "cos": np.cos, "tan": np.tan, "atan": np.arctan,
                   "tanh": np.tanh}


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in float16 steps (for finite values of one sign)."""
    return np.abs(got.view(np.int16).astype(np.int64) - want.view(np.int16).astype(np.int64))


@pytest.mark.parametrize("how", ["serial", "vectorize8"])
def test_math_functions_compute_in_float32(how):
    """Math functions of float16 compute in float32 and round to float16: sqrt, floor, ceil,
    round (to even), trunc and abs, correctly rounded there, equal numpy's float16 bit for bit; exp,
    log, sin, cos, tan, atan, tanh, pow and atan2 are within one float16 step of the exact result
    rounded to float16 (the float32 libm rounds too) and mostly equal it."""
    v = _halves()
    w = np.abs(np.roll(v, 11))
    x = hl.Var("x")
    a, b = hl.Buffer(v), hl.Buffer(w)
    names = list(_EXACT) + list(_TRANSCENDENTAL)
    f = hl.Func("f")
    f[x] = tuple(getattr(hl, n)(a[x]) for n in names) + (hl.pow(b[x], a[x]), hl.atan2(a[x], b[x]))
    schedule_1d(f, x, how)
    got = [np.asarray(r) for r in f.realize([v.size])]
    assert all(g.dtype == F16 for g in got)
    with np.errstate(all="ignore"):
        for n, g in zip(names, got):
            if n in _EXACT:
                assert_same_bits(g, _EXACT[n](v), n)
        wide = v.astype(np.float64)
        exact = [fn(wide) for fn in _TRANSCENDENTAL.values()] + [np.power(w.astype(np.float64), wide),
                                                                np.arctan2(wide, w.astype(np.float64))]
        for n, g, e in zip(list(_TRANSCENDENTAL) + ["pow", "atan2"], got[len(_EXACT):], exact):
            want = e.astype(np.float32).astype(F16)
            finite = np.isfinite(want) & np.isfinite(g)
            assert (np.isnan(g) == np.isnan(want)).all(), n
            assert (_ulps(g[finite], want[finite]) <= 1).all(), n
            assert np.mean(g[finite].view(np.uint16) == want[finite].view(np.uint16)) > 0.95, n


def test_math_functions_as_halide():
    """sqrt, floor, round and abs of float16, bit for bit as the real Halide, for values in
    (0, 32768): outside it Halide 21's emulation of float16 on x86 differs from its own semantics
    (sqrt of a negative value is -inf and of NaN inf, not NaN; round of -0 is +0 and of values
    from 32768 up wraps around, as if through an int16)."""
    halide = _lib("halide")
    v = _halves()
    v = v[(v > 0) & (v < 32768)]
    results = []
    for h in (hl, halide):
        x = h.Var("x")
        a = h.Buffer(v)
        f = h.Func("f")
        outs = [h.sqrt(a[x]), h.floor(a[x]), h.round(a[x]), h.abs(a[x]), h.sqrt(a[x]) * a[x]]
        f[x] = h.Tuple(outs) if h is halide else tuple(outs)
        f.vectorize(x, 8)
        results.append([np.asarray(r) for r in f.realize([v.size])])
    for i, (mine, theirs) in enumerate(zip(*results)):
        assert_same_bits(mine, theirs, f"output {i}")


# ------------------------------------------------------------------------------ Params, ImageParams
@pytest.mark.parametrize("how", ["serial", "vectorize8", "parallel"])
def test_params_and_image_params(how):
    """A float16 Param set from a Python float holds it rounded once to float16 (a value that
    rounding through float32 would round wrongly), and a float16 ImageParam reads its buffer;
    out(x, y) = in(x, y) * p + x * y in float16."""
    x, y = hl.Var("x"), hl.Var("y")
    inp = hl.ImageParam(hl.Float(16), 2, "inp")
    p = hl.Param(hl.Float(16), "p")
    out = hl.Func("out")
    out[x, y] = inp[x, y] * p + x * y
    schedule_1d(out, x, how)
    data = _halves()[:-3].reshape(-1)[:16 * 8].reshape(8, 16)
    value = 1 + 2.0**-11 + 2.0**-40
    inp.set(hl.Buffer(data))
    p.set(value)
    got = np.asarray(out.realize([16, 8]))
    yy, xx = np.mgrid[0:8, 0:16]
    with np.errstate(all="ignore"):
        want = data * F16(value) + (xx * yy).astype(F16)
    assert F16(value) > 1
    assert_same_bits(got, want)


def test_vectorized_code_converts_with_f16c_and_calls_nothing(tmp_path):
    """The vectorized float16 loop converts whole vectors with F16C (vcvtph2ps, vcvtps2ph; or the
    AVX512-FP16 forms) and, for
    every conversion from and to float16 (float64 and 64-bit integers included), calls no
    compiler-rt routine (the JIT cannot resolve them)."""
    x = hl.Var("x")
    a = hl.ImageParam(hl.Float(16), 1, "a")
    d = hl.ImageParam(hl.Float(64), 1, "d")
    i = hl.ImageParam(hl.Int(64), 1, "i")
    u = hl.ImageParam(hl.UInt(64), 1, "u")
    f = hl.Func("f")
    h = hl.cast(hl.Float(16), d[x]) + hl.cast(hl.Float(16), i[x]) + hl.cast(hl.Float(16), u[x])
    f[x] = (a[x] * h + hl.sqrt(a[x]), hl.cast(hl.Float(64), a[x]), hl.cast(hl.Int(64), a[x]),
            hl.cast(hl.UInt(64), a[x]))
    f.vectorize(x, 8)
    asm = tmp_path / "f.s"
    f.compile_to_assembly(str(asm), [a, d, i, u])
    text = asm.read_text()
    # F16C's, or AVX512-FP16's where the host has it (vcvtph2psx, vcvtps2phx)
    assert re.search(r"vcvtph2psx?\s+%xmm\d+, %ymm", text)
    assert re.search(r"vcvtps2ph\s+\$\d+, %ymm", text) or re.search(r"vcvtps2phx\s+%ymm\d+, %xmm", text)
    assert not re.findall(r"call\w*\s+_*(?:trunc|extend|float|fix)\w*hf", text)


# ------------------------------------------------------------------------------ the reference evaluator
def test_reference_evaluator_computes_in_float16():
    """pyhalide's numpy reference evaluator gives the compiled float16 pipeline's bits."""
    av = _halves()
    x = hl.Var("x")
    a = hl.Buffer(av)
    f = hl.Func("f")
    f[x] = hl.select(a[x] > 1, hl.sqrt(a[x]) * a[x], a[x] / hl.cast(hl.Float(16), 3)) + hl.cast(hl.Float(16), x)
    (want,) = reference.realize(f, [av.size])
    assert_same_bits(np.asarray(f.realize([av.size])), want)


# ------------------------------------------------------------------------------ CUDA
def _cuda_pipeline():
    """float16 arithmetic, casts from float64, int64 and float32, math, a select and a float16 Param
    in one kernel (gpu_tile 8x8 over 16 x 2 rows of inputs)."""
    x, y, xi, yi = (hl.Var(n) for n in "x y xi yi".split())
    a = hl.ImageParam(hl.Float(16), 1, "a")
    d = hl.ImageParam(hl.Float(64), 1, "d")
    i = hl.ImageParam(hl.Int(64), 1, "i")
    p = hl.Param(hl.Float(16), "p")
    f = hl.Func("f")
    h = a[x]
    f[x, y] = (h * p + h / (h + hl.cast(hl.Float(16), y)), hl.cast(hl.Float(16), d[x]), hl.cast(hl.Float(16), i[x]),
               hl.select(h > p, hl.sqrt(h), hl.exp(h)), hl.cast(hl.Float(64), h * h), hl.cast(hl.Int(32), h))
    f.gpu_tile(x, y, xi, yi, 8, 8)
    return f, a, d, i, p


def _cuda_inputs(n: int):
    av = _halves()[:n]
    with np.errstate(over="ignore"):
        dv = np.resize(np.array(_FLOAT_EDGES + _DOUBLE_TRAPS, np.float64), n)
    iv = np.resize(np.array(_INT_EDGES, np.int64), n)
    return av, dv, iv


def test_float16_in_cuda_kernels(device):
    """The same float16 computation in a CUDA kernel (serial and emulated devices, a GPU where
    there is one): each operation rounded to float16, float64 and int64 converted with one
    rounding, the Param passed in as float16, as numpy computes it."""
    n, rows = 32, 8
    f, a, d, i, p = _cuda_pipeline()
    av, dv, iv = _cuda_inputs(n)
    av = np.where(np.isfinite(av) & (np.abs(av) < 30000), av, F16(2))  # (the int32 cast stays in range)
    value = 1 + 2.0**-11 + 2.0**-40
    a.set(hl.Buffer(av))
    d.set(hl.Buffer(dv))
    i.set(hl.Buffer(iv))
    p.set(value)
    got = f.realize([n, rows], hl.Target("host-cuda"))
    for b in got:
        b.copy_to_host()
    got = [np.asarray(b) for b in got]
    ph = F16(value)
    ys = np.arange(rows, dtype=F16)[:, None]
    with np.errstate(all="ignore"):
        want = [av * ph + av / (av + ys), np.broadcast_to(dv.astype(F16), (rows, n)),
                np.broadcast_to(iv.astype(F16), (rows, n)),
                np.broadcast_to(np.where(av > ph, np.sqrt(av), np.exp(av)), (rows, n)),
                np.broadcast_to((av * av).astype(np.float64), (rows, n)),
                np.broadcast_to(av.astype(np.int32), (rows, n))]
    for k in range(4):
        assert_same_bits(got[k], np.asarray(want[k], F16), f"output {k}")
    np.testing.assert_array_equal(got[4], want[4])
    np.testing.assert_array_equal(got[5], want[5])


@pytest.mark.parametrize("capability", [80, 90])
def test_float16_kernels_compile_for_the_gpu(capability):
    """The float16 kernel compiles with nvcc (or NVRTC) for sm_80 and sm_90, within the limits."""
    from pyhalide.codegen import gpu_runtime

    if gpu_runtime.nvcc_path() is None and gpu_runtime._nvrtc() is None:
        pytest.skip("neither nvcc nor NVRTC is installed")
    f = _cuda_pipeline()[0]
    source = hl.Pipeline([f]).cuda_source(hl.Target("host-cuda"))
    assert "#include <cuda_fp16.h>" in source and "typedef __half hl_half;" in source
    assert "const hl_half *__restrict__" in source and "hl_half v_p)" in source
    report = gpu_runtime.ptxas_report(gpu_runtime.compile_ptx(source, capability), capability)
    assert report and all(r.spill_stores == 0 for r in report.values())


def test_float16_atomic_updates(device):
    """An atomic float16 histogram (64 additions of 0.5 into 4 bins, exact in float16) is the same
    on the CPU with a parallel RVar and in a CUDA kernel (gpu_blocks x gpu_threads over the RDom)."""
    x = hl.Var("x")
    r = hl.RDom([(0, 64)])
    results = []
    for gpu in (False, True):
        f = hl.Func("f")
        f[x] = hl.cast(hl.Float(16), 0)
        f[r.x % 4] += hl.cast(hl.Float(16), 0.5)
        if gpu:
            ro, ri = hl.RVar("ro"), hl.RVar("ri")
            f.update().atomic().split(r.x, ro, ri, 16).gpu_blocks(ro).gpu_threads(ri)
            out = f.realize([4], hl.Target("host-cuda"))
            out.copy_to_host()
        else:
            f.update().atomic().parallel(r.x)
            out = f.realize([4])
        results.append(np.asarray(out))
    for got in results:
        assert_same_bits(got, np.full(4, 8, F16))


def test_fuzz_float_stores_clears_the_lowest_mantissa_bit_of_every_float_stored():
    """Target feature fuzz_float_stores (Halide's): float16, float32 and float64 stores, scalar
    and vectorized, keep every bit but the lowest; integer stores are untouched."""
    t = hl.get_jit_target_from_environment().with_feature(hl.TargetFeature.FuzzFloatStores)
    x = hl.Var("x")
    for ty, dtype, bits in ((hl.Float(16), np.float16, np.uint16), (hl.Float(32), np.float32, np.uint32),
                            (hl.Float(64), np.float64, np.uint64)):
        for vectorize in (False, True):
            f, g = hl.Func("fuzzed"), hl.Func("ints")
            f[x] = hl.cast(ty, x) / hl.cast(ty, 7)
            g[x] = x * 3 + 1
            if vectorize:
                f.vectorize(x, 8)
            got = np.asarray(f.realize([40], t)).view(bits)
            want = (np.arange(40, dtype=dtype) / dtype(7)).view(bits)
            np.testing.assert_array_equal(got, want & ~bits(1))
            np.testing.assert_array_equal(np.asarray(g.realize([40], t)), np.arange(40) * 3 + 1)
