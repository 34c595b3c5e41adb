"""y.backward(gradient) for a vector y is a vector-Jacobian product."""
import numpy as np

import gradgen
from examples.mm import f

x = np.array([[2.0, 1.0]])
M = np.array([[1.0, 2.0], [3.0, 4.0]])
y, pullback = gradgen.vjp(f, x, M)
print("y =", y)
for cotangent in ([[1.0, 0.0]], [[0.0, 1.0]], [[1.0, 1.0]]):
    grad_x, grad_M = pullback(np.array(cotangent))
    print(f"cotangent {cotangent} -> grad_x {grad_x.tolist()}")
