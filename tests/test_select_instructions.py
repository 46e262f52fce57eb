"""Instruction selection (lowering/select_instructions.py): sums of 16-bit products run as x86's
pmaddwd / vpdpwssd, saturating arithmetic as vpaddusb and its kin. Bit-exact against numpy for any
mix of operand types, constants, scalars and clamps, at every vector width, and the instructions
are really there."""

from __future__ import annotations

import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import pyhalide as hl
from pyhalide.codegen.jit import host_target
from pyhalide.lowering.select_instructions import DOT_PRODUCT_I16

N = 67  # not a multiple of any vector width: tails run too

_DTYPES = {"int16": hl.Int(16), "int8": hl.Int(8), "uint8": hl.UInt(8), "uint16": hl.UInt(16)}


def _operand(draw, rng, x, inputs):
    """A factor: a widened input of some narrow type, a constant, or a scalar Param."""
    kind = draw(st.sampled_from(["input", "input", "const", "param"]))
    if kind == "const":
        value = draw(st.sampled_from([-32768, -1, 0, 1, 3, 32767, 40000]))  # 40000 does not fit 16 bits
        return hl.i32(value), np.int64(value)
    if kind == "param":
        value = draw(st.integers(-32768, 32767))
        inputs.append(value)
        p = hl.Param(hl.Int(16), f"p{len(inputs)}", value)
        return hl.cast(hl.Int(32), p), np.int64(value)
    dtype = draw(st.sampled_from(list(_DTYPES)))
    info = np.iinfo(dtype)
    data = rng.integers(info.min, info.max, N, endpoint=True, dtype=np.int64).astype(dtype)
    data[: 3] = [info.min, info.max, info.min]  # the extremes, where a pair's sum wraps
    inputs.append(data)
    buf = hl.Buffer(data, f"in{len(inputs)}")
    return hl.cast(hl.Int(32), buf[x]), data.astype(np.int64)


