"""Parallel loops on pyhalide's thread pool (thread_pool.py), and atomic read-modify-writes.

A parallel For's body is outlined into a task `void task(ptr closure)` that
`pyhalide_par_for(task, closure, threads)` runs on the calling thread and on the pool's workers
that join in time, with no Python and no GIL. The closure lives on the caller's stack and holds the loop
bounds, a shared iteration counter, an error code, the scalars array, and every value and buffer
the body uses. Each thread takes iterations from the counter until none are left, some task
failed or SIGINT arrived (interrupts.py); a failing task stores its code in the closure, which
the caller then returns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir as ll

from .. import ir
from ..errors import InternalError
from ..extern import MAKE_BUFFER
from ..ir_mutator import IRVisitor
from ..types import Type
from . import profiler, thread_pool
from .calling_convention import scalar_ptr
from .interrupts import INTERRUPTED
from .llvm_types import I32, I64, PTR, VOID, atomic_store, llvm_type

if TYPE_CHECKING:
    from .llvm import CodeGen

# closure fields before the captured values: loop min, extent, next iteration, error code, scalars
_LO, _EXTENT, _COUNTER, _ERROR, _SCALARS, _CAPTURED = range(6)


def emit_parallel_for(cg: CodeGen, s: ir.For) -> None:
    b = cg.b
    profiling = cg.profiler_ids is not None
    lo, extent = cg.expr(s.min), cg.expr(s.extent)
    names, buffer_names = _names_used(s.body)
    values = [(n, cg.f.scope[n][-1]) for n in sorted(names) if cg.f.scope.get(n) and n != s.name]
    buffers = [(n, cg.f.hosts[n]) for n in sorted(buffer_names) if n in cg.f.hosts]
    closure_t = ll.LiteralStructType([I32, I32, I32, I32, PTR] + [v.type for _, v in values] + [PTR] * len(buffers))

    def field_ptr(builder, base, k):
        idx = [ll.Constant(I32, 0), ll.Constant(I32, k)]
        if base.type.is_opaque:
            return builder.gep(base, idx, source_etype=closure_t)
        return builder.gep(base, idx)  # typed: the result points at the field's type

    closure = cg.alloca_in_entry(closure_t, f"{s.name}.closure")
    head = [lo, extent, ll.Constant(I32, 0), ll.Constant(I32, 0), cg.f.scalars]
    for k, v in enumerate(head + [v for _, v in values] + [p for _, p in buffers]):
        b.store(v, field_ptr(b, closure, k))

    task = ll.Function(cg.module, ll.FunctionType(VOID, [PTR]), f"{cg.fn_name}.par.{len(cg.module.functions)}")
    task.linkage = "internal"
    data = task.args[0]
    with cg.emitting_into(task, in_task=True) as tb:
        t_lo = tb.load(field_ptr(tb, data, _LO), typ=I32)
        t_extent = tb.load(field_ptr(tb, data, _EXTENT), typ=I32)
        counter = field_ptr(tb, data, _COUNTER)
        error = field_ptr(tb, data, _ERROR)

        def leave_with_error(builder, code):  # tell the other tasks and the caller, then stop
            atomic_store(builder, code, error)
            if profiling:  # (builder is the task's own, cg.b)
                profiler.task_finished(cg)
            builder.ret_void()

        cg.f.leave_with_error = leave_with_error
        cg.f.scalars = tb.load(field_ptr(tb, data, _SCALARS), typ=PTR)
        for k, (n, v) in enumerate(values):
            cg.bind(n, tb.load(field_ptr(tb, data, _CAPTURED + k), typ=v.type))
        for k, (n, _) in enumerate(buffers):
            cg.f.hosts[n] = tb.load(field_ptr(tb, data, _CAPTURED + len(values) + k), typ=PTR)
        if profiling:
            profiler.task_started(cg)
        take = task.append_basic_block("take")
        work = task.append_basic_block("work")
        finish = task.append_basic_block("finish")
        interrupted = task.append_basic_block("interrupted")
        tb.branch(take)
        tb.position_at_end(take)
        resume = task.append_basic_block("resume")
        tb.cbranch(tb.icmp_signed("!=", cg.interrupt_flag(), ll.Constant(I32, 0)), interrupted, resume)
        tb.position_at_end(interrupted)
        leave_with_error(tb, ll.Constant(I32, INTERRUPTED))
        tb.position_at_end(resume)
        failed = tb.load_atomic(error, "monotonic", 4, typ=I32)
        i = tb.atomic_rmw("add", counter, ll.Constant(I32, 1), "monotonic")
        more = tb.and_(tb.icmp_signed("<", i, t_extent), tb.icmp_signed("==", failed, ll.Constant(I32, 0)))
        tb.cbranch(more, work, finish)
        tb.position_at_end(work)
        if profiling:
            profiler.claim_token(cg)
        cg.bind(s.name, tb.add(t_lo, i, flags=["nsw"]))
        cg.stmt(s.body)
        cg.unbind(s.name)
        cg.b.branch(take)
        cg.b.position_at_end(finish)
        if profiling:
            profiler.task_finished(cg)
        cg.b.ret_void()

    b = cg.b
    threads = b.trunc(b.load(scalar_ptr(b, cg.f.scalars, cg.layout.threads_slot), typ=I64), I32)
    par_for = cg.declare(thread_pool.SYMBOL, VOID, [PTR, PTR, I32])
    if profiling:
        profiler.waiting(cg, start=True)
    b.call(par_for, [task, closure, threads])
    if profiling:
        profiler.waiting(cg, start=False)
    code = b.load(field_ptr(b, closure, _ERROR), typ=I32)
    with b.if_then(b.icmp_signed("!=", code, ll.Constant(I32, 0)), likely=False):
        cg.free_heap_allocations()
        cg.f.leave_with_error(b, code)


def emit_atomic(cg: CodeGen, s: ir.Atomic) -> None:
    """A compare-and-swap loop: read the element, compute the new value from it, retry until no
    other thread changed it in between. An update that stores several values (a scatter) runs
    under a lock instead."""
    if not isinstance(s.body, ir.Store):
        _emit_locked(cg, s)
        return
    st = s.body
    t = st.value.type
    if t.lanes != 1:
        raise InternalError("codegen: a vector atomic update (the vectorizer keeps atomic loops serial)")
    host = cg.f.hosts[st.name]
    mem_t = llvm_type(t, memory=True)
    bits_t = ll.IntType(max(8, t.bits))
    b = cg.b
    ptr = b.gep(host, [b.sext(cg.expr(st.index), I64)], source_etype=mem_t)
    loop = cg.f.fn.append_basic_block(f"{s.old}.cas")
    done = cg.f.fn.append_basic_block(f"{s.old}.done")
    pre = b.block
    first = b.load(ptr, typ=bits_t, align=t.bytes())
    b.branch(loop)
    b.position_at_end(loop)
    seen = b.phi(bits_t)
    seen.add_incoming(first, pre)
    cg.bind(s.old, _from_bits(b, seen, t))
    new = cg.expr(st.value)
    cg.unbind(s.old)
    pair = b.cmpxchg(ptr, seen, _to_bits(b, new, t, bits_t), "monotonic", "monotonic")
    actual = b.extract_value(pair, 0)
    ok = b.extract_value(pair, 1)
    seen.add_incoming(actual, b.block)
    b.cbranch(ok, done, loop)
    b.position_at_end(done)


def _emit_locked(cg: CodeGen, s: ir.Atomic) -> None:
    """s's body under a spin lock of the update's own (a module global, shared by the copies that
    unrolling and specialization make of the update), as Halide's mutex: loads, then stores."""
    name = f"{s.old}.lock"
    lock = cg.module.globals.get(name)
    if lock is None:
        lock = ll.GlobalVariable(cg.module, I32, name)
        lock.linkage = "internal"
        lock.initializer = ll.Constant(I32, 0)
    b = cg.b
    retry = cg.f.fn.append_basic_block(f"{s.old}.acquire")
    wait = cg.f.fn.append_basic_block(f"{s.old}.wait")
    locked = cg.f.fn.append_basic_block(f"{s.old}.locked")
    b.branch(retry)
    b.position_at_end(retry)
    won = b.extract_value(b.cmpxchg(lock, ll.Constant(I32, 0), ll.Constant(I32, 1), "acquire", "monotonic"), 1)
    b.cbranch(won, locked, wait)
    b.position_at_end(wait)
    if cg.x86:  # a spin-wait hint; elsewhere the loop just retries
        b.call(cg.declare("llvm.x86.sse2.pause", VOID, []), [])
    b.branch(retry)
    b.position_at_end(locked)
    leave = cg.f.leave_with_error

    def release_then_leave(builder, code):  # a require() failing under the lock must not keep it
        builder.store_atomic(ll.Constant(I32, 0), lock, "release", 4)
        leave(builder, code)

    cg.f.leave_with_error = release_then_leave
    try:
        cg.stmt(s.body)
    finally:
        cg.f.leave_with_error = leave
    b.store_atomic(ll.Constant(I32, 0), lock, "release", 4)


