"""Decisions to schedule directives: applied to the user's Funcs, and printed as Python to paste.

One list of directives, (func, stage, method, args), is both what is applied and what is
printed, so the source a user pastes is exactly the schedule the search chose.
"""

from __future__ import annotations

from dataclasses import replace

from .analysis import Analysis
from .loop_nest import FuncModel, stage_loops

ALLOWED = {"compute_root", "compute_at", "split", "reorder", "vectorize", "unroll", "fuse", "parallel"}


def directives(analysis: Analysis, models: dict[str, FuncModel], fixed: set) -> list[tuple]:
    """(func name, stage index, method, args) for every Func the search scheduled."""
    out = []
    for name in analysis.order:
        if name in fixed:
            continue
        fm = models[name]
        d = fm.decision
        if d.placement == "inline":
            continue
        info = analysis.funcs[name]
        if d.placement == "root":
            out.append((name, 0, "compute_root", ()))
        else:
            gm = models[d.consumer]
            loop = gm.stages[d.stage].loops[d.level]
            last = len(analysis.funcs[d.consumer].stages) - 1
            out.append((name, 0, "compute_at", (d.consumer, loop.name, d.stage if d.stage != last else -1)))
        extents = {v: ext for v, (_, ext) in zip(info.dims, fm.region)}
        for st, sm in zip(info.stages, fm.stages):
            out += _stage_directives(name, info, st, sm, d, extents)
    return out


def _stage_directives(name, info, st, sm, d, extents) -> list[tuple]:
    out = []
    s = st.index
    serial, _ = stage_loops(info, st, replace(d, parallel=0), extents, sm.rv_extents, 1)
    tile = dict(zip(info.dims, d.tile)) if d.tile else {}
    for lp in serial:
        if lp.kind == "outer":
            v = lp.dims[0]
            out.append((name, s, "split", (v, lp.name, serial_name(serial, v), tile[v])))
    default = _default_order(st, serial)
    wanted = [lp.name for lp in reversed(serial)]
    if len(wanted) > 1 and wanted != default:
        out.append((name, s, "reorder", tuple(wanted)))
    if sm.vector:
        v0 = next(lp for lp in serial if lp.kind == "inner" and lp.dims == (info.dims[0],))
        out.append((name, s, "vectorize", (v0.name, sm.vector)))
        if d.unroll and v0.trip > 1 and st.index > 0:
            out.append((name, s, "unroll", (v0.name,)))
    for lp in serial:
        if lp.unrolled and lp.trip > 1:
            out.append((name, s, "unroll", (lp.name,)))
    par = next((lp for lp in sm.loops if lp.parallel), None)
    if par is not None:
        if par.kind == "fused":
            n = len(par.dims)
            names = [lp.name for lp in serial[:n]]
            current = names[0]
            for k, inner in enumerate(names[1:]):
                fused = par.name if k == n - 2 else f"{current}_{inner}_t"
                out.append((name, s, "fuse", (inner, current, fused)))
                current = fused
        out.append((name, s, "parallel", (par.name,)))
    return out


def serial_name(loops, v: str) -> str:
    return next(lp.name for lp in loops if lp.kind == "inner" and lp.dims == (v,))


def _default_order(st, loops) -> list[str]:
    """The stage's loops, innermost first, as pyhalide orders them after the splits alone."""
    base = ([r[0] for r in st.rvars] + list(st.pure_dims)) if st.index > 0 else list(st.pure_dims)
    out = []
    for v in base:
        outer = next((lp.name for lp in loops if lp.kind == "outer" and lp.dims == (v,)), None)
        if outer is None:
            out.append(v)
        else:
            out += [serial_name(loops, v), outer]
    return out


def apply_directives(funcs: dict, dirs: list[tuple]) -> None:
    """Run the directives on the Funcs (name -> Func)."""
    import pyhalide as hl

    for name, s, method, args in dirs:
        if method not in ALLOWED:
            raise ValueError(f"not a schedule directive: {method}")
        f = funcs[name]
        target = f if s == 0 else f.update(s - 1)
        if method == "compute_at":
            g, var, stage = args
            f.compute_at(hl.LoopLevel(funcs[g], var, stage))
        else:
            getattr(target, method)(*args)


def python_source(dirs: list[tuple]) -> str:
    """The directives as a function to paste after the algorithm: `apply_schedule(pipeline)`."""
    var_names: list[str] = []
    for _, _, method, args in dirs:
        if method in ("split", "reorder", "vectorize", "unroll", "fuse", "parallel"):
            for a in args:
                if isinstance(a, str) and a not in var_names:
                    var_names.append(a)
        elif method == "compute_at" and args[1] not in var_names:
            var_names.append(args[1])
    lines = ["def apply_schedule(pipeline):", "    import pyhalide as hl", "",
             "    f = {func.name(): func for func in pipeline.funcs()}"]
    ident = {n: _identifier(n, k) for k, n in enumerate(var_names)}
    for n in var_names:
        kind = "RVar" if "$" in n else "Var"
        lines.append(f"    {ident[n]} = hl.{kind}({n!r})")
    for name, s, method, args in dirs:
        target = f"f[{name!r}]" + ("" if s == 0 else f".update({s - 1})")
        if method == "compute_at":
            g, var, stage = args
            level = f"hl.LoopLevel(f[{g!r}], {ident[var]}" + ("" if stage == -1 else f", {stage}") + ")"
            lines.append(f"    {target}.compute_at({level})")
            continue
        rendered = ", ".join(ident[a] if isinstance(a, str) else repr(a) for a in args)
        lines.append(f"    {target}.{method}({rendered})")
    return "\n".join(lines) + "\n"


def _identifier(name: str, k: int) -> str:
    ident = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    if not ident or ident[0].isdigit() or ident in ("f", "hl", "pipeline"):
        ident = f"v{k}_{ident}"
    return ident
