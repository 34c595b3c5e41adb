"""The Rosenbrock function in n dimensions, vectorized with x[1:] and x[:-1].

Its minimum is 0 at x = (1, ..., 1); the gradient has the classic banded form:

    gradgen emit examples/rosenbrock.py:rosenbrock --args "(np.linspace(-1.0, 1.5, 6),)"

In Python: ``gradgen.grad(rosenbrock)(*example_args())``.
"""

import numpy as np


def rosenbrock(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def example_args(n=6):
    """(x,): a point away from the minimum."""
    rng = np.random.default_rng(0)
    return (rng.uniform(-1.5, 1.5, size=n),)
