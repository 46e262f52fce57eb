"""Property tests of expression semantics, through the compiler and through pyhalide.reference.

For every integer type (int8..int64, uint8..uint64) and float32/float64, Hypothesis draws
operand arrays, feeds them as inputs, and one Func computes a group of operations (as a Tuple).
It is realized by the compiler (`f.realize([n])`) and by the numpy reference, and both are
compared with a model written here: integer results with Python integers (exact, then wrapped),
float arithmetic exactly with IEEE numpy scalars, transcendental functions within a few ULP of
Python's `math` in float64.

Signed 32/64-bit overflow is undefined in Halide, so those draws stay in range for + - * <<.
Float inputs are finite and (where it matters) avoid results outside the type's range.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import pyhalide as hl
from pyhalide import reference

INT_TYPES = [hl.Int(8), hl.Int(16), hl.Int(32), hl.Int(64), hl.UInt(8), hl.UInt(16), hl.UInt(32), hl.UInt(64)]
FLOAT_TYPES = [hl.Float(32), hl.Float(64)]
ALL_TYPES = INT_TYPES + FLOAT_TYPES

x = hl.Var("x")
MAX_N = 40


def ids(types):
    return [str(t) for t in types]


# ---------------------------------------------------------------- the harness
_FUNCS: dict = {}


def _func(key, in_types, build):
    """One Func per (test, types), reading ImageParams, so the compiled pipeline is reused."""
    if key not in _FUNCS:
        params = [hl.ImageParam(t, 1, f"in{i}") for i, t in enumerate(in_types)]
        outs = build(*[p[x] for p in params])
        f = hl.Func("f_" + "_".join(str(k) for k in key))
        f[x] = hl.Tuple(list(outs)) if len(outs) > 1 else outs[0]
        _FUNCS[key] = (f, params)
    return _FUNCS[key]


def run(key, in_types, build, arrays):
    """Realize through the compiler and through the reference: (compiled outputs, reference outputs)."""
    f, params = _func(key, in_types, build)
    for p, a in zip(params, arrays):
        p.set(hl.Buffer(np.ascontiguousarray(a)))
    n = len(arrays[0])
    got = f.realize([n])
    got = [np.array(g) for g in (got if isinstance(got, list | tuple) else [got])]
    ref = reference.realize(f, [n])
    return got, ref


def check(labels, outputs, wants, inputs, compare=None):
    """Compare each output with the model; compare(label, got, want) may replace exact equality."""
    assert len(outputs) == len(wants) == len(labels)
    for label, got, want in zip(labels, outputs, wants):
        msg = f"{label}; inputs {[a.tolist() for a in inputs]}"
        assert got.dtype == want.dtype, f"{label}: dtype {got.dtype}, expected {want.dtype}"
        assert got.shape == want.shape, f"{label}: shape {got.shape}, expected {want.shape}"
        if compare is not None and compare(label, got, want, msg):
            continue
        np.testing.assert_array_equal(got, want, err_msg=msg)


def check_both(labels, key, in_types, build, arrays, wants, compare=None):
    got, ref = run(key, in_types, build, arrays)
    check([f"compiled {lb}" for lb in labels], got, wants, arrays, compare)
    check([f"reference {lb}" for lb in labels], ref, wants, arrays, compare)


# ---------------------------------------------------------------- models
def wrap(v: int, t) -> int:
    m = 1 << t.bits
    v &= m - 1
    if t.is_int() and v >= m // 2:
        v -= m
    return v


def ints(a):
    return [int(v) for v in a]


def model(t, fn, *arrays):
    """Apply fn elementwise on Python values, wrap integers to t, as a numpy array of t."""
    cols = [ints(a) if a.dtype.kind in "iu" else [float(v) for v in a] for a in arrays]
    out = []
    for vals in zip(*cols):
        r = fn(*vals)
        out.append(r if t.is_float() or isinstance(r, bool) else wrap(r, t))
    dt = np.bool_ if out and isinstance(out[0], bool) else t.to_numpy()
    return np.array(out, dtype=dt)


def ediv(a: int, b: int) -> int:
    """Euclidean division; 0 for b == 0."""
    if b == 0:
        return 0
    q = a // b
    if a - q * b < 0:
        q += 1
    return q


def emod(a: int, b: int) -> int:
    return 0 if b == 0 else a - b * ediv(a, b)


def int_to_float(v: int, t) -> float:
    """v rounded to the nearest value of float type t (ties to even), exactly."""
    if t.bits == 64:
        return float(v)  # Python rounds int -> double correctly
    c = np.float32(float(v))  # may round twice: check the neighbours exactly
    best = None
    for cand in (np.nextafter(c, np.float32(-np.inf)), c, np.nextafter(c, np.float32(np.inf))):
        if not np.isfinite(cand):
            continue
        err = abs(int(cand) - v)
        even = int(np.array(cand, np.float32).view(np.uint32)) % 2 == 0
        if best is None or err < best[0] or (err == best[0] and even):
            best = (err, cand)
    return float(best[1])


def cast_model(src, dst):
    """The value of a cast from src to dst, on Python numbers."""

    def f(v):
        if dst.is_float():
            return int_to_float(v, dst) if not src.is_float() else v
        if src.is_float():
            return math.trunc(v)
        return v

    return f


def sat_model(dst):
    def f(v):
        if dst.is_float():
            return v
        if isinstance(v, float):
            if v >= dst.max_value() + 1:
                return dst.max_value()
            if v <= dst.min_value():
                return dst.min_value()
            return math.trunc(v)
        return min(max(v, dst.min_value()), dst.max_value())

    return f


# ---------------------------------------------------------------- strategies
def int_elements(t, lo=None, hi=None):
    lo = t.min_value() if lo is None else max(lo, t.min_value())
    hi = t.max_value() if hi is None else min(hi, t.max_value())
    small = st.integers(max(lo, -4), min(hi, 4))  # zero, one, minus one ... often
    edges = st.sampled_from(sorted(v for v in {lo, hi, lo + 1, hi - 1} if lo <= v <= hi))
    return st.one_of(small, edges, st.integers(lo, hi))


def float_elements(t, lo=None, hi=None, **kw):
    width = t.bits
    if lo is None:
        lo = -1e30 if width == 32 else -1e300
    if hi is None:
        hi = 1e30 if width == 32 else 1e300
    if width == 32:
        fmax = float(np.finfo(np.float32).max)
        lo, hi = float(np.float32(max(lo, -fmax))), float(np.float32(min(hi, fmax)))
    general = st.floats(lo, hi, width=width, allow_nan=False, allow_infinity=False, **kw)
    specials = [v for v in (0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 1.5, -2.5, 3.0) if lo <= v <= hi]
    if kw.get("exclude_min"):
        specials = [v for v in specials if v > lo]
    if kw.get("exclude_max"):
        specials = [v for v in specials if v < hi]
    return st.one_of(st.sampled_from(specials), general) if specials else general


def elements(t, lo=None, hi=None, **kw):
    return float_elements(t, lo, hi, **kw) if t.is_float() else int_elements(t, lo, hi)


@st.composite
def arrays_of(draw, types_and_elements, n=None):
    """Arrays of one common length n, one per (type, element strategy)."""
    if n is None:
        n = draw(st.integers(1, MAX_N))
    return [draw(hnp.arrays(t.to_numpy(), n, elements=el)) for t, el in types_and_elements]


def n_and_arrays(*specs):
    return arrays_of(list(specs))


# ---------------------------------------------------------------- float comparison
def ulp_compare(ulps):
    def compare(label, got, want, msg):
        if got.dtype.kind != "f":
            return False
        g, w = got.astype(np.float64), want.astype(np.float64)
        tol = ulps * np.spacing(np.abs(want)).astype(np.float64)
        ok = (g == w) | (np.abs(g - w) <= tol) | (np.isnan(g) & np.isnan(w))
        assert ok.all(), f"{msg}\n got {got[~ok].tolist()}\nwant {want[~ok].tolist()} (within {ulps} ulp)"
        return True

    return compare


def _safe_range(t, op):
    """Operand range with no signed 32/64-bit overflow for op (wrap-around types: full range)."""
    if t.is_int() and t.bits >= 32:
        if op == "mul":
            return -(1 << (t.bits // 2 - 1)), (1 << (t.bits // 2 - 1))
        return -(1 << (t.bits - 2)), (1 << (t.bits - 2))
    if t.is_float():
        return (-1e15, 1e15) if t.bits == 32 else (-1e150, 1e150)
    return None, None


# ---------------------------------------------------------------- arithmetic
@pytest.mark.parametrize("t", ALL_TYPES, ids=ids(ALL_TYPES))
@given(data=st.data())
def test_add_sub(t, data):
    lo, hi = _safe_range(t, "add")
    a, b = data.draw(n_and_arrays((t, elements(t, lo, hi)), (t, elements(t, lo, hi))))
    if t.is_float():
        wants = [a + b, a - b]
    else:
        wants = [model(t, lambda p, q: p + q, a, b), model(t, lambda p, q: p - q, a, b)]
    check_both(["a + b", "a - b"], ("addsub", t), [t, t], lambda p, q: (p + q, p - q), [a, b], wants)


@pytest.mark.parametrize("t", ALL_TYPES, ids=ids(ALL_TYPES))
@given(data=st.data())
def test_mul(t, data):
    lo, hi = _safe_range(t, "mul")
    a, b = data.draw(n_and_arrays((t, elements(t, lo, hi)), (t, elements(t, lo, hi))))
    want = a * b if t.is_float() else model(t, lambda p, q: p * q, a, b)
    check_both(["a * b"], ("mul", t), [t, t], lambda p, q: (p * q,), [a, b], [want])


@pytest.mark.parametrize("t", ALL_TYPES, ids=ids(ALL_TYPES))
@given(data=st.data())
def test_div_mod(t, data):
    if t.is_float():
        nz = float_elements(t, -1e6, 1e6).filter(lambda v: abs(v) >= 1e-3)
        a, b = data.draw(n_and_arrays((t, float_elements(t, -1e6, 1e6)), (t, nz)))
        fb = np.float32 if t.bits == 32 else np.float64
        q = a / b
        # a % b is a - b * floor(a / b); the compiler may fuse the multiply-subtract, so allow an ulp of b*q
        mod = a - b * np.floor(a / b)

        def compare(label, got, want, msg):
            if "%" not in label:
                return False
            tol = 2 * np.spacing(np.abs(b * np.floor(a / b)).astype(fb)).astype(np.float64) + 1e-300
            assert (np.abs(got.astype(np.float64) - want.astype(np.float64)) <= tol).all(), msg
            return True

        check_both(["a / b", "a % b", "a // b"], ("divmod", t), [t, t], lambda p, r: (p / r, p % r, p // r),
                   [a, b], [q, mod, np.floor(q)], compare)
        return
    a, b = data.draw(n_and_arrays((t, int_elements(t)), (t, int_elements(t))))
    if t.is_int() and t.bits >= 32:
        b = np.where((a == t.min_value()) & (b == -1), 1, b).astype(b.dtype)  # overflow: undefined
    wants = [model(t, ediv, a, b), model(t, emod, a, b)]
    check_both(["a / b", "a % b"], ("divmod", t), [t, t], lambda p, q: (p / q, p % q), [a, b], wants)


def _divisors(t):
    cands = [1, 2, 3, 5, 7, 10, 16, 64, 100, 127, 255, 1000, 65535, 2**31 - 1, 2**32 - 1]
    if t.is_int():
        cands += [-1, -2, -3, -7, -16, -100, -128]
    return [c for c in cands if t.can_represent(c)]


@pytest.mark.parametrize("t", INT_TYPES, ids=ids(INT_TYPES))
@given(data=st.data())
def test_div_mod_by_constants(t, data):
    """Division by constants is often lowered to multiplies and shifts: check every remainder sign."""
    (a,) = data.draw(n_and_arrays((t, int_elements(t))))
    divs = _divisors(t)
    if t.is_int() and t.bits >= 32:
        a = np.where(a == t.min_value(), t.min_value() + 1, a).astype(a.dtype)  # avoid MIN / -1

    def build(p):
        return [e for c in divs for e in (p / c, p % c)]

    wants = []
    for c in divs:
        wants += [model(t, lambda v, c=c: ediv(v, c), a), model(t, lambda v, c=c: emod(v, c), a)]
    labels = [f"a {op} {c}" for c in divs for op in ("/", "%")]
    check_both(labels, ("divconst", t), [t], build, [a], wants)


@pytest.mark.parametrize("t", INT_TYPES, ids=ids(INT_TYPES))
@given(data=st.data())
def test_nested_divisions_by_constants(t, data):
    """(a / c1) / c2 and (a / c1 + c3) / c2 (a pyramid's bounds, level after level) compute
    Euclidean quotients however the simplifier folds them; with positive divisors the chain
    becomes one division (the offset form only where Halide assumes no overflow: 32 bits and up)."""
    from pyhalide import ir
    from pyhalide.simplify import simplify

    (a,) = data.draw(n_and_arrays((t, int_elements(t))))
    c1 = data.draw(st.sampled_from([c for c in _divisors(t) if c != -1]))
    c2 = data.draw(st.sampled_from([c for c in _divisors(t) if c != -1]))
    c3 = data.draw(st.integers(-20, 20))
    if t.is_int() and t.bits >= 32:  # no overflow of a + c3 * c1, as Halide assumes for these types
        a = np.clip(a, t.min_value() // 2, t.max_value() // 2).astype(a.dtype)
    if not t.can_represent(c3):
        c3 = abs(c3)

    def build(p):
        return [(p / c1) / c2, (p / c1 + c3) / c2]

    def chained(v):
        return ediv(wrap(ediv(v, c1) + c3, t), c2)

    wants = [model(t, lambda v: ediv(ediv(v, c1), c2), a), model(t, chained, a)]
    check_both(["(a / c1) / c2", "(a / c1 + c3) / c2"], ("nesteddiv", t, c1, c2, c3), [t], build, [a], wants)

    x = ir.Variable("x", t)
    folded = simplify(ir.Div(ir.Div(x, ir.make_const(t, c1)), ir.make_const(t, c2)))
    if c1 > 0 and c2 > 0 and t.can_represent(c1 * c2):
        assert folded == simplify(ir.Div(x, ir.make_const(t, c1 * c2))), folded


def test_a_folded_division_adds_no_offset_that_wraps():
    """(a / 2147483647 - 1) / 4294967295 in int64, a = 2**62 - 1: folded to one division by
    about 2**63, whose offset was then made positive by adding almost 2**63, which wrapped (-2
    instead of 0; found by the property above)."""
    a = np.array([2**62 - 1], np.int64)
    inp = hl.Buffer(a, name="fold_wrap_in")
    x = hl.Var("x")
    f = hl.Func("fold_wrap")
    f[x] = (inp[x] / hl.i64(2147483647) + hl.i64(-1)) / hl.i64(4294967295)
    assert np.asarray(f.realize([1])).tolist() == [0]


@pytest.mark.parametrize("t", ALL_TYPES, ids=ids(ALL_TYPES))
@given(data=st.data())
def test_min_max(t, data):
    a, b = data.draw(n_and_arrays((t, elements(t)), (t, elements(t))))
    if t.is_float():
        wants = [np.minimum(a, b), np.maximum(a, b)]
    else:
        wants = [model(t, min, a, b), model(t, max, a, b)]
    check_both(["min", "max"], ("minmax", t), [t, t], lambda p, q: (hl.min(p, q), hl.max(p, q)), [a, b], wants)


@pytest.mark.parametrize("t", ALL_TYPES, ids=ids(ALL_TYPES))
@given(data=st.data())
def test_comparisons(t, data):
    a, b = data.draw(n_and_arrays((t, elements(t)), (t, elements(t))))
    # half the time compare equal values, so == and <= see both outcomes
    same = data.draw(hnp.arrays(np.bool_, len(a)))
    b = np.where(same, a, b).astype(b.dtype)
    ops = [("==", np.equal), ("!=", np.not_equal), ("<", np.less), ("<=", np.less_equal),
           (">", np.greater), (">=", np.greater_equal)]
    cols = [ints(a), ints(b)] if not t.is_float() else [a.tolist(), b.tolist()]
    pyops = {"==": lambda p, q: p == q, "!=": lambda p, q: p != q, "<": lambda p, q: p < q,
             "<=": lambda p, q: p <= q, ">": lambda p, q: p > q, ">=": lambda p, q: p >= q}
    wants = [np.array([pyops[name](p, q) for p, q in zip(*cols)], np.bool_) for name, _ in ops]

    def build(p, q):
        return (p == q, p != q, p < q, p <= q, p > q, p >= q)

    check_both([f"a {name} b" for name, _ in ops], ("cmp", t), [t, t], build, [a, b], wants)


# ---------------------------------------------------------------- bits
@pytest.mark.parametrize("t", INT_TYPES, ids=ids(INT_TYPES))
@given(data=st.data())
def test_bitwise(t, data):
    a, b = data.draw(n_and_arrays((t, int_elements(t)), (t, int_elements(t))))
    wants = [model(t, lambda p, q: p & q, a, b), model(t, lambda p, q: p | q, a, b),
             model(t, lambda p, q: p ^ q, a, b), model(t, lambda p: ~p, a)]
    check_both(["a & b", "a | b", "a ^ b", "~a"], ("bits", t), [t, t],
               lambda p, q: (p & q, p | q, p ^ q, ~p), [a, b], wants)


@pytest.mark.parametrize("t", INT_TYPES, ids=ids(INT_TYPES))
@given(data=st.data())
def test_shifts(t, data):
    a, s = data.draw(n_and_arrays((t, int_elements(t)), (t, st.integers(0, t.bits - 1))))
    if t.is_int() and t.bits >= 32:
        # signed 32/64-bit: a << s must not overflow
        s = np.array([min(int(k), max(0, t.bits - 2 - abs(int(v)).bit_length())) for v, k in zip(a, s)], a.dtype)
    wants = [model(t, lambda p, q: p << q, a, s), model(t, lambda p, q: p >> q, a, s),
             model(t, lambda p: p >> 1, a)]
    check_both(["a << s", "a >> s", "a >> 1"], ("shift", t), [t, t], lambda p, q: (p << q, p >> q, p >> 1),
               [a, s], wants)


def _shift_model(rt, left):
    """a << b or a >> b in result type rt, on Python ints; a negative b shifts the other way."""

    def f(p, q):
        if q < 0:
            left_, q = not left, -q
        else:
            left_ = left
        return p << q if left_ else p >> q

    return f


def _no_signed_overflow(rt, a, s):
    """Shift amounts clipped so that a << s cannot overflow a signed 32/64-bit result."""
    if not (rt.is_int() and rt.bits >= 32):
        return s
    return np.array([min(int(k), max(0, rt.bits - 2 - abs(int(v)).bit_length())) for v, k in zip(a, s)], s.dtype)


MIXED_SHIFTS = [(hl.UInt(8), hl.Int(8)), (hl.Int(8), hl.UInt(8)), (hl.UInt(16), hl.Int(32)),
                (hl.Int(16), hl.UInt(8)), (hl.UInt(32), hl.Int(32)), (hl.Int(64), hl.UInt(32))]


@pytest.mark.parametrize("ta,tb", MIXED_SHIFTS, ids=[f"{a}-{b}" for a, b in MIXED_SHIFTS])
@given(data=st.data())
def test_shifts_of_mixed_types(ta, tb, data):
    """The result has a's signedness at the wider width; the amount keeps its own type."""
    rt = ta.with_bits(max(ta.bits, tb.bits))
    a, s = data.draw(n_and_arrays((ta, int_elements(ta)), (tb, st.integers(0, min(rt.bits, tb.max_value() + 1) - 1))))
    s = _no_signed_overflow(rt, a, s)
    wants = [model(rt, _shift_model(rt, True), a, s), model(rt, _shift_model(rt, False), a, s)]
    check_both(["a << s", "a >> s"], ("mixshift", ta, tb), [ta, tb], lambda p, q: (p << q, p >> q), [a, s], wants)


SIGNED_TYPES = [t for t in INT_TYPES if t.is_int()]


@pytest.mark.parametrize("t", SIGNED_TYPES, ids=ids(SIGNED_TYPES))
@given(data=st.data())
def test_negative_shift_amounts(t, data):
    a, s = data.draw(n_and_arrays((t, int_elements(t)), (t, st.integers(-(t.bits - 1), t.bits - 1))))
    s = np.where(s < 0, s, _no_signed_overflow(t, a, s)).astype(s.dtype)
    s = np.where(s > 0, s, -_no_signed_overflow(t, a, -s)).astype(s.dtype)  # a >> -k is a << k
    wants = [model(t, _shift_model(t, True), a, s), model(t, _shift_model(t, False), a, s),
             model(t, lambda p: p >> 3, a), model(t, lambda p: p << 2, np.right_shift(a, 4))]
    check_both(["a << s", "a >> s", "a << -3", "(a >> 4) >> -2"], ("negshift", t), [t, t],
               lambda p, q: (p << q, p >> q, p << -3, (p >> 4) >> -2), [a, s], wants)


@pytest.mark.parametrize("t", INT_TYPES, ids=ids(INT_TYPES))
@given(data=st.data())
def test_bit_counting_abs_absd(t, data):
    a, b = data.draw(n_and_arrays((t, int_elements(t)), (t, int_elements(t))))
    u = t.with_code("uint")

    def popcount(v):
        return bin(v & ((1 << t.bits) - 1)).count("1")

    def clz(v):
        return t.bits - (v & ((1 << t.bits) - 1)).bit_length()

    def ctz(v):
        v &= (1 << t.bits) - 1
        return t.bits if v == 0 else (v & -v).bit_length() - 1

    wants = [model(t, popcount, a), model(t, clz, a), model(t, ctz, a),
             model(u, abs, a), model(u, lambda p, q: abs(p - q), a, b)]

    def build(p, q):
        return (hl.popcount(p), hl.count_leading_zeros(p), hl.count_trailing_zeros(p), hl.abs(p), hl.absd(p, q))

    check_both(["popcount", "clz", "ctz", "abs", "absd"], ("bitcount", t), [t, t], build, [a, b], wants)


@pytest.mark.parametrize("t", FLOAT_TYPES, ids=ids(FLOAT_TYPES))
@given(data=st.data())
def test_float_abs_absd(t, data):
    a, b = data.draw(n_and_arrays((t, float_elements(t, -1e15, 1e15)), (t, float_elements(t, -1e15, 1e15))))
    wants = [np.abs(a), np.abs(a - b)]
    check_both(["abs", "absd"], ("fabs", t), [t, t], lambda p, q: (hl.abs(p), hl.absd(p, q)), [a, b], wants)


# ---------------------------------------------------------------- casts
@pytest.mark.parametrize("src", INT_TYPES, ids=ids(INT_TYPES))
@given(data=st.data())
def test_casts_from_integers(src, data):
    (a,) = data.draw(n_and_arrays((src, int_elements(src))))
    wants = [model(dst, cast_model(src, dst), a) for dst in ALL_TYPES]
    check_both([f"cast {src} -> {dst}" for dst in ALL_TYPES], ("icast", src), [src],
               lambda p: [hl.cast(dst, p) for dst in ALL_TYPES], [a], wants)


def _float_range_for(src, dst):
    """An open interval of src values whose cast to dst is defined (truncation fits)."""
    if dst.is_float():
        big = float(np.finfo(np.float32).max) if dst.bits == 32 else 1e300
        return -big, big
    return float(dst.min_value() - 1), float(dst.max_value() + 1)


@pytest.mark.parametrize("src", FLOAT_TYPES, ids=ids(FLOAT_TYPES))
@given(data=st.data())
def test_casts_from_floats(src, data):
    specs = []
    for dst in ALL_TYPES:
        lo, hi = _float_range_for(src, dst)
        specs.append((src, float_elements(src, lo, hi, exclude_min=True, exclude_max=True)))
    arrays = data.draw(arrays_of(specs))
    wants = [model(dst, cast_model(src, dst), a) for dst, a in zip(ALL_TYPES, arrays)]

    def build(*ps):
        return [hl.cast(dst, p) for dst, p in zip(ALL_TYPES, ps)]

    check_both([f"cast {src} -> {dst}" for dst in ALL_TYPES], ("fcast", src), [src] * len(ALL_TYPES), build,
               arrays, wants)


SAT_FUNCS = {hl.Int(8): hl.i8_sat, hl.Int(16): hl.i16_sat, hl.Int(32): hl.i32_sat, hl.Int(64): hl.i64_sat,
             hl.UInt(8): hl.u8_sat, hl.UInt(16): hl.u16_sat, hl.UInt(32): hl.u32_sat, hl.UInt(64): hl.u64_sat}


@pytest.mark.parametrize("src", ALL_TYPES, ids=ids(ALL_TYPES))
@given(data=st.data())
def test_saturating_casts(src, data):
    el = float_elements(src) if src.is_float() else int_elements(src)
    (a,) = data.draw(n_and_arrays((src, el)))
    targets = list(SAT_FUNCS) + ([] if src.is_float() else FLOAT_TYPES)

    def build(p):
        outs = [SAT_FUNCS[dst](p) for dst in SAT_FUNCS]
        return outs + ([] if src.is_float() else [hl.saturating_cast(dst, p) for dst in FLOAT_TYPES])

    wants = [model(dst, sat_model(dst), a) if not (dst.is_float() and not src.is_float())
             else model(dst, cast_model(src, dst), a) for dst in targets]
    check_both([f"saturating_cast {src} -> {dst}" for dst in targets], ("sat", src), [src], build, [a], wants)


@pytest.mark.parametrize("t", [hl.Int(32), hl.UInt(32), hl.Float(32), hl.Int(64), hl.Float(64)],
                         ids=["int32", "uint32", "float32", "int64", "float64"])
@given(data=st.data())
def test_reinterpret(t, data):
    dst = {hl.Int(32): hl.Float(32), hl.UInt(32): hl.Int(32), hl.Float(32): hl.UInt(32),
           hl.Int(64): hl.Float(64), hl.Float(64): hl.Int(64)}[t]
    (a,) = data.draw(n_and_arrays((t, elements(t))))
    if dst.is_float():  # keep the bit patterns finite (NaN payloads need not survive)
        a = np.where(np.isfinite(a.view(dst.to_numpy())), a, 0).astype(a.dtype)
    want = a.view(dst.to_numpy())
    check_both([f"reinterpret {t} as {dst}"], ("reinterpret", t), [t], lambda p: (hl.reinterpret(dst, p),),
               [a], [want])


# ---------------------------------------------------------------- select
@pytest.mark.parametrize("t", ALL_TYPES, ids=ids(ALL_TYPES))
@given(data=st.data())
def test_select(t, data):
    i32 = hl.Int(32)
    a, b, c, d = data.draw(n_and_arrays((t, elements(t)), (t, elements(t)),
                                        (i32, st.integers(-3, 3)), (i32, st.integers(-3, 3))))
    sel = np.where(c < d, a, b)
    multi = np.where(c < d, a, np.where(c == d, b, a))
    mux = np.array([(a[k], b[k], a[k])[min(max(int(c[k]), 0), 2)] for k in range(len(a))], a.dtype)

    def build(p, q, r, s):
        return (hl.select(r < s, p, q), hl.select(r < s, p, r == s, q, p), hl.mux(hl.max(r, 0), [p, q, p]))

    check_both(["select", "select chain", "mux"], ("select", t), [t, t, i32, i32], build, [a, b, c, d],
               [sel, multi, mux])


# ---------------------------------------------------------------- float math
def _math_cases(t):
    f32 = t.bits == 32
    e = 80.0 if f32 else 700.0
    return [
        # name, hl function, model on Python floats, domain (lo, hi)
        ("sqrt", hl.sqrt, math.sqrt, (0.0, 1e30)),
        ("exp", hl.exp, math.exp, (-e, e)),
        ("log", hl.log, math.log, (1e-30, 1e30)),
        ("sin", hl.sin, math.sin, (-100.0, 100.0)),
        ("cos", hl.cos, math.cos, (-100.0, 100.0)),
        ("tan", hl.tan, math.tan, (-1.5, 1.5)),
        ("asin", hl.asin, math.asin, (-1.0, 1.0)),
        ("acos", hl.acos, math.acos, (-1.0, 1.0)),
        ("atan", hl.atan, math.atan, (-1e10, 1e10)),
        ("sinh", hl.sinh, math.sinh, (-e, e)),
        ("cosh", hl.cosh, math.cosh, (-e, e)),
        ("tanh", hl.tanh, math.tanh, (-20.0, 20.0)),
        ("asinh", hl.asinh, math.asinh, (-1e10, 1e10)),
        ("acosh", hl.acosh, math.acosh, (1.0, 1e10)),
        ("atanh", hl.atanh, math.atanh, (-0.99, 0.99)),
        ("erf", hl.erf, math.erf, (-5.0, 5.0)),
        ("floor", hl.floor, math.floor, (-1e10, 1e10)),
        ("ceil", hl.ceil, math.ceil, (-1e10, 1e10)),
        ("round", hl.round, round, (-1e10, 1e10)),  # Python rounds half to even, as Halide
        ("trunc", hl.trunc, math.trunc, (-1e10, 1e10)),
    ]


MATH_ULPS = 4


@pytest.mark.parametrize("name, ulps", [("exp", 1), ("log", 2)])
def test_float32_exp_and_log_are_accurate_and_the_same_vectorized(name, ulps):
    """pyhalide computes exp and log of float32 itself (a range reduction and a polynomial, as
    Halide does: the C library has no vector exp, and 16 calls of expf per vector were 14x slower).
    Against float64 rounded to float32, on a million arguments over the whole range (subnormal
    results and arguments, overflow, zeros, infinities, NaN): within 1 ulp for exp and 2 for log,
    and a vectorized Func computes bit for bit what a scalar one does."""
    rng = np.random.default_rng(11)
    if name == "exp":
        values = np.concatenate([rng.uniform(-110, 95, 1 << 20), np.linspace(-104, 89, 4097),
                                 [0.0, -0.0, 88.72283, 88.7229, -87.33655, -103.97, -103.98, 1e-45, np.inf, -np.inf]])
    else:
        values = np.concatenate([np.exp(rng.uniform(-103.9, 88.7, 1 << 20)), rng.uniform(0.5, 2.0, 4097),
                                 [1.0, 2.0, 0.5, 1e-45, 1.17e-38, 3.4e38, 0.0, -0.0, -1.0, np.inf, -np.inf]])
    values = np.append(values, np.nan).astype(np.float32)
    with np.errstate(all="ignore"):
        want = getattr(np, name)(values.astype(np.float64)).astype(np.float32)
    src = hl.Buffer(values, f"{name}_args")
    results = []
    for lanes in (1, 16):
        f = hl.Func(f"{name}_{lanes}")
        f[x] = getattr(hl, name)(src[x])
        if lanes > 1:
            f.vectorize(x, lanes)
        results.append(np.asarray(f.realize([values.size])))
    assert np.array_equal(results[0].view(np.int32), results[1].view(np.int32))
    got = results[0]
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    distance = np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64))[~nan]
    assert distance.max() <= ulps, (values[~nan][np.argmax(distance)], distance.max())


