"""Names for anonymous Funcs, Vars, RDoms, Buffers and Params.

A generated name comes from a per-prefix counter, so it depends on what the process made before;
lowering renames generated names canonically (see lowering/copy_graph.py), which keeps the
lowered IR, and every key built from it, the same in any process.
"""

import itertools
import re
from collections import defaultdict

_counters: dict[str, itertools.count] = defaultdict(itertools.count)
_generated: set[str] = set()


def unique_name(prefix: str) -> str:
    """prefix followed by a per-prefix counter; remembered as generated."""
    name = f"{prefix}{next(_counters[prefix])}"
    _generated.add(name)
    return name


def is_generated(name: str) -> bool:
    return name in _generated


def generated_prefix(name: str) -> str:
    """The prefix a generated name was made from ("sum12" -> "sum")."""
    return re.sub(r"\d+$", "", name)
