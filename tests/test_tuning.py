"""Measured autotuning: the tuning database, the tuning loop (failing candidates isolated, kill -9
and resume, reuse without search) and the command line."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import apps
import pyhalide as hl
from autoscheduler import auto_schedule
from autoscheduler.measure import PipelineSpec
from autoscheduler.records import Record, TuningDB, TuningKey, parse_record
from autoscheduler.tune import LocalRunner, tune

TESTS = Path(__file__).parent
ROOT = TESTS.parent
TINY = PipelineSpec("test", "tiny", "")


def _key(**kw) -> TuningKey:
    base = dict(algorithm="a" * 16, shapes='{"inputs":{},"outputs":[[[0,8]]]}', machine="m1")
    return TuningKey(**{**base, **kw})


def _schedule(root: bool = True) -> str:
    outputs, _, _ = TINY.build(hl)
    p = hl.Pipeline(outputs)
    if root:
        p.funcs_by_name()["g"].compute_root()
    return p.schedule_to_json()


# ------------------------------------------------------------------------------ the database
def test_records_best_is_for_exactly_its_key(tmp_path):
    db = TuningDB(tmp_path / "t.sqlite")
    k = _key()
    db.add([Record(k, _schedule(), "ok", 2e-3), Record(k, _schedule(False), "ok", 1e-3),
            Record(k, _schedule(), "crash", None, error="killed"),
            Record(_key(machine="m2"), _schedule(), "ok", 1e-6),
            Record(_key(feature_version=1), _schedule(), "ok", 1e-6),
            Record(_key(shapes='{"inputs":{},"outputs":[[[0,16]]]}'), _schedule(), "ok", 5e-4)])
    best = db.best(k)
    assert best.time_s == 1e-3 and best.schedule == _schedule(False)
    assert db.best(_key(algorithm="b" * 16)) is None
    # the same shapes elsewhere (another machine or version) first, then other shapes: starting
    # points to measure, never answers
    near = db.nearest(k)
    assert all(r.key != k for r in near) and len(near) == 3
    assert {r.key.shapes for r in near[:2]} == {k.shapes} and near[2].time_s == 5e-4
    assert [r.status for r in db.records(k)] == ["ok", "ok", "crash"]
    assert db.integrity_check() == "ok"
    # the best is judged by the median of a schedule's measurements, and a failure disqualifies
    other = TuningDB(tmp_path / "u.sqlite")
    lucky, steady, flaky = _schedule(), _schedule(False), json.dumps({"g": [[0, "compute_root", []]]})
    other.add([Record(k, lucky, "ok", 1e-4), Record(k, lucky, "ok", 9e-3), Record(k, lucky, "ok", 8e-3),
               Record(k, steady, "ok", 2e-3), Record(k, steady, "ok", 2.2e-3),
               Record(k, flaky, "ok", 1e-5), Record(k, flaky, "timeout", None)])
    assert other.best(k).schedule == steady and other.best(k).time_s == pytest.approx(2.1e-3)
    other.close()
    assert db.prune(keep=1) == 2  # the slower ok and the crash of k
    assert [r.time_s for r in db.records(k)] == [1e-3]
    db.close()


def test_records_export_import_round_trip_and_hostile_records_refused(tmp_path):
    src = TuningDB(tmp_path / "a.sqlite")
    k = _key()
    src.add([Record(k, _schedule(), "ok", 1e-3, {"out": "root vec 8", "g": "inline"}, 9e-4, None, "run1", 1),
             Record(k, _schedule(False), "wrong", None, None, None, "values differ", "run1", 2)])
    n = src.export(tmp_path / "r.jsonl")
    assert n == 2
    lines = (tmp_path / "r.jsonl").read_text().splitlines()
    good = json.loads(lines[0])
    hostile = [
        "not json",
        json.dumps({**good, "extra": 1}),
        json.dumps({**good, "status": "great"}),
        json.dumps({**good, "time_s": -1}),
        json.dumps({**good, "schedule": json.dumps({"g": [[0, "__import__", ["os"]]]})}),
        json.dumps({**good, "schedule": "x" * 100}),
        json.dumps({**good, "decisions": {"g": "teleport"}}),
        json.dumps({**good, "key": {**good["key"], "feature_version": "6"}}),
        json.dumps({**good, "status": "ok", "time_s": None}),
    ]
    (tmp_path / "bad.jsonl").write_text("\n".join(lines + hostile) + "\n")
    dst = TuningDB(tmp_path / "b.sqlite")
    added, refused = dst.import_(tmp_path / "bad.jsonl")
    assert added == 2 and len(refused) == len(hostile), refused
    assert "schedule refused" in " ".join(refused) and "status" in " ".join(refused)
    got = dst.records(k)
    assert [(r.schedule, r.status, r.time_s, r.decisions) for r in got] == \
        [(r.schedule, r.status, r.time_s, r.decisions) for r in src.records(k)]
    # imported records are kept apart: never applied without being measured here
    assert all(r.origin == "imported" for r in got) and dst.best(k) is None
    with pytest.raises(ValueError):
        parse_record(json.dumps({**good, "run_id": "x" * 1000}))


# ------------------------------------------------------------------------------ the loop
def test_tune_isolates_failing_candidates_and_reuses_its_result(tmp_path, monkeypatch):
    """The test pipeline's hook Funcs crash, hang or raise MemoryError in the worker when a
    schedule gives them a directive: such candidates are recorded with their status, never
    chosen, and the run goes on."""
    monkeypatch.setenv("PYHALIDE_CACHE_DIR", str(tmp_path))
    runner = LocalRunner(threads=1, timeout_s=4.0, repeats=2)
    r = tune(TINY, budget_s=300, trials=14, batch_size=7, runner=runner, seed=3)
    assert not r.from_records and len(r.trials) == 14
    statuses = [t.status for t in r.trials]
    assert "ok" in statuses and set(statuses) <= {"ok", "crash", "timeout"}
    assert sum(r.failures.values()) == statuses.count("crash") + statuses.count("timeout") > 0, statuses
    chosen = json.loads(r.schedule)
    assert not any(chosen.get(h) for h in ("crash_hook", "hang_hook", "oom_hook"))
    assert r.time_s > 0 and r.decisions is not None
    with TuningDB() as db:
        recs = db.records(r.key)
        # the 14 candidates, the best so far re-timed beside the second batch, and the fastest
        # timed twice more at the end
        assert len({x.schedule for x in recs}) == 14 and len(recs) >= 15 + 2
        assert {x.status for x in recs} == set(statuses)
        assert db.best(r.key).schedule in {x.schedule for x in recs}
    # a finished run's best answers the next call without searching
    t0 = time.perf_counter()
    again = tune(TINY, budget_s=300, trials=14, runner=runner)
    assert again.from_records and again.schedule == db_best_schedule(r.key)
    assert time.perf_counter() - t0 < 5.0


def db_best_schedule(key):
    with TuningDB() as db:
        return db.best(key).schedule


def test_a_tuned_schedule_is_applied_by_auto_schedule_without_search(tmp_path, monkeypatch):
    monkeypatch.setenv("PYHALIDE_CACHE_DIR", str(tmp_path))
    sys.path.insert(0, str(TESTS))
    try:
        import tuning_pipelines
    finally:
        sys.path.remove(str(TESTS))
    r = tune("tuning_pipelines:small_blur", budget_s=120, trials=6, batch_size=6,
             runner=LocalRunner(threads=2, timeout_s=60, repeats=2))
    assert r.time_s > 0 and r.schedule_source.startswith("def apply_schedule")
    out = tuning_pipelines.small_blur()
    t0 = time.perf_counter()
    res = auto_schedule(out, params={"parallelism": 2})
    elapsed = time.perf_counter() - t0
    assert res.stats["strategy"] == "record" and elapsed < 1.0, (res.stats, elapsed)
    assert json.loads(hl.Pipeline(out).schedule_to_json()) == json.loads(r.schedule)
    searched = auto_schedule(tuning_pipelines.small_blur(), params={"parallelism": 2, "use_records": 0})
    assert searched.stats["strategy"] == "beam"
    # another thread count is another machine: no record applies
    assert auto_schedule(tuning_pipelines.small_blur(), params={"parallelism": 1}).stats["strategy"] == "beam"
    # another shape of the same algorithm starts by measuring the best of the nearest shape
    wide = tune("tuning_pipelines:wider_blur", budget_s=120, trials=3, batch_size=3,
                runner=LocalRunner(threads=2, timeout_s=60, repeats=2))
    assert wide.key.algorithm == r.key.algorithm and wide.key.shapes != r.key.shapes
    assert wide.stats["seeded"] == 1 and r.decisions in [t.decisions for t in wide.trials]


def _wait_for_records(path, at_least: int, timeout_s: float = 240) -> int:
    """Poll a tuning database another process writes until it holds at_least records."""
    deadline = time.monotonic() + timeout_s
    count = 0
    while time.monotonic() < deadline and count < at_least:
        time.sleep(0.3)
        if path.exists():
            try:
                with sqlite3.connect(path) as c:
                    count = c.execute("SELECT COUNT(*) FROM records").fetchone()[0]
            except sqlite3.OperationalError:
                pass
    assert count >= at_least, "the run committed no batch in time"
    return count


_KILLED_RUN = """
import sys
from autoscheduler.measure import PipelineSpec
from autoscheduler.tune import LocalRunner, tune
if __name__ == "__main__":
    tune(PipelineSpec("test", "tiny", ""), budget_s=600, batch_size=3, db=sys.argv[1],
         runner=LocalRunner(threads=1, timeout_s=30.0, repeats=2, workers=3))  # every batch 3
