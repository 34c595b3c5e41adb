"""Targets: how an emitted module spells literals, each op, each write and each guard, for
NumPy (the default) and for the Python array API standard (through ``array_api_compat``).

The emitter asks a per-function *scope* of its dialect for every piece of text that depends
on the target; nothing else in emit.py knows which library the module runs on. An op's
array-API form is its row's ``xp`` printer when the spelling differs from NumPy's (a printer,
or a string saying why the standard has no form for it); otherwise it is derived from the
row's NumPy printer by renaming its ``np.`` calls through ``STANDARD_NAMES``, and a call the
table does not know is refused at emit time, naming the user's line and the call.
"""

from __future__ import annotations

import re

import numpy as np

from .errors import GradgenError, UnsupportedOperation
from .ir import Aval, Node
from .ops.core import _nested, _scalar_text, literal
from .ops.registry import PREC_ATOM, Expr, string_literal

TARGETS = ("numpy", "array-api")
ARRAY_LITERAL_LIMIT = 6  # elements; larger constant arrays become module-level names

# NumPy's spelling -> the array API's, for calls whose arguments mean the same in both.
_SAME = """
    abs acos acosh all any argmax argmin argsort asarray asin asinh atan atan2 atanh
    broadcast_to ceil clip copysign cos cosh count_nonzero exp expm1 floor hypot isfinite isinf
    isnan log log10 log1p log2 logaddexp logical_and logical_not logical_or logical_xor matmul
    max maximum mean min minimum prod repeat roll round searchsorted sign signbit sin sinh sort
    sqrt square stack sum take_along_axis tan tanh tensordot tile trunc where
    linalg.cholesky linalg.det linalg.eigh linalg.eigvalsh linalg.inv linalg.pinv
    linalg.slogdet linalg.solve linalg.svd
    float32 float64 int32 int64 bool
"""
STANDARD_NAMES = {name: f"xp.{name}" for name in _SAME.split()} | {
    "arccos": "xp.acos", "arccosh": "xp.acosh", "arcsin": "xp.asin", "arcsinh": "xp.asinh",
    "arctan": "xp.atan", "arctanh": "xp.atanh", "arctan2": "xp.atan2", "power": "xp.pow",
    "fabs": "xp.abs", "concatenate": "xp.concat", "outer": "xp.linalg.outer",
    "cross": "xp.linalg.cross", "bool_": "xp.bool", "pi": "math.pi", "e": "math.e",
    # array_api_extra writes these from standard operations, on every library
    "sinc": "xpx.sinc", "deg2rad": "xpx.deg2rad",
    "rad2deg": "xpx.rad2deg", "kron": "xpx.kron",
}
_NP_NAME = re.compile(r"\bnp\.((?:linalg\.)?[A-Za-z_][A-Za-z_0-9]*)")


class NumpyScope:
    """Today's module: NumPy calls, in-place writes into buffers the module owns."""

    target = "numpy"
    rows_as_written = True  # ``expr`` is the row's own printer: the emitter calls it directly

    def __init__(self, spec, graph):
        self.spec = spec

    def expr(self, node: Node, args) -> Expr:
        return node.op.printer(node, args)

    def literal(self, value, constants) -> Expr:
        if isinstance(value, np.ndarray) and value.size > ARRAY_LITERAL_LIMIT and not (
                value == value.flat[0]).all() and literal(value).text.startswith("np.array("):
            return Expr(constants.name_for(value))  # too large to inline: a module constant
        return literal(value)

    def write(self, node, args, name: str, fresh: bool, old: Expr) -> tuple[str, str]:
        """(prelude, statement) for ``a[i] = v``: copy first unless the old array is dead."""
        base = node.inputs[0].node
        prelude = ""
        if name != old.text:
            prelude = f"{name} = {old.text if fresh else _copied(old, base)}"
        return prelude, node.op.extra["statement"](node, args, name)

    def truth(self, cond: Expr, node: Node, written: str) -> Expr:
        return cond

    def all_finite(self, name: str, node: Node) -> str:
        if node.aval.py is not None and node.aval.is_float:
            return f"math.isfinite({name})"
        return f"np.isfinite({name}).all()"

    def converted(self, text: str, wrapper: str | None, node: Node) -> str:
        return f"{wrapper}({text})" if wrapper else text

    def preamble(self, code: str) -> list[str]:
        return []


