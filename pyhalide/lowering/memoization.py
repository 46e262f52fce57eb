"""Memoized Funcs (Func.memoize): each production first asks the memoization cache for the values
(pyhalide/memoization.py) and runs only where it has none, then gives it what it computed.

The key is what the values depend on, as Halide's: the Func in this compilation (as Halide's, a
pipeline compiled again, for a new schedule or a new Pipeline, keeps entries of its own: their
storage may be laid out differently, and Buffers the algorithm names are not keyed on), the box
realized, the Params its definitions and those of the Funcs it reads use, the buffer dimensions
they use, and memoize_tag's tags (the value itself, where it has none) instead of what a tagged
value reads. Halide refuses a memoized computation that reads an input image (an ImageParam)
outside a memoize_tag, whose key would miss it.

Runs after storage flattening: each buffer's `min`, `extent` and `stride` are defined there.
"""

from __future__ import annotations

import itertools

from .. import ir
from ..errors import CompileError
from ..extern import CALL_EXTERN, EXTERN_IMAGE, make_buffer
from ..integer_ops import MEMOIZE_TAG
from ..ir_mutator import IRMutator, IRVisitor
from ..ir_printer import expr_to_string
from ..memoization import LOOKUP, STORE
from ..param import ImageParam, Param
from ..types import Float, Int, UInt
from .bounds_inference import buffer_field, buffer_names
from .environment import definition_exprs

_I32, _I64, _F64 = Int(32), Int(64), Float(64)
_compilations = itertools.count()  # each lowering's memoized Funcs are its own (see the module's docstring)


def _check_memoized(env) -> None:
    """Refuse what Halide refuses to memoize: a Func computed inline (it has no production), an
    output, and a Func stored elsewhere than it is computed (its cache entry would be a part of
    its storage)."""
    for f in env.funcs.values():
        if not f._schedule.memoized:
            continue
        name = env.user_names.get(f.name(), f.name())
        if f.name() in env.inlined:
            raise CompileError(f"Cannot memoize function {name} because the function is scheduled inline.")
        if env.is_output(f):
            raise CompileError(f"Can't compile Pipeline with memoized output Func: {name}. Memoization is valid only "
                               "on intermediate Funcs because it takes control of buffer allocation.")
        store = f._schedule.store_level
        if store is not None and store != f._schedule.compute_level:
            raise CompileError(f"Function {name} cannot be memoized because it has compute and storage scheduled "
                               "at different loop levels.")


def inject_memoization(stmt: ir.Stmt, env, cache: bool) -> ir.Stmt:
    """stmt with the memoized Funcs' productions going through the cache; without `cache` (code
    for another process: ahead of time, or the GPU), only checked, computed every time."""
    _check_memoized(env)
    memoized = {f.name(): f for f in env.order if f._schedule.memoized}
    if not memoized or not cache:
        return stmt
    compilation = next(_compilations)
    keys = {name: _key(env, f, compilation) for name, f in memoized.items()}
    return _Inject(keys, memoized).mutate(stmt)


class _Dependencies(IRVisitor):
    """What some definitions' values depend on, as Halide's memoization finds it: the Params and
    buffer dimensions they read (by name), the tags of their memoize_tags (not what those tag),
    the input images they read (any buffer an extern stage is given) and the Funcs they call."""

    def __init__(self):
        super().__init__()
        self.keys: dict[str, ir.Variable] = {}
        self.tags: list[ir.Expr] = []
        self.images: set[str] = set()
        self.funcs: dict[str, object] = {}
        self.loop_variables: set[str] = set()

    def visit_Variable(self, v):
        if v.ref is None:
            self.loop_variables.add(v.name)
        elif isinstance(v.ref, Param) or hasattr(v.ref, "dimensions") and not hasattr(v.ref, "rvars") \
                and not v.type.is_handle():
            self.keys.setdefault(v.name, v)

    def visit_Call(self, c):
        if c.call_type == ir.INTRINSIC and c.name == MEMOIZE_TAG:
            self.tags.extend(c.args[1:] or c.args[:1])
            return
        if c.call_type == ir.INTRINSIC and c.name == EXTERN_IMAGE:  # a buffer an extern stage is given
            self.images.add(c.args[2].name.rsplit(".", 2)[0])
            return
        if c.call_type == ir.HALIDE:
            self.funcs.setdefault(c.name, c.func)
        elif c.call_type == ir.IMAGE and isinstance(c.image, ImageParam):
            self.images.add(c.name)
        self.visit_children(c)


