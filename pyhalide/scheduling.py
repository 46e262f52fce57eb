"""The scheduling directives of Funcs and Stages, with Halide 21's names and meanings.

Each directive checks its arguments against the stage's current loops, updates the schedule
data (schedule.py) and logs itself; errors name the Func, the stage, the dimension and the
numbers. `Func` schedules its pure definition; `f.update(i)` returns a Stage for update i.
"""

from __future__ import annotations

import contextlib

from . import ir, scatter_gather
from .errors import CompileError
from .expr import wrap
from .names import func_name_family
from .schedule import (
    EXTERN,
    GPU_BLOCK,
    GPU_LANE,
    GPU_THREAD,
    PARALLEL,
    SERIAL,
    UNROLLED,
    VECTORIZED,
    Dim,
    LoopAlignStrategy,
    LoopLevel,
    MemoryType,
    Partition,
    Prefetch,
    PrefetchBoundStrategy,
    Split,
    StageSchedule,
    TailStrategy,
)
from .target import DeviceAPI

INT32_MAX = 2**31 - 1


def _var_name(v) -> str:
    from .var import RDom

    if isinstance(v, str):
        return v
    if isinstance(v, RDom):
        v = v._as_expr()  # a one-dimensional RDom stands for its RVar
    name = getattr(v, "name", None)
    if callable(name):
        return name()
    raise CompileError(f"Expected a Var or RVar, got {v!r}")


def _is_rvar_arg(v) -> bool:
    from .var import RDom, RVar

    return isinstance(v, RVar | RDom)


def _check_var_kind(where: str, v, loop: str, loop_is_rvar: bool) -> None:
    """Halide's dim_match: a Var may not name an RVar's loop (a Var made with an RVar's name would
    otherwise pass for it, and permit schedules that are not legal for it), nor an RVar a pure
    Var's. (A name given as a string is taken as either, and so is one a schedule record replays.)"""
    from .var import RecordedLoopVar, Var

    given_rvar = _is_rvar_arg(v)
    if not (given_rvar or isinstance(v, Var)) or isinstance(v, RecordedLoopVar) or given_rvar == loop_is_rvar:
        return
    kind, loop_kind = ("RVar", "Var") if given_rvar else ("Var", "RVar")
    raise CompileError(f"{where}: {kind} {_var_name(v)} used in scheduling directive has the same name as existing "
                       f"{loop_kind} {loop}")


def _json_var(v) -> dict:
    return {"var": _var_name(v), "rvar": _is_rvar_arg(v)}


_BLEND_TAILS = (TailStrategy.RoundUpAndBlend, TailStrategy.ShiftInwardsAndBlend)


def _inner_loops(splits) -> set[str]:
    """The loops stemming from the inner loop of a split (Halide's inner_vars in Stage::split): its
    inner loop, the outer loop of a later split or the rename of one of those, a fuse with one."""
    inner: set[str] = set()
    for s in splits:
        if s.kind == "split":
            inner.add(s.inner)
            if s.old in inner:
                inner.add(s.outer)
        elif s.kind == "rename":
            if s.old in inner:
                inner.add(s.outer)
        elif s.old in inner or s.outer in inner:
            inner.add(s.inner)
    return inner


def _split_factor(where: str, what: str, value):
    """A split factor (or parallel task size): a positive int, or an integer expression of Params
    (Halide's: known when the pipeline runs, which checks that it is positive)."""
    from .expr import Expr

    if isinstance(value, Expr) and ir.const_int(value.ir()) is None:
        e = value.ir()
        if not (e.type.is_int() or e.type.is_uint()) or e.type.lanes != 1:
            raise CompileError(f"{where}: {what} must be an integer, got {value} ({e.type})")
        from .bounds import reads_other_than_params

        if reads_other_than_params(e):
            raise CompileError(f"{where}: {what} {value} may use only constants and Params (it is computed once, "
                               "before the loops)")
        return ir.Cast(ir.Int(32), e) if e.type != ir.Int(32) else e
    return _positive_int(where, what, value)


def _positive_int(where: str, what: str, value) -> int:
    from .expr import Expr

    if isinstance(value, Expr):
        c = ir.const_int(value.ir())
        if c is None:
            raise CompileError(f"{where}: {what} must be a constant integer, got {value}")
        value = c
    if not isinstance(value, int) or isinstance(value, bool):
        raise CompileError(f"{where}: {what} must be an integer, got {value!r}")
    if value <= 0:
        raise CompileError(f"{where}: {what} must be positive, got {value}")
    if value > INT32_MAX:
        raise CompileError(f"{where}: {what} {value} does not fit in 32 bits (loop arithmetic is 32-bit)")
    return value


