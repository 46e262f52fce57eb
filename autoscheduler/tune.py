"""Measured autotuning: propose, build and run, measure, refine the model, repeat; remember.

    result = tune("apps.blur", budget_s=60)            # or PipelineSpec / "module:function"
    result.apply(pipeline)                               # the best measured schedule

Each round the beam search proposes a batch with the current cost model: its best states, the
best of a search with random dropout, and mutations of the fastest schedules measured so far (one
Func's decision changed). The runner builds and times the batch in worker processes (a candidate
that fails to compile, crashes, hangs or computes a wrong result is recorded with that status and
never chosen), every measurement goes into the tuning database in one transaction, and the model's
weights are refitted to this pipeline's measurements (the ranking loss of `train`, pulled towards
the weights it started from). The fastest schedule so far is re-timed in every batch, beside the
new candidates, so that the best is judged by the median of several runs on this noisy machine.

A run that finished for the same algorithm, shapes and machine is not repeated: its best record is
the answer. A run that was interrupted (Ctrl-C, a kill) goes on from the records it committed.
"""

from __future__ import annotations

import math
import random
import statistics
import threading
import time
from dataclasses import dataclass, field

import numpy as np

import pyhalide as hl
from pyhalide.structural_hash import structural_hash

from .api import gather_estimates, search
from .apply import apply_directives, directives, python_source
from .cost_model import CostModel
from .fit import _ranks, fit_ranking, total_features
from .loop_nest import FEATURES
from .measure import KEEP_BUILT, Measurement, MeasurePool, PipelineSpec, default_workers, measure
from .records import Record, TuningDB, TuningKey, machine_fingerprint
from .search import BeamSearch, State, random_state, recorded_state

CONFIRM = 3  # the fastest candidates timed again at the end of a run
CUTOFF = 3.0  # a candidate this many times slower than the best so far is timed once
RUN_TIMEOUT = 10.0  # and one whose single run takes this many times longer is killed ("timeout")
RUN_TIMEOUT_FLOOR_S = 2.0


class LocalRunner:
    """Measures on this machine in spawned worker processes (measure.MeasurePool), one pool per
    pipeline kept until close(): candidates compile in parallel on `workers` processes (default
    one per core) and are timed one at a time."""

    def __init__(self, threads: int = 2, timeout_s: float = 60.0, repeats: int = 7, warmup: int = 1,
                 workers: int | None = None):
        self.threads, self.timeout_s, self.repeats, self.warmup = threads, timeout_s, repeats, warmup
        self.parallel = workers or default_workers()  # candidates built at once
        self._pools: dict[PipelineSpec, MeasurePool] = {}

    def measure(self, spec: PipelineSpec, schedules: list[str], cutoff_s: float | None = None,
                run_timeout_s: float | None = None) -> list[Measurement]:
        """One Measurement per schedule; one timed run for a candidate slower than cutoff_s; a
        "timeout" for one whose run takes longer than run_timeout_s (default: timeout_s)."""
        pool = self._pools.get(spec)
        if pool is None:
            pool = self._pools[spec] = MeasurePool(spec, self.parallel, self.threads, self.timeout_s)
        return pool.measure(schedules, self.repeats, self.warmup, cutoff_s, run_timeout_s)

    def fingerprint(self) -> str:
        return machine_fingerprint(self.threads)

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools = {}

    def __enter__(self) -> LocalRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getstate__(self):  # a DaskRunner ships its settings to the workers, not its processes
        return {**self.__dict__, "_pools": {}}


