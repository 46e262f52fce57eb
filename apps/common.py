"""The interface every app follows, and the small helpers they share (PNG files, timing).

An app's algorithm and schedule are written once against a Halide-like module `hl`, so the same
code builds the pipeline in pyhalide (`import pyhalide`) and in the real Halide (`import halide`):
that is how the harness runs "the same algorithm with the same schedule" side by side.
"""

from __future__ import annotations

import statistics
import struct
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass
class Built:
    """An app's algorithm, built in one library: what to realize and what a schedule may touch."""

    output: object  # the output Func
    output_sizes: list[int]  # Halide order (x first), as realize takes them
    output_type: object  # an hl.Type of the library it was built with
    funcs: dict = field(default_factory=dict)  # name -> Func, the stages a schedule refers to
    vars: dict = field(default_factory=dict)  # name -> Var / RVar / RDom used by the schedule
    output_mins: list[int] | None = None  # where the output region starts, if not at 0
    sizes: dict = field(default_factory=dict)  # name -> other sizes a schedule adapts to (gemm's K)


def register_file(hl) -> tuple[int, int]:
    """(float32 lanes of the host's natural vector, vector registers): what a register block of
    accumulators must fit in. AVX-512 has 32 registers of 16 floats, AVX2 16 of 8: gemm's
    24-accumulator block for AVX-512 spilled on AVX2 and ran 3x slower there. The same in
    pyhalide and Halide (both read the host the same way), so both run the same schedule."""
    target = hl.get_host_target()
    lanes = target.natural_vector_size(hl.Float(32))
    return lanes, (16 if target.arch == hl.TargetArch.X86 and lanes < 16 else 32)


