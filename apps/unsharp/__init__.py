"""Unsharp mask of an RGB image, as in Halide's unsharp app.

The algorithm, on a float32 RGB image in [0, 1] (planar: Halide [x, y, c]):
  gray    = 0.299 R + 0.587 G + 0.114 B                  (edges repeated)
  blur    = 7-tap Gaussian (sigma 1.5, weights summing to 1) of gray, in x then in y
  sharpen = 2 gray - blur                                 (gray plus its high frequencies)
  ratio   = sharpen / max(gray, 1e-4)                     (finite where the picture is black)
  output  = clamp(input * ratio, 0, 1)                    (each channel scaled alike: no colour shift)
"""

from __future__ import annotations

import math

import numpy as np

from apps.common import App, Built, planar_float_rgb

SIGMA = 1.5
RADIUS = 3  # 7 taps
GRAY_WEIGHTS = (0.299, 0.587, 0.114)
EPS = 1e-4  # keeps ratio finite where the picture is black


def gaussian_taps(sigma=SIGMA, radius=RADIUS) -> list[float]:
    """The kernel's weights for offsets 0..radius (it is symmetric), normalised to sum to 1 and
    rounded to float32, so that the pipeline and the reference use the same numbers."""
    w = [math.exp(-(i * i) / (2 * sigma * sigma)) for i in range(radius + 1)]
    total = w[0] + 2 * sum(w[1:])
    return [float(np.float32(v / total)) for v in w]


class Unsharp(App):
    name = "unsharp"
    description = "unsharp mask, float32 RGB (Halide's unsharp app)"
    exact = False  # Halide contracts multiply-adds; pyhalide and numpy round alike
    rtol, atol = 1e-5, 1e-5

    image_sizes = {"small": (64, 96), "default": (1536, 2560)}

    def inputs_from_image(self, img):
        return {"input": planar_float_rgb(img)}

    def build(self, hl, inputs):
        img = inputs["input"]
        x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
        inp = hl.Buffer(img, "input")
        clamped = hl.BoundaryConditions.repeat_edge(inp)
        k = [hl.f32(v) for v in gaussian_taps()]
        wr, wg, wb = (hl.f32(v) for v in GRAY_WEIGHTS)

        gray, blur_x, blur_y = hl.Func("gray"), hl.Func("blur_x"), hl.Func("blur_y")
        sharpen, ratio, output = hl.Func("sharpen"), hl.Func("ratio"), hl.Func("output")
        gray[x, y] = wr * clamped[x, y, 0] + wg * clamped[x, y, 1] + wb * clamped[x, y, 2]
        bx = k[0] * gray[x, y]
        for i in range(1, RADIUS + 1):
            bx = bx + k[i] * (gray[x - i, y] + gray[x + i, y])
        blur_x[x, y] = bx
        by = k[0] * blur_x[x, y]
        for i in range(1, RADIUS + 1):
            by = by + k[i] * (blur_x[x, y - i] + blur_x[x, y + i])
        blur_y[x, y] = by
        sharpen[x, y] = 2 * gray[x, y] - blur_y[x, y]
        ratio[x, y] = sharpen[x, y] / hl.max(gray[x, y], hl.f32(EPS))
        output[x, y, c] = hl.clamp(ratio[x, y] * inp[x, y, c], hl.f32(0), hl.f32(1))

        channels, h, w = img.shape
        funcs = {"gray": gray, "blur_x": blur_x, "blur_y": blur_y, "sharpen": sharpen,
                 "ratio": ratio, "output": output}
        return Built(output, [w, h, channels], hl.Float(32), funcs, {"x": x, "y": y, "c": c})

    def schedule(self, hl, built):
        """Strips of 32 rows in parallel; within a strip, gray and blur_x are line buffers
        (stored per strip, one new row computed per output row: a sliding window), blur_y,
        sharpen and ratio are computed one row at a time, and the three channels of the output
        are written from each 16-wide vector of ratio."""
        x, y, c = built.vars["x"], built.vars["y"], built.vars["c"]
        f = built.funcs
        yo, yi = hl.Var("yo"), hl.Var("yi")
        out = f["output"]
        out.bound(c, 0, 3).reorder(c, x, y).unroll(c)
        out.split(y, yo, yi, 32).parallel(yo).vectorize(x, 16)
        for name in ("gray", "blur_x"):
            f[name].store_at(out, yo).compute_at(out, yi).vectorize(x, 16)
        f["ratio"].compute_at(out, yi).vectorize(x, 16)

    def gpu_schedule(self, hl, built):
        """32x8 output tiles, a thread per pixel writing its three channels; per tile, gray
        (38x14 with the blur's halo) and blur_x (32x14) computed in shared memory by the
        block's threads, each before a barrier; blur_y, sharpen and ratio inlined into the
        output (each pixel's 7 vertical taps read from shared memory)."""
        x, y, c = built.vars["x"], built.vars["y"], built.vars["c"]
        f = built.funcs
        xo, yo, xi, yi = hl.Var("xo"), hl.Var("yo"), hl.Var("xi"), hl.Var("yi")
        out = f["output"]
        out.bound(c, 0, 3).reorder(c, x, y).unroll(c)
        out.gpu_tile(x, y, xo, yo, xi, yi, 32, 8, hl.TailStrategy.GuardWithIf)
        for name in ("gray", "blur_x"):
            f[name].compute_at(out, xo).gpu_threads(x, y)

    def reference(self, inputs):
        img = inputs["input"]
        k = [np.float32(v) for v in gaussian_taps()]
        wr, wg, wb = (np.float32(v) for v in GRAY_WEIGHTS)
        gray = wr * img[0] + wg * img[1] + wb * img[2]
        h, w = gray.shape
        r = RADIUS
        g = np.pad(gray, r, mode="edge")  # the gray of the edge-repeated image
        bx = k[0] * g[:, r : r + w]
        for i in range(1, r + 1):
            bx = bx + k[i] * (g[:, r - i : r - i + w] + g[:, r + i : r + i + w])
        by = k[0] * bx[r : r + h]
        for i in range(1, r + 1):
            by = by + k[i] * (bx[r - i : r - i + h] + bx[r + i : r + i + h])
        sharpen = np.float32(2) * gray - by
        ratio = sharpen / np.maximum(gray, np.float32(EPS))
        return np.clip(ratio[None] * img, np.float32(0), np.float32(1))

    def to_image(self, result):
        return np.clip(result.transpose(1, 2, 0) * 255 + 0.5, 0, 255).astype(np.uint8)


APP = Unsharp()
