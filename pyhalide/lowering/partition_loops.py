"""Loop partitioning: a serial loop whose body tests a condition that holds for all but its first
or last iterations is split into a prologue, a steady state and an epilogue, and the steady
state runs without the test (as Halide's partition_loops does for its `likely` conditions).

What it finds are the guards of GuardWithIf tails, `if (x_o * 6 + k < extent)`, inside every
loop of a register tile's reduction: with the test in the way the accumulators live in memory;
without it, in registers; and the sliding window's `select(y > y_min, new rows, all rows)` in the
let of a producer's first row: in the steady state it computes exactly the one new row, with no
loop around it; and the scalar `min` / `max` of a ShiftInwards split, `min(x_o * 16 + x_min,
x_max - 15)`, and of clamps, `max(min(y, h - 1), 0)`, which are their first operand in the
steady state. A condition counts for a loop when it is a comparison (or a
conjunction of comparisons) affine in the loop's variable with a constant coefficient, and
depends on nothing else that changes inside the loop but the variables of short loops (a
constant extent of at most SHORT_LOOP) nested in it, in which it must be affine too: it then
holds for all their iterations where it holds at their first and last. Clamps of boundary
conditions are settled at the innermost loop that is not short, as Halide partitions an outer
loop: bilateral_grid's histogram reads 8 x 8 pixels per grid cell through repeat_edge, and
partitioning the loop over cells leaves the 8-iteration loops inside without a clamp, where
partitioning those split every 8 iterations in three. The prologue and epilogue keep the
original body, so the result computes exactly what the loop did.

A loop's partition policy (Func.partition and friends) overrides all that, as in Halide: a loop
set to Partition.Never is not partitioned (the loops inside it still may be); one set to Always
is partitioned wherever it has a condition this pass can solve for it, whatever its size, depth
or kind (a parallel loop: an if in its body, as Halide does, instead of three loops), and is a
CompileError with Halide's message where it has none. Halide partitions only around `likely`
conditions (boundary conditions, tails), this pass around any it can solve, so Always fails in
fewer places here. Policies are by loop name: vectorized and unrolled loops are gone before
this pass (as in Halide), GPU loops are left whole, and a loop whose specializations disagree
on its policy gets Auto.
"""

from __future__ import annotations

from .. import ir
from ..errors import CompileError
from ..ir_mutator import IRMutator, affine_in, children, free_variables, has_call, map_children, substitute
from ..schedule import PARALLEL, SERIAL, Partition
from ..simplify import simplify
from ..types import Int
from .schedule_functions import loop_name, stage_schedule

_I32 = Int(32)
SHORT_LOOP = 16  # a loop of a constant extent up to this is short (see the module's docstring)


def _short_range(s: ir.For) -> tuple[int, int] | None:
    """(first, last) iteration of a short loop; None for any other."""
    lo, extent = ir.const_int(s.min), ir.const_int(s.extent)
    if lo is None or extent is None or not 0 < extent <= SHORT_LOOP:
        return None
    return lo, lo + extent - 1


def _has_long_loop(s: ir.Stmt) -> bool:
    """Whether s holds a loop that is not short (at any depth)."""
    stack = [s]
    while stack:
        n = stack.pop()
        if isinstance(n, ir.For) and _short_range(n) is None:
            return True
        stack.extend(c for c in children(n) if isinstance(c, ir.Stmt))
    return False


def _invariant(e: ir.Expr) -> bool:
    """Whether e can be evaluated before the loop: no loads, no calls (the loop may write what
    they read)."""
    if has_call(e):
        return False
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, ir.Load):
            return False
        stack.extend(children(n))
    return True


def conjuncts(cond: ir.Expr) -> list[ir.Expr]:
    if isinstance(cond, ir.And):
        return conjuncts(cond.a) + conjuncts(cond.b)
    if isinstance(cond, ir.Call) and cond.call_type == ir.INTRINSIC and cond.name == "likely":
        return conjuncts(cond.args[0])
    if isinstance(cond, ir.Call) and cond.call_type == ir.INTRINSIC and cond.name == "all_true":
        # every lane of a conjunction: each conjunct on every lane, and a ramp against a
        # broadcast holds on every lane where it holds on the extreme one (the vectorized
        # clamps' test, `all_true(ramp(x, 1, 16) <= x16(w - 1) && ...)`)
        arg = cond.args[0]
        if isinstance(arg, ir.And):
            return conjuncts(ir.Call(cond.type, "all_true", (arg.a,), ir.INTRINSIC)) + \
                conjuncts(ir.Call(cond.type, "all_true", (arg.b,), ir.INTRINSIC))
        scalar = _extreme_lane(arg)
        return [cond] if scalar is None else [scalar]
    return [cond]


