"""Inline reductions: hl.sum(expr) and friends make an anonymous Func over expr's free Vars."""

from __future__ import annotations

from . import ir
from .errors import HalideError
from .expr import Expr, to_ir, wrap
from .func import Func, Tuple, _FindVariables
from .operators import select
from .var import RVar, Var


def _free_vars_and_rvars(e: ir.Expr):
    finder = _FindVariables()
    finder.visit(e)
    if not finder.domains:
        raise HalideError("An inline reduction needs an expression that uses an RDom")
    rvars = [RVar(d, i) for d in finder.domains.values() for i in range(len(d.rvars))]
    return [Var(n) for n in finder.pure], rvars


def _reduce(e, name, init, step):
    value = to_ir(e)
    vars_, _ = _free_vars_and_rvars(value)
    f = Func(name)
    f[tuple(vars_)] = wrap(ir.make_const(value.type, init(value.type)))
    f[tuple(vars_)] = step(f[tuple(vars_)], wrap(value))
    return f[tuple(vars_)]


def sum(e, name: str = "sum") -> Expr:
    """The sum of e over its RDom, in e's type (integers wrap, as in Halide)."""
    return _reduce(e, name, lambda t: 0, lambda acc, v: acc + v)


def product(e, name: str = "product") -> Expr:
    return _reduce(e, name, lambda t: 1, lambda acc, v: acc * v)


def maximum(e, name: str = "maximum") -> Expr:
    from .operators import max as hl_max

    return _reduce(e, name, lambda t: t.min_value() if not t.is_float() else float("-inf"), hl_max)


def minimum(e, name: str = "minimum") -> Expr:
    from .operators import min as hl_min

    return _reduce(e, name, lambda t: t.max_value() if not t.is_float() else float("inf"), hl_min)


def _arg_reduce(e, name: str, better):
    value = to_ir(e)
    vars_, rvars = _free_vars_and_rvars(value)
    t = value.type
    worst = (t.min_value() if better == "gt" else t.max_value()) if not t.is_float() else (
        float("-inf") if better == "gt" else float("inf"))
    f = Func(name)
    args = tuple(vars_)
    f[args] = Tuple([*[r.min() for r in rvars], wrap(ir.make_const(t, worst))])
    current = f[args]
    best = current[len(rvars)]
    cond = wrap(value) > best if better == "gt" else wrap(value) < best
    f[args] = Tuple(
        [select(cond, r, current[i]) for i, r in enumerate(rvars)] + [select(cond, wrap(value), best)]
    )
    return f[args]


def argmax(e, name: str = "argmax") -> Expr:
    """A Tuple (coordinates of the first maximum..., the maximum); index it with [i]."""
    return _arg_reduce(e, name, "gt")


def argmin(e, name: str = "argmin") -> Expr:
    return _arg_reduce(e, name, "lt")
