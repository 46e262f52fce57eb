"""Scalar parameters (hl.Param) and input images (hl.ImageParam)."""

from __future__ import annotations

import enum

from . import ir
from .errors import HalideError
from .expr import Expr, cast_ir, to_ir, wrap
from .names import unique_name
from .types import Type

constraint_epoch = 0  # counts changes of any buffer's dimension constraints

class Param(Expr):
    """A scalar argument to the pipeline, set before realizing: Param(hl.Int(32), "name", value)."""

    __slots__ = ("_type", "_name", "_value", "_min", "_max", "_estimate", "_generated_name")

    def __init__(self, type: Type, name: str | None = None, value=None, min=None, max=None):
        if isinstance(name, Type):  # Param(name, type) is not Halide's order; be helpful
            raise HalideError("Param takes (type, name[, value])")
        if not isinstance(type, Type) or type.lanes != 1:
            raise HalideError(f"Param type must be a scalar hl.Type, got {type!r}")
        if name is not None and not isinstance(name, str):  # Param(type, value)
            name, value = None, name
        self._type = type
        self._name = name or unique_name("p")
        self._generated_name = not name  # (a name given is the user's, even one equal to a generated one)
        self._value = None
        self._estimate = None
        self._min = self._max = None
        self.set_range(min, max)
        self._ir = ir.Variable(self._name, type, ref=self)
        if value is not None:
            self.set(value)

    def name(self) -> str:
        return self._name

    def type(self) -> Type:
        return self._type

    def parameter(self) -> Param:
        """Halide's handle on the Param behind a Param (deserialize_pipeline's user_params): itself."""
        return self

    def set(self, value) -> None:
        self._value = self._checked(value, "set")

    def _checked(self, value, method: str):
        if isinstance(value, Expr | str):
            raise HalideError(f"Param {self._name}.{method} takes a Python number, got {value!r}")
        if not self._type.is_float() and not self._type.can_represent(value):
            raise HalideError(f"Param {self._name} of type {self._type} cannot hold {value!r}")
        return float(value) if self._type.is_float() else int(value)

    def set_estimate(self, value) -> None:
        """The value this Param is expected to have, for autoschedulers (not used to compute)."""
        self._estimate = self._checked(value, "set_estimate")

    def estimate(self):
        """The value given to set_estimate, or None."""
        return self._estimate

    def get(self):
        """The value the pipeline runs with, checked against the Param's range there (as Halide
        does when the pipeline runs, with its message; set() and set_range() accept anything)."""
        if self._value is None:
            raise HalideError(f"Param {self._name} has no value: call {self._name}.set(...) first")
        if self._min is not None and self._value < self._min:
            raise HalideError(f"Error: Parameter {self._name} is {self._value!r} but must be at least {self._min!r}")
        if self._max is not None and self._value > self._max:
            raise HalideError(f"Error: Parameter {self._name} is {self._value!r} but must be at most {self._max!r}")
        return self._value

    def is_set(self) -> bool:
        return self._value is not None

    def set_range(self, min=None, max=None) -> None:
        self.set_min_value(min)
        self.set_max_value(max)

    def set_min_value(self, value) -> None:
        """The least value the pipeline accepts (None: no bound): a number or a constant Expr."""
        self._min = self._bound(value, "set_min_value")

    def set_max_value(self, value) -> None:
        """The greatest value the pipeline accepts (None: no bound): a number or a constant Expr."""
        self._max = self._bound(value, "set_max_value")

    def min_value(self) -> Expr:
        """The lower bound as an Expr of the Param's type (an undefined Expr where there is none)."""
        return self._bound_expr(self._min)

    def max_value(self) -> Expr:
        """The upper bound as an Expr of the Param's type (an undefined Expr where there is none)."""
        return self._bound_expr(self._max)

    def _bound(self, value, method: str):
        if isinstance(value, Expr):
            if not value.defined():
                return None
            from .simplify import simplify

            const = ir.const_value(simplify(cast_ir(self._type, to_ir(value))))
            if const is None:
                raise HalideError(f"Param {self._name}.{method}({value!r}): pyhalide takes a constant bound")
            value = const
        return None if value is None else self._checked(value, method)

    def _bound_expr(self, value) -> Expr:
        return Expr() if value is None else wrap(ir.make_const(self._type, value))

    def __repr__(self):
        return self._name


