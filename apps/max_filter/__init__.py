"""Max filter over a disc, as in Halide's max_filter app: each output pixel is the maximum of the
input over a disc of radius 26 around it (a grey-level dilation), on a float32 RGB image.

A disc is a set of columns: the column at horizontal offset dx spans dy in [-h(dx), h(dx)] with
h(dx) = floor(sqrt(R^2 - dx^2)). So the filter is two passes:
  vert[x, y, c, h] = max of the input over [y - h, y + h]   (a running max: an update over an
                                                            RDom of h = 1..R, one row pair each)
  output[x, y, c]  = max over dx of vert[x + dx, y, c, h(dx)]   (an RDom over the columns)
which costs about 2R + (2R + 1) maxima per pixel instead of the disc's ~pi R^2.
"""

from __future__ import annotations

import math

import numpy as np

from apps.common import App, Built, planar_float_rgb

RADIUS = 26


class MaxFilter(App):
    name = "max_filter"
    description = f"max filter over a disc of radius {RADIUS}, float32 RGB (Halide's max_filter app)"

    image_sizes = {"small": (64, 96), "default": (1536, 2560)}

    def inputs_from_image(self, img):
        return {"input": planar_float_rgb(img)}

    def build(self, hl, inputs):
        img = inputs["input"]
        channels, height, width = img.shape
        R = RADIUS
        x, y, c, h, dx = hl.Var("x"), hl.Var("y"), hl.Var("c"), hl.Var("h"), hl.Var("dx")
        clamped = hl.BoundaryConditions.repeat_edge(hl.Buffer(img, "input"))
        padded = hl.Func("padded")  # the edge-repeated input, as a Func a schedule can place
        padded[x, y, c] = clamped[x, y, c]

        # The disc's half-height at each column offset. sqrt of a perfect square is exact.
        filter_height = hl.Func("filter_height")
        filter_height[dx] = hl.cast(hl.Int(32), hl.sqrt(hl.cast(hl.Float(32), R * R - dx * dx)))

        # vert[..., h]: the max over the 2h + 1 rows centred on y, grown one row pair at a time.
        vert = hl.Func("vert")
        rh = hl.RDom([hl.Range(1, R)], name="rh")
        vert[x, y, c, h] = padded[x, y, c]
        vert[x, y, c, rh.x] = hl.max(vert[x, y, c, rh.x - 1],
                                     hl.max(padded[x, y - rh.x, c], padded[x, y + rh.x, c]))

        # The horizontal pass: each column of the disc reads vert at its own height.
        hmax, output = hl.Func("hmax"), hl.Func("output")
        rx = hl.RDom([hl.Range(-R, 2 * R + 1)], name="rx")
        hmax[x, y, c] = hl.f32(float("-inf"))
        hmax[x, y, c] = hl.max(hmax[x, y, c], vert[x + rx.x, y, c, hl.clamp(filter_height[rx.x], 0, R)])
        output[x, y, c] = hmax[x, y, c]

        funcs = {"padded": padded, "filter_height": filter_height, "vert": vert, "hmax": hmax,
                 "output": output}
        return Built(output, [width, height, channels], hl.Float(32), funcs,
                     {"x": x, "y": y, "c": c, "h": h, "dx": dx, "rh": rh, "rx": rx})

    def schedule(self, hl, built):
        """Strips of 32 output rows in parallel (channel and strip fused into one parallel loop).
        The edge-repeated input is a line buffer per strip (one new row per output row: a
        sliding window), so the vertical pass reads it with dense vectors and no clamping.
        For each output row, vert is computed for that row only, all R + 1 heights, 16-wide
        vectors along x (each height a sweep along the row, so the previous height is a dense,
        cache-resident load). hmax is computed per 16-wide vector of output, its 2R + 1 column
        maxima accumulating in one register. The disc's heights are a table computed once."""
        x, y, c, rh = (built.vars[k] for k in ("x", "y", "c", "rh"))
        f = built.funcs
        out, vert, hmax = f["output"], f["vert"], f["hmax"]
        yo, yi, xi, t = hl.Var("yo"), hl.Var("yi"), hl.Var("xi"), hl.Var("t")
        out.split(y, yo, yi, 32).fuse(yo, c, t).parallel(t).split(x, x, xi, 16).vectorize(xi)
        hmax.compute_at(out, x).vectorize(x)
        hmax.update(0).vectorize(x)
        f["padded"].store_at(out, t).compute_at(out, yi).vectorize(x, 16)
        vert.compute_at(out, yi).vectorize(x, 16)
        vert.update(0).reorder(x, rh).vectorize(x, 16)
        f["filter_height"].compute_root()

    def gpu_schedule(self, hl, built):
        """Blocks of 32x4 output pixels of one channel, a thread per pixel; per block, vert for
        every height (the block's rows and the disc's columns around them: 84x4x27 floats, 36 KB
        of shared memory) computed by the block's threads, each thread its column's running max
        up the heights; then each output thread takes the maximum over the disc's 53 columns of
        vert at each column's height. The heights are a table computed once on the host."""
        x, y, c = built.vars["x"], built.vars["y"], built.vars["c"]
        f = built.funcs
        out, vert, hmax = f["output"], f["vert"], f["hmax"]
        xo, yo, xi, yi = hl.Var("xo"), hl.Var("yo"), hl.Var("xi"), hl.Var("yi")
        w, h = built.output_sizes[0], built.output_sizes[1]
        out.split(x, xo, xi, min(32, w), hl.TailStrategy.GuardWithIf)
        out.split(y, yo, yi, min(4, h), hl.TailStrategy.GuardWithIf)
        out.reorder(xi, yi, xo, yo, c).gpu_blocks(xo, yo, c).gpu_threads(xi, yi)
        hmax.compute_at(out, xi)
        vert.compute_at(out, xo).reorder(built.vars["h"], x, y).gpu_threads(x, y)
        vert.update(0).reorder(built.vars["rh"], x, y).gpu_threads(x, y)  # the heights inside each thread
        f["filter_height"].compute_root()

    def reference(self, inputs):
        img = inputs["input"]
        _, height, width = img.shape
        R = RADIUS
        pad = np.pad(img, ((0, 0), (R, R), (R, R)), mode="edge")
        heights = {dx: math.isqrt(R * R - dx * dx) for dx in range(-R, R + 1)}
        out = np.full(img.shape, -np.inf, dtype=np.float32)
        vert = pad[:, R : R + height]  # height 0: the rows themselves (x still padded by R)
        for h in range(R + 1):
            if h:
                vert = np.maximum(vert, np.maximum(pad[:, R - h : R - h + height], pad[:, R + h : R + h + height]))
            for dx in (d for d, hd in heights.items() if hd == h):
                np.maximum(out, vert[:, :, R + dx : R + dx + width], out=out)
        return out

    def to_image(self, result):
        return np.clip(result.transpose(1, 2, 0) * 255 + 0.5, 0, 255).astype(np.uint8)


APP = MaxFilter()
