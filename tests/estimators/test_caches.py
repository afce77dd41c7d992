"""Memoized skl2onnx conversions, and what a grid search shares between its fits."""

import itertools

import numpy as np
import pytest
from onnx import numpy_helper
from onnxruntime import InferenceSession
from skl2onnx import to_onnx
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.model_selection import GridSearchCV
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.preprocessing import LabelBinarizer, StandardScaler

from skl_ortgrad import OnnxMLPClassifier, OnnxSGDClassifier, OnnxSGDRegressor
from skl_ortgrad.estimators.base import TEMPLATES
from skl_ortgrad.estimators.conversion import CONVERSIONS, convert_model
from skl_ortgrad.graph.cut import select_model_output
from skl_ortgrad.graph.model import TARGET_OPSET, initializers_to_inputs
from skl_ortgrad.runtime.sessions import SESSIONS

CLASSIFIER = {"black_op": {"LinearClassifier"}, "options": {"zipmap": False}}
DTYPES = [np.float32, np.float64]


def _fresh(model, n_features, dtype, options=None, black_op=None):
    return to_onnx(model, np.zeros((1, n_features), dtype=dtype), target_opset=TARGET_OPSET,
                   options=options, black_op=black_op)


def _sgd_template(n_classes, n_features, rng=None):
    """The model OnnxSGDClassifier converts: zeros and a sentinel, or random weights."""
    model = SGDClassifier(loss="log_loss")
    n_scores = 1 if n_classes == 2 else n_classes
    model.coef_ = np.zeros((n_scores, n_features))
    model.intercept_ = np.full(n_scores, 0.5772156649)
    if rng is not None:
        model.coef_ = rng.standard_normal(model.coef_.shape)
        model.intercept_ = rng.standard_normal(n_scores)
    model.classes_ = np.arange(n_classes, dtype=np.int64)
    model.n_features_in_ = n_features
    return model


def _mlp_template(cls, units, out_activation, dtype, rng, classes=None):
    """The model OnnxMLP* converts: Glorot-like random weights, as at every fit."""
    model = cls()
    model.coefs_ = [rng.uniform(-1, 1, shape).astype(dtype)
                    for shape in itertools.pairwise(units)]
    model.intercepts_ = [rng.uniform(-1, 1, size).astype(dtype) for size in units[1:]]
    model.n_layers_ = len(units)
    model.n_outputs_ = units[-1]
    model.out_activation_ = out_activation
    model.n_features_in_ = units[0]
    if classes is not None:
        model.classes_ = classes
        model._label_binarizer = LabelBinarizer().fit(classes)
    return model


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("random_weights", [False, True])
def test_sgd_copies_equal_fresh_conversions(dtype, n_classes, random_weights):
    rng = np.random.default_rng(0)
    for _ in range(3):  # a miss, then hits
        model = _sgd_template(n_classes, 30, rng if random_weights else None)
        copy = convert_model(model, 30, dtype, **CLASSIFIER)
        assert copy.SerializeToString() == _fresh(model, 30, dtype, **CLASSIFIER
                                                  ).SerializeToString()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["binary", "multiclass", "regressor"])
def test_mlp_copies_equal_fresh_conversions(dtype, case):
    rng = np.random.default_rng(1)
    for _ in range(3):  # new random weights every time, as at every fit
        if case == "regressor":
            model = _mlp_template(MLPRegressor, [4, 5, 2], "identity", dtype, rng)
            options = None
        else:
            classes = np.array([0, 1] if case == "binary" else [0, 1, 2])
            units = [30, 100, 1] if case == "binary" else [4, 5, 6, 3]
            model = _mlp_template(MLPClassifier, units, "logistic" if case == "binary"
                                  else "softmax", dtype, rng, classes)
            options = {"zipmap": False}
        copy = convert_model(model, model.n_features_in_, dtype, options=options)
        fresh = _fresh(model, model.n_features_in_, dtype, options=options)
        assert copy.SerializeToString() == fresh.SerializeToString()


def test_copies_are_independent_and_carry_the_current_weights():
    rng = np.random.default_rng(2)
    model = _sgd_template(2, 5, rng)
    first = convert_model(model, 5, np.float64, **CLASSIFIER)
    first.graph.initializer[0].name = "changed by the caller"
    model.coef_ = rng.standard_normal(model.coef_.shape)
    second = convert_model(model, 5, np.float64, **CLASSIFIER)
    assert all(init.name != "changed by the caller" for init in second.graph.initializer)
    coef = next(i for i in second.graph.initializer if i.name == "coef")
    np.testing.assert_array_equal(numpy_helper.to_array(coef), model.coef_.T)


