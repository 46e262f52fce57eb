"""Ports of Halide 21's test/error/*.cpp (batch 00: ambiguous_inline_reductions through
impossible_constraints, in alphabetical order) to pyhalide.

Each Halide test is a program that must fail. Here each raises hl.HalideError (or a subclass)
with a message naming the Func and the numbers. The Python equivalent of each was also run
against Halide 21's own bindings (`import halide`), which raise too, except where a docstring
says otherwise.

Where pyhalide does more than Halide, the test says so and checks what pyhalide does instead:
auto_schedule_no_parallel and auto_schedule_no_reorder (pyhalide's autoscheduler keeps hand
schedules, where Halide's Mullapudi2016 refuses them).

Already covered, by the same checks:
- atomics_gpu_8_bit, atomics_gpu_mutex and five_d_gpu_buffer in
  tests/test_halide_gpu_atomics_and_errors.py.
- bad_compute_with, bad_compute_with_invalid_specialization,
  bad_compute_with_parent_func_not_used, compute_with_crossing_edges1,
  compute_with_crossing_edges2 and compute_with_fuse_in_specialization in
  tests/test_halide_compute_with_stages.py.

Left out, because they have no Python form:
- bad_device_api and device_target_mismatch call get_device_interface_for_device_api, which
  Halide's Python bindings do not expose.
- bad_func_object builds a Func from an empty Internal::Function, which Python cannot make.
"""

import numpy as np
import pytest

import pyhalide as hl

pytestmark = pytest.mark.usefixtures("fresh_func_names")


def _vars(*names):
    return [hl.Var(n) for n in names]


# --------------------------------------------------------------------------- algorithm errors


def test_ambiguous_inline_reductions():
    """Halide's error/ambiguous_inline_reductions.cpp: product(sum(r2, r1 + r2 + r3)) leaves
    both r1 and r3 free for the product, so which one it reduces over is ambiguous."""
    x, y = _vars("x", "y")
    r1, r2, r3 = (hl.RDom([hl.Range(0, 10)], n) for n in ("r1", "r2", "r3"))
    f = hl.Func("f")
    f[x, y] = hl.product(hl.sum(r1, r1 + r3) + hl.sum(r2, r2 * 2 + r3))  # only r3 is left: fine
    with pytest.raises(hl.HalideError, match=r'Inline reduction "product" refers to reduction variables from '
                                             r"multiple reduction domains: r1\$x, r3\$x"):
        f[r1, y] += hl.product(hl.sum(r2, r1 + r2 + r3))


def test_autodiff_unbounded():
    """Halide's error/autodiff_unbounded.cpp: g sums f at h(r), coordinates read from a buffer,
    so the region of f whose adjoint is needed is unbounded."""
    (x,) = _vars("x")
    b, h = hl.Buffer(hl.Float(32), [10]), hl.Buffer(hl.Int(32), [10])
    r = hl.RDom(h)
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = b[hl.clamp(x, 0, 10)]
    g[()] = 0.0
    g[()] += f[h[r]]
    with pytest.raises(hl.HalideError, match=r"propagate_adjoints: can't bound the region of Func f that the output "
                                             r"needs in dimension x"):
        hl.propagate_adjoints(g)


def test_bad_const_cast():
    """Halide's error/bad_const_cast.cpp: the 256 in u8(x) % 256 would become a uint8 0."""
    (x,) = _vars("x")
    with pytest.raises(hl.HalideError, match=r"Integer constant 256 will be implicitly coerced to type uint8, which "
                                             r"changes its value to \(uint8\)0"):
        hl.cast(hl.UInt(8), x) % 256


def test_clamp_out_of_range():
    """Halide's error/clamp_out_of_range.cpp: clamp(i8(x), 0, 255); 255 is no int8 (Halide's
    bindings call it a type mismatch in clamp)."""
    (x,) = _vars("x")
    with pytest.raises(hl.HalideError, match=r"Integer constant 255 will be implicitly coerced to type int8, which "
                                             r"changes its value to \(int8\)-1"):
        hl.clamp(hl.cast(hl.Int(8), x), 0, 255)


def test_define_after_realize():
    """Halide's error/define_after_realize.cpp: a realized Func takes no new definition."""
    (x,) = _vars("x")
    f = hl.Func("f")
    f[x] = x
    assert np.asarray(f.realize([10])).tolist() == list(range(10))
    with pytest.raises(hl.HalideError, match="Func f cannot be given a new update definition, because it has already "
                                             "been realized or used in the definition of another Func"):
        f[x] += 1
    assert np.asarray(f.realize([10])).tolist() == list(range(10))  # as it was


