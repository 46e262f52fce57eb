"""Automatic differentiation, as Halide's `propagate_adjoints`: reverse-mode derivatives of a
pipeline, as Funcs a user schedules and realizes like any other.

Each Func f with stages 0..n (its pure definition, then its updates) gets one adjoint Func per
stage: `A[f, s](p)` is the derivative of the output with respect to the value f holds at p once
stage s has run. Funcs are visited consumers first, each one's stages last to first. A stage's
values are differentiated in reverse mode (the partial derivative of each value with respect to
each call it makes); the adjoint of what the stage writes, times a partial, is deposited on the
callee: as a gather (a term of the callee adjoint's pure definition, where the call's arguments
can be solved for the stage's variables, as a convolution's can) or else as a scatter (an update
of the callee's adjoint over the stage's whole domain, which forward bounds inference sizes).

An update that reads its own Func is reversed by what it does. An additive one (f(p) += e, a
histogram) passes its adjoint through unchanged. One that writes each point at most once reads,
at each point, either the value the stage found there (f(x) = f(x) * f(x); f(x, 1) = f(x, 0)) or,
along a scan (f(x, r + 1) = f(x, r) * ...), the value an earlier iteration wrote, whose adjoint a
reverse scan accumulates. Those values are read from "prefix" copies of f that stop after the
stage before (or at) this one, so derivatives see what the forward pipeline saw. A max or min
reduction passes its adjoint to the iteration that won. Anything else (a product over an RDom, a
point overwritten several times) is refused with a clear error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import ir
from .bounds import Interval, bounds_of_expr
from .cse import inline_lets
from .errors import HalideError
from .expr import to_ir, wrap
from .func import Definition, Func, Tuple, _FindVariables
from .inline_reductions import sum as inline_sum
from .ir_mutator import IRMutator, IRVisitor, affine_in, expr_free_variables, substitute
from .names import unique_name
from .operators import undef
from .param import ImageParam, Param
from .simplify import simplify
from .types import Float, Int
from .var import RDom, Var

_I32 = Int(32)
_DIM_NAMES = ("x", "y", "z", "w")  # the Vars of an image's adjoint, as a user would name them
_BAND = 32  # rows of a stage's domain per partial sum of a gradient summed over that domain


def _i(v) -> ir.Expr:
    return v if isinstance(v, ir.Expr) else ir.make_const(_I32, v)


def _zero(t) -> ir.Expr:
    return ir.make_const(t, 0)


def _adjoint_type(t):
    """Adjoints of float values have the value's type; integers have none (Float(32) zeros)."""
    return t if t.is_float() else Float(32)


def _conjunction(terms) -> ir.Expr | None:
    out = None
    for t in terms:
        if t is not None:
            out = t if out is None else ir.And(out, t)
    return out


def _within(e: ir.Expr, lo: ir.Expr, hi: ir.Expr) -> ir.Expr:
    return ir.And(ir.LE(lo, e), ir.LE(e, hi))


def _clamp(e: ir.Expr, lo: ir.Expr, hi: ir.Expr) -> ir.Expr:
    return ir.Max(ir.Min(e, hi), lo)


# ---------------------------------------------------------------- reverse mode over one Expr
def _float_children(node: ir.Expr) -> list[ir.Expr]:
    """The operands a derivative flows into (the leaves, calls and Params, have none)."""
    if isinstance(node, ir.Call):
        if node.call_type in (ir.HALIDE, ir.IMAGE):
            return []
        args = node.args
    elif isinstance(node, ir.Select):
        args = (node.true_value, node.false_value)
    elif isinstance(node, ir.BinaryOp) and not isinstance(node, ir.CompareOp | ir.LogicalOp):
        args = (node.a, node.b)
    elif isinstance(node, ir.Cast):
        args = (node.value,)
    else:
        return []
    return [a for a in args if isinstance(a, ir.Expr) and a.type.is_float()]


def _extern(name: str, *args: ir.Expr) -> ir.Expr:
    return ir.Call(args[0].type, name, tuple(args), ir.EXTERN)


def _local_partials(n: ir.Expr, a: ir.Expr) -> list[tuple[ir.Expr, ir.Expr]]:
    """(operand, adjoint) for the float operands of n, given n's adjoint a."""
    t = n.type
    one = ir.make_const(t, 1)
    if isinstance(n, ir.Add):
        return [(n.a, a), (n.b, a)]
    if isinstance(n, ir.Sub):
        return [(n.a, a), (n.b, ir.Sub(_zero(t), a))]
    if isinstance(n, ir.Mul):
        return [(n.a, ir.Mul(a, n.b)), (n.b, ir.Mul(a, n.a))]
    if isinstance(n, ir.Div):
        return [(n.a, ir.Div(a, n.b)), (n.b, ir.Sub(_zero(t), ir.Div(ir.Mul(a, n), n.b)))]
    if isinstance(n, ir.Mod):  # a - b * floor(a / b)
        return [(n.a, a), (n.b, ir.Sub(_zero(t), ir.Mul(a, _extern("floor", ir.Div(n.a, n.b)))))]
    if isinstance(n, ir.Min | ir.Max):
        first = ir.LE(n.a, n.b) if isinstance(n, ir.Min) else ir.GE(n.a, n.b)
        return [(n.a, ir.Select(first, a, _zero(t))), (n.b, ir.Select(first, _zero(t), a))]
    if isinstance(n, ir.Select):
        return [(n.true_value, ir.Select(n.condition, a, _zero(t))),
                (n.false_value, ir.Select(n.condition, _zero(t), a))]
    if isinstance(n, ir.Cast):
        return [(n.value, ir.Cast(n.value.type, a))] if n.value.type.is_float() else []
    if isinstance(n, ir.Reinterpret):  # bits as a float (random_float's): no derivative
        return []
    if isinstance(n, ir.Call) and n.call_type == ir.INTRINSIC:
        return _intrinsic_partials(n, a)
    if isinstance(n, ir.Call) and n.call_type == ir.EXTERN:
        return _math_partials(n, a, one)
    raise HalideError(f"propagate_adjoints: can't differentiate {wrap(n)}")


