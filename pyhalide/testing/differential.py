"""Differential schedule fuzzing against the real Halide: one algorithm and one random schedule,
built with both libraries from the same code, must give the same output.

The corpus pipelines are written once against a module argument `hl` (pyhalide or halide), so
what runs on both is the very program a Halide user writes. A schedule is data: a list of
`Step`s naming Funcs, stages and loops by their names, drawn by Hypothesis the way Halide's
fuzz_schedule test draws them (placements at any loop of a consumer, splits with every tail
strategy, fuses, reorders, vectorize, unroll and parallel, of pure and update stages, on Vars
and RVars), without asking pyhalide what it accepts: Halide decides what is legal. Applying a
Step to either library resolves the names to that library's Vars, RVars and Funcs.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

# Every tail strategy of Halide 21.
TAILS = ("Auto", "RoundUp", "GuardWithIf", "ShiftInwards", "Predicate", "PredicateLoads",
         "PredicateStores", "RoundUpAndBlend", "ShiftInwardsAndBlend")
MAX_SIZE = 12  # the largest output extent drawn; inputs have room for MAX_SIZE plus margins


@dataclass
class Built:
    """One library's copy of a corpus pipeline."""

    outputs: list
    funcs: dict  # name -> Func a schedule may touch (producers first, the outputs last)
    dims: dict  # (func, stage) -> loop names, innermost first, before any scheduling
    rvars: dict  # RVar name -> the RVar object
    dimensions: int  # of the outputs
    readers: dict = field(default_factory=dict)  # Func -> the Funcs that read it

    def var(self, hl, name: str, rvar: bool):
        if name in self.rvars:
            return self.rvars[name]
        return hl.RVar(name) if rvar else hl.Var(name)


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng(sum(map(ord, name)))


@functools.cache
def _image(name: str, shape, dtype=np.int32, hi=50) -> np.ndarray:
    """A seeded input, kept alive here: Halide's Buffer shares the array without holding it."""
    return _rng(name).integers(0, hi, shape).astype(dtype)


def _pointwise(hl) -> Built:
    """A chain that reads its input directly: what a schedule computes past the output must
    stay inside the input (Halide grows regions only as far as the schedule needs)."""
    x, y = hl.Var("x"), hl.Var("y")
    inp = hl.Buffer(_image("pw", (MAX_SIZE + 4, MAX_SIZE + 4)), "pw_in")
    f, g, out = hl.Func("pw_f"), hl.Func("pw_g"), hl.Func("pw_out")
    f[x, y] = inp[x, y] * 3 + 1
    g[x, y] = f[x, y] * f[x, y] - x
    out[x, y] = g[x, y] + f[x, y] * y
    return Built([out], {"pw_f": f, "pw_g": g, "pw_out": out},
                 {(n, 0): ["x", "y"] for n in ("pw_f", "pw_g", "pw_out")}, {}, 2,
                 {"pw_f": ["pw_g", "pw_out"], "pw_g": ["pw_out"]})


def _blur(hl) -> Built:
    """A 3x3 box blur in two passes over the input plus a margin of 2."""
    x, y = hl.Var("x"), hl.Var("y")
    inp = hl.Buffer(_image("blur", (MAX_SIZE + 8, MAX_SIZE + 8)), "blur_in")
    bx, by = hl.Func("blur_x"), hl.Func("blur_y")
    bx[x, y] = inp[x, y + 1] + inp[x + 1, y + 1] + inp[x + 2, y + 1]
    by[x, y] = (bx[x + 1, y] + bx[x + 1, y + 1] + bx[x + 1, y + 2]) / 3
    return Built([by], {"blur_x": bx, "blur_y": by}, {("blur_x", 0): ["x", "y"], ("blur_y", 0): ["x", "y"]},
                 {}, 2, {"blur_x": ["blur_y"]})


