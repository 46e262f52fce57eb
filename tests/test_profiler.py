"""The sampling profiler (target feature "profile"): a profiled pipeline computes what it computes
unprofiled, and its report bills the time and the heap to the Funcs that spend them."""

from __future__ import annotations

import contextlib
import functools
import io
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import pyhalide as hl
from pyhalide.codegen.runtime import num_threads
from pyhalide.testing.corpus import CASES
from pyhalide.testing.schedule_strategies import assert_same, invalid_schedule_reason, scheduled

PROFILE = "host-profile"


def _check_report(report, computed: set[str]):
    """What holds of every report: one row per computed Func (and the overhead), times and
    shares that add up to the total, threads between 1 and the pool's."""
    assert {f.name for f in report.funcs} == computed | {"overhead"}
    assert report.samples >= 1 and report.runs == 1
    assert sum(f.time_ms for f in report.funcs) == pytest.approx(report.total_ms, rel=1e-6)
    assert sum(f.percent for f in report.funcs) == pytest.approx(100.0, abs=1e-6)
    for f in report.funcs:
        assert f.time_ms >= 0 and (f.threads == 0 or 1 <= f.threads <= num_threads())
        assert f.heap_allocations == 0 or f.heap_peak >= f.heap_average > 0


def _stencil(n=800):
    x, y = hl.Var("x"), hl.Var("y")
    inp = hl.Buffer(np.random.default_rng(1).random((n + 2, n + 2), dtype=np.float32), "inp")
    heavy, light, out = hl.Func("heavy"), hl.Func("light"), hl.Func("out")
    r = hl.RDom([(0, 24)], "r")
    heavy[x, y] = 0.0
    heavy[x, y] += hl.sin(inp[x, y] + hl.f32(r.x))  # 24 sines a point
    light[x, y] = inp[x, y] * 2.0
    out[x, y] = heavy[x, y] + light[x + 1, y + 1] + light[x, y]
    return out, heavy, light, (x, y)


def test_report_bills_the_time_to_the_func_that_spends_it(capsys):
    out, heavy, light, (x, y) = _stencil()
    heavy.compute_root().vectorize(x, 16).update().vectorize(x, 16)
    light.compute_root().vectorize(x, 16)
    p = hl.Pipeline(out)
    p.compile_jit(hl.Target(PROFILE))
    got = p.realize([800, 800])
    report = hl.last_profile_report()
    _check_report(report, {out.name(), heavy.name(), light.name()})
    assert report.pipeline == out.name()
    # heavy does 24 sines a point, the others a multiply and two adds: it takes most samples
    assert report.func(heavy.name()).percent > 50, str(report)
    # the two roots are on the heap, each once, their exact sizes (800 x 800 and 801 x 801 floats)
    assert (report.func(heavy.name()).heap_allocations, report.func(heavy.name()).heap_peak) == (1, 800 * 800 * 4)
    assert (report.func(light.name()).heap_allocations, report.func(light.name()).heap_peak) == (1, 801 * 801 * 4)
    assert report.heap_allocations == 2 and report.heap_peak == (800 * 800 + 801 * 801) * 4
    # printed as Halide's JIT prints it, after the realization
    text = capsys.readouterr().out
    assert text.endswith(str(report))
    assert str(report).startswith(f"{out.name()}\n total time: ") and f"    {heavy.name()}:" in text
    assert "peak: 2560000  num: 1" in text
    unprofiled = _stencil()
    unprofiled[1].compute_root().vectorize(x, 16).update().vectorize(x, 16)
    unprofiled[2].compute_root().vectorize(x, 16)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(unprofiled[0].realize([800, 800])))


def test_parallel_loops_count_their_threads(capsys):
    out, heavy, light, (x, y) = _stencil(1024)
    yo, yi = hl.Var("yo"), hl.Var("yi")
    heavy.compute_at(out, yo).vectorize(x, 16).update().vectorize(x, 16)
    light.compute_at(out, yo).store_in(hl.MemoryType.Heap)
    out.split(y, yo, yi, 16).parallel(yo).vectorize(x, 16)
    out.realize([1024, 1024], target=hl.Target(PROFILE))
    report = hl.last_profile_report()
    _check_report(report, {out.name(), heavy.name(), light.name()})
    # light is allocated per strip of 17 rows (a 1025 x 17 box of floats), by each task on the heap
    assert report.func(light.name()).heap_allocations == 1024 // 16
    assert report.func(light.name()).heap_average == 1025 * 17 * 4
    assert report.heap_peak <= num_threads() * (1025 * 17 + 1024 * 16) * 4
    assert report.func(heavy.name()).percent > 50, str(report)
    assert "threads:" in capsys.readouterr().out or report.serial


