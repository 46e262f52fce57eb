"""Hypothesis strategies that draw a random valid schedule and apply it to freshly built Funcs.

`scheduled(build)` builds a Case and schedules it; `apply_random_schedule(draw, case)` does the
scheduling for a Case built by the caller (random_pipelines.py uses it).

How a schedule is drawn
-----------------------
Funcs are visited consumers first, so that when a Func's placement is drawn the loops of all its
consumers are final. For each Func:

* placement: outputs are computed at root; other Funcs are inlined (pure ones only), computed at
  root, or computed at one of their legal sites, as pyhalide.schedule_space works them out (the
  loops that enclose every use of the Func, from where its consumers are computed). store_at is
  drawn at or outside the compute level, never outside a parallel or vectorized loop that encloses
  the compute level (Halide rejects that as a race). Sites at or inside vectorized or unrolled
  loops are drawn only now and then (legal, but the code, and so the compile time, grows with the
  width).
* loops, for every stage of a Func that is not inlined: a few of split / tile / fuse (adjacent
  dimensions, the inner one not vectorized or unrolled: the fused loop keeps its kind) /
  reorder / rename / vectorize / unroll / parallel / serial, with factors that do and don't divide,
  and tail strategies wherever the API allows them. Output stages only get tail
  strategies that keep the loops inside the output region (RoundUp only where the factor
  divides the extent, ShiftInwards only where the extent is at least the factor), because a loop
  that writes beyond an output is a legitimate runtime error. Updates never get ShiftInwards,
  RVars only GuardWithIf or Auto (Halide refuses the others). parallel mostly goes on the
  outermost loop, and only now and then into a Func computed inside another's loops (a task launch
  per iteration of the enclosing loops is slow).
* a few Func-level directives: bound on outputs (exact region), align_bounds and
  reorder_storage on intermediates, atomic() on associative updates.
* now and then, compute_with: stages of Funcs computed at the same level and independent of each
  other fused with a parent stage from the outermost loop down to one they share (same names and
  loop kinds from there outwards), aligned at random; and a prefetch of a root Func a stage
  reads, at one of its loops, from that loop or one outside it.

A directive the API refuses (hl.HalideError at schedule time) is skipped and recorded; that is the
API rejecting an illegal schedule. The result is a Schedule, whose repr is Python source that
replays it (for the falsifying example Hypothesis prints).

Running: realize_scheduled / realize_guarded run each example in a forked child (see MODE), so a
pipeline that corrupts memory or never ends fails its example instead of ending the session.
"""

from __future__ import annotations

import itertools
import os
import tempfile

from hypothesis import strategies as st

import pyhalide as hl
from pyhalide import ir
from pyhalide.errors import CompileError
from pyhalide.schedule_space import INLINE, ROOT, Loop, PlacementSpace

TS = hl.TailStrategy

# The documented lowering-time rejections of a schedule: a CompileError from realize containing one
# of these discards the example (counted). Anything else from realize is a failure.
INVALID_SCHEDULE_MESSAGES = ("used outside that loop", "store level must be at or outside", "can't", "is inlined")


# A directive that fails with something other than a HalideError is a bug of the API; it propagates
# (scripts that explore for several bugs at once may turn this off to collect them instead).
RAISE_CRASHES = True


def invalid_schedule_reason(message: str) -> str | None:
    for pattern in INVALID_SCHEDULE_MESSAGES:
        if pattern in message:
            return pattern
    return None


# ------------------------------------------------------------------------------------ schedule
class Schedule:
    """What was applied, as replayable Python (pyhalide accepts Var names as strings)."""

    def __init__(self, case: str):
        self.case = case
        self.lines: list[str] = []
        self.refused: list[tuple[str, str]] = []  # (directive, error message)
        self.placements: dict[str, str] = {}
        self.loop_directives = 0
        self.built = None  # the scheduled Case (or whatever the caller built)
        self.crashes: list[tuple[str, str]] = []  # only when RAISE_CRASHES is False

    @property
    def nontrivial(self) -> bool:
        return self.loop_directives > 0 or any(p != "inline" for p in self.placements.values())

    def source(self) -> str:
        return "\n".join(self.lines)

    def __repr__(self):
        out = [f"# {self.case}: the schedule (to replay on a fresh build of the case, bind the Funcs by name: "
               "globals().update({f.name(): f for f in case.funcs}))"] + self.lines
        if self.refused:
            out.append("# refused at schedule time:")
            out += [f"#   {d}  ->  {m.splitlines()[0][:200]}" for d, m in self.refused]
        return "\n".join(out)


