"""The Func graph as the schedule sees it: who calls whom, through in_() wrappers and rfactor.

Lowering, the schedule strategies of the tests and the autoscheduler's search space all walk the
graph the same way, so the legality of a placement has one source of truth. The walk reads the
algorithm and the schedule data; it changes neither.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import ir
from .errors import CompileError, InternalError
from .ir_mutator import IRVisitor


class _CalledFuncs(IRVisitor):
    """The Funcs an expression calls, by name, in the order they first appear."""

    visit_once = True

    def __init__(self):
        super().__init__()
        self.funcs: dict[str, object] = {}

    def visit_Call(self, c):
        if c.call_type == ir.HALIDE:
            _add_func(self.funcs, c.name, c.func)
        self.visit_children(c)


def _add_func(funcs: dict, name: str, f) -> None:
    """funcs[name] = f. Funcs are named uniquely when made (names.unique_func_name)."""
    if funcs.setdefault(name, f) is not f:
        raise InternalError(f"two different Funcs are both named {name}")


def called_funcs(exprs) -> dict[str, object]:
    v = _CalledFuncs()
    for e in exprs:
        if e is not None:
            v.visit(e)
    return v.funcs


def direct_callees(exprs) -> dict[str, object]:
    """The Funcs the expressions call, schedules aside, by name: those called and the own Funcs
    (`hl.Func(img)`) of the ImageParams read."""
    exprs = [e for e in exprs if e is not None]
    own = [g for img in called_images(exprs) if (g := getattr(img, "_implicit_func", None)) is not None]
    out = {g.name(): g for g in own}
    for name, g in called_funcs(exprs).items():
        _add_func(out, name, g)
    return out


def loop_exprs(d) -> list:
    """What a definition evaluates inside its loops: left-hand arguments, values, predicate."""
    return [*d.args, *d.values, *([d.predicate] if d.predicate is not None else [])]


def bound_exprs(d) -> list:
    """What a definition evaluates before its loops: the bounds of its RVars."""
    return [e for rv in d.rvars for e in (rv.min, rv.extent)]


def wrapper_for(callee, consumer):
    """The Func that `consumer`'s calls to `callee` reach: callee's wrapper for that consumer, else
    its global wrapper (f.in_()), else callee itself. A wrapper's own calls reach the Func it wraps;
    a wrapper may be wrapped in turn."""
    seen = set()
    while id(callee) not in seen:
        seen.add(id(callee))
        wrappers = callee._schedule.wrappers
        if any(w is consumer for w in wrappers.values()):
            return callee
        w = wrappers.get(consumer.name(), wrappers.get(""))
        if w is None:
            return callee
        callee = w
    return callee


class _CalledImages(IRVisitor):
    visit_once = True

    def __init__(self):
        super().__init__()
        self.images: list = []

    def visit_Call(self, c):
        if c.call_type == ir.IMAGE and c.image is not None and all(c.image is not i for i in self.images):
            self.images.append(c.image)
        self.visit_children(c)


def image_callee(image, consumer):
    """The Func that consumer's reads of an ImageParam reach: the image's own Func (`hl.Func(img)`,
    where one was made; the image itself is read by that Func alone), through its wrappers
    (`img.in_()`); None where the reads reach the image."""
    own = getattr(image, "_implicit_func", None)
    return None if own is None or own is consumer else wrapper_for(own, consumer)


def called_images(exprs) -> list:
    """The images (Buffers, ImageParams) the expressions read, first read first."""
    images = _CalledImages()
    for e in exprs:
        if e is not None:
            images.visit(e)
    return images.images


def image_funcs_to_make(funcs) -> dict:
    """{`img_im`: img} for each ImageParam the Funcs read that has no Func of its own yet: the
    names a schedule record may give the Funcs `hl.Func(img)` makes."""
    from .param import ImageParam

    exprs = [e for f in funcs for d in f.definitions() for e in (*loop_exprs(d), *bound_exprs(d))]
    return {f"{img.name()}_im": img for img in called_images(exprs)
            if isinstance(img, ImageParam) and img._implicit_func is None}


def _called_image_funcs(exprs, consumer) -> list:
    return [f for img in called_images(exprs) if (f := image_callee(img, consumer)) is not None]


def scheduled_callees(f) -> dict[str, object]:
    """The Funcs f's scheduled definitions call, after wrappers (of Funcs and of images), by name
    (first use first)."""
    out: dict[str, object] = {}
    exprs = [e for _, d in f.all_scheduled_definitions() for e in (*loop_exprs(d), *bound_exprs(d))]
    for w in _called_image_funcs(exprs, f):
        _add_func(out, w.name(), w)
    for g in called_funcs(exprs).values():
        if g is not f:
            _add_func(out, (w := wrapper_for(g, f)).name(), w)
    return out


def reachable_funcs(outputs) -> dict[str, object]:
    """Every Func the outputs need under their current schedules (wrappers and rfactor's
    intermediates included), by name; refuses undefined Funcs. The order is that of a
    depth-first walk from the outputs, so it depends only on the program."""
    funcs: dict[str, object] = {}
    seen: set[int] = set()
    stack = list(reversed(outputs))
    while stack:
        f = stack.pop()
        if id(f) in seen:
            continue
        if not f.defined():
            raise CompileError(f"Func {f.name()} is called but has not been defined")
        _add_func(funcs, f.name(), f)
        seen.add(id(f))
        stack.extend(reversed(list(scheduled_callees(f).values())))
    return funcs


def algorithm_funcs(outputs) -> list:
    """The Funcs the outputs' algorithm calls, schedules aside (no wrappers, no rfactor
    intermediates), in a depth-first walk from the outputs: the same list before and after any
    schedule, so names numbered in its order are too."""
    seen: dict[int, object] = {}
    stack = list(reversed(outputs))
    while stack:
        f = stack.pop()
        if id(f) in seen or not f.defined():
            continue
        seen[id(f)] = f
        exprs = [e for d in f.definitions() for e in (*loop_exprs(d), *bound_exprs(d))]
        stack.extend(reversed([g for g in direct_callees(exprs).values() if g is not f]))
    return list(seen.values())


@dataclass
class Graph:
    """Who calls whom, for choosing where each Func may be computed."""

    funcs: dict[str, object]  # every Func the outputs reach, by name
    # callers[f][g] = the stages of g that call f (None: outside g's loops, in an RDom's bounds)
    callers: dict[str, dict[str, set]]
    order: list[str]  # consumers first


def call_graph(outputs) -> Graph:
    funcs = reachable_funcs(outputs)
    callers: dict[str, dict[str, set]] = {}
    for name, f in funcs.items():
        for s, d in f.all_scheduled_definitions():
            for stage, exprs in ((s, loop_exprs(d)), (None, bound_exprs(d))):
                callees = [wrapper_for(g, f) for g in called_funcs(exprs).values() if g is not f]
                for callee in (*callees, *_called_image_funcs(exprs, f)):
                    callers.setdefault(callee.name(), {}).setdefault(name, set()).add(stage)
    post: list[str] = []
    seen: set[str] = set()

    def visit(name):
        if name in seen:
            return
        seen.add(name)
        for callee in scheduled_callees(funcs[name]):
            visit(callee)
        post.append(name)

    for f in outputs:
        visit(f.name())
    return Graph(funcs, callers, list(reversed(post)))
