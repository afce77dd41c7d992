"""The model with its loss, its forward/backward engine, and the losses of rows.

:func:`training_model` appends a loss object's graph to the model (one scalar ``loss``, or
one loss per row); :class:`Engines` builds, on first use, the gradient engine of that
training model (:class:`~skl_ortgrad.gradient.forward_backward.OrtGradientForwardBackward`,
with the call's backend) and the session of its per-row losses, once per loss and
weighting. A trainer keeps one :class:`Engines` (onnxruntime objects do not pickle: it is
rebuilt after unpickling).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnxruntime import InferenceSession

from skl_ortgrad.gradient.forward_backward import OrtGradientForwardBackward
from skl_ortgrad.graph.model import OPSET, initializers_to_inputs
from skl_ortgrad.graph.opset import main_opset
from skl_ortgrad.objective.merge import merge_loss_graph
from skl_ortgrad.runtime.devices import device_providers, parse_device
from skl_ortgrad.runtime.sessions import cached_session
from skl_ortgrad.training.setup import LABEL_NAME, LOSS_NAME, TrainingSetup


def training_model(setup: TrainingSetup, dtype: np.dtype, weighted: bool,
                   per_row: bool = False) -> onnx.ModelProto:
    """The model with the loss appended: one scalar ``loss``, or one loss per row; the
    label input ``label`` and, ``weighted``, the sample weights (``weight_name``)."""
    opset = main_opset(setup.model, default=OPSET)
    weight_name = (setup.weight_name or "sample_weight") if weighted else None
    loss_graph = setup.loss.build_onnx_function(
        min(opset, OPSET), setup.device, weighted=weighted, dtype=dtype, per_row=per_row)
    return merge_loss_graph(
        setup.checked_model(), loss_graph, output_index=0, label_name=LABEL_NAME,
        weight_name=weight_name, loss_name=LOSS_NAME,
    )


class Engines:
    """Gradient engines and per-row loss sessions of one model, built on first use."""

    def __init__(self) -> None:
        self._engines: dict[tuple, OrtGradientForwardBackward] = {}
        self._row_losses: dict[tuple, InferenceSession] = {}

    def built(self) -> list[OrtGradientForwardBackward]:
        """The engines built so far."""
        return list(self._engines.values())

    def engine(self, setup: TrainingSetup, names: list[str], dtype: np.dtype,
               weighted: bool) -> OrtGradientForwardBackward:
        """The forward/backward engine of model + loss training ``names``."""
        key = setup.loss_key(weighted)
        if key not in self._engines:
            _, index = parse_device(setup.device)
            self._engines[key] = OrtGradientForwardBackward(
                training_model(setup, dtype, weighted),
                weights_to_train=names,
                sess_options=setup.session_options(),
                providers=device_providers(setup.device),
                device_index=index,
                enable_logging=setup.enable_logging,
                backend=setup.backend,
            )
        return self._engines[key]

    def row_losses(self, setup: TrainingSetup, names: list[str], dtype: np.dtype,
                   arrays: list[Any], weighted: bool, weights: list[np.ndarray],
                   ) -> np.ndarray:
        r"""The loss of every row of ``arrays`` (features, labels, sample weights when
        ``weighted``), :math:`s_i \ell_i`, at ``weights``: shape ``(n_samples,)``."""
        key = setup.loss_key(weighted)
        if key not in self._row_losses:
            model = initializers_to_inputs(
                training_model(setup, dtype, weighted, per_row=True), names)
            self._row_losses[key] = cached_session(
                model, setup.session_options(), device_providers(setup.device))
        session = self._row_losses[key]
        inputs = [feed.name for feed in session.get_inputs()]
        feeds = dict(zip(inputs, [np.ascontiguousarray(a) for a in arrays] + weights,
                         strict=True))
        return session.run(None, feeds)[0]
