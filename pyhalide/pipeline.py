"""Pipeline: one or more output Funcs, lowered and compiled together, then realized."""

from __future__ import annotations

import enum
import html
import math
import operator

import numpy as np

from . import param as _param
from .buffer import MAX_ELEMENTS, Buffer, aligned_zeros
from .deep_recursion import deep
from .errors import HalideError, InternalError, LayoutMismatch
from .extern import BoundsQueries, JITExterns, is_extern
from .func import Func
from .ir_printer import stmt_to_string
from .lowering.copy_graph import to_user_names
from .names import func_name_family
from .types import Int


class Realization(list):
    """The Buffers of a multi-output realization (Halide's hl.Realization): a list of Buffers,
    built from Buffers to realize into, or returned by realize(sizes) of several outputs."""

    def __init__(self, buffers):
        super().__init__([buffers] if isinstance(buffers, Buffer) else buffers)
        bad = [b for b in self if not isinstance(b, Buffer)]
        if not self or bad:
            raise HalideError(f"Realization takes one or more hl.Buffers, got {bad[0] if bad else 'none'!r}")

    def size(self) -> int:
        return len(self)


class Pipeline:
    def __init__(self, outputs=None):
        """Pipeline(f) or Pipeline([f, g, ...]); Pipeline() is undefined, as in Halide."""
        if outputs is not None:
            if isinstance(outputs, Func):
                outputs = [outputs]
            outputs = list(outputs)
            if not outputs or not all(isinstance(f, Func) for f in outputs):
                raise HalideError("Pipeline takes a Func or a list of Funcs")
            for f in outputs:  # (as Halide: an output takes no new definitions)
                f._frozen = True
        self._outputs = outputs
        self._lowered = None
        self._lowered_for = None  # the Target object _lowered was lowered for
        self._versions: list = []  # (user Func, its version) for every Func the lowering read
        self._compiled: dict = {}
        self._target = None
        self._call_plan: _CallPlan | None = None  # the last realize(buffer) call, to repeat it cheaply
        self._requirements: list[tuple] = []  # add_requirement's (condition IR, error args), in order
        self._jit_externs = None  # set_jit_externs' JITExterns

    def defined(self) -> bool:
        return self._outputs is not None

    def _require_defined(self) -> None:
        if self._outputs is None:
            raise HalideError("Error: Pipeline is undefined")

    def outputs(self) -> list[Func]:
        self._require_defined()
        return list(self._outputs)

    def __repr__(self):  # as Halide's bindings print it
        if self._outputs is None:
            return "<halide.Pipeline Pipeline()>"
        return f"<halide.Pipeline [{','.join(repr(f.name()) for f in self._outputs)}]>"

    # ------------------------------------------------------------------ requirements
    def add_requirement(self, condition, *error_args) -> None:
        """Fail every run in which `condition` (of Params and buffer dimensions) is false, with
        "Requirement Failed: (false) " and the error_args (strings as written, Exprs' values, joined
        by spaces), before anything is computed (Halide's Pipeline.add_requirement)."""
        from . import ir
        from .expr import Expr, to_ir
        from .ir_mutator import IRVisitor
        from .ir_printer import expr_to_string

        self._require_defined()
        cond = to_ir(condition)
        if not cond.type.is_bool() or cond.type.lanes != 1:
            raise HalideError(f"Pipeline.add_requirement: the condition {expr_to_string(cond)} has type {cond.type}, "
                              "not bool")
        args = []
        for k, a in enumerate(error_args):
            if isinstance(a, str):
                args.append(a)
                continue
            e = to_ir(a) if isinstance(a, Expr) or hasattr(a, "_as_expr") else to_ir(Expr(a))
            if e.type.lanes != 1 or e.type.is_handle() or e.type.is_float() or \
                    (e.type.is_uint() and e.type.bits == 64):
                raise HalideError(f"Pipeline.add_requirement: error argument {k + 1} ({expr_to_string(e)}) has type "
                                  f"{e.type}; pyhalide reports strings and integer or bool values in requirement "
                                  "messages (not floats or uint64)")
            args.append(e)
        if sum(1 for a in args if not isinstance(a, str) and a.type.is_bool()) > 4:
            raise HalideError("Pipeline.add_requirement: at most 4 bool error arguments")
        shown = expr_to_string(cond)

        class _Check(IRVisitor):
            def visit_Variable(self, v):
                if v.ref is None or hasattr(v.ref, "rvars"):
                    raise HalideError(f"Error: Requirement {shown} refers to Var or RVar {v.name}")

            def visit_Call(self, c):
                if c.call_type == ir.HALIDE:
                    raise HalideError(f"Error: Requirement {shown} calls Func {c.name}")
                if c.call_type == ir.IMAGE:
                    raise HalideError(f"Requirement {shown} reads image {c.name}: pyhalide's requirements may use "
                                      "Params and buffer dimensions, not pixels")
                self.visit_children(c)

        for e in (cond, *(a for a in args if not isinstance(a, str))):
            _Check().visit(e)
        self._requirements.append((cond, tuple(args)))
        self.invalidate_cache()

    def _with_requirements(self, lowered):
        """The lowered pipeline with the requirements asserted first (a Param only they use
        becomes an argument too)."""
        if not self._requirements:
            return lowered
        return _add_requirements(lowered, self._requirements)

    # ------------------------------------------------------------------ the schedule as a value
    def funcs(self) -> list[Func]:
        """Every Func the outputs need under the current schedule (in_() wrappers and rfactor's
        intermediates included), in a walk from the outputs."""
        from .call_graph import reachable_funcs

        self._require_defined()
        return list(reachable_funcs(self._outputs).values())

    def get_func(self, index: int) -> Func:
        """The Func at `index` in the order the pipeline realizes its Funcs, producers first (as
        Halide's Pipeline.get_func)."""
        from .call_graph import call_graph

        self._require_defined()
        graph = call_graph(self._outputs)
        order = list(reversed(graph.order))
        if not 0 <= index < len(order):
            raise HalideError(f"Error: Index value passed is {index}; however, there are only {len(order)} "
                              "functions in the pipeline.")
        return graph.funcs[order[index]]

    def copy_schedule(self) -> PipelineSchedule:
        """A snapshot of the schedule of every Func of the pipeline, for set_schedule."""
        return PipelineSchedule({id(f): (f, f.copy_schedule()) for f in self.funcs()})

    def set_schedule(self, schedule: PipelineSchedule) -> None:
        """Put back a snapshot from copy_schedule: every Func gets the schedule it had then (Funcs
        the pipeline reaches now but didn't then get the default)."""
        if not isinstance(schedule, PipelineSchedule):
            raise HalideError(f"Pipeline.set_schedule takes what copy_schedule returns, got {schedule!r}")
        self.reset_schedule()
        for f, snapshot in schedule.funcs.values():
            f.set_schedule(snapshot)

    def reset_schedule(self) -> None:
        """Every Func back to the default schedule; the algorithm is untouched."""
        for f in self.funcs():
            f.reset_schedule()

    def schedule_to_json(self) -> str:
        """The directives of every Func's schedule as JSON (replay with apply_schedule_json)."""
        from .schedule import schedule_to_json

        return schedule_to_json(self.funcs(), self._canonical_names())

    def apply_schedule_json(self, text: str) -> None:
        """Replace the schedule by one from schedule_to_json: validated first, applied whole or not at
        all (a refused record leaves the schedule as it was)."""
        from .schedule import apply_schedule_json

        saved = self.copy_schedule()
        self.reset_schedule()
        try:
            apply_schedule_json(self.funcs(), text, {c: g for g, c in self._canonical_names().items()})
        except BaseException:
            self.set_schedule(saved)
            raise

    def funcs_by_name(self) -> dict[str, Func]:
        """funcs() by the names schedule records and the autoscheduler's source use: a Func's
        name, except where it depends on what the process made before (a second `Func("f")` is
        `f$1`, an anonymous one `f12`); those are numbered again in a walk of this pipeline."""
        canonical = self._canonical_names()
        return {canonical.get(f.name(), f.name()): f for f in self.funcs()}

    def _canonical_names(self) -> dict[str, str]:
        """Names that depend on what the process made before (hl.minimum's Func "minimum7", a
        second Func("f") "f$1") -> the names a fresh process gives them: schedule records use
        those, so a record made here applies to the same algorithm built anywhere. The Funcs a
        schedule made (wrappers, rfactor's intermediates) are numbered after the algorithm's."""
        from .call_graph import algorithm_funcs
        from .lowering.copy_graph import canonical_names, number_made_funcs

        self._require_defined()
        algorithm = algorithm_funcs(self._outputs)
        mapping = canonical_names(algorithm, schedules=False)
        known = {id(f) for f in algorithm}
        taken = {mapping.get(f.name(), f.name()) for f in algorithm}
        return number_made_funcs([f for f in self.funcs() if id(f) not in known], mapping, taken)

    def structural_hash(self) -> str:
        """A hash of what the pipeline computes, independent of names, schedules and estimates."""
        from .structural_hash import structural_hash

        self._require_defined()
        return structural_hash(self._outputs)

    def apply_autoscheduler(self, target, autoscheduler_params):
        """Schedule the pipeline with the autoscheduler `autoscheduler_params.name` (registered in
        pyhalide.autoschedulers; the search comes from the `autoscheduler` package) for `target` (an
        hl.Target, a target string, or None: the JIT target). Returns hl.AutoSchedulerResults."""
        from .autoschedulers import apply_autoscheduler

        return apply_autoscheduler(self, target, autoscheduler_params)

    # ------------------------------------------------------------------ compiling
    def _lower(self):
        """The lowered pipeline, lowered again only when the target or a Func changed (the check
        is the per-call cost of every realize, so it stays a few attribute reads)."""
        lw = self._lowered
        target = self._target
        if lw is None or (self._lowered_for is not target and lw.target != target) or not self._funcs_unchanged():
            lw = self._lower_now()
        return lw

    def _funcs_unchanged(self) -> bool:
        """Whether no Func the last lowering read has been redefined or scheduled since."""
        for f, v in self._versions:
            if f._version != v:
                return False
        return True

    @deep
    def _lower_now(self):
        from .lower import lower

        self._require_defined()
        self._lowered = self._with_requirements(lower(self._outputs, self._target))
        self._lowered_for = self._target  # (lowering works on its own copy of the target)
        self._versions = [(f, f._version) for f in self._lowered.env.sources]
        self._versions += [(b.source, b.source._version) for b in self._lowered.buffers
                           if not b.is_output and hasattr(b.source, "_version")]  # (ImageParams: tracing)
        self._compiled = {}
        _schedule_warnings(self._lowered.env)
        return self._lowered

    def _compile(self, layouts):
        """Native code for one buffer layout: per buffer, its axis order and whether dimension 0 is
        dense (stride 1), which lets vector loads and stores be contiguous."""
        lowered = self._lower()
        shapes = self._shapes_key(lowered)
        compiled = self._compiled.get((layouts, shapes))
        if compiled is None:
            compiled = self._compile_now(lowered, layouts, shapes)
        return compiled

    @deep
    def _compile_now(self, lowered, layouts, shapes):
        """Compiled for these layouts and these shapes of the Buffers the algorithm names (its
        shapes are compiled in: a Buffer reshaped since, with set_min, compiles again)."""
        from .codegen.runtime import CompiledPipeline

        compiled = CompiledPipeline(lowered, layouts, self._target, self._buffer_constants(lowered), self._jit_externs)
        self._compiled[layouts, shapes] = compiled
        return compiled

    def _default_layouts(self):
        lowered = self._lower()
        layouts = []
        for b in lowered.buffers:
            if b.is_output or _unbound(b):  # (an ImageParam with no buffer yet: compiled for a dense one)
                layouts.append((tuple(range(b.dimensions - 1, -1, -1)), True))
            else:
                layouts.append(_layout(_input_buffer(b)))
        return tuple(layouts)

    def _set_target(self, target) -> None:
        """Use `target` from now on (None: keep the current one, at first the JIT target)."""
        if target is None and self._target is not None:
            return
        from .target import resolve_target

        target = resolve_target(target)
        target.require_supported()
        self._target = target

    def compile_jit(self, target=None) -> None:
        """Compile now, so the first realize does not pay for it. Target feature "fp_contract"
        allows fused multiply-adds (as Halide does unless strict_float): faster, last-bit different."""
        self._set_target(target)
        self._compile(self._default_layouts())

    def compile_to_callable(self, arguments, target=None) -> Callable:
        """A compiled function of the given ImageParams and Params (in that order), followed by
        the output buffers: `c(input_buffer, param_value, ..., output_buffer)`. Its per-call cost
        is a few microseconds."""
        self._set_target(target)
        return Callable(self, _param.argument_sources(arguments))

    def infer_arguments(self) -> list:
        """hl.Arguments of the ImageParams and Params the pipeline reads, as compile_to_callable
        takes them: the ImageParams by name, then the Params by name (Halide's order)."""
        lowered = self._lower()
        scalars = {sc.name: sc.param for sc in lowered.scalars}  # (with the Params only requirements use)
        images = sorted((b.name, b.source) for b in lowered.buffers if not b.is_output)
        return [_param.Argument(a, _inferred=True) for a in [img for _, img in images if not isinstance(img, Buffer)]
                + [p for _, p in sorted(scalars.items())]]

    def compile_to_module(self, arguments, fn_name: str, target=None) -> Module:
        """The pipeline lowered (fresh, for `target`) into a Module: Halide's unit of compiled
        code before any backend runs. pyhalide's Module holds the lowered Stmt and the arguments."""
        from .lower import lower
        from .target import resolve_target

        self._require_defined()
        target = resolve_target(target)
        target.require_supported()
        return Module(fn_name, target, self._with_requirements(lower(self._outputs, target, jit=False)),
                      _param.argument_sources(arguments), self)

    def invalidate_cache(self) -> None:
        """Forget the compiled code: the next realize lowers and compiles again."""
        self._lowered, self._compiled = None, {}

    def set_jit_externs(self, externs: dict) -> None:
        """The functions this pipeline's extern stages call by name (Halide's C++
        Pipeline::set_jit_externs), besides the process's own symbols: ctypes function pointers,
        addresses, or Python callables (see pyhalide.extern.JITExterns)."""
        self._jit_externs = JITExterns(externs) if externs else None
        self._compiled, self._call_plan = {}, None

    def get_jit_externs(self) -> dict:
        return dict(self._jit_externs.externs) if self._jit_externs is not None else {}

    # ------------------------------------------------------------------ running
    def realize(self, sizes=None, target=None):
        """realize([w, h, ...]) allocates outputs; realize(buffer) / realize([buffers]) fills them."""
        plan = self._call_plan
        if plan is not None and sizes is plan.output and target is None and plan.holds(self):
            plan.run()
            return sizes
        self._set_target(target)
        lowered = self._lower()
        out_specs = [b for b in lowered.buffers if b.is_output]
        if isinstance(sizes, Buffer) or (
            isinstance(sizes, list | tuple) and sizes and all(isinstance(s, Buffer) for s in sizes)
        ):
            outs = [sizes] if isinstance(sizes, Buffer) else list(sizes)
            if len(outs) != len(out_specs):
                raise HalideError(f"Error: Realization requires {len(outs)} output(s) but pipeline produces "
                                  f"{len(out_specs)} result(s).")
            for spec, buf in zip(out_specs, outs):
                if not isinstance(buf, Buffer) or not buf.defined():
                    raise HalideError(f"realize: output {spec.name} needs a defined hl.Buffer, got {buf!r}")
                if buf._type is not spec.type and buf.type() != spec.type:
                    raise HalideError(
                        f"Error: Output buffer {spec.name} has type {spec.type} but type of the buffer passed in is "
                        f"{buf.type()}"
                    )
                if buf.dimensions() != spec.dimensions:
                    raise HalideError(
                        f"Error: Output buffer {spec.name} requires a buffer of exactly {spec.dimensions} dimensions, "
                        f"but the buffer passed in has {buf.dimensions()} dimensions"
                    )
            if any(_is_bounds_query(b) for b in outs):
                self._query_bounds(lowered, outs)  # Halide's bounds query: shapes, nothing computed
            else:
                self._run(outs, keep_plan=True)
            return outs[0] if len(outs) == 1 else Realization(outs)
        if sizes is None:
            sizes = []
        if isinstance(sizes, int):
            sizes = [sizes]
        sizes = list(sizes)
        bad = [s for s in sizes if not isinstance(s, int | np.integer) or isinstance(s, bool)]
        if bad:
            raise HalideError(f"realize: sizes must be integers, got {sizes}")
        sizes = [int(s) for s in sizes]
        for spec in out_specs:
            if len(sizes) != spec.dimensions:
                raise HalideError(
                    f"realize: Func {spec.source.name()} has {spec.dimensions} dimensions but realize was "
                    f"given {len(sizes)} sizes"
                )
        if any(s < 0 for s in sizes):
            raise HalideError(f"realize: sizes must be non-negative, got {sizes}")
        elements = math.prod(sizes)
        if elements > MAX_ELEMENTS:
            raise HalideError(f"realize: sizes {sizes} make {elements} elements per output; at most 2^31-1 "
                              f"are supported (index arithmetic is 32-bit, as in Halide)")
        outs = [Buffer._output(spec.type, sizes, spec.name) for spec in out_specs]
        results = outs
        if self._outputs_constrained():  # as Halide: a bounds query shapes the outputs, then a crop
            outs = self._queried_outputs(lowered, sizes)
            results = [self._crop_to_sizes(o, sizes, spec.name) for o, spec in zip(outs, out_specs)]
        elif lowered.env.grown_outputs:  # the schedule writes beyond the sizes: allocate that, return a view
            results = list(outs)
            for k, spec in enumerate(out_specs):
                grown = spec.name in lowered.env.grown_outputs
                region = self._grown_region(lowered, spec.name, sizes) if grown else None
                if region is not None:
                    outs[k] = Buffer._output(spec.type, [extent for _, extent in region], spec.name)
                    outs[k]._mins = [lo for lo, _ in region]
                    results[k] = outs[k]._cropped(sizes)
        self._run(outs)
        for o in outs:  # as Halide's realize of sizes: the results on the host, their device copies kept
            o.copy_to_host()
        return results[0] if len(results) == 1 else Realization(results)

    def _outputs_constrained(self) -> bool:
        return any(p._constraint_list() for f in self._outputs for p in (f.__dict__.get("_output_params") or ()))

    @staticmethod
    def _queried_inputs(lowered) -> list[int]:
        """Indices (in lowered.buffers) of the inputs bound to bounds-query buffers."""
        return [i for i, b in enumerate(lowered.buffers)
                if not b.is_output and isinstance(_input_buffer(b), Buffer) and _is_bounds_query(_input_buffer(b))]

    def _query_bounds(self, lowered, outs: list[Buffer]) -> None:
        """realize with bounds-query buffers (outputs, or inputs bound to ImageParams): each gets
        the shape the pipeline would need of it (what it writes or reads, through its
        constraints), as one query of Halide's would give; nothing is computed."""
        query, lets, boxes = self._regions()
        n_out = len(outs)
        inputs = [_input_buffer(b) for b in lowered.buffers[n_out:]]
        shapes = [_shape_of(b) for b in outs] + [[(0, 0, 0)] * b.dimensions() if _is_bounds_query(b)
                                                  else _shape_of(b) for b in inputs]
        queried = [i for i, b in enumerate(outs) if _is_bounds_query(b)] + self._queried_inputs(lowered)
        proposed = _propose_shapes(query, self._buffer_owners(lowered), self._query_sources(lowered), shapes,
                                   queried, lets, boxes)
        for i in queried:
            _reshape_bounds_query(outs[i] if i < n_out else inputs[i - n_out], proposed[i])

    def _queried_outputs(self, lowered, sizes: list[int]) -> list[Buffer]:
        """The output buffers for realize(sizes) when their dimensions are constrained: the region
        asked for, passed through the constraints by one bounds query (Halide's realize does one)."""
        query, lets, boxes = self._regions()
        n_out = sum(1 for b in lowered.buffers if b.is_output)
        dense = [1]
        for v in sizes[:-1]:
            dense.append(dense[-1] * v)
        shapes = [list(zip([0] * len(sizes), sizes, dense))] * n_out
        shapes += [_shape_of(_input_buffer(b)) for b in lowered.buffers[n_out:]]
        owners = self._buffer_owners(lowered)
        proposed = _propose_shapes(query, owners, self._query_sources(lowered), shapes, list(range(n_out)), lets,
                                   boxes)
        return [_allocate(spec.type, proposed[i], spec.name) for i, spec in enumerate(lowered.buffers[:n_out])]

    @staticmethod
    def _crop_to_sizes(buf: Buffer, sizes: list[int], name: str) -> Buffer:
        """The region [0, size) of each dimension of buf (the whole of it if that is all it holds)."""
        shape = _shape_of(buf)
        if all(lo == 0 and extent == n for (lo, extent, _), n in zip(shape, sizes)):
            return buf
        for d, ((lo, extent, _), n) in enumerate(zip(shape, sizes)):
            if lo > 0 or lo + extent < n:
                raise HalideError(f"realize: the constraints on the output buffer {name} make it [{lo}, "
                                  f"{lo + extent - 1}] in dimension {d}, which does not hold the region [0, {n - 1}] "
                                  "asked for: realize into a buffer of that shape instead")
        return buf._cropped(sizes)

    def _query_sources(self, lowered) -> list:
        """Per buffer of the lowered pipeline, what holds its constraints: an output's
        OutputImageParam (None if it has none yet), an input's ImageParam or Buffer."""
        n_out = sum(1 for b in lowered.buffers if b.is_output)
        sources = [p for f in self._outputs for p in (f.__dict__.get("_output_params") or [None] * len(f.types()))]
        return sources + [b.source for b in lowered.buffers[n_out:]]

    def _grown_region(self, lowered, name: str, sizes: list[int]) -> list[tuple[int, int]] | None:
        """The (min, extent) per dimension that output `name`'s stages write when realized at
        sizes (as Halide's bounds query finds it), or None where that is just the sizes."""
        from . import ir

        lets, box = lowered.env.grown_outputs[name]
        known = {}
        for b in lowered.buffers:
            buf = None if b.is_output else _input_buffer(b)
            for d in range(b.dimensions):
                if b.is_output:
                    lo, extent, stride = 0, sizes[d], None
                elif isinstance(buf, Buffer):
                    lo, extent, stride = buf.dim(d).min(), buf.dim(d).extent(), buf.dim(d).stride()
                else:
                    continue
                for field, v in (("min", lo), ("extent", extent), ("stride", stride)):
                    if v is not None:
                        known[f"{b.name}.{field}.{d}"] = ir.make_const(Int(32), v)
        for s in lowered.scalars:
            known[s.name] = ir.make_const(s.type, s.param.get())
        key = (name, tuple((k, v.value) for k, v in known.items()))
        memo = lowered.grown_regions
        if key not in memo:
            memo[key] = self._evaluate_region(lets, box, known, sizes)
        return memo[key]

    @staticmethod
    def _evaluate_region(lets, box, known, sizes):
        from . import ir
        from .ir_mutator import substitute
        from .simplify import simplify

        for let_name, value in lets:
            v = simplify(substitute(known, value))
            if ir.const_int(v) is not None:
                known[let_name] = v
        region, grown = [], False
        for d, (lo_e, hi_e) in enumerate(box):
            lo, hi = (ir.const_int(simplify(substitute(known, e))) for e in (lo_e, hi_e))
            if lo is None or hi is None:
                return None  # not computable here: the entry check will say what is wrong
            lo, hi = min(lo, 0), max(hi, sizes[d] - 1)
            grown |= lo != 0 or hi != sizes[d] - 1
            region.append((lo, hi - lo + 1))
        return region if grown else None

    def _run(self, outs: list[Buffer], keep_plan: bool = False) -> None:
        """Run into outs; keep_plan: remember the call, to repeat it cheaply (see _CallPlan)."""
        lowered = self._lowered  # realize has just brought it up to date
        buffers = list(outs)
        for b in lowered.buffers[len(outs):]:
            buffers.append(_input_buffer(b))
        if any(b._array is None for b in buffers[len(outs):]) and self._queried_inputs(lowered):
            self._query_bounds(lowered, outs)  # as Halide: the inputs' shapes filled in, nothing computed
            return
        constrained = self._constrained(lowered)
        if constrained:
            _check_constraints(constrained, self._buffer_owners(lowered), buffers)
        layouts = tuple(_layout(b) for b in buffers)
        shapes = self._shapes_key(lowered)
        compiled = self._compiled.get((layouts, shapes)) or self._compile_now(lowered, layouts, shapes)
        params = [s.param.get() for s in lowered.scalars]
        arrays, scalars = compiled.prepare(buffers)
        self._call_plan = None
        compiled.call(arrays, buffers, scalars.copy(), params, lowered.user_names)
        if keep_plan and _CallPlan.applies(lowered, compiled, outs, constrained):
            self._call_plan = _CallPlan(self, compiled, buffers, arrays, scalars)

    def _constrained(self, lowered) -> list:
        """(buffer index, OutputImageParam) of the buffers of the lowered pipeline whose dimensions
        are constrained (the outputs', and the ImageParams': their constants are compiled in, so
        a Callable's buffers are checked too); remembered until the pipeline or any constraint
        changes (realize's per-call cost)."""
        from . import param

        memo = getattr(self, "_constrained_memo", None)
        if memo is not None and memo[0] is lowered and memo[1] == param.constraint_epoch:
            return memo[2]
        self._constrained_memo = (lowered, param.constraint_epoch, found := self._find_constrained(lowered))
        return found

    def _constant_constraints(self, lowered) -> tuple:
        """(`buffer.field.dimension`, value) of the constant constraints on the buffers checked
        before every call (outputs, ImageParams with Expr constraints): compiled in as constants,
        as Halide does (a stride or min known makes index arithmetic fold and alignment known)."""
        return tuple((f"{lowered.buffers[i].name}.{field}.{d}", c) for i, p in self._constrained(lowered)
                     for d, field, c in p._constraint_list() if isinstance(c, int))

    def _shapes_key(self, lowered) -> tuple:
        """What compiled code assumes of the buffers, besides their layouts."""
        return _bound_shapes(lowered), self._constant_constraints(lowered)

    def _buffer_constants(self, lowered) -> dict[str, int]:
        """`buffer.field.dimension` -> value of each buffer dimension compiled in as a constant."""
        return {**_shape_constants(lowered), **dict(self._constant_constraints(lowered))}

    def _find_constrained(self, lowered) -> list:
        found = []
        k = 0
        for f in self._outputs:
            params = f.__dict__.get("_output_params") or [None] * len(f.types())
            for p in params:
                if p is not None and (p._constraint_list() or p._host_alignment):
                    found.append((k, p))
                k += 1
        for i, b in enumerate(lowered.buffers[k:], k):
            src = b.source
            if getattr(src, "_constraints", None) is not None and (src._constraint_list() or src._host_alignment):
                found.append((i, src))  # (constants are compiled in)
        return found

    def _buffer_owners(self, lowered) -> list[str]:
        """The name each buffer of the lowered pipeline has for the user (lowering may rename
        generated names): what constraints and error messages refer to."""
        names = [n for f in self._outputs for n in ([f.name()] if len(f.types()) == 1 else
                                                     [f"{f.name()}.{k}" for k in range(len(f.types()))])]
        return names + [b.source.name() for b in lowered.buffers[len(names):]]

    # ------------------------------------------------------------------ bounds queries
    def infer_input_bounds(self, outputs=None, target=None) -> None:
        """Bind every ImageParam the pipeline reads that has no buffer yet to a new buffer (zeros)
        that covers what computing `outputs` (sizes, a Buffer or a list of Buffers) reads of it, shaped
        as its dimension constraints say. Constraints that refer to other buffers are solved by
        repeating the query until nothing changes (at most 16 times), as Halide does."""
        from .param import ImageParam

        self._require_defined()
        self._set_target(target)
        lowered, lets, boxes = self._regions()
        owners = self._buffer_owners(lowered)
        n_out = sum(1 for b in lowered.buffers if b.is_output)
        shapes, queried = [], []
        if isinstance(outputs, Buffer) or (isinstance(outputs, list | tuple) and outputs
                                           and all(isinstance(o, Buffer) for o in outputs)):
            outs = [outputs] if isinstance(outputs, Buffer) else list(outputs)
            if len(outs) != n_out:
                raise HalideError(f"Error: Realization requires {len(outs)} output(s) but pipeline produces "
                                  f"{n_out} result(s).")
        else:  # as Halide's: bounds-query buffers of these sizes, which the outputs' constraints may reshape
            sizes = [outputs] if isinstance(outputs, int) else list(outputs or [])
            outs = [Buffer.make_bounds_query(b.type, [int(v) for v in sizes], b.name) for b in lowered.buffers[:n_out]]
        for i, (spec, buf) in enumerate(zip(lowered.buffers, outs)):
            if buf.dimensions() != spec.dimensions:
                raise HalideError(f"Error: Output buffer {spec.name} requires a buffer of exactly {spec.dimensions} "
                                  f"dimensions, but the buffer passed in has {buf.dimensions()} dimensions")
            shapes.append(_shape_of(buf))
            if _is_bounds_query(buf):  # a buffer with a shape and no memory: reshaped as the query says
                queried.append(i)
        inputs = []
        for i, b in enumerate(lowered.buffers[n_out:], n_out):
            if isinstance(b.source, ImageParam) and not b.source._is_bound():
                inputs.append(i)
                shapes.append([(0, 0, 0)] * b.dimensions)
            else:
                shapes.append(_shape_of(_input_buffer(b)))
        if not inputs:
            return  # every input is bound: nothing to infer (as Halide: outputs are not queried either)
        queried += inputs
        sources = self._query_sources(lowered)
        for _ in range(16):
            proposed = _propose_shapes(lowered, owners, sources, shapes, queried, lets, boxes, self._jit_externs)
            if all(proposed[i] == shapes[i] for i in queried):
                break
            for i in queried:
                shapes[i] = proposed[i]
        else:
            raise HalideError("Error: Inferring input bounds on Pipeline didn't converge after 16 iterations. There "
                              "may be unsatisfiable constraints")
        for i in inputs:
            lowered.buffers[i].source.set(_allocate(lowered.buffers[i].type, shapes[i], owners[i]))
        for i in queried[: len(queried) - len(inputs)]:
            _reshape_bounds_query(outs[i], shapes[i])

    def _regions(self):
        """(lowered pipeline, the lets that open it, {buffer name: [(min, max) IR per dimension]}):
        the box of every input the pipeline reads and of every output its stages write, in terms
        of the buffers' dimensions and the Params, as the buffer checks see them."""
        from . import ir
        from .bounds import box_touched
        from .lower import lower
        from .lowering.bounds_inference import buffer_names, require_bounded

        lowered = self._lower()
        cached = self.__dict__.get("_regions_cache")
        if cached is not None and cached[0] is lowered:
            return cached[1]
        before_checks = []  # the Stmt the buffer checks pass is given: the one before it
        previous = [None]

        def hook(name, stmt):
            if name == "buffer checks":
                before_checks.append(previous[0])
            previous[0] = stmt

        query = self._with_requirements(lower(self._outputs, self._target, hook=hook))
        if not before_checks:
            raise InternalError("bounds query: the lowering has no 'buffer checks' pass to take the regions from")
        body, lets = before_checks[0], []
        while isinstance(body, ir.LetStmt):
            lets.append((body.name, body.value))
            body = body.body
        boxes = {}
        n_out = 0
        for f in query.env.outputs:
            box = box_touched(body, f.name(), include_provides=True, include_calls=False, for_checks=True)
            written = [require_bounded(f, var, box[d] if box else None, "its own stages")
                       for d, var in enumerate(f._pure_args)]
            for name in buffer_names(f):
                boxes[name] = [(iv.min, iv.max) for iv in written]
                n_out += 1
        for b in query.buffers[n_out:]:
            box = box_touched(body, b.name, for_checks=True)
            if box is not None:
                for d, iv in enumerate(box):
                    if iv.min is None or iv.max is None:
                        raise HalideError(f"Can't infer the region of input {b.name} the pipeline reads: dimension "
                                          f"{d} is unbounded. Clamp the coordinates used to access {b.name}.")
                boxes[b.name] = [(iv.min, iv.max) for iv in box]
        result = (query, lets, boxes)
        self._regions_cache = (lowered, result)
        return result

    # ------------------------------------------------------------------ looking inside
    def print_loop_nest(self) -> None:
        """The loop nest as Halide prints it: after bounds inference and the first simplification,
        before loops are unrolled or vectorized (so they show as loops, with their ranges)."""
        from .lower import lower

        self._require_defined()
        self._set_target(None)
        seen = []
        lowered = lower(self._outputs, self._target, hook=lambda name, stmt: seen.append((name, stmt)))
        text = to_user_names(loop_nest_text(next(stmt for name, stmt in seen if name == "simplify"),
                                            lowered.env.fused_loops), lowered.env.user_names)
        # as Halide prints it: each Func by the name it was given, without the `$1` made unique by
        given = {f.name(): func_name_family(f.name()) for f in self.funcs()}
        print(to_user_names(text, {n: g for n, g in given.items() if n != g}), end="")

    def compile_to_lowered_stmt(self, filename: str, arguments=None, fmt=None, target=None) -> None:
        """The lowered Stmt as text, or (fmt=hl.StmtOutputFormat.HTML) as an HTML page of it,
        each `produce` block collapsible."""
        self._set_target(target)
        with open(filename, "w") as f:
            f.write(lowered_stmt_text(self._lower(), fmt == StmtOutputFormat.HTML))

    def compile_to_conceptual_stmt(self, filename: str, arguments=None, fmt=None, target=None) -> None:
        """Halide's conceptual Stmt: the loop nest before parallel loops become tasks and GPU loops
        kernels. pyhalide's lowered Stmt is that already (those happen in code generation)."""
        self.compile_to_lowered_stmt(filename, arguments, fmt, target)

    def compile_to_llvm_assembly(self, filename: str, arguments=None, fn_name=None, target=None) -> None:
        """The optimised LLVM IR: of the function ahead-of-time code enters (Halide's), or
        without `arguments`, of the code realize runs."""
        from .codegen.jit import optimize

        if arguments is not None:
            return self.compile_to({"llvm_assembly": filename}, arguments, fn_name or "", target)
        self._set_target(target)
        compiled = self._compile(self._default_layouts())
        with open(filename, "w") as f:
            f.write(str(optimize(compiled.llvm_ir)))

    def compile_to_assembly(self, filename: str, arguments=None, fn_name=None, target=None) -> None:
        """The assembly: of the function ahead-of-time code enters (Halide's), or without
        `arguments`, of the code realize runs."""
        from .codegen.jit import emit_assembly

        if arguments is not None:
            return self.compile_to({"assembly": filename}, arguments, fn_name or "", target)
        self._set_target(target)
        compiled = self._compile(self._default_layouts())
        with open(filename, "w") as f:
            f.write(emit_assembly(compiled.llvm_ir))

    # ------------------------------------------------------------------ ahead of time (ahead_of_time.py)
    def compile_to(self, outputs: dict, arguments, fn_name: str = "", target=None) -> None:
        """Write each of `outputs` ({hl.OutputFileType: path}) for a C function `fn_name` of
        `arguments` (ImageParams and Params in order; the output buffers follow)."""
        from .ahead_of_time import compile_to

        compile_to(self, outputs, arguments, fn_name, target)

    def compile_to_file(self, filename_prefix: str, arguments, fn_name: str = "", target=None) -> None:
        """PREFIX.h and the object PREFIX.o (.obj for Windows)."""
        from .ahead_of_time import object_suffix

        self.compile_to({"c_header": f"{filename_prefix}.h", "object": filename_prefix + object_suffix(target)},
                        arguments, fn_name, target)

    def compile_to_static_library(self, filename_prefix: str, arguments, fn_name: str = "", target=None) -> None:
        """PREFIX.h and the static library PREFIX.a (.lib for Windows)."""
        from .ahead_of_time import library_suffix

        self.compile_to({"c_header": f"{filename_prefix}.h",
                         "static_library": filename_prefix + library_suffix(target)}, arguments, fn_name, target)

    def compile_to_multitarget_static_library(self, filename_prefix: str, arguments, targets) -> None:
        """PREFIX.h and PREFIX.a holding the pipeline compiled for each target and a function that
        calls the first one this CPU can run (the last target: the baseline), as Halide's."""
        from .ahead_of_time import compile_multitarget

        compile_multitarget(self, filename_prefix, arguments, targets, library=True)

    def compile_to_multitarget_object_files(self, filename_prefix: str, arguments, targets, suffixes=()) -> None:
        """PREFIX.h, PREFIX-SUFFIX.o per target and PREFIX_wrapper.o (see the static library's)."""
        from .ahead_of_time import compile_multitarget

        compile_multitarget(self, filename_prefix, arguments, targets, suffixes, library=False)

    def compile_to_object(self, filename: str, arguments, fn_name: str = "", target=None) -> None:
        self.compile_to({"object": filename}, arguments, fn_name, target)

    def compile_to_header(self, filename: str, arguments, fn_name: str = "", target=None) -> None:
        self.compile_to({"c_header": filename}, arguments, fn_name, target)

    def compile_to_bitcode(self, filename: str, arguments, fn_name: str = "", target=None) -> None:
        self.compile_to({"bitcode": filename}, arguments, fn_name, target)

    def compile_to_python_extension(self, filename: str, arguments, fn_name: str = "", target=None) -> None:
        """C source of a CPython extension module calling the object of the same fn_name."""
        self.compile_to({"python_extension": filename}, arguments, fn_name, target)

    def compile_to_c(self, filename: str, arguments, fn_name: str = "", target=None) -> None:
        """C++ source defining the entry compile_to_object's object defines (codegen/c_source.py)."""
        self.compile_to({"c_source": filename}, arguments, fn_name, target)

    def compile_to_cuda(self, filename: str, arguments=None, fn_name=None, target=None) -> None:
        """Write the CUDA C of every kernel (the target gains the cuda feature if it lacks it):
        for reading, and for compile checks with nvcc or NVRTC; no GPU is needed."""
        with open(filename, "w") as f:
            f.write(self.cuda_source(target))

    def cuda_source(self, target=None) -> str:
        """The CUDA C translation unit of this pipeline's kernels (see compile_to_cuda)."""
        from .codegen.cuda import cuda_source
        from .codegen.runtime import dense_buffers
        from .lower import finish_lowering
        from .target import resolve_target

        target = resolve_target(target)
        self._set_target(target if target.has_feature("cuda") else target.with_feature("cuda"))
        lowered = self._lower()
        kernels = []
        finish_lowering(lowered.stmt, dense_buffers(lowered, self._default_layouts()), kernels=kernels,
                        buffer_constants=self._buffer_constants(lowered))  # what realize compiles
        return cuda_source(kernels)


