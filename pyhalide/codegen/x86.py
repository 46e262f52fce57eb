"""Vector loads and stores that are neither dense nor a broadcast, in the forms x86 runs fastest.

LLVM's generic lowering of a gather or scatter extracts a 64-bit address per lane; these forms
keep one base pointer and 32-bit indices, as Halide's x86 code generator does:
- a small constant stride (2 to 4): dense vector loads covering the span (none past it) and one
  shuffle of them;
- a quotient ramp (lane i at q + (r + i) / k, see lower_arithmetic): one dense load of the
  elements every remainder reads, the one more element lane n-1 reads, and a shuffle chosen
  by r;
- elements narrower than 32 bits (x86 gathers only 32- and 64-bit ones): a gather of the 32-bit
  words that start at the elements, truncated (a 256-entry uint16 table read per pixel: 0.15 ns
  an element instead of 0.5), where each word lies inside the buffer: always in the pipeline's
  own storage, which ends with padding for it (`WORD_PADDING`); in an input or output, a lane
  past the buffer's `last_word` reads the word ending at its last element, shifted (a buffer
  smaller than a word: lane by lane);
- other loads: a gather through a vector of 32-bit indices (vgatherdps: 16 lanes in one);
- but on CPUs whose gathers are slow (`SLOW_GATHERS`), both lane by lane;
- a constant-stride store: lane by lane at constant offsets from one address;
- other stores: a scatter through a vector of 32-bit indices.

And the pairwise 16-bit multiply-add (`dot_product_i16`, from lowering/dot_products.py) as
`pmaddwd` at the widest width the host has.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from llvmlite import ir as ll

from .. import ir
from ..lowering.lower_arithmetic import QUOTIENT_RAMP
from ..types import Type
from .jit import host_target
from .llvm_types import I1, I32, I64, PTR, VOID, llvm_type, type_suffix

if TYPE_CHECKING:
    from .llvm import CodeGen


WORD_PADDING = 4  # bytes past the last element of the pipeline's own storage of narrow types

# CPUs (LLVM's names) whose vector gathers lose to loading lane by lane. On AMD Zen 4, measured
# (`python -m benchmarks.unit_costs`, one thread): a table of uint8 or uint16 read per pixel
# takes 0.64-0.88x the gather's time lane by lane, one of 32-bit values 0.92x; camera_pipe 0.75x
# (two threads). Zen 1 to 3 gather no faster than Zen 4 (Agner Fog's tables). On Zen 5 the
# gather wins (0.21 ns a lane against 0.50 lane by lane, measured the same way).
SLOW_GATHERS = frozenset({"znver1", "znver2", "znver3", "znver4"})


@contextlib.contextmanager
def host_gathers_slow(slow: bool):
    """Compile, meanwhile, as if this CPU's gathers were slow (lane by lane) or not: to measure
    and test both forms on any CPU."""
    global SLOW_GATHERS
    saved, cpu = SLOW_GATHERS, host_target().cpu
    SLOW_GATHERS = saved | {cpu} if slow else saved - {cpu}
    try:
        yield
    finally:
        SLOW_GATHERS = saved


def load(cg: CodeGen, host, index: ir.Expr, t: Type, padded: bool = False, last_word=None):
    """A vector load of type t (in memory's representation) at a vector index; `padded`: the
    storage is followed by WORD_PADDING bytes of its own; `last_word`: else, the last element
    whose 32-bit word ends inside the buffer, where it is known."""
    b = cg.b
    if _small_stride(index):
        return _load_small_stride(cg, host, index, t)
    if isinstance(index, ir.Call) and index.name == QUOTIENT_RAMP:
        return _load_quotient_ramp(cg, host, t, *index.args)
    if cg.cpu in SLOW_GATHERS:
        if isinstance(index, ir.Ramp):  # (a stride _small_stride leaves: a column's rows, say)
            return _load_strided_lane_by_lane(cg, host, index, t)
        return _load_lane_by_lane(b, host, cg.expr(index), t)
    if t.element_of().bits < 32:
        lanes = cg.expr(index)
        if "+avx2" not in cg.cpu_features or (not padded and last_word is None):
            return _load_lane_by_lane(b, host, lanes, t)
        mem_vt = llvm_type(t, memory=True)
        if padded:
            return _narrowed(b, _gather_words(cg, host, lanes, t), t, mem_vt)
        # A lane past last_word reads the word that ends at the buffer's last element, and takes
        # its element out with a shift; a buffer of less than a word, lane by lane.
        with b.if_else(b.icmp_signed(">=", last_word, ll.Constant(I32, 0))) as (then, otherwise):
            with then:
                last = cg.splat(last_word, t.lanes)
                start = b.select(b.icmp_signed("<=", lanes, last), lanes, last)
                shift = b.mul(b.sub(lanes, start), cg.splat(ll.Constant(I32, t.element_of().bits), t.lanes))
                words = _narrowed(b, b.lshr(_gather_words(cg, host, start, t), shift), t, mem_vt)
                words_block = b.block
            with otherwise:
                each, each_block = _load_lane_by_lane(b, host, lanes, t), b.block
        v = b.phi(mem_vt)
        v.add_incoming(words, words_block)
        v.add_incoming(each, each_block)
        return v
    ptrs = _lane_pointers(b, host, cg.expr(index), t)
    mem_vt = llvm_type(t, memory=True)
    mask = _all_lanes(t.lanes)
    gather = cg.declare(f"llvm.masked.gather.{type_suffix(t)}.v{t.lanes}p0", mem_vt,
                        [ptrs.type, I32, mask.type, mem_vt])
    return b.call(gather, [ptrs, ll.Constant(I32, t.element_of().bytes()), mask, ll.Constant(mem_vt, ll.Undefined)])


def _narrowed(b, words, t: Type, mem_vt):
    """32-bit words cut to the elements of type t they start with (half floats: their bits)."""
    bits = ll.VectorType(ll.IntType(t.element_of().bits), t.lanes)
    narrow = b.trunc(words, bits)
    return narrow if bits == mem_vt else b.bitcast(narrow, mem_vt)


def _gather_words(cg: CodeGen, host, lanes, t: Type):
    """The 32-bit words that start at the elements of type t `lanes` index (vpgatherdd)."""
    b = cg.b
    words = ll.VectorType(I32, t.lanes)
    gather = cg.declare(f"llvm.masked.gather.v{t.lanes}i32.v{t.lanes}p0", words,
                        [ll.VectorType(PTR, t.lanes), I32, ll.VectorType(I1, t.lanes), words])
    ptrs = _lane_pointers(b, host, lanes, t)
    return b.call(gather, [ptrs, ll.Constant(I32, 1), _all_lanes(t.lanes), ll.Constant(words, ll.Undefined)])


def _load_strided_lane_by_lane(cg: CodeGen, host, index: ir.Ramp, t: Type):
    """Lane i at base + i * stride, each address stepped from the last in scalar registers (no
    vector of indices to take apart lane by lane)."""
    b, mem_t = cg.b, llvm_type(t.element_of(), memory=True)
    stride = cg.index64(index.stride)

    def addresses():
        ptr = b.gep(host, [cg.index64(index.base)], source_etype=mem_t)
        yield ptr
        for _ in range(1, t.lanes):
            ptr = b.gep(ptr, [stride], source_etype=mem_t)
            yield ptr

    return _load_lanes(b, addresses(), t)


def _load_lane_by_lane(b: ll.IRBuilder, host, lanes, t: Type):
    mem_t = llvm_type(t.element_of(), memory=True)
    return _load_lanes(b, (b.gep(host, [b.sext(b.extract_element(lanes, ll.Constant(I32, lane)), I64)],
                                 source_etype=mem_t) for lane in range(t.lanes)), t)


def _load_lanes(b: ll.IRBuilder, ptrs, t: Type):
    """The vector of type t whose lane i is the element at the i-th of `ptrs` (made one at a
    time, each just before its load)."""
    mem_t = llvm_type(t.element_of(), memory=True)
    v = ll.Constant(llvm_type(t, memory=True), ll.Undefined)
    for lane, ptr in enumerate(ptrs):
        v = b.insert_element(v, b.load(ptr, typ=mem_t, align=t.element_of().bytes()), ll.Constant(I32, lane))
    return v


def store(cg: CodeGen, host, index: ir.Expr, v, t: Type) -> None:
    """A vector store of v (type t, in memory's representation) at a vector index."""
    b = cg.b
    mem_t = llvm_type(t.element_of(), memory=True)
    align = t.element_of().bytes()
    stride = ir.const_int(index.stride) if isinstance(index, ir.Ramp) else None
    if stride is not None:
        base = b.gep(host, [cg.index64(index.base)], source_etype=mem_t)
        for lane in range(t.lanes):
            ptr = b.gep(base, [ll.Constant(I64, lane * stride)], source_etype=mem_t)
            b.store(b.extract_element(v, ll.Constant(I32, lane)), ptr, align=align)
        return
    ptrs = _lane_pointers(b, host, cg.expr(index), t)
    mask = _all_lanes(t.lanes)
    scatter = cg.declare(f"llvm.masked.scatter.{type_suffix(t)}.v{t.lanes}p0", VOID,
                         [v.type, ptrs.type, I32, mask.type])
    b.call(scatter, [v, ptrs, ll.Constant(I32, align), mask])


def _load_small_stride(cg: CodeGen, host, index: ir.Ramp, t: Type):
    """Lanes base, base + k, ...: the span they cover, loaded densely, and one shuffle, which x86
    does with two-source permutes (vpermt2ps)."""
    b = cg.b
    k, n = ir.const_int(index.stride), t.lanes
    base = b.gep(host, [cg.index64(index.base)], source_etype=llvm_type(t.element_of(), memory=True))
    return _pick_from_span(b, base, t, [k * i for i in range(n)])


def _pick_from_span(b: ll.IRBuilder, base, t: Type, elements: list[int]):
    """Lane i: element elements[i] after base. The span up to the largest is loaded in dense
    vectors of the widest power-of-two width it holds (the last moved back to end at that
    element, so nothing past the access is read), joined, and picked by one shuffle."""
    mem_t = llvm_type(t.element_of(), memory=True)
    span = max(elements) + 1
    width = min(t.lanes, 1 << (span.bit_length() - 1))
    starts = [min(s, span - width) for s in range(0, span, width)]
    chunks = [b.load(b.gep(base, [ll.Constant(I64, s)], source_etype=mem_t), typ=ll.VectorType(mem_t, width),
                     align=t.element_of().bytes()) for s in starts]
    joined = _concat(b, chunks) if len(chunks) > 1 else chunks[0]
    picks = []
    for e in elements:  # element e is in the last chunk starting at or before it
        c = max(j for j, s in enumerate(starts) if s <= e)
        picks.append(c * width + e - starts[c])
    undef = ll.Constant(joined.type, ll.Undefined)
    return b.shuffle_vector(joined, undef, ll.Constant(ll.VectorType(I32, len(picks)), picks))


def _small_stride(index: ir.Expr) -> bool:
    k = ir.const_int(index.stride) if isinstance(index, ir.Ramp) else None
    return k is not None and 2 <= k <= 4 and k * index.lanes <= 256


def _load_quotient_ramp(cg: CodeGen, host, t: Type, q: ir.Expr, r: ir.Expr, k: ir.Expr):
    """A constant r: the elements read and a shuffle. Otherwise elements q .. q + n/k - 1 are
    read whatever r is; element q + n/k only when r > 0, so it is loaded from the address lane
    n-1 really reads (never past the access), and the shuffle is selected by r."""
    b = cg.b
    n, k = t.lanes, ir.const_int(k)
    mem_t = llvm_type(t.element_of(), memory=True)
    align = t.element_of().bytes()
    known = ir.const_int(r)
    if known is not None:  # the loop is versioned on the phase: exactly the elements read, one shuffle
        base = b.gep(host, [cg.index64(q)], source_etype=mem_t)
        return _pick_from_span(b, base, t, [(known + i) // k for i in range(n)])
    q, r = cg.expr(q), cg.expr(r)
    dense = b.load(b.gep(host, [b.sext(q, I64)], source_etype=mem_t), typ=ll.VectorType(mem_t, n // k), align=align)
    last = b.add(q, b.udiv(b.add(r, ll.Constant(r.type, n - 1)), ll.Constant(r.type, k)))
    tail = b.load(b.gep(host, [b.sext(last, I64)], source_etype=mem_t), typ=mem_t, align=align)
    span = ll.VectorType(I32, n // k + 1)
    wide = b.shuffle_vector(dense, ll.Constant(dense.type, ll.Undefined), ll.Constant(span, [*range(n // k), 0]))
    wide = b.insert_element(wide, tail, ll.Constant(I32, n // k))
    undef = ll.Constant(wide.type, ll.Undefined)
    v = None
    for rem in reversed(range(k)):
        picked = b.shuffle_vector(wide, undef, ll.Constant(ll.VectorType(I32, n), [(rem + i) // k for i in range(n)]))
        v = picked if v is None else b.select(b.icmp_signed("==", r, ll.Constant(r.type, rem)), picked, v)
    return v


def _lane_pointers(b: ll.IRBuilder, host, index, t: Type):
    """One getelementptr with the 32-bit index vector: a vector of element addresses."""
    ptrs = b.gep(host, [index], source_etype=llvm_type(t.element_of(), memory=True))
    ptrs.type = ll.VectorType(PTR, t.lanes)  # llvmlite types a vector-index GEP as one pointer
    return ptrs


def _all_lanes(lanes: int):
    return ll.Constant(ll.VectorType(I1, lanes), [1] * lanes)


# (i32 lanes, intrinsic, LLVM feature it needs): pmaddwd at each vector width, widest first.
_PMADDWD = ((16, "llvm.x86.avx512.pmaddw.d.512", "+avx512bw"), (8, "llvm.x86.avx2.pmadd.wd", "+avx2"),
            (4, "llvm.x86.sse2.pmadd.wd", ""))


def dot_product_i16(cg: CodeGen, e: ir.Call):
    """Lane i of a*b + c*d (Int16 arguments, Int32 lanes, a multiple of 4): a and c interleaved,
    b and d interleaved, then `pmaddwd` on each native-width piece."""
    b = cg.b
    a_, b_, c_, d_ = (cg.expr(arg) for arg in e.args)
    n = e.type.lanes
    pairs = ll.Constant(ll.VectorType(I32, 2 * n), [i // 2 + (i % 2) * n for i in range(2 * n)])
    ac, bd = b.shuffle_vector(a_, c_, pairs), b.shuffle_vector(b_, d_, pairs)
    features = cg.cpu_features
    pieces, start = [], 0
    while start < n:
        width, name = next((w, nm) for w, nm, f in _PMADDWD if w <= n - start and (not f or f in features))
        half = ll.VectorType(ll.IntType(16), 2 * width)
        fn = cg.declare(name, ll.VectorType(I32, width), [half, half])
        window = ll.Constant(ll.VectorType(I32, 2 * width), list(range(2 * start, 2 * (start + width))))
        undef = ll.Constant(ac.type, ll.Undefined)
        pieces.append(b.call(fn, [b.shuffle_vector(ac, undef, window), b.shuffle_vector(bd, undef, window)]))
        start += width
    return _concat(b, pieces)


def _concat(b: ll.IRBuilder, vectors: list):
    """Vectors of one element type (of any widths) as one, in order."""
    out = vectors[0]
    for v in vectors[1:]:
        p, q = out.type.count, v.type.count
        m = max(p, q)
        out, v = (_padded(b, x, m) for x in (out, v))
        out = b.shuffle_vector(out, v, ll.Constant(ll.VectorType(I32, p + q), [*range(p), *range(m, m + q)]))
    return out


def _padded(b: ll.IRBuilder, v, lanes: int):
    """v with undefined lanes appended up to `lanes` (shufflevector joins equal widths only)."""
    n = v.type.count
    if n == lanes:
        return v
    undef = ll.Constant(v.type, ll.Undefined)
    return b.shuffle_vector(v, undef, ll.Constant(ll.VectorType(I32, lanes), [*range(n), *[0] * (lanes - n)]))
