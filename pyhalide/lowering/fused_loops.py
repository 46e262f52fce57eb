"""compute_with: stages whose outer loops are another stage's (Halide's fused groups).

`f.compute_with(g, y)` runs f's loops from the outermost down to y as g's: one loop nest in
which each iteration runs g's body, then f's. The Funcs fused this way (transitively) form a
group, realized together at one compute level. This module checks the groups
(`find_fused_groups`, when the environment is built), orders them in the realization order, and
builds a group's production (`build_group_produce`, for schedule_functions):

- each fused loop of a child stage becomes a one-iteration serial loop at the parent's loop
  variable (shifted as its LoopAlignStrategy says); it keeps its name, so Funcs computed at it
  and bounds inference find it;
- the parent's loop (the *real* loop, the one that runs) spans the union of the fused stages'
  ranges;
- each stage's body is guarded to its own ranges inside its innermost fused loop (only where the
  union may be larger), so the children placed after it there are not;
- the child's nest goes at the end of the real loop's body: it runs after the parent there.

The unions, shifts and guards name the stages' bounds (`f.s0.y.min` ...), not their values:
sliding window, which rewrites those lets, shrinks what a member computes per iteration and the
shared loops and guards follow.

Fused at Var.outermost(), or with a Func computed or stored at a member's Var.outermost(), the
group's stages each sit in their one-iteration `__outermost` loop, fused as any other.
"""

from __future__ import annotations

from .. import ir
from ..errors import CompileError
from ..ir_mutator import IRMutator, IRVisitor
from ..schedule import Dim, LoopAlignStrategy
from ..simplify import simplify
from ..types import Int

_I32 = Int(32)
_ONE = ir.make_const(_I32, 1)


def _stage_label(f, stage: int) -> str:
    return f"{f.name()}.s{stage}"


def _transitive_callees(env, name: str) -> set[str]:
    seen, todo = set(), list(env.callees.get(name, []))
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(env.callees.get(n, []))
    return seen


def _fused_pairs(env) -> list[tuple]:
    """(child Func, child stage, parent Func, parent stage, level) of every compute_with of the
    pipeline's Funcs, checked as Halide checks them."""
    from .environment import compute_level
    from .schedule_functions import stage_schedule

    pairs = []
    for f in env.funcs.values():
        for s in range(len(f.definitions())):
            level = f._schedule.stages[s].fuse_level if s < len(f._schedule.stages) else None
            if level is None:
                continue
            label = _stage_label(f, s)
            parent = env.funcs.get(level.func_name)
            if parent is None:
                raise CompileError(f'Illegal compute_with: "{f.name()}" is scheduled to be computed with '
                                   f'"{level.func_name}" which is not used anywhere.')
            n_stages = len(parent.definitions())
            stage = level.stage_index
            if stage < 0:
                if n_stages > 1:
                    raise CompileError(f"Invalid compute_with: {label} is computed with "
                                       f"{parent.name()}.{level.var_name}, but {parent.name()} has {n_stages} "
                                       "stages: name one (a Stage, or a LoopLevel with a stage index)")
                stage = 0
            if stage >= n_stages:
                raise CompileError(f"Invalid compute_with: {label} is computed with stage {stage} of {parent.name()}, "
                                   f"which has {n_stages} stages")
            for g, k in ((f, s), (parent, stage)):
                if g.name() in env.inlined:
                    raise CompileError(f"Invalid compute_with: {_stage_label(g, k)} is scheduled inline.")
            if parent.name() in _transitive_callees(env, f.name()) or \
                    f.name() in _transitive_callees(env, parent.name()):
                raise CompileError(f"Invalid compute_with: there is dependency between {parent.name()} and {f.name()}")
            mine = _level_loops(env, f, compute_level(f, env))
            theirs = _level_loops(env, parent, compute_level(parent, env))
            if mine != theirs:
                raise CompileError(f"Invalid compute_with: the compute levels of {parent.name()}.s{stage} (computed at "
                                   f"{' and '.join(theirs)}) and {label} (computed at {' and '.join(mine)}) do not "
                                   "match.")
            if stage_schedule(f, s).specializations:
                raise CompileError(f"Func {f.name()} is scheduled to be computed with {parent.name()}, so it must not "
                                   "have any specializations.")
            pairs.append((f, s, parent, stage, level))
    for f, _, parent, _, _ in pairs:
        if any(g is parent and p is f for g, _, p, _, _ in pairs):
            raise CompileError(f"Found cyclic dependencies between compute_with of {parent.name()} and {f.name()}")
    for f in {id(p[0]): p[0] for p in pairs}.values():
        _check_stage_order(f, [p for p in pairs if p[0] is f])
    for f, s, parent, stage, level in pairs:
        _check_fused_dims(f, s, parent, stage, level.var_name)
    for f, s, depth, depth_before in interleaved_stages(pairs):
        _check_interleaved(f, s, depth, depth_before)
    return pairs


