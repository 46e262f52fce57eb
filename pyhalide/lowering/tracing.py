"""Tracing: the events Halide's trace_stores / trace_loads / trace_realizations print.

Assumes: bounds inference has run (Realize nodes have their bounds, outputs their `NAME.min.D`
and `NAME.extent.D`); Provides and Func calls are not yet flattened.

Guarantees: for each traced Func f (value k of a Tuple as f.k), a `trace` intrinsic prints, in
Halide's text format,
- `Store f.k(x, y) = v` after each Provide (the value computed again for printing);
- `Load f.k(x, y) = v` where a consumer reads f (the call is wrapped: the trace's value is the
  load's);
- `Begin realization f.0(min, extent, ...)` / `End realization ...` around f's Realize (for an
  output, around the whole pipeline), and `Produce f.0(...)` / `End produce f.0(...)` around its
  production;
- and, when any Func is traced, `Begin pipeline out.0()` / `End pipeline out.0()` around it all,
  with a `Tag f.0() tag = "func_type_and_dim: ..."` line after it for each traced Func or image
  that has events (images first, then Funcs, producers first): its types (count, then code bits
  lanes each) and the box the pipeline touches of it (dimensions, then min extent each; 0 0
  where unbounded), as a tracing tool reads them.
- `Load img.0(x, y) = v` where the pipeline reads an ImageParam traced with trace_loads.
Values print as C's %lld and %f. Not as Halide: vectorized stores print one event per lane (a
traced loop stays scalar).
"""

from __future__ import annotations

from .. import ir
from ..bounds import box_touched
from ..ir_mutator import IRMutator, IRVisitor
from ..simplify import simplify
from ..types import Int
from .environment import pipeline_inputs

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


def _event(what: str, coords) -> ir.Stmt:
    """A statement printing `what(c0, c1, ...)`."""
    return ir.Evaluate(_trace(*_coordinates(what, coords)))


class _Tracing(IRMutator):
    def __init__(self, traced: dict, boxes: dict):
        super().__init__()
        self.traced = traced  # name -> set of "stores", "loads", "realizations"
        self.boxes = boxes  # name -> [min, extent, ...] of its realization
        self.touched: set[str] = set()  # the traced Funcs and images with events (Halide tags those)

    def _has(self, name: str, what: str) -> bool:
        return what in self.traced.get(name, ())

    def visit_Provide(self, s):
        traced = self.default(s)
        if not self._has(s.name, "stores"):
            return traced
        self.touched.add(s.name)
        # the values printed are computed again, from the untraced ones (no second Load event)
        events = [ir.Evaluate(_trace(ir.StringImm("Store "), *_coordinates(f"{s.name}.{k}", s.args),
                                     ir.StringImm(" = "), v)) for k, v in enumerate(s.values)]
        return ir.make_block([traced, *events])

    def visit_Call(self, e):
        e = self.default(e)
        if e.call_type not in (ir.HALIDE, ir.IMAGE) or not self._has(e.name, "loads"):
            return e
        self.touched.add(e.name)
        return _trace(ir.StringImm("Load "), *_coordinates(f"{e.name}.{e.value_index}", e.args),
                      ir.StringImm(" = "), e)

    def visit_Realize(self, s):
        body = self.mutate(s.body)
        if not self._has(s.name, "realizations"):
            return s if body is s.body else ir.Realize(s.name, s.types, s.bounds, body, s.func, s.folds)
        self.touched.add(s.name)
        box = [x for lo, ext in s.bounds for x in (lo, ext)]
        return ir.Realize(s.name, s.types, s.bounds, ir.make_block([
            _event(f"Begin realization {s.name}.0", box), body, _event(f"End realization {s.name}.0", box)]),
            s.func, s.folds)

    def visit_ProducerConsumer(self, s):
        body = self.mutate(s.body)
        if not (s.is_producer and self._has(s.name, "realizations")):
            return s if body is s.body else ir.ProducerConsumer(s.name, s.is_producer, body)
        box = self.boxes.get(s.name, [])
        return ir.ProducerConsumer(s.name, True, ir.make_block([
            _event(f"Produce {s.name}.0", box), body, _event(f"End produce {s.name}.0", box)]))


def tracing(stmt: ir.Stmt, env) -> ir.Stmt:
    images = {name: image for name, image in pipeline_inputs(env)[0].items() if getattr(image, "_trace", None)}
    traced = {name: f._trace for name, f in env.funcs.items() if f._trace}
    traced.update({name: image._trace for name, image in images.items()})
    if not traced:
        return stmt
    boxes = _realized_boxes(stmt)
    for f in env.outputs:
        boxes[f.name()] = [x for d in range(f.dimensions()) for x in
                           (ir.Variable(f"{f.name()}.min.{d}", _I32), ir.Variable(f"{f.name()}.extent.{d}", _I32))]
    t = _Tracing(traced, boxes)
    stmt = t.mutate(stmt)
    for f in env.outputs:
        if "realizations" in f._trace:
            t.touched.add(f.name())
            box = t.boxes[f.name()]
            stmt = ir.make_block([_event(f"Begin realization {f.name()}.0", box), stmt,
                                  _event(f"End realization {f.name()}.0", box)])
    # the images first (in Halide's order: reverse name order), then the Funcs, producers first
    tags = [_type_and_dim_tag(name, [image.type()], stmt) for name, image in sorted(images.items(), reverse=True)
            if name in t.touched]
    tags += [_type_and_dim_tag(f.name(), f.types(), stmt) for f in env.order if f.name() in t.touched]
    name = env.outputs[0].name()  # (printed as the pipeline's C name: codegen.runtime.as_printed)
    return ir.make_block([_event(f"Begin pipeline {name}.0", []), *tags, stmt, _event(f"End pipeline {name}.0", [])])


_TYPE_CODES = {"int": 0, "uint": 1, "float": 2, "handle": 3}


def _type_and_dim_tag(name: str, types: list, stmt: ir.Stmt) -> ir.Stmt:
    """Halide's first trace tag of a Func or input image: its types and the box touched of it in
    the pipeline."""
    box = box_touched(stmt, name, include_provides=True) or []
    codes = "".join(f" {_TYPE_CODES[t.code]} {t.bits} {t.lanes}" for t in types)
    parts = [ir.StringImm(f'Tag {name}.0() tag = "func_type_and_dim: {len(types)}{codes} {len(box)}')]
    for iv in box:
        if iv.is_bounded():
            extent = simplify(ir.Add(ir.Sub(iv.max, iv.min), ir.IntImm(_I32, 1)))
            parts += [ir.StringImm(" "), iv.min, ir.StringImm(" "), extent]
        else:
            parts.append(ir.StringImm(" 0 0"))
    parts.append(ir.StringImm('"'))
    return ir.Evaluate(_trace(*parts))


def _realized_boxes(stmt: ir.Stmt) -> dict:
    boxes = {}

    class Find(IRVisitor):
        statements_only = True

        def visit_Realize(self, s):
            boxes[s.name] = [x for lo, ext in s.bounds for x in (lo, ext)]
            self.visit_children(s)

    Find().visit(stmt)
    return boxes
