"""How the two calls of the seed API's ``forward(training=True)`` / ``backward`` run.

Two strategies, one per gradient backend, behind the same two methods:

* :class:`AgentCalls` (``"onnxruntime-training"``): onnxruntime-training's ``TrainingAgent``
  runs the graph around its ``YieldOp`` in two halves; the forward half keeps its
  intermediate results in a ``PartialGraphExecutionState`` for the backward half;
* :class:`FusedCalls` (``"onnx"``): the forward call is plain inference and keeps its
  feeds; the backward call runs the one-call gradient graph on them and the output
  gradients, recomputing the forward values it needs.

:class:`LazyCalls` builds either at its first use.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from onnxruntime import InferenceSession, RunOptions, SessionOptions
from onnxruntime.capi._pybind_state import OrtDevice, OrtValue, OrtValueVector

from skl_ortgrad.gradient.backend import GradientGraph
from skl_ortgrad.runtime.sessions import cached_session

__all__ = ["AgentCalls", "FusedCalls", "LazyCalls"]


class LazyCalls:
    """The forward/backward calls of an engine, built at their first use.

    Estimators train with the one-call step (:meth:`~skl_ortgrad.gradient.forward_backward.
    OrtGradientForwardBackward.step_function`) and never call ``forward(training=True)``:
    the calls need a gradient graph of their own (it also differentiates the inputs) and,
    with onnxruntime-training, a ``TrainingAgent`` over a session of their own (an
    agent's session is not shared), which every fit would otherwise build for nothing.
    """

    def __init__(self, build: Callable[[], AgentCalls | FusedCalls]) -> None:
        self._build = build
        self._calls: AgentCalls | FusedCalls | None = None
        self._lock = threading.Lock()

    def _get(self) -> AgentCalls | FusedCalls:
        if self._calls is None:
            with self._lock:
                if self._calls is None:
                    self._calls = self._build()
        return self._calls

    def forward(self, inputs: OrtValueVector, outputs: OrtValueVector) -> Any:
        return self._get().forward(inputs, outputs)

    def backward(self, state: Any, grad_outputs: OrtValueVector,
                 gradients: OrtValueVector) -> None:
        self._get().backward(state, grad_outputs, gradients)


class AgentCalls:
    """``forward``/``backward`` in two halves through onnxruntime-training's
    ``TrainingAgent`` (backend ``"onnxruntime-training"``): the forward pass keeps its
    intermediate results in a ``PartialGraphExecutionState`` for the backward pass."""

    def __init__(self, gradient: GradientGraph, options: SessionOptions,
                 providers: list[str], provider_options: list[dict] | None,
                 device: OrtDevice, feed_names: list[str], grad_names: list[str]) -> None:
        from onnxruntime.capi._pybind_state import OrtValueCache, TrainingAgent

        # TrainingAgent borrows the session without a reference: keep it alive here.
        self._session = InferenceSession(
            gradient.yield_model.SerializeToString(), options, providers=providers,
            provider_options=provider_options,
        )
        n_outputs = len(gradient.training_model.graph.output)
        self._agent = TrainingAgent(
            self._session._sess, feed_names, [device] * n_outputs, grad_names,
            [device] * len(grad_names), 0,
        )
        self._cache = OrtValueCache()

    def forward(self, inputs: OrtValueVector, outputs: OrtValueVector) -> Any:
        from onnxruntime.capi._pybind_state import PartialGraphExecutionState

        state = PartialGraphExecutionState()
        self._agent.run_forward(inputs, outputs, state, self._cache)
        return state

    def backward(self, state: Any, grad_outputs: OrtValueVector,
                 gradients: OrtValueVector) -> None:
        self._agent.run_backward(grad_outputs, gradients, state)


class FusedCalls:
    """``forward``/``backward`` on plain onnxruntime (backend ``"onnx"``): the forward
    pass runs the inference graph and keeps its feeds; the backward pass runs the
    one-call gradient graph on them with the output gradients, which recomputes the
    forward values it needs (one more forward pass, no training kernel).

    An output gradient of another shape than its output but with as many values is read
    in the output's shape, as onnxruntime-training's agent reads it (it does not check
    shapes); the session would refuse it."""

    def __init__(self, gradient: GradientGraph, options: SessionOptions,
                 providers: list[str], provider_options: list[dict] | None,
                 device: OrtDevice, feed_names: list[str], grad_names: list[str],
                 inference: InferenceSession, run_options: RunOptions) -> None:
        self._session = cached_session(gradient.fused, options, providers, provider_options)
        self._inference = inference
        self._feed_names = feed_names
        self._output_names = [out.name for out in gradient.training_model.graph.output]
        self._grad_feed_names = [f"{name}_grad" for name in gradient.differentiable_outputs]
        self._differentiable = [self._output_names.index(name)
                                for name in gradient.differentiable_outputs]
        self._grad_names = grad_names
        self._device = device
        self._run_options = run_options

    def forward(self, inputs: OrtValueVector, outputs: OrtValueVector) -> Any:
        self._inference._sess.run_with_ortvaluevector(
            self._run_options, self._feed_names, inputs, self._output_names, outputs,
            [self._device] * len(self._output_names),
        )
        return inputs, [outputs[i].shape() for i in self._differentiable]

    def backward(self, state: Any, grad_outputs: OrtValueVector,
                 gradients: OrtValueVector) -> None:
        inputs, shapes = state
        grads = [grad_outputs[i] for i in range(len(grad_outputs))]
        # ortvalue_from_numpy borrows the array's memory: keep the arrays until run returns.
        reshaped = []
        for index, (grad, shape) in enumerate(zip(grads, shapes, strict=True)):
            got = grad.shape()
            if got != shape and int(np.prod(got)) == int(np.prod(shape)):
                reshaped.append(np.ascontiguousarray(grad.numpy().reshape(shape)))
                grads[index] = OrtValue.ortvalue_from_numpy(reshaped[-1], self._device)
        feeds = OrtValueVector()
        for value in [*inputs, *grads]:
            feeds.push_back(value)
        self._session._sess.run_with_ortvaluevector(
            self._run_options, self._feed_names + self._grad_feed_names, feeds,
            self._grad_names, gradients, [self._device] * len(self._grad_names),
        )
