"""Remove undef: a store whose value or site is undef (`hl.undef`) is left out, as in Halide.

Definitions strip undef where they are made (func.py), so what reaches lowering is an element of
a pure definition that is never defined (an undef Call as its whole value) and, once inlining has
substituted a Func defined only where a condition holds (`f(x) = select(c, v, undef)`), undef
inside a consumer's values or sites. Each Provide holding undef is guarded by the condition under
which its sites and defined values are, and dropped where none ever is: `g(x) = -f(x)` with that
f inlined stores nothing where c is false, as Halide's. (Halide guards a Tuple's store by its last
element's condition alone and ignores the sites'; pyhalide guards it by all of them.) A branch
condition holding undef keeps its defined part.

Assumes: runs after inlining. Guarantees: undef remains only as the whole value of a Provide's
element, which tracing and storage flattening store nothing for (`is_unstored`).
"""

from __future__ import annotations

from .. import ir
from ..errors import CompileError
from ..ir_mutator import IRMutator, has_call
from ..operators import defined_where, is_undef_ir


def remove_undef(stmt: ir.Stmt) -> ir.Stmt:
    return _RemoveUndef().mutate(stmt)


def is_unstored(value: ir.Expr) -> bool:
    """A Provide's element with no value to store: the Func's memory there is left as it was."""
    return is_undef_ir(value)


class _RemoveUndef(IRMutator):
    def mutate(self, node):
        if isinstance(node, ir.Expr):
            return node  # (only statements change)
        return super().mutate(node)

    def visit_IfThenElse(self, s):
        # A condition holding undef (an RDom predicate reading such a Func): its defined part, as
        # Halide's (the undef arm of a select drops out); never defined, the branch never runs.
        condition = s.condition
        if has_call(condition):
            condition, _ = defined_where(condition)
            if condition is None:
                return ir.make_block([]) if s.else_case is None else self.mutate(s.else_case)
        then_case, else_case = self.mutate(s.then_case), self.mutate(s.else_case)
        if condition is s.condition and then_case is s.then_case and else_case is s.else_case:
            return s
        return ir.IfThenElse(condition, then_case, else_case)

    def visit_Provide(self, p):
        if not any(has_call(e) for e in (*p.args, *p.values)):
            return p
        guards, args = [], []
        for a in p.args:
            value, when = defined_where(a)
            if value is None:
                return ir.make_block([])  # a site never defined: nothing is stored
            args.append(value)
            guards.append(when)
        if any(g != guards[0] for g in guards[1:]):
            raise CompileError(f"Func {p.name}: conditionally-undef args in a Tuple should have the same "
                               "conditions (Halide's rule)")
        values, conditions = [], []
        for v in p.values:
            value, when = defined_where(v)
            values.append(ir.Call(v.type, "undef", (), ir.INTRINSIC) if value is None else value)
            if value is not None:
                conditions.append(when)
        if not conditions:
            return ir.make_block([])  # no element is ever defined
        if any(c != conditions[0] for c in conditions[1:]):
            raise CompileError(f"Func {p.name}: the elements of the Tuple it stores are undef under different "
                               "conditions; Halide stores all of a Tuple's elements or none")
        guard = None
        for when in (*guards, conditions[0]):
            if when is not None:
                guard = when if guard is None else ir.And(guard, when)
        provide = ir.Provide(p.name, tuple(values), tuple(args), p.func)
        return provide if guard is None else ir.IfThenElse(guard, provide, None)
