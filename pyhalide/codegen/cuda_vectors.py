"""Vector loads and stores in CUDA kernels: scalar accesses that together read or write one
aligned run of consecutive elements become one 4- to 16-byte access (LDG.128, STS.64, ...).

A GPU thread is scalar: gpu_vector_loops unrolls a loop the schedule vectorizes inside a kernel,
so the copies' loads and stores each touch one element, their indices written through each
copy's lets. nvcc does not merge them (nor take an element from a wider load of the same run), so
a thread moving 8 uint16s issues 8 memory instructions where one would do. The printer plans
each straight-line region of a kernel (the kernel's body, a loop's body, a branch) before
printing it:

- every index is resolved through the enclosing lets and simplified into `base + offset`;
- a run of n consecutive offsets of one base (n elements of 4, 8 or 16 bytes together), whose
  first element the index arithmetic proves a multiple of n (device buffers start 16-byte
  aligned, shared arrays are declared so), becomes one vector: for loads, where every element of
  the run is read unconditionally in the region (then reading the run once, where it is first
  needed, reads nothing a scalar load would not); for stores, where each element is stored once.
- Nothing moves across a barrier (regions are cut into segments there), a buffer the segment
  writes is not read through vectors, and one it reads is not written through them.

Global buffers and shared memory only: per-thread arrays indexed by constants are registers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .. import ir
from ..ir_mutator import IRVisitor, expr_free_variables, has_load, substitute
from ..lowering.gpu_kernels import is_barrier
from ..simplify import simplify
from ..types import Type

VECTOR_BYTES = (16, 8, 4)  # the widths tried, widest first


def vector_lanes(t: Type) -> tuple[int, ...]:
    """The numbers of elements of type t that make a vector access, most first."""
    if t.lanes != 1 or t.is_bool() or t.bits not in (8, 16, 32, 64):
        return ()
    return tuple(width * 8 // t.bits for width in VECTOR_BYTES if width * 8 // t.bits >= 2)


class Lets:
    """The lets in scope, each value resolved through the lets enclosing it."""

    def __init__(self):
        self.scope: dict[str, list[ir.Expr]] = {}

    def push(self, name: str, value: ir.Expr) -> None:
        self.scope.setdefault(name, []).append(self.resolve(value))

    def pop(self, name: str) -> None:
        self.scope[name].pop()

    def resolve(self, e: ir.Expr) -> ir.Expr:
        bound = {n: vs[-1] for n in expr_free_variables(e) if (vs := self.scope.get(n))}
        return substitute(bound, e) if bound else e

    def key(self, index: ir.Expr) -> tuple[ir.Expr, int] | None:
        """(base, offset) with index = base + offset, base written canonically; None where the
        index reads memory (what it reads could change between two accesses)."""
        if has_load(index):
            return None
        e = simplify(self.resolve(index))
        if isinstance(e, ir.Add) and (k := ir.const_int(e.b)) is not None:
            return e.a, k
        if (k := ir.const_int(e)) is not None:
            return ir.make_const(e.type, 0), k
        return e, 0


def modulus(e: ir.Expr) -> tuple[int, int]:
    """(m, r) with e = m * k + r for some integer k (m 0: e is r), from e's arithmetic."""
    if (c := ir.const_int(e)) is not None:
        return 0, c
    if isinstance(e, ir.Cast) and e.type.is_int() and e.value.type.is_int() and e.type.bits >= e.value.type.bits:
        return modulus(e.value)
    if isinstance(e, ir.Add | ir.Sub | ir.Mul | ir.Min | ir.Max):
        (ma, ra), (mb, rb) = modulus(e.a), modulus(e.b)
        if isinstance(e, ir.Add | ir.Sub):
            m = math.gcd(ma, mb)
            r = ra + rb if isinstance(e, ir.Add) else ra - rb
        elif isinstance(e, ir.Mul):
            m, r = math.gcd(ma * mb, ma * rb, mb * ra), ra * rb
        else:  # one of the two
            m, r = math.gcd(ma, mb, ra - rb), ra
        return m, (r % m if m else r)
    return 1, 0


@dataclass(frozen=True, eq=False)
class Group:
    """One vector access of `lanes` elements of `type` (each group its own, compared by identity)."""

    buffer: str
    type: Type
    lanes: int
    is_store: bool


@dataclass
class Plan:
    """The vector accesses of one region: (segment, buffer, base, offset) -> (group, lane)."""

    loads: dict[tuple, tuple[Group, int]] = field(default_factory=dict)
    stores: dict[tuple, tuple[Group, int]] = field(default_factory=dict)


class _Touched(IRVisitor):
    """Buffers a statement reads and writes, and whether it holds a barrier."""

    def __init__(self):
        super().__init__()
        self.reads: set[str] = set()
        self.writes: set[str] = set()
        self.barrier = False

    def visit_Load(self, e):
        self.reads.add(e.name)
        self.visit_children(e)

    def visit_Store(self, s):
        self.writes.add(s.name)
        self.visit_children(s)

    def visit_Atomic(self, s):
        self.writes.add(s.body.name)
        self.visit_children(s)

    def visit_Evaluate(self, s):
        self.barrier = self.barrier or is_barrier(s)
        self.visit_children(s)


def touched(s: ir.Stmt) -> _Touched:
    t = _Touched()
    t.visit(s)
    return t


