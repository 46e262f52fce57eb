"""Interval arithmetic over symbolic Exprs, and the boxes of a Func that a statement touches.

An Interval's min or max is None when unbounded. Variables not in the scope are free symbols
(point intervals); loop variables and lets inside the analysed statement get their intervals.
Narrow and unsigned integer arithmetic may wrap, so unless constant bounds prove otherwise its
interval is the whole type range: an index that wraps can then never escape the checked region.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import ir
from .extern import CALL_EXTERN, EXTERN_OUTPUT
from .ir_mutator import (
    DagMutator,
    IRMutator,
    IRVisitor,
    affine_in,
    called_names,
    calls_out,
    children,
    expr_free_variables,
    free_variables,
    has_let,
    substitute,
    substitute_lets,
    touched_names,
)
from .scatter_gather import SCATTER_GATHER
from .simplify import simplify
from .types import Int


@dataclass(frozen=True)
class Interval:
    min: ir.Expr | None
    max: ir.Expr | None

    @staticmethod
    def point(e: ir.Expr) -> Interval:
        return Interval(e, e)

    def is_bounded(self) -> bool:
        return self.min is not None and self.max is not None

    def is_point(self) -> bool:
        return self.min is not None and self.min is self.max

    def is_single(self) -> bool:
        """min and max are the same expression (not necessarily the same object)."""
        return self.min is not None and (self.min is self.max or self.min == self.max)


_ONE = ir.make_const(Int(32), 1)


def _min(a, b):
    if a is None or b is None:
        return None
    return ir.Min(a, b)


def _max(a, b):
    if a is None or b is None:
        return None
    return ir.Max(a, b)


def interval_union(a: Interval | None, b: Interval | None) -> Interval | None:
    if a is None:
        return b
    if b is None:
        return a
    return Interval(_min(a.min, b.min), _max(a.max, b.max))


def box_union(a: list | None, b: list | None) -> list | None:
    """Per dimension, the union of two boxes (None: no box)."""
    if a is None or b is None:
        return a if b is None else b
    return [interval_union(x, y) for x, y in zip(a, b)]


def _type_range(t) -> Interval:
    if t.is_float() or t.is_handle() or (t.is_int() and t.bits >= 32) or (t.is_uint() and t.bits >= 32):
        return Interval(None, None)
    s = t.element_of()
    return Interval(ir.make_const(s, s.min_value()), ir.make_const(s, s.max_value()))


def narrower_than_type(iv: Interval, t) -> bool:
    """Whether iv is bounded and tighter than the range of type t."""
    whole = _type_range(t)
    return iv.is_bounded() and not (whole.is_bounded() and iv.min == whole.min and iv.max == whole.max)


def _divides_in_range(e: ir.Expr) -> bool:
    """A division by a constant other than 0 and -1: its quotient lies between its operand's
    bounds' quotients, never outside the type (`int16(v) / 1000` is within [-33, 32])."""
    c = ir.const_value(e.b) if isinstance(e, ir.Div) else None
    return c is not None and c not in (0, -1) and not e.type.is_float()


def _may_wrap(t) -> bool:
    return (t.is_uint() or t.bits < 32) and not t.is_float()


def _fits(t, iv: Interval) -> bool:
    lo, hi = ir.const_value(iv.min) if iv.min is not None else None, (
        ir.const_value(iv.max) if iv.max is not None else None)
    return lo is not None and hi is not None and t.can_represent(lo) and t.can_represent(hi)


def _exact_constant(e: ir.Expr | None):
    """e's value, where e is a constant expression of a signed type of 32 bits or more whose
    arithmetic stays in range (so folding it cannot wrap); else None."""
    if e is None:
        return None
    c = ir.const_value(e)
    if c is not None or not (e.type.is_int() and e.type.bits >= 32) or free_variables(e) or called_names(e):
        return c
    c = ir.const_value(simplify(e))
    return c if c is not None and abs(c) < 2**30 else None


# within_region(value, min, max, outermost): a stage's coordinate, where only values inside the
# stage's region [min, max] matter. A split that runs past the region (RoundUp, or ShiftInwards
# by more than the extent) computes points nobody reads; as in Halide, what they read of a Func
# computed outside the stage's loops (`outermost`, its outermost loop, is then one of the loops
# analysed) is not required of it: it is read from that Func's storage, which covers it,
# uncomputed. A Func computed inside the stage's loops is computed for what each iteration reads.
WITHIN_REGION = "within_region"


# predicate_loads(cond): a split's guard that Halide applies to the loads alone (PredicateLoads,
# RoundUpAndBlend): its loop writes every iteration, so the box written is not narrowed by it
# (an output then grows as Halide grows it), while what is read is. pyhalide guards the whole
# iteration: the values are the same, and nothing is written past what the box says.
PREDICATE_LOADS = "predicate_loads"

# unsafe_promise_clamped(value, min, max): the user's promise (hl.unsafe_promise_clamped) that
# value lies in [min, max]; bounds take it, as Halide's do.
UNSAFE_PROMISE_CLAMPED = "unsafe_promise_clamped"


@dataclass
class RequiredRegion:
    """Asks box_touched for the region a Func must compute (what stages' regions read of it);
    `clamped` then says whether some stage reads it past its own region (see WITHIN_REGION)."""

    clamped: bool = False


