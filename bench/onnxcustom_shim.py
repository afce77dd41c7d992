"""pytest plugin: onnxcustom's unit tests import skl_ortgrad in the place of onnxcustom.

Loaded by ``bench/onnxcustom_tests.py`` (``-p onnxcustom_shim``) before the test modules
are imported. It fills ``sys.modules`` with

* the seed API's modules under onnxcustom's names (:data:`MODULE_MAP`, the table of
  ``docs/onnxcustom.rst``): ``import onnxcustom.training.ortgradient`` gives
  ``skl_ortgrad.training.ortgradient`` itself, so the tests exercise skl_ortgrad's classes
  and functions, not copies; a module skl_ortgrad does not have (onnxcustom's full-graph
  ``training.optimizers``) stays missing and its tests fail on the import;
* small stand-ins for the test helpers the tests import from packages that are not
  installed here (pyquickhelper's ``ExtTestCase``, mlprodict's ``to_onnx``,
  ``OnnxInference``, ``onnx_simple_text_plot``, ``select_model_inputs_outputs``), and for
  two onnxcustom utilities outside the seed API (``onnx_rename_weights``,
  ``device_to_providers``). They are written here from what the tests use of them.

The tests skip themselves when ``onnxruntime.TrainingSession`` does not import (onnxcustom
needed onnxruntime-training); skl_ortgrad trains on either gradient backend, so the plugin
sets that name to a stand-in where it is missing and the tests run everywhere.
"""

from __future__ import annotations

import functools
import importlib
import io
import logging
import os
import shutil
import sys
import types
import unittest
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

# onnxcustom's module -> skl_ortgrad's module (docs/onnxcustom.rst, "Module map").
MODULE_MAP = {
    "onnxcustom.training": "skl_ortgrad.training",
    "onnxcustom.training.ortgradient": "skl_ortgrad.training.ortgradient",
    "onnxcustom.training.optimizers_partial": "skl_ortgrad.training.optimizers_partial",
    "onnxcustom.training.sgd_learning_rate": "skl_ortgrad.training.sgd_learning_rate",
    "onnxcustom.training.sgd_learning_loss": "skl_ortgrad.training.sgd_learning_loss",
    "onnxcustom.training.sgd_learning_penalty": "skl_ortgrad.training.sgd_learning_penalty",
    "onnxcustom.training.data_loader": "skl_ortgrad.training.data_loader",
    "onnxcustom.training.grad_helper": "skl_ortgrad.training.grad_helper",
    "onnxcustom.utils.orttraining_helper": "skl_ortgrad.utils.orttraining_helper",
}
# onnxcustom's loggers are named after its modules, like skl_ortgrad's.
LOGGER_MAP = {"onnxcustom": "skl_ortgrad"}
# onnxcustom's __max_supported_opset__, the opset its tests convert their models to.
OPSET = 15


