"""Schedules as plain data: where each Func is computed and stored, and how each stage loops.

Schedule calls on Funcs and Stages (`split`, `vectorize`, `compute_at` ...) validate their
arguments, update the state here, and append themselves to a log. The state is what lowering
reads; the log is what serialises (JSON for the tuning database, Python source for a person to
paste): replaying it on a fresh algorithm rebuilds the same state.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .errors import CompileError

# loop kinds, as in ir.For
SERIAL, PARALLEL, VECTORIZED, UNROLLED = "serial", "parallel", "vectorized", "unrolled"


class TailStrategy:
    """What a split does when the factor does not divide the extent (Halide's hl.TailStrategy)."""

    Auto = "Auto"
    GuardWithIf = "GuardWithIf"
    ShiftInwards = "ShiftInwards"
    RoundUp = "RoundUp"
    PredicateLoads = "PredicateLoads"
    PredicateStores = "PredicateStores"

    ALL = ("Auto", "GuardWithIf", "ShiftInwards", "RoundUp", "PredicateLoads", "PredicateStores")


class LoopLevel:
    """Where a Func is computed or stored: inlined, at root, or inside a loop of another Func."""

    def __init__(self, func=None, var=None, stage_index: int = -1):
        if func is None:
            self.kind, self.func_name, self.var_name, self.stage_index = "inlined", None, None, -1
            return
        self.kind = "at"
        self.func_name = func if isinstance(func, str) else func.name()
        self.var_name = var if isinstance(var, str) else var.name()
        self.stage_index = stage_index

    @staticmethod
    def root() -> LoopLevel:
        level = LoopLevel()
        level.kind = "root"
        return level

    @staticmethod
    def inlined() -> LoopLevel:
        return LoopLevel()

    def is_root(self) -> bool:
        return self.kind == "root"

    def is_inlined(self) -> bool:
        return self.kind == "inlined"

    def __eq__(self, other):
        return isinstance(other, LoopLevel) and self.to_json() == other.to_json()

    def __hash__(self):
        return hash(json.dumps(self.to_json()))

    def __repr__(self):
        if self.kind != "at":
            return f"LoopLevel.{self.kind}"
        return f"LoopLevel({self.func_name}, {self.var_name}, stage {self.stage_index})"

    def to_json(self):
        return {"kind": self.kind, "func": self.func_name, "var": self.var_name, "stage": self.stage_index}


@dataclass
class Split:
    """One loop transformation of a stage, in user names (old/outer/inner as in Halide).

    split: `old` becomes `outer` * factor + `inner`; fuse: `old` (inner) and `outer` become
    `inner` (the fused name); rename: `old` becomes `outer`.
    """

    kind: str
    old: str
    outer: str
    inner: str = ""
    factor: int = 0
    tail: str = TailStrategy.Auto


@dataclass
class Dim:
    """A loop of a stage. `name` is the user's name; `internal` the unique loop name."""

    name: str
    internal: str
    for_type: str = SERIAL
    is_rvar: bool = False
    task_size: int = 1


@dataclass
class StageSchedule:
    splits: list[Split] = field(default_factory=list)
    dims: list[Dim] = field(default_factory=list)  # innermost first
    atomic: bool = False
    allow_race_conditions: bool = False
    initialized: bool = False
    specializations: list = field(default_factory=list)  # (condition IR, StageSchedule), first wins

    def find(self, name: str) -> Dim | None:
        for d in self.dims:
            if d.name == name:
                return d
        return None

    def index(self, name: str) -> int:
        for i, d in enumerate(self.dims):
            if d.name == name:
                return i
        return -1


@dataclass
class FuncSchedule:
    compute_level: LoopLevel = field(default_factory=LoopLevel)  # inlined means "default"
    store_level: LoopLevel | None = None  # None: same as compute level
    explicit_inline: bool = False
    innermost_default: bool = False  # an inline reduction: by default computed in its consumer's innermost loop
    bounds: dict[str, tuple] = field(default_factory=dict)  # var -> (min or None, extent, modulus, remainder)
    storage_order: list[str] | None = None
    global_wrapper: object = None  # the Func made by f.in_(), which all other consumers call
    stages: list[StageSchedule] = field(default_factory=lambda: [StageSchedule()])
    log: list[tuple[int, str, list]] = field(default_factory=list)  # (stage, method, args)

    def reset_stages(self, n: int) -> None:
        while len(self.stages) < n:
            self.stages.append(StageSchedule())

    @property
    def is_default(self) -> bool:
        return self.compute_level.is_inlined() and not self.explicit_inline


def schedule_to_json(funcs) -> str:
    """The schedules of the given Funcs (by name) as JSON: the replayable directive log."""
    for f in funcs:
        if any(method == "specialize" for _, method, _ in f._schedule.log):
            raise CompileError(f"The schedule of {f.name()} uses specialize(), whose conditions are Exprs; "
                               "it can't be written as JSON")
    return json.dumps({f.name(): [list(entry) for entry in f._schedule.log] for f in funcs}, sort_keys=True)


def apply_schedule_json(funcs, text: str) -> None:
    """Replay a JSON schedule (from schedule_to_json) onto Funcs with the same names."""
    from .func import Stage

    by_name = {f.name(): f for f in funcs}
    data = json.loads(text)
    for name, entries in data.items():
        if name not in by_name:
            raise CompileError(f"Schedule names Func {name}, which is not in the pipeline")
        f = by_name[name]
        for stage, method, args in entries:
            target = f if stage == 0 else Stage(f, stage)
            result = getattr(target, method)(*[_decode_arg(a, by_name) for a in args])
            if method in ("rfactor", "in_"):  # later entries may schedule the Func it made
                by_name[result.name()] = result


def _decode_arg(a, by_name):
    if isinstance(a, list):
        return [_decode_arg(x, by_name) for x in a]
    if isinstance(a, dict) and "func" in a and len(a) == 1:
        if a["func"] not in by_name:
            raise CompileError(f"Schedule names Func {a['func']}, which is not in the pipeline")
        return by_name[a["func"]]
    if isinstance(a, dict) and a.get("loop_level"):
        lv = a["loop_level"]
        if lv["kind"] == "root":
            return LoopLevel.root()
        if lv["kind"] == "inlined":
            return LoopLevel.inlined()
        return LoopLevel(lv["func"], lv["var"], lv["stage"])
    if isinstance(a, dict) and "var" in a:
        from .var import RVar, Var

        return RVar(a["var"]) if a.get("rvar") else Var(a["var"])
    return a


def schedule_to_python(funcs) -> str:
    """Python source that applies the same schedule (paste it after the algorithm)."""
    lines = []
    for f in funcs:
        for stage, method, args in f._schedule.log:
            target = f.name() if stage == 0 else f"{f.name()}.update({stage - 1})"
            lines.append(f"{target}.{method}({', '.join(_source_arg(a) for a in args)})")
    return "\n".join(lines) + ("\n" if lines else "")


def _source_arg(a) -> str:
    if isinstance(a, list):
        return "[" + ", ".join(_source_arg(x) for x in a) + "]"
    if isinstance(a, dict) and "func" in a and len(a) == 1:
        return a["func"]
    if isinstance(a, dict) and a.get("loop_level"):
        lv = a["loop_level"]
        if lv["kind"] == "root":
            return "hl.LoopLevel.root()"
        if lv["kind"] == "inlined":
            return "hl.LoopLevel.inlined()"
        return f"hl.LoopLevel({lv['func']}, hl.Var({lv['var']!r}), {lv['stage']})"
    if isinstance(a, dict) and "var" in a:
        return f"hl.{'RVar' if a.get('rvar') else 'Var'}({a['var']!r})"
    if isinstance(a, str) and a in TailStrategy.ALL:
        return f"hl.TailStrategy.{a}"
    return repr(a)
