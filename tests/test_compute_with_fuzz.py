"""compute_with never changes what a pipeline computes: Hypothesis draws fused groups.

The pipeline: two or three independent producers of a consumer, each reading an input image at
its own offsets (so their regions, and the fused loops' ranges, differ), some with an update
stage; the consumer reads each at other offsets. The schedule computes the producers at one level
(root, the consumer's rows, or its columns), some stored further out (so they slide), with the
same splits and loop kinds on the loops that get fused and different ones below; then one parent
and the others fused with it, or in a chain, at a drawn shared loop, with drawn alignments, update
stages fused with update stages. The result must equal numpy's, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import pyhalide as hl
from pyhalide.testing.corpus import Case
from pyhalide.testing.schedule_strategies import realize_guarded

pytestmark = pytest.mark.fuzz

# 60 examples by default; the profile's max_examples under a larger one (HYPOTHESIS_PROFILE=thorough)
EXAMPLES = 60 if settings.default.max_examples <= 30 else settings.default.max_examples

ALIGNS = [None, "AlignStart", "AlignEnd", "NoAlign", "Auto"]
PAD = 12  # the input's margin around what any offset reads (and what a split of a small region shifts in)


@st.composite
def fused_pipelines(draw):
    w, h = draw(st.integers(5, 23)), draw(st.integers(3, 13))
    n = draw(st.integers(2, 3))
    reads = [(draw(st.integers(-3, 3)), draw(st.integers(-3, 3))) for _ in range(n)]  # producer -> input
    uses = [(draw(st.integers(-3, 3)), draw(st.integers(-3, 3))) for _ in range(n)]  # consumer -> producer
    updates = [draw(st.booleans()) for _ in range(n)]
    level = draw(st.sampled_from(["root", "y", "x"]))
    store_root = [draw(st.booleans()) if level != "root" else False for _ in range(n)]
    split = draw(st.sampled_from([None, 2, 3, 4]))
    vector = draw(st.booleans()) and split is not None
    parallel = level == "root" and draw(st.booleans())
    inner = [draw(st.sampled_from([None, "unroll", "vectorize"])) for _ in range(n)]
    chain = draw(st.booleans())
    return dict(w=w, h=h, n=n, reads=reads, uses=uses, updates=updates, level=level, store_root=store_root,
                split=split, vector=vector, parallel=parallel, inner=inner, chain=chain,
                data=draw(st.data()))


def _build(p):
    rng = np.random.default_rng(p["w"] * 31 + p["h"])
    size_x, size_y = p["w"] + 2 * PAD, p["h"] + 2 * PAD
    data = rng.integers(-100, 100, size=(size_y, size_x), dtype=np.int32)
    inp = hl.Buffer(data, "cw_input")
    inp.set_min(-PAD, -PAD)
    x, y = hl.Var("x"), hl.Var("y")
    producers = []
    for i, (a, b) in enumerate(p["reads"]):
        f = hl.Func(f"prod{i}")
        f[x, y] = inp[x + a, y + b] * (i + 2) + i
        if p["updates"][i]:
            f[x, y] = f[x, y] + (x - y) * (i + 1)
        producers.append(f)
    out = hl.Func("consumer")
    value = 0
    for f, (a, b) in zip(producers, p["uses"]):
        value = value + f[x + a, y + b]
    out[x, y] = value
    return inp, data, x, y, producers, out


def _reference(p, data):
    xs, ys = np.meshgrid(np.arange(p["w"]), np.arange(p["h"]))
    total = np.zeros((p["h"], p["w"]), np.int64)
    for i, ((ra, rb), (ua, ub)) in enumerate(zip(p["reads"], p["uses"])):
        px, py = xs + ua, ys + ub
        v = data[py + rb + PAD, px + ra + PAD].astype(np.int64) * (i + 2) + i
        if p["updates"][i]:
            v = v + (px - py) * (i + 1)
        total += v
    return total.astype(np.int32)


def _schedule(p, x, y, producers, out) -> list[str]:
    """Apply the drawn schedule; returns it as text (for the failure report)."""
    draw = p["data"].draw
    log = []
    xi = hl.Var("xi")
    if p["level"] != "root":
        at = y if p["level"] == "y" else x
        for i, f in enumerate(producers):
            f.compute_at(out, at)
            log.append(f"prod{i}.compute_at(consumer, {at.name()})")
            if p["store_root"][i]:
                f.store_root()
                log.append(f"prod{i}.store_root()")
    for i, f in enumerate(producers):
        if p["level"] == "root":
            f.compute_root()
            log.append(f"prod{i}.compute_root()")
        for s in range(1 + p["updates"][i]):
            stage = f if s == 0 else f.update(0)
            name = f"prod{i}" + ("" if s == 0 else ".update(0)")
            if p["split"] is not None:
                tail = hl.TailStrategy.GuardWithIf if s else hl.TailStrategy.Auto
                stage.split(x, x, xi, p["split"], tail)
                log.append(f"{name}.split(x, x, xi, {p['split']}, {tail})")
                kind = "vectorize" if p["vector"] else p["inner"][i]
                if kind is not None:
                    getattr(stage, kind)(xi)
                    log.append(f"{name}.{kind}(xi)")
            if p["parallel"]:
                stage.parallel(y)
                log.append(f"{name}.parallel(y)")
    parent = draw(st.integers(0, p["n"] - 1))
    others = [i for i in range(p["n"]) if i != parent]
    fused_into = {}
    for k, i in enumerate(others):
        fused_into[i] = others[k - 1] if p["chain"] and k > 0 else parent
    for child, target in fused_into.items():
        cf, tf = producers[child], producers[target]
        both = p["updates"][child] and p["updates"][target]
        pairs = draw(st.sampled_from([[(0, 0)], [(0, 0), (1, 1)], [(1, 1)], [(0, 0), (1, 0)]] if both else
                                     [[(0, 0)]]))
        # One loop and one alignment for all of the child's pairs: its stages fused into one
        # parent stage (or, through a chain, into one unfused stage) run interleaved, which is
        # right (and allowed) only over the same unsplit loops, aligned the same way.
        dims = [d.name for d in reversed(cf._stage().dims)]  # outermost first: y, x, [xi]
        most = 0 if p["split"] is not None and len(pairs) > 1 else 1 if p["split"] is not None else len(dims) - 1
        var = dims[draw(st.integers(0, most))]
        align = draw(st.sampled_from(ALIGNS))
        suffix, align_args = "", []
        if align is not None:
            strategy = getattr(hl.LoopAlignStrategy, align)
            if draw(st.booleans()):
                align_args, suffix = [strategy], f", {align}"
            else:
                other = draw(st.sampled_from(["AlignStart", "AlignEnd", "NoAlign"]))
                align_args = [[(hl.Var("y"), getattr(hl.LoopAlignStrategy, other)), (hl.Var(var), strategy)]]
                suffix = f", [(y, {other}), ({var}, {align})]"
        for s, k in pairs:
            cstage = cf if s == 0 else cf.update(0)
            tstage = tf if k == 0 else tf.update(0)
            cstage.compute_with(tstage, hl.Var(var), *align_args)
            log.append(f"prod{child}{'.update(0)' if s else ''}.compute_with(prod{target}{'.update(0)' if k else ''}, "
                       f"{var}{suffix})")
    return log


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(p=fused_pipelines())
def test_compute_with_matches_numpy(p):
    inp, data, x, y, producers, out = _build(p)
    log = _schedule(p, x, y, producers, out)
    note("\n".join(log))
    case = Case("compute_with", [out], [p["w"], p["h"]], [*producers, out])
    got = realize_guarded(case, parallel=p["parallel"])
    np.testing.assert_array_equal(got[0], _reference(p, data))
