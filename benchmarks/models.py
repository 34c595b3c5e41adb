"""The benchmark workloads that are not among examples/: plain user code, written the way a
person writes it (the other four are examples/logistic_regression.py, mlp.py, rosenbrock.py
and the 200-op benchmarks/math200.py).

This file holds user functions only, like a user's model file, so that gradgen's first call
reads a file of ordinary size. The hand-written gradients are in benchmarks/workloads.py.
"""

import math

import numpy as np


def scalar_loop(x, y, z):
    """200 scalar ``math`` ops: 20 steps of a 10-op body."""
    h = x
    for _ in range(20):
        a = math.sin(h) * y + z
        b = math.exp(-0.5 * a * a)
        h = h + math.tanh(h * b + a)
    return h


def chain(x):
    """20 NumPy ufuncs on one array, then a sum."""
    s = np.sin(x)
    e = np.exp(s)
    u = np.tanh(s * e) + x
    c = np.cos(u)
    r = np.sqrt(c * c + 1.0)
    q = np.log(r) * x
    a = np.arctan(q) - e
    w = np.exp(-(a * a)) / r
    v = np.log1p(w) * u
    return np.sum(np.square(v))


def rnn(W, U, xs, target):
    """A tanh RNN over a Python loop; the loss is on the last state."""
    h = np.zeros(W.shape[0])
    for t in range(xs.shape[0]):
        h = np.tanh(W @ h + U @ xs[t])
    return 0.5 * np.sum((h - target) ** 2)
