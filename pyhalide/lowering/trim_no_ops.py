"""Trim no-ops: a serial or parallel loop runs only over the iterations where its body does
something (Halide's trim_no_ops).

`f(x, y) += select(x*x + y*y < r2 && ..., in(x, y), 0)`, `f(x) = select(c, v, f(x))`: where the
select's condition is false, the store writes back the value it read. The condition under which
the whole body is such a no-op is worked out (stores of that form, ifs, blocks, lets), and the
comparisons of the loop's variable among what makes it do something bound the loop, as
partition_loops solves them (math functions allowed): iterate_over_circle's row loop runs over
the circle only, and reads `in` nowhere else. The body is unchanged, so the loop computes what
it did.

Integer updates count (`+ 0`, `- 0`, `* 1`); a float `+ 0.0` does not (it turns -0.0 into 0.0).
Vectorized and unrolled loops keep their constant extents; GPU loops are left alone. Runs after
storage flattening (stores and loads), before unrolling and vectorization.
"""

from __future__ import annotations

from .. import ir
from ..ir_mutator import IRMutator, children, expr_free_variables, substitute
from ..simplify import simplify
from ..types import Bool, Int
from .partition_loops import conjuncts, larger_than, solve

_I32 = Int(32)
_TRUE, _FALSE = ir.make_const(Bool(), 1), ir.make_const(Bool(), 0)
_TRIMMED = (ir.SERIAL, ir.PARALLEL)
_MAX_LET_SIZE = 64  # a let is carried into a condition up to this many nodes
_EFFECTFUL = frozenset(("print", "require", "trace", "profiler_set_current", "prefetch", *ir.CALLS_OUT))


def _pure(e: ir.Expr) -> bool:
    """Whether e computes from variables alone: no loads, no calls but pure ones (math
    functions, arithmetic intrinsics), so it may be evaluated before the loop."""
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, ir.Load) or isinstance(n, ir.Call) and (
                n.call_type not in (ir.EXTERN, ir.INTRINSIC) or n.name in _EFFECTFUL):
            return False
        stack.extend(children(n))
    return True


def _without_lets(e: ir.Expr) -> ir.Expr:
    """e with its outer Let expressions substituted in (small ones: conditions are solved)."""
    while isinstance(e, ir.Let) and not larger_than(e.value, _MAX_LET_SIZE):
        e = substitute({e.name: e.value}, e.body)
    return e


def _identity(op, t) -> ir.Expr | None:
    """The value that leaves `old op value` old, for integer updates (None: no such value)."""
    if not (t.is_int() or t.is_uint()) or t.bits == 1:
        return None
    if op in (ir.Add, ir.Sub):
        return ir.make_const(t, 0)
    return ir.make_const(t, 1) if op is ir.Mul else None


def _is_old(e: ir.Expr, store: ir.Store) -> bool:
    return isinstance(e, ir.Load) and e.name == store.name and e.index == store.index


def _store_no_op(s: ir.Store) -> ir.Expr:
    """The condition under which store s writes back what its buffer held there."""
    v = _without_lets(s.value)
    if isinstance(v, ir.Select) and _is_old(v.false_value, s):
        return ir.Not(v.condition)
    if isinstance(v, ir.Select) and _is_old(v.true_value, s):
        return v.condition
    if isinstance(v, ir.BinaryOp) and not isinstance(v, ir.CompareOp | ir.LogicalOp):
        for old, other in ((v.a, v.b), (v.b, v.a)):
            if not _is_old(old, s) or (isinstance(v, ir.Sub) and other is v.a):
                continue
            other = _without_lets(other)
            unit = _identity(type(v), v.type)
            if unit is not None and isinstance(other, ir.Select) and other.false_value == unit:
                return ir.Not(other.condition)
            if unit is not None and isinstance(other, ir.Select) and other.true_value == unit:
                return other.condition
    return _FALSE


class _NoOp:
    """The condition under which a loop body does nothing, in terms of what is in scope at the
    loop (lets inside carried in; anything with effects is never a no-op)."""

    def __call__(self, s: ir.Stmt) -> ir.Expr:
        cls = type(s)
        if cls is ir.Store:
            cond = _store_no_op(s)
            return cond if _pure(cond) else _FALSE
        if cls is ir.Block:
            cond = _TRUE
            for st in s.stmts:
                c = self(st)
                if ir.is_const(c, 0):
                    return _FALSE
                cond = c if ir.is_const(cond, 1) else ir.And(cond, c)
            return cond
        if cls is ir.LetStmt:
            body = self(s.body)
            if s.name not in expr_free_variables(body):
                return body
            if not _pure(s.value) or larger_than(s.value, _MAX_LET_SIZE):
                return _FALSE
            return substitute({s.name: s.value}, body)
        if cls is ir.IfThenElse:
            if not _pure(s.condition):
                return _FALSE
            then = self(s.then_case)
            other = _TRUE if s.else_case is None else self(s.else_case)
            return ir.Or(ir.And(s.condition, then), ir.And(ir.Not(s.condition), other))
        return _FALSE


class _Trim(IRMutator):
    statements_only = True

    def visit_For(self, s):
        body = self.mutate(s.body)
        loop = s if body is s.body else ir.For(s.name, s.min, s.extent, s.for_type, body)
        if s.for_type not in _TRIMMED:
            return loop
        no_op = simplify(_NoOp()(body))
        if ir.is_const(no_op, 0):
            return loop
        lo, hi = s.min, ir.Add(s.min, s.extent)
        trimmed = False
        for c in conjuncts(simplify(ir.Not(no_op))):
            solved = solve(c, s.name, _pure) if _pure(c) else None
            if solved is None:
                continue
            kind, bound = solved
            lo, hi = (ir.Max(lo, bound), hi) if kind == "lo" else (lo, ir.Min(hi, bound))
            trimmed = True
        if not trimmed:
            return loop
        lo = simplify(lo)
        return ir.For(s.name, lo, simplify(ir.Max(ir.Sub(hi, lo), ir.make_const(_I32, 0))), s.for_type, body)


def trim_no_ops(stmt: ir.Stmt) -> ir.Stmt:
    return _Trim().mutate(stmt)
