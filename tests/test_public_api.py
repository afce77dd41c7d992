"""The documented public names import from where users expect them: the package root
and the seed's module paths."""

import ast
import inspect
from pathlib import Path

from sklearn.base import BaseEstimator

import skl_ortgrad


def test_top_level_names():
    from skl_ortgrad import (
        AbsoluteLearningLoss,
        ConvergenceError,
        ElasticLearningLoss,
        ElasticLearningPenalty,
        EpsilonInsensitiveLearningLoss,
        HingeLearningLoss,
        HuberLearningLoss,
        L2LossPenalty,
        LearningRateSGD,
        LearningRateSGDNesterov,
        ModifiedHuberLearningLoss,
        NegLogLearningLoss,
        NoLearningPenalty,
        OnnxSGDClassifier,
        OnnxSGDRegressor,
        SquareLearningLoss,
    )
    from skl_ortgrad.estimators.sgd import OnnxSGDClassifier as SGDClassifierImpl
    from skl_ortgrad.training.sgd_learning_loss import BaseLearningLoss
    from skl_ortgrad.training.sgd_learning_penalty import BaseLearningPenalty
    from skl_ortgrad.training.sgd_learning_rate import BaseLearningRate

    assert OnnxSGDClassifier is SGDClassifierImpl
    assert issubclass(ConvergenceError, ValueError)
    assert issubclass(LearningRateSGDNesterov, LearningRateSGD)
    assert issubclass(LearningRateSGD, BaseLearningRate)
    for loss in (
        SquareLearningLoss, AbsoluteLearningLoss, ElasticLearningLoss, NegLogLearningLoss,
        HuberLearningLoss, EpsilonInsensitiveLearningLoss, HingeLearningLoss,
        ModifiedHuberLearningLoss,
    ):
        assert issubclass(loss, BaseLearningLoss)
    for penalty in (NoLearningPenalty, ElasticLearningPenalty, L2LossPenalty):
        assert issubclass(penalty, BaseLearningPenalty)
    assert OnnxSGDRegressor().get_params()["max_iter"] == 1000


def test_all_is_complete_and_importable():
    from skl_ortgrad.training import sgd_learning_loss

    for name in skl_ortgrad.__all__:
        assert getattr(skl_ortgrad, name) is not None, name
    # Every loss class of the loss module is exported at the top level.
    assert set(sgd_learning_loss.__all__) <= set(skl_ortgrad.__all__)
    assert "ConvergenceError" in skl_ortgrad.__all__
    assert len(set(skl_ortgrad.__all__)) == len(skl_ortgrad.__all__)


def _parameters(function) -> list[str]:
    return list(inspect.signature(function).parameters)


def test_module_level_names():
    """The seed's module paths hold the package's own implementations (not copies), with
    the seed's signatures."""
    from skl_ortgrad.gradient import derivative, forward_backward
    from skl_ortgrad.graph import weights
    from skl_ortgrad.objective import merge, penalty
    from skl_ortgrad.training.grad_helper import DerivativeOptions, onnx_derivative, random_feed
    from skl_ortgrad.training.optimizers_partial import OrtGradientForwardBackwardOptimizer
    from skl_ortgrad.training.ortgradient import (
        OrtGradientForwardBackward,
        OrtGradientForwardBackwardFunction,
    )
    from skl_ortgrad.utils.orttraining_helper import (
        add_loss_output,
        get_train_initializer,
        penalty_loss_onnx,
    )

    assert onnx_derivative is derivative.onnx_derivative
    assert DerivativeOptions is derivative.DerivativeOptions
    assert random_feed is derivative.random_feed
    assert OrtGradientForwardBackward is forward_backward.OrtGradientForwardBackward
    assert (OrtGradientForwardBackwardFunction
            is forward_backward.OrtGradientForwardBackwardFunction)
    assert add_loss_output is merge.add_loss_output
    assert penalty_loss_onnx is penalty.penalty_loss_onnx
    assert get_train_initializer is weights.get_train_initializer

    # Seeds 001-004: the parameters code written for onnxcustom passes, in its order.
    assert _parameters(onnx_derivative)[:7] == [
        "onx", "weights", "inputs", "options", "loss", "label", "path_name"]
    assert list(DerivativeOptions.__members__) == [
        "Zero", "KeepYieldOp", "KeepOutputs", "FillGrad", "Loss"]
    assert _parameters(OrtGradientForwardBackward)[:13] == [
        "onnx_model", "weights_to_train", "input_names", "output_names", "class_name",
        "sess_options", "providers", "provider_options", "run_options",
        "graph_builder_config", "device_index", "enable_logging", "debug"]
    assert callable(OrtGradientForwardBackwardFunction.forward)
    assert callable(OrtGradientForwardBackwardFunction.backward)
    assert issubclass(OrtGradientForwardBackwardOptimizer, BaseEstimator)
    assert {"model_onnx", "weights_to_train", "max_iter", "batch_size", "learning_rate",
            "learning_loss", "learning_penalty"} <= set(
        OrtGradientForwardBackwardOptimizer._get_param_names())
    assert callable(OrtGradientForwardBackwardOptimizer.get_state)
    assert _parameters(add_loss_output)[:2] == ["onx", "score_name"]
    assert _parameters(penalty_loss_onnx)[:4] == ["name", "dtype", "l1", "l2"]
    assert _parameters(get_train_initializer)[:1] == ["onx"]


def test_no_module_imports_the_package_root():
    """Modules inside the package import modules, never names of the root's namespace
    (``__version__`` lives in ``skl_ortgrad._version``)."""
    package = Path(skl_ortgrad.__file__).parent
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                assert "skl_ortgrad" not in [alias.name for alias in node.names], path
            elif isinstance(node, ast.ImportFrom) and node.module == "skl_ortgrad":
                for alias in node.names:
                    assert path.name == "__init__.py" or (
                        (package / f"{alias.name}.py").is_file()
                        or (package / alias.name).is_dir()), (path, alias.name)
    assert skl_ortgrad.__version__ == skl_ortgrad._version.__version__
