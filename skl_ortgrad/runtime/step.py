r"""One training step's gradient in one onnxruntime call.

:class:`OrtGradientStep` runs the one-call gradient graph of a gradient backend
(:class:`skl_ortgrad.gradient.GradientGraph`): given the inputs of a
mini-batch, the weights and the output gradients :math:`\partial L / \partial y`, one
``run`` computes the forward outputs :math:`y` (the loss) and every weight gradient
:math:`\partial L / \partial W_j`, and writes them into numpy buffers allocated once.

It is what the training loop calls for every mini-batch; the two-call
``forward``/``backward`` of
:class:`~skl_ortgrad.gradient.forward_backward.OrtGradientForwardBackwardFunction` stays the
public, general interface (any output gradient, computed after the forward pass).
Measured on onnxruntime-training 1.19.2, one step of a linear model with a static batch
dimension (shape arithmetic folded, see
:func:`~skl_ortgrad.gradient.ort_rewrite.fold_gradient_shapes`): about 5 µs at batch 1
or 32 and 17 µs at batch 1000 x 100, against 13 µs and 33 µs for ``run_forward`` +
``run_backward`` (``make bench``, case 4).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnxruntime import RunOptions, SessionOptions
from onnxruntime.capi._pybind_state import OrtDevice, OrtValue, OrtValueVector

from skl_ortgrad.graph.dtypes import numpy_dtype
from skl_ortgrad.runtime.buffers import packed_zeros
from skl_ortgrad.runtime.sessions import cached_session, io_names


class OrtGradientStep:
    """Forward outputs and weight gradients of a fused gradient graph, in one call.

    Parameters
    ----------
    fused_model : onnx.ModelProto
        A one-call gradient graph (:attr:`skl_ortgrad.gradient.GradientGraph.fused` or its
        static form).
    sess_options : SessionOptions
        Options of the session (threads, optimization level). The session comes from
        :func:`~skl_ortgrad.runtime.sessions.cached_session`: steps of the same graph
        and options share it.
    providers : list of str
        Execution providers.
    provider_options : list of dict, optional
        Their options.
    outputs : list of numpy.ndarray, optional
        Buffers to write into (another step's ``outputs``, so that steps of the same
        model for different batch sizes share them); allocated when None.

    Attributes
    ----------
    model : onnx.ModelProto
        The graph it runs.
    feed_names : list of str
        What every feed vector holds, in order: the graph inputs, the weights, then the
        output gradients.
    fetch_names : list of str
        The forward outputs, then the weight gradients.
    outputs : list of numpy.ndarray
        The buffers :meth:`run` writes into, one per name of ``fetch_names``, always
        the same arrays (on the CPU whatever the device: the optimizer updates the
        weights with numpy).
    """

    def __init__(
        self,
        fused_model: onnx.ModelProto,
        sess_options: SessionOptions,
        providers: list[str],
        provider_options: list[dict] | None = None,
        outputs: list[np.ndarray] | None = None,
    ) -> None:
        self.model = fused_model
        # Shared with every step of the same graph (cached_session): only the output
        # buffers and run options below belong to this step.
        self._session = cached_session(fused_model, sess_options, providers, provider_options)
        # Lists of the step's own (public attributes), from the session's shared names.
        self.feed_names, self.fetch_names = map(list, io_names(self._session))
        dtypes = {
            out.name: numpy_dtype(out.type.tensor_type.elem_type)
            for out in fused_model.graph.output
        }
        for fetch in self._session.get_outputs():
            if not all(isinstance(dim, int) for dim in fetch.shape):
                raise ValueError(
                    f"Output {fetch.name!r} has shape {fetch.shape}: the outputs of a "
                    "training step (loss, gradients) must have static shapes."
                )
        fetches = self._session.get_outputs()
        if outputs is None and len({dtypes[fetch.name] for fetch in fetches}) == 1:
            # Packed: the gradients (after the loss) are one span for the optimizer's
            # elementwise updates (runtime.buffers).
            outputs = packed_zeros([tuple(fetch.shape) for fetch in fetches],
                                   dtypes[fetches[0].name])
        self.outputs = outputs if outputs is not None else [
            np.zeros(fetch.shape, dtype=dtypes[fetch.name]) for fetch in fetches
        ]
        cpu = OrtDevice(OrtDevice.cpu(), OrtDevice.default_memory(), 0)
        self._fetches = OrtValueVector()
        for buffer in self.outputs:
            self._fetches.push_back(OrtValue.ortvalue_from_numpy(buffer, cpu))
        self._fetch_devices = [cpu] * len(self.outputs)
        self._run_options = RunOptions()

    def run(self, feeds: OrtValueVector) -> None:
        """Compute the step for ``feeds`` (in ``feed_names`` order) into ``outputs``.

        The caller keeps the buffers of ``feeds`` alive during the call
        (``OrtValue.ortvalue_from_numpy`` does not hold a reference).
        """
        self._session._sess.run_with_ortvaluevector(
            self._run_options, self.feed_names, feeds, self.fetch_names, self._fetches,
            self._fetch_devices,
        )
