"""Generic IR traversal.

`IRMutator.mutate` dispatches on node class to `visit_<ClassName>` when a subclass defines it and
otherwise rebuilds the node from its mutated children, returning the very same node when no
child changed: "did this pass do anything" is an identity check.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from contextlib import ExitStack, contextmanager

from . import ir
from .types import BFLOAT


def _map_tuple(values: tuple, fn) -> tuple:
    new = tuple(fn(v) if isinstance(v, ir.Node) else _map_tuple(v, fn) if isinstance(v, tuple) else v
                for v in values)
    return values if all(a is b for a, b in zip(new, values)) else new


def map_children(node: ir.Node, fn: Callable[[ir.Node], ir.Node]) -> ir.Node:
    """Apply fn to each direct child; rebuild the node only if some child changed."""
    if isinstance(node, ir.BinaryOp):  # most nodes: their fields are just (a, b)
        a, b = node.a, node.b
        new_a, new_b = fn(a), fn(b)
        return node if new_a is a and new_b is b else type(node)(new_a, new_b)
    changed = None
    for name in node._children:
        old = getattr(node, name)
        if isinstance(old, ir.Node):
            new = fn(old)
        elif isinstance(old, tuple):
            new = _map_tuple(old, fn)
        else:  # None
            continue
        if new is not old:
            if changed is None:
                changed = {}
            changed[name] = new
    if changed is None:
        return node
    return type(node)(*[changed.get(f, getattr(node, f)) for f in node.__dataclass_fields__])


def children(node: ir.Node) -> list:
    """The direct sub-nodes of a node, in field order."""
    if isinstance(node, ir.BinaryOp):
        return [node.a, node.b]
    out: list = []
    for name in node._children:
        value = getattr(node, name)
        if isinstance(value, ir.Node):
            out.append(value)
        elif isinstance(value, tuple):
            _collect_nodes(value, out)
    return out


def _collect_nodes(values: tuple, out: list) -> None:
    for v in values:
        if isinstance(v, ir.Node):
            out.append(v)
        elif isinstance(v, tuple):
            _collect_nodes(v, out)


@contextmanager
def cycle_collector_paused():
    """Run a block (or, as a decorator, a function) with Python's cycle collector paused.

    Lowering and code generation build and drop millions of small objects (IR nodes, pass objects,
    llvmlite values), none of them in a reference cycle (see _dispatch_table), so reference counting
    frees all their garbage; meanwhile the IR they hold grows, and each automatic collection would
    scan all of it again to find nothing (a tenth of lowering time, half of codegen's Python time).
    Only the outermost pause resumes the collector."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _unchanged(self, node):
    return node


def _dispatch_table(cls: type) -> dict[type, Callable]:
    """Node class -> the function (self, node) that handles it, one table per pass class.

    Shared by all instances and holding plain functions (not bound methods), so a pass object
    is not in a reference cycle with its own table: lowering makes thousands of short-lived
    ones, and they are freed as soon as they are done with, not by the cycle collector."""
    table = cls.__dict__.get("_dispatch_table")
    if table is None:
        table = {}
        cls._dispatch_table = table
    return table


class IRMutator:
    """Base class for passes: override visit_<NodeClass>(self, node) for the nodes you rewrite.

    A pass that rewrites statements only sets `statements_only = True` (on the class):
    expressions are then returned as they are, without walking them (they are most of the IR)."""

    statements_only = False

    def __init__(self):
        self._dispatch = _dispatch_table(type(self))

    def mutate(self, node):
        if node is None:
            return None
        cls = type(node)
        method = self._dispatch.get(cls)
        if method is None:
            if self.statements_only and issubclass(cls, ir.Expr):
                method = _unchanged
            else:
                method = getattr(type(self), "visit_" + cls.__name__, None) or type(self).default
            self._dispatch[cls] = method
        return method(self, node)

    def default(self, node):
        return map_children(node, self.mutate)


class LetScopeMutator(IRMutator):
    """A statement pass that knows the values of the LetStmts enclosing what it visits (`lets`):
    an extent such as a producer's `max - min + 1`, computed per iteration of an outer loop, is
    often a constant only through them. In an IfThenElse's then-case, the `variable == constant`
    conjuncts of its condition count as lets too (a specialization on `extent == 3`)."""

    statements_only = True

    def __init__(self):
        super().__init__()
        self.lets: dict[str, ir.Expr] = {}

    def visit_LetStmt(self, s):
        with binding(self.lets, s.name, s.value):
            body = self.mutate(s.body)
        return s if body is s.body else ir.LetStmt(s.name, s.value, body)

    def visit_IfThenElse(self, s):
        with ExitStack() as facts:
            for name, value in equalities(s.condition).items():
                facts.enter_context(binding(self.lets, name, value))
            then_case = self.mutate(s.then_case)
        else_case = None if s.else_case is None else self.mutate(s.else_case)
        if then_case is s.then_case and else_case is s.else_case:
            return s
        return ir.IfThenElse(s.condition, then_case, else_case)


class IRVisitor:
    """Read-only walk: override visit_<NodeClass>; call self.visit_children(node) to recurse.

    Subclasses whose result does not depend on where a node sits (collectors of names, calls)
    set `visit_once = True`, so an expression DAG that shares subtrees is walked in linear time.
    Subclasses that look at statements only set `statements_only = True`: expressions are then
    not walked at all.
    """

    visit_once = False
    statements_only = False

    def __init__(self):
        self._dispatch = _dispatch_table(type(self))
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
            if self.statements_only and issubclass(cls, ir.Expr):
                method = _unchanged
            else:
                method = getattr(type(self), "visit_" + cls.__name__, None) or type(self).visit_children
            self._dispatch[cls] = method
        method(self, node)

    def visit_children(self, node):
        for name in node._children:
            value = getattr(node, name)
            if isinstance(value, ir.Node):
                self.visit(value)
            elif isinstance(value, tuple):
                self._visit_all(value)

    def _visit_all(self, values: tuple):
        for v in values:
            if isinstance(v, ir.Node):
                self.visit(v)
            elif isinstance(v, tuple):  # the (min, extent) pairs of a Realize
                self._visit_all(v)


class DagMutator(IRMutator):
    """A mutator whose result for an expression depends on the expression alone: each node
    shared by several parents (Python builds expression DAGs) is rewritten once, and the result
    stays shared. Its memo keeps each node alive, so an id stays that node's."""

    def __init__(self):
        super().__init__()
        self.memo: dict[int, tuple] = {}

    def mutate(self, node):
        if not isinstance(node, ir.Expr):
            return super().mutate(node)
        hit = self.memo.get(id(node))
        if hit is None:
            hit = self.memo[id(node)] = (node, self.mutate_expr(node))
        return hit[1]

    def mutate_expr(self, e: ir.Expr) -> ir.Expr:
        return super().mutate(e)


class Substitution(DagMutator):
    """Replace free Variables by name (see substitute); one instance may substitute into many
    nodes under the same replacements, sharing its work on what they have in common."""

    def __init__(self, repl: dict[str, ir.Expr]):
        super().__init__()
        self.repl = repl

    def mutate_expr(self, e):
        # leave alone what uses none of the names replaced
        if self.repl.keys().isdisjoint((getattr(e, "_summary", None) or _summary(e))[0]):
            return e
        return super().mutate_expr(e)

    def visit_Variable(self, v):
        r = self.repl.get(v.name)
        return v if r is None else r

    def _scoped(self, node, name, fields_before, body_field):
        if name not in self.repl:
            return self.default(node)
        values = {f: self.mutate(getattr(node, f)) for f in fields_before}
        inner = Substitution({k: v for k, v in self.repl.items() if k != name})
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


def equalities(condition: ir.Expr) -> dict[str, ir.Expr]:
    """The `variable == constant` conjuncts of a condition: where it holds, each variable is its
    constant (Halide's simplifier learns them too; a specialization on `extent == 3` then has a
    loop of constant extent to unroll)."""
    found, pending = {}, [condition]
    while pending:
        c = pending.pop()
        if isinstance(c, ir.And):
            pending += [c.a, c.b]
        elif isinstance(c, ir.EQ):
            a, b = (c.b, c.a) if isinstance(c.a, ir.IntImm) else (c.a, c.b)
            if isinstance(a, ir.Variable) and isinstance(b, ir.IntImm) and a.type == b.type:
                found[a.name] = b
    return found


@contextmanager
def binding(scope: dict, name: str, value):
    """scope[name] = value for the duration (a let or loop's variable while its body is visited)."""
    outer = scope.get(name, _UNBOUND)
    scope[name] = value
    try:
        yield
    finally:
        if outer is _UNBOUND:
            del scope[name]
        else:
            scope[name] = outer


_UNBOUND = object()


def substitute_lets(e: ir.Expr, lets: dict[str, ir.Expr], rounds: int = 64) -> ir.Expr:
    """e with the values of the lets it names substituted, again for lets naming lets."""
    for _ in range(rounds):
        used = free_variables(e) & lets.keys()
        if not used:
            break
        e = substitute({n: lets[n] for n in used}, e)
    return e


def substitute(replacements: dict[str, ir.Expr], node):
    """Replace free Variables by name; respects shadowing by Let/LetStmt/For."""
    if not replacements:
        return node
    return Substitution(replacements).mutate(node)


# What lowering asks about an expression again and again (which variables it uses, which Funcs
# and images it reads, whether it holds what loop ranges settle or a let) is worked out once per node, kept
# in the node's `_summary` slot, and shared by all passes.
_NONE: frozenset = frozenset()
_RANGED, _LET, _CALL, _LOAD, _CALLS_OUT, _BFLOAT = 1, 2, 4, 8, 16, 32  # flags of the kinds of node an expression holds
_RANGED_CLASSES = frozenset((ir.Min, ir.Max, ir.EQ, ir.NE, ir.LT, ir.LE, ir.GT, ir.GE, ir.Div, ir.Mod))
_NOTHING = (_NONE, _NONE, 0)
_BFLOAT_CONSTANT = (_NONE, _NONE, _BFLOAT)


def _union(a: frozenset, b: frozenset) -> frozenset:
    """a | b, reusing a or b when one holds the other (most subtrees add nothing new)."""
    if not b or b is a or b <= a:
        return a
    if not a or a <= b:
        return b
    return a | b


def _summary(e: ir.Expr) -> tuple[frozenset, frozenset, int]:
    """(free variables, names of Funcs and images read, flags: holds a Min, Max or comparison, a Let,
    a Call, a Load, what calls out, a bfloat value)."""
    hit = getattr(e, "_summary", None)
    if hit is not None:
        return hit
    cls = type(e)
    if cls is ir.Variable:
        summary = (frozenset((e.name,)), _NONE, _BFLOAT if e.type.code == BFLOAT else 0)
    elif not cls._children:  # a constant
        summary = _BFLOAT_CONSTANT if cls is ir.FloatImm and e.type.code == BFLOAT else _NOTHING
    elif isinstance(e, ir.BinaryOp):
        a_free, a_called, a_kinds = _summary(e.a)
        b_free, b_called, b_kinds = _summary(e.b)
        summary = (_union(a_free, b_free), _union(a_called, b_called),
                   a_kinds | b_kinds | (_RANGED if cls in _RANGED_CLASSES else 0))
    else:
        free = called = _NONE
        kinds = _LET if cls is ir.Let else _CALL if cls is ir.Call else _LOAD if cls is ir.Load else 0
        if e.type.code == BFLOAT:
            kinds |= _BFLOAT
        for c in children(e):
            c_free, c_called, c_kinds = _summary(c)
            free, called, kinds = _union(free, c_free), _union(called, c_called), kinds | c_kinds
        if cls is ir.Call and e.call_type in (ir.HALIDE, ir.IMAGE) and e.name not in called:
            called = called | {e.name}
        elif cls is ir.Call and e.call_type == ir.INTRINSIC and e.name in ir.CALLS_OUT:
            kinds |= _CALLS_OUT
        summary = (free, called, kinds)
    object.__setattr__(e, "_summary", summary)
    return summary


def expr_free_variables(e: ir.Expr) -> frozenset:
    """The names of the Variables in expression e (a name a Let inside binds included)."""
    return (getattr(e, "_summary", None) or _summary(e))[0]  # (the summary is a non-empty tuple)


def affine_in(e: ir.Expr, name: str, memo: dict | None = None) -> tuple[int, ir.Expr] | None:
    """(k, rest) with e == k * name + rest, k a constant integer and rest free of name; None if e is
    not of that form. Each shared subtree is taken apart once (a DAG's tree can be exponential)."""
    if isinstance(e, ir.Variable) and e.name == name:
        return 1, ir.IntImm(e.type, 0)
    if name not in expr_free_variables(e):
        return 0, e
    memo = {} if memo is None else memo
    hit = memo.get(id(e))
    if hit is not None:
        return hit[1]
    answer = None
    if isinstance(e, ir.Add | ir.Sub):
        a, b = affine_in(e.a, name, memo), affine_in(e.b, name, memo)
        if a is not None and b is not None:
            answer = (a[0] + b[0], ir.Add(a[1], b[1])) if isinstance(e, ir.Add) else \
                (a[0] - b[0], ir.Sub(a[1], b[1]))
    elif isinstance(e, ir.Mul):
        for x, y in ((e.a, e.b), (e.b, e.a)):
            k = ir.const_int(y) if y.type.lanes == 1 else None
            if k is not None:
                inner = affine_in(x, name, memo)
                answer = None if inner is None else (inner[0] * k, ir.Mul(inner[1], y))
                break
    memo[id(e)] = (e, answer)  # (keeps e alive, so its id stays unique)
    return answer


def called_names(e: ir.Expr) -> frozenset:
    """The names of the Funcs and images that expression e reads (HALIDE and IMAGE calls)."""
    return (getattr(e, "_summary", None) or _summary(e))[1]


def has_ranged(e: ir.Expr) -> bool:
    """Whether expression e holds a Min, a Max, a comparison, a division or a modulo: the nodes
    that the ranges of loop variables can settle."""
    return bool((getattr(e, "_summary", None) or _summary(e))[2] & _RANGED)


def has_let(e: ir.Expr) -> bool:
    """Whether expression e holds a Let node."""
    return bool(_summary(e)[2] & _LET)


def has_call(e: ir.Expr) -> bool:
    """Whether expression e holds a Call node (of any kind)."""
    return bool(_summary(e)[2] & _CALL)


def calls_out(e: ir.Expr) -> bool:
    """Whether e makes a halide_buffer_t, calls an extern stage's function or reads what one wrote
    (ir.CALLS_OUT): values computed where they are, never copied elsewhere (the call has effects)."""
    return bool(_summary(e)[2] & _CALLS_OUT)


def has_bfloat(e: ir.Expr) -> bool:
    """Whether a value of a bfloat type appears in e (see lowering/emulate_bfloat16.py)."""
    return bool(_summary(e)[2] & _BFLOAT)


def has_load(e: ir.Expr) -> bool:
    """Whether e reads a flattened buffer (a Load)."""
    return bool(_summary(e)[2] & _LOAD)


def touched_names(node: ir.Node) -> frozenset:
    """The names of the Funcs and images that node reads (HALIDE and IMAGE calls) or provides."""
    if isinstance(node, ir.Expr):
        return (getattr(node, "_summary", None) or _summary(node))[1]
    hit = getattr(node, "_touched", None)
    if hit is not None:
        return hit
    names = _NONE
    for c in children(node):
        c_names = touched_names(c)
        if c_names and not c_names <= names:
            names = c_names if not names else names | c_names
    if isinstance(node, ir.Provide) and node.name not in names:
        names = names | {node.name}
    object.__setattr__(node, "_touched", names)
    return names


class _CollectFree(IRVisitor):
    visit_once = True

    def __init__(self, names: set[str]):
        super().__init__()
        self.names = names

    def visit(self, node):
        if isinstance(node, ir.Expr):
            self.names |= expr_free_variables(node)
            return
        known = getattr(node, "_free", None)
        if known is not None:
            self.names |= known
        else:
            super().visit(node)


def free_variables(node) -> set[str]:
    """Names of Variables used in node (bound names inside are still included; callers beware)."""
    if node is None:
        return set()
    if isinstance(node, ir.Expr):
        return set(expr_free_variables(node))
    names: set[str] = set()
    _CollectFree(names).visit(node)
    return names


def remember_free_variables(stmt: ir.Stmt, names) -> None:
    """Record that `names` are exactly free_variables(stmt), for a pass that has just worked them
    out: walks of larger statements holding stmt then stop there."""
    object.__setattr__(stmt, "_free", frozenset(names))


def has_loop(s: ir.Stmt, name: str | None = None) -> bool:
    """Whether s holds a For loop (the one called `name`, where given) at any depth; expressions
    are not walked."""
    stack = [s]
    while stack:
        n = stack.pop()
        if isinstance(n, ir.For) and name in (None, n.name):
            return True
        stack.extend(c for c in children(n) if isinstance(c, ir.Stmt))
    return False


def uses_variable(node, name: str) -> bool:
    return name in free_variables(node)