class _Bounds:
    """Intervals of expressions over one scope (which must not change while this is in use).

    Intervals are remembered per node (by id, keeping the node alive): the expressions analysed
    are DAGs whose shared subtrees would otherwise be analysed once per path to them."""

    def __init__(self, scope: dict[str, Interval], required: RequiredRegion | None = None):
        self.scope = scope
        self.required = required  # when given, within_region(v, lo, hi, _) is [lo, hi] at most
        self._fixed: dict[int, tuple] = {}
        self._memo: dict[int, tuple] = {}

    def _is_fixed(self, e) -> bool:
        """e uses no variable of the scope, so its interval is the single value e itself."""
        if called_names(e) or not self.scope.keys().isdisjoint(expr_free_variables(e)):
            return False  # reads memory, or uses a variable of the scope
        if not has_let(e):
            return True
        # only a let inside that binds a name of the scope can still say no
        key = id(e)
        entry = self._fixed.get(key)
        hit = entry[1] if entry is not None and entry[0] is e else None
        if hit is None:
            if isinstance(e, ir.Variable):
                hit = e.name not in self.scope
            elif isinstance(e, ir.Let):
                hit = self._is_fixed(e.value) and e.name not in self.scope and self._is_fixed(e.body)
            elif isinstance(e, ir.Call) and e.call_type in (ir.HALIDE, ir.IMAGE):
                hit = False  # a value read from memory
            else:
                hit = all(self._is_fixed(c) for c in children(e))
            self._fixed[key] = (e, hit)  # keeps e alive, so its id stays unique
        return hit

    def of(self, e: ir.Expr) -> Interval:
        hit = self._memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        iv = self._of(e)
        self._memo[id(e)] = (e, iv)
        return iv

    def _of(self, e: ir.Expr) -> Interval:
        if self._is_fixed(e):
            return Interval.point(e)
        method = getattr(self, "b_" + type(e).__name__, None)
        if method is None:
            return _type_range(e.type) if not e.type.is_bool() else _bool_range()
        iv = method(e)
        t = e.type
        if _may_wrap(t) and isinstance(e, ir.Add | ir.Sub | ir.Mul | ir.Div) and not _fits(t, iv) \
                and not _divides_in_range(e):
            return _type_range(t)
        return iv

    def b_IntImm(self, e):
        return Interval.point(e)

    b_FloatImm = b_IntImm

    def b_Variable(self, e):
        return self.scope.get(e.name) or Interval.point(e)

    def b_Add(self, e):
        a, b = self.of(e.a), self.of(e.b)
        return Interval(
            None if a.min is None or b.min is None else ir.Add(a.min, b.min),
            None if a.max is None or b.max is None else ir.Add(a.max, b.max),
        )

    def b_Sub(self, e):
        a, b = self.of(e.a), self.of(e.b)
        return Interval(
            None if a.min is None or b.max is None else ir.Sub(a.min, b.max),
            None if a.max is None or b.min is None else ir.Sub(a.max, b.min),
        )

    def b_Mul(self, e):
        a, b = self.of(e.a), self.of(e.b)
        if a.is_point() and b.is_point():
            return Interval.point(ir.Mul(a.min, b.min))
        cb, ca = ir.const_value(e.b), ir.const_value(e.a)
        if cb is None and ca is not None:
            a, b, cb = b, a, ca
        if cb is not None:
            if cb >= 0:
                return Interval(
                    None if a.min is None else ir.Mul(a.min, b.min),
                    None if a.max is None else ir.Mul(a.max, b.min),
                )
            return Interval(
                None if a.max is None else ir.Mul(a.max, b.min),
                None if a.min is None else ir.Mul(a.min, b.min),
            )
        if not (a.is_bounded() and b.is_bounded()):
            return Interval(None, None)
        p = [ir.Mul(x, y) for x in (a.min, a.max) for y in (b.min, b.max)]
        return Interval(ir.Min(ir.Min(p[0], p[1]), ir.Min(p[2], p[3])), ir.Max(ir.Max(p[0], p[1]), ir.Max(p[2], p[3])))

    def b_Div(self, e):
        a, b = self.of(e.a), self.of(e.b)
        if a.is_point() and b.is_point():
            return Interval.point(ir.Div(a.min, b.min))
        cb = ir.const_value(e.b)
        if cb is not None and cb != 0:
            if cb > 0:
                return Interval(
                    None if a.min is None else ir.Div(a.min, e.b),
                    None if a.max is None else ir.Div(a.max, e.b),
                )
            return Interval(
                None if a.max is None else ir.Div(a.max, e.b),
                None if a.min is None else ir.Div(a.min, e.b),
            )
        if e.type.is_float() and b.is_single() and a.is_bounded():
            # one divisor (a Param, say) of either sign: the quotient's ends swap with its sign, as
            # Halide bounds them (`i32(clamp(v, 0, 1) / sigma)` indexes a bounded grid)
            positive = ir.LT(ir.make_const(e.type, 0), b.min)
            lo, hi = ir.Div(a.min, b.min), ir.Div(a.max, b.min)
            return Interval(ir.Select(positive, lo, hi), ir.Select(positive, hi, lo))
        if e.type.is_float() or not a.is_bounded():
            return Interval(None, None)
        if b.is_single() and proven_positive(b.min):
            return Interval(ir.Div(a.min, b.min), ir.Div(a.max, b.min))  # monotonic for a positive divisor
        if b.min is not None and proven_positive(b.min):
            # For a positive divisor, a / b (Euclidean) moves one way in b for a fixed a: the
            # extremes are at b's ends (a fused loop's coordinate, fused / extent, stays >= 0).
            zero = ir.make_const(e.type, 0)
            if b.max is None:
                return Interval(ir.Min(ir.Div(a.min, b.min), zero), ir.Max(ir.Div(a.max, b.min), zero))
            return Interval(ir.Min(ir.Div(a.min, b.min), ir.Div(a.min, b.max)),
                            ir.Max(ir.Div(a.max, b.min), ir.Div(a.max, b.max)))
        # |a / b| <= |a| for integers (and a / 0 == 0)
        zero = ir.make_const(e.type, 0)
        neg_max = ir.Sub(zero, a.max)
        neg_min = ir.Sub(zero, a.min)
        return Interval(ir.Min(ir.Min(a.min, neg_max), zero), ir.Max(ir.Max(a.max, neg_min), zero))

    def b_Mod(self, e):
        a, b = self.of(e.a), self.of(e.b)
        if a.is_point() and b.is_point():
            return Interval.point(ir.Mod(a.min, b.min))
        if e.type.is_float():
            return Interval(None, None)
        zero = ir.make_const(e.type, 0)
        cb = ir.const_value(e.b)
        if cb is not None:
            return Interval(zero, ir.make_const(e.type, max(abs(cb) - 1, 0)))
        if b.is_single() and proven_positive(b.min):
            return Interval(zero, ir.Sub(b.min, ir.make_const(e.type, 1)))
        if not b.is_bounded():
            return Interval(None, None)
        one = ir.make_const(e.type, 1)
        mag = ir.Max(ir.Max(b.max, ir.Sub(zero, b.min)), one)
        return Interval(zero, ir.Sub(mag, one))

    def b_Min(self, e):
        a, b = self.of(e.a), self.of(e.b)
        lo = None if a.min is None or b.min is None else ir.Min(a.min, b.min)
        if a.max is None:
            hi = b.max
        elif b.max is None:
            hi = a.max
        else:
            hi = ir.Min(a.max, b.max)
        return Interval(lo, hi)

    def b_Max(self, e):
        a, b = self.of(e.a), self.of(e.b)
        hi = None if a.max is None or b.max is None else ir.Max(a.max, b.max)
        if a.min is None:
            lo = b.min
        elif b.min is None:
            lo = a.min
        else:
            lo = ir.Max(a.min, b.min)
        return Interval(lo, hi)

    def b_Select(self, e):
        return interval_union(self.of(e.true_value), self.of(e.false_value))

    def decide(self, cond) -> bool | None:
        """The value of an integer comparison over the whole scope, when its bounds settle it."""
        if not isinstance(cond, ir.LT | ir.LE | ir.GT | ir.GE) or not cond.a.type.is_int():
            return None
        diff = self.of(simplify(ir.Sub(cond.a, cond.b)))  # a - b

        def constant(bound):  # each bound is simplified only if the answer still needs it
            return None if bound is None else ir.const_int(simplify(bound))

        strict = isinstance(cond, ir.LT | ir.GT)
        if isinstance(cond, ir.GT | ir.GE):  # a > b: a - b > 0
            lo = constant(diff.min)
            if lo is not None and (lo > 0 or (lo == 0 and not strict)):
                return True
            hi = constant(diff.max)
            if hi is not None and (hi <= 0 if strict else hi < 0):
                return False
        else:  # a < b: a - b < 0
            hi = constant(diff.max)
            if hi is not None and (hi < 0 or (hi == 0 and not strict)):
                return True
            lo = constant(diff.min)
            if lo is not None and (lo >= 0 if strict else lo > 0):
                return False
        return None

    def b_Cast(self, e):
        a = self.of(e.value)
        t, src = e.type, e.value.type
        if t.is_bool():
            return _bool_range()
        if a.is_point():
            return Interval.point(ir.Cast(t, a.min))
        # order-preserving conversions: to float, from bool, to a wider type that holds every source value,
        # and float to 32/64-bit ints (truncation is monotonic; overflow is unspecified, as in Halide)
        widening = t.is_float() or src.is_bool() or (
            not src.is_float() and ((t.code == src.code and t.bits >= src.bits)
                                    or (t.is_int() and src.is_uint() and t.bits > src.bits)))
        if src.is_float() and not t.is_float():
            if not (t.is_int() and t.bits >= 32):
                return _type_range(t)
            widening = True
        if widening:
            return Interval(
                None if a.min is None else ir.Cast(t, a.min),
                None if a.max is None else ir.Cast(t, a.max),
            )
        if _fits(t, a):
            return Interval(ir.Cast(t, a.min), ir.Cast(t, a.max))
        return _type_range(t)

    def b_Let(self, e):
        inner = _Bounds(dict(self.scope), self.required)
        inner.scope[e.name] = self.of(e.value)
        return inner.of(e.body)

    def b_Call(self, e):
        if e.call_type == ir.INTRINSIC and e.name == "likely":
            return self.of(e.args[0])
        if e.call_type == ir.INTRINSIC and e.name == "require":  # (its value, where it does not fail)
            return self.of(e.args[1])
        if e.call_type == ir.INTRINSIC and e.name == "promise_clamped":
            # promise_clamped(value, lo, hi, outer): over all iterations of the outer loop the
            # value spans [lo, hi]; for one iteration, its own interval is the tighter answer.
            if free_variables(e.args[3]) & self.scope.keys():
                return Interval(self.of(e.args[1]).min, self.of(e.args[2]).max)
            return self.of(e.args[0])
        if e.call_type == ir.INTRINSIC and e.name == AT_MOST:
            a, m = self.of(e.args[0]), self.of(e.args[1])
            hi = m.max if a.max is None else (a.max if m.max is None else ir.Min(a.max, m.max))
            return Interval(a.min, hi)
        if e.call_type == ir.INTRINSIC and e.name == WITHIN_REGION:
            a = self.of(e.args[0])
            if self.required is None or e.args[3].name not in self.scope:
                return a
            self.required.clamped = True
            return _within(a, self.of(e.args[1]).min, self.of(e.args[2]).max)
        if e.call_type == ir.INTRINSIC and e.name == UNSAFE_PROMISE_CLAMPED:
            return _within(self.of(e.args[0]), self.of(e.args[1]).min, self.of(e.args[2]).max)
        if e.call_type == ir.INTRINSIC and e.name == SCATTER_GATHER:  # (any of its elements)
            result = None
            for a in e.args:
                result = interval_union(result, self.of(a))
            return result
        if e.call_type == ir.INTRINSIC and e.name in _BIT_COUNTS:  # (0 to every bit of the operand)
            return Interval(ir.make_const(e.type, 0), ir.make_const(e.type, e.args[0].type.bits))
        if e.call_type == ir.INTRINSIC and e.name == "abs":
            t, a = e.args[0].type, self.of(e.args[0])
            if t.is_uint():
                return a
            if t.is_float():  # (never below zero, also where unbounded above)
                hi = ir.Max(a.max, ir.Sub(ir.make_const(t, 0), a.min)) if a.is_bounded() else None
                return Interval(ir.make_const(e.type, 0), hi)
            lo, hi = _exact_constant(a.min), _exact_constant(a.max)
            if lo is not None and hi is not None:  # (folded: a cast of it keeps its range)
                return Interval(ir.make_const(e.type, 0), ir.make_const(e.type, max(-lo, hi, 0)))
            if a.is_bounded():  # (-min in a type wide enough for it: the narrow one wraps)
                w = t if t.bits >= 32 else Int(32)
                m = ir.Max(ir.Cast(w, a.max), ir.Sub(ir.make_const(w, 0), ir.Cast(w, a.min)))
                return Interval(ir.make_const(e.type, 0), ir.Cast(e.type, m))
        if e.call_type == ir.EXTERN and e.name in ("floor", "ceil", "round", "trunc"):
            a = self.of(e.args[0])
            return Interval(
                None if a.min is None else ir.Call(e.type, e.name, (a.min,), ir.EXTERN),
                None if a.max is None else ir.Call(e.type, e.name, (a.max,), ir.EXTERN),
            )
        if e.call_type == ir.HALIDE and e.func is not None:
            return func_value_bounds(e.func, e.value_index)
        if e.type.is_bool():
            return _bool_range()
        return _type_range(e.type)


