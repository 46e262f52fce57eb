"""Halide's compute_with tests of update stages, mixed schedules and misuse, ported to pyhalide
(CPU): from test/correctness/compute_with.cpp the cases update_stage, update_stage2,
update_stage3, update_stage_pairwise, update_stage_diagonal, update_stage_rfactor,
vectorize_inlined, mismatching_splits, different_arg_num_compute_at, store_at_different_levels,
rvar_bounds, two_compute_at, overlapping_updates and child_var_dependent_bounds; all of
test/correctness/compute_with_in and compute_with_inlined; and test/error/bad_compute_with,
bad_compute_with_invalid_specialization, bad_compute_with_parent_func_not_used,
compute_with_crossing_edges1, compute_with_crossing_edges2 and compute_with_fuse_in_specialization.

Each fused pipeline's result is compared with the same algorithm realized without compute_with
(as Halide's tests do) and, where there is one, with a numpy closed form. Halide counts the
loads and stores of a run with a JIT trace handler (C++ only); here every Func traces its loads
and stores and the printed events are counted (`_trace_events`). rvar_bounds checks the size of
an Allocate with a custom lowering pass (C++ only); here an IRVisitor finds it in
the lowered Stmt. Sizes are Halide's."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

import pyhalide as hl
from pyhalide import ir
from pyhalide.ir_mutator import IRVisitor
from pyhalide.lower import lower

BASE = 31


def _three_stages(*names_and_inits):
    """Funcs `name(x, y) = a; name = b + 31 * name; name = c + 31 * name`, one per (name, (a, b, c))."""
    x, y = hl.Var("x"), hl.Var("y")
    funcs = []
    for name, (a, b, c) in names_and_inits:
        f = hl.Func(name)
        f[x, y] = a
        f[x, y] = b + BASE * f[x, y]
        f[x, y] = c + BASE * f[x, y]
        funcs.append(f)
    return funcs, x, y


F_INIT, G_INIT, H_INIT = (5, 6, 7), (1, 2, 3), (10, 11, 12)


def _three_stage_value(a, b, c):
    return c + BASE * (b + BASE * a)


def _realize_three_stages(schedule, with_h=False, size=128):
    """Realize f, g (and h) of `_three_stages`, all compute_root and bounded to size^2, after
    `schedule(f, g, h, y)`; the arrays, in the order f, g, h."""
    specs = [("f", F_INIT), ("g", G_INIT)] + ([("h", H_INIT)] if with_h else [])
    funcs, x, y = _three_stages(*specs)
    for f in funcs:
        f.compute_root().bound(x, 0, size).bound(y, 0, size)
    schedule(funcs[0], funcs[1], funcs[2] if with_h else None, y)
    bufs = [hl.Buffer(hl.Int(32), [size, size]) for _ in funcs]
    hl.Pipeline(funcs).realize(bufs)
    return [np.asarray(b) for b in bufs]


def _check_three_stages(schedule, with_h=False):
    """The fused realization equals the unfused one and the closed form of each Func."""
    got = _realize_three_stages(schedule, with_h)
    want = _realize_three_stages(lambda *_: None, with_h)
    inits = [F_INIT, G_INIT, H_INIT]
    for k, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(a, b)
        assert (a == _three_stage_value(*inits[k])).all()


def _name(func: str) -> str:
    """A regex of a Func's name in messages: `f`, or `f$3` where the name was taken."""
    return re.escape(func) + r"(\$\d+)?"


_EVENT = re.compile(r"^(Load|Store) (\w+)(?:\$\d+)?\.(\d+)\((.*)\) = ")


def _trace_events(text: str) -> dict:
    """Per (event, Func) of the printed trace, the number of events and the bounds touched:
    {("Store", "f"): (count, [(min, max) per dimension])} (a second Func "f" prints as f$1: it
    counts as f). A vector event (`<a, b, ...>` coordinates) counts once, as in Halide's trace
    handler, and its bounds cover all its lanes."""
    counts: Counter = Counter()
    bounds: dict = {}
    for line in text.splitlines():
        m = _EVENT.match(line)
        if not m:
            continue
        key = (m.group(1), m.group(2))
        counts[key] += 1
        coords = [[int(v) for v in c.strip("<>").split(",")] for c in re.findall(r"<[^>]*>|-?\d+", m.group(4))]
        old = bounds.get(key, [(min(c), max(c)) for c in coords])
        bounds[key] = [(min(lo, *c), max(hi, *c)) for (lo, hi), c in zip(old, coords)]
    return {k: (counts[k], bounds[k]) for k in counts}


