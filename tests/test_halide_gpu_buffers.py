"""Halide's tests of device buffers (test/correctness/device_*, gpu_*lifetime*, gpu_give_input_*,
async copies, and the correctness checks of test/performance/async_gpu and device_copy), ported
to pyhalide's CUDA backend: hl.Buffer follows Halide's model of a host and a device copy, each
possibly the newer one (host_dirty / device_dirty), device allocations that pipelines give the
Buffers they use, and crops and slices that share their parent's device allocation.

Each runs on the serial and the emulated CUDA device (and on a GPU where there is one). On the
serial device no kernel runs: GPU loops are host loops, so pipelines leave Buffers on the host
and their dirty bits are only checked on the other devices. Sizes are smaller than Halide's
where the emulated device (a std::thread per GPU thread) would make them slow."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import pyhalide as hl
from pyhalide.codegen import gpu_runtime

CUDA = hl.Target("host-cuda")




def _on_device(device: str) -> bool:
    """Whether pipelines run kernels, giving the Buffers they use device copies (not serial)."""
    return device != "serial"


@pytest.fixture
def allocations(device, monkeypatch):
    """The device memory allocated and not yet freed, counted through the device's malloc and
    free (Halide's lifetime tests count cuMemAlloc and cuMemFree in the runtime's debug output):
    live() (after a garbage collection) and made() in all."""
    dev = gpu_runtime.cuda_device()
    live, made = set(), []
    malloc, free = dev.malloc, dev.free

    def counted_malloc(nbytes):
        address = malloc(nbytes)
        live.add(address)
        made.append(address)
        return address

    def counted_free(address):
        live.discard(address)
        free(address)

    monkeypatch.setattr(dev, "malloc", counted_malloc)
    monkeypatch.setattr(dev, "free", counted_free)

    class Counts:
        def live(self) -> int:
            gc.collect()
            return len(live)

        def made(self) -> int:
            return len(made)

    return Counts()


def _gpu_buffer(offset: int = 0, sizes=(128, 128)) -> hl.Buffer:
    """Halide's make_gpu_buffer: x + 256 y (+ 65536 c) + offset computed by a gpu_tile 8x8
    pipeline into a buffer realize allocates (which copies it to the host)."""
    v = hl.vars("x y c")[: len(sizes)]
    xi, yi = hl.vars("xi yi")
    f = hl.Func("f")
    f[tuple(v)] = sum(var * 256**k for k, var in enumerate(v)) + offset
    f.gpu_tile(v[0], v[1], xi, yi, 8, 8)
    return f.realize(list(sizes), CUDA)


def _closed_form(shape_xy, offset=0) -> np.ndarray:
    """x + 256 y (+ 65536 c) + offset over a [x, y(, c)] region given as ranges, numpy order."""
    grids = np.meshgrid(*[np.arange(lo, lo + n) for lo, n in reversed(shape_xy)], indexing="ij")
    return sum(g * 256**k for k, g in enumerate(reversed(grids))) + offset


# ----------------------------------------------------------------------- gpu_give_input_buffers_device_allocations
def test_gpu_give_input_buffers_device_allocations(device):
    """Ports gpu_give_input_buffers_device_allocations: a Buffer filled on the host is host-dirty
    with no device allocation; realize([w, h]) of a GPU pipeline reading it gives the input a
    device allocation (copied, so clean) and returns an output with one, copied to the host (both
    clean); realize(out) again leaves out device-dirty and the input unchanged."""
    inp = hl.Buffer(hl.Float(32), [100, 100])
    assert not inp.has_device_allocation()
    assert not inp.host_dirty() and not inp.device_dirty()
    inp.fill(7.0)
    assert not inp.has_device_allocation()
    assert inp.host_dirty() and not inp.device_dirty()

    f = hl.Func("f")
    x, y, xi, yi = hl.vars("x y xi yi")
    f[x, y] = inp[x, y]
    f.gpu_tile(x, y, xi, yi, 8, 8)
    out = f.realize([100, 100], CUDA)
    if _on_device(device):
        assert out.has_device_allocation()
        assert not out.host_dirty() and not out.device_dirty()
        assert inp.has_device_allocation()
        assert not inp.host_dirty() and not inp.device_dirty()

    f.realize(out, CUDA)
    if _on_device(device):
        assert out.has_device_allocation()
        assert not out.host_dirty() and out.device_dirty()
        assert inp.has_device_allocation()
        assert not inp.host_dirty() and not inp.device_dirty()
    np.testing.assert_array_equal(np.asarray(out), np.full((100, 100), 7.0, np.float32))
    assert not out.device_dirty()  # reading it on the host copied it back


def _fill_on_gpu(buf):
    """buf realized by a GPU pipeline (x + 256 y, gpu_tile 8x8), left device-dirty."""
    x, y, xi, yi = hl.vars("x y xi yi")
    f = hl.Func("f")
    f[x, y] = x + 256 * y
    f.gpu_tile(x, y, xi, yi, 8, 8)
    f.realize(buf, CUDA)
    return buf


def test_cpu_pipeline_reads_a_device_dirty_buffer(device):
    """A GPU pipeline's output left on the device (realize into a Buffer), then read and written
    by CPU pipelines: each reads the newer device values (copied back first; Halide refuses a
    device-dirty input to a pipeline compiled without device support), and a Buffer with a
    device allocation that a CPU pipeline writes is then newer on the host."""
    buf = _fill_on_gpu(hl.Buffer(hl.Int(32), [64, 32]))
    x, y = hl.vars("x y")
    assert buf.device_dirty() == _on_device(device)
    g = hl.Func("g")
    g[x, y] = buf[x, y] + 1
    np.testing.assert_array_equal(np.asarray(g.realize([64, 32])), _closed_form([(0, 64), (0, 32)]) + 1)
    assert not buf.device_dirty()
    _fill_on_gpu(buf)
    h = hl.Func("h")
    h[x, y] = x - y
    h.realize(buf)
    assert buf.host_dirty() == _on_device(device) and not buf.device_dirty()
    yy, xx = np.mgrid[0:32, 0:64]
    np.testing.assert_array_equal(np.asarray(buf), xx - yy)


# ------------------------------------------------------------------------------ device_crop
def test_device_crop_in_place(device):
    """Ports device_crop, in-place cropping: crop() of a buffer with a device allocation keeps
    one (the parent's, cropped); after copy_to_host its elements are x + 256 y."""
    buf = _gpu_buffer()
    buf.crop([(32, 64), (32, 64)])
    assert buf.has_device_allocation() == _on_device(device)
    buf.copy_to_host()
    assert (buf.left(), buf.top(), buf.width(), buf.height()) == (32, 32, 64, 64)
    assert buf[32, 32] == 32 + 256 * 32
    np.testing.assert_array_equal(np.asarray(buf), _closed_form([(32, 64), (32, 64)]))


def test_device_crop_nondestructive(device):
    """Ports device_crop, nondestructive cropping and a crop of a crop: cropped() views share
    the device allocation and each copies its own region back."""
    buf = _gpu_buffer()
    cropped = buf.cropped([(32, 64), (32, 64)])
    cropped2 = cropped.cropped([(40, 16), (40, 16)])
    assert cropped.has_device_allocation() == cropped2.has_device_allocation() == _on_device(device)
    cropped.copy_to_host()
    np.testing.assert_array_equal(np.asarray(cropped), _closed_form([(32, 64), (32, 64)]))
    cropped2.copy_to_host()
    np.testing.assert_array_equal(np.asarray(cropped2), _closed_form([(40, 16), (40, 16)]))


def test_device_crop_outlives_parent(device, allocations):
    """Ports device_crop, the parent going out of scope before the crop: the crop keeps the
    shared device allocation alive (freed once the crop goes too)."""
    buf = _gpu_buffer()
    cropped = buf.cropped([(32, 64), (32, 64)])
    del buf
    gc.collect()
    assert cropped.has_device_allocation() == _on_device(device)
    assert allocations.live() == (1 if _on_device(device) else 0)
    cropped.copy_to_host()
    np.testing.assert_array_equal(np.asarray(cropped), _closed_form([(32, 64), (32, 64)]))
    del cropped
    assert allocations.live() == 0


def test_device_crop_realize_to_and_from_crop(device):
    """Ports device_crop, realizing to and from crops: in(x, y) + 42 on the GPU, the input a
    crop of one device buffer and the output a crop of another (each in place, [64, 128)^2).
    The output's parent outside the crop keeps its values."""
    inp = hl.ImageParam(hl.Int(32), 2, "in")
    x, y, xi, yi = hl.vars("x y xi yi")
    f = hl.Func("f")
    f[x, y] = inp[x, y] + 42
    f.gpu_tile(x, y, xi, yi, 8, 8)
    gpu_input, gpu_output = _gpu_buffer(), _gpu_buffer()
    parent = hl.Buffer(gpu_output)
    gpu_input.crop([(64, 64), (64, 64)])
    gpu_output.crop([(64, 64), (64, 64)])
    inp.set(gpu_input)
    f.realize(gpu_output, CUDA)
    assert gpu_output.device_dirty() == _on_device(device)
    gpu_output.copy_to_host()
    np.testing.assert_array_equal(np.asarray(gpu_output), _closed_form([(64, 64), (64, 64)]) + 42)
    want = _closed_form([(0, 128), (0, 128)])
    want[64:, 64:] += 42
    np.testing.assert_array_equal(np.asarray(parent), want)


def test_device_crop_copies_only_its_region(device):
    """A crop of a device-dirty buffer is device-dirty too (Halide's crop keeps the dirty bits),
    and its copy_to_host writes its own elements and nothing else of the host memory: the rows
    around it and the columns beside it keep the host's (stale) values until the parent is
    copied back."""
    mem = np.full((128, 128), -1, np.int32)
    buf = _fill_on_gpu(hl.Buffer(mem))
    if not _on_device(device):
        return
    assert buf.device_dirty()
    cropped = buf.cropped([(32, 64), (40, 16)])
    assert cropped.device_dirty() and cropped.has_device_allocation()
    cropped.copy_to_host()
    assert not cropped.device_dirty() and buf.device_dirty()
    want = np.full((128, 128), -1)
    want[40:56, 32:96] = _closed_form([(32, 64), (40, 16)])
    np.testing.assert_array_equal(mem, want)
    buf.copy_to_host()
    np.testing.assert_array_equal(mem, _closed_form([(0, 128), (0, 128)]))


def test_device_crop_unaligned(device):
    """Crops whose first element is not where kernels' vector accesses assume (x = 1 of an int32
    buffer: 4 bytes past a 16-byte boundary) as a GPU pipeline's input and output (in(x, y) * 2,
    gpu_tile with the thread loop vectorized by 4): the results are right, the output's parent
    keeps its values around the crop."""
    inp = hl.ImageParam(hl.Int(32), 2, "in")
    x, y, xi, yi = hl.vars("x y xi yi")
    f = hl.Func("f")
    f[x, y] = inp[x, y] * 2
    f.gpu_tile(x, y, xi, yi, 8, 8).vectorize(xi, 4)
    gpu_input, gpu_output = _gpu_buffer(), _gpu_buffer()
    rect = [(1, 96), (3, 40)]
    inp.set(gpu_input.cropped(rect))
    out = gpu_output.cropped(rect)
    f.realize(out, CUDA)
    out.copy_to_host()
    np.testing.assert_array_equal(np.asarray(out), _closed_form(rect) * 2)
    np.testing.assert_array_equal(np.asarray(gpu_output),
                                  np.where(_in_rect(rect), 2, 1) * _closed_form([(0, 128), (0, 128)]))


# ------------------------------------------------------------------------------ device_slice
EDGES = (128, 64, 32)


def _slice_want(fixed: dict[int, int]) -> np.ndarray:
    """x + 256 y + 65536 c with the dimensions in `fixed` held at a position, numpy order."""
    full = _closed_form([(0, e) for e in EDGES])  # [c, y, x]
    index = tuple(fixed.get(d, slice(None)) for d in (2, 1, 0))
    return full[index]


def test_device_slice_in_place(device):
    """Ports device_slice, in-place slicing: slice(1, 0) of a 128x64x32 device buffer keeps a
    device allocation; 2-D, extents 128 and 32, values x + 65536 c."""
    buf = _gpu_buffer(sizes=EDGES)
    buf.slice(1, 0)
    assert buf.has_device_allocation() == _on_device(device)
    assert buf.dimensions() == 2 and buf.width() == EDGES[0] and buf.height() == EDGES[2]
    buf.copy_to_host()
    np.testing.assert_array_equal(np.asarray(buf), _slice_want({1: 0}))


def test_device_slice_nondestructive(device):
    """Ports device_slice, nondestructive slicing (sliced(0, 31): extents 64 and 32) and a slice
    of a slice (sliced(1, 0) then sliced(0, 10)): each view has a device allocation and its
    values, and the parent keeps all of its own."""
    buf = _gpu_buffer(sizes=EDGES)
    sliced = buf.sliced(0, 31)
    assert sliced.has_device_allocation() == _on_device(device)
    assert sliced.dimensions() == 2 and sliced.width() == EDGES[1] and sliced.height() == EDGES[2]
    sliced.copy_to_host()
    np.testing.assert_array_equal(np.asarray(sliced), _slice_want({0: 31}))

    sliced = buf.sliced(1, 0)
    sliced2 = sliced.sliced(0, 10)
    assert sliced2.has_device_allocation() == _on_device(device)
    assert sliced2.dimensions() == 1 and sliced2.width() == EDGES[2]
    sliced.copy_to_host()
    np.testing.assert_array_equal(np.asarray(sliced), _slice_want({1: 0}))
    sliced2.copy_to_host()
    np.testing.assert_array_equal(np.asarray(sliced2), _slice_want({1: 0, 0: 10}))
    buf.copy_to_host()
    np.testing.assert_array_equal(np.asarray(buf), _closed_form([(0, e) for e in EDGES]))


def test_device_slice_outlives_parent(device, allocations):
    """Ports device_slice, the parent going out of scope before the slice: the slice keeps the
    device allocation and its values."""
    buf = _gpu_buffer(sizes=EDGES)
    sliced = buf.sliced(1, 0)
    del buf
    assert allocations.live() == (1 if _on_device(device) else 0)
    assert sliced.dimensions() == 2 and sliced.width() == EDGES[0] and sliced.height() == EDGES[2]
    sliced.copy_to_host()
    np.testing.assert_array_equal(np.asarray(sliced), _slice_want({1: 0}))


def test_device_slice_realize_to_and_from_slice(device):
    """Ports device_slice, realizing to and from slices: in(x, y) + 42 on the GPU from the plane
    y = 0 of one device buffer into the plane y = 0 of another."""
    inp = hl.ImageParam(hl.Int(32), 2, "in")
    x, y, xi, yi = hl.vars("x y xi yi")
    f = hl.Func("f")
    f[x, y] = inp[x, y] + 42
    f.gpu_tile(x, y, xi, yi, 8, 8)
    gpu_input, gpu_output = _gpu_buffer(sizes=EDGES), _gpu_buffer(sizes=EDGES)
    gpu_input.slice(1, 0)
    gpu_output.slice(1, 0)
    inp.set(gpu_input)
    f.realize(gpu_output, CUDA)
    gpu_output.copy_to_host()
    gpu_output.copy_to_host()
    np.testing.assert_array_equal(np.asarray(gpu_output), _slice_want({1: 0}) + 42)


# ------------------------------------------------------------------------------ device_buffer_copy
def _in_rect(rect) -> np.ndarray:
    """The mask of a [(min, extent), (min, extent)] rectangle of a 128x128 buffer, numpy order."""
    mask = np.zeros((128, 128), bool)
    (x0, w), (y0, h) = rect
    mask[y0:y0 + h, x0:x0 + w] = True
    return mask


def _round_trip(buf: hl.Buffer) -> None:
    """buf's device copy back over its host memory, whatever the dirty bits said."""
    buf.set_host_dirty(False)
    buf.set_device_dirty()
    buf.copy_to_host()


def test_device_buffer_copy(device):
    """Ports device_buffer_copy through the Buffer methods Halide's Python bindings have (they
    do not expose halide_buffer_copy): host values copied into a device buffer and pushed to
    the device with copy_to_device; a device buffer copied into a host one; one device buffer
    into another; and each between crops (a crop's copy_to_device writes its own region of the
    shared allocation, which the parent then reads back with set_device_dirty + copy_to_host).
    The cases without host memory and across two device APIs have no Python equivalent."""
    base = _closed_form([(0, 128), (0, 128)])
    # host -> device
    gpu_buf = _gpu_buffer()
    cpu_buf = hl.Buffer(hl.Int(32), [128, 128])
    gpu_buf.copy_from(cpu_buf)
    gpu_buf.copy_to_device()
    _round_trip(gpu_buf)
    assert gpu_buf.all_equal(0)
    # device -> host
    cpu_buf = hl.Buffer(hl.Int(32), [128, 128])
    cpu_buf.copy_from(_gpu_buffer())
    np.testing.assert_array_equal(np.asarray(cpu_buf), base)
    # device -> device
    gpu_buf1, gpu_buf2 = _gpu_buffer(), _gpu_buffer(256000)
    gpu_buf1.copy_from(gpu_buf2)
    gpu_buf1.copy_to_device()
    _round_trip(gpu_buf1)
    np.testing.assert_array_equal(np.asarray(gpu_buf1), base + 256000)
    # host -> device, into a crop
    gpu_buf1 = _gpu_buffer()
    rect = [(32, 64), (32, 64)]
    gpu_buf2 = gpu_buf1.cropped(rect)
    gpu_buf2.copy_from(hl.Buffer(hl.Int(32), [128, 128]))
    gpu_buf2.copy_to_device()
    _round_trip(gpu_buf1)
    np.testing.assert_array_equal(np.asarray(gpu_buf1), np.where(_in_rect(rect), 0, base))
    # device -> host, into a crop of a host buffer
    cpu_buf = hl.Buffer(hl.Int(32), [128, 128])
    cpu_buf1 = cpu_buf.cropped(rect)
    cpu_buf1.copy_from(_gpu_buffer())
    np.testing.assert_array_equal(np.asarray(cpu_buf), np.where(_in_rect(rect), base, 0))
    # device -> device, from a bigger buffer into a crop
    gpu_buf1, gpu_buf2 = _gpu_buffer(), _gpu_buffer(256000)
    gpu_buf3 = gpu_buf2.cropped(rect)
    gpu_buf3.copy_from(gpu_buf1)
    gpu_buf3.copy_to_device()
    _round_trip(gpu_buf2)
    np.testing.assert_array_equal(np.asarray(gpu_buf2), base + np.where(_in_rect(rect), 0, 256000))
    # device -> device, from a crop into a bigger buffer
    gpu_buf1, gpu_buf2 = _gpu_buffer(), _gpu_buffer(256000)
    gpu_buf3 = gpu_buf2.cropped(rect)
    gpu_buf1.copy_from(gpu_buf3)
    gpu_buf1.copy_to_device()
    _round_trip(gpu_buf1)
    np.testing.assert_array_equal(np.asarray(gpu_buf1), base + np.where(_in_rect(rect), 256000, 0))
    # device -> device, between crops neither of which holds the other
    gpu_buf1, gpu_buf2 = _gpu_buffer(), _gpu_buffer(256000)
    rect1, rect2 = [(32, 64), (32, 16)], [(32, 16), (32, 64)]
    gpu_buf1_crop, gpu_buf2_crop = gpu_buf1.cropped(rect1), gpu_buf2.cropped(rect2)
    gpu_buf1_crop.copy_from(gpu_buf2_crop)
    gpu_buf1_crop.copy_to_device()
    _round_trip(gpu_buf1)
    np.testing.assert_array_equal(np.asarray(gpu_buf1), base + np.where(_in_rect(rect1) & _in_rect(rect2), 256000, 0))


def test_device_buffer_copy_to_device_of_a_crop_keeps_the_rest(device):
    """A crop's copy_to_device writes only its own elements of the shared allocation: the
    parent's device copy, newer than its host memory, keeps its values around the crop (a crop
    spans whole rows of the parent; the bytes between its rows are the parent's)."""
    mem = np.zeros((128, 128), np.int32)
    buf = _fill_on_gpu(hl.Buffer(mem))
    if not _on_device(device):
        return
    rect = [(32, 64), (32, 64)]
    crop = buf.cropped(rect)
    crop.fill(-5)
    crop.copy_to_device()
    buf.copy_to_host()
    np.testing.assert_array_equal(mem, np.where(_in_rect(rect), -5, _closed_form([(0, 128), (0, 128)])))


# ------------------------------------------------------------------------------ gpu_cpu_simultaneous_read
def test_gpu_cpu_simultaneous_read(device):
    """Ports gpu_cpu_simultaneous_read: a table read by GPU kernels and, through a condition
    that picks which of two GPU stages the output reads, on the host in the same pipeline; the
    table's first entry changed on the host between two runs (so its device copy is stale) picks
    the other stage. 20x20, closed forms of Halide's test."""
    x, y, xi, yi = hl.vars("x y xi yi")
    table = hl.ImageParam(hl.Int(32), 1, "table")
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    f[x, y] = x * 2 + y + table[x]
    g[x, y] = x + y * 2 + table[y]
    h[x, y] = hl.select(table[0] == 0, f[x, y], g[x, y])
    for fn in (f, g, h):
        fn.compute_root().gpu_tile(x, y, xi, yi, 8, 8)
    t = hl.Buffer(hl.Int(32), [32])
    t.fill(17)
    t[0] = 0
    table.set(t)
    result1 = h.realize([20, 20], CUDA)
    t[0] = 1
    table.set(t)
    result2 = h.realize([20, 20], CUDA)
    yy, xx = np.mgrid[0:20, 0:20]
    np.testing.assert_array_equal(np.asarray(result1), xx * 2 + yy + np.where(xx == 0, 0, 17))
    np.testing.assert_array_equal(np.asarray(result2), xx + yy * 2 + np.where(yy == 0, 1, 17))


# ------------------------------------------------------------------------------ gpu_object_lifetime_1/2/3
def test_gpu_object_lifetime_1(device, allocations):
    """Ports gpu_object_lifetime_1: a gpu_tile pipeline realized twice (a new Func each time);
    once the results are dropped, every device allocation made is freed."""
    x, xi = hl.vars("x xi")
    for _ in range(2):
        f = hl.Func("f")
        f[x] = x
        f.gpu_tile(x, xi, 32)
        result = f.realize([256], CUDA)
        np.testing.assert_array_equal(np.asarray(result), np.arange(256))
    del result
    assert allocations.live() == 0
    assert allocations.made() == (2 if _on_device(device) else 0)


def test_gpu_object_lifetime_2(device, allocations):
    """Ports gpu_object_lifetime_2: an internal GPU stage between two host ones; its device
    allocation is freed when the call ends (the output, computed on the host, has none)."""
    x, xi = hl.vars("x xi")
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    f[x] = x
    g[x] = f[x]
    h[x] = g[x]
    f.compute_root()
    g.compute_root().gpu_tile(x, xi, 32)
    out = h.realize([256], CUDA)
    assert not out.has_device_allocation()
    assert allocations.live() == 0
    assert allocations.made() == (2 if _on_device(device) else 0)  # f, copied up, and g
    np.testing.assert_array_equal(np.asarray(out), np.arange(256))


def test_gpu_object_lifetime_3(device, allocations):
    """Ports gpu_object_lifetime_3: ten compute_root stages in a chain, all but every third on
    the GPU: each of the nine buffers a kernel uses gets a device allocation, and none is left
    after the call. (Halide frees some early, after their last use; pyhalide frees a device
    copy when its buffer's scope ends, so all nine are live at once.)"""
    x, xi = hl.vars("x xi")
    fs = [hl.Func(f"f{i}") for i in range(10)]
    fs[0][x] = x
    for i in range(1, 10):
        fs[i][x] = fs[i - 1][x]
    for i, f in enumerate(fs):
        f.compute_root()
        if i % 3:
            f.gpu_tile(x, xi, 32)
    out = fs[-1].realize([256], CUDA)
    np.testing.assert_array_equal(np.asarray(out), np.arange(256))
    assert allocations.live() == 0
    if _on_device(device):
        assert allocations.made() == 9


# ------------------------------------------------------------------------------ func_lifetime, func_lifetime_2
def _check_product(buf, add: int) -> None:
    yy, xx = np.mgrid[0:32, 0:32]
    np.testing.assert_array_equal(np.asarray(buf), xx * yy + add)


def test_func_lifetime(device):
    """Ports func_lifetime: f realized on the GPU; then a Func g defined, realized and dropped;
    then f realized again, still right (x * y + 1, and g's x * y + 2)."""
    f = _product_on_gpu("f", 1)
    g = _product_on_gpu("g", 2)
    del g
    gc.collect()
    _check_product(f.realize([32, 32], CUDA), 1)


def _product_on_gpu(name: str, c: int):
    """A Func name(x, y) = x * y + c, gpu_tile 8x8, realized on the GPU once and checked."""
    x, y, xi, yi = hl.vars("x y xi yi")
    f = hl.Func(name)
    f[x, y] = x * y + c
    f.gpu_tile(x, y, xi, yi, 8, 8)
    _check_product(f.realize([32, 32], CUDA), c)
    return f


def test_func_lifetime_2(device):
    """Ports func_lifetime_2: f and g realized on the GPU, then f dropped; g realized again is
    still right."""
    f = _product_on_gpu("f", 1)
    g = _product_on_gpu("g", 2)
    del f
    gc.collect()
    _check_product(g.realize([32, 32], CUDA), 2)


# ------------------------------------------------------------------------------ device_copy_at_inner_loop
def test_device_copy_at_inner_loop(device):
    """Ports device_copy_at_inner_loop: a sliding window with the producer on the GPU (stored at
    root, computed per row of the consumer, gpu_tile x by 32) and the consumer on the host: the
    producer's new row is copied back inside the loop over y. 2 (x + y) + 1 over 100x100."""
    x, y, xi = hl.vars("x y xi")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + y
    g[x, y] = f[x, y] + f[x, y + 1]
    f.store_root().compute_at(g, y).gpu_tile(x, xi, 32)
    out = g.realize([100, 100], CUDA)
    yy, xx = np.mgrid[0:100, 0:100]
    np.testing.assert_array_equal(np.asarray(out), 2 * (xx + yy) + 1)


# ------------------------------------------------------------------------------ async_device_copy
def _expensive_zero(x, y, t, n):
    """Halide's: counts Fermat counterexamples a^3 + b^3 = c^3 among n random triples (zero)."""
    r = hl.RDom([hl.Range(0, n)])
    a, b, c = hl.Func("a"), hl.Func("b"), hl.Func("c")
    z = hl.Var("z")
    for fn in (a, b, c):
        fn[x, y, t, z] = hl.random_int() % 1024 + 5
    return hl.sum(hl.select(hl.pow(a[x, y, t, r], 3) + hl.pow(b[x, y, t, r], 3) == hl.pow(c[x, y, t, r], 3), 1, 0))


@pytest.mark.parametrize("case", range(4))
def test_async_device_copy(case, device):
    """Ports async_device_copy: 16 frames summed into avg, the frames computed on the GPU and
    copied to the host one at a time by frames.in().copy_to_host() (0: synchronously; 1: async
    into a double buffer, fold_storage(t, 2)), or computed on the CPU and copied to the device
    by frames.in().copy_to_device() for a GPU reduction (2: synchronously; 3: async into a
    double buffer). Each equals ((x + y) % 8) * 16 + 120 (Halide: 1024x1024; here 64x64)."""
    x, y, t, xo, yo = hl.vars("x y t xo yo")
    n = 16
    r = hl.RDom([hl.Range(0, n)])
    frames = hl.Func("frames")
    frames[x, y, t] = _expensive_zero(x, y, t, 1) + ((x + y) % 8) + t
    avg = hl.Func("avg")
    avg[x, y] += frames[x, y, r]
    if case < 2:
        avg.compute_root().update().reorder(x, y, r).vectorize(x, 8)
        frames.store_root().compute_at(frames.in_(), hl.Var.outermost()).gpu_tile(x, y, xo, yo, x, y, 16, 16)
        copy = frames.in_().store_root().compute_at(avg, r).copy_to_host()
        if case == 1:
            copy.fold_storage(t, 2).async_()
    else:
        avg.compute_root().gpu_tile(x, y, xo, yo, x, y, 16, 16)
        avg.update().reorder(x, y, r).gpu_tile(x, y, xo, yo, x, y, 16, 16)
        frames.store_root().compute_at(avg, r).vectorize(x, 8).fold_storage(t, 2).parallel(y)
        if case == 3:
            frames.async_()
        frames.in_().store_root().compute_at(avg, r).copy_to_device()
    size = 1024 if device == "gpu" else 64
    out = avg.realize([size, size], CUDA)
    yy, xx = np.mgrid[0:size, 0:size]
    np.testing.assert_array_equal(np.asarray(out), ((xx + yy) % 8) * n + n * (n - 1) // 2)
    avg.realize(out, CUDA)  # Halide's benchmark: realize into the same output, then device_sync
    out.device_sync()
    np.testing.assert_array_equal(np.asarray(out), ((xx + yy) % 8) * n + n * (n - 1) // 2)


def test_copy_to_host_needs_a_plain_copy():
    """copy_to_host / copy_to_device are for a Func that is a plain copy of another (what in_()
    makes), as Halide asserts: a Func with another value, with an update or undefined is refused."""
    x = hl.Var("x")
    f, g, h, u = hl.Func("f"), hl.Func("g"), hl.Func("h"), hl.Func("u")
    f[x] = x
    g[x] = f[x] + 1
    h[x] = f[x]
    h[x] += 1
    for bad in (g, h, u):
        with pytest.raises(hl.HalideError, match="copy_to_host"):
            bad.copy_to_host()
    with pytest.raises(hl.HalideError, match="copy_to_device"):
        g.copy_to_device()


# ------------------------------------------------------------------------------ gpu_allocation_cache
def _fib(n: int, a: int, b: int) -> int:
    while n > 2:
        a, b = b, a + b
        n -= 1
    return b


def test_gpu_allocation_cache(device, allocations):
    """Ports gpu_allocation_cache: three Fibonacci chains of 30 compute_root GPU stages each
    (their buffers of one size, shrinking by a column per stage, clamped rows), realized again
    and again from six threads at once (two per chain), each result checked; afterwards no
    device allocation is left. (Halide's JIT allocation cache, reuse_device_allocations, is not
    in its Python bindings; pyhalide frees each allocation when its call ends.) Halide realizes
    128x128 300 times per thread; here 16x16, 3 times, and the emulated device (which compiles
    each chain's kernels with g++) gets chains of 12."""
    n = 12 if device == "emulated" else 30
    x, y, xi, yi = hl.vars("x y xi yi")

    def chain(a, b, shift_x, clamp_y):
        fs = [hl.Func(f"f{k}") for k in range(n)]
        fs[0][x, y] = hl.f32(a)
        fs[1][x, y] = hl.f32(b)
        for i in range(2, n):
            yy = hl.clamp(y, 0, i) if clamp_y else y
            fs[i][x, y] = fs[i - 1][x + shift_x, yy] + fs[i - 2][x, yy]
        for fn in fs:
            fn.compute_root().gpu_tile(x, y, xi, yi, 8, 8)
        fs[-1].compile_jit(CUDA)
        return fs[-1]

    chains = [(chain(1, 2, 0, False), _fib(n, 1, 2)), (chain(3, 4, 1, False), _fib(n, 3, 4)),
              (chain(5, 6, 0, True), _fib(n, 5, 6))]
    errors = []

    def run(out_func, correct):
        try:
            for _ in range(3):
                result = out_func.realize([16, 16], CUDA)
                result.copy_to_host()
                np.testing.assert_array_equal(np.asarray(result), np.full((16, 16), correct, np.float32))
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=c) for c in chains for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert allocations.live() == 0


# ------------------------------------------------------------------------------ gpu_assertion_in_kernel
def test_gpu_assertion_in_kernel(device, fresh_func_names):
    """Ports gpu_assertion_in_kernel: f bounded to c in [0, 3) and unrolled, computed per GPU
    thread of g (gpu_tile over x); g realized over 3 values of c works (8 (x + c + 3)), over 4
    fails with Halide's error about f's bound (Halide's kernel traps and the runtime reports it;
    pyhalide checks it on the host before the launch: it is the same for every GPU thread)."""
    f, g = hl.Func("f"), hl.Func("g")
    c, x, xi = hl.vars("c x xi")
    f[c, x] = x + c + 3
    f.bound(c, 0, 3).unroll(c)
    g[c, x] = f[c, x] * 8
    g.gpu_tile(x, xi, 8)
    f.compute_at(g, x).gpu_threads(x)
    got = np.asarray(g.realize([3, 100], CUDA))
    xx, cc = np.mgrid[0:100, 0:3]
    np.testing.assert_array_equal(got, (xx + cc + 3) * 8)
    with pytest.raises(hl.RuntimeCheckError, match=r"Bounds given for f in c \(from 0 to 2\) do not cover required "
                       r"region \(from 0 to 3\)"):
        g.realize([4, 100], CUDA)


def test_gpu_check_not_reached_by_an_empty_kernel(device, fresh_func_names):
    """gpu_assertion_in_kernel's check, made before the launch, is made only where a block runs:
    over no x (GuardWithIf tiles, so no block at all) the bound that c overruns is never used,
    and nothing fails, as Halide's kernel is not launched."""
    f, g = hl.Func("f"), hl.Func("g")
    c, x, xi = hl.vars("c x xi")
    f[c, x] = x + c + 3
    f.bound(c, 0, 3).unroll(c)
    g[c, x] = f[c, x] * 8
    g.gpu_tile(x, xi, 8, hl.TailStrategy.GuardWithIf)
    f.compute_at(g, x).gpu_threads(x)
    assert np.asarray(g.realize([4, 0], CUDA)).shape == (0, 4)
    with pytest.raises(hl.RuntimeCheckError, match="Bounds given for f in c"):
        g.realize([4, 1], CUDA)


def test_gpu_check_that_varies_within_a_kernel_is_refused(device, fresh_func_names):
    """A run-time check inside a GPU kernel that depends on the block (a bound() on a Func
    computed per block, whose required region moves with the block) cannot be made before the
    launch, and a kernel cannot report one: compiling refuses it, naming the check."""
    f, g = hl.Func("f"), hl.Func("g")
    x, xi = hl.vars("x xi")
    f[x] = x
    f.bound(x, 0, 64)
    g[x] = f[x]
    g.gpu_tile(x, xi, 8)
    f.compute_at(g, x)
    with pytest.raises(hl.CompileError, match="run-time check inside a GPU kernel .Bounds given for f in x"):
        g.compile_jit(CUDA)


# ------------------------------------------------------------------------------ performance/async_gpu
def _expensive(e, n):
    for _ in range(n):
        e = e * (e + 1)
    return e


def _expensive_np(v: np.ndarray, n: int) -> np.ndarray:
    for _ in range(n):
        v = v * (v + np.uint32(1))
    return v


def test_async_gpu(device):
    """Ports the correctness check of performance/async_gpu (its timings left out): frames
    computed one at a time on the GPU into a buffer stored at root, each copied to a host double
    buffer (gpu.in_().copy_to_host(), fold_storage(t, 2)) for a parallel vectorized CPU stage;
    with and without async_() on the copy the output is the same, expensive(expensive(17)) in
    uint32 (Halide: 800x800x16; here 64x48x4). expensive(e, 16) doubles e's tree 16 times over:
    a graph the definition's common subexpression elimination makes 16 lets."""
    w, h, frames = (800, 800, 16) if device == "gpu" else (64, 48, 4)
    depth = 16
    in_buf = hl.Buffer(hl.UInt(32), [w, h, frames])
    in_buf.fill(17)
    outs = []
    for use_async in (False, True):
        x, y, t, xi, yi = hl.vars("x y t xi yi")
        inp = hl.ImageParam(hl.UInt(32), 3, "in")
        cpu, gpu = hl.Func("cpu"), hl.Func("gpu")
        gpu[x, y, t] = _expensive(inp[x, y, t], depth)
        cpu[x, y, t] = _expensive(gpu[x, y, t], depth)
        cpu.parallel(y, 16).vectorize(x, 8)
        gpu.compute_at(gpu.in_(), hl.Var.outermost()).store_root().gpu_tile(x, y, xi, yi, 8, 8)
        gpu.in_().copy_to_host().compute_at(cpu, t).store_root().fold_storage(t, 2)
        if use_async:
            gpu.in_().async_()
        inp.set(in_buf)
        out = hl.Buffer(hl.UInt(32), [w, h, frames])
        cpu.realize(out, CUDA)
        outs.append(np.asarray(out).copy())
    want = _expensive_np(_expensive_np(np.uint32(17), depth), depth)
    np.testing.assert_array_equal(outs[0], np.full((frames, h, w), want, np.uint32))
    np.testing.assert_array_equal(outs[1], outs[0])


# ------------------------------------------------------------------------------ performance/device_copy
@pytest.mark.parametrize("order, shape", [([3, 2, 0, 1], [64, 48, 3, 2]), ([3, 2, 0, 1], [64, 48, 6, 1]),
                                          ([0, 1, 2, 3], [64, 48, 3, 2]), ([0, 1, 2, 3], [64, 48, 6, 1])])
def test_device_copy(order, shape, device):
    """Ports the correctness check of performance/device_copy (its timings left out): a float
    buffer stored in one of two dimension orders, some with an extent-1 dimension, copied to the
    device (device_malloc, copy_to_device, device_sync), its host copy then zeroed and marked
    clean, and copied back from the device marked dirty: every value is x .5 + 2 y + 4 c + .8 t
    again (Halide: 1024x1024 planes; here 64x48)."""
    buf = hl.Buffer(hl.Float(32), shape, order)
    t, c, y, x = np.indices(shape[::-1])
    want = (x * np.float32(0.5) + y * np.float32(2.0) + c * np.float32(4.0) + t * np.float32(0.8)).astype(np.float32)
    np.asarray(buf)[...] = want
    buf.set_host_dirty()
    buf.device_malloc()
    buf.set_host_dirty()
    buf.copy_to_device(CUDA)
    buf.device_sync()
    assert not buf.host_dirty()
    buf.set_device_dirty(False)
    buf.fill(0.0)
    buf.set_host_dirty(False)
    buf.set_device_dirty(True)
    buf.copy_to_host()
    assert not buf.device_dirty()
    np.testing.assert_array_equal(np.asarray(buf), want)
