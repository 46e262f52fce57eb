"""The loop-nest model: a candidate schedule evaluated numerically, without lowering it.

A schedule is one `Decision` per Func: where it is computed (inlined, at root, or at a loop of
its one consumer), how its pure loops are tiled, which loop is vectorized, which outer loops run
in parallel, and for update stages where the reduction loops go. From the decisions and the
estimates, the model works out for every Func the region computed per realization, how many
realizations there are, and the loops each stage runs, by evaluating the access boxes of
`analysis` over the consumers' loop boxes. `FuncModel.features` then says what that costs in
operations, loads, stores, memory traffic, allocations and parallel overhead; the cost model turns
features into time.

Decisions are made consumers first, and a Func's features depend only on its own decision and
its consumers' (its loads from its producers are charged to the producers, which decide whether
those loads happen at all): the cost of a partial schedule is the sum over the Funcs decided so
far, and states with the same Funcs decided compare fairly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from .analysis import GATHER, Analysis, FuncInfo, StageInfo, hi_name, lo_name

FEATURES = (
    "ops",  # vector (or scalar) arithmetic instructions, divided among the cores that run them
    "expensive",  # divisions by a variable, transcendental calls
    "loads",  # dense vector loads (or scalar loads in scalar code)
    "gathers",  # loads of one element per lane (data-dependent or strided indices)
    "scatters",  # read-modify-writes of one element per lane at loaded coordinates (a histogram's bins)
    "stores",
    "bytes_l1",  # bytes written and read back of storage that fits in the L1 cache
    "bytes_cache",  # bytes written and read back of storage that fits in the L2 cache
    "bytes_l3",  # bytes written and read back (or read again) that fit in a core's share of L3
    "bytes_mem",  # bytes written and read back of storage that does not, and input bytes read
    "bytes_partial_rows",  # of those from L3 or memory, the bytes walked a piece of each row at a time
    "allocs",  # realizations of Funcs computed inside loops
    "loop_entries",  # entries into innermost loops: a short innermost loop costs its overhead often
    "par_launches",  # parallel loops started: waking the thread pool
    "par_tasks",  # parallel tasks run
    "stages",  # loop nests emitted
)
FEATURE_VERSION = 16
# A vector gather of 8- or 16-bit elements from an input buffer: a gather of 32-bit words whose
# start is clamped to the buffer's last word, and a shift per lane (codegen/x86.py): 0.21 ns a
# lane against 0.15 for a gather of the pipeline's own storage, padded for the words
# (`python -m benchmarks.unit_costs`, table reads).
NARROW_INPUT_GATHER = 1.4


@dataclass(frozen=True)
class Decision:
    placement: str  # "inline", "root" or "at"
    consumer: str | None = None  # for "at": the Func computed in
    stage: int = 0  # the consumer's stage
    level: int = -1  # index of the loop in the consumer stage's loops, outermost first
    tile: tuple = ()  # per dimension of the Func: the inner extent of its split, 0 = not split
    vector: int = 0  # vector width along dimension 0 (0: scalar)
    parallel: int = 0  # how many outermost loops are fused into one parallel loop (0: none)
    rvars_outside: bool = False  # updates: reduction loops outside the inner tile loops
    unroll: bool = False  # updates: unroll the inner tile loops other than the vector loop
    store: int | None = None  # for "at": stored at this outer loop of the consumer (a sliding window)
    columns: bool = False  # tiles walked down columns: the outer loop of dimension 0 outermost
    # updates: the reduction's outermost RVar split into bands of this many iterations, each band
    # reduced into its own partial result in parallel (rfactor), then the partials combined
    rfactor: int = 0
    # updates writing at loaded coordinates (a histogram): the reduction outside the Func's first
    # dimension, and its small dimensions (a histogram's channels) innermost and unrolled, so
    # each value loaded feeds every bin it lands in at once; scalar. Pure definitions: the small
    # dimensions innermost, unrolled, inside the vectorized first one (an image's channels
    # written from each vector of what they are computed from, whose loops then run over pixels)
    pixel_major: bool = False

    def describe(self) -> str:
        where = self.placement if self.placement != "at" else f"at {self.consumer}.s{self.stage}[{self.level}]"
        bits = [where]
        if self.store is not None:
            bits.append(f"store [{self.store}]")
        if any(self.tile):
            bits.append("tile " + "x".join(str(t) if t else "-" for t in self.tile))
        if self.vector:
            bits.append(f"vec {self.vector}")
        if self.parallel:
            bits.append(f"par {self.parallel}")
        if self.rvars_outside:
            bits.append("r-out")
        if self.unroll:
            bits.append("unroll")
        if self.columns:
            bits.append("columns")
        if self.rfactor:
            bits.append(f"rfactor {self.rfactor}")
        if self.pixel_major:
            bits.append("pixel-major")
        return " ".join(bits)

    @staticmethod
    def parse(text: str) -> Decision:
        """The Decision `describe` printed (tuning records keep decisions as text, so their
        features can be worked out again when the featurisation changes)."""
        words = text.split()
        where = words.pop(0)
        fields: dict = {"placement": where}
        if where == "at":
            site = words.pop(0)  # consumer.sS[L]
            consumer, rest = site.rsplit(".s", 1)
            stage, level = rest.rstrip("]").split("[")
            fields.update(consumer=consumer, stage=int(stage), level=int(level))
        elif where not in ("inline", "root"):
            raise ValueError(f"not a decision: {text!r}")
        while words:
            w = words.pop(0)
            if w == "store":
                fields["store"] = int(words.pop(0).strip("[]"))
            elif w == "tile":
                fields["tile"] = tuple(0 if t == "-" else int(t) for t in words.pop(0).split("x"))
            elif w == "vec":
                fields["vector"] = int(words.pop(0))
            elif w == "par":
                fields["parallel"] = int(words.pop(0))
            elif w == "r-out":
                fields["rvars_outside"] = True
            elif w == "unroll":
                fields["unroll"] = True
            elif w == "columns":
                fields["columns"] = True
            elif w == "rfactor":
                fields["rfactor"] = int(words.pop(0))
            elif w == "pixel-major":
                fields["pixel_major"] = True
            else:
                raise ValueError(f"not a decision: {text!r}")
        return Decision(**fields)


INLINE = Decision("inline")


@dataclass(frozen=True)
class Loop:
    name: str  # the loop's variable in the schedule pyhalide is given
    dims: tuple  # the pure dimensions (or the RVar) it iterates
    kind: str  # "outer", "inner", "rvar", "fused" or "band" (rfactor's partial results)
    trip: int
    parallel: bool = False
    unrolled: bool = False
    speedup: float = 1.0  # of what runs inside it, when parallel


def split_names(dim: str) -> tuple[str, str]:
    return f"{dim}_o", f"{dim}_i"


def rfactor_names(rvar: str) -> tuple[str, str]:
    """The bands and the iterations within a band of an rfactored RVar."""
    return f"{rvar}_band", f"{rvar}_in"


def fused_name(dims) -> str:
    return "_".join(dims) + "_f"


@dataclass
class Hardware:
    cores: int
    vector_bits: int
    l1: int
    l2: int
    l3: int = 8 << 20  # shared by the cores

    def l3_share(self) -> int:
        return self.l3 // max(1, self.cores)


def register_budget(hw: Hardware) -> int:
    """Accumulator vectors a register tile may hold: the vector registers, less a few for
    operands (AVX-512 has 32, AVX2 16)."""
    return 28 if hw.vector_bits >= 512 else 12


def natural_vector(info: FuncInfo, hw: Hardware) -> int:
    return max(1, hw.vector_bits // max(8, info.max_bits))


SMALL_DIM = 4  # a dimension this short (colour channels) is unrolled where a pixel-major update reads it


def stage_loops(info: FuncInfo, stage: StageInfo, d: Decision, extents: dict, rv_extents: list,
                cores: int) -> tuple[list, int]:
    """The loops of one stage, outermost first (the vector lanes are not a loop here), and the
    vector width it really gets (0: scalar). Remembered per stage (a new list each time)."""
    key = (d, tuple(extents.items()), tuple(rv_extents), cores)
    known = stage.loops_memo.get(key)
    if known is None:
        known = stage.loops_memo[key] = _stage_loops(info, stage, d, extents, rv_extents, cores)
    return list(known[0]), known[1]


def _stage_loops(info: FuncInfo, stage: StageInfo, d: Decision, extents: dict, rv_extents: list,
                 cores: int) -> tuple[list, int]:
    tile = dict(zip(info.dims, d.tile)) if d.tile else {}
    split = {v for v in stage.pure_dims if 0 < tile.get(v, 0) < extents[v]}
    outer = [Loop(split_names(v)[0], (v,), "outer", -(-extents[v] // tile[v])) for v in reversed(stage.pure_dims)
             if v in split]
    if d.columns and outer and outer[-1].dims == (info.dims[0],):
        outer = outer[-1:] + outer[:-1]
    vector = 0
    inner = []
    for v in reversed(stage.pure_dims):
        extent = min(tile[v], extents[v]) if v in split else extents[v]
        name = split_names(v)[1] if v in split else v
        inner.append([name, (v,), extent])
    rvar_loops = [Loop(name, (name,), "rvar", n)
                  for (name, _, _), n in zip(reversed(stage.rvars), reversed(rv_extents))]
    bands = None
    if d.rfactor and stage.rvars:
        band_name, in_name = rfactor_names(rvar_loops[0].name)
        n = -(-rvar_loops[0].trip // d.rfactor)
        bands = Loop(band_name, (), "band", n, parallel=n > 1, speedup=_speedup(n, cores))
        rvar_loops[0] = Loop(in_name, rvar_loops[0].dims, "rvar", min(d.rfactor, rvar_loops[0].trip))
    reduction_inside = stage.rvars and not d.rvars_outside
    if (d.vector > 1 and stage.pure_dims and stage.pure_dims[0] == info.dims[0] and not reduction_inside
            and inner[-1][2] >= d.vector):
        vector = d.vector
        inner[-1][2] = -(-inner[-1][2] // vector)
    unroll = d.unroll and (stage.index == 0 or d.rvars_outside)
    # a register tile (an update's unrolled inner tile) unrolls its vector loop's vectors too
    vectors_unrolled = unroll and stage.index > 0
    inner_loops = [Loop(n, dims, "inner", t, unrolled=unroll and (k < len(inner) - 1 or vectors_unrolled)
                        and (not tile or tile.get(dims[0], 0) > 0))
                   for k, (n, dims, t) in enumerate(inner)]
    if d.pixel_major and stage.scatter:
        # y, then the reduction, then x, then the small dimensions unrolled (innermost last)
        first = [lp for lp in inner_loops if lp.dims[0] == info.dims[0]]
        small = [replace(lp, unrolled=True) for lp in inner_loops if lp.trip <= SMALL_DIM and lp not in first]
        rest = [lp for lp in inner_loops if lp.trip > SMALL_DIM and lp not in first]
        loops, vector = outer + rest + rvar_loops + first + small, 0
    elif d.pixel_major and stage.index == 0:
        small = [lp for lp in inner_loops if lp.dims[0] in info.dims[2:] and lp.trip <= SMALL_DIM]
        loops = outer + [lp for lp in inner_loops if lp not in small] + [replace(lp, unrolled=True) for lp in small]
    elif unroll and stage.rvars and d.rvars_outside:
        # a register tile: the dims the tile leaves whole go outside the reduction, which goes
        # right outside the unrolled block it accumulates in registers
        whole = [lp for lp in inner_loops[:-1] if not lp.unrolled]
        loops = outer + whole + rvar_loops + [lp for lp in inner_loops if all(lp is not w for w in whole)]
    elif stage.rvars and d.rvars_outside:
        loops = outer + rvar_loops + inner_loops
    else:
        loops = outer + inner_loops + rvar_loops
    if bands is not None:
        return [bands] + loops, vector
    if d.parallel and d.placement == "root":
        pure_prefix = []
        for lp in loops:
            if lp.kind == "rvar" or len(pure_prefix) == d.parallel:
                break
            if lp.kind == "inner" and lp is inner_loops[-1] and vector:
                break  # never fuse the vectorized loop into the parallel one
            pure_prefix.append(lp)
        if len(pure_prefix) == 1:
            p = pure_prefix[0]
            loops[0] = Loop(p.name, p.dims, p.kind, p.trip, parallel=True, speedup=_speedup(p.trip, cores))
        elif pure_prefix:
            dims = tuple(v for lp in pure_prefix for v in lp.dims)
            trip = math.prod(lp.trip for lp in pure_prefix)
            name = fused_name([lp.name for lp in pure_prefix])
            fused = Loop(name, dims, "fused", trip, parallel=True, speedup=_speedup(trip, cores))
            loops = [fused] + loops[len(pure_prefix):]
    return loops, vector


@dataclass
class StageModel:
    loops: list
    vector: int
    points: int  # per realization
    rv_extents: list
    # points that share one evaluation of what they read: a pixel-major update's unrolled small
    # dimensions (its channels) use one value loaded, and what is computed from it, for all
    shared: int = 1


@dataclass
class FuncModel:
    """One Func under its decision: region per realization, how many, and what it costs."""

    name: str
    decision: Decision
    region: list  # per dimension (min, extent), per realization
    total: list  # per dimension (min, extent), over all realizations
    realizations: float
    inherited: float  # speedup from parallel loops around its compute site
    stages: list  # StageModel per stage (empty when inlined)
    features: dict
    recompute: float = 1.0  # evaluations of each point of its region (inlined: through its consumers)
    # sliding windows: `region` is what a realization computes in the steady state; this factor
    # accounts for the first iteration of the sliding loop, which computes the whole window
    warm: float = 1.0
    # computed at a consumer's loop: its region over one iteration of each loop around that
    # one, innermost first (how its realizations move on through what it reads)
    enclosing: tuple = ()
    enclosing_trips: tuple = ()  # the iterations each of those holds of the loop inside it
    register_vectors: float = 0.0  # the vector registers its storage takes where it lives in them
    # per stage: the vectors an unrolled block of it loads of everything it reads (unroll_reuse)
    block_vectors: dict = field(default_factory=dict)

    def root(self, models: dict) -> str:
        """The Func at root whose loops this one is computed in (itself, where at root)."""
        d = self.decision
        return models[d.consumer].root(models) if d.placement == "at" else self.name

    def speedup(self, stage: int, level: int | None = None) -> float:
        """The parallel speedup of work inside stage `stage`'s loop `level` (None: innermost)."""
        sm = self.stages[stage]
        for k, lp in enumerate(sm.loops):
            if level is not None and k > level:
                break
            if lp.parallel:
                return self.inherited * lp.speedup
        return self.inherited


