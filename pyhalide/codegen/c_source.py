"""The C backend (Halide's compile_to_c): a pipeline as one C++ source file defining the entry an
object from compile_to_object defines, `int NAME(halide_buffer_t *..., T param, ...)` and
`NAME_argv(void **args)`, with the same checks, messages and halide_error.

The file needs nothing but a C++11 compiler (g++ or clang++; built with `-pthread` where the C
library wants it) and runs where that compiler's code runs. It is portable and scalar: the Stmt is
lowered with vectorized loops kept as loops (serial_vector_loops.py), which a C++ compiler
vectorizes where it can; the rest is what the CPU backend compiles, printed by c_printer.py:
- parallel loops: their body a lambda run by `hl_par_for`, which starts HL_NUM_THREADS (default:
  the hardware's) std::threads for the loop and takes iterations from a shared counter; a
  parallel loop inside another runs on its worker's thread;
- storage: small constant sizes on the stack (as the CPU backend places them), the rest malloc'd
  and freed on every way out of its scope;
- a failed check returns -1 after halide_error(user_context, message) (weak: a program may define
  its own); print() and tracing write lines to stderr, as the object does;
- atomic updates: compare-and-swap loops; those storing several values run under a lock of their
  own, as on the CPU backend.
"""

from __future__ import annotations

from .. import ir
from ..errors import CompileError
from ..ir_mutator import IRVisitor, free_variables
from ..lower import finish_lowering
from ..lowering.bound_small_allocations import check_explicit_stack, constant_elements, placed_on_stack
from ..types import Type
from . import float_math
from .aot import (
    FAILED,
    MAX_SPAN,
    EntryArgument,
    embedded_array,
    embedded_constants,
    halide_type_code,
    printf_escaped,
    printf_format_of,
    require_c_identifier,
)
from .c_interface import BUFFER_T, parameters
from .c_printer import HELPERS, CPrinter, bit_helpers, c_type, is_half
from .shown_values import printf_conversion

_BIT_FUNCTIONS = {name: f"hl_{name}" for name in CPrinter.BIT_FUNCTIONS}

_PRELUDE = r"""
#include <atomic>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
""".strip()

_RUNTIME = r"""
#if defined(__GNUC__)
extern "C" __attribute__((weak)) void halide_error(void *user_context, const char *message) {
    (void)user_context;
    fprintf(stderr, "%s\n", message);
}
#else
extern "C" void halide_error(void *user_context, const char *message);
#endif

namespace {

#define HL_DEVICE static inline
""" + HELPERS + r"""
""" + bit_helpers(_BIT_FUNCTIONS) + r"""
using std::isnan; using std::isinf; using std::isfinite;

// A failed check: the message to halide_error, and the entry's return value.
static inline int hl_fail(void *user_context, const char *format, ...) {
    char message[1024];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof(message), format, args);
    va_end(args);
    halide_error(user_context, message);
    return -1;
}

// A line of print() or tracing, on stderr; the value is the expression's.
template <typename T, typename... A> static inline T hl_text(bool when, T value, const char *format, A... args) {
    if (when) {
        fprintf(stderr, format, args...);
    }
    return value;
}

// require(): the first failure's message, kept until the statement is done, then reported once
// (`failed` is set once the message is written; the thread that wrote it always sees it).
struct hl_failure {
    std::atomic<int> claimed{0}, failed{0}, reported{0};
    char message[1024];
};
template <typename T, typename... A>
static inline T hl_require(bool ok, T value, hl_failure &f, const char *format, A... args) {
    if (!ok && !f.claimed.exchange(1)) {
        snprintf(f.message, sizeof(f.message), format, args...);
        f.failed.store(1, std::memory_order_release);
    }
    return value;
}
static inline int hl_report(void *user_context, hl_failure &f) {
    int none = 0;
    if (f.reported.compare_exchange_strong(none, 1)) {
        halide_error(user_context, f.message);
    }
    return -1;
}

// Heap storage, freed when its scope is left (by any way).
struct hl_heap {
    void *data;
    explicit hl_heap(int64_t bytes) : data(malloc((size_t)(bytes > 0 ? bytes : 1))) {}
    ~hl_heap() { free(data); }
    hl_heap(const hl_heap &) = delete;
    hl_heap &operator=(const hl_heap &) = delete;
};

// A spin lock of an atomic update that stores several values, held for its scope.
struct hl_locked {
    std::atomic<int> &lock;
    explicit hl_locked(std::atomic<int> &l) : lock(l) {
        int free_ = 0;
        while (!lock.compare_exchange_weak(free_, 1, std::memory_order_acquire)) {
            free_ = 0;
        }
    }
    ~hl_locked() { lock.store(0, std::memory_order_release); }
};

// A compare-and-swap of an element with the value update(old) computes from what it holds.
template <typename T, typename F> static inline void hl_atomic_update(T *p, F update) {
    T seen, want;
    __atomic_load(p, &seen, __ATOMIC_RELAXED);
    do {
        want = update(seen);
    } while (!__atomic_compare_exchange(p, &seen, &want, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

static inline int hl_thread_count() {
    const char *given = getenv("HL_NUM_THREADS");
    int n = given ? atoi(given) : 0;
    if (n <= 0) {
        n = (int)std::thread::hardware_concurrency();
    }
    return n < 1 ? 1 : n;
}
static thread_local bool hl_in_task = false;

// A parallel loop: body(i) for i in [min, min + extent) on up to hl_thread_count() threads (the
// caller's among them), each taking the next iteration; the first failure's code, else 0.
template <typename F> static int hl_par_for(int32_t min, int32_t extent, F body) {
    const int64_t threads = hl_in_task ? 1 : (extent < hl_thread_count() ? extent : hl_thread_count());
    if (threads <= 1) {
        for (int32_t i = 0; i < extent; i++) {
            if (int code = body(min + i)) {
                return code;
            }
        }
        return 0;
    }
    std::atomic<int32_t> next(0);
    std::atomic<int> failed(0);
    auto work = [&]() {
        hl_in_task = true;
        for (int32_t i = next++; i < extent && !failed.load(std::memory_order_relaxed); i = next++) {
            if (int code = body(min + i)) {
                int none = 0;
                failed.compare_exchange_strong(none, code);
            }
        }
        hl_in_task = false;
    };
    std::vector<std::thread> team;
    for (int64_t t = 1; t < threads; t++) {
#if defined(__cpp_exceptions)
        try {
            team.emplace_back(work);
        } catch (...) {  // no more threads to be had: those started (and this one) do the rest
            break;
        }
#else
        team.emplace_back(work);
#endif
    }
    work();
    for (auto &member : team) {
        member.join();
    }
    return failed.load();
}

}  // namespace
""".strip()

