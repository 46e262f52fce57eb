"""Harris corner response (Harris and Stephens 1988), as in Halide's harris app.

Input: a float32 RGB image in [0, 1], planar [x, y, c] as in Halide (numpy (3, H, W));
output: the response at every pixel, float32 [x, y] (numpy (H, W)).

    grey   = 0.299 r + 0.587 g + 0.114 b              (input read with repeat_edge)
    Ix, Iy = Sobel derivatives of grey, scaled by 1/12
    Sxx, Syy, Sxy = 3x3 box sums of Ix², Iy², Ix·Iy  (the structure tensor)
    output = det - k trace², det = Sxx Syy - Sxy², trace = Sxx + Syy, k = 0.04
"""

from __future__ import annotations

import numpy as np

from apps.common import App, Built

K = 0.04
GREY = (0.299, 0.587, 0.114)


class Harris(App):
    default_schedule_is_slow = True  # every stage inlined: exponential recomputation
    name = "harris"
    description = "Harris corner response, float32 RGB (Halide's harris)"
    exact = False  # float sums in a different order (and FMA in Halide)
    rtol, atol = 1e-4, 2e-8  # responses reach ~3e-3; most are near 0

    # small is not a multiple of the tile or the vector width
    image_sizes = {"small": (45, 70), "default": (1536, 2560)}
    image_seed = 5

    def inputs_from_image(self, img):
        rgb = np.repeat(img[..., None], 3, axis=2) if img.ndim == 2 else img[..., :3]
        return {"input": np.ascontiguousarray(rgb.transpose(2, 0, 1), dtype=np.float32) / np.float32(255)}

    def to_image(self, result):
        """Corners bright, edges (negative response) dark, flat areas grey: the response over
        its 99.5th percentile magnitude, square-rooted so weak features still show."""
        mag = np.abs(result)
        scale = max(float(np.percentile(mag, 99.5)), 1e-30)
        shown = np.sign(result) * np.sqrt(np.clip(mag / scale, 0, 1))
        return (np.clip(0.5 + 0.5 * shown, 0, 1) * 255 + 0.5).astype(np.uint8)

    def build(self, hl, inputs):
        img = inputs["input"]
        _, h, w = img.shape
        x, y = hl.Var("x"), hl.Var("y")
        in_b = hl.BoundaryConditions.repeat_edge(hl.Buffer(img, "input"))
        gray, Ix, Iy = hl.Func("gray"), hl.Func("Ix"), hl.Func("Iy")
        gray[x, y] = (hl.f32(GREY[0]) * in_b[x, y, 0] + hl.f32(GREY[1]) * in_b[x, y, 1]
                      + hl.f32(GREY[2]) * in_b[x, y, 2])

        def sobel(dx, dy):
            """(g(+1) - g(-1)) along (dx, dy), smoothed [1, 2, 1] across it, / 12."""
            ex, ey = dy, dx  # the perpendicular direction
            terms = [(gray[x + dx + s * ex, y + dy + s * ey] - gray[x - dx + s * ex, y - dy + s * ey]) * wt
                     for s, wt in ((-1, 1.0), (0, 2.0), (1, 1.0))]
            return (terms[0] + terms[1] + terms[2]) / 12.0

        Ix[x, y] = sobel(1, 0)
        Iy[x, y] = sobel(0, 1)
        Ixx, Iyy, Ixy = hl.Func("Ixx"), hl.Func("Iyy"), hl.Func("Ixy")
        Ixx[x, y] = Ix[x, y] * Ix[x, y]
        Iyy[x, y] = Iy[x, y] * Iy[x, y]
        Ixy[x, y] = Ix[x, y] * Iy[x, y]

        def box(f):
            """The 3x3 box sum, written out (pure, so it inlines into its consumer)."""
            return sum(f[x + dx, y + dy] for dy in (-1, 0, 1) for dx in (-1, 0, 1))

        Sxx, Syy, Sxy = hl.Func("Sxx"), hl.Func("Syy"), hl.Func("Sxy")
        Sxx[x, y] = box(Ixx)
        Syy[x, y] = box(Iyy)
        Sxy[x, y] = box(Ixy)
        det = Sxx[x, y] * Syy[x, y] - Sxy[x, y] * Sxy[x, y]
        trace = Sxx[x, y] + Syy[x, y]
        output = hl.Func("harris")
        output[x, y] = det - hl.f32(K) * trace * trace
        funcs = {"gray": gray, "Ix": Ix, "Iy": Iy, "Ixx": Ixx, "Iyy": Iyy, "Ixy": Ixy,
                 "Sxx": Sxx, "Syy": Syy, "Sxy": Sxy, "output": output}
        return Built(output, [w, h], hl.Float(32), funcs, {"x": x, "y": y})

    def schedule(self, hl, built):
        """Halide's own CPU schedule for harris (apps/harris): strips of 32 rows in parallel,
        vectorised along x; the grey image and both gradients are line buffers, stored per strip
        and computed one new row per output row (a sliding window), the two gradients in one
        loop nest (compute_with: Ix in Iy's loops, so each row of grey is read once while hot);
        the products and box sums are computed inline, per vector of output."""
        x, y = built.vars["x"], built.vars["y"]
        f = built.funcs
        h = built.output_sizes[1]
        yi = hl.Var("yi")
        vec = hl.get_host_target().natural_vector_size(hl.Float(32))
        f["output"].split(y, y, yi, min(32, h)).parallel(y).vectorize(x, vec)
        for name in ("gray", "Ix", "Iy"):
            f[name].store_at(f["output"], y).compute_at(f["output"], yi).vectorize(x, vec)
        f["Ix"].compute_with(f["Iy"], x)

    def gpu_schedule(self, hl, built):
        """32x8 output tiles, a thread per pixel; the grey image (36x12) and both gradients
        (34x10) computed per tile in shared memory by the block's threads, each stage before a
        barrier; products and box sums inlined."""
        x, y = built.vars["x"], built.vars["y"]
        f = built.funcs
        xo, yo, xi, yi = hl.Var("xo"), hl.Var("yo"), hl.Var("xi"), hl.Var("yi")
        f["output"].gpu_tile(x, y, xo, yo, xi, yi, 32, 8, hl.TailStrategy.GuardWithIf)
        for name in ("gray", "Ix", "Iy"):
            f[name].compute_at(f["output"], xo).gpu_threads(x, y)

    def reference(self, inputs):
        """numpy in float32 on an edge-padded copy: shifted slices for the stencils."""
        img = inputs["input"]
        f32 = np.float32
        pad = np.pad(img, ((0, 0), (3, 3), (3, 3)), mode="edge")  # [c, y, x], 3 pixels each side
        grey = f32(GREY[0]) * pad[0] + f32(GREY[1]) * pad[1] + f32(GREY[2]) * pad[2]

        def shift(a, dy, dx, m):  # a[y + dy, x + dx] over the interior shrunk by m each side
            hh, ww = a.shape
            return a[m + dy:hh - m + dy, m + dx:ww - m + dx]

        smooth = (f32(1), f32(2), f32(1))
        ix = sum(wt * (shift(grey, s, 1, 1) - shift(grey, s, -1, 1)) for s, wt in zip((-1, 0, 1), smooth)) / f32(12)
        iy = sum(wt * (shift(grey, 1, s, 1) - shift(grey, -1, s, 1)) for s, wt in zip((-1, 0, 1), smooth)) / f32(12)

        def box(a):
            return sum(shift(a, dy, dx, 1) for dy in (-1, 0, 1) for dx in (-1, 0, 1))

        sxx, syy, sxy = box(ix * ix), box(iy * iy), box(ix * iy)
        out = sxx * syy - sxy * sxy - f32(K) * (sxx + syy) ** 2
        return out[1:-1, 1:-1]


APP = Harris()
