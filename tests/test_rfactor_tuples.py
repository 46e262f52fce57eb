"""rfactor beyond a single + * min max: Tuple reductions (argmin, argmax, complex multiply) and
unsigned saturating adds, proven associative by lowering/legality.prove_associativity.

Ports the cases of Halide's test/correctness/rfactor.cpp that use them, checked against real
Halide 21 (`import halide`: each builder takes the module) where Halide 21 proves the form, and
against numpy or the unscheduled algorithm (pyhalide's reference evaluator) always. pyhalide also
proves forms Halide 21 does not (an argmin's index first, ties kept by either comparison). A
property then draws argmins and argmaxes over data full of ties, every way of writing them, and
rfactors them by random bands: keeping the outer RVars keeps even ties exact.
"""

from __future__ import annotations

import halide
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyhalide as hl
from pyhalide import reference
from pyhalide.lowering.legality import prove_associativity, update_is_associative


def _arrays(out) -> list[np.ndarray]:
    buffers = [out] if isinstance(out, hl.Buffer | halide.Buffer) else list(out)
    return [np.asarray(b) for b in buffers]


def _agree(build, sizes, with_halide=True) -> list[np.ndarray]:
    """build(module, scheduled) realized by pyhalide (scheduled), by the reference evaluator
    (the algorithm alone) and by Halide 21 (scheduled): all equal. Returns pyhalide's arrays."""
    ours = _arrays(build(hl, True).realize(sizes))
    others = [("reference", reference.realize(build(hl, False), sizes))]
    if with_halide:
        others.append(("Halide", _arrays(build(halide, True).realize(sizes))))
    for name, other in others:
        assert len(other) == len(ours)
        for got, want in zip(ours, other):
            np.testing.assert_array_equal(got, want, err_msg=f"pyhalide vs {name}")
    return ours


def _split_and_rfactor(h, g, r, factor, preserve="outer"):
    """Halide's schedule in rfactor.cpp: g's update split by factor, rfactored over the outer
    (or inner) piece into an intermediate computed at root and vectorized over the new Var."""
    ro, ri, u = h.RVar("rxo"), h.RVar("rxi"), h.Var("u")
    g.update(0).split(r.x, ro, ri, factor)
    intm = g.update(0).rfactor(ro if preserve == "outer" else ri, u)
    intm.compute_root()
    intm.update(0).vectorize(u, 2)
    return intm


# ------------------------------------------------------------------------------ Halide's cases
def test_complex_multiply_rfactor():
    def build(h, scheduled):
        x, y = h.Var("x"), h.Var("y")
        f, g = h.Func("f"), h.Func("g")
        f[x, y] = h.Tuple([x + y, x - y])
        f.compute_root()
        r = h.RDom([(10, 20), (30, 40)])
        g[x, y] = h.Tuple([10, 20])
        a, b = g[x, y][0], g[x, y][1]
        c, d = f[r.x, r.y][0], f[r.x, r.y][1]
        g[x, y] = h.Tuple([a * c - b * d, a * d + b * c])
        if scheduled:
            _split_and_rfactor(h, g, r, 2)
        return g

    _agree(build, [80, 80])


def test_argmin_of_three_elements_rfactor():
    """argmin_rfactor_test: a minimum and two coordinates chosen with it (ties go to the last)."""
    def build(h, scheduled):
        x, y = h.Var("x"), h.Var("y")
        f, g = h.Func("f"), h.Func("g")
        f[x, y] = (x - 17) * (x - 17) + (y - 51) * (y - 51) // 4  # equal minima along y
        f.compute_root()
        r = h.RDom([(10, 20), (30, 40)])
        g[()] = h.Tuple([1 << 20, h.f32(-1), h.f32(-1)])
        best, new = g[()][0], f[r.x, r.y]
        g[()] = h.Tuple([h.min(best, new), h.select(best < new, g[()][1], h.f32(r.x)),
                         h.select(best < new, g[()][2], h.f32(r.y))])
        if scheduled:
            _split_and_rfactor(h, g, r, 2)
        return g

    value, rx, ry = _agree(build, [])
    assert (value[()], rx[()], ry[()]) == (0, 17, 52)  # (y-51)^2 // 4 is 0 at 50, 51 and 52: the last


