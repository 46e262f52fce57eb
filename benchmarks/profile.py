"""Where a compiled app spends its time, loop by loop: `python -m benchmarks.profile APP`.

Runs the app's pipeline (pyhalide, its hand schedule or the autoscheduler's) in a loop while
`perf record -e cpu-clock` samples the process, then maps the samples onto the disassembly of
the pipeline's object code (`objdump`), and prints the innermost machine loops (a backward jump
and the instructions from its target to it) that took the most samples, each with the samples of
its instructions: what a same-schedule gap with Halide comes from, measured rather than guessed.
It needs perf and objdump (binutils); without perf it says so and stops.

`--funcs` answers the coarser question with no tool at all: the time per Func (and the threads
working on it), from pyhalide's sampling profiler (the target feature "profile"), summed over the
runs that fit in `--seconds`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

_FUNCTION = re.compile(r"^([0-9a-f]+) <(.+)>:$")
_INSTRUCTION = re.compile(r"^\s+([0-9a-f]+):\s+(.*)$")
_JUMP = re.compile(r"^(j[a-z]+)\s+([0-9a-f]+)\b")


@dataclass
class Instruction:
    offset: int
    text: str
    function: str
    samples: int = 0


@dataclass
class Loop:
    start: int  # offset of the jump's target
    end: int  # offset of the backward jump
    function: str
    instructions: list = field(default_factory=list)

    @property
    def samples(self) -> int:
        return sum(i.samples for i in self.instructions)


def disassemble(obj: bytes) -> list[Instruction]:
    """The object's instructions, with their .text offsets and functions."""
    with tempfile.NamedTemporaryFile(suffix=".o") as f:
        f.write(obj)
        f.flush()
        text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f.name], capture_output=True, text=True,
                              check=True).stdout
    out, function = [], "?"
    for line in text.splitlines():
        if m := _FUNCTION.match(line):
            function = m.group(2)
        elif m := _INSTRUCTION.match(line):
            out.append(Instruction(int(m.group(1), 16), m.group(2).split("#")[0].strip(), function))
    return out


def innermost_loops(code: list[Instruction]) -> list[Loop]:
    """Each backward jump's range, keeping those that hold no other such range."""
    ranges = []
    for ins in code:
        m = _JUMP.match(ins.text)
        if m and int(m.group(2), 16) <= ins.offset:
            ranges.append((int(m.group(2), 16), ins.offset, ins.function))
    inner = [r for r in ranges if not any(o != r and r[0] <= o[0] and o[1] <= r[1] for o in ranges)]
    loops = []
    for start, end, function in sorted(inner):
        loops.append(Loop(start, end, function, [i for i in code if start <= i.offset <= end]))
    return loops


def sample(run, seconds: float) -> list[int]:
    """The instruction addresses perf sampled in this process while `run` ran in a loop."""
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "perf.data"
        perf = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", "4000", "-p", str(os.getpid()),
                                 "-o", str(data)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.5)  # perf attaches
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            run()
        perf.send_signal(signal.SIGINT)
        _, err = perf.communicate(timeout=60)
        if not data.exists():
            raise RuntimeError(f"perf recorded nothing: {err.decode(errors='replace').strip()}")
        ips = subprocess.run(["perf", "script", "-i", str(data), "-F", "ip"], capture_output=True, text=True,
                             check=True).stdout
    return [int(line, 16) for line in ips.split() if line.strip()]


def build(name: str, variant: str, profiled: bool = False):
    """The app's pyhalide pipeline under its hand or autoscheduled schedule, compiled as the
    benchmarks compile it (with the "profile" feature if `profiled`); a function running it once;
    and, autoscheduled, the cost model's prediction per Func in seconds (else {})."""
    import apps
    import pyhalide as hl

    app = apps.load(name)
    built = app.build(hl, app.inputs("default"))
    predicted = {}
    if variant == "hand":
        app.schedule(hl, built)
    else:
        from autoscheduler import auto_schedule

        mins = built.output_mins or [0] * len(built.output_sizes)
        result = auto_schedule(built.output, estimates={built.output.name(): list(zip(mins, built.output_sizes))},
                               params={"parallelism": int(os.environ.get("HL_NUM_THREADS", "2"))})
        predicted = {name: sum(costs.values()) for name, costs in result.breakdown.items()}
    features = [*([] if app.exact else ["fp_contract"]), *(["profile"] if profiled else [])]
    built.output.compile_jit(hl.Target("-".join(["host", *features]))) if features else built.output.compile_jit()
    run = app.runner(hl, built)
    with contextlib.redirect_stdout(io.StringIO()):  # (a profiled run prints its report)
        run()
    compiled = next(iter(built.output._pipeline()._compiled.values()))
    return compiled, run, predicted


