"""Decisions to schedule directives: applied to the user's Funcs, and printed as Python to paste.

One list of directives, (func, stage, method, args), is both what is applied and what is
printed, so the source a user pastes is exactly the schedule the search chose.
"""

from __future__ import annotations

from dataclasses import replace

from .analysis import Analysis
from .loop_nest import INLINE, FuncModel, inner_loop_index, rfactor_names, stage_loops

ALLOWED = {"compute_root", "compute_at", "store_at", "split", "reorder", "vectorize", "unroll", "fuse", "parallel",
           "rfactor", "clone_in", "unscheduled"}


def directives(analysis: Analysis, models: dict[str, FuncModel], fixed: set,
               output_regions: dict) -> list[tuple]:
    """(func name, stage index, method, args) for every Func the search scheduled."""
    # the copies the search scheduled as Funcs of their own are made first; a copy inlined like
    # its original computes what the original would, and is left out
    out = [(producer, 0, "clone_in", (consumers, clone)) for clone, (producer, consumers) in analysis.clones.items()
           if producer not in fixed and not (models[clone].decision == models[producer].decision == INLINE)]
    guard = not analysis.inputs_always_in_bounds(output_regions)
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
            stage = d.stage if d.stage != last else -1
            out.append((name, 0, "compute_at", (d.consumer, loop.name, stage)))
            if d.store is not None:
                out.append((name, 0, "store_at", (d.consumer, gm.stages[d.stage].loops[d.store].name, stage)))
        extents = {v: ext for v, (_, ext) in zip(info.dims, fm.region)}
        for st, sm in zip(info.stages, fm.stages):
            # an output's updates would round up past its buffer
            # Pure stages shift inwards (Halide's default): the space splits and vectorizes only
            # extents at least the factor, so the loops stay inside the region. Updates round up,
            # computing past the region: guarded where that would read past an input or write
            # past an output.
            st_guard = st.index > 0 and (guard or info.is_output)
            stage_dirs = _stage_directives(name, info, st, sm, d, extents, st_guard)
            # an update left as written is the search's choice: say so (no "not scheduled" warning)
            out += stage_dirs or ([(name, st.index, "unscheduled", ())] if st.index > 0 else [])
    return out


def _stage_directives(name, info, st, sm, d, extents, guard: bool) -> list[tuple]:
    s = st.index
    if sm.loops and sm.loops[0].kind == "band":
        return _rfactor_directives(name, info, st, sm, d, extents)
    out = []
    serial, _ = stage_loops(info, st, replace(d, parallel=0), extents, sm.rv_extents, 1)
    tile = dict(zip(info.dims, d.tile)) if d.tile else {}
    # Guarded tails cost time (a guard per vector of a producer computed per vector of its
    # consumer doubles blur's time), so they are used only where needed.
    tail = ("GuardWithIf",) if guard else ()
    split_tail = tail if s > 0 else ()
    for lp in serial:
        if lp.kind == "outer":
            v = lp.dims[0]
            out.append((name, s, "split", (v, lp.name, serial_name(serial, v), tile[v], *split_tail)))
    default = _default_order(st, serial)
    wanted = [lp.name for lp in reversed(serial)]
    if len(wanted) > 1 and wanted != default:
        out.append((name, s, "reorder", tuple(wanted)))
    if sm.vector:
        out.append((name, s, "vectorize", (serial_name(serial, info.dims[0]), sm.vector, *tail)))
    # Unrolling by the loop's own trip count splits it by that constant first: a loop over a
    # region whose extent is not a compile-time constant can be unrolled too.
    for lp in serial:
        if lp.unrolled and lp.trip > 1:
            out.append((name, s, "unroll", (lp.name, lp.trip, *tail)))
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


