"""Train the cost model on this machine: `python -m autoscheduler.train`.

For each of a set of random pipelines (`random_pipelines`, never the gallery apps: they are the
held-out test), candidate schedules are drawn from the search space: the beam's final states, the
greedy and compute-root baselines, and uniformly random legal schedules. Each is measured in a
worker process (`measure`: outputs checked against the reference first, crashes and time-outs
isolated), and the cost model's weights are fitted to the measured times: non-negative least
squares on the relative error (every weight is a cost per unit of its feature, so none may be
negative), which keeps the formula interpretable.

Pipelines are split by seed into a training and a held-out set; the script prints, on the
held-out pipelines, the pairwise ordering accuracy within each pipeline, the Spearman rank
correlation, and the regret of the model's top pick (the measured time of the schedule it ranks
first over the best measured), for the trained weights and for the defaults. With `--misses N`
it measures nothing and prints the N pipelines of the data file where the current model's top
pick lost most, with the decisions in which pick and best differ: where to look before changing
the model (the twenty-second session's three model fixes came from that list).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

import pyhalide as hl

from .api import make_problem
from .apply import apply_directives, directives
from .cost_model import WEIGHTS_PATH, CostModel
from .fit import fit_ranking, quality, total_features
from .loop_nest import FEATURES
from .random_pipelines import SCALES, random_pipeline
from .search import BeamSearch, ComputeRootHeuristic, Greedy, random_state, recorded_state


def _estimates(outputs, sizes) -> dict:
    return {f.name(): [(0, int(n)) for n in size] for f, size in zip(outputs, sizes)}


def candidates(seed: int, n_random: int, params: dict, scale: str = "train") -> list[dict]:
    """Distinct candidate schedules for one random pipeline: JSON text and features of each."""
    rp = random_pipeline(seed, scale)
    outputs, sizes = rp.build(hl)
    problem = make_problem(outputs, None, _estimates(outputs, sizes), None, params)
    states = []
    beam = BeamSearch(beam_size=8, passes=1, seed=seed).run(problem)
    states += [beam.models] + [s.models for s in beam.alternatives[:3]]
    states.append(Greedy(seed).run(problem).models)
    states.append(ComputeRootHeuristic().run(problem).models)
    rng = random.Random(seed)
    for _ in range(n_random):
        states.append(random_state(problem, rng).models)
    out, seen = [], set()
    for models in states:
        key = tuple(sorted((n, m.decision) for n, m in models.items()))
        if key in seen:
            continue
        seen.add(key)
        dirs = directives(problem.model.a, models, set(problem.space.fixed), problem.model.output_regions)
        fresh, _ = rp.build(hl)
        funcs = hl.Pipeline(fresh).funcs_by_name()
        apply_directives(funcs, dirs)
        out.append({"seed": seed, "scale": scale, "schedule": hl.Pipeline(fresh).schedule_to_json(),
                    "features": total_features(models).tolist(),
                    "decisions": {n: m.decision.describe() for n, m in models.items()}})
    return out


def refeaturise(records: list[dict], params: dict, scale: str = "train") -> list[dict]:
    """The records with their features worked out again from their decisions by the current
    loop-nest model: measurements outlive changes to the featurisation. Records whose decisions
    the model no longer accepts are dropped."""
    out = []
    by_pipeline: dict = {}
    for r in records:
        by_pipeline.setdefault((r.get("scale", scale), r["seed"]), []).append(r)
    for (scale_of, seed), rs in sorted(by_pipeline.items()):
        outputs, sizes = random_pipeline(seed, scale_of).build(hl)
        problem = make_problem(outputs, None, _estimates(outputs, sizes), None, params)
        for r in rs:
            state = recorded_state(problem, r["decisions"])
            if state is not None:
                out.append({**r, "features": total_features(state.models).tolist()})
    return out


def pipeline(r: dict) -> tuple:
    """A measurement's pipeline: its (scale, seed)."""
    return r.get("scale", "train"), r["seed"]


def misses(rows: list[dict], predict) -> list[tuple]:
    """(regret, pick, best) per pipeline, the largest regret first: the measured time of the
    schedule `predict` ranks first over the fastest measured, and those two records."""
    by_pipeline: dict = {}
    for r in rows:
        by_pipeline.setdefault(pipeline(r), []).append(r)
    out = []
    for rs in by_pipeline.values():
        pick = min(rs, key=lambda r: predict(dict(zip(FEATURES, r["features"]))))
        best = min(rs, key=lambda r: r["time_s"])
        out.append((pick["time_s"] / best["time_s"], pick, best))
    return sorted(out, key=lambda m: -m[0])


def print_misses(rows: list[dict], n: int) -> None:
    """Where the model is most wrong, to read before changing it: each pipeline, its two
    schedules' times, and the decisions in which they differ."""
    for regret, pick, best in misses(rows, CostModel.load().predict)[:n]:
        rp = random_pipeline(pick["seed"], pick.get("scale", "train"))
        print(f"regret {regret:.2f}: picked {pick['time_s'] * 1e3:.4g} ms, best {best['time_s'] * 1e3:.4g} ms  "
              f"{rp.describe()}")
        for name, decision in pick["decisions"].items():
            if best["decisions"].get(name) != decision:
                print(f"    {name}: {decision}  (best: {best['decisions'].get(name)})")