class DaskRunner:
    """Measures on the workers of a Dask cluster (`pip install pyhalide[distributed]`): each
    candidate is a task that measures it in a process the task spawns on its worker (so a crash
    takes down that process, not the worker), one candidate per worker at a time. `client`: a
    dask.distributed.Client, or a scheduler address ("tcp://host:8786", "dask://host:8786").
    Workers must be able to start processes (dask's `distributed.worker.daemon: False`, or
    threads-only workers as in LocalCluster(processes=False)) and import the pipeline's spec."""

    def __init__(self, client, threads: int = 2, timeout_s: float = 60.0, repeats: int = 7, warmup: int = 1):
        from dask.distributed import Client

        if isinstance(client, str):
            client = Client(client.replace("dask://", "tcp://"))
        self.client = client
        self.local = LocalRunner(threads, timeout_s, repeats, warmup, workers=1)
        self.threads = threads
        self.parallel = max(1, len(client.scheduler_info().get("workers", {})))
        if any(client.run(_is_daemon).values()):
            raise hl.HalideError("DaskRunner: the cluster's workers are daemonic processes, which cannot start the "
                                 "processes candidates are measured in: start them with the dask config "
                                 "distributed.worker.daemon: False (DASK_DISTRIBUTED__WORKER__DAEMON=False)")

    def measure(self, spec: PipelineSpec, schedules: list[str], cutoff_s: float | None = None,
                run_timeout_s: float | None = None) -> list[Measurement]:
        futures = [self.client.submit(_measure_on_worker, self.local, spec, text, cutoff_s, run_timeout_s, pure=False)
                   for text in schedules]
        out = []
        for text, fut in zip(schedules, futures):
            try:
                out.append(fut.result(timeout=self.local.timeout_s * 3 + 120))
            except Exception as e:  # noqa: BLE001 - a lost worker or task is that candidate's failure
                out.append(Measurement("crash", error=f"dask: {type(e).__name__}: {e}"[:2000], schedule=text))
        return out

    def fingerprint(self) -> str:
        """The machine of the cluster's workers: one fingerprint if they all agree, else an error
        (records must say what they were measured on)."""
        prints = set(self.client.run(machine_fingerprint, self.threads).values())
        if len(prints) != 1:
            raise hl.HalideError(f"DaskRunner: the workers are different machines ({', '.join(sorted(prints))}); "
                                 "tune on one kind of machine at a time")
        return prints.pop()


_WORKER_LOCK = threading.Lock()


def _is_daemon() -> bool:
    import multiprocessing

    return bool(multiprocessing.current_process().daemon)


def _measure_on_worker(runner: LocalRunner, spec: PipelineSpec, text: str, cutoff_s: float | None,
                       run_timeout_s: float | None) -> Measurement:
    with _WORKER_LOCK:  # one candidate at a time on each worker, however many threads it has
        return measure(spec, [text], runner.timeout_s, runner.repeats, runner.warmup, 1, runner.threads,
                       cutoff_s=cutoff_s, run_timeout_s=run_timeout_s)[0]


def as_spec(spec) -> PipelineSpec:
    """A PipelineSpec from what a user names: "apps.blur" or "blur" (a gallery app),
    "module:function" (their own), output Funcs or a Pipeline built here, a tuple for
    PipelineSpec.of, or a PipelineSpec."""
    if isinstance(spec, hl.Func | hl.Pipeline) or (isinstance(spec, list) and spec and
                                                    all(isinstance(f, hl.Func) for f in spec)):
        return PipelineSpec.of_outputs(spec)
    if isinstance(spec, str):
        if ":" in spec:
            return PipelineSpec.function(spec)
        return PipelineSpec.app(spec.removeprefix("apps."))
    return PipelineSpec.of(spec)


@dataclass
class Trial:
    index: int
    wall_s: float  # since the run started
    status: str
    time_s: float | None
    predicted_s: float | None
    best_s: float | None  # the best measured after this trial
    decisions: dict | None


