"""Build the loop nest from the schedule: each stage's loops, and each Func placed where it is computed.

Assumes: the environment's realization order (producers first). Guarantees: every computed Func f
has `produce f {stages}; consume f {...}` at its compute level and (unless it is an output) a
`Realize f` at its store level, with empty bounds for bounds inference to fill. Loops are named
`f.s<stage>.<dim>`; the pure dimensions of each stage range over the free variables
`f.s<stage>.<var>.min/.max`, which bounds inference defines next. Split, fused and renamed
variables are rebuilt with lets placed just inside the innermost loop they depend on, and
GuardWithIf tails become ifs at that same place.
"""

from __future__ import annotations

import math
from dataclasses import replace

from .. import ir, scatter_gather
from ..bounds import PREDICATE_LOADS, WITHIN_REGION, box_touched
from ..cse import common_subexpression_elimination
from ..debug_to_file import SYMBOL as DEBUG_TO_FILE
from ..errors import CompileError
from ..extern import CALL_EXTERN, EXTERN_INPUT, EXTERN_OUTPUT, extern_call, make_buffer
from ..ir_mutator import IRMutator, IRVisitor, called_names, free_variables, substitute
from ..ir_printer import expr_to_string
from ..schedule import (
    EXTERN,
    GPU_BLOCK,
    GPU_LANE,
    GPU_LOOP_KINDS,
    GPU_THREAD,
    PARALLEL,
    SERIAL,
    UNROLLED,
    VECTORIZED,
    Dim,
    MemoryType,
    TailStrategy,
)
from ..simplify import bool_values, simplify
from ..types import Bool, Int
from .environment import compute_level, hoist_level, level_text, store_level

_FOR_TYPES = {SERIAL: ir.SERIAL, PARALLEL: ir.PARALLEL, VECTORIZED: ir.VECTORIZED, UNROLLED: ir.UNROLLED,
              GPU_BLOCK: ir.GPU_BLOCK, GPU_THREAD: ir.GPU_THREAD, GPU_LANE: ir.GPU_LANE,
              EXTERN: ir.SERIAL}  # (an extern stage's dimensions become its call's region: _extern_produce)
_I32 = Int(32)


def stage_prefix(f, stage: int) -> str:
    return f"{f.name()}.s{stage}."


def stage_dims(f, stage: int, d=None) -> list[tuple[str, bool]]:
    """The default loop dimensions of a stage (of definition d, a specialization's own), innermost
    first, as (name, is_pure_var)."""
    d = f.scheduled_definitions()[stage] if d is None else d
    if stage == 0:
        return [(v, True) for v in f._pure_args]
    lhs_vars = {a.name for a in d.args if isinstance(a, ir.Variable) and a.ref is None}
    return [(rv.name, False) for rv in d.rvars] + [(v, True) for v in f._pure_args if v in lhs_vars]


def stage_schedule(f, stage: int, sched=None):
    """The stage's schedule (or `sched`, one of its specializations'), its loops set up from its
    definition if no directive has set them up yet."""
    sched = f._schedule.stages[stage] if sched is None else sched
    if not sched.initialized:
        kind = EXTERN if extern_call(f) is not None else SERIAL  # (an extern stage's dimensions are its function's)
        sched.dims = [Dim(n, n, kind, not pure) for n, pure in stage_dims(f, stage, f.definition_of(stage, sched))]
        sched.initialized = True
    return sched


def dim_bound(f, stage: int, var: str, which: str) -> ir.Variable:
    return ir.Variable(f"{stage_prefix(f, stage)}{var}.{which}", _I32)


def loop_name(f, stage: int, internal: str) -> str:
    return stage_prefix(f, stage) + internal


def _c(v: int) -> ir.Expr:
    return ir.make_const(_I32, v)


def _resolve_tail(tail: str, stage: int, is_rvar: bool, where: str, fixed_extent: bool = False,
                  name: str = "", shifted_by=0, factor=0) -> str:
    """Auto is ShiftInwards for pure definitions, RoundUp for pure Vars of updates, GuardWithIf for
    RVars and for dimensions of an update that descend from the inner loop of an earlier split,
    through the outer loops of later splits and through fuses, as in Halide (rounding one of
    those up would run the update twice on the points where neighbouring blocks overlap; a fuse
    of two other loops run past its end only moves past its outer loop's last point).
    As in Halide, a pure dimension that descends from the outer loop of an earlier ShiftInwards
    split of at least this factor (`shifted_by`) rounds up: that split already keeps it inside
    the region (`vectorize(x, 8).unroll(x, 4)`), and shifting again would move it out."""
    if tail == TailStrategy.Auto:
        if is_rvar or (stage > 0 and fixed_extent):
            return TailStrategy.GuardWithIf
        if stage == 0:
            return TailStrategy.RoundUp if _at_least(shifted_by, factor) else TailStrategy.ShiftInwards
        return TailStrategy.RoundUp
    if stage > 0 and fixed_extent and tail == TailStrategy.RoundUp:
        raise CompileError(f"{where}: can't use TailStrategy RoundUp for splitting {name} in an update "
                           "definition: it comes from an earlier split, so rounding it up would apply the update "
                           "twice to some points. Use GuardWithIf.")
    if stage == 0 and tail == TailStrategy.ShiftInwardsAndBlend:
        return TailStrategy.ShiftInwards  # the blend only keeps an update from applying twice
    if tail in TailStrategy.GUARDED:
        return TailStrategy.GuardWithIf  # same values; the guard becomes a predicate where vectorized
    if stage > 0 and tail == TailStrategy.ShiftInwards:
        raise CompileError(f"{where}: TailStrategy ShiftInwards is not legal in an update definition: it would "
                           "apply the update twice to some elements. Use RoundUp or GuardWithIf.")
    return tail


def _at_least(shifted_by, factor) -> bool:
    """Whether an earlier ShiftInwards split's factor is known to be at least this one's (a
    factor of Params: only the same expression is)."""
    if isinstance(shifted_by, int) and isinstance(factor, int):
        return shifted_by >= factor > 0
    return shifted_by == factor


