"""Random pipelines for training a cost model: `random_pipeline(seed, scale)`.

A pipeline is drawn in two steps, both from `numpy.random.default_rng(seed)` alone (no Hypothesis,
no global counters, every Func, Var and RDom named explicitly), so a seed means the same pipeline
in any process:

1. a plan: plain data (a list of `Stage`s, the sizes, the input array), drawn once;
2. `RandomPipeline.build(hl)`: a fresh copy of the algorithm, interpreted from the plan on every
   call (schedules mutate Funcs, so each candidate schedule gets its own copy).

Stages form a DAG of 2-12 stages over one input (2-D, or 3-D with c of extent 3), read through
`repeat_edge` so that any schedule reads only inside it. Stage kinds (`KINDS`): pointwise chains and
pairs with casts between uint8/uint16/int16/int32/float32, stencils (1-D and 2-D, radius 1-3),
downsample and upsample, reductions (a window as an inline hl.sum/hl.maximum or as an update, a
whole row or column), scans (a prefix sum along x or y as an update over an RDom), gathers (a
256-entry lookup table indexed by a clamped value), small matrix products, Tuple-valued stages,
and 3-D stages (a 2-D stage expanded to 3 channels, or 3 channels combined into one). 1-3 outputs,
all stages nothing else reads (an output read by another stage would need a larger buffer).

Overflow: uint8/uint16/int16 wrap (defined in Halide). int32 overflow is undefined, so every stage
keeps a bound on the magnitude of its values and a read of an int32 stage whose bound exceeds
INT32_BOUND is clamped to it (to MUL_INT_BOUND where two values are multiplied); floats are clamped
the same way (FLOAT_BOUND), so no stage produces inf or nan. Float-to-int casts clamp first.

Scales: "train" sizes the outputs (64..1024 per dimension) so that a run of the compute_root
reference schedule takes about 0.2-20 ms; "large" (512..4096) about 8-60 ms, with working sets
past the caches; "test" draws tiny outputs (8..40 per dimension).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

TYPES = ("uint8", "uint16", "int16", "int32", "float32")
KINDS = ("pointwise", "stencil", "downsample", "upsample", "reduction", "scan", "gather", "matmul", "tuple",
         "3d")

INT32_BOUND = 1 << 20  # int32 values a stage reads are clamped to +-this
MUL_INT_BOUND = 1 << 10  # ... and to +-this where two of them are multiplied
FLOAT_BOUND = 65536.0
MUL_FLOAT_BOUND = 256.0
SUM_LIMIT = 1 << 30  # no int32 expression may exceed this bound (a margin below 2**31)

_SMALL = {"uint8": (0, 255), "uint16": (0, 65535), "int16": (-32768, 32767)}
_BOUND = {"uint8": 255, "uint16": 65535, "int16": 32768, "int32": INT32_BOUND, "float32": FLOAT_BOUND}
_SHORT = {"uint8": "u8", "uint16": "u16", "int16": "i16", "int32": "i32", "float32": "f32"}

# Stage kinds, drawn with these weights (a kind that can't follow the chosen source falls back to
# pointwise).
_KIND_WEIGHTS = {"pointwise": 0.24, "stencil": 0.18, "downsample": 0.07, "upsample": 0.07, "reduction": 0.12,
                 "scan": 0.06, "gather": 0.06, "matmul": 0.05, "tuple": 0.07, "3d": 0.08}

SCALES = {
    # out: primary output extent per dimension; extent: every stage's region's extent; work: the cost
    # estimate (_work) of the whole pipeline, about WORK_PER_MS per millisecond of the reference
    "train": {"out": (64, 1024), "extent": (8, 2048), "work": (0.6, 7.0), "k": (8, 64), "row_cap": 1024},
    "test": {"out": (8, 40), "extent": (2, 40), "work": None, "k": (2, 8), "row_cap": 64},
    # app-sized: working sets past the caches, as the gallery's (a "train" pipeline fits in L2
    # and teaches the model's memory tiers almost nothing)
    "large": {"out": (512, 4096), "extent": (8, 8192), "work": (8.0, 60.0), "k": (8, 128), "row_cap": 4096},
}
WORK_PER_MS = 2.5e6  # cost units (about one per value read) per ms of the reference schedule, measured (2 vCPUs)


@dataclass
class Stage:
    """One stage of the plan. `srcs` are (stage name, Tuple element) pairs; `p` the kind's
    parameters (plain data: ints, floats, strings and lists of them)."""

    name: str
    kind: str  # one of KINDS, or "input" / "join"
    form: str
    types: list[str]  # one per Tuple element
    ndim: int  # 2 (x, y) or 3 (x, y, c)
    level: int  # log2 of the resolution relative to the input
    srcs: list[tuple[str, int]] = field(default_factory=list)
    p: dict = field(default_factory=dict)

    def summary(self) -> str:
        t = "+".join(_SHORT[t] for t in self.types)
        return f"{self.name}:{self.kind}/{self.form}/{t}{'/3d' if self.ndim == 3 else ''}"


class RandomPipeline:
    """A random pipeline: `.inputs`, `.build(hl)`, `.describe()`, `.reference()` (see the module)."""

    def __init__(self, seed: int, scale: str, stages: list[Stage], outputs: list[str], sizes: dict,
                 inputs: dict[str, np.ndarray]):
        self.seed = seed
        self.scale = scale
        self.stages = stages
        self.output_names = outputs
        self.sizes = sizes  # stage name -> [w, h], about the region its consumers read
        self.inputs = inputs
        by_name = {s.name: s for s in stages}
        self.output_sizes = [self._size(by_name[n]) for n in outputs]
        kinds = {s.kind for s in stages if s.kind in KINDS}
        if any(s.ndim == 3 for s in stages):
            kinds.add("3d")
        if any(len(s.types) > 1 for s in stages):
            kinds.add("tuple")
        self.kinds = frozenset(kinds)

    def _size(self, stage: Stage) -> list[int]:
        w, h = self.sizes[stage.name]
        return [w, h, 3] if stage.ndim == 3 else [w, h]

    def build(self, hl=None):
        """A fresh copy of the algorithm: (output Funcs, their sizes in Halide order)."""
        if hl is None:
            import pyhalide as hl
        return _Builder(hl, self).build(), [list(s) for s in self.output_sizes]

    def describe(self) -> str:
        inp = self.inputs["in0"]
        shape = "x".join(str(d) for d in inp.shape[::-1])
        outs = ", ".join(f"{n} {s}" for n, s in zip(self.output_names, self.output_sizes))
        body = " ".join(s.summary() for s in self.stages if s.kind != "input")
        return (f"random_pipeline({self.seed}, {self.scale!r}): input {inp.dtype} {shape}; "
                f"{sum(s.kind != 'input' for s in self.stages)} stages: {body}; outputs: {outs}")

    def estimated_work(self) -> float:
        return _work(self.stages, self.sizes)

    def reference(self, hl=None) -> list[np.ndarray]:
        """The outputs realized under reference_schedule: one array per output and Tuple element."""
        if hl is None:
            import pyhalide as hl
        outputs, sizes = self.build(hl)
        pipeline = reference_schedule(outputs)
        buffers = output_buffers(hl, outputs, sizes)
        pipeline.realize(buffers)
        return [np.array(np.asarray(b)) for b in buffers]

    def __repr__(self):
        return self.describe()


def random_pipeline(seed: int, scale: str = "train") -> RandomPipeline:
    """The random pipeline of this seed, the same in any process."""
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {sorted(SCALES)}, got {scale!r}")
    return _Planner(int(seed), scale).plan()


def reference_schedule(outputs):
    """Schedule every Func of the pipeline of `outputs` compute_root (the default schedule inlines
    every pure stage, which can recompute exponentially much). Returns the hl.Pipeline."""
    import pyhalide as hl

    pipeline = hl.Pipeline(list(outputs))
    for f in pipeline.funcs():
        f.compute_root()
    return pipeline


def output_buffers(hl, outputs, sizes, mins=None) -> list:
    """Fresh output buffers for realize: one per output Func and Tuple element."""
    buffers = []
    for k, f in enumerate(outputs):
        for t in f.types():
            b = hl.Buffer(t, list(sizes[k]))
            if mins is not None and mins[k] is not None and any(mins[k]):
                b.set_min(list(mins[k]))
            buffers.append(b)
    return buffers


# ---------------------------------------------------------------------------------- the plan
class _Planner:
    def __init__(self, seed: int, scale: str):
        self.seed, self.scale = seed, scale
        self.cfg = SCALES[scale]
        self.rng = np.random.default_rng(seed)
        self.stages: list[Stage] = []
        self.used: set[str] = set()
        self.exclude: set[str] = set()  # stages pick() must not return (outputs already chosen)

    # ---- drawing
    def int(self, lo: int, hi: int) -> int:  # inclusive
        return int(self.rng.integers(lo, hi + 1))

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def choice(self, options):
        options = list(options)
        return options[int(self.rng.integers(len(options)))]

    def weighted(self, weights: dict):
        names = list(weights)
        p = np.array([weights[n] for n in names], dtype=float)
        return names[int(self.rng.choice(len(names), p=p / p.sum()))]

    # ---- stages
    def ref(self, stage: Stage) -> tuple[str, int]:
        self.used.add(stage.name)
        return (stage.name, self.int(0, len(stage.types) - 1))

    def pick(self, ok=lambda s: True) -> Stage | None:
        """A stage to read: the latest eligible one half the time, else any eligible one."""
        cands = [s for s in self.stages if ok(s) and s.name not in self.exclude]
        if not cands:
            return None
        if self.chance(0.55):
            return cands[-1]
        return self.choice(cands)

    def acc_type(self, t: str) -> str:
        """A type wide enough to sum a few dozen values of type t without wrapping (uint16 sums of
        uint8 may still wrap for large windows: that is defined and fine)."""
        if t == "float32":
            return "float32"
        if t == "uint8":
            return self.choice(["uint16", "int32"])
        return "int32"

    def unops(self, t: str, n: int) -> list:
        ops = []
        for _ in range(n):
            if t == "float32":
                k = self.choice(["add", "sub", "mul", "div", "min", "max", "sqrt", "floor"])
                arg = {"add": self.choice([0.5, 1.0, 3.0, 10.0]), "sub": self.choice([0.5, 2.0, 7.0]),
                       "mul": self.choice([0.5, 1.5, 2.0, 3.0]), "div": self.choice([2.0, 3.0, 4.0]),
                       "min": float(self.int(0, 200)), "max": float(self.int(-20, 100))}.get(k)
            else:
                signed = t in ("int16", "int32")
                k = self.choice(["add", "sub", "mul", "div", "mod", "shr", "min", "max"])
                if k == "add":
                    arg = self.int(1, 20)
                elif k == "sub":
                    arg = self.int(1, 20)
                elif k == "mul":
                    arg = self.int(2, 3)
                elif k == "div":
                    arg = self.choice([2, 3, 4, 7] + ([-2, -3] if signed else []))
                elif k == "mod":
                    arg = self.choice([3, 5, 16, 64] + ([-4, -7] if signed else []))
                elif k == "shr":
                    arg = self.int(1, 3)
                else:
                    arg = self.int(0, 100)
            ops.append([k, arg])
        return ops

    def binop(self) -> str:
        return self.choice(["add", "sub", "min", "max", "select", "mul", "avg"])

    def add(self, kind, form, types, ndim, level, srcs, **p) -> Stage:
        s = Stage(f"s{len(self.stages)}", kind, form, list(types), ndim, level, list(srcs), p)
        self.stages.append(s)
        return s

    def draw_stage(self) -> None:
        kind = self.weighted(_KIND_WEIGHTS)
        if kind == "downsample":
            src = self.pick(lambda s: s.level > -2)
        elif kind == "upsample":
            src = self.pick(lambda s: s.level < 2)
        else:
            src = self.pick()
        if src is None:
            kind, src = "pointwise", self.pick()
        getattr(self, "_" + kind)(src)

    def _pointwise(self, src: Stage) -> None:
        ref = self.ref(src)
        t = src.types[ref[1]] if self.chance(0.5) else self.choice(TYPES)
        if len(self.stages) > 1 and self.chance(0.45):
            other = self.pick(lambda s: s is not src) or src
            oref = self.ref(other)
            self.add("pointwise", "binary", [t], max(src.ndim, other.ndim), src.level, [ref, oref],
                     op=self.binop(), ops=self.unops(t, self.int(0, 1)))
        else:
            self.add("pointwise", "unary", [t], src.ndim, src.level, [ref], ops=self.unops(t, self.int(1, 3)))

    def _stencil(self, src: Stage) -> None:
        form = self.choice(["x", "y", "2d", "2d"])
        r = self.int(1, 3)
        if form == "2d":
            grid = [(dx, dy) for dy in range(-r, r + 1) for dx in range(-r, r + 1)]
            if r == 1 and self.chance(0.5):
                offsets = grid
            else:
                n = self.int(3, min(9, len(grid)))
                idx = self.rng.choice(len(grid), size=n, replace=False)
                offsets = [grid[int(i)] for i in sorted(idx)]
        else:
            line = list(range(-r, r + 1))
            if not self.chance(0.6):
                idx = self.rng.choice(len(line), size=self.int(2, len(line)), replace=False)
                line = [line[int(i)] for i in sorted(idx)]
            offsets = [(d, 0) if form == "x" else (0, d) for d in line]
        taps = [[dx, dy, self.int(1, 3)] for dx, dy in offsets]
        ref = self.ref(src)
        t0 = src.types[ref[1]]
        acc = self.acc_type(t0)
        norm = self.chance(0.6)
        self.add("stencil", f"{form}r{r}", [t0 if norm else acc], src.ndim, src.level, [ref],
                 taps=taps, acc=acc, norm=norm)

    def _downsample(self, src: Stage) -> None:
        form = self.choice(["sub", "avg2", "avg4"])
        ref = self.ref(src)
        t0 = src.types[ref[1]]
        if form == "sub":
            taps = [[self.int(-1, 1), self.int(-1, 1)]]
        elif form == "avg2":
            taps = [[0, 0], [1, 0]] if self.chance(0.5) else [[0, 0], [0, 1]]
        else:
            taps = [[0, 0], [1, 0], [0, 1], [1, 1]]
        self.add("downsample", form, [t0], src.ndim, src.level - 1, [ref], taps=taps,
                 acc=self.acc_type(t0))

    def _upsample(self, src: Stage) -> None:
        ref = self.ref(src)
        t0 = src.types[ref[1]]
        form = self.choice(["nearest", "linear"])
        self.add("upsample", form, [t0], src.ndim, src.level + 1, [ref],
                 kx=self.int(0, 1), ky=self.int(0, 1), acc=self.acc_type(t0))

    def _reduction(self, src: Stage) -> None:
        form = self.choice(["sum_inline", "sum_update", "max_inline", "max_update", "row", "col"])
        ref = self.ref(src)
        t0 = src.types[ref[1]]
        acc = self.acc_type(t0)
        if form in ("row", "col"):
            self.add("reduction", form, [acc], src.ndim, src.level, [ref], acc=acc,
                     how=self.choice(["inline", "update"]))
            return
        rx, ry = self.int(0, 3), self.int(0, 3)
        if rx == ry == 0:
            rx = 1
        norm = form.startswith("sum") and self.chance(0.5)
        if form == "sum_inline":
            types = [t0 if norm else acc]
        elif form == "sum_update":
            types = [acc]
        else:
            types = [t0]
        self.add("reduction", form, types, src.ndim, src.level, [ref], rx=rx, ry=ry, acc=acc,
                 norm=norm)

    def _scan(self, src: Stage) -> None:
        ref = self.ref(src)
        t0 = src.types[ref[1]]
        t = "float32" if t0 == "float32" else self.choice(["int32", "int32", "uint16", "int16"])
        self.add("scan", self.choice(["x", "y"]), [t], src.ndim, src.level, [ref])

    def _gather(self, src: Stage) -> None:
        ref = self.ref(src)
        t = self.choice(["uint8", "uint16", "int16", "int32", "float32"])
        lut = self.choice(["affine", "square"] + (["float"] if t == "float32" else []))
        index = "wrap" if src.types[ref[1]] != "float32" and self.chance(0.4) else "clamp"
        self.add("gather", lut, [t], src.ndim, src.level, [ref], index=index,
                 a=self.choice([3, 5, 7, 11, 13, 37]), b=self.int(0, 255))

    def _matmul(self, src: Stage) -> None:
        other = self.pick()
        refs = [self.ref(src), self.ref(other)]
        is_float = "float32" in (src.types[refs[0][1]], other.types[refs[1][1]])
        t = "float32" if is_float or self.chance(0.3) else "int32"
        self.add("matmul", "ab", [t], 2, src.level, refs, k=self.int(*self.cfg["k"]))

    def _tuple(self, src: Stage) -> None:
        ref = self.ref(src)
        t0 = src.types[ref[1]]
        acc = self.acc_type(t0)
        if self.chance(0.5):
            t1 = self.choice([t0, "float32"])
            self.add("tuple", "pure", [acc, t1], src.ndim, src.level, [ref])
        else:
            self.add("tuple", "update", [acc, t0], src.ndim, src.level, [ref], r=self.int(1, 2))

    def _3d(self, src: Stage) -> None:
        ref = self.ref(src)
        t0 = src.types[ref[1]]
        if src.ndim == 2:
            other = self.pick(lambda s: s.ndim == 2) or src
            refs = [ref, self.ref(other)]
            self.add("3d", "expand", [t0], 3, src.level, refs, ops=self.unops(t0, 1), op=self.binop())
            return
        form = self.choice(["mix", "max", "rdom"])
        acc = self.acc_type(t0)
        norm = form == "mix" and self.chance(0.6)
        types = [t0] if form == "max" or norm else [acc]
        self.add("3d", form, types, 2, src.level, [ref], w=[self.int(1, 3) for _ in range(3)],
                 acc=acc, norm=norm)

    # ---- the whole plan
    def plan(self) -> RandomPipeline:
        in_type = self.choice(TYPES)
        in_ndim = 3 if self.chance(0.15) else 2
        self.add("input", "repeat_edge", [in_type], in_ndim, 0, [])
        n = self.int(2, 11)
        for _ in range(n):
            self.draw_stage()
        last = self.stages[-1]
        leaves = [s for s in self.stages[1:-1] if s.name not in self.used]
        n_out = self.weighted({1: 0.55, 2: 0.3, 3: 0.15})
        # more outputs than stages nothing reads: branch new stages off the others
        self.exclude = {last.name} | {s.name for s in leaves}
        while len(leaves) < n_out - 1 and len(self.stages) <= 11:
            self.draw_stage()
            leaves.append(self.stages[-1])
            self.exclude.add(self.stages[-1].name)
        extra = []
        if leaves and n_out > 1:
            k = min(n_out - 1, len(leaves))
            extra = [leaves[int(i)] for i in sorted(self.rng.choice(len(leaves), size=k, replace=False))]
        joined = [s for s in leaves if s not in extra]
        if joined:  # stages nothing reads that are not outputs: combine them into the last one
            refs = [self.ref(last)] + [self.ref(s) for s in joined]
            last = self.add("join", "binary", [last.types[0]], max(s.ndim for s in [last, *joined]), last.level,
                            refs, ops=[self.binop() for _ in joined])
        outputs = [last] + extra
        sizes = self.sizes(outputs)
        for s in self.stages:
            self.fill_extents(s, sizes)
        inputs = {"in0": self.input_array(self.stages[0], sizes["s0"])}
        return RandomPipeline(self.seed, self.scale, self.stages, [s.name for s in outputs], sizes, inputs)

    def sizes(self, outputs: list[Stage]) -> dict:
        """The region of every stage, from the outputs' extents back through what each stage reads;
        the outputs' extents are drawn, then scaled so that the work estimate meets a drawn target."""
        lo, hi = self.cfg["out"]
        w = math.exp(self.rng.uniform(math.log(lo), math.log(hi + 1)))
        h = math.exp(self.rng.uniform(math.log(lo), math.log(hi + 1)))
        target = None
        if self.cfg["work"] is not None:
            wlo, whi = self.cfg["work"]
            target = WORK_PER_MS * math.exp(self.rng.uniform(math.log(wlo), math.log(whi)))
        for _ in range(10):  # scale towards the target work (extents clamp and RDoms grow: repeat)
            regions = self.regions(outputs, w, h)
            if target is None:
                break
            f = math.sqrt(target / max(_work(self.stages, regions, self.cfg["row_cap"]), 1.0))
            f = min(max(f, lo / min(w, h)), hi / max(w, h))  # the primary output stays in range
            if 0.85 < f < 1.18:
                break
            w, h = w * f, h * f
        return regions

    def regions(self, outputs: list[Stage], w: float, h: float) -> dict:
        """Per stage the [w, h] its consumers need (stencil margins aside), given the primary
        output's extents (other outputs at their relative resolution)."""
        emin, emax = self.cfg["extent"]

        def clamp(v):
            return int(min(emax, max(emin, math.ceil(v))))

        need: dict[str, list[int]] = {}
        for o in outputs:
            scale = 2.0 ** (o.level - outputs[0].level)
            need[o.name] = [clamp(w * scale), clamp(h * scale)]
        for s in reversed(self.stages):  # consumers before producers
            sw, sh = need.setdefault(s.name, [emin, emin])
            for k, (src, _) in enumerate(s.srcs):
                if s.kind == "downsample":
                    rw, rh = 2 * sw + 1, 2 * sh + 1
                elif s.kind == "upsample":
                    rw, rh = sw // 2 + 1, sh // 2 + 1
                elif s.kind == "matmul":
                    rw, rh = (s.p["k"], sh) if k == 0 else (sw, s.p["k"])
                else:
                    rw, rh = sw, sh
                cur = need.get(src)
                need[src] = [clamp(rw), clamp(rh)] if cur is None else [max(cur[0], clamp(rw)), max(cur[1], clamp(rh))]
        return need

    def fill_extents(self, s: Stage, sizes: dict) -> None:
        """RDom extents that follow the region: a whole row (column) of it, for row (column) sums
        and scans."""
        cap = self.cfg["row_cap"]
        if (s.kind == "reduction" and s.form in ("row", "col")) or s.kind == "scan":
            along_x = s.form in ("row", "x")
            s.p["n"] = int(max(2, min(cap, sizes[s.name][0 if along_x else 1])))

    def input_array(self, s0: Stage, size: list[int]) -> np.ndarray:
        rng = np.random.default_rng([self.seed, 1])
        shape = (3, size[1], size[0]) if s0.ndim == 3 else (size[1], size[0])
        t = s0.types[0]
        if t == "float32":
            return (rng.random(shape, dtype=np.float32) * 256 - 64).astype(np.float32)
        if t == "int32":
            return rng.integers(-INT32_BOUND, INT32_BOUND + 1, shape, dtype=np.int32)
        lo, hi = _SMALL[t]
        return rng.integers(lo, hi + 1, shape, dtype=np.dtype(t))


