"""Var, RVar, RDom and Range: the variables of pure and update definitions."""

from __future__ import annotations

import abc

from . import ir, scatter_gather
from .errors import HalideError
from .expr import Expr, to_ir, wrap
from .names import unique_name
from .types import Int


class Var(Expr):
    """A pure variable (Int(32)) of a Func's definition; loops are made over Vars."""

    __slots__ = ("_name",)

    def __new__(cls, name: str | None = None):
        if cls is Var and name == "_":  # Var("_") is Halide's placeholder, whichever way it is made
            cls = _ImplicitMarker
        return object.__new__(cls)

    def __init__(self, name: str | None = None):
        self._name = name or unique_name("v")
        self._ir = ir.Variable(self._name, Int(32))

    def name(self) -> str:
        return self._name

    def __str__(self):
        return self._name

    def __repr__(self):
        return f"<halide.Var '{self._name}'>"  # as Halide's bindings print it

    def same_as(self, other: Var) -> bool:
        """Vars are the same when their names are (Halide compares names, not objects)."""
        if not isinstance(other, Var):
            raise TypeError(f"same_as(): expected a Var, got {type(other).__name__}")
        return self._name == other._name

    @staticmethod
    def outermost() -> Var:
        """Halide's Var.outermost(): a level outside every loop of a Func (used by hoist_storage)."""
        return Var("__outermost")

    @staticmethod
    def implicit(i: int) -> Var:
        return Var(f"_{i}")

    def is_implicit(self) -> bool:
        """Named _ followed only by digits (so the placeholder _ counts too, as in Halide)."""
        return self._name.startswith("_") and all(c in "0123456789" for c in self._name[1:])

    def implicit_index(self) -> int:
        """k for _k, -1 for a Var not of implicit form (0 for the placeholder, as Halide's atoi gives)."""
        if not self.is_implicit():
            return -1
        return int(self._name[1:] or 0)

    def is_placeholder(self) -> bool:
        return self._name == "_"


class RecordedLoopVar(Var):
    """A loop a schedule record names as a Var where the directive was given its name as a string,
    which may name an RVar's loop too: scheduling takes it as either (as it takes the string)."""

    __slots__ = ()


class _ImplicitMarker(Var):
    """`hl._`: the Var named "_", standing for however many implicit arguments are needed."""

    __slots__ = ()

    def __init__(self, name: str = "_"):
        super().__init__("_")


_ = _ImplicitMarker()


class Range:
    """A (min, extent) pair, as in Halide's hl.Range."""

    def __init__(self, min, extent):
        self.min = Expr(min) if not isinstance(min, Expr) else min
        self.extent = Expr(extent) if not isinstance(extent, Expr) else extent

    def __iter__(self):
        return iter((self.min, self.extent))


class ReductionVariable:
    """One dimension of an RDom: an IR variable name with its min and extent (IR Exprs)."""

    __slots__ = ("name", "min", "extent")

    def __init__(self, name: str, min: ir.Expr, extent: ir.Expr):
        self.name, self.min, self.extent = name, min, extent


class ReductionDomain:
    """The shared state of an RDom and its RVars: dimensions and an optional predicate."""

    def __init__(self, rvars: list[ReductionVariable]):
        self.rvars = rvars
        self.predicate: ir.Expr | None = None

    def add_predicate(self, cond: ir.Expr):
        self.predicate = cond if self.predicate is None else ir.And(self.predicate, cond)


class RVar(Expr):
    """One dimension of an RDom; iterates from its min over its extent."""

    __slots__ = ("_domain", "_index")

    def __init__(self, domain: ReductionDomain | str | None = None, index: int = 0):
        if domain is None or isinstance(domain, str):  # a free-standing RVar name, used in schedules
            name = domain or unique_name("r")
            self._domain = None
            self._index = 0
            self._ir = ir.Variable(name, Int(32))
            return
        self._domain, self._index = domain, index
        self._ir = ir.Variable(domain.rvars[index].name, Int(32), ref=domain)

    def name(self) -> str:
        return self._ir.name

    def min(self) -> Expr:
        return wrap(self._domain.rvars[self._index].min)

    def extent(self) -> Expr:
        return wrap(self._domain.rvars[self._index].extent)

    def domain(self):
        return self._domain

    def __str__(self):
        return self.name()

    def __repr__(self):
        return f"<halide.RVar '{self.name()}'>"