def _histogram(hl) -> Built:
    """hist[input / 32] += 1 over a fixed image, then a pointwise stage over the bins."""
    x, y = hl.Var("x"), hl.Var("y")
    img = hl.Buffer(_image("hist", (10, 12), np.uint8, 256), "hist_in")
    r = hl.RDom([hl.Range(0, 12), hl.Range(0, 10)], "r")
    hist, out = hl.Func("hist"), hl.Func("hist_out")
    hist[x] = 0
    hist[hl.cast(hl.Int(32), img[r.x, r.y]) / 32] += 1
    out[x, y] = hist[x % 8] * 2 + y
    return Built([out], {"hist": hist, "hist_out": out},
                 {("hist", 0): ["x"], ("hist", 1): ["r$x", "r$y"], ("hist_out", 0): ["x", "y"]},
                 {"r$x": r.x, "r$y": r.y}, 2, {"hist": ["hist_out"]})


def _prefix_sum(hl) -> Built:
    """A running sum along x (an update whose RVar must stay serial), read by a stencil."""
    x, y = hl.Var("x"), hl.Var("y")
    inp = hl.Buffer(_image("scan", (MAX_SIZE + 4, MAX_SIZE + 4)), "scan_in")
    s, out = hl.Func("scan"), hl.Func("scan_out")
    r = hl.RDom([hl.Range(1, MAX_SIZE + 2)], "s")
    s[x, y] = inp[x, y]
    s[r.x, y] = s[r.x - 1, y] + s[r.x, y]
    out[x, y] = s[x + 1, y] - s[x, y]
    return Built([out], {"scan": s, "scan_out": out},
                 {("scan", 0): ["x", "y"], ("scan", 1): ["s$x", "y"], ("scan_out", 0): ["x", "y"]},
                 {"s$x": r.x}, 2, {"scan": ["scan_out"]})


def _matmul(hl) -> Built:
    """C(x, y) = sum over k of A(k, y) * B(x, k), then a pointwise stage."""
    x, y = hl.Var("x"), hl.Var("y")
    a = hl.Buffer(_image("mma", (MAX_SIZE + 4, 7)), "mm_a")  # a[y][k]: A(k, y)
    b = hl.Buffer(_image("mmb", (7, MAX_SIZE + 4)), "mm_b")
    k = hl.RDom([hl.Range(0, 7)], "k")
    c, out = hl.Func("mm"), hl.Func("mm_out")
    c[x, y] = 0
    c[x, y] += a[k.x, y] * b[x, k.x]
    out[x, y] = c[x, y] + 1
    return Built([out], {"mm": c, "mm_out": out},
                 {("mm", 0): ["x", "y"], ("mm", 1): ["k$x", "x", "y"], ("mm_out", 0): ["x", "y"]},
                 {"k$x": k.x}, 2, {"mm": ["mm_out"]})


def _resample(hl) -> Built:
    """A downsample and an upsample: x / 2 and x % 2 of loop variables."""
    x, y = hl.Var("x"), hl.Var("y")
    inp = hl.Buffer(_image("rs", (MAX_SIZE + 4, 2 * MAX_SIZE + 8)), "rs_in")
    down, up = hl.Func("down"), hl.Func("up")
    down[x, y] = (inp[2 * x, y] + inp[2 * x + 1, y]) / 2
    up[x, y] = hl.select(x % 2 == 0, down[x / 2, y], down[x / 2 + 1, y] * 3) + x / 2
    return Built([up], {"down": down, "up": up}, {("down", 0): ["x", "y"], ("up", 0): ["x", "y"]}, {}, 2,
                 {"down": ["up"]})