def test_define_after_use():
    """Halide's error/define_after_use.cpp: nor does a Func another Func's definition calls
    (g would see a different f than the one it was defined with)."""
    (x,) = _vars("x")
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = x
    g[x] = f[x] + 1
    with pytest.raises(hl.HalideError, match="Func f cannot be given a new update definition, because it has already "
                                             "been realized or used in the definition of another Func"):
        f[x] += 1
    f2 = hl.Func("f2")  # a Func may still read itself in its own updates
    f2[x] = x
    f2[x] = f2[x] * 2
    f2[x] += 1
    assert np.asarray(f2.realize([3])).tolist() == [1, 3, 5]


def test_expanding_reduction():
    """Halide's error/expanding_reduction.cpp: f(r, y) = f(r, y - 1) + f(r, y + 1) would grow
    f's required region with every pass; the pure Var y must be read unshifted."""
    x, y = _vars("x", "y")
    r = hl.RDom([hl.Range(0, 100)])
    inp = hl.ImageParam(hl.Int(32), 2, "input")
    f = hl.Func("f")
    f[x, y] = inp[x, y]
    with pytest.raises(hl.HalideError, match=r"In update definition 0 of Func f: all recursive references to f must "
                                             r"contain the same pure variables in the same places as on the left-hand "
                                             r"side \(argument 1 is \(y - 1\), not y\)"):
        f[r.x, y] = f[r.x, y - 1] + f[r.x, y + 1]


def test_float_arg():
    """Halide's error/float_arg.cpp: f(f(x, 3) * 17.0f, 3) calls f at a float coordinate."""
    x, y = _vars("x", "y")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = 3 * x + y
    with pytest.raises(hl.HalideError, match="Implicit cast from float32 to int in argument 1 in call to f is not "
                                             "allowed. Use an explicit cast."):
        g[x] = f[f[x, 3] * 17.0, 3]


def test_forward_on_undefined_buffer():
    """Halide's error/forward_on_undefined_buffer.cpp: a method of an undefined Buffer (C++'s
    raw_buffer() is not in the Python bindings; dimensions() is the same check)."""
    b = hl.Buffer()
    assert not b.defined()
    with pytest.raises(hl.HalideError, match="Undefined buffer calling method dimensions"):
        b.dimensions()


def test_func_expr_dim_mismatch():
    """Halide's error/func_expr_dim_mismatch.cpp: Func(Int(32), 1) defined over (x, y)."""
    x, y = _vars("x", "y")
    f = hl.Func(hl.Int(32), 1, "f")
    with pytest.raises(hl.HalideError, match=r'Func "f" is constrained to have exactly 1 dimensions, but is defined '
                                             r"with 2 dimensions"):
        f[x, y] = hl.cast(hl.Int(32), 0)


def test_func_expr_type_mismatch():
    """Halide's error/func_expr_type_mismatch.cpp: Func(Float(32), 1) given an int32."""
    x, y = _vars("x", "y")
    f = hl.Func(hl.Float(32), 1, "f")
    with pytest.raises(hl.HalideError, match=r'Func "f" is constrained to only hold values of type float32 but is '
                                             r"defined with values of type int32"):
        f[x, y] = hl.cast(hl.Int(32), 0)


def test_func_expr_update_type_mismatch():
    """Halide's error/func_expr_update_type_mismatch.cpp: a float32 Func updated with a uint8."""
    x, y = _vars("x", "y")
    f = hl.Func(hl.Float(32), 2, "f")
    f[x, y] = hl.f32(0)
    with pytest.raises(hl.HalideError, match=r"In update definition 0 of Func f: Tuple element 0 of update definition "
                                             r"has type uint8, but pure definition has type float32"):
        f[x, y] = hl.cast(hl.UInt(8), 0)


def test_func_extern_dim_mismatch():
    """Halide's error/func_extern_dim_mismatch.cpp: Func(Float(32), 1) given a 2-D extern stage."""
    x, y = _vars("x", "y")
    f = hl.Func(hl.Float(32), 1, "f")
    with pytest.raises(hl.HalideError, match=r'Func "f" is constrained to have exactly 1 dimensions, but is defined '
                                             r"with 2 dimensions"):
        f.define_extern("test", [], hl.Float(32), [x, y])


def test_func_extern_type_mismatch():
    """Halide's error/func_extern_type_mismatch.cpp: Func({UInt(8), Float(64)}, 2) given an
    extern stage of (int32, float32)."""
    x, y = _vars("x", "y")
    f = hl.Func([hl.UInt(8), hl.Float(64)], 2, "f")
    with pytest.raises(hl.HalideError, match=r'Func "f" is constrained to only hold values of type \(uint8, float64\) '
                                             r"but is defined with values of type \(int32, float32\)"):
        f.define_extern("test", [], [hl.Int(32), hl.Float(32)], [x, y])


def test_func_tuple_dim_mismatch():
    """Halide's error/func_tuple_dim_mismatch.cpp: a 1-D Tuple Func defined over (x, y)."""
    x, y = _vars("x", "y")
    f = hl.Func([hl.Int(32), hl.Float(32)], 1, "f")
    with pytest.raises(hl.HalideError, match=r'Func "f" is constrained to have exactly 1 dimensions, but is defined '
                                             r"with 2 dimensions"):
        f[x, y] = (hl.cast(hl.Int(32), 0), hl.f32(0))


