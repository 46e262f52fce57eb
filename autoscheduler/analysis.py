"""What the search needs to know about an algorithm, worked out once before searching.

For every Func the outputs reach: its dimensions, types and stages; for every stage, the work per
point (operations by kind) and, for every Func or input it reads, the box of coordinates it reads
as a function of the box the stage iterates over. The boxes come from pyhalide's own interval
analysis (`pyhalide.bounds`), done symbolically once per access and then compiled to small Python
closures, so that the loop-nest model can evaluate them for thousands of candidate loop nests
without touching the compiler again.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field

from pyhalide import ir
from pyhalide.bounds import Interval, bounds_of_expr
from pyhalide.call_graph import bound_exprs, call_graph, loop_exprs, wrapper_for
from pyhalide.errors import HalideError
from pyhalide.ir_mutator import children, free_variables, substitute
from pyhalide.pipeline import Pipeline
from pyhalide.simplify import simplify

# ------------------------------------------------------------------ numeric closures


class _Unbounded(Exception):
    """An expression the closures can't evaluate (a data-dependent bound)."""


def _floordiv(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return a / b if b else 0.0
    if b == 0:
        return 0
    q = a // b if b > 0 else -((-a) // b)  # Euclidean: the remainder is never negative
    if b < 0 and a - q * b < 0:
        q += 1
    return q


def _euclid_mod(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return math.fmod(a, b) if b else 0.0
    if b == 0:
        return 0
    return a % abs(b)


_BINARY = {
    ir.Add: operator.add, ir.Sub: operator.sub, ir.Mul: operator.mul, ir.Div: _floordiv,
    ir.Mod: _euclid_mod, ir.Min: min, ir.Max: max,
    ir.EQ: operator.eq, ir.NE: operator.ne, ir.LT: operator.lt, ir.LE: operator.le,
    ir.GT: operator.gt, ir.GE: operator.ge,
    ir.And: lambda a, b: bool(a) and bool(b), ir.Or: lambda a, b: bool(a) or bool(b),
}


def compile_expr(e: ir.Expr):
    """A function env -> number computing `e` from the values of its free variables in env (a
    dict); raises _Unbounded for what it can't compute."""
    if isinstance(e, ir.IntImm | ir.FloatImm):
        v = e.value
        return lambda env: v
    if isinstance(e, ir.Variable):
        name = e.name
        return lambda env: env[name]
    op = _BINARY.get(type(e))
    if op is not None:
        fa, fb = compile_expr(e.a), compile_expr(e.b)
        return lambda env: op(fa(env), fb(env))
    if isinstance(e, ir.Not):
        fa = compile_expr(e.a)
        return lambda env: not fa(env)
    if isinstance(e, ir.Select):
        fc, ft, ff = compile_expr(e.condition), compile_expr(e.true_value), compile_expr(e.false_value)
        return lambda env: ft(env) if fc(env) else ff(env)
    if isinstance(e, ir.Cast):
        fv = compile_expr(e.value)
        if e.type.is_float():
            return lambda env: float(fv(env))
        return lambda env: int(fv(env))  # float -> int truncates, as in Halide
    if isinstance(e, ir.Let):
        fv, fb, name = compile_expr(e.value), compile_expr(e.body), e.name
        return lambda env: fb({**env, name: fv(env)})
    if isinstance(e, ir.Call) and e.call_type == ir.EXTERN and e.name in ("floor", "ceil", "round", "trunc"):
        fn = {"floor": math.floor, "ceil": math.ceil, "round": round, "trunc": math.trunc}[e.name]
        fa = compile_expr(e.args[0])
        return lambda env: fn(fa(env))
    if isinstance(e, ir.Call) and e.call_type == ir.INTRINSIC and e.name == "likely":
        return compile_expr(e.args[0])
    raise _Unbounded(type(e).__name__)


GATHER = float("inf")


def lo_name(var: str) -> str:
    return f"{var}.lo$"


def hi_name(var: str) -> str:
    return f"{var}.hi$"


# ------------------------------------------------------------------ per-stage facts


@dataclass
class Access:
    """What one stage reads of one producer (a Func, or an input by name)."""

    producer: str
    is_input: bool
    count: int  # call sites: loads per point of the stage
    box: list  # per producer dimension: (lo closure, hi closure), or None when unbounded
    stride: float = 1.0  # elements apart along the producer's dimension 0 (GATHER: a lane at a time)
    data_dependent: bool = False  # the coordinate along dimension 0 depends on loaded values
    invariant: frozenset = frozenset()  # the stage's loop variables the box does not depend on
    in_bounds_of_rdom: bool = False  # read by the RDom's bounds, before the stage's loops
    # the box moves one for one with the loops (x + c, not x / 2 or 2x): its size is the same at
    # every iteration, so a block of it has constant bounds (a downsample's or upsample's depend
    # on a parity bounds inference does not know, and round outwards)
    unit: bool = True
    # the boxes of groups of call sites whose coordinates follow different loop variables (a
    # product's A[k, y] beside A[x, k], a channel c beside the alpha channel 3), where there are
    # several: what they read lies apart, and the cache lines are those of each group's box, not
    # of the box bounding them all (a matmul reading one Func as both operands was charged 1e13
    # bytes from L3: the box from (k, k) to (x, y) in every iteration of k)
    parts: list = field(default_factory=list)


@dataclass
class StageInfo:
    func: str
    index: int  # 0: the pure definition; i: update i - 1
    pure_dims: list  # the Func's dimensions this stage iterates over as pure loops (names)
    rvars: list  # (name, min closure, extent closure), innermost first
    ops: int  # cheap arithmetic per point
    expensive: int  # divisions, modulo by a variable, transcendental calls, per point
    accesses: list = field(default_factory=list)
    self_loads: int = 0  # reads of the Func itself (an update's accumulator)
    scatter: bool = False  # an update whose left-hand coordinates depend on loaded values (a histogram's bin)
    # loop_nest.stage_loops' results for this stage, by its other arguments (the search asks
    # again and again: local_laplacian's asks 33,000 times for 7,600 different loop nests)
    loops_memo: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass
class FuncInfo:
    name: str
    func: object
    dims: list  # pure argument names, innermost (dimension 0) first
    bytes_per_point: int  # all tuple values together
    max_bits: int  # the widest value type: sets the natural vector width
    is_output: bool
    stages: list = field(default_factory=list)
    consumers: dict = field(default_factory=dict)  # consumer name -> set of stage indices (None: RDom bounds)


def _is_power_of_two_const(e) -> bool:
    return isinstance(e, ir.IntImm) and e.value > 0 and not e.value & (e.value - 1)


def count_ops(exprs) -> tuple[int, int]:
    """(cheap operations, expensive ones) of expressions, each shared node counted once (as the
    code generator's value numbering would)."""
    ops = expensive = 0
    seen: set[int] = set()
    stack = [e for e in exprs if e is not None]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, ir.Div | ir.Mod) and not isinstance(n.b, ir.IntImm | ir.FloatImm):
            expensive += 1
        elif isinstance(n, ir.Div | ir.Mod) and not _is_power_of_two_const(n.b) and not n.type.is_float():
            ops += 3  # a multiply, a shift and a correction
        elif isinstance(n, ir.BinaryOp | ir.Select | ir.Not | ir.Cast):
            ops += 1
        elif isinstance(n, ir.Call):
            if n.call_type == ir.EXTERN:
                expensive += 4
            elif n.call_type == ir.INTRINSIC:
                ops += 1
        stack.extend(children(n))
    return ops, expensive


def _call_sites(exprs) -> list[ir.Call]:
    """Every distinct Func or input call in exprs (each is a load; a call repeated with the same
    arguments, such as Sxx(x, y) in both det and trace, is loaded once after value numbering),
    with the values of the lets around it in its arguments (a definition names its repeated
    subexpressions, see pyhalide/cse.py; the box a call reads needs what they stand for)."""
    out = []
    seen: set = set()
    stack = [(e, {}) for e in exprs if e is not None]
    while stack:
        n, lets = stack.pop()
        if isinstance(n, ir.Let):
            stack.append((n.value, lets))
            stack.append((n.body, {**lets, n.name: substitute(lets, n.value)}))
            continue
        if isinstance(n, ir.Call) and n.call_type in (ir.HALIDE, ir.IMAGE):
            args = tuple(substitute(lets, a) for a in n.args)
            key = (n.name, args)
            if key in seen:
                continue
            seen.add(key)
            out.append(n if args == n.args else ir.Call(n.type, n.name, args, n.call_type, n.value_index,
                                                        n.func, n.image))
        stack.extend((c, lets) for c in children(n))
    return out


def _interval_closures(iv: Interval):
    if iv is None or not iv.is_bounded():
        return None
    try:
        return compile_expr(simplify(iv.min)), compile_expr(simplify(iv.max))
    except _Unbounded:
        return None


class Analysis:
    """The algorithm as the search sees it: FuncInfos by name, consumers first in `order`, plus
    the values of Params and input extents (from estimates) that the closures read.

    Funcs go by Pipeline.funcs_by_name's names (a second `Func("f")` made in this process is `f`
    here if the pipeline has no other), so decisions, records and the printed source name Funcs
    as the same program built in any process does."""

    def __init__(self, outputs, env: dict, input_shapes: dict):
        graph = call_graph(outputs)
        self.canonical = Pipeline(list(outputs))._canonical_names()  # Func.name() -> name here
        canon = self.name_of
        self.env = dict(env)  # Param values and ImageParam fields, by name
        self.input_shapes = input_shapes  # input name -> [(min, extent)] per dimension
        self.input_bytes: dict[str, int] = {}
        output_names = {canon(f.name()) for f in outputs}
        self.funcs: dict[str, FuncInfo] = {}
        for own in graph.order:
            f, name = graph.funcs[own], canon(own)
            types = f.types()
            self.funcs[name] = FuncInfo(
                name, f, [a.name() for a in f.args()], sum(t.bytes() for t in types),
                max(t.bits for t in types), name in output_names,
                consumers={canon(g): set(s) for g, s in graph.callers.get(own, {}).items()},
            )
        self.order = [canon(n) for n in graph.order]
        for name in self.order:
            self._analyse_stages(self.funcs[name])
        self.clones = self._clones()

    def _clones(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        """The Funcs clone_in made: the clone's name -> (the Func cloned, the consumers that call
        the clone), read from the cloned Funcs' schedule logs."""
        out = {}
        for name in self.order:
            schedule = self.funcs[name].func._schedule
            for _, method, args in schedule.log:
                if method != "clone_in":
                    continue
                consumers = [ref["func"] for ref in args[0]]
                clone = schedule.wrappers.get(consumers[0])
                if clone is not None and self.name_of(clone.name()) in self.funcs:
                    out[self.name_of(clone.name())] = (name, tuple(self.name_of(c) for c in consumers))
        return out

    def name_of(self, func_name: str) -> str:
        """The name here of the Func named func_name (its own name: Func.name())."""
        return self.canonical.get(func_name, func_name)

    def inputs_always_in_bounds(self, output_regions: dict) -> bool:
        """Whether every read of an input stays inside it however large a region is computed
        (boundary conditions clamp them all): then computing beyond a region is harmless. An
        output without updates is never computed beyond its buffer (its tails shift inwards), so
        its own reads are checked over its region."""
        for info in self.funcs.values():
            exact = info.is_output and len(info.stages) == 1 and info.name in output_regions
            for st in info.stages:
                env = dict(self.env)
                for v in st.pure_dims:
                    if exact:
                        mn, ext = output_regions[info.name][info.dims.index(v)]
                        env[lo_name(v)], env[hi_name(v)] = mn, mn + ext - 1
                    else:
                        env[lo_name(v)], env[hi_name(v)] = -(1 << 20), 1 << 20
                for name, mn, ext in st.rvars:
                    lo = mn(self.env)
                    env[lo_name(name)], env[hi_name(name)] = lo, lo + ext(self.env) - 1
                for acc in st.accesses:
                    if not acc.is_input:
                        continue
                    shape = self.input_shapes.get(acc.producer)
                    if shape is None or acc.box is None:
                        return False
                    for b, (mn, ext) in zip(acc.box, shape):
                        try:
                            if b is None or b[0](env) < mn or b[1](env) > mn + ext - 1:
                                return False
                        except (KeyError, ZeroDivisionError, TypeError, ValueError):
                            return False
        return True

    def _analyse_stages(self, info: FuncInfo) -> None:
        f = info.func
        for s, d in enumerate(f.scheduled_definitions()):
            if s == 0:
                pure = list(info.dims)
            else:
                pure = [a.name for a, dim in zip(d.args, info.dims) if isinstance(a, ir.Variable) and a.name == dim]
            rvars = []
            scope: dict[str, Interval] = {}
            for rv in d.rvars:
                mn = self._closure(rv.min, f"the RDom {rv.name} of {info.name}")
                ext = self._closure(rv.extent, f"the RDom {rv.name} of {info.name}")
                rvars.append((rv.name, mn, ext))
                scope[rv.name] = Interval(ir.Variable(lo_name(rv.name)), ir.Variable(hi_name(rv.name)))
            for dim in pure:
                scope[dim] = Interval(ir.Variable(lo_name(dim)), ir.Variable(hi_name(dim)))
            # Non-pure left-hand dimensions (a histogram's bin) are not loops; their coordinates
            # come from the right-hand side.
            ops, expensive = count_ops(loop_exprs(d))
            stage = StageInfo(info.name, s, pure, rvars, ops, expensive,
                              scatter=s > 0 and bool(_call_sites(list(d.args))))
            sites = _call_sites(loop_exprs(d))
            grouped: dict[str, list] = {}
            for c in sites:
                if c.call_type == ir.HALIDE and c.name == f.name():
                    stage.self_loads += 1
                    continue
                key = self.name_of(wrapper_for(c.func, f).name()) if c.call_type == ir.HALIDE else c.name
                grouped.setdefault(key, []).append(c)
                if c.call_type == ir.IMAGE:
                    self.input_bytes[c.name] = c.type.bytes()
            for producer, calls in grouped.items():
                stage.accesses.append(self._access(stage, producer, calls, scope))
            for c in _call_sites(bound_exprs(d)):
                key = self.name_of(wrapper_for(c.func, f).name()) if c.call_type == ir.HALIDE else c.name
                if c.call_type == ir.IMAGE:
                    self.input_bytes[c.name] = c.type.bytes()
                acc = Access(key, c.call_type == ir.IMAGE, 0, [None] * len(c.args), in_bounds_of_rdom=True)
                stage.accesses.append(acc)
            info.stages.append(stage)

    def _closure(self, e, what: str):
        try:
            fn = compile_expr(simplify(e))
            fn(self.env)  # every Param it reads has a value
            return fn
        except (_Unbounded, KeyError) as err:
            raise HalideError(f"autoscheduler: can't estimate {what} ({e}): give the Params and inputs "
                              f"it depends on estimates ({err})") from None

    def _access(self, stage: StageInfo, producer: str, calls: list, scope) -> Access:
        acc = Access(producer, calls[0].call_type == ir.IMAGE, len(calls), self._box(calls, scope))
        groups: dict = {}
        loop_vars = set(scope)
        for c in calls:
            groups.setdefault(tuple(frozenset(free_variables(a) & loop_vars) for a in c.args), []).append(c)
        if len(groups) > 1 and all(b is not None for b in acc.box):
            acc.parts = [self._box(g, scope) for g in groups.values()]
            if any(b is None for part in acc.parts for b in part):
                acc.parts = []
        # a loaded value in dimension 0's coordinate makes a gather; elsewhere (a table lookup
        # of the row, say) it is the same for every lane of a vector along dimension 0
        acc.data_dependent = any(_call_sites(c.args[:1]) for c in calls)
        self._classify(stage, acc)
        return acc

    @staticmethod
    def _box(calls: list, scope) -> list:
        """Per dimension, closures of the bounds of what the calls read, or None (unbounded)."""
        per_dim = []
        for k in range(len(calls[0].args)):
            ivs = [bounds_of_expr(c.args[k], scope) for c in calls]
            if any(iv is None or not iv.is_bounded() for iv in ivs):
                per_dim.append(None)
                continue
            closures = [_interval_closures(iv) for iv in ivs]
            if any(c is None for c in closures):
                per_dim.append(None)
                continue
            if len(closures) == 1:
                per_dim.append(closures[0])
            else:
                los, his = [c[0] for c in closures], [c[1] for c in closures]
                per_dim.append((lambda env, los=los: min(f(env) for f in los),
                                lambda env, his=his: max(f(env) for f in his)))
        return per_dim

    def _classify(self, stage: StageInfo, acc: Access) -> None:
        """How the access walks memory along the stage's dimension 0 (dense, strided, or a
        gather), and which loop variables it does not depend on, found by evaluating its box
        over small probe boxes."""
        loop_vars = list(stage.pure_dims) + [r[0] for r in stage.rvars]
        base = dict(self.env)
        for v in stage.pure_dims:
            base[lo_name(v)], base[hi_name(v)] = 8, 8
        for name, mn, _ in stage.rvars:
            lo = mn(self.env)
            base[lo_name(name)], base[hi_name(name)] = lo, lo

        def widths(env):
            out = []
            for b in acc.box:
                try:
                    out.append(None if b is None else b[1](env) - b[0](env))
                except (KeyError, ZeroDivisionError, TypeError):
                    out.append(None)
            return out

        w0 = widths(base)
        known = None not in w0 and bool(w0)
        invariant = set()
        acc.stride = 1.0
        acc.unit = known
        for v in loop_vars:
            probe = dict(base)
            probe[hi_name(v)] = probe[lo_name(v)] + 7
            w = widths(probe)
            if known and w == w0:
                invariant.add(v)
            if known and (None in w or any(a - b not in (0, 7) for a, b in zip(w, w0))):
                acc.unit = False
            if stage.pure_dims and v == stage.pure_dims[0]:
                if not known or None in w:
                    acc.stride = GATHER
                else:
                    growth = [a - b for a, b in zip(w, w0)]
                    # 8 points along x: a span of about 8 in the producer's dimension 0 and no
                    # wider elsewhere is dense; up to 4 (an upsample, a broadcast) is cheaper
                    # still; a downsample is strided; anything else is a gather
                    if all(g <= 1 for g in growth[1:]) and growth[0] <= 9:
                        acc.stride = 1.0
                    elif all(g <= 1 for g in growth[1:]) and growth[0] <= 30:
                        acc.stride = growth[0] / 7.0
                    else:
                        acc.stride = GATHER
        if any(b is None for b in acc.box) or acc.data_dependent:
            acc.stride = GATHER
            acc.unit = False
        acc.invariant = frozenset(invariant)
