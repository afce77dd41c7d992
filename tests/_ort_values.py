"""Feed vectors of numpy arrays for the tests that call a training step directly."""

import numpy as np
from onnxruntime.capi._pybind_state import OrtDevice, OrtValue, OrtValueVector

CPU = OrtDevice(OrtDevice.cpu(), OrtDevice.default_memory(), 0)


def feeds(arrays: list[np.ndarray]) -> OrtValueVector:
    """The arrays as OrtValues on the CPU; the caller keeps the arrays alive."""
    vector = OrtValueVector()
    for array in arrays:
        vector.push_back(OrtValue.ortvalue_from_numpy(array, CPU))
    return vector
