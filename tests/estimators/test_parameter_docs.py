"""The estimators' docstrings (their reference pages): every parameter of ``__init__``
has one entry of its own with the signature's default, and the ``Attributes`` section
lists exactly the fitted attributes that training sets."""

import inspect
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_diabetes, load_iris
from sklearn.linear_model import LinearRegression, LogisticRegression

from skl_ortgrad import (
    OnnxGradientClassifier,
    OnnxGradientRegressor,
    OnnxMLPClassifier,
    OnnxMLPRegressor,
    OnnxSGDClassifier,
    OnnxSGDRegressor,
)
from skl_ortgrad.estimators.parameter_docs import class_docstring, entry

X_C, Y_C = load_iris(return_X_y=True)
X_R, Y_R = load_diabetes(return_X_y=True)
X_R, Y_R = X_R[:120], Y_R[:120]

# (class, data, constructor arguments): small, fast fits.
ESTIMATORS = [
    (OnnxSGDRegressor, (X_R, Y_R), {}),
    (OnnxSGDClassifier, (X_C, Y_C), {}),
    (OnnxMLPRegressor, (X_R, Y_R), {"hidden_layer_sizes": (4,)}),
    (OnnxMLPClassifier, (X_C, Y_C), {"hidden_layer_sizes": (4,)}),
    (OnnxGradientRegressor, (X_R, Y_R), {"estimator": LinearRegression()}),
    (OnnxGradientClassifier, (X_C, Y_C), {"estimator": LogisticRegression(max_iter=500)}),
]
IDS = [cls.__name__ for cls, _, _ in ESTIMATORS]


def _section(doc: str, title: str) -> dict[str, tuple[str, str]]:
    """``{name: (type and default, description)}`` of a numpydoc section of ``doc``."""
    lines = [*inspect.cleandoc(doc).splitlines(), ""]
    entries: dict[str, tuple[str, str]] = {}
    name = None
    for i in range(lines.index(title) + 2, len(lines) - 1):
        line = lines[i]
        if lines[i + 1].startswith("---"):
            break  # the next section
        if line and not line.startswith(" "):
            match = re.fullmatch(r"(\w+) : (.+)", line)
            assert match, f"not one name per entry: {line!r}"
            name = match.group(1)
            assert name not in entries, f"{name} documented twice"
            entries[name] = (match.group(2), "")
        elif name is not None and line.strip():
            kind, text = entries[name]
            entries[name] = (kind, f"{text} {line.strip()}".strip())
    return entries


@pytest.mark.parametrize("cls", [cls for cls, _, _ in ESTIMATORS], ids=IDS)
def test_every_parameter_has_its_own_entry_and_default(cls):
    documented = _section(cls.__doc__, "Parameters")
    signature = inspect.signature(cls.__init__).parameters
    assert list(documented) == [name for name in signature if name != "self"]
    for name, (kind, _) in documented.items():
        default = signature[name].default
        if default is inspect.Parameter.empty:
            assert "default=" not in kind, name
        else:
            written = kind.rsplit("default=", 1)[1]
            value = eval(written, {"np": np})  # the defaults are literals or np types
            assert value == default, (name, written, default)
    descriptions = [text for _, text in documented.values()]
    shared = {text for text in descriptions if descriptions.count(text) > 1}
    assert not shared, f"one description for several parameters: {shared}"


def _fitted_attributes(cls, data, params, **extra):
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = cls(**params, max_iter=3, random_state=0, **extra).fit(X, y)
    return {name for name in vars(model) if name.endswith("_") and not name.startswith("_")}


@pytest.mark.parametrize(("cls", "data", "params"), ESTIMATORS, ids=IDS)
def test_the_attributes_documented_are_those_training_sets(cls, data, params):
    """Fits on arrays, with early stopping, and on a DataFrame (feature names): the
    union of the attributes they set is the ``Attributes`` section, no more, no less."""
    X, y = data
    frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])])
    fitted = (_fitted_attributes(cls, data, params)
              | _fitted_attributes(cls, data, params, early_stopping=True)
              | _fitted_attributes(cls, (frame, y), params))
    assert set(_section(cls.__doc__, "Attributes")) == fitted


def test_class_docstring_reads_the_defaults_and_refuses_a_missing_parameter():
    class Model:
        def __init__(self, alpha=0.5, *, dtype=np.float32, name="x"):
            pass

    parameters = {"alpha": entry("float", "A."), "dtype": entry("type", "D."),
                  "name": entry("str", "N.")}
    doc = class_docstring(Model, "Summary.", parameters, {"a_": entry("int", "Fitted.")})
    assert _section(doc, "Parameters") == {
        "alpha": ("float, default=0.5", "A."), "dtype": ("type, default=np.float32", "D."),
        "name": ("str, default='x'", "N.")}
    assert _section(doc, "Attributes") == {"a_": ("int", "Fitted.")}
    del parameters["name"]
    with pytest.raises(KeyError, match="name"):
        class_docstring(Model, "Summary.", parameters, {})
