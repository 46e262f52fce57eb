"""pyhalide types and computes expressions as the real Halide does: random expressions of
pyhalide/testing/expr_differential.py (operators and functions over uint8 ... float32 inputs,
with Python numbers anywhere a program may write them) are built with both libraries from the
same recipe; where Halide builds and computes one, pyhalide must give the same type and the same
values, bit for bit. What Halide refuses is not in the test; what pyhalide refuses that Halide
ran fails it."""

from __future__ import annotations

import warnings
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

import pyhalide
from pyhalide.testing.expr_differential import INPUTS, N, build, input_arrays, recipes

halide = pytest.importorskip("halide", reason="the real Halide (pip install halide==21.*) is the oracle")

pytestmark = pytest.mark.fuzz

STATS: Counter = Counter()
_PROFILE_EXAMPLES = settings.default.max_examples
EXAMPLES = 150 if _PROFILE_EXAMPLES <= 30 else 10 * _PROFILE_EXAMPLES


def _evaluate(hl, recipe, arrays):
    """(type name, values) of the recipe's expression over x in [0, N). Halide's with strict_float:
    its JIT otherwise fuses a * b + c into one rounding, where pyhalide's default rounds each
    operation (pyhalide fuses them with the target feature fp_contract)."""
    x = hl.Var("x")
    inputs = {}
    for name, *_ in INPUTS:
        inputs[name] = hl.Buffer(arrays[name], name)
    f = hl.Func("expr")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (float literals that round to float32, bfloat16 emulated)
        e = build(hl, recipe, inputs, x)
        name = str((e if hasattr(e, "type") else hl.Expr(e)).type())
        # (Halide's buffers of bfloat16 have no numpy form: its bits are compared)
        f[x] = hl.reinterpret(hl.UInt(16), e) if name == "bfloat16" else e
    target = hl.get_jit_target_from_environment()
    if hl is halide:
        target = target.with_feature(halide.TargetFeature.StrictFloat)
    return name, np.array(np.asarray(f.realize([N], target)))


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(recipe=recipes(), seed=st.integers(0, 3))
def test_pyhalide_types_and_computes_expressions_as_halide(recipe, seed):
    note(repr(recipe))
    arrays = input_arrays(seed)
    STATS["drawn"] += 1
    try:
        want_type, want = _evaluate(halide, recipe, arrays)
    except Exception as e:  # noqa: BLE001 - what Halide refuses is not in the test
        event(f"halide refused: {type(e).__name__}")
        STATS["halide refused"] += 1
        STATS[f"halide refused: {type(e).__name__}: {str(e)[:80]}"] += 1
        return
    got_type, got = _evaluate(pyhalide, recipe, arrays)
    assert got_type == want_type, f"pyhalide types it {got_type}, Halide {want_type}"
    assert got.dtype == want.dtype
    if got_type == "bfloat16":  # (any NaN matching any NaN)
        got, want = (np.asarray(v).astype(np.uint32) << 16 for v in (got, want))
        got, want = got.view(np.float32), want.view(np.float32)
    same = (got == want) | (np.isnan(got) & np.isnan(want)) if got.dtype.kind == "f" else got == want
    assert same.all(), f"pyhalide computes {got[~same]} where Halide computes {want[~same]} at {np.flatnonzero(~same)}"


def test_zz_halide_ran_most_expressions():
    """Runs last: a test whose oracle refuses most of what is drawn tests little (a TypeError in
    the harness once made Halide "refuse" 93% of it, and the test passed)."""
    if STATS["drawn"] < 50:
        pytest.skip("too few expressions drawn in this session to judge")
    share = STATS["halide refused"] / STATS["drawn"]
    causes = sorted(((n, k) for k, n in STATS.items() if k.startswith("halide refused: ")), reverse=True)[:3]
    assert share < 0.3, f"Halide refused {share:.0%} of {STATS['drawn']} expressions; most: {causes}"
