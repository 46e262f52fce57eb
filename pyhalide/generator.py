"""Generators, as Halide's Python bindings write them: a class that declares GeneratorParams,
Inputs and Outputs, and whose `generate()` defines the Outputs.

    @hl.generator(name="brighten")
    class Brighten:
        offset = hl.GeneratorParam(1)
        input = hl.InputBuffer(hl.UInt(8), 2)
        output = hl.OutputBuffer(hl.UInt(8), 2)

        def generate(self):
            self.output[x, y] = self.input[x, y] + self.offset

    with hl.GeneratorContext(hl.get_jit_target_from_environment()):
        f = Brighten.call(buffer)                          # the output Func, to realize or compose
        c = Brighten(generator_params={"offset": 3}).compile_to_callable()
        c(buffer, out)                                     # inputs in declared order, then outputs

A Generator instance goes through Halide's stages once, in order: GeneratorParams get their values
(defaults, then `generator_params`, then an `@hl.alias`'s); Inputs and Outputs are declared (the
class's, in declaration order, base classes first; then `configure()`'s `add_input` /
`add_output`), each with its type and dimensions fixed (`NAME.type` / `NAME.dim` GeneratorParams
fill what the code leaves as None); then each becomes what `generate()` uses (an ImageParam, a
Param, a Func named after it, or the value `call()` bound to it), and `generate()` runs inside the
Generator's context. Its Outputs form the Pipeline.

`hl.main()` is Halide's command line for ahead-of-time compilation (`python gen.py -g NAME -o DIR
-e static_library,c_header target=host param=value ...`): it writes the files `compile_to`
writes for the Generator's pipeline. Where the context names an autoscheduler, it and
`compile_to_callable` apply it (Halide applies it only ahead of time).
"""

from __future__ import annotations

import re
import sys
import warnings
from contextvars import ContextVar
from inspect import isclass

from .autoschedulers import AutoschedulerParams
from .buffer import Buffer
from .errors import HalideError
from .func import Func
from .param import ImageParam, Param
from .pipeline import Pipeline
from .target import Target
from .types import Bool, Float, Int, Type, UInt

_NAME = re.compile(r"^(?!.*__)[A-Za-z0-9][A-Za-z0-9_]*$")  # a C identifier without "_" first or "__"
_TYPE_NAMES = {"bool": Bool(), "float16": Float(16), "float32": Float(32), "float64": Float(64),
               "int8": Int(8), "int16": Int(16), "int32": Int(32), "int64": Int(64),
               "uint8": UInt(8), "uint16": UInt(16), "uint32": UInt(32), "uint64": UInt(64)}


def _check(ok, message: str) -> None:
    if not ok:
        raise HalideError(message)


def _valid_name(name: str) -> str:
    _check(isinstance(name, str) and name != "generator_params" and _NAME.match(name),
           f"The name '{name}' is not valid for a GeneratorParam, Input, or Output.")
    return name


def _one_type(t) -> Type:
    """Halide's shorthands: bool, int and float stand for Bool(), Int(32) and Float(32)."""
    shorthand = {bool: Bool(), int: Int(32), float: Float(32)}.get(t)
    if shorthand is not None:
        return shorthand
    _check(isinstance(t, Type), f"Expected a Halide Type, but saw: {t}")
    return t


def _type_list(types) -> list[Type]:
    """None (left to a GeneratorParam), one type, or a list of them (a Tuple-valued Output)."""
    if types is None:
        return []
    return [_one_type(t) for t in (types if isinstance(types, list | tuple) else [types])]


def _parse_types(name: str, value) -> list[Type]:
    """A `NAME.type` value: Types, or their names as Halide spells them ("uint8,float32")."""
    if isinstance(value, Type | list | tuple):
        return _type_list(value)
    names = str(value).split(",")
    for n in names:
        _check(n.strip() in _TYPE_NAMES, f"The value {n} of {name} cannot be parsed as a Type.")
    return [_TYPE_NAMES[n.strip()] for n in names]