def interleaved_stages(pairs) -> list[tuple]:
    """(f, s, depth, depth_before) for each stage s of f that runs interleaved with f's stage
    s - 1: both fused, directly or through their parents, into the loops of one unfused stage;
    `depth` and `depth_before` are how many of those loops (the outermost ones) s and s - 1 are
    fused into."""
    from .schedule_functions import OUTERMOST, stage_schedule

    parent_of = {(f.name(), s): (f, parent, stage, level) for f, s, parent, stage, level in pairs}

    def host(key) -> tuple:
        """The unfused stage whose loops run `key`, and how many of them it is fused into."""
        if key not in parent_of:
            return key, 1 << 30
        f, parent, stage, level = parent_of[key]
        root, depth = host((parent.name(), stage))
        own = 0 if level.var_name == OUTERMOST else len(fused_dims(stage_schedule(f, key[1]), level.var_name))
        return root, min(depth, own)

    found = []
    for f, s, _, _, _ in pairs:
        if s > 0 and (f.name(), s - 1) in parent_of:
            (root, depth), (root_before, depth_before) = host((f.name(), s)), host((f.name(), s - 1))
            if root == root_before and depth > 0:
                found.append((f, s, depth, depth_before))
    return found


def _check_interleaved(f, s: int, depth: int, depth_before: int) -> None:
    """Stages of f that run in the same loops run in their order at each iteration, not each
    over all of them: right only where stage s at a point needs stage s - 1 there and nowhere
    else along those loops. So the shared loops must be f's own Vars (unsplit), at most as
    deep for s as for s - 1 (s then runs after all of s - 1's inner loops), and both stages
    must read and write f along them at the point itself. Refused otherwise (Halide computes
    such schedules, wrongly)."""
    from .schedule_functions import stage_schedule

    label = f"{f.name()}.s{s}"
    if depth > depth_before:
        raise CompileError(f"Invalid compute_with: {label} is fused {depth} loops deep into the loops "
                           f"{f.name()}.s{s - 1} is fused {depth_before} deep into: it would run at each inner "
                           f"iteration before {f.name()}.s{s - 1} has finished the outer one. Fuse it at the same "
                           "loop or further out.")
    shared = [d.name for d in reversed(stage_schedule(f, s).dims)][:depth]
    before = [d.name for d in reversed(stage_schedule(f, s - 1).dims)][:depth]
    for t, other in ((s, s - 1), (s - 1, s)):
        for d in stage_schedule(f, t).dims[-depth:]:
            if d.internal not in f._pure_args:
                raise CompileError(f"Invalid compute_with: {f.name()}.s{t} and {f.name()}.s{other} run interleaved "
                                   f"in the loops they are fused into, so those loops must be {f.name()}'s own "
                                   f"Vars, unsplit; {d.name} is not")
    if shared != before:
        raise CompileError(f"Invalid compute_with: {f.name()}.s{s - 1} and {label} run interleaved in the loops "
                           f"they are fused into, over different Vars ({', '.join(before)} and {', '.join(shared)})")
    for t in (s - 1, s):
        definition = f.definitions()[t]
        for v in shared:
            i = f._pure_args.index(v)
            points = [definition.args] + [c.args for c in _self_calls(f, definition)]
            if any(not (isinstance(args[i], ir.Variable) and args[i].name == v) for args in points):
                raise CompileError(f"Invalid compute_with: {f.name()}.s{t} writes or reads {f.name()} away from "
                                   f"the point along {v}, but it runs interleaved with {f.name()}.s"
                                   f"{s if t == s - 1 else s - 1} in the fused loop over {v}: it would see "
                                   "values the other stage has not computed yet (or has already changed)")


