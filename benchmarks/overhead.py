"""Per-call overhead and memory of compiled pipelines: pyhalide beside the real Halide. Not a test.

    python -m benchmarks.overhead [--calls N] [--regions N] [--pipelines N] [--json PATH]

- Per call: a tiny pipeline (16 int32 values, `f[x] = x * 2`), compiled once, then called many
  times: `realize(buffer)` into a preallocated output, `realize([16])` allocating it, and a
  `compile_to_callable` callable. The target for pyhalide's `realize(buffer)` is under 5 us. The
  figures are medians of several timed batches; the two libraries alternate batches.
- Parallel regions: a chain of 16 small root stages (8 rows of 64 int32 each), run with every
  stage's rows in parallel and again serial; the difference divided by 16 is what one parallel
  region costs (launch, waking the workers, joining them), beside Halide's thread pool on the
  same pipeline. `HL_NUM_THREADS` sets the threads of both.
- Memory: the growth of the process's resident set while it compiles, runs and drops N distinct
  pipelines (each a different constant, so none reuses another's code), measured twice in a row;
  each library in its own subprocess, with pyhalide's disk cache off (a cache hit skips LLVM).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time


def _per_call(hl, calls: int) -> dict[str, float]:
    x = hl.Var("x")
    f = hl.Func("tiny")
    f[x] = x * 2
    f.compile_jit()
    out = hl.Buffer(hl.Int(32), [16])
    p = hl.Param(hl.Int(32), "scale", 3)
    g = hl.Func("tiny_param")
    g[x] = x * p
    callable_ = hl.Pipeline(g).compile_to_callable([p], hl.get_jit_target_from_environment())
    cases = {"realize(buffer)": lambda: f.realize(out), "realize([16])": lambda: f.realize([16]),
             "callable(param, buffer)": lambda: callable_(3, out)}
    return _median_us(cases, calls)


def _median_us(cases: dict, calls: int) -> dict[str, float]:
    """Microseconds per call of each function: warmed up, then the median of 7 batches of `calls`."""
    for fn in cases.values():
        for _ in range(200):
            fn()
    result = {}
    for name, fn in cases.items():
        batches = []
        for _ in range(7):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            batches.append((time.perf_counter() - t0) / calls * 1e6)
        result[name] = statistics.median(batches)
    return result


def _stage_chain(hl, stages: int, parallel: bool):
    """`stages` root stages, each reading the previous one, 8 rows of 64 int32 each."""
    x, y = hl.Var("x"), hl.Var("y")
    prev = None
    for i in range(stages):
        f = hl.Func(f"stage{i}")
        f[x, y] = (x + y + i) if prev is None else prev[x, y] * 3 + i
        f.compute_root().vectorize(x, 16)
        if parallel:
            f.parallel(y)
        prev = f
    prev.compile_jit()
    out = hl.Buffer(hl.Int(32), [64, 8])
    return lambda: prev.realize(out)


def _parallel_region(hl, calls: int, stages: int = 16) -> dict[str, float]:
    """Microseconds per call of the chain run serial and in parallel, and per parallel region."""
    runs = {"serial": _stage_chain(hl, stages, False), "parallel": _stage_chain(hl, stages, True)}
    result = _median_us(runs, calls)
    result["per region"] = (result["parallel"] - result["serial"]) / stages
    return result


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _memory(hl, n: int) -> list[float]:
    x = hl.Var("x")

    def compile_and_drop(first: int):
        for i in range(first, first + n):
            f = hl.Func(f"p{i}")
            f[x] = x * (i + 2) + 3
            f.realize([16])
            del f
        gc.collect()

    compile_and_drop(10**6)  # start-up: LLVM's initialisation, lazy imports
    growth, before = [], _rss_mb()
    for k in (1, 2):
        compile_and_drop(k * 10**7)
        after = _rss_mb()
        growth.append(after - before)
        before = after
    return growth


def _memory_in_subprocess(library: str, n: int) -> list[float] | None:
    env = dict(os.environ, PYHALIDE_DISK_CACHE="0")
    code = (f"import json, {library} as hl; from benchmarks.overhead import _memory; "
            f"print(json.dumps(_memory(hl, {n})))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if run.returncode != 0:
        print(f"{library}: memory run failed: {run.stderr.strip().splitlines()[-1:]}")
        return None
    return json.loads(run.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=20000, help="calls per timed batch")
    ap.add_argument("--regions", type=int, default=2000, help="calls per timed batch of the parallel chain")
    ap.add_argument("--pipelines", type=int, default=200, help="distinct pipelines for the memory test")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    import pyhalide

    libraries = {"pyhalide": pyhalide}
    try:
        import halide

        libraries["halide"] = halide
    except ImportError:
        print("halide is not installed: pyhalide's figures only")
    calls = {name: _per_call(lib, args.calls) for name, lib in libraries.items()}
    print(f"per call (us, median of 7 batches of {args.calls}):")
    for case in calls["pyhalide"]:
        row = "  ".join(f"{name} {calls[name][case]:7.2f}" for name in calls)
        ratio = f"  ratio {calls['pyhalide'][case] / calls['halide'][case]:.1f}x" if "halide" in calls else ""
        print(f"  {case:24s} {row}{ratio}")
    regions = {name: _parallel_region(lib, args.regions) for name, lib in libraries.items()}
    threads = os.environ.get("HL_NUM_THREADS", "all cores")
    print(f"parallel regions (us, 16 root stages of 8 x 64, {threads} threads):")
    for case in regions["pyhalide"]:
        row = "  ".join(f"{name} {regions[name][case]:7.2f}" for name in regions)
        ratio = f"  ratio {regions['pyhalide'][case] / regions['halide'][case]:.1f}x" if "halide" in regions else ""
        print(f"  {case:24s} {row}{ratio}")
    memory = {name: _memory_in_subprocess(name, args.pipelines) for name in libraries}
    print(f"resident memory growth over {args.pipelines} distinct pipelines compiled and dropped (MB):")
    for name, growth in memory.items():
        if growth:
            print(f"  {name:9s} first {growth[0]:6.1f}  again {growth[1]:6.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"per_call_us": calls, "parallel_region_us": regions, "memory_mb": memory,
                       "pipelines": args.pipelines}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