@pytest.mark.parametrize("t", FLOAT_TYPES, ids=ids(FLOAT_TYPES))
@given(data=st.data())
def test_float_math_unary(t, data):
    cases = _math_cases(t)
    arrays = data.draw(arrays_of([(t, float_elements(t, lo, hi)) for _, _, _, (lo, hi) in cases]))
    dt = t.to_numpy()
    wants = [np.array([float(fn(float(v))) for v in a], np.float64).astype(dt)
             for (_, _, fn, _), a in zip(cases, arrays)]

    def build(*ps):
        return [hf(p) for (_, hf, _, _), p in zip(cases, ps)]

    def compare(label, got, want, msg):
        if label.split()[-1] in ("floor", "ceil", "round", "trunc"):
            return False  # exact
        return ulp_compare(MATH_ULPS)(label, got, want, msg)

    check_both([name for name, _, _, _ in cases], ("math1", t), [t] * len(cases), build, arrays, wants, compare)


@pytest.mark.parametrize("t", FLOAT_TYPES, ids=ids(FLOAT_TYPES))
@given(data=st.data())
def test_float_math_binary(t, data):
    a, b, c, d, e, g = data.draw(n_and_arrays(
        (t, float_elements(t, 1e-3, 100.0)), (t, float_elements(t, -10.0, 10.0)),
        (t, float_elements(t, -100.0, 100.0)), (t, float_elements(t, -100.0, 100.0)),
        (t, float_elements(t, -1e10, 1e10)), (t, float_elements(t, -1e10, 1e10)),
    ))
    dt = t.to_numpy()

    def m(fn, *arrs):
        return np.array([fn(*[float(v) for v in vals]) for vals in zip(*arrs)], np.float64).astype(dt)

    with np.errstate(under="ignore"):  # hypot is sqrt(x * x + y * y) in t, as Halide defines it
        hypot = np.sqrt(e * e + g * g).astype(dt)
    wants = [m(math.pow, a, b), m(math.atan2, c, d), hypot]
    check_both(["pow", "atan2", "hypot"], ("math2", t), [t] * 6,
               lambda p, q, r, s, u, v: (hl.pow(p, q), hl.atan2(r, s), hl.hypot(u, v)),
               [a, b, c, d, e, g], wants, ulp_compare(MATH_ULPS))


