"""Specializations as loop nests of their own, and rfactor on a specialization: each
specialization of an update computes a definition of its own, as in Halide
(`g.update(0).specialize(p).rfactor(r, u)` rewrites that specialization only).

The stage's own schedule keeps its RVars for later directives; an rfactor of the stage itself
leaves the specializations made before it computing the definition they had; each branch of the
lowered update reduces its own intermediate. A Func placed in a loop of its consumer goes into
the branches that use it, and by default (a Func with updates) into each branch's innermost
loop. Results are checked against numpy and Halide 21.
"""

from __future__ import annotations

import re

import halide
import numpy as np
import pytest

import pyhalide as hl

_DATA = np.random.default_rng(7).integers(-50, 50, 103).astype(np.int32)


def _sum_pipeline(h, p_value):
    """g(x) = sum over r in [0, 103) of in(r) * (x + 1), with a bool Param p to specialize on."""
    x = h.Var("x")
    g = h.Func("g")
    r = h.RDom([(0, 103)])
    g[x] = 0
    g[x] += h.Buffer(_DATA, "data")[r.x] * (x + 1)
    p = h.Param(h.Bool(), "p")
    p.set(p_value)
    return g, r, p


def _expected():
    return int(_DATA.sum()) * (np.arange(8) + 1)


def _update_branches(g, tmp_path) -> tuple[str, str]:
    """The lowered text of g's update where p holds, and where it does not."""
    path = tmp_path / "g.stmt"
    g.compile_to_lowered_stmt(str(path), [], hl.StmtOutputFormat.Text)
    text = path.read_text()
    update = text[text.index(f"produce {g.name()} {{"):]
    branch = re.search(r"if \(p\) \{(.*?)\n\s*\} else \{(.*)", update, re.S)
    assert branch, "the update has a branch per specialization"
    return branch.group(1), branch.group(2)


@pytest.mark.parametrize("p_value", [True, False])
def test_each_specialization_reduces_its_own_intermediate(p_value, tmp_path):
    """The specialization splits r and keeps the inner piece, the stage itself keeps the outer
    piece of another split: two intermediates, one per branch, each with its own loops."""
    def build(h):
        g, r, p = _sum_pipeline(h, p_value)
        u, v = h.Var("u"), h.Var("v")
        ro, ri = h.RVar("ro"), h.RVar("ri")
        special = g.update(0).specialize(p)
        special.split(r.x, ro, ri, 8)
        special.rfactor(ri, u).compute_root().update(0).vectorize(u)
        # the stage's own schedule still has r.x, which the specialization's rfactor took apart
        g.update(0).split(r.x, ro, ri, 16)
        g.update(0).rfactor(ro, v).compute_root().update(0).parallel(v)
        return g

    got = np.asarray(build(hl).realize([8]))
    np.testing.assert_array_equal(got, _expected())
    np.testing.assert_array_equal(got, np.asarray(build(halide).realize([8])))
    then_branch, else_branch = _update_branches(build(hl), tmp_path)
    then_reads = set(re.findall(r"(g_s1_intm[$\d]*)\[", then_branch))
    else_reads = set(re.findall(r"(g_s1_intm[$\d]*)\[", else_branch))
    assert len(then_reads) == len(else_reads) == 1 and then_reads != else_reads


def test_rfactor_of_the_stage_leaves_earlier_specializations_computing_their_definition(tmp_path):
    """A specialization made before the stage is rfactored keeps the original reduction (it reads
    the input itself, not the intermediate) and the loops it scheduled over its RVar."""
    def build(h, p_value=True):
        g, r, p = _sum_pipeline(h, p_value)
        ro, ri = h.RVar("ro"), h.RVar("ri")
        g.update(0).specialize(p).split(r.x, ro, ri, 4).reorder(ri, ro, g.args()[0])
        g.update(0).rfactor(r.x, h.Var("u")).compute_root()
        return g

    for p_value in (True, False):
        got = np.asarray(build(hl, p_value).realize([8]))
        np.testing.assert_array_equal(got, _expected())
        np.testing.assert_array_equal(got, np.asarray(build(halide, p_value).realize([8])))
    then_branch, else_branch = _update_branches(build(hl), tmp_path)
    assert "data[" in then_branch and "intm" not in then_branch and "$x.ri, " in then_branch
    assert "data[" not in else_branch and "g_s1_intm" in else_branch


def test_a_specialization_made_after_rfactor_computes_the_rfactored_definition():
    """specialize() copies the stage as it is: after rfactor, the merge of the intermediate,
    whose RVar is the one kept (ri here), so the specialization can split it."""
    g, r, p = _sum_pipeline(hl, True)
    ro, ri, rro, rri = hl.RVar("ro"), hl.RVar("ri"), hl.RVar("rro"), hl.RVar("rri")
    g.update(0).split(r.x, ro, ri, 10)
    g.update(0).rfactor(ri, hl.Var("u")).compute_root()
    g.update(0).specialize(p).split(ri, rro, rri, 2)
    for value in (True, False):
        p.set(value)
        np.testing.assert_array_equal(np.asarray(g.realize([8])), _expected())


def test_rfactor_on_a_specialization_of_an_order_dependent_update_is_refused():
    """A specialization's definition is the stage's: an update that is not an associative
    reduction is refused there as it is on the stage, naming the stage."""
    x = hl.Var("x")
    g = hl.Func("g")
    r = hl.RDom([(0, 10)])
    g[x] = 1
    g[x] = g[x] * 3 - r.x
    with pytest.raises(hl.CompileError, match=r"In schedule for g\S*\.s1: can't rfactor"):
        g.update(0).specialize(hl.Param(hl.Bool(), "q") == 1).rfactor(r.x, hl.Var("u"))


