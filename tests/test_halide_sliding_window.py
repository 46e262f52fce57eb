"""Halide's test/correctness/sliding_window.cpp: how many values of a producer a sliding window
computes, counted through trace_stores (a vector store counts its lanes) where Halide counts calls
to an extern function, and what the pipeline computes, against numpy.

The case where pyhalide refuses what Halide runs is a strict xfail that says why.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import pyhalide as hl
from pyhalide import reference

x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
MEMORY = [hl.MemoryType.Heap, hl.MemoryType.Register]


def computed(capsys, realize, names=("f",)) -> tuple[np.ndarray, int]:
    """realize()'s output and how many values the Funcs `names` stored (each lane of a vector)."""
    capsys.readouterr()
    out = np.asarray(realize())
    count = 0
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("Store ") and line.split(" ")[1].split(".")[0].split("$")[0] in names:
            lanes = re.search(r"\(<([^>]*)>", line)
            count += len(lanes.group(1).split(",")) if lanes else 1
    return out, count


def _pairs(n: int) -> np.ndarray:
    """g(x) = f(x) + f(x - 1) with f(x) = x."""
    return 2 * np.arange(n) - 1


@pytest.mark.parametrize("memory", MEMORY)
def test_a_specialized_consumer_slides(capsys, memory):
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = x
    g[x] = f[x] + f[x - 1]
    f.store_root().compute_at(g, x).store_in(memory).trace_stores()
    g.specialize(g.output_buffer().dim(0).min() == 0)
    out, count = computed(capsys, lambda: g.realize([100]))
    np.testing.assert_array_equal(out, _pairs(100))
    assert count == 101


@pytest.mark.parametrize("memory", MEMORY)
def test_two_producers_of_one_consumer_slide(capsys, memory):
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    f[x] = 2 * x
    g[x] = 2 * x + 1
    h[x] = f[x] + f[x - 1] + g[x] + g[x - 1]
    f.store_root().compute_at(h, x).store_in(memory).trace_stores()
    g.store_root().compute_at(h, x).store_in(memory).trace_stores()
    out, count = computed(capsys, lambda: h.realize([100]), ("f", "g"))
    np.testing.assert_array_equal(out, 8 * np.arange(100) - 2)
    assert count == 202


@pytest.mark.parametrize("memory", MEMORY)
def test_a_sequence_of_two_windows_slides(capsys, memory):
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    f[x] = 2 * x
    g[x] = f[x] + f[x - 1]
    h[x] = g[x] + g[x - 1]
    f.store_root().compute_at(h, x).store_in(memory).trace_stores()
    g.store_root().compute_at(h, x).store_in(memory)
    out, count = computed(capsys, lambda: h.realize([100]))
    np.testing.assert_array_equal(out, 8 * np.arange(100) - 8)
    assert count == 102  # (Halide's Register case computes one more, 103)


@pytest.mark.parametrize("memory", MEMORY)
def test_a_producer_computed_inside_a_consumer_computed_per_point_slides_along_its_loop(capsys, memory):
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    f[x] = x
    g[x] = f[x] + f[x - 1]
    h[x] = g[x]
    f.store_root().compute_at(g, x).store_in(memory).trace_stores()
    g.compute_at(h, x)
    out, count = computed(capsys, lambda: h.realize([100]))
    np.testing.assert_array_equal(out, _pairs(100))
    assert count == 101


@pytest.mark.parametrize("memory", MEMORY)
def test_an_inner_vectorized_dimension_slides(capsys, memory):
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    f[x, c] = x * 4 + c * c
    g[x, c] = f[x + 1, c] - f[x, c]
    h[x, c] = g[x, c]
    f.store_root().compute_at(h, x).store_in(memory).reorder(c, x).reorder_storage(c, x).bound(c, 0, 4) \
        .vectorize(c).trace_stores()
    g.compute_at(h, x)
    h.reorder(c, x).reorder_storage(c, x).bound(c, 0, 4).vectorize(c)
    out, count = computed(capsys, lambda: h.realize([100, 4]))
    np.testing.assert_array_equal(out, np.full((4, 100), 4))
    assert count == 404