def test_the_key_tells_models_apart():
    CONVERSIONS.clear()
    rng = np.random.default_rng(3)
    model = _sgd_template(2, 5, rng)
    convert_model(model, 5, np.float32, **CLASSIFIER)
    convert_model(_sgd_template(2, 5, rng), 5, np.float32, **CLASSIFIER)
    assert CONVERSIONS.info()[:2] == (1, 1)  # same structure: a hit
    for other in (_sgd_template(2, 6), _sgd_template(3, 5)):
        convert_model(other, other.n_features_in_, np.float32, **CLASSIFIER)
    convert_model(model, 5, np.float64, **CLASSIFIER)
    model.set_params(loss="modified_huber")
    convert_model(model, 5, np.float32, **CLASSIFIER)
    assert CONVERSIONS.info()[:2] == (1, 5)


def test_weights_skl2onnx_would_merge_give_its_own_graph():
    """skl2onnx stores two equal tensors once (both nodes read one initializer): here two
    layers of an MLP with the same coefficients. The copy would keep two; the function
    converts afresh instead."""
    rng = np.random.default_rng(6)
    model = _mlp_template(MLPRegressor, [5, 5, 5, 1], "identity", np.float32, rng)
    convert_model(model, 5, np.float32)
    model.coefs_[1] = model.coefs_[0].copy()
    merged = _fresh(model, 5, np.float32)
    assert "coefficient1" not in {init.name for init in merged.graph.initializer}
    copy = convert_model(model, 5, np.float32)
    assert copy.SerializeToString() == merged.SerializeToString()


def test_models_without_a_reliable_key_are_converted_every_time():
    X = np.random.default_rng(4).standard_normal((40, 3))
    model = LogisticRegression().fit(X, np.arange(40) % 3)
    model.unknown_object_ = object()  # no key: never cached
    size = len(CONVERSIONS)
    copy = convert_model(model, 3, np.float32, options={"zipmap": False},
                         black_op={"LinearClassifier"})
    fresh = _fresh(model, 3, np.float32, options={"zipmap": False},
                   black_op={"LinearClassifier"})
    assert copy.SerializeToString() == fresh.SerializeToString()
    assert len(CONVERSIONS) == size


def test_weights_in_node_attributes_are_not_cached():
    """Without black_op, skl2onnx writes the coefficients into LinearClassifier's
    attributes: the probe finds its markers there and the model is converted afresh."""
    rng = np.random.default_rng(5)
    CONVERSIONS.clear()
    for _ in range(2):
        model = _sgd_template(2, 4, rng)
        copy = convert_model(model, 4, np.float32, options={"zipmap": False})
        fresh = _fresh(model, 4, np.float32, options={"zipmap": False})
        assert copy.SerializeToString() == fresh.SerializeToString()
    assert CONVERSIONS.info()[:2] == (1, 1)  # the entry says "not cacheable"


@pytest.fixture(scope="module")
def breast_cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def _same_computation(hand_built, converted):
    """Two graphs of a linear score compute the same: the same operators, weights,
    inputs and outputs, and the same values for random features and weights."""
    graphs = (hand_built.graph, converted.graph)
    assert [[n.op_type for n in g.node] for g in graphs] == [["MatMul", "Add"]] * 2 or (
        [[n.op_type for n in g.node] for g in graphs] == [["MatMul", "Add", "Reshape"]] * 2)
    weights = [{i.name: numpy_helper.to_array(i) for i in g.initializer} for g in graphs]
    assert weights[0].keys() == weights[1].keys()
    for name, value in weights[0].items():
        assert value.dtype == weights[1][name].dtype
        np.testing.assert_array_equal(value, weights[1][name])
    for a, b in zip(*[(*g.input, *g.output) for g in graphs], strict=True):
        assert a.name == b.name
        assert a.type.tensor_type.elem_type == b.type.tensor_type.elem_type
        assert [d.dim_value for d in a.type.tensor_type.shape.dim] == [
            d.dim_value for d in b.type.tensor_type.shape.dim]
    rng = np.random.default_rng(0)
    dtype = weights[0]["coef"].dtype
    feeds = {"X": rng.standard_normal((7, weights[0]["coef"].shape[0])).astype(dtype)}
    feeds.update({name: rng.standard_normal(weights[0][name].shape).astype(dtype)
                  for name in ("coef", "intercept")})
    runs = []
    for model in (hand_built, converted):
        session = InferenceSession(initializers_to_inputs(model, ["coef", "intercept"])
                                   .SerializeToString(), providers=["CPUExecutionProvider"])
        runs.append(session.run(None, feeds)[0])
    np.testing.assert_array_equal(*runs)


