"""Templates (``skl_ortgrad.estimators.template``) and the graphs of the SGD models
(``sgd_graphs``) moved out of ``base`` and ``sgd``: estimators pickled under the old
names still load, convert their graphs and predict the same."""

import pickle

import numpy as np
import pytest

from skl_ortgrad import OnnxSGDClassifier, OnnxSGDRegressor
from skl_ortgrad.estimators import sgd_graphs
from skl_ortgrad.estimators.template import Template

RNG = np.random.default_rng(0)
X = RNG.standard_normal((200, 4))
TARGETS = {OnnxSGDRegressor: X @ [1.0, -2.0, 0.5, 0.0],
           OnnxSGDClassifier: np.digitize(X[:, 0], [-0.5, 0.5])}


def _pickled_under_old_names(model, monkeypatch):
    """``model`` pickled as before the move: the template's class named in ``base`` and
    its graph function (not converted yet) in ``sgd``, with a leading underscore."""
    monkeypatch.setattr(Template, "__module__", "skl_ortgrad.estimators.base")
    for name in ("regressor_graph", "classifier_graph"):
        function = getattr(sgd_graphs, name)
        monkeypatch.setattr(function, "__module__", "skl_ortgrad.estimators.sgd")
        monkeypatch.setattr(function, "__qualname__", f"_{name}")
    data = pickle.dumps(model)
    monkeypatch.undo()
    return data


@pytest.mark.parametrize("cls", [OnnxSGDRegressor, OnnxSGDClassifier])
def test_an_estimator_pickled_under_the_old_names_loads(cls, monkeypatch):
    model = cls(max_iter=3, tol=None, random_state=0).fit(X, TARGETS[cls])
    assert callable(model._template_._model)  # the full graph is not converted yet
    data = _pickled_under_old_names(model, monkeypatch)
    function = "_regressor_graph" if cls is OnnxSGDRegressor else "_classifier_graph"
    assert b"skl_ortgrad.estimators.base" in data and function.encode() in data
    loaded = pickle.loads(data)
    assert type(loaded._template_) is Template
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert pickle.loads(pickle.dumps(model)).predict(X).tolist() == model.predict(X).tolist()
