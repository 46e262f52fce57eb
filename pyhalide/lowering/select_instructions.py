"""Instruction selection for the host CPU: operations x86 does in one instruction that LLVM does
not find in the IR pyhalide writes, made explicit as calls the LLVM code generator maps to them.

- Sums of 16-bit products: camera_pipe's colour matrix, `i32(m0)*i32(r) + i32(m1)*i32(g) +
  i32(m2)*i32(b) + i32(m3)`, widens every 16-bit operand and multiplies in 32-bit lanes
  (`vpmulld`). x86 multiplies 16-bit lanes pairwise and adds each pair into a 32-bit lane in one
  instruction (`pmaddwd`: lane i of a*b + c*d), and with VNNI adds that into an accumulator too
  (`vpdpwssd`, which LLVM selects for an add of a `pmaddwd`). Halide's x86 back end matches the
  same sums.
- Saturating adds and subtracts of 8- and 16-bit vectors (Halide's `saturating_add` /
  `saturating_sub`, or a clamp of a widened sum written out): widened, clamped and narrowed, they
  take nine instructions where `vpaddusb` and its kin take one.
(Averages and absolute differences need nothing here: LLVM finds `vpavgb` and `vpminub` /
`vpmaxub` / `vpsubb` in the IR as it is.)

Assumes: the Stmt is the one compiled for the host CPU (lowered to the last pass; GPU kernels
already moved out): nothing simplifies it afterwards. Guarantees:
- each Int32 vector sum (of at least 4 lanes, a multiple of 4) holding two or more products whose
  factors are exactly 16-bit values (widened Int16, Int8 or UInt8, or constants that fit) has its
  products paired into `dot_product_i16(a, b, c, d)` calls (lane i: a[i]*b[i] + c[i]*d[i] in 32
  bits, arguments Int16); a product left without a partner is paired with a 16-bit term of the sum
  (as `term * 1`) if there is one. The rest of the sum is added as it was. Two's-complement
  addition is associative, and the pairwise sum of two 16-bit products wraps as the 32-bit add
  does, so results are bit-exact;
- each narrowing cast to an 8- or 16-bit integer vector type T of a widened `a + b` or `a - b` (a
  and b of type T) clamped so that it equals the clamp to T's range is a `saturating_add(a, b)` /
  `saturating_sub(a, b)` call of type T.
"""

from __future__ import annotations

from .. import ir
from ..ir_mutator import IRMutator
from ..types import Type

DOT_PRODUCT_I16 = "dot_product_i16"
SATURATING_ADD = "saturating_add"
SATURATING_SUB = "saturating_sub"

_I16 = ir.Int(16)
_I16_RANGE = range(-(1 << 15), 1 << 15)


def select_instructions(stmt: ir.Stmt) -> ir.Stmt:
    """The Stmt with dot products and saturating arithmetic made explicit (see the module docstring)."""
    return _SelectInstructions().mutate(stmt)


def _as_int16(e: ir.Expr) -> ir.Expr | None:
    """e (Int32, scalar or vector) as an Int16 expression of the same value, if it is one by
    construction: a widening cast of 16 or fewer bits, a constant in range, a broadcast of one."""
    if isinstance(e, ir.Cast):
        src = e.value.type
        if src.code == "int" and src.bits == 16:
            return e.value
        if src.code in ("int", "uint") and src.bits == 8:
            return ir.Cast(_I16.with_lanes(src.lanes), e.value)
        return None
    if isinstance(e, ir.Broadcast):
        scalar = _as_int16(e.value)
        return None if scalar is None else ir.Broadcast(scalar, e.lanes)
    if isinstance(e, ir.IntImm) and e.value in _I16_RANGE:
        return ir.make_const(_I16, e.value)
    return None


def _factors(term: ir.Expr) -> tuple[ir.Expr, ir.Expr] | None:
    """A product term as its two Int16 factors, if both are exactly 16-bit."""
    if not isinstance(term, ir.Mul):
        return None
    a, b = _as_int16(term.a), _as_int16(term.b)
    return None if a is None or b is None else (a, b)


def _terms(e: ir.Expr, out: list) -> list:
    """The summands of a tree of Adds, left to right."""
    stack = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, ir.Add):
            stack.append(node.b)
            stack.append(node.a)
        else:
            out.append(node)
    return out


def _pairs_well(t: Type) -> bool:
    return t.code == "int" and t.bits == 32 and t.lanes >= 4 and t.lanes % 4 == 0


