"""pyhalide's autoscheduler: beam search over every Func's schedule, ranked by a learned cost model.

    from autoscheduler import auto_schedule, tune
    result = auto_schedule(output, estimates={"output": [(0, 1920), (0, 1080)]})
    tuned = tune(output, budget_s=120)  # measured: candidates built and timed in workers

Importing it registers Halide's autoscheduler names (Adams2019, Anderson2021, Mullapudi2016,
Li2018) for `hl.Pipeline.apply_autoscheduler`.

Roles, one module each: `analysis` (the algorithm, read once), `loop_nest` (a candidate evaluated
numerically), `space` (the legal decisions), `cost_model` (features to seconds), `search`
(beam, greedy, random, compute-root), `apply` (decisions to directives and Python source), `api`;
measured tuning: `measure` (workers), `records` (the SQLite database), `fit` (weights from
measurements, for `train` and `tune`), `tune` (the loop), `jit`
(`autotuned`), `cli`.
"""

from .api import Result, auto_schedule, register
from .cost_model import CostModel
from .jit import autotuned
from .tune import tune  # noqa: F811 - the function, as `autoscheduler.tune(...)`; the module stays importable

register()

__all__ = ["CostModel", "Result", "auto_schedule", "autotuned", "tune"]
