"""Boundary conditions: Funcs that wrap an image or Func so it can be read outside its bounds.

Used as `hl.BoundaryConditions.repeat_edge(input)`. For Buffers and ImageParams the bounds come
from the image itself (read at run time); a Func needs explicit bounds [(min, extent), ...].
"""

from __future__ import annotations

from . import ir
from .errors import HalideError
from .expr import to_ir, wrap
from .func import Func
from .operators import clamp, likely, select
from .types import Int
from .var import Range, Var


def _source_bounds(source, bounds):
    """Per dimension (min, extent) as IR Exprs, or None where that dimension is unbounded."""
    if isinstance(source, Func):
        if bounds is None:
            raise HalideError(f"Boundary condition on Func {source.name()} needs explicit bounds")
        dims = source.dimensions()
    else:
        dims = source.dimensions()
        if bounds is None:
            name = source.name()
            bounds = [
                (wrap(ir.Variable(f"{name}.min.{i}", Int(32), ref=source)),
                 wrap(ir.Variable(f"{name}.extent.{i}", Int(32), ref=source)))
                for i in range(dims)
            ]
    bounds = list(bounds)
    if len(bounds) > dims:
        raise HalideError(f"Boundary condition: {len(bounds)} bounds for a {dims}-dimensional source")
    bounds += [None] * (dims - len(bounds))
    out = []
    for b in bounds:
        if b is None:
            out.append(None)
        else:
            lo, ext = (b.min, b.extent) if isinstance(b, Range) else b
            out.append((wrap(to_ir(lo)), wrap(to_ir(ext))))
    return dims, out


def _wrap_source(source, name: str, bounds, coord_fn, value_fn=None) -> Func:
    dims, bnds = _source_bounds(source, bounds)
    args = [Var(f"_{i}") for i in range(dims)]
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
    f = Func(f"{name}_{source.name()}")
    read = source[tuple(coords)]
    f[tuple(args)] = read if value_fn is None or inside is None else value_fn(inside, read)
    return f


def repeat_edge(source, bounds=None) -> Func:
    """Coordinates outside the bounds read the nearest edge pixel."""
    return _wrap_source(source, "repeat_edge", bounds, lambda a, lo, ext: clamp(likely(a), lo, lo + ext - 1))


def constant_exterior(source, value, bounds=None) -> Func:
    """Coordinates outside the bounds read `value`."""
    def value_fn(inside, read):  # a Python number takes the image's type, if it fits (select refuses one that doesn't)
        return select(inside, read, value)

    return _wrap_source(source, "constant_exterior", bounds,
                        lambda a, lo, ext: clamp(likely(a), lo, lo + ext - 1), value_fn)


def repeat_image(source, bounds=None) -> Func:
    """The image tiles the plane."""
    return _wrap_source(source, "repeat_image", bounds, lambda a, lo, ext: (a - lo) % ext + lo)


def mirror_image(source, bounds=None) -> Func:
    """Reflect at the edges, repeating the edge pixel: ... 1 0 | 0 1 2 3 | 3 2 ..."""
    def coord(a, lo, ext):
        t = (a - lo) % (2 * ext)
        return clamp(select(t < ext, t, 2 * ext - 1 - t) + lo, lo, lo + ext - 1)

    return _wrap_source(source, "mirror_image", bounds, coord)


def mirror_interior(source, bounds=None) -> Func:
    """Reflect at the edges without repeating the edge pixel: ... 2 1 | 0 1 2 3 | 2 1 ..."""
    def coord(a, lo, ext):
        t = (a - lo) % (2 * ext - 2)
        return clamp(select(t < ext, t, 2 * ext - 2 - t) + lo, lo, lo + ext - 1)

    return _wrap_source(source, "mirror_interior", bounds, coord)