def _work(stages: list[Stage], sizes: dict, row_cap: int | None = None) -> float:
    """A rough cost of the compute_root reference: about one unit per value read or written."""
    total = 0.0
    for s in stages:
        w, h = sizes[s.name]
        px = w * h * (3 if s.ndim == 3 else 1)
        p = s.p
        if s.kind == "input":
            c = 1
        elif s.kind in ("pointwise", "join"):
            c = len(s.srcs) + 0.5 * len(p.get("ops", ()))
        elif s.kind == "stencil":
            c = len(p["taps"]) + 1
        elif s.kind == "downsample":
            c = len(p["taps"]) + 1
        elif s.kind == "upsample":
            c = 2 if s.form == "linear" else 1
        elif s.kind == "reduction":
            if s.form in ("row", "col"):
                n = p.get("n") or min(row_cap or 1024, w if s.form == "row" else h)
                c = 2 + n / (w if s.form == "row" else h)
            else:
                c = (2 * p["rx"] + 1) * (2 * p["ry"] + 1) + 1
        elif s.kind == "scan":
            c = 3
        elif s.kind == "gather":
            c = 2
        elif s.kind == "matmul":
            c = 2 * p["k"]
        elif s.kind == "tuple":
            c = 4 if s.form == "pure" else 2 * (2 * p["r"] + 1) ** 2
        else:  # 3d
            c = 3
        total += px * c
    return total


