"""The numpydoc entries of the estimators' parameters and fitted attributes.

Every estimator's docstring is put together by :func:`class_docstring`: one entry per
argument of its ``__init__``, in the signature's order, with the default read from the
signature (the page cannot disagree with the code), then one entry per fitted attribute.
Each parameter has its own description: the families share scikit-learn's names but not
always their meaning (``alpha``, ``epsilon``, ``learning_rate`` and ``tol`` differ
between the SGD estimators, the MLPs and the fine-tuning estimators), so the entries are
kept per family, with the ones every family shares in :data:`COMMON`.

An entry is ``(type, description)``; the description says scikit-learn's meaning and,
where this package differs, how.
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Mapping
from typing import Any

Entry = tuple[str, str]


def entry(kind: str, text: str) -> Entry:
    """An entry of type ``kind``, described by ``text`` (dedented)."""
    return kind, textwrap.dedent(text).strip()


def _default(value: Any) -> str:
    """A default as written in the source (``np.float32``, not the class's repr)."""
    if isinstance(value, type):
        return f"np.{value.__name__}" if value.__module__ == "numpy" else value.__name__
    return repr(value)


def _section(title: str, lines: list[str]) -> str:
    return "\n".join([title, "-" * len(title), *lines])


def _field(header: str, description: str) -> list[str]:
    return [header, textwrap.indent(description, "    ")]


def class_docstring(
    cls: type, summary: str, parameters: Mapping[str, Entry],
    attributes: Mapping[str, Entry],
) -> str:
    """The docstring of ``cls``: ``summary``, then a ``Parameters`` section with an entry
    of ``parameters`` for every argument of ``cls.__init__`` and its default, and an
    ``Attributes`` section with ``attributes``, in their order.

    Raises
    ------
    KeyError
        If an argument of ``__init__`` has no entry in ``parameters``.
    """
    fields: list[str] = []
    for name, argument in inspect.signature(cls.__init__).parameters.items():
        if name == "self":
            continue
        kind, text = parameters[name]
        default = (
            "" if argument.default is inspect.Parameter.empty
            else f", default={_default(argument.default)}"
        )
        fields += _field(f"{name} : {kind}{default}", text)
    documented = [line for name, (kind, text) in attributes.items()
                  for line in _field(f"{name} : {kind}", text)]
    body = "\n\n".join([inspect.cleandoc(summary), _section("Parameters", fields),
                        _section("Attributes", documented)])
    # Indented as a docstring written in the class body (lines after the first).
    first, _, rest = body.partition("\n")
    return f"{first}\n{textwrap.indent(rest, '    ')}\n"


# -- every family --------------------------------------------------------------------------

_VERBOSE = """
    0 prints nothing. 1: ``fit`` shows a progress bar over the epochs (loss, and the
    validation score with ``early_stopping``) in a terminal or a notebook, one plain
    line per epoch elsewhere (a file, a pipe, CI), then a summary line saying why
    training stopped; ``partial_fit`` writes one line per call. 2 adds every batch's
    loss and learning rate and lets onnxruntime's own warnings through. The same lines
    are logged at INFO (batches at DEBUG) on the ``skl_ortgrad`` logger whatever
    ``verbose`` is. scikit-learn's estimators print their own, different lines.
"""

COMMON: dict[str, Entry] = {
    "device": entry("str", """
        Where onnxruntime trains and predicts: ``'cpu'``, ``'cuda'`` or
        ``'cuda:<index>'`` (not in scikit-learn). CUDA needs a CUDA build of onnxruntime
        (the ``gpu`` or ``gpu-cuda13`` extra); with a CPU build, ``fit`` raises a
        ``ValueError`` giving the command that installs one. **Untested**: no run of
        the test suite on a GPU has passed yet, so ``'cuda'`` is offered as onnxruntime
        provides it, without a guarantee from this package.
    """),
    "n_threads": entry("int or 'auto'", """
        Threads of onnxruntime's intra-op pool, for training and prediction (not in
        scikit-learn). 'auto': for training, one thread for a step of fewer than 25
        million multiply-adds (three per trained value and row of a batch: every linear
        model, a 100-128-10 MLP at batch 200), else every core the process may use
        (a 784-256-128-10 MLP), see :func:`~skl_ortgrad.runtime.threads.training_threads`;
        one for prediction, where the blocks of a large ``X`` are shared among Python
        threads, as many as the cores other processes leave free
        (:func:`~skl_ortgrad.runtime.threads.free_cores`). An int fixes it for both.
        In training, a pool of several threads sleeps once its task is done instead
        of spinning (onnxruntime's default, which prediction keeps), leaving the cores
        to the update between two steps.
        Where a core beyond these threads is free, a helper thread gathers and casts
        the rows of a linear model's next training call while the current one runs
        (:mod:`~skl_ortgrad.runtime.staging`).
    """),
    "dtype": entry("np.float32 or np.float64", """
        Float type of the ONNX graph: its weights, the training computations and the
        exported model (``to_onnx()``'s input type). Not in scikit-learn, which
        computes in float64: the fitted weights and the regressors' predictions still
        have the type of the training data, as scikit-learn's. A finite value of ``X``
        beyond the range of ``dtype`` (3.4e38 for float32) raises a ``ValueError``.
    """),
    "backend": entry("{'auto', 'onnxruntime-training', 'onnx'}", """
        Which gradient backend builds the training graph (not in scikit-learn):
        onnxruntime-training's graph builder (Python 3.10 to 3.12), or skl_ortgrad's
        own differentiator in standard ONNX, which runs on any onnxruntime (Python
        3.13+, onnxruntime-gpu). 'auto' takes onnxruntime-training where it is
        installed, else 'onnx' (the environment variable ``SKL_ORTGRAD_BACKEND`` can
        change what 'auto' means). Both give the same gradients, and the trained model
        is the same ONNX graph either way; ``backend_`` says which one ran.
    """),
    "shuffle": entry("bool", """
        Draw a new permutation of the training rows before every epoch (from
        ``random_state``), as scikit-learn; False trains on the rows in the order given.
    """),
    "validation_fraction": entry("float", """
        Share of the training rows that ``early_stopping=True`` sets aside to compute
        the validation score, in (0, 1), as in scikit-learn: the same rows as
        scikit-learn's split, drawn from ``random_state`` as it draws them, stratified
        for the SGD classifiers and for an MLP classifier of two classes (scikit-learn's
        MLPClassifier does not stratify more classes, nor multilabel targets). Unused
        without early stopping.
    """),
}

_ATTRIBUTES: dict[str, Entry] = {
    "classes_": entry("ndarray of shape (n_classes,)", """
        The class labels, sorted, as scikit-learn's (strings included).
    """),
    "n_features_in_": entry("int", "Number of features (columns of ``X``) seen by ``fit``."),
    "feature_names_in_": entry("ndarray of str, of shape (n_features,)", """
        Column names of ``X`` when ``fit`` received them (a DataFrame whose column names
        are all strings); ``predict`` then checks the columns it gets. Absent otherwise.
    """),
    "backend_": entry("str", """
        The gradient backend that built the training graph, ``'onnxruntime-training'``
        or ``'onnx'`` (``backend='auto'`` resolved). Not in scikit-learn.
    """),
    "optimizer_": entry(":class:`~skl_ortgrad.training.trainer.Trainer`", """
        The training loop and its state (weights, learning-rate state, ``t_``, shuffling
        generator): what ``partial_fit`` and a warm-started ``fit`` continue from. Not in
        scikit-learn.
    """),
}


def _validation_attributes(note: str) -> dict[str, Entry]:
    """``validation_scores_`` and ``best_validation_score_``, set by a ``fit`` with
    ``early_stopping=True``; ``note`` says what happens without."""
    return {
        "validation_scores_": entry("list of float", f"""
            The validation score (``score``: R² for regressors, accuracy for
            classifiers) on the ``validation_fraction`` rows after every epoch of a
            ``fit`` with ``early_stopping=True``. {note}
        """),
        "best_validation_score_": entry("float", f"""
            The largest of ``validation_scores_``. {note}
        """),
    }


# -- SGD estimators (sgd.py) ----------------------------------------------------------------

SGD: dict[str, Entry] = {
    **COMMON,
    "penalty": entry("{'l2', 'l1', 'elasticnet'}, None or BaseLearningPenalty", r"""
        The regularization term :math:`\alpha R(w)` of scikit-learn's objective:
        :math:`R(w) = \frac12 \|w\|_2^2` ('l2'), :math:`\|w\|_1` ('l1'), their mix by
        ``l1_ratio`` ('elasticnet'), or none. It applies to the coefficients, never to
        the intercept, as scikit-learn's SGD applies it: the L2 decay before each
        gradient step (compounding the decays of the batch's :math:`b` samples), the
        L1 part after it as scikit-learn's cumulative penalty (Tsuruoka et al. 2009: a
        weight moves towards zero by the L1 steps of the call so far minus what it
        already received, and stops at zero), so 'l1' and 'elasticnet' set coefficients
        exactly to zero; with ``batch_size=1`` the weights are scikit-learn's, and a
        mini-batch is one step of the rule. An object (such as
        ``ElasticLearningPenalty(l1=..., l2=...)``) is used as given, and ``alpha``
        (except for the 'optimal' schedule) and ``l1_ratio`` are then ignored.
    """),
    "alpha": entry("float", """
        Strength :math:`\\alpha` of the penalty: larger values regularize more. As in
        scikit-learn, it also sets the 'optimal' learning rate, even when ``penalty`` is
        None or an object.
    """),
    "l1_ratio": entry("float", r"""
        :math:`\rho`, the share of L1 in 'elasticnet', in [0, 1]:
        :math:`R(w) = \frac{1 - \rho}{2} \|w\|_2^2 + \rho \|w\|_1` (0 is 'l2', 1 is
        'l1'). Used only with ``penalty='elasticnet'``, as in scikit-learn.
    """),
    "fit_intercept": entry("bool", """
        Train the intercept :math:`b`; False keeps it at 0 (or at ``intercept_init``),
        for data already centered. On sparse ``X`` (a call's data), the intercept's step
        is damped as scikit-learn's (``intercept_decay``):
        :math:`b \\leftarrow b - 0.01\\, \\eta_t\\, \\partial L / \\partial b`, the
        coefficients' step unchanged; averaged SGD averages the damped intercept. (A
        ``learning_rate`` object is used as given: ``LearningRateSGD(step_factors=...)``
        sets the factors.)
    """),
    "max_iter": entry("int", """
        Most epochs (passes over the training data) of ``fit``, as in scikit-learn; a
        ``fit`` that reaches it while ``tol`` is set warns with scikit-learn's
        ``ConvergenceWarning``. ``partial_fit`` runs one epoch per call whatever it is.
    """),
    "tol": entry("float or None", """
        Stopping rule of ``fit``, scikit-learn's: training stops once the epoch's
        objective (the mean training loss plus :math:`\\alpha R(w)` at the weights of
        every batch, as scikit-learn's SGD sums it) has not fallen below the best so far
        minus ``tol`` for ``n_iter_no_change`` epochs in a row; with
        ``early_stopping=True``, once the validation score has not risen by ``tol``.
        None runs ``max_iter`` epochs. The one-vs-rest classes of a multiclass
        classifier stop together, on the sum of their objectives (scikit-learn stops
        each on its own): such a fit may run more epochs than scikit-learn's.
    """),
    "verbose": entry("int", _VERBOSE),
    "epsilon": entry("float", """
        The :math:`\\epsilon` of the 'huber', 'epsilon_insensitive' and
        'squared_epsilon_insensitive' losses, as in scikit-learn: where Huber's loss
        turns from quadratic to linear, and the half-width of the band of errors that
        the epsilon-insensitive losses ignore. Unused by the other losses.
    """),
    "random_state": entry("int, RandomState instance or None", """
        Seeds the permutations of ``shuffle`` and the split of ``early_stopping``: an
        integer makes ``fit`` repeatable, None draws from numpy's global generator, as
        in scikit-learn (the initial weights are zeros: nothing else is random).
    """),
    "learning_rate": entry(
        "{'constant', 'optimal', 'invscaling', 'adaptive', 'pa1', 'pa2'} or "
        "BaseLearningRate", r"""
        scikit-learn's schedule of the per-sample step :math:`\eta_t`, :math:`t` counting
        the samples seen plus one (``t_``): 'constant' :math:`\eta_t = \eta_0`;
        'optimal' :math:`\eta_t = 1 / (\alpha (t_0 + t - 1))` (Bottou's heuristic, as
        scikit-learn computes :math:`t_0`); 'invscaling'
        :math:`\eta_t = \eta_0 / t^{power\_t}`; 'adaptive' :math:`\eta_0`, divided by 5
        each time the ``tol`` rule finds no improvement, until below 1e-6. Where it
        differs: a batch of :math:`b` rows takes one step of :math:`b\, \eta_t` along its
        mean gradient (the same as :math:`b` per-sample steps to first order), capped at
        a step that keeps the mean-gradient update stable on the data, the cap decaying
        as the schedule does over the batches taken (see
        :mod:`skl_ortgrad.estimators.sgd_parameters`); ``batch_size=1`` is
        scikit-learn's exactly. 'pa1' and 'pa2' (passive-aggressive, with the hinge loss
        of the classifier or the epsilon-insensitive loss of the regressor, ``eta0``
        their :math:`C`) are scikit-learn's per-sample steps, one row a batch
        (:class:`~skl_ortgrad.optim.passive_aggressive.PassiveAggressiveRate`): equal to
        its weights to rounding where both visit the rows in one order, trained by the
        linear program's passive-aggressive form (about 4 µs a dense row, 4 to 27 times
        scikit-learn's time, 25 µs a text-like sparse one), per row in Python and
        onnxruntime with ``average``. An object
        (``LearningRateSGD(...)``, ``LearningRateSGDNesterov(...)``,
        ``LearningRateAdam(...)``) is used as given, its rate applied to the batch's mean
        gradient, and ``eta0`` and ``power_t`` are then ignored; nested parameters
        (``learning_rate__eta0``) reach inside it.
    """),
    "eta0": entry("float", """
        Initial rate :math:`\\eta_0` of the 'constant', 'invscaling' and 'adaptive'
        schedules (unused by 'optimal'), scikit-learn's per-sample step; a batch steps
        ``batch_size`` times as far, within the cap described under ``learning_rate``.
        With 'pa1' and 'pa2', the passive-aggressive :math:`C`, as in scikit-learn.
    """),
    "power_t": entry("float", """
        Exponent of the 'invscaling' schedule, :math:`\\eta_t = \\eta_0 / t^{power\\_t}`.
        A negative value warns (``FutureWarning``), as in scikit-learn 1.8.
    """),
    "early_stopping": entry("bool", """
        Set ``validation_fraction`` of the rows aside and stop ``fit`` when the
        validation score (``score`` on them) has not improved by ``tol`` for
        ``n_iter_no_change`` epochs, as in scikit-learn; the scores are in
        ``validation_scores_``. The weights kept are those of the last epoch.
        ``partial_fit`` refuses it, with scikit-learn's error.
    """),
    "n_iter_no_change": entry("int", """
        Epochs in a row without an improvement of ``tol`` after which ``fit`` stops (or
        'adaptive' divides its rate by 5), as in scikit-learn.
    """),
    "warm_start": entry("bool", """
        ``fit`` starts from the weights of the previous ``fit`` or ``partial_fit``
        instead of zeros. As scikit-learn's, it restarts the schedule (``t_ = 1``) and the
        average; ``coef_init`` and ``intercept_init`` passed to ``fit`` take precedence.
    """),
    "average": entry("bool or int", """
        Averaged SGD as scikit-learn's: ``coef_``, ``intercept_``, predictions and the
        exported graph use the average of the weights after every update, counted per
        sample from the ``average``-th sample on (True: from the first), once reached.
        With ``batch_size=1`` it is scikit-learn's average exactly; a batch's weights
        count once per row.
    """),
    "batch_size": entry("int or 'auto'", r"""
        Rows per mini-batch; not in scikit-learn, whose SGD takes one sample at a time,
        as ``batch_size=1`` does here step for step. 'auto': fixed by the rows of the
        first training call (``fit``, or the first ``partial_fit`` of a stream), 32 rows
        doubled while an epoch keeps at least 384 batches, up to 256 (32 below 24,576
        rows, 256 from 98,304; at most the rows of a call), see
        :func:`~skl_ortgrad.estimators.sgd_parameters.auto_batch_size`; one row with
        'pa1' and 'pa2', which take no other, and with a rate object reading every
        batch's rows (``PassiveAggressiveRate``). A batch
        of :math:`b` rows takes a step of :math:`b\, \eta_t` along its mean gradient, so
        an epoch learns about as much whatever the batch size; larger batches amortize
        the fixed cost of an onnxruntime call.
    """),
    "n_jobs": entry("int or None", """
        Accepted for compatibility with ``SGDClassifier``, which trains the one-vs-rest
        classes in parallel; here every class trains together in one graph, so it has no
        effect (``n_threads`` sets onnxruntime's threads). 0 with three classes or more
        raises joblib's error, as scikit-learn's does.
    """),
    "class_weight": entry("dict, 'balanced' or None", """
        Weight of every class, ``{label: weight}``, multiplying the ``sample_weight`` of
        its rows, as in scikit-learn; 'balanced' gives each class
        ``n_samples / (n_classes * count)`` from the ``y`` of ``fit``. ``partial_fit``
        refuses 'balanced', as scikit-learn does.
    """),
}

_SGD_FITTED: dict[str, Entry] = {
    "n_iter_": entry("int", """
        Epochs run by the last call: those of ``fit`` (until the ``tol`` rule stopped
        it, or ``max_iter``), 1 after ``partial_fit``, as scikit-learn's.
    """),
    "t_": entry("float", """
        Samples seen plus one, the :math:`t` of the schedules: each call adds ``n_iter_ *
        n_samples``, the validation rows of ``early_stopping`` included (``n_iter_ *
        n_samples + 1`` after a ``fit``), and the next call's schedule starts there, as
        scikit-learn's ``t_``; within a call, :math:`t` counts the rows stepped on.
    """),
    "loss_curve_": entry("list of float", """
        Mean training loss (sample-weighted, without the penalty) of every epoch; every
        ``partial_fit`` call appends one. Not in scikit-learn's SGD, which keeps none.
    """),
    "best_loss_": entry("float", """
        The smallest value of ``loss_curve_``. Not in scikit-learn's SGD.
    """),
    **_validation_attributes(
        "Absent without early stopping (scikit-learn's SGD keeps no validation scores)."),
}


def sgd_attributes(classifier: bool) -> dict[str, Entry]:
    """The fitted attributes of ``OnnxSGDClassifier`` (``classifier``) or
    ``OnnxSGDRegressor``."""
    shape = "(1, n_features) or (n_classes, n_features)" if classifier else "(n_features,)"
    intercept = "(1,) or (n_classes,)" if classifier else "(1,)"
    rows = (": one row per class (one-vs-rest), a single row for two classes"
            if classifier else "")
    return {
        **({"classes_": _ATTRIBUTES["classes_"]} if classifier else {}),
        "coef_": entry(f"ndarray of shape {shape}", f"""
            Trained coefficients :math:`w`{rows}; of the training data's float type, and
            with ``average`` the averaged ones.
        """),
        "intercept_": entry(f"ndarray of shape {intercept}", """
            Trained intercept :math:`b` (0, or ``intercept_init``, with
            ``fit_intercept=False``).
        """),
        **_SGD_FITTED,
        **{name: _ATTRIBUTES[name] for name in
           ("n_features_in_", "feature_names_in_", "backend_", "optimizer_")},
    }


# -- MLPs (mlp.py) --------------------------------------------------------------------------

MLP: dict[str, Entry] = {
    **COMMON,
    "hidden_layer_sizes": entry("int or tuple of int", """
        Units of every hidden layer, from the input on: ``(64, 32)`` is two hidden
        layers, as in scikit-learn; ``()`` none (the outputs' activation of the linear
        score: a logistic or softmax regression, a linear regression). Sizes are
        integers of at least 1 (scikit-learn's ``ValueError`` and ``TypeError``).
    """),
    "activation": entry("{'relu', 'tanh', 'logistic', 'identity'}", r"""
        Activation of the hidden layers, as in scikit-learn: :math:`\max(0, x)`,
        :math:`\tanh x`, :math:`1 / (1 + e^{-x})` or :math:`x`.
    """),
    "solver": entry("{'adam', 'sgd', 'lbfgs'} or BaseLearningRate", """
        The optimizer, as in scikit-learn: 'adam' and 'sgd' train on mini-batches;
        'lbfgs' minimizes the loss of the whole data with ``scipy.optimize``'s
        L-BFGS-B, the loss and its gradient computed by onnxruntime (``max_iter``
        iterations, ``max_fun`` evaluations, ``tol`` on the gradient), and has no
        ``partial_fit``. An object (``LearningRateAdam(...)``,
        ``LearningRateSGDNesterov(...)``...) is used as given, and the parameters of
        'adam' and 'sgd' are then ignored.
    """),
    "alpha": entry("float", r"""
        Strength of the L2 term as in scikit-learn's MLPs:
        :math:`\frac{\alpha}{2 n_B} \sum_i \|W_i\|^2` over the coefficient matrices
        (not the intercepts) is part of every batch's loss of :math:`n_B` rows, so its
        gradient goes through the update rule and ``loss_curve_`` includes it.
    """),
    "batch_size": entry("int or 'auto'", """
        Rows per mini-batch of 'adam' and 'sgd': min(200, n_samples) for 'auto', as in
        scikit-learn; 'lbfgs' uses every row at once.
    """),
    "learning_rate": entry("{'constant', 'invscaling', 'adaptive'} or BaseLearningRate", r"""
        Schedule of ``solver='sgd'``, as in scikit-learn: 'constant' keeps
        ``learning_rate_init``; 'invscaling' is
        :math:`\eta = \eta_0 / t^{power\_t}` (:math:`t` the samples seen), updated at the
        end of every epoch; 'adaptive' divides the rate by 5 each time the ``tol`` rule
        finds no improvement, and stops once it is below 1e-6. Unused by 'adam' and
        'lbfgs'. An object is used as given, as for ``solver``.
    """),
    "learning_rate_init": entry("float", """
        The initial step :math:`\\eta_0` of 'sgd' and 'adam', as in scikit-learn.
    """),
    "power_t": entry("float", """
        Exponent of ``learning_rate='invscaling'`` (``solver='sgd'`` only).
    """),
    "max_iter": entry("int", """
        Most epochs of 'adam' and 'sgd' (a ``fit`` that reaches it while ``tol`` is set
        warns with scikit-learn's ``ConvergenceWarning``), or most iterations of
        'lbfgs', as in scikit-learn. ``partial_fit`` runs one epoch per call.
    """),
    "random_state": entry("int, RandomState instance or None", """
        Seeds the initial weights (Glorot uniform, drawn as scikit-learn draws them),
        the permutations of ``shuffle`` and the split of ``early_stopping``; an integer
        makes ``fit`` repeatable.
    """),
    "tol": entry("float or None", """
        Stopping rule of 'adam' and 'sgd', as in scikit-learn: training stops once the
        training loss (the L2 term included) has not fallen by ``tol`` for more than
        ``n_iter_no_change`` epochs in a row; with ``early_stopping=True``, once the
        validation score has not risen by ``tol``. For 'lbfgs', the tolerance on the
        projected gradient (scipy's ``gtol``). None, which scikit-learn does not accept,
        runs ``max_iter`` epochs.
    """),
    "verbose": entry("bool or int", _VERBOSE),
    "warm_start": entry("bool", """
        ``fit`` starts from the weights of the previous call instead of new random
        ones. As scikit-learn's MLPs, the update rule starts again (momentum
        velocities, Adam's moments and step counter, the adaptive divisor) while ``t_``
        goes on.
    """),
    "momentum": entry("float", """
        Momentum :math:`\\mu` of ``solver='sgd'``, in [0, 1]; 0 is plain gradient
        descent.
    """),
    "nesterovs_momentum": entry("bool", """
        Nesterov's momentum rather than the classical one (``solver='sgd'`` with
        ``momentum > 0``).
    """),
    "early_stopping": entry("bool", """
        Set ``validation_fraction`` of the rows aside and stop when the validation score
        (``score`` on them) has not improved by ``tol`` for more than
        ``n_iter_no_change`` epochs ('adam' and 'sgd'); the scores are in
        ``validation_scores_``, and the fit ends with the weights of the best of them,
        as scikit-learn's. ``partial_fit`` refuses it, with scikit-learn's error.
    """),
    "beta_1": entry("float", """
        Adam's decay rate of the first moment estimates, in [0, 1).
    """),
    "beta_2": entry("float", """
        Adam's decay rate of the second moment estimates, in [0, 1).
    """),
    "epsilon": entry("float", r"""
        Adam's :math:`\epsilon`, added to :math:`\sqrt{\hat v}` in the denominator of its
        step (unlike the SGD estimators' ``epsilon``, a loss parameter).
    """),
    "n_iter_no_change": entry("int", """
        Epochs the ``tol`` rule tolerates: training stops (or 'adaptive' divides its
        rate) once more than ``n_iter_no_change`` epochs in a row did not improve by
        ``tol``, as in scikit-learn ('adam' and 'sgd').
    """),
    "max_fun": entry("int", """
        Most loss and gradient evaluations of 'lbfgs' (scipy's ``maxfun``), as in
        scikit-learn; unused by 'adam' and 'sgd'.
    """),
    "loss": entry("{'squared_error', 'poisson'} or BaseLearningLoss", r"""
        As in scikit-learn: 'squared_error' minimizes
        :math:`\frac{1}{2 n_B} \sum_i \|f(x_i) - y_i\|^2`; 'poisson' makes the output
        :math:`e^s` and trains the Poisson loss on the raw score :math:`s` (targets
        :math:`\ge 0`). An object (a regression loss) is used as given.
    """),
}


def mlp_attributes(classifier: bool) -> dict[str, Entry]:
    """The fitted attributes of ``OnnxMLPClassifier`` (``classifier``) or
    ``OnnxMLPRegressor``."""
    output = ("'logistic' (two classes, or multilabel) or 'softmax' (multiclass)"
              if classifier else "'identity', or 'exp' with ``loss='poisson'``")
    score = "accuracy" if classifier else "R²"
    none = "None without early stopping, as scikit-learn's."
    return {
        **({"classes_": entry("ndarray of shape (n_classes,)", """
            The class labels, sorted, as scikit-learn's; ``arange(n_labels)`` for a
            multilabel indicator ``y``.
        """)} if classifier else {}),
        "coefs_": entry("list of ndarray", """
            ``coefs_[i]``, of shape (units of layer i, units of layer i + 1): the trained
            weight matrix between layer i and the next, of the training data's float type.
        """),
        "intercepts_": entry("list of ndarray", """
            ``intercepts_[i]``: the trained bias vector of layer i + 1.
        """),
        "n_layers_": entry("int", "Number of layers, input and output included."),
        "n_outputs_": entry("int", f"""
            Number of output units ({'1 for two classes, else one per class or label'
            if classifier else 'columns of y'}).
        """),
        "out_activation_": entry("str", f"Activation of the output layer: {output}."),
        "n_iter_": entry("int", """
            Epochs run by the last call: those of ``fit`` ('lbfgs': its iterations),
            1 after ``partial_fit``, as scikit-learn's.
        """),
        "t_": entry("int", "Training samples seen, as scikit-learn's ``t_``."),
        "loss_": entry("float", """
            Mean training loss of the last epoch (``loss_curve_[-1]``; 'lbfgs': of its
            last iteration), as in scikit-learn.
        """),
        "loss_curve_": entry("list of float", """
            Mean training loss of every epoch, the L2 term included, as scikit-learn's;
            'sgd' and 'adam' only: an 'lbfgs' fit has none (nor ``best_loss_``,
            ``validation_scores_`` and ``best_validation_score_``), as scikit-learn's
            (``optimizer_.train_losses_`` holds its losses).
        """),
        "best_loss_": entry("float or None", """
            The smallest value of ``loss_curve_``; None with ``early_stopping=True``, as
            scikit-learn's.
        """),
        "validation_scores_": entry("list of float or None", f"""
            With ``early_stopping=True``, the validation score ({score}) after every
            epoch; {none}
        """),
        "best_validation_score_": entry("float or None", f"""
            The largest of ``validation_scores_``; {none}
        """),
        **{name: _ATTRIBUTES[name] for name in
           ("n_features_in_", "feature_names_in_", "backend_", "optimizer_")},
    }


# -- fine-tuning estimators (gradient.py) ---------------------------------------------------

GRADIENT: dict[str, Entry] = {
    **COMMON,
    "estimator": entry("estimator or Pipeline", """
        The model to train further: a fitted linear model, logistic regression or MLP,
        or a ``Pipeline`` ending in one. Its preprocessing steps stay frozen; the weights
        of its final step are trained, starting from their fitted values. An estimator
        that is not fitted is first fitted (a clone, with its own ``fit``) on the data of
        the first ``fit`` or ``partial_fit``.
    """),
    "learning_rate": entry("None, float, str or BaseLearningRate", r"""
        None: a constant rate :math:`\min(10^{-3}, 1 / E\|x\|^2)` over the inputs of the
        final step, small enough not to undo the fitted solution. A number :math:`\eta`:
        the constant rate ``LearningRateSGD(eta0=eta, learning_rate='constant')``. A
        string: an alias of :meth:`BaseLearningRate.select` ('sgd', 'adam', 'nesterov',
        'momentum', 'constant', 'invscaling', 'optimal'). An object is used as given. The
        rate applies to every batch's mean gradient.
    """),
    "loss": entry("None, str or BaseLearningLoss", """
        None: the squared error (regressor); the cross-entropy of the graph's
        probabilities (classifier: softmax when the graph ends in one, else the logistic
        loss per score). A string is an alias of :meth:`BaseLearningLoss.select`.
    """),
    "penalty": entry("None, float, str or BaseLearningPenalty", """
        None: no penalty. A number :math:`a`: an L2 decay,
        ``ElasticLearningPenalty(l1=0, l2=a)``. A string: 'none', 'l2', 'l1' or
        'elasticnet' (scikit-learn's with ``alpha=1e-4``), see
        :meth:`BaseLearningPenalty.select`. It applies to the coefficient matrices, not
        to the intercepts.
    """),
    "max_iter": entry("int", """
        Most epochs of ``fit``; ``partial_fit`` runs one per call.
    """),
    "batch_size": entry("int or 'auto'", """
        Rows per mini-batch, 'auto': min(32, n_samples). Each batch takes one step of
        the learning rate along its mean gradient.
    """),
    "tol": entry("float or None", """
        Stopping rule of ``fit``: training stops once the mean training loss has not
        fallen by ``tol`` for ``n_iter_no_change`` epochs in a row; with
        ``early_stopping=True``, once the validation score has not risen by ``tol``.
        None runs ``max_iter`` epochs.
    """),
    "n_iter_no_change": entry("int", """
        Epochs in a row without an improvement of ``tol`` after which ``fit`` stops.
    """),
    "early_stopping": entry("bool", """
        Set ``validation_fraction`` of the rows aside and stop ``fit`` when the
        validation score (``score`` on them) has not improved by ``tol`` for
        ``n_iter_no_change`` epochs; the weights of the last epoch are kept.
        ``partial_fit`` refuses it.
    """),
    "random_state": entry("int, RandomState instance or None", """
        Seeds the permutations of ``shuffle`` and the split of ``early_stopping``. An
        unfitted ``estimator`` is fitted with its own ``random_state``.
    """),
    "warm_start": entry("bool", """
        ``fit`` continues from the weights of the previous call instead of starting
        again from the fitted weights of ``estimator``.
    """),
    "verbose": entry("int", _VERBOSE),
}


def gradient_attributes(classifier: bool) -> dict[str, Entry]:
    """The fitted attributes of ``OnnxGradientClassifier`` (``classifier``) or
    ``OnnxGradientRegressor``."""
    return {
        "estimator_": entry("estimator", """
            A copy of ``estimator`` whose final step has the trained weights: it
            predicts like the trained graph, and ``to_onnx()`` converts it.
        """),
        **({"classes_": entry("ndarray of shape (n_classes,)", """
            The classes of the fitted model (or of ``classes``, or of the first ``y``, for
            an unfitted one); new data may only use them.
        """)} if classifier else {}),
        "n_iter_": entry("int", """
            Epochs run by the last ``fit``; every ``partial_fit`` call adds one.
        """),
        "t_": entry("int", "Training samples seen plus one."),
        "loss_curve_": entry("list of float", """
            Mean training loss (sample-weighted) of every epoch; every ``partial_fit``
            call appends one.
        """),
        "best_loss_": entry("float", "The smallest value of ``loss_curve_``."),
        **_validation_attributes("Absent without early stopping."),
        **{name: _ATTRIBUTES[name] for name in
           ("n_features_in_", "feature_names_in_", "backend_", "optimizer_")},
    }
