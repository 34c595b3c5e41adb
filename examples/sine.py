"""The derivative of sin is cos: the rule `grad * cos(x)` made visible."""
import math


def f(x):
    y = math.sin(x)
    return y
