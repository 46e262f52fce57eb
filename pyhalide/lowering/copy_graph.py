"""Lowering's private copy of the Func graph (Halide deep-copies its environment too).

The copy
- applies the schedule's changes to the graph: consumers call their `in_()` wrappers, updates
  that rfactor split reduce their intermediates;
- renames generated names (`hl.Func()` is "f12", an unnamed RDom "r3", `hl.sum`'s Func "sum7",
  an anonymous Buffer "b4" ...: per-process counters) canonically, numbered in the order a walk
  from the outputs meets them, so the same program lowers to the same IR text, and the same
  compile-cache key, in any process whatever ran before;
- leaves the user's Funcs as they were: schedules are copied, definitions rebuilt (IR nodes are
  immutable, so rebuilding shares every unchanged subtree).
"""

from __future__ import annotations

import re
from contextlib import contextmanager

from .. import ir
from ..call_graph import image_callee, reachable_funcs, wrapper_for
from ..errors import HalideError
from ..func import Definition
from ..integer_ops import MEMOIZE_TAG
from ..ir_mutator import IRMutator, IRVisitor, has_call
from ..names import func_name_family, generated_prefix, is_generated, map_name_tokens, name_tokens
from ..schedule import LoopLevel, Prefetch, Split
from ..var import ReductionVariable


class _Names(IRVisitor):
    """Every name token an expression uses (Variables, image reads), in the order met."""

    visit_once = True

    def __init__(self, found: dict[str, None]):
        super().__init__()
        self.found = found
        self.given: set[str] = set()  # the names the user gave Params and ImageParams

    def _add(self, name: str):
        for token in name_tokens(name):
            self.found.setdefault(token)

    def _add_param(self, name: str, param):
        self._add(name)
        if getattr(param, "_generated_name", True) is False:
            self.given.add(name)

    def visit_Variable(self, v):
        self._add_param(v.name, v.ref)

    def visit_Let(self, e):
        self._add(e.name)
        self.visit_children(e)

    def visit_Call(self, c):
        if c.call_type == ir.IMAGE:
            self._add_param(c.name, c.image)
        self.visit_children(c)


def _schedule_names(sched) -> list[str]:
    names = [n for st in sched.stages for d in st.dims for n in (d.name, d.internal)]
    names += [n for st in sched.stages for sp in st.splits for n in (sp.old, sp.outer, sp.inner)]
    for level in (sched.compute_level, sched.store_level, sched.hoist_level, *(st.fuse_level for st in sched.stages)):
        if level is not None and level.kind == "at":
            names += [level.func_name, level.var_name]
    return names


def canonical_names(funcs, schedules: bool = True) -> dict[str, str]:
    """For each generated name token the Funcs use, its canonical replacement (only those that
    change): the generated prefix numbered in order of first use, skipping names the user gave.
    schedules=False: the algorithm's names only (schedule records, whose schedules come after)."""
    found: dict[str, None] = {}
    finder = _Names(found)
    for f in funcs:
        for name in (f.name(), *f._pure_args):
            finder._add(name)
        for d in ([d for _, d in f.all_scheduled_definitions()] if schedules else f.definitions()):
            for rv in d.rvars:
                finder._add(rv.name)
            for e in (*d.args, *d.values, d.predicate, *(x for rv in d.rvars for x in (rv.min, rv.extent))):
                finder.visit(e)
        if schedules:
            for name in _schedule_names(f._schedule):
                finder._add(name)
    families = _renamed_families(funcs)
    named = {f.name() for f in funcs if not f._generated_name}
    given = {t for t in found if (t in named or t in finder.given or not is_generated(t)) and t not in families}
    mapping = _number_families(families, given)
    taken = given | {mapping.get(name, name) for name in families}
    counters: dict[str, int] = {}
    for token in found:
        if token in given or token in families:
            continue
        prefix = generated_prefix(token)
        k = counters.get(prefix, 0)
        while f"{prefix}{k}" in taken:
            k += 1
        counters[prefix] = k + 1
        if f"{prefix}{k}" != token:
            mapping[token] = f"{prefix}{k}"
    return mapping