def test_an_rfactor_intermediates_update_is_not_reported_unscheduled(capsys):
    """As in Halide, the intermediate's update takes the reduction's schedule: scheduling only
    its pure step draws no 'has not been scheduled' warning."""
    g, r, _ = _sum_pipeline(hl, True)
    g.update(0).rfactor(r.x, hl.Var("u")).compute_root().vectorize(hl.Var("x"), 8)
    np.testing.assert_array_equal(np.asarray(g.realize([8])), _expected())
    assert "has not been scheduled" not in capsys.readouterr().out


def test_serializing_a_specialization_with_a_definition_of_its_own_is_refused(tmp_path):
    """serialize_pipeline records a specialization as its loops: one that computes a definition
    of its own could not be read back as it is, so it is refused, naming the stage; one made
    after its stage's rfactor computes the stage's definition and is written."""
    g, r, p = _sum_pipeline(hl, True)
    ro, ri = hl.RVar("ro"), hl.RVar("ri")
    g.update(0).specialize(p).split(r.x, ro, ri, 8).rfactor(ri, hl.Var("u")).compute_root()
    with pytest.raises(hl.HalideError, match=r"specialization of g\S*\.s1 computes a definition of its own"):
        hl.serialize_pipeline(hl.Pipeline(g), str(tmp_path / "refused.json"))

    g, r, p = _sum_pipeline(hl, True)
    g.update(0).rfactor(r.x, hl.Var("u")).compute_root()
    g.update(0).specialize(p).vectorize(hl.Var("x"), 4)
    hl.serialize_pipeline(hl.Pipeline(g), str(tmp_path / "written.json"))
    loaded = hl.deserialize_pipeline(str(tmp_path / "written.json"), {})
    np.testing.assert_array_equal(np.asarray(loaded.realize([8])), _expected())


_WINDOW = np.random.default_rng(3).integers(0, 9, (6, 12)).astype(np.int32)


def _window_sum_pipeline(h, selector: int):
    """am(x, y): a sum over r of in(x + r, y) (a Func with an update, left unscheduled: Halide
    computes it in the innermost loop of its consumer), read by out(x, y) = am(x, y) * 3 + y."""
    x, y = h.Var("x"), h.Var("y")
    r = h.RDom([(0, 4)])
    am, out = h.Func("am"), h.Func("am_out")
    am[x, y] = 0
    am[x, y] += h.Buffer(_WINDOW, "am_in")[x + r.x, y]
    out[x, y] = am[x, y] * 3 + y
    sel = h.Param(h.Int(32), "sel")
    sel.set(selector)
    return am, out, r, sel


@pytest.mark.parametrize("selector", [0, 1])
def test_a_func_left_unscheduled_goes_in_each_specializations_innermost_loop(selector):
    """The output's specialization splits its innermost loop again: the sum, computed by
    default in the innermost loop, goes into the base's xi and the specialization's xii."""
    def build(h):
        am, out, _, sel = _window_sum_pipeline(h, selector)
        x, xo, xi, xio, xii = (h.Var(n) for n in ("x", "xo", "xi", "xio", "xii"))
        out.split(x, xo, xi, 2, h.TailStrategy.GuardWithIf)
        out.specialize(sel >= 1).split(xi, xio, xii, 1, h.TailStrategy.GuardWithIf)
        return out

    got = np.asarray(build(hl).realize([5, 3]))
    np.testing.assert_array_equal(got, np.asarray(build(halide).realize([5, 3])))


@pytest.mark.parametrize("selector", [0, 1])
def test_an_intermediate_goes_only_into_the_branches_that_read_it(selector):
    """A specialization made before its stage's rfactor reads the input itself, and has a loop
    of the name the intermediate is computed at: the intermediate goes only into the stage's own
    loop nest, which reads it."""
    def build(h):
        am, out, r, sel = _window_sum_pipeline(h, selector)
        y, yo, yi = h.Var("y"), h.Var("yo"), h.Var("yi")
        am.update(0).specialize(sel >= 1).split(y, yo, yi, 2)
        am.update(0).rfactor(r.x, h.Var("u")).compute_at(am, r.x)
        am.compute_root()
        return out

    got = np.asarray(build(hl).realize([5, 3]))
    np.testing.assert_array_equal(got, np.asarray(build(halide).realize([5, 3])))


@pytest.mark.parametrize("selector", [0, 1])
def test_a_func_computed_at_a_loop_only_a_specialization_has(selector):
    """The specialization splits r and rfactors it keeping the outer piece, which its merge
    loops over and the stage itself does not have: the specialization's intermediate is
    computed there."""
    def build(h):
        am, out, r, sel = _window_sum_pipeline(h, selector)
        ro, ri = h.RVar("ro"), h.RVar("ri")
        special = am.update(0).specialize(sel >= 1)
        special.split(r.x, ro, ri, 2)
        special.rfactor(ro, h.Var("u")).compute_at(am, ro)
        am.compute_root()
        return out

    got = np.asarray(build(hl).realize([5, 3]))
    np.testing.assert_array_equal(got, np.asarray(build(halide).realize([5, 3])))


def test_a_func_the_stage_reads_computed_at_a_loop_only_a_specialization_has_is_refused():
    """f is read by the stage's own loops too, which lack the loop it is computed at."""
    x, y, xo, xi = hl.Var("x"), hl.Var("y"), hl.Var("xo"), hl.Var("xi")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x * y
    g[x, y] = f[x, y] + 1
    g.specialize(hl.Param(hl.Int(32), "sel") >= 1).split(x, xo, xi, 2)
    f.compute_at(g, xi)
    with pytest.raises(hl.CompileError, match=r"Func f\S* is computed at .*also used outside that loop"):
        g.realize([4, 4])
