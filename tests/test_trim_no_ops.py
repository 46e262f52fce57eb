"""Trim no-ops (pyhalide/lowering/trim_no_ops.py): a loop runs only where its body does something,
as Halide's trim_no_ops; the values are the unscheduled algorithm's."""

from __future__ import annotations

import numpy as np
import pytest

import pyhalide as hl

x, y = hl.Var("x"), hl.Var("y")


def loads(capsys, realize, name: str):
    capsys.readouterr()
    out = np.asarray(realize())
    return out, sum(1 for line in capsys.readouterr().out.splitlines() if line.startswith(f"Load {name}"))


@pytest.mark.parametrize("parallel", [False, True])
def test_an_update_adding_zero_outside_a_band_reads_only_the_band(capsys, parallel):
    inp, f = hl.Func("band_in"), hl.Func("band")
    inp[x, y] = x * 3 + y
    inp.compute_root().trace_loads()
    f[x, y] = 0
    f[x, y] += hl.select((x >= y) & (x < y + 4), inp[x, y], 0)
    if parallel:
        f.update().parallel(x)
    out, n = loads(capsys, lambda: f.realize([16, 8]), "band_in")
    xx, yy = np.meshgrid(np.arange(16), np.arange(8))
    np.testing.assert_array_equal(out, np.where((xx >= yy) & (xx < yy + 4), xx * 3 + yy, 0))
    assert n == 8 * 4


def test_a_select_of_the_old_value_reads_only_where_it_writes(capsys):
    inp, f = hl.Func("sel_in"), hl.Func("sel")
    inp[x] = hl.f32(x) * 0.5
    inp.compute_root().trace_loads()
    f[x] = hl.f32(-1)
    f[x] = hl.select(x > 5, inp[x], f[x])  # (floats: a select of the old value is exact)
    out, n = loads(capsys, lambda: f.realize([10]), "sel_in")
    np.testing.assert_array_equal(out, np.where(np.arange(10) > 5, np.arange(10) * 0.5, -1).astype(np.float32))
    assert n == 4


def test_a_float_update_adding_zero_runs_everywhere():
    """-0.0 + 0.0 is 0.0: a float `+ select(c, v, 0)` is not a no-op, so it is not trimmed."""
    f = hl.Func("negzero")
    f[x] = hl.f32(-0.0)
    f[x] += hl.select(x < 2, hl.f32(1), hl.f32(0))
    out = np.asarray(f.realize([5]))
    np.testing.assert_array_equal(out, [1, 1, 0, 0, 0])
    assert not np.signbit(out[2:]).any()


def test_a_body_that_prints_is_not_trimmed(capsys):
    f = hl.Func("prints")
    f[x] = 0
    f[x] += hl.select(x == 3, 7, 0) + hl.print_when(x < 0, 0, "never")
    g = hl.Func("prints_too")
    g[x] = 0
    g[x] = hl.select(x == 3, hl.print(x, "at"), g[x])
    np.testing.assert_array_equal(np.asarray(f.realize([5])), [0, 0, 0, 7, 0])
    capsys.readouterr()
    np.testing.assert_array_equal(np.asarray(g.realize([5])), [0, 0, 0, 3, 0])
    assert capsys.readouterr().out.count("at") == 5  # print runs in every iteration, as it did


def test_the_loop_bounds_in_the_lowered_stmt(tmp_path):
    inp, f = hl.Func("circle_in"), hl.Func("circle")
    inp[x, y] = x + y
    inp.compute_root()
    f[x, y] = 0
    t = hl.cast(hl.Int(32), hl.ceil(hl.sqrt(hl.cast(hl.Float(32), hl.max(0, 100 - y * y)))))
    f[x, y] += hl.select((x > -t) & (x < t), inp[x, y], 0)
    path = tmp_path / "circle.stmt"
    f.compile_to_lowered_stmt(str(path), [])
    loop = next(line for line in path.read_text().splitlines() if "for<serial> (circle" in line and ".s1.x," in line)
    assert loop.split(",")[1].strip().startswith("max(circle") and "sqrt" in loop  # (from the circle)
