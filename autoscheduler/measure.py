"""Build and time candidate schedules in isolated worker processes.

    results = measure(PipelineSpec.random(7), [schedule_json, ...], timeout_s=30)

Each candidate is a JSON text from `Pipeline.schedule_to_json()`. Workers are processes of the
multiprocessing "spawn" context (never fork: the JIT and its thread pool must not be shared), kept
by a MeasurePool from batch to batch. A worker computes the spec's reference output once, then
takes candidates over a pipe: it builds the algorithm afresh, applies the schedule with
`apply_schedule_json` (which validates the record against its schema: nothing from the JSON is
executed), compiles, runs once into preallocated output buffers and compares with the reference (a
wrong result is not timed). The workers compile in parallel; the timed runs (`warmup` runs, then
the median of `repeats`) go one worker at a time, while the others wait.

Failures are per candidate and never raise out of measure(): a schedule that is refused or fails
to compile is "compile_error", one that fails when run "runtime_error", one whose output differs
"wrong"; a worker that dies (a segfault, os._exit, the OOM killer, or a MemoryError) marks its
candidate "crash" and a fresh worker carries on with the rest; a candidate that takes longer than
timeout_s to build or to time gets its worker killed and is "timeout".

As with any "spawn" multiprocessing, a script that calls measure() at import time must do so under
`if __name__ == "__main__":` (a spawned worker imports the parent's main module); without it every
worker fails to start and measure() reports that for each candidate.

Overhead: a worker starts in about 0.7-0.9 s (interpreter, imports, the reference); after that a
candidate costs its build, lowering and compile (JIT objects are cached in memory and on disk) plus
its runs (about 15-20 ms in all for a tiny pipeline whose code is cached); passing it to the worker
and back, and checking the result, take about a millisecond.
"""

from __future__ import annotations

import collections
import json
import multiprocessing
import multiprocessing.connection
import os
import statistics
import time
from dataclasses import dataclass, field

import numpy as np

KEEP_BUILT = 4  # compiled candidates a worker keeps, to time again without rebuilding (the incumbent)
STATUSES = ("ok", "compile_error", "runtime_error", "wrong", "crash", "timeout")
ERROR_CHARS = 2000  # error messages are cut to this length
FLOAT_RTOL = 1e-4  # random pipelines: floats match within rtol, and atol relative to the largest value
FLOAT_ATOL = 1e-4


@dataclass
class Measurement:
    status: str  # one of STATUSES
    time_s: float | None = None  # median of `times`; None unless status is "ok"
    times: list[float] = field(default_factory=list)
    compile_s: float | None = None  # build, apply the schedule and compile
    error: str | None = None
    schedule: str = ""  # the JSON text measured

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _error_text(e: BaseException, prefix: str = "") -> str:
    text = f"{prefix}{type(e).__name__}: {e}"
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 3] + "..."


