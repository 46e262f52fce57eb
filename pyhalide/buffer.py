"""hl.Buffer: a view of a numpy array with Halide's dimension order and per-dimension mins.

`hl.Buffer(ndarray)` shares memory with the array. By default the axes are reversed, as in
Halide 21: numpy `[y, x]` is Halide `[x, y]`. `np.asarray(buffer)` gives the numpy view back.
"""

from __future__ import annotations

import numpy as np

from .errors import BufferIndexError, HalideError
from .names import unique_name
from .param import _DimView
from .types import Type, from_numpy

MAX_ELEMENTS = 2**31 - 1  # index arithmetic is 32-bit, as in Halide


class Buffer:
    _device_copy = None  # a gpu_runtime.DeviceCopy once the buffer lives on a GPU too

    def __init__(self, data=None, sizes=None, name: str | None = None, reverse_axes: bool = True):
        """Buffer(ndarray), Buffer(type, [sizes]), Buffer(type, [sizes], name) or Buffer(ndarray, name)."""
        if isinstance(sizes, str):
            name, sizes = sizes, None
        if isinstance(data, Type):
            if sizes is None:
                raise HalideError("Buffer(type, sizes) needs the sizes")
            sizes = [int(s) for s in sizes]
            if any(s < 0 for s in sizes):
                raise HalideError(f"Buffer sizes must be non-negative, got {sizes}")
            try:
                array = np.zeros(tuple(reversed(sizes)), dtype=data.to_numpy())
            except (MemoryError, ValueError) as e:
                raise HalideError(f"Buffer of {data} with sizes {sizes} cannot be allocated: {e}") from None
            reverse_axes = True
        elif isinstance(data, Buffer):
            array, reverse_axes = data._array, data._reversed
        elif data is None:
            raise HalideError("Buffer needs an ndarray or a type and sizes")
        else:
            array = np.asarray(data)
        if array.dtype.byteorder not in "=|" or array.dtype.kind not in "biuf":
            raise HalideError(f"Buffer: unsupported numpy dtype {array.dtype}")
        self._type = from_numpy(array.dtype)
        self._array = array
        self._reversed = reverse_axes
        n = array.ndim
        self._axis = [n - 1 - d for d in range(n)] if reverse_axes else list(range(n))
        self._mins = [0] * n
        self._name = name or unique_name("b")

    @classmethod
    def _output(cls, t: Type, sizes: list[int], name: str) -> Buffer:
        """A zeroed buffer for realize's outputs, sizes already checked: the per-call path."""
        b = cls.__new__(cls)
        n = len(sizes)
        b._type, b._array, b._reversed = t, np.zeros(sizes[::-1], dtype=t.to_numpy()), True
        b._axis, b._mins, b._name = list(range(n - 1, -1, -1)), [0] * n, name
        return b

    def _cropped(self, sizes: list[int]) -> Buffer:
        """A view of the region [0, size) in each dimension (Halide's realize of a grown output)."""
        n = len(sizes)
        index = [slice(None)] * n
        for d in range(n):
            index[self._axis[d]] = slice(-self._mins[d], -self._mins[d] + sizes[d])
        return Buffer(self._array[tuple(index)], name=self._name, reverse_axes=self._reversed)

    # --- identity and shape ---
    def same_view(self, other) -> bool:
        """Whether other sees exactly this memory with these axes and mins (two wrappers of one array)."""
        if not isinstance(other, Buffer):
            return False
        a, b = self._array, other._array
        return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0] and a.dtype == b.dtype
                and a.shape == b.shape and a.strides == b.strides and self._axis == other._axis
                and self._mins == other._mins)

    def name(self) -> str:
        return self._name

    def type(self) -> Type:
        return self._type

    def dimensions(self) -> int:
        return self._array.ndim

    def dim(self, i: int) -> _DimView:
        if not 0 <= i < self.dimensions():
            raise HalideError(f"Buffer {self._name} has no dimension {i}")
        return _DimView(self, i)

    def _dim_field(self, field: str, i: int):
        if field == "min":
            return self._mins[i]
        if field == "extent":
            return self._array.shape[self._axis[i]]
        return self._array.strides[self._axis[i]] // self._array.itemsize

    def width(self) -> int:
        return self.dim(0).extent()

    def height(self) -> int:
        return self.dim(1).extent()

    def channels(self) -> int:
        return self.dim(2).extent()

    def left(self) -> int:
        return self.dim(0).min()

    def top(self) -> int:
        return self.dim(1).min()

    def right(self) -> int:
        return self.dim(0).max()

    def bottom(self) -> int:
        return self.dim(1).max()

    def number_of_elements(self) -> int:
        return int(self._array.size)

    def set_min(self, *mins) -> Buffer:
        if len(mins) == 1 and isinstance(mins[0], list | tuple):
            mins = mins[0]
        if len(mins) > self.dimensions():
            raise HalideError(f"Buffer {self._name}.set_min: {len(mins)} mins for {self.dimensions()} dims")
        for i, m in enumerate(mins):
            self._mins[i] = int(m)
        return self

    def translate(self, *deltas) -> Buffer:
        if len(deltas) == 1 and isinstance(deltas[0], list | tuple):
            deltas = deltas[0]
        for i, d in enumerate(deltas):
            self._mins[i] += int(d)
        return self

    def _rdom_ranges(self):
        return [(self._mins[i], self.dim(i).extent()) for i in range(self.dimensions())]

    # --- device memory, as Halide's: a host and a device copy, each possibly the newer one ---
    def device_malloc(self, device_api=None) -> int:
        """Give the buffer a device copy (its contents undefined until copied or computed)."""
        from .codegen.gpu_runtime import DeviceCopy, cuda_device, span

        if self._device_copy is None:
            device = cuda_device()
            offset, nbytes = span(self._array)
            self._device_copy = DeviceCopy(device, device.malloc(nbytes), nbytes, offset, owner=self)
        return 0

    def copy_to_device(self, device_api=None) -> int:
        """Copy the host contents to the device if they are newer (or there is no device copy yet);
        realizations then read and write the device copy, and copy nothing back until the host
        needs it (copy_to_host, element access, numpy)."""
        fresh = self._device_copy is None
        self.device_malloc(device_api)
        c = self._device_copy
        if fresh or c.host_dirty:
            c.device.to_device(c.address, self._host_address() - c.offset, c.nbytes)
            c.host_dirty = False
        return 0

    def copy_to_host(self) -> int:
        c = self._device_copy
        if c is not None and c.device_dirty:
            c.device.synchronize()
            c.device.to_host(self._host_address() - c.offset, c.address, c.nbytes)
            c.device_dirty = False
        return 0

    def device_free(self) -> int:
        """Drop the device copy (without copying it back)."""
        c, self._device_copy = self._device_copy, None
        if c is not None:
            c.device.free(c.address)
        return 0

    def device_sync(self, target=None) -> int:
        if self._device_copy is not None:
            self._device_copy.device.synchronize()
        return 0

    def has_device_allocation(self) -> bool:
        return self._device_copy is not None

    def host_dirty(self) -> bool:
        return self._device_copy is not None and self._device_copy.host_dirty

    def device_dirty(self) -> bool:
        return self._device_copy is not None and self._device_copy.device_dirty

    def set_host_dirty(self, dirty: bool = True) -> None:
        if self._device_copy is not None:
            self._device_copy.host_dirty = bool(dirty)

    def set_device_dirty(self, dirty: bool = True) -> None:
        if self._device_copy is not None:
            self._device_copy.device_dirty = bool(dirty)

    def _host_address(self) -> int:
        return self._array.__array_interface__["data"][0]

    def _host_view(self) -> np.ndarray:
        """The host array, brought up to date first if the device copy is newer."""
        if self._device_copy is not None and self._device_copy.device_dirty:
            self.copy_to_host()
        return self._array

    # --- numpy interop ---
    def __array__(self, dtype=None, copy=None):
        a = self._host_view()
        if dtype is not None and np.dtype(dtype) != a.dtype:
            return a.astype(dtype)
        return a.copy() if copy else a

    @property
    def __array_interface__(self):
        return self._host_view().__array_interface__

    def to_numpy(self) -> np.ndarray:
        return self._host_view()

    def copy(self) -> Buffer:
        b = Buffer(self._host_view().copy(), reverse_axes=self._reversed)
        b._mins = list(self._mins)
        return b

    def fill(self, value) -> Buffer:
        self._array[...] = value
        self.set_host_dirty()
        if self._device_copy is not None:
            self._device_copy.device_dirty = False
        return self

    # --- element access: ints read/write values, Exprs make an Expr for the algorithm ---
    def _numpy_index(self, coords):
        if len(coords) != self.dimensions():
            raise HalideError(f"Buffer {self._name} has {self.dimensions()} dimensions, indexed with {len(coords)}")
        idx = [0] * self.dimensions()
        for d, c in enumerate(coords):
            c = int(c) - self._mins[d]
            if not 0 <= c < self.dim(d).extent():
                raise BufferIndexError(
                    f"Buffer {self._name}: coordinate {int(c) + self._mins[d]} is outside dimension {d} "
                    f"[{self._mins[d]}, {self._mins[d] + self.dim(d).extent() - 1}]"
                )
            idx[self._axis[d]] = c
        return tuple(idx)

    def __getitem__(self, key):
        coords = key if isinstance(key, tuple) else (key,)
        if all(isinstance(c, int | np.integer) for c in coords):
            return self._host_view()[self._numpy_index(coords)].item()
        from .func import image_call

        return image_call(self, key)

    def __setitem__(self, key, value):
        coords = key if isinstance(key, tuple) else (key,)
        self._host_view()[self._numpy_index(coords)] = value
        self.set_host_dirty()

    def __repr__(self):  # as Halide's bindings print it: [min, extent, stride] per dimension
        dims = ",".join(f"[{self._mins[d]},{self.dim(d).extent()},{self.dim(d).stride()}]"
                        for d in range(self.dimensions()))
        return f"<halide.Buffer of type {self._type} shape:[{dims}]>"
