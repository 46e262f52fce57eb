"""GPU kernels: each outermost nest of gpu_block loops becomes a kernel the host launches.

Assumes: the Stmt is the one to be compiled for a CUDA target (after the arithmetic rules), with
GPU loops marked by the schedule and no vector code inside them (gpu_vector_loops unrolls it).

Guarantees: the host Stmt keeps every statement outside GPU loops (a parallel loop around kernels
becomes serial) and, in place of each kernel's loop nest, a `gpu_launch` intrinsic (Evaluate)
whose arguments are the kernel's index, the grid extents (x, y, z), the block's size (x, y, z),
the bytes of dynamic shared memory a block needs, then per buffer the kernel uses its name (a
StringImm) and its size in bytes (an Int(64) for a host allocation, -1 for a pipeline buffer the
runtime already knows), then the value of each scalar the kernel reads. Each Kernel's body binds
every loop variable from `__block_id_*` and `__thread_id_*`:
- block loops (innermost is x) become the grid; their extents may not depend on each other; an
  if between them (a GuardWithIf split's) moves inside the innermost;
- thread loops become the block: a loop at thread depth d (1 = innermost) is dimension d-1, and
  its iterations past its extent, or threads of dimensions it doesn't use, skip it. The block's
  size is the largest extent over the kernel's thread loops: a constant where one shows, else
  decided at the launch (see below). Thread loops must be inside block loops, as in Halide;
- code at block level outside thread loops runs on thread (0, 0, 0) alone;
- a barrier follows each thread nest and each single-thread statement, except at the kernel's end,
  so the serial meaning of the loop nest (producer before consumer) holds: the same as running
  block and thread loops as serial loops on the CPU;
- allocations at block level are shared memory (or, stored in Heap, a slice per block of a
  global buffer the host allocates), those inside thread loops per-thread local arrays (or, stored
  in GPUShared or Heap, the thread's slice of one allocation). A block-level allocation stored in
  registers (store_in(Register)) is a per-thread array of the elements each thread touches, where
  no two threads touch the same one; where gpu_lanes touch each other's, and for an allocation
  inside thread loops that thread loops inside it share (first moved to block level by
  gpu_thread_fission), it is shared memory, or a slice per block of global memory where shared
  memory is full (Halide keeps both in registers, exchanged by warp shuffles).
Sizes (thread counts, extents) are upper bounds over every thread of every block: constants
where the lets and loops show one (checked against the target's limits, CompileError), else
expressions of host values; where one depends on the block, the host finds its largest over the
grid with a loop before the launch, as Halide does. Shared memory so sized is dynamic (each
allocation at an offset bound to `shared_offset_name`), a per-thread array so sized lives in
global memory; the runtime checks these against the limits at the launch.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass

from .. import ir
from ..bounds import Interval, bounds_of_expr, constant_bound, settle_choices
from ..errors import CompileError
from ..ir_mutator import IRMutator, IRVisitor, LetScopeMutator, free_variables, substitute, substitute_lets
from ..ir_printer import expr_to_string
from ..simplify import simplify
from ..types import Int, Type
from .gpu_thread_fission import (
    THREAD_KINDS,
    SliceAccesses,
    lift_thread_shared_allocations,
    shared_by_inner_threads,
    thread_depth,
)
from .lower_arithmetic import DIV, MOD

BLOCK_IDS = ("__block_id_x", "__block_id_y", "__block_id_z")
THREAD_IDS = ("__thread_id_x", "__thread_id_y", "__thread_id_z")
LAUNCH = "gpu_launch"
BARRIER = "gpu_thread_barrier"
SHARED, LOCAL, HEAP = "GPUShared", "Register", "Heap"

MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK_DIMS = (1024, 1024, 64)
MAX_GRID_DIMS = (2**31 - 1, 65535, 65535)
MAX_SHARED_BYTES = 48 * 1024  # static shared memory per block on every CUDA GPU
MAX_LOCAL_BYTES = 64 * 1024  # per-thread arrays: beyond this, a schedule is surely wrong

@dataclass(frozen=True)
class KernelBuffer:
    name: str
    type: Type  # element type
    read: bool
    written: bool


@dataclass(frozen=True)
class Kernel:
    name: str
    body: ir.Stmt
    threads: tuple[int, int, int] | None  # the block's size; None where the launch decides it
    grid_dims: int  # how many block loops (1 to 3)
    buffers: tuple[KernelBuffer, ...]
    scalars: tuple[tuple[str, Type], ...]
    shared_bytes: int  # static shared memory (dynamic shared memory is sized at each launch)


def block_size_problem(kernel_name: str, block) -> str | None:
    """Why a block of `block` threads (x, y, z) does not fit a GPU, or None: checked when
    compiling for the dimensions known then, and at the launch for a block the inputs size."""
    for d, (n, most) in enumerate(zip(block, MAX_BLOCK_DIMS)):
        if n > most:
            return f"Kernel {kernel_name} has {n} GPU threads in dimension {'xyz'[d]}; at most {most} fit"
    total = block[0] * block[1] * block[2]
    if total > MAX_THREADS_PER_BLOCK:
        return (f"Kernel {kernel_name} has {block[0]}x{block[1]}x{block[2]} = {total} GPU threads per block; at "
                f"most {MAX_THREADS_PER_BLOCK} fit: use smaller thread tiles")
    return None


def shared_offset_name(allocation: str) -> str:
    """The kernel's let holding where a dynamically sized shared allocation starts (in bytes) in
    the kernel's dynamic shared memory."""
    return allocation + ".shared_offset"


def _const(value: int) -> ir.Expr:
    return ir.IntImm(Int(32), value)


