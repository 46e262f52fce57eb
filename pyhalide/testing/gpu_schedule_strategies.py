"""Hypothesis strategies that draw random valid GPU schedules (CUDA targets) for corpus Cases.

Placements are drawn as for the CPU (schedule_strategies: inline, root, or any legal site, which
now includes consumers' GPU block and thread loops). Then, per stage, by where it is computed:

* on the host (root, or at a host loop): usually a kernel: a few CPU-side directives (split,
  reorder, rename, parallel: a parallel loop around kernels runs serially), then gpu_tile over
  one or two of its pure loops (with factors up to 16 and any tail the CPU rules allow there),
  or, for an associative update, atomic() and gpu_tile over its reduction loops, or
  gpu_single_thread; sometimes it stays a CPU stage (host and device copies between them);
* at a kernel's block level: gpu_threads over one or two of its loops, split first or not
  (shared memory, or sometimes store_in(Heap): global memory; barriers between the thread loops);
* inside thread loops: serial directives only (split, reorder, unroll; a vectorize is unrolled
  in a kernel) — per-thread local memory, or sometimes store_in(GPUShared or Heap): the
  thread's slice of a shared or global allocation;
* sometimes a kernel is a block per row and a thread per element (gpu_blocks(y).gpu_threads(x)):
  its block's size is decided at the launch.

Schedules the CUDA backend refuses by design (thread loops or allocations with no bound known
before the launch, too many threads, too much shared memory, when compiling or at the launch) are
GPU_REJECTIONS; the test discards them and counts them.
"""

from __future__ import annotations

from hypothesis import strategies as st

import pyhalide as hl
from pyhalide import ir
from pyhalide.schedule import PARALLEL
from pyhalide.testing.schedule_strategies import INVALID_SCHEDULE_MESSAGES, Schedule, _is_associative, _Scheduler

GPU_REJECTIONS = ("no upper bound known before the launch", "whose size must be known before the kernel runs",
                  "GPU threads per block", "GPU threads in dimension",
                  "bytes of shared memory", "bytes per GPU thread",
                  "has bounds that depend on", "a kernel's block loops must be",
                  "block loops must be outside thread loops",
                  # storage outside a thread loop that compute_with moved its producer into
                  "This is a potential race condition", "a loop or condition between them depends on the thread")


def gpu_rejection_reason(message: str) -> str | None:
    for pattern in INVALID_SCHEDULE_MESSAGES + GPU_REJECTIONS:
        if pattern in message:
            return pattern
    return None


