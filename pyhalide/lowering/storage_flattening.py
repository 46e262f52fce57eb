"""Storage flattening: multi-dimensional Realize/Provide/Call become flat Allocate/Store/Load.

Assumes: bounds are defined. Guarantees: every buffer `b` is addressed through the variables
`b.min.<d>` and `b.stride.<d>`: pipeline arguments define them at entry, and each Allocate here
defines them with LetStmts (dense, dimension 0 innermost). No Realize, Provide or Func/image Call
remains; a prefetch of one becomes prefetch(buffer name, flat index).
"""

from __future__ import annotations

import itertools

from .. import ir
from ..extern import (
    CALL_EXTERN,
    EXTERN_EXPR,
    EXTERN_IMAGE,
    EXTERN_INPUT,
    EXTERN_OUTPUT,
    MAKE_BUFFER,
    image_name,
    make_buffer,
)
from ..ir_mutator import IRMutator, called_names
from ..types import Int
from .bounds_inference import buffer_field, buffer_names
from .remove_undef import is_unstored


def flat_index(buffer: str, args, folds=()) -> ir.Expr:
    index = None
    for d, a in enumerate(args):
        if folds and folds[d]:
            offset = ir.Mod(a, ir.make_const(Int(32), folds[d]))  # Euclidean: never negative
        else:
            offset = ir.Sub(a, buffer_field(buffer, "min", d))
        term = ir.Mul(offset, buffer_field(buffer, "stride", d))
        index = term if index is None else ir.Add(index, term)
    return index if index is not None else ir.make_const(Int(32), 0)


_EXTERN_ARGUMENTS = (EXTERN_INPUT, EXTERN_OUTPUT, EXTERN_IMAGE, EXTERN_EXPR)