_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def _range_pair(r, dim: int, name: str):
    if isinstance(r, Range):
        lo, ext = r.min, r.extent
    else:
        try:
            lo, ext = r
        except (TypeError, ValueError):
            raise HalideError(f"RDom {name}: dimension {dim} must be a (min, extent) pair, got {r!r}") from None
    for what, v in (("min", lo), ("extent", ext)):
        if v is None or (isinstance(v, Expr) and not v.defined()):
            raise HalideError(f"RDom {name}: the {what} of dimension {dim} is undefined")
    lo_ir, ext_ir = to_ir(lo), to_ir(ext)
    for what, v in (("min", lo_ir), ("extent", ext_ir)):
        scatter_gather.refuse(v, f"the {what} of dimension {dim} of RDom {name}")
        if not (v.type.is_int() or v.type.is_uint()) or v.type.is_bool():
            raise HalideError(f"RDom {name}: the {what} of dimension {dim} has type {v.type}, not an integer")
    constants = {what: ir.const_int(v) for what, v in (("min", lo_ir), ("extent", ext_ir))}
    for what, v in constants.items():
        if v is not None and not _INT32_MIN <= v <= _INT32_MAX:
            raise HalideError(f"RDom {name}: the {what} of dimension {dim} is {v}, not representable as an int32")
    if None not in constants.values() and constants["min"] + constants["extent"] - 1 > _INT32_MAX:
        raise HalideError(f"RDom {name}: dimension {dim} runs from {constants['min']} to "
                          f"{constants['min'] + constants['extent'] - 1}, past the int32 maximum {_INT32_MAX}")
    from .expr import cast_ir

    return cast_ir(Int(32), lo_ir), cast_ir(Int(32), ext_ir)


