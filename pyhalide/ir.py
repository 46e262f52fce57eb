"""The IR: small immutable Expr and Stmt nodes, checked where they are built.

New operations are `Call` intrinsics, not new node types. Loop flavours are a field of `For`.
Fields listed in a class's `_children` hold sub-nodes (or tuples of them); generic traversal
(`ir_mutator.py`) uses that list, so passes only override the nodes they care about.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import InternalError
from .types import Bool, Int, Type, rounded


class Node:
    __slots__ = ()
    _children: tuple[str, ...] = ()


class Expr(Node):
    """An expression node. Besides its fields it has three cache slots, empty until asked for:
    `_simplified` (its simplified form, see simplify), `_summary` (what it uses, see
    ir_mutator.expr_summary) and `_hash` (see _node). They follow from the fields, are not part of
    equality, hashing or the printed form, and are not pickled or copied (a restored node works
    them out again)."""

    __slots__ = ("_simplified", "_summary", "_hash")
    type: Type


class Stmt(Node):
    """A statement node; its cache slots `_touched` and `_free` (see ir_mutator.touched_names and
    free_variables) are like those of Expr."""

    __slots__ = ("_touched", "_free", "_hash")


def _fail(message: str):
    """Malformed IR is pyhalide's bug: the front end checks what users write before building it.

    Constructors test their condition inline and only then format the message (nodes are built
    millions of times while lowering; formatting types eagerly dominated the cost of building)."""
    raise InternalError(message)


_dataclass = dataclass(frozen=True, slots=True)


def _node(cls):
    """An IR node class: a frozen dataclass with slots. Its hash is worked out once and kept: the
    dataclass's own hashes every field again, down the whole tree, on each call, and a tree that
    shares subtrees (lets substituted) is exponential that way (hashing was most of interpolate's
    sliding window pass). For a node whose type is derived from its operands (and kept in a slot
    that is not a field), unpickling and copying, which restore the fields only, work the type out
    again."""
    cls = _dataclass(cls)
    fields_hash = cls.__hash__

    def __hash__(self):
        try:
            return self._hash
        except AttributeError:
            h = fields_hash(self)
            object.__setattr__(self, "_hash", h)
            return h

    cls.__hash__ = __hash__
    if hasattr(cls, "_derive_type"):
        restore_fields = cls.__setstate__

        def __setstate__(self, state):
            restore_fields(self, state)
            object.__setattr__(self, "type", self._derive_type())

        cls.__setstate__ = __setstate__
    return cls


_INT32 = Int(32)
_BOOL = Bool()


# ---------------------------------------------------------------- constants
@_node
class IntImm(Expr):
    """An integer, unsigned or boolean constant, stored already wrapped to its type."""

    type: Type
    value: int

    def __post_init__(self):
        t = self.type
        if not (t.code == "int" or t.code == "uint") or t.lanes != 1:
            _fail(f"IntImm of type {t}")


@_node
class FloatImm(Expr):
    """A float constant, stored already rounded to its type (a Float(32) 0.1 is the float nearest
    0.1, so constant folding gives what the hardware would)."""

    type: Type
    value: float

    def __post_init__(self):
        if not (self.type.is_float() and self.type.is_scalar()):
            _fail(f"FloatImm of type {self.type}")
        if self.type.bits < 64:
            object.__setattr__(self, "value", rounded(self.type, self.value))


@_node
class StringImm(Expr):
    value: str

    @property
    def type(self) -> Type:
        return Type("handle", 64)


def wrap_int(t: Type, value: int) -> int:
    """Wrap a Python int to the range of integer type t (two's complement; a bool keeps the lowest
    bit, as Halide's 1-bit arithmetic: true + true is false)."""
    if t.is_bool():
        return int(value) & 1
    mask = (1 << t.bits) - 1
    value &= mask
    if t.is_int() and value >> (t.bits - 1):
        value -= 1 << t.bits
    return value


def make_const(t: Type, value) -> Expr:
    """A constant of type t (broadcast if t is a vector), wrapping integers to the type."""
    scalar_t = t.element_of()
    if scalar_t.is_float():
        e: Expr = FloatImm(scalar_t, float(value))
    else:
        e = IntImm(scalar_t, wrap_int(scalar_t, int(value)))
    return e if t.lanes == 1 else Broadcast(e, t.lanes)


def const_int(e: Expr) -> int | None:
    """The value of an integer constant (or broadcast of one), else None."""
    if type(e) is Broadcast:
        e = e.value
    if type(e) is IntImm:
        return e.value
    return None


def const_value(e: Expr):
    """The value of a constant (or broadcast of one), else None. (Asked of nearly every node the
    simplifier sees, hence exact class tests: node classes are not subclassed.)"""
    cls = type(e)
    if cls is Broadcast:
        e = e.value
        cls = type(e)
    if cls is IntImm or cls is FloatImm:
        return e.value
    return None


def is_const(e: Expr, value=None) -> bool:
    v = const_value(e)
    return v is not None and (value is None or v == value)


# ---------------------------------------------------------------- variables and casts
@_node
class Variable(Expr):
    """A named value: a loop variable, a let, a Param or a buffer field such as `b.min.0`.

    `ref` points at the user's Param, or the RDom of an RVar (not part of equality).
    """

    name: str
    type: Type = Int(32)
    ref: Any = field(default=None, compare=False)


@_node
class Cast(Expr):
    type: Type
    value: Expr
    _children = ("value",)

    def __post_init__(self):
        if self.type.lanes != self.value.type.lanes:
            _fail(f"Cast {self.value.type} to {self.type}")


@_node
class Reinterpret(Expr):
    type: Type
    value: Expr
    _children = ("value",)

    def __post_init__(self):
        if self.type.bits * self.type.lanes != self.value.type.bits * self.value.type.lanes:
            _fail(f"reinterpret {self.value.type} as {self.type}: sizes differ")


# ---------------------------------------------------------------- arithmetic and logic
class _DerivedType(Expr):
    """An Expr whose type follows from its operands: worked out once, when the node is built,
    and kept in the slot `type` (which is not a dataclass field, so equality, hashing and the
    printed form are unchanged). Asked for again at every level, the type of a chain of
    arithmetic walked down the whole chain each time; a slot is also the cheapest attribute."""

    __slots__ = ("type",)

    def _derive_type(self) -> Type:
        raise NotImplementedError


class BinaryOp(_DerivedType):
    __slots__ = ()
    _children = ("a", "b")
    symbol = "?"

    def __post_init__(self):
        ta, tb = self.a.type, self.b.type
        if ta is not tb and ta != tb:
            _fail(f"{type(self).__name__} of mismatched types {ta} and {tb}")
        object.__setattr__(self, "type", self._result_type(ta))

    @staticmethod
    def _result_type(operand_type: Type) -> Type:
        return operand_type

    def _derive_type(self) -> Type:
        return self._result_type(self.a.type)


def _binop(name: str, symbol: str):
    cls = type(name, (BinaryOp,), {"__annotations__": {"a": Expr, "b": Expr}, "symbol": symbol})
    cls.__module__ = __name__
    return _node(cls)


Add = _binop("Add", "+")
Sub = _binop("Sub", "-")
Mul = _binop("Mul", "*")
Div = _binop("Div", "/")
Mod = _binop("Mod", "%")
Min = _binop("Min", "min")
Max = _binop("Max", "max")


class CompareOp(BinaryOp):
    __slots__ = ()

    @staticmethod
    def _result_type(operand_type: Type) -> Type:
        return _BOOL if operand_type.lanes == 1 else Bool(operand_type.lanes)


def _cmpop(name: str, symbol: str):
    cls = type(name, (CompareOp,), {"__annotations__": {"a": Expr, "b": Expr}, "symbol": symbol})
    cls.__module__ = __name__
    return _node(cls)


EQ = _cmpop("EQ", "==")
NE = _cmpop("NE", "!=")
LT = _cmpop("LT", "<")
LE = _cmpop("LE", "<=")
GT = _cmpop("GT", ">")
GE = _cmpop("GE", ">=")


class LogicalOp(BinaryOp):
    __slots__ = ()

    def __post_init__(self):
        BinaryOp.__post_init__(self)
        if not self.type.is_bool():
            _fail(f"{type(self).__name__} of non-boolean {self.type}")


def _logop(name: str, symbol: str):
    cls = type(name, (LogicalOp,), {"__annotations__": {"a": Expr, "b": Expr}, "symbol": symbol})
    cls.__module__ = __name__
    return _node(cls)


And = _logop("And", "&&")
Or = _logop("Or", "||")


@_node
class Not(_DerivedType):
    a: Expr
    _children = ("a",)

    def __post_init__(self):
        if not self.a.type.is_bool():
            _fail(f"Not of non-boolean {self.a.type}")
        object.__setattr__(self, "type", self.a.type)

    def _derive_type(self) -> Type:
        return self.a.type


@_node
class Select(_DerivedType):
    condition: Expr
    true_value: Expr
    false_value: Expr
    _children = ("condition", "true_value", "false_value")

    def __post_init__(self):
        ct, t = self.condition.type, self.true_value.type
        if not ct.is_bool():
            _fail(f"Select condition of type {ct}")
        if t != self.false_value.type:
            _fail(f"Select of mismatched types {t} and {self.false_value.type}")
        if ct.lanes != 1 and ct.lanes != t.lanes:
            _fail("Select condition lanes do not match")
        object.__setattr__(self, "type", t)

    def _derive_type(self) -> Type:
        return self.true_value.type


# ---------------------------------------------------------------- memory and vectors
@_node
class Load(Expr):
    """Load from a flat buffer `name` at an element index (Int(32), vector for vector loads)."""

    type: Type
    name: str
    index: Expr
    predicate: Expr | None = None
    _children = ("index", "predicate")

    def __post_init__(self):
        if self.index.type.lanes != self.type.lanes:
            _fail(f"Load {self.name}: index lanes differ")


@_node
class Ramp(_DerivedType):
    base: Expr
    stride: Expr
    lanes: int
    _children = ("base", "stride")

    def __post_init__(self):
        if not (self.base.type == self.stride.type and self.base.type.is_scalar()):
            _fail("bad Ramp")
        object.__setattr__(self, "type", self._derive_type())

    def _derive_type(self) -> Type:
        return self.base.type.with_lanes(self.lanes * self.base.type.lanes)


@_node
class Broadcast(_DerivedType):
    value: Expr
    lanes: int
    _children = ("value",)

    def __post_init__(self):
        if not self.value.type.is_scalar():
            _fail("Broadcast of a vector")
        object.__setattr__(self, "type", self._derive_type())

    def _derive_type(self) -> Type:
        return self.value.type.with_lanes(self.lanes)


# Call kinds
HALIDE = "halide"  # a call to a Func; `func` holds it
IMAGE = "image"  # a read of an input Buffer or ImageParam; `image` holds it
INTRINSIC = "intrinsic"  # an operation pyhalide defines (bitwise ops, abs, likely, ...)
EXTERN = "extern"  # a C math function (sqrt, exp, ...), resolved by codegen

# Intrinsics of extern stages (pyhalide/extern.py) with effects: computed where they are, never
# copied or moved (ir_mutator.calls_out)
MAKE_BUFFER = "make_buffer"  # (id, buffer name or "", code, bits, dims, offset, min/extent/stride per dim)
BUFFER_FIELD = "buffer_field"  # (buffer, dimension, "min" or "extent", the call it follows)
CALL_EXTERN = "call_extern"  # (name, "query" or "compute", args...): the call, its result checked
CALLS_OUT = frozenset((MAKE_BUFFER, BUFFER_FIELD, CALL_EXTERN))


@_node
class Call(Expr):
    type: Type
    name: str
    args: tuple
    call_type: str
    value_index: int = 0
    func: Any = field(default=None, compare=False)
    image: Any = field(default=None, compare=False)
    _children = ("args",)


@_node
class Let(_DerivedType):
    name: str
    value: Expr
    body: Expr
    _children = ("value", "body")

    def __post_init__(self):
        object.__setattr__(self, "type", self.body.type)

    def _derive_type(self) -> Type:
        return self.body.type


# ---------------------------------------------------------------- statements
@_node
class LetStmt(Stmt):
    name: str
    value: Expr
    body: Stmt
    _children = ("value", "body")


@_node
class AssertStmt(Stmt):
    """Fail the pipeline with `message.format(*values of args)` when condition is false."""

    condition: Expr
    message: str
    args: tuple = ()
    _children = ("condition", "args")


@_node
class ProducerConsumer(Stmt):
    name: str
    is_producer: bool
    body: Stmt
    _children = ("body",)


SERIAL, PARALLEL, VECTORIZED, UNROLLED = "serial", "parallel", "vectorized", "unrolled"
GPU_BLOCK, GPU_THREAD, GPU_LANE = "gpu_block", "gpu_thread", "gpu_lane"  # a kernel's grid, block, warp lanes
FOR_TYPES = (SERIAL, PARALLEL, VECTORIZED, UNROLLED, GPU_BLOCK, GPU_THREAD, GPU_LANE)
# loops whose iterations run at once (Halide's is_parallel): storage outside one, written inside, races
CONCURRENT = (PARALLEL, VECTORIZED, GPU_BLOCK, GPU_THREAD, GPU_LANE)

# Where an allocation lives (the names of Halide's MemoryType)
MEMORY_TYPES = ("Auto", "Heap", "Stack", "Register", "GPUShared", "GPUTexture", "LockedCache", "VTCM", "AMXTile")


@_node
class For(Stmt):
    name: str
    min: Expr
    extent: Expr
    for_type: str
    body: Stmt
    _children = ("min", "extent", "body")

    def __post_init__(self):
        if not (self.min.type == _INT32 and self.extent.type == _INT32):
            _fail(f"For {self.name}: bounds not int32")
        if self.for_type not in FOR_TYPES:
            _fail(f"For {self.name}: unknown loop kind {self.for_type}")


@_node
class Store(Stmt):
    name: str
    value: Expr
    index: Expr
    predicate: Expr | None = None
    _children = ("value", "index", "predicate")


@_node
class Provide(Stmt):
    """Write a (tuple) value to a Func at multi-dimensional coordinates, before flattening."""

    name: str
    values: tuple
    args: tuple
    func: Any = field(default=None, compare=False)
    _children = ("values", "args")


@_node
class Atomic(Stmt):
    """The Stores in body are read-modify-writes that other threads may race with. A single Store
    runs as an atomic compare-and-swap, with the value it replaces named by `old` in the stored
    value; several (a scatter's, with the lets that read their values) run under a lock."""

    old: str
    body: Stmt
    _children = ("body",)


@_node
class Allocate(Stmt):
    name: str
    type: Type
    extents: tuple
    body: Stmt
    memory_type: str = "Auto"
    _children = ("extents", "body")

    def __post_init__(self):
        if self.memory_type not in MEMORY_TYPES:
            _fail(f"Allocate {self.name}: unknown memory type {self.memory_type}")


@_node
class Realize(Stmt):
    """Storage for a Func over `bounds` (a tuple of (min, extent) pairs), before flattening.

    A dimension with a fold factor F keeps only F coordinates, at `coordinate mod F`.
    """

    name: str
    types: tuple
    bounds: tuple
    body: Stmt
    func: Any = field(default=None, compare=False)
    folds: tuple = ()  # per dimension, a storage fold factor (0: not folded)
    _children = ("bounds", "body")


@_node
class Block(Stmt):
    stmts: tuple
    _children = ("stmts",)


@_node
class IfThenElse(Stmt):
    condition: Expr
    then_case: Stmt
    else_case: Stmt | None = None
    _children = ("condition", "then_case", "else_case")


@_node
class Evaluate(Stmt):
    value: Expr
    _children = ("value",)


@_node
class Free(Stmt):
    """Nothing after this statement uses the storage of the Allocate `name` around it (Halide's
    Free): placed just before LLVM code generation (codegen/stack_reuse.py), which gives a stack
    slot freed here to a later allocation of the same type."""

    name: str
    _children = ()


def make_block(stmts) -> Stmt:
    """A Block of the given statements, flattening nested Blocks and dropping no-ops."""
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, Block):
            flat.extend(s.stmts)
        elif isinstance(s, Evaluate) and isinstance(s.value, IntImm):
            continue
        else:
            flat.append(s)
    if not flat:
        return Evaluate(IntImm(Int(32), 0))
    if len(flat) == 1:
        return flat[0]
    return Block(tuple(flat))


def is_no_op(s: Stmt) -> bool:
    return isinstance(s, Evaluate) and isinstance(s.value, IntImm)
