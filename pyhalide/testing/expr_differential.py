"""Random expressions, built the same way with pyhalide and with the real Halide: operators and
functions over inputs of several types (and casts to bfloat16), with Python numbers wherever a Halide program may write
them (`min(u8, 3)`, `f32 * 0.5`, `x ** 2`), as Halide's bindings type them.

An expression is data (nested tuples naming the operation), so one drawn recipe builds the same
Halide program in either library: `build(hl, recipe, inputs)`. The operations are those whose
results both libraries define exactly (integer arithmetic wraps in types narrower than 32 bits;
in 32 and 64 bits the inputs are kept small, since Halide assumes those do not overflow), so
the outputs must be equal bit for bit.
"""

from __future__ import annotations

import operator

import numpy as np
from hypothesis import strategies as st

N = 24  # elements per input
# (name, type constructor, bits, numpy dtype, value range): the inputs an expression reads at x
INPUTS = (("a_u8", "UInt", 8, np.uint8, (0, 255)), ("b_i16", "Int", 16, np.int16, (-300, 300)),
          ("c_i32", "Int", 32, np.int32, (-50, 50)), ("d_f32", "Float", 32, np.float32, (-8.0, 8.0)),
          ("e_u16", "UInt", 16, np.uint16, (0, 1000)), ("g_f64", "Float", 64, np.float64, (-100.0, 100.0)),
          ("h_i8", "Int", 8, np.int8, (-128, 127)))
_FLOAT_TYPES = (("Float", 32), ("Float", 64), ("BFloat", 16))
CAST_TYPES = (("UInt", 8), ("Int", 8), ("UInt", 16), ("Int", 16), ("Int", 32), *_FLOAT_TYPES)

_PYTHON_OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
                     "//": operator.floordiv, "%": operator.mod, "&": operator.and_, "|": operator.or_,
                     "^": operator.xor, "<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
                     ">": operator.gt, ">=": operator.ge}
_INTEGER_ONLY = {"&", "|", "^"}
_FUNCTIONS2 = ("min", "max", "absd", "saturating_add", "saturating_sub", "halving_add", "halving_sub",
               "rounding_halving_add")
_INTEGER_FUNCTIONS2 = _FUNCTIONS2[3:]
_INTEGER_UNARY = ("abs", "popcount", "count_leading_zeros", "count_trailing_zeros")
_FLOAT_UNARY = ("abs", "sqrt", "floor", "ceil", "round", "trunc", "is_nan", "is_finite")


