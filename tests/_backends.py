"""The gradient backends installed here, for tests that run on each or need one."""

import pytest

from skl_ortgrad.gradient import training_available

TRAINING = training_available()
#: Every backend that runs here: "onnx" always, "onnxruntime-training" on Python <= 3.12.
AVAILABLE = ["onnx", "onnxruntime-training"] if TRAINING else ["onnx"]

#: For tests of onnxruntime-training's own graphs (YieldOp, com.microsoft rewrites): that
#: package has no wheel for Python 3.13+, where `make test` runs the suite too.
requires_training = pytest.mark.skipif(
    not TRAINING, reason="onnxruntime-training is not installed (no wheel for this Python)"
)
