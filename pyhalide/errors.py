"""The exceptions pyhalide raises. Every misuse is a HalideError, as in Halide's Python bindings."""


class HalideError(RuntimeError):
    """Any error pyhalide reports: bad algorithm, bad schedule, bad input, failed runtime check."""


class CompileError(HalideError):
    """The algorithm or schedule is invalid; found before any code runs."""


class RuntimeCheckError(HalideError):
    """A check at pipeline entry failed (buffer too small, bad stride, ...); nothing was computed.
    Its text starts "Error: ", as Halide's runtime errors do (scripts match on it)."""

    def __init__(self, message: str = "", *args):
        if isinstance(message, str) and not message.startswith("Error: "):
            message = f"Error: {message}"
        super().__init__(message, *args)


class BufferIndexError(HalideError, IndexError):
    """A Buffer element outside the buffer: an IndexError too, as in Halide, so iterating a
    Buffer (`list(buf)`) stops at its end."""


class InternalError(Exception):
    """A broken invariant inside pyhalide (malformed IR, a pass's assumption violated): a bug in
    pyhalide, never the user's fault. Deliberately not a HalideError, so that no code path that
    handles user errors (or picks a slower fallback on one) can swallow it."""


class HalideValueError(HalideError, ValueError):
    """Bad arguments that Halide's bindings refuse with a ValueError (e.g. boundary-condition
    bounds that don't fit the source): catchable as either."""


class LayoutMismatch(HalideError):
    """A buffer's axis order or dense dimension 0 is not the layout the code was compiled for
    (nothing has run: a caller may compile for the buffers' own layouts and run that)."""
