"""The rule table: the registry's names. The families (arith, elementwise, reduce, ...) each
register their rows when imported; gradgen/__init__.py imports them all, and nothing else
does, so that the tracer can sit between the registry and the families (tests/test_layering.py).
"""

from .registry import BOUND, OPS, Domain, Op, defop, route

__all__ = ["BOUND", "OPS", "Domain", "Op", "defop", "route"]