def test_saturating_add_rfactor():
    """saturating_add_rfactor_test, written as a select (the form Halide 21 gets wrong) and as
    hl.saturating_add (the form it proves)."""
    def build(h, scheduled, form):
        x = h.Var("x")
        f, g = h.Func("f"), h.Func("g")
        f[x] = h.u8(x)
        f.compute_root()
        r = h.RDom([(10, 6)])
        g[()] = h.Tuple([h.u8(0), h.u8(0)])
        a, b = g[()][0], g[()][1]
        if form == "select":
            g[()] = h.Tuple([h.select(a > 255 - 3 * f[r.x], h.u8(255), a + 3 * f[r.x]),
                             h.select(b > 255 - 9 * f[r.x], h.u8(255), 9 * f[r.x] + b)])
        else:
            g[()] = h.Tuple([h.saturating_add(a, 3 * f[r.x]), h.saturating_add(9 * f[r.x], b)])
        if scheduled:
            _split_and_rfactor(h, g, r, 2)
        return g

    expected = [min(sum(k * i for i in range(10, 16)), 255) for k in (3, 9)]
    for form in ("select", "call"):
        got = _agree(lambda h, s, form=form: build(h, s, form), [], with_halide=form == "call")
        assert [int(v[()]) for v in got] == expected == [225, 255]


@pytest.mark.parametrize("value_first", [True, False])
@pytest.mark.parametrize("tuple_select", [False, True])
def test_argmax_rfactor(value_first, tuple_select):
    """argmax_rfactor_test's four variants: sin(x*pi/8) peaks at 4 and again at 20, and `<`
    keeps the first peak. (Halide 21 proves none of these: its patterns came later.)"""
    x = hl.Var("x")
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = hl.sin(hl.f32(x) / 8 * np.float32(np.pi))
    f.compute_root()
    r = hl.RDom([(0, 32)])
    v, i = (0, 1) if value_first else (1, 0)
    g[()] = hl.Tuple([hl.Float(32).min(), r.x.min()] if value_first else [r.x.min(), hl.Float(32).min()])
    better = g[()][v] < f[r]
    if tuple_select:
        g[()] = hl.select(better, hl.Tuple([f[r], r.x] if value_first else [r.x, f[r]]), g[()])
    else:
        new = [hl.max(f[r], g[()][v]), hl.select(better, r.x, g[()][i])]
        g[()] = hl.Tuple(new if value_first else new[::-1])
    _split_and_rfactor(hl, g, r, 2)
    out = _arrays(g.realize([]))
    assert (out[v][()], out[i][()]) == (1.0, 4)


def test_argmin_rfactored_over_an_inner_rvar_matches_halide():
    """Keeping the inner RVar folds the partial argmins out of the update's order: which of equal
    minima wins may then change (Halide counts argmin commutative and accepts it; so does
    pyhalide). Both compute the same thing."""
    data = np.random.default_rng(3).integers(0, 3, (24, 10)).astype(np.int32)

    def build(h, scheduled):
        inp = h.Buffer(data)
        g = h.Func("g")
        r = h.RDom([(0, 10), (0, 24)])
        g[()] = h.Tuple([h.i32(99), h.i32(-1), h.i32(-1)])
        best, new = g[()][0], inp[r.x, r.y]
        g[()] = h.Tuple([h.min(best, new), h.select(best < new, g[()][1], r.x),
                         h.select(best < new, g[()][2], r.y)])
        if scheduled:
            intm = g.update(0).rfactor(r.x, h.Var("u"))
            intm.compute_root().vectorize(h.Var("u"), 4)
        return g

    ours = _arrays(build(hl, True).realize([]))
    theirs = _arrays(build(halide, True).realize([]))
    assert [a[()] for a in ours] == [a[()] for a in theirs]
    assert ours[0][()] == 0 and data[ours[2][()], ours[1][()]] == 0


