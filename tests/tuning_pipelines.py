"""A user's pipeline for the tuning tests: importable by name in a fresh process, as
`pyhalide tune tuning_pipelines:small_blur` needs."""

import numpy as np

import pyhalide as hl
from autoscheduler.jit import autotuned


def small_blur(height=48, width=64):
    data = np.random.default_rng(5).integers(0, 1000, (height, width), dtype=np.uint16)
    inp = hl.BoundaryConditions.repeat_edge(hl.Buffer(data, "img"))
    x, y = hl.Var("x"), hl.Var("y")
    bx, by = hl.Func("bx"), hl.Func("by")
    bx[x, y] = (inp[x - 1, y] + inp[x, y] + inp[x + 1, y]) // 3
    by[x, y] = (bx[x, y - 1] + bx[x, y] + bx[x, y + 1]) // 3
    by.set_estimates([(0, width), (0, height)])
    return by


def wider_blur():
    """The same algorithm for another shape."""
    return small_blur(40, 96)


@autotuned
def jit_blur(inp):
    """A 3x3 box blur of a 2-D image of any integer type."""
    x, y = hl.Var("x"), hl.Var("y")
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    bx, by = hl.Func("jbx"), hl.Func("jby")
    bx[x, y] = (clamped[x - 1, y] + clamped[x, y] + clamped[x + 1, y]) // 3
    by[x, y] = (bx[x, y - 1] + bx[x, y] + bx[x, y + 1]) // 3
    return by


@autotuned(budget_s=120, trials=4, threads=1)
def jit_blur_tuned(inp):
    return jit_blur.build_fn(inp)


def blur_reference(a):
    p = np.pad(a, 1, mode="edge").astype(np.int64)
    bx = ((p[:, :-2] + p[:, 1:-1] + p[:, 2:]) // 3).astype(a.dtype).astype(np.int64)
    return ((bx[:-2] + bx[1:-1] + bx[2:]) // 3).astype(a.dtype)