def _self_calls(f, definition) -> list:
    calls = []

    class _Calls(IRVisitor):
        def visit_Call(self, c):
            if c.call_type == ir.HALIDE and c.name == f.name():
                calls.append(c)
            self.visit_children(c)

    finder = _Calls()
    for e in (*definition.args, *definition.values, *([definition.predicate] if definition.predicate else [])):
        finder.visit(e)
    return calls


def _level_loops(env, f, level) -> tuple:
    """The loops a compute level names (a level without a stage resolved as for compute_at: the
    stage of the consumer that uses the Func)."""
    from .schedule_functions import _level_loop

    return ("root",) if level.is_root() else _level_loop(env, f, level, "computed at")


def _check_stage_order(f, pairs) -> None:
    """As Halide: f's stages fused with one parent must be fused with its stages in order (a
    later stage of f with an earlier stage of the parent would have to run before itself)."""
    last: dict[str, tuple[int, int]] = {}
    previous = None
    for s in range(len(f.definitions())):
        pair = next((p for p in pairs if p[1] == s), None)
        if pair is None:
            previous = None
            continue
        _, _, parent, stage, _ = pair
        before = last.get(parent.name())
        consecutive = previous == (parent.name(), stage)
        if before is not None and not (stage > before[1] or (stage == before[1] and consecutive)):
            raise CompileError(f"Invalid compute_with: impossible to establish correct stage order between "
                               f"{f.name()}.s{before[0]} with {parent.name()}.s{before[1]} and {f.name()}.s{s} with "
                               f"{parent.name()}.s{stage}")
        last[parent.name()] = (s, stage)
        previous = (parent.name(), stage)


def fused_dims(sched, var: str, outermost: bool = False):
    """The dims of a stage schedule from `var` outwards (outermost first), or None without `var`;
    with `outermost` (where the stage has its `__outermost` loop), led by that loop."""
    from .schedule_functions import OUTERMOST

    outer = [Dim(OUTERMOST, OUTERMOST)] if outermost or var == OUTERMOST else []
    if var == OUTERMOST:
        return outer
    index = sched.index(var)
    return None if index < 0 else outer + list(reversed(sched.dims[index:]))


def _check_fused_dims(f, s: int, parent, stage: int, var: str) -> None:
    from .schedule_functions import stage_schedule

    label, parent_label = _stage_label(f, s), _stage_label(parent, stage)
    mine = fused_dims(stage_schedule(f, s), var)
    if mine is None:
        raise CompileError(f"Invalid compute_with: cannot find {var} in {label}")
    parent_sched = stage_schedule(parent, stage)
    branches = [parent_sched, *(special for _, special in parent_sched.specializations)]
    if parent_sched.fail_message:
        branches = branches[1:]
    for sched in branches:
        theirs = fused_dims(sched, var)
        if theirs is None:
            raise CompileError(f"Invalid compute_with: cannot find {var} in {parent_label}")
        if len(theirs) != len(mine):
            raise CompileError(f"Invalid compute_with: # of fused dims of {parent_label} and {label} do not match.")
        for i, (a, b) in enumerate(zip(reversed(theirs), reversed(mine))):
            if a.name != b.name:
                raise CompileError(f"Invalid compute_with: names of dim {i} of {parent_label}({a.name}) and "
                                   f"{label}({b.name}) do not match.")
            if a.for_type != b.for_type:
                raise CompileError(f"Invalid compute_with: for types of dim {i} of {parent_label}({a.name} is "
                                   f"{a.for_type}) and {label}({b.name} is {b.for_type}) do not match.")


