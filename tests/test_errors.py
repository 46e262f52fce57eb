"""Bad input raises hl.HalideError naming the Func, the dimension and the numbers; never a crash."""

import json

import numpy as np
import pytest

import pyhalide as hl

x, y = hl.Var("x"), hl.Var("y")


def test_input_buffer_too_small():
    buf = hl.Buffer(np.zeros((10, 10), np.uint8), name="small")
    f = hl.Func("reads_beyond")
    f[x, y] = buf[x + 1, y]
    with pytest.raises(hl.HalideError, match=r"Input buffer small is accessed at 10, which is beyond the max \(9\) "
                                             r"in dimension 0"):
        f.realize([10, 10])
    g = hl.Func("reads_before")
    g[x, y] = buf[x, y - 2]
    with pytest.raises(hl.HalideError, match=r"Input buffer small is accessed at -2, which is before the min \(0\) "
                                             r"in dimension 1"):
        g.realize([10, 10])


def test_input_check_runs_before_any_output_is_written():
    buf = hl.Buffer(np.ones(8, np.int32), name="in8")
    f = hl.Func("f_check")
    f[x] = buf[x] + 1
    out = hl.Buffer(np.full(9, -7, np.int32))
    with pytest.raises(hl.RuntimeCheckError):
        f.realize(out)
    assert (np.asarray(out) == -7).all()


def test_output_region_beyond_buffer():
    """g reads f one past the region asked for: realize(sizes) grows f as Halide does; a buffer
    the user passes is not grown."""
    f, g = hl.Func("f_out"), hl.Func("g_out")
    f[x] = x
    g[x] = f[x + 1]
    a, b = hl.Pipeline([f, g]).realize([5])
    assert np.asarray(a).tolist() == [0, 1, 2, 3, 4] and np.asarray(b).tolist() == [1, 2, 3, 4, 5]
    with pytest.raises(hl.HalideError, match=r"Output buffer f_out is accessed at 5, which is beyond the max \(4\)"):
        hl.Pipeline([f, g]).realize([hl.Buffer(hl.Int(32), [5]), hl.Buffer(hl.Int(32), [5])])


def test_param_left_unset():
    p = hl.Param(hl.Int(32), "unset_param")
    f = hl.Func("uses_param")
    f[x] = x + p
    with pytest.raises(hl.HalideError, match="Param unset_param has no value"):
        f.realize([4])


def test_image_param_left_unbound():
    ip = hl.ImageParam(hl.UInt(8), 1, "unbound_image")
    f = hl.Func("uses_image")
    f[x] = ip[x]
    with pytest.raises(hl.HalideError, match="ImageParam unbound_image is not bound"):
        f.realize([4])
    # as Halide's: set() with an undefined hl.Buffer binds nothing (unbinds), realizing says so
    ip.set(hl.Buffer(hl.UInt(8), [4]))
    assert list(np.asarray(f.realize([4]))) == [0] * 4
    ip.set(hl.Buffer())
    with pytest.raises(hl.HalideError, match="ImageParam unbound_image is not bound"):
        f.realize([4])


def test_realize_into_an_undefined_buffer():
    f = hl.Func("into_undefined")
    f[x] = x
    for target in (hl.Buffer(), [hl.Buffer()]):
        for how in (f, hl.Pipeline(f)):
            with pytest.raises(hl.HalideError, match="output into_undefined needs a defined hl.Buffer"):
                how.realize(target)


def test_update_type_mismatch():
    f = hl.Func("typed")
    f[x] = hl.f32(x)
    with pytest.raises(hl.HalideError, match=r"update definition 0 of Func typed: Tuple element 0 of update "
                                             r"definition has type int32, but pure definition has type float32"):
        f[x] = x + 1


def test_pure_var_used_twice():
    f = hl.Func("twice")
    with pytest.raises(hl.HalideError, match="Func twice: Var x is used more than once"):
        f[x, x] = 1


def test_expression_as_pure_argument():
    f = hl.Func("exprarg")
    with pytest.raises(hl.HalideError, match=r"Func exprarg: argument 1 \(\(x \+ 1\)\) is not a pure Var"):
        f[x + 1] = 1