def _copied(expr: Expr, node: Node) -> str:
    if node.aval.shape == ():
        return f"np.array({expr.text})"
    return f"{expr.at(PREC_ATOM - 1)}.copy()"


class ArrayApiScope:
    """The same function against the array API standard: ``xp`` from the arguments, dtypes and
    devices from the arguments, functional writes (``array_api_extra.at``)."""

    target = "array-api"
    rows_as_written = False

    def __init__(self, spec, graph):
        self.spec = spec
        self.arrays: list[tuple[str, Aval]] = []  # (expression, aval) of each array argument
        seen_args = set()
        for node in graph.inputs:
            index = node.attrs["index"]
            if node.aval.py is not None:
                continue
            if index in spec.unpack:
                root = spec.unpack[index].split("[", 1)[0]
                if root in seen_args:  # one leaf per dict/list argument is enough for xp
                    continue
                seen_args.add(root)
                self.arrays.append((spec.unpack[index], node.aval))
            else:
                name = spec.input_names.get(index) or spec.params[index]
                self.arrays.append((name, node.aval))
        self.plain = [(text, aval) for text, aval in self.arrays if "[" not in text]
        self.loc = next((n.loc for n in graph.nodes if n.loc is not None), None)

    # --- what every allocation needs: the dtype and the device of the caller's arrays ---------

    def dtype(self, dtype: np.dtype) -> str:
        dtype = np.dtype(dtype)
        if dtype.kind == "f":
            for text, aval in self.plain:
                if aval.dtype == dtype:
                    return f"{text}.dtype"
        return "xp.bool" if dtype.kind == "b" else f"xp.{dtype.name}"

    def device(self) -> str:
        return f"device=device({self._like()})"

    def _like(self) -> str:
        if not self.arrays:
            raise UnsupportedOperation(
                f"{self.spec.name}: the array-API target takes the array namespace, dtype and "
                "device from an array argument, and this function has none",
                self.loc, "pass at least one argument as an array, or use target='numpy'")
        return (self.plain or self.arrays)[0][0]  # a plain argument reads best: device(X)

    def allocate(self, fn: str, shape, dtype, *extra: str) -> str:
        parts = [repr(tuple(shape)), *extra, f"dtype={self.dtype(dtype)}", self.device()]
        return f"xp.{fn}({', '.join(parts)})"

    # --- the hooks the emitter calls --------------------------------------------------------

    def expr(self, node: Node, args) -> Expr:
        form = node.op.xp
        if callable(form):
            return form(node, args, self)
        if isinstance(form, str):
            refuse(node, form)
        expr = node.op.printer(node, args)
        if getattr(node.op.printer, "numpy_method", False):
            refuse(node, f"the {node.op.name} row prints a NumPy method and has no xp form")
        return Expr(standard_text(expr.text, node), expr.prec, expr.neg, expr.terms)

    def literal(self, value, constants) -> Expr:
        if isinstance(value, np.ndarray):
            return Expr(self.array_literal(value, constants))
        if isinstance(value, np.generic):  # a NumPy scalar: a 0-d array of the caller's library
            return Expr(f"xp.asarray({_scalar_text(value.item())}, "
                        f"dtype={self.dtype(value.dtype)})")
        return literal(value)

    def array_literal(self, value: np.ndarray, constants=None) -> str:
        if value.ndim == 0:
            return f"xp.asarray({_scalar_text(value.item())}, dtype={self.dtype(value.dtype)})"
        if value.size > 1 and (value == value.flat[0]).all():
            fill = value.flat[0]
            if fill == 0:
                return self.allocate("zeros", value.shape, value.dtype)
            if fill == 1:
                return self.allocate("ones", value.shape, value.dtype)
            return self.allocate("full", value.shape, value.dtype, _scalar_text(fill.item()))
        if (value.ndim == 1 and value.dtype.kind in "iu"
                and (value == np.arange(value.size)).all()):
            return (f"xp.arange({value.size}, dtype={self.dtype(value.dtype)}, "
                    f"{self.device()})")
        body = _nested(value)
        if constants is not None and value.size > ARRAY_LITERAL_LIMIT:
            body = constants.name_for_list(value)
        return f"xp.asarray({body}, dtype={self.dtype(value.dtype)}, {self.device()})"

    def write(self, node, args, name: str, fresh: bool, old: Expr) -> tuple[str, str]:
        form = node.op.xp
        if isinstance(form, str) or not callable(form):
            refuse(node, form or f"{node.op.name} has no array-API form")
        prelude = ""
        if getattr(form, "pads_zeros", lambda node: False)(node):
            return "", f"{name} = {form(node, args, self, old, fresh)}"
        if fresh and name != old.text:  # a new buffer (zeros): allocated, then written into
            prelude, old = f"{name} = {old.text}", Expr(name)
        return prelude, f"{name} = {form(node, args, self, old, fresh)}"

    def truth(self, cond: Expr, node: Node, written: str) -> Expr:
        if node.inputs[0].aval.py is not None:  # a Python bool: no array involved
            return cond
        where = f"{node.loc}: " if node.loc is not None else ""
        return Expr(f"_concrete({cond.text}, {string_literal(where + written)})")

    def all_finite(self, name: str, node: Node) -> str:
        if node.aval.py is not None and node.aval.is_float:
            return f"math.isfinite({name})"
        return f"bool(xp.all(xp.isfinite({name})))"

    def converted(self, text: str, wrapper: str | None, node: Node) -> str:
        if wrapper == "np.asarray":  # a 0-d gradient of a 0-d array argument
            return f"xp.asarray({text}, dtype={self.dtype(node.aval.dtype)})"
        return f"{wrapper}({text})" if wrapper else text

    def preamble(self, code: str) -> list[str]:
        if not re.search(r"\bxp\.", code):
            return []
        self._like()
        arrays = ", ".join(text for text, _ in self.arrays)
        return [f"xp = array_namespace({arrays})"]


