"""Halide-style programs through the JIT, checked against numpy written independently here."""

import re
from fractions import Fraction

import numpy as np
import pytest

import pyhalide as hl

x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")


def blur_numpy(img):
    p = np.pad(img, 1, mode="edge")
    bx = ((p[:, :-2] + p[:, 1:-1] + p[:, 2:]) // 3).astype(img.dtype)  # uint16 wraps, as in Halide
    return ((bx[:-2] + bx[1:-1] + bx[2:]) // 3).astype(img.dtype)


@pytest.mark.parametrize("root", [False, True])
def test_separable_blur_uint16_1536x2560(root):
    rng = np.random.default_rng(1)
    img = rng.integers(0, 65536, (1536, 2560), dtype=np.uint16)
    inp = hl.Buffer(img, name="blur_in")
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    blur_x, blur_y = hl.Func("blur_x"), hl.Func("blur_y")
    blur_x[x, y] = (clamped[x - 1, y] + clamped[x, y] + clamped[x + 1, y]) / 3
    blur_y[x, y] = (blur_x[x, y - 1] + blur_x[x, y] + blur_x[x, y + 1]) / 3
    if root:
        blur_x.compute_root()
    out = blur_y.realize([2560, 1536])
    assert np.array_equal(np.asarray(out), blur_numpy(img))


def test_matmul_512_float32_with_rdom():
    rng = np.random.default_rng(2)
    n = 512
    a = rng.random((n, n), dtype=np.float32)
    b = rng.random((n, n), dtype=np.float32)
    A, B = hl.Buffer(a, name="A"), hl.Buffer(b, name="B")
    k = hl.RDom([(0, n)], name="k")
    C = hl.Func("C")
    C[x, y] = 0.0
    C[x, y] += A[k.x, y] * B[x, k.x]
    out = np.asarray(C.realize([n, n]))
    # the same order of float additions as the RDom: k innermost, one k at a time
    ref = np.zeros((n, n), np.float32)
    for kk in range(n):
        ref += a[:, kk : kk + 1] * b[kk : kk + 1, :]
    assert np.array_equal(out, ref)
    assert np.allclose(out, a @ b, rtol=1e-4)


def test_histogram_with_where_and_image_param():
    img = np.random.default_rng(3).integers(0, 256, (40, 50), dtype=np.uint8)
    inp = hl.ImageParam(hl.UInt(8), 2, "hist_in")
    inp.set(hl.Buffer(img))
    r = hl.RDom([(0, 50), (0, 40)])
    r.where(r.x % 2 == 0)
    h = hl.Func("hist")
    h[x] = 0
    h[hl.i32(inp[r.x, r.y])] += 1
    assert np.array_equal(np.asarray(h.realize([256])), np.bincount(img[:, ::2].ravel(), minlength=256))


def test_cumulative_sum_scan():
    data = np.random.default_rng(4).integers(-100, 100, 50).astype(np.int32)
    src = hl.Buffer(data)
    cs = hl.Func("cumsum")
    cs[x] = src[x]
    r = hl.RDom([(1, 49)])
    cs[r.x] = cs[r.x - 1] + cs[r.x]
    assert np.array_equal(np.asarray(cs.realize([50])), np.cumsum(data))


def test_tuple_valued_func_and_swap_update():
    t = hl.Func("tup")
    t[x, y] = (x + y, hl.f32(x) * 0.5)
    t[x, y] = (hl.i32(t[x, y][1] * 4.0), hl.f32(t[x, y][0]))  # all of a Tuple is read before any is written
    a, b = t.realize([3, 2])
    xs, ys = np.meshgrid(np.arange(3), np.arange(2))
    assert np.array_equal(np.asarray(a), (xs * 2).astype(np.int32))
    assert np.array_equal(np.asarray(b), (xs + ys).astype(np.float32))


def test_pipeline_with_two_outputs():
    f, g = hl.Func("two_f"), hl.Func("two_g")
    f[x] = x * 2
    g[x] = f[x] * 3 + 1
    fo, go = hl.Pipeline([f, g]).realize([5])
    assert np.array_equal(np.asarray(fo), np.arange(5) * 2)
    assert np.array_equal(np.asarray(go), np.arange(5) * 6 + 1)


def test_realize_into_buffer_with_nonzero_min():
    f = hl.Func("shifted")
    f[x, y] = x * 100 + y
    buf = hl.Buffer(hl.Int(32), [3, 2])
    buf.set_min([10, -4])
    f.realize(buf)
    expected = np.array([[1000 - 4, 1100 - 4, 1200 - 4], [1000 - 3, 1100 - 3, 1200 - 3]])
    assert np.array_equal(np.asarray(buf), expected)
    assert buf[11, -3] == 1100 - 3


def test_input_buffer_with_nonzero_min_and_strides():
    base = np.arange(60, dtype=np.int16).reshape(6, 10)
    view = base[::2, 1::3]  # non-contiguous strides
    b = hl.Buffer(view, name="strided")
    b.set_min([5, 7])
    f = hl.Func("copy_strided")
    f[x, y] = b[x + 5, y + 7] * 2
    out = np.asarray(f.realize([view.shape[1], view.shape[0]]))
    assert np.array_equal(out, view * 2)


def test_buffer_shares_memory_with_numpy():
    a = np.zeros((3, 4), np.float32)
    b = hl.Buffer(a)
    b[2, 1] = 5.0
    assert a[1, 2] == 5.0
    assert np.shares_memory(np.asarray(b), a)
    assert b.width() == 4 and b.height() == 3


def test_params_change_between_calls():
    p = hl.Param(hl.Float(32), "scale", 2.5)
    q = hl.Param(hl.UInt(8), "offset", 3)
    f = hl.Func("scaled")
    f[x] = hl.f32(x) * p + q
    assert np.array_equal(np.asarray(f.realize([3])), np.array([3, 5.5, 8], np.float32))
    p.set(1.0)
    assert np.array_equal(np.asarray(f.realize([3])), np.array([3, 4, 5], np.float32))


def test_inline_reductions():
    rr = hl.RDom([(0, 10)])
    s = hl.Func("isum")
    s[x] = hl.sum(rr.x * x)
    assert np.array_equal(np.asarray(s.realize([3])), np.array([0, 45, 90]))
    data = np.array([[3, 9, 1, 9], [7, 2, 8, 0]], dtype=np.int32)
    buf = hl.Buffer(data)
    r = hl.RDom([(0, 4)])
    am, mx, mn, pr = hl.Func("am"), hl.Func("mx"), hl.Func("mn"), hl.Func("pr")
    am[y] = hl.argmax(buf[r.x, y])[0]
    mx[y] = hl.maximum(buf[r.x, y])
    mn[y] = hl.minimum(buf[r.x, y])
    pr[y] = hl.product(buf[r.x, y] + 1)
    assert list(np.asarray(am.realize([2]))) == [1, 2]  # the first maximum wins
    assert list(np.asarray(mx.realize([2]))) == [9, 8]
    assert list(np.asarray(mn.realize([2]))) == [1, 0]
    assert list(np.asarray(pr.realize([2]))) == [4 * 10 * 2 * 10, 8 * 3 * 9 * 1]


@pytest.mark.parametrize(
    "name, expected",
    [
        ("repeat_edge", [0, 0, 0, 0, 0, 0, 1, 2, 3, 3, 3, 3, 3, 3]),
        ("constant_exterior", [9, 9, 9, 9, 9, 0, 1, 2, 3, 9, 9, 9, 9, 9]),
        ("mirror_image", [3, 3, 2, 1, 0, 0, 1, 2, 3, 3, 2, 1, 0, 0]),
        ("mirror_interior", [1, 2, 3, 2, 1, 0, 1, 2, 3, 2, 1, 0, 1, 2]),
        ("repeat_image", [3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0]),
    ],
)
def test_boundary_conditions(name, expected):
    small = hl.Buffer(np.arange(4, dtype=np.int32))
    bc = getattr(hl.BoundaryConditions, name)
    wrapped = bc(small, 9) if name == "constant_exterior" else bc(small)
    q = hl.Func("q_" + name)
    q[x] = wrapped[x - 5]
    assert list(np.asarray(q.realize([14]))) == expected


def test_boundary_condition_on_func_with_bounds():
    f = hl.Func("inner")
    f[x] = x * x
    g = hl.BoundaryConditions.repeat_edge(f, [(0, 3)])
    h = hl.Func("outer")
    h[x] = g[x - 2]
    assert list(np.asarray(h.realize([7]))) == [0, 0, 0, 1, 4, 4, 4]


def test_print_returns_its_value(capsys):
    pr = hl.Func("printer")
    pr[x] = hl.print(x * 2, "is twice x")
    assert list(np.asarray(pr.realize([2]))) == [0, 2]
    err = capsys.readouterr().out  # Python's stdout, as Halide's bindings print
    assert "0 is twice x" in err and "2 is twice x" in err


def test_compile_jit_then_realize_reuses_code():
    f = hl.Func("reused")
    f[x] = x + 1
    f.compile_jit()
    p = f._pipeline()
    compiled = dict(p._compiled)
    f.realize([4])
    assert p._compiled == compiled


def test_redefinition_after_realize_is_refused():
    """As Halide: a realized Func takes no new definition (its pipeline is unchanged)."""
    f = hl.Func("redefined")
    f[x] = x
    assert list(np.asarray(f.realize([3]))) == [0, 1, 2]
    with pytest.raises(hl.HalideError, match="Func redefined cannot be given a new update definition, because it "
                                             "has already been realized"):
        f[x] = f[x] * 10
    assert list(np.asarray(f.realize([3]))) == [0, 1, 2]


def test_debug_outputs(tmp_path):
    f, g = hl.Func("dbg_f"), hl.Func("dbg_g")
    f[x, y] = x + y
    g[x, y] = f[x, y] * 2
    f.compute_root()
    stmt = tmp_path / "g.stmt"
    g.compile_to_lowered_stmt(str(stmt))
    text = stmt.read_text()
    assert "produce dbg_f" in text and "for<serial> (dbg_g.s0.x" in text
    ll = tmp_path / "g.ll"
    g.compile_to_llvm_assembly(str(ll))
    assert "define" in ll.read_text()
    asm = tmp_path / "g.s"
    g.compile_to_assembly(str(asm))
    assert "pyhalide_pipeline" in asm.read_text()


def test_innermost_loops_start_on_a_cache_line(tmp_path):
    """A histogram's loop (load a byte, increment its bin) is about 20 bytes; LLVM aligns loops
    to 16 bytes, and one that straddled a 64-byte line ran 1.6x slower on Zen 3 (LLVM_OPTIONS)."""
    img = hl.Buffer(np.arange(64 * 32, dtype=np.uint8).reshape(32, 64), "align_img")
    r = hl.RDom([hl.Range(0, 64), hl.Range(0, 32)], name="align_r")
    hist = hl.Func("align_hist")
    hist[x] = 0
    hist[hl.cast(hl.Int(32), img[r.x, r.y])] += 1
    asm = tmp_path / "hist.s"
    hist.compile_to_assembly(str(asm))
    lines = [line.strip() for line in asm.read_text().splitlines()]
    increment = next(i for i, line in enumerate(lines) if re.match(r"incl\s+\(", line))
    label = max(i for i in range(increment) if lines[i].startswith(".LBB"))
    assert lines[label - 1].split()[:2] == [".p2align", "6"], lines[label - 1:increment + 1]
    assert list(np.asarray(hist.realize([256]))) == [8] * 256


def test_print_loop_nest(capsys):
    f, g = hl.Func("nest_f"), hl.Func("nest_g")
    f[x, y] = x + y
    g[x, y] = f[x, y] * 2
    f.compute_root()
    g.print_loop_nest()
    out = capsys.readouterr().out
    assert out.splitlines() == [  # as Halide 21 prints it
        "produce nest_f:",
        "  for y:",
        "    for x:",
        "      nest_f(...) = ...",
        "consume nest_f:",
        "  produce nest_g:",
        "    for y:",
        "      for x:",
        "        nest_g(...) = ...",
    ]


def test_zero_dimensional_func():
    f = hl.Func(hl.Expr(42))
    assert np.asarray(f.realize([])).item() == 42


def test_bool_func_and_buffer():
    f = hl.Func("is_even")
    f[x] = x % 2 == 0
    out = np.asarray(f.realize([5]))
    assert out.dtype == np.bool_ and list(out) == [True, False, True, False, True]
    g = hl.Func("from_bool")
    g[x] = hl.select(hl.Buffer(out)[x], 10, 20)
    assert list(np.asarray(g.realize([5]))) == [10, 20, 10, 20, 10]


def test_compile_to_callable_takes_arrays_and_params():
    inp = hl.ImageParam(hl.Float(32), 2, "callable_in")
    scale = hl.Param(hl.Float(32), "callable_scale")
    offset = hl.Param(hl.Int(32), "callable_offset")
    f = hl.Func("callable_f")
    f[x, y] = inp[x, y] * scale + hl.f32(offset)
    c = hl.Pipeline(f).compile_to_callable([inp, scale, offset])
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = np.zeros((3, 4), np.float32)
    c(a, 2.0, 5, out)
    assert np.array_equal(out, a * 2 + 5)
    buf_out = hl.Buffer(hl.Float(32), [4, 3])
    c(hl.Buffer(a), 0.5, -1, buf_out)
    assert np.array_equal(np.asarray(buf_out), a * 0.5 - 1)
    # Halide's bindings' errors, raised before anything runs
    for args, kwargs, message in [
        ((a, 2.0), {}, r"Expected exactly 4 positional arguments, but saw 2\."),
        ((a, 2.0, 5, out, out), {}, r"Expected at most 4 positional arguments, but saw 5\."),
        ((a, 2.0), {"callable_offset": 5, "bogus": out}, r"Unknown argument 'bogus' specified via keyword\."),
        ((a, 2.0, 5), {"callable_scale": 1.0, "callable_f": out}, r"Argument callable_scale specified multiple times"),
        ((a,), {"callable_offset": 5, "callable_f": out}, r"Argument callable_scale was not specified by either"),
        ((hl.f32(1), 2.0, 5, out), {}, r"Object of type 'Expr' is not an instance of 'buffer'"),
        ((a, "two", 5, out), {}, r"Unable to cast Python instance of type <class 'str'>"),
        ((a, 2.0, 5, "out"), {}, r"Object of type 'str' is not an instance of 'buffer'"),
    ]:
        with pytest.raises(hl.HalideError, match=message):
            c(*args, **kwargs)
    with pytest.raises(hl.HalideError, match="Buffer callable_f is float64 with 2 dimensions"):
        c(a, 2.0, 5, np.zeros((3, 4)))
    with pytest.raises(hl.HalideError, match="Param callable_offset, which is not among the arguments"):
        hl.Pipeline(f).compile_to_callable([inp, scale])


def test_callable_refuses_undefined_buffers_and_numbers_its_params_cannot_take():
    """As Halide's bindings: an integer Param takes integers (bools, numpy integers, anything
    with __index__) within its type's range, never a float (even 2.0); a float Param takes any
    real number; a bool Param any number's truth. An undefined hl.Buffer is refused, by name."""
    inp = hl.ImageParam(hl.Int(32), 1, "cr_in")
    p_i, p_u8 = hl.Param(hl.Int(32), "cr_int"), hl.Param(hl.UInt(8), "cr_u8")
    p_f, p_b = hl.Param(hl.Float(32), "cr_float"), hl.Param(hl.Bool(), "cr_bool")
    f = hl.Func("cr_f")
    f[x] = inp[x] + p_i * 1000 + hl.i32(p_u8) * 100 + hl.i32(p_f * 10) + hl.select(p_b, 1, 0)
    c = f.compile_to_callable([inp, p_i, p_u8, p_f, p_b])
    a, out = np.arange(3, dtype=np.int32), np.zeros(3, np.int32)

    class Three:
        def __index__(self):
            return 3

    for params, expected in [
        ((2, 1, 0.5, True), 2000 + 100 + 5 + 1),
        ((True, np.uint8(255), 2, 2.0), 1000 + 25500 + 20 + 1),
        ((np.int64(-7), 0, np.float64(0.25), 0), -7000 + 2),
        ((Three(), np.bool_(True), Fraction(1, 2), np.bool_(False)), 3000 + 100 + 5),
    ]:
        c(a, *params, out)
        np.testing.assert_array_equal(out, a + expected)
    for args, message in [
        ((2.25, 1, 0.5, True), r"scalar argument cr_int of type int32: it takes an integer, not the float 2\.25"),
        ((2.0, 1, 0.5, True), r"scalar argument cr_int of type int32: it takes an integer, not the float 2\.0"),
        ((np.float32(1), 1, 0.5, True), r"scalar argument cr_int .* not the float32"),
        ((2, 256, 0.5, True), r"Argument cr_u8 is a Param of type uint8: 256 is out of its range \[0, 255\]"),
        ((2, np.int8(-1), 0.5, True), r"Argument cr_u8 is a Param of type uint8: -1 is out of its range"),
        ((2**31, 1, 0.5, True), r"Argument cr_int is a Param of type int32: 2147483648 is out of its range"),
        ((2, 1, 1j, True), r"Unable to cast Python instance of type <class 'complex'> to the scalar argument "
                           r"cr_float of type float32"),
        ((2, 1, None, True), r"Unable to cast .*NoneType.* cr_float"),
        ((2, 1, 0.5, "yes"), r"Unable to cast .*str.* cr_bool of type bool"),
        ((np.array([2]), 1, 0.5, True), r"Unable to cast .*ndarray.* cr_int"),
    ]:
        out[:] = -1
        with pytest.raises(hl.HalideError, match=message):
            c(a, *args, out)
        assert (out == -1).all()  # refused before anything ran
    with pytest.raises(hl.HalideError, match="Undefined buffer passed for argument cr_in"):
        c(hl.Buffer(), 2, 1, 0.5, True, out)
    with pytest.raises(hl.HalideError, match="Undefined buffer passed for argument cr_f"):
        c(a, 2, 1, 0.5, True, hl.Buffer())
    with pytest.raises(hl.HalideError, match="Undefined buffer passed for argument cr_in"):
        c(cr_in=hl.Buffer(), cr_int=2, cr_u8=1, cr_float=0.5, cr_bool=True, cr_f=out)


def test_inline_reductions_get_their_own_names_and_live_in_their_consumer():
    r = hl.RDom([hl.Range(0, 3)])
    f = hl.Func("ir_src")
    f[x] = hl.cast(hl.Int(32), x)
    g = hl.Func("two_sums")
    g[x] = hl.sum(f[x + r.x]) + hl.sum(f[x + r.x] * 2)
    assert list(np.asarray(g.realize([4]))) == [9, 18, 27, 36]
    xo, xi = hl.Var("xo"), hl.Var("xi")
    f2 = hl.Func("ir_src2")
    f2[x] = x
    g2 = hl.Func("sum_at_tile")
    g2[x] = hl.sum(f2[x + r.x])
    g2.split(x, xo, xi, 4)
    f2.compute_at(g2, xo)  # legal because the sum is computed inside g2's innermost loop
    assert list(np.asarray(g2.realize([8]))) == [3 * v + 3 for v in range(8)]


def test_inline_reductions_in_a_vectorized_loop_are_vectorized_one_copy_per_lane(tmp_path):
    """As Halide: an inline reduction lives in its consumer's innermost loop, the vector loop
    too, where each lane gets its own copy of its storage (element i of lane l at i * lanes + l),
    and the consumer stays vector code; the values are the serial ones (integers bit for bit,
    tails of the vector loop and tuple-valued reductions included)."""
    y, xo, xi = hl.Var("y"), hl.Var("xo"), hl.Var("xi")
    data = np.random.default_rng(7).integers(-1000, 1000, (40, 70), dtype=np.int32)
    inp = hl.Buffer(data, "vlane_in")
    r = hl.RDom([hl.Range(0, 5), hl.Range(0, 3)], "vr")
    g = hl.Func("vlane_g")
    arg = hl.argmax(inp[x + r.x, y + r.y])
    g[x, y] = hl.sum(inp[x + r.x, y] * (r.x + 1)) - hl.maximum(inp[x, y + r.y]) + arg[0] * 100 + arg[2]
    g.split(x, xo, xi, 8, hl.TailStrategy.GuardWithIf).vectorize(xi).parallel(y)
    path = tmp_path / "g.stmt"
    g.compile_to_lowered_stmt(str(path), [])
    stmt = path.read_text()
    assert re.search(r"allocate sum\d+\[int32 \* 1 \* 1 \* 8\]", stmt), stmt
    w, h = 61, 37
    d = data.astype(np.int64)
    want = np.zeros((h, w), np.int64)
    for j in range(h):
        for i in range(w):
            window = d[j:j + 3, i:i + 5]
            k = int(np.argmax(window))  # the first maximum, r.x innermost
            want[j, i] = (3 * sum(d[j, i + a] * (a + 1) for a in range(5)) - d[j:j + 3, i].max()
                          + (k % 5) * 100 + window.max())
    np.testing.assert_array_equal(np.asarray(g.realize([w, h])), want)


def test_list_indices_and_rdom_name():
    f = hl.Func("listed")
    f[[x]] = x * 2
    g = hl.Func("list_reader")
    r = hl.RDom([hl.Range(0, 2)], "lr")
    g[x] = f[[x + 1]] + hl.sum(f[x + r.x])
    assert r.x.name() == "lr$x"
    assert list(np.asarray(g.realize([3]))) == [2 + 2, 4 + 6, 6 + 10]


def test_type_limits_are_exprs_as_in_halide():
    assert np.asarray(hl.Func(hl.UInt(8).max()).realize([])).item() == 255
    assert np.asarray(hl.Func(hl.Float(32).min()).realize([])).item() == float("-inf")
    assert hl.Int(16).max_value() == 32767


def test_two_funcs_with_one_name_are_two_funcs_as_in_halide():
    a, b = hl.Func("same_name"), hl.Func("same_name")
    a[x] = x
    b[x] = x + 1
    c = hl.Func("uses_both")
    c[x] = a[x] + b[x]
    assert list(c.realize([3])) == [1, 3, 5]
    assert a.name() != b.name() and b.name().startswith("same_name$")  # Halide's names
    assert set(hl.Pipeline(c).funcs_by_name()) == {"uses_both", "same_name", "same_name$1"}


def test_a_bound_buffers_shape_is_compiled_in_and_a_new_shape_compiles_again():
    """As in Halide's JIT, a Buffer the algorithm names is part of the pipeline: its mins, extents
    and strides are compiled in as constants (clamps and index arithmetic fold). Moved with
    set_min, it compiles again, and the checks still guard every read."""
    x, y = hl.Var("x"), hl.Var("y")
    data = np.arange(60, dtype=np.int32).reshape(6, 10)
    img = hl.Buffer(data, "img")
    f = hl.Func("f")
    f[x, y] = hl.BoundaryConditions.repeat_edge(img)[x - 1, y + 1] * 2
    p = hl.Pipeline(f)
    want = data[np.clip(np.arange(1, 7), 0, 5)][:, np.clip(np.arange(-1, 11), 0, 9)] * 2
    assert np.array_equal(np.asarray(p.realize([12, 6])), want)
    img.set_min([3, 2])  # the same data, now covering x in [3, 13) and y in [2, 8)
    out = hl.Buffer(hl.Int(32), [12, 6])
    out.set_min([4, 1])
    p.realize(out)
    rows, cols = np.clip(np.arange(2, 8) - 2, 0, 5), np.clip(np.arange(3, 15) - 3, 0, 9)
    assert np.array_equal(np.asarray(out), data[rows][:, cols] * 2)
    assert len(p._compiled) == 2
    table = hl.Buffer(np.arange(8, dtype=np.int32), "table")
    k = hl.ImageParam(hl.Int(32), 1, "k")
    h = hl.Func("h")
    h[x] = table[hl.clamp(k[x], 3, 7)]
    call = hl.Pipeline(h).compile_to_callable([k])
    keys = hl.Buffer(np.array([0, 3, 7], np.int32))
    got = hl.Buffer(hl.Int(32), [3])
    call(keys, got)
    assert list(np.asarray(got)) == [3, 3, 7]
    table.set_min([3])  # a Callable compiled before the move computes with the new mins too
    call(keys, got)
    assert list(np.asarray(got)) == [0, 0, 4]
    g = hl.Func("g")
    g[x, y] = img[x, y]
    with pytest.raises(hl.HalideError, match="img"):
        g.realize([4, 4])  # reads x, y from 0: before the mins, now 3 and 2


def test_realize_into_the_same_buffer_again_skips_the_checks_but_sees_every_change(monkeypatch):
    """A pipeline realized into one output Buffer in a loop repeats the checked call (its
    per-call cost); any change since (a Param, an ImageParam bound again, a min moved, a Func
    redefined or scheduled, an output made read-only) still takes effect or is still refused."""
    from pyhalide.codegen.runtime import CompiledPipeline

    prepared = []
    real_prepare = CompiledPipeline.prepare
    monkeypatch.setattr(CompiledPipeline, "prepare", lambda self, *a: prepared.append(1) or real_prepare(self, *a))
    x, y = hl.Var("x"), hl.Var("y")
    data = np.arange(48, dtype=np.int32).reshape(6, 8)
    img = hl.Buffer(data, "img")
    k = hl.ImageParam(hl.Int(32), 1, "k")
    scale = hl.Param(hl.Int(32), "scale", 2)
    f = hl.Func("f")
    f[x, y] = img[x, y] * scale + k[y]
    keys = np.array([1, 2, 3, 4], np.int32)
    k.set(hl.Buffer(keys))
    out = hl.Buffer(hl.Int(32), [8, 4])
    p = hl.Pipeline(f)

    def expect(sc, ks, x0=0, y0=0):
        return data[y0:y0 + 4, x0:x0 + 8] * sc + ks[:, None]

    p.realize(out)
    p.realize(out)
    assert np.array_equal(np.asarray(out), expect(2, keys)) and len(prepared) == 1  # the second call: no checks
    scale.set(3)
    p.realize(out)
    assert np.array_equal(np.asarray(out), expect(3, keys)) and len(prepared) == 1  # Params are read every call
    keys2 = np.array([10, 20, 30, 40], np.int32)
    k.set(hl.Buffer(keys2))
    p.realize(out)
    assert np.array_equal(np.asarray(out), expect(3, keys2)) and len(prepared) == 2
    k.set(hl.Buffer(np.array([1, 2], np.int32)))  # too small: still refused before anything runs
    with pytest.raises(hl.HalideError, match="k"):
        p.realize(out)
    k.set(hl.Buffer(keys2))
    out.set_min([0, 2])  # the output moved: rows 2..5, keys read at 2..5
    keys3 = np.arange(6, dtype=np.int32) * 100
    k.set(hl.Buffer(keys3))
    p.realize(out)
    assert np.array_equal(np.asarray(out), expect(3, keys3[2:], 0, 2))
    out.set_min([0, 0])
    k.set(hl.Buffer(keys))
    f.vectorize(x, 4)  # a new schedule: lowered again, the same results
    p.realize(out)
    assert np.array_equal(np.asarray(out), expect(3, keys))
    np.asarray(out).flags.writeable = False
    with pytest.raises(hl.HalideError, match="read-only"):
        p.realize(out)


def test_a_store_to_one_buffer_does_not_make_llvm_reload_another(tmp_path):
    """Loads and stores carry one alias type per buffer (as Halide tags them): both channels of a
    histogram update reuse the one load of the input pixel, where the first bin's store had
    made LLVM load the pixel again (bilateral_grid's histogram)."""
    import re

    xx, c = hl.Var("x"), hl.Var("c")
    inp = hl.ImageParam(hl.Int(32), 1, "alias_in")
    r = hl.RDom([(0, inp.width())], name="ar")
    h = hl.Func("alias_h")
    h[xx, c] = 0
    h[hl.clamp(inp[r.x], 0, 7), c] += hl.select(c == 0, inp[r.x], 1)
    h.bound(c, 0, 2).bound(xx, 0, 8)
    h.update(0).reorder(c, r.x).unroll(c)
    path = tmp_path / "alias.ll"
    h.compile_to_llvm_assembly(str(path), [inp], "alias")
    text = path.read_text()
    tags = dict(re.findall(r'^(!\d+) = !\{(!\d+), !\d+, i64 0\}$', text, re.M))
    names = dict(re.findall(r'^(!\d+) = !\{!"([\w$]+)", !\d+, i64 0\}$', text, re.M))
    input_tags = {t for t, node in tags.items() if names.get(node) == "alias_in"}
    assert input_tags
    loads = [ln for ln in text.splitlines() if " = load i32" in ln and ln.rsplit("!tbaa ", 1)[-1] in input_tags]
    assert len(loads) == 1, loads
    data = np.arange(20, dtype=np.int32) % 9
    inp.set(hl.Buffer(data))
    want = np.zeros((2, 8), np.int64)
    for v in data:
        want[0, min(max(v, 0), 7)] += v
        want[1, min(max(v, 0), 7)] += 1
    np.testing.assert_array_equal(np.asarray(h.realize([8, 2])), want)


def test_a_constant_constraint_is_compiled_in_and_compiled_again_when_it_changes():
    """As Halide: an output's dimension constrained to a constant is that constant in the
    compiled code (checked before each call), and an ImageParam's too where it is checked
    on every call; changing the constraint compiles again."""
    x = hl.Var("cc_x")
    im = hl.ImageParam(hl.Int(32), 1, "cc_im")
    im.dim(0).set_extent(im.dim(0).extent())  # an Expr constraint: checked on every call
    im.dim(0).set_min(0)
    f = hl.Func("cc_f")
    f[x] = im[x] * 3
    f.output_buffer().dim(0).set_min(0)
    data = hl.Buffer(np.arange(10, dtype=np.int32) + 100)
    im.set(data)
    assert {("cc_f.min.0", 0), ("cc_im.min.0", 0)} <= set(f._pipeline()._constant_constraints(f._pipeline()._lower()))
    out = hl.Buffer(hl.Int(32), [6])
    out.set_min([2])
    with pytest.raises(hl.HalideError, match="Constraint violated"):
        f.realize(out)
    f.output_buffer().dim(0).set_min(None)
    for lo in (0, 5, 0):  # the input's constraint alone changes: compiled again each time
        data = hl.Buffer(np.arange(10, dtype=np.int32) + 100)
        data.set_min([lo])
        im.dim(0).set_min(None)  # (a constraint is checked against the bound buffer at once)
        im.set(data)
        im.dim(0).set_min(lo)
        out = hl.Buffer(hl.Int(32), [6])
        out.set_min([lo + 1])
        f.realize(out)
        np.testing.assert_array_equal(np.asarray(out), (np.arange(1, 7) + 100) * 3)


@pytest.mark.parametrize("lib", ["pyhalide", "halide"])
def test_host_alignment_is_checked_before_running(lib):
    """ImageParam.set_host_alignment: the buffer's host pointer (its first element) must be a
    multiple of it, checked as Halide checks it; host_alignment() is the element size unless set."""
    h = hl if lib == "pyhalide" else pytest.importorskip("halide", reason="the real Halide is the oracle")
    p = h.ImageParam(h.Float(32), 1, "aligned_in")
    assert p.host_alignment() == 4
    p.set_host_alignment(64)
    assert p.host_alignment() == 64
    f, v = h.Func("aligned_f"), h.Var("v")
    f[v] = p[v] * 2
    storage = np.arange(64, dtype=np.float32)
    start = (-storage.ctypes.data % 64) // 4  # the first element 64-byte aligned
    p.set(h.Buffer(storage[start:start + 16]))
    np.testing.assert_array_equal(np.asarray(f.realize([16])), storage[start:start + 16] * 2)
    p.set(h.Buffer(storage[start + 1:start + 17]))
    with pytest.raises(h.HalideError, match="The host pointer of aligned_in is not aligned to a 64 bytes boundary"):
        f.realize([16])
