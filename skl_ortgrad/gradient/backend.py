r"""Gradient backends behind one contract, and the registry that names them.

A backend turns *a model whose weights are initializers, the names of the weights and
of the inputs whose gradient is wanted* into a :class:`GradientGraph`: one ONNX graph
that a plain ``InferenceSession`` runs in one call,

.. math::

    (X, W, \bar y) \mapsto \left(y,\ \frac{\partial L}{\partial X},
    \frac{\partial L}{\partial W}\right),

with one input ``<output>_grad`` (:math:`\bar y = \partial L/\partial y`) per
differentiable output, gradients named ``<input>_grad`` then ``<weight>_grad``.

``"onnxruntime-training"``
    onnxruntime-training's ``OrtModuleGraphBuilder`` (Python 3.10-3.12,
    onnxruntime-training-cpu 1.19.2), see :mod:`skl_ortgrad.gradient.ort_training`.
``"onnx"``
    skl_ortgrad's reverse-mode differentiator writing standard ONNX operators (any
    onnxruntime), see :mod:`skl_ortgrad.gradient.reverse`.
``"auto"``
    the environment variable ``SKL_ORTGRAD_BACKEND`` when it is set (to one of the two
    names), else ``"onnxruntime-training"`` where it imports, else ``"onnx"``.
"""

from __future__ import annotations

import importlib.util
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from onnx import ModelProto

BACKENDS: dict[str, Callable[..., GradientGraph]] = {}
BACKEND_NAMES = ("auto", "onnxruntime-training", "onnx")
#: Environment variable choosing what ``"auto"`` means.
ENVIRONMENT_VARIABLE = "SKL_ORTGRAD_BACKEND"


class GradientGraph(ABC):
    """What a backend returns: the gradient graph of one model.

    Attributes
    ----------
    backend : str
        The backend's name.
    training_model : ModelProto
        The differentiated model.
    weights, inputs : list of str
        What is differentiated.
    differentiable_outputs : list of str
        Outputs that take an output gradient, in graph order.
    fused : ModelProto
        The one-call graph described in the module docstring (symbolic batch).
    forward : ModelProto
        The model with the weights as inputs after its own inputs (inference).
    unoptimized : bool
        True when onnxruntime's graph optimizations must stay off for :attr:`fused`.
    """

    backend: str
    training_model: ModelProto
    weights: list[str]
    inputs: list[str]
    differentiable_outputs: list[str]
    fused: ModelProto
    forward: ModelProto
    unoptimized: bool

    @property
    def gradient_model(self) -> ModelProto:
        """The backend's own gradient graph (:attr:`fused` unless the backend has another
        form, such as onnxruntime-training's graph around a ``YieldOp``)."""
        return self.fused

    @abstractmethod
    def static(self, batch_inputs: Sequence[str], batch_rows: int) -> ModelProto:
        """:attr:`fused` with the first dimension of ``batch_inputs`` set to ``batch_rows``,
        its shape arithmetic resolved while building (fewer nodes per run)."""


def register_backend(name: str) -> Callable:
    """Decorator: ``builder(model, weights, inputs) -> GradientGraph`` is backend ``name``."""

    def decorate(builder: Callable[..., GradientGraph]) -> Callable[..., GradientGraph]:
        BACKENDS[name] = builder
        return builder

    return decorate


def training_available() -> bool:
    """True if onnxruntime-training's graph builder can be imported."""
    if importlib.util.find_spec("onnxruntime") is None:
        return False
    from onnxruntime.capi import _pybind_state

    return hasattr(_pybind_state, "OrtModuleGraphBuilder")


def resolve_backend(backend: str) -> str:
    """The backend ``backend`` names, ``"auto"`` resolved.

    Raises
    ------
    ValueError
        For an unknown name, or ``"onnxruntime-training"`` where it is not installed
        (the message says how to install it or which backend to use instead).
    """
    if backend not in BACKEND_NAMES:
        raise ValueError(f"backend must be one of {list(BACKEND_NAMES)}, got {backend!r}.")
    if backend == "auto":
        chosen = os.environ.get(ENVIRONMENT_VARIABLE, "")
        if chosen:
            if chosen not in BACKEND_NAMES[1:]:
                raise ValueError(
                    f"{ENVIRONMENT_VARIABLE}={chosen!r}: use one of {list(BACKEND_NAMES[1:])}."
                )
            return resolve_backend(chosen)
        return "onnxruntime-training" if training_available() else "onnx"
    if backend == "onnxruntime-training" and not training_available():
        raise ValueError(
            "backend='onnxruntime-training' needs onnxruntime-training, which is not "
            "installed (it provides the onnxruntime module on Python 3.10-3.12: "
            "`pip uninstall onnxruntime && pip install onnxruntime-training-cpu==1.19.2`). "
            "Use backend='onnx' (or 'auto'), which runs on any onnxruntime."
        )
    return backend


def build_gradient(
    model: ModelProto,
    weights: Sequence[str],
    inputs: Sequence[str] = (),
    backend: str = "auto",
    **options: Any,
) -> GradientGraph:
    """The gradient graph of ``model`` with respect to ``weights`` and ``inputs``.

    Parameters
    ----------
    model : ModelProto
        The model; ``weights`` are initializers, ``inputs`` graph inputs.
    weights, inputs : list of str
        What to differentiate.
    backend : str
        ``"auto"``, ``"onnxruntime-training"`` or ``"onnx"``.
    **options
        Options of that backend (``config`` for onnxruntime-training's builder).
    """
    name = resolve_backend(backend)
    if name not in BACKENDS:
        # The backends register themselves when their module is imported.
        importlib.import_module(f"skl_ortgrad.gradient.{_MODULES[name]}")
    return BACKENDS[name](model, list(weights), list(inputs), **options)


_MODULES = {"onnxruntime-training": "ort_training", "onnx": "onnx_backend"}
