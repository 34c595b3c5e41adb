"""Second derivatives: reverse mode over the backward graph, emitted as one flat function."""
import math

import gradgen


def f(x):
    y = math.sin(x) * x
    return y


d2f = gradgen.hessian(f)
print("f''(0.5) =", d2f(0.5))
print(d2f.source)
