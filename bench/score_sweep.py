"""Held-out scores of the SGD estimators against scikit-learn's over a sweep of settings:
where does ours trail?

For each loss, penalty ('l2', 'l1', 'elasticnet'), ``average`` (False, True) and
``early_stopping`` (False, True), on small datasets that ship with scikit-learn (iris,
wine, breast cancer, digits; diabetes for the regressor) and generated ones (3,000 rows x
20 features, 3 classes; 3,000 x 20 regression), both estimators at their defaults
otherwise fit the same 75% of the rows (standardized; the regression target
standardized too) for each of 3 seeds, both seeded with the split's seed. Prints the
cases where ours trails scikit-learn's mean score the most, and how many trail or lead
by more than 0.02. Not part of ``make bench``: a check of quality, whose counts a person
reads (the changelog cites them).

Usage::

    python bench/score_sweep.py [--losses squared_hinge squared_error ...] [--worst 30]
"""

from __future__ import annotations

import argparse
import itertools
import warnings
from collections.abc import Callable

import numpy as np
from sklearn.datasets import (
    load_breast_cancer,
    load_diabetes,
    load_digits,
    load_iris,
    load_wine,
    make_classification,
    make_regression,
)
from sklearn.linear_model import SGDClassifier, SGDRegressor
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from skl_ortgrad import OnnxSGDClassifier, OnnxSGDRegressor
from skl_ortgrad.estimators.sgd_parameters import CLASSIFICATION_LOSSES, REGRESSION_LOSSES

SEEDS = range(3)
CLASSIFICATION = {
    "iris": lambda: load_iris(return_X_y=True),
    "wine": lambda: load_wine(return_X_y=True),
    "breast cancer": lambda: load_breast_cancer(return_X_y=True),
    "digits": lambda: load_digits(return_X_y=True),
    "generated": lambda: make_classification(3000, 20, n_informative=8, n_classes=3,
                                             random_state=0),
}
REGRESSION = {
    "diabetes": lambda: load_diabetes(return_X_y=True),
    "generated": lambda: make_regression(3000, 20, noise=10, random_state=0),
}


def mean_scores(theirs: type, ours: type, data: Callable, params: dict) -> tuple[float, float]:
    """scikit-learn's and our mean held-out score over :data:`SEEDS`."""
    X, y = data()
    scores = []
    for seed in SEEDS:
        X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25,
                                                            random_state=seed)
        scaler = StandardScaler().fit(X_train)
        X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
        if theirs is SGDRegressor:
            mean, scale = y_train.mean(), y_train.std()
            y_train, y_test = (y_train - mean) / scale, (y_test - mean) / scale
        scores.append([estimator(random_state=seed, **params).fit(X_train, y_train)
                       .score(X_test, y_test) for estimator in (theirs, ours)])
    return tuple(np.mean(scores, axis=0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--losses", nargs="*", default=None,
                        help="the losses swept (default: all of both estimators)")
    parser.add_argument("--worst", type=int, default=30, help="cases printed")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    rows = []
    for theirs, ours, losses, datasets in (
            (SGDClassifier, OnnxSGDClassifier, CLASSIFICATION_LOSSES, CLASSIFICATION),
            (SGDRegressor, OnnxSGDRegressor, REGRESSION_LOSSES, REGRESSION)):
        swept = [loss for loss in losses if args.losses is None or loss in args.losses]
        for loss, penalty, average, early in itertools.product(
                swept, ("l2", "l1", "elasticnet"), (False, True), (False, True)):
            params = {"loss": loss, "penalty": penalty, "average": average,
                      "early_stopping": early}
            for name, data in datasets.items():
                reference, score = mean_scores(theirs, ours, data, params)
                rows.append((score - reference, ours.__name__, name, params, reference,
                             score))
    rows.sort(key=lambda row: row[0])
    print(f"Ours - scikit-learn, mean held-out score over {len(SEEDS)} splits "
          f"(the {args.worst} cases where ours trails most):")
    for gap, estimator, name, params, reference, score in rows[:args.worst]:
        print(f"{gap:+.4f}  {estimator:17s} {name:13s} {params}  scikit-learn "
              f"{reference:.4f}  ours {score:.4f}")
    print(f"{len(rows)} cases: ours trails by more than 0.02 in "
          f"{sum(row[0] < -0.02 for row in rows)}, leads by more than 0.02 in "
          f"{sum(row[0] > 0.02 for row in rows)}.")


if __name__ == "__main__":
    main()