class App:
    """Subclasses set `name`, `description` and implement the four methods below."""

    name = ""
    description = ""
    exact = True  # False: floats compared with rtol/atol (the schedule reassociates or uses FMA)
    rtol, atol = 1e-5, 1e-5
    # The default schedule inlines every pure stage; for deep stencil graphs that recomputes (and
    # compiles) exponentially much, as in Halide. Such apps skip the default-schedule test.
    default_schedule_is_slow = False

    # Image apps: the test picture's (height, width) by size (a size not listed is "default"),
    # and sample_image's seed; `inputs` hands the picture to the app's inputs_from_image.
    image_sizes: dict[str, tuple[int, int]] = {}
    image_seed = 0

    def inputs(self, size: str = "default") -> dict[str, np.ndarray]:
        """Deterministic input arrays (numpy axis order). size: "small" for tests, "default", or
        "large" where an app has a larger benchmark size (else the same as "default")."""
        if not self.image_sizes:
            raise NotImplementedError
        h, w = self.image_sizes.get(size, self.image_sizes["default"])
        return self.inputs_from_image(sample_image(h, w, seed=self.image_seed))

    def build(self, hl, inputs: dict[str, np.ndarray]) -> Built:
        """The algorithm alone, in library `hl` (pyhalide or halide), over these inputs."""
        raise NotImplementedError

    def schedule(self, hl, built: Built) -> None:
        """The hand schedule an expert would write for this CPU (2 cores, AVX-512)."""
        raise NotImplementedError

    # A hand schedule for an NVIDIA GPU (target host-cuda), on apps where one makes sense:
    # `gpu_schedule(self, hl, built)`, written against `hl` like `schedule`. None: no GPU schedule.
    gpu_schedule = None
    # Other GPU hand schedules worth measuring beside it, by name: {name: method(hl, built)}.
    # `python -m benchmarks.gpu` times each next to `gpu_schedule` (tests check each computes
    # the reference), so the default can be the one the GPU measured fastest.
    gpu_variants: dict = {}

    def apply_gpu_schedule(self, hl, built: Built, variant: str | None = None) -> None:
        """`gpu_schedule`, or the GPU variant of that name."""
        if variant is None:
            self.gpu_schedule(hl, built)
        else:
            self.gpu_variants[variant](self, hl, built)

    def reference(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """The same computation in numpy/scipy, written independently of the algorithm."""
        raise NotImplementedError

    # ---- shared machinery
    def realize(self, hl, built: Built):
        """Run the built pipeline once into a fresh output; returns a numpy array."""
        out = hl.Buffer(built.output_type, list(built.output_sizes))
        if built.output_mins:
            out.set_min(list(built.output_mins))
        built.output.realize(out)
        return np.asarray(out)

    def runner(self, hl, built: Built):
        """A zero-argument function that runs the pipeline into one preallocated output."""
        out = hl.Buffer(built.output_type, list(built.output_sizes))
        if built.output_mins:
            out.set_min(list(built.output_mins))

        def run():
            built.output.realize(out)
            return out

        return run

    def check(self, result: np.ndarray, expected: np.ndarray) -> bool:
        if result.shape != expected.shape:
            return False
        if self.exact:
            return bool(np.array_equal(result, expected))
        return bool(np.allclose(result, expected, rtol=self.rtol, atol=self.atol))


def median_seconds(fn, repeats: int = 9, warmup: int = 1) -> tuple[float, float]:
    """(median, min) wall time of fn() over repeats, after warm-up runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times)


# ---------------------------------------------------------------- images
def sample_image(height: int = 480, width: int = 640, seed: int = 0) -> np.ndarray:
    """A deterministic RGB test picture (uint8, rows x columns x 3): gradients, discs and noise,
    so that edges, flat areas and texture all appear."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    r = 128 + 100 * np.sin(xx / 37.0) * np.cos(yy / 23.0)
    g = 255 * xx / max(width - 1, 1)
    b = 255 * yy / max(height - 1, 1)
    img = np.stack([r, g, b], axis=-1)
    for _ in range(6):
        cy, cx, rad = rng.uniform(0, height), rng.uniform(0, width), rng.uniform(20, 90)
        mask = (yy - cy) ** 2 + (xx - cx) ** 2 < rad**2
        img[mask] = rng.uniform(0, 255, 3)
    img += rng.normal(0, 6, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def planar_float_rgb(img: np.ndarray) -> np.ndarray:
    """An 8-bit grey or RGB(A) picture as planar float32 RGB in [0, 1]: numpy (c, y, x), which is
    Halide [x, y, c]."""
    if img.ndim == 2:
        img = np.stack([img] * 3, axis=-1)
    planar = np.ascontiguousarray(img[..., :3].transpose(2, 0, 1))
    return planar.astype(np.float32) / np.float32(255)


def write_png(path: str | Path, image: np.ndarray) -> None:
    """Write a uint8 (or uint16) grey or RGB image as a PNG, with zlib from the standard library."""
    img = np.asarray(image)
    if img.dtype not in (np.uint8, np.uint16):
        raise ValueError(f"write_png takes uint8 or uint16 images, got {img.dtype}")
    if img.ndim == 2:
        img = img[:, :, None]
    h, w, c = img.shape
    color = {1: 0, 3: 2, 4: 6}[c]
    depth = 8 if img.dtype == np.uint8 else 16
    rows = img.astype(">u2") if depth == 16 else img
    raw = b"".join(b"\0" + rows[y].tobytes() for y in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")
    Path(path).write_bytes(png)


def read_png(path: str | Path) -> np.ndarray:
    """Read a non-interlaced 8-bit grey/RGB/RGBA PNG (what write_png writes), undoing the filters."""
    data = Path(path).read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG file")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        tag, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if tag == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif tag == b"IDAT":
            idat += body
        pos += 12 + length
    w, h, depth, color, _, _, interlace = header
    if depth != 8 or interlace or color not in (0, 2, 6):
        raise ValueError(f"{path}: only 8-bit, non-interlaced grey/RGB/RGBA PNGs are supported")
    c = {0: 1, 2: 3, 6: 4}[color]
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(h, 1 + w * c)
    out = np.zeros((h, w * c), dtype=np.int32)
    prev = np.zeros(w * c, dtype=np.int32)
    for y in range(h):
        kind, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if kind == 0:
            cur = line
        elif kind == 2:
            cur = (line + prev) & 255
        else:  # Sub, Average, Paeth need the pixel to the left: decode serially
            cur = np.zeros_like(line)
            for i in range(w * c):
                left = cur[i - c] if i >= c else 0
                up, ul = prev[i], (prev[i - c] if i >= c else 0)
                if kind == 1:
                    pred = left
                elif kind == 3:
                    pred = (left + up) // 2
                else:
                    p = left + up - ul
                    pa, pb, pc = abs(p - left), abs(p - up), abs(p - ul)
                    pred = left if pa <= pb and pa <= pc else (up if pb <= pc else ul)
                cur[i] = (line[i] + pred) & 255
        out[y] = cur
        prev = cur
    img = out.astype(np.uint8).reshape(h, w, c)
    return img[:, :, 0] if c == 1 else img


def demo_main(app: App, argv=None) -> None:
    """`python -m apps.<name>`: run the app's hand schedule, check it against the reference, time
    it beside numpy, and for image apps write the result as a PNG."""
    import argparse

    import pyhalide as hl

    parser = argparse.ArgumentParser(description=f"{app.name}: {app.description}")
    parser.add_argument("--input", help="a PNG to process (image apps); default: a generated picture")
    parser.add_argument("--output", default=f"{app.name}.png", help="where to write the result PNG")
    parser.add_argument("--size", default="default", choices=["small", "default"])
    args = parser.parse_args(argv)
    if args.input and hasattr(app, "inputs_from_image"):
        inputs = app.inputs_from_image(read_png(args.input))
    else:
        inputs = app.inputs(args.size)
    built = app.build(hl, inputs)
    app.schedule(hl, built)
    t0 = time.perf_counter()
    built.output.compile_jit()
    compile_s = time.perf_counter() - t0
    result = app.realize(hl, built)
    expected = app.reference(inputs)
    ok = app.check(result, expected)
    t_hl, _ = median_seconds(app.runner(hl, built))
    t_np, _ = median_seconds(lambda: app.reference(inputs), repeats=3)
    print(f"{app.name}: {app.description}")
    print(f"  matches the numpy reference: {ok}")
    print(f"  pyhalide (hand schedule) {t_hl * 1e3:9.2f} ms   (compile {compile_s:.2f} s)")
    print(f"  numpy reference          {t_np * 1e3:9.2f} ms   -> {t_np / t_hl:.1f}x faster")
    if hasattr(app, "to_image"):
        write_png(args.output, app.to_image(result))
        print(f"  wrote {args.output}")
    if not ok:
        raise SystemExit(1)