def last_profile_report():
    """The report of the last realization profiled on this thread (target feature "profile"), as
    data: a ProfileReport, whose str() is what was printed; None before one."""
    from .codegen.profiler import last_report

    return last_report()


class StmtOutputFormat(enum.Enum):
    """Halide's hl.StmtOutputFormat: what compile_to_lowered_stmt writes."""

    Text = 0
    HTML = 1


def lowered_stmt_text(lowered, as_html: bool = False) -> str:
    """compile_to_lowered_stmt's text of a lowered pipeline, in the user's names."""
    text = to_user_names(stmt_to_string(lowered.stmt), lowered.env.user_names)
    return _stmt_html(text, lowered.env.outputs[0].name()) if as_html else text


def _stmt_html(text: str, title: str) -> str:
    """A page of the lowered Stmt: escaped, with every `produce` block a <details> to fold."""
    out = [f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
           "<style>body{font-family:monospace;white-space:pre} details{margin-left:2ch}</style></head><body>"]
    depth = []  # the indentation of each open produce block
    for line in text.splitlines():
        stripped = line.strip()
        indent = len(line) - len(stripped)
        if depth and stripped == "}" and indent == depth[-1]:
            depth.pop()
            out.append(html.escape(line) + "</details>")
        elif stripped.startswith("produce ") and stripped.endswith("{"):
            depth.append(indent)
            out.append(f"<details open><summary>{html.escape(line)}</summary>")
        else:
            out.append(html.escape(line))
    out.append("</body></html>")
    return "\n".join(out) + "\n"


