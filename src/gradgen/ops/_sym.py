"""sympy, imported on first use: only the checker and the tests need it, and it is slow to load."""

import importlib


class _LazySympy:
    def __getattr__(self, name):
        module = importlib.import_module("sympy")
        return getattr(module, name)


sp = _LazySympy()
