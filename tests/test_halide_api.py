"""Halide's Python API as its tutorials and tests use it: printed forms, implicit Vars, Buffers
as Python sequences. Where the real Halide is installed, the two print the same."""

from __future__ import annotations

import re

import numpy as np
import pytest

import pyhalide as hl
from pyhalide.names import func_name_family


def _printed(lib, name):
    """(a Func's name is the one given only the first time a process gives it: Halide numbers
    the names it has seen in 16384 counters by hash, so another name in the same bucket, made
    earlier in the run by the differential fuzz, say, also earns a `$1`; the repr is compared
    with the name the library chose put back)"""
    x = lib.Var("x")
    f = lib.Func(name)
    f[x] = x * 2
    b = f.realize([3])
    return [repr(b), repr(x), str(x), repr(f).replace(f.name(), name), repr(lib.Int(32)), str(lib.UInt(8)),
            repr(lib.Expr(3) + x), list(b)]


def test_reprs_and_iteration_are_halides():
    assert _printed(hl, "reprs_f") == ["<halide.Buffer of type int32 shape:[[0,3,1]]>", "<halide.Var 'x'>", "x",
                                       "<halide.Func 'reprs_f'>", "<halide.Type int32>", "uint8",
                                       "<halide.Expr of type int32: (3 + x)>", [0, 2, 4]]
    assert str(hl.Expr(3) + hl.Var("x")) == "(3 + x)"  # Halide's str is its repr; pyhalide's messages quote this
    with pytest.raises(IndexError, match=r"index 5 is out of bounds for axis 0 with min=0, extent=3"):
        hl.Buffer(np.arange(3, dtype=np.int32))[5]


def test_the_real_halide_prints_the_same():
    real = pytest.importorskip("halide", reason="the real Halide (pip install halide) is the second oracle")
    assert _printed(hl, "printed_vs_halide") == _printed(real, "printed_vs_halide")


def test_implicit_vars_are_vars_named_as_halides():
    assert [v.name() for v in (hl._0, hl._9)] == ["_0", "_9"]
    f = hl.Func("implicit_named")
    f[hl._0] = hl._0 * 3
    assert np.asarray(f.realize([3])).tolist() == [0, 3, 6]


def test_the_typed_target_api():
    t = hl.Target(hl.TargetOS.Linux, hl.TargetArch.X86, 64, [hl.TargetFeature.AVX2, hl.TargetFeature.SSE41])
    assert str(t) == "x86-64-linux-avx2-sse41" and repr(t) == "<halide.Target x86-64-linux-avx2-sse41>"
    assert (t.os, t.arch, t.bits) == (hl.TargetOS.Linux, hl.TargetArch.X86, 64)
    assert t.has_feature(hl.TargetFeature.AVX2) and not t.has_feature(hl.TargetFeature.FMA)
    assert str(t.with_feature(hl.TargetFeature.FMA)) == "x86-64-linux-avx2-fma-sse41"
    assert (t.natural_vector_size(hl.Float(32)), t.natural_vector_size(hl.UInt(8))) == (8, 32)
    assert hl.Target("x86-64-linux-avx512").natural_vector_size(hl.Float(32)) == 16
    assert t.supported() and hl.Target("host-cuda").supported() and not hl.Target("host-opencl").supported()
    assert hl.host_supports_target_device(t) and not hl.host_supports_target_device(hl.Target("host-opencl"))
    assert hl.TargetFeature.CUDACapability86.value == "cuda_capability_86"
    with pytest.raises(hl.HalideError, match=r"takes a TargetOS, a TargetArch and 32 or 64"):
        hl.Target(hl.TargetOS.Linux, "x86", 64)


def test_every_target_feature_of_the_real_halide_has_the_same_name():
    real = pytest.importorskip("halide", reason="the real Halide (pip install halide) is the second oracle")
    base = real.Target("x86-64-linux")
    for name, feature in real.TargetFeature.__members__.items():
        if name in ("FeatureEnd", "HVX_128"):  # HVX_128 is HVX's old name
            continue
        spelled = str(base.with_feature(feature)).split("-")[3]
        assert getattr(hl.TargetFeature, name).value == spelled, name


