"""The seed API's optimizer (onnxcustom's ``OrtGradientForwardBackwardOptimizer``).

:class:`OrtGradientForwardBackwardOptimizer` is the :class:`~skl_ortgrad.training.trainer.
Trainer` as a scikit-learn estimator, for code written against the seed API: the same
constructor, plus ``get_params``/``set_params`` (so ``clone`` and grid searches over its
parameters work), the ``learning_rate``, ``learning_loss`` and ``learning_penalty``
objects of seed 004, the seed's ``repr`` and ``save_onnx_graph``. The package's own
estimators use the plain :class:`Trainer`.
"""

from __future__ import annotations

import inspect
import os
from typing import Any

import numpy as np
import onnx
from sklearn.base import BaseEstimator

from skl_ortgrad._params import MemoizedParamNames, param_names
from skl_ortgrad.graph.model import OPSET
from skl_ortgrad.graph.weights import get_train_initializer
from skl_ortgrad.optim.base import BaseLearningObject
from skl_ortgrad.training.sgd_learning_loss import BaseLearningLoss
from skl_ortgrad.training.sgd_learning_penalty import BaseLearningPenalty
from skl_ortgrad.training.sgd_learning_rate import BaseLearningRate
from skl_ortgrad.training.trainer import Trainer

__all__ = ["OrtGradientForwardBackwardOptimizer", "StateTensor"]

#: In the optimizer's repr, a value whose own repr is longer than this, or spans several
#: lines (an ONNX model), is shown as its first :data:`_CUT` characters and "...".
_REPR_WIDTH = 50
_CUT = 10


def _argument_repr(value: Any) -> str:
    """``repr(value)`` as the seed's repr shows a constructor argument."""
    if isinstance(value, BaseLearningObject):
        return constructor_repr(value)
    text = repr(value)
    if len(text) > _REPR_WIDTH or "\n" in text:
        return repr(text[:_CUT].replace("\n", " ") + "...")
    return text


def constructor_repr(obj: Any) -> str:
    """``Class(a=..., b=...)`` with every argument of the constructor, in its order.

    The seed API prints its optimizer and its learning objects this way, defaults
    included (``LearningRateSGD(eta0=0.01, ..., learning_rate='invscaling')``), where
    scikit-learn's repr sorts the names and leaves the defaults out. Learning objects
    nested in ``obj`` are shown the same way; long values are cut (:func:`_argument_repr`).
    Keyword-only arguments (after ``*``: skl_ortgrad's own, beyond the seed's
    constructor, such as ``LearningRateSGD``'s ``step_factors``) are shown only where
    they differ from their default, so that the seed's objects print as the seed's.
    """
    signature = inspect.signature(type(obj).__init__)
    names = [name for name, parameter in signature.parameters.items()
             if name != "self" and parameter.kind not in (parameter.VAR_POSITIONAL,
                                                          parameter.VAR_KEYWORD)
             and not (parameter.kind == parameter.KEYWORD_ONLY
                      and getattr(obj, name) == parameter.default)]
    arguments = ", ".join(f"{name}={_argument_repr(getattr(obj, name))}" for name in names)
    return f"{type(obj).__name__}({arguments})"


class StateTensor(np.ndarray):
    """A trained weight as :meth:`OrtGradientForwardBackwardOptimizer.get_state` returns
    it: a numpy array that also has the ``numpy()`` method of the ``OrtValue`` objects
    onnxcustom's ``get_state`` returns, so code written for either reads it."""

    def numpy(self) -> np.ndarray:
        """The values as a plain numpy array (the same memory)."""
        return self.view(np.ndarray)