def build_stage(f, stage: int) -> ir.Stmt:
    """The loop nest of one definition of f; with specializations, one nest per condition."""
    sched = stage_schedule(f, stage)
    if sched.fail_message:
        message = "A schedule specialized with specialize_fail() was chosen: " + sched.fail_message
        result = ir.AssertStmt(ir.make_const(Bool(), False), message.replace("{", "{{").replace("}", "}}"), ())
    else:
        result = _build_stage_nest(f, stage, sched, _branch_facts(sched.specializations, None))
    for k in range(len(sched.specializations) - 1, -1, -1):
        cond, special = sched.specializations[k]
        special_nest = _build_stage_nest(f, stage, stage_schedule(f, stage, special),
                                         _branch_facts(sched.specializations, k))
        result = ir.IfThenElse(cond, special_nest, result)
    if sched.gpu_single_thread:  # a kernel of one block; with no thread loops, one thread runs it
        result = ir.For(stage_prefix(f, stage) + "__single_thread", _c(0), _c(1), ir.GPU_BLOCK, result)
    return result


def _branch_facts(specializations, k: int | None) -> list[tuple[ir.Expr, bool]]:
    """What the branch of specialization k (None: the general one) knows: its condition holds
    there, the earlier ones' do not (`specialize(p)`: `select(p, im(x), 0)` reads nothing of im
    in the other branch, as in Halide)."""
    return [(cond, j == k) for j, (cond, _) in enumerate(specializations if k is None else specializations[:k + 1])]


class _Settle(IRMutator):
    """Conditions a branch knows replaced by their values: the condition itself, the bool Params
    it settles, and comparisons of a Param with a constant that its own comparisons decide
    (`p > 73` holds: so does `p > 50`)."""

    def __init__(self, facts: list[tuple[ir.Expr, bool]]):
        super().__init__()
        self.known: dict[ir.Expr, bool] = {}
        self.flags: dict[str, bool] = {}
        self.ranges: dict[str, tuple[float, float]] = {}
        for cond, holds in facts:
            self._learn(cond, holds)

    def _learn(self, cond, holds: bool):
        self.known[cond] = holds
        self.flags.update({n: bool(ir.const_value(v)) for n, v in bool_values(cond, holds).items()})
        if isinstance(cond, ir.And) and holds or isinstance(cond, ir.Or) and not holds:
            self._learn(cond.a, holds)
            self._learn(cond.b, holds)
        elif isinstance(cond, ir.Not):
            self._learn(cond.a, not holds)
        else:
            side = _compared_with_constant(cond if holds else _negated(cond))
            if side is not None:
                name, lo, hi = side
                old_lo, old_hi = self.ranges.get(name, (-math.inf, math.inf))
                self.ranges[name] = (max(lo, old_lo), min(hi, old_hi))

    def mutate(self, node):
        if isinstance(node, ir.Expr) and node.type.is_bool():
            if node in self.known:
                return ir.make_const(node.type, int(self.known[node]))
            if isinstance(node, ir.Variable) and node.name in self.flags:
                return ir.make_const(node.type, int(self.flags[node.name]))
            side = _compared_with_constant(node)
            if side is not None and side[0] in self.ranges:
                name, lo, hi = side
                have_lo, have_hi = self.ranges[name]
                if lo <= have_lo and have_hi <= hi:
                    return ir.make_const(node.type, 1)
                if have_hi < lo or hi < have_lo:
                    return ir.make_const(node.type, 0)
        return super().mutate(node)


def _negated(cond: ir.Expr) -> ir.Expr:
    flipped = {ir.LT: ir.GE, ir.GE: ir.LT, ir.GT: ir.LE, ir.LE: ir.GT}
    return flipped[type(cond)](cond.a, cond.b) if type(cond) in flipped else ir.Not(cond)


def _compared_with_constant(cond: ir.Expr):
    """(name, lo, hi): the values of a scalar integer Param `cond` allows, for `p < 3`, `5 >= p`,
    `p == 4` ...; None for any other condition."""
    if not isinstance(cond, ir.LT | ir.LE | ir.GT | ir.GE | ir.EQ):
        return None
    a, b, kind = cond.a, cond.b, type(cond)
    if isinstance(a, ir.IntImm) and isinstance(b, ir.Variable):
        a, b, kind = b, a, {ir.LT: ir.GT, ir.LE: ir.GE, ir.GT: ir.LT, ir.GE: ir.LE, ir.EQ: ir.EQ}[kind]
    if not (isinstance(a, ir.Variable) and a.ref is not None and isinstance(b, ir.IntImm)) or a.type.lanes != 1:
        return None
    c = b.value
    lo, hi = {ir.LT: (-math.inf, c - 1), ir.LE: (-math.inf, c), ir.GT: (c + 1, math.inf),
              ir.GE: (c, math.inf), ir.EQ: (c, c)}[kind]
    return a.name, lo, hi