@dataclass
class TuneResult:
    schedule: str  # the best schedule's JSON (schedule_to_json)
    time_s: float | None  # its median measured time
    key: TuningKey
    from_records: bool  # no search: a finished run's best record
    schedule_source: str = ""
    decisions: dict | None = None
    first_s: float | None = None  # the model-only pick, measured (what auto_schedule alone gives)
    first_schedule: str = ""
    trials: list[Trial] = field(default_factory=list)
    failures: dict = field(default_factory=dict)  # status -> count
    stats: dict = field(default_factory=dict)
    cost_model: CostModel | None = None  # refined on this run's measurements

    def apply(self, outputs_or_pipeline) -> None:
        pipeline = outputs_or_pipeline if isinstance(outputs_or_pipeline, hl.Pipeline) else \
            hl.Pipeline(outputs_or_pipeline)
        pipeline.apply_schedule_json(self.schedule)

    def spearman(self) -> float:
        """Rank correlation of the predicted and measured times of the run's correct candidates."""
        pairs = [(t.predicted_s, t.time_s) for t in self.trials if t.time_s is not None and t.predicted_s]
        if len(pairs) < 3:
            return float("nan")
        p, m = (_ranks(np.array(x)) for x in zip(*pairs))
        return float(np.corrcoef(p, m)[0, 1]) if p.std() and m.std() else float("nan")


def tuning_key(outputs, threads: int, machine: str | None = None, estimates=None, example_inputs=None) -> TuningKey:
    """The key of the tuning records of these outputs (with their estimates) on this machine."""
    regions, shapes, _ = gather_estimates(outputs, estimates, example_inputs)
    return TuningKey(structural_hash(outputs), TuningKey.shapes_text([regions[f.name()] for f in outputs], shapes),
                     machine or machine_fingerprint(threads))


