"""The search space: the legal decisions for one Func, given the decisions of its consumers.

Placement follows Halide's rule: a Func may be computed inside a loop whose one iteration holds
every use of it (by its consumers, looking through inlined Funcs, or by Funcs computed inside
that loop); it may be inlined if it is a single pure definition and not an output. Stored at an
outer loop of the same nest, it slides where the loops between allow.
Tiles come from a bounded ladder, so every Func has a bounded number of options and no pipeline
can stall the search. The fine pass keeps each Func's placement from the coarse pass and looks at
the tile sizes and vector widths around the coarse choice.
"""

from __future__ import annotations

import math
from dataclasses import replace

from pyhalide import ir
from pyhalide.extern import extern_call, is_extern
from pyhalide.lowering.legality import prove_associativity, update_is_associative

from .loop_nest import INLINE, SMALL_DIM, Decision, Hardware, Model, inner_loop_index, natural_vector, register_budget

COARSE_TILES = (16, 64, 256)
MAX_INLINE_RECOMPUTE = 9.0
MAX_UNROLLED = 16  # iterations an unrolled block may have (code size, registers)


class Space:
    def __init__(self, model: Model, hw: Hardware, fixed: dict):
        self.model = model
        self.a = model.a
        self.hw = hw
        self.fixed = fixed  # name -> Decision the search must keep (hand-scheduled Funcs)
        self.around: dict[str, Decision] | None = None  # the coarse pass's choices, for the fine pass
        # Inlining a stencil into a stencil multiplies the work of everything it reads; beyond this
        # many evaluations per point the search does not consider it (the cost model would see the
        # cost only once the producers are decided, after the beam has committed).
        self.max_inline_recompute = MAX_INLINE_RECOMPUTE
        # extern stages (pyhalide/extern.py) and the Funcs they read are computed, never inlined
        self.extern_stages = {name for name, info in self.a.funcs.items() if is_extern(info.func)}
        self.extern_inputs = {self.a.name_of(a.name) for name in self.extern_stages
                              for _, a in extern_call(self.a.funcs[name].func).func_inputs()}
        self.panel_reuse = {name: self._panel_reuse(name) for name in self.a.funcs}
        self.rfactor_bands = {name: self._rfactor_bands(name) for name in self.a.funcs}

    def can_inline(self, name: str) -> bool:
        info = self.a.funcs[name]
        if info.is_output or len(info.stages) > 1 or name in self.extern_stages or name in self.extern_inputs:
            return False
        return all(None not in stages for stages in info.consumers.values())

    def options(self, name: str, models: dict) -> list[Decision]:
        if name in self.fixed:
            return [self.fixed[name]]
        if name in self.extern_stages:  # (its C function computes it whole: no loops to schedule)
            return [Decision("root")]
        info = self.a.funcs[name]
        out: list[Decision] = []
        if self.can_inline(name) and \
                self.model.evaluate(name, INLINE, models).recompute <= self.max_inline_recompute:
            out.append(INLINE)
        # root: the region it must cover is that over all its consumers' realizations
        probe = self.model.evaluate(name, Decision("root"), models)
        extents = [ext for _, ext in probe.total]
        out += self._loop_options("root", None, 0, -1, info, extents)
        if not info.is_output:
            for c, cs, level in self.sites(name, models):
                base = Decision("at", c, cs, level)
                region = self.model.evaluate(name, base, models).region
                here = self._loop_options("at", c, cs, level, info, [ext for _, ext in region])
                out += here
                for store in range(level - 1, -1, -1):
                    out += self._sliding_options(name, here, store, models)
        if self.around is not None and name in self.around:
            out = self._near(self.around[name], out, info, extents)
        return out

    def simple_options(self, name: str, models: dict) -> list[Decision]:
        """The hand-scheduled decision, or root untiled (vectorized, its outer loop parallel)
        and inline where allowed: a quick bound on what a Func will cost."""
        if name in self.fixed:
            return [self.fixed[name]]
        if name in self.extern_stages:
            return [Decision("root")]
        out = [Decision("root", vector=natural_vector(self.a.funcs[name], self.hw), parallel=1)]
        if self.can_inline(name):
            out.append(INLINE)
        return out

    def sites(self, name: str, models: dict) -> list[tuple]:
        """The loops (Func, stage, level) `name` may be computed in: those whose one iteration
        contains every use of it, by its consumers (through inlined ones) or by Funcs computed
        inside them (Halide's rule: all uses inside the loop)."""
        consumers = self.model.effective_consumers(name, models)
        common = None
        for c, stages in consumers.items():
            if None in stages:  # read by RDom bounds, outside every loop
                return []
            chain = []
            m = models[c]
            if len(stages) == 1 and not (m.decision.rfactor and next(iter(stages)) > 0):
                # (an rfactored update's loops move into its partial results' Func)
                s = next(iter(stages))
                chain += [(c, s, level) for level in range(self._levels_outside_lanes(m, s))]
            d = m.decision
            while d.placement == "at":
                chain += [(d.consumer, d.stage, level) for level in range(d.level + 1)]
                d = models[d.consumer].decision
            in_chain = set(chain)
            common = chain if common is None else [site for site in common if site in in_chain]
        # never inside a hand-scheduled Func's loops: the model does not know their names
        return [site for site in common or [] if site[0] not in self.fixed and not self._rounds_up(site, models)]

    def _levels_outside_lanes(self, m, s: int) -> int:
        """How many of stage s's loops, outermost first, a Func may be computed in: down to its
        vectorized loop (an iteration of which is one vector), not the loops inside it (the
        channels a pixel-major stage unrolls under each vector), where the vector's lanes would
        run one at a time, each computing the whole region: random pipeline 1088's pick ran 8.5x
        slower than the best schedule measured, a 64-lane loop made serial around a reduction."""
        sm = m.stages[s]
        return inner_loop_index(sm.loops, self.a.funcs[m.name].dims[0]) + 1 if sm.vector else len(sm.loops)

    def _rounds_up(self, site: tuple, models: dict) -> bool:
        """Whether a loop of an update stage is inside a tile that does not divide its extent:
        the update's tail rounds up (guarded where it must), but what is computed at such a
        loop is sized for the whole tile, past the region, and may read past an input."""
        c, cs, level = site
        m = models[c]
        if cs == 0 or not m.decision.tile:
            return False
        info = self.a.funcs[c]
        extents = dict(zip(info.dims, (ext for _, ext in m.region)))
        tile = dict(zip(info.dims, m.decision.tile))
        return any(lp.kind == "outer" and extents[lp.dims[0]] % tile[lp.dims[0]]
                   for lp in m.stages[cs].loops[: level + 1])

    def _sliding_options(self, name: str, here: list, store: int, models: dict) -> list[Decision]:
        """The options computed at a loop, stored instead at the consumer's outer loop `store`,
        of those that then slide (each iteration computes only what the last did not)."""
        stored = [replace(o, store=store) for o in here]
        return [o for o in stored if self.model.sliding(name, o, models) is not None]

    def _loop_options(self, placement, consumer, stage, level, info, extents) -> list[Decision]:
        v = natural_vector(info, self.hw)
        vector = v if extents and extents[0] >= v else 0
        has_reduction = any(st.rvars and st.pure_dims for st in info.stages[1:])
        tiles = [()]
        if placement == "root" and extents:
            t0s = [0] + [t for t in COARSE_TILES if t < extents[0] and (not vector or t % vector == 0)]
            t1s = [0] + [t for t in (4, 16, 64) if len(extents) > 1 and t < extents[1]]
            tiles = [(a, b, *([0] * (len(extents) - 2))) if len(extents) > 1 else (a,) for a in t0s for b in t1s]
            tiles = [t if any(t) else () for t in tiles]
            # Dimensions past the first two stay inside a tile (a small channel dimension, read
            # together), or go outside it, one coordinate per tile (Halide's tile(x, y) leaves z
            # and w outside: a convolution's blocks of channels by pixels, one row at a time).
            rest = [1 if e > 1 else 0 for e in extents[2:]]
            if any(rest):
                tiles += [(*t[:2], *rest) for t in tiles if t]
        out = []
        columns = (False, True) if placement == "root" and self.panel_reuse[info.name] else (False,)
        for tile in tiles:
            for rv_out, unroll in ((False, False), (True, False)) if has_reduction else ((False, False),):
                for col in columns if len(tile) > 1 and tile[0] and tile[1] else (False,):
                    par = self._parallel(placement, extents, tile, info, col)
                    out.append(Decision(placement, consumer, stage, level, tile, vector, par, rv_out, unroll,
                                        columns=col))
        if placement == "root" and any(st.scatter for st in info.stages):
            out.append(Decision(placement, consumer, stage, level, (), vector, 1, pixel_major=True))
        elif vector and len(info.stages) == 1 and any(1 < e <= SMALL_DIM for e in extents[2:]):
            # a pure Func's channels innermost under each vector of pixels
            out += [replace(o, pixel_major=True) for o in out if not o.unroll]
        if has_reduction and vector and len(extents) > 1:
            out += self._register_tiles(placement, consumer, stage, level, info, extents, vector)
        elif vector and len(extents) > 1:
            out += self._unrolled_blocks(placement, consumer, stage, level, info, extents, vector)
        reduction = next((st for st in info.stages[1:] if st.rvars), None)
        if placement == "root" and self.rfactor_bands[info.name] and \
                math.prod(extents[info.dims.index(dim)] for dim in reduction.pure_dims) < 4 * self.hw.cores * max(1, v):
            out += [replace(o, rfactor=b) for b in self.rfactor_bands[info.name] for o in out
                    if not o.rvars_outside and not o.unroll]
        return out

    def _rfactor_bands(self, name: str) -> list[int]:
        """Band sizes to rfactor a Func's reduction by, when it has one update with RVars, that
        update is an exact associative reduction (integer + and *, min, max: reassociating them
        changes no result). Offered where its pure loops are too few to keep the cores busy
        (a histogram has none)."""
        info = self.a.funcs[name]
        reductions = [st for st in info.stages[1:] if st.rvars]
        if len(reductions) != 1 or len(info.func.types()) != 1 or self.hw.cores < 2:
            return []
        st = reductions[0]
        f = info.func
        if not update_is_associative(f, st.index):
            return []
        combine = prove_associativity(f, st.index).combine[0]
        if f.types()[0].is_float() and not isinstance(combine, ir.Min | ir.Max):
            return []  # a float sum or product reassociated changes its last bits
        outermost = max(1, int(st.rvars[-1][2](self.a.env)))
        sizes = {-(-outermost // (k * self.hw.cores)) for k in (4, 16)}
        return sorted(b for b in sizes if 1 <= b < outermost)

    def _unrolled_blocks(self, placement, consumer, stage, level, info, extents, vector) -> list[Decision]:
        """Pure stages computed a block of rows at a time, the rows unrolled, so that rows a
        stencil reads for several of them are loaded once (Adams2019's unrolled inner tiles)."""
        out = []
        if placement == "root":
            for rows in (2, 4, 8):
                if rows < extents[1] and vector < extents[0]:
                    tile = (vector, rows, *([0] * (len(extents) - 2)))
                    par = self._parallel(placement, extents, tile, info)
                    out.append(Decision(placement, consumer, stage, level, tile, vector, par, False, True))
        elif 1 < math.prod(extents[1:]) <= MAX_UNROLLED and extents[0] <= 2 * vector:
            out.append(Decision(placement, consumer, stage, level, (), vector, 0, False, True))
        return out

    def _register_tiles(self, placement, consumer, stage, level, info, extents, vector) -> list[Decision]:
        """Update stages whose inner tile is a block of accumulators held in registers."""
        budget = register_budget(self.hw)
        out = []
        for nvec in (1, 2, 3, 4):
            for rows in (1, 2, 4, 6, 8):
                if nvec * rows > budget or nvec * vector > extents[0] or rows > extents[1]:
                    continue
                tile = (nvec * vector, rows, *([0] * (len(extents) - 2)))
                par = self._parallel(placement, extents, tile, info)
                out.append(Decision(placement, consumer, stage, level, tile, vector, par, True, True))
        return out

    def _panel_reuse(self, name: str) -> bool:
        """Whether the Func, or a Func it reads through, reads a panel: a box that moves with
        dimension 0 but not with dimension 1 (gemm's columns of B, conv's filter for a group of
        channels). Walking its tiles down columns then reuses each panel for a whole column.
        (Worked out once per Func, into `panel_reuse`.)"""
        todo, seen = [name], set()
        while todo:
            n = todo.pop()
            if n in seen or n not in self.a.funcs:
                continue
            seen.add(n)
            info = self.a.funcs[n]
            for st in info.stages:
                for acc in st.accesses:
                    if self.panel_read(info, acc):
                        return True
                    if not acc.is_input:
                        todo.append(acc.producer)
        return False

    @staticmethod
    def panel_read(info, acc) -> bool:
        """Whether a stage of `info` reads a panel through `acc`: a box that moves with its
        dimension 0 but not with dimension 1."""
        if len(info.dims) < 2 or acc.data_dependent:
            return False
        return info.dims[1] in acc.invariant and info.dims[0] not in acc.invariant

    def _parallel(self, placement, extents, tile, info, columns: bool = False) -> int:
        """How many outer loops to fuse into the parallel loop: the fewest that give every core
        several tasks; none for small stages or Funcs computed inside other loops."""
        if placement != "root" or not extents:
            return 0
        points = 1
        for e in extents:
            points *= e
        if points < 4096 or self.hw.cores < 2:
            return 0
        trips = []
        order = list(reversed(range(len(extents))))  # outermost first
        if columns:
            order = [0] + order[:-1]
        for k in order:
            t = tile[k] if tile and k < len(tile) else 0
            if t and t < extents[k]:
                trips.append(-(-extents[k] // t))
        if not trips:
            trips = [extents[k] for k in reversed(range(1, len(extents)))] or [1]
        tasks, p = 1, 0
        for t in trips:
            tasks *= t
            p += 1
            if tasks >= 4 * self.hw.cores:
                break
        return p if tasks > 1 else 0

    def _near(self, best: Decision, options: list, info, extents) -> list[Decision]:
        """The fine pass: the coarse choice's placement, with tile sizes halved and doubled (rows
        also times 1.5) and the vector width doubled."""
        same = [o for o in options if o.placement == best.placement and o.consumer == best.consumer
                and o.level == best.level and o.store == best.store]
        if best.placement == "inline":
            return [INLINE] if INLINE in options else options
        if not same:  # the consumer's loops changed: that loop is gone
            return options
        out = {best}
        v = natural_vector(info, self.hw)
        tile = best.tile
        variants = [tile]
        if tile:
            for k in range(min(2, len(tile))):
                # (rows also by 1.5: 4 -> 6 rows make a 4 x 6 register tile of a consumer's block)
                for f in (0.5, 1.5, 2) if k == 1 else (0.5, 2):
                    t = list(tile)
                    if not t[k]:
                        continue
                    nt = int(t[k] * f)
                    if nt < 1 or nt >= extents[k] or (k == 0 and best.vector and nt % best.vector):
                        continue
                    t[k] = nt
                    variants.append(tuple(t))
        for t in variants:
            for vec in {best.vector, 2 * v if best.vector and extents[0] >= 2 * v else best.vector}:
                par = self._parallel(best.placement, extents, t, info, best.columns)
                out.add(replace(best, tile=t, vector=vec, parallel=par))
        return sorted(out, key=Decision.describe) + [o for o in same if o not in out][:8]
