"""Halide's sampling profiler (target feature "profile"): where a pipeline spends its time, per Func.

The generated code keeps a small int64 state array up to date (its address is in the scalars
block): which Func is being computed (one store per production and consumption, placed by
lowering/inject_profiling.py), how many threads are working (parallel tasks count themselves in
and out; the caller counts itself out while it waits for them) and each Func's heap allocations.
A Python thread samples it every millisecond while the pipeline runs (the call releases the
GIL): each sample bills the time since the last one to the Func named then. Among the threads of
a parallel loop, one at a time holds the sampling token and names its Func; the others write
nothing, so the shared line is not passed between cores on every production. As Halide's JIT
does, a realization prints its report and starts the counts again; `last_report()` returns it
as data.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np
from llvmlite import ir as ll

from .calling_convention import scalar_ptr
from .llvm_types import I1, I8, I64, PTR, atomic_store

SAMPLE_SECONDS = 0.001  # Halide's sampling interval

# The state array: three words, then per record (the pipeline's, then each Func's) its heap counts.
CURRENT, ACTIVE_THREADS, TOKEN = range(3)
LIVE, PEAK, ALLOCATIONS, TOTAL = range(4)
_RECORD, _FIRST_RECORD = 4, 3


def _slot(record: int, counter: int) -> int:
    """Record 0 is the whole pipeline's; record 1 + id is Func id's."""
    return _FIRST_RECORD + _RECORD * record + counter


def state_size(funcs: int) -> int:
    return _slot(1 + funcs, 0)


# ---------------------------------------------------------------- the generated code's side


def _word(cg, index: int):
    b = cg.b
    base = b.inttoptr(b.load(scalar_ptr(b, cg.f.scalars, cg.layout.profiler_slot), typ=I64), PTR)
    return b.gep(base, [ll.Constant(I64, index)], source_etype=I64)


def _add(cg, index: int, value) -> ll.Value:
    """Atomically add value (an i64) to a word; returns the word's old value."""
    return cg.b.atomic_rmw("add", _word(cg, index), value, "monotonic")


def set_current(cg, func_id: int) -> None:
    """Name the Func this thread computes: always outside parallel tasks, in a task only while
    it holds the sampling token."""
    b = cg.b
    if cg.f.profiler_token is None:
        atomic_store(b, ll.Constant(I64, func_id), _word(cg, CURRENT))
        return
    with b.if_then(b.trunc(b.load(cg.f.profiler_token, typ=I8), I1)):
        atomic_store(b, ll.Constant(I64, func_id), _word(cg, CURRENT))


def task_started(cg) -> None:
    """A parallel task's first act: count its thread in; it holds no token yet."""
    _add(cg, ACTIVE_THREADS, ll.Constant(I64, 1))
    token = cg.alloca_in_entry(I8, "profiler.token")
    cg.b.store(ll.Constant(I8, 0), token)
    cg.f.profiler_token = token


def claim_token(cg) -> None:
    """At each iteration of a parallel task: take the sampling token if no thread holds it."""
    b = cg.b
    held = b.trunc(b.load(cg.f.profiler_token, typ=I8), I1)
    with b.if_then(b.not_(held)):
        word = _word(cg, TOKEN)
        with b.if_then(b.icmp_signed("==", b.load_atomic(word, "monotonic", 8, typ=I64), ll.Constant(I64, 0))):
            swap = b.cmpxchg(word, ll.Constant(I64, 0), ll.Constant(I64, 1), "monotonic", "monotonic")
            b.store(b.zext(b.extract_value(swap, 1), I8), cg.f.profiler_token)


def task_finished(cg) -> None:
    """A parallel task's last act (on every way out): count its thread out, give the token back."""
    b = cg.b
    _add(cg, ACTIVE_THREADS, ll.Constant(I64, -1))
    with b.if_then(b.trunc(b.load(cg.f.profiler_token, typ=I8), I1)):
        atomic_store(b, ll.Constant(I64, 0), _word(cg, TOKEN))


def waiting(cg, start: bool) -> None:
    """Around a parallel loop: the caller counts itself out while the tasks (its own included)
    run, and back in after."""
    _add(cg, ACTIVE_THREADS, ll.Constant(I64, -1 if start else 1))


def heap_allocated(cg, func_id: int, size, freed: bool = False) -> None:
    """Count a heap allocation (or its release) of `size` bytes for the Func and the pipeline:
    live bytes, their peak, the allocations and their total."""
    b = cg.b
    for record in (0, 1 + func_id):
        if freed:
            _add(cg, _slot(record, LIVE), b.neg(size))
            continue
        live = b.add(_add(cg, _slot(record, LIVE), size), size)
        b.atomic_rmw("max", _word(cg, _slot(record, PEAK)), live, "monotonic")
        _add(cg, _slot(record, ALLOCATIONS), ll.Constant(I64, 1))
        _add(cg, _slot(record, TOTAL), size)


# ---------------------------------------------------------------- the sampling thread and the report


