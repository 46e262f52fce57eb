"""pyhalide's thread pool for parallel loops: LLVM IR, compiled once per process.

A parallel loop's task (parallel.py) takes iterations from a counter in its closure until none
are left, so any number of threads may run it. `pyhalide_par_for(task, closure, threads)` runs
it on the calling thread and invites up to threads - 1 workers; it returns once the task has
returned on the caller and on every worker that joined. A worker that arrives after the caller
has taken the last iteration does not join at all: the caller never waits for a worker to wake.
libgomp's team, which the pool replaces, waits at its closing barrier for every worker, asleep
ones included: 5 us per parallel loop on a busy machine, where Halide's runtime, built this way,
takes 0.14 (`python -m benchmarks.overhead`).

- Joining: one word holds an open bit and the number of workers inside the job. A worker joins
  with a compare-and-swap that needs the bit set (and fewer than threads - 1 inside); the caller
  clears the bit when its own task returns, then waits for the count to reach zero.
- Waking: workers spin a while on the job counter (a new job bumps it), then sleep on it with a
  futex; the caller wakes them only if some sleep.
- One job at a time: a parallel loop inside a task, or one started by another Python thread while
  a job runs, runs serially on its thread.
- Fork: a forked child has none of the parent's workers. No job waits for a worker that never
  joins, so the child's loops are right regardless; os.fork's hook also resets the pool, and the
  child then starts its own workers.
It is written for x86-64 Linux, the host pyhalide compiles for: `pause` and the futex system call.
"""

from __future__ import annotations

import ctypes
import os
import threading

from llvmlite import ir as ll

from .llvm_types import I32, I64, PTR, VOID

SYMBOL = "pyhalide_par_for"
_RESET = "pyhalide_pool_reset_in_child"

SPINS = 4000  # pause instructions a worker spins through before sleeping (tens of microseconds)
_OPEN = 1 << 31
_SYS_FUTEX, _FUTEX_WAIT_PRIVATE, _FUTEX_WAKE_PRIVATE = 202, 128, 129

_lock = threading.Lock()
_pool: dict = {}


def address() -> int:
    """The address of pyhalide_par_for (the pool is compiled on first use, and kept)."""
    with _lock:
        if "fn" not in _pool:
            from .jit import JITFunction

            fn = JITFunction(module_ir(), SYMBOL, imports=False, also=(_RESET,))
            reset = ctypes.CFUNCTYPE(None)(fn.address_of(_RESET))
            os.register_at_fork(after_in_child=reset)
            _pool["fn"], _pool["reset"] = fn, reset
        return _pool["fn"].address


class Callee:
    """A function pointer as llvmlite's `call` takes it: it needs the function's type, which an
    opaque pointer does not carry."""

    def __init__(self, pointer, function_type: ll.FunctionType):
        self.pointer, self.function_type, self.type = pointer, function_type, pointer.type

    def get_reference(self) -> str:
        return self.pointer.get_reference()

    def __getattr__(self, name):
        return getattr(self.pointer, name)


TASK = ll.FunctionType(VOID, [PTR])


