"""The rule table, by family. Importing this package registers every op."""

from . import arith, arrays, bindings, core, elementwise, index
from .registry import BOUND, OPS, Domain, Op, defop

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
]