class _GpuScheduler(_Scheduler):
    def where(self, name: str) -> str:
        """'host', 'block' or 'thread': where a placed Func's computation runs."""
        kinds = {lp.for_type for lp in self.space.enclosing_loops(name)}
        if kinds & {ir.GPU_THREAD, ir.GPU_LANE}:
            return "thread"
        return "block" if ir.GPU_BLOCK in kinds else "host"

    def cpu_side_directives(self, f, s, n: int, kinds) -> None:
        target, stext = self.stage_target(f, s), self.stage_text(f, s)
        sched = target._stage()
        for _ in range(self.draw(st.integers(0, n))):
            if sched.dims and getattr(self, "_" + self.draw(st.sampled_from(kinds)))(f, s, target, stext, sched):
                self.sched.loop_directives += 1

    def loop_directives(self, f, s) -> None:
        where = self.where(f.name())
        if where == "thread":
            if s == 0 and self.draw(st.integers(0, 4)) == 0:  # the thread's slice of shared or global memory
                memory = self.draw(st.sampled_from(["GPUShared", "Heap"]))
                self.try_apply(f"{f.name()}.store_in(hl.MemoryType.{memory})",
                               lambda: f.store_in(getattr(hl.MemoryType, memory)))
            self.cpu_side_directives(f, s, 3, ["split", "reorder", "rename", "unroll", "vectorize"])
        elif where == "block":
            if s == 0 and self.draw(st.integers(0, 3)) == 0:  # global memory, a slice per block
                self.try_apply(f"{f.name()}.store_in(hl.MemoryType.Heap)", lambda: f.store_in(hl.MemoryType.Heap))
            self.cpu_side_directives(f, s, 1, ["split", "reorder"])
            self._threads(f, s)
        elif self.draw(st.integers(0, 4)):
            self.cpu_side_directives(f, s, 2, ["split", "reorder", "rename", "parallel"])
            self._kernel(f, s)

    def _pure_dims(self, sched):
        return [d for d in sched.dims if not d.is_rvar]

    def _parallel_inside(self, sched, dims) -> bool:
        """Whether a parallel loop is inside the outermost of dims: it would be inside the kernel,
        whose loops are block, thread, serial or unrolled loops."""
        outermost = max(sched.dims.index(d) for d in dims)
        return any(d.for_type == PARALLEL for d in sched.dims[:outermost])

    def _threads(self, f, s) -> None:
        target, stext = self.stage_target(f, s), self.stage_text(f, s)
        sched = target._stage()
        dims = self._pure_dims(sched)[: self.draw(st.integers(1, 2))]
        if not dims:
            return
        if self.draw(st.booleans()):  # thread loops of a constant size, serial loops around them
            d = dims[0]
            factor = self.draw(st.sampled_from([2, 4, 8, 16]))
            o, i = self.fresh(d.name + "o"), self.fresh(d.name + "i")
            if not self.try_apply(f"{stext}.split({d.name!r}, {o!r}, {i!r}, {factor}, hl.TailStrategy.GuardWithIf)",
                                  lambda: target.split(self.var(d.name, False), self.var(o, False),
                                                       self.var(i, False), factor, "GuardWithIf"), target):
                return
            dims = [sched.find(i)]
        names = [d.name for d in dims]
        if self.try_apply(f"{stext}.gpu_threads({', '.join(repr(n) for n in names)})",
                          lambda: target.gpu_threads(*[self.var(n, False) for n in names]), target):
            self.sched.loop_directives += 1

    def _kernel(self, f, s) -> None:
        target, stext = self.stage_target(f, s), self.stage_text(f, s)
        sched = target._stage()
        pure = self._pure_dims(sched)
        rvars = [d for d in sched.dims if d.is_rvar]
        # (a Tuple's atomic update needs a lock, which kernels do not have: refused there, as in Halide)
        single = len(f.types()) == 1
        if s > 0 and rvars and single and _is_associative(f, s) and self.draw(st.integers(0, 2)) == 0:
            if self.try_apply(f"{stext}.atomic()", target.atomic, target):
                pure = rvars  # a scatter: the reduction's own loops become the grid
        if not pure:
            if self.draw(st.booleans()) and self.try_apply(f"{stext}.gpu_single_thread()", target.gpu_single_thread,
                                                           target):
                self.sched.loop_directives += 1
            return
        row_blocks = len(pure) >= 2 and not pure[0].is_rvar and not self._parallel_inside(sched, pure[:2])
        if row_blocks and self.draw(st.integers(0, 4)) == 0:
            # a block per row, a thread per element of it: the block's size decided at the launch
            inner, outer = pure[0].name, pure[1].name
            if self.try_apply(f"{stext}.gpu_blocks({outer!r}).gpu_threads({inner!r})",
                              lambda: target.gpu_blocks(self.var(outer, False)).gpu_threads(self.var(inner, False)),
                              target):
                self.sched.loop_directives += 1
            return
        dims = pure[: self.draw(st.integers(1, min(2, len(pure))))]
        if self._parallel_inside(sched, dims):
            return
        factors = [self.draw(st.sampled_from([1, 2, 3, 4, 8, 16])) for _ in dims]
        tail = self.draw_tail(f, s, dims[0], factors[0])
        if len(dims) == 2 and tail != self.draw_tail(f, s, dims[1], factors[1]):
            tail = "GuardWithIf"
        rv = dims[0].is_rvar
        vs = [d.name for d in dims]
        outs = [self.fresh(n + "_b") for n in vs]
        ins = [self.fresh(n + "_t") for n in vs]
        args = [*vs, *outs, *ins]
        text = (f"{stext}.gpu_tile({', '.join(repr(a) for a in args)}, {', '.join(map(str, factors))}, "
                f"hl.TailStrategy.{tail})")
        if self.try_apply(text, lambda: target.gpu_tile(*[self.var(a, rv) for a in args], *factors, tail), target):
            self.sched.loop_directives += 1


@st.composite
def gpu_scheduled(draw, build) -> Schedule:
    """A freshly built Case with a random valid GPU schedule applied; the Case is `.built`."""
    case = build()
    sched = _GpuScheduler(draw, case).run()
    sched.built = case
    return sched
