"""Single-precision matrix multiply C = A·B with an RDom over the shared dimension.

Layout: numpy A is (M, K), B is (K, N), C is (M, N); in Halide order A[k, y], B[x, k] and
C[x, y], so x runs along a row of C (contiguous) and y down its columns.
"""

from __future__ import annotations

import numpy as np

from apps.common import App, Built


class Gemm(App):
    name = "gemm"
    description = "float32 matrix multiply C = A·B, register-tiled"
    exact = False  # vector accumulators and FMA (Halide's default) change rounding
    rtol, atol = 1e-4, 1e-3

    def inputs(self, size="default"):
        # small is non-square and its sizes are not multiples of the 48x8 tile
        m, n, k = (50, 70, 30) if size == "small" else (1024, 1024, 1024)
        rng = np.random.default_rng(1)
        return {"A": rng.random((m, k), dtype=np.float32), "B": rng.random((k, n), dtype=np.float32)}

    def flops(self, inputs):
        """Floating-point operations of one product: a multiply and an add per (i, j, k)."""
        (m, k), n = inputs["A"].shape, inputs["B"].shape[1]
        return 2 * m * n * k

    def build(self, hl, inputs):
        a, b = inputs["A"], inputs["B"]
        (m, kk), n = a.shape, b.shape[1]
        x, y = hl.Var("x"), hl.Var("y")
        A, B = hl.Buffer(a, "A"), hl.Buffer(b, "B")
        k = hl.RDom([hl.Range(0, kk)], name="k")
        prod, out = hl.Func("prod"), hl.Func("out")
        prod[x, y] = hl.f32(0)
        prod[x, y] += A[k, y] * B[x, k]
        out[x, y] = prod[x, y]
        return Built(out, [n, m], hl.Float(32), {"prod": prod, "out": out},
                     {"x": x, "y": y, "k": k})

    def schedule(self, hl, built):
        """Each task owns a tile of C (three 16-float vectors by 8 rows = 24 accumulator
        registers): the tile's partial sums (prod) live in the task, and its update loops over k
        outermost so every step is 3 vector loads of B, 8 broadcasts of A and 24 multiply-adds.
        Tiles are fused into one parallel loop. Sizes that are not multiples of the tile are
        handled by shifting the last tile inwards (it overlaps its neighbour); matrices narrower
        than a tile get a smaller one."""
        x, y, k = built.vars["x"], built.vars["y"], built.vars["k"]
        prod, out = built.funcs["prod"], built.funcs["out"]
        w, h = built.output_sizes
        vec = 16 if w >= 16 else 1
        tx = 3 * vec if w >= 3 * vec else vec
        ty = min(8, h)
        xi, yi, xy = hl.Var("xi"), hl.Var("yi"), hl.Var("xy")
        out.tile(x, y, xi, yi, tx, ty).fuse(x, y, xy).parallel(xy).unroll(yi)
        prod.compute_at(out, xy).unroll(y)
        prod.update(0).reorder(x, y, k).unroll(y)
        if vec > 1:
            out.vectorize(xi, vec).unroll(xi)
            prod.vectorize(x, vec).unroll(x)
            prod.update(0).vectorize(x, vec).unroll(x)

    def reference(self, inputs):
        """numpy's matmul (OpenBLAS)."""
        return inputs["A"] @ inputs["B"]


APP = Gemm()
