"""hl.Buffer: a view of a numpy array with Halide's dimension order and per-dimension mins.

`hl.Buffer(ndarray)` shares memory with the array. By default the axes are reversed, as in
Halide 21: numpy `[y, x]` is Halide `[x, y]`. `np.asarray(buffer)` gives a numpy view back, its
axes Halide's reversed (whatever the buffer's storage order); `buffer.numpy_view(False)` keeps
Halide's order. Cropping, slicing, transposing and translating make views of the same memory,
and of the same device allocation where there is one (Halide's device_crop and device_slice),
each view with its own dirty bits, starting as its parent's.

A Buffer holds `_array`, a numpy array (None for a buffer without host memory: a bounds query,
or after deallocate), `_axis[d]`, the numpy axis of Halide dimension d, and `_mins[d]`. A buffer
without host memory keeps its shape and strides in `_geom`, a view of a one-element array that
nothing ever reads through.
"""

from __future__ import annotations

import itertools
import math
import operator

import numpy as np

from .errors import BufferIndexError, HalideError
from .names import unique_name
from .param import _DimView
from .types import Type, from_numpy

MAX_ELEMENTS = 2**31 - 1  # index arithmetic is 32-bit, as in Halide
_INT32 = (-(2**31), 2**31 - 1)


class BufferValueError(HalideError, ValueError):
    """A ValueError where Halide's bindings raise one (a wrong number of coordinates, no host
    memory, an unsupported element type), and a HalideError as every pyhalide error is."""


class BufferTypeError(HalideError, TypeError):
    """Arguments no Buffer constructor or method takes: a TypeError, as Halide's bindings raise."""


def _index(value, what: str) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise BufferTypeError(f"{what} must be an integer, got {value!r}") from None


def _ints(values, what: str) -> list[int]:
    if isinstance(values, int | np.integer) or not hasattr(values, "__iter__"):
        raise BufferTypeError(f"{what} must be a list of integers, got {values!r}")
    return [_index(v, what) for v in values]


ALIGNMENT = 128  # bytes, as Halide's runtime allocates