"""


def test_a_killed_tuning_run_loses_nothing_committed_and_resumes(tmp_path):
    path = tmp_path / "t.sqlite"
    script = tmp_path / "run.py"
    script.write_text(_KILLED_RUN)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYHALIDE_CACHE_DIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, str(script), str(path)], env=env, start_new_session=True)
    try:
        count = _wait_for_records(path, 6)
        os.killpg(proc.pid, signal.SIGKILL)  # the run and its workers, in the middle of a batch
        proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    with sqlite3.connect(path) as c:
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        committed = c.execute("SELECT COUNT(*) FROM records").fetchone()[0]
        trials = sorted({t for (t,) in c.execute("SELECT trial FROM records")})
        assert committed >= count and trials == list(range(1, len(trials) + 1))
        assert len(trials) % 3 == 0  # whole batches only
        unfinished = c.execute("SELECT COUNT(*) FROM runs WHERE finished IS NULL").fetchone()[0]
        assert unfinished == 1
    with TuningDB(path) as db:
        r = tune(TINY, budget_s=300, trials=len(trials) + 3, batch_size=3, db=db,
                 runner=LocalRunner(threads=1, timeout_s=30.0, repeats=2))
        assert r.stats["resumed"] == len(trials) and len(r.trials) == 3
        assert len({x.schedule for x in db.records(r.key)}) == len(trials) + 3
        assert {x.run_id for x in db.records(r.key)} == {r.stats["run_id"]}  # the same run, resumed


_INTERRUPTED_RUN = """
import json, signal, sys
from autoscheduler.measure import PipelineSpec
from autoscheduler.tune import LocalRunner, tune
if __name__ == "__main__":
    # as a terminal's: a shell's background job (a CI script's `&`) starts with SIGINT ignored
    signal.signal(signal.SIGINT, signal.default_int_handler)
    r = tune(PipelineSpec("test", "tiny", ""), budget_s=600, batch_size=3, db=sys.argv[1],
             runner=LocalRunner(threads=1, timeout_s=30.0, repeats=2, workers=3))
    print(json.dumps({"interrupted": r.stats.get("interrupted", False), "time_s": r.time_s,
                      "trials": len(r.trials)}))
