"""Multi-layer perceptrons trained through onnxruntime-training: drop-in replacements for
scikit-learn's ``MLPRegressor`` and ``MLPClassifier``.

The network is a scikit-learn MLP of the requested shape, initialized as scikit-learn
does, converted with skl2onnx; every ``coefs_[i]`` and ``intercepts_[i]`` is a weight of
the ONNX graph trained by the engine.
"""

from __future__ import annotations

import itertools
import numbers
from typing import Any, ClassVar

import numpy as np
from onnx import numpy_helper
from skl2onnx import to_onnx
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.preprocessing import LabelBinarizer
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions

from skl_ortgrad.estimators.base import BaseOnnxEstimator, Template, numeric_targets
from skl_ortgrad.estimators.classification import ClassifierTargetsMixin, onnx_classes
from skl_ortgrad.graph.model import TARGET_OPSET
from skl_ortgrad.graph.weights import get_train_initializer
from skl_ortgrad.training.sgd_learning_loss import SquareLearningLoss
from skl_ortgrad.training.sgd_learning_penalty import ElasticLearningPenalty


def _reshape_output(onx: Any, n_outputs: int) -> None:
    """Make the final ``Reshape`` of skl2onnx's MLPRegressor graph keep every output.

    The converter reshapes the prediction to ``(-1, 1)``, which flattens multi-output
    predictions into one column; the shape becomes ``(-1, n_outputs)`` (in place), and
    so does the declared shape of the output, which the training graph's label copies
    (onnxruntime checks fed labels against it).
    """
    graph = onx.graph
    reshape = next(node for node in graph.node if node.output[0] == graph.output[0].name)
    shape = next(init for init in graph.initializer if init.name == reshape.input[1])
    shape.CopyFrom(numpy_helper.from_array(np.array([-1, n_outputs], dtype=np.int64), shape.name))
    dims = graph.output[0].type.tensor_type.shape.dim
    if len(dims) == 2:
        dims[1].Clear()
        dims[1].dim_value = n_outputs


