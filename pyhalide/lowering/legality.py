"""Questions schedules ask about an update definition: may its loops be reordered or run in parallel?"""

from __future__ import annotations

from .. import ir
from ..ir_mutator import IRVisitor


class _SelfCalls(IRVisitor):
    visit_once = True

    def __init__(self, func):
        super().__init__()
        self.func = func
        self.calls: list[ir.Call] = []

    def visit_Call(self, c):
        if c.call_type == ir.HALIDE and c.func is self.func:
            self.calls.append(c)
        self.visit_children(c)


def self_calls(func, exprs) -> list[ir.Call]:
    v = _SelfCalls(func)
    for e in exprs:
        v.visit(e)
    return v.calls


def _definition_exprs(d):
    return [*d.args, *d.values, *([d.predicate] if d.predicate is not None else [])]


def update_is_associative(func, stage: int) -> bool:
    """Each value is `f(args) op e` (or `e op f(args)`) for op in + * min max, and neither e nor
    the predicate (which decides whether to store) reads f."""
    d = func.scheduled_definitions()[stage]
    if d.predicate is not None and self_calls(func, [d.predicate]):
        return False
    for k, v in enumerate(d.values):
        if not isinstance(v, ir.Add | ir.Mul | ir.Min | ir.Max | ir.And | ir.Or):
            return False
        operands = (v.a, v.b)
        is_self = [isinstance(x, ir.Call) and x.call_type == ir.HALIDE and x.func is func and x.args == d.args
                   and x.value_index == k for x in operands]
        if is_self.count(True) != 1:
            return False
        other = operands[1] if is_self[0] else operands[0]
        if self_calls(func, [other]):
            return False
    return True


def pure_var_crossing_is_safe(func, stage: int, var: str) -> bool:
    """Every read of f by the update uses `var` itself in var's position."""
    d = func.scheduled_definitions()[stage]
    pos = func._pure_args.index(var)
    return all(isinstance(c.args[pos], ir.Variable) and c.args[pos].name == var
               for c in self_calls(func, _definition_exprs(d)))


def rvar_loop_is_race_free(func, stage: int, rvar: str) -> bool:
    """Distinct values of rvar write distinct elements (some left-hand argument is rvar itself) and
    each read of f by the update is of the element it writes, or of one no iteration writes: in
    one of rvar's positions, a coordinate outside rvar's range (a scan's `f(r) += f(-1)`)."""
    d = func.scheduled_definitions()[stage]
    positions = [k for k, a in enumerate(d.args) if isinstance(a, ir.Variable) and a.name == rvar]
    rv = next((v for v in d.rvars if v.name == rvar), None)
    return bool(positions) and all(c.args == d.args or any(_outside_range(c.args[k], rv) for k in positions)
                                   for c in self_calls(func, _definition_exprs(d)))


def _outside_range(e: ir.Expr, rv) -> bool:
    """Whether e is provably never in the range of the reduction variable rv."""
    from ..ir_mutator import free_variables
    from ..simplify import simplify

    if rv is None or rv.name in free_variables(e):
        return False
    last = ir.Sub(ir.Add(rv.min, rv.extent), ir.make_const(rv.min.type, 1))
    return ir.is_const(simplify(ir.LT(e, rv.min)), 1) or ir.is_const(simplify(ir.GT(e, last)), 1)