class Dimension:
    """`image.dim(i)`: one dimension of a Buffer (concrete ints), an ImageParam or a Func's output
    buffer (symbolic Exprs), as Halide's hl.Dimension. For the params its min, extent and stride
    can be constrained: to a constant (code is specialized to it) or to an Expr of Params and
    other buffers' dimensions (checked when the pipeline runs; infer_input_bounds solves them)."""

    def __init__(self, owner, i: int):
        self._owner, self._i = owner, i

    def min(self):
        return self._owner._dim_field("min", self._i)

    def extent(self):
        return self._owner._dim_field("extent", self._i)

    def stride(self):
        return self._owner._dim_field("stride", self._i)

    def max(self):
        return self.min() + self.extent() - 1

    def dim(self, i: int) -> Dimension:
        """Another dimension of the same buffer (Halide's Dimension.dim)."""
        return self._owner.dim(i)

    def set_min(self, value) -> Dimension:
        return self._constrain("min", value)

    def set_extent(self, value) -> Dimension:
        return self._constrain("extent", value)

    def set_stride(self, value) -> Dimension:
        return self._constrain("stride", value)

    def set_bounds(self, min, extent) -> Dimension:
        return self.set_min(min).set_extent(extent)

    def set_estimate(self, min, extent) -> Dimension:
        """The expected min and extent of this dimension, for autoschedulers."""
        if not hasattr(self._owner, "_set_dim_estimate"):
            raise HalideError(f"set_estimate: {self._owner.name()} is a Buffer: its dimensions are known")
        self._owner._set_dim_estimate(self._i, min, extent)
        return self

    set_bounds_estimate = set_estimate

    def _constrain(self, field: str, value) -> Dimension:
        if not hasattr(self._owner, "_constraints"):
            raise HalideError(f"set_{field}: {self._owner.name()} is a Buffer, whose dimensions are what they are; "
                              "constraints are for ImageParams")
        self._owner._constrain(field, self._i, value)
        return self


_DimView = Dimension  # the name buffer.py imports


