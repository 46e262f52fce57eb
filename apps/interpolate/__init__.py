"""Multi-scale interpolation of an RGBA image, as in Halide's interpolate app: the transparent
parts of a picture are filled in from the opaque parts nearby, through a 10-level pyramid.

Layout as in Halide's app: the input is planar float32 RGBA [x, y, c], numpy (4, H, W), with
alpha in [0, 1]; the output is the RGB part, numpy (3, H, W).

1. Level 0 is the input with its colour premultiplied by alpha (edges repeated). Each coarser
   level l = 1..9 is the previous one blurred by [1, 2, 1] / 4 in x, then in y, keeping every
   other sample; level 3 is read with its coordinates clamped to [0, W/8] x [0, H/8], so the
   coarse levels do not reach far outside the picture.
2. Going back up, level 9 is taken as it is; level l is its own value plus (1 - its alpha) times
   the next coarser result upsampled by two (each sample the mean of its two nearest coarse
   samples, in x then in y): what is opaque stays, what is transparent takes the coarse colour.
3. The output divides the colour of the finest result by its alpha (un-premultiplies it).

All Funcs are defined on the infinite domain; only the input has a boundary (repeat_edge).
"""

from __future__ import annotations

import numpy as np

from apps.common import App, Built, register_file

LEVELS = 10  # pyramid levels, as in Halide's app
CLAMP_LEVEL = 4  # the downsampling into this level reads the previous one clamped to the picture


