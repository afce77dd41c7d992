"""The mini-batch optimizer: convergence, equivalence with scikit-learn, state, divergence."""

import warnings

import numpy as np
import onnx
import pytest
from onnxruntime import InferenceSession
from skl2onnx import to_onnx
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LinearRegression
from sklearn.neural_network import MLPRegressor

from skl_ortgrad import (
    ConvergenceError,
    ElasticLearningLoss,
    ElasticLearningPenalty,
    LearningRateSGDNesterov,
)
from skl_ortgrad.graph.cut import select_model_output
from skl_ortgrad.graph.model import TARGET_OPSET
from skl_ortgrad.training.caches import transient
from skl_ortgrad.training.optimizers_partial import (
    OrtGradientForwardBackwardOptimizer,
    constructor_repr,
)
from skl_ortgrad.training.sgd_learning_rate import LearningRateSGD


def _far_off(onx):
    """A copy of ``onx`` whose weights are far from any solution."""
    model = onnx.ModelProto()
    model.CopyFrom(onx)
    for init in model.graph.initializer:
        if init.name in ("coef", "intercept"):
            value = onnx.numpy_helper.to_array(init)
            init.CopyFrom(onnx.numpy_helper.from_array(value * 0 + 10, init.name))
    return model


def test_trains_to_linear_regression(linear_onnx, regression_data):
    X, y = regression_data
    reference = LinearRegression().fit(X, y)
    opt = OrtGradientForwardBackwardOptimizer(
        _far_off(linear_onnx), max_iter=300, batch_size=10, random_state=0,
        learning_rate=LearningRateSGD(eta0=0.05, learning_rate="constant"),
    )
    opt.fit(X, y)
    coef, intercept = opt.weights_
    np.testing.assert_allclose(coef.ravel(), reference.coef_, atol=1e-2)
    np.testing.assert_allclose(intercept, [reference.intercept_], atol=1e-2)
    assert opt.train_losses_[-1] < opt.train_losses_[0] / 100
    assert opt.t_ == 1 + 300 * 200 and opt.n_iter_ == 300


