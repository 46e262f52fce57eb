"""Calls: C math functions (exp and log of float32 written out in IR by float_math; else an
LLVM intrinsic where LLVM has one, else libm, lane by lane for vectors) and pyhalide's intrinsics
(bit operations, float predicates, print, ...)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir as ll

from .. import ir
from ..errors import InternalError
from ..lowering.lower_arithmetic import not_lowered
from ..types import Type
from . import calling_convention, extern_calls, float_math, gpu_runtime, profiler, x86
from .gpu_runtime import GPU_FAILED
from .llvm_types import F64, I1, I8, I32, I64, PTR, VOID, llvm_type, type_suffix
from .shown_values import printf_conversion

if TYPE_CHECKING:
    from .llvm import CodeGen

_UNARY_LLVM = {"sqrt": "llvm.sqrt", "exp": "llvm.exp", "log": "llvm.log", "sin": "llvm.sin", "cos": "llvm.cos",
               "floor": "llvm.floor", "ceil": "llvm.ceil", "trunc": "llvm.trunc", "round": "llvm.roundeven",
               "pow": "llvm.pow"}
_LIBM = ("tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "atan2")


def emit_call(cg: CodeGen, e: ir.Call):
    if e.call_type == ir.EXTERN:
        return _math(cg, e)
    if e.call_type == ir.INTRINSIC:
        rule = _INTRINSICS.get(e.name)
        if rule is None:
            raise InternalError(f"codegen: unknown intrinsic {e.name}")
        return rule(cg, e)
    raise InternalError(f"codegen: call to {e.name} ({e.call_type}) survived lowering")


def call_overloaded(cg: CodeGen, base: str, t: Type, args):
    """An LLVM intrinsic overloaded on t, such as llvm.sqrt.v8f32."""
    fn = cg.declare(f"{base}.{type_suffix(t)}", llvm_type(t), [a.type for a in args])
    return cg.b.call(fn, args)


def _math(cg: CodeGen, e):
    expanded = float_math.expansion(e)
    if expanded is not None:  # (exp and log of float32, lane for lane what a scalar computes)
        return cg.expr(expanded)
    t = e.type
    args = [cg.expr(a) for a in e.args]
    if t.is_float() and t.bits == 16:  # as Halide: in float32, the result rounded to float16
        wide = t.with_bits(32)
        args = [cg.cast(a, t, wide) for a in args]
        return cg.cast(_math_of(cg, e.name, wide, args), wide, t)
    return _math_of(cg, e.name, t, args)


def _math_of(cg: CodeGen, name: str, t: Type, args):
    if name in _UNARY_LLVM:
        return call_overloaded(cg, _UNARY_LLVM[name], t, args)
    if name not in _LIBM:
        raise InternalError(f"codegen: unknown math function {name}")
    b = cg.b
    lt = llvm_type(t.element_of())
    fn = cg.declare(name + ("f" if t.bits == 32 else ""), lt, [lt] * len(args))
    if t.lanes == 1:
        return b.call(fn, args)
    result = ll.Constant(llvm_type(t), ll.Undefined)  # no vector libm: one call per lane
    for i in range(t.lanes):
        lane = ll.Constant(I32, i)
        r = b.call(fn, [b.extract_element(a, lane) for a in args])
        result = b.insert_element(result, r, lane)
    return result


def _args(cg: CodeGen, e):
    return [cg.expr(a) for a in e.args]


def _all_true(cg, e):
    v = cg.expr(e.args[0])
    fn = cg.declare(f"llvm.vector.reduce.and.v{v.type.count}i1", I1, [v.type])
    return cg.b.call(fn, [v])


def _abs(cg, e):
    if not e.type.is_float():
        not_lowered("integer abs")
    return call_overloaded(cg, "llvm.fabs", e.type, _args(cg, e))


def _shift_in_range(left: bool):
    def emit(cg, e):
        a, n = _args(cg, e)
        if left:
            return cg.b.shl(a, n)
        return cg.b.ashr(a, n) if e.type.is_int() else cg.b.lshr(a, n)

    return emit


def _div_or_mod_round_to_zero(signed_op: str, unsigned_op: str):
    def emit(cg, e):
        a, b = _args(cg, e)
        return getattr(cg.b, signed_op if e.type.is_int() else unsigned_op)(a, b)

    return emit


def _count_zeros(base: str):
    def emit(cg, e):
        t = e.args[0].type
        fn = cg.declare(f"{base}.{type_suffix(t)}", llvm_type(t), [llvm_type(t), I1])
        return cg.b.call(fn, [cg.expr(e.args[0]), ll.Constant(I1, 0)])

    return emit


def _is_nan(cg, e):
    v = cg.expr(e.args[0])
    return cg.b.fcmp_unordered("uno", v, v)


def _compare_magnitude_with_infinity(op: str):
    def emit(cg, e):
        t = e.args[0].type
        a = call_overloaded(cg, "llvm.fabs", t, _args(cg, e))
        return cg.b.fcmp_ordered(op, a, cg.expr(ir.make_const(t, float("inf"))))

    return emit


def _text(cg, e, parts_from: int, separator: str, condition=None):
    """One line of text from a print or trace call, written (if condition) through the text
    callback (Python's sys.stdout, as Halide's bindings print); returns the values printed."""
    b = cg.b
    parts, values, raw = [], [], []
    for a in e.args[parts_from:]:
        if isinstance(a, ir.StringImm):
            parts.append(a.value.replace("%", "%%"))
            continue
        v = cg.expr(a)
        raw.append(v)
        t = a.type
        if t.lanes != 1 and e.name != "trace":
            raise InternalError(f"codegen: {e.name} of a vector (the vectorizer keeps it serial)")
        lanes = [v] if t.lanes == 1 else [b.extract_element(v, ll.Constant(I32, i)) for i in range(t.lanes)]
        scalar = t.element_of()
        formats = []
        for lane in lanes:
            formats.append(printf_conversion(scalar, e.name == "trace"))
            if formats[-1] == "%s":
                words = [cg.string_constant(w).gep([ll.Constant(I32, 0)] * 2) for w in ("true", "false")]
                values.append(b.select(lane, *words))
            elif scalar.is_float():
                values.append(b.fpext(lane, F64) if scalar.bits < 64 else lane)
            else:
                values.append(cg.cast(lane, scalar, Type("int" if scalar.is_int() else "uint", 64)))
        parts.append(formats[0] if t.lanes == 1 else "<" + ", ".join(formats) + ">")
    fmt = cg.string_constant(separator.join(parts) + "\n")
    size = 8192  # longer lines are cut (as Halide's)
    buffer = cg.alloca_in_entry(I8, "text", ll.Constant(I64, size))
    with b.if_then(condition if condition is not None else ll.Constant(I1, 1)):
        snprintf = cg.declare("snprintf", I32, [PTR, cg.size_type, PTR], var_arg=True)
        b.call(snprintf, [buffer, ll.Constant(cg.size_type, size), fmt, *values])
        slot = calling_convention.scalar_ptr(b, cg.f.scalars, cg.layout.print_slot)
        callee = b.inttoptr(b.load(slot, typ=I64), ll.FunctionType(VOID, [PTR]).as_pointer())
        b.call(callee, [buffer])
    return raw


def _print(cg, e):
    """print_when(condition, values...): the values separated by spaces; the value is the first."""
    return _text(cg, e, 1, " ", cg.expr(e.args[0]))[0]


def _trace(cg, e):
    """trace(parts...): one event of Func tracing, the parts joined as they are; the value is the
    last (the value stored or loaded)."""
    values = _text(cg, e, 0, "")
    return values[-1] if values else ll.Constant(I32, 0)


def _require(cg, e):
    """require(condition, value, message, values...): the value; where the condition fails (in
    any lane), leave with the message and the values at the first lane that failed."""
    b = cg.b
    cond, value, message, *values = e.args
    if isinstance(message, ir.Broadcast):  # (the vectorizer widens every argument)
        message = message.value
    ok = cg.expr(cond)
    lane = None
    if cond.type.lanes > 1:
        n = cond.type.lanes
        failed = b.bitcast(b.not_(ok), ll.IntType(n))
        lane = b.call(cg.declare(f"llvm.cttz.i{n}", ll.IntType(n), [ll.IntType(n), I1]), [failed, ll.Constant(I1, 0)])
        ok = b.icmp_unsigned("==", failed, ll.Constant(ll.IntType(n), 0))
    assert_id = len(cg.asserts)
    cg.asserts.append((message.value, tuple(v.type.is_float() for v in values)))
    with b.if_then(b.not_(ok), likely=False):
        scalars = []
        for v in values:
            x = cg.expr(v)
            scalars.append((b.extract_element(x, lane) if v.type.lanes > 1 else x, v.type.element_of()))
        calling_convention.store_error_llvm_values(cg, scalars)
        cg.return_error(assert_id + 1)
    return cg.expr(value)


def _profiler_set_current(cg, e):
    """profiler_set_current(id): the profiler's sampling thread bills this thread's time to Func id."""
    profiler.set_current(cg, ir.const_value(e.args[0]))
    return ll.Constant(I32, 0)


def _prefetch(cg, e):
    """prefetch(buffer, index): bring the cache line holding that element in (for reading, kept
    in all cache levels); never faults, whatever the address."""
    name, index = e.args
    if isinstance(name, ir.Broadcast):  # (inside a vectorized loop: one prefetch per lane)
        name = name.value
    b = cg.b
    host, element = cg._host(name.value), llvm_type(e.type.element_of(), True)
    fn = cg.declare("llvm.prefetch.p0", VOID, [PTR, I32, I32, I32])
    if index.type.lanes == 1:
        offsets = [cg.index64(index)]
    else:
        lanes = cg.expr(index)
        offsets = [b.sext(b.extract_element(lanes, ll.Constant(I32, k)), I64) for k in range(index.type.lanes)]
    for offset in offsets:
        address = b.gep(host, [offset], source_etype=element)
        b.call(fn, [address, ll.Constant(I32, 0), ll.Constant(I32, 3), ll.Constant(I32, 1)])
    return ll.Constant(I32, 0)


def _gpu_runtime(op: int):
    """A call of the GPU runtime (gpu_runtime.GpuRun.callback): its arguments as int64s (a
    buffer name as its host address, floats as the bits of a double); leave with GPU_FAILED if it
    fails."""

    def emit(cg, e):
        b = cg.b
        values = []
        for a in e.args:
            if isinstance(a, ir.StringImm):
                values.append(b.ptrtoint(cg.f.hosts[a.value], I64))
            elif a.type.is_float():
                values.append(b.bitcast(cg.cast(cg.expr(a), a.type, Type("float", 64)), I64))
            else:
                values.append(cg.cast(cg.expr(a), a.type, Type("int", 64)) if a.type.bits < 64 else cg.expr(a))
        array = cg.alloca_in_entry(I64, "gpu_args", ll.Constant(I64, max(len(values), 1)))
        for i, v in enumerate(values):
            b.store(v, b.gep(array, [ll.Constant(I64, i)], source_etype=I64))
        slot = calling_convention.scalar_ptr(b, cg.f.scalars, cg.layout.gpu_slot)
        fn_type = ll.FunctionType(I32, [I32, PTR, I32])
        callee = b.inttoptr(b.load(slot, typ=I64), fn_type.as_pointer())
        rc = b.call(callee, [ll.Constant(I32, op), array, ll.Constant(I32, len(values))])
        with b.if_then(b.icmp_signed("!=", rc, ll.Constant(I32, 0)), likely=False):
            cg.return_error(GPU_FAILED)
        return rc

    return emit


def _saturating(op: str):
    """llvm.{s,u}{add,sub}.sat: one vpaddsb / vpaddusw / ... for 8- and 16-bit lanes."""
    def emit(cg, e):
        sign = "s" if e.type.is_int() else "u"
        return call_overloaded(cg, f"llvm.{sign}{op}.sat", e.type, _args(cg, e))

    return emit


def _binary(op: str):
    return lambda cg, e: getattr(cg.b, op)(*_args(cg, e))


def _refused(what: str):
    def emit(cg, e):
        not_lowered(what)

    return emit


_INTRINSICS = {
    **{name: _gpu_runtime(op) for name, op in gpu_runtime.OPS.items()},
    **extern_calls.EMITTERS,
    "all_true": _all_true,
    "dot_product_i16": x86.dot_product_i16,
    "saturating_add": _saturating("add"),
    "saturating_sub": _saturating("sub"),
    "likely": lambda cg, e: cg.expr(e.args[0]),
    "abs": _abs,
    "bitwise_and": _binary("and_"),
    "bitwise_or": _binary("or_"),
    "bitwise_xor": _binary("xor"),
    "bitwise_not": lambda cg, e: cg.b.not_(cg.expr(e.args[0])),
    "shift_left_in_range": _shift_in_range(left=True),
    "shift_right_in_range": _shift_in_range(left=False),
    "div_round_to_zero": _div_or_mod_round_to_zero("sdiv", "udiv"),
    "mod_round_to_zero": _div_or_mod_round_to_zero("srem", "urem"),
    "popcount": lambda cg, e: call_overloaded(cg, "llvm.ctpop", e.type, _args(cg, e)),
    "count_leading_zeros": _count_zeros("llvm.ctlz"),
    "count_trailing_zeros": _count_zeros("llvm.cttz"),
    "is_nan": _is_nan,
    "is_inf": _compare_magnitude_with_infinity("=="),
    "is_finite": _compare_magnitude_with_infinity("<"),
    "print": _print,
    "require": _require,
    "prefetch": _prefetch,
    "profiler_set_current": _profiler_set_current,
    "trace": _trace,
    "shift_left": _refused("shift_left"),
    "shift_right": _refused("shift_right"),
    "absd": _refused("absd"),
}