def _build_stage_nest(f, stage: int, sched, facts: dict | None = None) -> ir.Stmt:
    d = f.definition_of(stage, sched)
    if facts:
        d = _settled(d, facts)
    prefix = stage_prefix(f, stage)
    where = f"In schedule for {f.name()}.s{stage}"

    def var(internal: str) -> ir.Variable:
        return ir.Variable(prefix + internal, _I32)

    # min and extent of every dimension, original and derived, by internal name
    bounds: dict[str, tuple[ir.Expr, ir.Expr]] = {}
    # one past the max of the pure dimensions: max + 1, not min + extent, whose two occurrences
    # of the min interval arithmetic would bound apart (a window's min and max move together)
    ends: dict[str, ir.Expr] = {}
    rvars = {rv.name: rv for rv in d.rvars}
    is_rvar: dict[str, bool] = {}
    dims = stage_dims(f, stage, d)
    for name, pure in dims:
        if pure:
            lo, hi = dim_bound(f, stage, name, "min"), dim_bound(f, stage, name, "max")
            bounds[name] = (lo, ir.Add(ir.Sub(hi, lo), _c(1)))
            ends[name] = ir.Add(hi, _c(1))
        else:
            bounds[name] = (rvars[name].min, rvars[name].extent)
        is_rvar[name] = not pure

    def within_region(name: str, value: ir.Expr) -> ir.Expr:
        """A pure Var of the stage that a split may run past the region: what those iterations
        read is not required of the producers computed outside the stage's loops (Halide's rule;
        see bounds.WITHIN_REGION). Not where f is stored outside the loop it is computed in:
        there the iterations past this region write where other iterations' regions lie, so what
        they compute must be right (Halide 21 gets such schedules wrong)."""
        if name not in pure_vars or stored_outside_compute:
            return value
        lo, hi = dim_bound(f, stage, name, "min"), dim_bound(f, stage, name, "max")
        outermost = var(sched.dims[-1].internal)
        return ir.Call(_I32, WITHIN_REGION, (value, lo, hi, outermost), ir.INTRINSIC)

    pure_vars = {name for name, pure in dims if pure}
    store = f._schedule.store_level
    stored_outside_compute = store is not None and not store.is_inlined() and store != f._schedule.compute_level
    items: list[tuple[str, str, ir.Expr]] = []  # ("let", name, value) / ("guard", "", cond), last first
    factor_checks: list[ir.Stmt] = []  # split factors known only at run time: positive
    fixed: set[str] = set()  # dimensions an earlier split made (the inner one), or fused from one
    shifted: dict[str, int] = {}  # dimensions descending from a ShiftInwards split's outer: its factor
    consumed_after = [set() for _ in sched.splits]  # dims that later splits/fuses/renames take apart
    for i in range(len(sched.splits) - 2, -1, -1):
        later = sched.splits[i + 1]
        consumed_after[i] = consumed_after[i + 1] | {later.old} | ({later.outer} if later.kind == "fuse" else set())
    vectorized = any(dim.for_type == VECTORIZED for dim in sched.dims)
    roots = {name: {name} for name in pure_vars}  # dimension -> the pure Vars it iterates
    past: set[str] = set()  # pure Vars whose loops a split below them runs past the region
    wrapped: set[str] = set()  # those whose let says so already
    for i, sp in enumerate(sched.splits):
        if sp.kind == "split":
            old_min, old_ext = bounds[sp.old]
            old_end = ends[sp.old] if sp.old in ends else ir.Add(old_min, old_ext)
            tail = _resolve_tail(sp.tail, stage, is_rvar[sp.old], where, sp.old in fixed, sp.old,
                                 shifted.get(sp.old, 0), sp.factor)
            if tail == TailStrategy.ShiftInwards:
                shifted[sp.outer] = sp.factor
            elif sp.old in shifted:
                shifted[sp.inner] = shifted[sp.outer] = shifted[sp.old]
            if sp.factor == 1:  # divides any extent: no tail to shift or guard (as in Halide)
                tail = TailStrategy.RoundUp
            fixed.add(sp.inner)
            if sp.old in fixed:  # its outer steps through the fixed extent too
                fixed.add(sp.outer)
            roots[sp.outer] = roots[sp.inner] = roots.get(sp.old, set())
            factor = sp.factor_expr()
            if not isinstance(sp.factor, int):
                factor_checks.append(_factor_check(f, sp))
            bounds[sp.inner] = (_c(0), factor)
            bounds[sp.outer] = (_c(0), ir.Div(ir.Add(old_ext, ir.Sub(factor, _c(1))), factor))
            is_rvar[sp.inner] = is_rvar[sp.outer] = is_rvar[sp.old]
            # ShiftInwards as min(outer * factor + min, min + extent - factor): each side moves
            # with the outer loops alone, so a bound over them stays tight (a window's min and
            # max are correlated, the extent between them is not)
            base = ir.Add(ir.Mul(var(sp.outer), factor), old_min)
            last_start = ir.Sub(old_end, factor)
            if tail == TailStrategy.ShiftInwards:
                base = ir.Min(base, last_start)
            value = ir.Add(base, var(sp.inner))
            if tail == TailStrategy.GuardWithIf:
                guard = ir.LT(var(sp.old), old_end)
                if sp.tail in (TailStrategy.PredicateLoads, TailStrategy.RoundUpAndBlend):
                    guard = ir.Call(guard.type, PREDICATE_LOADS, (guard,), ir.INTRINSIC)
                elif not vectorized:
                    # As Halide's: inside the loops the variable is clamped to the region's last
                    # point (a value the guard lets through anyway), so what is computed at these
                    # loops for the iterations past the end (producers) stays inside the region.
                    # Not in a stage with vector loops, where the clamp would be a vector min that
                    # costs the guarded vectors their dense loads (camera_pipe: 2.4x slower), and
                    # where producers are rarely computed inside the split.
                    unguarded = f"{sp.old}.unguarded"
                    guard = ir.LT(var(unguarded), old_end)
                    items.append(("guard", "", guard))
                    items.append(("let", sp.old, ir.Min(var(unguarded), ir.Sub(old_end, _c(1)))))
                    items.append(("let", unguarded, value))
                    continue
                items.append(("guard", "", guard))
            if tail == TailStrategy.ShiftInwards and not ({sp.outer, sp.inner} & consumed_after[i]):
                # The loops cover [min, max], shifted down when the extent is below the factor.
                # (Only while outer and inner stay loops: splitting them again can move them.)
                # Saying so keeps bounds short: a chain of such stages otherwise nests these
                # min() expressions inside each other.
                lo = ir.Min(old_min, last_start)
                hi = ir.Sub(old_end, _c(1))
                value = ir.Call(_I32, "promise_clamped", (value, lo, hi, var(sp.outer)), ir.INTRINSIC)
            if tail in (TailStrategy.ShiftInwards, TailStrategy.RoundUp) and sp.may_exceed_one():
                past |= roots[sp.old]
                value = within_region(sp.old, value)
                wrapped.add(sp.old)
            items.append(("let", sp.old, value))
        elif sp.kind == "fuse":
            (in_min, in_ext), (out_min, out_ext) = bounds[sp.old], bounds[sp.outer]
            roots[sp.inner] = roots.get(sp.old, set()) | roots.get(sp.outer, set())
            # empty dimensions make an empty fused loop; the divisor is provably positive
            bounds[sp.inner] = (_c(0), ir.Mul(ir.Max(in_ext, _c(0)), ir.Max(out_ext, _c(0))))
            if sp.old in fixed or sp.outer in fixed:  # (run past its end, it only moves past the outer's)
                fixed.add(sp.inner)
            is_rvar[sp.inner] = is_rvar[sp.old] or is_rvar[sp.outer]
            divisor = ir.Max(in_ext, _c(1))
            inner_value = ir.Add(ir.Mod(var(sp.inner), divisor), in_min)
            outer_value = ir.Add(ir.Div(var(sp.inner), divisor), out_min)
            if sp.inner not in consumed_after[i]:
                # Over the fused loop the two span their own loops' ranges exactly; saying so keeps
                # their bounds those ranges (interval arithmetic on fused / extent cannot see it)
                last = _c(1)
                inner_value = ir.Call(_I32, "promise_clamped", (inner_value, in_min,
                                      ir.Sub(ir.Add(in_min, in_ext), last), var(sp.inner)), ir.INTRINSIC)
                outer_value = ir.Call(_I32, "promise_clamped", (outer_value, out_min,
                                      ir.Sub(ir.Add(out_min, out_ext), last), var(sp.inner)), ir.INTRINSIC)
            if sp.inner in consumed_after[i]:  # a later split may run the fused loop past its end
                inner_value, outer_value = within_region(sp.old, inner_value), within_region(sp.outer, outer_value)
                wrapped |= {sp.old, sp.outer}
            items.append(("let", sp.old, inner_value))
            items.append(("let", sp.outer, outer_value))
        else:  # rename
            if sp.old in fixed:
                fixed.add(sp.outer)
            if sp.old in shifted:
                shifted[sp.outer] = shifted[sp.old]
            bounds[sp.outer] = bounds[sp.old]
            roots[sp.outer] = roots.get(sp.old, set())
            if sp.old in ends:
                ends[sp.outer] = ends[sp.old]
            is_rvar[sp.outer] = is_rvar[sp.old]
            items.append(("let", sp.old, var(sp.outer)))
    # a pure Var split with a guard whose outer loop a later split shifts inwards (or rounds up)
    # runs past the region too, below its min
    items = [(kind, name, within_region(name, value) if kind == "let" and name in past - wrapped else value)
             for kind, name, value in items]
    items.reverse()  # later splits define the variables earlier ones use

    subst = {name: var(name) for name, _ in dims}
    body = _provides(f, stage, tuple(substitute(subst, a) for a in d.args),
                     tuple(substitute(subst, v) for v in d.values))
    if sched.atomic:  # (a Tuple's several stores run under a lock, as a scatter's do)
        if any(_calls_any(a, frozenset([f.name()])) for a in d.args):
            raise CompileError(f"Can't use atomic() on an update where the index written to depends on the current "
                               f"value of the Func: {f.name()}'s update {stage - 1} writes to coordinates it reads "
                               f"from {f.name()}")
        body = ir.Atomic(f"{f.name()}.s{stage}.old", body)
    if d.predicate is not None:
        items.append(("guard", "", substitute(subst, d.predicate)))

    # place each let and guard just inside the innermost loop it depends on
    loops = list(reversed(sched.dims))  # outermost first
    depth = {prefix + dim.internal: i for i, dim in enumerate(loops)}
    placed: list[list] = [[] for _ in range(len(loops) + 1)]
    for kind, name, value in items:
        deps = [depth[v] for v in free_variables(value) if v in depth]
        level = max(deps) + 1 if deps else 0
        if kind == "guard" and _calls_any(value, called_names(value)):
            level = len(loops)  # a Func it reads may change in the loops (this stage writes f): innermost, as Halide
        if kind == "let":
            depth[prefix + name] = level - 1
        placed[level].append((kind, name, value))
    for level in range(len(loops), -1, -1):
        for kind, name, value in reversed(placed[level]):
            body = ir.LetStmt(prefix + name, value, body) if kind == "let" else ir.IfThenElse(value, body)
        if level > 0:
            dim = loops[level - 1]
            lo, ext = bounds[dim.internal]
            body = ir.For(prefix + dim.internal, lo, ext, _FOR_TYPES[dim.for_type], body)
    return ir.make_block([*factor_checks, body])