def test_func_tuple_types_mismatch():
    """Halide's error/func_tuple_types_mismatch.cpp: a (uint8, float64) Func given (int32, float32)."""
    x, y = _vars("x", "y")
    f = hl.Func([hl.UInt(8), hl.Float(64)], 2, "f")
    with pytest.raises(hl.HalideError, match=r'Func "f" is constrained to only hold values of type \(uint8, float64\) '
                                             r"but is defined with values of type \(int32, float32\)"):
        f[x, y] = (hl.cast(hl.Int(32), 0), hl.f32(0))


def test_func_tuple_update_types_mismatch():
    """Halide's error/func_tuple_update_types_mismatch.cpp: its update gives (int32, float32)."""
    x, y = _vars("x", "y")
    f = hl.Func([hl.UInt(8), hl.Float(64)], 2, "f")
    f[x, y] = (hl.cast(hl.UInt(8), 0), hl.f64(0))
    with pytest.raises(hl.HalideError, match=r"In update definition 0 of Func f: Tuple element 0 of update definition "
                                             r"has type int32, but pure definition has type uint8"):
        f[x, y] = (hl.cast(hl.Int(32), 0), hl.f32(0))


def test_implicit_args():
    """Halide's error/implicit_args.cpp: f(x, _) = g(_) + 2 gives f two implicit Vars; the
    update's h(_) has three (Halide: undefined variable _2)."""
    x, y, z = _vars("x", "y", "z")
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    g[x, y] = x + y
    g.compute_root()
    h[x, y, z] = x + y + z
    h.compute_root()
    f[x, hl._] = g[hl._] + 2
    with pytest.raises(hl.HalideError, match="In update definition 0 of Func f: 4 arguments on the left-hand side, "
                                             "but the pure definition has 3"):
        f[x, hl._] += h[hl._] + 3


def test_extern_func_self_argument():
    """Halide's error/extern_func_self_argument.cpp: an extern stage given itself as input."""
    f = hl.Func("f")
    with pytest.raises(hl.HalideError, match="Extern Func f has itself as an argument"):
        f.define_extern("extern_func", [f], hl.Int(32), 2)
        f.infer_arguments()


def test_extern_device_function_with_no_target_support():
    """Halide's error/extern_device_function_with_no_target_support.cpp: an extern stage with
    DeviceAPI.OpenCL (Halide: the host target cannot copy its output back). pyhalide runs
    extern stages on the host only, and says so when the stage is defined."""
    f = hl.Func("f")
    with pytest.raises(hl.HalideError, match=r"Func f: pyhalide runs extern stages on the host only "
                                             r"\(device_api=DeviceAPI.OpenCL\)"):
        f.define_extern("extern", [], hl.Int(32), 1, hl.NameMangling.Default, hl.DeviceAPI.OpenCL)
        f.compile_jit(hl.Target("host"))


# --------------------------------------------------------------------------- schedule errors


def test_atomics_self_reference():
    """Halide's error/atomics_self_reference.cpp: f(clamp(f(r), 0, 100)) = f(r) + 1 with
    atomic(override_associativity_test=True): the coordinate written depends on f itself."""
    (x,) = _vars("x")
    r = hl.RDom([hl.Range(0, 100)])
    f = hl.Func("f")
    f[x] = 0
    f[hl.clamp(f[r], 0, 100)] = f[r] + 1
    f.compute_root()
    f.update().atomic(True).parallel(r.x)
    with pytest.raises(hl.HalideError, match=r"Can't use atomic\(\) on an update where the index written to depends "
                                             r"on the current value of the Func: f's update 0"):
        f.realize([100])


def test_bad_async_producer():
    """Halide's error/bad_async_producer.cpp: g, async and stored at root, is computed at h's x,
    inside f's consume node: f, computed there too, is neither async nor stored outside g."""
    (x,) = _vars("x")
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    f[x] = hl.cast(hl.UInt(8), x + 7)
    g[x] = f[x]
    h[x] = g[x]
    f.store_root().compute_at(h, x)
    g.store_root().compute_at(h, x).async_()
    with pytest.raises(hl.HalideError, match=r"The Func f is consumed by async Func g and has a compute_at location in "
                                             r"between the store_at location and the compute_at location of g\. This "
                                             r"is only legal when f is both async and has a store_at location outside "
                                             r"the store_at location of the consumer\."):
        h.realize([32])
    f.store_root().compute_at(g, hl.Var.outermost())  # the schedule meant: f nested inside g's production
    assert np.asarray(h.realize([32])).tolist() == list(range(7, 39))