def test_wrong_number_of_arguments():
    f = hl.Func("two_d")
    f[x, y] = x + y
    g = hl.Func("caller")
    with pytest.raises(hl.HalideError, match="Func two_d was called with 1 arguments, but was defined with 2"):
        g[x] = f[x] + 1


def test_undefined_func_realized():
    f = hl.Func("never_defined")
    with pytest.raises(hl.HalideError, match="Func never_defined has not been defined"):
        f.realize([3])


def test_undefined_func_called():
    f = hl.Func("undefined_callee")
    g = hl.Func("calls_undefined")
    with pytest.raises(hl.HalideError, match='Can.t call Func "undefined_callee" because it has not yet been defined'):
        g[x] = f[x]


def test_rdom_over_undefined_extent():
    with pytest.raises(hl.HalideError, match="RDom rd: the extent of dimension 1 is undefined"):
        hl.RDom([(0, 4), (0, hl.Expr())], name="rd")


def test_rdom_with_float_extent():
    with pytest.raises(hl.HalideError, match="RDom rf: the extent of dimension 0 has type float32"):
        hl.RDom([(0, 2.5)], name="rf")


def test_pure_var_moved_in_update():
    f = hl.Func("moved")
    f[x, y] = 0
    with pytest.raises(hl.HalideError, match="pure Var y appears in position 0 but is argument 1"):
        f[y, x] = 1


def test_pure_var_missing_on_left_of_update():
    f = hl.Func("missing")
    f[x] = 0
    r = hl.RDom([(0, 3)])
    with pytest.raises(hl.HalideError, match="pure Var x must appear unadorned in position 0"):
        f[r.x] = x


def test_unbounded_access_is_a_compile_error():
    data = hl.Buffer(np.arange(16, dtype=np.int32), name="idx")
    f = hl.Func("gather")
    f[x] = data[data[x]]
    with pytest.raises(hl.HalideError, match="region of input idx .* dimension 0 is unbounded"):
        f.realize([4])


def test_constant_that_does_not_fit():
    with pytest.raises(hl.HalideError, match="Integer constant 257 will be implicitly coerced to type uint8"):
        hl.u8(x) + 257


def test_expr_has_no_truth_value():
    with pytest.raises(hl.HalideError, match="cannot be converted to a bool"):
        if x > 3:
            pass


def test_float_coordinate_needs_explicit_cast():
    f = hl.Func("floaty")
    f[x] = x
    with pytest.raises(hl.HalideError, match="Implicit cast from float32 to int in argument 1 in call to floaty"):
        f[hl.f32(x)]


def test_wrong_output_buffer_type():
    f = hl.Func("i32out")
    f[x] = x
    with pytest.raises(hl.HalideError,
                       match="Output buffer i32out has type int32 but type of the buffer passed in is float32"):
        f.realize(hl.Buffer(hl.Float(32), [4]))


def test_wrong_realize_dimensions():
    f = hl.Func("dims2")
    f[x, y] = x
    with pytest.raises(hl.HalideError, match="Func dims2 has 2 dimensions but realize was given 1 sizes"):
        f.realize([4])


def test_image_param_type_mismatch():
    ip = hl.ImageParam(hl.UInt(8), 2, "typed_image")
    with pytest.raises(hl.HalideError, match="ImageParam typed_image has type uint8 but was given a buffer of type "
                                             "float32"):
        ip.set(hl.Buffer(np.zeros((2, 2), np.float32)))


def test_cyclic_funcs():
    """A cycle would need an update of a Func another one already calls: refused, as Halide."""
    f, g = hl.Func("cyc_f"), hl.Func("cyc_g")
    f[x] = x
    g[x] = f[x]
    with pytest.raises(hl.HalideError, match="Func cyc_f cannot be given a new update definition, because it has "
                                             "already been realized or used in the definition of another Func"):
        f[x] = g[x] + f[x]