def _speedup(tasks: float, cores: int) -> float:
    if tasks <= 1:
        return 1.0
    return tasks / math.ceil(tasks / cores)


class Model:
    """Evaluates decisions over one Analysis (see the module docstring)."""

    def __init__(self, analysis: Analysis, output_regions: dict, hw: Hardware):
        self.a = analysis
        self.hw = hw
        self.output_regions = output_regions  # output name -> [(min, extent)]
        # A Func's model depends only on its decision and the models of the Funcs downstream of
        # it (its consumers, through inlined ones, and theirs): evaluations are shared between
        # the states of a beam that agree on those. A consumer's model object stands for all of
        # them: each is made (and memoised) for one set of models downstream of it, so the ids
        # of the direct consumers' models are the key (with, for a Func computed inside another's
        # loops, the register vectors Funcs beside it already take: see register_vectors).
        self.consumers = {n: tuple(sorted(g for g in analysis.funcs[n].consumers if g in analysis.funcs))
                          for n in analysis.order}
        self._memo: dict = {}
        self._contexts: dict = {}

    def evaluate(self, name: str, d: Decision, models: dict) -> FuncModel:
        key = (name, d, tuple(id(models.get(g)) for g in self.consumers[name]))
        if d.placement == "at" and d.store is None:  # it may share the registers with Funcs beside it
            key += tuple((n, m.register_vectors) for n, m in models.items() if m.register_vectors)
        hit = self._memo.get(key)
        if hit is not None:
            return hit[0]
        fm = self._evaluate(name, d, models)
        if len(self._memo) > 200_000:
            self._memo.clear()
        # the consumers' models are kept alive with the entry, so their ids stay theirs
        self._memo[key] = (fm, [models.get(g) for g in self.consumers[name]])
        return fm

    # ---- regions
    def stage_env(self, fm: FuncModel, s: int, level: int | None, total: bool = False) -> dict:
        """Loop-variable bounds of stage s of an evaluated Func inside one iteration of its loop
        `level` (None: the whole realization), as the access closures read them."""
        info = self.a.funcs[fm.name]
        st = info.stages[s]
        env = dict(self.a.env)
        region = fm.total if total else fm.region
        for v, (mn, ext) in zip(info.dims, region):
            env[lo_name(v)], env[hi_name(v)] = mn, mn + ext - 1
        sm = fm.stages[s]
        for (name, mnf, _), n in zip(st.rvars, sm.rv_extents):
            lo = mnf(self.a.env)
            env[lo_name(name)], env[hi_name(name)] = lo, lo + n - 1
        if level is not None and not total:
            # the middle iteration of each loop: what an iteration reads can grow along the loop
            # (an upsample's x / 2 and its own x drift apart), and the middle is the mean
            for lp in sm.loops[: level + 1]:
                for v in lp.dims:
                    step = self.loop_step(fm, s, lp, v)
                    if lp.kind in ("outer", "inner") and lp.trip > 1:
                        env[lo_name(v)] += lp.trip // 2 * step
                    env[hi_name(v)] = env[lo_name(v)] + step - 1
        return env

    def loop_step(self, fm: FuncModel, s: int, lp: Loop, v: str) -> int:
        """Coordinates of dimension v one iteration of loop lp covers: a tile for an outer (or
        fused) loop, the vector for the vectorized loop, else one."""
        if lp.kind in ("outer", "fused"):
            tile = dict(zip(self.a.funcs[fm.name].dims, fm.decision.tile)) if fm.decision.tile else {}
            return max(1, tile.get(v, 1))
        sm = fm.stages[s]
        if lp.kind == "inner" and sm.vector and lp.dims == (self.a.funcs[fm.name].dims[0],):
            return sm.vector
        return 1

    def demand(self, producer: str, consumer: str, s: int, env: dict, models: dict, depth: int = 0):
        """The box of `producer` stage s of `consumer` reads over env, looking through inlined
        Funcs; the loads per point; and their stride along dimension 0 (the widest on the way:
        1 is dense, GATHER one lane at a time)."""
        box, loads, stride = None, 0.0, 0.0
        for acc in self.a.funcs[consumer].stages[s].accesses:
            if acc.in_bounds_of_rdom:
                continue
            if acc.producer == producer:
                b = _eval_access(acc, env)
                box = _union(box, b)
                loads += acc.count
                stride = max(stride, acc.stride)
            elif not acc.is_input and models.get(acc.producer) is not None \
                    and models[acc.producer].decision.placement == "inline" and depth < 32:
                c_info = self.a.funcs[acc.producer]
                cb = _eval_box(acc.box, env)
                if cb is None or any(x is None for x in cb):
                    cb = [(0, 1)] * len(c_info.dims) if cb is None else [x or (0, 1) for x in cb]
                c_env = dict(self.a.env)
                for v, (lo, hi) in zip(c_info.dims, cb):
                    c_env[lo_name(v)], c_env[hi_name(v)] = lo, hi
                b, n, st = self.demand(producer, acc.producer, 0, c_env, models, depth + 1)
                if n:
                    box = _union(box, b)
                    loads += acc.count * n
                    stride = max(stride, st * acc.stride)
        return box, loads, max(stride, 1.0)

    def reads_unit(self, producer: str, consumer: str, s: int, models: dict) -> bool:
        """Whether every read of `producer` by stage s of `consumer`, through inlined Funcs, moves
        one for one with the loops (Access.unit)."""
        return self._unit_reads(producer, consumer, s, models, 0)[1]

    def _unit_reads(self, producer: str, consumer: str, s: int, models: dict, depth: int) -> tuple[bool, bool]:
        """(whether stage s of consumer reads producer, through inlined Funcs; whether all those
        reads move one for one with the loops)."""
        reads, unit = False, True
        for acc in self.a.funcs[consumer].stages[s].accesses:
            if acc.in_bounds_of_rdom:
                continue
            if acc.producer == producer:
                reads, unit = True, unit and acc.unit
            elif not acc.is_input and models.get(acc.producer) is not None \
                    and models[acc.producer].decision.placement == "inline" and depth < 32:
                r, u = self._unit_reads(producer, acc.producer, 0, models, depth + 1)
                if r:
                    reads, unit = True, unit and u and acc.unit
        return reads, unit

    def effective_consumers(self, name: str, models: dict) -> dict:
        """Computed Funcs reading `name` (through inlined ones) -> set of their stages (None: RDom bounds)."""
        out: dict = {}
        for g, stages in self.a.funcs[name].consumers.items():
            m = models.get(g)
            if m is not None and m.decision.placement == "inline":
                for h, ss in self.effective_consumers(g, models).items():
                    out.setdefault(h, set()).update(ss)
            else:
                out.setdefault(g, set()).update(stages)
        return out

    def _fill(self, name: str, box) -> list:
        """A box with unknown dimensions filled from the estimates (outputs, inputs) or a guess."""
        info = self.a.funcs.get(name)
        ndim = len(info.dims) if info is not None else len(self.a.input_shapes.get(name, []))
        if box is None:
            box = [None] * ndim
        out = []
        for k, b in enumerate(box):
            if b is None:
                known = self.a.input_shapes.get(name)
                out.append(known[k] if known else (0, 256))
            else:
                lo, hi = b
                out.append((int(lo), max(1, int(hi) - int(lo) + 1)))
        return out

    # ---- one Func
    def _evaluate(self, name: str, d: Decision, models: dict) -> FuncModel:
        info = self.a.funcs[name]
        hw = self.hw
        feats = dict.fromkeys(FEATURES, 0.0)
        # what the consumers read does not depend on this Func's decision: worked out once per
        # set of downstream models, for all the decisions tried against them
        contexts, reads = self._context(name, models)[:2]
        if info.is_output:
            total = list(self.output_regions[name])
            for _, _, box, _, _ in contexts:  # an output also read by another output
                total = _union_regions(total, self._fill(name, box))
        else:
            total = None
            for _, _, box, _, _ in contexts:
                total = _union_regions(total, self._fill(name, box))
            if total is None:  # read only by RDom bounds: its whole estimated region
                total = self._fill(name, None)

        if d.placement == "inline":
            all_evals = 0.0
            for gm, s, _, loads, stride in contexts:
                sm = gm.stages[s]
                # (in the inlined Func's own types: a u16 Func inlined into a u8 consumer's 64
                # lanes is two instructions an operation, not one)
                lanes = self.lanes(name, sm.vector)
                sp = gm.speedup(s)
                evals = loads * sm.points * gm.realizations * gm.warm / sm.shared
                all_evals += evals
                st = info.stages[0]
                feats["ops"] += evals * st.ops / lanes / sp
                feats["expensive"] += evals * st.expensive / lanes / sp
                self._input_loads(info, st, evals, lanes, sp, feats, stride,
                                  reader=(gm, s, lambda env, g=gm.name, s=s: self.demand(name, g, s, env, models)[0]))
            fm = FuncModel(name, d, total, total, 1.0, 1.0, [], feats)
            fm.recompute = all_evals / max(1, math.prod(ext for _, ext in total))
            return fm

        if d.placement == "root":
            region, realizations, inherited = total, 1.0, 1.0
        else:
            gm = models[d.consumer]
            region = self.site_region(name, d.consumer, d.stage, d.level, models)
            loops = gm.stages[d.stage].loops
            trips = math.prod(lp.trip for lp in loops[: d.level + 1])
            realizations = gm.realizations * trips
            inherited = gm.speedup(d.stage, d.level)
        storage = region
        slide = self.sliding(name, d, models) if d.store is not None else None
        warm = 1.0
        if slide is not None:
            k, step, _, storage = slide
            full = math.prod(ext for _, ext in region)
            region = [(mn, step) if j == k else (mn, ext) for j, (mn, ext) in enumerate(region)]
            # the sliding loop's first iteration computes the whole window
            steady = math.prod(ext for _, ext in region)
            warm = 1.0 + (full - steady) / max(1, steady) / max(1, loops[d.store + 1].trip)
        extents = {v: ext for v, (_, ext) in zip(info.dims, region)}
        enclosing = tuple(self.site_region(name, d.consumer, d.stage, level, models)
                          for level in range(d.level - 1, -1, -1)) if d.placement == "at" else ()
        enclosing_trips = tuple(loops[level + 1].trip for level in range(d.level - 1, -1, -1)) \
            if d.placement == "at" else ()
        fm = FuncModel(name, d, region, total, realizations, inherited, [], feats, warm=warm, enclosing=enclosing,
                       enclosing_trips=enclosing_trips)
        fm.register_vectors = self.register_vectors(info, d, storage, contexts, models)
        registers = fm.register_vectors > 0
        bytes_storage = math.prod(ext for _, ext in storage) * info.bytes_per_point
        bytes_region = math.prod(ext for _, ext in region) * info.bytes_per_point * warm
        in_cache = bytes_storage <= hw.l2 // 2
        level = _tier(bytes_storage, hw)
        for st in info.stages:
            rv_extents = [max(1, int(ext(self.a.env))) for _, _, ext in st.rvars]
            loops, vector = stage_loops(info, st, d, extents, rv_extents, hw.cores)
            points = math.prod(extents[v] for v in st.pure_dims) * math.prod(rv_extents)
            shared = math.prod(lp.trip for lp in loops if lp.unrolled) if d.pixel_major and st.scatter else 1
            sm = StageModel(loops, vector, points, rv_extents, shared)
            fm.stages.append(sm)
            sp = fm.speedup(st.index)
            lanes = self.lanes(name, vector)
            # lanes really used: a vector loop over an extent that is not a multiple of the width
            # computes some lanes twice (ShiftInwards)
            waste = 1.0
            if vector:
                e0 = loops[inner_loop_index(loops, info.dims[0])]
                e_full = extents[info.dims[0]]
                inner_extent = min(e_full, (d.tile[0] or e_full) if d.tile else e_full)
                waste = e0.trip * vector / max(1, inner_extent)
            work = points * realizations * waste * warm
            feats["ops"] += work * st.ops / lanes / sp / shared
            feats["expensive"] += work * st.expensive / lanes / sp / shared
            register_tiled = self._register_tiled(st, loops, vector, d)
            n_values = len(info.func.types())
            if register_tiled:
                sweeps = work / max(1, math.prod(rv_extents))
                feats["stores"] += sweeps * n_values / lanes / sp
                feats["loads"] += sweeps * st.self_loads / lanes / sp
            elif st.scatter and vector:
                # a vector of bins read and written at loaded coordinates: a read-modify-write
                # per lane of the accumulator, and one store per lane
                feats["stores"] += work * n_values / sp
                feats["scatters"] += work * st.self_loads / sp
            elif not registers:
                feats["stores"] += work * n_values / lanes / sp
                feats["loads"] += work * st.self_loads / lanes / sp
                self._accumulator_sweeps(info, st, loops, vector, work, sp, feats)
            else:  # a register move a vector at most (what makes inlining a constant no dearer)
                feats["ops"] += work * n_values / lanes / sp
            self._input_loads(info, st, work / shared, lanes, sp, feats, 1.0, fm, reader=(fm, st.index, None))
            # a loop's overhead is paid per entry into the innermost real loop: loops of one
            # iteration and unrolled loops are no loops (a stage with no real loop is straight-line
            # code, entered nowhere)
            trip, real = 1, False
            for lp in reversed(loops):
                trip *= lp.trip
                if lp.trip > 1 and not lp.unrolled:
                    real = True
                    break
            if real:
                feats["loop_entries"] += work / lanes / trip / sp
            if not registers:  # (a block in registers is straight-line code in its consumer's)
                feats["stages"] += realizations / fm.inherited if d.placement == "at" else 1
            if loops and loops[0].kind == "band":
                self._partial_results(info, loops[0].trip, extents, realizations, feats)
            for k, lp in enumerate(loops):
                if lp.parallel:
                    launches = realizations * math.prod(x.trip for x in loops[:k])
                    feats["par_launches"] += launches
                    feats["par_tasks"] += launches * lp.trip
            if st.index == 0 and not registers:
                # storage traffic: written once per realization, then read back by the consumers
                # (read_traffic: from this storage's cache tier, or again where a consumer's
                # loops re-read more than the cache holds)
                row = storage[0][1] if storage else None
                written = bytes_region * realizations / (sp if in_cache else min(sp, 2.0))
                feats[level] += written
                if level in FAR_TIERS and row is not None and _walks_partial_rows(self._own_extents(fm, st.index), row):
                    feats["bytes_partial_rows"] += written
                for gm, cs, _, _, stride in contexts:
                    gathered = _gathers(stride, self.lanes(gm.name, gm.stages[cs].vector))
                    if (gm.name, cs, row) not in reads:
                        reads[gm.name, cs, row] = self.read_traffic(
                            gm, cs, lambda env, g=gm.name, cs=cs: self.demand(name, g, cs, env, models)[0],
                            info.bytes_per_point, row, gathered)
                    mem, extras, partial, page_rows = reads[gm.name, cs, row]
                    if d.placement == "at":  # re-reads come from this storage while it is live
                        # and stay in the cache with it: a line buffer folded to a few rows
                        # and re-read row after row is loads, not traffic, as a tile is
                        # (read_traffic sees the consumer's loops, not the folded storage).
                        # Not so for gathers: each lane fetches a line of its own, a 16th of it
                        # used (iir_blur's output read down the columns of a 327 KB strip, a
                        # line from L2 per lane: 0.5 ns a lane, against 0.14 from L1)
                        extras = [] if in_cache and not gathered else \
                            [(min(t, level, key=TIERS.index), b) for t, b in extras]
                    rsp = gm.speedup(cs)
                    feats[level] += mem / (rsp if in_cache else min(rsp, 2.0))
                    if partial and level in FAR_TIERS:
                        feats["bytes_partial_rows"] += mem / min(rsp, 2.0)
                    self._charge_rereads(feats, extras, gm, cs, rsp, page_rows)
        if d.placement == "at" and not registers:
            stored = realizations if slide is None else \
                models[d.consumer].realizations * math.prod(lp.trip for lp in loops[: d.store + 1])
            feats["allocs"] += stored / max(1.0, inherited)
        # the consumers' loads of this Func's storage
        for gm, s, _, loads, stride in contexts if not registers else ():
            sm = gm.stages[s]
            evals = loads * sm.points * gm.realizations * gm.warm
            if stride != GATHER:  # unrolled lanes share no gathered value
                if ("reuse", gm.name, s) not in reads:
                    reads["reuse", gm.name, s] = self.unroll_reuse(
                        gm, s, lambda env, g=gm.name, s=s: self.demand(name, g, s, env, models)[0])
                evals *= reads["reuse", gm.name, s]
            _charge_loads(feats, evals, stride, self.lanes(gm.name, sm.vector), gm.speedup(s))
        computed = sum(sm.points for sm in fm.stages[:1]) * realizations * warm
        fm.recompute = computed / max(1, math.prod(e for _, e in total))
        return fm

    def _accumulator_sweeps(self, info: FuncInfo, st: StageInfo, loops: list, vector: int, work: float,
                            sp: float, feats: dict) -> None:
        """An update whose reduction loops are outside pure loops sweeps the region those loops
        cover once per step of the reduction, reading and writing each accumulator: from the
        cache that holds the region (a 7x7 box sum over a strip of 64 rows of a 1438-wide image,
        its 368 KB of partial sums walked 49 times from L2, ran 1.9x slower than in 64x6 tiles,
        whose partial sums stay in L1; the model had charged both as L1 loads and stores). Half
        the region's bytes a step: what 1089's strip measured over its tiles (1.0 ms), and the
        best ranking of the measured random pipelines (0.25 to 2 times the bytes tried)."""
        rvars = [k for k, lp in enumerate(loops) if lp.kind == "rvar"]
        if not st.rvars or not rvars or rvars[-1] == len(loops) - 1:
            return
        swept = math.prod(lp.trip for lp in loops[rvars[-1] + 1:]) * max(1, vector) * info.bytes_per_point
        tier = _tier(swept, self.hw)
        if tier != "bytes_l1":
            feats[tier] += work * info.bytes_per_point / 2 / sp

    def register_vectors(self, info: FuncInfo, d: Decision, storage: list, contexts: list, models: dict) -> float:
        """The vector registers a Func computed inside its consumer's loops lives in, or 0 where
        it lives in memory. It lives in registers where it is a few vectors, computed by
        unrolled code and read by unrolled code (its own loops and the consumer's loops inside
        the compute site all unrolled or of one iteration), so that every index is a constant and
        LLVM promotes the small stack array to registers; storing, loading and allocating it
        then cost nothing (blur's columns of blur_x per block of output rows, as Adams2019
        schedules it: 1.4x faster than a line buffer). Reads at x / 2 or 2x do not qualify
        (Access.unit: camera_pipe's Bayer planes so modelled in a block of unrolled rows ran 3.2x
        slower than in memory), and the Funcs in registers inside one root Func's loops share
        the register file (register_budget): beyond it they would spill."""
        if d.placement != "at" or d.store is not None or len(info.stages) > 1 or len(contexts) != 1:
            return 0.0
        gm, cs, _, _, stride = contexts[0]
        if gm.name != d.consumer or cs != d.stage or stride == GATHER:
            return 0.0
        if not all(lp.trip == 1 or lp.unrolled for lp in gm.stages[cs].loops[d.level + 1:]) or \
                not self.reads_unit(info.name, gm.name, cs, models):
            return 0.0
        extents = {v: ext for v, (_, ext) in zip(info.dims, storage)}
        loops, vector = stage_loops(info, info.stages[0], d, extents, [], self.hw.cores)
        if not all(lp.trip == 1 or lp.unrolled for lp in loops) or not (vector or extents[info.dims[0]] == 1):
            return 0.0
        vectors = math.prod(extents.values()) / max(1, self.lanes(info.name, d.vector))
        root = gm.root(models)
        taken = sum(m.register_vectors for n, m in models.items()
                    if n != info.name and m.register_vectors and m.root(models) == root)
        return vectors if taken + vectors <= register_budget(self.hw) else 0.0

    def _partial_results(self, info: FuncInfo, bands: int, extents: dict, realizations: float,
                         feats: dict) -> None:
        """An rfactored update's partial results: one per band, initialised, then combined into
        the Func's region, both vectorized along dimension 0, serially."""
        cells = math.prod(extents.values()) * bands * realizations
        lanes = self.lanes(info.name, natural_vector(info, self.hw))
        feats["stores"] += 2 * cells / lanes
        feats["loads"] += 2 * cells / lanes
        feats["ops"] += cells / lanes
        feats["bytes_l1"] += 2 * cells * info.bytes_per_point
        feats["allocs"] += realizations
        feats["stages"] += 2 * realizations

    def _reading(self, name: str, models: dict) -> tuple:
        """(contexts, a cache of what the consumers' loops read, the models kept alive so their
        ids stay theirs): for
        each consumer stage reading `name` (through inlined Funcs), its model, the stage, the box
        over all its realizations, the loads per point and their stride."""
        if len(self._contexts) > 50_000:
            self._contexts.clear()
        contexts = []
        for g, stages in self.effective_consumers(name, models).items():
            gm = models[g]
            for s in stages:
                if s is None:
                    continue
                env = self.stage_env(gm, s, None, total=True)
                box, loads, stride = self.demand(name, g, s, env, models)
                contexts.append((gm, s, box, loads, stride))
        return contexts, {}, [models.get(g) for g in self.consumers[name]]

    def _context(self, name: str, models: dict) -> tuple:
        """What `name`'s consumers read (see _reading), shared by every decision tried for
        `name` against the same downstream models."""
        key = (name, tuple(id(models.get(g)) for g in self.consumers[name]))
        ctx = self._contexts.get(key)
        if ctx is None:
            ctx = self._contexts[key] = self._reading(name, models)
        return ctx

    def site_region(self, name: str, consumer: str, stage: int, level: int, models: dict) -> list:
        """The region of `name` needed in one iteration of loop `level` of the consumer's stage
        (the same for every tiling of `name`: worked out once per site)."""
        reads = self._context(name, models)[1]
        key = ("region", consumer, stage, level)
        hit = reads.get(key)
        if hit is None:
            env = self.stage_env(models[consumer], stage, level)
            hit = reads[key] = self._region_at(name, consumer, stage, env, models)
        return hit

    def _region_at(self, name: str, consumer: str, stage: int, env: dict, models: dict) -> list:
        """The region of `name` needed in one iteration of the consumer's loop that env describes."""
        return self._fill(name, self._needed(name, consumer, stage, env, models))

    def _needed(self, name: str, site: str, stage: int, env: dict, models: dict, depth: int = 0):
        """The box of `name` its consumers read inside one iteration of a loop of `site`'s stage
        (env): what `site` reads directly, and what consumers computed inside that loop read
        over the regions they compute there."""
        box = None
        for c, stages in self.effective_consumers(name, models).items():
            if c == site:
                b, _, _ = self.demand(name, c, stage, env, models)
            elif depth < 32 and models.get(c) is not None:
                c_box = self._fill(c, self._needed(c, site, stage, env, models, depth + 1))
                b = None
                for cs in stages:
                    if cs is None:
                        continue
                    c_env = self.stage_env(models[c], cs, None)
                    for v, (mn, ext) in zip(self.a.funcs[c].dims, c_box):
                        c_env[lo_name(v)], c_env[hi_name(v)] = mn, mn + ext - 1
                    b = _union(b, self.demand(name, c, cs, c_env, models)[0])
            else:
                continue
            box = _union(box, b)
        return box

    def sliding(self, name: str, d: Decision, models: dict):
        """Whether `name`, stored at loop d.store of its consumer and computed at loop d.level,
        slides along the outermost loop between them (serial, one pure dimension, and the region
        it needs moves forward in one of its dimensions only, overlapping the last): (dimension,
        step, window extent, storage region folded to the window) or None."""
        reads = self._context(name, models)[1]
        key = ("slide", d.consumer, d.stage, d.level, d.store, d.vector, d.tile)
        if key not in reads:
            reads[key] = self._sliding(name, d, models)
        return reads[key]

    def _sliding(self, name: str, d: Decision, models: dict):
        info = self.a.funcs[name]
        gm = models[d.consumer]
        loops = gm.stages[d.stage].loops
        between = loops[d.store + 1: d.level + 1]
        if len(info.stages) > 1 or not between or \
                any(lp.parallel or lp.unrolled or lp.kind not in ("inner", "outer") for lp in between):
            return None
        here = self.site_region(name, d.consumer, d.stage, d.level, models)
        env = self.stage_env(gm, d.stage, d.level)
        lp = between[0]
        for v in lp.dims:
            shift = self.loop_step(gm, d.stage, lp, v)
            env[lo_name(v)] += shift
            env[hi_name(v)] += shift
        there = self._region_at(name, d.consumer, d.stage, env, models)
        moved = [k for k, (a, b) in enumerate(zip(here, there)) if a != b]
        if len(moved) != 1:
            return None
        k = moved[0]
        step, window = there[k][0] - here[k][0], here[k][1]
        if there[k][1] != window or not 0 < step < window:
            return None
        # the compiler slides only along a dimension that no split shifting inwards computes past
        # the region (lowering/sliding_window): not along a tiled one, and along the vectorized one
        # only where every window holds a vector (each step then computes a whole vector, which
        # this model does not count: such options are not proposed)
        tile = dict(zip(info.dims, d.tile)) if d.tile else {}
        if (k == 0 and d.vector > 1 and window >= d.vector) or 0 < tile.get(info.dims[k], 0) < window:
            return None
        storage = self.site_region(name, d.consumer, d.stage, d.store, models)
        fold = 1 << (window - 1).bit_length()
        storage = [(mn, min(ext, fold)) if j == k else (mn, ext) for j, (mn, ext) in enumerate(storage)]
        return k, step, window, storage

    def lanes(self, name: str, vector: int) -> int:
        """Points per vector instruction: a vector wider than the machine's registers is several
        instructions, so it saves nothing per point over the natural width."""
        return max(1, min(vector, natural_vector(self.a.funcs[name], self.hw)))

    def streams_behind_fmas(self, fm: FuncModel, s: int, tier: str) -> bool:
        """Whether stage s of fm re-reads a producer from a cache while it keeps its
        accumulators in registers: each vector loaded then feeds a row of the register tile,
        and the loads hide behind the multiply-adds (gemm's panels of B, re-read for every tile
        of C from L2, and all of A re-read from L3 for each column of tiles, at the machine's
        peak; conv_layer's filter, from L3 for each block of pixels), so the re-reads cost no
        time of their own."""
        return tier != "bytes_mem" and self._register_tiled_stage(fm, s)

    def _register_tiled_stage(self, fm: FuncModel, s: int) -> bool:
        sm = fm.stages[s]
        return self._register_tiled(self.a.funcs[fm.name].stages[s], sm.loops, sm.vector, fm.decision)

    def _register_tiled(self, st: StageInfo, loops: list, vector: int, d: Decision) -> bool:
        """An update whose reduction loops are outside a fully unrolled inner tile keeps its
        accumulators in registers (as many registers as register_budget allows), when the tile is
        its whole realization: a realization of several tiles is an array in memory (measured:
        gemm's 64x6 tiles of a 64x64 block of partial sums ran 1.6x slower than 64x6 blocks),
        whose partial sums are loaded and stored at every step of the reduction."""
        if not (st.rvars and d.rvars_outside and d.unroll and vector):
            return False
        rvars = [k for k, lp in enumerate(loops) if lp.kind == "rvar"]
        if not rvars:
            return False
        tile = loops[rvars[-1] + 1:]  # the accumulators: the loops inside the reduction
        # (a vector twice the machine's width is two registers)
        accumulators = math.prod(lp.trip for lp in tile) * vector // self.lanes(st.func, vector)
        pure_outside = any(lp.trip > 1 and lp.kind != "band" for lp in loops[:rvars[0]])
        return (bool(tile) and all(lp.kind == "inner" for lp in tile) and accumulators <= register_budget(self.hw)
                and not pure_outside)

    def unroll_reuse(self, fm: FuncModel, s: int, box_of) -> float:
        """The fraction of a stage's loads of one producer left once its unrolled loops share the
        values they all read (a row read by three rows of a stencil is loaded once per unrolled
        block, not three times): the rows of the box one unrolled block reads over those of
        each iteration. box_of(env) is the producer's box over a loop env."""
        sm = fm.stages[s]
        unrolled = [lp for lp in sm.loops if lp.unrolled and lp.trip > 1]
        if not unrolled:
            return 1.0
        point = self.stage_env(fm, s, len(sm.loops) - 1)

        def spread(loops) -> dict:
            env = dict(point)
            for lp in loops:
                for v in lp.dims:
                    env[hi_name(v)] = env[lo_name(v)] + lp.trip * self.loop_step(fm, s, lp, v) - 1
            return env

        def rows(box) -> int:
            return math.prod(hi - lo + 1 for lo, hi in box[1:])

        n = math.prod(lp.trip for lp in unrolled)
        p, b = box_of(point), box_of(spread(unrolled))
        if p is None or b is None or any(x is None for x in (*p, *b)):
            return 1.0
        if not p:
            return 1.0 / n
        if s not in fm.block_vectors:
            fm.block_vectors[s] = sum(_block_vectors(_eval_box(acc.box, point), _eval_box(acc.box, spread(unrolled)))
                                      for acc in self.a.funcs[fm.name].stages[s].accesses
                                      if not acc.in_bounds_of_rdom and not acc.data_dependent)
        if fm.block_vectors[s] > register_budget(self.hw):
            # what the block's iterations share of everything it reads does not stay in
            # registers: reloaded (harris's output in blocks of 8 or 16 unrolled rows, reading
            # three 3x3 box sums: 1.27x slower than in strips, where the model had credited the
            # shared rows of each sum as if the others took no registers)
            return 1.0
        rows_p = rows(p)
        for lp in unrolled:
            along = box_of(spread([lp]))
            if along is not None and rows_p < rows(along) < rows_p + lp.trip - 1:
                # the rows move less than one per iteration of lp (y / 2): neighbouring ones
                # read a row that only a variable's parity makes the same, loaded again
                return 1.0
        return min(1.0, _block_vectors(p, b) / max(1, n * rows_p))

    def read_traffic(self, fm: FuncModel, s: int, box_of, elem: int,
                     row: int | None = None, gathered: bool = False) -> tuple[float, list, bool, bool]:
        """(bytes from memory, [(cache tier, bytes re-read from it)], whether the bytes are
        walked in pieces of rows, whether those rows are a page apart or more) that the
        realizations of stage s of fm read of one producer; box_of(env) is the producer's box
        over a loop env. What one realization reads
        that fits in the cache comes from memory once, and what the realizations inside one
        iteration of each loop around their compute site read again comes from the cache that
        held what each of those read (a tile's apron, from the tile's; gemm's panel of B, re-read
        by the next row of tiles after all of B went by: from L3, not from the L2 one tile's
        panel fits in). What one realization reads that does not fit is fetched again by each
        iteration of the outermost loop whose iteration does fit (per-loop footprints, as a
        cache sees them). row: the producer storage's width, where known (boxes as wide are
        contiguous). gathered: the reads are gathers, a line per lane, so what the stage's own
        loops re-read inside one realization is traffic from the cache that holds it too, not
        only loads (dense re-reads of lines just used are)."""
        # A re-read window stays in L2 up to 3/4 of it: max_filter's 53 rows of 10.4 KB (553 KB
        # of a 1 MB L2) were charged to L3 at half of it, which hid the sliding window's gain
        # (auto schedule 60.5 -> 29.4 ms; the other apps' picks the same or within noise)
        cap = self.hw.l2 * 3 // 4
        n = fm.realizations * fm.warm
        per = _line_bytes(box_of(self.stage_env(fm, s, None)), elem, row)
        unique_of_all = _line_bytes(box_of(self.stage_env(fm, s, None, total=True)), elem, row)
        if per <= cap:
            total = per * n
            unique = min(unique_of_all or total, total)
            extras, footprint, units = [], per, n
            for region, count in zip(fm.enclosing, fm.enclosing_trips):
                outer = _line_bytes(box_of(self._region_env(fm, s, region)), elem, row)
                units /= max(1, count)
                extras.append((_tier(footprint, self.hw), max(0.0, units * (count * footprint - outer))))
                footprint = outer
            extras.append((_tier(footprint, self.hw), max(0.0, units * footprint - unique)))
            first_inner, iters, footprint = 0, 1, per
        else:
            iters, footprint, first_inner = 1, per, len(fm.stages[s].loops)
            for k, lp in enumerate(fm.stages[s].loops):
                iters *= lp.trip
                footprint = _line_bytes(box_of(self.stage_env(fm, s, k)), elem, row)
                if footprint <= cap:
                    first_inner = k + 1
                    break
            total = iters * footprint * n
            unique = min(total, unique_of_all or total)
            extras = [(_tier(per, self.hw), total - unique)]
        if gathered:
            # inside one iteration of the loop found above, each loop in it re-reads what its
            # iterations share from the cache that holds one iteration's lines
            units = iters * n if first_inner else n
            for k in range(first_inner, len(fm.stages[s].loops)):
                trip = fm.stages[s].loops[k].trip
                inner = _line_bytes(box_of(self.stage_env(fm, s, k)), elem, row)
                if trip > 1:
                    extras.append((_tier(inner, self.hw), max(0.0, units * (trip * inner - footprint))))
                units, footprint = units * trip, inner
        partial = self.walks_partial_rows(fm, s, box_of, row)
        return unique, extras, partial, partial and row is not None and row * elem >= PAGE

    def _charge_rereads(self, feats: dict, extras: list, reader: FuncModel, s: int, sp: float,
                        page_rows: bool) -> None:
        """Re-read bytes by cache tier (read_traffic). None from L1 (what neighbouring small
        blocks share: hits, whose load instructions are counted as loads), nor where a register
        tile's multiply-adds hide them (streams_behind_fmas), unless they are pieces of rows a
        page apart or more (page_rows: each load another page, which neither the TLB nor the
        prefetchers keep up with; from L3 or memory, charged as pieces of rows too)."""
        for tier, b in extras:
            if tier == "bytes_l1" or (self.streams_behind_fmas(reader, s, tier) and not page_rows):
                continue
            feats[tier] += b / sp
            if page_rows and tier in FAR_TIERS:
                feats["bytes_partial_rows"] += b / sp

    def _region_env(self, fm: FuncModel, s: int, region: list) -> dict:
        """stage_env of stage s of fm over a region of its Func (its whole reduction domain)."""
        env = self.stage_env(fm, s, None)
        for v, (mn, ext) in zip(self.a.funcs[fm.name].dims, region):
            env[lo_name(v)], env[hi_name(v)] = mn, mn + ext - 1
        return env

    def walks_partial_rows(self, fm: FuncModel, s: int, box_of, row: int | None) -> bool:
        """Whether stage s of fm walks an array (box_of: its box over a loop env; row: its rows'
        width) a piece of each row at a time: at a loop whose iteration spans more rows than the
        innermost iteration, the box is narrower than the array (tiles, strips), and taller than
        the prefetchers follow at once (STREAMED_ROWS). The L3 cache and memory stream whole rows
        best: a copy of a 2560x1536 float image ran 1.7-1.9x slower in 64x64 tiles or 512-wide
        column strips than row by row, but as fast in 16x8 tiles (benchmarks.unit_costs).
        Past fm's own loops, the consumer's loops around its compute site move its realizations
        on: a line buffer computed per row of a tile reads the tile's width of each row."""
        if row is None:
            return False

        def extents():  # innermost first, made as the walk gets to them
            for k in range(len(fm.stages[s].loops) - 1, -2, -1):
                yield _box_extents(box_of(self.stage_env(fm, s, k if k >= 0 else None)))
            for region in fm.enclosing:
                yield _box_extents(box_of(self._region_env(fm, s, region)))

        return _walks_partial_rows(extents(), row)

    def _own_extents(self, fm: FuncModel, s: int):
        """The extents of stage s of fm's own region inside one iteration of each of its loops,
        innermost first, then over each region of `enclosing` (stage_env's boxes over fm's own
        dimensions, without building the environments)."""
        dims = self.a.funcs[fm.name].dims
        loops = fm.stages[s].loops
        for k in range(len(loops) - 1, -2, -1):
            ext = {v: e for v, (_, e) in zip(dims, fm.region)}
            for lp in loops[: k + 1]:
                for v in lp.dims:
                    ext[v] = self.loop_step(fm, s, lp, v)
            yield [ext[v] for v in dims]
        for region in fm.enclosing:
            yield [e for _, e in region]

    def _input_loads(self, info, st, work, lanes, sp, feats, ctx_stride=1.0, fm: FuncModel | None = None,
                     reader=None):
        """Loads of inputs (Buffers, ImageParams) by a stage, and the input bytes they bring in
        (`read_traffic`; reader: the Func model and stage whose loops the reads happen in, and
        the region of this stage's Func read over a loop env of theirs, None where they are
        this stage's own loops)."""
        for acc in st.accesses:
            if not acc.is_input or acc.in_bounds_of_rdom:
                continue
            n = work * acc.count
            if fm is not None:
                n *= self.unroll_reuse(fm, st.index, lambda env, box=acc.box: _eval_box(box, env))
            elem = self.a.input_bytes.get(acc.producer, 4)
            _charge_loads(feats, n, acc.stride * ctx_stride, lanes, sp, NARROW_INPUT_GATHER if elem < 4 else 1.0)
            shape = self.a.input_shapes.get(acc.producer)
            if reader is not None:
                rm, rs, region_of = reader
                if region_of is None:  # read in the stage's own loops: their env is the stage's
                    def box_of(env, acc=acc):
                        box = _eval_access(acc, env)
                        return box if box is not None and all(b is not None for b in box) else None
                else:
                    def box_of(env, acc=acc, r=region_of):
                        region, box = r(env), None
                        for part in parts_of(region):  # each path's reads of this Func: their own input boxes
                            b = self._input_box(info, st, acc, part)
                            if b is None:
                                return None
                            box = _union(box, b)
                        return box
                mem, extras, partial, page_rows = self.read_traffic(rm, rs, box_of, elem,
                                                                    shape[0][1] if shape else None)
            if reader is not None and mem:
                feats["bytes_mem"] += mem / min(sp, 2.0)
                if partial:
                    feats["bytes_partial_rows"] += mem / min(sp, 2.0)
                self._charge_rereads(feats, extras, reader[0], reader[1], sp, page_rows)
            elif shape:
                feats["bytes_mem"] += math.prod(e for _, e in shape) * elem / min(sp, 2.0)

    def _input_box(self, info, st, acc, region):
        """The box of an input one stage reads over a region of its Func ((lo, hi) per dimension)."""
        if region is None or any(b is None for b in region):
            return None
        env = dict(self.a.env)
        for v, (lo, hi) in zip(info.dims, region):
            env[lo_name(v)], env[hi_name(v)] = lo, hi
        for name, mnf, ext in st.rvars:
            lo = mnf(self.a.env)
            env[lo_name(name)], env[hi_name(name)] = lo, lo + max(1, int(ext(self.a.env))) - 1
        box = _eval_access(acc, env)
        return box if box is not None and all(b is not None for b in box) else None


