"""hl.Buffer, hl.Type and hl.Target as Halide 21's Python bindings have them: the constructors,
views that share memory, numpy interop, element access and its errors, type queries, and target
strings. Values are checked against numpy and, where installed, against the real Halide."""

from __future__ import annotations

import numpy as np
import pytest

import pyhalide as hl


def _real():
    return pytest.importorskip("halide", reason="the real Halide (pip install halide) is the oracle")


def _shape(b) -> list[tuple[int, int, int]]:
    return [(b.dim(d).min(), b.dim(d).extent(), b.dim(d).stride()) for d in range(b.dimensions())]


# ---------------------------------------------------------------- Buffer: construction
def test_typed_buffers_store_dimensions_in_the_order_asked():
    b = hl.Buffer(hl.UInt(16), [5, 4, 3], [1, 2, 0], "ordered")
    # dimension 1 densest, then 2, then 0
    assert _shape(b) == [(0, 5, 12), (0, 4, 1), (0, 3, 4)]
    assert b.name() == "ordered" and b.type() == hl.UInt(16) and b.all_equal(0)
    kw = hl.Buffer(type=hl.Int(8), sizes=[2, 3], storage_order=[1, 0])
    assert _shape(kw) == [(0, 2, 3), (0, 3, 1)]
    assert _shape(hl.Buffer.make_interleaved(hl.Float(32), 6, 2, 4)) == [(0, 6, 4), (0, 2, 24), (0, 4, 1)]
    assert hl.Buffer.make_scalar(hl.Int(16), "s").dimensions() == 0
    with pytest.raises(ValueError, match=r"storage_order \[0, 0\] is not an order"):
        hl.Buffer(hl.Int(8), [2, 3], [0, 0])


def test_ndarray_buffers_share_memory_either_axis_order():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    rev, same = hl.Buffer(a, "rev"), hl.Buffer(a, "same", False)
    assert _shape(rev) == [(0, 4, 1), (0, 3, 4)] and _shape(same) == [(0, 3, 4), (0, 4, 1)]
    assert rev[3, 1] == a[1, 3] == same[1, 3]
    same[2, 0] = -5
    assert a[2, 0] == -5 and rev[0, 2] == -5
    # np.asarray always reverses Halide's dimensions, however the buffer was made
    assert np.asarray(rev).shape == (3, 4) and np.asarray(same).shape == (4, 3)
    assert np.shares_memory(np.asarray(same), a)
    assert same.numpy_view(reverse_axes=False).shape == (3, 4)


def test_buffer_from_buffer_is_the_same_memory_under_a_new_name():
    b = hl.Buffer(hl.Int(16), [4, 6, 8], [1, 0, 2], "orig")
    b[1, 2, 3] = 9
    c = hl.Buffer(b)
    assert _shape(c) == _shape(b) and c.name() != "orig" and not c.same_as(b) and b.same_as(b)
    c[0, 0, 0] = 4
    assert b[0, 0, 0] == 4 and c[1, 2, 3] == 9
    c.crop(0, 1, 2)  # c's own view: b keeps its shape
    assert b.dim(0).extent() == 4


def test_odd_ndarrays_keep_their_strides():
    a = np.arange(6, dtype=np.int64)[::-1]
    b = hl.Buffer(a)
    assert _shape(b) == [(0, 6, -1)] and b[0] == 5
    f16 = hl.Buffer(np.zeros((2, 3), np.float16, order="F"))
    assert str(f16.type()) == "float16" and np.asarray(f16).dtype == np.float16
    f16[1, 1] = 0.1
    assert f16[1, 1] == float(np.float16(0.1))
    assert _shape(hl.Buffer(np.zeros((0, 3), np.int8))) == [(0, 3, 1), (0, 0, 3)]


def test_what_no_buffer_is_made_of():
    with pytest.raises(TypeError, match="incompatible constructor arguments"):
        hl.Buffer([1, 2, 3])
    with pytest.raises(ValueError, match="Unsupported Buffer<> type"):
        hl.Buffer(np.zeros(3, np.complex64))
    with pytest.raises(BufferError):
        hl.Buffer(np.float32(3))
    huge = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), (2**31,), (0,))  # no memory behind it
    with pytest.raises(ValueError, match="Out of range dimensions in buffer conversion"):
        hl.Buffer(huge)
    assert hl.Buffer(huge[: 2**31 - 1]).dim(0).extent() == 2**31 - 1


