"""Halide's ahead-of-time outputs (`compile_to`, `compile_to_file`, `compile_to_static_library`,
`compile_to_object` ...): a pipeline as files that a C, C++ or Python program builds with, and
runs without pyhalide (codegen/aot.py makes the object, codegen/c_interface.py the C text).

The target defaults to $HL_TARGET or the host, as Halide's bindings have it (`to_aot_target`);
it may be another OS or CPU than this one (x86 or ARM; see Target.require_supported).
"""

from __future__ import annotations

import enum
import re

from . import ir
from .errors import HalideError
from .ir_mutator import substitute
from .ir_printer import expr_to_string
from .types import Type

OBJECT_OUTPUTS = ("object", "assembly", "bitcode", "llvm_assembly", "static_library")


class OutputFileType(enum.Enum):
    """Halide's hl.OutputFileType: what compile_to writes."""

    assembly = "assembly"
    bitcode = "bitcode"
    c_header = "c_header"
    c_source = "c_source"
    cpp_stub = "cpp_stub"
    featurization = "featurization"
    function_info_header = "function_info_header"
    hlpipe = "hlpipe"
    llvm_assembly = "llvm_assembly"
    object = "object"
    python_extension = "python_extension"
    pytorch_wrapper = "pytorch_wrapper"
    registration = "registration"
    schedule = "schedule"
    static_library = "static_library"
    stmt = "stmt"
    conceptual_stmt = "conceptual_stmt"
    stmt_html = "stmt_html"
    conceptual_stmt_html = "conceptual_stmt_html"
    device_code = "device_code"


_WRITTEN = {"assembly", "bitcode", "c_header", "c_source", "llvm_assembly", "object", "python_extension",
            "static_library", "stmt", "stmt_html", "conceptual_stmt", "conceptual_stmt_html"}


def aot_target(target):
    """The target an output file is for: the one given, or (None, or an hl.Target() with unknowns)
    $HL_TARGET or the host, as Halide's bindings decide."""
    from .target import Target, get_target_from_environment, resolve_target

    if target is None or isinstance(target, Target) and target._has_unknowns():
        return get_target_from_environment()
    return resolve_target(target)


def compile_to(pipeline, outputs: dict, arguments, fn_name: str = "", target=None, lowered=None) -> None:
    """Write each of `outputs` ({OutputFileType: path}) for the pipeline as a function `fn_name`
    (default: the first output Func's name) of `arguments` (ImageParams and Params, in the order
    the function takes them; the output buffers follow); `lowered`: the pipeline as lowered for
    the target before (a Module's), else it is lowered now."""
    from .codegen import c_interface
    from .codegen.aot import machine_for, static_library
    from .param import argument_sources

    arguments = argument_sources(arguments)
    kinds = {}
    for kind, path in outputs.items():
        name = kind.value if isinstance(kind, OutputFileType) else str(kind)
        if name not in _WRITTEN:
            raise HalideError(f"compile_to: pyhalide does not write OutputFileType.{name} (it writes "
                              f"{', '.join(sorted(_WRITTEN))})")
        kinds[name] = str(path)
    target = aot_target(target)
    if "static_library" in kinds and not machine_for(target).elf:
        raise HalideError(f"compile_to_static_library: pyhalide writes static libraries for ELF targets (Linux, "
                          f"Android), not {target.os.value}; write the object (compile_to_object) and archive it "
                          "with the platform's tools")
    fn_name = fn_name or re.sub(r"\W", "_", pipeline.outputs()[0].name())
    if lowered is None and kinds.keys() - {"c_source"}:
        lowered = _lowered(pipeline, target)
    elif lowered is not None:
        target.require_supported(ahead_of_time=True)
    code = _compile(pipeline, lowered, list(arguments), fn_name, target) if kinds.keys() & {
        *OBJECT_OUTPUTS, "c_header", "python_extension"} else None
    for name, path in kinds.items():
        if name in ("stmt", "conceptual_stmt", "stmt_html", "conceptual_stmt_html"):
            from .pipeline import lowered_stmt_text

            _write(path, lowered_stmt_text(lowered, name.endswith("html")))
        elif name == "c_source":
            _write(path, _c_source(pipeline, list(arguments), fn_name, target))
        elif name == "c_header":
            _write(path, c_interface.header(fn_name, code.arguments, target))
        elif name == "python_extension":
            _write(path, c_interface.python_extension(fn_name, code.arguments))
        elif name == "object":
            _write(path, code.object_file())
        elif name == "assembly":
            _write(path, code.assembly())
        elif name == "llvm_assembly":
            _write(path, code.llvm_assembly())
        elif name == "bitcode":
            _write(path, code.bitcode())
        elif name == "static_library":
            _write(path, static_library([(f"{fn_name}{code.machine.object_suffix}", code.object_file(),
                                          code.exported_symbols())]))