# ------------------------------------------------------------------------------ pipeline specs
@dataclass(frozen=True)
class PipelineSpec:
    """What to measure, as plain picklable data: `PipelineSpec("random", seed, scale)` (a pipeline
    of autoscheduler.random_pipelines) or `PipelineSpec("app", name, size)` (an app of the gallery,
    apps.load(name), with app.inputs(size)) or `PipelineSpec("function", "module:function", "")`
    (a user's function, importable in a fresh process, returning the output Func, a list of them
    or a Pipeline, with estimates on the outputs and the inputs bound: see _FunctionSource) or
    `PipelineSpec.of_outputs(outputs)` (Funcs built in this process, carried to the workers as
    a pickle made here: see _OutputsSource). Kind "test" is for this module's tests only (see
    _TestPipeline)."""

    kind: str
    name: int | str | bytes
    size: str

    def __post_init__(self):
        if self.kind not in ("random", "app", "function", "outputs", "test"):
            raise ValueError(f"PipelineSpec kind must be 'random', 'app', 'function' or 'outputs', got {self.kind!r}")

    @classmethod
    def random(cls, seed: int, scale: str = "train") -> PipelineSpec:
        return cls("random", int(seed), scale)

    @classmethod
    def app(cls, name: str, size: str = "default") -> PipelineSpec:
        return cls("app", name, size)

    @classmethod
    def function(cls, path: str) -> PipelineSpec:
        if not isinstance(path, str) or path.count(":") != 1:
            raise ValueError(f"a pipeline function is named 'module:function', got {path!r}")
        return cls("function", path, "")

    @classmethod
    def of_outputs(cls, outputs_or_pipeline) -> PipelineSpec:
        """The algorithm of Funcs (or a Pipeline) built in this process, with their schedules,
        estimates and bound inputs, pickled here for the spawned workers. The pickle is made by
        this process for its own workers and never stored: the database keeps schedules only."""
        import pickle

        import pyhalide as hl

        pipeline = outputs_or_pipeline if isinstance(outputs_or_pipeline, hl.Pipeline) else \
            hl.Pipeline(outputs_or_pipeline)  # (which refuses anything but Funcs)
        outputs = pipeline.outputs()
        _estimated(outputs, "tune")
        return cls("outputs", pickle.dumps(outputs), "")

    @classmethod
    def of(cls, spec) -> PipelineSpec:
        """A PipelineSpec, or a tuple ("random", seed, scale) / ("app", name, size)."""
        if isinstance(spec, PipelineSpec):
            return spec
        kind, name, *rest = spec
        return cls(kind, name, rest[0] if rest else ("train" if kind == "random" else "default"))

    def _source(self):
        return _source(self)

    def build(self, hl=None):
        """A fresh copy of the algorithm: (output Funcs, output sizes, output mins or None each)."""
        if hl is None:
            import pyhalide as hl
        return self._source().build(hl)

    def reference(self) -> list[np.ndarray]:
        """The expected outputs, one array per output and Tuple element (cached in this process)."""
        cached = _REFERENCES.get(self)
        if cached is None:
            cached = _REFERENCES[self] = self._source().reference()
        return cached

    def check(self, results: list[np.ndarray], expected: list[np.ndarray]) -> bool:
        return self._source().check(results, expected)

    def reference_schedule_json(self) -> str:
        """The JSON of the reference schedule (every Func compute_root) of a fresh build."""
        import pyhalide as hl

        from .random_pipelines import reference_schedule

        outputs, _, _ = self.build(hl)
        return reference_schedule(outputs).schedule_to_json()

    def describe(self) -> str:
        return self._source().describe()

    def __repr__(self) -> str:
        name = f"<{len(self.name)} bytes>" if isinstance(self.name, bytes) else repr(self.name)
        return f"PipelineSpec({self.kind!r}, {name}, {self.size!r})"


_REFERENCES: dict[PipelineSpec, list[np.ndarray]] = {}
_SOURCES: dict[PipelineSpec, object] = {}


def _source(spec: PipelineSpec):
    src = _SOURCES.get(spec)
    if src is None:
        kinds = {"random": _RandomSource, "app": _AppSource, "function": _FunctionSource, "outputs": _OutputsSource,
                 "test": _TestPipeline}
        src = _SOURCES[spec] = kinds[spec.kind](spec)
    return src


class _RandomSource:
    def __init__(self, spec: PipelineSpec):
        from .random_pipelines import random_pipeline

        self.rp = random_pipeline(spec.name, spec.size)

    def build(self, hl):
        outputs, sizes = self.rp.build(hl)
        return outputs, sizes, [None] * len(outputs)

    def reference(self):
        return self.rp.reference()

    def check(self, results, expected) -> bool:
        return _same(results, expected)

    def describe(self) -> str:
        return self.rp.describe()