def _renamed_families(funcs) -> dict[str, str]:
    """The pipeline's Funcs whose name family (the name they were given) has a renamed member
    here ("f$7", see names.unique_func_name): their names by family, in the walk's order."""
    names = [f.name() for f in funcs]
    renamed = {func_name_family(n) for n in names if func_name_family(n) != n}
    return {n: func_name_family(n) for n in names if func_name_family(n) in renamed}


def first_free_name(family: str, taken) -> str:
    """The first of `family`, `family$1`, `family$2`... not in taken."""
    k = 0
    while (candidate := family if k == 0 else f"{family}${k}") in taken:
        k += 1
    return candidate


def _number_families(families: dict[str, str], taken: set[str]) -> dict[str, str]:
    """Each family numbered again in order of first use: the first keeps the name given, the
    next are `name$1`, `name$2`..., skipping names taken, so a pipeline's Func names don't
    depend on what the process made before (only those that change)."""
    taken = set(taken)
    mapping: dict[str, str] = {}
    for name, family in families.items():
        candidate = first_free_name(family, taken)
        taken.add(candidate)
        if candidate != name:
            mapping[name] = candidate
    return mapping


def canonical_func_names(funcs) -> dict[str, str]:
    """The Funcs' names as a fresh process would make them (only those that differ): each name
    family numbered again in the order given (see _number_families)."""
    families = _renamed_families(funcs)
    return _number_families(families, {f.name() for f in funcs} - families.keys())


def number_made_funcs(made, mapping: dict[str, str], taken: set[str]) -> dict[str, str]:
    """mapping, plus the canonical names of Funcs a schedule made (wrappers, rfactor's
    intermediates) that were renamed when made: the first name of their family not yet taken
    (`taken`: the algorithm's Funcs' canonical names)."""
    renamed = {f.name(): func_name_family(f.name()) for f in made if func_name_family(f.name()) != f.name()}
    return {**mapping, **_number_families(renamed, taken)}


class _Renamer:
    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping
        self.memo: dict[str, str] = {}

    def __call__(self, name: str) -> str:
        if not self.mapping:
            return name
        out = self.memo.get(name)
        if out is None:
            out = self.memo[name] = map_name_tokens(name, self.mapping)
        return out

    def expr(self, e):
        """A schedule's Expr (a bound, a specialization's condition) in the new names, without
        memoize_tag calls; anything else as it is. (It may name an output's buffer: `f.output_buffer().width()`.)"""
        e = without_memoize_tags(e)
        return _RenameVariables(self).mutate(e) if self.mapping and isinstance(e, ir.Expr) else e

    def level(self, level: LoopLevel | None) -> LoopLevel | None:
        if level is None or level.kind != "at" or not self.mapping:
            return level
        return LoopLevel(self(level.func_name), self(level.var_name), level.stage_index)

    def schedule(self, sched):
        """A copy of a Func's schedule in the new names, with its graph changes (wrappers, rfactor)
        dropped: the copied definitions already carry them."""
        s = sched.copy()
        s.wrappers, s.log = {}, []
        for st in s.stages:
            st.definition = None  # the copy's own definitions
        s.compute_level, s.store_level = self.level(s.compute_level), self.level(s.store_level)
        s.hoist_level = self.level(s.hoist_level)
        s.bounds = {self(k): (kind, self.expr(lo), self.expr(ext)) for k, (kind, lo, ext) in s.bounds.items()}
        s.folds = {self(k): v for k, v in s.folds.items()}
        s.aligns = {self(k): v for k, v in s.aligns.items()}
        s.storage_bounds = {self(k): self.expr(v) for k, v in s.storage_bounds.items()}
        s.eviction_key = self.expr(s.eviction_key)
        if s.storage_order is not None:
            s.storage_order = [self(n) for n in s.storage_order]
        stages = [s.stages[i] for i in range(len(s.stages))]
        for st in stages:
            st.specializations = [(self.expr(cond), special) for cond, special in st.specializations]
            stages.extend(special for _, special in st.specializations)
            for d in st.dims:
                d.name, d.internal = self(d.name), self(d.internal)
            st.fuse_level = self.level(st.fuse_level)
            st.prefetches = [Prefetch(self(p.name), self(p.at), self(p.from_), p.offset, p.strategy)
                             for p in st.prefetches]
            st.fuse_align = {self(k): v for k, v in st.fuse_align.items()}
            st.splits = [Split(sp.kind, self(sp.old), self(sp.outer), self(sp.inner),
                               sp.factor if isinstance(sp.factor, int) else self.expr(sp.factor), sp.tail)
                         for sp in st.splits]
        return s


