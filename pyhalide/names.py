"""Unique names for anonymous Funcs, Vars, Buffers and lowering temporaries."""

import itertools
from collections import defaultdict

_counters: dict[str, itertools.count] = defaultdict(itertools.count)


def unique_name(prefix: str) -> str:
    """prefix followed by a per-prefix counter: deterministic within a fresh process."""
    return f"{prefix}{next(_counters[prefix])}"
