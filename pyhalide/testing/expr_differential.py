"""Random expressions, built the same way with pyhalide and with the real Halide: operators and
functions over inputs of several types, with Python numbers wherever a Halide program may write
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
CAST_TYPES = (("UInt", 8), ("Int", 8), ("UInt", 16), ("Int", 16), ("Int", 32), ("Float", 32), ("Float", 64))

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
    if kind in ("saturating_cast", "reinterpret"):
        code, bits = name
        return getattr(hl, kind)(getattr(hl, code)(bits), args[0])
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
        return recipe[1][0] != "Float"
    if kind == "function" and recipe[1] in ("is_nan", "is_finite", "popcount", "count_leading_zeros",
                                            "count_trailing_zeros"):
        return True
    if kind == "function" and recipe[1] in _FLOAT_UNARY:
        return _is_integer(recipe[2]) and recipe[1] == "abs"
    if kind == "shift":
        return True
    if kind == "op" and recipe[1] in ("<", "<=", "==", "!=", ">", ">="):
        return True
    if kind == "select":
        return _is_integer(recipe[3]) and _is_integer(recipe[4])
    if kind == "pow":
        return _is_integer(recipe[2])
    return all(_is_integer(r) for r in recipe[2:])


def _is_bool(recipe) -> bool:
    if recipe[0] == "op":
        return recipe[1] in ("<", "<=", "==", "!=", ">", ">=") or (
            recipe[1] in ("&", "|", "^") and _is_bool(recipe[2]) and _is_bool(recipe[3]))
    return recipe[0] == "select" and _is_bool(recipe[3]) and _is_bool(recipe[4])


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
                                 "clamp", "widening", "saturating_cast"]))
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
        return ("cast", draw(st.sampled_from(CAST_TYPES + (("UInt", 1),) if _is_integer(a) else CAST_TYPES[-2:])), a)
    if kind == "select":
        condition = ("op", draw(st.sampled_from(["<", ">=", "=="])), ("input", "b_i16"), b)
        return ("select", "", condition, a, draw(children))
    if kind == "neg":
        return ("neg", "", a if _has_expr(a) else ("input", "b_i16"))
    base = ("input", draw(st.sampled_from([i[0] for i in INPUTS])))  # (a leaf: powers of sums overflow)
    return ("pow", "", base, ("number", draw(st.integers(-1, 3))))


def recipes(max_leaves: int = 10):
    """Expression recipes over the inputs: a tree of up to max_leaves leaves, an Expr at the root."""
    tree = st.recursive(_LEAVES, lambda children: _node(children), max_leaves=max_leaves)
    return tree.map(lambda r: r if _has_expr(r) else ("op", "+", ("input", "a_u8"), r))
