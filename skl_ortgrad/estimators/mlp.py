"""Multi-layer perceptrons trained on their ONNX graph by onnxruntime: drop-in replacements
for scikit-learn's ``MLPRegressor`` and ``MLPClassifier``.

The network is a scikit-learn MLP of the requested shape, initialized as scikit-learn
does, converted with skl2onnx; every ``coefs_[i]`` and ``intercepts_[i]`` is a weight of
the ONNX graph trained by the engine.
"""

from __future__ import annotations

import copy
import itertools
import numbers
import operator
from typing import Any, ClassVar

import numpy as np
from onnx import helper as onnx_helper
from onnx import numpy_helper
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.preprocessing import LabelBinarizer
from sklearn.utils._available_if import available_if
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import column_or_1d

from skl_ortgrad.estimators.base import BaseOnnxEstimator, numeric_targets
from skl_ortgrad.estimators.classification import ClassifierTargetsMixin, onnx_classes
from skl_ortgrad.estimators.conversion import convert_model
from skl_ortgrad.estimators.parameter_docs import MLP, class_docstring, mlp_attributes
from skl_ortgrad.estimators.template import Template
from skl_ortgrad.graph.weights import get_train_initializer
from skl_ortgrad.optim import (
    BaseLearningRate,
    LearningRateAdam,
    LearningRateSGD,
    LearningRateSGDNesterov,
)
from skl_ortgrad.optim.loss_penalty import L2LossPenalty
from skl_ortgrad.optim.losses import (
    BaseLearningLoss,
    NegLogLearningLoss,
    PoissonLearningLoss,
    SquareLearningLoss,
)
from skl_ortgrad.optim.penalties import (
    ElasticLearningPenalty,
    NoLearningPenalty,
)
from skl_ortgrad.optim.scaled import ScaledLearningRate
from skl_ortgrad.runtime.random_state import check_random_state


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


def _multilabel_outputs(onx: Any, outputs: list[str], n_labels: int, dtype: np.dtype) -> None:
    """Make skl2onnx's multilabel MLP graph right for every label count and dtype (in
    place): with two labels it writes ``probabilities`` as ``[1 - p, p]``, as for a binary
    problem (four columns instead of two), and its labels are an ``ai.onnx.ml``
    ``Binarizer``, which onnxruntime has no double kernel of: the labels become
    ``p > 0.5`` (``Greater`` with a threshold of the graph's ``dtype``, what
    ``Binarizer(threshold=0.5)`` computes), declared ``[N, n_labels]`` (skl2onnx declares
    ``[N]``). ``outputs``: the labels' and the probabilities' names."""
    graph = onx.graph
    label, probabilities = outputs
    declared = next(out for out in graph.output if out.name == label)
    dims = declared.type.tensor_type.shape.dim
    del dims[1:]
    dims.add().dim_value = n_labels
    for i, node in enumerate(graph.node):
        if node.op_type == "Concat" and probabilities in node.output:
            graph.node[i].CopyFrom(onnx_helper.make_node(
                "Identity", [node.input[-1]], [probabilities], name=node.name))
        elif node.op_type == "Binarizer":
            half = f"{node.name}_threshold"
            graph.initializer.append(numpy_helper.from_array(np.array(0.5, dtype=dtype), half))
            graph.node[i].CopyFrom(onnx_helper.make_node(
                "Greater", [node.input[0], half], list(node.output), name=node.name))


