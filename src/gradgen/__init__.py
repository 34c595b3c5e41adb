"""gradgen: reverse-mode gradients of Python/NumPy functions, emitted as readable Python."""

__version__ = "0.1.0"

from . import ops  # noqa: E402,F401  (registers the rule table)
from .api import emit, grad, trace, value_and_grad  # noqa: E402
from .errors import (  # noqa: E402
    GradgenError,
    GradientMismatch,
    GuardFailure,
    NonScalarOutput,
    UnsupportedOperation,
)

__all__ = ["grad", "value_and_grad", "trace", "emit", "GradgenError", "UnsupportedOperation",
           "NonScalarOutput", "GuardFailure", "GradientMismatch", "__version__"]