class _RenameVariables(IRMutator):
    def __init__(self, rename: _Renamer):
        super().__init__()
        self.rename = rename

    def visit_Variable(self, v):
        name = self.rename(v.name)
        return v if name == v.name else ir.Variable(name, v.type, v.ref)


class _Rebuild(_RenameVariables):
    """One consumer's definitions over the copied graph: calls to Funcs go to the copies (through
    the consumer's wrappers), names are renamed."""

    def __init__(self, consumer, copies: dict[int, object], rename: _Renamer):
        super().__init__(rename)
        self.consumer, self.copies = consumer, copies
        self.memo: dict[int, tuple] = {}
        self.tagged = False  # a memoize_tag was met (kept here: see copy_graph)

    def mutate(self, node):
        hit = self.memo.get(id(node))
        if hit is not None:
            return hit[1]
        result = super().mutate(node)
        self.memo[id(node)] = (node, result)  # the node is kept alive, so its id stays unique
        return result

    def visit_Call(self, c):
        self.tagged |= c.call_type == ir.INTRINSIC and c.name == MEMOIZE_TAG
        c2 = self.default(c)
        if c.call_type == ir.HALIDE:
            callee = c.func if c.func is self.consumer else wrapper_for(c.func, self.consumer)
            target = self.copies[id(callee)]
            if target is not c2.func or target.name() != c2.name:
                return ir.Call(c2.type, target.name(), c2.args, c2.call_type, c2.value_index, target, c2.image)
        elif c.call_type == ir.IMAGE and (w := image_callee(c.image, self.consumer)) is not None:
            target = self.copies[id(w)]
            return ir.Call(c2.type, target.name(), c2.args, ir.HALIDE, 0, target)
        elif c.call_type == ir.IMAGE and self.rename(c.name) != c.name:
            return ir.Call(c2.type, self.rename(c.name), c2.args, c2.call_type, c2.value_index, c2.func, c2.image)
        return c2

    def visit_Let(self, e):
        e2 = self.default(e)
        name = self.rename(e.name)
        return e2 if name == e.name else ir.Let(name, e2.value, e2.body)

    def definition(self, d: Definition) -> Definition:
        rvars = tuple(ReductionVariable(self.rename(rv.name), self.mutate(rv.min), self.mutate(rv.extent))
                      for rv in d.rvars)
        return Definition(tuple(self.mutate(a) for a in d.args), tuple(self.mutate(v) for v in d.values), rvars,
                          None if d.predicate is None else self.mutate(d.predicate))


def copy_graph(outputs) -> tuple[list, dict[str, object], list, dict[str, str]]:
    """(copied outputs, every copied Func by its new name, the user's Funcs that were copied, the
    user's name of each renamed name)."""
    originals = list(reachable_funcs(outputs).values())
    _check_wrapped_consumers(originals)
    mapping = canonical_names(originals)
    rename = _Renamer(mapping)
    copies = {id(f): f._lowering_copy(rename(f.name()), rename.schedule(f._schedule)) for f in originals}
    for f in originals:
        c = copies[id(f)]
        rebuild = _Rebuild(f, copies, rename)
        defs = [rebuild.definition(d) for d in f.scheduled_definitions()]
        c._init, c._updates = defs[0], defs[1:]
        c._pure_args = tuple(rename(n) for n in f._pure_args)
        _copy_special_definitions(f, c, rebuild)
        if rebuild.tagged:  # memoization keys on the tags (lowering/memoization.py); lowering computes without
            c._tagged_exprs = list(definition_exprs(c))
            _strip_memoize_tags(c)
    by_name = {copies[id(f)].name(): copies[id(f)] for f in originals}
    return [copies[id(f)] for f in outputs], by_name, originals, {new: old for old, new in mapping.items()}