def object_suffix(target) -> str:
    from .codegen.aot import machine_for

    return machine_for(aot_target(target)).object_suffix


def library_suffix(target) -> str:
    from .target import TargetOS

    return ".lib" if aot_target(target).os is TargetOS.Windows else ".a"


def _write(path: str, data) -> None:
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)


def _lowered(pipeline, target, vectors: bool = True):
    """The pipeline lowered for `target`, ahead of time (without `vectors`: for the C backend)."""
    from .lower import lower

    pipeline._require_defined()
    target.require_supported(ahead_of_time=True)
    return pipeline._with_requirements(lower(pipeline.outputs(), target, ahead_of_time=True, vectors=vectors))


def _compile(pipeline, lowered, arguments: list, fn_name: str, target, portable: bool = False):
    """The lowered pipeline compiled into an ObjectCode (codegen/aot.py)."""
    from .codegen.aot import compile_object

    stmt, entry, checks, constants = _entry_parts(pipeline, lowered, arguments)
    return compile_object(lowered, stmt, entry, fn_name, target, checks, constants, portable)


def compile_multitarget(pipeline, filename_prefix: str, arguments, targets, suffixes=None,
                        library: bool = True) -> None:
    """Halide's compile_to_multitarget_static_library (`library`) and _object_files: one object per
    target and, with more than one, a dispatcher `NAME` (and `NAME_argv`) that calls the first
    whose features this CPU has (the last target, the baseline, unchecked). Writes PREFIX.h and
    PREFIX.a, or PREFIX-SUFFIX.o per target (SUFFIX: the target's string, or the given suffix)
    and PREFIX_wrapper.o; a single target is compiled as compile_to_static_library or
    compile_to_file compile it. pyhalide's objects carry their own runtime: there is no
    PREFIX_runtime.o to link."""
    from .codegen import c_interface, multitarget
    from .codegen.aot import entry_types, machine_for, static_library, x86_llvm_features
    from .param import argument_sources
    from .target import TargetArch, resolve_target

    targets = [resolve_target(t) for t in targets]
    if not targets:
        raise HalideError("compile_to_multitarget: Must specify at least one target.")
    suffixes = list(suffixes or [])
    if suffixes and len(suffixes) != len(targets):
        raise HalideError("compile_to_multitarget: The suffixes list must be empty or the same length as the "
                          "targets list.")
    base = targets[-1]
    if any((t.arch, t.bits, t.os) != (base.arch, base.bits, base.os) for t in targets):
        raise HalideError("compile_to_multitarget: All Targets must have matching arch-bits-os for "
                          "compile_multitarget.")
    fn_name = re.sub(r"\W", "_", pipeline.outputs()[0].name())
    if len(targets) == 1:
        compile_file = pipeline.compile_to_static_library if library else pipeline.compile_to_file
        compile_file(filename_prefix, arguments, fn_name, base)
        return
    if base.arch is not TargetArch.X86:
        raise HalideError(f"compile_to_multitarget: pyhalide chooses among targets at run time on x86 only, not "
                          f"{base.arch.value}: compile one object per target")
    machine = machine_for(base, portable=True)
    if library and not machine.elf:
        raise HalideError(f"compile_to_multitarget_static_library: pyhalide writes static libraries for ELF "
                          f"targets (Linux, Android), not {base.os.value}: use compile_to_multitarget_object_files")
    arguments = argument_sources(arguments)
    objects, choices, signature, header = [], [], None, None
    for i, t in enumerate(targets):
        suffix = "-" + (suffixes[i] if suffixes else str(t))
        sub_name = fn_name + "_" + re.sub(r"\W", "_", suffix[1:])
        code = _compile(pipeline, _lowered(pipeline, t), list(arguments), sub_name, t, portable=True)
        types = [str(ty) for ty in entry_types(code.arguments)]
        if signature is not None and types != signature:
            raise HalideError(f"compile_to_multitarget: the function takes other arguments for {t} than for "
                              f"{targets[0]} (all targets must have the user_context feature or none)")
        signature, header = types, c_interface.header(fn_name, code.arguments, base)
        objects.append((f"{filename_prefix}{suffix}{code.machine.object_suffix}", code.object_file(),
                        code.exported_symbols()))
        choices.append((sub_name, multitarget.requirements(x86_llvm_features(t))))
    module = multitarget.dispatcher_module(fn_name, entry_types(code.arguments), choices, machine.triple)
    objects.append((f"{filename_prefix}_wrapper{machine.object_suffix}",
                    multitarget.dispatcher_object(module, machine.cpu, machine.features), [fn_name, f"{fn_name}_argv"]))
    _write(f"{filename_prefix}.h", header)
    if library:
        members = [(path.rsplit("/", 1)[-1], data, symbols) for path, data, symbols in objects]
        _write(filename_prefix + library_suffix(base), static_library(members))
    else:
        for path, data, _ in objects:
            _write(path, data)


