"""The simplifier: constant folding and algebraic rewrites, one rule table per operator.

Rules are functions `(node) -> Expr | None`, listed per node class in RULES; the first that
answers wins and the result is simplified again. Integer rules rely on wrap-around arithmetic
(valid for every integer type); rules that need "no overflow" are applied to Int(32) only, as
Halide does. Float rules never reassociate.
"""

from __future__ import annotations

import itertools
import math

from .. import ir
from ..ir_mutator import (
    IRMutator,
    Substitution,
    free_variables,
    has_call,
    has_load,
    has_ranged,
    map_children,
    remember_free_variables,
    substitute,
)
from ..types import INT, UINT
from .fold import fold_binary, fold_cast, signed_integer_overflow

_c = ir.const_value


def _is_int(t) -> bool:
    """An integer type other than bool."""
    return t.code == INT or (t.code == UINT and t.bits != 1)


def _no_overflow(t) -> bool:
    return t.is_int() and t.bits >= 32


def _fold(n):
    """A binary operator of two scalar constants, folded (None if it is not one)."""
    a = n.a
    if type(a) is not ir.IntImm and type(a) is not ir.FloatImm:
        return None
    b = _c(n.b)
    return None if b is None else fold_binary(n, a.value, b)


def _const(t, v):
    return ir.make_const(t, v)


def _folded(t, v):
    """Constants c0 op c1 combined by a rule ((x + c0) + c1 -> x + (c0 + c1)): as Halide's fold(),
    an overflow of a signed 32- or 64-bit type leaves the overflow marker (an error if it reaches
    code), not a wrapped value."""
    if t.lanes == 1 and t.is_int() and t.bits >= 32 and not t.can_represent(v):
        return signed_integer_overflow(t)
    return ir.make_const(t, v)


