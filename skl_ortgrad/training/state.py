r"""What training changes, in one record, and its codec: copies (checkpoints), restores,
and the flat pickled form every release reads.

:class:`TrainingState` holds the trained weights (numpy buffers onnxruntime borrows,
updated in place), the update rule's state (velocities, moments, counters), :math:`t`
(samples seen plus one, scikit-learn's ``t_``) and the running average of averaged SGD.
The epoch runners (:mod:`skl_ortgrad.training.epochs`) update it; the trainer
(:class:`~skl_ortgrad.training.trainer.Trainer`) shows it as ``weights_``, ``lr_state_``,
``t_``, ``average_weights_`` and ``average_count_`` and pickles it in that flat form
(:data:`STATE_KEYS`), the form of release 0.1.0's pickles and saved files.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from skl_ortgrad import _version
from skl_ortgrad.exceptions import PickleVersionWarning
from skl_ortgrad.graph.model import copied_model
from skl_ortgrad.graph.weights import get_train_initializer
from skl_ortgrad.runtime.buffers import packed_copies

#: Format of a pickled trainer; raise it when a change makes old pickles unreadable (and
#: teach :func:`unpickled` to convert the formats that can be).
STATE_FORMAT = 1

#: The pickled names of the state's fields, in the trainer's ``__dict__`` as release
#: 0.1.0 wrote them.
STATE_KEYS = {
    "names": "weights_to_train_", "weights": "weights_", "rate_state": "lr_state_",
    "t": "t_", "average": "average_weights_", "average_count": "average_count_",
}


@dataclass
class TrainingState:
    r"""What a training call changes.

    Attributes
    ----------
    names : list of str
        The trained initializers, in the order of ``weights``.
    weights : list of numpy.ndarray
        Their values: C-contiguous buffers, packed in one (``runtime.buffers``), which
        onnxruntime borrows; every update writes into them in place.
    rate_state : list of numpy.ndarray
        The update rule's state (``init_state``), updated in place.
    t : int
        Samples seen plus one.
    average : list of numpy.ndarray
        The running average of the weights (averaged SGD), empty without.
    average_count : int
        Samples in the average.
    penalty : list of numpy.ndarray
        The state of the penalty's part after the gradient step (the cumulative L1
        penalty's totals, :meth:`~skl_ortgrad.optim.BaseLearningPenalty.after_step_state`),
        empty without. It lives for one training call, as scikit-learn's: set at the start
        of every call, in checkpoints, not pickled.
    """

    names: list[str]
    weights: list[np.ndarray]
    rate_state: list[np.ndarray]
    t: int = 1
    average: list[np.ndarray] = field(default_factory=list)
    average_count: int = 0
    penalty: list[np.ndarray] = field(default_factory=list)

    @classmethod
    def initial(cls, model: onnx.ModelProto, names: list[str] | None,
                rate: Any) -> TrainingState:
        """The state at the start of training: ``model``'s initializers ``names`` (None:
        those that parameterize linear layers, see
        :func:`~skl_ortgrad.graph.weights.get_train_initializer`), copied into one packed
        buffer (the rates' updates run once over them), ``rate``'s initial state.

        Raises
        ------
        ValueError
            For a name that is not an initializer of the model.
        """
        if names is None:
            inits = get_train_initializer(model)
        else:
            available = {i.name: i for i in model.graph.initializer}
            unknown = [name for name in names if name not in available]
            if unknown:
                raise ValueError(
                    f"Unknown weights {unknown}: the model's initializers are "
                    f"{sorted(available)}."
                )
            inits = {name: numpy_helper.to_array(available[name]) for name in names}
        order = list(inits)
        weights = packed_copies([inits[name] for name in order])
        return cls(order, weights, rate.init_state(weights))

    @property
    def nbytes(self) -> int:
        """The bytes :meth:`checkpoint` copies."""
        return sum(a.nbytes for arrays in (self.weights, self.rate_state, self.average,
                                           self.penalty) for a in arrays)

    def checkpoint(self) -> dict[str, Any]:
        """Copies of every value: ``weights``, ``t``, ``lr_state`` (the rule's state),
        ``average``, ``average_count`` and ``penalty``."""
        return {"weights": [w.copy() for w in self.weights], "t": self.t,
                "lr_state": [s.copy() for s in self.rate_state],
                "average": [a.copy() for a in self.average],
                "average_count": self.average_count,
                "penalty": [p.copy() for p in self.penalty]}

    def restore(self, checkpoint: dict[str, Any]) -> None:
        """Make the values those of ``checkpoint`` (:meth:`checkpoint`'s form; the
        average may be missing), copied into the existing buffers (onnxruntime and the
        mini-batch loader borrow them)."""
        self.set_weights(checkpoint["weights"])
        for target, source in zip(self.rate_state, checkpoint["lr_state"], strict=True):
            np.copyto(target, source)
        self.t = checkpoint["t"]
        # The averager and the penalty's step of the epoch hold these buffers too.
        self.average = _copied_into(self.average, checkpoint.get("average", []))
        self.average_count = checkpoint.get("average_count", 0)
        self.penalty = _copied_into(self.penalty, checkpoint.get("penalty", []))

    def start_penalty(self, initial: list[np.ndarray]) -> None:
        """Make :attr:`penalty` ``initial``, copied into its buffers where they are as
        many and shaped alike: a training program bound to them reads and writes them
        from call to call (``partial_fit`` would bind it anew)."""
        self.penalty = _copied_into(self.penalty, initial)

    def set_weights(self, arrays: list[np.ndarray]) -> None:
        """Copy ``arrays`` into the weights, cast to their dtype.

        Raises
        ------
        ValueError
            If the number of arrays or a shape differs from the weights'.
        """
        arrays = list(arrays)
        if len(arrays) != len(self.weights):
            raise ValueError(
                f"set_state expects {len(self.weights)} tensors ({self.names}), got "
                f"{len(arrays)}."
            )
        for name, target, source in zip(self.names, self.weights, arrays, strict=True):
            if np.shape(source) != target.shape:
                raise ValueError(
                    f"Weight {name!r} has shape {target.shape}, got {np.shape(source)}."
                )
        for target, source in zip(self.weights, arrays, strict=True):
            np.copyto(target, source, casting="same_kind")

    def served(self, averaging: bool) -> list[np.ndarray]:
        """The weights predictions use: the average once averaging started, else the
        weights (scikit-learn's ``coef_`` rule)."""
        return self.average if averaging and self.average_count > 0 else self.weights

    def flat(self) -> dict[str, Any]:
        """The fields under their pickled names (:data:`STATE_KEYS`)."""
        return {key: getattr(self, name) for name, key in STATE_KEYS.items()}

    @classmethod
    def from_flat(cls, flat: dict[str, Any]) -> TrainingState | None:
        """The state of a pickled trainer's ``__dict__`` (its :data:`STATE_KEYS`; the
        average may be missing from the oldest), or None for a trainer never fitted."""
        if STATE_KEYS["weights"] not in flat:
            return None
        return cls(**{name: flat[key] for name, key in STATE_KEYS.items() if key in flat})


def pickled(attributes: dict[str, Any], drop: Iterable[str] = ()) -> dict[str, Any]:
    """A trainer's ``__dict__`` as pickled: without ``drop`` (onnxruntime objects, which
    do not pickle: rebuilt on demand), the ``state_`` in its flat form
    (:data:`STATE_KEYS`), the version and :data:`STATE_FORMAT`."""
    state = {key: value for key, value in attributes.items() if key not in set(drop)}
    training = state.pop("state_", None)
    if training is not None:
        state.update(training.flat())
    state["_skl_ortgrad_version"] = _version.__version__
    state["_state_format"] = STATE_FORMAT
    return state


def unpickled(state: dict[str, Any]) -> dict[str, Any]:
    """The ``__dict__`` of a trainer from its pickled form (:func:`pickled`'s, or any
    older release's of the same format: parameters added since take their defaults).

    Raises
    ------
    ValueError
        If the state was written in a format this version cannot read (a newer one, or
        an older one with no conversion).

    Warns
    -----
    PickleVersionWarning
        If another version of skl_ortgrad wrote a state in the same format.
    """
    state = dict(state)
    # Pickles older than these parameters behave as their defaults.
    state.setdefault("external_data_dir", None)
    state.setdefault("average", False)
    state.setdefault("weighted_mean", True)
    state.setdefault("tol_on_objective", False)
    version = state.pop("_skl_ortgrad_version", None)
    state_format = state.pop("_state_format", 1)  # pickles older than the field: 1
    current = _version.__version__
    if state_format != STATE_FORMAT:
        raise ValueError(
            f"This model was pickled by skl_ortgrad {version} (training state format "
            f"{state_format}); skl_ortgrad {current} reads format {STATE_FORMAT} only. "
            f"Load it with skl_ortgrad {version}, then either keep using that version or "
            "export the trained graph with to_onnx(), the portable format."
        )
    if version is not None and version != current:
        warnings.warn(
            f"This model was pickled by skl_ortgrad {version} and is loaded by "
            f"skl_ortgrad {current}; the state format is the same, but results may "
            "differ. to_onnx() is the format meant to move a model between versions.",
            PickleVersionWarning,
            stacklevel=3,
        )
    training = TrainingState.from_flat(state)
    for key in STATE_KEYS.values():
        state.pop(key, None)
    if training is not None:
        state["state_"] = training
    return state


def _state_property(field: str, doc: str) -> property:
    """A fitted attribute that is a field of the trainer's :class:`TrainingState`."""

    def get(self: HoldsTrainingState) -> Any:
        try:
            state = self.__dict__["state_"]
        except KeyError:
            raise AttributeError(STATE_KEYS[field]) from None
        return getattr(state, field)

    def set(self: HoldsTrainingState, value: Any) -> None:
        setattr(self.__dict__["state_"], field, value)

    return property(get, set, doc=doc)


class HoldsTrainingState:
    """The state codec of an object whose training state is its ``state_``
    (:class:`TrainingState`): the fitted attributes over its fields, copies and restores
    of the weights, of checkpoints, and pickling in the flat form every release reads
    (:func:`pickled`, :func:`unpickled`), without the attributes named in
    ``_transient`` (onnxruntime objects)."""

    _transient: tuple[str, ...] = ()

    # -- the fitted state: fields of state_ ------------------------------------------

    weights_to_train_ = _state_property("names", "The trained initializers.")
    weights_ = _state_property("weights", "Current weights, in ``weights_to_train_`` order.")
    lr_state_ = _state_property("rate_state", "The update rule's state.")
    t_ = _state_property("t", "Samples seen plus one.")
    average_weights_ = _state_property("average", "The averaged weights (``average``).")
    average_count_ = _state_property("average_count", "Samples in the average.")

    def get_state(self) -> list[np.ndarray]:
        """Return a copy of the trained weights, in the order of ``weights_to_train_``
        (the seed API's ``state_tensors = train_session.get_state()``)."""
        return [w.copy() for w in self.weights_]

    def set_state(self, state: list[np.ndarray]) -> None:
        """Set the weights from a list like :meth:`get_state`'s (copied into the buffers
        onnxruntime reads, cast to their dtype).

        Raises
        ------
        ValueError
            If the number of tensors or a shape differs from the trained weights'.
        """
        self.state_.set_weights(state)

    def served_weights(self) -> list[np.ndarray]:
        """The weights predictions use: the average once averaging started (``average``),
        else ``weights_`` (scikit-learn's ``coef_`` rule)."""
        return self.state_.served(bool(self.average))

    def get_checkpoint(self) -> dict[str, Any]:
        """Return a copy of the whole training state: the weights, ``t_``, the learning
        rate's state (momentum velocities, Adam's moments) and the average."""
        return self.state_.checkpoint()

    def set_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Restore a state from :meth:`get_checkpoint` (copied into the existing buffers)."""
        self.state_.restore(checkpoint)

    def get_trained_onnx(self, model: onnx.ModelProto | None = None) -> onnx.ModelProto:
        """Return a copy of ``model`` (default ``model_onnx``) with the trained weights."""
        result = copied_model(self.model_onnx if model is None else model)
        trained = dict(zip(self.weights_to_train_, self.served_weights(), strict=True))
        for init in result.graph.initializer:
            if init.name in trained:
                init.CopyFrom(numpy_helper.from_array(trained[init.name], init.name))
        return result

    def __getstate__(self) -> dict[str, Any]:
        return pickled(self.__dict__, drop=self._transient)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore a pickled trainer (see :func:`~skl_ortgrad.training.state.unpickled`).

        Raises
        ------
        ValueError
            If the state was written in a format this version cannot read.

        Warns
        -----
        PickleVersionWarning
            If another version of skl_ortgrad wrote a state in the same format.
        """
        self.__dict__.update(unpickled(state))


def _copied_into(buffers: list[np.ndarray], values: list[np.ndarray]) -> list[np.ndarray]:
    """``values`` copied into ``buffers`` (returned) when they are as many and shaped
    alike, else copies of ``values`` (a checkpoint taken with or without them)."""
    if len(values) != len(buffers) or any(
            np.shape(v) != b.shape for v, b in zip(values, buffers, strict=True)):
        return [v.copy() for v in values]
    for target, source in zip(buffers, values, strict=True):
        np.copyto(target, source)
    return buffers
