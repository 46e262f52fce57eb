"""Scalar C++ from the Stmt IR: what the CUDA kernels (cuda.py) and the C backend (c_source.py)
print alike.

The Stmt has been through the arithmetic rules, so every operation has C's meaning; what C would
leave undefined is avoided here: 8 and 16-bit multiplies and left shifts are done in uint32_t
(C's promotion to int could overflow) and narrowed again; 32 and 64-bit signed overflow is
undefined in Halide too (the CPU backend marks it `nsw`). Lets become const locals under fresh
names. Every value is a scalar: the printers' callers keep vector loops as loops.
"""

from __future__ import annotations

import re
import struct

import numpy as np

from .. import ir
from ..errors import HalideError, InternalError
from ..extern import BUFFER_FIELD, CALL_EXTERN, MAKE_BUFFER
from ..types import Type

MATH32 = {"sqrt": "sqrtf", "exp": "expf", "log": "logf", "sin": "sinf", "cos": "cosf", "tan": "tanf",
          "floor": "floorf", "ceil": "ceilf", "trunc": "truncf", "round": "rintf", "pow": "powf", "asin": "asinf",
          "acos": "acosf", "atan": "atanf", "sinh": "sinhf", "cosh": "coshf", "tanh": "tanhf", "asinh": "asinhf",
          "acosh": "acoshf", "atanh": "atanhf", "erf": "erff", "atan2": "atan2f", "abs": "fabsf"}
MATH64 = {k: ("fabs" if k == "abs" else "rint" if k == "round" else k) for k in MATH32}

# The helpers every printed function may call (C++, on any device).
HELPERS = r"""
template <typename T> HL_DEVICE T hl_min(T a, T b) { return b < a ? b : a; }
template <typename T> HL_DEVICE T hl_max(T a, T b) { return a < b ? b : a; }
template <typename T, typename S> HL_DEVICE T hl_reinterpret(S s) {
    static_assert(sizeof(T) == sizeof(S), "reinterpret between sizes");
    union { S s; T t; } u;
    u.s = s;
    return u.t;
}
""".strip()


def bit_helpers(names: dict[str, str]) -> str:
    """C++ definitions, on the CPU, of the bit-count functions named by CPrinter.BIT_FUNCTIONS's
    keys (CUDA's semantics: a count of leading zeros of 0 is the width)."""
    u32, u64 = "unsigned int", "unsigned long long"
    body = {"popc": (u32, "__builtin_popcount(x)"), "popcll": (u64, "__builtin_popcountll(x)"),
            "clz": (u32, "x ? __builtin_clz(x) : 32"), "clzll": (u64, "x ? __builtin_clzll(x) : 64"),
            "ffs": (u32, "__builtin_ffs(x)"), "ffsll": (u64, "__builtin_ffsll(x)")}
    return "\n".join(f"static inline int {names[k]}({arg} x) {{ return {value}; }}" for k, (arg, value) in body.items())


def c_type(t: Type, memory: bool = False) -> str:
    if t.lanes != 1:
        raise InternalError(f"C printer: a vector of {t} reached the C code generator")
    if t.is_bool():
        return "uint8_t" if memory else "bool"
    if t.is_bfloat():  # (its bits: lowering/emulate_bfloat16.py)
        return "uint16_t"
    if t.is_float():
        return {16: "hl_half", 32: "float", 64: "double"}[t.bits]
    return f"{'' if t.is_int() else 'u'}int{t.bits}_t"


def is_half(t: Type) -> bool:
    return t.is_float() and t.bits == 16 and not t.is_bfloat()


