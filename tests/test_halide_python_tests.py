"""Halide's own Python correctness tests (python_bindings/test/correctness), run unchanged but for
their imports, where $HALIDE_PYTHON_TESTS names that folder (in a checkout of Halide 21). The
scripts that import generators Halide's CMake rules build from C++ (addconstant, bit, callable,
multi_method_module, pystub, user_context) are not among them. Skipped without a checkout."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = os.environ.get("HALIDE_PYTHON_TESTS")
pytestmark = pytest.mark.skipif(not TESTS, reason="set HALIDE_PYTHON_TESTS to Halide's "
                                                  "python_bindings/test/correctness")

SCRIPTS = ["atomics", "autodiff", "basics", "boundary_conditions", "buffer", "compile_to", "division", "extern",
           "float_precision_test", "iroperator", "memoize", "multipass_constraints", "negate_test", "rdom",
           "realize_warnings", "serialization", "target", "tuple_select", "type", "var"]


@pytest.mark.parametrize("name", SCRIPTS)
def test_halides_python_test_passes(name, tmp_path):
    source = Path(TESTS) / f"{name}.py"
    text = source.read_text()
    text = re.sub(r"^import halide as hl$", "import pyhalide as hl", text, flags=re.M)
    text = re.sub(r"^from halide import", "from pyhalide import", text, flags=re.M)
    (tmp_path / source.name).write_text(text)
    for extra in Path(TESTS).glob("*.c"):  # (what a test loads, in its folder)
        shutil.copy(extra, tmp_path)
    done = subprocess.run([sys.executable, source.name], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
