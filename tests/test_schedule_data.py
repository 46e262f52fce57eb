"""Schedules as values the autoscheduler can rely on: lowering leaves no trace on the user's Funcs,
a schedule can be copied, reset and put back, lowering is deterministic across processes, the
structural hash sees what is computed (not names), and schedule records from outside are validated
before anything is applied."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest

import pyhalide as hl
from pyhalide import ir
from pyhalide.ir_printer import stmt_to_string
from pyhalide.lower import lower
from pyhalide.schedule import apply_schedule_json, schedule_to_json

x, y, xi, yi, xo, yo, u = (hl.Var(n) for n in ("x", "y", "xi", "yi", "xo", "yo", "u"))


def _algorithm_state(funcs):
    """Everything about the Funcs that an algorithm is: definitions (IR is immutable, so the
    objects themselves) and the Funcs their calls reach."""
    return [(f.name(), f._pure_args, f._init, tuple(f._updates)) for f in funcs]


def _schedule_state(funcs):
    return [schedule_to_json([f]) for f in funcs]


def _histogram_pipeline():
    """A histogram (an update with an RDom), a blur that reads it and an output: room for
    wrappers, rfactor, compute_at and vectorization."""
    rng = np.random.default_rng(0)
    data = rng.integers(0, 64, (48, 64), dtype=np.uint8)
    img = hl.Buffer(data, name="seam_img")
    r = hl.RDom([(0, 64), (0, 48)], "seam_r")
    hist = hl.Func("seam_hist")
    hist[x] = 0
    hist[hl.cast(hl.Int(32), img[r.x, r.y])] += 1
    smooth = hl.Func("seam_smooth")
    smooth[x] = hist[hl.clamp(x - 1, 0, 63)] + hist[x] * 2 + hist[hl.clamp(x + 1, 0, 63)]
    out = hl.Func("seam_out")
    out[x, y] = smooth[x] + hl.cast(hl.Int(32), img[x, y])
    counts = np.bincount(data.ravel(), minlength=64).astype(np.int64)
    sm = np.array([counts[max(i - 1, 0)] + 2 * counts[i] + counts[min(i + 1, 63)] for i in range(64)])
    expected = (sm[None, :] + data.astype(np.int64)).astype(np.int32)
    return hist, smooth, out, r, expected


def _schedule_a(hist, smooth, out, r):
    out.split(y, yo, yi, 8).parallel(yo).vectorize(x, 8)
    smooth.compute_root().vectorize(x, 8)
    ryo, ryi = hl.RVar("seam_ryo"), hl.RVar("seam_ryi")
    intm = hist.update(0).split(r.y, ryo, ryi, 8).rfactor(ryo, u)
    intm.compute_root().update(0).parallel(u)
    hist.compute_root()


def _schedule_b(hist, smooth, out, r):
    smooth.in_(out).compute_at(out, yo).vectorize(x, 4)
    smooth.compute_root()
    hist.compute_root()
    out.tile(x, y, xo, yo, xi, yi, 16, 4).parallel(yo)


def test_realizing_under_three_schedules_in_turn_leaves_the_algorithm_alone():
    hist, smooth, out, r, expected = _histogram_pipeline()
    funcs = [hist, smooth, out]
    algorithm = _algorithm_state(funcs)
    p = hl.Pipeline(out)

    _schedule_a(hist, smooth, out, r)
    a = p.copy_schedule()
    assert np.array_equal(np.asarray(p.realize([64, 48])), expected)
    assert _algorithm_state(funcs) == algorithm  # rfactor recorded, not applied to hist
    after_a = _schedule_state(funcs)

    p.reset_schedule()
    assert all(f.to_python_source() == "" for f in funcs)
    _schedule_b(hist, smooth, out, r)
    assert np.array_equal(np.asarray(p.realize([64, 48])), expected)
    assert _algorithm_state(funcs) == algorithm  # the wrapper redirected calls only in lowering's copy
    assert "seam_smooth_in_seam_out" in [f.name() for f in p.funcs()]

    p.set_schedule(a)
    assert _schedule_state(funcs) == after_a
    assert np.array_equal(np.asarray(p.realize([64, 48])), expected)
    assert "seam_hist_s1_intm" in [f.name() for f in p.funcs()]
    assert _algorithm_state(funcs) == algorithm


def test_lowering_never_changes_the_users_funcs():
    hist, smooth, out, r, _ = _histogram_pipeline()
    _schedule_a(hist, smooth, out, r)
    funcs = hl.Pipeline(out).funcs()
    before = _algorithm_state(funcs), _schedule_state(funcs), [f.copy_schedule() for f in funcs]
    lower([out])
    out.compile_to_lowered_stmt(os.devnull)
    out.realize([64, 48])
    assert (_algorithm_state(funcs), _schedule_state(funcs)) == before[:2]
    assert [f._schedule for f in funcs] == before[2]  # dataclass equality: every field


def test_func_schedule_copy_is_independent():
    f = hl.Func("copy_f")
    f[x, y] = x + y
    f.split(x, xo, xi, 4)
    snapshot = f.copy_schedule()
    f.vectorize(xi)
    assert snapshot.stages[0].find("xi").for_type == "serial"
    f.set_schedule(snapshot)
    assert f._schedule.stages[0].find("xi").for_type == "serial"
    f.reset_schedule()
    assert f.to_python_source() == ""
    assert np.array_equal(np.asarray(f.realize([5, 3])), np.add.outer(np.arange(3), np.arange(5)))


def test_rfactor_shows_the_scheduled_update_and_reset_restores_the_algorithm():
    a = hl.Buffer(np.arange(100, dtype=np.int32), name="rf_in")
    r = hl.RDom([(0, 100)], "rf_r")
    total = hl.Func("rf_total")
    total[()] = 0
    total[()] += a[r]
    original = total.update_value(0)
    ro, ri = hl.RVar("rf_ro"), hl.RVar("rf_ri")
    total.update(0).split(r, ro, ri, 10).rfactor(ri, u)
    assert "rf_total_s1_intm" in str(total.update_value(0))
    assert total.definitions()[1].values[0] is original.ir()
    assert np.asarray(total.realize([])).item() == sum(range(100))
    total.reset_schedule()
    assert str(total.update_value(0)) == str(original)
    assert np.asarray(total.realize([])).item() == sum(range(100))


# ---------------------------------------------------------------- determinism
_PROGRAM = """
import sys, hashlib, itertools
import numpy as np
import pyhalide as hl
from pyhalide import ir
from pyhalide.ir_printer import stmt_to_string
from pyhalide.lower import lower

