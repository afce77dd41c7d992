"""The function class of the seed API's forward/backward engine.

:class:`~skl_ortgrad.gradient.forward_backward.OrtGradientForwardBackward` generates a
subclass of :class:`OrtGradientForwardBackwardFunction` per model, whose class attributes
hold the sessions and the names; every instance is one forward/backward pair, the way
``torch.autograd.Function`` works: ``forward`` saves what ``backward`` needs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from onnxruntime import InferenceSession, RunOptions
from onnxruntime.capi._pybind_state import OrtDevice, OrtValue, OrtValueVector

from skl_ortgrad.gradient.forward_backward_calls import LazyCalls
from skl_ortgrad.graph.dtypes import numpy_dtype_of

__all__ = ["OrtGradientForwardBackwardFunction"]


class OrtGradientForwardBackwardFunction:
    """One forward/backward computation through onnxruntime.

    Do not instantiate it directly: :meth:`~skl_ortgrad.gradient.forward_backward.
    OrtGradientForwardBackward.new_instance` returns an instance of a generated subclass
    whose class attributes hold the sessions, the training agent and the names.

    The generator sets these class attributes: ``input_names``, ``weights_to_train`` and
    ``output_names`` (what ``forward`` takes, the inputs then the weights, and returns),
    ``grad_input_names`` (the inputs ``backward`` returns a gradient for: those of a float
    type from which a chain of nodes leads to an output), ``grad_names`` (what
    ``backward`` returns: ``<input>_grad`` for every name of ``grad_input_names``, then
    ``<weight>_grad`` for every weight) and ``device``.
    """

    # Set on the generated subclass.
    input_names: list[str]
    weights_to_train: list[str]
    output_names: list[str]
    grad_input_names: list[str]
    grad_names: list[str]
    device: str
    debug: bool
    _ort_device: OrtDevice
    _feed_dtypes: list[np.dtype]
    _feed_shapes: list[list[Any]]
    _output_grad_dtypes: list[np.dtype]
    backend: str
    _calls: LazyCalls
    _inference_sess: InferenceSession
    _run_options: RunOptions
    _forward_model: bytes
    _gradient_model: bytes

    def __init__(self) -> None:
        self._state: Any = None
        self._saved: tuple[Any, ...] = ()

    @staticmethod
    def device_name(device: OrtDevice) -> str:
        """Return ``'cpu'`` or ``'cuda'`` for an ``OrtDevice``."""
        return "cpu" if device.device_type() == OrtDevice.cpu() else "cuda"

    @classmethod
    def save_onnx_graph(
        cls, folder: str, prefix: str | None = None, suffix: str | None = None
    ) -> dict[str, str]:
        """Save the forward and gradient graphs of this class in ``folder``.

        Returns
        -------
        dict
            ``{'forward': path, 'gradient': path}``, the files
            ``<prefix>.forward<suffix>.onnx`` and ``<prefix>.gradient<suffix>.onnx``
            (``prefix`` defaults to the class name).
        """
        os.makedirs(folder, exist_ok=True)
        name = prefix or cls.__name__
        paths = {}
        for kind, content in (("forward", cls._forward_model),
                              ("gradient", cls._gradient_model)):
            path = os.path.join(folder, f"{name}.{kind}{suffix or ''}.onnx")
            with open(path, "wb") as f:
                f.write(content)
            paths[kind] = path
        return paths

    def save_for_backward(self, *tensors: Any) -> None:
        """Keep ``tensors`` alive until :meth:`backward` returns.

        ``OrtValue.ortvalue_from_numpy`` borrows numpy buffers without holding a
        reference: a temporary freed before ``backward`` would be read as garbage.
        """
        self._saved = tensors

    @property
    def saved_tensors(self) -> tuple[Any, ...]:
        """The tensors given to :meth:`save_for_backward`."""
        return self._saved

    def input_to_ort(self, tensors: Sequence[Any], debug: bool | None = None) -> OrtValueVector:
        """Convert numpy arrays or OrtValues into an ``OrtValueVector`` on the device.

        Parameters
        ----------
        tensors : sequence of numpy.ndarray or OrtValue
            The graph inputs then the weights, in ``weights_to_train`` order.
        debug : bool, optional
            Check dtype and shape of every tensor against the session (defaults to the
            ``debug`` flag given to the engine). onnxruntime does not check: a float64
            feed into a float32 graph gives wrong results silently.
        """
        expected = len(self._feed_dtypes)
        if len(tensors) != expected:
            raise ValueError(
                f"Expected {expected} tensors ({self.input_names + self.weights_to_train}), "
                f"got {len(tensors)}."
            )
        if self.debug if debug is None else debug:
            self._check_feeds(tensors)
        vect = OrtValueVector()
        vect.reserve(expected)
        for tensor in tensors:
            if isinstance(tensor, np.ndarray):
                tensor = OrtValue.ortvalue_from_numpy(tensor, self._ort_device)
            vect.push_back(tensor)
        return vect

    def shaped_weights(self, tensors: Sequence[Any]) -> list[Any]:
        """``tensors`` (the inputs, then the weights) with every weight that holds as many
        values as its initializer, in another shape, reshaped to the initializer's shape.

        scikit-learn's ``intercept_`` is ``[k]`` where skl2onnx's initializer is
        ``[1, k]``: onnxruntime-training's agent takes it as it is, a plain inference
        session refuses its rank. A weight's shape is fixed by its initializer, so the
        reshape is unambiguous; an ``OrtValue`` goes through numpy for it.
        """
        shaped = list(tensors)
        for index in self._weight_positions(shaped):
            if self._reshapable(shaped[index], self._feed_shapes[index]):
                tensor = shaped[index]
                array = tensor if isinstance(tensor, np.ndarray) else tensor.numpy()
                shaped[index] = np.ascontiguousarray(array).reshape(self._feed_shapes[index])
        return shaped

    def _weight_positions(self, tensors: Any) -> range:
        return range(len(self.input_names), min(len(tensors), len(self._feed_shapes)))

    def _misshaped(self, vector: OrtValueVector) -> bool:
        """Whether a weight of ``vector`` needs :meth:`shaped_weights`."""
        return any(self._reshapable(vector[i], self._feed_shapes[i])
                   for i in self._weight_positions(vector))

    @staticmethod
    def _reshapable(tensor: Any, shape: list[Any]) -> bool:
        """``tensor`` has another shape than the static ``shape`` but as many values."""
        got = list(tensor.shape) if isinstance(tensor, np.ndarray) else list(tensor.shape())
        return (got != list(shape) and all(isinstance(d, int) for d in shape)
                and int(np.prod(got)) == int(np.prod(shape)))

    def _check_feeds(self, tensors: Sequence[Any]) -> None:
        names = self.input_names + self.weights_to_train
        for name, tensor, dtype, shape in zip(
            names, tensors, self._feed_dtypes, self._feed_shapes, strict=True
        ):
            if isinstance(tensor, np.ndarray):
                got_dtype, got_shape = tensor.dtype, list(tensor.shape)
            else:
                got_dtype, got_shape = numpy_dtype_of(tensor.data_type()), tensor.shape()
            if got_dtype != dtype:
                raise TypeError(f"Input {name!r} has dtype {got_dtype}, the graph expects {dtype}.")
            # Symbolic dimensions (strings or None) accept any size.
            if len(got_shape) != len(shape) or any(
                isinstance(dim, int) and dim != got
                for dim, got in zip(shape, got_shape, strict=True)
            ):
                raise ValueError(
                    f"Input {name!r} has shape {got_shape}, the graph expects {shape}."
                )

    def forward(
        self,
        inputs: Sequence[Any] | OrtValueVector,
        training: bool = False,
        forward_outputs_cache: OrtValueVector | None = None,
    ) -> OrtValueVector:
        """Compute the model outputs.

        Parameters
        ----------
        inputs : sequence of numpy.ndarray or OrtValue, or OrtValueVector
            The graph inputs then the weights in ``weights_to_train`` order, a weight in
            another shape reshaped (:meth:`shaped_weights`). An ``OrtValueVector`` is
            used as is (the caller keeps its buffers alive), unless a plain session (all
            but onnxruntime-training's training calls) needs a weight reshaped.
        training : bool
            If True, keep what :meth:`backward` needs; every training forward must be
            followed by exactly one backward. If False, run plain inference.
        forward_outputs_cache : OrtValueVector, optional
            Vector to receive the outputs (reused across calls to save allocations).

        Returns
        -------
        OrtValueVector
            The outputs, in ``output_names`` order.
        """
        agent = training and self.backend == "onnxruntime-training"
        if isinstance(inputs, OrtValueVector) and not agent and self._misshaped(inputs):
            # A plain session checks ranks, the training agent does not: reshape as for a
            # list.
            inputs = [inputs[i] for i in range(len(inputs))]
        if not isinstance(inputs, OrtValueVector):
            inputs = self.shaped_weights(inputs)
            self.save_for_backward(inputs)
            inputs = self.input_to_ort(inputs)
        outputs = OrtValueVector() if forward_outputs_cache is None else forward_outputs_cache
        if training:
            self._state = self._calls.forward(inputs, outputs)
        else:
            self._inference_sess._sess.run_with_ortvaluevector(
                self._run_options,
                self.input_names + self.weights_to_train,
                inputs,
                self.output_names,
                outputs,
                [self._ort_device] * len(self.output_names),
            )
        return outputs

    def backward(
        self,
        grad_outputs: Sequence[Any] | OrtValueVector,
        backward_outputs_cache: OrtValueVector | None = None,
    ) -> OrtValueVector:
        """Compute the gradients of the inputs and weights given those of the outputs.

        For outputs :math:`y_i = f_i(X, W)` and output gradients
        :math:`g_i = \\partial L / \\partial y_i`, returns
        :math:`\\partial L / \\partial Z = \\sum_i J_{y_i}(Z)^T g_i` for every input
        :math:`Z` of ``grad_input_names``, then every weight, as the seed API's engine
        does (its ``_bw_fetches_names``).

        Parameters
        ----------
        grad_outputs : sequence of numpy.ndarray or OrtValue, or OrtValueVector
            :math:`\\partial L/\\partial y_i` for every differentiable output
            :math:`y_i` (outputs such as labels take none).
        backward_outputs_cache : OrtValueVector, optional
            Vector to receive the gradients.

        Returns
        -------
        OrtValueVector
            The gradients, in the order of ``grad_names``: the inputs' (in the order of
            ``input_names``), then the weights' (in the order of ``weights_to_train``).
        """
        if self._state is None:
            raise RuntimeError("backward() needs a forward(..., training=True) before it.")
        if not isinstance(grad_outputs, OrtValueVector):
            grad_outputs = self._grad_outputs_to_ort(grad_outputs)
        gradients = OrtValueVector() if backward_outputs_cache is None else backward_outputs_cache
        state, self._state = self._state, None
        self._calls.backward(state, grad_outputs, gradients)
        self._saved = ()
        return gradients

    def _grad_outputs_to_ort(self, grad_outputs: Sequence[Any]) -> OrtValueVector:
        # onnxruntime does not check dtypes here and silently returns wrong gradients.
        if len(grad_outputs) != len(self._output_grad_dtypes):
            raise ValueError(
                f"backward expects {len(self._output_grad_dtypes)} output gradients "
                f"(one per differentiable output), got {len(grad_outputs)}."
            )
        self._saved = (*self._saved, grad_outputs)
        vect = OrtValueVector()
        for index, (grad, dtype) in enumerate(
            zip(grad_outputs, self._output_grad_dtypes, strict=True)
        ):
            got = grad.dtype if isinstance(grad, np.ndarray) else numpy_dtype_of(grad.data_type())
            if got != dtype:
                raise TypeError(
                    f"Gradient of output {index} has dtype {got}, the graph expects {dtype}."
                )
            if isinstance(grad, np.ndarray):
                grad = OrtValue.ortvalue_from_numpy(grad, self._ort_device)
            vect.push_back(grad)
        return vect
