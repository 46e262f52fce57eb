"""A hash of what an algorithm computes, for tuning records: the same for a renamed copy, different
for any change to a definition.

It covers the outputs and every Func they call (the algorithm as written: no schedule, no in_()
wrappers, no rfactor, no estimates), each definition's expressions with their types and
constants, RDom bounds and predicates, and the type and dimensionality of every input image and
Param. Names are replaced by positions: Funcs and inputs by the order a walk from the outputs
meets them, pure Vars by argument position, RVars by order of appearance. Input data and Param
values are run-time inputs, not part of the algorithm.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import fields

from . import ir
from .call_graph import bound_exprs, called_funcs, loop_exprs
from .types import Type

_FIELD_OF_IMAGE = re.compile(r"^(.*)\.(min|extent|stride)\.(\d+)$")


class _Hasher:
    def __init__(self):
        self.funcs: dict[int, int] = {}  # id(Func) -> position
        self.inputs: dict[int, str] = {}  # id(Buffer / ImageParam / Param) -> position token
        self.rvars: dict[str, str] = {}
        self.pure: dict[str, str] = {}  # the current Func's pure Vars
        self.memo: dict[int, tuple] = {}
        self.lets: dict[str, str] = {}  # the current Func's Let names -> tokens by place

    def func_token(self, f) -> str:
        return f"func{self.funcs[id(f)]}"

    def input_token(self, obj) -> str:
        token = self.inputs.get(id(obj))
        if token is None:
            shape = f"x{obj.dimensions()}" if hasattr(obj, "dimensions") else ""
            token = self.inputs[id(obj)] = f"in{len(self.inputs)}:{obj.type()}{shape}"
        return token

    def variable(self, v: ir.Variable) -> str:
        if v.name in self.pure and v.ref is None:
            return self.pure[v.name]
        if v.ref is not None and hasattr(v.ref, "rvars"):  # an RVar
            return self.rvars.setdefault(v.name, f"r{len(self.rvars)}")
        if v.ref is not None:  # a Param, or a field of an ImageParam
            m = _FIELD_OF_IMAGE.match(v.name)
            suffix = f".{m.group(2)}.{m.group(3)}" if m and hasattr(v.ref, "dimensions") else ""
            return self.input_token(v.ref) + suffix
        return self.lets.get(v.name, f"free:{v.name}")

    def node(self, n) -> str:
        """A digest of an IR node, memoised so shared subtrees cost once."""
        hit = self.memo.get(id(n))
        if hit is not None:
            return hit[1]
        parts = [type(n).__name__]
        if isinstance(n, ir.Let):  # a Let's name (one of a per-process counter) by its place
            self.lets.setdefault(n.name, f"let{len(self.lets)}")
        if isinstance(n, ir.Variable):
            parts += [self.variable(n), str(n.type)]
        else:
            for f in fields(n):
                if not f.compare:
                    continue
                parts.append(self.value(n, f.name, getattr(n, f.name)))
            if isinstance(n, ir.Call):
                if n.call_type == ir.HALIDE:
                    parts.append(self.func_token(n.func))
                elif n.call_type == ir.IMAGE:
                    parts.append(self.input_token(n.image))
        digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()
        self.memo[id(n)] = (n, digest)
        return digest

    def value(self, node, name: str, v) -> str:
        if isinstance(v, ir.Node):
            return self.node(v)
        if isinstance(v, tuple):
            return "(" + ",".join(self.value(node, name, x) for x in v) + ")"
        if isinstance(v, Type):
            return str(v)
        if isinstance(v, float):
            return v.hex()
        if name == "name" and isinstance(node, ir.Let):
            return self.lets[v]
        if name == "name" and isinstance(node, ir.Call):  # covered by its Func or input
            return "" if node.call_type in (ir.HALIDE, ir.IMAGE) else v
        return repr(v)

    def definition(self, d) -> str:
        parts = [self.node(e) for e in (*d.args, *d.values)]
        parts += ["rvars"] + [self.node(e) for e in bound_exprs(d)]
        parts += ["where", self.node(d.predicate) if d.predicate is not None else "-"]
        return "|".join(parts)


def structural_hash(outputs) -> str:
    """A hex digest of the algorithm computing `outputs` (a Func or a list of them)."""
    if not isinstance(outputs, list | tuple):
        outputs = [outputs]
    order: list = []
    h = _Hasher()
    stack = list(reversed(outputs))
    while stack:  # the algorithm's own graph, in a walk from the outputs
        f = stack.pop()
        if id(f) in h.funcs:
            continue
        h.funcs[id(f)] = len(order)
        order.append(f)
        callees = called_funcs([e for d in f.definitions() for e in (*loop_exprs(d), *bound_exprs(d))])
        stack.extend(reversed([g for g in callees.values() if id(g) not in h.funcs]))
    text = ["outputs " + " ".join(h.func_token(f) for f in outputs)]
    for f in order:
        h.pure = {name: f"x{i}" for i, name in enumerate(f._pure_args)}
        h.memo, h.lets = {}, {}  # pure Vars and lets are named per Func
        text.append(f"{h.func_token(f)} dims {len(f._pure_args)} types {','.join(map(str, f.types()))}")
        text += [h.definition(d) for d in f.definitions()]
    return hashlib.sha256("\n".join(text).encode()).hexdigest()