for _ in range(int(sys.argv[1])):  # warm-up: anonymous Funcs, Vars, RDoms, Buffers, schedules
    v = hl.Var()
    g = hl.Func()
    g[v] = v + hl.sum(hl.RDom([(0, 3)]) + v)
    g.vectorize(v, 4).parallel(v, 8)
    hl.Buffer(np.zeros(4, np.float32))
    lower([g])

x, y = hl.Var("x"), hl.Var("y")
img = hl.Buffer(np.ones((20, 30), np.float32))   # anonymous: a generated name
r = hl.RDom([(-1, 3)])                            # anonymous too
blur = hl.Func()
blur[x, y] = hl.sum(img[hl.clamp(x + r, 0, 29), y])
out = hl.Func("det_out")
out[x, y] = blur[x, y] * 2.0
out.vectorize(x, 8).parallel(y, 4)
blur.compute_at(out, y).vectorize(x, 8)
lowered = lower([out])
text = stmt_to_string(lowered.stmt)
from pyhalide.codegen.runtime import CompiledPipeline
layouts = tuple((tuple(range(b.dimensions - 1, -1, -1)), True) for b in lowered.buffers)
llvm_ir = CompiledPipeline(lowered, layouts).llvm_ir
print(hashlib.sha256(text.encode()).hexdigest(), hashlib.sha256(llvm_ir.encode()).hexdigest(),
      hl.Pipeline(out).structural_hash())