def test_bad_async_producer_2():
    """Halide's error/bad_async_producer_2.cpp (Halide issue 5201): producer1 is async but
    stored at consumer's y, inside async producer2's storage (at root)."""
    x, y = _vars("x", "y")
    producer1, producer2, consumer = hl.Func("producer1"), hl.Func("producer2"), hl.Func("consumer")
    producer1[x, y] = x + y
    producer2[x, y] = producer1[x, y]
    consumer[x, y] = producer2[x, y - 1] + producer2[x, y + 1]
    consumer.compute_root()
    producer1.compute_at(consumer, y).async_()
    producer2.store_root().compute_at(consumer, y).async_()
    consumer.bound(x, 0, 16).bound(y, 0, 16)
    with pytest.raises(hl.HalideError, match=r"The Func producer1 is consumed by async Func producer2 and has a "
                                             r"compute_at location in between the store_at location and the "
                                             r"compute_at location of producer2"):
        consumer.realize([16, 16])


def test_bad_bound():
    """Halide's error/bad_bound.cpp: bound() on a Var f does not have."""
    x, y = _vars("x", "y")
    f = hl.Func("f")
    f[x] = 0
    with pytest.raises(hl.HalideError, match=r"Func f.bound: y is not a pure Var of f \(its Vars are x\)"):
        f.bound(y, 0, 10)


def test_bad_bound_storage():
    """Halide's error/bad_bound_storage.cpp: bound_storage(x, 9), but g needs 10 columns of f."""
    x, y = _vars("x", "y")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + y
    g[x, y] = f[x, y] * 2
    f.compute_at(g, y)
    f.bound_storage(x, 9)
    with pytest.raises(hl.HalideError, match=r"The explicit allocation bound \(9\) of dimension x of f is too small to "
                                             r"store the required region \(10\)"):
        g.realize([10, 10])


def test_bad_compute_at():
    """Halide's error/bad_compute_at.cpp: f at h's x, but g (at h's y, outside h's x loop) also
    reads f; junk Funcs around it complicate the message."""
    x, y = _vars("x", "y")
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    junk1, junk2, junk3 = hl.Func("junk1"), hl.Func("junk2"), hl.Func("junk3")
    f[x] = x
    g[x] = f[x]
    junk1[x] = 3
    junk2[x] = 3
    junk3[x, y] = 3
    h[x, y] = g[x] + f[x] + junk1[x] + junk2[x] + junk3[x, y]
    g.compute_at(h, y)
    junk1.compute_at(h, y)
    junk2.compute_at(h, x)
    junk3.compute_root()
    f.compute_at(h, x)
    with pytest.raises(hl.HalideError, match=r"Func f is computed at LoopLevel\(h, x, stage -1\), but it is also used "
                                             r"outside that loop"):
        h.realize([10, 10])


def test_bad_extern_split():
    """Halide's error/bad_extern_split.cpp: an extern stage's dimension split, its outer loop
    moved inside: the extern call would be made inside an ordinary loop."""
    (x,) = _vars("x")
    xo = hl.Var("xo")
    f = hl.Func("f")
    f.define_extern("test", [], hl.Int(32), [x])
    f.split(x, xo, x, 8).reorder(xo, x)
    with pytest.raises(hl.HalideError, match="Externally defined Func f cannot have extern loop x outside a "
                                             "non-extern loop"):
        f.compile_jit()


def test_bad_fold():
    """Halide's error/bad_fold.cpp: g reads f at y - 1 and y + 1, three rows per row of g, but
    f's storage is folded to 2 rows."""
    x, y = _vars("x", "y")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x
    g[x, y] = f[x - 1, y + 1] + f[x, y - 1]
    f.store_root().compute_at(g, y).fold_storage(y, 2)
    with pytest.raises(hl.HalideError, match=r"Func f.fold_storage\(y, 2\): each iteration of loop g.s0.y needs 3 "
                                             r"coordinates of y, more than the fold holds"):
        g.realize([100, 1000])


def _f_g_h():
    x, y = _vars("x", "y")
    f, g, h = hl.Func("f"), hl.Func("g"), hl.Func("h")
    f[x] = x
    g[x] = f[x]
    h[x, y] = g[x]
    return f, g, h, x, y


def test_bad_hoist_storage():
    """Halide's error/bad_hoist_storage.cpp: f computed at root with its storage hoisted to h's
    y, inside where it is stored."""
    f, g, h, x, y = _f_g_h()
    g.compute_at(h, y)
    f.hoist_storage(h, y).compute_root()
    with pytest.raises(hl.HalideError, match=r"Func f has its storage hoisted to h.y, which is inside where it is "
                                             r"stored \(root\): hoist_storage must be at or outside the store level"):
        h.realize([10, 10])