def main(argv=None) -> None:
    from .measure import PipelineSpec, measure

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pipelines", type=int, default=60, help="random pipelines to measure")
    p.add_argument("--first-seed", type=int, default=1000)
    p.add_argument("--scale", default="train", choices=[s for s in SCALES if s != "test"],
                   help="pipeline sizes (large: app-sized working sets); measurements of both scales "
                        "in one --data file are trained on together")
    p.add_argument("--random", type=int, default=6, help="random schedules per pipeline (besides the searches')")
    p.add_argument("--held-out", type=float, default=0.25, help="fraction of pipelines kept for evaluation")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per candidate (compile and run)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=2, help="HL_NUM_THREADS of the measurements, and parallelism")
    p.add_argument("--data", default="autoscheduler_measurements.json", help="measurements are kept here and reused")
    p.add_argument("--out", default=str(WEIGHTS_PATH), help="where the trained weights go")
    p.add_argument("--misses", type=int, default=0,
                   help="measure nothing: print the N pipelines of --data where the current model's top pick "
                        "lost most to the best schedule measured, with the decisions that differ")
    args = p.parse_args(argv)
    params = {"parallelism": args.threads}
    data_path = Path(args.data)
    data = json.loads(data_path.read_text()) if data_path.exists() else []
    if args.misses:
        print_misses(refeaturise([r for r in data if r["status"] == "ok"], params), args.misses)
        return
    have = {(*pipeline(r), r["schedule"]) for r in data}
    seeds = list(range(args.first_seed, args.first_seed + args.pipelines))
    t0 = time.perf_counter()
    for k, seed in enumerate(seeds):
        cands = [c for c in candidates(seed, args.random, params, args.scale)
                 if (args.scale, seed, c["schedule"]) not in have]
        if not cands:
            continue
        results = measure(PipelineSpec.random(seed, args.scale), [c["schedule"] for c in cands],
                          timeout_s=args.timeout, repeats=args.repeats, threads=args.threads)
        for c, m in zip(cands, results):
            c.update(status=m.status, time_s=m.time_s, error=m.error)
            data.append(c)
        ok = sum(m.status == "ok" for m in results)
        print(f"[{k + 1}/{len(seeds)}] seed {seed}: {ok}/{len(results)} ok "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
        data_path.write_text(json.dumps(data))
    # every measurement in the file, of either scale; the last seeds of each scale are held out
    rows = refeaturise([r for r in data if r["status"] == "ok"], params)
    bad = [r for r in data if r["status"] != "ok"]
    if bad:
        print(f"{len(bad)} candidates failed: " + ", ".join(sorted({r['status'] for r in bad})))
        if any(r["status"] == "wrong" for r in bad):
            wrong = [(pipeline(r), r["decisions"]) for r in bad if r["status"] == "wrong"]
            print("WRONG RESULTS (a compiler bug):", wrong[:3])
    held = set()
    for scale in {pipeline(r)[0] for r in rows}:
        of_scale = sorted({pipeline(r) for r in rows if pipeline(r)[0] == scale})
        held |= set(of_scale[int(len(of_scale) * (1 - args.held_out)):])
    train = [r for r in rows if pipeline(r) not in held]
    test = [r for r in rows if pipeline(r) in held]
    f_train = np.array([r["features"] for r in train])
    t_train = np.array([r["time_s"] for r in train])
    group_of = {key: k for k, key in enumerate(sorted({pipeline(r) for r in train}))}
    g_train = np.array([group_of[pipeline(r)] for r in train])
    start = np.array([CostModel().weights[k] for k in FEATURES])
    w = fit_ranking(f_train, t_train, g_train, start)
    trained = CostModel(dict(zip(FEATURES, map(float, w))), f"trained on {len(train)} schedules of "
                        f"{len(group_of)} random pipelines")

    def groups(rs):
        g: dict = {}
        for r in rs:
            g.setdefault(pipeline(r), []).append((dict(zip(FEATURES, r["features"])), r["time_s"]))
        return g

    default = CostModel()
    for label, rs in (("training", train), ("held-out", test)):
        for name, cm in (("trained", trained), ("defaults", default)):
            q = quality(groups(rs), cm.predict)
            print(f"{label:9s} {name:8s} pairwise {q['pairwise_accuracy']:.3f} ({q['pairs']} pairs)  "
                  f"spearman {q['spearman']:.3f}  top-pick regret mean {q['regret_mean']:.3f} "
                  f"max {q['regret_max']:.2f}")
    print("weights: " + ", ".join(f"{k}={v:.3g}" for k, v in trained.weights.items()))
    Path(args.out).write_text(trained.to_json() + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
