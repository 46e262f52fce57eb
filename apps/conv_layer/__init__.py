"""A convolution layer of a neural network: 3x3 filter, bias, ReLU, float32 (Halide's conv_layer).

Layout, as in Halide's conv_layer app (Halide order, innermost first; numpy shapes are reversed):

    input   [c_in, x, y, n]            numpy (N, H + 2, W + 2, C_in)
    filter  [c_out, fx, fy, c_in]      numpy (C_in, 3, 3, C_out)
    bias    [c_out]                    numpy (C_out,)
    output  [c_out, x, y, n]           numpy (N, H, W, C_out)

    output(c, x, y, n) = max(0, bias(c) + sum over ci, fx, fy of
                                filter(c, fx, fy, ci) * input(ci, x + fx, y + fy, n))

The input already carries the one-pixel border the 3x3 window needs (a "valid" convolution),
and channels are innermost, so a vector of output channels is a dense load of filter weights.
"""

from __future__ import annotations

import numpy as np

from apps.common import App, Built, register_file


class ConvLayer(App):
    name = "conv_layer"
    description = "3x3 convolution layer + bias + ReLU, float32 (Halide's conv_layer)"
    exact = False  # the reduction is vectorised and FMA-contracted in Halide: a different rounding
    rtol, atol = 1e-4, 1e-4
    # the register block, vectors of output channels x pixels, by the host's vector registers:
    # 24 accumulators of 32 registers (AVX-512), 12 of 16 (AVX2)
    register_blocks = {32: (4, 6), 16: (2, 6)}

    def inputs(self, size="default"):
        # (batch, channels in, channels out, output width, output height)
        n, ci, co, w, h = (1, 8, 8, 10, 6) if size == "small" else (5, 128, 128, 100, 80)
        rng = np.random.default_rng(2)
        return {
            "input": rng.standard_normal((n, h + 2, w + 2, ci), dtype=np.float32),
            "filter": (rng.standard_normal((ci, 3, 3, co), dtype=np.float32) / np.sqrt(9 * ci)).astype(np.float32),
            "bias": rng.standard_normal(co, dtype=np.float32),
        }

    def flops(self, inputs):
        """A multiply and an add per output value and filter tap (bias and ReLU not counted)."""
        n, hp, wp, ci = inputs["input"].shape
        co = inputs["bias"].shape[0]
        return 2 * n * (hp - 2) * (wp - 2) * co * ci * 9

    def build(self, hl, inputs):
        inp, filt, bias = inputs["input"], inputs["filter"], inputs["bias"]
        n, hp, wp, ci = inp.shape
        co = bias.shape[0]
        input_b = hl.Buffer(inp, "input")
        filter_b = hl.Buffer(filt, "filter")
        bias_b = hl.Buffer(bias, "bias")
        c, x, y, b = hl.Var("c"), hl.Var("x"), hl.Var("y"), hl.Var("n")
        r = hl.RDom([hl.Range(0, ci), hl.Range(0, 3), hl.Range(0, 3)], name="r")
        conv, relu = hl.Func("conv"), hl.Func("relu")
        conv[c, x, y, b] = bias_b[c]
        conv[c, x, y, b] += filter_b[c, r.y, r.z, r.x] * input_b[r.x, x + r.y, y + r.z, b]
        relu[c, x, y, b] = hl.max(conv[c, x, y, b], hl.f32(0))
        return Built(relu, [co, wp - 2, hp - 2, n], hl.Float(32), {"conv": conv, "relu": relu},
                     {"c": c, "x": x, "y": y, "n": b, "r": r}, sizes={"channels_in": ci})

    def schedule(self, hl, built):
        """Register blocking, as Halide's CPU schedule does: each block of the output is
        `tw` vectors of output channels by `th` pixels of one row (`register_blocks`: 4 x 16
        channels by 6 pixels with AVX-512, 2 x 8 by 6 with AVX2), computed in conv per block,
        with the reduction over input channels and the 3x3 window outside the block's loops;
        every reduction step loads `tw` filter vectors and broadcasts `th` input values. Rows of
        all images are fused into one parallel loop; within a row, blocks run over x inside each
        group of output channels."""
        c, x, y, b, r = (built.vars[v] for v in ("c", "x", "y", "n", "r"))
        conv, relu = built.funcs["conv"], built.funcs["relu"]
        n_c, w = built.output_sizes[0], built.output_sizes[1]
        lanes, registers = register_file(hl)
        vec = next(v for v in (lanes, 8, 1) if n_c >= v)
        tile_vectors, tile_pixels = self.register_blocks[registers]
        tw = tile_vectors if n_c >= tile_vectors * vec else 1
        th = min(tile_pixels, w)
        co, ci, xo, xi, yn = hl.Var("co"), hl.Var("ci"), hl.Var("xo"), hl.Var("xi"), hl.Var("yn")
        relu.split(c, co, ci, vec * tw).split(x, xo, xi, th)
        relu.reorder(ci, xi, xo, co, y, b).fuse(y, b, yn).parallel(yn).unroll(xi)
        conv.compute_at(relu, xo).unroll(x)
        conv.update(0).reorder(c, x, r.x, r.y, r.z, y).unroll(x)
        if vec > 1:
            relu.vectorize(ci, vec).unroll(ci)
            conv.vectorize(c, vec).unroll(c)
            conv.update(0).vectorize(c, vec).unroll(c)

    def gpu_schedule(self, hl, built):
        """Register blocks of 4 channels by 4 pixels per thread, the fastest on an H200 of the
        schedules below (benchmarks/results/gpu_h200.json; 1.7x a thread per output)."""
        self.gpu_register_blocks(hl, built)

    def gpu_thread_per_output(self, hl, built):
        """One thread per output value: blocks of 32 output channels by 8 pixels of a row (a
        warp spans the channels, so filter loads are coalesced and input loads broadcast); the
        grid's third dimension runs over rows of every image. Each thread accumulates its
        3x3xCin reduction in a register (conv computed per thread), then applies the ReLU."""
        c, x, y, b = (built.vars[v] for v in ("c", "x", "y", "n"))
        conv, relu = built.funcs["conv"], built.funcs["relu"]
        n_c, w = built.output_sizes[0], built.output_sizes[1]
        co, xo, ci, xi, yn = hl.Var("co"), hl.Var("xo"), hl.Var("ci"), hl.Var("xi"), hl.Var("yn")
        relu.gpu_tile(c, x, co, xo, ci, xi, min(32, n_c), min(8, w), hl.TailStrategy.GuardWithIf)
        relu.fuse(y, b, yn).gpu_blocks(yn)
        conv.compute_at(relu, ci)

    def gpu_register_blocks(self, hl, built, channels=4, pixels=4, threads=(32, 5), inputs_at_once=1):
        """Register blocking on the GPU: each thread computes `channels` adjacent output channels
        by `pixels` adjacent pixels of a row (conv per thread, unrolled), so each step of the
        reduction loads `channels` filter values and `pixels` input values for channels x
        pixels multiply-adds; a warp spans 32 x channels channels (its filter loads one
        contiguous run). Blocks of threads[0] x threads[1] threads; the grid's third
        dimension runs over rows of every image. With inputs_at_once, that many input channels
        per reduction step (unrolled): each pixel's input channels then load as one 16-byte
        vector, as each input channel's `channels` filter values do."""
        c, x, y, b, r = (built.vars[v] for v in ("c", "x", "y", "n", "r"))
        conv, relu = built.funcs["conv"], built.funcs["relu"]
        n_c, w = built.output_sizes[0], built.output_sizes[1]
        ch, px = min(channels, n_c), min(pixels, w)
        tc, tx = max(1, min(threads[0], n_c // ch)), max(1, min(threads[1], w // px))
        co, ci, ct, cj, xo, xi, xt, xj, yn = (hl.Var(n) for n in ("co", "ci", "ct", "cj", "xo", "xi", "xt", "xj", "yn"))
        relu.bound(c, 0, n_c)  # blocks of channels start at multiples of 4: the filter loads are vectors
        relu.split(c, co, ci, ch * tc).split(ci, ct, cj, ch)  # the last blocks shift inwards
        relu.split(x, xo, xi, px * tx).split(xi, xt, xj, px)
        relu.reorder(cj, xj, ct, xt, co, xo, y, b).fuse(y, b, yn)
        relu.gpu_blocks(co, xo, yn).gpu_threads(ct, xt).unroll(cj).unroll(xj)
        conv.compute_at(relu, ct).unroll(c).unroll(x)
        upd = conv.update(0)
        n_ci = built.sizes.get("channels_in", 1)
        if inputs_at_once > 1 and n_ci % inputs_at_once == 0:
            rxo, rxi = hl.RVar("rxo"), hl.RVar("rxi")
            upd.split(r.x, rxo, rxi, inputs_at_once).reorder(c, x, rxi, rxo, r.y, r.z, y, b).unroll(rxi)
        else:
            upd.reorder(c, x, r.x, r.y, r.z, y, b)
        upd.unroll(c).unroll(x)

    gpu_variants = {
        "thread_per_output": lambda self, hl, built: self.gpu_thread_per_output(hl, built),
        "registers_4x8": lambda self, hl, built: self.gpu_register_blocks(hl, built, 4, 8, (32, 3)),
        "registers_4x4_ci4": lambda self, hl, built: self.gpu_register_blocks(hl, built, inputs_at_once=4),
    }

    def torch_runner(self, torch, inputs, threads: int = 2):
        """PyTorch CPU on the same data: conv2d + bias + ReLU in its native NCHW layout (the
        layout changes happen once, outside the timed call; the result is a view in ours)."""
        torch.set_num_threads(threads)
        inp = torch.from_numpy(np.ascontiguousarray(inputs["input"].transpose(0, 3, 1, 2)))
        weight = torch.from_numpy(np.ascontiguousarray(inputs["filter"].transpose(3, 0, 1, 2)))
        bias = torch.from_numpy(inputs["bias"])

        def run():
            with torch.inference_mode():
                out = torch.relu(torch.nn.functional.conv2d(inp, weight, bias))
            return out.permute(0, 2, 3, 1).numpy()

        return run

    def reference(self, inputs):
        """im2col: gather the 3x3xC_in window of every output pixel into a row, then one matmul."""
        inp, filt, bias = inputs["input"], inputs["filter"], inputs["bias"]
        n, hp, wp, ci = inp.shape
        h, w, co = hp - 2, wp - 2, bias.shape[0]
        cols = np.empty((n, h, w, 3, 3, ci), np.float32)
        for fy in range(3):
            for fx in range(3):
                cols[:, :, :, fy, fx, :] = inp[:, fy:fy + h, fx:fx + w, :]
        weights = filt.transpose(1, 2, 0, 3).reshape(9 * ci, co)  # rows ordered (fy, fx, ci)
        out = cols.reshape(-1, 9 * ci) @ weights + bias
        return np.maximum(out, 0).reshape(n, h, w, co)

APP = ConvLayer()
