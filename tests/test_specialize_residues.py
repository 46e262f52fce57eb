"""Loop versioning on residues: vectorized x % k and x / k over a region whose min is not known
when compiling get one loop version per phase, and compute what the loop did for every min,
extent and tail strategy."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import pyhalide as hl
from pyhalide.ir_mutator import IRVisitor
from pyhalide.lower import lower
from pyhalide.lowering.specialize_residues import _candidate

x, y = hl.Var("x"), hl.Var("y")


class _Found(IRVisitor):
    """Residue lets, and the x % k or x / k of a ramp whose phase is unknown, outside and
    inside the versions."""

    def __init__(self):
        super().__init__()
        self.residue_lets = 0
        self.unknown_phase = 0

    def visit_LetStmt(self, s):
        self.residue_lets += ".residue." in s.name
        self.visit_children(s)

    def visit_Div(self, e):
        self.unknown_phase += _candidate(e) is not None
        self.visit_children(e)

    visit_Mod = visit_Div


def _mosaic(k: int, c: int, lanes: int, tail):
    """out(x, y) = a[(x + c) / k, y] where (x + c) % k == 0, else b[...] + (x + c) % k; its
    inputs cover exactly what a region of the output reads once their mins are set."""
    rng = np.random.default_rng(k * 100 + c)
    a = rng.integers(-1000, 1000, (6, 40)).astype(np.int32)  # numpy [y, x]
    b = rng.integers(-1000, 1000, (6, 40)).astype(np.int32)
    A, B = hl.Buffer(a, "res_a"), hl.Buffer(b, "res_b")
    f = hl.Func(f"mosaic_{k}_{c}")
    q, r = (x + c) / k, (x + c) % k
    f[x, y] = hl.select(r == 0, A[q, y], B[q, y] + r)
    f.vectorize(x, lanes, tail)
    return f, A, B, a, b


def _realize_and_check(f, A, B, a, b, k, c, lo, n):
    q_lo = (lo + c) // k
    A.set_min([q_lo, 0])
    B.set_min([q_lo, 0])
    out = hl.Buffer(hl.Int(32), [n, 6])
    out.set_min([lo, 0])
    f.realize(out)
    xs = np.arange(lo, lo + n)
    qi, ri = (xs + c) // k - q_lo, (xs + c) % k
    want = np.where(ri == 0, a[:, qi], b[:, qi] + ri)
    assert np.array_equal(np.asarray(out), want), (k, c, lo, n)


def test_a_bayer_select_gets_a_version_per_phase_and_each_is_right():
    f, A, B, a, b = _mosaic(2, 0, 8, hl.TailStrategy.ShiftInwards)
    found = _Found()
    lower([f], hook=lambda name, stmt: found.visit(stmt) if name == "specialize residues" else None)
    # the vector loop's base is min(x.x * 8 + x.min, x.max - 7): partitioned, its steady state
    # has one form (x.x * 8 + x.min), its last iteration both, each with its let
    assert found.residue_lets == 3
    # only the version kept for when the two disagree (an odd extent) has unknown phases
    assert found.unknown_phase > 0
    for lo in range(-3, 4):
        for n in (8, 16, 17, 23, 30):
            _realize_and_check(f, A, B, a, b, 2, 0, lo, n)


def test_every_version_is_free_of_unknown_phases_when_the_tail_is_guarded():
    """GuardWithIf keeps the vector's base x.x * 8 + x.min: one form, k versions, no fallback, in
    each of the loop's two parts (loop partitioning splits the last vector, whose lanes the guard
    tests, from the steady state)."""
    f, *_ = _mosaic(2, 1, 8, hl.TailStrategy.GuardWithIf)
    found = _Found()
    lower([f], hook=lambda name, stmt: found.visit(stmt) if name == "specialize residues" else None)
    assert found.residue_lets == 2 and found.unknown_phase == 0


@settings(max_examples=40, deadline=None)
@given(k=st.sampled_from([2, 3, 4]), c=st.integers(-5, 5), vectors=st.integers(1, 3),
       tail=st.sampled_from(["ShiftInwards", "GuardWithIf"]), lo=st.integers(-9, 9),
       n=st.integers(1, 30))
def test_versions_compute_what_the_loop_did(k, c, vectors, tail, lo, n):
    lanes = k * 4 * vectors // 2 if k != 3 else 6 * vectors
    strategy = getattr(hl.TailStrategy, tail)
    if strategy == hl.TailStrategy.ShiftInwards and n < lanes:
        n = lanes  # ShiftInwards needs one whole vector
    f, A, B, a, b = _mosaic(k, c, lanes, strategy)
    _realize_and_check(f, A, B, a, b, k, c, lo, n)


def test_a_producer_computed_inside_a_tile_is_versioned_on_its_own_min():
    """An upsample computed per tile: its loop's base holds the tile's min (a let inside the
    consumer's loops), which the version chosen at its loop fixes. (Its 18 columns per tile
    make ShiftInwards' last vector start at the same phase as the first.)"""
    data = (np.arange(64 * 5) % 97).astype(np.int16).reshape(5, 64)
    inp = hl.Buffer(data, "up_in")
    up, out = hl.Func("up"), hl.Func("up_out")
    up[x, y] = hl.select(x % 2 == 0, inp[x / 2, y], inp[x / 2, y] + inp[x / 2 + 1, y])
    out[x, y] = up[x, y] + up[x + 2, y]
    xo, xi = hl.Var("xo"), hl.Var("xi")
    out.split(x, xo, xi, 16).vectorize(xi, 8)
    up.compute_at(out, xo).vectorize(x, 8)
    found = _Found()
    lower([out], hook=lambda name, stmt: found.visit(stmt) if name == "specialize residues" else None)
    assert found.residue_lets >= 1
    for lo in (0, 1, 3):
        res = hl.Buffer(hl.Int(16), [100 - lo, 5])
        res.set_min([lo, 0])
        out.realize(res)
        xs = np.arange(lo, 100)

        def upv(v):
            h = data[:, v // 2]
            return np.where(v % 2 == 0, h, h + data[:, v // 2 + 1])

        assert np.array_equal(np.asarray(res), (upv(xs) + upv(xs + 2)).astype(np.int16))
