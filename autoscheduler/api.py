"""The entry points: `auto_schedule(...)` in plain Python, and the strategies registered under
Halide's autoscheduler names for `Pipeline.apply_autoscheduler`."""

from __future__ import annotations

import os
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import pyhalide as hl
from pyhalide import ir
from pyhalide.call_graph import bound_exprs, loop_exprs, reachable_funcs
from pyhalide.errors import HalideError
from pyhalide.ir_mutator import children
from pyhalide.names import func_name_family
from pyhalide.param import ImageParam, Param

from .analysis import Analysis
from .apply import apply_directives, directives, python_source
from .clones import stencil_clones
from .cost_model import CostModel
from .loop_nest import INLINE, Decision, Hardware, Model
from .search import BeamSearch, ComputeRootHeuristic, Greedy, Problem, RandomSearch, SearchResult
from .space import Space

STRATEGIES = {
    # Halide's names, mapped to pyhalide's strategies
    "Adams2019": "beam", "Anderson2021": "beam", "Mullapudi2016": "greedy", "Li2018": "compute_root",
    "beam": "beam", "greedy": "greedy", "random": "random", "compute_root": "compute_root",
}


@dataclass
class Result:
    """What auto_schedule found (and applied)."""

    schedule: list  # the directives applied: (func, stage, method, args)
    schedule_source: str  # the same as Python: paste it after the algorithm, call apply_schedule(pipeline)
    predicted_s: float
    breakdown: dict  # Func -> {feature: predicted seconds}
    decisions: dict  # Func -> a one-line description of its decision
    stats: dict = field(default_factory=dict)
    seed: int = 0
    target: str = ""

    def __str__(self):
        lines = [f"predicted {self.predicted_s * 1e3:.3f} ms ({self.stats.get('strategy')}, "
                 f"searched {self.stats.get('search_s', 0):.2f} s)"]
        lines += [f"  {name}: {desc}" for name, desc in self.decisions.items()]
        return "\n".join(lines)


# ------------------------------------------------------------------ the machine


def _host_vector_bits() -> int:
    try:
        import llvmlite.binding as llvm

        features = llvm.get_host_cpu_features()
        if features.get("avx512f", False):
            return 512
        if features.get("avx2", False) or features.get("avx", False):
            return 256
    except Exception:  # llvmlite can't tell: assume SSE
        pass
    return 128


def _cache_sizes() -> tuple[int, int, int]:
    sizes = {1: 32 << 10, 2: 512 << 10, 3: 8 << 20}
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        for idx in base.glob("index*"):
            level = int((idx / "level").read_text())
            kind = (idx / "type").read_text().strip()
            if kind == "Instruction":
                continue
            text = (idx / "size").read_text().strip()
            n = int(text.rstrip("KMG"))
            n <<= {"K": 10, "M": 20, "G": 30}.get(text[-1], 0)
            if level in sizes:
                sizes[level] = n
    except (OSError, ValueError):
        pass
    return sizes[1], sizes[2], sizes[3]


def hardware(target, params: dict) -> Hardware:
    """The machine the schedule is for: cores from `parallelism` (else this machine's), vector width
    from the target's features (else the host's), caches from /sys (overridable)."""
    cores = int(params.get("parallelism", os.cpu_count() or 1))
    if target is not None and target.has_feature("avx512"):
        bits = 512
    elif target is not None and target.has_feature("avx2"):
        bits = 256
    else:
        bits = _host_vector_bits()
    l1, l2, l3 = _cache_sizes()
    return Hardware(max(1, cores), int(params.get("vector_bits", bits)), int(params.get("l1_bytes", l1)),
                    int(params.get("l2_bytes", l2)), int(params.get("l3_bytes", l3)))


# ------------------------------------------------------------------ estimates


