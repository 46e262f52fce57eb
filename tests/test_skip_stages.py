"""Skip stages (pyhalide/lowering/skip_stages.py): a production nothing will read is not run.

The cases follow Halide's test/correctness/skip_stages.cpp, which counts calls to an extern
function; here each Func's stores are counted through trace_stores. Every case also checks the
output against numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

import pyhalide as hl

x, y = hl.Var("x"), hl.Var("y")


def stores(capsys, realize) -> tuple[object, dict[str, int]]:
    """realize()'s output and how many stores each traced Func made (its name without `$N`)."""
    capsys.readouterr()
    out = np.asarray(realize())
    counts: dict[str, int] = {}
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("Store "):
            name = line.split(" ")[1].split(".")[0].split("$")[0]
            counts[name] = counts.get(name, 0) + 1
    return out, counts


def test_the_side_of_a_diamond_a_select_does_not_choose_is_not_computed(capsys):
    toggle = hl.Param(hl.Bool(), "toggle1")
    f1, f2, f3, f4 = hl.Func("f1"), hl.Func("f2"), hl.Func("f3"), hl.Func("f4")
    f1[x] = x
    f2[x] = f1[x] + 1
    f3[x] = f1[x] + 2
    f4[x] = hl.select(toggle, f2[x], f3[x])
    f1.compute_root()
    f2.compute_root().trace_stores()
    f3.compute_root().trace_stores()
    for on in (True, False):
        toggle.set(on)
        out, counts = stores(capsys, lambda: f4.realize([10]))
        np.testing.assert_array_equal(out, np.arange(10) + (1 if on else 2))
        assert counts == ({"f2": 10} if on else {"f3": 10})


def test_a_producer_of_two_conditional_consumers_runs_when_either_does(capsys):
    t1, t2 = hl.Param(hl.Bool(), "toggle1"), hl.Param(hl.Bool(), "toggle2")
    f1, f2, f3, f4 = hl.Func("f1"), hl.Func("f2"), hl.Func("f3"), hl.Func("f4")
    f1[x] = x * 3
    f2[x] = f1[x] + 1
    f3[x] = f1[x] + 2
    f4[x] = hl.select(t1, f2[x], 0) + hl.select(t2, f3[x], 0)
    for f in (f1, f2, f3):
        f.compute_root().trace_stores()
    for a in (True, False):
        for b in (True, False):
            t1.set(a)
            t2.set(b)
            out, counts = stores(capsys, lambda: f4.realize([10]))
            want = (np.arange(10) * 3 + 1) * a + (np.arange(10) * 3 + 2) * b
            np.testing.assert_array_equal(out, want)
            assert counts.get("f1", 0) == (10 if a or b else 0)
            assert (counts.get("f2", 0), counts.get("f3", 0)) == (10 * a, 10 * b)


def test_split_compute_and_store_levels_skip_each_production(capsys):
    t1, t2 = hl.Param(hl.Bool(), "toggle1"), hl.Param(hl.Bool(), "toggle2")
    f1, f2, f3, f4 = hl.Func("f1"), hl.Func("f2"), hl.Func("f3"), hl.Func("f4")
    f1[x] = x + 5
    f2[x] = f1[x] + 1
    f3[x] = f1[x] * 2
    f4[x] = hl.select(t1, f2[x], 0) + hl.select(t2, f3[x], 0)
    xo, xi = hl.Var("xo"), hl.Var("xi")
    f4.split(x, xo, xi, 5)
    f1.compute_at(f4, xo).trace_stores()
    f2.store_root().compute_at(f4, xo).trace_stores()
    f3.store_at(f4, xo).compute_at(f4, xi).trace_stores()
    for a in (True, False):
        for b in (True, False):
            t1.set(a)
            t2.set(b)
            out, counts = stores(capsys, lambda: f4.realize([10]))
            np.testing.assert_array_equal(out, (np.arange(10) + 6) * a + (np.arange(10) + 5) * 2 * b)
            assert [counts.get(n, 0) for n in ("f1", "f2", "f3")] == [10 * (a or b), 10 * a, 10 * b]


def test_a_tuple_is_computed_when_any_of_its_elements_is_read(capsys):
    toggle = hl.Param(hl.Bool(), "toggle1")
    both, first = hl.Func("both"), hl.Func("first")
    t = hl.Func("t")
    t[x] = hl.Tuple([x, x + 1])
    both[x] = hl.select(toggle, t[x][0], 0) + t[x][1]
    first[x] = hl.select(toggle, t[x][0], 0)
    t.compute_root().trace_stores()
    for out_func, always in ((both, True), (first, False)):
        for on in (True, False):
            toggle.set(on)
            out, counts = stores(capsys, lambda f=out_func: f.realize([10]))
            want = np.arange(10) * on + (np.arange(10) + 1 if always else 0)
            np.testing.assert_array_equal(out, want)
            assert counts.get("t", 0) == (2 * 10 if on or always else 0)  # (a store per element)