_FLIPPED = {ir.LT: ir.GT, ir.LE: ir.GE, ir.GT: ir.LT, ir.GE: ir.LE}


def _extreme_lane(cmp: ir.Expr) -> ir.Expr | None:
    """The scalar comparison that holds exactly when `cmp`, a ramp compared with a broadcast,
    holds on every lane: that of the ramp's last lane for an upper bound of an increasing ramp,
    of its first for a lower bound; None for anything else."""
    if not isinstance(cmp, ir.LT | ir.LE | ir.GT | ir.GE):
        return None
    kind, ramp, other = type(cmp), cmp.a, cmp.b
    if isinstance(ramp, ir.Broadcast) and isinstance(other, ir.Ramp):
        kind, ramp, other = _FLIPPED[kind], other, ramp
    if not (isinstance(ramp, ir.Ramp) and isinstance(other, ir.Broadcast)) or ramp.base.type != _I32:
        return None
    stride = ir.const_int(ramp.stride)
    if stride is None:
        return None
    upper = kind in (ir.LT, ir.LE)
    last = ir.Add(ramp.base, ir.IntImm(_I32, stride * (ramp.lanes - 1)))
    lane = last if (stride > 0) == upper else ramp.base
    return kind(lane, other.value)


def solve(cond: ir.Expr, v: str, invariant=None):
    """The iterations of v where the comparison cond holds, as ("lo", e): v >= e, or ("hi", e):
    v < e; None if cond is not a scalar int32 comparison affine in v (with the rest of it
    `invariant`: by default, free of loads and calls)."""
    if not isinstance(cond, ir.LT | ir.LE | ir.GT | ir.GE) or cond.a.type != _I32:
        return None
    # as d < 0
    if isinstance(cond, ir.LT):
        d = ir.Sub(cond.a, cond.b)
    elif isinstance(cond, ir.LE):
        d = ir.Sub(ir.Sub(cond.a, cond.b), ir.IntImm(_I32, 1))
    elif isinstance(cond, ir.GT):
        d = ir.Sub(cond.b, cond.a)
    else:
        d = ir.Sub(ir.Sub(cond.b, cond.a), ir.IntImm(_I32, 1))
    lin = affine_in(d, v)
    if lin is None or lin[0] == 0 or not (invariant or _invariant)(lin[1]):
        return None
    a, r = lin
    if a > 0:  # a*v + r < 0  <=>  v < floor((-r - 1) / a) + 1
        return "hi", ir.Add(ir.Div(ir.Sub(ir.Sub(ir.IntImm(_I32, 0), r), ir.IntImm(_I32, 1)), ir.IntImm(_I32, a)),
                            ir.IntImm(_I32, 1))
    # -b*v + r < 0  <=>  v > r / b  <=>  v >= floor(r / b) + 1
    return "lo", ir.Add(ir.Div(r, ir.IntImm(_I32, -a)), ir.IntImm(_I32, 1))


_NEGATED = {ir.LT: ir.GE, ir.LE: ir.GT, ir.GT: ir.LE, ir.GE: ir.LT, ir.EQ: ir.NE, ir.NE: ir.EQ}


def negated(cond: ir.Expr) -> ir.Expr:
    """!cond, its negations pushed down to the comparisons (De Morgan)."""
    if isinstance(cond, ir.Or):
        return ir.And(negated(cond.a), negated(cond.b))
    if isinstance(cond, ir.And):
        return ir.Or(negated(cond.a), negated(cond.b))
    if isinstance(cond, ir.Not):
        return cond.a
    flipped = _NEGATED.get(type(cond))
    return ir.Not(cond) if flipped is None else flipped(cond.a, cond.b)