def _const(e) -> int | None:
    try:
        return ir.const_int(e)
    except Exception:  # noqa: BLE001 - anything that isn't a plain constant
        return None


class _ReordersTies(CompileError):
    """A directive that changes the order in which an argmin-like update visits its RVars: Halide
    and pyhalide accept it, and which of equal extrema wins then follows the new order, not the
    reference's. The fuzz, which compares with the reference, takes it back."""


def _ties_follow_order(target) -> bool:
    """Whether target is an update whose result depends on the order of its RVars although it
    is an associative reduction (an argmin or argmax: associative, not commutative)."""
    from pyhalide.lowering.legality import prove_associativity

    if target is None or getattr(target, "_stage_index", 0) == 0:
        return False
    op = prove_associativity(target._target_func(), target._stage_index, target._definition())
    return op is not None and not op.commutative


def _divisors(n: int, hi: int) -> list[int]:
    return [k for k in range(1, hi + 1) if n % k == 0]


def _is_associative(f, stage: int) -> bool:
    from pyhalide.lowering.legality import update_is_associative

    try:
        return update_is_associative(f, stage)
    except Exception:  # noqa: BLE001 - a helper of the compiler; be robust to its changes
        return False


class _Scheduler:
    def __init__(self, draw, case, allow_tails_beyond_outputs: bool = False):
        self.draw = draw
        self.case = case
        self.space = PlacementSpace(case.outputs)
        self.graph = self.space.graph
        self.schedulable = {f.name() for f in case.funcs}
        self.output_names = {f.name() for f in case.outputs}
        self.placement = self.space.placement  # name -> INLINE | ROOT | ("at", Loop)
        self.const_dims: dict[str, set[str]] = {}  # func -> pure Vars whose loops have constant extents
        self.sched = Schedule(case.name)
        self.counter = itertools.count()
        self.allow_beyond = allow_tails_beyond_outputs

    # ---------------------------------------------------------------- helpers
    def fresh(self, base: str) -> str:
        base = base.split(".")[0].replace("$", "_")
        return f"{base}_{next(self.counter)}"

    def try_apply(self, text: str, fn, target=None) -> bool:
        before = self._snapshot(target)
        try:
            if _ties_follow_order(target):
                with target._all_or_nothing():
                    loops = list(target._stage().dims)
                    fn()
                    if target._changes_rvar_order(loops, target._stage().dims):
                        raise _ReordersTies(text)
            else:
                fn()
        except _ReordersTies:
            return False
        except hl.HalideError as e:
            self.sched.refused.append((text, str(e)))
            assert target is None or self._snapshot(target) == before, f"refused, but partly applied: {text}"
            return False
        except Exception as e:
            # not a HalideError: a crash of the scheduling API itself (a bug)
            if RAISE_CRASHES:
                raise
            self.sched.crashes.append((text, f"{type(e).__name__}: {e}"))
            return False
        self.sched.lines.append(text)
        return True

    @staticmethod
    def _snapshot(target):
        if target is None:
            return None
        s = target._stage()
        return (len(s.splits), tuple((d.name, d.for_type) for d in s.dims))

    @staticmethod
    def var(dim_name: str, is_rvar: bool):
        return hl.RVar(dim_name) if is_rvar else hl.Var(dim_name)

    def stage_target(self, f, s):
        return f if s == 0 else f.update(s - 1)

    def stage_text(self, f, s) -> str:
        return f.name() if s == 0 else f"{f.name()}.update({s - 1})"

    # ---------------------------------------------------------------- placement
    def place(self, f) -> None:
        name = f.name()
        if name in self.output_names:
            self.space.place(name, ROOT)
            return
        default_inline = not f.has_update_definition()
        if name not in self.schedulable:
            self.space.place(name, INLINE if default_inline else ROOT)
            return
        sites = self.space.compute_sites(name)
        # Sites at or inside a vectorized or unrolled loop are legal but make the generated code (and
        # so the compile time) grow with the width: draw them only now and then.
        wide = [any(lp.for_type in ("vectorized", "unrolled") for lp in sites[: i + 1]) for i in range(len(sites))]
        allow_wide = self.draw(st.integers(0, 5)) == 0
        options = ([INLINE] if default_inline else []) + [ROOT] + [
            ("at", i) for i in range(len(sites)) if allow_wide or not wide[i]]
        choice = self.draw(st.sampled_from(options))
        if choice == INLINE:
            self.space.place(name, INLINE)
            if self.draw(st.booleans()):
                self.try_apply(f"{name}.compute_inline()", f.compute_inline)
            self.sched.placements[name] = "inline"
            return
        if choice == ROOT:
            self.space.place(name, ROOT)
            if self.try_apply(f"{name}.compute_root()", f.compute_root):
                self.sched.placements[name] = "root"
            return
        i = choice[1]
        site: Loop = sites[i]
        g, stage, dim = site.func, site.stage, site.var
        gf = self.graph.funcs[g]
        last = len(gf.definitions()) - 1
        is_rvar = self.stage_target(gf, stage)._stage().find(dim).is_rvar
        if stage == last and self.draw(st.booleans()):
            text = f"{name}.compute_at({g}, {dim!r})"
            ok = self.try_apply(text, lambda: f.compute_at(gf, self.var(dim, is_rvar)))
        else:
            text = f"{name}.compute_at(hl.LoopLevel({g}, {dim!r}, {stage}))"
            ok = self.try_apply(text, lambda: f.compute_at(hl.LoopLevel(gf, dim, stage)))
        if not ok:
            self.space.place(name, INLINE if default_inline else ROOT)
            return
        self.space.place(name, ("at", site))
        self.sched.placements[name] = f"at {g}.s{stage}.{dim}"
        store = self.draw(st.sampled_from([None, *self.space.store_sites(sites, i)]))
        if store is None or store == i:
            return
        if store == -1:
            self.try_apply(f"{name}.store_root()", f.store_root)
        else:
            sg, sstage, sdim, _ = sites[store]
            sgf = self.graph.funcs[sg]
            self.try_apply(f"{name}.store_at(hl.LoopLevel({sg}, {sdim!r}, {sstage}))",
                           lambda: f.store_at(hl.LoopLevel(sgf, sdim, sstage)))
        self.sched.placements[name] += " (store hoisted)"

    # ---------------------------------------------------------------- loops
    def base_extents(self, f, s) -> dict[str, tuple[int | None, bool]]:
        """Extent of each original dimension of a stage: (value if known, constant in the IR)."""
        d = f.definitions()[s]
        out: dict[str, tuple[int | None, bool]] = {}
        is_out = f.name() in self.output_names
        for rv in d.rvars:
            c = _const(rv.extent)
            out[rv.name] = (c, c is not None)
        for i, v in enumerate(f._pure_args):
            const = v in self.const_dims.get(f.name(), set())
            out[v] = (self.case.sizes[i] if is_out else None, const)
        return out

    def extents(self, f, s) -> dict[str, tuple[int | None, bool]]:
        """Extents by internal loop name, following the stage's splits (the compiler's own data)."""
        sched = self.stage_target(f, s)._stage()
        ext = dict(self.base_extents(f, s))
        for sp in sched.splits:
            if sp.kind == "split":
                e, c = ext.get(sp.old, (None, False))
                ext[sp.inner] = (sp.factor, True)
                ext[sp.outer] = (None if e is None else -(-e // sp.factor), c)
            elif sp.kind == "fuse":
                (e1, c1), (e2, c2) = ext.get(sp.old, (None, False)), ext.get(sp.outer, (None, False))
                ext[sp.inner] = (None if e1 is None or e2 is None else e1 * e2, c1 and c2)
            else:
                ext[sp.outer] = ext.get(sp.old, (None, False))
        return ext

    def draw_tail(self, f, s, dim, factor: int) -> str:
        is_out = f.name() in self.output_names
        if dim.is_rvar:
            return self.draw(st.sampled_from([TS.Auto, TS.GuardWithIf]))
        cands = [TS.Auto, TS.GuardWithIf, TS.RoundUp, TS.PredicateLoads, TS.PredicateStores]
        if s == 0:
            cands.append(TS.ShiftInwards)
        if is_out and not self.allow_beyond:
            e, _ = self.extents(f, s).get(dim.internal, (None, False))

            def safe(t):
                if t == TS.Auto:
                    t = TS.ShiftInwards if s == 0 else TS.RoundUp
                if t in (TS.RoundUp, TS.PredicateLoads):  # (PredicateLoads guards the loads only)
                    return e is not None and e % factor == 0
                if t == TS.ShiftInwards:
                    return e is not None and e >= factor
                return True

            cands = [t for t in cands if safe(t)]
        return self.draw(st.sampled_from(cands))

    def draw_factor(self, f, s, dim, lo: int, hi: int) -> int:
        e, _ = self.extents(f, s).get(dim.internal, (None, False))
        if e is not None and self.draw(st.booleans()):
            divs = [k for k in _divisors(e, hi) if k >= lo]
            if divs:
                return self.draw(st.sampled_from(divs))
        return self.draw(st.integers(lo, hi))

    def loop_directives(self, f, s) -> None:
        target = self.stage_target(f, s)
        stext = self.stage_text(f, s)
        sched = target._stage()
        if s > 0 and _is_associative(f, s) and self.draw(st.integers(0, 4)) == 0:
            self.try_apply(f"{stext}.atomic()", target.atomic, target)
        n = self.draw(st.integers(0, 4))
        kinds = ["split", "split", "tile", "fuse", "reorder", "reorder", "rename", "vectorize", "vectorize",
                 "unroll", "parallel", "serial"]
        for _ in range(n):
            kind = self.draw(st.sampled_from(kinds))
            if not sched.dims:
                return
            if getattr(self, "_" + kind)(f, s, target, stext, sched):
                self.sched.loop_directives += 1

    def _pick(self, sched):
        return self.draw(st.sampled_from(sched.dims))

    def _split(self, f, s, target, stext, sched) -> bool:
        d = self._pick(sched)
        factor = self.draw_factor(f, s, d, 1, 9)
        tail = self.draw_tail(f, s, d, factor)
        o, i = self.fresh(d.name + "o"), self.fresh(d.name + "i")
        return self.try_apply(
            f"{stext}.split({d.name!r}, {o!r}, {i!r}, {factor}, hl.TailStrategy.{tail})",
            lambda: target.split(self.var(d.name, d.is_rvar), self.var(o, d.is_rvar), self.var(i, d.is_rvar),
                                 factor, tail), target)

    def _tile(self, f, s, target, stext, sched) -> bool:
        if len(sched.dims) < 2:
            return False
        a, b = self.draw(st.permutations(sched.dims).map(lambda p: p[:2]))
        fa, fb = self.draw_factor(f, s, a, 1, 8), self.draw_factor(f, s, b, 1, 8)
        # one tail for both dimensions: it must suit both
        tail = self.draw_tail(f, s, a, fa)
        if tail != self.draw_tail(f, s, b, fb):
            tail = TS.GuardWithIf
        va, vb = self.var(a.name, a.is_rvar), self.var(b.name, b.is_rvar)
        ai, bi = self.fresh(a.name + "i"), self.fresh(b.name + "i")
        vai, vbi = self.var(ai, a.is_rvar), self.var(bi, b.is_rvar)
        if self.draw(st.booleans()):
            ao, bo = self.fresh(a.name + "o"), self.fresh(b.name + "o")
            vao, vbo = self.var(ao, a.is_rvar), self.var(bo, b.is_rvar)
            text = f"{stext}.tile({a.name!r}, {b.name!r}, {ao!r}, {bo!r}, {ai!r}, {bi!r}, {fa}, {fb}, " \
                   f"hl.TailStrategy.{tail})"
            return self.try_apply(text, lambda: target.tile(va, vb, vao, vbo, vai, vbi, fa, fb, tail=tail), target)
        text = f"{stext}.tile({a.name!r}, {b.name!r}, {ai!r}, {bi!r}, {fa}, {fb}, hl.TailStrategy.{tail})"
        return self.try_apply(text, lambda: target.tile(va, vb, vai, vbi, fa, fb, tail=tail), target)

    def _fuse(self, f, s, target, stext, sched) -> bool:
        if len(sched.dims) < 2:
            return False
        k = self.draw(st.integers(0, len(sched.dims) - 2))
        inner, outer = sched.dims[k], sched.dims[k + 1]
        if inner.for_type in ("vectorized", "unrolled"):
            return False  # the fused loop would be too (as in Halide), and its extent is rarely a constant
        rv = inner.is_rvar or outer.is_rvar
        name = self.fresh(inner.name + outer.name + "f")
        return self.try_apply(
            f"{stext}.fuse({inner.name!r}, {outer.name!r}, {name!r})",
            lambda: target.fuse(self.var(inner.name, inner.is_rvar), self.var(outer.name, outer.is_rvar),
                                self.var(name, rv)), target)

    def _reorder(self, f, s, target, stext, sched) -> bool:
        if len(sched.dims) < 2:
            return False
        k = self.draw(st.integers(2, len(sched.dims)))
        chosen = self.draw(st.permutations(sched.dims))[:k]
        names = [d.name for d in chosen]
        return self.try_apply(f"{stext}.reorder({', '.join(repr(n) for n in names)})",
                              lambda: target.reorder(*[self.var(d.name, d.is_rvar) for d in chosen]), target)

    def _rename(self, f, s, target, stext, sched) -> bool:
        d = self._pick(sched)
        new = self.fresh(d.name + "r")
        return self.try_apply(f"{stext}.rename({d.name!r}, {new!r})",
                              lambda: target.rename(self.var(d.name, d.is_rvar), self.var(new, d.is_rvar)), target)

    def _whole_or_split(self, f, s, sched, max_whole: int, lo: int, hi: int):
        """A dimension and either None (the whole loop, whose extent is a small constant) or a factor."""
        ext = self.extents(f, s)
        whole = [d for d in sched.dims if ext.get(d.internal, (None, False))[1]
                 and ext[d.internal][0] is not None and ext[d.internal][0] <= max_whole]
        if whole and self.draw(st.integers(0, 2)) == 0:
            return self.draw(st.sampled_from(whole)), None
        d = self._pick(sched)
        return d, self.draw_factor(f, s, d, lo, hi)

    def _vectorize(self, f, s, target, stext, sched) -> bool:
        d, n = self._whole_or_split(f, s, sched, 32, 2, 16)
        v = self.var(d.name, d.is_rvar)
        if n is None:
            return self.try_apply(f"{stext}.vectorize({d.name!r})", lambda: target.vectorize(v), target)
        tail = self.draw_tail(f, s, d, n)
        return self.try_apply(f"{stext}.vectorize({d.name!r}, {n}, hl.TailStrategy.{tail})",
                              lambda: target.vectorize(v, n, tail), target)

    def _unroll(self, f, s, target, stext, sched) -> bool:
        d, n = self._whole_or_split(f, s, sched, 16, 2, 4)
        v = self.var(d.name, d.is_rvar)
        if n is None:
            return self.try_apply(f"{stext}.unroll({d.name!r})", lambda: target.unroll(v), target)
        tail = self.draw_tail(f, s, d, n)
        return self.try_apply(f"{stext}.unroll({d.name!r}, {n}, hl.TailStrategy.{tail})",
                              lambda: target.unroll(v, n, tail), target)

    def _parallel(self, f, s, target, stext, sched) -> bool:
        # Mostly the outermost loop. A parallel loop inside a Func computed at a consumer's loop
        # launches tasks on every iteration of that loop: legal, but slow, so only now and then.
        if self.placement[f.name()][0] == "at" and self.draw(st.integers(0, 5)):
            return False
        d = sched.dims[-1] if self.draw(st.integers(0, 2)) else self._pick(sched)
        v = self.var(d.name, d.is_rvar)
        if self.draw(st.integers(0, 3)) == 0:
            n = self.draw_factor(f, s, d, 1, 8)
            tail = self.draw_tail(f, s, d, n)
            return self.try_apply(f"{stext}.parallel({d.name!r}, {n}, hl.TailStrategy.{tail})",
                                  lambda: target.parallel(v, n, tail), target)
        return self.try_apply(f"{stext}.parallel({d.name!r})", lambda: target.parallel(v), target)

    def _serial(self, f, s, target, stext, sched) -> bool:
        d = self._pick(sched)
        return self.try_apply(f"{stext}.serial({d.name!r})",
                              lambda: target.serial(self.var(d.name, d.is_rvar)), target)

    # ---------------------------------------------------------------- Func-level directives
    def func_directives(self, f) -> None:
        name = f.name()
        args = list(f._pure_args)
        if name in self.output_names:
            if self.draw(st.integers(0, 3)) == 0:
                i = self.draw(st.integers(0, len(args) - 1))
                lo = 0 if self.case.mins is None else self.case.mins[i]
                if self.try_apply(f"{name}.bound({args[i]!r}, {lo}, {self.case.sizes[i]})",
                                  lambda: f.bound(hl.Var(args[i]), lo, self.case.sizes[i])):
                    self.const_dims.setdefault(name, set()).add(args[i])
            return
        if self.draw(st.integers(0, 4)) == 0:
            i = self.draw(st.integers(0, len(args) - 1))
            m = self.draw(st.integers(2, 8))
            rem = self.draw(st.integers(0, m - 1))
            self.try_apply(f"{name}.align_bounds({args[i]!r}, {m}, {rem})",
                           lambda: f.align_bounds(hl.Var(args[i]), m, rem))
        if len(args) >= 2 and self.draw(st.integers(0, 3)) == 0:
            perm = self.draw(st.permutations(args))
            self.try_apply(f"{name}.reorder_storage({', '.join(repr(a) for a in perm)})",
                           lambda: f.reorder_storage(*[hl.Var(a) for a in perm]))

    # ---------------------------------------------------------------- compute_with
    def callees(self, name: str) -> set[str]:
        """The Funcs name calls, directly or not."""
        found, todo = set(), [name]
        while todo:
            n = todo.pop()
            for callee, callers in self.graph.callers.items():
                if n in callers and callee not in found:
                    found.add(callee)
                    todo.append(callee)
        return found

    def compute_withs(self) -> None:
        """Now and then, one fused group: a parent stage and one or two children computed at the
        same level, independent of it and of each other, each fused from the outermost loop down to
        a loop the two stages share (same names and kinds from there outwards)."""
        if self.draw(st.booleans()):
            return
        computed = [n for n in self.graph.order if n in self.schedulable and self.placement[n] != INLINE]
        deps = {n: self.callees(n) for n in computed}

        def independent(a, b):
            return a != b and a not in deps[b] and b not in deps[a] and self.placement[a] == self.placement[b]

        parents = [p for p in computed if any(independent(p, c) for c in computed)]
        if not parents:
            return
        parent = self.draw(st.sampled_from(parents))
        children: list[str] = []
        for c in self.draw(st.permutations([c for c in computed if independent(parent, c)]))[:2]:
            if all(independent(c, other) for other in children):
                children.append(c)
        for child in children:
            pf, cf = self.graph.funcs[parent], self.graph.funcs[child]
            k = self.draw(st.integers(0, len(pf.definitions()) - 1))
            s = self.draw(st.integers(0, len(cf.definitions()) - 1))
            pt, ct = self.stage_target(pf, k), self.stage_target(cf, s)
            pdims, cdims = list(reversed(pt._stage().dims)), list(reversed(ct._stage().dims))  # outermost first
            shared = []
            for a, b in zip(pdims, cdims):
                if a.name != b.name or a.for_type != b.for_type:
                    break
                shared.append(b)
            if not shared:
                continue
            d = self.draw(st.sampled_from(shared))
            align = self.draw(st.sampled_from(["", "AlignStart", "AlignEnd", "NoAlign"]))
            var = self.var(d.name, d.is_rvar)
            if align:
                text = f"{self.stage_text(cf, s)}.compute_with({self.stage_text(pf, k)}, {d.name!r}, " \
                       f"hl.LoopAlignStrategy.{align})"
                self.try_apply(text, lambda ct=ct, pt=pt, var=var, align=align:
                               ct.compute_with(pt, var, getattr(hl.LoopAlignStrategy, align)))
            else:
                text = f"{self.stage_text(cf, s)}.compute_with({self.stage_text(pf, k)}, {d.name!r})"
                self.try_apply(text, lambda ct=ct, pt=pt, var=var: ct.compute_with(pt, var))

    # ---------------------------------------------------------------- prefetch
    def prefetches(self) -> None:
        """Now and then, a stage prefetches a Func computed at root it reads, at one of its loops,
        from that loop or one outside it, a drawn number of iterations ahead."""
        if self.draw(st.integers(0, 3)):
            return
        options = [(callee, caller, stage) for callee, callers in self.graph.callers.items()
                   if callee in self.schedulable and self.placement.get(callee) == ROOT  # (allocated around)
                   for caller, stages in callers.items()
                   if caller in self.schedulable and self.placement.get(caller) not in (None, INLINE)
                   for stage in stages if stage is not None]
        if not options:
            return
        callee, caller, stage = self.draw(st.sampled_from(sorted(options)))
        cf = self.graph.funcs[caller]
        target = self.stage_target(cf, stage)
        at = self.draw(st.sampled_from(target._stage().dims))
        outer = target._stage().dims[target._stage().index(at.name):]
        frm = self.draw(st.sampled_from(outer))
        offset = self.draw(st.integers(-2, 4))
        strategy = self.draw(st.sampled_from(["GuardWithIf", "Clamp", "NonFaulting"]))
        pf = self.graph.funcs[callee]
        self.try_apply(f"{self.stage_text(cf, stage)}.prefetch({callee}, {at.name!r}, {frm.name!r}, {offset}, "
                       f"hl.PrefetchBoundStrategy.{strategy})",
                       lambda: target.prefetch(pf, self.var(at.name, at.is_rvar), self.var(frm.name, frm.is_rvar),
                                               offset, getattr(hl.PrefetchBoundStrategy, strategy)))

    # ---------------------------------------------------------------- everything
    def run(self) -> Schedule:
        for name in self.graph.order:
            f = self.graph.funcs[name]
            self.place(f)
            if self.placement[name] == INLINE or name not in self.schedulable:
                continue
            self.func_directives(f)
            for s in range(len(f.definitions())):
                self.loop_directives(f, s)
        self.compute_withs()
        self.prefetches()
        return self.sched


def apply_random_schedule(draw, case, allow_tails_beyond_outputs: bool = False) -> Schedule:
    """Draw a schedule for a freshly built case and apply it (call from inside @st.composite)."""
    return _Scheduler(draw, case, allow_tails_beyond_outputs).run()


# ------------------------------------------------------------------------------- checking
def assert_same(got, want, reassociates: bool, what: str) -> None:
    """Bit-exact equality (NaNs equal), or a tight allclose for reassociated float results."""
    import numpy as np

    assert len(got) == len(want), f"{what}: {len(got)} results, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, (
            f"{what}, result {k}: {g.dtype}{g.shape}, expected {w.dtype}{w.shape}")
        if reassociates and g.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"{what}, result {k}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{what}, result {k}")


