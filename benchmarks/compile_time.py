"""Compile time: pyhalide's lowering and LLVM time beside the real Halide's, per app. Not a test.

    python -m benchmarks.compile_time [APP ...] [--repeats N] [--json PATH]

Two sections, each timed in one run:

- a synthetic 10-stage pipeline (five horizontal and five vertical 3-tap passes, all compute_root),
  whose target is pyhalide's lowering plus compiling under 0.5 s;
- every app's hand schedule (or the apps named), whose targets are pyhalide's lowering alone under
  0.5 s for every app, and pyhalide's total no more than Halide's compile time for the same
  algorithm and schedule.

Columns: "lower" is `pyhalide.lower.lower([output])` (what `Pipeline` calls), "LLVM" is the rest of
`Pipeline.compile_jit` - building `CompiledPipeline` for the default buffer layouts: pyhalide's
codegen to LLVM IR, LLVM's O3 and object emission, and linking into the JIT - and "total" their
sum (the median of each repeat's sum); "Halide" is `compile_jit()` of the same pipeline in the
real Halide (`import halide`, its own lowering and LLVM), and "ratio" pyhalide's total over
Halide's. pyhalide uses the target the runtime harness uses (host, plus fp_contract for apps
compared with a tolerance), Halide its default host target, as in `python -m benchmarks`.

Every repeat builds and schedules the algorithm afresh (not timed), so nothing compiled earlier is
reused: the object cache on disk is off (PYHALIDE_DISK_CACHE=0, set before pyhalide is imported)
and the in-memory object cache, which is keyed by the LLVM IR text and so would hand a rebuilt
pipeline its earlier object, is cleared before each repeat. Both libraries compile one pipeline
untimed first, so their one-off start-up (LLVM's initialisation, lazy imports) is not charged to
the first app. pyhalide and Halide alternate within every repeat, each going first in turn, so both
see the same load on a shared machine; the figures are medians over the repeats. Without
`halide` installed only pyhalide's columns are printed.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import time

# Before pyhalide is imported (it is imported lazily, below): measure real compiles, not disk hits.
os.environ["PYHALIDE_DISK_CACHE"] = "0"

LOWER_TARGET_S = 0.5  # every app's lowering, and the synthetic pipeline's whole compile
SYNTHETIC = "10-stage"


class TenStage:
    """The synthetic pipeline, shaped like an app (build/schedule in either library)."""

    name = SYNTHETIC
    exact = True

    def inputs(self, size="default"):
        return {}

    def build(self, hl, inputs):
        from apps.common import Built

        x, y = hl.Var("x"), hl.Var("y")
        inp = hl.ImageParam(hl.Float(32), 2, "input")
        inp.set(hl.Buffer(hl.Float(32), [64, 64]))  # bound, so the default layouts can be read off it
        prev = hl.BoundaryConditions.repeat_edge(inp)
        stages = []
        for i in range(10):
            f = hl.Func(f"stage{i}")
            if i % 2 == 0:
                f[x, y] = (prev[x - 1, y] + prev[x, y] * 2.0 + prev[x + 1, y]) * 0.25
            else:
                f[x, y] = (prev[x, y - 1] + prev[x, y] * 2.0 + prev[x, y + 1]) * 0.25
            stages.append(f)
            prev = f
        return Built(stages[-1], [64, 64], hl.Float(32), {f"stage{i}": f for i, f in enumerate(stages)})

    def schedule(self, hl, built):
        for f in built.funcs.values():
            f.compute_root()


def _halide():
    try:
        import halide
    except ImportError:
        return None
    return halide


def _halide_version():
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("halide")
    except PackageNotFoundError:
        return None


def time_pyhalide(app, inputs) -> tuple[float, float]:
    """(lowering, LLVM) seconds of compiling a freshly built app with pyhalide."""
    import pyhalide
    from pyhalide.codegen import jit

    built = app.build(pyhalide, inputs)
    app.schedule(pyhalide, built)
    target = None if app.exact else pyhalide.Target("host-fp_contract")
    pipeline = pyhalide.Pipeline(built.output)
    # The rebuilt pipeline's IR is the same text as the last repeat's: without this, its object
    # would come out of the in-memory cache and the repeat would time no LLVM work at all.
    jit.clear_memory_cache()
    gc.collect()
    # The target first: lowering is for a target, and compile_jit(target) would lower again for a
    # target other than the one `_lower` used (apps compared with a tolerance use fp_contract).
    pipeline._set_target(target)
    t0 = time.perf_counter()
    lowered = pipeline._lower()  # pyhalide.lower.lower([built.output], target), kept for compile_jit
    t1 = time.perf_counter()
    pipeline.compile_jit(target)  # the default layouts, then CompiledPipeline (codegen, LLVM, JIT link)
    if pipeline._lowered is not lowered:
        raise RuntimeError(f"{app.name}: compile_jit lowered again: the lowering was timed twice")
    t2 = time.perf_counter()
    if not jit._memory_cache:  # (the first compile of a process also builds the runtime's own objects)
        raise RuntimeError(f"{app.name}: no object was compiled: the timing measured no LLVM work")
    return t1 - t0, t2 - t1


def time_halide(halide, app, inputs) -> float:
    """Seconds of Halide's compile_jit of a freshly built app."""
    built = app.build(halide, inputs)
    app.schedule(halide, built)
    gc.collect()
    t0 = time.perf_counter()
    built.output.compile_jit()
    return time.perf_counter() - t0