class OutputImageParam:
    """The buffer a pipeline writes one output to (`f.output_buffer()`), or the base of an input
    ImageParam: a name, a type, dimensions whose min, extent and stride can be constrained. Built
    with no arguments it is undefined, as Halide's `hl.OutputImageParam()`."""

    _kind = "OutputImageParam"

    def __init__(self, *args):
        if args:
            raise HalideError("OutputImageParam() takes no arguments: a Func's output buffer comes from "
                              "f.output_buffer() or f.output_buffers()")
        self._init_param(None, None, None)

    @classmethod
    def _of_func(cls, func, name: str, type: Type, dimensions: int) -> OutputImageParam:
        """The output buffer `name` of func (f, or f.0, f.1 ... for a Tuple)."""
        p = cls.__new__(cls)
        p._init_param(type, dimensions, name)
        p._func = func
        return p

    _func = None  # the Func whose output this is (None for inputs)
    _stride0_free = False  # dim(0).set_stride called: ahead-of-time code no longer requires stride 1 there

    def _init_param(self, type: Type | None, dimensions: int | None, name: str | None) -> None:
        self._type, self._dims, self._name = type, dimensions, name
        n = dimensions or 0
        # per dimension: field -> int (a constant) or IR Expr (checked when the pipeline runs)
        self._constraints: list[dict[str, object]] = [{} for _ in range(n)]

    def defined(self) -> bool:
        return self._type is not None

    def _require_defined(self) -> None:
        if self._type is None:
            raise HalideError("Error: Parameter is undefined")

    def name(self) -> str:
        self._require_defined()
        return self._name

    def type(self) -> Type:
        self._require_defined()
        return self._type

    def dimensions(self) -> int:
        self._require_defined()
        return self._dims

    def dim(self, i: int) -> Dimension:
        self._require_defined()
        if not isinstance(i, int) or not 0 <= i < self._dims:
            raise HalideError(f"{self._kind} {self._name} has {self._dims} dimensions; no dimension {i}")
        return Dimension(self, i)

    def _dim_field(self, field: str, i: int) -> Expr:
        c = self._constraints[i].get(field)
        if isinstance(c, int):
            return wrap(ir.make_const(ir.Int(32), c))
        return wrap(ir.Variable(f"{self._name}.{field}.{i}", ir.Int(32), ref=self))

    def _constrain(self, field: str, i: int, value) -> None:
        """dim(i).set_<field>(value): a constant, an Expr of Params and buffer dimensions, or None /
        an undefined Expr to drop the constraint."""
        from .expr import cast_ir, to_ir

        where = f"{self._kind} {self._name}.dim({i}).set_{field}"
        if field == "stride" and i == 0:
            self._stride0_free = True  # Halide's implicit constraint (dimension 0 dense) replaced or removed
        if value is None or (isinstance(value, Expr) and not value.defined()):
            self._constraints[i].pop(field, None)
            self._constraints_changed()
            return
        if isinstance(value, bool) or isinstance(value, float) or isinstance(value, str):
            raise HalideError(f"{where}: expected an integer or an integer Expr, got {value!r}")
        e = to_ir(value)
        if not (e.type.is_int() or e.type.is_uint()) or e.type.is_bool() or e.type.lanes != 1:
            raise HalideError(f"{where}: expected an integer Expr, got one of type {e.type}")
        _check_constraint_expr(where, e)
        c = ir.const_int(e)
        if c is not None:
            if field == "extent" and c < 0 or field == "stride" and c == 0:
                raise HalideError(f"{where}({c}): not a valid {field}")
            if not -(2**31) <= c < 2**31:
                raise HalideError(f"{where}({c}): does not fit in 32 bits")
            self._constraints[i][field] = int(c)
        else:
            self._constraints[i][field] = cast_ir(ir.Int(32), e)
        self._constraints_changed()

    _host_alignment: int | None = None  # set_host_alignment's bytes (None: the type's size)

    def host_alignment(self) -> int:
        """The alignment in bytes the buffer's host pointer must have (the element size unless set)."""
        self._require_defined()
        return self._host_alignment or self._type.bytes()

    def set_host_alignment(self, bytes: int):
        """Require the host pointer of the buffer to be aligned to `bytes` (checked before running)."""
        self._require_defined()
        if isinstance(bytes, bool) or not isinstance(bytes, int) or bytes <= 0:
            raise HalideError(f"set_host_alignment of {self._name}: the alignment must be a positive number of "
                              f"bytes, got {bytes!r}")
        self._host_alignment = bytes
        self._constraints_changed()
        return self

    def _constraints_changed(self) -> None:
        global constraint_epoch
        constraint_epoch += 1  # pipelines work out again which of their buffers are constrained
        if self._func is not None:
            self._func._version += 1  # an output's constraints are part of what its pipeline checks

    def _constraint_list(self) -> list[tuple[int, str, object]]:
        """(dimension, field, constant or IR Expr) of every constraint."""
        return [(i, field, c) for i, d in enumerate(self._constraints) for field, c in d.items()]

    def width(self):
        return self.dim(0).extent()

    def height(self):
        return self.dim(1).extent()

    def channels(self):
        return self.dim(2).extent()

    def left(self):
        return self.dim(0).min()

    def top(self):
        return self.dim(1).min()

    def right(self):
        return self.dim(0).max()

    def bottom(self):
        return self.dim(1).max()

    def set_estimates(self, estimates) -> OutputImageParam:
        """The expected region of this output: the Func's set_estimates."""
        self._require_defined()
        self._func.set_estimates(estimates)
        return self

    def _set_dim_estimate(self, i: int, min, extent) -> None:
        self._func.set_estimate(self._func.args()[i], min, extent)

    def store_in(self, memory_type) -> OutputImageParam:
        """Where the buffer lives (Halide's store_in of an image parameter). The buffer is the
        caller's, so in Halide this changes how it is read only for GPUTexture (texture reads,
        which Halide makes for OpenCL images): pyhalide's backends have none and refuse it; any
        other memory type is checked and changes nothing."""
        from .schedule import MemoryType

        self._require_defined()
        if memory_type not in MemoryType.ALL:
            raise HalideError(f"{self._name}.store_in: {memory_type!r} is not an hl.MemoryType")
        if memory_type == MemoryType.GPUTexture:
            raise HalideError(f"{self._name}.store_in(GPUTexture): pyhalide's backends (the host CPU, CUDA) have no "
                              "texture reads; leave it Auto (read from memory)")
        return self

    def __repr__(self):  # as Halide's bindings print it
        if self._type is None:
            return f"<halide.{self._kind} {self._kind}()>"
        return f"<halide.{self._kind} '{self._name}', dims: {self._dims}, type: {self._type}>"