def _trace_all(*funcs) -> None:
    for f in funcs:
        f.trace_loads().trace_stores()


# ------------------------------------------------------------------------------ update stages
def test_update_stage():
    """Ports compute_with's update_stage_test: f's second update fused with g's first update at
    y (f's first update unscheduled); f and g (three stages each, 128^2) equal the unfused run."""
    def schedule(f, g, _, y):
        f.update(0).unscheduled()
        f.update(1).compute_with(g.update(0), y)
    _check_three_stages(schedule)


def test_update_stage2():
    """Ports compute_with's update_stage2_test: f's two updates both fused with g's first
    update at y (one after the other in its loop); f and g equal the unfused run."""
    def schedule(f, g, _, y):
        f.update(0).compute_with(g.update(0), y)
        f.update(1).compute_with(g.update(0), y)
    _check_three_stages(schedule)


def test_update_stage3():
    """Ports compute_with's update_stage3_test: all three of f's stages fused with g's pure
    stage at y; f and g equal the unfused run."""
    def schedule(f, g, _, y):
        f.compute_with(g, y)
        f.update(0).compute_with(g, y)
        f.update(1).compute_with(g, y)
    _check_three_stages(schedule)


def test_update_stage_pairwise():
    """Ports compute_with's update_stage_pairwise_test: each of f's stages fused with the same
    stage of g at y; f and g equal the unfused run."""
    def schedule(f, g, _, y):
        f.compute_with(g, y)
        f.update(0).compute_with(g.update(0), y)
        f.update(1).compute_with(g.update(1), y)
    _check_three_stages(schedule)


def test_update_stage_diagonal():
    """Ports compute_with's update_stage_diagonal_test: f.update(1) with g.update(0), which is
    with h's pure stage, at y (a chain across three Funcs, their other stages unscheduled);
    f, g and h equal the unfused run."""
    def schedule(f, g, h, y):
        f.update(1).compute_with(g.update(0), y)
        g.update(0).compute_with(h, y)
        f.update(0).unscheduled()
        g.update(1).unscheduled()
    _check_three_stages(schedule, with_h=True)


def test_update_stage_rfactor():
    """Ports compute_with's update_stage_rfactor_test: the two updates of a scalar sum, each
    moved into its own Func by rfactor([]), those Funcs' updates fused at the reduction
    variable; the sum of x over [0, 100) twice is 9900."""
    x = hl.Var("x")
    f0, f1, cost = hl.Func("f0"), hl.Func("f1"), hl.Func("cost")
    f0[x] = x
    f1[x] = x
    r = hl.RDom([hl.Range(0, 100)])
    cost[()] = 0
    cost[()] += f0[r.x]
    cost[()] += f1[r.x]
    f0.compute_root()
    f1.compute_root()
    tmp1 = cost.update(0).rfactor([])
    tmp2 = cost.update(1).rfactor([])
    tmp1.compute_root()
    tmp2.compute_root()
    tmp1.update().compute_with(tmp2.update(), r.x)
    assert np.asarray(cost.realize()).item() == 9900