def realize_scheduled(case, stats=None, sched=None):
    """Realize a scheduled Case (crash-guarded, see realize_guarded). A lowering-time rejection of
    one of the documented kinds (INVALID_SCHEDULE_MESSAGES) discards the example; any other error
    propagates."""
    from hypothesis import assume, event

    parallel = sched is None or any(".parallel(" in line for line in sched.lines)
    try:
        return realize_guarded(case, parallel)
    except hl.CompileError as e:
        reason = invalid_schedule_reason(str(e))
        if reason is None:
            raise
        if stats is not None:
            stats[f"rejected at realize ({reason})"] += 1
        event(f"rejected at realize: {reason}")
        assume(False)
        raise  # unreachable


class PipelineCrashed(AssertionError):
    """The compiled pipeline killed the process that ran it (it wrote out of bounds ...)."""


# How examples run. "fork" (the default where os.fork exists): compile in the test process, run in a
# forked child and take its results, so that a pipeline that corrupts memory fails its example
# (Hypothesis then shrinks it) instead of killing the session; the child runs parallel loops on
# workers of its own, and examples whose schedule has a parallel loop run once more in the test
# process, whose pool has run every example before (the two must agree). "inprocess"
# (PYHALIDE_FUZZ_FORK=0): run only in the test process.
MODE = "fork" if hasattr(os, "fork") and os.environ.get("PYHALIDE_FUZZ_FORK", "1") != "0" else "inprocess"