def find_fused_groups(env) -> None:
    """Set env.fused_groups (each a list of Funcs, children before their parents) and
    env.fused_pairs; reorder env.order so that each group is contiguous and comes after
    everything its members call."""
    pairs = env.fused_pairs = _fused_pairs(env)
    if not pairs:
        return
    group_of: dict[str, int] = {}
    groups: list[set[str]] = []
    for f, _, parent, _, _ in pairs:
        a, b = group_of.get(f.name()), group_of.get(parent.name())
        if a is None and b is None:
            groups.append({f.name(), parent.name()})
            group_of[f.name()] = group_of[parent.name()] = len(groups) - 1
        elif a is None or b is None or a != b:
            keep = a if a is not None else b
            for other in (a, b):
                if other is not None and other != keep:
                    groups[keep] |= groups[other]
                    groups[other] = set()
            groups[keep] |= {f.name(), parent.name()}
            for n in groups[keep]:
                group_of[n] = keep
    children: dict[str, list[str]] = {}
    for f, _, parent, _, _ in pairs:
        children.setdefault(parent.name(), []).append(f.name())
    position = {f.name(): i for i, f in enumerate(env.order)}
    ordered = []
    for members in (g for g in groups if g):
        for a in sorted(members):  # (the loops run them together: none may read another)
            for b in sorted(members & _transitive_callees(env, a)):
                raise CompileError(f"Invalid compute_with: there is dependency between {a} and {b}, which are "
                                   "computed with each other (in one fused group)")
        order: list[str] = []
        visiting: set[str] = set()

        def visit(name, order=order, visiting=visiting):
            if name in order:
                return
            if name in visiting:
                raise CompileError(f"Invalid compute_with: the compute_withs of {name} form a cycle")
            visiting.add(name)
            for child in children.get(name, []):
                visit(child)
            order.append(name)

        for name in sorted(members, key=position.__getitem__):
            visit(name)
        ordered.append([env.funcs[n] for n in order])
    env.fused_groups = ordered
    env.order = _order_with_groups(env, ordered)


def _order_with_groups(env, groups: list[list]) -> list:
    """env.order with each group's members together (children first), after all they call."""
    group_of = {f.name(): k for k, g in enumerate(groups) for f in g}
    computed = {f.name() for f in env.order}
    order: list = []
    state: dict = {}

    def unit_of(name: str) -> tuple:
        return ("group", group_of[name]) if name in group_of else ("func", name)

    def visit(unit):
        s = state.get(unit, 0)
        if s == 2:
            return
        if s == 1:
            raise CompileError("Invalid compute_with: the fused groups depend on each other in a cycle")
        state[unit] = 1
        members = [f.name() for f in groups[unit[1]]] if unit[0] == "group" else [unit[1]]
        for m in members:
            for callee in sorted(_computed_callees(env, m, computed)):
                if callee not in members:
                    visit(unit_of(callee))
        state[unit] = 2
        order.extend(env.funcs[m] for m in members)

    for f in env.order:
        visit(unit_of(f.name()))
    return order


def _computed_callees(env, name: str, computed: set[str]) -> set[str]:
    """The computed Funcs name calls, directly or through inlined ones."""
    found, todo, seen = set(), list(env.callees.get(name, [])), set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n in computed:
            found.add(n)
        else:
            todo.extend(env.callees.get(n, []))
    return found


def _stage_order(group, pairs) -> list[tuple]:
    """The group's stages in the order they are built (Halide's): a fused stage after its parent
    stage (it goes into that stage's loops), a parent stage after the stages of the child that
    come before the fused one, and each Func's stages in order."""
    fused = {(f.name(), s): (parent.name(), stage) for f, s, parent, stage, _ in pairs}
    waiting: dict[tuple, int] = {}
    unblocks: dict[tuple, list] = {}
    for f in group:
        previous = None
        for s in range(len(f.definitions())):
            parent = fused.get((f.name(), s))
            if parent is None:
                continue
            waiting[(f.name(), s)] = waiting.get((f.name(), s), 0) + 1
            unblocks.setdefault(parent, []).append((f.name(), s))
            if s > 0 and previous != parent:
                for j in range(s):
                    waiting[parent] = waiting.get(parent, 0) + 1
                    unblocks.setdefault((f.name(), j), []).append(parent)
            previous = parent
    order: list[tuple] = []
    next_stage = {f.name(): 0 for f in group}
    while len(order) < sum(len(f.definitions()) for f in group):
        progress = False
        for f in group:
            while next_stage[f.name()] < len(f.definitions()) and not waiting.get((f.name(), next_stage[f.name()])):
                stage = (f.name(), next_stage[f.name()])
                for other in unblocks.get(stage, []):
                    waiting[other] -= 1
                order.append((f, stage[1]))
                next_stage[f.name()] += 1
                progress = True
        if not progress:
            stuck = [f"{f.name()}.s{next_stage[f.name()]}" for f in group
                     if next_stage[f.name()] < len(f.definitions())]
            raise CompileError(f"There is a cycle inside of the fused group: {', '.join(stuck)} wait on each other")
    return order


