"""The autoscheduler entry, as in Halide: `Pipeline.apply_autoscheduler(target, AutoschedulerParams)`.

pyhalide does no search itself. A strategy is a function `fn(pipeline, target, params) ->
AutoSchedulerResults` that schedules the pipeline's Funcs in place, registered under a name with
`register_autoscheduler`. A name not registered is first looked for in the `autoscheduler`
package (a sibling of pyhalide, which registers its strategies when imported); pyhalide knows
nothing else about it. Halide loads its autoschedulers from shared libraries with
`hl.load_plugin`; pyhalide's are Python, so `load_plugin` accepts the call and does nothing.
"""

from __future__ import annotations

import importlib

from .errors import HalideError

SIBLING_PACKAGE = "autoscheduler"

_registry: dict[str, object] = {}


class AutoschedulerParams:
    """Which autoscheduler to run (`name`) and its options (`extra`: str -> str, as Halide keeps
    them; other keys and values are stored as their str(), as Halide's Python binding does).

    `extra` gives a copy, as Halide's does: assign a whole dict to change it."""

    def __init__(self, name: str = "", extra: dict | None = None):
        if not isinstance(name, str):
            raise HalideError(f"AutoschedulerParams: the name must be a str, got {name!r}")
        self.name = name
        self.extra = {} if extra is None else extra

    @property
    def extra(self) -> dict[str, str]:
        return dict(self._extra)

    @extra.setter
    def extra(self, value) -> None:
        if not hasattr(value, "items"):
            raise HalideError(f"AutoschedulerParams: extra must be a dict, got {value!r}")
        self._extra = {str(k): str(v) for k, v in value.items()}

    def __eq__(self, other):
        if not isinstance(other, AutoschedulerParams):
            return NotImplemented
        return self.name == other.name and self._extra == other._extra

    __hash__ = None

    def __repr__(self):
        return f"AutoschedulerParams({self.name!r}, {self._extra!r})"


class AutoSchedulerResults:
    """What apply_autoscheduler returns: Halide's fields (the params and target it ran with, the
    schedule as source, the featurization), plus `details` for whatever a strategy wants to add
    (any other attribute may be set too)."""

    def __init__(self, autoscheduler_params: AutoschedulerParams | None = None, target=None,
                 schedule_source: str = "", featurization=None, details=None):
        self.autoscheduler_params = AutoschedulerParams() if autoscheduler_params is None else autoscheduler_params
        self.target = target
        self.schedule_source = schedule_source
        self.featurization = [] if featurization is None else featurization
        self.details = details

    def __repr__(self):
        lines = self.schedule_source.count("\n") if isinstance(self.schedule_source, str) else "?"
        return (f"AutoSchedulerResults({self.autoscheduler_params.name!r}, target={str(self.target)!r}, "
                f"{lines} lines of schedule_source)")


def load_plugin(lib_name: str) -> None:
    """Halide loads an autoscheduler library here; pyhalide's autoschedulers are built in (the
    `autoscheduler` package), so this accepts the call and loads nothing."""
    if not isinstance(lib_name, str):
        raise HalideError(f"load_plugin takes the library's name as a str, got {lib_name!r}")


def register_autoscheduler(name: str, fn, replace: bool = False) -> None:
    """Make `fn(pipeline, target, params) -> AutoSchedulerResults` the strategy called `name`.
    Registering a name twice is refused unless `replace` (or it is the same function)."""
    if not isinstance(name, str) or not name:
        raise HalideError(f"register_autoscheduler: the name must be a non-empty str, got {name!r}")
    if not callable(fn):
        raise HalideError(f"register_autoscheduler({name!r}): {fn!r} is not callable")
    old = _registry.get(name)
    if old is not None and old is not fn and not replace:
        raise HalideError(f"register_autoscheduler: an autoscheduler named {name!r} is already registered "
                          f"({old!r}); pass replace=True to replace it")
    _registry[name] = fn


def unregister_autoscheduler(name: str) -> None:
    """Forget the strategy called `name` (nothing happens if there is none)."""
    _registry.pop(name, None)


def registered_autoschedulers() -> list[str]:
    """The names of the registered strategies, sorted."""
    return sorted(_registry)


def _import_sibling() -> str | None:
    """Import the `autoscheduler` package (it registers its strategies); None if that worked,
    else why it didn't."""
    try:
        importlib.import_module(SIBLING_PACKAGE)
    except ModuleNotFoundError as e:
        if e.name != SIBLING_PACKAGE:
            return f"importing the {SIBLING_PACKAGE} package failed: {e}"
        return f"the {SIBLING_PACKAGE} package is not installed"
    except ImportError as e:
        return f"importing the {SIBLING_PACKAGE} package failed: {e}"
    return None


def find_autoscheduler(name: str):
    """The strategy registered as `name`, importing the `autoscheduler` package first if needed."""
    if not isinstance(name, str) or not name:
        raise HalideError("apply_autoscheduler was called with no Autoscheduler specified "
                          "(AutoschedulerParams.name is empty)")
    fn = _registry.get(name)
    if fn is not None:
        return fn
    why = _import_sibling()
    fn = _registry.get(name)
    if fn is not None:
        return fn
    known = ", ".join(registered_autoschedulers()) or "(none)"
    note = f" ({why})" if why else ""
    raise HalideError(f"Unknown autoscheduler name {name!r}; known names are: {known}{note}")


def apply_autoscheduler(pipeline, target, params: AutoschedulerParams) -> AutoSchedulerResults:
    """Run the strategy `params.name` on `pipeline` for `target` (an hl.Target, a target string, or
    None: the JIT target). The strategy schedules the pipeline's Funcs; if it fails, they keep the
    schedule they had."""
    from .target import resolve_target

    if not isinstance(params, AutoschedulerParams):
        raise HalideError(f"apply_autoscheduler takes an hl.AutoschedulerParams, got {params!r}")
    target = resolve_target(target)
    fn = find_autoscheduler(params.name)
    saved = pipeline.copy_schedule()
    try:
        results = fn(pipeline, target, params)
        if not isinstance(results, AutoSchedulerResults):
            raise HalideError(f"Autoscheduler {params.name!r} ({fn!r}) returned {results!r}, "
                              "not an hl.AutoSchedulerResults")
    except BaseException:
        pipeline.set_schedule(saved)
        raise
    if results.target is None:
        results.target = target
    if not results.autoscheduler_params.name:
        results.autoscheduler_params = params
    return results