def test_imageio_reads_and_writes_planar_images_as_halide_does(tmp_path):
    from pyhalide import imageio as hio

    rgb = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)  # (y, x, c), as image files hold it
    planar = hio.copy_to_planar(rgb)
    assert planar.shape == (3, 4, 5) and planar.flags.c_contiguous and planar[1, 2, 3] == rgb[2, 3, 1]
    assert np.array_equal(hio.copy_to_interleaved(planar), rgb)
    assert hl.Buffer(planar).dim(2).extent() == 3  # [x, y, c]
    pytest.importorskip("imageio")
    hio.imwrite(str(tmp_path / "t.png"), planar)
    assert np.array_equal(hio.imread(str(tmp_path / "t.png")), planar)


def test_tracing_prints_halides_events(capsys):
    """The events Halide 21 prints for this pipeline, read off its run: the `Tag` line of each
    traced Func (types, and the box the pipeline touches), then the events."""
    gx, gy, gxo, gxi = hl.Var("x"), hl.Var("y"), hl.Var("xo"), hl.Var("xi")
    g = hl.Func("tr_gradient")
    g[gx, gy] = gx + gy
    g.trace_stores().trace_loads()
    h = hl.Func("tr_h")
    h[gx, gy] = g[gx, gy] * 2.5
    h.trace_stores().trace_realizations()
    g.compute_root()
    h.split(gx, gxo, gxi, 2).vectorize(gxi)
    h.realize([4, 2])
    t = hl.Func("tr_tup")
    t[gx] = (gx, hl.f32(gx) / 3)
    t.trace_stores()
    t.realize([2])
    stores = [f"Store tr_gradient.0({i}, {j}) = {i + j}" for j in range(2) for i in range(4)]
    steps = []
    for j in range(2):
        for i in (0, 2):
            a, b = i + j, i + 1 + j
            steps += [f"Load tr_gradient.0(<{i}, {i + 1}>, <{j}, {j}>) = <{a}, {b}>",
                      f"Store tr_h.0(<{i}, {i + 1}>, <{j}, {j}>) = <{a * 2.5:f}, {b * 2.5:f}>"]
    want = ["Begin pipeline tr_h.0()", 'Tag tr_gradient.0() tag = "func_type_and_dim: 1 0 32 1 2 0 4 0 2"',
            'Tag tr_h.0() tag = "func_type_and_dim: 1 2 32 1 2 0 4 0 2"', "Begin realization tr_h.0(0, 4, 0, 2)",
            *stores,
            "Produce tr_h.0(0, 4, 0, 2)", *steps, "End produce tr_h.0(0, 4, 0, 2)",
            "End realization tr_h.0(0, 4, 0, 2)", "End pipeline tr_h.0()",
            "Begin pipeline tr_tup.0()", 'Tag tr_tup.0() tag = "func_type_and_dim: 2 0 32 1 2 32 1 1 0 2"',
            "Store tr_tup.0(0) = 0", "Store tr_tup.1(0) = 0.000000",
            "Store tr_tup.0(1) = 1", "Store tr_tup.1(1) = 0.333333", "End pipeline tr_tup.0()"]
    assert capsys.readouterr().out.splitlines() == want


def test_tuple_and_type_forms_of_halides_bindings():
    tx = hl.Var("x")
    pair = hl.Func("tf_pair")
    pair[tx] = (tx, hl.f32(tx) / 2)
    assert type(pair[tx][0]) is hl.FuncTupleElementRef

    class Complex:  # any sequence is a Tuple
        def __init__(self, re, im):
            self.re, self.im = re, im

        def __len__(self):
            return 2

        def __getitem__(self, i):
            return (self.re, self.im)[i]

    c = hl.Func("tf_complex")
    c[tx] = Complex(tx * 2, hl.f32(tx))
    re, im = c.realize([3])
    assert list(np.asarray(re)) == [0, 2, 4] and list(np.asarray(im)) == [0.0, 1.0, 2.0]
    r = hl.RDom([(0, 5)])
    best = hl.argmin((r.x - 3) * (r.x - 3))
    assert type(best) is tuple and len(best) == 2
    assert hl.UInt(8).bits() == 8 == hl.UInt(8).bits and hl.Float(32, 4).lanes() == 4