class Schedulable:
    """Directive methods shared by Func (its pure stage) and Stage (an update)."""

    _stage_index = 0

    # ---- helpers
    def _target_func(self):
        raise NotImplementedError

    def _where(self) -> str:
        return f"In schedule for {self._target_func().name()}.s{self._stage_index}"

    def _stage(self) -> StageSchedule:
        f = self._target_func()
        f._require_defined()
        from .lowering.schedule_functions import stage_schedule

        return stage_schedule(f, self._stage_index, getattr(self, "_special", None))

    def _definition(self):
        """The definition this stage (or specialization) schedules: rfactor may have replaced it."""
        return self._target_func().definition_of(self._stage_index, self._stage())

    def _log(self, method: str, *args) -> None:
        f = self._target_func()
        if getattr(self, "_special", None) is None:
            f._schedule.log.append((self._stage_index, method, list(args)))
        f._version += 1

    @contextlib.contextmanager
    def _all_or_nothing(self):
        """A directive made of several steps is applied whole or, if a step is refused, not at all
        (so the schedule and its log, which replays it, stay the same)."""
        f = self._target_func()
        sched = self._stage()
        saved, n = sched.copy(), len(f._schedule.log)
        try:
            yield
        except CompileError:
            sched.dims, sched.splits = saved.dims, saved.splits
            del f._schedule.log[n:]
            raise

    def _dim(self, v, what: str) -> Dim:
        sched = self._stage()
        name = _var_name(v)
        d = sched.find(name)
        if d is None:
            loops = ", ".join(x.name for x in reversed(sched.dims)) or "none"
            raise CompileError(f"{self._where()}: {what} of unknown dimension {name} (the loops, outermost first, "
                               f"are: {loops})")
        _check_var_kind(self._where(), v, d.name, d.is_rvar)
        return d

    def _fresh(self, d: Dim, base: str) -> str:
        """A new loop name `base.k` for a loop split off d: the first k no loop of this stage has
        used, so the name depends only on the schedule (not on what else the process scheduled)."""
        sched = self._stage()
        taken = {x.name for x in sched.dims} | {n for sp in sched.splits for n in (sp.old, sp.outer, sp.inner)}
        k = 0
        while f"{base}.{k}" in taken or f"{d.internal}.{base}.{k}" in taken:
            k += 1
        return f"{base}.{k}"

    def _require_unique(self, name: str, what: str) -> None:
        if self._stage().find(name) is not None:
            raise CompileError(f"{self._where()}: {what} would create a second dimension named {name}")

    # ---- loop structure
    def split(self, old, outer, inner, factor, tail=TailStrategy.Auto):
        where = self._where()
        factor = _split_factor(f"{where}: split of {_var_name(old)}", "the split factor", factor)
        if tail not in TailStrategy.ALL:
            raise CompileError(f"{where}: unknown tail strategy {tail!r}")
        self._split(old, _var_name(outer), _var_name(inner), factor, tail)
        if isinstance(factor, int):
            self._log("split", _json_var(old), _json_var(outer), _json_var(inner), factor, tail)
        else:  # (an Expr: such a schedule can't be a record)
            self._log("symbolic_split", _json_var(old))
        return self

    def _split(self, old, outer: str, inner: str, factor: int, tail: str):
        sched = self._stage()
        d = self._dim(old, "split")
        if tail == TailStrategy.PredicateLoads and d.internal in _inner_loops(sched.splits):
            raise CompileError(f"{self._where()}: can't use TailStrategy PredicateLoads for splitting {d.name}: "
                               "PredicateLoads may not be used to split a loop stemming from the inner loop of a prior "
                               "split.")
        predicated = next((s for s in sched.splits if s.kind == "split" and s.inner == d.internal
                           and s.tail in (TailStrategy.PredicateLoads, TailStrategy.PredicateStores)), None)
        if predicated is not None:
            raise CompileError(f"{self._where()}: cannot split {d.name}: it is the inner loop of a split using "
                               f"TailStrategy {predicated.tail}, and a loop variable resulting from such a split may "
                               "not be split again.")
        if d.is_rvar and tail == TailStrategy.RoundUp:
            raise CompileError(f"{self._where()}: can't split RVar {d.name} with TailStrategy RoundUp: it would "
                               "change the reduction domain. Use GuardWithIf.")
        if d.is_rvar and tail == TailStrategy.ShiftInwards:
            raise CompileError(f"{self._where()}: can't split RVar {d.name} with TailStrategy ShiftInwards: it "
                               "would apply some updates twice. Use GuardWithIf.")
        if outer == inner:
            raise CompileError(f"{self._where()}: split of {d.name} needs two different names, got {outer} twice")
        for n in (outer, inner):
            if n != d.name:
                self._require_unique(n, f"split of {d.name}")
        i = sched.index(d.name)
        # (as Halide: an extern stage's dimension split leaves its inner part to the C function)
        inner_dim = Dim(inner, f"{d.internal}.{inner}", EXTERN if d.for_type == EXTERN else SERIAL, d.is_rvar)
        outer_dim = Dim(outer, f"{d.internal}.{outer}", d.for_type if d.for_type == PARALLEL else SERIAL,
                        d.is_rvar, d.task_size)
        sched.dims[i : i + 1] = [inner_dim, outer_dim]
        sched.splits.append(Split("split", d.internal, outer_dim.internal, inner_dim.internal, factor, tail))
        if tail in _BLEND_TAILS:
            try:
                self._check_blend_races()
            except CompileError:
                sched.dims[i : i + 2] = [d]
                sched.splits.pop()
                raise
        return outer_dim, inner_dim

    def _check_blend_races(self) -> None:
        """Halide's check_for_race_conditions_in_split_with_blend: a split with a blending tail
        (RoundUpAndBlend, ShiftInwardsAndBlend) loads and stores back values past its slice, which
        other iterations compute: no loop stemming from the same original Var or RVar may then run
        in parallel (parallel, GPU blocks or threads), unless the stage allows race conditions."""
        sched = self._stage()
        if sched.allow_race_conditions:
            return
        parallel = {d.internal for d in sched.dims if d.for_type in (PARALLEL, GPU_BLOCK, GPU_THREAD)}
        # up from the parallel loops to the original dimensions they stem from...
        for s in reversed(sched.splits):
            if s.kind == "fuse":
                if s.inner in parallel:  # (both halves: Halide's takes the inner one alone)
                    parallel |= {s.old, s.outer}
            elif s.kind == "rename":
                if s.outer in parallel:
                    parallel.add(s.old)
            elif s.inner in parallel or s.outer in parallel:
                parallel.add(s.old)
        # ...and down again: none of their splits' inner sides may blend
        for s in sched.splits:
            if s.kind == "fuse":
                if s.old in parallel or s.outer in parallel:
                    parallel.add(s.inner)
            elif s.kind == "rename":
                if s.old in parallel:
                    parallel.add(s.outer)
            elif s.old in parallel:
                parallel |= {s.inner, s.old}
                if s.tail in _BLEND_TAILS:
                    raise CompileError(
                        f"{self._where()}: tail strategy {s.tail} may not be used to split {s.old} because other loops "
                        "stemming from the same original Var or RVar are marked as parallel: this could cause a race "
                        "condition (each blend loads and stores back values another thread computes). Call "
                        ".allow_race_conditions() on the stage to accept it.")

    def fuse(self, inner, outer, fused):
        sched = self._stage()
        di, do = self._dim(inner, "fuse"), self._dim(outer, "fuse")
        if di is do:
            raise CompileError(f"{self._where()}: can't fuse {di.name} with itself")
        name = _var_name(fused)
        if name not in (di.name, do.name):
            self._require_unique(name, "fuse")
        # as in Halide, the fused loop takes the inner loop's place and its loop kind (checked again:
        # a parallel or vectorized loop fused with an RVar may race)
        for_type = SERIAL if di.for_type == EXTERN and do.for_type != EXTERN else di.for_type
        fused_dim = Dim(name, f"{di.internal}.{name}", for_type, di.is_rvar or do.is_rvar,
                        di.task_size, di.partition)  # Halide's name
        with self._all_or_nothing():
            sched.dims.remove(do)
            sched.dims[sched.dims.index(di)] = fused_dim
            sched.splits.append(Split("fuse", di.internal, do.internal, fused_dim.internal))
            if for_type in (PARALLEL, VECTORIZED):
                self._check_loop_kind(fused_dim, for_type, "parallelize" if for_type == PARALLEL else "vectorize")
            self._log("fuse", _json_var(inner), _json_var(outer), _json_var(fused))
        return self

    def rename(self, old, new):
        sched = self._stage()
        d = self._dim(old, "rename")
        name = _var_name(new)
        self._require_unique(name, f"rename of {d.name}")
        renamed = Dim(name, f"{d.internal}.{name}.renamed", d.for_type, d.is_rvar, d.task_size)
        sched.dims[sched.index(d.name)] = renamed
        sched.splits.append(Split("rename", d.internal, renamed.internal))
        self._log("rename", _json_var(old), _json_var(new))
        return self

    def reorder(self, *vars):
        if len(vars) == 1 and isinstance(vars[0], list | tuple):
            vars = tuple(vars[0])
        sched = self._stage()
        dims = [self._dim(v, "reorder") for v in vars]
        if len({id(d) for d in dims}) != len(dims):
            raise CompileError(f"{self._where()}: reorder names a dimension twice")
        positions = sorted(sched.dims.index(d) for d in dims)
        new = list(sched.dims)
        for pos, d in zip(positions, dims):
            new[pos] = d
        self._check_reorder_legal(sched.dims, new)
        sched.dims = new
        self._log("reorder", *[_json_var(v) for v in vars])
        return self

    def _check_reorder_legal(self, old: list[Dim], new: list[Dim]) -> None:
        """RVars keep their relative order unless the update is an associative reduction (an argmin
        among them, as in Halide, though reordering may change which of equal extrema it picks);
        pure Vars may cross RVars only where the update reads its own Func at the same pure
        coordinates."""
        if self._stage_index == 0:
            return
        f = self._target_func()
        from .lowering.legality import pure_var_crossing_is_safe

        if self._changes_rvar_order(old, new) and not (self._stage().allow_race_conditions or
                                                       self._iterations_commute()):
            raise CompileError(
                f"{self._where()}: can't reorder RVars {', '.join(d.name for d in old if d.is_rvar)} because it may "
                "change the meaning of the algorithm (the update is not an associative reduction)")

        def rank(dims):
            return {d.internal: i for i, d in enumerate(dims)}

        ro, rn = rank(old), rank(new)
        for p in (d for d in old if not d.is_rvar):
            root = p.internal.split(".")[0]  # the pure Var this (possibly split) loop iterates
            for r in (d for d in old if d.is_rvar):
                if (ro[p.internal] < ro[r.internal]) != (rn[p.internal] < rn[r.internal]):
                    if root in f._pure_args and not pure_var_crossing_is_safe(f, self._stage_index, root,
                                                                              self._definition()):
                        raise CompileError(
                            f"{self._where()}: can't reorder pure Var {p.name} across RVar {r.name}: the update "
                            f"reads {f.name()} at other values of {p.name}, so the order matters")

    def _iterations_commute(self) -> bool:
        """Halide's test before RVar loops are reordered or run at once: the update is an
        associative reduction, or writes a value that neither reads f nor uses an RVar, or the
        user said so (atomic(override_associativity_test=True))."""
        from .lowering.legality import prove_associativity, writes_what_no_iteration_changes

        f, s, d = self._target_func(), self._stage_index, self._definition()
        return (self._stage().atomic_unchecked or writes_what_no_iteration_changes(f, s, d)
                or prove_associativity(f, s, d) is not None)

    def _changes_rvar_order(self, old: list[Dim], new: list[Dim]) -> bool:
        """Whether going from loops `old` to `new` (innermost first) changes the order in which the
        update visits its RVars (the loops of race-free RVars aside, as in Halide)."""
        impure = {d.internal for d in old if d.is_rvar and not self._is_pure_rvar_loop(d)}
        return [d.internal for d in old if d.internal in impure] != [d.internal for d in new if d.internal in impure]

    def tile(self, *args, tail=TailStrategy.Auto):
        """tile(x, y, xo, yo, xi, yi, xf, yf[, tail]) or tile(x, y, xi, yi, xf, yf[, tail]);
        the 3-D forms take three of each; or Halide's list forms tile([x, y, ...], [xo, yo, ...],
        [xi, yi, ...], [xf, yf, ...][, tail]) and tile([x, y, ...], [xi, yi, ...], [xf, yf, ...][, tail])."""
        args = list(args)
        if args and isinstance(args[-1], str) and args[-1] in TailStrategy.ALL:
            tail = args.pop()
        if args and all(isinstance(a, list | tuple) for a in args) and len(args) in (3, 4):
            lists = [list(a) for a in args]
            if len({len(a) for a in lists}) != 1 or not lists[0]:
                raise CompileError(f"{self._where()}: the lists passed to tile must all have the same, non-zero "
                                   f"length; got lengths {[len(a) for a in lists]}")
            vs, factors = lists[0], lists[-1]
            outs, ins = (lists[1], lists[2]) if len(lists) == 4 else (vs, lists[1])
            with self._all_or_nothing():
                for v, o, i, fct in zip(vs, outs, ins, factors):
                    self.split(v, o, i, fct, tail)
                self.reorder(*ins, *outs)
            return self
        n = 3 if len(args) in (9, 12) else 2
        if len(args) == 4 * n:
            vs, outs, ins, factors = args[:n], args[n : 2 * n], args[2 * n : 3 * n], args[3 * n :]
        elif len(args) == 3 * n:
            vs, ins, factors = args[:n], args[n : 2 * n], args[2 * n :]
            outs = vs
        else:
            raise CompileError(f"{self._where()}: tile takes (x, y, xo, yo, xi, yi, xf, yf) or (x, y, xi, yi, xf, "
                               f"yf), their 3-D forms, or lists of each, got {len(args)} arguments")
        with self._all_or_nothing():
            for v, o, i, fct in zip(vs, outs, ins, factors):
                self.split(v, o, i, fct, tail)
            self.reorder(*ins, *outs)
        return self

    # ---- loop partitioning (values never change; the policy is recorded per loop for lowering)
    def partition(self, var, partition_policy):
        """Halide's partition(var, policy): whether this loop may be split into a prologue, a steady
        state without boundary checks, and an epilogue (hl.Partition.Auto, Never or Always)."""
        if not isinstance(partition_policy, str) or partition_policy not in Partition.ALL:
            raise CompileError(f"{self._where()}: partition of {_var_name(var)}: unknown loop partition policy "
                               f"{partition_policy!r} (one of {', '.join(Partition.ALL)})")
        self._dim(var, "partition").partition = partition_policy
        self._log("partition", _json_var(var), partition_policy)
        return self

    def never_partition(self, *vars):
        """partition(v, hl.Partition.Never) for each loop given (a list, or several arguments)."""
        return self._partition_each(vars, Partition.Never)

    def always_partition(self, *vars):
        """partition(v, hl.Partition.Always) for each loop given (a list, or several arguments)."""
        return self._partition_each(vars, Partition.Always)

    def _partition_each(self, vars, policy: str):
        if len(vars) == 1 and isinstance(vars[0], list | tuple):
            vars = tuple(vars[0])
        with self._all_or_nothing():
            for v in vars:
                self.partition(v, policy)
        return self

    def never_partition_all(self):
        """Every loop of this stage (as they are now) gets hl.Partition.Never."""
        return self._partition_all("never_partition_all", Partition.Never)

    def always_partition_all(self):
        """Every loop of this stage (as they are now) gets hl.Partition.Always."""
        return self._partition_all("always_partition_all", Partition.Always)

    def _partition_all(self, method: str, policy: str):
        for d in self._stage().dims:
            d.partition = policy
        self._log(method)
        return self

    def split_vars(self) -> list:
        """The loop variables of this stage now, innermost first, ending with Var.outermost() (as
        Halide's split_vars): Vars, and for an update's reduction loops RVars."""
        from .var import RVar, Var

        loops = [RVar(d.name) if d.is_rvar else Var(d.name) for d in self._stage().dims]
        return [*loops, Var.outermost()]

    # ---- loop kinds
    def _set_for_type(self, v, for_type: str, what: str):
        d = self._dim(v, what)
        self._check_loop_kind(d, for_type, what)
        before, d.for_type = d.for_type, for_type
        if for_type == PARALLEL:
            try:
                self._check_blend_races()
            except CompileError:
                d.for_type = before
                raise
        return d

    def _loop_origins(self, internal: str) -> list[str]:
        """The stage's original loops that loop `internal` was made from by splits, fuses and renames."""
        for s in reversed(self._stage().splits):
            if s.kind == "split" and internal in (s.outer, s.inner) or s.kind == "rename" and internal == s.outer:
                return self._loop_origins(s.old)
            if s.kind == "fuse" and internal == s.inner:
                return self._loop_origins(s.old) + self._loop_origins(s.outer)
        return [internal]

    def _is_pure_rvar_loop(self, d: Dim) -> bool:
        """Whether every RVar loop d was made from is race free (Halide's PureRVar, which its splits
        and fuses inherit): d's iterations may then run in any order, or at once."""
        from .lowering.legality import rvar_loop_is_race_free

        f, definition = self._target_func(), self._definition()
        rvars = {rv.name for rv in definition.rvars}
        return all(rvar_loop_is_race_free(f, self._stage_index, n, definition)
                   for n in self._loop_origins(d.internal) if n in rvars)

    def _check_loop_kind(self, d: Dim, for_type: str, what: str) -> None:
        if d.is_rvar and for_type in (PARALLEL, VECTORIZED):
            sched = self._stage()
            f = self._target_func()
            if sched.allow_race_conditions or self._is_pure_rvar_loop(d):
                return
            if not sched.atomic:
                raise CompileError(
                    f"{self._where()}: can't {what} RVar {d.name}: different iterations may write the same element "
                    f"of {f.name()} (a race). Call .atomic() or .allow_race_conditions() on the stage, or use rfactor.")
            if not self._iterations_commute():
                raise CompileError(
                    f"{self._where()}: can't {what} RVar {d.name} of an atomic() update that is not an associative, "
                    f"commutative reduction: the order the iterations update an element of {f.name()} in would "
                    "change the result. Pass atomic(override_associativity_test=True) if it does not.")

    def _loop_kind(self, method: str, for_type: str, what: str, v, factor, tail, noun: str, mark_inner: bool):
        """vectorize / unroll / parallel: mark v, or split v by factor and mark the inner loop
        (vectorize, unroll) or the outer one (parallel with a task size)."""
        if factor is None:
            self._set_for_type(v, for_type, what)
            self._log(method, _json_var(v))
            return self
        where = f"{self._where()}: {method} of {_var_name(v)}"
        factor = _split_factor(where, noun, factor) if for_type == PARALLEL else _positive_int(where, noun, factor)
        d = self._dim(v, what)
        self._check_loop_kind(d, for_type, what)  # before splitting: the error names v, and nothing changes
        with self._all_or_nothing():
            inner = self._fresh(d, f"{d.name}.{method[0]}")
            self._split(v, d.name, inner, factor, tail)
            self._set_for_type(inner if mark_inner else d.name, for_type, what)
            if isinstance(factor, int):
                self._log(method, _json_var(v), factor, tail)
            else:
                self._log("symbolic_split", _json_var(v))
        return self

    def vectorize(self, v, factor=None, tail=TailStrategy.Auto):
        return self._loop_kind("vectorize", VECTORIZED, "vectorize", v, factor, tail, "the vector width", True)

    def unroll(self, v, factor=None, tail=TailStrategy.Auto):
        return self._loop_kind("unroll", UNROLLED, "unroll", v, factor, tail, "the unroll factor", True)

    def parallel(self, v, task_size=None, tail=TailStrategy.Auto):
        return self._loop_kind("parallel", PARALLEL, "parallelize", v, task_size, tail, "the task size", False)

    def _gpu_loops(self, method: str, for_type: str, vars, most: int):
        """gpu_blocks / gpu_threads / gpu_lanes: mark loops as the grid, block or warp-lane
        dimensions of a GPU kernel, innermost (x) first. A CPU target refuses them at lowering."""
        if not 1 <= len(vars) <= most:
            raise CompileError(f"{self._where()}: {method} takes 1 to {most} loops, got {len(vars)}")
        dims = [self._dim(v, method) for v in vars]
        if len({id(d) for d in dims}) != len(dims):
            raise CompileError(f"{self._where()}: {method} names a loop twice")
        for d in dims:
            self._check_loop_kind(d, PARALLEL, method)  # GPU loops run in parallel: the same race rules
        before = [d.for_type for d in dims]
        for d in dims:
            d.for_type = for_type
        try:
            self._check_blend_races()
        except CompileError:
            for d, t in zip(dims, before, strict=True):
                d.for_type = t
            raise
        self._log(method, *[_json_var(v) for v in vars])
        return self

    def _device_api(self, method: str, args: tuple, device_api):
        """The loops and factors of a GPU directive, its trailing positional DeviceAPI removed;
        the API must be one pyhalide runs (CUDA, or Default_GPU, which is CUDA here)."""
        if args and isinstance(args[-1], DeviceAPI):
            device_api, args = args[-1], args[:-1]
        if device_api not in (None, DeviceAPI.CUDA, DeviceAPI.Default_GPU):
            raise CompileError(f"{self._where()}: {method} on {device_api}: pyhalide's only GPU device API is CUDA")
        return args

    def gpu_tile(self, *args, tail=TailStrategy.Auto, device_api=None):
        """gpu_tile(x, bx, tx, xf), gpu_tile(x, y, bx, by, tx, ty, xf, yf), the 3-D form, or any of
        them without the block Vars (x, tx, xf: the outer loop keeps x's name), then a tail
        strategy and a device API: split (or tile) the loops, the outer ones GPU blocks, the inner
        ones GPU threads."""
        args = list(self._device_api("gpu_tile", args, device_api))
        if args and isinstance(args[-1], str) and args[-1] in TailStrategy.ALL:
            tail = args.pop()
        shapes = {4: (1, True), 8: (2, True), 12: (3, True), 3: (1, False), 6: (2, False), 9: (3, False)}
        if len(args) not in shapes:
            raise CompileError(f"{self._where()}: gpu_tile takes (x, bx, tx, xf), (x, y, bx, by, tx, ty, xf, yf), "
                               f"their 3-D form, or those without the block Vars; got {len(args)} arguments")
        n, with_blocks = shapes[len(args)]
        vs = args[:n]
        outs = args[n : 2 * n] if with_blocks else vs
        ins = args[2 * n : 3 * n] if with_blocks else args[n : 2 * n]
        factors = args[-n:]
        with self._all_or_nothing():
            if n == 1:
                self.split(vs[0], outs[0], ins[0], factors[0], tail)
            else:
                self.tile(*vs, *outs, *ins, *factors, tail)
            self.gpu_blocks(*outs)
            self.gpu_threads(*ins)
        return self

    def gpu_blocks(self, *vars, device_api=None):
        return self._gpu_loops("gpu_blocks", GPU_BLOCK, self._device_api("gpu_blocks", vars, device_api), 3)

    def gpu_threads(self, *vars, device_api=None):
        return self._gpu_loops("gpu_threads", GPU_THREAD, self._device_api("gpu_threads", vars, device_api), 3)

    def gpu_lanes(self, v, device_api=None):
        self._device_api("gpu_lanes", (), device_api)
        return self._gpu_loops("gpu_lanes", GPU_LANE, (v,), 1)

    def gpu(self, *vars, device_api=None):
        """gpu(bx, tx), gpu(bx, by, tx, ty) or gpu(bx, by, bz, tx, ty, tz): blocks, then threads."""
        vars = self._device_api("gpu", vars, device_api)
        if len(vars) not in (2, 4, 6):
            raise CompileError(f"{self._where()}: gpu takes 2, 4 or 6 loops (block loops, then thread loops), "
                               f"got {len(vars)}")
        n = len(vars) // 2
        with self._all_or_nothing():
            self.gpu_blocks(*vars[:n])
            self.gpu_threads(*vars[n:])
        return self

    def gpu_single_thread(self, device_api=None):
        """Run the whole stage as one GPU thread: slow, but it keeps a small update on the device
        instead of copying its Func back to the host."""
        self._device_api("gpu_single_thread", (), device_api)
        self._target_func()._require_defined()
        self._stage().gpu_single_thread = True
        self._log("gpu_single_thread")
        return self

    def serial(self, v):
        self._dim(v, "serial").for_type = SERIAL
        self._log("serial", _json_var(v))
        return self

    def atomic(self, override_associativity_test: bool = False):
        f = self._target_func()
        f._require_defined()
        self._stage().atomic = True
        self._stage().atomic_unchecked = bool(override_associativity_test)
        self._log("atomic", override_associativity_test)
        return self

    def rfactor(self, *args):
        """rfactor(rvar, var) or rfactor([(rvar, var), ...]); returns the intermediate Func."""
        pairs = [tuple(args)] if len(args) == 2 and not isinstance(args[0], list | tuple) else list(args[0])
        return rfactor(self, pairs)

    def specialize(self, condition):
        """A copy of this stage's schedule used when `condition` holds at run time; schedule it
        further through the returned Stage (e.g. vectorize only when the width allows it). Asked
        again with an equal condition, the same specialization."""
        from .expr import to_ir
        from .func import Stage

        cond = to_ir(condition)
        if not cond.type.is_bool() or cond.type.lanes != 1:
            raise CompileError(f"{self._where()}: specialize condition has type {cond.type}, not bool")
        scatter_gather.refuse(cond, f"the specialize() condition of {self._where()}")
        sched = self._stage()
        # The same condition again schedules the same specialization further, as in Halide.
        special = next((s for c, s in sched.specializations if c == cond), None)
        if special is None:
            if sched.fail_message:
                raise CompileError(f"{self._where()}: Cannot add new specializations after specialize_fail().")
            special = sched.copy()
            special.specializations, special.fail_message = [], ""  # the loops and splits only
            sched.specializations = sched.specializations + [(cond, special)]
        f = self._target_func()
        f._schedule.log.append((self._stage_index, "specialize", [str(condition)]))
        f._version += 1
        stage = Stage(f, self._stage_index)
        stage._special = special
        return stage

    def specialize_fail(self, message: str) -> None:
        """Where none of this stage's specializations' conditions holds, the pipeline fails with
        `message` instead of running the stage's own schedule (no specialization may follow)."""
        if not isinstance(message, str) or not message:
            raise CompileError(f"{self._where()}: Argument passed to specialize_fail() must not be empty.")
        sched = self._stage()
        if sched.fail_message:
            raise CompileError(f"{self._where()}: Only one specialize_fail() may be defined per Stage.")
        sched.fail_message = message
        f = self._target_func()
        f._schedule.log.append((self._stage_index, "specialize_fail", [message]))
        f._version += 1

    def compute_with(self, *args, **kwargs):
        """Fuse this stage's loops, from the outermost down to a Var, with another stage's
        (Halide's compute_with): `(stage or Func, var, align)` or `(LoopLevel, align)`, align a
        LoopAlignStrategy or a list of (var, strategy). This stage runs after the other in each
        iteration of the shared loops; the two must not depend on each other (checked when
        lowering, with the loops' names, kinds and the compute levels)."""
        from .extern import is_extern
        from .func import Stage

        where = f"{self._target_func().name()}.compute_with"
        if is_extern(self._target_func()):
            raise CompileError(f"compute_with() on extern Func {self._target_func().name()} is not allowed")
        align = kwargs.pop("align", LoopAlignStrategy.Auto)
        if kwargs:
            raise CompileError(f"{where}: unexpected keyword arguments {sorted(kwargs)}")
        if args and isinstance(args[0], LoopLevel):
            level, rest = args[0], args[1:]
        elif len(args) >= 2 and (isinstance(args[0], Stage) or hasattr(args[0], "_schedule")):
            other, rest = args[0], args[2:]
            func, stage = (other._func, other._stage_index) if isinstance(other, Stage) else (other, 0)
            level = LoopLevel(func, _var_name(args[1]), stage)
        else:
            raise CompileError(f"{where} takes (stage, var[, align]) or (loop_level[, align])")
        if len(rest) > 1:
            raise CompileError(f"{where}: too many arguments")
        if rest:
            align = rest[0]
        if level.kind != "at":
            raise CompileError(f"{where}: Undefined loop level to compute with ({level})")
        if len(args) >= 2 and not isinstance(args[0], LoopLevel) and is_extern(func):
            raise CompileError(f"{where}: {func.name()} is an extern stage; it has no loops to compute with")
        f = self._target_func()
        if level.func_name == f.name():
            raise CompileError(f"Cannot schedule {f.name()}.s{self._stage_index} to be computed with "
                               f"{level.func_name}.s{level.stage_index}.{level.var_name}")
        if getattr(self, "_special", None) is not None:
            raise CompileError(f"{where}: compute_with can't be used within a specialization; Func {f.name()} is "
                               "scheduled to be computed with another, so it must not have any specializations")
        sched = self._stage()
        if sched.specializations:
            raise CompileError(f"Func {f.name()} is scheduled to be computed with {level.func_name}, so it must not "
                               "have any specializations.")
        if isinstance(align, list | tuple):
            pairs = [(_var_name(v), s) for v, s in align]
        else:
            pairs = [(level.var_name, align)]
        for _, strategy in pairs:
            if strategy not in LoopAlignStrategy.ALL:
                raise CompileError(f"{where}: {strategy!r} is not a LoopAlignStrategy")
        if sched.fuse_level is not None:
            print(f"Warning: {f.name()}.s{self._stage_index} already has a compute_with at {sched.fuse_level}. "
                  f"Replacing it with a new compute_with at {level}")
        sched.fuse_level, sched.fuse_align = level, dict(pairs)
        self._log("compute_with", {"loop_level": level.to_json()},
                  [[{"var": v, "rvar": False}, s] for v, s in pairs])
        return self

    def prefetch(self, func, at, *args, **kwargs):
        """prefetch(func, at, from, offset=1, strategy=GuardWithIf): at the top of each iteration
        of loop `at`, fetch into the cache what `func` (a Func, an ImageParam or a Buffer the
        algorithm reads) holds where
        iteration `from + offset` of loop `from` (at or outside `at`) will read or write it
        (Halide's prefetch: a hint, the values computed are the same)."""
        from .expr import to_ir
        from .param import ImageParam

        names = ("from", "offset", "strategy")
        given = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names or k in given:
                raise CompileError(f"{self._where()}: prefetch got an unexpected or repeated argument {k!r}")
            given[k] = v
        if "from" not in given:
            raise CompileError(f"{self._where()}: prefetch(func, at, from, offset=1, strategy) needs `from`")
        offset, strategy = given.get("offset", 1), given.get("strategy", PrefetchBoundStrategy.GuardWithIf)
        if strategy not in PrefetchBoundStrategy.ALL:
            raise CompileError(f"{self._where()}: {strategy!r} is not a PrefetchBoundStrategy")
        from .buffer import Buffer

        image = isinstance(func, ImageParam | Buffer)
        if isinstance(func, ImageParam):
            func._require_defined()
        if not (image or hasattr(func, "_schedule")):
            raise CompileError(f"{self._where()}: prefetch takes a Func, an ImageParam or a Buffer, got {func!r}")
        name = func.name()
        at_dim, from_dim = self._dim(at, "prefetch at"), self._dim(given["from"], "prefetch from")
        sched = self._stage()
        if sched.index(from_dim.name) < sched.index(at_dim.name):
            raise CompileError(f"{self._where()}: prefetch at {at_dim.name} from {from_dim.name}: the loop "
                               f"{from_dim.name} must be {at_dim.name} or outside it")
        c = ir.const_int(to_ir(offset))
        if c is None:
            raise CompileError(f"{self._where()}: the prefetch offset must be a constant integer, got {offset}")
        sched.prefetches = [*sched.prefetches, Prefetch(name, at_dim.name, from_dim.name, c, strategy)]
        if image:
            self._log("symbolic_prefetch", name)
        else:
            self._log("prefetch", {"func": name}, _json_var(at), _json_var(given["from"]), c, strategy)
        return self

    def allow_race_conditions(self):
        self._stage().allow_race_conditions = True
        self._log("allow_race_conditions")
        return self