@st.composite
def sums(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = hl.Var("x")
    inputs: list = []
    expr, ref = None, np.zeros(N, np.int64)
    for _ in range(draw(st.integers(1, 5))):
        if draw(st.booleans()):
            (a, ra), (b, rb) = _operand(draw, rng, x, inputs), _operand(draw, rng, x, inputs)
            term, rterm = a * b, ra * rb
        else:
            term, rterm = _operand(draw, rng, x, inputs)
        expr = term if expr is None else expr + term
        ref = ref + rterm
    lanes = draw(st.sampled_from([4, 8, 12, 16, 20, 32, 64]))
    return x, expr, ref, lanes, inputs


def _wrapped_int32(values: np.ndarray) -> np.ndarray:
    return ((values + 2**31) % 2**32 - 2**31).astype(np.int32)


@settings(max_examples=60, deadline=None)
@given(sums())
def test_sums_of_16_bit_products_are_bit_exact(case):
    x, expr, ref, lanes, _inputs = case
    f = hl.Func("f")
    f[x] = expr
    f.vectorize(x, lanes, hl.TailStrategy.GuardWithIf)
    out = f.realize([N])
    np.testing.assert_array_equal(np.asarray(out), _wrapped_int32(np.broadcast_to(ref, (N,))))


def _colour_matrix_func(lanes: int):
    """camera_pipe's colour correction, reduced: a 3x4 int16 matrix applied to int16 channels."""
    x = hl.Var("x")
    rng = np.random.default_rng(1)
    rgb = rng.integers(-1024, 1024, (3, 64), dtype=np.int16)
    m = rng.integers(-600, 600, (3, 4), dtype=np.int16)  # m[c, j] in numpy is mat[j, c]
    planes = [hl.Buffer(np.ascontiguousarray(rgb[k]), f"plane{k}") for k in range(3)]
    mat = hl.Buffer(m, "m")
    f = hl.Func("corrected")
    i32 = hl.Int(32)
    row = hl.Expr(0)  # Expr coordinates: loads in the pipeline, not values read now

    def coeff(j):
        return mat[hl.Expr(j), row]

    f[x] = (hl.cast(i32, coeff(3)) + coeff(0) * hl.cast(i32, planes[0][x])
            + coeff(1) * hl.cast(i32, planes[1][x]) + coeff(2) * hl.cast(i32, planes[2][x]))
    f.bound(x, 0, 64).vectorize(x, lanes)  # whole vectors: one loop, no partitioned tail
    ref = m[0, 3].astype(np.int64) + sum(m[0, k].astype(np.int64) * rgb[k] for k in range(3))
    return f, ref


def test_colour_matrix_becomes_two_dot_products(tmp_path):
    """Four terms (three products and a 16-bit offset): two pairwise multiply-adds, no 32-bit
    multiply; with VNNI LLVM may accumulate the second into the first (vpdpwssd), as it does for
    AMD Zen 4, or keep vpmaddwd and an add, as it does when tuning for Intel's Rocket Lake."""
    f, ref = _colour_matrix_func(16)
    stmts = []
    lowered = hl.Pipeline(f)
    np.testing.assert_array_equal(np.asarray(lowered.realize([64])), ref.astype(np.int32))
    from pyhalide.lower import finish_lowering, lower

    finish_lowering(lower(f).stmt, [], hook=lambda name, s: stmts.append((name, s)))
    text = str(dict(stmts)["select instructions"])
    assert text.count(DOT_PRODUCT_I16) == 2, text
    asm_path = tmp_path / "f.s"
    f.compile_to_assembly(str(asm_path), [], "f")
    asm = asm_path.read_text()
    assert "vpmulld" not in asm
    features = set(host_target().features.split(","))
    expected = "(vpdpwssd|vpmaddwd)" if "+avx512vnni" in features or "+avxvnni" in features else "v?pmaddwd"
    assert re.search(rf"\b{expected}\b", asm), asm


def test_products_of_wider_values_are_left_alone():
    """A factor that is not exactly 16 bits (uint16, or an Int32 value) keeps the 32-bit multiply."""
    from pyhalide.lower import finish_lowering, lower

    x = hl.Var("x")
    a = hl.Buffer(np.arange(16, dtype=np.uint16), "a")
    b = hl.Buffer(np.arange(16, dtype=np.int32), "b")
    f = hl.Func("f")
    f[x] = hl.cast(hl.Int(32), a[x]) * 3 + b[x] * 5
    f.vectorize(x, 16)
    stmts = []
    finish_lowering(lower(f).stmt, [], hook=lambda name, s: stmts.append(s))
    assert DOT_PRODUCT_I16 not in str(stmts[-1])
    np.testing.assert_array_equal(np.asarray(f.realize([16])), np.arange(16) * 3 + np.arange(16) * 5)


_NARROW = {"uint8": hl.UInt(8), "int8": hl.Int(8), "uint16": hl.UInt(16), "int16": hl.Int(16)}


@st.composite
def clamped_sums(draw):
    """A narrow a +/- b: Halide's saturating op, or a clamp of the widened op written out with
    bounds that are (or are not quite) the type's range, or no clamp at all (wraps)."""
    dtype = draw(st.sampled_from(list(_NARROW)))
    t, info = _NARROW[dtype], np.iinfo(dtype)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    a_np, b_np = (rng.integers(info.min, info.max, N, endpoint=True, dtype=np.int64) for _ in range(2))
    a_np[:4], b_np[:4] = [info.min, info.max, info.max, info.min], [info.min, info.max, info.min, info.max]
    a, b = hl.Buffer(a_np.astype(dtype), "a"), hl.Buffer(b_np.astype(dtype), "b")
    x = hl.Var("x")
    sub = draw(st.booleans())
    exact = a_np - b_np if sub else a_np + b_np
    form = draw(st.sampled_from(["halide", "clamp", "min_only", "max_only", "narrow_clamp", "none"]))
    if form == "halide":
        e = (hl.saturating_sub if sub else hl.saturating_add)(a[x], b[x])
        return x, e, np.clip(exact, info.min, info.max), draw(st.sampled_from([8, 16, 32, 64, 24]))
    wide = hl.Int(32) if info.bits == 16 else hl.Int(16)
    wa, wb = hl.cast(wide, a[x]), hl.cast(wide, b[x])
    w = wa - wb if sub else wa + wb
    lo, hi = info.min, info.max
    if form == "narrow_clamp":
        lo, hi = lo + draw(st.integers(0, 2)), hi - draw(st.integers(0, 2))
    if form in ("clamp", "narrow_clamp"):
        w, ref = hl.clamp(w, lo, hi), np.clip(exact, lo, hi)
    elif form == "min_only":
        w, ref = hl.min(w, hi), np.minimum(exact, hi)
    elif form == "max_only":
        w, ref = hl.max(w, lo), np.maximum(exact, lo)
    else:
        ref = exact
    wrapped = (ref - info.min) % (1 << info.bits) + info.min  # the narrowing cast wraps
    return x, hl.cast(t, w), wrapped, draw(st.sampled_from([8, 16, 32, 64, 24]))


@settings(max_examples=60, deadline=None)
@given(clamped_sums())
def test_saturating_arithmetic_is_bit_exact(case):
    x, expr, ref, lanes = case
    f = hl.Func("f")
    f[x] = expr
    f.vectorize(x, lanes, hl.TailStrategy.GuardWithIf)
    out = np.asarray(f.realize([N])).astype(np.int64)
    np.testing.assert_array_equal(out, ref)


def test_saturating_add_is_one_instruction(tmp_path):
    x = hl.Var("x")
    a = hl.Buffer(np.arange(64, dtype=np.uint8), "a")
    b = hl.Buffer(np.arange(64, dtype=np.uint8) * 4, "b")
    f = hl.Func("f")
    # (hl.u16(255): a Python 255 would be an Int(32), as in Halide's bindings, and the min an int32 one)
    f[x] = hl.saturating_add(a[x], b[x]) + hl.cast(hl.UInt(8), hl.min(hl.cast(hl.UInt(16), a[x]) + b[x], hl.u16(255)))
    f.vectorize(x, 64)
    np.testing.assert_array_equal(np.asarray(f.realize([64])),
                                  (2 * np.minimum(np.arange(64) * 5, 255)).astype(np.uint8))
    f.compile_to_assembly(str(tmp_path / "f.s"), [], "f")
    asm = (tmp_path / "f.s").read_text()
    assert re.search(r"\bv?paddusb\b", asm) and "pmovzxbw" not in asm, asm