"""


def test_lowering_is_the_same_in_any_process_whatever_ran_before(tmp_path):
    script = tmp_path / "program.py"
    script.write_text(textwrap.dedent(_PROGRAM))
    env = dict(os.environ, PYHALIDE_DISK_CACHE="0")
    runs = [subprocess.run([sys.executable, str(script), str(n)], capture_output=True, text=True, env=env,
                           timeout=600) for n in (0, 3)]
    for run in runs:
        assert run.returncode == 0, run.stderr
    stmt0, ir0, hash0 = runs[0].stdout.split()
    stmt3, ir3, hash3 = runs[1].stdout.split()
    assert stmt0 == stmt3, "lowered IR text differs after a different warm-up"
    assert ir0 == ir3, "LLVM IR (the compile cache key) differs after a different warm-up"
    assert hash0 == hash3


def test_lowering_twice_in_one_process_gives_the_same_text():
    def build():
        f, g = hl.Func("twice_f"), hl.Func("twice_g")
        f[x, y] = x * y
        g[x, y] = f[x, y] + f[x + 1, y]
        g.vectorize(x, 8).parallel(y, 2)
        f.compute_at(g, y).vectorize(x, 4)
        return g

    first = stmt_to_string(lower([build()]).stmt)
    other = hl.Func("unrelated")  # other scheduling in between
    other[x] = x
    other.vectorize(x, 8).unroll(x, 2).parallel(x, 4)
    lower([other])
    assert stmt_to_string(lower([build()]).stmt) == first


# ---------------------------------------------------------------- structural hash
def _blur_algorithm(names: tuple[str, str, str], scale: float = 2.0, offset: int = 1):
    a, b, c = names
    vx, vy = hl.Var(a + "x"), hl.Var(a + "y")
    img = hl.ImageParam(hl.Float(32), 2, a + "img")
    p = hl.Param(hl.Float(32), a + "p", 0.5)
    f, g = hl.Func(b), hl.Func(c)
    f[vx, vy] = img[vx, vy] * scale + img[vx + offset, vy]
    g[vx, vy] = f[vx, vy] + f[vx, vy + 1] * p
    return g, f, vx


def test_structural_hash_ignores_names_and_schedules_but_sees_the_algorithm():
    g1, f1, v1 = _blur_algorithm(("a", "f1", "g1"))
    g2, f2, v2 = _blur_algorithm(("b", "other", "names"))
    h = hl.Pipeline(g1).structural_hash()
    assert hl.Pipeline(g2).structural_hash() == h
    g2.vectorize(v2, 8)
    f2.compute_root()
    assert hl.Pipeline(g2).structural_hash() == h  # schedules don't count
    for changed in (_blur_algorithm(("c", "f", "g"), scale=3.0)[0], _blur_algorithm(("d", "f", "g"), offset=2)[0]):
        assert hl.Pipeline(changed).structural_hash() != h
    # a different type, a different reduction
    vx = hl.Var("hx")
    img = hl.ImageParam(hl.Float(64), 2, "himg")
    k = hl.Func("hk")
    k[vx] = img[vx, 0]
    k2 = hl.Func("hk2")
    img2 = hl.ImageParam(hl.Float(32), 2, "himg2")
    k2[vx] = img2[vx, 0]
    assert hl.Pipeline(k).structural_hash() != hl.Pipeline(k2).structural_hash()
    r = hl.RDom([(0, 4)])
    s1, s2 = hl.Func("hs1"), hl.Func("hs2")
    s1[vx] = 0.0
    s1[vx] += img2[vx, r]
    s2[vx] = 0.0
    s2[vx] += img2[vx, r] * 1.0
    assert hl.Pipeline(s1).structural_hash() != hl.Pipeline(s2).structural_hash()


# ---------------------------------------------------------------- hostile schedule records
def _record_target():
    f, g = hl.Func("rec_f"), hl.Func("rec_g")
    f[x, y] = x + y
    g[x, y] = f[x, y] * 2
    f.compute_root()
    return f, g


HOSTILE = {
    "unknown method": {"rec_g": [[0, "compile_to_lowered_stmt", ["/tmp/pwned.stmt"]]]},
    "private method": {"rec_g": [[0, "_log", ["split"]]]},
    "dunder": {"rec_g": [[0, "__class__", []]]},
    "wrong argument type": {"rec_g": [[0, "split", ["x", "xo", "xi", 4, "Auto"]]]},
    "string factor": {"rec_g": [[0, "vectorize", [{"var": "x", "rvar": False}, "8", "Auto"]]]},
    "bool factor": {"rec_g": [[0, "vectorize", [{"var": "x", "rvar": False}, True, "Auto"]]]},
    "huge factor": {"rec_g": [[0, "split", [{"var": "x", "rvar": False}, {"var": "xo", "rvar": False},
                                            {"var": "xi", "rvar": False}, 10**30, "Auto"]]]},
    "negative factor": {"rec_g": [[0, "unroll", [{"var": "x", "rvar": False}, -4, "Auto"]]]},
    "unknown tail": {"rec_g": [[0, "vectorize", [{"var": "x", "rvar": False}, 8, "Sideways"]]]},
    "too many arguments": {"rec_g": [[0, "serial", [{"var": "x", "rvar": False}] * 3]]},
    "extra key": {"rec_g": [[0, "serial", [{"var": "x", "rvar": False, "eval": "1"}]]]},
    "Func directive on an update": {"rec_g": [[1, "compute_root", []]]},
    "bad loop level": {"rec_f": [[0, "compute_at", [{"loop_level": {"kind": "somewhere"}}]]]},
    "unknown Func": {"nobody": [[0, "compute_root", []]]},
    "stage out of range": {"rec_g": [[3, "serial", [{"var": "x", "rvar": False}]]]},
    "valid, then refused": {"rec_g": [[0, "vectorize", [{"var": "x", "rvar": False}, 8, "Auto"]],
                                      [0, "serial", [{"var": "nope", "rvar": False}]]]},
    "not a list": {"rec_g": "split x"},
    "control characters": {"rec_g": [[0, "serial", [{"var": "x\u0000", "rvar": False}]]]},
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_schedule_records_are_refused_and_change_nothing(case, tmp_path):
    f, g = _record_target()
    before = _schedule_state([f, g])
    with pytest.raises(hl.HalideError):
        apply_schedule_json([f, g], json.dumps(HOSTILE[case]))
    assert _schedule_state([f, g]) == before
    with pytest.raises(hl.HalideError):
        hl.Pipeline(g).apply_schedule_json(json.dumps(HOSTILE[case]))
    assert _schedule_state([f, g]) == before
    assert not os.path.exists("/tmp/pwned.stmt")


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, "{" * 50_000, "not json", "[]", "7",
                                  '{"rec_g": [[0, "serial"]]}', " " * (2 << 20)])
def test_malformed_schedule_records_are_refused(text):
    f, g = _record_target()
    before = _schedule_state([f, g])
    with pytest.raises(hl.HalideError, match="Invalid schedule record"):
        apply_schedule_json([f, g], text)
    assert _schedule_state([f, g]) == before


def test_pipeline_schedule_json_round_trip_with_wrappers_and_rfactor():
    hist, smooth, out, r, expected = _histogram_pipeline()
    _schedule_a(hist, smooth, out, r)
    smooth.in_(out).compute_at(out, yo)
    text = hl.Pipeline(out).schedule_to_json()
    hist2, smooth2, out2, _, _ = _histogram_pipeline()
    p2 = hl.Pipeline(out2)
    p2.apply_schedule_json(text)
    assert p2.schedule_to_json() == text
    assert np.array_equal(np.asarray(p2.realize([64, 48])), expected)


# ---------------------------------------------------------------- targets, GPU loop kinds, memory types
def test_targets_name_what_no_backend_supports():
    with pytest.raises(hl.HalideError, match="unknown target feature 'nonsense_feature'"):
        hl.Target("x86-64-linux-nonsense_feature")
    f = hl.Func("tgt_f")
    f[x] = x
    for spec, what in (("host-opencl", "GPU API 'opencl'"), ("host-large_buffers", "feature 'large_buffers'"),
                       ("arm-64-linux", "arm-64-linux")):
        with pytest.raises(hl.HalideError, match=what):
            f.realize([4], target=hl.Target(spec))
        with pytest.raises(hl.HalideError, match=what):
            lower([f], spec)
    assert np.array_equal(np.asarray(f.realize([4], target=hl.Target("host-avx2-strict_float"))), np.arange(4))


def test_gpu_loop_kinds_exist_in_the_schedule_and_are_refused_on_the_cpu():
    f = hl.Func("gpu_f")
    f[x, y] = x + y
    f.compute_root().split(x, xo, xi, 16).gpu_blocks(xo).gpu_threads(xi)
    assert f._schedule.stages[0].find("xo").for_type == "gpu_block"
    assert "gpu_threads" in f.to_python_source()
    g = hl.Func("gpu_g")
    g[x, y] = f[x, y]
    with pytest.raises(hl.HalideError, match=r"gpu_f.s0.x.x[io] is a gpu_(block|thread) loop.*host CPU"):
        g.realize([32, 2])
    with pytest.raises(hl.HalideError, match="takes 1 to 3 loops"):
        f.gpu_blocks(x, y, xo, xi)


def test_memory_types(tmp_path):
    f, g = hl.Func("mem_f"), hl.Func("mem_g")
    f[x, y] = x * y
    g[x, y] = f[x, y] + f[x + 1, y]
    with pytest.raises(hl.HalideError, match="unknown memory type"):
        f.store_in("Cloud")
    f.compute_at(g, y).store_in(hl.MemoryType.GPUShared)
    with pytest.raises(hl.HalideError, match="mem_f.*GPUShared.*GPU"):
        g.realize([8, 4])
    expected = np.array([[xv * yv + (xv + 1) * yv for xv in range(8)] for yv in range(4)])
    f.store_in(hl.MemoryType.Register)
    with pytest.raises(hl.HalideError, match="Allocation mem_f has a dynamic size"):
        g.realize([8, 4])  # f's row is as wide as the output, known only when called
    f.store_in(hl.MemoryType.Stack)  # on the heap then, as Halide's pseudostack
    assert np.array_equal(np.asarray(g.realize([8, 4])), expected)
    g.bound(x, 0, 8)
    for memory in (hl.MemoryType.Heap, hl.MemoryType.Stack, hl.MemoryType.Register, hl.MemoryType.Auto):
        f.store_in(memory)
        assert np.array_equal(np.asarray(g.realize([8, 4])), expected), memory
        stmt = tmp_path / f"{memory}.stmt"
        g.compile_to_lowered_stmt(str(stmt))
        assert (f"in {memory}" in stmt.read_text()) == (memory != "Auto")
        llvm = tmp_path / f"{memory}.ll"
        g.compile_to_llvm_assembly(str(llvm))
        assert ("@pyhalide_malloc" in llvm.read_text()) == (memory == "Heap"), memory  # Auto: small, so on the stack


def test_lower_shows_every_pass_to_the_hook():
    from pyhalide.lower import lowering_passes

    f = hl.Func("hook_f")
    f[x] = x * 2
    seen = []
    lower([f], hook=lambda name, stmt: seen.append((name, stmt)))
    passes = lowering_passes(SimpleNamespace(target=hl.Target("host"), buffer_constants={}))
    assert [name for name, _ in seen] == ["schedule functions"] + [name for name, _ in passes]
    assert all(isinstance(stmt, ir.Stmt) for _, stmt in seen)
    assert "produce hook_f" in stmt_to_string(seen[0][1])


# ---------------------------------------------------------------- broken invariants
def test_malformed_ir_is_an_internal_error_not_a_user_error():
    from pyhalide.errors import InternalError

    assert not issubclass(InternalError, hl.HalideError)
    with pytest.raises(InternalError, match="mismatched types"):
        ir.Add(ir.make_const(hl.Int(32), 1), ir.make_const(hl.Float(32), 1.0))
    with pytest.raises(InternalError, match="unknown loop kind"):
        ir.For("l", ir.make_const(hl.Int(32), 0), ir.make_const(hl.Int(32), 4), "sideways", ir.make_block([]))


def test_a_vector_loop_inside_a_vector_loop_stays_serial_and_is_right():
    """The vectorizer keeps the outer loop serial where widening would make vectors of vectors (a
    Ramp whose base varies by lane), because it sees that case, not by catching an error from
    building bad IR."""
    from pyhalide.pipeline import loop_nest_text

    f = hl.Func("nest_f")
    f[x, y] = x * 3 + y
    f.bound(y, 0, 3).vectorize(x, 4).vectorize(y)
    xs, ys = np.meshgrid(np.arange(16), np.arange(3))
    assert np.array_equal(np.asarray(f.realize([16, 3])), xs * 3 + ys)
    assert "for y in [0, 2]:" in loop_nest_text(lower([f]).stmt)  # serial: the vectorized y is kept as a loop


def test_schedule_records_name_generated_funcs_as_a_fresh_process_does():
    """hl.minimum and hl.sum make Funcs named by per-process counters; a record written in one
    build applies to the same algorithm built again (whose counters have moved on)."""
    import numpy as np

    def build():
        x = hl.Var("x")
        f, g = hl.Func("f"), hl.Func("g")
        r = hl.RDom([(0, 10)])
        f[x] = x * 2
        g[x] = hl.minimum(f[x + r.x]) + hl.sum(f[x + r.x])
        return g

    first = hl.Pipeline(build())
    for fn in first.funcs():
        fn.compute_root()
    text = first.schedule_to_json()
    assert {"minimum0", "sum0"} <= set(json.loads(text)), text
    again = hl.Pipeline(build())
    names = {fn.name() for fn in again.funcs()}
    assert "minimum0" not in names  # the counters moved on
    again.apply_schedule_json(text)
    assert again.schedule_to_json() == text
    assert all(fn._schedule.log for fn in again.funcs())
    want = np.array([min(2 * (x + k) for k in range(10)) + sum(2 * (x + k) for k in range(10)) for x in range(5)])
    assert np.array_equal(np.asarray(again.realize([5])), want)
