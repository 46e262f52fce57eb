"""Inline the Funcs scheduled inline: replace each call by the Func's pure definition.

Assumes: inlined Funcs have no updates. Guarantees: no Call to an inlined Func remains.
Non-trivial call arguments are bound once with Let, so they are not duplicated. A stencil
inlined into a stencil multiplies the size of the expression, level after level; before
inlining, the size each definition would grow to is counted (in time linear in the
definitions). One past MAX_INLINED_NODES is inlined as a graph, each distinct call expanded
once (a chain of Funcs each reading the two before it at the same point, as Halide keeps it),
then made lets; if even its distinct calls are more than MAX_SHARED_CALLS (every level reading
new coordinates), it is refused naming the Func, rather than compiling for minutes or hours.
"""

from __future__ import annotations

import itertools

from .. import ir
from ..cse import common_subexpression_elimination
from ..errors import CompileError
from ..ir_mutator import IRMutator, called_names, substitute
from ..operators import UNDEF
from ..simplify import simplify

MAX_INLINED_NODES = 1_000_000  # about half a minute of compiling
MAX_SHARED_CALLS = 20_000  # distinct calls expanded once each, shared (a let each)


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


def _oversized(env) -> dict[str, int]:
    """The computed Funcs a value of which would grow past MAX_INLINED_NODES once inlined: name
    -> that size (as a tree)."""
    sizes, found = _InlinedSizes(env), {}
    for name, f in env.funcs.items():
        if name in env.inlined:
            continue
        for _, definition in f.all_scheduled_definitions():
            for value in definition.values:
                n = sizes.of(value)
                if n > MAX_INLINED_NODES:
                    found[name] = max(found.get(name, 0), n)
    return found


def _refuse(name: str, value: ir.Expr, n: int, env) -> CompileError:
    callees = sorted({c for c in called_names(value) if c in env.inlined})
    return CompileError(
        f"Func {name}: inlining {', '.join(callees)} into it makes an expression of {n} nodes "
        f"(more than {MAX_INLINED_NODES}): each inlined stencil level multiplies the work. "
        f"Schedule some of them with compute_root() or compute_at()")


class _Shared(IRMutator):
    """Inlining for a value whose tree would explode: each distinct call (by value) is expanded
    once and shared (`f(x) = g(x) + h(x)`, `g(x) = h(x) + ...`: h(x) once), as Halide's
    inlining keeps a graph; the caller turns the graph into lets. Gives up past MAX_SHARED_CALLS
    distinct calls (a stencil whose every level reads new coordinates)."""

    def __init__(self, env):
        super().__init__()
        self.env = env
        self.memo: dict[ir.Call, ir.Expr] = {}

    def mutate(self, node):
        if isinstance(node, ir.Expr) and self.env.inlined.isdisjoint(called_names(node)):
            return node
        return super().mutate(node)

    def visit_Call(self, c):
        c = self.default(c)
        if c.call_type != ir.HALIDE or c.name not in self.env.inlined:
            return c
        # (coordinates simplified: f(x - 1 + 1) is f(x), so a stencil's calls meet again)
        c = ir.Call(c.type, c.name, tuple(simplify(a) for a in c.args), c.call_type, c.value_index, c.func, c.image)
        hit = self.memo.get(c)
        if hit is None:
            if len(self.memo) >= MAX_SHARED_CALLS:
                raise _TooMany
            f = self.env.funcs[c.name]
            hit = self.memo[c] = self.mutate(substitute(dict(zip(f._pure_args, c.args)),
                                                        _inlined_value(f, c.value_index)))
        return hit


class _TooMany(Exception):
    """More distinct calls than MAX_SHARED_CALLS."""


def _inlined_value(f, index: int) -> ir.Expr:
    """What a call of inlined f's element `index` stands for: its pure value, undef where the
    definition is not defined (remove_undef)."""
    definition = f.definitions()[0]
    body = definition.values[index]
    if definition.predicate is not None:
        body = ir.Select(definition.predicate, body, ir.Call(body.type, UNDEF, (), ir.INTRINSIC))
    return body


class _Inline(IRMutator):
    def __init__(self, env, oversized: dict[str, int]):
        super().__init__()
        self.env, self.oversized = env, oversized
        self.counter = itertools.count()

    def visit_Provide(self, p):
        if p.name not in self.oversized:
            return self.default(p)
        # Its tree would explode: a graph of each distinct call expanded once, then lets.
        shared = _Shared(self.env)
        try:
            values = tuple(common_subexpression_elimination(shared.mutate(v)) for v in p.values)
            args = tuple(common_subexpression_elimination(shared.mutate(a)) for a in p.args)
        except _TooMany:
            raise _refuse(p.name, next(iter(p.values)), self.oversized[p.name], self.env) from None
        return ir.Provide(p.name, values, args, p.func)

    def mutate(self, node):
        if isinstance(node, ir.Expr) and self.env.inlined.isdisjoint(called_names(node)):
            return node  # calls no inlined Func
        return super().mutate(node)

    def visit_Call(self, c):
        c = self.default(c)
        if c.call_type != ir.HALIDE or c.name not in self.env.inlined:
            return c
        f = self.env.funcs[c.name]
        body = _inlined_value(f, c.value_index)
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
    return _Inline(env, _oversized(env)).mutate(stmt)
