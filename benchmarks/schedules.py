"""Halide's blur schedule and a register-tiled gemm schedule, pyhalide beside the real Halide.

    python -m benchmarks.schedules [--rounds N] [--size 1024]

The same algorithm and the same schedule are built in both (pyhalide and `import halide`),
checked equal, then timed alternately, round by round, so both see the same machine load.
Prints medians, ratios and GFLOP/s. Not a test: this machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

try:
    import halide
except ImportError:  # the bench extra installs it
    halide = None

import pyhalide


def blur(hl, img, scheduled: bool):
    x, y, yi = hl.Var("x"), hl.Var("y"), hl.Var("yi")
    inp = hl.Buffer(img)
    blur_x, blur_y = hl.Func("blur_x"), hl.Func("blur_y")
    blur_x[x, y] = (inp[x - 1, y] + inp[x, y] + inp[x + 1, y]) / 3
    blur_y[x, y] = (blur_x[x, y - 1] + blur_x[x, y] + blur_x[x, y + 1]) / 3
    if scheduled:  # the CPU schedule of Halide's blur app
        blur_y.split(y, y, yi, 32).parallel(y).vectorize(x, 16)
        blur_x.store_at(blur_y, y).compute_at(blur_y, x).vectorize(x, 16)
    else:
        blur_x.compute_root()
    h, w = img.shape
    out = hl.Buffer(hl.UInt(16), [w - 8, h - 2])
    out.set_min([1, 1])

    def run():
        blur_y.realize(out)
        return out

    return blur_y, run


def gemm(hl, a, b, scheduled: bool, vec: int = 16):
    n = a.shape[0]
    x, y, xi, yi, xy = hl.Var("x"), hl.Var("y"), hl.Var("xi"), hl.Var("yi"), hl.Var("xy")
    A, B = hl.Buffer(a), hl.Buffer(b)
    k = hl.RDom([hl.Range(0, n)])
    prod, out = hl.Func("prod"), hl.Func("out")
    prod[x, y] = 0.0
    prod[x, y] += A[k, y] * B[x, k]
    out[x, y] = prod[x, y]
    if scheduled:  # a 3x16 by 8 register tile of accumulators per task
        out.tile(x, y, xi, yi, 3 * vec, 8).fuse(x, y, xy).parallel(xy).vectorize(xi, vec).unroll(xi).unroll(yi)
        prod.compute_at(out, xy).vectorize(x, vec).unroll(x).unroll(y)
        prod.update(0).reorder(x, y, k).vectorize(x, vec).unroll(x).unroll(y)
    result = hl.Buffer(hl.Float(32), [n, n])

    def run():
        out.realize(result)
        return result

    return out, run


def timed_alternately(runs: dict, rounds: int) -> dict:
    times = {name: [] for name in runs}
    for fn in runs.values():
        fn()  # warm up
    for _ in range(rounds):
        for name, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


def compile_all(funcs, fma_target):
    out = {}
    for name, (func, _run, lib) in funcs.items():
        t0 = time.perf_counter()
        if lib is pyhalide and fma_target:
            func.compile_jit(pyhalide.Target("host-fp_contract"))
        else:
            func.compile_jit()
        out[name] = time.perf_counter() - t0
    return out


def report(title, medians, compile_s, reference, work=None):
    print(title)
    base = medians[reference]
    for name, m in medians.items():
        extra = f"  {work / m / 1e9:7.1f} GFLOP/s" if work else ""
        print(f"  {name:28s} {m * 1e3:9.2f} ms  {base / m:6.2f}x vs {reference}"
              f"  (compile {compile_s.get(name, 0):.2f} s){extra}")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()
    libs = {"pyhalide": pyhalide}
    if halide is not None:
        libs["halide"] = halide
    else:
        print("(halide is not installed: pip install -e '.[bench]' for the side-by-side columns)")

    img = np.random.default_rng(0).integers(0, 65536, (1920, 2560), dtype=np.uint16)
    funcs = {}
    for lib_name, lib in libs.items():
        for sched in (False, True):
            func, run = blur(lib, img, sched)
            funcs[f"{lib_name} {'halide-schedule' if sched else 'blur_x root'}"] = (func, run, lib)
    compile_s = compile_all(funcs, False)
    outs = {name: np.asarray(run()).copy() for name, (_, run, _) in funcs.items()}
    first = next(iter(outs.values()))
    assert all(np.array_equal(first, o) for o in outs.values()), "blur outputs differ"
    medians = timed_alternately({n: r for n, (_, r, _) in funcs.items()}, args.rounds)
    report("blur 2560x1920 uint16, median of alternating rounds", medians, compile_s,
           "halide halide-schedule" if halide else "pyhalide halide-schedule")

    n = args.size
    rng = np.random.default_rng(1)
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    funcs = {}
    for lib_name, lib in libs.items():
        func, run = gemm(lib, a, b, True)
        funcs[f"{lib_name} tiled"] = (func, run, lib)
    func, run = gemm(pyhalide, a, b, True)
    funcs["pyhalide tiled, exact (no FMA)"] = (func, run, "exact")
    compile_s = compile_all(funcs, True)
    expected = a @ b
    for name, (_, run, _) in funcs.items():
        assert np.allclose(np.asarray(run()), expected, rtol=1e-4, atol=1e-3), name
    runs = {name: r for name, (_, r, _) in funcs.items()}
    runs["numpy (OpenBLAS)"] = lambda: a @ b
    medians = timed_alternately(runs, max(3, args.rounds // 3))
    report(f"gemm {n}^3 float32, median of alternating rounds", medians, compile_s,
           "halide tiled" if halide else "numpy (OpenBLAS)", work=2.0 * n**3)


if __name__ == "__main__":
    main()
