"""Arrays packed in one buffer, and the 1-D span the optimizers' updates run on."""

import numpy as np
import pytest

from skl_ortgrad.optim import LearningRateAdam, LearningRateSGD, LearningRateSGDNesterov
from skl_ortgrad.optim.rate import segments
from skl_ortgrad.runtime.buffers import contiguous_span, packed_copies, packed_zeros


def test_packed_arrays_share_one_span():
    arrays = packed_zeros([(3, 2), (2,), (), (2, 4)], np.float32)
    assert [a.shape for a in arrays] == [(3, 2), (2,), (), (2, 4)]
    assert all(a.flags.c_contiguous for a in arrays)
    span = contiguous_span(arrays)
    span[:] = np.arange(17)
    np.testing.assert_array_equal(arrays[3].ravel(), np.arange(9, 17))
    assert float(arrays[2]) == 8.0
    copies = packed_copies([np.ones((2, 2)), np.arange(3.0)])
    np.testing.assert_array_equal(contiguous_span(copies), [1, 1, 1, 1, 0, 1, 2])


@pytest.mark.parametrize("arrays", [
    [np.zeros(3), np.zeros(3)],  # two allocations
    packed_zeros([(3,), (2,), (4,)], np.float64)[::2],  # a gap
    packed_zeros([(3,), (2,)], np.float64)[::-1],  # out of order
    [np.zeros((3, 2)).T],  # not C order
    [],
])
def test_no_span_unless_consecutive_in_one_buffer(arrays):
    assert contiguous_span(arrays) is None


@pytest.mark.parametrize("rate", [LearningRateSGD(eta0=0.1), LearningRateAdam(),
                                  LearningRateSGDNesterov(momentum=0.5)])
def test_updates_are_the_same_packed_or_not(rate):
    """The steppers run once over the span of packed buffers, once per weight otherwise:
    bit for bit the same weights and states."""
    rng = np.random.default_rng(0)
    shapes = [(4, 3), (3,), (3, 2), (2,)]
    start = [rng.standard_normal(shape) for shape in shapes]
    results = []
    for packed in (True, False):
        weights = packed_copies(start) if packed else [w.copy() for w in start]
        gradients = packed_zeros(shapes, np.float64)
        if not packed:
            gradients = [g.copy() for g in gradients]
        state = rate.init_state(weights)
        if not packed:
            state = [s.copy() for s in state]
        assert len(segments(weights, gradients)) == (1 if packed else len(shapes))
        step = rate.stepper(weights, gradients, state)
        draws = np.random.default_rng(1)
        for _ in range(3):
            for g in gradients:
                g[...] = draws.standard_normal(g.shape)
            step(0.05)
        results.append([w.copy() for w in weights] + [np.array(s) for s in state])
    for a, b in zip(*results, strict=True):
        np.testing.assert_array_equal(a, b)
