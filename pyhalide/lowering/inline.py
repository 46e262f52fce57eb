"""Inline the Funcs scheduled inline: replace each call by the Func's pure definition.

Assumes: inlined Funcs have no updates. Guarantees: no Call to an inlined Func remains.
Non-trivial call arguments are bound once with Let, so they are not duplicated.
"""

from __future__ import annotations

import itertools

from .. import ir
from ..ir_mutator import IRMutator, called_names, substitute


class _Inline(IRMutator):
    def __init__(self, env):
        super().__init__()
        self.env = env
        self.counter = itertools.count()

    def mutate(self, node):
        if isinstance(node, ir.Expr) and self.env.inlined.isdisjoint(called_names(node)):
            return node  # calls no inlined Func
        return super().mutate(node)

    def visit_Call(self, c):
        c = self.default(c)
        if c.call_type != ir.HALIDE or c.name not in self.env.inlined:
            return c
        f = self.env.funcs[c.name]
        body = f.definitions()[0].values[c.value_index]
        subst, lets = {}, []
        for var, arg in zip(f._pure_args, c.args):
            if isinstance(arg, ir.Variable | ir.IntImm):
                subst[var] = arg
            else:
                tmp = f"{c.name}.{var}.inl{next(self.counter)}"
                subst[var] = ir.Variable(tmp, arg.type)
                lets.append((tmp, arg))
        result = self.mutate(substitute(subst, body))
        for name, value in reversed(lets):
            result = ir.Let(name, value, result)
        return result


def inline_functions(stmt: ir.Stmt, env) -> ir.Stmt:
    if not env.inlined:
        return stmt
    return _Inline(env).mutate(stmt)