def test_undefined_buffers():
    u = hl.Buffer()
    assert not u.defined() and repr(u) == "<undefined halide.Buffer>"
    with pytest.raises(hl.HalideError, match="Undefined buffer"):
        u.dimensions()


# ---------------------------------------------------------------- Buffer: views
def test_views_share_memory_and_match_numpy_slicing():
    a = np.arange(60, dtype=np.int32).reshape(3, 4, 5)  # Halide [x=5, y=4, c=3]
    b = hl.Buffer(a)
    crop = b.cropped([(1, 3), (2, 2)])
    assert _shape(crop)[:2] == [(1, 3, 1), (2, 2, 5)]
    np.testing.assert_array_equal(np.asarray(crop), a[:, 2:4, 1:4])
    crop[2, 3, 1] = -1
    assert a[1, 3, 2] == -1
    plane = b.sliced(2, 1)
    np.testing.assert_array_equal(np.asarray(plane), a[1])
    row = b.sliced(1)  # at its min
    np.testing.assert_array_equal(np.asarray(row), a[:, 0, :])
    t = b.transposed([2, 0, 1])  # old dimension i becomes dimension order[i]
    assert [t.dim(d).extent() for d in range(3)] == [4, 3, 5]
    assert t[2, 1, 3] == b[3, 2, 1]
    e = b.embedded(1, 7)
    assert _shape(e)[1] == (7, 1, 60) and e[4, 7, 3, 2] == b[4, 3, 2]
    moved = b.translated([10, -2])
    assert moved[10, -2, 0] == b[0, 0, 0] and b.dim(0).min() == 0
    assert np.shares_memory(np.asarray(moved), a)
    rev = b.reverse_axes()
    np.testing.assert_array_equal(np.asarray(rev), a.transpose())


def test_in_place_views():
    b = hl.Buffer(np.arange(24, dtype=np.uint8).reshape(4, 6))
    b.crop(dimension=0, min=1, extent=3)
    b.translate(1, 5)
    assert _shape(b) == [(1, 3, 1), (5, 4, 6)] and b[1, 5] == 1
    b.slice(0, 2)
    assert _shape(b) == [(5, 4, 6)] and [b[y] for y in range(5, 9)] == [2, 8, 14, 20]
    b.add_dimension()
    assert _shape(b) == [(5, 4, 6), (0, 1, 24)]
    b.transpose(0, 1)
    assert _shape(b) == [(0, 1, 24), (5, 4, 6)]
    b.embed(2)
    assert _shape(b)[2] == (0, 1, 24)
    with pytest.raises(IndexError, match="outside"):
        b.cropped(1, 4, 2)


def test_view_shapes_are_halides():
    real = _real()

    def ops(lib):
        b = lib.Buffer(lib.Int(16), [6, 5, 4], [2, 0, 1])
        b.translate([3, -1])
        out = [repr(b.cropped(0, 4, 3)), repr(b.cropped([(3, 2), (0, 3)])), repr(b.sliced(1, 2)), repr(b.sliced(0)),
               repr(b.embedded(1, 9)), repr(b.embedded(3)), repr(b.transposed([1, 2, 0])), repr(b.transposed(0, 2)),
               repr(b.reverse_axes()), repr(lib.Buffer.make_with_shape_of(b)), repr(b.copy()),
               repr(lib.Buffer.make_with_shape_of(lib.Buffer(np.zeros((3, 4), np.int8)[::-1]))),
               repr(lib.Buffer.make_bounds_query(lib.Float(32), [3, 4])), repr(lib.Buffer.make_scalar(lib.UInt(8)))]
        b.add_dimension()
        b.set_min([1, 2])
        return out + [repr(b), b.size_in_bytes(), b.number_of_elements(), b.contains([1, 2, 0]), b.contains([0])]

    assert ops(hl) == ops(real)


