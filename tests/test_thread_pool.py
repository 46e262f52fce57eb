"""pyhalide's thread pool (codegen/thread_pool.py): parallel loops compute what serial ones do,
back to back, nested, from several Python threads at once, in a forked child; a job never waits
for a worker that did not join; HL_NUM_THREADS sets how many threads there are."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import pyhalide as hl

x, y = hl.Var("x"), hl.Var("y")


def _chain(stages: int, rows: int, width: int, name: str):
    """`stages` root stages, each parallel over rows and reading the previous one."""
    prev = None
    for i in range(stages):
        f = hl.Func(f"{name}{i}")
        f[x, y] = (x * 3 + y + i) if prev is None else prev[x, y] * 5 + i + x
        f.compute_root().parallel(y).vectorize(x, 8)
        prev = f
    return prev


def _chain_reference(stages: int, rows: int, width: int) -> np.ndarray:
    xs, ys = np.meshgrid(np.arange(width), np.arange(rows))
    v = (xs * 3 + ys).astype(np.int64)
    for i in range(1, stages):
        v = v * 5 + i + xs
    return ((v + 2**31) % 2**32 - 2**31).astype(np.int32)


def test_back_to_back_parallel_regions_are_exact():
    out = _chain(12, 7, 24, "btb")
    want = _chain_reference(12, 7, 24)
    buf = hl.Buffer(hl.Int(32), [24, 7])
    for _ in range(300):  # many jobs in a row: workers arrive late, early, asleep, spinning
        out.realize(buf)
        np.testing.assert_array_equal(np.asarray(buf), want)


def test_nested_parallel_loops_run_inside_the_job():
    """A parallel loop inside a parallel task runs serially on its thread (one job at a time)."""
    f = hl.Func("nested")
    inner = hl.Func("nested_inner")
    inner[x, y] = x * 7 + y
    f[x, y] = inner[x, y] + inner[x + 1, y]
    inner.compute_at(f, y).parallel(x, 4)
    f.parallel(y)
    out = np.asarray(f.realize([33, 17]))
    xs, ys = np.meshgrid(np.arange(33), np.arange(17))
    np.testing.assert_array_equal(out, (xs * 7 + ys) * 2 + 7)


def test_parallel_pipelines_from_several_python_threads():
    """Jobs started while another runs go serially on their own thread; all results are right."""
    pipelines = [(_chain(4, 9, 16, f"mt{k}_"), _chain_reference(4, 9, 16)) for k in range(4)]
    for out, _ in pipelines:
        out.compile_jit()
    errors = []

    def work(out, want):
        buf = hl.Buffer(hl.Int(32), [16, 9])
        try:
            for _ in range(100):
                out.realize(buf)
                np.testing.assert_array_equal(np.asarray(buf), want)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=p) for p in pipelines]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a realize hung"
    assert not errors, errors


def test_python_threads_run_while_a_pipeline_runs():
    """The compiled code runs without the GIL (its direct entry releases it, as a ctypes call
    does): another Python thread keeps running during a long realize, not only between calls."""
    r = hl.RDom([(0, 30000)])
    slow = hl.Func("slow_serial")
    slow[x] = 0
    slow[x] += (x * r.x) % 7  # 60 million scalar steps, no parallel loop: 0.1 s or more a call
    out = hl.Buffer(hl.Int(32), [2000])
    slow.realize(out)
    calls, ticks, done = [], [], threading.Event()

    def realize_repeatedly():
        for _ in range(3):
            t0 = time.perf_counter()
            slow.realize(out)
            calls.append((t0, time.perf_counter()))
        done.set()

    worker = threading.Thread(target=realize_repeatedly)
    worker.start()
    while not done.is_set():
        ticks.append(time.perf_counter())
    worker.join()
    # With the GIL held through a call, this thread would stand still for a whole call: a gap
    # between its ticks as long as the shortest call (released: a few ms at most).
    gap = max(b - a for a, b in zip(ticks, ticks[1:]))
    shortest = min(t1 - t0 for t0, t1 in calls)
    assert gap < shortest / 2, (gap, shortest)
    assert np.asarray(out)[5] == ((5 * np.arange(30000)) % 7).sum()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_runs_parallel_loops(passes_in_forked_child):
    out = _chain(5, 11, 16, "fork")
    want = _chain_reference(5, 11, 16)
    np.testing.assert_array_equal(np.asarray(out.realize([16, 11])), want)  # the parent's workers exist
    # the child: its own workers, same results
    assert passes_in_forked_child(lambda: all(np.array_equal(np.asarray(out.realize([16, 11])), want)
                                              for _ in range(50)))
    np.testing.assert_array_equal(np.asarray(out.realize([16, 11])), want)  # and the parent's still work


_COUNT_THREADS = textwrap.dedent("""
    import os, numpy as np, pyhalide as hl
    x, y = hl.Var("x"), hl.Var("y")
    f = hl.Func("f")
    f[x, y] = x + y
    f.parallel(y)
    f.compile_jit()  # whatever compiling starts is counted before
    before = len(os.listdir("/proc/self/task"))
    for _ in range(20):
        f.realize([64, 64])
    print(len(os.listdir("/proc/self/task")) - before)
""")


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc")
@pytest.mark.parametrize("threads", [1, 3])
def test_hl_num_threads_is_how_many_threads_run(threads):
    env = dict(os.environ, HL_NUM_THREADS=str(threads), PYHALIDE_DISK_CACHE="0")
    run = subprocess.run([sys.executable, "-c", _COUNT_THREADS], capture_output=True, text=True, env=env,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert int(run.stdout.split()[-1]) == threads - 1  # the caller is one of them
