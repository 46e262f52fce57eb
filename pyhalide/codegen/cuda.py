"""CUDA C from the kernels gpu_kernels extracted: one `extern "C" __global__` function each.

Scalar statements and expressions print as c_printer.py prints them for every device; here are
what kernels add: block and thread indices, shared allocations as `__shared__` arrays declared
where they are (local ones plain arrays), atomic updates as atomicAdd or compare-and-swap loops,
runs of neighbouring accesses as vector accesses (cuda_vectors), dot products as dp4a.

The same source also compiles as C++ for the CPU (`#ifndef __CUDACC__`: a small emulation layer
runs a block's threads as std::threads meeting at std::barrier, block after block), which is how the generated
code itself is tested on machines without a GPU (gpu_runtime.EmulatedDevice).
"""

from __future__ import annotations

import re

from .. import ir
from ..errors import CompileError, InternalError
from ..ir_mutator import free_variables
from ..lowering.gpu_kernels import (
    BARRIER,
    BLOCK_IDS,
    LOCAL,
    SHARED,
    THREAD_IDS,
    Kernel,
    Touches,
    shared_offset_name,
    statements,
)
from ..types import Type
from .c_printer import HELPERS, CPrinter, bit_helpers, c_type
from .cuda_vectors import Group, Lets, Plan, plan_region, vector_lanes

_C_IDS = {**{n: f"((int32_t)blockIdx.{'xyz'[i]})" for i, n in enumerate(BLOCK_IDS)},
          **{n: f"((int32_t)threadIdx.{'xyz'[i]})" for i, n in enumerate(THREAD_IDS)}}

PRELUDE = r"""
#ifdef __CUDACC__
#ifdef __CUDACC_RTC__
typedef signed char int8_t; typedef short int16_t; typedef int int32_t; typedef long long int64_t;
typedef unsigned char uint8_t; typedef unsigned short uint16_t; typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#else
#include <cstdint>
#endif
#define HL_DEVICE __device__ __forceinline__
#define HL_DYNAMIC_SHARED extern __shared__ __align__(16) unsigned char hl_dynamic_shared[]
#else
// Emulation on the CPU: each block's threads are std::threads that meet at a std::barrier.
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>
struct hl_dim3 { unsigned int x, y, z; };
static thread_local hl_dim3 threadIdx, blockIdx;
static thread_local std::barrier<> *hl_block_barrier;
static unsigned char *hl_dynamic_shared_memory;  // the block's dynamic shared memory (blocks run one at a time)
#define HL_DYNAMIC_SHARED unsigned char *const hl_dynamic_shared = hl_dynamic_shared_memory
#define HL_DEVICE static inline
#define __global__
#define __shared__ static
#define __restrict__ __restrict
#define __launch_bounds__(n)
static inline void __syncthreads() { hl_block_barrier->arrive_and_wait(); }
template <typename T> static inline T atomicCAS(T *p, T expected, T desired) {
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;
}
template <typename T> static inline T atomicAdd(T *p, T v) {
    T seen, want;
    __atomic_load(p, &seen, __ATOMIC_SEQ_CST);
    do {
        want = seen + v;
    } while (!__atomic_compare_exchange(p, &seen, &want, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
    return seen;
}
""" + bit_helpers(CPrinter.BIT_FUNCTIONS) + r"""
using std::isnan; using std::isinf; using std::isfinite;
template <typename F> static void hl_emulate(const int64_t *grid, const int *block, int64_t shared_bytes, F body) {
    // One std::thread per GPU thread of a block, for the whole launch: they run the blocks one
    // after another, meeting at a barrier after each (its shared memory is then reused).
    const int threads = block[0] * block[1] * block[2];
    std::vector<unsigned char> dynamic_shared((size_t)shared_bytes + 16);
    hl_dynamic_shared_memory = dynamic_shared.data() + (16 - (uintptr_t)dynamic_shared.data() % 16) % 16;
    std::barrier<> sync(threads);
    std::vector<std::thread> team;
    for (int t = 0; t < threads; t++) {
        team.emplace_back([&, t] {
            threadIdx = {(unsigned)(t % block[0]), (unsigned)(t / block[0] % block[1]),
                         (unsigned)(t / (block[0] * block[1]))};
            hl_block_barrier = &sync;
            for (int64_t bz = 0; bz < grid[2]; bz++)
            for (int64_t by = 0; by < grid[1]; by++)
            for (int64_t bx = 0; bx < grid[0]; bx++) {
                blockIdx = {(unsigned)bx, (unsigned)by, (unsigned)bz};
                body();
                sync.arrive_and_wait();
            }
        });
    }
    for (auto &th : team) th.join();
}
template <typename T> static inline T hl_arg(int64_t bits) { return (T)bits; }
template <> inline float hl_arg<float>(int64_t bits) { double d; memcpy(&d, &bits, 8); return (float)d; }
template <> inline double hl_arg<double>(int64_t bits) { double d; memcpy(&d, &bits, 8); return d; }
#endif
// A run of N elements read or written as one aligned access (cuda_vectors): LDG.128 and the like
template <typename T, int N> struct alignas(sizeof(T) * N) hl_vec { T v[N]; };
// four bytes, or two 16-bit halves, as one word, the first lowest (the operands of dp4a, dp2a)
HL_DEVICE unsigned int hl_bytes4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
    return a | (unsigned int)b << 8 | (unsigned int)c << 16 | (unsigned int)d << 24;
}
HL_DEVICE unsigned int hl_halves2(uint16_t a, uint16_t b) { return a | (unsigned int)b << 16; }
""" + HELPERS + "\n"