class GeneratorParam:
    """A compile-time parameter: a bool, int, float, str or Type default. In `configure()` and
    `generate()` the Generator's attribute is the value itself (parsed to the default's kind)."""

    def __init__(self, value):
        self._value = value

    def _parse(self, name: str, value):
        kind = type(self._value)
        if kind is bool:
            if isinstance(value, str):
                _check(value.lower() in ("true", "false"), f"GeneratorParam {name}: {value!r} is not a bool")
                return value.lower() == "true"
            return bool(value)
        if kind in (int, float, str):
            try:
                return kind(value)
            except (TypeError, ValueError):
                raise HalideError(f"GeneratorParam {name}: {value!r} is not a {kind.__name__}") from None
        if isinstance(self._value, Type | list | tuple):
            types = _parse_types(name, value)
            return types[0] if len(types) == 1 else types
        raise HalideError(f"GeneratorParam {name} has unsupported type {kind.__name__}")


class _Io:
    """An Input or Output declaration: its types ([] until known) and dimensions (-1 until known)."""

    is_input = True

    def __init__(self, types, dimensions):
        self._types = _type_list(types)
        self._dims = -1 if dimensions is None else dimensions


class InputBuffer(_Io):
    """An input image: an ImageParam named after the attribute (or the Buffer `call()` binds)."""

    def __init__(self, type, dimensions):
        super().__init__(type, dimensions)

    def _make(self, name: str, types: list[Type], dims: int, value=None):
        if value is None:
            return ImageParam(types[0], dims, name)
        _check(isinstance(value, Buffer | ImageParam),
               f"Input {name} requires an ImageParam or Buffer argument when using call(), but saw {value!r}")
        if isinstance(value, Buffer):
            param = ImageParam(value.type(), value.dimensions(), name)
            param.set(value)
            value = param
        _check_matches(name, types, dims, [value.type()], value.dimensions())
        return value


class InputScalar(_Io):
    """A scalar input: a Param named after the attribute (or the value `call()` binds)."""

    def __init__(self, type):
        super().__init__(type, 0)

    def _make(self, name: str, types: list[Type], dims: int, value=None):
        if value is None or isinstance(value, bool | int | float):
            param = Param(types[0], name)
            if value is not None:
                param.set(value)
            return param
        _check(isinstance(value, Param),
               f"Input {name} requires a Param (or scalar literal) argument when using call(), but saw {value!r}.")
        _check_matches(name, types, 0, [value.type()], 0)
        return value


class OutputBuffer(_Io):
    """An output: a Func named after the attribute, with the declared types and dimensions."""

    is_input = False

    def __init__(self, types, dimensions):
        super().__init__(types, dimensions)

    def _make(self, name: str, types: list[Type], dims: int, value=None):
        return Func(types, dims, name)


class OutputScalar(OutputBuffer):
    """A zero-dimensional output."""

    def __init__(self, types):
        super().__init__(types, 0)


def _check_matches(name: str, types: list[Type], dims: int, got_types: list[Type], got_dims: int) -> None:
    _check(len(got_types) == len(types),
           f"Type mismatch for {name}: expected {len(types)} types but saw {len(got_types)}")
    for i, (want, got) in enumerate(zip(types, got_types)):
        _check(want == got, f"Type mismatch for {name}:{i}: expected {want} saw {got}")
    _check(got_dims == dims, f"Dimensions mismatch for {name}: expected {dims} saw {got_dims}")


_active = ContextVar("pyhalide_generator_context", default=None)


class GeneratorContext:
    """The target (and autoscheduler) Generators are made for; `with context:` makes it the one
    new Generators take."""

    def __init__(self, target, autoscheduler_params: AutoschedulerParams | None = None):
        if not isinstance(target, Target):
            target = Target(target)
        self._target = target
        self._autoscheduler_params = AutoschedulerParams() if autoscheduler_params is None else autoscheduler_params
        self._tokens = []

    def target(self) -> Target:
        return self._target

    def autoscheduler_params(self) -> AutoschedulerParams:
        return self._autoscheduler_params

    def __enter__(self) -> GeneratorContext:
        self._tokens.append(_active.set(self))
        return self

    def __exit__(self, *exc) -> None:
        _active.reset(self._tokens.pop())

    def __repr__(self):
        return f"<halide.GeneratorContext {self._target}>"


