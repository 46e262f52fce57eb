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


_func_names: set[str] = set()  # every name a Func was given or renamed to
_renamed: dict[str, str] = {}  # "f$1" -> "f": the names of Funcs renamed when made


def unique_func_name(name: str) -> str:
    """A Func's name as Halide makes it: the name given, the first time; after that, `name$1`,
    `name$2`... (a `$` in the name given becomes `_`), so no two Funcs share a name. Lowering
    numbers these canonically again (lowering/copy_graph.py)."""
    if name not in _func_names:
        _func_names.add(name)
        return name
    base = name.replace("$", "_")
    k = 1
    while f"{base}${k}" in _func_names:
        k += 1
    unique = f"{base}${k}"
    _func_names.add(unique)
    _renamed[unique] = base
    return unique


def func_name_family(name: str) -> str:
    """The name a Func was given, before unique_func_name renamed it."""
    return _renamed.get(name, name)


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
        if _is_numbered_rvar(token):
            out.extend(token.split("$"))
    return out


def _is_numbered_rvar(token: str) -> bool:
    """`r3$4`: an anonymous RDom's RVar past the fourth, named by the RDom's generated name. Not a
    Func renamed `f1$2` whose name given happens to be one generated before (`hl.Func()` made an
    `f1` earlier): that is one name (tracing printed another Func's name for it)."""
    return "$" in token and token not in _renamed and token.split("$")[0] in _generated


def map_name_tokens(name: str, mapping: dict[str, str]) -> str:
    """name with each token `mapping` has replaced (an anonymous RDom's `r3$4` by its parts)."""

    def one(m):
        token = m.group(0)
        hit = mapping.get(token)
        if hit is not None:
            return hit
        if _is_numbered_rvar(token):
            return "$".join(mapping.get(p, p) for p in token.split("$"))
        return token

    return _TOKEN.sub(one, name)
