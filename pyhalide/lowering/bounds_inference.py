"""Bounds inference: define every `f.s<k>.<var>.min/.max`, the region each stage computes.

Assumes: the nest from schedule_functions, with inlining done. Funcs are processed consumers
first. At f's compute site the region f must compute is the box of its calls in its consume body,
written in terms of variables in scope there: loops and lets inside the body become intervals.
For a Func with updates each stage also covers what the later stages read of it within their own
regions, as Halide's (an update's region shrinks along the chain: a stencil iterated by updates
computes a trapezoid); what a split runs past them uses f's storage, uncomputed. Where the later
stages write is not computed for them (storage covers it: allocation_bounds). The
lets of Funcs computed at root go at the top of the pipeline (so their producers' boxes refer to
them by name); those of Funcs computed inside loops go just before their production. Realize
sizes and buffer checks come later (allocation_bounds, buffer_checks): sliding window still moves
what each iteration computes.

An extern stage's region is what its function's bounds queries say (lets that call it, run where
they are: pyhalide/extern.py): at its site, the first query widens the region its consumers need,
the second says what it reads of each Func input, whose box is then that. Where the stage is
computed inside loops, the queries are also made for all iterations, at root and at the site of
each Func input computed outside those loops, and each iteration's answers are kept inside those
(as Halide keeps them); a Func input computed inside the stage's own loops is computed for a
query of the part of the stage's region the calls there write.
"""

from __future__ import annotations

from .. import ir
from ..bounds import Interval, RequiredRegion, box_touched, box_union
from ..errors import CompileError, InternalError
from ..extern import BUFFER_FIELD, CALL_EXTERN, extern_call, make_buffer
from ..ir_mutator import IRMutator, IRVisitor, called_names, substitute
from ..simplify import simplify
from ..types import Handle, Int
from .environment import compute_level
from .schedule_functions import dim_bound, query_bound, stage_dims

_I32 = Int(32)
_ONE = ir.make_const(_I32, 1)


def buffer_names(f) -> list[str]:
    """Names of the buffers holding f's values: f itself, or f.0, f.1 ... for Tuples."""
    n = len(f.types())
    return [f.name()] if n == 1 else [f"{f.name()}.{k}" for k in range(n)]


def buffer_field(buffer: str, field: str, dim: int) -> ir.Variable:
    return ir.Variable(f"{buffer}.{field}.{dim}", _I32)


def require_bounded(f, dim_name: str, iv: Interval | None, who: str) -> Interval:
    if iv is None or iv.min is None or iv.max is None:
        side = "below" if iv is not None and iv.min is None else "above"
        raise CompileError(
            f"Can't infer the region of {f.name()} required by {who}: dimension {dim_name} is unbounded "
            f"{side}. Clamp the coordinates used to access {f.name()}."
        )
    return iv


def _is_compute_block(s, name: str) -> bool:
    """`produce f; consume f`, or a fused group's `produce p {produce f {...}}; consume ...`."""
    if not (isinstance(s, ir.Block) and len(s.stmts) == 2):
        return False
    produce = s.stmts[0]
    while isinstance(produce, ir.ProducerConsumer) and produce.is_producer:
        if produce.name == name:
            return True
        produce = produce.body
    return False


class _ComputeSites(IRVisitor):
    """Find f's `produce; consume` blocks and compute f's bounds at each, noting the innermost
    loop around it (None at root), where the lets will go."""

    statements_only = True

    def __init__(self, f, env):
        super().__init__()
        self.f, self.env = f, env
        self.loops: list[ir.For] = []
        self.sites: list[tuple] = []  # (loop or None, lets, checks)

    def visit_For(self, s):
        self.loops.append(s)
        self.visit_children(s)
        self.loops.pop()

    def visit_Block(self, s):
        if not _is_compute_block(s, self.f.name()):
            self.visit_children(s)
            return
        produce, consume = s.stmts
        lets, checks = _func_lets(self.f, self.env, produce, consume, {loop.name for loop in self.loops},
                                  self.loops[-1] if self.loops else None)
        self.sites.append((self.loops[-1] if self.loops else None, lets, checks))


