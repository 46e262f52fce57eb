"""The C backend (compile_to_c): its C++ source, built by the system's C++ compiler with warnings as
errors, computes what the JIT computes, under random pipelines and random schedules (the JIT is
itself checked against the reference and the real Halide); and what the CPU backend's runtime does
(parallel loops, atomics, heap and stack storage, print, tracing, require, float16) it does too.
The entry's checks and the gallery are tested on both ahead-of-time backends in
test_ahead_of_time.py.
"""

from __future__ import annotations

import ctypes
import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

import pyhalide as hl
from pyhalide.codegen import c_interface
from pyhalide.testing.corpus import CASES
from pyhalide.testing.differential import PIPELINES, apply, realize, schedules
from pyhalide.testing.halide_buffer import (
    CXX_FLAGS,
    c_compiler,
    cxx_compiler,
    halide_buffer,
    load_c_source,
    load_object,
)
from pyhalide.testing.random_pipelines import random_pipelines
from pyhalide.testing.schedule_strategies import assert_same, realize_scheduled, remember, scheduled

pytestmark = pytest.mark.skipif(cxx_compiler() is None or c_compiler() is None,
                                reason="no C and C++ compilers on this machine")

# A halide_error that keeps the message, as a program may define it (the source's is weak).
CATCHER = ("#include <string.h>\nchar last_error[1024];\n"
           "void halide_error(void *uc, const char *m) { (void)uc; strncpy(last_error, m, 1023); }\n")


def build(directory: Path, pipeline, arguments, name: str, target=None) -> ctypes.CDLL:
    """The pipeline as C++ source, built with CATCHER into a shared library, loaded."""
    source = directory / f"{name}.cpp"
    pipeline.compile_to_c(str(source), arguments, name, target)
    catcher = directory / "catch.c"
    catcher.write_text(CATCHER)
    return load_c_source(source, directory / f"lib{name}.so", [catcher])


def last_error(lib: ctypes.CDLL) -> str:
    return ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, "last_error"))).decode()


def call(lib: ctypes.CDLL, name: str, *args) -> int:
    """The entry called with numpy arrays as buffers (halide_buffer, mins 0) and ctypes scalars."""
    values = [ctypes.byref(halide_buffer(a)) if isinstance(a, np.ndarray) else a for a in args]
    return getattr(lib, name)(*values)


def run_case(pipeline, arguments, outputs: list[np.ndarray], mins=None) -> bool:
    """Build a fuzz case's pipeline as C++ with these arguments (their bound values passed) and
    run it into `outputs` (at `mins`): True, or False where the schedule writes past the outputs
    (realize grows them; the entry refuses). Refused, the entry must say what the JIT says when
    realizing into buffers of exactly the outputs' shapes (as Halide would): that an output, or
    the input a grown region would read, is accessed past its end."""
    with tempfile.TemporaryDirectory() as directory:
        lib = build(Path(directory), pipeline, arguments, "pipeline")
        types, values = zip(*[_argument(a) for a in arguments]) if arguments else ((), ())
        buffers = [halide_buffer(o, mins) for o in outputs]
        lib.pipeline.argtypes = [*types, *[ctypes.c_void_p] * len(buffers)]
        values = [ctypes.byref(v) if isinstance(v, ctypes.Structure) else v for v in values]
        if lib.pipeline(*values, *[ctypes.byref(b) for b in buffers]) == 0:
            return True
        message = last_error(lib)
    fixed = []
    for o in outputs:
        b = hl.Buffer(np.zeros_like(o))
        if mins:
            b.set_min(list(mins))
        fixed.append(b)
    with pytest.raises(hl.HalideError) as refused:
        pipeline.realize(fixed if len(fixed) > 1 else fixed[0])
    assert str(refused.value).splitlines()[0] == "Error: " + message, (message, str(refused.value))
    event("the schedule writes past the output")
    return False


