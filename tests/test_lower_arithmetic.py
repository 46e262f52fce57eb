"""lower_arithmetic: what it leaves behind, and that it keeps Halide's meaning.

The rewritten expressions are evaluated by pyhalide.reference, whose evaluation of the C
operations the pass emits (`div_round_to_zero`, `shift_left_in_range`, ...) checks on every lane
the guarantees the pass gives them (no division by 0 or -1, shift amounts in [0, bits)), and
compared with the reference's own evaluation of the original operation and with a model on Python
integers. Compiled code (scalar and vector) is compared bit for bit with the real Halide.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyhalide as hl
from pyhalide import ir, reference
from pyhalide.errors import InternalError
from pyhalide.ir_mutator import IRVisitor
from pyhalide.lowering.lower_arithmetic import lower_arithmetic

INT_TYPES = [hl.Int(8), hl.Int(16), hl.Int(32), hl.Int(64), hl.UInt(8), hl.UInt(16), hl.UInt(32), hl.UInt(64)]
FLOAT_TYPES = [hl.Float(32), hl.Float(64)]


def ids(types):
    return [str(t) for t in types]


def lowered(e: ir.Expr) -> ir.Expr:
    return lower_arithmetic(ir.Evaluate(e)).value


def evaluate(e: ir.Expr, **env) -> np.ndarray:
    return reference.evaluate_expr(e, env)


def edge_values(t) -> list[int]:
    """Where the rules have cases: zero, +-1, the extremes, around the bit width."""
    lo, hi, bits = t.min_value(), t.max_value(), t.bits
    cands = [lo, lo + 1, -bits - 1, -bits, -bits + 1, -3, -2, -1, 0, 1, 2, 3, 7, bits - 1, bits, bits + 1,
             2 * bits, hi - 1, hi]
    return sorted({c for c in cands if t.can_represent(c)})


def pairs(t, extra=()):
    vals = edge_values(t) + list(extra)
    a, b = zip(*itertools.product(vals, vals))
    dt = t.to_numpy()
    return np.array(a, dt), np.array(b, dt)


def wrap(v: int, t) -> int:
    m = 1 << t.bits
    v &= m - 1
    return v - m if t.is_int() and v >= m // 2 else v


def ediv(a: int, b: int) -> int:
    if b == 0:
        return 0
    q = a // b
    return q + 1 if a - q * b < 0 else q


def emod(a: int, b: int) -> int:
    return 0 if b == 0 else a - b * ediv(a, b)


def shift_model(t, left: bool):
    """Halide's shifts as pyhalide defines them: a negative amount shifts the other way; by the
    bit width or more gives 0 (or the sign, for >> of a signed value)."""

    def f(a: int, n: int) -> int:
        go_left = left if n >= 0 else not left
        n = min(abs(n), t.bits)
        return a << n if go_left else a >> n  # Python's >> keeps the sign: -1 for large n

    return f


def model(t, fn, a, b):
    return np.array([wrap(fn(int(p), int(q)), t) for p, q in zip(a, b)], t.to_numpy())


def var(name, t):
    return ir.Variable(name, t)


class EveryLane:
    """Evaluates lowered IR as hardware does: every operation on every lane, also on lanes that a
    Select then discards (a C division by zero there would still trap), checking the guarantees
    of the C operations on all of them. It knows only what lower_arithmetic may leave."""

    _BINARY = {ir.Add: np.add, ir.Sub: np.subtract, ir.Mul: np.multiply, ir.EQ: np.equal, ir.NE: np.not_equal,
               ir.LT: np.less, ir.LE: np.less_equal, ir.GT: np.greater, ir.GE: np.greater_equal,
               ir.And: np.logical_and, ir.Or: np.logical_or}

    def __init__(self, env):
        self.env = {k: np.asarray(v) for k, v in env.items()}

    def __call__(self, e):
        with np.errstate(all="ignore"):
            return np.asarray(self.eval(e))

    def eval(self, e):
        dt = e.type.to_numpy()
        if isinstance(e, ir.IntImm | ir.FloatImm):
            return np.array(e.value, dt)
        if isinstance(e, ir.Variable):
            return self.env[e.name].astype(dt)
        if isinstance(e, ir.Cast):
            assert not e.type.is_bool() or e.value.type.is_bool()
            return self.eval(e.value).astype(dt)
        if type(e) in self._BINARY:
            return self._BINARY[type(e)](self.eval(e.a), self.eval(e.b)).astype(dt)
        if isinstance(e, ir.Div):
            assert e.type.is_float()
            return (self.eval(e.a) / self.eval(e.b)).astype(dt)
        if isinstance(e, ir.Min | ir.Max):
            assert not e.type.is_float()
            return (np.minimum if isinstance(e, ir.Min) else np.maximum)(self.eval(e.a), self.eval(e.b))
        if isinstance(e, ir.Not):
            return np.logical_not(self.eval(e.a))
        if isinstance(e, ir.Select):
            return np.where(self.eval(e.condition), self.eval(e.true_value), self.eval(e.false_value)).astype(dt)
        if isinstance(e, ir.Let):
            saved = dict(self.env)
            self.env[e.name] = self.eval(e.value)
            try:
                return self.eval(e.body)
            finally:
                self.env = saved
        if isinstance(e, ir.Call):
            args = [self.eval(a) for a in e.args]
            if e.name in ("floor", "abs"):
                assert e.type.is_float()
                return (np.floor if e.name == "floor" else np.abs)(args[0]).astype(dt)
            a, b = args
            bits = e.type.bits
            if e.name in ("div_round_to_zero", "mod_round_to_zero"):
                assert not np.any(b == 0), f"{e.name} by 0"
                assert not (e.type.is_int() and np.any(b == -1)), f"{e.name} by -1"
                r = np.fmod(a, b)
                return (r if e.name == "mod_round_to_zero" else (a - r) // b).astype(dt)
            if e.name in ("shift_left_in_range", "shift_right_in_range"):
                assert e.args[1].type.is_uint() and not np.any(b >= bits), f"{e.name} by {b.max()}"
                fn = np.left_shift if e.name == "shift_left_in_range" else np.right_shift
                return fn(a, b.astype(dt)).astype(dt)
        raise AssertionError(f"lower_arithmetic left {type(e).__name__} {getattr(e, 'name', '')}")


def check_same(e, want, **env):
    """The reference of e, the reference of lowered(e), every lane of lowered(e) and the model agree."""
    low = lowered(e)
    results = [evaluate(e, **env), evaluate(low, **env), EveryLane(env)(low)]
    for r in results:
        assert r.dtype == want.dtype
        np.testing.assert_array_equal(r, want)


# ---------------------------------------------------------------- what the pass leaves
class _Survivors(IRVisitor):
    """Operations lower_arithmetic promises to remove."""

    visit_once = True

    def __init__(self):
        super().__init__()
        self.found: list[str] = []
        self.intrinsics: set[str] = set()

    def visit_Div(self, e):
        if not e.type.is_float():
            self.found.append(f"Div {e.type}")
        self.visit_children(e)

    def visit_Mod(self, e):
        self.found.append(f"Mod {e.type}")
        self.visit_children(e)

    def _minmax(self, e):
        if e.type.is_float():
            self.found.append(f"{type(e).__name__} {e.type}")
        self.visit_children(e)

    visit_Min = visit_Max = _minmax

    def visit_Cast(self, e):
        if e.type.is_bool() and not e.value.type.is_bool():
            self.found.append(f"Cast {e.value.type} to bool")
        self.visit_children(e)

    def visit_Call(self, e):
        if e.call_type == ir.INTRINSIC:
            self.intrinsics.add(e.name)
            if e.name in ("shift_left", "shift_right", "absd") or e.name == "abs" and not e.type.is_float():
                self.found.append(e.name)
        self.visit_children(e)


def _everything_func(name: str, t, vectorize: bool):
    a, b = hl.ImageParam(t, 1, f"{name}_a"), hl.ImageParam(t, 1, f"{name}_b")
    x = hl.Var("x")
    f = hl.Func(name)
    p, q = a[x], b[x]
    vals = [p / q, p % q, p / 3, p % 3, hl.min(p, q), hl.max(p, q), hl.select(hl.cast(hl.Bool(), p), p, q)]
    if t.is_float():
        vals += [hl.abs(p), hl.absd(p, q)]
    else:
        vals += [p << q, p >> q, p << 3, p >> 3, hl.cast(t, hl.abs(p)), hl.cast(t, hl.absd(p, q))]
        vals += [p / -1] if t.is_int() else []
    f[x] = hl.Tuple(vals)
    if vectorize:
        f.vectorize(x, 8)
    return f


@pytest.mark.parametrize("vectorize", [False, True])
@pytest.mark.parametrize("t", [hl.Int(32), hl.UInt(16), hl.Float(32)], ids=ids([hl.Int(32), hl.UInt(16), hl.Float(32)]))
def test_no_halide_rule_reaches_codegen(t, vectorize):
    from pyhalide.lower import lower

    f = _everything_func(f"all_ops_{t}_{int(vectorize)}", t, vectorize)
    stmt = lower([f]).stmt
    before, after = _Survivors(), _Survivors()
    before.visit(stmt)
    after.visit(lower_arithmetic(stmt))
    assert before.found, "the pipeline should exercise the rules"
    assert after.found == []
    if not t.is_float():
        emitted = {"div_round_to_zero", "mod_round_to_zero", "shift_left_in_range", "shift_right_in_range"}
        assert emitted <= after.intrinsics


def test_codegen_refuses_what_the_pass_removes():
    from pyhalide.codegen.llvm import CodeGen
    from pyhalide.lower import lower

    t = hl.Int(32)
    for k, build in enumerate([lambda p, q: p / q, lambda p, q: p % 3, lambda p, q: p << q,
                               lambda p, q: hl.cast(t, hl.abs(p)), lambda p, q: hl.min(hl.f32(p), hl.f32(q)),
                               lambda p, q: hl.select(hl.cast(hl.Bool(), p), p, q)]):
        a, b = hl.ImageParam(t, 1, f"refuse_a{k}"), hl.ImageParam(t, 1, f"refuse_b{k}")
        x = hl.Var("x")
        f = hl.Func(f"refuse{k}")
        f[x] = build(a[x], b[x])
        lp = lower([f])
        with pytest.raises(InternalError, match="lower_arithmetic"):
            CodeGen(lp, lp.stmt, "refused", [[0]] * len(lp.buffers)).generate()


def test_constant_divisors_keep_the_cheap_form():
    u, i = hl.UInt(32), hl.Int(32)
    a = var("a", u)
    e = lowered(ir.Div(a, ir.make_const(u, 7)))
    assert e == ir.Call(u, "div_round_to_zero", (a, ir.make_const(u, 7)), ir.INTRINSIC)
    assert lowered(ir.Mod(a, ir.make_const(u, 7))).name == "mod_round_to_zero"
    assert lowered(ir.Div(a, ir.make_const(u, 0))) == ir.make_const(u, 0)
    s = var("s", i)
    for c in (5, -5):
        for op in (ir.Div, ir.Mod):
            found = _Nodes()
            found.visit(lowered(op(s, ir.make_const(i, c))))
            # one C operation of each kind needed, one compare, no select over the result
            assert found.count("Call") == (2 if op is ir.Div else 1)
            assert found.count("LT") == 1 and found.count("EQ") == 0


class _Nodes(IRVisitor):
    def __init__(self):
        super().__init__()
        self.kinds: list[str] = []

    def visit(self, node):
        if node is not None:
            self.kinds.append(type(node).__name__)
        super().visit(node)

    def count(self, kind):
        return self.kinds.count(kind)


def test_reference_checks_the_guarantees():
    """The oracle of these tests refuses what the pass promises never to emit."""
    i = hl.Int(8)
    a = var("a", i)
    for name, bad in [("div_round_to_zero", 0), ("mod_round_to_zero", -1), ("shift_left_in_range", 8)]:
        e = ir.Call(i, name, (a, ir.make_const(i if "shift" not in name else hl.UInt(8), bad)), ir.INTRINSIC)
        with pytest.raises(InternalError):
            evaluate(e, a=np.array([5], np.int8))


# ---------------------------------------------------------------- meaning, on the reference
@pytest.mark.parametrize("t", INT_TYPES, ids=ids(INT_TYPES))
def test_division_and_modulo(t):
    a, b = pairs(t)
    va, vb = var("a", t), var("b", t)
    check_same(ir.Div(va, vb), model(t, ediv, a, b), a=a, b=b)
    check_same(ir.Mod(va, vb), model(t, emod, a, b), a=a, b=b)
    for c in edge_values(t):
        vc = ir.make_const(t, c)
        check_same(ir.Div(va, vc), model(t, ediv, a, [c] * len(a)), a=a)
        check_same(ir.Mod(va, vc), model(t, emod, a, [c] * len(a)), a=a)


@pytest.mark.parametrize("t", INT_TYPES, ids=ids(INT_TYPES))
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_division_and_modulo_of_random_values(t, data):
    values = st.integers(t.min_value(), t.max_value())
    a = np.array(data.draw(st.lists(values, min_size=1, max_size=30)), t.to_numpy())
    b = np.array(data.draw(st.lists(values, min_size=len(a), max_size=len(a))), t.to_numpy())
    va, vb = var("a", t), var("b", t)
    check_same(ir.Div(va, vb), model(t, ediv, a, b), a=a, b=b)
    check_same(ir.Mod(va, vb), model(t, emod, a, b), a=a, b=b)
    c = int(b[0])
    check_same(ir.Div(va, ir.make_const(t, c)), model(t, ediv, a, [c] * len(a)), a=a)
    check_same(ir.Mod(va, ir.make_const(t, c)), model(t, emod, a, [c] * len(a)), a=a)


SHIFT_TYPES = [(ta, ta.with_code(code)) for ta in INT_TYPES for code in ("int", "uint")]


@pytest.mark.parametrize("ta,tn", SHIFT_TYPES, ids=[f"{a}-{b}" for a, b in SHIFT_TYPES])
def test_shifts(ta, tn):
    """Negative amounts, amounts of the bit width and more, the most negative amount."""
    vals_a, vals_n = edge_values(ta), edge_values(tn)
    a, n = (np.array(v, t.to_numpy()) for v, t in zip(zip(*itertools.product(vals_a, vals_n)), (ta, tn)))
    va, vn = var("a", ta), var("n", tn)
    for name, left in (("shift_left", True), ("shift_right", False)):
        want = model(ta, shift_model(ta, left), a, n)
        check_same(ir.Call(ta, name, (va, vn), ir.INTRINSIC), want, a=a, n=n)
        for c in vals_n:
            e = ir.Call(ta, name, (va, ir.make_const(tn, c)), ir.INTRINSIC)
            check_same(e, model(ta, shift_model(ta, left), a, [c] * len(a)), a=a)


@pytest.mark.parametrize("t", FLOAT_TYPES, ids=ids(FLOAT_TYPES))
def test_float_min_max_and_modulo(t):
    specials = [np.nan, -0.0, 0.0, np.inf, -np.inf, 1.5, -1.5, 3.0, -7.25, 1e-30]
    a, b = (np.array(v, t.to_numpy()) for v in zip(*itertools.product(specials, specials)))
    va, vb = var("a", t), var("b", t)
    for node, want in ((ir.Min, np.where(a < b, a, b)), (ir.Max, np.where(a > b, a, b))):
        after = evaluate(lowered(node(va, vb)), a=a, b=b)
        assert after.tobytes() == want.tobytes() == evaluate(node(va, vb), a=a, b=b).tobytes()
    with np.errstate(all="ignore"):
        want = a - b * np.floor(a / b)
    after = evaluate(lowered(ir.Mod(va, vb)), a=a, b=b)
    assert after.tobytes() == want.tobytes()


@pytest.mark.parametrize("t", INT_TYPES + FLOAT_TYPES, ids=ids(INT_TYPES + FLOAT_TYPES))
def test_abs_absd_and_casts_to_bool(t):
    if t.is_float():
        a, b = (np.array(v, t.to_numpy()) for v in zip(*itertools.product([np.nan, -0.0, 0.0, -2.5, np.inf], repeat=2)))
    else:
        a, b = pairs(t)
    va, vb = var("a", t), var("b", t)
    ut = t if t.is_float() else t.with_code("uint")
    e_abs = ir.Call(ut, "abs", (va,), ir.INTRINSIC)
    e_absd = ir.Call(ut, "absd", (va, vb), ir.INTRINSIC)
    if t.is_float():
        with np.errstate(invalid="ignore"):
            want_abs, want_absd = np.abs(a), np.abs(a - b)
        assert evaluate(lowered(e_abs), a=a).tobytes() == want_abs.tobytes()
        assert evaluate(lowered(e_absd), a=a, b=b).tobytes() == want_absd.tobytes()
    else:
        check_same(e_abs, model(ut, lambda p, q: abs(p), a, b), a=a)
        check_same(e_absd, model(ut, lambda p, q: abs(p - q), a, b), a=a, b=b)
    e_bool = ir.Cast(hl.Bool(), va)
    # the lowest bit, as Halide casts (a float truncated toward zero first; NaN and inf: false)
    want = np.array([math.isfinite(v) and int(v) & 1 == 1 for v in a.tolist()], np.bool_)
    np.testing.assert_array_equal(evaluate(lowered(e_bool), a=a), want)
    np.testing.assert_array_equal(evaluate(e_bool, a=a), want)


# ---------------------------------------------------------------- compiled, against the real Halide
def _side_by_side(t, build, a, b, vectorize):
    """Realize build(p, q) on arrays a, b in pyhalide and in Halide; both outputs as numpy arrays."""
    halide = pytest.importorskip("halide")
    outs = []
    for lib, tag in ((hl, "ph"), (halide, "hl")):
        x = lib.Var("x")
        pa, pb = lib.Buffer(a), lib.Buffer(b)
        f = lib.Func(f"side_{tag}_{t}_{int(vectorize)}")
        f[x] = lib.Tuple(build(lib, pa[x], pb[x]))
        if vectorize:
            f.vectorize(x, 16)
        got = f.realize([len(a)])
        outs.append([np.asarray(g) for g in got])
    return outs


HALIDE_TYPES = [t for t in INT_TYPES if t != hl.UInt(64)]  # Halide's Python Buffer has no uint64


@pytest.mark.parametrize("vectorize", [False, True])
@pytest.mark.parametrize("t", HALIDE_TYPES, ids=ids(HALIDE_TYPES))
def test_compiled_matches_halide_bit_for_bit(t, vectorize):
    """Division and modulo (by 0, by -1 of the most negative value), by constants, and shifts
    whose amount's magnitude is below the bit width (beyond it Halide's results are undefined)."""
    a, b = pairs(t)
    bits = t.bits
    n = np.array([int(v) % bits if t.is_uint() or int(v) >= 0 else -(abs(int(v)) % bits) for v in b.tolist()],
                 t.to_numpy())

    def build(lib, p, q):
        return [p / q, p % q, p / 7, p % 7, p / 2, p % 2] + ([p / -3, p % -3] if t.is_int() else [])

    mine, theirs = _side_by_side(t, build, a, b, vectorize)
    for k, (m, h) in enumerate(zip(mine, theirs)):
        assert m.tobytes() == h.tobytes(), f"value {k}"
    mine, theirs = _side_by_side(t, lambda lib, p, q: [p << q, p >> q, p >> 1], a, n, vectorize)
    for k, (m, h) in enumerate(zip(mine, theirs)):
        assert m.tobytes() == h.tobytes(), f"shift {k}"