def _serialized(template):
    return (template.model.SerializeToString(), template.score, template.weights,
            template.outputs, template.penalized)


@pytest.mark.parametrize(("estimator", "labels"), [
    (OnnxSGDClassifier(max_iter=1), None),
    (OnnxSGDClassifier(max_iter=1, loss="log_loss"), None),
    (OnnxSGDClassifier(max_iter=1, fit_intercept=False), None),
    (OnnxSGDClassifier(max_iter=1), np.array(["no", "yes"])),
    (OnnxSGDClassifier(max_iter=1), np.array([0, 1, 2])),
    (OnnxSGDClassifier(max_iter=1, loss="log_loss"), np.array([0, 1, 2])),
    (OnnxSGDRegressor(max_iter=1), None),
    (OnnxSGDRegressor(max_iter=1, dtype=np.float64), None),
], ids=["hinge", "log", "no intercept", "strings", "3 classes", "softmax", "regressor",
        "float64"])
def test_sgd_templates_are_cached_per_key_and_copied(breast_cancer, estimator, labels):
    """The SGD templates depend on their key alone: two fits build one, each gets a copy
    equal to a freshly built template, and trains its hand-built score graph, which
    computes what skl2onnx's graph cut at the score computes."""
    X, y = breast_cancer
    X = X[:120]
    y = y[:120] if labels is None else labels[np.arange(120) % len(labels)]
    TEMPLATES.clear()
    first, second = clone(estimator).fit(X, y), clone(estimator).fit(X, y)
    assert TEMPLATES.info()[:2] == (1, 1)
    assert first._template_.model is not second._template_.model
    assert first.optimizer_.model_onnx is not second.optimizer_.model_onnx
    fresh = first._template(X.shape[1], first._dtype())
    assert _serialized(first._template_) == _serialized(second._template_) == (
        _serialized(fresh))
    trained = first.optimizer_.model_onnx.SerializeToString()
    assert trained == fresh.score_model.SerializeToString()
    _same_computation(fresh.score_model, select_model_output(fresh.model, fresh.score))
    assert len(TEMPLATES) == 1


def test_a_fit_from_coef_init_cuts_its_own_graph(breast_cancer):
    X, y = breast_cancer
    coef = np.full((1, X.shape[1]), 0.25)
    model = OnnxSGDClassifier(max_iter=1).fit(X, y)
    started = OnnxSGDClassifier(max_iter=1).fit(X, y, coef_init=coef)
    initial = {i.name: numpy_helper.to_array(i)
               for i in started.optimizer_.model_onnx.graph.initializer}
    np.testing.assert_array_equal(initial["coef"].ravel(), coef.ravel().astype(np.float32))
    template = {i.name: numpy_helper.to_array(i) for i in model._template_.model.graph.initializer}
    assert not template["coef"].any()  # the cached template kept its zeros


@pytest.mark.parametrize("estimator", [
    OnnxSGDClassifier(random_state=0),
    OnnxMLPClassifier(hidden_layer_sizes=(8,), max_iter=3, random_state=0),
], ids=["sgd", "mlp"])
def test_a_grid_search_shares_sessions_and_conversions(breast_cancer, estimator):
    """After one fit and score, the 5 fits and 5 scores of a grid search (other alphas,
    other folds; other initial weights for the MLP) build no session and convert nothing."""
    X, y = breast_cancer
    SESSIONS.clear()
    CONVERSIONS.clear()
    TEMPLATES.clear()
    estimator.fit(X, y).score(X, y)
    sessions, conversions, templates = len(SESSIONS), CONVERSIONS.info(), TEMPLATES.info()
    # cv=2 splits 569 rows into 285 + 284: the last batch of a fold differs between the
    # folds, which the general (any number of rows) step session serves.
    search = GridSearchCV(estimator, {"alpha": [1e-4, 1e-3]}, cv=2).fit(X, y)
    assert len(SESSIONS) == sessions
    assert CONVERSIONS.info().misses == conversions.misses
    assert TEMPLATES.info().misses == templates.misses
    # The SGD template (zero weights) is cached whole; the MLP's (random weights) is
    # converted from the cached conversion.
    reused = (TEMPLATES.info().hits - templates.hits) + (
        CONVERSIONS.info().hits - conversions.hits)
    assert reused >= 5
    # The refitted best estimator runs the very session of the first fit.
    assert search.best_estimator_._session() is estimator._session()
