"""Bound small allocations: storage whose size is not written as a constant but never exceeds a
small constant is given that constant size, so that the code generator puts it on the stack once
per call instead of asking the heap for it in every iteration of the loops around it (Halide's
BoundSmallAllocations does the same).

camera_pipe's per-row Funcs (computed at a row loop, one row each) have the extent
`r_gr.y.max - r_gr.y.min + 1`: 1 once the lets are substituted, but not as written. Six of them
were allocated with malloc and freed in every row: 7% of the pipeline's time went to glibc.

Assumes: storage is flattened (Allocate nodes; the indices of a Func's elements use its extents
through lets of their own, not the Allocate's), and the Stmt is simplified. Guarantees: an
Allocate outside GPU loops whose every extent has a constant upper bound (through the enclosing
lets, or the enclosing loops' ranges) gets those bounds as its extents when it is stored on the
Stack or in Registers, or, inside a loop, with memory type Auto when they come to at most
STACK_LIMIT bytes; one inside GPU loops (shared memory, a thread's array: a kernel needs their
sizes when compiling) gets them whatever its size (the GPU passes check the limits); its storage
only grows, so every access stays inside it. Other Allocates are unchanged.
"""

from __future__ import annotations

from .. import ir
from ..bounds import constant_upper_bound_within
from ..errors import CompileError
from ..ir_mutator import LetScopeMutator, binding
from ..schedule import GPU_LOOP_KINDS

STACK_LIMIT = 16 * 1024  # bytes: storage of memory type Auto up to this size goes on the stack
EXPLICIT_STACK_LIMIT = 1 << 20  # store_in(Stack / Register): more would overflow a worker thread's stack


def constant_elements(s: ir.Allocate) -> int | None:
    """The number of elements an Allocate holds, if its extents are constants."""
    n = 1
    for e in s.extents:
        c = ir.const_int(e)
        if c is None:
            return None
        n *= max(c, 0)
    return n


def check_explicit_stack(s: ir.Allocate) -> None:
    """Refuse storage the schedule puts in Registers that cannot be there. (Stack storage of a
    size known only when running, or too large, goes to the heap, as Halide's pseudostack does.)"""
    if s.memory_type != "Register":
        return
    n = constant_elements(s)
    if n is None:
        raise CompileError(f"Allocation {s.name} has a dynamic size. Only fixed-size allocations can be stored in "
                           "registers. Try storing on the heap or stack instead.")
    if n * s.type.bytes() > EXPLICIT_STACK_LIMIT:
        raise CompileError(f"Func {s.name} is stored in Register memory but needs {n * s.type.bytes()} "
                           f"bytes; at most {EXPLICIT_STACK_LIMIT} fit on a thread's stack")


def placed_on_stack(s: ir.Allocate) -> bool:
    """Where the code generator puts storage: on the stack when its size is a constant and it is
    stored in Registers, or on the Stack in at most EXPLICIT_STACK_LIMIT bytes, or with memory
    type Auto in at most STACK_LIMIT bytes."""
    n = constant_elements(s)
    if n is None or s.memory_type not in ("Register", "Stack", "Auto"):
        return False
    limit = {"Register": None, "Stack": EXPLICIT_STACK_LIMIT, "Auto": STACK_LIMIT}[s.memory_type]
    return limit is None or n * s.type.bytes() <= limit


def bound_small_allocations(stmt: ir.Stmt) -> ir.Stmt:
    return _BoundSmallAllocations().mutate(stmt)


class _BoundSmallAllocations(LetScopeMutator):
    def __init__(self):
        super().__init__()
        self.loops: dict[str, ir.For] = {}
        self.in_kernel = False

    def visit_For(self, s):
        outer = self.in_kernel
        self.in_kernel = outer or s.for_type in GPU_LOOP_KINDS
        with binding(self.loops, s.name, s):
            body = self.mutate(s.body)
        self.in_kernel = outer
        return s if body is s.body else ir.For(s.name, s.min, s.extent, s.for_type, body)

    def visit_Allocate(self, s):
        body = self.mutate(s.body)
        extents = self._bounded_extents(s)
        if extents is None:
            return s if body is s.body else ir.Allocate(s.name, s.type, s.extents, body, s.memory_type)
        return ir.Allocate(s.name, s.type, extents, body, s.memory_type)

    def _bounded_extents(self, s: ir.Allocate) -> tuple | None:
        """The constant bounds to allocate, or None to leave the Allocate as it is."""
        if constant_elements(s) is not None:
            return None
        if self.in_kernel:  # shared memory and per-thread arrays need constant sizes, whatever the size
            return self._constant_bounds(s)
        if s.memory_type not in ("Auto", "Stack", "Register"):
            return None
        if s.memory_type == "Auto":
            # Storage outside every loop is allocated once per call: not worth the search. Nor
            # is storage whose constant extents alone pass the limit.
            known = s.type.bytes()
            for e in s.extents:
                known *= max(ir.const_int(e) or 1, 1)
            if not self.loops or known > STACK_LIMIT:
                return None
        bounds = self._constant_bounds(s)
        if bounds is None:
            return None
        size = s.type.bytes()
        for n in bounds:
            size *= n.value
        if s.memory_type == "Auto" and size > STACK_LIMIT:
            return None
        return bounds

    def _constant_bounds(self, s: ir.Allocate) -> tuple | None:
        extents = []
        for e in s.extents:
            most, _ = constant_upper_bound_within(e, self.lets, self.loops)
            if most is None:
                return None
            extents.append(ir.make_const(e.type, max(most, 0)))
        return tuple(extents)
