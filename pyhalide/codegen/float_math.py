"""exp and log of Float(32), written in IR: the same operations for one lane or sixteen.

The C library has no vector exp: LLVM split a 16-lane `llvm.exp` into 16 calls of expf, which
made vectorized exp 19x slower than Halide's (nl_means: 2.5x Halide's time on the same
schedule). As Halide does, pyhalide computes exp_f32 and log_f32 itself, with a range reduction
and a polynomial, for scalars and vectors alike, so that vectorizing never changes a result.
Accuracy, measured against exp and log in float64 rounded to float32 on 4 million arguments
(the coefficients are least-squares fits of this module's own, on Chebyshev nodes): exp within 1
ulp everywhere, subnormal results and overflow to infinity included; log within 2 ulp, subnormal
arguments included. NaNs and infinities come out as the C library gives them.

The expansions are C-like IR (what lower_arithmetic leaves: no Halide division, float min/max
or out-of-range shifts), for the code generators that print or emit them after that pass.
"""

from __future__ import annotations

import math

from .. import ir
from ..types import Float, Int

_LOG2E = 1.4426950408889634
_LN2_HI = 0.693145751953125  # ln 2 to 12 bits: k * _LN2_HI is exact for the |k| <= 150 used
_LN2_LO = math.log(2) - _LN2_HI
# e^r = 1 + r * (c0 + c1 r + ... + c5 r^5) for r in [-ln2 / 2, ln2 / 2]
_EXP_COEFFICIENTS = (1.0, 0.4999999403953552, 0.1666642129421234, 0.04166772589087486, 0.008374763652682304,
                     0.001385929062962532)
# log m = 2s + s^3 (c0 + c1 s^2 + c2 s^4) with s = (m - 1) / (m + 1), m in [sqrt(1/2), sqrt(2))
_LOG_COEFFICIENTS = (0.6666677594184875, 0.39977365732192993, 0.29875728487968445)
_SMALLEST_NORMAL = 1.1754943508222875e-38


def _c(t, v) -> ir.Expr:
    return ir.make_const(t, v)


def _polynomial(x: ir.Expr, coefficients) -> ir.Expr:
    """c0 + c1 x + c2 x^2 + ..., by Horner's rule."""
    result = _c(x.type, coefficients[-1])
    for c in reversed(coefficients[:-1]):
        result = ir.Add(ir.Mul(result, x), _c(x.type, c))
    return result


def _power_of_two(k: ir.Expr) -> ir.Expr:
    """2^k as a float, for integers k in [-126, 127]: k + 127 in the exponent field."""
    return ir.Reinterpret(Float(32, k.type.lanes), ir.Mul(ir.Add(k, _c(k.type, 127)), _c(k.type, 1 << 23)))


def _bound(name: str, value: ir.Expr, body) -> ir.Expr:
    """body(v) with v a name for value (each expansion reads its argument several times)."""
    v = ir.Variable(name, value.type)
    return ir.Let(name, value, body(v))


def exp_f32(x: ir.Expr) -> ir.Expr:
    """e^x: x = k ln2 + r with k = round(x / ln2) and |r| <= ln2 / 2, then e^r times 2^k, the power
    applied in two halves (each a normal float) so that subnormal and infinite results round
    once, as they should. x is clamped to [-104, 89] first (past those ends the result is 0 and
    infinity anyway), which keeps every conversion to an integer in range."""
    t = x.type
    it = Int(32, t.lanes)

    def body(v):
        nan = ir.NE(v, v)
        clamped = ir.Select(nan, _c(t, 0), v)
        clamped = ir.Select(ir.LT(clamped, _c(t, -104)), _c(t, -104), clamped)
        clamped = ir.Select(ir.GT(clamped, _c(t, 89)), _c(t, 89), clamped)

        def reduced(xc):
            k = ir.Call(t, "floor", (ir.Add(ir.Mul(xc, _c(t, _LOG2E)), _c(t, 0.5)),), ir.EXTERN)

            def scaled(kf):
                r = ir.Sub(ir.Sub(xc, ir.Mul(kf, _c(t, _LN2_HI))), ir.Mul(kf, _c(t, _LN2_LO)))
                er = ir.Add(ir.Mul(_polynomial(r, _EXP_COEFFICIENTS), r), _c(t, 1.0))
                ki = ir.Cast(it, kf)

                def halves(half):
                    product = ir.Mul(er, _power_of_two(half))
                    return ir.Mul(product, _power_of_two(ir.Sub(ki, half)))

                # k >> 1 for k in [-151, 129] as a floor division by 2 in C: (k + 152) / 2 - 76
                half = ir.Sub(ir.Call(it, "div_round_to_zero", (ir.Add(ki, _c(it, 152)), _c(it, 2)), ir.INTRINSIC),
                              _c(it, 76))
                return _bound("exp_f32.half", half, halves)

            return _bound("exp_f32.k", k, scaled)

        return ir.Select(nan, v, _bound("exp_f32.clamped", clamped, reduced))

    return _bound("exp_f32.x", x, body)


