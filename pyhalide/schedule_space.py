"""Where a Func may legally be computed and stored: the placement rules a search space draws from.

Halide's rule, which lowering enforces: a Func computed inside a loop must be computed there for
every use, so its legal compute sites are the loops that enclose every use of it, the common prefix,
over its (non-inlined) consumers, of the loops around each consumer's computation followed by the
loops of the one stage that uses it. Its storage may be hoisted outwards from the compute site, but
not across a parallel or vectorized loop (the iterations would share one buffer: a race).

Placements are decided consumers first (`graph.order`), because a Func's sites depend on where its
consumers are computed and how their loops are split. The schedule strategies of the tests and the
autoscheduler share this one source of truth.
"""

from __future__ import annotations

from typing import NamedTuple

from . import ir
from .call_graph import call_graph


class Loop(NamedTuple):
    """One loop of a stage: `func.s<stage>` over the dimension `var` (its user name)."""

    func: str
    stage: int
    var: str
    for_type: str


INLINE, ROOT = ("inline",), ("root",)


class PlacementSpace:
    def __init__(self, outputs):
        self.graph = call_graph(outputs)
        self.placement: dict[str, tuple] = {}  # name -> INLINE | ROOT | ("at", Loop)
        self._enclosing: dict[str, list[Loop]] = {}

    def place(self, name: str, placement: tuple) -> None:
        self.placement[name] = placement
        self._enclosing.clear()

    def loops(self, name: str, stage: int) -> list[Loop]:
        """The loops of a stage under its current schedule, outermost first."""
        f = self.graph.funcs[name]
        target = f if stage == 0 else f.update(stage - 1)
        return [Loop(name, stage, d.name, d.for_type) for d in reversed(target._stage().dims)]

    def enclosing_loops(self, name: str) -> list[Loop]:
        """The loops around the computation of a placed Func, outermost first."""
        out = self._enclosing.get(name)
        if out is None:
            p = self.placement[name]
            if p[0] != "at":
                out = []
            else:
                site = p[1]
                loops = self.loops(site.func, site.stage)
                idx = [lp.var for lp in loops].index(site.var)
                out = self.enclosing_loops(site.func) + loops[: idx + 1]
            self._enclosing[name] = out
        return out

    def consumers(self, name: str) -> dict[str, set]:
        """The computed Funcs that use `name` (looking through inlined ones), with the stages that
        do (None: in the bounds of an RDom, outside the stage's loops)."""
        out: dict[str, set] = {}
        for caller, stages in self.graph.callers.get(name, {}).items():
            if self.placement[caller] == INLINE:
                for g, ss in self.consumers(caller).items():
                    out.setdefault(g, set()).update(ss)
            else:
                out.setdefault(caller, set()).update(stages)
        return out

    def compute_sites(self, name: str) -> list[Loop]:
        """The loops `name` may be computed in, outermost first (every consumer placed already)."""
        chains = []
        for g, stages in self.consumers(name).items():
            chain = list(self.enclosing_loops(g))
            if len(stages) == 1 and None not in stages:
                chain += self.loops(g, next(iter(stages)))
            chains.append(chain)
        if not chains:
            return []
        prefix = []
        for items in zip(*chains):
            if all(it[:3] == items[0][:3] for it in items):
                prefix.append(items[0])
            else:
                break
        # not between two gpu_blocks loops: a kernel's block loops are its outermost (as Halide)
        return [lp for i, lp in enumerate(prefix)
                if not (lp.for_type == ir.GPU_BLOCK and i + 1 < len(prefix) and prefix[i + 1].for_type == ir.GPU_BLOCK)]

    @staticmethod
    def store_sites(sites: list[Loop], compute: int) -> list[int]:
        """Where storage may go for a Func computed at sites[compute]: indices into sites, from the
        compute site outwards, -1 for root; never outside a parallel, vectorized or GPU loop
        that encloses the computation."""
        out = []
        for j in range(compute, -2, -1):
            if j < compute and sites[j + 1].for_type in ir.CONCURRENT:
                break
            out.append(j)
        return out