def test_bad_store_at():
    """Halide's error/bad_store_at.cpp: f stored at h's y but computed at root, outside it."""
    f, g, h, x, y = _f_g_h()
    g.compute_at(h, y)
    f.store_at(h, y).compute_root()
    with pytest.raises(hl.HalideError, match="Func f is stored at h.y but computed at root, which is not inside it: "
                                             "the store level must be at or outside the compute level"):
        h.realize([10, 10])


def test_bad_ring_buffer():
    """Halide's error/bad_ring_buffer.cpp: ring_buffer() with no hoist_storage of its own."""
    f, g, h, x, y = _f_g_h()
    g.compute_at(h, y)
    f.compute_root().ring_buffer(2)
    with pytest.raises(hl.HalideError, match=r"Func f is scheduled with ring_buffer\(\), but has matching store_at and "
                                             r"hoist_storage levels. Add an explicit hoist_storage directive"):
        h.realize([10, 10])


def test_hoist_storage_without_compute_at():
    """Halide's error/hoist_storage_without_compute_at.cpp: g hoisted, but inlined."""
    f, g, h, x, y = _f_g_h()
    g.hoist_storage(h, y)
    with pytest.raises(hl.HalideError, match=r"Func g is scheduled hoist_storage\(\), but is inlined: it has no "
                                             r"storage to hoist to h.y"):
        h.realize([10, 10])


def test_bad_partition_always():
    """Halide's error/bad_partition_always.cpp: Partition.Always on a loop with nothing to
    partition (f(x) = 0)."""
    (x,) = _vars("x")
    f = hl.Func("f")
    f[x] = 0
    f.partition(x, hl.Partition.Always)
    with pytest.raises(hl.HalideError, match=r"Loop Partition Policy is set to Always for f\.s0\.x, but no loop "
                                             r"partitioning was performed"):
        f.realize([10])


def test_bad_prefetch():
    """Halide's error/bad_prefetch.cpp: prefetch at y from x, with x inside y (at and from
    swapped)."""
    x, y = _vars("x", "y")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = x + y
    g[x, y] = f[0, 0]
    f.compute_root()
    with pytest.raises(hl.HalideError, match=r"In schedule for g.s0: prefetch at y from x: the loop x must be y or "
                                             r"outside it"):
        g.prefetch(f, y, x, 8)  # (Halide: when compiled)
        g.compile_to_module([])


def test_bad_reorder():
    """Halide's error/bad_reorder.cpp: reorder(x, y, x), x named twice (meant xi)."""
    x, y, xi = _vars("x", "y", "xi")
    f = hl.Func("f")
    f[x, y] = x
    f.split(x, x, xi, 8)
    with pytest.raises(hl.HalideError, match=r"In schedule for f.s0: reorder names a dimension twice"):
        f.reorder(x, y, x)


def test_bad_reorder_storage():
    """Halide's error/bad_reorder_storage.cpp: reorder_storage(x, y, x)."""
    x, y = _vars("x", "y")
    f = hl.Func("f")
    f[x, y] = x
    with pytest.raises(hl.HalideError, match="Func f.reorder_storage names a Var twice"):
        f.reorder_storage(x, y, x)


def test_bad_rvar_order():
    """Halide's error/bad_rvar_order.cpp: f(r.x, r.y) += f(r.y, r.x) reads what other
    iterations write, so swapping r.x and r.y changes the result."""
    x, y = _vars("x", "y")
    r1 = hl.RDom([hl.Range(0, 10), hl.Range(0, 10)], "r1")
    f = hl.Func("f")
    f[x, y] = x + y
    f[r1.x, r1.y] += f[r1.y, r1.x]
    with pytest.raises(hl.HalideError, match=r"In schedule for f.s1: can't reorder RVars r1\$x, r1\$y because it may "
                                             r"change the meaning of the algorithm"):
        f.update().reorder(r1.y, r1.x)


def test_bad_schedule():
    """Halide's error/bad_schedule.cpp: f is inlined into g, so f.vectorize has no loop."""
    (x,) = _vars("x")
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = x
    g[x] = f[x]
    f.vectorize(x, 4)
    with pytest.raises(hl.HalideError, match=r"Cannot vectorize dimension x\.v\.0 of function f because the function "
                                             r"is scheduled inline"):
        g.realize([10])


def test_fuse_vectorized_var_with_rvar():
    """Halide's error/fuse_vectorized_var_with_rvar.cpp (Halide issue 7871): y vectorized, then
    fused with r.y: the fused loop is vectorized (it keeps the inner loop's kind, as in
    Halide) and runs over an RVar whose iterations update the same element."""
    x, y = _vars("x", "y")
    inp, local_sum, blurry = hl.Func("input"), hl.Func("local_sum"), hl.Func("blurry")
    yryf = hl.RVar("yryf")
    inp[x, y] = 2 * x + 5 * y
    r = hl.RDom([hl.Range(-2, 5), hl.Range(-2, 5)], "rdom_r")
    local_sum[x, y] = 0
    local_sum[x, y] += inp[x + r.x, y + r.y]
    blurry[x, y] = hl.cast(hl.Int(32), local_sum[x, y] / 25)
    stage = local_sum.update(0).vectorize(y)
    with pytest.raises(hl.HalideError, match=r"In schedule for local_sum.s1: can't vectorize RVar yryf: different "
                                             r"iterations may write the same element of local_sum \(a race\)"):
        stage.fuse(y, r.y, yryf)


