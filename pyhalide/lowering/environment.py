"""The Funcs a pipeline needs (lowering's own copies), the order they are realized in, and which are inlined."""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import ir
from ..errors import CompileError, InternalError
from ..extern import extern_call, is_extern
from ..ir_mutator import IRVisitor
from ..ir_printer import expr_to_string
from ..schedule import LoopLevel
from .copy_graph import copy_graph, definition_exprs, errors_in_user_names
from .fused_loops import find_fused_groups


def schedule_exprs(func):
    """The expressions func's schedule adds: bounds (`bound`, `bound_extent`), split factors of
    Params, the conditions of its specializations, at every depth, and the memoization key's
    (its eviction key, the tags of memoize_tag calls in its definitions). The Params they name
    are pipeline inputs too."""
    sched = func._schedule
    if isinstance(sched.eviction_key, ir.Expr):
        yield sched.eviction_key
    yield from getattr(func, "_tagged_exprs", ())  # (tags the definitions no longer hold)
    for kind, lo, extent in sched.bounds.values():
        if kind not in ("align", "align_extent"):
            yield from (e for e in (lo, extent) if isinstance(e, ir.Expr))
    stages = list(sched.stages)
    while stages:
        stage = stages.pop()
        yield from (sp.factor for sp in stage.splits if isinstance(sp.factor, ir.Expr))
        for cond, special in stage.specializations:
            yield cond
            stages.append(special)


class _Calls(IRVisitor):
    visit_once = True

    def __init__(self):
        super().__init__()
        self.funcs: dict[str, object] = {}
        self.images: dict[str, object] = {}
        self.params: dict[str, object] = {}

    def visit_Call(self, c):
        if c.call_type == ir.HALIDE:
            if self.funcs.setdefault(c.name, c.func) is not c.func:  # names are unique (names.unique_func_name)
                raise InternalError(f"two different Funcs are both named {c.name}")
        elif c.call_type == ir.IMAGE:
            self._input(self.images, c.name, c.image, "input images")
        self.visit_children(c)

    def visit_Variable(self, v):
        from ..param import Param

        if isinstance(v.ref, Param):
            self._input(self.params, v.name, v.ref, "Params")
        elif v.ref is not None and hasattr(v.ref, "dimensions") and not hasattr(v.ref, "rvars"):
            self._input(self.images, v.name.rsplit(".", 2)[0], v.ref, "input images")

    @staticmethod
    def _input(known: dict, name: str, obj, what: str) -> None:
        """Inputs are passed by name: two different objects under one name would read the same data
        (Halide silently reads one of them for both). Two Buffers viewing the same memory the same way are one."""
        first = known.setdefault(name, obj)
        if first is not obj and not (hasattr(first, "same_view") and first.same_view(obj)):
            raise CompileError(f"Two different {what} are both named {name!r}: the pipeline would read one of them "
                               f"for both; give them distinct names")


@dataclass
class Environment:
    """The lowering's own Func graph (copies: see copy_graph.py) and what it decided about it."""

    outputs: list
    funcs: dict[str, object]  # every Func reached, by name
    order: list  # realization order of the computed (not inlined) Funcs, producers first
    inlined: set[str] = field(default_factory=set)
    callees: dict[str, list[str]] = field(default_factory=dict)
    levels: dict[str, LoopLevel] = field(default_factory=dict)  # default compute levels decided here
    target: object = None  # the Target lowered for
    buffer_constants: dict = field(default_factory=dict)  # `buffer.field.dimension` -> the constant it is
    sources: list = field(default_factory=list)  # the user's Funcs the copies were made from
    # output buffer -> (lets, [(min, max) per dimension]) of the box its stages write, where a
    # schedule writes beyond the region asked for (buffer checks); realize(sizes) grows into it
    grown_outputs: dict[str, tuple] = field(default_factory=dict)
    # Funcs some stage reads past the region they compute (bounds.WITHIN_REGION): their storage
    # covers those reads too (bounds inference finds them, allocation bounds sizes them)
    read_past_region: set[str] = field(default_factory=set)
    # generated names the copy renamed (see copy_graph.py) -> the user's: what messages show
    user_names: dict[str, str] = field(default_factory=dict)
    # compute_with (fused_loops.py): (child, stage, parent, stage, level) of each fused stage; the
    # groups of Funcs fused together (children first); each member's stages as nests of their own
    fused_pairs: list[tuple] = field(default_factory=list)
    fused_groups: list[list] = field(default_factory=list)
    fused_stages: dict[str, list] = field(default_factory=dict)
    fused_loops: set[str] = field(default_factory=set)  # the loops other stages' loops are fused into

    def fused_group(self, f) -> list | None:
        return next((g for g in self.fused_groups if any(m is f for m in g)), None)

    def is_output(self, f) -> bool:
        return any(o is f for o in self.outputs)