def _same(results, expected) -> bool:
    """Exact for integers; floats within FLOAT_RTOL, and FLOAT_ATOL times the largest magnitude."""
    if len(results) != len(expected):
        return False
    for got, want in zip(results, expected):
        got, want = np.asarray(got), np.asarray(want)
        if got.shape != want.shape or got.dtype != want.dtype:
            return False
        if want.dtype.kind == "f":
            scale = float(np.max(np.abs(want))) if want.size else 0.0
            if not np.allclose(got, want, rtol=FLOAT_RTOL, atol=FLOAT_ATOL * max(1.0, scale), equal_nan=True):
                return False
        elif not np.array_equal(got, want):
            return False
    return True


class _AppSource:
    def __init__(self, spec: PipelineSpec):
        import apps

        self.app = apps.load(spec.name)
        self.size = spec.size
        self.inputs = self.app.inputs(spec.size)

    def build(self, hl):
        built = self.app.build(hl, self.inputs)
        mins = list(built.output_mins) if built.output_mins else None
        return [built.output], [list(built.output_sizes)], [mins]

    def reference(self):
        return [np.asarray(self.app.reference(self.inputs))]

    def check(self, results, expected) -> bool:
        return len(results) == 1 == len(expected) and bool(self.app.check(results[0], expected[0]))

    def describe(self) -> str:
        return f"app {self.app.name} ({self.size}): {self.app.description}"


class _FunctionSource:
    """A user's pipeline: `module:function` returns the output Func(s) or a Pipeline, with
    set_estimates on every output and every input bound (a Buffer, or an ImageParam set()); or,
    with size naming an .npz of example inputs, an @autotuned function built over them.
    The reference is the same algorithm with every Func computed at root, run in the worker."""

    def __init__(self, spec: PipelineSpec):
        import importlib

        module, _, name = spec.name.partition(":")
        self.path = spec.name
        self.fn = importlib.import_module(module)
        for part in name.split("."):
            self.fn = getattr(self.fn, part)
        self.examples = spec.size  # an .npz of example inputs: the function is an @autotuned one

    def build(self, hl):
        if self.examples:
            from .jit import build_with_arrays, load_examples

            arrays = load_examples(self.examples)
            fn = self.fn
            made = build_with_arrays(fn.build_fn, arrays, fn.output_shape)[0]
        else:
            made = self.fn()
        outputs = made.outputs() if isinstance(made, hl.Pipeline) else \
            list(made) if isinstance(made, list | tuple) else [made]
        return (outputs, *_estimated(outputs, self.path))

    def reference(self):
        return _roots_reference(self)

    def check(self, results, expected) -> bool:
        return _same(results, expected)

    def describe(self) -> str:
        return f"function {self.path}"


def _estimated(outputs, who: str) -> tuple[list, list]:
    """The outputs' estimated (sizes, mins); every output must have them."""
    sizes, mins = [], []
    for f in outputs:
        est = f.estimates()
        if any(e is None for e in est):
            raise ValueError(f"{who}: the output {f.name()} needs set_estimates to be tuned")
        mins.append([int(m) for m, _ in est])
        sizes.append([int(e) for _, e in est])
    return sizes, mins


def _roots_reference(source) -> list[np.ndarray]:
    """The outputs of a fresh build with every Func computed at root, at the estimated region."""
    import pyhalide as hl

    from .random_pipelines import output_buffers, reference_schedule

    outputs, sizes, mins = source.build(hl)
    buffers = output_buffers(hl, outputs, sizes, mins)
    reference_schedule(outputs).realize(buffers)
    return [np.array(np.asarray(b)) for b in buffers]


class _OutputsSource:
    """Funcs built in the tuning process (PipelineSpec.of_outputs): every build unpickles a fresh
    copy, inputs (Buffers, bound ImageParams) and hand schedules included. The reference is the
    same algorithm with every Func computed at root."""

    def __init__(self, spec: PipelineSpec):
        self.data = spec.name

    def build(self, hl):
        import pickle

        outputs = pickle.loads(self.data)  # made by this run's own process: see of_outputs
        return (outputs, *_estimated(outputs, "tune"))

    def reference(self):
        return _roots_reference(self)

    def check(self, results, expected) -> bool:
        return _same(results, expected)

    def describe(self) -> str:
        return "the pipeline of " + ", ".join(f.name() for f in self.build(None)[0])