def has_likely(e: ir.Expr) -> bool:
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, ir.Call) and n.call_type == ir.INTRINSIC and n.name == "likely":
            return True
        stack.extend(children(n))
    return False


class _WithoutLikely(IRMutator):
    def visit_Call(self, e):
        if e.call_type == ir.INTRINSIC and e.name == "likely":
            return self.mutate(e.args[0])
        return self.default(e)


def _without_likely(e: ir.Expr) -> ir.Expr:
    return _WithoutLikely().mutate(e) if has_call(e) else e


def _size(e: ir.Expr) -> int:
    return 1 + sum(_size(c) for c in children(e))


def larger_than(node: ir.Node, limit: int) -> bool:
    """Whether _size(node) > limit, counting no further than that (a loop body's size is asked
    of every loop around it: counted whole, it was a quarter of this pass's time)."""
    stack, seen = [node], 0
    while stack:
        seen += 1
        if seen > limit:
            return True
        stack.extend(children(stack.pop()))
    return False


class _Abbreviate(IRMutator):
    """Replaces every occurrence of one expression by a variable that holds it."""

    def __init__(self, long: ir.Expr, short: ir.Variable):
        super().__init__()
        self.long, self.short = long, short

    def mutate(self, node):
        if node == self.long:
            return self.short
        return super().mutate(node)