CACHE_LINE = 64
# Rows this many bytes apart or more are each on a page of their own: read a piece of each row at
# a time, every load is another page (gemm's tiles walking B's 4 KB rows down k, row after row of
# tiles, ran 1.7x slower than the same tiles walked down columns over a packed panel)
PAGE = 4096
# Rows the prefetchers stream at once as fast as one: a copy of a 2560x1536 image (float32 and
# uint16) in 16x2 to 32x8 tiles, rows of tiles walked along, ran at its row-by-row time, 16x10
# tiles 1.0-1.15x it, 16x12 1.15-1.2x, 16x16 1.3-1.5x, 64x64 1.6-1.9x (one thread, AVX2 Zen 3)
STREAMED_ROWS = 10


TIERS = ("bytes_l1", "bytes_cache", "bytes_l3", "bytes_mem")  # fastest first
FAR_TIERS = ("bytes_l3", "bytes_mem")


def inner_loop_index(loops: list, dim: str) -> int:
    """The index of the inner loop over `dim` (the vectorized one, for dimension 0)."""
    return next(k for k, lp in enumerate(loops) if lp.kind == "inner" and lp.dims == (dim,))


def _gathers(stride: float, lanes: int) -> bool:
    """Vector lanes each loading at an address of its own: more than 4 elements apart, or at
    data-dependent ones (scalar code loads any element with one load)."""
    return lanes > 1 and (stride == GATHER or stride > 4)