_BIT_COUNTS = ("popcount", "count_leading_zeros", "count_trailing_zeros")


def func_value_bounds(f, k: int) -> Interval:
    """The values element k of Func f can take anywhere (Halide's function value bounds): the
    bounds of its pure definition over every coordinate (constants, or in terms of Params); a Func
    with updates, its type's range.
    `hist(im(r)) += 1` with `im(x) = x * x % 7` writes hist over [0, 6]."""
    t = f.types()[k]
    if t.is_bool():
        return _bool_range()
    if f._updates or f._init is None or not t.is_int() and not t.is_uint():
        return _type_range(t)
    cache = f.__dict__.setdefault("_value_bounds", {})
    key = (k, f._version)
    if key not in cache:
        cache[key] = Interval(None, None)  # (what a Func asks of itself while this is worked out)
        iv = bounds_of_expr(f._init.values[k], {n: Interval(None, None) for n in f._pure_args})
        simple = Interval(None if iv.min is None else simplify(iv.min), None if iv.max is None else simplify(iv.max))
        fits = all(b is None or not (called_names(b) or reads_other_than_params(b)) for b in (simple.min, simple.max))
        cache[key] = simple if fits else _type_range(t)
    return cache[key]


class _NonParams(IRVisitor):
    visit_once = True

    def __init__(self):
        super().__init__()
        self.found = False

    def visit_Variable(self, v):
        from .param import ImageParam, OutputImageParam, Param

        self.found = self.found or not isinstance(v.ref, Param | ImageParam | OutputImageParam)