def _two_outputs(hl) -> Built:
    """Two outputs sharing a producer."""
    x, y = hl.Var("x"), hl.Var("y")
    inp = hl.Buffer(_image("two", (MAX_SIZE + 4, MAX_SIZE + 4)), "two_in")
    p, o1, o2 = hl.Func("two_p"), hl.Func("two_a"), hl.Func("two_b")
    p[x, y] = inp[x, y] + inp[x + 1, y]
    o1[x, y] = p[x, y] * 2
    o2[x, y] = p[x, y + 1] - p[x, y]
    return Built([o1, o2], {"two_p": p, "two_a": o1, "two_b": o2},
                 {(n, 0): ["x", "y"] for n in ("two_p", "two_a", "two_b")}, {}, 2,
                 {"two_p": ["two_a", "two_b"]})


def _update_reads(hl) -> Built:
    """An output whose pure definition and update both read a producer (compute_at(out, x)
    then names a loop of each stage that uses it)."""
    x, y = hl.Var("x"), hl.Var("y")
    inp = hl.Buffer(_image("upd", (MAX_SIZE + 4, MAX_SIZE + 4)), "upd_in")
    g, out = hl.Func("upd_g"), hl.Func("upd_out")
    g[x, y] = inp[x, y] * 2 + y
    out[x, y] = g[x, y] + 1
    out[x, y] += g[x + 1, y] * 3
    return Built([out], {"upd_g": g, "upd_out": out},
                 {("upd_g", 0): ["x", "y"], ("upd_out", 0): ["x", "y"], ("upd_out", 1): ["x", "y"]},
                 {}, 2, {"upd_g": ["upd_out"]})


def _scatter(hl) -> Built:
    """hl.scatter/gather: an update that rotates three neighbours along x at once (an RDom over
    where they start), each also offset, read by a stencil."""
    x, y = hl.Var("x"), hl.Var("y")
    inp = hl.Buffer(_image("sc", (MAX_SIZE + 4, MAX_SIZE + 4)), "sc_in")
    f, out = hl.Func("sc_f"), hl.Func("sc_out")
    q = hl.RDom([hl.Range(0, 5)], "q")
    f[x, y] = inp[x, y]
    f[hl.scatter([q.x, q.x + 1, q.x + 2]), y] = f[hl.gather([q.x + 1, q.x + 2, q.x]), y] + hl.gather([1, 2, 3])
    out[x, y] = f[x, y] * 2 + f[x + 1, y]
    return Built([out], {"sc_f": f, "sc_out": out},
                 {("sc_f", 0): ["x", "y"], ("sc_f", 1): ["q$x", "y"], ("sc_out", 0): ["x", "y"]},
                 {"q$x": q.x}, 2, {"sc_f": ["sc_out"]})


def _argmin(hl) -> Built:
    """Where each 3x4 window's minimum is (a Tuple reduction, ties everywhere: the last of them
    wins), read by a pointwise stage. Halide proves it associative, so rfactor and RVar reorders
    are drawn on it; which of equal minima wins then depends on the order both run."""
    x, y = hl.Var("x"), hl.Var("y")
    inp = hl.Buffer(_image("am", (MAX_SIZE + 8, MAX_SIZE + 8), hi=4), "am_in")
    r = hl.RDom([hl.Range(0, 3), hl.Range(0, 4)], "a")
    am, out = hl.Func("am"), hl.Func("am_out")
    am[x, y] = hl.Tuple([hl.i32(99), hl.i32(-1)])
    best, new = am[x, y][0], inp[x + r.x, y + r.y]
    am[x, y] = hl.Tuple([hl.min(best, new), hl.select(best < new, am[x, y][1], r.x + 3 * r.y)])
    out[x, y] = am[x, y][0] * 16 + am[x, y][1]
    return Built([out], {"am": am, "am_out": out},
                 {("am", 0): ["x", "y"], ("am", 1): ["a$x", "a$y", "x", "y"], ("am_out", 0): ["x", "y"]},
                 {"a$x": r.x, "a$y": r.y}, 2, {"am": ["am_out"]})


