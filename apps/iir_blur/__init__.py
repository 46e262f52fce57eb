"""First-order recursive (IIR) blur of an RGB image, as in Halide's iir_blur app.

The algorithm, on a float32 RGB image (planar: Halide [x, y, c]) of width W and height H, with
the filter's input weight a = ALPHA:
  down:  b[x, 0]     = in[x, 0]
         b[x, y]     = (1 - a) b[x, y - 1] + a in[x, y]      y = 1 .. H - 1   (a scan: RDom update)
  up:    b[x, y]     = (1 - a) b[x, y + 1] + a b[x, y]       y = H - 2 .. 0   (the same RDom, flipped)
  then   t[x, y]     = b[y, x]                               (a transpose)
The pass runs twice: first over the columns of the input, then over the columns of its transpose
(the rows of the original), and the second transpose puts the image back the right way round.
Each pass is a causal then an anti-causal exponential smoothing: a blur with no edge artefacts
and a cost independent of its width.
"""

from __future__ import annotations

import numpy as np

from apps.common import App, Built, planar_float_rgb

ALPHA = 0.5  # the input's weight in each step, as Halide's filter.cpp calls the generator with
KEEP = float(np.float32(1) - np.float32(ALPHA))  # the previous output's weight, 1 - ALPHA


def _blur_columns_transposed(hl, src, height, axis, out_name, x, y, c):
    """One pass: src blurred down then up each column (y, over `height` rows), then transposed.
    Returns (the blur Func, its transpose, the RDom of the scans)."""
    a, keep = hl.f32(ALPHA), hl.f32(KEEP)
    blur, transposed = hl.Func(f"blur_{axis}"), hl.Func(out_name)
    r = hl.RDom([hl.Range(1, height - 1)], name=f"r{axis}")
    blur[x, y, c] = hl.undef(hl.Float(32))
    blur[x, 0, c] = src[x, 0, c]
    blur[x, r.x, c] = keep * blur[x, r.x - 1, c] + a * src[x, r.x, c]
    back = height - 1 - r.x  # H - 2 down to 0
    blur[x, back, c] = keep * blur[x, back + 1, c] + a * blur[x, back, c]
    transposed[x, y, c] = blur[y, x, c]
    return blur, transposed, r


class IirBlur(App):
    name = "iir_blur"
    description = f"first-order IIR blur (alpha {ALPHA}), float32 RGB (Halide's iir_blur app)"
    # Bit-exact: the reference does the same float32 operations in the same order. With ALPHA = 0.5
    # both products are exact halvings, so neither a fused multiply-add nor Halide's rewrite of
    # 0.5 a + 0.5 b into (a + b) * 0.5 changes a bit (another alpha would need a tolerance).
    exact = True

    # Halide's app: 1536 wide, 2560 high. The small size is not a multiple of the vectors or
    # the 64-row strips in either dimension, so the tails are exercised.
    image_sizes = {"small": (70, 100), "default": (2560, 1536)}

    def inputs_from_image(self, img):
        return {"input": planar_float_rgb(img)}

    def build(self, hl, inputs):
        img = inputs["input"]
        channels, height, width = img.shape
        x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
        inp = hl.Buffer(img, "input")
        # the columns of the input, then the columns of the transpose (the rows of the input)
        blur_y, transpose_y, ry = _blur_columns_transposed(hl, inp, height, "y", "transpose_y", x, y, c)
        blur_x, output, rx = _blur_columns_transposed(hl, transpose_y, width, "x", "output", x, y, c)
        funcs = {"blur_y": blur_y, "transpose_y": transpose_y, "blur_x": blur_x, "output": output}
        return Built(output, [width, height, channels], hl.Float(32), funcs,
                     {"x": x, "y": y, "c": c, "ry": ry, "rx": rx})

    def schedule(self, hl, built):
        """Halide's CPU schedule, the same for both passes. Each transpose is computed at root in
        tiles of vec x 4 vec pixels (vec = 16 floats on AVX-512), each tile as four vec x vec
        blocks written as 2-D vectors (a register transpose); its strips of 4 vec rows, fused
        with the channels, are the parallel loop. The blur is computed per strip: the 4 vec
        columns that the strip's rows are, over the whole height, both scans with x innermost
        and vectorised, so each step of a scan is four vector multiply-adds on a row of the
        strip just written (in cache). The first row's copy is left unscheduled, as Halide's."""
        x, y, c = built.vars["x"], built.vars["y"], built.vars["c"]
        f = built.funcs
        vec = hl.get_host_target().natural_vector_size(hl.Float(32))
        for blur, transposed, r in ((f["blur_y"], f["transpose_y"], built.vars["ry"]),
                                    (f["blur_x"], f["output"], built.vars["rx"])):
            xo, yo, yi, t = hl.Var("xo"), hl.Var("yo"), hl.Var("yi"), hl.Var("t")
            transposed.compute_root().tile(x, y, xo, yo, x, y, vec, 4 * vec)
            transposed.split(y, y, yi, vec).vectorize(yi).vectorize(x).fuse(yo, c, t).parallel(t)
            blur.compute_at(transposed, t)
            blur.update(0).unscheduled()
            blur.update(1).reorder(x, r.x).vectorize(x)
            blur.update(2).reorder(x, r.x).vectorize(x)

    def reference(self, inputs):
        img = inputs["input"]  # numpy (c, y, x)

        def columns(a):
            """Scan down then up axis 1 of a (c, rows, cols) array, one row of all columns at a
            time, in float32 and in the pipeline's order of operations."""
            a = np.ascontiguousarray(a)
            keep, w = np.float32(KEEP), np.float32(ALPHA)
            out = np.empty_like(a)
            out[:, 0] = a[:, 0]
            for i in range(1, a.shape[1]):
                out[:, i] = keep * out[:, i - 1] + w * a[:, i]
            for i in range(a.shape[1] - 2, -1, -1):
                out[:, i] = keep * out[:, i + 1] + w * out[:, i]
            return out

        by = columns(img)  # down the columns of the picture
        bx = columns(by.transpose(0, 2, 1))  # down the columns of the transpose: along x
        return np.ascontiguousarray(bx.transpose(0, 2, 1))

    def to_image(self, result):
        return np.clip(result.transpose(1, 2, 0) * 255 + 0.5, 0, 255).astype(np.uint8)


APP = IirBlur()
