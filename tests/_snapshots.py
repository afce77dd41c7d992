"""A fitted estimator's state in a form compared bit for bit (the state machine of the
tests and ``bench/fault_campaign.py``: a failing call must leave it unchanged)."""

from __future__ import annotations

from typing import Any

import numpy as np


def snapshot(value: Any) -> Any:
    """``value`` as nested tuples: arrays by dtype, shape and bytes, lists and dicts
    element by element, the optimizer by identity with its weights, rule state, ``t_``,
    losses and shuffling state, any other object by identity."""
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [snapshot(v) for v in value])
    if isinstance(value, dict):
        return ("dict", {k: snapshot(v) for k, v in value.items()})
    if isinstance(value, (int, float, str, bool, type(None), np.generic)):
        return ("value", repr(value))
    if hasattr(value, "weights_to_train_"):
        rng = value.__dict__.get("_rng")
        return ("optimizer", id(value), value.t_, snapshot(list(value.weights_)),
                snapshot(list(value.lr_state_)), list(value.train_losses_),
                None if rng is None else rng.get_state()[1].tobytes())
    return ("object", id(value))
