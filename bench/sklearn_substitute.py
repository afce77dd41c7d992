"""pytest plugin: scikit-learn's own SGD and MLP tests, run on skl_ortgrad's estimators.

Loaded with ``-p sklearn_substitute`` (``bench/`` on ``PYTHONPATH``) by
``bench/sklearn_drop_in.py``. At import, before pytest loads scikit-learn's ``conftest.py``
or any test module, it replaces four attributes:

* ``sklearn.linear_model.SGDClassifier`` and ``.SGDRegressor``: ``test_sgd.py`` reads them
  as ``linear_model.SGDClassifier`` (``from sklearn import linear_model``), in its factory
  functions and as the base of its ``_SparseSGD*`` subclasses, all evaluated when the
  test module is imported, hence after this patch;
* ``sklearn.neural_network.MLPClassifier`` and ``.MLPRegressor``: ``test_mlp.py`` imports
  them by name (``from sklearn.neural_network import ...``).

``skl_ortgrad`` and ``skl2onnx`` are imported first: their converters and persistence
code bind scikit-learn's real classes by name at import (skl2onnx conversion, state
decoding), and they must keep those. scikit-learn's private modules
(``_stochastic_gradient``, ``_multilayer_perceptron``) are left alone: the tests do not
take the estimators from there, and our package and skl2onnx rely on them.

Tests that exercise something other than these four estimators are skipped with a reason
starting with :data:`NOT_APPLICABLE` (see :func:`not_applicable_reason`). Every test's
outcome, with the first line of its exception, is written as JSON to the path given by
``--drop-in-report``.

The environment variable ``SKL_ORTGRAD_DROP_IN_DEFAULTS`` (JSON, set by
``bench/sklearn_drop_in.py --batch-size/--dtype``) changes the defaults of the substituted
classes: ``{"sgd": {"batch_size": 1, "dtype": "float64"}, "mlp": {"dtype": "float64"}}``.
Each class is then replaced by a subclass of the same name whose ``__init__`` is the
original's code with other default values (see :func:`with_defaults`), so that a test that
leaves those parameters out gets them, while ``get_params``/``clone`` work as before.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import time
import types
from collections.abc import Generator
from types import ModuleType
from typing import Any

import pytest

# First: its modules take references to scikit-learn's real classes at import.
import skl_ortgrad

# isort: split
# skl2onnx too, whose import registers its converters by scikit-learn's classes (and,
# through skl_ortgrad's import hook, ours): skl_ortgrad imports it lazily, which would
# otherwise happen after the substitution and key the converters on our classes.
import skl2onnx  # noqa: F401

# isort: split
import sklearn.linear_model
import sklearn.neural_network
from sklearn.linear_model._stochastic_gradient import BaseSGD

NOT_APPLICABLE = "not applicable: "
DEFAULTS_VARIABLE = "SKL_ORTGRAD_DROP_IN_DEFAULTS"


def with_defaults(cls: type, defaults: dict[str, Any]) -> type:
    """A subclass of ``cls``, of the same name, whose parameters default to ``defaults``.

    Its ``__init__`` runs the code of ``cls.__init__`` (a copy of the function with other
    default values): same parameter names and kinds, so scikit-learn's ``get_params``,
    ``clone`` and ``__repr__`` see an ordinary estimator whose signature has these
    defaults. The class lives in this module under the original name, so that pickle
    finds it.
    """
    if not defaults:
        return cls
    init = cls.__init__
    parameters = inspect.signature(init).parameters
    unknown = sorted(set(defaults) - set(parameters))
    if unknown:
        raise ValueError(f"{cls.__name__} has no parameter {', '.join(unknown)}")
    positional = [
        name for name, p in parameters.items()
        if p.kind is p.POSITIONAL_OR_KEYWORD and p.default is not p.empty
    ]
    new_init = types.FunctionType(
        init.__code__, init.__globals__, init.__name__,
        tuple(defaults.get(name, parameters[name].default) for name in positional) or None,
        init.__closure__,
    )
    new_init.__kwdefaults__ = {
        name: defaults.get(name, value) for name, value in (init.__kwdefaults__ or {}).items()
    }
    new_init.__annotations__ = dict(init.__annotations__)
    new_init.__doc__ = init.__doc__
    new_init.__qualname__ = f"{cls.__name__}.__init__"
    subclass = type(cls.__name__, (cls,), {
        "__init__": new_init, "__module__": __name__, "__doc__": cls.__doc__,
    })
    setattr(sys.modules[__name__], cls.__name__, subclass)
    return subclass


def _dtype(value: Any) -> Any:
    """A dtype given by name in the JSON ('float64') as the numpy type."""
    import numpy as np

    return getattr(np, value) if isinstance(value, str) and value.startswith("float") else value


def _configured_defaults() -> dict[str, dict[str, Any]]:
    """``{"sgd": {...}, "mlp": {...}}`` from the environment; empty when unset."""
    text = os.environ.get(DEFAULTS_VARIABLE, "")
    config = json.loads(text) if text.strip() else {}
    return {
        family: {name: _dtype(value) if name == "dtype" else value
                 for name, value in config.get(family, {}).items()}
        for family in ("sgd", "mlp")
    }


DEFAULTS = _configured_defaults()

SUBSTITUTES: dict[tuple[ModuleType, str], type] = {
    (sklearn.linear_model, "SGDClassifier"):
        with_defaults(skl_ortgrad.OnnxSGDClassifier, DEFAULTS["sgd"]),
    (sklearn.linear_model, "SGDRegressor"):
        with_defaults(skl_ortgrad.OnnxSGDRegressor, DEFAULTS["sgd"]),
    (sklearn.neural_network, "MLPClassifier"):
        with_defaults(skl_ortgrad.OnnxMLPClassifier, DEFAULTS["mlp"]),
    (sklearn.neural_network, "MLPRegressor"):
        with_defaults(skl_ortgrad.OnnxMLPRegressor, DEFAULTS["mlp"]),
}
ORIGINALS: dict[tuple[ModuleType, str], type] = {
    key: getattr(key[0], key[1]) for key in SUBSTITUTES
}
# A second patch in the same process would take our classes for scikit-learn's.
if any(ORIGINALS[key] is cls for key, cls in SUBSTITUTES.items()):
    raise RuntimeError("scikit-learn's estimators are already substituted in this process")

# Estimators built on scikit-learn's SGD engine that skl_ortgrad does not provide
# (SGDOneClassSVM, Perceptron, PassiveAggressive*): a test parametrized with one of them,
# or with test_sgd.py's factory or sparse subclass named after it, tests scikit-learn.
OTHER_SGD_ESTIMATORS = frozenset(
    name
    for name, obj in vars(sklearn.linear_model).items()
    if isinstance(obj, type)
    and issubclass(obj, BaseSGD)
    and (sklearn.linear_model, name) not in SUBSTITUTES
)

# Test names that say they test SGDOneClassSVM without a parameter naming it.
ONE_CLASS_WORDS = ("oneclass", "one_class", "ocsvm")

# Module aliases in a test body that mean it tests scikit-learn's private SGD code.
PRIVATE_MODULE_USES = {
    "sgd_fast.": "tests scikit-learn's Cython loss functions (_sgd_fast)",
    "_stochastic_gradient.": "patches scikit-learn's private _stochastic_gradient module",
}


def _substitute() -> None:
    for (module, name), cls in SUBSTITUTES.items():
        setattr(module, name, cls)


def _restore() -> None:
    for (module, name), cls in ORIGINALS.items():
        setattr(module, name, cls)


# At import, not in pytest_configure: pytest loads the conftest.py of the packages named on
# the command line before pytest_configure, and those may import scikit-learn modules.
_substitute()


def _param_names(value: Any) -> list[str]:
    """Names a test parameter goes by: a class's MRO names, or a function's name."""
    if isinstance(value, type):
        return [klass.__name__ for klass in value.__mro__]
    name = getattr(value, "__name__", None)
    return [name] if isinstance(name, str) else []


def not_applicable_reason(item: pytest.Item) -> str | None:
    """Why a test does not test the four substituted estimators, or None when it does.

    Parameters
    ----------
    item : pytest.Item
        A collected test.

    Returns
    -------
    str or None
        The reason, or None for a test that applies.

    Notes
    -----
    The rules, in order:

    1. a parameter is, or is named after (a factory function, a ``Sparse`` subclass), a
       scikit-learn SGD-engine estimator other than SGDClassifier / SGDRegressor;
    2. the test's name contains ``oneclass``, ``one_class`` or ``ocsvm``;
    3. the test's body uses ``sgd_fast.`` or ``_stochastic_gradient.``, test_sgd.py's
       aliases of scikit-learn's private modules.
    """
    callspec = getattr(item, "callspec", None)
    for value in (callspec.params.values() if callspec is not None else ()):
        for name in _param_names(value):
            bare = name.removeprefix("_").removeprefix("Sparse")
            if bare in OTHER_SGD_ESTIMATORS:
                return f"parametrized with {bare}, which skl_ortgrad does not provide"
    name = getattr(item, "originalname", item.name).lower()
    if any(word in name for word in ONE_CLASS_WORDS):
        return "tests SGDOneClassSVM, which skl_ortgrad does not provide"
    function = getattr(item, "function", None)
    if function is not None:
        try:
            source = inspect.getsource(function)
        except (OSError, TypeError):
            source = ""
        for alias, reason in PRIVATE_MODULE_USES.items():
            if alias in source:
                return reason
    return None


def unsubstituted(module: ModuleType) -> list[str]:
    """Names in a test module bound to a real scikit-learn class we meant to replace.

    A test module that imported an estimator before the patch, or from a place the patch
    does not cover, would test scikit-learn instead of skl_ortgrad: these names say so.
    """
    leaks = []
    for name, obj in vars(module).items():
        if not isinstance(obj, type):
            continue
        for key, real in ORIGINALS.items():
            if issubclass(obj, real) and not issubclass(obj, SUBSTITUTES[key]):
                leaks.append(f"{module.__name__}.{name}")
    return leaks


class _Recorder:
    """Outcome and first error line of every test, written as JSON at the end."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.tests: dict[str, dict[str, Any]] = {}
        self.collect_errors: list[dict[str, str]] = []
        self.leaks: set[str] = set()
        self.started = time.time()

    def entry(self, item: pytest.Item) -> dict[str, Any]:
        # The node id's path part is relative to pytest's rootdir, which need not hold
        # scikit-learn's tests (it may then be empty): the test's path names it instead.
        test = item.nodeid.split("::", 1)[-1]
        return self.tests.setdefault(
            f"{item.path}::{test}",
            {
                "test": test,
                "file": item.path.name,
                "outcome": None,
                "message": "",
                "not_applicable": None,
                "duration": 0.0,
            },
        )

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            entry = self.entry(item)
            reason = not_applicable_reason(item)
            if reason is not None:
                entry["not_applicable"] = reason
                # Skipped, not run: such a test would exercise scikit-learn's own code.
                item.add_marker(pytest.mark.skip(reason=NOT_APPLICABLE + reason))
            module = getattr(item, "module", None)
            if module is not None:
                self.leaks.update(unsubstituted(module))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            crash = getattr(report.longrepr, "reprcrash", None)
            message = crash.message if crash is not None else str(report.longrepr)
            self.collect_errors.append({"nodeid": report.nodeid, "message": message})

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        entry = self.entry(item)
        entry["duration"] += report.duration
        outcome = None
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
            message = f"xfail: {report.wasxfail}"
        elif report.skipped:
            outcome = "skipped"
            message = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""
        elif report.failed:
            # A failure outside the test body (fixture setup, teardown) is an error.
            outcome = "failed" if call.when == "call" else "error"
            message = _first_line(call.excinfo) if call.excinfo is not None else ""
        elif call.when == "call":
            outcome, message = "passed", ""
        # Keep the first non-passing outcome: a teardown error after a failure adds nothing.
        if outcome is not None and entry["outcome"] in (None, "passed"):
            entry["outcome"], entry["message"] = outcome, message
        return report

    def pytest_sessionfinish(self) -> None:
        payload = {
            "seconds": time.time() - self.started,
            "substitutions": {
                f"{module.__name__}.{name}": f"{cls.__module__}.{cls.__qualname__}"
                for (module, name), cls in SUBSTITUTES.items()
            },
            "defaults": {
                family: {name: getattr(value, "__name__", value) for name, value in d.items()}
                for family, d in DEFAULTS.items() if d
            },
            "unsubstituted": sorted(self.leaks),
            "collect_errors": self.collect_errors,
            # A test deselected by -k never gets an outcome: it is not reported at all.
            "tests": [entry for entry in self.tests.values() if entry["outcome"] is not None],
        }
        with open(self.path, "w", encoding="utf-8") as f:
            json.dump(payload, f, indent=1)


