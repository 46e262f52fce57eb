"""Pipelines as data: Halide's `serialize_pipeline`, `deserialize_pipeline` and
`deserialize_parameters` (its lesson 23).

What is written: every Func of the algorithm (its pure definition and updates as IR, the types
and dimensions it was declared with, its estimates, tracing, its output buffers' constraints),
the RDoms, Params (type, value, range, estimate) and ImageParams (type, dimensions, constraints,
estimates) it uses, the Buffers it names (their elements, as .npy without pickles), the
pipeline's requirements, and the schedule (schedule_to_json, replayed as apply_schedule_json
replays it). The format is pyhalide's own JSON (Halide's .hlpipe files are FlatBuffers: neither
library reads the other's).

Loading executes nothing from the file: it is parsed as JSON, every IR node must be one of the
IR's expression classes with fields of the kinds they hold, every reference must name something
the file declares, and Funcs, Params and ImageParams are built with their own constructors. A
Param or ImageParam given in `user_params` under its name is used in place of the file's (its
type and dimensions must match), as Halide binds them; the others are made from the file.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import os

import numpy as np

from . import ir
from .errors import HalideError
from .schedule import schedule_to_json
from .types import Type

FORMAT, VERSION = "pyhalide.pipeline", 1
_REFERENCES = ("func", "param", "image", "output", "buffer", "domain")
_EXPR_CLASSES = {c.__name__: c for c in vars(ir).values()
                 if isinstance(c, type) and issubclass(c, ir.Expr) and dataclasses.is_dataclass(c)}


def serialize_pipeline(pipeline, filename=None, get_params: bool = False):
    """The pipeline as bytes, or written to `filename` (a path); with `get_params`, also the
    Params and ImageParams it uses by name: returns data, (data, params), None or params, as
    Halide's binding does for each combination."""
    writer = _Writer()
    data = json.dumps(writer.pipeline(pipeline), separators=(",", ":")).encode()
    params = {p.name(): p for p, _ in [*writer.params.values(), *writer.images.values()]}
    if filename is None:
        return (data, params) if get_params else data
    with open(os.fspath(filename), "wb") as f:
        f.write(data)
    return params if get_params else None


def deserialize_pipeline(data, user_params: dict | None = None):
    """The Pipeline that serialize_pipeline wrote (bytes, or a path to read)."""
    doc = _load(data)
    try:
        return _Reader(doc, user_params or {}).pipeline()
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:  # a field of the wrong shape
        raise HalideError(f"deserialize_pipeline: a malformed pipeline ({type(e).__name__}: {e})") from None


def deserialize_parameters(data) -> dict:
    """The Params and ImageParams a serialized pipeline uses, made anew, by name (pass them, or
    others of the same names, types and dimensions, to deserialize_pipeline)."""
    reader = _Reader(_load(data), {})
    return {p.name(): p for p in reader.inputs()}


