"""The GradgenError tree: every error gradgen raises on purpose, each naming the user's line."""

from __future__ import annotations


class GradgenError(Exception):
    """Base of every error gradgen raises on purpose.

    The message starts with the user's ``file.py:line`` when one is known, then says what
    went wrong and what to do about it.
    """

    def __init__(self, message: str, loc=None, hint: str | None = None):
        self.loc = loc
        self.hint = hint
        self.bare_message = message
        text = f"{loc}: {message}" if loc is not None else message
        if hint:
            text = f"{text}; {hint}"
        super().__init__(text)


class UnsupportedOperation(GradgenError):
    """An operation on a traced value that gradgen has no rule for."""


class NonScalarOutput(GradgenError):
    """``grad`` of a function whose output is not a scalar."""


class GuardFailure(GradgenError):
    """A call left the control-flow path the code was traced on."""


class AmbiguousCondition(GradgenError, ValueError):
    """``if x > 0:`` on a traced array of several elements. Also a ValueError, as NumPy's
    own error for it is, so code that catches that one still does."""


class GradientMismatch(GradgenError, AssertionError):
    """A generated gradient disagrees with the symbolic or numerical reference."""


# SciPy's functions are not NumPy's: gradgen has no rows for them (an emitted module imports
# NumPy and math only). Called on traced values they are refused by name (intercept.py, and
# tracer.py for SciPy's ufuncs), with the NumPy spelling of the common ones.
SCIPY_SPELLINGS = {
    "logsumexp": "m = np.max(x, axis=axis, keepdims=True); "
                 "m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))",
    "softmax": "e = np.exp(x - np.max(x, axis=axis, keepdims=True)); "
               "e / np.sum(e, axis=axis, keepdims=True)",
    "log_softmax": "x - (m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))), "
                   "m = np.max(x, axis=axis, keepdims=True)",
    "expit": "0.5 * (1.0 + np.tanh(0.5 * x)), exact and stable at both ends",
    "logit": "np.log(p) - np.log1p(-p)",
    "xlogy": "np.where(x == 0, 0.0, x * np.log(y))",
    "erf": "math.erf(x) on Python floats",
    "erfc": "math.erfc(x) on Python floats",
    "gammaln": "math.lgamma(x) on Python floats",
}


# NumPy functions without a rule that users reach for, with what does have one.
NUMPY_SPELLINGS = {
    "np.linalg.qr": "for least squares use np.linalg.lstsq or np.linalg.solve(A.T @ A, A.T @ b); "
                    "np.linalg.cholesky, eigh and svd have rules",
    "np.linalg.eig": "for a symmetric matrix use np.linalg.eigh (it has a rule)",
    "np.linalg.eigvals": "for a symmetric matrix use np.linalg.eigvalsh (it has a rule)",
}


def numpy_hint(name: str) -> str | None:
    """A hint for a NumPy function without a rule: a spelling that has one, or for np.fft
    (complex values) the real form to write, then the general advice; None for that alone."""
    if name.startswith("np.fft."):
        spelled = ("gradgen differentiates real values; write the transform as real matrix "
                   "products (np.cos and np.sin of 2 * np.pi * np.outer(k, n) / N)")
    else:
        spelled = NUMPY_SPELLINGS.get(name)
    if spelled is None:
        return None
    return (f"{spelled}; or add a rule with gradgen.defvjp (see docs/ops.md) or wrap the code "
            "in a gradgen.Function with a backward")


def scipy_hint(name: str) -> str:
    spelled = SCIPY_SPELLINGS.get(name)
    if spelled:
        return f"write it with NumPy: {spelled}"
    return ("write it with NumPy, add a rule with gradgen.defvjp, or wrap the code in a "
            "gradgen.Function with a backward")