class _BaseOnnxMLP(BaseOnnxEstimator):
    """What both MLPs share: shape, initialization, conversion, fitted attributes."""

    _parameter_constraints: ClassVar[dict] = {
        **BaseOnnxEstimator._parameter_constraints,
        "hidden_layer_sizes": ["array-like", Interval(numbers.Integral, 1, None, closed="left")],
        "activation": [StrOptions({"identity", "logistic", "tanh", "relu"})],
        "alpha": [Interval(numbers.Real, 0, None, closed="left")],
    }
    # scikit-learn's MLP trains with Adam at 0.001 by default.
    _default_learning_rate = "adam"

    def __init__(
        self,
        hidden_layer_sizes: Any = (100,),
        activation: str = "relu",
        alpha: float = 0.0001,
        learning_rate: Any = None,
        learning_loss: Any = None,
        learning_penalty: Any = None,
        max_iter: int = 200,
        batch_size: int | str = "auto",
        tol: float | None = 1e-4,
        n_iter_no_change: int = 10,
        early_stopping: bool = False,
        validation_fraction: float = 0.1,
        shuffle: bool = True,
        random_state: Any = None,
        warm_start: bool = False,
        verbose: int = 0,
        device: str = "cpu",
        n_threads: int = 1,
        dtype: Any = np.float32,
        backend: str = "auto",
    ) -> None:
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.alpha = alpha
        super().__init__(
            learning_rate=learning_rate, learning_loss=learning_loss,
            learning_penalty=learning_penalty, max_iter=max_iter, batch_size=batch_size,
            tol=tol, n_iter_no_change=n_iter_no_change, early_stopping=early_stopping,
            validation_fraction=validation_fraction, shuffle=shuffle,
            random_state=random_state, warm_start=warm_start, verbose=verbose,
            device=device, n_threads=n_threads, dtype=dtype, backend=backend,
        )

    def _resolved_batch_size(self, n_samples: int) -> int:
        # scikit-learn's MLP rule.
        return min(200, n_samples) if self.batch_size == "auto" else int(self.batch_size)

    def _default_penalty(self, batch_size: float) -> ElasticLearningPenalty:
        r"""scikit-learn's MLP L2 term :math:`\frac{\alpha}{2 n_B} \sum \|W\|^2`.

        Its gradient is :math:`\alpha W / n_B` for a batch of :math:`n_B` rows, which the
        penalty applies as the decay :math:`W \leftarrow W (1 - \eta \alpha / n_B)`.
        """
        return ElasticLearningPenalty(l1=0.0, l2=float(self.alpha) / max(batch_size, 1e-12))

    def _hidden(self) -> list[int]:
        sizes = self.hidden_layer_sizes
        sizes = [sizes] if isinstance(sizes, numbers.Integral) else list(sizes)
        if not sizes or any(int(size) < 1 for size in sizes):
            raise ValueError(
                f"hidden_layer_sizes must be positive integers, got {self.hidden_layer_sizes}."
            )
        return [int(size) for size in sizes]

    def _mlp_template(
        self, model: Any, n_features: int, n_outputs: int, out_activation: str,
        dtype: np.dtype, score_from_graph_output: bool,
    ) -> Template:
        """Initialize ``model`` like scikit-learn (Glorot uniform) and convert it.

        scikit-learn draws, layer after layer, the coefficients then the intercepts from
        :math:`U(-b, b)`, :math:`b = \\sqrt{f / (n_{in} + n_{out})}` with :math:`f = 2` for
        the logistic activation and 6 otherwise.
        """
        units = [n_features, *self._hidden(), n_outputs]
        rng = check_random_state(self.random_state)
        factor = 2.0 if self.activation == "logistic" else 6.0
        model.coefs_, model.intercepts_ = [], []
        for fan_in, fan_out in itertools.pairwise(units):
            bound = np.sqrt(factor / (fan_in + fan_out))
            model.coefs_.append(rng.uniform(-bound, bound, (fan_in, fan_out)).astype(dtype))
            model.intercepts_.append(rng.uniform(-bound, bound, fan_out).astype(dtype))
        model.n_layers_ = len(units)
        model.n_outputs_ = n_outputs
        model.out_activation_ = out_activation
        model.n_features_in_ = n_features
        onx = to_onnx(model, np.zeros((1, n_features), dtype=dtype), target_opset=TARGET_OPSET,
                      options={"zipmap": False} if isinstance(model, MLPClassifier) else None)
        weights = list(get_train_initializer(onx))
        # skl2onnx writes each layer's coefficient then its intercept.
        if len(weights) != 2 * (len(units) - 1):
            raise RuntimeError(f"Unexpected weights {weights} in the converted MLP.")
        last_bias = weights[-1]
        score = (
            onx.graph.output[0].name if score_from_graph_output
            else next(node.output[0] for node in onx.graph.node if last_bias in node.input)
        )
        self.n_layers_, self.n_outputs_, self.out_activation_ = (
            model.n_layers_, n_outputs, out_activation
        )
        outputs = [out.name for out in onx.graph.output]
        return Template(onx, score, weights, outputs, penalized=weights[0::2])

    def _set_fitted_attributes(self, weights: dict[str, np.ndarray]) -> None:
        values = list(weights.values())
        self.coefs_ = [w.copy() for w in values[0::2]]
        self.intercepts_ = [b.ravel().copy() for b in values[1::2]]

    def _sync(self, partial: bool, before: int) -> None:
        super()._sync(partial, before)
        if self.loss_curve_:
            # scikit-learn's MLPs: loss_ is the mean loss of the last epoch.
            self.loss_ = float(self.loss_curve_[-1])


