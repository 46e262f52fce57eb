"""What this machine can do at best, measured: the float32 FMA rate and the memory copy bandwidth.

A tuning report and the benchmarks state a schedule's speed as a share of these: GFLOP/s against
the FMA peak for apps that count their floating-point work, GB/s of compulsory traffic (inputs
read once, the output written once) against the copy bandwidth for the others.
"""

from __future__ import annotations

import time

import numpy as np

_PEAKS: dict[int, dict] = {}


def measure_peaks(threads: int) -> dict:
    """{"fma_gflops", "copy_gbs"} on `threads` threads (HL_NUM_THREADS must be set to match
    before the first parallel loop runs): a pyhalide kernel of independent FMA chains, and a
    parallel copy of 64 MiB (memory, not cache). Measured once per process."""
    if threads in _PEAKS:
        return _PEAKS[threads]
    import pyhalide as hl

    x = hl.Var("x")
    chains, steps, lanes = 24, 16, 16  # many independent chains, a short body (fits the op cache)
    v = hl.Func("peak_fma")
    a, c = hl.f32(1.0000001), hl.f32(0.999999)
    acc = [hl.f32(x + k) for k in range(chains)]
    for _ in range(steps):
        acc = [t * a + c for t in acc]
    total = acc[0]
    for t in acc[1:]:
        total = total + t
    v[x] = total
    n = lanes * threads * 2048 * 64
    xo = hl.Var("xo")
    v.split(x, xo, x, lanes * 64).parallel(xo).vectorize(x, lanes)
    v.compile_jit(hl.Target("host-fp_contract"))
    out = hl.Buffer(hl.Float(32), [n])
    t = best_seconds(lambda: v.realize(out), 15)  # the best run: a peak, not a typical load
    _PEAKS[threads] = {"fma_gflops": n * chains * steps * 2 / t / 1e9, "copy_gbs": copy_bandwidth(64 << 20)}
    return _PEAKS[threads]


def copy_bandwidth(nbytes: int) -> float:
    """GB/s moved (read plus written) by the fastest of 15 parallel, vectorized copies of nbytes:
    an app that reads as many bytes once and writes as many once can at best match it (a
    footprint that fits the caches copies faster than memory)."""
    return 2 * nbytes / best_seconds(copy_runner(nbytes), 15) / 1e9


def copy_runner(nbytes: int):
    """A compiled parallel copy of about nbytes (rows of 64 KiB spread over the threads), as a
    function that runs it once."""
    import pyhalide as hl

    x, y = hl.Var("x"), hl.Var("y")
    width = 1 << 16
    rows = max(1, nbytes // width)
    src = hl.Buffer(np.ones((rows, width), np.uint8), "copy_source")
    copy = hl.Func("copy")
    copy[x, y] = src[x, y]
    copy.vectorize(x, 64).parallel(y)
    out = hl.Buffer(hl.UInt(8), [width, rows])
    copy.compile_jit()
    return lambda: copy.realize(out)


def best_seconds(fn, repeats: int) -> float:
    """The fastest of `repeats` timed calls, after one untimed call."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best
