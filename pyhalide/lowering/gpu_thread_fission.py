"""Storage that GPU thread loops share: a Func computed inside a thread loop (a warp's row of
lanes, say) by thread loops inside that one (gpu_lanes), each thread computing a part, is shared
by those inner threads, as in Halide, where the lanes of a warp exchange it by shuffles.

Assumes: one kernel's body below its block loops (gpu_kernels runs this first). Guarantees: each
such allocation is moved out of the thread loops around it, each loop split (fission) around
every statement of its body: `for t { allocate A; P; C }` becomes
`allocate A'; for t { P }; for t { C }`, A' holding a slice of A per iteration of t (the most
elements any needs), so that gpu_kernels places A' at the block level (in shared memory, or
global memory where that is full) and puts a barrier between the parts. Thread loop iterations
are independent, so splitting one changes nothing else; the lets and guards around A inside t
are repeated in each part, and a serial loop between t and A whose extent does not depend on t
moves outside t (walked from 0 where its start does), as does an if-else whose condition does
not. An allocation that cannot be moved so stays where it is (gpu_kernels refuses it).
"""

from __future__ import annotations

from .. import ir
from ..bounds import Interval, bounds_of_expr
from ..errors import CompileError
from ..ir_mutator import IRMutator, IRVisitor, free_variables, substitute_lets
from ..ir_printer import expr_to_string
from ..simplify import simplify
from ..types import Int

THREAD_KINDS = (ir.GPU_THREAD, ir.GPU_LANE)


def thread_depth(s: ir.Stmt) -> int:
    """The most thread loops nested in s, s included."""
    if isinstance(s, ir.For):
        inner = thread_depth(s.body)
        return inner + 1 if s.for_type in THREAD_KINDS else inner
    depth = 0
    for name in s._children:
        value = getattr(s, name)
        if isinstance(value, ir.Stmt):
            depth = max(depth, thread_depth(value))
        elif isinstance(value, tuple):
            depth = max([depth, *(thread_depth(v) for v in value if isinstance(v, ir.Stmt))])
    return depth


class _StoredByThreads(IRVisitor):
    """Whether a statement stores to an allocation inside thread loops."""

    statements_only = True

    def __init__(self, name: str):
        super().__init__()
        self.name, self.in_threads, self.found = name, 0, False

    def visit_For(self, s):
        inside = s.for_type in THREAD_KINDS
        self.in_threads += inside
        self.visit_children(s)
        self.in_threads -= inside

    def visit_Store(self, s):
        self.found = self.found or (self.in_threads > 0 and s.name == self.name)


def shared_by_inner_threads(s: ir.Stmt) -> bool:
    """Whether s is an allocation that thread loops inside it compute (each thread a part): an
    allocation that every thread computes whole can stay the thread's own, whoever reads it."""
    if not isinstance(s, ir.Allocate):
        return False
    stored = _StoredByThreads(s.name)
    stored.visit(s.body)
    return stored.found


class SliceAccesses(IRMutator):
    """Accesses of an allocation, moved by `offset` elements: to one slice of a buffer that holds
    a slice per block, thread or loop iteration. The allocation itself, met inside, is dropped
    (the buffer holding every slice is made elsewhere)."""

    def __init__(self, name: str, offset: ir.Expr):
        super().__init__()
        self.name, self.offset = name, offset

    def _index(self, index: ir.Expr) -> ir.Expr:
        return ir.Add(index, ir.Cast(index.type, self.offset) if index.type != self.offset.type else self.offset)

    def visit_Load(self, e):
        e = self.default(e)
        return ir.Load(e.type, e.name, self._index(e.index), e.predicate) if e.name == self.name else e

    def visit_Store(self, s):
        s = self.default(s)
        return ir.Store(s.name, s.value, self._index(s.index), s.predicate) if s.name == self.name else s

    def visit_Allocate(self, s):
        body = self.mutate(s.body)
        return body if s.name == self.name else ir.Allocate(s.name, s.type, s.extents, body, s.memory_type)


_SPLIT = (ir.LetStmt, ir.ProducerConsumer, ir.IfThenElse, ir.Block)  # what a part is split through


