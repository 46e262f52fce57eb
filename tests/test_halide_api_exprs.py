"""Halide's Expr-level Python API: Var identity, logical_not, select and mux over Exprs and Tuples,
how Python literals become constants (float32 with a warning, integers in the Expr's type),
division's types, evaluate / evaluate_may_gpu, and the random-number hash. Checked against numpy
and, where it is installed, against the real Halide (the same assertions run on both)."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

import pyhalide as hl
from pyhalide import ir
from pyhalide.expr import to_ir, wrap
from pyhalide.operators import lower_random, next_random_tag, random_float, random_int, random_uint

LIBS = ["pyhalide", "halide"]


def _lib(name: str):
    """pyhalide, or the real Halide (skipping where it is not installed)."""
    if name == "pyhalide":
        return hl
    return pytest.importorskip("halide", reason="the real Halide (pip install halide) is the oracle")


def _ediv(a: int, b: int) -> int:
    """Halide's integer division: the remainder is never negative."""
    q = a // b
    return q + 1 if a - q * b < 0 else q


# ---------------------------------------------------------------- Var
@pytest.mark.parametrize("lib", LIBS)
def test_vars_are_the_same_when_their_names_are(lib):
    h = _lib(lib)
    a = h.Var("a")
    assert a.same_as(h.Var("a")) and not a.same_as(h.Var("b")) and not h.Var().same_as(h.Var())
    assert h.Var.implicit(3).same_as(h._3) and h.Var("_3").same_as(h._3)
    assert [h.Var(n).implicit_index() for n in ("_0", "_12", "_", "_x", "k")] == [0, 12, 0, -1, -1]
    assert [h.Var(n).is_implicit() for n in ("_7", "_", "_x", "x_1")] == [True, True, False, False]
    assert h._.is_placeholder() and h.Var("_").is_placeholder() and not h._0.is_placeholder()
    assert h._.name() == "_" and repr(h._) == "<halide.Var '_'>" and h.Var.is_placeholder(h._)
    assert h.Var.outermost().name() == "__outermost" and not h.Var.outermost().is_implicit()
    with pytest.raises(TypeError):
        a.same_as(h.Expr(a))


def test_a_var_named_underscore_is_the_placeholder_in_a_call():
    x, y = hl.Var("x"), hl.Var("y")
    f = hl.Func("ph_f")
    f[x, y] = x + 10 * y
    g = hl.Func("ph_g")
    g[hl._] = f[hl.Var("_")] * 3
    np.testing.assert_array_equal(np.asarray(g.realize([4, 2])), (np.arange(4) + 10 * np.arange(2)[:, None]) * 3)


@pytest.mark.parametrize("lib", LIBS)
def test_an_undefined_expr_prints_as_halides(lib):
    h = _lib(lib)
    assert repr(h.Expr()) == str(h.Expr()) == "<undefined halide.Expr>"


# ---------------------------------------------------------------- logical_not
def test_logical_not_of_comparisons_vars_and_func_calls():
    x = hl.Var("x")
    f = hl.Func("ln_f")
    f[x] = x % 3 == 0
    g = hl.Func("ln_g")
    g[x] = (f[x].logical_not(), hl.logical_not(x > 4), (x < 2).logical_not(), hl.logical_not(f[x]))
    xs = np.arange(9)
    outs = [np.asarray(b) for b in g.realize([9])]
    for got, want in zip(outs, [xs % 3 != 0, xs <= 4, xs >= 2, xs % 3 != 0]):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("lib", LIBS)
def test_logical_not_refuses_a_non_boolean(lib):
    h = _lib(lib)
    x = h.Var("x")
    for make in (lambda: x.logical_not(), lambda: h.logical_not(h.f32(x))):
        with pytest.raises(h.HalideError, match="argument of Not is not a bool"):
            make()