class _Conditions(IRMutator):
    """Makes the steady-state body: removes the conjuncts of the body's ifs (and settles the
    selects and mins) that solve can solve for loop variable v, recording for each the
    iterations where that holds. One walk does both, so every test removed has its bound: a
    condition is solved against the lets as the steady state computes them, which equal the
    original lets wherever all the recorded bounds hold. Lets inside the loop are seen through;
    a conjunct that depends on a loop nested inside v's (or on a let of one) is left alone."""

    statements_only = True
    MAX_LET_DEPTH = 8  # lets of lets expanded into a condition, at most

    def __init__(self, v: str, boundaries: bool, likely_selects: bool = False):
        super().__init__()
        self.v = v
        # Also the Selects with `likely` on one side only (boundary conditions': constant_exterior,
        # mirror_image): that side, where the condition solves for v (as Halide does).
        self.likely_selects = likely_selects
        # Also the clamps of boundary conditions, `max(min(likely(x), hi), lo)`, inlined below
        # Let expressions: worth a copy of the body only in an innermost loop, where they cost
        # on every element (in an outer loop they are evaluated once per inner loop).
        self.boundaries = boundaries
        self.lets: dict[str, ir.Expr] = {}  # lets inside v's loop, as written
        self.inner: set[str] = set()  # loops inside v's loop, and the lets that depend on them
        self.expression_lets: dict[str, ir.Expr] = {}  # the Let expressions around the one being settled
        self.short: dict[str, tuple[int, int]] = {}  # short loops inside v's loop: (first, last)
        self.bounds: list[tuple[str, ir.Expr]] = []
        self.from_selects = 0  # how many of the bounds came from selects or mins (not ifs)

    def _scoped(self, name: str, value, body: ir.Stmt) -> ir.Stmt:
        """The body, visited with `name` bound to a let value (or, value None, a loop)."""
        saved = self.lets.get(name), name in self.inner
        if value is None or free_variables(value) & self.inner:
            self.inner.add(name)
            self.lets.pop(name, None)
        else:
            self.inner.discard(name)
            self.lets[name] = value
        try:
            return self.mutate(body)
        finally:
            let, inner = saved
            if let is None:
                self.lets.pop(name, None)
            else:
                self.lets[name] = let
            (self.inner.add if inner else self.inner.discard)(name)

    def visit_LetStmt(self, s):
        value = self._mins(self._selects(s.value))
        body = self._scoped(s.name, value, s.body)
        return s if body is s.body and value is s.value else ir.LetStmt(s.name, value, body)

    def visit_Store(self, s):
        index, value = self._mins(s.index), self._mins(s.value)
        if index is s.index and value is s.value:
            return s
        return ir.Store(s.name, value, index, s.predicate)

    def _mins(self, e: ir.Expr) -> ir.Expr:
        """An expression with the scalar Mins and Maxes whose first-operand case solves for v
        recorded and replaced by that operand; below a Let (a boundary condition's clamp of an
        inlined coordinate), with the Let's value known while its body is settled."""
        if not self._has_min(e, self.boundaries, self.likely_selects):
            return e
        memo: dict[int, tuple[ir.Expr, ir.Expr]] = {}  # let names are unique: shared subtrees once

        def settle(n: ir.Expr) -> ir.Expr:
            hit = memo.get(id(n))
            if hit is not None and hit[0] is n:
                return hit[1]
            if isinstance(n, ir.Let) and not self.boundaries:
                out = n
            elif isinstance(n, ir.Let):
                value = settle(n.value)
                self.expression_lets[n.name] = n.value
                try:
                    body = settle(n.body)
                finally:
                    del self.expression_lets[n.name]
                out = n if value is n.value and body is n.body else ir.Let(n.name, value, body)
            elif isinstance(n, ir.Call) and n.call_type == ir.INTRINSIC and n.name == "likely" and n.type.lanes == 1:
                arg = settle(n.args[0])
                out = n if arg is n.args[0] else ir.Call(n.type, n.name, (arg,), n.call_type)
            elif isinstance(n, ir.Select) and self.likely_selects and n.condition.type.lanes == 1 and \
                    has_likely(n.true_value) != has_likely(n.false_value):
                likely_true = has_likely(n.true_value)
                holds = self._mins(n.condition if likely_true else negated(n.condition))
                answers = [self._solutions(c) for c in conjuncts(holds)]
                if None in answers:
                    out = map_children(n, settle)
                else:
                    for a in answers:
                        self.bounds.extend(a)
                        self.from_selects += len(a)
                    out = settle(n.true_value if likely_true else n.false_value)
            elif isinstance(n, ir.Min | ir.Max) and n.type.lanes == 1:
                a, b = settle(n.a), settle(n.b)
                cond = ir.LE(a, b) if isinstance(n, ir.Min) else ir.GE(a, b)
                answers = self._solutions(cond)
                if answers is not None:
                    self.bounds.extend(answers)
                    self.from_selects += len(answers)
                    out = a
                else:
                    out = n if a is n.a and b is n.b else type(n)(a, b)
            else:
                out = map_children(n, settle)
            memo[id(n)] = (n, out)
            return out

        return settle(e)

    @staticmethod
    def _has_min(e: ir.Expr, below_lets: bool, selects: bool = False) -> bool:
        stack, seen = [e], set()
        while stack:
            n = stack.pop()
            if isinstance(n, ir.Min | ir.Max) and n.type.lanes == 1 or selects and isinstance(n, ir.Select):
                return True
            if (below_lets or not isinstance(n, ir.Let)) and id(n) not in seen:
                seen.add(id(n))  # (each shared subtree once; e keeps them all alive)
                stack.extend(children(n))
        return False

    def _settled(self, e: ir.Expr) -> ir.Expr:
        """A select's value in the steady state, simplified with the loop's lets seen through and
        then written in terms of them again: `max(y - 1, (y0 + yi) + 1)` under `let y = y0 + yi`
        becomes `y + 1`, which the loop bounds it feeds then simplify against."""
        full = self._expanded(e)
        if full is None:
            return e
        short = simplify(full)
        for name, value in sorted(self.lets.items(), key=lambda kv: -_size(kv[1])):
            value_full = self._expanded(value)
            if value_full is not None and not isinstance(value_full, ir.Variable | ir.IntImm):
                short = _Abbreviate(simplify(value_full), ir.Variable(name, value.type)).mutate(short)
        return short if _size(short) <= _size(e) else e

    def _selects(self, e: ir.Expr) -> ir.Expr:
        """A let's value with the Selects whose conditions solve for v recorded and replaced by
        their true values."""
        if isinstance(e, ir.Select):
            # only the sliding window's `select(v > v.min, ...)`: other selects of lets (lanes of
            # a boundary, say) would copy bodies for little gain, at compile time's cost
            c = e.condition
            later = isinstance(c, ir.GT) and isinstance(c.a, ir.Variable) and c.a.name == self.v
            solvable = later and self._expanded(c) is not None and not free_variables(c) & self.short.keys()
            answers = [solve(c, self.v)] if solvable else []
            if answers and None not in answers:
                self.bounds.extend(answers)
                self.from_selects += len(answers)
                return self._settled(self._selects(e.true_value))
            t, f = self._selects(e.true_value), self._selects(e.false_value)
            return e if t is e.true_value and f is e.false_value else ir.Select(e.condition, t, f)
        if isinstance(e, ir.Min | ir.Max | ir.Add | ir.Sub):
            a, b = self._selects(e.a), self._selects(e.b)
            return e if a is e.a and b is e.b else type(e)(a, b)
        return e

    def visit_For(self, s):
        lo, extent = self._mins(s.min), self._mins(s.extent)
        short = _short_range(s)
        if short is not None:
            self.short[s.name] = short
        try:
            body = self._scoped(s.name, None, s.body)
        finally:
            self.short.pop(s.name, None)
        if body is s.body and lo is s.min and extent is s.extent:
            return s
        return ir.For(s.name, lo, extent, s.for_type, body)

    def _expanded(self, c: ir.Expr) -> ir.Expr | None:
        """c with the loop's lets (and the expression lets around it) substituted and `likely`
        marks dropped; None if it depends on an inner loop."""
        for _ in range(self.MAX_LET_DEPTH):
            names = free_variables(c)
            lets = {n: self.expression_lets[n] for n in names if n in self.expression_lets}
            lets.update((n, self.lets[n]) for n in names if n in self.lets and n not in lets)
            if not lets:
                if (names & self.inner) - self.short.keys():
                    return None
                return _without_likely(c) if self.boundaries else c
            c = substitute(lets, c)
        return None

    def _solutions(self, c: ir.Expr) -> list | None:
        """The iterations of v where c holds (solve's answers, one per extreme of each short
        loop it depends on, all of which must hold); None if it does not solve."""
        full = self._expanded(c)
        if full is None:
            return None
        conditions = [full]
        for name in sorted(free_variables(full) & self.short.keys()):
            if not isinstance(full, ir.LT | ir.LE | ir.GT | ir.GE) or affine_in(ir.Sub(full.a, full.b), name) is None:
                return None
            conditions = [substitute({name: ir.IntImm(_I32, k)}, e) for e in conditions for k in self.short[name]]
        answers = [solve(e, self.v) for e in conditions]
        return None if None in answers else answers

    def visit_IfThenElse(self, s):
        kept, solved = [], []
        for c in conjuncts(s.condition):
            c = self._mins(c)  # (a ShiftInwards min in a ramp's base: settled, then solved)
            answers = self._solutions(c)
            (kept if answers is None else solved).append(c)
            if answers is not None:
                self.bounds.extend(answers)
        then_case = self.mutate(s.then_case)
        else_case = self.mutate(s.else_case)
        if solved:
            if not kept:
                return then_case
            cond = kept[0]
            for c in kept[1:]:
                cond = ir.And(cond, c)
            return ir.IfThenElse(cond, then_case, else_case)
        if then_case is s.then_case and else_case is s.else_case:
            return s
        return ir.IfThenElse(s.condition, then_case, else_case)