class FuncScheduling(Schedulable):
    """Directives that apply to a whole Func: placement and storage."""

    def _target_func(self):
        return self

    def _loop_level(self, args, what: str) -> LoopLevel:
        if len(args) == 1 and isinstance(args[0], LoopLevel):
            return args[0]
        if len(args) in (2, 3):
            f, v = args[0], args[1]
            if not hasattr(f, "_schedule"):
                raise CompileError(f"Func {self.name()}.{what}: first argument must be a Func, got {f!r}")
            stage = args[2] if len(args) == 3 else -1
            return LoopLevel(f, _var_name(v), stage)
        raise CompileError(f"Func {self.name()}.{what} takes (func, var) or a LoopLevel")

    def compute_at(self, *args):
        level = self._loop_level(args, "compute_at")
        if level.kind == "at" and level.func_name == self.name():
            raise CompileError(f"Func {self.name()} can't be computed at a loop of itself")
        self._schedule.compute_level = level.placing(self)
        self._schedule.compute_placed = True
        self._log("compute_at", {"loop_level": level})
        return self

    def store_at(self, *args):
        level = self._loop_level(args, "store_at")
        self._schedule.store_level = level.placing(self)
        self._log("store_at", {"loop_level": level})
        return self

    def compute_root(self):
        return self.compute_at(LoopLevel.root())

    def store_root(self):
        return self.store_at(LoopLevel.root())

    def compute_inline(self):
        return self.compute_at(LoopLevel.inlined())

    def _pure_var(self, method: str, var) -> str:
        """The name of var, which a bound or storage directive must give as one of the Func's pure Vars."""
        self._require_defined()
        name = _var_name(var)
        if name not in self._pure_args:
            raise CompileError(f"Func {self.name()}.{method}: {name} is not a pure Var of {self.name()} "
                               f"(its Vars are {', '.join(self._pure_args)})")
        return name

    def bound(self, v, min, extent):
        name = self._pure_var("bound", v)
        from .expr import to_ir

        ext = to_ir(extent)
        c = ir.const_int(ext)
        if c is not None and c < 0:
            raise CompileError(f"Func {self.name()}.bound: extent of {name} must be non-negative, got {c}")
        lo = to_ir(min)
        for e in (lo, ext):
            scatter_gather.refuse(e, f"Func {self.name()}.bound of {name}")
        self._schedule.bounds[name] = ("bound", lo, ext)
        self._log_bound("bound", v, lo, ext)
        return self

    def _log_bound(self, method: str, v, *args: ir.Expr) -> None:
        """A bound whose Exprs are constants is logged as ints; one over Params or buffer sizes
        (`bound(x, 0, input.width())`) is logged as symbolic: such a schedule can't be a record."""
        values = [ir.const_int(a) for a in args]
        if any(c is None for c in values):
            self._log("symbolic_bound", _json_var(v))
        else:
            self._log(method, _json_var(v), *values)

    def bound_extent(self, v, extent):
        name = self._pure_var("bound_extent", v)
        from .expr import to_ir

        ext = to_ir(extent)
        scatter_gather.refuse(ext, f"Func {self.name()}.bound_extent of {name}")
        self._schedule.bounds[name] = ("bound_extent", None, ext)
        self._log_bound("bound_extent", v, ext)
        return self

    def align_bounds(self, v, modulus, remainder=0):
        name = self._pure_var("align_bounds", v)
        modulus = _positive_int(f"Func {self.name()}.align_bounds of {name}", "the modulus", modulus)
        self._schedule.bounds[name] = ("align", modulus, int(remainder))
        self._log("align_bounds", _json_var(v), modulus, int(remainder))
        return self

    def align_extent(self, v, modulus):
        """Compute a region whose extent in v is a multiple of modulus, from the same min."""
        name = self._pure_var("align_extent", v)
        modulus = _positive_int(f"Func {self.name()}.align_extent of {name}", "the modulus", modulus)
        self._schedule.bounds[name] = ("align_extent", modulus, None)
        self._log("align_extent", _json_var(v), modulus)
        return self

    def in_(self, consumers=None):
        """A wrapper Func that stands between this Func and its consumers (all of them, or those
        given), so the wrapper can be scheduled on its own: `f.in_(g).compute_at(g, x)`. Recorded
        as schedule data: the consumers' definitions are not changed, lowering redirects the calls
        on its own copy of the graph."""
        self._require_defined()
        wrappers = self._schedule.wrappers
        if consumers is None:
            if "" not in wrappers:
                wrappers[""] = _make_wrapper(self, f"{func_name_family(self.name())}_global_wrapper")
            self._log("in_")
            return wrappers[""]
        return self._stand_in("in_", consumers, lambda name: _make_wrapper(self, name), "in")

    def clone_in(self, consumers):
        """A copy of this Func (its definitions, a schedule of its own) that the given consumers
        call instead of it, so it can be scheduled for them alone: `f.clone_in(g).compute_root()`."""
        self._require_defined()
        return self._stand_in("clone_in", consumers, lambda name: _make_clone(self, name), "clone_in")

    def _stand_in(self, method: str, consumers, make, infix: str):
        """The Func (made by `make(name)`) that the given consumers call instead of this one, for
        in_ and clone_in; asked again for the same consumers, the same Func, as in Halide."""
        if not isinstance(consumers, list | tuple):
            consumers = [consumers]
        for g in consumers:
            if not hasattr(g, "_schedule") or g is self:
                raise CompileError(f"Func {self.name()}.{method}: consumers must be other Funcs, got {g!r}")
            if g.defined():  # (one defined later is checked when a pipeline using it is lowered, as in Halide)
                check_wrapped_consumer(self, g, method)
        wrappers = self._schedule.wrappers
        stand_in = existing_wrapper(self.name(), wrappers, [g.name() for g in consumers])
        if stand_in is None:
            # named from the names given, so a fresh process names it alike
            stand_in = make(f"{func_name_family(self.name())}_{infix}_"
                            f"{'_'.join(func_name_family(g.name()) for g in consumers)}")
            for g in consumers:
                wrappers[g.name()] = stand_in
        self._log(method, [{"func": g.name()} for g in consumers])
        return stand_in

    def copy_to_device(self, device_api=DeviceAPI.Default_GPU):
        """Halide's copy_to_device: this Func, a plain copy of another Func or image (what in_()
        makes), is a buffer copy whose result kernels read. As Halide's buffer copy it is
        computed (at root unless placed), never inlined; pyhalide copies on the host, and the
        pipeline moves the data between host and device as the stages around it need: the same
        values."""
        if device_api not in (DeviceAPI.CUDA, DeviceAPI.Default_GPU, DeviceAPI.Host):
            raise CompileError(f"Func {self.name()}.copy_to_device({device_api}): pyhalide's only GPU device API "
                               "is CUDA")
        return self._buffer_copy("copy_to_device" if device_api != DeviceAPI.Host else "copy_to_host")

    def copy_to_host(self):
        """Halide's copy_to_host: this Func, a plain copy of another (what in_() makes), is a
        buffer copy to the host; computed as copy_to_device's, its result is on the host."""
        return self._buffer_copy("copy_to_host")

    def _buffer_copy(self, method: str):
        """Check, as Halide does, that this Func can be a buffer copy, and make it one."""
        if not self.defined():
            raise CompileError(f"{method} on Func {self.name()} with no definition")
        if self.outputs() != 1:
            raise CompileError(f"{method} on a Tuple-valued Func {self.name()} not yet supported")
        if self.has_update_definition():
            raise CompileError(f"{method} on Func {self.name()} with update definition")
        value = self.definitions()[0].values[0]
        if not (isinstance(value, ir.Call) and value.call_type in (ir.HALIDE, ir.IMAGE)
                and [getattr(a, "name", None) for a in value.args] == list(self._pure_args)
                and all(isinstance(a, ir.Variable) for a in value.args)):
            raise CompileError(f"Func {self.name()} is scheduled as {method}, but has value: {wrap(value)}. Expected "
                               "a single call to another Func with matching dimensionality and argument order.")
        self._schedule.buffer_copy = True
        self._log(method)
        return self

    def store_in(self, memory_type):
        """Where this Func's storage lives (hl.MemoryType); the target must support it."""
        if not isinstance(memory_type, str) or memory_type not in MemoryType.ALL:
            raise CompileError(f"Func {self.name()}.store_in: unknown memory type {memory_type!r} (one of "
                               f"{', '.join(MemoryType.ALL)})")
        self._schedule.memory_type = memory_type
        self._log("store_in", memory_type)
        return self

    def fold_storage(self, var, extent, fold_forward=True):
        """Keep only `extent` coordinates of var's dimension, reused circularly, as Halide's
        fold_storage. pyhalide folds where this Func slides along var (stored outside a loop that
        walks var forward, computed inside it): there the extent must hold what one iteration
        needs, or the schedule is refused. Elsewhere (and for fold_forward=False, a window
        pyhalide never makes) the storage stays whole: the same results, more memory."""
        name = self._pure_var("fold_storage", var)
        if not isinstance(extent, int) or isinstance(extent, bool) or not 1 <= extent <= INT32_MAX:
            raise CompileError(f"Func {self.name()}.fold_storage({name}, ...): the extent must be an integer in "
                               f"[1, {INT32_MAX}], got {extent!r}")
        if not isinstance(fold_forward, bool):
            raise CompileError(f"Func {self.name()}.fold_storage({name}, {extent}, ...): fold_forward must be True "
                               f"or False, got {fold_forward!r}")
        self._schedule.folds[name] = (extent, fold_forward)
        self._log("fold_storage", _json_var(var), extent, fold_forward)
        return self

    def align_storage(self, var, alignment):
        """Start the storage of var's dimension at a multiple of `alignment` and give it a
        multiple of `alignment` coordinates, as Halide's align_storage (for aligned vector
        accesses); the values computed are the same."""
        name = self._pure_var("align_storage", var)
        alignment = _positive_int(f"Func {self.name()}.align_storage of {name}", "the alignment", alignment)
        self._schedule.aligns[name] = alignment
        self._log("align_storage", _json_var(var), alignment)
        return self

    def bound_storage(self, var, bound):
        """Allocate `bound` coordinates of var's dimension, whatever the stages need (at most
        that: a run that needs more stops with Halide's error), as Halide's bound_storage: a
        constant bound puts a small allocation on the stack. The values computed are the same."""
        name = self._pure_var("bound_storage", var)
        from .expr import to_ir

        extent = to_ir(bound)
        if not extent.type.is_int() and not extent.type.is_uint():
            raise CompileError(f"Func {self.name()}.bound_storage of {name}: the bound has type {extent.type}, "
                               "not an integer")
        c = ir.const_int(extent)
        if c is not None and c <= 0:
            raise CompileError(f"Func {self.name()}.bound_storage of {name}: the bound must be positive, got {c}")
        self._schedule.storage_bounds[name] = extent if extent.type == ir.Int(32) else ir.Cast(ir.Int(32), extent)
        self._log_bound("bound_storage", var, extent)
        return self

    def async_(self):
        """Halide's async_(): compute this Func in a task of its own, overlapping its consumer.
        pyhalide computes it synchronously where it is scheduled: the same values (a schedule
        Halide's tasks could not run is refused as Halide refuses it)."""
        self._require_defined()
        self._schedule.is_async = True
        self._log("async_")
        return self

    def memoize(self, eviction_key=None):
        """Halide's memoize(): keep this Func's values across realizations in the memoization
        cache (pyhalide/memoization.py), keyed on the box computed and the Params it reads; a
        production whose key is there is copied from it, not computed. Entries made with an
        eviction key (an hl.EvictionKey, or an integer Expr) can be dropped by that key's value
        (memoization.evict). Ahead-of-time and GPU pipelines compute it every time."""
        from .expr import Expr, wrap

        self._require_defined()
        if isinstance(eviction_key, Expr):
            eviction_key = EvictionKey(eviction_key)
        if eviction_key is not None and not isinstance(eviction_key, EvictionKey):
            raise TypeError(f"Func {self.name()}.memoize: the eviction key must be an hl.EvictionKey or an Expr, "
                            f"not {type(eviction_key).__name__}")
        sched = self._target_func()._schedule
        if eviction_key is not None and sched.eviction_key is not None and sched.eviction_key != eviction_key.expr:
            # (Halide 21 refuses a second key even where it is the same one; pyhalide only a different one.)
            raise CompileError(f"Func {self.name()}: can't redefine memoize eviction key. First definition is: "
                               f"{wrap(sched.eviction_key)} new definition is: {wrap(eviction_key.expr)}")
        sched.memoized = True
        sched.eviction_key = None if eviction_key is None else eviction_key.expr
        self._log("memoize")
        return self

    def ring_buffer(self, extent):
        """Halide's ring_buffer(n) for an async producer; pyhalide, computing synchronously,
        keeps one buffer (the same values)."""
        self._require_defined()
        n = _const_arg(extent)
        if n < 1:
            raise CompileError(f"Func {self.name()}.ring_buffer: the extent must be at least 1, got {n}")
        self._schedule.ring_buffer = n
        self._log("ring_buffer", n)
        return self

    def hoist_storage(self, *args):
        """Halide's hoist_storage(f, var): allocate this Func's storage once, at that level, and
        reuse it. pyhalide allocates it where store_at puts it (the same values, more allocations);
        the level must be at or outside the store level, as in Halide."""
        self._require_defined()
        level = self._loop_level(args, "hoist_storage")
        self._schedule.hoist_level = level.placing(self)
        self._log("hoist_storage", {"loop_level": level.to_json()})
        return self

    def hoist_storage_root(self):
        return self.hoist_storage(LoopLevel.root())

    def reorder_storage(self, *vars):
        if len(vars) == 1 and isinstance(vars[0], list | tuple):
            vars = tuple(vars[0])
        self._require_defined()
        names = [_var_name(v) for v in vars]
        for n in names:
            if n not in self._pure_args:
                raise CompileError(f"Func {self.name()}.reorder_storage: {n} is not a pure Var of {self.name()}")
        if len(set(names)) != len(names):
            raise CompileError(f"Func {self.name()}.reorder_storage names a Var twice")
        rest = [n for n in self._pure_args if n not in names]
        self._schedule.storage_order = names + rest
        self._log("reorder_storage", *[_json_var(v) for v in vars])
        return self


