"""benchmarks.profile: perf samples mapped onto a pipeline's machine loops."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from benchmarks import profile


def _code(lines):
    return [profile.Instruction(offset, text, "f") for offset, text in lines]


def test_innermost_loops_are_backward_jumps_that_hold_no_other():
    code = _code([
        (0x00, "mov %rdi,%rax"),
        (0x10, "vmovups (%rax),%zmm0"),  # inner loop 0x10-0x20
        (0x18, "vaddps %zmm0,%zmm1,%zmm1"),
        (0x20, "jne 10 <f+0x10>"),
        (0x28, "add $0x40,%rax"),
        (0x30, "jl 0 <f>"),  # the outer loop holds the inner one
        (0x38, "jmp 50 <f+0x50>"),  # forward: no loop
        (0x40, "vmulps %zmm0,%zmm0,%zmm0"),  # a second innermost loop 0x40-0x48
        (0x48, "jne 40 <f+0x40>"),
    ])
    loops = profile.innermost_loops(code)
    assert [(lp.start, lp.end) for lp in loops] == [(0x10, 0x20), (0x40, 0x48)]
    code[1].samples, code[2].samples, code[7].samples = 5, 7, 1
    assert [lp.samples for lp in loops] == [12, 1]


@pytest.mark.skipif(shutil.which("perf") is None or shutil.which("objdump") is None, reason="needs perf and objdump")
def test_the_report_finds_blurs_loops_in_the_pipelines_code(capsys):
    try:
        profile.report("blur", "hand", 1.0, 2)
    except (RuntimeError, subprocess.CalledProcessError) as e:  # perf present but not allowed to sample here
        pytest.skip(str(e))
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("blur (hand): ") and "in the pipeline's code" in first
    shares = [float(line.split("%")[0]) for line in out.splitlines() if "% loop " in line]
    assert shares and shares[0] > 10  # blur's time is in two loops, the hotter well over a tenth


def test_the_funcs_report_sums_pyhalides_profiler_over_runs(capsys):
    """--funcs: blur's Funcs, their time per run and shares, with no tool outside pyhalide;
    autoscheduled, beside the model's prediction."""
    profile.report_funcs("blur", "hand", 0.5)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("blur (hand): ") and "ms per run sampled" in lines[0]
    # (names as the report prints them: "blur_y$112" where earlier tests made Funcs of that name)
    rows = {line.split()[0].split("$")[0]: line.split() for line in lines[2:]}
    # (a run takes 0.3 ms, shorter than a sampling interval: blur_x, computed inside blur_y's
    # tiles, may get no sample at all)
    assert "blur_y" in rows and set(rows) <= {"overhead", "blur_x", "blur_y"}
    assert 99 <= sum(float(r[2].rstrip("%")) for r in rows.values()) <= 101
    profile.report_funcs("blur", "auto", 0.5)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].endswith("model ms")
    assert any(float(line.split()[-1]) > 0 for line in lines[2:])  # the model predicts some time