class Module:
    """What compile_to_module returns: a named, lowered pipeline for one target, which
    `compile` writes as compile_to writes the pipeline (from the Stmt lowered then: later
    schedule changes do not reach it, as in Halide)."""

    def __init__(self, name: str, target, lowered, arguments: list, pipeline: Pipeline):
        self._name, self._target, self.lowered, self.arguments = name, target, lowered, arguments
        self._pipeline = pipeline
        self._auto_scheduler_results = None

    def name(self) -> str:
        return self._name

    def target(self):
        return self._target

    def compile(self, outputs: dict) -> None:
        """Write each of `outputs` ({hl.OutputFileType: path}) for the C function `name()`."""
        from .ahead_of_time import compile_to

        compile_to(self._pipeline, outputs, self.arguments, self._name, self._target, self.lowered)

    def buffers(self) -> list[Buffer]:
        """The Buffers the algorithm names, compiled into the module as constants."""
        return [b.source for b in self.lowered.buffers if not b.is_output and isinstance(b.source, Buffer)]

    def submodules(self) -> list:
        return []  # (pyhalide's Modules hold one pipeline; Module.append is not there)

    def resolve_submodules(self) -> Module:
        return self

    def get_metadata_name_map(self) -> dict[str, str]:
        return {}  # (pyhalide's objects carry no metadata function, so no names to remap)

    def get_auto_scheduler_results(self):
        return self._auto_scheduler_results

    def set_auto_scheduler_results(self, results) -> None:
        self._auto_scheduler_results = results

    def __repr__(self):
        return f"<halide.Module '{self._name}' for {self._target}>"

    def __str__(self):
        return stmt_to_string(self.lowered.stmt)