def _check_wrapped_consumers(funcs) -> None:
    """Each in_() / clone_in() wrapper made for a consumer in the pipeline stands between it and a
    Func it calls (directly, or through other wrappers): a consumer not yet defined when the
    wrapper was made is checked here, as Halide checks them all when it lowers."""
    from ..call_graph import bound_exprs, direct_callees, loop_exprs

    for g in funcs:
        wrapping = [f for f in funcs if f is not g and g.name() in f._schedule.wrappers]
        if not wrapping or not g.defined():
            continue
        exprs = [e for _, d in g.all_scheduled_definitions() for e in (*loop_exprs(d), *bound_exprs(d))]
        starts = direct_callees(exprs).values()  # (an image read: the image's own Func)
        reached: set[int] = set()  # the Funcs on the chains of wrappers from g's callees
        for callee in starts:
            while callee is not None and id(callee) not in reached:
                reached.add(id(callee))
                wrappers = callee._schedule.wrappers
                callee = wrappers.get(g.name(), wrappers.get(""))
        for f in wrapping:
            if id(f) not in reached:
                method = "clone_in" if "_clone_in_" in f._schedule.wrappers[g.name()].name() else "in_"
                raise HalideError(f"Func {f.name()}.{method}({g.name()}): {g.name()} does not call {f.name()}")


def definition_exprs(func):
    """Every expression of every definition of func (its specializations' own too): args, values,
    predicates and RDom bounds."""
    for _, d in func.all_scheduled_definitions():
        yield from d.args
        yield from d.values
        if d.predicate is not None:
            yield d.predicate
        for rv in d.rvars:
            yield rv.min
            yield rv.extent


class _WithoutMemoizeTags(IRMutator):
    def visit_Call(self, c):
        if c.call_type == ir.INTRINSIC and c.name == MEMOIZE_TAG:
            return self.mutate(c.args[0])
        return self.default(c)


def without_memoize_tags(e):
    """e computing what it computes: memoize_tag(result, tags...) is result."""
    return _WithoutMemoizeTags().mutate(e) if isinstance(e, ir.Expr) and has_call(e) else e


def _strip_memoize_tags(f) -> None:
    """f's definitions (its specializations' own too) without memoize_tag calls."""
    def strip(d: Definition) -> Definition:
        rvars = tuple(ReductionVariable(rv.name, without_memoize_tags(rv.min), without_memoize_tags(rv.extent))
                      for rv in d.rvars)
        return Definition(tuple(map(without_memoize_tags, d.args)), tuple(map(without_memoize_tags, d.values)),
                          rvars, without_memoize_tags(d.predicate))

    f._init, f._updates = strip(f._init), [strip(d) for d in f._updates]
    stages = list(f._schedule.stages)
    while stages:
        stage = stages.pop()
        for _, special in stage.specializations:
            if special.definition is not None:
                special.definition = strip(special.definition)
            stages.append(special)


def _copy_special_definitions(f, copy, rebuild) -> None:
    """Each specialization of the copy computes its stage's definition (None), or, rfactored on
    its own, its own definition rebuilt over the copied graph."""
    for s, base in enumerate(f.scheduled_definitions()):
        pending = [(mine, special) for (_, mine), (_, special)
                   in zip(f._schedule.stages[s].specializations, copy._schedule.stages[s].specializations)]
        while pending:
            mine, special = pending.pop()
            own = f.definition_of(s, mine)
            special.definition = None if own is base else rebuild.definition(own)
            pending.extend(zip((m for _, m in mine.specializations), (c for _, c in special.specializations)))


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\$\d+)?")


def to_user_names(text: str, user_names: dict[str, str]) -> str:
    """Text about the lowered pipeline (a loop nest, an error, a trace line) in the user's names:
    the canonical names never equal a name the user gave, so each maps back unambiguously."""
    if not user_names:
        return text
    return _WORD.sub(lambda m: map_name_tokens(m.group(0), user_names), text)


@contextmanager
def errors_in_user_names(user_names: dict[str, str]):
    """A HalideError raised inside, reworded in the user's names."""
    try:
        yield
    except HalideError as e:
        if user_names and e.args and isinstance(e.args[0], str):
            e.args = (to_user_names(e.args[0], user_names), *e.args[1:])
        raise