def _mlp(X, y):
    mlp = MLPRegressor(hidden_layer_sizes=(6,), activation="tanh", solver="sgd", momentum=0,
                       alpha=0, learning_rate_init=0.01, batch_size=X.shape[0],
                       shuffle=False, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp.partial_fit(X, y)
    return mlp


def test_mlp_step_for_step_like_scikit_learn(regression_data):
    X, y = regression_data
    X, y = X[:100], y[:100] / 5
    mlp = _mlp(X, y)
    onx = to_onnx(mlp, X[:1], target_opset=TARGET_OPSET)
    opt = OrtGradientForwardBackwardOptimizer(
        onx, batch_size=X.shape[0], shuffle=False, learning_loss="squared_error",
        learning_rate=LearningRateSGD(eta0=0.01, learning_rate="constant"),
    )
    for _ in range(50):
        mlp.partial_fit(X, y)
        opt.partial_fit(X, y)
    expected = [w for pair in zip(mlp.coefs_, mlp.intercepts_, strict=True) for w in pair]
    assert opt.weights_to_train_ == ["coefficient", "intercepts", "coefficient1", "intercepts1"]
    for got, want in zip(opt.weights_, expected, strict=True):
        np.testing.assert_allclose(got.reshape(want.shape), want, atol=1e-5)
    assert opt.t_ == 1 + 50 * 100


def test_sample_weights_weight_the_loss(linear_onnx, regression_data):
    X, y = regression_data
    opt = OrtGradientForwardBackwardOptimizer(linear_onnx, max_iter=1)
    opt.fit(X, y)
    coef, intercept = opt.weights_
    residual = X @ coef.ravel() + intercept - y
    weights = np.random.RandomState(0).rand(X.shape[0]).astype(np.float32)
    # Seed API: one loss per row, weighted.
    per_row = opt.losses(X, y, weights)
    assert per_row.shape == (X.shape[0],)
    np.testing.assert_allclose(per_row, weights * 0.5 * residual**2, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(opt.losses(X, y), 0.5 * residual**2, rtol=1e-4, atol=1e-6)
    expected = float(np.sum(weights * 0.5 * residual**2) / np.sum(weights))
    assert opt.score(X, y, weights) == pytest.approx(-expected, rel=1e-4)
    assert opt.score(X, y) == pytest.approx(-float(np.mean(0.5 * residual**2)), rel=1e-4)


def test_uniform_weights_change_nothing(linear_onnx, regression_data):
    """The batch loss is a weighted mean: a constant weight does not scale the step."""
    X, y = regression_data
    common = dict(max_iter=3, batch_size=16, shuffle=False,
                  learning_rate=LearningRateSGD(eta0=0.01, learning_rate="constant"))
    weighted = OrtGradientForwardBackwardOptimizer(linear_onnx, **common)
    weighted.fit(X, y, sample_weight=np.full(X.shape[0], 2.0))
    plain = OrtGradientForwardBackwardOptimizer(linear_onnx, **common).fit(X, y)
    for a, b in zip(weighted.weights_, plain.weights_, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_weights_scale_the_step_without_the_weighted_mean(linear_onnx, regression_data):
    """weighted_mean=False (scikit-learn's SGD): a constant weight w is w times the step."""
    X, y = regression_data
    common = dict(max_iter=1, batch_size=16, shuffle=False,
                  learning_rate=LearningRateSGD(eta0=0.01, learning_rate="constant"))
    doubled = OrtGradientForwardBackwardOptimizer(linear_onnx, weighted_mean=False, **common)
    doubled.fit(X, y, sample_weight=np.full(X.shape[0], 2.0))
    step = OrtGradientForwardBackwardOptimizer(
        linear_onnx, weighted_mean=False, **{**common, "learning_rate": LearningRateSGD(
            eta0=0.02, learning_rate="constant")}).fit(X, y)
    for a, b in zip(doubled.weights_, step.weights_, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("weighted_mean", [False, True])
def test_a_short_last_batch_steps_as_its_rows(linear_onnx, weighted_mean):
    """weighted_mean=False: every batch's gradient sum is divided by the batch size, the
    short last batch's too, so each row steps as much as in a full batch (scikit-learn's
    SGD steps every sample alike); True: divided by its rows (its mean, as scikit-learn's
    MLP). Checked against numpy, squared error, 2 batches of 16 rows and one of 5."""
    rng = np.random.RandomState(0)
    X = rng.randn(37, 4).astype(np.float64)
    y = rng.randn(37).astype(np.float64)
    onx = to_onnx(LinearRegression().fit(X, y), X[:1], target_opset=TARGET_OPSET)
    init = {i.name: onnx.numpy_helper.to_array(i) for i in onx.graph.initializer}
    coef, intercept = init["coef"].ravel().copy(), init["intercept"].ravel().copy()
    eta = 0.01
    for start in range(0, 37, 16):
        rows = slice(start, start + 16)
        residual = X[rows] @ coef + intercept - y[rows]
        divisor = 16 if not weighted_mean else residual.shape[0]
        coef -= eta * X[rows].T @ residual / divisor
        intercept -= eta * residual.sum() / divisor
    opt = OrtGradientForwardBackwardOptimizer(
        onx, weights_to_train=["coef", "intercept"], max_iter=1, batch_size=16,
        shuffle=False, weighted_mean=weighted_mean,
        learning_rate=LearningRateSGD(eta0=eta, learning_rate="constant")).fit(X, y)
    np.testing.assert_allclose(opt.weights_[0].ravel(), coef, rtol=1e-10)
    np.testing.assert_allclose(opt.weights_[1].ravel(), intercept, rtol=1e-10)


def test_integer_weights_equal_repeated_rows(linear_onnx, regression_data):
    X, y = regression_data
    counts = np.random.RandomState(0).randint(0, 3, X.shape[0])
    common = dict(max_iter=5, shuffle=False,
                  learning_rate=LearningRateSGD(eta0=0.05, learning_rate="constant"))
    weighted = OrtGradientForwardBackwardOptimizer(linear_onnx, batch_size=X.shape[0], **common)
    weighted.fit(X, y, sample_weight=counts)
    repeated = OrtGradientForwardBackwardOptimizer(linear_onnx, batch_size=counts.sum(), **common)
    repeated.fit(np.repeat(X, counts, axis=0), np.repeat(y, counts))
    for a, b in zip(weighted.weights_, repeated.weights_, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_trained_onnx_predicts_with_trained_weights(linear_onnx, regression_data):
    X, y = regression_data
    opt = OrtGradientForwardBackwardOptimizer(linear_onnx, max_iter=5, random_state=0)
    opt.fit(X, y)
    trained = opt.get_trained_onnx()
    got = InferenceSession(trained.SerializeToString()).run(None, {"X": X})[0]
    coef, intercept = opt.weights_
    np.testing.assert_allclose(got.ravel(), X @ coef.ravel() + intercept, rtol=1e-5, atol=1e-5)


def test_warm_start_and_partial_fit_continue(linear_onnx, regression_data):
    X, y = regression_data
    opt = OrtGradientForwardBackwardOptimizer(linear_onnx, max_iter=2, batch_size=50,
                                              random_state=0)
    opt.fit(X, y)
    assert opt.t_ == 1 + 2 * 200
    opt.partial_fit(X, y)
    assert opt.t_ == 1 + 3 * 200 and len(opt.train_losses_) == 3
    opt.set_params(warm_start=True)
    opt.fit(X, y)
    assert opt.t_ == 1 + 5 * 200
    opt.set_params(warm_start=False)
    opt.fit(X, y)
    assert opt.t_ == 1 + 2 * 200 and len(opt.train_losses_) == 2


def test_warm_start_before_any_fit_starts_from_the_model(linear_onnx, regression_data):
    # warm_start only matters once something was trained: a first fit starts from the
    # model's initializers, as a cold fit does (onnxcustom's test_gradient_mlp relies on it).
    X, y = regression_data
    warm = OrtGradientForwardBackwardOptimizer(linear_onnx, max_iter=2, batch_size=50,
                                               random_state=0, warm_start=True).fit(X, y)
    cold = OrtGradientForwardBackwardOptimizer(linear_onnx, max_iter=2, batch_size=50,
                                               random_state=0).fit(X, y)
    assert warm.t_ == cold.t_ == 1 + 2 * 200 and len(warm.train_losses_) == 2
    for got, expected in zip(warm.weights_, cold.weights_, strict=True):
        np.testing.assert_array_equal(got, expected)


def test_checkpoint_round_trip(linear_onnx, regression_data):
    X, y = regression_data
    opt = OrtGradientForwardBackwardOptimizer(linear_onnx, max_iter=1, random_state=0)
    opt.fit(X, y)
    checkpoint = opt.get_checkpoint()
    before = [w.copy() for w in opt.weights_]
    opt.partial_fit(X, y)
    assert not np.allclose(before[0], opt.weights_[0])
    buffers = [id(w) for w in opt.weights_]
    opt.set_checkpoint(checkpoint)
    assert [id(w) for w in opt.weights_] == buffers  # restored in place
    for a, b in zip(opt.weights_, before, strict=True):
        np.testing.assert_array_equal(a, b)
    assert opt.t_ == checkpoint["t"]


def test_get_state_is_the_list_of_trained_weights(linear_onnx, regression_data, backend):
    """Seed 004: ``state_tensors = train_session.get_state()``, the coefficients in the
    order of weights_to_train; set_state takes the same list."""
    X, y = regression_data
    opt = OrtGradientForwardBackwardOptimizer(
        linear_onnx, ["intercept", "coef"], max_iter=2, backend=backend).fit(X, y)
    state = opt.get_state()
    assert isinstance(state, list) and [s.shape for s in state] == [(1,), (4, 1)]
    np.testing.assert_array_equal(state[0], opt.weights_[0])
    state[0][:] = 7  # a copy: the optimizer is untouched
    assert not np.any(opt.weights_[0] == 7)
    opt.set_state([np.array([0.5]), np.ones((4, 1))])
    np.testing.assert_array_equal(opt.weights_[1], np.ones((4, 1), dtype=np.float32))
    assert opt.weights_[1].dtype == np.float32
    with pytest.raises(ValueError, match=r"set_state expects 2 tensors"):
        opt.set_state([np.ones((4, 1))])
    with pytest.raises(ValueError, match=r"Weight 'coef' has shape \(4, 1\), got \(4,\)"):
        opt.set_state([np.array([0.5]), np.ones(4)])


def test_tol_stops_and_validation_is_recorded(linear_onnx, regression_data):
    X, y = regression_data
    opt = OrtGradientForwardBackwardOptimizer(
        linear_onnx, max_iter=500, tol=1e-3, n_iter_no_change=3, random_state=0,
        validation_every=1, learning_rate=LearningRateSGD(eta0=0.05, learning_rate="constant"),
    )
    opt.fit(X[:150], y[:150], X_val=X[150:], y_val=y[150:])
    assert 3 < opt.n_iter_ < 500
    assert len(opt.validation_losses_) == opt.n_iter_
    assert opt.validation_losses_[-1] < 1e-2


def test_a_non_finite_validation_score_is_a_divergence(linear_onnx, regression_data):
    """Finite losses but predictions beyond the dtype's range: the epoch is undone."""
    X, y = regression_data
    opt = OrtGradientForwardBackwardOptimizer(
        linear_onnx, max_iter=3, random_state=0,
        learning_rate=LearningRateSGD(eta0=0.01, learning_rate="constant"),
    )
    scores = iter([0.5, np.nan])
    with pytest.raises(ConvergenceError, match=r"diverged at epoch 2.*validation score is nan"):
        opt.fit(X, y, X_val=X, y_val=y, val_scorer=lambda: next(scores))
    assert opt.n_iter_ == 1 and len(opt.train_losses_) == 1
    assert opt.validation_scores_ == [0.5]


def test_divergence_raises_and_keeps_last_finite_epoch(linear_onnx, regression_data):
    X, y = regression_data
    opt = OrtGradientForwardBackwardOptimizer(
        linear_onnx, max_iter=1, batch_size=50, random_state=0,
        learning_rate=LearningRateSGD(eta0=0.01, learning_rate="constant"),
    )
    opt.fit(X, y)
    kept = [w.copy() for w in opt.weights_]
    opt.set_params(learning_rate=LearningRateSGD(eta0=1e6, learning_rate="constant"),
                   warm_start=True, max_iter=50)
    with pytest.raises(ConvergenceError, match=r"diverged at epoch \d+, batch \d+.*smaller"):
        opt.fit(X, y)
    for a, b in zip(opt.weights_, kept, strict=True):
        np.testing.assert_array_equal(a, b)
    opt.set_params(exc=False)
    with pytest.warns(ConvergenceWarning, match="diverged"):
        opt.fit(X, y)
    assert all(np.isfinite(w).all() for w in opt.weights_)


def test_penalty_skips_intercepts(linear_onnx, regression_data):
    X, y = regression_data
    opt = OrtGradientForwardBackwardOptimizer(linear_onnx, max_iter=1, learning_penalty="l2")
    opt.fit(X, y)
    penalized = opt.penalized()
    assert len(penalized) == 1 and penalized[0] is opt.weights_[0]
    opt.set_params(penalized_weights=["intercept"])
    assert opt.penalized()[0] is opt.weights_[1]


def test_bad_parameters(linear_onnx, regression_data):
    X, y = regression_data
    with pytest.raises(ValueError, match="batch_size >= 1"):
        OrtGradientForwardBackwardOptimizer(linear_onnx, batch_size=0).fit(X, y)
    with pytest.raises(ValueError, match="Unknown weights"):
        OrtGradientForwardBackwardOptimizer(linear_onnx, weights_to_train=["w"]).fit(X, y)
    with pytest.raises(ValueError, match="X has 200 rows but y has 10"):
        OrtGradientForwardBackwardOptimizer(linear_onnx).fit(X, y[:10])


#: A constant step of 0.05 (a bare number is onnxcustom's invscaling schedule).
CONSTANT_005 = LearningRateSGD(eta0=0.05, learning_rate="constant")


def _sgd_step(opt, X, y, eta):
    """One full-batch SGD step of the squared loss in float64, from opt's weights."""
    coef, intercept = (w.astype(np.float64) for w in opt.weights_)
    residual = X @ coef + intercept - y.reshape((-1, 1))
    return coef - eta * X.T @ residual / len(X), intercept - eta * residual.mean(axis=0)


def test_stream_of_chunk_sizes_builds_two_sessions_at_most(linear_onnx, regression_data):
    """Chunks smaller than batch_size, of many sizes: every size but batch_size runs the
    general step (no session per size), and each such call is one exact SGD step."""
    X, y = regression_data
    opt = OrtGradientForwardBackwardOptimizer(
        linear_onnx, batch_size=50, shuffle=False, learning_rate=CONSTANT_005, random_state=0)
    opt.partial_fit(X[:50], y[:50])
    start = 50
    for rows in (7, 13, 20, 31, 9):
        chunk_X, chunk_y = X[start:start + rows], y[start:start + rows]
        start += rows
        expected = _sgd_step(opt, chunk_X, chunk_y, 0.05)
        opt.partial_fit(chunk_X, chunk_y)
        for got, want in zip(opt.weights_, expected, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    opt.partial_fit(X[:120], y[:120])  # two full batches and a partial one
    engine = transient(opt).engines.built()[0]
    assert set(engine._steps) == {50, None}


def test_partial_fit_stream_reuses_its_loader(linear_onnx, regression_data):
    """Same layout: the same loader (buffers, feed vectors) serves the next call, on
    the new rows; a non-warm fit replaces the weights and drops it."""
    X, y = regression_data
    opt = OrtGradientForwardBackwardOptimizer(
        linear_onnx, max_iter=1, batch_size=100, shuffle=False, learning_rate=CONSTANT_005)
    opt.partial_fit(X[:100], y[:100])
    loader = transient(opt).loader[1]
    opt.partial_fit(X[:100], y[:100])
    assert transient(opt).loader[1] is loader
    other_X, other_y = X[100:].copy(), y[100:].copy()  # same shapes, other memory
    expected = _sgd_step(opt, other_X, other_y, 0.05)
    opt.partial_fit(other_X, other_y)
    for got, want in zip(opt.weights_, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    shuffled = OrtGradientForwardBackwardOptimizer(
        linear_onnx, max_iter=1, batch_size=100, learning_rate=CONSTANT_005, random_state=0)
    shuffled.partial_fit(X[:100], y[:100])
    loader = transient(shuffled).loader[1]
    shuffled.partial_fit(other_X, other_y)  # copied into the same buffers
    assert transient(shuffled).loader[1] is loader
    shuffled.fit(X[:100], y[:100])
    assert transient(shuffled).loader[1] is not loader


def test_training_objects_are_objects_from_construction(linear_onnx):
    """Seed 004: the optimizer holds three objects; a bad alias fails where it is written."""
    opt = OrtGradientForwardBackwardOptimizer(
        linear_onnx, learning_rate="Nesterov", learning_loss="elastic", learning_penalty=0.1)
    assert isinstance(opt.learning_rate, LearningRateSGDNesterov)
    assert isinstance(opt.learning_loss, ElasticLearningLoss)
    assert isinstance(opt.learning_penalty, ElasticLearningPenalty)
    assert opt.learning_penalty.l2 == 0.1
    # clone keeps working: the objects are cloned and kept as given
    copy = clone(opt)
    assert type(copy.learning_rate) is LearningRateSGDNesterov
    assert copy.learning_rate is not opt.learning_rate
    with pytest.raises(ValueError, match="Unknown learning rate 'EXC'"):
        OrtGradientForwardBackwardOptimizer(linear_onnx, learning_rate="EXC")
    with pytest.raises(ValueError, match="eta0 must be a finite number"):
        OrtGradientForwardBackwardOptimizer(linear_onnx, learning_rate=LearningRateSGD("EXC"))


def test_untyped_output_takes_its_type_from_shape_inference(linear_onnx, regression_data):
    """A model cut at an intermediate result may declare its output without a type."""
    X, y = regression_data
    cut = select_model_output(linear_onnx, "multiplied")
    del cut.graph.output[:]
    cut.graph.output.append(onnx.ValueInfoProto(name="multiplied"))
    opt = OrtGradientForwardBackwardOptimizer(cut, ["coef"], max_iter=1).fit(X, y)
    assert opt.weights_[0].dtype == np.float32 and len(opt.train_losses_) == 1
    broken = onnx.ModelProto()
    broken.CopyFrom(cut)
    broken.graph.node[0].op_type = "NotAnOperator"
    with pytest.raises(ValueError, match="no element type and ONNX shape inference cannot"):
        OrtGradientForwardBackwardOptimizer(broken, ["coef"], max_iter=1).fit(X, y)


def test_repr_shows_skl_ortgrad_s_own_keyword_arguments_only_when_set():
    """``step_factors`` (keyword-only, not the seed's) stays out of the seed's repr at its
    default, and shows where it is set."""
    assert constructor_repr(LearningRateSGD(eta0=0.5)) == (
        "LearningRateSGD(eta0=0.5, alpha=0.0001, power_t=0.25, learning_rate='invscaling')")
    assert constructor_repr(LearningRateSGD(step_factors=(1.0, 0.01))).endswith(
        "learning_rate='invscaling', step_factors=(1.0, 0.01))")


def test_repr_is_the_seeds(linear_onnx):
    """Seed 004 (onnxcustom's tests): the constructor's arguments in its order, defaults
    included, nested learning objects the same way, the model cut."""
    opt = OrtGradientForwardBackwardOptimizer(linear_onnx, ["coef", "intercept"],
                                              learning_rate=LearningRateSGD(eta0=0.5))
    text = repr(opt)
    assert text.startswith("OrtGradientForwardBackwardOptimizer(model_onnx='ModelProto...', "
                           "weights_to_train=['coef', 'intercept'], max_iter=100, ")
    rate = ("learning_rate=LearningRateSGD(eta0=0.5, alpha=0.0001, power_t=0.25, "
            "learning_rate='invscaling')")
    assert rate in text
    assert "learning_loss=SquareLearningLoss()" in text
    assert text.index("max_iter=") < text.index("learning_rate=") < text.index("device=")
    assert "\n" not in text
    # The learning objects keep scikit-learn's repr of their own.
    assert repr(opt.learning_rate) == "LearningRateSGD(eta0=0.5)"


def test_save_onnx_graph_files_and_bytes(linear_onnx, regression_data, tmp_path, backend):
    X, y = regression_data
    opt = OrtGradientForwardBackwardOptimizer(
        linear_onnx, ["coef", "intercept"], max_iter=2, weight_name="weight",
        learning_penalty=ElasticLearningPenalty(l1=0.0, l2=1e-4), backend=backend)
    saved = opt.save_onnx_graph(str(tmp_path / "before"), prefix="p_")
    assert sorted(saved) == ["learning_loss", "learning_penalty", "learning_rate",
                             "model_onnx"]
    assert saved["learning_rate"]["update"].endswith(
        "p_OrtGradientForwardBackwardOptimizer.learning_rate.update.onnx")
    assert onnx.load(saved["model_onnx"]) == linear_onnx
    loss = onnx.load(saved["learning_loss"]["loss"])
    assert "weight" in [i.name for i in loss.graph.input]  # weight_name: weighted loss
    opt.fit(X, y, np.ones(len(y), dtype=np.float32))
    as_bytes = opt.save_onnx_graph(bytes)
    assert sorted(as_bytes) == ["learning_loss", "learning_penalty", "learning_rate",
                                "model_onnx", "train_function_", "trained_onnx"]
    assert sorted(as_bytes["train_function_"]) == ["forward", "gradient"]
    session = InferenceSession(as_bytes["trained_onnx"], providers=["CPUExecutionProvider"])
    coef, intercept = opt.get_state()
    np.testing.assert_allclose(session.run(None, {"X": X})[0], X @ coef + intercept,
                               rtol=1e-5, atol=1e-5)
    penalty = onnx.load_from_string(as_bytes["learning_penalty"]["update"])
    assert [o.name for o in penalty.graph.output] == ["new_w0", "new_w1"]
    with pytest.raises(TypeError, match="folder must be a str or bytes"):
        opt.save_onnx_graph(str)


def test_get_state_answers_numpy_and_set_state_takes_ort_values(linear_onnx, regression_data):
    """onnxcustom's get_state returns OrtValues (``state[k].numpy()``), its set_state
    takes them: both kinds of code run."""
    from onnxruntime.capi._pybind_state import OrtValue

    from skl_ortgrad.runtime.devices import ort_device

    X, y = regression_data
    opt = OrtGradientForwardBackwardOptimizer(linear_onnx, ["coef", "intercept"],
                                              max_iter=2).fit(X, y)
    state = opt.get_state()
    assert all(isinstance(s, np.ndarray) for s in state)
    plain = state[0].numpy()
    assert type(plain) is np.ndarray
    np.testing.assert_array_equal(plain, opt.weights_[0])
    device = ort_device("cpu")
    opt.set_state([OrtValue.ortvalue_from_numpy(np.full((4, 1), 2.0, dtype=np.float32), device),
                   np.array([1.0], dtype=np.float32)])
    np.testing.assert_array_equal(opt.weights_[0], np.full((4, 1), 2.0))
    session = InferenceSession(opt.get_trained_onnx().SerializeToString(),
                               providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"X": X[:3]})[0].ravel(),
                               2 * X[:3].sum(axis=1) + 1, rtol=1e-5)


def test_epoch_lines_name_the_seed_optimizer(linear_onnx, regression_data, caplog, capsys):
    """onnxcustom's test_ort_gradient_optimizers_log: the optimizer's lines start with
    '[OrtGradientForwardBackwardOptimizer._iteration]'; the estimators' do not."""
    import logging

    from skl_ortgrad import OnnxSGDRegressor

    X, y = regression_data
    with caplog.at_level(logging.DEBUG, logger="skl_ortgrad"):
        OrtGradientForwardBackwardOptimizer(linear_onnx, max_iter=2, verbose=1).fit(X, y)
    lines = [r.getMessage() for r in caplog.records if "epoch" in r.getMessage()]
    assert lines[0].startswith("[OrtGradientForwardBackwardOptimizer._iteration] epoch 1: ")
    assert "[OrtGradientForwardBackwardOptimizer._iteration] epoch 2: " in capsys.readouterr().err
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="skl_ortgrad"):
        OnnxSGDRegressor(max_iter=2, tol=None).fit(X, y)
    epochs = [r.getMessage() for r in caplog.records if "epoch 1:" in r.getMessage()]
    assert epochs and epochs[0].startswith("epoch 1: ")
