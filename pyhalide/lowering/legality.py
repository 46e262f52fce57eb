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
    """Each value is `f(args) op e` (or `e op f(args)`) for op in + * min max, and e does not read f."""
    d = func.scheduled_definitions()[stage]
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
    the update reads f only at the element it writes."""
    d = func.scheduled_definitions()[stage]
    writes_distinct = any(isinstance(a, ir.Variable) and a.name == rvar for a in d.args)
    reads_own = all(c.args == d.args for c in self_calls(func, _definition_exprs(d)))
    return writes_distinct and reads_own
