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


def extreme(kind: str, *xs):
    """max or min (``kind``) of many sympy values, with tied extremes sharing the derivative
    equally (JAX's convention, the rule's). sympy's own Max/Min canonicalize their arguments
    pairwise and differentiate through Heaviside functions: a 5x4 softmax's check spent
    minutes there, and a three-way tie came out as 1/2 each, not 1/3."""
    return _extremes()[kind](*xs)


def _reduce_numeric(kind, xs):
    import numpy as np

    return functools.reduce(np.maximum if kind == "max" else np.minimum, xs)


def _share_numeric(kind, k, *xs):
    """d extreme(xs)/d xs[k] on numbers (or arrays, elementwise): 1/count at the extremes."""
    import numpy as np

    top = _reduce_numeric(kind, xs)
    count = sum(np.asarray(x == top, dtype=float) for x in xs)
    return np.asarray(xs[int(k)] == top, dtype=float) / count


@functools.cache
def _extremes():
    def numbers(xs):
        return all(getattr(x, "is_Number", False) for x in xs)

    class gg_extreme_share(sp.Function):  # lowercase: lambdify prints it as a call
        """d extreme/d xs[k]: locally constant, so its own derivative is 0."""

        _imp_ = staticmethod(lambda kind, k, *xs: _share_numeric(
            "max" if kind > 0 else "min", k, *xs))

        @classmethod
        def eval(cls, kind, k, *xs):
            if numbers(xs):
                extreme_ = max(xs) if kind > 0 else min(xs)
                ties = sum(1 for x in xs if x == extreme_)
                return sp.Integer(1 if xs[int(k)] == extreme_ else 0) / ties
            return None

        def fdiff(self, argindex=1):
            return sp.S.Zero

    def make(kind, sign):
        def eval(cls, *xs):
            if len(xs) == 1:
                return xs[0]
            if numbers(xs):
                return max(xs) if kind == "max" else min(xs)
            return None

        def fdiff(self, argindex=1):
            return gg_extreme_share(sign, argindex - 1, *self.args)

        return type(f"gg_{kind}", (sp.Function,), {
            "eval": classmethod(eval), "fdiff": fdiff,
            "_imp_": staticmethod(lambda *xs: _reduce_numeric(kind, xs))})

    return {"max": make("max", 1), "min": make("min", -1)}
