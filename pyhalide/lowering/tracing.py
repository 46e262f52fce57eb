"""Tracing: the loads and stores Halide's trace_stores / trace_loads print (the realization
events of trace_realizations go in later, in trace_realizations.py, when the Realizes are sized).

Assumes: bounds inference has run (outputs have their `NAME.min.D` and `NAME.extent.D`);
Provides and Func calls are not yet flattened, nor moved by sliding window.

Guarantees: for each traced Func f (value k of a Tuple as f.k), a `trace` intrinsic prints, in
Halide's text format,
- `Store f.k(x, y) = v` after each Provide (the value computed once, in a let, stored and printed);
- `Load f.k(x, y) = v` where a consumer reads f (the call is wrapped: the trace's value is the
  load's), and `Load img.0(x, y) = v` where it reads an ImageParam traced with trace_loads;
- and, when anything is traced, `Begin pipeline out.0()` / `End pipeline out.0()` around it all,
  with a `Tag f.0() tag = "func_type_and_dim: ..."` line after it for each traced Func or image
  that has events (images first, then Funcs, producers first): its types (count, then code bits
  lanes each) and the box the pipeline touches of it (dimensions, then min extent each; 0 0
  where unbounded), as a tracing tool reads them, and an output's `Begin realization f.0(min,
  extent, ...)` / `End realization ...` around the rest; then `Tag f.0() tag = "..."` for each tag
  `add_trace_tag` gave a Func whose loads or realizations are traced (Halide prints no others).
Values print as C's %lld and %f.
"""

from __future__ import annotations

from .. import ir
from ..bounds import box_touched
from ..ir_mutator import IRMutator
from ..simplify import simplify
from ..types import TYPE_CODES, Int
from .copy_graph import to_user_names
from .environment import pipeline_inputs
from .remove_undef import is_unstored

_I32 = Int(32)


def _trace(*parts) -> ir.Expr:
    """A trace event; its value (and type) is its last Expr part's (Int(32) 0 if it has none)."""
    values = [p for p in parts if not isinstance(p, ir.StringImm)]
    return ir.Call(values[-1].type if values else _I32, "trace", tuple(parts), ir.INTRINSIC)


def _coordinates(head: str, coords) -> list:
    parts = [ir.StringImm(head + "(")]
    for i, c in enumerate(coords):
        if i:
            parts.append(ir.StringImm(", "))
        parts.append(c)
    parts.append(ir.StringImm(")"))
    return parts


class _InUserNames(IRMutator):
    def __init__(self, user_names: dict[str, str]):
        super().__init__()
        self.user_names = user_names

    def visit_Call(self, e):
        e = self.default(e)
        if e.name != "trace" or e.call_type != ir.INTRINSIC:
            return e
        args = tuple(ir.StringImm(to_user_names(a.value, self.user_names)) if isinstance(a, ir.StringImm) else a
                     for a in e.args)
        return ir.Call(e.type, e.name, args, e.call_type)


def in_user_names(stmt: ir.Stmt, user_names: dict[str, str]) -> ir.Stmt:
    """The trace events' text in the user's names of the Funcs copy_graph renamed, written in as
    it is lowered (what print() writes is the user's own text, printed as it is)."""
    return _InUserNames(user_names).mutate(stmt) if user_names else stmt


def trace_event(what: str, coords) -> ir.Stmt:
    """A statement printing `what(c0, c1, ...)`."""
    return ir.Evaluate(_trace(*_coordinates(what, coords)))


