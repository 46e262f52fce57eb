"""Compile LLVM IR for the host CPU and load it into one ORC JIT, with an object cache.

Objects are cached in memory and on disk (`~/.cache/pyhalide`, or $PYHALIDE_CACHE_DIR; set
PYHALIDE_DISK_CACHE=0 to turn the disk cache off), keyed by the IR text, the CPU name and
features, the LLVM version and the pyhalide version: loading a cached object costs under a
millisecond, so re-running a program or re-measuring a tuning candidate is cheap. An entry starts
with a header naming its key and the object's SHA-256; one that is truncated, empty, garbage,
another key's, or that fails to link is deleted and compiled again, so a damaged cache heals
itself. Entries are written to a temporary file, flushed, and renamed into place.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

from ..errors import CompileError
from . import calling_convention, heap, thread_pool

_lock = threading.Lock()
_state: dict = {}
_memory_cache: dict[str, bytes] = {}  # insertion order is recency: oldest first
_memory_cache_bytes = [0]
_MEMORY_CACHE_BYTES = 16 << 20
_library_counter = [0]


@dataclass
class HostTarget:
    cpu: str
    features: str
    triple: str


# LLVM command-line options set once per process, before the first compile (part of the object
# cache's key). Innermost loops start on a 64-byte boundary (LLVM's default is 16): a small hot
# loop that straddles a cache line runs up to 1.6x slower on Zen 3, and where it falls moves with
# any unrelated change to the code before it. histogram_equalize's histogram loop (21 bytes)
# straddled one: the app took 1.54x Halide's time, 1.03x with this.
LLVM_OPTIONS = ("-x86-experimental-pref-innermost-loop-alignment=6",)


def _init():
    if _state:
        return _state
    for option in LLVM_OPTIONS:
        llvm.set_option("pyhalide", option)
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    triple = llvm.get_process_triple()
    cpu = llvm.get_host_cpu_name()
    features = llvm.get_host_cpu_features().flatten()
    target = llvm.Target.from_triple(triple)
    _state["host"] = HostTarget(cpu, features, triple)
    _state["make_tm"] = lambda: target.create_target_machine(
        cpu=cpu, features=features, opt=3, jit=True, reloc="pic", codemodel="default"
    )
    _state["tm"] = _state["make_tm"]()
    # JITLink, not RuntimeDyld: it lays an object's sections out in one block, so the code's 32-bit
    # PC-relative references to its constant pools always reach. RuntimeDyld mapped each section
    # on its own and, once loaded libraries had fragmented the address space (a test process
    # that had loaded ten ahead-of-time objects), aborted the process on such a relocation out
    # of range (1 run in 4). JITLink also links faster: 0.47 ms against 0.68 for local_laplacian.
    _state["lljit"] = llvm.create_lljit_compiler(_state["tm"], use_jit_link=True)
    return _state


def llvm_lock() -> threading.Lock:
    """The lock every use of LLVM's process-wide state takes (this module's compiles too)."""
    return _lock


def initialize_all_targets() -> None:
    """Every CPU LLVM was built for, for object files of other targets (the lock held)."""
    _init()
    if "all_targets" not in _state:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        _state["all_targets"] = True


def host_target() -> HostTarget:
    with _lock:
        return _init()["host"]


# What `optimize` runs, part of the object cache's key: objects made by another pipeline are not
# reused (those of the loop vectorizer could be wrong).
OPTIMIZATION = "O3, LLVM's loop unroller and loop vectorizer off"


def optimize(ir_text: str):
    """Parse, verify and optimise (LLVM's O3 pipeline) a module for the host; returns the module."""
    with _lock:
        st = _init()
        try:
            mod = llvm.parse_assembly(ir_text)
            mod.verify()
        except RuntimeError as e:
            raise CompileError(f"LLVM rejected the generated IR: {e}") from None
        mod.triple = st["host"].triple
        run_optimizations(mod, st["tm"])
        return mod


def run_optimizations(mod, tm) -> None:
    """LLVM's O3 pipeline, as OPTIMIZATION says, on a parsed module for target machine tm."""
    mod.data_layout = str(tm.target_data)
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_unrolling = False  # pyhalide unrolls explicitly; this saves most of O3's time
    # Vectors are the schedule's to choose. LLVM 22's loop vectorizer also miscompiled a loop
    # storing through a folded index (x % 8, a sliding window's storage): it stored lanes
    # as if consecutive across the wrap. Off, the gallery's hand schedules ran no slower
    # (0.92x the time, geomean) and compile faster.
    pto.loop_vectorization = False
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)


def emit_assembly(ir_text: str) -> str:
    mod = optimize(ir_text)
    with _lock:
        return _state["tm"].emit_assembly(mod)


def cache_root() -> Path:
    """pyhalide's cache directory: $PYHALIDE_CACHE_DIR, else ~/.cache/pyhalide (compiled objects,
    tuning records, example inputs)."""
    return Path(os.environ.get("PYHALIDE_CACHE_DIR") or Path.home() / ".cache" / "pyhalide")


