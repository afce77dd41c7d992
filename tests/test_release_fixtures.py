"""Models pickled and saved by an earlier release load and resume bit for bit.

``tests/fixtures/release-<version>/`` holds what ``tests/fixtures/make_release_fixtures.py``
wrote with that release's code: the data, a pickle and a :func:`skl_ortgrad.save` file of
each model, and per environment (gradient backend, onnxruntime version) the weights and
predictions that resuming them gave. The current code must give the same values, to the
last bit: a refactoring of the trainer or of the state codec that changes a rounding, an
order of updates or a resumed counter fails here.
"""

from __future__ import annotations

import json
import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest

import skl_ortgrad
from skl_ortgrad import PickleVersionWarning

FIXTURES = Path(__file__).parent / "fixtures"


def _maker():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "make_release_fixtures", FIXTURES / "make_release_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MAKER = _maker()
RELEASES = sorted(p for p in FIXTURES.glob("release-*") if p.is_dir())


def _pinned_onnxruntime() -> str | None:
    """The onnxruntime version requirements.txt pins for this Python, if any."""
    from packaging.markers import Marker

    requirements = Path(__file__).parents[1] / "requirements.txt"
    for line in requirements.read_text().splitlines():
        spec, _, marker = line.partition(";")
        name, _, version = spec.strip().partition("==")
        if name not in ("onnxruntime", "onnxruntime-training-cpu"):
            continue
        if not marker.strip() or Marker(marker.strip()).evaluate():
            return version.strip()
    return None


def test_there_is_a_release_fixture():
    assert RELEASES, "no tests/fixtures/release-* folder"


@pytest.mark.parametrize("release", RELEASES, ids=lambda p: p.name)
@pytest.mark.parametrize("name", list(MAKER.models()))
@pytest.mark.parametrize("kind", ["pkl", "onnx"])
def test_an_earlier_release_resumes_bit_for_bit(release, name, kind):
    environment = MAKER.environment()
    expected_file = release / f"expected-{environment}.npz"
    known = json.loads((release / "environments.json").read_text())
    if not expected_file.exists():
        import onnxruntime

        # Recorded for every environment of `make test`; another onnxruntime rounds
        # differently and has no record to compare with.
        assert onnxruntime.__version__ != _pinned_onnxruntime(), (
            f"{release.name} has no expected values for {environment} (known: {known})")
        pytest.skip(f"no record for {environment}: onnxruntime is not the pinned version")
    with np.load(release / "data.npz") as loaded:
        arrays = dict(loaded)
    with np.load(expected_file) as loaded:
        expected = {key.split(".", 2)[2]: loaded[key] for key in loaded.files
                    if key.startswith(f"{name}.{kind}.")}
    assert expected, f"nothing recorded for {name}.{kind}"
    path = release / f"{name}.{kind}"
    with warnings.catch_warnings():
        # A pickle of another version warns (PickleVersionWarning), by design.
        warnings.simplefilter("ignore", PickleVersionWarning)
        model = (pickle.loads(path.read_bytes()) if kind == "pkl"
                 else skl_ortgrad.load(path))
    target = MAKER.models()[name][1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = MAKER.resume(model, arrays, target)
    assert sorted(got) == sorted(expected)
    for key, value in expected.items():
        np.testing.assert_array_equal(got[key], value, err_msg=f"{name}.{kind}: {key}")