class _InsertAtLoopTop(IRMutator):
    """Add lets (and checks) at the end of the chain of lets that opens a loop's body.

    Funcs computed at the same loop share one chain, consumers first: a producer's bounds then
    name its consumers' bounds instead of repeating their expressions, which keeps the IR linear
    in the number of stages."""

    statements_only = True

    def __init__(self, loop: ir.For, lets, checks):
        super().__init__()
        self.loop, self.lets, self.checks = loop, lets, checks

    def visit_For(self, s):
        if s is not self.loop:
            return self.default(s)
        return ir.For(s.name, s.min, s.extent, s.for_type, _append_lets(s.body, self.lets, self.checks))


def _append_lets(body, lets, checks):
    chain = []
    while isinstance(body, ir.LetStmt):
        chain.append((body.name, body.value))
        body = body.body
    if checks:  # not flattened into body: a `produce f; consume f` Block there stays one (_is_compute_block)
        body = ir.Block((*checks, body))
    for name, value in reversed(chain + list(lets)):
        body = ir.LetStmt(name, value, body)
    return body


def _func_lets(f, env, produce, consume, outer_loops, site):
    """The lets defining f's required region and its stages' loop bounds, and checks of bound()."""
    name = f.name()
    lets: list[tuple[str, ir.Expr]] = _outer_extern_queries(f, env, consume.body, outer_loops)
    box, read = _required_box(consume.body, name, outer_loops)
    checks: list[ir.Stmt] = []
    for d, var in enumerate(f._pure_args):
        iv = box[d] if box is not None else None
        if env.is_output(f):
            out = buffer_names(f)[0]
            lo = buffer_field(out, "min", d)
            hi = ir.Sub(ir.Add(lo, buffer_field(out, "extent", d)), _ONE)
            if iv is not None:
                iv = require_bounded(f, var, iv, "the other outputs")
                lo, hi = ir.Min(lo, iv.min), ir.Max(hi, iv.max)
            iv = Interval(lo, hi)
        elif iv is None:
            raise CompileError(f"Func {name} is computed but never used where it is computed")
        iv = require_bounded(f, var, iv, "its consumers")
        iv, extra = _apply_bound_directive(f, var, iv)
        checks.extend(extra)
        lo, hi = simplify(iv.min), simplify(iv.max)
        width = simplify(ir.Sub(hi, lo))
        if ir.const_int(width) is not None:
            # a constant-size region: say so, so loop extents over it simplify to constants
            hi = ir.Add(ir.Variable(f"{name}.{var}.min", _I32), width)
        lets.append((f"{name}.{var}.min", lo))
        lets.append((f"{name}.{var}.max", hi))
    req = {v: (ir.Variable(f"{name}.{v}.min", _I32), ir.Variable(f"{name}.{v}.max", _I32)) for v in f._pure_args}
    call = extern_call(f)
    if call is not None:
        return lets + _extern_stage_lets(f, call, [req[v] for v in f._pure_args], produce, site, checks), checks
    # Each stage covers what its consumers need and what the later stages of f read;
    # the later stages' loops use their own bounds, so they are defined first (last stage first).
    n_stages = len(f.definitions())
    stages = env.fused_stages.get(name) or (produce.body.stmts if n_stages > 1 else (produce.body,))
    for s in range(n_stages - 1, -1, -1):
        footprint = None
        if s + 1 < n_stages:
            # Within the later stages' regions only: as in Halide, what an update's split runs
            # past its region (RoundUp) reads and writes f's storage there, uncomputed.
            later = ir.make_block(stages[s + 1:])
            required = RequiredRegion()
            footprint = box_touched(later, name, required=required)
            if required.clamped:
                read = box_union(read, box_touched(later, name))
        # (a specialization rfactored on its own may loop over more of f's pure Vars)
        pure_dims = list(dict.fromkeys(v for t, d in f.all_scheduled_definitions() if t == s
                                       for v, pure in stage_dims(f, s, d) if pure))
        for var in pure_dims:
            lo, hi = req[var]
            if footprint is not None:
                iv = require_bounded(f, var, footprint[f._pure_args.index(var)], "its own update definitions")
                lo, hi = simplify(ir.Min(lo, iv.min)), simplify(ir.Max(hi, iv.max))
            lets.append((dim_bound(f, s, var, "min").name, lo))
            lets.append((dim_bound(f, s, var, "max").name, hi))
    if read is not None and not env.is_output(f):
        # stages also read f past that region: its storage covers what they read (allocation bounds)
        env.read_past_region.add(name)
        for var, iv in zip(f._pure_args, read):
            iv = require_bounded(f, var, iv, "its consumers")
            lets.append((read_bound(name, var, "min").name, simplify(iv.min)))
            lets.append((read_bound(name, var, "max").name, simplify(iv.max)))
    return lets, checks