# Storage is read where the schedule computed it (bounds inference sees to it), which g++'s flow
# analysis cannot always follow through guards: its "may be used uninitialized" is no warning here;
# nor is a value (or storage) the lowered code names or fills and then does not use (the compiler
# drops it); nor g++'s "iteration N invokes undefined behavior", which it says of copies of a loop
# that partition_loops made for a range it cannot prove empty, and that never run; nor its "array
# subscript N is above array bounds", said of a constant-size stack array read under a
# PredicateStores tail on a path the loop bounds exclude (the same schedule built with
# AddressSanitizer runs clean and matches the JIT).
_QUIET = r"""
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Waggressive-loop-optimizations"
#pragma GCC diagnostic ignored "-Warray-bounds"
#endif
#pragma GCC diagnostic ignored "-Wunused-variable"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
""".strip()

# Floats as the program computes them: no fused multiply-adds (unless the target has fp_contract).
_NO_CONTRACTION = r"""
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
""".strip()

_HALF = r"""
typedef _Float16 hl_half;  // computed in float, each result rounded to float16 (as Halide)
static inline hl_half hl_f16(float f) { return (hl_half)f; }
static inline hl_half hl_f16(double d) { return (hl_half)d; }
static inline float hl_f32(hl_half h) { return (float)h; }
static inline hl_half hl_half_bits(uint16_t bits) { hl_half h; memcpy(&h, &bits, 2); return h; }
""".strip()

_FAILURE = "v_required"  # the C name of the function's hl_failure, where it uses require()


def _escaped_bytes(data: bytes) -> str:
    """The bytes as the inside of a C string literal: printable ASCII as itself (but for `"`, `\\`
    and `?`), the rest as three-digit octal escapes (which no following digit can extend)."""
    return "".join(chr(b) if 32 <= b < 127 and b not in b'"\\?' else f"\\{b:03o}" for b in data)


def c_string(text: str) -> str:
    """A C string literal of text (UTF-8), escaped."""
    return f'"{_escaped_bytes(text.encode())}"'


def _printf_argument(text: str, t: Type) -> str:
    """A value as printf's %lld, %llu or %f takes it."""
    if t.is_float():
        return f"(double)hl_f32({text})" if is_half(t) else f"(double)({text})"
    return f"(long long)({text})" if t.is_int() or t.is_bool() else f"(unsigned long long)({text})"


