"""Names for anonymous Funcs, Vars, RDoms, Buffers and Params.

A generated name comes from a per-prefix counter, so it depends on what the process made before;
lowering renames generated names canonically (see lowering/copy_graph.py), which keeps the
lowered IR, and every key built from it, the same in any process.

Names in the IR are tokens (the names given) joined by "." (loops) and "$" (RVars, `r$x`); the
lowering's name for a second Func given one name, `upy$1`, is one token.
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


_TOKEN = re.compile(r"[^.$]+(?:\$\d+)?")


def name_tokens(name: str) -> list[str]:
    """The tokens of a name in the IR: `blur.s0.x` -> blur, s0, x; `r3$x` -> r3, x; `upy$1.s0.x`
    -> upy$1, s0, x. An anonymous RDom's fifth RVar (`r3$4`) is listed whole and as its parts."""
    out = []
    for token in _TOKEN.findall(name):
        out.append(token)
        if "$" in token and token.split("$")[0] in _generated:
            out.extend(token.split("$"))
    return out


def map_name_tokens(name: str, mapping: dict[str, str]) -> str:
    """name with each token `mapping` has replaced (an anonymous RDom's `r3$4` by its parts)."""

    def one(m):
        token = m.group(0)
        hit = mapping.get(token)
        if hit is not None:
            return hit
        if "$" in token and token.split("$")[0] in _generated:  # an anonymous RDom's fifth RVar
            return "$".join(mapping.get(p, p) for p in token.split("$"))
        return token

    return _TOKEN.sub(one, name)
