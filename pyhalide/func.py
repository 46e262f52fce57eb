"""Func: pure and update definitions, the references `f[x, y]` that build Calls, and Stages."""

from __future__ import annotations

from dataclasses import dataclass

from . import ir, scatter_gather
from .cse import common_subexpression_elimination
from .deep_recursion import deep
from .errors import HalideError
from .expr import Expr, cast_ir, coerce_python, to_ir, wrap
from .ir_mutator import IRVisitor, map_children
from .names import unique_func_name, unique_name
from .schedule import FuncSchedule
from .scheduling import FuncScheduling, Schedulable
from .types import Bool, Int, Type
from .var import RDom, ReductionDomain, RVar, Var


@dataclass(frozen=True)
class Definition:
    """One stage of a Func: `args` on the left, `values` (a tuple) on the right.

    For update stages `rvars` lists the reduction variables, innermost first, and `predicate`
    is the conjunction of the RDoms' `where` clauses.
    """

    args: tuple
    values: tuple
    rvars: tuple = ()
    predicate: ir.Expr | None = None


class Tuple(tuple):
    """hl.Tuple: several values defined together by one Func."""

    def __new__(cls, *values):
        if len(values) == 1 and isinstance(values[0], list | tuple):
            values = values[0]
        elif len(values) == 1 and type(values[0]) is FuncRef and values[0]._func.defined():
            ref = values[0]  # a call of a Func: its elements, as Halide's Tuple(FuncRef)
            values = [ref[k] for k in range(ref._func.outputs())] if ref._func.outputs() > 1 else values
        return super().__new__(cls, values)


def _call_arg(owner: str, i: int, a) -> ir.Expr:
    e = to_ir(a)
    if e.type.is_float():
        raise HalideError(
            f"Implicit cast from {e.type} to int in argument {i + 1} in call to {owner} is not allowed. "
            "Use an explicit cast."
        )
    if e.type.lanes != 1 or e.type.is_handle():
        raise HalideError(f"Argument {i + 1} in call to {owner} has type {e.type}, not an integer")
    return cast_ir(Int(32), e)


def _key_to_args(owner: str, key, implicit: int | None = None) -> tuple:
    """The arguments of `f[key]`. `hl._` stands for `implicit` implicit Vars _0, _1, ... (the
    callee's remaining dimensions, or for a definition's left-hand side those its value uses)."""
    from .var import Var, _ImplicitMarker

    if isinstance(key, list):  # f[[x, y]] is f[x, y], as in Halide's bindings
        key = tuple(key)
    if not isinstance(key, tuple):
        key = (key,)
    marks = [i for i, k in enumerate(key) if isinstance(k, _ImplicitMarker)]
    if not marks:
        return tuple(key)
    if len(marks) > 1:
        raise HalideError(f"In a reference to {owner}: hl._ may appear only once among the arguments")
    if implicit is None or implicit < 0:
        raise HalideError(f"In a reference to {owner}: hl._ needs {owner} to be defined first (it stands for its "
                          "remaining dimensions)")
    i = marks[0]
    return (*key[:i], *(Var.implicit(k) for k in range(implicit)), *key[i + 1:])


def _key_tuple(key) -> tuple:
    """The arguments written in `f[key]`, as a tuple (f[[x, y]] is f[x, y], as in Halide's bindings)."""
    if isinstance(key, list):
        return tuple(key)
    return key if isinstance(key, tuple) else (key,)


def _is_placeholder(a) -> bool:
    from .var import _ImplicitMarker

    return isinstance(a, _ImplicitMarker)


def _has_placeholder(key) -> bool:
    return any(_is_placeholder(a) for a in _key_tuple(key))


def _same_args(a: tuple, b: tuple) -> bool:
    """Whether two argument lists are the same location: structurally equal, hl._ where hl._ is."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if _is_placeholder(x) or _is_placeholder(y):
            if not (_is_placeholder(x) and _is_placeholder(y)):
                return False
        elif to_ir(x) != to_ir(y):
            return False
    return True


def _declared_dims(f) -> int | None:
    return f._declared_types[1] if f._declared_types is not None else None


def _implicit_count(owner_dims: int, key) -> int:
    """How many implicit Vars `hl._` stands for in a call with this key to a Func or image."""
    n = len(key) if isinstance(key, tuple | list) else 1
    return owner_dims - (n - 1)


def _implicit_vars_used(values) -> int:
    """1 + the largest k of the implicit Vars _k the values use (0 if none)."""
    from .ir_mutator import free_variables

    used = [int(n[1:]) for v in values for n in free_variables(to_ir(v)) if n[:1] == "_" and n[1:].isdigit()]
    return max(used) + 1 if used else 0


def image_call(image, key) -> Expr:
    """`buffer[x, y]` or `image_param[x, y]`: a read of an input image."""
    args = _key_to_args(image.name(), key, _implicit_count(image.dimensions(), key))
    if len(args) != image.dimensions():
        raise HalideError(
            f"Image {image.name()} has {image.dimensions()} dimensions but was accessed with {len(args)} arguments"
        )
    ir_args = tuple(_call_arg(image.name(), i, a) for i, a in enumerate(args))
    return wrap(ir.Call(image.type(), image.name(), ir_args, ir.IMAGE, image=image))


def _is_sequence(value) -> bool:
    """A list, tuple, or any object with __len__ and __getitem__ that is not an Expr or Buffer."""
    if isinstance(value, list | tuple):
        return True
    from .buffer import Buffer

    return (not isinstance(value, Expr | Buffer | int | float | bool) and hasattr(value, "__len__")
            and hasattr(value, "__getitem__") and not hasattr(value, "_as_expr"))


def _not_yet_defined(f) -> HalideError:
    """Halide's error for using a call to a Func that has no definition yet."""
    return HalideError(f'Error: Can\'t call Func "{f.name()}" because it has not yet been defined.')


class _UnevaluatedFuncRefExpr:
    """What `f[args] + e` (and -, *, /) gives while f has no definition yet, as in Halide's bindings:
    only `f[args] = that` may use it, which defines f's update `f[args] op= e` (with an implicit
    pure definition, 0 for + and -, 1 for * and /). It has no operators of its own, so a second
    `ref += 1` is a TypeError, as in Halide."""

    __slots__ = ("lhs", "rhs", "op")

    def __init__(self, lhs: FuncRef, rhs, op):
        self.lhs, self.rhs, self.op = lhs, rhs, op

    def __repr__(self):
        return f"<unevaluated {self.lhs._func.name()}[...] {_OP_SYMBOLS[self.op]} {self.rhs!r}>"


