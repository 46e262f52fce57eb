"""lowering/constant_stack_indices.py: indices into stack storage that the enclosing lets make
constant are written as constants (so LLVM keeps the storage in registers), and nothing else
changes what is computed."""

from __future__ import annotations

import re

import numpy as np
import pytest

import pyhalide as hl


def _blur(img: np.ndarray, rows: int = 8):
    """A 3x3 box blur scheduled as Halide's Adams2019 schedules it: blur_x per 16-wide vector of
    blur_y, `rows + 2` rows on the stack, read by `rows` unrolled rows of blur_y."""
    x, y, xi, yi, yii = hl.Var("x"), hl.Var("y"), hl.Var("xi"), hl.Var("yi"), hl.Var("yii")
    inp = hl.Buffer(img, "csi_input")
    blur_x, blur_y = hl.Func("csi_blur_x"), hl.Func("csi_blur_y")
    blur_x[x, y] = (inp[x, y] + inp[x + 1, y] + inp[x + 2, y]) / 3
    blur_y[x, y] = (blur_x[x, y] + blur_x[x, y + 1] + blur_x[x, y + 2]) / 3
    h = img.shape[0] - 2
    shift = hl.TailStrategy.ShiftInwards
    blur_y.split(y, y, yi, (h + 1) // 2, shift).split(x, x, xi, 16, shift).split(yi, yi, yii, rows, shift)
    blur_y.unroll(yii).vectorize(xi).reorder(xi, yii, x, yi, y).parallel(y)
    blur_x.store_in(hl.MemoryType.Stack).split(x, x, xi, 16, shift).unroll(y).vectorize(xi)
    blur_x.compute_at(blur_y, x).reorder(xi, x, y)
    return blur_y


def _reference(img: np.ndarray) -> np.ndarray:
    bx = ((img[:, :-2] + img[:, 1:-1] + img[:, 2:]) // 3).astype(np.uint16)
    return ((bx[:-2] + bx[1:-1] + bx[2:]) // 3).astype(np.uint16)


@pytest.mark.parametrize("shape", [(34, 48), (37, 53), (50, 21)])
def test_register_blocked_blur_is_exact(shape):
    rng = np.random.default_rng(sum(shape))
    img = rng.integers(0, 1 << 14, size=shape, dtype=np.uint16)
    out = _blur(img).realize([shape[1] - 2, shape[0] - 2])
    np.testing.assert_array_equal(np.asarray(out), _reference(img))


def test_stack_rows_are_read_at_constant_indices(tmp_path):
    """Every access of blur_x (before the pass: `(csi_blur_y.s0.y - csi_blur_x.y.min) * 16`
    for the reads) has a constant index, so no row of it goes through memory."""
    img = np.zeros((34, 48), np.uint16)
    path = tmp_path / "blur.stmt"
    _blur(img).compile_to_lowered_stmt(str(path), [])
    text = path.read_text()
    accesses = re.findall(r"csi_blur_x(?:\$\d+)?\[(ramp\([^\]]*\))\]", text)  # $n: a renamed copy
    assert len(accesses) >= 2 * (10 + 3 * 8)  # the stores and reads of the steady state and the tail
    assert all(re.fullmatch(r"ramp\(\d+, 1, 16\)", a) for a in accesses), [a for a in accesses if "." in a][:3]


def test_an_index_the_lets_leave_variable_is_kept():
    """A stack buffer indexed by a serial loop's variable: nothing to resolve, still right."""
    x, r = hl.Var("x"), hl.RDom([hl.Range(0, 8)], name="csi_r")
    table, out = hl.Func("csi_table"), hl.Func("csi_out")
    table[x] = x * x
    out[x] = 0
    out[x] += table[(x + r.x) % 8]
    table.compute_at(out, x).store_in(hl.MemoryType.Stack)
    got = np.asarray(out.realize([20]))
    expected = [sum(((i + k) % 8) ** 2 for k in range(8)) for i in range(20)]
    assert list(got) == expected
