"""Lowering: the ordered list of passes from a Func graph to a flat, simplified Stmt.

`lower` runs `lowering_passes`, which depend on the algorithm, the schedule and the target;
`finish_lowering` runs `layout_passes` when the Stmt is compiled for one buffer layout. Set
HL_DEBUG_LOWER=1 to print the IR after each pass with its time.
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass, field

from . import ir
from .errors import CompileError
from .ir_mutator import cycle_collector_paused, substitute
from .ir_printer import stmt_to_string
from .lowering.allocation_bounds import allocation_bounds
from .lowering.bound_shapes import specialize_bound_shapes
from .lowering.bound_small_allocations import bound_small_allocations
from .lowering.bounds_inference import bounds_inference, buffer_names
from .lowering.buffer_checks import buffer_checks
from .lowering.clamp_unsafe_accesses import clamp_unsafe_accesses
from .lowering.constant_stack_indices import constant_stack_indices
from .lowering.copy_graph import errors_in_user_names
from .lowering.emulate_bfloat16 import emulate_bfloat16
from .lowering.environment import Environment, build_environment, pipeline_inputs
from .lowering.fuzz_float_stores import fuzz_float_stores
from .lowering.gpu_host_copies import gpu_host_copies
from .lowering.gpu_kernel_checks import gpu_kernel_checks
from .lowering.gpu_kernels import Kernel, gpu_kernels
from .lowering.gpu_vector_loops import gpu_vector_loops
from .lowering.inject_profiling import inject_profiling, profiled
from .lowering.inline import inline_functions
from .lowering.lower_arithmetic import lower_arithmetic
from .lowering.memoization import inject_memoization
from .lowering.partition_loops import loop_partition_policies, partition_loops
from .lowering.prefetches import inject_prefetches
from .lowering.remove_undef import remove_undef
from .lowering.schedule_functions import schedule_functions
from .lowering.select_instructions import select_instructions
from .lowering.serial_vector_loops import serial_vector_loops
from .lowering.shared_lets import name_shared_subexpressions
from .lowering.skip_stages import skip_stages
from .lowering.sliding_window import sliding_window
from .lowering.specialize_residues import specialize_residues
from .lowering.storage_flattening import storage_flattening
from .lowering.storage_folding import storage_folding
from .lowering.strip_promises import strip_promises
from .lowering.target_queries import resolve_target_queries
from .lowering.trace_realizations import trace_realizations
from .lowering.tracing import tracing
from .lowering.trim_no_ops import trim_no_ops
from .lowering.unit_strides import specialize_unit_strides
from .lowering.unroll_loops import unroll_loops
from .lowering.vectorize_loops import vectorize_loops
from .simplify import simplify
from .simplify.fold import check_no_signed_integer_overflow


@dataclass
class BufferArg:
    """A buffer the compiled pipeline takes: an output (written) or an input image (read)."""

    name: str
    type: object
    dimensions: int
    is_output: bool
    source: object = None  # the Func (outputs) or Buffer/ImageParam (inputs)
    value_index: int = 0


@dataclass
class ScalarArg:
    name: str
    type: object
    param: object


@dataclass
class LoweredPipeline:
    stmt: ir.Stmt
    buffers: list[BufferArg]
    scalars: list[ScalarArg]
    env: Environment
    grown_regions: dict = field(default_factory=dict)  # realize's memo: (output, known values) -> region

    @property
    def target(self):
        return self.env.target

    @functools.cached_property
    def bound_inputs(self) -> list:
        """(name, Buffer) of the input Buffers the algorithm names directly (not ImageParams)."""
        from .buffer import Buffer

        return [(b.name, b.source) for b in self.buffers if not b.is_output and type(b.source) is Buffer]

    @functools.cached_property
    def user_names(self):
        """The runtime's UserNames for this pipeline's renamed names (None when none was renamed)."""
        from .codegen.runtime import UserNames

        return UserNames(self.env.user_names) if self.env.user_names else None


def _slide_and_fold(stmt, env):
    stmt, windows = sliding_window(stmt, env)
    return storage_folding(allocation_bounds(stmt, env.read_past_region), windows)


def lowering_passes(env, vectors: bool = True, jit: bool = False):
    """(name, function) in the order they run. Each takes and returns a Stmt. Without `vectors`
    (the C backend's scalar source), vectorized loops stay loops; only `jit` code (run in this
    process) has the memoization cache, which lives in this process's runtime."""
    cache = jit and vectors and not env.target.has_gpu_feature()
    # A GPU thread is scalar: vectorized loops inside kernels are unrolled instead.
    gpu = [("gpu vector loops", gpu_vector_loops)] if env.target.has_feature("cuda") else []
    profiling = [("profiling", lambda s: inject_profiling(s, env))] if profiled(env.target) else []
    fuzz = [("fuzz float stores", fuzz_float_stores)] if env.target.has_feature("fuzz_float_stores") else []
    return [
        # Inlining must see the whole nest, so it runs after the loops exist; bounds inference
        # must run after it, so that calls made through inlined Funcs count.
        ("inline functions", lambda s: inline_functions(s, env)),
        # Inlining carries undef into consumers: their stores are guarded where it is defined.
        ("remove undef", remove_undef),
        # A Func's value used as a coordinate stays within what bounds inference assumes of it.
        ("clamp unsafe accesses", clamp_unsafe_accesses),
        ("target queries", lambda s: resolve_target_queries(s, env.target)),
        ("bounds inference", lambda s: bounds_inference(s, env)),
        # The constant constraints on the buffers passed in (which the caller checks) are known
        # before unrolling needs constant extents (Halide's add_image_checks).
        *([("constant constraints", lambda s: substitute(env.buffer_constants, s))] if env.buffer_constants else []),
        # Tracing prints what the Provides and calls do, so it goes in before sliding window moves them.
        ("tracing", lambda s: tracing(s, env)),
        # Sliding window rewrites the pure-stage bounds lets, before simplification inlines them;
        # it moves what each iteration computes, so allocations are sized and buffers checked
        # after it; folding then shrinks the storage of what slides.
        ("sliding window, allocation bounds, storage folding", lambda s: _slide_and_fold(s, env)),
        # Realization events print each Realize's box, which allocation bounds has just sized.
        ("trace realizations", lambda s: trace_realizations(s, env)),
        ("buffer checks", lambda s: buffer_checks(s, env)),
        # What a prefetch fetches is not read (no bounds to infer or check): after both.
        ("prefetches", lambda s: inject_prefetches(s, env)),
        # A production nothing will read is skipped: its storage and its region are settled, and
        # what a window reuses is known; tracing and profiling marks inside it are skipped with it.
        ("skip stages", lambda s: skip_stages(s, env)),
        # The profiler's marks go in once the checks are placed: what runs before a production is overhead.
        *profiling,
        ("strip promises", lambda s: strip_promises(s, env.target.has_feature("check_unsafe_promises"))),
        ("simplify", simplify),
        # Flattening needs the final bounds of every Realize.
        ("storage flattening", storage_flattening),
        # A memoized Func's production asks the cache first: its buffers exist once flattened.
        ("memoization", lambda s: inject_memoization(s, env, cache)),
        *fuzz,
        ("simplify", simplify),
        # Loops run only where their bodies do something: the simplified stores show where not.
        ("trim no-ops", trim_no_ops),
        # Storage whose size has a small constant bound goes on the stack, not to the heap per iteration.
        ("bound small allocations", bound_small_allocations),
        # Unrolling and vectorizing need constant extents, which simplification exposes;
        # unrolled copies of a vectorized loop are then each vectorized.
        *gpu,
        ("unroll loops", unroll_loops),
        ("vectorize loops", vectorize_loops) if vectors else ("vectorized loops as serial loops", serial_vector_loops),
        ("simplify", simplify),
        # Unrolled copies index small stack storage by constants that only the lets show.
        ("constant stack indices", constant_stack_indices),
        # The simplified guards show which loops have a steady state without them.
        ("partition loops", lambda s: partition_loops(s, loop_partition_policies(env))),
        # A vectorized x % 2 or x / 2 is cheap only where its phase is known: loops are
        # versioned on it (after partitioning, whose copies each get their own versions).
        ("specialize residues", specialize_residues),
        # bfloat16 as float32 arithmetic on its bits, once nothing asks bfloat questions any more:
        # what follows (and every backend) sees 16-bit integers and float32.
        ("emulate bfloat16", emulate_bfloat16),
        # A constant fold that overflowed a signed 32- or 64-bit integer (undefined) is an error.
        ("signed integer overflow", check_no_signed_integer_overflow),
    ]


