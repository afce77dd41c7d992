"""The passive-aggressive step against its formula, in numpy."""

import numpy as np
import pytest
from sklearn.base import clone

from skl_ortgrad.optim import (
    EpsilonInsensitiveLearningLoss,
    HingeLearningLoss,
    PassiveAggressiveRate,
)


def _buffers(rng, d=5, k=3):
    weights = [rng.normal(size=(d, k)), rng.normal(size=k)]
    gradients = [rng.normal(size=(d, k)), rng.normal(size=k)]
    return weights, gradients


def _expected_sizes(variant, C, losses, squared):
    if variant == "pa1":
        return np.minimum(C, losses / squared)
    return losses / (squared + 0.5 / C)


@pytest.mark.parametrize("variant", ["pa1", "pa2"])
@pytest.mark.parametrize(("loss", "labels"), [
    (HingeLearningLoss(), np.array([[1.0, 0.0, 1.0]])),
    (EpsilonInsensitiveLearningLoss(epsilon=0.2), np.array([[0.7, -1.5, 3.0]])),
])
def test_step_is_the_formula(variant, loss, labels):
    """w - tau f g, tau per output from the row's losses at the weights the step starts
    from (the module docstring), the intercept's step times its factor."""
    rng = np.random.default_rng(0)
    weights, gradients = _buffers(rng)
    before = [w.copy() for w in weights]
    row = rng.normal(size=(1, 5))
    C, factors = 0.3, (1.0, 0.01)
    step = PassiveAggressiveRate(C=C, variant=variant, loss=loss, step_factors=factors).stepper(
        weights, gradients, [])
    assert step.take(row, labels)
    step(C)
    scores = row[0] @ before[0] + before[1]
    losses = loss.elementwise(labels[0], scores)[0]
    assert (losses > 0).any()
    sizes = _expected_sizes(variant, C, losses, float(row[0] @ row[0]))
    for w, w0, g, f in zip(weights, before, gradients, factors, strict=True):
        np.testing.assert_allclose(w, w0 - sizes * g * f, rtol=1e-14)


def test_a_fixed_intercept_moves_the_scores_and_stays():
    """Without a trained intercept, the scores add the fixed one: a margin it makes wide
    enough takes no step."""
    rng = np.random.default_rng(1)
    coef, gradient = np.zeros((4, 1)), rng.normal(size=(4, 1))
    row, label = rng.normal(size=(1, 4)), np.array([[1.0]])
    for intercept, moves in ((np.array([5.0]), False), (np.array([0.0]), True)):
        weights = [coef.copy()]
        step = PassiveAggressiveRate(C=1.0, intercept=intercept).stepper(weights, [gradient], [])
        step.take(row, label)
        step(1.0)
        assert (weights[0] != 0).any() == moves
        # Hinge at score 0, label 1: loss 1, step min(C, 1 / |x|^2).
        if moves:
            size = min(1.0, 1.0 / float(row[0] @ row[0]))
            np.testing.assert_allclose(weights[0], -size * gradient)


def test_a_row_of_no_norm_is_skipped_by_pa1_and_moves_the_intercept_with_pa2():
    weights, gradients = _buffers(np.random.default_rng(2), k=1)
    zero, label = np.zeros((1, 5)), np.array([[1.0]])
    assert not PassiveAggressiveRate(C=0.5).stepper(weights, gradients, []).take(zero, label)
    before = [w.copy() for w in weights]
    step = PassiveAggressiveRate(C=0.5, variant="pa2").stepper(weights, gradients, [])
    assert step.take(zero, label)
    step(0.5)
    # The score is the intercept; tau = loss / (0 + 1 / (2 C)) = 2 C loss.
    loss = max(0.0, 1.0 - float(before[1][0]))
    np.testing.assert_allclose(weights[1], before[1] - 2 * 0.5 * loss * gradients[1])


def test_schedule_is_constant_c_and_parameters_are_checked():
    rate = PassiveAggressiveRate(C=0.25, variant="pa2")
    np.testing.assert_array_equal(rate.schedule(np.array([1.0, 10.0, 1e6])), [0.25] * 3)
    assert rate.eta(7) == 0.25
    assert clone(rate).get_params() == rate.get_params()
    with pytest.raises(ValueError, match="C must be a finite number > 0"):
        PassiveAggressiveRate(C=0.0)
    with pytest.raises(ValueError, match=r"variant must be one of \['pa1', 'pa2'\]"):
        PassiveAggressiveRate(variant="pa3")
    with pytest.raises(NotImplementedError, match="trains on the CPU only"):
        rate.build_onnx_function(18, "cuda")
    weights, gradients = _buffers(np.random.default_rng(3))
    with pytest.raises(ValueError, match="reads one row a batch, got 2"):
        rate.stepper(weights, gradients, []).take(np.ones((2, 5)), np.ones((2, 3)))
    with pytest.raises(ValueError, match="step_factors holds 1 factors for 2 trained weights"):
        PassiveAggressiveRate(step_factors=(1.0,)).stepper(weights, gradients, [])