class _Loops(IRVisitor):
    statements_only = True

    def __init__(self, found: dict):
        super().__init__()
        self.found = found

    def visit_For(self, s):
        self.found.setdefault(s.name, s)
        self.visit_children(s)


def _last(loop: ir.For) -> ir.Expr:
    return ir.Sub(ir.Add(loop.min, loop.extent), _ONE)


def _in_range(v: ir.Expr, lo: ir.Expr, hi: ir.Expr) -> ir.Expr:
    return ir.And(ir.GE(v, lo), ir.LE(v, hi))


def _same(a: ir.Expr, b: ir.Expr) -> bool:
    return ir.is_const(simplify(ir.EQ(a, b)), 1)


class _FuseStage(IRMutator):
    """One stage's nest in its group: its loops fused with a parent's run once, at the real
    loop's value; its real loops span their unions; its guards wrap its own body inside `guard_at`
    (the innermost of those loops: the children go after it, unguarded by it); the children's
    nests go at the end of the loops they are fused into."""

    statements_only = True

    def __init__(self, at: dict, unions: dict, guards: list, guard_at: str, children: dict):
        super().__init__()
        self.at, self.unions, self.children = at, unions, children
        self.guards, self.guard_at = guards, guard_at

    def visit_For(self, s):
        body = self.mutate(s.body)
        if s.name == self.guard_at and self.guards:
            cond = self.guards[0]
            for g in self.guards[1:]:
                cond = ir.And(cond, g)
            body = ir.IfThenElse(cond, body)
        body = ir.make_block([body, *self.children.get(s.name, [])])
        if s.name in self.at:
            return ir.For(s.name, self.at[s.name], _ONE, ir.SERIAL, body)
        if s.name in self.unions:
            lo, hi = self.unions[s.name]
            return ir.For(s.name, lo, simplify(ir.Add(ir.Sub(hi, lo), _ONE)), s.for_type, body)
        return ir.For(s.name, s.min, s.extent, s.for_type, body)