@pytest.mark.parametrize("t", INT_TYPES[:3] + INT_TYPES[4:7], ids=ids(INT_TYPES[:3] + INT_TYPES[4:7]))
@given(data=st.data())
def test_math_of_integers_is_float32(t, data):
    lo = 0 if t.is_uint() else -(1 << min(t.bits - 1, 20))
    (a,) = data.draw(n_and_arrays((t, int_elements(t, lo, 1 << min(t.bits - 1, 20)))))
    f32 = hl.Float(32)
    wants = [
        np.array([math.sqrt(abs(int_to_float(int(v), f32))) for v in a], np.float64).astype(np.float32),
        np.array([int_to_float(int(v), f32) for v in a], np.float32) * np.float32(0.5),
    ]
    check_both(["sqrt(|int|)", "int * 0.5"], ("intmath", t), [t],
               lambda p: (hl.sqrt(hl.abs(p)), p * 0.5), [a], wants, ulp_compare(1))


@pytest.mark.parametrize("t", FLOAT_TYPES, ids=ids(FLOAT_TYPES))
@given(data=st.data())
def test_float_predicates(t, data):
    dt = t.to_numpy()
    specials = st.sampled_from([np.nan, np.inf, -np.inf, 0.0, 1.0, -2.0])
    (a,) = data.draw(n_and_arrays((t, st.one_of(specials, float_elements(t)))))
    a = a.astype(dt)
    wants = [np.isnan(a), np.isinf(a), np.isfinite(a)]
    check_both(["is_nan", "is_inf", "is_finite"], ("fpred", t), [t],
               lambda p: (hl.is_nan(p), hl.is_inf(p), hl.is_finite(p)), [a], wants)