def _tier(nbytes: float, hw: Hardware) -> str:
    """The feature for traffic over storage (or a working set) of this size."""
    if nbytes <= hw.l1 * 3 // 4:
        return "bytes_l1"
    if nbytes <= hw.l2 // 2:
        return "bytes_cache"
    if nbytes <= hw.l3_share() // 2:
        return "bytes_l3"
    return "bytes_mem"


def _block_vectors(point, block) -> int:
    """Vectors an unrolled block loads of one box: its rows, times its width in vectors of one
    iteration's width (point: the box of one iteration; 0 where either is unbounded)."""
    if not point or not block or any(x is None for x in (*point, *block)):
        return 0
    rows = math.prod(hi - lo + 1 for lo, hi in block[1:])
    return rows * -(-(block[0][1] - block[0][0] + 1) // (point[0][1] - point[0][0] + 1))


def _box_extents(box) -> list | None:
    """A box's extent per dimension (None where it is unbounded)."""
    if box is None or any(b is None for b in box):
        return None
    return [hi - lo + 1 for lo, hi in box]


def _walks_partial_rows(extents, row: int) -> bool:
    """Model.walks_partial_rows over the boxes' extents, innermost loop first."""
    innermost = None
    for ext in extents:
        if ext is None or len(ext) < 2:
            return False
        rows = math.prod(ext[1:])
        if innermost is None:
            innermost = rows  # the rows one iteration reads (a stencil's several)
        elif rows > innermost:  # a loop that moves on to other rows
            if ext[0] >= row:
                return False
            if rows > STREAMED_ROWS:
                return True
            # a few rows a piece at a time, the loops outside walking along them: as fast as
            # whole rows (the prefetchers follow each row); what moves on past them decides
    return False


def _line_bytes(box, elem: int, row: int | None = None) -> float:
    """Bytes of the cache lines a box of a row-major array touches: a row's span rounded to
    whole lines, and one line more where it straddles a boundary; a box as wide as the array's
    rows (`row`, where known) is one contiguous span."""
    if box is None or any(b is None for b in box):
        return 0.0
    if not box:  # a single value
        return float(CACHE_LINE)
    parts = parts_of(box)
    if len(parts) > 1:  # the lines of the parts (counting overlaps twice), where fewer than the box's
        return min(_line_bytes(list(box), elem, row), sum(_line_bytes(list(p), elem, row) for p in parts))
    width = (box[0][1] - box[0][0] + 1) * elem
    if row is not None and box[0][1] - box[0][0] + 1 >= row:
        span = width * math.prod(max(1, hi - lo + 1) for lo, hi in box[1:])
        return (-(-span // CACHE_LINE) + 1) * CACHE_LINE
    # a row's span starts anywhere an element can: on average it crosses (width - elem) / 64
    # line boundaries (a column one element wide is one line a row, never two)
    lines = (width - elem) / CACHE_LINE + 1
    return math.prod(max(1, hi - lo + 1) for lo, hi in box[1:]) * lines * CACHE_LINE


def _charge_loads(feats: dict, n: float, stride: float, lanes: int, sp: float, gather_cost: float = 1.0) -> None:
    """n element loads, `lanes` to a vector: dense or strided vector loads, or gathers (scalar
    code loads any element with one load), each costing gather_cost gathers."""
    if _gathers(stride, lanes):
        feats["gathers"] += n * gather_cost / sp
    else:
        feats["loads"] += n * max(1.0, stride if lanes > 1 else 1.0) / lanes / sp


def _eval_box(box, env):
    if box is None:
        return None
    out = []
    for b in box:
        if b is None:
            out.append(None)
            continue
        try:
            out.append((b[0](env), b[1](env)))
        except (KeyError, ZeroDivisionError, TypeError, ValueError, OverflowError):
            out.append(None)
    return out


def _eval_access(acc, env):
    """The box an access reads over env, with its groups' boxes as parts where it has several."""
    box = _eval_box(acc.box, env)
    if not acc.parts or box is None or any(b is None for b in box):
        return box
    parts = [_eval_box(p, env) for p in acc.parts]
    if any(b is None for p in parts for b in p):
        return box
    return Box(box, parts)


class Box(list):
    """A bounding box ((lo, hi) per dimension) that remembers the boxes it bounds: reads of one
    producer by several paths (a `2y + 1` subsample beside a direct read) can lie far apart,
    and the cache lines they touch are those of the parts, not of all that lies between."""

    parts: list

    def __init__(self, bounds, parts):
        super().__init__(bounds)
        self.parts = parts


def parts_of(box) -> list:
    return getattr(box, "parts", None) or [box]


def _union(a, b):
    if a is None:
        return b
    if b is None:
        return a
    out = []
    for x, y in zip(a, b):
        if x is None or y is None:
            out.append(None)
        else:
            out.append((min(x[0], y[0]), max(x[1], y[1])))
    return Box(out, parts_of(a) + parts_of(b))


def _union_regions(a, b):
    if a is None:
        return b
    out = []
    for (m1, e1), (m2, e2) in zip(a, b):
        lo, hi = min(m1, m2), max(m1 + e1, m2 + e2)
        out.append((lo, hi - lo))
    return out