def _max(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return simplify(ir.Max(a, b))


def barrier() -> ir.Stmt:
    return ir.Evaluate(ir.Call(Int(32), BARRIER, (), ir.INTRINSIC))


def is_barrier(s: ir.Stmt) -> bool:
    return isinstance(s, ir.Evaluate) and isinstance(s.value, ir.Call) and s.value.name == BARRIER


def launch_kernel_index(s: ir.Stmt) -> int | None:
    """The kernel index of a `gpu_launch` statement, else None."""
    if isinstance(s, ir.Evaluate) and isinstance(s.value, ir.Call) and s.value.name == LAUNCH:
        return s.value.args[0].value
    return None


class Touched(IRVisitor):
    """What a statement touches: the buffers it reads and writes (an atomic update does both),
    the buffers the kernels it launches use, whether it holds a barrier. As a visitor, it collects
    an expression's part (Touches adds the statements')."""

    visit_once = True  # what a shared subexpression touches counts once

    def __init__(self):
        super().__init__()
        self.reads: set[str] = set()
        self.writes: set[str] = set()
        self.launches: set[str] = set()
        self.barrier = False

    def visit_Load(self, e):
        self.reads.add(e.name)
        self.visit_children(e)

    def visit_Call(self, e):
        if e.name == LAUNCH:
            self.launches.update(a.value for a in e.args if isinstance(a, ir.StringImm))
        self.barrier = self.barrier or e.name == BARRIER
        self.visit_children(e)


class Touches:
    """What each statement touches, worked out once per statement: its own expressions' and its
    sub-statements' (remembered), so asking of every statement of a nest (each level of a chain of
    lets, as the host copies and the CUDA printer do) walks the nest once, not once per level."""

    def __init__(self):
        self.memo: dict[int, tuple[ir.Stmt, Touched]] = {}

    def __call__(self, s: ir.Stmt) -> Touched:
        hit = self.memo.get(id(s))
        if hit is not None:
            return hit[1]
        t, subs = Touched(), []
        _own_expressions(s, t, subs)
        if isinstance(s, ir.Store):
            t.writes.add(s.name)
        elif isinstance(s, ir.Atomic) and isinstance(s.body, ir.Store):  # (a locked one's loads are its own)
            t.reads.add(s.body.name)
        for sub in subs:
            inner = self(sub)
            t.reads |= inner.reads
            t.writes |= inner.writes
            t.launches |= inner.launches
            t.barrier = t.barrier or inner.barrier
        self.memo[id(s)] = (s, t)  # (s kept: its id stays its own)
        return t


def _own_expressions(node, t: Touched, subs: list) -> None:
    """Visit node's expressions with t; collect its sub-statements."""
    for name in node._children:
        value = getattr(node, name)
        for v in value if isinstance(value, tuple) else (value,):
            if isinstance(v, ir.Stmt):
                subs.append(v)
            elif isinstance(v, ir.Expr):
                t.visit(v)
            elif isinstance(v, tuple):  # the (min, extent) pairs of a Realize
                for e in v:
                    t.visit(e)


def _plus(lo: ir.Expr, index: ir.Variable) -> ir.Expr:
    return index if ir.is_const(lo, 0) else ir.Add(lo, index)


class _Uses(IRVisitor):
    """The buffers a kernel body reads and writes, the variables it reads and those it binds."""

    def __init__(self):
        super().__init__()
        self.reads: dict[str, Type] = {}
        self.writes: dict[str, Type] = {}
        self.variables: dict[str, Type] = {}
        self.bound: set[str] = set()

    def visit_Variable(self, e):
        self.variables.setdefault(e.name, e.type)

    def visit_Load(self, e):
        self.reads.setdefault(e.name, e.type.element_of())
        self.visit_children(e)

    def visit_Store(self, s):
        self.writes.setdefault(s.name, s.value.type.element_of())
        self.visit_children(s)

    def visit_Atomic(self, s):
        self.bound.add(s.old)
        self.reads.setdefault(s.body.name, s.body.value.type.element_of())
        self.visit_children(s)

    def _binds(self, node):
        self.bound.add(node.name)
        self.visit_children(node)

    visit_LetStmt = visit_Let = visit_For = visit_Allocate = _binds


class _FoldDivisions(IRMutator):
    """div_round_to_zero and mod_round_to_zero (C's / and %) of two integer constants, folded."""

    def visit_Call(self, e):
        e = self.default(e)
        if e.name in (DIV, MOD) and len(e.args) == 2:
            a, b = (ir.const_int(v) for v in e.args)
            if a is not None and b:
                q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
                return ir.make_const(e.type, q if e.name == DIV else a - q * b)
        return e


class _BlockLevel:
    """Rewrites one kernel's body below its block loops (see the module docstring)."""

    def __init__(self, kernel_name: str, lets: dict[str, ir.Expr], block_lets: set[str], block_loops: list[ir.For],
                 lifted: set[str]):
        self.kernel_name = kernel_name
        self.lifted = lifted  # allocations gpu_thread_fission moved out of thread loops
        # the block's size per dimension: a constant, or an expression of host values (a bound
        # over every block of the thread loops' extents), evaluated at the launch
        self.threads: list[ir.Expr] = [_const(1)] * 3
        self.lets = dict(lets)  # the values of the lets around (host and block level), for bounds
        self.block_loops = {loop.name for loop in block_loops}
        self.kernel_names = set(block_lets) | self.block_loops  # names bound inside the kernel (loops, lets)
        self.loop_ranges: dict[str, Interval] = {}  # the loops inside the block loops, outermost first
        # Sizes that depend on the block: the host finds their largest over every block before
        # the launch (a loop over the grid, as Halide does), into the variable named here.
        self.per_block_maxima: dict[ir.Expr, str] = {}
        self.shared_bytes = 0
        # dynamically sized shared allocations: bytes (a bound over the blocks), by name
        self.dynamic_shared: dict[str, ir.Expr] = {}
        # allocations in global memory, a slice per block (or per thread: True): elements per slice
        self.heap: dict[str, tuple[ir.Allocate, ir.Expr, bool]] = {}

    def _add_loop(self, loop: ir.For) -> None:
        self.kernel_names.add(loop.name)
        lo = self._resolved(loop.min)
        hi = simplify(ir.Add(lo, ir.Sub(self._resolved(loop.extent), _const(1))))
        known = self.loop_ranges.get(loop.name)  # a loop copied (partitioned): either copy's range
        self.loop_ranges[loop.name] = Interval(lo, hi) if known is None else Interval(
            simplify(ir.Min(known.min, lo)), simplify(ir.Max(known.max, hi)))

    def host_bound(self, e: ir.Expr) -> ir.Expr | None:
        """An upper bound of e over every thread of every block: a constant where one shows, else
        an expression of values the host has at the launch (Params, buffer shapes, host loops,
        per-block maxima the host works out); None if there is none."""
        e = self._resolved(e)
        if (c := constant_bound(e, upper=True)) is not None:
            return _const(c)
        for name in reversed(self.loop_ranges):  # innermost first: its range may use outer loops
            if name in free_variables(e):
                e = bounds_of_expr(e, {name: self.loop_ranges[name]}).max
                if e is None:
                    return None
                e = simplify(e)
        if (c := constant_bound(e, upper=True)) is not None:
            return _const(c)
        used = free_variables(e)
        if used & ((self.kernel_names - self.block_loops) | set(THREAD_IDS) | set(BLOCK_IDS)):
            return None
        if used & self.block_loops:
            name = self.per_block_maxima.setdefault(e, f"{self.kernel_name}.max_{len(self.per_block_maxima)}")
            return ir.Variable(name, Int(32))
        return e

    # -- first walk: the block's size
    def measure(self, s: ir.Stmt) -> None:
        if isinstance(s, ir.Atomic) and not isinstance(s.body, ir.Store):
            raise CompileError(f"Stage {s.old.removesuffix('.old')} is atomic() and stores several values (a Tuple "
                               f"or a scatter) inside kernel {self.kernel_name}: that needs a lock, which GPU kernels "
                               "do not have (Halide refuses it too)")
        if isinstance(s, ir.LetStmt):
            self.lets[s.name] = s.value
            self.kernel_names.add(s.name)
        if isinstance(s, ir.For):
            if s.for_type == ir.GPU_BLOCK:
                raise CompileError(f"Loop {s.name} is a gpu_block loop inside kernel {self.kernel_name}'s block loops "
                                   "but not directly nested in them: a kernel's block loops must be its outermost")
            if s.for_type in THREAD_KINDS:
                dim = thread_depth(s) - 1
                if dim > 2:
                    raise CompileError(f"Loop {s.name} is the fourth nested GPU thread loop of kernel "
                                       f"{self.kernel_name}; a GPU block has at most 3 dimensions")
                bound = self.host_bound(s.extent)
                if bound is None:
                    raise CompileError(f"GPU thread loop {s.name} has extent {expr_to_string(s.extent)}, which has no "
                                       "upper bound known before the launch: split it by a constant factor "
                                       "(gpu_tile does)")
                self.threads[dim] = _max(self.threads[dim], bound)
            self._add_loop(s)
        for name in s._children:
            value = getattr(s, name)
            if isinstance(value, ir.Stmt):
                self.measure(value)
            elif isinstance(value, tuple):
                for v in value:
                    if isinstance(v, ir.Stmt):
                        self.measure(v)

    def _resolved(self, e: ir.Expr) -> ir.Expr:
        """e with the kernel's lets substituted, simplified: a tile's `max - min + 1` becomes its
        constant size, also where a split divided it (C's division, which the arithmetic rules
        wrote and the simplifier does not know, folded where its operands are constants). (Only
        for measuring: the Stmt keeps e as it is.)"""
        return simplify(_FoldDivisions().mutate(simplify(substitute_lets(e, self.lets))))

    def _extents(self, s: ir.Allocate, where: str) -> tuple[ir.Expr, ...]:
        """Upper bounds of an allocation's extents over every block and thread: constants where
        they show, else expressions the host evaluates at the launch (CompileError if none)."""
        extents = []
        for e in s.extents:
            bound = self.host_bound(e)
            if bound is None:
                raise CompileError(f"Func {s.name} is stored in {where}, whose size must be known before the kernel "
                                   f"runs; its extent {expr_to_string(e)} depends on values computed inside the "
                                   "kernel: split the loops it is computed in by constant factors, or bound() its "
                                   "dimensions")
            extents.append(_max(bound, _const(0)))
        return tuple(extents)

    @staticmethod
    def _elements(extents) -> ir.Expr:
        n = _const(1)
        for e in extents:
            n = simplify(ir.Mul(n, e))
        return n

    def _in_heap(self, s: ir.Allocate, extents, per_thread: bool) -> None:
        """s as a slice of one global buffer, per block or per thread (see _blocks_slices)."""
        elements = self._elements(extents)
        known = self.heap.get(s.name)  # a Func's allocation copied (partitioned loops): one slice for all
        if known is not None:
            elements = _max(known[1], elements)
        self.heap[s.name] = (s, elements, per_thread)

    # -- second walk: the rewrite
    def block_level(self, s: ir.Stmt) -> ir.Stmt:
        """s runs with every thread of the block; returns it with thread loops mapped to threads."""
        if thread_depth(s) == 0:
            return self._single_thread(s)
        if isinstance(s, ir.For) and s.for_type in THREAD_KINDS:
            self._check_thread_level(s, "inside thread loops ")
            return ir.make_block([self._guard_unused_dims(self._thread_nest(s), thread_depth(s)), barrier()])
        if isinstance(s, ir.Allocate):
            body = self.block_level(s.body)
            if s.memory_type == LOCAL:
                return self._in_registers(s, body)
            if s.name in self.lifted and s.memory_type == "Auto":
                return self._shared_by_threads(s, body)
            return self._shared(s, body)
        if isinstance(s, ir.Block | ir.For | ir.LetStmt | ir.IfThenElse | ir.ProducerConsumer):
            return map_statements(s, self.block_level)
        raise CompileError(f"kernel {self.kernel_name}: a {type(s).__name__} around GPU thread loops is not supported")

    def _single_thread(self, s: ir.Stmt) -> ir.Stmt:
        if isinstance(s, ir.LetStmt):
            return ir.LetStmt(s.name, s.value, self._single_thread(s.body))
        if isinstance(s, ir.Allocate):
            return self._shared(s, self._single_thread(s.body))
        if isinstance(s, ir.Evaluate) and isinstance(s.value, ir.IntImm):
            return s
        self._check_thread_level(s, "")
        return ir.make_block([self._guard_unused_dims(self._one_thread(s), 0), barrier()])

    def _one_thread(self, s: ir.Stmt) -> ir.Stmt:
        """Code one thread runs (a gpu_single_thread stage, code outside thread loops): what it
        allocates inside its loops is that thread's own array."""
        if isinstance(s, ir.Allocate):
            return self._local(s, self._one_thread(s.body), "inside single-thread code (thread 0's) of")
        return map_statements(s, self._one_thread)

    def _guard_unused_dims(self, s: ir.Stmt, used: int) -> ir.Stmt:
        """s runs only on threads whose ids are 0 in the dimensions past `used`."""
        for d in range(2, used - 1, -1):
            if not ir.is_const(self.threads[d], 1):
                s = ir.IfThenElse(ir.EQ(ir.Variable(THREAD_IDS[d]), _const(0)), s)
        return s

    def _shared(self, s: ir.Allocate, body: ir.Stmt) -> ir.Stmt:
        if s.memory_type == HEAP:
            extents = self._extents(s, "GPU global memory, a slice per block")
            self._in_heap(s, extents, per_thread=False)
            return ir.Allocate(s.name, s.type, extents, body, HEAP)
        if s.memory_type not in ("Auto", SHARED):
            raise CompileError(f"Func {s.name} is computed at the block level of kernel {self.kernel_name}, where it "
                               f"lives in GPU shared memory (or global memory: Heap); store_in({s.memory_type}) is not "
                               "possible there")
        return self._in_shared(s, self._extents(s, "GPU shared memory"), body)

    def _in_shared(self, s: ir.Allocate, extents: tuple[ir.Expr, ...], body: ir.Stmt) -> ir.Stmt:
        elements = self._elements(extents)
        size = ir.const_int(elements)
        if size is None:  # sized at each launch, in the kernel's dynamic shared memory
            size = simplify(ir.Mul(elements, _const(s.type.bytes())))
            known = self.dynamic_shared.get(s.name)
            self.dynamic_shared[s.name] = size if known is None else _max(known, size)
            return ir.Allocate(s.name, s.type, extents, body, SHARED)
        size *= s.type.bytes()
        self.shared_bytes += size
        if self.shared_bytes > MAX_SHARED_BYTES:
            raise CompileError(f"Kernel {self.kernel_name} needs {self.shared_bytes} bytes of shared memory (Func "
                               f"{s.name} takes {size}); a block has at most {MAX_SHARED_BYTES}: use smaller tiles")
        return ir.Allocate(s.name, s.type, extents, body, SHARED)

    def dynamic_shared_layout(self) -> tuple[dict[str, ir.Expr], ir.Expr]:
        """Where each dynamically sized shared allocation starts in the dynamic shared memory
        (each 16-byte aligned, for vector accesses), and the bytes a block needs in all."""
        offsets, end = {}, _const(0)
        for name, size in self.dynamic_shared.items():
            offsets[name] = end
            sixteens = ir.Call(Int(32), DIV, (simplify(ir.Add(size, _const(15))), _const(16)), ir.INTRINSIC)
            end = simplify(ir.Add(end, ir.Mul(sixteens, _const(16))))
        return offsets, end

    def _in_registers(self, s: ir.Allocate, body: ir.Stmt) -> ir.Stmt:
        """store_in(Register) at block level: each thread's own elements (_thread_owned); but
        where gpu_lanes loops use it, lanes may read each other's elements (Halide's warp
        shuffles), and where they do it lives in shared memory instead: the same values."""
        try:
            return self._thread_owned(s, body)
        except CompileError:
            if not any(isinstance(x, ir.For) and x.for_type == ir.GPU_LANE for x in statements(s.body)):
                raise
            return self._shared_by_threads(s, body)

    def _shared_by_threads(self, s: ir.Allocate, body: ir.Stmt) -> ir.Stmt:
        """Storage threads share that Halide keeps in registers (striped over a warp's lanes,
        exchanged by shuffles; a Func computed inside thread loops and shared by thread loops
        inside them, moved here by gpu_thread_fission): shared memory where it fits beside what is
        there already, else a slice per block of global memory."""
        extents = self._extents(s, "GPU shared or global memory")
        elements = ir.const_int(self._elements(extents))
        if elements is not None and self.shared_bytes + elements * s.type.bytes() <= MAX_SHARED_BYTES:
            return self._in_shared(s, extents, body)
        self._in_heap(s, extents, per_thread=False)
        return ir.Allocate(s.name, s.type, extents, body, HEAP)

    def _thread_owned(self, s: ir.Allocate, body: ir.Stmt) -> ir.Stmt:
        """store_in(Register) at block level, as in Halide: each thread keeps the elements it
        touches in its own registers. Every access must be inside the thread loops, at an index
        that is a function of the thread ids plus a part that is a constant once loops inside are
        unrolled (a thread's tile of accumulators), or that serial loops inside with constant
        ranges walk; no two threads may touch the same element. The constants become slots of a
        per-thread array (packed; a walked tile's slots span a range, the array indexed from its
        least)."""
        where = f"Func {s.name} is stored in registers at the block level of kernel {self.kernel_name}"
        threads = [ir.const_int(t) for t in self.threads]
        if None in threads:
            raise CompileError(f"{where}, but the block's size is decided at the launch: give its thread loops "
                               "constant extents")
        ranges = {t: Interval(_const(0), _const(n - 1)) for t, n in zip(THREAD_IDS, threads)}
        owned = _ThreadOwnedAccesses(s.name, self.lets, ranges)
        owned.mutate(body)
        if owned.problem:
            raise CompileError(f"{where}, but {owned.problem}")
        slots = sorted(owned.slots)
        if len(owned.thread_parts) > 1:
            placements = " and ".join(sorted(expr_to_string(t) for t in owned.thread_parts)[:2])
            raise CompileError(f"{where}, but its accesses place threads differently ({placements}): every stage "
                               "must give each thread the same elements")
        for offset in owned.thread_parts:
            self._check_disjoint(where, offset, slots, owned.threads_used(threads))
        if owned.walked:
            rewrite = _ThreadOwnedAccesses(s.name, self.lets, ranges, slot_base=slots[0])
            elements = slots[-1] - slots[0] + 1
        else:
            rewrite = _ThreadOwnedAccesses(s.name, self.lets, ranges, {r: i for i, r in enumerate(slots)})
            elements = max(len(slots), 1)
        body = rewrite.mutate(body)
        size = elements * s.type.bytes()
        if size > MAX_LOCAL_BYTES:
            raise CompileError(f"{where}: {size} bytes per thread, at most {MAX_LOCAL_BYTES} are allowed")
        return ir.Allocate(s.name, s.type, (_const(elements),), body, LOCAL)

    @staticmethod
    def _check_disjoint(where: str, offset: ir.Expr, slots: list[int], threads) -> None:
        owner: dict[int, tuple[int, int, int]] = {}
        tx, ty, tz = threads
        for t in ((x, y, z) for z in range(tz) for y in range(ty) for x in range(tx)):
            base = ir.const_int(simplify(substitute(
                {THREAD_IDS[d]: ir.IntImm(Int(32), t[d]) for d in range(3)}, offset)))
            if base is None:
                raise CompileError(f"{where}, but the part of its index that depends on the thread "
                                   f"({expr_to_string(offset)}) is not a constant for each thread")
            for r in slots:
                other = owner.setdefault(base + r, t)
                if other != t:
                    raise CompileError(f"{where}, but threads {other} and {t} both touch its element {base + r}: "
                                       "registers are per thread; store it in GPUShared memory")

    def threads_per_block(self) -> list[ir.Expr]:
        """The block's size per dimension, as launched (a block has a thread where its loops have
        none)."""
        return [_max(t, _const(1)) for t in self.threads]

    def _local(self, s: ir.Allocate, body: ir.Stmt, where: str) -> ir.Stmt:
        """s as a GPU thread's own array: registers or local memory; or, stored in GPUShared or
        Heap memory, the thread's slice of a shared (global) allocation, as Halide places it."""
        if s.memory_type not in ("Auto", "Register", "Stack", SHARED, HEAP):
            raise CompileError(f"Func {s.name} is computed {where} kernel {self.kernel_name}, where each thread "
                               f"holds its own copy; store_in({s.memory_type}) is not possible there")
        extents = self._extents(s, "a GPU thread's local memory")
        elements = self._elements(extents)
        if s.memory_type == SHARED:
            per_block = self.threads_per_block()
            body = SliceAccesses(s.name, ir.Mul(_thread_number(per_block), elements)).mutate(body)
            return self._in_shared(s, (simplify(ir.Mul(elements, _product(per_block))),), body)
        size = ir.const_int(elements)
        if s.memory_type == HEAP or size is None:
            # Stored in Heap, or sized at the launch: a slice per thread of one global buffer, as
            # Halide places it.
            if s.memory_type not in ("Auto", HEAP):
                raise CompileError(f"Func {s.name} is computed {where} kernel {self.kernel_name} with a size decided "
                                   f"at the launch, so it lives in global memory; store_in({s.memory_type}) needs a "
                                   "size known when compiling: split its loops by constant factors")
            self._in_heap(s, extents, per_thread=True)
            return ir.Allocate(s.name, s.type, extents, body, HEAP)
        size *= s.type.bytes()
        if size > MAX_LOCAL_BYTES:
            raise CompileError(f"Func {s.name} needs {size} bytes per GPU thread in kernel {self.kernel_name}; at "
                               f"most {MAX_LOCAL_BYTES} are allowed: compute it at a more inner loop")
        return ir.Allocate(s.name, s.type, extents, body, LOCAL)

    def _thread_nest(self, s: ir.Stmt) -> ir.Stmt:
        """Inside a thread nest: thread loops become lets of thread ids, allocations local arrays."""
        if isinstance(s, ir.For) and s.for_type in THREAD_KINDS:
            dim = thread_depth(s) - 1
            tid = ir.Variable(THREAD_IDS[dim])
            body = self._thread_nest(s.body)
            bound, threads = ir.const_int(s.extent), ir.const_int(self.threads[dim])
            if bound is None or threads is None or bound < threads:
                body = ir.IfThenElse(ir.LT(tid, s.extent), body)
            return ir.LetStmt(s.name, _plus(s.min, tid), body)
        if isinstance(s, ir.Allocate):
            if shared_by_inner_threads(s):
                raise CompileError(f"Func {s.name} is computed inside the GPU thread loops of kernel "
                                   f"{self.kernel_name} and shared by thread loops inside them, but a loop or "
                                   "condition between them depends on the thread: compute it directly at a "
                                   "thread loop")
            return self._local(s, self._thread_nest(s.body), "inside the GPU thread loops of")
        if isinstance(s, ir.For) and s.for_type == ir.GPU_BLOCK:
            raise CompileError(f"Loop {s.name} is a gpu_block loop inside the GPU thread loops of kernel "
                               f"{self.kernel_name}: block loops must be outside thread loops")
        return map_statements(s, self._thread_nest)

    def _check_thread_level(self, s: ir.Stmt, where: str) -> None:
        for sub in statements(s):
            if isinstance(sub, ir.For) and sub.for_type in (ir.PARALLEL, ir.VECTORIZED):
                raise CompileError(f"Loop {sub.name} is a {sub.for_type} loop {where}in kernel {self.kernel_name}: "
                                   "a GPU kernel's loops are block, thread, serial or unrolled loops")
            if isinstance(sub, ir.AssertStmt):
                raise CompileError(f"kernel {self.kernel_name}: a run-time check inside a GPU kernel "
                                   f"({sub.message.split(',')[0]}) is not supported")


_ALL = -1


def _requires(s: ir.Stmt) -> bool:
    """Whether a hl.require is evaluated in s."""
    found = []

    class _Find(IRVisitor):
        def visit_Call(self, c):
            if c.call_type == ir.INTRINSIC and c.name == "require":
                found.append(c)
            self.visit_children(c)

    _Find().visit(s)
    return bool(found)


class _ThreadOwnedAccesses(LetScopeMutator):
    """The loads and stores of one block-level register Func, each index split into a part
    that depends on the thread ids and a constant slot (see _BlockLevel._thread_owned). With
    `slot_of`, rewrites each index to its slot's position."""

    statements_only = False  # the accesses are expressions

    def __init__(self, name: str, lets: dict[str, ir.Expr], thread_ranges: dict[str, Interval],
                 slot_of: dict[int, int] | None = None, slot_base: int | None = None):
        super().__init__()
        self.lets.update(lets)
        self.name, self.slot_of, self.slot_base = name, slot_of, slot_base
        self.loops: dict[str, tuple[int, int]] = {}  # enclosing loops with constant ranges: (min, extent)
        self.walked = False  # some access's slot depends on such a loop
        self.thread_ranges = thread_ranges  # a clamp that never binds for the block's threads is settled
        self.slots: set[int] = set()
        self.thread_parts: set[ir.Expr] = set()
        self.problem = ""
        self.in_threads = 0
        self.guards: list[tuple[int, int]] = []  # enclosing `thread id < n` conditions: (dimension, n)
        # per dimension, the most threads an access runs on: None before any access, _ALL where
        # some access is not limited by a guard
        self.most_threads: list[int | None] = [None, None, None]

    def threads_used(self, block) -> tuple[int, ...]:
        return tuple(b if n in (None, _ALL) else n for n, b in zip(self.most_threads, block))

    def visit_IfThenElse(self, s):
        c = s.condition
        guard = (isinstance(c, ir.LT) and isinstance(c.a, ir.Variable) and c.a.name in THREAD_IDS
                 and ir.const_int(c.b) is not None)
        if guard:
            self.guards.append((THREAD_IDS.index(c.a.name), ir.const_int(c.b)))
        try:
            return self.default(s)
        finally:
            if guard:
                self.guards.pop()

    def visit_LetStmt(self, s):
        thread_let = any(v in free_variables(s.value) for v in THREAD_IDS)
        self.in_threads += thread_let
        try:
            return super().visit_LetStmt(s)
        finally:
            self.in_threads -= thread_let

    def visit_For(self, s):
        lo, extent = (ir.const_int(simplify(substitute_lets(e, self.lets))) for e in (s.min, s.extent))
        known = lo is not None and extent is not None
        if known:
            self.loops[s.name] = (lo, extent)
        try:
            return self.default(s)
        finally:
            if known:
                del self.loops[s.name]

    def _walked_slots(self, rest: ir.Expr) -> tuple[list[int], ir.Expr, dict[str, ir.Expr]] | None:
        """Where rest names loops inside with constant ranges (a few thousand points at most) and
        is a constant at each of their points, affine in them: the values it takes, rest as that
        affine form of the loops, and the loops' first point (None otherwise)."""
        names = sorted(free_variables(rest) & set(self.loops))
        ranges = [self.loops[n] for n in names]
        if not names or math.prod(extent for _, extent in ranges) > 4096:
            return None
        at = {}
        for point in itertools.product(*(range(lo, lo + extent) for lo, extent in ranges)):
            at[point] = ir.const_int(simplify(substitute({n: _const(v) for n, v in zip(names, point)}, rest)))
            if at[point] is None:
                return None
        first = tuple(lo for lo, _ in ranges)
        steps = []
        for k, (_, extent) in enumerate(ranges):
            step = tuple(v + (1 if i == k and extent > 1 else 0) for i, v in enumerate(first))
            steps.append(at[step] - at[first])
        if any(value != at[first] + sum(c * (p - lo) for c, p, lo in zip(steps, point, first))
               for point, value in at.items()):
            return None
        form: ir.Expr = _const(at[first])
        for name, c, lo in zip(names, steps, first):
            form = ir.Add(form, ir.Mul(_const(c), ir.Sub(ir.Variable(name, Int(32)), _const(lo))))
        return sorted(set(at.values())), simplify(form), {n: _const(lo) for n, lo in zip(names, first)}

    def _slot(self, index: ir.Expr) -> ir.Expr:
        full = simplify(settle_choices(simplify(substitute_lets(index, self.lets)), self.thread_ranges))
        rest = simplify(substitute({t: ir.IntImm(Int(32), 0) for t in THREAD_IDS}, full))
        slot = ir.const_int(rest)
        walked = None if slot is not None else self._walked_slots(rest)
        if walked is None:
            thread_part = simplify(ir.Sub(full, rest))
        else:  # the thread's part where the loops start (the simplifier folds constants there)
            walked, rest, first = walked
            thread_part = simplify(ir.Sub(substitute(first, full), substitute(first, rest)))
        if not self.in_threads:
            self.problem = self.problem or "it is used outside the GPU thread loops"
        elif (slot is None and walked is None) or free_variables(thread_part) & set(self.loops):
            self.problem = self.problem or (f"the index {expr_to_string(full)} is not the thread's position plus a "
                                            "constant or a walk of loops of constant ranges inside the thread loops")
        else:
            self.slots.update([slot] if walked is None else walked)
            self.walked = self.walked or walked is not None
            self.thread_parts.add(thread_part)
            for d in range(3):
                limits = [n for dim, n in self.guards if dim == d]
                before = self.most_threads[d]
                if not limits or before == _ALL:
                    self.most_threads[d] = _ALL
                else:
                    self.most_threads[d] = max(before or 0, min(limits))
            if self.slot_base is not None:
                return simplify(ir.Sub(rest, _const(self.slot_base)))
            if self.slot_of is not None:
                return ir.IntImm(Int(32), self.slot_of[slot])
        return index

    def visit_Load(self, e):
        if e.name != self.name:
            return self.default(e)
        return ir.Load(e.type, e.name, self._slot(e.index), e.predicate)

    def visit_Store(self, s):
        if s.name != self.name:
            return self.default(s)
        return ir.Store(s.name, self.mutate(s.value), self._slot(s.index), s.predicate)


def map_statements(s: ir.Stmt, fn) -> ir.Stmt:
    """s with fn applied to each direct sub-statement (expressions unchanged)."""
    changed = {}
    for name in s._children:
        value = getattr(s, name)
        if isinstance(value, ir.Stmt):
            new = fn(value)
            if new is not value:
                changed[name] = new
        elif isinstance(value, tuple) and any(isinstance(v, ir.Stmt) for v in value):
            changed[name] = tuple(fn(v) if isinstance(v, ir.Stmt) else v for v in value)
    if not changed:
        return s
    return type(s)(*[changed.get(f, getattr(s, f)) for f in s.__dataclass_fields__])


def statements(s: ir.Stmt):
    yield s
    for name in s._children:
        value = getattr(s, name)
        if isinstance(value, ir.Stmt):
            yield from statements(value)
        elif isinstance(value, tuple):
            for v in value:
                if isinstance(v, ir.Stmt):
                    yield from statements(v)


def _drop_final_barriers(s: ir.Stmt) -> ir.Stmt:
    """No barrier is needed where nothing follows it in the kernel."""
    if isinstance(s, ir.Block):
        stmts = list(s.stmts)
        while stmts and is_barrier(stmts[-1]):
            stmts.pop()
        if stmts:
            stmts[-1] = _drop_final_barriers(stmts[-1])
        return ir.make_block(stmts)
    if isinstance(s, ir.LetStmt | ir.ProducerConsumer | ir.Allocate):
        return map_statements(s, _drop_final_barriers)
    if isinstance(s, ir.IfThenElse):  # uniform across the block: both branches end the kernel
        return map_statements(s, _drop_final_barriers)
    return s


class _ExtractKernels(LetScopeMutator):
    def __init__(self):
        super().__init__()
        self.kernels: list[Kernel] = []
        self.host_allocations: dict[str, ir.Allocate] = {}

    def visit_Allocate(self, s):
        if s.memory_type == SHARED:
            raise CompileError(f"Func {s.name} is stored in GPU shared memory but is computed outside any GPU block "
                               "loop: compute it at a gpu_blocks loop of its consumer")
        outer = self.host_allocations.get(s.name)
        self.host_allocations[s.name] = s
        body = self.mutate(s.body)
        if outer is None:
            del self.host_allocations[s.name]
        else:
            self.host_allocations[s.name] = outer
        return s if body is s.body else ir.Allocate(s.name, s.type, s.extents, body, s.memory_type)

    def visit_For(self, s):
        if s.for_type == ir.PARALLEL:
            # Kernels launch from one host thread, in order (Halide launches them from each of the
            # loop's threads into one stream, which runs them in order too): a parallel loop that
            # launches kernels runs serially on the host.
            launched = len(self.kernels)
            loop = self.default(s)
            if len(self.kernels) == launched:
                return loop
            return ir.For(loop.name, loop.min, loop.extent, ir.SERIAL, loop.body)
        if s.for_type == ir.GPU_BLOCK:
            return self._kernel(s)
        if s.for_type in THREAD_KINDS:
            raise CompileError(f"GPU thread loop {s.name} is not inside any gpu_blocks loop: a kernel's thread loops "
                               "go inside its block loops (gpu_tile makes both)")
        return self.default(s)

    def _kernel(self, s: ir.For) -> ir.Stmt:
        name = f"kernel_{len(self.kernels)}_" + re.sub(r"[^A-Za-z0-9_]", "_", s.name)  # a C identifier
        if _requires(s):
            raise CompileError(f"kernel {name}: hl.require inside a GPU kernel is not supported (a kernel cannot "
                               "stop the pipeline with an error): check it in a stage computed on the host")
        blocks = []  # (loop, lets between it and the next block loop)
        guards = []  # conditions between block loops (a GuardWithIf split's): moved inside them
        inner_names: set[str] = set()
        body = s
        while True:
            loop, lets = body, []
            for e in (loop.min, loop.extent):
                clash = free_variables(e) & inner_names
                if clash:
                    raise CompileError(f"GPU block loop {loop.name} of kernel {name} has bounds that depend on "
                                       f"{sorted(clash)[0]}, bound in an outer block loop: a grid is rectangular")
            inner_names.add(loop.name)
            body = loop.body
            while True:
                if isinstance(body, ir.LetStmt):
                    lets.append((body.name, body.value))
                    inner_names.add(body.name)
                    body = body.body
                elif isinstance(body, ir.IfThenElse) and body.else_case is None and _leads_to_block_loop(body):
                    guards.append(body.condition)
                    body = body.then_case
                else:
                    break
            blocks.append((loop, lets))
            if not (isinstance(body, ir.For) and body.for_type == ir.GPU_BLOCK):
                break
        for condition in reversed(guards):  # each block skips the work the guards leave out
            body = ir.IfThenElse(condition, body)
        if len(blocks) > 3:
            raise CompileError(f"Kernel {name} has {len(blocks)} nested gpu_block loops ({blocks[3][0].name} ...); "
                               "a GPU grid has at most 3 dimensions")
        lets = dict(self.lets)
        for _, between in blocks:
            lets.update(between)
        body, lifted = lift_thread_shared_allocations(body)
        level = _BlockLevel(name, lets, {n for _, between in blocks for n, _ in between}, [b for b, _ in blocks],
                            lifted)
        level.measure(body)
        inner = _drop_final_barriers(level.block_level(body))
        per_block = level.threads_per_block()
        constant = [ir.const_int(t) for t in per_block]
        problem = block_size_problem(name, [1 if n is None else n for n in constant])  # (the launch checks the rest)
        if problem:
            raise CompileError(problem)
        grid = [loop.extent for loop, _ in reversed(blocks)]
        inner = _blocks_slices(inner, level.heap, grid, per_block)
        offsets, dynamic_shared = level.dynamic_shared_layout()
        for alloc_name, offset in reversed(offsets.items()):
            inner = ir.LetStmt(shared_offset_name(alloc_name), offset, inner)
        for dim, (loop, lets) in enumerate(reversed(blocks)):  # innermost block loop is x
            for let_name, value in reversed(lets):
                inner = ir.LetStmt(let_name, value, inner)
            inner = ir.LetStmt(loop.name, _plus(loop.min, ir.Variable(BLOCK_IDS[dim])), inner)
        uses = _Uses()
        uses.visit(inner)
        private = {a.name for a in statements(inner) if isinstance(a, ir.Allocate)}
        buffers = tuple(KernelBuffer(n, uses.reads.get(n) or uses.writes[n], n in uses.reads, n in uses.writes)
                        for n in sorted((uses.reads.keys() | uses.writes.keys()) - private))
        ids = set(BLOCK_IDS) | set(THREAD_IDS)
        scalars = tuple(sorted((n, t) for n, t in uses.variables.items() if n not in uses.bound and n not in ids))
        kernel = Kernel(name, inner, None if None in constant else tuple(constant), len(blocks), buffers, scalars,
                        level.shared_bytes)
        args = [_const(len(self.kernels))]
        args += grid + [_const(1)] * (3 - len(grid))
        args += per_block
        args.append(dynamic_shared)
        blocks_total = _product([ir.Max(ir.Cast(Int(64), g), ir.IntImm(Int(64), 0)) for g in grid])
        threads_total = _product([ir.Cast(Int(64), t) for t in per_block])
        heap = {}
        for a, elements, per_thread in level.heap.values():  # a global buffer holding every block's (thread's) slice
            slices = ir.Mul(blocks_total, threads_total) if per_thread else blocks_total
            heap[a.name] = ir.Allocate(a.name, a.type, (ir.Mul(slices, ir.Cast(Int(64), elements)),),
                                       ir.Evaluate(_const(0)), HEAP)
        for b in buffers:
            args += [ir.StringImm(b.name), self._byte_size(heap.get(b.name) or self.host_allocations.get(b.name))]
        args += [ir.Variable(n, t) for n, t in scalars]
        self.kernels.append(kernel)
        launch: ir.Stmt = ir.Evaluate(ir.Call(Int(32), LAUNCH, tuple(args), ir.INTRINSIC))
        for a in heap.values():  # the host allocates the buffer (the device copy is what is used)
            launch = ir.Allocate(a.name, a.type, a.extents, launch, HEAP)
        return _after_maxima_over_blocks(level.per_block_maxima, [b for b, _ in blocks], launch)

    @staticmethod
    def _byte_size(alloc: ir.Allocate | None) -> ir.Expr:
        if alloc is None:
            return ir.IntImm(Int(64), -1)
        size: ir.Expr = ir.IntImm(Int(64), alloc.type.bytes())
        for e in alloc.extents:
            size = ir.Mul(size, ir.Max(ir.Cast(Int(64), e), ir.IntImm(Int(64), 0)))
        return size


def _after_maxima_over_blocks(maxima: dict[ir.Expr, str], blocks: list[ir.For], launch: ir.Stmt) -> ir.Stmt:
    """launch, preceded by a host loop over the kernel's grid that finds the largest value over
    the blocks of each expression in `maxima` (of the block loops and host values), bound to its
    name: how a kernel whose tiles differ in size learns the size to give every block."""
    if not maxima:
        return launch
    zero = _const(0)
    found = {name: name + ".found" for name in maxima.values()}
    update: ir.Stmt = ir.make_block([
        ir.Store(found[name], ir.Max(ir.Load(Int(32), found[name], zero), e), zero) for e, name in maxima.items()])
    for loop in reversed(blocks):
        update = ir.For(loop.name, loop.min, loop.extent, ir.SERIAL, update)
    for name in maxima.values():
        launch = ir.LetStmt(name, ir.Load(Int(32), found[name], zero), launch)
    body = ir.make_block([*(ir.Store(f, zero, zero) for f in found.values()), update, launch])
    for f in found.values():
        body = ir.Allocate(f, Int(32), (_const(1),), body, "Stack")
    return body


def _thread_number(block: list[ir.Expr]) -> ir.Expr:
    """A thread's number in its block (of the given size), x fastest."""
    x, y, z = (ir.Variable(t) for t in THREAD_IDS)
    return ir.Add(x, ir.Mul(block[0], ir.Add(y, ir.Mul(block[1], z))))


def _leads_to_block_loop(s: ir.Stmt) -> bool:
    """Whether s is, past lets and ifs without else, a gpu_block loop."""
    while isinstance(s, ir.LetStmt | ir.IfThenElse) and not (isinstance(s, ir.IfThenElse) and s.else_case):
        s = s.body if isinstance(s, ir.LetStmt) else s.then_case
    return isinstance(s, ir.For) and s.for_type == ir.GPU_BLOCK


def _product(values: list[ir.Expr]) -> ir.Expr:
    out = values[0]
    for v in values[1:]:
        out = ir.Mul(out, v)
    return out


def _blocks_slices(body: ir.Stmt, heap: dict[str, tuple[ir.Allocate, ir.Expr, bool]], grid: list[ir.Expr],
                   per_block: list[ir.Expr]) -> ir.Stmt:
    """As Halide places a Func stored in Heap memory at the block level (or one computed per thread
    with a size known only at the launch): one global buffer, made by the host before the launch,
    with a slice per block (per thread) of the most elements any needs."""
    if not heap:
        return body
    block = ir.Variable(BLOCK_IDS[len(grid) - 1])  # the block's number, x fastest
    for d in range(len(grid) - 2, -1, -1):
        block = ir.Add(ir.Mul(block, grid[d]), ir.Variable(BLOCK_IDS[d]))
    thread = ir.Add(ir.Mul(block, _product(per_block)), _thread_number(per_block))
    for a, elements, per_thread in heap.values():
        body = SliceAccesses(a.name, ir.Mul(thread if per_thread else block, elements)).mutate(body)
    return body


def gpu_kernels(stmt: ir.Stmt) -> tuple[ir.Stmt, list[Kernel]]:
    """The host Stmt and the kernels it launches (see the module docstring)."""
    extract = _ExtractKernels()
    host = extract.mutate(stmt)
    return host, extract.kernels
