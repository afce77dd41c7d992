"""Random sequences of calls on an estimator (a hypothesis state machine): fit,
partial_fit, set_params, predict, save, load, pickling and Ctrl-C, with valid and invalid
inputs. Invariants: a call that fails changes nothing (the fitted state compared bit for
bit: every attribute, the optimizer's weights, ``t_`` and losses, the predictions), and a
call that succeeds leaves a consistent model (its attributes are what predicts).

Derandomized and bounded: the same sequences at every run, a few seconds in all.
"""

from __future__ import annotations

import os
import pickle
import tempfile
import warnings

import numpy as np
import pytest
from _interrupts import at_count, ctrl_c_when
from _snapshots import snapshot
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from sklearn.exceptions import NotFittedError

from skl_ortgrad import LearningRateSGD, OnnxMLPClassifier, OnnxSGDRegressor, load, save

RNG = np.random.RandomState(0)
X = RNG.randn(30, 3)
Y = X @ np.array([1.0, -2.0, 0.5]) + 0.3
LABELS = (Y > 0.3).astype(int)
X_ALL = X

pytestmark = [pytest.mark.usefixtures("default_sigint"),
              pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
              pytest.mark.filterwarnings("ignore::RuntimeWarning")]


def _bad_X(kind: str, width: int) -> np.ndarray:
    """``X`` of the model's ``width`` with a NaN, or no rows; or of another width."""
    if kind == "width":
        return X[:, :2] if width == 3 else X
    data = X[:, :width]
    if kind == "nan":
        data = data.copy()
        data[4, 1] = np.nan
        return data
    return data[:0]


