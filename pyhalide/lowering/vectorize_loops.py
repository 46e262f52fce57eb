"""Vectorize loops marked vectorized: the loop variable becomes a Ramp and the body works on vectors.

Assumes: storage is flat (Load/Store), unrolled loops are gone, extents are simplified.
Guarantees: each vectorized loop with a constant extent becomes straight-line vector code, with
dense Ramp indices where the access is unit-stride (codegen turns those into vector loads and
stores; other indices become gathers and scatters). A guard that depends on the lane (a
GuardWithIf tail, an RDom predicate) becomes: if every lane passes, the vector body; otherwise the
original loop, run serially. Storage allocated inside the loop (a Func computed per lane, as an
inline reduction is by default) becomes each lane's own, lanes times as large. Bodies the
vectorizer cannot widen (a print, an allocation whose size depends on the lane, an inner loop
whose bounds do, a vectorized loop inside another) keep a serial loop, which computes the same
thing. A vectorized loop whose extent is not a constant but has a constant upper bound (a
producer's region narrowed in a tail) gets that many lanes, each guarded by `lane < extent`; one
with neither is an error.
"""

from __future__ import annotations

from .. import ir
from ..bounds import constant_upper_bound_within
from ..errors import CompileError
from ..ir_mutator import (
    IRMutator,
    IRVisitor,
    LetScopeMutator,
    binding,
    free_variables,
    has_call,
    has_load,
    substitute,
)
from ..ir_printer import expr_to_string
from ..types import Bool, Int
from .partition_loops import has_likely, negated


class _CannotVectorize(Exception):
    pass


def _broadcast(e: ir.Expr, lanes: int) -> ir.Expr:
    if e.type.lanes == lanes:
        return e
    if e.type.lanes != 1:
        raise _CannotVectorize(f"lane mismatch {e.type} vs {lanes}")
    if isinstance(e, ir.Broadcast):
        return ir.Broadcast(e.value, lanes)
    return ir.Broadcast(e, lanes)


def _combine(op, a: ir.Expr, b: ir.Expr, lanes: int) -> ir.Expr:
    """op(a, b) on vectors, keeping Ramp(base, stride) form for affine arithmetic."""
    va, vb = a.type.lanes > 1, b.type.lanes > 1
    if not va and not vb:
        return op(a, b)
    if op is ir.Add or op is ir.Sub:
        if isinstance(a, ir.Ramp) and not vb:
            return ir.Ramp(op(a.base, b), a.stride, lanes)
        if op is ir.Add and isinstance(b, ir.Ramp) and not va:
            return ir.Ramp(ir.Add(a, b.base), b.stride, lanes)
        if isinstance(a, ir.Ramp) and isinstance(b, ir.Ramp):
            return ir.Ramp(op(a.base, b.base), op(a.stride, b.stride), lanes)
    if op is ir.Mul:
        if isinstance(a, ir.Ramp) and not vb:
            return ir.Ramp(ir.Mul(a.base, b), ir.Mul(a.stride, b), lanes)
        if isinstance(b, ir.Ramp) and not va:
            return ir.Ramp(ir.Mul(b.base, a), ir.Mul(b.stride, a), lanes)
    return op(_broadcast(a, lanes), _broadcast(b, lanes))