def _module(name: str, **attributes: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__path__ = []  # a package, so that submodules can be registered under it
    module.__dict__.update(attributes)
    sys.modules[name] = module
    return module


# pyquickhelper.pycode ------------------------------------------------------------------


class ExtTestCase(unittest.TestCase):
    """The assertions of pyquickhelper's ``ExtTestCase`` that the tests call."""

    def assertEqualArray(self, expected: Any, value: Any, decimal: int | None = None) -> None:
        expected, value = np.asarray(expected), np.asarray(value)
        if expected.dtype != value.dtype:
            raise AssertionError(f"dtype {expected.dtype} != {value.dtype}")
        if expected.shape != value.shape:
            raise AssertionError(f"shape {expected.shape} != {value.shape}")
        if decimal is None:
            np.testing.assert_array_equal(expected, value)
        else:
            np.testing.assert_almost_equal(expected, value, decimal=decimal)

    def assertRaise(self, fct: Callable[[], Any], exc: type = Exception,
                    msg: str | None = None) -> None:
        try:
            fct()
        except exc as e:
            if msg is not None and msg not in str(e):
                raise AssertionError(f"{msg!r} not in {str(e)!r}") from e
            return
        raise AssertionError(f"{exc.__name__} not raised")

    def assertStartsWith(self, prefix: str, text: str) -> None:
        if not text.startswith(prefix):
            raise AssertionError(f"{text!r} does not start with {prefix!r}")

    def assertEmpty(self, value: Any) -> None:
        if value is not None and len(value) > 0:
            raise AssertionError(f"not empty: {value!r}")

    def assertNotEmpty(self, value: Any) -> None:
        if value is None or len(value) == 0:
            raise AssertionError(f"empty: {value!r}")

    def assertExists(self, path: str) -> None:
        if not os.path.exists(path):
            raise AssertionError(f"{path!r} does not exist")

    def assertLogging(self, fct: Callable[[], Any], logger_name: str,
                      level: int = logging.WARNING) -> tuple[Any, str]:
        """Run ``fct`` and return its result and what the logger wrote at ``level``."""
        logger = logging.getLogger(LOGGER_MAP.get(logger_name, logger_name))
        stream = io.StringIO()
        handler = logging.StreamHandler(stream)
        handler.setLevel(level)
        old_level = logger.level
        logger.addHandler(handler)
        logger.setLevel(level)
        try:
            result = fct()
        finally:
            logger.removeHandler(handler)
            logger.setLevel(old_level)
        return result, stream.getvalue()


def ignore_warnings(categories: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: run the test with ``categories`` of warnings ignored."""
    if not isinstance(categories, tuple):
        categories = (categories,)

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def run(*args: Any, **kwargs: Any) -> Any:
            with warnings.catch_warnings():
                for category in categories:
                    warnings.simplefilter("ignore", category)
                return function(*args, **kwargs)
        return run
    return decorate


def get_temp_folder(test_file: str, name: str, clean: bool = True) -> str:
    """A folder ``name`` beside the test file, created if needed (emptied if ``clean``)."""
    folder = os.path.join(os.path.dirname(os.path.abspath(test_file)), name.lstrip("_"))
    if clean and os.path.isdir(folder):
        shutil.rmtree(folder)
    os.makedirs(folder, exist_ok=True)
    return folder


def skipif_appveyor(reason: str) -> Callable[[Any], Any]:
    """Not on AppVeyor here: the decorator changes nothing."""
    return lambda function: function


# mlprodict ------------------------------------------------------------------------------


def to_onnx(model: Any, X: Any = None, target_opset: Any = None, **kwargs: Any) -> Any:
    """skl2onnx's ``to_onnx`` (mlprodict's wraps it with the same arguments)."""
    from skl2onnx import to_onnx as skl2onnx_to_onnx

    return skl2onnx_to_onnx(model, X, target_opset=target_opset, **kwargs)


class OnnxInference:
    """``OnnxInference(model).run(feeds)``: onnxruntime, outputs as a dict."""

    def __init__(self, model: Any) -> None:
        from onnxruntime import InferenceSession

        self.session = InferenceSession(model.SerializeToString(),
                                        providers=["CPUExecutionProvider"])

    def run(self, feeds: dict[str, Any]) -> dict[str, Any]:
        names = [o.name for o in self.session.get_outputs()]
        return dict(zip(names, self.session.run(None, feeds), strict=True))


def onnx_simple_text_plot(model: Any) -> str:
    """One line per input, initializer, node and output, as mlprodict writes them."""
    graph = model.graph
    lines = [f"input: name={i.name!r}" for i in graph.input]
    lines += [f"init: name={i.name!r}" for i in graph.initializer]
    lines += [f"{n.op_type}({', '.join(n.input)}) -> {', '.join(n.output)}" for n in graph.node]
    lines += [f"output: name={o.name!r}" for o in graph.output]
    return "\n".join(lines)


def select_model_inputs_outputs(model: Any, outputs: list[str], infer_shapes: bool = False,
                                **kwargs: Any) -> Any:
    """The model cut at one output (skl_ortgrad's ``select_model_output``)."""
    from skl_ortgrad.utils.orttraining_helper import select_model_output

    if len(outputs) != 1:
        raise NotImplementedError("the stand-in cuts at one output")
    return select_model_output(model, outputs[0])


# onnxcustom utilities outside the seed API ------------------------------------------------


def onnx_rename_weights(model: Any) -> Any:
    """Rename the initializers ``I<i>_<name>`` (i zero-padded to the count's digits), so
    that their alphabetical order is the order they are stored in; in place."""
    names = [init.name for init in model.graph.initializer]
    width = len(str(max(len(names) - 1, 0)))
    renamed = {name: f"I{i:0{width}d}_{name}" for i, name in enumerate(names)}
    for init in model.graph.initializer:
        init.name = renamed[init.name]
    for node in model.graph.node:
        node.input[:] = [renamed.get(name, name) for name in node.input]
    return model


def device_to_providers(device: str) -> list[str]:
    """The providers of a device (skl_ortgrad's ``device_providers``)."""
    from skl_ortgrad.runtime.devices import device_providers

    return device_providers(device)


# scikit-learn as the tests knew it ------------------------------------------------------


def _old_scikit_learn() -> None:
    """Two names the tests use that scikit-learn has since removed: ``SGDClassifier(loss=
    'log')`` (renamed ``'log_loss'`` in 1.1, removed in 1.3) and ``log_loss(..., eps=...)``
    (removed in 1.5; it clipped the probabilities to ``[eps, 1 - eps]``)."""
    import sklearn.metrics
    from sklearn.linear_model import SGDClassifier
    from sklearn.utils._param_validation import StrOptions

    constraints = dict(SGDClassifier._parameter_constraints)
    constraints["loss"] = [StrOptions({*constraints["loss"][0].options, "log"})]
    SGDClassifier._parameter_constraints = constraints
    SGDClassifier.loss_functions = {**SGDClassifier.loss_functions,
                                    "log": SGDClassifier.loss_functions["log_loss"]}
    log_loss = sklearn.metrics.log_loss

    @functools.wraps(log_loss)
    def log_loss_with_eps(y_true: Any, y_pred: Any, *args: Any, eps: float | None = None,
                          **kwargs: Any) -> float:
        if eps is not None:
            y_pred = np.clip(y_pred, eps, 1 - eps)
        return log_loss(y_true, y_pred, *args, **kwargs)

    sklearn.metrics.log_loss = log_loss_with_eps


# registration ----------------------------------------------------------------------------


def install() -> list[str]:
    """Fill ``sys.modules``; return the onnxcustom modules left missing."""
    import onnxruntime
    from sklearn.exceptions import ConvergenceWarning

    if not hasattr(onnxruntime, "TrainingSession"):
        onnxruntime.TrainingSession = type("TrainingSession", (), {})

    _old_scikit_learn()
    _module("pyquickhelper")
    _module("pyquickhelper.pycode", ExtTestCase=ExtTestCase, ignore_warnings=ignore_warnings,
            get_temp_folder=get_temp_folder, skipif_appveyor=skipif_appveyor)
    _module("mlprodict")
    _module("mlprodict.onnx_conv", to_onnx=to_onnx)
    _module("mlprodict.onnxrt", OnnxInference=OnnxInference)
    _module("mlprodict.onnxrt.validate")
    _module("mlprodict.plotting")
    _module("mlprodict.plotting.text_plot", onnx_simple_text_plot=onnx_simple_text_plot)
    _module("mlprodict.onnx_tools")
    _module("mlprodict.onnx_tools.onnx_manipulations",
            select_model_inputs_outputs=select_model_inputs_outputs)
    grad_helper = importlib.import_module("skl_ortgrad.training.grad_helper")
    _module("mlprodict.onnxrt.validate.validate_latency", random_feed=grad_helper.random_feed)

    root = _module("onnxcustom", __max_supported_opset__=OPSET)
    root.utils = _module("onnxcustom.utils")
    root.utils.onnx_helper = _module("onnxcustom.utils.onnx_helper",
                                     onnx_rename_weights=onnx_rename_weights)
    root.utils.onnxruntime_helper = _module("onnxcustom.utils.onnxruntime_helper",
                                            device_to_providers=device_to_providers)
    missing = []
    for name, target in MODULE_MAP.items():
        try:
            module = importlib.import_module(target)
        except ImportError:
            missing.append(name)
            continue
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        setattr(sys.modules[parent], child, module)
    # onnxcustom's exceptions module: skl_ortgrad's error, scikit-learn's warning.
    training = sys.modules["onnxcustom.training"]
    excs = types.ModuleType("onnxcustom.training.excs")
    excs.ConvergenceError, excs.ConvergenceWarning = training.ConvergenceError, ConvergenceWarning
    sys.modules[excs.__name__] = excs
    return missing


def pytest_configure(config: Any) -> None:
    """Install the modules before any test module is imported."""
    import skl_ortgrad  # noqa: F401  (imports onnxruntime without touching logging)

    for name in install():
        print(f"onnxcustom_shim: {name} has no counterpart in skl_ortgrad", file=sys.stderr)
