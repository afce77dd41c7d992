r"""When training stops: ``max_iter``, scikit-learn's ``tol`` rule on the monitored value,
a plateau the learning rate may react to, and the reason the summary line gives.

The monitored value :math:`m_e` after epoch :math:`e` is, with validation data, the
validation loss or the opposite of the validation score; without, the training loss or
(``tol_on_objective``) the objective, the loss plus the mean penalty; with sample weights
and ``tol_on_objective='unweighted'``, the loss in it is the mean of the rows' *unweighted*
losses
(scikit-learn's SGD: ``objective_sum`` adds ``loss(p, y)`` of every sample, the weights
scaling the steps only). With
:math:`b_e = \min_{e' \le e} m_{e'}`, an epoch *does not improve* when :math:`m_e > b_{e-1}
- \mathrm{tol}`; ``n_iter_no_change`` such epochs in a row stop training (or, for a rate
that reacts to plateaus, scikit-learn's ``'adaptive'``, lower the rate and start counting
again). A non-finite loss or validation score stops it as a divergence
(:mod:`skl_ortgrad.training.divergence`).
"""

from __future__ import annotations

import math
from typing import Any

from skl_ortgrad.optim import ElasticLearningPenalty
from skl_ortgrad.training.progress import CONVERGED, EARLY_STOPPING

__all__ = ["StoppingPolicy"]


class StoppingPolicy:
    """The ``tol`` rule of one training call.

    Parameters
    ----------
    tol : float or None
        None: no rule (``max_iter`` epochs run).
    n_iter_no_change : int
    monitored : str
        What is watched, for the reason: ``'training loss'``, ``'training objective'``,
        ``'validation loss'`` or ``'validation score'``.
    validation_period : int
        With validation data, it is evaluated every this many epochs (and at the last).
    unweighted : bool
        The training loss watched is the mean of the rows' unweighted losses (sample
        weights with ``tol_on_objective='unweighted'``, see the module's docstring).
    """

    def __init__(self, tol: float | None, n_iter_no_change: int, monitored: str,
                 validation_period: int = 1, unweighted: bool = False) -> None:
        self.tol, self.n_iter_no_change = tol, n_iter_no_change
        self.monitored, self.validation_period = monitored, validation_period
        self.unweighted = unweighted
        self._best, self._no_improvement = math.inf, 0

    @classmethod
    def of_call(cls, trainer: Any, validation: bool, scored: bool,
                weighted: bool = False) -> StoppingPolicy:
        """The rule of a trainer's call, from its parameters (``tol``,
        ``n_iter_no_change``, ``validation_every``, ``tol_on_objective``) and resolved
        penalty: it watches the validation score or loss with validation data; without,
        the objective (``tol_on_objective`` True or 'unweighted', a proximal elastic
        penalty that is not zero) or the training loss, unweighted for ``weighted`` rows
        with ``tol_on_objective`` 'unweighted' or 'unweighted loss'.
        A ``validation_every`` below 1 is a share of ``max_iter``.
        """
        penalty = trainer.learning_penalty_
        if validation:
            monitored = "validation score" if scored else "validation loss"
        elif (trainer.tol_on_objective in (True, "unweighted") and trainer.tol is not None
              and isinstance(penalty, ElasticLearningPenalty)
              and (penalty.l1 > 0 or penalty.l2 > 0)):
            monitored = "training objective"
        else:
            monitored = "training loss"
        every = trainer.validation_every
        period = (max(1, round(every * int(trainer.max_iter))) if every < 1
                  else int(every))
        unweighted = (weighted and not validation and trainer.tol is not None
                      and trainer.tol_on_objective in ("unweighted", "unweighted loss"))
        return cls(trainer.tol, trainer.n_iter_no_change, monitored, period, unweighted)

    def validates(self, epoch: int, epochs: int) -> bool:
        """Whether the validation data is evaluated after ``epoch`` (0-based) of a call
        of ``epochs`` epochs."""
        return (epoch + 1) % self.validation_period == 0 or epoch == epochs - 1

    @property
    def no_improvement(self) -> int:
        """Epochs in a row that did not improve, so far (scikit-learn's MLPs'
        ``_no_improvement_count``)."""
        return self._no_improvement

    @property
    def patience(self) -> float | None:
        """Epochs from now before the rule can stop at the earliest (None: no rule)."""
        if self.tol is None:
            return None
        return self.n_iter_no_change - self._no_improvement

    def update(self, monitored: float) -> bool:
        """Count the epoch that ended with ``monitored``; True when the rule stops."""
        if self.tol is None:
            return False
        self._no_improvement = (self._no_improvement + 1
                                if monitored > self._best - self.tol else 0)
        self._best = min(self._best, monitored)
        return self._no_improvement >= self.n_iter_no_change

    def restart(self) -> None:
        """Count again from zero (the rate reacted to the plateau)."""
        self._no_improvement = 0

    def reason(self) -> str:
        """Why the rule stopped training, for the summary line."""
        kind = CONVERGED if self.monitored.startswith("training") else EARLY_STOPPING
        return (
            f"{kind} (the {self.monitored} improved by less than tol={self.tol:g} for "
            f"{self.n_iter_no_change} epochs)"
        )