def reads_other_than_params(e: ir.Expr) -> bool:
    """Whether e uses a variable other than the pipeline's Params and its buffers' dimensions
    (which are known for the whole run: a bound in terms of them holds everywhere)."""
    finder = _NonParams()
    finder.visit(e)
    return finder.found


def _within(a: Interval, lo: ir.Expr | None, hi: ir.Expr | None) -> Interval:
    """a, where it is known to lie in [lo, hi] (None: unbounded on that side)."""
    return Interval(lo if a.min is None else (a.min if lo is None else ir.Max(a.min, lo)),
                    hi if a.max is None else (a.max if hi is None else ir.Min(a.max, hi)))


def proven_positive(e: ir.Expr) -> bool:
    """True when e is certainly >= 1 (a positive constant, or a max/sum/product that forces it)."""
    c = ir.const_value(e)
    if c is not None:
        return c >= 1
    if isinstance(e, ir.Max):
        return proven_positive(e.a) or proven_positive(e.b)
    if isinstance(e, ir.Mul | ir.Min):
        return proven_positive(e.a) and proven_positive(e.b)
    return False


def _select(cond, a, b):
    if a is None or b is None:
        return None
    return ir.Select(cond, a, b)


def _compared_variables(cond: ir.Expr) -> set[str]:
    """The variables a condition compares directly (the ones _narrow can narrow)."""
    if isinstance(cond, ir.And):
        return _compared_variables(cond.a) | _compared_variables(cond.b)
    if isinstance(cond, ir.LT | ir.LE | ir.GT | ir.GE):
        return {x.name for x in (cond.a, cond.b) if isinstance(x, ir.Variable)}
    return set()


def _narrow(scope: dict, cond: ir.Expr, expand=None) -> dict | None:
    """The scope with variables narrowed by a condition known true (a < b, a <= b, ... and &&).
    `expand` rewrites the other side in terms of the scope's variables (substituting lets), so
    that its bound keeps the correlations between them."""
    if isinstance(cond, ir.And):
        inner = _narrow(scope, cond.a, expand) or scope
        return _narrow(inner, cond.b, expand) or inner
    if not isinstance(cond, ir.LT | ir.LE | ir.GT | ir.GE) or cond.a.type.is_float():
        return None
    a, b = cond.a, cond.b
    if isinstance(cond, ir.GT | ir.GE):  # b < a, b <= a
        a, b = b, a
    strict = isinstance(cond, ir.LT | ir.GT)
    one = ir.make_const(a.type, 1)
    new = None
    if expand is not None:
        a = a if isinstance(a, ir.Variable) and a.name in scope else expand(a)
        b = b if isinstance(b, ir.Variable) and b.name in scope else expand(b)
    if isinstance(a, ir.Variable) and a.name in scope:
        hi = _Bounds(scope).of(b).max
        if hi is not None:
            iv = scope[a.name]
            limit = ir.Sub(hi, one) if strict else hi
            new = dict(scope)
            new[a.name] = Interval(iv.min, limit if iv.max is None else ir.Min(iv.max, limit))
    if isinstance(b, ir.Variable) and b.name in scope:
        lo = _Bounds(scope).of(a).min
        if lo is not None:
            base = new or dict(scope)
            iv = base[b.name]
            limit = ir.Add(lo, one) if strict else lo
            base[b.name] = Interval(limit if iv.min is None else ir.Max(iv.min, limit), iv.max)
            new = base
    if cond.a.type == Int(32):
        bare = {x.name for x in (a, b) if isinstance(x, ir.Variable)}
        new = _narrow_affine(new or scope, ir.Sub(a, b), strict, bare) or new
    return new


def _narrow_affine(scope: dict, d: ir.Expr, strict: bool, skip: set) -> dict | None:
    """The scope with each variable v (not in skip) that d is affine in, d == c*v + rest with c a
    constant, narrowed to where `d < 0` (strict) or `d <= 0` can hold, over the other variables'
    ranges: Halide's bounds of an if's branch solve its condition for each variable
    (`2*r.x + 30 < r.y` bounds r.x by r.y's range, not only r.y by r.x's)."""
    new = None
    for v in sorted(expr_free_variables(d) & scope.keys() - skip):
        lin = affine_in(d, v)
        if lin is None or lin[0] == 0:
            continue
        c, rest = lin
        current = new or scope
        low = _Bounds(current).of(rest).min  # the condition needs c*v <= -rest (- 1 if strict)
        if low is None:
            continue
        e = ir.Add(low, ir.make_const(low.type, 1)) if strict else low
        iv = current[v]
        new = dict(current)
        if c > 0:  # v <= floor(-e / c)
            limit = ir.Div(ir.Sub(ir.make_const(e.type, 0), e), ir.make_const(e.type, c))
            new[v] = Interval(iv.min, limit if iv.max is None else ir.Min(iv.max, limit))
        else:  # v >= ceil(e / -c)
            limit = ir.Div(ir.Add(e, ir.make_const(e.type, -c - 1)), ir.make_const(e.type, -c))
            new[v] = Interval(limit if iv.min is None else ir.Max(iv.min, limit), iv.max)
    return new


def _bool_range() -> Interval:
    from .types import Bool

    return Interval(ir.make_const(Bool(), 0), ir.make_const(Bool(), 1))


