"""Halide's own Python apps (python_bindings/apps: bilateral_grid, blur, identity, interpolate,
local_laplacian), run unchanged but for their imports, where $HALIDE_PYTHON_APPS names that folder
in a checkout of Halide (images from `apps/images` two levels up). As Halide's CMake rules do,
each generator (and its autoscheduled aliases: Adams2019, Li2018, Mullapudi2016) is compiled
ahead of time by its own command line, `-e object,python_extension`, into a CPython extension
that the app imports and calls on numpy arrays and hl.Buffers. Skipped without a checkout or a
compiler. Their outputs are checked where a numpy model is short (blur), the others against
their manual schedule (the same algorithm)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

import pyhalide.imageio
from pyhalide.testing.halide_buffer import c_compiler

APPS = os.environ.get("HALIDE_PYTHON_APPS")
CC = c_compiler()
pytestmark = pytest.mark.skipif(not APPS or CC is None,
                                reason="set HALIDE_PYTHON_APPS to Halide's python_bindings/apps (and have cc)")

GENERATORS = {
    "bilateral_grid": ["bilateral_grid", "bilateral_grid_Adams2019", "bilateral_grid_Li2018",
                       "bilateral_grid_Mullapudi2016"],
    "blur": ["blur"],
    "identity": ["identity"],
    "interpolate": ["interpolate", "interpolate_Mullapudi2016"],
    "local_laplacian": ["local_laplacian", "local_laplacian_Mullapudi2016"],
}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The apps' scripts, importing pyhalide, and every generator built as an extension beside them."""
    here = tmp_path_factory.mktemp("python_apps")
    for script in Path(APPS).glob("*.py"):
        text = re.sub(r"^import halide as hl$", "import pyhalide as hl", script.read_text(), flags=re.M)
        text = re.sub(r"^import halide\.imageio$", "import pyhalide.imageio", text, flags=re.M)
        (here / script.name).write_text(text.replace("halide.imageio.", "pyhalide.imageio."))
    include, suffix = sysconfig.get_paths()["include"], sysconfig.get_config_var("EXT_SUFFIX")
    for app, names in GENERATORS.items():
        for name in names:
            subprocess.run([sys.executable, f"{app}_generator.py", "-g", name, "-o", ".", "-e",
                            "object,python_extension", "-f", name, "target=host"], cwd=here, check=True, timeout=900)
            subprocess.run([CC, "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-I", include, "-x", "c",
                            f"{name}.py.cpp", "-x", "none", f"{name}.o", "-o", f"{name}{suffix}", "-lpthread"],
                           cwd=here, check=True)
    return here


def images(tmp_path: Path) -> Path:
    """Halide's apps/images; an rgba.png made from rgb.png where a checkout lacks it (Git LFS)."""
    folder = Path(APPS).parent.parent / "apps" / "images"
    rgba = folder / "rgba.png"
    if rgba.is_file() and rgba.stat().st_size:
        return folder
    rgb = next(p for p in (folder / "rgb.png", Path(APPS).parent.parent / "tutorial" / "images" / "rgb.png")
               if p.is_file() and p.stat().st_size)
    planes = pyhalide.imageio.imread(str(rgb))
    pyhalide.imageio.imwrite(str(tmp_path / "rgba.png"), np.concatenate([planes, np.full_like(planes[:1], 255)]))
    (tmp_path / "gray.png").symlink_to(folder / "gray.png")
    return tmp_path


def run(folder: Path, *args) -> str:
    done = subprocess.run([sys.executable, *args], cwd=folder, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), *sys.path])})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success!" in done.stdout
    return done.stdout


def test_identity(built):
    run(built, "identity_app.py")


def test_blur(built, tmp_path):
    source = images(tmp_path) / "gray.png"
    run(built, "blur_app.py", str(source), str(tmp_path / "out.png"))
    image = pyhalide.imageio.imread(str(source)).astype(np.uint16)
    blur_x = (image[:, :-2] + image[:, 1:-1] + image[:, 2:]) // 3
    want = ((blur_x[:-2] + blur_x[1:-1] + blur_x[2:]) // 3).astype(np.uint8)
    got = pyhalide.imageio.imread(str(tmp_path / "out.png"))
    np.testing.assert_array_equal(got[: want.shape[0], : want.shape[1]], want)


_SAME_RESULTS = """
import sys
import numpy as np
import pyhalide.imageio
app, source = sys.argv[1], sys.argv[2]
image = pyhalide.imageio.imread(source)
if app == "bilateral_grid":
    inputs, shape, dtype = (image.astype(np.float32), 0.1), image.shape, np.float32
elif app == "interpolate":
    inputs, shape, dtype = (image.astype(np.float32) / 255.0,), (3, *image.shape[1:]), np.float32
else:
    inputs, shape, dtype = (image.astype(np.uint16) * 257, 8, 1.0 / 7, 1.0), (3, *image.shape[1:]), np.uint16
outs = []
for name in sys.argv[3:]:
    out = np.empty(shape, dtype)
    getattr(__import__(name), name)(*inputs, out)
    outs.append(out)
for name, out in zip(sys.argv[4:], outs[1:]):
    np.testing.assert_allclose(out.astype(np.float64), outs[0].astype(np.float64), rtol=1e-5, atol=1e-4,
                               err_msg=name)
print("Success!")
"""


@pytest.mark.parametrize("app, args", [("bilateral_grid", ["gray.png", "0.1"]), ("interpolate", ["rgba.png"]),
                                       ("local_laplacian", ["rgba.png", "8", "1", "1"])])
def test_autoscheduled_apps(built, tmp_path, app, args):
    """The app runs; each autoscheduled build computes what the hand-scheduled one does."""
    folder = images(tmp_path)
    run(built, f"{app}_app.py", str(folder / args[0]), *args[1:], str(tmp_path / "out.png"))
    assert (tmp_path / "out.png").stat().st_size > 0
    (tmp_path / "same.py").write_text(_SAME_RESULTS)
    run(built, str(tmp_path / "same.py"), app, str(folder / args[0]), *GENERATORS[app])