class PipelineSchedule:
    """What Pipeline.copy_schedule returns: each Func of the pipeline with a snapshot of its schedule."""

    def __init__(self, funcs: dict):
        self.funcs = funcs  # id(Func) -> (Func, FuncSchedule)

    def __repr__(self):
        return f"PipelineSchedule({', '.join(f.name() for f, _ in self.funcs.values())})"


class _CallPlan:
    """A realize(buffer) call, checked and prepared, kept to repeat: while the pipeline, its
    target, every buffer binding and every buffer's array, shape, strides and mins are the same
    objects and values as then, a realize into the same output Buffer skips the checks and the
    cache lookups and calls the compiled code at once (realize's per-call cost, which a pipeline
    called in a loop pays every time). Anything changed: the full path, which makes a new plan."""

    __slots__ = ("pipeline_state", "output", "compiled", "buffers", "bindings", "states", "arrays", "scalars", "params",
                 "names")

    def __init__(self, pipeline: Pipeline, compiled, buffers: list[Buffer], arrays: list, scalars: np.ndarray):
        lowered = pipeline._lowered
        self.pipeline_state = (lowered, pipeline._target, _param.constraint_epoch)
        self.output, self.compiled, self.arrays, self.scalars = buffers[0], compiled, arrays, scalars
        self.buffers = list(buffers)
        self.bindings = [(spec.source, buf) for spec, buf in zip(lowered.buffers[1:], buffers[1:])]
        self.states = [_CallPlan._state(buf) for buf in buffers]
        self.params = [s.param for s in lowered.scalars]
        self.names = lowered.user_names

    @staticmethod
    def applies(lowered, compiled, outs: list[Buffer], constrained: list) -> bool:
        """One output, inputs bound to Buffers or ImageParams, no dimension constraints to check
        per call, host code only (GPU runs move data between host and device every call)."""
        from .param import ImageParam

        return (len(outs) == 1 and not constrained and compiled.cuda_source is None and not compiled.host_only_gpu
                and all(type(b.source) is Buffer or type(b.source) is ImageParam for b in lowered.buffers[1:]))

    @staticmethod
    def _state(buf: Buffer) -> tuple:
        arr = buf._array
        return arr.shape, arr.strides, arr.dtype, list(buf._mins), list(buf._axis)

    def holds(self, pipeline: Pipeline) -> bool:
        lowered, target, epoch = self.pipeline_state
        if (pipeline._lowered is not lowered or pipeline._target is not target or _param.constraint_epoch != epoch
                or not pipeline._funcs_unchanged()):
            return False
        for source, buf in self.bindings:  # still bound to the same Buffers (an ImageParam may be set again)
            if (source if type(source) is Buffer else source._buffer) is not buf:
                return False
        for buf, arr, (shape, strides, dtype, mins, axis) in zip(self.buffers, self.arrays, self.states):
            a = buf._array
            if (a is not arr or a.shape != shape or a.strides != strides or a.dtype is not dtype
                    or buf._mins != mins or buf._axis != axis):
                return False
        return self.arrays[0].flags.writeable

    def run(self) -> None:
        self.compiled.call(self.arrays, self.buffers, self.scalars.copy(), [p.get() for p in self.params], self.names)


