"""A Hypothesis strategy for random pipelines: DAGs of 2-7 stages over one 2-D input.

A drawn pipeline is Python source (its repr), so a falsifying example is a script to paste.
Stages read earlier stages (so the graph is a DAG) and are of these kinds:

* pointwise: arithmetic on one or two earlier stages at (x, y);
* stencil: a weighted sum of 2-4 taps at offsets -2..2 in x and y;
* downsample: taps at (2x + k, 2y + k');
* upsample: a read at ((x + k) / 2, (y + k') / 2);
* reduction: an RDom sum over a small window or a column, as an update or an inline hl.sum /
  hl.maximum;
* choice: a select between two earlier stages on an Int Param (set to 0 or 1), on the row or
  column, or on two values of an earlier stage (what skip stages decides to compute).

Every stage has the input's type (uint8, int16, int32 or float32). Small integer types wrap, as
Halide defines; int32 stages are clamped to +-2**20 so that nothing overflows (int32 overflow is
undefined). The input is read through repeat_edge, so schedules never read outside it.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import pyhalide as hl

from .corpus import Case

TYPES = {
    "uint8": ("hl.u8", "np.uint8", 0, 255),
    "int16": ("hl.i16", "np.int16", -300, 300),
    "int32": ("hl.i32", "np.int32", -1000, 1000),
    "float32": ("hl.f32", "np.float32", 0, 0),
}
INT32_BOUND = 1 << 20


class RandomPipeline:
    def __init__(self, source: str, is_float: bool):
        self.source = source  # Python that defines the Funcs; `outputs`, `funcs`, `sizes` name the results
        self.is_float = is_float

    def build(self) -> Case:
        ns: dict = {"hl": hl, "np": np}
        exec(compile(self.source, "<random pipeline>", "exec"), ns)
        return Case("random", ns["outputs"], ns["sizes"], ns["funcs"], reassociates=self.is_float)

    def __repr__(self):
        return "# random pipeline\n" + self.source


def _lin(v: str, d: int) -> str:
    return v if d == 0 else f"{v} {'+' if d > 0 else '-'} {abs(d)}"


def _ref(name: str, dx: int, dy: int) -> str:
    return f"{name}[{_lin('x', dx)}, {_lin('y', dy)}]"


@st.composite
def random_pipelines(draw, min_stages: int = 2, max_stages: int = 7) -> RandomPipeline:
    dtype = draw(st.sampled_from(sorted(TYPES)))
    tc, npt, lo, hi = TYPES[dtype]
    signed = dtype in ("int16", "int32")
    is_float = dtype == "float32"
    h_in, w_in = draw(st.integers(4, 16)), draw(st.integers(4, 20))
    seed = draw(st.integers(0, 2**16))
    w, h = draw(st.integers(1, 24)), draw(st.integers(1, 16))
    lines = ["x, y = hl.Var('x'), hl.Var('y')", f"rng = np.random.default_rng({seed})"]
    if is_float:
        lines.append(f"data = (rng.random(({h_in}, {w_in})) * 64).astype(np.float32)")
    else:
        lines.append(f"data = rng.integers({lo}, {hi + 1}, ({h_in}, {w_in})).astype({npt})")
    lines += ["inp = hl.Buffer(data, name='rp_in')", "s0 = hl.BoundaryConditions.repeat_edge(inp)"]
    funcs = ["s0"]
    used: set[str] = set()  # stages some later stage reads
    n = draw(st.integers(min_stages, max_stages))

    def const(lo_, hi_, nonzero=False):
        v = draw(st.integers(lo_, hi_).filter(lambda k: k != 0 or not nonzero))
        return v

    def unary(a: str) -> str:
        kinds = ["affine", "div", "mod"] if not is_float else ["affine", "div"]
        k = draw(st.sampled_from(kinds))
        if k == "affine":
            return f"{a} * {const(1, 3)} + {const(0 if not signed else -3, 5)}"
        if k == "div":
            if is_float:
                return f"{a} / {draw(st.sampled_from([2.0, 4.0, 3.0]))}"
            return f"{a} / {draw(st.sampled_from([2, 3, 7] + ([-2, -3] if signed else [])))}"
        return f"{a} % {draw(st.sampled_from([3, 5, 16] + ([-4, -7] if signed else [])))}"

    def binary(a: str, b: str) -> str:
        k = draw(st.sampled_from(["add", "sub", "min", "max", "select"]))
        return {"add": f"{a} + {b}", "sub": f"{a} - {b}", "min": f"hl.min({a}, {b})",
                "max": f"hl.max({a}, {b})", "select": f"hl.select({a} < {b}, {a}, {b} + 1)"}[k]

    for i in range(1, n + 1):
        name = f"s{i}"
        kind = draw(st.sampled_from(["pointwise", "stencil", "stencil", "downsample", "upsample", "reduction",
                                     "choice"]))
        src = funcs[-1] if draw(st.booleans()) else draw(st.sampled_from(funcs))
        used.add(src)
        lines.append(f"{name} = hl.Func({name!r})")
        update = None
        if kind == "pointwise":
            if len(funcs) > 1 and draw(st.booleans()):
                unused = [f for f in funcs if f not in used]
                other = draw(st.sampled_from(unused if unused and draw(st.booleans()) else funcs))
                used.add(other)
                expr = binary(f"{src}[x, y]", f"{other}[x, y]")
            else:
                expr = unary(f"{src}[x, y]")
        elif kind == "stencil":
            taps = draw(st.lists(st.tuples(st.integers(-2, 2), st.integers(-2, 2), st.integers(1, 3)),
                                 min_size=2, max_size=4))
            expr = " + ".join(_ref(src, dx, dy) if wgt == 1 else f"{_ref(src, dx, dy)} * {wgt}"
                              for dx, dy, wgt in taps)
        elif kind == "choice":
            other = draw(st.sampled_from(funcs))
            used.add(other)
            test = draw(st.sampled_from(["param", "row", "column", "value"]))
            if test == "param":
                lines.append(f"p{i} = hl.Param(hl.Int(32), 'rp_p{i}', {draw(st.integers(0, 1))})")
                cond = f"p{i} > 0"
            elif test == "row":
                cond = f"y % 2 == {draw(st.integers(0, 1))}"
            elif test == "column":
                cond = f"x < {draw(st.integers(0, w))}"
            else:
                judge = draw(st.sampled_from(funcs))
                used.add(judge)
                cond = f"{judge}[0, 0] < {judge}[1, 1]"
            expr = f"hl.select({cond}, {src}[x, y], {other}[x, y])"
        elif kind == "downsample":
            kx, ky = draw(st.integers(-1, 1)), draw(st.integers(-1, 1))
            expr = f"{src}[{_lin('2 * x', kx)}, {_lin('2 * y', ky)}]"
            if draw(st.booleans()):
                expr = f"({expr} + {src}[2 * x + 1, 2 * y + 1]) / 2"
        elif kind == "upsample":
            kx, ky = draw(st.integers(0, 1)), draw(st.integers(0, 1))
            ux = "x / 2" if kx == 0 else f"({_lin('x', kx)}) / 2"
            uy = "y / 2" if ky == 0 else f"({_lin('y', ky)}) / 2"
            expr = f"{src}[{ux}, {uy}]"
        else:
            form = draw(st.sampled_from(["window", "column", "sum", "maximum"]))
            rname = f"r{i}"
            if form == "column":
                lines.append(f"{rname} = hl.RDom([(0, {draw(st.integers(1, 6))})], name={rname!r})")
                term = f"{src}[x, {rname}]" if draw(st.booleans()) else f"{src}[{rname}, y]"
            else:
                ex, ey = draw(st.integers(1, 4)), draw(st.integers(1, 3))
                lines.append(f"{rname} = hl.RDom([({-(ex // 2)}, {ex}), ({-(ey // 2)}, {ey})], name={rname!r})")
                term = f"{src}[x + {rname}.x, y + {rname}.y]"
            if form in ("sum", "maximum"):
                lines.append(f"{name}_red = hl.{form}({term}, {name + '_' + form!r})")
                funcs_extra = f"{name}_red.function()"
                expr = f"{name}_red"
                lines.append(f"{name}[x, y] = {expr}" if dtype != "int32" else
                             f"{name}[x, y] = hl.clamp({expr}, {-INT32_BOUND}, {INT32_BOUND})")
                lines.append(f"extra_funcs.append({funcs_extra})")
                funcs.append(name)
                continue
            expr = f"{tc}(0)"
            update = f"{name}[x, y] += {term}"
        if dtype == "int32" and update is None:
            expr = f"hl.clamp({expr}, {-INT32_BOUND}, {INT32_BOUND})"
        lines.append(f"{name}[x, y] = {expr}")
        if update is not None:
            lines.append(update)
            if dtype == "int32":
                lines.append(f"{name}[x, y] = hl.clamp({name}[x, y], {-INT32_BOUND}, {INT32_BOUND})")
        funcs.append(name)
    # join stages nothing reads yet into a last stage, now and then, so the graph is not just a chain
    unused = [f for f in funcs[1:-1] if f not in used]
    if unused and draw(st.booleans()):
        joined = draw(st.lists(st.sampled_from(unused), min_size=1, max_size=2, unique=True))
        expr = f"{funcs[-1]}[x, y]"
        for f in joined:
            expr = binary(expr, f"{f}[x, y]")
            used.add(f)
        used.add(funcs[-1])
        name = f"s{n + 1}"
        if dtype == "int32":
            expr = f"hl.clamp({expr}, {-INT32_BOUND}, {INT32_BOUND})"
        lines += [f"{name} = hl.Func({name!r})", f"{name}[x, y] = {expr}"]
        funcs.append(name)
    outputs = [funcs[-1]]
    # a second output, from the stages no other stage reads (an output read by another stage over a
    # larger region than its buffer is a legitimate runtime error)
    leaves = [f for f in funcs[1:-1] if f not in used]
    if leaves and draw(st.integers(0, 2)) == 0:
        outputs.append(draw(st.sampled_from(leaves)))
    lines.insert(0, "extra_funcs = []")
    lines.append(f"outputs = [{', '.join(outputs)}]")
    lines.append(f"funcs = [{', '.join(funcs)}] + extra_funcs")
    lines.append(f"sizes = [{w}, {h}]")
    return RandomPipeline("\n".join(lines) + "\n", is_float)