def _where_produced(stmt, name: str) -> str | None:
    """"top" where stmt produces `name` outside its loops, "loop" inside one, None where it does not."""

    class Find(IRVisitor):
        statements_only = True
        found, loops = None, 0

        def visit_For(self, s):
            self.loops += 1
            self.visit_children(s)
            self.loops -= 1

        def visit_ProducerConsumer(self, pc):
            if pc.is_producer and pc.name == name and self.found is None:
                self.found = "loop" if self.loops else "top"
            self.visit_children(pc)

    finder = Find()
    finder.visit(stmt)
    return finder.found


def _bounds_query(g, call, tag: str, region, lets: list) -> dict:
    """One bounds query of extern stage g (Halide's): its function called with its Func inputs
    and outputs as buffers without memory, the outputs over `region` ((min, max) per dimension).
    Appends the lets to `lets`; returns, per buffer argument slot (the outputs after the
    arguments), the (min, max) per dimension the function left in it. Lets named after `tag`."""
    zero = ir.make_const(_I32, 0)
    args, buffers = [], {}
    for slot, a in enumerate(call.args):
        if isinstance(a, ir.Call) and a.call_type == ir.HALIDE:
            buffers[slot] = (f"{tag}.input{slot}", len(a.args))
            lets.append((buffers[slot][0], make_buffer(buffers[slot][0], "", a.type, zero,
                                                       [(zero, zero, zero)] * len(a.args))))
            args.append(ir.Variable(buffers[slot][0], Handle()))
        else:
            args.append(a)
    for k, t in enumerate(g.types()):
        slot = len(call.args) + k
        buffers[slot] = (f"{tag}.output{k}", len(region))
        lets.append((buffers[slot][0], make_buffer(buffers[slot][0], "", t, zero,
                                                   [(lo, ir.Add(ir.Sub(hi, lo), _ONE), zero) for lo, hi in region])))
        args.append(ir.Variable(buffers[slot][0], Handle()))
    result = ir.Variable(f"{tag}.result", _I32)
    lets.append((result.name, ir.Call(_I32, CALL_EXTERN, (ir.StringImm(call.name), ir.StringImm("query"), *args),
                                      ir.INTRINSIC)))
    answers = {}
    for slot, (buffer, dims) in buffers.items():
        answers[slot] = []
        for d in range(dims):
            lo, extent = (ir.Call(_I32, BUFFER_FIELD, (ir.Variable(buffer, Handle()), ir.make_const(_I32, d),
                                                       ir.StringImm(field), result), ir.INTRINSIC)
                          for field in ("min", "extent"))
            lo_var, hi_var = ir.Variable(f"{buffer}.min.{d}", _I32), ir.Variable(f"{buffer}.max.{d}", _I32)
            lets.append((lo_var.name, lo))
            lets.append((hi_var.name, ir.Sub(ir.Add(lo_var, extent), _ONE)))
            answers[slot].append((lo_var, hi_var))
    return answers


def _widened(g, call, tag: str, required, lets: list, within=None) -> list:
    """Halide's first bounds query: the region extern stage g computes where `required` is needed
    (the function may widen it), moved down where it passes the max of `within` (the region a
    query outside the loops around it widened to, as Halide moves it)."""
    widened = _bounds_query(g, call, f"{tag}.widen", required, lets)[len(call.args)]
    if within is None:
        return widened
    shifts = [ir.Min(ir.make_const(_I32, 0), ir.Sub(o_hi, hi)) for (_, o_hi), (_, hi) in zip(within, widened)]
    return [(ir.Add(lo, s), ir.Add(hi, s)) for (lo, hi), s in zip(widened, shifts)]


def _input_regions(g, call, tag: str, region, lets: list) -> dict:
    """Halide's second bounds query: what extern stage g needs of each Func input (per slot,
    (min, max) per dimension) to compute `region`."""
    if not call.func_inputs():
        return {}
    answers = _bounds_query(g, call, f"{tag}.inputs", region, lets)
    return {slot: answers[slot] for slot, _ in call.func_inputs()}