class _TestPipeline:
    """FOR THE TESTS OF THIS MODULE ONLY. A tiny pipeline (name "tiny"; "wrong": the same pipeline
    with a reference that is deliberately off by one) with five pure stages `crash_hook`,
    `hang_hook`, `oom_hook`, `slow_hook` and `slow_run_hook` that add zero to the output. A
    candidate schedule that gives one of them a directive makes the worker, after applying it,
    call os._exit(3), sleep for an hour, raise MemoryError (the failures measure() must survive),
    sleep for a second (a slow compile), or sleep 0.3 s in every run of the candidate (a slow
    schedule). Other kinds never run this hook."""

    HOOKS = ("crash_hook", "hang_hook", "oom_hook", "slow_hook", "slow_run_hook")

    def __init__(self, spec: PipelineSpec):
        if spec.name not in ("tiny", "wrong"):
            raise ValueError(f"unknown test pipeline {spec.name!r}")
        self.name = spec.name
        rng = np.random.default_rng(0)
        self.data = rng.integers(0, 256, (24, 32), dtype=np.uint8)

    def build(self, hl):
        x, y = hl.Var("x"), hl.Var("y")
        inp = hl.BoundaryConditions.repeat_edge(hl.Buffer(self.data, "tiny_in"))
        g = hl.Func("g")
        g[x, y] = hl.cast(hl.UInt(16), inp[x, y]) * 2 + 1
        hooks = []
        for name in self.HOOKS:
            h = hl.Func(name)
            h[x, y] = hl.cast(hl.UInt(16), 0)
            hooks.append(h)
        out = hl.Func("out")
        out[x, y] = g[x, y] + g[x + 1, y] + sum(h[x, y] for h in hooks)
        return [out], [[32, 24]], [None]

    def reference(self):
        d = self.data.astype(np.uint16) * 2 + 1
        right = np.concatenate([d[:, 1:], d[:, -1:]], axis=1)
        out = (d + right).astype(np.uint16)
        return [out + 1 if self.name == "wrong" else out]

    def check(self, results, expected) -> bool:
        return _same(results, expected)

    def describe(self) -> str:
        return f"test pipeline {self.name}"

    def after_schedule(self, text: str) -> float:
        """What the hooks do; returns the seconds each run is to sleep."""
        record = json.loads(text)
        if record.get("crash_hook"):
            os._exit(3)
        if record.get("hang_hook"):
            time.sleep(3600)
        if record.get("oom_hook"):
            raise MemoryError("test hook")
        if record.get("slow_hook"):
            time.sleep(1.0)
        return 0.3 if record.get("slow_run_hook") else 0.0


# ------------------------------------------------------------------------------- the worker
@dataclass
class _Built:
    """A candidate compiled, run once and checked in a worker: ready for its timed runs."""

    run: object
    buffers: list
    compile_s: float
    text: str
    first_s: float  # its first run, the one checked


