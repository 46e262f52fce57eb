"""Common subexpression elimination of Func definitions (pyhalide/cse.py): expressions Python
code builds as graphs are defined, lowered and compiled in time linear in the graph, and compute
what the tree they stand for computes (against numpy, the reference evaluator and real Halide)."""

from __future__ import annotations

import math
import subprocess
import sys

import halide
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import pyhalide as hl
from pyhalide import ir
from pyhalide.cse import common_subexpression_elimination as cse
from pyhalide.expr import to_ir
from pyhalide.ir_mutator import children, free_variables
from pyhalide.reference import evaluate_expr
from pyhalide.types import Int


def _nodes(e: ir.Expr, kind) -> list:
    """The distinct nodes of class `kind` in e's tree, each once per place it appears."""
    out = [e] if isinstance(e, kind) else []
    for c in children(e):
        out += _nodes(c, kind)
    return out


def _lets(e: ir.Expr) -> list[ir.Let]:
    out = []
    while isinstance(e, ir.Let):
        out.append(e)
        e = e.body
    return out


def test_a_doubly_shared_chain_sixty_deep_defines_compiles_and_computes():
    """Each step uses the one before twice: a tree of 2**60 nodes, a graph of 180. Without CSE
    this never finishes; with it, it computes numpy's wrapped int32 values."""
    x = hl.Var("x")
    e = hl.Expr(x)
    for _ in range(60):
        e = e * e + x
    f = hl.Func("chain")
    f[x] = e
    f.vectorize(x, 8)
    got = np.asarray(f.realize([64]))
    v = np.arange(64, dtype=np.int32)
    want = v.copy()
    with np.errstate(over="ignore"):
        for _ in range(60):
            want = want * want + v
    np.testing.assert_array_equal(got, want)


def test_a_shared_float_recurrence_in_an_update_matches_numpy():
    """A Newton-style recurrence (each step reads the last three times) in an update definition
    over an RDom, parallel and vectorized."""
    x, y = hl.Var("x"), hl.Var("y")
    r = hl.RDom([(0, 3)])
    f = hl.Func("newton")
    f[x, y] = hl.f32(0)
    a = hl.f32(x + y + r.x) * 0.25 + 1
    z = a
    for _ in range(25):
        z = z * 0.5 + a / (z * 2 + z * z * 0.001)
    f[x, y] = f[x, y] + z
    f.update(0).vectorize(x, 8).parallel(y)
    got = np.asarray(f.realize([16, 4]))
    yy, xx = np.mgrid[0:4, 0:16]
    want = np.zeros((4, 16), np.float32)
    for k in range(3):
        a = (xx + yy + k).astype(np.float32) * np.float32(0.25) + np.float32(1)
        z = a
        for _ in range(25):
            z = z * np.float32(0.5) + a / (z * np.float32(2) + z * z * np.float32(0.001))
        want = want + z
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_value_used_twice_is_one_let_however_it_was_built():
    """Equal subexpressions built apart (two sin(x*y) calls) are one value, as Halide's CSE
    numbers them; the definition computes it once."""
    x, y = hl.Var("x"), hl.Var("y")
    e = to_ir(hl.sin(hl.f32(x * y)) + hl.sin(hl.f32(x * y)) * 2)
    out = cse(e)
    lets = _lets(out)
    assert [type(let.value) for let in lets] == [ir.Call]  # the sin (its argument is used once)
    assert len(_nodes(out, ir.Call)) == 1
    args = {"x": np.arange(5, dtype=np.int32)[:, None], "y": np.arange(3, dtype=np.int32)[None, :]}
    np.testing.assert_array_equal(evaluate_expr(out, args), evaluate_expr(e, args))


def test_offsets_constants_prints_and_likely_stay_where_they_are():
    """What simplifies better in place (x + 1, a constant) is not named; a print prints as often
    as it is written; likely() stays at the condition loop partitioning reads."""
    x = hl.Var("x")
    e = to_ir((x + 1) * (x + 1))
    assert cse(e) is e
    p = to_ir(hl.print(x * x) + hl.print(x * x))
    out = cse(p)
    assert len(_nodes(out, ir.Call)) == 2  # both prints, over one named x * x
    assert [let.value for let in _lets(out)] == [to_ir(x * x)]
    likely = to_ir(hl.select(hl.likely(x > x * x), x * 2, 3) + hl.select(hl.likely(x > x * x), 5, 7))
    out = cse(likely)
    assert [type(c.args[0]) for c in _nodes(out, ir.Call)] == [ir.GT, ir.GT]


