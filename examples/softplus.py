"""log(1 + exp(x)) overflows for large x: check_finite names the line whose derivative breaks."""
import numpy as np


def f(x):
    y = np.log(1 + np.exp(x))
    return np.sum(y)