def existing_wrapper(wrapped: str, wrappers: dict, consumers: list[str]):
    """The wrapper the consumers (names) already share, or None where none has one; Halide's
    errors where only some have one, or they have different ones, or another Func shares it."""
    first = wrappers.get(consumers[0])
    if first is None:
        for name in consumers[1:]:
            if wrappers.get(name) is not None:
                raise CompileError(f"Cannot define the wrapper since {name} already has a wrapper while "
                                   f"{consumers[0]} doesn't")
        return None
    for name, w in wrappers.items():
        if name == consumers[0]:
            continue
        if name in consumers and w is not first:
            raise CompileError(f"{name} should have shared the same wrapper as {consumers[0]}")
        if name not in consumers and w is first:
            raise CompileError(f"Redefinition of shared wrapper [{wrapped} -> {first.name()}] in {consumers[0]} is "
                               f"illegal since {name} shares the same wrapper but is not part of the redefinition")
    return first


def check_wrapped_consumer(f, g, method: str = "in_") -> None:
    """Refuse f.in_(g) (or clone_in) where g does not call f, directly or through wrappers."""
    from .call_graph import direct_callees, loop_exprs, scheduled_callees

    calls = direct_callees(e for _, d in g.all_scheduled_definitions() for e in loop_exprs(d))
    reached = scheduled_callees(g)  # through wrappers: a wrapper can be wrapped in turn
    if calls.get(f.name()) is not f and reached.get(f.name()) is not f:
        raise CompileError(f"Func {f.name()}.{method}({g.name()}): {g.name()} does not call {f.name()}")


