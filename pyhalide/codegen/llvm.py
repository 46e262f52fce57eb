"""LLVM IR from the Stmt that is compiled, through llvmlite: expressions and statements.

The Stmt has been through lower_arithmetic, so every operation left has C's meaning and maps to
one or a few LLVM instructions; what that pass removes is refused here (InternalError). The
concerns around the emitter live beside it: the function's arguments and error record
(calling_convention.py), parallel loops and atomics (parallel.py), calls (calls.py) and the
x86 forms of irregular vector loads and stores (x86.py).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

from llvmlite import ir as ll

from .. import ir
from ..errors import InternalError
from ..ir_mutator import has_loop
from ..lowering.bound_small_allocations import STACK_LIMIT, check_explicit_stack, constant_elements, placed_on_stack
from ..lowering.inject_profiling import profiled, profiled_names
from ..lowering.lower_arithmetic import not_lowered
from ..types import Int, Type
from . import calling_convention, heap, parallel, profiler, x86
from .calls import emit_call
from .interrupts import INTERRUPTED
from .jit import host_target
from .llvm_types import I32, I64, PTR, VOID, double_to_half, llvm_type
from .stack_reuse import inject_stack_frees

_PURE = ("add", "sub", "mul", "sdiv", "srem", "udiv", "urem", "shl", "ashr", "lshr", "and_", "or_", "xor",
         "fadd", "fsub", "fmul", "fdiv", "icmp_signed", "icmp_unsigned", "fcmp_ordered", "fcmp_unordered",
         "select", "sext", "zext", "trunc", "sitofp", "uitofp", "fptosi", "fptoui", "fpext", "fptrunc",
         "bitcast", "gep", "insert_element", "extract_element", "shuffle_vector")


_I32 = Int(32)


class _NumberingBuilder(ll.IRBuilder):
    """An IRBuilder that does not emit a pure instruction identical to one already in the current
    block (local value numbering), and returns that one instead. Lowered IR repeats index
    arithmetic a lot (a third to two thirds of the pure instructions of the apps' code): emitting
    it once saves building, printing and parsing it, and LLVM's work deleting it."""

    def __init__(self, block):
        super().__init__(block)
        self._numbers: dict[tuple, ll.Value] = {}


def _hashable(v):
    if isinstance(v, ll.Constant):  # equal by content; hashing one formats it, once
        return v.type, v.get_reference()
    return tuple(_hashable(x) for x in v) if isinstance(v, list | tuple) else v


def _numbered(op: str):
    emit = getattr(ll.IRBuilder, op)

    def numbered(self, *args, name="", **kwargs):
        block = self.block
        if self._anchor != len(block.instructions):  # not appending: an earlier value may come later
            return emit(self, *args, name=name, **kwargs)
        key = (op, block, *map(_hashable, args), *((k, _hashable(v)) for k, v in sorted(kwargs.items())))
        value = self._numbers.get(key)
        if value is None:
            value = self._numbers[key] = emit(self, *args, name=name, **kwargs)
        return value

    numbered.__name__ = op
    return numbered


for _op in _PURE:
    setattr(_NumberingBuilder, _op, _numbered(_op))


@dataclass
class Function:
    """The function being emitted (the pipeline's entry, or a parallel task) and what its
    statements need: the block for allocas, the scalars array, the values and buffers in scope,
    its heap allocations (freed on every exit) and how it leaves with an error code."""

    fn: ll.Function
    b: ll.IRBuilder
    entry: ll.Block
    leave_with_error: Callable[[ll.IRBuilder, ll.Value], None] | None
    scalars: ll.Value | None = None
    scope: dict[str, list] = field(default_factory=dict)
    hosts: dict[str, ll.Value] = field(default_factory=dict)
    heap_allocs: list[ll.Value] = field(default_factory=list)
    in_task: bool = False  # a parallel loop's task: the storage it allocates stays its thread's
    profiler_token: ll.Value | None = None  # in a profiled task: whether it holds the sampling token (profiler.py)
    # Stack slots (StackSlot) of this function: those of the storage in scope, by name, and those
    # a Free has released, for the next Allocate of that type that fits (stack_reuse.py)
    live_slots: dict[str, list] = field(default_factory=dict)
    free_slots: list = field(default_factory=list)


@dataclass
class StackSlot:
    ptr: ll.Value  # the alloca, in the function's entry block
    type: Type  # of its elements (a Halide type)
    count: int  # elements it holds
    tag: str  # the buffer whose alias-analysis tag its accesses carry (the first one it held)


class CodeGen:
    def __init__(self, lowered, stmt, fn_name: str, axis_maps: list[list[int]], fp_contract: bool = False,
                 gpu_loops_serial: bool = False, cpu_features: str | None = None, pointer_bits: int = 64,
                 cpu: str | None = None):
        self.lowered = lowered
        self.padded: set[str] = set()  # storage allocated here with x86.WORD_PADDING after it
        self.extern_functions: dict[str, list] = {}  # the C functions extern stages call -> argument types
        # The LLVM features of the CPU compiled for: this host's (the JIT), or an object file's
        # target, which may not be an x86 one (the x86 intrinsics are then not used).
        self.cpu_features = set((host_target().features if cpu_features is None else cpu_features).split(","))
        self.cpu = host_target().cpu if cpu is None else cpu  # LLVM's name of the CPU, e.g. znver4
        self.x86 = cpu_features is None or "+sse2" in self.cpu_features
        self.size_type = ll.IntType(pointer_bits)  # C's size_t, for the C library's functions
        self.body = stmt
        # GPU block and thread loops as serial loops: the meaning of a GPU schedule, on the CPU.
        self.gpu_loops_serial = gpu_loops_serial
        # Exact IEEE results unless the target asks for fused multiply-adds ("fp_contract").
        self.float_flags = ["contract"] if fp_contract else []
        self.fn_name = fn_name
        self.axis_maps = axis_maps
        self.module = ll.Module(name=fn_name)
        self.asserts: list[tuple[str, tuple]] = []  # per assert id: message, whether each value is a float
        self.layout = calling_convention.ScalarLayout()
        self._strings: dict[str, ll.GlobalVariable] = {}
        self._rules: dict[type, Callable] = {}
        self._constants: dict[tuple, ll.Constant] = {}
        self._alias_root: ll.MDValue | None = None  # made with the first tag
        self._alias_tags: dict[str, ll.MDValue] = {}
        # storage in scope in a reused stack slot -> the buffer whose tag the slot's accesses
        # carry: one tag for all the storage a slot holds, so that LLVM keeps their accesses in
        # order (as Halide names a reused allocation after the first)
        self._slot_tags: dict[str, str] = {}
        self.loop_depth = 0  # Fors around the statement being emitted, through parallel tasks
        # Profiled (target feature "profile"): the Funcs' ids in the profiler's report, and the
        # largest stack allocation of each (profiler.py)
        env = getattr(lowered, "env", None)
        self.profiler_ids = ({n: k for k, n in enumerate(profiled_names(env))}
                             if env is not None and profiled(env.target) else None)
        self.profiler_stack: dict[int, int] = {}
        self.f: Function

    def generate(self, python_entry: bool = True) -> str:
        """The module's text; with `python_entry`, the entry is also a Python builtin (the JIT's)."""
        fn = calling_convention.declare_entry(self.module, self.fn_name, len(self.lowered.buffers))
        with self.emitting_into(fn, lambda b, code: b.ret(code)):
            self.layout = calling_convention.bind_arguments(self, self.lowered, self.axis_maps)
            self.stmt(inject_stack_frees(self.body))
            if not self.b.block.is_terminated:
                self.b.ret(ll.Constant(I32, 0))
        if python_entry:
            calling_convention.define_direct_entry(self.module, fn)
        return str(self.module)

    # ------------------------------------------------------------------ helpers
    @property
    def b(self) -> ll.IRBuilder:
        return self.f.b

    @contextmanager
    def emitting_into(self, fn: ll.Function, leave_with_error=None, in_task: bool = False):
        """Emit into fn (from its new entry block) until the block ends; yields the builder."""
        saved = getattr(self, "f", None)
        entry = fn.append_basic_block("entry")
        self.f = Function(fn, _NumberingBuilder(entry), entry, leave_with_error, in_task=in_task)
        try:
            yield self.f.b
        finally:
            self.f = saved

    def bind(self, name: str, value):
        self.f.scope.setdefault(name, []).append(value)

    def unbind(self, name: str):
        self.f.scope[name].pop()

    def declare(self, name: str, ret: ll.Type, args: list[ll.Type], var_arg: bool = False) -> ll.Function:
        """A function of the C library, the thread pool or LLVM, declared once per module."""
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ll.Function(self.module, ll.FunctionType(ret, args, var_arg=var_arg), name)
        return fn

    def alloca_in_entry(self, ty: ll.Type, name: str, size=None):
        """Stack memory allocated once per call of the function, not once per loop iteration."""
        b = self.b
        with b.goto_block(self.f.entry):
            b.position_at_start(self.f.entry)
            return b.alloca(ty, size=size, name=name)

    def tagged(self, access, buffer: str):
        """A load or store marked as touching `buffer` only (LLVM's type-based alias analysis, one
        type per buffer, as Halide tags its accesses): a store to one buffer then does not make
        LLVM load another again (bilateral_grid's histogram re-read its input pixel after each
        bin's update)."""
        buffer = self._slot_tags.get(buffer, buffer)  # (storage in a reused stack slot: the slot's tag)
        tag = self._alias_tags.get(buffer)
        if tag is None:
            if self._alias_root is None:
                self._alias_root = self.module.add_metadata([ll.MetaDataString(self.module, "pyhalide buffers")])
            node = self.module.add_metadata([ll.MetaDataString(self.module, buffer), self._alias_root,
                                             ll.Constant(I64, 0)])
            tag = self._alias_tags[buffer] = self.module.add_metadata([node, node, ll.Constant(I64, 0)])
        access.set_metadata("tbaa", tag)
        return access

    def free_heap_allocations(self):
        free = self.declare(heap.FREE, VOID, [PTR])
        for p in reversed(self.f.heap_allocs):
            self.b.call(free, [p])

    def string_constant(self, s: str):
        g = self._strings.get(s)
        if g is None:
            data = bytearray(s.encode() + b"\0")
            ty = ll.ArrayType(ll.IntType(8), len(data))
            g = ll.GlobalVariable(self.module, ty, name=f".str{len(self._strings)}")
            g.global_constant = True
            g.linkage = "private"
            g.initializer = ll.Constant(ty, data)
            self._strings[s] = g
        return g

    def _rule(self, node, prefix: str) -> Callable:
        cls = type(node)
        rule = self._rules.get(cls)
        if rule is None:
            rule = getattr(self, prefix + cls.__name__, None)
            if rule is None:
                raise InternalError(f"codegen: no rule for {cls.__name__}")
            self._rules[cls] = rule
        return rule

    # ------------------------------------------------------------------ expressions
    def expr(self, e: ir.Expr):
        return self._rule(e, "e_")(e)

    def e_IntImm(self, e):
        return self._constant(llvm_type(e.type), e.value, e.value)

    def e_FloatImm(self, e):
        return self._constant(llvm_type(e.type), e.value, struct.pack("<d", e.value))  # -0.0 is not 0.0

    def _constant(self, ty: ll.Type, value, key):
        """One object per distinct constant: numbering instructions hashes their operands."""
        c = self._constants.get((ty, key))
        if c is None:
            c = self._constants[ty, key] = ll.Constant(ty, value)
        return c

    def e_StringImm(self, e):
        return self.string_constant(e.value)

    def e_Variable(self, e):
        stack = self.f.scope.get(e.name)
        if not stack:
            raise InternalError(f"codegen: variable {e.name} is not defined")
        return stack[-1]

    def e_Let(self, e):
        self.bind(e.name, self.expr(e.value))
        try:
            return self.expr(e.body)
        finally:
            self.unbind(e.name)

    def e_Broadcast(self, e):
        return self.splat(self.expr(e.value), e.lanes)

    def splat(self, v, lanes: int):
        vt = ll.VectorType(v.type, lanes)
        if isinstance(v, ll.Constant):
            return self._constant(vt, [v.constant] * lanes, (v.get_reference(), lanes))
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
            not_lowered("cast to bool")
        return self.cast(self.expr(e.value), e.value.type, e.type)

    def cast(self, v, src: Type, dst: Type):
        """C's conversions (to bool is lowered to a compare before codegen)."""
        b = self.b
        lt = llvm_type(dst)
        if src.element_of() == dst.element_of():
            return v
        if src.is_float() and dst.is_float():
            if src.bits == 64 and dst.bits == 16:
                return double_to_half(b, v)
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
        flags = ["nsw"] if e.type.is_int() and e.type.bits >= 32 else []  # as Halide: no signed overflow
        return getattr(self.b, int_op)(a, b, flags=flags)

    def e_Add(self, e):
        return self._arith(e, "add", "fadd")

    def e_Sub(self, e):
        return self._arith(e, "sub", "fsub")

    def e_Mul(self, e):
        return self._arith(e, "mul", "fmul")

    def e_Div(self, e):
        if not e.type.is_float():
            not_lowered("integer division")
        return self.b.fdiv(self.expr(e.a), self.expr(e.b))

    def e_Mod(self, e):
        not_lowered("modulo")

    def _minmax(self, e, op: str):
        t = e.type
        if t.is_float():
            not_lowered("float min/max")
        a, b = self.expr(e.a), self.expr(e.b)
        cmp = self.b.icmp_signed(op, a, b) if t.is_int() else self.b.icmp_unsigned(op, a, b)
        return self.b.select(cmp, a, b)

    def e_Min(self, e):
        return self._minmax(e, "<")

    def e_Max(self, e):
        return self._minmax(e, ">")

    def _compare(self, e, op: str):
        a, b = self.expr(e.a), self.expr(e.b)
        t = e.a.type
        if t.is_float():
            if op == "!=":
                return self.b.fcmp_unordered(op, a, b)  # true for NaN, as in C
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

    def e_Call(self, e):
        return emit_call(self, e)

    def _host(self, name: str):
        host = self.f.hosts.get(name)
        if host is None:
            raise InternalError(f"codegen: buffer {name} is not allocated here")
        return host

    def _element_ptr(self, host, index: ir.Expr, t: Type):
        return self.b.gep(host, [self.index64(index)], source_etype=llvm_type(t.element_of(), True))

    def index64(self, e: ir.Expr):
        """A scalar Int32 index as a 64-bit value, widened at its leaves: the sums and products
        of an index are done in 64 bits (as Halide does), so LLVM sees `base + i` with i the
        loop's own 64-bit counter, not a 32-bit sum sign-extended on every iteration. Exact
        wherever the 32-bit arithmetic was (indices fit 32 bits: the buffer checks)."""
        if isinstance(e, ir.Add | ir.Sub | ir.Mul) and e.type == _I32:
            a, b = self.index64(e.a), self.index64(e.b)
            op = {ir.Add: "add", ir.Sub: "sub", ir.Mul: "mul"}[type(e)]
            return getattr(self.b, op)(a, b, flags=["nsw"])
        if isinstance(e, ir.IntImm):
            return ll.Constant(I64, e.value)
        return self.b.sext(self.expr(e), I64)

    def e_Load(self, e):
        t = e.type
        host = self._host(e.name)
        b = self.b
        mem_t = llvm_type(t.element_of(), memory=True)
        align = t.element_of().bytes()
        if t.lanes == 1:
            v = self.tagged(b.load(self._element_ptr(host, e.index, t), typ=mem_t, align=align), e.name)
        elif _is_dense(e.index):
            v = self.tagged(b.load(self._element_ptr(host, e.index.base, t), typ=llvm_type(t, memory=True),
                                   align=align), e.name)
        elif isinstance(e.index, ir.Broadcast):
            v = self.splat(self.tagged(b.load(self._element_ptr(host, e.index.value, t), typ=mem_t, align=align),
                                       e.name), t.lanes)
        else:
            last_word = self.f.scope.get(f"{e.name}.last_word")
            v = x86.load(self, host, e.index, t, padded=e.name in self.padded,
                         last_word=last_word[-1] if last_word else None)
        if t.is_bool():
            zero = ll.Constant(v.type, 0) if t.lanes == 1 else ll.Constant(v.type, [0] * t.lanes)
            return b.icmp_unsigned("!=", v, zero)
        return v

    # ------------------------------------------------------------------ statements
    def stmt(self, s: ir.Stmt):
        self._rule(s, "s_")(s)

    def s_Block(self, s):
        for sub in s.stmts:
            self.stmt(sub)

    def s_LetStmt(self, s):
        names = []
        while isinstance(s, ir.LetStmt):  # iterate chains of lets instead of recursing
            self.bind(s.name, self.expr(s.value))
            names.append(s.name)
            s = s.body
        self.stmt(s)
        for n in reversed(names):
            self.unbind(n)

    def s_ProducerConsumer(self, s):
        self.stmt(s.body)

    def s_Evaluate(self, s):
        self.expr(s.value)

    def s_AssertStmt(self, s):
        cond = self.expr(s.condition)
        assert_id = len(self.asserts)
        self.asserts.append((s.message, tuple(a.type.is_float() for a in s.args)))
        fail = self.f.fn.append_basic_block(f"assert_failed{assert_id}")
        ok = self.f.fn.append_basic_block(f"assert_ok{assert_id}")
        self.b.cbranch(cond, ok, fail)
        self.b.position_at_end(fail)
        calling_convention.store_error_values(self, s.args)
        self.return_error(assert_id + 1)
        self.b.position_at_end(ok)

    def return_error(self, code: int):
        """Leave the current function with an error, freeing what it allocated on the heap."""
        calling_convention.store_error_code(self, code)
        self.free_heap_allocations()
        self.f.leave_with_error(self.b, ll.Constant(I32, code))

    def s_For(self, s):
        self.loop_depth += 1
        try:
            if s.for_type == ir.PARALLEL:
                parallel.emit_parallel_for(self, s)
            elif s.for_type in (ir.SERIAL, ir.UNROLLED, ir.VECTORIZED) or self.gpu_loops_serial:
                self._serial_for(s.name, self.expr(s.min), self.expr(s.extent), s.body)
            else:  # lowering refuses GPU loops for a CPU target; gpu_kernels takes them out for CUDA
                raise InternalError(f"codegen: loop {s.name} of kind {s.for_type} reached the CPU code generator")
        finally:
            self.loop_depth -= 1

    def interrupt_flag(self):
        """The value of the interrupt flag now (an atomic read through the scalars' address)."""
        b = self.b
        address = b.load(calling_convention.scalar_ptr(b, self.f.scalars, self.layout.interrupt_slot), typ=I64)
        return b.load_atomic(b.inttoptr(address, PTR), "monotonic", 4, typ=I32)

    def poll_interrupt(self):
        """Leave with INTERRUPTED if SIGINT arrived (each iteration of an outermost loop nest)."""
        b = self.b
        with b.if_then(b.icmp_signed("!=", self.interrupt_flag(), ll.Constant(I32, 0)), likely=False):
            self.return_error(INTERRUPTED)

    def _serial_for(self, name: str, lo, extent, body_stmt):
        b = self.b
        end = b.add(lo, extent, flags=["nsw"])
        pre = b.block
        header = self.f.fn.append_basic_block(f"{name}.header")
        body = self.f.fn.append_basic_block(f"{name}.body")
        done = self.f.fn.append_basic_block(f"{name}.end")
        b.branch(header)
        b.position_at_end(header)
        i = b.phi(I32, name=name)
        i.add_incoming(lo, pre)
        b.cbranch(b.icmp_signed("<", i, end), body, done)
        b.position_at_end(body)
        if self.loop_depth == 1 and has_loop(body_stmt):
            self.poll_interrupt()
        self.bind(name, i)
        self.stmt(body_stmt)
        self.unbind(name)
        nxt = b.add(i, ll.Constant(I32, 1), flags=["nsw"])
        i.add_incoming(nxt, b.block)
        b.branch(header)
        b.position_at_end(done)

    def s_Store(self, s):
        t = s.value.type
        host = self._host(s.name)
        v = self.expr(s.value)
        if t.is_bool():
            v = self.b.zext(v, llvm_type(t, memory=True))
        align = t.element_of().bytes()
        if t.lanes == 1:
            self.tagged(self.b.store(v, self._element_ptr(host, s.index, t), align=align), s.name)
        elif _is_dense(s.index):
            self.tagged(self.b.store(v, self._element_ptr(host, s.index.base, t), align=align), s.name)
        else:
            x86.store(self, host, s.index, v, t)

    def s_Atomic(self, s):
        parallel.emit_atomic(self, s)

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
        """On the stack when the size is constant and small (or store_in asked for Stack or
        Register); else, with memory type Auto, on the stack when the size the code computes is
        at most STACK_LIMIT bytes (released when the storage goes out of scope: a Func computed
        per vector inside a loop, whose size is known only at run time, was malloc'd and freed
        per vector, half of interpolate's autoscheduled time); else malloc'd and freed on every
        way out."""
        b = self.b
        check_explicit_stack(s)
        n = constant_elements(s)
        padding = x86.WORD_PADDING if s.type.bytes() < 4 else 0  # (see x86.load)
        if padding:
            self.padded.add(s.name)
        if n is not None:
            if placed_on_stack(s):
                count = max(n, 1) + -(-padding // s.type.bytes())
                slot = self._stack_slot(s, n, count)
                if self.profiler_ids is not None:
                    k = self._profiled_func(s.name)
                    self.profiler_stack[k] = max(self.profiler_stack.get(k, 0), count * s.type.bytes())
                reused = slot.tag != s.name
                if reused:
                    before = self._slot_tags.get(s.name)
                    self._slot_tags[s.name] = slot.tag
                self.f.live_slots.setdefault(s.name, []).append(slot)
                self._with_host(s.name, slot.ptr, s.body)
                live = self.f.live_slots[s.name]
                if live and live[-1] is slot:  # (no Free in its body: stack_reuse.py puts one in every body)
                    live.pop()
                if reused:
                    if before is None:
                        del self._slot_tags[s.name]
                    else:
                        self._slot_tags[s.name] = before
                return
        size = ll.Constant(I64, s.type.bytes())
        for e in s.extents:
            ext = b.sext(self.expr(e), I64)
            ext = b.select(b.icmp_signed("<", ext, ll.Constant(I64, 0)), ll.Constant(I64, 0), ext)
            size = b.mul(size, ext)
        size = b.select(b.icmp_unsigned("==", size, ll.Constant(I64, 0)), ll.Constant(I64, 1), size)
        if padding:
            size = b.add(size, ll.Constant(I64, padding))
        saved = None
        if n is None and s.memory_type == "Auto":
            saved = b.call(self.declare("llvm.stacksave.p0", PTR, []), [])
            stack_bb = self.f.fn.append_basic_block(f"{s.name}.on_stack")
            heap_bb = self.f.fn.append_basic_block(f"{s.name}.on_heap")
            b.cbranch(b.icmp_unsigned("<=", size, ll.Constant(I64, STACK_LIMIT)), stack_bb, heap_bb)
            b.position_at_end(stack_bb)
            on_stack = b.alloca(ll.IntType(8), size, name=f"{s.name}.stack")
            on_stack.align = 64
            stack_end = b.block
            b.position_at_end(heap_bb)
        # storage a parallel task allocates stays its thread's (heap.py)
        shared = ll.Constant(I32, 0 if self.f.in_task else 1)
        ptr = b.call(self.declare(heap.MALLOC, PTR, [I64, I32]), [size, shared], name=s.name)
        failed = self.f.fn.append_basic_block(f"{s.name}.alloc_failed")
        ok = self.f.fn.append_basic_block(f"{s.name}.alloc_ok")
        b.cbranch(b.icmp_unsigned("==", ptr, ll.Constant(PTR, None)), failed, ok)
        b.position_at_end(failed)
        assert_id = len(self.asserts)
        self.asserts.append((f"Out of memory allocating {s.name}", ()))
        self.return_error(assert_id + 1)
        b.position_at_end(ok)
        if self.profiler_ids is not None:
            profiler.heap_allocated(self, self._profiled_func(s.name), size)
        heap_ptr = malloced = ptr
        if saved is not None:
            join = self.f.fn.append_basic_block(f"{s.name}.allocated")
            b.branch(join)
            b.position_at_end(stack_end)
            b.branch(join)
            b.position_at_end(join)
            ptr = b.phi(PTR, name=f"{s.name}.storage")
            ptr.add_incoming(on_stack, stack_end)
            ptr.add_incoming(malloced, ok)
            heap_ptr = b.phi(PTR, name=f"{s.name}.heap")  # null on the stack: pyhalide_free ignores it
            heap_ptr.add_incoming(ll.Constant(PTR, None), stack_end)
            heap_ptr.add_incoming(malloced, ok)
        self.f.heap_allocs.append(heap_ptr)
        self._with_host(s.name, ptr, s.body)
        self.f.heap_allocs.pop()
        if self.profiler_ids is not None:
            on_heap = b.select(b.icmp_unsigned("==", heap_ptr, ll.Constant(PTR, None)), ll.Constant(I64, 0), size)
            profiler.heap_allocated(self, self._profiled_func(s.name), on_heap, freed=True)
        b.call(self.declare(heap.FREE, VOID, [PTR]), [heap_ptr])
        if saved is not None:
            b.call(self.declare("llvm.stackrestore.p0", VOID, [PTR]), [saved])

    def _stack_slot(self, s: ir.Allocate, n: int, count: int) -> StackSlot:
        """A stack slot for `count` elements of s's type: the first one a Free in this function
        has released that is of that type and large enough (CodeGen_Posix's free stack
        allocations; a parallel task is a function of its own), else a new one."""
        free = self.f.free_slots
        for i, slot in enumerate(free):
            if slot.type == s.type and slot.count >= count:
                return free.pop(i)
        ptr = self.alloca_in_entry(llvm_type(s.type, memory=True), s.name, ll.Constant(I64, count))
        # a cache line where it holds a vector: an AVX-512 load or store then never straddles two
        ptr.align = max(s.type.bytes(), 64 if n * s.type.bytes() >= 64 else 16)
        ptr.type = PTR  # opaque, so vector stores through it type-check
        return StackSlot(ptr, s.type, count, s.name)

    def s_Free(self, s):
        """Storage nothing uses any more: its stack slot may hold the next allocation's."""
        live = self.f.live_slots.get(s.name)
        if live:
            self.f.free_slots.append(live.pop())

    def _profiled_func(self, storage: str) -> int:
        """The profiler's id of the Func a buffer holds (f, or f.0 for a Tuple's value 0; the
        overhead's for storage of no Func)."""
        ids = self.profiler_ids
        return ids.get(storage, ids.get(storage.rsplit(".", 1)[0], 0))

    def _with_host(self, name: str, ptr, body) -> None:
        """Emit body with `name` stored at ptr; outside it the name means what it meant before (a
        Func realized twice in one pipeline: a parallel loop after the first realization must not
        capture that one's pointer)."""
        before = self.f.hosts.get(name)
        self.f.hosts[name] = ptr
        self.stmt(body)
        if before is None:
            del self.f.hosts[name]
        else:
            self.f.hosts[name] = before


def _is_dense(index: ir.Expr) -> bool:
    return isinstance(index, ir.Ramp) and ir.const_int(index.stride) == 1