def test_fused_loop_keeps_the_inner_loops_kind():
    """What fuse_vectorized_var_with_rvar relies on: a fused loop is parallel when its inner
    loop was (Halide's rule, as print_loop_nest shows), and computes the same values."""
    x, y, xy = _vars("x", "y", "xy")
    f = hl.Func("f")
    f[x, y] = x + 10 * y
    f.parallel(x).fuse(x, y, xy)
    assert [d.for_type for d in f._schedule.stages[0].dims] == ["parallel"]
    yy, xx = np.mgrid[0:6, 0:8]
    np.testing.assert_array_equal(np.asarray(f.realize([8, 6])), xx + 10 * yy)


# --------------------------------------------------------------------------- pipelines and buffers


def test_async_require_fail():
    """Halide's error/async_require_fail.cpp: a require() that fails inside an async producer
    stops the pipeline. (Halide's bindings take only Exprs as error arguments; pyhalide also
    takes strings, as C++ does.)"""
    (x,) = _vars("x")
    p1, p2 = hl.Param(hl.Int(32), "p1"), hl.Param(hl.Int(32), "p2")
    f, g = hl.Func("f"), hl.Func("g")
    f[x] = hl.require((p1 + p2) == 7829, (p1 + p2) * 7919,
                      "The parameters should add to exactly", 7829, "but were", p1, p2)
    g[x] = f[x] + f[x + 1]
    f.compute_at(g, x).async_()
    p1.set(1)
    p2.set(2)
    with pytest.raises(hl.RuntimeCheckError, match=r"Requirement Failed: \(\(p1 \+ p2\) == 7829\) The parameters "
                                                   r"should add to exactly 7829 but were 1 2"):
        g.realize([1])


def test_bad_dimensions():
    """Halide's error/bad_dimensions.cpp: a 3-D buffer bound to a 2-D ImageParam."""
    x, y = _vars("x", "y")
    im = hl.ImageParam(hl.UInt(8), 2, "im")
    f = hl.Func("f")
    f[x, y] = im[x, y]
    with pytest.raises(hl.HalideError, match="ImageParam im has 2 dimensions but was given a buffer with 3"):
        im.set(hl.Buffer(hl.UInt(8), [10, 10, 3]))
        f.realize([10, 10])


def test_bad_host_alignment():
    """Halide's error/bad_host_alignment.cpp: the input must be 512-byte aligned; a buffer
    cropped by one byte is not. (The output starts at x = 1 too, so that the region read is
    within the cropped input and the alignment is what fails, in Halide's bindings as here.)"""
    x, y = _vars("x", "y")
    inp = hl.ImageParam(hl.UInt(8), 2, "in")
    param_buf = hl.Buffer(hl.UInt(8), [11, 10])
    param_buf.crop(0, 1, 10)
    inp.set_host_alignment(512)
    f = hl.Func("f")
    f[x, y] = inp[x, y]
    f.compute_root()
    inp.set(param_buf)
    out = hl.Buffer(hl.UInt(8), [10, 10])
    out.set_min([1, 0])
    with pytest.raises(hl.RuntimeCheckError, match="The host pointer of in is not aligned to a 512 bytes boundary"):
        f.realize(out)


def test_broken_promise():
    """Halide's error/broken_promise.cpp: lut(unsafe_promise_clamped(in(x), 0, 1023)) with
    in(x) = 20 x, up to 1980; with the target feature CheckUnsafePromises the promise is checked."""
    (x,) = _vars("x")
    data = hl.Buffer(np.arange(100, dtype=np.uint16) * 20)
    table = hl.Buffer(np.sin(2 * np.float32(3.1415) * np.arange(1024, dtype=np.float32) / 1024))
    inp, lut = hl.ImageParam(hl.UInt(16), 1, "in"), hl.ImageParam(hl.Float(32), 1, "lut")
    f = hl.Func("f")
    f[x] = lut[hl.unsafe_promise_clamped(inp[x], 0, 1023)]
    lut.dim(0).set_bounds(0, 1024)
    inp.set(data)
    lut.set(table)
    checked = hl.get_jit_target_from_environment().with_feature(hl.TargetFeature.CheckUnsafePromises)
    with pytest.raises(hl.RuntimeCheckError, match=r"Requirement Failed: \(\(\(in\(f.s0.x\) >= \(uint16\)0\) && "
                                                   r"\(in\(f.s0.x\) <= \(uint16\)1023\)\)\) from "
                                                   r"unsafe_promise_clamped"):
        f.realize([100], checked)
    # a promise kept passes the check
    np.testing.assert_array_equal(np.asarray(f.realize([50], checked)), np.asarray(table)[np.arange(50) * 20])