"""


def test_ctrl_c_returns_the_best_so_far(tmp_path):
    path = tmp_path / "t.sqlite"
    script = tmp_path / "run.py"
    script.write_text(_INTERRUPTED_RUN)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYHALIDE_CACHE_DIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, str(script), str(path)], env=env, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _wait_for_records(path, 3)
        os.killpg(proc.pid, signal.SIGINT)  # to the run and its workers, as a terminal's Ctrl-C
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, out
    result = json.loads(out.strip().splitlines()[-1])
    assert result["interrupted"] and result["time_s"] > 0 and result["trials"] >= 3
    with TuningDB(path) as db:  # the run stays open: the next call resumes it
        r = tune(TINY, budget_s=300, trials=result["trials"] + 3, batch_size=3, db=db,
                 runner=LocalRunner(threads=1, timeout_s=30.0, repeats=2))
        assert r.stats["resumed"] >= 3 and not r.stats.get("interrupted")


# ------------------------------------------------------------------------------ the command line
def test_the_command_line_tunes_and_lists_records(tmp_path):
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{TESTS}", "PYHALIDE_CACHE_DIR": str(tmp_path)}
    run = subprocess.run([sys.executable, "-m", "pyhalide", "tune", "tuning_pipelines:small_blur", "--trials", "6",
                          "--batch", "6", "--quiet", "--json", str(tmp_path / "run.json")],
                         env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    assert "side by side" in out and "tuned" in out and "every Func at root" in out
    assert "def apply_schedule(pipeline):" in out and "candidates a minute" in out
    assert "default schedule" in out and "the space: about 10^" in out
    data = json.loads((tmp_path / "run.json").read_text())
    assert len(data["trials"]) == 6 and data["time_s"] > 0
    listed = subprocess.run([sys.executable, "-m", "pyhalide", "records", "list"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "6 schedules" in listed.stdout, listed.stdout + listed.stderr
    exported = subprocess.run([sys.executable, "-m", "pyhalide", "records", "export", str(tmp_path / "r.jsonl")],
                              env=env, capture_output=True, text=True, timeout=120)
    lines = (tmp_path / "r.jsonl").read_text().splitlines()
    assert exported.returncode == 0 and len({json.loads(line)["schedule"] for line in lines}) == 6
    helped = subprocess.run([sys.executable, "-m", "pyhalide", "tune", "--help"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert helped.returncode == 0 and "--budget" in helped.stdout


def test_the_report_of_an_app_gives_numpy_and_the_share_of_peak(capsys):
    from autoscheduler.cli import _app_report

    for name, unit, peak in (("blur", "GB/s", "copy bandwidth"), ("gemm", "GFLOP/s", "FMA peak")):
        _app_report(apps.load(name), PipelineSpec.app(name, "small"), 1e-3, 1)
        out = capsys.readouterr().out
        assert "numpy (the reference)" in out and "tuned is" in out, out
        assert unit in out and peak in out and "% of this machine's" in out, out


# ------------------------------------------------------------------------------ on a cluster
def test_the_dask_runner_measures_on_a_local_cluster(tmp_path):
    dask = pytest.importorskip("dask")
    from dask.distributed import Client, LocalCluster

    from autoscheduler.tune import DaskRunner

    with dask.config.set({"distributed.worker.daemon": True}), \
            LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client, pytest.raises(hl.HalideError, match="daemon"):
        DaskRunner(client)
    with dask.config.set({"distributed.worker.daemon": False}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        runner = DaskRunner(client, threads=1, timeout_s=4.0, repeats=2)
        assert runner.fingerprint() == LocalRunner(threads=1).fingerprint()  # the workers are this machine
        r = tune(TINY, trials=8, batch_size=8, db=tmp_path / "t.sqlite", runner=runner, seed=1)
    statuses = [t.status for t in r.trials]
    assert len(statuses) == 8 and "ok" in statuses, statuses
    assert set(statuses) <= {"ok", "crash", "timeout"}
    with TuningDB(tmp_path / "t.sqlite") as db:
        assert len({x.schedule for x in db.records(r.key)}) == 8 and db.best(r.key).schedule == r.schedule


# ------------------------------------------------------------------------------ just in time
def test_autotuned_schedules_each_shape_once_and_tunes_in_the_background(tmp_path, monkeypatch):
    import numpy as np

    monkeypatch.setenv("PYHALIDE_CACHE_DIR", str(tmp_path))
    monkeypatch.syspath_prepend(str(TESTS))
    import tuning_pipelines as tp

    rng = np.random.default_rng(0)
    a = rng.integers(0, 20000, (30, 50), dtype=np.uint16)
    b = rng.integers(0, 100, (17, 23), dtype=np.int32)
    for img in (a, a, b):
        assert np.array_equal(tp.jit_blur(img), tp.blur_reference(img))
    assert len(tp.jit_blur.entries) == 2 and tp.jit_blur.schedule_of(a) == "beam"
    # a measured tuning in the background; its result is in the records for the next process
    got = tp.jit_blur_tuned(a)
    assert np.array_equal(got, tp.blur_reference(a))
    tp.jit_blur_tuned.wait(300)
    assert not tp.jit_blur_tuned.errors, tp.jit_blur_tuned.errors
    assert tp.jit_blur_tuned.schedule_of(a) in ("beam", "tuned")
    assert np.array_equal(tp.jit_blur_tuned(a), tp.blur_reference(a))
    fresh = type(tp.jit_blur_tuned)(tp.jit_blur_tuned.build_fn, budget_s=120, trials=4, threads=1)
    assert np.array_equal(fresh(a), tp.blur_reference(a))
    assert fresh.schedule_of(a) == "record" and not fresh.tunings


def test_apply_autoscheduler_autotunes_with_halides_params(tmp_path, monkeypatch):
    monkeypatch.setenv("PYHALIDE_CACHE_DIR", str(tmp_path))
    monkeypatch.syspath_prepend(str(TESTS))
    import tuning_pipelines as tp

    img = hl.ImageParam(hl.UInt(16), 2, "autotune_unbound")
    unbound = hl.Func("autotune_unbound_out")
    unbound[hl.Var("x"), hl.Var("y")] = img[hl.Var("x"), hl.Var("y")] * 2
    unbound.set_estimates([(0, 8), (0, 8)])
    img.set_estimates([(0, 8), (0, 8)])
    with pytest.raises(hl.HalideError, match="to time it, but autotune_unbound has no value"):
        hl.Pipeline(unbound).apply_autoscheduler(
            hl.get_jit_target_from_environment(), hl.AutoschedulerParams("Adams2019", {"autotune": 1}))
    out = tp.small_blur()
    params = hl.AutoschedulerParams("Adams2019", {"parallelism": 2, "autotune": True, "trials": 4,
                                                  "spec": "tuning_pipelines:small_blur"})
    res = hl.Pipeline(out).apply_autoscheduler(hl.get_jit_target_from_environment(), params)
    assert res.details.stats["strategy"] == "tuned" and res.details.stats["trials"] == 4
    with TuningDB() as db:
        (row,) = db.summary()
        key = TuningKey(*row[:5])
        assert len({r.schedule for r in db.records(key)}) == 4  # four candidates measured and recorded
    import numpy as np

    tuned = np.asarray(hl.Pipeline(out).realize([64, 48]))
    unscheduled = np.asarray(hl.Pipeline(tp.small_blur()).realize([64, 48]))
    assert np.array_equal(tuned, unscheduled)
    # without a spec the pipeline itself is tuned: the same algorithm, so its records answer
    again = tp.small_blur()
    res = hl.Pipeline(again).apply_autoscheduler(hl.get_jit_target_from_environment(), hl.AutoschedulerParams(
        "Adams2019", {"parallelism": 2, "autotune": True, "trials": 4}))
    assert res.details.stats["strategy"] == "record"
    assert hl.Pipeline(again).schedule_to_json() == hl.Pipeline(out).schedule_to_json()


def test_funcs_built_in_this_process_are_tuned_and_the_best_applied_to_them(tmp_path):
    """tune(output) on Funcs made here (no module to import): the workers get a pickle of them,
    made by this process for its own workers (never stored), the best measured schedule is
    applied to the user's Funcs, and a second tune of the same algorithm, rebuilt, answers from
    the records."""
    import numpy as np

    import autoscheduler

    def build():
        x, y = hl.Var("x"), hl.Var("y")
        img = (np.arange(60 * 80, dtype=np.uint16).reshape(60, 80) * 7) % 4000
        inp = hl.Buffer(img, "here_in")
        bx, by = hl.Func("here_bx"), hl.Func("here_by")
        bx[x, y] = inp[x, y] + inp[x + 1, y] + inp[x + 2, y]
        by[x, y] = bx[x, y] + bx[x, y + 1] + bx[x, y + 2]
        by.set_estimates([(0, 78), (0, 58)])
        rows = img.astype(np.int64)
        sums = rows[:, :-2] + rows[:, 1:-1] + rows[:, 2:]
        return by, (sums[:-2] + sums[1:-1] + sums[2:]) % 65536

    out, want = build()
    db = tmp_path / "here.sqlite"
    r = autoscheduler.tune(out, budget_s=60, trials=4, batch_size=4, db=str(db),
                           runner=LocalRunner(threads=1, timeout_s=60, repeats=2))
    assert not r.from_records and r.time_s > 0
    assert json.loads(hl.Pipeline(out).schedule_to_json()) == json.loads(r.schedule)
    np.testing.assert_array_equal(np.asarray(out.realize([78, 58])), want)
    again, _ = build()
    r2 = autoscheduler.tune(hl.Pipeline(again), budget_s=60, trials=4, db=str(db),
                            runner=LocalRunner(threads=1, timeout_s=60, repeats=2))
    assert r2.from_records and r2.schedule == r.schedule
    assert json.loads(hl.Pipeline(again).schedule_to_json()) == json.loads(r.schedule)
    unestimated = hl.Func("here_unestimated")
    unestimated[hl.Var("x")] = hl.Var("x") * 2
    with pytest.raises(ValueError, match="the output here_unestimated.* needs set_estimates"):
        autoscheduler.tune(unestimated, budget_s=1, db=str(db))
