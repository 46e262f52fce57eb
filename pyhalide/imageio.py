"""Reading and writing images as Halide's Python bindings do (`halide.imageio`), on the imageio
package: a 3-D image comes back planar, numpy (c, y, x), which hl.Buffer sees as [x, y, c];
writing accepts planar or interleaved arrays."""

from __future__ import annotations

import numpy as np

from .errors import HalideError


def _imageio():
    try:
        import imageio.v2 as imageio
    except ImportError:
        try:
            import imageio
        except ImportError:
            raise HalideError("pyhalide.imageio needs the imageio package (pip install imageio)") from None
    return imageio


def _interleaved(a: np.ndarray) -> bool:
    """(y, x, c) with a few channels and c innermost in memory."""
    return a.ndim == 3 and a.shape[2] in (1, 2, 3, 4) and a.strides[2] == a.itemsize


def copy_to_planar(im) -> np.ndarray:
    """A copy in (c, y, x) order if im is interleaved (else a copy as it is)."""
    a = np.asarray(im)
    return np.ascontiguousarray(np.moveaxis(a, 2, 0)) if _interleaved(a) else a.copy()


def copy_to_interleaved(im) -> np.ndarray:
    """A copy in (y, x, c) order if im is a planar 3-D image (else a copy as it is)."""
    a = np.asarray(im)
    return np.ascontiguousarray(np.moveaxis(a, 0, 2)) if a.ndim == 3 and not _interleaved(a) else a.copy()


def imread(uri, format=None, **kwargs) -> np.ndarray:
    return copy_to_planar(_imageio().imread(uri, format, **kwargs))


def imwrite(uri, im, format=None, **kwargs) -> None:
    _imageio().imwrite(uri, copy_to_interleaved(im), format, **kwargs)
