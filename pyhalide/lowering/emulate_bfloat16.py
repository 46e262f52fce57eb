"""bfloat16 arithmetic as Halide computes it on CPUs without it: in float32, each result rounded
to the nearest bfloat16.

A bfloat16 is the upper half of a float32, so the conversions are integer operations: to float32,
the bits shifted up 16; back, rounded to nearest, ties to even, by Halide's formula (add 0x7fff
plus the lowest kept bit, keep the upper half), which is also how pyhalide rounds bfloat16
constants (types.bfloat16_bits), so folded and computed values agree.

Assumes: the Stmt is flattened (Loads, Stores, Allocates; no Provides or Func calls left).

Guarantees: no expression, variable or Allocate of a bfloat type is left. A bfloat16 value is
carried as its bits, a UInt(16) (loaded, stored, selected, passed to extern stages as they are);
arithmetic, Min/Max, compares, absd and math functions of bfloat16 operands are those of
float32 on the converted values, results rounded back (abs is Halide's x >= 0 ? x : 0 - x, which
keeps -0.0); a cast from or to bfloat16 goes through float32
(float64 -> bfloat16 rounds twice, as Halide's); reinterprets to and from 16-bit integers are the
bits; printed and asserted values are shown as float32. The pipeline's arguments keep their
bfloat types (what callers' buffers hold): backends pass them as 16-bit integers. A pipeline
without bfloat values is returned as it is, having walked its statements only.
"""

from __future__ import annotations

from .. import ir
from ..ir_mutator import IRMutator, has_bfloat
from ..types import Float, Int, Type, UInt, bfloat16_bits

_ARITHMETIC = (ir.Add, ir.Sub, ir.Mul, ir.Div, ir.Mod, ir.Min, ir.Max)
_SHOWN = ("print", "print_when", "trace", "require")  # values shown to a person: as float32


def emulate_bfloat16(stmt: ir.Stmt) -> ir.Stmt:
    """The Stmt with bfloat16 computed in float32 (see the module docstring)."""
    return _Statements().mutate(stmt)


def _bits_type(t: Type) -> Type:
    return UInt(16, t.lanes) if t.is_bfloat() else t


def _u32(lanes: int, value: int) -> ir.Expr:
    return ir.make_const(UInt(32, lanes), value)


def to_float32(bits: ir.Expr) -> ir.Expr:
    """float32 of bfloat16 bits (a UInt(16) expression): exact."""
    lanes = bits.type.lanes
    return ir.Reinterpret(Float(32, lanes), ir.Mul(ir.Cast(UInt(32, lanes), bits), _u32(lanes, 0x10000)))