# float16, in the translation units that use it (NVRTC finds cuda_fp16.h only where the toolkit's
# headers are): stored as half, computed in float, each result rounded to float16 (as Halide)
_HALF_HELPERS = r"""
#ifdef __CUDACC__
#include <cuda_fp16.h>
typedef __half hl_half;
HL_DEVICE hl_half hl_f16(float f) { return __float2half_rn(f); }
HL_DEVICE hl_half hl_f16(double d) { return __double2half(d); }
HL_DEVICE float hl_f32(hl_half h) { return __half2float(h); }
HL_DEVICE hl_half hl_half_bits(unsigned short bits) { return __ushort_as_half(bits); }
#else
// g++'s _Float16, computed in float as on the GPU (no excess precision is relied on)
typedef _Float16 hl_half;
static inline hl_half hl_f16(float f) { return (hl_half)f; }
static inline hl_half hl_f16(double d) { return (hl_half)d; }
static inline float hl_f32(hl_half h) { return (float)h; }
static inline hl_half hl_half_bits(uint16_t bits) { hl_half h; memcpy(&h, &bits, 2); return h; }
template <> inline hl_half hl_arg<hl_half>(int64_t bits) { double d; memcpy(&d, &bits, 8); return (hl_half)d; }
#endif
""".strip()


def _dot_product_helper(wide: int, half: str, signs: str) -> str:
    """The name of the helper for PTX's dp4a (wide 8) or dp2a.lo/.hi (wide 16: the 16-bit pair
    against bytes 0-1 or 2-3 of the other word), of operands signed (s) or not (u) as `signs` says."""
    return f"hl_dp{4 if wide == 8 else 2}a{'_' + half if half else ''}_{signs}"


def _dot_product_helpers() -> str:
    """Every dp4a / dp2a helper: inline PTX on the GPU, the same sums in C++ for the emulation
    (32-bit wrap-around, as the instructions)."""
    cuda, cpu = [], []
    for wide, halves in ((8, [""]), (16, ["lo", "hi"])):
        for half in halves:
            for signs in ("ss", "su", "us", "uu"):
                name = _dot_product_helper(wide, half, signs)
                op = f"dp{4 if wide == 8 else 2}a{'.' + half if half else ''}.{signs[0]}32.{signs[1]}32"
                head = f"HL_DEVICE int {name}(unsigned int a, unsigned int b, int c)"
                cuda.append(f'{head} {{ int d; asm("{op} %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c)); '
                            "return d; }")
                n, first = (4, 0) if wide == 8 else (2, 2 * (half == "hi"))
                cpu.append(f"{head} {{ return hl_dot(a, b, c, {wide}, {str(signs[0] == 's').lower()}, "
                           f"{str(signs[1] == 's').lower()}, {first}, {n}); }}")
    emulation = r"""static inline int hl_lane(unsigned int w, int bits, int i, bool is_signed) {
    unsigned int v = (w >> (bits * i)) & ((1u << bits) - 1);
    return (int)(is_signed && (v >> (bits - 1)) ? v | ~((1u << bits) - 1) : v);
}
static inline int hl_dot(unsigned int a, unsigned int b, int c, int bits, bool sa, bool sb, int first, int n) {
    unsigned int sum = (unsigned int)c;
    for (int i = 0; i < n; i++) sum += (unsigned int)(hl_lane(a, bits, i, sa) * hl_lane(b, 8, first + i, sb));
    return (int)sum;
}"""
    return "\n".join(["#ifdef __CUDACC__", *cuda, "#else", emulation, *cpu, "#endif"])


