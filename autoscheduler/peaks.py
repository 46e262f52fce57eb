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
    before the first parallel loop runs): a pyhalide kernel of independent FMA chains, and a numpy
    copy of 64 MiB. Measured once per process."""
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
    src = np.ones(64 * 1024 * 1024 // 4, np.float32)
    dst = np.empty_like(src)
    tb = best_seconds(lambda: np.copyto(dst, src), 9)
    _PEAKS[threads] = {"fma_gflops": n * chains * steps * 2 / t / 1e9, "copy_gbs": 2 * src.nbytes / tb / 1e9}
    return _PEAKS[threads]


def best_seconds(fn, repeats: int) -> float:
    """The fastest of `repeats` timed calls, after one untimed call."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best