def _build_one(hl, spec: PipelineSpec, expected, text: str, compiled=lambda: None) -> _Built | Measurement:
    """Build the algorithm afresh, apply the schedule, compile, (call compiled()), run once and
    check the result: the candidate ready to time, or the Measurement of its failure."""
    from .random_pipelines import output_buffers

    t0 = time.perf_counter()
    try:
        outputs, sizes, mins = spec.build(hl)
        pipeline = hl.Pipeline(outputs)
        pipeline.apply_schedule_json(text)
        delay_s = _source(spec).after_schedule(text) if spec.kind == "test" else 0.0
        pipeline.compile_jit()
        images = _bound_image_params(pipeline)  # a user's pipeline may read ImageParams set() to inputs
        run = pipeline.compile_to_callable(images)
        if delay_s:
            run = _slowed(run, delay_s)
        buffers = [p.get() for p in images] + output_buffers(hl, outputs, sizes, mins)
    except MemoryError as e:
        return Measurement("crash", error=_error_text(e), schedule=text)
    except Exception as e:  # noqa: BLE001 - every failure to build, schedule or compile is the candidate's
        return Measurement("compile_error", error=_error_text(e), schedule=text)
    compile_s = time.perf_counter() - t0
    compiled()
    try:
        t1 = time.perf_counter()
        run(*buffers)
        first_s = time.perf_counter() - t1
        results = [np.array(np.asarray(b)) for b in buffers[len(images):]]
    except MemoryError as e:
        return Measurement("crash", compile_s=compile_s, error=_error_text(e), schedule=text)
    except Exception as e:  # noqa: BLE001
        return Measurement("runtime_error", compile_s=compile_s, error=_error_text(e), schedule=text)
    try:
        same = spec.check(results, expected)
        why = None if same else _difference(results, expected)
    except Exception as e:  # noqa: BLE001 - a result the check can't even compare is wrong
        same, why = False, _error_text(e, "check: ")
    if not same:
        return Measurement("wrong", compile_s=compile_s, error=why, schedule=text)
    return _Built(run, buffers, compile_s, text, first_s)


def _slowed(run, delay_s: float):
    def slow(*buffers):
        time.sleep(delay_s)
        return run(*buffers)

    return slow


MIN_TIMED_S = 0.02  # timed runs go on past `repeats` until they add up to this much
MAX_REPEATS = 2000


def _time_one(built: _Built, repeats: int, warmup: int, cutoff_s: float | None = None) -> Measurement:
    """`warmup` runs, then the median of at least `repeats` timed runs, and of as many more as
    fill MIN_TIMED_S (as TVM's min_repeat_ms: five runs of a 0.1 ms pipeline are a median of
    thread-pool wake-ups, and mislabel the cost model's training data by up to 5x); only one
    timed run for a candidate slower than cutoff_s (one sample ranks a candidate far behind the
    best well enough), and none for one whose first run was already twice as slow (its first
    run is its sample)."""
    if cutoff_s is not None and built.first_s > 2 * cutoff_s:
        return Measurement("ok", built.first_s, [built.first_s], built.compile_s, None, built.text)
    times: list[float] = []
    try:
        for _ in range(warmup):
            built.run(*built.buffers)
        while len(times) < max(1, repeats) or (sum(times) < MIN_TIMED_S and len(times) < MAX_REPEATS):
            t = time.perf_counter()
            built.run(*built.buffers)
            times.append(time.perf_counter() - t)
            if cutoff_s is not None and times[-1] > cutoff_s:
                break
    except MemoryError as e:
        return Measurement("crash", compile_s=built.compile_s, error=_error_text(e), schedule=built.text)
    except Exception as e:  # noqa: BLE001
        return Measurement("runtime_error", compile_s=built.compile_s, error=_error_text(e), schedule=built.text)
    return Measurement("ok", statistics.median(times), times, built.compile_s, None, built.text)


def _bound_image_params(pipeline) -> list:
    from pyhalide.param import ImageParam

    from .api import walk_inputs

    return [img for _, img in sorted(walk_inputs(pipeline.funcs())[0].items()) if isinstance(img, ImageParam)]


def _difference(results, expected) -> str:
    if len(results) != len(expected):
        return f"{len(results)} outputs, expected {len(expected)}"
    for k, (got, want) in enumerate(zip(results, expected)):
        got, want = np.asarray(got), np.asarray(want)
        if got.shape != want.shape or got.dtype != want.dtype:
            return f"output {k}: {got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}"
        bad = got != want
        if bad.any():
            diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
            return f"output {k}: {int(bad.sum())} of {bad.size} values differ (largest difference {diff.max():g})"
    return "differs from the reference"