class Callable:
    """What compile_to_callable returns. Buffers may be hl.Buffers or numpy arrays (taken with
    Halide's reversed axis order and mins 0). The code is compiled for dimension 0 dense and
    Halide's axis order; buffers of another layout (interleaved, strided) get code compiled for
    theirs, once per layout."""

    def __init__(self, pipeline: Pipeline, arguments: list):
        from .param import ImageParam, Param

        lowered = pipeline._lower()
        for a in arguments:
            if not isinstance(a, ImageParam | Param):
                raise HalideError(f"compile_to_callable: arguments must be ImageParams and Params, got {a!r}")
        index = {id(a): i for i, a in enumerate(arguments)}
        self._n_args = len(arguments)
        self._n_out = sum(1 for b in lowered.buffers if b.is_output)
        self._inputs = []
        for b in lowered.buffers[self._n_out:]:
            if isinstance(b.source, ImageParam):
                if id(b.source) not in index:
                    raise HalideError(f"compile_to_callable: the pipeline reads ImageParam {b.name}, which is not "
                                      "among the arguments")
                self._inputs.append((index[id(b.source)], None))
            else:
                self._inputs.append((None, b.source))  # a Buffer the algorithm names directly
        self._params = []
        for sc in lowered.scalars:
            if id(sc.param) not in index:
                raise HalideError(f"compile_to_callable: the pipeline uses Param {sc.name}, which is not among "
                                  "the arguments")
            self._params.append(index[id(sc.param)])
        layouts = []
        for spec, (_, const) in zip(lowered.buffers, [(None, None)] * self._n_out + self._inputs):
            layouts.append(_layout(const) if const is not None else
                           (tuple(range(spec.dimensions - 1, -1, -1)), True))
        self._compiled = pipeline._compile(tuple(layouts))
        # the shapes of the Buffers the algorithm names are compiled in: moved since, compiled again
        self._lowered, self._layouts, self._target = lowered, tuple(layouts), pipeline._target
        self._jit_externs = pipeline._jit_externs
        self._shapes = _bound_shapes(lowered)
        self._constraint_values = dict(pipeline._constant_constraints(lowered))
        # buffers with constrained dimensions, checked on every call (none: nothing to do per call)
        self._constrained = pipeline._constrained(lowered)
        self._owners = pipeline._buffer_owners(lowered)
        self._param_args = [(a.name(), i) for i, a in enumerate(arguments) if isinstance(a, Param)]
        self._scalar_types = {i: arguments[i].type() for _, i in self._param_args}
        self._names = [a.name() for a in arguments] + [b.name for b in lowered.buffers[:self._n_out]]
        self._names_in_text = lowered.user_names
        self._other_layouts = {}  # layouts -> code compiled for buffers of that layout

    def __call__(self, *args, **kwargs):
        n = self._n_args + self._n_out
        if len(args) > n:
            raise HalideError(f"Expected at most {n} positional arguments, but saw {len(args)}.")
        if kwargs:
            args = self._by_name(args, kwargs)
        if len(args) != n:
            raise HalideError(f"Expected exactly {n} positional arguments, but saw {len(args)}.")
        args = self._check_kinds(args)
        buffers = list(args[self._n_args:])
        for i, const in self._inputs:
            buffers.append(const if i is None else args[i])
        if self._constrained:
            _check_constraints(self._constrained, self._owners,
                               [b if isinstance(b, Buffer) else Buffer(b) for b in buffers],
                               {name: args[i] for name, i in self._param_args})
        if self._shapes and _bound_shapes(self._lowered) != self._shapes:
            from .codegen.runtime import CompiledPipeline

            self._shapes = _bound_shapes(self._lowered)
            self._other_layouts = {}
            self._compiled = CompiledPipeline(self._lowered, self._layouts, self._target, self._constants(),
                                              self._jit_externs)
        values = [args[i] for i in self._params]
        try:
            self._compiled.run(buffers, values, self._names_in_text)
        except LayoutMismatch:  # (checked before anything ran): code compiled for these buffers' layouts
            from .codegen.runtime import CompiledPipeline

            layouts = tuple(_layout(b if isinstance(b, Buffer) else Buffer(b)) for b in buffers)
            compiled = self._other_layouts.get(layouts)
            if compiled is None:
                compiled = self._other_layouts[layouts] = CompiledPipeline(self._lowered, layouts, self._target,
                                                                           self._constants(), self._jit_externs)
            compiled.run(buffers, values, self._names_in_text)

    def _constants(self) -> dict:
        return {**_shape_constants(self._lowered), **self._constraint_values}

    def _check_kinds(self, args) -> tuple:
        """A buffer where the pipeline takes one (a defined hl.Buffer or anything with the buffer
        protocol), a number its Param's type can take where it takes a Param: Halide's bindings'
        errors, before anything runs. The arguments, each Param's value as a Python number."""
        scalars = self._scalar_types
        checked = list(args)
        for i, value in enumerate(args):
            t = scalars.get(i)
            if t is not None:
                checked[i] = _scalar_argument(value, t, self._names[i])
            elif isinstance(value, Buffer):
                if not value.defined():
                    raise HalideError(f"Undefined buffer passed for argument {self._names[i]}: an hl.Buffer() "
                                      "with no type, shape or storage")
            elif not isinstance(value, np.ndarray):
                try:
                    memoryview(value)
                except TypeError:
                    raise HalideError(f"Object of type '{type(value).__name__}' is not an instance of "
                                      f"'buffer' (argument {self._names[i]})") from None
        return tuple(checked)

    def _by_name(self, args: tuple, kwargs: dict) -> tuple:
        """The arguments in order, the ones after `args` given by name (Halide's keywords)."""
        slots = list(args) + [_MISSING] * (len(self._names) - len(args))
        for name, value in kwargs.items():
            if name not in self._names:
                raise HalideError(f"Unknown argument '{name}' specified via keyword.")
            i = self._names.index(name)
            if slots[i] is not _MISSING:
                raise HalideError(f"Argument {name} specified multiple times.")
            slots[i] = value
        for name, value in zip(self._names, slots):
            if value is _MISSING:
                raise HalideError(f"Argument {name} was not specified by either positional or keyword argument.")
        return tuple(slots)