def test_two_inputs_with_one_name_are_refused():
    """Inputs are passed by name: a clash would silently read one input for both."""
    a = hl.Buffer(np.full(4, 1, np.int32), "img")
    b = hl.Buffer(np.full(4, 2, np.int32), "img")
    f = hl.Func("two_imgs")
    f[x] = a[x] * 10 + b[x]
    with pytest.raises(hl.HalideError, match=r"Two different input images are both named 'img'"):
        f.realize([4])
    p, q = hl.Param(hl.Int(32), "p", 3), hl.Param(hl.Int(32), "p", 5)
    g = hl.Func("two_params")
    g[x] = p + q * 10
    with pytest.raises(hl.HalideError, match=r"Two different Params are both named 'p'"):
        g.realize([2])
    same = hl.Func("one_img_twice")  # one input read in several places is of course fine
    same[x] = a[x] + a[x + 0] + hl.BoundaryConditions.repeat_edge(a)[x]
    assert (np.asarray(same.realize([4])) == 3).all()
    data = np.arange(4, dtype=np.int32)  # two wrappers of one array under one name read the same data, as in Halide
    twice = hl.Func("one_array_two_wrappers")
    twice[x] = hl.Buffer(data, "arr")[x] + hl.Buffer(data, "arr")[x]
    assert (np.asarray(twice.realize([4])) == 2 * data).all()
    shifted = hl.Func("one_array_two_mins")
    shifted[x] = hl.Buffer(data, "arr2")[x] + hl.Buffer(data, "arr2").set_min(1)[x + 1]
    with pytest.raises(hl.HalideError, match=r"both named 'arr2'"):
        shifted.realize([3])


def test_values_outside_their_declared_ranges_are_refused():
    """As Halide: set() and set_range() take any value; the pipeline refuses one out of range
    when it runs, with Halide's message; min_value()/max_value() give the bounds as Exprs."""
    p = hl.Param(hl.Int(32), "ranged", 1)
    assert not p.min_value().defined() and not p.max_value().defined()
    p.set_range(0, 5)
    x = hl.Var("x")
    uses = hl.Func("uses_ranged")
    uses[x] = x + p
    p.set(10)
    with pytest.raises(hl.HalideError, match=r"Parameter ranged is 10 but must be at most 5"):
        uses.realize([2])
    p.set(1)
    p.set_min_value(hl.Expr(2))
    assert p.min_value().type() == hl.Int(32) and hl.evaluate(p.min_value()) == 2
    with pytest.raises(hl.HalideError, match=r"Parameter ranged is 1 but must be at least 2"):
        uses.realize([2])
    p.set(5)
    assert list(uses.realize([2])) == [5, 6]
    p.set_max_value(None)
    p.set(500)
    assert list(uses.realize([1])) == [500]
    with pytest.raises(hl.HalideError, match=r"constant bound"):
        p.set_min_value(hl.Param(hl.Int(32), "other", 0) + 1)
    buf = hl.Buffer(np.zeros(4, np.uint8), "u8_edge")
    # as in Halide 21: the constant is wrapped into the image's type (300 -> 44), not refused
    wrapped = hl.Func("edge300")
    wrapped[x] = hl.BoundaryConditions.constant_exterior(buf, 300)[x]
    assert np.asarray(wrapped.realize([6])).tolist() == [0, 0, 0, 0, 44, 44]
    g = hl.BoundaryConditions.constant_exterior(buf, 7)
    f = hl.Func("edge7")
    f[x] = g[x]
    assert np.asarray(f.realize([6])).tolist() == [0, 0, 0, 0, 7, 7]
    with pytest.raises(hl.HalideError, match=r"realize: sizes must be integers, got \[3.5\]"):
        f.realize([3.5])
    assert np.asarray(f.realize([np.int64(2)])).tolist() == [0, 0]


def test_store_at_of_an_inlined_func_is_refused():
    g, f = hl.Func("stored_inline"), hl.Func("its_consumer")
    g[x] = x
    f[x] = g[x] + 1
    g.store_at(f, x)
    with pytest.raises(hl.HalideError, match=r"Func stored_inline is computed inline, so it has no storage"):
        f.realize([3])
    g.compute_at(f, x)
    assert np.asarray(f.realize([3])).tolist() == [1, 2, 3]


