"""The op record and the one table of ops: ``defop`` registers a row and returns its builder."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..abstract import elementwise as elementwise_abstract

# Python operator precedence, as the printer needs it (higher binds tighter).
PREC_COMPARE, PREC_ADD, PREC_MUL, PREC_UNARY, PREC_POW, PREC_ATOM = 5, 10, 11, 12, 13, 16


class Expr:
    """A printed expression and the precedence of its outermost operator.

    ``neg``, when set, is an expression whose negation this one is *exactly* (``-g * c`` is
    ``-(g * c)`` bit for bit), so sums can print ``a - g * c`` instead of ``a + -g * c``.
    ``terms`` keeps the operands of a printed sum, for wrapping a long one over lines.

    A value, never changed once made; a plain slotted class rather than a frozen dataclass
    because the emitter makes several per node and a frozen one costs four times as much."""

    __slots__ = ("neg", "prec", "terms", "text")

    def __init__(self, text: str, prec: int = PREC_ATOM, neg: Expr | None = None,
                 terms: tuple[str, ...] = ()):
        self.text, self.prec, self.neg, self.terms = text, prec, neg, terms

    def __repr__(self) -> str:
        return f"Expr({self.text!r}, {self.prec})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Expr) and (self.text, self.prec, self.neg, self.terms) == (
            other.text, other.prec, other.neg, other.terms)

    def __hash__(self) -> int:
        return hash((self.text, self.prec))

    def at(self, prec: int) -> str:
        """The text, parenthesised if it binds looser than ``prec``."""
        return self.text if self.prec >= prec else f"({self.text})"


class MadeExpr(Expr):
    """An Expr whose fields are stored one by one: calling it runs no Python ``__init__``
    (CPython calls a class with one through a slow path) and no ``object.__new__``
    wrapper (which packs its arguments into a tuple first). The printers the emitter runs
    per node, and the emitter per statement, make theirs this way: a third of what
    ``Expr(...)`` costs (callgrind)."""

    __slots__ = ()
    __init__ = object.__init__


def new_expr(text: str, prec: int = PREC_ATOM, neg: Expr | None = None,
             terms: tuple[str, ...] = ()) -> Expr:
    """``Expr(text, prec, neg, terms)``, made as a ``MadeExpr``."""
    expr = MadeExpr()
    expr.text = text
    expr.prec = prec
    expr.neg = neg
    expr.terms = terms
    return expr


_NONZERO_NUMBER = re.compile(r"-?(?=[0-9.]*[1-9])[0-9]+(\.[0-9]*)?(e[+-]?[0-9]+)?")
_SIMPLE_POWER_OPERAND = re.compile(r"-?([A-Za-z_][A-Za-z_0-9.]*|[0-9][0-9.e+\-]*)")


def sum_expr(first: Expr, rest, commute: bool = False) -> Expr:
    """``a + b - c ...``: a negated term is subtracted instead of added (exact in IEEE). With
    ``commute`` (the backward; the forward keeps the user's order), a negated first term
    trades places with a second that is not: ``-u * v + w`` is ``w - u * v`` bit for bit
    (one addition commutes), and an array saves the negation."""
    rest = list(rest)
    if commute and first.neg is not None and rest and rest[0].neg is None:
        first, rest[0] = rest[0], first
    terms = [first.at(PREC_ADD)]
    for term in rest:
        if term.neg is not None:
            terms.append(f"- {term.neg.at(PREC_ADD + 1)}")
        else:
            terms.append(f"+ {term.at(PREC_ADD + 1)}")
    return new_expr(" ".join(terms), PREC_ADD, None, tuple(terms))


Printer = Callable[[Any, Sequence[Expr]], Expr]  # (node, input exprs) -> Expr


@dataclass(frozen=True, slots=True)
class Domain:
    """Where a rule's tests sample each input: (low, high) per input, ``away_from`` points
    excluded by a margin, and the shapes/attrs to try for array ops (a shape per input, or
    "py" for a Python float)."""

    bounds: tuple[tuple[float, float], ...]
    away_from: tuple[float, ...] = ()
    cases: tuple[tuple[tuple[tuple[int, ...], ...], dict], ...] = ()


@dataclass(frozen=True, eq=False)
class Op:
    """One row of the rule table: everything every stage needs to know about an op.

    ``abstract`` is how the row is built on shapes alone (reverse mode never computes a
    backward op on the arrays): ``abstract(op, *ins, **attrs)`` gets the inputs shaped (the
    value when known, else a stand-in with its shape, dtype and kind) and returns a shaped
    result, or None for "compute it". Rows with ``elementwise=True`` get
    ``abstract.elementwise`` unless they say otherwise; other families use
    ``abstract.reduction``, ``abstract.view`` (ops returning views), ``abstract.same_as_first``
    or a small rule of their own. A row without one is computed for real (correct, slower).
    See gradgen/abstract.py for the whole convention.
    """

    name: str
    impl: Callable[..., Any]
    printer: Printer
    vjp: tuple[Callable[..., Any] | None, ...] | None = None
    nondiff: bool = False
    sympy: Callable[..., Any] | None = None
    domain: Domain | None = None
    binds: tuple[Any, ...] = ()
    rule_text: tuple[str, ...] = ()
    n_out: int = 1
    elementwise: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    # The array-API form (dialects.py): a printer (node, args, scope) where the spelling
    # differs from NumPy's, a string saying why the standard has none, or None: derived.
    xp: Callable[..., Any] | str | None = None
    abstract: Callable[..., Any] | None = None

    def __call__(self, *args, **attrs):
        return _bind(self, args, attrs)

    def __repr__(self) -> str:
        return f"<op {self.name}>"


def _unbound(op, args, attrs):
    raise RuntimeError(f"{op.name} was applied before gradgen.tracer was imported")


# How ``op(*args)`` applies an op: tracer.bind (concretely, or recorded as a node when an
# argument is traced). The tracer reads this table, so it sits above it and hands ``bind``
# down through ``set_bind`` when it is imported.
_bind = _unbound


def set_bind(bind) -> None:
    global _bind
    _bind = bind


OPS: dict[str, Op] = {}
BOUND: dict[Any, Any] = {}  # Python/NumPy callable -> op, or an adapter that builds ops
CALLED_AS: dict[str, list[str]] = {}  # op name -> how user code reaches it through adapters
# Another library's callables that rows spell in NumPy, by qualified name
# ("scipy.special.logsumexp" -> its adapter): the library itself is never imported for them.
FOREIGN: dict[str, Any] = {}


def defop(name: str, impl, printer: Printer, **kw) -> Op:
    """Register one op row; its ``binds`` route those Python/NumPy callables to it."""
    if name in OPS:
        raise ValueError(f"op {name!r} is defined twice")
    if kw.get("elementwise") and "abstract" not in kw:
        kw["abstract"] = elementwise_abstract
    op = Op(name, impl, printer, **kw)
    OPS[name] = op
    for target in op.binds:
        BOUND[target] = op
    return op


def route(target, handler, *ops: str, called: str | None = None) -> None:
    """Send calls of ``target`` (a NumPy or math callable) to ``handler``, an adapter that
    checks and normalizes the arguments and builds ``ops``; docs/ops.md lists ``target``
    (or ``called``) under each of them."""
    BOUND[target] = handler
    name = called or callable_name(target)
    for op in ops:
        names = CALLED_AS.setdefault(op, [])
        if name not in names:
            names.append(name)


def callable_name(target) -> str:
    """``np.linalg.solve``, ``math.sin``: how user code spells a bound callable."""
    if isinstance(target, str):
        return target
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__name__", repr(target))
    if module == "math":
        return f"math.{name}"
    for sub in ("linalg", "fft"):
        if sub in module:
            return f"np.{sub}.{name}"
    return f"np.{name}"


# --- printers ------------------------------------------------------------------------------


def value_text(value) -> str:
    """An attribute value as source, spelled the way ``ruff format`` writes it: strings in
    double quotes (``np.einsum("ij,jk->ik", ...)``), containers element by element."""
    if isinstance(value, str):
        if '"' in value:
            return repr(value)
        return '"' + repr(value)[1:-1].replace("\\'", "'") + '"'
    if isinstance(value, tuple):
        inner = ", ".join(value_text(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(value_text(v) for v in value) + "]"
    return repr(value)


def string_literal(text: str) -> str:
    """A Python string literal in the quote style ruff format keeps: double quotes, unless
    the text has more double quotes than single ones (a guard on ``cfg["kind"]``)."""
    escaped = text.replace("\\", "\\\\").replace("\n", "\\n")
    if text.count('"') > text.count("'"):
        return "'" + escaped.replace("'", "\\'") + "'"
    return '"' + escaped.replace('"', '\\"') + '"'


def infix(symbol: str, prec: int, right_assoc: bool = False) -> Printer:
    """``a <symbol> b``; the emitter prints one per node, so the cases are told apart once,
    here, and the common one (no sign to move) is tried first."""
    if symbol == "+":
        def print_sum(node, args):  # the forward keeps the user's text, the backward commutes
            return sum_expr(args[0], args[1:], getattr(node, "role", None) == "bwd")

        return print_sum
    if right_assoc:
        def print_power(node, args):
            a, b = args  # the left operand must bind tighter, the right may be unary
            left, right = a.at(prec + 1), b.at(PREC_UNARY)
            # ruff format hugs ** between simple operands: x**2, but (a + b) ** 2
            if _SIMPLE_POWER_OPERAND.fullmatch(left) and _SIMPLE_POWER_OPERAND.fullmatch(right):
                return Expr(f"{left}**{right}", prec)
            return Expr(f"{left} {symbol} {right}", prec)

        return print_power
    spaced = f" {symbol} "

    def print_infix(node, args):
        a, b = args
        # never reassociate: an equal-precedence right operand keeps its parentheses
        left = a.text if a.prec >= prec else f"({a.text})"
        right = b.text if b.prec > prec else f"({b.text})"
        if a.neg is None and b.neg is None:  # nearly always: no sign to move
            return new_expr(f"{left}{spaced}{right}", prec)
        backward = getattr(node, "role", None) == "bwd"  # the forward keeps the user's text
        if symbol == "-" and b.neg is not None and backward:  # u - (-v) is u + v exactly
            return sum_expr(a, [b.neg])
        if symbol == "*" and b.neg is not None and backward and _NONZERO_NUMBER.fullmatch(left):
            # c * -v is (-c) * v exactly: the sign moves into the literal, not onto an array
            negated = left[1:] if left.startswith("-") else f"-{left}"
            return Expr(f"{negated} {symbol} {b.neg.at(prec + 1)}", prec,
                        Expr(f"{left.lstrip('-')} {symbol} {b.neg.at(prec + 1)}", prec)
                        if not left.startswith("-") else None)
        neg = None
        if symbol in ("*", "/") and a.neg is not None:  # (-u) * v == -(u * v) exactly
            neg = Expr(f"{a.neg.at(prec)} {symbol} {right}", prec)
        elif symbol in ("*", "/") and b.neg is not None:  # u * (-v) == -(u * v) exactly
            neg = Expr(f"{left} {symbol} {b.neg.at(prec + 1)}", prec)
        return Expr(f"{left} {symbol} {right}", prec, neg)

    return print_infix


def prefix(symbol: str) -> Printer:
    def print_prefix(node, args):
        (a,) = args
        inner = a.at(PREC_UNARY + 1) if a.text.startswith(symbol) else a.at(PREC_UNARY)
        if a.prec == PREC_POW:  # ruff format writes -(x**2), not -x**2
            inner = f"({a.text})"
        return new_expr(f"{symbol}{inner}", PREC_UNARY, a if symbol == "-" else None)

    return print_prefix


def call(math_name: str | None, np_name: str, kwargs: Sequence[str] = ()) -> Printer:
    """A function call: ``math.<name>`` when the result is a Python scalar, else NumPy's."""

    math_fn, np_fn = f"math.{math_name}(" if math_name else None, f"np.{np_name}("

    def print_call(node, args):
        fn = math_fn if math_fn and node.aval.py is not None else np_fn
        if not kwargs and len(args) == 1:  # nearly always: one operand, no options
            return new_expr(f"{fn}{args[0].text})")
        parts = [a.text for a in args]
        for key in kwargs:
            value = node.attrs.get(key)
            if value is not None and value is not False:
                parts.append(f"{key}={value_text(value)}")
        return new_expr(f"{fn}{', '.join(parts)})")

    return print_call


def method(fmt: str) -> Printer:
    """A method or attribute on the first input: ``fmt`` like '.reshape({shape})'."""

    def print_method(node, args):
        tail = fmt.format(*(a.text for a in args[1:]), **node.attrs)
        receiver = args[0].at(PREC_ATOM - 1)
        if node.inputs and node.inputs[0].aval.py is not None:  # a Python float has no methods
            receiver = f"np.asarray({args[0].text})"
        return Expr(f"{receiver}{tail}", PREC_ATOM - 1)

    print_method.numpy_method = True  # a NumPy method: its row needs an explicit xp form
    return print_method


def dual(math_fn, np_fn):
    """An implementation that matches Python: ``math`` on Python scalars, NumPy otherwise."""

    def impl(*xs):
        for x in xs:  # (a plain loop: this runs per traced op)
            if type(x) not in (float, int, bool):
                return np_fn(*xs)
        return math_fn(*xs)

    impl.__name__ = getattr(np_fn, "__name__", "impl")
    impl.numbers = math_fn  # what tracer.bind calls once it has seen Python numbers only
    return impl


def is_python_scalar(x) -> bool:
    return type(x) in (float, int, bool)


def as_array(x):
    return x if isinstance(x, np.ndarray) else np.asarray(x)