def _worker_main(conn, spec: PipelineSpec, threads: int | None) -> None:
    """A worker's loop: ("build", index, text) answers ("compiled", index) once it is compiled,
    then ("built", index) or the failure's ("result", index, Measurement); ("time", index,
    repeats, warmup, cutoff_s) times the built
    candidate and answers ("result", index, Measurement); None ends it. The last KEEP_BUILT
    candidates built are kept: building one of them again costs nothing."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it stops the workers
    if threads is not None:
        os.environ["HL_NUM_THREADS"] = str(int(threads))  # read when the first parallel loop runs
    try:
        import pyhalide as hl

        expected = spec.reference()
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which gives up on the batch
        conn.send(("failed", None, _error_text(e, "computing the reference: ")))
        return
    conn.send(("ready", None, None))
    kept: collections.OrderedDict[str, _Built] = collections.OrderedDict()
    built: _Built | None = None
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        op, index, *args = msg
        if op == "build":
            out = kept.get(args[0]) or _build_one(hl, spec, expected, args[0],
                                                  lambda i=index: conn.send(("compiled", i, None)))
            built = out if isinstance(out, _Built) else None
            if built:
                _keep(kept, args[0], built)
            conn.send(("built", index, None) if built else ("result", index, out))
        else:
            out = _time_one(built, *args)
            conn.send(("result", index, out))
        if isinstance(out, Measurement) and out.status == "crash":  # a MemoryError: start afresh
            return


def _keep(kept: collections.OrderedDict, text: str, value) -> None:
    """The worker's and (mirroring it) the parent's record of the candidates a worker keeps."""
    kept[text] = value
    kept.move_to_end(text)
    while len(kept) > KEEP_BUILT:
        kept.popitem(last=False)


class _Worker:
    """The parent's end of one worker: its state is "starting", "idle", "building", "built"
    (compiled, waiting for its turn to be timed) or "timing"."""

    def __init__(self, ctx, spec: PipelineSpec, threads, startup_timeout_s: float):
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=_worker_main, args=(child, spec, threads), daemon=True,
                                name="autoscheduler-measure")
        self.proc.start()
        child.close()
        self.state = "starting"
        self.index: int | None = None
        self.done = 0  # candidates measured
        self.kept: collections.OrderedDict[str, None] = collections.OrderedDict()  # as the worker keeps them
        self.set_deadline(startup_timeout_s)

    def set_deadline(self, limit_s: float) -> None:
        self.limit, self.deadline = limit_s, time.monotonic() + limit_s

    def send(self, state: str, msg: tuple, timeout_s: float) -> bool:
        self.index, self.state = msg[1], state
        self.set_deadline(timeout_s)
        try:
            self.conn.send(msg)
            return True
        except (OSError, EOFError):  # it died while waiting
            return False

    def receive(self):
        """The next message, or None if the worker died without sending one."""
        try:
            if self.conn.poll():
                return self.conn.recv()
        except (OSError, EOFError):
            pass
        return None

    def died_how(self) -> str:
        self.proc.join(1.0)
        code = self.proc.exitcode
        if code is None:
            return "the worker died"
        if code < 0:
            import signal

            try:
                return f"the worker was killed by signal {-code} ({signal.Signals(-code).name})"
            except ValueError:
                return f"the worker was killed by signal {-code}"
        return f"the worker exited with status {code}"

    def stop(self, kill: bool = False) -> None:
        if not kill and self.proc.is_alive():
            try:
                self.conn.send(None)
            except (OSError, EOFError):
                pass
            self.proc.join(2.0)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5.0)
        self.conn.close()


def default_workers() -> int:
    """One worker per core (compiling is single-threaded), at most 8 (each holds a JIT)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(1, min(8, cores))


