"""A chain of 32 identical 5x5 stencils on a uint16 image, as in Halide's stencil_chain app.

The algorithm, on a grey uint16 image (Halide [x, y]):
  stage[-1](x, y) = input with its edges repeated
  stage[s](x, y)  = sum over i, j in [-2, 2] of (i + 3) (j + 3) * stage[s - 1](x + i, y + j)
  output          = stage[31]
All arithmetic is uint16 and wraps modulo 2^16 (the weights are 1..25, so every stage overflows):
the result is exact, and the point is the schedule, not the numbers. Only the input is clamped;
the stages beyond the image edge are computed from it like any other pixel, so each stage
needs 2 more pixels on every side than the one after it (the input is read 64 pixels past the
output's edges).
"""

from __future__ import annotations

import numpy as np

from apps.common import App, Built, sample_image

STAGES = 32  # the generator's default `stencils`
RADIUS = 2  # a 5x5 stencil
GROUP = 11  # the hand schedule's stages per compute_root group (Halide's group_size)
TILES = (2, 4)  # the hand schedule's tiles per group output: across x, across y


def weight(offset: int) -> int:
    """The stencil's weight along one axis: 1..5 for offsets -2..2 (the 5x5 weights are their
    products, so the stencil is separable)."""
    return offset + RADIUS + 1


class StencilChain(App):
    name = "stencil_chain"
    description = f"{STAGES} chained 5x5 stencils, uint16 (Halide's stencil_chain app)"
    exact = True  # integer arithmetic, wrapping alike everywhere
    default_schedule_is_slow = True  # all inlined: 25^32 loads per pixel

    def inputs(self, size="default"):
        # Halide's app runs on the red channel of its 1536x2560 rgb.png, widened to 16 bits.
        h, w = (64, 128) if size == "small" else (2560, 1536)
        red = sample_image(h, w)[:, :, 0].astype(np.uint16)
        return {"input": red * np.uint16(257)}  # 0..255 -> 0..65535, as Halide's image loader

    def build(self, hl, inputs):
        img = inputs["input"]
        height, width = img.shape
        x, y = hl.Var("x"), hl.Var("y")
        clamped = hl.BoundaryConditions.repeat_edge(hl.Buffer(img, "input"))
        stages = [clamped]
        for s in range(STAGES):
            prev = stages[-1]
            stage = hl.Func(f"stage_{s}")
            e = hl.cast(hl.UInt(16), 0)
            for j in range(-RADIUS, RADIUS + 1):
                for i in range(-RADIUS, RADIUS + 1):
                    e = e + (weight(i) * weight(j)) * prev[x + i, y + j]
            stage[x, y] = e
            stages.append(stage)
        output = hl.Func("output")
        output[x, y] = stages[-1][x, y]

        funcs = {"clamped": clamped, "output": output}
        funcs.update((f"stage_{s}", stages[s + 1]) for s in range(STAGES))
        return Built(output, [width, height], hl.UInt(16), funcs, {"x": x, "y": y})

    def schedule(self, hl, built):
        """Halide's CPU schedule: the chain is cut into groups of 11 stages. The last stage of each
        group (the output for the last group) is computed at root, in tiles (2 across x, 4 down y:
        8 tiles in parallel for 2 cores, where Halide's 16-core schedule has 4x4); inside a
        tile, the group's 10 earlier stages are line buffers stored per tile and computed one
        row per row of the tile (sliding windows: each row computed once, 5 kept), all
        vectorized at the natural width (32 uint16 lanes on AVX-512). The last stage of the
        chain is inlined into the output. The tile sizes grow with each group's halo (4 pixels
        per stage between it and the output), so the tiles of every group divide it evenly."""
        f = built.funcs
        x, y = built.vars["x"], built.vars["y"]
        width, height = built.output_sizes
        vec = hl.get_host_target().natural_vector_size(hl.UInt(16))
        stages = [f["clamped"]] + [f[f"stage_{s}"] for s in range(STAGES)]
        xo, yo, xi, yi, t = hl.Var("xo"), hl.Var("yo"), hl.Var("xi"), hl.Var("yi"), hl.Var("t")
        last = len(stages) - 1
        for j in range(last, 0, -GROUP):
            out = f["output"] if j == last else stages[j]
            halo = 4 * (last - j)  # the extra width and height of stage j's computed region
            tile_w, tile_h = (width + halo) // TILES[0], (height + halo) // TILES[1]
            out.compute_root().tile(x, y, xo, yo, xi, yi, tile_w, tile_h).fuse(xo, yo, t).parallel(t)
            out.vectorize(xi, vec)
            for s in stages[max(0, j - GROUP + 1) : j]:
                s.store_at(out, t).compute_at(out, yi).vectorize(s.args()[0], vec)

    def reference(self, inputs):
        img = inputs["input"]
        height, width = img.shape
        pad = RADIUS * STAGES
        cur = np.pad(img, pad, mode="edge")
        taps = [(RADIUS + d, np.uint16(weight(d))) for d in range(-RADIUS, RADIUS + 1)]
        for _ in range(STAGES):
            # The 5x5 weights are an outer product: a 5-tap pass along x, then one along y. Exact
            # in uint16, whose wrapping sums and products are the arithmetic of a ring.
            h, w = cur.shape
            rows = np.zeros((h, w - 2 * RADIUS), np.uint16)
            for k, wk in taps:
                rows += wk * cur[:, k : k + w - 2 * RADIUS]
            cur = np.zeros((h - 2 * RADIUS, w - 2 * RADIUS), np.uint16)
            for k, wk in taps:
                cur += wk * rows[k : k + h - 2 * RADIUS]
        assert cur.shape == (height, width)
        return cur


APP = StencilChain()
