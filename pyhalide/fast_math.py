"""Halide's fast approximations: fast_exp, fast_log, fast_sin, fast_cos and fast_pow.

In Halide these are not library calls but expressions: a range reduction, a short polynomial
and a reconstruction, written out in the caller's Func, where they vectorize like any arithmetic.
A program that asks for them asks for those numbers (nl_means's weights, a tone curve), so
pyhalide builds the same expressions from the same operations and constants: the same values
as Halide computes with strict_float (tests/test_fast_math.py runs both), and the cost of a few
multiply-adds rather than of an accurate exp or log. Like Halide's, they are approximations
(measured in tests/test_fast_math.py): fast_exp, fast_log and fast_pow within 1e-5 relative
error, fast_sin and fast_cos within 1e-5 absolute over [-100, 100]; they give meaningless
results where an exact result would overflow or underflow, and fast_log of a non-positive
number is meaningless. Derivatives (propagate_adjoints) go through their arithmetic as Halide's
do: fast_exp's is close to exp's, fast_sin's and fast_cos's to cos and -sin; fast_log reads its
argument's bits, which have no derivative, so nothing flows back through fast_log or fast_pow.

The constants are Halide's (the polynomials' coefficients are what fix the results); each is
a float32, as in Halide's source.
"""

from __future__ import annotations

import numpy as np

from .errors import HalideError
from .expr import Expr, as_expr, to_ir, wrap
from .operators import _constant_integer, cast, clamp, f32, floor, pow, reinterpret, select
from .types import Float, Int


def _f32(value: float) -> float:
    """The float32 nearest to value, as a Python float (Halide's constants are C floats)."""
    return float(np.float32(value))


LN2 = _f32(np.log(2.0))  # logf(2.0)

EXP_COEFFICIENTS = tuple(map(_f32, (
    0.01314350012789660196, 0.03668965196652099192, 0.16873890085469545053,
    0.49970514590562437052, 1.0, 1.0)))
LOG_COEFFICIENTS = tuple(map(_f32, (
    0.07640318789187280912, -0.16252961013874300811, 0.20625219040645212387,
    -0.25110261010892864775, 0.33320464908377461777, -0.49997513376789826101, 1.0, 0.0)))

TWO_OVER_PI = 0.636619746685028076171875  # (both exact float32 values)
PI_OVER_TWO = 1.57079637050628662109375
# cos and sin of the reduced angle: 1 + c2 r^2 + c4 r^4 + ... (sin's times r)
SIN_COEFFICIENTS = tuple(map(_f32, (
    -0.16666667163372039794921875, 8.333347737789154052734375e-3, -1.9842604524455964565277099609375e-4,
    2.760012648650445044040679931640625e-6, -2.50293279435709337121807038784027099609375e-8)))
COS_COEFFICIENTS = tuple(map(_f32, (
    -0.5, 4.166664183139801025390625e-2, -1.388833043165504932403564453125e-3,
    2.47562347794882953166961669921875e-5, -2.59630184018533327616751194000244140625e-7)))


def _float32_only(name: str, e) -> Expr:
    x = wrap(to_ir(as_expr(e)))
    if x.type().element_of() != Float(32):
        raise HalideError(f"Error: {name} only works for Float(32)\n")
    return x


def _polynomial(x: Expr, coefficients: tuple) -> Expr:
    """sum of coefficients[i] * x^(n-1-i), highest power first, evaluated as two interleaved
    chains in x^2 (even and odd positions of the list) joined at the end: shorter dependency
    chains than Horner's rule, and the order of operations Halide's results come from."""
    x2 = x * x
    chains = [coefficients[0], coefficients[1]]
    for i, c in enumerate(coefficients[2:], start=2):
        chain = chains[i & 1]
        chains[i & 1] = chain * x2 if c == 0.0 else chain * x2 + c
    even, odd = chains
    # (the first two coefficients are numbers: the chains become Exprs with the first x2)
    return even * x + odd if len(coefficients) % 2 == 0 else odd * x + even


def fast_exp(e) -> Expr:
    """e^x for Float(32): x = k ln2 + r with k = floor(x / ln2), a degree-5 polynomial in r,
    times 2^k put in the exponent field (k clamped to the float exponents)."""
    x_full = _float32_only("fast_exp", e)
    k_real = floor(x_full / LN2)
    r = x_full - k_real * LN2
    result = _polynomial(r, EXP_COEFFICIENTS)
    biased = clamp(cast(Int(32), k_real) + 127, 0, 255)
    return result * reinterpret(Float(32), biased << 23)


def fast_log(e) -> Expr:
    """ln x for positive Float(32): x = 2^e m with m in [0.75, 1.5), a degree-7 polynomial in
    m - 1, plus e ln2."""
    x = _float32_only("fast_log", e)
    bits = reinterpret(Int(32), x)
    mantissa_bits = bits & -(2**32 - 0x807FFFFF)  # sign and mantissa: 0x807fffff
    # m above 1.5 (the mantissa's top bit) is halved: its exponent is 126, not 127
    biased = 127 - (mantissa_bits >> 22)
    exponent = (bits >> 23) - biased
    reduced = reinterpret(Float(32), mantissa_bits | (biased << 23))
    return _polynomial(reduced - 1.0, LOG_COEFFICIENTS) + cast(Float(32), exponent) * LN2


def _fast_sin_cos(e, is_sin: bool) -> Expr:
    """The angle reduced by quadrant: x = k pi/2 + r with k = floor(x 2/pi); the quadrant k mod 4
    picks sin or cos of r, and the sign. In x's float type (the coefficients are float32)."""
    x_full = wrap(to_ir(as_expr(e)))
    k_real = floor(x_full * TWO_OVER_PI)
    quadrant = cast(Int(32), k_real) % 4
    if is_sin:
        use_cos = (quadrant == 1) | (quadrant == 3)
        flip_sign = quadrant > 1
    else:
        use_cos = (quadrant == 0) | (quadrant == 2)
        flip_sign = (quadrant == 1) | (quadrant == 2)
    r = x_full - k_real * PI_OVER_TWO
    outside = select(use_cos, 1, r)
    c2, c4, c6, c8, c10 = (select(use_cos, f32(c), f32(s))
                           for c, s in zip(COS_COEFFICIENTS, SIN_COEFFICIENTS))
    r2 = r * r
    value = outside * (r2 * (r2 * (r2 * (r2 * (r2 * c10 + c8) + c6) + c4) + c2) + 1)
    return select(flip_sign, -value, value)


def fast_sin(e) -> Expr:
    """sin x, approximately (see the module docstring)."""
    return _fast_sin_cos(e, True)


def fast_cos(e) -> Expr:
    """cos x, approximately (see the module docstring)."""
    return _fast_sin_cos(e, False)


def fast_pow(a, b) -> Expr:
    """a^b: a constant integer power as pow computes it (repeated multiplication in a's type);
    otherwise in Float(32), exp(b ln a) by fast_exp and fast_log, 0 where a is 0 (negative a:
    meaningless, as in Halide)."""
    if _constant_integer(to_ir(as_expr(b))) is not None:
        return pow(a, b)
    x, y = cast(Float(32), a), cast(Float(32), b)
    return select(x == 0.0, 0.0, fast_exp(fast_log(x) * y))