_MISSING = object()


def _scalar_argument(value, t, name: str):
    """`value`, a Callable's argument for Param `name` of Type `t`, as the number it passes: as
    Halide's bindings, an integer Param takes an integer (a bool, a numpy integer, anything with
    __index__) that fits its type, never a float, even 2.0; a float Param takes any real number;
    a bool Param, a number's truth."""
    from .expr import Expr

    refused = HalideError(f"Unable to cast Python instance of type {type(value)} to the scalar argument {name} of "
                          f"type {t}")
    if isinstance(value, str | bytes | Expr) or value is None:
        raise refused
    if t.is_float():
        if isinstance(value, complex | np.complexfloating):
            raise refused
        try:
            return float(value)
        except (TypeError, ValueError):
            raise refused from None
    if t.is_bool():
        if not isinstance(value, int | float | np.number | np.bool_) or isinstance(value, np.complexfloating):
            raise refused
        return bool(value)
    if isinstance(value, float | np.floating | np.complexfloating):
        raise HalideError(f"Unable to cast Python instance of type {type(value)} to the scalar argument {name} of "
                          f"type {t}: it takes an integer, not the {type(value).__name__} {value!r}")
    try:
        value = int(value) if isinstance(value, np.bool_) else operator.index(value)
    except TypeError:
        raise refused from None
    if t.is_handle():
        return value
    if not t.min_value() <= value <= t.max_value():
        raise HalideError(f"Argument {name} is a Param of type {t}: {value} is out of its range "
                          f"[{t.min_value()}, {t.max_value()}]")
    return value


def _unbound(spec) -> bool:
    """An input ImageParam with no buffer bound yet."""
    from .param import ImageParam

    return isinstance(spec.source, ImageParam) and not spec.source._is_bound()


