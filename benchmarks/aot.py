"""Ahead-of-time code beside the JIT's: each gallery app, hand-scheduled, run by `realize` into a
preallocated output and as an object file (compile_to_object, its inputs embedded) called
through ctypes, interleaved round by round. Not a test. The object holds the code `realize` runs
plus an entry that checks its buffers in native code, so the ratio should be 1.00 within noise.

    python -m benchmarks.aot [APP ...] [--size default|large] [--rounds N] [--json PATH]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import apps
import pyhalide as hl
from pyhalide.testing.halide_buffer import c_compiler, halide_buffer, load_object


def _time(fn, calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def measure(name: str, size: str, rounds: int, folder: Path) -> dict:
    app = apps.load(name)
    inputs = app.inputs(size)
    built = app.build(hl, inputs)
    app.schedule(hl, built)
    jit = app.runner(hl, built)
    t0 = time.perf_counter()
    built.output.compile_to_object(str(folder / f"{name}.o"), [], name)
    compile_s = time.perf_counter() - t0
    entry = getattr(load_object(folder / f"{name}.o", folder / f"lib{name}.so"), name)
    out = np.zeros(list(reversed(built.output_sizes)), built.output_type.to_numpy())
    buffer = ctypes.byref(halide_buffer(out, built.output_mins))

    def aot():
        if entry(buffer) != 0:
            raise RuntimeError(f"{name}: the object's entry failed")

    aot()
    if not app.check(out, np.asarray(jit())):
        raise RuntimeError(f"{name}: the object computed something else than realize")
    once = _time(jit, 1)
    calls = max(1, min(50, int(0.05 / max(once, 1e-6))))
    jit_times, aot_times = [], []
    for _ in range(rounds):  # interleaved: the machine's noise falls on both
        jit_times.append(_time(jit, calls))
        aot_times.append(_time(aot, calls))
    jit_s, aot_s = statistics.median(jit_times), statistics.median(aot_times)
    return {"app": name, "jit_ms": jit_s * 1e3, "aot_ms": aot_s * 1e3, "aot_over_jit": aot_s / jit_s,
            "object_compile_s": compile_s}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("apps", nargs="*", default=apps.NAMES)
    parser.add_argument("--size", default="default", choices=["default", "large"])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if c_compiler() is None:
        print("no C compiler: the objects cannot be linked", file=sys.stderr)
        return 1
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name in args.apps:
            row = measure(name, args.size, args.rounds, Path(folder))
            rows.append(row)
            print(f"{name:20s} realize {row['jit_ms']:9.3f} ms   object {row['aot_ms']:9.3f} ms   "
                  f"object/realize {row['aot_over_jit']:5.2f}   (object compiled in {row['object_compile_s']:.1f} s)",
                  flush=True)
    print(f"geometric mean object/realize: {np.exp(np.mean(np.log([r['aot_over_jit'] for r in rows]))):.2f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
