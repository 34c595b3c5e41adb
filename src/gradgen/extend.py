"""The public way to teach gradgen a derivative: ``gradgen.defvjp``, one row of the rule table.

    import numpy as np, scipy.special, gradgen

    gradgen.defvjp(
        scipy.special.expit,
        lambda g, ans, x: g * ans * (1 - ans),      # the VJP, written with NumPy on traced values
        sympy=lambda x: 1 / (1 + sympy.exp(-x)),    # optional: lets gradgen.check prove it
        rule_text=("d expit(u)/du = expit(u) * (1 - expit(u))",),
    )

The row is the same record the built-in rows use (``ops/registry.py``): the function itself is
the forward, each VJP builds the backward out of traced operations (so it is differentiated
again for higher order, emitted as readable code, and checked), and the emitted module calls
the function by its importable name (adding the import).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .errors import GradgenError
from .ops.registry import OPS, Domain, Expr, Op, defop, route


def defvjp(fn: Callable, *vjps: Callable | None, name: str | None = None,
           sympy: Callable | None = None, rule_text: tuple[str, ...] = (),
           domain: Domain | None = None, elementwise: bool = False,
           printer: Callable | None = None) -> Op:
    """Register ``fn``'s derivative: ``vjps[i](g, ans, *args, **kwargs)`` returns the
    contribution of the cotangent ``g`` of ``ans = fn(*args, **kwargs)`` to ``args[i]`` (None
    where ``args[i]`` gets no gradient). Write it with NumPy functions and operators on the
    traced values it receives. Keyword arguments of ``fn`` reach the VJPs as they were given.

    ``name`` names the row (default: the function's name); ``sympy`` is fn's meaning on sympy
    symbols, used by ``gradgen.check`` to prove gradients; ``printer`` (node, arg_exprs) ->
    Expr overrides how the emitted module spells the call. Returns the row."""
    if not callable(fn):
        raise GradgenError(f"defvjp needs a function, not {type(fn).__name__}")
    if not vjps:
        raise GradgenError(f"defvjp({_spelling(fn)}) needs one VJP per positional argument")
    if "<locals>" in (getattr(fn, "__qualname__", "") or ""):
        raise GradgenError(f"defvjp({fn.__qualname__}): the emitted module must be able to "
                           "import the function; define it at module level")
    name = name or getattr(fn, "__name__", None) or "user_op"
    if name in OPS:
        name = f"{name}_{len(OPS)}"  # a user row never replaces a built-in one
    spelling, module = _spelling(fn), _import_of(fn)
    op = defop(
        name, fn, printer or _call_printer(spelling), vjp=tuple(vjps), sympy=sympy,
        domain=domain, rule_text=tuple(rule_text) or tuple(
            f"user rule for {spelling} (argument {i})" for i in range(len(vjps))),
        elementwise=elementwise, extra={"import": module, "user": True})

    def call(*args, **kwargs):
        return op(*args, **_hashable(kwargs))

    call.__name__ = name
    call.__wrapped__ = fn
    route(fn, call, name, called=spelling)
    return op


def _hashable(kwargs: dict) -> dict:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()}


def _spelling(fn) -> str:
    """How the emitted module calls ``fn``: np.foo, math.foo, or module.foo."""
    module = getattr(fn, "__module__", None) or ""
    qualname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
    if isinstance(fn, np.ufunc) or module.startswith("numpy"):
        sub = module.removeprefix("numpy").strip(".").split(".")[0]
        if sub in ("linalg", "fft"):
            return f"np.{sub}.{fn.__name__}"
        return f"np.{fn.__name__}"
    if module in ("math", "builtins"):
        return f"{module}.{qualname}" if module == "math" else qualname
    return f"{module}.{qualname}" if module else qualname


def _import_of(fn) -> str | None:
    """The module the emitted code must import to call ``fn`` (None: numpy, math, builtins)."""
    spelling = _spelling(fn)
    if "." not in spelling or spelling.startswith(("np.", "math.")):
        return None
    return spelling.rsplit(".", 1)[0]


def _call_printer(spelling: str):
    def print_call(node, args):
        parts = [a.text for a in args]
        parts += [f"{k}={v!r}" for k, v in node.attrs.items()]
        return Expr(f"{spelling}({', '.join(parts)})")

    return print_call
