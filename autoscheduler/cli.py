"""The command line: `pyhalide` (also `python -m pyhalide`).

    pyhalide tune apps.blur --budget 60 [--trials N] [--plot out.png] [--json out.json]
    pyhalide tune mymodule:build_pipeline --budget 300
    pyhalide records list | show ID | export FILE | import FILE | prune [--keep N]
    pyhalide demo [APP]

`tune` measures candidate schedules with a progress bar, keeps every measurement in the tuning
database, and ends with a report: the tuned time beside the model-only pick, the every-Func-at-
root schedule and the default schedule (the algorithm as built), re-measured side by side in one
batch; for a gallery app also numpy's time and the share of this machine's peak (GFLOP/s against
the measured FMA peak, or GB/s of compulsory traffic against the copy bandwidth); the search and
measurement time, the candidates measured and failed, the size of the space, the cost model's rank
correlation with the measured times, and the schedule as Python source.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time


def _tune(args) -> int:
    from tqdm import tqdm

    from .measure import measure
    from .records import TuningDB
    from .tune import as_spec, tune

    os.environ["HL_NUM_THREADS"] = str(args.threads)  # this process times numpy and the machine's peaks
    spec = as_spec(args.spec)
    db = TuningDB(args.db) if args.db else TuningDB()
    bar = tqdm(total=args.trials, unit="trial", desc=f"tuning {spec.name}", disable=args.quiet,
               bar_format="{desc} {n_fmt} trials [{elapsed}] {postfix}" if args.trials is None else None)

    def progress(trial, result):
        bar.update(1)
        fails = sum(result.failures.values())
        best = f"{trial.best_s * 1e3:.3f} ms" if trial.best_s else "-"
        speedup = f" ({result.first_s / trial.best_s:.2f}x the model's pick)" if result.first_s and trial.best_s else ""
        bar.set_postfix_str(f"best {best}{speedup}, {fails} failed")

    try:
        r = tune(spec, budget_s=args.budget, trials=args.trials, batch_size=args.batch, seed=args.seed,
                 threads=args.threads, db=db, reuse=not args.fresh, progress=progress)
    finally:
        bar.close()
    print(f"\n{spec.describe()}")
    if r.from_records:
        print(f"  a finished tuning run's best record (no search; --fresh tunes again): "
              f"{r.time_s * 1e3:.3f} ms, record {r.stats.get('record_id')}")
    else:
        ok = [t for t in r.trials if t.time_s is not None]
        # the tuned schedule beside the model-only pick and the all-root schedule, in one batch
        names, texts = ["tuned"], [r.schedule]
        if r.first_schedule and r.first_schedule != r.schedule:
            names.append("model-only pick")
            texts.append(r.first_schedule)
        names.append("every Func at root")
        texts.append(spec.reference_schedule_json())
        app = _app(spec)
        if app is None or not app.default_schedule_is_slow:  # (inlining every stage of a deep graph explodes)
            names.append("default schedule")
            texts.append(_as_built(spec))
        run_timeout_s = max(2.0, 100 * (r.time_s or 0.0))
        final = measure(spec, texts, repeats=15, threads=args.threads, run_timeout_s=run_timeout_s)
        base = final[0].time_s
        print("  side by side (one batch, median of 15 runs):")
        for name, m in zip(names, final):
            t = f"{m.time_s * 1e3:10.3f} ms  tuned is {m.time_s / base:5.2f}x faster" if m.ok and base else \
                f"over {run_timeout_s:g} s a run (killed)" if m.status == "timeout" else m.status
            print(f"    {name:20s} {t}")
        if app is not None and base:
            _app_report(app, spec, base, args.threads)
        s = r.stats
        print(f"  trials {len(r.trials)} ({len(ok)} correct; failed: "
              f"{', '.join(f'{k} {v}' for k, v in r.failures.items()) or 'none'})"
              f"{'; resumed ' + str(s['resumed']) + ' from the records' if s.get('resumed') else ''}")
        minutes = max(1e-9, s["total_s"]) / 60
        print(f"  time {s['total_s']:.1f} s: search {s.get('search_s', 0):.1f} s, measuring "
              f"{s.get('measure_s', 0):.1f} s, of which building and compiling {s.get('compile_s', 0):.1f} s "
              f"({len(r.trials) / minutes:.0f} candidates a minute)")
        if s.get("space_log10") is not None:
            print(f"  the space: about 10^{s['space_log10']:.0f} schedules (each Func's options, along the tuned "
                  f"schedule); {s['measured']} measured")
        if s.get("seeded"):
            print(f"  started from the best schedules of {s['seeded']} other shapes or machines")
        print(f"  cost model rank correlation with the measured times (Spearman): {r.spearman():.2f}")
        if s.get("interrupted"):
            print("  interrupted: run the same command again to go on from the records")
        if args.plot:
            plot(r, args.plot)
            print(f"  plots: {args.plot}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"spec": list(spec.__dict__.values()), "time_s": r.time_s, "first_s": r.first_s,
                           "decisions": r.decisions, "stats": r.stats, "failures": r.failures,
                           "trials": [t.__dict__ for t in r.trials],
                           "side_by_side": {n: m.time_s for n, m in zip(names, final)}}, f, indent=1)
    print("\n" + (r.schedule_source or f"pipeline.apply_schedule_json({r.schedule!r})"))
    db.close()
    return 0


def _app(spec):
    import apps

    return apps.load(spec.name) if spec.kind == "app" else None


def _as_built(spec) -> str:
    import pyhalide as hl

    outputs, _, _ = spec.build(hl)
    return hl.Pipeline(outputs).schedule_to_json()


def _app_report(app, spec, tuned_s: float, threads: int) -> None:
    """numpy's time beside the tuned one, and the tuned schedule's share of the machine's peak."""
    from .peaks import measure_peaks

    inputs = app.inputs(spec.size)
    expected = app.reference(inputs)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        app.reference(inputs)
        times.append(time.perf_counter() - t0)
    numpy_s = statistics.median(times)
    print(f"    {'numpy (the reference)':20s} {numpy_s * 1e3:10.3f} ms  tuned is {numpy_s / tuned_s:5.2f}x faster")
    peaks = measure_peaks(threads)
    if hasattr(app, "flops"):
        rate = app.flops(inputs) / tuned_s / 1e9
        print(f"  {rate:.1f} GFLOP/s: {100 * rate / peaks['fma_gflops']:.0f}% of this machine's float32 FMA peak "
              f"({peaks['fma_gflops']:.0f} GFLOP/s measured on {threads} threads)")
    else:
        traffic = sum(a.nbytes for a in inputs.values()) + expected.nbytes
        rate = traffic / tuned_s / 1e9
        print(f"  {rate:.1f} GB/s of compulsory traffic (inputs read and the output written once): "
              f"{100 * rate / peaks['copy_gbs']:.0f}% of this machine's copy bandwidth "
              f"({peaks['copy_gbs']:.1f} GB/s measured)")


