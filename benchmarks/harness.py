"""The side-by-side harness: every app, every variant, one run, medians and ratios.

    python -m benchmarks [APP ...] --json results.json --plot results.png

Variants: pyhalide-naive (the default schedule), pyhalide-hand, pyhalide-auto (the model-only
autoscheduler), pyhalide-tuned (measured autotuning, `--tune-budget` seconds per app; a finished
run's record in the tuning database is reused, so a second run does not tune again), numpy (the
app's reference), torch (conv_layer, where installed),
pyhalide-greedy, pyhalide-random and pyhalide-compute_root (the autoscheduler's baselines: the
greedy grouping, the model's best of 32 random schedules, Li2018-style compute_root; asked for by
name only),
halide-hand (the real Halide, same algorithm and schedule) and halide-adams2019 (Halide's own
autoscheduler). Outputs are checked against the reference before anything is timed; all
variants use the same inputs and thread count, and are timed in alternating rounds so they see
the same machine load. Compile time is reported separately.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from dataclasses import asdict, dataclass

import numpy as np

VARIANTS = ["pyhalide-naive", "pyhalide-hand", "pyhalide-auto", "pyhalide-tuned", "numpy", "torch", "halide-hand",
            "halide-adams2019"]
BASELINES = ["pyhalide-greedy", "pyhalide-random", "pyhalide-compute_root"]  # the search's rivals
SETTLE_SECONDS = 0.25  # pause before each variant's runs, so other libraries' spinning threads sleep
SHORT_SECONDS, WARM_SECONDS, BURST = 0.2, 0.1, 3  # faster variants: 0.1 s of warm-up, then 3 timed runs
SLOW_SECONDS = 5.0  # a variant whose first run takes longer is timed once, not repeated
COPY = "copy"  # the parallel copy of as many bytes as an app's compulsory traffic, timed beside its variants


@dataclass
class Record:
    app: str
    variant: str
    median_ms: float
    min_ms: float
    compile_s: float
    correct: bool
    runs: int
    gflops: float | None = None
    note: str = ""
    gbytes: float | None = None  # apps without a flop count: compulsory traffic per second
    copy_gbs: float | None = None  # ... and a parallel copy of as many bytes, timed in the same rounds


def _halide():
    try:
        import halide
    except ImportError:
        return None
    return halide


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def build_variants(app, inputs, which: set[str], size: str = "default", tune_budget_s: float = 120.0) -> dict:
    """name -> (run function, compile seconds, note), for the variants that exist here."""
    import pyhalide

    out = {}

    def compiled(lib, built, target=None):
        t0 = time.perf_counter()
        if target is not None:
            built.output.compile_jit(target)
        else:
            built.output.compile_jit()
        return time.perf_counter() - t0

    contract = None if app.exact else pyhalide.Target("host-fp_contract")
    if "pyhalide-naive" in which and app.default_schedule_is_slow:
        print(f"  pyhalide-naive: skipped ({app.name}'s default schedule inlines every stage: exponential work)")
    elif "pyhalide-naive" in which:
        built = app.build(pyhalide, inputs)
        out["pyhalide-naive"] = (app.runner(pyhalide, built), compiled(pyhalide, built, contract), "default schedule")
    if "pyhalide-hand" in which:
        built = app.build(pyhalide, inputs)
        app.schedule(pyhalide, built)
        out["pyhalide-hand"] = (app.runner(pyhalide, built), compiled(pyhalide, built, contract), "")
    for variant in ("pyhalide-auto", *BASELINES):
        if variant not in which:
            continue
        try:
            built = app.build(pyhalide, inputs)
            auto_s, strategy = _pyhalide_auto(built, "Adams2019" if variant == "pyhalide-auto" else variant[9:])
            out[variant] = (app.runner(pyhalide, built), auto_s + compiled(pyhalide, built, contract),
                            f"autoschedule {auto_s:.2f} s ({strategy})")
        except Exception as e:  # a failure to schedule an app is a result, not a crash
            print(f"  {variant}: {type(e).__name__}: {e}")
    if "pyhalide-tuned" in which:
        try:
            built = app.build(pyhalide, inputs)
            note = _pyhalide_tuned(app, inputs, size, built, tune_budget_s)
            out["pyhalide-tuned"] = (app.runner(pyhalide, built), compiled(pyhalide, built, contract), note)
        except Exception as e:  # noqa: BLE001
            print(f"  pyhalide-tuned: {type(e).__name__}: {e}")
    halide = _halide()
    if halide is not None and "halide-hand" in which:
        built = app.build(halide, inputs)
        app.schedule(halide, built)
        out["halide-hand"] = (app.runner(halide, built), compiled(halide, built), "")
    if halide is not None and "halide-adams2019" in which:
        try:
            built = app.build(halide, inputs)
            t0 = time.perf_counter()
            _adams2019(halide, built)
            auto_s = time.perf_counter() - t0
            out["halide-adams2019"] = (app.runner(halide, built), auto_s + compiled(halide, built),
                                       f"autoschedule {auto_s:.1f} s")
        except Exception as e:  # the autoscheduler refusing an app is a result, not a crash
            print(f"  halide-adams2019: {type(e).__name__}: {e}")
    if "numpy" in which:
        out["numpy"] = (lambda: app.reference(inputs), 0.0, "")
    torch = _torch()
    if torch is not None and "torch" in which and hasattr(app, "torch_runner"):
        out["torch"] = (app.torch_runner(torch, inputs, _threads()), 0.0, f"torch {torch.__version__}")
    return out


def _pyhalide_auto(built, strategy: str = "Adams2019") -> tuple[float, str]:
    """pyhalide's autoscheduler (or a baseline strategy) on the app's algorithm, with the output's
    size as its estimate."""
    from autoscheduler import auto_schedule

    mins = built.output_mins or [0] * len(built.output_sizes)
    t0 = time.perf_counter()
    result = auto_schedule(built.output, estimates={built.output.name(): list(zip(mins, built.output_sizes))},
                           params={"parallelism": _threads(), "use_records": 0}, strategy=strategy)
    return time.perf_counter() - t0, result.stats["strategy"]


def _pyhalide_tuned(app, inputs, size: str, built, budget_s: float) -> str:
    """Measured autotuning of the app (or a finished run's best record), applied to `built`;
    then how long a second auto_schedule of a fresh build takes to apply the tuned record."""
    import pyhalide
    from autoscheduler import auto_schedule
    from autoscheduler.measure import PipelineSpec
    from autoscheduler.tune import tune

    r = tune(PipelineSpec.app(app.name, size), budget_s=budget_s, threads=_threads())
    r.apply(built.output)
    if r.from_records:
        note = "a finished tuning run's record"
    else:
        st = r.stats
        note = (f"tuned {st['total_s']:.0f} s, {len(r.trials)} candidates ({60 * len(r.trials) / st['total_s']:.0f} "
                f"a minute; compiling {st.get('compile_s', 0):.0f} s summed over the workers, measuring "
                f"{st.get('measure_s', 0):.0f} s, searching {st.get('search_s', 0):.0f} s)")
        note += f" ({r.first_s / r.time_s:.2f}x the model's pick)" if r.first_s else ""
    fresh = app.build(pyhalide, inputs)
    mins = fresh.output_mins or [0] * len(fresh.output_sizes)
    t0 = time.perf_counter()
    again = auto_schedule(fresh.output, estimates={fresh.output.name(): list(zip(mins, fresh.output_sizes))},
                          params={"parallelism": _threads()})
    again_ms = (time.perf_counter() - t0) * 1e3
    same = again.stats["strategy"] == "record" and \
        pyhalide.Pipeline([fresh.output]).schedule_to_json() == pyhalide.Pipeline([built.output]).schedule_to_json()
    return note + f"; a second auto_schedule {again_ms:.0f} ms" + ("" if same else " (NOT the tuned schedule)")


def _adams2019(halide, built) -> None:
    lib = os.path.join(os.path.dirname(halide.__file__), "lib64", "libautoschedule_adams2019.so")
    if "adams2019" not in _adams2019.__dict__:
        halide.load_plugin(lib)
        _adams2019.__dict__["adams2019"] = True
    mins = built.output_mins or [0] * len(built.output_sizes)
    built.output.set_estimates([halide.Range(m, e) for m, e in zip(mins, built.output_sizes)])
    params = halide.AutoschedulerParams("Adams2019", {"parallelism": str(_threads())})
    halide.Pipeline(built.output).apply_autoscheduler(halide.get_jit_target_from_environment(), params)


def _threads() -> int:
    return int(os.environ.get("HL_NUM_THREADS", "2"))


def run_app(name: str, size: str, rounds: int, which: set[str], tune_budget_s: float = 120.0) -> list[Record]:
    from apps import load
    from autoscheduler.peaks import copy_runner

    app = load(name)
    inputs = app.inputs(size)
    expected = app.reference(inputs)
    flops = app.flops(inputs) if hasattr(app, "flops") else None
    # inputs read once, the output written once: what a copy of the same bytes moves
    traffic = None if flops else sum(a.nbytes for a in inputs.values()) + np.asarray(expected).nbytes
    variants = build_variants(app, inputs, which, size, tune_budget_s)
    slow, active = [], {}
    for variant, (run, compile_s, note) in variants.items():
        t0 = time.perf_counter()
        result = run()
        first = time.perf_counter() - t0
        ok = app.check(np.asarray(result), expected)
        if first > SLOW_SECONDS:
            slow.append((variant, first, compile_s, ok, (note + "; timed once: slow").strip("; ")))
            continue
        active[variant] = (run, compile_s, note, ok, first)
    if traffic:  # the copy is timed like a variant, in the same rounds: medians compare with medians
        copy = copy_runner(traffic // 2)
        t0 = time.perf_counter()
        copy()
        active[COPY] = (copy, 0.0, "", True, time.perf_counter() - t0)
    times = {v: [] for v in active}
    for _ in range(rounds):
        for variant, (run, *_rest, first) in active.items():
            # Let the previous variant's worker threads go idle first: OpenBLAS's and Halide's
            # spin for a while after a call and would take a core from whoever runs next. A
            # short variant then runs untimed for a while (the idle VM slows down: after the
            # pause both pyhalide's and Halide's blur take 2-3x longer for tens of runs) and a
            # few times back to back, as a caller running it in a loop would see it.
            time.sleep(SETTLE_SECONDS)
            burst = 1
            if first < SHORT_SECONDS:
                warm_until = time.perf_counter() + WARM_SECONDS
                while time.perf_counter() < warm_until:
                    run()
                burst = BURST
            for _ in range(burst):
                t0 = time.perf_counter()
                run()
                times[variant].append(time.perf_counter() - t0)
    copy_gbs = traffic / statistics.median(times.pop(COPY)) / 1e9 if traffic else None
    active.pop(COPY, None)
    records = [Record(name, variant, first * 1e3, first * 1e3, compile_s, ok, 1,
                      flops / first / 1e9 if flops else None, note, traffic / first / 1e9 if traffic else None,
                      copy_gbs) for variant, first, compile_s, ok, note in slow]
    for variant, (_, compile_s, note, ok, _first) in active.items():
        med, best = statistics.median(times[variant]), min(times[variant])
        records.append(Record(name, variant, med * 1e3, best * 1e3, compile_s, ok, len(times[variant]),
                              flops / med / 1e9 if flops else None, note,
                              traffic / med / 1e9 if traffic else None, copy_gbs))
    records.sort(key=lambda r: (VARIANTS + BASELINES).index(r.variant))
    return records


def print_table(name: str, records: list[Record], peaks: dict | None) -> None:
    by = {r.variant: r for r in records}
    hand = by.get("pyhalide-hand")
    print(f"\n{name}")
    print(f"  {'variant':18s} {'median ms':>10s} {'min ms':>9s} {'compile s':>9s} {'hand is':>9s}  ok   "
          "GFLOP/s, or GB/s of compulsory traffic")
    for r in records:
        ratio = f"{r.median_ms / hand.median_ms:8.2f}x" if hand else "      -"
        gf = f"{r.gflops:7.1f}" if r.gflops else "      -"
        if r.gflops and peaks:
            gf += f" ({100 * r.gflops / peaks['fma_gflops']:.0f}% of peak)"
        elif r.gbytes:
            gf = f"{r.gbytes:7.1f} GB/s ({100 * r.gbytes / r.copy_gbs:.0f}% of a copy of as many bytes)"
        print(f"  {r.variant:18s} {r.median_ms:10.2f} {r.min_ms:9.2f} {r.compile_s:9.2f} {ratio}  "
              f"{'yes' if r.correct else 'NO '}  {gf}  {r.note}")
    if hand is None:
        return
    for rival, target, what in (("halide-hand", 1.2, "within 1.2x of Halide's same schedule"),
                                ("numpy", 1 / 0.7, "at least 0.7x OpenBLAS") if name == "gemm" else (None, 0, ""),
                                ("torch", 1.0, "no slower than PyTorch") if name == "conv_layer" else (None, 0, "")):
        if rival in by:
            met = hand.median_ms <= target * by[rival].median_ms
            print(f"  target {what}: {'met' if met else 'MISSED'} "
                  f"({hand.median_ms / by[rival].median_ms:.2f}x its time)")


def plot(records: list[Record], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    apps = list(dict.fromkeys(r.app for r in records))
    variants = [v for v in VARIANTS + BASELINES if any(r.variant == v for r in records)]
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(apps)), 4.5))
    width = 0.8 / len(variants)
    for i, v in enumerate(variants):
        xs, ys = [], []
        for j, a in enumerate(apps):
            for r in records:
                if r.app == a and r.variant == v:
                    xs.append(j + i * width)
                    ys.append(r.median_ms)
        ax.bar(xs, ys, width, label=v)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(apps))], apps, rotation=20)
    ax.set_yscale("log")
    ax.set_ylabel("median time (ms, log scale)")
    ax.set_title(f"pyhalide apps, {_threads()} threads (lower is better)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> None:
    from apps import NAMES

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("apps", nargs="*", help=f"apps to run (default: all of {', '.join(NAMES)})")
    parser.add_argument("--json", help="write the records here")
    parser.add_argument("--plot", help="write a bar chart (PNG) here")
    parser.add_argument("--size", default="default", choices=["small", "default", "large"],
                        help="input sizes; large: apps that have a larger size use it (gemm 2048^3)")
    parser.add_argument("--rounds", type=int, default=9, help="alternating timing rounds per app")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--tune-budget", type=float, default=120.0,
                        help="seconds of measured autotuning per app for pyhalide-tuned (default 120)")
    parser.add_argument("--target", default="host",
                        help="host (the CPU variants) or host-cuda: the apps' GPU hand schedules (benchmarks.gpu)")
    args = parser.parse_args(argv)
    if "cuda" in args.target.split("-"):
        from benchmarks import gpu

        gpu.main([*args.apps, *(["--json", args.json] if args.json else [])])
        return
    names = args.apps or NAMES
    which = set(args.variants.split(","))
    from autoscheduler.peaks import measure_peaks

    peaks = measure_peaks(_threads())
    print(f"machine: {os.cpu_count()} cores, {_threads()} threads used; measured float32 FMA peak "
          f"{peaks['fma_gflops']:.0f} GFLOP/s, copy bandwidth {peaks['copy_gbs']:.1f} GB/s "
          "(64 MiB, from memory)")
    records = []
    for name in names:
        recs = run_app(name, args.size, args.rounds, which, args.tune_budget)
        print_table(name, recs, peaks)
        records.extend(recs)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"peaks": peaks, "threads": _threads(), "records": [asdict(r) for r in records]}, f, indent=1)
    if args.plot:
        plot(records, args.plot)