class _Widen(IRMutator):
    """Rewrite a loop body for `lanes` lanes of the variable `var`, which becomes `replacement`."""

    def __init__(self, var: str, replacement: ir.Expr, lanes: int):
        super().__init__()
        self.lanes = lanes
        self.vectors: dict[str, ir.Expr] = {var: replacement}  # names whose value is now a vector
        self.per_lane: set[str] = set()  # allocations inside the loop: one copy per lane

    # ---- expressions
    def visit_Variable(self, v):
        if v.name in self.per_lane:  # the storage itself (its address), not an element of it
            raise _CannotVectorize("storage made per lane used whole")
        r = self.vectors.get(v.name)
        if r is None:
            return v
        return r if isinstance(r, ir.Ramp | ir.Broadcast) else ir.Variable(v.name, r.type, v.ref)

    def _binary(self, e):
        a, b = self.mutate(e.a), self.mutate(e.b)
        if a is e.a and b is e.b:
            return e
        return _combine(type(e), a, b, self.lanes)

    visit_Add = visit_Sub = visit_Mul = visit_Div = visit_Mod = visit_Min = visit_Max = _binary
    visit_EQ = visit_NE = visit_LT = visit_LE = visit_GT = visit_GE = visit_And = visit_Or = _binary

    def visit_Not(self, e):
        a = self.mutate(e.a)
        return e if a is e.a else ir.Not(a)

    def visit_Select(self, e):
        c, t, f = self.mutate(e.condition), self.mutate(e.true_value), self.mutate(e.false_value)
        if c is e.condition and t is e.true_value and f is e.false_value:
            return e
        if t.type.lanes > 1 or f.type.lanes > 1 or c.type.lanes > 1:
            t, f = _broadcast(t, self.lanes), _broadcast(f, self.lanes)
        return ir.Select(c, t, f)

    def _vector_of(self, e):
        """Ramp and Broadcast (of an inner vectorized loop) whose scalar parts now vary by lane
        would be vectors of vectors: that body stays serial."""
        for name in e._children:
            if self.mutate(getattr(e, name)) is not getattr(e, name):
                raise _CannotVectorize(f"{type(e).__name__} of a value that varies by lane")
        return e

    visit_Ramp = visit_Broadcast = _vector_of

    def visit_Cast(self, e):
        v = self.mutate(e.value)
        if v is e.value:
            return e
        return ir.Cast(e.type.with_lanes(v.type.lanes), v)

    def visit_Reinterpret(self, e):
        v = self.mutate(e.value)
        if v is e.value:
            return e
        return ir.Reinterpret(e.type.with_lanes(v.type.lanes), v)

    def visit_Load(self, e):
        index = self.mutate(e.index)
        if e.name in self.per_lane and e.index.type.lanes > 1:
            raise _CannotVectorize("a vector load of an inner loop from storage made per lane")
        if e.name in self.per_lane:
            return ir.Load(e.type.with_lanes(self.lanes), e.name, self._lane_index(index, e.predicate))
        if index is e.index:
            return e
        return ir.Load(e.type.with_lanes(index.type.lanes), e.name, index)

    def _lane_index(self, index: ir.Expr, predicate) -> ir.Expr:
        """Where each lane keeps element `index` of an allocation made per lane: element i of lane
        l at i * lanes + l (Halide's layout), so an index the same for every lane is one dense
        vector."""
        if predicate is not None:
            raise _CannotVectorize("predicated access to storage made per lane")
        lanes = ir.make_const(index.type.element_of(), self.lanes)
        if index.type.lanes not in (1, self.lanes):
            raise _CannotVectorize("access to storage made per lane with another vector width")
        return _combine(ir.Add, _combine(ir.Mul, index, lanes, self.lanes),
                        ir.Ramp(ir.make_const(index.type.element_of(), 0), ir.make_const(index.type.element_of(), 1),
                                self.lanes), self.lanes)

    def visit_Call(self, e):
        if e.call_type == ir.INTRINSIC and e.name == "trace":
            # one event of vectors, as Halide prints a vector store: f.0(<0, 1>, <0, 0>) = <a, b>
            args = tuple(self.mutate(a) for a in e.args)
            if all(a is b for a, b in zip(args, e.args)):
                return e
            args = tuple(a if isinstance(a, ir.StringImm) else _broadcast(a, self.lanes) for a in args)
            return ir.Call(e.type.with_lanes(self.lanes), e.name, args, e.call_type)
        if e.call_type == ir.INTRINSIC and e.name == "print":
            if any(a is not self.mutate(a) for a in e.args):
                raise _CannotVectorize(e.name)
            return e
        args = tuple(self.mutate(a) for a in e.args)
        if all(a is b for a, b in zip(args, e.args)):
            return e
        args = tuple(_broadcast(a, self.lanes) for a in args)
        return ir.Call(e.type.with_lanes(self.lanes), e.name, args, e.call_type, e.value_index, e.func, e.image)

    def _let(self, node):
        """Let and LetStmt: a vector value renames nothing, but uses of the name become vectors.
        A Ramp is substituted rather than bound, so accesses through it stay dense."""
        value = self.mutate(node.value)
        if value.type.lanes > 1:
            self.vectors[node.name] = value if isinstance(value, ir.Ramp) else ir.Variable(node.name, value.type)
        body = self.mutate(node.body)
        self.vectors.pop(node.name, None)
        if isinstance(value, ir.Ramp):
            return body
        if value is node.value and body is node.body:
            return node
        return type(node)(node.name, value, body)

    visit_Let = visit_LetStmt = _let

    def visit_Store(self, s):
        value, index = self.mutate(s.value), self.mutate(s.index)
        if s.name in self.per_lane and s.index.type.lanes > 1:
            # element i of an inner vector's lane j is not element i of this loop's lane j
            raise _CannotVectorize("a vector store of an inner loop to storage made per lane")
        if s.name in self.per_lane:
            return ir.Store(s.name, _broadcast(value, self.lanes), self._lane_index(index, s.predicate))
        if value is s.value and index is s.index:
            return s
        if index.type.lanes == 1:
            raise _CannotVectorize("all lanes store to one place")
        return ir.Store(s.name, _broadcast(value, self.lanes), index)

    def visit_For(self, s):
        lo, ext = self.mutate(s.min), self.mutate(s.extent)
        if lo.type.lanes > 1 or ext.type.lanes > 1:
            raise _CannotVectorize("inner loop bounds depend on the lane")
        if s.for_type in (ir.VECTORIZED, ir.PARALLEL):
            raise _CannotVectorize("nested vectorized or parallel loop")
        body = self.mutate(s.body)
        return s if body is s.body else ir.For(s.name, lo, ext, s.for_type, body)

    def visit_IfThenElse(self, s):
        cond = self.mutate(s.condition)
        if cond.type.lanes > 1:
            raise _LaneGuard(cond)
        return self.default(s)

    def visit_Allocate(self, s):
        extents = tuple(self.mutate(e) for e in s.extents)
        if any(e.type.lanes > 1 for e in extents):
            raise _CannotVectorize("allocation whose size depends on the lane")
        self.per_lane.add(s.name)
        try:
            body = self.mutate(s.body)
        finally:
            self.per_lane.discard(s.name)
        return ir.Allocate(s.name, s.type, (*extents, ir.make_const(Int(32), self.lanes)), body, s.memory_type)

    def visit_AssertStmt(self, s):
        raise _CannotVectorize("assert inside a vectorized loop")

    def visit_Atomic(self, s):
        raise _CannotVectorize("atomic update: lanes may collide")


