"""Run-time checks inside GPU loop nests that hold or fail for the whole nest, made before it.

Assumes: the Stmt is about to have its GPU loop nests made kernels (gpu_kernels), GPU loops marked.

Guarantees: an AssertStmt inside an outermost gpu_block loop whose condition and message values
depend only on what the host has before the nest (through the nest's lets, resolved; no loop
variable of the nest, no load), and that no condition inside the nest guards, is moved before
the nest, as a host check of those values, made only where none of the nest's loops around it
is empty (it would not be reached: Halide's kernel would not run). A kernel cannot stop the pipeline with a message
(Halide's kernels trap, and the runtime reports the failure): a check that is the same for every
block and thread (a bound() that does not cover what a Func computed in the kernel must
provide, say) is made on the host instead: the same error, raised before the kernel runs. Checks
that vary within the nest stay where they are, for gpu_kernels to refuse.
"""

from __future__ import annotations

import dataclasses

from .. import ir
from ..ir_mutator import free_variables, has_load, substitute_lets
from .gpu_kernels import map_statements


class _Hoist:
    """The checks of one GPU loop nest that can move before it (`found`), removed from it."""

    def __init__(self):
        self.lets: dict[str, ir.Expr] = {}  # the nest's lets in scope, by name
        self.bound: set[str] = set()  # the nest's loop variables (and lets) in scope
        self.extents: list[ir.Expr] = []  # of the nest's loops around, their lets resolved
        self.found: list[ir.Stmt] = []

    def _invariant(self, e: ir.Expr) -> bool:
        return not (has_load(e) or free_variables(e) & self.bound)

    def stmt(self, s: ir.Stmt) -> ir.Stmt:
        if isinstance(s, ir.AssertStmt):
            values = [substitute_lets(e, self.lets) for e in (s.condition, *s.args)]
            if not all(self._invariant(e) for e in values):
                return s
            check: ir.Stmt = ir.AssertStmt(values[0], s.message, tuple(values[1:]))
            # made only where the nest reaches it: none of its loops around it is empty (those whose
            # extents the host knows; one that varies within the nest is taken as not empty)
            runs = [ir.GT(e, ir.make_const(e.type, 0)) for e in self.extents if self._invariant(e)]
            if runs:
                condition = runs[0]
                for r in runs[1:]:
                    condition = ir.And(condition, r)
                check = ir.IfThenElse(condition, check)
            self.found.append(check)
            return ir.make_block([])
        if isinstance(s, ir.IfThenElse):
            return s  # a check under a condition may not be reached
        if isinstance(s, ir.LetStmt | ir.For):
            name = s.name
            outer = self.lets.get(name), name in self.bound
            if isinstance(s, ir.LetStmt):
                self.lets[name] = s.value
            else:
                self.extents.append(substitute_lets(s.extent, self.lets))
                self.lets.pop(name, None)
            self.bound.add(name)
            body = self.stmt(s.body)
            if isinstance(s, ir.For):
                self.extents.pop()
            self.lets.pop(name, None)
            if outer[0] is not None:
                self.lets[name] = outer[0]
            if not outer[1]:
                self.bound.discard(name)
            return s if body is s.body else dataclasses.replace(s, body=body)
        return map_statements(s, self.stmt)


def _lift(s: ir.Stmt) -> ir.Stmt:
    if isinstance(s, ir.For) and s.for_type == ir.GPU_BLOCK:
        hoist = _Hoist()
        nest = hoist.stmt(s)
        return ir.make_block([*hoist.found, nest]) if hoist.found else s
    return map_statements(s, _lift)


def gpu_kernel_checks(stmt: ir.Stmt) -> ir.Stmt:
    return _lift(stmt)