# --------------------------------------------------------------------------------- building
class _V:
    """A value: an Expr, its type (a TYPES name) and a bound on its magnitude."""

    __slots__ = ("e", "t", "b")

    def __init__(self, e, t: str, b: float):
        self.e, self.t, self.b = e, t, b


class _Built:
    __slots__ = ("func", "stage", "bounds")

    def __init__(self, func, stage: Stage, bounds: list[float]):
        self.func, self.stage, self.bounds = func, stage, bounds


class _Builder:
    def __init__(self, hl, rp: RandomPipeline):
        self.hl = hl
        self.rp = rp
        self.x, self.y, self.c = hl.Var("x"), hl.Var("y"), hl.Var("c")
        self.env: dict[str, _Built] = {}
        self.types = {"uint8": hl.UInt(8), "uint16": hl.UInt(16), "int16": hl.Int(16), "int32": hl.Int(32),
                      "float32": hl.Float(32)}

    # ---- values
    def const(self, t: str, v) -> object:
        return self.hl.cast(self.types[t], float(v) if t == "float32" else int(v))

    def limit(self, v: _V, b: float) -> _V:
        """Clamp an int32 or float32 value whose bound exceeds b."""
        if v.t in ("int32", "float32") and v.b > b:
            lo, hi = (-int(b), int(b)) if v.t == "int32" else (-float(b), float(b))
            return _V(self.hl.clamp(v.e, self.const(v.t, lo), self.const(v.t, hi)), v.t, b)
        return v

    def base(self, v: _V) -> _V:
        return self.limit(v, _BOUND[v.t]) if v.t in ("int32", "float32") else v

    def cast(self, v: _V, t: str) -> _V:
        hl = self.hl
        if v.t == t:
            return v
        if t in _SMALL:
            lo, hi = _SMALL[t]
            e = v.e
            if v.t == "float32":  # float-to-int outside the range is undefined: clamp first
                e = hl.clamp(e, float(lo), float(hi))
            return _V(hl.cast(self.types[t], e), t, max(abs(lo), abs(hi)))
        if t == "int32":
            if v.t == "float32":
                v = self.limit(v, INT32_BOUND)
            return _V(hl.cast(self.types[t], v.e), t, v.b)
        return _V(hl.cast(self.types[t], v.e), t, v.b)  # to float32: exact enough, bounded

    def read(self, ref, cx, cy, cc=None) -> _V:
        built = self.env[ref[0]]
        args = [cx, cy]
        if built.stage.ndim == 3:
            args.append(self.c if cc is None else cc)
        e = built.func[args]
        if len(built.stage.types) > 1:
            e = e[ref[1]]
            return self.base(_V(e, built.stage.types[ref[1]], built.bounds[ref[1]]))
        return self.base(_V(e, built.stage.types[0], built.bounds[0]))

    def unop(self, v: _V, op: str, arg) -> _V:
        hl = self.hl
        v = self.base(v)
        e, b, t = v.e, v.b, v.t
        if op == "add":
            return self.wrap(e + self.const(t, arg), t, b + abs(arg))
        if op == "sub":
            return self.wrap(e - self.const(t, arg), t, b + abs(arg))
        if op == "mul":
            return self.wrap(e * self.const(t, arg), t, b * abs(arg))
        if op == "div":
            return self.wrap(e / self.const(t, arg), t, b / abs(arg) + 1)
        if op == "mod":
            return self.wrap(e % self.const(t, arg), t, abs(arg))
        if op == "shr":
            return self.wrap(e >> self.const(t, arg), t, b)
        if op == "min":
            return self.wrap(hl.min(e, self.const(t, arg)), t, max(b, abs(arg)))
        if op == "max":
            return self.wrap(hl.max(e, self.const(t, arg)), t, max(b, abs(arg)))
        if op == "sqrt":
            return _V(hl.sqrt(hl.abs(e)), t, math.sqrt(b) + 1)
        if op == "floor":
            return _V(hl.floor(e), t, b + 1)
        raise ValueError(op)

    def wrap(self, e, t: str, b: float) -> _V:
        return _V(e, t, _BOUND[t] if t in _SMALL else b)

    def binop(self, a: _V, bv: _V, op: str, t: str) -> _V:
        hl = self.hl
        a, bv = self.cast(self.base(a), t), self.cast(self.base(bv), t)
        if op == "mul":
            lim = MUL_INT_BOUND if t == "int32" else MUL_FLOAT_BOUND
            a, bv = self.limit(a, lim), self.limit(bv, lim)
            return self.wrap(a.e * bv.e, t, a.b * bv.b)
        a, bv = self.base(a), self.base(bv)
        if op == "add":
            return self.wrap(a.e + bv.e, t, a.b + bv.b)
        if op == "sub":
            return self.wrap(a.e - bv.e, t, a.b + bv.b)
        if op == "min":
            return _V(hl.min(a.e, bv.e), t, max(a.b, bv.b))
        if op == "max":
            return _V(hl.max(a.e, bv.e), t, max(a.b, bv.b))
        if op == "select":
            return self.wrap(hl.select(a.e < bv.e, a.e, bv.e + self.const(t, 1)), t, max(a.b, bv.b + 1))
        if op == "avg":
            two = self.const(t, 2)
            return self.wrap((a.e + bv.e) / two, t, (a.b + bv.b) / 2 + 1)
        raise ValueError(op)

    def wsum(self, vals: list[_V], weights: list[int], acc: str) -> _V:
        total, bound = None, 0.0
        for v, w in zip(vals, weights):
            v = self.base(self.cast(self.base(v), acc))
            term = v.e if w == 1 else v.e * self.const(acc, w)
            total = term if total is None else total + term
            bound += v.b * w
        assert acc != "int32" or bound <= SUM_LIMIT, bound
        return self.wrap(total, acc, bound)

    def divc(self, v: _V, d: int) -> _V:
        if d == 1:
            return v
        return self.wrap(v.e / self.const(v.t, d), v.t, v.b / d + 1)

    def lowest(self, t: str):
        if t in _SMALL:
            return self.const(t, _SMALL[t][0])
        return self.const(t, -_BOUND[t] - 1)

    # ---- stages
    def pure_args(self, s: Stage) -> list:
        return [self.x, self.y, self.c] if s.ndim == 3 else [self.x, self.y]

    def build(self) -> list:
        for s in self.rp.stages:
            getattr(self, "_" + s.kind)(s)
        return [self.env[n].func for n in self.rp.output_names]

    def define(self, s: Stage, v: _V) -> None:
        f = self.hl.Func(s.name)
        f[self.pure_args(s)] = v.e
        self.env[s.name] = _Built(f, s, [v.b])

    def _input(self, s: Stage) -> None:
        hl = self.hl
        buf = hl.Buffer(self.rp.inputs["in0"], "in0")
        f = hl.BoundaryConditions.repeat_edge(buf)
        t = s.types[0]
        bound = 192.0 if t == "float32" else _BOUND[t]
        self.env[s.name] = _Built(f, s, [bound])

    def _pointwise(self, s: Stage) -> None:
        t = s.types[0]
        x, y = self.x, self.y
        a = self.cast(self.read(s.srcs[0], x, y), t)
        if s.form == "binary":
            a = self.binop(a, self.read(s.srcs[1], x, y), s.p["op"], t)
        for op, arg in s.p["ops"]:
            a = self.unop(a, op, arg)
        self.define(s, a)

    def _join(self, s: Stage) -> None:
        t = s.types[0]
        x, y = self.x, self.y
        a = self.cast(self.read(s.srcs[0], x, y), t)
        for ref, op in zip(s.srcs[1:], s.p["ops"]):
            a = self.binop(a, self.read(ref, x, y), op, t)
        self.define(s, a)

    def _stencil(self, s: Stage) -> None:
        x, y = self.x, self.y
        taps = s.p["taps"]
        vals = [self.read(s.srcs[0], x + dx, y + dy) for dx, dy, _ in taps]
        v = self.wsum(vals, [w for _, _, w in taps], s.p["acc"])
        if s.p["norm"]:
            v = self.cast(self.divc(v, sum(w for _, _, w in taps)), s.types[0])
        self.define(s, v)

    def _downsample(self, s: Stage) -> None:
        x, y = self.x, self.y
        taps = s.p["taps"]
        vals = [self.read(s.srcs[0], 2 * x + dx, 2 * y + dy) for dx, dy in taps]
        if len(vals) == 1:
            self.define(s, vals[0])
            return
        v = self.divc(self.wsum(vals, [1] * len(vals), s.p["acc"]), len(vals))
        self.define(s, self.cast(v, s.types[0]))

    def _upsample(self, s: Stage) -> None:
        x, y = self.x, self.y
        kx, ky = s.p["kx"], s.p["ky"]
        near = self.read(s.srcs[0], (x + kx) / 2, (y + ky) / 2)
        if s.form == "nearest":
            self.define(s, near)
            return
        other = self.read(s.srcs[0], (x + 1 - kx) / 2, (y + 1 - ky) / 2)
        v = self.divc(self.wsum([near, other], [1, 1], s.p["acc"]), 2)
        self.define(s, self.cast(v, s.types[0]))

    def _reduction(self, s: Stage) -> None:
        hl = self.hl
        x, y, c = self.x, self.y, self.c
        src = s.srcs[0]
        acc = s.p["acc"]
        args = self.pure_args(s)
        if s.form in ("row", "col"):
            n = s.p["n"]
            r = hl.RDom([(0, n)], name=f"{s.name}_r")
            term = self.cast(self.read(src, r.x, y) if s.form == "row" else self.read(src, x, r.x), acc)
            hargs = ([y] if s.form == "row" else [x]) + ([c] if s.ndim == 3 else [])
            helper = hl.Func(f"{s.name}_{s.form}")
            if s.p["how"] == "inline":
                helper[hargs] = hl.sum(term.e, f"{s.name}_{s.form}_sum")
            else:
                helper[hargs] = self.const(acc, 0)
                helper[hargs] = helper[hargs] + term.e
            hb = term.b * n
            mean = self.divc(_V(helper[hargs], acc, hb), n)
            v = self.binop(self.cast(self.read(src, x, y), acc), mean, "sub", acc)
            self.define(s, v)
            return
        rx, ry = s.p["rx"], s.p["ry"]
        ranges = ([(-rx, 2 * rx + 1)] if rx else []) + ([(-ry, 2 * ry + 1)] if ry else [])
        r = hl.RDom(ranges, name=f"{s.name}_r")
        rvx = r.x if rx else 0
        rvy = (r.y if rx else r.x) if ry else 0
        count = (2 * rx + 1) * (2 * ry + 1)
        term = self.read(src, x + rvx, y + rvy)
        if s.form.startswith("sum"):
            term = self.base(self.cast(term, acc))
            bound = term.b * count
            if s.form == "sum_inline":
                v = self.wrap(hl.sum(term.e, f"{s.name}_sum"), acc, bound)
                if s.p["norm"]:
                    v = self.cast(self.divc(v, count), s.types[0])
                self.define(s, v)
                return
            f = hl.Func(s.name)
            f[args] = self.const(acc, 0)
            f[args] = f[args] + term.e
            b = self.wrap(None, acc, bound).b
            if s.p["norm"]:
                f[args] = f[args] / self.const(acc, count)
                b = b / count + 1
            self.env[s.name] = _Built(f, s, [b])
            return
        if s.form == "max_inline":
            self.define(s, _V(hl.maximum(term.e, f"{s.name}_max"), term.t, term.b))
            return
        f = hl.Func(s.name)
        f[args] = self.lowest(term.t)
        f[args] = hl.max(f[args], term.e)
        self.env[s.name] = _Built(f, s, [max(term.b, _BOUND[term.t] + 1 if term.t not in _SMALL else 0)])

    def _scan(self, s: Stage) -> None:
        hl = self.hl
        x, y = self.x, self.y
        t, n = s.types[0], s.p["n"]
        args = self.pure_args(s)
        lim = SUM_LIMIT // n if t == "int32" else _BOUND[t]
        src = s.srcs[0]
        f = hl.Func(s.name)
        f[args] = self.limit(self.cast(self.read(src, x, y), t), lim).e
        r = hl.RDom([(1, n - 1)], name=f"{s.name}_r")
        extra = [self.c] if s.ndim == 3 else []
        if s.form == "x":
            term = self.limit(self.cast(self.read(src, r.x, y), t), lim)
            f[[r.x, y] + extra] = f[[r.x - 1, y] + extra] + term.e
        else:
            term = self.limit(self.cast(self.read(src, x, r.x), t), lim)
            f[[x, r.x] + extra] = f[[x, r.x - 1] + extra] + term.e
        self.env[s.name] = _Built(f, s, [self.wrap(None, t, term.b * n).b])

    def _gather(self, s: Stage) -> None:
        hl = self.hl
        x, y = self.x, self.y
        t = s.types[0]
        v = hl.Var("v")
        lut = hl.Func(f"{s.name}_lut")
        a, b = s.p["a"], s.p["b"]
        if s.form == "affine":
            e = _V((v * a + b) % 256, "int32", 255)
        elif s.form == "square":
            e = _V((v * v) / 256, "int32", 255)
        else:
            e = _V(hl.sqrt(hl.abs(hl.cast(hl.Float(32), v))) * 16.0, "float32", 256)
        lv = self.cast(e, t)
        lut[v] = lv.e
        src = self.read(s.srcs[0], x, y)
        if src.t == "float32":
            idx = hl.cast(hl.Int(32), hl.clamp(src.e, 0.0, 255.0))
        elif s.p["index"] == "wrap":
            idx = hl.cast(hl.Int(32), hl.cast(hl.UInt(8), src.e))
        else:
            idx = hl.clamp(hl.cast(hl.Int(32), src.e), 0, 255)
        self.define(s, _V(lut[idx], t, lv.b))

    def _matmul(self, s: Stage) -> None:
        hl = self.hl
        x, y = self.x, self.y
        t, k = s.types[0], s.p["k"]
        r = hl.RDom([(0, k)], name=f"{s.name}_k")
        lim = MUL_INT_BOUND if t == "int32" else MUL_FLOAT_BOUND
        a = self.limit(self.cast(self.read(s.srcs[0], r.x, y, 0), t), lim)
        b = self.limit(self.cast(self.read(s.srcs[1], x, r.x, 0), t), lim)
        f = hl.Func(s.name)
        f[x, y] = self.const(t, 0)
        f[x, y] += a.e * b.e
        bound = a.b * b.b * k
        assert t != "int32" or bound <= SUM_LIMIT
        self.env[s.name] = _Built(f, s, [bound])

    def _tuple(self, s: Stage) -> None:
        hl = self.hl
        x, y = self.x, self.y
        args = self.pure_args(s)
        src = s.srcs[0]
        acc, t1 = s.types
        f = hl.Func(s.name)
        if s.form == "pure":
            e0 = self.wsum([self.read(src, x, y), self.read(src, x + 1, y)], [1, 1], acc)
            m = self.binop(self.read(src, x, y), self.read(src, x, y + 1), "max", self.read(src, x, y).t)
            e1 = self.cast(m, t1)
            f[args] = hl.Tuple([e0.e, e1.e])
            self.env[s.name] = _Built(f, s, [e0.b, e1.b])
            return
        rr = s.p["r"]
        r = hl.RDom([(-rr, 2 * rr + 1), (-rr, 2 * rr + 1)], name=f"{s.name}_r")
        v = self.read(src, x + r.x, y + r.y)
        va = self.base(self.cast(v, acc))
        f[args] = hl.Tuple([self.const(acc, 0), self.lowest(t1)])
        f[args] = hl.Tuple([f[args][0] + va.e, hl.max(f[args][1], v.e)])
        n = (2 * rr + 1) ** 2
        self.env[s.name] = _Built(f, s, [self.wrap(None, acc, va.b * n).b,
                                         v.b if t1 in _SMALL else _BOUND[t1] + 1])

    def _3d(self, s: Stage) -> None:
        hl = self.hl
        x, y, c = self.x, self.y, self.c
        t = s.types[0]
        if s.form == "expand":
            a = self.read(s.srcs[0], x, y)
            e1 = self.unop(a, *s.p["ops"][0])
            e2 = self.binop(a, self.read(s.srcs[1], x, y), s.p["op"], t)
            e1, e2 = self.cast(e1, t), self.cast(e2, t)
            self.define(s, _V(hl.select(c == 0, a.e, c == 1, e1.e, e2.e), t, max(a.b, e1.b, e2.b)))
            return
        src = s.srcs[0]
        if s.form == "max":
            chans = [self.read(src, x, y, k) for k in range(3)]
            v = self.binop(self.binop(chans[0], chans[1], "max", t), chans[2], "max", t)
            self.define(s, v)
            return
        acc = s.p["acc"]
        if s.form == "rdom":
            r = hl.RDom([(0, 3)], name=f"{s.name}_r")
            term = self.base(self.cast(self.read(src, x, y, r.x), acc))
            self.define(s, self.wrap(hl.sum(term.e, f"{s.name}_sum"), acc, 3 * term.b))
            return
        w = s.p["w"]
        v = self.wsum([self.read(src, x, y, k) for k in range(3)], w, acc)
        if s.p["norm"]:
            v = self.cast(self.divc(v, sum(w)), t)
        self.define(s, v)
