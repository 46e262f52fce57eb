"""LLVM IR from the lowered Stmt, through llvmlite.

The generated function is `i32 NAME(ptr array_0, ..., ptr array_n, ptr scalars)`: each array is
a numpy ndarray object (its data pointer, shape and strides are read from numpy's stable C
layout), and `scalars` is an int64 ndarray holding each buffer's mins, the Params and, on
failure, the error record (assert id and its values). It returns 0, or 1 + the failed assert's
id. Heap allocations live on a lexical stack so every exit path frees them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from llvmlite import ir as ll

from .. import ir
from ..errors import CompileError, InternalError
from ..ir_mutator import IRVisitor, free_variables
from ..types import Type

I1, I8, I32, I64 = ll.IntType(1), ll.IntType(8), ll.IntType(32), ll.IntType(64)
PTR = ll.PointerType()
F32, F64 = ll.FloatType(), ll.DoubleType()

# numpy's PyArrayObject layout (stable C API): data, nd, dimensions, strides
NP_DATA, NP_ND, NP_DIMS, NP_STRIDES = 16, 24, 32, 40
ERROR_VALUES = 8  # values an assert can report
STACK_LIMIT = 16 * 1024  # constant-size allocations up to this many bytes go on the stack


def _atomic_store(builder, value, ptr):
    """A monotonic atomic i32 store through an opaque pointer (llvmlite's helper wants a typed one)."""
    from llvmlite.ir import instructions

    st = instructions.StoreAtomicInstr(builder.block, value, ptr, "monotonic", 4)
    builder._insert(st)
    return st


def _lowered_away(what: str):
    raise InternalError(f"codegen: {what} reached the code generator; lower_arithmetic removes it")


def _buffers_used(stmt) -> set[str]:
    names: set[str] = set()

    class Collect(IRVisitor):
        def visit_Load(self, e):
            names.add(e.name)
            self.visit_children(e)

        def visit_Store(self, st):
            names.add(st.name)
            self.visit_children(st)

    Collect().visit(stmt)
    return names


def _small_stride(index: ir.Expr) -> bool:
    """A Ramp with a small positive constant stride (loaded densely and shuffled)."""
    k = ir.const_int(index.stride) if isinstance(index, ir.Ramp) else None
    return k is not None and 2 <= k <= 4 and k * index.lanes <= 256


def _is_dense(index: ir.Expr) -> bool:
    return isinstance(index, ir.Ramp) and ir.const_int(index.stride) == 1


def llvm_type(t: Type, memory: bool = False) -> ll.Type:
    """The LLVM type of t; booleans are i1 in registers and i8 in memory."""
    if t.is_float():
        base = F32 if t.bits == 32 else F64
    elif t.is_bool():
        base = I8 if memory else I1
    elif t.is_handle():
        base = PTR
    else:
        base = ll.IntType(t.bits)
    return base if t.lanes == 1 else ll.VectorType(base, t.lanes)


@dataclass
class ScalarLayout:
    """Where each value lives in the int64 `scalars` array passed at every call."""

    min_slots: dict[str, list[int]] = field(default_factory=dict)
    param_slots: dict[str, int] = field(default_factory=dict)
    threads_slot: int = 0
    error_slot: int = 0
    size: int = 0


_UNARY_LLVM = {"sqrt": "llvm.sqrt", "exp": "llvm.exp", "log": "llvm.log", "sin": "llvm.sin", "cos": "llvm.cos",
               "floor": "llvm.floor", "ceil": "llvm.ceil", "trunc": "llvm.trunc", "round": "llvm.roundeven"}
_UNARY_LIBM = ("tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf")
_BINARY_LIBM = {"atan2": "atan2", "hypot": "hypot"}


class CodeGen:
    def __init__(self, lowered, stmt, fn_name: str, axis_maps: list[list[int]], fp_contract: bool = False):
        self.lowered = lowered
        self.body = stmt
        # Exact IEEE results unless the target asks for fused multiply-adds ("fp_contract").
        self.float_flags = ["contract"] if fp_contract else []
        self.fn_name = fn_name
        self.axis_maps = axis_maps
        self.module = ll.Module(name=fn_name)
        self.scope: dict[str, list] = {}
        self.hosts: dict[str, ll.Value] = {}
        self.buffer_types: dict[str, Type] = {}
        self.heap_allocs: list[ll.Value] = []
        self.asserts: list[tuple[str, int]] = []
        self.layout = ScalarLayout()
        self._strings: dict[str, ll.GlobalVariable] = {}
        self.closure_error = None  # inside a parallel task: where to report a failure

    # ------------------------------------------------------------------ entry
    def generate(self) -> str:
        lp = self.lowered
        nbuf = len(lp.buffers)
        fnty = ll.FunctionType(I32, [PTR] * (nbuf + 1))
        self.fn = ll.Function(self.module, fnty, self.fn_name)
        self.entry = self.fn.append_basic_block("entry")
        self.b = ll.IRBuilder(self.entry)
        args = list(self.fn.args)
        sc_obj = args[-1]
        self.scalars = self._load(PTR, self._gep8(sc_obj, NP_DATA))
        slot = 0
        for buf, obj, axes in zip(lp.buffers, args[:-1], self.axis_maps):
            self.layout.min_slots[buf.name] = list(range(slot, slot + buf.dimensions))
            slot += buf.dimensions
            self.buffer_types[buf.name] = buf.type
            self.hosts[buf.name] = self._load(PTR, self._gep8(obj, NP_DATA))
            dims = self._load(PTR, self._gep8(obj, NP_DIMS))
            strides = self._load(PTR, self._gep8(obj, NP_STRIDES))
            esize = ll.Constant(I64, buf.type.bytes())
            for d, axis in enumerate(axes):
                ext = self._load(I64, self.b.gep(dims, [ll.Constant(I64, axis)], source_etype=I64))
                stride = self._load(I64, self.b.gep(strides, [ll.Constant(I64, axis)], source_etype=I64))
                stride = self.b.sdiv(stride, esize)
                lo = self._load(I64, self._scalar_ptr(self.layout.min_slots[buf.name][d]))
                self._bind(f"{buf.name}.min.{d}", self.b.trunc(lo, I32))
                self._bind(f"{buf.name}.extent.{d}", self.b.trunc(ext, I32))
                self._bind(f"{buf.name}.stride.{d}", self.b.trunc(stride, I32))
        for s in lp.scalars:
            self.layout.param_slots[s.name] = slot
            raw = self._load(I64, self._scalar_ptr(slot))
            slot += 1
            self._bind(s.name, self._from_int64(raw, s.type))
        self.layout.threads_slot = slot
        self.layout.error_slot = slot + 1
        self.layout.size = slot + 2 + ERROR_VALUES
        self.stmt(self.body)
        if not self.b.block.is_terminated:
            self.b.ret(ll.Constant(I32, 0))
        return str(self.module)

    # ------------------------------------------------------------------ helpers
    def _gep8(self, base, offset: int):
        return self.b.gep(base, [ll.Constant(I64, offset)], source_etype=I8)

    def _load(self, ty, ptr, align=None):
        return self.b.load(ptr, typ=ty, align=align)

    def _scalar_ptr(self, slot: int):
        return self.b.gep(self.scalars, [ll.Constant(I64, slot)], source_etype=I64)

    def _from_int64(self, raw, t: Type):
        if t.is_float():
            d = self.b.bitcast(raw, F64)
            return d if t.bits == 64 else self.b.fptrunc(d, F32)
        if t.is_bool():
            return self.b.icmp_unsigned("!=", raw, ll.Constant(I64, 0))
        return self.b.trunc(raw, llvm_type(t)) if t.bits < 64 else raw

    def _bind(self, name: str, value):
        self.scope.setdefault(name, []).append(value)

    def _unbind(self, name: str):
        self.scope[name].pop()

    def _intrinsic(self, name: str, ret: ll.Type, args: list[ll.Type]):
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ll.Function(self.module, ll.FunctionType(ret, args), name)
        return fn

    def _libc(self, name: str, ret, args, var_arg=False):
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ll.Function(self.module, ll.FunctionType(ret, args, var_arg=var_arg), name)
        return fn

    def _suffix(self, t: Type) -> str:
        s = "f32" if t.is_float() and t.bits == 32 else "f64" if t.is_float() else f"i{t.bits}"
        return s if t.lanes == 1 else f"v{t.lanes}{s}"

    def _const(self, t: Type, value):
        return self.expr(ir.make_const(t, value))

    # ------------------------------------------------------------------ expressions
    def expr(self, e: ir.Expr):
        method = getattr(self, "e_" + type(e).__name__, None)
        if method is None:
            raise CompileError(f"codegen: no rule for {type(e).__name__}")
        return method(e)

    def e_IntImm(self, e):
        return ll.Constant(llvm_type(e.type), e.value)

    def e_FloatImm(self, e):
        return ll.Constant(llvm_type(e.type), e.value)

    def e_StringImm(self, e):
        return self._string(e.value)

    def e_Variable(self, e):
        stack = self.scope.get(e.name)
        if not stack:
            raise CompileError(f"codegen: variable {e.name} is not defined")
        return stack[-1]

    def e_Let(self, e):
        self._bind(e.name, self.expr(e.value))
        try:
            return self.expr(e.body)
        finally:
            self._unbind(e.name)

    def e_Broadcast(self, e):
        return self._splat(self.expr(e.value), e.lanes)

    def _splat(self, v, lanes: int):
        vt = ll.VectorType(v.type, lanes)
        if isinstance(v, ll.Constant):
            return ll.Constant(vt, [v.constant] * lanes)
        undef = ll.Constant(vt, ll.Undefined)
        ins = self.b.insert_element(undef, v, ll.Constant(I32, 0))
        return self.b.shuffle_vector(ins, undef, ll.Constant(ll.VectorType(I32, lanes), [0] * lanes))

    def e_Ramp(self, e):
        base = self.e_Broadcast(ir.Broadcast(e.base, e.lanes))
        stride = self.e_Broadcast(ir.Broadcast(e.stride, e.lanes))
        lane_t = llvm_type(e.base.type)
        idx = ll.Constant(ll.VectorType(lane_t, e.lanes), list(range(e.lanes)))
        return self.b.add(base, self.b.mul(stride, idx))

    def e_Cast(self, e):
        if e.type.is_bool() and not e.value.type.is_bool():
            _lowered_away("cast to bool")
        return self.cast(self.expr(e.value), e.value.type, e.type)

    def cast(self, v, src: Type, dst: Type):
        b = self.b
        lt = llvm_type(dst)
        if src.element_of() == dst.element_of():
            return v
        if src.is_float() and dst.is_float():
            return b.fpext(v, lt) if dst.bits > src.bits else b.fptrunc(v, lt)
        if src.is_float():
            return b.fptosi(v, lt) if dst.is_int() else b.fptoui(v, lt)
        if dst.is_float():
            return b.sitofp(v, lt) if src.is_int() else b.uitofp(v, lt)
        if dst.bits > src.bits:
            return b.sext(v, lt) if src.is_int() else b.zext(v, lt)
        if dst.bits < src.bits:
            return b.trunc(v, lt)
        return v

    def e_Reinterpret(self, e):
        return self.b.bitcast(self.expr(e.value), llvm_type(e.type))

    def _arith(self, e, int_op, float_op):
        a, b = self.expr(e.a), self.expr(e.b)
        if e.type.is_float():
            return getattr(self.b, float_op)(a, b, flags=self.float_flags)
        flags = ["nsw"] if e.type.is_int() and e.type.bits >= 32 else []
        return getattr(self.b, int_op)(a, b, flags=flags)

    def e_Add(self, e):
        return self._arith(e, "add", "fadd")

    def e_Sub(self, e):
        return self._arith(e, "sub", "fsub")

    def e_Mul(self, e):
        return self._arith(e, "mul", "fmul")

    def e_Div(self, e):
        if not e.type.is_float():
            _lowered_away("integer division")
        return self.b.fdiv(self.expr(e.a), self.expr(e.b))

    def e_Mod(self, e):
        _lowered_away("modulo")

    def _minmax(self, e, is_min: bool):
        t = e.type
        if t.is_float():
            _lowered_away("float min/max")
        a, b = self.expr(e.a), self.expr(e.b)
        op = "<" if is_min else ">"
        cmp = self.b.icmp_signed(op, a, b) if t.is_int() else self.b.icmp_unsigned(op, a, b)
        return self.b.select(cmp, a, b)

    def e_Min(self, e):
        return self._minmax(e, True)

    def e_Max(self, e):
        return self._minmax(e, False)

    def _compare(self, e, op: str):
        a, b = self.expr(e.a), self.expr(e.b)
        t = e.a.type
        if t.is_float():
            if op == "!=":
                return self.b.fcmp_unordered(op, a, b)
            return self.b.fcmp_ordered(op, a, b)
        if t.is_int():
            return self.b.icmp_signed(op, a, b)
        return self.b.icmp_unsigned(op, a, b)

    def e_EQ(self, e):
        return self._compare(e, "==")

    def e_NE(self, e):
        return self._compare(e, "!=")

    def e_LT(self, e):
        return self._compare(e, "<")

    def e_LE(self, e):
        return self._compare(e, "<=")

    def e_GT(self, e):
        return self._compare(e, ">")

    def e_GE(self, e):
        return self._compare(e, ">=")

    def e_And(self, e):
        return self.b.and_(self.expr(e.a), self.expr(e.b))

    def e_Or(self, e):
        return self.b.or_(self.expr(e.a), self.expr(e.b))

    def e_Not(self, e):
        return self.b.not_(self.expr(e.a))

    def e_Select(self, e):
        return self.b.select(self.expr(e.condition), self.expr(e.true_value), self.expr(e.false_value))

    def e_Load(self, e):
        t = e.type
        host = self.hosts.get(e.name)
        if host is None:
            raise CompileError(f"codegen: load from unknown buffer {e.name}")
        mem_t = llvm_type(t.element_of(), memory=True)
        align = t.element_of().bytes()
        if t.lanes > 1 and _is_dense(e.index):
            ptr = self.b.gep(host, [self.b.sext(self.expr(e.index.base), I64)], source_etype=mem_t)
            v = self._load(llvm_type(t, memory=True), ptr, align)
        elif t.lanes > 1 and _small_stride(e.index):
            # A constant stride: one dense load of the span, then a shuffle picks every k-th
            # element. The span ends at the last element used, so it never reads past the access.
            k = ir.const_int(e.index.stride)
            span = k * (t.lanes - 1) + 1
            ptr = self.b.gep(host, [self.b.sext(self.expr(e.index.base), I64)], source_etype=mem_t)
            wide = self._load(ll.VectorType(mem_t, span), ptr, align)
            picks = ll.Constant(ll.VectorType(I32, t.lanes), [k * i for i in range(t.lanes)])
            v = self.b.shuffle_vector(wide, ll.Constant(wide.type, ll.Undefined), picks)
        elif t.lanes > 1 and isinstance(e.index, ir.Broadcast):
            ptr = self.b.gep(host, [self.b.sext(self.expr(e.index.value), I64)], source_etype=mem_t)
            v = self._splat(self._load(mem_t, ptr, align), t.lanes)
        elif t.lanes > 1 and t.element_of().bits < 32:
            # x86 gathers only 32- and 64-bit elements: load lane by lane, each at base + a 32-bit
            # index (as Halide does), rather than extracting 64-bit addresses from a vector
            index = self.expr(e.index)
            v = ll.Constant(llvm_type(t, memory=True), ll.Undefined)
            for lane in range(t.lanes):
                i = self.b.extract_element(index, ll.Constant(I32, lane))
                ptr = self.b.gep(host, [self.b.sext(i, I64)], source_etype=mem_t)
                v = self.b.insert_element(v, self._load(mem_t, ptr, align), ll.Constant(I32, lane))
        elif t.lanes > 1:
            ptrs = self._lane_pointers(host, self.expr(e.index), t)
            mask = ll.Constant(ll.VectorType(I1, t.lanes), [1] * t.lanes)
            v = self._call_gather(ptrs, mask, t, align)
        else:
            ptr = self.b.gep(host, [self.b.sext(self.expr(e.index), I64)], source_etype=mem_t)
            v = self._load(mem_t, ptr, align)
        if t.is_bool():
            return self.b.icmp_unsigned("!=", v, ll.Constant(v.type, 0) if t.lanes == 1 else
                                        ll.Constant(v.type, [0] * t.lanes))
        return v

    def _lane_pointers(self, host, index, t: Type):
        """A vector of element addresses, for gathers and scatters: one getelementptr with the
        32-bit index vector, which x86 turns into a base + 32-bit index gather (16 lanes in one
        vgatherdps, where 64-bit addresses take two)."""
        ptrs = self.b.gep(host, [index], source_etype=llvm_type(t.element_of(), memory=True))
        ptrs.type = ll.VectorType(PTR, t.lanes)  # llvmlite types a vector-index GEP as one pointer
        return ptrs

    def _call_gather(self, ptrs, mask, t, align):
        mem_vt = llvm_type(t, memory=True)
        name = f"llvm.masked.gather.{self._suffix(t)}.v{t.lanes}p0"
        fn = self._intrinsic(name, mem_vt, [ptrs.type, I32, mask.type, mem_vt])
        return self.b.call(fn, [ptrs, ll.Constant(I32, align), mask, ll.Constant(mem_vt, ll.Undefined)])

    def _call_intrinsic(self, base: str, t: Type, args):
        lt = llvm_type(t)
        fn = self._intrinsic(f"{base}.{self._suffix(t)}", lt, [a.type for a in args])
        return self.b.call(fn, args)

    def e_Call(self, e):
        if e.call_type == ir.EXTERN:
            return self._math(e)
        if e.call_type == ir.INTRINSIC:
            handler = getattr(self, "i_" + e.name, None)
            if handler is None:
                raise CompileError(f"codegen: unknown intrinsic {e.name}")
            return handler(e)
        raise CompileError(f"codegen: call to {e.name} ({e.call_type}) survived lowering")

    def _math(self, e):
        t = e.type
        args = [self.expr(a) for a in e.args]
        if e.name in _UNARY_LLVM:
            return self._call_intrinsic(_UNARY_LLVM[e.name], t, args)
        if e.name == "pow":
            return self._call_intrinsic("llvm.pow", t, args)
        if e.name in _UNARY_LIBM or e.name in _BINARY_LIBM:
            lt = llvm_type(t.element_of())
            fn = self._libc(e.name + ("f" if t.bits == 32 else ""), lt, [lt] * len(args))
            if t.lanes == 1:
                return self.b.call(fn, args)
            result = ll.Constant(llvm_type(t), ll.Undefined)  # no vector libm: one call per lane
            for i in range(t.lanes):
                lane = ll.Constant(I32, i)
                r = self.b.call(fn, [self.b.extract_element(a, lane) for a in args])
                result = self.b.insert_element(result, r, lane)
            return result
        raise CompileError(f"codegen: unknown math function {e.name}")

    # intrinsics
    def i_all_true(self, e):
        v = self.expr(e.args[0])
        fn = self._intrinsic(f"llvm.vector.reduce.and.v{v.type.count}i1", I1, [v.type])
        return self.b.call(fn, [v])

    def i_likely(self, e):
        return self.expr(e.args[0])

    def i_abs(self, e):
        if not e.type.is_float():
            _lowered_away("integer abs")
        return self._call_intrinsic("llvm.fabs", e.type, [self.expr(e.args[0])])

    def i_absd(self, e):
        _lowered_away("absd")

    def i_bitwise_and(self, e):
        return self.b.and_(self.expr(e.args[0]), self.expr(e.args[1]))

    def i_bitwise_or(self, e):
        return self.b.or_(self.expr(e.args[0]), self.expr(e.args[1]))

    def i_bitwise_xor(self, e):
        return self.b.xor(self.expr(e.args[0]), self.expr(e.args[1]))

    def i_bitwise_not(self, e):
        return self.b.not_(self.expr(e.args[0]))

    def i_shift_left(self, e):
        _lowered_away("shift_left")

    def i_shift_right(self, e):
        _lowered_away("shift_right")

    def i_shift_left_in_range(self, e):
        return self.b.shl(self.expr(e.args[0]), self.expr(e.args[1]))

    def i_shift_right_in_range(self, e):
        a, n = self.expr(e.args[0]), self.expr(e.args[1])
        return self.b.ashr(a, n) if e.type.is_int() else self.b.lshr(a, n)

    def i_div_round_to_zero(self, e):
        a, b = self.expr(e.args[0]), self.expr(e.args[1])
        return self.b.sdiv(a, b) if e.type.is_int() else self.b.udiv(a, b)

    def i_mod_round_to_zero(self, e):
        a, b = self.expr(e.args[0]), self.expr(e.args[1])
        return self.b.srem(a, b) if e.type.is_int() else self.b.urem(a, b)

    def i_popcount(self, e):
        return self._call_intrinsic("llvm.ctpop", e.type, [self.expr(e.args[0])])

    def i_count_leading_zeros(self, e):
        t = e.args[0].type
        fn = self._intrinsic(f"llvm.ctlz.{self._suffix(t)}", llvm_type(t), [llvm_type(t), I1])
        return self.b.call(fn, [self.expr(e.args[0]), ll.Constant(I1, 0)])

    def i_count_trailing_zeros(self, e):
        t = e.args[0].type
        fn = self._intrinsic(f"llvm.cttz.{self._suffix(t)}", llvm_type(t), [llvm_type(t), I1])
        return self.b.call(fn, [self.expr(e.args[0]), ll.Constant(I1, 0)])

    def i_is_nan(self, e):
        v = self.expr(e.args[0])
        return self.b.fcmp_unordered("uno", v, v)

    def i_is_inf(self, e):
        t = e.args[0].type
        a = self._call_intrinsic("llvm.fabs", t, [self.expr(e.args[0])])
        return self.b.fcmp_ordered("==", a, self._const(t, float("inf")))

    def i_is_finite(self, e):
        t = e.args[0].type
        a = self._call_intrinsic("llvm.fabs", t, [self.expr(e.args[0])])
        return self.b.fcmp_ordered("<", a, self._const(t, float("inf")))

    def i_print(self, e):
        cond = self.expr(e.args[0])
        parts, values, result = [], [], None
        for a in e.args[1:]:
            if isinstance(a, ir.StringImm):
                parts.append(a.value.replace("%", "%%"))
                continue
            v = self.expr(a)
            if result is None:
                result = v
            t = a.type
            if t.lanes != 1:
                raise CompileError("print of vector values is not supported")
            if t.is_float():
                parts.append("%f")
                values.append(self.b.fpext(v, F64) if t.bits == 32 else v)
            else:
                parts.append("%lld" if t.is_int() else "%llu")
                values.append(self.cast(v, t, Type("int" if t.is_int() else "uint", 64)))
        fmt = self._string(" ".join(parts) + "\n")
        dprintf = self._libc("dprintf", I32, [I32, PTR], var_arg=True)
        with self.b.if_then(cond):
            self.b.call(dprintf, [ll.Constant(I32, 2), fmt, *values])
        return result

    def _string(self, s: str):
        g = self._strings.get(s)
        if g is None:
            data = bytearray(s.encode() + b"\0")
            ty = ll.ArrayType(I8, len(data))
            g = ll.GlobalVariable(self.module, ty, name=f".str{len(self._strings)}")
            g.global_constant = True
            g.linkage = "private"
            g.initializer = ll.Constant(ty, data)
            self._strings[s] = g
        return g

    # ------------------------------------------------------------------ statements
    def stmt(self, s: ir.Stmt):
        method = getattr(self, "s_" + type(s).__name__, None)
        if method is None:
            raise CompileError(f"codegen: no rule for {type(s).__name__}")
        method(s)

    def s_Block(self, s):
        for sub in s.stmts:
            self.stmt(sub)

    def s_LetStmt(self, s):
        names = []
        while isinstance(s, ir.LetStmt):  # iterate chains of lets instead of recursing
            self._bind(s.name, self.expr(s.value))
            names.append(s.name)
            s = s.body
        self.stmt(s)
        for n in reversed(names):
            self._unbind(n)

    def s_ProducerConsumer(self, s):
        self.stmt(s.body)

    def s_Evaluate(self, s):
        self.expr(s.value)

    def s_AssertStmt(self, s):
        cond = self.expr(s.condition)
        if len(s.args) > ERROR_VALUES:
            raise CompileError("assert with too many values")
        assert_id = len(self.asserts)
        self.asserts.append((s.message, len(s.args)))
        fail = self.fn.append_basic_block(f"assert_failed{assert_id}")
        ok = self.fn.append_basic_block(f"assert_ok{assert_id}")
        self.b.cbranch(cond, ok, fail)
        self.b.position_at_end(fail)
        for k, a in enumerate(s.args):
            v = self.expr(a)
            v64 = self.cast(v, a.type, Type("int", 64)) if not a.type.is_float() else self.b.bitcast(
                self.cast(v, a.type, Type("float", 64)), I64)
            self.b.store(v64, self._scalar_ptr(self.layout.error_slot + 1 + k))
        self._return_error(assert_id + 1)
        self.b.position_at_end(ok)

    def _return_error(self, code: int):
        """Leave the current function with an error, freeing what it allocated on the heap."""
        self.b.store(ll.Constant(I64, code), self._scalar_ptr(self.layout.error_slot))
        free = self._libc("free", ll.VoidType(), [PTR])
        for p in reversed(self.heap_allocs):
            self.b.call(free, [p])
        if self.closure_error is None:
            self.b.ret(ll.Constant(I32, code))
        else:  # inside a parallel task: tell the other tasks and the caller, then stop
            _atomic_store(self.b, ll.Constant(I32, code), self.closure_error)
            self.b.ret_void()

    def s_For(self, s):
        if s.for_type not in (ir.SERIAL, ir.PARALLEL, ir.UNROLLED, ir.VECTORIZED):
            raise CompileError(f"codegen: loop {s.name} of type {s.for_type} is not supported on the CPU")
        if s.for_type == ir.PARALLEL:
            self._parallel_for(s)
            return
        self._serial_for(s.name, self.expr(s.min), self.expr(s.extent), s.body)

    def _serial_for(self, name: str, lo, extent, body_stmt):
        b = self.b
        end = b.add(lo, extent, flags=["nsw"])
        pre = b.block
        header = self.fn.append_basic_block(f"{name}.header")
        body = self.fn.append_basic_block(f"{name}.body")
        done = self.fn.append_basic_block(f"{name}.end")
        b.branch(header)
        b.position_at_end(header)
        i = b.phi(I32, name=name)
        i.add_incoming(lo, pre)
        b.cbranch(b.icmp_signed("<", i, end), body, done)
        b.position_at_end(body)
        self._bind(name, i)
        self.stmt(body_stmt)
        self._unbind(name)
        nxt = b.add(i, ll.Constant(I32, 1), flags=["nsw"])
        i.add_incoming(nxt, b.block)
        b.branch(header)
        b.position_at_end(done)

    def _parallel_for(self, s):
        """Outline the loop body into a task function and run it on libgomp's thread pool.

        The closure holds the loop bounds, a shared iteration counter, an error code, the scalars
        array, and every value and buffer the body uses. Each thread takes iterations from the
        counter until none are left or some task failed.
        """
        b = self.b
        lo, extent = self.expr(s.min), self.expr(s.extent)
        used = free_variables(s.body)
        values = [(n, self.scope[n][-1]) for n in sorted(used) if self.scope.get(n) and n != s.name]
        buffers = [(n, self.hosts[n]) for n in sorted(_buffers_used(s.body)) if n in self.hosts]
        fields = [I32, I32, I32, I32, PTR] + [v.type for _, v in values] + [PTR] * len(buffers)
        closure_t = ll.LiteralStructType(fields)
        with b.goto_block(self.entry):
            b.position_at_start(self.entry)
            closure = b.alloca(closure_t, name=f"{s.name}.closure")

        def field_ptr(builder, base, k):
            idx = [ll.Constant(I32, 0), ll.Constant(I32, k)]
            if base.type.is_opaque:
                return builder.gep(base, idx, source_etype=closure_t)
            return builder.gep(base, idx)  # typed: the result points at the field's type

        for k, v in enumerate([lo, extent, ll.Constant(I32, 0), ll.Constant(I32, 0), self.scalars]):
            b.store(v, field_ptr(b, closure, k))
        for k, (_, v) in enumerate(values):
            b.store(v, field_ptr(b, closure, 5 + k))
        for k, (_, p) in enumerate(buffers):
            b.store(p, field_ptr(b, closure, 5 + len(values) + k))

        task = ll.Function(self.module, ll.FunctionType(ll.VoidType(), [PTR]),
                           f"{self.fn_name}.par.{len(self.module.functions)}")
        task.linkage = "internal"
        saved = (self.fn, self.b, self.entry, self.heap_allocs, self.scope, self.hosts, self.scalars,
                 self.closure_error)
        self.fn, self.entry = task, task.append_basic_block("entry")
        self.b = tb = ll.IRBuilder(self.entry)
        self.heap_allocs, self.scope, self.hosts = [], {}, {}
        data = task.args[0]
        t_lo = tb.load(field_ptr(tb, data, 0), typ=I32)
        t_extent = tb.load(field_ptr(tb, data, 1), typ=I32)
        counter = field_ptr(tb, data, 2)
        self.closure_error = field_ptr(tb, data, 3)
        self.scalars = tb.load(field_ptr(tb, data, 4), typ=PTR)
        for k, (n, v) in enumerate(values):
            self._bind(n, tb.load(field_ptr(tb, data, 5 + k), typ=v.type))
        for k, (n, _) in enumerate(buffers):
            self.hosts[n] = tb.load(field_ptr(tb, data, 5 + len(values) + k), typ=PTR)
        take = task.append_basic_block("take")
        work = task.append_basic_block("work")
        finish = task.append_basic_block("finish")
        tb.branch(take)
        tb.position_at_end(take)
        failed = tb.load_atomic(self.closure_error, "monotonic", 4, typ=I32)
        i = tb.atomic_rmw("add", counter, ll.Constant(I32, 1), "monotonic")
        more = tb.and_(tb.icmp_signed("<", i, t_extent), tb.icmp_signed("==", failed, ll.Constant(I32, 0)))
        tb.cbranch(more, work, finish)
        tb.position_at_end(work)
        self._bind(s.name, tb.add(t_lo, i, flags=["nsw"]))
        self.stmt(s.body)
        self._unbind(s.name)
        self.b.branch(take)
        self.b.position_at_end(finish)
        self.b.ret_void()
        (self.fn, self.b, self.entry, self.heap_allocs, self.scope, self.hosts, self.scalars,
         self.closure_error) = saved

        b = self.b
        threads = b.trunc(self._load(I64, self._scalar_ptr(self.layout.threads_slot)), I32)
        gomp = self._libc("GOMP_parallel", ll.VoidType(), [PTR, PTR, I32, I32])
        b.call(gomp, [task, closure, threads, ll.Constant(I32, 0)])
        code = b.load(field_ptr(b, closure, 3), typ=I32)
        with b.if_then(b.icmp_signed("!=", code, ll.Constant(I32, 0)), likely=False):
            free = self._libc("free", ll.VoidType(), [PTR])
            for p in reversed(self.heap_allocs):
                b.call(free, [p])
            if self.closure_error is None:
                b.ret(code)
            else:
                _atomic_store(b, code, self.closure_error)
                b.ret_void()

    def s_Store(self, s):
        t = s.value.type
        host = self.hosts.get(s.name)
        if host is None:
            raise CompileError(f"codegen: store to unknown buffer {s.name}")
        v = self.expr(s.value)
        mem_t = llvm_type(t.element_of(), memory=True)
        if t.is_bool():
            v = self.b.zext(v, llvm_type(t, memory=True))
        align = t.element_of().bytes()
        if t.lanes > 1 and _is_dense(s.index):
            ptr = self.b.gep(host, [self.b.sext(self.expr(s.index.base), I64)], source_etype=mem_t)
            self.b.store(v, ptr, align=align)
        elif t.lanes > 1 and isinstance(s.index, ir.Ramp) and ir.const_int(s.index.stride) is not None:
            # A constant-stride store: lane by lane at base + constant offsets (one address
            # computation, as Halide does), not a scatter through a vector of 64-bit addresses.
            stride = ir.const_int(s.index.stride)
            base = self.b.gep(host, [self.b.sext(self.expr(s.index.base), I64)], source_etype=mem_t)
            for lane in range(t.lanes):
                ptr = self.b.gep(base, [ll.Constant(I64, lane * stride)], source_etype=mem_t)
                self.b.store(self.b.extract_element(v, ll.Constant(I32, lane)), ptr, align=align)
        elif t.lanes > 1:
            ptrs = self._lane_pointers(host, self.expr(s.index), t)
            mask = ll.Constant(ll.VectorType(I1, t.lanes), [1] * t.lanes)
            name = f"llvm.masked.scatter.{self._suffix(t)}.v{t.lanes}p0"
            fn = self._intrinsic(name, ll.VoidType(), [v.type, ptrs.type, I32, mask.type])
            self.b.call(fn, [v, ptrs, ll.Constant(I32, align), mask])
        else:
            ptr = self.b.gep(host, [self.b.sext(self.expr(s.index), I64)], source_etype=mem_t)
            self.b.store(v, ptr, align=align)

    def s_Atomic(self, s):
        """A compare-and-swap loop: read the element, compute the new value from it, retry until
        no other thread changed it in between."""
        st = s.body
        t = st.value.type
        if t.lanes != 1:
            raise CompileError("codegen: vector atomic updates are not supported")
        host = self.hosts[st.name]
        mem_t = llvm_type(t, memory=True)
        bits_t = ll.IntType(max(8, t.bits))
        b = self.b
        ptr = b.gep(host, [b.sext(self.expr(st.index), I64)], source_etype=mem_t)
        loop = self.fn.append_basic_block(f"{s.old}.cas")
        done = self.fn.append_basic_block(f"{s.old}.done")
        pre = b.block
        first = b.load(ptr, typ=bits_t, align=t.bytes())
        b.branch(loop)
        b.position_at_end(loop)
        seen = b.phi(bits_t)
        seen.add_incoming(first, pre)
        old = self._from_bits(seen, t)
        self._bind(s.old, old)
        new = self.expr(st.value)
        self._unbind(s.old)
        pair = b.cmpxchg(ptr, seen, self._to_bits(new, t, bits_t), "monotonic", "monotonic")
        actual = b.extract_value(pair, 0)
        ok = b.extract_value(pair, 1)
        seen.add_incoming(actual, b.block)
        b.cbranch(ok, done, loop)
        b.position_at_end(done)

    def _from_bits(self, v, t: Type):
        if t.is_float():
            return self.b.bitcast(v, llvm_type(t))
        if t.is_bool():
            return self.b.icmp_unsigned("!=", v, ll.Constant(v.type, 0))
        return v

    def _to_bits(self, v, t: Type, bits_t):
        if t.is_float():
            return self.b.bitcast(v, bits_t)
        if t.is_bool():
            return self.b.zext(v, bits_t)
        return v

    def s_IfThenElse(self, s):
        cond = self.expr(s.condition)
        if s.else_case is None:
            with self.b.if_then(cond):
                self.stmt(s.then_case)
        else:
            with self.b.if_else(cond) as (then, otherwise):
                with then:
                    self.stmt(s.then_case)
                with otherwise:
                    self.stmt(s.else_case)

    def s_Allocate(self, s):
        b = self.b
        elem = llvm_type(s.type, memory=True)
        const_extents = [ir.const_int(e) for e in s.extents]
        if all(c is not None for c in const_extents):
            n = 1
            for c in const_extents:
                n *= max(c, 0)
            if n * s.type.bytes() <= STACK_LIMIT:
                with b.goto_block(self.entry):
                    b.position_at_start(self.entry)
                    ptr = b.alloca(elem, size=ll.Constant(I64, max(n, 1)), name=s.name)
                    ptr.align = max(s.type.bytes(), 16)
                    ptr.type = PTR  # opaque, so vector stores through it type-check
                self.hosts[s.name] = ptr
                self.stmt(s.body)
                return
        size = ll.Constant(I64, s.type.bytes())
        for e in s.extents:
            ext = b.sext(self.expr(e), I64)
            ext = b.select(b.icmp_signed("<", ext, ll.Constant(I64, 0)), ll.Constant(I64, 0), ext)
            size = b.mul(size, ext)
        size = b.select(b.icmp_unsigned("==", size, ll.Constant(I64, 0)), ll.Constant(I64, 1), size)
        malloc = self._libc("malloc", PTR, [I64])
        ptr = b.call(malloc, [size], name=s.name)
        failed = self.fn.append_basic_block(f"{s.name}.alloc_failed")
        ok = self.fn.append_basic_block(f"{s.name}.alloc_ok")
        b.cbranch(b.icmp_unsigned("==", ptr, ll.Constant(PTR, None)), failed, ok)
        b.position_at_end(failed)
        assert_id = len(self.asserts)
        self.asserts.append((f"Out of memory allocating {s.name}", 0))
        self._return_error(assert_id + 1)
        b.position_at_end(ok)
        self.hosts[s.name] = ptr
        self.heap_allocs.append(ptr)
        self.stmt(s.body)
        self.heap_allocs.pop()
        b.call(self._libc("free", ll.VoidType(), [PTR]), [ptr])