def _cache_dir() -> Path | None:
    if os.environ.get("PYHALIDE_DISK_CACHE", "1") == "0":
        return None
    path = cache_root() / "objects"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return path


_HEADER = b"pyhalide-object-1\0"  # then the 64-character key, the object's SHA-256, the object


def _object_key(ir_text: str) -> str:
    host = host_target()
    from .. import __version__

    return hashlib.sha256(
        "\0".join([ir_text, host.cpu, host.features, llvmlite.__version__, __version__, OPTIMIZATION,
                   *LLVM_OPTIONS]).encode()
    ).hexdigest()


def _read_cached(path: Path, key: str) -> bytes | None:
    """The object cached at path, if its header names this key and its checksum holds; an entry
    that is unreadable, truncated, foreign or corrupt is deleted (it is compiled again)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError:
        data = b""
    start = len(_HEADER) + 64 + 32
    obj = data[start:]
    if data[: len(_HEADER)] == _HEADER and data[len(_HEADER): len(_HEADER) + 64] == key.encode() and obj and \
            hashlib.sha256(obj).digest() == data[len(_HEADER) + 64: start]:
        return obj
    _discard(path)
    return None


def _discard(path: Path | None) -> None:
    if path is not None:
        try:
            path.unlink()
        except OSError:
            pass


def _write_cached(path: Path, key: str, obj: bytes) -> None:
    """Write atomically (a temporary file renamed over the entry: concurrent writers never leave a
    torn one) and durably (flushed to disk before the rename)."""
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(_HEADER + key.encode() + hashlib.sha256(obj).digest() + obj)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError:
        _discard(tmp)


def _object_for(ir_text: str, fresh: bool = False, disk: bool = True) -> tuple[bytes, Path | None]:
    """The object code of this IR (from memory, the disk cache, or compiled now; fresh: compiled
    now), and the cache entry it came from or went to."""
    key = _object_key(ir_text)
    cache = _cache_dir() if disk else None
    path = cache / f"{key}.o" if cache else None
    obj = None if fresh else _memory_cache.get(key)
    if obj is None and path is not None and not fresh:
        obj = _read_cached(path, key)
    if obj is None:
        mod = optimize(ir_text)
        with _lock:
            obj = _state["tm"].emit_object(mod)
        if path is not None:
            _write_cached(path, key, obj)
    _remember(key, obj)
    return obj, path


def clear_memory_cache() -> None:
    """Forget the objects kept in memory (benchmarks timing real compiles)."""
    with _lock:
        _memory_cache.clear()
        _memory_cache_bytes[0] = 0


def _remember(key: str, obj: bytes) -> None:
    """Keep recent objects in memory (least recently used out past _MEMORY_CACHE_BYTES)."""
    with _lock:
        old = _memory_cache.pop(key, None)
        _memory_cache_bytes[0] += len(obj) - (len(old) if old is not None else 0)
        _memory_cache[key] = obj
        while _memory_cache_bytes[0] > _MEMORY_CACHE_BYTES and len(_memory_cache) > 1:
            _memory_cache_bytes[0] -= len(_memory_cache.pop(next(iter(_memory_cache))))


@functools.cache
def _python_api() -> dict[str, int]:
    """This process's Python C API functions that generated code calls (calling_convention)."""
    return {name: ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value
            for name in calling_convention.PYTHON_API}


def _link(obj: bytes, symbols: tuple[str, ...], imports: bool, externs: dict):
    """Link an object into the JIT. With imports, it may call the runtime: the thread pool's
    entry point and the heap's malloc and free; `externs`: more functions by name -> address."""
    # before taking the lock: they link too
    runtime = {thread_pool.SYMBOL: thread_pool.address(), **heap.addresses(), **_python_api()} if imports else {}
    runtime.update(externs)
    with _lock:
        st = _init()
        _library_counter[0] += 1
        builder = llvm.JITLibraryBuilder().add_object_img(obj).add_current_process()
        for symbol in symbols:
            builder.export_symbol(symbol)
        for name, address in runtime.items():
            builder.import_symbol(name, address)
        return builder.link(st["lljit"], f"pyhalide_lib{_library_counter[0]}")


class JITFunction:
    """A loaded function: its address, kept valid while this object lives."""

    def __init__(self, ir_text: str, symbol: str, disk_cache: bool = True, imports: bool = True,
                 also: tuple[str, ...] = (), externs: dict | None = None):
        """disk_cache=False for code that holds this process's addresses: no other process can use it.
        imports=False for the runtime itself (thread pool, heap); `also`: more functions to find (`address_of`);
        `externs`: functions it calls that the process does not define, by name -> address."""
        obj, path = _object_for(ir_text, disk=disk_cache)
        symbols, externs = (symbol, *also), externs or {}
        try:
            self._tracker = _link(obj, symbols, imports, externs)
        except Exception:  # noqa: BLE001 - an object that passed its checksum but won't link: compile afresh
            _discard(path)
            obj, _ = _object_for(ir_text, fresh=True, disk=disk_cache)
            self._tracker = _link(obj, symbols, imports, externs)
        self.address = self._tracker[symbol]

    def address_of(self, name: str) -> int:
        return self._tracker[name]
