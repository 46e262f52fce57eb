"""A first pipeline: the 3x3 separable box blur from Halide's blur app, on a 2560x1536 uint16 image.

    python -m pyhalide.demo

Prints pyhalide's time beside numpy's, after checking both give the same pixels.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import pyhalide as hl


def blur(input_buffer):
    x, y = hl.Var("x"), hl.Var("y")
    clamped = hl.BoundaryConditions.repeat_edge(input_buffer)
    blur_x, blur_y = hl.Func("blur_x"), hl.Func("blur_y")
    blur_x[x, y] = (clamped[x - 1, y] + clamped[x, y] + clamped[x + 1, y]) / 3
    blur_y[x, y] = (blur_x[x, y - 1] + blur_x[x, y] + blur_x[x, y + 1]) / 3
    return blur_x, blur_y


def blur_numpy(img):
    p = np.pad(img, 1, mode="edge")
    bx = ((p[:, :-2] + p[:, 1:-1] + p[:, 2:]) // 3).astype(img.dtype)
    return ((bx[:-2] + bx[1:-1] + bx[2:]) // 3).astype(img.dtype)


def median_ms(fn, repeats=9):
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main():
    w, h = 2560, 1536
    img = np.random.default_rng(0).integers(0, 65536, (h, w), dtype=np.uint16)
    buf = hl.Buffer(img, name="input")
    expected = blur_numpy(img)
    blur_x, blur_y = blur(buf)

    t0 = time.perf_counter()
    blur_y.compile_jit()
    compile_s = time.perf_counter() - t0
    assert np.array_equal(np.asarray(blur_y.realize([w, h])), expected)
    t_inline = median_ms(lambda: blur_y.realize([w, h]))

    blur_x.compute_root()
    assert np.array_equal(np.asarray(blur_y.realize([w, h])), expected)
    t_root = median_ms(lambda: blur_y.realize([w, h]))
    t_numpy = median_ms(lambda: blur_numpy(img))

    print(f"3x3 blur, {w}x{h} uint16 (median of 9; compile {compile_s * 1e3:.0f} ms)")
    print(f"  numpy                        {t_numpy:8.2f} ms")
    print(f"  pyhalide, default schedule   {t_inline:8.2f} ms   {t_numpy / t_inline:5.2f}x numpy")
    print(f"  pyhalide, blur_x compute_root{t_root:8.2f} ms   {t_numpy / t_root:5.2f}x numpy")


if __name__ == "__main__":
    main()