def report(name: str, variant: str, seconds: float, top: int) -> None:
    from pyhalide.codegen.jit import _object_for
    from pyhalide.codegen.runtime import DIRECT_SYMBOL

    compiled, run, _ = build(name, variant)
    obj, _ = _object_for(compiled.llvm_ir)
    code = disassemble(obj)
    entry = next(i.offset for i in code if i.function == DIRECT_SYMBOL)
    base = compiled._jit.address_of(DIRECT_SYMBOL) - entry
    by_offset = {i.offset: i for i in code}
    ips = sample(run, seconds)
    inside = Counter(ip - base for ip in ips if 0 <= ip - base <= code[-1].offset)
    for offset, n in inside.items():
        if offset in by_offset:
            by_offset[offset].samples += n
    total, ours = len(ips), sum(inside.values())
    print(f"{name} ({variant}): {total} samples, {ours} ({100 * ours / max(1, total):.0f}%) in the pipeline's code")
    per_function = Counter()
    for i in code:
        per_function[i.function] += i.samples
    for function, n in per_function.most_common():
        if n:
            print(f"  {100 * n / max(1, ours):5.1f}%  {function}")
    loops = sorted(innermost_loops(code), key=lambda lp: -lp.samples)
    for lp in loops[:top]:
        if not lp.samples:
            break
        print(f"\n{100 * lp.samples / max(1, ours):5.1f}% loop {lp.start:#x}-{lp.end:#x} in {lp.function} "
              f"({len(lp.instructions)} instructions)")
        for i in lp.instructions:
            share = f"{100 * i.samples / max(1, ours):5.1f}%" if i.samples else "      "
            print(f"  {share} {i.offset:6x}  {i.text}")


def report_funcs(name: str, variant: str, seconds: float) -> None:
    """Per Func: its time per run, as pyhalide's sampling profiler (target feature "profile")
    measures it, over as many runs as fit in `seconds`; autoscheduled, beside the cost model's
    prediction (where the model is most wrong, its schedule is least to be trusted)."""
    import pyhalide as hl

    _, run, predicted = build(name, variant, profiled=True)
    time_ms, threads, runs, total = Counter(), Counter(), 0, 0.0
    deadline = time.perf_counter() + seconds
    while runs < 3 or time.perf_counter() < deadline:
        with contextlib.redirect_stdout(io.StringIO()):
            run()
        r = hl.last_profile_report()
        runs, total = runs + 1, total + r.total_ms
        for f in r.funcs:
            time_ms[f.name] += f.time_ms
            threads[f.name] += f.threads * f.time_ms
    print(f"{name} ({variant}): {runs} runs, {total / runs:.3f} ms per run sampled")
    model = f" {'model ms':>9s}" if predicted else ""
    print(f"  {'Func':32s} {'ms/run':>9s} {'share':>7s} {'threads':>8s}{model}")
    for func in sorted(set(time_ms) | set(predicted), key=lambda f: (-time_ms[f], -predicted.get(f, 0.0))):
        ms = time_ms[func]
        if ms or predicted.get(func):
            row = f"  {func:32s} {ms / runs:9.3f} {100 * ms / total:6.1f}% {threads[func] / ms if ms else 0:8.2f}"
            print(row + (f" {1e3 * predicted.get(func, 0.0):9.3f}" if predicted else ""))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("app")
    p.add_argument("--variant", choices=["hand", "auto"], default="hand")
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--top", type=int, default=6, help="loops to print")
    p.add_argument("--funcs", action="store_true",
                   help="time per Func from pyhalide's own profiler (no perf needed) instead of the hot loops")
    args = p.parse_args(argv)
    if args.funcs:
        report_funcs(args.app, args.variant, args.seconds)
        return 0
    missing = [tool for tool in ("perf", "objdump") if shutil.which(tool) is None]
    if missing:
        print(f"benchmarks.profile needs {' and '.join(missing)} (Debian: linux-perf, binutils)", file=sys.stderr)
        return 2
    report(args.app, args.variant, args.seconds, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
