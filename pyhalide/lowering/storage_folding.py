"""Storage folding: a Func that slides along a loop keeps only a window of it, reused circularly.

Assumes: the windows sliding_window found (each for one Realize of f, where every site producing
f slides along it), and the Realize bounds from bounds inference.
Guarantees: where f slides in dimension d along loop L needing at most w coordinates per
iteration, and every use of f inside its Realize is in the consume body of its production, that
Realize keeps only F coordinates of d (F the power of two >= w, or the extent fold_storage
asked for, which must be >= w), at `coordinate mod F`. The window only moves forward, so a
coordinate is overwritten only once no iteration needs it.
"""

from __future__ import annotations

from .. import ir
from ..errors import CompileError
from ..extern import CALL_EXTERN
from ..ir_mutator import IRMutator, IRVisitor, called_names


class _CallsOutsideConsume(IRVisitor):
    """Is f read anywhere in its Realize other than in the consume body of its production?"""

    def __init__(self, name: str):
        super().__init__()
        self.name, self.found = name, False

    def visit(self, node):
        if isinstance(node, ir.Expr) and self.name not in called_names(node):
            return
        super().visit(node)

    def visit_ProducerConsumer(self, pc):
        if pc.name != self.name:
            self.visit_children(pc)

    def visit_Call(self, c):
        if c.call_type == ir.HALIDE and c.name == self.name:
            self.found = True
        self.visit_children(c)


def _passed_to_extern_stage(stmt: ir.Stmt, name: str) -> bool:
    """Whether an extern stage in stmt reads or writes Func `name` (see pyhalide/extern.py)."""

    class Find(IRVisitor):
        found = False

        def visit(self, node):
            if not self.found and not (isinstance(node, ir.Expr) and name not in called_names(node)):
                super().visit(node)

        def visit_Call(self, c):
            if c.call_type == ir.INTRINSIC and c.name == CALL_EXTERN:
                self.found = True
            self.visit_children(c)

    finder = Find()
    finder.visit(stmt)
    return finder.found


class _Fold(IRMutator):
    statements_only = True
    def __init__(self, window):
        super().__init__()
        self.window = window
        self.realizes = -1  # f's Realizes met so far, in the order sliding window met them

    def visit_Realize(self, r):
        if r.name == self.window.func:
            self.realizes += 1
        if r.name != self.window.func or self.realizes != self.window.realize:
            return self.default(r)  # (f has a Realize per stage of a consumer computing it)
        d = self.window.dim
        factor = 1
        while factor < self.window.width:
            factor *= 2
        var = r.func._pure_args[d]
        asked = r.func._schedule.folds.get(var)
        if asked is not None:
            extent, forward = asked
            if not forward:
                return r
            if extent < self.window.width:
                raise CompileError(f"Func {r.name}.fold_storage({var}, {extent}): each iteration of loop "
                                   f"{self.window.loop} needs {self.window.width} coordinates of {var}, more than "
                                   f"the fold holds")
            factor = extent
        extent = ir.const_int(r.bounds[d][1])
        if extent is not None and extent <= factor:
            return r
        outside = _CallsOutsideConsume(r.name)
        outside.visit(r.body)
        if outside.found or _passed_to_extern_stage(r.body, r.name):
            return r  # (an extern stage takes a buffer as dense as halide_buffer_t describes)
        folds = list(r.folds) if r.folds else [0] * len(r.bounds)
        folds[d] = factor
        return ir.Realize(r.name, r.types, r.bounds, r.body, r.func, tuple(folds))


def storage_folding(stmt: ir.Stmt, windows) -> ir.Stmt:
    for w in windows:
        if w.foldable:
            stmt = _Fold(w).mutate(stmt)
    return stmt
