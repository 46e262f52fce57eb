"""Inline reductions: hl.sum(expr) and friends make an anonymous Func over expr's free Vars."""

from __future__ import annotations

from . import ir
from .errors import HalideError
from .expr import Expr, to_ir, wrap
from .func import Func, Tuple, _FindVariables
from .names import unique_name
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
    f = _reduction_func(name)
    f[tuple(vars_)] = wrap(ir.make_const(value.type, init(value.type)))
    f[tuple(vars_)] = step(f[tuple(vars_)], wrap(value))
    return f[tuple(vars_)]


def _reduction_func(name: str) -> Func:
    """The hidden Func of an inline reduction: by default computed inside the innermost loop of
    the Func that uses it, as in Halide."""
    f = Func(name)
    f._schedule.innermost_default = True
    return f


def _lowest(t):
    return float("-inf") if t.is_float() else t.min_value()


def _highest(t):
    return float("inf") if t.is_float() else t.max_value()


def sum(e, name: str | None = None) -> Expr:
    """The sum of e over its RDom, in e's type (integers wrap, as in Halide)."""
    return _reduce(e, name or unique_name("sum"), lambda t: 0, lambda acc, v: acc + v)


def product(e, name: str | None = None) -> Expr:
    return _reduce(e, name or unique_name("product"), lambda t: 1, lambda acc, v: acc * v)


def maximum(e, name: str | None = None) -> Expr:
    from .operators import max as hl_max

    return _reduce(e, name or unique_name("maximum"), _lowest, hl_max)


def minimum(e, name: str | None = None) -> Expr:
    from .operators import min as hl_min

    return _reduce(e, name or unique_name("minimum"), _highest, hl_min)


def _arg_reduce(e, name: str, better):
    value = to_ir(e)
    vars_, rvars = _free_vars_and_rvars(value)
    t = value.type
    worst = _lowest(t) if better == "gt" else _highest(t)
    f = _reduction_func(name)
    args = tuple(vars_)
    f[args] = Tuple([*[r.min() for r in rvars], wrap(ir.make_const(t, worst))])
    current = f[args]
    best = current[len(rvars)]
    cond = wrap(value) > best if better == "gt" else wrap(value) < best
    f[args] = Tuple(
        [select(cond, r, current[i]) for i, r in enumerate(rvars)] + [select(cond, wrap(value), best)]
    )
    ref = f[args]
    return tuple(ref[i] for i in range(len(rvars) + 1))  # a Python tuple, as Halide's bindings return


def argmax(e, name: str | None = None) -> tuple:
    """(coordinates of the first maximum..., the maximum), a Python tuple of Exprs."""
    return _arg_reduce(e, name or unique_name("argmax"), "gt")


def argmin(e, name: str | None = None) -> tuple:
    return _arg_reduce(e, name or unique_name("argmin"), "lt")