class _Flatten(IRMutator):
    def __init__(self):
        super().__init__()
        self.tmp = itertools.count()
        self.folds: dict[str, tuple] = {}  # Func name -> fold factors of its enclosing Realize
        self.memo: dict[int, tuple] = {}  # expressions flattened under the current folds

    def mutate(self, node):
        if not isinstance(node, ir.Expr):
            return super().mutate(node)
        if isinstance(node, ir.Call) and node.call_type == ir.INTRINSIC and node.name == CALL_EXTERN:
            return ir.Call(node.type, node.name, tuple(self._extern_argument(a) for a in node.args), ir.INTRINSIC)
        if not called_names(node):
            return node  # reads no Func or image: nothing to flatten
        hit = self.memo.get(id(node))
        if hit is not None:
            return hit[1]
        result = super().mutate(node)
        self.memo[id(node)] = (node, result)  # keeps node alive, so its id stays unique
        return result

    def visit_Realize(self, r):
        saved = self.folds.get(r.name)
        self.folds[r.name] = r.folds
        self.memo = {}  # the folds changed
        body = self.mutate(r.body)
        self.folds[r.name] = saved
        self.memo = {}
        names = buffer_names(r.func)
        for name, t in zip(reversed(names), reversed(r.types)):
            extents = tuple(
                ir.make_const(Int(32), r.folds[d]) if r.folds and r.folds[d] else
                ir.Variable(f"{name}.extent.{d}", Int(32)) for d in range(len(r.bounds)))
            inner = ir.Allocate(name, t, extents, body, r.func._schedule.memory_type)
            # define the descriptor variables: dense strides, in storage order (dimension 0
            # innermost unless reorder_storage said otherwise)
            lets = []
            for d, (lo, ext) in enumerate(r.bounds):
                lets.append((f"{name}.min.{d}", lo))
                lets.append((f"{name}.extent.{d}", ext))
            order = r.func._schedule.storage_order or r.func._pure_args
            stride: ir.Expr = ir.make_const(Int(32), 1)
            for var in order:
                d = r.func._pure_args.index(var)
                lets.append((f"{name}.stride.{d}", stride))
                stored = ir.Variable(f"{name}.extent.{d}", Int(32))
                if r.folds and r.folds[d]:
                    stored = ir.make_const(Int(32), r.folds[d])
                stride = ir.Mul(stride, stored)
            for n, v in reversed(lets):
                inner = ir.LetStmt(n, v, inner)
            body = inner
        return body

    def visit_Provide(self, p):
        args = [self.mutate(a) for a in p.args]
        # (an element never defined is not stored: remove_undef)
        stored = [(n, self.mutate(v)) for n, v in zip(buffer_names(p.func), p.values) if not is_unstored(v)]
        if len(stored) == 1:
            name, value = stored[0]
            return ir.Store(name, value, flat_index(name, args, self.folds.get(p.name)))
        # A Tuple is read completely before any part of it is written.
        temps = [f"{p.name}.value{k}.t{next(self.tmp)}" for k in range(len(stored))]
        stores = [
            ir.Store(n, ir.Variable(t, v.type), flat_index(n, args, self.folds.get(p.name)))
            for (n, v), t in zip(stored, temps)
        ]
        body = ir.make_block(stores)
        for t, (_, v) in reversed(list(zip(temps, stored))):
            body = ir.LetStmt(t, v, body)
        return body

    def visit_Atomic(self, a):
        body = self.mutate(a.body)
        if not isinstance(body, ir.Store):  # a scatter's stores: they run under a lock
            return ir.Atomic(a.old, body)
        old = ir.Variable(a.old, body.value.type)

        class ReadsOfTarget(IRMutator):
            def visit_Load(self, e):
                if e.name == body.name and e.index == body.index:
                    return old
                return self.default(e)

        value = ReadsOfTarget().mutate(body.value)
        return ir.Atomic(a.old, ir.Store(body.name, value, body.index))

    def visit_Call(self, c):
        if c.call_type == ir.INTRINSIC and c.name == "prefetch":  # an address, never a load
            load = self.visit_Call(c.args[0])
            return ir.Call(c.type, "prefetch", (ir.StringImm(load.name), load.index), ir.INTRINSIC)
        if c.call_type == ir.HALIDE:
            name = buffer_names(c.func)[c.value_index]
        elif c.call_type == ir.IMAGE:
            name = c.name
        else:
            return self.default(c)
        args = [self.mutate(a) for a in c.args]
        folds = self.folds.get(c.name) if c.call_type == ir.HALIDE else None
        return ir.Load(c.type, name, flat_index(name, args, folds))


    def _extern_argument(self, c: ir.Expr) -> ir.Expr:
        """An extern stage's argument as the C function takes it: an expression as its value; a
        Func input or the output as a halide_buffer_t over its region (from its first corner, with
        its buffer's strides); an image whole."""
        if not (isinstance(c, ir.Call) and c.call_type == ir.INTRINSIC and c.name in _EXTERN_ARGUMENTS):
            return self.mutate(c)
        if c.name == EXTERN_EXPR:
            return self.mutate(c.args[0])
        ident = f"extern_buffer{next(self.tmp)}"
        if c.name == EXTERN_IMAGE:
            code, bits, *fields = c.args
            return ir.Call(c.type, MAKE_BUFFER, (ir.StringImm(ident), ir.StringImm(image_name(c)), code, bits,
                                                 ir.make_const(Int(32), len(fields) // 3), ir.make_const(Int(32), 0),
                                                 *fields), ir.INTRINSIC)
        first, last = c.args  # (storage_folding leaves what an extern stage reads or writes unfolded)
        name = buffer_names(first.func)[first.value_index]
        mins, maxs = [self.mutate(a) for a in first.args], [self.mutate(a) for a in last.args]
        dims = [(lo, ir.Add(ir.Sub(hi, lo), ir.make_const(Int(32), 1)), buffer_field(name, "stride", d))
                for d, (lo, hi) in enumerate(zip(mins, maxs))]
        return make_buffer(ident, name, c.type, flat_index(name, mins), dims)


def storage_flattening(stmt: ir.Stmt) -> ir.Stmt:
    return _Flatten().mutate(stmt)