def _make_wrapper(f, name: str):
    from .func import Func
    from .var import Var

    wrapper = Func(name)
    args = tuple(Var(n) for n in f._pure_args)
    values = [f[args] if len(f.types()) == 1 else f[args][k] for k in range(len(f.types()))]
    wrapper[args] = values[0] if len(values) == 1 else tuple(values)
    wrapper._frozen_by = f"it is the wrapper {name} of {f.name()}, which its consumers call"
    return wrapper


def _make_clone(f, name: str):
    """A Func with f's definitions, its calls to itself made calls to the clone."""
    from .func import Definition, Func
    from .ir_mutator import IRMutator

    clone = Func(name)
    clone._pure_args, clone._declared_types = f._pure_args, f._declared_types

    class _ToClone(IRMutator):
        def visit_Call(self, c):
            c2 = self.default(c)
            if c.call_type == ir.HALIDE and c.func is f:
                return ir.Call(c2.type, name, c2.args, c2.call_type, c2.value_index, clone, c2.image)
            return c2

    to_clone = _ToClone()

    def copied(d: Definition) -> Definition:
        return Definition(tuple(to_clone.mutate(a) for a in d.args), tuple(to_clone.mutate(v) for v in d.values),
                          d.rvars, None if d.predicate is None else to_clone.mutate(d.predicate))

    clone._init = copied(f._init)
    clone._updates = [copied(d) for d in f._updates]
    clone._schedule.reset_stages(1 + len(clone._updates))
    clone._frozen_by = f"it is the clone {name} of {f.name()}, which its consumers call"
    return clone