def c_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def literal(e: ir.Expr) -> str:
    t = e.type
    if isinstance(e, ir.IntImm):
        v = e.value
        if t.is_bool():
            return "true" if v else "false"
        if t.is_int() and t.bits == 32:
            return "(-2147483647 - 1)" if v == -(2**31) else str(v)
        if t.is_int() and t.bits == 64:
            return "(-9223372036854775807LL - 1)" if v == -(2**63) else f"{v}LL"
        if t.is_uint() and t.bits == 32:
            return f"{v}u"
        if t.is_uint() and t.bits == 64:
            return f"{v}ull"
        return f"(({c_type(t)}){v})"
    v = e.value
    if t.bits == 16:  # no float16 literals in C++: the bits, exactly
        return f"hl_half_bits({int(np.float16(v).view(np.uint16))})"
    if v != v or v in (float("inf"), float("-inf")):  # from the bits: no portable literal
        if t.bits == 32:
            return f"hl_reinterpret<float>({struct.unpack('<I', struct.pack('<f', v))[0]}u)"
        return f"hl_reinterpret<double>({struct.unpack('<Q', struct.pack('<d', v))[0]}ull)"
    text = str(np.float32(v)) if t.bits == 32 else repr(float(v))  # shortest that reads back exactly
    if not any(c in text for c in ".en"):
        text += ".0"
    return text + ("f" if t.bits == 32 else "")