# ---------------------------------------------------------------- constant folding
def _fold_values(t):
    if t.is_float():
        big = 1e30 if t.bits == 32 else 1e300
        return [-7.25, -2.5, -0.0, 0.0, 0.1, 0.2, 1.0 / 3.0, 3.0, big]
    vals = [t.min_value(), t.min_value() + 1, -7, -2, -1, 0, 1, 2, 7, t.max_value() - 1, t.max_value()]
    return [v for v in vals if t.can_represent(v)]


_FOLD_OPS = {
    "+": lambda p, q: p + q, "-": lambda p, q: p - q, "*": lambda p, q: p * q,
    "/": lambda p, q: p / q, "%": lambda p, q: p % q, "min": hl.min, "max": hl.max,
    "<": lambda p, q: p < q, "==": lambda p, q: p == q,
}
_FOLD_INT_OPS = {"&": lambda p, q: p & q, "|": lambda p, q: p | q, "^": lambda p, q: p ^ q,
                 "<<": lambda p, q: p << q, ">>": lambda p, q: p >> q}


def _fold_model(t, name, a, b):
    """The value of `a name b` in type t, or None where it is undefined (then the test uses 0)."""
    if t.is_float():
        dt = t.to_numpy().type
        p, q = dt(a), dt(b)
        with np.errstate(all="ignore"):
            r = {"+": lambda: p + q, "-": lambda: p - q, "*": lambda: p * q, "/": lambda: p / q,
                 "%": lambda: p - q * np.floor(p / q), "min": lambda: min(p, q), "max": lambda: max(p, q),
                 "<": lambda: bool(p < q), "==": lambda: bool(p == q)}[name]()
        if isinstance(r, bool):
            return r
        return None if not np.isfinite(r) or name == "%" else float(r)
    shift = b % t.bits
    exact = {"+": a + b, "-": a - b, "*": a * b, "/": ediv(a, b), "%": emod(a, b), "min": min(a, b),
             "max": max(a, b), "<": a < b, "==": a == b, "&": a & b, "|": a | b, "^": a ^ b,
             "<<": a << shift, ">>": a >> shift}[name]
    if isinstance(exact, bool):
        return exact
    if t.is_int() and t.bits >= 32 and not t.can_represent(exact) and name not in ("/",):
        return None  # signed overflow: undefined
    return wrap(exact, t)