def _intrinsic_partials(n: ir.Call, a: ir.Expr) -> list:
    name, args, t = n.name, n.args, n.type
    if name in ("likely", "likely_if_innermost", "promise_clamped", "unsafe_promise_clamped", "memoize_tag"):
        return [(args[0], a)] if args[0].type.is_float() else []
    if name == "print":  # print(condition, parts...) is its first part that is not a string
        value = next(p for p in args[1:] if not isinstance(p, ir.StringImm))
        return [(value, a)] if value.type.is_float() else []
    if name == "require":
        return [(args[1], a)] if args[1].type.is_float() else []
    if name == "abs":
        return [(args[0], ir.Select(ir.GE(args[0], _zero(t)), a, ir.Sub(_zero(t), a)))]
    if name == "absd":
        up = ir.GE(args[0], args[1])
        return [(args[0], ir.Select(up, a, ir.Sub(_zero(t), a))), (args[1], ir.Select(up, ir.Sub(_zero(t), a), a))]
    if name == "random":
        return []  # random numbers are constants of the point, as in Halide
    raise HalideError(f"propagate_adjoints: can't differentiate the intrinsic {name} in {wrap(n)}")


def _math_partials(n: ir.Call, a: ir.Expr, one: ir.Expr) -> list:
    name, t = n.name, n.type
    x = n.args[0]
    neg = lambda e: ir.Sub(_zero(t), e)  # noqa: E731
    sq = lambda e: ir.Mul(e, e)  # noqa: E731
    unary = {
        "sqrt": lambda: ir.Div(a, ir.Mul(ir.make_const(t, 2), n)),
        "exp": lambda: ir.Mul(a, n),
        "log": lambda: ir.Div(a, x),
        "sin": lambda: ir.Mul(a, _extern("cos", x)),
        "cos": lambda: neg(ir.Mul(a, _extern("sin", x))),
        "tan": lambda: ir.Mul(a, ir.Add(one, sq(n))),
        "asin": lambda: ir.Div(a, _extern("sqrt", ir.Sub(one, sq(x)))),
        "acos": lambda: neg(ir.Div(a, _extern("sqrt", ir.Sub(one, sq(x))))),
        "atan": lambda: ir.Div(a, ir.Add(one, sq(x))),
        "sinh": lambda: ir.Mul(a, _extern("cosh", x)),
        "cosh": lambda: ir.Mul(a, _extern("sinh", x)),
        "tanh": lambda: ir.Mul(a, ir.Sub(one, sq(n))),
        "asinh": lambda: ir.Div(a, _extern("sqrt", ir.Add(sq(x), one))),
        "acosh": lambda: ir.Div(a, _extern("sqrt", ir.Sub(sq(x), one))),
        "atanh": lambda: ir.Div(a, ir.Sub(one, sq(x))),
        "erf": lambda: ir.Mul(a, ir.Mul(ir.make_const(t, 1.1283791670955126), _extern("exp", neg(sq(x))))),
    }
    if name in unary:
        return [(x, unary[name]())]
    if name in ("floor", "ceil", "round", "trunc"):
        return []
    if name == "pow":
        y = n.args[1]
        return [(x, ir.Mul(a, ir.Mul(y, _extern("pow", x, ir.Sub(y, one))))),
                (y, ir.Mul(a, ir.Mul(n, _extern("log", x))))]
    if name == "atan2":  # atan2(y, x)
        y, xx = n.args
        norm = ir.Add(sq(xx), sq(y))
        return [(y, ir.Div(ir.Mul(a, xx), norm)), (xx, neg(ir.Div(ir.Mul(a, y), norm)))]
    raise HalideError(f"propagate_adjoints: can't differentiate the function {name} in {wrap(n)}")


def _guarded_partials(n: ir.Expr, a: ir.Expr) -> list[tuple[ir.Expr, ir.Expr]]:
    """As _local_partials, but an adjoint that a select zeroes somewhere (select(c, a', 0), from a
    select in the value) keeps its select outermost: the partials of the branch it did not take
    (a division by zero, a log of zero) are never multiplied in, so they cannot make a NaN."""
    if isinstance(a, ir.Select):
        for keep, other, taken in ((a.true_value, a.false_value, True), (a.false_value, a.true_value, False)):
            if ir.is_const(other, 0):
                out = []
                for operand, da in _guarded_partials(n, keep):
                    zero = _zero(da.type)
                    out.append((operand, ir.Select(a.condition, da, zero) if taken else
                                ir.Select(a.condition, zero, da)))
                return out
    return _local_partials(n, a)