# Python's TypeError messages name a class by __name__: the one Halide's bindings show.
_UnevaluatedFuncRefExpr.__name__ = "halide.halide_._UnevaluatedFuncRefExpr"

_OP_SYMBOLS = {ir.Add: "+", ir.Sub: "-", ir.Mul: "*", ir.Div: "/"}
_OP_IDENTITY = {ir.Add: 0, ir.Sub: 0, ir.Mul: 1, ir.Div: 1}


class FuncRef(Expr):
    """`f[args]`: a call when read, the left-hand side when assigned. Index `[i]` for Tuple parts."""

    __slots__ = ("_func", "_args", "_index")

    def __init__(self, func: Func, args: tuple, index: int | None = None):
        self._func, self._args, self._index = func, args, index
        self._ir = None

    def ir(self) -> ir.Expr:
        if self._ir is None:
            f = self._func
            if not f.defined():
                raise _not_yet_defined(f)
            types = f.types()
            args = self._args
            if any(_is_placeholder(a) for a in args):  # taken before f was defined: resolved now
                args = _key_to_args(f.name(), args, _implicit_count(f.dimensions(), args))
            if len(args) != f.dimensions():
                raise HalideError(
                    f"Func {f.name()} was called with {len(args)} arguments, "
                    f"but was defined with {f.dimensions()}"
                )
            if self._index is None and len(types) != 1:
                raise HalideError(
                    f"Func {f.name()} returns a Tuple of {len(types)} values; select one with f[...][i]"
                )
            i = self._index or 0
            if not 0 <= i < len(types):
                raise HalideError(f"Tuple index {i} out of range for Func {f.name()} with {len(types)} values")
            ir_args = tuple(_call_arg(f.name(), k, a) for k, a in enumerate(args))
            self._ir = ir.Call(types[i], f.name(), ir_args, ir.HALIDE, value_index=i, func=f)
        return self._ir

    def defined(self) -> bool:
        return True

    def __getitem__(self, i: int) -> FuncRef:
        if not isinstance(i, int):
            raise HalideError("A Func reference can only be indexed by an int (to pick a Tuple element)")
        if self._func.defined() and self._func.outputs() == 1:
            raise HalideError(f'Error: Can\'t index into a reference to Func "{self._func.name()}", because it does '
                              "not return a Tuple.")
        return FuncTupleElementRef(self._func, self._args, i)

    def function(self) -> Func:
        return self._func

    # What a call returns, known before the Func is defined when its types are declared (Halide's
    # FuncRef.type/types/size).
    def _known_types(self, method: str) -> list[Type]:
        f = self._func
        types = f.types() if f.defined() else list(f._declared_types[0]) if f._declared_types else []
        if not types:
            raise HalideError(f'Error: Can\'t call {method}() on call to Func "{f.name()}" because it is undefined '
                              "or has no type requirements.")
        return types

    def type(self) -> Type:
        types = self._known_types("type")
        if len(types) > 1:
            raise HalideError(f'Error: Can\'t call type() on call to Func "{self._func.name()}" because it returns '
                              "a Tuple.")
        return types[0]

    def types(self) -> list[Type]:
        return self._known_types("types")

    def size(self) -> int:
        return len(self._known_types("size"))

    __len__ = size

    # f[args] op e: an Expr once f is defined; before that, Halide's unevaluated reference, which
    # `f[args] = ...` turns into an update (this is how `f[x] += e` defines an undefined f).
    def _arith(self, op, other):
        if self._func.defined():
            return _EXPR_OPS[op](self, other)
        if not (isinstance(other, Expr | int | float) or hasattr(other, "_as_expr")):
            return NotImplemented  # (a Tuple, a string ...): Python's TypeError, as in Halide
        return _UnevaluatedFuncRefExpr(self, other, op)

    def __add__(self, other):
        return self._arith(ir.Add, other)

    def __sub__(self, other):
        return self._arith(ir.Sub, other)

    def __mul__(self, other):
        return self._arith(ir.Mul, other)

    def __truediv__(self, other):
        return self._arith(ir.Div, other)

    def equivalent_to(self, other: FuncRef) -> bool:
        """The same Func at structurally equal arguments (Halide's FuncRef::equivalent_to)."""
        return other._func is self._func and _same_args(self._args, other._args)


_EXPR_OPS = {ir.Add: Expr.__add__, ir.Sub: Expr.__sub__, ir.Mul: Expr.__mul__, ir.Div: Expr.__truediv__}


class FuncTupleElementRef(FuncRef):
    """`f[x, y][i]`: one element of a Tuple-valued Func's call (Halide's FuncTupleElementRef)."""

    __slots__ = ()

    def index(self) -> int:
        return self._index

    def type(self) -> Type:
        return Expr.type(self)

    def types(self) -> list[Type]:
        return [Expr.type(self)]

    __add__, __sub__, __mul__, __truediv__ = Expr.__add__, Expr.__sub__, Expr.__mul__, Expr.__truediv__


def _cse_update_value(value: ir.Expr) -> ir.Expr:
    """A reduction's value `f(args) op e` keeps that shape (associativity, rfactor and atomics read
    it): its operands go through common subexpression elimination one by one."""
    if isinstance(value, ir.BinaryOp) and (isinstance(value.a, ir.Call) or isinstance(value.b, ir.Call)):
        return map_children(value, common_subexpression_elimination)
    return common_subexpression_elimination(value)


class _FindVariables(IRVisitor):
    """Collect the Variables of an expression, split by what they stand for."""

    visit_once = True

    def __init__(self):
        super().__init__()
        self.pure: dict[str, None] = {}
        self.domains: dict[int, ReductionDomain] = {}

    def visit_Variable(self, v):
        if isinstance(v.ref, ReductionDomain):
            self.domains.setdefault(id(v.ref), v.ref)
        elif v.ref is None:
            self.pure.setdefault(v.name)

    def visit_Let(self, n):
        self.visit(n.value)
        inner = _FindVariables()
        inner.visit(n.body)
        self.domains.update(inner.domains)
        for name in inner.pure:
            if name != n.name:
                self.pure.setdefault(name)