def _dot_term(s: ir.Stmt, memory: dict) -> tuple | None:
    """(name, index, type, A, B) of a statement `name[index] += Out(A) * Out(B)`, Out a 32-bit
    integer type and A, B loads of 8- or 16-bit integers (an atomic one only of a thread's own
    array); else None."""
    old = None
    if isinstance(s, ir.Atomic):
        if memory.get(s.body.name) != "local":
            return None
        old, s = s.old, s.body
    if not isinstance(s, ir.Store) or s.predicate is not None or not isinstance(s.value, ir.Add):
        return None
    t = s.value.type
    if t.bits != 32 or t.is_float() or t.lanes != 1:
        return None
    for acc, product in ((s.value.a, s.value.b), (s.value.b, s.value.a)):
        current = (isinstance(acc, ir.Variable) and acc.name == old) if old is not None else (
            isinstance(acc, ir.Load) and acc.name == s.name and acc.index == s.index and acc.predicate is None)
        if current and isinstance(product, ir.Mul):
            a, b = (_widened_small(x, t) for x in (product.a, product.b))
            if a is not None and b is not None:
                return s.name, s.index, t, a, b
    return None


def _widened_small(e: ir.Expr, t: Type) -> ir.Load | None:
    if isinstance(e, ir.Cast) and e.type == t and isinstance(e.value, ir.Load) and e.value.predicate is None:
        small = e.value.type
        if small.bits in (8, 16) and not small.is_bool() and not small.is_float() and small.lanes == 1:
            return e.value
    return None


def _constant_size(a: ir.Allocate) -> bool:
    return all(ir.const_int(e) is not None for e in a.extents)