class PartitionLoops(IRMutator):
    """Bottom up: a loop's body is partitioned before the loop. Partitions nest at most
    MAX_NESTED deep, since each copies the body below it (loops set to Partition.Always are
    partitioned all the same, Never ones never: `policies`, loop name -> policy)."""

    statements_only = True
    MAX_NESTED = 3
    # A loop partitioned for selects alone (a sliding window's first iteration) is copied only if
    # its body is at most this many IR nodes: blur's is 220, camera_pipe's 5900, where the copy
    # cost a third more LLVM time for no measurable speed.
    MAX_SELECT_BODY = 2000

    def __init__(self, policies: dict[str, str] | None = None):
        super().__init__()
        self.nested = 0  # how deep the partitions visited since it was last reset nest
        self.policies = policies or {}

    def visit_For(self, s):
        outer = self.nested
        self.nested = 0
        body = self.mutate(s.body)
        below = self.nested
        policy = self.policies.get(s.name, Partition.Auto)
        if policy == Partition.Always:
            new = self._partition(s, body, always=True)
            if new is None:
                raise CompileError(f"Loop Partition Policy is set to Always for {s.name}, but no loop partitioning "
                                   "was performed.")
        elif policy == Partition.Auto and s.for_type == ir.SERIAL and below < self.MAX_NESTED:
            new = self._partition(s, body)
        else:
            new = None
        self.nested = max(outer, below + (new is not None))
        if new is not None:
            return new
        return s if body is s.body else ir.For(s.name, s.min, s.extent, s.for_type, body)

    def _partition(self, s: ir.For, body: ir.Stmt, always: bool = False) -> ir.Stmt | None:
        # boundary clamps: in the innermost loop that is not short (see the module's docstring)
        boundaries = always or (_short_range(s) is None and not _has_long_loop(body))
        finder = _Conditions(s.name, boundaries=boundaries, likely_selects=boundaries)
        steady_body = finder.mutate(body)
        if not finder.bounds:
            return None
        if (not always and finder.from_selects == len(finder.bounds)
                and larger_than(body, self.MAX_SELECT_BODY)):
            return None
        end = ir.Add(s.min, s.extent)
        los, his = [], []  # (each once: a clamp the body repeats gives the same bound each time)
        for kind, e in finder.bounds:
            same_kind = los if kind == "lo" else his
            if e not in same_kind:
                same_kind.append(e)
        # the steady state [lo, hi), inside the loop's range
        lo = s.min
        for e in los:
            lo = ir.Max(lo, e)
        if los:
            lo = ir.Min(lo, end)
        hi = end
        for e in his:
            hi = ir.Min(hi, e)
        hi = ir.Max(hi, lo)
        lo_name, hi_name = s.name + ".steady_min", s.name + ".steady_end"
        lo_v, hi_v = ir.Variable(lo_name, _I32), ir.Variable(hi_name, _I32)
        if s.for_type != ir.SERIAL:
            # (Halide's way for a parallel loop: its iterations are one task each, each copy of the
            # body one branch of an if)
            v = ir.Variable(s.name, _I32)
            steady = ir.LT(v, hi_v)
            if los:
                steady = ir.And(ir.LE(lo_v, v), steady)
            loop = ir.For(s.name, s.min, s.extent, s.for_type, ir.IfThenElse(steady, steady_body, body))
            return ir.LetStmt(lo_name, lo, ir.LetStmt(hi_name, hi, loop))
        parts = []
        if los:
            parts.append(ir.For(s.name, s.min, ir.Sub(lo_v, s.min), ir.SERIAL, body))
        parts.append(ir.For(s.name, lo_v, ir.Sub(hi_v, lo_v), ir.SERIAL, steady_body))
        if his:
            parts.append(ir.For(s.name, hi_v, ir.Sub(end, hi_v), ir.SERIAL, body))
        return ir.LetStmt(lo_name, lo, ir.LetStmt(hi_name, hi, ir.make_block(parts)))


