"""Pipelines as data (Halide's serialize_pipeline / deserialize_pipeline / deserialize_parameters):
a pipeline read back computes what it computed, with the same schedule, in this process or a
fresh one; a file that is not one is refused without running anything."""

from __future__ import annotations

import base64
import io
import json
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyhalide as hl
from pyhalide.testing.corpus import CASES
from pyhalide.testing.schedule_strategies import assert_same, scheduled


def realize(pipeline, case) -> list[np.ndarray]:
    """What case.realize() computes, from another pipeline of the same outputs."""
    if case.mins is None:
        result = pipeline.realize(case.sizes)
    else:
        bufs = []
        for f in pipeline.outputs():
            for t in f.types():
                b = hl.Buffer(t, case.sizes)
                b.set_min(*case.mins)
                bufs.append(b)
        result = pipeline.realize(bufs)
    result = result if isinstance(result, list) else [result]
    return [np.array(np.asarray(b)) for b in result]


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=3, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(data=st.data())
def test_corpus_pipelines_round_trip_with_their_schedules(name, data):
    """Every corpus pipeline under a random valid schedule: read back (its inputs bound through
    the Params serialize_pipeline returns), it has the same schedule and computes the same."""
    sched = data.draw(scheduled(CASES[name]), label="schedule")
    case = sched.built
    original = case.pipeline()
    blob, params = hl.serialize_pipeline(original, get_params=True)
    restored = hl.deserialize_pipeline(blob, params)
    assert restored.schedule_to_json() == original.schedule_to_json()
    assert restored.structural_hash() == original.structural_hash()
    try:
        expected = case.realize()
    except hl.HalideError as e:  # a schedule lowering refuses is refused read back too, for the same reason
        with pytest.raises(type(e)) as again:
            realize(restored, case)
        assert re.sub(r"\$\d+", "", str(again.value)) == re.sub(r"\$\d+", "", str(e))
        return
    assert_same(realize(restored, case), expected, False, f"{name} read back")


def rich_pipeline():
    """Most of what a pipeline holds: an ImageParam with an Expr constraint and estimates, Params
    with values and ranges, an embedded Buffer at a shifted min, an RDom with a where clause, a
    Tuple, an inline reduction, a specialization, a wrapper, a requirement."""
    inp = hl.ImageParam(hl.UInt(16), 2, "image")
    gain = hl.Param(hl.Float(32), "gain", 1.5)
    gain.set_range(0.0, 4.0)
    k = hl.Param(hl.Int(32), "k", 3)
    table = hl.Buffer(np.arange(12, dtype=np.int16).reshape(3, 4))
    table.set_min([-1, 2])
    x, y, xi, yi = hl.Var("x"), hl.Var("y"), hl.Var("xi"), hl.Var("yi")
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    blur = hl.Func("blur")
    blur[x, y] = (clamped[x - 1, y] + clamped[x, y] * 2 + clamped[x + 1, y]) // 4
    r = hl.RDom([(0, 5), (0, 3)], "r")
    r.where(r.x != r.y)
    acc = hl.Func("acc")
    acc[x, y] = hl.Tuple(hl.i32(0), hl.f32(0))
    acc[x, y] = hl.Tuple(acc[x, y][0] + hl.i32(blur[x + r.x, y + r.y]),
                         acc[x, y][1] + hl.f32(table[r.y - 1, r.x % 3 + 2]))
    out = hl.Func("out")
    out[x, y] = hl.f32(acc[x, y][0] + hl.maximum(hl.RDom([(0, 3)])[0] * k)) * gain + acc[x, y][1]
    inp.dim(1).set_stride(inp.dim(0).extent())
    inp.set_estimates([(0, 64), (0, 48)])
    out.set_estimates([(0, 60), (0, 40)])
    out.tile(x, y, xi, yi, 16, 8).vectorize(xi, 8).parallel(y)
    out.specialize(k == 3).unroll(xi, 2)
    acc.compute_at(out, x)
    blur.compute_root().vectorize(x, 8)
    blur.in_(acc).compute_at(out, x)
    p = hl.Pipeline(out)
    p.add_requirement(k > 0, "k must be positive")
    image = (np.arange(48 * 64) % 1021).astype(np.uint16).reshape(48, 64)
    inp.set(hl.Buffer(image))
    return p, inp, image


