"""Schedules as plain data: where each Func is computed and stored, and how each stage loops.

Schedule calls on Funcs and Stages (`split`, `vectorize`, `compute_at` ...) validate their
arguments, update the state here, and append themselves to a log. The state is what lowering
reads; the log is what serialises (JSON for the tuning database, Python source for a person to
paste): replaying it on a fresh algorithm rebuilds the same state. Nothing here changes the
algorithm: even `in_()` wrappers and `rfactor` are recorded as schedule data, which lowering
applies to its own copy of the Func graph.
"""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass, field, fields, replace

from .errors import CompileError
from .names import func_name_family, map_name_tokens

# loop kinds, as in ir.For
SERIAL, PARALLEL, VECTORIZED, UNROLLED = "serial", "parallel", "vectorized", "unrolled"
GPU_BLOCK, GPU_THREAD, GPU_LANE = "gpu_block", "gpu_thread", "gpu_lane"
GPU_LOOP_KINDS = (GPU_BLOCK, GPU_THREAD, GPU_LANE)
LOOP_KINDS = (SERIAL, PARALLEL, VECTORIZED, UNROLLED, *GPU_LOOP_KINDS)
EXTERN = "extern"  # a dimension of an extern stage its C function covers (no loop; Halide's ForType::Extern)


class MemoryType:
    """Where a Func's storage lives (Halide's hl.MemoryType), set with `store_in`."""

    Auto = "Auto"
    Heap = "Heap"
    Stack = "Stack"
    Register = "Register"
    GPUShared = "GPUShared"
    GPUTexture = "GPUTexture"
    LockedCache = "LockedCache"
    VTCM = "VTCM"
    AMXTile = "AMXTile"

    ALL = ("Auto", "Heap", "Stack", "Register", "GPUShared", "GPUTexture", "LockedCache", "VTCM", "AMXTile")
    GPU_ONLY = ("GPUShared", "GPUTexture")


class TailStrategy:
    """What a split does when the factor does not divide the extent (Halide's hl.TailStrategy)."""

    Auto = "Auto"
    GuardWithIf = "GuardWithIf"
    ShiftInwards = "ShiftInwards"
    RoundUp = "RoundUp"
    Predicate = "Predicate"
    PredicateLoads = "PredicateLoads"
    PredicateStores = "PredicateStores"
    ShiftInwardsAndBlend = "ShiftInwardsAndBlend"
    RoundUpAndBlend = "RoundUpAndBlend"

    ALL = ("Auto", "GuardWithIf", "ShiftInwards", "RoundUp", "Predicate", "PredicateLoads", "PredicateStores",
           "ShiftInwardsAndBlend", "RoundUpAndBlend")
    # Computed as GuardWithIf: each point of the extent once, nothing past it. Halide's predicated
    # and blending strategies store (or load) only inside the extent too, so every value they
    # compute is the same; they differ in what they may load or write past it (and in code).
    GUARDED = ("GuardWithIf", "Predicate", "PredicateLoads", "PredicateStores", "ShiftInwardsAndBlend",
               "RoundUpAndBlend")


class Partition:
    """Halide's hl.Partition: whether lowering may split a loop into a prologue, a steady state and
    an epilogue so that the steady state drops the boundary checks. A policy never changes values,
    only the code; it is recorded per loop (Dim.partition) for lowering to read."""

    Auto = "Auto"
    Never = "Never"
    Always = "Always"

    ALL = ("Auto", "Never", "Always")


class LoopAlignStrategy:
    """How compute_with lines up a stage's fused loops with its parent's where their ranges
    differ (Halide's hl.LoopAlignStrategy): the same first or last iteration, or the same loop
    variable values (NoAlign; Auto means NoAlign)."""

    AlignStart = "AlignStart"
    AlignEnd = "AlignEnd"
    NoAlign = "NoAlign"
    Auto = "Auto"

    ALL = ("AlignStart", "AlignEnd", "NoAlign", "Auto")


