"""Deep IR without Python's recursion limit: rerun a walk that hit it on a thread with a big stack.

The compiler walks IR recursively (visitors, mutators, the simplifier, code generation), so an
expression n levels deep needs a few times n Python frames. Most IR is shallow, so a walk runs
where it was called; only one that raises RecursionError is run again on a thread whose stack
(reserved, not committed, by the OS) holds a million frames, with the recursion limit
raised while it runs. The main thread keeps its limit, so runaway recursion there still gives a
RecursionError instead of overflowing its 8 MB stack.
"""

from __future__ import annotations

import functools
import sys
import threading

from .errors import HalideError

# Address space only: pages are committed as the stack grows (a 100,000-deep expression commits
# about 50 MB). Where the OS refuses so much, a smaller stack with proportionally fewer frames.
_STACK_BYTES = (1 << 32, 1 << 28)
_BYTES_PER_FRAME = 4096  # Python 3.11 frames use little C stack; calls through C use more
_lock = threading.Lock()
_deep_threads = 0  # how many deep walks run now (the recursion limit is interpreter-wide)
_normal_limit = sys.getrecursionlimit()
_local = threading.local()


def _what(fn, args) -> str:
    owner = args[0] if args else None
    name = getattr(owner, "name", None)
    if callable(name):
        return f"{type(owner).__name__} {name()}"
    return f"{fn.__qualname__}"


def _start(body) -> threading.Thread:
    """Start body on the biggest stack the OS grants, the recursion limit raised to match (under _lock)."""
    global _deep_threads, _normal_limit
    for size in _STACK_BYTES:
        previous = threading.stack_size(size)
        try:
            thread = threading.Thread(target=body, name="pyhalide-deep-ir", daemon=True)
            if _deep_threads == 0:
                _normal_limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_normal_limit, sys.getrecursionlimit(), size // _BYTES_PER_FRAME))
            thread.start()
        except (RuntimeError, MemoryError, ValueError):
            if _deep_threads == 0:
                sys.setrecursionlimit(_normal_limit)
            continue
        finally:
            threading.stack_size(previous)
        _deep_threads += 1
        return thread
    raise HalideError("The IR is too deep for Python's recursion limit, and no thread with a bigger stack could start")


def _run_on_big_stack(fn, args, kwargs):
    global _deep_threads
    outcome: list = []

    def body():
        _local.deep = True
        try:
            outcome.append((True, fn(*args, **kwargs)))
        except RecursionError:
            outcome.append((False, HalideError(f"{_what(fn, args)}: the IR is too deep to walk even in "
                                               f"{sys.getrecursionlimit()} Python frames; share subexpressions "
                                               f"(a Func computed once) instead of nesting them")))
        except BaseException as e:  # noqa: BLE001 - handed back to the caller's thread
            outcome.append((False, e))

    with _lock:
        thread = _start(body)
    try:
        thread.join()
    finally:
        with _lock:
            _deep_threads -= 1
            if _deep_threads == 0:
                sys.setrecursionlimit(_normal_limit)
    ok, value = outcome[0]
    if ok:
        return value
    raise value


def deep(fn):
    """fn, rerun on a big stack if its IR walk runs out of Python's recursion limit. fn must not
    change anything before the walk that fails (definitions validate before they store)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if getattr(_local, "deep", False):
            return fn(*args, **kwargs)
        try:
            return fn(*args, **kwargs)
        except RecursionError:
            pass  # outside the handler, so that the retry's own errors don't chain to it
        return _run_on_big_stack(fn, args, kwargs)

    return wrapper