def _extern_stage_lets(g, call, required, produce, site, checks: list) -> list:
    """The lets of extern stage g at its compute site (the loop `site`, None at root): its bounds
    queries for the region its consumers need, the region it computes (`g.s0.<var>`: what the
    first query widened that to, checked to still cover it) and the region of each Func input it
    reads (query_bound). An input computed outside `site` is computed once for all iterations,
    for what queries made there for all of them asked (_outer_extern_queries); each iteration's
    request is clamped into that, as Halide clamps it: the function gets what was computed."""
    within = None
    if site is not None:  # the region the queries for all iterations of the loops around widened to
        within = [(ir.Variable(f"{_root_tag(g)}.widen.output0.min.{d}", _I32),
                   ir.Variable(f"{_root_tag(g)}.widen.output0.max.{d}", _I32)) for d in range(len(required))]
    lets = []
    computed = _widened(g, call, f"{g.name()}.query", required, lets, within)
    if within is not None:  # (and inside it: its storage, outside these loops maybe, is sized for that)
        computed = [tuple(ir.Max(ir.Min(e, o_hi), o_lo) for e in (lo, hi)) for (lo, hi), (o_lo, o_hi)
                    in zip(computed, within)]
    for d, (var, (lo, hi), (c_lo, c_hi)) in enumerate(zip(g._pure_args, required, computed)):
        lets.append((dim_bound(g, 0, var, "min").name, c_lo))
        lets.append((dim_bound(g, 0, var, "max").name, c_hi))
        checks.append(ir.AssertStmt(ir.And(ir.LE(c_lo, lo), ir.GE(c_hi, hi)),
                                    f"The bounds query of extern stage {g.name()} ({call.name}) gave it the region "
                                    f"[{{}}, {{}}] to compute in dimension {d}, which does not cover the [{{}}, {{}}] "
                                    "its consumers need", (c_lo, c_hi, lo, hi)))
    # its own loops may call it past that region (a split wider than it): the inputs cover those calls
    written = box_touched(produce, g.name(), include_provides=True, include_calls=False)
    region = [(iv.min, iv.max) for iv in
              (require_bounded(g, v, written[d], "its own loops") for d, v in enumerate(g._pure_args))]
    inputs = _input_regions(g, call, f"{g.name()}.query", region, lets)
    for slot, bounds in inputs.items():
        a = call.args[slot]
        outer = site is not None and _where_produced(site.body, a.name) is None
        for d, (lo, hi) in enumerate(bounds):
            if site is not None:  # as Halide: clamped into what the queries for all iterations asked for
                if outer:  # (those made where the input is computed, which computes that)
                    o_lo, o_hi = (outer_query_bound(g, slot, d, which) for which in ("min", "max"))
                else:
                    o_lo, o_hi = (ir.Variable(f"{_root_tag(g)}.inputs.input{slot}.{which}.{d}", _I32)
                                  for which in ("min", "max"))
                lo, hi = ir.Max(ir.Min(lo, o_hi), o_lo), ir.Max(ir.Min(hi, o_hi), o_lo)
            lets.append((query_bound(g, slot, d, "min").name, lo))
            lets.append((query_bound(g, slot, d, "max").name, hi))
    return lets


def _production_of(stmt, name: str) -> ir.ProducerConsumer:
    """The production of `name` in stmt."""

    class Find(IRVisitor):
        statements_only = True
        found = None

        def visit_ProducerConsumer(self, pc):
            if pc.is_producer and pc.name == name:
                self.found = pc
            elif self.found is None:
                self.visit_children(pc)

    finder = Find()
    finder.visit(stmt)
    return finder.found


def _root_tag(g) -> str:
    """The names of the queries of extern stage g, computed inside loops, made for all of them."""
    return f"{g.name()}.root_query"


def _outer_tag(g, f_name: str) -> str:
    """The names of the queries of extern stage g made at the site of its input f, outside the
    loops g is computed in."""
    return f"{g.name()}.outer_query.{f_name}"


