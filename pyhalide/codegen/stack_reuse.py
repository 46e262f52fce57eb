"""Where stack storage dies, for the LLVM code generator to reuse its slot (Halide's EarlyFree and
CodeGen_Posix's free stack allocations).

Storage that the code generator puts on the stack (a constant size: `placed_on_stack`) gets a
Free statement just after its last use, as Halide's inject_early_frees places it: after the
statement of a Block (at any depth of Blocks, lets, productions and allocations, but never inside
a loop or either side of an if) that last refers to it; at the end of its Allocate's body if
nothing does. Nothing after the Free touches the storage, so the code generator may give its slot
to the next Allocate of the same type that fits in it (a pipeline of stages computed at root,
each read only by the next, then needs two slots, not one per stage).

A statement refers to storage by any name field or string equal to the storage's name, or that
starts with it and a dot (`f.buffer`): more than a use counts, never less.
"""

from __future__ import annotations

from .. import ir
from ..deep_recursion import deep
from ..ir_mutator import children
from ..lowering.bound_small_allocations import placed_on_stack
from ..lowering.gpu_kernels import map_statements

_EMPTY: frozenset = frozenset()
_STRING_FIELDS: dict[type, tuple[str, ...]] = {}


def _string_fields(cls: type) -> tuple[str, ...]:
    fields = _STRING_FIELDS.get(cls)
    if fields is None:
        fields = _STRING_FIELDS[cls] = tuple(n for n, f in getattr(cls, "__dataclass_fields__", {}).items()
                                             if f.type in ("str", str))
    return fields


def _on_stack(stmt: ir.Stmt) -> set[str]:
    """The names of the Allocates in stmt that the code generator puts on the stack."""
    names: set[str] = set()
    stack = [stmt]
    while stack:
        s = stack.pop()
        if isinstance(s, ir.Allocate) and placed_on_stack(s):
            names.add(s.name)
        stack.extend(c for c in children(s) if isinstance(c, ir.Stmt))
    return names


class _References:
    """Which of the tracked names each node (and what it holds) refers to, worked out once per
    node (shared subtrees once)."""

    def __init__(self, tracked: set[str]):
        self.tracked = tracked
        self.memo: dict[int, tuple[ir.Node, frozenset]] = {}

    def _own(self, node: ir.Node, fields: tuple[str, ...]) -> set[str]:
        found = set()
        tracked = self.tracked
        for f in fields:
            v = getattr(node, f)
            if not isinstance(v, str):
                continue
            if v in tracked:
                found.add(v)
            dot = v.find(".")
            while dot > 0:
                if v[:dot] in tracked:
                    found.add(v[:dot])
                dot = v.find(".", dot + 1)
        return found

    def __call__(self, node: ir.Node) -> frozenset:
        hit = self.memo.get(id(node))
        if hit is not None:
            return hit[1]
        fields = _string_fields(type(node))
        names = self._own(node, fields) if fields else None
        for c in children(node):
            r = self(c)
            if r:
                if names is None:
                    names = set(r)
                else:
                    names |= r
        result = frozenset(names) if names else _EMPTY
        self.memo[id(node)] = (node, result)
        return result


def _transparent(s: ir.Stmt) -> bool:
    """Statements whose body runs once, after everything else in them (a Free may go inside)."""
    return isinstance(s, ir.LetStmt | ir.ProducerConsumer | ir.Allocate)


def _free_after_last_use(s: ir.Stmt, name: str, refs: _References) -> ir.Stmt | None:
    """s with Free(name) just after the statement of a Block that last refers to `name`, as deep
    as Blocks go outside loops and ifs; None if that is s itself (or s does not refer to it)."""
    if isinstance(s, ir.Block):
        for i in range(len(s.stmts) - 1, -1, -1):
            if name in refs(s.stmts[i]):
                inner = _free_after_last_use(s.stmts[i], name, refs)
                new = [inner] if inner is not None else [s.stmts[i], ir.Free(name)]
                return ir.Block(s.stmts[:i] + tuple(new) + s.stmts[i + 1:])
        return None
    if _transparent(s) and name in refs(s.body):
        body = _free_after_last_use(s.body, name, refs)
        if body is None:
            body = ir.Block((s.body, ir.Free(name)))
        return _with_body(s, body)
    return None


def _with_body(s: ir.Stmt, body: ir.Stmt) -> ir.Stmt:
    return type(s)(*[body if f == "body" else getattr(s, f) for f in s.__dataclass_fields__])


@deep
def inject_stack_frees(stmt: ir.Stmt) -> ir.Stmt:
    """stmt with a Free after the last use of each storage the code generator puts on the stack."""
    tracked = _on_stack(stmt)
    if not tracked:
        return stmt
    refs = _References(tracked)

    def visit(s: ir.Stmt) -> ir.Stmt:
        # inner Allocates first: their Frees then count as references of the outer ones (harmless)
        new = map_statements(s, visit)
        if isinstance(new, ir.Allocate) and new.name in tracked:
            body = _free_after_last_use(new.body, new.name, refs)
            if body is None:
                body = ir.Block((new.body, ir.Free(new.name)))
            new = _with_body(new, body)
        return new

    return visit(stmt)