class _Expressions(IRMutator):
    """Rewrites expressions that hold bfloat values; `lets` counts the lets it makes (to name them)."""

    def __init__(self):
        super().__init__()
        self.lets = 0

    def mutate(self, node):
        return node if isinstance(node, ir.Expr) and not has_bfloat(node) else super().mutate(node)

    def from_float32(self, value: ir.Expr) -> ir.Expr:
        """The bfloat16 bits nearest a float32 expression, ties to even."""
        lanes = value.type.lanes
        self.lets += 1
        u = ir.Variable(f"bf16.{self.lets}", UInt(32, lanes))
        upper = ir.Div(u, _u32(lanes, 0x10000))
        rounded = ir.Add(ir.Add(u, _u32(lanes, 0x7FFF)), ir.Mod(upper, _u32(lanes, 2)))
        body = ir.Cast(UInt(16, lanes), ir.Div(rounded, _u32(lanes, 0x10000)))
        return ir.Let(u.name, ir.Reinterpret(UInt(32, lanes), value), body)

    def as_float32(self, e: ir.Expr) -> ir.Expr:
        """e (an original operand) as float32 where it is bfloat16, rewritten."""
        new = self.mutate(e)
        return to_float32(new) if e.type.is_bfloat() else new

    def visit_FloatImm(self, e):
        return ir.IntImm(UInt(16), bfloat16_bits(e.value))

    def visit_Variable(self, e):
        return ir.Variable(e.name, _bits_type(e.type), e.ref)

    def visit_Load(self, e):
        return ir.Load(_bits_type(e.type), e.name, self.mutate(e.index), self.mutate(e.predicate))

    def visit_Cast(self, e):
        value = self.as_float32(e.value)
        if e.type.is_bfloat():
            wide = Float(32, e.type.lanes)
            return self.from_float32(value if value.type == wide else ir.Cast(wide, value))
        return value if value.type == e.type else ir.Cast(e.type, value)

    def visit_Reinterpret(self, e):
        value, t = self.mutate(e.value), _bits_type(e.type)
        return value if value.type == t else ir.Reinterpret(t, value)

    def visit_Ramp(self, e):
        if not e.type.is_bfloat():
            return self.default(e)
        lanes = e.lanes
        wide = Float(32, lanes)
        steps = ir.Cast(wide, ir.Ramp(ir.IntImm(Int(32), 0), ir.IntImm(Int(32), 1), lanes))
        base, stride = (ir.Broadcast(self.as_float32(x), lanes) for x in (e.base, e.stride))
        return self.from_float32(ir.Add(base, ir.Mul(steps, stride)))

    def visit_Call(self, e):
        if e.name == "abs" and e.type.is_bfloat():  # as Halide's: x >= 0 ? x : 0 - x (abs(-0.0) is -0.0)
            self.lets += 1
            x = ir.Variable(f"bf16.{self.lets}", Float(32, e.type.lanes))
            zero = ir.make_const(x.type, 0.0)
            value = ir.Select(ir.GE(x, zero), x, ir.Sub(zero, x))
            return self.from_float32(ir.Let(x.name, self.as_float32(e.args[0]), value))
        if e.name == "absd" and e.type.is_bfloat() or e.call_type == ir.EXTERN and e.type.is_bfloat():
            wide = Float(32, e.type.lanes)
            args = tuple(self.as_float32(a) for a in e.args)
            return self.from_float32(ir.Call(wide, e.name, args, e.call_type))
        if e.call_type == ir.INTRINSIC and e.name in ("is_nan", "is_inf", "is_finite") or e.name in _SHOWN:
            args = tuple(self.as_float32(a) if isinstance(a, ir.Expr) else a for a in e.args)
            if e.type.is_bfloat():  # (the value it returns, one of those shown: back to the same bits)
                shown = ir.Call(Float(32, e.type.lanes), e.name, args, e.call_type, e.value_index, e.func, e.image)
                return self.from_float32(shown)
        else:
            args = tuple(self.mutate(a) if isinstance(a, ir.Expr) else a for a in e.args)
        return ir.Call(_bits_type(e.type), e.name, args, e.call_type, e.value_index, e.func, e.image)


def _binary(rewrite: _Expressions, e: ir.BinaryOp) -> ir.Expr:
    if not e.a.type.is_bfloat():
        return rewrite.default(e)
    a, b = rewrite.as_float32(e.a), rewrite.as_float32(e.b)
    result = type(e)(a, b)
    return rewrite.from_float32(result) if isinstance(e, _ARITHMETIC) else result


for _cls in (*_ARITHMETIC, ir.EQ, ir.NE, ir.LT, ir.LE, ir.GT, ir.GE):
    setattr(_Expressions, "visit_" + _cls.__name__, _binary)


class _Statements(IRMutator):
    """Walks the statements, handing each expression that holds a bfloat value to _Expressions."""

    def __init__(self):
        super().__init__()
        self._expressions = _Expressions()

    def mutate(self, node):
        if isinstance(node, ir.Expr):
            return self._expressions.mutate(node)
        return super().mutate(node)

    def visit_Allocate(self, s):
        extents = tuple(self.mutate(x) for x in s.extents)
        body = self.mutate(s.body)
        if not s.type.is_bfloat() and body is s.body and all(a is b for a, b in zip(extents, s.extents)):
            return s
        return ir.Allocate(s.name, _bits_type(s.type), extents, body, s.memory_type)

    def visit_AssertStmt(self, s):
        condition = self.mutate(s.condition)
        args = tuple(self._expressions.as_float32(a) for a in s.args)
        if condition is s.condition and all(a is b for a, b in zip(args, s.args)):
            return s
        return ir.AssertStmt(condition, s.message, args)
