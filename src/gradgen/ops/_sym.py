"""sympy, imported on first use: only the checker and the tests need it, and it is slow to load."""

import functools
import importlib


class _LazySympy:
    def __getattr__(self, name):
        module = importlib.import_module("sympy")
        return getattr(module, name)


sp = _LazySympy()


def locally_constant_floor(x):
    """sympy's floor with derivative 0: true everywhere but at its jumps, where a rule has no
    derivative anyway. sympy leaves d floor/dx unevaluated, which no check can compare."""
    return _locally_constant_floor()(x)


@functools.cache
def _locally_constant_floor():
    class floor(sp.floor):  # prints as floor
        def fdiff(self, argindex=1):
            return sp.S.Zero

    return floor
