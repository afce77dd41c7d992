"""What one training call trains with, resolved once from the trainer's parameters.

:class:`TrainingSetup` is the explicit input of the parts the trainer's loop calls (the
engines, the choice of a training program, the epoch runners): none of them reads the
trainer itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import onnx

from skl_ortgrad._params import param_names
from skl_ortgrad.graph.external import check_external_data
from skl_ortgrad.optim import BaseLearningLoss, BaseLearningPenalty, BaseLearningRate
from skl_ortgrad.runtime.devices import log_severity, parse_device
from skl_ortgrad.runtime.options import session_options

#: Names the loss graph gives the label input and the loss output of a training model.
LABEL_NAME = "label"
LOSS_NAME = "loss"


@dataclass(frozen=True)
class TrainingSetup:
    """The model, the training objects and the runtime settings of a call.

    Attributes
    ----------
    model : onnx.ModelProto
        The model (its first output the prediction), external data checked.
    external_data_dir : str or None
    loss : BaseLearningLoss
    rate : BaseLearningRate
    penalty : BaseLearningPenalty
    batch_size : int
    device : str
    n_threads : int
    enable_logging : bool
    verbose : int
    weight_name : str or None
        The sample-weight input of the training model (default ``'sample_weight'``).
    backend : str
        The gradient backend, resolved.
    average : bool or int
        Averaged SGD's start (False: none).
    """

    model: onnx.ModelProto
    external_data_dir: str | None
    loss: BaseLearningLoss
    rate: BaseLearningRate
    penalty: BaseLearningPenalty
    batch_size: int
    device: str
    n_threads: int
    enable_logging: bool
    verbose: int
    weight_name: str | None
    backend: str
    average: bool | int

    @property
    def on_cpu(self) -> bool:
        return parse_device(self.device)[0] == "cpu"

    @property
    def severity(self) -> int:
        """onnxruntime's log severity for these settings."""
        return log_severity(self.enable_logging, self.verbose)

    def session_options(self) -> Any:
        """The options of every training session: threads and log severity."""
        return session_options(self.n_threads, self.severity)

    def checked_model(self) -> onnx.ModelProto:
        """The model, its external tensors read from ``external_data_dir`` only."""
        return check_external_data(self.model, self.external_data_dir)

    def loss_key(self, weighted: bool) -> tuple:
        """What the training model and its engine depend on besides the model: the
        weighting, the backend, the loss and its parameters."""
        loss = self.loss
        return (weighted, self.backend, type(loss).__name__,
                tuple((name, getattr(loss, name)) for name in param_names(type(loss))))
