r"""k consecutive mini-batch SGD steps in one ONNX graph: the training programs.

One onnxruntime ``run`` costs a fixed 5-9 µs on this machine kind, and every node
0.3-0.9 µs more, whatever its work; a linear model's step at batch 32 does about a
microsecond of arithmetic, so one call per mini-batch cannot beat scikit-learn's
per-sample loop (0.2-0.5 µs per row of 100 features). A *program* is one ``Scan`` node
running :math:`k` steps per call, the weights flowing from one step to the next inside
the graph; in the optimizer's order (``Trainer._epoch``), the
penalty's proximal step on the weights the gradient was computed at, then the gradient
step:

.. math::

    g_j &= \sigma_j \sum_{i \in B_j} s_i\,
        \frac{\partial \ell(y_i, f(x_i; W_{j-1}))}{\partial W},
        \qquad \sigma_j = 1 / \text{(batch size or summed weights of } B_j) \\
    D_j &= \operatorname{soft}_{\eta_j l_1}\!\bigl(W_{j-1}
        \max(0, 1 - \eta_j l_2 / r)^r\bigr)
        \quad\text{(penalized weights; } D_j = W_{j-1} \text{ otherwise)} \\
    W_j &= D_j - \eta_j\, g_j

then, with scikit-learn's cumulative L1 penalty (the SGD estimators' ``'l1'`` and
``'elasticnet'``; no soft threshold in :math:`D_j` then), its step after the gradient
step (:func:`~skl_ortgrad.training.programs.steps.cumulative_l1`): with :math:`u_j` the
total of the :math:`\eta_i l_1` of the call's steps up to :math:`j` (a per-step scalar,
``l1_total``) and :math:`Q` the penalty each weight received so far (a state flowing from
step to step beside the weights, an input and an output of every call),

.. math::

    W'_j = \operatorname{sign}(W_j) \max\bigl(0, |W_j| - (u_j + \operatorname{sign}(W_j)
        Q_{j-1})\bigr), \qquad Q_j = Q_{j-1} + W'_j - W_j

with :math:`\operatorname{soft}_\tau(v) = v - \operatorname{clip}(v, -\tau, \tau)`, sample
weights :math:`s_i` (1 without) and :math:`r` the penalty's ``rows``
(``ElasticLearningPenalty``). The schedule stays in numpy: per step, the scalars
(:math:`\sigma_j`, :math:`\eta_j`, the decay, the threshold) are inputs computed by
:func:`~skl_ortgrad.training.programs.steps.scalar_table`, so the graph depends on
neither ``eta0``, ``alpha`` nor ``l1_ratio`` (changing them needs no new session; only
whether :math:`l_1`, :math:`l_2` are zero does). Each per-step scalar is fed with the rank
of the tensor it meets (DESIGN.md: a rank-0 operand against an ``[n, 1]`` tensor takes
onnxruntime's slow broadcasting path).

Two programs (modules :mod:`~skl_ortgrad.training.programs.generic`,
:mod:`~skl_ortgrad.training.programs.linear` and :mod:`~skl_ortgrad.training.programs.sparse`,
over the shared :mod:`~skl_ortgrad.training.programs.steps` and
:mod:`~skl_ortgrad.training.programs.scan`):

* :func:`generic_program` (:class:`StepProgram`) takes any backend's one-call gradient
  graph (:attr:`~skl_ortgrad.gradient.GradientGraph.fused`, preferably its ``static``
  form) of a model whose loss output is the batch's loss sum, and appends the update
  rule's nodes (its ``emit_update``: plain SGD as above, momentum, Nesterov, Adam, whose
  velocities or moments flow from step to step in the graph, packed over all the
  weights): any model, any loss, sample weights included; in float32 its results are bit
  for bit those of the per-batch path. Its inputs are the batches' rows, stacked (views of
  the loader's permuted buffers), its outputs the new weights and states and the
  :math:`k` batch losses;
* :func:`linear_program` (:class:`LinearProgram`) writes the step of a linear model
  :math:`s = W x + b` by hand, in 6 to 8 nodes (plus up to 3 for the penalty, 9 for the
  cumulative L1 one, and one
  per :data:`~skl_ortgrad.training.programs.steps.NORMS` output with ``norms=True``), for the
  squared error, the binary log loss and the hinge loss (the classifiers' default; the
  perceptron is its threshold 0), the last two also one-vs-rest over :math:`K` classes
  (``[b, K]`` scores, the same nodes); its passive-aggressive form
  (:class:`PassiveAggressiveProgram`, sparse :class:`SparsePassiveAggressiveProgram`:
  one row a step, the hinge or the epsilon-insensitive loss) computes each step's size
  from the row's loss and a per-row denominator instead of taking it from the schedule.
  It works on
  rows: :math:`W` is ``[1, d]``, the scores of a batch ``[1, b]``, and every per-row
  factor of the update is folded into one per-row input computed in numpy for the whole
  epoch, the *step weight* :math:`c_i = \eta_j \sigma_j s_i` (times :math:`-(2y_i - 1)`
  for the hinge loss), so that the update is one ``Gemm`` per weight. It reads its rows
  from the whole dataset by index (``Gather``): a shuffled epoch copies no features in
  numpy (the copy was a quarter of an epoch). Rather than its loss, each step outputs one
  value per row, from which numpy computes the batch losses (:meth:`LinearProgram.losses`);
  a batch shorter than the others (the end of an epoch) is padded with rows of step weight
  0. Its sparse form (:class:`SparseLinearProgram`) reads its rows by index from the
  stored values instead, laid out one row a row (``[n, w]`` columns and values, each
  row's padded with zeros): per step ``[b, w]`` of them, :math:`W` flat, the scores a
  ``GatherElements`` of :math:`W` at the columns, a product and a sum along each row, the
  update a ``ScatterElements`` that adds each value's step at its column (for the hinge
  loss, of the rows inside the margin only): its work follows the stored values, not the
  columns. Its cumulative L1 step touches the step's stored columns only (gathered,
  the rule applied, scattered back; or the rule on all of :math:`W`, kept where stored,
  where batches store many values per feature), as scikit-learn's on sparse rows.

Graphs only: nothing here creates an onnxruntime session or an OrtValue; the runtime
binds the feeds (:mod:`skl_ortgrad.runtime.program_run`).
"""