def _add_requirements(lowered, requirements):
    """A copy of the lowered pipeline that asserts each requirement before anything else. A bool
    value in the message is written out: one assert per combination of the bool values, each
    failing only where the bools have its values."""
    from dataclasses import replace
    from itertools import product

    from . import ir
    from .ir_mutator import IRMutator, IRVisitor
    from .lower import ScalarArg
    from .param import Param

    scalars = {sc.name: sc for sc in lowered.scalars}
    buffers = {b.name for b in lowered.buffers}

    class _Inputs(IRVisitor):
        def visit_Variable(self, v):
            if isinstance(v.ref, Param):
                known = scalars.setdefault(v.name, ScalarArg(v.name, v.ref.type(), v.ref))
                if known.param is not v.ref:
                    raise HalideError(f"Two different Params are both named {v.name!r}: the pipeline would read one "
                                      "of them for both; give them distinct names")
            elif v.ref is not None and v.name.rsplit(".", 2)[0] not in buffers:
                raise HalideError(f"A requirement uses {v.name}, a dimension of {v.name.rsplit('.', 2)[0]}, which "
                                  "the pipeline does not read: pyhalide can check only the buffers it is given")

    internal = {user: name for name, user in lowered.env.user_names.items()}

    class _InternalNames(IRMutator):
        """A buffer dimension of a Func the pipeline renamed (`h$1` is `h` in it) by its name there."""

        def visit_Variable(self, v):
            head, dot, rest = v.name.partition(".")
            return ir.Variable(internal[head] + dot + rest, v.type, v.ref) if v.ref is not None and dot \
                and head in internal else v

    checks = []
    for cond, args in requirements:
        if internal:
            cond = _InternalNames().mutate(cond)
            args = [a if isinstance(a, str) else _InternalNames().mutate(a) for a in args]
        exprs = [a for a in args if not isinstance(a, str)]
        for e in (cond, *exprs):
            _Inputs().visit(e)
        bools = [a for a in exprs if a.type.is_bool()]
        for values in product((True, False), repeat=len(bools)):
            it, pieces = iter(values), []
            for a in args:
                if isinstance(a, str):
                    pieces.append(a.replace("{", "{{").replace("}", "}}"))
                else:
                    pieces.append(("true" if next(it) else "false") if a.type.is_bool() else "{}")
            check = cond
            for b, v in zip(bools, values):  # passes where the bools have other values
                check = ir.Or(check, ir.Not(b) if v else b)
            checks.append(ir.AssertStmt(check, "Requirement Failed: (false) " + " ".join(pieces),
                                        tuple(a for a in exprs if not a.type.is_bool())))
    return replace(lowered, stmt=ir.make_block([*checks, lowered.stmt]),
                   scalars=sorted(scalars.values(), key=lambda sc: sc.name))


def _schedule_warnings(env) -> None:
    """Halide's warnings about a schedule that means nothing, on stdout as Halide's bindings print
    them: bounds of an inlined Func, and an update left unscheduled while other stages of its
    Func are scheduled (Stage.unscheduled() says that is deliberate)."""
    from .ir_printer import expr_to_string
    from .schedule import stage_touched

    copies = list(env.funcs.values())
    pairs = zip(env.sources, copies) if len(copies) == len(env.sources) else ((f, f) for f in env.sources)
    for f, copy in pairs:
        sched, name = f._schedule, f.name()
        if copy.name() in env.inlined:
            for var, b in sched.bounds.items():
                if b[0] == "bound" and b[1] is not None:
                    print(f"Warning: It is meaningless to bound dimension {var} of function {name} to be within "
                          f"[{expr_to_string(b[1])}, {expr_to_string(b[2])}] because the function is scheduled inline.")
                elif b[0] in ("align", "align_extent"):  # (Halide keeps the remainder as `r % m`)
                    remainder = "(undefined)" if b[2] is None else f"({b[2]} % {b[1]})"
                    print(f"Warning: It is meaningless to align the bounds of dimension {var} of function {name} to "
                          f"have modulus/remainder [{b[1]}, {remainder}] because the function is scheduled inline.")
        touched = [stage_touched(sched, k) for k in range(1 + len(f._updates))]
        if any(touched):
            for k in range(len(f._updates)):
                if not touched[k + 1]:
                    print(f"Warning: Update definition {k} of function {name} has not been scheduled, even though some "
                          "other definitions have been. You may have forgotten to schedule it. If this was "
                          f"intentional, call {name}.update({k}).unscheduled() to suppress this warning.")


def _is_bounds_query(buf: Buffer) -> bool:
    """Halide's bounds-query buffer: a shape without host memory (Buffer.make_bounds_query, or a
    deallocated buffer) and no device copy. A query writes the shape it needs into it."""
    return buf.defined() and buf._array is None and buf._device_copy is None


def _reshape_bounds_query(buf: Buffer, shape: list[tuple[int, int, int]]) -> None:
    """Give a bounds-query buffer the (min, extent, stride) per dimension a query proposes (its
    shape lives in buffer.py's geometry array, as make_bounds_query makes it)."""
    from .buffer import _geometry

    n = len(shape)
    buf._geom = _geometry(buf.type(), tuple(s[1] for s in reversed(shape)), tuple(s[2] for s in reversed(shape)))
    buf._axis = list(range(n - 1, -1, -1))
    buf._mins = [s[0] for s in shape]


def _shape_of(buf: Buffer) -> list[tuple[int, int, int]]:
    return [(buf.dim(d).min(), buf.dim(d).extent(), buf.dim(d).stride()) for d in range(buf.dimensions())]


def _field_values(owners: list[str], shapes: list) -> dict[str, int]:
    """`name.min.d`, `name.extent.d`, `name.stride.d` of every buffer, by the names users know."""
    known = {}
    for name, shape in zip(owners, shapes):
        for d, values in enumerate(shape):
            for field, v in zip(("min", "extent", "stride"), values):
                known[f"{name}.{field}.{d}"] = v
    return known


def _value_of(e, known: dict, what: str) -> int:
    """The value of an integer IR expression of buffer dimensions and Params: from `known` (by
    name), else from the Param or the bound buffer the variable stands for."""
    from . import ir
    from .ir_mutator import IRVisitor, substitute
    from .param import ImageParam, Param
    from .simplify import simplify

    variables = {}

    class _Variables(IRVisitor):
        def visit_Variable(self, v):
            variables.setdefault(v.name, v)

    _Variables().visit(e)
    values = {}
    for name, var in variables.items():
        ref = var.ref
        if name in known:
            v = known[name]
        elif isinstance(ref, Param):
            v = ref.get()
        elif isinstance(ref, ImageParam) and ref._is_bound() or isinstance(ref, Buffer):
            buf = ref.get() if isinstance(ref, ImageParam) else ref
            _, field, d = name.rsplit(".", 2)
            v = getattr(buf.dim(int(d)), field)()
        else:
            raise HalideError(f"{what} uses {name}, whose value is not known when the pipeline runs")
        values[name] = ir.make_const(var.type, v)
    c = ir.const_int(simplify(substitute(values, e)))
    if c is None:
        raise HalideError(f"{what} does not evaluate to an integer")
    return c


def _check_constraints(constrained: list, owners: list[str], buffers: list, params: dict | None = None) -> None:
    """Before running: every constrained dimension of the buffers is what its constraint says
    (Halide's "Constraint violated" check). `params`: Param values by name, where they are not
    the Params' own (a Callable's arguments)."""
    from .errors import RuntimeCheckError
    from .ir_printer import expr_to_string

    known = {**(params or {}), **_field_values(owners, [_shape_of(b) for b in buffers])}
    for i, param in constrained:
        name = owners[i]
        alignment = param._host_alignment
        if alignment and _host_address(buffers[i]) % alignment:
            raise RuntimeCheckError(f"The host pointer of {name} is not aligned to a {alignment} bytes boundary.")
        for d, field, c in param._constraint_list():
            var = f"{name}.{field}.{d}"
            value = c if isinstance(c, int) else _value_of(c, known, f"The constraint on {var}")
            if known[var] != value:
                text = str(c) if isinstance(c, int) else expr_to_string(c)
                raise RuntimeCheckError(f"Constraint violated: {var} ({known[var]}) == {text} ({value})")


def _host_address(buf) -> int:
    """The address of the element at a buffer's min coordinates (Halide's host pointer)."""
    arr = buf._array if isinstance(buf, Buffer) else np.asarray(buf)
    return 0 if arr is None else arr.__array_interface__["data"][0]


def _constraints_of(source) -> list:
    """The constraints of a buffer's source: an OutputImageParam's or ImageParam's (a Buffer the
    algorithm names, or an output without an OutputImageParam yet, has none)."""
    return source._constraint_list() if hasattr(source, "_constraint_list") else []


