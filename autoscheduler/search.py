"""Search strategies over the space, all behind one interface: `run(problem) -> SearchResult`.

- BeamSearch (Adams2019, Anderson2021): Funcs decided consumers first; each step extends every
  state of the beam with every option for the next Func and keeps the `beam_size` cheapest by the
  cost model; a coarse pass over the tile ladder, then a fine pass around its winner.
- RandomSearch: random legal decisions, the cheapest of `samples` by the cost model.
- Greedy (Mullapudi2016): beam search with a beam of one.
- ComputeRootHeuristic (Li2018): every non-trivial Func at root, vectorized and parallel along
  its outer loops; pointwise Funcs with one consumer inlined. No model.

Ties are broken by the decisions' descriptions, and random choices come from the seed alone, so a
search gives the same schedule in any process.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from .loop_nest import INLINE, Decision, FuncModel


@dataclass
class State:
    models: dict  # name -> FuncModel, for the Funcs decided so far
    cost: float
    key: tuple = ()  # the decisions so far, for ties and duplicates
    # Funcs not decided yet whose consumers all are -> what they would cost at least, computed
    # at root untiled (or inlined) under those consumers: the beam ranks states by cost plus
    # these, so that a consumer's decision is charged for what it makes its producers cost (how
    # gemm's loop order makes the columns of B be read; a local_laplacian level's tiles, which
    # the level below must fill: its pick went from 1.4x to 0.93x the hand schedule's time).
    pending: dict = field(default_factory=dict)

    @property
    def rank(self) -> float:
        return self.cost + sum(self.pending.values())


@dataclass
class SearchResult:
    models: dict
    cost: float
    stats: dict = field(default_factory=dict)
    alternatives: list = field(default_factory=list)  # other complete States, cheapest first


class Problem:
    """What a strategy searches: the space, the model, the cost model and the order of Funcs."""

    def __init__(self, space, cost_model, order: list[str]):
        self.space = space
        self.model = space.model
        self.cost_model = cost_model
        self.order = order
        funcs = self.model.a.funcs
        # each Func's producers: what they cost depends on how the Func reads them
        self.producers = {n: sorted({acc.producer for st in info.stages for acc in st.accesses
                                     if not acc.is_input and acc.producer in funcs and acc.producer != n})
                          for n, info in funcs.items()}

    def extend(self, state: State, name: str, decision: Decision, ahead: bool = True) -> State:
        """The state with `name` decided; ahead=False leaves the producers it completes out of
        its pending costs (`look_ahead` adds them)."""
        fm: FuncModel = self.model.evaluate(name, decision, state.models)
        models = dict(state.models)
        models[name] = fm
        pending = {p: c for p, c in state.pending.items() if p != name}
        new = State(models, state.cost + self.cost_model.predict(fm.features), state.key + (decision.describe(),),
                    pending)
        if ahead:
            self.look_ahead(new, name)
        return new

    def look_ahead(self, state: State, name: str) -> None:
        """Add to state.pending the producers of `name` whose consumers are now all decided."""
        for p in self.producers[name]:
            if p not in state.models and all(c in state.models for c in self.model.a.funcs[p].consumers):
                state.pending[p] = self.lookahead(p, state.models)

    def lookahead(self, name: str, models: dict) -> float:
        """What `name` would cost at least computed at root, untiled, or inlined (where it
        may be), under the consumers decided in `models`."""
        options = self.space.simple_options(name, models)
        return min(self.cost_model.predict(self.model.evaluate(name, d, models).features) for d in options)


class BeamSearch:
    LOOKAHEAD_FACTOR = 2
    MIN_BEAM = 4
    STRUCTURE_SHARE = 4  # the most of the beam one structure may hold: 1 / this

    def __init__(self, beam_size: int = 32, passes: int = 2, dropout: float = 1.0, seed: int = 0,
                 max_states: int = 16_000):
        self.beam_size = max(1, beam_size)
        self.passes = max(1, passes)
        self.dropout = dropout  # Halide's random_dropout: the chance each candidate is kept
        self.seed = seed
        # About the states the search may evaluate (0: no bound). A pipeline of many Funcs gets a
        # narrower beam (never below MIN_BEAM) so that it searches in seconds, as a small one
        # does: a count, not a clock, so the schedule is the same on any machine.
        self.max_states = max_states

    def _width(self, problem: Problem) -> tuple[int, int]:
        """The beam width to search with: beam_size, unless a pass at that width would evaluate
        more than max_states states, estimated from the options of one greedy walk through the
        Funcs (a few percent of the search); and the states that walk evaluated."""
        if not self.max_states or self.beam_size <= self.MIN_BEAM:
            return self.beam_size, 0
        state, options = State({}, 0.0), 0
        for name in problem.order:
            candidates = [problem.extend(state, name, d, ahead=False)
                          for d in problem.space.options(name, state.models)]
            options += len(candidates)
            state = min(candidates, key=lambda c: (c.rank, c.key))
        projected = self.beam_size * self.passes * options
        if projected <= self.max_states:
            return self.beam_size, options
        return max(self.MIN_BEAM, int(self.beam_size * self.max_states / projected)), options

    def run(self, problem: Problem) -> SearchResult:
        t0 = time.perf_counter()
        rng = random.Random(self.seed)
        best = None
        problem.space.around = None
        finals: list[State] = []
        width, evaluated = self._width(problem)
        for _ in range(self.passes):
            states = [State({}, 0.0)]
            for name in problem.order:
                candidates = []
                for st in states:
                    for d in problem.space.options(name, st.models):
                        candidates.append(problem.extend(st, name, d, ahead=False))
                evaluated += len(candidates)
                diverse = problem.space.around is None and len(problem.model.a.funcs[name].stages) > 1
                states = self._keep(self._ranked(problem, name, candidates, width), rng, width, diverse)
            finals += states
            winner = states[0]
            if best is None or winner.cost < best.cost:
                best = winner
            problem.space.around = {n: m.decision for n, m in best.models.items()}
        problem.space.around = None
        best, changed, tried = improve(problem, best)
        unique = {s.key: s for s in sorted(finals + [best], key=lambda s: (s.cost, s.key))}
        stats = {"strategy": "beam", "beam_size": self.beam_size, "passes": self.passes,
                 "max_states": self.max_states, "beam_width": width, "states_evaluated": evaluated + tried,
                 "improved": changed, "search_s": time.perf_counter() - t0}
        return SearchResult(best.models, best.cost, stats, list(unique.values()))

    def _ranked(self, problem: Problem, name: str, candidates: list, width: int) -> list:
        """The candidates by rank: the cheapest LOOKAHEAD_FACTOR x width by cost so far get
        their newly completed producers looked at (what searching costs most), the rest follow."""
        candidates.sort(key=lambda s: (s.rank, s.key))
        n = self.LOOKAHEAD_FACTOR * width
        head = candidates[:n]
        for c in head:
            problem.look_ahead(c, name)
        head.sort(key=lambda s: (s.rank, s.key))
        return head + candidates[n:]

    def _keep(self, candidates: list, rng: random.Random, width: int, diverse: bool = False) -> list:
        """The beam's next states: the `width` cheapest distinct ones (Halide's random_dropout
        drops each with a chance); where `diverse`, at most width / STRUCTURE_SHARE of them of
        one structure (where each Func is computed and stored), the rest of the beam filled by
        the cheapest after those.

        The coarse pass asks for diversity where it has just placed a Func with an update: what a
        reduction's producers cost grows with its whole domain (nl_means's weights, for every
        offset of the search window), which the look-ahead, at root untiled, does not see. There
        the tile-size variants of one placement filled the beam: nl_means's sum computed per
        tile ranked a little cheaper than per row of a tile, and every state kept (a beam of 128
        too) computed it per tile, predicted 6% dearer once the producers were decided and
        measured 1.4x slower (158 against 115 ms). Everywhere else the cap is off: on the
        gallery it changed camera_pipe's and interpolate's picks to ones the cost model predicts
        1-6% cheaper and that ran 1.2-1.3x slower."""
        kept, seen, later = [], set(), []
        per_structure: dict = {}
        cap = max(1, width // self.STRUCTURE_SHARE) if diverse else width
        for k, c in enumerate(candidates):
            if len(kept) >= width:
                break
            if c.key in seen or (self.dropout < 1.0 and kept and rng.random() > self.dropout):
                continue
            seen.add(c.key)
            shape = _structure(c)
            if per_structure.get(shape, 0) >= cap:
                later.append((k, c))
                continue
            per_structure[shape] = per_structure.get(shape, 0) + 1
            kept.append((k, c))
        kept += later[: width - len(kept)]
        return [c for _, c in sorted(kept, key=lambda kc: kc[0])]  # in the candidates' order


def _structure(state: State) -> tuple:
    """Where each decided Func is computed and stored, without its tiles, vectors or order."""
    return tuple((name, m.decision.placement, m.decision.consumer, m.decision.stage, m.decision.level, m.decision.store)
                 for name, m in state.models.items())


class Greedy(BeamSearch):
    def __init__(self, seed: int = 0):
        super().__init__(beam_size=1, passes=1, seed=seed)

    def run(self, problem):
        r = super().run(problem)
        r.stats["strategy"] = "greedy"
        return r


MAX_IMPROVEMENTS = 4  # decisions the local step may change, one at a time
IMPROVEMENT = 0.02  # a change kept must be predicted at least this much cheaper (the model errs more)


def improve(problem: Problem, best: State) -> tuple[State, list[str], int]:
    """The beam's best, improved one decision at a time while the model predicts it cheaper.

    The beam decides consumers first and ranks a choice before the producers it makes cheaper
    are decided: a pyramid level at root rather than inlined can save more below it than it
    costs, which shows only once the levels below are decided. Here each inlined Func is tried
    computed at root and inside a consumer (for each, the option cheapest for the Func itself),
    and each computed Func inlined, the other decisions kept where they stay legal: once a
    change computes a level that was inlined, the Func below it that the beam computed because
    the level recomputed it may be cheaper inlined again (interpolate's premultiplied picture,
    stored at full size: 17.7 ms, inlined 13.6). Inlining can mislead too: camera_pipe's demosaic
    inlined was predicted 0.6% cheaper and ran 1.3x slower (below IMPROVEMENT, not taken).
    (Other moves are the beam's own choices; tried here, the model's errors picked worse ones:
    max_filter's vertical pass moved into another consumer, predicted 22% cheaper, ran 2.8x
    slower.) Returns the state, the Funcs changed and the states tried."""
    changed: list[str] = []
    tried = 0
    for _ in range(MAX_IMPROVEMENTS):
        winner, won = None, None
        before: dict = {}
        for name in problem.order:
            if name not in problem.space.fixed:
                for d in _other_placements(problem, name, before, best.models[name].decision):
                    tried += 1
                    st = _replayed(problem, before, name, d, best)
                    if st is not None and st.cost < (winner or best).cost * (1 - IMPROVEMENT):
                        winner, won = st, name
            before[name] = best.models[name]
        if winner is None:
            break
        best = winner
        changed.append(won)
    return best, changed, tried


def _other_placements(problem: Problem, name: str, consumers: dict, current: Decision) -> list[Decision]:
    """For an inlined Func: at root, and in a loop of a consumer (for each, the option cheapest
    for name alone). For a computed one: inlined, where that is allowed."""
    if current.placement != "inline":
        return [INLINE] if _still_legal(problem, name, INLINE, consumers) else []
    cheapest: dict = {}
    for d in problem.space.options(name, consumers):
        if d.placement == "inline":
            continue
        k = d.placement
        cost = problem.cost_model.predict(problem.model.evaluate(name, d, consumers).features)
        if k not in cheapest or (cost, d.describe()) < cheapest[k][:2]:
            cheapest[k] = (cost, d.describe(), d)
    return [entry[2] for entry in cheapest.values()]


def _replayed(problem: Problem, before: dict, name: str, decision: Decision, current: State) -> State | None:
    """The state with `name` decided as `decision` and the Funcs after it as in `current`, over
    the models of the Funcs before it; None where one of those is no longer legal (computed at a
    Func now inlined, or inlined where that is no longer allowed). (A Func whose consumers'
    models did not change gets its model back from Model.evaluate's memo.)"""
    cost = sum(problem.cost_model.predict(m.features) for m in before.values())
    st = State(dict(before), cost, tuple(m.decision.describe() for m in before.values()))
    for n in problem.order[len(before):]:
        d = decision if n == name else current.models[n].decision
        if n != name and not _still_legal(problem, n, d, st.models):
            return None
        st = problem.extend(st, n, d, ahead=False)
    return st


def _still_legal(problem: Problem, name: str, d: Decision, models: dict) -> bool:
    space = problem.space
    if d.placement == "inline":
        return space.can_inline(name) and \
            problem.model.evaluate(name, d, models).recompute <= space.max_inline_recompute
    if d.placement == "at":
        return (d.consumer, d.stage, d.level) in space.sites(name, models)
    return True


def recorded_state(problem: Problem, decisions: dict) -> State | None:
    """The state of decisions kept as text (Decision.describe, by Func), worked out again by the
    current model; None where the model no longer accepts them (the featurisation changed)."""
    st = State({}, 0.0)
    try:
        for name in problem.order:
            st = problem.extend(st, name, Decision.parse(decisions[name]))
    except (KeyError, ValueError, IndexError):
        return None
    return st


def random_state(problem: Problem, rng: random.Random) -> State:
    """A complete schedule with every decision drawn uniformly from the legal options."""
    st = State({}, 0.0)
    for name in problem.order:
        opts = problem.space.options(name, st.models)
        st = problem.extend(st, name, opts[rng.randrange(len(opts))])
    return st


class RandomSearch:
    def __init__(self, samples: int = 32, seed: int = 0):
        self.samples = samples
        self.seed = seed

    def run(self, problem: Problem) -> SearchResult:
        t0 = time.perf_counter()
        rng = random.Random(self.seed)
        states = sorted((random_state(problem, rng) for _ in range(self.samples)), key=lambda s: (s.cost, s.key))
        best = states[0]
        return SearchResult(best.models, best.cost, {"strategy": "random", "samples": self.samples,
                                                     "search_s": time.perf_counter() - t0}, states[1:])


class ComputeRootHeuristic:
    """Li2018's spirit without its gradient machinery: compute every Func at root (pointwise Funcs
    with a single consumer are inlined), tile nothing, vectorize dimension 0 at the natural width
    and parallelize the outer loops. Scored by the cost model only for reporting."""

    def run(self, problem: Problem) -> SearchResult:
        t0 = time.perf_counter()
        st = State({}, 0.0)
        for name in problem.order:
            opts = problem.space.options(name, st.models)
            info = problem.model.a.funcs[name]
            pick = None
            if len(info.consumers) == 1 and problem.space.can_inline(name) and \
                    all(len(stages) == 1 for stages in info.consumers.values()):
                pick = next((o for o in opts if o.placement == "inline"), None)
            if pick is None:
                roots = [o for o in opts if o.placement == "root" and not o.tile and not o.unroll]
                pick = roots[0] if roots else opts[0]
            st = problem.extend(st, name, pick)
        return SearchResult(st.models, st.cost, {"strategy": "compute_root", "search_s": time.perf_counter() - t0})