from __future__ import annotations

import functools

import numpy as np

from skl_ortgrad.training.programs.generic import StepProgram, generic_program
from skl_ortgrad.training.programs.linear import (
    LINEAR_LOSSES,
    LinearProgram,
    PassiveAggressiveProgram,
    dense_linear_program,
)
from skl_ortgrad.training.programs.sparse import (
    SparseLinearProgram,
    SparsePassiveAggressiveProgram,
    sparse_linear_program,
)
from skl_ortgrad.training.programs.steps import NORMS, scalar_table

__all__ = [
    "LINEAR_LOSSES",
    "NORMS",
    "LinearProgram",
    "PassiveAggressiveProgram",
    "SparseLinearProgram",
    "SparsePassiveAggressiveProgram",
    "StepProgram",
    "generic_program",
    "linear_program",
    "scalar_table",
]


@functools.lru_cache(maxsize=64)
def linear_program(
    loss: str, n_features: int, steps: int, batch_rows: int,
    dtype: np.dtype | type = np.float32, l1: bool = False, l2: bool = False,
    threshold: float = 1.0, sparse: bool = False, n_outputs: int = 1, norms: bool = False,
    cumulative: bool = False, whole: bool = False, intercept_step: float = 1.0,
    features_dtype: np.dtype | type | None = None, staged: bool = False,
    passive_aggressive: tuple[str, float] | None = None,
) -> LinearProgram:
    """The linear program of ``steps`` steps: :func:`~skl_ortgrad.training.programs.
    linear.dense_linear_program`, or its sparse form (``sparse``, :func:`~skl_ortgrad.
    training.programs.sparse.sparse_linear_program`), whose arguments it takes
    (the same in both; ``whole``: the sparse form's, ``features_dtype`` and ``staged``:
    the dense form's).

    Memoized (64 programs): the same arguments give the same object, which callers only
    read (a grid search of small fits writes each program once).
    """
    arguments = {"dtype": dtype, "l1": l1, "l2": l2, "threshold": threshold,
                 "n_outputs": n_outputs, "norms": norms, "intercept_step": intercept_step}
    if sparse:
        return sparse_linear_program(loss, n_features, steps, batch_rows,
                                     cumulative=cumulative, whole=whole,
                                     passive_aggressive=passive_aggressive, **arguments)
    return dense_linear_program(loss, n_features, steps, batch_rows, cumulative=cumulative,
                                features_dtype=features_dtype, staged=staged,
                                passive_aggressive=passive_aggressive, **arguments)
