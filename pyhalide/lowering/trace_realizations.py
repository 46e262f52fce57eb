"""Trace realizations: the events Halide's trace_realizations prints, with each Realize's box.

Assumes: allocation bounds have sized every Realize (its box is what Halide's realization events
print, whatever sliding window made each production compute), and the pure stages' bounds lets
(`f.s0.x.min` ...) are final. Guarantees: for each Func f traced with trace_realizations,
`Begin realization f.0(min, extent, ...)` / `End realization ...` around its Realize, with its
box (an output's go around the whole pipeline, from tracing.py); `Produce f.0(...)` /
`End produce f.0(...)` around each production and, unless f is an output, `Consume f.0(...)` /
`End consume f.0(...)` around what reads it, with the box its pure stage computes there (after
sliding window), as Halide prints them.
"""

from __future__ import annotations

from .. import ir
from ..ir_mutator import IRMutator
from ..types import Int
from .tracing import in_user_names, trace_event

_I32 = Int(32)


class _Realizations(IRMutator):
    statements_only = True

    def __init__(self, traced: dict, outputs: set[str], user_names: dict[str, str]):
        super().__init__()
        self.traced, self.outputs = traced, outputs  # traced: name -> the Func
        self.user_names = user_names

    def event(self, what: str, box) -> ir.Stmt:
        return in_user_names(trace_event(what, box), self.user_names)

    def visit_Realize(self, s):
        if s.name not in self.traced:
            return self.default(s)
        box = [x for lo, ext in s.bounds for x in (lo, ext)]
        body = ir.make_block([self.event(f"Begin realization {s.name}.0", box), self.mutate(s.body),
                              self.event(f"End realization {s.name}.0", box)])
        return ir.Realize(s.name, s.types, s.bounds, body, s.func, s.folds)

    def visit_ProducerConsumer(self, s):
        body = self.mutate(s.body)
        if s.name not in self.traced or (not s.is_producer and s.name in self.outputs):
            return s if body is s.body else ir.ProducerConsumer(s.name, s.is_producer, body)
        box = []
        for arg in self.traced[s.name]._pure_args:  # the region of the pure stage (as Halide)
            lo, hi = ir.Variable(f"{s.name}.s0.{arg}.min", _I32), ir.Variable(f"{s.name}.s0.{arg}.max", _I32)
            box += [lo, ir.Sub(ir.Add(hi, ir.make_const(_I32, 1)), lo)]
        what = "produce" if s.is_producer else "consume"
        return ir.ProducerConsumer(s.name, s.is_producer, ir.make_block([
            self.event(f"{what.capitalize()} {s.name}.0", box), body, self.event(f"End {what} {s.name}.0", box)]))


def trace_realizations(stmt: ir.Stmt, env) -> ir.Stmt:
    traced = {name: f for name, f in env.funcs.items() if "realizations" in f._trace}
    if not traced:
        return stmt
    return _Realizations(traced, {f.name() for f in env.outputs}, env.user_names).mutate(stmt)
