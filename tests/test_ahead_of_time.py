"""Ahead-of-time compilation (Halide's compile_to_*): object files called from C, from ctypes and
from a CPython extension module compute what realize computes; every check the JIT makes is made
by the object's entry before anything runs; other targets' objects are what their linkers take.
The tests of the entry run twice: on compile_to_object's object and on compile_to_c's C++ source,
which must define the same entry (the C backend's own tests: test_c_backend.py)."""

from __future__ import annotations

import ctypes
import importlib.util
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import numpy as np
import pytest

import apps
import pyhalide as hl
from pyhalide.testing.halide_buffer import c_compiler, cxx_compiler, halide_buffer, load_c_source, load_object

CC = c_compiler()
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler on this machine")
# each entry test, on the object and on the C backend's source (which needs a C++ compiler)
BACKENDS = [pytest.param("object", marks=needs_cc),
            pytest.param("c_source", marks=pytest.mark.skipif(cxx_compiler() is None or CC is None,
                                                              reason="no C++ compiler on this machine"))]
# building a CPython extension needs Python's headers too
needs_python_headers = pytest.mark.skipif(
    CC is None or not (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file(),
    reason="no C compiler or no Python.h on this machine")


def shared_library(tmp_path, obj, name="pipeline"):
    """The object linked into a shared library, loaded with ctypes."""
    return load_object(obj, tmp_path / f"lib{name}.so")


def compiled(tmp_path, backend: str, pipeline, arguments, name: str, target=None, c_files=()) -> ctypes.CDLL:
    """The pipeline (a Func or Pipeline) compiled ahead of time as `name` by the backend (the
    object, or the C backend's source), built with `c_files` into a shared library, loaded."""
    library = tmp_path / f"lib{name}_{backend}.so"
    if backend == "c_source":
        source = tmp_path / f"{name}.cpp"
        pipeline.compile_to_c(str(source), arguments, name, target)
        return load_c_source(source, library, c_files)
    obj = tmp_path / f"{name}.o"
    pipeline.compile_to_object(str(obj), arguments, name, target)
    subprocess.run([CC, "-shared", "-fPIC", "-o", str(library), *map(str, c_files), str(obj), "-lpthread"],
                   check=True)
    return ctypes.CDLL(str(library))


def blur_pipeline():
    inp = hl.ImageParam(hl.UInt(16), 2, "input")
    gain = hl.Param(hl.Float(32), "gain")
    x, y, xi, yi = hl.Var("x"), hl.Var("y"), hl.Var("xi"), hl.Var("yi")
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    bx, by = hl.Func("bx"), hl.Func("by")
    bx[x, y] = (clamped[x - 1, y] + clamped[x, y] + clamped[x + 1, y]) / 3
    by[x, y] = hl.u16(hl.f32(bx[x, y - 1] + bx[x, y] + bx[x, y + 1]) * gain / 3)
    by.tile(x, y, xi, yi, 64, 16).vectorize(xi, 16).parallel(y)
    bx.compute_at(by, x).vectorize(x, 16)
    return by, inp, gain


@pytest.mark.parametrize("backend", BACKENDS)
def test_object_called_from_ctypes_computes_what_realize_computes(tmp_path, backend):
    by, inp, gain = blur_pipeline()
    lib = compiled(tmp_path, backend, by, [inp, gain], "blur")
    lib.blur.argtypes = [ctypes.c_void_p, ctypes.c_float, ctypes.c_void_p]
    rng = np.random.default_rng(1)
    image = rng.integers(0, 4000, (150, 203), dtype=np.uint16)
    out = np.zeros((150, 203), np.uint16)
    rc = lib.blur(ctypes.byref(halide_buffer(image)), 1.5, ctypes.byref(halide_buffer(out)))
    assert rc == 0
    inp.set(hl.Buffer(image))
    gain.set(1.5)
    expected = np.asarray(by.realize([203, 150]))
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_output_mins_tuples_and_embedded_buffers(tmp_path, backend):
    """An output at a shifted min, a Tuple's two output buffers, and a Buffer the algorithm names
    (embedded in the object) with an odd layout."""
    table = hl.Buffer(np.arange(24, dtype=np.int32).reshape(4, 6)[:, ::2])  # strides not dense
    x, y = hl.Var("x"), hl.Var("y")
    k = hl.Param(hl.Int(32), "k")
    f = hl.Func("f")
    f[x, y] = (table[x % 3, y % 4] * k + x, hl.f64(x) - y)
    f.vectorize(x, 8)
    lib = compiled(tmp_path, backend, f, [k], "tuple_f")
    lib.tuple_f.argtypes = [ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p]
    a, b = np.zeros((5, 17), np.int32), np.zeros((5, 17), np.float64)
    assert lib.tuple_f(7, ctypes.byref(halide_buffer(a, [-3, 2])), ctypes.byref(halide_buffer(b, [-3, 2]))) == 0
    xs, ys = np.meshgrid(np.arange(-3, 14), np.arange(2, 7))
    values = np.arange(24, dtype=np.int32).reshape(4, 6)[:, ::2]  # table[x, y] is values[y, x]
    np.testing.assert_array_equal(a, values[ys % 4, xs % 3] * 7 + xs)
    np.testing.assert_array_equal(b, xs.astype(np.float64) - ys)


@pytest.mark.parametrize("backend", BACKENDS)
def test_entry_checks_refuse_bad_buffers_and_params_with_halide_error(tmp_path, backend):
    """Each check names the buffer or Param and the numbers, through halide_error (which a
    program may replace: here one that keeps the message), and returns nonzero; nothing runs."""
    inp = hl.ImageParam(hl.UInt(8), 2, "input")
    off = hl.Param(hl.Int(32), "off")
    off.set_range(0, 10)
    x, y = hl.Var("x"), hl.Var("y")
    f = hl.Func("f")
    f[x, y] = inp[x + 2, y] + hl.u8(off)
    f.output_buffer().dim(1).set_extent(4)
    inp.dim(1).set_stride(inp.dim(0).extent() + 8)
    catcher = tmp_path / "catch.c"
    catcher.write_text("#include <string.h>\nchar last_error[1024];\n"
                       "void halide_error(void *uc, const char *m) { (void)uc; strncpy(last_error, m, 1023); }\n")
    dll = compiled(tmp_path, backend, f, [inp, off], "checked", c_files=[catcher])
    dll.checked.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p]
    message = ctypes.c_char.in_dll(dll, "last_error")

    def run(image, off_value, out):
        rc = dll.checked(image if image is None else ctypes.byref(image), off_value, ctypes.byref(out))
        return rc, ctypes.string_at(ctypes.addressof(message)).decode()

    image = np.zeros((4, 40), np.uint8)
    padded = np.zeros((4, 48), np.uint8)[:, :40]
    out = np.zeros((4, 30), np.uint8)
    assert run(halide_buffer(padded), 3, halide_buffer(out))[0] == 0
    assert run(None, 3, halide_buffer(out)) == (-1, "Input buffer input is NULL")
    assert run(halide_buffer(padded.astype(np.int8)), 3, halide_buffer(out))[1] == (
        "Input buffer input has type uint8, but the buffer passed in has type code 0 and 8 bits")
    assert run(halide_buffer(padded), 11, halide_buffer(out))[1] == "Parameter off is 11 but must be at most 10"
    assert run(halide_buffer(padded), 3, halide_buffer(np.zeros((5, 30), np.uint8)))[1] == (
        "Constraint violated: f.extent.1 (5) == 4 (4)")
    assert run(halide_buffer(image), 3, halide_buffer(out))[1] == (
        "Constraint violated: input.stride.1 (40) == (input.extent.0 + 8) (48)")
    assert run(halide_buffer(np.zeros((4, 39), np.uint8)[:, :31]), 3, halide_buffer(out))[1] == (
        "Input buffer input is accessed at 31, which is beyond the max (30) in dimension 0")
    assert run(halide_buffer(np.zeros((4, 96), np.uint8)[:, ::2]), 3, halide_buffer(out))[1] == (
        "Constraint violated: input.stride.0 (2) == 1 (1)")
    inp.set_host_alignment(16)
    aligned_dll = compiled(tmp_path, backend, f, [inp, off], "aligned", c_files=[catcher])
    aligned_dll.aligned.argtypes = dll.checked.argtypes
    aligned_message = ctypes.c_char.in_dll(aligned_dll, "last_error")
    storage = np.zeros(4 * 48 + 16, np.uint8)
    start = -storage.ctypes.data % 16  # where a view's first element is 16-byte aligned

    def rows_from(k):
        return storage[k:k + 4 * 48].reshape(4, 48)[:, :40]

    for view, want in ((rows_from(start), ""),
                       (rows_from(start + 1), "The host pointer of input is not aligned to a 16 bytes boundary.")):
        aligned_message.value = b"\0"
        rc = aligned_dll.aligned(ctypes.byref(halide_buffer(view)), 3, ctypes.byref(halide_buffer(out)))
        assert (rc != 0, ctypes.string_at(ctypes.addressof(aligned_message)).decode()) == (want != "", want)
    no_host = halide_buffer(padded)
    no_host.host = None
    assert "does not answer bounds queries" in run(no_host, 3, halide_buffer(out))[1]
    flat = halide_buffer(np.zeros(40, np.uint8))
    assert run(flat, 3, halide_buffer(out))[1] == (
        "Input buffer input requires a buffer of exactly 2 dimensions, but the buffer passed in has 1 dimensions")


