"""Pipeline: one or more output Funcs, lowered and compiled together, then realized."""

from __future__ import annotations

import enum
import html
import math

import numpy as np

from .buffer import MAX_ELEMENTS, Buffer
from .deep_recursion import deep
from .errors import HalideError
from .func import Func
from .ir_printer import stmt_to_string
from .types import Int


class Pipeline:
    def __init__(self, outputs):
        if isinstance(outputs, Func):
            outputs = [outputs]
        outputs = list(outputs)
        if not outputs or not all(isinstance(f, Func) for f in outputs):
            raise HalideError("Pipeline takes a Func or a list of Funcs")
        self._outputs = outputs
        self._lowered = None
        self._versions: list = []  # (user Func, its version) for every Func the lowering read
        self._compiled: dict = {}
        self._target = None

    def outputs(self) -> list[Func]:
        return list(self._outputs)

    # ------------------------------------------------------------------ the schedule as a value
    def funcs(self) -> list[Func]:
        """Every Func the outputs need under the current schedule (in_() wrappers and rfactor's
        intermediates included), in a walk from the outputs."""
        from .call_graph import reachable_funcs

        return list(reachable_funcs(self._outputs).values())

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

    def _canonical_names(self) -> dict[str, str]:
        """Generated names (hl.minimum's Func "minimum7": counters that depend on what the process
        made before) -> the names a fresh process gives them: schedule records use those, so a
        record made here applies to the same algorithm built anywhere."""
        from .call_graph import algorithm_funcs
        from .lowering.copy_graph import canonical_names

        return canonical_names(algorithm_funcs(self._outputs), schedules=False)

    def structural_hash(self) -> str:
        """A hash of what the pipeline computes, independent of names, schedules and estimates."""
        from .structural_hash import structural_hash

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
        if lw is None or (lw.target is not target and lw.target != target) or any(
            f._version != v for f, v in self._versions
        ):
            lw = self._lower_now()
        return lw

    @deep
    def _lower_now(self):
        from .lower import lower

        self._lowered = lower(self._outputs, self._target)
        self._versions = [(f, f._version) for f in self._lowered.env.sources]
        self._compiled = {}
        return self._lowered

    def _compile(self, layouts):
        """Native code for one buffer layout: per buffer, its axis order and whether dimension 0 is
        dense (stride 1), which lets vector loads and stores be contiguous."""
        lowered = self._lower()
        compiled = self._compiled.get(layouts)
        if compiled is None:
            compiled = self._compile_now(lowered, layouts)
        return compiled

    @deep
    def _compile_now(self, lowered, layouts):
        from .codegen.runtime import CompiledPipeline

        compiled = self._compiled[layouts] = CompiledPipeline(lowered, layouts, self._target)
        return compiled

    def _default_layouts(self):
        lowered = self._lower()
        layouts = []
        for b in lowered.buffers:
            if b.is_output:
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
        return Callable(self, list(arguments))

    def infer_arguments(self) -> list:
        """The ImageParams and Params the pipeline reads, as compile_to_callable takes them:
        the ImageParams by name, then the Params by name (Halide's order)."""
        from .lowering.environment import pipeline_inputs

        images, params = pipeline_inputs(self._lower().env)
        image_params = [img for _, img in sorted(images.items()) if not isinstance(img, Buffer)]
        return image_params + [p for _, p in sorted(params.items())]

    def compile_to_module(self, arguments, fn_name: str, target=None) -> Module:
        """The pipeline lowered (fresh, for `target`) into a Module: Halide's unit of compiled
        code before any backend runs. pyhalide's Module holds the lowered Stmt and the arguments."""
        from .lower import lower
        from .target import resolve_target

        target = resolve_target(target)
        target.require_supported()
        return Module(fn_name, target, lower(self._outputs, target), list(arguments))

    def invalidate_cache(self) -> None:
        """Forget the compiled code: the next realize lowers and compiles again."""
        self._lowered, self._compiled = None, {}

    # ------------------------------------------------------------------ running
    def realize(self, sizes=None, target=None):
        """realize([w, h, ...]) allocates outputs; realize(buffer) / realize([buffers]) fills them."""
        self._set_target(target)
        lowered = self._lower()
        out_specs = [b for b in lowered.buffers if b.is_output]
        if isinstance(sizes, Buffer) or (
            isinstance(sizes, list | tuple) and sizes and all(isinstance(s, Buffer) for s in sizes)
        ):
            outs = [sizes] if isinstance(sizes, Buffer) else list(sizes)
            if len(outs) != len(out_specs):
                raise HalideError(f"realize: {len(out_specs)} output buffers needed, {len(outs)} given")
            for spec, buf in zip(out_specs, outs):
                if buf._type is not spec.type and buf.type() != spec.type:
                    raise HalideError(
                        f"realize: output {spec.name} has type {spec.type} but the buffer has type {buf.type()}"
                    )
                if buf.dimensions() != spec.dimensions:
                    raise HalideError(
                        f"realize: output {spec.name} has {spec.dimensions} dimensions but the buffer has "
                        f"{buf.dimensions()}"
                    )
            self._run(outs)
            return outs[0] if len(outs) == 1 else outs
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
        if lowered.env.grown_outputs:  # the schedule writes beyond the sizes: allocate that, return a view
            results = list(outs)
            for k, spec in enumerate(out_specs):
                grown = spec.name in lowered.env.grown_outputs
                region = self._grown_region(lowered, spec.name, sizes) if grown else None
                if region is not None:
                    outs[k] = Buffer._output(spec.type, [extent for _, extent in region], spec.name)
                    outs[k]._mins = [lo for lo, _ in region]
                    results[k] = outs[k]._cropped(sizes)
        self._run(outs)
        return results[0] if len(results) == 1 else results

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

    def _run(self, outs: list[Buffer]) -> None:
        lowered = self._lowered  # realize has just brought it up to date
        buffers = list(outs)
        for b in lowered.buffers[len(outs):]:
            buffers.append(_input_buffer(b))
        layouts = tuple(_layout(b) for b in buffers)
        compiled = self._compiled.get(layouts) or self._compile_now(lowered, layouts)
        params = [s.param.get() for s in lowered.scalars]
        compiled.run(buffers, params)

    # ------------------------------------------------------------------ looking inside
    def print_loop_nest(self) -> None:
        """The loop nest as Halide prints it: after bounds inference and the first simplification,
        before loops are unrolled or vectorized (so they show as loops, with their ranges)."""
        from .lower import lower

        self._set_target(None)
        seen = []
        lower(self._outputs, self._target, hook=lambda name, stmt: seen.append((name, stmt)))
        print(loop_nest_text(next(stmt for name, stmt in seen if name == "simplify")), end="")

    def compile_to_lowered_stmt(self, filename: str, arguments=None, fmt=None, target=None) -> None:
        """The lowered Stmt as text, or (fmt=hl.StmtOutputFormat.HTML) as an HTML page of it,
        each `produce` block collapsible."""
        self._set_target(target)
        text = stmt_to_string(self._lower().stmt)
        with open(filename, "w") as f:
            f.write(_stmt_html(text, self._outputs[0].name()) if fmt == StmtOutputFormat.HTML else text)

    def compile_to_llvm_assembly(self, filename: str, arguments=None, fn_name=None, target=None) -> None:
        from .codegen.jit import optimize

        self._set_target(target)
        compiled = self._compile(self._default_layouts())
        with open(filename, "w") as f:
            f.write(str(optimize(compiled.llvm_ir)))

    def compile_to_assembly(self, filename: str, arguments=None, fn_name=None, target=None) -> None:
        from .codegen.jit import emit_assembly

        self._set_target(target)
        compiled = self._compile(self._default_layouts())
        with open(filename, "w") as f:
            f.write(emit_assembly(compiled.llvm_ir))

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
        finish_lowering(lowered.stmt, dense_buffers(lowered, self._default_layouts()), kernels=kernels)
        return cuda_source(kernels)


