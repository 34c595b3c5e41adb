"""What DoubleTriple.backward receives when only b reaches the loss."""
import numpy as np

import gradgen
from examples.double_triple import DoubleTriple

seen = []


class Recording(DoubleTriple):
    @staticmethod
    def backward(ctx, grad1, grad2):
        seen.append((float(np.asarray(getattr(grad1, "value", grad1))),
                     float(np.asarray(getattr(grad2, "value", grad2)))))
        return grad1 * 2 + grad2 * 3


def f(a):
    b, c = Recording.apply(a)  # noqa: RUF059 - c is unused on purpose
    return b


print("da:", gradgen.grad(f)(3.0))
print("backward received (grad1, grad2):", seen[0])