@pytest.mark.parametrize("backend", BACKENDS)
def test_user_context_comes_first_and_reaches_halide_error(tmp_path, backend):
    """With the target's user_context feature the entry takes `void *__user_context` first, and
    a failure hands it to halide_error, as Halide's do; C++ name mangling is refused by name."""
    x = hl.Var("x")
    k = hl.Param(hl.Int(32), "k")
    k.set_range(0, 5)
    f = hl.Func("f")
    f[x] = x * k
    obj = tmp_path / "f.o"
    f.compile_to_file(str(tmp_path / "f"), [k], "with_context", hl.Target("host-user_context"))
    assert "int with_context(void *__user_context, int32_t _k, struct halide_buffer_t *_f" in (
        tmp_path / "f.h").read_text()
    catcher = tmp_path / "catch.c"
    catcher.write_text("#include <string.h>\nvoid *last_context; char last_error[1024];\n"
                       "void halide_error(void *uc, const char *m) {\n"
                       "    last_context = uc; strncpy(last_error, m, 1023);\n}\n")
    dll = compiled(tmp_path, backend, f, [k], "with_context", hl.Target("host-user_context"), [catcher])
    dll.with_context.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p]
    out = np.zeros(8, np.int32)
    assert dll.with_context(1234, 3, ctypes.byref(halide_buffer(out))) == 0
    np.testing.assert_array_equal(out, np.arange(8) * 3)
    assert dll.with_context(5678, 9, ctypes.byref(halide_buffer(out))) == -1
    assert ctypes.c_void_p.in_dll(dll, "last_context").value == 5678
    with pytest.raises(hl.HalideError, match="c_plus_plus_name_mangling is not supported"):
        f.compile_to_object(str(obj), [k], "f", hl.Target("host-c_plus_plus_name_mangling"))