def walk_inputs(funcs) -> tuple[dict, dict]:
    """The inputs (Buffers and ImageParams) and Params the algorithm reads, by name."""
    images, params = {}, {}
    seen: set[int] = set()
    stack = []
    for f in funcs:
        for _, d in f.all_scheduled_definitions():
            stack += [e for e in (*loop_exprs(d), *bound_exprs(d)) if e is not None]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, ir.Call) and n.call_type == ir.IMAGE:
            images[n.name] = n.image
        if isinstance(n, ir.Variable) and n.ref is not None:
            if isinstance(n.ref, Param):
                params[n.ref.name()] = n.ref
            elif isinstance(n.ref, ImageParam):
                images[n.ref.name()] = n.ref
        stack.extend(children(n))
    return images, params


def _shape_of(array) -> list[tuple[int, int]]:
    """(min, extent) per Halide dimension of a numpy array given as an example (x first)."""
    return [(0, int(n)) for n in reversed(np.shape(array))]


def gather_estimates(outputs, estimates: dict | None, example_inputs: dict | None):
    """(output regions, input shapes, env of Param values and input fields); a missing estimate
    that can't be inferred is a HalideError naming the Func or input and the dimension."""
    estimates = dict(estimates or {})
    example_inputs = dict(example_inputs or {})
    regions = {}
    for f in outputs:
        given = estimates.get(f.name(), estimates.get(f, estimates.get(func_name_family(f.name()))))
        est = f.estimates()
        if given is not None:
            est = [tuple(e) if e is not None else None for e in given]
        missing = [i for i, e in enumerate(est) if e is None]
        if missing:
            i = missing[0]
            raise HalideError(f"autoscheduler: no estimate for dimension {i} ({f.args()[i].name()}) of the output "
                              f"Func {f.name()}: call {f.name()}.set_estimates([...]) (or set_estimate) or pass "
                              f"estimates={{'{f.name()}': [(min, extent), ...]}}")
        regions[f.name()] = [(int(m), int(e)) for m, e in est]
    funcs = list(reachable_funcs(outputs).values())
    images, params = walk_inputs(funcs)
    shapes, env = {}, {}
    for name, img in images.items():
        if name in example_inputs:
            shape = _shape_of(example_inputs[name])
        elif isinstance(img, ImageParam):
            est = img.estimates()
            bound = img._buffer  # the Buffer bound with set(), if any
            if all(e is not None for e in est):
                shape = [(int(m), int(e)) for m, e in est]
            elif bound is not None:
                shape = [(bound.dim(i).min(), bound.dim(i).extent()) for i in range(bound.dimensions())]
            else:
                i = next(k for k, e in enumerate(est) if e is None)
                raise HalideError(f"autoscheduler: no estimate for dimension {i} of the ImageParam {name}: call "
                                  f"{name}.set_estimates([...]), bind a Buffer with set(), or pass "
                                  f"example_inputs={{'{name}': array}}")
        else:  # a Buffer baked into the algorithm
            shape = [(img.dim(i).min(), img.dim(i).extent()) for i in range(img.dimensions())]
        shapes[name] = shape
        stride = 1
        for i, (m, e) in enumerate(shape):
            env[f"{name}.min.{i}"], env[f"{name}.extent.{i}"], env[f"{name}.stride.{i}"] = m, e, stride
            stride *= e
    for name, p in params.items():
        value = p.estimate()
        if value is None and p.is_set():
            value = p.get()
        if value is not None:
            env[name] = value
    return regions, shapes, env


# ------------------------------------------------------------------ the call


def _strategy(name: str, params: dict, seed: int):
    kind = STRATEGIES.get(name)
    if kind is None:
        raise HalideError(f"autoscheduler: unknown strategy {name!r}; known: {', '.join(STRATEGIES)}")
    if kind == "beam":
        dropout = float(params.get("random_dropout", 100)) / 100.0
        return BeamSearch(int(params.get("beam_size", 32)), int(params.get("passes", 2)), dropout,
                          int(params.get("random_dropout_seed", seed)), int(params.get("max_states", 16_000)))
    if kind == "greedy":
        return Greedy(seed)
    if kind == "random":
        return RandomSearch(int(params.get("samples", 32)), seed)
    return ComputeRootHeuristic()


