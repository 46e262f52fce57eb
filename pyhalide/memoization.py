"""The memoization cache of Func.memoize(): a memoized Func's computed values kept across
realizations, keyed on what they depend on, as Halide's runtime keeps them.

The generated code calls `LOOKUP` before a memoized Func's production and `STORE` after it
(lowering/memoization.py), each with the Func's identity (in one compilation of its pipeline),
the key values (the realized box, the Params and buffer dimensions its computation reads,
memoize_tag's tags) and a halide_buffer_t per buffer of the Func. A hit
copies the kept bytes into the buffers and the production is skipped. The cache holds at most
`set_size` bytes (Halide's default, 1 MiB), dropping the least recently used entries; entries
stored with an eviction key (`memoize(hl.EvictionKey(e))`) can be dropped with `evict`.

Like Halide's, the key does not cover the contents of Buffers the algorithm names: change one
and the same compiled pipeline may return an earlier result. Input images (ImageParams) are refused unless a
memoize_tag stands for them.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from collections import OrderedDict

from .extern import HalideBuffer, c_type

# The functions the generated code calls, a number after each name (one per call site: the key's
# values differ in number and type between memoized Funcs)
LOOKUP = "pyhalide_memoization_cache_lookup"  # int (identity, keys..., buffers...): 1 on a hit, else 0
STORE = "pyhalide_memoization_cache_store"  # int (identity, has eviction key, eviction key, keys..., buffers...)
SYMBOLS = (LOOKUP, STORE)

_DEFAULT_SIZE = 1 << 20
_U64 = (1 << 64) - 1  # eviction keys as Halide's uint64_t


class _Cache:
    def __init__(self):
        self.entries: OrderedDict = OrderedDict()  # key -> ([bytes per buffer], eviction key or None)
        self.max_bytes = _DEFAULT_SIZE
        self.bytes = 0
        self.lock = threading.Lock()

    def lookup(self, key, buffers) -> int:
        with self.lock:
            entry = self.entries.get(key)
            if entry is None or [len(b) for b in entry[0]] != [_size(buf) for buf in buffers]:
                return 0
            self.entries.move_to_end(key)
            for data, buf in zip(entry[0], buffers):
                ctypes.memmove(buf.host, data, len(data))
            return 1

    def store(self, key, buffers, eviction_key) -> None:
        data = [ctypes.string_at(buf.host, n) if (n := _size(buf)) else b"" for buf in buffers]
        size = sum(map(len, data))
        with self.lock:
            self._drop(key)
            if size > self.max_bytes:
                return
            self.entries[key] = (data, eviction_key)
            self.bytes += size
            self._prune()

    def _drop(self, key) -> None:
        entry = self.entries.pop(key, None)
        if entry is not None:
            self.bytes -= sum(map(len, entry[0]))

    def _prune(self) -> None:
        while self.bytes > self.max_bytes and self.entries:
            self._drop(next(iter(self.entries)))


_cache = _Cache()


def _size(buf: HalideBuffer) -> int:
    """The bytes a dense buffer spans: from its first element past its last."""
    elements = 1
    for d in range(buf.dimensions):
        extent, stride = buf.dim[d].extent, buf.dim[d].stride
        if extent <= 0:
            return 0
        elements += (extent - 1) * abs(stride)
    return elements * max(buf.type.bits // 8, 1) * max(buf.type.lanes, 1)


def set_size(max_bytes: int) -> None:
    """The most bytes the cache keeps (Halide's halide_memoization_cache_set_size); 0: the
    default, 1 MiB."""
    if not isinstance(max_bytes, int) or max_bytes < 0:
        raise ValueError(f"memoization cache size must be a non-negative int, got {max_bytes!r}")
    with _cache.lock:
        _cache.max_bytes = max_bytes or _DEFAULT_SIZE
        _cache._prune()


def evict(eviction_key: int) -> None:
    """Drop the entries stored with this eviction key (Halide's halide_memoization_cache_evict)."""
    key = int(eviction_key) & _U64
    with _cache.lock:
        for k in [k for k, (_, ek) in _cache.entries.items() if ek == key]:
            _cache._drop(k)


def cleanup() -> None:
    """Drop every entry (Halide's halide_memoization_cache_cleanup)."""
    with _cache.lock:
        _cache.entries.clear()
        _cache.bytes = 0


def entries() -> int:
    """How many results the cache holds."""
    return len(_cache.entries)


_entries: dict = {}  # (symbol, argument types) -> the ctypes entry, alive as long as the process


def address(symbol: str, arg_types: list) -> int:
    """The address the generated code calls for a LOOKUP or STORE symbol with these argument types
    (the identity, for STORE the eviction key's two, the key values, then the buffers)."""
    symbol = LOOKUP if symbol.startswith(LOOKUP) else STORE
    key = (symbol, tuple(arg_types))
    entry = _entries.get(key)
    if entry is None:
        n_buffers = sum(1 for t in arg_types if t.is_handle()) - 1  # (the identity is a string)
        scalars = [c_type(t) for t in arg_types[1:len(arg_types) - n_buffers]]
        signature = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, *scalars,
                                     *[ctypes.POINTER(HalideBuffer)] * n_buffers)

        def call(identity, *args):
            values, buffers = args[:len(args) - n_buffers], [b.contents for b in args[len(args) - n_buffers:]]
            values = [struct.pack("<d", v) if isinstance(v, float) else v for v in values]  # (-0.0 is not 0.0)
            if symbol == LOOKUP:
                return _cache.lookup((identity, *values), buffers)
            has_eviction_key, eviction_key, *values = values
            _cache.store((identity, *values), buffers, eviction_key & _U64 if has_eviction_key else None)
            return 0

        entry = _entries[key] = signature(call)
    return ctypes.cast(entry, ctypes.c_void_p).value
