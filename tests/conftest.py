"""Shared test configuration: Hypothesis profiles, a fixture for Func names, and one that runs a
check in a forked child.

Select one with HYPOTHESIS_PROFILE=extended (100 examples) or thorough (1000), or pytest's
--hypothesis-profile=...
"""

import os

import pytest
from hypothesis import settings

settings.register_profile("default", max_examples=30, deadline=None)
settings.register_profile("extended", max_examples=100, deadline=None)
settings.register_profile("thorough", max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture
def fresh_func_names():
    """Funcs named as in a fresh process, for tests whose messages name them (Halide names a Func
    given a name used before `f$1`). The names the test made stay taken after it."""
    from pyhalide import names

    before, renamed = set(names._func_names), dict(names._renamed)
    names._func_names.clear()
    names._renamed.clear()
    yield
    names._func_names.update(before)
    names._renamed.update(renamed)


@pytest.fixture
def passes_in_forked_child():
    """passes_in_forked_child(check): whether check() returned True in a forked child, which then
    exits at once (none of pytest's teardown runs there)."""

    def run(check) -> bool:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                ok = bool(check())
            except BaseException:  # noqa: BLE001 - any failure in the child is a failed check
                ok = False
            os.write(write, b"1" if ok else b"0")
            os._exit(0)
        os.close(write)
        _, status = os.waitpid(pid, 0)
        answer = os.read(read, 1)
        os.close(read)
        return answer == b"1" and status == 0

    return run