def test_a_production_a_sliding_window_reuses_is_not_skipped(capsys):
    # f is not needed at x == 5, but f(5), computed in that iteration, is read at x == 6.
    f, h = hl.Func("f"), hl.Func("h")
    f[x] = x * 7
    h[x] = hl.select(x == 5, 0, f[x] + f[x - 1])
    f.store_root().compute_at(h, x).trace_stores()
    out, counts = stores(capsys, lambda: h.realize([10]))
    want = np.arange(10) * 14 - 7
    want[5] = 0
    np.testing.assert_array_equal(out, want)
    assert counts == {"f": 11}


def test_a_production_holding_one_of_a_func_stored_outside_it_is_not_skipped(capsys):
    # Halide's case: g is not needed at x == 5, but f, stored outside g and computed inside it,
    # slides along x: skipping g would skip f(5), which x == 6 reads.
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    f[x] = x * 7
    g[x] = f[x] + f[x - 1]
    h[x] = hl.select(x == 5, 0, g[x])
    f.store_root().compute_at(g, x).trace_stores()
    g.compute_at(h, x).trace_stores()
    out, counts = stores(capsys, lambda: h.realize([10]))
    want = np.arange(10) * 14 - 7
    want[5] = 0
    np.testing.assert_array_equal(out, want)
    assert counts == {"f": 11, "g": 10}  # (Halide's counts)


def test_a_consumer_computed_per_iteration_is_skipped_in_the_iterations_that_do_not_read_it(capsys):
    g, h = hl.Func("g"), hl.Func("h")
    g[x] = x * 7
    h[x] = hl.select(x == 5, 0, g[x])
    g.compute_at(h, x).trace_stores()
    out, counts = stores(capsys, lambda: h.realize([10]))
    want = np.arange(10) * 7
    want[5] = 0
    np.testing.assert_array_equal(out, want)
    assert counts == {"g": 9}


@pytest.mark.parametrize("schedule, doubled", [("root", 66 * 100), ("split", 100 * 100), ("same_row", 66 * 100)])
def test_a_condition_read_from_a_func_computed_before_skips_per_row(capsys, schedule, doubled):
    # Double the rows without a negative number (every third row has one); the test of the row
    # is a Func. Per row of the output, `doubled` is skipped where any_negative(y) holds, where
    # any_negative is computed before doubled's storage and the row's condition does not vary
    # inside it (not when doubled is computed for ten rows at once).
    w = h = 100
    inp, any_negative, dbl, out = hl.Func("input"), hl.Func("any_negative"), hl.Func("doubled"), hl.Func("output")
    inp[x, y] = hl.select((y % 3 == 0) & (x == 37), -1, x)
    r = hl.RDom([(0, w)])
    any_negative[y] = hl.cast(hl.Bool(), False)
    any_negative[y] = any_negative[y] | (inp[r.x, y] < 0)
    dbl[x, y] = inp[x, y] * 2
    out[x, y] = hl.select(any_negative[y], inp[x, y], dbl[x, y])
    inp.compute_root()
    dbl.trace_stores()
    if schedule == "root":
        dbl.compute_at(out, y)
        any_negative.compute_root()
    elif schedule == "split":
        yo, yi = hl.Var("yo"), hl.Var("yi")
        out.split(y, yo, yi, 10)
        dbl.compute_at(out, yo)
        any_negative.compute_root()
    else:
        dbl.compute_at(out, y)
        any_negative.compute_at(out, y)
    got, counts = stores(capsys, lambda: out.realize([w, h]))
    want = np.tile(np.arange(w), (h, 1)) * 2
    want[::3] = np.arange(w)
    want[::3, 37] = -1
    np.testing.assert_array_equal(got, want)
    assert counts == {"doubled": doubled}


def test_a_specialization_skips_what_only_the_branch_not_taken_reads(capsys):
    toggle = hl.Param(hl.Bool(), "toggle1")
    f2, f3, f4 = hl.Func("f2"), hl.Func("f3"), hl.Func("f4")
    f2[x] = x + 1
    f3[x] = x + 2
    f4[x] = hl.select(toggle, f2[x], f3[x])
    f2.compute_root().trace_stores()
    f3.compute_root().trace_stores()
    f4.specialize(toggle).vectorize(x, 4)
    for on in (True, False):
        toggle.set(on)
        out, counts = stores(capsys, lambda: f4.realize([10]))
        np.testing.assert_array_equal(out, np.arange(10) + (1 if on else 2))
        assert counts == ({"f2": 10} if on else {"f3": 10})


