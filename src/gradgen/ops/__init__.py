"""The rule table, by family. Importing this package registers every op."""

from . import arith, arrays, bindings, core, elementwise
from .registry import BOUND, OPS, Domain, Op, defop

__all__ = ["OPS", "BOUND", "Op", "Domain", "defop", "arith", "arrays", "bindings", "core",
           "elementwise"]