class _SettleChoices(IRMutator):
    def __init__(self, scope):
        super().__init__()
        self.bounds = _Bounds(scope)
        self.memo: dict[int, tuple] = {}

    def mutate(self, node):
        # the result depends only on the node (the scope is fixed): shared subtrees settle once
        hit = self.memo.get(id(node))
        if hit is not None:
            return hit[1]
        result = super().mutate(node)
        self.memo[id(node)] = (node, result)  # keeps node alive, so its id stays unique
        return result

    def visit_Select(self, e):
        taken = self.bounds.decide(e.condition)
        if taken is None:
            return self.default(e)
        return self.mutate(e.true_value if taken else e.false_value)

    def _min_max(self, e):
        a_wins = self.bounds.decide(ir.LE(e.a, e.b) if isinstance(e, ir.Min) else ir.GE(e.a, e.b))
        if a_wins is None:
            return self.default(e)
        return self.mutate(e.a if a_wins else e.b)

    visit_Min = visit_Max = _min_max


def settle_choices(e: ir.Expr, scope: dict[str, Interval]) -> ir.Expr:
    """e with each select, min and max whose outcome is the same over the whole scope replaced by
    the operand it picks."""
    return _SettleChoices(scope).mutate(e)


def constant_bound(e: ir.Expr, upper: bool, memo: dict | None = None) -> int | None:
    """A constant that e never exceeds (upper) or never falls below, where its shape shows one:
    the max of a region clamped by a min (a GuardWithIf tail) has one, whatever the other side.
    Each shared subtree is bounded once (lets substituted make a DAG whose tree is exponential)."""
    value = ir.const_int(e)
    if value is not None:
        return value
    memo = {} if memo is None else memo
    hit = memo.get((id(e), upper))
    if hit is not None:
        return hit[1]

    def bound(x, up=upper):
        return constant_bound(x, up, memo)

    answer = None
    if isinstance(e, (ir.Min, ir.Max)):
        a, b = bound(e.a), bound(e.b)
        if isinstance(e, ir.Min) == upper:  # the upper bound of a min (lower of a max): either side's
            known = [v for v in (a, b) if v is not None]
            answer = (min if upper else max)(known) if known else None
        else:
            answer = None if a is None or b is None else (max if upper else min)(a, b)
    elif isinstance(e, ir.Add):
        a, b = bound(e.a), bound(e.b)
        answer = None if a is None or b is None else a + b
    elif isinstance(e, ir.Sub):
        if isinstance(e.a, ir.Min | ir.Max) and type(e.a) is type(e.b) and e.a.b == e.b.b:
            # min(p, c) - min(q, c) lies between 0 and p - q (a min or max moves no faster than
            # its operand): a GuardWithIf tile's clamped extent
            d = bound(simplify(ir.Sub(e.a.a, e.b.a)))
            if d is not None:
                answer = max(d, 0) if upper else min(d, 0)
        if answer is None and isinstance(e.b, ir.Max if upper else ir.Min):
            # a - max(p, q) is at most a - p and at most a - q (a - min(p, q) at least either): a
            # slid region's extent, `max - max(min, previous max + 1) + 1`
            known = [v for v in (bound(simplify(ir.Sub(e.a, e.b.a))), bound(simplify(ir.Sub(e.a, e.b.b))))
                     if v is not None]
            answer = (min if upper else max)(known) if known else None
        if answer is None:
            a, b = bound(e.a), bound(e.b, not upper)
            answer = None if a is None or b is None else a - b
    elif isinstance(e, ir.Select):
        a, b = bound(e.true_value), bound(e.false_value)
        answer = None if a is None or b is None else (max if upper else min)(a, b)
    elif isinstance(e, ir.Div | ir.Mod) and not e.type.is_float() and (ir.const_int(e.b) or 0) > 0:
        # by a positive constant: Euclidean, so a remainder lies in [0, c), a quotient moves with e.a
        c = ir.const_int(e.b)
        if isinstance(e, ir.Mod):
            answer = c - 1 if upper else 0
        else:
            a = bound(e.a)
            answer = None if a is None else a // c
    memo[(id(e), upper)] = (e, answer)  # (keeps e alive, so its id stays unique)
    return answer


def constant_upper_bound_within(e: ir.Expr, lets: dict[str, ir.Expr],
                                loops: dict[str, ir.For]) -> tuple[int | None, bool]:
    """(a constant e never exceeds where it is evaluated, whether e is exactly that constant), given
    the enclosing LetStmts' values and the enclosing loops: e with the lets substituted, if that is
    a constant; else a bound its shape shows (a min with a constant); else one through the loops'
    ranges. (None, False) when none is found."""
    exact = ir.const_int(e)
    if exact is not None:
        return exact, True
    e = simplify(substitute_lets(e, lets))
    exact = ir.const_int(e)
    if exact is not None:
        return exact, True
    ranges = {name: Interval(loop.min, simplify(ir.Add(loop.min, ir.Sub(loop.extent, ir.make_const(
        loop.extent.type, 1))))) for name, loop in loops.items()}

    def bound_of(e):
        most = constant_bound(e, upper=True)
        if most is None:
            bound = bounds_of_expr(e, ranges).max
            most = None if bound is None else constant_bound(simplify(bound), upper=True)
        return most

    most = bound_of(e)
    if most is None:
        # e with each select replaced by one of its arms, every way: the largest of their bounds
        # (a sliding window's first iteration: `y - select(c, y + 2, y)` is -2 or 0, where a bound
        # of the select alone loses that it moves with y)
        arms = [simplify(a) for a in _select_arms(e)]
        bounds = [bound_of(a) for a in arms]
        most = max(bounds) if arms and None not in bounds else None
    return most, False


MAX_SELECTS_SPLIT = 3  # selects tried arm by arm: 2^3 expressions at most


class _Selects(IRVisitor):
    visit_once = True

    def __init__(self):
        super().__init__()
        self.found: dict[ir.Select, None] = {}

    def visit_Select(self, node):
        self.found.setdefault(node)
        self.visit_children(node)


class _PickArms(IRMutator):
    def __init__(self, chosen: dict):
        super().__init__()
        self.chosen = chosen  # select -> the arm it becomes

    def visit_Select(self, node):
        arm = self.chosen.get(node)
        return self.default(node) if arm is None else self.mutate(arm)


def _select_arms(e: ir.Expr) -> list[ir.Expr]:
    """e with each of its selects replaced by one arm or the other, every way (none if e has no
    select or too many)."""
    finder = _Selects()
    finder.visit(e)
    selects = list(finder.found)
    if not selects or len(selects) > MAX_SELECTS_SPLIT:
        return []
    return [_PickArms({sel: sel.true_value if pick >> k & 1 else sel.false_value
                       for k, sel in enumerate(selects)}).mutate(e) for pick in range(2 ** len(selects))]