def _argument(a):
    """(ctypes type, value) of a Param's or ImageParam's (or their hl.Argument's) bound value, as
    the entry takes it."""
    a = a._source if isinstance(a, hl.Argument) else a
    if isinstance(a, hl.ImageParam):
        buf = a.get()
        return ctypes.c_void_p, halide_buffer(np.asarray(buf), [buf.dim(d).min() for d in range(buf.dimensions())])
    t = a.type()
    kind = "c_float" if t.is_float() and t.bits == 32 else "c_double" if t.is_float() else \
        f"c_{'' if t.is_int() else 'u'}int{t.bits}" if not t.is_bool() else "c_bool"
    return getattr(ctypes, kind), a.get()


_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]


@pytest.mark.fuzz
@settings(max_examples=max(20, settings.default.max_examples // 2), deadline=None, suppress_health_check=_HEALTH)
@given(pipeline=random_pipelines(), data=st.data())
def test_random_pipelines_under_random_schedules_compute_what_the_jit_computes(pipeline, data):
    sched = data.draw(scheduled(pipeline.build), label="schedule")
    case = sched.built
    remember(pipeline, sched)
    want = realize_scheduled(case, None, sched)
    outputs = [np.zeros_like(w) for w in want]
    if run_case(case.pipeline(), case.pipeline().infer_arguments(), outputs, case.mins):  # (their Params)
        note(sched.lines)
        assert_same(outputs, want, case.reassociates, "C backend vs JIT")


_DRIVER = r"""
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include "halide_buffer.h"
extern "C" int pipeline(%(params)s);
int main() {
%(buffers)s
    const int rc = pipeline(%(args)s);
    FILE *out = fopen("outputs.bin", "wb");
%(writes)s
    fclose(out);
    return rc == 0 ? 0 : 3;
}
"""


def sanitized_run(directory: Path, pipeline, outputs: list[np.ndarray], mins=None) -> bool:
    """The pipeline (no arguments but its scalar Params, passed their values, and its outputs) as
    C++ built with AddressSanitizer and UndefinedBehaviorSanitizer into a program that fills
    `outputs` (at `mins`): True where it ran, False where the schedule writes past the outputs. Any
    access outside an allocation or a buffer, the stack's included, fails the test with the
    sanitizer's report."""
    scalars = [a._source for a in pipeline.infer_arguments()]
    pipeline.compile_to_c(str(directory / "pipeline.cpp"), scalars, "pipeline")
    (directory / "halide_buffer.h").write_text(c_interface.BUFFER_T)
    buffers, writes = [], []
    for k, o in enumerate(outputs):
        n = o.ndim
        dims = ", ".join(f"{{{mins[d] if mins else 0}, {o.shape[n - 1 - d]}, {o.strides[n - 1 - d] // o.itemsize}, 0}}"
                         for d in range(n))
        code = {"i": 0, "u": 1, "f": 2, "b": 1}[o.dtype.kind]
        bits = 1 if o.dtype.kind == "b" else o.itemsize * 8
        buffers += [f"    static uint8_t data{k}[{max(o.nbytes, 1)}];",
                    f"    static halide_dimension_t dims{k}[{max(n, 1)}] = {{{dims}}};",
                    f"    static halide_buffer_t buffer{k} = "
                    f"{{0, 0, data{k}, 0, {{{code}, {bits}, 1}}, {n}, dims{k}, 0}};"]
        writes.append(f"    fwrite(data{k}, 1, {o.nbytes}, out);")
    args = ", ".join([*(repr(a.get()) for a in scalars), *(f"&buffer{k}" for k in range(len(outputs)))])
    params = ", ".join([*(_c_scalar(a.type()) for a in scalars), *("struct halide_buffer_t *" for _ in outputs)])
    (directory / "main.cpp").write_text(_DRIVER % {"params": params, "buffers": "\n".join(buffers), "args": args,
                                                   "writes": "\n".join(writes)})
    sanitizers = ["-fsanitize=address,undefined", "-fno-sanitize=signed-integer-overflow,float-cast-overflow",
                  "-fno-sanitize-recover=all"]
    flags = [f for f in CXX_FLAGS if f not in ("-shared", "-fPIC", "-O2")]
    built = subprocess.run([cxx_compiler(), *flags, "-O1", "-g", *sanitizers, "-I", str(directory), "-o",
                            str(directory / "main"), str(directory / "pipeline.cpp"), str(directory / "main.cpp")],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    ran = subprocess.run([str(directory / "main")], cwd=directory, capture_output=True, text=True, timeout=300)
    assert ran.returncode in (0, 3) and "Sanitizer" not in ran.stderr, ran.stderr
    if ran.returncode == 3:
        assert re.search(r"Output buffer \S+ is accessed at -?\d+, which is (before|beyond)", ran.stderr), ran.stderr
        event("the schedule writes past the output")
        return False
    data = (directory / "outputs.bin").read_bytes()
    offset = 0
    for o in outputs:
        o[...] = np.frombuffer(data[offset:offset + o.nbytes], o.dtype).reshape(o.shape)
        offset += o.nbytes
    return True


def _c_scalar(t) -> str:
    """The C type of a scalar Param's value."""
    if t.is_bool():
        return "bool"
    if t.is_float():
        return "float" if t.bits == 32 else "double"
    return f"{'' if t.is_int() else 'u'}int{t.bits}_t"


@pytest.mark.fuzz
@settings(max_examples=max(10, settings.default.max_examples // 3), deadline=None, suppress_health_check=_HEALTH)
@given(pipeline=random_pipelines(), data=st.data())
def test_sanitized_random_pipelines_touch_only_their_memory(pipeline, data):
    """The lowered code, stack storage included, reads and writes only inside its allocations
    and buffers: random pipelines under random schedules, their C++ built with AddressSanitizer
    and UndefinedBehaviorSanitizer (the same Stmt the CPU backend compiles, but for vectors)."""
    sched = data.draw(scheduled(pipeline.build), label="schedule")
    case = sched.built
    remember(pipeline, sched)
    want = realize_scheduled(case, None, sched)
    outputs = [np.zeros_like(w) for w in want]
    with tempfile.TemporaryDirectory() as directory:
        if sanitized_run(Path(directory), case.pipeline(), outputs, case.mins):
            note(sched.lines)
            assert_same(outputs, want, case.reassociates, "sanitized C backend vs JIT")


@pytest.mark.fuzz
@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=max(3, settings.default.max_examples // 10), deadline=None, suppress_health_check=_HEALTH)
@given(data=st.data())
def test_corpus_under_random_schedules_computes_what_the_jit_computes(name, data):
    """The fuzz corpus (updates, scans, RDoms with where(), Tuples, ImageParams and Params, several
    outputs, boundary conditions, Euclidean division), under random valid schedules."""
    sched = data.draw(scheduled(CASES[name]), label="schedule")
    case = sched.built
    remember(name, sched)
    want = realize_scheduled(case, None, sched)
    outputs = [np.zeros_like(w) for w in want]
    if run_case(case.pipeline(), case.pipeline().infer_arguments(), outputs, case.mins):
        note(sched.lines)
        assert_same(outputs, want, case.reassociates, f"{name}: C backend vs JIT")


@pytest.mark.fuzz
@pytest.mark.parametrize("name", sorted(PIPELINES))
@settings(max_examples=max(4, settings.default.max_examples // 6), deadline=None, suppress_health_check=_HEALTH)
@given(data=st.data())
def test_halide_style_schedules_compute_what_the_jit_computes(name, data):
    """The differential corpus (scatters, scans, histograms, resampling, several outputs) under
    schedules drawn as Halide's fuzz_schedule draws them, without asking pyhalide what it
    accepts: where the JIT runs one, the C backend's source computes the same."""
    sched = data.draw(schedules(name), label="schedule")
    built = PIPELINES[name](hl)
    try:
        apply(hl, built, sched.steps, sched.selector)
        want = realize(hl, built, sched.sizes, sched.alone)
    except hl.HalideError:
        event("pyhalide refused")
        return
    outputs = [np.zeros_like(w) for w in want]
    pipeline = hl.Pipeline([built.funcs[sched.alone]] if sched.alone else built.outputs)
    if run_case(pipeline, pipeline.infer_arguments(), outputs):  # (the specializations' selector)
        note(sched.text())
        assert_same(outputs, want, False, f"{name}: C backend vs JIT")


def test_parallel_atomic_updates_scatter_under_a_lock_and_failures_inside_parallel_loops(tmp_path, monkeypatch):
    """A parallel histogram with atomic() (a compare-and-swap per element), a Tuple-valued one
    (both elements under the update's lock), and a require() failing inside a parallel loop: one
    message, -1."""
    monkeypatch.setenv("HL_NUM_THREADS", "4")
    inp = hl.ImageParam(hl.UInt(8), 1, "values")
    r = hl.RDom([(0, inp.dim(0).extent())])
    x = hl.Var("x")
    hist, pair = hl.Func("hist"), hl.Func("pair")
    hist[x] = 0
    hist[inp[r] % 16] += 1
    pair[x] = (hl.i32(0), hl.f32(0))
    pair[inp[r] % 16] = (pair[inp[r] % 16][0] + 1, pair[inp[r] % 16][1] + hl.f32(inp[r]))
    rf = hl.RVar("rf")
    for f in (hist, pair):
        f.update().atomic().split(r.x, r.x, rf, 64).parallel(r.x)
    values = np.random.default_rng(3).integers(0, 256, 5000).astype(np.uint8)
    lib = build(tmp_path, hl.Pipeline([hist, pair]), [inp], "histograms")
    counts, pair_counts, sums = np.zeros(16, np.int32), np.zeros(16, np.int32), np.zeros(16, np.float32)
    assert call(lib, "histograms", values, counts, pair_counts, sums) == 0
    want = np.bincount(values % 16, minlength=16)
    np.testing.assert_array_equal(counts, want)
    np.testing.assert_array_equal(pair_counts, want)
    np.testing.assert_array_equal(sums, np.bincount(values % 16, weights=values, minlength=16).astype(np.float32))

    checked = hl.Func("checked")  # a require() inside an atomic update's value
    checked[x] = 0
    checked[inp[r] % 16] += hl.require(inp[r] < 250, 1, "value too big:", inp[r])
    checked.update().atomic().split(r.x, r.x, rf, 64).parallel(r.x)
    lib = build(tmp_path, checked, [inp], "checked")
    assert call(lib, "checked", np.minimum(values, 249), counts) == 0
    np.testing.assert_array_equal(counts, np.bincount(np.minimum(values, 249) % 16, minlength=16))
    assert call(lib, "checked", values, counts) == -1
    assert re.fullmatch(r"Requirement Failed: .* value too big: 25\d", last_error(lib)), last_error(lib)

    k = hl.Param(hl.Int(32), "k")
    g = hl.Func("g")
    y = hl.Var("y")
    g[x, y] = hl.require(x * k < 1000, x * k + y, "x * k must stay below 1000, got", x * k)
    g.parallel(y)
    lib = build(tmp_path, g, [k], "required")
    out = np.zeros((50, 40), np.int32)
    assert call(lib, "required", ctypes.c_int32(3), out) == 0
    np.testing.assert_array_equal(out, np.arange(40)[None, :] * 3 + np.arange(50)[:, None])
    assert call(lib, "required", ctypes.c_int32(30), out) == -1
    message = last_error(lib)
    assert re.fullmatch(r"Requirement Failed: \(\(x \* k\) < 1000\) x \* k must stay below 1000, got \d+", message), \
        message
    assert int(message.split()[-1]) >= 1000


def test_print_and_tracing_write_the_lines_the_object_writes(tmp_path, capfd):
    """print() and tracing write to stderr (as Halide's runtime and compile_to_object's object do),
    line for line what the object writes; trace lines name the Funcs as the user's objects are
    named (f$N where "f" was taken before), as the JIT's."""
    x = hl.Var("x")
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = hl.print(x * 3, "<- x * 3 at", x, hl.f32(x) / 4)
    g[x] = f[x] + f[x + 1]
    f.compute_root().trace_stores()
    g.trace_loads().trace_realizations()
    lines = {}
    for backend in ("object", "c_source"):
        if backend == "object":
            g.compile_to_object(str(tmp_path / "printed.o"), [], "printed")
            lib = load_object(tmp_path / "printed.o", tmp_path / "libprinted_object.so")
        else:
            lib = build(tmp_path, g, [], "printed")
        out = np.zeros(3, np.int32)
        capfd.readouterr()
        assert call(lib, "printed", out) == 0
        np.testing.assert_array_equal(out, [3, 9, 15])
        lines[backend] = capfd.readouterr().err.splitlines()
    assert lines["c_source"] == lines["object"]
    assert "0 <- x * 3 at 0 0.000000" in lines["c_source"] and f"Store {f.name()}.0(1) = 3" in lines["c_source"]


def test_storage_on_the_heap_and_the_stack_and_float16(tmp_path):
    """A Func whose size depends on the input goes to the heap (freed on every way out), a small
    constant one to the stack, store_in(Stack) of a size known only at run time to the heap and
    store_in(Register) of it is refused, as in the CPU backend; float16 arithmetic rounds each
    result as numpy's does."""
    inp = hl.ImageParam(hl.Float(16), 1, "halves")
    x, xo, xi = hl.Var("x"), hl.Var("xo"), hl.Var("xi")
    big, small, out = hl.Func("big"), hl.Func("small"), hl.Func("out")
    big[x] = inp[x] * hl.cast(hl.Float(16), 1.5) + hl.cast(hl.Float(16), 0.25)
    small[x] = big[x] * big[x]
    out[x] = small[x] - big[x]
    big.compute_root()
    out.split(x, xo, xi, 8)
    small.compute_at(out, xo)
    values = np.random.default_rng(5).standard_normal(100).astype(np.float16)
    lib = build(tmp_path, out, [inp], "halves")
    result = np.zeros(100, np.float16)
    assert call(lib, "halves", values, result) == 0
    b = values * np.float16(1.5) + np.float16(0.25)
    np.testing.assert_array_equal(result, b * b - b)
    text = (tmp_path / "halves.cpp").read_text()
    assert "hl_heap v_big_heap(" in text and re.search(r"hl_half v_small\[8\]", text)

    big.store_in(hl.MemoryType.Stack)
    out.compile_to_c(str(tmp_path / "stack.cpp"), [inp], "stack")
    assert "hl_heap v_big_heap(" in (tmp_path / "stack.cpp").read_text()
    big.store_in(hl.MemoryType.Register)
    with pytest.raises(hl.CompileError, match="Allocation big has a dynamic size"):
        out.compile_to_c(str(tmp_path / "refused.cpp"), [inp], "refused")


def test_exp_and_log_of_float32_are_the_cpu_backends_own(tmp_path):
    """exp and log of float32 (and float16) are pyhalide's polynomials in the C source too, not
    expf and logf: the source computes bit for bit what the object computes."""
    inp = hl.ImageParam(hl.Float(32), 1, "math_in")
    x = hl.Var("x")
    out = hl.Func("math_out")
    half = hl.cast(hl.Float(16), inp[x] * 0.01)
    out[x] = hl.exp(inp[x]) + hl.log(hl.abs(inp[x]) + 1e-30) + hl.f32(hl.exp(half)) + hl.f32(hl.log(hl.abs(half)))
    out.vectorize(x, 8)
    values = np.random.default_rng(9).uniform(-100, 90, 1000).astype(np.float32)
    values[:4] = [0.0, np.inf, -np.inf, np.nan]
    lib = build(tmp_path, out, [inp], "math_c")
    result = np.zeros(1000, np.float32)
    assert call(lib, "math_c", values, result) == 0
    inp.set(hl.Buffer(values))
    expected = np.asarray(out.realize([1000]))
    assert np.array_equal(result.view(np.int32), expected.view(np.int32))
    assert not re.search(r"\b(expf|logf)\(", (tmp_path / "math_c.cpp").read_text())


def test_vector_loops_are_loops_a_cpp_compiler_vectorizes(tmp_path):
    """A vectorized loop is printed as a loop over its lanes; built for AVX2, g++ turns the blur's
    into packed instructions on ymm registers (no vector types in the source)."""
    if "clang" in subprocess.run([cxx_compiler(), "--version"], capture_output=True, text=True).stdout.lower():
        pytest.skip("the assembly checked is g++'s")
    inp = hl.ImageParam(hl.UInt(16), 2, "input")
    x, y = hl.Var("x"), hl.Var("y")
    blur = hl.Func("blur")
    blur[x, y] = (inp[x, y] + inp[x + 1, y] + inp[x + 2, y]) // 3
    blur.vectorize(x, 16).parallel(y)
    source = tmp_path / "blur.cpp"
    blur.compile_to_c(str(source), [inp], "blur")
    text = source.read_text()
    assert "hl_par_for" in text and re.search(r"for \(int32_t (v_blur_s0_x\w*_v_0) = 0; \1 < 16; \1\+\+\)", text)
    flags = [f for f in CXX_FLAGS if f != "-shared"]
    asm = subprocess.run([cxx_compiler(), *flags, "-O3", "-mavx2", "-S", "-o", "-", str(source)],
                         capture_output=True, text=True, check=True).stdout
    assert re.search(r"\tvp(add|mulh)\w+\s+.*%ymm", asm), "no packed AVX2 arithmetic in the blur's loop"


def test_refusals(tmp_path):
    x = hl.Var("x")
    f = hl.Func("f")
    f[x] = x
    f.gpu_tile(x, hl.Var("xo"), hl.Var("xi"), 8)
    with pytest.raises(hl.HalideError, match="ahead-of-time code runs on the CPU only"):
        f.compile_to_c(str(tmp_path / "f.cpp"), [], "f", hl.Target("host-cuda"))
    g = hl.Func("g")
    g[x] = x
    with pytest.raises(hl.HalideError, match="not a C identifier"):
        g.compile_to_c(str(tmp_path / "g.cpp"), [], "my-g")


def test_no_fused_multiply_adds_unless_the_target_allows_them(tmp_path):
    """Built with -march=haswell -ffp-contract=fast, a * b + c still rounds twice, as the JIT does
    (the source turns contraction off); the same source without that pragma would fuse, which is
    what makes the check mean something. With the target's fp_contract it may fuse."""
    a, b, c = (hl.ImageParam(hl.Float(32), 1, n) for n in "abc")
    x = hl.Var("x")
    f = hl.Func("f")
    f[x] = a[x] * b[x] + c[x]
    rng = np.random.default_rng(7)
    values = [rng.standard_normal(64).astype(np.float32) for _ in range(3)]
    for image, v in zip((a, b, c), values):
        image.set(hl.Buffer(v))
    want = np.asarray(f.realize([64]))
    fused = np.array([np.float32(np.float64(p) * np.float64(q) + np.float64(r)) for p, q, r in zip(*values)])
    assert not np.array_equal(want, fused)
    flags = ["-march=haswell", "-ffp-contract=fast"]
    source = tmp_path / "fma.cpp"
    f.compile_to_c(str(source), [a, b, c], "fused")
    results = {}
    for kind, text in (("as written", source.read_text()),
                       ("pragma removed", re.sub(r'#pragma (STDC FP_CONTRACT OFF|GCC optimize\("fp-contract=off"\))',
                                                 "", source.read_text()))):
        variant = tmp_path / f"fma_{len(results)}.cpp"
        variant.write_text(text)
        lib = load_c_source(variant, tmp_path / f"libfma_{len(results)}.so", flags=flags)
        out = np.zeros(64, np.float32)
        assert call(lib, "fused", *values, out) == 0
        results[kind] = out
    np.testing.assert_array_equal(results["as written"], want)
    np.testing.assert_array_equal(results["pragma removed"], fused)
    f.compile_to_c(str(source), [a, b, c], "fused", hl.Target("host-fp_contract"))
    assert "fp-contract=off" not in source.read_text()


def test_a_parallel_loop_that_cannot_start_its_threads_runs_on_those_it_got(tmp_path):
    """HL_NUM_THREADS=500 under an address-space limit that leaves no room for 500 thread
    stacks: thread creation fails, and the loop runs on the threads that did start."""
    import resource

    x, y = hl.Var("x"), hl.Var("y")
    f = hl.Func("f")
    f[x, y] = x * 3 + y
    f.parallel(y)
    f.compile_to_c(str(tmp_path / "f.cpp"), [], "f")
    main = tmp_path / "main.cpp"
    main.write_text("#include <cstdint>\n" + c_interface.BUFFER_T + r"""
#include <cstdio>
extern "C" int f(halide_buffer_t *);
static int32_t out[1000][100];
int main() {
    halide_dimension_t d[2] = {{0, 100, 1, 0}, {0, 1000, 100, 0}};
    halide_buffer_t b = {0, 0, (uint8_t *)out, 0, {0, 32, 1}, 2, d, 0};
    const int rc = f(&b);
    long wrong = 0;
    for (int j = 0; j < 1000; j++) for (int i = 0; i < 100; i++) wrong += out[j][i] != i * 3 + j;
    printf("%d %ld\n", rc, wrong);
    return 0;
}
""")
    flags = [flag for flag in CXX_FLAGS if flag not in ("-shared", "-fPIC")]
    subprocess.run([cxx_compiler(), *flags, "-o", str(tmp_path / "main"), str(tmp_path / "f.cpp"), str(main)],
                   check=True)

    def limited():
        resource.setrlimit(resource.RLIMIT_AS, (300 << 20, 300 << 20))

    ran = subprocess.run([str(tmp_path / "main")], env={"HL_NUM_THREADS": "500"}, preexec_fn=limited,
                         capture_output=True, text=True, timeout=120)
    assert (ran.returncode, ran.stdout.split()) == (0, ["0", "0"]), ran.stderr


def test_a_predicated_tail_reading_a_stack_array_builds_without_warnings():
    """A schedule the fuzz drew: g++ -O2 -Werror said "array subscript 7 is above array bounds of
    int32_t[6]" of bc_a's stack storage, read under bc_b's PredicateStores tail on a path the loop
    bounds exclude. The source quiets that warning; the output matches the JIT."""
    case = CASES["boundaries"]()
    funcs = {f.name().split("$")[0]: f for f in case.funcs}
    out, b, a, repeat = funcs["bc_out"], funcs["bc_b"], funcs["bc_a"], funcs["repeat_image_bc_in3"]
    x, y, xy, yo, yi = (hl.Var(n) for n in ("x", "y", "xy", "yo", "yi"))
    out.bound(y, -3, 23).fuse(x, y, xy)
    b.compute_at(out, xy).store_root().split(y, yo, yi, 4, hl.TailStrategy.PredicateStores).vectorize(x, 2)
    repeat.compute_at(b, yo).align_bounds(repeat.args()[0], 2, 0).reorder_storage(*repeat.args())
    a.compute_at(b, yo).reorder_storage(x, y)
    want = hl.Buffer(hl.Int(32), [27, 23])
    want.set_min([-4, -3])
    out.realize(want)
    outputs = [np.zeros((23, 27), np.int32)]
    assert run_case(case.pipeline(), case.pipeline().infer_arguments(), outputs, case.mins)
    np.testing.assert_array_equal(outputs[0], np.asarray(want))