def reverse_mode(value: ir.Expr, seed: ir.Expr) -> list[tuple[ir.Expr, ir.Expr]]:
    """(leaf, adjoint) for every float call to a Func or image and every float Param `value`
    reads, where `seed` is the adjoint of value itself (the same leaf node may come twice)."""
    root = inline_lets(value)
    if not root.type.is_float():
        return []
    order: list[ir.Expr] = []  # every node after all of its operands
    seen: set[int] = set()
    stack: list[tuple[ir.Expr, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in _float_children(node) if id(c) not in seen)
    adjoints: dict[int, ir.Expr] = {id(root): seed}
    leaves = []
    for node in reversed(order):  # each node before its operands, after everything using it
        a = adjoints.pop(id(node), None)
        if a is None:
            continue
        if isinstance(node, ir.Call) and node.call_type in (ir.HALIDE, ir.IMAGE):
            leaves.append((node, a))
        elif isinstance(node, ir.Variable):
            if isinstance(node.ref, Param):
                leaves.append((node, a))
        elif not isinstance(node, ir.IntImm | ir.FloatImm):
            for operand, da in _guarded_partials(node, a):
                prev = adjoints.get(id(operand))
                adjoints[id(operand)] = da if prev is None else ir.Add(prev, da)
    return leaves


# ---------------------------------------------------------------- stages and their domains
@dataclass
class _Stage:
    """One stage of a Func as a loop nest: pure Vars over the Func's box, RVars over their RDom."""

    func: Func
    index: int  # 0: the pure definition; s: update s - 1
    args: tuple
    values: tuple
    predicate: ir.Expr | None
    pure: list[str]  # the loop Vars over the Func's box (all of them for the pure definition)
    rvars: list[ir.Variable] = field(default_factory=list)
    ranges: dict[str, tuple[ir.Expr, ir.Expr]] = field(default_factory=dict)  # rvar name -> (min, extent)

    def where(self) -> str:
        what = "pure definition" if self.index == 0 else f"update {self.index - 1}"
        return f"the {what} of Func {self.func.name()}"


def _stages(f: Func) -> list[_Stage]:
    out = []
    names = list(f._pure_args)
    for s, d in enumerate(f.definitions()):
        finder = _FindVariables()
        for e in (*d.args, *d.values, *([d.predicate] if d.predicate is not None else [])):
            finder.visit(e)
        rvars, ranges = [], {}
        for dom in finder.domains.values():
            for rv in dom.rvars:
                rvars.append(ir.Variable(rv.name, _I32, ref=dom))
                ranges[rv.name] = (rv.min, rv.extent)
        pure = names if s == 0 else [n for i, n in enumerate(names) if _is_var(d.args[i], n)]
        # (the definitions' lets put in place: a call's arguments are then what bounds see)
        values = tuple(inline_lets(v) for v in d.values)
        predicate = None if d.predicate is None else inline_lets(d.predicate)
        out.append(_Stage(f, s, tuple(inline_lets(a) for a in d.args), values, predicate, pure, rvars, ranges))
    return out


def _is_var(e: ir.Expr, name: str) -> bool:
    return isinstance(e, ir.Variable) and e.name == name and e.ref is None


class _CallCollector(IRVisitor):
    def __init__(self):
        super().__init__()
        self.found: list[ir.Call] = []

    def visit_Call(self, c):
        self.found.append(c)
        for a in c.args:
            self.visit(a)


def _calls(e: ir.Expr) -> list[ir.Call]:
    """Every Call in e, in order (a call inside another's arguments too)."""
    collector = _CallCollector()
    collector.visit(e)
    return collector.found


def _difference(a: ir.Expr, b: ir.Expr, names: list[str]) -> int | None:
    """a - b, where both are affine in the named variables with the same coefficients and the
    rest differs by a constant; else None."""
    coefficients = []
    for e in (a, b):
        ks = []
        for n in names:
            lin = affine_in(e, n)
            if lin is None:
                return None
            ks.append(lin[0])
            e = lin[1]
        coefficients.append((ks, e))
    (ka, ra), (kb, rb) = coefficients
    return ir.const_int(simplify(ir.Sub(ra, rb))) if ka == kb else None


def _rdom_over(bounds: dict, names: list[str]) -> RDom:
    """An RDom over the named variables' [min, max] bounds."""
    return RDom([(wrap(bounds[v][0]), wrap(simplify(ir.Add(ir.Sub(bounds[v][1], bounds[v][0]), _i(1)))))
                 for v in names])


# ---------------------------------------------------------------- deposits on a callee
@dataclass
class _Target:
    """What a callee's adjoint is built from: per element, terms of its pure definition over
    `vars`, and scatter updates (element, args, value; the args and value use an RDom's RVars)."""

    name: str
    types: list
    vars: list[str]
    gathers: list[list[ir.Expr]] = field(default_factory=list)
    scatters: list[tuple] = field(default_factory=list)

    def __post_init__(self):
        self.gathers = [[] for _ in self.types]

    def build(self, name: str) -> Func:
        f = Func(name)
        lhs = [Var(n) for n in self.vars]
        pure = []
        for k, t in enumerate(self.types):
            at = _adjoint_type(t)
            terms = [ir.Cast(at, g) if g.type != at else g for g in self.gathers[k]]
            total = terms[0] if terms else _zero(at)
            for g in terms[1:]:
                total = ir.Add(total, g)
            pure.append(wrap(total))
        f[lhs] = pure[0] if len(pure) == 1 else Tuple(pure)
        for k, args, value in self.scatters:
            at = _adjoint_type(self.types[k])
            value = ir.Cast(at, value) if value.type != at else value
            site = [wrap(a) for a in args]
            if len(self.types) == 1:
                f[site] = f[site] + wrap(value)
            else:
                f[site] = Tuple([f[site][j] + wrap(value) if j == k else undef(_adjoint_type(t))
                                 for j, t in enumerate(self.types)])
        return f


class _Backprop:
    def __init__(self, output: Func, adjoint: Func, bounds: list[tuple[ir.Expr, ir.Expr]]):
        self.output = output
        self.funcs = _consumers_first(output)
        self.box: dict[str, list] = {output.name(): [(lo, hi) for lo, hi in bounds]}
        self.stages = {f.name(): _stages(f) for f in self.funcs}
        self.targets: dict[str, _Target] = {}
        self.adjoints: dict[tuple[str, int], Func] = {}
        self.prefixes: dict[tuple[str, int], Func] = {}
        out_types = output.types()
        seed = _Target(output.name(), out_types, list(output._pure_args))
        u = [ir.Variable(n) for n in seed.vars]
        inside = _conjunction(_within(v, lo, hi) for v, (lo, hi) in zip(u, bounds))
        clamped = tuple(_clamp(v, lo, hi) for v, (lo, hi) in zip(u, bounds))
        for k, t in enumerate(adjoint.types()):
            value = ir.Call(t, adjoint.name(), clamped, ir.HALIDE, k, adjoint)
            value = ir.Cast(_adjoint_type(out_types[k]), value) if t != _adjoint_type(out_types[k]) else value
            seed.gathers[k].append(value if inside is None else ir.Select(inside, value, _zero(value.type)))
        self.targets[output.name()] = seed

    # --- forward bounds ---
    def _scope(self, st: _Stage) -> dict:
        names = st.func._pure_args
        box = self.box.get(st.func.name(), [(None, None)] * len(names))
        scope = {n: Interval(lo, hi) for n, (lo, hi) in zip(names, box)}
        for n, (lo, ext) in st.ranges.items():
            scope[n] = Interval(lo, simplify(ir.Sub(ir.Add(lo, ext), _i(1))))
        return scope

    def _grow(self, f_name: str, args: tuple, scope: dict) -> None:
        box = []
        for a in args:
            iv = bounds_of_expr(a, scope)
            lo = None if iv is None or iv.min is None else simplify(iv.min)
            hi = None if iv is None or iv.max is None else simplify(iv.max)
            box.append((lo, hi))
        old = self.box.get(f_name)
        if old is not None:
            box = [(None if a is None or c is None else simplify(ir.Min(a, c)),
                    None if b is None or d is None else simplify(ir.Max(b, d))) for (a, b), (c, d) in zip(old, box)]
        self.box[f_name] = box

    def forward_bounds(self) -> None:
        """The box of each Func the output's region needs (its consumers' reads, then what its own
        updates write and read), consumers first."""
        for f in self.funcs:
            stages = self.stages[f.name()]
            for st in stages[1:]:
                self._grow(f.name(), st.args, self._scope(st))
                for c in _calls_in(_all_exprs(st)):
                    if c.func is f:
                        self._grow(f.name(), c.args, self._scope(st))
            for st in stages:
                for c in _calls_in(_all_exprs(st)):
                    if c.func is not f:
                        self._grow(c.func.name(), c.args, self._scope(st))

    def box_of(self, st: _Stage) -> list[tuple[ir.Expr, ir.Expr]]:
        box = self.box.get(st.func.name(), [(None, None)] * len(st.func._pure_args))
        out = []
        for n, (lo, hi) in zip(st.func._pure_args, box):
            if n in st.pure and (lo is None or hi is None):
                raise HalideError(f"propagate_adjoints: can't bound the region of Func {st.func.name()} that the "
                                  f"output needs in dimension {n} (it is read at data-dependent coordinates); "
                                  "its derivative needs that region")
            out.append((lo, hi))
        return out

    # --- deposits ---
    def target_of(self, leaf: ir.Expr) -> tuple[_Target, int]:
        if isinstance(leaf, ir.Variable):
            p = leaf.ref
            key = "param " + p.name()
            if key not in self.targets:
                self.targets[key] = _Target(p.name(), [p.type()], [])
            return self.targets[key], 0
        if leaf.call_type == ir.IMAGE:
            img = leaf.image
            key = "image " + img.name()
            if key not in self.targets:
                self.targets[key] = _Target(img.name(), [img.type()], [_DIM_NAMES[i] if i < 4 else f"v{i}"
                                                                       for i in range(len(leaf.args))])
            return self.targets[key], 0
        f = leaf.func
        if f.name() not in self.targets:
            self.targets[f.name()] = _Target(f.name(), f.types(), list(f._pure_args))
        return self.targets[f.name()], leaf.value_index

    def deposit(self, target: _Target, k: int, args: tuple, weight: ir.Expr, st: _Stage,
                condition: ir.Expr | None = None) -> None:
        """Add `weight` (over st's loop variables) to the target's element k at `args`, wherever st
        runs and `condition` holds."""
        if not target.types[k].is_float():
            return
        box = self.box_of(st)
        names = st.func._pure_args
        bounds = {n: (lo, hi) for n, (lo, hi) in zip(names, box) if n in st.pure}
        for n, (lo, ext) in st.ranges.items():
            bounds[n] = (lo, simplify(ir.Sub(ir.Add(lo, ext), _i(1))))
        loop_vars = [*st.pure, *(v.name for v in st.rvars)]
        guard = _conjunction([st.predicate, condition])
        args = tuple(simplify(a) for a in args)
        if not self._gather(target, k, args, weight, guard, bounds, loop_vars, st):
            self._scatter(target, k, args, weight, guard, bounds, loop_vars, st)

    def _gather(self, target, k, args, weight, guard, bounds, loop_vars, st) -> bool:
        uses = {v: sum(v in expr_free_variables(a) for a in args) for v in loop_vars}
        solved: dict[str, ir.Expr] = {}
        conditions = []
        for u_name, a in zip(target.vars, args):
            u = ir.Variable(u_name)
            for v in loop_vars:
                if uses[v] != 1 or v in solved:
                    continue
                lin = affine_in(a, v)
                if lin is None or lin[0] != 1:
                    continue
                rest = lin[1]
                free = expr_free_variables(rest)
                if any(p in free for p in st.pure) or (v not in st.pure and any(r.name in free for r in st.rvars)):
                    continue
                solved[v] = simplify(ir.Sub(u, rest))
                break
            else:
                free = expr_free_variables(a)
                if any(v in free for v in loop_vars):
                    return False
                conditions.append(ir.EQ(u, a))
        if any(p not in solved and any(p in expr_free_variables(a) for a in args) for p in st.pure):
            return False
        # Solved variables take the point's value, clamped into the stage's domain (so that the
        # partials read only what the forward pipeline reads) and masked to it.
        summed = [v for v in loop_vars if v not in solved]
        # A sum over the stage's own domain (a weight's or a Param's gradient, a dimension the call
        # does not use) is summed in two levels, so that its first level is a Func the schedule can
        # run in parallel and in vectors: over bands of rows (its outermost pure dimension), and
        # with its innermost pure dimension kept as a dimension of that Func.
        pure_summed = [v for v in summed if v in st.pure]
        banded = pure_summed[-1] if pure_summed else None
        kept = pure_summed[0] if len(pure_summed) > 1 else None
        inner = [v for v in summed if v != kept]
        free = {v: ir.Variable(unique_name(v.split("$")[0])) for v in (kept, banded) if v is not None}
        rdom, to_rdom, masks = None, {}, []
        if inner:
            ranges = dict(bounds)
            if banded is not None:
                ranges[banded] = (_i(0), _i(_BAND - 1))
            rdom = _rdom_over(ranges, inner)
            to_rdom = {v: to_ir(rdom[i]) for i, v in enumerate(inner)}
        if banded is not None:  # (the last band's rows past the end read the last row, masked)
            lo, hi = bounds[banded]
            row = ir.Add(lo, ir.Add(ir.Mul(free[banded], _i(_BAND)), to_rdom[banded]))
            to_rdom[banded] = ir.Min(row, hi)
            masks.append(ir.LE(row, hi))
        if kept is not None:
            to_rdom[kept] = free[kept]
        # solved values hold the target's Vars and the RVars summed over (never the stage's pure
        # Vars, whose names the target's may share)
        summed_rvars = {v: e for v, e in to_rdom.items() if v not in st.pure}
        replace = dict(to_rdom)
        for v, e in solved.items():
            e = substitute(summed_rvars, e)
            lo, hi = bounds[v]
            replace[v] = _clamp(e, lo, hi)
            masks.append(_within(e, lo, hi))
        cond = _conjunction([*masks, *conditions, None if guard is None else substitute(replace, guard)])
        term = substitute(replace, weight)
        if cond is not None:
            term = ir.Select(cond, term, _zero(term.type))
        if banded is not None:
            # the first level, a Func over the kept dimension (innermost: the stage's rows are
            # contiguous along it), the band, then the target's Vars; the second sums it
            partial = Func(f"{target.name}_d_partial")
            lhs = [Var(v.name) for v in (*(free[v] for v in (kept, banded) if v is not None),
                                         *(ir.Variable(n) for n in target.vars))]
            partial[lhs] = wrap(_zero(term.type))
            partial[lhs] = partial[lhs] + wrap(term)
            lo, hi = bounds[banded]
            outer = {banded: (_i(0), simplify(ir.Div(ir.Sub(hi, lo), _i(_BAND))))}
            if kept is not None:
                outer = {kept: bounds[kept], **outer}
            rdom = _rdom_over(outer, list(outer))
            term = ir.Call(term.type, partial.name(), (*(to_ir(rdom[i]) for i in range(len(outer))),
                                                       *(ir.Variable(n) for n in target.vars)), ir.HALIDE, 0, partial)
        if rdom is not None:
            term = to_ir(inline_sum(wrap(term)))
        target.gathers[k].append(term)
        return True

    def _scatter(self, target, k, args, weight, guard, bounds, loop_vars, st) -> None:
        rdom = _rdom_over(bounds, loop_vars)
        replace = {v: to_ir(rdom[i]) for i, v in enumerate(loop_vars)}
        if guard is not None:
            rdom.where(wrap(substitute(replace, guard)))
        target.scatters.append((k, tuple(substitute(replace, a) for a in args), substitute(replace, weight)))

    # --- the pass ---
    def run(self) -> dict:
        self.forward_bounds()
        for f in self.funcs:
            target = self.targets.get(f.name())
            if target is None:
                target = self.targets[f.name()] = _Target(f.name(), f.types(), list(f._pure_args))
            stages = self.stages[f.name()]
            n = len(stages) - 1
            adjoint = target.build(f"{f.name()}_{n}_d_def__")
            self.adjoints[(f.name(), n - 1)] = adjoint
            for st in reversed(stages[1:]):
                adjoint = self.update_stage(st, adjoint)
                self.adjoints[(f.name(), st.index - 2)] = adjoint
            self.pure_stage(stages[0], adjoint)
        for key, t in self.targets.items():
            if key.startswith("image ") or key.startswith("param "):
                self.adjoints[(key, -1)] = t.build(f"{t.name}_0_d_def__")
        return self.adjoints

    def written(self, st: _Stage, adjoint: Func) -> list[ir.Expr]:
        return [ir.Call(t, adjoint.name(), st.args, ir.HALIDE, k, adjoint) for k, t in enumerate(adjoint.types())]

    def contribute(self, st: _Stage, seeds: list[ir.Expr], self_value=None, on_self=None) -> None:
        """Deposit the partials of st's values, seeded with the adjoints of what it writes, on the
        Funcs, images and Params it reads; its reads of its own Func go to `on_self`."""
        for value, seed in zip(st.values, seeds):
            for leaf, a in reverse_mode(value, seed):
                if self_value is not None:
                    a = self_value(a)
                if isinstance(leaf, ir.Call) and leaf.call_type == ir.HALIDE and leaf.func is st.func:
                    on_self(leaf, a)
                    continue
                target, k = self.target_of(leaf)
                self.deposit(target, k, () if isinstance(leaf, ir.Variable) else leaf.args, a, st)

    def pure_stage(self, st: _Stage, adjoint: Func) -> None:
        self.contribute(st, self.written(st, adjoint))

    def update_stage(self, st: _Stage, adjoint: Func) -> Func:
        """Deposit what update st reads, and return the adjoint of its Func before it ran."""
        f = st.func
        seeds = self.written(st, adjoint)
        unit = [ir.make_const(_adjoint_type(t), 1) for t in f.types()]
        if self._additive(st, unit):
            self.contribute(st, seeds, on_self=lambda leaf, a: None)
            return adjoint
        extremum = self._extremum(st)
        if extremum is not None:
            return self._extremum_stage(st, adjoint, *extremum)
        self._require_single_writes(st)
        reads, scan = {}, None
        for c in _calls_in(_all_exprs(st)):
            if c.func is f:
                reads[c.args], along = self._classify(st, c)
                if along is not None and scan is not None and along[0].name != scan[0].name:
                    raise HalideError(f"propagate_adjoints: {st.where()} scans along RVars {scan[0].name} and "
                                      f"{along[0].name}; pyhalide reverses scans along one RVar")
                scan = along or scan
        before = _Target(f.name(), f.types(), list(f._pure_args))
        pulled = adjoint
        if scan is not None:
            pulled = self._reverse_scan(st, adjoint, reads, scan)
            seeds = self.written(st, pulled)
        value_of = self._values_seen(st, reads)
        mask = self._mask(st)
        u = [ir.Variable(n) for n in before.vars]
        for k, t in enumerate(f.types()):
            kept = ir.Call(t if t.is_float() else Float(32), pulled.name(), tuple(u), ir.HALIDE, k, pulled)
            before.gathers[k].append(ir.Select(mask, _zero(kept.type), kept))

        def on_self(leaf, a):
            d = reads[leaf.args]
            if d is not None:  # the scan's reads of earlier iterations went to the reverse scan
                rvar, lo, _ = scan
                self.deposit(before, leaf.value_index, leaf.args, a, st,
                             condition=ir.LT(ir.Sub(rvar, _i(d)), lo))
                return
            self.deposit(before, leaf.value_index, leaf.args, a, st)

        self.contribute(st, seeds, self_value=value_of, on_self=on_self)
        return before.build(f"{f.name()}_{st.index - 1}_d_def__")

    # --- kinds of update ---
    def _additive(self, st: _Stage, unit) -> bool:
        """Each value is its own element at the written point plus terms that do not read the Func."""
        for k, (value, seed) in enumerate(zip(st.values, unit)):
            partials = reverse_mode(value, seed)
            selfs = [(leaf, a) for leaf, a in partials
                     if isinstance(leaf, ir.Call) and leaf.call_type == ir.HALIDE and leaf.func is st.func]
            if not all(leaf.args == st.args and leaf.value_index == k for leaf, _ in selfs):
                return False
            total = None
            for _, a in selfs:
                total = a if total is None else ir.Add(total, a)
            if total is None or not ir.is_const(simplify(total), 1):
                return False
            if any(c.func is st.func and c.args != st.args for c in _calls_in(value)):
                return False
            # the partials of the other reads must not see the Func's running value
            if any(c.func is st.func for _, a in partials for c in _calls_in(a)):
                return False
        return True

    def _extremum(self, st: _Stage) -> tuple[bool, ir.Expr] | None:
        """(is_max, e) for a reduction f(p) = max(f(p), e) or min, over RVars that p does not use
        (max pooling, hl.maximum); else None."""
        if len(st.values) != 1 or not st.rvars or not st.values[0].type.is_float():
            return None
        value, f = st.values[0], st.func
        rnames = {v.name for v in st.rvars}
        if not isinstance(value, ir.Max | ir.Min) or any(rnames & expr_free_variables(a) for a in st.args):
            return None
        for own, e in ((value.a, value.b), (value.b, value.a)):
            if isinstance(own, ir.Call) and own.func is f and own.args == st.args and \
                    not any(c.func is f for c in _calls_in(e)):
                return isinstance(value, ir.Max), e
        return None

    def _extremum_stage(self, st: _Stage, adjoint: Func, is_max: bool, e: ir.Expr) -> Func:
        """A max (or min) reduction passes its adjoint to the value that won: the first iteration
        whose e beat everything before it (the value f held before the stage included, which wins
        ties), found by a Tuple reduction in the stage's own order."""
        f = st.func
        prior = self._prefix(f, st.index - 1)
        t = e.type
        pure = [Var(n) for n in st.pure]
        rd = RDom([(wrap(lo), wrap(ext)) for lo, ext in (st.ranges[v.name] for v in st.rvars)])
        to_rd = {v.name: to_ir(rd[i]) for i, v in enumerate(st.rvars)}
        if st.predicate is not None:
            rd.where(wrap(substitute(to_rd, st.predicate)))
        winner = Func(f"{f.name()}_{st.index}_winner")
        start = ir.Call(t, prior.name(), st.args, ir.HALIDE, 0, prior)
        winner[pure] = Tuple([wrap(start), *(wrap(_i(0)) for _ in st.rvars), wrap(_i(0))])
        best = winner[pure]
        candidate = substitute(to_rd, e)
        beats = ir.GT(candidate, to_ir(best[0])) if is_max else ir.LT(candidate, to_ir(best[0]))
        winner[pure] = Tuple([wrap(ir.Select(beats, candidate, to_ir(best[0]))),
                              *(wrap(ir.Select(beats, to_rd[v.name], to_ir(best[i + 1])))
                                for i, v in enumerate(st.rvars)),
                              wrap(ir.Select(beats, _i(1), to_ir(best[len(st.rvars) + 1])))])
        args = tuple(ir.Variable(n) for n in st.pure)
        field = [ir.Call(typ, winner.name(), args, ir.HALIDE, i, winner) for i, typ in enumerate(winner.types())]
        won = _conjunction([ir.EQ(field[-1], _i(1)), *(ir.EQ(v, field[i + 1]) for i, v in enumerate(st.rvars))])
        seed = self.written(st, adjoint)[0]
        for leaf, a in reverse_mode(e, ir.Select(won, seed, _zero(seed.type))):
            target, k = self.target_of(leaf)
            self.deposit(target, k, () if isinstance(leaf, ir.Variable) else leaf.args, a, st)
        # before the stage: where it writes, what f held keeps the adjoint only if nothing beat it
        before = _Target(f.name(), f.types(), list(f._pure_args))
        u = tuple(ir.Variable(n) for n in f._pure_args)
        kept = ir.Call(_adjoint_type(t), adjoint.name(), u, ir.HALIDE, 0, adjoint)
        beaten = ir.EQ(field[-1], _i(1))
        here = _conjunction([ir.EQ(ui, a) for ui, a, n in zip(u, st.args, f._pure_args) if not _is_var(a, n)])
        before.gathers[0].append(ir.Select(beaten if here is None else ir.And(here, beaten), _zero(kept.type), kept))
        return before.build(f"{f.name()}_{st.index - 1}_d_def__")

    def _require_single_writes(self, st: _Stage) -> None:
        """Each iteration of st writes its own point: every RVar moves one coordinate one-for-one."""
        rnames = {v.name for v in st.rvars}
        for v in st.rvars:
            ok = False
            for a in st.args:
                lin = affine_in(simplify(a), v.name)
                if lin is not None and abs(lin[0]) == 1 and not rnames & expr_free_variables(lin[1]):
                    ok = True
            if not ok:
                raise HalideError(
                    f"propagate_adjoints: {st.where()} may write a point more than once (RVar {v.name} does not "
                    "move one coordinate one-for-one) and is not an additive reduction (f(x) += ...), so the "
                    "value each write replaced is lost. Write the intermediate values into a Func with one more "
                    "dimension (a scan, f(x, r + 1) = ... f(x, r) ...) instead")

    def _classify(self, st: _Stage, leaf: ir.Call) -> tuple[int | None, tuple | None]:
        """(None, None): the read sees what the Func held before st (it reads the point st is
        writing, or one st does not write before this iteration); (d, (rvar, min, extent)), d >= 1:
        it reads what the iteration d before along rvar wrote."""
        if not st.rvars or leaf.args == st.args:
            return None, None
        names = [v.name for v in st.rvars]
        deltas = [_difference(a, b, names) for a, b in zip(leaf.args, st.args)]
        diffs = [i for i, d in enumerate(deltas) if d != 0]
        if not diffs:
            return None, None
        if len(diffs) == 1:
            i = diffs[0]
            delta = deltas[i]
            for v in st.rvars:
                lin = affine_in(simplify(st.args[i]), v.name)
                if delta is not None and lin is not None and abs(lin[0]) == 1:
                    d = -delta * lin[0]  # the read is the point written at v - d
                    return (d, (v, *st.ranges[v.name])) if d >= 1 else (None, None)
            written_by_stage = any(v.name in expr_free_variables(st.args[i]) for v in st.rvars)
            if delta is not None and not written_by_stage:
                return None, None  # the stage writes one value of that coordinate and this reads another
        raise HalideError(
            f"propagate_adjoints: {st.where()} reads {st.func.name()}({', '.join(str(wrap(a)) for a in leaf.args)}) "
            f"while writing {st.func.name()}({', '.join(str(wrap(a)) for a in st.args)}): pyhalide differentiates "
            "updates that read the point they write, points they never write, or a scan's earlier iterations "
            "along one RVar")

    def _values_seen(self, st: _Stage, reads: dict):
        """Rewrites partials to read the Func as the stage saw it: before the stage, or (along a scan)
        as the stage left it."""
        f = st.func
        before, after = self._prefix(f, st.index - 1), self._prefix(f, st.index)

        def seen(c: ir.Call) -> Func:
            d = reads.get(c.args)
            return after if d is not None else before

        return _RedirectCalls(f, seen).mutate

    def _prefix(self, f: Func, last: int) -> Func:
        """f as it is once stage `last` has run (f itself after its last stage)."""
        if last == len(f.definitions()) - 1:
            return f
        key = (f.name(), last)
        if key not in self.prefixes:
            p = Func(f"{f.name()}_until_{last}")
            redirect = _RedirectCalls(f, lambda c: p).mutate
            defs = f.definitions()[: last + 1]
            p._pure_args = f._pure_args
            p._init = defs[0]
            p._updates = [Definition(tuple(redirect(a) for a in d.args), tuple(redirect(v) for v in d.values),
                                     d.rvars, None if d.predicate is None else redirect(d.predicate))
                          for d in defs[1:]]
            p._schedule.reset_stages(len(defs))
            self.prefixes[key] = p
        return self.prefixes[key]

    def _mask(self, st: _Stage) -> ir.Expr:
        """Over the adjoint's Vars: true where st writes."""
        f = st.func
        u = [ir.Variable(n) for n in f._pure_args]  # (the adjoint's Vars are f's)
        if not st.rvars:
            terms = [ir.EQ(ui, a) for ui, a, n in zip(u, st.args, f._pure_args) if not _is_var(a, n)]
            if st.predicate is not None:
                terms.append(st.predicate)
            cond = _conjunction(terms)
            return ir.make_const(ir.Bool(), True) if cond is None else cond
        m = Func(f"{f.name()}_{st.index}_written")
        m[[Var(n) for n in f._pure_args]] = wrap(ir.make_const(ir.Bool(), False))
        replace = {}
        ranges = [st.ranges[v.name] for v in st.rvars]
        rd = RDom([(wrap(lo), wrap(ext)) for lo, ext in ranges])
        for i, v in enumerate(st.rvars):
            replace[v.name] = to_ir(rd[i])
        if st.predicate is not None:
            rd.where(wrap(substitute(replace, st.predicate)))
        m[[wrap(substitute(replace, a)) for a in st.args]] = wrap(ir.make_const(ir.Bool(), True))
        return ir.Call(ir.Bool(), m.name(), tuple(u), ir.HALIDE, 0, m)

    def _reverse_scan(self, st: _Stage, adjoint: Func, reads: dict, scan: tuple) -> Func:
        """The adjoint of what each iteration of st writes: what later stages and consumers gave it,
        plus what the iterations that read it along the scan pass back, accumulated last iteration
        first."""
        f = st.func
        v, lo, ext = scan
        d_f = Func(f"{f.name()}_{st.index}_d_scan__")
        lhs = [Var(n) for n in f._pure_args]
        u = tuple(ir.Variable(n) for n in f._pure_args)
        vals = [wrap(ir.Call(t, adjoint.name(), u, ir.HALIDE, k, adjoint)) for k, t in enumerate(adjoint.types())]
        d_f[lhs] = vals[0] if len(vals) == 1 else Tuple(vals)
        # the reverse scan: iteration v' runs the stage's iteration lo + ext - 1 - v'
        others = [w for w in st.rvars if w.name != v.name]
        rd = RDom([(wrap(lo), wrap(ext)), *((wrap(st.ranges[w.name][0]), wrap(st.ranges[w.name][1])) for w in others)])
        rev = {v.name: ir.Sub(ir.Add(lo, ir.Sub(ext, _i(1))), ir.Sub(to_ir(rd[0]), lo))}
        for i, w in enumerate(others):
            rev[w.name] = to_ir(rd[i + 1])
        site = tuple(substitute(rev, a) for a in st.args)
        written = [ir.Call(t, d_f.name(), st.args, ir.HALIDE, k, d_f) for k, t in enumerate(d_f.types())]
        value_of = self._values_seen(st, reads)
        scans = {a: d for a, d in reads.items() if d is not None}
        incoming: list[ir.Expr | None] = [None] * len(written)
        for value, seed in zip(st.values, written):
            for leaf, a in reverse_mode(value, seed):
                if not (isinstance(leaf, ir.Call) and leaf.func is f and leaf.args in scans):
                    continue
                d = scans[leaf.args]
                # the iteration d later, clamped into the RDom so that what it reads stays in bounds
                last = ir.Sub(ir.Add(lo, ext), _i(1))
                later = {v.name: ir.Min(ir.Add(v, _i(d)), last)}
                ok = ir.LE(ir.Add(v, _i(d)), last)
                if st.predicate is not None:
                    ok = ir.And(ok, substitute(later, st.predicate))
                term = substitute(later, value_of(a))
                term = ir.Select(ok, term, _zero(term.type))
                k = leaf.value_index
                incoming[k] = term if incoming[k] is None else ir.Add(incoming[k], term)
        updated = []
        for k, t in enumerate(d_f.types()):
            cur = ir.Call(t, d_f.name(), site, ir.HALIDE, k, d_f)
            updated.append(wrap(cur if incoming[k] is None else ir.Add(cur, substitute(rev, incoming[k]))))
        d_f[[wrap(a) for a in site]] = updated[0] if len(updated) == 1 else Tuple(updated)
        return d_f


class _RedirectCalls(IRMutator):
    """Calls to Func f become calls to choose(call), another Func of the same shape."""

    def __init__(self, f: Func, choose):
        super().__init__()
        self.f, self.choose = f, choose

    def visit_Call(self, c):
        args = tuple(self.mutate(a) for a in c.args)
        if c.call_type == ir.HALIDE and c.func is self.f:
            g = self.choose(c)
            return ir.Call(c.type, g.name(), args, ir.HALIDE, c.value_index, g)
        return ir.Call(c.type, c.name, args, c.call_type, c.value_index, c.func, c.image)


def _calls_in(exprs) -> list[ir.Call]:
    """The calls to Funcs in an Expr or a list of them."""
    exprs = exprs if isinstance(exprs, list | tuple) else [exprs]
    return [c for e in exprs for c in _calls(e) if c.call_type == ir.HALIDE]


def _all_exprs(st: _Stage) -> list[ir.Expr]:
    return [*st.values, *(st.args if st.index > 0 else ()), *([st.predicate] if st.predicate is not None else [])]


def _consumers_first(output: Func) -> list[Func]:
    """Every Func the output calls, each after all of its consumers."""
    from .call_graph import algorithm_funcs, called_funcs, loop_exprs

    funcs = algorithm_funcs([output])
    callees = {}
    for f in funcs:
        exprs = [e for d in f.definitions() for e in loop_exprs(d) if e is not None]
        callees[f.name()] = [g for g in called_funcs(exprs).values() if g is not f]
    order, seen = [], set()

    def visit(f):
        if f.name() in seen:
            return
        seen.add(f.name())
        for g in callees[f.name()]:
            visit(g)
        order.append(f)

    visit(output)
    return list(reversed(order))


# ---------------------------------------------------------------- the user's interface
class Derivative:
    """The adjoints propagate_adjoints made: `d[f]` (with respect to f's pure definition),
    `d[f, i]` (with respect to f after update i), `d[buffer]`, `d[param]`."""

    def __init__(self, adjoints: dict):
        self._adjoints = adjoints

    def __getitem__(self, key) -> Func:
        update_id = -1
        if isinstance(key, tuple):
            if len(key) != 2 or not isinstance(key[0], Func) or not isinstance(key[1], int):
                raise HalideError(f"Derivative[...] takes a Func, (Func, update index), a Buffer or a Param, "
                                  f"got {key!r}")
            key, update_id = key
        from .buffer import Buffer

        if isinstance(key, Func):
            name = key.name()
            if not -1 <= update_id < key.num_update_definitions():
                raise HalideError(f"Derivative: Func {name} has {key.num_update_definitions()} update definitions; "
                                  f"no update {update_id}")
        elif isinstance(key, Buffer | ImageParam):
            name = "image " + key.name()
        elif isinstance(key, Param):
            name = "param " + key.name()
        elif isinstance(key, str):
            name = key
        else:
            raise HalideError(f"Derivative[...] takes a Func, (Func, update index), a Buffer or a Param, got {key!r}")
        found = self._adjoints.get((name, update_id))
        if found is None:
            what = name.split(" ", 1)[-1]
            raise HalideError(f"Derivative: the output does not depend on {what}, so it has no adjoint")
        return found

    __call__ = __getitem__


def _region(output: Func, bounds) -> list[tuple[ir.Expr, ir.Expr]]:
    if len(bounds) != output.dimensions():
        raise HalideError(f"propagate_adjoints: {len(bounds)} bounds given for Func {output.name()}, which has "
                          f"{output.dimensions()} dimensions")
    out = []
    for b in bounds:
        lo, hi = (b.min, b.extent) if hasattr(b, "extent") and not isinstance(b, tuple | list) else tuple(b)
        out.append((ir.Cast(_I32, to_ir(lo)) if to_ir(lo).type != _I32 else to_ir(lo),
                    ir.Cast(_I32, to_ir(hi)) if to_ir(hi).type != _I32 else to_ir(hi)))
    return out


def propagate_adjoints(output: Func, adjoint=None, bounds=None) -> Derivative:
    """Back-propagate an adjoint of `output` to every Func, Buffer, ImageParam and Param it depends
    on (Halide's propagate_adjoints). Forms, as Halide's:
    propagate_adjoints(f): f is a loss, its adjoint 1 at the origin;
    propagate_adjoints(f, buffer): the adjoint is the buffer, over the buffer's region;
    propagate_adjoints(f, adjoint_func, bounds): bounds are (min, max) pairs, inclusive, as in
    Halide's Region for this call."""
    from .buffer import Buffer

    if not isinstance(output, Func) or not output.defined():
        raise HalideError("propagate_adjoints takes a defined Func as its output")
    if not any(t.is_float() for t in output.types()):
        raise HalideError(f"propagate_adjoints: Func {output.name()} has no float values to differentiate")
    if adjoint is None:
        if bounds is not None:
            raise HalideError("propagate_adjoints(output, adjoint, bounds): the bounds need an adjoint Func")
        one = Func("adjoint")
        ones = [wrap(ir.make_const(_adjoint_type(t), 1)) for t in output.types()]
        one[[Var(n) for n in output._pure_args]] = ones[0] if len(ones) == 1 else Tuple(ones)
        region = [(_i(0), _i(0)) for _ in range(output.dimensions())]
        adjoint_func = one
    elif isinstance(adjoint, Buffer):
        if bounds is not None:
            raise HalideError("propagate_adjoints(output, buffer) takes no bounds: the buffer's are used")
        if adjoint.dimensions() != output.dimensions():
            raise HalideError(f"propagate_adjoints: the adjoint buffer has {adjoint.dimensions()} dimensions, Func "
                              f"{output.name()} has {output.dimensions()}")
        adjoint_func = Func(f"{adjoint.name()}_adjoint")
        vs = [Var() for _ in range(adjoint.dimensions())]
        adjoint_func[vs] = adjoint[vs]
        region = [(_i(adjoint.dim(i).min()), _i(adjoint.dim(i).min() + adjoint.dim(i).extent() - 1))
                  for i in range(adjoint.dimensions())]
    elif isinstance(adjoint, Func):
        if bounds is None:
            raise HalideError("propagate_adjoints(output, adjoint_func, bounds): give the bounds, (min, max) per "
                              "dimension")
        if adjoint.dimensions() != output.dimensions():
            raise HalideError(f"propagate_adjoints: the adjoint Func has {adjoint.dimensions()} dimensions, Func "
                              f"{output.name()} has {output.dimensions()}")
        adjoint_func, region = adjoint, _region(output, bounds)
    else:
        raise HalideError(f"propagate_adjoints: the adjoint must be a Func or a Buffer, got {adjoint!r}")
    if len(adjoint_func.types()) != len(output.types()):
        raise HalideError(f"propagate_adjoints: the adjoint has {len(adjoint_func.types())} values, Func "
                          f"{output.name()} has {len(output.types())}")
    return Derivative(_Backprop(output, adjoint_func, region).run())


__all__ = ["Derivative", "propagate_adjoints"]