# ---------------------------------------------------------------- Buffer: host memory, copies
def test_bounds_query_buffers_have_a_shape_and_no_memory_until_allocated():
    q = hl.Buffer.make_bounds_query(hl.Int(16), [4, 6], "q")
    assert _shape(q) == [(0, 4, 1), (0, 6, 4)] and q.defined()
    assert _shape(hl.Buffer(q)) == _shape(q)
    assert _shape(q.cropped(1, 2, 3)) == [(0, 4, 1), (2, 3, 4)]
    with pytest.raises(ValueError, match="null host ptr"):
        np.asarray(q)
    with pytest.raises(ValueError, match="null host ptr"):
        q[0, 0]
    q.allocate()
    q[3, 5] = 7
    assert q[3, 5] == 7 and np.asarray(q).shape == (6, 4)
    q.deallocate()
    assert _shape(q) == [(0, 4, 1), (0, 6, 4)]
    with pytest.raises(ValueError, match="null host ptr"):
        q.fill(1)


def test_copy_keeps_mins_and_storage_order_in_new_memory():
    b = hl.Buffer(hl.Int(32), [3, 4], [1, 0])
    b.translate([2, 3])
    b[4, 6] = 11
    c = b.copy()
    assert _shape(c) == _shape(b) and c[4, 6] == 11
    c[4, 6] = 0
    assert b[4, 6] == 11


def test_copy_from_copies_where_the_buffers_overlap():
    dst = hl.Buffer(hl.UInt(8), [4, 3]).fill(1)
    src = hl.Buffer(hl.UInt(8), [4, 3]).fill(9)
    src.translate([2, 1])
    dst.copy_from(src)
    want = np.ones((3, 4), np.uint8)
    want[1:, 2:] = 9
    np.testing.assert_array_equal(np.asarray(dst), want)
    with pytest.raises(hl.HalideError, match="cannot take the values"):
        dst.copy_from(hl.Buffer(hl.Int(8), [4, 3]))


# ---------------------------------------------------------------- Buffer: elements
def test_element_access_errors_are_halides():
    b = hl.Buffer(hl.Int(16), [4, 6])
    with pytest.raises(IndexError, match="index 6 is out of bounds for axis 1 with min=0, extent=6"):
        b[1, 6]
    with pytest.raises(IndexError, match="index -1 is out of bounds for axis 0 with min=0, extent=4"):
        b[-1, 2] = 3
    with pytest.raises(ValueError, match="Incorrect number of dimensions"):
        b[1]
    for bad in (2.5, 2**15, "x"):  # Halide's bindings refuse what does not convert exactly
        with pytest.raises(RuntimeError, match="cannot store"):
            b[0, 0] = bad
    b[[1, 2]] = np.int64(-7)
    assert b[(1, 2)] == -7 and b[np.int32(1), 2] == -7


def test_values_convert_as_halide_converts_them():
    f = hl.Buffer(hl.Float(32), [2])
    f[0], f[1] = 0.1, 3
    assert f[0] == float(np.float32(0.1)) and f[1] == 3.0 and f.all_equal(0.1) is False
    f.fill(0.1)
    assert f.all_equal(0.1)  # compared as float32, as the element type holds it
    u = hl.Buffer(hl.UInt(64), [1])
    u[0] = 2**64 - 1
    assert u[0] == 2**64 - 1
    flags = hl.Buffer(hl.Bool(), [2])
    flags[0], flags[1] = 5, 0.0
    assert (flags[0], flags[1]) == (True, False)


def test_real_halide_agrees_on_element_values():
    real = _real()

    def values(lib):
        b = lib.Buffer(lib.Float(32), [3])
        b[0], b[1], b[2] = 0.1, 1e300, -7
        i = lib.Buffer(lib.Int(32), [2])
        i[0], i[1] = np.float32(2.5), True
        return [b[0], b[1], b[2], i[0], i[1]]

    assert values(hl) == values(real)


def test_scalar_buffers_index_with_an_empty_tuple():
    s = hl.Buffer.make_scalar(hl.Float(64))
    s[()] = 1.25
    assert s[()] == 1.25 and s.number_of_elements() == 1 and s.size_in_bytes() == 8
    visited = []
    s.for_each_element(visited.append)
    assert visited == [[]]


