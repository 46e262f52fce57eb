"""Func: pure and update definitions, the references `f[x, y]` that build Calls, and Stages."""

from __future__ import annotations

import operator
from dataclasses import dataclass

from . import ir
from .deep_recursion import deep
from .errors import HalideError
from .expr import Expr, cast_ir, coerce_python, to_ir, wrap
from .ir_mutator import IRVisitor
from .names import unique_name
from .schedule import FuncSchedule
from .scheduling import FuncScheduling, Schedulable
from .types import Int, Type
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


_PYTHON_OPS = {ir.Add: operator.add, ir.Sub: operator.sub, ir.Mul: operator.mul, ir.Div: operator.truediv}


def _is_sequence(value) -> bool:
    """A list, tuple, or any object with __len__ and __getitem__ that is not an Expr or Buffer."""
    if isinstance(value, list | tuple):
        return True
    from .buffer import Buffer

    return (not isinstance(value, Expr | Buffer | int | float | bool) and hasattr(value, "__len__")
            and hasattr(value, "__getitem__") and not hasattr(value, "_as_expr"))


class _UpdateOp:
    """What `f[x] += e` hands to Func.__setitem__: the operator and right-hand side."""

    def __init__(self, ref: FuncRef, op, identity: int, rhs):
        self.ref, self.op, self.identity, self.rhs = ref, op, identity, rhs


class FuncRef(Expr):
    """`f[args]`: a call when read, the left-hand side when assigned. Index `[i]` for Tuple parts."""

    __slots__ = ("_func", "_args", "_index")

    def __init__(self, func: Func, args: tuple, index: int | None = None):
        self._func, self._args, self._index = func, args, index
        self._ir = None

    def ir(self) -> ir.Expr:
        if self._ir is None:
            f = self._func
            if not f.defined() and f._declared_types is None:
                raise HalideError(f"Func {f.name()} is called but has not been defined")
            types = f.types()
            if len(self._args) != f.dimensions():
                raise HalideError(
                    f"Func {f.name()} was called with {len(self._args)} arguments, "
                    f"but was defined with {f.dimensions()}"
                )
            if self._index is None and len(types) != 1:
                raise HalideError(
                    f"Func {f.name()} returns a Tuple of {len(types)} values; select one with f[...][i]"
                )
            i = self._index or 0
            if not 0 <= i < len(types):
                raise HalideError(f"Tuple index {i} out of range for Func {f.name()} with {len(types)} values")
            ir_args = tuple(_call_arg(f.name(), k, a) for k, a in enumerate(self._args))
            self._ir = ir.Call(types[i], f.name(), ir_args, ir.HALIDE, value_index=i, func=f)
        return self._ir

    def defined(self) -> bool:
        return True

    def __getitem__(self, i: int) -> FuncRef:
        if not isinstance(i, int):
            raise HalideError("A Func reference can only be indexed by an int (to pick a Tuple element)")
        return FuncTupleElementRef(self._func, self._args, i)

    def function(self) -> Func:
        return self._func

    def __iadd__(self, rhs):
        return _UpdateOp(self, ir.Add, 0, rhs)

    def __isub__(self, rhs):
        return _UpdateOp(self, ir.Sub, 0, rhs)

    def __imul__(self, rhs):
        return _UpdateOp(self, ir.Mul, 1, rhs)

    def __itruediv__(self, rhs):
        return _UpdateOp(self, ir.Div, 1, rhs)



class FuncTupleElementRef(FuncRef):
    """`f[x, y][i]`: one element of a Tuple-valued Func's call (Halide's FuncTupleElementRef)."""

    __slots__ = ()

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