# Seconds a forked child may run one example (these pipelines take milliseconds): past it, the child
# is killed and the example fails as a hang.
TIMEOUT = float(os.environ.get("PYHALIDE_FUZZ_TIMEOUT", "60"))


class PipelineHung(AssertionError):
    """The compiled pipeline ran far longer than it could need to (an endless loop?)."""


def _read_with_deadline(fd: int, pid: int, timeout: float) -> bytes:
    import select
    import signal
    import time

    chunks, deadline = [], time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise PipelineHung(f"running the compiled pipeline took more than {timeout:g} s; killed it")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def realize_guarded(case, parallel: bool = True):
    """Realize a Case as MODE says; `parallel`: the schedule may have parallel loops."""
    if MODE != "fork":
        return case.realize()
    import pickle

    case.pipeline().compile_jit()  # compile errors surface here, in this process
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run, send the results or the error, exit without any cleanup
        try:
            import faulthandler

            faulthandler.disable()
            os.close(r)
            try:
                msg = ("ok", case.realize())
            except BaseException as e:  # noqa: BLE001 - handed to the parent
                msg = ("error", e)
            try:
                data = pickle.dumps(msg)
            except Exception:  # noqa: BLE001 - an unpicklable error
                data = pickle.dumps(("error", RuntimeError(repr(msg[1]))))
            with os.fdopen(w, "wb") as fh:
                fh.write(data)
        finally:
            os._exit(0)
    os.close(w)
    data = _read_with_deadline(r, pid, TIMEOUT)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        import signal

        sig = os.WTERMSIG(status)
        raise PipelineCrashed(f"running the compiled pipeline killed the process: signal {sig} "
                              f"({signal.Signals(sig).name})")
    kind, value = pickle.loads(data)
    if kind == "error":
        raise value
    if parallel:
        here = case.realize()
        assert_same(here, value, case.reassociates, "run in the test process vs the same pipeline in a fork")
    return value


@st.composite
def scheduled(draw, build):
    """A freshly built Case with a random valid schedule applied; the Case is `.built`."""
    case = build()
    sched = apply_random_schedule(draw, case)
    sched.built = case
    return sched


LAST_EXAMPLE = os.path.join(tempfile.gettempdir(), "pyhalide_fuzz_last_example.txt")


def remember(*parts) -> None:
    """Write the example about to run to LAST_EXAMPLE: if the process dies (a compiled pipeline
    that writes out of bounds), that file holds the pipeline and schedule that did it."""
    with open(LAST_EXAMPLE, "w") as fh:
        fh.write("\n\n".join(repr(p) for p in parts) + "\n")