# ---------------------------------------------------------------- select of Exprs
@pytest.mark.parametrize("lib", LIBS)
def test_select_does_not_promote_its_values(lib):
    h = _lib(lib)
    x = h.Var("x")
    mismatch = r"Error: The second and third arguments to a select do not have a matching type:\n  "
    with pytest.raises(h.HalideError, match=mismatch + r".* has type float32\n  x has type int32\n"):
        h.select(x > 0, h.f32(x), x)
    with pytest.raises(h.HalideError, match=mismatch + r"x has type int32\n  .* has type uint8"):
        h.select(x > 0, x, h.u8(3))  # an unsigned constant keeps its type
    with pytest.raises(h.HalideError, match=mismatch):
        h.select(x > 0, 1.5, x)  # a float literal is a float32
    with pytest.raises(h.HalideError, match=r"The first argument to a select must be a boolean:\n  x has type int32"):
        h.select(x, 1, 2)
    with pytest.raises(ValueError, match="at least 3 arguments"):
        h.select(x > 0, x)
    with pytest.raises(ValueError, match="odd number of arguments"):
        h.select(x > 0, x, x < 2, x)
    # a signed integer constant takes the other value's type, wrapping as a cast does
    assert h.select(x > 0, h.u8(x), 300).type() == h.UInt(8)
    assert h.select(x > 0, h.i16(7), h.u16(x)).type() == h.UInt(16)
    assert h.select(x > 0, 1, 2.5).type() == h.Float(32)


@pytest.mark.parametrize("lib", LIBS)
def test_select_values_and_the_first_true_condition_wins(lib):
    h = _lib(lib)
    x = h.Var("x")
    f = h.Func("sel_f")
    f[x] = h.select(x < 2, x * 7, x == 4, 300 + x, x == 4, -5, h.u8(x) + 250 < 5, 1, -x)
    got = np.asarray(f.realize([9]))
    xs = np.arange(9)
    want = np.where(xs < 2, xs * 7, np.where(xs == 4, 300 + xs, np.where((xs + 250) % 256 < 5, 1, -xs)))
    np.testing.assert_array_equal(got, want)
    g = h.Func("sel_wrap")
    g[x] = h.select(x > 1, h.u8(x), 300)  # 300 becomes (uint8)44
    np.testing.assert_array_equal(np.asarray(g.realize([4])), [44, 44, 2, 3])


# ---------------------------------------------------------------- select of Tuples
def test_select_of_tuples_by_one_condition_or_a_tuple_of_them():
    x, y = hl.Var("x"), hl.Var("y")
    xs, ys = np.meshgrid(np.arange(6), np.arange(5))  # [y, x], as the realized arrays are laid out
    f = hl.Func("ts_one")
    f[x, y] = hl.select(x < y, (x * 2, y), x == y, [x, y * 3], (0, -x))
    a, b = (np.asarray(buf) for buf in f.realize([6, 5]))
    np.testing.assert_array_equal(a, np.where(xs < ys, xs * 2, np.where(xs == ys, xs, 0)))
    np.testing.assert_array_equal(b, np.where(xs < ys, ys, np.where(xs == ys, ys * 3, -xs)))
    g = hl.Func("ts_each")
    g[x, y] = hl.select((x < 3, y > 2), (x, y), (x > 4, y > 3), (100, 200), (-1, -2))
    a, b = (np.asarray(buf) for buf in g.realize([6, 5]))
    np.testing.assert_array_equal(a, np.where(xs < 3, xs, np.where(xs > 4, 100, -1)))
    np.testing.assert_array_equal(b, np.where(ys > 2, ys, np.where(ys > 3, 200, -2)))
    t = hl.select(x > 0, (x, y), (y, x))
    assert isinstance(t, hl.Tuple) and len(t) == 2 and all(isinstance(e, hl.Expr) for e in t)


@pytest.mark.parametrize("lib", LIBS)
def test_select_of_tuples_refuses_conditions_of_mixed_kinds(lib):
    h = _lib(lib)
    x, y = h.Var("x"), h.Var("y")
    for args in [((x < 1, y < 1), (x, y), x + y < 9, (y, x), (x, x)), (x < 1, (x, y), (x < 2, y < 2), (y, x), (x, x))]:
        with pytest.raises(h.HalideError, match=r"select\(\) on Tuples may not mix Expr and Tuple for the "
                                                r"condition elements\."):
            h.select(*args)


