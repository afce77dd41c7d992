r"""The seed API's mini-batch loader (onnxcustom's ``training.data_loader``).

:class:`OrtDataLoader` holds a dataset ``(X, y[, sample_weight])`` once, as numpy arrays
and as ``OrtValue`` objects on a device, and yields batches of ``batch_size`` consecutive
rows, as numpy arrays, as ``OrtValue`` objects, or bound to an onnxruntime
``SessionIOBinding``. A pass over :math:`n > b` rows yields :math:`\lceil n / b \rceil`
batches of :math:`b` rows each:

* ``random_iter=True``: every batch starts at a row drawn uniformly in
  :math:`[0, n - b]`;
* ``random_iter=False``: the batches start at :math:`0, b, 2b, \dots`, the last one moved
  back to :math:`n - b` so that it is full too.

A dataset of at most :math:`b` rows is one batch, the whole of it. A batch is a slice of
contiguous rows: on the CPU its ``OrtValue`` borrows the arrays' memory (onnxruntime's
``ortvalue_from_numpy``), no row is copied.

The estimators do not use it: their loader (:class:`~skl_ortgrad.runtime.batches.
MiniBatchLoader`) shuffles whole permutations and feeds training steps.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from onnxruntime.capi._pybind_state import OrtDevice, OrtValue

from skl_ortgrad.runtime.devices import ort_device
from skl_ortgrad.runtime.random_state import check_random_state

__all__ = ["OrtDataLoader"]


def _device_name(device: OrtDevice) -> str:
    """``'cpu'`` or ``'cuda:<index>'`` for an ``OrtDevice``."""
    if device.device_type() == OrtDevice.cpu():
        return "cpu"
    return f"cuda:{device.device_id()}"


class OrtDataLoader:
    """Batches of consecutive rows of ``(X, y[, sample_weight])``, see the module.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
        The features.
    y : array of shape (n_samples,) or (n_samples, n_targets)
        The labels; a vector becomes one column.
    sample_weight : array of shape (n_samples,), optional
        The sample weights.
    batch_size : int, default=20
        Rows of every batch.
    device : str or OrtDevice, default='cpu'
        Where the ``OrtValue`` objects live: ``'cpu'``, ``'cuda'``, ``'cuda:<index>'``.
    random_iter : bool, default=True
        Batches at random starts (True) or one after the other (False).
    random_state : None, int or numpy.random.RandomState
        The random starts' generator, as scikit-learn takes it (None: numpy's global
        generator, what onnxcustom draws from).

    The properties ``desc`` (shape and dtype of every array: X, y, then the weights if
    any), ``data_np`` and ``data_ort`` (the arrays, as numpy arrays and as ``OrtValue``
    objects on ``device``) describe the dataset.

    Raises
    ------
    ValueError
        If the arrays do not have as many rows, or for an unknown device.
    """

    def __init__(self, X: Any, y: Any, sample_weight: Any = None, batch_size: int = 20,
                 device: str | OrtDevice = "cpu", random_iter: bool = True,
                 random_state: Any = None) -> None:
        X = np.ascontiguousarray(X)
        y = np.ascontiguousarray(y)
        y = y.reshape((-1, 1)) if y.ndim == 1 else y
        arrays = [X, y]
        if sample_weight is not None:
            arrays.append(np.ascontiguousarray(sample_weight).reshape((-1,)))
        rows = [array.shape[0] for array in arrays]
        if len(set(rows)) != 1:
            raise ValueError(f"X, y (and sample_weight) must have as many rows, got {rows}.")
        self.batch_size = int(batch_size)
        self.device = device if isinstance(device, OrtDevice) else ort_device(device)
        self.random_iter = random_iter
        self.random_state = random_state
        self._arrays = tuple(arrays)
        self._to_device()

    def _to_device(self) -> None:
        self._values = tuple(OrtValue.ortvalue_from_numpy(array, self.device)
                             for array in self._arrays)
        self._generator = check_random_state(self.random_state)

    @property
    def desc(self) -> list[tuple[tuple[int, ...], np.dtype]]:
        """Shape and dtype of every array."""
        return [(array.shape, array.dtype) for array in self._arrays]

    @property
    def data_np(self) -> tuple[np.ndarray, ...]:
        """The arrays: X, y (one column for a vector), the weights if any."""
        return self._arrays

    @property
    def data_ort(self) -> tuple[OrtValue, ...]:
        """The arrays as ``OrtValue`` objects on the device."""
        return self._values

    def __len__(self) -> int:
        """The number of rows."""
        return self._arrays[0].shape[0]

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(..., ..., batch_size={self.batch_size!r}, "
                f"device={_device_name(self.device)!r})")

    def __getstate__(self) -> dict[str, Any]:
        # OrtValue and OrtDevice objects do not pickle: the arrays and the device's name do.
        return {"arrays": self._arrays, "batch_size": self.batch_size,
                "device": _device_name(self.device), "random_iter": self.random_iter,
                "random_state": self.random_state}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._arrays = state["arrays"]
        self.batch_size = state["batch_size"]
        self.device = ort_device(state["device"])
        self.random_iter = state["random_iter"]
        self.random_state = state["random_state"]
        self._to_device()

    def starts(self) -> list[int]:
        """The first row of every batch of one pass (see the module)."""
        n, size = len(self), self.batch_size
        if n <= size:
            return [0]
        count = -(-n // size)
        if self.random_iter:
            return [int(start) for start in self._generator.randint(0, n - size + 1, count)]
        return [min(i * size, n - size) for i in range(count)]

    def _rows(self) -> Iterator[tuple[int, int]]:
        size = min(self.batch_size, len(self))
        for start in self.starts():
            yield start, size

    def iter_numpy(self) -> Iterator[tuple[np.ndarray, ...]]:
        """Yield every batch as numpy arrays (views of the dataset's rows)."""
        if self.device.device_type() != OrtDevice.cpu():
            raise RuntimeError("iter_numpy needs device='cpu'; use iter_ortvalue.")
        for start, size in self._rows():
            yield tuple(array[start:start + size] for array in self._arrays)

    def iter_ortvalue(self) -> Iterator[tuple[OrtValue, ...]]:
        """Yield every batch as ``OrtValue`` objects on the device (on the CPU they
        borrow the dataset's memory)."""
        for start, size in self._rows():
            yield tuple(OrtValue.ortvalue_from_numpy(array[start:start + size], self.device)
                        for array in self._arrays)

    def iter_bind(self, bind: Any, names: list[str]) -> Iterator[int]:
        """Bind every batch to the inputs ``names`` of an onnxruntime ``SessionIOBinding``
        (the device memory of the dataset at the batch's offset, nothing copied) and yield
        its number of rows.

        Parameters
        ----------
        bind : SessionIOBinding
            onnxruntime's binding (``session.io_binding()._iobinding``).
        names : list of str
            The inputs taking X, y, then the weights when the loader has some; further
            names (a learning rate...) are left to the caller.

        Raises
        ------
        ValueError
            If there are fewer names than arrays.
        """
        if len(names) < len(self._arrays):
            raise ValueError(f"iter_bind needs a name for each of the {len(self._arrays)} "
                             f"arrays (X, y[, sample_weight]), got {names}.")
        for start, size in self._rows():
            for name, array, value in zip(names, self._arrays, self._values, strict=False):
                row_bytes = array.itemsize * int(np.prod(array.shape[1:], dtype=np.int64))
                bind.bind_input(name, self.device, array.dtype, [size, *array.shape[1:]],
                                value.data_ptr() + start * row_bytes)
            yield size