@needs_cc
@pytest.mark.parametrize("language", ["c", "c++"])
def test_header_and_static_library_build_a_c_program(tmp_path, language):
    """compile_to_static_library's header and archive are what a C or C++ program builds with:
    the program fills halide_buffer_ts from the header's declaration and links the archive."""
    by, inp, gain = blur_pipeline()
    by.compile_to_static_library(str(tmp_path / "blur"), [inp, gain], "blur")
    main = tmp_path / ("main.c" if language == "c" else "main.cpp")
    main.write_text(r"""
#include <stdio.h>
#include <string.h>
#include "blur.h"
static uint16_t in[60][100], out[60][100];
int main(void) {
    halide_dimension_t din[2] = {{0, 100, 1, 0}, {0, 60, 100, 0}};
    halide_dimension_t dout[2] = {{0, 100, 1, 0}, {0, 60, 100, 0}};
    halide_buffer_t bin, bout;
    long total = 0;
    int x, y;
    for (y = 0; y < 60; y++) for (x = 0; x < 100; x++) in[y][x] = (uint16_t)(3 * x + y);
    memset(&bin, 0, sizeof bin);
    bin.host = (uint8_t *)&in[0][0];
    bin.type.code = 1; bin.type.bits = 16; bin.type.lanes = 1;
    bin.dimensions = 2; bin.dim = din;
    bout = bin; bout.host = (uint8_t *)&out[0][0]; bout.dim = dout;
    if (blur(&bin, 1.0f, &bout) != 0) return 1;
    for (y = 0; y < 60; y++) for (x = 0; x < 100; x++) total += out[y][x];
    printf("%ld\n", total);
    return 0;
}
""")
    compiler = CC if language == "c" else shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        pytest.skip("no C++ compiler")
    exe = tmp_path / "main"
    subprocess.run([compiler, "-Wall", "-Werror", "-I", str(tmp_path), str(main), str(tmp_path / "blur.a"), "-o",
                    str(exe), "-lpthread"], check=True)
    total = int(subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout)
    image = np.fromfunction(lambda y, x: 3 * x + y, (60, 100)).astype(np.uint16)
    inp.set(hl.Buffer(image))
    gain.set(1.0)
    assert total == int(np.asarray(by.realize([100, 60])).astype(np.int64).sum())


