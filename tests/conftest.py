"""Shared test configuration: Hypothesis profiles, a fixture for Func names, one that runs a
check in a forked child, and the devices CUDA pipelines run on.

Select one with HYPOTHESIS_PROFILE=extended (100 examples) or thorough (1000), or pytest's
--hypothesis-profile=...
"""

import os
import shutil

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


def gpu_unavailable_reason() -> str | None:
    """Why the tests marked `gpu` cannot run here (None where a GPU can run them)."""
    from pyhalide.codegen import gpu_runtime

    if os.environ.get("PYHALIDE_CUDA_DEVICE") in ("emulated", "serial"):
        return "PYHALIDE_CUDA_DEVICE asks for an emulation"
    return gpu_runtime.cuda_unavailable_reason()


@pytest.fixture(params=["serial", "emulated", pytest.param("gpu", marks=pytest.mark.gpu)])
def device(request, monkeypatch):
    """The two ways to run a CUDA pipeline without a GPU (its GPU loops as serial CPU loops; the
    emulated device: the CUDA C compiled with g++, a std::thread per GPU thread), and the GPU
    where there is one."""
    if request.param == "gpu":
        reason = gpu_unavailable_reason()
        if reason:
            pytest.skip(reason)
        return request.param
    if request.param == "emulated" and shutil.which("g++") is None:
        pytest.skip("the emulated CUDA device needs g++")
    monkeypatch.setenv("PYHALIDE_CUDA_DEVICE", request.param)
    return request.param


@pytest.fixture
def emulated(monkeypatch):
    """The emulated CUDA device only."""
    if shutil.which("g++") is None:
        pytest.skip("the emulated CUDA device needs g++")
    monkeypatch.setenv("PYHALIDE_CUDA_DEVICE", "emulated")