def _c_source(pipeline, arguments: list, fn_name: str, target) -> str:
    """The pipeline as C++ source (codegen/c_source.py), lowered with its vector loops kept loops."""
    from .codegen.c_source import c_source

    lowered = _lowered(pipeline, target, vectors=False)
    stmt, entry, checks, constants = _entry_parts(pipeline, lowered, arguments)
    return c_source(lowered, stmt, entry, fn_name, target, checks, constants)


def _entry_parts(pipeline, lowered, arguments: list) -> tuple:
    """What both ahead-of-time backends take after the lowered pipeline: its Stmt with the
    constraints' asserts first, the entry's arguments, the buffer checks and the constants."""
    from .ir import make_block

    checks, constants, asserts = _buffer_checks(pipeline, lowered)
    stmt = _messages_in_user_names(make_block([*asserts, lowered.stmt]), lowered.env.user_names)
    return stmt, _entry_arguments(pipeline, lowered, arguments), checks, constants


def _messages_in_user_names(stmt, user_names: dict[str, str]):
    """The asserts' messages in the user's names of the Funcs lowering renamed, written into the
    object (the JIT rewords its errors as it raises them)."""
    from .ir_mutator import IRMutator
    from .lowering.copy_graph import to_user_names

    class Messages(IRMutator):
        statements_only = True

        def visit_AssertStmt(self, s):
            message = to_user_names(s.message, user_names)
            return s if message == s.message else ir.AssertStmt(s.condition, message, s.args)

    return Messages().mutate(stmt) if user_names else stmt