class CPrinter:
    """Prints statements and scalar expressions into `lines`; subclasses add what their device
    does differently (loops of other kinds, memory, calls of their runtime)."""

    # popcount, count leading zeros, find first set, each for 32 and 64 bits: CUDA's names
    BIT_FUNCTIONS = {"popc": "__popc", "popcll": "__popcll", "clz": "__clz", "clzll": "__clzll",
                     "ffs": "__ffs", "ffsll": "__ffsll"}

    def __init__(self, indent: int = 1):
        self.lines: list[str] = []
        self.indent = indent
        self.names: dict[str, list[str]] = {}  # IR name -> C names in scope (innermost last)
        self.used: set[str] = set()

    # -- names
    def fresh(self, name: str) -> str:
        base = "v_" + c_name(name)
        c, k = base, 1
        while c in self.used:
            k += 1
            c = f"{base}_{k}"
        self.used.add(c)
        return c

    def bind(self, name: str) -> str:
        c = self.fresh(name)
        self.names.setdefault(name, []).append(c)
        return c

    def unbind(self, name: str) -> None:
        self.names[name].pop()

    def ref(self, name: str) -> str:
        scope = self.names.get(name)
        if not scope:
            raise InternalError(f"C printer: {name} is not bound in {self.where()}")
        return scope[-1]

    def where(self) -> str:
        """What is being printed, for internal errors."""
        return "the function printed"

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    # -- statements
    def stmt(self, s: ir.Stmt) -> None:
        method = getattr(self, "s_" + type(s).__name__, None)
        if method is None:
            raise InternalError(f"C printer: no rule for {type(s).__name__} in {self.where()}")
        method(s)

    def nested(self, s: ir.Stmt) -> None:
        """A loop's body or a branch, one level in."""
        self.indent += 1
        self.stmt(s)
        self.indent -= 1

    def let_entered(self, name: str, value: ir.Expr) -> None:
        """A let is in scope from here (subclasses that track lets hook in)."""

    def let_left(self, name: str) -> None:
        """...and no longer."""

    def s_Block(self, s):
        for sub in s.stmts:
            self.stmt(sub)

    def s_LetStmt(self, s):
        value = self.expr(s.value)
        c = self.bind(s.name)
        self.emit(f"const {c_type(s.value.type)} {c} = {value};")
        self.let_entered(s.name, s.value)
        self.stmt(s.body)
        self.let_left(s.name)
        self.unbind(s.name)

    def s_ProducerConsumer(self, s):
        self.emit(f"// {'produce' if s.is_producer else 'consume'} {s.name}")
        self.stmt(s.body)

    def serial_loop(self, s: ir.For) -> None:
        """`for (i = min; i < min + extent; i++)`, the bounds evaluated once, before the loop."""
        lo, ext = self.expr(s.min), self.expr(s.extent)
        if not ir.is_const(s.min):
            lo_name = self.fresh(s.name + ".min")
            self.emit(f"const int32_t {lo_name} = {lo};")
            lo = lo_name
        end = ext if ir.is_const(s.min, 0) else f"{lo} + {ext}"
        if not ir.is_const(s.extent):
            end_name = self.fresh(s.name + ".end")
            self.emit(f"const int32_t {end_name} = {end};")
            end = end_name
        c = self.bind(s.name)
        self.emit(f"for (int32_t {c} = {lo}; {c} < {end}; {c}++) {{")
        self.loop_body(s)
        self.emit("}")
        self.unbind(s.name)

    def loop_body(self, s: ir.For) -> None:
        self.nested(s.body)

    def s_IfThenElse(self, s):
        self.emit(f"if ({self.expr(s.condition)}) {{")
        self.branches(s)
        self.emit("}")

    def branches(self, s: ir.IfThenElse) -> None:
        self.nested(s.then_case)
        if s.else_case is not None:
            self.emit("} else {")
            self.nested(s.else_case)

    def s_Store(self, s):
        value = self.expr(s.value)
        index = self.expr(s.index)
        if s.predicate is not None:
            raise InternalError(f"C printer: a predicated store in {self.where()}")
        if s.value.type.is_bool():
            value = f"(uint8_t)({value})"
        self.store(s, value, index)

    def store(self, s: ir.Store, value: str, index: str) -> None:
        """Print a store of the printed value and index."""
        self.emit(f"{self.ref(s.name)}[{index}] = {value};")

    def s_Evaluate(self, s):
        if not isinstance(s.value, ir.IntImm):
            self.emit(f"(void)({self.expr(s.value)});")

    # -- expressions
    def expr(self, e: ir.Expr) -> str:
        method = getattr(self, "e_" + type(e).__name__, None)
        if method is None:
            raise InternalError(f"C printer: no rule for {type(e).__name__} in {self.where()}")
        return method(e)

    def e_IntImm(self, e):
        return literal(e)

    e_FloatImm = e_IntImm

    def e_Variable(self, e):
        return self.ref(e.name)

    def e_Cast(self, e):
        value, src = self.expr(e.value), e.value.type
        if is_half(src):  # float16 -> float is exact, and float -> t as float16 -> t would be
            return f"(({c_type(e.type)})hl_f32({value}))"
        if is_half(e.type):  # from an integer through float: exact where the result is finite
            return f"hl_f16({value if src.is_float() else f'(float)({value})'})"
        return f"(({c_type(e.type)})({value}))"

    def e_Reinterpret(self, e):
        return f"hl_reinterpret<{c_type(e.type)}>({self.expr(e.value)})"

    def _wrapping(self, e, op: str):
        t = e.type
        a, b = self.expr(e.a), self.expr(e.b)
        if is_half(t):
            return f"hl_f16(hl_f32({a}) {op} hl_f32({b}))"
        if t.is_float() or t.bits >= 32:
            return f"({a} {op} {b})"
        if op == "*":
            return f"(({c_type(t)})((uint32_t)({a}) * (uint32_t)({b})))"
        return f"(({c_type(t)})({a} {op} {b}))"

    def e_Add(self, e):
        return self._wrapping(e, "+")

    def e_Sub(self, e):
        return self._wrapping(e, "-")

    def e_Mul(self, e):
        return self._wrapping(e, "*")

    def e_Div(self, e):
        if not e.type.is_float():
            raise InternalError("C printer: integer division survived the arithmetic rules")
        return self._wrapping(e, "/")

    def _minmax(self, e, fn: str):
        if e.type.is_float():
            raise InternalError("C printer: float min/max survived the arithmetic rules")
        return f"{fn}<{c_type(e.type)}>({self.expr(e.a)}, {self.expr(e.b)})"

    def e_Min(self, e):
        return self._minmax(e, "hl_min")

    def e_Max(self, e):
        return self._minmax(e, "hl_max")

    def _binary(self, e):
        a, b = self.expr(e.a), self.expr(e.b)
        if is_half(e.a.type):
            a, b = f"hl_f32({a})", f"hl_f32({b})"
        return f"({a} {e.symbol} {b})"

    e_EQ = e_NE = e_LT = e_LE = e_GT = e_GE = _binary

    def e_And(self, e):
        return f"({self.expr(e.a)} && {self.expr(e.b)})"

    def e_Or(self, e):
        return f"({self.expr(e.a)} || {self.expr(e.b)})"

    def e_Not(self, e):
        return f"(!{self.expr(e.a)})"

    def e_Select(self, e):
        c, a, b = self.expr(e.condition), self.expr(e.true_value), self.expr(e.false_value)
        return f"(({c_type(e.type)})({c} ? {a} : {b}))"

    def e_Load(self, e):
        if e.predicate is not None or e.type.lanes != 1:
            raise InternalError(f"C printer: a vector or predicated load in {self.where()}")
        text = f"{self.ref(e.name)}[{self.expr(e.index)}]"
        return f"({text} != 0)" if e.type.is_bool() else text

    def e_Let(self, e):
        value = self.expr(e.value)
        c = self.bind(e.name)
        self.emit(f"const {c_type(e.value.type)} {c} = {value};")
        self.let_entered(e.name, e.value)
        body = self.expr(e.body)
        self.let_left(e.name)
        self.unbind(e.name)
        return body

    def e_Call(self, e):
        t = e.type
        if e.call_type == ir.EXTERN or e.name == "abs":
            args = [self.expr(a) for a in e.args]
            table = MATH64 if t.bits == 64 else MATH32
            if not t.is_float() or e.name not in table:
                raise InternalError(f"C printer: math function {e.name} of {t}")
            if is_half(t):  # as Halide: in float, the result rounded to float16
                return f"hl_f16({table[e.name]}({', '.join(f'hl_f32({a})' for a in args)}))"
            return f"{table[e.name]}({', '.join(args)})"
        if e.call_type != ir.INTRINSIC:
            raise InternalError(f"C printer: a {e.call_type} call to {e.name} survived lowering")
        return self.intrinsic(e)

    def intrinsic(self, e: ir.Call) -> str:
        """An intrinsic's value; subclasses print those of their runtime (print, prefetch...)."""
        if e.name in (CALL_EXTERN, MAKE_BUFFER, BUFFER_FIELD):
            raise HalideError(f"{self.where()}: extern stages (define_extern) run in pyhalide's LLVM backends (the "
                              "JIT and ahead-of-time objects), not in C or CUDA source")
        args = [self.expr(a) for a in e.args]
        t = e.type
        ct = c_type(t)
        a0 = e.args[0].type if e.args else None
        if e.name == "likely":
            return args[0]
        if e.name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
            op = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^"}[e.name]
            return f"(({ct})({args[0]} {op} {args[1]}))"
        if e.name == "bitwise_not":
            return f"(({ct})(~{args[0]}))" if not t.is_bool() else f"(!{args[0]})"
        if e.name == "shift_left_in_range":
            wide = "uint64_t" if t.bits == 64 else "uint32_t"
            return f"(({ct})(({wide})({c_type(t.with_code('uint'))})({args[0]}) << {args[1]}))"
        if e.name == "shift_right_in_range":
            return f"(({ct})({args[0]} >> {args[1]}))"
        if e.name == "div_round_to_zero":
            return f"(({ct})({args[0]} / {args[1]}))"
        if e.name == "mod_round_to_zero":
            return f"(({ct})({args[0]} % {args[1]}))"
        if e.name in ("popcount", "count_leading_zeros", "count_trailing_zeros"):
            return self._bit_count(e.name, a0, args[0], ct)
        if e.name in ("is_nan", "is_inf", "is_finite"):
            return f"{e.name.replace('is_', 'is')}({f'hl_f32({args[0]})' if is_half(a0) else args[0]})"
        raise InternalError(f"C printer: no rule for intrinsic {e.name} in {self.where()}")

    def _bit_count(self, name: str, t: Type, a: str, ct: str) -> str:
        wide = t.bits == 64
        fns = self.BIT_FUNCTIONS
        u = f"({'unsigned long long' if wide else 'unsigned int'})({c_type(t.with_code('uint'))})({a})"
        width = 64 if wide else 32
        if name == "popcount":
            return f"(({ct}){fns['popcll' if wide else 'popc']}({u}))"
        if name == "count_leading_zeros":
            return f"(({ct})({fns['clzll' if wide else 'clz']}({u}) - {width - t.bits}))"
        ffs = f"{fns['ffsll' if wide else 'ffs']}({u})"
        return f"(({ct})({ffs} == 0 ? {t.bits} : {ffs} - 1))"
