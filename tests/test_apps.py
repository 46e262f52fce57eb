"""Every app in the gallery: its hand schedule and the default schedule match its numpy reference,
and (where the real Halide is installed) the same algorithm and schedule match in Halide too."""

import importlib.util

import numpy as np
import pytest

import pyhalide
from apps import NAMES, load
from apps.common import read_png, sample_image, write_png

AVAILABLE = [n for n in NAMES if importlib.util.find_spec(f"apps.{n}") is not None]


@pytest.mark.parametrize("name", AVAILABLE)
@pytest.mark.parametrize("scheduled", [True, False], ids=["hand", "default"])
def test_app_matches_reference(name, scheduled):
    app = load(name)
    if not scheduled and app.default_schedule_is_slow:
        pytest.skip(f"{name}'s default schedule inlines every stage (exponential work, as in Halide)")
    inputs = app.inputs("small")
    built = app.build(pyhalide, inputs)
    if scheduled:
        app.schedule(pyhalide, built)
    result = app.realize(pyhalide, built)
    expected = app.reference(inputs)
    assert result.shape == expected.shape
    assert app.check(result, expected), f"max difference {np.abs(result.astype(float) - expected).max()}"


@pytest.mark.parametrize("name", AVAILABLE)
def test_same_schedule_runs_in_halide(name):
    halide = pytest.importorskip("halide")
    app = load(name)
    inputs = app.inputs("small")
    built = app.build(halide, inputs)
    app.schedule(halide, built)
    assert app.check(app.realize(halide, built), app.reference(inputs))


def test_png_round_trip(tmp_path):
    img = sample_image(31, 47)
    write_png(tmp_path / "rgb.png", img)
    assert np.array_equal(read_png(tmp_path / "rgb.png"), img)
    grey = img[:, :, 1]
    write_png(tmp_path / "grey.png", grey)
    assert np.array_equal(read_png(tmp_path / "grey.png"), grey)