def _check_constraint_expr(where: str, e: ir.Expr) -> None:
    """A constraint may use Params and buffers' dimensions, never a Var, an RVar or a call."""
    from .ir_mutator import IRVisitor

    class _Check(IRVisitor):
        def visit_Variable(self, v):
            if v.ref is None or hasattr(v.ref, "rvars"):
                raise HalideError(f"{where}: the constraint refers to Var or RVar {v.name}; it may use Params and "
                                  "the dimensions of buffers only")

        def visit_Call(self, c):
            if c.call_type in (ir.HALIDE, ir.IMAGE):
                raise HalideError(f"{where}: the constraint calls {c.name}; it may use Params and the dimensions "
                                  "of buffers only")
            self.visit_children(c)

    _Check().visit(e)


class ImageParam(OutputImageParam):
    """An input image of given type and dimensionality, bound to a Buffer before realizing.
    `hl.ImageParam()` is undefined, as in Halide."""

    _kind = "ImageParam"

    def __init__(self, type: Type | None = None, dimensions: int | None = None, name: str | None = None):
        if type is None and dimensions is None and name is None:
            self._init_param(None, None, None)
            self._buffer = None
            self._estimates = []
            return
        if not isinstance(type, Type):
            raise HalideError(f"ImageParam type must be an hl.Type, got {type!r}")
        if not isinstance(dimensions, int) or isinstance(dimensions, bool) or dimensions < 0:
            raise HalideError(f"ImageParam{' ' + name if name else ''}: dimensions must be a non-negative integer, "
                              f"got {dimensions!r}")
        self._init_param(type, dimensions, name or unique_name("input"))
        self._generated_name = not name
        self._buffer = None
        self._estimates: list[tuple[int, int] | None] = [None] * dimensions

    def parameter(self) -> ImageParam:
        """Halide's handle on the parameter behind an ImageParam (deserialize_pipeline's
        user_params): itself, with the Buffer bound to it."""
        return self

    # tracing (Halide's ImageParam.trace_loads): the pipeline prints each value read of the image
    _trace = frozenset()
    _version = 0  # changed by trace_loads: the pipelines that read this image lower again

    def trace_loads(self) -> ImageParam:
        """Print every value the pipeline reads of this image: `Load name.0(x, y) = v`, as Halide."""
        self._require_defined()
        self._trace = self._trace | {"loads"}
        self._version += 1
        return self

    def set_estimates(self, estimates) -> ImageParam:
        """The expected region of the input: one hl.Range or (min, extent) per dimension."""
        from .estimates import estimate_list

        self._require_defined()
        self._estimates = list(estimate_list(f"ImageParam {self._name}", [None] * self._dims, estimates))
        return self

    def _set_dim_estimate(self, i: int, min, extent) -> None:
        from .estimates import check_estimate

        self._estimates[i] = check_estimate(f"ImageParam {self._name}.dim({i}).set_estimate", min, extent)

    def _constraints_changed(self) -> None:
        self._version += 1  # constant constraints are compiled in: the pipelines reading it lower again

    def _check_constraints(self, buffer) -> None:
        """The constant constraints, checked when a pipeline takes the buffer (as Halide, which
        accepts any buffer in set(); the symbolic ones need the other buffers and the Params:
        they are checked when the pipeline runs)."""
        for i, wanted in enumerate(self._constraints):
            for field, c in wanted.items():
                if not isinstance(c, int):
                    continue
                got = getattr(buffer.dim(i), field)()
                if got != c:
                    raise HalideError(f"ImageParam {self._name} is constrained to {field} {c} in dimension {i} "
                                      f"(dim({i}).set_{field}), but its buffer has {field} {got}")

    def estimates(self) -> list[tuple[int, int] | None]:
        """Per dimension, the (min, extent) given to set_estimates, or None where none was."""
        return list(self._estimates)

    def set(self, buffer) -> None:
        from .buffer import Buffer

        self._require_defined()
        if not isinstance(buffer, Buffer):
            buffer = Buffer(buffer)
        if not buffer.defined():  # as Halide: binds nothing; realizing then says it is unbound
            self._buffer = None
            return
        if buffer.type() != self._type:
            raise HalideError(
                f"ImageParam {self._name} has type {self._type} but was given a buffer of type {buffer.type()}"
            )
        if buffer.dimensions() != self._dims:
            raise HalideError(
                f"ImageParam {self._name} has {self._dims} dimensions but was given a buffer "
                f"with {buffer.dimensions()}"
            )
        self._buffer = buffer

    def reset(self) -> None:
        """Unbind the buffer (Halide's ImageParam.reset)."""
        self._buffer = None

    def get(self):
        self._require_defined()
        if self._buffer is None:
            raise HalideError(f"ImageParam {self._name} is not bound to a buffer: call {self._name}.set(...)")
        self._check_constraints(self._buffer)  # (as Halide: when a pipeline runs, not in set())
        return self._buffer

    def _is_bound(self) -> bool:
        return self._buffer is not None

    def _rdom_ranges(self):
        return [(self.dim(i).min(), self.dim(i).extent()) for i in range(self._dims)]

    def __getitem__(self, key):
        from .func import image_call

        self._require_defined()
        return image_call(self, key)

    # hl.Func(image): the image's own Func (`<name>_im`), made when first asked for; every read of
    # the image by another Func goes through it (call_graph.image_callee)
    _implicit_func = None

    def in_(self, consumers=None):
        """A Func standing between this image and its consumers (all, or those given), to be
        scheduled on its own: `img.in_(blur).compute_at(blur, xo)`. As in Halide, a wrapper of the
        image's Func (`hl.Func(img).in_(...)`); asked again, the same wrapper."""
        from .func import Func

        return Func(self).in_(consumers)