def loop_partition_policies(env) -> dict[str, str]:
    """Loop name -> the partition policy its schedule sets, for the loops this pass sees that
    have one other than Auto: serial and parallel ones (vectorized and unrolled loops are gone,
    GPU loops are left whole). Specializations that disagree on a loop: Auto."""
    kinds = {SERIAL, PARALLEL}
    policies: dict[str, set] = {}
    for f in env.order:
        for stage in range(len(f.definitions())):
            sched = stage_schedule(f, stage)
            for special in [sched, *(stage_schedule(f, stage, sp) for _, sp in sched.specializations)]:
                for d in special.dims:
                    policy = d.partition if d.for_type in kinds else Partition.Auto
                    policies.setdefault(loop_name(f, stage, d.internal), set()).add(policy)
    return {name: next(iter(ps)) for name, ps in policies.items() if len(ps) == 1 and ps != {Partition.Auto}}


def partition_loops(stmt: ir.Stmt, policies: dict[str, str] | None = None) -> ir.Stmt:
    """Split serial loops around the conditions that hold in their steady state (and simplify
    what that made: the steady state's bounds, what its conditions guarded); `policies`: loop
    name -> hl.Partition policy, for the loops that have one other than Auto."""
    new = PartitionLoops(policies).mutate(stmt)
    return stmt if new is stmt else simplify(new)