def test_buffer_larger_than_two_gigs():
    """Halide's error/buffer_larger_than_two_gigs.cpp: a 2^24 x 2^24 x 2^24 byte buffer (2^72
    bytes) is refused. (Halide's bindings, built without assertions, crash on it.)"""
    with pytest.raises(hl.HalideError, match=r"Buffer b\S* of uint8 with sizes \[16777216, 16777216, 16777216\] cannot "
                                             r"be allocated: it would take 4722366482869645213696 bytes"):
        hl.Buffer(hl.UInt(8), [1 << 24, 1 << 24, 1 << 24])


def _callable_func():
    """f(x, y) = p_img(x, y) + u8(p_int / p_float), as the callable_* tests define it."""
    x, y = _vars("x", "y")
    p_int, p_float = hl.Param(hl.Int(32), "p_int", 42), hl.Param(hl.Float(32), "p_float", 1.0)
    p_img = hl.ImageParam(hl.UInt(8), 2, "p_img")
    f = hl.Func("f")
    f[x, y] = p_img[x, y] + hl.cast(hl.UInt(8), p_int / p_float)
    return f, p_int, p_float, p_img


def test_callable_bad_arguments():
    """Halide's error/callable_bad_arguments.cpp: compile_to_callable's arguments leave p_int out."""
    f, p_int, p_float, p_img = _callable_func()
    with pytest.raises(hl.HalideError, match="compile_to_callable: the pipeline uses Param p_int, which is not among "
                                             "the arguments"):
        f.compile_to_callable([p_img, p_float])


def test_callable_bad_values_passed():
    """Halide's error/callable_bad_values_passed.cpp: 3.1415927 passed for the int32 p_int (and,
    as Halide's bindings refuse too, a value an integer Param's type cannot hold)."""
    f, p_int, p_float, p_img = _callable_func()
    c = f.compile_to_callable([p_img, p_int, p_float])
    in1, out = hl.Buffer(hl.UInt(8), [10, 10]), hl.Buffer(hl.UInt(8), [10, 10])
    with pytest.raises(hl.HalideError, match=r"Unable to cast Python instance of type <class 'float'> to the scalar "
                                             r"argument p_int of type int32"):
        c(in1, 3.1415927, 1.0, out)
    with pytest.raises(hl.HalideError, match=r"Argument p_int is a Param of type int32: 4294967296 is out of its "
                                             r"range"):
        c(in1, 2**32, 1.0, out)
    c(in1, 3, 1, out)  # an int for a float Param is fine, as in Halide
    assert np.asarray(out).tolist() == [[3] * 10] * 10


def test_callable_typed_bad_arguments():
    """Halide's error/callable_typed_bad_arguments.cpp: arguments (p_int, p_float, p_img) called
    with a Buffer where p_int goes (C++ checks the types of make_std_function; Python, the
    values passed)."""
    f, p_int, p_float, p_img = _callable_func()
    c = f.compile_to_callable([p_int, p_float, p_img])
    in1, out = hl.Buffer(hl.UInt(8), [10, 10]), hl.Buffer(hl.UInt(8), [10, 10])
    with pytest.raises(hl.HalideError, match=r"Unable to cast Python instance of type <class 'pyhalide.buffer.Buffer'> "
                                             r"to the scalar argument p_int"):
        c(in1, 1.0, in1, out)


def test_callable_typed_bad_arguments_buffer_dims():
    """Halide's error/callable_typed_bad_arguments_buffer_dims.cpp: a 3-D buffer for the 2-D p_img."""
    f, p_int, p_float, p_img = _callable_func()
    c = f.compile_to_callable([p_img, p_int, p_float])
    in1, out = hl.Buffer(hl.UInt(8), [10, 10, 3]), hl.Buffer(hl.UInt(8), [10, 10])
    with pytest.raises(hl.HalideError, match="Buffer p_img is uint8 with 3 dimensions, but the pipeline needs uint8 "
                                             "with 2"):
        c(in1, 3, 1.0, out)


def test_callable_typed_bad_arguments_buffer_type():
    """Halide's error/callable_typed_bad_arguments_buffer_type.cpp: float32 buffers for the
    uint8 input and output."""
    f, p_int, p_float, p_img = _callable_func()
    c = f.compile_to_callable([p_img, p_int, p_float])
    in1, out = hl.Buffer(hl.Float(32), [10, 10]), hl.Buffer(hl.Float(32), [10, 10])
    with pytest.raises(hl.HalideError, match="Buffer f is float32 with 2 dimensions, but the pipeline needs uint8 "
                                             "with 2"):
        c(in1, 3, 1.0, out)
    with pytest.raises(hl.HalideError, match="Buffer p_img is float32 with 2 dimensions, but the pipeline needs uint8 "
                                             "with 2"):
        c(in1, 3, 1.0, hl.Buffer(hl.UInt(8), [10, 10]))