def bounds_of_expr(e: ir.Expr, scope: dict[str, Interval] | None = None) -> Interval:
    return _Bounds(scope or {}).of(e)


class LazyLet:
    """A let met inside an analysed statement, expanded only if something needs its value.

    Its expansion is its value (first passed through `prepare`, if given) with the lets it names
    substituted by their own expansions (as they were bound where it is defined: `deps`), then
    simplified, unless `simplified` is False (the value is then used as it is).
    """

    __slots__ = ("value", "deps", "simplified", "prepare", "expanded")

    def __init__(self, value: ir.Expr, lets: dict[str, LazyLet], simplified: bool, prepare=None):
        self.value = value
        self.deps = {n: lets[n] for n in expr_free_variables(value) if n in lets}
        self.simplified = simplified
        self.prepare = prepare
        self.expanded = None

    def expand(self) -> ir.Expr:
        # depth first without recursion: a chain of lets can be as long as the pipeline is deep
        stack = [self]
        while stack:
            let = stack[-1]
            if let.expanded is not None:
                stack.pop()
                continue
            waiting = [d for d in let.deps.values() if d.expanded is None]
            if waiting:
                stack.extend(waiting)
                continue
            stack.pop()
            value = let.value if let.prepare is None else let.prepare(let.value)
            let.expanded = _expanded(value, let.deps, let.simplified)
        return self.expanded


# Expansions already made, shared by every box collection: the same lets are met again by each
# Func's collection over the same statement. Keyed by the ids of the value and of the expansions
# substituted into it; each entry keeps those alive, so the ids stay unique while remembered.
_EXPANSIONS: dict[tuple, tuple] = {}
_EXPANSIONS_LIMIT = 1 << 14  # a lowering makes ~1000


def _expanded(e: ir.Expr, deps: dict, simplified: bool) -> ir.Expr:
    """e with the expansions of the lets it names substituted, simplified (unless simplified is
    False: no let was in scope, and e is left as it is)."""
    if not simplified:
        return e
    names = sorted(deps)
    values = tuple(deps[n].expanded for n in names)
    key = (id(e), *names, *map(id, values))
    hit = _EXPANSIONS.get(key)
    if hit is not None and hit[0] is e and all(a is b for a, b in zip(hit[1], values)):
        return hit[2]
    result = simplify(substitute(dict(zip(names, values)), e))
    if len(_EXPANSIONS) > _EXPANSIONS_LIMIT:
        _EXPANSIONS.clear()
    _EXPANSIONS[key] = (e, values, result)
    return result


