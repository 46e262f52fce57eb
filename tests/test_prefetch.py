"""Func.prefetch / Stage.prefetch (Halide's prefetch directive): loops of prefetch instructions
at the top of a loop, for what a later iteration will read or write; never a change in what is
computed, never a read outside a buffer (GuardWithIf and Clamp keep the fetches inside it;
NonFaulting fetches anyway, which cannot fault)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import pyhalide as hl

PBS = hl.PrefetchBoundStrategy
STRATEGIES = [PBS.GuardWithIf, PBS.Clamp, PBS.NonFaulting]


def _pipeline():
    x, y = hl.Var("x"), hl.Var("y")
    data = np.arange(70 * 45, dtype=np.float32).reshape(45, 70) % 97
    im = hl.Buffer(data, "pf_input")
    f, g = hl.Func("pf_f"), hl.Func("pf_g")
    f[x, y] = (im[x, y] * 2, hl.i32(im[x, y]) - 5)  # a Tuple: both of its buffers are fetched
    g[x, y] = f[x, y][0] + f[x, y + 1][0] + hl.f32(f[x + 1, y][1]) + im[x, y]
    f.compute_root()
    want = 2 * data[:44, :69] + 2 * data[1:45, :69] + (data[:44, 1:70].astype(np.int32) - 5) + data[:44, :69]
    return x, y, im, f, g, want


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("offset", [1, 3, -2, 60])
def test_prefetch_leaves_the_values(strategy, offset):
    """Prefetch of a Tuple Func at the row loop (ahead by `offset` rows, even past the end or
    before the start) and of the input Buffer at the tile loop from the row loop outside it:
    the same values as without."""
    x, y, im, f, g, want = _pipeline()
    xo, xi = hl.Var("xo"), hl.Var("xi")
    g.split(x, xo, xi, 16).vectorize(xi, 8)
    g.prefetch(f, y, y, offset, strategy).prefetch(im, xo, y, offset, strategy)
    np.testing.assert_array_equal(np.asarray(g.realize([69, 44])), want)


def test_the_fetch_loops_and_the_instructions():
    """The lowered Stmt prefetches two rows of both of f's buffers ahead per row, guarded to f's
    realization; Clamp clamps instead, NonFaulting neither; the x86 assembly has prefetcht0."""
    texts = {}
    for strategy in STRATEGIES:
        x, y, im, f, g, _ = _pipeline()
        g.prefetch(f, y, y, 2, strategy)
        stmt = hl.Pipeline(g)._lower().stmt
        from pyhalide.ir_printer import stmt_to_string

        texts[strategy] = stmt_to_string(stmt)
    for strategy, text in texts.items():
        assert "pf_g.prefetch.pf_f.line" in text and "prefetch('pf_f.0'" in text and "prefetch('pf_f.1'" in text
        lines = text.splitlines()
        first = next(i for i, line in enumerate(lines) if "for<serial> (pf_g.prefetch" in line)
        assert lines[first - 1].strip().startswith("if (") == (strategy == PBS.GuardWithIf), lines[first - 1]
    x, y, im, f, g, _ = _pipeline()
    g.prefetch(f, y, y, 2)
    asm = hl.Pipeline(g)
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".s") as fh:
        asm.compile_to_assembly(fh.name, [])
        assert b"prefetcht0" in open(fh.name, "rb").read()


def test_bad_prefetches_are_refused():
    x, y, im, f, g, _ = _pipeline()
    with pytest.raises(hl.HalideError, match="the loop x must be y or outside it"):
        g.prefetch(f, y, x)
    with pytest.raises(hl.HalideError, match="prefetch at of unknown dimension z"):
        g.prefetch(f, hl.Var("z"), y)
    with pytest.raises(hl.HalideError, match="the prefetch offset must be a constant integer"):
        g.prefetch(f, y, y, hl.Param(hl.Int(32), "k") + 1)
    with pytest.raises(hl.HalideError, match="not a PrefetchBoundStrategy"):
        g.prefetch(f, y, y, 1, "Sometimes")
    x, y, im, f, g, _ = _pipeline()
    h = hl.Func("pf_unused")
    h[x, y] = x
    h.compute_root()
    g.prefetch(h, y, y)
    with pytest.raises(hl.HalideError, match="the loop y does not use pf_unused"):
        g.realize([69, 44])


def test_a_func_prefetch_replays_from_json_an_image_one_does_not():
    x, y, im, f, g, want = _pipeline()
    g.prefetch(f, y, y, 2, PBS.Clamp)
    record = hl.Pipeline(g).schedule_to_json()
    assert ["prefetch", {"func": "pf_f"}] == json.loads(record)["pf_g"][0][1:2] + json.loads(record)["pf_g"][0][2][:1]
    x2, y2, im2, f2, g2, _ = _pipeline()
    hl.Pipeline(g2).apply_schedule_json(record)
    [fetch] = g2._schedule.stages[0].prefetches
    assert (fetch.name, fetch.at, fetch.from_, fetch.offset, fetch.strategy) == (f2.name(), "y", "y", 2, PBS.Clamp)
    np.testing.assert_array_equal(np.asarray(g2.realize([69, 44])), want)
    g.prefetch(im, y, y)
    with pytest.raises(hl.HalideError, match="prefetches an input image"):
        hl.Pipeline(g).schedule_to_json()


def test_a_prefetch_at_a_gpu_loop_is_none(device):
    """A prefetch at a GPU block or thread loop: a kernel gets no CPU cache hints; the values
    are the same (on every device)."""
    x, y, im, f, g, want = _pipeline()
    xi, yi = hl.Var("xi"), hl.Var("yi")
    g.gpu_tile(x, y, xi, yi, 8, 8, hl.TailStrategy.GuardWithIf)
    g.prefetch(f, y, y).prefetch(f, xi, y, 2)
    out = g.realize([69, 44], hl.Target("host-cuda"))
    out.copy_to_host()
    np.testing.assert_array_equal(np.asarray(out), want)
    from pyhalide.ir_printer import stmt_to_string
    from pyhalide.lower import lower

    assert "prefetch(" not in stmt_to_string(lower(g, "host-cuda").stmt)


def test_prefetch_inside_a_vectorized_loop():
    """A prefetch at a serial loop inside a vectorized one, or at the vectorized loop itself,
    fetches for each vector lane; the values stay the same."""
    x, y, im, f, g, want = _pipeline()
    yo, yi = hl.Var("yo"), hl.Var("yi")
    g.split(y, yo, yi, 4).reorder(x, yi, yo).vectorize(yi)
    g.prefetch(f, x, x, 4, PBS.NonFaulting).prefetch(im, x, yo, 1, PBS.Clamp)
    np.testing.assert_array_equal(np.asarray(g.realize([69, 44])), want)
    x, y, im, f, g, want = _pipeline()
    xo, xi = hl.Var("xo"), hl.Var("xi")
    g.split(x, xo, xi, 8).vectorize(xi).prefetch(f, xi, y, 1, PBS.GuardWithIf)
    np.testing.assert_array_equal(np.asarray(g.realize([69, 44])), want)


def test_prefetch_in_a_parallel_loop_of_a_buffer_only_it_names():
    """Inside a parallel loop, the task's closure carries the buffers its body uses: also one
    only a prefetch names (here the second buffer of f, which g reads only at another row)."""
    x, y, im, f, g, want = _pipeline()
    g.parallel(y)
    g.prefetch(f, x, y, 1, PBS.NonFaulting)
    np.testing.assert_array_equal(np.asarray(g.realize([69, 44])), want)
    h = hl.Func("pf_h")
    h[x, y] = f[x, y][0]  # f's second buffer is read by no one in h's loops
    h.parallel(y).prefetch(f, x, y, 1, PBS.Clamp)
    np.testing.assert_array_equal(np.asarray(h.realize([69, 44])), 2 * np.asarray(im)[:44, :69])
