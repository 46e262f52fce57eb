"""Common subexpression elimination: an expression graph as a tree of Lets.

Python code builds expressions as graphs: `e = e + e * 3` in a loop shares each step twice, so
twenty steps make a graph of forty nodes whose tree has a million. Every pass walks trees, so
Func definitions go through this first, as Halide's Function::define does: each subexpression
used more than once (by value, however it was built) becomes a Let, and the walks after it are as
long as the graph. All the walks here go by node identity, never into a shared node twice.
"""

from __future__ import annotations

import itertools
from dataclasses import fields

from . import ir
from .ir_mutator import children, expr_free_variables, has_let, map_children
from .names import unique_name

_LIKELY = frozenset({"likely", "likely_if_innermost"})
"""Kept whole where they are (nothing in them is named): loop partitioning reads the condition
likely() marks."""


def _worth_a_let(e: ir.Expr) -> bool:
    """Whether a repeated e is worth a name: not a constant or a variable, nor a constant offset,
    scale or broadcast of something else (those simplify better where they are)."""
    if isinstance(e, ir.IntImm | ir.FloatImm | ir.StringImm | ir.Variable):
        return False
    if isinstance(e, ir.Broadcast | ir.Cast):
        return _worth_a_let(e.value)
    if isinstance(e, ir.Add | ir.Sub | ir.Mul | ir.Div):
        return not (ir.is_const(e.a) or ir.is_const(e.b))
    if isinstance(e, ir.Ramp):
        return not ir.is_const(e.stride)
    if isinstance(e, ir.Call):
        return e.name != "print" and e.name not in _LIKELY  # a print prints each time it is written
    return True


def _field_key(value, compare: bool):
    """A hashable stand-in for one non-child field: an object compared by identity (a Func, an
    image, a Param) by its id, a float by its bits (0.0 and -0.0 differ, a NaN equals itself)."""
    if not compare:
        return id(value)
    if isinstance(value, float):
        return ("float", value.hex())
    return value


class ValueNumbering:
    """One canonical node per distinct value: `canonical(e)` rebuilds e from canonical children
    and returns the first node equal to it that was seen (children compared by identity, so a key
    costs the node's own fields only)."""

    def __init__(self):
        self.of_id: dict[int, ir.Expr] = {}
        self.by_key: dict[tuple, ir.Expr] = {}
        self.order: list[ir.Expr] = []  # canonical nodes, each after its children

    def canonical(self, e: ir.Expr) -> ir.Expr:
        hit = self.of_id.get(id(e))
        if hit is not None:
            return hit
        rebuilt = map_children(e, self.canonical)
        key = (type(rebuilt), *(self._key(rebuilt, f) for f in fields(rebuilt)))
        found = self.by_key.setdefault(key, rebuilt)
        if found is rebuilt:
            self.order.append(rebuilt)
            self.of_id[id(rebuilt)] = found
        self.of_id[id(e)] = found  # (e's graph, held by the caller, keeps the ids unique)
        return found

    @staticmethod
    def _key(node, f):
        value = getattr(node, f.name)
        if f.name in node._children:
            return _children_key(value)
        return _field_key(value, f.compare)


def _children_key(value):
    if isinstance(value, ir.Node):
        return id(value)
    if isinstance(value, tuple):
        return tuple(_children_key(v) for v in value)
    return value  # None


def _use_counts(root: ir.Expr) -> dict[int, int]:
    """How many distinct parents (and slots) use each canonical node worth a let; a node not worth
    one is looked through each time it is used, so what it uses counts once per its use."""
    counts: dict[int, int] = {}
    walked: set[int] = set()

    def include(e):
        if isinstance(e, ir.Call) and e.name in _LIKELY:
            return
        if not _worth_a_let(e):
            for c in children(e):
                include(c)
            return
        counts[id(e)] = counts.get(id(e), 0) + 1
        if id(e) not in walked:
            walked.add(id(e))
            for c in children(e):
                include(c)

    include(root)
    return counts


class _Replace:
    """Rebuild a graph with some nodes replaced (by identity), each shared node rebuilt once."""

    def __init__(self, replacements: dict[int, ir.Expr]):
        self.memo = dict(replacements)

    def __call__(self, e: ir.Expr) -> ir.Expr:
        hit = self.memo.get(id(e))
        if hit is None:
            hit = map_children(e, self)
            self.memo[id(e)] = hit
        return hit


def inline_lets(e: ir.Expr) -> ir.Expr:
    """e with every Let's value put in place of its name (a name a Let binds can be in scope at
    one use of a shared node and not at another, so a Let starts a fresh memo)."""
    memo: dict[int, ir.Expr] = {}
    scope: dict[str, ir.Expr] = {}

    def walk(n):
        hit = memo.get(id(n))
        if hit is not None:
            return hit
        if isinstance(n, ir.Variable):
            out = scope.get(n.name, n)
        elif isinstance(n, ir.Let):
            value = walk(n.value)
            saved_memo, saved = dict(memo), scope.get(n.name)
            scope[n.name] = value
            memo.clear()
            out = walk(n.body)
            memo.clear()
            memo.update(saved_memo)
            if saved is None:
                del scope[n.name]
            else:
                scope[n.name] = saved
        else:
            out = map_children(n, walk)
        memo[id(n)] = out
        return out

    return walk(e)


def _names_not_in(used, prefix: str | None):
    """New let names that are not Vars of the expression: `prefix0`, `prefix1`... where lowering
    asks (its names must not depend on what the process made before), else generated ones."""
    numbers = itertools.count()
    while True:
        name = unique_name("t") if prefix is None else f"{prefix}{next(numbers)}"
        if name not in used:
            yield name


def common_subexpression_elimination(e: ir.Expr, prefix: str | None = None) -> ir.Expr:
    """e with each subexpression worth a name that it uses more than once computed once, in a Let
    (outermost first, each let's value using the ones before it), named `prefix0`, `prefix1`...
    when prefix is given."""
    if not type(e)._children:  # a constant or a variable
        return e
    if has_let(e):
        e = inline_lets(e)
    numbering = ValueNumbering()
    root = numbering.canonical(e)
    counts = _use_counts(root)
    shared = [n for n in numbering.order if counts.get(id(n), 0) > 1]
    if not shared:
        return e
    used = expr_free_variables(root)
    names = _names_not_in(used, prefix)
    variables = {id(n): ir.Variable(next(names), n.type) for n in shared}
    replace = _Replace(variables)
    body = replace(root)
    for n in reversed(shared):
        del replace.memo[id(n)]  # its own value, built from the lets before it
        body = ir.Let(variables[id(n)].name, replace(n), body)
    return body