class CudaPrinter(CPrinter):
    """Prints one kernel."""

    def __init__(self, kernel: Kernel):
        super().__init__()
        self.kernel = kernel
        self.lets = Lets()  # the lets in scope, resolved (to find consecutive accesses)
        self.memory = {b.name: "global" for b in kernel.buffers}  # buffer -> global, shared or local
        self.plan: Plan | None = None  # the vector accesses of the region being printed
        self.segment = 0  # which stretch between barriers of that region
        self.vectors: dict[Group, list] = {}  # a group printed (in part): [C name, lanes done, address]
        self.touched = Touches()

    def ref(self, name: str) -> str:
        return _C_IDS[name] if name in _C_IDS else super().ref(name)

    def where(self) -> str:
        return f"kernel {self.kernel.name}"

    def let_entered(self, name: str, value: ir.Expr) -> None:
        self.lets.push(name, value)

    def let_left(self, name: str) -> None:
        self.lets.pop(name)

    # -- the kernel
    def kernel_text(self) -> str:
        k = self.kernel
        params = []
        for b in k.buffers:
            const = "" if b.written else "const "
            params.append(f"{const}{c_type(b.type, memory=True)} *__restrict__ {self.bind(b.name)}")
        for name, t in k.scalars:
            params.append(f"{c_type(t)} {self.bind(name)}")
        if any(isinstance(a, ir.Allocate) and a.memory_type == SHARED and not _constant_size(a)
               for a in statements(k.body)):
            self.emit("HL_DYNAMIC_SHARED;")
        self.region(k.body)
        bounds = "" if k.threads is None else f"__launch_bounds__({k.threads[0] * k.threads[1] * k.threads[2]}) "
        head = f'extern "C" __global__ void {bounds}{k.name}({", ".join(params)}) {{'
        return "\n".join([head, *self.lines, "}", self._emulation_entry(params)])

    def _emulation_entry(self, params: list[str]) -> str:
        """`NAME_emulated(grid, block, args)`: the kernel run on the CPU, its arguments as int64s
        (device pointers, integers, floats as the bits of a double)."""
        k = self.kernel
        args = []
        for i, b in enumerate(k.buffers):
            const = "" if b.written else "const "
            args.append(f"({const}{c_type(b.type, memory=True)} *)(intptr_t)args[{i}]")
        for j, (_, t) in enumerate(k.scalars):
            args.append(f"hl_arg<{c_type(t)}>(args[{len(k.buffers) + j}])")
        return (f'#ifndef __CUDACC__\nextern "C" void {k.name}_emulated(const int64_t *grid, const int *block, '
                f"int64_t shared_bytes, const int64_t *args) {{\n    hl_emulate(grid, block, shared_bytes, [&] {{ "
                f"{k.name}({', '.join(args)}); }});\n}}\n#endif")

    # -- statements
    def region(self, s: ir.Stmt) -> None:
        """Print straight-line code (a kernel's body, a loop's body, a branch) with the vector
        accesses planned for it (cuda_vectors)."""
        outer = self.plan, self.segment, self.vectors
        self.plan = plan_region(s, self.lets, self.in_device_memory, self.touched)
        self.segment, self.vectors = 0, {}
        self.stmt(s)
        self.plan, self.segment, self.vectors = outer

    def nested(self, s: ir.Stmt) -> None:
        self.indent += 1
        self.region(s)
        self.indent -= 1

    def in_device_memory(self, name: str) -> bool:
        """Global or shared: where vector accesses are planned (a thread's array is registers)."""
        return self.memory.get(name) in ("global", "shared")

    def access(self, kind: str, name: str, t: Type, index: ir.Expr, predicate) -> tuple[Group, int] | None:
        """The vector group and lane of an access (kind: loads or stores), where the region's plan
        has one."""
        if self.plan is None or predicate is not None or not self.in_device_memory(name) or not vector_lanes(t) \
                or (key := self.lets.key(index)) is None:
            return None
        return getattr(self.plan, kind).get((self.segment, name, *key))

    def s_Block(self, s):
        stmts, i = s.stmts, 0
        while i < len(stmts):
            if self._dot_product(stmts[i:i + 4]):
                i += 4
            else:
                self.stmt(stmts[i])
                i += 1

    def _dot_product(self, run) -> bool:
        """Four updates `acc += A[k + j] * B[m + j]` (j = 0..3: a dot product of 8- or 16-bit
        integers vectorized by the schedule, unrolled in the kernel) widened to 32 bits: bytes by
        bytes are one dp4a, 16-bit values by bytes two dp2a (low and high pairs), as Halide makes
        them; the same sum modulo 2^32."""
        if len(run) < 4:
            return False
        terms = [_dot_term(s, self.memory) for s in run]
        if None in terms or len({(name, index, t) for name, index, t, _, _ in terms}) != 1:
            return False
        for which in (3, 4):  # A's loads, then B's: one buffer, consecutive elements, one type
            loads = [term[which] for term in terms]
            keys = [self.lets.key(e.index) for e in loads]
            if None in keys or len({(e.name, e.type, k[0]) for e, k in zip(loads, keys)}) != 1 \
                    or [k[1] - keys[0][1] for k in keys] != [0, 1, 2, 3]:
                return False
        name, index, t, a0, b0 = terms[0]
        wide, narrow = (3, 4) if a0.type.bits >= b0.type.bits else (4, 3)  # the bytes: `narrow`
        wide_t, narrow_t = terms[0][wide].type, terms[0][narrow].type
        if narrow_t.bits != 8 or name in (a0.name, b0.name):
            return False
        signs = "".join("s" if x.is_int() else "u" for x in (wide_t, narrow_t))
        values = {which: [self.expr(term[which]) for term in terms] for which in (wide, narrow)}
        target = f"{self.ref(name)}[{self.expr(index)}]"
        total = f"(int)({target})"
        for half, lanes in ([("", slice(0, 4))] if wide_t.bits == 8 else [("lo", slice(0, 2)), ("hi", slice(2, 4))]):
            pack = "hl_bytes4" if wide_t.bits == 8 else "hl_halves2"
            total = (f"{_dot_product_helper(wide_t.bits, half, signs)}({pack}({', '.join(values[wide][lanes])}), "
                     f"hl_bytes4({', '.join(values[narrow])}), {total})")
        self.emit(f"{target} = ({c_type(t)}){total};")
        return True

    def s_For(self, s):
        if s.for_type not in (ir.SERIAL, ir.UNROLLED):
            raise InternalError(f"cuda: a {s.for_type} loop {s.name} inside kernel {self.kernel.name}")
        self.serial_loop(s)

    def loop_body(self, s: ir.For) -> None:
        # a loop or branch holding a barrier separates what the enclosing region does before and
        # after it (as planned)
        barrier = self.touched(s.body).barrier
        self.segment += barrier
        self.nested(s.body)
        self.segment += barrier

    def branches(self, s):
        barrier = self.touched(s).barrier
        self.segment += barrier
        super().branches(s)
        self.segment += barrier

    def store(self, s: ir.Store, value: str, index: str) -> None:
        vector = self.access("stores", s.name, s.value.type, s.index, s.predicate)
        if vector is None:
            super().store(s, value, index)
            return
        group, lane = vector
        vec = f"hl_vec<{c_type(group.type, memory=True)}, {group.lanes}>"
        if group not in self.vectors:
            self.vectors[group] = [self.fresh(s.name + ".vector"), 0, None]
            self.emit(f"{vec} {self.vectors[group][0]};")
        state = self.vectors[group]
        self.emit(f"{state[0]}.v[{lane}] = {value};")
        state[1] += 1
        if lane == 0:  # the run's first element
            state[2] = f"&{self.ref(s.name)}[{index}]"
        if state[1] == group.lanes:  # the last lane: the whole run at once
            self.emit(f"*({vec} *)({state[2]}) = {state[0]};")

    def s_Evaluate(self, s):
        if isinstance(s.value, ir.Call) and s.value.name == BARRIER:
            self.emit("__syncthreads();")
            self.segment += 1  # (as planned: no vector access spans a barrier)
        else:
            super().s_Evaluate(s)

    def s_Allocate(self, s):
        c = self.bind(s.name)
        t = c_type(s.type, memory=True)
        self.memory[s.name] = "shared" if s.memory_type == SHARED else "local"
        if s.memory_type == SHARED and not _constant_size(s):
            offset = self.ref(shared_offset_name(s.name))
            self.emit(f"{t} *const __restrict__ {c} = ({t} *)(hl_dynamic_shared + {offset});")
            self.stmt(s.body)
            self.unbind(s.name)
            return
        n = 1
        for e in s.extents:
            n *= max(ir.const_int(e), 0)
        if s.memory_type == SHARED:
            self.emit(f"__shared__ {t} {c}[{max(n, 1)}] {_ALIGNED};")
        elif s.memory_type == LOCAL:
            self.emit(f"{t} {c}[{max(n, 1)}] {_ALIGNED};")
        else:
            raise InternalError(f"cuda: allocation {s.name} in {s.memory_type} memory inside a kernel")
        self.stmt(s.body)
        self.unbind(s.name)

    def s_Atomic(self, s):
        outer, self.plan = self.plan, None  # printed inside a loop of its own: scalar accesses
        self._atomic(s)
        self.plan = outer

    def _atomic(self, s):
        st = s.body
        t = st.value.type
        if self.memory.get(st.name) == "local":
            # A thread's own array: no other thread can race with the update, and CUDA's atomics
            # work on global and shared memory only.
            old = self.bind(s.old)
            self.emit(f"const {c_type(t)} {old} = {self.ref(st.name)}[{self.expr(st.index)}];")
            self.stmt(st)
            self.unbind(s.old)
            return
        added = _added_to(st.value, s.old)
        if added is not None and (t.is_float() or t.bits in (32, 64)) and not t.is_bool():
            # f(i) += v: one atomicAdd (an unsigned one for signed integers: the same bits)
            word = {32: "unsigned int", 64: "unsigned long long"}[t.bits] if t.is_int() else c_type(t)
            value = self.expr(added)
            self.emit(f"atomicAdd(({word} *)&{self.ref(st.name)}[{self.expr(st.index)}], ({word})({value}));")
            return
        if t.bits in (1, 8):
            self._byte_atomic(s)
            return
        word = {16: "unsigned short", 32: "unsigned int", 64: "unsigned long long"}[t.bits]
        ptr, seen = self.fresh(st.name + ".address"), self.fresh(st.name + ".seen")
        self.emit(f"{word} *{ptr} = ({word} *)&{self.ref(st.name)}[{self.expr(st.index)}];")
        self.emit(f"{word} {seen} = *(volatile {word} *){ptr};")
        self._compare_and_swap_loop(s, word, ptr, seen, lambda: f"hl_reinterpret<{c_type(t)}>({seen})",
                                    lambda value: f"hl_reinterpret<{word}>(({c_type(t)})({value}))")

    def _byte_atomic(self, s):
        """An atomic update of a byte (8-bit or bool): CUDA has no byte-wide compare-and-swap,
        so the aligned 32-bit word holding it is swapped, its other bytes kept as they were."""
        st = s.body
        t = st.value.type
        element = c_type(t, memory=True)
        ptr, shift = self.fresh(st.name + ".word"), self.fresh(st.name + ".shift")
        seen = self.fresh(st.name + ".seen")
        self.emit(f"{element} *{ptr}_byte = &{self.ref(st.name)}[{self.expr(st.index)}];")
        self.emit(f"unsigned int *{ptr} = (unsigned int *)((unsigned long long){ptr}_byte & ~3ull);")
        self.emit(f"const unsigned int {shift} = (unsigned int)((unsigned long long){ptr}_byte & 3ull) * 8u;")
        self.emit(f"unsigned int {seen} = *(volatile unsigned int *){ptr};")
        self._compare_and_swap_loop(
            s, "unsigned int", ptr, seen,
            lambda: f"({c_type(t)})(({element})({seen} >> {shift}){' != 0' * t.is_bool()})",
            lambda value: f"({seen} & ~(0xffu << {shift})) | ((unsigned int)({element})({value}) << {shift})")

    def _compare_and_swap_loop(self, s, word: str, ptr: str, seen: str, old_value, new_word) -> None:
        """Retry until the word at ptr still holds `seen` when the update's new value goes in:
        old_value() reads the element out of `seen`, new_word(value) puts a value back into it."""
        st = s.body
        self.emit("for (;;) {")
        self.indent += 1
        old = self.bind(s.old)
        self.emit(f"const {c_type(st.value.type)} {old} = {old_value()};")
        value = self.expr(st.value)
        self.unbind(s.old)
        prev = self.fresh(st.name + ".previous")
        self.emit(f"const {word} {prev} = atomicCAS({ptr}, {seen}, {new_word(value)});")
        self.emit(f"if ({prev} == {seen}) break;")
        self.emit(f"{seen} = {prev};")
        self.indent -= 1
        self.emit("}")

    def s_AssertStmt(self, s):
        raise InternalError("cuda: an assert inside a kernel (gpu_kernels refuses them)")

    # -- expressions
    def e_Load(self, e):
        if e.predicate is not None or e.type.lanes != 1:
            raise InternalError("cuda: a vector or predicated load")
        text = f"{self.ref(e.name)}[{self.expr(e.index)}]"
        vector = self.access("loads", e.name, e.type, e.index, e.predicate)
        if vector is not None:  # read with its run, where the run is first needed
            group, lane = vector
            if group not in self.vectors:
                vec = f"hl_vec<{c_type(group.type, memory=True)}, {group.lanes}>"
                tmp = self.fresh(e.name + ".vector")
                first = f"&{text} - {lane}" if lane else f"&{text}"  # the run's first element
                self.emit(f"const {vec} {tmp} = *(const {vec} *)({first});")
                self.vectors[group] = [tmp, group.lanes, None]
            return f"{self.vectors[group][0]}.v[{lane}]"
        return f"({text} != 0)" if e.type.is_bool() else text

    def intrinsic(self, e):
        if e.name == "prefetch":  # a CPU cache hint: nothing to do in a kernel
            return "0"
        if e.name in ("print", "trace"):
            raise CompileError(f"{e.name}() inside a GPU kernel is not supported (print or trace on the CPU)")
        return super().intrinsic(e)


def _added_to(value: ir.Expr, old: str) -> ir.Expr | None:
    """v if value is `old + v` (or `v + old`) with v free of old, else None."""
    if not isinstance(value, ir.Add):
        return None
    for mine, other in ((value.a, value.b), (value.b, value.a)):
        if isinstance(mine, ir.Variable) and mine.name == old and old not in free_variables(other):
            return other
    return None


_ALIGNED = "__attribute__((aligned(16)))"  # arrays start where a 16-byte vector may be loaded


def cuda_source(kernels: list[Kernel]) -> str:
    """The translation unit of every kernel of a pipeline, for nvcc/NVRTC or the CPU emulation."""
    texts = [CudaPrinter(k).kernel_text() for k in kernels]
    helpers = [_HALF_HELPERS] if any(re.search(r"\bhl_(half|f16|f32)\b", text) for text in texts) else []
    helpers += [_dot_product_helpers()] if any("hl_dp" in text for text in texts) else []
    parts = ["// Generated by pyhalide: one kernel per GPU loop nest.", PRELUDE.strip(), *helpers, *texts]
    return "\n\n".join(parts) + "\n"