def active_generator_context() -> GeneratorContext:
    context = _active.get()
    _check(context is not None, "There is no active GeneratorContext")
    return context


def _declarations(cls) -> list[tuple[str, object]]:
    """The class's GeneratorParams, Inputs and Outputs in declaration order, base classes first."""
    found: dict[str, object] = {}
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            if isinstance(value, GeneratorParam | _Io):
                found.pop(name, None)
                found[name] = value
    return list(found.items())


class Generator:
    """The base of every Generator (`@hl.generator` adds it where the class doesn't derive it)."""

    _halide_registered_name = ""
    _halide_alias_generator_params: dict = {}

    def __init__(self, generator_params: dict | None = None):
        context = active_generator_context()
        self._target = context.target()
        given = context.autoscheduler_params()
        self._autoscheduler = AutoschedulerParams(given.name, given.extra)
        declared = _declarations(type(self))
        self._param_decls = {n: d for n, d in declared if isinstance(d, GeneratorParam)}
        self._io_decls = [(n, d) for n, d in declared if isinstance(d, _Io)]
        for name in self._param_decls:
            _valid_name(name)
        self._param_values = {n: d._value for n, d in self._param_decls.items()}
        self._pending: dict[str, object] = {}  # NAME.type / NAME.dim values, and unknown names
        self._ios: dict[str, tuple[_Io, list[Type], int]] = {}  # name -> (declaration, types, dims)
        self._bound: dict[str, object] = {}
        self._in_configure = False
        self._configured = False
        self._pipeline: Pipeline | None = None
        self._requirements = []
        for values in (self._halide_alias_generator_params, generator_params or {}):
            _check(isinstance(values, dict), "generator_params must be a dict")
            for k, v in values.items():
                self._set_generator_param(k, v)
        for name, value in self._param_values.items():
            object.__setattr__(self, name, value)

    # --- what generate() calls
    def context(self) -> GeneratorContext:
        return GeneratorContext(self._target, self._autoscheduler)

    def target(self) -> Target:
        return self._target

    def autoscheduler(self) -> AutoschedulerParams:
        return self._autoscheduler

    def using_autoscheduler(self) -> bool:
        return bool(self._autoscheduler.name)

    def natural_vector_size(self, type) -> int:
        return self._target.natural_vector_size(_one_type(type))

    def add_requirement(self, condition, *args) -> None:
        _check(self._pipeline is None, "add_requirement() must be called before the pipeline is built")
        self._requirements.append((condition, list(args)))

    def allow_out_of_order_inputs_and_outputs(self) -> bool:
        return False

    def configure(self) -> None:
        """Override to add Inputs and Outputs that depend on GeneratorParams."""

    def generate(self) -> None:
        raise HalideError(f"Generator {self._get_name()} does not define generate()")

    def add_input(self, name: str, io) -> None:
        self._add_dynamic(name, io, (InputBuffer, InputScalar), "add_input")

    def add_output(self, name: str, io) -> None:
        self._add_dynamic(name, io, (OutputBuffer,), "add_output")

    # --- using it
    @classmethod
    def call(cls, *args, generator_params: dict | None = None, **kwargs):
        """The Generator applied to these inputs (Buffers, ImageParams, Params or scalars, by
        position or by name): its output Func, or a tuple of them."""
        g = cls(generator_params)
        g._configure()
        inputs = [name for name, (decl, _, _) in g._ios.items() if decl.is_input]
        _check(len(args) <= len(inputs), f"Generator '{g._get_name()}' allows at most {len(inputs)} positional "
                                         f"args, but {len(args)} were specified.")
        given = dict(zip(inputs, args))
        for k, v in kwargs.items():
            _check(k in inputs, f"Unknown input '{k}' specified via keyword argument.")
            _check(k not in given, f"Input {k} specified multiple times.")
            given[k] = v
        _check(len(given) == len(inputs), f"Generator '{g._get_name()}' requires {len(inputs)} args, but "
                                          f"{len(given)} were specified.")
        g._bound = given
        g._build_pipeline()
        outputs = g._output_funcs
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def compile_to_callable(self):
        """A Callable taking the Inputs in declared order, then a buffer per Output."""
        pipeline = self._build_pipeline()
        if self.using_autoscheduler():
            pipeline.apply_autoscheduler(self._target, self._autoscheduler)
        arguments = [getattr(self, name) for name, (decl, _, _) in self._ios.items() if decl.is_input]
        return pipeline.compile_to_callable(arguments, self._target)

    # --- the stages
    def _get_name(self) -> str:
        return self._halide_registered_name or type(self).__name__

    def _set_generator_param(self, name: str, value) -> None:
        _check(name != "target", f"The GeneratorParam named {name} cannot be set by set_generatorparam_value.")
        if name in self._param_decls:
            self._param_values[name] = self._param_decls[name]._parse(name, value)
        elif name == "autoscheduler":
            self._autoscheduler.name = str(value)
        elif name.startswith("autoscheduler."):
            self._autoscheduler.extra = {**self._autoscheduler.extra, name[len("autoscheduler."):]: value}
        else:
            self._pending[name] = value

    def _declare(self, name: str, decl: _Io) -> None:
        _valid_name(name)
        _check(name not in self._ios and name not in self._param_decls,
               f"The name '{name}' is used more than once in Generator {self._get_name()}.")
        types, dims = list(decl._types), decl._dims
        if f"{name}.type" in self._pending:
            _check(not types, f"Cannot set the GeneratorParam {name}.type for {self._get_name()} because the value "
                              "is explicitly specified in the Python source.")
            types = _parse_types(f"{name}.type", self._pending.pop(f"{name}.type"))
        if f"{name}.dim" in self._pending:
            _check(dims == -1, f"Cannot set the GeneratorParam {name}.dim for {self._get_name()} because the value "
                               "is explicitly specified in the Python source.")
            dims = int(self._pending.pop(f"{name}.dim"))
        _check(types, f"No type has been specified for {name}. Try specifying one in code, or by setting "
                      f"'{name}.type' as a GeneratorParam.")
        _check(dims >= 0, f"No dimensionality has been specified for {name}. Try specifying one in code, or by "
                          f"setting '{name}.dim' as a GeneratorParam.")
        self._ios[name] = (decl, types, dims)

    def _add_dynamic(self, name: str, io, kinds, method: str) -> None:
        _check(self._in_configure, f"Can only call {method}() from the configure() method.")
        _check(not hasattr(self, name), f"Cannot call {method}('{name}') because the class already has a member of "
                                        "that name.")
        _check(isinstance(io, kinds), f"Cannot call {method}() with an object of type '{type(io).__name__}'.")
        self._declare(name, io)

    def _configure(self) -> None:
        if self._configured:
            return
        outputs_seen = False
        for name, decl in self._io_decls:
            if decl.is_input and outputs_seen and not self.allow_out_of_order_inputs_and_outputs():
                warnings.warn(f"Generator {self._get_name()} declares Input {name} after an Output; its Inputs "
                              "come first in the calling convention all the same.", stacklevel=2)
            outputs_seen = outputs_seen or not decl.is_input
            self._declare(name, decl)
        _check(not self._pending, f"Generator {self._get_name()} has no GeneratorParam(s) named: "
                                  f"{list(self._pending)}")
        self._in_configure = True
        try:
            self.configure()
        finally:
            self._in_configure = False
        _check(any(not d.is_input for d, _, _ in self._ios.values()),
               f"Generator '{self._get_name()}' must declare at least one output.")
        self._configured = True

    def _build_pipeline(self) -> Pipeline:
        _check(self._pipeline is None, f"Generator {self._get_name()}: its pipeline is already built (a "
                                       "Generator instance builds one)")
        self._configure()
        for name, (decl, types, dims) in self._ios.items():
            object.__setattr__(self, name, decl._make(name, types, dims, self._bound.get(name)))
        with self.context():
            self.generate()
        funcs = []
        for name in self._ios:
            decl, types, dims = self._ios[name]
            if decl.is_input:
                continue
            f = getattr(self, name)
            _check(isinstance(f, Func) and f.defined(), f"Output '{name}' was not defined.")
            _check_matches(name, types, dims, f.types(), f.dimensions())
            funcs.append(f)
        self._output_funcs = funcs
        self._pipeline = Pipeline(funcs)
        for condition, args in self._requirements:
            self._pipeline.add_requirement(condition, *args)
        return self._pipeline