def _printf_format(t: Type) -> str:
    return "%f" if t.is_float() else "%lld" if t.is_int() or t.is_bool() else "%llu"


class HostPrinter(CPrinter):
    """Prints the body of the entry: a host Stmt."""

    BIT_FUNCTIONS = _BIT_FUNCTIONS

    def __init__(self, fn_name: str, user_context: str):
        super().__init__()
        self.fn_name = fn_name
        self.user_context = user_context
        self.locks: dict[str, str] = {}  # an atomic update's name -> the C name of its lock
        self.required = False  # whether a require() was printed in the statement being printed
        self.in_value_function = False  # printing an atomic update's value function (no return of codes)

    def where(self) -> str:
        return f"function {self.fn_name}"

    def e_Call(self, e):
        expanded = float_math.expansion(e)  # (computed as the CPU backend computes it)
        return super().e_Call(e) if expanded is None else self.expr(expanded)

    def fail(self, fmt: str, values: list[str]) -> str:
        """`return hl_fail(...)`: the statement that leaves with a message."""
        return f"return hl_fail({', '.join([self.user_context, c_string(fmt), *values])});"

    def report_require(self) -> None:
        """Leave if a require() printed since the last check failed (after the value function of an
        atomic update, where inside it)."""
        if self.required and not self.in_value_function:
            self.emit(f"if ({_FAILURE}.failed.load(std::memory_order_acquire)) "
                      f"return hl_report({self.user_context}, {_FAILURE});")
            self.required = False

    # -- statements
    def let_entered(self, name: str, value: ir.Expr) -> None:
        self.report_require()

    def s_Store(self, s):
        if s.predicate is not None:
            self.emit(f"if ({self.expr(s.predicate)}) {{")
            self.indent += 1
            self.s_Store(ir.Store(s.name, s.value, s.index))
            self.indent -= 1
            self.emit("}")
            return
        super().s_Store(s)
        self.report_require()

    def s_Evaluate(self, s):
        super().s_Evaluate(s)
        self.report_require()

    def s_IfThenElse(self, s):
        condition = self.expr(s.condition)
        if self.required:
            c = self.fresh("condition")
            self.emit(f"const bool {c} = {condition};")
            self.report_require()
            condition = c
        self.emit(f"if ({condition}) {{")
        self.branches(s)
        self.emit("}")

    def s_AssertStmt(self, s):
        condition = self.expr(s.condition)
        values = [_printf_argument(self.expr(a), a.type) for a in s.args]
        self.report_require()
        self.emit(f"if (!{condition}) {{")
        self.emit(f"    {self.fail(printf_format_of(s.message, tuple(a.type.is_float() for a in s.args)), values)}")
        self.emit("}")

    def s_For(self, s):
        if s.for_type in (ir.SERIAL, ir.UNROLLED):
            self.serial_loop(s)
            self.report_require()
        elif s.for_type == ir.PARALLEL:
            self._parallel_loop(s)
        else:  # the C backend lowers vectorized loops as serial ones, and refuses GPU targets
            raise CompileError(f"compile_to_c: loop {s.name} is a {s.for_type} loop, which the C backend does not "
                               "print")

    def _parallel_loop(self, s):
        lo, ext = self.expr(s.min), self.expr(s.extent)
        self.report_require()
        code = self.fresh(s.name + ".code")
        c = self.bind(s.name)
        self.emit(f"const int {code} = hl_par_for({lo}, {ext}, [&](int32_t {c}) -> int {{")
        self.nested(s.body)
        self.emit("    return 0;")
        self.emit("});")
        self.emit(f"if ({code}) return {code};")
        self.unbind(s.name)

    def s_Allocate(self, s):
        t = c_type(s.type, memory=True)
        check_explicit_stack(s)
        n = constant_elements(s)
        self.emit("{")
        self.indent += 1
        if placed_on_stack(s):
            c = self.bind(s.name)
            self.emit(f"{t} {c}[{max(n, 1)}] __attribute__((aligned(64)));")
        else:
            size = [str(s.type.bytes())]
            for e in s.extents:
                ext = self.expr(e)
                size.append(f"hl_max<int64_t>((int64_t)({ext}), 0)")
            self.report_require()
            heap = self.fresh(s.name + ".heap")
            self.emit(f"hl_heap {heap}({' * '.join(size)});")
            self.emit(f"if (!{heap}.data) {self.fail(f'Out of memory allocating {printf_escaped(s.name)}', [])}")
            c = self.bind(s.name)
            self.emit(f"{t} *__restrict__ const {c} = ({t} *){heap}.data;")
        self.stmt(s.body)
        self.unbind(s.name)
        self.indent -= 1
        self.emit("}")

    def s_Atomic(self, s):
        body = s.body
        if isinstance(body, ir.Store) and body.predicate is None:
            t = body.value.type
            element = c_type(t, memory=True)
            index = self.expr(body.index)
            self.report_require()
            seen = self.fresh(s.old + ".seen")
            self.emit(f"hl_atomic_update<{element}>(&{self.ref(body.name)}[{index}], [&]({element} {seen}) {{")
            self.indent += 1
            self.in_value_function = True
            old = self.bind(s.old)
            self.emit(f"const {c_type(t)} {old} = {f'({seen} != 0)' if t.is_bool() else seen};")
            value = self.expr(body.value)
            self.unbind(s.old)
            self.emit(f"return ({element})({value});")
            self.in_value_function = False
            self.indent -= 1
            self.emit("});")
            self.report_require()
            return
        # several stores (a Tuple or a scatter): all of them under the update's lock
        lock = self.locks.setdefault(s.old, f"hl_lock_{len(self.locks)}")
        self.emit("{")
        self.indent += 1
        self.emit(f"hl_locked {self.fresh(s.old + '.held')}({lock});")
        self.stmt(body)
        self.indent -= 1
        self.emit("}")

    # -- expressions
    def e_Load(self, e):
        if e.predicate is not None:
            return f"(({self.expr(e.predicate)}) ? {super().e_Load(ir.Load(e.type, e.name, e.index))} : " \
                   f"({c_type(e.type)})0)"
        return super().e_Load(e)

    def intrinsic(self, e):
        if e.name == "print":
            return self._text(e, e.args[1:], " ", self.expr(e.args[0]), first=True)
        if e.name == "trace":
            return self._text(e, e.args, "", "true", first=False)
        if e.name == "require":
            return self._require(e)
        if e.name == "prefetch":
            name, index = e.args
            return f"(__builtin_prefetch(&{self.ref(name.value)}[{self.expr(index)}], 0, 3), 0)"
        return super().intrinsic(e)

    def _text(self, e, parts, separator: str, when: str, first: bool) -> str:
        """print / trace: a line of the parts (strings as they are, values as printf prints them);
        the value is the first value printed (print) or the last (trace)."""
        formats, values, types = [], [], []
        for a in parts:
            if isinstance(a, ir.StringImm):
                formats.append(printf_escaped(a.value))
                continue
            text = self.expr(a)
            formats.append(printf_conversion(a.type, e.name == "trace"))
            values.append(f'(({text}) ? "true" : "false")' if formats[-1] == "%s" else text)
            types.append(a.type)
        if not values:
            return f"hl_text({when}, 0, {c_string(separator.join(formats) + chr(10))})"
        k = 0 if first else len(values) - 1
        held = self.fresh(e.name + ".value")
        self.emit(f"const {c_type(types[k])} {held} = {values[k]};")
        values[k] = held
        args = [_printf_argument(v, t) for v, t in zip(values, types)]
        return f"hl_text({', '.join([when, held, c_string(separator.join(formats) + chr(10)), *args])})"

    def _require(self, e) -> str:
        condition, value, message, *values = e.args
        self.required = True
        fmt = printf_format_of(message.value, tuple(v.type.is_float() for v in values))
        args = [_printf_argument(self.expr(v), v.type) for v in values]
        return f"hl_require({', '.join([self.expr(condition), self.expr(value), _FAILURE, c_string(fmt), *args])})"