def _entry_arguments(pipeline, lowered, arguments: list) -> list:
    """The C entry's arguments: `arguments` in order, then the output buffers."""
    from .codegen.aot import EntryArgument, c_scalar_type
    from .param import ImageParam, Param

    inputs = {id(b.source): i for i, b in enumerate(lowered.buffers) if not b.is_output}
    scalars = {id(s.param): i for i, s in enumerate(lowered.scalars)}
    entry, seen = [], set()
    for a in arguments:
        if isinstance(a, ImageParam):
            entry.append(EntryArgument(a.name(), a.type(), a.dimensions(), True, index=inputs.get(id(a))))
        elif isinstance(a, Param):
            c_scalar_type(a.type())
            entry.append(EntryArgument(a.name(), a.type(), 0, False, index=scalars.get(id(a)),
                                       value_range=(a._min, a._max)))
        else:
            raise HalideError(f"compile_to: the arguments are ImageParams and Params, got {a!r}")
        if a.name() in seen:
            raise HalideError(f"compile_to: two arguments are named {a.name()}")
        seen.add(a.name())
    given = {(e.is_buffer, e.index) for e in entry}
    for i, b in enumerate(lowered.buffers):
        if isinstance(b.source, ImageParam) and (True, i) not in given:
            raise HalideError(f"compile_to: the pipeline reads ImageParam {b.source.name()}, which is not among the "
                              "arguments")
    for i, s in enumerate(lowered.scalars):
        if (False, i) not in given:
            raise HalideError(f"compile_to: the pipeline uses Param {s.param.name()}, which is not among the "
                              "arguments")
    owners = pipeline._buffer_owners(lowered)
    entry += [EntryArgument(owners[i], b.type, b.dimensions, True, True, i)
              for i, b in enumerate(lowered.buffers) if b.is_output]
    if lowered.target.has_feature("user_context"):
        entry.insert(0, EntryArgument("__user_context", Type("handle", 64, 1), 0, False, is_user_context=True))
    return entry


def _constraint_sources(pipeline, lowered) -> list:
    """Per lowered buffer, the OutputImageParam or ImageParam whose constraints apply to it (None:
    an output never constrained, or an embedded Buffer). Outputs come first, in the order of the
    pipeline's Funcs and their Tuple elements (lowering works on copies of the Funcs)."""
    from .param import ImageParam

    sources = [p for f in pipeline.outputs() for p in (f.__dict__.get("_output_params") or [None] * len(f.types()))]
    return sources + [b.source if isinstance(b.source, ImageParam) else None for b in lowered.buffers[len(sources):]]


def _buffer_checks(pipeline, lowered) -> tuple[dict, dict, list]:
    """Per buffer passed in, what the entry checks (BufferChecks); the constant constraints
    compiled in; and the other constraints as asserts at the top of the pipeline."""
    from .codegen.aot import BufferChecks

    owners = pipeline._buffer_owners(lowered)
    renamed = {}  # the user's field names -> the lowered buffers'
    for owner, b in zip(owners, lowered.buffers):
        for d in range(b.dimensions):
            for fld in ("min", "extent", "stride"):
                renamed[f"{owner}.{fld}.{d}"] = ir.Variable(f"{b.name}.{fld}.{d}")
    checks, constants, asserts = {}, {}, []
    for owner, b, source in zip(owners, lowered.buffers, _constraint_sources(pipeline, lowered)):
        if source is None and not b.is_output:
            continue  # an embedded Buffer: its shape is its own
        fixed = []
        for d, fld, c in source._constraint_list() if source is not None else []:
            if isinstance(c, int):
                fixed.append((fld, d, c))
                constants[f"{b.name}.{fld}.{d}"] = c
            else:
                value = substitute(renamed, c)
                var = ir.Variable(f"{b.name}.{fld}.{d}")
                asserts.append(ir.AssertStmt(ir.EQ(var, value), f"Constraint violated: {owner}.{fld}.{d} ({{}}) == "
                                             f"{expr_to_string(c)} ({{}})", (var, value)))
        checks[b.name] = BufferChecks(not (source is not None and source._stride0_free), tuple(fixed),
                                      (source._host_alignment or 0) if source is not None else 0)
    return checks, constants, asserts