def _first_line(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    """``Type: message``, the message cut to its first non-empty line.

    pytest.raises(match=...)'s first line only says that the message differs: the line
    with the message actually raised is kept after it.
    """
    lines = [line.strip() for line in str(excinfo.value).splitlines() if line.strip()]
    if not lines:
        return excinfo.typename
    first = lines[0]
    if first.startswith("Regex pattern did not match"):
        first += " " + " ".join(line for line in lines[1:] if line.startswith("Actual"))
    return f"{excinfo.typename}: {first}"


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register ``--drop-in-report``."""
    parser.addoption(
        "--drop-in-report",
        default=None,
        help="write every test's outcome and first error line as JSON to this path",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register scikit-learn's test markers; record outcomes if ``--drop-in-report``."""
    # scikit-learn registers this marker in its own pytest configuration, not shipped
    # with the wheel; without it every run warns about an unknown mark.
    config.addinivalue_line("markers", "no_check_spmatrix: scikit-learn's test marker")
    path = config.getoption("--drop-in-report")
    if path:
        config.pluginmanager.register(_Recorder(path), "sklearn_substitute_recorder")


def pytest_unconfigure(config: pytest.Config) -> None:
    """Put scikit-learn's classes back, for anything that runs after pytest in-process."""
    _restore()
