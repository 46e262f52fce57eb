"""Skip stages: run a Func's production only when something will read its values (Halide's
skip_stages).

`out(x) = select(p, f(x), g(x))` with f and g computed at root reads one of them, and a Func
read only inside one specialization's branch is read only when that branch runs. For each
Realize of a Func read under a condition, the condition under which its Realize's body reads
its values is worked out (select arms and if branches whose conditions can be evaluated early,
lets carried along, loops inside relaxed away: "some iteration may read it"), bound to
`<func>.used` at the top of the Realize, and each production runs under `if (<func>.used)`.
Conditions may read Funcs computed before and input images (where the consumer reads them in
every iteration), their reads clamped into the storage or the image.

Assumes: sliding window and storage folding are done, Funcs are still Realizes, productions and
calls (before storage flattening), and the IR is scalar (before vectorization). Guarantees: a
production that runs computes what it did; one is skipped only where no read of its values
follows inside its Realize but reads in a select's arm that the select does not choose (which
only load its storage: a skipped Func whose value would index another read, as `in(f(x))` in
an arm, is never skipped). The condition never depends on a loop the values of a production
outlive: a vectorized loop, or a loop between the Realize and a production of a Func stored
outside it that a skipped production would also skip (a sliding window's next iteration reads
what this one computes). GPU loop nests are left alone (a kernel's barriers must be reached by
every thread). Halide also skips allocations; pyhalide allocates. A condition reading a Func not
computed before it means "may be used".
"""

from __future__ import annotations

from functools import reduce

from .. import ir
from ..ir_mutator import (
    IRMutator,
    IRVisitor,
    called_names,
    children,
    expr_free_variables,
    has_call,
    has_load,
    substitute,
)
from ..simplify import simplify
from ..types import Bool
from .bounds_inference import buffer_field

_TRUE = ir.make_const(Bool(), 1)
_FALSE = ir.make_const(Bool(), 0)
# Intrinsics whose evaluation does something: a condition holding one is not evaluated early.
_EFFECTFUL = frozenset(("print", "require", "trace", "profiler_set_current", "prefetch"))
_GPU_LOOPS = (ir.GPU_BLOCK, ir.GPU_THREAD, ir.GPU_LANE)


def _combine(op, a: ir.Expr, b: ir.Expr) -> ir.Expr:
    """a op b (op: ir.And or ir.Or), a constant side folded: it decides, or drops out."""
    decides = 0 if op is ir.And else 1
    for side, other in ((a, b), (b, a)):
        if ir.is_const(side, decides):
            return side
        if ir.is_const(side, 1 - decides):
            return other
    return op(a, b)