class _LaneGuard(Exception):
    def __init__(self, cond):
        super().__init__("guard")
        self.cond = cond


def _strip_guards(stmt: ir.Stmt, var: str) -> tuple[ir.Stmt, list[ir.Expr], list[tuple[str, ir.Expr]]]:
    """Peel the lets and lane-dependent ifs off the top of a loop body: (body, guards, lets)."""
    guards, lets = [], []
    while True:
        if isinstance(stmt, ir.LetStmt):
            lets.append((stmt.name, stmt.value))
            stmt = stmt.body
        elif isinstance(stmt, ir.IfThenElse) and stmt.else_case is None:
            guards.append((len(lets), stmt.condition))
            stmt = stmt.then_case
        else:
            return stmt, guards, lets


MAX_LANES = 16384  # LLVM asserts on 65535-lane vectors (too many operands for one SelectionDAG node)


class _Vectorize(LetScopeMutator):
    """Rewrites vectorized loops (expressions hold none)."""

    def __init__(self):
        super().__init__()
        self.loops: dict[str, ir.For] = {}  # enclosing loops

    def visit_For(self, s):
        with binding(self.loops, s.name, s):
            body = self.mutate(s.body)
        if s.for_type != ir.VECTORIZED:
            return s if body is s.body else ir.For(s.name, s.min, s.extent, s.for_type, body)
        lanes, exact = constant_upper_bound_within(s.extent, self.lets, self.loops)
        if lanes is None:
            raise CompileError(f"Can't vectorize loop {s.name}: its extent ({expr_to_string(s.extent)}) is not a "
                               "constant and has no constant upper bound. "
                               "Split it by a constant factor first (vectorize(x, n)).")
        if not exact:
            # As many lanes as the extent can reach, each guarded: a lane-dependent guard, so the
            # vector body runs where the extent reaches its bound, the original loop elsewhere.
            lane = ir.Sub(ir.Variable(s.name, s.min.type), s.min)
            body = ir.IfThenElse(ir.LT(lane, s.extent), body, None)
            s = ir.For(s.name, s.min, ir.make_const(s.extent.type, max(lanes, 0)), s.for_type, body)
        if lanes > MAX_LANES:
            raise CompileError(f"Can't vectorize loop {s.name} {lanes} lanes wide: at most {MAX_LANES} (wider vectors "
                               "fail inside LLVM's instruction selection); vectorize by a smaller factor")
        serial = ir.For(s.name, s.min, s.extent, ir.SERIAL, body)
        if lanes <= 1 or s.min.type.lanes != 1:
            return serial
        ramp = ir.Ramp(s.min, ir.make_const(s.min.type, 1), lanes)
        try:
            return _without_clamps_when_inside(_Widen(s.name, ramp, lanes).mutate(body), lanes)
        except _CannotVectorize:  # e.g. vectors of vectors: keep the loop serial
            return serial
        except _LaneGuard:
            pass
        # A lane-dependent guard: run the vector body when every lane passes, else the serial loop.
        inner, guards, lets = _strip_guards(body, s.name)
        deep = _HoistLaneGuards(s.name)
        inner = deep.mutate(inner)
        guards += [(len(lets), cond) for cond in deep.conds]
        try:
            fast = _without_clamps_when_inside(_Widen(s.name, ramp, lanes).mutate(_rebuild(inner, lets)), lanes)
            conds = []
            for n_lets, cond in guards:
                e = cond
                for name, value in reversed(lets[:n_lets]):
                    e = ir.Let(name, value, e)
                conds.append(_Widen(s.name, ramp, lanes).mutate(e))
        except (_CannotVectorize, _LaneGuard):
            return serial
        # Test the guards one after another: a later one may read memory that only the earlier
        # ones make safe to read.
        for c in reversed(conds):
            c = c if c.type.lanes > 1 else ir.Broadcast(c, lanes)
            fast = ir.IfThenElse(ir.Call(Bool(), "all_true", (c,), ir.INTRINSIC), fast, serial)
        return fast