def build_environment(outputs, target=None) -> Environment:
    """Copy the call graph reached from the outputs; order it and decide what is inlined. Refuses
    undefined Funcs, two Funcs with one name and cycles."""
    for f in outputs:
        if not f.defined():
            raise CompileError(f"Func {f.name()} has not been defined; it cannot be realized")
    outputs, funcs, sources, user_names = copy_graph(outputs)
    with errors_in_user_names(user_names):
        return _environment(outputs, funcs, sources, user_names, target)


def _environment(outputs, funcs, sources, user_names, target) -> Environment:
    callees: dict[str, list[str]] = {}
    for name, f in funcs.items():
        calls = _Calls()
        for e in definition_exprs(f):
            calls.visit(e)
        callees[name] = [n for n in calls.funcs if n != name]

    # topological order, producers first (depth-first post-order from the outputs)
    order_names: list[str] = []
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]):
        s = state.get(name, 0)
        if s == 2:
            return
        if s == 1:
            raise CompileError(f"Cyclic dependency between Funcs: {' -> '.join(path + [name])}")
        state[name] = 1
        for c in callees[name]:
            visit(c, path + [name])
        state[name] = 2
        order_names.append(name)

    for f in outputs:
        visit(f.name(), [])

    env = Environment(list(outputs), funcs, [], callees=callees, target=target, sources=sources,
                      user_names=user_names)
    for name in order_names:
        f = funcs[name]
        sched = f._schedule
        if not sched.compute_level.defined() or (sched.store_level is not None and not sched.store_level.defined()):
            raise CompileError(f"Func {f.name()}: There should be no undefined LoopLevels at the start of lowering. "
                               "(Did you mean to use LoopLevel::inlined() instead of LoopLevel() ?)")
        if env.is_output(f):
            # An output is computed at root whatever its compute and store levels say (as in
            # Halide: an intermediate scheduled inside its consumer can be realized on its own).
            if sched.compute_level.kind == "at" or sched.explicit_inline or sched.store_level is not None:
                sched.compute_level, sched.store_level, sched.compute_placed = LoopLevel.root(), None, False
            env.order.append(f)
        elif sched.compute_level.is_inlined() and sched.hoist_level is not None and not sched.hoist_level.is_inlined():
            # (a Func with updates too, which is computed in its consumer's innermost loop: as Halide)
            raise CompileError(f"Func {name} is scheduled hoist_storage(), but is inlined: it has no storage to "
                               f"hoist to {level_text(sched.hoist_level)}. Funcs that use hoist_storage must also "
                               "call compute_at.")
        elif sched.explicit_inline or (sched.is_default and not f.has_update_definition() and not sched.buffer_copy
                                       and not is_extern(f)):
            if is_extern(f):
                raise CompileError(f"Func {name} is an extern stage and cannot be computed inline")
            if f.has_update_definition():
                raise CompileError(f"Func {name} has update definitions and cannot be inlined")
            if sched.store_level is not None and not sched.store_level.is_inlined():
                raise CompileError(f"Func {name} is computed inline, so it has no storage to place at "
                                   f"{sched.store_level}: compute it there (or within it) with compute_at as well")
            _check_inlined_loops(name, sched.stages[0])
            env.inlined.add(name)
        else:
            env.order.append(f)
    for f in env.order:
        call = extern_call(f)
        if call is not None and target is not None and target.has_gpu_feature():
            raise CompileError(f"Func {f.name()} is an extern stage: pyhalide runs extern stages in pipelines for "
                               f"CPU targets only, not for {target}")
        if f._debug_file is not None and target is not None and target.has_gpu_feature():
            raise CompileError(f"Func {f.name()}.debug_to_file: pyhalide writes the files of pipelines for CPU "
                               f"targets only, not for {target}")
        for _, input_call in call.func_inputs() if call else ():
            if input_call.name in env.inlined:
                raise CompileError(f"Func {input_call.name} cannot be scheduled to be computed inline, because it is "
                                   f"used in the externally-computed function {f.name()}")
        # A Func with update definitions (or an extern stage) that is not placed cannot be inlined:
        # Halide computes it in the innermost loop of the stage that uses it (the same for inline
        # reductions).
        if f._schedule.is_default and not env.is_output(f) and \
                (f._schedule.innermost_default or f.has_update_definition() or call is not None):
            level = _innermost_consumer_loop(env, f.name())
            if level is not None:
                env.levels[f.name()] = level
    find_fused_groups(env)
    return env