def test_a_rich_pipeline_round_trips_in_a_fresh_process(tmp_path):
    """Names differ in another process (no `out$1` there): the schedule still applies by the
    names schedule records use, and the result is the same."""
    p, inp, image = rich_pipeline()
    expected = np.asarray(p.realize([60, 40]))
    p.compile_to_lowered_stmt(str(tmp_path / "expected.stmt"))
    path = tmp_path / "rich.hlpipe"
    hl.serialize_pipeline(p, path)
    np.save(tmp_path / "image.npy", image)
    script = f"""
import numpy as np, pyhalide as hl
image = hl.ImageParam(hl.UInt(16), 2, "image")
image.set(hl.Buffer(np.load({str(tmp_path / "image.npy")!r})))
p = hl.deserialize_pipeline({str(path)!r}, {{"image": image.parameter()}})
np.save({str(tmp_path / "got.npy")!r}, np.asarray(p.realize([60, 40])))
p.compile_to_lowered_stmt({str(tmp_path / "got.stmt")!r})
"""
    subprocess.run([sys.executable, "-c", script], check=True)
    np.testing.assert_array_equal(np.load(tmp_path / "got.npy"), expected)
    # the same loops, specializations and all (names aside: this process has made other `acc`s
    # and hl.maximum Funcs, so its names are numbered on)
    got, want = (re.sub(r"\$\d+|(?<=maximum)\d+", "", (tmp_path / n).read_text())
                 for n in ("got.stmt", "expected.stmt"))
    assert "k == 3" in want
    assert got == want


def test_params_come_from_the_file_or_from_user_params():
    p, inp, image = rich_pipeline()
    data = hl.serialize_pipeline(p)
    params = hl.deserialize_parameters(data)
    assert sorted(params) == ["gain", "image", "k"]
    assert params["gain"].type() == hl.Float(32) and params["image"].dimensions() == 2
    params["image"].set(hl.Buffer(image))
    restored = hl.deserialize_pipeline(data, params)  # gain and k keep the file's values
    np.testing.assert_array_equal(np.asarray(restored.realize([60, 40])), np.asarray(p.realize([60, 40])))
    k = hl.Param(hl.Int(32), "k", -2)
    with pytest.raises(hl.HalideError, match="k must be positive"):
        hl.deserialize_pipeline(data, {"image": inp, "k": k}).realize([60, 40])
    with pytest.raises(hl.HalideError, match="must be a Param of type int32"):
        hl.deserialize_pipeline(data, {"k": hl.Param(hl.Int(16), "k", 1)})
    with pytest.raises(hl.HalideError, match="must be an ImageParam of type uint16 with 2 dimensions"):
        hl.deserialize_pipeline(data, {"image": hl.ImageParam(hl.UInt(16), 3, "image")})


def test_what_is_not_a_pipeline_is_refused_without_running_anything(tmp_path):
    x = hl.Var("x")
    f = hl.Func("f")
    f[x] = x * 2
    doc = json.loads(hl.serialize_pipeline(hl.Pipeline(f)))
    with pytest.raises(hl.HalideError, match="not a serialized pipeline"):
        hl.deserialize_pipeline(b"\x80\x04pickle")
    with pytest.raises(hl.HalideError, match="not a pyhalide serialized pipeline"):
        hl.deserialize_pipeline(json.dumps({"format": "other"}).encode())
    bad = json.loads(json.dumps(doc))
    bad["funcs"][0]["definitions"][0]["values"][0] = ["system", "rm -rf /"]
    with pytest.raises(hl.HalideError, match="an unknown IR node"):
        hl.deserialize_pipeline(json.dumps(bad).encode())
    bad = json.loads(json.dumps(doc))
    bad["outputs"] = [5]
    with pytest.raises(hl.HalideError, match="a reference to output 5 that the file lacks"):
        hl.deserialize_pipeline(json.dumps(bad).encode())
    pickled = io.BytesIO()
    np.save(pickled, np.array([object()], dtype=object), allow_pickle=True)
    bad = json.loads(json.dumps(doc))
    bad["buffers"] = [{"name": "b", "mins": [0], "npy": base64.b64encode(pickled.getvalue()).decode()}]
    with pytest.raises(hl.HalideError, match="a Buffer's elements are unreadable"):
        hl.deserialize_pipeline(json.dumps(bad).encode())
    bad = json.loads(json.dumps(doc))
    bad["funcs"][0]["estimates"] = {"x": "wide"}
    with pytest.raises(hl.HalideError, match="a malformed pipeline"):
        hl.deserialize_pipeline(json.dumps(bad).encode())
    bad = json.loads(json.dumps(doc))
    bad["version"] = 99
    with pytest.raises(hl.HalideError, match="format version 99"):
        hl.deserialize_pipeline(json.dumps(bad).encode())