@dataclass(frozen=True)
class FuncProfile:
    """One row of the report: a Func's share of the time, and its heap allocations (stack_bytes:
    its largest allocation on the stack, known when compiled)."""

    name: str
    time_ms: float
    percent: float
    threads: float
    heap_peak: int
    heap_allocations: int
    heap_average: int
    stack_bytes: int


@dataclass(frozen=True)
class ProfileReport:
    """What a profiled pipeline did: per run, the time sampled, and per Func (producers first,
    the overhead outside every production first of all) its time and allocations."""

    pipeline: str
    total_ms: float
    samples: int
    runs: int
    threads: float
    heap_allocations: int
    heap_peak: int
    funcs: tuple[FuncProfile, ...]
    serial: bool

    def func(self, name: str) -> FuncProfile:
        return next(f for f in self.funcs if f.name == name)

    def __str__(self) -> str:
        """The report as Halide's profiler prints it."""
        lines = [self.pipeline,
                 f" total time: {self.total_ms:f} ms  samples: {self.samples}  runs: {self.runs}  "
                 f"time per run: {self.total_ms / max(self.runs, 1):f} ms"]
        if not self.serial:
            lines.append(f" average threads used: {self.threads:f}")
        lines.append(f" heap allocations: {self.heap_allocations}  peak heap usage: {self.heap_peak} bytes")
        width = max([23, *(len(f.name) for f in self.funcs)])
        for f in self.funcs:
            if f.name == "overhead" and f.time_ms == 0:
                continue
            row = f"    {f.name + ':':<{width + 3}}{f.time_ms / max(self.runs, 1):>9.3f}ms  ({f.percent:4.1f}%)"
            if not self.serial:
                row += f"   threads: {f.threads:.1f}"
            if f.heap_peak:
                row += f"  peak: {f.heap_peak}  num: {f.heap_allocations}  avg: {f.heap_average}"
            if f.stack_bytes:
                row += f"  stack: {f.stack_bytes}"
            lines.append(row)
        return "\n".join(lines) + "\n"


_last = threading.local()


def last_report() -> ProfileReport | None:
    """The report of the last profiled realization on this thread (None before one)."""
    return getattr(_last, "report", None)


class Profiler:
    """The state array of one compiled pipeline, and the sampling of its runs."""

    def __init__(self, names: list[str], stack_bytes: dict[int, int]):
        self.names = names
        self.stack_bytes = stack_bytes
        self.state = np.zeros(state_size(len(names)), dtype=np.int64)
        self.address = self.state.ctypes.data
        self._lock = threading.Lock()

    def run(self, call, pipeline: str):
        """call() with the sampler running; returns its result, and keeps the report. Runs of one
        compiled pipeline from several threads take turns: they share the state array."""
        with self._lock:
            return self._run(call, pipeline)

    def _run(self, call, pipeline: str):
        state, count = self.state, len(self.names)
        state[:] = 0
        state[ACTIVE_THREADS] = 1
        billed = np.zeros(count, dtype=np.int64)  # ns per Func
        samples = np.zeros(count, dtype=np.int64)
        threads = np.zeros(count, dtype=np.int64)  # the active threads, summed over each Func's samples
        last = [0]  # when the last sample was taken (the call's start at first)

        def sample(now: int) -> None:
            k = int(state[CURRENT])
            k = k if 0 <= k < count else 0
            billed[k] += max(now - last[0], 0)
            samples[k] += 1
            # (0 only between a caller counting itself out and its first task counting itself in)
            threads[k] += max(int(state[ACTIVE_THREADS]), 1)
            last[0] = max(now, last[0])

        stop = threading.Event()

        def sampling():
            while not stop.wait(SAMPLE_SECONDS):
                sample(time.perf_counter_ns())

        sampler = threading.Thread(target=sampling, name="pyhalide profiler", daemon=True)
        sampler.start()
        try:
            last[0] = time.perf_counter_ns()
            result = call()
        finally:
            end = time.perf_counter_ns()
            stop.set()
            sampler.join()
            sample(end)  # the time since the last sample, billed to the Func named at the end
        _last.report = self._report(pipeline, billed, samples, threads)
        return result

    def _report(self, pipeline: str, billed, samples, threads) -> ProfileReport:
        state, total = self.state, int(billed.sum())
        rows = []
        for k, name in enumerate(self.names):
            allocations = int(state[_slot(1 + k, ALLOCATIONS)])
            ns, n = int(billed[k]), int(samples[k])
            rows.append(FuncProfile(
                name, ns / 1e6, 100.0 * ns / total if total else 0.0, int(threads[k]) / n if n else 0.0,
                int(state[_slot(1 + k, PEAK)]), allocations,
                int(state[_slot(1 + k, TOTAL)]) // allocations if allocations else 0, self.stack_bytes.get(k, 0)))
        n, active = int(samples.sum()), int(threads.sum())
        return ProfileReport(pipeline, total / 1e6, n, 1, active / n if n else 1.0,
                             int(state[_slot(0, ALLOCATIONS)]), int(state[_slot(0, PEAK)]), tuple(rows),
                             serial=active == n)
