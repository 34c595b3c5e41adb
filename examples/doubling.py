"""A value-dependent while loop: double a vector until its norm passes 1000, then sum it.
Each loop test becomes a guard; the gradient is 2 ** (number of doublings + 1) everywhere."""
import numpy as np


def f(x):
    y = x * 2
    while np.linalg.norm(y) < 1000:
        y = y * 2
    return np.sum(y)