# ------------------------------------------------------------------------------ splits and vectors
def _h_and_g(g_reads_inlined_update: bool):
    """The Funcs of vectorize_inlined / mismatching_splits: h(x, y, c) = c * x, and g(x, y)
    reading f (= c * x, inlined) at (x / 2, y / 2), through an inlined Func with an update
    (channels 0 and 2) or directly (channel 2)."""
    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
    f, g, h, inp = hl.Func("f"), hl.Func("g"), hl.Func("h"), hl.Func("input")
    inp[x, y] = x
    f[x, y, c] = c * inp[x, y]
    h[x, y, c] = f[x, y, c]
    if g_reads_inlined_update:
        inl = hl.Func("inl")
        inl[x, y] = f[x // 2, y // 2, 0]
        inl[x, y] += f[x // 2, y // 2, 2]
        g[x, y] = inl[x, y]
    else:
        g[x, y] = f[x // 2, y // 2, 2]
    return (f, g, h, inp), (x, y, c)


def _check_h_and_g(h: np.ndarray, g: np.ndarray) -> None:
    """h[c, y, x] = c * x and g[y, x] = 2 * (x / 2), the values of `_h_and_g`'s Funcs."""
    np.testing.assert_array_equal(h, np.arange(h.shape[0])[:, None, None] * np.arange(h.shape[2]) + 0 * h)
    np.testing.assert_array_equal(g, 2 * (np.arange(g.shape[1]) // 2) + 0 * g)


def test_vectorize_inlined(capfd):
    """Ports compute_with's vectorize_inlined_test: g (reading an inlined Func with an update,
    split 64 then 2 in y, vectorized 4 in x) fused at y with h (reordered x, c, y, split 32
    then 1 in y, vectorized 4) aligned at the end. Every Func traces its loads and stores: the
    fused run makes as many as the one computing both at root (no work is repeated or added by
    the union loops): one 4-wide store per 4 points of each, and no loads (all else is inlined);
    h (5 channels, 128^2) and g (256^2) equal that run and c * x, 2 * (x / 2)."""
    h_size, g_size = 128, 256

    def run(fused):
        (f, g, h, inp), (x, y, c) = _h_and_g(True)
        yo, yi = hl.Var("yo"), hl.Var("yi")
        g.split(y, yo, y, 64, hl.TailStrategy.RoundUp).split(y, y, yi, 2, hl.TailStrategy.RoundUp)
        g.vectorize(x, 4, hl.TailStrategy.GuardWithIf)
        h.reorder(x, c, y).split(y, yo, y, 32, hl.TailStrategy.RoundUp)
        if fused:
            h.split(y, y, yi, 1, hl.TailStrategy.RoundUp)
            g.compute_with(h, y, hl.LoopAlignStrategy.AlignEnd)
        else:
            g.compute_root()
        h.vectorize(x, 4, hl.TailStrategy.GuardWithIf).compute_root()
        g.bound(y, 0, g_size)
        h.bound(y, 0, h_size).bound(c, 0, 5)
        _trace_all(f, g, h, inp)
        h_im, g_im = hl.Buffer(hl.Int(32), [h_size, h_size, 5]), hl.Buffer(hl.Int(32), [g_size, g_size])
        capfd.readouterr()
        hl.Pipeline([h, g]).realize([h_im, g_im])
        counts = {k: n for k, (n, _) in _trace_events(capfd.readouterr().out).items()}
        return np.asarray(h_im), np.asarray(g_im), counts

    h_ref, g_ref, counts_ref = run(False)
    h_got, g_got, counts = run(True)
    assert counts == counts_ref
    assert counts_ref == {("Store", "h"): h_size * h_size * 5 // 4, ("Store", "g"): g_size * g_size // 4}
    np.testing.assert_array_equal(h_got, h_ref)
    np.testing.assert_array_equal(g_got, g_ref)
    _check_h_and_g(h_ref, g_ref)


def test_mismatching_splits():
    """Ports compute_with's mismatching_splits_test: g(x, y) = f(x / 2, y / 2, 2) split 64 then
    2 in y, vectorized 4, fused at y with h (reordered x, c, y, split 32 in y, vectorized 4)
    aligned at the start; the two y loops have the same extent, the outer ones different: h
    (128^2 x 5) and g (256^2) equal the unfused run and c * x, 2 * (x / 2)."""
    h_size, g_size = 128, 256

    def run(fused):
        (_, g, h, _), (x, y, c) = _h_and_g(False)
        if fused:
            yo, yi = hl.Var("yo"), hl.Var("yi")
            g.split(y, yo, y, 64, hl.TailStrategy.RoundUp).split(y, y, yi, 2, hl.TailStrategy.RoundUp)
            g.vectorize(x, 4, hl.TailStrategy.GuardWithIf).compute_with(h, y, hl.LoopAlignStrategy.AlignStart)
            h.reorder(x, c, y).split(y, yo, y, 32, hl.TailStrategy.RoundUp)
            h.vectorize(x, 4, hl.TailStrategy.GuardWithIf).compute_root()
        g.bound(y, 0, g_size)
        h.bound(y, 0, h_size).bound(c, 0, 5)
        h_im, g_im = hl.Buffer(hl.Int(32), [h_size, h_size, 5]), hl.Buffer(hl.Int(32), [g_size, g_size])
        hl.Pipeline([h, g]).realize([h_im, g_im])
        return np.asarray(h_im), np.asarray(g_im)

    h_ref, g_ref = run(False)
    h_got, g_got = run(True)
    np.testing.assert_array_equal(h_got, h_ref)
    np.testing.assert_array_equal(g_got, g_ref)
    _check_h_and_g(h_ref, g_ref)


# ------------------------------------------------------------------------------ compute levels
def test_different_arg_num_compute_at(capfd):
    """Ports compute_with's different_arg_num_compute_at_test: output_b(c) (one dimension)
    fused at c with output_a(x, y, c), with big and reduce_big computed at output_a's c (so
    inside the fused loop, used by both outputs). Counted from every Func's trace, the run
    stores big and output_a once per point and reduce_big and output_b once per channel, and
    loads big once per point and reduce_big once per point and channel (nothing recomputed);
    both outputs equal the unfused run (and 7 * clz(x + y + c) / c, 5c)."""
    width = height = 16
    channels = 3

    def run(fused):
        x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
        big, output_a, reduce_big, output_b = (hl.Func(n) for n in ("big", "output_a", "reduce_big", "output_b"))
        big[x, y, c] = hl.count_leading_zeros(x + y + c)
        reduce_big[c] = c
        output_a[x, y, c] = 7 * big[x, y, c] / reduce_big[c]
        output_b[c] = reduce_big[c] * 5
        if fused:
            output_b.compute_with(output_a, c)
            big.compute_at(output_a, c)
            reduce_big.compute_at(output_a, c)
            output_a.bound(x, 0, width).bound(y, 0, width).bound(c, 0, channels)
            output_b.bound(c, 0, channels)
            _trace_all(big, output_a, reduce_big, output_b)
        a, b = hl.Buffer(hl.Int(32), [width, height, channels]), hl.Buffer(hl.Int(32), [channels])
        capfd.readouterr()
        hl.Pipeline([output_a, output_b]).realize([a, b])
        return np.asarray(a), np.asarray(b), _trace_events(capfd.readouterr().out)

    a_ref, b_ref, _ = run(False)
    a_got, b_got, events = run(True)
    points = width * height * channels
    assert {k: n for k, (n, _) in events.items()} == {
        ("Store", "big"): points, ("Store", "reduce_big"): channels, ("Store", "output_a"): points,
        ("Store", "output_b"): channels, ("Load", "big"): points, ("Load", "reduce_big"): points + channels}
    assert events[("Store", "output_b")][1] == [(0, channels - 1)]
    np.testing.assert_array_equal(a_got, a_ref)
    np.testing.assert_array_equal(b_got, b_ref)
    c, y, x = np.mgrid[0:channels, 0:height, 0:width]
    clz = 32 - np.ceil(np.log2(x + y + c + 1)).astype(np.int32)
    np.testing.assert_array_equal(a_ref, np.where(c == 0, 0, 7 * clz // np.maximum(c, 1)))
    np.testing.assert_array_equal(b_ref, 5 * np.arange(channels))


def test_store_at_different_levels():
    """Ports compute_with's store_at_different_levels_test: producer2 stored at root but
    computed at the consumer's y with producer1 (computed and stored there), fused at y; the
    consumer of both at y - 1 and y + 1 is 8x + 6y over 16^2."""
    x, y = hl.Var("x"), hl.Var("y")
    producer1, producer2, consumer = hl.Func("producer1"), hl.Func("producer2"), hl.Func("consumer")
    producer1[x, y] = x + y
    producer2[x, y] = 3 * x + 2 * y
    consumer[x, y] = producer1[x, y - 1] + producer1[x, y + 1] + producer2[x, y - 1] + producer2[x, y + 1]
    consumer.compute_root()
    producer1.compute_at(consumer, y)
    producer2.store_root().compute_at(consumer, y).compute_with(producer1, y)
    consumer.bound(x, 0, 16).bound(y, 0, 16)
    yy, xx = np.mgrid[0:16, 0:16]
    np.testing.assert_array_equal(np.asarray(consumer.realize([16, 16])), 8 * xx + 6 * yy)


class _AllocationSizes(IRVisitor):
    """The number of elements of each Allocate, by name (None where not a constant)."""

    def __init__(self):
        super().__init__()
        self.sizes: dict[str, list] = {}

    def visit_Allocate(self, s):
        size = 1
        for e in s.extents:
            size = size * e.value if size is not None and isinstance(e, ir.IntImm) else None
        self.sizes.setdefault(s.name, []).append(size)
        self.visit_children(s)


def test_rvar_bounds():
    """Ports compute_with's rvar_bounds_test: two sums over a 32x64 input, each tiled 8x8 over
    its RDom, the first's update fused at the outer tile variable with the second's; the
    producers (input_c, add_1, mul_2) computed at that tile loop need only an 8x8 tile: the
    Stmt allocates 64 elements of input_c wherever it allocates it (Halide checks this in a
    custom lowering pass at the end of lowering; here in the Stmt `lower` returns), and the
    total over an input of ones is 2 * 2048 + 2 * 2048 = 8192."""
    inp = hl.ImageParam(hl.Int(16), 2, "input")
    x, y = hl.Var("x"), hl.Var("y")
    input_c, add_1, mul_2 = hl.Func("input_c"), hl.Func("add_1"), hl.Func("mul_2")
    sum_1, sum_2, total_sum = hl.Func("sum_1"), hl.Func("sum_2"), hl.Func("total_sum")
    r = hl.RDom(inp)
    input_c[x, y] = inp[x, y]
    add_1[x, y] = input_c[x, y] + 1
    mul_2[x, y] = input_c[x, y] * 2
    sum_1[()] = hl.i16(0)
    sum_2[()] = hl.i16(0)
    sum_1[()] += add_1[r.x, r.y]
    sum_2[()] += mul_2[r.x, r.y]
    total_sum[()] = sum_1[()] + sum_2[()]
    inp.dim(0).set_bounds(0, 32)
    inp.dim(1).set_bounds(0, 64)
    rxo, rxi, ryo, ryi = hl.RVar("rxOuter"), hl.RVar("rxInner"), hl.RVar("ryOuter"), hl.RVar("ryInner")
    for s in (sum_1, sum_2):
        s.update(0).tile(r.x, r.y, rxo, ryo, rxi, ryi, 8, 8)
    for p in (add_1, mul_2, input_c):
        p.compute_at(sum_2, rxo)
    sum_1.update(0).compute_with(sum_2.update(0), rxo)
    for s in (sum_1, sum_2, total_sum):
        s.compute_root()

    sizes = _AllocationSizes()
    sizes.visit(lower(total_sum).stmt)
    assert sizes.sizes["input_c"] and set(sizes.sizes["input_c"]) == {64}

    ones = hl.Buffer(hl.Int(16), [32, 64])
    ones.fill(1)
    inp.set(ones)
    assert np.asarray(total_sum.realize()).item() == 8192


def test_two_compute_at():
    """Ports compute_with's two_compute_at_test (Halide issue 6367): three outputs vectorized 8,
    output1 and output3 fused with output2 at k, each with a producer computed at its own k
    (bound_storage 8, in registers), one of them shared by output1's producer chain; over an
    8x2 input in(x, y) = x + y the outputs are (x(x + 1))^2, twice that, and x + 2."""
    input1 = hl.ImageParam(hl.Int(16), 2, "input1")
    k = hl.Var("k")
    output1, output2, output3 = hl.Func("output1"), hl.Func("output2"), hl.Func("output3")
    intermediate, output1_value, output3_value = hl.Func("intermediate"), hl.Func("output1_value"), \
        hl.Func("output3_value")
    intermediate[k] = input1[k, 0] * input1[k, 1]
    output1_value[k] = intermediate[k] * intermediate[k]
    output1[k] = output1_value[k]
    output2[k] = output1_value[k] + output1_value[k]
    output3_value[k] = input1[k, 0] + 2
    output3[k] = output3_value[k]
    num = input1.dim(0).extent()
    input1.dim(0).set_bounds(0, num)
    input1.dim(1).set_bounds(0, 2)
    for out in (output1, output2, output3):
        out.output_buffer().dim(0).set_bounds(0, num)
    intermediate.vectorize(k, 8).compute_at(output1_value, k).bound_storage(k, 8).store_in(hl.MemoryType.Register)
    output1_value.vectorize(k, 8).compute_at(output2, k).bound_storage(k, 8).store_in(hl.MemoryType.Register)
    output1.vectorize(k, 8).compute_with(output2, k)
    output2.vectorize(k, 8)
    output3_value.vectorize(k, 8).compute_at(output3, k).bound_storage(k, 8).store_in(hl.MemoryType.Register)
    output3.vectorize(k, 8).compute_with(output2, k)
    p = hl.Pipeline([output1, output2, output3])
    p.compile_jit()
    data = np.add.outer(np.arange(2), np.arange(8)).astype(np.int16)
    input1.set(hl.Buffer(data))
    outs = [hl.Buffer(hl.Int(16), [8]) for _ in range(3)]
    p.realize(outs)
    i = np.arange(8)
    val = (i * (i + 1)) ** 2
    np.testing.assert_array_equal(np.asarray(outs[0]), val)
    np.testing.assert_array_equal(np.asarray(outs[1]), 2 * val)
    np.testing.assert_array_equal(np.asarray(outs[2]), i + 2)


def _two_updates_with_offset_min(f, g, setup):
    """Realize f and g (10 points each) with f's buffer starting at 2 and g's at 0."""
    setup()
    f_buf, g_buf = hl.Buffer(hl.Int(32), [10]), hl.Buffer(hl.Int(32), [10])
    f_buf.set_min(2)
    p = hl.Pipeline([f, g])
    p.compile_jit()
    p.realize([f_buf, g_buf])
    return np.asarray(f_buf), np.asarray(g_buf)


def test_overlapping_updates():
    """Ports compute_with's overlapping_updates_test: g's update fused at x with f's (f's
    unscheduled) where f's output covers [2, 12) and g's [0, 10), so the fused loop spans the
    union and each update runs only over its own range: f(x) = x there, g(x) = x."""
    x = hl.Var("x")
    f, g = hl.Func("f"), hl.Func("g")
    for h in (f, g):
        h[x] = 0
        h[x] += x

    def setup():
        g.update().compute_with(f.update(), x)
        f.update().unscheduled()

    f_got, g_got = _two_updates_with_offset_min(f, g, setup)
    np.testing.assert_array_equal(f_got, np.arange(2, 12))
    np.testing.assert_array_equal(g_got, np.arange(10))


def test_child_var_dependent_bounds():
    """Ports compute_with's child_var_dependent_bounds_test (Halide issue 8149): f(x) = x +
    sum over r in [0, 10) of f_inter(x, r), g likewise with g_inter (each = x + 1), g's update
    fused with f's at r and both intermediates computed at f's r; with f's output over [2, 12)
    and g's over [0, 10), g_inter's bounds must follow g's x, not f's: f(x) = g(x) = 11x + 10.
    (Halide's test prints mismatches without failing; here they fail.)"""
    x, y = hl.Var("x"), hl.Var("y")
    r = hl.RDom([hl.Range(0, 10)], "r")
    f, g, f_inter, g_inter = hl.Func("f"), hl.Func("g"), hl.Func("f_inter"), hl.Func("g_inter")
    for out, inter in ((f, f_inter), (g, g_inter)):
        inter[x, y] = x
        inter[x, y] += 1
        out[x] = x
        out[x] += inter[x, r]

    def setup():
        f_inter.compute_at(f, r)
        g_inter.compute_at(f, r)
        g.update().compute_with(f.update(), r)
        f.update().unscheduled()

    f_got, g_got = _two_updates_with_offset_min(f, g, setup)
    np.testing.assert_array_equal(f_got, 11 * np.arange(2, 12) + 10)
    np.testing.assert_array_equal(g_got, 11 * np.arange(10) + 10)


# ------------------------------------------------------------------------------ compute_with_in, _inlined
def test_compute_with_in():
    """Ports test/correctness/compute_with_in: a wrapper of `one` for `three` (one.in(three)),
    computed at root and fused at Var.outermost() with two, while one itself is computed at
    two's outermost level; output = two + three = 2(x + y) + 5 over 64^2."""
    x, y = hl.Var("x"), hl.Var("y")
    one, two, three, output = hl.Func("one"), hl.Func("two"), hl.Func("three"), hl.Func("output")
    one[x, y] = x + y
    two[x, y] = one[x, y] + 2
    three[x, y] = one[x, y] + 3
    output[x, y] = two[x, y] + three[x, y]
    two.compute_root()
    one.in_(three).compute_root().compute_with(two, hl.Var.outermost())
    one.compute_root()
    one.compute_at(two, hl.Var.outermost())
    yy, xx = np.mgrid[0:64, 0:64]
    np.testing.assert_array_equal(np.asarray(output.realize([64, 64])), 2 * (xx + yy) + 5)


def test_compute_with_inlined():
    """Ports test/correctness/compute_with_inlined: three Funcs reading `one` through inlined
    Funcs (g(f(one)) = (one >> 2) >> 2, plus j) fused at Var.outermost() with two[0] = one, which
    `one` is computed in; their mean three = sum of two[j] / 4 equals the same Funcs unfused
    and numpy's over 1024^2 (Halide's test only checks that it compiles and runs)."""
    size = 1024

    def run(fused):
        x, y = hl.Var("x"), hl.Var("y")
        one, three = hl.Func("one"), hl.Func("three")
        one[x, y] = x + y
        two = [hl.Func(f"two{j}") for j in range(4)]
        two[0][x, y] = one[x, y]
        for j in range(1, 4):
            f, g = hl.Func("f"), hl.Func("g")
            f[x, y] = one[x, y] >> 2
            g[x, y] = f[x, y] >> 2
            two[j][x, y] = g[x, y] + j
        temp = 0
        for j in range(4):
            temp = temp + two[j][x, y] / 4
        three[x, y] = temp
        if fused:
            two[0].compute_root()
            for j in range(1, 4):
                two[j].compute_root().compute_with(two[0], hl.Var.outermost())
            one.compute_at(two[0], hl.Var.outermost())
            three.compute_root()
        return np.asarray(three.realize([size, size]))

    got = run(True)
    np.testing.assert_array_equal(got, run(False))
    yy, xx = np.mgrid[0:size, 0:size]
    s = xx + yy
    want = s // 4 + sum(((s >> 4) + j) // 4 for j in range(1, 4))
    np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------------------ errors
def test_bad_compute_with():
    """Ports test/error/bad_compute_with: a Func's update computed with its own pure stage is
    refused, naming both stages."""
    x, y = hl.Var("x"), hl.Var("y")
    f = hl.Func("f")
    f[x, y] = x + y
    f[x, y] += 2
    f_ = _name("f")
    with pytest.raises(hl.HalideError, match=rf"Cannot schedule {f_}\.s1 to be computed with {f_}\.s0\.x"):
        f.update(0).compute_with(f, x)
        f.realize([10, 10])


def test_bad_compute_with_invalid_specialization():
    """Ports test/error/bad_compute_with_invalid_specialization: g, which has a specialization,
    computed with a specialization of f is refused: a Func computed with another must have no
    specializations."""
    x, y = hl.Var("x"), hl.Var("y")
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    f[x, y] = x + y
    g[x, y] = x - y
    h[x, y] = f[x - 1, y + 1] + g[x + 2, y - 2]
    f.compute_root()
    g.compute_root()
    tile = hl.Param(hl.Bool(), "tile")
    g.specialize(tile).split(x, hl.Var("xo"), hl.Var("xi"), 8)
    with pytest.raises(hl.HalideError, match=rf"Func {_name('g')} is scheduled to be computed with {_name('f')}, so "
                                             "it must not have any specializations"):
        g.compute_with(f.specialize(tile), y, hl.LoopAlignStrategy.AlignEnd)
        tile.set(True)
        h.realize([200, 200])


def test_bad_compute_with_parent_func_not_used():
    """Ports test/error/bad_compute_with_parent_func_not_used: p and g computed with f at h's y,
    where f is used only by h's update and p and g only by h's pure stage, so the fused group
    cannot be computed at one place that uses all of it: f's level is h.s1.y, the others' h.s0.y
    (a level without a stage is the stage that uses the Func); refused, naming both loops
    (Halide: "Fused groups must either be entirely used or unused")."""
    x, y = hl.Var("x"), hl.Var("y")
    f, g, h, p = hl.Func("f"), hl.Func("g"), hl.Func("h"), hl.Func("p")
    f[x, y] = x + y
    g[x, y] = x - y
    p[x, y] = x * y
    h[x, y] = g[x + 2, y - 2] + p[x, y]
    h[x, y] += f[x - 1, y + 1]
    for fn in (f, g, p):
        fn.compute_at(h, y)
    p.compute_with(f, x)
    g.compute_with(f, x)
    f_, h_, member = _name("f"), _name("h"), f"({_name('p')}|{_name('g')})"
    message = (rf"Invalid compute_with: the compute levels of {f_}\.s0 \(computed at {h_}\.s1\.y\) and "
               rf"{member}\.s0 \(computed at {h_}\.s0\.y\) do not match")
    with pytest.raises(hl.HalideError, match=message):
        h.realize([200, 200])


def _f_g(f_updates: int, g_updates: int):
    x, y = hl.Var("x"), hl.Var("y")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + y
    g[x, y] = x - y
    for h, n in ((f, f_updates), (g, g_updates)):
        for _ in range(n):
            h[x, y] += 1
    f.compute_root()
    g.compute_root()
    return f, g, y


def test_compute_with_crossing_edges1():
    """Ports test/error/compute_with_crossing_edges1: f's pure stage and second update both
    computed with g's pure stage, f's first update (between them) not, is refused: the stages
    of f cannot all run in order."""
    f, g, y = _f_g(2, 0)
    f.compute_with(g, y)
    f.update(1).compute_with(g, y)
    with pytest.raises(hl.HalideError, match=rf"impossible to establish correct stage order between {_name('f')}\.s0 "
                                             rf"with {_name('g')}\.s0 and {_name('f')}\.s2 with {_name('g')}\.s0"):
        hl.Pipeline([f, g]).realize([200, 200])


def test_compute_with_crossing_edges2():
    """Ports test/error/compute_with_crossing_edges2: f's pure stage computed with g's update
    and f's update with g's pure stage (the two fusions cross) is refused."""
    f, g, y = _f_g(1, 1)
    f.compute_with(g.update(0), y)
    f.update(0).compute_with(g, y)
    with pytest.raises(hl.HalideError, match=rf"impossible to establish correct stage order between {_name('f')}\.s0 "
                                             rf"with {_name('g')}\.s1 and {_name('f')}\.s1 with {_name('g')}\.s0"):
        hl.Pipeline([f, g]).realize([200, 200])


def test_compute_with_fuse_in_specialization():
    """Ports test/error/compute_with_fuse_in_specialization: out1 computed with out0 at x, and a
    specialization of out0 fuses x and y; in that specialization out0 has no loop x to fuse
    with, so compiling is refused, naming the Var and the stage."""
    x, y, fused = hl.Var("x"), hl.Var("y"), hl.Var("f")
    inp = hl.ImageParam(hl.Int(16), 2, "in")
    out0, out1 = hl.Func("out0"), hl.Func("out1")
    out0[x, y] = 1 * inp[x, y]
    out1[x, y] = 2 * inp[x, y]
    out0.vectorize(x, 8, hl.TailStrategy.RoundUp)
    out1.vectorize(x, 8, hl.TailStrategy.RoundUp).compute_with(out0, x)
    out0.specialize(inp.dim(1).stride() == 128).fuse(x, y, fused)
    with pytest.raises(hl.HalideError, match=rf"Invalid compute_with: cannot find x in {_name('out0')}\.s0"):
        hl.Pipeline([out0, out1]).compile_jit()
