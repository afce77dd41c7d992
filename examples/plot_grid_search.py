"""
Grid search over the learning rate
==================================

The training objects are scikit-learn style objects with ``get_params`` and
``set_params``: once a :class:`~skl_ortgrad.LearningRateSGD` is passed as
``learning_rate``, a grid search reaches its parameters with the nested name
``learning_rate__eta0``, and in a :class:`~sklearn.pipeline.Pipeline` with
``onnxsgdregressor__learning_rate__eta0``.
"""

import matplotlib.pyplot as plt
import pandas as pd
from sklearn.datasets import make_regression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skl_ortgrad import LearningRateSGD, OnnxSGDRegressor

X, y = make_regression(n_samples=600, n_features=8, noise=10.0, random_state=0)
y = y / y.std()

pipe = make_pipeline(
    StandardScaler(),
    OnnxSGDRegressor(
        learning_rate=LearningRateSGD(learning_rate="constant"), max_iter=30, tol=None,
        random_state=0,
    ),
)
grid = {"onnxsgdregressor__learning_rate__eta0": [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1]}
search = GridSearchCV(pipe, grid, cv=3).fit(X, y)
print("best parameters:", search.best_params_)
print(f"best cross-validated R²: {search.best_score_:.4f}")
best_rate = search.best_estimator_[-1].learning_rate
print("the fitted pipeline's rate object:", best_rate)

# %%
# The scores of the grid
# ----------------------
# Too small a constant rate leaves the model under-trained after 30 epochs; from about
# ``1e-2`` on, every rate reaches the least-squares solution. The table below the figure
# gives each rate's mean cross-validated R², its standard deviation over the 3 folds, and
# its rank.

results = pd.DataFrame(search.cv_results_)
etas = results["param_onnxsgdregressor__learning_rate__eta0"].astype(float)
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.errorbar(etas, results["mean_test_score"], yerr=results["std_test_score"], marker="o")
ax.set_xscale("log")
ax.set_xlabel("learning_rate__eta0 (constant rate)")
ax.set_ylabel("mean cross-validated R²")
ax.set_title("GridSearchCV over LearningRateSGD(learning_rate='constant')")
ax.axvline(search.best_params_["onnxsgdregressor__learning_rate__eta0"], color="C2",
           linestyle=":", label="best")
ax.legend()
fig.tight_layout()
table = pd.DataFrame({
    "eta0": etas,
    "mean R² (3 folds)": results["mean_test_score"].round(4),
    "std": results["std_test_score"].round(4),
    "rank": results["rank_test_score"],
})
print(table.to_string(index=False))
plt.show()