_registry: dict[str, type] = {}


def _qualified_name(cls) -> str:
    return cls.__qualname__ if cls.__module__ == "__main__" else f"{cls.__module__}.{cls.__qualname__}"


def _register(name: str, cls) -> None:
    # redefining a Generator is allowed at the interactive prompt (notebooks rerun cells)
    _check(hasattr(sys, "ps1") or name not in _registry, f"The Generator name {name} is already in use.")
    _registry[name] = cls


def generator(name: str = ""):
    """Class decorator: registers the class as a Generator (deriving hl.Generator if it doesn't)."""

    def register(cls):
        _check(isclass(cls), "@generator can only be used on classes.")
        registered = name or _qualified_name(cls)
        bases = (cls,) if issubclass(cls, Generator) else (cls, Generator)
        made = type(cls.__name__, bases, {"_halide_registered_name": registered, "__module__": cls.__module__,
                                          "__qualname__": cls.__qualname__})
        _register(registered, made)
        return made

    return register


def alias(**aliases):
    """Class decorator (above @generator): each keyword registers the Generator again under that
    name, with the dict's GeneratorParam values."""

    def register(cls):
        _check(issubclass(cls, Generator) and cls._halide_registered_name,
               "@alias can only be used in conjunction with @generator.")
        for alias_name, params in aliases.items():
            _valid_name(alias_name)
            _check(type(params) is dict, f"The Generator alias {alias_name} specifies something other than a dict.")
            _register(alias_name, type(alias_name, (cls,), {"_halide_registered_name": alias_name,
                                                            "_halide_alias_generator_params": params}))
        return cls

    return register


