"""Boundary conditions: Funcs that wrap an image or Func so it can be read outside its bounds.

Used as `hl.BoundaryConditions.repeat_edge(input)`, with Halide's keyword names (`f`, `bounds`,
`exterior`). For Buffers and ImageParams the bounds default to the image's own (read at run
time); a Func needs explicit bounds [(min, extent), ...]. A dimension whose min and extent are
both undefined (`(hl.Expr(), hl.Expr())`) or that is past the bounds given is left unbounded.
"""

from __future__ import annotations

from . import ir
from .errors import HalideError, HalideValueError
from .expr import Expr, to_ir, wrap
from .func import Func
from .names import func_name_family
from .operators import clamp, likely, select
from .types import Int
from .var import Range, Var


def _undefined(v) -> bool:
    return v is None or (isinstance(v, Expr) and not v.defined())


def _source_bounds(kind: str, source, bounds):
    """Per dimension (min, extent) as Exprs, or None where that dimension is unbounded. Bounds that
    don't fit the source are a ValueError as well as a HalideError, as Halide's bindings raise them."""
    dims = source.dimensions()
    if isinstance(source, Func):
        if bounds is None:
            raise HalideError(f"Boundary condition on Func {source.name()} needs explicit bounds")
    elif bounds is None:
        name = source.name()
        bounds = [
            (wrap(ir.Variable(f"{name}.min.{i}", Int(32), ref=source)),
             wrap(ir.Variable(f"{name}.extent.{i}", Int(32), ref=source)))
            for i in range(dims)
        ]
    bounds = list(bounds)
    if len(bounds) > dims:
        raise HalideValueError(f"Invalid arguments to {kind}: {len(bounds)} bounds for the {dims} dimensions of "
                               f"{source.name()}")
    out = []
    for i, b in enumerate(bounds):
        if b is None:
            out.append(None)
            continue
        try:
            lo, ext = (b.min, b.extent) if isinstance(b, Range) else b
        except (TypeError, ValueError):
            raise HalideValueError(f"Invalid arguments to {kind}: bounds of dimension {i} of {source.name()} must be "
                                   f"a (min, extent) pair, got {b!r}") from None
        if _undefined(lo) and _undefined(ext):
            out.append(None)
        elif _undefined(lo) or _undefined(ext):
            raise HalideValueError(f"Invalid arguments to {kind}: partially undefined bounds for dimension {i} of "
                                   f"{source.name()} (the {'min' if _undefined(lo) else 'extent'} is undefined)")
        else:
            out.append((wrap(to_ir(lo)), wrap(to_ir(ext))))
    return dims, out + [None] * (dims - len(out))


def _wrap_source(source, name: str, bounds, coord_fn, value_fn=None) -> Func:
    dims, bnds = _source_bounds(name, source, bounds)
    # As Halide: a Func's wrapper has the Func's arguments, an image's the implicit Vars _0, _1, ...
    args = source.args() if isinstance(source, Func) else [Var(f"_{i}") for i in range(dims)]
    coords = []
    inside = None
    for a, b in zip(args, bnds):
        if b is None:
            coords.append(a)
            continue
        lo, ext = b
        coords.append(coord_fn(a, lo, ext))
        cond = (a >= lo) & (a < lo + ext)
        inside = cond if inside is None else inside & cond
    f = Func(f"{name}_{func_name_family(source.name())}")
    read = source[tuple(coords)]
    f[tuple(args)] = read if value_fn is None or inside is None else value_fn(inside, read)
    return f


def repeat_edge(f, bounds=None) -> Func:
    """Coordinates outside the bounds read the nearest edge pixel."""
    return _wrap_source(f, "repeat_edge", bounds, lambda a, lo, ext: clamp(likely(a), lo, lo + ext - 1))


def constant_exterior(f, exterior, bounds=None) -> Func:
    """Coordinates outside the bounds read `exterior`."""
    def value_fn(inside, read):  # a Python number takes the image's type, if it fits (select refuses one that doesn't)
        return select(inside, read, exterior)

    return _wrap_source(f, "constant_exterior", bounds,
                        lambda a, lo, ext: clamp(likely(a), lo, lo + ext - 1), value_fn)


def _likely_inside(a, lo, ext, outside_coord):
    """As Halide's: the coordinate outside the bounds, and the clamp of likely(a) inside them, so
    that partitioned loops (and vector iterations inside the bounds) read a directly."""
    return select((a < lo) | (a >= lo + ext), outside_coord, clamp(likely(a), lo, lo + ext - 1))


def repeat_image(f, bounds=None) -> Func:
    """The image tiles the plane."""
    return _wrap_source(f, "repeat_image", bounds,
                        lambda a, lo, ext: _likely_inside(a, lo, ext, (a - lo) % ext + lo))


def mirror_image(f, bounds=None) -> Func:
    """Reflect at the edges, repeating the edge pixel: ... 1 0 | 0 1 2 3 | 3 2 ..."""
    def coord(a, lo, ext):
        t = (a - lo) % (2 * ext)
        return _likely_inside(a, lo, ext, clamp(select(t < ext, t, 2 * ext - 1 - t) + lo, lo, lo + ext - 1))

    return _wrap_source(f, "mirror_image", bounds, coord)


def mirror_interior(f, bounds=None) -> Func:
    """Reflect at the edges without repeating the edge pixel: ... 2 1 | 0 1 2 3 | 2 1 ..."""
    def coord(a, lo, ext):
        t = (a - lo) % (2 * ext - 2)
        return _likely_inside(a, lo, ext, clamp(select(t < ext, t, 2 * ext - 2 - t) + lo, lo, lo + ext - 1))

    return _wrap_source(f, "mirror_interior", bounds, coord)