class _Fission:
    """One thread loop split around the shared allocations inside it (see the module docstring)."""

    def __init__(self, loop: ir.For, lifted: set[str]):
        self.loop, self.lifted = loop, lifted
        self.inner_names = {loop.name}  # names bound inside the loop on the way to an allocation
        self.lets: dict[str, ir.Expr] = {}

    def _uniform(self, e: ir.Expr) -> bool:
        """Whether e is the same for every iteration of the loop."""
        return not free_variables(e) & self.inner_names

    def _movable_loop(self, s: ir.Stmt) -> bool:
        return isinstance(s, ir.For) and s.for_type == ir.SERIAL and self._uniform(s.extent)

    def shares(self, s: ir.Stmt) -> bool:
        """Whether s holds, past lets, guards, blocks and movable loops, a shared allocation."""
        if shared_by_inner_threads(s):
            return True
        if isinstance(s, ir.LetStmt | ir.ProducerConsumer):
            return self.shares(s.body)
        if isinstance(s, ir.IfThenElse):
            if s.else_case is None:
                return self.shares(s.then_case)
            return self._uniform(s.condition) and (self.shares(s.then_case) or self.shares(s.else_case))
        if isinstance(s, ir.Block):
            return any(self.shares(x) for x in s.stmts)
        return self._movable_loop(s) and self.shares(s.body)

    def outside(self, s: ir.Stmt, wrap, split: bool = False) -> ir.Stmt:
        """s, run by each iteration of the loop, as statements outside it; `wrap` puts a part back
        inside the loop and what surrounds s there. Split: each statement of s's blocks a part of
        its own (the body of a shared allocation, whose statements a barrier must separate)."""
        if not self.shares(s) and not (split and isinstance(s, _SPLIT)):
            return wrap(s)
        if isinstance(s, ir.LetStmt):
            self.inner_names.add(s.name)
            self.lets[s.name] = s.value
            return self.outside(s.body, lambda p: wrap(ir.LetStmt(s.name, s.value, p)), split)
        if isinstance(s, ir.ProducerConsumer):
            return self.outside(s.body, lambda p: wrap(ir.ProducerConsumer(s.name, s.is_producer, p)), split)
        if isinstance(s, ir.IfThenElse) and s.else_case is None:
            return self.outside(s.then_case, lambda p: wrap(ir.IfThenElse(s.condition, p)), split)
        if isinstance(s, ir.IfThenElse):  # an if-else (a specialization) goes outside if it can
            if not self._uniform(s.condition):
                return wrap(s)
            return ir.IfThenElse(s.condition, self.outside(s.then_case, wrap, split),
                                 self.outside(s.else_case, wrap, split))
        if isinstance(s, ir.Block):
            return ir.make_block([self.outside(x, wrap, split) for x in s.stmts])
        if isinstance(s, ir.For):
            if self._uniform(s.min):
                return ir.For(s.name, s.min, s.extent, s.for_type, self.outside(s.body, wrap, split))
            # where it starts depends on the thread (a region that moves with it): walked from 0
            step = ir.Variable(s.name + ".from_min", Int(32))
            start = ir.Add(s.min, step)
            self.inner_names.add(s.name)
            self.lets[s.name] = start
            body = self.outside(s.body, lambda p: wrap(ir.LetStmt(s.name, start, p)), split)
            return ir.For(step.name, ir.IntImm(Int(32), 0), s.extent, s.for_type, body)
        return self._lift(s, wrap)

    def _lift(self, s: ir.Allocate, wrap) -> ir.Stmt:
        loop = self.loop
        elements = simplify(substitute_lets(_product(s.extents), self.lets))
        if loop.name in free_variables(elements):
            last = simplify(ir.Add(loop.min, ir.Sub(loop.extent, ir.IntImm(Int(32), 1))))
            elements = bounds_of_expr(elements, {loop.name: Interval(loop.min, last)}).max
            elements = None if elements is None else simplify(elements)
        if elements is None or free_variables(elements) & self.inner_names:
            raise CompileError(f"Func {s.name} is computed inside GPU thread loop {loop.name} and shared by the GPU "
                               f"thread loops inside it, so it needs a slice per iteration of {loop.name}, but its "
                               f"size ({expr_to_string(_product(s.extents))}) has no bound over that loop")
        offset = simplify(ir.Mul(ir.Sub(ir.Variable(loop.name, Int(32)), loop.min), elements))
        body = SliceAccesses(s.name, offset).mutate(self.outside(s.body, wrap, split=True))
        memory = s.memory_type if s.memory_type in ("GPUShared", "Heap") else "Auto"
        self.lifted.add(s.name)
        return ir.Allocate(s.name, s.type, (simplify(ir.Mul(elements, loop.extent)),), body, memory)


def _product(values) -> ir.Expr:
    out = values[0] if values else ir.IntImm(Int(32), 1)
    for v in values[1:]:
        out = ir.Mul(out, v)
    return out


class _LiftSharedAllocations(IRMutator):
    statements_only = True

    def __init__(self):
        super().__init__()
        self.lifted: set[str] = set()

    def visit_For(self, s):
        s = self.default(s)  # inner thread loops first: what they share then sits in this loop
        if s.for_type not in THREAD_KINDS:
            return s
        fission = _Fission(s, self.lifted)
        if not fission.shares(s.body):
            return s
        return fission.outside(s.body, lambda p: ir.For(s.name, s.min, s.extent, s.for_type, p))


def lift_thread_shared_allocations(body: ir.Stmt) -> tuple[ir.Stmt, set[str]]:
    """body with the allocations threads share moved out of the thread loops, and their names."""
    lift = _LiftSharedAllocations()
    return lift.mutate(body), lift.lifted
