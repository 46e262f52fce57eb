"""Halide's Python API as its tutorials and tests use it: printed forms, implicit Vars, Buffers
as Python sequences. Where the real Halide is installed, the two print the same."""

from __future__ import annotations

import numpy as np
import pytest

import pyhalide as hl


def _printed(lib):
    x = lib.Var("x")
    f = lib.Func("f")
    f[x] = x * 2
    b = f.realize([3])
    return [repr(b), repr(x), str(x), repr(f), repr(lib.Int(32)), str(lib.UInt(8)),
            repr(lib.Expr(3) + x), str(lib.Expr(3) + x), list(b)]


def test_reprs_and_iteration_are_halides():
    assert _printed(hl) == ["<halide.Buffer of type int32 shape:[[0,3,1]]>", "<halide.Var 'x'>", "x",
                            "<halide.Func 'f'>", "<halide.Type int32>", "uint8",
                            "<halide.Expr of type int32: (3 + x)>", "<halide.Expr of type int32: (3 + x)>", [0, 2, 4]]
    with pytest.raises(IndexError, match=r"coordinate 5 is outside dimension 0"):
        hl.Buffer(np.arange(3, dtype=np.int32))[5]


def test_the_real_halide_prints_the_same():
    real = pytest.importorskip("halide", reason="the real Halide (pip install halide) is the second oracle")
    assert _printed(hl) == _printed(real)


def test_implicit_vars_are_vars_named_as_halides():
    assert [v.name() for v in (hl._0, hl._9)] == ["_0", "_9"]
    f = hl.Func("implicit_named")
    f[hl._0] = hl._0 * 3
    assert np.asarray(f.realize([3])).tolist() == [0, 3, 6]
