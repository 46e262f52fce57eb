"""The measurements behind the cost model's default unit costs: `python -m benchmarks.unit_costs`.

At one thread (HL_NUM_THREADS=1), nanoseconds per element of:
- a 256-entry table read per pixel, scalar and vectorized (the model's `gathers`: a lane's load
  at a data-dependent index costs about what a scalar load does), and a uint8 and uint16 table's,
  the pipeline's own (gathered in 32-bit words) and an input's (words clamped to its end, and a
  shift: NARROW_INPUT_GATHER), each vectorized one gathered and lane by lane (which this CPU
  compiles is x86.SLOW_GATHERS's choice);
- a histogram's read-modify-write of a bin per pixel, scalar and vectorized over columns (what a
  `scatters` lane costs when the bins stay in cache);
- a 3-row line buffer (a producer computed per row of its consumer, stored outside, sliding),
  from 3 KB to 768 KB (`bytes_l1` against `bytes_cache`: L2-resident windows stream at L1's cost);
- a copy of an image (beyond L2) row by row, and tiled or in column strips (`bytes_partial_rows`:
  the L3 cache and memory stream whole rows best).
"""

from __future__ import annotations

import os

os.environ.setdefault("HL_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import pyhalide as hl  # noqa: E402
from autoscheduler.peaks import best_seconds  # noqa: E402
from pyhalide.codegen import x86  # noqa: E402

W, H = 2560, 1536


def _ns_per_element(f, buf, n: int) -> float:
    f.compile_jit()
    return best_seconds(lambda: f.realize(buf), 9) / n * 1e9


def table_reads() -> dict:
    rng = np.random.default_rng(0)
    indices = hl.Buffer(rng.integers(0, 256, (H, W)).astype(np.uint8), "indices")
    input_table = hl.Buffer((np.arange(256) * 3 + 1).astype(np.uint16), "input_table")
    out = {}
    for t, vector, own in ((hl.Float(32), 0, True), (hl.Float(32), 16, True), (hl.Float(32), 64, True),
                           (hl.UInt(8), 32, True), (hl.UInt(16), 32, True), (hl.UInt(16), 32, False)):
        where = "the pipeline's" if own else "an input"
        for form in (("gathered", "lane by lane") if vector else ("scalar",)):
            x, y = hl.Var("x"), hl.Var("y")
            table, f = hl.Func("table"), hl.Func("lookup")
            table[x] = hl.cast(t, x * 3 + 1)
            f[x, y] = (table if own else input_table)[hl.cast(hl.Int(32), indices[x, y])]
            table.compute_root()
            if vector:
                f.vectorize(x, vector)
            with x86.host_gathers_slow(form == "lane by lane"):
                ns = _ns_per_element(f, hl.Buffer(t, [W, H]), W * H)
            out[f"{t} table read ({where}), vector {vector}, {form}"] = ns
    return out


def histogram_updates() -> dict:
    rng = np.random.default_rng(1)
    values = hl.Buffer(rng.integers(0, 16, (H, W)).astype(np.uint8), "values")
    out = {}
    for vector in (0, 16):
        x, b = hl.Var("x"), hl.Var("b")
        r = hl.RDom([(0, H)])
        h = hl.Func("column_histograms")
        h[x, b] = hl.f32(0)
        h[x, hl.clamp(hl.cast(hl.Int(32), values[x, r.x]), 0, 15)] += hl.f32(1)
        h.update(0).reorder(x, r.x)
        if vector:
            h.vectorize(x, vector)
            h.update(0).vectorize(x, vector)
        out[f"bin update, vector {vector}"] = _ns_per_element(h, hl.Buffer(hl.Float(32), [W, 16]), W * H)
    return out


def line_buffers() -> dict:
    n = 1 << 22
    out = {}
    for width in (256, 1024, 4096, 16384, 65536):
        rows = n // width
        x, y = hl.Var("x"), hl.Var("y")
        data = hl.Buffer(np.random.default_rng(2).random((rows + 2, width)).astype(np.float32), "rows")
        f, g = hl.Func("produced"), hl.Func("consumed")
        f[x, y] = data[x, y] * 2 + 1
        g[x, y] = f[x, y] + f[x, y + 1] + f[x, y + 2]
        f.store_root().compute_at(g, y).vectorize(x, 16)
        g.vectorize(x, 16)
        kb = 3 * width * 4 // 1024
        out[f"line buffer {kb} KB"] = _ns_per_element(g, hl.Buffer(hl.Float(32), [width, rows]), n)
    return out


def row_walks() -> dict:
    data = hl.Buffer(np.random.default_rng(3).random((H, W)).astype(np.float32), "image")
    out = {}
    for tile in ((W, H), (512, H), (64, H), (512, 64), (64, 64), (64, 16), (16, 8)):
        x, y, xo, yo, xi, yi = (hl.Var(n) for n in ("x", "y", "xo", "yo", "xi", "yi"))
        f = hl.Func("copied")
        f[x, y] = data[x, y] * 2 + 1
        if tile[1] < H:
            f.tile(x, y, xo, yo, xi, yi, *tile).vectorize(xi, 16)
        elif tile[0] < W:
            f.split(x, xo, xi, tile[0]).reorder(xi, y, xo).vectorize(xi, 16)
        else:
            f.vectorize(x, 16)
        label = "copy by rows" if tile == (W, H) else f"copy in {tile[0]}x{tile[1]} tiles"
        out[label] = _ns_per_element(f, hl.Buffer(hl.Float(32), [W, H]), W * H)
    return out


def main() -> None:
    for label, ns in {**table_reads(), **histogram_updates(), **line_buffers(), **row_walks()}.items():
        print(f"{label:62s} {ns:6.3f} ns/element")


if __name__ == "__main__":
    main()
