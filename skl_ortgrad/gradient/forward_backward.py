"""Forward/backward engine: an ONNX model and the names of its weights become a function
with ``forward`` and ``backward`` methods computed by onnxruntime.

:class:`OrtGradientForwardBackward` builds the gradient graph once per model structure
(:data:`GRADIENTS`) with a gradient backend (:mod:`skl_ortgrad.gradient.backend`:
onnxruntime-training's ``OrtModuleGraphBuilder``, or skl_ortgrad's own differentiator in
standard ONNX), takes its inference session from
:func:`~skl_ortgrad.runtime.sessions.cached_session`, prepares what runs the gradient in
two halves (``TrainingAgent``, or two plain inference sessions, built at the first
training ``forward``), and generates a subclass of
:class:`OrtGradientForwardBackwardFunction` holding them. Every instance of that class
(:meth:`OrtGradientForwardBackward.new_instance`) is one forward/backward pair, the way
``torch.autograd.Function`` works: ``forward`` saves what ``backward`` needs.

If :math:`y = f(x, W)` is the model, ``forward(x, W)`` returns :math:`y` and
``backward(g)`` returns :math:`\\partial \\langle g, y \\rangle / \\partial x_i` for every
float input :math:`x_i` that reaches an output, then
:math:`\\partial \\langle g, y \\rangle / \\partial W_j` for every trained weight
:math:`W_j`, in the order of ``weights_to_train``.

The function class is :mod:`skl_ortgrad.gradient.forward_backward_function`, the way its
two calls run :mod:`skl_ortgrad.gradient.forward_backward_calls`; both names stay
importable from here.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import onnx
from onnxruntime import RunOptions, SessionOptions
from onnxruntime.capi._pybind_state import get_available_providers

from skl_ortgrad._cache import BoundedCache
from skl_ortgrad.gradient.backend import GradientGraph, build_gradient, resolve_backend
from skl_ortgrad.gradient.forward_backward_calls import AgentCalls, FusedCalls, LazyCalls
from skl_ortgrad.gradient.forward_backward_function import OrtGradientForwardBackwardFunction
from skl_ortgrad.graph.dtypes import FLOAT_TYPES, numpy_dtype
from skl_ortgrad.graph.external import check_external_data
from skl_ortgrad.graph.model import copied_model
from skl_ortgrad.graph.shapes import declared_shape
from skl_ortgrad.graph.weights import float_initializers, skeleton_digest
from skl_ortgrad.runtime.devices import device_providers, log_severity, ort_device
from skl_ortgrad.runtime.options import session_options, unoptimized_session_options
from skl_ortgrad.runtime.sessions import cached_session
from skl_ortgrad.runtime.step import OrtGradientStep

__all__ = ["GRADIENTS", "OrtGradientForwardBackward", "OrtGradientForwardBackwardFunction"]

#: Gradient graphs (:class:`~skl_ortgrad.gradient.backend.GradientGraph`) and their
#: static forms, by :func:`_gradient_key`. For a binary logistic regression on 30 features
#: they cost 3.5 ms (1.6 ms in the graph builder, 1.9 ms for the static form and the probe
#: session that folds its shapes), paid by every fit of a grid search although the graph
#: only depends on the model's structure.
GRADIENTS: BoundedCache[Any] = BoundedCache(64)


def _elem_dtype(info: onnx.ValueInfoProto) -> np.dtype:
    return numpy_dtype(info.type.tensor_type.elem_type)


def _node_inputs(node: onnx.NodeProto) -> list[str]:
    """Inputs of ``node``, including the outer names its subgraphs (If, Loop) read."""
    names = list(node.input)
    for attribute in node.attribute:
        graphs = list(attribute.graphs) + ([attribute.g] if attribute.HasField("g") else [])
        for sub in graphs:
            for inner in sub.node:
                names.extend(_node_inputs(inner))
    return names


def _with_outputs(model: onnx.ModelProto, names: list[str]) -> onnx.ModelProto:
    """``model`` whose outputs are ``names`` (some of its outputs, in that order): what
    ``forward`` returns and ``backward`` takes gradients for.

    Raises
    ------
    ValueError
        If a name is not an output of the model.
    """
    outputs = {out.name: out for out in model.graph.output}
    unknown = [name for name in names if name not in outputs]
    if unknown:
        raise ValueError(f"output_names {unknown} are not outputs of the model {list(outputs)}.")
    if names == list(outputs):
        return model
    selected = copied_model(model)
    del selected.graph.output[:]
    selected.graph.output.extend(outputs[name] for name in names)
    return selected


def _gradient_key(model: onnx.ModelProto, weights: list[str], backend: str) -> Hashable:
    """What the gradient graph of ``model`` depends on: its bytes with the values of
    ``weights`` left out (:func:`~skl_ortgrad.graph.weights.skeleton_digest`) and the
    backend.

    The gradient graphs take the weights as inputs and keep none of their values (a
    test checks it for both backends), so every fit of a model whose initial weights
    are random shares one graph.
    """
    return "gradient", skeleton_digest(model, weights), backend


def _unreachable(graph: onnx.GraphProto, names: list[str], outputs: list[str]) -> list[str]:
    """The weights or inputs among ``names`` from which no chain of nodes leads to one
    of ``outputs``."""
    producer = {name: node for node in graph.node for name in node.output}
    needed, stack, seen = set(outputs), list(outputs), set()
    while stack:
        node = producer.get(stack.pop())
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        for name in _node_inputs(node):
            if name not in needed:
                needed.add(name)
                stack.append(name)
    return [name for name in names if name not in needed]



class OrtGradientForwardBackward:
    """Build a forward/backward function of an ONNX model with onnxruntime-training.

    Parameters
    ----------
    onnx_model : onnx.ModelProto or bytes
        The model; weights are initializers. It must load in onnxruntime 1.19
        (IR <= 10, opset <= 21).
    weights_to_train : list of str, optional
        Initializers to train. None selects every initializer of a float type (the seed
        API's rule; skl2onnx graphs also hold float constants, so the estimators name
        their weights, see :func:`skl_ortgrad.graph.weights.get_train_initializer`).
    input_names : list of str, optional
        Graph inputs given to ``forward`` (default: all graph inputs, in graph order).
    output_names : list of str, optional
        Graph outputs returned by ``forward`` (default: all).
    class_name : str, optional
        Name of the generated subclass (default ``OrtGradientForwardBackwardFunction_<id>``).
    sess_options : onnxruntime.SessionOptions, optional
        Options of the sessions (default: one intra-op thread, fastest on small graphs).
    providers, provider_options : list, optional
        Execution providers; default from ``device_index``: CPU.
    run_options : onnxruntime.RunOptions, optional
    graph_builder_config : OrtModuleGraphBuilderConfiguration, optional
        Overrides the builder configuration (backend ``"onnxruntime-training"`` only).
    device_index : int
        CUDA device index when ``providers`` asks for CUDA.
    enable_logging : bool
        Verbose onnxruntime logging.
    debug : bool
        Check every feed's dtype and shape against the session.
    backend : str
        Gradient backend: ``"auto"`` (onnxruntime-training where it imports, else
        ``"onnx"``), ``"onnxruntime-training"`` or ``"onnx"``.
    external_data_dir : str, optional
        The folder tensors stored as external data may be read from; None refuses them
        (:func:`~skl_ortgrad.graph.external.check_external_data`).

    Attributes
    ----------
    backend_ : str
        The backend used (``"auto"`` resolved).
    gradient_ : skl_ortgrad.gradient.backend.GradientGraph
        What the backend built, from :data:`GRADIENTS` (unless ``graph_builder_config``
        is given): shared by every engine of a model with the same structure, so read it,
        never modify it.
    cls_type_ : type
        The generated subclass of :class:`OrtGradientForwardBackwardFunction`.
    forward_model_, gradient_model_ : bytes
        The forward graph (weights as inputs) and the backend's gradient graph
        (:attr:`skl_ortgrad.gradient.GradientGraph.gradient_model`).
    """

    def __init__(
        self,
        onnx_model: onnx.ModelProto | bytes,
        weights_to_train: list[str] | None = None,
        input_names: list[str] | None = None,
        output_names: list[str] | None = None,
        class_name: str | None = None,
        sess_options: SessionOptions | None = None,
        providers: list[str] | None = None,
        provider_options: list[dict] | None = None,
        run_options: RunOptions | None = None,
        graph_builder_config: Any = None,
        device_index: int = 0,
        enable_logging: bool = False,
        debug: bool = False,
        backend: str = "auto",
        external_data_dir: str | None = None,
    ) -> None:
        if isinstance(onnx_model, bytes):
            onnx_model = onnx.load_from_string(onnx_model)
        # The stored model holds every value: pickling needs no folder.
        onnx_model = check_external_data(onnx_model, external_data_dir)
        self.external_data_dir = external_data_dir
        self.onnx_model = onnx_model
        self.weights_to_train = weights_to_train
        self.input_names = input_names
        self.output_names = output_names
        self.class_name = class_name
        self.sess_options = sess_options
        self.providers = providers
        self.provider_options = provider_options
        self.run_options = run_options
        self.graph_builder_config = graph_builder_config
        self.device_index = device_index
        self.enable_logging = enable_logging
        self.debug = debug
        self.backend = backend
        self._build()

    # -- construction -----------------------------------------------------------------

    def _resolved_weights(self) -> list[str]:
        float_inits = {
            init.name: init.data_type
            for init in self.onnx_model.graph.initializer
        }
        if self.weights_to_train is None:
            names = float_initializers(self.onnx_model)
        else:
            names = list(self.weights_to_train)
        if not names:
            raise ValueError(
                "The model has no weight to train: no float initializer. skl2onnx stores "
                "linear models in LinearRegressor/LinearClassifier attributes unless "
                "converted with black_op={'LinearRegressor', 'LinearClassifier'}."
            )
        unknown = [name for name in names if name not in float_inits]
        if unknown:
            raise ValueError(
                f"Unknown weights {unknown}: the model's initializers are {sorted(float_inits)}."
            )
        integers = [name for name in names if float_inits[name] not in FLOAT_TYPES]
        if integers:
            raise ValueError(f"Weights {integers} are not floating point tensors: no gradient.")
        return names

    def _session_options(self) -> SessionOptions:
        if self.sess_options is not None:
            return self.sess_options
        return session_options(1, log_severity(self.enable_logging))

    def _providers(self) -> tuple[list[str], str]:
        if self.providers is None:
            return device_providers("cpu"), "cpu"
        providers = list(self.providers)
        available = get_available_providers()
        missing = [p for p in providers if p not in available]
        if missing:
            raise ValueError(f"Providers {missing} are not available (available: {available}).")
        device = f"cuda:{self.device_index}" if "CUDAExecutionProvider" in providers else "cpu"
        return providers, device

    def _build(self) -> None:
        weights = self._resolved_weights()
        graph = self.onnx_model.graph
        init_names = {init.name for init in graph.initializer}
        graph_inputs = [inp.name for inp in graph.input if inp.name not in init_names]
        input_names = list(self.input_names or graph_inputs)
        output_names = list(self.output_names or [out.name for out in graph.output])
        model = _with_outputs(self.onnx_model, output_names)

        unreachable = _unreachable(graph, weights, output_names)
        if unreachable:
            # onnxruntime would fail with an unreadable RuntimeError (or, for a weight
            # feeding nothing, drop it), never with a gradient for it.
            raise ValueError(
                f"Weights {unreachable} do not reach the outputs {output_names}: no node "
                "path leads from them to an output, so they have no gradient. Remove them "
                "from weights_to_train or fix the graph."
            )
        builder_options: dict[str, Any] = {}
        if self.graph_builder_config is not None:
            if resolve_backend(self.backend) != "onnxruntime-training":
                raise ValueError(
                    "graph_builder_config configures onnxruntime-training's graph builder: "
                    "it needs backend='onnxruntime-training', got "
                    f"{self.backend!r} ({resolve_backend(self.backend)!r})."
                )
            builder_options["config"] = self.graph_builder_config
        backend = resolve_backend(self.backend)
        # A builder configuration is an opaque object: no key, no cache.
        self._gradient_key = None if builder_options else _gradient_key(model, weights, backend)
        gradient = self._gradient(model, weights, [], backend, builder_options)
        self.gradient_ = gradient
        self.backend_ = gradient.backend
        self.forward_model_ = gradient.forward.SerializeToString()
        self.gradient_model_ = gradient.gradient_model.SerializeToString()

        providers, device = self._providers()
        sess_options = self._session_options()
        self._step_session = self._gradient_options(gradient, sess_options), providers
        self._steps: dict[int | None, OrtGradientStep] = {}
        fused_inputs = {info.name: info for info in gradient.fused.graph.input}
        feed_names = input_names + weights
        float_inputs = [name for name in input_names
                        if fused_inputs[name].type.tensor_type.elem_type in FLOAT_TYPES]
        unreached = set(_unreachable(graph, float_inputs, output_names))
        grad_inputs = [name for name in float_inputs if name not in unreached]
        grad_names = [f"{name}_grad" for name in grad_inputs + weights]
        non_diff = [name for name in output_names if name not in gradient.differentiable_outputs]
        out_types = {out.name: out.type.tensor_type.elem_type for out in graph.output}

        dev = ort_device(device)
        inference = cached_session(self.forward_model_, sess_options, providers,
                                   self.provider_options)
        run_options = self.run_options or RunOptions()

        def build_calls() -> AgentCalls | FusedCalls:
            # backward also returns the inputs' gradients: a graph of its own.
            both = self._gradient(model, weights, grad_inputs, backend, builder_options)
            grad_options = self._gradient_options(both, sess_options)
            if both.backend == "onnxruntime-training":
                return AgentCalls(both, grad_options, providers, self.provider_options, dev,
                                  feed_names, grad_names)
            return FusedCalls(both, grad_options, providers, self.provider_options, dev,
                              feed_names, grad_names, inference, run_options)

        name = self.class_name or f"OrtGradientForwardBackwardFunction_{id(self)}"
        attributes = {
            "__doc__": f"Forward/backward of a model training {weights}.",
            "input_names": input_names,
            "weights_to_train": weights,
            "output_names": output_names,
            "grad_input_names": grad_inputs,
            "grad_names": grad_names,
            "device": device,
            "debug": self.debug,
            "backend": gradient.backend,
            "_ort_device": dev,
            "_feed_dtypes": [_elem_dtype(fused_inputs[name]) for name in feed_names],
            "_feed_shapes": [declared_shape(fused_inputs[name]) or [] for name in feed_names],
            "_output_grad_dtypes": [
                numpy_dtype(out_types[name])
                for name in output_names if name not in non_diff
            ],
            "_calls": LazyCalls(build_calls),
            "_inference_sess": inference,
            "_run_options": run_options,
            "_forward_model": self.forward_model_,
            "_gradient_model": self.gradient_model_,
        }
        self.cls_type_ = type(name, (OrtGradientForwardBackwardFunction,), attributes)

    def _gradient(self, model: onnx.ModelProto, weights: list[str], inputs: list[str],
                  backend: str, options: dict[str, Any]) -> GradientGraph:
        """The gradient graph of ``model`` against ``inputs`` and ``weights``, from
        :data:`GRADIENTS` unless a builder configuration is given."""
        if self._gradient_key is None:
            return build_gradient(model, weights, inputs, backend=backend, **options)
        key = (self._gradient_key, "inputs", tuple(inputs)) if inputs else self._gradient_key
        return GRADIENTS.get(key, lambda: build_gradient(model, weights, inputs, backend=backend))

    @staticmethod
    def _gradient_options(gradient: GradientGraph, options: SessionOptions) -> SessionOptions:
        """``options``, with onnxruntime's graph optimizations off where the gradient
        graph needs it (:attr:`~skl_ortgrad.gradient.backend.GradientGraph.unoptimized`)."""
        return unoptimized_session_options(options) if gradient.unoptimized else options

    # -- public -----------------------------------------------------------------------

    def new_instance(self) -> OrtGradientForwardBackwardFunction:
        """Return a new forward/backward function (one per concurrent computation)."""
        return self.cls_type_()

    def step_function(self, batch_rows: int | None = None) -> OrtGradientStep:
        """Return the one-call training step of this model (built once per ``batch_rows``).

        Parameters
        ----------
        batch_rows : int, optional
            Rows of every batch the step will see: with a static batch dimension the
            gradient's shape computations become constants (onnxruntime's own folding,
            see :func:`~skl_ortgrad.gradient.ort_training.fused_gradient_model`, and
            :func:`~skl_ortgrad.gradient.ort_rewrite.fold_gradient_shapes`). None
            accepts any number of rows.

        Returns
        -------
        OrtGradientStep
            Feeds: the graph inputs, the weights, then the gradient of every
            differentiable output; fetches: the outputs, then the weight gradients. All
            the steps of one engine write into the same buffers (``outputs``).
        """
        if batch_rows not in self._steps:
            fused = self.gradient_.fused if batch_rows is None else self._static(batch_rows)
            options, providers = self._step_session
            shared = next(iter(self._steps.values())).outputs if self._steps else None
            step = OrtGradientStep(fused, options, providers, self.provider_options, shared)
            expected = self.cls_type_.input_names + self.cls_type_.weights_to_train
            if step.feed_names[: len(expected)] != expected:
                raise RuntimeError(
                    f"Unexpected feed order {step.feed_names}, expected {expected} first."
                )
            self._steps[batch_rows] = step
        return self._steps[batch_rows]

    def _static(self, batch_rows: int) -> onnx.ModelProto:
        """The gradient graph for batches of ``batch_rows`` rows, from :data:`GRADIENTS`
        when the gradient graph came from it."""
        inputs = self._batch_inputs()

        def build() -> onnx.ModelProto:
            return self.gradient_.static(inputs, batch_rows)

        if self._gradient_key is None:
            return build()
        return GRADIENTS.get((self._gradient_key, tuple(inputs), int(batch_rows)), build)

    def _batch_inputs(self) -> list[str]:
        """The graph inputs whose first dimension is the batch (data, labels, weights)."""
        return list(self.cls_type_.input_names)

    def get_initializer(self, name: str, exc: bool = True) -> np.ndarray | None:
        """Return initializer ``name`` of the model as a numpy array.

        Raises
        ------
        KeyError
            If there is no such initializer and ``exc`` is True (else returns None).
        """
        for init in self.onnx_model.graph.initializer:
            if init.name == name:
                return onnx.numpy_helper.to_array(init)
        if exc:
            raise KeyError(f"No initializer {name!r} in the model.")
        return None

    def save_onnx_graph(
        self, folder: str, prefix: str | None = None, suffix: str | None = None
    ) -> dict[str, str]:
        """Save the forward and gradient graphs in ``folder``, see
        :meth:`OrtGradientForwardBackwardFunction.save_onnx_graph`."""
        return self.cls_type_.save_onnx_graph(folder, prefix, suffix)

    # No onnxruntime object pickles: keep the parameters and rebuild the sessions.
    _PICKLED = (
        "weights_to_train", "input_names", "output_names", "class_name", "providers",
        "provider_options", "device_index", "enable_logging", "debug", "backend",
    )

    def __getstate__(self) -> dict[str, Any]:
        state = {key: getattr(self, key) for key in self._PICKLED}
        state["onnx_model"] = self.onnx_model.SerializeToString()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        model = onnx.load_from_string(state.pop("onnx_model"))
        self.__init__(model, **state)

    def __repr__(self) -> str:
        """``OrtGradientForwardBackward(...)``, as the seed API prints it: the model alone
        is too long to show; ``get_params``-like details are its attributes."""
        return f"{type(self).__name__}(...)"