_LOOP_VERBS = {"vectorized": "vectorize", "unrolled": "unroll"}


def _check_inlined_loops(name: str, stage) -> None:
    """As Halide: an inlined Func's loops may not be vectorized, unrolled or parallel; its
    splits, fuses and renames mean nothing, and say so on stdout."""
    if not stage.initialized:
        return
    for d in stage.dims:
        if d.for_type != "serial":
            verb = _LOOP_VERBS.get(d.for_type, "parallelize")
            raise CompileError(f"Cannot {verb} dimension {d.name} of function {name} because the function is "
                               "scheduled inline.")
    for sp in stage.splits:
        if sp.kind == "split":
            what = (f"split variable {sp.old} of function {name} into {sp.outer} * "
                    f"{expr_to_string(sp.factor_expr())} + {sp.inner}")
        elif sp.kind == "fuse":
            what = f"fuse variables {sp.old} and {sp.outer}"
        else:
            what = f"rename variable {sp.old} of function {name} to {sp.outer}"
        print(f"Warning: It is meaningless to {what} because {name} is scheduled inline.")


def _innermost_consumer_loop(env, name: str):
    """Where a Func with updates goes by default: the innermost loop of the one computed stage
    that uses it (a vector loop too: vectorize_loops gives each lane its own storage), else None
    (root; Halide computes one in each stage that uses it)."""
    from .schedule_functions import stage_schedule

    users = [g for g, cs in env.callees.items() if name in cs]
    while len(users) == 1 and users[0] in env.inlined:
        users = [g for g, cs in env.callees.items() if users[0] in cs]
    if len(users) != 1:
        return None
    g = env.funcs[users[0]]
    stages = sorted({s for s, d in g.all_scheduled_definitions() if _stage_reaches(env, d, name)})
    if len(stages) != 1:
        return None
    dims = stage_schedule(g, stages[0]).dims  # innermost first
    return LoopLevel(g.name(), dims[0].name, stages[0]) if dims else None


def _stage_reaches(env, definition, name: str) -> bool:
    """Does this definition call `name`, directly or through inlined Funcs?"""
    calls = _Calls()
    for e in (*definition.args, *definition.values, *([definition.predicate] if definition.predicate else [])):
        calls.visit(e)
    todo, seen = list(calls.funcs), set()
    while todo:
        n = todo.pop()
        if n == name:
            return True
        if n in env.inlined and n not in seen:
            seen.add(n)
            todo.extend(env.callees.get(n, []))
    return False


def compute_level(f, env=None):
    """The LoopLevel where f is computed: its schedule's, else a level lowering chose, else root."""
    level = f._schedule.compute_level
    if level.kind == "at":
        return level
    if env is not None and f.name() in env.levels:
        return env.levels[f.name()]
    return LoopLevel.root()


def store_level(f, env=None):
    level = f._schedule.store_level
    return compute_level(f, env) if level is None or level.is_inlined() else level


def hoist_level(f, env=None):
    """Where hoist_storage puts f's storage (by default its store level)."""
    level = f._schedule.hoist_level
    return store_level(f, env) if level is None or level.is_inlined() else level


def level_text(level) -> str:
    """A LoopLevel in messages: root, inline, or func.var."""
    return f"{level.func_name}.{level.var_name}" if level.kind == "at" else level.kind


def collect_inputs(node) -> tuple[dict, dict]:
    """The input images and Params an IR node uses, by name."""
    calls = _Calls()
    calls.visit(node)
    return calls.images, calls.params


def pipeline_inputs(env) -> tuple[dict, dict]:
    """The input images and Params of every Func the pipeline uses, by name."""
    calls = _Calls()
    for f in env.funcs.values():
        for e in (*definition_exprs(f), *schedule_exprs(f)):
            calls.visit(e)
    return calls.images, calls.params
