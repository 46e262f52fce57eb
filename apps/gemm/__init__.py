"""Single-precision matrix multiply C = A·B with an RDom over the shared dimension.

Layout: numpy A is (M, K), B is (K, N), C is (M, N); in Halide order A[k, y], B[x, k] and
C[x, y], so x runs along a row of C (contiguous) and y down its columns.
"""

from __future__ import annotations

import numpy as np

from apps.common import App, Built, register_file


class Gemm(App):
    name = "gemm"
    description = "float32 matrix multiply C = A·B, register-tiled"
    exact = False  # vector accumulators and FMA (Halide's default) change rounding
    rtol, atol = 1e-4, 1e-3

    def inputs(self, size="default"):
        # small is non-square and its sizes are not multiples of the 48x8 tile
        sizes = {"small": (50, 70, 30), "large": (2048, 2048, 2048), "gpu": (4096, 4096, 4096)}
        m, n, k = sizes.get(size, (1024, 1024, 1024))
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
        a_panel, b_panel, prod, out = hl.Func("a_panel"), hl.Func("b_panel"), hl.Func("prod"), hl.Func("out")
        # A and B as Funcs, so that a schedule can copy (pack) parts of them; inlined unless scheduled
        a_panel[x, y] = A[x, y]
        b_panel[x, y] = B[x, y]
        prod[x, y] = hl.f32(0)
        prod[x, y] += a_panel[k, y] * b_panel[x, k]
        out[x, y] = prod[x, y]
        return Built(out, [n, m], hl.Float(32), {"a_panel": a_panel, "b_panel": b_panel, "prod": prod, "out": out},
                     {"x": x, "y": y, "k": k}, sizes={"k": kk})

    def schedule(self, hl, built):
        """Register tiles of C, three vectors by 8 rows (24 accumulators) where the host has 32
        vector registers (AVX-512), by 4 rows (12) where it has 16 (AVX2), walked a column of
        tiles at a time. For each column the matching panel of B (48 columns, all of
        k) is first copied into a contiguous buffer (packed, as BLAS libraries do): it then
        stays in the L2 cache for every tile of the column, and consecutive k rows are adjacent
        in memory instead of a row of B apart. Columns are the parallel tasks (one parallel
        loop per call: waking threads for a loop per column cost more than the work on this VM).
        Each tile keeps its partial sums (prod) in registers and steps through k: 3 vector loads
        of the panel, a broadcast of A per row and 3 multiply-adds per row per step. Sizes that are not
        multiples of the tile are handled by shifting the last tile inwards (it overlaps its
        neighbour); matrices narrower than a tile get a smaller one."""
        x, y, k = built.vars["x"], built.vars["y"], built.vars["k"]
        b_panel, prod, out = built.funcs["b_panel"], built.funcs["prod"], built.funcs["out"]
        w, h = built.output_sizes
        lanes, registers = register_file(hl)
        vec = lanes if w >= lanes else 1
        tx = 3 * vec if w >= 3 * vec else vec
        ty = min(8 if registers >= 32 else 4, h)  # beside 3 panel vectors and a broadcast
        xi, yi = hl.Var("xi"), hl.Var("yi")
        out.tile(x, y, xi, yi, tx, ty).reorder(xi, yi, y, x).parallel(x).unroll(yi)
        b_panel.compute_at(out, x)
        prod.compute_at(out, y).unroll(y)
        prod.update(0).reorder(x, y, k).unroll(y)
        if vec > 1:
            b_panel.vectorize(x, vec)
            out.vectorize(xi, vec).unroll(xi)
            prod.vectorize(x, vec).unroll(x)
            prod.update(0).vectorize(x, vec).unroll(x)

    def gpu_schedule(self, hl, built):
        """Shared-memory tiles of 128x128 with 8x8 accumulators per thread in registers, the
        fastest on an H200 of the schedules below (benchmarks/results/gpu_h200.json)."""
        self.gpu_shared_tiles(hl, built, 128)

    def gpu_shared_tiles(self, hl, built, tile=64):
        """Shared-memory tiling: tile x tile outputs of C per block of 16x16 threads, each thread
        (tile/16)^2 outputs 16 apart (so a warp's loads from shared memory hit distinct banks),
        unrolled, its partial sums in its registers (prod stored in registers at block level:
        each thread owns its outputs). k advances 16 at a time: the threads copy the matching
        16 x tile panels of A and B into shared memory (consecutive threads, consecutive
        addresses), meet at a barrier, and each adds its outputs' products."""
        x, y, k = built.vars["x"], built.vars["y"], built.vars["k"]
        a_panel, b_panel = built.funcs["a_panel"], built.funcs["b_panel"]
        prod, out = built.funcs["prod"], built.funcs["out"]
        xo, yo, xi, yi, tx, ty, xt, yt = (hl.Var(n) for n in ("xo", "yo", "xi", "yi", "tx", "ty", "xt", "yt"))
        ko, ki = hl.RVar("ko"), hl.RVar("ki")
        w, h = built.output_sizes
        tile = tile if min(w, h) >= tile else 16  # the last tiles shift inwards: every tile is whole
        out.tile(x, y, xo, yo, xi, yi, tile, tile, hl.TailStrategy.ShiftInwards)
        out.tile(xi, yi, xt, yt, tx, ty, 16, 16).reorder(xt, yt, tx, ty, xo, yo)
        out.gpu_blocks(xo, yo).gpu_threads(tx, ty).unroll(xt).unroll(yt)
        prod.compute_at(out, xo).tile(x, y, xt, yt, tx, ty, 16, 16).reorder(xt, yt, tx, ty)
        prod.gpu_threads(tx, ty).unroll(xt).unroll(yt).store_in(hl.MemoryType.Register)
        upd = prod.update(0)
        upd.split(k, ko, ki, 16).tile(x, y, xt, yt, tx, ty, 16, 16).reorder(xt, yt, ki, tx, ty, ko)
        upd.gpu_threads(tx, ty).unroll(xt).unroll(yt)
        a_panel.compute_at(prod, ko).split(y, yt, ty, 16).reorder(yt, x, ty).gpu_threads(x, ty).unroll(yt)
        b_panel.compute_at(prod, ko).split(x, xt, tx, 16).reorder(xt, tx, y).gpu_threads(tx, y).unroll(xt)

    def gpu_vector_tiles(self, hl, built, tile=128, k_step=8, wide_copies=False):
        """The classic CUDA sgemm shape: tile x tile outputs per block of (tile/8)^2 threads,
        each thread 8x8 outputs as 2x2 groups of 4x4 (the groups tile/2 apart, so neighbouring
        threads read neighbouring 16-byte runs of shared memory), accumulated in registers
        (prod stored in registers at block level). For each k_step values of k the block copies
        panels of A (stored transposed: rows of the tile contiguous) and B into shared memory;
        for each k each thread copies its 4 rows of A and 4 columns of B per group into
        registers (a_panel.in() and b_panel.in(): consecutive aligned elements, so 16-byte
        vector loads), then does its 64 multiply-adds. With wide_copies, each thread copies 4
        consecutive elements of A's and B's rows into the panels (16-byte global loads, and
        16-byte shared stores for B's), not 4 elements 16 apart."""
        x, y, k = built.vars["x"], built.vars["y"], built.vars["k"]
        a_panel, b_panel = built.funcs["a_panel"], built.funcs["b_panel"]
        prod, out = built.funcs["prod"], built.funcs["out"]
        xo, yo, xi, yi, xh, yh, xr, yr, tx, ty, xv, yv = (
            hl.Var(n) for n in ("xo", "yo", "xi", "yi", "xh", "yh", "xr", "yr", "tx", "ty", "xv", "yv"))
        ko, ki = hl.RVar("ko"), hl.RVar("ki")
        w, h = built.output_sizes
        tile = tile if min(w, h) >= tile else 32  # the last tiles shift inwards: every tile is whole

        def thread_tiles(stage, xx, yy, *outer):  # xx = xh * tile/2 + tx * 4 + xv, likewise yy
            stage.split(xx, xh, xr, tile // 2).split(xr, tx, xv, 4).split(yy, yh, yr, tile // 2).split(yr, ty, yv, 4)
            stage.reorder(xv, yv, xh, yh, *outer[:1], tx, ty, *outer[1:]).gpu_threads(tx, ty)
            stage.unroll(xv).unroll(yv).unroll(xh).unroll(yh)

        out.bound(x, 0, w).bound(y, 0, h).tile(x, y, xo, yo, xi, yi, tile, tile)
        thread_tiles(out, xi, yi)
        out.reorder(xv, yv, xh, yh, tx, ty, xo, yo).gpu_blocks(xo, yo)
        prod.compute_at(out, xo).store_in(hl.MemoryType.Register)
        thread_tiles(prod, x, y)
        upd = prod.update(0).split(k, ko, ki, k_step)
        thread_tiles(upd, x, y, ki, ko)  # each k: the 64 products, from registers
        a_panel.in_(prod).compute_at(prod, yh).unroll(x).unroll(y)  # one k, 4 rows
        b_panel.in_(prod).compute_at(prod, xh).unroll(x).unroll(y)  # 4 columns, one k
        a_panel.compute_at(prod, ko).reorder_storage(y, x)
        b_panel.compute_at(prod, ko)
        if wide_copies and built.sizes["k"] % k_step == 0:  # (else the last panels are narrower)
            # The block's (tile/8)^2 threads copy k_step x tile elements of each, 4 at a time: a
            # warp takes 32 rows of A (its stores, transposed, in 32 banks) or 512 bytes of a row of B
            t_side, xq, xs, yq, ys, t, tu, tt = (
                tile // 8, *(hl.Var(n) for n in ("xq", "xs", "yq", "ys", "t", "tu", "tt")))
            a_panel.bound_extent(x, k_step).bound_extent(y, tile)  # (their sizes: constants to split)
            b_panel.bound_extent(x, tile).bound_extent(y, k_step)
            a_panel.split(x, xq, xv, 4).split(y, yq, ys, t_side).reorder(xv, ys, yq, xq).fuse(yq, xq, t)
            a_panel.split(t, tu, tt, t_side).reorder(xv, tu, ys, tt).gpu_threads(ys, tt).unroll(xv).unroll(tu)
            b_panel.split(x, xq, xv, 4).split(xq, xq, xs, t_side).reorder(xv, xs, xq, y).fuse(xq, y, t)
            b_panel.split(t, tu, tt, t_side).reorder(xv, tu, xs, tt).gpu_threads(xs, tt).unroll(xv).unroll(tu)
        else:
            a_panel.split(y, yr, ty, 16).reorder(yr, x, ty).gpu_threads(x, ty).unroll(yr)
            b_panel.split(x, xr, tx, 16).reorder(xr, tx, y).gpu_threads(tx, y).unroll(xr)

    def gpu_register_tiles(self, hl, built, block=(64, 16), per_thread=(4, 8), k_step=8, a_by_rows=True):
        """Halide's CUDA mat_mul schedule (apps/cuda_mat_mul): no shared memory; each thread
        keeps a per_thread tile of C in registers (prod computed per thread, unrolled), and for
        every k_step values of k copies the matching slivers of A and B into registers (served
        by the L1 cache, shared between the threads of a block) before the unrolled products."""
        x, y, k = built.vars["x"], built.vars["y"], built.vars["k"]
        a_panel, b_panel = built.funcs["a_panel"], built.funcs["b_panel"]
        prod, out = built.funcs["prod"], built.funcs["out"]
        xi, yi, xii, yii = hl.Var("xi"), hl.Var("yi"), hl.Var("xii"), hl.Var("yii")
        w, h = built.output_sizes
        bx, by = (block if min(w, h) >= max(block) else (per_thread[0] * 2, per_thread[1] * 2))
        # The output's size is the inputs': bound, its tiles' corners are multiples of the tile, so
        # the slivers of B load as aligned 16-byte vectors. (The last tiles shift inwards.)
        out.bound(x, 0, w).bound(y, 0, h)
        out.tile(x, y, xi, yi, bx, by).tile(xi, yi, xii, yii, per_thread[0], per_thread[1])
        out.gpu_blocks(x, y).gpu_threads(xi, yi).unroll(xii).unroll(yii)
        prod.compute_at(out, xi).unroll(x).unroll(y)
        prod.update(0).reorder(x, y, k).unroll(x).unroll(y).unroll(k, k_step)
        b_panel.compute_at(prod, k).unroll(x).unroll(y)
        a_panel.compute_at(prod, k).unroll(x).unroll(y)
        if not a_by_rows:  # down columns of A: element loads, fewer registers live at once
            a_panel.reorder(y, x)

    gpu_variants = {
        "shared_64": lambda self, hl, built: self.gpu_shared_tiles(hl, built, 64),
        "vector_tiles_128": lambda self, hl, built: self.gpu_vector_tiles(hl, built),
        "vector_tiles_128_k16": lambda self, hl, built: self.gpu_vector_tiles(hl, built, 128, 16),
        "vector_tiles_128_wide_copies": lambda self, hl, built: self.gpu_vector_tiles(hl, built, wide_copies=True),
        "vector_tiles_64": lambda self, hl, built: self.gpu_vector_tiles(hl, built, 64),
        "registers_64x16_4x8": lambda self, hl, built: self.gpu_register_tiles(hl, built),
        "registers_64x16_4x8_a_columns": lambda self, hl, built: self.gpu_register_tiles(hl, built, a_by_rows=False),
        "registers_128x32_8x8_k8": lambda self, hl, built: self.gpu_register_tiles(hl, built, (128, 32), (8, 8), 8),
    }

    def reference(self, inputs):
        """numpy's matmul (OpenBLAS)."""
        return inputs["A"] @ inputs["B"]


APP = Gemm()