@pytest.mark.parametrize("t", ALL_TYPES, ids=ids(ALL_TYPES))
def test_constant_folding(t):
    """Operations on constants, which the compiler folds, give what they give at run time."""
    vals = _fold_values(t)
    pairs = [(a, b) for a in vals for b in vals]
    ops = dict(_FOLD_OPS, **({} if t.is_float() else _FOLD_INT_OPS))
    labels, arms, wants = [], [], []
    for name, op in ops.items():
        arm, want = [], []
        for a, b in pairs:
            if name in ("<<", ">>"):
                b = b % t.bits
            w = _fold_model(t, name, a, b)
            if w is None:
                w = False if name in ("<", "==") else 0
                arm.append(hl.cast(t, 0))
            else:
                arm.append(op(hl.cast(t, a), hl.cast(t, b)))
            want.append(w)
        labels.append(f"const {name}")
        arms.append(arm)
        wants.append(np.array(want, np.bool_ if name in ("<", "==") else t.to_numpy()))
    for dst in ALL_TYPES:
        arm, want = [], []
        for a, _ in pairs:
            ok = dst.is_float() or not t.is_float() or dst.min_value() - 1 < a < dst.max_value() + 1
            if dst.is_float() and dst.bits == 32 and abs(a) > 3e38:
                ok = False
            v = a if ok else 0
            arm.append(hl.cast(dst, hl.cast(t, v)))
            w = cast_model(t, dst)(t.to_numpy().type(v).item())
            want.append(w if dst.is_float() else wrap(w, dst))
        labels.append(f"const cast to {dst}")
        arms.append(arm)
        wants.append(np.array(want, dst.to_numpy()))

    def build():
        return [hl.mux(x, arm) for arm in arms]

    f = hl.Func(f"fold_{t}")
    f[x] = hl.Tuple(build())
    n = len(pairs)
    got = [np.array(g) for g in f.realize([n])]
    ref = reference.realize(f, [n])
    inputs = [np.array([p for p, _ in pairs], dtype=object), np.array([q for _, q in pairs], dtype=object)]
    check([f"compiled {lb}" for lb in labels], got, wants, inputs)
    check([f"reference {lb}" for lb in labels], ref, wants, inputs)