# ------------------------------------------------------------------------------ the property
@st.composite
def _arg_reductions(draw):
    n = draw(st.integers(1, 40))
    rows = draw(st.integers(1, 3))
    data = draw(st.lists(st.integers(0, 3), min_size=n * rows, max_size=n * rows))
    flags = {k: draw(st.booleans()) for k in ("minimum", "last", "index_first", "key_select", "mirrored", "keep_form")}
    return dict(data=np.array(data, np.int32).reshape(rows, n), factor=draw(st.integers(1, 9)),
                lanes=draw(st.sampled_from([1, 4])), **flags)


def _arg_reduction(c, scheduled):
    """An argmin or argmax over an image's rows then columns, written as the case draws: the key
    as min/max or as a select, ties kept by the first or the last, the comparison either way
    round, the index first or second."""
    rows, n = c["data"].shape
    inp = hl.Buffer(c["data"])
    r = hl.RDom([(0, n), (0, rows)])
    g = hl.Func("g")
    k, j = (1, 0) if c["index_first"] else (0, 1)
    worst = 1 << 30 if c["minimum"] else -(1 << 30)
    init = [hl.i32(worst), hl.i32(-1)]
    g[()] = hl.Tuple(init[::-1] if c["index_first"] else init)
    old, new, index = g[()][k], inp[r.x, r.y], r.x + r.y * n

    def strictly(a, b):  # a is the better of a and b
        if c["minimum"]:
            return (a < b) if not c["mirrored"] else (b > a)
        return (a > b) if not c["mirrored"] else (b < a)

    def weakly(a, b):  # a is the better or as good
        if c["minimum"]:
            return (a <= b) if not c["mirrored"] else (b >= a)
        return (a >= b) if not c["mirrored"] else (b <= a)

    if c["key_select"]:
        key = hl.select(strictly(new, old), new, old)
    else:
        key = hl.min(old, new) if c["minimum"] else hl.max(new, old)
    if c["keep_form"]:  # select(keep the old, old, new)
        payload = hl.select(strictly(old, new) if c["last"] else weakly(old, new), g[()][j], index)
    else:  # select(take the new, new, old)
        payload = hl.select(weakly(new, old) if c["last"] else strictly(new, old), index, g[()][j])
    g[()] = hl.Tuple([payload, key] if c["index_first"] else [key, payload])
    if scheduled:
        ro, ri, u = hl.RVar("ro"), hl.RVar("ri"), hl.Var("u")
        g.update(0).split(r.x, ro, ri, c["factor"]).reorder(ri, ro, r.y)
        # the outermost RVars kept: r.y, and ro (now directly inside it)
        intm = g.update(0).rfactor([(ro, u), (r.y, hl.Var("v"))])
        intm.compute_root()
        if c["lanes"] > 1:
            intm.update(0).vectorize(u, c["lanes"], hl.TailStrategy.GuardWithIf)  # bands may be fewer
    return g, (k, j)


@settings(max_examples=60, deadline=None)
@given(_arg_reductions())
def test_rfactor_of_outer_rvars_keeps_argmin_ties_exact(c):
    flat = c["data"].ravel()
    order = flat if not c["last"] else flat[::-1]
    at = int(np.argmin(order) if c["minimum"] else np.argmax(order))
    at = at if not c["last"] else flat.size - 1 - at
    g, (k, j) = _arg_reduction(c, True)
    out = _arrays(g.realize([]))
    assert (int(out[k][()]), int(out[j][()])) == (int(flat[at]), at), c
    unscheduled, _ = _arg_reduction(c, False)
    assert [a[()] for a in out] == [a[()] for a in _arrays(unscheduled.realize([]))]


# ------------------------------------------------------------------------------ what is refused
def _tuple_update(size, values):
    g = hl.Func("g")
    r = hl.RDom([(0, 16)])
    g[()] = hl.Tuple([hl.i32(0)] * size)
    g[()] = hl.Tuple(values(g, r))
    return g, r


@pytest.mark.parametrize("case", ["argmax_with_argmin_payload", "payload_reads_payload", "signed_saturating",
                                  "subtracted_from"])