def create_generator(name: str, context: GeneratorContext | None = None) -> Generator:
    """A new instance of the Generator registered as `name`, made in `context` (or the active one)."""
    cls = _registry.get(name)
    _check(cls is not None, f"There is no Generator named {name!r}; registered: {sorted(_registry)}")
    if context is None:
        return cls()
    with context:
        return cls()


def create_callable_from_generator(context, name: str, generator_params: dict | None = None):
    """The Callable of the Generator registered as `name`, built for `context` (a GeneratorContext
    or a Target) with the GeneratorParams given (their values as strings or typed)."""
    if not isinstance(context, GeneratorContext):
        context = GeneratorContext(context)
    cls = _registry.get(name)
    _check(cls is not None, f"There is no Generator named {name!r}; registered: {sorted(_registry)}")
    with context:
        return cls(generator_params=dict(generator_params or {})).compile_to_callable()


# -e's names (OutputFileType's, and Halide's short ones) -> (the output, its file's suffix); None:
# the target's object or library suffix
_EMITS = {"assembly": ("assembly", ".s"), "bitcode": ("bitcode", ".bc"), "c_header": ("c_header", ".h"),
          "c_source": ("c_source", ".halide_generated.cpp"),
          "h": ("c_header", ".h"), "llvm_assembly": ("llvm_assembly", ".ll"), "object": ("object", None),
          "o": ("object", None), "python_extension": ("python_extension", ".py.cpp"),
          "static_library": ("static_library", None), "stmt": ("stmt", ".stmt"),
          "stmt_html": ("stmt_html", ".stmt.html"), "html": ("stmt_html", ".stmt.html"),
          "conceptual_stmt": ("conceptual_stmt", ".conceptual.stmt"),
          "conceptual_stmt_html": ("conceptual_stmt_html", ".conceptual.stmt.html")}