# The schedule log each Func had right after the autoscheduler applied its choice: a Func whose
# log still reads the same was scheduled by an earlier search, not by hand, and is searched again.
_APPLIED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _scheduled_by_hand(f) -> bool:
    log = list(f._schedule.log)
    return bool(log) and _APPLIED.get(f) != log


def _fixed_decisions(analysis: Analysis) -> dict:
    """Hand-scheduled Funcs keep their schedule; the model sees them as inlined or at root. A Func
    computed inside a consumer's loop by hand pins that consumer's schedule too (the loop must keep
    its name)."""
    fixed = {}
    hosts = {}
    for name in analysis.order:
        info = analysis.funcs[name]
        if not _scheduled_by_hand(info.func):
            continue
        level = info.func._schedule.compute_level
        fixed[name] = INLINE if level.is_inlined() and not info.is_output else Decision("root")
        if level.kind == "at" and analysis.name_of(level.func_name) in analysis.funcs:
            hosts[name] = analysis.name_of(level.func_name)
            fixed[hosts[name]] = Decision("root")
    for name, host in hosts.items():
        for between in _funcs_between(analysis, name, host):
            if between in fixed:
                continue
            if len(analysis.funcs[between].stages) > 1:
                raise HalideError(
                    f"Func {name} is computed by hand inside a loop of {host}, through {between}, which "
                    f"has update definitions and no schedule: give {between} a compute_at inside that "
                    f"loop too (the autoscheduler keeps hand schedules as they are)")
            # the hand schedule's meaning: unscheduled, so inlined (as Halide reads it); anywhere
            # else, `name` would be computed where nothing uses it
            fixed[between] = INLINE
    return fixed