def test_select_of_tuples_refuses_mixed_kinds_and_sizes():
    x, y = hl.Var("x"), hl.Var("y")
    with pytest.raises(hl.HalideError, match=r"select\(\): Expected Expr but got tuple: \(1, 2\)"):
        hl.select(x > 0, x, (1, 2))
    with pytest.raises(hl.HalideError, match=r"select\(\) on Tuples requires all Tuples to have identical sizes\."):
        hl.select(x > 0, (x, y, 1), (x, y))
    with pytest.raises(hl.HalideError, match=r"select\(\) on Tuples requires all Tuples to have identical sizes\."):
        hl.select((x > 0, y > 0, x > y), (x, y), (y, x))


def test_select_takes_a_call_of_a_tuple_valued_func_as_a_tuple():
    """An argmax as an update: the running (index, value) is the select's false value."""
    vals = hl.Buffer(np.array([3.0, 9.5, 2.0, 9.5, -1.0], np.float32))
    r = hl.RDom([(0, 5)])
    best = hl.Func("ts_best")
    best[()] = (0, hl.f32(-1e30))
    with pytest.raises(hl.HalideError, match="do not have a matching type"):
        hl.select(vals[r] > best[()][1], (vals[r], r), best[()])  # the pair the wrong way round
    best[()] = hl.select(vals[r] > best[()][1], (r, vals[r]), best[()])
    idx, val = best.realize([])
    assert (idx[()], val[()]) == (1, 9.5)  # the first maximum


# ---------------------------------------------------------------- mux
def test_mux_picks_by_index_and_the_last_value_out_of_range():
    x, c = hl.Var("x"), hl.Var("c")
    f = hl.Func("mx_list")
    f[x] = hl.mux(x - 2, [10, 20, x * 100])
    np.testing.assert_array_equal(np.asarray(f.realize([6])), [0, 100, 10, 20, 400, 500])
    g = hl.Func("mx_tuple_src")
    g[x] = (7, 8, x + 1)
    h = hl.Func("mx_of_tuple")
    h[x, c] = hl.mux(c, g[x])  # the elements of a Tuple-valued Func's call
    np.testing.assert_array_equal(np.asarray(h.realize([3, 4])), [[7, 7, 7], [8, 8, 8], [1, 2, 3], [1, 2, 3]])
    k = hl.Func("mx_tuples")
    k[x] = hl.mux(x % 2, [(x, 1), (2, x * 3)])  # a list of Tuples gives a Tuple
    a, b = (np.asarray(buf) for buf in k.realize([4]))
    np.testing.assert_array_equal(a, [0, 2, 2, 2])
    np.testing.assert_array_equal(b, [1, 3, 1, 9])


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("schedule", ["none", "vectorize", "unroll"])
def test_a_long_mux_picks_as_a_short_one(lib, schedule):
    """A mux of many values (pyhalide's is a balanced tree of selects, not a chain) picks values[i],
    and the last value where i is out of range, below or above, in vector and unrolled code."""
    h = _lib(lib)
    x = h.Var("x")
    f = h.Func("long_mux")
    n = 21
    f[x] = h.mux(x - 5, [x * 1000 + k for k in range(n)])
    if schedule == "vectorize":
        f.vectorize(x, 8)
    elif schedule == "unroll":
        f.bound(x, 0, 32).unroll(x)
    idx = np.arange(32) - 5
    expected = np.arange(32) * 1000 + np.where((idx >= 0) & (idx < n), idx, n - 1)
    np.testing.assert_array_equal(np.asarray(f.realize([32])), expected)


@pytest.mark.parametrize("lib", LIBS)
def test_mux_values_must_share_a_type(lib):
    h = _lib(lib)
    x = h.Var("x")
    with pytest.raises(h.HalideError, match=r"mux\(\) requires all the values to have the same type\."):
        h.mux(x, [h.u8(x), 3])
    with pytest.raises(h.HalideError, match=r"mux\(\) requires a non-empty vector of values"):
        h.mux(x, [])
    assert h.mux(x, [h.f32(x)]).type() == h.Float(32)