def _rfactor_directives(name, info, st, sm, d, extents) -> list[tuple]:
    """The outermost RVar split into bands, each band reduced into its own partial result
    (computed at root, its bands in parallel), then the partials combined; initialising and
    combining are vectorized along dimension 0 where it is wide enough."""
    s = st.index
    bands = sm.loops[0]
    within_name = rfactor_names(st.rvars[-1][0])[1]
    within = next(lp for lp in sm.loops if lp.name == within_name)
    band_var = "band" if "band" not in info.dims else f"band_{name}"
    partial = f"{name}_s{s}_intm"
    out = [(name, s, "split", (st.rvars[-1][0], bands.name, within.name, within.trip)),
           (name, s, "rfactor", (bands.name, band_var, partial)),
           (partial, 0, "compute_root", ())]
    x = info.dims[0] if info.dims else None
    vector = d.vector if x is not None and extents[x] >= d.vector > 1 else 0
    if vector:
        out.append((partial, 0, "vectorize", (x, vector)))
    out.append((partial, 1, "parallel", (band_var,)))
    if vector:  # the combining loop over the bands outside the vectorized one
        out += [(name, s, "reorder", (x, bands.name)), (name, s, "vectorize", (x, vector))]
    return out


def serial_name(loops, v: str) -> str:
    return loops[inner_loop_index(loops, v)].name


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
        if method in ("compute_at", "store_at"):
            g, var, stage = args
            getattr(f, method)(hl.LoopLevel(funcs[g], var, stage))
        elif method == "rfactor":
            rvar, var, partial = args
            funcs[partial] = target.rfactor(rvar, var)
        elif method == "clone_in":
            consumers, clone = args
            funcs[clone] = f.clone_in([funcs[c] for c in consumers])
        else:
            getattr(target, method)(*args)


def python_source(dirs: list[tuple]) -> str:
    """The directives as a function to paste after the algorithm: `apply_schedule(pipeline)`."""
    var_names: list[str] = []
    for _, _, method, args in dirs:
        for a in _loop_names(method, args):
            if a not in var_names:
                var_names.append(a)
    lines = ["def apply_schedule(pipeline):", "    import pyhalide as hl", "",
             "    f = pipeline.funcs_by_name()"]
    ident: dict[str, str] = {}
    for k, n in enumerate(var_names):
        i = _identifier(n, k)
        ident[n] = i if i not in ident.values() else f"{i}_{k}"
    for n in var_names:
        kind = "RVar" if "$" in n else "Var"
        lines.append(f"    {ident[n]} = hl.{kind}({n!r})")
    for name, s, method, args in dirs:
        target = f"f[{name!r}]" + ("" if s == 0 else f".update({s - 1})")
        if method in ("compute_at", "store_at"):
            g, var, stage = args
            level = f"hl.LoopLevel(f[{g!r}], {ident[var]}" + ("" if stage == -1 else f", {stage}") + ")"
            lines.append(f"    {target}.{method}({level})")
            continue
        if method == "rfactor":
            lines.append(f"    f[{args[2]!r}] = {target}.rfactor({ident[args[0]]}, {ident[args[1]]})")
            continue
        if method == "clone_in":
            consumers = ", ".join(f"f[{c!r}]" for c in args[0])
            lines.append(f"    f[{args[1]!r}] = {target}.clone_in([{consumers}])")
            continue
        names = _loop_names(method, args)
        rendered = ", ".join(ident[a] if k < len(names) else _literal(a) for k, a in enumerate(args))
        lines.append(f"    {target}.{method}({rendered})")
    return "\n".join(lines) + "\n"


def _loop_names(method: str, args: tuple) -> tuple:
    """The arguments of a directive that name loops (the rest are factors and tail strategies)."""
    count = {"split": 3, "vectorize": 1, "unroll": 1, "parallel": 1, "rfactor": 2}.get(method, len(args))
    if method in ("compute_at", "store_at"):
        return (args[1],)
    if method == "clone_in":
        return ()
    return args[:count]


def _literal(a) -> str:
    if isinstance(a, str):
        return f"hl.TailStrategy.{a}"
    return repr(a)


def _identifier(name: str, k: int) -> str:
    ident = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    if not ident or ident[0].isdigit() or ident in ("f", "hl", "pipeline"):
        ident = f"v{k}_{ident}"
    return ident
