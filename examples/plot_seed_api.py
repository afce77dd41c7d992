"""
The engine underneath: forward, backward and gradient graphs
============================================================

The estimators are built on the training API of onnxcustom (see "Coming from
onnxcustom" in the documentation): an ONNX model and the names of its weights become a
function with ``forward`` and ``backward``
(:class:`~skl_ortgrad.gradient.forward_backward.OrtGradientForwardBackward`),
:func:`~skl_ortgrad.gradient.derivative.onnx_derivative` writes the gradient graph
itself, and
:class:`~skl_ortgrad.training.optimizers_partial.OrtGradientForwardBackwardOptimizer`
trains any such model. Each takes ``backend``: both gradient backends give the same
numbers.
"""

import matplotlib.pyplot as plt
import numpy as np
from onnxruntime import InferenceSession
from skl2onnx import to_onnx
from sklearn.linear_model import LinearRegression

from skl_ortgrad.gradient import resolve_backend
from skl_ortgrad.training.grad_helper import DerivativeOptions, onnx_derivative
from skl_ortgrad.training.optimizers_partial import OrtGradientForwardBackwardOptimizer
from skl_ortgrad.training.ortgradient import OrtGradientForwardBackward
from skl_ortgrad.utils.orttraining_helper import add_loss_output

rng = np.random.RandomState(0)
X = rng.randn(200, 3).astype(np.float32)
y = (X @ np.array([1.0, -2.0, 0.5]) + 0.3).astype(np.float32)
onx = to_onnx(LinearRegression().fit(X[:5], y[:5] * 0), X[:1], target_opset=21,
              black_op={"LinearRegressor"})
print("'auto' means the backend", repr(resolve_backend("auto")), "here")

# %%
# Forward and backward
# --------------------
# ``backward`` receives the gradient of a loss with respect to the outputs and returns
# the gradients of the inputs, then of the weights (``grad_names``): here of the squared
# error, 2 (prediction - y).

engine = OrtGradientForwardBackward(onx, ["coef", "intercept"], backend="onnx")
function = engine.new_instance()
coef, intercept = engine.get_initializer("coef"), engine.get_initializer("intercept")
prediction = function.forward([X, coef, intercept], training=True)[0].numpy()
gradients = function.backward([2 * (prediction - y.reshape(-1, 1))])
print(engine.cls_type_.grad_names)
print("d loss / d coef:", gradients[1].numpy().ravel())

# %%
# The gradient graph of a model with its loss
# -------------------------------------------

with_loss = add_loss_output(onx)
graph = onnx_derivative(with_loss, weights=["coef", "intercept"], inputs=[],
                        options=DerivativeOptions.Loss | DerivativeOptions.KeepOutputs)
session = InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])
loss, coef_grad, _ = session.run(None, {"X": X, "label": y.reshape(-1, 1), "coef": coef,
                                        "intercept": intercept})
print("loss", loss.ravel(), "same gradient:", np.allclose(coef_grad, gradients[1].numpy()))

# %%
# Training any ONNX model
# -----------------------

optimizer = OrtGradientForwardBackwardOptimizer(onx, ["coef", "intercept"], max_iter=15,
                                                batch_size=16, learning_rate=0.05)
optimizer.fit(X, y)
print("trained weights (get_state):", [w.ravel() for w in optimizer.get_state()])
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(np.arange(1, 16), optimizer.train_losses_, marker="o")
ax.set_yscale("log")
ax.set_xlabel("epoch")
ax.set_ylabel("mean training loss")
ax.set_title("OrtGradientForwardBackwardOptimizer on a linear model")
fig.tight_layout()
plt.show()