def _settled(d, facts: list):
    """Definition d in a specialization's branch: the conditions it knows settled, simplified."""
    settle_mutator = _Settle(facts)

    def settle(e):
        return None if e is None else simplify(settle_mutator.mutate(e))

    return replace(d, args=tuple(settle(a) for a in d.args), values=tuple(settle(v) for v in d.values),
                   predicate=settle(d.predicate))


def _factor_check(f, sp) -> ir.Stmt:
    """A split factor known only at run time must be positive (Halide's message)."""
    text = expr_to_string(sp.factor).replace("{", "{{").replace("}", "}}")
    names = [n.rsplit(".", 1)[-1] for n in (sp.old, sp.outer, sp.inner)]
    return ir.AssertStmt(ir.GT(sp.factor, _c(0)),
                         f"In schedule for func {f.name()}, the factor used to split the variable {names[0]} into "
                         f"{names[1]} and {names[2]} is {text}. This evaluated to {{}}, which is not strictly "
                         f"positive. Consider using max({text}, 1) instead.", (sp.factor,))


def _provides(f, stage: int, args: tuple, values: tuple) -> ir.Stmt:
    """f's Provide; for a definition that scatters n elements, n Provides in order after lets that
    compute, once, everything any of them reads of f (Halide's SplitScatterGather): the values and
    sites of all elements are read before the first store."""
    n = scatter_gather.size([*args, *values], f"In definition {stage} of Func {f.name()}")
    parts = scatter_gather.elements(args, values, n)
    if n <= 1:
        return ir.Provide(f.name(), parts[0][1], parts[0][0], func=f)
    # one CSE over all the elements, whose copies share everything but their scattered parts
    bundle = common_subexpression_elimination(
        ir.Call(_I32, "bundle", tuple(e for a, v in parts for e in (*a, *v)), ir.INTRINSIC),
        f"{stage_prefix(f, stage)}shared")
    lets = []
    while isinstance(bundle, ir.Let):
        lets.append((bundle.name, bundle.value))
        bundle = bundle.body
    exprs = list(bundle.args)
    for i, e in enumerate(exprs):
        if f.name() in called_names(e):  # (what does not read f may be computed at its store)
            lets.append((f"{stage_prefix(f, stage)}shared{len(lets)}", e))
            exprs[i] = ir.Variable(lets[-1][0], e.type)
    width = len(args) + len(values)
    provides = [ir.Provide(f.name(), tuple(exprs[i + len(args):i + width]), tuple(exprs[i:i + len(args)]), func=f)
                for i in range(0, len(exprs), width)]
    body = ir.make_block(provides)
    for name, value in reversed(lets):
        body = ir.LetStmt(name, value, body)
    return body