def _key(env, f, compilation: int) -> tuple[str, list[ir.Expr]]:
    """(the identity of f's values, the key values besides its box) of memoized Func f."""
    reads = _Dependencies()
    pending, seen = [f], {f.name()}
    while pending:
        g = pending.pop()
        for e in getattr(g, "_tagged_exprs", None) or definition_exprs(g):
            reads.visit(e)
        for name, h in reads.funcs.items():
            if name not in seen:
                seen.add(name)
                pending.append(h)
    who = env.user_names.get(f.name(), f.name())
    for name in sorted(reads.images):
        raise CompileError(f"Buffer parameter {name} encountered in computed_cached computation.\n"
                           "Computations which depend on buffer parameters cannot be scheduled compute_cached.\n"
                           f"Use memoize_tag to provide cache key information for buffer. (Func {who} is memoized.)")
    for t in reads.tags:
        tag_reads = _Dependencies()
        tag_reads.visit(t)
        if tag_reads.loop_variables or tag_reads.funcs or tag_reads.images:
            raise CompileError(f"memoize_tag in Func {who}'s computation: a tag is part of a cache key, so it may "
                               f"read Params but not a Func, an image or a loop variable; {expr_to_string(t)} does")
    values = [reads.keys[n] for n in sorted(reads.keys)] + reads.tags
    return f"{who}#{compilation}", [_widened(v) for v in values]


def _widened(e: ir.Expr) -> ir.Expr:
    """A key value as int64 or float64 (exactly: every narrower type converts without loss)."""
    t = e.type
    if t.is_float():
        return e if t.bits == 64 else ir.Cast(_F64, e)
    if t == UInt(64):
        return ir.Reinterpret(_I64, e)
    return e if t == _I64 else ir.Cast(_I64, e)


class _Inject(IRMutator):
    statements_only = True

    def __init__(self, keys: dict, funcs: dict):
        super().__init__()
        self.keys, self.funcs = keys, funcs
        self.sites = itertools.count()

    def visit_ProducerConsumer(self, pc):
        pc = self.default(pc)
        if not pc.is_producer or pc.name not in self.keys:
            return pc
        f = self.funcs[pc.name]
        identity, values = self.keys[pc.name]
        names = buffer_names(f)
        box = [buffer_field(names[0], field, d) for d in range(len(f._pure_args)) for field in ("min", "extent")]
        site = next(self.sites)

        def buffers(what: str) -> list[ir.Expr]:
            return [make_buffer(f"{name}.memoized_{what}{site}", name, t, ir.make_const(_I32, 0),
                                [tuple(buffer_field(name, field, d) for field in ("min", "extent", "stride"))
                                 for d in range(len(f._pure_args))])
                    for name, t in zip(names, f.types())]

        # (each site's functions are named apart: their signatures differ with the key)
        key = [ir.StringImm(identity), *(_widened(b) for b in box), *values]
        lookup = ir.Call(_I32, CALL_EXTERN, (ir.StringImm(f"{LOOKUP}{site}"), ir.StringImm("memoize lookup"), *key,
                                             *buffers("lookup")), ir.INTRINSIC)
        eviction = f._schedule.eviction_key
        evict = [ir.make_const(_I64, 0 if eviction is None else 1),
                 ir.make_const(_I64, 0) if eviction is None else _widened(eviction)]
        store = ir.Call(_I32, CALL_EXTERN, (ir.StringImm(f"{STORE}{site}"), ir.StringImm("memoize store"), key[0],
                                            *evict, *key[1:], *buffers("store")), ir.INTRINSIC)
        hit = f"{pc.name}.cache_hit{site}"
        # A production skip_stages guards (`produce f { if (f.used) ... }`) asks the cache only
        # where it runs: what it skips is not computed, so not kept either.
        body, guard = pc.body, None
        if isinstance(body, ir.IfThenElse) and body.else_case is None:
            body, guard = body.then_case, body.condition
        # The production's trace events (trace_realizations) are printed on a hit too, as Halide's.
        stmts = list(body.stmts) if isinstance(body, ir.Block) else [body]
        head = [stmts.pop(0)] if stmts and _is_trace(stmts[0]) else []
        tail = [stmts.pop()] if stmts and _is_trace(stmts[-1]) else []
        missed = ir.EQ(ir.Variable(hit, _I32), ir.make_const(_I32, 0))
        cached = ir.LetStmt(hit, lookup, ir.IfThenElse(missed, ir.make_block([*stmts, ir.Evaluate(store)]), None))
        body = ir.make_block([*head, cached, *tail])
        return ir.ProducerConsumer(pc.name, True, body if guard is None else ir.IfThenElse(guard, body))


def _is_trace(s: ir.Stmt) -> bool:
    return isinstance(s, ir.Evaluate) and isinstance(s.value, ir.Call) and s.value.name == "trace"
