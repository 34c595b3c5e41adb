"""The rule table, by family. Importing this package registers every op."""

from . import arith, arrays, bindings, core, elementwise, index, linalg, reduce, shape
from .registry import BOUND, OPS, Domain, Op, defop, route

__all__ = [
    "BOUND",
    "OPS",
    "Domain",
    "Op",
    "arith",
    "arrays",
    "bindings",
    "core",
    "defop",
    "elementwise",
    "index",
    "linalg",
    "reduce",
    "route",
    "shape",
]
