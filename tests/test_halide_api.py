"""Halide's Python API as its tutorials and tests use it: printed forms, implicit Vars, Buffers
as Python sequences. Where the real Halide is installed, the two print the same."""

from __future__ import annotations

import numpy as np
import pytest

import pyhalide as hl


def _printed(lib):
    x = lib.Var("x")
    f = lib.Func("f")
    f[x] = x * 2
    b = f.realize([3])
    return [repr(b), repr(x), str(x), repr(f), repr(lib.Int(32)), str(lib.UInt(8)), repr(lib.Expr(3) + x), list(b)]


def test_reprs_and_iteration_are_halides():
    assert _printed(hl) == ["<halide.Buffer of type int32 shape:[[0,3,1]]>", "<halide.Var 'x'>", "x",
                            "<halide.Func 'f'>", "<halide.Type int32>", "uint8",
                            "<halide.Expr of type int32: (3 + x)>", [0, 2, 4]]
    assert str(hl.Expr(3) + hl.Var("x")) == "(3 + x)"  # Halide's str is its repr; pyhalide's messages quote this
    with pytest.raises(IndexError, match=r"index 5 is out of bounds for axis 0 with min=0, extent=3"):
        hl.Buffer(np.arange(3, dtype=np.int32))[5]


def test_the_real_halide_prints_the_same():
    real = pytest.importorskip("halide", reason="the real Halide (pip install halide) is the second oracle")
    assert _printed(hl) == _printed(real)


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
    """The events Halide 21 prints for this pipeline (read off its run; its `Tag` lines, which
    pyhalide does not print yet, left out)."""
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
    want = ["Begin pipeline tr_h.0()", "Begin realization tr_h.0(0, 4, 0, 2)", *stores,
            "Produce tr_h.0(0, 4, 0, 2)", *steps, "End produce tr_h.0(0, 4, 0, 2)",
            "End realization tr_h.0(0, 4, 0, 2)", "End pipeline tr_h.0()",
            "Begin pipeline tr_tup.0()", "Store tr_tup.0(0) = 0", "Store tr_tup.1(0) = 0.000000",
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
    assert [a.name() for a in args] == ["ia_img", "ia_gain"]
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