class _BoxCollector(IRVisitor):
    """Union of the coordinates at which `name` is called (and, optionally, provided) in a Stmt.

    Lets inside the statement are substituted by their values (simplified), not by intervals,
    so that correlated bounds cancel (a loop over [0, max - min] with max = min + 15 has 16
    iterations, not an interval's worth of uncertainty); loops become intervals over the
    symbols outside the statement. Only what leads to a use of `name` is analysed: other
    subtrees are skipped, and a let's value is expanded only when something needs it.
    """

    def __init__(self, name: str, include_provides: bool, include_calls: bool, scope: dict[str, Interval],
                 sentinels: bool = False, required: RequiredRegion | None = None, outer_loops=frozenset()):
        super().__init__()
        self.outer_loops = outer_loops  # the loops around the statement (their variables are free in it)
        self.sentinels = sentinels
        self.required = required
        self.name = name
        self.include_provides = include_provides
        self.include_calls = include_calls
        self.scope = scope
        self.lets: dict[str, LazyLet] = {}
        # (u, m) where an enclosing branch runs only for u <= m: a GuardWithIf tail's clamp
        # `let x = min(u, m)` is u there, below m (its lower bound is u's, not m's: an m written
        # through other regions' lets loses the correlations that make it large)
        self.facts: frozenset = frozenset()
        self.box: list[Interval | None] | None = None
        self._scope_bounds: _Bounds | None = None  # for self.scope; None once it changes

    def _bounds(self) -> _Bounds:
        """Interval analysis over the current scope, shared by the uses analysed under it."""
        if self._scope_bounds is None:
            self._scope_bounds = _Bounds(self.scope, self.required)
        return self._scope_bounds

    def visit(self, node):
        # Only uses of `name` add to the box (calls in expressions, Provides): a subtree without
        # one has nothing to add, whatever its lets and loops.
        if node is None or self.name not in touched_names(node):
            return
        if isinstance(node, ir.Expr) and not self.include_calls and not (
                isinstance(node, ir.Call) and node.name in (CALL_EXTERN, EXTERN_OUTPUT)):
            return
        super().visit(node)

    def _expand(self, e: ir.Expr) -> ir.Expr:
        """e with the lets in scope substituted (simplified), or e itself if there are none."""
        if not self.lets:
            return e
        deps = {n: self.lets[n] for n in expr_free_variables(e) if n in self.lets}
        for let in deps.values():
            let.expand()
        return _expanded(e, deps, True)

    def _add(self, args):
        b = self._bounds()
        ivs = [b.of(self._expand(a)) for a in args]
        self.box = box_union(self.box, ivs)

    def visit_Call(self, c):
        if c.call_type == ir.INTRINSIC and c.name == EXTERN_OUTPUT:  # an extern stage writes its region
            if self.include_provides and c.args[0].name == self.name:
                for corner in c.args:
                    self._add(corner.args)
            return
        if self.include_calls and c.name == self.name and c.call_type in (ir.HALIDE, ir.IMAGE):
            self._add(c.args)
        self.visit_children(c)

    def visit_Provide(self, p):
        if self.include_provides and p.name == self.name:
            self._add(p.args)
        self.visit_children(p)

    def visit_Let(self, e):
        self.visit(e.value)
        self._with_let(e.name, e.value, e.body)

    def visit_LetStmt(self, s):
        self.visit(s.value)
        self._with_let(s.name, s.value, s.body)

    def _with_let(self, name, value, body):
        saved_let, saved_iv = self.lets.get(name), self.scope.pop(name, None)
        if saved_iv is not None:
            self._scope_bounds = None
        if calls_out(value):  # (an extern stage's call: run where it is, never copied; any value)
            self.lets.pop(name, None)
            self.scope[name] = Interval(None, None)
            self._scope_bounds = None
            self.visit(body)
            self._restore(name, saved_let, saved_iv)
            return
        if _clamp_made_redundant(value, self.facts):
            value = _at_most(value)
        self.lets[name] = LazyLet(value, self.lets, simplified=bool(self.lets))
        self.visit(body)
        self._restore(name, saved_let, saved_iv)

    def visit_For(self, s):
        self.visit(s.min)
        self.visit(s.extent)
        b = self._bounds()
        lo_e = self._expand(s.min)
        last = _loop_max(s)
        if last is not None:  # for (v, min, (max - min) + 1): v's last value is max, exactly
            last_e = self._expand(last)
        elif self.lets:
            # the simplifier works bottom up, so this is the expansion of min + extent - 1
            last_e = simplify(ir.Sub(ir.Add(lo_e, self._expand(s.extent)), _ONE))
        else:
            last_e = ir.Sub(ir.Add(s.min, s.extent), _ONE)
        iv = Interval(b.of(lo_e).min, b.of(last_e).max)
        saved_let, saved_iv = self.lets.pop(s.name, None), self.scope.get(s.name)
        self.scope[s.name] = iv
        self._scope_bounds = None
        self.visit(s.body)
        self._restore(s.name, saved_let, saved_iv)

    def _conditional(self, cond, s):
        """A branch on something fixed for the whole statement (a specialization): the box is the
        then-box where cond holds and the else-box where it does not."""
        outer = self.box
        self.box = None
        self.visit(s.then_case)
        then_box = self.box
        self.box = None
        self.visit(s.else_case)
        else_box = self.box
        self.box = outer
        if then_box is None and else_box is None:
            return
        if then_box is not None and else_box is not None:
            merged = [Interval(_select(cond, t.min, e.min), _select(cond, t.max, e.max))
                      for t, e in zip(then_box, else_box)]
        elif self.sentinels:
            # touched on one side only: the other side asks for nothing (an empty interval)
            big, small = ir.make_const(Int(32), 2**31 - 1), ir.make_const(Int(32), -(2**31))
            taken, when = (then_box, cond) if then_box is not None else (else_box, ir.Not(cond))
            merged = [Interval(_select(when, iv.min, big), _select(when, iv.max, small)) for iv in taken]
        else:
            merged = then_box if then_box is not None else else_box
        self.box = box_union(self.box, merged)

    def _restore(self, name, saved_let, saved_iv):
        self.lets.pop(name, None)
        if self.scope.pop(name, None) is not None or saved_iv is not None:
            self._scope_bounds = None
        if saved_let is not None:
            self.lets[name] = saved_let
        if saved_iv is not None:
            self.scope[name] = saved_iv

    def visit_IfThenElse(self, s):
        c = s.condition
        if isinstance(c, ir.Call) and c.call_type == ir.INTRINSIC and c.name == PREDICATE_LOADS:
            if self.include_provides:  # the writes are not guarded by it
                self.visit(s.then_case)
                self.visit(s.else_case)
                return
            s = ir.IfThenElse(c.args[0], s.then_case, s.else_case)
        self.visit(s.condition)
        cond = _without_at_most(self._expand(s.condition))  # (it may end up in the box)
        # an enclosing loop's variable the condition compares is a point it can narrow (the
        # branch may then touch an empty box there: a fused stage's guard on its own range)
        outer = {v for v in _compared_variables(s.condition) - self.scope.keys() - self.lets.keys()
                 if v in self.outer_loops}
        if not (free_variables(cond) & self.scope.keys()) and not outer:
            self._conditional(cond, s)
            return
        # variables the condition compares become intervals for the then-branch; the other sides
        # keep their lets, expanded, so that correlated bounds cancel
        saved_lets, saved_scope, saved_facts = dict(self.lets), dict(self.scope), self.facts
        self.scope.update({v: Interval.point(ir.Variable(v, Int(32))) for v in outer})
        self.facts = self.facts | _upper_bounds_held(s.condition)
        for name, let in saved_lets.items():
            if _clamp_made_redundant(let.value, self.facts):
                self.lets[name] = LazyLet(_at_most(let.value), self.lets, simplified=True)
        b = _Bounds(saved_scope, self.required)  # let values are expanded: they name no other let
        for v in _compared_variables(s.condition):
            if v in self.lets:
                value = self.lets.pop(v).expand()
                self.scope[v] = b.of(value)
        narrowed = _narrow(self.scope, s.condition, self._expand)
        if narrowed is not None:
            self.scope = narrowed
        else:
            self.lets, self.scope = saved_lets, saved_scope
        self._scope_bounds = None
        self.visit(s.then_case)
        self.lets, self.scope, self.facts = saved_lets, saved_scope, saved_facts
        self._scope_bounds = None
        self.visit(s.else_case)


def _upper_bounds_held(cond: ir.Expr) -> frozenset:
    """(u, m) for each `u <= m` (u a variable) a condition holds, alone or in a conjunction; `u <
    e` holds `u <= e - 1` (and `u <= m` where e is m + 1), as the clamps are written."""
    held = set()
    while isinstance(cond, ir.And):
        held |= _upper_bounds_held(cond.b)
        cond = cond.a
    if isinstance(cond, ir.LE) and isinstance(cond.a, ir.Variable):
        held.add((cond.a.name, cond.b))
    elif isinstance(cond, ir.LT) and isinstance(cond.a, ir.Variable):
        held.add((cond.a.name, ir.Sub(cond.b, ir.make_const(cond.b.type, 1))))
        if isinstance(cond.b, ir.Add) and ir.is_const(cond.b.b, 1):
            held.add((cond.a.name, cond.b.a))
    return frozenset(held)


AT_MOST = "bounds_at_most"  # at_most(u, m): u, known to be at most m (the box collector's own)


def _at_most(clamp: ir.Min) -> ir.Expr:
    """min(u, m) where u <= m holds: u, with m's upper bound still known (both bounds tight)."""
    return ir.Call(clamp.type, AT_MOST, (clamp.a, clamp.b), ir.INTRINSIC)


class _WithoutAtMost(IRMutator):
    def visit_Call(self, e):
        return self.mutate(e.args[0]) if e.name == AT_MOST else self.default(e)


def _without_at_most(e: ir.Expr) -> ir.Expr:
    return _WithoutAtMost().mutate(e)


def _clamp_made_redundant(value: ir.Expr, facts: frozenset) -> bool:
    """value is min(u, m) with u <= m known."""
    return bool(facts) and isinstance(value, ir.Min) and isinstance(value.a, ir.Variable) \
        and (value.a.name, value.b) in facts


