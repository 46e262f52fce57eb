"""Halide 21's Func, Stage, Pipeline and parameter API as its Python tests use it: updates of
undefined Funcs through unevaluated references, declared types, loop partitioning, requirements,
warnings on stdout, output-buffer constraints and bounds queries, boundary-condition arguments.
Where the real Halide is installed it is the oracle for values."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import pyhalide as hl

x, y = hl.Var("x"), hl.Var("y")


def _real():
    return pytest.importorskip("halide", reason="the real Halide (pip install halide) is the oracle")


# ------------------------------------------------------------------ f[x] op= e on an undefined Func
def _implicit_updates(lib):
    """Values of updates that define their Func implicitly, as a list per case."""
    v = lib.Var("v")
    out = []
    for op, rhs in (("+", 3), ("-", 2), ("*", 5), ("/", 2), ("+", 1.5), ("/", 4.0)):
        f = lib.Func("iu")
        if op == "+":
            f[v] += rhs
        elif op == "-":
            f[v] -= rhs
        elif op == "*":
            f[v] *= rhs
        else:
            f[v] /= rhs
        out.append((str(f.type()), np.asarray(f.realize([2])).tolist()))
    g = lib.Func("iu_g")
    g[v] = v % 3
    h = lib.Func("iu_h")
    h[g[1]] += 7  # a non-Var location: the pure definition gets a Var of its own
    out.append(np.asarray(h.realize([3])).tolist())
    k = lib.Func("iu_k")
    k[lib._] += g[lib._] * 2  # hl._ stands for what the value uses
    out.append(np.asarray(k.realize([4])).tolist())
    return out


def test_an_update_of_an_undefined_func_defines_it_with_the_identity():
    assert _implicit_updates(hl) == [("int32", [3, 3]), ("int32", [-2, -2]), ("int32", [5, 5]), ("int32", [0, 0]),
                                     ("float32", [1.5, 1.5]), ("float32", [0.25, 0.25]), [0, 7, 0], [0, 2, 4, 0]]


def test_implicit_updates_match_halide():
    assert _implicit_updates(hl) == _implicit_updates(_real())


def test_the_pure_definition_reuses_the_updates_var_names():
    f = hl.Func("reuses_x")
    f[x] += x * 2
    assert [a.name() for a in f.args()] == ["x"]
    assert np.asarray(f.realize([4])).tolist() == [0, 2, 4, 6]


def test_an_unevaluated_reference_has_no_operators_and_defines_once():
    f = hl.Func("uneval")
    ref = f[x]
    ref += 1
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for \+=: "
                                        r"'halide\.halide_\._UnevaluatedFuncRefExpr' and 'int'"):
        ref += 1
    f[x] = ref
    with pytest.raises(hl.HalideError, match="Cannot use an unevaluated reference to 'uneval' to define an update "
                                             "when a pure definition already exists"):
        f[x] = ref
    assert np.asarray(f.realize([2])).tolist() == [1, 1]
    other = hl.Func("uneval_other")
    with pytest.raises(hl.HalideError, match="Cannot use an unevaluated reference to 'uneval' to define an update at "
                                             "a different location"):
        other[x] = ref
    g = hl.Func("uneval_moved")
    moved = g[x] + 1
    with pytest.raises(hl.HalideError, match="at a different location"):
        g[0] = moved
    with pytest.raises(hl.HalideError, match=r"Can't call Func \"uneval_r\" because it has not yet been defined"):
        r = hl.Func("uneval_r")
        r[x] = 1 + r[x]


def test_arithmetic_on_a_call_of_a_defined_func_is_an_expr():
    h = hl.Func("defined_h")
    h[x] = x
    left = h[x]
    left += 5
    left += hl.f32(0.5)
    assert isinstance(left, hl.Expr) and left.type() == hl.Float(32)
    assert h.num_update_definitions() == 0


def test_an_update_of_a_declared_func_takes_its_type_and_checks_it():
    f = hl.Func(hl.Int(32), 1, "declared_i32")
    with pytest.raises(hl.HalideError, match=r"In update definition 0 of Func declared_i32: Tuple element 0 of "
                                             "update definition has type float32, but pure definition has type int32"):
        f[x] += 1.5
    g = hl.Func(hl.Float(64), 1, "declared_f64_ok")
    g[x] += hl.f64(0.25)
    assert g.type() == hl.Float(64) and np.asarray(g.realize([2])).tolist() == [0.25, 0.25]


# ------------------------------------------------------------------ declared types and dimensions
def test_queries_of_an_undefined_func_say_why_they_fail():
    f = hl.Func("undeclared")
    for method, what in (("type", "type"), ("outputs", "type"), ("dimensions", "dimension"), ("types", "type")):
        with pytest.raises(hl.HalideError, match=rf"Can't call Func::{method} on Func \"undeclared\" because it is "
                                                 rf"undefined or has no {what} requirements"):
            getattr(f, method)()
    with pytest.raises(hl.HalideError, match=r"Can't call type\(\) on call to Func \"undeclared\" because it is "
                                             "undefined"):
        f[x, y].type()


def test_a_declared_func_answers_before_it_is_defined_and_checks_its_definition():
    f = hl.Func(hl.Int(16), 2, "declared")
    assert (f.defined(), f.type(), f.types(), f.outputs(), f.dimensions()) == (False, hl.Int(16), [hl.Int(16)], 1, 2)
    assert f[x, y].type() == hl.Int(16) and f[x, y].types() == [hl.Int(16)] and len(f[x, y]) == 1
    with pytest.raises(hl.HalideError, match="has not yet been defined"):
        g = hl.Func("reads_declared")
        g[x, y] = f[x, y]
    with pytest.raises(hl.HalideError, match=r"Func \"declared\" is constrained to only hold values of type int16 "
                                             r"but is defined with values of type int32\."):
        f[x, y] = 0  # a Python int is an int32, as in Halide
    with pytest.raises(hl.HalideError, match=r"constrained to have exactly 2 dimensions, but is defined with 1"):
        f[x] = hl.i16(0)
    t = hl.Func((hl.Int(32), hl.Float(32)), 1, "declared_tuple")
    with pytest.raises(hl.HalideError, match=r"Can't call Func::type on Func \"declared_tuple\" because it returns a "
                                             "Tuple"):
        t.type()
    with pytest.raises(hl.HalideError, match=r"only hold values of type \(int32, float32\) but is defined with "
                                             r"values of type \(int16, float64\)"):
        t[x] = (hl.i16(0), hl.f64(0))
    f[x, y] = hl.i16(x + y)
    assert np.asarray(f.realize([2, 2])).tolist() == [[0, 1], [1, 2]]


# ------------------------------------------------------------------ schedules: tile lists, partition, split_vars
def _tiled(lib, how):
    f = lib.Func("tiled")
    xo, yo, xi, yi = (lib.Var(n) for n in ("xo", "yo", "xi", "yi"))
    f[x, y] = x + 10 * y
    f[x, y] += 1
    if how == "lists":
        f.tile([x, y], [xo, yo], [xi, yi], [4, 2])
        f.update(0).tile([x, y], [xi, yi], [2, 2], lib.TailStrategy.GuardWithIf)
    else:
        f.tile(x, y, xo, yo, xi, yi, 4, 2)
        f.update(0).tile(x, y, xi, yi, 2, 2, lib.TailStrategy.GuardWithIf)
    return f


def test_tile_takes_lists_as_halide_does():
    lists, args = _tiled(hl, "lists"), _tiled(hl, "args")
    assert [v.name() for v in lists.split_vars()] == [v.name() for v in args.split_vars()] == \
        ["xi", "yi", "xo", "yo", "__outermost"]
    assert [v.name() for v in lists.update(0).split_vars()] == ["xi", "yi", "x", "y", "__outermost"]
    np.testing.assert_array_equal(np.asarray(lists.realize([9, 5])), np.asarray(args.realize([9, 5])))
    np.testing.assert_array_equal(np.asarray(lists.realize([9, 5])), np.add.outer(10 * np.arange(5), np.arange(9)) + 1)
    bad = hl.Func("bad_tile")
    bad[x, y] = x
    with pytest.raises(hl.HalideError, match="the lists passed to tile must all have the same"):
        bad.tile([x, y], [x], [4, 4])


def test_split_vars_lists_the_loops_innermost_first():
    f = hl.Func("split_vars_f")
    r = hl.RDom([(0, 3), (0, 2)], "sv")
    f[x] = x
    f[x] += r.x * r.y
    f.update(0).split(r.x, hl.RVar("rxo"), hl.RVar("rxi"), 2)
    loops = f.update(0).split_vars()
    assert [type(v).__name__ for v in loops] == ["RVar", "RVar", "RVar", "Var", "Var"]
    assert [v.name() for v in loops] == ["rxi", "rxo", r.y.name(), "x", "__outermost"]
    assert [v.name() for v in f.split_vars()] == ["x", "__outermost"]


def test_partition_policies_are_recorded_replayed_and_change_no_value():
    def build():
        f = hl.Func("partitioned")
        f[x, y] = hl.select(x < 3, x, y)
        g = hl.Func("partitioned_g")
        g[x] = x * 2
        g[x] += 1
        return f, g

    f, g = build()
    f.vectorize(x, 4).partition(x, hl.Partition.Never).partition(y, hl.Partition.Always)
    g.never_partition_all()
    g.update(0).always_partition([x])
    sched = f._schedule.stages[0]
    assert {d.name: d.partition for d in sched.dims} == {"x.v.0": "Auto", "x": "Never", "y": "Always"}
    assert {d.partition for d in g._schedule.stages[0].dims} == {"Never"}
    record = hl.Pipeline([f, g]).schedule_to_json()
    assert ["partition", "never_partition_all"] <= [m for entries in json.loads(record).values() for _, m, _ in entries]
    assert "hl.Partition.Never" in f.to_python_source()
    f2, g2 = build()
    hl.Pipeline([f2, g2]).apply_schedule_json(record)
    assert {d.name: d.partition for d in f2._schedule.stages[0].dims} == {d.name: d.partition for d in sched.dims}
    # as in Halide: nothing in f's loop over y to partition it around, so Always fails to compile
    with pytest.raises(hl.CompileError, match=r"Loop Partition Policy is set to Always for partitioned\.s0\.y, "
                                              "but no loop partitioning was performed"):
        f.realize([9, 4])
    with pytest.raises(hl.CompileError, match=r"Always for partitioned_g\.s1\.x, but no loop partitioning"):
        g.realize([9])
    f.partition(y, hl.Partition.Auto)
    np.testing.assert_array_equal(np.asarray(f.realize([9, 4])), np.asarray(build()[0].realize([9, 4])))
    with pytest.raises(hl.HalideError, match="unknown loop partition policy"):
        f.partition(x, "Sometimes")
    with pytest.raises(hl.HalideError, match="partition of unknown dimension z"):
        f.partition(hl.Var("z"), hl.Partition.Auto)
    bad = json.loads(record)
    bad["partitioned"].append([0, "partition", [{"var": "x", "rvar": False}, "Sometimes"]])
    with pytest.raises(hl.HalideError, match="expected a loop partition policy"):
        hl.Pipeline([f2, g2]).apply_schedule_json(json.dumps(bad))


# ------------------------------------------------------------------ warnings on stdout
def test_an_unscheduled_update_warns_unless_marked(capsys):
    f = hl.Func("half_scheduled")
    f[x] = x
    f[x] += 5
    f.vectorize(x, 4)
    f.realize([8])
    out = capsys.readouterr().out
    assert out.startswith("Warning: Update definition 0 of function half_scheduled has not been scheduled, even "
                          "though some other definitions have been.")
    assert "call half_scheduled.update(0).unscheduled() to suppress this warning" in out
    g = hl.Func("marked_unscheduled")
    g[x] = x
    g[x] += 5
    g.vectorize(x, 4)
    g.update(0).unscheduled()
    assert np.asarray(g.realize([8])).tolist() == list(range(5, 13))
    assert capsys.readouterr().out == ""
    with pytest.raises(hl.HalideError, match="Stage::unscheduled called on an update definition with a schedule"):
        f.update(0).vectorize(x, 4).unscheduled()
    record = hl.Pipeline(g).schedule_to_json()
    assert [1, "unscheduled", []] in json.loads(record)["marked_unscheduled"]


def test_bounds_of_an_inlined_func_warn(capsys):
    f = hl.Func("inlined_bounded")
    f[x] = x * 3
    f.bound(x, 0, 16)
    g = hl.Func("reads_inlined")
    g[x] = f[x] + 1
    assert np.asarray(g.realize([4])).tolist() == [1, 4, 7, 10]
    assert capsys.readouterr().out == ("Warning: It is meaningless to bound dimension x of function inlined_bounded "
                                       "to be within [0, 16] because the function is scheduled inline.\n")


# ------------------------------------------------------------------ requirements
def test_requirements_fail_the_run_with_their_message():
    delta = hl.Param(hl.Int(32), "req_delta")
    flag = hl.Param(hl.Bool(), "req_flag", True)
    only_here = hl.Param(hl.UInt(8), "req_only_here", 200)
    f = hl.Func("req_f")
    f[x] = x + delta
    p = hl.Pipeline(f)
    p.add_requirement(delta != 0)
    p.add_requirement(delta > 0, "negative {values}", delta, flag, only_here)
    delta.set(2)
    assert np.asarray(p.realize([3])).tolist() == [2, 3, 4]
    delta.set(0)
    with pytest.raises(hl.HalideError, match=r"^Error: Requirement Failed: \(false\) $"):
        p.realize([3])
    delta.set(-1)
    with pytest.raises(hl.HalideError, match=r"Requirement Failed: \(false\) negative \{values\} -1 true 200$"):
        p.realize([3])
    flag.set(False)
    with pytest.raises(hl.HalideError, match=r"negative \{values\} -1 false 200$"):
        p.realize([3])
    assert any(a._source is only_here for a in p.infer_arguments())


def test_requirements_match_halide():
    def failures(lib):
        d = lib.Param(lib.Int(32), "rq_d")
        f = lib.Func("rq_f")
        f[lib.Var("v")] = d
        p = lib.Pipeline(f)
        p.add_requirement(d < 10, "too big:", d, "limit", 10)
        out = []
        for v in (3, 12):
            d.set(v)
            try:
                out.append(np.asarray(p.realize([2])).tolist())
            except lib.HalideError as e:
                out.append(str(e).strip().removeprefix("Error: "))
        return out

    assert failures(hl) == failures(_real()) == [[3, 3], "Requirement Failed: (false) too big: 12 limit 10"]


def test_requirements_refuse_what_they_cannot_check():
    f = hl.Func("req_g")
    f[x] = x
    p = hl.Pipeline(f)
    with pytest.raises(hl.HalideError, match="Requirement .* refers to Var or RVar x"):
        p.add_requirement(x > 2)
    with pytest.raises(hl.HalideError, match="Requirement .* calls Func req_g"):
        p.add_requirement(f[0] > 2)
    with pytest.raises(hl.HalideError, match="not bool"):
        p.add_requirement(hl.Expr(3))
    with pytest.raises(hl.HalideError, match="error argument 1 .* has type float32"):
        p.add_requirement(hl.Param(hl.Int(32), "req_q", 1) > 0, hl.f32(1.5))
    with pytest.raises(hl.HalideError, match="Pipeline is undefined"):
        hl.Pipeline().add_requirement(hl.Expr(True))


# ------------------------------------------------------------------ realize and compile_jit
def test_realize_into_the_wrong_buffer_names_the_output():
    f = hl.Func("wrong_out")
    f[x, y] = hl.u16(x + y)
    with pytest.raises(hl.HalideError, match="Error: Output buffer wrong_out has type uint16 but type of the buffer "
                                             "passed in is uint8"):
        f.realize(hl.Buffer(hl.UInt(8), [2, 2]))
    with pytest.raises(hl.HalideError, match="Output buffer wrong_out requires a buffer of exactly 2 dimensions, but "
                                             "the buffer passed in has 1 dimensions"):
        f.realize(hl.Buffer(hl.UInt(16), [2]))
    with pytest.raises(hl.HalideError, match=r"Realization requires 2 output\(s\) but pipeline produces 1 result"):
        f.realize([hl.Buffer(hl.UInt(16), [2, 2]), hl.Buffer(hl.UInt(16), [2, 2])])


def test_compile_jit_needs_no_buffer_for_an_image_param():
    im = hl.ImageParam(hl.UInt(16), 2, "jit_unbound")
    f = hl.Func("jit_blur")
    f[x, y] = (im[x, y] + im[x + 1, y]) / 2
    f.compile_jit()
    im.set(hl.Buffer(np.arange(12, dtype=np.uint16).reshape(3, 4)))
    np.testing.assert_array_equal(np.asarray(f.realize([3, 3])), (np.arange(12).reshape(3, 4)[:, :3] * 2 + 1) // 2)


def test_undefined_params_and_pipelines_print_as_halides():
    assert [str(hl.ImageParam()), str(hl.OutputImageParam()), str(hl.Pipeline())] == [
        "<halide.ImageParam ImageParam()>", "<halide.OutputImageParam OutputImageParam()>",
        "<halide.Pipeline Pipeline()>"]
    assert repr(hl.ImageParam(hl.UInt(16), 2, "printed")) == "<halide.ImageParam 'printed', dims: 2, type: uint16>"
    f = hl.Func("printed_f")
    f[x] = x
    assert repr(hl.Pipeline([f])) == "<halide.Pipeline ['printed_f']>"
    for method in ("name", "type", "dimensions"):
        with pytest.raises(hl.HalideError, match="Parameter is undefined"):
            getattr(hl.ImageParam(), method)()
    with pytest.raises(hl.HalideError, match="Pipeline is undefined"):
        hl.Pipeline().realize([3])


# ------------------------------------------------------------------ output buffers, constraints, bounds queries
def test_output_buffers_are_named_as_the_buffers_a_pipeline_writes():
    f = hl.Func("ob_f")
    f[x, y] = hl.u8(x)
    o = f.output_buffer()
    assert (o.name(), o.type(), o.dimensions(), repr(o)) == ("ob_f", hl.UInt(8), 2,
                                                             "<halide.OutputImageParam 'ob_f', dims: 2, type: uint8>")
    assert o is not None and str(o.dim(1).extent()) == "ob_f.extent.1" and f.output_buffer().name() == "ob_f"
    t = hl.Func("ob_t")
    t[x] = (x, hl.f32(x))
    assert [b.name() for b in t.output_buffers()] == ["ob_t.0", "ob_t.1"]
    with pytest.raises(hl.HalideError, match=r"Can't call Func::output_buffer on Func \"ob_t\" because it returns "
                                             "a Tuple"):
        t.output_buffer()


def test_output_constraints_are_checked_and_shape_realize():
    f = hl.Func("oc_f")
    f[x] = x * 2
    f.output_buffer().dim(0).set_extent(16)
    out = f.realize([10])  # as Halide: a bounds query makes it 16 wide, the result is cropped back
    assert (out.dim(0).min(), out.dim(0).extent(), np.asarray(out).tolist()) == (0, 10, list(range(0, 20, 2)))
    with pytest.raises(hl.HalideError, match=r"Constraint violated: oc_f.extent.0 \(6\) == 16 \(16\)"):
        f.realize(hl.Buffer(hl.Int(32), [6]))
    p = hl.Param(hl.Int(32), "oc_p", 3)
    g = hl.Func("oc_g")
    g[x] = x
    g.output_buffer().dim(0).set_min(p)
    b = hl.Buffer(hl.Int(32), [4]).set_min([3])
    g.realize(b)
    assert np.asarray(b).tolist() == [3, 4, 5, 6]
    p.set(2)
    with pytest.raises(hl.HalideError, match=r"Constraint violated: oc_g.min.0 \(3\) == oc_p \(2\)"):
        g.realize(b)
    with pytest.raises(hl.HalideError, match="refers to Var or RVar x"):
        g.output_buffer().dim(0).set_extent(x)


def test_symbolic_input_constraints_are_checked_when_the_pipeline_runs():
    a, b = hl.ImageParam(hl.Int(32), 1, "sc_a"), hl.ImageParam(hl.Int(32), 1, "sc_b")
    a.dim(0).set_extent(b.dim(0).extent() * 2)
    f = hl.Func("sc_f")
    f[x] = a[x] + b[x // 2]
    a.set(hl.Buffer(np.arange(6, dtype=np.int32)))
    b.set(hl.Buffer(np.arange(3, dtype=np.int32)))
    assert np.asarray(f.realize([6])).tolist() == [0, 1, 3, 4, 6, 7]
    b.set(hl.Buffer(np.arange(4, dtype=np.int32)))
    with pytest.raises(hl.HalideError, match=r"Constraint violated: sc_a.extent.0 \(6\) == \(sc_b.extent.0 \* 2\) "
                                             r"\(8\)"):
        f.realize([6])


def _inferred(lib):
    """The shapes infer_input_bounds gives inputs whose constraints refer to each other."""
    inp = lib.ImageParam(lib.Float(32), 2, "ib_in")
    aux = lib.ImageParam(lib.Float(32), 1, "ib_aux")
    xx, yy = lib.Var("x"), lib.Var("y")
    f = lib.Func("ib_f")
    f[xx, yy] = inp[xx * 2 + 1, yy - 1] + inp[xx, yy + 2] + aux[yy]
    f[xx, yy] += 1.0
    f.update(0).vectorize(xx, 4)
    inp.dim(0).set_bounds(inp.dim(1).min() - 3, inp.dim(1).extent() + 12)
    inp.dim(1).set_extent(aux.dim(0).extent() + 4)
    aux.dim(0).set_bounds(min=-1, extent=20)
    lib.Pipeline(f).infer_input_bounds([8, 6])
    shapes = [(inp.get().dim(d).min(), inp.get().dim(d).extent()) for d in range(2)]
    return shapes + [(aux.get().dim(0).min(), aux.get().dim(0).extent())]


def test_infer_input_bounds_solves_constraints_between_inputs():
    assert _inferred(hl) == [(-4, 21), (-1, 10), (-1, 20)]


def test_infer_input_bounds_matches_halide():
    assert _inferred(hl) == _inferred(_real())


def test_infer_input_bounds_binds_only_what_is_unbound():
    im = hl.ImageParam(hl.UInt(8), 2, "ib_plain")
    f = hl.Func("ib_plain_f")
    f[x, y] = im[x + 1, y] + im[x, y + 2]
    f.infer_input_bounds([4, 3])
    got = im.get()
    assert [(got.dim(d).min(), got.dim(d).extent()) for d in range(2)] == [(0, 5), (0, 5)]
    got.fill(1)
    assert (np.asarray(f.realize([4, 3])) == 2).all()
    f.infer_input_bounds(hl.Buffer(hl.UInt(8), [40, 30]))  # bound already: nothing changes
    assert im.get() is got
    g = hl.Func("ib_bad")
    im2 = hl.ImageParam(hl.UInt(8), 1, "ib_bad_in")
    g[x] = im2[x]
    im2.dim(0).set_bounds(0, 3)
    with pytest.raises(hl.HalideError, match="Applying the constraints on ib_bad_in to the required region made it "
                                             "smaller in dimension 0. Required size: 0 to 4. Constrained size: 0 to 2"):
        g.infer_input_bounds([5])


# ------------------------------------------------------------------ boundary conditions
def _bounded_values(lib):
    data = np.arange(20, dtype=np.uint8).reshape(4, 5)
    buf = lib.Buffer(data)
    xx, yy = lib.Var("x"), lib.Var("y")
    src = lib.Func("bc_src")
    src[xx, yy] = buf[xx, yy]
    bc = lib.BoundaryConditions
    wrapped = [
        bc.repeat_edge(f=buf, bounds=[(0, 5), (lib.Expr(), lib.Expr())]),
        bc.mirror_image(f=src, bounds=[(0, 5), (0, 4)]),
        bc.constant_exterior(f=buf, exterior=9, bounds=[(1, 3)]),
        bc.mirror_interior(buf),
        bc.repeat_image(f=src, bounds=[lib.Range(0, 5), (lib.Expr(), lib.Expr())]),
    ]
    out = []
    for w in wrapped:
        g = lib.lambda_func(xx, yy, w[lib.clamp(xx - 2, -3, 7), lib.clamp(yy, 0, 3)])
        r = lib.Buffer(lib.UInt(8), [9, 4])
        g.realize(r)
        out.append(np.asarray(r).tolist())
    return out


def test_boundary_conditions_take_halides_keywords_and_undefined_bounds():
    data = np.arange(20, dtype=np.int64).reshape(4, 5)
    values = _bounded_values(hl)
    xs = np.clip(np.arange(9) - 2, -3, 7)
    np.testing.assert_array_equal(values[0], data[:, np.clip(xs, 0, 4)][np.arange(4)])
    np.testing.assert_array_equal(values[2], np.where((xs >= 1) & (xs < 4), data[:, np.clip(xs, 1, 3)], 9))


def test_boundary_conditions_match_halide():
    assert _bounded_values(hl) == _bounded_values(_real())


def test_boundary_conditions_refuse_bounds_that_do_not_fit():
    buf = hl.Buffer(np.zeros((3, 4), np.uint8), "bc_refused")
    with pytest.raises(ValueError, match="Invalid arguments to repeat_edge: partially undefined bounds for dimension "
                                         "1 of bc_refused"):
        hl.BoundaryConditions.repeat_edge(buf, [(0, 4), (hl.Expr(), 3)])
    with pytest.raises(hl.HalideError, match="Invalid arguments to mirror_image: 3 bounds for the 2 dimensions"):
        hl.BoundaryConditions.mirror_image(buf, [(0, 4), (0, 3), (0, 1)])
    f = hl.Func("bc_func")
    f[x, y] = x + y
    edge = hl.BoundaryConditions.repeat_edge(f, [(0, 2)])
    assert [a.name() for a in edge.args()] == ["x", "y"]  # a Func's wrapper has its arguments, as in Halide
    assert np.asarray(edge.realize([4, 2])).tolist() == [[0, 1, 1, 1], [1, 2, 2, 2]]


def test_lambda_func_defines_a_new_func():
    f = hl.lambda_func(x, y, x * 10 + y)
    assert f.dimensions() == 2 and np.asarray(f.realize([2, 3])).tolist() == [[0, 10], [1, 11], [2, 12]]
    with pytest.raises(hl.HalideError, match="argument 1 .* is not a Var"):
        hl.lambda_func(hl.Expr(1), x)


def _queried(lib):
    """The shapes a bounds query gives an output whose constraints refer to its own extent and an
    input whose constraints refer to the output (found by repeating the query)."""
    inp = lib.ImageParam(lib.Int(16), 2, "bq_in")
    xx, yy = lib.Var("x"), lib.Var("y")
    f = lib.Func("bq_f")
    f[xx, yy] = inp[xx - 2, yy] + inp[xx, yy + 1]
    f[xx, yy] += lib.i16(1)
    f.update(0).vectorize(xx, 4)
    o = f.output_buffer()
    o.dim(0).set_bounds(min=0, extent=lib.select(o.dim(0).extent() < 13, o.dim(0).extent() + 2, o.dim(0).extent()))
    inp.dim(1).set_extent(o.dim(0).extent() - 1)
    query = lib.Buffer.make_bounds_query(type=lib.Int(16), sizes=[5, 3])
    query.set_min([1, 4])
    f.infer_input_bounds(query)
    shapes = [(query.dim(d).min(), query.dim(d).extent()) for d in range(2)]
    return shapes + [(inp.get().dim(d).min(), inp.get().dim(d).extent()) for d in range(2)]


def test_a_bounds_query_buffer_takes_the_shape_the_constraints_settle_on():
    assert _queried(hl) == [(0, 16), (4, 3), (-2, 18), (4, 15)]
    f = hl.Func("bq_realized")
    f[x] = x
    f[x] += 1
    f.update(0).vectorize(x, 4)
    query = hl.Buffer.make_bounds_query(hl.Int(32), [5])
    assert f.realize(query) is query and (query.dim(0).min(), query.dim(0).extent()) == (0, 8)


def test_bounds_queries_match_halide():
    assert _queried(hl) == _queried(_real())


def _input_queried(lib):
    """An ImageParam bound to a bounds-query buffer: realize (into a buffer, or of sizes) fills in
    the region the pipeline reads of it and computes nothing."""
    ip = lib.ImageParam(lib.Int(32), 2, "iq_in")
    xx, yy = lib.Var("x"), lib.Var("y")
    f = lib.Func("iq_f")
    f[xx, yy] = ip[xx + 1, yy - 2] * 2 + ip[xx - 1, yy]
    shapes = []
    for target in ("buffer", "sizes"):
        q = lib.Buffer.make_bounds_query(lib.Int(32), [1, 1])
        ip.set(q)
        if target == "buffer":
            f.realize(lib.Buffer(lib.Int(32), [10, 4]))
        else:
            assert [f.realize([10, 4]).dim(d).extent() for d in range(2)] == [10, 4]
        shapes.append([(q.dim(d).min(), q.dim(d).extent()) for d in range(2)])
    return shapes


def test_an_input_bounds_query_gets_the_region_read_as_in_halide():
    assert _input_queried(hl) == [[(-1, 12), (-2, 6)], [(-1, 12), (-2, 6)]]
    assert _input_queried(hl) == _input_queried(_real())


def test_rvars_get_func_infer_arguments_same_as_and_fast_trig_as_halide():
    """Func.rvars, Pipeline.get_func (realization order, Halide's error past the end),
    Func.infer_arguments, RDom.same_as and fast_sin/fast_cos give what Halide 21's give."""
    seen = []
    for lib in (hl, _real()):
        x = lib.Var("x")
        r = lib.RDom([lib.Range(0, 3), lib.Range(0, 2)], "rd")
        f = lib.Func("gf_producer")
        f[x] = 0
        f[r.x] += r.y
        f[x] += 1
        g = lib.Func("gf_consumer")
        g[x] = f[x] + 1
        p = lib.Pipeline(g)
        with pytest.raises(Exception, match=r"Index value passed is 2; however, there are only 2 functions"):
            p.get_func(2)
        ip, pp = lib.ImageParam(lib.Int(32), 1, "ip"), lib.Param(lib.Int(32), "pp")
        h = lib.Func("gf_args")
        h[x] = ip[x] + pp
        args = [(a.name, a.kind.name, a.dimensions, str(a.type)) for a in h.infer_arguments()]
        trig = [lib.evaluate(fn(lib.f32(v))) for fn in (lib.fast_sin, lib.fast_cos) for v in (0.0, 0.5, 1.0, -2.0)]
        # (a name the process used before gets a "$N" suffix in either library)
        funcs = [re.sub(r"\$\d+$", "", p.get_func(i).name()) for i in range(2)]
        seen.append(([v.name() for v in f.rvars(0)], len(f.rvars(1)), funcs,
                     r.same_as(r), r.same_as(lib.RDom([(0, 3), (0, 2)])), args,
                     str(lib.fast_sin(x).type()), str(lib.fast_cos(lib.f64(0.5)).type())))
        seen[-1] += (np.array(trig, np.float32),)
    ours, theirs = seen
    assert ours[:-1] == theirs[:-1]
    np.testing.assert_array_equal(ours[-1], theirs[-1])  # the same polynomials (tests/test_fast_math.py)


def test_bound_storage_sizes_the_allocation_and_refuses_too_small_as_halide(tmp_path):
    """bound_storage(x, 16) on a Func computed per row: a constant 16-wide allocation (on the
    stack), the same values as Halide; where a Param, or the schedule itself, makes the stages
    need more, the run stops with Halide's message."""
    outs = []
    for lib in (hl, _real()):
        x, y = lib.Var("x"), lib.Var("y")
        p = lib.Param(lib.Int(32), "p", 3)
        f, g = lib.Func("stored_f"), lib.Func("stored_g")
        f[x, y] = x * 7 + y
        g[x, y] = f[x, y] + f[x + p, y]
        f.compute_at(g, y).bound_storage(x, 16)
        outs.append(np.asarray(g.realize([10, 4])))
        p.set(9)
        # (either library names a second Func of a name `stored_f$1`, as when an earlier test made one)
        with pytest.raises(Exception, match=r"The explicit allocation bound \(16\) of dimension x of stored_f(\$\d+)? "
                                            r"is too small to store the required region \(19\)\."):
            g.realize([10, 4])
        if lib is hl:
            g.compile_to_lowered_stmt(str(tmp_path / "g.stmt"), [p])
            assert re.search(r"allocate stored_f(\$\d+)?\[int32 \* 16 \* 1\]", (tmp_path / "g.stmt").read_text())
    np.testing.assert_array_equal(outs[0], outs[1])
    yy, xx = np.mgrid[0:4, 0:10]
    np.testing.assert_array_equal(outs[0], (xx * 7 + yy) * 2 + 21)
    x = hl.Var("x")
    f, g = hl.Func("f_small"), hl.Func("g_small")
    f[x] = x
    g[x] = f[x] + f[x + 8]
    f.compute_at(g, x).bound_storage(x, 4)
    with pytest.raises(hl.HalideError, match=r"The explicit allocation bound \(4\) of dimension x of f_small is too "
                                             r"small to store the required region \(9\)\."):
        g.realize([1])  # (Halide too: its warning says the run is sure to fail)
    with pytest.raises(hl.HalideError, match=r"bound must be positive"):
        f.bound_storage(x, 0)


def test_a_call_of_a_tuple_valued_func_defines_every_element():
    """`f[x] = g[x]` with g Tuple-valued defines f's Tuple from g's elements, and an update
    `f[1] = f[2]` copies every element (Halide's FuncRef to Tuple conversion); as Halide."""
    def build(h):
        g, f = h.Func("g"), h.Func("f")
        xv = h.Var("x")
        g[xv] = (xv, xv * 2)
        f[xv] = g[xv]
        f[1] = f[2]
        return f

    want = [np.asarray(b) for b in build(_real()).realize([3])]
    got = [np.asarray(b) for b in build(hl).realize([3])]
    assert len(got) == 2
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(got[0], [0, 2, 2])


def test_update_may_use_a_pure_var_elsewhere_on_the_left():
    """f(x, x) = ...: x is the update's pure dimension at its own position and an expression at the
    other (Halide's diagonal); a pure Var only at another's position is still refused."""
    x, y = hl.Var("x"), hl.Var("y")
    f = hl.Func("diagonal")
    f[x, y] = 0
    f[y, y] = 1 + y
    np.testing.assert_array_equal(np.asarray(f.realize([3, 3])), np.diag([1, 2, 3]))
    g = hl.Func("swapped")
    g[x, y] = 0
    with pytest.raises(hl.HalideError, match="pure Var y appears in position 0 but is argument 1"):
        g[y, x] = 1


def test_stage_dump_argument_list_and_func_compile_to_module_as_halide():
    """Stage.dump_argument_list lists a stage's loops innermost first, as Halide's does, after
    splits, fusions, renames and reorders (a loop they made named after the loop it came from);
    Func.compile_to_module is its pipeline's Module, named."""
    seen = []
    for lib in (hl, _real()):
        x, y, xo, xi, r = lib.Var("x"), lib.Var("y"), lib.Var("xo"), lib.Var("xi"), lib.RDom([lib.Range(0, 4)], "r")
        f = lib.Func("dal_f")
        f[x, y] = x + y
        f[x, y] += r.x
        f.split(x, xo, xi, 4).fuse(xo, y, lib.Var("t"))
        f.update(0).reorder(x, r.x, y).rename(x, lib.Var("u"))
        seen.append((lib.Stage(f).dump_argument_list(), f.update(0).dump_argument_list(),
                     f.compile_to_module([], "dal_fn").name()))
    assert seen[0] == seen[1]
    assert seen[0][:2] == ("Vars: x.xi x.xo.t __outermost\n", "Vars: x.u r$x y __outermost\n")