class _HoistLaneGuards(IRMutator):
    """The lane-dependent guards deeper in a vector loop's body that depend on nothing the body
    computes (a GuardWithIf tail's test, after the Funcs computed per lane): removed, their
    conditions (inner lets substituted) kept in `conds`, to be tested once for all the lanes at
    the top, where they have the same value."""

    def __init__(self, var: str):
        super().__init__()
        self.var = var
        self.lets: dict[str, ir.Expr] = {}  # inner lets of arithmetic alone, to substitute
        self.bound: set[str] = set()  # loop variables, and lets of what memory holds
        self.conds: list[ir.Expr] = []

    def visit_LetStmt(self, s):
        value = substitute(self.lets, s.value)
        outer = self.lets.pop(s.name, None), s.name in self.bound
        if has_load(value) or has_call(value) or free_variables(value) & self.bound:
            self.bound.add(s.name)
        else:
            self.bound.discard(s.name)
            self.lets[s.name] = value
        body = self.mutate(s.body)
        self.lets.pop(s.name, None)
        if outer[0] is not None:  # (a name bound again inside: the outer binding is back)
            self.lets[s.name] = outer[0]
        if outer[1]:
            self.bound.add(s.name)
        else:
            self.bound.discard(s.name)
        return s if body is s.body else ir.LetStmt(s.name, s.value, body)

    def visit_For(self, s):
        self.bound.add(s.name)
        body = self.mutate(s.body)
        self.bound.discard(s.name)
        return s if body is s.body else ir.For(s.name, s.min, s.extent, s.for_type, body)

    def visit_IfThenElse(self, s):
        if s.else_case is None:
            cond = substitute(self.lets, s.condition)
            names = free_variables(cond)
            if self.var in names and not names & self.bound and not (has_load(cond) or has_call(cond)):
                self.conds.append(cond)
                return self.mutate(s.then_case)
        return self.default(s)