OUTERMOST = "__outermost"  # Var.outermost(): a loop of one iteration around a stage's whole nest


def build_produce(f, outermost: bool = False) -> ir.Stmt:
    """f's production; with `outermost`, each stage inside a one-iteration loop `__outermost`
    (only when some Func is computed or stored at f's Var.outermost())."""
    call = extern_call(f)
    if call is not None:
        stages = [_extern_produce(f, call)]
    else:
        stages = [build_stage(f, s) for s in range(len(f.definitions()))]
    if outermost:
        stages = [ir.For(stage_prefix(f, s) + OUTERMOST, _c(0), _c(1), ir.SERIAL, st) for s, st in enumerate(stages)]
    return ir.ProducerConsumer(f.name(), True, ir.make_block(stages))


def query_bound(f, slot: int, d: int, which: str) -> ir.Variable:
    """The region of dimension d of the Func input in argument `slot` of extern stage f, as f's
    bounds query answered (bounds_inference defines it)."""
    return ir.Variable(f"{f.name()}.query{slot}.{which}.{d}", _I32)


def _extern_produce(f, call) -> ir.Stmt:
    """An extern stage's production: a call of its function for each iteration of the loops its
    schedule made of its dimensions (none at first: one call), over the region the dimensions left
    to the function cover there (its output a crop of f's storage), each Func input over the
    region its bounds query asked for, images whole."""
    sched = stage_schedule(f, 0)
    if sched.specializations:
        raise CompileError(f"Func {f.name()} is an extern stage: its schedule cannot be specialized")
    looped = False
    for d in sched.dims:  # innermost first
        if d.for_type == EXTERN and looped:
            raise CompileError(f"Externally defined Func {f.name()} cannot have extern loop {d.name} outside a "
                               "non-extern loop.")
        if d.for_type not in (EXTERN, SERIAL, PARALLEL, UNROLLED):
            raise CompileError(f"Externally defined Func {f.name()} cannot have loop type {d.for_type} ({d.name})")
        looped = looped or d.for_type != EXTERN
    if not looped:
        region = [(dim_bound(f, 0, v, "min"), dim_bound(f, 0, v, "max")) for v in f._pure_args]
        return _extern_call(f, call, region)
    extern_loops = {loop_name(f, 0, d.internal) for d in sched.dims if d.for_type == EXTERN}

    class Collapse(IRMutator):
        """The loops over the function's dimensions, and the Provide inside, become one call over
        the box they would have written."""

        statements_only = True

        def visit_For(self, s):
            if s.name not in extern_loops:
                return self.default(s)
            return self.call_over(s)

        def visit_Provide(self, p):
            return self.call_over(p)

        @staticmethod
        def call_over(s):
            box = box_touched(s, f.name(), include_provides=True, include_calls=False)
            return _extern_call(f, call, [(iv.min, iv.max) for iv in box])

    return Collapse().mutate(_build_stage_nest(f, 0, sched))


def with_debug_file(f, body: ir.Stmt) -> ir.Stmt:
    """body, then (where f.debug_to_file named a file) f's whole buffer written to it, as Halide
    writes it at the end of each realization (pyhalide/debug_to_file.py)."""
    if f._debug_file is None:
        return body
    if len(f.types()) != 1:
        raise CompileError(f"Func {f.name()}: debug_to_file doesn't handle functions with multiple values yet")
    name = f.name()
    dims = [tuple(ir.Variable(f"{name}.{field}.{d}", _I32) for field in ("min", "extent", "stride"))
            for d in range(len(f._pure_args))]
    buffer = make_buffer(f"{name}.debug_buffer", name, f.types()[0], _c(0), dims)
    call = ir.Call(_I32, CALL_EXTERN, (ir.StringImm(DEBUG_TO_FILE), ir.StringImm(f"debug {name}"),
                                       ir.StringImm(f._debug_file), buffer), ir.INTRINSIC)
    return ir.Block((body, ir.Evaluate(call)))  # (not flattened: body stays `produce f; consume f`)


def _extern_call(f, call, region) -> ir.Stmt:
    """The call of extern stage f's function writing `region` of f ((min, max) per dimension)."""
    args = []
    for slot, a in enumerate(call.args):
        if isinstance(a, ir.Call) and a.call_type == ir.HALIDE:
            corners = [ir.Call(a.type, a.name, tuple(query_bound(f, slot, d, which) for d in range(len(a.args))),
                               ir.HALIDE, value_index=a.value_index, func=a.func) for which in ("min", "max")]
            args.append(ir.Call(a.type, EXTERN_INPUT, tuple(corners), ir.INTRINSIC))
        else:
            args.append(a)
    for k, t in enumerate(f.types()):
        corners = [ir.Call(t, f.name(), tuple(bound[i] for bound in region), ir.HALIDE, value_index=k, func=f)
                   for i in (0, 1)]
        args.append(ir.Call(t, EXTERN_OUTPUT, tuple(corners), ir.INTRINSIC))
    return ir.Evaluate(ir.Call(_I32, CALL_EXTERN, (ir.StringImm(call.name), ir.StringImm("compute"), *args),
                               ir.INTRINSIC))


def check_target(f, target) -> None:
    """Refuse what f's schedule asks of a target that can't do it: GPU loops or GPU memory on a
    CPU target, memory types of other hardware."""
    if target is None or target.has_gpu_feature():
        return
    for s in range(len(f.definitions())):
        sched = stage_schedule(f, s)
        for special in [sched, *(sp for _, sp in sched.specializations)]:
            if special.gpu_single_thread:
                raise CompileError(f"Stage {f.name()}.s{s} is scheduled gpu_single_thread, but the target {target} is "
                                   "the host CPU, which has no GPU: add the cuda feature to the target")
            for dim in special.dims:
                if dim.for_type in GPU_LOOP_KINDS:
                    raise CompileError(f"Loop {loop_name(f, s, dim.internal)} is a {dim.for_type} loop, but the "
                                       f"target {target} is the host CPU, which has no GPU: add a GPU feature "
                                       "(such as cuda) to the target, or schedule the loop for the CPU")
    memory = f._schedule.memory_type
    if memory in MemoryType.GPU_ONLY:
        raise CompileError(f"Func {f.name()} is stored in {memory} memory, which only a GPU target has (the "
                           f"target is {target})")
    if memory in ("LockedCache", "VTCM", "AMXTile"):
        raise CompileError(f"Func {f.name()} is stored in {memory} memory, which the target {target} does not have")


