"""Memoized Funcs (Func.memoize): each production first asks the memoization cache for the values
(pyhalide/memoization.py) and runs only where it has none, then gives it what it computed.

The key is what the values depend on, as Halide's: the Func (its name in the user's process and
a digest of its definitions and loops and those of every Func it reads), the box realized, the
Params those definitions read and the tags of their memoize_tag calls. Halide refuses a memoized computation
that reads an input image (an ImageParam) outside a memoize_tag, whose key would miss it; Buffers
the algorithm names are not keyed on, as in Halide.

Runs after storage flattening: each buffer's `min`, `extent` and `stride` are defined there.
"""

from __future__ import annotations

import hashlib
import itertools

from .. import ir
from ..errors import CompileError
from ..extern import CALL_EXTERN, make_buffer
from ..ir_mutator import IRMutator, IRVisitor
from ..ir_printer import expr_to_string
from ..memoization import LOOKUP, STORE
from ..param import OutputImageParam, Param
from ..types import Float, Int, UInt
from .bounds_inference import buffer_field, buffer_names
from .environment import definition_exprs

_I32, _I64, _F64 = Int(32), Int(64), Float(64)


def _check_memoized(env) -> None:
    """Refuse what Halide refuses to memoize: an output, and a Func stored elsewhere than it is
    computed (its cache entry would be a part of its storage)."""
    for f in env.funcs.values():
        if not f._schedule.memoized:
            continue
        name = env.user_names.get(f.name(), f.name())
        if env.is_output(f):
            raise CompileError(f"Function {name} cannot be memoized because it an output of pipeline "
                               f"{env.outputs[0].name()}.")
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
    return _Inject({name: _key(env, f) for name, f in memoized.items()}, memoized).mutate(stmt)


class _Dependencies(IRVisitor):
    """The Params, input images, Funcs and loop variables some definitions read."""

    def __init__(self):
        super().__init__()
        self.params: dict[str, ir.Variable] = {}
        self.images: set[str] = set()
        self.funcs: dict[str, object] = {}
        self.loop_variables: set[str] = set()

    def visit_Variable(self, v):
        if v.ref is None:
            self.loop_variables.add(v.name)
        elif isinstance(v.ref, OutputImageParam):
            self.images.add(v.name.rsplit(".", 2)[0])
        elif isinstance(v.ref, Param):
            self.params.setdefault(v.name, v)

    def visit_Call(self, c):
        if c.call_type == ir.HALIDE:
            self.funcs.setdefault(c.name, c.func)
        elif c.call_type == ir.IMAGE and isinstance(c.image, OutputImageParam):
            self.images.add(c.name)
        self.visit_children(c)


def _key(env, f) -> tuple[str, list[ir.Expr]]:
    """(the identity of f's values, the key values besides its box) of memoized Func f."""
    reads, digest, tags = _Dependencies(), hashlib.sha256(), []
    exempt: set[str] = set()
    pending, seen = [f], {f.name()}
    while pending:
        g = pending.pop()
        exprs = list(definition_exprs(g))
        # (the loops too: a schedule that reassociates a float reduction computes other values)
        digest.update(f"{g.name()}({','.join(g._pure_args)}):{';'.join(map(expr_to_string, exprs))}"
                      f"{g._schedule.stages!r}\n".encode())
        for e in exprs:
            reads.visit(e)
        for tag_values, read_inside in getattr(g, "_memoize_tags", ()):
            tags.extend(tag_values)
            exempt |= read_inside
        for name, h in reads.funcs.items():
            if name not in seen:
                seen.add(name)
                pending.append(h)
    for name in sorted(reads.images - exempt):
        raise CompileError(f"Buffer parameter {name} encountered in computed_cached computation.\n"
                           "Computations which depend on buffer parameters cannot be scheduled compute_cached.\n"
                           "Use memoize_tag to provide cache key information for buffer. "
                           f"(Func {env.user_names.get(f.name(), f.name())} is memoized.)")
    for t in tags:
        tag_reads = _Dependencies()
        tag_reads.visit(t)
        if tag_reads.loop_variables or tag_reads.funcs:
            raise CompileError(f"memoize_tag in Func {env.user_names.get(f.name(), f.name())}'s computation: a tag "
                               f"is part of a cache key, so it may read Params but not a Func or a loop variable; "
                               f"{expr_to_string(t)} does")
    values = [reads.params[n] for n in sorted(reads.params) if n not in exempt] + tags
    identity = f"{env.user_names.get(f.name(), f.name())}:{digest.hexdigest()[:32]}"
    return identity, [_widened(v) for v in values]


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

        key = [ir.StringImm(identity), *(_widened(b) for b in box), *values]
        lookup = ir.Call(_I32, CALL_EXTERN, (ir.StringImm(LOOKUP), ir.StringImm("memoize lookup"), *key,
                                             *buffers("lookup")), ir.INTRINSIC)
        eviction = f._schedule.eviction_key
        evict = [ir.make_const(_I64, 0 if eviction is None else 1),
                 ir.make_const(_I64, 0) if eviction is None else _widened(eviction)]
        store = ir.Call(_I32, CALL_EXTERN, (ir.StringImm(STORE), ir.StringImm("memoize store"), key[0], *evict,
                                            *key[1:], *buffers("store")), ir.INTRINSIC)
        hit = f"{pc.name}.cache_hit{site}"
        computed = ir.Block((pc, ir.Evaluate(store)))
        return ir.LetStmt(hit, lookup, ir.IfThenElse(ir.EQ(ir.Variable(hit, _I32), ir.make_const(_I32, 0)),
                                                     computed, None))
