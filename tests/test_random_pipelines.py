"""Random pipelines (pyhalide/testing/random_pipelines.py) under random schedules compute what the algorithm
computes, as pyhalide.reference evaluates it.

Examples: 100 scheduled and 40 default-scheduled pipelines under the "default" Hypothesis profile,
the profile's max_examples under any larger one (HYPOTHESIS_PROFILE=thorough). If the process dies,
the example that did it is in schedule_strategies.LAST_EXAMPLE.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from pyhalide.testing.random_pipelines import random_pipelines
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
_LARGE = _PROFILE_EXAMPLES > 30
_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]


@settings(max_examples=_PROFILE_EXAMPLES if _LARGE else 40, deadline=None, suppress_health_check=_HEALTH)
@given(pipeline=random_pipelines())
def test_random_pipeline_default_schedule(pipeline):
    want = pipeline.build().reference()
    case = pipeline.build()
    remember(pipeline)
    assert_same(realize_guarded(case, parallel=False), want, case.reassociates, "default schedule vs reference")


@settings(max_examples=_PROFILE_EXAMPLES if _LARGE else 100, deadline=None, suppress_health_check=_HEALTH)
@given(pipeline=random_pipelines(), data=st.data())
def test_random_pipeline_random_schedule(pipeline, data):
    want = pipeline.build().reference()
    sched = data.draw(scheduled(pipeline.build), label="schedule")
    case = sched.built
    remember(pipeline, sched)
    got = realize_scheduled(case, None, sched)
    try:
        assert_same(got, want, case.reassociates, "scheduled vs reference")
    except AssertionError:
        from pyhalide.pipeline import loop_nest_text

        note(f"loop nest:\n{loop_nest_text(case.pipeline()._lower().stmt)}")
        raise
