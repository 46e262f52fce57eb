"""pyhalide's heap for Func storage: LLVM IR, compiled once per process.

A pipeline called again and again (a benchmark, the tuner's measurements, a video frame by
frame) allocates the same large buffers every call. glibc hands those back to the system when
they are freed (big blocks are mmapped; a big free at the top of the heap trims it), so every
call pays page faults again: a quarter of local_laplacian's time at one thread. Here a freed
block of at least `CACHE_MIN` bytes is kept, up to `limit()` bytes in all, and handed out again
for a request it covers within twice its size; the oldest kept blocks go back first when room
is needed.

- Only storage allocated outside parallel loops is kept (`shared`): what a parallel task allocates
  is its thread's, and glibc's per-thread arenas hand it back to the same thread, still in that
  core's cache (kept here, it went to whichever thread asked next: camera_pipe's and
  bilateral_grid's per-strip buffers ran 2-9% slower).
- Every block is 64-byte aligned (a cache line, an AVX-512 vector), with its capacity and whether
  it is shared in a 64-byte header before it, so `pyhalide_free` needs only the pointer.
- One spin lock guards the cache; only allocations of `CACHE_MIN` bytes or more take it.
- Fork: a child keeps the parent's cached blocks (its own copies) and resets the lock, which a
  parent's thread may have held.
"""

from __future__ import annotations

import ctypes
import os
import threading

from llvmlite import ir as ll

from .llvm_types import I32, I64, PTR, VOID

MALLOC, FREE = "pyhalide_malloc", "pyhalide_free"
_RELEASE, _CACHED, _RESET = "pyhalide_heap_release", "pyhalide_heap_cached", "pyhalide_heap_reset_in_child"

CACHE_MIN = 128 * 1024  # glibc's own threshold for handing a block to mmap
SLOTS = 64
HEADER = ALIGN = 64

_lock = threading.Lock()
_heap: dict = {}