def test_a_producer_whose_footprint_does_not_move_is_computed_in_the_first_iteration(capsys):
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = x * 3
    g[x] = f[0] + f[5]
    f.store_root().compute_at(g, x).trace_stores()
    out, count = computed(capsys, lambda: g.realize([100]))
    np.testing.assert_array_equal(out, np.full(100, 15))
    assert count == 6


@pytest.mark.parametrize("memory", MEMORY)
def test_a_value_needed_every_third_iteration_is_computed_once(capsys, memory):
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = x * 5
    g[x] = f[x / 3]
    f.store_root().compute_at(g, x).store_in(memory).trace_stores()
    out, count = computed(capsys, lambda: g.realize([100]))
    np.testing.assert_array_equal(out, np.arange(100) // 3 * 5)
    assert count == 34


@pytest.mark.parametrize("memory", MEMORY)
def test_a_wrapper_sliding_every_third_iteration_asks_only_for_its_input(memory):
    f = hl.ImageParam(hl.Int(32), 1, "f")
    g = hl.Func("g")
    g[x] = f[x / 3]
    xo = hl.Var("xo")
    g.split(x, xo, x, 10)
    f.in_().store_at(g, xo).compute_at(g, x).store_in(memory)
    f.set(hl.Buffer(np.arange(33, dtype=np.int32) * 7))
    np.testing.assert_array_equal(np.asarray(g.realize([98])), np.arange(98) // 3 * 7)


def test_the_diagonal_case_halide_does_not_slide_computes_what_it_computes(capsys):
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + 2 * y
    g[x, y] = f[x + y, x - y] + f[(x - 2) + y, (x - 2) - y] + f[x + (y - 2), x - (y - 2)]
    f.store_root().compute_at(g, x).trace_stores()
    out, count = computed(capsys, lambda: g.realize([10, 10]))
    xs, ys = np.meshgrid(np.arange(10), np.arange(10))
    want = (xs + ys + 2 * (xs - ys)) + (xs - 2 + ys + 2 * (xs - 2 - ys)) + (xs + ys - 2 + 2 * (xs - ys + 2))
    np.testing.assert_array_equal(out, want)
    assert count == 1500


def _stencils(slide_g_inside_h: bool):
    f, g, h, u, v = (hl.Func(n) for n in "fghuv")
    f[x, y] = x + 3 * y
    g[x, y] = f[x, y - 1] + f[x, y + 1]
    h[x, y] = g[x - 1, y] + g[x + 1, y]
    u[x, y] = h[x, y - 1] + h[x, y + 1]
    v[x, y] = u[x - 1, y] + u[x + 1, y]
    u.compute_at(v, y)
    h.store_root().compute_at(v, y)
    if slide_g_inside_h:
        g.compute_at(h, y)
    else:
        g.store_root().compute_at(v, y)
    f.store_root().compute_at(v, y).trace_stores()
    return v


@pytest.mark.parametrize("slide_g_inside_h", [False, True])
def test_a_sequence_of_stencils_slides_at_every_level(capsys, slide_g_inside_h):
    out, count = computed(capsys, lambda: _stencils(slide_g_inside_h).realize([10, 10]))
    xs, ys = np.meshgrid(np.arange(10), np.arange(10))
    np.testing.assert_array_equal(out, 16 * (xs + 3 * ys))
    assert count == 14 * 14


def test_a_clamped_read_before_the_loop_warms_up_once(capsys):
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = x * 2
    g[x] = f[hl.max(x, 3)]
    f.store_root().compute_at(g, x).trace_stores()
    out, count = computed(capsys, lambda: g.realize([10]))
    np.testing.assert_array_equal(out, np.maximum(np.arange(10), 3) * 2)
    assert count == 7


def test_a_clamp_on_both_sides_computes_each_value_once(capsys):
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    f[x] = x * 2
    g[x] = f[hl.clamp(x, 0, 9)]
    h[x] = g[x - 1] + g[x + 1]
    f.store_root().compute_at(h, x).trace_stores()
    g.store_root().compute_at(h, x)
    out, count = computed(capsys, lambda: h.realize([10]))
    np.testing.assert_array_equal(out, 2 * (np.clip(np.arange(10) - 1, 0, 9) + np.clip(np.arange(10) + 1, 0, 9)))
    assert count == 10


def test_a_vectorized_producer_slides_a_vector_at_a_time(capsys):
    # Each iteration needs six values, of which four are new: one vector of f, its block shifted
    # inwards where the region is not a whole number of vectors (the first iteration).
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = x
    g[x] = f[x + 1] + f[x - 1]
    f.store_root().compute_at(g, x).vectorize(x, 4).trace_stores()
    g.vectorize(x, 4)
    out, count = computed(capsys, lambda: g.realize([100]))
    np.testing.assert_array_equal(out, 2 * np.arange(100))
    assert count == 104


def test_a_vectorized_producer_whose_window_is_narrower_than_a_vector_does_not_slide(capsys):
    # A shifted block would reach below what the window holds.
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = x * 3
    g[x] = f[x + 1] + f[x - 1]
    f.store_root().compute_at(g, x).vectorize(x, 4).trace_stores()
    out, count = computed(capsys, lambda: g.realize([20]))
    np.testing.assert_array_equal(out, 6 * np.arange(20))
    assert count == 20 * 4


def test_an_unrolled_producer_slides(capsys):
    # f's loop over its whole region is unrolled to the first iteration's 11 values, each copy
    # guarded: later iterations run 10 of them.
    f, g = hl.Func("f"), hl.Func("g")
    xi = hl.Var("xi")
    f[x] = x * x
    g[x] = f[x] + f[x - 1]
    g.split(x, x, xi, 10)
    f.store_root().compute_at(g, x).unroll(x).trace_stores()
    out, count = computed(capsys, lambda: g.realize([100]))
    np.testing.assert_array_equal(out, np.arange(100) ** 2 + (np.arange(100) - 1) ** 2)
    assert count == 101


def test_a_reduction_slides_each_row_computed_once(capsys):
    r = hl.RDom([(0, 100)])
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = -1
    f[r.x, y] = r.x + y + 2000
    f.store_root().compute_at(g, y).trace_stores()
    g[x, y] = f[x, y] + f[x, y - 1]
    capsys.readouterr()
    out = np.asarray(g.realize([10, 10]))
    updates = sum(1 for line in capsys.readouterr().out.splitlines()
                  if line.startswith("Store f") and int(line.split("= ")[-1]) >= 1000)
    xs, ys = np.meshgrid(np.arange(10), np.arange(10))
    np.testing.assert_array_equal(out, 2 * (xs + ys + 2000) - 1)
    assert updates == 100 * 11


def test_a_diagonal_update_does_not_slide():
    # f[y, y] += 1 writes along the diagonal: each row's update is not on that row alone.
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + 10 * y
    f[y, y] = f[y, y] * 2
    f.store_root().compute_at(g, y)
    g[x, y] = f[x, y] + f[x, y - 1]
    np.testing.assert_array_equal(np.asarray(g.realize([10, 10])), reference.realize([g], [10, 10])[0])


def test_register_storage_of_an_unrolled_sliding_producer_folds():
    f, g = hl.Func("f"), hl.Func("g")
    xi = hl.Var("xi")
    f[x] = x * x
    g[x] = f[x] + f[x - 1]
    g.split(x, x, xi, 10)
    f.store_root().compute_at(g, x).store_in(hl.MemoryType.Register).unroll(x)
    np.testing.assert_array_equal(np.asarray(g.realize([100])), np.arange(100) ** 2 + (np.arange(100) - 1) ** 2)


def test_sliding_over_two_dimensions_at_once(capsys):
    # rows along y, and within each row, columns along x (each row starts afresh at its first x)
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + 2 * y
    g[x, y] = f[x - 1, y] + f[x, y] + f[x, y - 1]
    f.store_root().compute_at(g, x).trace_stores()
    out, count = computed(capsys, lambda: g.realize([10, 10]))
    xs, ys = np.meshgrid(np.arange(10), np.arange(10))
    np.testing.assert_array_equal(out, 3 * (xs + 2 * ys) - 3)
    assert count == 11 * 11


@pytest.mark.parametrize("tail", [hl.TailStrategy.GuardWithIf, hl.TailStrategy.RoundUp])
def test_a_producer_computed_per_point_of_a_tiled_consumer_computes_what_the_algorithm_does(tail):
    f, g = hl.Func("f"), hl.Func("g")
    xo, yo, xi, yi = hl.Var("xo"), hl.Var("yo"), hl.Var("xi"), hl.Var("yi")
    f[x, y] = x * 7 + y * 3
    g[x, y] = f[x - 1, y] + f[x, y] + f[x, y - 1] + f[x + 1, y + 1]
    g.tile(x, y, xo, yo, xi, yi, 4, 3, tail)
    f.store_root().compute_at(g, xi)
    want = reference.realize([g], [13, 11])[0]
    np.testing.assert_array_equal(np.asarray(g.realize([13, 11])), want)


@pytest.mark.parametrize("case, halide", [("corner", 24), ("diagonal", 60), ("unrolled", 48)])
def test_halides_sliding_reductions(capsys, case, halide):
    # Halide's test/correctness/sliding_reduction.cpp: the last update's evaluations (here, its
    # stores of 99) of a Func with updates sliding along y, with one update writing a corner
    # (slides), one writing the diagonal (does not slide), and the pure stage unrolled by two
    # rows (slides, each iteration recomputing the block of rows before the new one; Halide
    # computes more there, 48).
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x
    if case == "corner":
        f[0, y] += f[1, y] + f[0, y]
    elif case == "diagonal":
        f[x, x] += f[x, 0] + f[x, 1]
    else:
        f[0, y] += f[1, y] + f[2, y]
    f[x, y] = f[x, y] * 0 + 99
    if case == "unrolled":
        f.unroll(y, 2)
        f.update(0).unscheduled()
        f.update(1).unscheduled()
    g[x, y] = f[x, y] + f[x, y - 1] + f[x, y - 2]
    f.store_root().compute_at(g, y).trace_stores()
    capsys.readouterr()
    out = np.asarray(g.realize([2, 10]))
    last = sum(1 for line in capsys.readouterr().out.splitlines()
               if line.startswith("Store f") and line.endswith("= 99"))
    np.testing.assert_array_equal(out, np.full((10, 2), 99 * 3))
    assert last == (42 if case == "unrolled" else halide)


def test_a_window_moving_backward_slides(capsys):
    # Halide's test/correctness/sliding_backwards.cpp
    f, g = hl.Func("f"), hl.Func("g")
    g[x] = x * 5
    f[x] = g[100 - x] + g[100 - x + 1]
    g.compute_at(f, x).store_root().trace_stores()
    out, count = computed(capsys, lambda: f.realize([10]), ("g",))
    np.testing.assert_array_equal(out, 5 * (2 * (100 - np.arange(10)) + 1))
    assert count == 11


def test_a_reduction_whose_rows_move_backward_computes_what_the_algorithm_does():
    r = hl.RDom([(0, 6)])
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x - y
    f[r.x, y] = f[r.x, y] * 3 + r.x
    g[x, y] = f[x, 20 - y] + f[x, 21 - y] * 2
    f.store_root().compute_at(g, y)
    np.testing.assert_array_equal(np.asarray(g.realize([6, 12])), reference.realize([g], [6, 12])[0])


def test_a_window_slides_over_a_guarded_split_with_a_fold(capsys):
    # Halide's test/correctness/sliding_over_guard_with_if.cpp: every strip of 64 rows computes
    # its rows and the two above and below, each once
    expensive, dst = hl.Func("expensive"), hl.Func("dst")
    expensive[x, y] = x + 3 * y
    dst[x, y] = expensive[x, y - 1] + expensive[x, y] + expensive[x, y + 1]
    yo = hl.Var("yo")
    dst.compute_root().split(y, yo, y, 64, hl.TailStrategy.GuardWithIf)
    expensive.compute_at(dst, y).store_at(dst, yo).fold_storage(y, 4).trace_stores()
    out, count = computed(capsys, lambda: dst.realize([100, 100]), ("expensive",))
    xs, ys = np.meshgrid(np.arange(100), np.arange(100))
    np.testing.assert_array_equal(out, 3 * (xs + 3 * ys))
    assert count == (100 + 2 + 2) * 100


@pytest.mark.parametrize("tail", [hl.TailStrategy.GuardWithIf, hl.TailStrategy.PredicateLoads,
                                  hl.TailStrategy.RoundUpAndBlend])
def test_a_reduction_whose_update_loads_past_its_rows_keeps_its_window(tail):
    # (the fuzz found it) an update split with a tail that loads the whole last block of the Func
    # itself makes its pure stage compute a row past the window, which a fold of two rows would
    # store over the row the consumer still reads: such a Func does not slide
    r = hl.RDom([(0, 5)])
    c, out = hl.Func("c"), hl.Func("out")
    c[x, y] = hl.f32(x - y)
    c[x, y] += hl.f32(r.x * y) * 0.5
    out[x, y] = c[x, y] * 0.5 + c[x, y - 1]
    yo, yi = hl.Var("yo"), hl.Var("yi")
    c.compute_at(out, y).store_root()
    c.update(0).split(y, yo, yi, 2, tail)
    np.testing.assert_array_equal(np.asarray(out.realize([7, 9])), reference.realize([out], [7, 9])[0])


def test_a_reduction_whose_pure_stage_shifts_a_block_in_another_dimension_does_not_slide():
    # (the fuzz found it) the initial value's split of x by 2, over one column, writes the column
    # before it too; rows kept from earlier iterations would lose their finished values there
    r = hl.RDom([(0, 5)])
    c, out = hl.Func("c"), hl.Func("out")
    c[x, y] = hl.f32(x - y)
    c[x, y] += hl.f32(r.x * y) * 0.5
    out[x, y] = c[x, y] * 0.5 + c[x, y - 1]
    c.compute_at(out, x).store_root()
    c.split(x, hl.Var("xo"), hl.Var("xi"), 2)
    np.testing.assert_array_equal(np.asarray(out.realize([7, 9])), reference.realize([out], [7, 9])[0])


@pytest.mark.parametrize("taken", [0, 1])
def test_each_specialization_folds_its_own_window(taken):
    # (the differential fuzz found it, against Halide) the branch not taken slides with a
    # narrower window along a loop of the same name; its fold was applied to the other branch's
    # storage too, which then held one column of the two it computes
    inp = hl.Buffer(((np.arange(12 * 9) * 37) % 101).astype(np.int32).reshape(9, 12), name="fold_in")
    bx, by = hl.Func("fold_bx"), hl.Func("fold_by")
    bx[x, y] = inp[x, y + 1] + inp[x + 1, y + 1] + inp[x + 2, y + 1]
    by[x, y] = (bx[x + 1, y] + bx[x + 1, y + 1] + bx[x + 1, y + 2]) / 3
    selector = hl.Param(hl.Int(32), "selector")
    selector.set(taken)
    xo, xi = hl.Var("xo"), hl.Var("xi")
    by.split(x, xo, xi, 2, hl.TailStrategy.PredicateLoads)
    by.specialize(selector >= 1).reorder(xo, y, xi)
    bx.compute_at(by, xo).store_at(by, y)
    for width in (1, 4, 7):
        np.testing.assert_array_equal(np.asarray(by.realize([width, 3])), reference.realize([by], [width, 3])[0])


# ---- where pyhalide's sliding window computes more than Halide's, or refuses what it runs


@pytest.mark.xfail(strict=True, raises=hl.HalideError,
                   reason="each iteration needs 6 values of f, fewer than its 8-wide blocks: pyhalide does not slide "
                          "it (a block shifted inwards would reach below the window), so its storage is not folded "
                          "to the constant size Register storage needs; Halide shifts the loop to warm up")
def test_register_storage_of_a_producer_rotating_in_registers():
    f, g = hl.Func("f"), hl.Func("g")
    xi = hl.Var("xi")
    f[x] = x
    g[x] = f[x + 1] + f[x - 1]
    f.store_root().compute_at(g, x).store_in(hl.MemoryType.Register).split(x, x, xi, 8).vectorize(xi, 4).unroll(xi)
    g.vectorize(x, 4, hl.TailStrategy.RoundUp)
    np.testing.assert_array_equal(np.asarray(g.realize([100])), 2 * np.arange(100))