def _narrow_types(hl) -> Built:
    """uint8 and int16 arithmetic mixed with Python numbers, as Halide's bindings type it (min of a
    uint8 and 3 is an int32, u8 ** 2 wraps in uint8), over a repeat_edge boundary condition."""
    x, y = hl.Var("x"), hl.Var("y")
    inp = hl.Buffer(_image("nt", (MAX_SIZE + 4, MAX_SIZE + 4), np.uint8, 256), "nt_in")
    edge = hl.BoundaryConditions.repeat_edge(inp)
    f, g, out = hl.Func("nt_f"), hl.Func("nt_g"), hl.Func("nt_out")
    f[x, y] = hl.absd(edge[x, y], edge[x + 1, y - 1]) + hl.u8(7)
    g[x, y] = hl.max(f[x, y], 3) * 2 - f[x, y - 1] ** 2 + hl.saturating_add(f[x, y], f[x - 1, y])
    out[x, y] = hl.cast(hl.Int(16), g[x, y] // 3) + hl.rounding_shift_right(f[x + 1, y], 1) - hl.min(y, 5)
    return Built([out], {"nt_f": f, "nt_g": g, "nt_out": out},
                 {(n, 0): ["x", "y"] for n in ("nt_f", "nt_g", "nt_out")}, {}, 2,
                 {"nt_f": ["nt_g", "nt_out"], "nt_g": ["nt_out"]})


PIPELINES: dict[str, Callable] = {
    "pointwise": _pointwise, "blur": _blur, "histogram": _histogram, "prefix_sum": _prefix_sum,
    "matmul": _matmul, "resample": _resample, "two_outputs": _two_outputs, "update_reads": _update_reads,
    "scatter": _scatter, "argmin": _argmin, "narrow_types": _narrow_types,
}


@dataclass(frozen=True)
class Step:
    """One scheduling call: func.<method>(*args) on stage `stage` (0 the pure definition, i the
    update i - 1). Args are ("loop", name, is_rvar), ("func", name), ("tail", name), ("memory", name) or plain
    values."""

    func: str
    stage: int
    method: str
    args: tuple = ()
    when: int = 0  # > 0: on the stage's specialization for `selector >= when`

    def text(self) -> str:
        def show(a):
            if isinstance(a, tuple) and a and a[0] in ("loop", "func", "tail", "memory"):
                return a[1]
            return repr(a)
        on = self.func if self.stage == 0 else f"{self.func}.update({self.stage - 1})"
        on += f".specialize(selector >= {self.when})" if self.when else ""
        return f"{on}.{self.method}({', '.join(show(a) for a in self.args)})"


@dataclass
class Schedule:
    steps: list = field(default_factory=list)
    sizes: list = field(default_factory=list)
    alone: str | None = None  # an intermediate realized on its own (its placement then means root)
    selector: int = 0  # the value of the Param that specializations test

    def text(self) -> str:
        what = f"{self.alone}.realize" if self.alone else "realize"
        return f"selector = {self.selector}\n" + "\n".join(s.text() for s in self.steps) + f"\n{what}({self.sizes})"


@functools.cache
def selector_param(hl):
    """The Int(32) Param `selector` of one library, which specializations test."""
    return hl.Param(hl.Int(32), "selector")


def apply(hl, built: Built, steps: list[Step], selector: int = 0) -> None:
    """Make the calls on one library's copy of the pipeline, with `selector` set to the value given."""
    sel = selector_param(hl)
    sel.set(selector)
    for s in steps:
        f = built.funcs[s.func]
        target = f if s.stage == 0 else f.update(s.stage - 1)
        if s.when:
            target = target.specialize(sel >= s.when)
        args = []
        for a in s.args:
            if isinstance(a, tuple) and a and a[0] == "loop":
                args.append(built.var(hl, a[1], a[2]))
            elif isinstance(a, tuple) and a and a[0] == "func":
                args.append(built.funcs[a[1]])
            elif isinstance(a, tuple) and a and a[0] == "tail":
                args.append(getattr(hl.TailStrategy, a[1]))
            elif isinstance(a, tuple) and a and a[0] == "memory":
                args.append(getattr(hl.MemoryType, a[1]))
            else:
                args.append(a)
        result = getattr(target, s.method)(*args)
        if s.method == "rfactor":  # later steps name the intermediate
            built.funcs[intermediate_name(s.func, s.when)] = result


def intermediate_name(func: str, when: int = 0) -> str:
    """The name steps give the intermediate of an rfactor of func (of its specialization)."""
    return f"{func}_intm" + (f"_when{when}" if when else "")


def realize(hl, built: Built, sizes: list[int], alone: str | None = None) -> list[np.ndarray]:
    """The outputs (or the one Func `alone`) over [0, size) in each dimension, as numpy arrays."""
    result = hl.Pipeline([built.funcs[alone]] if alone else built.outputs).realize(sizes)
    if not isinstance(result, list | tuple):
        result = [result]
    return [np.array(np.asarray(b)) for b in result]


@st.composite
def schedules(draw, name: str) -> Schedule:
    """A random schedule of pipeline `name`, as Halide's fuzz_schedule draws them: each Func
    inlined, at root, or computed (and stored) at a loop of a consumer; each stage's loops split,
    fused, reordered, vectorized, unrolled or parallelized at random."""
    import pyhalide

    built = PIPELINES[name](pyhalide)  # only for the structure: names of Funcs, stages, loops
    names = list(built.funcs)
    outputs = {n for n, f in built.funcs.items() if any(f is o for o in built.outputs)}
    loops: dict[tuple, list] = {}  # (func, stage) -> current loop names, innermost first
    rv: dict[tuple, set] = {}
    steps: list[Step] = []
    for (fn, stage), dims in built.dims.items():
        loops[(fn, stage)] = list(dims)
        rv[(fn, stage)] = {d for d in dims if d in built.rvars}
    for fn in names:
        for stage in sorted(s for f, s in loops if f == fn):
            for _ in range(draw(st.integers(0, 3))):
                step = draw(_loop_step(fn, stage, loops[(fn, stage)], rv[(fn, stage)]))
                if step is not None:
                    steps.append(step)
            if draw(st.integers(0, 3)) == 0:
                steps += draw(_specialization_steps(fn, stage, loops[(fn, stage)], rv[(fn, stage)]))
            reducing = [d for d in loops[(fn, stage)] if d in rv[(fn, stage)]]
            if stage > 0 and reducing and draw(st.integers(0, 3)) == 0:
                steps += draw(_rfactor_steps(fn, stage, reducing))
    for fn in names:
        if draw(st.integers(0, 3)) == 0:
            steps.append(draw(_region_step(fn, built.dims[(fn, 0)])))
    # placements after the loops exist (a compute_at names a loop of the consumer's schedule)
    for fn in reversed(names):
        if fn in outputs:
            continue
        kind = draw(st.sampled_from(["inline", "root", "at", "at"]))
        if kind == "root":
            steps.append(Step(fn, 0, "compute_root"))
        elif kind == "at":
            c = draw(st.sampled_from(sorted(built.readers[fn])))
            stage_loops = [lp for (f, s), lps in loops.items() if f == c for lp in lps]
            lp = draw(st.sampled_from(stage_loops))
            steps.append(Step(fn, 0, "compute_at", (("func", c), ("loop", lp, lp in _all_rvars(rv, c)))))
            if draw(st.booleans()):
                outer = [o for o in stage_loops if o != lp]
                if outer:
                    so = draw(st.sampled_from(outer))
                    steps.append(Step(fn, 0, "store_at", (("func", c), ("loop", so, so in _all_rvars(rv, c)))))
    sizes = [draw(st.integers(1, MAX_SIZE)) for _ in range(built.dimensions)]
    # Now and then an intermediate is realized on its own, whatever its placement says.
    alone = [fn for fn in names if fn not in outputs and built.funcs[fn].dimensions() == built.dimensions]
    pick = draw(st.sampled_from([None] * 5 + alone)) if alone else None
    return Schedule(steps, sizes, pick, draw(st.integers(0, 3)))


@st.composite
def _specialization_steps(draw, fn: str, stage: int, dims: list, rvars: set) -> list[Step]:
    """Loop directives of a specialization of the stage (for `selector >= when`: taken or not,
    as the drawn selector says), which starts as a copy of the stage's loops so far; of an
    update, now and then an rfactor of the specialization alone. The stage's own loops, later
    directives and placements go on as if there were none."""
    when = draw(st.integers(1, 2))
    dims, rvars = list(dims), set(rvars)
    steps = []
    for _ in range(draw(st.integers(1, 3))):
        step = draw(_loop_step(fn, stage, dims, rvars))
        if step is not None:
            steps.append(Step(step.func, step.stage, step.method, step.args, when))
    reducing = [d for d in dims if d in rvars]
    if stage > 0 and reducing and draw(st.booleans()):
        steps += draw(_rfactor_steps(fn, stage, reducing, when))
    return steps


@st.composite
def _rfactor_steps(draw, fn: str, stage: int, reducing: list, when: int = 0) -> list[Step]:
    """rfactor of one of the stage's reduction loops (of its specialization for `when`) into a
    new pure Var u (Halide decides whether the update is associative), then a placement and
    loop directives of the intermediate."""
    r = draw(st.sampled_from(reducing))
    intm = intermediate_name(fn, when)
    steps = [Step(fn, stage, "rfactor", (("loop", r, True), ("loop", "u", False)), when)]
    placement = draw(st.sampled_from(["default", "root", "at"]))
    if placement == "root":
        steps.append(Step(intm, 0, "compute_root"))
    elif placement == "at":
        steps.append(Step(intm, 0, "compute_at", (("func", fn), ("loop", draw(st.sampled_from(reducing)), True))))
    for method in draw(st.lists(st.sampled_from(["vectorize", "parallel", "unroll"]), max_size=2)):
        on = draw(st.sampled_from([0, 1]))
        args: tuple = (("loop", "u", False),)
        if method != "parallel":
            # (the intermediate's update rounds u up by default, and Halide 21 then reads past
            # the reduction's input without checking: its Stmt loads row r.y + 1 at the last
            # r.y. pyhalide refuses that read, so the update's splits here are guarded.)
            args += (2, ("tail", "GuardWithIf")) if on else (2,)
        steps.append(Step(intm, on, method, args))
    return steps


@st.composite
def _region_step(draw, fn: str, pure: list) -> Step:
    """A directive on the region a Func computes or the layout of its storage."""
    kind = draw(st.sampled_from(["align_bounds", "align_extent", "reorder_storage", "store_in"]))
    v = ("loop", draw(st.sampled_from(pure)), False)
    if kind == "align_bounds":
        modulus = draw(st.integers(1, 4))
        return Step(fn, 0, kind, (v, modulus, draw(st.integers(0, modulus - 1))))
    if kind == "align_extent":
        return Step(fn, 0, kind, (v, draw(st.integers(1, 4))))
    if kind == "reorder_storage":
        return Step(fn, 0, kind, tuple(("loop", d, False) for d in draw(st.permutations(pure))))
    return Step(fn, 0, kind, (("memory", draw(st.sampled_from(["Auto", "Heap", "Stack"]))),))


def _all_rvars(rv: dict, func: str) -> set:
    return set().union(*(v for (f, _), v in rv.items() if f == func))


@st.composite
def _loop_step(draw, fn: str, stage: int, dims: list, rvars: set):
    """One loop directive on a stage, updating `dims` (and `rvars`) as Halide would."""
    kind = draw(st.sampled_from(["split", "split", "fuse", "reorder", "vectorize", "unroll", "parallel"]))
    v = draw(st.sampled_from(dims))
    is_r = v in rvars

    def loop(n):
        return ("loop", n, n in rvars)

    if kind == "split":
        outer, inner = f"{v}o", f"{v}i"
        if outer in dims or inner in dims:
            return None
        factor = draw(st.integers(1, 8))
        tail = draw(st.sampled_from(TAILS))
        i = dims.index(v)
        dims[i: i + 1] = [inner, outer]
        if is_r:
            rvars |= {inner, outer}
        return Step(fn, stage, "split", (("loop", v, is_r), loop(outer), loop(inner), factor, ("tail", tail)))
    if kind == "fuse":
        i = dims.index(v)
        if i + 1 >= len(dims):
            return None
        w = dims[i + 1]
        fused = f"{v}{w}"
        step = Step(fn, stage, "fuse", (loop(v), loop(w), ("loop", fused, is_r or w in rvars)))
        if is_r or w in rvars:
            rvars.add(fused)
        dims[i: i + 2] = [fused]
        return step
    if kind == "reorder":
        order = draw(st.permutations(dims))
        dims[:] = list(order)
        return Step(fn, stage, "reorder", tuple(loop(d) for d in order))
    if kind == "vectorize":
        if draw(st.booleans()):
            return Step(fn, stage, "vectorize", (loop(v),))
        # (the inner loop of vectorize(x, n) has no name a later call could use)
        return Step(fn, stage, "vectorize", (loop(v), draw(st.sampled_from([2, 4, 8]))))
    if kind == "unroll":
        if draw(st.booleans()):
            return Step(fn, stage, "unroll", (loop(v),))
        return Step(fn, stage, "unroll", (loop(v), draw(st.integers(2, 4))))
    return Step(fn, stage, "parallel", (loop(v),))


def same_outputs(a: list, b: list) -> bool:
    """Equal outputs: the same shapes, types and values."""
    return len(a) == len(b) and all(x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y)
                                    for x, y in zip(a, b))


