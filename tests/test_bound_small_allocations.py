"""Storage whose size has a small constant bound goes on the stack (lowering/bound_small_allocations)."""

import re

import numpy as np
import pytest

import pyhalide as hl
from pyhalide.ir_printer import stmt_to_string
from pyhalide.lower import lower
from pyhalide.lowering.bound_small_allocations import STACK_LIMIT

x, y = hl.Var("x"), hl.Var("y")


def _around_the_pass(func) -> tuple[str, str]:
    """The IR just before and just after bound_small_allocations."""
    seen = []
    lower([func], hook=lambda name, stmt: seen.append((name, stmt_to_string(stmt))))
    at = [name for name, _ in seen].index("bound small allocations")
    return seen[at - 1][1], seen[at][1]


def _mallocs(func, tmp_path) -> set[str]:
    """The names of the Funcs the compiled pipeline allocates on the heap."""
    path = tmp_path / "pipeline.ll"
    func.compile_to_llvm_assembly(str(path))
    return set(re.findall(r"%\"?([\w.$]+)\"? = (?:tail )?call ptr @pyhalide_malloc", path.read_text()))


def _row_pipeline(name: str, width: int):
    """camera_pipe's shape: f is read at y / 2 and computed per output row pair, one row each
    time: an extent written as `max - min + 1` of two lets with equal values (the simplifier
    binds one let for both, so the extent is the constant 1 by the time this pass runs)."""
    yo, yi, yii = hl.Var("yo"), hl.Var("yi"), hl.Var("yii")
    image = np.arange(width * 8, dtype=np.int16).reshape(8, width)
    f, g = hl.Func(name), hl.Func(f"{name}_out")
    f[x, y] = hl.Buffer(image, name=f"{name}_in")[x, y] * 3
    g[x, y] = f[x, y // 2] + hl.cast(hl.Int(16), y)
    g.bound(x, 0, width).bound(y, 0, 8).split(y, yo, yi, 4).split(yi, yi, yii, 2).unroll(yii)
    f.compute_at(g, yi).vectorize(x, 8)
    expected = image[np.arange(8) // 2] * 3 + np.arange(8, dtype=np.int16)[:, None]
    return g, expected


def test_a_row_whose_extent_is_constant_through_lets_goes_on_the_stack(tmp_path):
    g, expected = _row_pipeline("small_row", 64)
    _, after = _around_the_pass(g)
    assert "allocate small_row[int16 * 64 * 1]" in after
    assert "small_row" not in _mallocs(g, tmp_path)
    assert np.array_equal(np.asarray(g.realize([64, 8])), expected)


def test_storage_past_the_stack_limit_stays_on_the_heap(tmp_path):
    width = STACK_LIMIT  # int16: twice the limit in bytes
    g, expected = _row_pipeline("big_row", width)
    _, after = _around_the_pass(g)
    assert f"allocate big_row[int16 * {width} * 1]" in after
    assert "big_row" in _mallocs(g, tmp_path)
    assert np.array_equal(np.asarray(g.realize([width, 8])), expected)


@pytest.mark.parametrize("width", [30, 32, 37])
def test_a_guarded_tail_gets_its_largest_size(tmp_path, width):
    """GuardWithIf: the last tile is narrower (min(8, width - xo*8) wide); the storage is sized for
    a whole tile, and every tile computes the right values."""
    xo, xi = hl.Var("xo"), hl.Var("xi")
    image = np.random.default_rng(1).integers(-100, 100, (4, width + 1)).astype(np.int32)
    inp = hl.Buffer(image, name="tail_in")
    f, g = hl.Func("tail_f"), hl.Func("tail_g")
    f[x, y] = inp[x, y] * 2 + 1
    g[x, y] = f[x, y] + f[x + 1, y]
    g.split(x, xo, xi, 8, hl.TailStrategy.GuardWithIf)
    f.compute_at(g, xo)
    before, after = _around_the_pass(g)
    assert "allocate tail_f[int32 * 9 * 1]" in after and "allocate tail_f[int32 * 9 * 1]" not in before
    assert "tail_f" not in _mallocs(g, tmp_path)
    f2 = image * 2 + 1
    assert np.array_equal(np.asarray(g.realize([width, 4])), f2[:, :width] + f2[:, 1:width + 1])


def test_stack_storage_with_a_bounded_size_is_accepted(tmp_path):
    """store_in(Stack) of a size with a constant bound is on the stack (as in Halide), not the heap."""
    xo, xi = hl.Var("xo"), hl.Var("xi")
    image = np.arange(4 * 21, dtype=np.int32).reshape(4, 21)
    f, g = hl.Func("stack_f"), hl.Func("stack_g")
    f[x, y] = hl.Buffer(image, name="stack_in")[x, y] - 5
    g[x, y] = f[x, y] * f[x, y]
    g.split(x, xo, xi, 8, hl.TailStrategy.GuardWithIf)
    f.compute_at(g, xo).store_in(hl.MemoryType.Stack)
    assert np.array_equal(np.asarray(g.realize([21, 4])), (image - 5) ** 2)
    assert "stack_f" not in _mallocs(g, tmp_path)
    # a size known only when running (f over the whole output) goes to the heap, as Halide's
    # pseudostack does; in Registers it is refused
    f.compute_root()
    assert np.array_equal(np.asarray(g.realize([21, 4])), (image - 5) ** 2)
    assert "stack_f" in _mallocs(g, tmp_path)
    f.store_in(hl.MemoryType.Register)
    with pytest.raises(hl.HalideError, match="Allocation stack_f has a dynamic size. Only fixed-size"):
        g.realize([21, 4])


def test_camera_pipes_per_row_funcs_are_on_the_stack(tmp_path):
    """The case that found this: camera_pipe's hand schedule computes six Funcs per output row
    pair, each one row; the heap served them in every row (7% of the pipeline's time)."""
    import apps

    app = apps.load("camera_pipe")
    inputs = app.inputs("small")
    built = app.build(hl, inputs)
    app.schedule(hl, built)
    heap = _mallocs(built.output, tmp_path)
    per_row = {"r_gr", "b_gr", "r_gb", "b_gb", "r_b", "b_r"}
    assert not per_row & heap, heap
    assert app.check(np.asarray(app.runner(hl, built)()), app.reference(inputs))


def test_storage_sized_at_run_time_goes_on_the_stack_when_small_enough(tmp_path):
    """A row of f per row of g, as wide as the input given: its size is known only when the
    pipeline runs, so it is on the stack when that size is at most STACK_LIMIT bytes (released
    each row) and malloc'd past it; both compute the same, and a requirement failing while the
    row is live returns its error with nothing leaked or freed twice."""
    inp = hl.ImageParam(hl.Float(32), 2, "runtime_row_in")
    limit = hl.Param(hl.Float(32), "runtime_row_limit", 1e30)
    f, g = hl.Func("runtime_row"), hl.Func("runtime_row_out")
    f[x, y] = inp[x, y] * 2.0
    g[x, y] = hl.require(f[x, y] < limit, f[x, y] + f[x + 1, y], f[x, y])
    f.compute_at(g, y).vectorize(x, 8)
    g.vectorize(x, 8)
    path = tmp_path / "row.ll"
    g.compile_to_llvm_assembly(str(path), [inp, limit])
    ir_text = path.read_text()
    assert "@llvm.stacksave" in ir_text and "runtime_row.on_stack" in ir_text
    for width in (100, 3 * STACK_LIMIT):  # on the stack, then on the heap
        data = np.random.default_rng(width).random((5, width + 1), dtype=np.float32)
        inp.set(hl.Buffer(data))
        want = data[:, :-1] * 2 + data[:, 1:] * 2
        np.testing.assert_array_equal(np.asarray(g.realize([width, 5])), want)
        limit.set(0.5)
        with pytest.raises(hl.HalideError, match="Requirement Failed"):
            g.realize([width, 5])
        limit.set(1e30)


def _stage_chain(tag: str, schedule: str):
    """Ten stages, each reading the one before and one three back (so three live at once), an
    int16 stage and one read at x + 1 (other types and sizes) in the middle; the output also reads
    stage 0, which is live to the end. Scheduled so that their storage is constant and on the
    stack: at root, per output row (inside the row loop, or inside parallel rows' tasks),
    vectorized or with parallel rows. What numpy says each stage holds, by (x, y)."""
    stages = [hl.Func(f"{tag}_s{i}") for i in range(10)]
    refs = []
    stages[0][x, y] = x + 10 * y
    refs.append(lambda X, Y: X + 10 * Y)
    for i in range(1, 10):
        prev, back, rp, rb = stages[i - 1], stages[max(i - 3, 0)], refs[i - 1], refs[max(i - 3, 0)]
        if i == 4:  # int16
            stages[i][x, y] = hl.cast(hl.Int(16), prev[x, y] % 1000 - back[x, y] % 7)
            refs.append(lambda X, Y, rp=rp, rb=rb: (rp(X, Y) % 1000 - rb(X, Y) % 7).astype(np.int16))
        elif i == 6:  # read at x + 1: a larger region
            stages[i][x, y] = hl.i32(prev[x + 1, y]) * 2 + back[x, y]
            refs.append(lambda X, Y, rp=rp, rb=rb: rp(X + 1, Y).astype(np.int32) * 2 + rb(X, Y))
        else:
            stages[i][x, y] = (hl.i32(prev[x, y]) * 3 + hl.i32(back[x, y])) % 10007 + i
            refs.append(lambda X, Y, rp=rp, rb=rb, i=i: (rp(X, Y).astype(np.int32) * 3 + rb(X, Y)) % 10007 + i)
    out = hl.Func(f"{tag}_out")
    out[x, y] = hl.i32(stages[-1][x, y]) - stages[0][x, y]
    out.bound(x, 0, 16).bound(y, 0, 6)
    for s in stages:
        if schedule in ("root", "vectorized", "parallel rows"):
            s.compute_root()
        else:
            s.compute_at(out, y)
        if schedule == "vectorized":
            s.vectorize(x, 8)
        if schedule == "parallel rows":
            s.parallel(y)
    if schedule == "per row, parallel":
        out.parallel(y)
    Y, X = np.mgrid[0:6, 0:16]
    return out, refs[-1](X, Y).astype(np.int32) - refs[0](X, Y)


@pytest.mark.parametrize("schedule", ["root", "per row", "per row, parallel", "vectorized", "parallel rows"])
def test_freed_stack_slots_are_reused_and_live_storage_is_not(tmp_path, schedule):
    """As Halide's code generator: the stack slot of storage nothing reads any more holds the next
    allocation of its type that fits (so a long pipeline needs a few slots, not one per stage);
    storage still live (three stages, and stage 0 to the end) keeps its own: all values right."""
    tag = "reuse_" + schedule.replace(" ", "_").replace(",", "")
    out, want = _stage_chain(tag, schedule)
    np.testing.assert_array_equal(np.asarray(out.realize([16, 6])), want)
    assert not _mallocs(out, tmp_path)
    # a slot per stage was 9 int32 slots; at most 5 are live at once (stage 0, the stage being
    # computed and the three it may read), and the 17-wide slots of stages 0 to 5 hold 16-wide ones
    slots = re.findall(r"= alloca \[(\d+) x (i\d+)\]", (tmp_path / "pipeline.ll").read_text())
    assert sum(t == "i32" for _, t in slots) == 5 and sum(t == "i16" for _, t in slots) == 1, slots