class _Entry:
    """The entry's text: its checks, its names for the Stmt, then the Stmt."""

    def __init__(self, lowered, arguments: list[EntryArgument], fn_name: str, checks: dict, printer: HostPrinter):
        self.lowered, self.arguments, self.fn_name, self.checks = lowered, arguments, fn_name, checks
        self.p = printer

    def check(self, condition: str, fmt: str, values=()) -> None:
        self.p.emit(f"if (!({condition})) {{")
        self.p.emit(f"    {self.p.fail(fmt, list(values))}")
        self.p.emit("}")

    def bind_buffer(self, spec, arg: str, used: set) -> None:
        t, name = spec.type, printf_escaped(spec.name)
        kind = "Output" if spec.is_output else "Input"
        self.check(f"{arg} != NULL", f"{kind} buffer {name} is NULL")
        self.check(f"{arg}->host != NULL", f"{kind} buffer {name} has no host memory: pyhalide's ahead-of-time "
                   "code does not answer bounds queries; pass an allocated buffer")
        alignment = self.checks[spec.name].host_alignment
        if alignment > 1:
            self.check(f"(uintptr_t){arg}->host % {alignment} == 0",
                       f"The host pointer of {name} is not aligned to a {alignment} bytes boundary.")
        self.check(f"{arg}->type.code == {halide_type_code(t)} && {arg}->type.bits == {t.bits}",
                   f"{kind} buffer {name} has type {t}, but the buffer passed in has type code %d and %d bits",
                   [f"(int){arg}->type.code", f"(int){arg}->type.bits"])
        self.check(f"{arg}->dimensions == {spec.dimensions}",
                   f"{kind} buffer {name} requires a buffer of exactly {spec.dimensions} dimensions, but the buffer "
                   "passed in has %d dimensions", [f"{arg}->dimensions"])
        checks = self.checks[spec.name]
        span = self.p.fresh(spec.name + ".span")
        self.p.emit(f"int64_t {span} = 0;")
        for d in range(spec.dimensions):
            dim = f"{arg}->dim[{d}]"
            constraints = [(fld, c) for fld, dim_, c in checks.constants if dim_ == d]
            if d == 0 and checks.dense and all(fld != "stride" for fld, _ in constraints):
                constraints.append(("stride", 1))
            for fld, c in constraints:
                self.check(f"{dim}.{fld} == {c}", f"Constraint violated: {name}.{fld}.{d} (%d) == {c} ({c})",
                           [f"{dim}.{fld}"])
            self.check(f"{dim}.extent >= 0", f"{kind} buffer {name} has extent %lld in dimension {d}",
                       [f"(long long){dim}.extent"])
            self.p.emit(f"{span} += (int64_t)({dim}.extent > 0 ? {dim}.extent - 1 : 0) * "
                        f"(int64_t)({dim}.stride < 0 ? -(int64_t){dim}.stride : {dim}.stride);")
        self.check(f"{span} <= {MAX_SPAN}", f"{kind} buffer {name} reaches %lld elements past its first; at most "
                   "2^31-1 are supported", [f"(long long){span}"])
        fields = {f"{spec.name}.{fld}.{d}": f"{arg}->dim[{d}].{fld}" for d in range(spec.dimensions)
                  for fld in ("min", "extent", "stride")}
        self._bind_host(spec, f"{arg}->host", fields, used)

    def _bind_host(self, spec, host: str, fields: dict[str, str], used: set) -> None:
        """Bind the buffer's host pointer and the fields the Stmt reads."""
        for key, value in fields.items():
            if key in used:
                self.p.emit(f"const int32_t {self.p.bind(key)} = {value};")
        if spec.name in used:
            t = c_type(spec.type, memory=True)
            const = "" if spec.is_output else "const "
            self.p.emit(f"{const}{t} *__restrict__ const {self.p.bind(spec.name)} = ({const}{t} *)({host});")

    def embed_buffer(self, spec, used: set, statics: list[str]) -> None:
        """A Buffer the algorithm names: its elements, dimension 0 dense, as a constant array."""
        arr = embedded_array(spec.source)
        data = arr.tobytes(order="F") or b"\0"
        array = f"hl_{self.fn_name}_{len(statics)}"
        # a string literal (one more byte: its NUL), which compilers read far faster than a list
        # of numbers: an 8 MB image compiles in a second instead of ten
        rows = "\n    ".join(f'"{_escaped_bytes(data[k:k + 64])}"' for k in range(0, len(data), 64))
        statics.append(f"// {spec.name}: {arr.dtype} {list(arr.shape)} (dimension 0 first)\n"
                       f"alignas(64) static const char {array}[{len(data) + 1}] =\n    {rows};")
        fields = {k: str(v) for k, v in embedded_constants(self.lowered).items() if k.startswith(spec.name + ".")}
        self._bind_host(spec, array, fields, used)

    def bind_scalar(self, a: EntryArgument, spec, used: set) -> None:
        t = a.type
        lo, hi = a.value_range
        for bound, op, word in ((lo, ">=", "at least"), (hi, "<=", "at most")):
            if bound is not None:
                literal = repr(float(bound)) if t.is_float() else str(int(bound)) + ("LL" if t.is_int() else "ULL")
                self.check(f"{a.c_name} {op} {literal}",
                           f"Parameter {printf_escaped(a.name)} is {_printf_format(t)} but must be {word} {bound}",
                           [_printf_argument(a.c_name, t)])
        if spec.name in used:
            self.p.emit(f"const {c_type(t)} {self.p.bind(spec.name)} = {a.c_name};")


