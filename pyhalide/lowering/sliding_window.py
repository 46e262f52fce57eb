"""Sliding window: when a Func is stored outside a serial loop that it is computed inside, compute
in each iteration only what the previous iterations have not.

Assumes: bounds inference has defined, at each compute site of f, `f.<v>.min/max` (the region its
consumers need) and `f.s0.<v>.min/max` (the region its pure stage computes). Guarantees: for a
Func whose storage is outside the outermost serial loop L between its store and compute
levels, and whose needed region in one dimension moves monotonically with L (and in no other
dimension depends on L), the pure stage computes from one past what the previous iteration
computed: `f.s0.v.min = L > L.min ? max(f.v.min, previous max + 1) : f.v.min`. A Func with
updates slides where each update has v as its pure Var at v's place (each coordinate of v is
then computed from itself alone): every stage's region starts past the previous iteration's
max. Storage sits outside L, so earlier results are still there; the Realize bounds are
unchanged. A region L does not move is computed in L's first iteration; loops between L and
the production that run once (a consumer computed per point) stand for their min. A dimension
L does not move slides along the outermost loop inside L that moves it, outside any test
(each iteration of L starts it afresh: rows along L, then columns along the loop inside). The
window found along L is recorded for storage folding.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ir
from ..bounds import Interval, LazyLet, bounds_of_expr, settle_choices
from ..ir_mutator import IRMutator, children, free_variables, substitute, touched_names
from ..schedule import TailStrategy
from ..simplify import simplify
from ..types import Int
from .strip_promises import strip_promises

_I32 = Int(32)


@dataclass
class Window:
    """f slides along loop `loop` in dimension `dim`, needing at most `width` coordinates at once
    (0: not known, and then not foldable). The window is that of f's Realize number `realize`, in
    the order a walk of the Stmt meets them (f is realized once per stage of a consumer that
    computes it, or per branch of its specializations, where the loops have the same names)."""

    func: str
    dim: int
    loop: str
    width: int
    foldable: bool = True
    realize: int = 0


class _Slide(IRMutator):
    statements_only = True  # it rewrites lets of bounds

    def __init__(self, f, windows: list[Window]):
        super().__init__()
        self.f = f
        self.name = f.name()
        self.windows = windows
        self.inside = False
        # the windows of the Realize we are in: dimension -> _window's answer, which each stage of
        # f slides along
        self.slid: dict[str, tuple] = {}
        self.tried: set[str] = set()  # the dimensions looked at in this Realize
        self.tests = 0  # IfThenElses inside f's Realize around the node visited
        self.realizes = -1  # the number of f's Realize visited (see Window)
        # per site producing f (the loops around it): its window along the outermost loop, as
        # (dimension, loop, width, foldable)
        self.site_windows: dict[tuple, tuple] = {}
        self.guarded = False  # below a test of the outermost loop's variable (see visit_IfThenElse)
        self.loops: list[ir.For] = []
        self.lets: dict[str, LazyLet] = {}  # expanded (simplified) only where _slide asks

    def mutate(self, node):
        if not self.inside and node is not None and self.name not in touched_names(node):
            return node  # f's Realize is not in there
        return super().mutate(node)

    def visit_Realize(self, r):
        if r.name != self.f.name():
            return self.default(r)
        self.realizes += 1
        if self.inside:
            return self.default(r)
        self.inside, self.slid, self.tried, self.site_windows = True, {}, set(), {}
        body = self.mutate(r.body)
        self.inside = False
        # Storage is folded where every site producing f in the Realize (each branch of a
        # specialization, where the loops have the same names) slides along the same window.
        found = list(self.site_windows.values())
        if found and len(found) == _productions(r.body, r.name) and all(w == found[0] for w in found):
            self.windows.append(Window(r.name, *found[0], self.realizes))
        return r if body is r.body else ir.Realize(r.name, r.types, r.bounds, body, r.func, r.folds)

    def visit_For(self, s):
        if not self.inside:
            return self.default(s)
        self.loops.append(s)
        body = self.mutate(s.body)
        self.loops.pop()
        return s if body is s.body else ir.For(s.name, s.min, s.extent, s.for_type, body)

    def visit_IfThenElse(self, s):
        if not self.inside:
            return self.default(s)
        self.tests += 1
        try:
            return self._test(s)
        finally:
            self.tests -= 1

    def _test(self, s):
        """A test of the sliding loop's variable around f's production that may fail before it
        holds (the guard of a loop fused by compute_with, whose iterations before the stage's
        own range compute nothing) means an iteration may not have computed what the next one
        leaves out: no window below it, nor below the else of any such test. A test that holds
        for a first run of iterations and then fails (a GuardWithIf tail's) keeps every earlier
        iteration computed."""
        if not self.loops or self.guarded:
            return self.default(s)
        conjuncts = self._conjuncts_on_loop(s.condition)
        if not conjuncts:
            return self.default(s)
        then_case = self._mutate_guarded(s.then_case, not _holds_for_a_prefix(conjuncts, self.loops[0].name))
        else_case = None if s.else_case is None else self._mutate_guarded(s.else_case, True)
        if then_case is s.then_case and else_case is s.else_case:
            return s
        return ir.IfThenElse(s.condition, then_case, else_case)

    def _mutate_guarded(self, stmt: ir.Stmt, guarded: bool) -> ir.Stmt:
        self.guarded = guarded
        try:
            return self.mutate(stmt)
        finally:
            self.guarded = False

    def _conjuncts_on_loop(self, cond: ir.Expr) -> list[ir.Expr]:
        """The conjuncts of cond (lets inside f's Realize expanded) that test the sliding loop."""
        loop = self.loops[0].name
        cond = self._expanded(strip_promises(cond))
        return [c for c in _conjuncts(cond) if loop in free_variables(c)]

    def visit_ProducerConsumer(self, pc):
        if self.inside and pc.name == self.f.name():
            return pc  # nothing below the production of f is ours to change
        return self.default(pc)

    def visit_LetStmt(self, s):
        if not self.inside:
            # outside f's Realize lets are left as they are: go down the chain without recursing
            chain = []
            while isinstance(s, ir.LetStmt):
                chain.append(s)
                s = s.body
            body = self.mutate(s)
            if body is s:
                return chain[0]
            for let in reversed(chain):
                body = ir.LetStmt(let.name, let.value, body)
            return body
        # promises only help bounds inference; the arithmetic itself is what cancels here (the
        # values in self.lets are stripped already, so only this let's own value needs it)
        expanded = LazyLet(s.value, self.lets, simplified=True, prepare=strip_promises)
        value = s.value
        slid = self._slide(s.name, s.value)
        if slid is not None:
            value = slid
        self.lets[s.name] = expanded
        body = self.mutate(s.body)
        del self.lets[s.name]
        if value is s.value and body is s.body:
            return s
        return ir.LetStmt(s.name, value, body)

    def _site(self) -> tuple:
        """The site producing f that the node visited is at: the loops around it."""
        return tuple(id(lp) for lp in self.loops)

    def _single_iterations(self) -> dict[str, ir.Expr]:
        """The loops inside L that run once (a consumer computed per point, whose own loops
        then have extent 1), each variable with its value: the region moves with L through them."""
        once = {}
        for inner in self.loops[1:]:
            extent = self._expanded(inner.extent)
            if ir.const_int(simplify(extent)) == 1:
                once[inner.name] = self._expanded(inner.min)
        return once

    def _expanded(self, e: ir.Expr) -> ir.Expr:
        """e with the lets inside f's Realize expanded."""
        expansions = {n: x for n in free_variables(e) if (x := self._expansion(n)) is not None}
        return substitute(expansions, e) if expansions else e

    def _expansion(self, name: str) -> ir.Expr | None:
        let = self.lets.get(name)
        return None if let is None else let.expand()

    def _slide(self, let_name: str, value: ir.Expr):
        """The new value of the let `f.s<k>.<var>.min` (or `.max`: the bounds of stage k's region)
        where f slides along <var> (forward, or backward), else None."""
        f = self.f
        parsed = _stage_region_bound(let_name, f.name())
        if parsed is None or not self.loops or self.guarded:
            return None
        stage, var, side = parsed
        if var not in f._pure_args or stage > len(f._updates):
            return None
        key = (self._site(), var)  # (a site's stages share its window: found at the first's let)
        if key not in self.tried:
            self.tried.add(key)
            window = self._window(var)
            if window is not None:
                self.slid[key] = window
        if key not in self.slid:
            return None
        _, later, edge, forward = self.slid[key]
        if side != ("min" if forward else "max") or not f._updates and stage > 0:
            return None
        # (a pure Func's region is the one its consumers need; each stage of one with updates
        # keeps its own, which the updates' reads may widen)
        own = value if f._updates else ir.Variable(f"{f.name()}.{var}.{side}", _I32)
        return ir.Select(later, ir.Max(own, edge) if forward else ir.Min(own, edge), own)

    def _window(self, var: str):
        """(the loop f slides along in dimension var, `loop > loop.min`, where each later
        iteration's region starts, whether it moves forward), or None."""
        f = self.f
        if f._updates and not _updates_keep_to_their_own(f, var):
            return None
        once = self._single_iterations()
        lo_e = self._expansion(f"{f.name()}.{var}.min")
        hi_e = self._expansion(f"{f.name()}.{var}.max")
        if lo_e is None or hi_e is None:
            return None
        lo_e, hi_e = substitute(once, lo_e), substitute(once, hi_e)
        # The loop it slides along: the outermost one (L); or, where the region does not move
        # with L, the outermost loop inside it that moves the region, outside every test (a
        # tile's columns, along its inner loop, after its rows slid along L: each iteration of
        # L starts that loop afresh from its first iteration, which computes it all).
        moving = [k for k, lp in enumerate(self.loops) if lp.name in free_variables(lo_e) | free_variables(hi_e)]
        depth = moving[0] if moving and moving[0] > 0 and not self.tests else 0
        loop = self.loops[depth]
        site = self._site()
        if loop.for_type != ir.SERIAL or any(w[0] is loop for (at, _), w in self.slid.items() if at == site):
            return None
        block = 0  # the least extent the region must keep (see below)
        for k, sched in _all_schedules(f):
            # RoundUp and ShiftInwards splits compute outside the (slid, smaller) region they are
            # asked for, below or past the storage bounds inference sized: only guarded splits
            # slide, and one ShiftInwards split of a pure Func's own dimension, where every
            # region it is asked for holds a block: the block shifted inwards then recomputes
            # values of the window, which are still where they were (the same values). With
            # updates, every stage starts a block before the region's end instead (below),
            # so that the pure stage's block never shifts past where the updates start.
            past = _past_region_splits(sched.splits, f._pure_args, k > 0)
            shifted = _shifted_block(var, past.get(var))
            if shifted is None or shifted and k > 0:
                return None
            # A Func with updates computed past its region in another dimension (a block of
            # columns shifted inwards) writes its initial values over coordinates an earlier
            # iteration finished, and its updates do not run there again.
            if f._updates and any(v != var for v in past):
                return None
            block = max(block, shifted)
            # (A loop over the whole dimension that is vectorized or unrolled runs to the slid
            # region's constant upper bound, its first iteration's, each lane or copy guarded.)
        # A region the loop does not move (`g(x) = f(0) + f(5)`) is computed in the first
        # iteration alone, where no loop inside L could move it either.
        if loop.name not in free_variables(hi_e) and (len(self.loops) > 1 or loop.name in free_variables(lo_e)):
            return None
        for other in f._pure_args:  # the rest of the region must not move with the loop
            if other == var:
                continue
            for which in ("min", "max"):
                e = self._expansion(f"{f.name()}.{other}.{which}")
                if e is None or loop.name in free_variables(substitute(once, e)):
                    return None
        prev = {loop.name: ir.Sub(ir.Variable(loop.name, _I32), ir.make_const(_I32, 1))}
        inner_loops = {inner.name for inner in self.loops[depth + 1:]}
        moves_inside = bool(inner_loops & (free_variables(lo_e) | free_variables(hi_e)))
        later = ir.GT(ir.Variable(loop.name, _I32), loop.min)
        if not self._moves_forward(loop, prev, lo_e, hi_e, moves_inside):
            # A region that only moves backward (`g(100 - x)`) slides the other way: each
            # iteration ends one before where the previous one started. (Not folded, and not
            # with a block to keep, nor a loop inside L moving it.)
            if moves_inside or block or not all(
                    (step := _least_over_iterations(ir.Sub(substitute(prev, bound), bound), loop, first=1))
                    is not None and step >= 0 for bound in (lo_e, hi_e)):
                return None
            end = ir.Sub(substitute(prev, lo_e), ir.make_const(_I32, 1))
            return loop, later, end, False
        least = _least_over_iterations(ir.Sub(lo_e, hi_e), loop, first=0)
        if least is None and moves_inside:
            return None
        if depth > 0:  # along a loop inside L, only where each step reuses some of the last's region
            reused = _least_over_iterations(ir.Sub(substitute(prev, hi_e), lo_e), loop, first=1)
            if reused is None or reused < 0:
                return None
        if block > 1:
            narrowest = _least_over_iterations(ir.Sub(hi_e, lo_e), loop, first=0)
            if narrowest is None or narrowest + 1 < block:
                return None
        width = None if least is None else 1 - least
        # Folding keeps one window only if no loop inside L moves it (else several are live), and
        # only a window of known width; a window along an inner loop is not folded (what an
        # earlier iteration of L computed there is read again).
        foldable = width is not None and not moves_inside
        if depth == 0:
            self.site_windows.setdefault(site, (f._pure_args.index(var), loop.name, width or 0, foldable))
        start = ir.Add(substitute(prev, hi_e), ir.make_const(_I32, 1))  # past the previous iteration's max
        if f._updates and block > 1:
            # no later than a block before the region's end: the stages recompute what they must
            needed_max = ir.Variable(f"{f.name()}.{var}.max", _I32)
            start = ir.Min(start, ir.Sub(needed_max, ir.make_const(_I32, block - 1)))
        return loop, later, start, True

    @staticmethod
    def _moves_forward(loop, prev, lo_e, hi_e, moves_inside: bool) -> bool:
        """Whether the region only moves forward: its min and max never decrease from one
        iteration to the next. Where a loop inside L moves it too, the previous iteration's max
        is taken at the same inner iteration, which must have run then: the max must grow every
        iteration, by what the arithmetic proves. Otherwise a region that stays put (as an
        upsampling consumer's does every other iteration) is computed in none of it, and a form
        that never decreases (_non_decreasing) is enough."""
        for bound, least_step in ((lo_e, 0), (hi_e, 1 if moves_inside else 0)):
            step = _least_over_iterations(ir.Sub(bound, substitute(prev, bound)), loop, first=1)
            if step is None and (moves_inside or not _non_decreasing(bound, loop.name)):
                return False
            if step is not None and step < least_step:
                return False
        return True


def _productions(stmt: ir.Stmt, name: str) -> int:
    """How many productions of Func `name` stmt holds."""
    count = 0

    def visit(s):
        nonlocal count
        if type(s) is ir.ProducerConsumer and s.is_producer and s.name == name:
            count += 1
        for c in children(s):
            if isinstance(c, ir.Stmt):
                visit(c)

    visit(stmt)
    return count


def _stage_region_bound(let_name: str, func: str) -> tuple[int, str, str] | None:
    """(k, var, "min" or "max") of a let named `<func>.s<k>.<var>.min` (or `.max`)."""
    prefix = f"{func}.s"
    side = let_name.rpartition(".")[2]
    if not let_name.startswith(prefix) or side not in ("min", "max"):
        return None
    stage, _, var = let_name[len(prefix):-len(side) - 1].partition(".")
    return (int(stage), var, side) if stage.isdigit() and var else None


def _updates_keep_to_their_own(f, var: str) -> bool:
    """Whether every update of f computes each coordinate of `var` from that coordinate alone:
    `var` is the update's pure Var at its own place and nowhere else (where an update reads f, it
    reads it there too, which the language requires), so a coordinate the previous iterations
    finished stays finished. Stages computing a definition of their own (rfactor) or fused with
    another (compute_with) are not looked into."""
    d = f._pure_args.index(var)
    at = ir.Variable(var, _I32)
    pending = list(f._schedule.stages)
    while pending:
        sched = pending.pop()
        if sched.definition is not None or sched.fuse_level is not None:
            return False
        pending.extend(special for _, special in sched.specializations)
    return all(update.args[d] == at and not any(var in free_variables(a) for i, a in enumerate(update.args) if i != d)
               for update in f._updates)
def _holds_for_a_prefix(conjuncts: list[ir.Expr], loop: str) -> bool:
    """Whether each conjunct, once false as the loop's variable grows, stays false: `a < b` with
    a non-decreasing in it and b free of it."""
    for c in conjuncts:
        if isinstance(c, (ir.GT, ir.GE)):
            c = (ir.LT if isinstance(c, ir.GT) else ir.LE)(c.b, c.a)
        if not (isinstance(c, (ir.LT, ir.LE)) and loop not in free_variables(c.b) and _non_decreasing(c.a, loop)):
            return False
    return True


def _conjuncts(cond: ir.Expr) -> list[ir.Expr]:
    """cond's conjuncts, through the intrinsics that only mark a condition (likely, a
    PredicateLoads guard)."""
    if isinstance(cond, ir.And):
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    if isinstance(cond, ir.Call) and cond.call_type == ir.INTRINSIC and len(cond.args) == 1 \
            and cond.args[0].type == cond.type:
        return _conjuncts(cond.args[0])
    return [cond]


def _non_decreasing(e: ir.Expr, var: str, memo: dict | None = None) -> bool:
    """Whether e never decreases as var grows, from its form alone: sums, positive scalings,
    divisions by positive constants, mins and maxes of such, and the select a sliding consumer's
    own min is, `select(var > c, max(m, p), m)` or `select(var > c, var + 1, var - 1)` (once var
    passes c it stays past, and the true value is never below the false one). For regions whose steps the arithmetic of
    _least_over_iterations cannot bound (a division of a max of divisions). Each shared subtree
    is answered once (nested upsamplings share their bounds: a walk of the tree was 4^levels)."""
    memo = {} if memo is None else memo
    hit = memo.get(id(e))
    if hit is not None:
        return hit[1]

    def nd(x):
        return _non_decreasing(x, var, memo)

    if var not in free_variables(e):
        answer = True
    elif isinstance(e, ir.Variable):
        answer = e.name == var
    elif isinstance(e, (ir.Add, ir.Min, ir.Max)):
        answer = nd(e.a) and nd(e.b)
    elif isinstance(e, ir.Sub):
        answer = nd(e.a) and var not in free_variables(e.b)
    elif isinstance(e, (ir.Mul, ir.Div)):
        c = ir.const_int(e.b)
        answer = c is not None and c > 0 and nd(e.a)
    elif isinstance(e, ir.Select):
        cond = e.condition
        turns_true = ((isinstance(cond, (ir.GT, ir.GE)) and var not in free_variables(cond.b) and nd(cond.a))
                      or (isinstance(cond, (ir.LT, ir.LE)) and var not in free_variables(cond.a) and nd(cond.b)))
        gap = ir.const_int(simplify(ir.Sub(e.true_value, e.false_value)))
        above = (isinstance(e.true_value, ir.Max) and e.false_value in (e.true_value.a, e.true_value.b)
                 or gap is not None and gap >= 0)
        answer = turns_true and above and nd(e.true_value) and nd(e.false_value)
    else:
        answer = False
    memo[id(e)] = (e, answer)  # (keeps e alive, so its id stays unique)
    return answer


def _past_region_splits(splits, pure_vars, update: bool) -> dict[str, list]:
    """For each pure Var whose loops may run past the region, what runs them there: the splits
    (directly, or of the loops made from it) with a tail that is not guarded (ShiftInwardsAndBlend
    of a pure definition shifts inwards; in an update, PredicateLoads and RoundUpAndBlend load the
    whole last block of the Func itself, so its pure stage computes past the region), and None
    for each fuse it takes part in."""
    loads_past = (TailStrategy.PredicateLoads, TailStrategy.RoundUpAndBlend) if update else ()
    roots = {v: {v} for v in pure_vars}  # loop -> the pure Vars it iterates
    out: dict[str, list] = {}
    for sp in splits:
        if sp.kind == "fuse":
            roots[sp.inner] = roots.get(sp.old, set()) | roots.get(sp.outer, set())
            for v in roots[sp.inner]:
                out.setdefault(v, []).append(None)
        elif sp.kind == "split":
            roots[sp.inner] = roots[sp.outer] = roots.get(sp.old, set())
            guarded = sp.tail in TailStrategy.GUARDED and sp.tail != TailStrategy.ShiftInwardsAndBlend \
                and sp.tail not in loads_past
            if sp.may_exceed_one() and not guarded:
                for v in roots.get(sp.old, ()):  # (an RVar iterates no pure Var)
                    out.setdefault(v, []).append(sp)
        else:
            roots[sp.outer] = roots.get(sp.old, set())
    return out


def _shifted_block(var: str, past: list | None) -> int | None:
    """The block of `var` a pure stage's split computes whole, shifted inwards at the region's end
    (its factor), where that one split of var itself is all that runs var's loop past the
    region (0: nothing does; None: something else, or more, does)."""
    if past is None:
        return 0
    sp = past[0]
    shifts = (TailStrategy.ShiftInwards, TailStrategy.ShiftInwardsAndBlend, TailStrategy.Auto)
    known = sp is not None and isinstance(sp.factor, int)  # (a factor of Params: the block is not known)
    return sp.factor if len(past) == 1 and known and sp.old == var and sp.tail in shifts else None


def _all_schedules(f):
    """(stage index, schedule) of every stage of f and of each of its specializations."""
    pending = list(enumerate(f._schedule.stages))
    while pending:
        k, sched = pending.pop()
        yield k, sched
        pending.extend((k, special) for _, special in sched.specializations)


def _least_over_iterations(e: ir.Expr, loop: ir.For, first: int) -> int | None:
    """A constant lower bound of e over the iterations loop.min + first, loop.min + first + 1, ...

    A consumer that slid already selects on `loop > loop.min`, so the iterations just after the
    start are bounded one by one and the rest together (k >= 0 steps further), where such selects
    (and mins and maxes the loop's extent decides) are settled. Divisions of the same value are
    then written through their remainders, so that their differences become bounded."""
    k = ir.Variable(f"{loop.name}.k", _I32)
    least = None
    for start in range(first, 3):
        at = ir.Add(loop.min, ir.make_const(_I32, start))
        scope = {}
        if start == 2:
            last = simplify(ir.Sub(loop.extent, ir.make_const(_I32, 3)))
            at, scope = ir.Add(at, k), {k.name: Interval(ir.make_const(_I32, 0), last)}
        settled = simplify(settle_choices(simplify(substitute({loop.name: at}, e)), scope))
        remainders = _Remainders()
        settled = simplify(remainders.mutate(settled))
        settled = simplify(settle_choices(settled, remainders.scope))
        lo = bounds_of_expr(settled, remainders.scope).min
        lo = None if lo is None else ir.const_int(simplify(lo))
        if lo is None:
            return None
        least = lo if least is None else min(least, lo)
    return least


class _Remainders(IRMutator):
    """Write each (x + d) / c (c > 0) as q + (r + d) / c with x = c * q + r, 0 <= r < c, so that
    differences of divisions of the same x cancel to something bounded by constants."""

    def __init__(self):
        super().__init__()
        self.names: dict[tuple, tuple[ir.Variable, ir.Variable]] = {}
        self.scope: dict[str, Interval] = {}
        self.memo: dict[int, tuple] = {}

    def mutate(self, node):
        # a shared subtree is rewritten once (again, it would find the same names)
        hit = self.memo.get(id(node))
        if hit is not None:
            return hit[1]
        result = super().mutate(node)
        self.memo[id(node)] = (node, result)  # keeps node alive, so its id stays unique
        return result

    def visit_Div(self, e):
        c = ir.const_int(e.b)
        if c is None or c <= 0 or e.type != _I32 or ir.const_int(e.a) is not None:
            return self.default(e)
        x, d = e.a, ir.make_const(_I32, 0)
        if isinstance(x, ir.Add) and ir.const_int(x.b) is not None:
            x, d = x.a, x.b
        key = (x, c)
        if key not in self.names:
            n = len(self.names)
            q, r = ir.Variable(f"div.q{n}", _I32), ir.Variable(f"div.r{n}", _I32)
            self.names[key] = (q, r)
            self.scope[r.name] = Interval(ir.make_const(_I32, 0), ir.make_const(_I32, c - 1))
        q, r = self.names[key]
        return ir.Add(q, ir.Div(ir.Add(r, d), e.b))


def sliding_window(stmt: ir.Stmt, env) -> tuple[ir.Stmt, list[Window]]:
    """Consumers slide first: a producer's region is then written in terms of what its consumers
    really compute in each iteration."""
    windows: list[Window] = []
    for f in reversed(env.order):
        if env.is_output(f):
            continue
        stmt = _Slide(f, windows).mutate(stmt)
    return stmt, windows