def test_for_each_element_walks_dimension_0_innermost_from_the_mins():
    b = hl.Buffer(hl.Int(8), [2, 2])
    b.translate([1, 5])
    seen = []
    b.for_each_element(seen.append)
    assert seen == [[1, 5], [2, 5], [1, 6], [2, 6]]


def test_accessors_of_buffers_with_few_dimensions():
    b = hl.Buffer(hl.Int(8), [5])
    assert (b.width(), b.height(), b.channels(), b.left(), b.right(), b.top(), b.bottom()) == (5, 1, 1, 0, 4, 0, -1)
    assert hl.Buffer(hl.Int(8), [3, 0, 2]).size_in_bytes() == 0
    assert hl.Buffer(hl.Int(16), [2, 3]).cropped(0, 0, 1).size_in_bytes() == 10
    assert not hl.Buffer(hl.Int(8), [2]).host_dirty() and hl.Buffer(np.zeros(2)).host_dirty()


# ---------------------------------------------------------------- Buffer: in pipelines
def test_cropped_and_translated_buffers_feed_pipelines():
    data = np.arange(100, dtype=np.int32).reshape(10, 10)
    buf = hl.Buffer(data)
    x, y = hl.Var("x"), hl.Var("y")
    crop = buf.cropped([(3, 5), (2, 4)])
    f = hl.Func("from_crop")
    f[x, y] = crop[x + 3, y + 2] * 2
    np.testing.assert_array_equal(np.asarray(f.realize([5, 4])), data[2:6, 3:8] * 2)
    moved = buf.translated([-3, 4])
    g = hl.Func("from_moved")
    g[x, y] = moved[x - 3, y + 4] + 1
    np.testing.assert_array_equal(np.asarray(g.realize([10, 10])), data + 1)
    halves = hl.Func("from_halves")
    halves[x] = hl.Buffer(np.arange(3, dtype=np.float16) / np.float16(3))[x] * 3  # float16 arithmetic
    np.testing.assert_array_equal(np.asarray(halves.realize([3])), np.arange(3, dtype=np.float16) / np.float16(3) * 3)


# ---------------------------------------------------------------- Type
def test_type_api():
    t = hl.Type()
    assert (t.code(), t.bits(), t.lanes(), str(t)) == (hl.TypeCode.Handle, 0, 0, "handle0")
    i = hl.Type(hl.TypeCode.Int, 32, 1)
    assert i == hl.Int(32) and i.code() == hl.TypeCode.Int and i.bytes() == 4
    assert i.with_code(hl.TypeCode.UInt) == hl.UInt(32) and i.with_lanes(4).element_of() == i
    assert repr(i.with_lanes(4)) == "<halide.Type int32x4>"
    with pytest.raises(hl.HalideError, match="int types have 8, 16, 32, 64 bits"):
        hl.Type(hl.TypeCode.Int, 7, 1)
    with pytest.raises(TypeError):
        hl.Int(8).is_max(2**63)


def test_type_predicates_are_halides():
    real = _real()

    def table(lib):
        types = [lib.Bool(), lib.UInt(8), lib.Int(8), lib.UInt(16), lib.Int(32), lib.UInt(32), lib.Float(32),
                 lib.Float(64), lib.Int(64), lib.UInt(64), lib.Int(32, 4), lib.Handle()]
        values = [0, 1, -1, 2, 127, -128, 255, 2**31 - 1, -(2**31), 2**32 - 1, 2**63 - 1, -(2**63)]
        return ([[a.can_represent(b) for b in types] for a in types]
                + [[(t.is_max(v), t.is_min(v)) for v in values] for t in types]
                + [[str(t), t.is_bool(), t.is_int(), t.is_uint(), t.is_float(), t.is_handle(), t.is_vector()]
                   for t in types])

    assert table(hl) == table(real)