def _or(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return _combine(ir.Or, a, b)


def _and(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return _combine(ir.And, a, b)


def _any(conditions) -> ir.Expr:
    return reduce(_or, conditions, _FALSE)


def _liftable(e: ir.Expr, computed: frozenset, memo: dict, images: bool = False) -> bool:
    """Whether e may be evaluated ahead of where it stands: it does nothing but compute, and
    reads no buffer and no Func but those `computed` there already; input images only where
    `images` says (the caller clamps those reads into the images: memo is per choice)."""
    if has_load(e) or not images and not called_names(e) <= computed:
        return False
    if not has_call(e):
        return True
    hit = memo.get(id(e))
    if hit is None:
        own = type(e) is not ir.Call or (e.name in computed if e.call_type == ir.HALIDE else
                                         images if e.call_type == ir.IMAGE else
                                         not (e.call_type == ir.INTRINSIC and e.name in _EFFECTFUL))
        hit = memo[id(e)] = (e, own and all(_liftable(c, computed, memo, images) for c in children(e)))
    return hit[1]


def relax(condition: ir.Expr, names) -> ir.Expr:
    """A condition implied by `condition` for some value of each variable in `names` (an upper
    bound of its truth), free of them: conjunctions and disjunctions keep what does not
    depend on them."""
    free = expr_free_variables(condition)
    if not any(n in free for n in names):
        return condition
    cls = type(condition)
    if cls is ir.And:
        return _and(relax(condition.a, names), relax(condition.b, names))
    if cls is ir.Or:
        return _or(relax(condition.a, names), relax(condition.b, names))
    return _TRUE


class _Reads:
    """The condition under which a statement reads Func `name`'s values, in terms of what is in
    scope before the statement (its own production and other realizations of it do not count).
    Conditions may read the Funcs `computed` before the statement, and input images where the
    statement reads them whenever it runs (in no select's arm or if's branch: `nested` counts
    those around): each iteration of the loops the condition is free of reads them there, so
    their buffers are checked to hold what it reads (process_some_tiles' bitmap(x, y))."""

    def __init__(self, name: str, computed: frozenset):
        self.name, self.computed = name, computed
        self.nested = 0
        self.memo: dict[tuple, tuple] = {}
        self.lift_memos: tuple[dict, dict] = ({}, {})

    def _liftable(self, e: ir.Expr) -> bool:
        images = not self.nested
        return _liftable(e, self.computed, self.lift_memos[images], images)

    def _branches_of(self, then_case, else_case, of) -> tuple[ir.Expr, ir.Expr]:
        self.nested += 1
        reads = of(then_case), _FALSE if else_case is None else of(else_case)
        self.nested -= 1
        return reads

    def _let(self, name: str, value: ir.Expr, body: ir.Expr) -> ir.Expr:
        if name not in expr_free_variables(body):
            return body
        if self._liftable(value):
            return substitute({name: value}, body)  # (a condition is small; its parts then simplify together)
        return relax(body, {name})

    def _branches(self, condition, then_reads, else_reads) -> ir.Expr:
        reads = self.expr(condition)
        if not self._liftable(condition):
            return _any((reads, then_reads, else_reads))
        return _any((reads, _and(condition, then_reads), _and(ir.Not(condition), else_reads)))

    def expr(self, e: ir.Expr) -> ir.Expr:
        if self.name not in called_names(e):
            return _FALSE
        key = (id(e), self.nested > 0)
        hit = self.memo.get(key)
        if hit is not None:
            return hit[1]
        cls = type(e)
        if cls is ir.Call and e.call_type == ir.HALIDE and e.name == self.name:
            reads = _TRUE
        elif cls is ir.Call and e.call_type == ir.INTRINSIC and e.name == "prefetch":
            reads = _FALSE  # a prefetch fetches into the cache; it reads nothing
        elif cls is ir.Select:
            reads = self._branches(e.condition, *self._branches_of(e.true_value, e.false_value, self.expr))
        elif cls is ir.Let:
            reads = _or(self.expr(e.value), self._let(e.name, e.value, self.expr(e.body)))
        else:
            reads = _any(self.expr(c) for c in children(e))
        self.memo[key] = (e, reads)  # (keeps e alive, so its id stays unique)
        return reads

    def stmt(self, s: ir.Stmt) -> ir.Expr:
        cls = type(s)
        if cls is ir.LetStmt:
            return _or(self.expr(s.value), self._let(s.name, s.value, self.stmt(s.body)))
        if cls is ir.For:
            return _any((self.expr(s.min), self.expr(s.extent), relax(self.stmt(s.body), {s.name})))
        if cls is ir.IfThenElse:
            return self._branches(s.condition, *self._branches_of(s.then_case, s.else_case, self.stmt))
        if cls in (ir.ProducerConsumer, ir.Realize) and s.name == self.name and (cls is ir.Realize or s.is_producer):
            return _FALSE
        return _any(self.stmt(c) if isinstance(c, ir.Stmt) else self.expr(c) for c in children(s))


class _Survey(IRVisitor):
    """What the pass needs to know of the whole Stmt first: the Funcs read in a select's arm or
    an if's branch, the Funcs each production reads, and the Funcs whose values index a read."""

    def __init__(self):
        super().__init__()
        self.in_branch = 0
        self.producing: list[str] = []
        self.conditional: set[str] = set()
        self.read_by: dict[str, set[str]] = {}  # Func -> the Funcs read inside its productions
        self.indexing: set[str] = set()  # Funcs whose values index a read or a write

    def _expr(self, e: ir.Expr):
        names = called_names(e)
        if not names:
            return
        if self.in_branch:
            self.conditional |= names
        for g in self.producing:
            self.read_by.setdefault(g, set()).update(names)
        self._walk(e)

    def _walk(self, e: ir.Expr):
        if not called_names(e) or id(e) in self._seen:
            return
        self._seen.add(id(e))  # (IRVisitor's own memo, which visit_once would use)
        self._keep.append(e)
        cls = type(e)
        if cls is ir.Select:
            self.conditional |= called_names(e.true_value) | called_names(e.false_value)
        elif cls is ir.Call and e.call_type in (ir.HALIDE, ir.IMAGE):
            for a in e.args:
                self.indexing |= called_names(a)
        for c in children(e):
            self._walk(c)

    def visit_children(self, node):
        if isinstance(node, ir.Expr):
            self._expr(node)
            return
        if type(node) is ir.Provide:
            for a in node.args:
                self.indexing |= called_names(a)
        super().visit_children(node)

    def visit_IfThenElse(self, s):
        self._expr(s.condition)
        self.in_branch += 1
        self.visit(s.then_case)
        self.visit(s.else_case)
        self.in_branch -= 1

    def visit_ProducerConsumer(self, s):
        if not s.is_producer:
            self.visit(s.body)
            return
        self.producing.append(s.name)
        self.visit(s.body)
        self.producing.pop()

    def candidates(self) -> set[str]:
        """The Funcs whose reads may all be conditional: read in a branch, or by a production
        of such a Func (skipped with it). A Func whose values index a read is left out."""
        found = set(self.conditional)
        pending = list(found)
        while pending:
            g = pending.pop()
            for h in self.read_by.get(g, ()):
                if h not in found:
                    found.add(h)
                    pending.append(h)
        return found - self.indexing


class _Productions(IRVisitor):
    """The names of the Funcs produced inside a Stmt, and whether it holds a GPU loop."""

    statements_only = True

    def __init__(self):
        super().__init__()
        self.produced: set[str] = set()
        self.gpu = False

    def visit_ProducerConsumer(self, s):
        if s.is_producer:
            self.produced.add(s.name)
        self.visit(s.body)

    def visit_For(self, s):
        self.gpu |= s.for_type in _GPU_LOOPS
        self.visit(s.body)


class _Guard(IRMutator):
    """Each production of Func `name` runs under `if (used)`."""

    statements_only = True

    def __init__(self, name: str, used: ir.Expr):
        super().__init__()
        self.name, self.used = name, used

    def visit_ProducerConsumer(self, s):
        if s.is_producer and s.name == self.name:
            return ir.ProducerConsumer(s.name, True, ir.IfThenElse(self.used, s.body))
        return self.default(s)

    def visit_Realize(self, s):
        return s if s.name == self.name else self.default(s)  # another realization, its own guard


class _ClampedReads(IRMutator):
    """A lifted condition's reads of Funcs clamped into their storage (`realizes`), and of input
    images into the images: it may read where its guards would have kept it from reading, and
    then its value does not matter."""

    def __init__(self, realizes: dict[str, ir.Realize]):
        super().__init__()
        self.realizes = realizes

    def visit_Call(self, c):
        c = self.default(c)
        if c.call_type == ir.IMAGE:
            bounds = [(buffer_field(c.name, "min", d), buffer_field(c.name, "extent", d)) for d in range(len(c.args))]
        else:
            r = self.realizes.get(c.name) if c.call_type == ir.HALIDE else None
            bounds = None if r is None else r.bounds
        if bounds is None or not c.args:  # (a Func of no dimensions has one point to read)
            return c
        one = ir.make_const(c.args[0].type, 1)
        args = tuple(ir.Max(ir.Min(a, ir.Sub(ir.Add(lo, ext), one)), lo) for a, (lo, ext) in zip(c.args, bounds))
        return ir.Call(c.type, c.name, args, c.call_type, c.value_index, c.func, c.image)


class _SkipStages(IRMutator):
    statements_only = True

    def __init__(self, env, name: str):
        super().__init__()
        self.env, self.name = env, name
        self.enclosing: list[ir.Stmt] = []  # the Fors, Realizes and consumes around the node visited

    def _inside(self, s, rebuild):
        self.enclosing.append(s)
        body = self.mutate(s.body)
        self.enclosing.pop()
        return s if body is s.body else rebuild(body)

    def visit_For(self, s):
        return self._inside(s, lambda body: ir.For(s.name, s.min, s.extent, s.for_type, body))

    def visit_ProducerConsumer(self, s):
        return self._inside(s, lambda body: ir.ProducerConsumer(s.name, s.is_producer, body))

    def visit_Realize(self, s):
        self.enclosing.append(s)
        body = self.mutate(s.body)
        self.enclosing.pop()
        if s.name == self.name:
            body = self._skippable(s, body)
        return s if body is s.body else ir.Realize(s.name, s.types, s.bounds, body, s.func, s.folds)

    def _computed(self) -> dict[str, ir.Realize]:
        """The Funcs computed around the node visited (it is inside their consume), with their
        Realize: their values are there to read."""
        realized: dict[str, ir.Realize] = {}
        computed = {}
        for n in self.enclosing:
            if type(n) is ir.Realize:
                realized[n.name] = n
            elif type(n) is ir.ProducerConsumer and not n.is_producer and n.name in realized:
                computed[n.name] = realized[n.name]
        return computed

    def _outlived_loops(self, body: ir.Stmt, name: str) -> set[str] | None:
        """The enclosing loops whose variables the condition may not depend on (None: do not
        skip at all)."""
        inside = _Productions()
        _FindProductions(name, inside).visit(body)
        if inside.gpu or any(type(n) is ir.For and n.for_type in _GPU_LOOPS for n in self.enclosing):
            return None
        loops = {n.name for n in self.enclosing if type(n) is ir.For and n.for_type == ir.VECTORIZED}
        for i, n in enumerate(self.enclosing):
            if type(n) is ir.Realize and n.name in inside.produced:
                loops |= {m.name for m in self.enclosing[i + 1:] if type(m) is ir.For}
        return loops

    def _skippable(self, s: ir.Realize, body: ir.Stmt) -> ir.Stmt:
        if s.func is not None and self.env.fused_group(s.func) is not None:
            return body  # a compute_with group runs its members' loops together
        computed = self._computed()
        used = _Reads(s.name, frozenset(computed)).stmt(body)
        if ir.is_const(used, 1):
            return body
        outlived = self._outlived_loops(body, s.name)
        if outlived is None:
            return body
        used = simplify(relax(used, outlived))
        if ir.is_const(used, 1):
            return body
        used = _ClampedReads(computed).mutate(used)
        name = f"{s.name}.used"
        return ir.LetStmt(name, used, _Guard(s.name, ir.Variable(name, Bool())).mutate(body))


class _FindProductions(IRVisitor):
    """Runs `into` over each production of Func `name` in a Stmt."""

    statements_only = True

    def __init__(self, name: str, into: _Productions):
        super().__init__()
        self.name, self.into = name, into

    def visit_ProducerConsumer(self, s):
        if s.is_producer and s.name == self.name:
            self.into.visit(s.body)
        else:
            self.visit(s.body)


def skip_stages(stmt: ir.Stmt, env) -> ir.Stmt:
    survey = _Survey()
    survey.visit(stmt)
    candidates = survey.candidates()
    for f in reversed(env.order):  # consumers first: what their guards skip is then known
        if f.name() in candidates:
            stmt = _SkipStages(env, f.name()).mutate(stmt)
    return stmt