def test_constrain_wrong_output_buffer():
    """Halide's error/constrain_wrong_output_buffer.cpp: the min of a Tuple's second output
    buffer constrained; the buffers share the first one's region."""
    (x,) = _vars("x")
    f = hl.Func("f")
    f[x] = hl.Tuple([x, hl.sin(x)])
    f.output_buffers()[1].dim(0).set_min(4)
    with pytest.raises(hl.HalideError, match=r"Output buffer f\.1: can't constrain the min or extent of an output "
                                             r"buffer beyond the first"):
        f.compile_jit()


def test_constraint_uses_non_param():
    """Halide's error/constraint_uses_non_param.cpp: a requirement can use Params, not Vars or Funcs."""
    x, y = _vars("x", "y")
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = 0
    g[x, y] = f[x, y]
    p = hl.Pipeline(g)
    with pytest.raises(hl.HalideError, match=r"Requirement \(\(x == 4\) && \(f\(3, 2\) == 5\)\) refers to Var or "
                                             r"RVar x"):
        p.add_requirement((x == 4) & (f[3, 2] == 5))
        p.realize([100, 100])


def test_device_dirty_with_no_device_support():
    """Halide's error/device_dirty_with_no_device_support.cpp: an input marked dirty on the
    device, realized for the host: its newer values cannot be had."""
    x, y = _vars("x", "y")
    im = hl.Buffer(hl.Float(32), [128, 128])
    f = hl.Func("f")
    f[x, y] = im[x, y]
    im.set_device_dirty(True)
    assert im.device_dirty()
    with pytest.raises(hl.HalideError, match=r"Input buffer \S+ is dirty on device \(set_device_dirty\), but it has "
                                             r"no device allocation"):
        f.realize([128, 128], hl.Target("host"))


def test_dupe_param_name():
    """Halide's error/dupe_param_name.cpp: an ImageParam and a Buffer both named "input"."""
    (x,) = _vars("x")
    input_a = hl.ImageParam(hl.Int(32), 1, "input")
    buf_a = hl.Buffer(hl.Int(32), [1], "input")
    buf_a.fill(3)
    input_a.set(buf_a)
    input_b = hl.Buffer(hl.Int(32), [1], "input")
    input_b.fill(5)
    f = hl.Func("f")
    f[x] = input_a[x] + input_b[x]
    with pytest.raises(hl.HalideError, match="Two different input images are both named 'input'"):
        f.compile_jit()


def test_impossible_constraints():
    """Halide's error/impossible_constraints.cpp: out() reads in(width, height), one past
    in's extent in each dimension, so no input is large enough. (Halide's bindings report a
    ValueError: their infer_input_bounds turns the error into "Invalid arguments".)"""
    inp = hl.ImageParam(hl.Float(32), 2, "in")
    out = hl.Func("out")
    out[()] = inp[inp.width(), inp.height()] + inp[0, 0]
    with pytest.raises(hl.HalideError, match="Inferring input bounds on Pipeline didn't converge after 16 iterations. "
                                             "There may be unsatisfiable constraints"):
        out.infer_input_bounds([])


# --------------------------------------------------------------------------- the autoscheduler


@pytest.mark.parametrize("hand", ["parallel", "reorder"])
def test_autoscheduler_keeps_a_partial_schedule(hand):
    """Halide's error/auto_schedule_no_parallel.cpp and auto_schedule_no_reorder.cpp, where
    pyhalide goes further: Halide's Mullapudi2016 refuses a pipeline whose output is partly
    scheduled by hand (g.parallel(x), g.reorder(y, x)); pyhalide's autoscheduler (any name
    Halide uses) keeps the hand schedule, schedules the rest, and the values are right."""
    x, y = _vars("x", "y")
    r = hl.RDom([hl.Range(2, 18)])
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = 1
    f[r.x, y] = f[r.x - 2, y] + f[r.x - 1, y]
    g[x, y] = f[x + 10, y] + 2
    g.set_estimates([hl.Range(0, 50), hl.Range(0, 50)])
    if hand == "parallel":
        g.parallel(x)
    else:
        g.reorder(y, x)
    before = list(g._schedule.log)
    hl.Pipeline(g).apply_autoscheduler(hl.get_host_target(), hl.AutoschedulerParams("Mullapudi2016"))
    assert list(g._schedule.log) == before
    fib = [1, 1]
    for _ in range(18):
        fib.append(fib[-1] + fib[-2])
    want = np.array([(fib[i + 10] if i + 10 < 20 else 1) + 2 for i in range(50)])
    np.testing.assert_array_equal(np.asarray(g.realize([50, 50])), np.tile(want, (50, 1)))
