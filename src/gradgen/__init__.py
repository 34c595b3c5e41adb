"""gradgen: reverse-mode gradients of Python/NumPy functions, emitted as readable Python."""

from . import inplace  # noqa: F401  (registers in-place writes)
from ._version import __version__
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
from .ops import (  # noqa: F401  (importing a family registers its rows)
    arith,
    arrays,
    bindings,
    convolve,
    core,
    differences,
    elementwise,
    functional,
    index,
    linalg,
    reduce,
    running,
    scipy_special,
    search,
    shape,
    statistics,
)

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