def test_vectorized_arms_read_a_skipped_func_without_using_it(capsys):
    toggle = hl.Param(hl.Int(32), "toggle")
    f, g, out = hl.Func("f"), hl.Func("g"), hl.Func("out")
    f[x, y] = hl.f32(x) / (y + 1)
    g[x, y] = hl.i32(f[x, y] * 4)
    out[x, y] = hl.select(toggle > 0, g[x, y] / (x % 3), x)  # (a vector of both arms is evaluated)
    f.compute_root().trace_stores()
    g.compute_root().vectorize(x, 8)
    out.vectorize(x, 8).parallel(y)
    for on in (1, 0):
        toggle.set(on)
        got, counts = stores(capsys, lambda: out.realize([37, 5]))
        xs, ys = np.meshgrid(np.arange(37), np.arange(5))
        g_ref = ((xs.astype(np.float32) / (ys + 1)) * 4).astype(np.int32)
        with np.errstate(divide="ignore"):
            quotient = np.where(xs % 3 == 0, 0, np.floor_divide(g_ref, np.maximum(xs % 3, 1)))
        np.testing.assert_array_equal(got, quotient if on else xs)
        assert counts.get("f", 0) == (37 * 5 if on else 0)


def test_a_func_whose_values_index_a_read_is_always_computed(capsys):
    # A select evaluates both arms in vector code: were `index` skipped, its stale values would
    # index `table` where no bounds hold.
    toggle = hl.Param(hl.Bool(), "toggle1")
    table = hl.Buffer(np.arange(4, dtype=np.int32) * 10, name="table")
    index, out = hl.Func("index"), hl.Func("out")
    index[x] = x % 4
    out[x] = hl.select(toggle, table[index[x]], -1)
    index.compute_root().trace_stores()
    out.vectorize(x, 8)
    for on in (True, False):
        toggle.set(on)
        got, counts = stores(capsys, lambda: out.realize([16]))
        np.testing.assert_array_equal(got, (np.arange(16) % 4) * 10 if on else np.full(16, -1))
        assert counts == {"index": 16}


def test_the_condition_is_bound_once_per_realization_in_the_lowered_stmt(tmp_path):
    toggle = hl.Param(hl.Bool(), "toggle1")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + y
    g[x, y] = hl.select(toggle | (y > 3), f[x, y], 0)
    f.compute_at(g, y)
    g.compile_to_lowered_stmt(str(tmp_path / "g.stmt"), [toggle])
    text = (tmp_path / "g.stmt").read_text()
    assert text.count(f"let {f.name()}.used = ") == 1
    assert f"if ({f.name()}.used)" in text


def test_a_condition_read_from_an_input_image_skips_per_row(capsys):
    """The per-row condition reads an input image (Halide's process_some_tiles): it is read
    where the consumer reads it, at the row, clamped into the image (rows past it are where the
    consumer would not read it)."""
    mask = hl.ImageParam(hl.Bool(), 1, "row_mask")
    dbl, out = hl.Func("doubled"), hl.Func("output")
    dbl[x, y] = x + y * 2
    out[x, y] = hl.select(mask[y], dbl[x, y], -1)
    dbl.compute_at(out, y).trace_stores()
    rows = np.array([False, True, False, False, True, True], dtype=bool)
    mask.set(hl.Buffer(rows))
    got, counts = stores(capsys, lambda: out.realize([8, 6]))
    xx, yy = np.meshgrid(np.arange(8), np.arange(6))
    np.testing.assert_array_equal(got, np.where(rows[:, None], xx + yy * 2, -1))
    assert counts == {"doubled": 3 * 8}


def test_an_image_read_under_another_condition_is_not_lifted(capsys):
    """mask is read only in an arm of the outer select, so it is not read early (what an arm
    reads, only where it is chosen, need not be in the image): doubled is computed in every row,
    also row 1, which the mask alone would skip."""
    mask = hl.ImageParam(hl.Bool(), 1, "short_mask")
    dbl, out = hl.Func("doubled"), hl.Func("output")
    dbl[x, y] = x + y * 2
    out[x, y] = hl.select(y < 3, hl.select(mask[hl.min(y, 2)], dbl[x, y], -1), dbl[x, y] + 1)
    dbl.compute_at(out, y).trace_stores()
    mask.set(hl.Buffer(np.array([True, False, True], dtype=bool)))
    got, counts = stores(capsys, lambda: out.realize([4, 5]))
    xx, yy = np.meshgrid(np.arange(4), np.arange(5))
    want = np.where(yy < 3, np.where(np.array([True, False, True, True, True])[yy], xx + yy * 2, -1), xx + yy * 2 + 1)
    np.testing.assert_array_equal(got, want)
    assert counts == {"doubled": 5 * 4}