# ---------------------------------------------------------------- Target
def test_target_strings_parse_and_print_as_halides():
    real = _real()
    # (not "host-cuda": on a machine with a CUDA GPU Halide adds its cuda_capability; pyhalide does not)
    specs = ["host", "x86-64-linux-cuda", "host-opencl-trace_all", "x86-64-linux-trace_loads-trace_stores",
             "x86-64-linux-vector_bits_256", "x86-64-linux-tune_znver4-avx2", "linux-64-x86-avx",
             "arm-32-android-debug-opencl-jit-cuda", "x86-64-linux-hvx_128", "arch_unknown-0-os_unknown"]
    parsed = [str(lib.Target(s)) if s != specs[-1] else "" for s in specs for lib in (hl, real)]
    assert parsed[0::2] == parsed[1::2]
    checks = specs + ["", "x86-64", "x86-23", "x86-0", "opencl-host", "x86-64-linux-64", "0-arch_unknown-os_unknown",
                      "x86-64-linux-sse41-nonsense", "x86-64-linux-tune_k8-tune_k8_sse3", "host-x86-32-windows"]
    assert [hl.Target.validate_target_string(s) for s in checks] == [
        real.Target.validate_target_string(s) for s in checks]
    assert str(hl.get_host_target()) == str(real.get_host_target())
    assert str(hl.get_jit_target_from_environment()) == str(real.get_jit_target_from_environment())


def test_target_construction_and_mutation():
    assert str(hl.Target()) == "arch_unknown-0-os_unknown" and hl.Target("") == hl.get_host_target()
    t = hl.Target(hl.TargetOS.Linux, hl.TargetArch.X86, 64, hl.TargetProcessorTune.TuneZnVer4,
                  [hl.TargetFeature.AVX2])
    assert repr(t) == "<halide.Target x86-64-linux-tune_znver4-avx2>"
    t.set_features([hl.TargetFeature.FMA, hl.TargetFeature.NoAsserts])
    t.set_feature(hl.TargetFeature.AVX2, False)
    t.bits, t.processor_tune = 32, hl.TargetProcessorTune.TuneGeneric
    assert t.to_string() == "x86-32-linux-fma-no_asserts"
    assert t.without_feature(hl.TargetFeature.FMA).to_string() == "x86-32-linux-no_asserts"
    assert t.features_any_of([hl.TargetFeature.SSE41, hl.TargetFeature.FMA])
    assert not t.features_all_of([hl.TargetFeature.SSE41, hl.TargetFeature.FMA])
    with pytest.raises(TypeError, match="incompatible constructor arguments"):
        hl.Target(hl.TargetOS.Linux, hl.TargetArch.X86, 64, ["sse41"])
    with pytest.raises(hl.HalideError, match="avx2 is incompatible with the Target's architecture"):
        hl.Target("arm-64-linux-avx2")
    with pytest.raises(hl.HalideError, match="unknown target feature 'bogus'"):
        hl.Target("x86-64-linux-bogus")
    with pytest.raises(TypeError):
        hash(t)


def test_target_queries_are_halides():
    real = _real()

    def queries(lib):
        apis = [getattr(lib.DeviceAPI, n) for n in ("None", "Host", "Default_GPU", "CUDA", "OpenCL", "Metal",
                                                     "Hexagon", "Vulkan")]
        types = [lib.UInt(8), lib.Int(16), lib.Float(32), lib.Float(64), lib.Int(64), lib.Bool()]
        out = []
        for spec in ("x86-64-linux", "x86-64-linux-avx", "x86-64-linux-avx2-fma", "x86-64-linux-avx512_skylake",
                     "x86-64-linux-avx512_knl", "arm-64-linux-sve2-vector_bits_256", "hexagon-32-qurt-hvx",
                     "wasm-32-wasmrt-wasm_simd128", "x86-64-linux-metal", "x86-64-linux-opencl-cl_doubles",
                     "x86-64-linux-vulkan-vk_int8", "x86-64-linux-cuda-large_buffers"):
            t = lib.Target(spec)
            out += [[t.natural_vector_size(ty) for ty in types], [t.supports_type(ty) for ty in types],
                    [[t.supports_type(ty, a) for a in apis] for ty in types],
                    [t.supports_device_api(a) for a in apis], t.has_gpu_feature(), t.has_large_buffers(),
                    t.maximum_buffer_size()]
        out.append([str(lib.target_feature_for_device_api(a)).replace("HVX_128", "HVX") for a in apis])
        return out

    assert queries(hl) == queries(real)