def _funcs_between(analysis: Analysis, producer: str, host: str) -> set[str]:
    """The Funcs on a path of calls from producer up to host (both left out)."""

    def reach(start, step):
        seen, todo = set(), [start]
        while todo:
            for nxt in step(todo.pop()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    consumers = {n: set(info.consumers) & set(analysis.funcs) for n, info in analysis.funcs.items()}
    producers = {n: set() for n in analysis.funcs}
    for n, users in consumers.items():
        for user in users:
            producers[user].add(n)
    return (reach(producer, consumers.__getitem__) & reach(host, producers.__getitem__)) - {producer, host}


def make_problem(outputs, target=None, estimates=None, example_inputs=None, params=None,
                 cost_model: CostModel | None = None) -> Problem:
    """The search problem for these outputs: analysis, loop-nest model, space and cost model."""
    params = params or {}
    regions, shapes, env = gather_estimates(outputs, estimates, example_inputs)
    analysis = Analysis(outputs, env, shapes)
    regions = {analysis.name_of(n): r for n, r in regions.items()}
    hw = hardware(target, params)
    model = Model(analysis, regions, hw)
    space = Space(model, hw, _fixed_decisions(analysis))
    return Problem(space, cost_model or CostModel.load(), analysis.order)


MIN_CLONE_GAIN = 0.01  # clones make a schedule longer: kept only where predicted this much faster


def search(outputs, strategy, target=None, estimates=None, example_inputs=None, params=None,
           cost_model: CostModel | None = None) -> tuple[Problem, SearchResult]:
    """The strategy's search over the algorithm as written, then, where it inlined producers that
    a consumer reads as a stencil, again with those producers cloned into such consumers
    (clones.py): the problem and result predicted cheaper. The clones stay made only if that is
    the second."""
    problem = make_problem(outputs, target, estimates, example_inputs, params, cost_model)
    result = strategy.run(problem)
    pairs = stencil_clones(problem, result)
    if not pairs:
        return problem, result
    funcs = problem.model.a.funcs
    saved = {p: (funcs[p].func.copy_schedule(), _APPLIED.get(funcs[p].func)) for p, _ in pairs}
    for p, c in pairs:
        f = funcs[p].func
        f.clone_in(funcs[c].func)
        _APPLIED[f] = list(f._schedule.log)  # the search's, not a hand schedule
    cloned = make_problem(outputs, target, estimates, example_inputs, params, problem.cost_model)
    again = strategy.run(cloned)
    searched = result.stats.get("search_s", 0.0) + again.stats.get("search_s", 0.0)
    if again.cost < (1.0 - MIN_CLONE_GAIN) * result.cost:
        again.stats["search_s"] = searched
        return cloned, again
    for p, (schedule, applied) in saved.items():
        f = funcs[p].func
        f.set_schedule(schedule)
        if applied is None:
            _APPLIED.pop(f, None)
        else:
            _APPLIED[f] = applied
    result.stats["search_s"] = searched
    return problem, result


def auto_schedule(outputs_or_pipeline, target=None, estimates=None, example_inputs=None, params=None,
                  seed: int = 0, strategy: str = "Adams2019", cost_model: CostModel | None = None) -> Result:
    """Schedule every Func the outputs need that has no hand schedule, and apply it.

    estimates: {output Func or name: [(min, extent), ...]} where set_estimates was not called;
    example_inputs: {ImageParam name: ndarray} for inputs without estimates or a bound Buffer;
    params: Halide's autoscheduler parameters (parallelism, beam_size, random_dropout,
    random_dropout_seed) and pyhalide's (passes, max_states: the states the beam search may
    evaluate, 0 for no bound; vector_bits, l1_bytes, l2_bytes, l3_bytes; records: the tuning
    database's path, use_records=0 to search even where it holds a measured schedule for exactly
    this algorithm, shapes and machine, which is otherwise applied without searching; autotune=1
    with spec="module:function", budget_s and trials: measured autotuning, see _autotune)."""
    t0 = time.perf_counter()
    pipeline = outputs_or_pipeline if isinstance(outputs_or_pipeline, hl.Pipeline) else hl.Pipeline(outputs_or_pipeline)
    params = {str(k): v for k, v in (params or {}).items()}
    target = hl.Target(target) if isinstance(target, str) else target
    if _flag(params.get("use_records", 1)):
        tuned = _apply_tuned_record(pipeline, estimates, example_inputs, params, seed, t0)
        if tuned is not None:
            return tuned
    if _flag(params.get("autotune", 0)):
        return _autotune(pipeline, params, seed, t0)
    problem, result = search(pipeline.outputs(), _strategy(strategy, params, seed), target, estimates,
                             example_inputs, params, cost_model)
    analysis, fixed, cm = problem.model.a, problem.space.fixed, problem.cost_model
    dirs = directives(analysis, result.models, set(fixed), problem.model.output_regions)
    funcs = {name: info.func for name, info in analysis.funcs.items()}
    for name, f in funcs.items():
        if name not in fixed:
            f.reset_schedule()
    apply_directives(funcs, dirs)
    for name, f in funcs.items():
        if name not in fixed:
            _APPLIED[f] = list(f._schedule.log)
    stats = dict(result.stats)
    stats["total_s"] = time.perf_counter() - t0
    stats["cost_model"] = cm.source
    return Result(
        dirs, python_source(dirs), result.cost,
        {n: cm.explain(m.features) for n, m in result.models.items()},
        {n: m.decision.describe() + (" (hand)" if n in fixed else "") for n, m in result.models.items()},
        stats, seed, str(target) if target is not None else "host",
    )


def _apply_record(pipeline, text: str) -> None:
    """Replace every Func's schedule by a recorded one (validated by apply_schedule_json),
    remembered as the autoscheduler's, not a hand schedule."""
    pipeline.apply_schedule_json(text)
    for f in reachable_funcs(pipeline.outputs()).values():
        _APPLIED[f] = list(f._schedule.log)


def _apply_tuned_record(pipeline, estimates, example_inputs, params, seed, t0) -> Result | None:
    """Apply the best schedule measured for exactly this algorithm, these shapes and this machine
    in the tuning database (autoscheduler.tune), if there is one and no Func has a hand schedule:
    no search. The schedule goes through the schema validation of apply_schedule_json."""
    from .records import TuningDB, default_path
    from .tune import tuning_key

    path = Path(params["records"]) if "records" in params else default_path()
    if not path.exists():
        return None
    outputs = pipeline.outputs()
    funcs = list(reachable_funcs(outputs).values())
    if any(_scheduled_by_hand(f) for f in funcs):
        return None
    threads = int(params.get("parallelism", os.cpu_count() or 1))
    with TuningDB(path) as db:
        rec = db.best(tuning_key(outputs, threads, estimates=estimates, example_inputs=example_inputs))
    if rec is None:
        return None
    _apply_record(pipeline, rec.schedule)
    source = f"def apply_schedule(pipeline):\n    pipeline.apply_schedule_json({rec.schedule!r})\n"
    stats = {"strategy": "record", "record_id": rec.id, "run_id": rec.run_id, "search_s": 0.0,
             "total_s": time.perf_counter() - t0}
    return Result([], source, rec.time_s, {}, dict(rec.decisions or {}), stats, seed, "host")


def _flag(value) -> bool:
    """A yes/no parameter: AutoschedulerParams keeps values as text ("1", "True", "false")."""
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def _autotune(pipeline, params: dict, seed: int, t0: float) -> Result:
    """Measured autotuning (autoscheduler.tune) from apply_autoscheduler's or auto_schedule's
    params: autotune=1, budget_s, trials, and optionally spec="module:function" (a function that
    builds this pipeline, importable in the worker processes that measure candidates); without
    it the pipeline itself is measured (its inputs must be bound). Then the best is applied."""
    from pyhalide.param import ImageParam, Param
    from pyhalide.structural_hash import structural_hash

    from .tune import tune

    spec = params.get("spec")
    if spec is None:
        unbound = [a.name for a in pipeline.infer_arguments()
                   if (isinstance(a._source, ImageParam) and not a._source._is_bound())
                   or (isinstance(a._source, Param) and not a._source.is_set())]
        if unbound:
            raise HalideError(f"autoscheduler: autotune runs the pipeline to time it, but {', '.join(unbound)} "
                              "has no value: bind the inputs (ImageParam.set, Param.set), or pass "
                              "spec='module:function' naming a function that builds the pipeline with them bound")
        target = pipeline
    elif isinstance(spec, str) and ":" in spec:
        target = spec
    else:
        raise HalideError(f"autoscheduler: spec must be 'module:function', got {spec!r}")
    threads = int(params.get("parallelism", os.cpu_count() or 1))
    trials = params.get("trials")
    r = tune(target, budget_s=float(params.get("budget_s", 60.0)), trials=int(trials) if trials else None,
             seed=seed, threads=threads, db=params.get("records"))
    if r.key.algorithm != structural_hash(pipeline.outputs()):
        raise HalideError(f"autoscheduler: {spec} builds another algorithm than this pipeline's")
    _apply_record(pipeline, r.schedule)
    stats = {"strategy": "record" if r.from_records else "tuned", "trials": len(r.trials),
             "search_s": r.stats.get("total_s", 0.0), "total_s": time.perf_counter() - t0}
    return Result([], r.schedule_source, r.time_s or 0.0, {}, dict(r.decisions or {}), stats, seed, "host")


def _halide_entry(name: str):
    def run(pipeline, target, autoscheduler_params):
        extra = autoscheduler_params.extra
        seed = int(extra.get("random_dropout_seed", 0))
        r = auto_schedule(pipeline, target, params=extra, seed=seed, strategy=name)
        return hl.AutoSchedulerResults(autoscheduler_params, target, r.schedule_source, details=r)

    return run


def register() -> None:
    from pyhalide.autoschedulers import register_autoscheduler

    for name in ("Adams2019", "Anderson2021", "Mullapudi2016", "Li2018"):
        register_autoscheduler(name, _halide_entry(name), replace=True)