def sparse_alpha(h: int, w: int, seed: int = 1) -> np.ndarray:
    """An alpha channel with holes to fill: a few opaque and half-opaque discs, a band of opaque
    columns, and scattered opaque pixels (about 3% of them); transparent elsewhere."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    alpha = np.where(rng.random((h, w)) < 0.03, 1.0, 0.0).astype(np.float32)
    alpha[:, w // 3 : w // 3 + max(1, w // 64)] = 1.0
    for value in (1.0, 1.0, 0.5, 0.25):
        cy, cx, rad = rng.uniform(0, h), rng.uniform(0, w), rng.uniform(0.03, 0.12) * min(h, w)
        alpha[(yy - cy) ** 2 + (xx - cx) ** 2 < rad**2] = value
    return alpha


class Interpolate(App):
    default_schedule_is_slow = True  # every level inlined into the next: exponential work
    name = "interpolate"
    description = f"multi-scale interpolation, {LEVELS} pyramid levels, float32 RGBA (Halide's interpolate)"
    exact = False  # Halide contracts (1 - alpha) * up + value into FMAs
    rtol, atol = 1e-5, 1e-5

    # Halide's app is estimated at 1536 wide, 2560 tall. The small picture keeps a pixel at
    # the coarsest level (512 = 2^9), with sizes that are multiples of neither 8 nor 16.
    image_sizes = {"small": (530, 602), "default": (2560, 1536)}
    image_seed = 2

    def inputs_from_image(self, img):
        """An 8-bit picture: RGBA keeps its alpha, RGB (or grey) gets sparse_alpha's holes."""
        if img.ndim == 2:
            img = np.stack([img] * 3, axis=-1)
        rgb = img[..., :3].transpose(2, 0, 1).astype(np.float32) / np.float32(255)
        h, w = img.shape[:2]
        alpha = img[..., 3].astype(np.float32) / np.float32(255) if img.shape[2] == 4 else sparse_alpha(h, w)
        return {"input": np.ascontiguousarray(np.concatenate([rgb, alpha[None]]))}

    def to_image(self, result):
        return np.clip(result.transpose(1, 2, 0) * 255 + 0.5, 0, 255).astype(np.uint8)

    def build(self, hl, inputs):
        img = inputs["input"]
        _, h, w = img.shape
        x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
        clamped = hl.BoundaryConditions.repeat_edge(hl.Buffer(img, "input"))

        down = [hl.Func(f"downsampled_{j}") for j in range(LEVELS)]
        downx = [None] + [hl.Func(f"downx_{j}") for j in range(1, LEVELS)]
        interp = [hl.Func(f"interpolated_{j}") for j in range(LEVELS)]

        # 1. the premultiplied picture, and its blurred, subsampled levels
        down[0][x, y, c] = hl.select(c < 3, clamped[x, y, c] * clamped[x, y, 3], clamped[x, y, 3])
        for j in range(1, LEVELS):
            prev = down[j - 1]
            if j == CLAMP_LEVEL:
                # as Halide's: the limits are the level's size, (w, h) / 2^(j-1), inclusive
                lim_x, lim_y = w // 2 ** (j - 1), h // 2 ** (j - 1)
                prev = hl.lambda_func(x, y, c, prev[hl.clamp(x, 0, lim_x), hl.clamp(y, 0, lim_y), c])
            downx[j][x, y, c] = (prev[2 * x - 1, y, c] + 2.0 * prev[2 * x, y, c] + prev[2 * x + 1, y, c]) * 0.25
            down[j][x, y, c] = (downx[j][x, 2 * y - 1, c] + 2.0 * downx[j][x, 2 * y, c]
                                + downx[j][x, 2 * y + 1, c]) * 0.25

        # 2. back up: each level keeps its opaque part and takes the rest from the coarser one
        interp[LEVELS - 1][x, y, c] = down[LEVELS - 1][x, y, c]
        for j in range(LEVELS - 2, -1, -1):
            upx, up = hl.Func(f"upsampledx_{j}"), hl.Func(f"upsampled_{j}")
            upx[x, y, c] = (interp[j + 1][x / 2, y, c] + interp[j + 1][(x + 1) / 2, y, c]) / 2.0
            up[x, y, c] = (upx[x, y / 2, c] + upx[x, (y + 1) / 2, c]) / 2.0
            interp[j][x, y, c] = down[j][x, y, c] + (1.0 - down[j][x, y, 3]) * up[x, y, c]

        # 3. un-premultiply
        normalize = hl.Func("normalize")
        normalize[x, y, c] = interp[0][x, y, c] / interp[0][x, y, 3]

        funcs = {"normalize": normalize}
        funcs.update({f"downsampled_{j}": down[j] for j in range(LEVELS)})
        funcs.update({f"downx_{j}": downx[j] for j in range(1, LEVELS)})
        funcs.update({f"interpolated_{j}": interp[j] for j in range(LEVELS)})
        return Built(normalize, [w, h, 3], hl.Float(32), funcs, {"x": x, "y": y, "c": c})

    def schedule(self, hl, built):
        """Halide's CPU schedule for this app, with the host's vectors (16 floats on AVX-512):
        levels 1-8 of the downsampling at root, in parallel strips of 8 rows, each row's channels
        one after the other, vectorised in x; level 0 (the premultiplied input, too big to store)
        cloned into level 1's x-blur and computed per row of level 1, kept across its strip (a
        sliding window: each row premultiplied once, not once per tap), channels unrolled; the
        output in parallel strips of 32 rows, channels unrolled inside each 16-wide vector; the
        upsampled levels 1-9 computed per output row and kept across the strip (sliding windows
        down the whole pyramid). Level 9 of the downsampling, the x-blurs and the upsamplings
        are inlined into their consumers."""
        x, y, c = built.vars["x"], built.vars["y"], built.vars["c"]
        f = built.funcs
        out = f["normalize"]
        width, height, channels = built.output_sizes
        vec, _ = register_file(hl)
        xo, xi, yo, yi = hl.Var("xo"), hl.Var("xi"), hl.Var("yo"), hl.Var("yi")
        for j in range(1, LEVELS - 1):
            (f[f"downsampled_{j}"].compute_root().never_partition([x]).reorder(x, c, y)
             .split(y, yo, yi, 8).parallel(yo).vectorize(x, vec))
        (f["downsampled_0"].clone_in(f["downx_1"]).store_at(f["downsampled_1"], yo)
         .compute_at(f["downsampled_1"], yi).reorder(c, x, y).unroll(c).vectorize(x, vec).never_partition([y]))
        (out.bound(x, 0, width).bound(y, 0, height).bound(c, 0, channels).never_partition([y])
         .split(x, xo, xi, vec).split(y, yo, yi, 32).reorder(xi, c, xo, yi, yo)
         .unroll(c).vectorize(xi).parallel(yo))
        for j in range(1, LEVELS):
            f[f"interpolated_{j}"].store_at(out, yo).compute_at(out, yi).never_partition_all().vectorize(x, vec)

    def reference(self, inputs):
        """numpy, in float32. Each level is an array over the rectangle of coordinates that the
        output needs of it (a Halide Func is defined everywhere), with its first coordinate."""
        img = inputs["input"]
        _, h, w = img.shape
        f32 = np.float32

        # the upsampling reads interpolated level j on [0, last[j]] (from x / 2 and (x + 1) / 2)
        def up_last(n):
            last = [n - 1]
            for _ in range(1, LEVELS):
                last.append((last[-1] + 1) // 2)
            return last

        last = {"x": up_last(w), "y": up_last(h)}
        limit = {"x": w // 2 ** (CLAMP_LEVEL - 1), "y": h // 2 ** (CLAMP_LEVEL - 1)}

        def taps(lo, hi, j, axis):
            """The coordinates of level j - 1 that level j's samples lo..hi read: 2i-1, 2i, 2i+1."""
            centre = 2 * np.arange(lo, hi + 1)
            t = [centre - 1, centre, centre + 1]
            return [np.clip(a, 0, limit[axis]) for a in t] if j == CLAMP_LEVEL else t

        # the rectangle of each downsampled level: what upsampling reads, and what the next
        # level's blur reads of it
        rect = [None] * LEVELS
        for j in range(LEVELS - 1, -1, -1):
            rect[j] = {}
            for axis in ("x", "y"):
                lo, hi = 0, last[axis][j]
                if j < LEVELS - 1:
                    nlo, nhi = rect[j + 1][axis]
                    t = taps(nlo, nhi, j + 1, axis)
                    lo, hi = min(lo, int(t[0].min())), max(hi, int(t[2].max()))
                rect[j][axis] = (lo, hi)

        # 1. level 0: the edge-repeated, premultiplied input; then blur and subsample
        (x0, x1), (y0, y1) = rect[0]["x"], rect[0]["y"]
        xs, ys = np.clip(np.arange(x0, x1 + 1), 0, w - 1), np.clip(np.arange(y0, y1 + 1), 0, h - 1)
        a = img[:, ys][:, :, xs]
        levels = [np.concatenate([a[:3] * a[3:4], a[3:4]])]
        for j in range(1, LEVELS):
            prev, (px0, _), (py0, _) = levels[-1], rect[j - 1]["x"], rect[j - 1]["y"]
            t = [i - px0 for i in taps(*rect[j]["x"], j, "x")]
            bx = (prev[:, :, t[0]] + f32(2) * prev[:, :, t[1]] + prev[:, :, t[2]]) * f32(0.25)
            t = [i - py0 for i in taps(*rect[j]["y"], j, "y")]
            levels.append((bx[:, t[0]] + f32(2) * bx[:, t[1]] + bx[:, t[2]]) * f32(0.25))

        def crop(j):
            """Downsampled level j on [0, last] x [0, last]."""
            (lx, _), (ly, _) = rect[j]["x"], rect[j]["y"]
            return levels[j][:, -ly : -ly + last["y"][j] + 1, -lx : -lx + last["x"][j] + 1]

        # 2. upsample and fill, coarse to fine
        result = crop(LEVELS - 1)
        for j in range(LEVELS - 2, -1, -1):
            ix, iy = np.arange(last["x"][j] + 1), np.arange(last["y"][j] + 1)
            ux = (result[:, :, ix // 2] + result[:, :, (ix + 1) // 2]) / f32(2)
            up = (ux[:, iy // 2] + ux[:, (iy + 1) // 2]) / f32(2)
            d = crop(j)
            result = d + (f32(1) - d[3:4]) * up

        # 3. un-premultiply
        return result[:3] / result[3:4]


APP = Interpolate()