def test_zero_and_negative_zero_are_different_values():
    """0.0 == -0.0 in Python; as constants of a program they differ (1/x tells them apart)."""
    x = hl.Var("x")
    fx = hl.f32(x)
    e = to_ir(1 / (fx * hl.f32(0.0) - 1) + 1 / (fx * hl.f32(-0.0) - 1) + (fx * fx) * (fx * fx))
    out = cse(e)
    signs = {math.copysign(1, n.value) for n in _nodes(out, ir.FloatImm) if n.value == 0}
    assert signs == {1.0, -1.0}


def test_lets_in_the_input_are_put_in_place_with_their_scopes():
    """An expression holding Lets (one shadowing another, a shared node under both) means the
    same after CSE."""
    x = ir.Variable("x")
    a = ir.Variable("a")
    shared = ir.Mul(a, x)
    e = ir.Let("a", ir.Add(x, ir.make_const(x.type, 3)),
               ir.Add(shared, ir.Let("a", ir.Mul(a, a), ir.Add(shared, shared))))
    out = cse(e)
    xs = {"x": np.arange(-4, 5, dtype=np.int32)}
    np.testing.assert_array_equal(evaluate_expr(out, xs), evaluate_expr(e, xs))
    assert not any(let.name == "a" for let in _nodes(out, ir.Let))


def test_let_names_are_never_a_variable_of_the_expression():
    """A user Var named like the next few lets is not captured by them."""
    from pyhalide.names import unique_name

    k = int(unique_name("t")[1:])
    vs = [hl.Var(f"t{k + i}") for i in range(1, 6)]
    f = hl.Func("user_ts")
    s = vs[0] * vs[1] + vs[2]
    f[vs[0], vs[1], vs[2]] = s * s + (s * s) * vs[0]
    got = np.asarray(f.realize([3, 4, 5]))
    c, b, a = np.meshgrid(np.arange(5), np.arange(4), np.arange(3), indexing="ij")
    s = a * b + c
    np.testing.assert_array_equal(got, (s * s + s * s * a).astype(np.int32))


_HASH_AND_TEXT = """
import sys, tempfile, os
import pyhalide as hl
x = hl.Var("x")
for k in range(int(sys.argv[1])):  # definitions made before, whose lets take numbers
    a = hl.Expr(x) * k
    g = hl.Func(); g[x] = a * a + a
f, inp = hl.Func("f"), hl.ImageParam(hl.Float(32), 1, "inp")
v = inp[x] * inp[x + 1]
f[x] = v * v + hl.sqrt(v)
path = os.path.join(tempfile.mkdtemp(), "f.stmt")
f.compile_to_lowered_stmt(path, [inp])
print(hl.Pipeline(f).structural_hash(), open(path).read().replace(path, ""))
"""


def test_the_lets_names_do_not_depend_on_what_the_process_made_before():
    """The tuning database's key (the structural hash) and the lowered text (the compile cache's
    key) are the same in a fresh process and in one that made other lets first."""
    outs = [subprocess.run([sys.executable, "-c", _HASH_AND_TEXT, str(n)], capture_output=True, text=True,
                           check=True).stdout for n in (0, 7)]
    assert outs[0] == outs[1]
    assert "let t0 = " in outs[0]  # the lets are there, numbered from 0 in both


# ------------------------------------------------------------------------------ random graphs
_BINARY = ["add", "sub", "mul", "min", "max", "div", "mod", "select", "absd"]


@st.composite
def _graphs(draw):
    """A program of steps, each combining two earlier values (so later ones share earlier ones
    many times over): [(op, i, j, constant)]."""
    n = draw(st.integers(3, 40))
    steps = []
    for k in range(n):
        op = draw(st.sampled_from(_BINARY))
        i, j = draw(st.integers(0, k + 1)), draw(st.integers(0, k + 1))
        steps.append((op, i, j, draw(st.integers(-7, 7))))
    return steps


