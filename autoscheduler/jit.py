"""Just-in-time scheduling keyed on shapes, as Triton's @autotune is keyed on its arguments.

    @autotuned(budget_s=60)
    def blur(inp):                 # inp: an hl.ImageParam of the array's type and dimensions
        ...
        return blur_y              # the output Func

    out = blur(image)              # a numpy array in, a numpy array out

Each new combination of input shapes and types builds the algorithm once with ImageParams, gets a
schedule at once (a finished tuning run's record for exactly this algorithm, shapes and machine,
else the model-only autoscheduler), compiles it, and runs it; later calls of that shape only run.
With budget_s > 0 a measured tuning of that shape starts in a background thread (its candidates
run in worker processes, which rebuild the algorithm from the decorated function's module and the
example inputs saved in the cache directory); when it finishes, its best schedule replaces the
first one if it was measured faster, and it is in the tuning records, so the next process starts
tuned. The decorated function must be importable by module and name for that.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import numpy as np

import pyhalide as hl
from pyhalide.codegen.jit import cache_root
from pyhalide.types import from_numpy


def _image_params(arrays, name: str) -> list:
    params = []
    for i, a in enumerate(arrays):
        p = hl.ImageParam(from_numpy(a.dtype), a.ndim, f"{name}_in{i}")
        p.set_estimates([(0, int(n)) for n in reversed(a.shape)])
        params.append(p)
    return params


def build_with_arrays(build_fn, arrays, output_shape=None):
    """(output Func, its ImageParams bound to the arrays, the output's numpy shape): the
    algorithm of build_fn over ImageParams typed and shaped like the arrays, with estimates."""
    name = getattr(build_fn, "__name__", "fn")
    params = _image_params(arrays, name)
    for p, a in zip(params, arrays):
        p.set(hl.Buffer(np.ascontiguousarray(a)))
    out = build_fn(*params)
    shape = tuple(output_shape(*arrays)) if output_shape is not None else tuple(arrays[0].shape)
    out.set_estimates([(0, int(n)) for n in reversed(shape)])
    return out, params, shape


class _Entry:
    def __init__(self, out, params, shape, strategy: str):
        self.out, self.params, self.shape, self.strategy = out, params, shape, strategy
        self.pipeline = hl.Pipeline(out)
        self.call = self.pipeline.compile_to_callable(params)


class Autotuned:
    """The callable `autotuned` makes: see the module's docstring."""

    def __init__(self, build_fn, budget_s: float = 0.0, trials: int | None = None, threads: int | None = None,
                 output_shape=None, db=None):
        self.build_fn, self.budget_s, self.trials = build_fn, budget_s, trials
        self.threads = threads or int(os.environ.get("HL_NUM_THREADS", os.cpu_count() or 1))
        self.output_shape, self.db = output_shape, db
        self.entries: dict[tuple, _Entry] = {}
        self.tunings: dict[tuple, threading.Thread] = {}
        self.errors: dict[tuple, BaseException] = {}
        self.lock = threading.Lock()
        self.__name__ = getattr(build_fn, "__name__", "autotuned")
        self.__doc__ = getattr(build_fn, "__doc__", None)

    def __call__(self, *arrays):
        arrays = [np.asarray(a) for a in arrays]
        key = tuple((a.dtype.str, a.shape) for a in arrays)
        with self.lock:
            entry = self.entries.get(key)
            if entry is None:
                entry = self.entries[key] = self._schedule(arrays)
                if self.budget_s > 0 and entry.strategy != "record" and key not in self.tunings:
                    self._start_tuning(key, arrays)
        inputs = [hl.Buffer(np.ascontiguousarray(a)) for a in arrays]
        result = hl.Buffer(entry.out.type(), list(reversed(entry.shape)))
        entry.call(*inputs, result)
        return np.asarray(result)

    def schedule_of(self, *arrays) -> str:
        """How the schedule for these inputs' shapes was chosen: "record", "beam" (model-only)
        or "tuned" (a background tuning's best replaced it)."""
        arrays = [np.asarray(a) for a in arrays]
        return self.entries[tuple((a.dtype.str, a.shape) for a in arrays)].strategy

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the background tunings started so far."""
        for t in list(self.tunings.values()):
            t.join(timeout)

    # ----
    def _schedule(self, arrays) -> _Entry:
        from .api import auto_schedule

        out, params, shape = build_with_arrays(self.build_fn, arrays, self.output_shape)
        extra = {"records": str(self.db)} if self.db is not None else {}
        r = auto_schedule(out, params={"parallelism": self.threads, **extra})
        return _Entry(out, params, shape, r.stats["strategy"])

    def _start_tuning(self, key, arrays) -> None:
        from .measure import PipelineSpec

        module = getattr(self.build_fn, "__module__", None)
        name = getattr(self.build_fn, "__qualname__", "")
        if not module or module == "__main__" or "<" in name:
            self.errors[key] = hl.HalideError(
                f"autotuned: {name} must be a module-level function of an importable module to be tuned "
                "in worker processes")
            return
        examples = _save_examples(arrays)
        spec = PipelineSpec("function", f"{module}:{name}", str(examples))
        thread = threading.Thread(target=self._tune, args=(key, spec, arrays), daemon=True,
                                  name=f"autotune-{self.__name__}")
        self.tunings[key] = thread
        thread.start()

    def _tune(self, key, spec, arrays) -> None:
        from .tune import tune

        try:
            r = tune(spec, budget_s=self.budget_s, trials=self.trials, threads=self.threads, db=self.db)
            if r.first_s is not None and r.time_s is not None and r.time_s >= r.first_s:
                return  # the schedule in use was as fast as any measured
            out, params, shape = build_with_arrays(self.build_fn, arrays, self.output_shape)
            hl.Pipeline(out).apply_schedule_json(r.schedule)
            entry = _Entry(out, params, shape, "tuned")
            with self.lock:
                self.entries[key] = entry
        except BaseException as e:  # noqa: BLE001 - a failed tuning leaves the first schedule in use
            self.errors[key] = e


def _save_examples(arrays) -> Path:
    """The example inputs as an .npz in the cache directory (loaded without pickle)."""
    root = cache_root() / "autotuned"
    root.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    for a in arrays:
        h.update(a.dtype.str.encode() + str(a.shape).encode() + np.ascontiguousarray(a).tobytes())
    path = root / f"{h.hexdigest()[:20]}.npz"
    if not path.exists():
        np.savez(path, *[np.ascontiguousarray(a) for a in arrays])
    return path


def load_examples(path: str) -> list[np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return [data[f"arr_{i}"] for i in range(len(data.files))]


def autotuned(build_fn=None, *, budget_s: float = 0.0, trials: int | None = None, threads: int | None = None,
              output_shape=None, db=None):
    """Decorate a function of ImageParams that returns the output Func: see the module's
    docstring. output_shape(*arrays) gives the output's numpy shape (default: the first input's);
    budget_s > 0 tunes each new shape by measurement in the background; db: the tuning records."""
    def wrap(fn):
        return Autotuned(fn, budget_s, trials, threads, output_shape, db)

    return wrap(build_fn) if build_fn is not None else wrap
