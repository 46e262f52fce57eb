"""An independent numpy evaluator of the algorithm alone: the test oracle.

`realize(outputs, sizes, mins=None)` computes Funcs from their definitions only, ignoring every
schedule, without bounds inference, lowering or codegen. Expressions are evaluated with numpy,
vectorized over coordinate arrays, in the exact dtype of each IR node and with Halide's
semantics (Euclidean integer division, division by zero gives zero, wrap-around, ...).

How Funcs are evaluated
-----------------------
Each Func is materialised over a box (per-dimension [lo, hi]) found from the coordinates that are
actually requested (data driven, so exact); the box grows, and the Func is recomputed over the
union, when a later request falls outside it. Like Halide's bounds inference, each stage has its
own region: stage k's pure Vars run over box k, and a stage that reads or writes its Func at some
point needs every earlier stage to cover that point, so boxes[0] (the storage, where the pure
definition is evaluated) contains everything.

An update runs with its pure Vars vectorized over its box and its RVars in Halide order (r.x
innermost), each iteration reading the values left by the previous ones. Iterations are batched
(vectorized) when that is provably the same: for `f[lhs] = f[lhs] op term` (+, -, * on any
numeric type; min, max on integers) through numpy's unbuffered, in-order `ufunc.at`, and otherwise
when no iteration of a batch reads a point that an earlier iteration of the same batch writes
(checked on the actual coordinates); if a batch has such a dependence it runs one iteration at a
time. Within one iteration all points of the pure Vars read before any of them is written.

Select evaluates both sides but each side under the mask of lanes that take it: reads of images
and Funcs only count (for bounds checks and for growing boxes) on active lanes. The same holds for
an RDom's `where` predicate.

Pure Funcs asked for a few points outside their box (a serial loop reading one point per
iteration) are evaluated at exactly those points instead of growing the box point by point.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import replace

import numpy as np

from . import ir, scatter_gather
from .errors import HalideError, InternalError
from .expr import to_ir
from .extern import EXTERN_EXPR, JITExterns, buffer_struct, c_type, extern_call, find_symbol
from .operators import UNDEF
from .param import ImageParam, Param
from .target import TARGET_QUERY, answer_target_query, get_jit_target_from_environment
from .types import TYPE_CODES, Float, Handle, bfloat16_bits, bfloat16_dtype
from .var import ReductionDomain

__all__ = ["realize", "evaluate_expr"]

# Most grid elements (pure points x RVar iterations) evaluated at once in an update.
_BLOCK_ELEMENTS = 1 << 20
# A pure Func asked for at most this many points outside its box evaluates them directly.
_SMALL_REQUEST = 256


# ---------------------------------------------------------------- public API
def realize(outputs, sizes, mins=None, jit_externs: dict | None = None) -> list[np.ndarray]:
    """Evaluate the output Func(s) over [mins, mins + sizes) from their definitions alone.

    Returns one numpy array per output (one per Tuple element, flattened in order), in numpy
    axis order (Halide [x, y] is numpy shape (h, w)), with the dtype of the Func's type.
    """
    from .func import Func

    funcs = list(outputs) if isinstance(outputs, list | tuple) else [outputs]
    if not funcs:
        raise HalideError("reference.realize: no outputs")
    if isinstance(sizes, int | np.integer):
        sizes = [sizes]
    sizes = [int(s) for s in sizes]
    mins = [0] * len(sizes) if mins is None else [int(m) for m in mins]
    if len(mins) != len(sizes):
        raise HalideError(f"reference.realize: {len(mins)} mins for {len(sizes)} sizes")
    if any(s < 0 for s in sizes):
        raise HalideError(f"reference.realize: negative size in {sizes}")
    ev = _Evaluator(JITExterns(jit_externs) if jit_externs else None)
    results = []
    for f in funcs:
        if not isinstance(f, Func):
            raise HalideError(f"reference.realize: expected a Func, got {f!r}")
        st = ev.state(f)
        if st.nd != len(sizes):
            raise HalideError(
                f"Func {st.name} has {st.nd} dimensions but was realized with {len(sizes)} sizes"
            )
        if any(s == 0 for s in sizes):
            results.extend(np.zeros(tuple(reversed(sizes)), dt) for dt in st.dtypes)
            continue
        lo = list(mins)
        hi = [m + s - 1 for m, s in zip(mins, sizes)]
        with np.errstate(all="ignore"):
            ev.ensure(st, lo, hi)
        slo = st.boxes[0][0]
        sl = tuple(slice(lo[d] - slo[d], hi[d] - slo[d] + 1) for d in range(st.nd))
        for arr in st.values:
            out = np.array(arr[sl] if st.nd else arr, copy=True)
            results.append(np.ascontiguousarray(out.transpose(tuple(reversed(range(st.nd))))) if st.nd else out)
    return results


def evaluate_expr(expr, env=None) -> np.ndarray:
    """Evaluate an expression (hl.Expr or IR) with `env` mapping variable names to values.

    Values may be Python numbers or numpy arrays (broadcast together). Returns a numpy array
    (0-d for a scalar result) of the expression's dtype.
    """
    node = to_ir(expr)
    ev = _Evaluator()
    ctx = _Eval(ev, {} if env is None else dict(env))
    return ctx.run(node)


# ---------------------------------------------------------------- helpers
def _dtype(t) -> np.dtype:
    if t.lanes != 1:
        raise HalideError(f"reference: vector type {t} cannot be evaluated")
    return t.to_numpy()


def _const(value, dt) -> np.ndarray:
    return np.array(bool(value) if dt == np.bool_ else value, dtype=dt)


def _size(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _active_bbox(coords, mask):
    """(lo, hi, count) of the coordinates on active lanes, or None when no lane is active."""
    shapes = [c.shape for c in coords]
    if mask is not None:
        shapes.append(mask.shape)
    shape = np.broadcast_shapes(*shapes) if shapes else ()
    n = _size(shape)
    if n == 0:
        return None
    if mask is None:
        return [int(c.min()) for c in coords], [int(c.max()) for c in coords], n
    m = np.broadcast_to(mask, shape)
    count = int(np.count_nonzero(m))
    if count == 0:
        return None
    lo, hi = [], []
    for c in coords:
        cb = np.broadcast_to(c, shape)[m]
        lo.append(int(cb.min()))
        hi.append(int(cb.max()))
    return lo, hi, count


def _unsigned(dt: np.dtype) -> np.dtype:
    return np.dtype(f"uint{dt.itemsize * 8}")


def _bit_length(u: np.ndarray) -> np.ndarray:
    u = u.astype(np.uint64)
    bl = np.zeros(u.shape, np.int64)
    for s in (32, 16, 8, 4, 2, 1):
        m = u >= np.uint64(1 << s)
        bl = bl + np.where(m, s, 0)
        u = np.where(m, u >> np.uint64(s), u)
    return bl + (u > 0)


def _int_div(a, b, dt):
    bz = b == 0
    bs = np.where(bz, 1, b).astype(dt)
    q = a // bs  # floor division: Euclidean for positive divisors
    if dt.kind == "i":
        r = a - q * bs
        q = np.where((r != 0) & (bs < 0), q + 1, q).astype(dt)
    return np.where(bz, 0, q).astype(dt)


def _int_mod(a, b, dt):
    bz = b == 0
    bs = np.where(bz, 1, b).astype(dt)
    r = a % bs  # takes the divisor's sign
    if dt.kind == "i":
        r = np.where(r < 0, r - bs, r).astype(dt)
    return np.where(bz, 0, r).astype(dt)


def _bool_arith(fn, a, b):
    """Arithmetic on UInt(1): compute in uint8 and keep the low bit."""
    return (fn(a.astype(np.uint8), b.astype(np.uint8)) & 1).astype(np.bool_)


def _shift(a, b, left: bool, dt):
    bits = dt.itemsize * 8
    neg = b < 0 if b.dtype.kind == "i" else np.zeros(b.shape, np.bool_)
    b64 = b.astype(np.uint64)  # two's complement: |INT64_MIN| is 2**63 as uint64
    magnitude = np.where(neg, np.uint64(0) - b64, b64)
    amount = np.minimum(magnitude, np.uint64(bits)).astype(dt)
    lsh = np.left_shift(a, amount)
    rsh = np.right_shift(a, amount)
    # Halide shifts the other way when a signed shift amount is negative.
    return np.where(neg, rsh if left else lsh, lsh if left else rsh).astype(dt)


_erf = np.frompyfunc(math.erf, 1, 1)

_MATH1 = {
    "sqrt": np.sqrt, "exp": np.exp, "log": np.log,
    "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "floor": np.floor, "ceil": np.ceil, "round": np.rint, "trunc": np.trunc,
    "abs": np.abs, "fabs": np.abs,
}
_MATH2 = {"pow": np.power, "atan2": np.arctan2}

_IDENTITY_INTRINSICS = {"likely", "likely_if_innermost", "promise_clamped", "unsafe_promise_clamped",
                        "strict_float", "return_second", "memoize_tag"}


def _calls_func(node, func) -> bool:
    """Whether node (an IR Expr, or None) contains a call to func."""
    if node is None:
        return False
    stack = [node]
    seen = set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, ir.Call) and n.call_type == ir.HALIDE and n.func is func:
            return True
        for name in n._children:
            v = getattr(n, name)
            if isinstance(v, ir.Node):
                stack.append(v)
            elif isinstance(v, tuple):
                stack.extend(x for x in v if isinstance(x, ir.Node))
    return False


class _Grow(Exception):
    """Stages [0, upto) of a Func must also cover the box [lo, hi]: recompute it."""

    def __init__(self, state, upto, lo, hi):
        super().__init__(state.name)
        self.state, self.upto, self.lo, self.hi = state, upto, lo, hi


# ---------------------------------------------------------------- extern stages
def _type_args(t) -> tuple[int, int]:
    return TYPE_CODES[t.code], t.bits


def _dims_of(values: np.ndarray, mins) -> list[tuple[int, int, int]]:
    """(min, extent, stride) per dimension of an array in Halide's dimension order."""
    return [(int(m), n, s // values.itemsize) for m, n, s in zip(mins, values.shape, values.strides)]


# ---------------------------------------------------------------- Funcs
class _FuncState:
    def __init__(self, func):
        if not func.defined():
            raise HalideError(f"Func {func.name()} is called but has not been defined")
        self.func = func
        self.name = func.name()
        self.defs = func.definitions()
        self.pure_names = tuple(func._pure_args)
        self.nd = len(self.pure_names)
        self.types = [v.type for v in self.defs[0].values]
        self.dtypes = [_dtype(t) for t in self.types]
        # For each stage, the dimensions whose left-hand side is the pure Var of that position.
        self.pure_dims = [tuple(range(self.nd))]
        for d in self.defs[1:]:
            if len(d.args) != self.nd:
                raise HalideError(f"Func {self.name}: update with {len(d.args)} arguments, expected {self.nd}")
            self.pure_dims.append(tuple(
                i for i, a in enumerate(d.args)
                if isinstance(a, ir.Variable) and a.ref is None and a.name == self.pure_names[i]
            ))
        self.extern = extern_call(func)
        self.pure_only = len(self.defs) == 1 and self.extern is None
        self.boxes = None  # per stage: (lo list, hi list)
        self.values = None  # final values over boxes[0] (Halide dimension order)
        self.work = None  # the arrays being computed
        self.computing = False
        self.stage = 0
        self.recording = None  # self-reads of the current batch, for dependence checks

    def covers(self, lo, hi, upto=None) -> bool:
        """Whether stage 0 (all dims) and stages 1..upto-1 (their pure dims) cover [lo, hi]."""
        n = len(self.defs) if upto is None else upto
        for k in range(n):
            blo, bhi = self.boxes[k]
            for d in self.pure_dims[k]:
                if lo[d] < blo[d] or hi[d] > bhi[d]:
                    return False
        return True

    def grow(self, upto, lo, hi):
        for k in range(upto):
            blo, bhi = self.boxes[k]
            self.boxes[k] = ([min(a, b) for a, b in zip(blo, lo)], [max(a, b) for a, b in zip(bhi, hi)])

    def linear(self, coords):
        """Flat index into the storage box of the coordinates (assumed inside)."""
        lo, hi = self.boxes[0]
        lin = np.zeros((), np.int64)
        stride = 1
        for d in reversed(range(self.nd)):
            lin = lin + (np.asarray(coords[d], np.int64) - lo[d]) * stride
            stride *= hi[d] - lo[d] + 1
        return lin


class _Evaluator:
    def __init__(self, jit_externs: JITExterns | None = None):
        self.jit_externs = jit_externs  # functions extern stages call besides the process's (Pipeline.set_jit_externs)
        self.states: dict[int, _FuncState] = {}
        self.stack: list[_FuncState] = []

    def state(self, func) -> _FuncState:
        st = self.states.get(id(func))
        if st is None:
            st = self.states[id(func)] = _FuncState(func)
        return st

    # --- reading a Func ---
    def call_func(self, func, vi: int, coords, mask) -> np.ndarray:
        st = self.state(func)
        if len(coords) != st.nd:
            raise HalideError(f"Func {st.name} called with {len(coords)} arguments, has {st.nd} dimensions")
        bb = _active_bbox(coords, mask)
        dt = st.dtypes[vi]
        if st.computing:
            if not self.stack or self.stack[-1] is not st or st.stage == 0:
                raise HalideError(f"Func {st.name} depends on its own value (a cycle through its definition)")
            if bb is None:
                return np.zeros((), dt)
            lo, hi, _ = bb
            if not st.covers(lo, hi, st.stage):
                raise _Grow(st, st.stage, lo, hi)
            if st.recording is not None:
                st.recording.append((coords, mask))
            return self._gather(st, st.work[vi], coords)
        if bb is None:
            return np.zeros((), dt)
        lo, hi, count = bb
        if st.boxes is None or not st.covers(lo, hi):
            if st.pure_only and count <= _SMALL_REQUEST:
                return self._point_eval(st, vi, coords, mask)
            self.ensure(st, lo, hi)
        return self._gather(st, st.values[vi], coords)

    def _gather(self, st, arr, coords):
        if st.nd == 0:
            return np.asarray(arr[()])
        lo, hi = st.boxes[0]
        idx = tuple(np.clip(np.asarray(c, np.int64) - lo[d], 0, hi[d] - lo[d]) for d, c in enumerate(coords))
        return np.asarray(arr[idx])

    def _point_eval(self, st, vi, coords, mask):
        env = {n: np.asarray(c, np.int32) for n, c in zip(st.pure_names, coords)}
        self.stack.append(st)
        try:
            return _Eval(self, env, mask).run(st.defs[0].values[vi])
        finally:
            self.stack.pop()

    # --- computing a Func ---
    def ensure(self, st, lo, hi):
        """Make the final values of st cover [lo, hi]."""
        if st.boxes is not None and st.covers(lo, hi):
            return
        if st.computing:
            raise HalideError(f"Func {st.name} depends on its own value (a cycle through its definition)")
        saved = (st.boxes, st.values)
        if st.boxes is None:
            st.boxes = [(list(lo), list(hi)) for _ in st.defs]
        else:
            st.boxes = list(st.boxes)
            st.grow(len(st.defs), lo, hi)
        ok = False
        st.computing = True
        self.stack.append(st)
        try:
            while True:
                try:
                    work = self._execute(st)
                    break
                except _Grow as g:
                    if g.state is not st:
                        raise
                    st.grow(g.upto, g.lo, g.hi)
            st.values = work
            ok = True
        finally:
            if not ok:  # leave the state as it was, so that a later request starts afresh
                st.boxes, st.values = saved
            st.computing = False
            st.work = None
            st.recording = None
            st.stage = 0
            self.stack.pop()

    def _execute(self, st):
        if st.extern is not None:
            return self._run_extern(st)
        lo, hi = st.boxes[0]
        shape = [h - l + 1 for l, h in zip(lo, hi)]
        env = {}
        for d, name in enumerate(st.pure_names):
            env[name] = np.arange(lo[d], hi[d] + 1, dtype=np.int32).reshape(
                [-1 if i == d else 1 for i in range(st.nd)]
            )
        st.stage = 0
        st.work = None
        ctx = _Eval(self, env)
        work = []
        for v, dt in zip(st.defs[0].values, st.dtypes):
            # C order, so that reshape(-1) is a view the updates can write through
            work.append(np.array(np.broadcast_to(ctx.run(v), shape), dtype=dt, order="C"))
        st.work = work
        for k in range(1, len(st.defs)):
            st.stage = k
            self._run_update(st, k)
        return work

    def _run_extern(self, st):
        """An extern stage (pyhalide/extern.py), as Halide runs it: a bounds query that may widen
        the region (st.boxes[0] becomes it), a second for the regions of its Func inputs, which are
        then computed, and the call over them."""
        call = st.extern
        lo, hi = st.boxes[0]
        _, outputs = self._call_extern(st, call, lo, hi, None, "query")
        b = outputs[0]
        lo, hi = [b.dim[d].min for d in range(st.nd)], [b.dim[d].min + b.dim[d].extent - 1 for d in range(st.nd)]
        inputs = {}
        if call.func_inputs():
            queried, _ = self._call_extern(st, call, lo, hi, None, "query")
            for slot, a in call.func_inputs():
                q = queried[slot]
                region = ([q.dim[d].min for d in range(len(a.args))],
                          [q.dim[d].min + q.dim[d].extent - 1 for d in range(len(a.args))])
                producer = self.state(a.func)
                self.ensure(producer, *region)
                # (dimension 0 dense, as Halide's buffers are)
                inputs[slot] = (np.asfortranarray(producer.values[a.value_index]), producer.boxes[0][0])
        st.boxes[0] = (list(lo), list(hi))
        work = [np.zeros([h - l + 1 for l, h in zip(lo, hi)], dt, order="F") for dt in st.dtypes]
        self._call_extern(st, call, lo, hi, (inputs, work), "compute")
        return work

    def _call_extern(self, st, call, lo, hi, arrays, mode: str):
        """One call of an extern stage's function, a bounds query (arrays None: no host memory for
        its Func inputs and outputs) or the computation (arrays: (slot -> (values, mins)) of its
        inputs, its output arrays); returns its argument buffers and its output buffers."""
        args, buffers = [], {}
        for slot, a in enumerate(call.args):
            if a.call_type == ir.HALIDE:
                if arrays is None:
                    buffers[slot] = buffer_struct(*_type_args(a.type), [(0, 0, 0)] * len(a.args))
                else:
                    values, mins = arrays[0][slot]
                    buffers[slot] = buffer_struct(*_type_args(a.type), _dims_of(values, mins), values)
                args.append(ctypes.pointer(buffers[slot]))
            elif a.name == EXTERN_EXPR:
                value = _Eval(self, {}).run(a.args[0]).reshape(-1)[0]
                args.append(c_type(a.type)(value.item()))
            else:  # EXTERN_IMAGE
                image = a.args[2].ref
                buf = image.get() if isinstance(image, ImageParam) else image
                dims = [tuple(int(buf._dim_field(field, d)) for field in ("min", "extent", "stride"))
                        for d in range(buf.dimensions())]
                buffers[slot] = buffer_struct(ir.const_int(a.args[0]), ir.const_int(a.args[1]), dims, buf._array)
                args.append(ctypes.pointer(buffers[slot]))
        outputs = []
        for k, t in enumerate(st.types):
            if arrays is None:
                dims = [(l, h - l + 1, 0) for l, h in zip(lo, hi)]
                outputs.append(buffer_struct(*_type_args(t), dims))
            else:
                outputs.append(buffer_struct(*_type_args(t), _dims_of(arrays[1][k], lo), arrays[1][k]))
            args.append(ctypes.pointer(outputs[-1]))
        arg_types = [a.type if a.name == EXTERN_EXPR else Handle() for a in call.args] + [Handle()] * len(outputs)
        address = self.jit_externs.address(call.name, arg_types) if self.jit_externs is not None else None
        address = address or find_symbol(call.name)
        if address is None:
            raise HalideError(f"Extern stage function {call.name} is not loaded in this process")
        result = ctypes.CFUNCTYPE(ctypes.c_int, *map(c_type, arg_types))(address)(*args)
        if result != 0:
            what = "Bounds inference call to external stage" if mode == "query" else "Call to external stage"
            JITExterns.raise_error(self.jit_externs, HalideError(f"{what} {call.name} returned non-zero value: "
                                                                 f"{result}"))
        return buffers, outputs

    def _scalar(self, node, what: str) -> int:
        v = _Eval(self, {}).run(node)
        if v.size != 1:
            raise HalideError(f"reference: {what} is not a scalar")
        return int(v.reshape(-1)[0])

    def _run_update(self, st, k):
        defn = st.defs[k]
        n_elements = scatter_gather.size([*defn.args, *defn.values], f"In update definition {k - 1} of Func {st.name}")
        parts = scatter_gather.elements(defn.args, defn.values, n_elements)
        if n_elements == 1:
            defn = replace(defn, args=parts[0][0], values=parts[0][1])
        nd = st.nd
        blo, bhi = st.boxes[k]
        pdims = st.pure_dims[k]
        pshape = [bhi[d] - blo[d] + 1 if d in pdims else 1 for d in range(nd)]
        if any(s <= 0 for s in pshape):
            return
        env0 = {}
        for d in pdims:
            env0[st.pure_names[d]] = np.arange(blo[d], bhi[d] + 1, dtype=np.int32).reshape(
                [-1 if i == d else 1 for i in range(nd)] + [1]
            )
        rmins, rexts = [], []
        for rv in defn.rvars:
            rmins.append(self._scalar(rv.min, f"the min of RVar {rv.name}"))
            rexts.append(self._scalar(rv.extent, f"the extent of RVar {rv.name}"))
        total = _size([max(e, 0) for e in rexts])
        if total == 0:
            return
        block = max(1, min(total, _BLOCK_ELEMENTS // _size(pshape)))
        self_lhs = any(_calls_func(a, st.func) for a in defn.args) or _calls_func(defn.predicate, st.func)
        form = None if self_lhs or n_elements > 1 else _reduction_form(defn, st)
        plan = (defn, pshape, env0, rmins, rexts, form, parts)
        if not self_lhs and block < total:
            self._prescan(st, k, plan, total, block)
        for s in range(0, total, block):
            self._run_block(st, k, plan, s, min(block, total - s))

    def _iteration_env(self, plan, nd, s, n):
        defn, _, env0, rmins, rexts, _, _ = plan
        env = dict(env0)
        lin = np.arange(s, s + n, dtype=np.int64)
        for rv, m, e in zip(defn.rvars, rmins, rexts):
            env[rv.name] = (lin % e + m).astype(np.int32).reshape([1] * nd + [n])
            lin = lin // e
        return env

    def _lhs(self, st, plan, s, n):
        """Evaluate predicate and left-hand side of a batch: (ctx, mask, coords of each scattered
        element) or None if none runs."""
        defn, parts = plan[0], plan[-1]
        ctx = _Eval(self, self._iteration_env(plan, st.nd, s, n))
        mask = None
        if defn.predicate is not None:
            p = ctx.run(defn.predicate)
            if not p.any():
                return None
            if not p.all():
                mask = p
        ctx.mask = mask
        coords = [[ctx.run(a) for a in args] for args, _ in parts]
        return ctx, mask, coords

    def _prescan(self, st, k, plan, total, block):
        """Grow the box to everything this update writes before running it batch by batch."""
        lo = hi = None
        for s in range(0, total, block):
            r = self._lhs(st, plan, s, min(block, total - s))
            if r is None:
                continue
            for coords in r[2]:
                bb = _active_bbox(coords, r[1])
                if bb is None:
                    continue
                if lo is None:
                    lo, hi = bb[0], bb[1]
                else:
                    lo = [min(a, b) for a, b in zip(lo, bb[0])]
                    hi = [max(a, b) for a, b in zip(hi, bb[1])]
        if lo is not None and not st.covers(lo, hi, k):
            raise _Grow(st, k, lo, hi)

    def _run_block(self, st, k, plan, s, n):
        """Run iterations [s, s + n) of update k: every element's sites and values first (of all
        the iterations at once when no iteration reads what an earlier one writes), then the
        stores, in the order of the iterations and, within one, of the scattered elements."""
        _, pshape, _, _, _, form, parts = plan
        nd = st.nd
        # (the reads of the predicate and the sites too: an iteration may read what an earlier one wrote)
        recording = [] if (n > 1 and form is None) else None
        st.recording = recording
        try:
            r = self._lhs(st, plan, s, n)
            if r is None:
                return
            ctx, mask, coords = r
            if form is not None:
                rhs = [[ctx.run(term) for _, _, term in form]]
            else:
                rhs = [[ctx.run(v) for v in values] for _, values in parts]
        finally:
            st.recording = None
        grid = pshape + [n]
        m = None if mask is None else np.broadcast_to(np.broadcast_to(mask, grid)[..., None], [*grid, len(parts)])

        def active(per_element):
            """One array of the elements' values (the stores' order), at the active points."""
            b = np.stack([np.broadcast_to(a, grid) for a in per_element], axis=-1)
            return b[m] if m is not None else b.reshape(-1)

        wc = [active([c[d] for c in coords]) for d in range(nd)]
        count = int(np.count_nonzero(m)) if m is not None else _size(grid) * len(parts)
        if count == 0:
            return
        if nd:
            lo = [int(c.min()) for c in wc]
            hi = [int(c.max()) for c in wc]
            if not st.covers(lo, hi, k):
                raise _Grow(st, k, lo, hi)
            lin = st.linear(wc)
        else:
            lin = np.zeros(count, np.int64)
        flats = [w.reshape(-1) for w in st.work]
        if form is not None:
            for (ufunc, vi, _), t in zip(form, rhs[0]):
                ufunc.at(flats[vi], lin, active([t]))
            return
        if recording:
            it_grid = np.arange(n, dtype=np.int64).reshape([1] * nd + [n])
            if self._conflicts(st, lin, active([it_grid] * len(parts)), recording, it_grid, grid):
                for i in range(n):
                    self._run_block(st, k, plan, s + i, 1)
                return
        vals = [active([values[vi] for values in rhs]) for vi in range(len(st.types))]
        if n * len(parts) > 1 and lin.size > 1:
            # Several stores may write one point: the last in iteration (then element) order wins.
            _, idx = np.unique(lin[::-1], return_index=True)
            keep = lin.size - 1 - idx
            if keep.size != lin.size:
                lin = lin[keep]
                vals = [v[keep] for v in vals]
        for vi, v in enumerate(vals):
            flats[vi][lin] = v

    def _conflicts(self, st, wlin, wit, recording, it_grid, grid) -> bool:
        """Whether some iteration of the batch reads a point an earlier iteration of it writes."""
        order = np.lexsort((wit, wlin))
        wl, wi = wlin[order], wit[order]
        points, first = np.unique(wl, return_index=True)
        first_writer = wi[first]
        for coords, mask in recording:
            shape = np.broadcast_shapes(grid, *(np.shape(c) for c in coords),
                                        *(() if mask is None else (mask.shape,)))
            if tuple(shape) != tuple(grid):
                return True  # should not happen; be safe
            sel = None if mask is None else np.broadcast_to(mask, grid)
            rl = np.broadcast_to(st.linear(coords), grid)
            ri = np.broadcast_to(it_grid, grid)
            if sel is not None:
                rl, ri = rl[sel], ri[sel]
            else:
                rl, ri = rl.reshape(-1), ri.reshape(-1)
            if rl.size == 0:
                continue
            pos = np.clip(np.searchsorted(points, rl), 0, len(points) - 1)
            hit = points[pos] == rl
            if np.any(hit & (first_writer[pos] < ri)):
                return True
        return False


def _reduction_form(defn, st):
    """[(ufunc, value_index, term)] when every value is `f[lhs][i] op term` with term free of f."""
    form = []
    for vi, v in enumerate(defn.values):
        t = st.types[vi]
        if t.is_bool() or t.is_bfloat():  # (bfloat16: each step through float32, by the general path)
            return None
        ops = {ir.Add: np.add, ir.Sub: np.subtract, ir.Mul: np.multiply}
        if not t.is_float():
            ops.update({ir.Min: np.minimum, ir.Max: np.maximum})
        ufunc = ops.get(type(v))
        if ufunc is None:
            return None

        def is_self(x, vi=vi):
            return (isinstance(x, ir.Call) and x.call_type == ir.HALIDE and x.func is st.func
                    and x.value_index == vi and x.args == defn.args)

        if is_self(v.a) and not _calls_func(v.b, st.func):
            term = v.b
        elif ufunc is not np.subtract and is_self(v.b) and not _calls_func(v.a, st.func):
            term = v.a
        else:
            return None
        form.append((ufunc, vi, term))
    return form


# ---------------------------------------------------------------- expressions
class _Eval:
    """Evaluates IR Exprs in one environment; `mask` marks the lanes whose values are used."""

    def __init__(self, ev: _Evaluator, env: dict, mask=None):
        self.ev = ev
        self.env = env
        self.mask = mask
        self.memo: dict = {}

    def run(self, node) -> np.ndarray:
        with np.errstate(all="ignore"):
            return self.e(node)

    def e(self, node) -> np.ndarray:
        key = (id(node), id(self.env), id(self.mask))
        hit = self.memo.get(key)
        if hit is not None:
            return hit[0]
        detour = _in_float32(node)
        if detour is not None:  # bfloat16, as Halide computes it: in float32, rounded back
            computed, rounds = detour
            r = self.e(computed)
            r = _to_bfloat16(r) if rounds else r
        else:
            fn = _DISPATCH.get(type(node))
            if fn is None:
                raise HalideError(f"reference: cannot evaluate IR node {type(node).__name__}")
            r = fn(self, node)
        # keep node, env and mask alive so that their ids stay unique while memoized (a node
        # made during evaluation would otherwise free its id for the next one)
        self.memo[key] = (r, self.env, self.mask, node)
        return r

    def under(self, mask, node):
        """Evaluate node with only the lanes of mask active."""
        if not np.any(mask):
            return np.zeros((), _dtype(node.type))
        saved = self.mask
        self.mask = mask
        try:
            return self.e(node)
        finally:
            self.mask = saved


_BFLOAT_ROUNDED = ("abs", "absd", "round")  # calls of bfloat16 in, bfloat16 out


def _in_float32(n) -> tuple[ir.Expr, bool] | None:
    """For a node that computes with bfloat16 operands: (the same computation on their float32
    values, whether its result rounds back to bfloat16); else None."""
    cls = type(n)
    if isinstance(n, ir.BinaryOp):
        if not n.a.type.is_bfloat():
            return None
        f32 = Float(32, n.a.type.lanes)
        return cls(ir.Cast(f32, n.a), ir.Cast(f32, n.b)), not isinstance(n, ir.CompareOp)
    if cls is ir.Cast:
        src, dst = n.value.type, n.type
        if dst.is_bfloat() and src.element_of() != Float(32) and src != dst:  # (rounded twice, as Halide)
            return ir.Cast(dst, ir.Cast(Float(32, src.lanes), n.value)), False
        if src.is_bfloat() and dst.element_of() != Float(32) and src != dst:
            return ir.Cast(dst, ir.Cast(Float(32, src.lanes), n.value)), False
        return None
    if cls is ir.Call and any(isinstance(a, ir.Expr) and a.type.is_bfloat() for a in n.args):
        if n.type.is_bfloat() and n.name not in _BFLOAT_ROUNDED:
            return None  # (what carries a value: likely, require, print)
        f32 = Float(32, n.type.lanes)
        args = tuple(ir.Cast(f32, a) if a.type.is_bfloat() else a for a in n.args)
        if n.name == "abs":  # (Halide's abs of a bfloat16: -0.0 stays)
            return ir.Select(ir.GE(args[0], ir.make_const(f32, 0.0)), args[0], ir.Sub(ir.make_const(f32, 0.0),
                                                                                     args[0])), True
        return ir.Call(f32 if n.type.is_bfloat() else n.type, n.name, args, n.call_type), n.type.is_bfloat()
    return None


def _e_int(c: _Eval, n):
    return _const(n.value, _dtype(n.type))


def _e_float(c: _Eval, n):
    return _const(n.value, _dtype(n.type))


def _e_string(c: _Eval, n):
    raise HalideError("reference: a string can only be an argument of print")


def _e_variable(c: _Eval, n):
    dt = _dtype(n.type)
    ref = n.ref
    if isinstance(ref, Param):
        return _const(ref.get(), dt)
    if ref is not None and not isinstance(ref, ReductionDomain) and n.name not in c.env:
        buf = ref.get() if isinstance(ref, ImageParam) else ref
        parts = n.name.rsplit(".", 2)
        if len(parts) == 3 and parts[1] in ("min", "extent", "stride") and parts[2].isdigit() \
                and hasattr(buf, "_dim_field"):
            i = int(parts[2])
            if i >= buf.dimensions():
                raise HalideError(f"reference: {n.name}: the image has {buf.dimensions()} dimensions")
            return _const(int(buf._dim_field(parts[1], i)), dt)
        raise HalideError(f"reference: cannot evaluate variable {n.name}")
    if n.name in c.env:
        v = np.asarray(c.env[n.name])
        if v.dtype != dt:
            v = np.asarray(c.env[n.name], dtype=dt)
        return v
    if isinstance(ref, ReductionDomain):
        raise HalideError(f"reference: RVar {n.name} used outside an update over its RDom")
    raise HalideError(f"reference: free variable {n.name}")


def _to_bfloat16(values) -> np.ndarray:
    """float32 values rounded to bfloat16 by Halide's integer formula, ties to even (ml_dtypes'
    own rounding keeps every NaN a NaN, where Halide's carries a small payload into the sign)."""
    return np.asarray(bfloat16_bits(np.asarray(values, np.float32)), np.uint16).view(bfloat16_dtype())


def _e_cast(c: _Eval, n):
    v = c.e(n.value)
    dt = _dtype(n.type)
    if n.type.is_bfloat() and v.dtype == np.float32:  # (from any other type: _in_float32's detour)
        return _to_bfloat16(v)
    if n.type.is_bool():  # the lowest bit, as Halide casts (a float truncated toward zero first)
        if v.dtype.kind == "f":
            with np.errstate(invalid="ignore"):
                whole = np.where(np.abs(v) < 2.0 ** 53, v, 0).astype(np.int64)  # (NaN, inf: false)
            return np.asarray((whole & 1) != 0)
        return np.asarray((v.astype(np.int64) & 1) != 0 if v.dtype != np.bool_ else v)
    return np.asarray(v.astype(dt))


def _e_reinterpret(c: _Eval, n):
    v = c.e(n.value)
    return np.array(v).view(_dtype(n.type))


def _arith(fn, bool_fn=None):
    def h(c: _Eval, n):
        a, b = c.e(n.a), c.e(n.b)
        dt = _dtype(n.type)
        if dt == np.bool_:
            return _bool_arith(bool_fn or fn, a, b)
        return np.asarray(fn(a, b), dtype=dt)

    return h


def _e_div(c: _Eval, n):
    a, b = c.e(n.a), c.e(n.b)
    dt = _dtype(n.type)
    if dt.kind == "f":
        return np.asarray(a / b, dtype=dt)
    if dt == np.bool_:
        return _bool_arith(lambda x, y: _int_div(x, y, np.dtype(np.uint8)), a, b)
    return np.asarray(_int_div(a, b, dt))


def _e_mod(c: _Eval, n):
    a, b = c.e(n.a), c.e(n.b)
    dt = _dtype(n.type)
    if dt.kind == "f":
        return np.asarray(a - b * np.floor(a / b), dtype=dt)
    if dt == np.bool_:
        return np.zeros(np.broadcast_shapes(a.shape, b.shape), np.bool_)
    return np.asarray(_int_mod(a, b, dt))


def _e_min(c: _Eval, n):
    a, b = c.e(n.a), c.e(n.b)
    if a.dtype.kind == "f":  # Halide's at run time: a NaN (or a tie) gives b
        return np.asarray(np.where(a < b, a, b))
    return np.asarray(np.minimum(a, b))


def _e_max(c: _Eval, n):
    a, b = c.e(n.a), c.e(n.b)
    if a.dtype.kind == "f":
        return np.asarray(np.where(a > b, a, b))
    return np.asarray(np.maximum(a, b))


def _compare(fn):
    def h(c: _Eval, n):
        return np.asarray(fn(c.e(n.a), c.e(n.b)))

    return h


def _e_not(c: _Eval, n):
    return np.asarray(np.logical_not(c.e(n.a)))


def _e_select(c: _Eval, n):
    cond = c.e(n.condition)
    if cond.all():
        return c.e(n.true_value)
    if not cond.any():
        return c.e(n.false_value)
    mask = c.mask
    tmask = cond if mask is None else (mask & cond)
    fmask = ~cond if mask is None else (mask & ~cond)
    t = c.under(tmask, n.true_value)
    f = c.under(fmask, n.false_value)
    return np.asarray(np.where(cond, t, f))


def _e_let(c: _Eval, n):
    v = c.e(n.value)
    saved = c.env
    c.env = dict(saved)
    c.env[n.name] = v
    try:
        return c.e(n.body)
    finally:
        c.env = saved


def _e_broadcast(c: _Eval, n):
    raise HalideError("reference: vector expressions (Broadcast) cannot be evaluated")


def _e_unsupported(c: _Eval, n):
    raise HalideError(f"reference: {type(n).__name__} belongs to lowered code, not to an algorithm")


def _e_call(c: _Eval, n):
    if n.call_type == ir.HALIDE:
        coords = [c.e(a) for a in n.args]
        if n.func is None:
            raise HalideError(f"reference: call to {n.name} without its Func")
        return c.ev.call_func(n.func, n.value_index, coords, c.mask)
    if n.call_type == ir.IMAGE:
        return _image_read(c, n)
    if n.call_type == ir.INTRINSIC:
        return _intrinsic(c, n)
    if n.call_type == ir.EXTERN:
        return _extern(c, n)
    raise HalideError(f"reference: unknown call type {n.call_type} for {n.name}")


def _image_read(c: _Eval, n):
    image = n.image
    if image is None:
        raise HalideError(f"reference: image call {n.name} without its image")
    buf = image.get() if isinstance(image, ImageParam) else image
    arr = buf._array
    nd = buf.dimensions()
    if len(n.args) != nd:
        raise HalideError(f"Image {n.name} has {nd} dimensions but was accessed with {len(n.args)} arguments")
    coords = [c.e(a) for a in n.args]
    dt = _dtype(n.type)
    bb = _active_bbox(coords, c.mask)
    if bb is None:
        return np.zeros((), dt)
    lo, hi, _ = bb
    exts = [buf._dim_field("extent", d) for d in range(nd)]
    mins = [buf._dim_field("min", d) for d in range(nd)]
    for d in range(nd):
        if lo[d] < mins[d]:
            raise HalideError(
                f"Input buffer {n.name} is accessed at {lo[d]}, which is before the min ({mins[d]}) "
                f"in dimension {d}"
            )
        if hi[d] > mins[d] + exts[d] - 1:
            raise HalideError(
                f"Input buffer {n.name} is accessed at {hi[d]}, which is beyond the max "
                f"({mins[d] + exts[d] - 1}) in dimension {d}"
            )
    idx = [None] * nd
    for d in range(nd):
        idx[buf._axis[d]] = np.clip(np.asarray(coords[d], np.int64) - mins[d], 0, exts[d] - 1)
    v = np.asarray(arr[tuple(idx)])
    if v.dtype != dt:
        raise HalideError(f"Image {n.name} holds {v.dtype}, but the read has type {n.type}")
    return v


def _first_failed(v, point: tuple, shape: tuple, t):
    """A require's error value at the first point its condition failed, as the runtime prints it."""
    v = np.broadcast_to(np.asarray(v), shape)[point] if shape else np.asarray(v)
    return f"{float(v):f}" if t.is_float() else int(v)


def _intrinsic(c: _Eval, n):
    name = n.name
    dt = _dtype(n.type) if not n.type.is_handle() else None
    if name in _IDENTITY_INTRINSICS:
        return c.e(n.args[0] if name != "return_second" else n.args[1])
    if name == UNDEF:  # an element never defined: any value will do (the compiled code stores none)
        return np.zeros((), dt)
    if name == TARGET_QUERY:  # the host's answer: the reference runs here
        return c.e(answer_target_query(n, get_jit_target_from_environment()))
    if name == "require":
        cond, value, message, *values = n.args
        ok = np.asarray(c.e(cond), dtype=bool)
        if not ok.all():
            # the first point in a loop nest's default order (the last dimension outermost)
            point = tuple(np.argwhere(~ok.T)[0][::-1]) if ok.ndim else ()
            shown = [_first_failed(c.e(v), point, ok.shape, v.type) for v in values]
            raise HalideError("Error: " + message.value.format(*shown))
        return c.e(value)
    if name in ("print", "print_when"):
        values = [a for a in n.args[1:] if not isinstance(a, ir.StringImm)]
        if not values:
            raise HalideError("reference: print without an Expr argument")
        return c.e(values[0])
    args = [c.e(a) for a in n.args]
    if name == "abs":
        a = args[0]
        if a.dtype.kind == "f":
            return np.asarray(np.abs(a))
        if a.dtype.kind == "i":
            return np.asarray(np.abs(a).astype(dt))
        return np.asarray(a.astype(dt))
    if name == "absd":
        a, b = args
        if a.dtype.kind == "f":
            return np.asarray(np.where(a < b, b - a, a - b), dtype=dt)
        hi_, lo_ = np.maximum(a, b), np.minimum(a, b)
        return np.asarray(hi_.astype(dt) - lo_.astype(dt), dtype=dt)
    if name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        fn = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor}[name]
        return np.asarray(fn(args[0], args[1]), dtype=dt)
    if name == "bitwise_not":
        a = args[0]
        return np.asarray(np.logical_not(a) if dt == np.bool_ else np.invert(a), dtype=dt)
    if name in ("shift_left", "shift_right"):
        a, b = args
        if dt == np.bool_ or dt.kind == "f":
            raise HalideError(f"reference: {name} of {n.type}")
        return np.asarray(_shift(a, b, name == "shift_left", dt))
    if name in ("div_round_to_zero", "mod_round_to_zero", "shift_left_in_range", "shift_right_in_range"):
        return np.asarray(_c_operation(name, args[0], args[1], dt, c.mask))
    if name in ("is_nan", "is_inf", "is_finite"):
        fn = {"is_nan": np.isnan, "is_inf": np.isinf, "is_finite": np.isfinite}[name]
        return np.asarray(fn(args[0]))
    if name in ("popcount", "count_leading_zeros", "count_trailing_zeros"):
        a = args[0]
        if a.dtype == np.bool_:
            a = a.astype(np.uint8)
            bits = 1
        else:
            bits = a.dtype.itemsize * 8
        u = a.astype(_unsigned(a.dtype))
        if name == "popcount":
            r = np.bitwise_count(u)
        elif name == "count_leading_zeros":
            r = bits - _bit_length(u)
        else:
            low = u & (~u + np.array(1, u.dtype))
            r = np.where(u == 0, bits, _bit_length(low) - 1)
        return np.asarray(np.asarray(r).astype(dt))
    raise HalideError(f"reference: unknown intrinsic {name}")


def _c_operation(name: str, a, b, dt, mask):
    """The C operations that lower_arithmetic emits. Its guarantees (no division by 0 or -1, shift
    amounts in [0, bits)) are checked on the lanes in use (values on masked-off lanes are not
    computed faithfully here)."""
    if dt == np.bool_ and name in ("div_round_to_zero", "mod_round_to_zero"):
        r = _c_operation(name, a.astype(np.uint8), b.astype(np.uint8), np.dtype(np.uint8), mask)
        return r.astype(np.bool_)
    if name in ("div_round_to_zero", "mod_round_to_zero"):
        bad = (b == 0) | (b == -1) if dt.kind == "i" else b == 0
        what = "0 or -1"
    else:
        bad = b.astype(np.uint64) >= dt.itemsize * 8
        what = f"{dt.itemsize * 8} or more"
    if np.any(bad if mask is None else bad & mask):
        raise InternalError(f"{name} by {what}: lower_arithmetic guarantees it never is")
    b = np.where(bad, 1, b).astype(dt)
    if name == "shift_left_in_range":
        return np.left_shift(a, b).astype(dt)
    if name == "shift_right_in_range":
        return np.right_shift(a, b).astype(dt)
    r = np.fmod(a, b)  # C's remainder, with the sign of a
    return r.astype(dt) if name == "mod_round_to_zero" else ((a - r) // b).astype(dt)


def _extern(c: _Eval, n):
    name = n.name
    for suffix in ("_f32", "_f64", "_f16"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    dt = _dtype(n.type)
    args = [c.e(a) for a in n.args]
    if dt.kind != "f":
        raise HalideError(f"reference: extern {n.name} of non-float type {n.type}")
    if name in _MATH1 and len(args) == 1:
        return np.asarray(_MATH1[name](args[0].astype(dt)), dtype=dt)
    if name == "erf" and len(args) == 1:
        return np.asarray(np.asarray(_erf(args[0].astype(np.float64)), dtype=np.float64), dtype=dt)
    if name in _MATH2 and len(args) == 2:
        return np.asarray(_MATH2[name](args[0].astype(dt), args[1].astype(dt)), dtype=dt)
    raise HalideError(f"reference: unknown extern function {n.name}")


_DISPATCH = {
    ir.IntImm: _e_int,
    ir.FloatImm: _e_float,
    ir.StringImm: _e_string,
    ir.Variable: _e_variable,
    ir.Cast: _e_cast,
    ir.Reinterpret: _e_reinterpret,
    ir.Add: _arith(np.add),
    ir.Sub: _arith(np.subtract),
    ir.Mul: _arith(np.multiply),
    ir.Div: _e_div,
    ir.Mod: _e_mod,
    ir.Min: _e_min,
    ir.Max: _e_max,
    ir.EQ: _compare(np.equal),
    ir.NE: _compare(np.not_equal),
    ir.LT: _compare(np.less),
    ir.LE: _compare(lambda a, b: ~np.less(b, a)),  # (Halide's: !(b < a), true with a NaN)
    ir.GT: _compare(np.greater),
    ir.GE: _compare(lambda a, b: ~np.less(a, b)),
    ir.And: _compare(np.logical_and),
    ir.Or: _compare(np.logical_or),
    ir.Not: _e_not,
    ir.Select: _e_select,
    ir.Let: _e_let,
    ir.Call: _e_call,
    ir.Broadcast: _e_broadcast,
    ir.Ramp: _e_unsupported,
    ir.Load: _e_unsupported,
}