def test_what_is_not_associative_is_refused_by_name(case):
    x0 = lambda g: g[()][0]  # noqa: E731
    values = {
        "argmax_with_argmin_payload": lambda g, r: [hl.max(x0(g), r.x), hl.select(x0(g) < r.x, g[()][1], r.x)],
        "payload_reads_payload": lambda g, r: [hl.min(x0(g), r.x), hl.select(x0(g) < r.x, g[()][2], r.x),
                                               hl.select(x0(g) < r.x, g[()][1], r.x)],
        "signed_saturating": lambda g, r: [hl.saturating_add(hl.i8(x0(g)), hl.i8(r.x)), r.x],
        "subtracted_from": lambda g, r: [r.x - x0(g), g[()][1] + r.x],
    }[case]
    if case == "signed_saturating":
        g, r = hl.Func("g"), hl.RDom([(0, 16)])
        g[()] = hl.i8(0)
        g[()] = hl.saturating_add(g[()], hl.i8(r.x))
    else:
        g, r = _tuple_update(3 if case == "payload_reads_payload" else 2, values)
    assert prove_associativity(g, 1) is None
    with pytest.raises(hl.HalideError, match=r"In schedule for g\S*: can't rfactor: the update is not an associative"):
        g.update(0).rfactor(r.x, hl.Var("u"))


def test_which_operators_are_commutative():
    """An argmin's ties make it order dependent: the autoscheduler and the schedule fuzz, which
    must not change a result, leave its RVar loops in order (update_is_associative); a user's
    schedule may reorder them, as in Halide."""
    x = hl.Var("x")
    r = hl.RDom([(0, 8), (0, 8)])
    arg = hl.Func("arg")
    arg[x] = hl.Tuple([hl.i32(100), hl.i32(0)])
    arg[x] = hl.Tuple([hl.min(arg[x][0], r.x * r.y), hl.select(arg[x][0] < r.x * r.y, arg[x][1], r.x)])
    sat = hl.Func("sat")
    sat[x] = hl.u16(0)
    sat[x] = hl.saturating_add(sat[x], hl.u16(r.x * x))
    cplx = hl.Func("cplx")
    cplx[x] = hl.Tuple([1, 0])
    a, b = cplx[x][0], cplx[x][1]
    cplx[x] = hl.Tuple([a * r.x - b * r.y, b * r.x + a * r.y])
    op = prove_associativity(arg, 1)
    assert op is not None and not op.commutative and not update_is_associative(arg, 1)
    assert update_is_associative(sat, 1) and update_is_associative(cplx, 1)
    arg.update(0).reorder(r.y, r.x)  # as Halide 21 allows
    expected = np.asarray(cplx.realize([3]))
    cplx.update(0).reorder(r.y, r.x)
    assert np.array_equal(np.asarray(cplx.realize([3])), expected)


@pytest.mark.parametrize("form", ["sum_regrouped", "difference", "shifted_max", "shifted_min_alone"])
def test_updates_proven_associative_after_regrouping_rfactor_exactly(form):
    """Forms Halide's simplifier brings to `f op e` before its prover sees them, proven here by
    regrouping: `(f + a) + 3` and `f - a` are f + e; `max(f + a, f + b)` is f + max(a, b) (32-bit
    integers, whose sums Halide assumes do not overflow). rfactored over inner bands, each
    computes what the algorithm does. (`f(r) = f(r)`, which keeps f: tests/test_halide_rfactor.py)"""
    data = np.random.default_rng(7).integers(-50, 50, (6, 37)).astype(np.int32)
    inp = hl.Buffer(data)
    x = hl.Var("x")
    r = hl.RDom([(0, 37)])
    g = hl.Func("g_" + form)
    g[x] = x * 5
    e, old = inp[r.x, x], g[x]
    g[x] = {"sum_regrouped": (old + e) + 3, "difference": old - e * 2, "shifted_max": hl.max(old + e, old - 3),
            "shifted_min_alone": hl.min(old, e + old)}[form]
    assert update_is_associative(g, 1)
    want = np.asarray(reference.realize(g, [6])[0])
    ro, ri, u = hl.RVar("ro"), hl.RVar("ri"), hl.Var("u")
    intm = g.update(0).split(r.x, ro, ri, 8).rfactor(ri, u)
    intm.compute_root().update(0).vectorize(u, 8)
    np.testing.assert_array_equal(np.asarray(g.realize([6])), want)
