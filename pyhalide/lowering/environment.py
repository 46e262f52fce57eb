"""The Funcs a pipeline needs, the order they are realized in, and which are inlined."""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import ir
from ..errors import CompileError
from ..ir_mutator import IRVisitor
from ..schedule import LoopLevel


def definition_exprs(func):
    """Every expression of every definition of func: args, values, predicates and RDom bounds."""
    for d in func.definitions():
        yield from d.args
        yield from d.values
        if d.predicate is not None:
            yield d.predicate
        for rv in d.rvars:
            yield rv.min
            yield rv.extent


class _Calls(IRVisitor):
    visit_once = True

    def __init__(self):
        super().__init__()
        self.funcs: dict[str, object] = {}
        self.images: dict[str, object] = {}
        self.params: dict[str, object] = {}

    def visit_Call(self, c):
        if c.call_type == ir.HALIDE:
            self.funcs.setdefault(c.name, c.func)
        elif c.call_type == ir.IMAGE:
            self.images.setdefault(c.name, c.image)
        self.visit_children(c)

    def visit_Variable(self, v):
        from ..param import Param

        if isinstance(v.ref, Param):
            self.params.setdefault(v.name, v.ref)
        elif v.ref is not None and hasattr(v.ref, "dimensions") and not hasattr(v.ref, "rvars"):
            self.images.setdefault(v.name.rsplit(".", 2)[0], v.ref)


def _apply_global_wrappers(f) -> None:
    """Calls from f to a Func with a global wrapper (g.in_()) go to the wrapper instead."""
    from ..scheduling import redirect_calls

    calls = _Calls()
    for e in definition_exprs(f):
        calls.visit(e)
    for callee in calls.funcs.values():
        wrapper = callee._schedule.global_wrapper
        if wrapper is not None and wrapper is not f:
            redirect_calls(f, callee, wrapper)


@dataclass
class Environment:
    outputs: list
    funcs: dict[str, object]  # every Func reached, by name
    order: list  # realization order of the computed (not inlined) Funcs, producers first
    inlined: set[str] = field(default_factory=set)

    def is_output(self, f) -> bool:
        return any(o is f for o in self.outputs)


def build_environment(outputs) -> Environment:
    """Walk the call graph from the outputs; check names are unique and there are no cycles."""
    funcs: dict[str, object] = {}
    callees: dict[str, list[str]] = {}
    stack = list(outputs)
    for f in outputs:
        if not f.defined():
            raise CompileError(f"Func {f.name()} has not been defined; it cannot be realized")
    while stack:
        f = stack.pop()
        name = f.name()
        if name in funcs:
            if funcs[name] is not f:
                raise CompileError(f"Two different Funcs are both named {name}")
            continue
        if not f.defined():
            raise CompileError(f"Func {name} is called but has not been defined")
        funcs[name] = f
        _apply_global_wrappers(f)
        calls = _Calls()
        for e in definition_exprs(f):
            calls.visit(e)
        callees[name] = [n for n in calls.funcs if n != name]
        stack.extend(calls.funcs.values())

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

    env = Environment(list(outputs), funcs, [])
    for name in order_names:
        f = funcs[name]
        sched = f._schedule
        if env.is_output(f):
            if sched.compute_level.kind == "at" or sched.explicit_inline:
                raise CompileError(f"Func {name} is an output of the pipeline, so it is computed at root; it can't "
                                   f"be scheduled {sched.compute_level}")
            env.order.append(f)
        elif sched.explicit_inline or (sched.is_default and not f.has_update_definition()):
            if f.has_update_definition():
                raise CompileError(f"Func {name} has update definitions and cannot be inlined")
            if any(s.initialized and (s.splits or any(d.for_type != "serial" for d in s.dims))
                   for s in sched.stages):
                raise CompileError(f"Func {name} is inlined but its loops are scheduled (split, vectorize ...); "
                                   "compute it somewhere (compute_root or compute_at) or remove those directives")
            env.inlined.add(name)
        else:
            env.order.append(f)
    return env


def compute_level(f):
    """The LoopLevel where f is computed: default-scheduled Funcs with updates go to root."""
    level = f._schedule.compute_level
    return level if level.kind == "at" else LoopLevel.root()


def store_level(f):
    level = f._schedule.store_level
    return compute_level(f) if level is None or level.is_inlined() else level


def collect_inputs(node) -> tuple[dict, dict]:
    """The input images and Params an IR node uses, by name."""
    calls = _Calls()
    calls.visit(node)
    return calls.images, calls.params


def pipeline_inputs(env) -> tuple[dict, dict]:
    """The input images and Params of every Func the pipeline uses, by name."""
    calls = _Calls()
    for f in env.funcs.values():
        for e in definition_exprs(f):
            calls.visit(e)
    return calls.images, calls.params