class _BaseOnnxMLP(BaseOnnxEstimator):
    """What both MLPs share: scikit-learn's parameters, shape, initialization, conversion,
    fitted attributes."""

    _parameter_constraints: ClassVar[dict] = {
        **BaseOnnxEstimator._parameter_constraints,
        **MLPClassifier._parameter_constraints,
        "solver": [StrOptions({"lbfgs", "sgd", "adam"}), BaseLearningRate],
        "learning_rate": [StrOptions({"constant", "invscaling", "adaptive"}), BaseLearningRate],
        # None (no stopping rule: max_iter epochs) is this package's addition.
        "tol": [Interval(numbers.Real, 0, None, closed="left"), None],
    }
    _partial_fit_early_stopping = "partial_fit does not support early_stopping=True"
    # scikit-learn's MLPs' words.
    _too_small_validation = ("The validation set is too small. Increase 'validation_fraction' "
                             "or the size of your dataset.")

    # scikit-learn's MLPs split with train_test_split, whose parts are shuffled.
    _split_keeps_order = False

    def _split_random_state(self, n_features: int, restart: bool) -> np.random.RandomState:
        """scikit-learn's MLPs split with the generator that drew the initial weights,
        after those draws on a fresh fit: here a generator of ``random_state`` moved past
        one uniform draw per initial weight (:meth:`_mlp_template` draws them after the
        split, from a generator of its own or from the ``RandomState`` given, which the
        split leaves as it is: it draws from a copy)."""
        given = self.random_state
        generator = check_random_state(given)
        if not isinstance(given, numbers.Integral):
            generator = copy.deepcopy(generator)
        if restart:
            units = self._layer_units(n_features, self.n_outputs_)
            generator.random_sample(sum((fan_in + 1) * fan_out
                                        for fan_in, fan_out in itertools.pairwise(units)))
        return generator

    def _resolved_batch_size(self, n_samples: int) -> int:
        # scikit-learn's MLP rule; L-BFGS sees the whole data at once.
        if self.solver == "lbfgs":
            return n_samples
        return min(200, n_samples) if self.batch_size == "auto" else int(self.batch_size)

    @property
    def _records_curves(self) -> bool:
        """scikit-learn's stochastic solvers record the loss curve, L-BFGS does not."""
        return self.solver != "lbfgs"

    def _patience(self) -> float:
        # scikit-learn's MLPs stop once the count of epochs without improvement exceeds
        # n_iter_no_change; the optimizer stops when it reaches its own.
        return self.n_iter_no_change + 1

    def _max_iter_warning(self) -> str | None:
        if self.solver == "lbfgs" or self.tol is None:
            return None  # fit_lbfgs warns in scikit-learn's words for L-BFGS
        return (
            f"Stochastic Optimizer: Maximum iterations ({self.max_iter}) reached and the "
            "optimization hasn't converged yet."
        )

    def _rate(self) -> BaseLearningRate:
        """The update rule of ``solver`` with scikit-learn's MLP parameters.

        'adam': :class:`~skl_ortgrad.LearningRateAdam` (``learning_rate_init``,
        ``beta_1``, ``beta_2``, ``epsilon``); 'sgd': the ``learning_rate`` schedule from
        ``learning_rate_init`` (``power_t``), with ``momentum`` (Nesterov's if
        ``nesterovs_momentum``); an object given as ``solver`` or ``learning_rate`` is
        used as given.
        """
        for value in (self.solver, self.learning_rate):
            if isinstance(value, BaseLearningRate):
                return value
        eta0 = float(self.learning_rate_init)
        if self.solver == "adam":
            return LearningRateAdam(eta0=eta0, beta1=float(self.beta_1),
                                    beta2=float(self.beta_2), epsilon=float(self.epsilon))
        schedule = "constant" if self.learning_rate == "adaptive" else self.learning_rate
        plain = {"eta0": eta0, "power_t": float(self.power_t), "learning_rate": schedule}
        rate = (
            LearningRateSGDNesterov(**plain, momentum=float(self.momentum),
                                    nesterov=bool(self.nesterovs_momentum))
            if self.momentum > 0 else LearningRateSGD(**plain)
        )
        if self.learning_rate == "adaptive":
            return ScaledLearningRate(rate, adaptive=True)
        if self.learning_rate == "invscaling":
            # scikit-learn's MLPs change this rate at the end of each epoch only.
            return ScaledLearningRate(rate, per_epoch=True)
        return rate

    def _training_objects(self, batch_size: int, mean_weight: float,
                          sparse: bool) -> tuple[Any, Any, Any]:
        r"""The rate of :meth:`_rate`, the loss, and scikit-learn's MLP L2 term
        :math:`\frac{\alpha}{2} \sum \|W\|^2` of every batch's loss.

        Its gradient :math:`\alpha W`, scaled as the rest of the batch's by :math:`1 /
        n_B` (the batch's rows or summed sample weights), goes through the update rule
        as scikit-learn's (:class:`~skl_ortgrad.L2LossPenalty`;
        none for :math:`\alpha = 0`).
        L-BFGS minimizes the mean loss of all the rows plus :math:`\frac{\alpha}{2 n}
        \sum \|W\|^2` (``batch_size`` is then every row), its gradient added to the
        loss gradient. Sparse features train as dense ones (scikit-learn's MLPs).
        """
        if self.solver == "lbfgs":
            rows = max(batch_size * mean_weight, 1e-12)
            penalty = ElasticLearningPenalty(l1=0.0, l2=float(self.alpha) / rows)
        else:
            # Without a term, nothing to add per batch (and the program may run).
            penalty = (L2LossPenalty(alpha=float(self.alpha)) if self.alpha > 0
                       else NoLearningPenalty())
        return self._rate(), self._loss(), penalty

    def _solve(self, data: tuple[list[Any], bool], X_val: Any, y_val: Any, scorer: Any) -> None:
        if self.solver != "lbfgs":
            if scorer is None:
                super()._solve(data, X_val, y_val, scorer)
                return
            # scikit-learn's MLPs end early stopping at the weights of the best
            # validation score (the first of equal ones), not at the last epoch's.
            best: dict[str, Any] = {"score": -np.inf, "weights": None}

            def scored(*args: Any) -> float:
                score = scorer(*args)
                if score > best["score"]:
                    best["score"] = score
                    best["weights"] = [w.copy() for w in self.optimizer_.weights_]
                return score

            super()._solve(data, X_val, y_val, scored)
            if best["weights"] is not None:
                self.optimizer_.state_.set_weights(best["weights"])
            return
        # Imported here: it loads onnxruntime, which ``import skl_ortgrad`` does not.
        from skl_ortgrad.training.lbfgs import fit_lbfgs

        fit_lbfgs(self.optimizer_, data, int(self.max_iter), int(self.max_fun),
                  0.0 if self.tol is None else float(self.tol))

    def _restart_schedule(self) -> None:
        """scikit-learn's warm-started ``fit`` builds a new optimizer: the update rule's
        state (velocities, Adam's moments and counter, the adaptive divisor) starts again;
        ``t_`` goes on."""
        optimizer = self.optimizer_
        optimizer.lr_state_ = optimizer.learning_rate_.init_state(optimizer.weights_)

    def _is_stochastic(self) -> bool:
        if self.solver == "lbfgs":
            raise AttributeError(
                "partial_fit is only available for stochastic optimizers. lbfgs is not "
                "stochastic."
            )
        return True

    def _layer_units(self, n_features: int, n_outputs: int) -> list[int]:
        """Units of every layer, from the input's to the output's."""
        sizes = self.hidden_layer_sizes
        sizes = [sizes] if isinstance(sizes, numbers.Integral) else list(sizes)
        if any(operator.index(size) < 1 for size in sizes):
            raise ValueError(f"hidden_layer_sizes must be > 0, got {sizes}.")
        return [n_features, *map(operator.index, sizes), n_outputs]

    def _mlp_template(
        self, model: Any, n_features: int, n_outputs: int, out_activation: str,
        dtype: np.dtype, score_from_graph_output: bool,
    ) -> Template:
        """Initialize ``model`` like scikit-learn (Glorot uniform) and convert it.

        scikit-learn draws, layer after layer, the coefficients then the intercepts from
        :math:`U(-b, b)`, :math:`b = \\sqrt{f / (n_{in} + n_{out})}` with :math:`f = 2` for
        the logistic activation and 6 otherwise.
        """
        units = self._layer_units(n_features, n_outputs)
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
        onx = convert_model(model, n_features, dtype,
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

    def _fitted_attributes(self, weights: dict[str, np.ndarray]) -> dict[str, Any]:
        values = list(weights.values())
        return {"coefs_": [w.astype(self._data_dtype()) for w in values[0::2]],
                "intercepts_": [b.ravel().astype(self._data_dtype()) for b in values[1::2]]}

    def _published(self, before: int) -> dict[str, Any]:
        published = super()._published(before)
        # scikit-learn's MLPs count the samples seen; the optimizer's t is one more.
        published["t_"] = int(self.optimizer_.t_) - 1
        if self.optimizer_.train_losses_:
            # scikit-learn's MLPs: loss_ is the mean loss of the last epoch.
            published["loss_"] = float(self.optimizer_.train_losses_[-1])
        if not self._records_curves:
            # scikit-learn's L-BFGS MLPs have neither a loss curve nor what follows it
            # (the optimizer's train_losses_ holds the losses).
            for name in ("loss_curve_", "best_loss_", "validation_scores_",
                         "best_validation_score_"):
                published.pop(name, None)
        elif self.early_stopping:
            # scikit-learn's MLPs track the validation score with early stopping, the
            # best training loss without, and set the other attributes to None.
            published["best_loss_"] = None
        else:
            published["validation_scores_"] = published["best_validation_score_"] = None
        if self.solver != "lbfgs":
            # scikit-learn's count of epochs without improvement by tol, at the end of
            # the call (n_iter_no_change + 1 when the rule stopped it).
            published["_no_improvement_count"] = int(
                getattr(self.optimizer_, "no_improvement_count_", 0))
        return published


def _store(estimator: BaseOnnxEstimator, params: dict[str, Any]) -> None:
    """Store ``__init__``'s arguments as attributes of the same name, and nothing else."""
    for name, value in params.items():
        if name not in ("self", "__class__"):
            setattr(estimator, name, value)


class OnnxMLPRegressor(RegressorMixin, _BaseOnnxMLP):
    _multi_output = True
    _parameter_constraints: ClassVar[dict] = {
        **_BaseOnnxMLP._parameter_constraints,
        "loss": [StrOptions({"squared_error", "poisson"}), BaseLearningLoss],
    }

    def __init__(
        self,
        loss: Any = "squared_error",
        hidden_layer_sizes: Any = (100,),
        activation: str = "relu",
        *,
        solver: Any = "adam",
        alpha: float = 0.0001,
        batch_size: int | str = "auto",
        learning_rate: Any = "constant",
        learning_rate_init: float = 0.001,
        power_t: float = 0.5,
        max_iter: int = 200,
        shuffle: bool = True,
        random_state: Any = None,
        tol: float = 1e-4,
        verbose: bool = False,
        warm_start: bool = False,
        momentum: float = 0.9,
        nesterovs_momentum: bool = True,
        early_stopping: bool = False,
        validation_fraction: float = 0.1,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-8,
        n_iter_no_change: int = 10,
        max_fun: int = 15000,
        device: str = "cpu",
        n_threads: int | str = "auto",
        dtype: Any = np.float32,
        backend: str = "auto",
    ) -> None:
        _store(self, locals())

    def _loss(self) -> BaseLearningLoss:
        if isinstance(self.loss, BaseLearningLoss):
            if self.loss.is_classification:
                raise ValueError(
                    f"loss={self.loss!r} is a classification loss; OnnxMLPRegressor takes "
                    "'squared_error' or a regression loss object."
                )
            return self.loss
        return PoissonLearningLoss() if self.loss == "poisson" else SquareLearningLoss()

    @available_if(_BaseOnnxMLP._is_stochastic)
    def partial_fit(self, X: Any, y: Any, sample_weight: Any = None) -> OnnxMLPRegressor:
        """One epoch over ``(X, y)`` (stochastic solvers only, as in scikit-learn)."""
        return super().partial_fit(X, y, sample_weight=sample_weight)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags

    def _prepare_targets(self, y: Any, first_call: bool, classes: Any) -> np.ndarray:
        y = numeric_targets(y)
        if self._loss().kind == "poisson" and (y < 0).any():
            raise ValueError(
                "Some value(s) of y are negative which is not allowed for Poisson regression."
            )
        if first_call:
            self.n_outputs_ = y.shape[1]
        elif y.shape[1] != self.n_outputs_:
            raise ValueError(f"y has {y.shape[1]} columns, the model has {self.n_outputs_}.")
        return y

    def _template(self, n_features: int, dtype: np.dtype) -> Template:
        """scikit-learn's graph; with the Poisson loss the output is :math:`e^s` and the
        loss reads the raw score :math:`s` (scikit-learn's ``out_activation_='exp'``,
        which skl2onnx does not write: an ``Exp`` goes between the score and the final
        ``Reshape``)."""
        poisson = self._loss().kind == "poisson"
        template = self._mlp_template(
            MLPRegressor(activation=self.activation), n_features, self.n_outputs_,
            "identity", dtype, score_from_graph_output=not poisson,
        )
        if poisson:
            graph = template.model.graph
            index, reshape = next((i, node) for i, node in enumerate(graph.node)
                                  if node.op_type == "Reshape")
            reshape.input[0] = "expected_count"
            graph.node.insert(index, onnx_helper.make_node(
                "Exp", [template.score], ["expected_count"], name="out_activation_exp"))
            self.out_activation_ = "exp"
        _reshape_output(template.model, self.n_outputs_)
        return template

    def predict(self, X: Any) -> np.ndarray:
        """Predicted values, shape (n_samples,) or (n_samples, n_outputs)."""
        output = self._fitted_template().outputs[0]
        out = self._in_data_dtype(self._run(X, output)[output])
        return out.ravel() if self.n_outputs_ == 1 else out


OnnxMLPRegressor.__doc__ = class_docstring(
    OnnxMLPRegressor,
    """Multi-layer perceptron regressor trained on its ONNX graph: a drop-in
    replacement of ``MLPRegressor``.

    Minimizes :math:`\\frac{1}{2 n_B} \\sum_i \\|f(x_i) - y_i\\|^2` (or the ``loss``)
    over mini-batches of :math:`n_B` rows, or over the whole data with 'lbfgs'; single
    and multi-output ``y``.
    """,
    MLP, mlp_attributes(classifier=False),
)


class OnnxMLPClassifier(ClassifierTargetsMixin, ClassifierMixin, _BaseOnnxMLP):
    def __init__(
        self,
        hidden_layer_sizes: Any = (100,),
        activation: str = "relu",
        *,
        solver: Any = "adam",
        alpha: float = 0.0001,
        batch_size: int | str = "auto",
        learning_rate: Any = "constant",
        learning_rate_init: float = 0.001,
        power_t: float = 0.5,
        max_iter: int = 200,
        shuffle: bool = True,
        random_state: Any = None,
        tol: float = 1e-4,
        verbose: bool = False,
        warm_start: bool = False,
        momentum: float = 0.9,
        nesterovs_momentum: bool = True,
        early_stopping: bool = False,
        validation_fraction: float = 0.1,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-8,
        n_iter_no_change: int = 10,
        max_fun: int = 15000,
        device: str = "cpu",
        n_threads: int | str = "auto",
        dtype: Any = np.float32,
        backend: str = "auto",
    ) -> None:
        _store(self, locals())

    # Multilabel targets: an indicator matrix, one column per label (scikit-learn's
    # MLPClassifier takes them too).
    _multi_output = True

    def _multilabel(self) -> bool:
        """Whether the classes are labels of a multilabel indicator matrix: one logistic
        output per label (binary problems have one output, multiclass ones a softmax)."""
        # Unfitted: no (predict then raises NotFittedError).
        return (getattr(self, "out_activation_", None) == "logistic"
                and getattr(self, "n_outputs_", 1) > 1)

    _unknown_labels = ("`y` has classes not in `self.classes_`. `self.classes_` has "
                       "{classes}. 'y' has {labels}.")

    def _stratification(self, y: Any, targets: np.ndarray) -> Any:
        """scikit-learn's MLPClassifier stratifies on its binarized labels where they are
        one column (two classes): neither the classes of a softmax nor multilabel
        targets."""
        return targets.astype(bool) if self.n_outputs_ == 1 else None

    def _prepare_targets(self, y: Any, first_call: bool, classes: Any) -> np.ndarray:
        """Labels as the loss reads them, and on the first call the classes and the
        output layer: one logistic unit (binary), a softmax (multiclass), or one logistic
        unit per column of a multilabel indicator matrix (``classes_`` is then
        ``arange(n_labels)``, scikit-learn's)."""
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            # scikit-learn's DataConversionWarning.
            y = column_or_1d(y, warn=True)
        if y.ndim == 1:
            if not first_call and self._multilabel():
                raise ValueError(
                    f"The classifier was fit on {self.n_outputs_} labels (a multilabel "
                    "indicator matrix); y has one column.")
            targets = super()._prepare_targets(y, first_call, classes)
            if first_call:
                self.n_outputs_ = targets.shape[1]
                self.out_activation_ = "logistic" if targets.shape[1] == 1 else "softmax"
            return targets
        kind = type_of_target(y)
        if kind != "multilabel-indicator":
            # scikit-learn's LabelBinarizer's words.
            raise ValueError(
                "Multioutput target data is not supported with label binarization "
                f"(y is {kind}).")
        if first_call:
            self.classes_ = np.arange(y.shape[1])
            self.n_outputs_, self.out_activation_ = y.shape[1], "logistic"
        elif not self._multilabel() or y.shape[1] != self.n_outputs_:
            raise ValueError(
                f"y has {y.shape[1]} labels; the classifier was fit on "
                f"{len(self.classes_) if self._multilabel() else 'a 1-D y'}.")
        # A label is set where the indicator is not 0, as scikit-learn's binarizer reads it.
        return (y != 0).astype(np.float32)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_label = True
        return tags

    def _check_warm_start_targets(self, y: Any) -> None:
        if np.ndim(y) == 2 and np.shape(y)[1] > 1:
            # Checked with the labels (_prepare_targets).
            return
        super()._check_warm_start_targets(y)

    def _loss(self) -> BaseLearningLoss:
        # eps=0 selects the stable log-sigmoid / log-softmax form, whose gradient does
        # not vanish on badly misclassified samples; multilabel outputs each have their
        # own logistic loss, summed.
        function = "sigmoid" if self.out_activation_ == "logistic" else "softmax"
        return NegLogLearningLoss(eps=0.0, probability_function=function)

    def predict(self, X: Any) -> np.ndarray:
        """Predicted class labels; for multilabel targets the indicator matrix of the
        labels whose probability is above 0.5 (a positive score), as scikit-learn."""
        if self._multilabel():
            output = self._fitted_template().outputs[0]
            return self._run(X, output)[output]
        return super().predict(X)

    @available_if(_BaseOnnxMLP._is_stochastic)
    def partial_fit(
        self, X: Any, y: Any, classes: Any = None, sample_weight: Any = None
    ) -> OnnxMLPClassifier:
        """One epoch over ``(X, y)`` (stochastic solvers only, as in scikit-learn);
        ``classes`` is required on the first call."""
        return super().partial_fit(X, y, classes=classes, sample_weight=sample_weight)

    def _template(self, n_features: int, dtype: np.dtype) -> Template:
        model = MLPClassifier(activation=self.activation)
        model.classes_ = onnx_classes(self.classes_)
        multilabel = self._multilabel()
        # skl2onnx reads the kind of targets from the binarizer: an indicator matrix
        # makes it write a Binarizer of the probabilities for the labels.
        model._label_binarizer = LabelBinarizer().fit(
            np.eye(self.n_outputs_, dtype=np.int64) if multilabel else model.classes_)
        template = self._mlp_template(
            model, n_features, self.n_outputs_, self.out_activation_, dtype,
            score_from_graph_output=False,
        )
        if multilabel:
            _multilabel_outputs(template.model, template.outputs, self.n_outputs_, dtype)
        return template


OnnxMLPClassifier.__doc__ = class_docstring(
    OnnxMLPClassifier,
    """Multi-layer perceptron classifier trained on its ONNX graph: a drop-in
    replacement of ``MLPClassifier``.

    Binary problems end in one logistic unit, multiclass problems in a softmax; both are
    trained with the numerically stable cross-entropy on the last layer's raw scores, and
    ``predict_proba`` rows sum to 1. Multilabel targets (``y`` an indicator matrix, as
    scikit-learn's) end in one logistic unit per label, each with its log loss:
    ``classes_`` is ``arange(n_labels)``, ``predict`` returns the indicator of the labels
    whose probability is above 0.5 and ``predict_proba`` each label's probability.
    """,
    MLP, mlp_attributes(classifier=True),
)