_DEFAULT_EMITS = "c_header,static_library"  # Halide's default adds a registration file, for its C++ tools
_FLAGS = {"-g", "-o", "-e", "-f", "-n", "-p"}


def _parse_command_line(argv: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """(flags, key=value settings) of Halide's generator command line."""
    flags, settings = {}, {}
    k = 0
    while k < len(argv):
        arg = argv[k]
        if arg in _FLAGS:
            _check(k + 1 < len(argv), f"hl.main(): {arg} needs a value")
            flags[arg] = argv[k + 1]
            k += 2
        elif arg.startswith("-"):
            raise HalideError(f"hl.main(): unknown flag {arg} (pyhalide takes {', '.join(sorted(_FLAGS))} and "
                              "key=value settings)")
        else:
            key, eq, value = arg.partition("=")
            _check(bool(eq) and bool(key), f"hl.main(): expected key=value, got {arg!r}")
            settings[key] = value
            k += 1
    return flags, settings


def main(argv=None) -> None:
    """Halide's generator command line: `-g NAME` (may be left out where one Generator is
    registered), `-o DIR`, `-e KINDS` (comma-separated: c_header, static_library, object,
    python_extension, c_source, assembly, bitcode, llvm_assembly, stmt, stmt_html; default
    c_header,static_library), `-f FUNCTION_NAME`, `-n FILE_BASE_NAME`, `-p PLUGIN` (accepted,
    as hl.load_plugin), then `target=...`, `autoscheduler=NAME`, `autoscheduler.KEY=VALUE` and
    the Generator's GeneratorParams as `NAME=VALUE`. The function takes the Inputs in declared
    order, then the Outputs."""
    import os

    from .ahead_of_time import library_suffix, object_suffix

    flags, settings = _parse_command_line(sys.argv[1:] if argv is None else list(argv))
    name = flags.get("-g")
    if name is None:
        _check(len(_registry) == 1, f"hl.main(): -g names the Generator to build (registered: {sorted(_registry)})")
        name = next(iter(_registry))
    _check("-o" in flags, "hl.main(): -o names the directory to write into")
    target = Target(settings.pop("target", "host"))
    scheduler = settings.pop("autoscheduler", "")
    extra = {k.split(".", 1)[1]: settings.pop(k) for k in list(settings) if k.startswith("autoscheduler.")}
    fn_name = flags.get("-f", name)
    _check("::" not in fn_name, f"hl.main(): -f {fn_name}: C++ namespaces are not supported (a C function name)")
    base = os.path.join(flags["-o"], flags.get("-n", fn_name))
    outputs = {}
    for kind in filter(None, flags.get("-e", _DEFAULT_EMITS).split(",")):
        _check(kind in _EMITS, f"hl.main(): -e {kind}: pyhalide writes {', '.join(sorted(_EMITS))}")
        output, suffix = _EMITS[kind]
        if suffix is None:
            suffix = object_suffix(target) if output == "object" else library_suffix(target)
        outputs[output] = base + suffix
    _check(name in _registry, f"hl.main(): there is no Generator named {name!r}; registered: {sorted(_registry)}")
    with GeneratorContext(target, AutoschedulerParams(scheduler, extra)):
        g = _registry[name](generator_params=settings)
    pipeline = g._build_pipeline()
    if g.using_autoscheduler():
        pipeline.apply_autoscheduler(target, g._autoscheduler)
    arguments = [getattr(g, n) for n, (decl, _, _) in g._ios.items() if decl.is_input]
    os.makedirs(flags["-o"], exist_ok=True)
    pipeline.compile_to(outputs, arguments, fn_name, target)