class StmtOutputFormat(enum.Enum):
    """Halide's hl.StmtOutputFormat: what compile_to_lowered_stmt writes."""

    Text = 0
    HTML = 1


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
    """What compile_to_module returns: a named, lowered pipeline for one target."""

    def __init__(self, name: str, target, lowered, arguments: list):
        self._name, self._target, self.lowered, self.arguments = name, target, lowered, arguments

    def name(self) -> str:
        return self._name

    def target(self):
        return self._target

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


class Callable:
    """What compile_to_callable returns. Buffers may be hl.Buffers or numpy arrays (taken with
    Halide's reversed axis order and mins 0), with dimension 0 dense."""

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

    def __call__(self, *args):
        if len(args) != self._n_args + self._n_out:
            raise HalideError(f"Callable takes {self._n_args} arguments and {self._n_out} output buffers, got "
                              f"{len(args)} values")
        buffers = list(args[self._n_args:])
        for i, const in self._inputs:
            buffers.append(const if i is None else args[i])
        self._compiled.run(buffers, [args[i] for i in self._params])


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


def loop_nest_text(stmt) -> str:
    """The loops, productions and storage of a Stmt, in print_loop_nest's format (Halide's):
    `produce f:` / `consume f:` blocks, `store f:` where storage is hoisted above the compute
    level, loops as `for x:`, `parallel y:`, `vectorized x.xi in [0, 7]:` (constant ranges shown)."""
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
            lo, ext = ir.const_int(s.min), ir.const_int(s.extent)
            span = f" in [{lo}, {lo + ext - 1}]" if lo is not None and ext is not None else ""
            lines.append(f"{pad}{kind} {var}{span}:")
            walk(s.body, depth + 1)
        elif isinstance(s, ir.Realize):
            sched = getattr(s.func, "_schedule", None)
            hoisted = sched is not None and sched.store_level is not None and sched.store_level != sched.compute_level
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
