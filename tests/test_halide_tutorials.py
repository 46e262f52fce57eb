"""Halide's own Python tutorials that compile ahead of time (10, 11, 15, 16, 21) or serialize (23),
run unchanged but for their imports, where $HALIDE_TUTORIAL names Halide's
`python_bindings/tutorial` folder (in a checkout of Halide, with `tutorial/images` two levels up).
The generated objects and extensions are built with the C compiler, as Halide's CMake rules build
them; each run script then imports what was built. Skipped without a checkout or a compiler."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from pyhalide.testing.halide_buffer import c_compiler

TUTORIAL = os.environ.get("HALIDE_TUTORIAL")
CC = c_compiler()
pytestmark = pytest.mark.skipif(not TUTORIAL or CC is None,
                                reason="set HALIDE_TUTORIAL to Halide's python_bindings/tutorial (and have cc)")


@pytest.fixture
def lessons(tmp_path) -> Path:
    """The tutorial's scripts, importing pyhalide, in a folder laid out as Halide's checkout."""
    here = tmp_path / "python_bindings" / "tutorial"
    here.mkdir(parents=True)
    for script in Path(TUTORIAL).glob("lesson_*.py"):
        text = script.read_text()
        text = re.sub(r"^import halide as hl$", "import pyhalide as hl", text, flags=re.M)
        text = re.sub(r"^import halide\.imageio$", "import pyhalide.imageio", text, flags=re.M)
        (here / script.name).write_text(text.replace("halide.imageio.", "pyhalide.imageio."))
    images = Path(TUTORIAL).parent.parent / "tutorial" / "images"
    (tmp_path / "tutorial").mkdir()
    (tmp_path / "tutorial" / "images").symlink_to(images)
    return here


def run(folder: Path, *args) -> str:
    done = subprocess.run([sys.executable, *args], cwd=folder, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def build_extension(folder: Path, name: str) -> None:
    """NAME.py.cpp and NAME.o as the module NAME (Halide's Python_add_library rule)."""
    include = sysconfig.get_paths()["include"]
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    subprocess.run([CC, "-shared", "-fPIC", "-O2", "-I", include, "-x", "c", f"{name}.py.cpp", "-x", "none",
                    f"{name}.o", "-o", f"{name}{suffix}", "-lpthread"], cwd=folder, check=True)


def test_lesson_10_compiles_an_extension_that_its_run_script_imports(lessons):
    assert "Halide pipeline compiled, but not yet run." in run(lessons, "lesson_10_aot_compilation_generate.py")
    build_extension(lessons, "lesson_10_halide")
    assert "Success!" in run(lessons, "lesson_10_aot_compilation_run.py")


def test_lesson_11_cross_compiles(lessons):
    assert "Success!" in run(lessons, "lesson_11_cross_compilation.py")


def test_lesson_15_generators_build_from_the_command_line(lessons):
    run(lessons, "lesson_15_generators.py", "-g", "my_first_generator", "-o", "out", "target=host")
    run(lessons, "lesson_15_generators.py", "-g", "my_second_generator", "-o", "out", "target=host",
        "parallel=false", "scale=3.0", "rotation=ccw", "output.type=uint16")
    assert {p.name for p in (lessons / "out").iterdir()} == {
        "my_first_generator.a", "my_first_generator.h", "my_second_generator.a", "my_second_generator.h"}


def test_lesson_16_layouts_build_and_run(lessons):
    for layout in ("planar", "interleaved", "either", "specialized"):
        run(lessons, "lesson_16_rgb_generate.py", "-g", "brighten", "-o", ".", "-e", "object,python_extension",
            "-f", f"brighten_{layout}", "target=host", f"layout={layout}")
        build_extension(lessons, f"brighten_{layout}")
    out = run(lessons, "lesson_16_rgb_run.py")
    assert "brighten_specialized on interleaved images" in out


def test_lesson_21_autoschedules_from_the_command_line(lessons):
    run(lessons, "lesson_21_auto_scheduler_generate.py", "-g", "auto_schedule_gen", "-o", ".", "-e",
        "object,python_extension", "-f", "auto_schedule_false", "target=host")
    run(lessons, "lesson_21_auto_scheduler_generate.py", "-g", "auto_schedule_gen", "-o", ".", "-e",
        "object,python_extension", "-f", "auto_schedule_true", "target=host", "autoscheduler=Mullapudi2016",
        "autoscheduler.parallelism=32", "autoscheduler.last_level_cache_size=16777216", "autoscheduler.balance=40")
    build_extension(lessons, "auto_schedule_false")
    build_extension(lessons, "auto_schedule_true")
    out = run(lessons, "lesson_21_auto_scheduler_run.py")
    assert "Manual schedule" in out and "Auto schedule" in out


def test_lesson_23_serializes(lessons):
    assert "Success!" in run(lessons, "lesson_23_serialization.py")