def _is_image(v) -> str | None:
    """"buffer" or "image_param" (None otherwise): Func(v) reads it. Func(image_param) is, as
    Halide's, the image's own Func (`img_im`, one per ImageParam): every other read of the image
    goes through it, so its schedule (compute_root, in_ wrappers) reaches them all."""
    from .buffer import Buffer
    from .param import ImageParam

    return "buffer" if isinstance(v, Buffer) else "image_param" if isinstance(v, ImageParam) else None


def _is_type_list(v) -> bool:
    """A Type, or a non-empty list or tuple of Types: the declared types of Func(types, dims, name)."""
    if isinstance(v, Type):
        return True
    return isinstance(v, list | tuple) and bool(v) and all(isinstance(t, Type) for t in v)


def _type_list(types) -> str:
    """Types as Halide's messages list them: `int32`, or `(int32, float32)` for several."""
    names = [str(t) for t in types]
    return names[0] if len(names) == 1 else f"({', '.join(names)})"


class Func(FuncScheduling):
    """A function over an infinite integer domain, defined once purely and then by updates."""

    # the name was generated (`hl.Func()`'s "f12", `hl.sum`'s "sum7"), not given: lowering numbers
    # it canonically; a name given is kept, even one that equals a generated name ("t1", a CSE let's)
    _generated_name = False
    # Halide's frozen Function: realized (made an output of a Pipeline) or called by another Func's
    # definition, it takes no new definition (what its users see would change under them)
    _frozen = False

    def __new__(cls, *args):
        if cls is Func and len(args) == 1 and _is_image(args[0]) == "image_param":
            image = args[0]
            image._require_defined()
            if image._implicit_func is None:  # made once, then handed out again
                image._implicit_func = super().__new__(cls)
                image._implicit_func._unmade_image_func = True
            return image._implicit_func
        return super().__new__(cls)

    def __init__(self, *args):
        if len(args) == 1 and _is_image(args[0]) == "image_param" and not self.__dict__.pop("_unmade_image_func",
                                                                                              False):
            return  # the image's Func, made before: kept as it is
        name, declared = None, None
        if args and _is_type_list(args[0]):
            types = list(args[0]) if isinstance(args[0], list | tuple) else [args[0]]
            dims = args[1] if len(args) > 1 else None
            name = args[2] if len(args) > 2 else None
            if dims is not None and (not isinstance(dims, int) or isinstance(dims, bool) or dims < 0):
                raise HalideError(f"Func{' ' + name if name else ''}: the required dimensions must be a "
                                  f"non-negative integer, got {dims!r}")
            declared = (tuple(types), dims)
        elif args and isinstance(args[0], str):
            name = args[0]
        if name is None and args and _is_image(args[0]) == "image_param":
            name = f"{args[0].name()}_im"  # (Halide's name for an ImageParam's Func)
        self._name = unique_func_name(name or unique_name("f"))
        self._generated_name = not name
        self._pure_args: tuple[str, ...] | None = None
        self._init: Definition | None = None
        self._updates: list[Definition] = []
        self._schedule = FuncSchedule()
        self._declared_types = declared
        self._estimates: dict[str, tuple[int, int]] = {}  # pure Var name -> (min, extent); not schedule
        self._version = 0
        if args and (isinstance(args[0], Expr) or isinstance(args[0], int | float)):
            self[()] = args[0]
        elif args and _is_image(args[0]):  # Func(buffer or ImageParam): reads it, as Halide's
            implicit = tuple(Var.implicit(k) for k in range(args[0].dimensions()))
            self[implicit] = args[0][implicit]

    # --- queries, as in Halide's Python bindings ---
    def name(self) -> str:
        return self._name

    def defined(self) -> bool:
        return self._init is not None

    def _require_defined(self):
        if self._init is None:
            raise HalideError(f"Func {self._name} has not been defined")

    def _undefined(self, method: str, what: str = "type") -> HalideError:
        return HalideError(f'Error: Can\'t call Func::{method} on Func "{self._name}" because it is undefined or '
                           f"has no {what} requirements.")

    def dimensions(self) -> int:
        """The number of arguments: the definition's, or before it the declared dimensions."""
        if self._init is None:
            if self._declared_types is None or self._declared_types[1] is None:
                raise self._undefined("dimensions", "dimension")
            return self._declared_types[1]
        return len(self._pure_args)

    def args(self) -> list[Var]:
        self._require_defined()
        return [Var(n) for n in self._pure_args]

    def types(self) -> list[Type]:
        """The types of the values: the definition's, or before it the declared ones."""
        if self._init is None:
            if self._declared_types is None:
                raise self._undefined("types")
            return list(self._declared_types[0])
        return [v.type for v in self._init.values]

    output_types = types

    def type(self) -> Type:
        if self._init is None and self._declared_types is None:
            raise self._undefined("type")
        ts = self.types()
        if len(ts) != 1:
            raise HalideError(f'Error: Can\'t call Func::type on Func "{self._name}" because it returns a Tuple.')
        return ts[0]

    def outputs(self) -> int:
        if self._init is None and self._declared_types is None:
            raise self._undefined("outputs")
        return len(self.types())

    def value(self) -> Expr:
        self._require_defined()
        if self.is_extern():
            raise HalideError(f'Can\'t call Func::value() on an extern Func "{self._name}".')
        return wrap(self._init.values[0])

    def values(self) -> list[Expr]:
        self._require_defined()
        if self.is_extern():
            raise HalideError(f'Can\'t call Func::values() on an extern Func "{self._name}".')
        return [wrap(v) for v in self._init.values]

    def num_update_definitions(self) -> int:
        return len(self._updates)

    def has_update_definition(self) -> bool:
        return bool(self._updates)

    def update_args(self, i: int = 0) -> list[Expr]:
        return [wrap(a) for a in self._scheduled_update(i).args]

    def update_value(self, i: int = 0) -> Expr:
        return wrap(self._scheduled_update(i).values[0])

    def update_values(self, i: int = 0) -> list[Expr]:
        return [wrap(v) for v in self._scheduled_update(i).values]

    def rvars(self, i: int = 0) -> list[RVar]:
        """The RVars update i reduces over, innermost first (Halide's Func.rvars)."""
        d = self._scheduled_update(i)
        finder = _FindVariables()
        for e in (*d.args, *d.values, *([d.predicate] if d.predicate is not None else [])):
            finder.visit(e)
        place = {id(rv): RVar(dom, k) for dom in finder.domains.values() for k, rv in enumerate(dom.rvars)}
        return [place[id(rv)] for rv in d.rvars if id(rv) in place]

    def infer_arguments(self) -> list:
        """The ImageParams and Params this Func's pipeline reads (see Pipeline.infer_arguments)."""
        return self._pipeline().infer_arguments()

    def _update(self, i: int) -> Definition:
        if not 0 <= i < len(self._updates):
            raise HalideError(f"Func {self._name} has {len(self._updates)} update definitions; no update {i}")
        return self._updates[i]

    def _scheduled_update(self, i: int) -> Definition:
        self._update(i)
        return self.scheduled_definitions()[i + 1]

    def definitions(self) -> list[Definition]:
        """The algorithm: the pure definition followed by the updates, as the user wrote them."""
        self._require_defined()
        return [self._init, *self._updates]

    def scheduled_definitions(self) -> list[Definition]:
        """The definitions the schedule computes: the algorithm's, with each update that rfactor
        split reducing its intermediate Func instead (as Halide's Func shows after rfactor)."""
        self._require_defined()
        stages = self._schedule.stages
        return [self._init, *(stages[k + 1].definition if k + 1 < len(stages) and stages[k + 1].definition is not None
                              else d for k, d in enumerate(self._updates))]

    def definition_of(self, stage: int, schedule) -> Definition:
        """The definition that `schedule`, stage `stage`'s schedule or one of its specializations'
        (at any depth), computes: a specialization rfactored on its own has its own."""
        return self.scheduled_definitions()[stage] if schedule.definition is None else schedule.definition

    def all_scheduled_definitions(self) -> list[tuple[int, Definition]]:
        """(stage, definition) for each stage's scheduled definition, then each definition of a
        specialization that differs from its stage's: everything the schedule may compute."""
        scheduled = self.scheduled_definitions()
        out = list(enumerate(scheduled))
        for s, base in enumerate(scheduled):
            pending = list(self._schedule.stages[s].specializations) if s < len(self._schedule.stages) else []
            while pending:
                _, special = pending.pop(0)
                if special.definition is not None and special.definition is not base:
                    out.append((s, special.definition))
                pending.extend(special.specializations)
        return out

    # --- the schedule as a value: copied, reset and replaced without touching the algorithm ---
    def copy_schedule(self) -> FuncSchedule:
        """A snapshot of this Func's schedule, to put back later with set_schedule."""
        return self._schedule.copy()

    def set_schedule(self, schedule: FuncSchedule) -> Func:
        """Replace this Func's schedule by (a copy of) a snapshot taken with copy_schedule."""
        if not isinstance(schedule, FuncSchedule):
            raise HalideError(f"Func {self._name}.set_schedule takes what copy_schedule returns, got {schedule!r}")
        if self._init is not None and len(schedule.stages) != 1 + len(self._updates):
            raise HalideError(f"Func {self._name}.set_schedule: the schedule has {len(schedule.stages)} stages, "
                              f"but {self._name} has {1 + len(self._updates)}")
        self._schedule = schedule.copy()
        self._version += 1
        return self

    def reset_schedule(self) -> Func:
        """Back to the default schedule (as if no directive had been applied to this Func)."""
        self._schedule = self._schedule.default()
        self._version += 1
        return self

    # --- estimates: expected sizes, for autoschedulers (not schedule: lowering never reads them) ---
    def _require_defined_for(self, method: str):
        if self._init is None:
            raise HalideError(f"Func {self._name}.{method}: {self._name} has not been defined; "
                              "define it before giving estimates of its size")

    def set_estimate(self, var: Var, min, extent) -> Func:
        """Expect the output's dimension `var` to span [min, min + extent) (constant integers)."""
        from .estimates import check_estimate

        self._require_defined_for("set_estimate")
        if not isinstance(var, Var):
            raise HalideError(f"Func {self._name}.set_estimate takes a pure Var of {self._name}, got {var!r}")
        name = var.name()
        if name not in self._pure_args:
            raise HalideError(
                f"Can't provide an estimate on variable {name} of function {self._name} because {name} is "
                f"not one of the pure variables of {self._name} ({', '.join(self._pure_args) or 'none'})"
            )
        where = f"Func {self._name}.set_estimate: dimension {self._pure_args.index(name)} ({name})"
        self._estimates[name] = check_estimate(where, min, extent)
        return self

    def set_estimates(self, estimates) -> Func:
        """An estimate for every dimension: a list of hl.Range or (min, extent), in argument order."""
        from .estimates import estimate_list

        self._require_defined_for("set_estimates")
        checked = estimate_list(f"Func {self._name}", list(self._pure_args), estimates)
        self._estimates.update(zip(self._pure_args, checked))
        return self

    def estimates(self) -> list[tuple[int, int] | None]:
        """Per dimension, the (min, extent) set by set_estimate(s), or None where none was set."""
        self._require_defined_for("estimates")
        return [self._estimates.get(n) for n in self._pure_args]

    # --- the buffers the outputs are written to, whose dimensions can be constrained ---
    def output_buffers(self) -> list:
        """One hl.OutputImageParam per value (f, or f.0, f.1 ... for a Tuple): constrain the
        buffers a pipeline writes with `.dim(i).set_min(...)` and friends (checked when it runs)."""
        from .param import OutputImageParam

        types = self.types()  # (as Halide: it needs the types, defined or declared)
        dims = self.dimensions()
        known = self.__dict__.get("_output_params")
        if known is None or [p.type() for p in known] != types or known[0].dimensions() != dims:
            names = [self._name] if len(types) == 1 else [f"{self._name}.{k}" for k in range(len(types))]
            known = self._output_params = [OutputImageParam._of_func(self, n, t, dims)
                                           for n, t in zip(names, types)]
        return list(known)

    def output_buffer(self):
        """The hl.OutputImageParam of a single-valued Func (see output_buffers)."""
        if self._init is None and self._declared_types is None:
            raise self._undefined("output_buffer")
        if len(self.types()) != 1:
            raise HalideError(f'Error: Can\'t call Func::output_buffer on Func "{self._name}" because it returns '
                              "a Tuple.")
        return self.output_buffers()[0]

    def infer_input_bounds(self, outputs=None, target=None) -> None:
        """Bind every ImageParam the pipeline reads that has no buffer yet to a new buffer just
        large enough (and satisfying its constraints) to compute `outputs` (sizes, or Buffers)."""
        self._pipeline().infer_input_bounds(outputs, target)

    def __repr__(self):
        return f"<halide.Func '{self._name}'>"  # as Halide's bindings print it

    def __hash__(self):
        return id(self)

    # --- definitions ---
    def __getitem__(self, key) -> FuncRef:
        dims = self.dimensions() if self.defined() or _declared_dims(self) is not None else -1
        if dims < 0 and _has_placeholder(key):
            # hl._ on a Func not defined yet: it stands for as many implicit Vars as the value it is
            # defined with uses (see _define_from_unevaluated), so it stays unresolved until then
            args = _key_tuple(key)
        else:
            args = _key_to_args(self._name, key, _implicit_count(dims, key) if dims >= 0 else None)
        for i, a in enumerate(args):
            if not _is_placeholder(a):
                _call_arg(self._name, i, a)  # type errors surface where the call is written
        return FuncRef(self, args)

    @deep
    def __setitem__(self, key, value):
        frozen = self.__dict__.get("_frozen_by")
        if frozen is not None:  # (Halide freezes a Func once another's definition uses it)
            kind = "pure" if self._init is None else "update"
            raise HalideError(f"Func {self._name} cannot be given a new {kind} definition, because it has already "
                              f"been used in the definition of another Func ({frozen}).")
        if isinstance(value, _UnevaluatedFuncRefExpr):
            self._define_from_unevaluated(key, value)
            return
        from .operators import _expr_like

        if isinstance(value, FuncRef) and not _expr_like(value):  # a Tuple-valued Func's call: its elements
            value = Tuple([value[i] for i in range(value.size())])
        values = value if _is_sequence(value) else [value]
        used = _implicit_vars_used(v for v in values if isinstance(v, Expr) or hasattr(v, "_as_expr"))
        args = self._lhs_args(key, used)
        if _is_sequence(value):  # a Tuple: any Python sequence, as in Halide's bindings
            values = tuple(value[i] for i in range(len(value)))
            if not values:
                raise HalideError(f"Func {self._name}: empty Tuple")
        else:
            values = (value,)
        if self.is_extern():
            raise HalideError(f'In definition of Func "{self._name}":\nFunc with extern definition cannot be given '
                              "a pure or update definition.")
        if self._init is None:
            self._define_pure(args, values)
        else:
            self._define_update(args, values)
        self._version += 1

    def _lhs_args(self, key, used: int) -> tuple:
        """The left-hand side of a definition: hl._ (or, without one, the end) gets the `used`
        implicit Vars the value uses, as in Halide."""
        args = _key_to_args(self._name, key, used)
        if used and not any(isinstance(a, Var) and a.is_implicit() for a in args):
            args = (*args, *(Var.implicit(k) for k in range(used)))
        return args

    def _define_from_unevaluated(self, key, u: _UnevaluatedFuncRefExpr):
        """`f[args] = f[args] op e` where f[args] was read before f had a definition: Halide's
        FuncRef op= e, which gives f the pure definition `f(vars) = identity` (of e's type, or the
        declared one) and then the update `f[args] = f[args] op e`."""
        ref = u.lhs
        if ref._func is not self or not _same_args(ref._args, _key_tuple(key)):
            raise HalideError(f"Error: Cannot use an unevaluated reference to '{ref._func.name()}' to define an "
                              "update at a different location.")
        if self._init is not None:
            raise HalideError(f"Error: Cannot use an unevaluated reference to '{self._name}' to define an update "
                              "when a pure definition already exists.")
        if self._declared_types is not None and len(self._declared_types[0]) != 1:
            raise HalideError(f"Func {self._name} is declared with {len(self._declared_types[0])} values (a Tuple); "
                              f"{_OP_SYMBOLS[u.op]}= takes a single-valued Func")
        rhs = u.rhs if isinstance(u.rhs, Expr) or hasattr(u.rhs, "_as_expr") else wrap(to_ir(u.rhs))
        args = self._lhs_args(key, _implicit_vars_used([rhs]))
        # The pure definition reuses the left-hand side's plain Vars; other arguments get new ones.
        pure = tuple(a if isinstance(a, Var) and not isinstance(a, RVar) else Var() for a in args)
        types = self._declared_types[0] if self._declared_types else (to_ir(rhs).type,)
        identity = _OP_IDENTITY[u.op]
        self._define_pure(pure, tuple(wrap(ir.make_const(t, identity)) for t in types))
        self._version += 1
        self[args] = _EXPR_OPS[u.op](self[args], rhs)

    def _refuse_if_frozen(self, which: str) -> None:
        if self._frozen:
            raise HalideError(f"Func {self._name} cannot be given a new {which} definition, because it has already "
                              "been realized or used in the definition of another Func.")

    def _freeze_called(self, exprs) -> None:
        """As Halide: the Funcs a definition calls (but this one) take no new definitions."""
        from .call_graph import called_funcs

        for f in called_funcs(exprs).values():
            if f is not self and f is not None:
                f._frozen = True

    def _define_pure(self, args: tuple, values: tuple):
        self._refuse_if_frozen("pure")
        names = []
        for i, a in enumerate(args):
            if isinstance(a, RVar) or not isinstance(a, Var):
                raise HalideError(
                    f"In pure definition of Func {self._name}: argument {i + 1} ({a}) is not a pure Var. "
                    "The first definition of a Func must be pure: use Vars on the left-hand side."
                )
            if a.name() in names:
                raise HalideError(
                    f"In pure definition of Func {self._name}: Var {a.name()} is used more than once "
                    f"(arguments {names.index(a.name()) + 1} and {i + 1})"
                )
            names.append(a.name())
        from .operators import defined_where, undef

        ir_values, conditions = [], set()
        for k, v in enumerate(values):
            if isinstance(v, Expr) and not v.defined():
                raise HalideError(f"In pure definition of Func {self._name}: value {k} is undefined")
            e = to_ir(v)
            value, defined = defined_where(e)
            # An element never defined stays undef: lowering stores nothing to it (remove_undef),
            # as Halide. An undef some select picks leaves the element unwritten there.
            ir_values.append(undef(e.type)._ir if value is None else value)
            if value is not None:
                conditions.add(defined)
        if len(conditions) > 1:
            raise HalideError(f"In pure definition of Func {self._name}: the elements of the Tuple are undef under "
                              "different conditions; Halide stores all of a Tuple's elements or none")
        predicate = next(iter(conditions - {None}), None)
        n = scatter_gather.size(ir_values, f"In pure definition of Func {self._name}")
        if n:  # every element goes to the one site, its Vars: the last is what f holds
            ir_values = list(scatter_gather.elements((), tuple(ir_values), n)[-1][1])
        self._check_declared(len(names), [e.type for e in ir_values])
        for k, e in enumerate(ir_values):
            if e.type.lanes != 1 or e.type.is_handle():
                raise HalideError(f"Func {self._name}: value {k} has type {e.type}, which a Func cannot hold")
        finder = _FindVariables()
        for e in ir_values:
            finder.visit(e)
        if finder.domains:
            raise HalideError(
                f"In pure definition of Func {self._name}: the right-hand side uses an RDom. "
                "Reductions belong in update definitions (or use an inline reduction such as hl.sum)."
            )
        for n in finder.pure:
            if n not in names:
                raise HalideError(
                    f"In pure definition of Func {self._name}: undefined variable {n} on the right-hand side "
                    f"(the left-hand side has {', '.join(names) or 'no arguments'})"
                )
        self._pure_args = tuple(names)
        from .operators import lower_random, next_random_tag

        tag = next_random_tag()  # random calls become a hash of the point, as Halide's Function::define does
        ir_values = [lower_random(common_subexpression_elimination(e), [ir.Variable(n, Int(32)) for n in names], tag)
                     for e in ir_values]
        self._init = Definition(tuple(ir.Variable(n) for n in names), tuple(ir_values), predicate=predicate)
        self._freeze_called([*ir_values, predicate])
        self._schedule.reset_stages(1)

    # --- extern stages (pyhalide/extern.py) ---
    def define_extern(self, function_name: str, params, types, arguments, mangling=None, device_api=None) -> None:
        """Define this Func as computed by the C function `function_name` of this process (see
        pyhalide/extern.py): `params` are Funcs, Buffers, ImageParams or expressions, `types` the
        value type(s), `arguments` the dimension count or the Vars naming the dimensions."""
        from .extern import EXTERN_STAGE, NameMangling, encode_arguments
        from .target import DeviceAPI

        if self._init is not None:
            what = "already has an extern definition" if self.is_extern() else "with a pure definition cannot have " \
                "an extern definition"
            raise HalideError(f'In extern definition for Func "{self._name}":\nFunc {what}.')
        if not isinstance(function_name, str) or not function_name:
            raise HalideError(f"Func {self._name}: define_extern needs the function's name, got {function_name!r}")
        if device_api not in (None, DeviceAPI.Host):
            raise HalideError(f"Func {self._name}: pyhalide runs extern stages on the host only "
                              f"(device_api={device_api})")
        mangling = NameMangling.Default if mangling is None else mangling
        if mangling is NameMangling.CPlusPlus:
            raise HalideError(f"Func {self._name}: pyhalide calls extern stages by their C names "
                              "(NameMangling.CPlusPlus is not supported)")
        types = list(types) if isinstance(types, list | tuple) else [types]
        if not types or not all(isinstance(t, Type) for t in types):
            raise HalideError(f"Func {self._name}: define_extern needs one or more hl.Types, got {types!r}")
        if isinstance(arguments, int) and not isinstance(arguments, bool):
            if arguments < 0:
                raise HalideError(f"Func {self._name}: define_extern with {arguments} dimensions")
            names = [Var.implicit(k).name() for k in range(arguments)]
        else:
            names = [a.name() for a in arguments]
            if not all(isinstance(a, Var) and not isinstance(a, RVar) for a in arguments) or \
                    len(set(names)) != len(names):
                raise HalideError(f"Func {self._name}: define_extern's arguments must be distinct Vars, "
                                  f"got {arguments!r}")
        self._check_declared(len(names), types)
        for t in types:
            if t.lanes != 1 or t.is_handle():
                raise HalideError(f"Func {self._name}: an extern stage cannot produce values of type {t}")
        args = (ir.StringImm(function_name), ir.make_const(Int(32), mangling.value),
                *encode_arguments(self._name, params))
        self._pure_args = tuple(names)
        self._init = Definition(tuple(ir.Variable(n) for n in names),
                                tuple(ir.Call(t, EXTERN_STAGE, args, ir.INTRINSIC, value_index=k)
                                      for k, t in enumerate(types)))
        self._schedule.reset_stages(1)
        self._version += 1

    def is_extern(self) -> bool:
        from .extern import is_extern

        return is_extern(self)

    def extern_function_name(self) -> str:
        from .extern import extern_call

        call = extern_call(self)
        if call is None:
            raise HalideError(f"Func {self._name} is not an extern stage: it has no extern function")
        return call.name

    def _check_declared(self, dims: int, types: list[Type]) -> None:
        """A Func declared with types and dimensions (Func(types, dims, name)) must be defined with
        exactly those, as in Halide (a Python number is an int32 or float32 value there too)."""
        if self._declared_types is None:
            return
        want, want_dims = self._declared_types
        if list(want) != list(types):
            raise HalideError(f'Error: Func "{self._name}" is constrained to only hold values of type '
                              f"{_type_list(want)} but is defined with values of type {_type_list(types)}.")
        if want_dims is not None and want_dims != dims:
            raise HalideError(f'Error: Func "{self._name}" is constrained to have exactly {want_dims} dimensions, '
                              f"but is defined with {dims} dimensions.")

    def _define_update(self, args: tuple, values: tuple):
        self._refuse_if_frozen("update")
        n_up = len(self._updates)
        where = f"In update definition {n_up} of Func {self._name}"
        if len(args) != len(self._pure_args):
            raise HalideError(
                f"{where}: {len(args)} arguments on the left-hand side, but the pure definition has "
                f"{len(self._pure_args)}"
            )
        types = self.types()
        if len(values) != len(types):
            raise HalideError(f"{where}: {len(values)} values, but the pure definition has {len(types)}")
        from .operators import defined_where

        ir_values = []
        for k, (v, t) in enumerate(zip(values, types)):
            e = coerce_python(v, t) if not isinstance(v, Expr) and not hasattr(v, "_as_expr") else to_ir(v)
            if e.type != t:
                raise HalideError(
                    f"{where}: Tuple element {k} of update definition has type {e.type}, but pure definition has "
                    f"type {t}"
                )
            ir_values.append(e)
        ir_args = tuple(_call_arg(self._name, i, a) for i, a in enumerate(args))
        # hl.undef leaves an element as it was. Where every element that is ever defined is defined
        # under one condition, that condition guards the store (Halide's: nothing is stored where
        # it is false); otherwise (which Halide refuses) each element is written back unchanged
        # where it is undef. An element undef everywhere is written back unchanged.
        stripped = [defined_where(e) for e in ir_values]
        never_defined = sum(value is None for value, _ in stripped)
        conditions = {defined for value, defined in stripped if value is not None}
        guard = [*conditions] if len(conditions) == 1 and None not in conditions else []
        for k, (t, (value, defined)) in enumerate(zip(types, stripped)):
            current = ir.Call(t, self._name, ir_args, ir.HALIDE, k, self)
            kept = defined is None or bool(guard)
            ir_values[k] = current if value is None else value if kept else ir.Select(defined, value, current)
        # Pure Vars must appear unadorned, in the same position as in the pure definition; one that
        # does may also be used elsewhere on the left (f(x, x) = ..., the diagonal), as in Halide.
        lhs_pure = {a.name: i for i, a in enumerate(ir_args)
                    if isinstance(a, ir.Variable) and a.ref is None and a.name == self._pure_args[i]}
        for i, a in enumerate(ir_args):
            if isinstance(a, ir.Variable) and a.ref is None and a.name in self._pure_args and a.name not in lhs_pure:
                raise HalideError(
                    f"{where}: pure Var {a.name} appears in position {i} but is argument "
                    f"{self._pure_args.index(a.name)} of the pure definition"
                )
        finder = _FindVariables()
        for e in (*ir_args, *ir_values, *guard):
            finder.visit(e)
        for name in finder.pure:
            if name not in lhs_pure:
                if name in self._pure_args:
                    raise HalideError(
                        f"{where}: pure Var {name} must appear unadorned in position "
                        f"{self._pure_args.index(name)} of the left-hand side"
                    )
                raise HalideError(f"{where}: undefined variable {name}")
        scatter_gather.size([*ir_args, *ir_values], where)
        self._check_self_references(where, ir_args, [*ir_values, *guard], lhs_pure)
        rvars = []
        predicate = None
        for dom in finder.domains.values():
            rvars.extend(dom.rvars)
            if dom.predicate is not None:
                predicate = dom.predicate if predicate is None else ir.And(predicate, dom.predicate)
        if predicate is not None:
            pf = _FindVariables()
            pf.visit(predicate)
            for name in pf.pure:
                if name not in lhs_pure:
                    raise HalideError(f"{where}: the RDom predicate uses variable {name}, not on the left")
        for condition in guard:
            predicate = condition if predicate is None else ir.And(predicate, condition)
        from .operators import lower_random, next_random_tag

        tag = next_random_tag()
        free = [*(ir.Variable(n, Int(32)) for n in self._pure_args),
                *(ir.Variable(rv.name, Int(32), ref=dom) for dom in finder.domains.values() for rv in dom.rvars)]
        ir_args = tuple(lower_random(a, free, tag) for a in ir_args)
        ir_values = [lower_random(_cse_update_value(e), free, tag) for e in ir_values]
        predicate = None if predicate is None else lower_random(predicate, free, tag)
        if never_defined == len(types):  # a stage that defines nothing stores nothing (Halide drops it)
            predicate = ir.make_const(Bool(), False)
        self._updates.append(Definition(ir_args, tuple(ir_values), tuple(rvars), predicate))
        self._freeze_called([*ir_args, *ir_values, predicate])
        self._schedule.reset_stages(1 + len(self._updates))

    def _check_self_references(self, where: str, lhs, values, lhs_pure: dict) -> None:
        """Reads of the Func by its own update use each pure Var of the left-hand side, unadorned,
        in its place (Halide's rule: the stage's pure dimensions stay independent)."""
        from .lowering.legality import self_calls

        for call in self_calls(self, [*lhs, *values]):
            for name, pos in lhs_pure.items():
                arg = call.args[pos]
                if not (isinstance(arg, ir.Variable) and arg.name == name):
                    raise HalideError(
                        f"{where}: all recursive references to {self._name} must contain the same pure "
                        f"variables in the same places as on the left-hand side (argument {pos} is "
                        f"{wrap(arg)}, not {name})"
                    )

    def _lowering_copy(self, name: str, schedule: FuncSchedule) -> Func:
        """A private Func for lowering to work on: same shape, the given name and schedule; its
        definitions are filled in by the caller (they must call other copies)."""
        c = object.__new__(Func)
        c._name, c._pure_args, c._declared_types = name, self._pure_args, self._declared_types
        c._init, c._updates, c._schedule, c._version = None, [], schedule, 0
        c._estimates = {}  # estimates are not carried: lowering never reads them
        c._trace, c._trace_tags, c._debug_file = self._trace, self._trace_tags, self._debug_file
        return c

    # --- tracing (Halide's trace_stores/loads/realizations): events printed as the pipeline runs ---
    _trace = frozenset()
    _trace_tags: tuple[str, ...] = ()
    _debug_file: str | None = None

    def debug_to_file(self, filename: str) -> None:
        """Write this Func's values to `filename` each time it is computed, in the format its
        extension names, as Halide's runtime writes them (pyhalide/debug_to_file.py)."""
        if not isinstance(filename, str) or not filename:
            raise HalideError(f"Func {self._name}: debug_to_file needs a file name, got {filename!r}")
        self._debug_file = filename
        self._version += 1

    def add_trace_tag(self, trace_tag: str) -> Func:
        """A tag printed at the start of a traced pipeline (`Tag f.0() tag = "..."`), as Halide's
        add_trace_tag: where this Func's loads or realizations are traced."""
        if not isinstance(trace_tag, str):
            raise HalideError(f"Func {self.name()}.add_trace_tag: the tag must be a str, got {trace_tag!r}")
        if "\0" in trace_tag:
            raise HalideError("add_trace_tag() may not contain the null character.")
        self._trace_tags = (*self._trace_tags, trace_tag)
        self._version += 1
        return self

    def _traced(self, what: str) -> Func:
        self._trace = self._trace | {what}
        self._version += 1
        return self

    def trace_stores(self) -> Func:
        """Print every value stored into this Func: `Store f.0(x, y) = v`, as Halide does."""
        return self._traced("stores")

    def trace_loads(self) -> Func:
        """Print every value read from this Func by its consumers: `Load f.0(x, y) = v`."""
        return self._traced("loads")

    def trace_realizations(self) -> Func:
        """Print where this Func is realized and produced: `Begin realization f.0(min, extent, ...)`."""
        return self._traced("realizations")

    # --- stages, schedules and running (the schedule methods live in scheduling.py) ---
    def update(self, i: int = 0) -> Stage:
        self._update(i)
        return Stage(self, i + 1)

    def to_python_source(self) -> str:
        """This Func's schedule as Python a person can paste after the algorithm."""
        from .schedule import schedule_to_python

        return schedule_to_python([self])

    def realize(self, sizes=None, target=None):
        return self._pipeline().realize(sizes, target)

    def compile_jit(self, target=None):
        self._pipeline().compile_jit(target)

    def compile_to_callable(self, arguments, target=None):
        """The pipeline of this Func as a Callable (see Pipeline.compile_to_callable), as Halide's Func has it."""
        return self._pipeline().compile_to_callable(arguments, target)

    def _pipeline(self):
        cached = self.__dict__.get("_cached_pipeline")
        if cached is None:
            from .pipeline import Pipeline

            cached = self._cached_pipeline = Pipeline(self)
        return cached

    def print_loop_nest(self):
        self._pipeline().print_loop_nest()

    def compile_to_lowered_stmt(self, filename: str, arguments=None, fmt=None, target=None):
        self._pipeline().compile_to_lowered_stmt(filename, arguments, fmt, target)

    def compile_to_conceptual_stmt(self, filename: str, arguments=None, fmt=None, target=None):
        self._pipeline().compile_to_conceptual_stmt(filename, arguments, fmt, target)

    def compile_to_module(self, arguments, fn_name: str = "", target=None):
        """This Func's pipeline lowered to a Module (see Pipeline.compile_to_module)."""
        return self._pipeline().compile_to_module(arguments, fn_name, target)

    def compile_to_llvm_assembly(self, filename: str, arguments=None, fn_name=None, target=None):
        self._pipeline().compile_to_llvm_assembly(filename, arguments, fn_name, target)

    def compile_to_assembly(self, filename: str, arguments=None, fn_name=None, target=None):
        self._pipeline().compile_to_assembly(filename, arguments, fn_name, target)

    def compile_to_cuda(self, filename: str, arguments=None, fn_name=None, target=None):
        self._pipeline().compile_to_cuda(filename, arguments, fn_name, target)

    def compile_to(self, outputs: dict, arguments, fn_name: str = "", target=None):
        self._pipeline().compile_to(outputs, arguments, fn_name, target)

    def compile_to_file(self, filename_prefix: str, arguments, fn_name: str = "", target=None):
        self._pipeline().compile_to_file(filename_prefix, arguments, fn_name, target)

    def compile_to_static_library(self, filename_prefix: str, arguments, fn_name: str = "", target=None):
        self._pipeline().compile_to_static_library(filename_prefix, arguments, fn_name, target)

    def compile_to_multitarget_static_library(self, filename_prefix: str, arguments, targets):
        self._pipeline().compile_to_multitarget_static_library(filename_prefix, arguments, targets)

    def compile_to_multitarget_object_files(self, filename_prefix: str, arguments, targets, suffixes=()):
        self._pipeline().compile_to_multitarget_object_files(filename_prefix, arguments, targets, suffixes)

    def compile_to_object(self, filename: str, arguments, fn_name: str = "", target=None):
        self._pipeline().compile_to_object(filename, arguments, fn_name, target)

    def compile_to_header(self, filename: str, arguments, fn_name: str = "", target=None):
        self._pipeline().compile_to_header(filename, arguments, fn_name, target)

    def compile_to_bitcode(self, filename: str, arguments, fn_name: str = "", target=None):
        self._pipeline().compile_to_bitcode(filename, arguments, fn_name, target)

    def compile_to_python_extension(self, filename: str, arguments, fn_name: str = "", target=None):
        self._pipeline().compile_to_python_extension(filename, arguments, fn_name, target)

    def compile_to_c(self, filename: str, arguments, fn_name: str = "", target=None):
        self._pipeline().compile_to_c(filename, arguments, fn_name, target)