def build_group_produce(env, group, outermost: bool) -> tuple[ir.Stmt, dict, set]:
    """The production of a fused group (see the module docstring), each member's stages as
    nests of their own (bounds inference reads what the later stages of a Func touch there),
    and the names of the real loops;
    with `outermost` (or a fusion at Var.outermost()), each stage in its `__outermost` loop."""
    from .schedule_functions import OUTERMOST, build_stage, loop_name, stage_schedule

    names = {f.name() for f in group}
    pairs = [p for p in env.fused_pairs if p[0].name() in names]
    parent_of = {(f.name(), s): (parent, stage, level) for f, s, parent, stage, level in pairs}
    order = _stage_order(group, pairs)
    outermost = outermost or any(level.var_name == OUTERMOST for *_, level in pairs)
    outer_dims = [Dim(OUTERMOST, OUTERMOST)] if outermost else []

    def loop_dims(f, s) -> list:
        """The stage's loops, innermost first, with its `__outermost` loop if it has one."""
        return [*stage_schedule(f, s).dims, *outer_dims]

    zero = ir.make_const(_I32, 0)
    nests = {(f.name(), s): build_stage(f, s) for f, s in order}
    if outermost:
        nests = {(f.name(), s): ir.For(loop_name(f, s, OUTERMOST), zero, _ONE, ir.SERIAL, nests[(f.name(), s)])
                 for f, s in order}
    loops: dict[str, ir.For] = {}
    for nest in nests.values():
        _Loops(loops).visit(nest)
    alias: dict[str, tuple[str, ir.Expr]] = {}  # a fused child loop -> (its real loop, offset below it)
    spans: dict[str, list] = {}  # a real loop -> the ranges, in its coordinates, of the stages fused in it
    hosted: dict[str, list] = {}  # a real loop -> the child stages whose nests go at the end of its body
    for f, s in order:
        if (f.name(), s) not in parent_of:
            continue
        parent, stage, level = parent_of[(f.name(), s)]
        mine = fused_dims(stage_schedule(f, s), level.var_name, outermost)
        theirs = fused_dims(stage_schedule(parent, stage), level.var_name, outermost)
        for dim, parent_dim in zip(mine, theirs):
            name, parent_name = loop_name(f, s, dim.internal), loop_name(parent, stage, parent_dim.internal)
            own, parent_loop = loops[name], loops[parent_name]
            strategy = f._schedule.stages[s].fuse_align.get(dim.name, LoopAlignStrategy.NoAlign)
            shift = {LoopAlignStrategy.AlignStart: ir.Sub(parent_loop.min, own.min),
                     LoopAlignStrategy.AlignEnd: ir.Sub(_last(parent_loop), _last(own))}.get(strategy, zero)
            real, parent_offset = alias.get(parent_name, (parent_name, zero))
            offset = simplify(ir.Add(parent_offset, shift))
            alias[name] = (real, offset)
            spans.setdefault(real, [(loops[real].min, _last(loops[real]))]).append(
                (simplify(ir.Add(own.min, offset)), simplify(ir.Add(_last(own), offset))))
        hosted.setdefault(alias[loop_name(f, s, mine[-1].internal)][0], []).append((f, s))
    unions = {}
    for real, ranges in spans.items():
        lo, hi = ranges[0]
        for a, b in ranges[1:]:
            lo, hi = ir.Min(lo, a), ir.Max(hi, b)
        unions[real] = (simplify(lo), simplify(hi))

    def fused_nest(f, s) -> ir.Stmt:
        at, guards, guard_at = {}, [], None
        for dim in reversed(loop_dims(f, s)):  # outermost first
            name = loop_name(f, s, dim.internal)
            own = loops[name]
            if name in alias:
                real, offset = alias[name]
                at[name] = simplify(ir.Sub(ir.Variable(real, _I32), offset))
                lo, hi = unions[real]
                covered = _same(lo, ir.Add(own.min, offset)) and _same(hi, ir.Add(_last(own), offset))
            elif name in unions:
                lo, hi = unions[name]
                covered = _same(lo, own.min) and _same(hi, _last(own))
            else:
                continue
            guard_at = name
            if not covered:
                guards.append(_in_range(ir.Variable(name, _I32), own.min, _last(own)))
        children = {}
        for dim in loop_dims(f, s):
            name = loop_name(f, s, dim.internal)
            children[name] = [fused_nest(g, k) for g, k in hosted.get(name, [])]
        return _FuseStage(at, unions, guards, guard_at, children).mutate(nests[(f.name(), s)])

    checks = []
    for f, s, depth, _ in interleaved_stages(pairs):
        for d in stage_schedule(f, s).dims[-depth:]:  # (checked: the same Vars in both stages)
            offset, offset_before = alias[loop_name(f, s, d.internal)][1], alias[loop_name(f, s - 1, d.internal)][1]
            if not _same(offset, offset_before):
                checks.append(ir.AssertStmt(
                    ir.EQ(offset, offset_before),
                    f"Invalid compute_with: {f.name()}.s{s} and {f.name()}.s{s - 1} run interleaved in the loop "
                    f"over {d.name} they are fused into, but aligned differently (shifted by {{}} and {{}}): "
                    f"{f.name()}.s{s} would not run after {f.name()}.s{s - 1} at each point. Align them the same way.",
                    (offset, offset_before)))
    nests_at_top = [fused_nest(f, s) for f, s in order if (f.name(), s) not in parent_of]
    produce: ir.Stmt = ir.make_block([*checks, *nests_at_top])
    for f in group:
        produce = ir.ProducerConsumer(f.name(), True, produce)
    stages = {f.name(): [nests[(f.name(), s)] for s in range(len(f.definitions()))] for f in group}
    return produce, stages, set(unions)
