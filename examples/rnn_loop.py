"""A tanh RNN whose state is carried from step to step over a 100-step sequence.

The loop stays a loop in the emitted gradient: a forward ``for t in range(100):`` that keeps
the states the backward needs (``U @ xs[t]`` for every step is one product before it), and a
``for t in reversed(range(100)):`` that carries grad_h back and stores each step's share;
grad_W and grad_U are then one matrix product each, whatever the sequence length:

    gradgen emit examples/rnn_loop.py:loss --argnums 0,1 --args "(np.full((3, 3), 0.1), np.full((3, 2), 0.2), np.linspace(-1, 1, 200).reshape(100, 2), np.zeros(3))"
"""

import numpy as np


def loss(W, U, xs, h0):
    h = h0
    for t in range(xs.shape[0]):
        h = np.tanh(W @ h + U @ xs[t])
    return np.sum(h * h)
