"""The apps gallery: real pipelines, each with a hand schedule and a numpy reference.

Every app is a module `apps.<name>` exposing `APP`, an `apps.common.App`. The harness
(`python -m benchmarks`), the tests and the demos (`python -m apps.<name>`) all use that interface.
"""

NAMES = ["blur", "gemm", "conv_layer", "bilateral_grid", "local_laplacian", "harris", "unsharp",
         "camera_pipe", "histogram_equalize", "max_filter", "stencil_chain", "interpolate", "iir_blur", "nl_means"]


def load(name: str):
    """The App of apps.<name>."""
    import importlib

    if name not in NAMES:
        raise KeyError(f"unknown app {name!r}; the apps are {', '.join(NAMES)}")
    return importlib.import_module(f"apps.{name}").APP
