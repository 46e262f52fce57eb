"""hl.scatter and hl.gather: one update definition that stores several values to several sites.

`f[x, hl.scatter(a, b)] = hl.gather(u, v)` stores u at f(x, a) and v at f(x, b). As in Halide,
both are the one intrinsic Call `scatter_gather` (they differ only in where they are written), and
every operation distributes over its elements: element k of a definition is the definition with
each scatter_gather replaced by its k-th argument (a plain Expr is the same in every element).
An iteration computes all its elements' values and sites before it stores any, then stores them
left to right (so `f[scatter(i, j)] = f[gather(j, i)]` swaps, and a repeated site keeps the last
value). Lowering (schedule_functions) and the reference evaluator both follow `elements`.

A pure definition's sites are its Vars, so all of a gather's elements go to one site and the
last remains: Func keeps that element alone (Halide's result where the Func is computed; where
Halide inlines it into a definition that scatters too, its elements pair with that definition's,
a result that depends on the schedule, which pyhalide's does not).
"""

from __future__ import annotations

from . import ir
from .errors import HalideError
from .expr import Expr, coerce_python, is_python_number, to_ir, wrap
from .ir_mutator import IRMutator, IRVisitor, has_call

SCATTER_GATHER = "scatter_gather"


def _make(what: str, elements) -> Expr:
    """The Call: Python numbers take the type of the Expr elements (all of which must agree, where
    Halide would silently reinterpret the others as the first one's type)."""
    if len(elements) == 1 and isinstance(elements[0], list | tuple):
        elements = elements[0]
    if not elements:
        raise HalideError(f"{what}() needs at least one element")
    typed = [to_ir(e) for e in elements if not is_python_number(e)]
    t = typed[0].type if typed else None
    irs = [to_ir(e) if t is None or not is_python_number(e) else coerce_python(e, t) for e in elements]
    if any(e.type != irs[0].type for e in irs):
        types = ", ".join(str(e.type) for e in irs)
        raise HalideError(f"{what}() of elements of different types ({types}): cast them to one type")
    return wrap(ir.Call(irs[0].type, SCATTER_GATHER, tuple(irs), ir.INTRINSIC))


def scatter(*elements) -> Expr:
    """Several sites of one update definition's left-hand side: `f[hl.scatter(0, 1)] = ...`
    (a list, or the elements as arguments)."""
    return _make("scatter", elements)


def gather(*elements) -> Expr:
    """Several values, stored to the matching sites of the left-hand side's scatter."""
    return _make("gather", elements)


def _is_scatter_gather(e) -> bool:
    return isinstance(e, ir.Call) and e.call_type == ir.INTRINSIC and e.name == SCATTER_GATHER


class _Find(IRVisitor):
    """The outermost scatter_gather Calls of an expression."""

    visit_once = True

    def __init__(self):
        super().__init__()
        self.found: list[ir.Call] = []

    def visit(self, node):
        if isinstance(node, ir.Expr) and not has_call(node):
            return
        super().visit(node)

    def visit_Call(self, c):
        if _is_scatter_gather(c):
            self.found.append(c)
        else:
            self.visit_children(c)


def _outermost(exprs) -> list[ir.Call]:
    finder = _Find()
    for e in exprs:
        finder.visit(e)
    return finder.found


def size(exprs, where: str) -> int:
    """How many elements the scatters and gathers in exprs have (0 if there are none); refuses
    nested ones and ones of different sizes, as Halide does (`where` names the definition)."""
    calls = _outermost(exprs)
    if not calls:
        return 0
    if _outermost(a for c in calls for a in c.args):
        raise HalideError(f"{where}: a scatter or gather nested inside another")
    sizes = sorted({len(c.args) for c in calls})
    if len(sizes) > 1:
        raise HalideError(f"{where}: scatters and gathers of different sizes ({' vs '.join(map(str, sizes))}): "
                          "the k-th element of each goes with the k-th of the others")
    return sizes[0]


def refuse(e: ir.Expr, what: str) -> None:
    """Only a Func definition's arguments and values can scatter or gather."""
    if _outermost([e]):
        raise HalideError(f"scatter/gather expression used outside of a Func definition (in {what})")


class _Element(IRMutator):
    def __init__(self, k: int):
        super().__init__()
        self.k = k
        self.memo: dict[int, tuple] = {}  # by node: definitions are expression DAGs

    def mutate(self, node):
        if not isinstance(node, ir.Expr) or not has_call(node):
            return node
        hit = self.memo.get(id(node))
        if hit is None:
            out = node.args[self.k] if _is_scatter_gather(node) else self.default(node)
            hit = self.memo[id(node)] = (node, out)  # (node kept: its id stays its own)
        return hit[1]


def elements(args: tuple, values: tuple, n: int) -> list[tuple[tuple, tuple]]:
    """(args, values) of each of the n elements of a definition (itself where n is 0)."""
    if n == 0:
        return [(args, values)]
    result = []
    for k in range(n):
        element = _Element(k)
        result.append((tuple(map(element.mutate, args)), tuple(map(element.mutate, values))))
    return result
