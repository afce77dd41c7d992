"""The gradient backends this environment is configured to have, for tests that run on each
or need one.

What runs is keyed on what ``requirements.txt`` promises for this Python, not on what
happens to import: where it installs onnxruntime-training-cpu (its marker holds, Python
< 3.13), the training backend's tests run, so a missing or broken install fails them (and
``test_training_backend_is_installed_where_promised``) instead of turning them into skips
or shrinking the parametrizations; where it installs plain onnxruntime (no training wheel,
Python >= 3.13), they are skipped.
"""

from pathlib import Path

import pytest
from packaging.requirements import Requirement

_REQUIREMENTS = Path(__file__).resolve().parent.parent / "requirements.txt"


def _training_promised() -> bool:
    """True if requirements.txt installs onnxruntime-training-cpu for this Python."""
    for line in _REQUIREMENTS.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        if requirement.name == "onnxruntime-training-cpu":
            return requirement.marker is None or requirement.marker.evaluate()
    raise AssertionError(f"{_REQUIREMENTS} no longer names onnxruntime-training-cpu")


TRAINING = _training_promised()
#: Every backend configured here: "onnx" always, "onnxruntime-training" where promised.
AVAILABLE = ["onnx", "onnxruntime-training"] if TRAINING else ["onnx"]

#: For tests of onnxruntime-training's own graphs (YieldOp, com.microsoft rewrites): that
#: package has no wheel for Python 3.13+, where `make test` runs the suite too.
requires_training = pytest.mark.skipif(
    not TRAINING,
    reason="requirements.txt installs no onnxruntime-training on this Python (no wheel)",
)
