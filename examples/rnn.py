"""A tanh recurrent network run over T steps, its states written into a preallocated buffer.

h[t] = tanh(W @ h[t-1] + U @ x[t] + b), written row by row into h = np.zeros((T, n)); the
loss is a squared error on the readout of every state plus a term on the last state.
Gradient with respect to W, U and b (argnums 0,1,2):

    gradgen emit examples/rnn.py:loss --argnums 0,1,2 --args "(0.3 * np.random.default_rng(0).normal(size=(4, 4)), 0.3 * np.random.default_rng(1).normal(size=(4, 2)), np.zeros(4), np.random.default_rng(2).normal(size=(5, 2)), np.random.default_rng(3).normal(size=5))"

In Python: ``gradgen.grad(loss, argnums=(0, 1, 2))(*example_args())``.
"""

import numpy as np


def loss(W, U, b, xs, targets):
    T, n = xs.shape[0], W.shape[0]
    h = np.zeros((T, n))
    prev = np.zeros(n)
    for t in range(T):
        h[t] = np.tanh(W @ prev + U @ xs[t] + b)
        prev = h[t]
    readout = h.sum(axis=1)
    return np.mean((readout - targets) ** 2) + 0.1 * np.sum(h[-1] ** 2)


def example_args(T=5, n=4, d=2):
    """(W, U, b, xs, targets): small random weights and a length-T input sequence."""
    rng = np.random.default_rng(0)
    W = 0.5 * rng.normal(size=(n, n)) / np.sqrt(n)
    U = rng.normal(size=(n, d)) / np.sqrt(d)
    b = np.zeros(n)
    xs = rng.normal(size=(T, d))
    targets = rng.normal(size=T)
    return W, U, b, xs, targets