@pytest.mark.parametrize("vector", [False, True])
def test_float_min_max_of_nans_and_signed_zeros_are_halides(vector):
    """As Halide computes them with strict_float (without it, which operand a NaN gives varies with
    the code around): max(a, b) = a > b ? a : b, min(a, b) = a < b ? a : b (a NaN or a tie gives
    b), bit for bit; constant folding agrees."""
    specials = [np.nan, -0.0, 0.0, np.inf, -np.inf, 1.5, -1.5, 1.5]
    pairs = [(p, q) for p in specials for q in specials]
    a = np.array([p for p, _ in pairs], dtype=np.float32)
    b = np.array([q for _, q in pairs], dtype=np.float32)
    want_lo, want_hi = np.where(a < b, a, b), np.where(a > b, a, b)
    x = hl.Var("x")
    f = hl.Func("nan_minmax")
    f[x] = hl.Tuple([hl.min(hl.Buffer(a, name="mm_a")[x], hl.Buffer(b, name="mm_b")[x]),
                     hl.max(hl.Buffer(a, name="mm_a")[x], hl.Buffer(b, name="mm_b")[x])])
    if vector:
        f.vectorize(x, 16)
    lo, hi = (np.asarray(r) for r in f.realize([len(pairs)]))
    assert lo.tobytes() == want_lo.tobytes() and hi.tobytes() == want_hi.tobytes()
    for p, q in pairs[:: 3 if vector else 1]:
        g = hl.Func("folded_minmax")
        g[x] = hl.Tuple([hl.min(hl.f32(p), hl.f32(q)), hl.max(hl.f32(p), hl.f32(q))])
        glo, ghi = (np.asarray(r)[0] for r in g.realize([1]))
        p32, q32 = np.float32(p), np.float32(q)
        assert glo.tobytes() == (p32 if p32 < q32 else q32).tobytes(), (p, q)
        assert ghi.tobytes() == (p32 if p32 > q32 else q32).tobytes(), (p, q)
    real = pytest.importorskip("halide")
    rf = real.Func("nan_minmax_halide")
    ra, rb = real.Buffer(a), real.Buffer(b)
    rf[real.Var("x")] = real.Tuple([real.min(ra[real.Var("x")], rb[real.Var("x")]),
                                    real.max(ra[real.Var("x")], rb[real.Var("x")])])
    if vector:
        rf.vectorize(rf.args()[0], 16)
    strict = real.get_jit_target_from_environment().with_feature(real.TargetFeature.StrictFloat)
    rlo, rhi = (np.asarray(r) for r in rf.realize([len(pairs)], strict))
    assert rlo.tobytes() == lo.tobytes() and rhi.tobytes() == hi.tobytes()


def _exhaustive_pairs(dtype):
    """Every pair of values of an 8-bit type, as two flat arrays."""
    values = np.arange(np.iinfo(dtype).min, np.iinfo(dtype).max + 1)
    a, b = np.meshgrid(values, values)
    return a.ravel().astype(dtype), b.ravel().astype(dtype)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_widening_saturating_and_halving_intrinsics_on_every_8_bit_pair(dtype):
    """Halide's definitions, computed exactly in int64 by numpy: widening keeps every bit,
    saturating clamps, halving floors (halving_sub wraps back to the type)."""
    a, b = _exhaustive_pairs(dtype)
    wa, wb = a.astype(np.int64), b.astype(np.int64)
    info = np.iinfo(dtype)
    wide = np.dtype(dtype).str.replace("1", "2")
    signed_wide = np.int16
    want = {
        "widening_add": (wa + wb).astype(wide), "widening_sub": (wa - wb).astype(signed_wide),
        "widening_mul": (wa * wb).astype(wide),
        "saturating_add": np.clip(wa + wb, info.min, info.max).astype(dtype),
        "saturating_sub": np.clip(wa - wb, info.min, info.max).astype(dtype),
        "halving_add": ((wa + wb) >> 1).astype(dtype), "rounding_halving_add": ((wa + wb + 1) >> 1).astype(dtype),
        "halving_sub": ((wa - wb) >> 1).astype(dtype),
    }
    ba, bb = hl.Buffer(a, "pair_a"), hl.Buffer(b, "pair_b")
    for name, expected in want.items():
        f = hl.Func(f"{name}_{np.dtype(dtype).name}")
        f[x] = getattr(hl, name)(ba[x], bb[x])
        f.vectorize(x, 16)
        got = np.asarray(f.realize([a.size]))
        assert got.dtype == expected.dtype and np.array_equal(got, expected), name