def aligned_zeros(shape, dtype) -> np.ndarray:
    """np.zeros whose first element is ALIGNMENT-aligned, as Halide's buffers are. numpy's large
    arrays start 16 bytes into a page, so every 64-byte vector store of a dense loop straddled two
    cache lines (unsharp's output loop, a store per channel: 1.16-1.29x Halide's time on the
    same schedule, 0.78-0.88x aligned)."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    raw = np.zeros(count * dtype.itemsize + ALIGNMENT, np.uint8)
    skip = -raw.ctypes.data % ALIGNMENT
    return raw[skip:skip + count * dtype.itemsize].view(dtype).reshape(shape)


def _geometry(t: Type, n_elements_shape: tuple, strides_in_elements: tuple) -> np.ndarray:
    """A shape-and-strides carrier for a buffer without host memory: never read through."""
    dt = t.to_numpy()
    return np.lib.stride_tricks.as_strided(np.empty(1, dt), n_elements_shape,
                                           tuple(s * dt.itemsize for s in strides_in_elements), writeable=False)


class Buffer:
    _device_copy = None  # a gpu_runtime.DeviceCopy once the buffer lives on a GPU too
    _host_dirty = False  # Halide's host-dirty bit while there is no device copy to hold it
    _geom = None  # the shape of a buffer without host memory (see the module docstring)

    def __init__(self, *args, **kwargs):
        """As Halide's constructors: Buffer() (undefined), Buffer(other_buffer) (the same memory
        and shape, a new name), Buffer(ndarray, name="", reverse_axes=True),
        Buffer(type, sizes, name="") and Buffer(type, sizes, storage_order, name="") (zeroed;
        storage_order lists the dimensions from the densest)."""
        self._type, self._array, self._axis, self._mins = None, None, [], []
        if not args and not kwargs:
            self._name = ""
            return
        first = args[0] if args else kwargs.get("type", kwargs.get("buffer"))
        if isinstance(first, Type):
            self._init_typed(*args, **kwargs)
        elif isinstance(first, Buffer) and len(args) == 1 and not kwargs:
            self._init_copy(first)
        else:
            self._init_array(*args, **kwargs)

    def _init_typed(self, type=None, sizes=None, storage_order=None, name=None):
        if isinstance(storage_order, str) and name is None:  # Buffer(type, sizes, name)
            storage_order, name = None, storage_order
        if not isinstance(type, Type) or sizes is None:
            raise BufferTypeError(f"Buffer(type, sizes[, storage_order][, name]) takes an hl.Type and a list of "
                                  f"sizes, got {type!r}, {sizes!r}")
        sizes = _ints(sizes, "Buffer sizes")
        if any(s < 0 for s in sizes):
            raise HalideError(f"Buffer sizes must be non-negative, got {sizes}")
        order = _storage_order(storage_order, len(sizes))
        self._type, self._name = type, name or unique_name("b")
        self._alloc([sizes[d] for d in order], order)

    def _alloc(self, outer_last_sizes: list[int], order: list[int]) -> None:
        """Zeroed host memory for dimensions `order` (densest first) of the given sizes."""
        n = len(order)
        nbytes = math.prod(outer_last_sizes) * self._type.bytes()
        if nbytes >= 2**63:  # (numpy's own message for this is about reshaping an empty array)
            raise HalideError(f"Buffer {self._name} of {self._type} with sizes {outer_last_sizes} cannot be "
                              f"allocated: it would take {nbytes} bytes, more than a 64-bit size can count")
        try:
            array = aligned_zeros(tuple(reversed(outer_last_sizes)), self._type.to_numpy())
        except (MemoryError, ValueError) as e:
            raise HalideError(f"Buffer {self._name} of {self._type} with sizes {outer_last_sizes} cannot be "
                              f"allocated: {e}") from None
        if 0 in outer_last_sizes:  # Halide's strides: each the product of the denser extents
            strides, s = [], 1
            for e in outer_last_sizes:
                strides.append(s)
                s *= e
            array = np.lib.stride_tricks.as_strided(array, array.shape,
                                                    tuple(x * array.itemsize for x in reversed(strides)))
        self._array = array
        self._axis = [0] * n
        for k, d in enumerate(order):
            self._axis[d] = n - 1 - k
        self._mins = [0] * n

    def _init_copy(self, other: Buffer) -> None:
        if not other.defined():
            self._name = ""
            return
        self._type, self._name = other._type, unique_name("b")
        self._array, self._geom = other._array, other._geom
        self._axis, self._mins = list(other._axis), list(other._mins)
        self._host_dirty = other.host_dirty()
        if other._device_copy is not None:
            self._device_copy = other._device_copy.view(other._array, other._array)

    def _init_array(self, buffer=None, name=None, reverse_axes=True):
        if isinstance(name, bool):  # an old pyhalide call: Buffer(array, reverse_axes) is not Halide's
            raise BufferTypeError("Buffer(buffer, name, reverse_axes): the name comes before reverse_axes")
        array = _as_array(buffer)
        try:
            t = from_numpy(array.dtype) if array.dtype.byteorder in "=|" else None
        except HalideError:
            t = None
        if t is None:
            raise BufferValueError(f"Unsupported Buffer<> type: numpy dtype {array.dtype} has no Halide equivalent")
        for extent, stride in zip(array.shape, array.strides):
            if extent > _INT32[1] or not _INT32[0] <= stride // array.itemsize <= _INT32[1]:
                raise BufferValueError(f"Out of range dimensions in buffer conversion: numpy shape {array.shape} "
                                       f"and strides {array.strides} do not fit in 32 bits")
        if array.size == 0 and array.ndim:  # numpy gives empty arrays 0 strides; the buffer protocol doesn't
            try:
                array = np.lib.stride_tricks.as_strided(array, array.shape, memoryview(array).strides)
            except (TypeError, ValueError):
                pass
        n = array.ndim
        self._type, self._name, self._array = t, name or unique_name("b"), array
        self._axis = [n - 1 - d for d in range(n)] if reverse_axes else list(range(n))
        self._mins = [0] * n
        self._host_dirty = True  # as Halide's: memory handed in is the newer copy

    @classmethod
    def _output(cls, t: Type, sizes: list[int], name: str) -> Buffer:
        """A zeroed buffer for realize's outputs, sizes already checked: the per-call path."""
        b = cls.__new__(cls)
        n = len(sizes)
        b._type, b._array = t, aligned_zeros(sizes[::-1], t.to_numpy())
        b._axis, b._mins, b._name = list(range(n - 1, -1, -1)), [0] * n, name
        return b

    def _derived(self, array, axis: list[int], mins: list[int], name: str | None = None) -> Buffer:
        """A new Buffer of this type over `array` (a view of this one's memory, or a geometry)."""
        b = Buffer.__new__(Buffer)
        b._type, b._axis, b._mins, b._name = self._type, axis, mins, name or unique_name("b")
        if self._array is None:
            b._array, b._geom = None, array
        else:
            b._array = array
        b._host_dirty = self.host_dirty()
        if self._device_copy is not None:
            b._device_copy = self._device_copy.view(self._array, array)
        return b

    def _cropped(self, sizes: list[int]) -> Buffer:
        """A view of the region [0, size) in each dimension (Halide's realize of a grown output)."""
        region = [(0, s) for s in sizes]
        return self._derived(self._crop_view(region), list(self._axis), [0] * len(sizes), self._name)

    # --- the factories Halide's bindings have ---
    @staticmethod
    def make_scalar(type: Type, name: str = "") -> Buffer:
        """A zero-dimensional buffer of one element."""
        return Buffer(type, [], name)

    @staticmethod
    def make_interleaved(type: Type, width: int, height: int, channels: int, name: str = "") -> Buffer:
        """A [width, height, channels] buffer with the channels densest (stride 1)."""
        return Buffer(type, [width, height, channels], [2, 0, 1], name)

    @staticmethod
    def make_bounds_query(type: Type, sizes, name: str = "") -> Buffer:
        """A buffer with a shape (dense strides) but no host memory, until allocate()."""
        if not isinstance(type, Type):
            raise BufferTypeError(f"make_bounds_query takes an hl.Type, got {type!r}")
        sizes = _ints(sizes, "Buffer sizes")
        strides, s = [], 1
        for e in sizes:
            strides.append(s)
            s *= e
        n = len(sizes)
        b = Buffer.__new__(Buffer)
        b._type, b._name, b._array, b._mins = type, name or unique_name("b"), None, [0] * n
        b._geom = _geometry(type, tuple(reversed(sizes)), tuple(reversed(strides)))
        b._axis = [n - 1 - d for d in range(n)]
        return b

    @staticmethod
    def make_with_shape_of(src: Buffer, name: str = "") -> Buffer:
        """A zeroed buffer of src's type, mins and extents, its dimensions stored in the order of
        src's strides (Halide's make_with_shape_of: holes compacted away)."""
        src._need_defined("make_with_shape_of")
        n = src.dimensions()
        strides = [src._dim_field("stride", d) for d in range(n)]
        order = sorted(range(n), key=lambda d: strides[d])  # stable, as Halide's bubble sort
        b = Buffer(src._type, [src._dim_field("extent", d) for d in range(n)], order, name)
        b._mins = list(src._mins)
        return b

    # --- identity and shape ---
    def defined(self) -> bool:
        return self._type is not None

    def _need_defined(self, method: str) -> None:
        if self._type is None:
            raise HalideError(f"Undefined buffer calling method {method}")

    def same_as(self, other: Buffer) -> bool:
        """Whether other is this very Buffer (copies and views are not, as in Halide)."""
        return other is self

    def same_view(self, other) -> bool:
        """Whether other sees exactly this memory with these axes and mins (two wrappers of one array)."""
        if not isinstance(other, Buffer) or self._array is None or other._array is None:
            return False
        a, b = self._array, other._array
        return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0] and a.dtype == b.dtype
                and a.shape == b.shape and a.strides == b.strides and self._axis == other._axis
                and self._mins == other._mins)

    def name(self) -> str:
        self._need_defined("name")
        return self._name

    def set_name(self, name: str) -> None:
        self._need_defined("set_name")
        self._name = name

    def type(self) -> Type:
        self._need_defined("type")
        return self._type

    def _shape_array(self) -> np.ndarray:
        """The array whose shape and strides are the buffer's (the host one, or the geometry),
        also what views are made of: as it is (a view of a device-dirty buffer is device-dirty)."""
        return self._array if self._array is not None else self._geom

    def dimensions(self) -> int:
        self._need_defined("dimensions")
        return self._shape_array().ndim

    def dim(self, i: int) -> _DimView:
        self._need_defined("dim")
        if not isinstance(i, int | np.integer) or not 0 <= i < self.dimensions():
            raise BufferIndexError(f"Buffer {self._name} has {self.dimensions()} dimensions; no dimension {i}")
        return _DimView(self, int(i))

    def _dim_field(self, field: str, i: int):
        if field == "min":
            return self._mins[i]
        a = self._shape_array()
        if field == "extent":
            return a.shape[self._axis[i]]
        return a.strides[self._axis[i]] // a.itemsize

    def _dim_or_zero(self, field: str, i: int) -> int:
        """A dimension's min or extent, 0 past the last one, as Halide's zero-filled dimension storage reads."""
        self._need_defined(field)
        return self._dim_field(field, i) if i < self.dimensions() else 0

    def width(self) -> int:
        return self._dim_field("extent", 0) if self.dimensions() > 0 else 1

    def height(self) -> int:
        return self._dim_field("extent", 1) if self.dimensions() > 1 else 1

    def channels(self) -> int:
        return self._dim_field("extent", 2) if self.dimensions() > 2 else 1

    def left(self) -> int:
        return self._dim_or_zero("min", 0)

    def right(self) -> int:
        return self._dim_or_zero("min", 0) + self._dim_or_zero("extent", 0) - 1

    def top(self) -> int:
        return self._dim_or_zero("min", 1)

    def bottom(self) -> int:
        return self._dim_or_zero("min", 1) + self._dim_or_zero("extent", 1) - 1

    def number_of_elements(self) -> int:
        self._need_defined("number_of_elements")
        return int(self._shape_array().size)

    def size_in_bytes(self) -> int:
        """The bytes from the lowest to the highest element's end (holes included), as Halide's."""
        self._need_defined("size_in_bytes")
        a = self._shape_array()
        if a.size == 0:
            return 0
        lo = sum(min(0, (n - 1) * s) for n, s in zip(a.shape, a.strides))
        hi = sum(max(0, (n - 1) * s) for n, s in zip(a.shape, a.strides))
        return hi - lo + a.itemsize

    def contains(self, coords) -> bool:
        """Whether the coordinates (of the first len(coords) dimensions) are inside the buffer."""
        coords = _ints(coords, "contains: coordinates")
        if len(coords) > self.dimensions():
            raise BufferValueError(f"Too many arguments: {len(coords)} coordinates for Buffer {self._name} of "
                                   f"{self.dimensions()} dimensions")
        return all(self._mins[d] <= c < self._mins[d] + self._dim_field("extent", d) for d, c in enumerate(coords))

    # --- coordinates: mins, translation ---
    def set_min(self, *mins) -> Buffer:
        """set_min([m0, m1, ...]) (or set_min(m0, m1, ...)): the first dimensions' mins."""
        if len(mins) == 1 and not isinstance(mins[0], int | np.integer):
            mins = mins[0]
        mins = _ints(mins, "set_min: mins")
        if len(mins) > self.dimensions():
            raise BufferValueError(f"Too many arguments: Buffer {self._name}.set_min got {len(mins)} mins for "
                                   f"{self.dimensions()} dimensions")
        for i, m in enumerate(mins):
            self._mins[i] = m
        return self

    def translate(self, *args) -> Buffer:
        """translate(dimension, dx) or translate([dx0, dx1, ...]): shift the coordinates."""
        self._need_defined("translate")
        if len(args) == 2:
            d, dx = self._dimension(args[0], "translate"), _index(args[1], "translate: dx")
            self._mins[d] += dx
            return self
        if len(args) != 1:
            raise BufferTypeError(f"translate takes (dimension, dx) or a list of deltas, got {args!r}")
        deltas = _ints(args[0], "translate: deltas")
        if len(deltas) > self.dimensions():
            raise BufferValueError(f"Too many arguments: Buffer {self._name}.translate got {len(deltas)} deltas for "
                                   f"{self.dimensions()} dimensions")
        for i, d in enumerate(deltas):
            self._mins[i] += d
        return self

    def translated(self, *args) -> Buffer:
        return self._view_copy().translate(*args)

    def _dimension(self, d, method: str) -> int:
        d = _index(d, f"{method}: dimension")
        if not 0 <= d < self.dimensions():
            raise BufferIndexError(f"Buffer {self._name}.{method}: no dimension {d} (it has {self.dimensions()})")
        return d

    def _rdom_ranges(self):
        return [(self._mins[i], self.dim(i).extent()) for i in range(self.dimensions())]

    # --- views of the same memory: crop, slice, embed, transpose ---
    def _view_copy(self) -> Buffer:
        """A new Buffer (a new name) seeing this one's memory the same way."""
        self._need_defined("a view")
        return self._derived(self._shape_array(), list(self._axis), list(self._mins))

    def _set_view(self, array, axis: list[int], mins: list[int]) -> None:
        """Make this buffer see `array` (a view), and its part of the device copy if any."""
        if self._device_copy is not None:
            self._device_copy = self._device_copy.view(self._array, array)
        if self._array is not None:
            self._array = array
        else:
            self._geom = array
        self._axis, self._mins = axis, mins

    def _crop_view(self, rect: list[tuple[int, int]]) -> np.ndarray:
        a = self._shape_array()
        index = [slice(None)] * a.ndim
        for d, (lo, extent) in enumerate(rect):
            lo, extent = _index(lo, "crop: min"), _index(extent, "crop: extent")
            have = self._dim_field("extent", d)
            if extent < 0 or lo < self._mins[d] or lo + extent > self._mins[d] + have:
                raise BufferIndexError(
                    f"Buffer {self._name}: crop of dimension {d} to [{lo}, {lo + extent - 1}] (min {lo}, extent "
                    f"{extent}) is outside its [{self._mins[d]}, {self._mins[d] + have - 1}]")
            index[self._axis[d]] = slice(lo - self._mins[d], lo - self._mins[d] + extent)
        return a[tuple(index)]

    def _rect(self, args, method: str) -> list[tuple[int, int]]:
        """(dimension, min, extent) or [(min, extent), ...] -> (min, extent) per leading dimension."""
        self._need_defined(method)
        if len(args) == 3:
            d = self._dimension(args[0], method)
            return [(self._mins[i], self._dim_field("extent", i)) for i in range(d)] + [(args[1], args[2])]
        if len(args) != 1 or not hasattr(args[0], "__iter__"):
            raise BufferTypeError(f"{method} takes (dimension, min, extent) or a list of (min, extent), got {args!r}")
        rect = [tuple(r) for r in args[0]]
        if len(rect) > self.dimensions() or any(len(r) != 2 for r in rect):
            raise BufferValueError(f"{method}: Buffer {self._name} has {self.dimensions()} dimensions; "
                                   f"{rect} is not a list of (min, extent) for them")
        return rect

    def crop(self, *args, **kwargs) -> None:
        """crop(dimension, min, extent) or crop([(min, extent), ...]): narrow this buffer in place."""
        args = _named(args, kwargs, ("dimension", "min", "extent") if len(args) + len(kwargs) == 3 else ("rect",))
        rect = self._rect(args, "crop")
        view = self._crop_view(rect)
        mins = list(self._mins)
        for d, (lo, _) in enumerate(rect):
            mins[d] = int(lo)
        self._set_view(view, list(self._axis), mins)

    def cropped(self, *args, **kwargs) -> Buffer:
        """As crop, on a new Buffer of the same memory."""
        args = _named(args, kwargs, ("dimension", "min", "extent") if len(args) + len(kwargs) == 3 else ("rect",))
        rect = self._rect(args, "cropped")
        b = self._derived(self._crop_view(rect), list(self._axis), list(self._mins))
        for d, (lo, _) in enumerate(rect):
            b._mins[d] = int(lo)
        return b

    def _slice_view(self, d, pos, method: str):
        self._need_defined(method)
        d = self._dimension(d, method)
        lo, extent = self._mins[d], self._dim_field("extent", d)
        pos = lo if pos is None else _index(pos, f"{method}: pos")
        if not lo <= pos < lo + extent:
            raise BufferIndexError(f"Buffer {self._name}.{method}({d}, {pos}): position {pos} is outside dimension "
                                   f"{d} [{lo}, {lo + extent - 1}]")
        a, ax = self._shape_array(), self._axis[d]
        view = a[(slice(None),) * ax + (pos - lo, Ellipsis)]  # the Ellipsis keeps a 0-d result a view
        axis = [x - (x > ax) for i, x in enumerate(self._axis) if i != d]
        return view, axis, [m for i, m in enumerate(self._mins) if i != d]

    def slice(self, dimension, pos=None) -> None:
        """Remove a dimension in place, keeping the plane at pos (default: its min)."""
        self._set_view(*self._slice_view(dimension, pos, "slice"))

    def sliced(self, dimension, pos=None) -> Buffer:
        return self._derived(*self._slice_view(dimension, pos, "sliced"))

    def _added_dimension(self, method: str):
        """The view with one more dimension, last, of extent 1 and min 0 (Halide's add_dimension:
        its stride is the last dimension's extent times its stride)."""
        self._need_defined(method)
        a, n = self._shape_array(), self.dimensions()
        stride = 1 if n == 0 else self._dim_field("extent", n - 1) * self._dim_field("stride", n - 1)
        view = np.lib.stride_tricks.as_strided(a, a.shape + (1,), a.strides + (stride * a.itemsize,),
                                               writeable=a.flags.writeable)
        return view, self._axis + [n], self._mins + [0]

    def add_dimension(self) -> None:
        self._set_view(*self._added_dimension("add_dimension"))

    def _embedded(self, d, pos, method: str):
        d = _index(d, f"{method}: dimension")
        if not 0 <= d <= self.dimensions():
            raise BufferIndexError(f"Buffer {self._name}.{method}: a new dimension goes at 0..{self.dimensions()}, "
                                   f"not {d}")
        view, axis, mins = self._added_dimension(method)
        mins[-1] = _index(pos, f"{method}: pos")
        axis.insert(d, axis.pop())
        mins.insert(d, mins.pop())
        return view, axis, mins

    def embed(self, dimension, pos=0) -> None:
        """Insert a dimension of extent 1 (min pos) at `dimension`, in place."""
        self._set_view(*self._embedded(dimension, pos, "embed"))

    def embedded(self, dimension, pos=0) -> Buffer:
        return self._derived(*self._embedded(dimension, pos, "embedded"))

    def _transposed(self, args, method: str):
        self._need_defined(method)
        n = self.dimensions()
        if len(args) == 2:
            d1, d2 = self._dimension(args[0], method), self._dimension(args[1], method)
            order = list(range(n))
            order[d1], order[d2] = d2, d1
        elif len(args) == 1:
            order = _ints(args[0], f"{method}: order")
            if sorted(order) != list(range(n)):
                raise BufferValueError(f"Buffer {self._name}.{method}: {order} is not an order of its {n} dimensions")
        else:
            raise BufferTypeError(f"{method} takes (d1, d2) or an order of the dimensions, got {args!r}")
        axis, mins = [0] * n, [0] * n
        for i, o in enumerate(order):  # as Halide's: old dimension i becomes dimension order[i]
            axis[o], mins[o] = self._axis[i], self._mins[i]
        return axis, mins

    def transpose(self, *args) -> None:
        """transpose(d1, d2) or transpose(order): old dimension i becomes dimension order[i], in place."""
        self._axis, self._mins = self._transposed(args, "transpose")

    def transposed(self, *args) -> Buffer:
        axis, mins = self._transposed(args, "transposed")
        return self._derived(self._shape_array(), axis, mins)

    def reverse_axes(self) -> Buffer:
        """A view with the dimensions in reverse order."""
        return self.transposed(list(range(self.dimensions() - 1, -1, -1)))

    # --- host memory ---
    def allocate(self) -> None:
        """New zeroed host memory with the buffer's strides (dropping any it had)."""
        self._need_defined("allocate")
        a = self._shape_array()
        below = -sum(min(0, (n - 1) * s) for n, s in zip(a.shape, a.strides) if n > 0) // a.itemsize
        storage = aligned_zeros((max(1, self.size_in_bytes() // a.itemsize),), a.dtype)
        self.device_free()
        self._array = np.lib.stride_tricks.as_strided(storage[below:], a.shape, a.strides)
        self._geom = None

    def deallocate(self) -> None:
        """Drop the host memory (and any device copy); the shape stays, as a bounds query's."""
        self._need_defined("deallocate")
        a = self._shape_array()
        self.device_free()
        self._geom = _geometry(self._type, a.shape, tuple(s // a.itemsize for s in a.strides))
        self._array = None

    def _host(self, what: str) -> np.ndarray:
        self._need_defined(what)
        if self._array is None:
            raise BufferValueError(f"Cannot convert a Buffer<> with null host ptr to a Python buffer: Buffer "
                                   f"{self._name} has no host memory ({what}); allocate() gives it some")
        return self._host_view()

    # --- device memory, as Halide's: a host and a device copy, each possibly the newer one ---
    def device_malloc(self, device_api=None, target=None) -> int:
        """Give the buffer a device copy (its contents undefined until copied or computed)."""
        from .codegen.gpu_runtime import DeviceCopy, cuda_device, span

        _check_device_api(device_api, target)
        if self._device_copy is None:
            self._dirty_without_device = False
            arr = self._host("device_malloc")
            device = cuda_device()
            offset, nbytes = span(arr)
            self._device_copy = DeviceCopy(device, 0, nbytes, offset, kept=True, elements=arr)
            self._device_copy.allocate()
        return 0

    def copy_to_device(self, device_api=None, target=None) -> int:
        """Copy the host contents to the device if they are newer (or there is no device copy yet);
        realizations then read and write the device copy, and copy nothing back until the host
        needs it (copy_to_host, element access, numpy). pyhalide's device API is CUDA."""
        fresh = self._device_copy is None
        self.device_malloc(device_api, target)
        c = self._device_copy
        if fresh or c.host_dirty:
            c.copy_to_device(self._host_address())
        self._host_dirty = False
        return 0

    def copy_to_host(self) -> int:
        c = self._device_copy
        if c is not None and c.device_dirty:
            c.copy_to_host(self._host_address())
        self._dirty_without_device = False  # (no device copy: nothing to copy)
        return 0

    def device_free(self) -> int:
        """Drop the device copy (without copying it back); its memory is freed once no view of
        this buffer holds it either."""
        c, self._device_copy = self._device_copy, None
        if c is not None:
            self._host_dirty = c.host_dirty
            c.free()
        return 0

    def device_deallocate(self) -> None:
        """Drop the device copy (this Buffer holds its only reference)."""
        self.device_free()

    def device_detach_native(self) -> int:
        """Halide's: forget a device handle wrapped with device_wrap_native. pyhalide wraps none,
        so there is nothing to detach unless the buffer has a device copy pyhalide made, which
        must be freed instead (as Halide asserts)."""
        if self._device_copy is not None:
            raise HalideError(f"Buffer {self._name}: only call device_detach_native on buffers wrapping a native "
                              "device handle via device_wrap_native; this one was allocated with device_malloc: "
                              "call device_free instead")
        return 0

    def device_sync(self, target=None) -> int:
        if self._device_copy is not None:
            self._device_copy.device.synchronize()
        return 0

    def has_device_allocation(self) -> bool:
        return self._device_copy is not None

    def host_dirty(self) -> bool:
        c = self._device_copy
        return c.host_dirty if c is not None else self._host_dirty

    def device_dirty(self) -> bool:
        c = self._device_copy
        return c.device_dirty if c is not None else self._dirty_without_device

    def set_host_dirty(self, dirty: bool = True) -> None:
        self._host_dirty = bool(dirty)
        if self._device_copy is not None:
            self._device_copy.host_dirty = bool(dirty)

    # set_device_dirty() on a Buffer with no device copy: marked as Halide's is, and a pipeline
    # given it refuses it (the newer values it says the device holds are nowhere)
    _dirty_without_device = False

    def set_device_dirty(self, dirty: bool = True) -> None:
        if self._device_copy is not None:
            self._device_copy.device_dirty = bool(dirty)
        else:
            self._dirty_without_device = bool(dirty)

    def _host_address(self) -> int:
        return self._array.__array_interface__["data"][0]

    def _host_view(self) -> np.ndarray:
        """The host array, brought up to date first if the device copy is newer."""
        if self._device_copy is not None and self._device_copy.device_dirty:
            self.copy_to_host()
        return self._array

    # --- numpy interop ---
    def numpy_view(self, reverse_axes: bool = True) -> np.ndarray:
        """A numpy view of the memory: axes in Halide's order reversed (the default), or in Halide's."""
        a = self._host("numpy_view")
        order = self._axis[::-1] if reverse_axes else self._axis
        return a if order == list(range(a.ndim)) else a.transpose(order)

    def __array__(self, dtype=None, copy=None):
        a = self.numpy_view()
        if dtype is not None and np.dtype(dtype) != a.dtype:
            if copy is False:
                raise ValueError(f"Buffer {self._name} holds {a.dtype}: a {np.dtype(dtype)} array needs a copy")
            return a.astype(dtype)
        return a.copy() if copy else a

    def to_numpy(self) -> np.ndarray:
        """np.asarray(buffer): the numpy view, axes reversed."""
        return self.numpy_view()

    def _halide_order(self, what: str) -> np.ndarray:
        """The host memory as numpy, axis d being Halide dimension d."""
        a = self._host(what)
        return a if self._axis == list(range(a.ndim)) else a.transpose(self._axis)

    def copy(self) -> Buffer:
        """A deep copy: new memory in the same storage order, holes compacted away."""
        b = Buffer.make_with_shape_of(self)
        b.copy_from(self)
        return b

    def copy_from(self, other: Buffer) -> None:
        """Copy other's values where the two buffers' coordinates overlap."""
        if not isinstance(other, Buffer):
            raise BufferTypeError(f"copy_from takes an hl.Buffer, got {other!r}")
        dst, src = self._halide_order("copy_from"), other._halide_order("copy_from")
        if other._type != self._type or src.ndim != dst.ndim:
            raise HalideError(f"copy_from: Buffer {self._name} ({self._type}, {dst.ndim} dimensions) cannot take "
                              f"the values of Buffer {other._name} ({other._type}, {src.ndim} dimensions)")
        di, si = [], []
        for d in range(dst.ndim):
            lo = max(self._mins[d], other._mins[d])
            hi = min(self._mins[d] + dst.shape[d], other._mins[d] + src.shape[d])
            if hi <= lo:
                return
            di.append(slice(lo - self._mins[d], hi - self._mins[d]))
            si.append(slice(lo - other._mins[d], hi - other._mins[d]))
        dst[tuple(di)] = src[tuple(si)]
        self.set_host_dirty()

    def _element(self, value):
        """value as this buffer's element type would hold it, refused (as Halide's bindings refuse)
        where the conversion is not exact for integers, or the value is no number."""
        t = self._type
        ok = isinstance(value, int | float | np.number | np.bool_) and not isinstance(
            value, complex | np.complexfloating)
        if ok and t.is_bool():
            return bool(value)
        if ok and t.is_float():
            try:
                return float(value)
            except OverflowError:
                pass
        elif ok and not isinstance(value, float):
            v = int(value)
            if t.min_value() <= v <= t.max_value():
                return v
        raise HalideError(f"Buffer {self._name} holds {t}: cannot store {value!r} ({type(value).__name__}) in it")

    def fill(self, value) -> Buffer:
        a = self._host("fill")
        with np.errstate(over="ignore"):
            a[...] = self._element(value)
        self.set_host_dirty()
        if self._device_copy is not None:
            self._device_copy.device_dirty = False
        return self

    def all_equal(self, value) -> bool:
        """Whether every element equals value (converted to the element type first)."""
        a = self._host("all_equal")
        with np.errstate(over="ignore"):
            v = a.dtype.type(self._element(value))
        return bool(np.all(a == v))

    def for_each_element(self, f) -> None:
        """Call f([x, y, ...]) at every coordinate, dimension 0 innermost."""
        self._need_defined("for_each_element")
        ranges = [range(m, m + self._dim_field("extent", d)) for d, m in enumerate(self._mins)]
        for pos in itertools.product(*reversed(ranges)):
            f(list(reversed(pos)))

    # --- element access: ints read/write values, Exprs make an Expr for the algorithm ---
    def _numpy_index(self, coords):
        n = len(self._axis)
        if len(coords) != n:
            raise BufferValueError(f"Incorrect number of dimensions: Buffer {self._name} has {n} dimensions, "
                                   f"indexed with {len(coords)}")
        idx = [0] * n
        a = self._array
        for d, c in enumerate(coords):
            i = int(c) - self._mins[d]
            extent = a.shape[self._axis[d]]
            if not 0 <= i < extent:
                raise BufferIndexError(f"Buffer {self._name}: index {int(c)} is out of bounds for axis {d} with "
                                       f"min={self._mins[d]}, extent={extent}")
            idx[self._axis[d]] = i
        return tuple(idx)

    def __getitem__(self, key):
        if isinstance(key, list):
            key = tuple(key)
        coords = key if isinstance(key, tuple) else (key,)
        if all(isinstance(c, int | np.integer) for c in coords):
            a = self._host("element access")
            return a[self._numpy_index(coords)].item()
        from .func import image_call

        self._need_defined("an image call")
        return image_call(self, key)

    def __setitem__(self, key, value):
        if isinstance(key, list):
            key = tuple(key)
        coords = key if isinstance(key, tuple) else (key,)
        if not all(isinstance(c, int | np.integer) for c in coords):
            raise BufferTypeError(f"Buffer {self._name}[...] = value takes integer coordinates, got {key!r}")
        a = self._host("element access")
        index = self._numpy_index(coords)
        with np.errstate(over="ignore"):
            a[index] = self._element(value)
        self.set_host_dirty()

    def __repr__(self):  # as Halide's bindings print it: [min, extent, stride] per dimension
        if self._type is None:
            return "<undefined halide.Buffer>"
        dims = ",".join(f"[{self._mins[d]},{self._dim_field('extent', d)},{self._dim_field('stride', d)}]"
                        for d in range(self.dimensions()))
        return f"<halide.Buffer of type {self._type} shape:[{dims}]>"


def _as_array(buffer) -> np.ndarray:
    """The ndarray sharing a buffer-protocol object's memory (refusing what has none to share)."""
    if isinstance(buffer, np.ndarray):
        return buffer
    if isinstance(buffer, Buffer):
        return buffer.numpy_view()
    if isinstance(buffer, np.generic):
        raise BufferError(f"Buffer(): a numpy scalar ({buffer!r}) has no memory to share; use np.array(value)")
    try:
        memoryview(buffer)
    except TypeError:
        if not hasattr(buffer, "__array_interface__"):
            raise BufferTypeError(
                "Buffer(): incompatible constructor arguments: Buffer(), Buffer(buffer), Buffer(ndarray or another "
                "buffer-protocol object, name='', reverse_axes=True), Buffer(type, sizes, name='') or "
                f"Buffer(type, sizes, storage_order, name=''); got {buffer!r}") from None
    return np.asarray(buffer)


def _storage_order(order, n: int) -> list[int]:
    if order is None:
        return list(range(n))
    order = _ints(order, "Buffer storage_order")
    if len(order) != n or sorted(order) != list(range(n)):
        raise BufferValueError(f"Buffer storage_order {order} is not an order of its {n} dimensions")
    return order


def _named(args: tuple, kwargs: dict, names: tuple) -> tuple:
    """Positional and keyword arguments (Halide's names) as one positional tuple."""
    if not kwargs:
        return args
    args = list(args)
    for name in names[len(args):]:
        if name not in kwargs:
            raise BufferTypeError(f"missing argument {name!r}")
        args.append(kwargs.pop(name))
    if kwargs:
        raise BufferTypeError(f"unexpected arguments {sorted(kwargs)}")
    return tuple(args)


def _check_device_api(device_api, target) -> None:
    """pyhalide's device API is CUDA: refuse another (a Target may stand in the device_api place)."""
    from .target import DeviceAPI, Target

    if isinstance(device_api, Target):
        device_api, target = None, device_api
    if device_api not in (None, DeviceAPI.CUDA, DeviceAPI.Default_GPU):
        raise HalideError(f"pyhalide's only device API is CUDA, not {device_api}")
    if target is not None and target.has_gpu_feature() and not target.has_feature("cuda"):
        raise HalideError(f"Target {target}: pyhalide's only device API is CUDA")