_SHARED_DOC = """
    Parameters
    ----------
    hidden_layer_sizes : tuple of int, default=(100,)
        Units of each hidden layer.
    activation : {'relu', 'tanh', 'logistic', 'identity'}, default='relu'
    alpha : float, default=0.0001
        L2 penalty as scikit-learn's MLP: the term :math:`\\frac{\\alpha}{2 n_B}
        \\sum_i \\|W_i\\|^2` on the coefficients of every batch of :math:`n_B` rows. An
        explicit ``learning_penalty`` replaces it.
    learning_rate : None, float, str or BaseLearningRate
        None: Adam with :math:`\\eta = 0.001` (scikit-learn's MLP default).
    learning_loss, learning_penalty, early_stopping, validation_fraction, shuffle :
        As in :class:`~skl_ortgrad.OnnxSGDRegressor`.
    random_state, warm_start, verbose, device, n_threads, dtype, backend :
        As in :class:`~skl_ortgrad.OnnxSGDRegressor`.
    max_iter, tol, n_iter_no_change, batch_size :
        As in :class:`~skl_ortgrad.OnnxSGDRegressor`; the defaults of ``max_iter``
        (200), ``tol`` (1e-4), ``n_iter_no_change`` (10) and ``batch_size``
        ('auto' = min(200, n_samples)) are scikit-learn's MLP ones.
"""


class OnnxMLPRegressor(RegressorMixin, _BaseOnnxMLP):
    __doc__ = (
        """Multi-layer perceptron regressor trained on its ONNX graph.

    Minimizes :math:`\\frac{1}{2 n_B} \\sum_i \\|f(x_i) - y_i\\|^2` (or ``learning_loss``)
    over mini-batches; single and multi-output ``y``.
    """
        + _SHARED_DOC
        + """
    Attributes
    ----------
    coefs_, intercepts_ : list of ndarray
        Trained weights of every layer.
    n_layers_, n_outputs_, out_activation_, n_iter_, t_ :
        As in scikit-learn.
    loss_ : float
        Mean training loss of the last epoch (``loss_curve_[-1]``), as in scikit-learn.
    loss_curve_, best_loss_, n_features_in_, feature_names_in_ :
        As in scikit-learn.
    """
    )

    _multi_output = True

    def _default_loss(self) -> SquareLearningLoss:
        return SquareLearningLoss()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags

    def _prepare_targets(self, y: Any, first_call: bool, classes: Any) -> np.ndarray:
        y = numeric_targets(y)
        if first_call:
            self.n_outputs_ = y.shape[1]
        elif y.shape[1] != self.n_outputs_:
            raise ValueError(f"y has {y.shape[1]} columns, the model has {self.n_outputs_}.")
        return y

    def _template(self, n_features: int, dtype: np.dtype) -> Template:
        template = self._mlp_template(
            MLPRegressor(activation=self.activation), n_features, self.n_outputs_,
            "identity", dtype, score_from_graph_output=True,
        )
        _reshape_output(template.model, self.n_outputs_)
        return template

    def predict(self, X: Any) -> np.ndarray:
        """Predicted values, shape (n_samples,) or (n_samples, n_outputs)."""
        out = self._run(X)[self._template_.score].astype(np.float64)
        return out.ravel() if self.n_outputs_ == 1 else out


class OnnxMLPClassifier(ClassifierTargetsMixin, ClassifierMixin, _BaseOnnxMLP):
    __doc__ = (
        """Multi-layer perceptron classifier trained on its ONNX graph.

    Binary problems end in one logistic unit, multiclass problems in a softmax; both are
    trained with the numerically stable cross-entropy on the last layer's raw scores.
    ``predict_proba`` rows sum to 1.
    """
        + _SHARED_DOC
        + """
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coefs_, intercepts_ : list of ndarray
    n_layers_, n_outputs_, out_activation_, n_iter_, t_ :
        As in scikit-learn.
    loss_ : float
        Mean training loss of the last epoch (``loss_curve_[-1]``), as in scikit-learn.
    loss_curve_, best_loss_, n_features_in_, feature_names_in_ :
        As in scikit-learn.
    """
    )

    def _template(self, n_features: int, dtype: np.dtype) -> Template:
        binary = len(self.classes_) == 2
        model = MLPClassifier(activation=self.activation)
        model.classes_ = onnx_classes(self.classes_)
        model._label_binarizer = LabelBinarizer().fit(model.classes_)
        return self._mlp_template(
            model, n_features, 1 if binary else len(self.classes_),
            "logistic" if binary else "softmax", dtype, score_from_graph_output=False,
        )
