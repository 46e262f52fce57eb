"""Ahead-of-time code beside the JIT's: each gallery app, hand-scheduled, run by `realize` into a
preallocated output, as an object file (compile_to_object, its inputs embedded) and as the C
backend's source (compile_to_c, built by the C++ compiler with -O3 -march=native), both called
through ctypes, interleaved round by round. Not a test. The object holds the code `realize` runs
plus an entry that checks its buffers in native code, so its ratio should be 1.00 within noise;
the C source's ratio is what a portable, scalar source costs (or gains) against pyhalide's own
vector code.

    python -m benchmarks.aot [APP ...] [--size default|large] [--rounds N] [--no-c] [--json PATH]
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
from pyhalide.testing.halide_buffer import c_compiler, cxx_compiler, halide_buffer, load_c_source, load_object


def _time(fn, calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def measure(name: str, size: str, rounds: int, folder: Path, c_source: bool) -> dict:
    app = apps.load(name)
    inputs = app.inputs(size)
    built = app.build(hl, inputs)
    app.schedule(hl, built)
    jit = app.runner(hl, built)
    t0 = time.perf_counter()
    built.output.compile_to_object(str(folder / f"{name}.o"), [], name)
    compile_s = time.perf_counter() - t0
    entries = {"object": getattr(load_object(folder / f"{name}.o", folder / f"lib{name}.so"), name)}
    if c_source:
        t0 = time.perf_counter()
        built.output.compile_to_c(str(folder / f"{name}.cpp"), [], name)
        library = load_c_source(folder / f"{name}.cpp", folder / f"lib{name}_c.so", flags=["-O3", "-march=native"])
        c_build_s = time.perf_counter() - t0
        entries["c"] = getattr(library, name)
    want = np.asarray(jit())
    runners = {"jit": jit}
    for kind, entry in entries.items():
        out = np.zeros(list(reversed(built.output_sizes)), built.output_type.to_numpy())
        buffer = ctypes.byref(halide_buffer(out, built.output_mins))

        def run(entry=entry, buffer=buffer, kind=kind):
            if entry(buffer) != 0:
                raise RuntimeError(f"{name}: the {kind} entry failed")

        run()
        if not app.check(out, want):
            raise RuntimeError(f"{name}: the {kind} code computed something else than realize")
        runners[kind] = run
    once = _time(jit, 1)
    calls = max(1, min(50, int(0.05 / max(once, 1e-6))))
    times = {kind: [] for kind in runners}
    for _ in range(rounds):  # interleaved: the machine's noise falls on all of them
        for kind, run in runners.items():
            times[kind].append(_time(run, calls))
    jit_s, aot_s = statistics.median(times["jit"]), statistics.median(times["object"])
    row = {"app": name, "jit_ms": jit_s * 1e3, "aot_ms": aot_s * 1e3, "aot_over_jit": aot_s / jit_s,
           "object_compile_s": compile_s}
    if c_source:
        c_s = statistics.median(times["c"])
        row.update({"c_ms": c_s * 1e3, "c_over_object": c_s / aot_s, "c_source_and_build_s": c_build_s})
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("apps", nargs="*", default=apps.NAMES)
    parser.add_argument("--size", default="default", choices=["default", "large"])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--no-c", action="store_true", help="leave out the C backend's source")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if c_compiler() is None:
        print("no C compiler: the objects cannot be linked", file=sys.stderr)
        return 1
    c_source = not args.no_c and cxx_compiler() is not None
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name in args.apps:
            row = measure(name, args.size, args.rounds, Path(folder), c_source)
            rows.append(row)
            line = (f"{name:20s} realize {row['jit_ms']:9.3f} ms   object {row['aot_ms']:9.3f} ms   "
                    f"object/realize {row['aot_over_jit']:5.2f}")
            if c_source:
                line += f"   C source {row['c_ms']:9.3f} ms   C/object {row['c_over_object']:5.2f}"
            print(line, flush=True)
    for key, what in (("aot_over_jit", "object/realize"), ("c_over_object", "C source/object")):
        if key in rows[0]:
            print(f"geometric mean {what}: {np.exp(np.mean(np.log([r[key] for r in rows]))):.2f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