class _Tuning:
    """One run's state: the problem, the candidates measured and their times."""

    def __init__(self, spec: PipelineSpec, threads: int, params: dict, seed: int, cost_model: CostModel):
        self.spec = spec
        outputs, sizes, mins = spec.build(hl)
        for f, size, mn in zip(outputs, sizes, mins):
            f.set_estimates([(m, e) for m, e in zip(mn or [0] * len(size), size)])
        self.outputs = outputs
        self.params = {"parallelism": threads, **params}
        self.hand = hl.Pipeline(outputs).copy_schedule()  # the schedules the build came with
        # the space auto_schedule searches: with producers cloned into stencil consumers where
        # that is predicted faster
        self.problem, self.first_beam = search(outputs, self.beam(seed), None, None, None, self.params, cost_model)
        self.rng = random.Random(seed)
        self.seed = seed
        self.times: dict[str, list[float]] = {}  # schedule JSON -> measured times (medians of batches)
        self.run_cost: dict[str, float] = {}  # schedule JSON -> seconds its timing took
        self.failed: set[str] = set()
        self.states: dict[str, State] = {}  # schedule JSON -> the state it came from
        self.decisions: dict[str, dict] = {}
        self.model_pick: tuple | None = None
        self.seeds: list[State] = []  # the best schedules of the nearest shapes: measured first

    def beam(self, seed: int) -> BeamSearch:
        p = self.params
        return BeamSearch(int(p.get("beam_size", 32)), int(p.get("passes", 2)), seed=seed,
                          max_states=int(p.get("max_states", 16_000)))

    # ---- candidates
    def schedule_of(self, state: State) -> str:
        """The schedule JSON of a complete state, applied to a fresh build of the algorithm."""
        a = self.problem.model.a
        dirs = directives(a, state.models, set(self.problem.space.fixed), self.problem.model.output_regions)
        pipeline = hl.Pipeline(self.outputs)
        pipeline.set_schedule(self.hand)
        for name in a.funcs:
            if name not in self.problem.space.fixed:
                a.funcs[name].func.reset_schedule()
        try:
            apply_directives(pipeline.funcs_by_name(), dirs)
            return pipeline.schedule_to_json()
        finally:
            pipeline.set_schedule(self.hand)

    def source_of(self, state: State) -> str:
        a = self.problem.model.a
        return python_source(directives(a, state.models, set(self.problem.space.fixed),
                                        self.problem.model.output_regions))

    def space_log10(self, state: State) -> float:
        """log10 of the number of schedules along `state`: the product, Func by Func in the
        search's order, of the options each has given the decisions before it (the space is a
        tree; this is the size of the level sets the search walked down)."""
        st, total = State({}, 0.0), 0.0
        for name in self.problem.order:
            total += math.log10(max(1, len(self.problem.space.options(name, st.models))))
            st = self.problem.extend(st, name, state.models[name].decision, ahead=False)
        return total

    def state_of(self, decisions: dict) -> State | None:
        return recorded_state(self.problem, decisions)

    def mutate(self, state: State) -> State:
        """The state with one Func's decision redrawn from its options; the Funcs after it keep
        theirs where they still are options, else take the model's cheapest."""
        order = self.problem.order
        target = order[self.rng.randrange(len(order))]
        st = State({}, 0.0)
        for name in order:
            opts = self.problem.space.options(name, st.models)
            if name == target:
                d = opts[self.rng.randrange(len(opts))]
            else:
                want = state.models[name].decision.describe()
                d = next((o for o in opts if o.describe() == want), None)
                if d is None:
                    d = min(opts, key=lambda o: self.problem.cost_model.predict(
                        self.problem.model.evaluate(name, o, st.models).features))
            st = self.problem.extend(st, name, d)
        return st

    def propose_random(self, n: int) -> list[tuple[str, State]]:
        """The random-search baseline: n new uniformly random legal schedules."""
        out: list[tuple[str, State]] = []
        for _ in range(20 * n):
            if len(out) >= n:
                break
            st = random_state(self.problem, self.rng)
            text = self.schedule_of(st)
            if text not in self.times and text not in self.failed and all(text != t for t, _ in out):
                out.append((text, st))
        return out

    def propose(self, round_: int, n: int) -> list[tuple[str, State]]:
        """Up to n new candidates: about half the model's best (the beam's states, and from the
        second round a dropout search's), a quarter mutations of the fastest measured, a quarter
        random states (exploration: what the model ranks low is how it learns it was wrong)."""
        cm = self.problem.cost_model
        # (round 0's beam is the one search() ran to choose the problem)
        beam = self.first_beam if not round_ else self.beam(self.seed + round_).run(self.problem)
        best = [State(beam.models, beam.cost)] + beam.alternatives
        if not round_:
            self.model_pick = _decision_key(best[0])  # what auto_schedule alone would apply
        if round_:
            drop = BeamSearch(8, 1, dropout=0.8, seed=self.seed * 7919 + round_).run(self.problem)
            best += [State(drop.models, drop.cost)] + drop.alternatives[:4]
        mutants = [self.mutate(self.states[t]) for t in self.ranked()[:3] for _ in range(max(2, n // 2))]
        randoms = [random_state(self.problem, self.rng) for _ in range(2 * n)]
        for st in best + mutants + randoms:  # predictions with the current weights
            st.cost = sum(cm.predict(m.features) for m in st.models.values())
        pools = [sorted(best, key=lambda s: (s.cost, _decision_key(s))),
                 sorted(mutants, key=lambda s: (s.cost, _decision_key(s))), randoms]
        shares = [n - 2 * (n // 4), n // 4, n // 4]
        out: list[tuple[str, State]] = []
        seen: set = set()

        def take(pool, k):
            while pool and k > 0:
                st = pool.pop(0)
                dk = _decision_key(st)
                if dk in seen:
                    continue
                seen.add(dk)
                text = self.schedule_of(st)
                if text in self.times or text in self.failed or any(text == t for t, _ in out):
                    continue
                out.append((text, st))
                k -= 1

        seeds, self.seeds = self.seeds, []
        for st in seeds:
            st.cost = sum(cm.predict(m.features) for m in st.models.values())
        take(seeds, min(len(seeds), n))
        for pool, k in zip(pools, shares):
            take(pool, k - len(out) if pool is pools[0] else k)
        for pool in pools:  # where a pool ran dry, the others fill the batch
            take(pool, n - len(out))
        out.sort(key=lambda c: c[1].cost)
        return out

    # ---- measurements
    def ranked(self) -> list[str]:
        return sorted(self.times, key=lambda t: (statistics.median(self.times[t]), t))

    def best(self) -> tuple[str | None, float | None]:
        r = self.ranked()
        return (r[0], statistics.median(self.times[r[0]])) if r else (None, None)

    def record(self, text: str, st: State, m: Measurement, key: TuningKey, run_id: str, trial: int) -> Record:
        """Take in a candidate's measurement; its tuning record."""
        decisions = {n: fm.decision.describe() for n, fm in st.models.items()}
        self.states[text], self.decisions[text] = st, decisions
        if m.ok:
            self.times[text] = [m.time_s]
            self.run_cost.pop(text, None)  # (in the order measured)
            self.run_cost[text] = m.time_s * (len(m.times) + 2)  # the check and warm-up runs too
        else:
            self.failed.add(text)
        return Record(key, text, m.status, m.time_s, decisions, st.cost, m.error, run_id, trial)

    def retime(self, text: str, m: Measurement, key: TuningKey, run_id: str, trial: int) -> list[Record]:
        """Take in a re-timing of the best so far (a failure this time disqualifies it)."""
        if m.ok:
            self.times[text].append(m.time_s)
            self.run_cost[text] = self.run_cost.pop(text, m.time_s * (len(m.times) + 2))  # now the latest
        else:
            del self.times[text]
            self.failed.add(text)
        return [Record(key, text, m.status, m.time_s, self.decisions.get(text), None, m.error, run_id, trial)]

    def confirmed(self, model_pick: str) -> list[str]:
        texts = self.ranked()[:CONFIRM]
        return texts + [model_pick] if model_pick in self.times and model_pick not in texts else texts

    def confirm_cost(self, model_pick: str, build_s: float, kept: int) -> float:
        """About how long confirm() will take: each candidate built (unless it is among the
        `kept` last measured, which the workers still hold built), then timed twice."""
        recent = set(list(self.run_cost)[-kept:])
        return sum(build_s * (t not in recent) + 2 * self.run_cost.get(t, 0.0) for t in self.confirmed(model_pick))

    def confirm(self, runner, spec: PipelineSpec, model_pick: str, key: TuningKey, run_id: str,
                trial: int) -> list[Record]:
        """Time the CONFIRM fastest again, and the model's pick, twice each, interleaved: the
        fastest of many candidates timed once is partly the luckiest (the winner's curse)."""
        texts = self.confirmed(model_pick)
        if not texts:
            return []
        rows = []
        for text, m in zip(texts * 2, runner.measure(spec, texts * 2)):
            if text in self.times:
                rows += self.retime(text, m, key, run_id, trial)
        return rows

    def refit(self, start: CostModel) -> None:
        """Weights fitted to this pipeline's measured candidates, starting from (and pulled
        towards) `start`."""
        texts = [t for t in self.times if t in self.states]
        if len(texts) < 4:
            return
        feats = np.array([total_features(self.states[t].models) for t in texts])
        times = np.array([statistics.median(self.times[t]) for t in texts])
        prior = np.array([start.weights[k] for k in FEATURES])
        w = fit_ranking(feats, times, np.zeros(len(texts), dtype=int), prior, steps=300)
        self.problem.cost_model = CostModel(dict(zip(FEATURES, map(float, w))),
                                            f"{start.source}, refined on {len(texts)} measurements")


def _decision_key(state: State) -> tuple:
    return tuple(sorted((n, m.decision.describe()) for n, m in state.models.items()))


def tune(spec, budget_s: float = 60.0, trials: int | None = None, batch_size: int = 8, seed: int = 0,
         threads: int = 2, params: dict | None = None, db: TuningDB | str | None = None, runner=None,
         reuse: bool = True, progress=None, proposer: str = "model") -> TuneResult:
    """Tune the schedule of a pipeline by measuring candidates, within `budget_s` seconds of wall
    time or `trials` candidates, whichever ends first; returns the best measured schedule.

    spec: "apps.NAME", "module:function" (see measure._FunctionSource) or a PipelineSpec. db: a
    TuningDB or its path (default: the user's cache). runner: LocalRunner(threads) unless given
    (anything with measure(spec, schedules, cutoff_s=None, run_timeout_s=None) and fingerprint(), and optionally
    `parallel`, the candidates it measures at once). reuse: a finished run's best
    record for the same key answers at once. progress(trial: Trial, result_so_far) is called after
    each candidate. Ctrl-C stops the run and returns the best so far (the run stays resumable).
    proposer="random": the baseline, uniformly random legal schedules (give it a db of its own to
    compare it with the model-guided loop: a run goes on from the records of its key).
    spec may also be output Funcs or a Pipeline built in this process (with set_estimates on
    the outputs and their inputs bound): the best schedule is then applied to them."""
    resolved = as_spec(spec)
    result = _tune(resolved, budget_s, trials, batch_size, seed, threads, params, db, runner, reuse, progress,
                   proposer)
    if resolved.kind == "outputs":
        result.apply(spec)
    return result


def _tune(spec: PipelineSpec, budget_s, trials, batch_size, seed, threads, params, db, runner, reuse, progress,
          proposer) -> TuneResult:
    if proposer not in ("model", "random"):
        raise ValueError(f"proposer must be 'model' or 'random', got {proposer!r}")
    t0 = time.perf_counter()
    own_runner = runner is None
    runner = runner or LocalRunner(threads)
    own_db = not isinstance(db, TuningDB)
    db = TuningDB(db) if own_db else db
    try:
        start_model = CostModel.load()
        tuning = _Tuning(spec, threads, dict(params or {}), seed, start_model)
        key = tuning_key(tuning.outputs, threads, runner.fingerprint())
        if reuse and db.tuned(key):
            rec = db.best(key)
            if rec is not None:
                st = tuning.state_of(rec.decisions) if rec.decisions else None
                return TuneResult(rec.schedule, rec.time_s, key, True,
                                  tuning.source_of(st) if st else "", rec.decisions,
                                  stats={"total_s": time.perf_counter() - t0, "record_id": rec.id})
        run_id = db.start_run(key)
        result = TuneResult("", None, key, False)
        n_trial = _resume(tuning, db, key, result)
        if not n_trial:  # a new shape of a tuned algorithm starts from its nearest shapes' best
            tuning.seeds = [st for r in db.nearest(key) if r.decisions
                            for st in [tuning.state_of(r.decisions)] if st is not None]
            result.stats["seeded"] = len(tuning.seeds)
        stop_at = t0 + budget_s
        round_ = 0
        parallel = max(1, int(getattr(runner, "parallel", 1)))
        try:
            while time.perf_counter() < stop_at and (trials is None or n_trial < trials):
                want = batch_size if trials is None else min(batch_size, trials - n_trial)
                if result.trials:  # a batch that fits the time left, confirmation included
                    per = result.stats["measure_s"] / max(1, len(result.trials) + round_)
                    build_s = result.stats["compile_s"] / len(result.trials) / parallel
                    left = stop_at - time.perf_counter() - tuning.confirm_cost(result.first_schedule, build_s,
                                                                               KEEP_BUILT * parallel)
                    if left < per:
                        break
                    want = min(want, int(left / per))
                else:  # the first batch, one wave of the runner's workers: what a candidate costs
                    want = min(want, parallel)
                ts = time.perf_counter()
                batch = tuning.propose(round_, want) if proposer == "model" else tuning.propose_random(want)
                result.stats["search_s"] = result.stats.get("search_s", 0.0) + time.perf_counter() - ts
                if not batch:
                    result.stats["exhausted"] = True
                    break
                incumbent, best_s = tuning.best()
                texts = [t for t, _ in batch] + ([incumbent] if incumbent else [])
                tm = time.perf_counter()
                ms = runner.measure(spec, texts, cutoff_s=CUTOFF * best_s if best_s else None,
                                    run_timeout_s=max(RUN_TIMEOUT_FLOOR_S, RUN_TIMEOUT * best_s) if best_s else None)
                result.stats["measure_s"] = result.stats.get("measure_s", 0.0) + time.perf_counter() - tm
                rows = tuning.retime(incumbent, ms[-1], key, run_id, n_trial) if incumbent else []
                for (text, st), m in zip(batch, ms):
                    n_trial += 1
                    rows.append(tuning.record(text, st, m, key, run_id, n_trial))
                    result.stats["compile_s"] = result.stats.get("compile_s", 0.0) + (m.compile_s or 0.0)
                    if not m.ok:
                        result.failures[m.status] = result.failures.get(m.status, 0) + 1
                    if m.ok and _decision_key(st) == tuning.model_pick:
                        result.first_s, result.first_schedule = m.time_s, text
                    trial = Trial(n_trial, time.perf_counter() - t0, m.status, m.time_s, st.cost, tuning.best()[1],
                                  tuning.decisions[text])
                    result.trials.append(trial)
                    if progress is not None:
                        progress(trial, result)
                db.add(rows)
                tuning.refit(start_model)
                round_ += 1
            db.add(tuning.confirm(runner, spec, result.first_schedule, key, run_id, n_trial))
            db.finish_run(run_id)
        except KeyboardInterrupt:
            result.stats["interrupted"] = True
        if result.first_schedule in tuning.times:
            result.first_s = statistics.median(tuning.times[result.first_schedule])
        best_text, best_s = tuning.best()
        if best_text is None:
            raise hl.HalideError(f"tune: no candidate of {spec.describe()} ran correctly: " +
                                 ", ".join(f"{k} {v}" for k, v in result.failures.items()))
        result.schedule, result.time_s = best_text, best_s
        result.decisions = tuning.decisions.get(best_text)
        if best_text in tuning.states:
            result.schedule_source = tuning.source_of(tuning.states[best_text])
            result.stats["space_log10"] = tuning.space_log10(tuning.states[best_text])
        result.cost_model = tuning.problem.cost_model
        result.stats.update(total_s=time.perf_counter() - t0, run_id=run_id, threads=threads,
                            measured=len(tuning.times) + len(tuning.failed))
        return result
    finally:
        if own_runner:
            runner.close()
        if own_db:
            db.close()


def _resume(tuning: _Tuning, db: TuningDB, key: TuningKey, result: TuneResult) -> int:
    """Load what earlier (interrupted) runs of this key measured: those candidates are not
    measured again, and the model is refitted to them. Returns the trials they count for."""
    n = 0
    for rec in sorted(db.records(key), key=lambda r: r.id):
        if rec.schedule in tuning.failed:
            continue
        if rec.schedule in tuning.times:  # a re-timing of a schedule measured before
            if rec.status == "ok":
                tuning.times[rec.schedule].append(rec.time_s)
            else:
                del tuning.times[rec.schedule]
                tuning.failed.add(rec.schedule)
            continue
        n += 1
        st = tuning.state_of(rec.decisions) if rec.decisions else None
        if st is not None:
            tuning.states[rec.schedule] = st
            tuning.decisions[rec.schedule] = rec.decisions
        if rec.status == "ok":
            tuning.times[rec.schedule] = [rec.time_s]
        else:
            tuning.failed.add(rec.schedule)
            result.failures[rec.status] = result.failures.get(rec.status, 0) + 1
    if n:
        result.stats["resumed"] = n
        tuning.refit(CostModel.load())
    return n