class _InjectAt(IRMutator):
    """Wrap the body of each loop named `loop` (a name, or the names a LoopLevel has in a stage's
    specializations) with `wrap(body)`; given `readers`, only of those whose body calls one of
    them (the specializations' loops have the same names, and some may not use the Func)."""

    def __init__(self, loop: str | tuple[str, ...], wrap, readers: frozenset | None = None):
        super().__init__()
        self.loops = (loop,) if isinstance(loop, str) else loop
        self.wrap, self.found, self.readers = wrap, False, readers

    def visit_For(self, s):
        if s.name in self.loops and (self.readers is None or _calls_any(s.body, self.readers)):
            self.found = True
            return ir.For(s.name, s.min, s.extent, s.for_type, self.wrap(s.body))
        return self.default(s)


class _CallsAny(IRVisitor):
    visit_once = True

    def __init__(self, names: frozenset):
        super().__init__()
        self.names, self.found = names, False

    def visit_Call(self, c):
        if c.call_type == ir.HALIDE and c.name in self.names:
            self.found = True
        elif not self.found:
            self.visit_children(c)


def _calls_any(stmt: ir.Stmt, names: frozenset) -> bool:
    finder = _CallsAny(names)
    finder.visit(stmt)
    return finder.found


def _readers(env, f) -> frozenset:
    """f and the inlined Funcs that read it (directly or through each other): a loop whose body
    calls one of them uses f."""
    names = {f.name()}
    grew = True
    while grew:
        more = {n for n in env.inlined if n not in names and names & set(env.callees.get(n, ()))}
        names |= more
        grew = bool(more)
    return frozenset(names)


def _level_loop(env, f, level, what: str) -> tuple[str, ...]:
    """The loop names a LoopLevel refers to (the stage's, then those of its specializations that
    have the Var: each specialization is a loop nest of its own), with an error naming the Func,
    stage and var if the stage has no such loop."""
    g = env.funcs.get(level.func_name)
    if g is None:
        raise CompileError(f"Func {f.name()} is {what} {level.func_name}, which is not used by this pipeline")
    if g.name() in env.inlined:
        raise CompileError(f"Func {f.name()} is {what} {g.name()}.{level.var_name}, but {g.name()} is inlined, so "
                           "it has no loops. Schedule it with compute_root or compute_at.")
    n_stages = len(g.definitions())
    stage = level.stage_index if level.stage_index >= 0 else _using_stage(env, f, g, n_stages)
    if stage >= n_stages:
        raise CompileError(f"Func {f.name()} is {what} stage {stage} of {g.name()}, which has {n_stages} stages")
    if level.var_name == OUTERMOST:
        return (stage_prefix(g, stage) + OUTERMOST,)
    sched = stage_schedule(g, stage)
    branches, pending = [sched], [special for _, special in sched.specializations]
    while pending:
        special = stage_schedule(g, stage, pending.pop(0))
        branches.append(special)
        pending.extend(inner for _, inner in special.specializations)
    # Each specialization is a loop nest of its own: f goes where each has the loop (_InjectAt
    # then keeps those that use f). By default (a Func with updates left unscheduled: env.levels)
    # that is each one's innermost loop, as in Halide.
    innermost = env.levels.get(f.name()) == level
    names = []
    for b in branches:
        dim = (b.dims[0] if b.dims else None) if innermost else b.find(level.var_name)
        if dim is not None and loop_name(g, stage, dim.internal) not in names:
            names.append(loop_name(g, stage, dim.internal))
    # (a loop of some specializations only: f must be used in those alone, which bounds inference
    # checks; a stage whose own schedule only fails, specialize_fail, runs their loops alone)
    if not names:
        loops = ", ".join(x.name for x in reversed(sched.dims))
        raise CompileError(f"Func {f.name()} is {what} {g.name()}.s{stage}.{level.var_name}, but stage {stage} of "
                           f"{g.name()} has no loop {level.var_name} (its loops, outermost first, are: {loops})")
    return tuple(names)


def _stage_sites(env, f, level) -> list[str]:
    """For a LoopLevel without a stage whose Func g uses f in several stages that all have the
    loop: that loop of each of them."""
    g = env.funcs.get(level.func_name)
    if level.stage_index >= 0 or g is None or g.name() in env.inlined:
        return []
    sites = []
    for stage in _using_stages(env, f, g):
        dim = stage_schedule(g, stage).find(level.var_name)
        if dim is None:
            return []
        sites.append(loop_name(g, stage, dim.internal))
    return sites


def _using_stage(env, f, g, n_stages: int) -> int:
    """The stage a LoopLevel without one means: as in Halide, the stage of g whose loops use f
    when only one does (a producer read by g's pure step only); else the last."""
    users = _using_stages(env, f, g)
    return users[0] if len(users) == 1 else n_stages - 1


def _using_stages(env, f, g) -> list[int]:
    """The stages of g whose loops use f (directly or through inlined Funcs)."""
    from ..call_graph import called_funcs, loop_exprs

    users = []
    for s, d in g.all_scheduled_definitions():
        if s in users:
            continue
        pending, seen = list(called_funcs(loop_exprs(d)).values()), set()
        while pending:  # through inlined Funcs
            h = pending.pop()
            if h.name() == f.name():
                users.append(s)
                break
            if h.name() in env.inlined and h.name() not in seen:
                seen.add(h.name())
                for hd in h.definitions():
                    pending.extend(called_funcs(loop_exprs(hd)).values())
    return users