class OrtGradientForwardBackwardOptimizer(Trainer, MemoizedParamNames, BaseEstimator):
    """Train the weights of an ONNX model with mini-batch gradient descent: the seed
    API's estimator over :class:`~skl_ortgrad.training.trainer.Trainer`, whose parameters,
    attributes and methods (``fit``, ``partial_fit``, ``get_state``, ``set_state``,
    ``get_trained_onnx``, ``losses``, ``score``...) it has.

    ``set_params`` sets top-level parameters directly, as scikit-learn does, without the
    ``get_params(deep=True)`` of every nested object that costs more than a small
    training batch; nested ``object__param`` keys go through scikit-learn.

    Its epoch lines (logged at INFO on the ``skl_ortgrad`` logger, written to stderr with
    ``verbose >= 1``) start with ``[OrtGradientForwardBackwardOptimizer._iteration]``, as
    onnxcustom's do.
    """

    _epoch_prefix = "[OrtGradientForwardBackwardOptimizer._iteration] "

    def set_params(self, **params: Any) -> OrtGradientForwardBackwardOptimizer:
        """Set parameters (scikit-learn's ``set_params``, with a fast path)."""
        if set(params) <= set(param_names(type(self))):
            return self.configure(**params)
        return super().set_params(**params)

    def get_state(self) -> list[StateTensor]:
        """Return a copy of the trained weights, in the order of ``weights_to_train_``:
        numpy arrays (:class:`StateTensor`) that also answer ``numpy()``."""
        return [weight.view(StateTensor) for weight in super().get_state()]

    def set_state(self, state: list[Any]) -> None:
        """Set the weights from numpy arrays or ``OrtValue`` objects (as onnxcustom's
        ``get_state`` returns them), see :meth:`Trainer.set_state`."""
        super().set_state([value if isinstance(value, np.ndarray) else value.numpy()
                           for value in state])

    def __repr__(self, N_CHAR_MAX: int = 700) -> str:
        """The seed's repr: every constructor argument in the constructor's order, the
        learning objects by the same rule, the model cut
        (``OrtGradientForwardBackwardOptimizer(model_onnx='ModelProto...', ...)``), see
        :func:`constructor_repr`."""
        return constructor_repr(self)

    def onnx_graphs(self) -> dict[str, Any]:
        """Every ONNX graph this optimizer trains with, by what it is.

        Returns
        -------
        dict
            ``model_onnx``: the model; ``learning_rate``, ``learning_loss``,
            ``learning_penalty``: ``{'update': graph}`` for the rate and the penalty (the
            weight update of their ``build_onnx_function`` for the weights to train), and
            ``{'loss': graph}`` for the loss (its loss graph, weighted when
            ``weight_name`` is set), in the model's dtype; once fitted, also
            ``trained_onnx`` (:meth:`get_trained_onnx`) and ``train_function_``:
            ``{'forward': graph, 'gradient': graph}``, the forward/backward engine's
            graphs of the model with its loss.
        """
        weights = (self.weights_to_train if self.weights_to_train is not None
                   else list(get_train_initializer(self.model_onnx)))
        dtype = self.model_dtype()
        weighted = self.weight_name is not None
        device = str(self.device)
        # set_params may have given an alias since construction.
        rate = BaseLearningRate.select(self.learning_rate)
        loss = BaseLearningLoss.select(self.learning_loss)
        penalty = BaseLearningPenalty.select(self.learning_penalty)
        graphs: dict[str, Any] = {
            "model_onnx": self.model_onnx,
            "learning_rate": {"update": rate.build_onnx_function(
                OPSET, device, len(weights), dtype)},
            "learning_loss": {"loss": loss.build_onnx_function(
                OPSET, device, weighted=weighted, dtype=dtype)},
            "learning_penalty": {"update": penalty.build_onnx_function(
                OPSET, device, len(weights), dtype)},
        }
        if hasattr(self, "weights_"):
            engine = self.engine(weighted)
            graphs["trained_onnx"] = self.get_trained_onnx()
            graphs["train_function_"] = {
                "forward": onnx.load_from_string(engine.forward_model_),
                "gradient": onnx.load_from_string(engine.gradient_model_),
            }
        return graphs

    def save_onnx_graph(
        self, folder: str | type, prefix: str | None = None, suffix: str | None = None
    ) -> dict[str, Any]:
        """Save every graph of :meth:`onnx_graphs` in ``folder``, or return them as bytes.

        Parameters
        ----------
        folder : str or bytes
            The folder (created if needed), or the type ``bytes`` to get the serialized
            graphs instead of files.
        prefix, suffix : str, optional
            Around the class name in the file names:
            ``<prefix>OrtGradientForwardBackwardOptimizer<suffix>.<key>[.<name>].onnx``.

        Returns
        -------
        dict
            The structure of :meth:`onnx_graphs`, a file path (or the bytes) for every
            graph.
        """
        if folder is not bytes and not isinstance(folder, str):
            raise TypeError(f"folder must be a str or bytes, got {folder!r}.")
        stem = f"{prefix or ''}{type(self).__name__}{suffix or ''}"
        if isinstance(folder, str):
            os.makedirs(folder, exist_ok=True)

        def save(graph: onnx.ModelProto, name: str) -> str | bytes:
            content = graph.SerializeToString()
            if folder is bytes:
                return content
            path = os.path.join(folder, f"{stem}.{name}.onnx")
            with open(path, "wb") as f:
                f.write(content)
            return path

        return {
            key: ({name: save(graph, f"{key}.{name}") for name, graph in value.items()}
                  if isinstance(value, dict) else save(value, key))
            for key, value in self.onnx_graphs().items()
        }