def _build(lib, steps, x, y):
    values = [x + 0, y * 3 - x]
    for op, i, j, c in steps:
        a, b = values[i], values[j]
        if op == "add":
            v = a + b
        elif op == "sub":
            v = a - b + c
        elif op == "mul":
            v = a * b
        elif op == "min":
            v = lib.min(a, b + c)
        elif op == "max":
            v = lib.max(a, b)
        elif op == "div":
            v = a / (b | 1)  # never by zero
        elif op == "mod":
            v = a % (c or 5)
        elif op == "select":
            v = lib.select(a < b, a, b * c)
        else:
            v = lib.absd(a, b)
            v = lib.cast(lib.Int(32), v)
        values.append(v)
    return values[-1]


@given(_graphs())
def test_random_shared_graphs_compute_what_halide_computes(steps):
    """Integer expression graphs with heavy sharing, defined in pyhalide (through CSE) and in
    real Halide: bit-exact equal results."""
    results = []
    for lib in (hl, halide):
        x, y = lib.Var("x"), lib.Var("y")
        f = lib.Func("g")
        f[x, y] = _build(lib, steps, x, y)
        results.append(np.asarray(f.realize([7, 5])))
    np.testing.assert_array_equal(results[0], results[1])


@given(_graphs())
def test_cse_keeps_the_value_of_random_graphs(steps):
    """The reference evaluator (which walks a graph by node, each once) gives the same values
    for an expression and its CSE'd form."""
    x, y = hl.Var("x"), hl.Var("y")
    e = to_ir(_build(hl, steps, x, y))
    args = {"x": np.arange(-3, 4, dtype=np.int32)[:, None], "y": np.arange(-2, 3, dtype=np.int32)[None, :]}
    np.testing.assert_array_equal(evaluate_expr(cse(e), args), evaluate_expr(e, args))


def _doubly_shared(step, depth: int = 60):
    """An expression DAG each level of which uses the one below twice: 2 * depth nodes, a tree
    of 2**depth."""
    e = ir.Min(ir.Variable("v", Int(32)), ir.make_const(Int(32), 10))
    for _ in range(depth):
        e = step(e)
    return e


def test_a_constant_bound_of_a_deeply_shared_extent_is_found_once_per_subtree():
    """Lets substituted into an allocation's extent shared each level twice (stencil_chain under
    one auto schedule: its compile ran over 20 minutes in constant_bound)."""
    from pyhalide.bounds import constant_bound

    e = _doubly_shared(lambda e: ir.Min(e, ir.Add(e, ir.make_const(Int(32), 1))))
    assert constant_bound(e, upper=True) == 10
    assert constant_bound(ir.Sub(e, ir.make_const(Int(32), 4)), upper=True) == 6


def test_an_index_that_shares_its_parts_is_taken_apart_once_per_subtree():
    from pyhalide.ir_mutator import affine_in

    e = _doubly_shared(lambda e: ir.Add(e, ir.Add(e, ir.Variable("x", Int(32)))))
    k, rest = affine_in(e, "x")
    assert k == 2**60 - 1 and "x" not in free_variables(rest)


def test_lets_whose_values_share_subtrees_are_named_once_before_code_generation():
    """A scalar let built by substitution (bounds of a pyramid's levels) walks as a tree many times
    its graph: the last lowering pass names what it shares, so code generators emit it once. What
    the let computes is unchanged; a small value, or one that shares little, is left as it is."""
    from pyhalide.cse import inline_lets
    from pyhalide.lowering.shared_lets import MIN_TREE, name_shared_subexpressions

    lo, hi = ir.Variable("lo"), ir.Variable("hi")
    e = lo
    for k in range(12):  # each level's bound from the last one's, used twice
        e = ir.Min(ir.Add(ir.Div(e, ir.make_const(Int(32), 2)), hi), ir.Sub(e, ir.make_const(Int(32), k)))
    small = ir.Add(lo, hi)
    body = ir.Evaluate(ir.Add(ir.Variable("big"), ir.Variable("small")))
    stmt = name_shared_subexpressions(ir.LetStmt("big", e, ir.LetStmt("small", small, body)))
    named, inner = stmt.value, stmt.body
    assert len(_lets(named)) >= 11 and len(_nodes(named, ir.Min)) == 12  # one Min per level, not 4095
    assert inline_lets(named) == e and inner.value is small
    env = {"lo": np.arange(-50, 50, dtype=np.int32), "hi": np.int32(7)}
    np.testing.assert_array_equal(evaluate_expr(named, env), evaluate_expr(e, env))
    assert len(_nodes(e, ir.Min)) == 2**12 - 1 >= MIN_TREE
