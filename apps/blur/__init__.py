"""3x3 separable box blur of a uint16 image, as in Halide's blur app."""

from __future__ import annotations

import numpy as np

from apps.common import App, Built


class Blur(App):
    name = "blur"
    description = "3x3 box blur, uint16 (Halide's blur app)"

    image_sizes = {"small": (64, 96), "gpu": (1536, 2560), "default": (1920, 2560)}

    def inputs_from_image(self, img):
        # 14-bit values, as a camera gives: sums of three stay inside uint16
        grey = img if img.ndim == 2 else img[..., :3].mean(axis=2)
        return {"input": (grey * 64).astype(np.uint16)}

    def build(self, hl, inputs):
        img = inputs["input"]
        x, y = hl.Var("x"), hl.Var("y")
        inp = hl.Buffer(img, "input")
        blur_x, blur_y = hl.Func("blur_x"), hl.Func("blur_y")
        blur_x[x, y] = (inp[x - 1, y] + inp[x, y] + inp[x + 1, y]) / 3
        blur_y[x, y] = (blur_x[x, y - 1] + blur_x[x, y] + blur_x[x, y + 1]) / 3
        h, w = img.shape
        # Like Halide's app, the output is the interior the 3x3 window fits in.
        return Built(blur_y, [w - 2, h - 2], hl.UInt(16), {"blur_x": blur_x, "blur_y": blur_y},
                     {"x": x, "y": y}, output_mins=[1, 1])

    def schedule(self, hl, built):
        """Register blocks, as Halide's Adams2019 autoscheduler schedules blur: per vector of
        6 output rows, blur_x's 8 rows computed into registers (stack storage with
        constant indices), each input row loaded once per block; strips of 48 rows in
        parallel. 1.4x faster than Halide's app schedule (benchmarks/schedules.py's blur) in
        both libraries on a Zen 3 (AVX2) host; 6 rows measured best there (4: 0.94x its speed, 8:
        0.95x, 12: 0.93x, 16: 0.75x: 16 vector registers)."""
        x, y = built.vars["x"], built.vars["y"]
        xi, yi, yii = hl.Var("xi"), hl.Var("yi"), hl.Var("yii")
        blur_x, blur_y = built.funcs["blur_x"], built.funcs["blur_y"]
        w, h = built.output_sizes
        vector = min(w, hl.get_host_target().natural_vector_size(hl.UInt(16)))
        strip = min(48, h)  # ShiftInwards: a split never larger than what it splits
        rows = min(6, strip)
        shift = hl.TailStrategy.ShiftInwards
        blur_y.split(y, y, yi, strip, shift).split(x, x, xi, vector, shift).split(yi, yi, yii, rows, shift)
        blur_y.reorder(xi, yii, x, yi, y).vectorize(xi).unroll(yii).parallel(y)
        blur_x.compute_at(blur_y, x).store_in(hl.MemoryType.Stack)
        blur_x.split(x, x, xi, vector, shift).reorder(xi, x, y).vectorize(xi).unroll(y)

    def gpu_schedule(self, hl, built):
        """The fastest on an H200 of the GPU schedules below (benchmarks/results/gpu_h200.json):
        8 rows per thread in 64x32 tiles, 1.88 TB/s against 1.2 for a thread per pixel and 0.89
        for Halide's tutorial schedule (blur_x in shared memory)."""
        self.gpu_rows_per_thread(hl, built)

    def gpu_shared_tiles(self, hl, built):
        """Halide's GPU blur: 32x8 output tiles, one thread per pixel; blur_x computed per tile
        in shared memory (34 rows of 8+2), by the same block's threads, before a barrier."""
        x, y = built.vars["x"], built.vars["y"]
        xo, yo, xi, yi = hl.Var("xo"), hl.Var("yo"), hl.Var("xi"), hl.Var("yi")
        blur_x, blur_y = built.funcs["blur_x"], built.funcs["blur_y"]
        blur_y.gpu_tile(x, y, xo, yo, xi, yi, 32, 8, hl.TailStrategy.GuardWithIf)
        blur_x.compute_at(blur_y, xo).gpu_threads(x, y)

    def gpu_rows_per_thread(self, hl, built, width=64, rows=8, threads_y=4):
        """Each thread computes `rows` outputs down a column: blur_x computed per thread for
        its rows + 2 (in registers, unrolled), so each input row is read once per thread and
        not again by the thread below; tiles of `width` x rows * threads_y, no shared memory."""
        x, y = built.vars["x"], built.vars["y"]
        xo, yo, xi, yi, yt, yj = (hl.Var(n) for n in ("xo", "yo", "xi", "yi", "yt", "yj"))
        blur_x, blur_y = built.funcs["blur_x"], built.funcs["blur_y"]
        w, h = built.output_sizes
        width, threads_y = min(width, w), max(1, min(threads_y, h // rows))  # the last tiles shift inwards
        blur_y.tile(x, y, xo, yo, xi, yi, width, rows * threads_y).split(yi, yt, yj, rows)
        blur_y.reorder(yj, xi, yt, xo, yo).gpu_blocks(xo, yo).gpu_threads(xi, yt).unroll(yj)
        blur_x.compute_at(blur_y, xi).unroll(y)

    def gpu_vector_rows(self, hl, built, vector=8, threads_x=32, rows=8, threads_y=4):
        """Each thread computes `vector` adjacent outputs of `rows` rows: blur_x per thread for
        its rows + 2 in registers; the loads and stores of a row's consecutive elements are
        vector accesses as wide as their alignment allows (cuda_vectors). The output's min and
        row stride are constrained to what the app's output has, so they are compiled in and its
        row starts known: rows of 2558 elements start at even elements, so 4-byte accesses here."""
        x, y = built.vars["x"], built.vars["y"]
        xo, yo, xi, yi, xt, xv, yt, yj = (hl.Var(n) for n in ("xo", "yo", "xi", "yi", "xt", "xv", "yt", "yj"))
        blur_x, blur_y = built.funcs["blur_x"], built.funcs["blur_y"]
        (w, h), (x0, y0) = built.output_sizes, built.output_mins or (0, 0)
        width, threads_y = min(vector * threads_x, w), max(1, min(threads_y, h // rows))
        out = blur_y.output_buffer()
        out.dim(0).set_min(x0)
        out.dim(1).set_min(y0).set_stride(w)
        blur_y.bound(x, x0, w).bound(y, y0, h)  # the last tiles shift inwards: every tile is whole
        blur_y.tile(x, y, xo, yo, xi, yi, width, rows * threads_y).split(xi, xt, xv, vector).split(yi, yt, yj, rows)
        blur_y.reorder(xv, yj, xt, yt, xo, yo).gpu_blocks(xo, yo).gpu_threads(xt, yt).vectorize(xv).unroll(yj)
        blur_x.compute_at(blur_y, xt).vectorize(x).unroll(y)

    def gpu_inline(self, hl, built):
        """A thread per output pixel in 64x4 tiles, blur_x inlined: the nine loads per pixel
        come from the L1 cache."""
        x, y = built.vars["x"], built.vars["y"]
        xo, yo, xi, yi = hl.Var("xo"), hl.Var("yo"), hl.Var("xi"), hl.Var("yi")
        built.funcs["blur_y"].gpu_tile(x, y, xo, yo, xi, yi, 64, 4, hl.TailStrategy.GuardWithIf)

    gpu_variants = {
        "shared_32x8": lambda self, hl, built: self.gpu_shared_tiles(hl, built),
        "inline_64x4": lambda self, hl, built: self.gpu_inline(hl, built),
        "rows_per_thread_32x16": lambda self, hl, built: self.gpu_rows_per_thread(hl, built, 32, 16, 4),
        "vector_rows_8x8": lambda self, hl, built: self.gpu_vector_rows(hl, built),
        "vector_rows_2x8": lambda self, hl, built: self.gpu_vector_rows(hl, built, 2, 64, 8, 4),
    }

    def reference(self, inputs):
        img = inputs["input"]
        bx = ((img[:, :-2] + img[:, 1:-1] + img[:, 2:]) // 3).astype(np.uint16)  # uint16 wraps
        return ((bx[:-2] + bx[1:-1] + bx[2:]) // 3).astype(np.uint16)

    def to_image(self, result):
        return (result >> 6).astype(np.uint8)


APP = Blur()