class MeasurePool:
    """Worker processes measuring candidates of one pipeline, kept from batch to batch (a worker
    starts in about a second: the interpreter, the imports, the reference output).

    Candidates build and compile in parallel, one per worker, in waves; then the wave's compiled
    candidates are timed one at a time while every other worker waits, so that compiling never
    shares the machine with a measurement. A worker is replaced after `recycle_after` candidates
    (every compiled candidate stays loaded in its JIT). timeout_s bounds each candidate's build
    and compile, and, without a run_timeout_s, its check run and again its timed runs; startup_timeout_s
    (default max(60, 2 * timeout_s)) bounds a worker's start. threads: HL_NUM_THREADS in the
    workers. Use it as a context manager, or close() it."""

    def __init__(self, spec, workers: int | None = None, threads: int | None = None, timeout_s: float = 30.0,
                 startup_timeout_s: float | None = None, recycle_after: int = 64):
        self.spec = PipelineSpec.of(spec)
        self.workers = max(1, int(workers or default_workers()))
        self.threads, self.timeout_s, self.recycle_after = threads, timeout_s, max(1, int(recycle_after))
        self.startup_timeout_s = max(60.0, 2.0 * timeout_s) if startup_timeout_s is None else startup_timeout_s
        self._ctx = multiprocessing.get_context("spawn")
        self._live: list[_Worker] = []

    def __enter__(self) -> MeasurePool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for w in self._live:
            w.stop()
        self._live = []

    def measure(self, schedules: list[str], repeats: int = 5, warmup: int = 1,
                cutoff_s: float | None = None, run_timeout_s: float | None = None) -> list[Measurement]:
        """One Measurement per schedule (a JSON text from Pipeline.schedule_to_json), in order;
        a candidate whose timed run takes longer than cutoff_s is timed once; one whose run
        takes longer than run_timeout_s is killed ("timeout"). A worker that can't start twice
        in a row fails the candidates not yet measured."""
        try:
            return self._measure(list(schedules), repeats, warmup, cutoff_s, run_timeout_s or self.timeout_s)
        except BaseException:  # Ctrl-C mid-batch: the workers' answers would be out of step
            for w in self._live:
                w.stop(kill=True)
            self._live = []
            raise

    def _measure(self, schedules: list[str], repeats: int, warmup: int, cutoff_s: float | None,
                 run_timeout_s: float) -> list[Measurement]:
        results: list[Measurement | None] = [None] * len(schedules)
        queue = collections.deque(range(len(schedules)))
        live = self._live
        start_failures = 0

        def drop(w: _Worker, failure: tuple[str, str] | None, kill: bool = True) -> None:
            nonlocal start_failures
            if failure and w.state in ("building", "built", "timing"):
                results[w.index] = Measurement(failure[0], error=failure[1], schedule=schedules[w.index])
            elif failure and w.state == "starting":
                start_failures += 1
                if start_failures >= 2:  # the spec itself can't be set up: give up on what is left
                    while queue:
                        i = queue.popleft()
                        results[i] = Measurement(failure[0], error="worker start: " + failure[1], schedule=schedules[i])
            w.stop(kill=kill)
            live.remove(w)

        while True:
            active = [w for w in live if w.state in ("building", "built", "timing")]
            if not queue and not active:
                break
            timing = any(w.state == "timing" for w in live)  # (a worker's start would disturb it)
            while not timing and len(live) < min(self.workers, len(queue) + len(active)):
                live.append(_Worker(self._ctx, self.spec, self.threads, self.startup_timeout_s))
            states = {w.state for w in live}
            if "timing" not in states and "built" in states and not states & {"starting", "building"}:
                w = next(w for w in live if w.state == "built")
                if not w.send("timing", ("time", w.index, repeats, warmup, cutoff_s),
                              run_timeout_s * (warmup + max(1, repeats))):
                    drop(w, ("crash", w.died_how()))
                    continue
            elif not states & {"timing", "built"}:
                for w in [w for w in live if w.state == "idle"]:
                    if queue:  # a candidate the worker keeps built, else the next
                        i = next((i for i in queue if schedules[i] in w.kept), queue[0])
                        queue.remove(i)
                        if not w.send("building", ("build", i, schedules[i]), self.timeout_s):
                            drop(w, ("crash", w.died_how()))
            waiting = [w for w in live if w.state in ("starting", "building", "timing")]
            if not waiting:
                continue
            wait_s = max(0.0, min(w.deadline for w in waiting) - time.monotonic())
            ready = set(multiprocessing.connection.wait([w.conn for w in waiting] + [w.proc.sentinel for w in waiting],
                                                       wait_s))
            now = time.monotonic()
            for w in waiting:
                if w.conn in ready or w.proc.sentinel in ready:
                    msg = w.receive()
                    if msg is None:
                        drop(w, ("crash", w.died_how()))
                        continue
                    kind, i, payload = msg
                    if kind == "ready":
                        w.state, start_failures = "idle", 0
                    elif kind == "failed":
                        drop(w, ("runtime_error", payload))
                    elif kind == "compiled":
                        w.set_deadline(run_timeout_s)
                    elif kind == "built":
                        w.state = "built"
                        _keep(w.kept, schedules[i], None)
                    else:
                        results[i], w.state, w.index = payload, "idle", None
                        w.done += 1
                        if payload.status == "crash":
                            drop(w, ("crash", payload.error))
                        elif w.done >= self.recycle_after:
                            drop(w, None, kill=False)
                elif now >= w.deadline:
                    what = {"starting": "the worker's start", "building": "building the candidate or its first run",
                            "timing": "timing the candidate"}[w.state]
                    drop(w, ("timeout", f"{what} took longer than its time-out ({w.limit:g} s); killed the worker"))
        return results  # type: ignore[return-value]


