"""Every valid schedule computes exactly what the unscheduled algorithm computes.

For each pipeline of pyhalide/testing/corpus.py, Hypothesis draws random valid schedules
(pyhalide/testing/schedule_strategies.py), realizes the scheduled pipeline and compares it with
pyhalide.reference (the algorithm alone, evaluated by numpy) and with pyhalide's own output under
the default schedule. Integer and non-reassociating float results must match bit for bit.

Examples per pipeline: 20 under the "default" Hypothesis profile, the profile's max_examples
under any larger one (HYPOTHESIS_PROFILE=thorough: 1000). If the process dies (a pipeline writing out
of bounds), the example that did it is in schedule_strategies.LAST_EXAMPLE
($TMPDIR/pyhalide_fuzz_last_example.txt).
"""

from __future__ import annotations

import functools
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from pyhalide.testing.corpus import CASES
from pyhalide.testing.schedule_strategies import (
    assert_same,
    realize_guarded,
    realize_scheduled,
    remember,
    scheduled,
)

# Part of the default run; `pytest -m fuzz` runs the fuzz suites alone.
pytestmark = pytest.mark.fuzz

_PROFILE_EXAMPLES = settings.default.max_examples
EXAMPLES = 20 if _PROFILE_EXAMPLES <= 30 else _PROFILE_EXAMPLES

STATS: Counter = Counter()


@functools.cache
def reference_result(name: str) -> list[np.ndarray]:
    return CASES[name]().reference()


@functools.cache
def default_result(name: str) -> list[np.ndarray]:
    return realize_guarded(CASES[name](), parallel=False)


def record(sched) -> None:
    STATS["examples"] += 1
    STATS["nontrivial"] += sched.nontrivial
    STATS["directives refused"] += len(sched.refused)
    event("nontrivial schedule" if sched.nontrivial else "trivial schedule")
    if sched.refused:
        event("some directive refused at schedule time")


@pytest.mark.parametrize("name", sorted(CASES))
def test_default_schedule_matches_reference(name):
    case = CASES[name]()
    assert_same(default_result(name), reference_result(name), case.reassociates, f"{name}, default schedule")


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(data=st.data())
def test_schedule_matches_reference(name, data):
    sched = data.draw(scheduled(CASES[name]), label="schedule")
    case = sched.built
    record(sched)
    remember(sched)
    got = realize_scheduled(case, STATS, sched)
    try:
        assert_same(got, reference_result(name), case.reassociates, f"{name} vs reference")
        assert_same(got, default_result(name), case.reassociates, f"{name} vs default schedule")
    except AssertionError:
        note(f"loop nest:\n{_loop_nest(case)}")
        raise


def _loop_nest(case) -> str:
    from pyhalide.pipeline import loop_nest_text

    try:
        return loop_nest_text(case.pipeline()._lower().stmt)
    except Exception as e:  # noqa: BLE001 - only for the failure report
        return f"(unavailable: {e})"


def test_zz_schedules_were_mostly_nontrivial():
    """Runs last: most drawn schedules did something, and few were rejected."""
    n = STATS["examples"]
    if n < 50:
        pytest.skip("too few fuzz examples ran in this session to judge")
    assert STATS["nontrivial"] >= 0.7 * n, dict(STATS)
    rejected = sum(v for k, v in STATS.items() if k.startswith("rejected at realize"))
    assert rejected <= 0.1 * n, dict(STATS)