class ArgumentKind(enum.Enum):
    """hl.ArgumentKind: what a compiled pipeline's argument is."""

    InputScalar = 0
    InputBuffer = 1
    OutputBuffer = 2


class ArgumentEstimates:
    """hl.ArgumentEstimates: a scalar's default, range and estimate, or a buffer's (min, extent)
    estimate per dimension (an hl.Range, of undefined Exprs where none was given)."""

    def __init__(self, scalar_def=None, scalar_min=None, scalar_max=None, scalar_estimate=None, buffer_estimates=()):
        self.scalar_def, self.scalar_min, self.scalar_max = scalar_def, scalar_min, scalar_max
        self.scalar_estimate, self.buffer_estimates = scalar_estimate, list(buffer_estimates)


class Argument:
    """hl.Argument: one argument of a compiled pipeline (what infer_arguments returns and every
    `arguments` list takes), made from an ImageParam, OutputImageParam, Param or Buffer."""

    def __init__(self, source=None, _inferred: bool = False):
        from .buffer import Buffer
        from .var import Range

        self._source = source
        self.name, self.kind, self.dimensions, self.type = "", ArgumentKind.InputScalar, 0, None
        self.argument_estimates = ArgumentEstimates()
        if source is None:
            return
        if isinstance(source, Param):
            self.name, self.type = source.name(), source.type()
            def expr(v):
                return Expr() if v is None or source.type().is_handle() else wrap(ir.make_const(source.type(), v))

            # (as Halide's: the default is the value, or zero where infer_arguments made the
            # Argument; no estimate is an undefined Expr)
            default = expr(0 if source._value is None and _inferred else source._value)
            self.argument_estimates = ArgumentEstimates(default, source.min_value(), source.max_value(),
                                                        expr(source._estimate))
        elif isinstance(source, OutputImageParam | Buffer):
            self.name, self.type, self.dimensions = source.name(), source.type(), source.dimensions()
            self.kind = ArgumentKind.InputBuffer if isinstance(source, ImageParam | Buffer) else \
                ArgumentKind.OutputBuffer
            known = source.estimates() if isinstance(source, ImageParam) else [None] * self.dimensions
            self.argument_estimates = ArgumentEstimates(  # (no estimate: undefined Exprs, as Halide's)
                buffer_estimates=[Range(Expr(), Expr()) if e is None else Range(*e) for e in known])
        else:
            raise HalideError(f"An Argument is made from an ImageParam, OutputImageParam, Param or Buffer, got "
                              f"{source!r}")

    def is_buffer(self) -> bool:
        return self.kind != ArgumentKind.InputScalar

    def is_scalar(self) -> bool:
        return self.kind == ArgumentKind.InputScalar

    def is_input(self) -> bool:
        return self.kind != ArgumentKind.OutputBuffer

    def is_output(self) -> bool:
        return self.kind == ArgumentKind.OutputBuffer

    def __repr__(self):
        return f"<halide.Argument '{self.name}'>"


def argument_sources(arguments) -> list:
    """An `arguments` list with each hl.Argument replaced by what it was made from."""
    return [a._source if isinstance(a, Argument) else a for a in arguments]