def _propose_shapes(lowered, owners, sources, shapes, queried, lets, boxes, jit_externs=None) -> dict[int, list]:
    """One bounds query, as Halide's: for each queried buffer, the region the pipeline needs of it
    (with the current shapes of all buffers), passed through its constraints, in which every
    buffer's dimensions stand for the region required of that buffer. The bounds queries of
    extern stages among the lets run (BoundsQueries): an image they read without memory yet is
    needed where they say."""
    from . import ir
    from .ir_mutator import substitute
    from .simplify import simplify

    known = _field_values(owners, shapes)
    lowered_names = [b.name for b in lowered.buffers]  # (differ from the users' for generated names)
    env = {n: ir.make_const(ir.Int(32), v) for n, v in {**_field_values(lowered_names, shapes), **known}.items()}
    for sc in lowered.scalars:  # the Params' values, which bounds may use (a clamp to a Param)
        if sc.param is not None and getattr(sc.param, "_value", None) is not None and not sc.type.is_handle():
            env[sc.name] = ir.make_const(sc.type, sc.param.get())
    # As Halide: where a dimension is constrained to a constant or to another buffer's dimension or a
    # Param, the pipeline computes with the constrained value (so the region required depends on it)
    for i, src in enumerate(sources):
        for d, field, c in _constraints_of(src):
            if isinstance(c, int) or isinstance(c, ir.Variable):
                v = c if isinstance(c, int) else _value_of(c, known, f"The constraint on {owners[i]}.{field}.{d}")
                for name in (owners[i], lowered_names[i]):
                    env[f"{name}.{field}.{d}"] = ir.make_const(ir.Int(32), v)
    unbound = {lowered_names[i] for i in queried if not lowered.buffers[i].is_output}
    hosts = {b.name: _input_buffer(b)._array.ctypes.data for b in lowered.buffers
             if not b.is_output and b.name not in unbound}
    queries = BoundsQueries(jit_externs, hosts, unbound)
    for name, value in lets:
        v = simplify(substitute(env, value))
        if ir.const_int(v) is None:
            v = queries.value(name, v, value)
        if v is not None and ir.const_int(v) is not None:
            env[name] = v
    required = []  # per buffer, per dimension (min, extent, stride) required
    for i, spec in enumerate(lowered.buffers):
        box = boxes.get(spec.name)
        asked = queries.image_regions.get(spec.name)
        dims = []
        for d in range(spec.dimensions):
            if box is None and asked is None:
                lo, extent = shapes[i][d][0], shapes[i][d][1]
            else:
                lo, hi = asked[d] if asked is not None else (None, None)
                if box is not None:
                    lo_e, hi_e = (simplify(substitute(env, e)) for e in box[d])
                    lo_c, hi_c = ir.const_int(lo_e), ir.const_int(hi_e)
                    both = lo is not None and lo_c is not None and hi_c is not None
                    lo, hi = (min(lo, lo_c), max(hi, hi_c)) if both else (lo_c, hi_c)
                    if spec.is_output and lo is not None and hi is not None and lo > hi:
                        lo, hi = shapes[i][d][0], shapes[i][d][0] + shapes[i][d][1] - 1  # (written nowhere)
                if lo is None or hi is None:
                    externs = [f.name() for f in lowered.env.funcs.values() if is_extern(f)]
                    why = f" (what extern stages {', '.join(externs)} answer their bounds queries)" if externs else ""
                    raise HalideError(f"infer_input_bounds: the region of {owners[i]} in dimension {d} depends on "
                                      f"values not known before the pipeline runs{why}")
                extent = hi - lo + 1
            stride = 1 if d == 0 else dims[d - 1][2] * dims[d - 1][1]
            dims.append((lo, extent, stride))
        required.append(dims)
    as_required = _field_values(owners, required)
    proposed = {}
    for i in queried:
        src, dims = sources[i], []
        constraints = {(d, field): c for d, field, c in _constraints_of(src)}
        for d, req in enumerate(required[i]):
            values = []
            for k, field in enumerate(("min", "extent", "stride")):
                c = constraints.get((d, field))
                v = req[k] if c is None else c if isinstance(c, int) else \
                    _value_of(c, as_required, f"The constraint on {owners[i]}.{field}.{d}")
                values.append(v)
            lo, extent, _ = values
            # (an output's constraints say what it is: a query of it takes them, smaller or not)
            if not lowered.buffers[i].is_output and (lo > req[0] or lo + extent < req[0] + req[1]):
                raise HalideError(f"Error: Applying the constraints on {owners[i]} to the required region made it "
                                  f"smaller in dimension {d}. Required size: {req[0]} to {req[0] + req[1] - 1}. "
                                  f"Constrained size: {lo} to {lo + extent - 1}.")
            dims.append(tuple(values))
        proposed[i] = dims
    return proposed


def _allocate(t, shape: list[tuple[int, int, int]], name: str) -> Buffer:
    """A zeroed Buffer with the given (min, extent, stride) per dimension."""
    mins, extents, strides = ([s[k] for s in shape] for k in range(3))
    dense = [1]
    for e in extents[:-1]:
        dense.append(dense[-1] * e)
    if strides == dense[: len(strides)] or any(e == 0 for e in extents):
        buf = Buffer(t, extents, name)
    else:
        if any(s <= 0 for s in strides):
            raise HalideError(f"infer_input_bounds: {name} is constrained to strides {strides}; pyhalide allocates "
                              "buffers with positive strides only")
        size = 1 + sum((e - 1) * s for e, s in zip(extents, strides))
        flat = aligned_zeros((size,), t.to_numpy())
        item = flat.itemsize
        array = np.lib.stride_tricks.as_strided(flat, shape=tuple(reversed(extents)),
                                                strides=tuple(s * item for s in reversed(strides)))
        buf = Buffer(array, name)
    return buf.set_min(mins)


def _bound_shapes(lowered) -> tuple:
    """What the compiled code assumes of the input Buffers the algorithm names directly (their
    shapes are compiled in, as Halide's JIT does): the per-call key, a few attribute reads."""
    key = []
    for _, buf in lowered.bound_inputs:
        a = buf._shape_array()
        key.append((a.shape, a.strides, tuple(buf._mins), tuple(buf._axis)))
    return tuple(key)


def _shape_constants(lowered) -> dict[str, int]:
    """`buffer.field.dimension` -> value, for the min, extent and stride of every dimension of the
    Buffers the algorithm names."""
    return {f"{name}.{field}.{d}": value for name, buf in lowered.bound_inputs for d in range(buf.dimensions())
            for field, value in zip(("min", "extent", "stride"), (buf.dim(d).min(), buf.dim(d).extent(),
                                                                   buf.dim(d).stride()))}


def _layout(buf: Buffer) -> tuple:
    arr = buf._array
    dense = arr.ndim == 0 or arr.strides[buf._axis[0]] == arr.itemsize or arr.shape[buf._axis[0]] <= 1
    return tuple(buf._axis), dense


def _input_buffer(spec) -> Buffer:
    src = spec.source
    if type(src) is Buffer:
        return src
    from .param import ImageParam

    return src.get() if isinstance(src, ImageParam) else src


def loop_nest_text(stmt, fused_loops=frozenset()) -> str:
    """The loops, productions and storage of a Stmt, in print_loop_nest's format (Halide's):
    `produce f:` / `consume f:` blocks, `store f:` where storage is hoisted above the compute
    level, loops as `for x:`, `parallel y:`, `vectorized x.xi in [0, 7]:` (constant ranges shown);
    `fused_loops`, the loops compute_with fused, as Halide names them (`for x.fused.xo:`)."""
    from . import ir

    lines: list[str] = []

    def walk(s, depth):
        pad = "  " * depth
        if isinstance(s, ir.Block):
            for x in s.stmts:
                walk(x, depth)
        elif isinstance(s, ir.LetStmt):
            walk(s.body, depth)
        elif isinstance(s, ir.ProducerConsumer):
            if isinstance(s.body, ir.Evaluate) and isinstance(s.body.value, ir.IntImm):
                return  # an output's empty consume
            lines.append(f"{pad}{'produce' if s.is_producer else 'consume'} {s.name}:")
            walk(s.body, depth + 1)
        elif isinstance(s, ir.For):
            kind = "for" if s.for_type == ir.SERIAL else s.for_type
            var = s.name.split(".", 2)[-1]  # drop the "func.s<stage>." prefix
            if s.name in fused_loops:
                head, _, last = var.rpartition(".")
                var = f"{head}.fused.{last}" if head else f"fused.{last}"
            lo, ext = ir.const_int(s.min), ir.const_int(s.extent)
            span = f" in [{lo}, {lo + ext - 1}]" if lo is not None and ext is not None else ""
            lines.append(f"{pad}{kind} {var}{span}:")
            walk(s.body, depth + 1)
        elif isinstance(s, ir.Realize):
            sched = getattr(s.func, "_schedule", None)
            hoisted = sched is not None and sched.store_level is not None and not sched.store_level.is_inlined() \
                and sched.store_level != sched.compute_level
            if hoisted:
                lines.append(f"{pad}store {s.name}:")
            walk(s.body, depth + 1 if hoisted else depth)
        elif isinstance(s, ir.Allocate):
            walk(s.body, depth)
        elif isinstance(s, ir.IfThenElse):
            walk(s.then_case, depth)
            if s.else_case is not None:
                walk(s.else_case, depth)
        elif isinstance(s, ir.Provide | ir.Store):
            lines.append(f"{pad}{s.name}(...) = ...")

    walk(stmt, 0)
    return "\n".join(lines) + "\n"
