"""Histogram equalization of a uint8 grey image.

The algorithm:
  hist[v]  = number of pixels of value v            (an update over an RDom spanning the image)
  cdf[v]   = hist[0] + ... + hist[v]                 (a scan: an update over an RDom of 1..255)
  cdf_min  = the smallest non-zero cdf value          (a Func of no dimensions)
  lut[v]   = round(255 (cdf[v] - cdf_min) / (N - cdf_min))
  output   = lut[input]                               (every pixel remapped through the table)
so the output's values are spread evenly over 0..255.
"""

from __future__ import annotations

import numpy as np

from apps.common import App, Built


class HistogramEqualize(App):
    name = "histogram_equalize"
    description = "histogram equalization, uint8 grey (histogram, scan, remap)"

    image_sizes = {"small": (64, 96), "default": (1536, 2560)}

    def inputs_from_image(self, img):
        grey = img if img.ndim == 2 else img[..., :3].mean(axis=2)
        # squeeze the values into a low-contrast band, which equalization stretches back out
        return {"input": (60 + grey * 0.35).astype(np.uint8)}

    def build(self, hl, inputs):
        img = inputs["input"]
        h, w = img.shape
        n = w * h
        x, y, v = hl.Var("x"), hl.Var("y"), hl.Var("v")
        inp = hl.Buffer(img, "input")
        hist, cdf, cdf_min = hl.Func("hist"), hl.Func("cdf"), hl.Func("cdf_min")
        lut, output = hl.Func("lut"), hl.Func("output")

        r = hl.RDom([hl.Range(0, w), hl.Range(0, h)], name="r")
        hist[v] = 0
        hist[hl.cast(hl.Int(32), inp[r.x, r.y])] += 1

        s = hl.RDom([hl.Range(1, 255)], name="s")
        cdf[v] = hist[v]
        cdf[s.x] = cdf[s.x - 1] + cdf[s.x]

        m = hl.RDom([hl.Range(0, 256)], name="m")
        cdf_min[()] = hl.minimum(hl.select(cdf[m.x] > 0, cdf[m.x], n))

        # 64-bit: 255 * N overflows 32 bits past 8 million pixels
        num = hl.cast(hl.Int(64), cdf[v] - cdf_min[()]) * 255
        den = hl.cast(hl.Int(64), hl.max(n - cdf_min[()], 1))
        lut[v] = hl.cast(hl.UInt(8), hl.clamp((num + den / 2) / den, 0, 255))
        output[x, y] = lut[hl.cast(hl.Int(32), inp[x, y])]

        funcs = {"hist": hist, "cdf": cdf, "cdf_min": cdf_min, "lut": lut, "output": output}
        return Built(output, [w, h], hl.UInt(8), funcs, {"x": x, "y": y, "v": v, "r": r})

    def schedule(self, hl, built):
        """The histogram is the only costly reduction: rfactor splits it into one partial
        histogram per band of rows, computed in parallel, then summed bin-wise with 16-wide
        vectors. The 256-entry scan and table are computed once, serially. The remap is a
        gather from the table, 32 pixels at a time, bands of rows in parallel."""
        x, y, v, r = built.vars["x"], built.vars["y"], built.vars["v"], built.vars["r"]
        f = built.funcs
        hist = f["hist"]
        band, ryo, ryi = hl.Var("band"), hl.RVar("ryo"), hl.RVar("ryi")
        hist.compute_root()
        hist.update(0).split(r.y, ryo, ryi, 64)
        partial = hist.update(0).rfactor(ryo, band)
        partial.compute_root().vectorize(v, 16)
        partial.update(0).parallel(band)
        hist.update(0).vectorize(v, 16)
        for name in ("cdf", "cdf_min", "lut"):
            f[name].compute_root()
        yo, yi = hl.Var("yo"), hl.Var("yi")
        f["output"].split(y, yo, yi, 64).parallel(yo).vectorize(x, 32)

    def gpu_schedule(self, hl, built):
        """The histogram as a GPU does it: rfactor into one partial histogram per band of 64
        rows, each band a block whose threads scatter their pixels with atomic adds (contention
        spread over the bands), then a thread per bin sums the bands. The scan and its minimum
        run on one GPU thread, the table on one thread per entry, the remap on a thread per
        pixel in 32x8 tiles: the 256-entry tables never leave the device."""
        x, y, v, r = built.vars["x"], built.vars["y"], built.vars["v"], built.vars["r"]
        f = built.funcs
        hist = f["hist"]
        w, h = built.output_sizes
        band, vo, vi = hl.Var("band"), hl.Var("vo"), hl.Var("vi")
        ryo, ryi, rxo, rxi = hl.RVar("ryo"), hl.RVar("ryi"), hl.RVar("rxo"), hl.RVar("rxi")
        bins = hl.TailStrategy.GuardWithIf
        hist.compute_root().gpu_tile(v, vo, vi, 256, bins)
        hist.update(0).split(r.y, ryo, ryi, min(64, h), hl.TailStrategy.GuardWithIf)
        partial = hist.update(0).rfactor(ryo, band)
        partial.compute_root().reorder(v, band).gpu_blocks(band).gpu_threads(v)
        threads = min(256, w)
        partial.update(0).atomic().split(r.x, rxo, rxi, threads, hl.TailStrategy.GuardWithIf)
        partial.update(0).reorder(rxi, rxo, ryi, band).gpu_blocks(band).gpu_threads(rxi)
        hist.update(0).gpu_tile(v, vo, vi, 256, bins)
        f["cdf"].compute_root().gpu_tile(v, vo, vi, 256, bins)
        f["cdf"].update(0).gpu_single_thread()
        f["cdf_min"].compute_root().gpu_single_thread()
        f["lut"].compute_root().gpu_tile(v, vo, vi, 256, bins)
        xo, yo, xi, yi = hl.Var("xo"), hl.Var("yo"), hl.Var("xi"), hl.Var("yi")
        f["output"].gpu_tile(x, y, xo, yo, xi, yi, 32, 8, hl.TailStrategy.GuardWithIf)

    def reference(self, inputs):
        img = inputs["input"]
        cdf = np.cumsum(np.bincount(img.ravel(), minlength=256)).astype(np.int64)
        cdf_min = cdf[cdf > 0][0]
        den = max(img.size - cdf_min, 1)
        lut = np.clip(((cdf - cdf_min) * 255 + den // 2) // den, 0, 255).astype(np.uint8)
        return lut[img]

    def to_image(self, result):
        return result


APP = HistogramEqualize()