def schedule_functions(env) -> ir.Stmt:
    """Place each computed Func's production at its compute level, consumers first."""
    stmt: ir.Stmt = ir.make_block([])
    at_outermost = {level.func_name for g in env.order
                    for level in (compute_level(g, env), store_level(g, env), hoist_level(g, env))
                    if level is not None and level.kind == "at" and level.var_name == OUTERMOST}
    placed: set[str] = set()
    for f in reversed(env.order):
        check_target(f, env.target)
        if f.name() in placed:
            continue
        group = env.fused_group(f)
        if group is not None:
            stmt = _place_group(env, stmt, group, at_outermost)
            placed.update(g.name() for g in group)
            continue
        produce = build_produce(f, f.name() in at_outermost)

        def computed(body, f=f, produce=produce):
            return ir.make_block([produce, ir.ProducerConsumer(f.name(), False, body)])

        def realized(body, f=f):
            return ir.Realize(f.name(), tuple(f.types()), (), with_debug_file(f, body), func=f)

        clevel, slevel = compute_level(f, env), store_level(f, env)
        readers = _readers(env, f)
        if env.is_output(f):
            stmt = with_debug_file(f, computed(stmt))
            continue
        if clevel.is_root():
            if not slevel.is_root():
                raise CompileError(f"Func {f.name()} is stored at {level_text(slevel)} but computed at root, which is "
                                   "not inside it: the store level must be at or outside the compute level")
            stmt = realized(computed(stmt))
            continue
        # As Halide: where several stages of g use f and the level names no stage, f is computed
        # (and stored, at the same Var of each stage's loops, or at root) in each of them.
        compute_loops = _stage_sites(env, f, clevel)
        if len(compute_loops) > 1:
            if slevel.is_root():
                for loop in compute_loops:
                    stmt = _inject(stmt, loop, computed, f, "computed at", readers)
                stmt = realized(stmt)
                continue
            store_loops = compute_loops if slevel == clevel else \
                _stage_sites(env, f, slevel) if slevel.func_name == clevel.func_name else []
            if len(store_loops) == len(compute_loops):
                for store_loop, compute_loop in zip(store_loops, compute_loops):
                    stmt = _store_and_compute(stmt, f, store_loop, compute_loop, computed, realized, readers)
                continue
        compute_loop = _level_loop(env, f, clevel, "computed at")
        if slevel.is_root():
            stmt = realized(_inject(stmt, compute_loop, computed, f, "computed at", readers))
            continue
        store_loop = compute_loop if slevel == clevel else _level_loop(env, f, slevel, "stored at")
        stmt = _store_and_compute(stmt, f, store_loop, compute_loop, computed, realized, readers)
    _StoredOutsideParallel().check(stmt)
    _check_hoisted_storage(env, stmt)
    asynchronous = {f.name() for f in env.order if f._schedule.is_async and not env.is_output(f)}
    if asynchronous:
        _AsyncNesting(asynchronous).visit(stmt)
    return stmt


def _check_hoisted_storage(env, stmt: ir.Stmt) -> None:
    """hoist_storage's level, as Halide checks it (pyhalide allocates at the store level: the
    same values): at or outside the store level, with no parallel or vectorized loop between
    them; and a ring_buffer needs one of its own, outside the store level."""
    for f in env.order:
        if env.is_output(f):
            continue
        slevel, hlevel = store_level(f, env), hoist_level(f, env)
        if f._schedule.ring_buffer is not None and hlevel == slevel:
            raise CompileError(f"Func {f.name()} is scheduled with ring_buffer(), but has matching store_at and "
                               "hoist_storage levels. Add an explicit hoist_storage directive to the schedule to fix "
                               "the issue.")
        if hlevel == slevel:
            continue
        where = (f"Func {f.name()} has its storage hoisted to {level_text(hlevel)}, which is inside where it is "
                 f"stored ({level_text(slevel)}): hoist_storage must be at or outside the store level")
        if slevel.is_root():
            raise CompileError(where)
        loops = None if hlevel.is_root() else _level_loop(env, f, hlevel, "hoisted at")
        _HoistedOutside(f.name(), loops, where).visit(stmt)


class _AsyncNesting(IRVisitor):
    """Halide's rule for async Funcs (which pyhalide computes synchronously): Halide splits
    the body of an async Func g's Realize into a producer task (g's productions) and a consumer
    task (the rest). A Func p computed there, outside g's production, goes to the consumer task,
    so g's production may not be inside p's consume node, unless p is itself async and stored
    outside g (then p has a task of its own, which g's waits on)."""

    def __init__(self, asynchronous: set[str]):
        super().__init__()
        self.asynchronous, self.realized = asynchronous, []

    def visit_Realize(self, r):
        if r.name in self.asynchronous:
            _AsyncProducerTask(r.name, frozenset(n for n in self.realized if n in self.asynchronous)).visit(r.body)
        self.realized.append(r.name)
        self.visit_children(r)
        self.realized.pop()


class _AsyncProducerTask(IRVisitor):
    def __init__(self, name: str, own_tasks: frozenset):
        super().__init__()
        self.name, self.own_tasks = name, own_tasks
        self.dropped: set[str] = set()  # Funcs produced in the consumer task
        self.consuming: list[str] = []

    def visit_ProducerConsumer(self, pc):
        if pc.name == self.name:
            if pc.is_producer:
                inside = _ConsumedIn(self.dropped)
                inside.visit(pc.body)
                for p in [*self.consuming, *inside.found]:
                    if p in self.dropped:
                        raise CompileError(
                            f"The Func {p} is consumed by async Func {self.name} and has a compute_at location in "
                            f"between the store_at location and the compute_at location of {self.name}. This is only "
                            f"legal when {p} is both async and has a store_at location outside the store_at location "
                            "of the consumer.")
                return
            self.visit_children(pc)
            return
        if pc.is_producer:
            if pc.name not in self.own_tasks:
                self.dropped.add(pc.name)
            self.visit_children(pc)
            return
        self.consuming.append(pc.name)
        self.visit_children(pc)
        self.consuming.pop()


class _ConsumedIn(IRVisitor):
    def __init__(self, names: set[str]):
        super().__init__()
        self.names, self.found = names, []

    def visit_ProducerConsumer(self, pc):
        if not pc.is_producer and pc.name in self.names:
            self.found.append(pc.name)
        self.visit_children(pc)