def test_small_storage_on_the_stack_is_reported(capsys):
    x, y = hl.Var("x"), hl.Var("y")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + y
    g[x, y] = f[x, y] + f[x + 1, y]
    f.compute_at(g, y).bound_extent(x, 65)
    g.bound(x, 0, 64)
    g.realize([64, 64], target=hl.Target(PROFILE))
    assert hl.last_profile_report().func(f.name()).stack_bytes == 65 * 4
    assert "stack: 260" in capsys.readouterr().out


def test_tuples_updates_and_errors(capsys):
    x = hl.Var("x")
    inp = hl.ImageParam(hl.Int(32), 1, "inp")
    f, h = hl.Func("f"), hl.Func("h")
    f[x] = (inp[x], inp[x] * 2)
    f[x] = (f[x][0] + 1, f[x][1] - 1)
    h[x] = f[x][0] + f[x][1]
    f.compute_root()
    p = hl.Pipeline(h)
    p.compile_jit(hl.Target(PROFILE))
    inp.set(hl.Buffer(np.arange(100, dtype=np.int32)))
    np.testing.assert_array_equal(np.asarray(p.realize([100])), np.arange(100) * 3)
    _check_report(hl.last_profile_report(), {f.name(), h.name()})
    threads = threading.active_count()
    inp.set(hl.Buffer(np.arange(10, dtype=np.int32)))
    with pytest.raises(hl.HalideError, match="inp"):
        p.realize([100])  # the input is too small: the error, and the sampler stopped
    assert threading.active_count() == threads


def test_profiling_is_refused_where_it_cannot_sample(tmp_path):
    x = hl.Var("x")
    f = hl.Func("f")
    f[x] = x
    with pytest.raises(hl.HalideError, match="profiler.*ahead-of-time"):
        f.compile_to_object(str(tmp_path / "f.o"), [], "f", hl.Target("host-profile"))
    with pytest.raises(hl.HalideError, match="profiler.*GPU"):
        f.realize([4], target=hl.Target("host-cuda-profile"))
    assert hl.Target("host-profile_by_timer").supported()


@functools.cache
def _reference(name: str):
    return CASES[name]().reference()


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=5, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(data=st.data())
def test_profiled_schedules_compute_the_same(name, data):
    """Random valid schedules of the fuzz corpus, profiled: the marks change nothing computed,
    and every report adds up."""
    sched = data.draw(scheduled(CASES[name]), label="schedule")
    case = sched.built
    try:
        case.pipeline().compile_jit(hl.Target(PROFILE))
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            got = case.realize()
    except hl.CompileError as e:  # a schedule refused at realize, as the schedule fuzz discards them
        if invalid_schedule_reason(str(e)) is None:
            raise
        assume(False)
    assert_same(got, _reference(name), case.reassociates, f"{name}, profiled, vs reference")
    report = hl.last_profile_report()
    assert printed.getvalue().endswith(str(report))
    assert sum(f.time_ms for f in report.funcs) == pytest.approx(report.total_ms, rel=1e-6)



def test_the_marks_go_where_code_runs(tmp_path):
    """A production and a consumption start by naming their Func; an output's consumption, which
    runs nothing, gets no mark (the loop nest printed stays Halide's)."""
    x, y = hl.Var("x"), hl.Var("y")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + y
    g[x, y] = f[x, y] * 2
    f.compute_root()
    path = tmp_path / "g.stmt"
    hl.Pipeline(g).compile_to_lowered_stmt(str(path), [], target=hl.Target(PROFILE))
    marks = [line.strip() for line in path.read_text().splitlines()
             if "profiler_set_current" in line or line.strip().startswith(("produce", "consume"))]
    assert marks == ["profiler_set_current(0)", f"produce {f.name()} {{", "profiler_set_current(1)",
                     f"consume {f.name()} {{", "profiler_set_current(0)", f"produce {g.name()} {{",
                     "profiler_set_current(2)", f"consume {g.name()} {{"]
