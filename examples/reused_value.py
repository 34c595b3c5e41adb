"""A value used twice gets the sum of both gradients: dc/dx = 6x, so 12 at x = 2."""


def f(x):
    y = x * x
    a = y + 1
    b = y * 2
    c = a + b
    return c