def _load(data) -> dict:
    if isinstance(data, bytes | bytearray | memoryview):
        raw = bytes(data)
    else:
        with open(os.fspath(data), "rb") as f:
            raw = f.read()
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise HalideError(f"deserialize_pipeline: not a serialized pipeline ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise HalideError("deserialize_pipeline: not a pyhalide serialized pipeline (Halide's own .hlpipe files, "
                          "FlatBuffers, are not read)")
    if doc.get("version") != VERSION:
        raise HalideError(f"deserialize_pipeline: format version {doc.get('version')!r}; this pyhalide reads "
                          f"version {VERSION}")
    return doc


def _type(t: Type) -> list:
    return [str(t.code), int(t.bits), int(t.lanes)]


class _Writer:
    """Walks the algorithm from its outputs, numbering every Func, Param, ImageParam, Buffer and
    reduction domain it meets (by identity) as it encodes the IR that refers to them."""

    def __init__(self):
        self.funcs: dict[int, tuple] = {}  # id -> (Func, index)
        self.params: dict[int, tuple] = {}
        self.images: dict[int, tuple] = {}
        self.buffers: dict[int, tuple] = {}
        self.domains: dict[int, tuple] = {}
        self._pending = []

    def _number(self, table: dict, obj) -> int:
        entry = table.get(id(obj))
        if entry is None:
            entry = table[id(obj)] = (obj, len(table))
            if table is self.funcs or table is self.domains:
                self._pending.append(obj)
        return entry[1]

    def pipeline(self, pipeline) -> dict:
        self.names = pipeline._canonical_names()  # (the names the schedule's records use)
        outputs = [self._number(self.funcs, f) for f in pipeline.outputs()]
        funcs, domains = {}, {}
        self._drain(funcs, domains)
        requirements = [{"condition": self.expr(c), "args": [a if isinstance(a, str) else self.expr(a) for a in args]}
                        for c, args in pipeline._requirements]
        scheduled = pipeline.funcs()
        specializations = {self.names.get(f.name(), f.name()): [
            [k, [self._special(c, sp, f, k) for c, sp in st.specializations], st.fail_message]
            for k, st in enumerate(f._schedule.stages) if st.specializations or st.fail_message]
            for f in scheduled}
        self._drain(funcs, domains)  # what the requirements and specializations refer to
        return {
            "format": FORMAT, "version": VERSION, "outputs": outputs,
            "funcs": [funcs[k] for k in range(len(funcs))],
            "domains": [domains[k] for k in range(len(domains))],
            "params": [self._param(p) for p, _ in self.params.values()],
            "images": [self._image(p) for p, _ in self.images.values()],
            "buffers": [self._buffer(b) for b, _ in self.buffers.values()],
            "requirements": requirements,
            "schedule": json.loads(schedule_to_json(scheduled, self.names, without_specializations=True)),
            "specializations": {name: stages for name, stages in specializations.items() if stages},
        }

    def _drain(self, funcs: dict, domains: dict) -> None:
        """Encode the Funcs and reduction domains met so far (which may meet more)."""
        while self._pending:
            obj = self._pending.pop(0)
            if id(obj) in self.domains:
                domains[self.domains[id(obj)][1]] = self._domain(obj)
            else:
                funcs[self.funcs[id(obj)][1]] = self._func(obj)

    def _special(self, condition, special, f, stage: int) -> dict:
        """One specialization of a stage: its condition and its loops (a StageSchedule's state)."""
        if f.definition_of(stage, special) is not f.scheduled_definitions()[stage]:
            raise HalideError(f"serialize_pipeline: a specialization of {f.name()}.s{stage} computes a definition of "
                              "its own (rfactored on its own, or made before the stage was rfactored), which "
                              "pyhalide's format does not record")
        return {"condition": self.expr(condition), "splits": [dataclasses.asdict(sp) for sp in special.splits],
                "dims": [dataclasses.asdict(d) for d in special.dims], "atomic": special.atomic,
                "atomic_unchecked": special.atomic_unchecked,
                "allow_race_conditions": special.allow_race_conditions, "initialized": special.initialized,
                "gpu_single_thread": special.gpu_single_thread, "fail_message": special.fail_message,
                "specializations": [self._special(c, sp, f, stage) for c, sp in special.specializations]}

    def _func(self, f) -> dict:
        definitions = []
        for d in f.definitions():
            encoded = {"args": [self.expr(a) for a in d.args], "values": [self.expr(v) for v in d.values],
                       "predicate": None if d.predicate is None else self.expr(d.predicate)}
            encoded["rvars"] = [self._rvar(rv) for rv in d.rvars]
            definitions.append(encoded)
        declared = f._declared_types
        outputs = [self._constraints(p) for p in f.__dict__.get("_output_params") or []]
        return {"name": self.names.get(f.name(), f.name()), "pure_args": list(f._pure_args), "definitions": definitions,
                "declared": None if declared is None else [[_type(t) for t in declared[0]], declared[1]],
                "estimates": {k: list(v) for k, v in f._estimates.items()}, "trace": sorted(f._trace),
                "trace_tags": list(f._trace_tags), "output_constraints": outputs}

    def _rvar(self, rv) -> list:
        """[domain, dimension] of an update's RVar (its domain is one the update's IR refers to)."""
        for dom, k in self.domains.values():
            for i, other in enumerate(dom.rvars):
                if other is rv:
                    return [k, i]
        raise HalideError(f"serialize_pipeline: RVar {rv.name} belongs to no RDom the definition uses")

    def _constraints(self, p) -> dict:
        return {"constraints": [[d, fld, c if isinstance(c, int) else self.expr(c)] for d, fld, c in
                                p._constraint_list()], "stride0_free": p._stride0_free}

    def _domain(self, dom) -> dict:
        return {"rvars": [[rv.name, self.expr(rv.min), self.expr(rv.extent)] for rv in dom.rvars],
                "predicate": None if dom.predicate is None else self.expr(dom.predicate)}

    def _param(self, p) -> dict:
        return {"name": p.name(), "type": _type(p.type()), "value": p._value, "min": p._min, "max": p._max,
                "estimate": p._estimate}

    def _image(self, p) -> dict:
        return {"name": p.name(), "type": _type(p.type()), "dimensions": p.dimensions(),
                "estimates": [None if e is None else list(e) for e in p._estimates], "trace": sorted(p._trace),
                **self._constraints(p)}

    def _buffer(self, b) -> dict:
        out = io.BytesIO()
        elements = np.ascontiguousarray(b.numpy_view())
        if b.type().is_bfloat():  # (.npy has no bfloat16: its bits, the type given beside them)
            elements = elements.view(np.uint16)
        np.save(out, elements, allow_pickle=False)
        return {"name": b.name(), "mins": list(b._mins), "npy": base64.b64encode(out.getvalue()).decode(),
                "type": _type(b.type())}

    def ref(self, obj) -> list:
        from .buffer import Buffer
        from .func import Func
        from .param import ImageParam, OutputImageParam, Param
        from .var import ReductionDomain

        if isinstance(obj, Func):
            return ["func", self._number(self.funcs, obj)]
        if isinstance(obj, Param):
            return ["param", self._number(self.params, obj)]
        if isinstance(obj, ImageParam):
            return ["image", self._number(self.images, obj)]
        if isinstance(obj, OutputImageParam) and obj._func is not None:
            return ["output", self._number(self.funcs, obj._func), obj._func.output_buffers().index(obj)]
        if isinstance(obj, Buffer):
            return ["buffer", self._number(self.buffers, obj)]
        if isinstance(obj, ReductionDomain):
            return ["domain", self._number(self.domains, obj)]
        raise HalideError(f"serialize_pipeline: cannot write a reference to {obj!r}")

    def expr(self, e) -> list:
        fields = []
        for f in dataclasses.fields(e):
            v = getattr(e, f.name)
            if isinstance(v, ir.Expr):
                fields.append(self.expr(v))
            elif isinstance(v, Type):
                fields.append(["type", *_type(v)])
            elif isinstance(v, tuple):
                fields.append(["tuple", *[self.expr(x) for x in v]])
            elif f.name in ("func", "image", "ref"):
                fields.append(None if v is None else self.ref(v))
            else:
                fields.append(v)
        return [type(e).__name__, *fields]


class _Reader:
    """Builds the pipeline a document describes (see the module docstring)."""

    def __init__(self, doc: dict, user_params: dict):
        self.doc, self.user_params = doc, user_params
        self.params = [self._param(p) for p in self._list("params")]
        self.images = [self._image(p) for p in self._list("images")]
        self.buffers = [self._buffer(b) for b in self._list("buffers")]
        self.funcs = []
        self.domains = []
        for p, spec in zip(self.images, self._list("images")):
            if self.user_params.get(p.name()) is not p:  # (one given keeps its own constraints)
                self._constrain(p, spec)

    def _list(self, key: str) -> list:
        value = self.doc.get(key, [])
        _require(isinstance(value, list), f"'{key}' is not a list")
        return value

    def inputs(self) -> list:
        return [*self.params, *self.images]

    def pipeline(self):
        from .func import Func
        from .pipeline import Pipeline
        from .var import ReductionDomain, ReductionVariable

        funcs = self._list("funcs")
        self.funcs = [Func(_str(f.get("name"), "a Func's name")) for f in funcs]
        domains = self._list("domains")
        self.domains = [ReductionDomain([ReductionVariable(_str(rv[0], "an RVar's name"), None, None)
                                         for rv in _items(d.get("rvars"), "an RDom's dimensions")]) for d in domains]
        for dom, d in zip(self.domains, domains):
            for rv, (_, lo, extent) in zip(dom.rvars, d["rvars"]):
                rv.min, rv.extent = self.expr(lo), self.expr(extent)
            dom.predicate = None if d.get("predicate") is None else self.expr(d["predicate"])
        for f, spec in zip(self.funcs, funcs):
            self._define(f, spec)
        outputs = [self._at(self.funcs, k, "output") for k in _items(self.doc.get("outputs"), "the outputs")]
        _require(bool(outputs), "the pipeline has no outputs")
        pipeline = Pipeline(outputs)
        for r in self._list("requirements"):
            pipeline._requirements.append((self.expr(r["condition"]), tuple(
                a if isinstance(a, str) else self.expr(a) for a in _items(r.get("args"), "a requirement"))))
        schedule = self.doc.get("schedule")
        if schedule is not None:
            pipeline.apply_schedule_json(json.dumps(schedule))
        by_name = pipeline.funcs_by_name()
        for name, stages in (self.doc.get("specializations") or {}).items():
            f = by_name.get(name)
            _require(f is not None, f"specializations of Func {name}, which the pipeline lacks")
            for k, specials, fail_message in _items(stages, "specializations"):
                stage = self._at(f._schedule.stages, k, "stage")
                stage.specializations = [self._special(spec, stage) for spec in _items(specials, "specializations")]
                stage.fail_message = _str(fail_message, "a message") if fail_message else ""
            f._version += 1
        return pipeline

    def _special(self, spec: dict, base):
        """A specialization's (condition, StageSchedule), its loops from the file, the rest as the
        stage's."""
        from .schedule import Dim, Split

        special = base.copy()
        try:
            special.splits = [Split(**sp) for sp in _items(spec["splits"], "splits")]
            special.dims = [Dim(**d) for d in _items(spec["dims"], "loops")]
        except TypeError as e:
            raise HalideError(f"deserialize_pipeline: a malformed specialization ({e})") from None
        for key in ("atomic", "atomic_unchecked", "allow_race_conditions", "initialized", "gpu_single_thread"):
            setattr(special, key, bool(spec.get(key)))
        special.fail_message = str(spec.get("fail_message") or "")
        special.specializations = [self._special(s, special) for s in _items(spec.get("specializations"), "nested")]
        return self.expr(spec["condition"]), special

    def _define(self, f, spec: dict) -> None:
        from .func import Definition

        declared = spec.get("declared")
        if declared is not None:
            f._declared_types = (tuple(_make_type(t) for t in declared[0]), declared[1])
        pure = [_str(a, "a pure argument") for a in _items(spec.get("pure_args"), "pure arguments")]
        definitions = []
        for d in _items(spec.get("definitions"), "definitions"):
            rvars = []
            for k, i in _items(d.get("rvars"), "a definition's RVars"):
                dom = self._at(self.domains, k, "RDom")
                rvars.append(self._at(dom.rvars, i, "RVar"))
            definitions.append(Definition(
                tuple(self.expr(a) for a in _items(d.get("args"), "a definition's arguments")),
                tuple(self.expr(v) for v in _items(d.get("values"), "a definition's values")),
                tuple(rvars),
                None if d.get("predicate") is None else self.expr(d["predicate"])))
        _require(bool(definitions), f"Func {f.name()} has no definition")
        f._pure_args, f._init, f._updates = tuple(pure), definitions[0], definitions[1:]
        f._schedule.reset_stages(len(definitions))
        f._estimates = {str(k): (int(v[0]), int(v[1])) for k, v in (spec.get("estimates") or {}).items()}
        f._trace = frozenset(spec.get("trace") or ())
        f._trace_tags = tuple(spec.get("trace_tags") or ())
        for param, c in zip(f.output_buffers(), spec.get("output_constraints") or []):
            self._constrain(param, c)

    def _constrain(self, p, spec: dict) -> None:
        for d, fld, c in _items(spec.get("constraints"), "constraints"):
            p._constraints[d][fld] = c if isinstance(c, int) else self.expr(c)
        p._stride0_free = bool(spec.get("stride0_free"))

    def _param(self, spec: dict):
        from .param import Param

        name, t = _str(spec.get("name"), "a Param's name"), _make_type(spec.get("type"))
        given = self.user_params.get(name)
        if given is not None:
            _require(isinstance(given, Param) and given.type() == t,
                     f"user_params[{name!r}] must be a Param of type {t}, got {given!r}")
            return given
        p = Param(t, name)
        p.set_range(spec.get("min"), spec.get("max"))
        if spec.get("value") is not None:
            p.set(spec["value"])
        if spec.get("estimate") is not None:
            p.set_estimate(spec["estimate"])
        return p

    def _image(self, spec: dict):
        from .param import ImageParam

        name, t = _str(spec.get("name"), "an ImageParam's name"), _make_type(spec.get("type"))
        dims = spec.get("dimensions")
        given = self.user_params.get(name)
        if given is not None:
            _require(isinstance(given, ImageParam) and given.type() == t and given.dimensions() == dims,
                     f"user_params[{name!r}] must be an ImageParam of type {t} with {dims} dimensions, got {given!r}")
            return given
        p = ImageParam(t, dims, name)
        p._estimates = [None if e is None else (int(e[0]), int(e[1]))
                        for e in _items(spec.get("estimates"), "estimates")]
        p._trace = frozenset(spec.get("trace") or ())
        return p

    def _buffer(self, spec: dict):
        from .buffer import Buffer

        try:
            arr = np.load(io.BytesIO(base64.b64decode(spec["npy"])), allow_pickle=False)
        except (KeyError, ValueError, TypeError) as e:
            raise HalideError(f"deserialize_pipeline: a Buffer's elements are unreadable ({e})") from None
        if "type" in spec and _make_type(spec["type"]).is_bfloat():
            _require(arr.dtype == np.uint16, "a bfloat16 Buffer's elements are not its 16-bit bits")
            arr = arr.view(_make_type(spec["type"]).to_numpy())
        b = Buffer(arr, _str(spec.get("name"), "a Buffer's name"))
        mins = _items(spec.get("mins"), "a Buffer's mins")
        if any(mins):
            b.set_min(list(mins))
        return b

    @staticmethod
    def _at(table: list, k, what: str):
        _require(isinstance(k, int) and 0 <= k < len(table), f"a reference to {what} {k!r} that the file lacks")
        return table[k]

    def ref(self, spec):
        _require(isinstance(spec, list) and len(spec) >= 2 and spec[0] in _REFERENCES, f"an unknown reference {spec!r}")
        kind = spec[0]
        if kind == "output":
            return self._at(self.funcs, spec[1], "Func").output_buffers()[spec[2]]
        table = {"func": self.funcs, "param": self.params, "image": self.images, "buffer": self.buffers,
                 "domain": self.domains}[kind]
        return self._at(table, spec[1], kind)

    def expr(self, spec) -> ir.Expr:
        _require(isinstance(spec, list) and spec and spec[0] in _EXPR_CLASSES, f"an unknown IR node {spec!r:.80}")
        cls = _EXPR_CLASSES[spec[0]]
        fields = dataclasses.fields(cls)
        _require(len(spec) == len(fields) + 1, f"{spec[0]} takes {len(fields)} fields")
        values = {}
        for f, v in zip(fields, spec[1:]):
            if f.name in ("func", "image", "ref"):
                values[f.name] = None if v is None else self.ref(v)
            elif isinstance(v, list) and v and v[0] == "type":
                values[f.name] = _make_type(v[1:])
            elif isinstance(v, list) and v and v[0] == "tuple":
                values[f.name] = tuple(self.expr(x) for x in v[1:])
            elif isinstance(v, list):
                values[f.name] = self.expr(v)
            else:
                _require(v is None or isinstance(v, int | float | str), f"{spec[0]}.{f.name} is {v!r:.80}")
                values[f.name] = v
        node = cls(**values)
        return _renamed(node)


def _renamed(node: ir.Expr) -> ir.Expr:
    """A node naming what it refers to by the name that thing has in this process (a Func made
    here may be `f$1`)."""
    if isinstance(node, ir.Call) and node.func is not None and node.name != node.func.name():
        return dataclasses.replace(node, name=node.func.name())
    if isinstance(node, ir.Call) and node.image is not None and node.name != node.image.name():
        return dataclasses.replace(node, name=node.image.name())
    if isinstance(node, ir.Variable) and node.ref is not None and not hasattr(node.ref, "rvars"):
        from .param import Param

        owner = node.ref.name()
        # a Param is its name; a buffer's field (of an ImageParam, an output, a Buffer) NAME.field.dim
        name = owner if isinstance(node.ref, Param) else ".".join([owner, *node.name.rsplit(".", 2)[-2:]])
        if name != node.name:
            return dataclasses.replace(node, name=name)
    return node


def _make_type(spec) -> Type:
    _require(isinstance(spec, list) and len(spec) == 3 and spec[0] in ("int", "uint", "float", "handle", "bfloat")
             and isinstance(spec[1], int) and isinstance(spec[2], int), f"a malformed type {spec!r}")
    return Type(spec[0], spec[1], spec[2])


def _items(value, what: str) -> list:
    _require(isinstance(value, list), f"{what} is not a list")
    return value


def _str(value, what: str) -> str:
    _require(isinstance(value, str) and value, f"{what} is not a name")
    return value


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise HalideError(f"deserialize_pipeline: {message}")