def outer_query_bound(g, slot: int, d: int, which: str) -> ir.Variable:
    return ir.Variable(f"{g.name()}.outer_query.input{slot}.{which}.{d}", _I32)


def _outer_extern_queries(f, env, consume_body, outer_loops) -> list[tuple[str, ir.Expr]]:
    """For each extern stage that reads f and is computed inside a loop in consume_body: its bounds
    queries at f's site, for the box its consumers need over those loops, which say the region
    of f to compute (outer_query_bound) for all its iterations. For each that reads f in loops of
    its own around f's site: its query for the part of its region calls inside f's site write,
    which says what f computes there and what the calls get of it (query_bound, here)."""
    lets = []
    for g in env.order:
        call = extern_call(g)
        if call is None or not any(a.name == f.name() for _, a in call.func_inputs()):
            continue
        where = _where_produced(consume_body, g.name())
        if where is None:
            written = box_touched(consume_body, g.name(), include_provides=True, include_calls=False)
            if written is None:
                continue
            region = [(iv.min, iv.max) for iv in
                      (require_bounded(g, v, written[d], "its calls") for d, v in enumerate(g._pure_args))]
            inputs = _input_regions(g, call, f"{g.name()}.part_query.{f.name()}", region, lets)
            for slot, bounds in inputs.items():
                if call.args[slot].name == f.name():
                    for d, (lo, hi) in enumerate(bounds):
                        lets.append((query_bound(g, slot, d, "min").name, lo))
                        lets.append((query_bound(g, slot, d, "max").name, hi))
            continue
        if where != "loop":
            continue
        _, inputs = _queries_over_loops(g, call, _outer_tag(g, f.name()), consume_body, outer_loops, lets)
        for slot, bounds in inputs.items():
            if call.args[slot].name == f.name():
                for d, (lo, hi) in enumerate(bounds):
                    lets.append((outer_query_bound(g, slot, d, "min").name, lo))
                    lets.append((outer_query_bound(g, slot, d, "max").name, hi))
    return lets


def _queries_over_loops(g, call, tag: str, stmt, outer_loops, lets: list) -> tuple[list, dict]:
    """The bounds queries of extern stage g, computed inside loops of stmt, for all their
    iterations: the box its consumers need over those loops, widened by the first query (returned),
    and what the second says it needs of its Func inputs (per slot, returned) for that region and
    what g's own loops write past it (a split wider than the region)."""
    box, _ = _required_box(stmt, g.name(), outer_loops)
    if box is None:
        raise CompileError(f"Func {g.name()} is computed but never used where it is computed")
    required = [(iv.min, iv.max) for iv in
                (require_bounded(g, v, box[d], "its consumers") for d, v in enumerate(g._pure_args))]
    widened = _widened(g, call, tag, required, lets)
    own = box_touched(_production_of(stmt, g.name()), g.name(), include_provides=True, include_calls=False)
    at_widened = {dim_bound(g, 0, v, which).name: bound for v, (lo, hi) in zip(g._pure_args, widened)
                  for which, bound in (("min", lo), ("max", hi))}
    region = [(substitute(at_widened, iv.min), substitute(at_widened, iv.max)) for iv in
              (require_bounded(g, v, own[d], "its own loops") for d, v in enumerate(g._pure_args))]
    return widened, _input_regions(g, call, tag, region, lets)


def read_bound(func: str, var: str, which: str) -> ir.Variable:
    """The box that f's consumers read of it, where they read past the region f computes."""
    return ir.Variable(f"{func}.{var}.read_{which}", _I32)


def _required_box(stmt, name: str, outer_loops):
    """The box of `name` that stmt's stages use within their own regions (the region `name` must
    compute), and, where they also read it past that box (bounds.WITHIN_REGION), the box they
    read (else None)."""
    required = RequiredRegion()
    box = box_touched(stmt, name, required=required, outer_loops=outer_loops)
    if not required.clamped:
        return box, None
    read = box_touched(stmt, name, outer_loops=outer_loops)
    return box, (read if read != box else None)


