"""Random misuse of the API, run in a subprocess by test_misuse_fuzz.py (so that a crash is a
failed test, not a dead test run): random directives with random arguments on the Funcs of a
small pipeline, then realize with random sizes. Every call must return or raise HalideError
(AttributeError only for a directive name Funcs don't have, TypeError only for arguments a
signature cannot bind), and every realize that succeeds
must compute what numpy computes."""

from __future__ import annotations

import json
import os
import sys
import traceback

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyhalide as hl

DIRECTIVES = ["split", "fuse", "rename", "reorder", "tile", "vectorize", "unroll", "parallel", "gpu_tile",
              "gpu_blocks", "gpu_threads", "serial", "atomic", "compute_at", "store_at", "compute_root",
              "store_root", "compute_inline", "bound", "bound_extent", "align_bounds", "align_extent", "store_in",
              "reorder_storage", "fold_storage", "vectorise", "no_such_directive"]
INTS = [-(2**40), -(2**31), -7, -1, 0, 1, 2, 3, 8, 16, 2**31, 2**40]
JUNK = [None, "x", "", 2.5, float("nan"), [], [1, 2], object()]

failures: list[str] = []
outcomes = {"computed": 0, "refused": 0}  # realizes compared with numpy / ending in HalideError


def _pipeline(img):
    x, y = hl.Var("x"), hl.Var("y")
    inp = hl.Buffer(img, "img")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = hl.cast(hl.Int(32), hl.BoundaryConditions.repeat_edge(inp)[x, y]) * 2 + 1
    g[x, y] = f[x - 1, y] + f[x + 1, y] + f[x, y - 1]
    return {"f": f, "g": g}, {"x": x, "y": y}


def _expected(img, w, h):
    def f(xs, ys):
        return img[np.clip(ys, 0, img.shape[0] - 1)][:, np.clip(xs, 0, img.shape[1] - 1)].astype(np.int32) * 2 + 1
    xs, ys = np.arange(w), np.arange(h)
    return f(xs - 1, ys) + f(xs + 1, ys) + f(xs, ys - 1)


@st.composite
def _argument(draw, funcs, vars_):
    kind = draw(st.sampled_from(["var", "newvar", "int", "junk", "func", "tail", "level"]))
    if kind == "var":
        return vars_[draw(st.sampled_from(sorted(vars_)))]
    if kind == "newvar":
        return hl.Var(draw(st.sampled_from(["xo", "xi", "yo", "yi", "t", "x"])))
    if kind == "int":
        return draw(st.sampled_from(INTS))
    if kind == "func":
        return funcs[draw(st.sampled_from(sorted(funcs)))]
    if kind == "tail":
        return draw(st.sampled_from([hl.TailStrategy.RoundUp, hl.TailStrategy.GuardWithIf,
                                     hl.TailStrategy.ShiftInwards, hl.TailStrategy.Auto]))
    if kind == "level":
        return draw(st.sampled_from([hl.LoopLevel.root(), hl.LoopLevel.inlined()]))
    return draw(st.sampled_from(JUNK))


def _trace(what: str) -> None:
    """MISUSE_TRACE=1 prints each call before it is made: the last line names a crashing one."""
    if os.environ.get("MISUSE_TRACE"):
        print(what, file=sys.stderr, flush=True)


def _call(what: str, fn, *args) -> object:
    """Call fn; record any outcome other than a result or HalideError (or, as for any Python
    function and in Halide's bindings, a TypeError for arguments the signature can't bind)."""
    try:
        return fn(*args)
    except hl.HalideError:
        return None
    except TypeError as e:
        if len(traceback.extract_tb(e.__traceback__)) == 1:  # raised binding the call, not inside it
            return None
        failures.append(f"{what}: {type(e).__name__}: {e}\n{traceback.format_exc(limit=-3)}")
        return None
    except Exception as e:  # noqa: BLE001 - that is what this records
        failures.append(f"{what}: {type(e).__name__}: {e}\n{traceback.format_exc(limit=-3)}")
        return None


@settings(max_examples=int(sys.argv[1]) if len(sys.argv) > 1 else 60, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck), database=None)
@given(st.data())
def misuse(data):
    h0, w0 = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 6))
    img = np.arange(h0 * w0, dtype=np.uint8).reshape(h0, w0)
    funcs, vars_ = _pipeline(img)
    for _ in range(data.draw(st.integers(1, 4))):
        name = data.draw(st.sampled_from(sorted(funcs)))
        directive = data.draw(st.sampled_from(DIRECTIVES))
        args = data.draw(st.lists(_argument(funcs, vars_), max_size=5))
        method = getattr(funcs[name], directive, None)
        if method is None:
            if directive not in ("vectorise", "no_such_directive"):
                failures.append(f"Func has no {directive}")
            continue
        _trace(f"{name}.{directive}{tuple(args)!r}")
        _call(f"{name}.{directive}{tuple(args)!r}", method, *args)
    sizes = data.draw(st.one_of(
        st.tuples(st.integers(0, 9), st.integers(0, 9)).map(list),
        st.lists(st.sampled_from(INTS + [2.5, "3"]), max_size=3)))
    _trace(f"realize({sizes!r})")
    out = _call(f"realize({sizes!r})", funcs["g"].realize, sizes)
    outcomes["computed" if out is not None else "refused"] += 1
    if out is not None:
        got = np.asarray(out)
        want = _expected(img, sizes[0], sizes[1])
        if got.shape != want.shape or not np.array_equal(got, want):
            failures.append(f"wrong result for realize({sizes}) after the directives above: {got} != {want}")


if __name__ == "__main__":
    try:
        misuse()
    except Exception as e:  # noqa: BLE001 - Hypothesis re-raises a recorded failure: report it too
        failures.append(f"hypothesis: {type(e).__name__}: {e}")
    print(json.dumps({"failures": failures[:20], **outcomes}))