def test_infer_arguments_compile_to_module_and_wrappers_of_wrappers():
    ax, ay = hl.Var("x"), hl.Var("y")
    img = hl.ImageParam(hl.UInt(16), 2, "ia_img")
    gain = hl.Param(hl.UInt(16), "ia_gain", 2)
    src = hl.Func("ia_src")
    src[ax, ay] = img[ax, ay] * gain
    out = hl.Func("ia_out")
    out[ax, ay] = src[ay, ax]
    first = src.in_(out).compute_at(out, ax)
    second = first.in_(out).compute_at(out, ax)  # a wrapper of the wrapper, as Halide allows
    assert second is not first
    p = hl.Pipeline(out)
    args = p.infer_arguments()
    assert [a.name for a in args] == ["ia_img", "ia_gain"]
    assert [a.kind for a in args] == [hl.ArgumentKind.InputBuffer, hl.ArgumentKind.InputScalar]
    data = np.arange(12, dtype=np.uint16).reshape(3, 4)
    run = p.compile_to_callable(args)
    result = hl.Buffer(hl.UInt(16), [3, 4])
    run(hl.Buffer(data), 3, result)
    np.testing.assert_array_equal(np.asarray(result), (data * 3).T)
    module = p.compile_to_module(args, "ia_transpose")
    assert module.name() == "ia_transpose" and "produce ia_out" in str(module)
    p.invalidate_cache()
    run(hl.Buffer(data), 1, result)
    np.testing.assert_array_equal(np.asarray(result), data.T)