class _Planner:
    """Walks one region as the printer will (the same segments, the same lets) and records its
    accesses; nested loops and branches are other regions, only what they touch counts here."""

    def __init__(self, lets: Lets, eligible):
        self.lets, self.eligible = lets, eligible
        self.segment = 0
        self.loads: dict[tuple, dict[int, Type]] = {}  # (segment, buffer, base) -> offsets read
        self.stores: dict[tuple, dict[int, Type]] = {}  # (segment, buffer, base) -> offsets stored
        self.refused: set[tuple] = set()  # (segment, buffer): no vector stores
        self.written: set[tuple] = set()  # (segment, buffer): no vector loads
        self.read: set[tuple] = set()
        self.shared: set[str] = set()  # shared allocations made inside the region

    def can_vectorize(self, name: str) -> bool:
        return name in self.shared or self.eligible(name)

    # statements
    def stmt(self, s: ir.Stmt) -> None:
        if isinstance(s, ir.Block):
            for sub in s.stmts:
                self.stmt(sub)
        elif isinstance(s, ir.LetStmt):
            self.expr(s.value)
            self.lets.push(s.name, s.value)
            self.stmt(s.body)
            self.lets.pop(s.name)
        elif isinstance(s, ir.ProducerConsumer):
            self.stmt(s.body)
        elif isinstance(s, ir.Allocate):
            if s.memory_type == "GPUShared":
                self.shared.add(s.name)
            self.stmt(s.body)
        elif isinstance(s, ir.Store):
            self.expr(s.index)
            self.expr(s.value)
            self.store(s)
        elif isinstance(s, ir.Evaluate):
            if is_barrier(s):
                self.segment += 1
            else:
                self.expr(s.value)
        elif isinstance(s, ir.For):
            self.expr(s.min)
            self.expr(s.extent)
            self.nested(s.body)
        elif isinstance(s, ir.IfThenElse):
            self.expr(s.condition)
            self.nested(s)
        else:
            self.nested(s)

    def nested(self, s: ir.Stmt) -> None:
        t = touched(s)
        self.segment += t.barrier
        self.written.update((self.segment, b) for b in t.writes)
        self.refused.update((self.segment, b) for b in t.writes)
        self.read.update((self.segment, b) for b in t.reads)
        self.segment += t.barrier

    def store(self, s: ir.Store) -> None:
        where = (self.segment, s.name)
        self.written.add(where)
        key = self.lets.key(s.index) if s.predicate is None and self.can_vectorize(s.name) else None
        if key is None or not vector_lanes(s.value.type):
            self.refused.add(where)
            return
        offsets = self.stores.setdefault((*where, key[0]), {})
        if key[1] in offsets:
            self.refused.add(where)  # stored twice: the order of the two matters
        offsets[key[1]] = s.value.type

    # expressions: loads read whatever the region's path through them
    def expr(self, e: ir.Expr, conditional: bool = False) -> None:
        if isinstance(e, ir.Load):
            self.read.add((self.segment, e.name))
            self.expr(e.index, conditional)
            if not conditional and e.predicate is None and self.can_vectorize(e.name) and vector_lanes(e.type):
                key = self.lets.key(e.index)
                if key is not None:
                    self.loads.setdefault((self.segment, e.name, key[0]), {})[key[1]] = e.type
        elif isinstance(e, ir.Select):
            self.expr(e.condition, conditional)
            self.expr(e.true_value, True)
            self.expr(e.false_value, True)
        elif isinstance(e, ir.And | ir.Or):  # && and || in C: b only sometimes
            self.expr(e.a, conditional)
            self.expr(e.b, True)
        elif isinstance(e, ir.Let):
            self.expr(e.value, conditional)
            self.lets.push(e.name, e.value)
            self.expr(e.body, conditional)
            self.lets.pop(e.name)
        else:
            for name in e._children:
                value = getattr(e, name)
                if isinstance(value, ir.Expr):
                    self.expr(value, conditional)
                elif isinstance(value, tuple):
                    for v in value:
                        if isinstance(v, ir.Expr):
                            self.expr(v, conditional)

    def plan(self) -> Plan:
        plan = Plan()
        for (segment, name, base), offsets in self.loads.items():
            if (segment, name) not in self.written:
                _group(plan.loads, segment, name, base, offsets, is_store=False)
        for (segment, name, base), offsets in self.stores.items():
            if (segment, name) not in self.read and (segment, name) not in self.refused:
                _group(plan.stores, segment, name, base, offsets, is_store=True)
        return plan


def _group(out: dict, segment: int, name: str, base: ir.Expr, offsets: dict[int, Type], is_store: bool) -> None:
    """Cover the offsets' aligned runs with vectors, widest first."""
    m, r = modulus(base)
    taken: set[int] = set()
    for first in sorted(offsets):
        if first in taken:
            continue
        t = offsets[first]
        for lanes in vector_lanes(t):
            run = range(first, first + lanes)
            if (m % lanes == 0 and (r + first) % lanes == 0 and all(offsets.get(o) == t for o in run)
                    and taken.isdisjoint(run)):
                group = Group(name, t, lanes, is_store)
                for lane, o in enumerate(run):
                    out[(segment, name, base, o)] = (group, lane)
                taken.update(run)
                break


def plan_region(s: ir.Stmt, lets: Lets, eligible) -> Plan:
    """The vector accesses of the region s; `eligible(name)`: a global or shared buffer."""
    planner = _Planner(lets, eligible)
    planner.stmt(s)
    return planner.plan()