class PrefetchBoundStrategy:
    """What a prefetch does where the region it would fetch leaves the buffer (Halide's
    hl.PrefetchBoundStrategy): clamp the region into it, skip the prefetch (GuardWithIf), or fetch
    it anyway (NonFaulting: a prefetch never faults)."""

    Clamp = "Clamp"
    GuardWithIf = "GuardWithIf"
    NonFaulting = "NonFaulting"

    ALL = ("Clamp", "GuardWithIf", "NonFaulting")


@dataclass(frozen=True)
class Prefetch:
    """f.prefetch(name, at, from_, offset): at the top of each iteration of loop `at`, fetch
    into the cache what `name` (a Func or an input image) holds where iteration `from_ + offset`
    of loop `from_` reads or writes it."""

    name: str
    at: str
    from_: str
    offset: int
    strategy: str


class LoopLevel:
    """Where a Func is computed or stored: inlined, at root, or inside a loop of another Func.

    As Halide's, a handle: `LoopLevel()` is undefined until `set()` fills it in, and every Func
    given it (compute_at, store_at) sees what it is set to (a Generator's LoopLevel parameter)."""

    def __init__(self, func=None, var=None, stage_index: int = -1):
        self._holders: weakref.WeakSet = weakref.WeakSet()  # Funcs placed by it: set() reschedules them
        if func is None:
            self.kind, self.func_name, self.var_name, self.stage_index = "undefined", None, None, -1
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
        level = LoopLevel()
        level.kind = "inlined"
        return level

    def set(self, other: LoopLevel) -> LoopLevel:
        """This LoopLevel (and so every Func given it) becomes `other`, as Halide's."""
        if not isinstance(other, LoopLevel):
            raise CompileError(f"LoopLevel.set takes a LoopLevel, got {other!r}")
        self.kind, self.func_name, self.var_name, self.stage_index = (other.kind, other.func_name, other.var_name,
                                                                      other.stage_index)
        for f in list(self._holders):
            f._version += 1
        return self

    def defined(self) -> bool:
        return self.kind != "undefined"

    def placing(self, func) -> LoopLevel:
        """Note that func is placed by this level (its pipelines compile again when it is set)."""
        self._holders.add(func)
        return self

    def is_root(self) -> bool:
        return self.kind == "root"

    def is_inlined(self) -> bool:
        return self.kind == "inlined"

    def __eq__(self, other):
        return isinstance(other, LoopLevel) and self.to_json() == other.to_json()

    def __copy__(self):  # (a handle: copies of a schedule share it)
        return self

    def __getstate__(self):  # (pickled, as tuning does across processes: without its holders)
        return {k: v for k, v in self.__dict__.items() if k != "_holders"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._holders = weakref.WeakSet()

    def __deepcopy__(self, memo):
        return self

    def __hash__(self):
        return hash(json.dumps(self.to_json()))

    def __repr__(self):
        if self.kind != "at":
            return f"LoopLevel.{self.kind}"
        return f"LoopLevel({self.func_name}, {self.var_name}, stage {self.stage_index})"

    def to_json(self):
        return {"kind": self.kind, "func": self.func_name, "var": self.var_name, "stage": self.stage_index}


@dataclass(frozen=True)
class Split:
    """One loop transformation of a stage, in user names (old/outer/inner as in Halide).

    split: `old` becomes `outer` * factor + `inner`; fuse: `old` (inner) and `outer` become
    `inner` (the fused name); rename: `old` becomes `outer`. The factor is a positive int, or an
    Int(32) expression of Params (`split(x, xo, xi, tile)`: known when the pipeline runs).
    """

    kind: str
    old: str
    outer: str
    inner: str = ""
    factor: object = 0
    tail: str = TailStrategy.Auto

    def factor_expr(self):
        """The factor as an Int(32) expression."""
        from . import ir

        return ir.make_const(ir.Int(32), self.factor) if isinstance(self.factor, int) else self.factor

    def may_exceed_one(self) -> bool:
        """Whether the split can leave a tail (a factor over 1, or one known only at run time)."""
        return not isinstance(self.factor, int) or self.factor > 1


@dataclass
class Dim:
    """A loop of a stage. `name` is the user's name; `internal` the unique loop name."""

    name: str
    internal: str
    for_type: str = SERIAL
    is_rvar: bool = False
    task_size: int = 1
    partition: str = Partition.Auto  # the loop partition policy set by partition() and friends


@dataclass
class StageSchedule:
    splits: list[Split] = field(default_factory=list)
    dims: list[Dim] = field(default_factory=list)  # innermost first
    atomic: bool = False
    allow_race_conditions: bool = False
    initialized: bool = False
    specializations: list = field(default_factory=list)  # (condition IR, StageSchedule), first wins
    gpu_single_thread: bool = False  # the whole stage is one GPU block of one thread
    fail_message: str = ""  # specialize_fail's: where no specialization's condition holds, the pipeline fails
    # compute_with: the stage's loops from the outermost down to this level's Var are the
    # parent stage's (fused), aligned per loop name as `fuse_align` says (absent: NoAlign)
    fuse_level: LoopLevel | None = None
    fuse_align: dict[str, str] = field(default_factory=dict)
    prefetches: list[Prefetch] = field(default_factory=list)
    atomic_unchecked: bool = False  # atomic(override_associativity_test=True)
    # rfactor: the definition this schedule computes, one that reduces an intermediate Func. None:
    # the stage's own (a stage's: the algorithm's; a specialization's: that of the stage it
    # specializes). A specialization rfactored on its own has a definition of its own, as in Halide.
    definition: object = None
    # counted as scheduled though no directive of its own was applied (Halide's `touched`): the
    # update of an rfactor intermediate, which in Halide takes the reduction's schedule
    touched: bool = False

    def restart(self, definition, replaced) -> None:
        """Fresh loops (set up when first scheduled) for the definition rfactor put in place of
        `replaced`, keeping the specializations (as Halide does), which go on computing the
        definition they had."""
        pending = list(self.specializations)
        while pending:
            _, special = pending.pop()
            if special.definition is None:
                special.definition = replaced
            pending.extend(special.specializations)
        fresh = StageSchedule(specializations=self.specializations, fail_message=self.fail_message,
                              definition=definition)
        for f in fields(self):
            setattr(self, f.name, getattr(fresh, f.name))

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

    def copy(self) -> StageSchedule:
        """An independent copy (the IR of specialization conditions and definitions is immutable,
        so shared)."""
        return StageSchedule(list(self.splits), [replace(d) for d in self.dims], self.atomic,
                             self.allow_race_conditions, self.initialized,
                             [(cond, special.copy()) for cond, special in self.specializations],
                             self.gpu_single_thread, self.fail_message, self.fuse_level, dict(self.fuse_align),
                             list(self.prefetches), self.atomic_unchecked, self.definition, self.touched)


@dataclass
class FuncSchedule:
    compute_level: LoopLevel = field(default_factory=LoopLevel.inlined)  # inlined means "default"
    store_level: LoopLevel | None = None  # None: same as compute level
    # hoist_storage's level (None: the store level). pyhalide allocates at the store level (the
    # same values); the level is checked as Halide checks it.
    hoist_level: LoopLevel | None = None
    ring_buffer: int | None = None  # ring_buffer's extent (pyhalide computes synchronously: one buffer)
    is_async: bool = False  # async_() (computed synchronously; the schedule is checked as Halide's)
    compute_placed: bool = False  # compute_at (or compute_root, compute_inline) was called
    innermost_default: bool = False  # an inline reduction: by default computed in its consumer's innermost loop
    bounds: dict[str, tuple] = field(default_factory=dict)  # var -> (min or None, extent, modulus, remainder)
    storage_order: list[str] | None = None
    folds: dict[str, tuple[int, bool]] = field(default_factory=dict)  # var -> fold_storage's (extent, forward)
    aligns: dict[str, int] = field(default_factory=dict)  # var -> align_storage's alignment
    storage_bounds: dict = field(default_factory=dict)  # var -> bound_storage's extent (IR Expr)
    memory_type: str = MemoryType.Auto
    buffer_copy: bool = False  # copy_to_host / copy_to_device: computed (at root unless placed), never inlined
    memoized: bool = False  # memoize(): productions kept in the memoization cache (lowering/memoization.py)
    eviction_key: object = None  # memoize(EvictionKey(e)): the IR Expr e, or None
    # f.in_() and f.in_(g): the Func standing between f and its consumers ("" for all of them,
    # else the consumer's name). Lowering redirects the consumers' calls on its copy of the graph.
    wrappers: dict[str, object] = field(default_factory=dict)
    stages: list[StageSchedule] = field(default_factory=lambda: [StageSchedule()])
    log: list[tuple[int, str, list]] = field(default_factory=list)  # (stage, method, args)

    def reset_stages(self, n: int) -> None:
        while len(self.stages) < n:
            self.stages.append(StageSchedule())

    @property
    def is_default(self) -> bool:
        return self.compute_level.is_inlined() and not self.compute_placed

    @property
    def explicit_inline(self) -> bool:
        """compute_inline() (or compute_at a level now inlined) was asked for."""
        return self.compute_placed and self.compute_level.is_inlined()

    def copy(self) -> FuncSchedule:
        """An independent copy: later directives on either leave the other as it is. LoopLevels,
        IR, Definitions and the wrapper Funcs are never changed in place, so they are shared."""
        return replace(self, bounds=dict(self.bounds), folds=dict(self.folds), aligns=dict(self.aligns),
                       storage_bounds=dict(self.storage_bounds),
                       storage_order=None if self.storage_order is None else list(self.storage_order),
                       wrappers=dict(self.wrappers),
                       stages=[st.copy() for st in self.stages], log=list(self.log))

    def default(self) -> FuncSchedule:
        """The schedule a Func with this many stages starts with (an inline reduction keeps its
        default placement)."""
        return FuncSchedule(innermost_default=self.innermost_default,
                            stages=[StageSchedule() for _ in self.stages])


def stage_touched(schedule: FuncSchedule, stage: int) -> bool:
    """Whether any directive of the stage's own (loops, partitioning, unscheduled(), ...) was
    applied to stage `stage`: Halide's `touched`, which decides the unscheduled-update warning.
    Placement and storage directives (compute_at, bound, ...) are the Func's, not a stage's."""
    if stage < len(schedule.stages) and schedule.stages[stage].touched:
        return True
    return any(s == stage and (method in ("specialize", "specialize_fail", "symbolic_prefetch", "symbolic_split")
                               or DIRECTIVES.get(method, ("func",))[0] != "func")
               for s, method, _ in schedule.log)


def schedule_to_json(funcs, rename: dict | None = None, without_specializations: bool = False) -> str:
    """The schedules of the given Funcs (by name) as JSON: the replayable directive log.
    rename: name tokens written as others (Pipeline's canonical names); by default the Funcs'
    names as a fresh process makes them (see copy_graph.canonical_func_names).
    `without_specializations`: the log leaves specialize() and specialize_fail() out (the
    caller writes the specializations otherwise) instead of refusing them."""
    skipped = ("specialize", "specialize_fail") if without_specializations else ()
    for f in funcs:
        methods = {method for _, method, _ in f._schedule.log} - set(skipped)
        if methods & {"specialize", "specialize_fail"}:
            raise CompileError(f"The schedule of {f.name()} uses specialize(), whose conditions are Exprs; "
                               "it can't be written as JSON")
        if "symbolic_bound" in methods:
            raise CompileError(f"The schedule of {f.name()} bounds a Var by an Expr that is not a constant; "
                               "it can't be written as JSON")
        if "symbolic_split" in methods:
            raise CompileError(f"The schedule of {f.name()} splits a loop by a factor that is not a constant; "
                               "it can't be written as JSON")
        if "symbolic_prefetch" in methods:
            raise CompileError(f"The schedule of {f.name()} prefetches an input image or by an offset that is not "
                               "a constant; it can't be written as JSON")
    if rename is None:
        from .lowering.copy_graph import canonical_func_names

        rename = canonical_func_names(funcs)
    data = {f.name(): [_plain(list(entry)) for entry in f._schedule.log if entry[1] not in skipped] for f in funcs}
    return json.dumps(_renamed(data, rename) if rename else data, sort_keys=True)




def _renamed(data, rename: dict):
    """The JSON data with every name token that `rename` maps replaced (keys and strings)."""
    if isinstance(data, str):
        return map_name_tokens(data, rename)
    if isinstance(data, list):
        return [_renamed(x, rename) for x in data]
    if isinstance(data, dict):
        return {_renamed(k, rename): _renamed(v, rename) for k, v in data.items()}
    return data


# ------------------------------------------------------------------ replaying records safely
# Schedule records come from a database and from other machines: replay runs only these
# directives, each with arguments of these kinds (checked before anything is applied).
#   var: {"var": name, "rvar": bool}; factor: an int in [1, 2^31-1]; int: any int32;
#   tail: a TailStrategy; level: {"loop_level": {...}}; funcs: [{"func": name}, ...];
#   pairs: [[var, var], ...]; memory: a MemoryType; partition: a Partition; bool;
#   align: a LoopAlignStrategy or [[var, strategy], ...]; prefetch: a PrefetchBoundStrategy.
# A trailing "*" repeats the kind.
# method -> (where: "any" stage, "update" stages only or "func" (stage 0), argument kinds, least count)
DIRECTIVES = {
    "split": ("any", ("var", "var", "var", "factor", "tail"), 5),
    "fuse": ("any", ("var", "var", "var"), 3),
    "rename": ("any", ("var", "var"), 2),
    "reorder": ("any", ("var*",), 1),
    "vectorize": ("any", ("var", "factor", "tail"), 1),
    "unroll": ("any", ("var", "factor", "tail"), 1),
    "parallel": ("any", ("var", "factor", "tail"), 1),
    "serial": ("any", ("var",), 1),
    "gpu_blocks": ("any", ("var*",), 1),
    "gpu_threads": ("any", ("var*",), 1),
    "gpu_lanes": ("any", ("var",), 1),
    "gpu_single_thread": ("any", (), 0),
    "atomic": ("any", ("bool",), 0),
    "allow_race_conditions": ("any", (), 0),
    "partition": ("any", ("var", "partition"), 2),
    "never_partition_all": ("any", (), 0),
    "always_partition_all": ("any", (), 0),
    "unscheduled": ("update", (), 0),
    "rfactor": ("update", ("pairs",), 1),
    "compute_at": ("func", ("level",), 1),
    "store_at": ("func", ("level",), 1),
    "compute_with": ("any", ("level", "align"), 2),
    "prefetch": ("any", ("func", "var", "var", "int", "prefetch"), 5),
    "bound": ("func", ("var", "int", "int"), 3),
    "bound_extent": ("func", ("var", "int"), 2),
    "align_bounds": ("func", ("var", "factor", "int"), 3),
    "align_extent": ("func", ("var", "factor"), 2),
    "in_": ("func", ("funcs",), 0),
    "clone_in": ("func", ("funcs",), 1),
    "reorder_storage": ("func", ("var*",), 1),
    "fold_storage": ("func", ("var", "factor", "bool"), 3),
    "align_storage": ("func", ("var", "factor"), 2),
    "bound_storage": ("func", ("var", "int"), 2),
    "async_": ("func", (), 0),
    "memoize": ("func", (), 0),
    "ring_buffer": ("func", ("factor",), 1),
    "hoist_storage": ("func", ("level",), 1),
    "store_in": ("func", ("memory",), 1),
    "copy_to_host": ("func", (), 0),
    "copy_to_device": ("func", (), 0),
}
MAX_RECORD_CHARS = 1 << 20  # a schedule is a few kB; anything this big is not one
_MAX_NAME = 256
_MAX_LIST = 64
_INT32 = (-(2**31), 2**31 - 1)


def _bad(message: str) -> CompileError:
    return CompileError(f"Invalid schedule record: {message}")


def _check_name(what: str, v) -> None:
    if not isinstance(v, str) or not 0 < len(v) <= _MAX_NAME or not v.isprintable():
        raise _bad(f"{what} must be a printable name of at most {_MAX_NAME} characters, got {_short(v)}")


def _short(v) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_arg(where: str, kind: str, a) -> None:
    if kind == "var":
        if not isinstance(a, dict) or set(a) != {"var", "rvar"} or not isinstance(a["rvar"], bool):
            raise _bad(f"{where}: expected a loop variable {{'var': name, 'rvar': bool}}, got {_short(a)}")
        _check_name(f"{where}: the variable", a["var"])
    elif kind in ("factor", "int"):
        lo = 1 if kind == "factor" else _INT32[0]
        if not _is_int(a) or not lo <= a <= _INT32[1]:
            raise _bad(f"{where}: expected an integer in [{lo}, {_INT32[1]}], got {_short(a)}")
    elif kind == "tail":
        if a not in TailStrategy.ALL:
            raise _bad(f"{where}: expected a tail strategy ({', '.join(TailStrategy.ALL)}), got {_short(a)}")
    elif kind == "partition":
        if a not in Partition.ALL:
            raise _bad(f"{where}: expected a loop partition policy ({', '.join(Partition.ALL)}), got {_short(a)}")
    elif kind == "memory":
        if a not in MemoryType.ALL:
            raise _bad(f"{where}: expected a memory type ({', '.join(MemoryType.ALL)}), got {_short(a)}")
    elif kind == "prefetch":
        if a not in PrefetchBoundStrategy.ALL:
            raise _bad(f"{where}: expected a prefetch bound strategy ({', '.join(PrefetchBoundStrategy.ALL)}), "
                       f"got {_short(a)}")
    elif kind == "align":
        pairs = a if isinstance(a, list) else []
        if not (a in LoopAlignStrategy.ALL or isinstance(a, list) and len(a) <= _MAX_LIST and
                all(isinstance(x, list) and len(x) == 2 and x[1] in LoopAlignStrategy.ALL for x in pairs)):
            raise _bad(f"{where}: expected a loop alignment strategy ({', '.join(LoopAlignStrategy.ALL)}) or a "
                       f"list of [var, strategy] pairs, got {_short(a)}")
        for x in pairs:
            _check_arg(where, "var", x[0])
    elif kind == "bool":
        if not isinstance(a, bool):
            raise _bad(f"{where}: expected true or false, got {_short(a)}")
    elif kind == "level":
        lv = a.get("loop_level") if isinstance(a, dict) and set(a) == {"loop_level"} else None
        if not isinstance(lv, dict) or set(lv) != {"kind", "func", "var", "stage"} or not _is_int(lv["stage"]) \
                or not -1 <= lv["stage"] < _MAX_LIST or lv["kind"] not in ("root", "inlined", "at"):
            raise _bad(f"{where}: expected a loop level, got {_short(a)}")
        if lv["kind"] == "at":
            _check_name(f"{where}: the loop level's Func", lv["func"])
            _check_name(f"{where}: the loop level's variable", lv["var"])
    elif kind == "func":
        if not isinstance(a, dict) or set(a) != {"func"}:
            raise _bad(f"{where}: expected a Func {{'func': name}}, got {_short(a)}")
        _check_name(f"{where}: the Func", a["func"])
    elif kind == "funcs":
        if not isinstance(a, list) or not 0 < len(a) <= _MAX_LIST or \
                not all(isinstance(x, dict) and set(x) == {"func"} for x in a):
            raise _bad(f"{where}: expected a list of Funcs [{{'func': name}}, ...], got {_short(a)}")
        for x in a:
            _check_name(f"{where}: the Func", x["func"])
    elif kind == "pairs":
        if not isinstance(a, list) or not 0 < len(a) <= _MAX_LIST or \
                not all(isinstance(x, list) and len(x) == 2 for x in a):
            raise _bad(f"{where}: expected a list of [RVar, Var] pairs, got {_short(a)}")
        for x in a:
            _check_arg(where, "var", x[0])
            _check_arg(where, "var", x[1])
    else:
        raise AssertionError(kind)


def _check_entry(func: str, entry) -> None:
    if not isinstance(entry, list) or len(entry) != 3:
        raise _bad(f"an entry of {func} must be [stage, directive, arguments], got {_short(entry)}")
    stage, method, args = entry
    if not isinstance(method, str) or method not in DIRECTIVES:
        raise _bad(f"{func}: {_short(method)} is not a schedule directive (the directives are "
                   f"{', '.join(sorted(DIRECTIVES))})")
    where_ok, kinds, least = DIRECTIVES[method]
    where = f"{func}.{method}"
    if not _is_int(stage) or not 0 <= stage < _MAX_LIST:
        raise _bad(f"{where}: the stage must be a small non-negative integer, got {_short(stage)}")
    if where_ok == "func" and stage != 0 or where_ok == "update" and stage == 0:
        raise _bad(f"{where} applies to {'the Func' if where_ok == 'func' else 'an update'}, not stage {stage}")
    if not isinstance(args, list):
        raise _bad(f"{where}: the arguments must be a list, got {_short(args)}")
    repeat = kinds[-1].endswith("*") if kinds else False
    if len(args) < least or (not repeat and len(args) > len(kinds)) or len(args) > _MAX_LIST:
        raise _bad(f"{where}: {len(args)} arguments")
    for i, a in enumerate(args):
        _check_arg(f"{where} argument {i + 1}", kinds[min(i, len(kinds) - 1)].rstrip("*"), a)


def validate_schedule_json(text: str) -> dict:
    """Parse and check a schedule record against the schema above; returns the data. Anything else
    than schedule directives with well-formed arguments is refused with a CompileError."""
    if not isinstance(text, str | bytes) or len(text) > MAX_RECORD_CHARS:
        raise _bad("expected JSON text of at most 1 MB")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise _bad(f"not JSON ({type(e).__name__}: {str(e)[:100]})") from None
    if not isinstance(data, dict):
        raise _bad(f"expected an object mapping Func names to directive lists, got {_short(data)}")
    for name, entries in data.items():
        _check_name("a Func", name)
        if not isinstance(entries, list) or len(entries) > 64 * _MAX_LIST:
            raise _bad(f"the directives of {name} must be a list, got {_short(entries)}")
        for entry in entries:
            _check_entry(name, entry)
    return data


def apply_schedule_json(funcs, text: str, rename: dict | None = None) -> None:
    """Replay a JSON schedule (from schedule_to_json) onto Funcs with the same names (after
    `rename`, of the record's name tokens; by default those schedule_to_json gives the Funcs).
    The record is validated first; if any directive is refused, every Func's schedule is put
    back as it was."""
    from .call_graph import image_funcs_to_make
    from .func import Func
    from .lowering.copy_graph import canonical_func_names, first_free_name

    if rename is None:
        rename = {c: n for n, c in canonical_func_names(funcs).items()}
    data = validate_schedule_json(text)
    if rename:
        data = _renamed(data, rename)
    by_name = {f.name(): f for f in funcs}
    saved: list[tuple[Func, FuncSchedule]] = []

    def replay(f, entries):
        saved.append((f, f.copy_schedule()))
        for stage, method, args in entries:
            target = f if stage == 0 else f.update(stage - 1)
            result = getattr(target, method)(*[_decode_arg(a, by_name) for a in args])
            if method in ("rfactor", "in_", "clone_in"):  # later entries may schedule the Func it made
                by_name[result.name()] = result
                family = func_name_family(result.name())
                if family != result.name():  # the record names it as a fresh process would
                    by_name[first_free_name(family, by_name)] = result

    todo = dict(data)
    images = image_funcs_to_make(funcs)
    for name in todo:
        if name not in by_name and name in images:  # scheduled in the record: `hl.Func(img)` made there
            by_name[name] = Func(images[name])
    try:
        while todo:  # a wrapper's or an intermediate's entries wait until the directive making it ran
            ready = [name for name in todo if name in by_name]
            if not ready:
                raise CompileError(f"Schedule names Func {sorted(todo)[0]}, which is not in the pipeline")
            for name in ready:
                replay(by_name[name], todo.pop(name))
    except BaseException:
        for f, schedule in reversed(saved):
            f.set_schedule(schedule)
        raise


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
        from .var import RecordedLoopVar, RVar

        return RVar(a["var"]) if a["rvar"] else RecordedLoopVar(a["var"])
    return a


def _plain(value):
    """A log entry as JSON data: a LoopLevel (a handle, kept as such in the log so that set()
    reaches it) as what it is now."""
    if isinstance(value, LoopLevel):
        return value.to_json()
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def schedule_to_python(funcs) -> str:
    """Python source that applies the same schedule (paste it after the algorithm). A Func is
    written as a variable named as the Func was (`f` for a second Func("f"), named `f$1`)."""
    lines = []
    for f in funcs:
        name = _func_variable(f.name())
        for stage, method, args in f._schedule.log:
            args = _plain(args)
            target = name if stage == 0 else f"{name}.update({stage - 1})"
            if method == "symbolic_bound":
                lines.append(f"# {target}.bound({_source_arg(args[0])}, ...) over Exprs: not written as source")
                continue
            if method == "symbolic_split":
                lines.append(f"# {target}.split({_source_arg(args[0])}, ...) by an Expr: not written as source")
                continue
            if method == "symbolic_prefetch":
                lines.append(f"# {target}.prefetch({args[0]}, ...) of an input image or by an Expr: not written as "
                             "source")
                continue
            shown = [f"hl.Partition.{a}" if method == "partition" and k == 1 else
                     f"hl.PrefetchBoundStrategy.{a}" if method == "prefetch" and k == 4 else
                     "[" + ", ".join(f"({_source_arg(v)}, hl.LoopAlignStrategy.{s})" for v, s in a) + "]"
                     if method == "compute_with" and k == 1 else _source_arg(a) for k, a in enumerate(args)]
            lines.append(f"{target}.{method}({', '.join(shown)})")
    return "\n".join(lines) + ("\n" if lines else "")


def _func_variable(func_name: str) -> str:
    return func_name_family(func_name).replace("$", "_")


def _source_arg(a) -> str:
    if isinstance(a, list):
        return "[" + ", ".join(_source_arg(x) for x in a) + "]"
    if isinstance(a, dict) and "func" in a and len(a) == 1:
        return _func_variable(a["func"])
    if isinstance(a, dict) and a.get("loop_level"):
        lv = a["loop_level"]
        if lv["kind"] == "root":
            return "hl.LoopLevel.root()"
        if lv["kind"] == "inlined":
            return "hl.LoopLevel.inlined()"
        return f"hl.LoopLevel({_func_variable(lv['func'])}, hl.Var({lv['var']!r}), {lv['stage']})"
    if isinstance(a, dict) and "var" in a:
        return f"hl.{'RVar' if a.get('rvar') else 'Var'}({a['var']!r})"
    if isinstance(a, str) and a in TailStrategy.ALL:
        return f"hl.TailStrategy.{a}"
    if isinstance(a, str) and a in LoopAlignStrategy.ALL:
        return f"hl.LoopAlignStrategy.{a}"
    return repr(a)
