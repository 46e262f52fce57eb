"""Profiling (the target feature "profile"): mark which Func each thread is computing.

Assumes: the ProducerConsumer nodes of every computed Func are in place (bounds inference and
sliding window have run). Guarantees: each production starts with `profiler_set_current(id)` of
its Func and each consumption with that of the Func around it (the pipeline's overhead, id 0, at
the top level), as Halide's sampling profiler instruments code: one store per node, which a
sampling thread reads (codegen/profiler.py). Each parallel loop's iteration starts by naming the
Func it computes, since the thread that runs it may have been elsewhere. Ids are
`profiled_names(env)`'s positions: the runtime's report reads the same table.
"""

from __future__ import annotations

from .. import ir
from ..ir_mutator import IRMutator
from ..target import PROFILE_FEATURES
from ..types import Int

OVERHEAD = "overhead"  # id 0: what runs outside every production (checks, the pipeline's set-up)


def profiled(target) -> bool:
    """Whether the target asks for the profiler (Halide's two ways of sampling; pyhalide's
    sampling thread serves both)."""
    return any(target.has_feature(f) for f in PROFILE_FEATURES)


def profiled_names(env) -> list[str]:
    """The report's rows by id: the overhead, then the computed Funcs, producers first."""
    return [OVERHEAD, *(f.name() for f in env.order)]


def set_current(func_id: int) -> ir.Stmt:
    return ir.Evaluate(ir.Call(Int(32), "profiler_set_current", (ir.IntImm(Int(32), func_id),), ir.INTRINSIC))


class _InjectProfiling(IRMutator):
    statements_only = True

    def __init__(self, ids: dict[str, int]):
        super().__init__()
        self.ids = ids
        self.around = [0]  # the Func whose code encloses the node visited

    def visit_ProducerConsumer(self, s):
        own = self.ids.get(s.name)
        if own is None:
            return self.default(s)
        if s.is_producer:
            self.around.append(own)
            body = self.mutate(s.body)
            self.around.pop()
            return ir.ProducerConsumer(s.name, True, ir.make_block([set_current(own), body]))
        body = self.mutate(s.body)
        if ir.is_no_op(body):  # (an output's consumption: nothing runs there)
            return s
        return ir.ProducerConsumer(s.name, False, ir.make_block([set_current(self.around[-1]), body]))

    def visit_For(self, s):
        body = self.mutate(s.body)
        if s.for_type == ir.PARALLEL:
            body = ir.make_block([set_current(self.around[-1]), body])
        return ir.For(s.name, s.min, s.extent, s.for_type, body)


def inject_profiling(stmt: ir.Stmt, env) -> ir.Stmt:
    ids = {name: k for k, name in enumerate(profiled_names(env))}
    return ir.make_block([set_current(0), _InjectProfiling(ids).mutate(stmt)])