class Func(FuncScheduling):
    """A function over an infinite integer domain, defined once purely and then by updates."""

    def __init__(self, *args):
        name, declared = None, None
        if args and isinstance(args[0], Type | list) and not isinstance(args[0], str):
            types = args[0] if isinstance(args[0], list) else [args[0]]
            dims = args[1] if len(args) > 1 else None
            name = args[2] if len(args) > 2 else None
            declared = (tuple(types), dims)
        elif args and isinstance(args[0], str):
            name = args[0]
        self._name = name or unique_name("f")
        self._pure_args: tuple[str, ...] | None = None
        self._init: Definition | None = None
        self._updates: list[Definition] = []
        self._schedule = FuncSchedule()
        self._declared_types = declared
        self._estimates: dict[str, tuple[int, int]] = {}  # pure Var name -> (min, extent); not schedule
        self._version = 0
        if args and (isinstance(args[0], Expr) or isinstance(args[0], int | float)):
            self[()] = args[0]

    # --- queries, as in Halide's Python bindings ---
    def name(self) -> str:
        return self._name

    def defined(self) -> bool:
        return self._init is not None

    def _require_defined(self):
        if self._init is None:
            raise HalideError(f"Func {self._name} has not been defined")

    def dimensions(self) -> int:
        if self._init is None and self._declared_types is not None and self._declared_types[1] is not None:
            return self._declared_types[1]
        self._require_defined()
        return len(self._pure_args)

    def args(self) -> list[Var]:
        self._require_defined()
        return [Var(n) for n in self._pure_args]

    def types(self) -> list[Type]:
        if self._init is None and self._declared_types is not None:
            return list(self._declared_types[0])
        self._require_defined()
        return [v.type for v in self._init.values]

    output_types = types

    def type(self) -> Type:
        ts = self.types()
        if len(ts) != 1:
            raise HalideError(f"Func {self._name} returns a Tuple; use types()")
        return ts[0]

    def outputs(self) -> int:
        return len(self.types())

    def value(self) -> Expr:
        self._require_defined()
        return wrap(self._init.values[0])

    def values(self) -> list[Expr]:
        self._require_defined()
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

    def _update(self, i: int) -> Definition:
        if not 0 <= i < len(self._updates):
            raise HalideError(f"Func {self._name} has {len(self._updates)} update definitions; no update {i}")
        return self._updates[i]

    def _scheduled_update(self, i: int) -> Definition:
        self._update(i)
        return self._schedule.rfactored.get(i + 1, self._updates[i])

    def definitions(self) -> list[Definition]:
        """The algorithm: the pure definition followed by the updates, as the user wrote them."""
        self._require_defined()
        return [self._init, *self._updates]

    def scheduled_definitions(self) -> list[Definition]:
        """The definitions the schedule computes: the algorithm's, with each update that rfactor
        split reducing its intermediate Func instead (as Halide's Func shows after rfactor)."""
        self._require_defined()
        done = self._schedule.rfactored
        return [self._init, *(done.get(k + 1, d) for k, d in enumerate(self._updates))]

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

    def __repr__(self):
        return f"<halide.Func '{self._name}'>"  # as Halide's bindings print it

    def __hash__(self):
        return id(self)

    # --- definitions ---
    def __getitem__(self, key) -> FuncRef:
        dims = self.dimensions() if self.defined() or self._declared_types is not None else -1
        args = _key_to_args(self._name, key, _implicit_count(dims, key) if dims >= 0 else None)
        for i, a in enumerate(args):
            _call_arg(self._name, i, a)  # type errors surface where the call is written
        return FuncRef(self, args)

    @deep
    def __setitem__(self, key, value):
        values = value if _is_sequence(value) else [value]
        used = 0 if isinstance(value, _UpdateOp) else _implicit_vars_used(
            v for v in values if isinstance(v, Expr) or hasattr(v, "_as_expr"))
        args = _key_to_args(self._name, key, used)
        if used and not any(isinstance(a, Var) and a.is_implicit() for a in args):
            args = (*args, *(Var.implicit(k) for k in range(used)))  # no hl._ written: at the end, as Halide
        if isinstance(value, _UpdateOp):
            self._define_reduction_op(args, value)
            return
        if _is_sequence(value):  # a Tuple: any Python sequence, as in Halide's bindings
            values = tuple(value[i] for i in range(len(value)))
            if not values:
                raise HalideError(f"Func {self._name}: empty Tuple")
        else:
            values = (value,)
        if self._init is None:
            self._define_pure(args, values)
        else:
            self._define_update(args, values)
        self._version += 1

    def _define_pure(self, args: tuple, values: tuple):
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
        ir_values = []
        for k, v in enumerate(values):
            if isinstance(v, Expr) and not v.defined():
                raise HalideError(f"In pure definition of Func {self._name}: value {k} is undefined")
            e = to_ir(v)
            if self._declared_types is not None and len(self._declared_types[0]) == len(values):
                want = self._declared_types[0][k]
                if not isinstance(v, Expr):
                    e = coerce_python(v, want)
                if e.type != want:
                    raise HalideError(
                        f"Func {self._name} was declared with type {want} but defined with type {e.type}"
                    )
            if e.type.lanes != 1 or e.type.is_handle():
                raise HalideError(f"Func {self._name}: value {k} has type {e.type}, which a Func cannot hold")
            ir_values.append(e)
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
        self._init = Definition(tuple(ir.Variable(n) for n in names), tuple(ir_values))
        self._schedule.reset_stages(1)

    def _define_update(self, args: tuple, values: tuple):
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
        ir_values = []
        for k, (v, t) in enumerate(zip(values, types)):
            e = coerce_python(v, t) if not isinstance(v, Expr) and not hasattr(v, "_as_expr") else to_ir(v)
            if e.type != t:
                raise HalideError(
                    f"{where}: value {k} has type {e.type} but the pure definition has type {t}"
                )
            ir_values.append(e)
        ir_args = tuple(_call_arg(self._name, i, a) for i, a in enumerate(args))
        # Pure Vars must appear unadorned, in the same position as in the pure definition.
        lhs_pure = {}
        for i, a in enumerate(ir_args):
            if isinstance(a, ir.Variable) and a.ref is None and a.name in self._pure_args:
                if self._pure_args[i] != a.name:
                    raise HalideError(
                        f"{where}: pure Var {a.name} appears in position {i} but is argument "
                        f"{self._pure_args.index(a.name)} of the pure definition"
                    )
                lhs_pure[a.name] = i
        finder = _FindVariables()
        for e in (*ir_args, *ir_values):
            finder.visit(e)
        for name in finder.pure:
            if name not in lhs_pure:
                if name in self._pure_args:
                    raise HalideError(
                        f"{where}: pure Var {name} must appear unadorned in position "
                        f"{self._pure_args.index(name)} of the left-hand side"
                    )
                raise HalideError(f"{where}: undefined variable {name}")
        self._check_self_references(where, ir_args, ir_values, lhs_pure)
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
        self._updates.append(Definition(ir_args, tuple(ir_values), tuple(rvars), predicate))
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

    def _define_reduction_op(self, args: tuple, op: _UpdateOp):
        if op.ref._func is not self:
            raise HalideError(f"Func {self._name}: in-place update of a different Func")
        rhs = op.rhs
        if self._init is None:
            rhs_ir = to_ir(rhs)
            pure = tuple(Var.implicit(i) for i in range(len(args)))
            self._define_pure(pure, (ir.make_const(rhs_ir.type, op.identity),))
        t = self.types()
        if len(t) != 1:
            raise HalideError(f"Func {self._name}: += and friends need a single-valued Func")
        current = self[args]
        # As Halide: f(x) op e with the usual type rules (int32 += uint8 is int32), then the
        # result must have the Func's type (uint8 += int32 is an error, not a silent narrowing).
        value = to_ir(_PYTHON_OPS[op.op](wrap(current.ir()), rhs))
        if value.type != t[0]:
            raise HalideError(
                f"In update definition {len(self._updates)} of Func {self._name}: Tuple element 0 of update "
                f"definition has type {value.type}, but pure definition has type {t[0]}"
            )
        self._define_update(args, (wrap(value),))
        self._version += 1

    def _lowering_copy(self, name: str, schedule: FuncSchedule) -> Func:
        """A private Func for lowering to work on: same shape, the given name and schedule; its
        definitions are filled in by the caller (they must call other copies)."""
        c = object.__new__(Func)
        c._name, c._pure_args, c._declared_types = name, self._pure_args, self._declared_types
        c._init, c._updates, c._schedule, c._version = None, [], schedule, 0
        c._estimates = {}  # estimates are not carried: lowering never reads them
        c._trace = self._trace
        return c

    # --- tracing (Halide's trace_stores/loads/realizations): events printed as the pipeline runs ---
    _trace = frozenset()

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

    def compile_to_llvm_assembly(self, filename: str, arguments=None, fn_name=None, target=None):
        self._pipeline().compile_to_llvm_assembly(filename, arguments, fn_name, target)

    def compile_to_assembly(self, filename: str, arguments=None, fn_name=None, target=None):
        self._pipeline().compile_to_assembly(filename, arguments, fn_name, target)

    def compile_to_cuda(self, filename: str, arguments=None, fn_name=None, target=None):
        self._pipeline().compile_to_cuda(filename, arguments, fn_name, target)


class Stage(Schedulable):
    """One definition of a Func, for scheduling its loops (`f.update(0).vectorize(x)`)."""

    def __init__(self, func: Func, index: int):
        self._func, self._stage_index = func, index

    def _target_func(self):
        return self._func

    def name(self) -> str:
        return f"{self._func.name()}.s{self._stage_index}"

    def __repr__(self):
        return f"Stage({self.name()})"


__all__ = ["Func", "FuncRef", "Stage", "Tuple", "Definition", "RDom"]