def c_source(lowered, stmt: ir.Stmt, arguments: list[EntryArgument], fn_name: str, target,
             checks: dict, constants: dict[str, int]) -> str:
    """The pipeline (lowered without vectors, its Stmt `stmt` before the layout passes) as C++
    source entered through `fn_name` with these arguments (see aot.compile_object for `checks`
    and `constants`)."""
    require_c_identifier(fn_name)
    dense = [b.name for b in lowered.buffers if b.dimensions and (b.name not in checks or checks[b.name].dense)]
    stmt = finish_lowering(stmt, dense, buffer_constants={**constants, **embedded_constants(lowered)}, x86=False)
    uses = _Uses()
    uses.visit(stmt)
    used = free_variables(stmt) | uses.buffers
    user_context = next((a.c_name for a in arguments if a.is_user_context), "NULL")
    printer = HostPrinter(fn_name, user_context)
    entry = _Entry(lowered, arguments, fn_name, checks, printer)
    by_index = {(a.is_buffer, a.index): a for a in arguments if a.index is not None}
    statics: list[str] = []
    for i, spec in enumerate(lowered.buffers):
        if (True, i) in by_index:
            entry.bind_buffer(spec, by_index[True, i].c_name, used)
        else:
            entry.embed_buffer(spec, used, statics)
    for i, spec in enumerate(lowered.scalars):
        entry.bind_scalar(by_index[False, i], spec, used)
    if "require" in uses.intrinsics:
        printer.emit(f"hl_failure {_FAILURE};")
    printer.stmt(stmt)
    printer.emit("return 0;")
    body = printer.lines
    locks = [f"static std::atomic<int> {c}(0);" for c in printer.locks.values()]
    # (a Param the simplified code no longer reads, as `select(p, a, a)`, is still an argument)
    unused = [f"(void){a.c_name};" for a in arguments if not a.is_buffer and not a.is_user_context
              and (a.index is None or lowered.scalars[a.index].name not in used)]
    text = "\n".join(body)
    head = "\n".join([f"// {fn_name}: written by pyhalide's C backend (compile_to_c) for {target}.",
                      "// Build it as C++11 or later (g++ or clang++, -pthread where the C library needs it).",
                      f"// The entry returns 0, or {FAILED} after calling halide_error(user_context, message)."])
    parts = [head, *([] if target.has_feature("fp_contract") else [_NO_CONTRACTION]), _PRELUDE, _QUIET,
             BUFFER_T.strip(), _RUNTIME]
    if "hl_half" in text or "hl_f16" in text or "hl_f32" in text:
        parts.append(_HALF)
    parts += [*statics, *locks]
    parts.append(f'extern "C" int {fn_name}({parameters(arguments)}) {{\n'
                 + "".join(f"    {line}\n" for line in unused) + text + "\n}")
    parts.append(_argv_entry(fn_name, arguments))
    return "\n\n".join(parts) + "\n"


def _argv_entry(fn_name: str, arguments: list[EntryArgument]) -> str:
    """`int NAME_argv(void **args)`, as the object's."""
    values = []
    for k, a in enumerate(arguments):
        if a.is_buffer:
            values.append(f"(struct halide_buffer_t *)args[{k}]")
        elif a.is_user_context:
            values.append(f"*(void **)args[{k}]")
        else:
            values.append(f"*({c_type(a.type)} *)args[{k}]")
    return f'extern "C" int {fn_name}_argv(void **args) {{\n    return {fn_name}({", ".join(values)});\n}}'


class _Uses(IRVisitor):
    """The buffers a Stmt loads from, stores to or prefetches; the intrinsics it calls."""

    visit_once = True

    def __init__(self):
        super().__init__()
        self.buffers: set[str] = set()
        self.intrinsics: set[str] = set()

    def visit_Load(self, e):
        self.buffers.add(e.name)
        self.visit_children(e)

    visit_Store = visit_Load

    def visit_Call(self, e):
        if e.call_type == ir.INTRINSIC:
            self.intrinsics.add(e.name)
            if e.name == "prefetch":
                self.buffers.add(e.args[0].value)
        self.visit_children(e)
