"""The on-disk object cache heals itself: a damaged entry is discarded and compiled again.

Each case runs in a fresh process (the in-memory cache would otherwise hide the disk), over a
cache directory of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pyhalide.codegen.jit import _read_cached

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = """
import numpy as np
import pyhalide as hl
x = hl.Var("x")
f = hl.Func("cache_probe")
f[x] = x * 3 + 1
out = np.asarray(f.realize([64]))
assert (out == np.arange(64) * 3 + 1).all(), out
print("ok")
"""


def _run(cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYHALIDE_CACHE_DIR": str(cache), "PYHALIDE_DISK_CACHE": "1"}
    return subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=300)


def _entries(cache: Path) -> list[Path]:
    return sorted((cache / "objects").glob("*.o"))


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "flipped", "other_key"])
def test_a_damaged_cache_entry_is_recompiled(tmp_path, damage):
    first = _run(tmp_path)
    assert first.returncode == 0 and "ok" in first.stdout, first.stderr[-2000:]
    entries = _entries(tmp_path)
    assert entries, "nothing was cached"
    for path in entries:
        data = path.read_bytes()
        if damage == "garbage":
            path.write_bytes(os.urandom(len(data)))
        elif damage == "truncated":
            path.write_bytes(data[: len(data) // 2])
        elif damage == "empty":
            path.write_bytes(b"")
        elif damage == "flipped":  # one bit of the object itself: only the checksum can tell
            k = len(data) - 100
            path.write_bytes(data[:k] + bytes([data[k] ^ 0x10]) + data[k + 1:])
        else:  # an intact entry of another key, under this key's name
            header = len(b"pyhalide-object-1\0")
            path.write_bytes(data[:header] + b"0" * 64 + data[header + 64:])
    again = _run(tmp_path)
    assert again.returncode == 0 and "ok" in again.stdout, again.stderr[-2000:]
    healed = _entries(tmp_path)
    assert [p.name for p in healed] == [p.name for p in entries]
    assert all(_read_cached(p, p.stem) for p in healed)  # rewritten whole, with a valid header and checksum
    third = _run(tmp_path)  # and the healed entries load
    assert third.returncode == 0 and "ok" in third.stdout


def test_no_temporary_files_are_left(tmp_path):
    assert _run(tmp_path).returncode == 0
    assert not list((tmp_path / "objects").glob("*.tmp"))