# ---------------------------------------------------------------- Python literals
def test_a_python_float_is_a_float32_constant_with_a_warning_where_that_rounds():
    x = hl.Var("x")
    with pytest.warns(RuntimeWarning, match=r"The floating-point value 0\.10000000000000001 will be interpreted as "
                      r"a float32 by Halide and lose precision; add an explicit `f32\(\)` or `f64\(\)`` cast") as seen:
        e = x + 0.1
    assert seen[0].filename == __file__  # reported at the user's line, as Halide's bindings report it
    assert e.type() == hl.Float(32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for exact in (lambda: x + 0.75, lambda: x + hl.f64(0.1), lambda: hl.f32(0.1), lambda: x * float("inf"),
                      lambda: hl.Expr(-2.5), lambda: hl.f64(x) - 2.0**-30):
            exact()
    with pytest.warns(RuntimeWarning, match=r"value 1\.10000000000000009 will be"):
        hl.select(x > 0, 1.1, 2.0)
    with pytest.warns(RuntimeWarning):
        v = hl.evaluate(hl.f64(1) + 0.1)  # the literal keeps its float32 value in a float64 sum
    assert v == 1 + float(np.float32(0.1)) != 1.1
    assert hl.evaluate(hl.f64(1) + hl.f64(0.1)) == 1.1


def test_float_literals_give_the_real_halides_values():
    real = _lib("halide")

    def values(lib):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            p = lib.Param(lib.Float(64), "lit_p", 3.0)
            return lib.evaluate((p * 0.3, p + 1e-9, lib.max(p, 7.7), lib.f32(p) / 3.3))

    assert values(hl) == values(real)


@pytest.mark.parametrize("lib", LIBS)
def test_integer_literals_take_the_exprs_type_or_are_refused(lib):
    h = _lib(lib)
    x = h.Var("x")
    refused = [
        (lambda: h.u8(x) + 300, r"Integer constant 300 will be implicitly coerced to type uint8, "
                                r"which changes its value to \(uint8\)44\."),
        (lambda: h.u8(x) < -1, r"Integer constant -1 .* type uint8, which changes its value to \(uint8\)255\."),
        (lambda: h.f32(x) * 16777217, r"Integer constant 16777217 .* type float32, which changes its value to "
                                      r"16777216\.000000f\."),
        (lambda: (x > 0) + 2, r"Integer constant 2 .* type uint1, which changes its value to \(uint1\)0\."),
    ]
    for make, message in refused:
        with pytest.raises(h.HalideError, match=message):
            make()
    assert (h.u8(x) + 255).type() == h.UInt(8) and (h.f32(x) + 16777216).type() == h.Float(32)
    assert (x + 2**40).type() == h.Int(64) and (h.u8(x) * 2**40).type() == h.Int(64)  # past int32: an Int(64)


# ---------------------------------------------------------------- division and evaluate
def test_division_types_and_values_follow_halides_rules():
    f32, f64 = hl.Param(hl.Float(32), "dv_f32", -7.5), hl.Param(hl.Float(64), "dv_f64", 2.0)
    i16, i32 = hl.Param(hl.Int(16), "dv_i16", -7), hl.Param(hl.Int(32), "dv_i32", 2)
    u16, u32 = hl.Param(hl.UInt(16), "dv_u16", 9), hl.Param(hl.UInt(32), "dv_u32", 4)
    cases = [
        (f32 / f64, hl.Float(64), -3.75), (f32 // f64, hl.Float(64), -4.0),
        (i16 / i32, hl.Int(32), _ediv(-7, 2)), (i16 // i32, hl.Int(32), _ediv(-7, 2)),
        (i32 / i16, hl.Int(32), _ediv(2, -7)), (i16 % i32, hl.Int(32), 1),
        (u16 / u32, hl.UInt(32), 2), (u16 // u32, hl.UInt(32), 2),
        (u16 / i32, hl.Int(32), 4), (i16 // u16, hl.Int(16), _ediv(-7, 9)),  # int with uint: int, the wider bits
        (u16 / f32, hl.Float(32), np.float32(9) / np.float32(-7.5)), (u16 // f32, hl.Float(32), -2.0),
        (i16 / f64, hl.Float(64), -3.5), (i16 // f64, hl.Float(64), -4.0),
    ]
    for e, t, _ in cases:
        assert e.type() == t, (e, t)
    got = hl.evaluate(tuple(e for e, _, _ in cases))
    assert list(got) == [want for _, _, want in cases]
    assert hl.evaluate([hl.Expr(3), 2.5]) == (3, 2.5) and hl.evaluate(i32) == 2
    with pytest.raises(ValueError, match="Expected an Expr or tuple-of-Expr"):
        hl.evaluate(())


@pytest.mark.parametrize("lib", LIBS)
def test_pow_of_a_constant_integer_multiplies_and_the_first_argument_picks_the_float_type(lib):
    """Halide's pow: x ** 2 of an int32 is x * x, an int32 (1 / (x * x) for x ** -2), of a uint8
    a uint8 that wraps; a non-constant or float power is pow in Float(64) or Float(16) where the
    first argument has that type, else in Float(32). atan2 follows the same rule; hypot is
    sqrt(x * x + y * y) in the arguments' own arithmetic."""
    h = _lib(lib)
    i, u = h.Param(h.Int(32), "pw_i", -3), h.Param(h.UInt(8), "pw_u", 20)
    f, d = h.Param(h.Float(32), "pw_f", 1.5), h.Param(h.Float(64), "pw_d", 2.0)
    cases = [
        (i ** 2, h.Int(32), 9), (i ** 3, h.Int(32), -27), (i ** 0, h.Int(32), 1), (i ** -2, h.Int(32), 0),
        (u ** 2, h.UInt(8), 400 % 256), (h.pow(i, h.i64(5)), h.Int(32), -243), (h.fast_pow(i, 2), h.Int(32), 9),
        (2 ** i, h.Float(32), np.float32(0.125)), (i ** 0.5, h.Float(32), None),
        (h.pow(f, d), h.Float(32), np.float32(2.25)), (h.pow(d, f), h.Float(64), 2.0 ** 1.5),
        (h.pow(i, h.u8(2)), h.Float(32), np.float32(9)), (d ** -2, h.Float(64), 0.25),
        (h.atan2(i, d), h.Float(32), None), (h.atan2(d, i), h.Float(64), None),
        (h.hypot(i, 4), h.Float(32), np.float32(5)), (h.hypot(f, d), h.Float(64), np.sqrt(2.25 + 4.0)),
    ]
    for e, t, _ in cases:
        assert e.type() == t, (e, t)
    got = h.evaluate(tuple(e for e, _, _ in cases))
    for (e, _, want), value in zip(cases, got):
        if want is not None:
            assert value == want, (e, value, want)
    assert np.isnan(got[8])  # (-3) ** 0.5
    assert got[13] == pytest.approx(np.arctan2(-3.0, 2.0), rel=1e-6) and got[14] == np.arctan2(2.0, -3.0)


_WITH_NUMBERS = [
    ("min", lambda h, a: h.min(a, 3)), ("max", lambda h, a: h.max(a, 300, 2)), ("absd", lambda h, a: h.absd(a, 7)),
    ("saturating_add", lambda h, a: h.saturating_add(a, 120)), ("halving_sub", lambda h, a: h.halving_sub(a, 9)),
    ("rounding_halving_add", lambda h, a: h.rounding_halving_add(a, 4)),
    ("widening_add", lambda h, a: h.widening_add(a, 5)), ("widening_mul", lambda h, a: h.widening_mul(a, 100)),
    ("rounding_shift_right", lambda h, a: h.rounding_shift_right(a, 2)),
    ("rounding_shift_right by -2", lambda h, a: h.rounding_shift_right(a, -2)),
    ("rounding_shift_left", lambda h, a: h.rounding_shift_left(a, 1)),
    ("widening_shift_left", lambda h, a: h.widening_shift_left(a, 3)),
    ("widening_shift_left by an int32", lambda h, a: h.widening_shift_left(a, h.cast(h.Int(32), a) % 4)),
    ("min of a float", lambda h, a: h.min(a, 2.5)),
]


@pytest.mark.parametrize("code,bits", [("UInt", 8), ("Int", 8), ("Int", 16), ("UInt", 32)])
def test_functions_take_a_python_number_as_halides_bindings_do(code, bits):
    """min, max, absd and the integer intrinsics take a Python int as an Int(32) Expr (so
    min(uint8, 3) is an int32, widening_add(int8, 5) an int64), the rounding shifts as a shift
    of the first argument's bits: the same types and values as the real Halide."""
    halide = _lib("halide")
    results = {}
    for lib in (hl, halide):
        a = lib.Param(getattr(lib, code)(bits), "num_a", 200 if code == "UInt" else -77)
        exprs = [build(lib, a) for _, build in _WITH_NUMBERS]
        results[lib] = ([str(e.type()) for e in exprs], list(lib.evaluate(tuple(exprs))))
    for k, (name, _) in enumerate(_WITH_NUMBERS):
        assert results[hl][0][k] == results[halide][0][k], name
        assert results[hl][1][k] == results[halide][1][k], name


def test_evaluate_may_gpu_runs_on_the_cpu_without_a_gpu_target(monkeypatch):
    monkeypatch.delenv("HL_JIT_TARGET", raising=False)
    p = hl.Param(hl.Int(32), "mg_p", -9)
    exprs = (p / 4, p % 4, hl.f32(p) // 4, hl.u8(p))
    assert hl.evaluate_may_gpu(exprs) == hl.evaluate(exprs) == (-3, 3, -3.0, 247)
    assert hl.evaluate_may_gpu(p * 2) == -18


def test_evaluate_may_gpu_runs_one_gpu_thread_for_a_gpu_target(monkeypatch):
    """With a CUDA JIT target the Func is scheduled gpu_single_thread (run here on the serial device)."""
    monkeypatch.setenv("HL_JIT_TARGET", "host-cuda")
    monkeypatch.setenv("PYHALIDE_CUDA_DEVICE", "serial")
    scheduled = []
    original = hl.Func.gpu_single_thread

    def spy(self, *args, **kwargs):
        scheduled.append(self.name())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(hl.Func, "gpu_single_thread", spy)
    p = hl.Param(hl.Int(16), "gt_p", -7)
    assert hl.evaluate_may_gpu((p / 2, p // 2, hl.f32(p) / 2)) == (-4, -4, -3.5)
    assert scheduled == ["evaluate_func_3"]
    monkeypatch.setenv("HL_JIT_TARGET", "host")
    assert hl.evaluate_may_gpu(p / 2) == -4 and scheduled == ["evaluate_func_3"]


# ---------------------------------------------------------------- random numbers
_C0, _C1, _C2 = 576942909, 1121052041, 1040796640


def _hash(terms) -> int:
    """Halide's random hash in Python integers: permute, add the next term, permute ..., then fold
    the high half into the low."""
    def permute(v):
        return ((_C2 * v + _C1) * v + _C0) % 2**32

    r = permute(terms[0] % 2**32)
    for t in terms[1:]:
        r = permute((r + t) % 2**32)
    return r ^ (r >> 16)


def _as_float(bits: int) -> float:
    f = np.array([(127 << 23) | (bits >> 9)], np.uint32).view(np.float32)[0]
    return float(f - np.float32(1))


def test_random_numbers_are_halides_hash_of_the_point():
    x, y = hl.Var("x"), hl.Var("y")
    calls = [to_ir(random_float()), to_ir(random_uint(y * 5)), to_ir(random_int(hl.u32(x)))]
    numbers = [c.args[-1].value for c in (calls[0], calls[1], calls[2].value)]
    tag = next_random_tag()
    f = hl.Func("rnd")
    f[x, y] = tuple(wrap(lower_random(c, [x.ir(), y.ir()], tag)) for c in calls)
    fl, ui, si = (np.asarray(b) for b in f.realize([5, 3]))
    for yy in range(3):
        for xx in range(5):
            assert fl[yy, xx] == _as_float(_hash([numbers[0], tag, yy, xx]))
            assert ui[yy, xx] == _hash([yy * 5, numbers[1], tag, yy, xx])
            assert si[yy, xx] == np.uint32(_hash([xx, numbers[2], tag, yy, xx])).view(np.int32)
    assert 0 <= fl.min() and fl.max() < 1 and len(np.unique(fl)) == fl.size
    with pytest.raises(hl.HalideError, match=r"The seed passed to random_float must have type Int\(32\), but "
                                             r"instead is .* of type float32"):
        random_float(hl.f32(x))


def test_random_numbers_match_the_real_halides():
    """In a fresh process the real Halide numbers its first random call 0 and tags its first definition 0."""
    pytest.importorskip("halide", reason="the real Halide (pip install halide) is the oracle")
    script = ("import halide as hl, numpy as np\n"
              "x, y = hl.Var('x'), hl.Var('y')\n"
              "f = hl.Func('f')\n"
              "f[x, y] = (hl.random_float(), hl.random_int(x + 1))\n"
              "a, b = f.realize([4, 3])\n"
              "print(np.asarray(a).tolist(), np.asarray(b).tolist())\n")
    real = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    x, y = hl.Var("x"), hl.Var("y")
    fl = ir.Call(hl.Float(32), "random", (ir.IntImm(hl.Int(32), 0),), ir.INTRINSIC)
    si = ir.Reinterpret(hl.Int(32), ir.Call(hl.UInt(32), "random", (to_ir(x + 1), ir.IntImm(hl.Int(32), 1)),
                                           ir.INTRINSIC))
    f = hl.Func("rnd_real")
    f[x, y] = tuple(wrap(lower_random(c, [x.ir(), y.ir()], 0)) for c in (fl, si))
    a, b = f.realize([4, 3])
    assert real.strip() == f"{np.asarray(a).tolist()} {np.asarray(b).tolist()}"


def test_rdom_indexing_and_expr_truth_as_halides_bindings():
    """r[i] outside the dimensions is a KeyError (so `for rv in r` stops), a non-integer index a
    TypeError; an Expr used as a bool (`a and b`) is a ValueError that suggests & and |."""
    r = hl.RDom([hl.Range(0, 3), hl.Range(0, 2)], "kr")
    assert [rv.name() for rv in r] == ["kr$x", "kr$y"]
    for bad in (-1, 2):
        with pytest.raises(KeyError):
            r[bad]
    with pytest.raises(TypeError):
        r["x"]
    x = hl.Var("x")
    with pytest.raises(ValueError, match=r"cannot be converted to a bool.*'&'/'\|' operators"):
        bool(x < 1)
    with pytest.raises(hl.HalideError):
        _ = (x < 1) and (x > 0)


def _lerp_realized(lib, zero, one, weight):
    x = lib.Var("x")
    zb, ob, wb = lib.Buffer(zero), lib.Buffer(one), lib.Buffer(weight)
    f = lib.Func("lerp_f")
    f[x] = lib.lerp(zb[x], ob[x], wb[x])
    return np.array(f.realize([len(zero)]))


@pytest.mark.parametrize("values", ["uint8", "int8", "uint16", "int16", "uint32", "int32"])
@pytest.mark.parametrize("weights", ["uint8", "uint16", "uint32", "float32"])
def test_integer_lerp_rounds_as_halide(values, weights):
    """Integer lerp blends in twice the width and rounds to nearest; the weight, float in [0, 1]
    or unsigned over its range, is scaled to the values' width first. Bit for bit as Halide 21."""
    rng = np.random.default_rng(11)
    vt, wt = np.dtype(values), np.dtype(weights)
    vi = np.iinfo(vt)
    zero = rng.integers(vi.min, vi.max, 600, endpoint=True).astype(vt)
    one = rng.integers(vi.min, vi.max, 600, endpoint=True).astype(vt)
    zero[:4], one[:4] = [vi.min, vi.max, vi.min, vi.max], [vi.max, vi.min, vi.min, vi.max]
    if wt.kind == "f":
        weight = rng.random(600).astype(wt)
        weight[:3] = [0, 1, 0.5]
        top = 1
    else:
        top = np.iinfo(wt).max
        weight = rng.integers(0, top, 600, endpoint=True).astype(wt)
        weight[:3] = [0, top, top // 2]
    ours = _lerp_realized(hl, zero, one, weight)
    assert ours.dtype == vt
    assert ours[0] == zero[0] and ours[1] == one[1]  # weight 0 gives zero, the full weight one
    exact = zero.astype(np.float64) + (one.astype(np.float64) - zero) * (weight.astype(np.float64) / top)
    # a float weight is truncated to the values' width (an error below a unit), then the blend rounds
    assert np.all(np.abs(ours - exact) <= 1.5 + 1e-6 * np.abs(exact))
    halide = pytest.importorskip("halide", reason="the real Halide (pip install halide==21.*) is the oracle")
    np.testing.assert_array_equal(ours, _lerp_realized(halide, zero, one, weight))


def test_lerp_refuses_what_halide_refuses():
    x = hl.Var("x")
    with pytest.raises(hl.HalideError, match="A lerp weight must be an unsigned integer or a float"):
        hl.lerp(hl.u8(x), hl.u8(x), hl.i32(x))
    with pytest.raises(hl.HalideError, match="Lerping between 64-bit integers is not supported"):
        hl.lerp(hl.u64(x), hl.u64(x), hl.u8(x))
    with pytest.raises(hl.HalideError, match=r"weight for lerp with integer arguments is 1.5, which is not in"):
        hl.lerp(hl.u8(x), hl.u8(x), 1.5)
    f = hl.Func("lerp_const")
    f[x] = hl.lerp(0, hl.u8(200), hl.u8(x))  # an int constant takes the other value's type
    assert f.type() == hl.UInt(8) and list(f.realize([3])) == [0, 1, 2]


def test_undef_leaves_a_tuple_element_as_it_was():
    """Values as Halide 21 computes them for the same updates."""
    x = hl.Var("x")
    assert repr(hl.undef(hl.Int(32))) == "<halide.Expr of type int32: undef()>"
    f = hl.Func("undef_f")
    f[x] = (x, x * 2)
    f[x] = (f[x][0] + 10, hl.undef(hl.Int(32)))
    a, b = f.realize([3])
    assert list(a) == [10, 11, 12] and list(b) == [0, 2, 4]
    r = hl.RDom([(0, 3)], "undef_r")
    g = hl.Func("undef_g")
    g[x] = (x, hl.f32(x))
    g[r.x * 2] = (hl.undef(hl.Int(32)), g[r.x * 2][1] * 0.5)  # at even points only
    with pytest.raises(hl.HalideError, match="Tuple element 1 of update definition has type int32, but pure"):
        g[x] = (g[x][0], hl.undef(hl.Int(32)))  # element 1 holds float32
    a, b = g.realize([6])
    assert list(a) == [0, 1, 2, 3, 4, 5] and list(b) == [0.0, 1.0, 1.0, 3.0, 2.0, 5.0]
    with pytest.raises(hl.HalideError, match="undef takes an hl.Type"):
        hl.undef(3)


def test_an_update_undef_under_a_condition_stores_nothing_there():
    """As Halide's RemoveUndef does, the condition under which an update's values are defined
    guards its store (an if, no select writing the old value back), so iterations that leave an
    element alone can run in parallel with the one that writes it; trim no-ops then runs the loop
    over those that write only (the if goes)."""
    x = hl.Var("x")
    r = hl.RDom([(0, 20)], "guard_r")
    f = hl.Func("undef_guard")
    f[x] = -1
    f[r % 10] = hl.select(r < 10, r, hl.undef(hl.Int(32)))
    f.update(0).allow_race_conditions().parallel(r)
    text = str(hl.Pipeline(f).compile_to_module([], "undef_guard"))
    assert "select" not in text and "guard_r$x, 0, 10)" in text, text
    assert list(f.realize([10])) == list(range(10))


def test_undef_inside_an_expression_is_an_element_left_alone_as_in_halide():
    """A select that picks undef stores nothing there (a pure definition leaves the output as it
    was; an update keeps the element), and an operation on undef is undef (an update of only
    undef values stores nothing): the same values as Halide 21 for the same pipelines."""
    halide = pytest.importorskip("halide")

    def run(m):
        x = m.Var("x")
        f = m.Func("undef_in_select")
        f[x] = m.select(x % 3 == 0, m.undef(m.Int(32)), x * 2)
        out = m.Buffer(np.full(7, -1, np.int32))
        f.realize(out)
        g = m.Func("undef_in_update")
        g[x] = x
        g[x] = m.select(x > 2, m.undef(m.Int(32)), g[x] * 10)
        g[x] += m.undef(m.Int(32))
        g[x] = g[x] + 1
        return np.asarray(out).copy(), np.asarray(g.realize([6])).copy()

    got, want = run(hl), run(halide)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[0], [-1, 2, 4, -1, 8, 10, -1])
