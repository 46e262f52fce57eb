"""A user's pipeline for the tuning tests: importable by name in a fresh process, as
`pyhalide tune tuning_pipelines:small_blur` needs."""

import numpy as np

import pyhalide as hl


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
