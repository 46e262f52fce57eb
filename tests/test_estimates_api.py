"""Estimates and the autoscheduler entry, as in Halide 21's Python bindings: estimates are data
beside the algorithm (never schedule, never read by lowering), and `apply_autoscheduler` runs a
strategy found by name in pyhalide.autoschedulers' registry."""

from __future__ import annotations

import ctypes
import sys
import textwrap

import numpy as np
import pytest

import pyhalide as hl
from pyhalide import autoschedulers
from pyhalide.ir_printer import stmt_to_string
from pyhalide.lower import lower
from pyhalide.schedule import schedule_to_python

x, y, z, xo, xi, yo, yi = (hl.Var(n) for n in ("x", "y", "z", "xo", "xi", "yo", "yi"))


@pytest.fixture
def registry():
    """The registry, put back as it was after the test (the sibling `autoscheduler` package, if
    there is one, is imported first, so that its own strategies are part of what is put back)."""
    autoschedulers._import_sibling()
    saved = dict(autoschedulers._registry)
    yield autoschedulers
    autoschedulers._registry.clear()
    autoschedulers._registry.update(saved)


def _blur(name: str):
    """A 3x1 then 1x3 blur of a uint16 ImageParam (edges repeated), and its numpy reference."""
    inp = hl.ImageParam(hl.UInt(16), 2, f"{name}_in")
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    bx = hl.Func(f"{name}_bx")
    bx[x, y] = (clamped[x - 1, y] + clamped[x, y] + clamped[x + 1, y]) // 3
    by = hl.Func(f"{name}_by")
    by[x, y] = (bx[x, y - 1] + bx[x, y] + bx[x, y + 1]) // 3
    data = np.random.default_rng(1).integers(0, 4000, (37, 53), dtype=np.uint16)
    inp.set(hl.Buffer(data))

    def reference():
        p = np.pad(data.astype(np.int64), 1, mode="edge")
        h = (p[:, :-2] + p[:, 1:-1] + p[:, 2:]) // 3
        return ((h[:-2] + h[1:-1] + h[2:]) // 3).astype(np.uint16)

    return inp, bx, by, reference()


def _lowered_text(out) -> str:
    return stmt_to_string(lower([out]).stmt)


# ---------------------------------------------------------------- estimates: setting and reading
def test_func_estimates_are_set_read_and_chain():
    f = hl.Func("est_f")
    f[x, y] = x + y
    assert f.estimates() == [None, None]
    assert f.set_estimate(y, -2, 30) is f
    assert f.estimates() == [None, (-2, 30)]
    assert f.set_estimates([hl.Range(0, 640), (1, 480)]) is f
    assert f.estimates() == [(0, 640), (1, 480)]
    f.set_estimate(x, hl.Expr(3), np.int64(7))  # constant Exprs and numpy integers are integers
    assert f.estimates() == [(3, 7), (1, 480)]
    assert all(type(v) is int for e in f.estimates() for v in e)


def test_func_estimate_on_a_func_with_updates_and_implicit_pure_vars():
    r = hl.RDom([(0, 5)], "est_r")
    h = hl.Func("est_h")
    h[x] = 0
    h[r.x] += 1
    h.set_estimate(x, 0, 5)
    assert h.estimates() == [(0, 5)]
    g = hl.Func("est_g")
    g[r.x] += 2  # pure definition made by += (pure Vars of its own)
    g.set_estimates([(0, 5)])
    assert g.estimates() == [(0, 5)]


def test_image_param_and_param_estimates():
    im = hl.ImageParam(hl.UInt(8), 3, "est_im")
    assert im.estimates() == [None, None, None]
    assert im.set_estimates([(0, 64), hl.Range(0, 32), (0, 3)]) is im
    assert im.estimates() == [(0, 64), (0, 32), (0, 3)]

    p = hl.Param(hl.Int(32), "est_p")
    assert p.estimate() is None
    assert p.set_estimate(12) is None  # as in Halide, Param.set_estimate returns None
    assert p.estimate() == 12 and not p.is_set()  # an estimate is not a value
    pf = hl.Param(hl.Float(32), "est_pf")
    pf.set_estimate(0.5)
    assert pf.estimate() == 0.5
    pb = hl.Param(hl.Bool(), "est_pb")
    pb.set_estimate(True)
    assert pb.estimate() == 1


# ---------------------------------------------------------------- estimates: errors
def _func_2d():
    f = hl.Func("bad_f")
    f[x, y] = x * y
    return f


@pytest.mark.parametrize("call, words", [
    (lambda f: f.set_estimate(z, 0, 10), ["bad_f", "z", "pure variables", "x, y"]),
    (lambda f: f.set_estimate(hl.RVar("bad_rv"), 0, 10), ["bad_f", "pure Var"]),
    (lambda f: f.set_estimate(x, 0, 0), ["bad_f", "dimension 0 (x)", "min 0", "extent 0"]),
    (lambda f: f.set_estimate(y, 5, -3), ["bad_f", "dimension 1 (y)", "min 5", "extent -3"]),
    (lambda f: f.set_estimate(x, 0.5, 10), ["bad_f", "dimension 0 (x)", "min", "0.5"]),
    (lambda f: f.set_estimate(x, 0, 10.0), ["bad_f", "dimension 0 (x)", "extent", "10.0"]),
    (lambda f: f.set_estimate(x, 0, True), ["bad_f", "extent", "True"]),
    (lambda f: f.set_estimate(x, "0", 10), ["bad_f", "min", "'0'"]),
    (lambda f: f.set_estimate(x, hl.Param(hl.Int(32), "bad_p"), 10), ["bad_f", "min", "bad_p", "constant"]),
    (lambda f: f.set_estimate(x, hl.f32(2), 10), ["bad_f", "min", "float"]),
    (lambda f: f.set_estimate(x, 0, 2**31), ["bad_f", "dimension 0 (x)", "2147483648", "Int(32)"]),
    (lambda f: f.set_estimate(x, 2**31 - 5, 10), ["bad_f", "2147483643", "extent 10", "Int(32)"]),
    (lambda f: f.set_estimates([(0, 10)]), ["bad_f", "2 dimensions", "1 pairs"]),
    (lambda f: f.set_estimates([(0, 10)] * 3), ["bad_f", "2 dimensions", "3 pairs"]),
    (lambda f: f.set_estimates([(0, 10), (0, 0)]), ["bad_f", "dimension 1 (y)", "min 0", "extent 0"]),
    (lambda f: f.set_estimates([(0, 10), (0, 5, 1)]), ["bad_f", "dimension 1 (y)", "(0, 5, 1)"]),
    (lambda f: f.set_estimates([10, 20]), ["bad_f", "dimension 0 (x)", "10"]),
    (lambda f: f.set_estimates(hl.Range(0, 10)), ["bad_f", "list"]),
])
def test_bad_func_estimates_raise_naming_func_dimension_and_numbers(call, words):
    f = _func_2d()
    f.set_estimates([(1, 2), (3, 4)])
    with pytest.raises(hl.HalideError) as e:
        call(f)
    for w in words:
        assert w in str(e.value), (w, str(e.value))
    assert f.estimates() == [(1, 2), (3, 4)]  # a refused call changes nothing


@pytest.mark.parametrize("call", [
    lambda g: g.set_estimate(x, 0, 10),
    lambda g: g.set_estimates([(0, 10)]),
    lambda g: g.set_estimates([]),
    lambda g: g.estimates(),
])
def test_estimates_of_an_undefined_func_raise(call):
    g = hl.Func("undef_g")
    with pytest.raises(hl.HalideError, match="undef_g.*not been defined"):
        call(g)


def test_bad_image_param_and_param_estimates_raise():
    im = hl.ImageParam(hl.UInt(8), 2, "bad_im")
    with pytest.raises(hl.HalideError, match=r"ImageParam bad_im has 2 dimensions.*1 pairs"):
        im.set_estimates([(0, 10)])
    with pytest.raises(hl.HalideError, match=r"ImageParam bad_im.*dimension 1.*min 4, extent 0"):
        im.set_estimates([(0, 10), (4, 0)])
    with pytest.raises(hl.HalideError, match=r"bad_im.*dimension 0.*min.*1.5"):
        im.set_estimates([(1.5, 10), (0, 10)])
    assert im.estimates() == [None, None]

    p = hl.Param(hl.UInt(8), "bad_q")
    with pytest.raises(hl.HalideError, match="bad_q.*uint8.*300"):
        p.set_estimate(300)
    with pytest.raises(hl.HalideError, match="bad_q.*5.5"):
        p.set_estimate(5.5)
    with pytest.raises(hl.HalideError, match="bad_q.set_estimate"):
        p.set_estimate(hl.Expr(3))
    assert p.estimate() is None


# ---------------------------------------------------------------- estimates are not schedule
def test_estimates_change_no_schedule_hash_or_lowered_ir(tmp_path):
    inp, bx, by, expected = _blur("nosched")
    bx.compute_at(by, yo).vectorize(x, 8)
    by.split(y, yo, yi, 8).parallel(yo)
    p = hl.Pipeline(by)
    p.compile_jit()
    out_file = tmp_path / "before.stmt"
    by.compile_to_lowered_stmt(str(out_file))
    before = p.schedule_to_json(), p.structural_hash(), _lowered_text(by), by.to_python_source()
    lowered = p._lowered

    by.set_estimates([(0, 53), (0, 37)])
    bx.set_estimate(x, -1, 55).set_estimate(y, -1, 39)
    inp.set_estimates([(0, 53), (0, 37)])
    after_file = tmp_path / "after.stmt"
    by.compile_to_lowered_stmt(str(after_file))
    assert (p.schedule_to_json(), p.structural_hash(), _lowered_text(by), by.to_python_source()) == before
    assert after_file.read_text() == out_file.read_text()
    assert p._lower() is lowered  # setting estimates does not even invalidate the compiled pipeline
    assert np.array_equal(np.asarray(p.realize([53, 37])), expected)


def test_schedule_copies_and_resets_keep_estimates():
    inp, bx, by, _ = _blur("keep")
    by.set_estimates([(0, 53), (0, 37)])
    p = hl.Pipeline(by)
    snapshot = p.copy_schedule()
    by.vectorize(x, 8)
    bx.compute_root()
    fsnap = by.copy_schedule()
    p.set_schedule(snapshot)
    by.set_schedule(fsnap)
    by.reset_schedule()
    p.reset_schedule()
    p.apply_schedule_json(p.schedule_to_json())
    assert by.estimates() == [(0, 53), (0, 37)]
    assert bx.estimates() == [None, None]


# ---------------------------------------------------------------- AutoschedulerParams, results, load_plugin
def test_autoscheduler_params_store_strings_as_halide_does():
    a = hl.AutoschedulerParams("Adams2019", {"parallelism": 2, "beam": 1.5, "flag": True, "s": "x", 3: None})
    assert a.name == "Adams2019"
    assert a.extra == {"parallelism": "2", "beam": "1.5", "flag": "True", "s": "x", "3": "None"}
    a.extra["parallelism"] = "99"  # extra is a copy, as in Halide: assign a whole dict instead
    assert a.extra["parallelism"] == "2"
    a.extra = {"parallelism": 8}
    assert a.extra == {"parallelism": "8"}
    assert repr(a) == "AutoschedulerParams('Adams2019', {'parallelism': '8'})"
    assert hl.AutoschedulerParams().name == "" and hl.AutoschedulerParams("M").extra == {}
    assert hl.AutoschedulerParams("M", {"k": 1}) == hl.AutoschedulerParams("M", {"k": "1"})
    with pytest.raises(hl.HalideError):
        hl.AutoschedulerParams(3)


def test_autoscheduler_results_fields():
    r = hl.AutoSchedulerResults()
    assert (r.autoscheduler_params.name, r.target, r.schedule_source, r.featurization, r.details) == \
        ("", None, "", [], None)
    r.cost = 1.0  # a strategy may attach its own fields
    assert "AutoSchedulerResults" in repr(r)


def test_load_plugin_is_a_no_op_that_loads_no_library(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("load_plugin loaded a shared library")

    monkeypatch.setattr(ctypes, "CDLL", refuse)
    monkeypatch.setattr(ctypes.cdll, "LoadLibrary", refuse)
    assert hl.load_plugin("libautoschedule_adams2019.so") is None
    assert hl.load_plugin("/no/such/dir/libautoschedule_li2018.so") is None
    with pytest.raises(hl.HalideError):
        hl.load_plugin(None)


# ---------------------------------------------------------------- apply_autoscheduler
def _root_and_vectorize(pipeline, target, params):
    """A small real strategy: every Func but the outputs at root and vectorized, outputs split by
    rows (in parallel when params ask for it), vectorized by 8 when the estimate is wide enough."""
    outputs = pipeline.outputs()
    for f in pipeline.funcs():
        vx = f.args()[0]
        if all(f is not o for o in outputs):
            f.compute_root().vectorize(vx, 8)
    for o in outputs:
        est = o.estimates()
        vx, vy = o.args()[:2]
        if est[0] is not None and est[0][1] >= 8:
            o.vectorize(vx, 8)
        o.split(vy, yo, yi, 4)
        if int(params.extra.get("parallelism", "1")) > 1:
            o.parallel(yo)
    return hl.AutoSchedulerResults(params, target, schedule_to_python(pipeline.funcs()),
                                   details={"funcs": [f.name() for f in pipeline.funcs()]})


def test_apply_autoscheduler_schedules_and_computes_the_same(registry):
    registry.register_autoscheduler("TestRootVectorize", _root_and_vectorize)
    assert "TestRootVectorize" in registry.registered_autoschedulers()
    inp, bx, by, expected = _blur("auto")
    p = hl.Pipeline(by)
    default = np.asarray(p.realize([53, 37])).copy()
    assert np.array_equal(default, expected)
    by.set_estimates([(0, 53), (0, 37)])
    params = hl.AutoschedulerParams("TestRootVectorize", {"parallelism": 2})
    results = p.apply_autoscheduler(hl.get_host_target(), params)

    assert isinstance(results, hl.AutoSchedulerResults)
    assert results.autoscheduler_params is params and str(results.target) == str(hl.get_host_target())
    assert results.details == {"funcs": [f.name() for f in p.funcs()]}
    assert "auto_bx.compute_at(hl.LoopLevel.root())" in results.schedule_source
    assert "auto_by.parallel(hl.Var('yo'))" in results.schedule_source
    assert results.schedule_source == schedule_to_python(p.funcs())
    assert np.array_equal(np.asarray(p.realize([53, 37])), expected)

    # The source reproduces the schedule on a fresh copy of the algorithm.
    scheduled_json = p.schedule_to_json()
    _, _, by2, _ = _blur("auto")
    p2 = hl.Pipeline(by2)
    exec(results.schedule_source, {"hl": hl, **p2.funcs_by_name()})  # a Func per name given: variables
    assert p2.schedule_to_json() == scheduled_json


@pytest.mark.parametrize("target, expected", [
    (None, lambda: hl.get_jit_target_from_environment()),
    ("host-avx2", lambda: hl.Target("host-avx2")),
    (hl.Target("host"), lambda: hl.Target("host")),
])
def test_apply_autoscheduler_resolves_the_target(registry, target, expected):
    seen = []

    def record(pipeline, t, params):
        seen.append(t)
        return hl.AutoSchedulerResults()

    registry.register_autoscheduler("TestRecordTarget", record)
    f = hl.Func("tgt_f")
    f[x] = x
    params = hl.AutoschedulerParams("TestRecordTarget")
    results = hl.Pipeline(f).apply_autoscheduler(target, params)
    assert seen == [expected()]
    assert results.target == expected() and results.autoscheduler_params is params  # filled in when left unset
    with pytest.raises(hl.HalideError, match="bogus"):
        hl.Pipeline(f).apply_autoscheduler("host-bogus", params)


def test_a_failing_strategy_leaves_the_schedule_as_it_was(registry):
    def half_then_fail(pipeline, target, params):
        for f in pipeline.funcs():
            f.compute_root()
        raise hl.HalideError("strategy gave up")

    def wrong_result(pipeline, target, params):
        pipeline.outputs()[0].vectorize(x, 4)
        return "not results"

    registry.register_autoscheduler("TestFail", half_then_fail)
    registry.register_autoscheduler("TestWrong", wrong_result)
    inp, bx, by, expected = _blur("fail")
    by.split(y, yo, yi, 8)
    p = hl.Pipeline(by)
    before = p.schedule_to_json()
    with pytest.raises(hl.HalideError, match="strategy gave up"):
        p.apply_autoscheduler(None, hl.AutoschedulerParams("TestFail"))
    assert p.schedule_to_json() == before
    with pytest.raises(hl.HalideError, match="TestWrong.*not an hl.AutoSchedulerResults"):
        p.apply_autoscheduler(None, hl.AutoschedulerParams("TestWrong"))
    assert p.schedule_to_json() == before
    assert np.array_equal(np.asarray(p.realize([53, 37])), expected)


def test_unknown_or_missing_names_raise_listing_the_registered_ones(registry):
    registry.register_autoscheduler("TestAlpha", _root_and_vectorize)
    registry.register_autoscheduler("TestBeta", _root_and_vectorize)
    f = hl.Func("unk_f")
    f[x] = x
    p = hl.Pipeline(f)
    with pytest.raises(hl.HalideError, match="Unknown autoscheduler name 'TestNope'; known names are:") as e:
        p.apply_autoscheduler(None, hl.AutoschedulerParams("TestNope"))
    for name in registry.registered_autoschedulers():
        assert name in str(e.value)
    with pytest.raises(hl.HalideError, match="no Autoscheduler specified"):
        p.apply_autoscheduler(None, hl.AutoschedulerParams())
    with pytest.raises(hl.HalideError, match="AutoschedulerParams"):
        p.apply_autoscheduler(None, "TestAlpha")


def test_registering_names(registry):
    registry.register_autoscheduler("TestDup", _root_and_vectorize)
    registry.register_autoscheduler("TestDup", _root_and_vectorize)  # the same function again: fine
    with pytest.raises(hl.HalideError, match="TestDup.*already registered"):
        registry.register_autoscheduler("TestDup", lambda p, t, a: None)
    registry.register_autoscheduler("TestDup", print, replace=True)
    assert registry.find_autoscheduler("TestDup") is print
    registry.unregister_autoscheduler("TestDup")
    assert "TestDup" not in registry.registered_autoschedulers()
    with pytest.raises(hl.HalideError, match="not callable"):
        registry.register_autoscheduler("TestNotCallable", 3)
    with pytest.raises(hl.HalideError, match="non-empty"):
        registry.register_autoscheduler("", _root_and_vectorize)


def _sibling(tmp_path, monkeypatch, name: str, body: str):
    """A stand-in for the `autoscheduler` package, importable under `name`."""
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(autoschedulers, "SIBLING_PACKAGE", name)
    monkeypatch.delitem(sys.modules, name, raising=False)


def test_a_name_not_registered_is_looked_for_in_the_sibling_package(registry, tmp_path, monkeypatch):
    _sibling(tmp_path, monkeypatch, "pyhalide_test_sibling_ok", """
        import pyhalide as hl
        from pyhalide.autoschedulers import register_autoscheduler

        def _inline_all(pipeline, target, params):
            return hl.AutoSchedulerResults(params, target, "", details="from the sibling")

        register_autoscheduler("TestFromSibling", _inline_all)
    """)
    f = hl.Func("sib_f")
    f[x] = x
    results = hl.Pipeline(f).apply_autoscheduler(None, hl.AutoschedulerParams("TestFromSibling"))
    assert results.details == "from the sibling"
    with pytest.raises(hl.HalideError, match="Unknown autoscheduler name 'TestOther'.*TestFromSibling"):
        hl.Pipeline(f).apply_autoscheduler(None, hl.AutoschedulerParams("TestOther"))
    sys.modules.pop("pyhalide_test_sibling_ok", None)


def test_a_missing_or_broken_sibling_package_is_reported(registry, tmp_path, monkeypatch):
    f = hl.Func("nosib_f")
    f[x] = x
    monkeypatch.setattr(autoschedulers, "SIBLING_PACKAGE", "pyhalide_test_no_such_package")
    with pytest.raises(hl.HalideError, match="Unknown autoscheduler.*not installed"):
        hl.Pipeline(f).apply_autoscheduler(None, hl.AutoschedulerParams("TestRegisteredNowhere"))
    _sibling(tmp_path, monkeypatch, "pyhalide_test_sibling_broken", "import pyhalide_test_missing_dependency\n")
    with pytest.raises(hl.HalideError, match="importing the pyhalide_test_sibling_broken package failed"):
        hl.Pipeline(f).apply_autoscheduler(None, hl.AutoschedulerParams("TestRegisteredNowhere"))


# ---------------------------------------------------------------- a Halide-style script
def test_a_halide_style_autoscheduling_script_runs(registry):
    registry.register_autoscheduler("SomeRegisteredName", _root_and_vectorize)
    script = textwrap.dedent("""
        import numpy as np
        import pyhalide as hl

        x, y = hl.Var("x"), hl.Var("y")
        input = hl.ImageParam(hl.Float(32), 2, "script_input")
        clamped = hl.BoundaryConditions.repeat_edge(input)
        blur_x = hl.Func("script_blur_x")
        blur_x[x, y] = (clamped[x - 1, y] + clamped[x, y] + clamped[x + 1, y]) / 3
        output = hl.Func("script_output")
        output[x, y] = (blur_x[x, y - 1] + blur_x[x, y] + blur_x[x, y + 1]) / 3

        input.set_estimates([hl.Range(0, 1536), hl.Range(0, 2560)])
        output.set_estimate(x, 0, 1536).set_estimate(y, 0, 2560)
        hl.load_plugin("libautoschedule_adams2019.so")
        pipeline = hl.Pipeline(output)
        target = hl.get_jit_target_from_environment()
        params = hl.AutoschedulerParams("SomeRegisteredName", {"parallelism": 2})
        results = pipeline.apply_autoscheduler(target, params)

        data = np.random.default_rng(2).random((40, 24), dtype=np.float32)
        input.set(hl.Buffer(data))
        result = np.asarray(pipeline.realize([24, 40]))
    """)
    namespace: dict = {}
    exec(compile(script, "<halide-style script>", "exec"), namespace)
    results, data, result = namespace["results"], namespace["data"], namespace["result"]
    assert "script_output.parallel(hl.Var('yo'))" in results.schedule_source
    assert "script_output.vectorize(hl.Var('x'), 8, hl.TailStrategy.Auto)" in results.schedule_source
    p = np.pad(data, 1, mode="edge")
    h = (p[:, :-2] + p[:, 1:-1] + p[:, 2:]) / np.float32(3)
    expected = (h[:-2] + h[1:-1] + h[2:]) / np.float32(3)
    np.testing.assert_allclose(result, expected, rtol=1e-6)
