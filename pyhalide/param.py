"""Scalar parameters (hl.Param) and input images (hl.ImageParam)."""

from __future__ import annotations

from . import ir
from .errors import HalideError
from .expr import Expr, wrap
from .names import unique_name
from .types import Type


class Param(Expr):
    """A scalar argument to the pipeline, set before realizing: Param(hl.Int(32), "name", value)."""

    __slots__ = ("_type", "_name", "_value", "_min", "_max", "_estimate")

    def __init__(self, type: Type, name: str | None = None, value=None, min=None, max=None):
        if isinstance(name, Type):  # Param(name, type) is not Halide's order; be helpful
            raise HalideError("Param takes (type, name[, value])")
        if not isinstance(type, Type) or type.lanes != 1:
            raise HalideError(f"Param type must be a scalar hl.Type, got {type!r}")
        if name is not None and not isinstance(name, str):  # Param(type, value)
            name, value = None, name
        self._type = type
        self._name = name or unique_name("p")
        self._value = None
        self._estimate = None
        self._min, self._max = min, max
        self._ir = ir.Variable(self._name, type, ref=self)
        if value is not None:
            self.set(value)

    def name(self) -> str:
        return self._name

    def type(self) -> Type:
        return self._type

    def set(self, value) -> None:
        self._value = self._in_range(self._checked(value, "set"))

    def _in_range(self, value):
        """Halide checks a Param against its set_range when the pipeline runs; here, when either is set."""
        if value is not None:
            if isinstance(self._min, int | float) and value < self._min:
                raise HalideError(f"Param {self._name} is set to {value!r}, below its minimum {self._min!r}")
            if isinstance(self._max, int | float) and value > self._max:
                raise HalideError(f"Param {self._name} is set to {value!r}, above its maximum {self._max!r}")
        return value

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
        if self._value is None:
            raise HalideError(f"Param {self._name} has no value: call {self._name}.set(...) first")
        return self._value

    def is_set(self) -> bool:
        return self._value is not None

    def set_range(self, min=None, max=None) -> None:
        old, (self._min, self._max) = (self._min, self._max), (min, max)
        try:
            self._in_range(self._value)
        except HalideError:
            self._min, self._max = old
            raise

    def __repr__(self):
        return self._name


class _DimView:
    """buffer.dim(i): symbolic (ImageParam) or concrete (Buffer) min/extent/stride of one dimension."""

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

    # Constraints (an ImageParam's): the bound buffer must match them, and a dimension's min,
    # extent or stride read after the constraint is the constant itself, which code is specialized to.
    def set_min(self, value) -> _DimView:
        return self._constrain("min", value)

    def set_extent(self, value) -> _DimView:
        return self._constrain("extent", value)

    def set_stride(self, value) -> _DimView:
        return self._constrain("stride", value)

    def set_bounds(self, min, extent) -> _DimView:
        return self.set_min(min).set_extent(extent)

    def set_estimate(self, min, extent) -> _DimView:
        """The expected min and extent of this dimension, for autoschedulers."""
        if not hasattr(self._owner, "_set_dim_estimate"):
            raise HalideError(f"set_estimate: {self._owner.name()} is a Buffer: its dimensions are known")
        self._owner._set_dim_estimate(self._i, min, extent)
        return self

    set_bounds_estimate = set_estimate

    def _constrain(self, field: str, value) -> _DimView:
        if not hasattr(self._owner, "_constraints"):
            raise HalideError(f"set_{field}: {self._owner.name()} is a Buffer, whose dimensions are what they are; "
                              "constraints are for ImageParams")
        self._owner._constrain(field, self._i, value)
        return self


