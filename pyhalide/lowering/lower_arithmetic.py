"""Lower Halide's arithmetic rules to operations every backend emits with C semantics.

Halide defines cases that C and LLVM leave undefined or define differently: integer division and
modulo are Euclidean and division by zero gives 0; a negative shift amount shifts the other way
and shifting by the bit width or more gives 0 (or the sign); float min/max pick a particular side
for NaNs and signed zeros. This pass writes each rule once, in IR, so no code generator has to.

Assumes: the Stmt is the one to be compiled (flattened, vectorized, simplified); nothing
simplifies it afterwards (the simplifier does not know the intrinsics below, and a rewrite of
their guarded operands could break the guarantees).

Guarantees: the result contains none of
- integer Div or Mod: they become `div_round_to_zero(a, b)` / `mod_round_to_zero(a, b)` (C's `/`
  and `%`: truncating, the remainder takes a's sign), whose divisor the pass guarantees is never 0
  and, for signed types, never -1 (so INT_MIN / -1 cannot trap), with selects and adds that make
  the result Euclidean. A constant divisor keeps the cheap form: unsigned is the C operation
  alone; signed positive or negative is the C operation and one adjustment.
- float Mod: a - b * floor(a / b).
- float Min/Max: selects of ordered compares, Halide's run-time semantics: max(a, b) = a > b ? a : b
  and min(a, b) = a < b ? a : b (a NaN or a tie gives b, as x86's minps and maxps do).
- `shift_left` / `shift_right`: they become `shift_left_in_range(a, n)` / `shift_right_in_range(a, n)`
  (C's `<<` and `>>`, arithmetic for signed a), whose amount n (unsigned, a's width) the pass
  guarantees is in [0, bits), with selects for negative and too-large amounts.
- integer `abs` / `absd`: selects of compares and subtractions in the unsigned type (float `abs`
  stays: every backend has fabs).
- float LE / GE: !(b < a) / !(a < b), as Halide's IR has them (true where a NaN is compared).
- Cast to bool: the lowest bit, as Halide's (LLVM's trunc to i1; a float truncated toward zero
  first): cast<bool>(2) is false.
- the vector index of a load `ramp(b, 1, n) / k + offset` (k of 2 to 4 dividing n: `x / 2` of a
  vectorized x, in upsamplings and Bayer mosaics) becomes `quotient_ramp(q, r, k)`, lane i being
  q + (r + i) / k, with b = q*k + r, 0 <= r < k (offset folded into q): a code generator reads
  it as one dense span and a shuffle chosen by r, instead of a gather.
Adjustments that may wrap are computed in the unsigned type of the same width, since signed
overflow is undefined in C (and `nsw` in LLVM). Integer Min/Max, float division, compares,
selects and other casts have the same meaning in C and are left as they are.
"""

from __future__ import annotations

from typing import NoReturn

from .. import ir
from ..errors import InternalError
from ..ir_mutator import IRMutator
from ..types import Int, Type

_MANTISSA_BITS = {16: 11, 32: 24, 64: 53}  # (with the implicit bit) by float width

DIV = "div_round_to_zero"
MOD = "mod_round_to_zero"
SHIFT_LEFT = "shift_left_in_range"
SHIFT_RIGHT = "shift_right_in_range"
QUOTIENT_RAMP = "quotient_ramp"


def lower_arithmetic(stmt: ir.Stmt) -> ir.Stmt:
    """The Stmt with Halide's arithmetic rules written out (see the module docstring)."""
    return _LowerArithmetic().mutate(stmt)


def not_lowered(what: str) -> NoReturn:
    """For code generators: an operation this pass removes has reached one."""
    raise InternalError(f"codegen: {what} reached the code generator; lower_arithmetic removes it")


def _c(t: Type, value) -> ir.Expr:
    return ir.make_const(t, value)


