"""Name the subexpressions a scalar let's value shares, so code generators emit each once.

Bounds inference builds a Func's bounds from its consumers' by substitution, and a pyramid of
them (interpolate's levels, each reading the last) shares subtrees many times over: a let of a
few hundred distinct nodes walks as a tree of ten thousand, and the LLVM code generator, which
walks trees, spent seconds on them. Each such value goes through common subexpression
elimination here, as Halide's late CSE pass does: shared subexpressions become Lets.

Assumes: the passes that read lets' values symbolically (bounds, sliding window, partitioning,
simplification) are done. Guarantees: what each let computes is unchanged; vector values are left
as they are (instruction selection has matched their patterns).
"""

from __future__ import annotations

from .. import ir
from ..cse import common_subexpression_elimination
from ..ir_mutator import IRMutator, children

MIN_TREE = 256  # a value whose tree is smaller is emitted as it is
MIN_SHARING = 4  # nor one whose tree is less than this many times its graph


def name_shared_subexpressions(stmt: ir.Stmt) -> ir.Stmt:
    return _SharedLets().mutate(stmt)


class _SharedLets(IRMutator):
    statements_only = True

    def visit_LetStmt(self, s):
        value = s.value
        if value.type.lanes == 1 and _shared_enough(value):
            value = common_subexpression_elimination(value, prefix=f"{s.name}.cse")
        body = self.mutate(s.body)
        if value is s.value and body is s.body:
            return s
        return ir.LetStmt(s.name, value, body)


def _shared_enough(e: ir.Expr) -> bool:
    """Whether e's tree has MIN_TREE nodes and MIN_SHARING times as many as its graph (counted
    once per distinct node, so it costs the graph's size)."""
    tree: dict[int, int] = {}
    stack = [(e, False)]
    while stack:  # depth first: a node's size once all its children's are known
        n, expanded = stack.pop()
        if id(n) in tree:
            continue
        if expanded:
            tree[id(n)] = 1 + sum(tree[id(c)] for c in children(n))
            continue
        stack.append((n, True))
        stack.extend((c, False) for c in children(n) if id(c) not in tree)
    size = tree[id(e)]
    return size >= MIN_TREE and size >= MIN_SHARING * len(tree)
