"""The bilateral grid (Chen, Paris and Durand 2007), as in Halide's bilateral_grid app: an
edge-preserving blur of a float32 grey image in [0, 1].

1. Histogram: the image is splatted into a coarse 3-D grid, one cell per s_sigma x s_sigma
   block of pixels (x, y) and per r_sigma of intensity (z). Each cell accumulates the sum of
   its pixels' values (channel c = 0) and their count (c = 1): an update over an RDom of the
   block, writing to the data-dependent z of each pixel.
2. Blur: the grid is blurred by the 5-tap [1, 4, 6, 4, 1] filter along z, then x, then y.
3. Slice: every output pixel reads the blurred grid at (x / s_sigma, y / s_sigma, value /
   r_sigma) by trilinear interpolation, and divides the sum by the count (homogeneous
   coordinates), so pixels average only with neighbours of similar intensity.
"""

from __future__ import annotations

import numpy as np

from apps.common import App, Built

S_SIGMA = 8  # spatial size of a grid cell, in pixels
R_SIGMA = 0.1  # intensity size of a grid cell


class BilateralGrid(App):
    name = "bilateral_grid"
    description = "bilateral grid edge-preserving blur, float32 (Halide's bilateral_grid)"
    exact = False  # float sums in a different order (and FMA in Halide)
    rtol, atol = 1e-4, 1e-4

    image_sizes = {"small": (48, 64), "default": (1536, 2560)}
    image_seed = 3

    def inputs_from_image(self, img):
        grey = img if img.ndim == 2 else img[..., :3].mean(axis=2)
        return {"input": (grey / np.float32(255)).astype(np.float32)}

    def to_image(self, result):
        return (np.clip(result, 0, 1) * 255 + 0.5).astype(np.uint8)

    def build(self, hl, inputs):
        img = inputs["input"]
        h, w = img.shape
        s = S_SIGMA
        x, y, z, c = hl.Var("x"), hl.Var("y"), hl.Var("z"), hl.Var("c")
        input_b = hl.Buffer(img, "input")
        clamped = hl.BoundaryConditions.repeat_edge(input_b)

        # 1. the histogram: each cell sums the s x s block of pixels centred on (x * s, y * s)
        r = hl.RDom([hl.Range(0, s), hl.Range(0, s)], name="r")
        val = hl.clamp(clamped[x * s + r.x - s // 2, y * s + r.y - s // 2], hl.f32(0), hl.f32(1))
        zi = hl.cast(hl.Int(32), val * hl.f32(1 / R_SIGMA) + hl.f32(0.5))
        histogram = hl.Func("histogram")
        histogram[x, y, z, c] = hl.f32(0)
        histogram[x, y, zi, c] += hl.mux(c, [val, hl.f32(1)])

        # 2. blur the grid with [1, 4, 6, 4, 1] in z, x and y (unnormalised: the ratio cancels it)
        def taps(f):
            return f(-2) + f(-1) * 4 + f(0) * 6 + f(1) * 4 + f(2)

        blurz, blurx, blury = hl.Func("blurz"), hl.Func("blurx"), hl.Func("blury")
        blurz[x, y, z, c] = taps(lambda d: histogram[x, y, z + d, c])
        blurx[x, y, z, c] = taps(lambda d: blurz[x + d, y, z, c])
        blury[x, y, z, c] = taps(lambda d: blurx[x, y + d, z, c])

        # 3. trilinear slicing at (x / s, y / s, value / r_sigma), then sum / count
        val = hl.clamp(input_b[x, y], hl.f32(0), hl.f32(1))
        zv = val * hl.f32(1 / R_SIGMA)
        zi = hl.cast(hl.Int(32), zv)
        zf = zv - hl.cast(hl.Float(32), zi)
        xf = hl.cast(hl.Float(32), x % s) / hl.f32(s)
        yf = hl.cast(hl.Float(32), y % s) / hl.f32(s)
        xi, yi = x / s, y / s

        def grid(dx, dy, dz):
            return blury[xi + dx, yi + dy, zi + dz, c]

        def bilerp(dz):
            return hl.lerp(hl.lerp(grid(0, 0, dz), grid(1, 0, dz), xf),
                           hl.lerp(grid(0, 1, dz), grid(1, 1, dz), xf), yf)

        interpolated, output = hl.Func("interpolated"), hl.Func("bilateral_grid")
        interpolated[x, y, c] = hl.lerp(bilerp(0), bilerp(1), zf)
        output[x, y] = interpolated[x, y, 0] / interpolated[x, y, 1]
        funcs = {"histogram": histogram, "blurz": blurz, "blurx": blurx, "blury": blury,
                 "interpolated": interpolated, "output": output}
        return Built(output, [w, h], hl.Float(32), funcs, {"x": x, "y": y, "z": z, "c": c, "r": r})

    def schedule(self, hl, built):
        """Halide's CPU schedule: the histogram is built one grid row at a time, inside the z
        blur that consumes it (its update runs c innermost and unrolled, so a pixel is read
        once for both channels); each blur is a root stage, parallel over grid rows or
        intensity slices and vectorised along x; the slicing is parallel over rows and
        vectorised along x, with the interpolation inlined."""
        x, y, z, c, r = (built.vars[v] for v in ("x", "y", "z", "c", "r"))
        f = built.funcs
        f["histogram"].compute_at(f["blurz"], y)
        f["histogram"].update(0).reorder(c, r.x, r.y, x, y).unroll(c)
        f["blurz"].compute_root().reorder(c, z, x, y).parallel(y).vectorize(x, 16).unroll(c)
        f["blurx"].compute_root().reorder(c, x, y, z).parallel(z).vectorize(x, 16).unroll(c)
        f["blury"].compute_root().reorder(c, x, y, z).parallel(z).vectorize(x, 16).unroll(c)
        f["output"].parallel(y).vectorize(x, 16)

    def gpu_schedule(self, hl, built):
        """Halide's GPU schedule: the histogram a root stage, a thread per grid cell (each
        cell's pixels accumulated serially by its thread, both channels unrolled); each blur a
        root stage with a thread per cell; the slicing a thread per output pixel."""
        x, y, z, c, r = (built.vars[v] for v in ("x", "y", "z", "c", "r"))
        f = built.funcs
        xo, yo, zo, xi, yi, zi = (hl.Var(n) for n in ("xo", "yo", "zo", "xi", "yi", "zi"))
        guard = hl.TailStrategy.GuardWithIf
        f["histogram"].compute_root().reorder(c, z, x, y).gpu_tile(x, y, xo, yo, xi, yi, 8, 8, guard)
        f["histogram"].update(0).reorder(c, r.x, r.y, x, y).gpu_tile(x, y, xo, yo, xi, yi, 8, 8, guard).unroll(c)
        for name, tz in (("blurz", 4), ("blurx", 1), ("blury", 1)):
            f[name].compute_root().reorder(c, x, y, z).gpu_tile(x, y, z, xo, yo, zo, xi, yi, zi, 16, 8, tz, guard)
            f[name].unroll(c)
        f["output"].gpu_tile(x, y, xo, yo, xi, yi, 32, 8, guard)

    def reference(self, inputs):
        """numpy: the histogram by bincount over all pixels of all cells, blurs by shifted
        sums, slicing by explicit trilinear weights. Bin indices are computed in float32, as
        the pipeline does, so every pixel lands in the same cell."""
        img = inputs["input"]
        h, w = img.shape
        s, pad = S_SIGMA, 2
        # grid cells needed by the slicing ([0, last + 1]) plus the blur's 2-cell apron
        gx = np.arange(-pad, (w - 1) // s + 2 + pad)
        gy = np.arange(-pad, (h - 1) // s + 2 + pad)
        nz = int(1 / R_SIGMA) + 1  # z bins 0..10
        px = np.clip(gx[:, None] * s + np.arange(s)[None, :] - s // 2, 0, w - 1)  # (GX, s)
        py = np.clip(gy[:, None] * s + np.arange(s)[None, :] - s // 2, 0, h - 1)  # (GY, s)
        vals = np.clip(img[py.reshape(-1)][:, px.reshape(-1)], 0, 1)  # (GY*s, GX*s)
        zi = (vals * np.float32(1 / R_SIGMA) + np.float32(0.5)).astype(np.int64)
        cy = np.repeat(np.arange(len(gy)), s)[:, None]
        cx = np.repeat(np.arange(len(gx)), s)[None, :]
        cell = ((cy * len(gx) + cx) * nz + zi).reshape(-1)
        shape = (len(gy), len(gx), nz)
        size = shape[0] * shape[1] * nz
        # z from -2 to 13: the slicing reads up to bin 11, and the z blur two more each side
        hist = np.zeros((len(gy), len(gx), nz + 2 * pad + 1, 2))
        hist[:, :, pad:pad + nz, 0] = np.bincount(cell, vals.reshape(-1).astype(np.float64), size).reshape(shape)
        hist[:, :, pad:pad + nz, 1] = np.bincount(cell, None, size).reshape(shape)

        def blur(a, axis):
            n = a.shape[axis] - 4
            part = [np.take(a, range(d, d + n), axis=axis) for d in range(5)]
            return part[0] + 4 * part[1] + 6 * part[2] + 4 * part[3] + part[4]

        grid = blur(blur(blur(hist, 2), 1), 0)  # [y, x, z, c], origins now at 0
        gh, gw, gd, _ = grid.shape
        val = np.clip(img, 0, 1)
        zv = val * np.float32(1 / R_SIGMA)
        zi = zv.astype(np.int64)
        zf = zv - zi
        xs, ys = np.arange(w), np.arange(h)[:, None]
        xf, yf = (xs % s) / s, (ys % s) / s
        base = ((ys // s) * gw + xs // s) * gd + zi  # flat index of the cell below each pixel
        num, den = grid[..., 0].reshape(-1), grid[..., 1].reshape(-1)
        out_num, out_den = 0, 0
        for dz, wz in ((0, 1 - zf), (1, zf)):
            for dy, wy in ((0, 1 - yf), (1, yf)):
                for dx, wx in ((0, 1 - xf), (1, xf)):
                    idx, wt = base + (dy * gw + dx) * gd + dz, wx * wy * wz
                    out_num = out_num + wt * num[idx]
                    out_den = out_den + wt * den[idx]
        return (out_num / out_den).astype(np.float32)

APP = BilateralGrid()
