"""e = (a + b) * d at a=2, b=3, d=4: de/da = de/db = d = 4 and de/dd = a + b = 5."""


def f(a, b, d):
    c = a + b
    e = c * d
    return e
