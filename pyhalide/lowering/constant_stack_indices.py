"""Constant stack indices: an index into storage on the stack that is a constant once the
enclosing lets are substituted is written as that constant, so that LLVM keeps the storage in
registers (its scalar replacement of aggregates splits an alloca only where every access has a
constant offset).

In blur scheduled as Halide's Adams2019 schedules it, blur_x is computed per vector of blur_y
into 10 rows on the stack (unrolled) and read by 8 unrolled rows of blur_y; a read's row is
`blur_y.s0.y - blur_x.y.min`, lets of two different expressions that differ by a constant
(`min(yi * 8, 951) + k` against `min(yi * 8, 951) - 1`, each inside a sum of its own). Written
as it was, every row went through the stack and the steady loop had 115 instructions where
Halide's has 99 and keeps every row in a register: 1.58x Halide's time.

Assumes: storage is flattened, loops are unrolled and vectorized, and the Stmt is simplified.
Guarantees: a Load or Store of a buffer allocated on the stack (constant extents; Stack or
Register memory, or Auto within STACK_LIMIT bytes, where the code generator puts it), outside
GPU loops, whose index has no free variable once the enclosing LetStmts are substituted, gets
that constant index; nothing else changes, and no index changes value.
"""

from __future__ import annotations

from .. import ir
from ..ir_mutator import IRMutator, LetScopeMutator, binding, free_variables, has_load, substitute
from ..schedule import GPU_LOOP_KINDS
from ..simplify import simplify
from .bound_small_allocations import placed_on_stack


def constant_stack_indices(stmt: ir.Stmt) -> ir.Stmt:
    return _FindStackStorage().mutate(stmt)


class _FindStackStorage(LetScopeMutator):
    """Walks statements only, to the Allocates on the stack; _ResolveIndices rewrites their
    accesses."""

    def visit_For(self, s):
        return s if s.for_type in GPU_LOOP_KINDS else self.default(s)

    def visit_Allocate(self, s):
        if not placed_on_stack(s):
            return self.default(s)
        resolve = _ResolveIndices(dict(self.lets), {s.name})
        body = resolve.mutate(s.body)
        return s if body is s.body else ir.Allocate(s.name, s.type, s.extents, body, s.memory_type)


class _ResolveIndices(IRMutator):
    def __init__(self, lets: dict, stack: set[str]):
        super().__init__()
        # name -> (value, the binding's serial number), or None for a loop's variable and a let
        # bound again inside its own scope (which binding an expanded value means is not known
        # there, so its uses are left alone)
        self.lets = {name: (value, i) for i, (name, value) in enumerate(lets.items())}
        self.serials = iter(range(len(lets), 1 << 62))
        self.stack = stack
        # (let, serial) -> its value with the lets substituted: unrolled copies bind the same
        # names again, often to the very same value object, with different lets inside it
        self.expanded: dict[tuple[str, int], ir.Expr] = {}
        self.reaches: dict[tuple[str, int], bool] = {}  # (let, serial) -> _reaches_unknown

    def mutate(self, node):
        if isinstance(node, ir.Expr) and not has_load(node):
            return node  # nothing in it to resolve (most expressions)
        return super().mutate(node)

    def visit_LetStmt(self, s):
        bound = None if s.name in self.lets else (s.value, next(self.serials))
        with binding(self.lets, s.name, bound):
            body = self.mutate(s.body)
        return s if body is s.body else ir.LetStmt(s.name, s.value, body)

    def visit_For(self, s):
        with binding(self.lets, s.name, None):
            return self.default(s)

    def visit_Allocate(self, s):
        inner = placed_on_stack(s)
        if inner == (s.name in self.stack):
            return self.default(s)
        (self.stack.add if inner else self.stack.discard)(s.name)
        try:
            return self.default(s)
        finally:
            (self.stack.discard if inner else self.stack.add)(s.name)

    def visit_Load(self, e):
        new = self.default(e)
        index = self._constant(new.index) if new.name in self.stack else None
        return new if index is None else ir.Load(new.type, new.name, index, new.predicate)

    def visit_Store(self, s):
        new = self.default(s)
        index = self._constant(new.index) if new.name in self.stack else None
        return new if index is None else ir.Store(new.name, new.value, index, new.predicate)

    def _constant(self, index: ir.Expr) -> ir.Expr | None:
        """The index with the enclosing lets substituted, if that leaves no variable in it."""
        names = free_variables(index)
        if not names or any(self._reaches_unknown(n) for n in names):
            return None  # constant already, or it depends on a loop inside the storage's scope
        resolved = simplify(self._substitute(index))
        return resolved if not free_variables(resolved) else None

    def _reaches_unknown(self, name: str) -> bool:
        """Whether the name, through the lets, uses a variable bound inside this scope that is not
        a let (a loop's variable, or a let bound again): the simplified index would not be a
        constant, and simplifying it is most of this pass's time."""
        if name not in self.lets:
            return False  # bound outside the storage's scope: it may cancel out
        bound = self.lets[name]
        if bound is None:
            return True
        key = (name, bound[1])
        if key not in self.reaches:
            self.reaches[key] = any(self._reaches_unknown(n) for n in free_variables(bound[0]))
        return self.reaches[key]

    def _substitute(self, e: ir.Expr) -> ir.Expr:
        names = [n for n in free_variables(e) if self.lets.get(n) is not None]
        return substitute({n: self._expand(n) for n in names}, e) if names else e

    def _expand(self, name: str) -> ir.Expr:
        value, serial = self.lets[name]
        key = (name, serial)
        if key not in self.expanded:
            self.expanded[key] = self._substitute(value)
        return self.expanded[key]
