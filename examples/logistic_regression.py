"""L2-regularized logistic regression: the mean log-loss of labels y in {-1, +1}.

log(1 + exp(-margin)) is written as np.logaddexp(0, -margin), which never overflows.
Gradient with respect to the weights w and the bias b (argnums 0,1):

    gradgen emit examples/logistic_regression.py:loss --argnums 0,1 --args "(np.zeros(3), 0.0, np.random.default_rng(0).normal(size=(8, 3)), np.sign(np.random.default_rng(1).normal(size=8)))"

In Python: ``gradgen.grad(loss, argnums=(0, 1))(*example_args())``.
"""

import numpy as np


def loss(w, b, X, y, lam=0.01):
    margin = y * (X @ w + b)
    data = np.mean(np.logaddexp(0, -margin))
    return data + 0.5 * lam * np.sum(w * w)


def example_args(n=8, d=3):
    """(w, b, X, y): small random data with labels in {-1, +1}."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    y = np.where(X @ rng.normal(size=d) + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    w = 0.1 * rng.normal(size=d)
    return w, 0.0, X, y
