"""GPU schedules keep the meaning: Hypothesis draws random GPU schedules for every corpus pipeline
(pyhalide/testing/gpu_schedule_strategies.py) and compares the result with the reference.

Run serially (block and thread loops as serial CPU loops: the meaning of the loop nest, many
examples) and on the emulated CUDA device (the generated CUDA C itself, compiled as C++ with
real threads and barriers and separate device memory: fewer examples, each compiles with g++)."""

from __future__ import annotations

import functools
import shutil
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, note, settings
from hypothesis import strategies as st

import pyhalide as hl
from pyhalide.testing.corpus import CASES
from pyhalide.testing.gpu_schedule_strategies import gpu_rejection_reason, gpu_scheduled
from pyhalide.testing.schedule_strategies import assert_same, realize_guarded, remember

pytestmark = pytest.mark.fuzz

STATS: Counter = Counter()
SERIAL_EXAMPLES = 12
EMULATED_EXAMPLES = 6


@functools.cache
def reference_result(name: str) -> list[np.ndarray]:
    return CASES[name]().reference()


def _realize(sched, in_process: bool):
    """The schedule's result; a crash or hang is caught in a forked child, except on a real GPU
    (a CUDA context does not survive fork)."""
    case = sched.built
    try:
        return case.realize() if in_process else realize_guarded(case, parallel=False)
    except hl.HalideError as e:  # a schedule refused when compiling, or for these inputs at a launch
        reason = gpu_rejection_reason(str(e))
        if reason is None:
            raise
        STATS[f"rejected ({reason})"] += 1
        event(f"rejected: {reason}")
        assume(False)
        raise


def _check(name, data, in_process: bool = False):
    sched = data.draw(gpu_scheduled(CASES[name]), label="schedule")
    STATS["examples"] += 1
    STATS["with kernels"] += any("gpu" in line for line in sched.lines)
    remember(sched)
    got = _realize(sched, in_process)
    try:
        assert_same(got, reference_result(name), sched.built.reassociates, f"{name} (GPU schedule) vs reference")
    except AssertionError:
        note(f"CUDA source:\n{sched.built.pipeline().cuda_source()}")
        raise


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=SERIAL_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                                 HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_gpu_schedule_matches_reference_run_serially(name, data, monkeypatch):
    monkeypatch.setenv("HL_JIT_TARGET", "host-cuda")
    monkeypatch.setenv("PYHALIDE_CUDA_DEVICE", "serial")
    _check(name, data)


@pytest.mark.skipif(shutil.which("g++") is None, reason="the emulated CUDA device needs g++")
@settings(max_examples=EMULATED_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                                 HealthCheck.function_scoped_fixture])
@given(data=st.data(), name=st.sampled_from(["blur", "stencil_chain", "histogram", "matmul_i32", "pyramid",
                                              "boundaries", "multi_update", "scatter_network"]))
def test_gpu_schedule_matches_reference_on_the_emulated_device(name, data, monkeypatch):
    monkeypatch.setenv("HL_JIT_TARGET", "host-cuda")
    monkeypatch.setenv("PYHALIDE_CUDA_DEVICE", "emulated")
    _check(name, data)


@pytest.mark.gpu
@settings(max_examples=EMULATED_EXAMPLES * 2, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                                 HealthCheck.function_scoped_fixture])
@given(data=st.data(), name=st.sampled_from(sorted(CASES)))
def test_gpu_schedule_matches_reference_on_the_gpu(name, data, monkeypatch):
    from pyhalide.codegen.gpu_runtime import cuda_unavailable_reason

    monkeypatch.delenv("PYHALIDE_CUDA_DEVICE", raising=False)
    reason = cuda_unavailable_reason()
    if reason:
        pytest.skip(reason)
    monkeypatch.setenv("HL_JIT_TARGET", "host-cuda")
    _check(name, data, in_process=True)


def test_zz_gpu_schedules_mostly_made_kernels():
    n = STATS["examples"]
    if n < 50:
        pytest.skip("too few GPU fuzz examples ran in this session to judge")
    assert STATS["with kernels"] >= 0.6 * n, dict(STATS)
    rejected = sum(v for k, v in STATS.items() if k.startswith("rejected"))
    assert rejected <= 0.25 * n, dict(STATS)