def build_extension(tmp_path, name, source, obj, libraries=()):
    """The CPython extension module compiled from compile_to's python_extension source and the
    object (as Halide's CMake rule builds it), imported."""
    include = sysconfig.get_paths()["include"]
    target = tmp_path / f"{name}{sysconfig.get_config_var('EXT_SUFFIX')}"
    subprocess.run([CC, "-shared", "-fPIC", "-Wall", "-Werror", "-I", include, "-x", "c", str(source), "-x", "none",
                    str(obj), "-o", str(target), "-lpthread", *libraries], check=True)
    spec = importlib.util.spec_from_file_location(name, target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@needs_python_headers
@pytest.mark.parametrize("backend", BACKENDS)
def test_python_extension_runs_the_pipeline_on_numpy_arrays(tmp_path, backend, fresh_func_names):
    """As Halide's lesson 10: compile_to writes an object and an extension's source; built, the
    module's function takes numpy arrays (axes reversed) and Python numbers, positionally or by
    name, and raises with the pipeline's message. The C backend's source builds in the object's
    place (the C++ library linked in for its threads)."""
    brighter = hl.Func("brighter")
    x, y = hl.Var("x"), hl.Var("y")
    offset = hl.Param(hl.UInt(8), name="offset")
    inp = hl.ImageParam(hl.UInt(8), 2, "input")
    brighter[x, y] = inp[x, y] + offset
    brighter.vectorize(x, 16).parallel(y)
    name = "aot_brighter"
    obj = tmp_path / f"{name}.o"
    code = tmp_path / f"{name}.cpp" if backend == "c_source" else obj
    brighter.compile_to({getattr(hl.OutputFileType, backend): str(code),
                         hl.OutputFileType.python_extension: str(tmp_path / f"{name}.py.cpp")}, [inp, offset], name)
    if backend == "c_source":
        subprocess.run([cxx_compiler(), "-std=c++17", "-O2", "-fPIC", "-c", "-o", str(obj), str(code)], check=True)
    module = build_extension(tmp_path, name, tmp_path / f"{name}.py.cpp", obj,
                             ["-lstdc++"] if backend == "c_source" else [])
    image = np.fromfunction(lambda i, j: (i ^ (j + 1)) & 0xFF, (64, 48), dtype=np.int64).astype(np.uint8)
    out = np.empty_like(image)
    module.aot_brighter(image, 5, out)
    np.testing.assert_array_equal(out, image + np.uint8(5))
    module.aot_brighter(input=image, offset=250, brighter=out)
    np.testing.assert_array_equal(out, image + np.uint8(250))
    with pytest.raises(OverflowError, match="offset: 300 is out of the range"):
        module.aot_brighter(image, 300, out)
    with pytest.raises(ValueError, match="Invalid argument input: its elements"):
        module.aot_brighter(image.astype(np.int16), 5, out)
    with pytest.raises(RuntimeError, match=r"Constraint violated: brighter.stride.0 \(2\) == 1"):
        module.aot_brighter(image, 5, np.empty((64, 96), np.uint8)[:, ::2])
    with pytest.raises(ValueError, match="read-only|not writable"):
        frozen = np.empty_like(image)
        frozen.flags.writeable = False
        module.aot_brighter(image, 5, frozen)


@needs_python_headers
def test_python_extension_keeps_an_hl_buffers_mins(tmp_path):
    """As Halide's python_bindings/apps/identity_app.py: a numpy array's region starts at 0, an
    hl.Buffer's where its set_min put it; a pipeline with no Params (its unused helpers compile
    under -Wall -Werror)."""
    x = hl.Var("x")
    identity = hl.Func("identity")
    identity[x] = x
    name = "aot_identity"
    identity.compile_to({hl.OutputFileType.object: str(tmp_path / f"{name}.o"),
                         hl.OutputFileType.python_extension: str(tmp_path / f"{name}.py.cpp")}, [], name)
    module = build_extension(tmp_path, name, tmp_path / f"{name}.py.cpp", tmp_path / f"{name}.o")
    array = np.empty(100, np.int32)
    module.aot_identity(array)
    np.testing.assert_array_equal(array, np.arange(100))
    shifted = hl.Buffer(array)
    shifted.set_min([-100])
    module.aot_identity(shifted)
    np.testing.assert_array_equal(array, np.arange(-100, 0))


LAYOUTS = textwrap.dedent('''
    import pyhalide as hl


    @hl.generator(name="shift_rgb")
    class ShiftRgb:
        layout = hl.GeneratorParam("planar")
        amount = hl.InputScalar(hl.UInt(8))
        rgb = hl.InputBuffer(hl.UInt(8), 3)
        out = hl.OutputBuffer(hl.UInt(8), 3)

        def generate(self):
            x, y, c = hl.vars("x y c")
            self.out[x, y, c] = self.rgb[x, y, 2 - c] + self.amount * hl.u8(c)
            self.out.vectorize(x, self.natural_vector_size(hl.UInt(8)))
            if self.layout == "interleaved":
                for buf in (self.rgb, self.out.output_buffer()):
                    buf.dim(0).set_stride(3)
                    buf.dim(2).set_stride(1).set_bounds(0, 3)
                self.out.reorder(c, x, y).unroll(c)
            elif self.layout == "specialized":
                for buf in (self.rgb, self.out.output_buffer()):
                    buf.dim(0).set_stride(hl.Expr())
                interleaved = ((self.rgb.dim(0).stride() == 3) & (self.out.output_buffer().dim(0).stride() == 3)
                               & (self.out.output_buffer().dim(2).extent() == 3))
                self.out.specialize(interleaved).reorder(c, x, y).unroll(c)


    if __name__ == "__main__":
        hl.main()
''')


@needs_python_headers
def test_generator_command_line_writes_what_builds_an_extension(tmp_path):
    """hl.main() as Halide's generator command line (-g, -o, -e, -f, target=, GeneratorParams):
    planar, interleaved (constant constraints, the unrolled channel loop needing them) and
    specialized builds of one Generator, each called with hl.Buffers of either layout."""
    script = tmp_path / "shift_gen.py"
    script.write_text(LAYOUTS)
    modules = {}
    for layout in ("planar", "interleaved", "specialized"):
        name = f"shift_{layout}"
        subprocess.run([sys.executable, str(script), "-g", "shift_rgb", "-o", str(tmp_path / "out"), "-e",
                        "object,python_extension,c_header,static_library,c_source", "-f", name, "target=host",
                        f"layout={layout}"], check=True)
        assert (tmp_path / "out" / f"{name}.a").is_file() and (tmp_path / "out" / f"{name}.h").is_file()
        assert f'extern "C" int {name}(' in (tmp_path / "out" / f"{name}.halide_generated.cpp").read_text()
        out_dir = tmp_path / "out"
        modules[layout] = build_extension(out_dir, name, out_dir / f"{name}.py.cpp", out_dir / f"{name}.o")
    rng = np.random.default_rng(3)
    # wider than a vector of bytes on any host (64 with AVX-512), which shifts inwards otherwise
    values = rng.integers(0, 256, (3, 20, 101), dtype=np.uint8)  # c, y, x

    def planar():
        b = hl.Buffer(hl.UInt(8), [101, 20, 3])
        np.asarray(b)[...] = values
        return b

    def interleaved():
        b = hl.Buffer.make_interleaved(hl.UInt(8), 101, 20, 3)
        np.asarray(b)[...] = values
        return b

    xs = np.arange(3, dtype=np.uint8)[:, None, None]
    expected = values[::-1] + np.uint8(7) * xs
    for layout, make in (("planar", planar), ("interleaved", interleaved), ("specialized", planar),
                         ("specialized", interleaved)):
        src, dst = make(), make()
        getattr(modules[layout], f"shift_{layout}")(7, src, dst)
        np.testing.assert_array_equal(np.asarray(dst), expected, err_msg=layout)
    with pytest.raises(RuntimeError, match=r"Constraint violated: out.stride.0 \(1\) == 3"):
        modules["interleaved"].shift_interleaved(7, interleaved(), planar())
    bad = subprocess.run([sys.executable, str(script), "-o", str(tmp_path), "-e", "registration"],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "-e registration: pyhalide writes" in bad.stderr


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", apps.NAMES)
def test_gallery_apps_compiled_ahead_of_time_compute_their_reference(tmp_path, name, backend):
    """Each gallery app, hand-scheduled, as an object or C++ source (its input Buffers embedded
    in it) called from ctypes: the same output the app's numpy reference computes."""
    app = apps.load(name)
    inputs = app.inputs("small")
    built = app.build(hl, inputs)
    app.schedule(hl, built)
    lib = compiled(tmp_path, backend, built.output, [], name)
    out = np.zeros(list(reversed(built.output_sizes)), built.output_type.to_numpy())
    assert getattr(lib, name)(ctypes.byref(halide_buffer(out, built.output_mins))) == 0
    expected = app.reference(inputs)
    assert app.check(out, expected), f"max difference {np.abs(out.astype(float) - expected).max()}"


def test_every_output_kind_is_written(tmp_path):
    """What Halide's compile_to test asks of every output."""
    x = hl.Var("x")
    f = hl.Func("f")
    f[x] = 100 * x
    f.compile_to_bitcode(str(tmp_path / "f.bc"), [], "f")
    assert (tmp_path / "f.bc").read_bytes()[:4] == b"BC\xc0\xde"
    f.compile_to_object(str(tmp_path / "f.o"), [], "f")
    assert (tmp_path / "f.o").read_bytes()[:4] == b"\x7fELF"
    f.compile_to_header(str(tmp_path / "f.h"), [], "f")
    assert re.search(r"int f\(struct halide_buffer_t \*_f\w*_buffer\);", (tmp_path / "f.h").read_text())
    f.compile_to_assembly(str(tmp_path / "f.s"), [], "f")
    assert "f_argv" in (tmp_path / "f.s").read_text()
    f.compile_to_llvm_assembly(str(tmp_path / "f.ll"), [], "f")
    assert re.search(r"define .*i32 @f\(ptr", (tmp_path / "f.ll").read_text())
    f.compile_to_lowered_stmt(str(tmp_path / "f.txt"), [])
    f.compile_to_conceptual_stmt(str(tmp_path / "f.conceptual.stmt"), [])
    assert "produce f" in (tmp_path / "f.conceptual.stmt").read_text()
    hl.Pipeline(f).compile_to_conceptual_stmt(str(tmp_path / "f.conceptual.html"), [], hl.StmtOutputFormat.HTML)
    assert (tmp_path / "f.conceptual.html").read_text().startswith("<!DOCTYPE html>")
    f.compile_to_file(str(tmp_path / "f_all"), [])
    assert (tmp_path / "f_all.h").is_file() and (tmp_path / "f_all.o").is_file()
    f.compile_to({hl.OutputFileType.stmt_html: str(tmp_path / "f.stmt.html")}, [], "f")
    assert (tmp_path / "f.stmt.html").read_text().startswith("<!DOCTYPE html>")
    f.compile_to_c(str(tmp_path / "f.cpp"), [], "f")
    assert re.search(r'extern "C" int f\(struct halide_buffer_t \*_f\w*_buffer\) \{', (tmp_path / "f.cpp").read_text())
    with pytest.raises(hl.HalideError, match="does not write OutputFileType.pytorch_wrapper"):
        f.compile_to({hl.OutputFileType.pytorch_wrapper: str(tmp_path / "f.pt.h")}, [], "f")


def _magic(path, n):
    return path.read_bytes()[:n]


def test_cross_compiled_objects_are_each_platforms_format(tmp_path):
    """As Halide's lesson 11: ARM 32-bit Android (ELF), 64-bit Windows (COFF), ARMv7s iOS (Mach-O),
    each with the platform's vector instructions for a vectorized loop."""
    brighter = hl.Func("brighter")
    x, y = hl.Var("x"), hl.Var("y")
    offset = hl.Param(hl.UInt(8), "offset")
    inp = hl.ImageParam(hl.UInt(8), 2, "input")
    brighter[x, y] = inp[x, y] + offset
    brighter.vectorize(x, 16).parallel(y)
    args = [inp, offset]
    android = hl.Target()
    android.os, android.arch, android.bits = hl.TargetOS.Android, hl.TargetArch.ARM, 32
    brighter.compile_to_file(str(tmp_path / "android"), args, "brighter", android)
    assert _magic(tmp_path / "android.o", 7) == b"\x7fELF\x01\x01\x01"
    windows = hl.Target(hl.TargetOS.Windows, hl.TargetArch.X86, 64, [hl.TargetFeature.AVX, hl.TargetFeature.SSE41])
    brighter.compile_to_file(str(tmp_path / "windows"), args, "brighter", windows)
    assert _magic(tmp_path / "windows.obj", 2) == b"\x64\x86"
    ios = hl.Target(hl.TargetOS.IOS, hl.TargetArch.ARM, 32, [hl.TargetFeature.ARMv7s])
    brighter.compile_to_file(str(tmp_path / "ios"), args, "brighter", ios)
    assert np.frombuffer(_magic(tmp_path / "ios.o", 16), np.uint32).tolist() == [0xFEEDFACE, 12, 11, 1]
    for target, instruction in (("arm-64-linux", "add\tv"), ("arm-32-android", "vadd.i8\tq"),
                                ("x86-64-linux-avx2", "vpaddb"), ("x86-32-linux-sse41", "paddb")):
        brighter.compile_to_assembly(str(tmp_path / "b.s"), args, "brighter", hl.Target(target))
        assert instruction in (tmp_path / "b.s").read_text(), target
    with pytest.raises(hl.HalideError, match="static libraries for ELF targets"):
        brighter.compile_to_static_library(str(tmp_path / "lib"), args, "brighter", ios)


_CROSS = [  # (target, C compiler, how to run its programs): each where the machine has them (Debian's
    # gcc-aarch64-linux-gnu, gcc-arm-linux-gnueabihf, gcc-i686-linux-gnu and qemu-user)
    ("arm-64-linux", "aarch64-linux-gnu-gcc", ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"]),
    ("arm-32-linux", "arm-linux-gnueabihf-gcc", ["qemu-arm", "-L", "/usr/arm-linux-gnueabihf"]),
    ("x86-32-linux-sse41", "i686-linux-gnu-gcc", ["qemu-i386", "-L", "/usr/i686-linux-gnu"]),
]


@pytest.mark.parametrize("backend", ["object", "c_source"])
@pytest.mark.parametrize(("target", "compiler", "emulator"), _CROSS, ids=[t for t, _, _ in _CROSS])
def test_cross_compiled_pipeline_runs_under_emulation(tmp_path, target, compiler, emulator, backend):
    """Objects for other CPUs (32-bit ones too: halide_buffer_t's layout and size_t change), and
    the C backend's source built by those CPUs' C++ compilers, compute what realize computes here,
    run under qemu: a blur with a stage at root (the heap) and vectorized, parallel loops (serial
    in objects without the x86-64 Linux thread pool; std::threads in the C source)."""
    cxx = compiler[:-3] + "g++"
    needed = [compiler, emulator[0], *([cxx] if backend == "c_source" else [])]
    if any(shutil.which(tool) is None for tool in needed):
        pytest.skip(f"one of {', '.join(needed)} is not installed")
    by, inp, gain = blur_pipeline()
    x, y = hl.Var("x"), hl.Var("y")
    out = hl.Func("out")
    out[x, y] = by[x, y] + by[x + 1, y]
    by.compute_root()
    out.compile_to_file(str(tmp_path / "blur"), [inp, gain], "blur", hl.Target(target))
    if backend == "c_source":
        out.compile_to_c(str(tmp_path / "blur.cpp"), [inp, gain], "blur", hl.Target(target))
        subprocess.run([cxx, "-std=c++17", "-O2", "-c", "-o", str(tmp_path / "blur.o"), str(tmp_path / "blur.cpp")],
                       check=True)
    image = (np.arange(150 * 203, dtype=np.uint32) * 2654435761 % 4001).astype(np.uint16).reshape(150, 203)
    image.tofile(tmp_path / "in.raw")
    (tmp_path / "main.c").write_text(r"""
#include <stdio.h>
#include <string.h>
#include "blur.h"
static uint16_t in[150][203], out[150][202];
int main(void) {
    halide_dimension_t din[2] = {{0, 203, 1, 0}, {0, 150, 203, 0}}, dout[2] = {{0, 202, 1, 0}, {0, 150, 202, 0}};
    halide_buffer_t bin, bout;
    FILE *f = fopen("in.raw", "rb");
    if (fread(in, 2, 150 * 203, f) != 150 * 203) return 2;
    fclose(f);
    memset(&bin, 0, sizeof bin);
    bin.host = (uint8_t *)in; bin.type.code = 1; bin.type.bits = 16; bin.type.lanes = 1;
    bin.dimensions = 2; bin.dim = din;
    bout = bin; bout.host = (uint8_t *)out; bout.dim = dout;
    if (blur(&bin, 1.5f, &bout) != 0) return 1;
    f = fopen("out.raw", "wb");
    fwrite(out, 2, 150 * 202, f);
    fclose(f);
    return 0;
}
""")
    subprocess.run([compiler, "-O2", "-c", "-I", str(tmp_path), "-o", str(tmp_path / "main.o"),
                    str(tmp_path / "main.c")], check=True)
    linker = cxx if backend == "c_source" else compiler  # (the C source needs the C++ library)
    subprocess.run([linker, "-o", str(tmp_path / "main"), str(tmp_path / "main.o"), str(tmp_path / "blur.o"),
                    "-lpthread"], check=True)
    subprocess.run([*emulator, str(tmp_path / "main")], check=True, cwd=tmp_path, timeout=120)
    inp.set(hl.Buffer(image))
    gain.set(1.5)
    expected = np.asarray(out.realize([202, 150]))
    np.testing.assert_array_equal(np.fromfile(tmp_path / "out.raw", np.uint16).reshape(150, 202), expected)


def test_refusals_name_what_is_wrong(tmp_path):
    inp = hl.ImageParam(hl.Float(32), 1, "im")
    p = hl.Param(hl.Int(16), "p")
    x = hl.Var("x")
    f = hl.Func("f")
    f[x] = inp[x] * hl.f32(p)
    with pytest.raises(hl.HalideError, match="reads ImageParam im, which is not among the arguments"):
        f.compile_to_object(str(tmp_path / "f.o"), [p], "f")
    with pytest.raises(hl.HalideError, match="uses Param p, which is not among the arguments"):
        f.compile_to_object(str(tmp_path / "f.o"), [inp], "f")
    with pytest.raises(hl.HalideError, match="not a C identifier"):
        f.compile_to_object(str(tmp_path / "f.o"), [inp, p], "my-f")
    with pytest.raises(hl.HalideError, match="runs on the CPU only"):
        f.compile_to_object(str(tmp_path / "f.o"), [inp, p], "f", hl.Target("host-cuda"))
    with pytest.raises(hl.HalideError, match="ahead of time for x86 and ARM"):
        f.compile_to_object(str(tmp_path / "f.o"), [inp, p], "f", hl.Target("riscv-64-linux"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_argv_entry_and_unused_arguments(tmp_path, backend):
    """NAME_argv takes pointers to the scalar arguments and the buffers themselves; an argument
    the pipeline ignores stays in the signature, as in Halide."""
    unused = hl.Param(hl.Float(64), "unused")
    k = hl.Param(hl.UInt(16), "k")
    x = hl.Var("x")
    f = hl.Func("f")
    f[x] = hl.u16(x) * k
    lib = compiled(tmp_path, backend, f, [unused, k], "scaled")
    out = np.zeros(20, np.uint16)
    buf = halide_buffer(out)
    scalars = (ctypes.c_double(1.5), ctypes.c_uint16(3))
    argv = (ctypes.c_void_p * 3)(*[ctypes.addressof(v) for v in scalars], ctypes.addressof(buf))
    assert lib.scaled_argv(argv) == 0
    np.testing.assert_array_equal(out, np.arange(20) * 3)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


# ------------------------------------------------------------------------------ multiple targets
_CPUINFO_FLAGS = {"sse2": "sse2", "sse3": "pni", "ssse3": "ssse3", "sse4.1": "sse4_1", "fma": "fma", "avx": "avx",
                  "f16c": "f16c", "avx2": "avx2", "avx512f": "avx512f", "avx512dq": "avx512dq",
                  "avx512ifma": "avx512ifma", "avx512cd": "avx512cd", "avx512bw": "avx512bw", "avx512vl": "avx512vl",
                  "avx512vbmi": "avx512vbmi", "avx512vnni": "avx512_vnni", "avx512bf16": "avx512_bf16",
                  "avxvnni": "avx_vnni"}


def _cpu_can_run(target) -> bool:
    """Whether this CPU (as Linux reports it in /proc/cpuinfo, the OS's support included) has what
    code for `target` may use: the oracle of the dispatcher's CPUID checks."""
    from pyhalide.codegen.aot import x86_llvm_features

    flags = set(re.search(r"^flags\s*:(.*)$", Path("/proc/cpuinfo").read_text(), re.M).group(1).split())
    return all(_CPUINFO_FLAGS[f] in flags for f in x86_llvm_features(target))


def _multitarget_pipeline():
    """What it computes names the sub-target that ran: target_has_feature is settled per target."""
    im = hl.ImageParam(hl.Float(32), 1, "im")
    x, xo, xi = hl.Var("x"), hl.Var("xo"), hl.Var("xi")
    f = hl.Func("mt")
    has = hl.target_has_feature
    f[x] = im[x] * 2 + hl.select(has(hl.TargetFeature.AVX512_SapphireRapids), 4000,
                                 has(hl.TargetFeature.AVX512_Skylake), 300, has(hl.TargetFeature.AVX2), 20, 1)
    f.split(x, xo, xi, 64).parallel(xo).vectorize(xi, 8)
    return f, im


_MULTI = ["x86-64-linux-avx512_sapphirerapids", "x86-64-linux-avx-avx2-avx512_skylake-f16c-fma-sse41",
          "x86-64-linux-avx-avx2-f16c-fma-sse41", "x86-64-linux"]
_MARK = [4000, 300, 20, 1]


@needs_cc
@pytest.mark.skipif(not Path("/proc/cpuinfo").exists() or hl.get_host_target().arch is not hl.TargetArch.X86
                    or hl.get_host_target().os is not hl.TargetOS.Linux, reason="an x86 Linux host")
@pytest.mark.parametrize("library", [True, False], ids=["static_library", "object_files"])
def test_multitarget_code_runs_the_first_target_this_cpu_has(tmp_path, library, fresh_func_names):
    """compile_to_multitarget_static_library / _object_files: one object per target and a wrapper
    choosing, once, the first the CPU runs (the last is the baseline); linked into a program's
    library, the entry and its _argv twin compute with that one. The oracle: /proc/cpuinfo."""
    f, im = _multitarget_pipeline()
    targets = [hl.Target(t) for t in _MULTI]
    prefix = str(tmp_path / "mt")
    if library:
        f.compile_to_multitarget_static_library(prefix, [im], targets)
        inputs = ["-Wl,--whole-archive", f"{prefix}.a", "-Wl,--no-whole-archive"]
        assert {p.name for p in tmp_path.iterdir()} == {"mt.a", "mt.h"}
    else:
        f.compile_to_multitarget_object_files(prefix, [im], targets, ["sprapids", "skx", "avx2", "base"])
        inputs = [str(tmp_path / f"mt-{s}.o") for s in ("sprapids", "skx", "avx2", "base")]
        inputs.append(str(tmp_path / "mt_wrapper.o"))
        assert {p.name for p in tmp_path.iterdir()} == {Path(p).name for p in inputs} | {"mt.h"}
    header = (tmp_path / "mt.h").read_text()
    assert "int mt(struct halide_buffer_t *_im_buffer, struct halide_buffer_t *_mt_buffer);" in header
    so = tmp_path / "libmt.so"
    subprocess.run([CC, "-shared", "-o", str(so), *inputs, "-lpthread"], check=True)
    lib = ctypes.CDLL(str(so))
    expected_mark = next(m for t, m in zip(targets, _MARK) if _cpu_can_run(t) or m == 1)
    image = np.linspace(-5, 5, 300).astype(np.float32)
    for entry in ("mt", "mt_argv"):
        out = np.zeros(300, np.float32)
        buffers = [halide_buffer(image), halide_buffer(out)]
        if entry == "mt":
            rc = lib.mt(ctypes.byref(buffers[0]), ctypes.byref(buffers[1]))
        else:
            rc = lib.mt_argv((ctypes.c_void_p * 2)(*[ctypes.addressof(b) for b in buffers]))
        assert rc == 0
        np.testing.assert_array_equal(out, image * 2 + expected_mark, entry)


def test_multitarget_refusals(tmp_path):
    f, im = _multitarget_pipeline()
    prefix = str(tmp_path / "mt")
    with pytest.raises(hl.HalideError, match="matching arch-bits-os"):
        f.compile_to_multitarget_static_library(prefix, [im], [hl.Target("x86-64-linux-avx2"),
                                                                hl.Target("x86-64-windows")])
    with pytest.raises(hl.HalideError, match="same length as the targets"):
        f.compile_to_multitarget_object_files(prefix, [im], [hl.Target("x86-64-linux-avx2"),
                                                             hl.Target("x86-64-linux")], ["one"])
    with pytest.raises(hl.HalideError, match="at least one target"):
        f.compile_to_multitarget_static_library(prefix, [im], [])
    with pytest.raises(hl.HalideError, match="x86 only"):
        f.compile_to_multitarget_object_files(prefix, [im], [hl.Target("arm-64-linux-arm_dot_prod"),
                                                             hl.Target("arm-64-linux")])


@needs_cc
def test_multitarget_of_one_target_is_the_plain_library(tmp_path, fresh_func_names):
    """As Halide: one target, no wrapper: PREFIX.a (or PREFIX.o) and PREFIX.h, entered as NAME."""
    f, im = _multitarget_pipeline()
    f.compile_to_multitarget_static_library(str(tmp_path / "one"), [im], [hl.Target("x86-64-linux")])
    f.compile_to_multitarget_object_files(str(tmp_path / "two"), [im], [hl.Target("x86-64-linux")])
    assert {p.name for p in tmp_path.iterdir()} == {"one.a", "one.h", "two.o", "two.h"}
    lib = shared_library(tmp_path, tmp_path / "two.o", "two")
    image, out = np.ones(64, np.float32), np.zeros(64, np.float32)
    assert lib.mt(ctypes.byref(halide_buffer(image)), ctypes.byref(halide_buffer(out))) == 0
    np.testing.assert_array_equal(out, 3.0)


@needs_cc
def test_a_module_compiles_what_was_lowered_into_it(tmp_path, fresh_func_names):
    """Module.compile writes the object and header of the pipeline as compile_to_module lowered
    it (a schedule changed since does not reach it); buffers() are the Buffers compiled in."""
    table = hl.Buffer(np.arange(8, dtype=np.int32))
    k = hl.Param(hl.Int(32), "k")
    x = hl.Var("x")
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = table[x % 8] * k
    g[x] = f[x] + 1
    module = g.compile_to_module([k], "modg", hl.Target("host"))
    f.compute_root()  # after: not in the module
    assert [b is table for b in module.buffers()] == [True]
    assert module.submodules() == [] and module.resolve_submodules() is module
    assert module.get_metadata_name_map() == {} and module.get_auto_scheduler_results() is None
    module.compile({hl.OutputFileType.object: str(tmp_path / "modg.o"),
                    hl.OutputFileType.c_header: str(tmp_path / "modg.h")})
    assert "int modg(int32_t _k, struct halide_buffer_t *_g_buffer);" in (tmp_path / "modg.h").read_text()
    lib = shared_library(tmp_path, tmp_path / "modg.o", "modg")
    lib.modg.argtypes = [ctypes.c_int32, ctypes.c_void_p]
    out = np.zeros(20, np.int32)
    assert lib.modg(3, ctypes.byref(halide_buffer(out))) == 0
    np.testing.assert_array_equal(out, np.arange(20) % 8 * 3 + 1)
    module.compile({hl.OutputFileType.stmt: str(tmp_path / "modg.stmt")})
    assert "produce f" not in (tmp_path / "modg.stmt").read_text()  # (f inlined, as when lowered)
    g.compile_to_lowered_stmt(str(tmp_path / "now.stmt"), [k])
    assert "produce f" in (tmp_path / "now.stmt").read_text()