class _SelectInstructions(IRMutator):
    def __init__(self):
        super().__init__()
        self.memo: dict[int, tuple[ir.Expr, ir.Expr]] = {}  # id -> (node, rewritten): DAGs once each

    def visit_Add(self, e: ir.Add) -> ir.Expr:
        hit = self.memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        result = self._rewrite_sum(e) if _pairs_well(e.type) else None
        if result is None:
            result = self.default(e)
        self.memo[id(e)] = (e, result)
        return result

    def visit_Cast(self, e: ir.Cast) -> ir.Expr:
        found = _saturating(e)
        if found is None:
            return self.default(e)
        name, a, b = found
        return ir.Call(e.type, name, (self.mutate(a), self.mutate(b)), ir.INTRINSIC)

    def _rewrite_sum(self, e: ir.Add) -> ir.Expr | None:
        """None (the Add is mutated as usual) unless the sum holds two products to pair; the
        terms are looked at as written and mutated only once they are kept."""
        terms = _terms(e, [])
        products = [(i, f) for i, t in enumerate(terms) if (f := _factors(t)) is not None]
        if len(products) < 2:
            return None
        terms = [self.mutate(t) for t in terms]
        products = [(i, tuple(self.mutate(x) for x in f)) for i, f in products]
        used: set[int] = set()
        dots = []
        for (i, (a, b)), (j, (c, d)) in zip(products[::2], products[1::2], strict=False):
            dots.append(_dot(a, b, c, d))
            used |= {i, j}
        if len(products) % 2:
            i, (a, b) = products[-1]
            partner = next((j for j, t in enumerate(terms) if j not in used and j != i
                            and _as_int16(t) is not None), None)
            if partner is not None:
                one = ir.Broadcast(ir.make_const(_I16, 1), e.type.lanes)
                dots.append(_dot(a, b, _as_int16(terms[partner]), one))
                used |= {i, partner}
        total = dots[0]
        for other in dots[1:] + [t for j, t in enumerate(terms) if j not in used]:
            total = ir.Add(total, other)
        return total


def _dot(a: ir.Expr, b: ir.Expr, c: ir.Expr, d: ir.Expr) -> ir.Expr:
    return ir.Call(ir.Int(32).with_lanes(a.type.lanes), DOT_PRODUCT_I16, (a, b, c, d), ir.INTRINSIC)


def _clamp_bounds(e: ir.Expr) -> tuple[ir.Expr, int | None, int | None]:
    """e as clamp(x, lo, hi): x and the constant bounds (None where there is none)."""
    lo = hi = None
    while True:
        if isinstance(e, ir.Max) and lo is None and (c := ir.const_int(e.b)) is not None:
            lo, e = c, e.a
        elif isinstance(e, ir.Min) and hi is None and (c := ir.const_int(e.b)) is not None:
            hi, e = c, e.a
        else:
            return e, lo, hi


def _narrow_operand(e: ir.Expr, t: Type) -> ir.Expr | None:
    return e.value if isinstance(e, ir.Cast) and e.value.type == t else None


def _saturating(e: ir.Cast) -> tuple[str, ir.Expr, ir.Expr] | None:
    """(intrinsic, a, b) if e is cast(T, clamp(W(a) +/- W(b), lo, hi)) and equals a saturating op."""
    t = e.type
    if t.lanes < 2 or t.bits not in (8, 16) or not (t.is_int() or t.is_uint()) or t.is_bool():
        return None
    x, lo, hi = _clamp_bounds(e.value)
    w = x.type
    if not isinstance(x, ir.Add | ir.Sub) or not (w.is_int() or w.is_uint()) or w.bits <= t.bits:
        return None
    a, b = _narrow_operand(x.a, t), _narrow_operand(x.b, t)
    if a is None or b is None:
        return None
    tmin, tmax = t.min_value(), t.max_value()
    if isinstance(x, ir.Add):
        xmin, xmax, name = 2 * tmin, 2 * tmax, SATURATING_ADD
    else:
        xmin, xmax, name = tmin - tmax, tmax - tmin, SATURATING_SUB
    if not (w.min_value() <= xmin and xmax <= w.max_value()):  # the wide op itself wraps
        return None
    # clamp(x, lo, hi) must equal clamp(x, tmin, tmax) for every x in [xmin, xmax].
    low_ok = lo == tmin if xmin < tmin else lo is None or lo <= xmin
    high_ok = hi == tmax if xmax > tmax else hi is None or hi >= xmax
    return (name, a, b) if low_ok and high_ok else None