class RDom:
    """A reduction domain: RDom([(min, extent), ...]), RDom(Range, Range, ...) or RDom(buffer).

    Iterates innermost dimension (r.x) first.
    """

    _dim_names = ("x", "y", "z", "w")

    def __init__(self, *ranges, name: str | None = None):
        if not ranges and name is None:  # Halide's undefined RDom, a placeholder to assign later
            self._domain, self._name, self._rvars = None, "", []
            return
        if ranges and isinstance(ranges[-1], str):  # RDom(region, "name"), as in Halide
            ranges, name = ranges[:-1], ranges[-1]
        name = name or unique_name("r")
        if len(ranges) == 1 and isinstance(ranges[0], list | tuple) and not isinstance(ranges[0], Range):
            first = ranges[0]
            if len(first) == 2 and all(not isinstance(v, list | tuple | Range) for v in first):
                ranges = (tuple(first),)
            else:
                ranges = tuple(first)
        if len(ranges) == 1 and hasattr(ranges[0], "_rdom_ranges"):
            ranges = ranges[0]._rdom_ranges()
        if not ranges:
            raise HalideError(f"RDom {name} has no dimensions")
        rvars = []
        for i, r in enumerate(ranges):
            lo, ext = _range_pair(r, i, name)
            suffix = self._dim_names[i] if i < 4 else str(i)
            rvars.append(ReductionVariable(f"{name}${suffix}", lo, ext))
        self._domain = ReductionDomain(rvars)
        self._name = name
        self._rvars = [RVar(self._domain, i) for i in range(len(rvars))]

    def name(self) -> str:
        return self._name

    def defined(self) -> bool:
        return self._domain is not None

    def same_as(self, other) -> bool:
        """Whether other is this reduction domain (not an equal one made apart)."""
        return isinstance(other, RDom) and self._domain is not None and self._domain is other._domain

    def __repr__(self):  # as Halide's bindings print it
        from .ir_printer import expr_to_string

        lines = "".join(f"  {rv.name}({expr_to_string(rv.min)}, {expr_to_string(rv.extent)})\n"
                        for rv in (self._domain.rvars if self._domain is not None else []))
        return f"<halide.RDom RDom(\n{lines})>" if lines else "<halide.RDom RDom()>"

    def dimensions(self) -> int:
        return len(self._rvars)

    def __len__(self):
        return len(self._rvars)

    def __iter__(self):
        return iter(self._rvars)

    def __getitem__(self, i: int) -> RVar:
        """As Halide's bindings: a KeyError outside the dimensions (negative ones included), so a
        Python loop over the RDom stops; a TypeError for a non-integer index."""
        if isinstance(i, bool) or not isinstance(i, int):
            raise TypeError(f"RDom indices are integers, got {i!r}")
        if not 0 <= i < len(self._rvars):
            raise KeyError(i)
        return self._rvars[i]

    @property
    def x(self) -> RVar:
        return self._need(0)

    @property
    def y(self) -> RVar:
        return self._need(1)

    @property
    def z(self) -> RVar:
        return self._need(2)

    @property
    def w(self) -> RVar:
        return self._need(3)

    def _need(self, i: int) -> RVar:
        if i >= len(self._rvars):
            raise HalideError(f"RDom {self._name} has {len(self._rvars)} dimensions; no dimension {i}")
        return self._rvars[i]

    def where(self, predicate) -> RDom:
        cond = to_ir(predicate)
        if not cond.type.is_bool():
            raise HalideError(f"RDom {self._name}.where: predicate has type {cond.type}, not bool")
        scatter_gather.refuse(cond, f"the where() predicate of RDom {self._name}")
        self._domain.add_predicate(cond)
        return self

    def domain(self) -> ReductionDomain:
        return self._domain

    def _as_expr(self) -> Expr:
        if self._domain is None:
            raise HalideError("This RDom is undefined (RDom() with no dimensions); give it a region to use it")
        if len(self._rvars) != 1:
            raise HalideError(f"RDom {self._name} has {len(self._rvars)} dimensions; use r.x, r.y ...")
        return self._rvars[0]

    # A one-dimensional RDom acts as its RVar in arithmetic.
    def __getattr__(self, item):
        if item.startswith("__") and item.endswith("__"):
            raise AttributeError(item)
        return getattr(self._as_expr(), item)


def _forward(op):
    def method(self, *args):
        return getattr(self._as_expr(), op)(*args)

    return method


for _op in (
    "__add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __truediv__ __rtruediv__ __floordiv__ "
    "__rfloordiv__ __mod__ __rmod__ __pow__ __rpow__ __neg__ __invert__ __lt__ __le__ __gt__ __ge__ __eq__ "
    "__ne__ __and__ __rand__ __or__ __ror__ __xor__ __rxor__ __lshift__ __rlshift__ __rshift__ __rrshift__"
).split():
    setattr(RDom, _op, _forward(_op))
RDom.__hash__ = object.__hash__


class VarOrRVar(abc.ABC):  # noqa: B024 - a virtual base: Var and RVar are registered, nothing is abstract
    """Halide's VarOrRVar: wherever a schedule takes one, pyhalide takes a Var or an RVar as it
    is, so `VarOrRVar(v)` is v itself (a one-dimensional RDom gives its RVar), and
    `isinstance(v, VarOrRVar)` holds for both."""

    def __new__(cls, v):
        if isinstance(v, RDom):
            v = v._as_expr()
        if not isinstance(v, Var | RVar):
            raise HalideError(f"VarOrRVar takes a Var or an RVar, got {v!r}")
        return v


VarOrRVar.register(Var)
VarOrRVar.register(RVar)