def plot(result, path: str) -> None:
    """Best time against trials and against wall time; predicted against measured time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ts = [t for t in result.trials if t.best_s is not None]
    fig, ax = plt.subplots(1, 3, figsize=(15, 4))
    ax[0].step([t.index for t in ts], [t.best_s * 1e3 for t in ts], where="post")
    ax[0].set(xlabel="trials", ylabel="best measured (ms)", title="best against trials")
    ax[1].step([t.wall_s for t in ts], [t.best_s * 1e3 for t in ts], where="post")
    ax[1].set(xlabel="wall time (s)", ylabel="best measured (ms)", title="best against time")
    ok = [t for t in result.trials if t.time_s is not None and t.predicted_s]
    ax[2].loglog([t.predicted_s * 1e3 for t in ok], [t.time_s * 1e3 for t in ok], ".", alpha=0.6)
    ax[2].set(xlabel="predicted (ms)", ylabel="measured (ms)", title="cost model against measurements")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _records(args) -> int:
    from .records import TuningDB

    db = TuningDB(args.db) if args.db else TuningDB()
    try:
        if args.what == "list":
            rows = db.summary()
            if not rows:
                print(f"no records in {db.path}")
            for algorithm, shapes, machine, version, fversion, n, schedules, ok, best in rows:
                b = f"{best * 1e3:.3f} ms" if best is not None else "-"
                print(f"{algorithm[:16]}  {shapes[:60]:60s}  {machine}  v{version}/f{fversion}  "
                      f"{schedules} schedules, {n} measurements ({ok or 0} ok), fastest run {b}")
        elif args.what == "show":
            if args.arg is None:
                print("records show ID | ALGORITHM-PREFIX", file=sys.stderr)
                return 2
            recs = [db.get(int(args.arg))] if args.arg.isdigit() else db.records(algorithm=args.arg, limit=args.limit)
            for r in recs:
                if r is None:
                    print(f"no record {args.arg}", file=sys.stderr)
                    return 1
                t = f"{r.time_s * 1e3:.3f} ms" if r.time_s is not None else "-"
                print(f"record {r.id}: {r.status} {t}  trial {r.trial} of run {r.run_id}  ({r.origin}, "
                      f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(r.created))})")
                print(f"  algorithm {r.key.algorithm}  machine {r.key.machine}  shapes {r.key.shapes}")
                for name, d in (r.decisions or {}).items():
                    print(f"    {name}: {d}")
                if r.error:
                    print(f"  error: {r.error[:300]}")
        elif args.what == "export":
            n = db.export(args.arg or "records.jsonl")
            print(f"exported {n} records to {args.arg or 'records.jsonl'}")
        elif args.what == "import":
            n, refused = db.import_(args.arg)
            print(f"imported {n} records (kept apart as imported: measured elsewhere, never applied as they are)")
            for why in refused:
                print(f"  refused {why}")
            return 1 if refused else 0
        elif args.what == "prune":
            print(f"deleted {db.prune(args.keep)} records (kept the {args.keep} fastest of every key)")
        return 0
    finally:
        db.close()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="pyhalide", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("tune", help="tune a pipeline's schedule by measuring candidates")
    t.add_argument("spec", help="apps.NAME (a gallery app) or module:function (returns the output Func(s) "
                                "or a Pipeline, with estimates set and inputs bound)")
    t.add_argument("--budget", type=float, default=60.0, help="seconds of wall time (default 60)")
    t.add_argument("--trials", type=int, help="stop after this many candidates")
    t.add_argument("--threads", type=int, default=2, help="threads the candidates run with (default 2)")
    t.add_argument("--batch", type=int, default=8, help="candidates proposed per round")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--db", help="the tuning database (default: $PYHALIDE_CACHE_DIR/tuning.sqlite)")
    t.add_argument("--fresh", action="store_true", help="tune again even if a finished run's record exists")
    t.add_argument("--plot", help="write the tuning curves and the model's predictions to this PNG")
    t.add_argument("--json", help="write the run (trials, times, decisions) to this JSON file")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.set_defaults(run=_tune)
    r = sub.add_parser("records", help="the tuning database: list, show, export, import, prune")
    r.add_argument("what", choices=["list", "show", "export", "import", "prune"])
    r.add_argument("arg", nargs="?", help="show: a record id or algorithm-hash prefix; export/import: a file")
    r.add_argument("--db", help="the tuning database (default: $PYHALIDE_CACHE_DIR/tuning.sqlite)")
    r.add_argument("--keep", type=int, default=10, help="prune: records kept per key")
    r.add_argument("--limit", type=int, default=5, help="show: records shown for an algorithm")
    r.set_defaults(run=_records)
    d = sub.add_parser("demo", help="auto-schedule a gallery app and time it beside numpy and the hand schedule")
    d.add_argument("rest", nargs=argparse.REMAINDER)
    d.set_defaults(run=lambda a: __import__("autoscheduler.demo", fromlist=["main"]).main(a.rest) or 0)
    args = p.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