def _apply_bound_directive(f, var: str, needed: Interval):
    """bound / bound_extent / align_bounds / align_extent: the region to compute instead, and the checks that the
    consumers' needs fit inside it."""
    directive = f._schedule.bounds.get(var)
    if directive is None:
        return needed, []
    kind, a, b = directive
    if kind == "align":
        modulus, remainder = ir.make_const(_I32, a), ir.make_const(_I32, b)
        lo = ir.Add(ir.Mul(ir.Div(ir.Sub(needed.min, remainder), modulus), modulus), remainder)
        hi = ir.Sub(ir.Add(ir.Mul(ir.Div(ir.Add(ir.Sub(needed.max, remainder), modulus), modulus), modulus),
                           remainder), _ONE)
        return Interval(lo, hi), []
    if kind == "align_extent":
        modulus = ir.make_const(_I32, a)
        chunks = ir.Div(ir.Add(ir.Sub(needed.max, needed.min), modulus), modulus)
        return Interval(needed.min, ir.Sub(ir.Add(needed.min, ir.Mul(chunks, modulus)), _ONE)), []
    if kind == "bound":
        lo = a
        hi = ir.Sub(ir.Add(a, b), _ONE)
    else:  # bound_extent
        lo = needed.min
        hi = ir.Sub(ir.Add(needed.min, b), _ONE)
    checks = [
        ir.AssertStmt(ir.GE(needed.min, lo), f"Bounds given for {f.name()} in {var} (from {{}} to {{}}) do not "
                      f"cover required region (from {{}} to {{}})", (lo, hi, needed.min, needed.max)),
        ir.AssertStmt(ir.LE(needed.max, hi), f"Bounds given for {f.name()} in {var} (from {{}} to {{}}) do not "
                      f"cover required region (from {{}} to {{}})", (lo, hi, needed.min, needed.max)),
    ]
    return Interval(lo, hi), checks


class _CallsOutside(IRVisitor):
    """Is f called anywhere outside the loops it is computed in (`loops`, by name; none when it
    is computed at root), or outside its Realize? A use between the loop f is stored at and the
    one it is computed in reads what no iteration has computed yet (as Halide, refused)."""

    def __init__(self, name: str, loops: frozenset[str]):
        super().__init__()
        self.name, self.loops, self.found = name, loops, False
        self.in_realize, self.in_loop = False, not loops

    def visit(self, node):
        if self.found or isinstance(node, ir.Expr) and self.name not in called_names(node):
            return
        super().visit(node)

    def visit_Realize(self, r):
        if r.name != self.name or self.in_realize:
            self.visit_children(r)
            return
        self.in_realize = True
        self.visit_children(r)
        self.in_realize = False

    def visit_For(self, s):
        if s.name not in self.loops or self.in_loop:
            self.visit_children(s)
            return
        self.in_loop = True
        self.visit_children(s)
        self.in_loop = False

    def visit_Call(self, c):
        if c.call_type == ir.HALIDE and c.name == self.name and not (self.in_realize and self.in_loop):
            self.found = True
        self.visit_children(c)


def bounds_inference(stmt: ir.Stmt, env) -> ir.Stmt:
    top_lets: list[tuple[str, ir.Expr]] = []
    checks: list[ir.Stmt] = []
    for f in reversed(env.order):
        finder = _ComputeSites(f, env)
        finder.visit(stmt)
        if not finder.sites:
            raise InternalError(f"bounds inference: no production of {f.name()} in the loop nest")
        for loop, lets, site_checks in finder.sites:
            if loop is None:
                top_lets.extend(lets)
                checks.extend(site_checks)
            else:
                stmt = _InsertAtLoopTop(loop, lets, site_checks).mutate(stmt)
        call = extern_call(f)
        if call is not None and any(loop is not None for loop, _, _ in finder.sites):
            # as Halide: queries for all iterations, which each iteration's are kept inside
            _queries_over_loops(f, call, _root_tag(f), stmt, frozenset(), top_lets)
        if not env.is_output(f):
            loops = frozenset(loop.name for loop, _, _ in finder.sites if loop is not None)
            outside = _CallsOutside(f.name(), frozenset() if len(loops) < len(finder.sites) else loops)
            outside.visit(stmt)
            if outside.found:
                raise CompileError(
                    f"Func {f.name()} is computed at {compute_level(f, env)}, but it is also used outside that loop. "
                    "Compute it at a level that encloses all its uses (or at root).")
    body = ir.make_block([*checks, stmt])
    for name, value in reversed(top_lets):
        body = ir.LetStmt(name, value, body)
    return body