def measure(app, halide, repeats: int) -> dict:
    inputs = app.inputs("default")
    samples = {"lower": [], "llvm": [], "total": [], "halide": []}
    for r in range(repeats):
        order = ("pyhalide", "halide") if r % 2 == 0 else ("halide", "pyhalide")
        for lib in order:
            if lib == "pyhalide":
                lo, ll = time_pyhalide(app, inputs)
                samples["lower"].append(lo)
                samples["llvm"].append(ll)
                samples["total"].append(lo + ll)
            elif halide is not None:
                samples["halide"].append(time_halide(halide, app, inputs))
    med = {k: statistics.median(v) if v else None for k, v in samples.items()}
    rec = {"app": app.name, "repeats": repeats, **{f"{k}_s": v for k, v in med.items()}, "samples_s": samples}
    # Median of the per-repeat ratios would pair samples; the ratio of medians is steadier.
    rec["ratio"] = med["total"] / med["halide"] if med["halide"] else None
    rec["lower_met"] = med["lower"] < LOWER_TARGET_S
    rec["total_met"] = med["total"] <= med["halide"] if med["halide"] else None
    return rec


def _fmt(v, width=8, digits=3):
    return f"{v:{width}.{digits}f}" if v is not None else f"{'-':>{width}s}"


def _yn(v):
    return "-" if v is None else ("met" if v else "MISSED")


def print_header(with_halide: bool) -> None:
    head = f"  {'app':20s} {'lower s':>8s} {'LLVM s':>8s} {'total s':>8s}"
    if with_halide:
        head += f" {'Halide s':>8s} {'ratio':>7s}  {'lower<0.5s':10s} {'total<=Halide':13s}"
    else:
        head += f"  {'lower<0.5s':10s}"
    print(head)


def print_row(rec: dict, with_halide: bool) -> None:
    row = f"  {rec['app']:20s} {_fmt(rec['lower_s'])} {_fmt(rec['llvm_s'])} {_fmt(rec['total_s'])}"
    if with_halide:
        ratio = f"{rec['ratio']:6.2f}x" if rec["ratio"] is not None else f"{'-':>7s}"
        row += f" {_fmt(rec['halide_s'])} {ratio}  {_yn(rec['lower_met']):10s} {_yn(rec['total_met']):13s}"
    else:
        row += f"  {_yn(rec['lower_met']):10s}"
    print(row, flush=True)


def main(argv=None) -> None:
    from apps import NAMES, load

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("apps", nargs="*", help=f"apps to time (default: all of {', '.join(NAMES)})")
    parser.add_argument("--repeats", type=int, default=3, help="fresh builds per app; medians are reported")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    unknown = [n for n in args.apps if n not in NAMES]
    if unknown:
        parser.error(f"unknown app(s) {', '.join(unknown)}; the apps are {', '.join(NAMES)}")
    apps = [load(n) for n in (args.apps or NAMES)]
    halide = _halide()
    with_halide = halide is not None

    synthetic = TenStage()
    time_pyhalide(synthetic, {})  # warm-up: LLVM's initialisation, lazy imports
    if with_halide:
        time_halide(halide, synthetic, {})  # warm-up: Halide's first compile initialises it
    else:
        print("note: `halide` is not importable here, so only pyhalide's columns are shown "
              "(pip install -e '.[bench]' for the comparison)")
    print(f"medians of {args.repeats} repeats, each on a freshly built pipeline; no object cache"
          + ("; pyhalide and Halide alternate" if with_halide else ""))

    print(f"\nsynthetic {SYNTHETIC} pipeline (target: pyhalide lower + LLVM under {LOWER_TARGET_S} s)")
    print_header(with_halide)
    syn = measure(synthetic, halide, args.repeats)
    syn["synthetic_met"] = syn["total_s"] < LOWER_TARGET_S
    print_row(syn, with_halide)
    print(f"  target total under {LOWER_TARGET_S} s: {_yn(syn['synthetic_met'])} ({syn['total_s'] * 1e3:.0f} ms)")

    print(f"\napps, hand schedules (targets: lowering under {LOWER_TARGET_S} s for every app"
          + (", total no more than Halide's)" if with_halide else ")"))
    print_header(with_halide)
    records = []
    for app in apps:
        rec = measure(app, halide, args.repeats)
        print_row(rec, with_halide)
        records.append(rec)
    n = len(records)
    lower_ok = sum(r["lower_met"] for r in records)
    summary = f"  lowering under {LOWER_TARGET_S} s: {lower_ok}/{n} apps"
    if with_halide:
        total_ok = sum(bool(r["total_met"]) for r in records)
        summary += f"; total no more than Halide's: {total_ok}/{n} apps"
        summary += f"; geometric-mean ratio {statistics.geometric_mean([r['ratio'] for r in records]):.2f}x"
    print(summary)
    missed = [r["app"] for r in records if not r["lower_met"]]
    if missed:
        print(f"  lowering over {LOWER_TARGET_S} s: {', '.join(missed)}")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"repeats": args.repeats, "halide": with_halide,
                       "halide_version": _halide_version() if with_halide else None,
                       "synthetic": syn, "apps": records}, f, indent=1)
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
