"""Vector loads and stores in CUDA kernels: scalar accesses that together read or write one
aligned run of consecutive elements become one 4- to 16-byte access (LDG.128, STS.64, ...).

A GPU thread is scalar: gpu_vector_loops unrolls a loop the schedule vectorizes inside a kernel,
so the copies' loads and stores each touch one element, their indices written through each
copy's lets. nvcc does not merge them (nor take an element from a wider load of the same run), so
a thread moving 8 uint16s issues 8 memory instructions where one would do. The printer plans
each straight-line region of a kernel (the kernel's body, a loop's body, a branch) before
printing it:

- every index is resolved through the enclosing lets into an affine form `base + offset` (base:
  its terms with their coefficients; offset: its constant);
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
from ..ir_mutator import expr_free_variables, has_load, substitute
from ..lowering.gpu_kernels import Touches, is_barrier
from ..types import Type

VECTOR_BYTES = (16, 8, 4)  # the widths tried, widest first


def vector_lanes(t: Type) -> tuple[int, ...]:
    """The numbers of elements of type t that make a vector access, most first."""
    if t.lanes != 1 or t.is_bool() or t.bits not in (8, 16, 32, 64):
        return ()
    return tuple(width * 8 // t.bits for width in VECTOR_BYTES if width * 8 // t.bits >= 2)


class Lets:
    """The lets in scope, each value resolved through the lets enclosing it. Resolutions and
    keys are remembered by the expression and the resolved values of the lets it names, so the
    printer, walking a region after its plan did, reuses the plan's work."""

    def __init__(self):
        self.scope: dict[str, list[ir.Expr]] = {}
        self.memo: dict[tuple, tuple] = {}  # (what, id(e), ids of its lets' values) -> (e, result)

    def push(self, name: str, value: ir.Expr) -> None:
        self.scope.setdefault(name, []).append(self.resolve(value))

    def pop(self, name: str) -> None:
        self.scope[name].pop()

    def _remembered(self, what: str, e: ir.Expr, work):
        bound = {n: vs[-1] for n in expr_free_variables(e) if (vs := self.scope.get(n))}
        memo_key = (what, id(e), *sorted((n, id(v)) for n, v in bound.items()))
        hit = self.memo.get(memo_key)
        if hit is None:  # (e and the values kept with the result: their ids stay theirs)
            hit = self.memo[memo_key] = (e, tuple(bound.values()), work(bound))
        return hit[2]

    def resolve(self, e: ir.Expr) -> ir.Expr:
        return self._remembered("value", e, lambda bound: substitute(bound, e) if bound else e)

    def key(self, index: ir.Expr) -> tuple[frozenset, int] | None:
        """(base, offset) with index = base + offset: base the index's terms other than its
        constant, as {(term, coefficient)} (an affine form, so that `x + 1 + y * w` and `x + (y * w
        + 1)` share a base); None where the index reads memory (it could change in between)."""
        if has_load(index):
            return None

        def work(bound):
            terms: dict[_Term, int] = {}
            offset = _affine(substitute(bound, index) if bound else index, 1, terms)
            return frozenset((t, c) for t, c in terms.items() if c), offset

        return self._remembered("key", index, work)


def _affine(e: ir.Expr, scale: int, terms: dict) -> int:
    """Adds scale * e to terms (what is not a sum, difference or multiple by a constant is one
    term) and returns the constant part."""
    if (c := ir.const_int(e)) is not None:
        return scale * c
    if isinstance(e, ir.Add | ir.Sub):
        return _affine(e.a, scale, terms) + _affine(e.b, -scale if isinstance(e, ir.Sub) else scale, terms)
    if isinstance(e, ir.Mul):
        for factor, other in ((e.b, e.a), (e.a, e.b)):
            if (k := ir.const_int(factor)) is not None:
                return _affine(other, scale * k, terms)
    if isinstance(e, ir.Cast) and e.type.is_int() and e.value.type.is_int() and e.type.bits >= e.value.type.bits:
        return _affine(e.value, scale, terms)
    term = _Term(e)
    terms[term] = terms.get(term, 0) + scale
    return 0


class _Term:
    """An expression as a dict key, hashed once (IR nodes hash their whole tree every time)."""

    __slots__ = ("e", "h")

    def __init__(self, e: ir.Expr):
        self.e, self.h = e, hash(e)

    def __hash__(self):
        return self.h

    def __eq__(self, other):
        return self.e is other.e or (self.h == other.h and self.e == other.e)


def modulus(e: ir.Expr) -> tuple[int, int]:
    """(m, r) with e = m * k + r for some integer k (m 0: e is r), from e's arithmetic (a tile's
    corner min(xo * 64, w - 64) is a multiple of the gcd of 64 and w - 64)."""
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


def base_modulus(base: frozenset) -> tuple[int, int]:
    """modulus() of a sum of terms times coefficients."""
    m, r = 0, 0
    for term, coefficient in base:
        mt, rt = modulus(term.e)
        m = math.gcd(m, mt * coefficient)
        r += rt * coefficient
    return m, (r % m if m else r)


@dataclass(frozen=True, eq=False)
class Group:
    """One vector access of `lanes` elements of `type` (each group its own, compared by identity)."""

    type: Type
    lanes: int


@dataclass
class Plan:
    """The vector accesses of one region: (segment, buffer, base, offset) -> (group, lane)."""

    loads: dict[tuple, tuple[Group, int]] = field(default_factory=dict)
    stores: dict[tuple, tuple[Group, int]] = field(default_factory=dict)


class _Planner:
    """Walks one region as the printer will (the same segments, the same lets) and records its
    accesses; nested loops and branches are other regions, only what they touch counts here."""

    def __init__(self, lets: Lets, eligible, touched: Touches):
        self.lets, self.eligible, self.touched = lets, eligible, touched
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
        t = self.touched(s)
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
                _group(plan.loads, segment, name, base, offsets)
        for (segment, name, base), offsets in self.stores.items():
            if (segment, name) not in self.read and (segment, name) not in self.refused:
                _group(plan.stores, segment, name, base, offsets)
        return plan


def _group(out: dict, segment: int, name: str, base: frozenset, offsets: dict[int, Type]) -> None:
    """Cover the offsets' aligned runs with vectors, widest first."""
    m, r = base_modulus(base)
    taken: set[int] = set()
    for first in sorted(offsets):
        if first in taken:
            continue
        t = offsets[first]
        for lanes in vector_lanes(t):
            run = range(first, first + lanes)
            if (m % lanes == 0 and (r + first) % lanes == 0 and all(offsets.get(o) == t for o in run)
                    and taken.isdisjoint(run)):
                group = Group(t, lanes)
                for lane, o in enumerate(run):
                    out[(segment, name, base, o)] = (group, lane)
                taken.update(run)
                break


def plan_region(s: ir.Stmt, lets: Lets, eligible, touched: Touches) -> Plan:
    """The vector accesses of the region s; `eligible(name)`: a global or shared buffer."""
    planner = _Planner(lets, eligible, touched)
    planner.stmt(s)
    return planner.plan()
