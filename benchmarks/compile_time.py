"""Time to lower and compile a 10-stage pipeline (target: under 0.5 s). Not a test.

    python -m benchmarks.compile_time
"""

from __future__ import annotations

import os
import statistics
import time


def ten_stage_pipeline(tag: str):
    import pyhalide as hl

    x, y = hl.Var("x"), hl.Var("y")
    inp = hl.ImageParam(hl.Float(32), 2, f"input_{tag}")
    prev = hl.BoundaryConditions.repeat_edge(inp)
    stages = []
    for i in range(10):
        f = hl.Func(f"stage{i}_{tag}")
        if i % 2 == 0:
            f[x, y] = (prev[x - 1, y] + prev[x, y] * 2.0 + prev[x + 1, y]) * 0.25
        else:
            f[x, y] = (prev[x, y - 1] + prev[x, y] * 2.0 + prev[x, y + 1]) * 0.25
        f.compute_root()
        stages.append(f)
        prev = f
    return stages[-1]


def main():
    os.environ["PYHALIDE_DISK_CACHE"] = "0"  # measure real compiles
    from pyhalide.codegen.runtime import CompiledPipeline
    from pyhalide.lower import lower

    lower_times, compile_times = [], []
    for trial in range(5):
        out = ten_stage_pipeline(f"t{trial}")
        t0 = time.perf_counter()
        lowered = lower([out])
        t1 = time.perf_counter()
        layouts = tuple((tuple(range(b.dimensions - 1, -1, -1)), True) for b in lowered.buffers)
        CompiledPipeline(lowered, layouts)
        t2 = time.perf_counter()
        lower_times.append(t1 - t0)
        compile_times.append(t2 - t1)
    lo, co = statistics.median(lower_times), statistics.median(compile_times)
    print("10-stage pipeline, median of 5 (no object cache)")
    print(f"  lower:               {lo * 1e3:7.1f} ms")
    print(f"  LLVM codegen + JIT:  {co * 1e3:7.1f} ms")
    print(f"  total:               {(lo + co) * 1e3:7.1f} ms   (target < 500 ms: "
          f"{'met' if lo + co < 0.5 else 'MISSED'})")


if __name__ == "__main__":
    main()