class ImageParam:
    """An input image of given type and dimensionality, bound to a Buffer before realizing."""

    def __init__(self, type: Type, dimensions: int, name: str | None = None):
        if not isinstance(type, Type):
            raise HalideError(f"ImageParam type must be an hl.Type, got {type!r}")
        self._type = type
        self._dims = dimensions
        self._name = name or unique_name("input")
        self._buffer = None
        self._estimates: list[tuple[int, int] | None] = [None] * dimensions
        self._constraints: list[dict[str, int]] = [{} for _ in range(dimensions)]  # "min"/"extent"/"stride"

    def set_estimates(self, estimates) -> ImageParam:
        """The expected region of the input: one hl.Range or (min, extent) per dimension."""
        from .estimates import estimate_list

        self._estimates = list(estimate_list(f"ImageParam {self._name}", [None] * self._dims, estimates))
        return self

    def _set_dim_estimate(self, i: int, min, extent) -> None:
        from .estimates import check_estimate

        self._estimates[i] = check_estimate(f"ImageParam {self._name}.dim({i}).set_estimate", min, extent)

    def _constrain(self, field: str, i: int, value) -> None:
        from .expr import to_ir

        c = ir.const_int(to_ir(value)) if not isinstance(value, int) else value
        if c is None or isinstance(value, bool):
            raise HalideError(f"ImageParam {self._name}.dim({i}).set_{field}: pyhalide takes an integer constant, "
                              f"got {value!r}")
        if field == "extent" and c < 0 or field == "stride" and c == 0:
            raise HalideError(f"ImageParam {self._name}.dim({i}).set_{field}({c}): not a valid {field}")
        self._constraints[i][field] = int(c)
        if self._buffer is not None:
            self._check_constraints(self._buffer)

    def _check_constraints(self, buffer) -> None:
        for i, wanted in enumerate(self._constraints):
            for field, c in wanted.items():
                got = getattr(buffer.dim(i), field)()
                if got != c:
                    raise HalideError(f"ImageParam {self._name} is constrained to {field} {c} in dimension {i} "
                                      f"(dim({i}).set_{field}), but its buffer has {field} {got}")

    def estimates(self) -> list[tuple[int, int] | None]:
        """Per dimension, the (min, extent) given to set_estimates, or None where none was."""
        return list(self._estimates)

    def name(self) -> str:
        return self._name

    def type(self) -> Type:
        return self._type

    def dimensions(self) -> int:
        return self._dims

    def set(self, buffer) -> None:
        from .buffer import Buffer

        if not isinstance(buffer, Buffer):
            buffer = Buffer(buffer)
        if buffer.type() != self._type:
            raise HalideError(
                f"ImageParam {self._name} has type {self._type} but was given a buffer of type {buffer.type()}"
            )
        if buffer.dimensions() != self._dims:
            raise HalideError(
                f"ImageParam {self._name} has {self._dims} dimensions but was given a buffer "
                f"with {buffer.dimensions()}"
            )
        self._check_constraints(buffer)
        self._buffer = buffer

    def get(self):
        if self._buffer is None:
            raise HalideError(f"ImageParam {self._name} is not bound to a buffer: call {self._name}.set(...)")
        self._check_constraints(self._buffer)  # (its min may have moved since set)
        return self._buffer

    def dim(self, i: int) -> _DimView:
        if not 0 <= i < self._dims:
            raise HalideError(f"ImageParam {self._name} has no dimension {i}")
        return _DimView(self, i)

    def _dim_field(self, field: str, i: int) -> Expr:
        if field in self._constraints[i]:
            return wrap(ir.make_const(ir.Int(32), self._constraints[i][field]))
        return wrap(ir.Variable(f"{self._name}.{field}.{i}", ir.Int(32), ref=self))

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

    def _rdom_ranges(self):
        return [(self.dim(i).min(), self.dim(i).extent()) for i in range(self._dims)]

    def __getitem__(self, key):
        from .func import image_call

        return image_call(self, key)

    _wrappers: dict | None = None  # in_(): consumer name ("" for all) -> wrapper Func

    def in_(self, consumers=None):
        """A Func standing between this image and its consumers (all, or those given), to be
        scheduled on its own: `img.in_(blur).compute_at(blur, xo)`, as in Halide. Its arguments
        are the implicit Vars `_0`, `_1`, ...; asked again, the same wrapper."""
        from .func import Func
        from .var import Var

        if self._wrappers is None:
            self._wrappers = {}
        if consumers is None:
            keys, name = [""], f"{self._name}_im_global_wrapper"
        else:
            consumers = list(consumers) if isinstance(consumers, list | tuple) else [consumers]
            for g in consumers:
                if not hasattr(g, "_schedule"):
                    raise HalideError(f"ImageParam {self._name}.in_: consumers must be Funcs, got {g!r}")
            keys = [g.name() for g in consumers]
            name = f"{self._name}_im_in_{'_'.join(keys)}"
        found = {id(self._wrappers.get(k)) for k in keys}
        if len(found) == 1 and self._wrappers.get(keys[0]) is not None:
            return self._wrappers[keys[0]]
        wrapper = Func(name)
        args = tuple(Var.implicit(i) for i in range(self._dims))
        wrapper[args] = self[args]
        for k in keys:
            self._wrappers[k] = wrapper
        return wrapper

    def __repr__(self):
        return f"ImageParam({self._type}, {self._dims}, {self._name!r})"