def standard_text(text: str, node: Node) -> str:
    """NumPy call names in a printed expression renamed to the array API's; args are already
    printed for the array API, so every ``np.`` left in the text is the row's own call."""

    def rename(match):
        name = match.group(1)
        spelled = STANDARD_NAMES.get(name)
        if spelled is None:
            refuse(node, f"np.{name} has no equivalent in the array API standard")
        return spelled

    return _NP_NAME.sub(rename, text)


def refuse(node: Node, reason: str):
    raise UnsupportedOperation(
        f"{reason}, so target='array-api' cannot write this line", node.loc,
        "rewrite it with standard array operations, or use target='numpy'")


SCOPES = {"numpy": NumpyScope, "array-api": ArrayApiScope}


def check_target(target: str) -> str:
    if target not in SCOPES:
        raise GradgenError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}")
    return target


# --- what an array-API module defines for its guards -----------------------------------------

CONCRETE_CLASS = '''class GuardNeedsValue(TypeError):
    """Raised when a guard's condition has no concrete value (a jax.jit tracer)."""'''

CONCRETE_HELPER = '''def _concrete(condition, guard):
    """The truth of a guard's condition; under jax.jit it is traced and has none."""
    try:
        return bool(condition)
    except TypeError as error:
        raise GuardNeedsValue(
            f"{guard}: this guard needs a concrete value, but it is traced (jax.jit?); "
            "call the module outside jit, or make that argument static"
        ) from error'''