def test_jit_target_must_be_this_machine(monkeypatch):
    monkeypatch.setenv("HL_JIT_TARGET", "arm-64-linux")
    with pytest.raises(hl.HalideError, match="HL_JIT_TARGET must match the host"):
        hl.get_jit_target_from_environment()
    monkeypatch.setenv("HL_JIT_TARGET", "host-strict_float")
    assert hl.get_jit_target_from_environment().has_feature(hl.TargetFeature.StrictFloat)
    monkeypatch.setenv("HL_TARGET", "x86-32-windows")
    assert str(hl.get_target_from_environment()) == "x86-32-windows"


def _target_answers(lib, name: str, vector_type, feature):
    """A Func whose one value packs the answers to the five target queries, digit by digit."""
    x = lib.Var("x")
    f = lib.Func(name)
    f[x] = (lib.select(lib.target_arch_is(lib.TargetArch.X86), 1, 0) + lib.target_bits() * 10
            + lib.target_natural_vector_size(vector_type) * 1000
            + lib.select(lib.target_has_feature(feature), 100, 0)
            + lib.select(lib.target_os_is(lib.TargetOS.Linux), 1000000, 0))
    return f


def test_target_queries_are_answered_for_the_target_compiled_for():
    """target_arch_is / target_os_is / target_bits / target_has_feature / target_natural_vector_size
    are Exprs lowering answers for the target it compiles for (as Halide's), so one algorithm
    can ask, e.g. in a specialize() or an RDom as wide as the vector."""
    host = hl.get_jit_target_from_environment()
    f = _target_answers(hl, "tq_f", hl.Float(32), hl.TargetFeature.AVX2)
    want = (int(host.arch == hl.TargetArch.X86) + host.bits * 10 + host.natural_vector_size(hl.Float(32)) * 1000
            + 100 * host.has_feature(hl.TargetFeature.AVX2) + 1000000 * int(host.os == hl.TargetOS.Linux))
    assert list(f.realize([1])) == [want]
    plain = hl.Target("x86-64-linux")  # no AVX: 4 float lanes, and the feature is off
    assert list(f.realize([1], plain)) == [1 + 640 + 4000 + 1000000]
    from pyhalide.reference import realize as reference_realize

    assert reference_realize([f], [1])[0].tolist() == [want]
    x = hl.Var("tq_x")
    g = hl.Func("tq_g")  # the queries in a specialization's condition
    g[x] = x
    g.specialize(hl.target_has_feature(hl.TargetFeature.AVX2)).vectorize(x, 8)
    assert list(g.realize([10], plain)) == list(range(10)) == list(g.realize([10]))
    with pytest.raises(hl.HalideError, match="target_arch_is takes an hl.TargetArch"):
        hl.target_arch_is("x86")


def test_target_queries_match_the_real_halide():
    real = pytest.importorskip("halide", reason="the real Halide (pip install halide) is the second oracle")
    results = [list(_target_answers(lib, "tq_real", lib.UInt(8), lib.TargetFeature.AVX512_Skylake).realize([1]))
               for lib in (hl, real)]
    assert results[0] == results[1]


def test_buffers_pyhalide_allocates_start_on_a_128_byte_boundary_as_halides_do():
    """numpy's large arrays start 16 bytes into a page: every 64-byte vector store of a dense
    loop into one straddled two cache lines (1.16x Halide's time on unsharp's schedule)."""
    x, y = hl.Var("x"), hl.Var("y")
    f = hl.Func("aligned_f")
    f[x, y] = hl.f32(x + y)
    made = [hl.Buffer(hl.Float(32), [1000, 700]), hl.Buffer(hl.UInt(8), [333, 3], [1, 0]), f.realize([1000, 700]),
            f.realize([17, 3])]
    b = hl.Buffer(hl.Int(16), [50, 40])
    b.deallocate()
    b.allocate()
    made.append(b)
    for buf in made:
        assert np.asarray(buf).ctypes.data % 128 == 0, np.asarray(buf).shape
    assert not np.asarray(made[0]).any() and not np.asarray(b).any()  # zeroed, as before
    assert np.array_equal(np.asarray(made[2]), np.add.outer(np.arange(700), np.arange(1000)).astype(np.float32))