def module_ir() -> str:
    """The pool's module (x86-64 Linux: `pause` and the futex system call)."""
    m = ll.Module("pyhalide_thread_pool")

    def global_i32(name: str) -> ll.GlobalVariable:
        g = ll.GlobalVariable(m, I32, name)
        g.linkage = "internal"
        g.initializer = ll.Constant(I32, 0)
        return g

    def global_ptr(name: str) -> ll.GlobalVariable:
        g = ll.GlobalVariable(m, PTR, name)
        g.linkage = "internal"
        g.initializer = ll.Constant(PTR, None)
        return g

    job_task, job_closure = global_ptr("job_task"), global_ptr("job_closure")
    state, generation, sleepers = global_i32("state"), global_i32("generation"), global_i32("sleepers")
    busy, workers, wanted = global_i32("busy"), global_i32("workers"), global_i32("wanted")

    syscall = ll.Function(m, ll.FunctionType(I64, [I64], var_arg=True), "syscall")
    pthread_create = ll.Function(m, ll.FunctionType(I32, [PTR, PTR, PTR, PTR]), "pthread_create")
    sched_yield = ll.Function(m, ll.FunctionType(I32, []), "sched_yield")
    pause = ll.Function(m, ll.FunctionType(VOID, []), "llvm.x86.sse2.pause")

    def c32(v: int) -> ll.Constant:
        return ll.Constant(I32, v)

    def load(b, g):
        return b.load_atomic(g, "seq_cst", 4, typ=I32)

    def futex(b, op: int, value):
        null = ll.Constant(PTR, None)
        b.call(syscall, [ll.Constant(I64, _SYS_FUTEX), b.ptrtoint(generation, I64), ll.Constant(I64, op),
                         b.sext(value, I64), null, null, ll.Constant(I64, 0)])

    # -- in a forked child: no workers exist, no job runs
    reset = ll.Function(m, ll.FunctionType(VOID, []), _RESET)
    b = ll.IRBuilder(reset.append_basic_block("entry"))
    for g in (workers, busy, state, sleepers):
        b.store(c32(0), g)
    b.ret_void()

    # -- a worker: wait for a job, join it if it is still open, run its task, again
    worker = ll.Function(m, ll.FunctionType(PTR, [PTR]), "pool_worker")
    worker.linkage = "internal"
    entry, spin, spun, sleep, woke, job, join, run = (worker.append_basic_block(n) for n in (
        "entry", "spin", "spun", "sleep", "woke", "job", "join", "run"))
    b = ll.IRBuilder(entry)
    seen = b.alloca(I32, name="seen")
    count = b.alloca(I32, name="count")
    b.store(load(b, generation), seen)
    b.store(c32(0), count)
    b.branch(spin)
    b.position_at_end(spin)  # spin: has the job counter moved?
    moved = b.icmp_unsigned("!=", load(b, generation), b.load(seen, typ=I32))
    b.cbranch(moved, job, spun)
    b.position_at_end(spun)
    b.call(pause, [])
    n = b.add(b.load(count, typ=I32), c32(1))
    b.store(n, count)
    b.cbranch(b.icmp_signed("<", n, c32(SPINS)), spin, sleep)
    b.position_at_end(sleep)  # sleep until the counter moves (the futex returns at once if it has)
    b.atomic_rmw("add", sleepers, c32(1), "seq_cst")
    futex(b, _FUTEX_WAIT_PRIVATE, b.load(seen, typ=I32))
    b.atomic_rmw("sub", sleepers, c32(1), "seq_cst")
    b.branch(woke)
    b.position_at_end(woke)
    b.store(c32(0), count)
    b.branch(spin)
    b.position_at_end(job)  # a new job: join it if it is still open and wants another worker
    b.store(load(b, generation), seen)
    b.store(c32(0), count)
    b.branch(join)
    b.position_at_end(join)
    s = load(b, state)
    is_open = b.icmp_unsigned("!=", b.and_(s, c32(_OPEN)), c32(0))
    room = b.icmp_signed("<", b.and_(s, c32(_OPEN - 1)), b.load_atomic(wanted, "monotonic", 4, typ=I32))
    attempt = worker.append_basic_block("attempt")
    b.cbranch(b.and_(is_open, room), attempt, spin)
    b.position_at_end(attempt)
    pair = b.cmpxchg(state, s, b.add(s, c32(1)), "seq_cst", "seq_cst")
    b.cbranch(b.extract_value(pair, 1), run, join)
    b.position_at_end(run)
    task = b.load(job_task, typ=PTR)
    closure = b.load(job_closure, typ=PTR)
    b.call(Callee(task, TASK), [closure])
    b.atomic_rmw("sub", state, c32(1), "seq_cst")
    b.branch(spin)

    # -- pyhalide_par_for(task, closure, threads)
    par_for = ll.Function(m, ll.FunctionType(VOID, [PTR, PTR, I32]), SYMBOL)
    task_arg, closure_arg, threads = par_for.args
    entry, inline, grow, grown, wake, work, wait, waited, done = (
        par_for.append_basic_block(n) for n in (
            "entry", "inline", "grow", "grown", "wake", "work", "wait", "waited", "done"))
    b = ll.IRBuilder(entry)
    tid = b.alloca(I64, name="tid")
    spins = b.alloca(I32, name="spins")
    alone = b.icmp_signed("<=", threads, c32(1))
    check = par_for.append_basic_block("lock")
    b.cbranch(alone, inline, check)
    b.position_at_end(check)
    pair = b.cmpxchg(busy, c32(0), c32(1), "seq_cst", "seq_cst")
    b.cbranch(b.extract_value(pair, 1), grow, inline)
    b.position_at_end(inline)  # one thread, or a job already running (nested, or another caller)
    b.call(Callee(task_arg, TASK), [closure_arg])
    b.ret_void()
    b.position_at_end(grow)  # start workers up to threads - 1 (a failure leaves fewer: the caller works)
    helpers = b.sub(threads, c32(1))
    have = b.load(workers, typ=I32)
    more = par_for.append_basic_block("more")
    b.cbranch(b.icmp_signed("<", have, helpers), more, grown)
    b.position_at_end(more)
    null = ll.Constant(PTR, None)
    started = b.icmp_signed("==", b.call(pthread_create, [tid, null, worker, null]), c32(0))
    b.store(b.select(started, b.add(have, c32(1)), have), workers)
    b.cbranch(started, grow, grown)
    b.position_at_end(grown)
    b.store(task_arg, job_task)
    b.store(closure_arg, job_closure)
    b.store_atomic(helpers, wanted, "seq_cst", 4)
    b.store_atomic(c32(_OPEN), state, "seq_cst", 4)
    b.atomic_rmw("add", generation, c32(1), "seq_cst")
    b.cbranch(b.icmp_signed(">", load(b, sleepers), c32(0)), wake, work)
    b.position_at_end(wake)
    futex(b, _FUTEX_WAKE_PRIVATE, c32(_OPEN - 1))  # all of them
    b.branch(work)
    b.position_at_end(work)
    b.call(Callee(task_arg, TASK), [closure_arg])
    b.atomic_rmw("and", state, c32(_OPEN - 1), "seq_cst")  # closed: latecomers stay out
    b.store(c32(0), spins)
    b.branch(wait)
    b.position_at_end(wait)  # until every worker that joined has left its task
    b.cbranch(b.icmp_signed("==", load(b, state), c32(0)), done, waited)
    b.position_at_end(waited)
    b.call(pause, [])
    k = b.add(b.load(spins, typ=I32), c32(1))
    b.store(k, spins)
    yield_now = par_for.append_basic_block("yield")
    b.cbranch(b.icmp_signed("==", b.and_(k, c32(255)), c32(0)), yield_now, wait)
    b.position_at_end(yield_now)
    b.call(sched_yield, [])
    b.branch(wait)
    b.position_at_end(done)
    b.store_atomic(c32(0), busy, "seq_cst", 4)
    b.ret_void()
    return str(m)