def layout_passes(dense_buffers: list[str], kernels: list[Kernel] | None = None,
                  buffer_constants: dict | None = None, gpu_loops_serial: bool = False, x86: bool = True):
    """(name, function) of the passes that finish a lowered Stmt for one buffer layout, in order.
    With a `kernels` list (GPU targets), the GPU loop nests are moved into it as Kernels; with
    `gpu_loops_serial` they stay in the host code (run as serial loops) but are checked as
    kernels all the same, so a schedule the GPU refuses is refused on every device;
    `buffer_constants` (`buffer.field.dimension` -> value) are the dimensions compiled in as
    constants: the shapes of the Buffers bound in the algorithm, the constant constraints;
    `x86`: whether the CPU compiled for is an x86 one (ahead-of-time code may be for ARM)."""

    def extract_kernels(stmt):
        host, found = gpu_kernels(stmt)
        kernels.extend(found)
        return host

    def check_kernels(stmt):
        gpu_kernels(stmt)
        return stmt

    # A check the same for a whole GPU loop nest is made before it (a kernel cannot report one).
    checks = [("gpu kernel checks", gpu_kernel_checks)]
    gpu = [*checks, ("gpu kernels checked", check_kernels)] if gpu_loops_serial else [] if kernels is None else [
        *checks,
        # Each GPU block nest becomes a kernel and a launch; the host side then copies what the
        # host touches between kernels.
        ("gpu kernels", extract_kernels),
        ("gpu host copies", gpu_host_copies),
    ]
    return [
        # A Buffer the algorithm names is part of the pipeline, as in Halide's JIT: its shape is
        # known, so clamps and index arithmetic fold; so are constrained dimensions.
        ("bound buffer shapes", lambda s: specialize_bound_shapes(s, buffer_constants or {})),
        # Knowing which strides are 1 turns unit-stride accesses into dense vector loads and stores.
        ("unit strides", lambda s: specialize_unit_strides(s, dense_buffers)),
        # Halide's arithmetic rules as C-like operations, for every backend. Last: the simplifier
        # must not run after it (it does not know the intrinsics, and could break their guarantees).
        ("arithmetic rules", lower_arithmetic),
        *gpu,
        # Instruction selection for the host CPU: multiply-adds and saturating arithmetic x86 has
        # instructions for (after the kernels have left, so only host code gets them).
        *([("select instructions", select_instructions)] if x86 else []),
        # Bounds built by substitution share subtrees; code generators walk trees.
        ("shared subexpressions", name_shared_subexpressions),
        ("signed integer overflow", check_no_signed_integer_overflow),
    ]