class _PeelClamps(IRMutator):
    """Remove the clamps of boundary conditions, `clamp(likely(v), lo, hi)` with v a vector and the
    bounds the same for every lane, noting for each the condition under which it changes nothing."""

    def __init__(self, bound: set[str]):
        super().__init__()
        self.bound = bound  # names defined inside the vector body: conditions can't use them
        self.conds: list[ir.Expr] = []
        self.lets: dict[str, ir.Expr] = {}  # Lets around the node visited whose values conditions can use

    def visit_Let(self, e):
        value = self.mutate(e.value)
        usable = self._outside(e.value) and not (has_load(e.value) or has_call(e.value))
        if usable:
            self.lets[e.name] = e.value
        try:
            body = self.mutate(e.body)
        finally:
            self.lets.pop(e.name, None)
        return e if value is e.value and body is e.body else ir.Let(e.name, value, body)

    def _outside(self, e) -> bool:
        return not (free_variables(e) & self.bound)

    def _core(self, e):
        """v, if e is likely(v) under a chain of lane-invariant mins and maxes; else None."""
        if isinstance(e, ir.Call) and e.call_type == ir.INTRINSIC and e.name == "likely" and e.type.lanes > 1:
            return e.args[0] if self._outside(e.args[0]) else None
        if isinstance(e, ir.Min | ir.Max) and isinstance(e.b, ir.Broadcast) and self._outside(e.b):
            v = self._core(e.a)
            if v is not None:
                self.conds.append(ir.LE(v, e.b) if isinstance(e, ir.Min) else ir.GE(v, e.b))
            return v
        return None

    def _clamp(self, e):
        n = len(self.conds)
        v = self._core(e)
        if v is None:
            del self.conds[n:]
            return self.default(e)
        return self.mutate(v)

    visit_Min = visit_Max = _clamp

    def visit_Select(self, e):
        """A boundary condition's `select(outside, coordinate, clamp(likely(v), lo, hi))` (or any
        select with `likely` on one side only): that side, where its condition holds on every lane."""
        c = e.condition
        if free_variables(c) & self.lets.keys():  # (CSE's lets of the bounds: as what they hold)
            c = substitute(self.lets, c)
        if (c.type.lanes == e.type.lanes > 1 and has_likely(e.true_value) != has_likely(e.false_value)
                and self._outside(c) and not (has_load(c) or has_call(c))):
            likely_true = has_likely(e.true_value)
            self.conds.append(c if likely_true else negated(c))
            return self.mutate(e.true_value if likely_true else e.false_value)
        return self.default(e)


def _without_clamps_when_inside(stmt: ir.Stmt, lanes: int) -> ir.Stmt:
    """Halide partitions loops so that the steady state runs without boundary clamps; here each
    vector iteration tests whether its clamps change anything and, if not, runs a version without
    them, whose accesses are dense instead of gathers."""
    peel = _PeelClamps(_bound_names(stmt))
    fast = peel.mutate(stmt)
    if not peel.conds:
        return stmt
    unique = list(dict.fromkeys(peel.conds))
    cond = unique[0]
    for c in unique[1:]:
        cond = ir.And(cond, c)
    return ir.IfThenElse(ir.Call(Bool(), "all_true", (cond,), ir.INTRINSIC), fast, stmt)


def _bound_names(stmt: ir.Stmt) -> set[str]:
    names: set[str] = set()

    class _Binders(IRVisitor):
        def visit_Let(self, e):
            names.add(e.name)
            self.visit_children(e)

        visit_LetStmt = visit_For = visit_Let

    _Binders().visit(stmt)
    return names


def _rebuild(stmt, lets):
    for name, value in reversed(lets):
        stmt = ir.LetStmt(name, value, stmt)
    return stmt


def vectorize_loops(stmt: ir.Stmt) -> ir.Stmt:
    return _Vectorize().mutate(stmt)