def _loop_max(s: ir.For) -> ir.Expr | None:
    """max, for a loop written `for (v, min, (max - min) + 1)` (a stage's loop over its bounds):
    worked out from min + extent - 1 after the lets are substituted, the two copies of min can
    fail to cancel, and each then varies on its own (a fused loop's row twice as far)."""
    e = s.extent
    if (isinstance(e, ir.Add) and ir.is_const(e.b, 1) and isinstance(e.a, ir.Sub) and e.a.b == s.min):
        return e.a.a
    return None


def box_touched(stmt, name: str, include_provides: bool = False, include_calls: bool = True,
                scope=None, for_checks: bool = False, required: RequiredRegion | None = None,
                outer_loops=frozenset()) -> list[Interval] | None:
    """Per dimension, the interval of coordinates of `name` used in stmt (None if never used).

    Each bound is simplified; a bound is None when it cannot be bounded. With for_checks, a
    branch not taken contributes an empty interval (min above max), which only checks may use.
    With `required`, only what the stages' own regions use counts (the region `name` must
    compute), not what iterations a split runs past a region read (see WITHIN_REGION).
    `outer_loops`: the variables of the loops around stmt, which its guards may narrow.
    """
    collector = _BoxCollector(name, include_provides, include_calls, dict(scope or {}), for_checks, required,
                              outer_loops)
    collector.visit(stmt)
    if collector.box is None:
        return None
    return [
        Interval(None if iv.min is None else simplify(iv.min), None if iv.max is None else simplify(iv.max))
        for iv in collector.box
    ]


@dataclass(frozen=True)
class IndexGuard:
    """The interval of an Int(32) value that a coordinate of `callee` (dimension `dim`; None: the
    bounds of the loop `callee`) computes and then takes a min, max or quotient of, under
    `condition` (None: always)."""

    callee: str
    dim: int | None
    interval: Interval
    condition: ir.Expr | None


class _GuardCollector(_BoxCollector):
    """index_guards' walk: every coordinate of every call and provide, under the loops, lets and
    branches around it (as _BoxCollector analyses them)."""

    def __init__(self):
        super().__init__("", include_provides=True, include_calls=True, scope={})
        self.guards: list[IndexGuard] = []
        self.conditions: list[ir.Expr] = []

    def visit(self, node):
        if node is not None and touched_names(node):
            IRVisitor.visit(self, node)

    def _bounds(self) -> _Bounds:
        if self._scope_bounds is None:
            self._scope_bounds = _Bounds({**self.scope, _DATA: Interval(None, None)})
        return self._scope_bounds

    def _add_guards(self, callee: str, args, loop: bool = False) -> None:
        b = self._bounds()
        condition = None
        for c in self.conditions:
            condition = c if condition is None else ir.And(condition, c)
        data_as_any_value = _DataAsAnyValue()  # (one for all the operands: they share subexpressions)
        for dim, a in enumerate(args):
            for operand in _unsurvived_operands(self._expand(a)):
                interval = b.of(data_as_any_value.mutate(operand))
                self.guards.append(IndexGuard(callee, None if loop else dim, interval, condition))

    def visit_Call(self, c):
        if c.call_type in (ir.HALIDE, ir.IMAGE):
            self._add_guards(c.name, c.args)
        self.visit_children(c)

    def visit_Provide(self, p):
        self._add_guards(p.name, p.args)
        self.visit_children(p)

    def visit_For(self, s):
        # (a loop's bounds decide which coordinates its body computes)
        if touched_names(s.body):
            self._add_guards(s.name, (s.min, s.extent), loop=True)
        super().visit_For(s)

    def _conditional(self, cond, s):
        for branch, when in ((s.then_case, cond), (s.else_case, ir.Not(cond))):
            self.conditions.append(when)
            self.visit(branch)
            self.conditions.pop()


_I32 = Int(32)
_DATA = "index_guards.data"  # a value read from memory or converted from another type: any int32


def _unsurvived_operands(e: ir.Expr) -> list[ir.Expr]:
    """The operands, in coordinate e, of a min, max or division of Int(32) values: a wrap around
    2^32 there changes what e computes by more than a multiple of 2^32. (Sums, differences and
    products of wrapped values are still right modulo 2^32, and a coordinate then checked to lie
    in a buffer is right; a remainder by a positive constant lies in [0, c) whatever it divides.)
    Only e's own 32-bit index arithmetic is walked: a value read from memory or converted from
    another type is a number the bounds take from its type or definition, whatever its
    computation did (its wrapping is the data's, which no check before the run can see)."""
    found, seen, pending = [], set(), [e]
    while pending:
        n = pending.pop()
        if id(n) in seen or n.type != _I32:
            continue
        seen.add(id(n))
        if isinstance(n, ir.Let):
            pending += [n.value, substitute({n.name: n.value}, n.body)]
        elif isinstance(n, ir.Min | ir.Max | ir.Div):
            found += [o for o in (n.a, n.b) if not isinstance(o, ir.IntImm)]
            pending += [n.a, n.b]
        elif isinstance(n, ir.Mod):
            if not (ir.const_int(n.b) or 0) > 0:
                found += [o for o in (n.a, n.b) if not isinstance(o, ir.IntImm)]
                pending += [n.a, n.b]
        elif isinstance(n, ir.Add | ir.Sub | ir.Mul):
            pending += [n.a, n.b]
        elif isinstance(n, ir.Select):
            pending += [n.true_value, n.false_value]
        elif isinstance(n, ir.Call) and n.call_type == ir.INTRINSIC:
            pending += list(n.args)
    return found


class _DataAsAnyValue(DagMutator):
    """Reads of memory and conversions from other types, as `_DATA` (see _unsurvived_operands)."""

    def visit_Call(self, e):
        if e.call_type in (ir.HALIDE, ir.IMAGE):
            return ir.Variable(_DATA, e.type) if e.type == _I32 else e
        return self.default(e)

    def visit_Cast(self, e):
        return ir.Variable(_DATA, _I32) if e.type == _I32 and e.value.type != _I32 else self.default(e)

    def visit_Load(self, e):
        return ir.Variable(_DATA, _I32) if e.type == _I32 else e


def index_guards(stmt: ir.Stmt) -> list[IndexGuard]:
    """What must hold for the 32-bit coordinates of a lowered Stmt to be the numbers its bounds
    say: per min, max or division inside a coordinate, the interval of each operand,
    over the loops around it, in terms of the symbols outside them (the caller checks each lies
    within int32, computed in 64 bits)."""
    collector = _GuardCollector()
    collector.visit(stmt)
    return collector.guards