def _names_used(stmt) -> tuple[set[str], set[str]]:
    """The variables and the buffers that stmt uses (names it binds inside included)."""
    names: set[str] = set()
    buffers: set[str] = set()

    class Collect(IRVisitor):
        visit_once = True

        def visit_Variable(self, e):
            names.add(e.name)

        def visit_Load(self, e):
            buffers.add(e.name)
            names.add(f"{e.name}.last_word")  # (x86.load's bound, where the buffer has one)
            self.visit_children(e)

        def visit_Store(self, st):
            buffers.add(st.name)
            self.visit_children(st)

        def visit_Call(self, e):
            if e.call_type == ir.INTRINSIC and e.name == "prefetch":  # prefetch(buffer, index)
                name = e.args[0].value if isinstance(e.args[0], ir.Broadcast) else e.args[0]
                buffers.add(name.value)
            elif e.call_type == ir.INTRINSIC and e.name == MAKE_BUFFER and e.args[1].value:  # (id, buffer, ...)
                buffers.add(e.args[1].value)
            self.visit_children(e)

    Collect().visit(stmt)
    return names, buffers


def _from_bits(b, v, t: Type):
    if t.is_float():
        return b.bitcast(v, llvm_type(t))
    if t.is_bool():
        return b.icmp_unsigned("!=", v, ll.Constant(v.type, 0))
    return v


def _to_bits(b, v, t: Type, bits_t):
    if t.is_float():
        return b.bitcast(v, bits_t)
    if t.is_bool():
        return b.zext(v, bits_t)
    return v