class _HoistedOutside(IRVisitor):
    """Each Realize of `name` lies inside one of the `hoist` loops (None: root), with no
    concurrent loop between them (Halide: a race on the hoisted storage)."""

    def __init__(self, name: str, hoist: tuple[str, ...] | None, message: str):
        super().__init__()
        self.name, self.hoist, self.message, self.loops = name, hoist, message, []

    def visit_For(self, s):
        self.loops.append(s)
        self.visit_children(s)
        self.loops.pop()

    def visit_Realize(self, r):
        if r.name == self.name:
            inside = [-1] if self.hoist is None else [i for i, loop in enumerate(self.loops) if loop.name in self.hoist]
            if not inside:
                raise CompileError(self.message)
            for loop in self.loops[inside[-1] + 1:]:
                if loop.for_type in ir.CONCURRENT and not ir.is_const(loop.extent, 1):
                    raise CompileError(f"Func {self.name} storage is hoisted outside the {loop.for_type} loop over "
                                       f"{loop.name} but computed within it. This is a potential race condition.")
        self.visit_children(r)


def _place_group(env, stmt, group, at_outermost: set[str]) -> ir.Stmt:
    """A fused group's production (fused_loops.py) at the members' common compute level, each
    member's Realize at its own store level (`at_outermost`: the Funcs something is computed or
    stored at the Var.outermost() of)."""
    from .fused_loops import build_group_produce

    for f in group:
        check_target(f, env.target)
    produce, stages, fused_loops = build_group_produce(env, group, any(f.name() in at_outermost for f in group))
    env.fused_stages.update(stages)
    env.fused_loops |= fused_loops

    def computed(body):
        for f in group:  # the parent's consume outermost, as its produce
            body = ir.ProducerConsumer(f.name(), False, body)
        return ir.make_block([produce, body])

    def realized(body, f):
        return ir.Realize(f.name(), tuple(f.types()), (), with_debug_file(f, body), func=f)

    parent = group[-1]
    clevel = compute_level(parent, env)
    stored_here = [f for f in group if not env.is_output(f) and store_level(f, env) == clevel]
    elsewhere = [f for f in group if not env.is_output(f) and store_level(f, env) != clevel]

    def realized_here(body):
        body = computed(body)
        for f in stored_here:
            body = realized(body, f)
        return body

    if clevel.is_root():
        stmt = realized_here(stmt)
    else:
        stmt = _inject(stmt, _level_loop(env, parent, clevel, "computed at"), realized_here, parent, "computed at")
    for f in elsewhere:
        slevel = store_level(f, env)
        if slevel.is_root():
            stmt = realized(stmt, f)
            continue
        outer = _InjectAt(_level_loop(env, f, slevel, "stored at"), lambda body, f=f: realized(body, f))
        stmt = outer.mutate(stmt)
        if not outer.found:
            raise CompileError(f"Func {f.name()} is stored at loop {outer.loops[0]}, which does not exist here")
    return stmt


def _store_and_compute(stmt, f, store_loop: str | tuple[str, ...], compute_loop: str | tuple[str, ...], computed,
                       realized, readers: frozenset | None = None) -> ir.Stmt:
    """f's Realize around the body of store_loop, its production at the top of compute_loop's
    (of the loops that use f, as _inject)."""
    if store_loop == compute_loop:
        return _inject(stmt, compute_loop, lambda b: realized(computed(b)), f, "computed at", readers)
    inner = _InjectAt(compute_loop, computed, readers)
    outer = _InjectAt(store_loop, lambda body: realized(inner.mutate(body)), readers)
    result = outer.mutate(stmt)
    if readers is not None and not (outer.found and inner.found):
        return _store_and_compute(stmt, f, store_loop, compute_loop, computed, realized)
    stmt = result
    if not outer.found:
        raise CompileError(f"Func {f.name()} is stored at loop {outer.loops[0]}, which does not exist here")
    if not inner.found:
        raise CompileError(f"Func {f.name()} is stored at {outer.loops[0]} but computed at {inner.loops[0]}, which is "
                           "not inside it: the store level must be at or outside the compute level")
    return stmt


class _StoredOutsideParallel(IRVisitor):
    """Refuse, as Halide does, storage outside a parallel or vectorized loop that the Func is
    computed inside: the iterations would share (and race on) one buffer. Where a Func is
    realized once per stage of its consumer (a compute level naming a Var of several stages),
    Halide judges by the loops of the last stage that uses it, so pyhalide does too."""

    def __init__(self):
        super().__init__()
        self.loops: list[ir.For] = []
        self.realized_at: dict[str, int] = {}  # Func -> how many loops enclose its Realize
        self.last_production: dict[str, str | None] = {}  # Func -> the race its last production has, if any

    def check(self, stmt: ir.Stmt) -> None:
        self.visit(stmt)
        for message in self.last_production.values():
            if message is not None:
                raise CompileError(message)

    def visit_For(self, s):
        self.loops.append(s)
        self.visit_children(s)
        self.loops.pop()

    def visit_Realize(self, r):
        self.realized_at[r.name] = len(self.loops)
        self.visit_children(r)
        del self.realized_at[r.name]

    def visit_ProducerConsumer(self, pc):
        depth = self.realized_at.get(pc.name)
        if pc.is_producer and depth is not None:
            self.last_production[pc.name] = None
            for loop in self.loops[depth:]:
                if loop.for_type in ir.CONCURRENT and not ir.is_const(loop.extent, 1):  # (one iteration: no race)
                    self.last_production[pc.name] = (
                        f"Func {pc.name} is stored outside the {loop.for_type} loop over {loop.name} but computed "
                        "within it. This is a potential race condition.")
                    break
        self.visit_children(pc)


def _inject(stmt, loop: str | tuple[str, ...], wrap, f, what: str, readers: frozenset | None = None) -> ir.Stmt:
    """stmt with `wrap` around the body of the loops named `loop` (those that use f, given its
    `readers`; all of them where none does, which bounds inference then refuses)."""
    injector = _InjectAt(loop, wrap, readers)
    result = injector.mutate(stmt)
    if not injector.found and readers is not None:
        return _inject(stmt, loop, wrap, f, what)
    stmt = result
    if not injector.found:
        raise CompileError(f"Func {f.name()} is {what} loop {injector.loops[0]}, which does not exist in the loop "
                           "nest")
    return stmt
