"""autoscheduler.random_pipelines (seeded random pipelines for cost-model training) and
autoscheduler.measure (timing candidate schedules in spawned worker processes)."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import statistics
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import pyhalide as hl
from autoscheduler.measure import MAX_REPEATS, MIN_TIMED_S, Measurement, MeasurePool, PipelineSpec, measure
from autoscheduler.random_pipelines import KINDS, SCALES, random_pipeline, reference_schedule
from pyhalide import reference as numpy_reference
from pyhalide.testing.corpus import Case
from pyhalide.testing.schedule_strategies import apply_random_schedule, invalid_schedule_reason

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DETERMINISM_SEEDS = [0, 3, 11, 17]


def _digest(seed: int) -> str:
    """The description and the reference outputs of a test-scale pipeline, hashed."""
    rp = random_pipeline(seed, "test")
    h = hashlib.sha256(rp.describe().encode())
    for a in rp.inputs.values():
        h.update(a.tobytes())
    for a in rp.reference():
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def digests():
    return {seed: _digest(seed) for seed in DETERMINISM_SEEDS}


# --------------------------------------------------------------------------- random pipelines
def test_same_pipeline_on_every_build(digests):
    for seed in DETERMINISM_SEEDS:
        a, b = random_pipeline(seed, "test"), random_pipeline(seed, "test")
        assert a.describe() == b.describe()
        for x, y in zip(a.reference(), b.reference()):
            assert x.dtype == y.dtype and np.array_equal(x, y)
        assert _digest(seed) == digests[seed]
    # one RandomPipeline builds a fresh algorithm each time: scheduling one copy leaves the next alone
    rp = random_pipeline(DETERMINISM_SEEDS[0], "test")
    outs1, _ = rp.build(hl)
    outs2, _ = rp.build(hl)
    assert all(f1 is not f2 for f1, f2 in zip(outs1, outs2))


def test_same_pipeline_in_a_fresh_process(digests):
    code = ("import sys, json; sys.path.insert(0, sys.argv[1]); "
            "from test_random_pipelines_measure import _digest; "
            f"print(json.dumps({{s: _digest(s) for s in {DETERMINISM_SEEDS!r}}}))")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code, os.path.join(ROOT, "tests")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert {int(k): v for k, v in json.loads(out.stdout.splitlines()[-1]).items()} == digests


def test_kinds_and_sizes_vary_across_seeds():
    kinds, descriptions, out_sizes, n_outputs, n_stages = set(), set(), set(), set(), set()
    for seed in range(40):
        rp = random_pipeline(seed, "test")
        kinds |= rp.kinds
        descriptions.add(rp.describe())
        out_sizes.add(tuple(rp.output_sizes[0]))
        n_outputs.add(len(rp.output_sizes))
        n_stages.add(sum(s.kind != "input" for s in rp.stages))
        lo, hi = SCALES["test"]["out"]
        assert all(lo <= d <= hi for d in rp.output_sizes[0][:2]), rp.describe()
        outputs, sizes = rp.build(hl)  # builds without compiling
        assert len(outputs) == len(sizes) and 1 <= len(outputs) <= 3
    assert kinds == set(KINDS), set(KINDS) - kinds
    assert len(descriptions) == 40 and len(out_sizes) > 20
    assert n_outputs == {1, 2, 3} and min(n_stages) >= 2 and max(n_stages) <= 12
    for seed in range(10):  # "train" sizes: outputs of 64..1024 per dimension
        rp = random_pipeline(seed)
        lo, hi = SCALES["train"]["out"]
        assert all(lo <= d <= hi for d in rp.output_sizes[0][:2]), rp.describe()
    for seed in range(10):  # "large": app-sized, the primary output past 1 MB of float32
        rp = random_pipeline(seed, "large")
        lo, hi = SCALES["large"]["out"]
        w, h = rp.output_sizes[0][:2]
        assert all(lo <= d <= hi for d in (w, h)) and w * h * 4 >= 1 << 20, rp.describe()
    with pytest.raises(ValueError):
        random_pipeline(0, "huge")


@pytest.mark.parametrize("seed", [1, 4, 9])
def test_reference_matches_the_numpy_evaluator(seed):
    rp = random_pipeline(seed, "test")
    got = rp.reference()
    outputs, sizes = rp.build(hl)
    want = [a for f, s in zip(outputs, sizes) for a in numpy_reference.realize([f], s)]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if g.dtype.kind == "f":
            assert np.isfinite(g).all()
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
        else:
            np.testing.assert_array_equal(g, w)


# ------------------------------------------------------------- random schedules, measured
SCHEDULE_SEEDS = [2, 5, 6, 8, 10, 12, 13, 20, 23, 31]


def _scheduler_case(outputs, sizes) -> Case:
    """A Case for pyhalide.testing.schedule_strategies. Its `sizes` are per dimension for every
    output: where the outputs' extents differ the dimension's size is None, so the scheduler
    treats that extent as unknown (tails that stay inside the output; a bound() is refused)."""
    common = []
    for i in range(max(len(s) for s in sizes)):
        values = {s[i] for s in sizes if len(s) > i}
        common.append(values.pop() if len(values) == 1 else None)
    return Case("random", outputs, common, hl.Pipeline(outputs).funcs(), reassociates=True)


def _draw_schedules(seed: int, n: int) -> list[str]:
    """n schedules from the fuzzers' strategy for the test-scale pipeline of `seed`, as JSON
    (derandomized: the same schedules on every run)."""
    texts: list[str] = []

    @settings(max_examples=n, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def draw(data):
        outputs, sizes = random_pipeline(seed, "test").build(hl)
        apply_random_schedule(data.draw, _scheduler_case(outputs, sizes))
        texts.append(hl.Pipeline(outputs).schedule_to_json())

    draw()
    return texts


@pytest.mark.parametrize("seed", SCHEDULE_SEEDS)
def test_random_schedules_compute_the_reference(seed):
    texts = _draw_schedules(seed, 2)
    assert texts
    results = measure(PipelineSpec.random(seed, "test"), texts, timeout_s=60, repeats=1, warmup=0, threads=1)
    for m in results:
        if m.status == "compile_error":  # lowering rejects some schedules the API accepts: documented
            assert invalid_schedule_reason(m.error or ""), m.error
        else:
            assert m.status == "ok", (m.status, m.error, random_pipeline(seed, "test").describe(), m.schedule)
            assert m.time_s is not None and m.time_s > 0


# ------------------------------------------------------------------------------------ measure
def _tiny_schedule(**directives) -> str:
    """A schedule of the test pipeline: `g` (and any hook named True) compute_root."""
    outputs, _, _ = PipelineSpec("test", "tiny", "").build(hl)
    p = hl.Pipeline(outputs)
    funcs = p.funcs_by_name()
    funcs["g"].compute_root()
    for name, on in directives.items():
        if on:
            funcs[name].compute_root()
    return p.schedule_to_json()


def test_measure_survives_failing_candidates():
    ok = _tiny_schedule()
    record = json.loads(ok)
    record["g"].append([0, "frobnicate", []])
    unknown = json.dumps(record)
    schedules = [ok, unknown, _tiny_schedule(crash_hook=True), ok, _tiny_schedule(hang_hook=True), ok,
                 _tiny_schedule(oom_hook=True), ok]
    t0 = time.monotonic()
    results = measure(PipelineSpec("test", "tiny", ""), schedules, timeout_s=3.0, repeats=3)
    wall = time.monotonic() - t0
    statuses = [m.status for m in results]
    assert statuses == ["ok", "compile_error", "crash", "ok", "timeout", "ok", "crash", "ok"], \
        [(m.status, m.error) for m in results]
    assert all(m.schedule == s for m, s in zip(results, schedules))
    first = results[0]
    # at least `repeats` runs, and as many more as fill MIN_TIMED_S: the median of all of them
    assert first.time_s is not None and len(first.times) >= 3 and first.time_s == statistics.median(first.times)
    assert sum(first.times) >= MIN_TIMED_S or len(first.times) == MAX_REPEATS
    assert first.compile_s is not None and first.error is None
    assert "frobnicate" in results[1].error and results[1].time_s is None
    assert "status 3" in results[2].error
    assert "3 s" in results[4].error
    assert "MemoryError" in results[6].error
    assert wall < 3.0 + 20.0, wall  # the hung candidate took about timeout_s


def test_measure_wrong_results_are_not_timed():
    spec = ("test", "wrong", "")
    results = measure(spec, [_tiny_schedule(), _tiny_schedule()], timeout_s=20)
    assert [m.status for m in results] == ["wrong", "wrong"]
    assert all(m.time_s is None and not m.times for m in results)
    assert "values differ" in results[0].error


def test_measure_an_app_and_specs_pickle():
    spec = PipelineSpec.app("blur", "small")
    assert pickle.loads(pickle.dumps(spec)) == spec
    assert PipelineSpec.of(("random", 3, "test")) == PipelineSpec.random(3, "test")
    assert measure(spec, []) == []
    (m,) = measure(spec, [spec.reference_schedule_json()], timeout_s=60, repeats=2)
    assert isinstance(m, Measurement) and m.status == "ok", m.error
    assert m.time_s > 0 and m.compile_s > 0


def test_reference_schedule_roots_every_func():
    outputs, _ = random_pipeline(7, "test").build(hl)
    p = reference_schedule(outputs)
    record = json.loads(p.schedule_to_json())
    assert set(record) == set(p.funcs_by_name())
    assert all(any(entry[1] == "compute_at" for entry in entries) for entries in record.values())


def test_the_pool_compiles_in_parallel_times_one_at_a_time_and_keeps_its_workers():
    """Four candidates that each take a second to build, on two workers: two waves of parallel
    builds (serially it would take four seconds); the workers outlive the batch, and are replaced
    after recycle_after candidates."""
    ok, slow = _tiny_schedule(), _tiny_schedule(slow_hook=True)
    with MeasurePool(PipelineSpec("test", "tiny", ""), workers=2, timeout_s=20, recycle_after=4) as pool:
        assert [m.status for m in pool.measure([ok, ok], repeats=2)] == ["ok", "ok"]
        pids = {w.proc.pid for w in pool._live}
        assert len(pids) == 2
        t0 = time.monotonic()
        results = pool.measure([slow, ok, slow, slow, ok, slow], repeats=2)
        wall = time.monotonic() - t0
        assert [m.status for m in results] == ["ok"] * 6
        assert all(results[i].compile_s >= 1.0 for i in (0, 2, 3, 5)) and results[1].compile_s < 1.0
        assert wall < 4.0, wall  # one worker would sleep 4 s in all
        # 8 candidates, none measured past 4 by one worker, a successor started only when one
        # retires: at least one of the first two was replaced (which ones, and whether a
        # successor got work, depends on the timing of a loaded machine)
        assert pids - {w.proc.pid for w in pool._live}
        assert all(w.done < 4 for w in pool._live)
        assert [m.status for m in pool.measure([ok])] == ["ok"]
        assert {w.proc.pid for w in pool._live}.isdisjoint(pids)


def test_slow_candidates_are_timed_once_and_too_slow_ones_killed():
    """A run slower than cutoff_s ends the timing after one sample; a run longer than
    run_timeout_s kills the worker ("timeout"), whatever timeout_s allows the build."""
    ok, slow = _tiny_schedule(), _tiny_schedule(slow_run_hook=True)
    spec = PipelineSpec("test", "tiny", "")
    with MeasurePool(spec, workers=1, timeout_s=30) as pool:  # one worker: it keeps both built
        fast, once = pool.measure([ok, slow], repeats=5, warmup=0, cutoff_s=0.1)
        assert fast.status == once.status == "ok" and len(fast.times) >= 5 and len(once.times) == 1
        assert once.time_s >= 0.3
        (timed,) = pool.measure([slow], repeats=5, warmup=0, cutoff_s=0.2)  # not twice the cut-off: timed once
        assert timed.status == "ok" and len(timed.times) == 1 and timed.times[0] != once.times[0]
        fast, killed = pool.measure([ok, slow], repeats=5, warmup=0, run_timeout_s=0.2)  # kept: timing killed
        assert fast.status == "ok" and killed.status == "timeout", killed
        assert "timing the candidate" in killed.error
    with MeasurePool(spec, workers=2, timeout_s=30) as pool:  # built afresh: its first run is killed
        fast, killed = pool.measure([ok, slow], repeats=5, warmup=0, run_timeout_s=0.2)
    assert fast.status == "ok" and killed.status == "timeout", killed
    assert "first run" in killed.error and "0.2 s" in killed.error


def test_training_measures_random_pipelines_and_writes_json_weights(tmp_path, capsys):
    """`python -m autoscheduler.train` end to end on two small pipelines: every candidate measured
    and kept with its scale, the held-out quality printed, weights written as JSON the cost model
    loads; a second run measures nothing again; --misses reports where the model's pick lost most."""
    from autoscheduler.cost_model import CostModel
    from autoscheduler.train import main

    data, out = tmp_path / "m.json", tmp_path / "w.json"
    args = ["--pipelines", "2", "--random", "1", "--repeats", "1", "--held-out", "0.5",
            "--data", str(data), "--out", str(out)]
    main(args)
    records = json.loads(data.read_text())
    assert records and all(r["scale"] == "train" and r["status"] == "ok" for r in records), records[:1]
    assert {r["seed"] for r in records} == {1000, 1001}
    printed = capsys.readouterr().out
    assert "held-out  trained  pairwise" in printed
    assert CostModel.from_json(out.read_text()).weights.keys() == CostModel().weights.keys()
    main(args)
    assert len(json.loads(data.read_text())) == len(records)
    assert "seed 1000" not in capsys.readouterr().out
    # --misses: each pipeline's regret (the model's pick's time over the fastest), largest first
    weights = out.read_text()
    main(["--data", str(data), "--misses", "5"])
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("regret ")]
    regrets = [float(ln.split()[1].rstrip(":")) for ln in lines]
    assert len(regrets) == 2 and regrets == sorted(regrets, reverse=True) and min(regrets) >= 1.0, lines
    for ln, seed_regret in zip(lines, regrets):
        seed = int(ln.split("random_pipeline(")[1].split(",")[0])
        times = [r["time_s"] for r in records if r["seed"] == seed]
        picked = float(ln.split("picked ")[1].split(" ms")[0])
        assert abs(picked / (min(times) * 1e3) - seed_regret) < 0.01 and picked >= min(times) * 1e3 * 0.999
    assert out.read_text() == weights and len(json.loads(data.read_text())) == len(records)