def log_f32(x: ir.Expr) -> ir.Expr:
    """ln x: x = m 2^e with m in [sqrt(1/2), sqrt(2)), then e ln2 + ln m, ln m from s = (m - 1) /
    (m + 1) (an odd series in s, |s| < 0.172). A subnormal x is scaled by 2^23 first. Negative
    arguments give NaN, zero -infinity, infinity and NaN themselves."""
    t = x.type
    it = Int(32, t.lanes)

    def body(v):
        subnormal = ir.LT(v, _c(t, _SMALLEST_NORMAL))
        normal = ir.Select(subnormal, ir.Mul(v, _c(t, float(1 << 23))), v)

        def split(n):
            bits = ir.Reinterpret(it, n)
            # the exponent field: bits >> 23 for the positive bit patterns here, as a C division
            exponent = ir.Sub(ir.Call(it, "div_round_to_zero", (bits, _c(it, 1 << 23)), ir.INTRINSIC),
                              ir.Select(subnormal, _c(it, 127 + 23), _c(it, 127)))
            mantissa = ir.Reinterpret(t, ir.Call(it, "bitwise_or", (
                ir.Call(it, "bitwise_and", (bits, _c(it, 0x7FFFFF)), ir.INTRINSIC), _c(it, 0x3F800000)),
                ir.INTRINSIC))

            def reduced(m):
                big = ir.GT(m, _c(t, math.sqrt(2)))
                m = ir.Select(big, ir.Mul(m, _c(t, 0.5)), m)
                e = ir.Cast(t, ir.Add(exponent, ir.Select(big, _c(it, 1), _c(it, 0))))

                def series(s):
                    s2 = ir.Mul(s, s)
                    log_m = ir.Add(ir.Mul(s, _c(t, 2.0)), ir.Mul(ir.Mul(s, s2), _polynomial(s2, _LOG_COEFFICIENTS)))
                    return ir.Add(ir.Mul(e, _c(t, _LN2_HI)), ir.Add(log_m, ir.Mul(e, _c(t, _LN2_LO))))

                return _bound("log_f32.s", ir.Div(ir.Sub(m, _c(t, 1.0)), ir.Add(m, _c(t, 1.0))), series)

            return _bound("log_f32.m", mantissa, reduced)

        finite = _bound("log_f32.normal", normal, split)
        special = ir.Select(ir.LT(v, _c(t, 0)), _c(t, math.nan),
                            ir.Select(ir.EQ(v, _c(t, 0)), _c(t, -math.inf), v))
        ordinary = ir.And(ir.GT(v, _c(t, 0)), ir.LT(v, _c(t, math.inf)))
        return ir.Select(ordinary, finite, special)

    return _bound("log_f32.x", x, body)


_EXPANSIONS = {"exp": exp_f32, "log": log_f32}


def expansion(e: ir.Call) -> ir.Expr | None:
    """The IR a CPU code generator emits for math call e, where pyhalide computes it itself (exp
    and log of Float(32), and of Float(16) through Float(32), as Halide does); else None."""
    expand = _EXPANSIONS.get(e.name)
    t = e.type
    if expand is None or e.call_type != ir.EXTERN or not t.is_float() or t.bits not in (16, 32):
        return None
    if t.bits == 32:
        return expand(e.args[0])
    wide = Float(32, t.lanes)
    return ir.Cast(t, expand(ir.Cast(wide, e.args[0])))
