"""The exceptions pyhalide raises. Every misuse is a HalideError, as in Halide's Python bindings."""


class HalideError(RuntimeError):
    """Any error pyhalide reports: bad algorithm, bad schedule, bad input, failed runtime check."""


class CompileError(HalideError):
    """The algorithm or schedule is invalid; found before any code runs."""


class RuntimeCheckError(HalideError):
    """A check at pipeline entry failed (buffer too small, bad stride, ...); nothing was computed."""