def _run(passes, stmt, hook):
    debug = os.environ.get("HL_DEBUG_LOWER") == "1"
    for name, fn in passes:
        t0 = time.perf_counter()
        stmt = fn(stmt)
        if debug:
            print(f"=== {name} ({(time.perf_counter() - t0) * 1e3:.1f} ms)\n" + stmt_to_string(stmt))
        if hook is not None:
            hook(name, stmt)
    return stmt


@cycle_collector_paused()
def finish_lowering(stmt: ir.Stmt, dense_buffers: list[str], hook=None, kernels: list | None = None,
                    buffer_constants: dict | None = None, gpu_loops_serial: bool = False,
                    x86: bool = True) -> ir.Stmt:
    """The Stmt a code generator compiles, for buffers whose dimension 0 is dense as listed (and,
    given a `kernels` list, the GPU kernels it launches, appended to it; given `buffer_constants`,
    the buffer dimensions known as constants; see `layout_passes` for `gpu_loops_serial`)."""
    return _run(layout_passes(dense_buffers, kernels, buffer_constants, gpu_loops_serial, x86), stmt, hook)


def constant_constraints(outputs, images, copies=None) -> dict[str, int]:
    """`buffer.field.dimension` -> value of the constant `set_min / set_extent / set_stride`
    constraints of the outputs' buffers and of the ImageParams. `copies`: the outputs as lowering
    names them (a Func whose name was taken, `k$1`, is `k` in a pipeline of its own)."""
    sources = [(name, p) for f, copy in zip(outputs, copies or outputs)
               for name, p in zip(buffer_names(copy), f.__dict__.get("_output_params") or [])]
    sources += [(img.name(), img) for img in images if hasattr(img, "_constraint_list")]
    return {f"{name}.{fld}.{d}": c for name, p in sources for d, fld, c in p._constraint_list() if isinstance(c, int)}