def _intrinsic(name: str, a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return ir.Call(a.type, name, (a, b), ir.INTRINSIC)


def _unsigned(t: Type) -> Type:
    return t.with_code("uint")


def _as_unsigned(e: ir.Expr) -> ir.Expr:
    return e if e.type.is_uint() else ir.Cast(_unsigned(e.type), e)


def _wrapping(op, a: ir.Expr, b: ir.Expr) -> ir.Expr:
    """a op b with wrap-around (no signed overflow): computed in the unsigned type."""
    if not a.type.is_int():
        return op(a, b)
    return ir.Cast(a.type, op(_as_unsigned(a), _as_unsigned(b)))


def _quotient_ramp(index: ir.Expr):
    """(b, k, offset) when index is ramp(b, 1, n) / k plus or minus broadcasts (offset: their
    scalar sum, or None), with k a constant of 2 to 4 dividing n; else None."""
    offset = None
    while isinstance(index, ir.Add | ir.Sub) and isinstance(index.b, ir.Broadcast):
        term = index.b.value
        if isinstance(index, ir.Sub):
            term = ir.Sub(_c(term.type, 0), term)
        offset = term if offset is None else ir.Add(offset, term)
        index = index.a
    if not (isinstance(index, ir.Div) and isinstance(index.a, ir.Ramp) and isinstance(index.b, ir.Broadcast)):
        return None
    k = ir.const_int(index.b.value)
    if ir.const_int(index.a.stride) != 1 or k is None or not 2 <= k <= 4 or index.a.lanes % k:
        return None
    return index.a.base, k, offset


def _is_cheap(e: ir.Expr) -> bool:
    """Free to repeat: a constant or a name (a broadcast of a name costs a shuffle each time)."""
    if isinstance(e, ir.Broadcast):
        e = e.value
        return isinstance(e, ir.IntImm | ir.FloatImm)
    return isinstance(e, ir.IntImm | ir.FloatImm | ir.Variable)


class _Lets:
    """Values used more than once by one rewrite, bound to names so each is computed once."""

    def __init__(self, owner: _LowerArithmetic):
        self.owner = owner
        self.bound: list[tuple[str, ir.Expr]] = []

    def __call__(self, e: ir.Expr, hint: str) -> ir.Expr:
        if _is_cheap(e):
            return e
        name = self.owner.fresh_name(hint)
        self.bound.append((name, e))
        return ir.Variable(name, e.type)

    def around(self, body: ir.Expr) -> ir.Expr:
        for name, value in reversed(self.bound):
            body = ir.Let(name, value, body)
        return body


class _LowerArithmetic(IRMutator):
    def __init__(self):
        super().__init__()
        self._memo: dict[int, tuple] = {}
        self._names = 0

    def mutate(self, node):
        # Context-free rewrites: share the work (and the result) across a DAG, such as the
        # copies of an unrolled body.
        if node is None:
            return None
        hit = self._memo.get(id(node))
        if hit is None:
            hit = self._memo[id(node)] = (node, super().mutate(node))
        return hit[1]

    def fresh_name(self, hint: str) -> str:
        self._names += 1
        return f"{hint}${self._names}"

    def visit_Load(self, e):
        parts = _quotient_ramp(e.index)
        if parts is None:
            return self.default(e)
        base, k, offset = parts
        divisor = _c(base.type, k)
        known = ir.const_int(base)  # a loop versioned on its phase: the remainder is a constant
        quotient, remainder = ((_c(base.type, known // k), _c(base.type, known % k)) if known is not None
                               else (ir.Div(base, divisor), ir.Mod(base, divisor)))
        q = quotient if offset is None else ir.Add(quotient, offset)
        args = (self.mutate(q), self.mutate(remainder), divisor)
        index = ir.Call(e.index.type, QUOTIENT_RAMP, args, ir.INTRINSIC)
        return ir.Load(e.type, e.name, index, self.mutate(e.predicate))

    # ---------------------------------------------------------------- division
    def visit_Div(self, e):
        a, b = self.mutate(e.a), self.mutate(e.b)
        if e.type.is_float():
            return e if a is e.a and b is e.b else ir.Div(a, b)
        return self._euclidean(a, b, quotient=True)

    def visit_Mod(self, e):
        a, b = self.mutate(e.a), self.mutate(e.b)
        if e.type.is_float():
            lets = _Lets(self)
            a, b = lets(a, "a"), lets(b, "b")
            floor = ir.Call(e.type, "floor", (ir.Div(a, b),), ir.EXTERN)
            return lets.around(ir.Sub(a, ir.Mul(b, floor)))
        return self._euclidean(a, b, quotient=False)

    def _euclidean(self, a, b, quotient: bool) -> ir.Expr:
        t = a.type
        op = DIV if quotient else MOD
        c = ir.const_int(b)
        if c == 0:
            return _c(t, 0)
        if t.is_uint():
            if c is not None:
                return _intrinsic(op, a, b)
            lets = _Lets(self)
            b = lets(b, "divisor")
            is_zero = lets(ir.EQ(b, _c(t, 0)), "divisor_is_zero")
            safe = ir.Select(is_zero, _c(t, 1), b)
            return lets.around(ir.Select(is_zero, _c(t, 0), _intrinsic(op, a, safe)))
        if c == -1:
            return _wrapping(ir.Sub, _c(t, 0), a) if quotient else _c(t, 0)
        if c is not None:
            return self._euclidean_by_constant(a, b, c, quotient)
        return self._euclidean_signed(a, b, quotient)

    def _euclidean_by_constant(self, a, b, c: int, quotient: bool) -> ir.Expr:
        """C's truncating result, moved by one step where the remainder is negative."""
        t, u = a.type, _unsigned(a.type)
        lets = _Lets(self)
        if quotient:
            a = lets(a, "dividend")
            negative = ir.LT(_intrinsic(MOD, a, b), _c(t, 0))
            step = ir.Sub if c > 0 else ir.Add
            q = _intrinsic(DIV, a, b)
            return lets.around(ir.Cast(t, step(ir.Cast(u, q), ir.Cast(u, negative))))
        r = lets(_intrinsic(MOD, a, b), "remainder")
        fix = ir.Select(ir.LT(r, _c(t, 0)), _c(u, abs(c)), _c(u, 0))
        return lets.around(ir.Cast(t, ir.Add(ir.Cast(u, r), fix)))

    def _euclidean_signed(self, a, b, quotient: bool) -> ir.Expr:
        """A signed divisor known only at run time: 0 and -1 are replaced by 1 before the C
        operation, and their results (0, and -a or 0) are selected afterwards."""
        t = a.type
        lets = _Lets(self)
        a, b = lets(a, "dividend"), lets(b, "divisor")
        is_zero = lets(ir.EQ(b, _c(t, 0)), "divisor_is_zero")
        is_minus_one = lets(ir.EQ(b, _c(t, -1)), "divisor_is_minus_one")
        special = lets(ir.Or(is_zero, is_minus_one), "divisor_is_special")
        safe = lets(ir.Select(special, _c(t, 1), b), "safe_divisor")
        positive = ir.GT(safe, _c(t, 0))
        if quotient:
            q = lets(_intrinsic(DIV, a, safe), "quotient")
            negative = ir.LT(_intrinsic(MOD, a, safe), _c(t, 0))
            step = ir.Select(positive, _c(t, 1), _c(t, -1))
            q = ir.Select(negative, _wrapping(ir.Sub, q, step), q)
            q = ir.Select(is_minus_one, _wrapping(ir.Sub, _c(t, 0), a), q)
            return lets.around(ir.Select(is_zero, _c(t, 0), q))
        r = lets(_intrinsic(MOD, a, safe), "remainder")
        magnitude = ir.Select(positive, safe, _wrapping(ir.Sub, _c(t, 0), safe))
        r = ir.Select(ir.LT(r, _c(t, 0)), _wrapping(ir.Add, r, magnitude), r)
        return lets.around(ir.Select(special, _c(t, 0), r))

    # ---------------------------------------------------------------- min and max
    def visit_Min(self, e):
        return self._min_max(e, ir.Min, lambda a, b: ir.Select(ir.LT(a, b), a, b))

    def visit_Max(self, e):
        return self._min_max(e, ir.Max, lambda a, b: ir.Select(ir.GT(a, b), a, b))

    def _min_max(self, e, node, select):
        a, b = self.mutate(e.a), self.mutate(e.b)
        if not e.type.is_float():
            return e if a is e.a and b is e.b else node(a, b)
        lets = _Lets(self)
        return lets.around(select(lets(a, "a"), lets(b, "b")))

    # ---------------------------------------------------------------- comparisons
    def visit_LE(self, e):
        return self._not_less(e, lambda a, b: (b, a))

    def visit_GE(self, e):
        return self._not_less(e, lambda a, b: (a, b))

    def _not_less(self, e, operands):
        """A float a <= b as !(b < a), a >= b as !(a < b): Halide's (its IR has only <), so a NaN
        makes them true."""
        a, b = self.mutate(e.a), self.mutate(e.b)
        if not a.type.is_float():
            return e if a is e.a and b is e.b else type(e)(a, b)
        return ir.Not(ir.LT(*operands(a, b)))

    # ---------------------------------------------------------------- casts
    def visit_Cast(self, e):
        v = self.mutate(e.value)
        if not e.type.is_bool():
            return e if v is e.value else ir.Cast(e.type, v)
        if v.type.is_bool():
            return v
        if not v.type.is_float():
            return ir.NE(ir.Call(v.type, "bitwise_and", (v, _c(v.type, 1)), ir.INTRINSIC), _c(v.type, 0))
        # a float truncated toward zero first (x86's conversion, as Halide's fptoui to i1 runs); from
        # 2^mantissa bits up every float is even, and NaN and the infinities give false there too
        lets = _Lets(self)
        x = lets(v, "x")
        whole = ir.Cast(Int(64, v.type.lanes), x)
        low_bit = ir.Call(whole.type, "bitwise_and", (whole, _c(whole.type, 1)), ir.INTRINSIC)
        magnitude = self.mutate(ir.Call(v.type, "abs", (x,), ir.INTRINSIC))
        small = ir.LT(magnitude, _c(v.type, float(2 ** _MANTISSA_BITS[v.type.bits])))
        return lets.around(ir.And(small, ir.NE(low_bit, _c(whole.type, 0))))

    # ---------------------------------------------------------------- intrinsics
    def visit_Call(self, e):
        e = self.default(e)
        if e.call_type != ir.INTRINSIC:
            return e
        rule = self._INTRINSICS.get(e.name)
        return e if rule is None else rule(self, e)

    def _shift(self, e, left: bool) -> ir.Expr:
        a, n = e.args
        t, bits = a.type, a.type.bits
        if n.type.bits != bits or n.type.lanes != t.lanes:
            raise InternalError(f"{e.name} of {t} by {n.type}: the front end gives both one width")
        u = _unsigned(n.type)
        c = ir.const_int(n)
        if c is not None:
            if n.type.is_int() and c < 0:
                left, c = not left, -c
            if c < bits:
                return _intrinsic(SHIFT_LEFT if left else SHIFT_RIGHT, a, _c(u, c))
            if not left and t.is_int():
                return _intrinsic(SHIFT_RIGHT, a, _c(u, bits - 1))  # all sign bits
            return _c(t, 0)
        lets = _Lets(self)
        a = lets(a, "shifted")
        negative = None
        if n.type.is_int():
            n = lets(n, "amount")
            negative = lets(ir.LT(n, _c(n.type, 0)), "amount_is_negative")
            magnitude = ir.Select(negative, ir.Sub(_c(u, 0), ir.Cast(u, n)), ir.Cast(u, n))
        else:
            magnitude = n
        magnitude = lets(magnitude, "amount")
        too_far = lets(ir.GT(magnitude, _c(u, bits - 1)), "amount_too_far")
        safe = lets(ir.Select(too_far, _c(u, bits - 1), magnitude), "safe_amount")

        def shift(to_left: bool) -> ir.Expr:
            shifted = _intrinsic(SHIFT_LEFT if to_left else SHIFT_RIGHT, a, safe)
            if not to_left and t.is_int():
                return shifted  # by bits - 1 already gives the sign everywhere
            return ir.Select(too_far, _c(t, 0), shifted)

        result = shift(left)
        if negative is not None:
            result = ir.Select(negative, shift(not left), result)
        return lets.around(result)

    def _abs(self, e) -> ir.Expr:
        (v,) = e.args
        if v.type.is_float():
            return e
        if v.type.is_uint():
            return v
        lets = _Lets(self)
        v = lets(v, "value")
        u = _unsigned(v.type)
        return lets.around(ir.Select(ir.LT(v, _c(v.type, 0)), ir.Sub(_c(u, 0), ir.Cast(u, v)), ir.Cast(u, v)))

    def _absd(self, e) -> ir.Expr:
        a, b = e.args
        if a.type.is_float():
            return ir.Call(e.type, "abs", (ir.Sub(a, b),), ir.INTRINSIC)
        lets = _Lets(self)
        a, b = lets(a, "a"), lets(b, "b")
        ua, ub = _as_unsigned(a), _as_unsigned(b)
        return lets.around(ir.Select(ir.LT(a, b), ir.Sub(ub, ua), ir.Sub(ua, ub)))

    _INTRINSICS = {
        "shift_left": lambda self, e: self._shift(e, left=True),
        "shift_right": lambda self, e: self._shift(e, left=False),
        "abs": _abs,
        "absd": _absd,
    }
