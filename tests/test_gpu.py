"""The CUDA backend. Without a GPU: GPU schedules keep the meaning when their loops run serially
on the CPU; the generated CUDA C itself runs on the emulated device (compiled as C++, threads
and barriers real, device memory separate); it compiles with nvcc or NVRTC for sm_80 and sm_90,
within the limits ptxas reports; golden sources stay readable. Tests marked `gpu` run the kernels
on a real GPU and are skipped, with the reason, where none is found."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import gpu_pipelines as gp
import numpy as np
import pytest

import pyhalide as hl
from pyhalide.codegen import gpu_runtime

CUDA = hl.Target("host-cuda")
GOLDEN = Path(__file__).parent / "golden"
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="the emulated CUDA device needs g++")
needs_cuda_compiler = pytest.mark.skipif(gpu_runtime.nvcc_path() is None and gpu_runtime._nvrtc() is None,
                                         reason="neither nvcc nor NVRTC is installed")


def _run(name: str):
    out, sizes = gp.BUILDERS[name]()
    got = hl.Pipeline([out]).realize(sizes, CUDA)
    return np.asarray(got)


@pytest.mark.parametrize("name", sorted(gp.BUILDERS))
def test_gpu_schedules_compute_what_the_algorithm_means(name, device):
    np.testing.assert_array_equal(_run(name), gp.expected(name)[0])


def test_kernels_have_the_grid_block_and_memory_the_schedule_asks_for(emulated):
    from pyhalide.ir_printer import stmt_to_string
    from pyhalide.lower import finish_lowering, lower

    out, _ = gp.gemm()
    lowered = lower([out], CUDA)
    kernels = []
    host = stmt_to_string(finish_lowering(lowered.stmt, ["ggemm_a", "ggemm_b", "ggemm"], kernels=kernels))
    assert len(kernels) == 1
    k = kernels[0]
    assert k.threads == (16, 16, 1) and k.grid_dims == 2
    assert k.shared_bytes == 3 * 16 * 16 * 4  # the two tiles and the accumulator
    assert {b.name for b in k.buffers} == {"ggemm_a", "ggemm_b", "ggemm"}
    assert [b.name for b in k.buffers if b.written] == ["ggemm"]
    text = hl.Pipeline([out]).cuda_source(CUDA)
    assert text.count("__syncthreads();") >= 3  # after each tile load and after the accumulation
    assert "__shared__ float v_ga_tile[256] __attribute__((aligned(16)));" in text
    assert host.count("gpu_launch(0, ") == 1 and "for<" not in host  # the host code only launches


def test_device_buffers_copy_nothing_back_until_the_host_reads(emulated):
    out, sizes = gp.mixed()
    want = gp.expected("mixed")[0]
    buf = hl.Buffer(hl.Int(32), sizes)
    buf.copy_to_device()
    assert buf.has_device_allocation() and not buf.host_dirty()
    hl.Pipeline([out]).realize(buf, CUDA)
    assert buf.device_dirty()
    assert not buf._array.any()  # the result is on the device only
    np.testing.assert_array_equal(np.asarray(buf), want)  # reading it copies it back
    assert not buf.device_dirty()
    # a device-resident input: the second pipeline reads the first's output on the device
    x, y, xo, yo, xi, yi = (hl.Var(n) for n in "x y xo yo xi yi".split())
    twice = hl.Func("gmix_twice")
    twice[x, y] = buf[x, y] * 2
    twice.gpu_tile(x, y, xo, yo, xi, yi, 8, 8, hl.TailStrategy.GuardWithIf)
    buf.fill(5)
    buf.copy_to_device()
    buf._array[...] = 0  # stale host data must not be read: the device copy is the current one
    buf.set_host_dirty(False)
    np.testing.assert_array_equal(np.asarray(twice.realize(sizes, CUDA)), np.full(sizes[::-1], 10))
    buf.device_free()
    assert not buf.has_device_allocation()


def test_no_gpu_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("PYHALIDE_CUDA_DEVICE", raising=False)
    reason = gpu_runtime.cuda_unavailable_reason()
    if reason is None:
        pytest.skip("this machine has a CUDA GPU")
    assert not hl.host_supports_target_device(CUDA)
    out, sizes = gp.blur()
    with pytest.raises(gpu_runtime.DeviceUnavailable, match="No CUDA GPU can run this pipeline: .*pycuda"):
        hl.Pipeline([out]).realize(sizes, CUDA)
    # the CUDA source is still there to read
    assert 'extern "C" __global__' in hl.Pipeline([out]).cuda_source(CUDA)


def test_gpu_schedule_errors_name_the_loop_and_the_numbers(emulated):
    x, y, xo, yo, xi, yi = (hl.Var(n) for n in "x y xo yo xi yi".split())
    big = hl.Func("gerr_big")
    big[x, y] = x + y
    big.gpu_tile(x, y, xo, yo, xi, yi, 64, 32)
    with pytest.raises(hl.CompileError, match=r"64x32x1 = 2048 GPU threads per block; at most 1024"):
        big.realize([128, 64], CUDA)
    free = hl.Func("gerr_free")
    free[x] = x
    free.gpu_threads(x)
    with pytest.raises(hl.CompileError, match=r"GPU thread loop gerr_free.s0.x is not inside any gpu_blocks loop"):
        free.realize([100], CUDA)
    p2, c2 = hl.Func("gerr_p2"), hl.Func("gerr_c2")
    p2[x, y] = x * y
    c2[x, y] = p2[x, y] + p2[x, y + 1]
    c2.tile(x, y, xo, yo, xi, yi, 32, 512).gpu_blocks(xo, yo).gpu_threads(xi)
    p2.compute_at(c2, xo)
    with pytest.raises(hl.CompileError, match=r"needs \d+ bytes of shared memory .* at most 49152"):
        c2.realize([64, 1024], CUDA)
    root = hl.Func("gerr_root")
    root[x] = x
    use = hl.Func("gerr_use")
    use[x] = root[x] * 2
    root.compute_root().store_in(hl.MemoryType.GPUShared)
    use.gpu_tile(x, xo, xi, 16)
    with pytest.raises(hl.CompileError, match="gerr_root is stored in GPU shared memory but is computed outside"):
        use.realize([32], CUDA)
    cpu = hl.Func("gerr_cpu")
    cpu[x] = x
    cpu.gpu_tile(x, xo, xi, 16)
    with pytest.raises(hl.CompileError, match="no GPU"):
        cpu.realize([32], hl.Target("host"))


def test_gpu_directives_replay_from_their_schedule_record():
    out, _ = gp.registers()
    p = hl.Pipeline([out])
    text = p.schedule_to_json()
    assert "gpu_single_thread" in text and "gpu_blocks" in text
    fresh, _ = gp.registers(schedule=False)
    q = hl.Pipeline([fresh])
    q.apply_schedule_json(text)
    assert q.cuda_source(CUDA) == p.cuda_source(CUDA)


def test_compile_to_cuda_writes_every_kernel(tmp_path):
    out, _ = gp.mixed()
    path = tmp_path / "mixed.cu"
    out.compile_to_cuda(str(path), [], "mixed", CUDA)
    text = path.read_text()
    assert text.count('extern "C" __global__') == 2


# ------------------------------------------------------------------------- compile checks
@needs_cuda_compiler
@pytest.mark.parametrize("capability", [80, 90])
@pytest.mark.parametrize("name", sorted(gp.BUILDERS))
def test_every_kernel_compiles_within_the_limits(name, capability):
    out, _ = gp.BUILDERS[name]()
    source = hl.Pipeline([out]).cuda_source(CUDA)
    ptx = gpu_runtime.compile_ptx(source, capability)
    report = gpu_runtime.ptxas_report(ptx, capability)
    assert report and set(report) == set(_kernel_names(source))
    for r in report.values():
        assert r.registers <= 255 and r.spill_stores == 0 and r.shared_bytes <= 48 * 1024, r


def _kernel_names(source: str) -> list[str]:
    import re

    return re.findall(r'extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(', source)


@pytest.mark.parametrize("name", ["blur", "gemm", "histogram"])
def test_golden_cuda_source(name):
    """The generated source of three schedules, read by a person once; regenerate with
    PYHALIDE_UPDATE_GOLDEN=1 and read the diff."""
    out, _ = gp.BUILDERS[name]()
    text = hl.Pipeline([out]).cuda_source(CUDA)
    body = text[text.index("// Generated"):]
    body = body[: body.index("#ifdef")] + body[body.index('extern "C" __global__'):]
    path = GOLDEN / f"gpu_{name}.cu"
    if os.environ.get("PYHALIDE_UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(body)
    assert body == path.read_text()


# ------------------------------------------------------------------------- the gallery
GPU_APPS = ["blur", "gemm", "conv_layer", "bilateral_grid", "harris", "unsharp", "max_filter", "histogram_equalize",
            "local_laplacian", "camera_pipe"]


def _gallery(name: str, size: str):
    import apps

    app = apps.load(name)
    inputs = app.inputs(size)
    built = app.build(hl, inputs)
    app.gpu_schedule(hl, built)
    return app, inputs, built


def _gallery_schedules():
    import apps

    return [(name, v) for name in GPU_APPS for v in [None, *apps.load(name).gpu_variants]]


@pytest.mark.parametrize("name, variant", _gallery_schedules())
def test_gallery_gpu_schedules_compute_the_reference(name, variant, device):
    _check_gallery_schedule(name, variant)


def test_gemm_panels_copied_in_runs_of_four_compute_the_product(device):
    """gemm's wide panel copies (16-byte loads of A and B, 4 copies a thread), which the gallery's
    small size (K = 30, not a multiple of the 8-deep panels) does not take: K = 16, 32 x 32 tiles."""
    rng = np.random.default_rng(3)
    _check_gallery_schedule("gemm", "vector_tiles_128_wide_copies",
                            {"A": rng.random((64, 16), dtype=np.float32), "B": rng.random((16, 96), dtype=np.float32)})


def _check_gallery_schedule(name, variant, inputs=None):
    import apps

    app = apps.load(name)
    inputs = inputs or app.inputs("small")
    built = app.build(hl, inputs)
    app.apply_gpu_schedule(hl, built, variant)
    built.output.compile_jit(CUDA)
    got, want = app.realize(hl, built), app.reference(inputs)
    if app.exact:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=app.rtol, atol=app.atol)


@pytest.mark.parametrize("name, variant, wanted", [
    # 8 outputs a thread, rows of 2558 and 2560 elements: each input and output row in 4-byte pairs
    ("blur", "vector_rows_8x8", {"hl_vec<uint16_t, 2> *)(&v_input[": 50, "hl_vec<uint16_t, 2> *)(&v_blur_y[": 32}),
    # the panels copied 16 bytes at a time (after the previous step's barrier), read as 16 bytes
    ("gemm", "vector_tiles_128_wide_copies", {
        "hl_vec<float, 4> *)(&v_A[": 1, "hl_vec<float, 4> *)(&v_B[": 1,
        "hl_vec<float, 4> *)(&v_b_panel[": 3, "hl_vec<float, 4> *)(&v_a_panel[": 2}),
    ("conv_layer", None, {"hl_vec<float, 4> *)(&v_filter[": 1, "hl_vec<float, 4> *)(&v_bias[": 1}),
    # 4 input channels a step: each pixel's 4 input values and each channel's 4 filter values
    ("conv_layer", "registers_4x4_ci4", {"hl_vec<float, 4> *)(&v_filter[": 4, "hl_vec<float, 4> *)(&v_input[": 4}),
])
def test_gallery_gpu_kernels_read_and_write_runs_of_elements_as_vectors(name, variant, wanted):
    import apps

    app = apps.load(name)
    built = app.build(hl, app.inputs("gpu"))
    app.apply_gpu_schedule(hl, built, variant)
    source = hl.Pipeline([built.output]).cuda_source(CUDA)
    assert {k: source.count(k) for k in wanted} == wanted


@needs_cuda_compiler
@pytest.mark.parametrize("name", GPU_APPS)
def test_gallery_gpu_kernels_stay_within_the_recorded_resources(name):
    """The benchmark-size kernels assemble for sm_80 and sm_90 without spills, within the
    hardware's limits, using what benchmarks/results/gpu_ptxas.json records (regenerate with
    python -m benchmarks.gpu --ptxas benchmarks/results/gpu_ptxas.json)."""
    import json

    recorded = json.loads((Path(__file__).parents[1] / "benchmarks/results/gpu_ptxas.json").read_text())
    _, _, built = _gallery(name, "gpu")
    source = hl.Pipeline([built.output]).cuda_source(CUDA)
    for cap in (80, 90):
        report = gpu_runtime.ptxas_report(gpu_runtime.compile_ptx(source, cap), cap)
        want = recorded[f"{name} sm_{cap}"]
        assert sorted(report) == sorted(want)
        for kname, r in report.items():
            assert r.spill_stores == 0 and r.stack_bytes == 0 and r.shared_bytes <= 48 * 1024, r
            assert r.registers <= max(64, want[kname]["registers"]), (r, want[kname])
            assert r.shared_bytes == want[kname]["shared_bytes"], (r, want[kname])


def test_a_func_computed_inside_a_single_thread_kernels_loops_is_that_threads_array(device):
    """A histogram update run by gpu_single_thread, its clamped input computed per row of the
    RDom (inside the kernel's serial loops): the input's buffer is thread 0's own array, not a
    shared one, and the result is the algorithm's (found by the GPU schedule fuzz)."""
    x = hl.Var("st_x")
    img = (np.arange(8 * 10, dtype=np.uint8).reshape(8, 10) * 13) % 251
    clamped = hl.BoundaryConditions.repeat_edge(hl.Buffer(img, "st_in"))
    r = hl.RDom([hl.Range(0, 10), hl.Range(0, 8)], "st_r")
    hist = hl.Func("st_hist")
    hist[x] = 0
    hist[hl.i32(clamped[r.x, r.y]) % 16] += 1
    hist.compute_root().update(0).gpu_single_thread()
    clamped.compute_at(hist, r.y)
    got = np.asarray(hist.realize([16], CUDA))
    np.testing.assert_array_equal(got, np.bincount((img % 16).ravel(), minlength=16))
    source = hl.Pipeline(hist).cuda_source()
    assert "        uint8_t v_repeat_edge_st_in[10] __attribute__((aligned(16)));" in source
    assert "__shared__ uint8_t" not in source


@pytest.mark.parametrize("row_length, step, dtype", [(40, 1, np.float32), (37, 1, np.float32), (40, -1, np.float32),
                                                    (40, 1, np.uint16)])
def test_a_thread_copying_aligned_consecutive_elements_loads_them_as_one_vector(row_length, step, dtype, device):
    """Each thread copies 4 consecutive floats of a row into its registers (a producer computed
    per thread, unrolled). Where the index arithmetic proves the first a multiple of 4 (rows of
    40 floats, the output bound to start at 0), the CUDA C loads them with one 16-byte load;
    rows of 37 floats are copied element by element. Rows in reverse order (a negative stride)
    still start their device copy aligned. The result is the same every way."""
    x, y = hl.Var("vl_x"), hl.Var("vl_y")
    xb, xo, xi = hl.Var("vl_xb"), hl.Var("vl_xo"), hl.Var("vl_xi")
    data = np.arange(17 * row_length).astype(dtype).reshape(17, row_length)[::step]
    view = data[:, 4:36]
    row = hl.Func("vl_row")
    row[x, y] = hl.Buffer(view, "vl_in")[x, y]
    out = hl.Func("vl_out")
    out[x, y] = row[x, y] * 2
    out.bound(x, 0, 28).split(x, xo, xi, 4).split(xo, xb, xo, 7).reorder(xi, xo, xb, y)
    out.gpu_blocks(y).gpu_threads(xo).unroll(xi)
    row.compute_at(out, xo).unroll(x)
    source = hl.Pipeline(out).cuda_source(CUDA)
    vector = "hl_vec<uint16_t, 4>" if dtype == np.uint16 else "hl_vec<float, 4>"
    assert (f"*(const {vector} *)(&v_vl_in[" in source) == (row_length % 4 == 0), source
    got = np.asarray(out.realize([28, 17], CUDA))
    np.testing.assert_array_equal(got, view[:, :28] * 2)


@pytest.mark.parametrize("row_length, lanes", [(40, 8), (36, 4), (34, 2), (33, 1)])
def test_a_thread_computing_consecutive_elements_reads_and_writes_each_run_as_one_vector(row_length, lanes, device):
    """Each thread computes 8 consecutive uint16 outputs of a row (vectorize: unrolled in a
    kernel), from the input's 8 consecutive elements and the next one. With the output's row
    stride constrained to the input's (a constant, compiled in), rows of 40 elements start at
    multiples of 8: one 16-byte load and one 16-byte store per row; rows of 36 start at
    multiples of 4 (8-byte vectors), of 34 at even elements (4-byte ones), of 33 anywhere (every
    access alone). The element after the run (x + 8) is read alone. The results are the same."""
    x, y = hl.Var("vs_x"), hl.Var("vs_y")
    xo, xi = hl.Var("vs_xo"), hl.Var("vs_xi")
    data = (np.arange(9 * row_length, dtype=np.uint32) * 2654435761 % 65521).astype(np.uint16).reshape(9, row_length)
    src = hl.Buffer(data, "vs_in")
    out = hl.Func("vs_out")
    out[x, y] = src[x, y] + src[x + 1, y] // 2
    out.output_buffer().dim(0).set_min(0)
    out.output_buffer().dim(1).set_stride(row_length)
    out.bound(x, 0, 24).split(x, xo, xi, 8).reorder(xi, xo, y).gpu_blocks(y).gpu_threads(xo).vectorize(xi)
    source = hl.Pipeline(out).cuda_source(CUDA)
    vector = f"hl_vec<uint16_t, {lanes}>"
    assert ("out_stride_1" in source) is False  # the constrained stride is a constant
    assert source.count(f"*(const {vector} *)(&v_vs_in[") == (8 // lanes if lanes > 1 else 0), source
    assert source.count(f"*({vector} *)(&v_vs_out[") == (8 // lanes if lanes > 1 else 0), source
    if gpu_runtime.nvcc_path() or gpu_runtime._nvrtc():  # and so the PTX has it
        ptx = gpu_runtime.compile_ptx(source, 90)
        access = {8: "v4.u32", 4: "v4.u16", 2: "v2.u16", 1: "u16"}[lanes]  # 16, 8, 4 and 2 bytes
        assert f"ld.global.nc.{access} " in ptx and f"st.global.{access} " in ptx, ptx
        assert lanes == 1 or "st.global.u16" not in ptx
    buf = hl.Buffer(hl.UInt(16), [row_length, 9]).cropped(0, 0, 24)
    out.realize(buf, CUDA)
    np.testing.assert_array_equal(np.asarray(buf), data[:, :24] + data[:, 1:25] // 2)


def test_loads_only_some_paths_make_stay_scalar(device):
    """Vector loads read only what the thread reads anyway: elements loaded under a select
    alone are loaded alone (x .. x + 3 here), those it always loads as vectors (x + 4 ..)."""
    x, y = hl.Var("vc_x"), hl.Var("vc_y")
    xo, xi = hl.Var("vc_xo"), hl.Var("vc_xi")
    data = np.arange(6 * 16, dtype=np.float32).reshape(6, 16)
    src = hl.Buffer(data, "vc_in")
    flag = hl.Param(hl.Int(32), "vc_flag", 1)
    out = hl.Func("vc_out")
    out[x, y] = hl.select(flag > 0, src[x, y], 0.0) + src[x + 4, y]
    out.output_buffer().dim(0).set_min(0)
    out.output_buffer().dim(1).set_stride(8)
    out.bound(x, 0, 8).split(x, xo, xi, 4).reorder(xi, xo, y).gpu_blocks(y).gpu_threads(xo).unroll(xi)
    source = hl.Pipeline(out).cuda_source(CUDA)
    assert source.count("*(const hl_vec<float, 4> *)(&v_vc_in[") == 1, source
    assert source.count("*(hl_vec<float, 4> *)(&v_vc_out[") == 1, source
    for value, want in ((1, data[:, :8] + data[:, 4:12]), (0, data[:, 4:12])):
        flag.set(value)
        np.testing.assert_array_equal(np.asarray(out.realize([8, 6], CUDA)), want)


def test_a_buffer_written_and_read_by_the_same_code_is_accessed_element_by_element(device):
    """A running sum along each row, one thread per row, the update unrolled: each element reads
    the one just written before it. Loading the row's aligned runs as vectors first would read
    elements before they are written (and storing runs at once, write them after they are read):
    the accesses of a buffer the same code both reads and writes stay scalar."""
    x, y = hl.Var("ps_x"), hl.Var("ps_y")
    yo, yi = hl.Var("ps_yo"), hl.Var("ps_yi")
    data = (np.arange(8 * 8, dtype=np.int32).reshape(8, 8) * 7) % 11
    out = hl.Func("ps_out")
    out[x, y] = hl.Buffer(data, "ps_in")[x, y]
    r = hl.RDom([hl.Range(1, 7)], "ps_r")
    out[r.x, y] = out[r.x, y] + out[r.x - 1, y]
    out.output_buffer().dim(0).set_min(0)
    out.output_buffer().dim(1).set_stride(8)
    out.bound(x, 0, 8).split(y, yo, yi, 4).gpu_blocks(yo).gpu_threads(yi).vectorize(x)
    out.update(0).split(y, yo, yi, 4).gpu_blocks(yo).gpu_threads(yi).unroll(r.x)
    source = hl.Pipeline(out).cuda_source(CUDA)
    assert source.count("hl_vec<int32_t, 4> *)(&v_ps_in[") == 2  # the pure definition: 8 elements a row
    assert source.count("hl_vec<int32_t, 4> *)(&v_ps_out[") == 2  # (its stores, as 2 vectors)
    np.testing.assert_array_equal(np.asarray(out.realize([8, 8], CUDA)), np.cumsum(data, axis=1))


def test_a_block_level_func_stored_in_heap_memory_takes_a_slice_of_global_memory_per_block(device):
    """store_in(Heap) on a Func computed at the block loop, as Halide places it: not shared
    memory (so not limited to 48 KB a block) but a global buffer the host makes before the launch,
    one slice per block. Here 32 x 512 floats a block (64 KB, which shared memory refuses), the
    consumer reading its neighbour rows; the result is the algorithm's."""
    x, y = hl.Var("hp_x"), hl.Var("hp_y")
    xo, yo, xi, yi = (hl.Var("hp_" + n) for n in ("xo", "yo", "xi", "yi"))
    data = (np.arange(80 * 1030, dtype=np.int32).reshape(1030, 80) * 7919) % 1009
    p, c = hl.Func("hp_p"), hl.Func("hp_c")
    p[x, y] = hl.Buffer(data, "hp_in")[x, y] * 3
    c[x, y] = p[x, y] + p[x, y + 1] - p[x, y + 2]
    c.tile(x, y, xo, yo, xi, yi, 32, 510).gpu_blocks(xo, yo).gpu_threads(xi)
    p.compute_at(c, xo).gpu_threads(x).store_in(hl.MemoryType.Heap)
    source = hl.Pipeline(c).cuda_source(CUDA)
    assert "__shared__ int32_t" not in source and "int32_t *__restrict__ v_hp_p" in source  # a kernel argument
    got = np.asarray(c.realize([64, 1020], CUDA))
    want = data * 3
    np.testing.assert_array_equal(got, want[:1020, :64] + want[1:1021, :64] - want[2:1022, :64])
    p.store_in(hl.MemoryType.GPUShared)
    with pytest.raises(hl.CompileError, match=r"needs 65536 bytes of shared memory .* at most 49152"):
        hl.Pipeline(c).cuda_source(CUDA)


def test_a_block_level_func_stored_in_registers_lives_in_each_threads_registers(device):
    """prod computed at the block loop with store_in(Register): each thread keeps the 2x2
    outputs it computes (8 apart, unrolled) in a 4-slot array of its own, across the update's
    serial loop over k, instead of a shared 16x16 tile; the result is the algorithm's."""
    x, y = hl.Var("tr_x"), hl.Var("tr_y")
    xo, yo, xi, yi, tx, ty, xt, yt = (hl.Var("tr_" + n) for n in ("xo", "yo", "xi", "yi", "tx", "ty", "xt", "yt"))
    a = np.arange(32 * 24, dtype=np.int32).reshape(24, 32) % 7
    k = hl.RDom([hl.Range(0, 5)], "tr_k")
    prod, out = hl.Func("tr_prod"), hl.Func("tr_out")
    src = hl.Buffer(a, "tr_in")
    prod[x, y] = 0
    prod[x, y] += src[x, (y + k.x) % 24] * (k.x + 1)
    out[x, y] = prod[x, y] * 3
    out.tile(x, y, xo, yo, xi, yi, 16, 16).tile(xi, yi, xt, yt, tx, ty, 8, 8).reorder(xt, yt, tx, ty, xo, yo)
    out.gpu_blocks(xo, yo).gpu_threads(tx, ty).unroll(xt).unroll(yt)
    prod.compute_at(out, xo).tile(x, y, xt, yt, tx, ty, 8, 8).reorder(xt, yt, tx, ty)
    prod.gpu_threads(tx, ty).unroll(xt).unroll(yt).store_in(hl.MemoryType.Register)
    prod.update(0).tile(x, y, xt, yt, tx, ty, 8, 8).reorder(xt, yt, k.x, tx, ty).gpu_threads(tx, ty)
    prod.update(0).unroll(xt).unroll(yt)
    source = hl.Pipeline(out).cuda_source(CUDA)
    kernel = source[source.index('extern "C" __global__'):]
    assert "int32_t v_tr_prod[4] __attribute__((aligned(16)));" in kernel and "__shared__" not in kernel
    got = np.asarray(out.realize([32, 24], CUDA))
    want = 3 * sum(np.roll(a, -kk, axis=0) * (kk + 1) for kk in range(5))
    np.testing.assert_array_equal(got, want)


def test_registers_at_block_level_refuse_elements_two_threads_touch(emulated):
    """A thread reading its neighbour's element cannot have it in its own registers (Halide
    would shuffle it across a warp's lanes; pyhalide says so instead of computing garbage)."""
    x = hl.Var("tn_x")
    xo, xi = hl.Var("tn_xo"), hl.Var("tn_xi")
    f, out = hl.Func("tn_f"), hl.Func("tn_out")
    f[x] = x * 2
    out[x] = f[x] + f[x + 1]
    out.gpu_tile(x, xo, xi, 16)
    f.compute_at(out, xo).gpu_threads(x).store_in(hl.MemoryType.Register)
    with pytest.raises(hl.CompileError, match=r"tn_f is stored in registers at the block level .* both touch"):
        out.realize([64], CUDA)


def test_a_block_the_inputs_size_is_checked_at_the_launch(emulated):
    """A block as wide as the output (gpu_blocks(y).gpu_threads(x)), and shared memory as large as
    the part of a producer the block reads (f(x) + f(2x): it grows with the block): both sized by
    the inputs, they run where they fit and are refused at the launch, naming the kernel and the
    numbers, where they do not."""
    x, y, xo, xi = (hl.Var(n) for n in "x y xo xi".split())
    wide = hl.Func("glaunch_wide")
    wide[x, y] = x + y
    wide.gpu_blocks(y).gpu_threads(x)
    assert 'extern "C" __global__ void kernel_0_' in hl.Pipeline(wide).cuda_source(CUDA)  # no __launch_bounds__
    np.testing.assert_array_equal(np.asarray(wide.realize([40, 3], CUDA)), np.add.outer(np.arange(3), np.arange(40)))
    with pytest.raises(hl.HalideError, match=r"glaunch_wide\S* has 2000 GPU threads in dimension x; at most 1024 fit "
                                             r"\(the block's size for these inputs\)"):
        wide.realize([2000, 3], CUDA)
    f, g = hl.Func("glaunch_f"), hl.Func("glaunch_g")
    f[x] = x
    g[x] = f[x] + f[2 * x]
    g.gpu_tile(x, xo, xi, 16)
    f.compute_at(g, xo).split(x, xo, xi, 16).gpu_threads(xi)
    assert "HL_DYNAMIC_SHARED" in hl.Pipeline(g).cuda_source(CUDA)
    np.testing.assert_array_equal(np.asarray(g.realize([64], CUDA)), 3 * np.arange(64))
    with pytest.raises(hl.HalideError, match=r"glaunch_g\S* needs \d+ bytes of shared memory per block for these "
                                             r"inputs; a block has at most 49152"):
        g.realize([16384], CUDA)