def input_arrays(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = {}
    for name, code, _, dtype, (lo, hi) in INPUTS:
        if code == "Float":
            values = rng.uniform(lo, hi, N).round(2)
            # exact values, ties; no zeros: Halide's simplifier takes x % x and x / x for 0 and 1
            # whatever x is, where IEEE arithmetic gives NaN at 0
            values[values == 0] = 1.0
            values[rng.integers(0, N, 3)] = [1.5, 0.5, -2.0]
            arrays[name] = values.astype(dtype)
        else:
            arrays[name] = rng.integers(lo, hi + 1, N).astype(dtype)
    return arrays


def build(hl, recipe, inputs: dict, x):
    """The Expr (or Python number) `recipe` stands for, in library hl, reading inputs at x."""
    kind = recipe[0]
    if kind == "input":
        return inputs[recipe[1]][x]
    if kind == "number":
        return recipe[1]
    if kind == "typed":  # hl.u8(3), hl.f32(0.5)...
        code, bits, value = recipe[1:]
        return hl.cast(getattr(hl, code)(bits), value)
    args = [build(hl, r, inputs, x) for r in recipe[2:]]
    name = recipe[1]
    if kind == "op":  # (with a Python number on the left, Python calls the Expr's reflected operator)
        return _PYTHON_OPERATORS[name](*args)
    if kind == "neg":
        return -args[0]
    if kind == "cast":
        code, bits = name
        return hl.cast(getattr(hl, code)(bits), args[0])
    if kind == "select":
        return hl.select(*args)
    if kind == "pow":
        return args[0] ** recipe[-1][1]
    if kind == "shift":
        return args[0] << args[1] if name == "<<" else args[0] >> args[1]
    if kind in ("saturating_cast", "reinterpret", "extract_bits"):
        code, bits = name
        return getattr(hl, kind)(getattr(hl, code)(bits), *args)
    if kind == "mux":
        return hl.mux(args[0], args[1:])
    if kind == "concat_bits":
        return hl.concat_bits(args)
    if kind == "bitnot":
        return ~args[0]
    return getattr(hl, name)(*args)


def _is_integer(recipe) -> bool:
    """Whether the recipe's value is an integer (or bool) in both libraries: the operations drawn
    over it keep to those defined exactly on its type."""
    kind = recipe[0]
    if kind == "input":
        return recipe[1][0] not in "dg"
    if kind == "number":
        return isinstance(recipe[1], int)
    if kind == "typed":
        return recipe[1] != "Float"
    if kind in ("cast", "saturating_cast"):
        return recipe[1] not in _FLOAT_TYPES
    if kind == "function" and recipe[1] in ("is_nan", "is_finite", "is_inf", "popcount", "count_leading_zeros",
                                            "count_trailing_zeros"):
        return True
    if kind in ("extract_bits", "concat_bits", "bitnot"):
        return True
    if kind == "mux":
        return _is_integer(recipe[3])
    if kind == "function" and recipe[1] in _FLOAT_UNARY:
        return _is_integer(recipe[2]) and recipe[1] == "abs"
    if kind == "shift":
        return True
    if kind == "op" and recipe[1] in ("<", "<=", "==", "!=", ">", ">="):
        return True
    if kind == "select":  # (its values: after each condition, and the default last)
        return all(_is_integer(v) for v in recipe[3::2]) and _is_integer(recipe[-1])
    if kind == "pow":
        return _is_integer(recipe[2])
    return all(_is_integer(r) for r in recipe[2:])


def _is_bool(recipe) -> bool:
    if recipe[0] == "op":
        return recipe[1] in ("<", "<=", "==", "!=", ">", ">=") or (
            recipe[1] in ("&", "|", "^") and _is_bool(recipe[2]) and _is_bool(recipe[3]))
    if recipe[0] == "function":
        return recipe[1] in ("is_nan", "is_finite", "is_inf")
    return recipe[0] == "select" and all(_is_bool(v) for v in recipe[3::2]) and _is_bool(recipe[-1])


def _small(recipe) -> bool:
    """A constant of magnitude at most 9: a product with it keeps 32-bit values far from overflow."""
    return (recipe[0] == "number" and isinstance(recipe[1], int) and abs(recipe[1]) <= 9) or \
        (recipe[0] == "typed" and abs(recipe[3]) <= 9)


def _has_expr(recipe) -> bool:
    return recipe[0] in ("input", "typed") or any(isinstance(r, tuple) and _has_expr(r) for r in recipe[2:])


_NUMBERS = st.one_of(st.integers(-3, 9), st.sampled_from([200, 255, 300, -100]),
                     st.sampled_from([0.5, 2.5, -1.25, 3.0]))
_LEAVES = st.one_of(
    st.tuples(st.just("input"), st.sampled_from([i[0] for i in INPUTS])),
    st.tuples(st.just("number"), _NUMBERS),
    st.builds(lambda t, v: ("typed", t[0], t[1], v if t[0] == "Float" else int(v) % (1 << (t[1] - 1))),
              st.sampled_from(CAST_TYPES[:5]), st.integers(0, 20)),
)


@st.composite
def _node(draw, children):
    """One operation over recipes drawn from `children`."""
    a, b = draw(children), draw(children)
    kind = draw(st.sampled_from(["op", "op", "op", "function", "cast", "select", "neg", "pow", "unary", "shift",
                                 "clamp", "widening", "saturating_cast", "intrinsic", "intrinsic", "bfloat"]))
    if kind == "bfloat":  # arithmetic of two values made bfloat16 (each result a float32's, rounded)
        name = draw(st.sampled_from(["+", "-", "*", "/", "<", "==", "min", "max"]))
        bf = ("BFloat", 16)
        a = ("cast", bf, a if _has_expr(a) else ("input", "d_f32"))
        b = ("cast", bf, ("input", "d_f32") if name == "/" else b)  # (a divisor never 0)
        return ("function", name, a, b) if name in ("min", "max") else ("op", name, a, b)
    if kind == "intrinsic":
        return draw(_intrinsic(a, b, children))
    if kind == "unary":
        a = a if _has_expr(a) else ("input", "d_f32")
        names = _INTEGER_UNARY if _is_integer(a) and not _is_bool(a) else _FLOAT_UNARY
        return ("function", draw(st.sampled_from(names)), a)
    if kind == "shift" and _is_integer(a) and not _is_bool(a) and _has_expr(a):
        # by a literal 0..3, or by a narrow input (wrapping in 8 or 16 bits, as Halide defines it)
        by = draw(st.one_of(st.tuples(st.just("number"), st.integers(0, 3)),
                            st.just(("cast", ("UInt", 8), ("op", "%", ("input", "a_u8"), ("number", 5))))))
        return ("shift", draw(st.sampled_from(["<<", ">>"])), ("cast", ("UInt", 8), a), by)
    if kind == "clamp":
        return ("function", "clamp", a if _has_expr(a) else ("input", "b_i16"), ("number", draw(st.integers(-5, 5))),
                ("number", draw(st.integers(6, 200))))
    if kind == "widening" and _is_integer(a) and _is_integer(b) and not (_is_bool(a) or _is_bool(b)):
        narrow = ("cast", draw(st.sampled_from(CAST_TYPES[:4])), a if _has_expr(a) else ("input", "a_u8"))
        other = ("cast", narrow[1], b if _has_expr(b) else ("input", "e_u16"))
        return ("function", draw(st.sampled_from(["widening_add", "widening_sub", "widening_mul"])), narrow, other)
    if kind == "saturating_cast":
        # (of integers, or of a float input: a NaN converted to an integer is whatever the CPU makes
        # of it, x86's 0x80000000 in Halide)
        a = a if _has_expr(a) and _is_integer(a) else ("input", draw(st.sampled_from(["c_i32", "d_f32", "g_f64"])))
        return ("saturating_cast", draw(st.sampled_from(CAST_TYPES[:5])), a)
    if kind in ("unary", "shift", "widening"):
        kind = "op"
    if kind == "op":
        name = draw(st.sampled_from(sorted(_PYTHON_OPERATORS)))
        if name in _INTEGER_ONLY and not (_is_integer(a) and _is_integer(b)):
            name = "+"
        if name == "*" and not (_small(a) or _small(b)):  # (Halide assumes int32 products do not overflow)
            name = "-"
        if name in ("/", "//", "%") and not (_is_integer(a) and _is_integer(b)) and \
                not (b in (("input", "d_f32"), ("input", "g_f64")) or (b[0] == "number" and b[1] != 0)):
            # a float divisor that may be 0: Halide's simplifier folds x % x, x / x and 0 % y to 0, 1
            # and 0 for every x and y, where IEEE arithmetic gives NaN at 0 (the float inputs are never 0)
            name = "+"
        return ("op", name, a, b) if _has_expr(a) or _has_expr(b) else ("op", name, ("input", "c_i32"), b)
    if kind == "function":
        name = draw(st.sampled_from(_FUNCTIONS2))
        # (Halide's saturating and halving arithmetic of bools gives rounding_halving_add(0, 0) = 1:
        # pyhalide takes integers only there)
        if name in _INTEGER_FUNCTIONS2 and not (_is_integer(a) and _is_integer(b)) or _is_bool(a) or _is_bool(b):
            name = "min"
        return ("function", name, a if _has_expr(a) else ("input", "e_u16"), b)
    if kind == "cast":
        a = a if _has_expr(a) else ("input", "a_u8")
        # (a float out of an integer type's range casts to anything in Halide: floats cast to floats)
        return ("cast", draw(st.sampled_from(CAST_TYPES + (("UInt", 1),) if _is_integer(a) else _FLOAT_TYPES)), a)
    if kind == "select":
        condition = ("op", draw(st.sampled_from(["<", ">=", "=="])), ("input", "b_i16"), b)
        return ("select", "", condition, a, draw(children))
    if kind == "neg":
        return ("neg", "", a if _has_expr(a) else ("input", "b_i16"))
    base = ("input", draw(st.sampled_from([i[0] for i in INPUTS])))  # (a leaf: powers of sums overflow)
    return ("pow", "", base, ("number", draw(st.integers(-1, 3))))


_NARROW = CAST_TYPES[:4]  # (u8, i8, u16, i16)
_WIDER = {("UInt", 8): ("UInt", 16), ("Int", 8): ("Int", 16), ("UInt", 16): ("UInt", 32), ("Int", 16): ("Int", 32)}


@st.composite
def _intrinsic(draw, a, b, children):
    """One of Halide's integer intrinsics, lerp, mux, bit manipulation or a float test, over
    recipes made to fit it (integers of the types it takes, nonzero divisors, shifts in range)."""
    ia = a if _is_integer(a) and not _is_bool(a) and _has_expr(a) else ("input", "a_u8")
    ib = b if _is_integer(b) and not _is_bool(b) else ("input", "e_u16")
    t = draw(st.sampled_from(_NARROW))
    form = draw(st.sampled_from(["mul_shift_right", "rounding_mul_shift_right", "lerp", "float_lerp", "mux",
                                 "extract_bits", "concat_bits", "div_round_to_zero", "mod_round_to_zero",
                                 "widen_right", "rounding_shift", "widening_shift", "bitnot", "fract", "is_inf",
                                 "select3"]))
    if form in ("mul_shift_right", "rounding_mul_shift_right"):
        t = draw(st.sampled_from(_NARROW + (("Int", 32),)))
        return ("function", form, ("cast", t, ia), ("cast", t, ib), ("number", draw(st.integers(0, 2 * t[1] - 1))))
    if form == "lerp":  # integer ends, an unsigned weight of their width: 0 ... all ones is 0 ... 1
        w = draw(children)
        weight = ("cast", ("UInt", t[1]), w if _is_integer(w) else ib)  # (not a float out of range)
        return ("function", "lerp", ("cast", t, ia), ("cast", t, ib), weight)
    if form == "float_lerp":
        # (ends that are inputs plus something, never constants nor the same expression: Halide
        # lowers lerp as it compiles, outside strict_float, where LLVM may reassociate
        # lerp(e, e, w) = e (1 - w) + e w into e, or fuse 1 (1 - w) + e w into one multiply-add)
        f32 = ("Float", 32)
        zero = ("op", "+", ("cast", f32, ("input", "d_f32")), ("cast", f32, a))
        one = ("op", "+", ("cast", f32, ("input", "a_u8")), ("cast", f32, b))
        return ("function", "lerp", zero, one, ("op", "*", ("input", "d_f32"), ("number", 0.125)))
    if form == "mux":
        values = [("cast", t, draw(children) if k else ia) for k in range(draw(st.integers(1, 3)))]
        values = [v if _is_integer(v[2]) else ("cast", t, ("input", "h_i8")) for v in values]
        return ("mux", "", ("op", "%", ("input", "c_i32"), ("number", 5)), *values)
    if form == "extract_bits":
        wide = _WIDER[t]
        return ("extract_bits", t, ("cast", wide, ia), ("number", draw(st.integers(0, wide[1] - 1))))
    if form == "concat_bits":
        return ("concat_bits", "", *[("cast", t, x) for x in (ia, ib)])
    if form in ("div_round_to_zero", "mod_round_to_zero"):
        divisor = draw(st.sampled_from([1, 2, 3, 7] + ([-1, -3] if t[0] == "Int" else [])))
        return ("function", form, ("cast", t, ia), ("cast", t, ("number", divisor)))
    if form == "widen_right":
        name = draw(st.sampled_from(["widen_right_add", "widen_right_sub", "widen_right_mul"]))
        return ("function", name, ("cast", _WIDER[t], ia), ("cast", t, ib))
    if form in ("rounding_shift", "widening_shift"):
        name = f"{form}_{draw(st.sampled_from(['left', 'right']))}"
        return ("function", name, ("cast", t, ia), ("number", draw(st.integers(0, t[1] - 1))))
    if form == "bitnot":
        return ("bitnot", "", ("cast", t, ia))
    if form in ("fract", "is_inf"):
        return ("function", form, a if _has_expr(a) and not _is_integer(a) else ("input", "g_f64"))
    # select of two conditions and a default
    conditions = [("op", draw(st.sampled_from(["<", ">=", "=="])), ("input", "b_i16"), draw(children))
                  for _ in range(2)]
    return ("select", "", conditions[0], a, conditions[1], b, draw(children))


def recipes(max_leaves: int = 10):
    """Expression recipes over the inputs: a tree of up to max_leaves leaves, an Expr at the root."""
    tree = st.recursive(_LEAVES, lambda children: _node(children), max_leaves=max_leaves)
    return tree.map(lambda r: r if _has_expr(r) else ("op", "+", ("input", "a_u8"), r))