def measure(spec, schedules: list[str], timeout_s: float = 30.0, repeats: int = 5, warmup: int = 1,
            workers: int | None = None, threads: int | None = None, startup_timeout_s: float | None = None,
            cutoff_s: float | None = None, run_timeout_s: float | None = None) -> list[Measurement]:
    """Measure each schedule (a JSON text from Pipeline.schedule_to_json) of the pipeline `spec`
    (a PipelineSpec or a tuple for PipelineSpec.of) in a MeasurePool of `workers` processes
    (default: one per core) started for this call; returns one Measurement per schedule, in order."""
    with MeasurePool(spec, workers, threads, timeout_s, startup_timeout_s) as pool:
        return pool.measure(schedules, repeats, warmup, cutoff_s, run_timeout_s)


# ---------------------------------------------------------------------------------- debugging
def main(argv=None) -> None:
    """python -m autoscheduler.measure --random SEED [--scale test] | --app NAME [--size small]:
    measure the reference schedule (every Func compute_root; for an app, also its hand schedule)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--random", type=int, metavar="SEED")
    group.add_argument("--app")
    parser.add_argument("--scale", default="train")
    parser.add_argument("--size", default="small")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args(argv)
    spec = PipelineSpec.random(args.random, args.scale) if args.app is None else PipelineSpec.app(args.app, args.size)
    print(spec.describe())
    names, schedules = ["reference (compute_root)"], [spec.reference_schedule_json()]
    if args.app is not None:
        import pyhalide as hl

        src = _source(spec)
        built = src.app.build(hl, src.inputs)
        src.app.schedule(hl, built)
        try:
            schedules.append(hl.Pipeline([built.output]).schedule_to_json())
            names.append("hand schedule")
        except hl.HalideError as e:
            print(f"  (hand schedule not measurable as JSON: {e})")
    t0 = time.perf_counter()
    results = measure(spec, schedules, timeout_s=args.timeout, repeats=args.repeats, threads=args.threads)
    wall = time.perf_counter() - t0
    for name, m in zip(names, results):
        t = f"{m.time_s * 1e3:.3f} ms" if m.time_s is not None else "-"
        c = f"{m.compile_s:.2f} s" if m.compile_s is not None else "-"
        print(f"  {name}: {m.status}  time {t}  compile {c}" + (f"  ({m.error})" if m.error else ""))
    print(f"  batch wall time {wall:.2f} s")


if __name__ == "__main__":
    main()