def lambda_func(*args) -> Func:
    """Halide's hl.lambda_func(x, y, ..., e): a new anonymous Func defined as f[x, y, ...] = e."""
    if not args:
        raise HalideError("lambda_func takes the Vars of the new Func and then its value")
    *vars, value = args
    for i, v in enumerate(vars):
        if not isinstance(v, Var) or isinstance(v, RVar):
            raise HalideError(f"lambda_func: argument {i + 1} ({v!r}) is not a Var; lambda_func takes Vars and then "
                              "the value")
    f = Func(unique_name("lambda_"))
    f._generated_name = True
    f[tuple(vars)] = value
    return f


class Stage(Schedulable):
    """One definition of a Func, for scheduling its loops (`f.update(0).vectorize(x)`)."""

    def __init__(self, func: Func, index: int = 0):
        self._func, self._stage_index = func, index  # (Stage(f): f's pure definition, as in Halide)

    def _target_func(self):
        return self._func

    def name(self) -> str:
        return f"{self._func.name()}.s{self._stage_index}"

    def unscheduled(self) -> None:
        """Say that leaving this update's loops as they are is deliberate: no warning that it "has
        not been scheduled" when other stages of the Func have been (Halide's Stage.unscheduled)."""
        from .schedule import stage_touched

        self._func._require_defined()
        if self._stage_index == 0:
            raise HalideError(f"Stage {self.name()}.unscheduled: unscheduled() is for update definitions "
                              "(f.update(i).unscheduled())")
        if stage_touched(self._func._schedule, self._stage_index):
            raise HalideError("Error: Stage::unscheduled called on an update definition with a schedule "
                              f"({self.name()} has already been scheduled)")
        self._log("unscheduled")

    def dump_argument_list(self) -> str:
        """The stage's loop variables, innermost first, as Halide lists them in its errors (a loop
        a split, fuse or rename made is named after the loop it came from: `x.xi`)."""
        sched = self._stage()
        halide_names: dict[str, str] = {}  # (a rename's loop is `old.new.renamed` here, `old.new` in Halide)
        for sp in sched.splits:
            old = halide_names.get(sp.old, sp.old)
            made = (sp.outer,) if sp.kind == "rename" else (sp.inner,) if sp.kind == "fuse" else (sp.outer, sp.inner)
            for name in made:
                halide_names[name] = old + name[len(sp.old):].removesuffix(".renamed" if sp.kind == "rename" else "")
        return "Vars:" + "".join(f" {halide_names.get(d.internal, d.internal)}" for d in sched.dims) + " __outermost\n"

    def __repr__(self):
        return f"Stage({self.name()})"


__all__ = ["Func", "FuncRef", "Stage", "Tuple", "Definition", "RDom", "lambda_func"]