def test_rounding_to_zero_division_fract_evaluate_vars_funcs():
    a, b = _exhaustive_pairs(np.int8)
    keep = b != 0
    a, b = a[keep], b[keep]
    q = hl.Func("div_rtz")
    q[x] = hl.Tuple([hl.div_round_to_zero(hl.Buffer(a, "rtz_a")[x], hl.Buffer(b, "rtz_b")[x]),
                     hl.mod_round_to_zero(hl.Buffer(a, "rtz_a")[x], hl.Buffer(b, "rtz_b")[x])])
    got_q, got_r = (np.asarray(v) for v in q.realize([a.size]))
    wa, wb = a.astype(np.int64), b.astype(np.int64)
    want_q = np.trunc(wa / wb).astype(np.int64)
    assert np.array_equal(got_q, want_q.astype(np.int8)) and np.array_equal(got_r, (wa - want_q * wb).astype(np.int8))
    assert [hl.evaluate(hl.fract(hl.f32(v))) for v in (2.75, -2.75, 3.0)] == [0.75, -0.75, 0.0]
    assert hl.evaluate(hl.Expr(3) * 4) == 12 and hl.evaluate(hl.f32(1.5) * 2) == 3.0
    with pytest.raises(hl.HalideError, match=r"div_round_to_zero takes integers, got float32"):
        hl.div_round_to_zero(hl.f32(7), hl.f32(2))
    with pytest.raises(hl.HalideError, match=r"widening_add of int64: there is no integer type twice as wide"):
        hl.widening_add(hl.i64(1), hl.i64(2))
    u, v = hl.vars("u v")
    f, g = hl.funcs("vf vg")
    assert (u.name(), v.name(), f.name(), g.name()) == ("u", "v", "vf", "vg")


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int32])
def test_integer_intrinsics_match_the_real_halide(dtype):
    real = pytest.importorskip("halide", reason="the real Halide (pip install halide) is the second oracle")
    rng = np.random.default_rng(5)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, 4096, endpoint=True).astype(dtype)
    b = rng.integers(info.min, info.max, 4096, endpoint=True).astype(dtype)
    b[b == 0] = 1
    names = ["widening_add", "widening_sub", "widening_mul", "saturating_add", "saturating_sub", "halving_add",
             "halving_sub", "rounding_halving_add", "div_round_to_zero", "mod_round_to_zero"]
    for name in names:
        results = []
        for lib in (hl, real):
            v = lib.Var("x")
            f = lib.Func(f"{name}_{np.dtype(dtype).name}")
            f[v] = getattr(lib, name)(lib.Buffer(a, "ia")[v], lib.Buffer(b, "ib")[v])
            results.append(np.asarray(f.realize([a.size])))
        assert results[0].dtype == results[1].dtype and np.array_equal(*results), name


def test_narrow_unsigned_arithmetic_that_wraps_inside_a_constant_loop():
    """uint16 `v % 16 - 10` wraps below 10; the loop simplifier once took its range as [-10, 5]
    (no wrap), settled max(..., 92) to 92 inside a reduction over a constant RDom and summed
    the wrong values (found by the autoscheduler's training run: 971015 of 979412 values wrong)."""
    img = (np.arange(64, dtype=np.uint16) * 7).reshape(8, 8)
    x = hl.Var("x")
    inp = hl.Buffer(img, "wrap_in")
    r = hl.RDom([(0, 8)], name="r")
    out = hl.Func("wrap_out")
    out[x] = 0
    out[x] += hl.i32(hl.max(inp[x, r.x] % hl.u16(16) - hl.u16(10), hl.u16(92)))
    cell = np.maximum((img % 16).astype(np.uint16) - np.uint16(10), np.uint16(92))
    np.testing.assert_array_equal(np.asarray(out.realize([8])), cell.astype(np.int64).sum(axis=0))


def test_float_sums_in_the_programs_order_are_halides_under_strict_float():
    """Tutorial lesson 8's average of four sines differs from Halide 21's by an ulp in a few
    pixels: Halide lets LLVM reassociate float arithmetic unless the target has strict_float
    (its lowered Stmt adds in the program's order). pyhalide adds in the program's order, which
    is Halide's strict_float result bit for bit."""
    real = pytest.importorskip("halide", reason="the real Halide (pip install halide) is the second oracle")
    results = []
    for lib, target in ((hl, None), (real, real.get_jit_target_from_environment().with_feature(
            real.TargetFeature.StrictFloat))):
        x, y = lib.Var("x"), lib.Var("y")
        p, c = lib.Func("strict_sin"), lib.Func("strict_avg")
        p[x, y] = lib.sin(x * y)
        c[x, y] = (p[x, y] + p[x, y + 1] + p[x + 1, y] + p[x + 1, y + 1]) / 4
        results.append(np.asarray(c.realize([16, 16]) if target is None else c.realize([16, 16], target)))
    xs = np.arange(17, dtype=np.int32)
    s = np.sin((xs[:, None] * xs[None, :]).astype(np.float32))  # s[y, x] = sin(x * y), float32
    want = (((s[:-1, :-1] + s[1:, :-1]) + s[:-1, 1:]) + s[1:, 1:]) / np.float32(4)
    assert np.array_equal(results[0], results[1])
    np.testing.assert_allclose(results[0], want, rtol=0, atol=1e-6)  # numpy's sin may differ by an ulp


def _shift_ref(v: int, s: int, bits: int, signed: bool, left: bool) -> int:
    """Python's exact shift of v, Halide's way (a negative amount shifts the other way), wrapped
    to `bits`."""
    if s < 0:
        s, left = -s, not left
    r = v << s if left else v >> s
    r &= (1 << bits) - 1
    return r - (1 << bits) if signed and r >= 1 << (bits - 1) else r


def _round_right_ref(v: int, s: int) -> int:
    return (v + (1 << (s - 1))) >> s  # exact in Python's integers


_SHIFT_TYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32]


