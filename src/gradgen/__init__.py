"""gradgen: reverse-mode gradients of Python/NumPy functions, emitted as readable Python."""

__version__ = "0.1.0"

from . import inplace, ops  # noqa: F401  (registers the rule table and in-place writes)
from .api import emit, explain, grad, hessian, jacobian, trace, value_and_grad, vjp
from .check import CheckReport, check
from .errors import (
    GradgenError,
    GradientMismatch,
    GuardFailure,
    NonScalarOutput,
    UnsupportedOperation,
)
from .extend import defvjp
from .function import Function

__all__ = [
    "CheckReport",
    "Function",
    "GradgenError",
    "GradientMismatch",
    "GuardFailure",
    "NonScalarOutput",
    "UnsupportedOperation",
    "__version__",
    "check",
    "defvjp",
    "emit",
    "explain",
    "grad",
    "hessian",
    "jacobian",
    "trace",
    "value_and_grad",
    "vjp",
]