def limit() -> int:
    """The most bytes kept for reuse: an eighth of the machine's memory, at most 4 GiB."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(CACHE_MIN, min(physical // 8, 4 << 30))


def addresses() -> dict[str, int]:
    """The addresses of pyhalide_malloc and pyhalide_free (compiled on first use, and kept)."""
    with _lock:
        if "fn" not in _heap:
            from .jit import JITFunction

            fn = JITFunction(module_ir(limit()), MALLOC, imports=False, also=(FREE, _RELEASE, _CACHED, _RESET))
            reset = ctypes.CFUNCTYPE(None)(fn.address_of(_RESET))
            os.register_at_fork(after_in_child=reset)
            _heap["fn"], _heap["reset"] = fn, reset
        fn = _heap["fn"]
        return {MALLOC: fn.address, FREE: fn.address_of(FREE)}


def _function(name: str, restype, *argtypes):
    addresses()
    return ctypes.CFUNCTYPE(restype, *argtypes)(_heap["fn"].address_of(name))


def release() -> None:
    """Give every kept block back to the system (pipelines running now keep theirs)."""
    _function(_RELEASE, None)()


def cached_bytes() -> int:
    """The bytes kept for reuse now."""
    return _function(_CACHED, ctypes.c_int64)()


def module_ir(limit_bytes: int, x86: bool = True, size_type: ll.IntType = I64) -> str:
    """The heap's module; for an object file, the CPU may not be an x86 one and `size_t` may be 32 bits."""
    m = ll.Module("pyhalide_heap")

    def global_array(name: str, ty: ll.Type) -> ll.GlobalVariable:
        g = ll.GlobalVariable(m, ll.ArrayType(ty, SLOTS), name)
        g.linkage = "internal"
        g.initializer = ll.Constant(ll.ArrayType(ty, SLOTS), None)
        return g

    def global_int(name: str, ty: ll.Type) -> ll.GlobalVariable:
        g = ll.GlobalVariable(m, ty, name)
        g.linkage = "internal"
        g.initializer = ll.Constant(ty, 0)
        return g

    slot_ptr, slot_size, slot_stamp = (global_array("slot_ptr", PTR), global_array("slot_size", I64),
                                       global_array("slot_stamp", I64))
    lock_word, cached, clock = global_int("lock", I32), global_int("cached", I64), global_int("clock", I64)
    aligned_alloc = ll.Function(m, ll.FunctionType(PTR, [size_type, size_type]), "aligned_alloc")
    free = ll.Function(m, ll.FunctionType(VOID, [PTR]), "free")

    def c64(v: int) -> ll.Constant:
        return ll.Constant(I64, v)

    def slot(b, array, i):
        ptr = b.gep(array, [i], inbounds=True, source_etype=array.value_type.element)
        ptr.type = PTR  # opaque, as the values stored through it expect
        return ptr

    def header(b, p):
        return b.gep(p, [c64(-HEADER)], source_etype=ll.IntType(8))

    # -- the lock
    acquire = ll.Function(m, ll.FunctionType(VOID, []), "acquire")
    acquire.linkage = "internal"
    entry, retry = acquire.append_basic_block("entry"), acquire.append_basic_block("retry")
    b = ll.IRBuilder(entry)
    b.branch(retry)
    b.position_at_end(retry)
    won = b.extract_value(b.cmpxchg(lock_word, ll.Constant(I32, 0), ll.Constant(I32, 1), "acquire", "monotonic"), 1)
    got = acquire.append_basic_block("got")
    wait = acquire.append_basic_block("wait")
    b.cbranch(won, got, wait)
    b.position_at_end(wait)
    if x86:  # a spin-wait hint; elsewhere the loop just retries
        b.call(ll.Function(m, ll.FunctionType(VOID, []), "llvm.x86.sse2.pause"), [])
    b.branch(retry)
    b.position_at_end(got)
    b.ret_void()

    def release_lock(b):
        b.store_atomic(ll.Constant(I32, 0), lock_word, "release", 4)

    def drop_slot(b, i) -> None:
        """Free slot i's block and empty the slot (the lock held)."""
        s = b.load(slot(b, slot_size, i), typ=I64)
        b.call(free, [header(b, b.load(slot(b, slot_ptr, i), typ=PTR))])
        b.store(ll.Constant(PTR, None), slot(b, slot_ptr, i))
        b.store(c64(0), slot(b, slot_size, i))
        b.store(b.sub(b.load(cached, typ=I64), s), cached)

    def each_slot(fn, b, i, name: str, body) -> None:
        """for i in range(SLOTS) (i: a counter allocated in the entry block): body(b, i), which
        leaves b in a block that goes on to the next."""
        b.store(c64(0), i)
        head, step, done = (fn.append_basic_block(f"{name}.{n}") for n in ("head", "step", "done"))
        b.branch(head)
        b.position_at_end(head)
        iv = b.load(i, typ=I64)
        body_block = fn.append_basic_block(f"{name}.body")
        b.cbranch(b.icmp_signed("<", iv, c64(SLOTS)), body_block, done)
        b.position_at_end(body_block)
        body(b, iv)
        b.branch(step)
        b.position_at_end(step)
        b.store(b.add(b.load(i, typ=I64), c64(1)), i)
        b.branch(head)
        b.position_at_end(done)

    # -- pyhalide_malloc(size, shared): a kept block covering size within twice it, else a new one
    malloc = ll.Function(m, ll.FunctionType(PTR, [I64, I32]), MALLOC)
    size, shared = malloc.args
    b = ll.IRBuilder(malloc.append_basic_block("entry"))
    best, best_size, i = (b.alloca(I64, name=n) for n in ("best", "best_size", "i"))
    too_big = malloc.append_basic_block("too_big")
    sized = malloc.append_basic_block("sized")
    b.cbranch(b.icmp_unsigned(">", size, c64(1 << 62)), too_big, sized)
    b.position_at_end(too_big)
    b.ret(ll.Constant(PTR, None))
    b.position_at_end(sized)
    at_least_one = b.select(b.icmp_unsigned("<", size, c64(1)), c64(1), size)
    cap = b.and_(b.add(at_least_one, c64(ALIGN - 1)), c64(-ALIGN))
    search, fresh = malloc.append_basic_block("search"), malloc.append_basic_block("fresh")
    is_shared = b.icmp_unsigned("!=", shared, ll.Constant(I32, 0))
    b.cbranch(b.and_(is_shared, b.icmp_unsigned(">=", cap, c64(CACHE_MIN))), search, fresh)
    b.position_at_end(search)
    b.call(acquire, [])
    b.store(c64(-1), best)
    b.store(c64(-1), best_size)  # unsigned: the largest

    def consider(b, i):
        s = b.load(slot(b, slot_size, i), typ=I64)
        fits = b.and_(b.icmp_unsigned(">=", s, cap), b.icmp_unsigned("<=", s, b.shl(cap, c64(1))))
        better = b.and_(fits, b.icmp_unsigned("<", s, b.load(best_size, typ=I64)))
        b.store(b.select(better, i, b.load(best, typ=I64)), best)
        b.store(b.select(better, s, b.load(best_size, typ=I64)), best_size)

    each_slot(malloc, b, i, "scan", consider)
    found, missed = malloc.append_basic_block("found"), malloc.append_basic_block("missed")
    k = b.load(best, typ=I64)
    b.cbranch(b.icmp_signed(">=", k, c64(0)), found, missed)
    b.position_at_end(found)
    p = b.load(slot(b, slot_ptr, k), typ=PTR)
    b.store(ll.Constant(PTR, None), slot(b, slot_ptr, k))
    b.store(c64(0), slot(b, slot_size, k))
    b.store(b.sub(b.load(cached, typ=I64), b.load(best_size, typ=I64)), cached)
    release_lock(b)
    b.ret(p)
    b.position_at_end(missed)
    release_lock(b)
    b.branch(fresh)
    b.position_at_end(fresh)
    base = b.call(aligned_alloc, [ll.Constant(size_type, ALIGN), b.trunc(b.add(cap, c64(HEADER)), size_type)
                                  if size_type.width < 64 else b.add(cap, c64(HEADER))])
    failed, ok = malloc.append_basic_block("failed"), malloc.append_basic_block("ok")
    b.cbranch(b.icmp_unsigned("==", base, ll.Constant(PTR, None)), failed, ok)
    b.position_at_end(failed)
    b.ret(ll.Constant(PTR, None))
    b.position_at_end(ok)
    b.store(cap, base)
    b.store(b.zext(shared, I64), b.gep(base, [c64(1)], source_etype=I64))
    b.ret(b.gep(base, [c64(HEADER)], source_etype=ll.IntType(8)))

    # -- pyhalide_free(p): keep a large block (making room by dropping the oldest), else free it
    free_fn = ll.Function(m, ll.FunctionType(VOID, [PTR]), FREE)
    (p,) = free_fn.args
    entry, given, drop, keep = (free_fn.append_basic_block(n) for n in ("entry", "given", "drop", "keep"))
    b = ll.IRBuilder(entry)
    empty, oldest, oldest_stamp, i = (b.alloca(I64, name=n) for n in ("empty", "oldest", "oldest_stamp", "i"))
    nothing = free_fn.append_basic_block("nothing")
    b.cbranch(b.icmp_unsigned("==", p, ll.Constant(PTR, None)), nothing, given)
    b.position_at_end(nothing)
    b.ret_void()
    b.position_at_end(given)
    cap = b.load(header(b, p), typ=I64)
    private = b.icmp_unsigned("==", b.load(b.gep(header(b, p), [c64(1)], source_etype=I64), typ=I64), c64(0))
    small = b.icmp_unsigned("<", cap, c64(CACHE_MIN))
    b.cbranch(b.or_(b.or_(private, small), b.icmp_unsigned(">", cap, c64(limit_bytes))), drop, keep)
    b.position_at_end(drop)
    b.call(free, [header(b, p)])
    b.ret_void()
    b.position_at_end(keep)
    b.call(acquire, [])
    again = free_fn.append_basic_block("again")
    b.branch(again)
    b.position_at_end(again)  # find an empty slot and the oldest full one
    b.store(c64(-1), empty)
    b.store(c64(-1), oldest)
    b.store(c64(-1), oldest_stamp)

    def survey(b, i):
        s = b.load(slot(b, slot_size, i), typ=I64)
        is_empty = b.icmp_unsigned("==", s, c64(0))
        first_empty = b.and_(is_empty, b.icmp_signed("<", b.load(empty, typ=I64), c64(0)))
        b.store(b.select(first_empty, i, b.load(empty, typ=I64)), empty)
        stamp = b.load(slot(b, slot_stamp, i), typ=I64)
        older = b.and_(b.not_(is_empty), b.icmp_unsigned("<", stamp, b.load(oldest_stamp, typ=I64)))
        b.store(b.select(older, i, b.load(oldest, typ=I64)), oldest)
        b.store(b.select(older, stamp, b.load(oldest_stamp, typ=I64)), oldest_stamp)

    each_slot(free_fn, b, i, "survey", survey)
    e = b.load(empty, typ=I64)
    room = b.icmp_unsigned("<=", b.add(b.load(cached, typ=I64), cap), c64(limit_bytes))
    store, evict = free_fn.append_basic_block("store"), free_fn.append_basic_block("evict")
    b.cbranch(b.and_(b.icmp_signed(">=", e, c64(0)), room), store, evict)
    b.position_at_end(store)
    b.store(p, slot(b, slot_ptr, e))
    b.store(cap, slot(b, slot_size, e))
    tick = b.add(b.load(clock, typ=I64), c64(1))
    b.store(tick, clock)
    b.store(tick, slot(b, slot_stamp, e))
    b.store(b.add(b.load(cached, typ=I64), cap), cached)
    release_lock(b)
    b.ret_void()
    b.position_at_end(evict)  # no room: the oldest goes (there is one: cap alone fits the limit)
    o = b.load(oldest, typ=I64)
    drop_slot(b, o)
    b.branch(again)

    # -- pyhalide_heap_release(): every kept block back to the system
    release_fn = ll.Function(m, ll.FunctionType(VOID, []), _RELEASE)
    b = ll.IRBuilder(release_fn.append_basic_block("entry"))
    i = b.alloca(I64, name="i")
    b.call(acquire, [])

    def drop_if_full(b, i):
        full = b.icmp_unsigned("!=", b.load(slot(b, slot_size, i), typ=I64), c64(0))
        with b.if_then(full):
            drop_slot(b, i)

    each_slot(release_fn, b, i, "drop", drop_if_full)
    release_lock(b)
    b.ret_void()

    cached_fn = ll.Function(m, ll.FunctionType(I64, []), _CACHED)
    b = ll.IRBuilder(cached_fn.append_basic_block("entry"))
    b.call(acquire, [])
    n = b.load(cached, typ=I64)
    release_lock(b)
    b.ret(n)

    reset = ll.Function(m, ll.FunctionType(VOID, []), _RESET)
    b = ll.IRBuilder(reset.append_basic_block("entry"))
    b.store(ll.Constant(I32, 0), lock_word)
    b.ret_void()
    return str(m)
