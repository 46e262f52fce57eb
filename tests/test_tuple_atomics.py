"""atomic() on Tuple-valued updates, on the CPU (ports of the Tuple cases of Halide's
test/correctness/atomics.cpp): the stores of all the elements run under the update's lock, so
parallel iterations that meet at one point still read and write the whole Tuple as one. Each is
realized several times, so that a race would show, and checked against a serial numpy model and,
where it is installed, the real Halide."""

from __future__ import annotations

import numpy as np
import pytest

import pyhalide as hl

IMG, BINS = 10000, 7


def _hist(module, swap: bool, t):
    x = module.Var("x")
    r = module.RDom([(0, IMG)])
    im, hist = module.Func("im"), module.Func("hist")
    im[x] = (x * x) % BINS
    hist[x] = (module.cast(t, 0), module.cast(t, 0))
    at = module.Expr(im[r])
    if swap:  # the elements feed each other: only a lock makes the pair one update
        hist[at] = (hist[at][1] + module.cast(t, 1), hist[at][0] + module.cast(t, 2))
    else:
        hist[at] = (hist[at][0] + module.cast(t, 1), hist[at][1] + module.cast(t, 2))
    im.compute_root()
    hist.compute_root()
    hist.update().atomic(True).parallel(r)
    return hist


def _want(swap: bool, dtype):
    a, b = np.zeros(BINS, dtype), np.zeros(BINS, dtype)
    for i in range(IMG):
        k = (i * i) % BINS
        if swap:
            a[k], b[k] = b[k] + 1, a[k] + 2
        else:
            a[k], b[k] = a[k] + 1, b[k] + 2
    return a, b


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("type_name", ["Int", "UInt", "Float"])
def test_parallel_tuple_histograms(swap, type_name):
    t = getattr(hl, type_name)(32)
    hist = _hist(hl, swap, t)
    want = _want(swap, t.to_numpy())
    for _ in range(10):
        out = hist.realize([BINS])
        np.testing.assert_array_equal(np.asarray(out[0]), want[0])
        np.testing.assert_array_equal(np.asarray(out[1]), want[1])


def test_parallel_argmax():
    """atomics.cpp's test_tuple_reduction: (index, value) of the maximum, one winner."""
    x = hl.Var("x")
    r = hl.RDom([(0, IMG)])
    im = hl.Func("im")
    im[x] = hl.cast(hl.Int(32), 120.0 * hl.abs(hl.sin(hl.cast(hl.Float(32), x))))
    im[1234] = 125
    arg_max = hl.Func("arg_max")
    arg_max[()] = (0, im[0])
    old_index, old_max = arg_max[()][0], arg_max[()][1]
    arg_max[()] = (hl.select(old_max < im[r], r, old_index), hl.max(im[r], old_max))
    im.compute_root()
    arg_max.compute_root()
    arg_max.update().atomic(True).parallel(r)
    for _ in range(10):
        out = arg_max.realize()
        assert int(np.asarray(out[0])) == 1234 and int(np.asarray(out[1])) == 125


def test_tuple_atomics_match_the_real_halide():
    real = pytest.importorskip("halide")
    for swap in (False, True):
        mine = _hist(hl, swap, hl.Int(32)).realize([BINS])
        theirs = _hist(real, swap, real.Int(32)).realize([BINS])
        for k in range(2):
            np.testing.assert_array_equal(np.asarray(mine[k]), np.asarray(theirs[k]))
