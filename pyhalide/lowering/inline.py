"""Inline the Funcs scheduled inline: replace each call by the Func's pure definition.

Assumes: inlined Funcs have no updates. Guarantees: no Call to an inlined Func remains.
Non-trivial call arguments are bound once with Let, so they are not duplicated. A stencil
inlined into a stencil multiplies the size of the expression, level after level; before
inlining, the size each definition would grow to is counted (in time linear in the
definitions), and one past MAX_INLINED_NODES is refused naming the Func, rather than compiling
for minutes or hours.
"""

from __future__ import annotations

import itertools

from .. import ir
from ..errors import CompileError
from ..ir_mutator import IRMutator, called_names, substitute
from ..operators import UNDEF

MAX_INLINED_NODES = 1_000_000  # about half a minute of compiling


def _children(node):
    for name in node._children:
        value = getattr(node, name)
        if isinstance(value, ir.Node):
            yield value
        elif isinstance(value, tuple):
            yield from (v for v in value if isinstance(v, ir.Node))


class _InlinedSizes:
    """How many IR nodes an expression has once the inlined Funcs it calls are substituted."""

    def __init__(self, env):
        self.env = env
        self.memo: dict[tuple[str, int], int] = {}

    def of(self, root: ir.Expr) -> int:
        total, stack = 0, [root]  # explicit stack: definitions can be deep
        while stack:
            node = stack.pop()
            total += 1
            if isinstance(node, ir.Call) and node.call_type == ir.HALIDE and node.name in self.env.inlined:
                total += self.of_func(node.name, node.value_index) - 1
                stack.extend(node.args)
            else:
                stack.extend(_children(node))
        return total

    def of_func(self, name: str, index: int) -> int:
        key = (name, index)
        if key not in self.memo:
            self.memo[key] = self.of(self.env.funcs[name].definitions()[0].values[index])
        return self.memo[key]


def _refuse_exponential_inlining(env) -> None:
    sizes = _InlinedSizes(env)
    for name, f in env.funcs.items():
        if name in env.inlined:
            continue
        for _, definition in f.all_scheduled_definitions():
            for value in definition.values:
                n = sizes.of(value)
                if n > MAX_INLINED_NODES:
                    callees = sorted({c for c in called_names(value) if c in env.inlined})
                    raise CompileError(
                        f"Func {name}: inlining {', '.join(callees)} into it makes an expression of {n} nodes "
                        f"(more than {MAX_INLINED_NODES}): each inlined stencil level multiplies the work. "
                        f"Schedule some of them with compute_root() or compute_at()")


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
        definition = f.definitions()[0]
        body = definition.values[c.value_index]
        if definition.predicate is not None:  # defined only there: undef elsewhere (remove_undef)
            body = ir.Select(definition.predicate, body, ir.Call(body.type, UNDEF, (), ir.INTRINSIC))
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
    _refuse_exponential_inlining(env)
    return _Inline(env).mutate(stmt)