@functools.cache
def _halide_unscheduled(name: str, sizes: tuple, alone: str | None) -> list[np.ndarray]:
    import halide

    return realize(halide, PIPELINES[name](halide), list(sizes), alone)


def halide_outcome(name: str, steps: list, selector: int, sizes: list, alone: str | None) -> tuple:
    """Halide's side of one example, run in the oracle's process: ("ran", outputs, whether they
    are the unscheduled outputs) or ("refused", the first line of Halide's message, None)."""
    import halide

    theirs = PIPELINES[name](halide)
    try:
        apply(halide, theirs, steps, selector)
        want = realize(halide, theirs, sizes, alone)
    except Exception as e:  # noqa: BLE001 - whatever Halide refuses is not in the test
        return "refused", (str(e).splitlines()[0][:60] if str(e) else type(e).__name__), None
    return "ran", want, same_outputs(want, _halide_unscheduled(name, tuple(sizes), alone))


def _one_halide_thread() -> None:
    os.environ["HL_NUM_THREADS"] = "1"


class HalideOracle:
    """Runs Halide's side of each example in a worker process of its own, so that a schedule on
    which Halide's compiled code crashes is an outcome ("crashed"), not the end of the test run:
    seed 790 drew one (a Tuple-valued update's loop split GuardWithIf, its inner loop vectorized
    and split again: a segfault in Halide 21, where pyhalide computes the unscheduled result).
    The worker is started on first use and again after a crash, with one thread for Halide's
    runtime (its idle workers spin, and would take the cores pyhalide's side runs on)."""

    def __init__(self):
        self._pool = None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def run(self, name: str, sched) -> tuple:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_one_halide_thread)
        try:
            return self._pool.submit(halide_outcome, name, sched.steps, sched.selector, sched.sizes,
                                     sched.alone).result()
        except BrokenProcessPool:
            self._pool = None
            return "crashed", None, None
