"""Inline reductions: hl.sum(expr) and friends make an anonymous Func over expr's free Vars."""

from __future__ import annotations

from . import ir
from .errors import HalideError
from .expr import Expr, to_ir, wrap
from .func import Func, Tuple, _FindVariables
from .ir_mutator import substitute
from .names import unique_name
from .operators import select
from .var import RDom, RVar, Var


def _reduction_of(e, rdom, name: str | None = None):
    """(value, pure Vars it is a function of, the Args to call it with, the RVars it reduces over).

    With no RDom given, the one RDom e uses is reduced over (several are ambiguous: Halide's
    error). With one (Halide's `sum(r, e)`), only it is: e's other RVars stay free, as arguments
    of the hidden Func called with those RVars."""
    value = to_ir(e)
    finder = _FindVariables()
    finder.visit(value)
    if rdom is None:
        if not finder.domains:
            raise HalideError("An inline reduction needs an expression that uses an RDom")
        domains = list(finder.domains.values())
        if len(domains) > 1:  # which to reduce over is ambiguous (Halide: an error)
            raise HalideError(f'Inline reduction "{name}" refers to reduction variables from multiple reduction '
                              f"domains: {', '.join(d.rvars[0].name for d in domains)}. Name the RDom to reduce over: "
                              "hl.sum(rdom, expr)")
        free: dict[str, ir.Expr] = {}
    else:
        if not isinstance(rdom, RDom):
            raise HalideError(f"An inline reduction's first argument is the RDom to reduce over, got {rdom!r}")
        domains = [rdom._domain]
        free = {rv.name: ir.Variable(unique_name("v"), rv.min.type)
                for d in finder.domains.values() if d is not rdom._domain for rv in d.rvars}
        value = substitute(free, value)
    rvars = [RVar(d, i) for d in domains for i in range(len(d.rvars))]
    names = list(finder.pure) + [v.name for v in free.values()]
    call_args = [Var(n) for n in finder.pure] + [wrap(ir.Variable(n, v.type, ref=_domain_of(finder, n)))
                                                  for n, v in free.items()]
    return value, [Var(n) for n in names], call_args, rvars


def _domain_of(finder, rvar_name: str):
    return next(d for d in finder.domains.values() if any(rv.name == rvar_name for rv in d.rvars))


def _split_args(args, what: str):
    """(rdom or None, expr, name) from Halide's (expr[, name]) and (rdom, expr[, name]) forms."""
    lone_rdom = len(args) == 1 or (len(args) == 2 and isinstance(args[1], str))
    if args and isinstance(args[0], RDom) and not lone_rdom:  # (a lone RDom is its expression, r.x)
        if len(args) not in (2, 3):
            raise HalideError(f"{what}(rdom, expr[, name]) takes 2 or 3 arguments, got {len(args)}")
        return args[0], args[1], (args[2] if len(args) == 3 else None)
    if len(args) not in (1, 2):
        raise HalideError(f"{what}(expr[, name]) takes 1 or 2 arguments, got {len(args)}")
    return None, args[0], (args[1] if len(args) == 2 else None)


def _reduce(args, what: str, init, step):
    rdom, e, name = _split_args(args, what)
    value, vars_, call_args, _ = _reduction_of(e, rdom, name or what)
    f = _reduction_func(name or unique_name(what), not name)
    f[tuple(vars_)] = wrap(ir.make_const(value.type, init(value.type)))
    f[tuple(vars_)] = step(f[tuple(vars_)], wrap(value))
    return f[tuple(call_args)]


def _reduction_func(name: str, generated: bool) -> Func:
    """The hidden Func of an inline reduction: by default computed inside the innermost loop of
    the Func that uses it, as in Halide."""
    f = Func(name)
    f._generated_name = generated
    f._schedule.innermost_default = True
    return f


def _lowest(t):
    return float("-inf") if t.is_float() else t.min_value()


def _highest(t):
    return float("inf") if t.is_float() else t.max_value()


def sum(*args, name: str | None = None) -> Expr:
    """sum(expr[, name]) or sum(rdom, expr[, name]): the sum over the RDom, in expr's type
    (integers wrap, as in Halide)."""
    return _reduce(_named(args, name), "sum", lambda t: 0, lambda acc, v: acc + v)


def product(*args, name: str | None = None) -> Expr:
    return _reduce(_named(args, name), "product", lambda t: 1, lambda acc, v: acc * v)


def maximum(*args, name: str | None = None) -> Expr:
    from .operators import max as hl_max

    return _reduce(_named(args, name), "maximum", _lowest, hl_max)


def minimum(*args, name: str | None = None) -> Expr:
    from .operators import min as hl_min

    return _reduce(_named(args, name), "minimum", _highest, hl_min)


def _named(args: tuple, name) -> tuple:
    return args if name is None else (*args, name)


def _arg_reduce(args, what: str, better):
    rdom, e, name = _split_args(args, what)
    value, vars_, call_args, rvars = _reduction_of(e, rdom, name or what)
    t = value.type
    worst = _lowest(t) if better == "gt" else _highest(t)
    f = _reduction_func(name or unique_name(what), not name)
    pure = tuple(vars_)
    # Halide starts the coordinates at 0 (not the RDom's min): where no value beats the start
    # (argmin of an all-true condition), the answer is 0
    f[pure] = Tuple([*[0 for _ in rvars], wrap(ir.make_const(t, worst))])
    current = f[pure]
    best = current[len(rvars)]
    cond = wrap(value) > best if better == "gt" else wrap(value) < best
    f[pure] = Tuple(
        [select(cond, r, current[i]) for i, r in enumerate(rvars)] + [select(cond, wrap(value), best)]
    )
    ref = f[tuple(call_args)]
    return tuple(ref[i] for i in range(len(rvars) + 1))  # a Python tuple, as Halide's bindings return


def argmax(*args, name: str | None = None) -> tuple:
    """argmax(expr[, name]) or argmax(rdom, expr[, name]): (coordinates of the first maximum...,
    the maximum), a Python tuple of Exprs."""
    return _arg_reduce(_named(args, name), "argmax", "gt")


def argmin(*args, name: str | None = None) -> tuple:
    return _arg_reduce(_named(args, name), "argmin", "lt")
