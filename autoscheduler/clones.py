"""A second graph for the search: producers cloned into the consumers that read them through a
stencil (Halide's clone_in).

A Func with several consumers is either inlined into all of them or computed where every use is
inside, often only at root. When one consumer reads it at many points (a downsample's taps),
inlining recomputes it per tap and root stores all of it: a copy of its own for that consumer can
be computed inside that consumer's loops, sliding, while the other consumers inline theirs (Local
Laplacian's hand schedule does this for its remapped level). The search runs on the algorithm as
written; where it inlined such a Func, the Func is cloned into each stencil consumer and the
search runs again (api.search). Inlining every copy is the first search's choice, so the second
space holds it: the cheaper prediction wins.
"""

from __future__ import annotations

from .search import Problem, SearchResult

STENCIL_TAPS = 3  # loads per point from which a consumer reads a producer as a stencil


def taps(problem: Problem, consumer: str, producer: str) -> int:
    """Loads per point of `producer` by all stages of `consumer`."""
    return sum(acc.count for st in problem.model.a.funcs[consumer].stages for acc in st.accesses
               if acc.producer == producer)


def stencil_clones(problem: Problem, result: SearchResult) -> list[tuple[str, str]]:
    """(producer, consumer) pairs to clone: producers the search inlined into several consumers,
    cloned into each that reads them as a stencil. One consumer stays with the producer itself,
    which may then be computed in that consumer's loops."""
    a, fixed = problem.model.a, problem.space.fixed
    pairs = []
    for name in a.order:
        info = a.funcs[name]
        if name in fixed or name in a.clones or result.models[name].decision.placement != "inline":
            continue
        consumers = sorted(c for c in info.consumers if c in a.funcs)
        if len(consumers) < 2 or any(c in fixed for c in consumers):
            continue
        stencils = [c for c in consumers if taps(problem, c, name) >= STENCIL_TAPS]
        pairs += [(name, c) for c in stencils[: len(consumers) - 1]]
    return pairs