def test_a_vector_too_wide_for_llvm_is_refused_before_it_crashes():
    """vectorize(x, 1000000) used to abort the interpreter inside LLVM: in a subprocess, so that a
    regression can't take the test run down."""
    import subprocess
    import sys

    code = ("import pyhalide as hl\nx = hl.Var('x')\nf = hl.Func('too_wide')\nf[x] = x\nf.vectorize(x, 1000000)\n"
            "try:\n    f.realize([8])\nexcept hl.HalideError as e:\n    print('refused:', e)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "refused: Can't vectorize loop too_wide" in run.stdout and "1000000 lanes wide: at most 16384" in run.stdout


def test_gpu_tile_is_accepted_and_a_cpu_target_refuses_it_by_name():
    xo, yo, xi, yi = hl.Var("xo"), hl.Var("yo"), hl.Var("xi"), hl.Var("yi")
    f = hl.Func("gpu_tiled")
    f[x, y] = x + y
    f.gpu_tile(x, y, xo, yo, xi, yi, 8, 8)
    with pytest.raises(hl.HalideError, match=r"Loop gpu_tiled\.s0\.x\.xi is a gpu_thread loop, but the target "
                                             r"x86-64-linux\S* is the host CPU, which has no GPU"):
        f.realize([16, 16])
    g = hl.Func("gpu_tiled_1d")
    g[x] = x
    g.gpu_tile(x, xi, 32)
    kinds = [d[1] for d in json.loads(hl.Pipeline([g]).schedule_to_json())["gpu_tiled_1d"]]
    assert kinds == ["split", "gpu_blocks", "gpu_threads"]
    with pytest.raises(hl.HalideError, match=r"gpu_tile takes .* got 2 arguments"):
        g.gpu_tile(x, 3)


def test_image_param_dimension_constraints_are_checked_and_specialize():
    im = hl.ImageParam(hl.UInt(8), 2, "constrained")
    im.dim(0).set_bounds(0, 16).set_stride(1)
    im.dim(1).set_estimate(0, 8)
    assert im.estimates() == [None, (0, 8)]
    f = hl.Func("reads_constrained")
    f[x, y] = im[x, y] + hl.cast(hl.UInt(8), im.width())  # the width is the constant 16
    im.set(hl.Buffer(np.ones((8, 16), np.uint8)))
    assert (np.asarray(f.realize([16, 8])) == 17).all()
    im.set(hl.Buffer(np.ones((8, 20), np.uint8)))  # (accepted: checked when a pipeline runs, as Halide)
    with pytest.raises(hl.HalideError, match=r"ImageParam constrained is constrained to extent 16 in dimension 0 "
                                             r"\(dim\(0\)\.set_extent\), but its buffer has extent 20"):
        f.realize([16, 8])
    with pytest.raises(hl.HalideError, match=r"constraints are for ImageParams"):
        hl.Buffer(np.ones(4, np.uint8)).dim(0).set_min(3)
    with pytest.raises(hl.HalideError, match=r"set_extent\(-1\): not a valid extent"):
        im.dim(1).set_extent(-1)


def test_sizes_and_coordinates_past_32_bits_are_refused():
    """Index arithmetic is 32-bit, as in Halide: what would wrap is an error naming the numbers."""
    a = hl.Buffer(np.arange(16, dtype=np.int32), "wide_in")
    f = hl.Func("wraps")
    f[x] = a[x * 1073741824]  # 3 * 2^30 wraps to a negative int32; the check computes in 64 bits
    with pytest.raises(hl.HalideError, match=r"wide_in is accessed at 3221225472, which is beyond the max \(15\)"):
        f.realize([4])
    for extent in (2**31, 2**32 + 5):
        with pytest.raises(hl.HalideError, match=rf"extent of dimension 0 is {extent}, not representable as an int32"):
            hl.RDom([(0, extent)])
    with pytest.raises(hl.HalideError, match=r"runs from 2147483000 to 2147483999, past the int32 maximum"):
        hl.RDom([(2147483000, 1000)])
    p = hl.Param(hl.Int(32), "stride_p", 3)
    stored, strided = hl.Func("stored"), hl.Func("strided")
    stored[x] = x
    strided[x] = stored[x * p]
    stored.compute_root()
    assert np.asarray(strided.realize([4])).tolist() == [0, 3, 6, 9]
    p.set(1073741824)  # stored's region, [0, 3 * 2^30], wraps in 32 bits: its allocation is checked in 64
    with pytest.raises(hl.HalideError, match=r"Total allocation for buffer stored is at least 2147483648 elements"):
        strided.realize([4])
    plane, wide = hl.Func("plane"), hl.Func("wide")
    plane[x, y] = x + y
    wide[x, y] = plane[x * 1000, y] + plane[x, y * 1000]
    plane.compute_root()
    with pytest.raises(hl.HalideError, match=r"Total allocation for buffer plane"):
        wide.realize([70000, 50])
    g = hl.Func("huge")
    g[x, y] = x
    with pytest.raises(hl.HalideError, match=r"sizes \[1099511627776, 1099511627776\] make 1208925819614629174706176 "
                                              r"elements per output; at most 2\^31-1"):
        g.realize([2**40, 2**40])
    with pytest.raises(hl.HalideError, match=r"cannot be allocated"):
        hl.Buffer(hl.UInt(8), [2**62, 2**62])


def test_a_coordinate_that_wraps_inside_a_min_or_division_is_refused_before_it_runs():
    """`min(x * 2^28, 1000)` lies in [0, 1000] in exact arithmetic, which the region checks see;
    in 32 bits x * 2^28 wraps to -2^31 at x = 8 and the min picks it: the pipeline read and wrote
    far outside its buffers (a crash). Every operand of a min, max or division in a coordinate is
    now checked to be a 32-bit number first, naming what it indexes and the value."""
    big = 1 << 28
    a = hl.Buffer(np.arange(2000, dtype=np.int32), "wrap_in")
    g, through_func, through_input = hl.Func("wrap_g"), hl.Func("through_func"), hl.Func("through_input")
    g[x] = x * 3
    g.compute_root()
    through_func[x] = g[hl.min(x * big, 1000)]
    through_input[x] = a[hl.clamp(x * big, 0, 1999) / 2]
    for f, name in ((through_func, "wrap_g"), (through_input, "wrap_in")):
        with pytest.raises(hl.HalideError, match=rf"A coordinate \(of {name} \(dimension 0\)\) is computed through the "
                                                 r"value 4026531840, which is beyond 32-bit integers"):
            f.realize([16])
        # the same pipelines where nothing wraps (7 * 2^28 < 2^31) compute what numpy does
        want = np.minimum(np.arange(8, dtype=np.int64) * big, 1000) if f is through_func else \
            np.clip(np.arange(8, dtype=np.int64) * big, 0, 1999) // 2
        got = np.asarray(f.realize([8]))
        assert got.tolist() == (want * 3 if f is through_func else want).tolist()
    hashed = hl.Func("wrap_hash")  # a remainder by a constant survives the wrap: still accepted
    hashed[x] = a[(x * 1103515245 + 12345) % 2000]
    want = [a_ for a_ in ((np.arange(8, dtype=np.int64) * 1103515245 + 12345) % 2**32).tolist()]
    want = [((v - 2**32 if v >= 2**31 else v) % 2000) for v in want]
    assert np.asarray(hashed.realize([8])).tolist() == want


def test_deep_expressions_compile_without_hitting_the_recursion_limit():
    """A 20,000-deep expression is walked on a thread with a big stack; the limit is restored."""
    import sys

    limit = sys.getrecursionlimit()
    e = x
    for _ in range(20000):
        e = e + 1
    f = hl.Func("deep_chain")
    f[x] = e
    g = hl.Func("deep_update")
    g[x] = x
    g[x] = g[x] * 2 + e
    assert np.asarray(f.realize([3])).tolist() == [20000, 20001, 20002]
    assert np.asarray(g.realize([3])).tolist() == [20000, 20003, 20006]
    assert sys.getrecursionlimit() == limit


def test_exponential_inlining_is_refused_by_name_instead_of_hanging():
    stages = [hl.Func("spread0")]
    stages[0][x] = x
    for i in range(1, 21):  # 2^20 calls, every one at a coordinate of its own
        g = hl.Func(f"spread{i}")
        g[x] = stages[-1][2 * x] + stages[-1][2 * x + 1]
        stages.append(g)
    with pytest.raises(hl.HalideError, match=r"Func spread20: inlining spread19 into it makes an expression of "
                                              r"\d+ nodes .*compute_root\(\) or compute_at\(\)"):
        stages[-1].realize([4])
    stages[10].compute_root()  # two shallow halves: 2^10 calls each
    want = [sum(range(2**20 * k, 2**20 * (k + 1))) % 2**32 for k in range(2)]
    assert (np.asarray(stages[-1].realize([2])).astype(np.int64) % 2**32).tolist() == want


def test_a_stencil_of_inlined_stencils_is_inlined_as_a_graph():
    """3^14 calls as a tree, but only 14 * 29 distinct ones (the levels' coordinates meet again):
    each is computed once, as Halide's inlining shares them."""
    stages = [hl.Func("stencil0")]
    stages[0][x] = x
    for i in range(1, 15):
        g = hl.Func(f"stencil{i}")
        g[x] = stages[-1][x - 1] + stages[-1][x] + stages[-1][x + 1]
        stages.append(g)
    assert np.asarray(stages[-1].realize([3])).tolist() == [0, 3**14, 2 * 3**14]


_INTERRUPTED_REALIZE = """
import os, signal, sys, threading, time
import numpy as np
import pyhalide as hl
signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job starts with SIGINT ignored
x, y = hl.Var("x"), hl.Var("y")
r = hl.RDom([(0, 3000)])
f = hl.Func("slow")
f[x, y] = hl.sum(hl.sin(hl.f32(x + y + r.x)))
if sys.argv[1] == "parallel":
    f.parallel(y)
f.compile_jit()
g = hl.Func("after")
g[x] = x * 2
g.realize([4])  # compiles g and installs the SIGINT handler before the signal is due
threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
t0 = time.perf_counter()
try:
    f.realize([2000, 2000])  # minutes of work
    print("finished")
except KeyboardInterrupt:
    print("interrupted", time.perf_counter() - t0)
print(np.asarray(g.realize([4])).tolist())
"""


@pytest.mark.parametrize("loops", ["serial", "parallel"])
def test_ctrl_c_interrupts_a_long_realize_promptly_and_the_process_stays_usable(loops):
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", _INTERRUPTED_REALIZE, loops], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout.split("\n")
    assert out[0].startswith("interrupted"), out
    assert float(out[0].split()[1]) < 3.0  # the signal came at 0.3 s; the realize would take far longer
    assert out[1] == "[0, 2, 4, 6]"


def test_random_misuse_gives_results_or_halide_errors_never_crashes_or_wrong_answers():
    """tests/_misuse.py throws random directives, arguments and sizes at the API, in a subprocess
    (a crash fails this test instead of ending the run)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).with_name("_misuse.py")
    run = subprocess.run([sys.executable, str(script), "60"], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["failures"] == [], "\n".join(report["failures"])
    assert report["computed"] >= 10 and report["refused"] >= 10, report  # both kinds of outcome were drawn


def test_an_output_overrun_names_the_split_that_rounds_up():
    xo, xi = hl.Var("xo"), hl.Var("xi")
    f = hl.Func("rounded")
    f[x] = x
    f.split(x, xo, xi, 8, hl.TailStrategy.RoundUp)
    with pytest.raises(hl.HalideError, match=r"rounded is accessed at 15, which is beyond the max \(9\).*"
                                              r"rounded's split\(x, xo, xi, 8, RoundUp\) rounds x up"):
        f.realize(hl.Buffer(hl.Int(32), [10]))
    assert np.asarray(f.realize([16])).tolist() == list(range(16))
