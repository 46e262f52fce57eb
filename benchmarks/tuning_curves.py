"""Model-guided measured tuning against random search at equal measurement budgets.

    python -m benchmarks.tuning_curves [APP ...] --trials 64 --plot curves.png --json curves.json

For each app, both loops measure the same number of candidates (each in a tuning database of its
own, so neither reuses the other's records) and the script prints the best time each reached, the
trials the model-guided loop needed to reach the random search's final best, and plots both
best-so-far curves.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile


def compare(name: str, trials: int, threads: int, size: str) -> dict:
    from autoscheduler.measure import PipelineSpec
    from autoscheduler.tune import tune

    out = {}
    for proposer in ("model", "random"):
        with tempfile.TemporaryDirectory() as d:
            r = tune(PipelineSpec.app(name, size), budget_s=1e9, trials=trials, threads=threads,
                     db=os.path.join(d, "t.sqlite"), proposer=proposer)
        out[proposer] = {"best_s": r.time_s, "curve": [t.best_s for t in r.trials], "total_s": r.stats["total_s"],
                         "first_s": [t.time_s for t in r.trials if t.time_s][0]}
    target = out["random"]["best_s"]
    out["model_trials_to_random_best"] = next(
        (i + 1 for i, b in enumerate(out["model"]["curve"]) if b is not None and b <= target), None)
    return out


def plot(results: dict, path: str) -> None:
    """Best time against trials, model-guided beside random, an app a panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(4 * len(results), 3.5), squeeze=False)
    for ax, (name, r) in zip(axes[0], results.items()):
        for proposer in ("model", "random"):
            curve = [b * 1e3 if b else None for b in r[proposer]["curve"]]
            ax.step(range(1, len(curve) + 1), curve, where="post", label=proposer)
        ax.set(title=name, xlabel="trials", ylabel="best (ms)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv=None) -> None:
    from apps import NAMES

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("apps", nargs="*")
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--size", default="default")
    p.add_argument("--json", help="write the results here; with --merge, update this file's apps")
    p.add_argument("--merge", action="store_true", help="keep the other apps of an existing --json file")
    p.add_argument("--plot", help="a PNG of every app in the results (the merged file's too)")
    args = p.parse_args(argv)
    threads = int(os.environ.get("HL_NUM_THREADS", "2"))
    results = {}
    if args.merge and args.json and os.path.exists(args.json):
        with open(args.json) as f:
            results = json.load(f)
    for name in args.apps or NAMES:
        r = results[name] = compare(name, args.trials, threads, args.size)
        m, rnd = r["model"]["best_s"], r["random"]["best_s"]
        reach = r["model_trials_to_random_best"]
        print(f"{name:20s} model-guided {m * 1e3:9.3f} ms  random {rnd * 1e3:9.3f} ms  random/model {rnd / m:5.2f}x  "
              f"model reached random's best in {reach if reach else '-'} of {args.trials} trials", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if args.plot:
        plot(results, args.plot)


if __name__ == "__main__":
    os.environ.setdefault("HL_NUM_THREADS", "2")
    main()
