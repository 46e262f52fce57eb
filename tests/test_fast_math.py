"""fast_exp, fast_log, fast_sin, fast_cos and fast_pow compute what Halide's compute (bit for bit,
against the real Halide with strict_float, scalar and vectorized), within their documented
accuracy of the exact functions, as straight-line vector code, and refuse what Halide refuses."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyhalide as hl


def _real():
    return pytest.importorskip("halide", reason="the real Halide (pip install halide) is the oracle")


FUNCTIONS = {
    "fast_exp": lambda lib, v: lib.fast_exp(v),
    "fast_log": lambda lib, v: lib.fast_log(v),
    "fast_sin": lambda lib, v: lib.fast_sin(v),
    "fast_cos": lambda lib, v: lib.fast_cos(v),
    "fast_pow": lambda lib, v: lib.fast_pow(v, v * 0.5 - 1),
}
# where each is meant to be used: exp without overflow or underflow, log and pow of positives
DOMAINS = {"fast_exp": (-87.0, 88.0), "fast_log": (1e-30, 1e30), "fast_sin": (-100.0, 100.0),
           "fast_cos": (-100.0, 100.0), "fast_pow": (0.0, 10.0)}
EXACT = {"fast_exp": np.exp, "fast_log": np.log, "fast_sin": np.sin, "fast_cos": np.cos,
         "fast_pow": lambda v: v ** (v * 0.5 - 1)}


def _values(name: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    lo, hi = DOMAINS[name]
    if name == "fast_log":
        return np.exp(rng.uniform(np.log(lo), np.log(hi), n)).astype(np.float32)
    # the whole domain, and the small arguments where the result is most used
    return np.concatenate([rng.uniform(lo, hi, n // 2), rng.uniform(max(lo, -4), min(hi, 4), n - n // 2)]
                          ).astype(np.float32)


def _realize(lib, name: str, values: np.ndarray, vector: int) -> np.ndarray:
    x = lib.Var("x")
    b = lib.Buffer(values)
    f = lib.Func("f")
    f[x] = FUNCTIONS[name](lib, b[x])
    if vector > 1:
        f.vectorize(x, vector)
    host = lib.get_jit_target_from_environment() if lib is not hl else hl.get_host_target()
    return np.asarray(f.realize([len(values)], host.with_feature(lib.TargetFeature.StrictFloat)))


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@pytest.mark.parametrize("vector", [1, 16])
def test_fast_math_is_halides_bit_for_bit(name, vector):
    h = _real()
    values = _values(name, 20000, seed=len(name) + vector)
    ours, theirs = _realize(hl, name, values, vector), _realize(h, name, values, vector)
    assert ours.dtype == theirs.dtype == np.float32
    np.testing.assert_array_equal(ours.view(np.uint32), theirs.view(np.uint32))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-200, 200, width=32, allow_subnormal=False), min_size=1, max_size=40))
def test_fast_trig_and_exp_of_drawn_values_are_halides(drawn):
    """Hypothesis-drawn arguments, including ones outside the useful range (exp's overflow and
    underflow clamp the exponent; large angles lose accuracy in the reduction): still Halide's."""
    h = _real()
    values = np.resize(np.array(drawn, np.float32), max(8, len(drawn)))  # (one vector at least)
    for name in ("fast_exp", "fast_sin", "fast_cos"):
        ours, theirs = _realize(hl, name, values, 8), _realize(h, name, values, 8)
        np.testing.assert_array_equal(ours.view(np.uint32), theirs.view(np.uint32))


@pytest.mark.parametrize("name, bound", [("fast_exp", 1e-5), ("fast_log", 1e-5), ("fast_sin", 1e-5),
                                         ("fast_cos", 1e-5), ("fast_pow", 1e-5)])
def test_fast_math_is_close_to_the_exact_function(name, bound):
    """Relative error for exp, log and pow, absolute for sin and cos, over the useful domain."""
    values = _values(name, 50000, seed=7)
    ours = _realize(hl, name, values, 16).astype(np.float64)
    exact = EXACT[name](values.astype(np.float64))
    err = np.abs(ours - exact)
    if name in ("fast_exp", "fast_log", "fast_pow"):
        err = err / np.maximum(np.abs(exact), np.finfo(np.float32).tiny)
    assert err.max() < bound
    assert err.max() > 0  # an approximation, not the exact function


def test_fast_exp_compiles_to_vector_arithmetic_without_calls(tmp_path):
    x = hl.Var("x")
    inp = hl.ImageParam(hl.Float(32), 1, "inp")
    f = hl.Func("f")
    f[x] = hl.fast_exp(inp[x]) + hl.fast_log(inp[x]) + hl.fast_sin(inp[x])
    f.vectorize(x, 16)
    path = tmp_path / "f.s"
    f.compile_to_assembly(str(path), [inp], "f")
    text = path.read_text()
    assert re.search(r"vfmadd\w+\s+%zmm|vmulps\s+%zmm", text)
    assert not re.search(r"call\w*\s+\*?\w*(exp|log|sin)", text)


@pytest.mark.parametrize("name", ["fast_exp", "fast_log"])
def test_fast_exp_and_log_refuse_other_types_as_halide(name):
    h = _real()
    for lib in (hl, h):
        fn = getattr(lib, name)
        with pytest.raises(Exception, match=f"{name} only works for Float\\(32\\)"):
            fn(lib.f64(1.0))
        with pytest.raises(Exception, match=f"{name} only works for Float\\(32\\)"):
            fn(lib.Var("x"))


def test_fast_math_result_types_are_halides():
    h = _real()
    seen = []
    for lib in (hl, h):
        x = lib.Var("x")
        seen.append([str(e.type()) for e in (lib.fast_sin(x), lib.fast_cos(lib.f64(0.5)), lib.fast_exp(lib.f32(1)),
                                             lib.fast_pow(x, 2), lib.fast_pow(lib.u8(3), 0.5), lib.fast_log(1.5))])
    assert seen[0] == seen[1]


def test_derivatives_flow_through_fast_exp_and_fast_sin_as_in_halide():
    """propagate_adjoints through fast_exp and fast_sin: the derivative of their arithmetic,
    Halide's values, close to exp's and cos's."""
    h = _real()
    v = np.linspace(-3, 3, 64).astype(np.float32)
    grads = []
    for lib in (hl, h):
        x = lib.Var("x")
        b = lib.Buffer(v)
        f = lib.Func("f")
        f[x] = lib.fast_exp(b[x]) + lib.fast_sin(b[x])
        r = lib.RDom([lib.Range(0, 64)])
        loss = lib.Func("loss")
        loss[()] = lib.f32(0)
        loss[()] += f[r.x]
        grads.append(np.asarray(lib.propagate_adjoints(loss)[b].realize([64])))
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-7)  # (Halide fuses multiply-adds here)
    np.testing.assert_allclose(grads[0], np.exp(v) + np.cos(v), rtol=1e-4, atol=1e-5)
