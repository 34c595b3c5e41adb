"""A two-layer perceptron classifier: tanh hidden layer, softmax cross-entropy.

The parameters are one dict {"W1", "b1", "W2", "b2"}; the gradient is a dict of the same
shape. The log-softmax subtracts the row maximum first (the usual overflow guard), and the
labels are integers picking one log-probability per row:

    gradgen emit examples/mlp.py:loss --args "({'W1': np.random.default_rng(0).normal(size=(4, 5)), 'b1': np.zeros(5), 'W2': np.random.default_rng(1).normal(size=(5, 3)), 'b2': np.zeros(3)}, np.random.default_rng(2).normal(size=(6, 4)), np.array([0, 1, 2, 0, 1, 2]))"

In Python: ``gradgen.grad(loss)(*example_args())``.
"""

import numpy as np


def loss(params, X, y):
    h = np.tanh(X @ params["W1"] + params["b1"])
    logits = h @ params["W2"] + params["b2"]
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    logp = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    n = X.shape[0]
    return -np.mean(logp[np.arange(n), y])


def init_params(rng, n_in, n_hidden, n_out):
    return {
        "W1": rng.normal(size=(n_in, n_hidden)) / np.sqrt(n_in),
        "b1": np.zeros(n_hidden),
        "W2": rng.normal(size=(n_hidden, n_out)) / np.sqrt(n_hidden),
        "b2": np.zeros(n_out),
    }


def example_args(n=6, n_in=4, n_hidden=5, n_out=3):
    """(params, X, y): a small random batch with integer labels."""
    rng = np.random.default_rng(0)
    params = init_params(rng, n_in, n_hidden, n_out)
    X = rng.normal(size=(n, n_in))
    y = rng.integers(0, n_out, size=n)
    return params, X, y
