"""z = x*x + 3: dz/dx = 2x, so 4 at x = 2."""


def f(x):
    y = x * x
    z = y + 3
    return z
