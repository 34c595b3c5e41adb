"""Negative log-likelihood of 1-D data under a Gaussian mixture with K components.

Components are parametrized by means, log standard deviations and unnormalized mixture
logits. Both log-sum-exps (the log-softmax of the weights and the sum over components) are
written out by hand with the max shift. Gradient with respect to means, log_sigmas and
logits (argnums 0,1,2):

    gradgen emit examples/gmm.py:nll --argnums 0,1,2 --args "(np.array([-1.0, 0.5, 2.0]), np.zeros(3), np.zeros(3), np.random.default_rng(0).normal(size=10))"

In Python: ``gradgen.grad(nll, argnums=(0, 1, 2))(*example_args())``.
"""

import numpy as np


def nll(means, log_sigmas, logits, x):
    log_w = logits - np.max(logits)
    log_w = log_w - np.log(np.sum(np.exp(log_w)))
    z = (x[:, None] - means) / np.exp(log_sigmas)  # (N, K)
    log_p = log_w - 0.5 * z ** 2 - log_sigmas - 0.5 * np.log(2 * np.pi)
    m = np.max(log_p, axis=1, keepdims=True)
    log_lik = m[:, 0] + np.log(np.sum(np.exp(log_p - m), axis=1))
    return -np.sum(log_lik)


def example_args(n=10, k=3):
    """(means, log_sigmas, logits, x): data drawn from a 3-component mixture."""
    rng = np.random.default_rng(0)
    centers = np.array([-2.0, 0.0, 3.0])[:k]
    x = centers[rng.integers(0, k, size=n)] + 0.5 * rng.normal(size=n)
    means = np.linspace(-1.0, 1.0, k)
    return means, np.zeros(k), np.zeros(k), x