class _Tracing(IRMutator):
    def __init__(self, traced: dict, trace_tags: dict):
        super().__init__()
        self.traced = traced  # name -> set of "stores", "loads", "realizations"
        self.trace_tags = trace_tags  # name -> add_trace_tag's tags
        self.touched: set[str] = set()  # the traced Funcs and images with events (Halide tags those)
        self.tagged: list[str] = []  # whose add_trace_tag tags print, in the order Halide meets them
        self.stores = 0  # traced Provides so far (their lets' names are unique)

    def _has(self, name: str, what: str) -> bool:
        return what in self.traced.get(name, ())

    def _meet(self, name: str) -> None:
        """A traced load or realization of `name`: its own tags print (once, in this order)."""
        self.touched.add(name)
        if self.trace_tags.get(name) and name not in self.tagged:
            self.tagged.append(name)

    def visit_Provide(self, s):
        traced = self.default(s)
        if not self._has(s.name, "stores"):
            return traced
        self.touched.add(s.name)
        # Each value is computed once, in a let, and both stored and printed: its Load events and
        # any print() in it happen once, as in Halide.
        # (an element never defined is neither stored nor traced: remove_undef)
        stored = [k for k, v in enumerate(traced.values) if not is_unstored(v)]
        names = {k: f"{s.name}.stored.{k}.{self.stores}" for k in stored}
        self.stores += 1
        values = tuple(ir.Variable(names[k], v.type) if k in names else v for k, v in enumerate(traced.values))
        events = [ir.Evaluate(_trace(ir.StringImm("Store "), *_coordinates(f"{s.name}.{k}", traced.args),
                                     ir.StringImm(" = "), values[k])) for k in stored]
        body = ir.make_block([ir.Provide(s.name, values, traced.args, traced.func), *events])
        for k in reversed(stored):
            body = ir.LetStmt(names[k], traced.values[k], body)
        return body

    def visit_Call(self, e):
        e = self.default(e)
        if e.call_type not in (ir.HALIDE, ir.IMAGE) or not self._has(e.name, "loads"):
            return e
        self._meet(e.name)
        return _trace(ir.StringImm("Load "), *_coordinates(f"{e.name}.{e.value_index}", e.args),
                      ir.StringImm(" = "), e)

    def visit_Realize(self, s):
        result = self.default(s)
        if self._has(s.name, "realizations"):
            self._meet(s.name)  # (after its body, as Halide)
        return result


def tracing(stmt: ir.Stmt, env) -> ir.Stmt:
    images = {name: image for name, image in pipeline_inputs(env)[0].items() if getattr(image, "_trace", None)}
    traced = {name: f._trace for name, f in env.funcs.items() if f._trace}
    traced.update({name: image._trace for name, image in images.items()})
    if not traced:
        return stmt
    t = _Tracing(traced, {name: f._trace_tags for name, f in env.funcs.items()})
    stmt = t.mutate(stmt)
    for f in env.outputs:
        if "realizations" in f._trace:
            t._meet(f.name())
            box = [x for d in range(f.dimensions()) for x in
                   (ir.Variable(f"{f.name()}.min.{d}", _I32), ir.Variable(f"{f.name()}.extent.{d}", _I32))]
            stmt = ir.make_block([trace_event(f"Begin realization {f.name()}.0", box), stmt,
                                  trace_event(f"End realization {f.name()}.0", box)])
    # the images first (in Halide's order: reverse name order), then the Funcs, producers first,
    # then the tags add_trace_tag gave
    tags = [_type_and_dim_tag(name, [image.type()], stmt) for name, image in sorted(images.items(), reverse=True)
            if name in t.touched]
    tags += [_type_and_dim_tag(f.name(), f.types(), stmt) for f in env.order if f.name() in t.touched]
    tags += [ir.Evaluate(_trace(ir.StringImm(f'Tag {name}.0() tag = "{tag}"')))
             for name in reversed(t.tagged) for tag in env.funcs[name]._trace_tags]  # (Halide: last met first)
    name = env.outputs[0].name()  # (printed as the pipeline's C name: codegen.runtime.as_printed)
    begin, end = trace_event(f"Begin pipeline {name}.0", []), trace_event(f"End pipeline {name}.0", [])
    return in_user_names(ir.make_block([begin, *tags, stmt, end]), env.user_names)


def _type_and_dim_tag(name: str, types: list, stmt: ir.Stmt) -> ir.Stmt:
    """Halide's first trace tag of a Func or input image: its types and the box touched of it in
    the pipeline."""
    box = box_touched(stmt, name, include_provides=True) or []
    codes = "".join(f" {TYPE_CODES[t.code]} {t.bits} {t.lanes}" for t in types)
    parts = [ir.StringImm(f'Tag {name}.0() tag = "func_type_and_dim: {len(types)}{codes} {len(box)}')]
    for iv in box:
        if iv.is_bounded():
            extent = simplify(ir.Add(ir.Sub(iv.max, iv.min), ir.IntImm(_I32, 1)))
            parts += [ir.StringImm(" "), iv.min, ir.StringImm(" "), extent]
        else:
            parts.append(ir.StringImm(" 0 0"))
    parts.append(ir.StringImm('"'))
    return ir.Evaluate(_trace(*parts))