def test_lowered_stmt_as_html(tmp_path):
    sx, sy = hl.Var("x"), hl.Var("y")
    g = hl.Func("html_g")
    g[sx, sy] = sx + sy
    path = tmp_path / "g.stmt.html"
    g.compile_to_lowered_stmt(str(path), [], hl.StmtOutputFormat.HTML)
    page = path.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<details open><summary>produce html_g {" in page
    assert page.count("<details") == page.count("</details>") and "&gt;=" in page  # escaped
    g.compile_to_lowered_stmt(str(tmp_path / "g.stmt"), [], hl.StmtOutputFormat.Text)
    assert (tmp_path / "g.stmt").read_text().lstrip().startswith("let ")


def test_implicit_arguments_stand_for_the_remaining_dimensions():
    """hl._ as in Halide (results checked against Halide 21): in a call, the callee's remaining
    dimensions; on the left, the implicit Vars the value uses (appended if hl._ is not written)."""
    ix, iy = hl.Var("x"), hl.Var("y")
    f = hl.Func("im_f")
    f[ix, iy] = ix + iy * 10
    g = hl.Func("im_g")
    g[hl._] = f[hl._] * 2
    h = hl.Func("im_h")
    h[ix, hl._] = f[ix, hl._] + ix
    m = hl.Func("im_m")
    m[ix] = f[ix, hl._]
    b = hl.Buffer(np.arange(6, dtype=np.int32).reshape(2, 3))
    k = hl.Func("im_k")
    k[hl._] = b[hl._] + 1
    base = np.array([[0, 1, 2], [10, 11, 12]])
    np.testing.assert_array_equal(np.asarray(g.realize([3, 2])), base * 2)
    np.testing.assert_array_equal(np.asarray(h.realize([3, 2])), base + np.arange(3))
    assert m.dimensions() == 2
    np.testing.assert_array_equal(np.asarray(m.realize([3, 2])), base)
    np.testing.assert_array_equal(np.asarray(k.realize([3, 2])), np.arange(1, 7).reshape(2, 3))


def test_generated_names_print_as_the_user_sees_them(capsys):
    """Lowering renames generated names canonically (for its compile cache); what the user reads
    (a loop nest, trace lines, errors) uses the names the user's objects have, as Halide prints."""
    for _ in range(3):  # use up some generated names, as earlier code in a program would
        hl.Func(), hl.Var()
    x = hl.Var()
    f = hl.Func()
    f[x] = x
    f.trace_stores()
    f.realize([2])
    xo, xi = hl.Var(), hl.Var()
    f.split(x, xo, xi, 2)
    f.print_loop_nest()
    fn, xn, on, inner = f.name(), x.name(), xo.name(), xi.name()
    # f3$2 where a user named a Func f3: the trace names the pipeline by its C function (f3_2),
    # the loop nest names the Func as it was given (f3)
    pipeline, given = fn.replace("$", "_"), func_name_family(fn)
    assert capsys.readouterr().out.splitlines() == [
        f"Begin pipeline {pipeline}.0()", f'Tag {fn}.0() tag = "func_type_and_dim: 1 0 32 1 1 0 2"',
        f"Store {fn}.0(0) = 0", f"Store {fn}.0(1) = 1", f"End pipeline {pipeline}.0()",
        f"produce {given}:", f"  for {xn}.{on}:", f"    for {xn}.{inner} in [0, 1]:", f"      {given}(...) = ..."]
    g = hl.Func()
    g[x] = f[x] + 1
    f.compute_at(g, hl.Var())
    with pytest.raises(hl.HalideError, match=f"Func {re.escape(fn)} "):
        g.realize([4])


def test_names_given_that_equal_generated_names_stay_the_users(capsys):
    """A Func named "nm1" where "nm1" was also generated (CSE names its lets t0, t1...) is the
    user's name: lowering kept renaming it with the generated ones, and two Funcs of a chain came
    out with one name (an InternalError, or one Func read for the other)."""
    from pyhalide.names import unique_name

    for _ in range(4):
        unique_name("nm")
    taken = hl.Func("nm1")  # so the chain's nm1 is nm1$1 to the user
    x = hl.Var("x")
    chain = [hl.Func("nm0")]
    chain[0][x] = (x, x + 1)
    for i in (1, 2, 3):
        chain.append(hl.Func(f"nm{i}"))
        prev = chain[-2]
        chain[-1][x] = (prev[x][0] + prev[x][1], prev[x][1] - prev[x][0])
    for f in chain:
        f.compute_root()
    out = hl.Func("nm_out")
    out[x] = chain[-1][x][0] * 10 + chain[-1][x][1]
    out.print_loop_nest()
    produced = [line.split()[1].rstrip(":") for line in capsys.readouterr().out.splitlines() if "produce" in line]
    # (Halide prints nm1$1 as nm1 in a loop nest too)
    assert produced == ["nm0", "nm1", "nm2", "nm3", "nm_out"] and chain[1].name() == "nm1$1"
    # each step maps (a, b) to (a + b, b - a): from (x, x + 1), three steps give (2, -4x - 2)
    np.testing.assert_array_equal(np.asarray(out.realize([5])), 18 - 4 * np.arange(5))
    del taken


def test_printed_text_is_printed_as_written(capsys):
    """print()'s own text is the user's, whatever names lowering gave the Funcs: a Func named
    "f" again (Halide's name f$2 to the user, "f" inside the compiler) still prints "is f", as
    Halide does; its trace lines name f$2."""
    x = hl.Var("x")
    for _ in range(3):
        f = hl.Func("f")
        f[x] = hl.print(x, "is f", "f.0")
        f.trace_stores()
        f.realize([1])
    out = capsys.readouterr().out.splitlines()
    assert out[-3:] == ["0 is f f.0", f"Store {f.name()}.0(0) = 0", f"End pipeline {f.name().replace('$', '_')}.0()"]
    assert f.name() != "f"


def test_runtime_errors_read_as_halides():
    x = hl.Var("x")
    f = hl.Func("rt_err")
    f[x] = hl.u8(x)
    f.bound(x, 0, 1)
    with pytest.raises(hl.HalideError, match=r"^Error: Bounds given for rt_err in x \(from 0 to 0\) do not cover "
                                             r"required region \(from 0 to 9\)"):
        f.realize(hl.Buffer(hl.UInt(8), [10]))


def test_argmin_and_argmax_start_at_zero_and_take_an_rdom_first():
    """Halide starts an arg-reduction's coordinates at 0, not at the RDom's min: where nothing
    beats the start (argmin of an always-true condition, as lesson 13's Mandelbrot escape
    count), the answer is 0. With an RDom first, only it is reduced over; other RVars are free."""
    x = hl.Var("x")
    r = hl.RDom([(1, 12)], "am_r")
    never = hl.Func("am_never")
    never[x] = hl.argmin(r.x + x > -100)[0]  # always true: no r beats the start
    first_false = hl.Func("am_first_false")
    first_false[x] = hl.argmin(r.x < x)[0]
    assert list(never.realize([3])) == [0, 0, 0]
    assert list(first_false.realize([4])) == [1, 1, 2, 3]
    im = hl.Buffer(np.array([[3, 1, 4, 1], [5, 9, 2, 6]], dtype=np.int32))
    s = hl.RDom([(0, 4)], "am_s")
    t = hl.RDom([(1, 3)], "am_t")
    g = hl.Func("am_g")
    g[x] = 0
    g[s.x] = hl.sum(t, s.x * 10 + t.x) + hl.maximum(t, t.x - s.x, "am_mx")  # s free, t reduced
    assert list(g.realize([5])) == [9, 38, 67, 96, 0]  # as Halide 21 computes it
    a, b = hl.argmin(s, im[s.x, x]), hl.argmax(im[s.x, x])
    h = hl.Func("am_h")
    h[x] = (a[0], a[1], b[0], b[1])
    assert [list(v) for v in h.realize([2])] == [[1, 2], [1, 2], [2, 1], [4, 9]]


def test_an_undefined_rdom_and_rdoms_print_as_halides():
    assert repr(hl.RDom()) == "<halide.RDom RDom()>" and hl.RDom().dimensions() == 0
    assert not hl.RDom().defined()
    with pytest.raises(hl.HalideError, match="no dimension 0"):
        _ = hl.RDom().x
    r = hl.RDom([(0, 3), (1, hl.Param(hl.Int(32), "rd_n"))], "rd")
    assert str(r) == "<halide.RDom RDom(\n  rd$x(0, 3)\n  rd$y(1, rd_n)\n)>"


def test_dividing_a_bounded_float_by_a_param_bounds_an_index_by_the_params_sign():
    """`i32(clamp(v, 0, 1) / sigma)` indexes a grid computed at root (Halide's bilateral_grid
    generator): Halide bounds the quotient by both signs of sigma, so the grid is finite."""
    x = hl.Var("x")
    sigma = hl.Param(hl.Float(32), "bq_sigma")
    im = hl.ImageParam(hl.Float(32), 1, "bq_im")
    grid = hl.Func("bq_grid")
    grid[x] = x * 2
    out = hl.Func("bq_out")
    out[x] = grid[hl.i32(hl.clamp(im[x], 0.0, 1.0) / sigma)]
    grid.compute_root()
    values = np.array([0.0, 0.26, 0.5, 1.0, 7.0], dtype=np.float32)
    im.set(hl.Buffer(values))
    for s in (0.25, -0.5):
        sigma.set(s)
        got = np.asarray(out.realize([5]))
        want = np.trunc(np.clip(values, 0, 1) / np.float32(s)).astype(np.int32) * 2
        np.testing.assert_array_equal(got, want)


def test_var_or_rvar_and_memoize_tag_as_halides():
    """VarOrRVar(v) is the Var or RVar itself (pyhalide's schedules take either), isinstance holds
    for both; memoize_tag's value is its first argument (its tags key a memoized Func's cache
    entries: test_memoization.py)."""
    x, r = hl.Var("vr_x"), hl.RDom([(0, 4)], "vr_r")
    assert hl.VarOrRVar(x) is x and hl.VarOrRVar(r.x) is r.x and hl.VarOrRVar(r).name() == "vr_r$x"
    assert isinstance(x, hl.VarOrRVar) and isinstance(r.x, hl.VarOrRVar) and not isinstance(hl.Expr(1), hl.VarOrRVar)
    with pytest.raises(hl.HalideError, match="VarOrRVar takes a Var or an RVar, got 3"):
        hl.VarOrRVar(3)
    f = hl.Func("vr_f")
    f[x] = hl.memoize_tag(x * 2, x + 1)
    f.split(hl.VarOrRVar(x), hl.Var("vr_xo"), hl.Var("vr_xi"), 2)
    assert list(f.realize([5])) == [0, 2, 4, 6, 8]


_IMAGE_TRACE_SCRIPT = """
import sys
import numpy as np
hl = __import__(sys.argv[1])
x, y = hl.Var("x"), hl.Var("y")
a, b = hl.ImageParam(hl.Int(32), 2, "a_in"), hl.ImageParam(hl.UInt(8), 1, "b_in")
g, f = hl.Func("g"), hl.Func("f")
g[x, y] = a[x, y] + 1
f[x, y] = g[x, y] * 2 + a[x + 1, y] + b[x]
g.compute_root().trace_stores()
f.trace_loads()  # an output nothing reads: no events, so no tag
a.trace_loads()
b.trace_loads()
a.set(hl.Buffer(np.arange(6, dtype=np.int32).reshape(2, 3)))
b.set(hl.Buffer(np.array([7, 8], dtype=np.uint8)))
f.vectorize(x, 2)
f.realize([2, 2])
"""


def test_a_traced_store_computes_its_value_once(capsys):
    """A print() in a traced Func's value prints once per store, as Halide 21 prints it (read off
    its run): the value is stored and traced from one computation."""
    x = hl.Var("x")
    f, g = hl.Func("once_f"), hl.Func("once_g")
    f[x] = hl.print(x * 3, "<- x * 3 at", x)
    g[x] = f[x] + f[x + 1]
    f.compute_root().trace_stores()
    g.trace_loads()
    g.realize([2])
    want = ["Begin pipeline once_g.0()", 'Tag once_f.0() tag = "func_type_and_dim: 1 0 32 1 1 0 3"']
    for i in range(3):
        want += [f"{3 * i} <- x * 3 at {i}", f"Store once_f.0({i}) = {3 * i}"]
    assert capsys.readouterr().out.splitlines() == [*want, "End pipeline once_g.0()"]


def test_image_param_trace_loads_prints_what_halide_prints(tmp_path):
    """ImageParam.trace_loads: each load of the image printed as `Load a_in.0(x, y) = v` (vector
    loads lane by lane in <...>), and a func_type_and_dim tag for each image and Func that had
    events (images first, in Halide's order), none for a traced Func without any: the same text
    as the real Halide 21 prints for the same program."""
    import subprocess
    import sys

    pytest.importorskip("halide", reason="the real Halide (pip install halide) is the oracle")
    script = tmp_path / "trace_images.py"
    script.write_text(_IMAGE_TRACE_SCRIPT)
    out = {m: subprocess.run([sys.executable, str(script), m], capture_output=True, text=True, check=True).stdout
           for m in ("halide", "pyhalide")}
    assert "Load a_in.0(" in out["pyhalide"]
    assert 'Tag b_in.0() tag = "func_type_and_dim: 1 1 8 1 1 0 2"' in out["pyhalide"]
    assert out["pyhalide"] == out["halide"]


def test_a_renamed_func_whose_name_was_generated_before_is_one_name():
    """A Func given a name an anonymous Func was generated with earlier (`hl.Func()` made "f7"),
    renamed because that name was taken ("f7$1"), is one name token, not an anonymous RDom's
    numbered RVar ("r3$4"): lowering renamed its parts, and when the renumbered parts met the
    renamed Funcs' names, traces printed one Func's name for another."""
    from pyhalide.names import map_name_tokens, name_tokens

    # a generated name, such as f3 (not one made unique itself, f3$2, where a user named a Func f3)
    taken = next(n for n in (hl.Func().name() for _ in range(100)) if "$" not in n)
    renamed = hl.Func(taken).name()
    assert renamed == f"{taken}$1"
    assert name_tokens(f"{renamed}.s0.x") == [renamed, "s0", "x"]
    assert map_name_tokens(f"{renamed}.s0.x", {taken: "f0"}) == f"{renamed}.s0.x"
    assert map_name_tokens(f"{renamed}.s0.x", {renamed: "f1"}) == "f1.s0.x"


_REALIZATION_TRACE_SCRIPT = """
import sys
hl = __import__(sys.argv[1])
x, y = hl.Var("x"), hl.Var("y")
g, f, h, k = hl.Func("g"), hl.Func("f"), hl.Func("h"), hl.Func("k")
g[x, y] = x + y
h[x, y] = x * 3
k[x, y] = g[x, y] - 1
f[x, y] = g[x, y] * 2 + h[x, y] + k[x, y + 1]
g.compute_root().trace_stores().trace_realizations().add_trace_tag("first tag").add_trace_tag("second")
h.compute_root().add_trace_tag("h is not traced: not printed")
k.compute_at(f, y).store_root().trace_realizations().trace_loads().add_trace_tag("k's tag")
f.add_trace_tag("f traces stores only: not printed").trace_stores()
f.realize([2, 3])
"""


def test_realization_traces_and_trace_tags_print_what_halide_prints(tmp_path):
    """trace_realizations of Funcs computed at root and inside a loop (stored outside it, so it
    slides): Begin/End realization with the realization's box, Produce/End produce and
    Consume/End consume with the box the pure stage computes there (one new row per iteration);
    add_trace_tag's tags after the func_type_and_dim ones, only for Funcs whose realizations or
    loads are traced: the same text as the real Halide 21 prints."""
    import subprocess
    import sys

    pytest.importorskip("halide", reason="the real Halide (pip install halide) is the oracle")
    script = tmp_path / "trace_realizations.py"
    script.write_text(_REALIZATION_TRACE_SCRIPT)
    out = {m: subprocess.run([sys.executable, str(script), m], capture_output=True, text=True, check=True).stdout
           for m in ("halide", "pyhalide")}
    assert 'Tag g.0() tag = "second"' in out["pyhalide"] and "Consume k.0(0, 2, 2, 1)" in out["pyhalide"]
    assert out["pyhalide"] == out["halide"]


def test_image_param_store_in():
    """store_in on an input or output image parameter: checked, no effect on the values (as in
    Halide for every memory type but GPUTexture, which pyhalide refuses: it has no texture
    reads); not a memory type: refused."""
    im = hl.ImageParam(hl.UInt(8), 1, "store_in_im")
    x = hl.Var("x")
    f = hl.Func("store_in_f")
    f[x] = im[x] * 2
    assert im.store_in(hl.MemoryType.Heap) is im
    assert f.output_buffer().store_in(hl.MemoryType.Auto) is not None
    im.set(hl.Buffer(np.arange(4, dtype=np.uint8)))
    assert list(f.realize([4])) == [0, 2, 4, 6]
    with pytest.raises(hl.HalideError, match="no texture reads"):
        im.store_in(hl.MemoryType.GPUTexture)
    with pytest.raises(hl.HalideError, match="is not an hl.MemoryType"):
        im.store_in("Nowhere")


def test_arguments_as_halides():
    """infer_arguments gives hl.Arguments (name, kind, dimensions, type, estimates) as Halide 21's
    does; Arguments made by hand and those work wherever arguments are taken."""
    real = pytest.importorskip("halide", reason="the real Halide (pip install halide) is the second oracle")

    def described(lib):
        x = lib.Var("x")
        im = lib.ImageParam(lib.UInt(8), 1, "arg_im")
        im.set_estimates([(0, 100)])
        p = lib.Param(lib.Float(32), "arg_p", 1.5)
        p.set_estimate(2.0)
        p.set_range(0.0, 10.0)
        f = lib.Func("arg_f")
        f[x] = lib.f32(im[x]) * p
        args = f.infer_arguments()
        out = []
        for a in [*args, lib.Argument(f.output_buffer()), lib.Argument(lib.Param(lib.Int(16), "arg_q"))]:
            e = a.argument_estimates
            scalars = [None if v is None or not v.defined() else lib.evaluate(v)
                       for v in (e.scalar_def, e.scalar_min, e.scalar_max, e.scalar_estimate)]
            buffers = [(lib.evaluate(r.min), lib.evaluate(r.extent)) if r.min.defined() else None
                       for r in e.buffer_estimates]
            # (a name another test of the process used too gets a "$N" suffix, in either library)
            out.append((re.sub(r"\$\d+$", "", a.name), a.kind.name, a.dimensions, str(a.type), scalars, buffers))
        return out, f, args

    got, f, args = described(hl)
    want, _, _ = described(real)
    assert got == want
    run = f.compile_to_callable(args)
    result = hl.Buffer(hl.Float(32), [4])
    run(hl.Buffer(np.arange(4, dtype=np.uint8)), 2.0, result)
    np.testing.assert_array_equal(np.asarray(result), np.arange(4) * 2.0)