class CallSequence(RuleBasedStateMachine):
    """The calls on one estimator; ``make`` and ``target`` come from a subclass."""

    make = staticmethod(lambda: None)
    target = Y

    @initialize(fitted=st.booleans())
    def start(self, fitted):
        self.model = self.make()
        if fitted:
            self.model.fit(X, self.target)
        self.folder = tempfile.mkdtemp()
        self.width = X.shape[1]  # of the data the model was fitted on
        self.valid = True  # whether the parameters are
        self.saves = 0

    # -- what the invariants compare -----------------------------------------------------

    def _fitted(self) -> bool:
        return "optimizer_" in vars(self.model)

    def _outputs(self, model=None):
        model = self.model if model is None else model
        if "optimizer_" not in vars(model):
            return None
        data = X[:, :self.width]
        if isinstance(model, OnnxMLPClassifier):
            return model.predict_proba(data).tobytes()
        return model.predict(data).tobytes()

    def _state(self):
        return snapshot(dict(vars(self.model))), self._outputs()

    def _consistent(self):
        model, optimizer, X = self.model, self.model.optimizer_, X_ALL[:, :self.width]
        weights = list(optimizer.served_weights())
        if isinstance(model, OnnxMLPClassifier):
            assert model.t_ == optimizer.t_ - 1
            hidden = np.maximum(X @ model.coefs_[0] + model.intercepts_[0], 0)
            score = (hidden @ model.coefs_[1] + model.intercepts_[1]).ravel()
            np.testing.assert_allclose(model.predict_proba(X)[:, 1], 1 / (1 + np.exp(-score)),
                                       rtol=1e-5, atol=1e-6)
            np.testing.assert_array_equal(model.coefs_[0], weights[0])
        else:
            assert model.t_ == optimizer.t_
            # To float32's rounding of the sum, whose terms may cancel (weights of 1e38).
            scale = np.abs(X) @ np.abs(model.coef_) + np.abs(model.intercept_)
            assert np.all(np.abs(model.predict(X) - (X @ model.coef_ + model.intercept_))
                          <= 1e-5 * (scale + 1))
            np.testing.assert_array_equal(model.coef_, weights[0].ravel())
        assert len(model.loss_curve_) == len(optimizer.train_losses_)

    def _call(self, call, fails: bool, width: int | None = None):
        """Run ``call``; a failure must change nothing, a success leave a consistent model
        (``fails``: the input is invalid, so the call must fail; ``width``: the columns
        of the data it fits the model on)."""
        before = self._state()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                call()
        except (ValueError, NotFittedError) as error:
            assert self._state() == before, f"a failed call changed the estimator: {error!r}"
            return
        assert not fails, "an invalid call succeeded"
        self.width = width or self.width
        if self._fitted():
            self._consistent()

    # -- the calls ------------------------------------------------------------------------

    @rule(bad=st.sampled_from([None, "nan", "width", "rows"]))
    def fit(self, bad):
        data = X if bad is None else _bad_X(bad, self.width)
        self._call(lambda: self.model.fit(data, self.target[:len(data)]),
                   fails=bad not in (None, "width"), width=data.shape[1])

    @rule(bad=st.sampled_from([None, "nan", "width", "labels"]))
    def partial_fit(self, bad):
        if bad == "labels":
            data, target = X[:, :self.width], self.target[:-1]
        else:
            data = X[:, :self.width] if bad is None else _bad_X(bad, self.width)
            target = self.target[:len(data)]
        extra = {"classes": [0, 1]} if isinstance(self.model, OnnxMLPClassifier) else {}
        width_ok = bad == "width" and not self._fitted()
        self._call(lambda: self.model.partial_fit(data, target, **extra),
                   fails=bad is not None and not width_ok, width=data.shape[1])

    @rule(valid=st.booleans(), huge=st.booleans())
    def set_params(self, valid, huge):
        """A rate that makes the next calls diverge, a normal one, or an invalid value
        (refused at the next training call)."""
        if isinstance(self.model, OnnxMLPClassifier):
            value = {"learning_rate_init": 1e10 if huge else 1e-3} if valid else {
                "alpha": -1.0}
        else:
            # A rate object is used as given (the estimator's own rates are capped).
            value = {"learning_rate": LearningRateSGD(
                eta0=1e38 if huge else 0.01, learning_rate="constant")} if valid \
                else {"penalty": "l3"}
        self.model.set_params(**value)
        if valid:
            # Back to valid values of the other parameter too.
            self.model.set_params(**({"alpha": 1e-4} if isinstance(
                self.model, OnnxMLPClassifier) else {"penalty": "l2"}))
        self.valid = valid

    @rule(partial=st.booleans())
    def diverging_call(self, partial):
        """A rate that makes the call diverge (after finite epochs or not): it must
        change nothing but the parameter set before it."""
        self.set_params(valid=True, huge=True)
        extra = {"classes": [0, 1]} if isinstance(self.model, OnnxMLPClassifier) else {}
        data = X[:, :self.width]
        if partial:
            self._call(lambda: self.model.partial_fit(data, self.target, **extra),
                       fails=False, width=self.width)
        else:
            self._call(lambda: self.model.fit(data, self.target), fails=False,
                       width=self.width)
        self.set_params(valid=True, huge=False)

    @rule(bad=st.booleans())
    def predict(self, bad):
        data = _bad_X("nan", self.width) if bad else X[:, :self.width]
        self._call(lambda: self.model.predict(data), fails=bad or not self._fitted())

    @rule(damage=st.integers(0, 10_000))
    def save_and_load(self, damage):
        self.saves += 1
        path = os.path.join(self.folder, f"m{self.saves}.onnx")
        if not (self._fitted() and self.valid):
            # Unfitted, or a parameter load would refuse: nothing written.
            with pytest.raises((NotFittedError, ValueError)):
                save(self.model, path)
            assert not os.path.exists(path)
            return
        save(self.model, path)
        data = bytearray(open(path, "rb").read())
        # A damaged copy is refused before anything is built.
        data[damage % len(data)] ^= 0x5A
        broken = os.path.join(self.folder, "broken.onnx")
        with open(broken, "wb") as file:
            file.write(bytes(data))
        with pytest.raises(ValueError, match=r"broken\.onnx"):
            load(broken)
        loaded = load(path)
        assert self._outputs(loaded) == self._outputs()
        self.model = loaded
        self._consistent()

    @rule()
    def pickle_round_trip(self):
        copied = pickle.loads(pickle.dumps(self.model))
        assert self._outputs(copied) == self._outputs()
        self.model = copied

    @rule(line=st.integers(1, 4000), partial=st.booleans())
    def ctrl_c(self, line, partial):
        """Ctrl-C at the line-th line of the package a training call runs: the call ends
        in KeyboardInterrupt (or completes), the estimator as before or consistent."""
        extra = {"classes": [0, 1]} if isinstance(self.model, OnnxMLPClassifier) else {}
        data = X[:, :self.width]
        call = (lambda: self.model.partial_fit(data, self.target, **extra)) if partial else (
            lambda: self.model.fit(data, self.target))
        before = self._state()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            raised, _ = ctrl_c_when(call, at_count(line))
        if isinstance(raised, ValueError):  # a diverging rate, an invalid parameter set before
            assert self._state() == before
            return
        if raised is not None and not isinstance(raised, KeyboardInterrupt):
            raise raised
        if self._state() != before and self._fitted():
            self._consistent()

    @invariant()
    def predictions_are_finite_or_refused(self):
        if getattr(self, "model", None) is not None and self._fitted():
            data = X[:, :self.width]
            outputs = (self.model.predict_proba(data)
                       if isinstance(self.model, OnnxMLPClassifier) else self.model.predict(data))
            assert np.isfinite(outputs).all()


class SGDRegressorCalls(CallSequence):
    make = staticmethod(lambda: OnnxSGDRegressor(max_iter=3, tol=None, batch_size=8,
                                                 random_state=0))
    target = Y


class MLPClassifierCalls(CallSequence):
    make = staticmethod(lambda: OnnxMLPClassifier(hidden_layer_sizes=(3,), max_iter=3,
                                                  batch_size=8, tol=None, random_state=0))
    target = LABELS


SETTINGS = settings(max_examples=40, stateful_step_count=20, derandomize=True,
                    deadline=None, suppress_health_check=list(HealthCheck))

TestSGDRegressorCalls = SETTINGS(SGDRegressorCalls).TestCase
TestMLPClassifierCalls = SETTINGS(MLPClassifierCalls).TestCase