# ---------------------------------------------------------------- rules per operator
def _vector_rules(n):
    """Integer arithmetic of ramps and broadcasts stays ramps and broadcasts where it can, so that
    an index rebuilt from vector pieces is recognised as dense again (codegen loads a ramp of
    stride 1), and a condition the same for every lane is a broadcast of one scalar."""
    a, b, t = n.a, n.b, n.type
    if t.lanes == 1 or not _is_int(a.type) or not isinstance(a, ir.Ramp | ir.Broadcast) or \
            not isinstance(b, ir.Ramp | ir.Broadcast):
        return None
    if isinstance(n, ir.EQ | ir.NE | ir.LT | ir.LE | ir.GT | ir.GE):
        return ir.Broadcast(type(n)(a.value, b.value), t.lanes) if isinstance(a, ir.Broadcast) and \
            isinstance(b, ir.Broadcast) else None
    op, lanes = type(n), t.lanes
    if isinstance(a, ir.Broadcast) and isinstance(b, ir.Broadcast):
        return ir.Broadcast(op(a.value, b.value), lanes)
    if op is ir.Div or op is ir.Mod:
        # (base + s * i) / c = base / c + (s / c) * i and (base + s * i) % c = base % c when c divides s
        c = _c(b.value) if isinstance(b, ir.Broadcast) else None
        stride = _c(a.stride) if isinstance(a, ir.Ramp) else None
        if c is None or stride is None or c <= 0 or stride % c != 0:
            return None
        if op is ir.Mod:
            return ir.Broadcast(ir.Mod(a.base, b.value), lanes)
        return ir.Ramp(ir.Div(a.base, b.value), _const(a.stride.type, stride // c), lanes)
    if op is ir.Mul:
        if isinstance(a, ir.Broadcast):
            a, b = b, a
        if isinstance(b, ir.Broadcast):
            return ir.Ramp(ir.Mul(a.base, b.value), ir.Mul(a.stride, b.value), lanes)
        return None
    zero = _const(a.type.element_of(), 0)
    a_base, a_stride = (a.base, a.stride) if isinstance(a, ir.Ramp) else (a.value, zero)
    b_base, b_stride = (b.base, b.stride) if isinstance(b, ir.Ramp) else (b.value, zero)
    return ir.Ramp(op(a_base, b_base), op(a_stride, b_stride), lanes)


def add_rules(n):
    a, b, t = n.a, n.b, n.type
    cb = _c(b)
    if cb is None and _c(a) is not None:
        return ir.Add(b, a)  # constants to the right
    if cb is not None and cb == 0:
        return a
    if not _is_int(t):
        return None
    if cb is not None and isinstance(a, ir.Add) and _c(a.b) is not None:
        return ir.Add(a.a, _folded(t, _c(a.b) + cb))
    if cb is not None and isinstance(a, ir.Sub) and _c(a.b) is not None:
        return ir.Add(a.a, _folded(t, cb - _c(a.b)))
    if isinstance(b, ir.Sub) and b.b == a:
        return b.a  # a + (x - a)
    if isinstance(a, ir.Sub) and a.b == b:
        return a.a  # (x - b) + b
    if isinstance(b, ir.Min | ir.Max) and _no_overflow(t):
        # x + min(c, y - x) -> min(x + c, y): the inverse of sub_rules' min(x + c, y) - x
        for k, (p, q) in enumerate(((b.a, b.b), (b.b, b.a))):
            if isinstance(q, ir.Sub) and q.b == a and _c(p) is not None and not ir.is_const(p, 0):
                return type(b)(ir.Add(a, p), q.a) if k == 0 else type(b)(q.a, ir.Add(a, p))
    if isinstance(a, ir.Add) and _c(a.b) is not None and cb is None:
        return ir.Add(ir.Add(a.a, b), a.b)  # (x + c) + y -> (x + y) + c
    if isinstance(b, ir.Add) and _c(b.b) is not None:
        return ir.Add(ir.Add(a, b.a), b.b)  # x + (y + c) -> (x + y) + c
    return None


def sub_rules(n):
    a, b, t = n.a, n.b, n.type
    if ir.is_const(b, 0):
        return a
    if not _is_int(t):
        return None
    if a == b:
        return _const(t, 0)
    cb = _c(b)
    if cb is not None:
        return ir.Add(a, _const(t, -cb))
    if isinstance(a, ir.Add) and isinstance(b, ir.Add):
        if a.b == b.b:
            return ir.Sub(a.a, b.a)  # (x + z) - (y + z)
        if a.a == b.a:
            return ir.Sub(a.b, b.b)  # (z + x) - (z + y)
    if isinstance(a, ir.Add):
        if a.a == b:
            return a.b  # (x + y) - x
        if a.b == b:
            return a.a
        if _c(a.b) is not None and isinstance(b, ir.Add) and _c(b.b) is not None:
            return ir.Add(ir.Sub(a.a, b.a), _folded(t, _c(a.b) - _c(b.b)))  # (x + c1) - (y + c2)
        if _c(a.b) is not None:
            return ir.Add(ir.Sub(a.a, b), a.b)  # (x + c) - y -> (x - y) + c
    if isinstance(b, ir.Add):
        if b.a == a:
            return ir.Sub(_const(t, 0), b.b)  # x - (x + y)
        if _c(b.b) is not None:
            return ir.Add(ir.Sub(a, b.a), _const(t, -_c(b.b)))  # x - (y + c)
    if _c(a) is not None and isinstance(b, ir.Sub) and _c(b.a) is not None:
        return ir.Add(b.b, _folded(t, _c(a) - _c(b.a)))  # c1 - (c2 - y)
    if (isinstance(a, ir.Div) and isinstance(b, ir.Div) and a.b == b.b and (_c(b.b) or 0) > 0
            and isinstance(a.a, ir.Add) and a.a.a == b.a and _c(a.a.b) is not None and _no_overflow(t)):
        # (x + c0) / c1 - x / c1 -> (x % c1 + c0) / c1: a region's extent whose ends are halved
        return ir.Div(ir.Add(ir.Mod(b.a, b.b), a.a.b), b.b)
    if isinstance(a, ir.Min | ir.Max) and _no_overflow(t):
        # min(x + c, y) - x -> min(c, y - x): a window's extent from its correlated min and max
        for k, (p, q) in enumerate(((a.a, a.b), (a.b, a.a))):
            # (not max(x, y) - x: clamps keep their max(min(x, hi), lo) - lo shape)
            if isinstance(p, ir.Add) and p.a == b and _c(p.b) is not None:
                rest = ir.Sub(q, b)
                return type(a)(p.b, rest) if k == 0 else type(a)(rest, p.b)
    return None


def mul_rules(n):
    a, b, t = n.a, n.b, n.type
    if _c(a) is not None and _c(b) is None:
        return ir.Mul(b, a)
    if ir.is_const(b, 1):
        return a
    if _is_int(t) and ir.is_const(b, 0):
        return b
    if _is_int(t) and _c(b) is not None and isinstance(a, ir.Mul) and _c(a.b) is not None:
        return ir.Mul(a.a, _folded(t, _c(a.b) * _c(b)))
    if _is_int(t) and _c(b) is not None and isinstance(a, ir.Add) and _c(a.b) is not None:
        return ir.Add(ir.Mul(a.a, b), _folded(t, _c(a.b) * _c(b)))  # (x + c1) * c2
    return None


def div_rules(n):
    a, b, t = n.a, n.b, n.type
    if ir.is_const(b, 1):
        return a
    if not _is_int(t):
        return None
    if ir.is_const(b, 0):
        return _const(t, 0)
    cb = _c(b)
    if cb is not None and cb > 0 and isinstance(a, ir.Mul) and _c(a.b) is not None and _c(a.b) % cb == 0:
        return ir.Mul(a.a, _const(t, _c(a.b) // cb))  # (x * 8) / 4
    nested = _nested_division(a, cb, t)
    if nested is not None:
        return nested
    if (cb is not None and 0 < cb <= t.max_value() // 2 and isinstance(a, ir.Add) and _c(a.b) is not None
            and not 0 <= _c(a.b) < cb and _no_overflow(t)):
        # (the new offset is below cb: added to any x within half the type's range, it cannot
        # wrap; with a divisor past that, (x - 1) / d would become (x + d - 1) / d - 1, which does)
        q, r = divmod(_c(a.b), cb)  # Euclidean, as Halide's division
        inner = a.a if r == 0 else ir.Add(a.a, _const(t, r))
        return ir.Add(ir.Div(inner, b), _const(t, q))  # (x + 9) / 4 -> (x + 1) / 4 + 2
    if cb is not None and cb > 0 and isinstance(a, ir.Add) and _no_overflow(t):
        for x, m in ((a.a, a.b), (a.b, a.a)):
            if isinstance(m, ir.Mul) and _c(m.b) is not None and _c(m.b) % cb == 0:
                return ir.Add(ir.Div(x, b), ir.Mul(m.a, _const(t, _c(m.b) // cb)))  # (x + y * 8) / 4
        inner = a.a
        if isinstance(inner, ir.Add) and _c(a.b) is not None:  # ((x + y * 8) + 1) / 4
            for x, m in ((inner.a, inner.b), (inner.b, inner.a)):
                if isinstance(m, ir.Mul) and _c(m.b) is not None and _c(m.b) % cb == 0:
                    return ir.Add(ir.Div(ir.Add(x, a.b), b), ir.Mul(m.a, _const(t, _c(m.b) // cb)))
    return None


def _nested_division(a, cb, t):
    """(x / c1) / c2 -> x / (c1 * c2) and (x / c1 + c3) / c2 -> (x + c3 * c1) / (c1 * c2), for
    positive divisors: Euclidean division by a positive number is the floor, and floors of
    quotients compose. A pyramid's bounds halve level after level; folded, each level's bound is
    one division instead of a chain (local_laplacian's bounds at entry: 17,900 IR nodes, not 25,700)."""
    if cb is None or cb <= 0:
        return None
    offset = None
    if isinstance(a, ir.Add) and _c(a.b) is None and isinstance(a.b, ir.Broadcast) and isinstance(a.a, ir.Div) \
            and (_c(a.a.b) or 0) > 0 and _no_overflow(t):
        # a vector index (ramp / c1 + broadcast(y)) / c2, where two upsamplings are inlined into
        # each other: one quotient of a ramp, which loads as a dense span and a shuffle, not a
        # lane-by-lane gather (random pipeline 1095: 5.6x slower than computing them at root)
        c1 = _c(a.a.b)
        shifted = ir.Add(a.a.a, ir.Broadcast(ir.Mul(a.b.value, _const(a.b.value.type, c1)), t.lanes))
        return ir.Div(shifted, _const(t, c1 * cb)) if t.can_represent(c1 * cb) else None
    if isinstance(a, ir.Add) and _c(a.b) is not None and _no_overflow(t):  # x + c3 * c1 must not wrap
        offset, a = _c(a.b), a.a
    if not isinstance(a, ir.Div) or _c(a.b) is None or _c(a.b) <= 0:
        return None
    c1 = _c(a.b)
    divisor, start = c1 * cb, offset * c1 if offset is not None else 0
    if not t.can_represent(divisor) or abs(start) > t.max_value() // 2:
        return None  # (an x within half the type's range plus start cannot wrap)
    inner = a.a if offset is None else ir.Add(a.a, _const(t, start))
    return ir.Div(inner, _const(t, divisor))


def mod_rules(n):
    a, b, t = n.a, n.b, n.type
    if not _is_int(t):
        return None
    if ir.is_const(b, 1) or ir.is_const(b, 0):
        return _const(t, 0)
    cb = _c(b)
    if cb is not None and cb > 0 and isinstance(a, ir.Mul) and _c(a.b) is not None and _c(a.b) % cb == 0:
        return _const(t, 0)
    if cb is not None and cb > 0 and isinstance(a, ir.Add) and _no_overflow(t):
        for x, y in ((a.a, a.b), (a.b, a.a)):
            if isinstance(x, ir.Mul) and _c(x.b) is not None and _c(x.b) % cb == 0:
                return ir.Mod(y, b)  # (x * 4 + y) % 2 -> y % 2
    return None


def _minmax_rules(n, op, pick):
    a, b, t = n.a, n.b, n.type
    cb = _c(b)
    if a == b:
        return a
    if not _is_int(t):
        return None  # (not even constants to the right: which operand a NaN gives is in the order)
    if cb is None and _c(a) is not None:
        return op(b, a)
    if cb is not None and isinstance(a, op) and _c(a.b) is not None:
        return op(a.a, _const(t, pick(_c(a.b), cb)))  # min(min(x, c1), c2)
    if isinstance(a, op) and (a.a == b or a.b == b):
        return a  # min(min(x, y), x)
    if isinstance(b, op) and (b.a == a or b.b == a):
        return b  # min(x, min(x, y))
    dual = ir.Max if op is ir.Min else ir.Min
    if isinstance(a, dual) and (a.a == b or a.b == b):
        return b  # min(max(x, y), x): absorption
    if isinstance(b, dual) and (b.a == a or b.b == a):
        return a
    if (_no_overflow(t) and isinstance(a, ir.Add) and isinstance(b, ir.Add) and a.a == b.a
            and _c(a.b) is not None and _c(b.b) is not None):
        return ir.Add(a.a, _const(t, pick(_c(a.b), _c(b.b))))  # min(x + c1, x + c2)
    if _no_overflow(t) and isinstance(a, ir.Add) and a.a == b and _c(a.b) is not None:
        return a if pick(_c(a.b), 0) == _c(a.b) else b  # min(x + c, x)
    if _no_overflow(t) and isinstance(b, ir.Add) and b.a == a and _c(b.b) is not None:
        return b if pick(_c(b.b), 0) == _c(b.b) else a
    return None


def min_rules(n):
    return _minmax_rules(n, ir.Min, min)


def max_rules(n):
    return _minmax_rules(n, ir.Max, max)


def cmp_rules(n):
    a, b = n.a, n.b
    if a == b and _is_int(a.type):
        return _const(n.type, int(isinstance(n, ir.EQ | ir.LE | ir.GE)))
    return None


def and_rules(n):
    a, b = n.a, n.b
    if ir.is_const(a):
        return b if _c(a) else a
    if ir.is_const(b):
        return a if _c(b) else b
    if a == b:
        return a
    if _complements(a, b):
        return _const(n.type, 0)
    return None


def _complements(a, b) -> bool:
    """Whether a == !b (a condition and its negation, as skip stages writes them)."""
    return isinstance(a, ir.Not) and a.a == b or isinstance(b, ir.Not) and b.a == a


def or_rules(n):
    a, b = n.a, n.b
    if ir.is_const(a):
        return a if _c(a) else b
    if ir.is_const(b):
        return b if _c(b) else a
    if a == b:
        return a
    if _complements(a, b):
        return _const(n.type, 1)
    return None


def not_rules(n):
    if ir.is_const(n.a) and n.type.lanes == 1:
        return _const(n.type, int(not _c(n.a)))
    if isinstance(n.a, ir.Not):
        return n.a.a
    return None


def select_rules(n):
    cond = n.condition.value if isinstance(n.condition, ir.Broadcast) else n.condition
    if ir.is_const(cond) and cond.type.lanes == 1:
        return n.true_value if _c(cond) else n.false_value
    if n.true_value == n.false_value:
        return n.true_value
    return None


def cast_rules(n):
    if n.value.type == n.type:
        return n.value
    folded = fold_cast(n.type, n.value)
    if folded is not None:
        return folded
    v = n.value
    # widening integer casts of a cast from the same narrow type compose
    if isinstance(v, ir.Cast) and _is_int(n.type) and _is_int(v.type) and _is_int(v.value.type):
        inner, mid, out = v.value.type, v.type, n.type
        if mid.bits >= inner.bits and out.bits >= mid.bits and (mid.code == inner.code or mid.bits > inner.bits):
            if mid.code == inner.code or inner.is_uint():
                return ir.Cast(out, v.value)
    return None


def let_rules(n):
    v = n.value
    if isinstance(v, ir.IntImm | ir.FloatImm | ir.Variable):
        return substitute({n.name: v}, n.body)
    if v.type.lanes > 1 and _lane_pattern(v):
        return _substitute_lane_pattern(n)
    return None


def _lane_pattern(e) -> bool:
    """A vector built from ramps and broadcasts by adding, subtracting, and multiplying or
    dividing by constants: what a vectorized loop variable becomes in an inlined Func's
    coordinates (x / 2 of an upsampling), which loads recognise only when they see it."""
    if isinstance(e, ir.Broadcast):
        return True
    if isinstance(e, ir.Ramp):
        return _c(e.stride) is not None
    if isinstance(e, ir.Add | ir.Sub):
        return _lane_pattern(e.a) and _lane_pattern(e.b)
    if isinstance(e, ir.Mul | ir.Div):
        return _lane_pattern(e.a) and isinstance(e.b, ir.Broadcast) and _c(e.b) is not None
    return False


def _substitute_lane_pattern(n):
    """let v = <lane pattern> in body: the pattern substituted into the body, its scalars that are
    not names or constants bound to lets of their own (computed once, as before)."""
    bound = []

    def scalar(x):
        if isinstance(x, ir.IntImm | ir.FloatImm | ir.Variable):
            return x
        bound.append((f"{n.name}.{len(bound)}", x))
        return ir.Variable(bound[-1][0], x.type)

    def rebuild(e):
        if isinstance(e, ir.Broadcast):
            return ir.Broadcast(scalar(e.value), e.lanes)
        if isinstance(e, ir.Ramp):
            return ir.Ramp(scalar(e.base), e.stride, e.lanes)
        if isinstance(e, ir.Mul | ir.Div):
            return type(e)(rebuild(e.a), e.b)
        return type(e)(rebuild(e.a), rebuild(e.b))

    body = substitute({n.name: rebuild(n.value)}, n.body)
    for name, value in reversed(bound):
        body = ir.Let(name, value, body)
    return body


_ROUNDINGS = {"floor": math.floor, "ceil": math.ceil, "trunc": math.trunc, "round": round}  # (round: to even)


def bool_values(condition: ir.Expr, holds: bool) -> dict[str, ir.Expr]:
    """The boolean variables whose values `condition == holds` settles: `p` true, `!p` false,
    both sides of a true `&&` and of a false `||`."""
    if isinstance(condition, ir.Variable) and condition.type.is_bool() and condition.type.lanes == 1:
        return {condition.name: _const(condition.type, int(holds))}
    if isinstance(condition, ir.Not):
        return bool_values(condition.a, not holds)
    if isinstance(condition, ir.And) and holds or isinstance(condition, ir.Or) and not holds:
        return {**bool_values(condition.a, holds), **bool_values(condition.b, holds)}
    return {}


def call_rules(n):
    """all_true of a vector condition every lane of which is known; floor, ceil, trunc and round
    of a finite float constant (an integer, which any float type holds exactly)."""
    if n.call_type == ir.INTRINSIC and n.name == "all_true" and ir.is_const(n.args[0]):
        return _const(n.type, int(bool(_c(n.args[0]))))
    if n.call_type == ir.EXTERN and n.name in _ROUNDINGS and n.type.lanes == 1 and isinstance(n.args[0], ir.FloatImm) \
            and math.isfinite(n.args[0].value):
        v = n.args[0].value
        return ir.make_const(n.type, math.copysign(float(_ROUNDINGS[n.name](v)), v))  # (a zero keeps v's sign)
    return None


RULES = {
    ir.Add: (_vector_rules, add_rules),
    ir.Sub: (_vector_rules, sub_rules),
    ir.Mul: (_vector_rules, mul_rules),
    ir.Div: (_vector_rules, div_rules),
    ir.Mod: (_vector_rules, mod_rules),
    ir.Min: (min_rules,),
    ir.Max: (max_rules,),
    ir.EQ: (_vector_rules, cmp_rules),
    ir.NE: (_vector_rules, cmp_rules),
    ir.LT: (_vector_rules, cmp_rules),
    ir.LE: (_vector_rules, cmp_rules),
    ir.GT: (_vector_rules, cmp_rules),
    ir.GE: (_vector_rules, cmp_rules),
    ir.And: (and_rules,),
    ir.Or: (or_rules,),
    ir.Not: (not_rules,),
    ir.Select: (select_rules,),
    ir.Cast: (cast_rules,),
    ir.Let: (let_rules,),
    ir.Call: (call_rules,),
}



_INT32_RANGE = (-(2**31), 2**31 - 1)

_COMPARISONS = (ir.EQ, ir.NE, ir.LT, ir.LE, ir.GT, ir.GE)


def _decided(true_if: bool, false_if: bool):
    return True if true_if else False if false_if else None


# comparison class -> (lo, hi) of a - b -> True, False or None (undecided)
_COMPARISON_VERDICTS = {
    ir.LT: lambda lo, hi: _decided(hi < 0, lo >= 0),
    ir.LE: lambda lo, hi: _decided(hi <= 0, lo > 0),
    ir.GT: lambda lo, hi: _decided(lo > 0, hi <= 0),
    ir.GE: lambda lo, hi: _decided(lo >= 0, hi < 0),
    ir.EQ: lambda lo, hi: _decided(lo == hi == 0, lo > 0 or hi < 0),
    ir.NE: lambda lo, hi: _decided(lo > 0 or hi < 0, lo == hi == 0),
}

# The simplified form of an expression outside any loop ranges is kept in its `_simplified`
# slot, shared by every Simplify: lowering simplifies the same subexpressions again and again
# (each bounds query substitutes lets, already simplified, into expressions and simplifies the
# result). A result is marked as its own simplified form (_SELF, not a reference to itself, which
# would be a reference cycle): the simplifier's results are fixed points, so a simplified value
# substituted into a larger expression is not walked again.
_SELF = object()


class _SettlingSubstitution(Substitution):
    """Substitution that takes a select's arm where the substituted condition compares constants
    (as simplifying would): the other arm is neither substituted nor simplified, so each unrolled
    copy of a long mux's select tree walks one path of it."""

    def visit_Select(self, e):
        c = self.mutate(e.condition)
        if isinstance(c, _COMPARISONS) and c.type.lanes == 1:
            folded = _fold(c)
            if folded is not None:
                return self.mutate(e.true_value if folded.value else e.false_value)
        t, f = self.mutate(e.true_value), self.mutate(e.false_value)
        if c is e.condition and t is e.true_value and f is e.false_value:
            return e
        return ir.Select(c, t, f)


class Simplify(IRMutator):
    """Rules plus what the enclosing loops say: inside a loop with constant bounds (and lets of
    such loop variables) each integer variable has a constant range, and a min or max whose
    operands' ranges don't overlap is the operand it must pick (as Halide's simplifier does with
    its bounds of loop variables). Simplified results are cached per range scope.

    Lets with trivial values are substituted as the statements below them are simplified: each
    expression is substituted just before it is simplified (`subst`, which loops and lets that
    rebind a name shadow), rather than the whole body at once for every chain of lets."""

    def __init__(self):
        super().__init__()
        self.subst: dict[str, ir.Expr] = {}
        self._substitution: Substitution | None = None  # for self.subst; None when it changed
        self.cache: dict = {}
        self.ranges: dict[str, tuple[int, int]] = {}
        self.scope = 0  # which set of ranges the cache entries were made under
        self._scopes = itertools.count(1)
        self._range_cache: dict = {}
        # the conditions of the enclosing ifs, true in their then branch and false in their else
        # (a specialization's loop nest inside another of the same condition keeps one branch)
        self.known_conditions: dict[ir.Expr, bool] = {}
        self.let_names: set[str] = set()  # the lets kept around the statement being simplified

    def _with_ranges(self, new: dict[str, tuple[int, int] | None], fn):
        saved = {n: self.ranges.get(n) for n in new}
        if not any(v is not None or saved[n] is not None for n, v in new.items()):
            return fn()
        saved_scope = self.scope
        for n, v in new.items():
            if v is None:
                self.ranges.pop(n, None)
            else:
                self.ranges[n] = v
        self.scope = next(self._scopes)
        try:
            return fn()
        finally:
            for n, v in saved.items():
                if v is None:
                    self.ranges.pop(n, None)
                else:
                    self.ranges[n] = v
            self.scope = saved_scope

    def _bind_range(self, name: str, r: tuple[int, int] | None, saved: dict) -> None:
        """From now on `name` has range r (None: unknown), in a new scope if that changes the
        ranges; its range before the first such change goes into saved, for restoring."""
        current = self.ranges.get(name)
        if r is None and current is None:
            return
        saved.setdefault(name, current)
        if r is None:
            del self.ranges[name]
        else:
            self.ranges[name] = r
        self.scope = next(self._scopes)

    def const_range(self, e) -> tuple[int, int] | None:
        """Constant [lo, hi] of an integer expression under the loop ranges, or None."""
        key = (id(e), self.scope)
        hit = self._range_cache.get(key)
        if hit is not None and hit[0] is e:
            return hit[1]
        r = self._range(e)
        # a range past what the type holds means the arithmetic may wrap (uint16 x % 16 - 10
        # spans [-10, 5] unwrapped, and both ends of uint16's range wrapped)
        if r is not None and not (_INT32_RANGE[0] <= r[0] and r[1] <= _INT32_RANGE[1]
                                  and e.type.can_represent(r[0]) and e.type.can_represent(r[1])):
            r = None
        self._range_cache[key] = (e, r)
        return r

    def _range(self, e):
        if not _is_int(e.type):
            return None
        c = _c(e)
        if c is not None:
            return (c, c)
        if isinstance(e, ir.Variable):
            return self.ranges.get(e.name)
        if isinstance(e, ir.Broadcast):
            return self.const_range(e.value)
        if isinstance(e, ir.Ramp):
            base, stride = self.const_range(e.base), _c(e.stride)
            if base is None or stride is None:
                return None
            span = stride * (e.lanes - 1)
            return (base[0] + min(0, span), base[1] + max(0, span))
        if isinstance(e, ir.Cast) and e.type.is_int() and e.type.bits >= 32:
            return self.const_range(e.value) if _is_int(e.value.type) else None
        if not isinstance(e, ir.Add | ir.Sub | ir.Mul | ir.Min | ir.Max | ir.Div | ir.Mod):
            return None
        b = self.const_range(e.b)
        if isinstance(e, ir.Mod | ir.Div) and (b is None or b[0] != b[1] or b[0] <= 0):
            return None
        if isinstance(e, ir.Mod):
            return (0, b[0] - 1)
        a = self.const_range(e.a)
        if a is None or b is None:
            return None
        if isinstance(e, ir.Add):
            return (a[0] + b[0], a[1] + b[1])
        if isinstance(e, ir.Sub):
            return (a[0] - b[1], a[1] - b[0])
        if isinstance(e, ir.Min):
            return (min(a[0], b[0]), min(a[1], b[1]))
        if isinstance(e, ir.Max):
            return (max(a[0], b[0]), max(a[1], b[1]))
        if isinstance(e, ir.Div):
            return (a[0] // b[0], a[1] // b[0])
        products = [x * y for x in a for y in b]
        return (min(products), max(products))

    def _settle_min_max(self, e):
        """min(a, b) -> a when a <= b everywhere in the loop ranges (and so on)."""
        a, b = self.const_range(e.a), self.const_range(e.b)
        if a is None or b is None:
            return None
        if a[1] <= b[0]:
            return e.a if isinstance(e, ir.Min) else e.b
        if b[1] <= a[0]:
            return e.b if isinstance(e, ir.Min) else e.a
        return None

    def _settle_division(self, e):
        """a / c -> k and a % c -> a - k * c where a lies in [k * c, (k + 1) * c) everywhere in the
        loop ranges: a fused loop's coordinates, ramp(0, 1, 6) / 6 and % 6, in a vector of 6."""
        c = self.const_range(e.b)
        if c is None or c[0] != c[1] or c[0] <= 0 or not _is_int(e.type):
            return None
        a = self.const_range(e.a)
        if a is None or a[0] // c[0] != a[1] // c[0]:
            return None
        k = _const(e.type, a[0] // c[0])
        if isinstance(e, ir.Div):
            return k
        return e.a if a[0] // c[0] == 0 else ir.Sub(e.a, ir.Mul(k, e.b))

    def _settle_comparison(self, e):
        """A comparison of integers that the loop ranges decide, as a constant: a GuardWithIf
        guard of a loop whose tile divides the extent, or of an unrolled copy, is always true."""
        if not _no_overflow(e.a.type):
            return None
        d = self.const_range(e.a), self.const_range(e.b)
        if d[0] is not None and d[1] is not None:
            lo, hi = d[0][0] - d[1][1], d[0][1] - d[1][0]
        else:  # a - b, where what the operands share cancels (x + c < x + 32)
            r = self.const_range(self.simplify_expr(ir.Sub(e.a, e.b)))
            if r is None:
                return None
            lo, hi = r
        verdict = _COMPARISON_VERDICTS[type(e)](lo, hi)
        return None if verdict is None else _const(e.type, int(verdict))

    def mutate(self, node):
        if node is None:
            return None
        if isinstance(node, ir.Expr):
            if self.subst:
                if self._substitution is None:
                    self._substitution = _SettlingSubstitution(self.subst)
                node = self._substitution.mutate(node)
            return self.simplify_expr(node)
        return super().mutate(node)

    def _set_subst(self, subst: dict[str, ir.Expr]) -> None:
        self.subst, self._substitution = subst, None

    def _without(self, name: str, fn):
        """fn() with `name` no longer substituted, nor in a known condition (a loop binds it again)."""
        known = self._forget_conditions_of(name)
        if name not in self.subst:
            try:
                return fn()
            finally:
                self.known_conditions = known
        outer, outer_substitution = self.subst, self._substitution
        self._set_subst({k: v for k, v in outer.items() if k != name})
        try:
            return fn()
        finally:
            self.subst, self._substitution = outer, outer_substitution
            self.known_conditions = known

    def _forget_conditions_of(self, name: str) -> dict:
        """Drop the known conditions that use `name` (bound again here); returns them all, to restore."""
        known = self.known_conditions
        if any(name in free_variables(c) for c in known):
            self.known_conditions = {c: h for c, h in known.items() if name not in free_variables(c)}
        return known

    def simplify_expr(self, e):
        if not e._children:
            return e  # a constant or a variable
        # Loop ranges only ever settle mins, maxes, comparisons, divisions and modulos (no rule
        # makes one), so an expression without any simplifies as it would outside every loop.
        if self.scope and has_ranged(e):
            key = (id(e), self.scope)
            hit = self.cache.get(key)
            if hit is not None and hit[0] is e:
                return hit[1]
        else:
            key = None
            hit = getattr(e, "_simplified", None)
            if hit is not None:
                return e if hit is _SELF else hit
        result = e
        fixed_point = False
        for _ in range(64):
            if isinstance(result, ir.BinaryOp):  # most nodes: simplify the operands, fold
                a, b = result.a, result.b
                new_a = a if not a._children else self.simplify_expr(a)
                new_b = b if not b._children else self.simplify_expr(b)
                if new_a is not a or new_b is not b:
                    result = type(result)(new_a, new_b)
                folded = _fold(result)
                if folded is not None:
                    result = folded
                    break
            else:
                result = map_children(result, self.simplify_expr)
            new = None
            for rule in RULES.get(type(result), ()):
                new = rule(result)
                if new is not None:
                    break
            if new is None and (self.ranges or result.type.lanes > 1):  # (a ramp's lanes have ranges)
                if isinstance(result, ir.Min | ir.Max):
                    new = self._settle_min_max(result)
                elif isinstance(result, _COMPARISONS):
                    new = self._settle_comparison(result)
                elif isinstance(result, ir.Div | ir.Mod):
                    new = self._settle_division(result)
            if new is None or new is result:
                fixed_point = True  # no rule applies to it, and its children are simplified
                break
            result = new
        if key is None:
            object.__setattr__(e, "_simplified", _SELF if result is e else result)
            if fixed_point and result is not e:
                object.__setattr__(result, "_simplified", _SELF)
        else:
            self.cache[key] = (e, result)  # keeps e alive, so its id stays unique
        return result

    # ---- statements
    def visit_LetStmt(self, s):
        """A whole chain of lets at once: trivial values are substituted, unused lets dropped.

        Working on the chain (not let by let) keeps this linear in the size of the body.
        """
        chain = []
        while isinstance(s, ir.LetStmt):
            chain.append((s.name, s.value))
            s = s.body
        outer, outer_substitution = self.subst, self._substitution
        subst = dict(outer)  # the enclosing substitutions, then this chain's
        self._set_subst(subst)
        kept = []
        # the ranges of the lets kept so far, in force for the values after them and the body
        outer_ranges: dict[str, tuple[int, int] | None] = {}
        outer_scope = self.scope
        added = set()  # the names this chain adds to let_names
        known = self.known_conditions
        try:
            values: dict[ir.Expr, str] = {}  # the values of this chain's kept lets -> their names
            for name, value in chain:
                value = self.mutate(value)
                self._forget_conditions_of(name)
                for stale in [v for v in values if name in free_variables(v)]:  # (values this let rebinds)
                    del values[stale]
                offset = _constant_offset(value)
                if value in values:  # the same value as a let before it: `x.min` and `x.max.base`
                    subst[name] = ir.Variable(values[value], value.type)
                    self._set_subst(subst)
                elif _is_simple(value):
                    subst[name] = value
                    self._set_subst(subst)
                elif offset is not None and f"{name}.base" not in self.let_names:
                    # Halide's rule: `let x = a + c` binds a, and x becomes `x.base + c` in its
                    # uses, where the constant folds: unrolled rows y, y + 1, ... then index a
                    # row they share by the same expression, and load it once
                    base = values.get(value.a)
                    if base is None:
                        base = values[value.a] = f"{name}.base"
                        kept.append((base, value.a))
                        added.add(base)
                        self.let_names.add(base)
                        self._bind_range(base, self.const_range(value.a), outer_ranges)
                    subst[name] = ir.Add(ir.Variable(base, value.type), offset)
                    self._set_subst(subst)
                else:
                    if name in subst:  # this let hides an enclosing one
                        del subst[name]
                        self._set_subst(subst)
                    kept.append((name, value))
                    values[value] = name
                    if name not in self.let_names:
                        added.add(name)
                        self.let_names.add(name)
                    self._bind_range(name, self.const_range(value), outer_ranges)
            body = self.mutate(s)
        finally:
            self.let_names -= added
            self.subst, self._substitution = outer, outer_substitution
            self.known_conditions = known
            for name, r in outer_ranges.items():
                if r is None:
                    self.ranges.pop(name, None)
                else:
                    self.ranges[name] = r
            self.scope = outer_scope
        used = free_variables(body)
        result = body
        for name, value in reversed(kept):
            if name in used:
                used |= free_variables(value)
                result = ir.LetStmt(name, value, result)
        remember_free_variables(result, used)  # the chains around this one ask again
        return result

    def visit_For(self, s):
        lo, extent = self.mutate(s.min), self.mutate(s.extent)
        ext = ir.const_int(extent)
        if ext is not None and ext <= 0:
            return ir.make_block([])
        if ext == 1 and s.for_type in (ir.SERIAL, ir.PARALLEL, ir.UNROLLED):
            # one iteration: its variable is a value (GPU loops keep their meaning; vectorized
            # loops are the vectorizer's to remove)
            return self.mutate(ir.LetStmt(s.name, lo, s.body))
        lo_range = self.const_range(lo)
        loop_range = None if lo_range is None or ext is None else (lo_range[0], lo_range[1] + ext - 1)
        body = self._without(s.name, lambda: self._with_ranges({s.name: loop_range}, lambda: self.mutate(s.body)))
        if ir.is_no_op(body):
            return body
        if lo is s.min and extent is s.extent and body is s.body:
            return s
        return ir.For(s.name, lo, extent, s.for_type, body)

    def visit_IfThenElse(self, s):
        condition = self.mutate(s.condition)
        if ir.is_const(condition) or condition in self.known_conditions:
            holds = _c(condition) if ir.is_const(condition) else self.known_conditions[condition]
            branch = s.then_case if holds else s.else_case
            return self.mutate(branch) if branch is not None else ir.make_block([])
        then_case = self._knowing(condition, True, s.then_case)
        else_case = None if s.else_case is None else self._knowing(condition, False, s.else_case)
        if condition is s.condition and then_case is s.then_case and else_case is s.else_case:
            return s
        return ir.IfThenElse(condition, then_case, else_case)

    def _knowing(self, condition: ir.Expr, holds: bool, s: ir.Stmt) -> ir.Stmt:
        if has_load(condition) or has_call(condition):  # memory the branch writes could change it
            return self.mutate(s)
        outer, outer_subst, outer_substitution = self.known_conditions, self.subst, self._substitution
        self.known_conditions = {**outer, condition: holds}
        flags = bool_values(condition, holds)  # (a specialization on a bool Param: its value inside)
        if flags:
            self._set_subst({**outer_subst, **flags})
        try:
            return self.mutate(s)
        finally:
            self.known_conditions = outer
            if flags:
                self.subst, self._substitution = outer_subst, outer_substitution

    def visit_AssertStmt(self, s):
        new = self.default(s)
        if ir.is_const(new.condition) and _c(new.condition):
            return ir.make_block([])
        return new

    def visit_Block(self, s):
        stmts = [self.mutate(x) for x in s.stmts]
        if all(a is b for a, b in zip(stmts, s.stmts)):
            return s
        return ir.make_block(stmts)


def _is_simple(value) -> bool:
    """Lets worth substituting: constants, variables, and a variable plus a constant (so that
    `max - min` of a fixed-size region folds to its width)."""
    if isinstance(value, ir.IntImm | ir.FloatImm | ir.Variable):
        return True
    return (isinstance(value, ir.Add) and isinstance(value.a, ir.Variable) and isinstance(value.b, ir.IntImm)
            and value.type.is_int() and value.type.bits >= 32)


def _constant_offset(value) -> ir.Expr | None:
    """c, where value is `a + c` over scalar integers of 32 bits or more (a not a constant)."""
    if (isinstance(value, ir.Add) and isinstance(value.b, ir.IntImm) and not isinstance(value.a, ir.IntImm)
            and value.type.is_int() and value.type.bits >= 32 and value.type.lanes == 1):
        return value.b
    return None


def simplify(node):
    """Simplify an Expr or a Stmt."""
    if isinstance(node, ir.Expr):  # already known: no need for a Simplify
        if not node._children:
            return node
        known = getattr(node, "_simplified", None)
        if known is not None:
            return node if known is _SELF else known
    return Simplify().mutate(node)
