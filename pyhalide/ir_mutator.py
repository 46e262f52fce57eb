"""Generic IR traversal.

`IRMutator.mutate` dispatches on node class to `visit_<ClassName>` when a subclass defines it and
otherwise rebuilds the node from its mutated children, returning the very same node when no
child changed: "did this pass do anything" is an identity check.
"""

from __future__ import annotations

from collections.abc import Callable

from . import ir


def _map_field(value, fn):
    if isinstance(value, ir.Node):
        return fn(value)
    if isinstance(value, tuple):
        new = tuple(_map_field(v, fn) for v in value)
        if all(a is b for a, b in zip(new, value)):
            return value
        return new
    return value


def map_children(node: ir.Node, fn: Callable[[ir.Node], ir.Node]) -> ir.Node:
    """Apply fn to each direct child; rebuild the node only if some child changed."""
    changed = {}
    for name in node._children:
        old = getattr(node, name)
        if old is None:
            continue
        new = _map_field(old, fn)
        if new is not old:
            changed[name] = new
    if not changed:
        return node
    values = [changed.get(f, getattr(node, f)) for f in node.__dataclass_fields__]
    return type(node)(*values)


def children(node: ir.Node):
    """The direct sub-nodes of a node, in field order."""
    out = []

    def collect(v):
        if isinstance(v, ir.Node):
            out.append(v)
        elif isinstance(v, tuple):
            for x in v:
                collect(x)

    for name in node._children:
        collect(getattr(node, name))
    return out


def _unchanged(node):
    return node


class IRMutator:
    """Base class for passes: override visit_<NodeClass>(self, node) for the nodes you rewrite.

    A pass that rewrites statements only sets `statements_only = True`: expressions are then
    returned as they are, without walking them (they are most of the IR)."""

    statements_only = False

    def __init__(self):
        self._dispatch: dict[type, Callable] = {}

    def mutate(self, node):
        if node is None:
            return None
        cls = type(node)
        method = self._dispatch.get(cls)
        if method is None:
            if self.statements_only and issubclass(cls, ir.Expr):
                method = _unchanged
            else:
                method = getattr(self, "visit_" + cls.__name__, None) or self.default
            self._dispatch[cls] = method
        return method(node)

    def default(self, node):
        return map_children(node, self.mutate)


class IRVisitor:
    """Read-only walk: override visit_<NodeClass>; call self.visit_children(node) to recurse.

    Subclasses whose result does not depend on where a node sits (collectors of names, calls)
    set `visit_once = True`, so an expression DAG that shares subtrees is walked in linear time.
    """

    visit_once = False

    def __init__(self):
        self._dispatch: dict[type, Callable] = {}
        self._seen: set[int] = set()
        self._keep: list = []

    def visit(self, node):
        if node is None:
            return
        if self.visit_once:
            if id(node) in self._seen:
                return
            self._seen.add(id(node))
            self._keep.append(node)  # ids stay unique while we remember them
        cls = type(node)
        method = self._dispatch.get(cls)
        if method is None:
            method = getattr(self, "visit_" + cls.__name__, None) or self.visit_children
            self._dispatch[cls] = method
        method(node)

    def visit_children(self, node):
        for c in children(node):
            self.visit(c)


def substitute(replacements: dict[str, ir.Expr], node):
    """Replace free Variables by name; respects shadowing by Let/LetStmt/For."""
    if not replacements:
        return node

    class Substitute(IRMutator):
        def __init__(self, repl):
            super().__init__()
            self.repl = repl
            self.memo: dict[int, tuple] = {}

        def mutate(self, node):
            # a node's result depends only on it and repl: share work on expression DAGs
            if not isinstance(node, ir.Expr):
                return super().mutate(node)
            hit = self.memo.get(id(node))
            if hit is not None:
                return hit[1]
            result = super().mutate(node)
            self.memo[id(node)] = (node, result)
            return result

        def visit_Variable(self, v):
            r = self.repl.get(v.name)
            return v if r is None else r

        def _scoped(self, node, name, fields_before, body_field):
            if name not in self.repl:
                return self.default(node)
            values = {f: self.mutate(getattr(node, f)) for f in fields_before}
            inner = Substitute({k: v for k, v in self.repl.items() if k != name})
            body = inner.mutate(getattr(node, body_field))
            new = dict(values, **{body_field: body})
            if all(new[f] is getattr(node, f) for f in new):
                return node
            return type(node)(*[new.get(f, getattr(node, f)) for f in node.__dataclass_fields__])

        def visit_Let(self, n):
            return self._scoped(n, n.name, ("value",), "body")

        def visit_LetStmt(self, n):
            return self._scoped(n, n.name, ("value",), "body")

        def visit_For(self, n):
            return self._scoped(n, n.name, ("min", "extent"), "body")

    return Substitute(replacements).mutate(node)


def free_variables(node) -> set[str]:
    """Names of Variables used in node (bound names inside are still included; callers beware)."""
    names: set[str] = set()

    class Collect(IRVisitor):
        visit_once = True

        def visit_Variable(self, v):
            names.add(v.name)

    Collect().visit(node)
    return names


def uses_variable(node, name: str) -> bool:
    return name in free_variables(node)