def _const_arg(v):
    from .expr import Expr

    if isinstance(v, Expr):
        c = ir.const_int(v.ir())
        if c is None:
            raise CompileError(f"Schedules record constant bounds only; got {v}")
        return c
    return int(v)


def rfactor(stage: Schedulable, pairs):
    """Split an associative reduction into an intermediate Func over the preserved RVars.

    `f.update(i).rfactor([(ri, u), ...])` makes `f_intm(pure..., u...)`, which reduces over the
    other RVars with each preserved RVar replaced by its new pure Var, and rewrites the update
    to reduce `f_intm` over the preserved RVars. The intermediate can then be computed and
    vectorized or parallelized over u, which the original reduction forbade. Float results may
    differ in the last bits: the sum is reassociated, as in Halide. An argmin or argmax keeps
    which of equal extrema it picks only where the preserved RVars are the outermost; Halide
    counts these operators commutative, and so accepts (as pyhalide does) keeping inner ones.
    """
    from .func import Definition, Func, Tuple
    from .ir_mutator import substitute
    from .lowering.legality import prove_associativity
    from .var import ReductionDomain, ReductionVariable

    f = stage._target_func()
    s = stage._stage_index
    where = stage._where()
    if s == 0:
        raise CompileError(f"{where}: rfactor applies to an update definition (use f.update(i).rfactor)")
    sched = stage._stage()
    d = stage._definition()
    assoc = prove_associativity(f, s, d)
    if assoc is None:
        raise CompileError(f"{where}: can't rfactor: the update is not an associative reduction "
                           "(f(args) = f(args) op e, with op one of + * min max && ||, e not reading f; "
                           "a saturating add, an argmin/argmax or a complex multiply of a Tuple)")
    preserved = {}
    for rv, v in pairs:
        dim = stage._dim(rv, "rfactor")
        if not dim.is_rvar:
            raise CompileError(f"{where}: rfactor of {dim.name}, which is not an RVar")
        preserved[dim.internal] = _var_name(v)
    # every original RVar as an expression of the stage's current RVar dimensions
    bounds = {rv.name: (rv.min, rv.extent) for rv in d.rvars}
    value_of: dict[str, ir.Expr] = {}
    guards = []
    for sp in sched.splits:
        if sp.kind == "fuse" and (sp.old in bounds) != (sp.outer in bounds):
            raise CompileError(f"{where}: rfactor after fusing a pure Var with an RVar is not supported")
        if sp.old not in bounds:
            continue  # a pure-variable split or fuse: schedule only
        old_min, old_ext = bounds[sp.old]
        if sp.kind == "fuse":  # fused = inner + inner_extent * outer, each counted from 0
            out_min, out_ext = bounds[sp.outer]
            bounds[sp.inner] = (ir.make_const(ir.Int(32), 0), ir.Mul(old_ext, out_ext))
            fused = ir.Variable(sp.inner)
            value_of[sp.old] = ir.Add(ir.Mod(fused, old_ext), old_min)
            value_of[sp.outer] = ir.Add(ir.Div(fused, old_ext), out_min)
            continue
        if sp.kind == "rename":
            bounds[sp.outer] = bounds[sp.old]
            value_of[sp.old] = ir.Variable(sp.outer)
            continue
        factor = sp.factor_expr()
        bounds[sp.inner] = (ir.make_const(ir.Int(32), 0), factor)
        bounds[sp.outer] = (ir.make_const(ir.Int(32), 0),
                            ir.Div(ir.Add(old_ext, ir.Sub(factor, ir.make_const(ir.Int(32), 1))), factor))
        offset = ir.Add(ir.Mul(ir.Variable(sp.outer), factor), ir.Variable(sp.inner))
        guards.append(ir.LT(offset, old_ext))
        # where the factor may not divide, clamped, so that the last band's guarded-off
        # iterations ask for nothing past the RDom: the guard keeps them from updating, and where
        # it holds the clamp changes nothing
        ext = ir.const_value(old_ext)
        if ext is None or not isinstance(sp.factor, int) or ext % sp.factor:
            offset = ir.Min(offset, ir.Sub(old_ext, ir.make_const(ir.Int(32), 1)))
        value_of[sp.old] = ir.Add(offset, old_min)

    def resolve(e):
        for _ in range(len(value_of) + 1):
            e2 = substitute(value_of, e)
            if e2 is e:
                return e
            e = e2
        return e

    rdims = [dim for dim in sched.dims if dim.is_rvar]
    kept = [dim for dim in rdims if dim.internal not in preserved]
    # The RVars keep their names in the intermediate and in the merged stage, as in Halide, so
    # `intm.update().reorder(rx_inner, u)` refers to the loops the split made.
    kept_dom = ReductionDomain([ReductionVariable(dim.name, *bounds[dim.internal])
                                for dim in kept]) if kept else None
    pres_dims = [dim for dim in rdims if dim.internal in preserved]
    pres_dom = ReductionDomain([ReductionVariable(dim.name, *bounds[dim.internal]) for dim in pres_dims])
    to_kept = {dim.internal: ir.Variable(rv.name, ir.Int(32), ref=kept_dom)
               for dim, rv in zip(kept, kept_dom.rvars if kept_dom else [])}
    to_pure = {dim.internal: ir.Variable(preserved[dim.internal]) for dim in pres_dims}
    dims_map = {**to_kept, **to_pure}

    def rewrite(e):
        return substitute(dims_map, resolve(e))

    types = f.types()
    new_vars = [preserved[dim.internal] for dim in pres_dims]
    clash = set(new_vars) & set(f._pure_args)
    if clash:
        raise CompileError(f"{where}: rfactor's new Vars {sorted(clash)} are already pure Vars of {f.name()}")
    intm = Func(f"{func_name_family(f.name())}_s{s}_intm")
    pure = f._pure_args + tuple(new_vars)
    from .var import Var

    identities = [wrap(e) for e in assoc.identities]
    intm[tuple(Var(n) for n in pure)] = identities[0] if len(types) == 1 else Tuple(identities)
    predicate = d.predicate
    conds = [rewrite(g) for g in guards] + ([rewrite(predicate)] if predicate is not None else [])
    lhs = tuple(rewrite(a) for a in d.args) + tuple(ir.Variable(n) for n in new_vars)

    def calls(func, args):
        return [ir.Call(t, func.name(), args, ir.HALIDE, k, func) for k, t in enumerate(types)]

    cond = None
    for c in conds:
        cond = c if cond is None else ir.And(cond, c)
    values = assoc.apply(calls(intm, lhs), [rewrite(term) for term in assoc.terms])
    intm._updates.append(Definition(lhs, values, tuple(kept_dom.rvars) if kept_dom else (), cond))
    intm._schedule.reset_stages(2)
    intm._schedule.stages[1].touched = True
    # f's update now reduces the intermediate over the preserved RVars
    f_pure = tuple(ir.Variable(n) for n in f._pure_args)
    pres_vars = tuple(ir.Variable(rv.name, ir.Int(32), ref=pres_dom) for rv in pres_dom.rvars)
    # Recorded as schedule data: the algorithm keeps its definition; the stage now schedules (and
    # lowering computes) the reduction of the intermediate, with fresh loops.
    merged = Definition(f_pure, assoc.apply(calls(f, f_pure), calls(intm, f_pure + pres_vars)),
                        tuple(pres_dom.rvars), None)
    sched.restart(merged, d)
    stage._log("rfactor", [[_json_var(rv), _json_var(v)] for rv, v in pairs])
    return intm


class EvictionKey:
    """Halide's hl.EvictionKey(expr): names the memoization cache entries a Func's memoize() makes,
    to evict them later (memoization.evict(value)). An integer Expr (Halide refuses a float one)."""

    def __init__(self, expr):
        from .expr import to_ir, wrap

        e = to_ir(expr)
        if e.type.is_float():
            raise CompileError("Can't use floating-point types as a memoization eviction key. "
                               f"Expression is: {wrap(e)}")
        self.expr = e