def _check_tuple_output_constraints(outputs) -> None:
    """As Halide: a Tuple's output buffers share the first one's region, so only the first
    one's min and extent can be constrained (the others' strides can be)."""
    for f in outputs:
        for p in (f.__dict__.get("_output_params") or [])[1:]:
            if any(fld in ("min", "extent") for _, fld, _ in p._constraint_list()):
                raise CompileError(f"Output buffer {p.name()}: can't constrain the min or extent of an output buffer "
                                   "beyond the first. They are implicitly constrained to have the same min and "
                                   f"extent as the first output buffer ({f.output_buffers()[0].name()}).")


@cycle_collector_paused()
def lower(outputs, target=None, hook=None, ahead_of_time: bool = False, vectors: bool = True,
          jit: bool = True) -> LoweredPipeline:
    """Lower the pipeline computing `outputs` (a Func or a list) for `target` (an hl.Target, a
    target string or None for the host), on a private copy of the Func graph: the user's Funcs
    are not changed. `hook(pass_name, stmt)`, if given, sees the IR after every pass (for
    debugging and tests); HL_DEBUG_LOWER=1 prints it with each pass's time. `ahead_of_time`:
    for an object file, which may be for another CPU or OS than this one. The constant
    constraints of the outputs and the ImageParams are compiled in (their callers check them).
    Without `vectors`, vectorized loops stay serial loops (for the C backend); without `jit`
    (nor ahead_of_time), the code is for another process: memoized Funcs are computed every time."""
    from .target import resolve_target

    if not isinstance(outputs, list | tuple):
        outputs = [outputs]
    target = resolve_target(target)
    target.require_supported(ahead_of_time)
    _check_tuple_output_constraints(outputs)
    env = build_environment(list(outputs), target)
    constants = constant_constraints(outputs, pipeline_inputs(env)[0].values(), env.outputs)
    env.buffer_constants = {k: ir.make_const(ir.Int(32), v) for k, v in constants.items()}
    with errors_in_user_names(env.user_names):
        stmt = _run([("schedule functions", lambda _: schedule_functions(env))], None, hook)
        stmt = _run(lowering_passes(env, vectors, jit and not ahead_of_time), stmt, hook)
    images, params = pipeline_inputs(env)
    buffers = []
    for f in env.outputs:
        for k, (bname, t) in enumerate(zip(buffer_names(f), f.types())):
            buffers.append(BufferArg(bname, t, f.dimensions(), True, f, k))
    output_names = {b.name for b in buffers}
    for name in sorted(images):
        if name in output_names:
            continue
        img = images[name]
        buffers.append(BufferArg(name, img.type(), img.dimensions(), False, img))
    scalars = [ScalarArg(n, p.type(), p) for n, p in sorted(params.items())]
    return LoweredPipeline(stmt, buffers, scalars, env)