@pytest.mark.parametrize("dtype", _SHIFT_TYPES)
def test_shift_and_bit_intrinsics_against_exact_integers(dtype):
    """Halide's rounding, widening and multiply-shift intrinsics, extract_bits and concat_bits,
    against Python's exact integers (shifts by less than the bits; a 32-bit shift by 32 is
    undefined in Halide)."""
    rng = np.random.default_rng(11)
    info = np.iinfo(dtype)
    bits, signed, n = info.bits, info.min < 0, 300
    a = rng.integers(info.min, info.max, n, endpoint=True).astype(dtype)
    b = rng.integers(info.min, info.max, n, endpoint=True).astype(dtype)
    sdt = np.dtype(f"int{bits}")
    s = rng.integers(-(bits - 1), bits - 1, n, endpoint=True).astype(sdt)
    q = rng.integers(0, 2 * bits - 1, n).astype(np.dtype(f"uint{bits}"))
    lsb = rng.integers(0, bits, n).astype(np.int32)
    x = hl.Var("x")
    A, B, S, Q, L = (hl.Buffer(v, nm) for v, nm in ((a, "sa"), (b, "sb"), (s, "ss"), (q, "sq"), (lsb, "sl")))

    def got(e):
        f = hl.Func("shift_case")
        f[x] = e
        return [int(v) for v in np.asarray(f.realize([n]))]

    av, bv, sv, qv, lv = ([int(v) for v in arr] for arr in (a, b, s, q, lsb))
    wide_bits = 2 * bits

    def narrow(v, k=bits, sgn=signed):
        return _shift_ref(v, 0, k, sgn, True)

    def saturate(v):
        return min(max(v, int(info.min)), int(info.max))

    assert got(hl.widening_shift_left(A[x], S[x])) == [_shift_ref(v, t, wide_bits, signed, True)
                                                       for v, t in zip(av, sv)]
    assert got(hl.widening_shift_right(A[x], S[x])) == [_shift_ref(v, t, wide_bits, signed, False)
                                                        for v, t in zip(av, sv)]
    assert got(hl.rounding_shift_right(A[x], S[x])) == [
        narrow(_round_right_ref(v, t)) if t > 0 else _shift_ref(v, -t, bits, signed, True) for v, t in zip(av, sv)]
    assert got(hl.rounding_shift_left(A[x], S[x])) == [
        _shift_ref(v, t, bits, signed, True) if t >= 0 else narrow(_round_right_ref(v, -t)) for v, t in zip(av, sv)]
    assert got(hl.mul_shift_right(A[x], B[x], Q[x])) == [saturate((v * w) >> t) for v, w, t in zip(av, bv, qv)]
    assert got(hl.rounding_mul_shift_right(A[x], B[x], Q[x])) == [
        saturate(_round_right_ref(v * w, t) if t else v * w) for v, w, t in zip(av, bv, qv)]
    unsigned = [v & ((1 << bits) - 1) for v in av]
    assert got(hl.extract_bits(hl.UInt(8), A[x], L[x])) == [(u >> t) & 0xFF for u, t in zip(unsigned, lv)]
    assert got(hl.extract_bits(hl.Int(8), A[x], L[x])) == [narrow((u >> t) & 0xFF, 8, True)
                                                           for u, t in zip(unsigned, lv)]
    if bits <= 16:
        ub = [v & ((1 << bits) - 1) for v in bv]
        assert got(hl.concat_bits([A[x], B[x]])) == [narrow(u | (w << bits), wide_bits, signed)
                                                     for u, w in zip(unsigned, ub)]
        wide = np.dtype(f"{'int' if signed else 'uint'}{wide_bits}")
        wv = rng.integers(np.iinfo(wide).min, np.iinfo(wide).max, n, endpoint=True).astype(wide)
        W = hl.Buffer(wv, "sw")
        for name, op in (("add", lambda p, r: p + r), ("sub", lambda p, r: p - r), ("mul", lambda p, r: p * r)):
            want = [narrow(op(int(p), r), wide_bits, signed) for p, r in zip(wv, av)]
            assert got(getattr(hl, f"widen_right_{name}")(W[x], A[x])) == want, name


@pytest.mark.parametrize("dtype", _SHIFT_TYPES)
def test_shift_and_bit_intrinsics_match_the_real_halide(dtype):
    real = pytest.importorskip("halide", reason="the real Halide (pip install halide) is the second oracle")
    rng = np.random.default_rng(12)
    info = np.iinfo(dtype)
    bits, n = info.bits, 400
    top = bits if bits < 32 else bits - 1  # 8- and 16-bit shifts by their width are defined too
    a = rng.integers(info.min, info.max, n, endpoint=True).astype(dtype)
    b = rng.integers(info.min, info.max, n, endpoint=True).astype(dtype)
    s = rng.integers(-top, top, n, endpoint=True).astype(np.dtype(f"int{bits}"))
    u = rng.integers(0, top, n, endpoint=True).astype(np.dtype(f"uint{bits}"))
    q = rng.integers(0, 2 * bits - 1, n).astype(np.dtype(f"uint{bits}"))
    cases = [(name, (a, amount)) for name in ("widening_shift_left", "widening_shift_right", "rounding_shift_left",
                                              "rounding_shift_right") for amount in (s, u)]
    cases += [(name, (a, b, q)) for name in ("mul_shift_right", "rounding_mul_shift_right")]
    for name, arrays in cases:
        results = []
        for lib in (hl, real):
            x = lib.Var("x")
            f = lib.Func("real_" + name)
            f[x] = getattr(lib, name)(*[lib.Buffer(v, f"r{k}")[x] for k, v in enumerate(arrays)])
            results.append(np.asarray(f.realize([n])))
        assert results[0].dtype == results[1].dtype and np.array_equal(*results), (name, arrays[-1].dtype)


def test_value_preserving_hints_are_their_values():
    x = hl.Var("x")
    f = hl.Func("hinted")
    f[x] = (hl.strict_float(hl.f32(x) * 0.5) + hl.f32(hl.likely_if_innermost(x))
            + hl.f32(hl.unsafe_promise_clamped(x * 2, 0, 14)))
    assert list(np.asarray(f.realize([8]))) == [v * 0.5 + v + 2 * v for v in range(8)]


def test_an_if_inside_an_if_of_the_same_condition_keeps_one_branch_unless_its_variables_are_bound_again():
    """The simplifier knows an if's condition inside its branches (a specialization's loop nest
    inside another of the same condition keeps one path), but not past a loop or let that binds a
    variable of it again, nor for a condition that reads memory the branch could write."""
    from pyhalide import ir
    from pyhalide.simplify import simplify
    from pyhalide.types import Int

    x, zero = ir.Variable("x", Int(32)), ir.IntImm(Int(32), 0)
    plus, minus = ir.Store("buf", x, zero), ir.Store("buf", ir.Sub(zero, x), zero)

    def inner(c):
        return ir.IfThenElse(c, plus, minus)

    c = ir.GT(x, zero)
    pruned = simplify(ir.IfThenElse(c, inner(c), inner(c)))
    assert pruned.then_case == plus and pruned.else_case == minus, pruned
    for rebinding in (ir.For("x", ir.IntImm(Int(32), -3), ir.IntImm(Int(32), 5), ir.SERIAL, inner(c)),
                      ir.LetStmt("x", ir.Load(Int(32), "buf", zero), inner(c))):
        kept = simplify(ir.IfThenElse(c, rebinding))
        assert isinstance(kept.then_case.body, ir.IfThenElse), kept
    reads = ir.GT(ir.Load(Int(32), "buf", zero), zero)
    kept = simplify(ir.IfThenElse(reads, ir.Block((ir.Store("buf", ir.IntImm(Int(32), -1), zero), inner(reads)))))
    assert isinstance(kept.then_case.stmts[1], ir.IfThenElse), kept
