"""Differential fuzzing of the whole compiler: random programs over the rule table, written as
Python source and traced like user code, differentiated by gradgen.grad and by the emitted
module, and compared with sympy's derivatives and with central differences.

How a program is made (the ops come from the table, never from a list kept here):
- 1-3 float64 inputs: Python floats, NumPy scalars, 0-d or small arrays. Two points, A and B,
  are drawn up front; the program is built while its values are computed at both.
- Each statement applies one user-callable op of ``gradgen.ops.OPS`` to earlier values (reused
  freely, so adjoints accumulate; names are rebound, inputs too), constants and broadcasting
  partners. It is printed by the op's own printer (what the emitter writes), through a
  NumPy/math callable bound to the op, or, for array ops, another spelling of the same call
  (``x.sum(axis=-1)``, ``np.dot``, ``x.reshape((2, -1))``).
- An input outside an op's ``Domain`` bounds is squashed into them with
  ``mid + half * tanh(v / s)``; an application whose inputs sit within a small margin of a
  kink, jump or singularity of the op's sympy meaning (Abs, Max, floor, log, x**-1, ...) is
  not made, so every reference is smooth there.
- A branch ``if <value> <cmp> c:`` (or ``b = <value> <cmp> c; if b:``) puts A on one side and
  B on the other (c between them); each arm computes a few values and assigns the same join
  variable. Values nobody uses are summed into the output, or left as dead code.

The reference is sympy's derivative of each op's meaning (``sympy.diff`` of ``op.sympy``,
lambdified once per op and shape), chained in forward mode along the program's description:
nothing of gradgen's VJP rules, reverse pass, optimizer or emitter takes part. (One sympy
expression for the whole program is exact too, but some take sympy minutes: floor inside %.)
Each op's meaning is also checked to compute the program's value at that point.

What is checked, at A and at B (the other side of every branch), with one gradgen.grad
callable: its gradients (values and types) against the reference, and the reference against
central differences of the program itself; back at A, the cached code for A's path again. At
A, the module gradgen.emit writes gives the very same gradients (``<f>_grad`` and
``<f>_value_and_grad``, whose value has the program's type), and its guards refuse B.

GRADGEN_FUZZ_EXAMPLES=10000 runs the nightly-size fuzz; failures found are reduced by hand to
tests/test_fuzz_regressions.py."""

from __future__ import annotations

import hashlib
import inspect
import itertools
import linecache
import math
import os
import warnings
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import sympy as sp
from hypothesis import given, note, settings
from hypothesis import strategies as st

import gradgen
from gradgen.ir import Aval, Node, Ref, aval_of
from gradgen.ops import BOUND, OPS, Op
from gradgen.ops.core import literal
from gradgen.ops.registry import Expr, sum_expr

from .conftest import run_emitted
from .test_rules import INTERNAL, STRUCTURAL

EXAMPLES = int(os.environ.get("GRADGEN_FUZZ_EXAMPLES", "500"))

# scatter is the VJP of indexing: reverse mode inserts it, user code has no way to call it.
# Index updates (a[i] = v, np.add.at) are statements, not expressions: test_numpy_programs.py.
NOT_USER_CALLABLE = STRUCTURAL | INTERNAL | {"scatter"} | {
    name for name, op in OPS.items() if op.extra.get("statement")}
# The rows the random programs draw from. The NumPy families added with issue 9 (reductions
# beyond sum/mean, linalg, shape, indexing with arrays, the new ufuncs) are checked by the
# table test (test_rules.py) and their own end-to-end files; teaching this generator their
# argument conventions (fixed index arrays, structured matrices, printers that read node
# inputs) is the next step, tracked in the issue notes.
FUZZED = {
    "abs", "acos", "add", "asin", "atan", "atan2", "broadcast_to", "ceil", "cos", "cosh",
    "div", "eq", "exp", "expm1", "fabs", "floor", "floordiv", "ge", "getitem", "gt", "hypot",
    "le", "log", "log10", "log1p", "log2", "lt", "math_pow", "matmul", "maximum", "mean",
    "minimum", "mod", "mul", "ne", "neg", "norm", "outer", "pow", "reshape", "round", "sign",
    "sin", "sinh", "sqrt", "square", "stack", "sub", "sum", "tan", "tanh", "transpose", "trunc",
}
USER_OPS = [op for name, op in OPS.items() if name not in NOT_USER_CALLABLE and name in FUZZED]

POINTS = ("A", "B")
# an input: a Python float ("py"), a NumPy scalar ("np"), or an array of that shape
LAYOUTS = ("py", "py", "np", (), (3,), (2,), (2, 3), (3, 2), (2, 1), (1, 3))
MAX_SIZE = 12  # elements per value: sympy's derivative stays quick
MAX_MAGNITUDE = 1e4
AWAY_MARGIN = 0.05  # distance from a Domain's away_from points for a value used as is
SQUASH_MARGIN = 0.2  # where a squashed value lands: well clear of away_from points
KINK_MARGIN = 1e-3  # relative distance from a kink; finite-difference steps are 1e-6
BRANCH_MARGIN = 1e-2  # relative distance of both points from a branch's threshold
FD_STEP = 1e-6


def _arity(op) -> int:
    if op.vjp is not None:
        return len(op.vjp)
    return len(op.domain.bounds) if op.domain else len(_sympy_params(op))


def _sympy_params(op):
    return [p for p in inspect.signature(op.sympy).parameters.values()
            if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD]


def _is_threshold(op) -> bool:
    """A comparison: a locally constant binary op giving a bool that flips across its partner."""
    if _arity(op) != 2:
        return False
    low, high = op.impl(0.0, 1.0), op.impl(2.0, 1.0)
    return isinstance(low, bool) and low != high


# op names, by what the generator can do with them
ELEMENTWISE = [op.name for op in USER_OPS if op.elementwise]
SMOOTH = [n for n in ELEMENTWISE if not OPS[n].nondiff]
SMOOTH_BINARY = [n for n in SMOOTH if _arity(OPS[n]) == 2]
LOCALLY_CONSTANT = [n for n in ELEMENTWISE if OPS[n].nondiff]
THRESHOLDS = [n for n in LOCALLY_CONSTANT if _is_threshold(OPS[n])]
ARRAY_OPS = [op.name for op in USER_OPS if not op.elementwise]


def _bound_names(op) -> list[tuple[str, str]]:
    """The NumPy ufuncs and math functions that reach ``op`` directly: ("np", "arctan2")."""
    forms = []
    for fn, target in BOUND.items():
        if target is not op or not callable(fn):
            continue
        name = getattr(fn, "__name__", None)
        for module, label in ((np, "np"), (math, "math")):
            if name and getattr(module, name, None) is fn:
                forms.append((label, name))
    return sorted(set(forms))


# how an elementwise op is written: by its printer (math.f for a Python float), by its printer
# for a NumPy value (np.f even of a Python float), or through a callable bound to it
FORMS = {n: [("printer", None), ("numpy", None), *_bound_names(OPS[n])] for n in ELEMENTWISE}


# --- the program description ---------------------------------------------------------------


@dataclass(eq=False)
class Term:
    """A value of the program: a named variable, a literal, or an op applied to terms. ``at``
    holds its concrete value at each point where it is computed."""

    text: Expr
    at: dict[str, Any]
    op: Any = None
    args: tuple[Term, ...] = ()
    attrs: dict = field(default_factory=dict)
    name: str | None = None
    const: Any = None
    form: tuple | None = None  # how an op application is written
    aval: Aval | None = None  # the aval its printer was given

    @property
    def is_const(self) -> bool:
        return self.op is None and self.name is None

    def is_float(self) -> bool:
        return all(np.result_type(v).kind == "f" for v in self.at.values())

    def shape(self) -> tuple:
        return np.shape(next(iter(self.at.values())))

    def names(self):
        """Every variable this term reads."""
        stack, out = [self], []
        while stack:
            t = stack.pop()
            if t.name is not None:
                out.append(t.name)
            stack.extend(t.args)
        return out


@dataclass
class Assign:
    target: str
    term: Term
    augmented: str | None = None  # "+": written target += <second argument>

    def line(self) -> str:
        if self.augmented:
            return f"{self.target} {self.augmented}= {self.term.args[1].text.text}"
        return f"{self.target} = {self.term.text.text}"


@dataclass
class Branch:
    condition: Term
    outcome: dict[str, bool]
    arms: dict[bool, list[Assign]]


@dataclass
class Program:
    source: str
    filename: str
    params: list[str]
    args: dict[str, tuple]
    body: list
    output: Term
    branches: int

    def function(self):
        lines = self.source.splitlines(True)
        linecache.cache[self.filename] = (len(self.source), None, lines, self.filename)
        namespace: dict = {"__name__": "fuzz_program"}
        exec(compile(self.source, self.filename, "exec"), namespace)  # noqa: S102 - generated
        return namespace["program"]

    def forget(self) -> None:
        linecache.cache.pop(self.filename, None)


@dataclass(frozen=True)
class _PrintNode:
    """What an op's printer reads from a node: its result's aval and the op's attrs (and its
    inputs, when one is an index array: ``_print_inputs``)."""

    aval: Aval
    attrs: dict
    inputs: tuple = ()


class Infeasible(Exception):
    """This application would leave an op's domain or sit on a kink: try something else."""


# --- building a program while computing it at both points ----------------------------------


def _spell(op, form, aval, attrs, texts, inputs=()) -> Expr:
    """``op`` applied to ``texts``, written by its printer (for ``aval``; "numpy": for the NumPy
    kind of it), through a bound callable ("np"/"math", name), or another spelling ("text")."""
    kind, name = form
    if kind in ("printer", "numpy"):
        if kind == "numpy":
            aval = Aval(aval.shape, aval.dtype)
        return op.printer(_PrintNode(aval, attrs, inputs), texts)
    if kind == "text":  # another spelling of the same call: x.sum(), np.matmul(a, b)
        return Expr(name(*[t.text for t in texts]))
    return Expr(f"{kind}.{name}({', '.join(t.text for t in texts)})")


def _print_inputs(args, live, as_params=False) -> tuple[Ref, ...]:
    """The input nodes a printer may read, given (as the tracer makes them) only when an
    operand is an index array or mask: getitem's printer writes a small constant one as a list
    (``x[[0, 2]]``), so it reads which inputs are constants. ``as_params``: the operands are
    a helper function's parameters, constants no more."""
    point = live[0]
    if not any(isinstance(_operand_spec(a.at[point]), _Fixed) for a in args):
        return ()
    refs = []
    for a in args:
        value, const = a.at[point], a.is_const and not as_params
        node = (Node(OPS["const"], (), {"value": value}, (aval_of(value),), role="const")
                if const else Node(OPS["input"], (), {}, (aval_of(value),), role="input"))
        refs.append(Ref(node))
    return tuple(refs)


def _infix(op) -> str | None:
    """The operator ``op`` prints as between two names (``+``, ``**``), if it is one."""
    text = op.printer(_PrintNode(aval_of(1.0), {}), [Expr("a"), Expr("b")]).text
    parts = text.replace("**", " ** ").split()
    return parts[1] if len(parts) == 3 and parts[0] == "a" and parts[2] == "b" else None


AUGMENTABLE = [n for n in SMOOTH_BINARY if _infix(OPS[n])]  # v += w, v **= w, ...


def _evaluate(text: str, env: dict, namespace: dict):
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            return eval(text, namespace, dict(env))
        except (ArithmeticError, ValueError, TypeError, RuntimeWarning) as e:
            raise Infeasible(str(e)) from None


def _is_arraylike(v) -> bool:
    return isinstance(v, np.ndarray | np.generic)


def _scalar_like(v) -> bool:
    return np.ndim(v) == 0


def _floats(v) -> np.ndarray:
    return np.asarray(v, dtype=np.float64)


class Builder:
    """Draws a program statement by statement; hypothesis chooses the structure, ``rng`` (seeded
    by hypothesis) the numbers."""

    def __init__(self, data, rng: np.random.Generator):
        self.data = data
        self.rng = rng
        self.pool: list[Term] = []
        self.env: dict[str, dict[str, Any]] = {p: {} for p in POINTS}
        self.block: list = []
        self.count = itertools.count(1)
        self.uses: dict[str, int] = {}
        self.assigned: set[str] = set()
        self.namespace: dict = {"np": np, "math": math}
        self.helpers: list[str] = []

    def draw(self, strategy):
        return self.data.draw(strategy)

    def choice(self, items):
        return items[self.draw(st.integers(0, len(items) - 1))]

    def recent(self, items):
        """Prefer recent values (shrinks towards the last one)."""
        return items[-1 - self.draw(st.integers(0, len(items) - 1))]

    # --- inputs ---

    def inputs(self) -> tuple[list[str], dict[str, tuple]]:
        n = self.draw(st.integers(1, 3))
        params, args = [], {p: [] for p in POINTS}
        for i in range(n):
            layout = self.draw(st.sampled_from(LAYOUTS))
            name = f"x{i}"
            params.append(name)
            at = {}
            for p in POINTS:
                value = round(self.rng.uniform(-2, 2), 4)
                if layout == "py":
                    value = float(value)
                elif layout != "np":
                    value = np.array(np.round(self.rng.uniform(-2, 2, size=layout), 4))
                at[p] = value
                args[p].append(value)
                self.env[p][name] = value
            self.pool.append(Term(Expr(name), at, name=name))
        return params, {p: tuple(v) for p, v in args.items()}

    # --- terms ---

    def const(self, bounds, away, shape, live) -> Term:
        lo, hi = _clear_interval(bounds, away, SQUASH_MARGIN)
        if shape is None:
            if self.draw(st.booleans()) and math.ceil(lo) <= math.floor(hi):
                value = int(self.rng.integers(math.ceil(lo), math.floor(hi) + 1))
                if not any(abs(value - a) < SQUASH_MARGIN for a in away):
                    return Term(literal(value), dict.fromkeys(live, value), const=value)
            value = float(round(self.rng.uniform(lo, hi), 2))
            value = min(max(value, lo), hi)
        else:
            value = np.round(self.rng.uniform(lo, hi, size=shape), 2).clip(lo, hi)
        return Term(literal(value), dict.fromkeys(live, value), const=value)

    def apply(self, op, args, attrs, live, form=("printer", None), check_domain=True) -> Term:
        """``op(*args)`` as a term, or Infeasible."""
        if check_domain:
            args = self.fit(op, args, live)
        _require_smooth(op, args, attrs, live)
        results = {}
        for p in live:
            with np.errstate(all="raise"), warnings.catch_warnings():
                warnings.simplefilter("error")
                try:
                    results[p] = op.impl(*[a.at[p] for a in args], **attrs)
                except (ArithmeticError, ValueError, TypeError, RuntimeWarning) as e:
                    raise Infeasible(str(e)) from None
        kind = form[0]
        if kind == "math" and not all(_scalar_like(a.at[p]) for a in args for p in live):
            raise Infeasible("math functions take scalars")
        aval = aval_of(results[live[0]])
        text = _spell(op, form, aval, attrs, [a.text for a in args], _print_inputs(args, live))
        at = {}
        for p in live:
            value = self.evaluate(text.text, p)
            expected = results[p]
            assert np.shape(value) == np.shape(expected), (
                f"{text.text}: the program gives shape {np.shape(value)}, {op.name}'s impl "
                f"{np.shape(expected)}")
            if kind == "printer" and p == live[0]:  # the emitter prints for this aval
                assert type(value) is type(expected), (
                    f"{text.text} gives a {type(value).__name__}, {op.name}'s impl a "
                    f"{type(expected).__name__}")
            np.testing.assert_allclose(_floats(value), _floats(expected), rtol=1e-12,
                                       err_msg=f"{text.text} disagrees with {op.name}'s impl")
            if np.size(value) == 0 or np.size(value) > MAX_SIZE:
                raise Infeasible("size")
            if not np.all(np.abs(_floats(value)) <= MAX_MAGNITUDE):
                raise Infeasible("magnitude")
            at[p] = value
        return Term(text, at, op, tuple(args), dict(attrs), form=form, aval=aval)

    def evaluate(self, text: str, point: str):
        return _evaluate(text, self.env[point], self.namespace)

    def outline(self, term: Term, live) -> Term:
        """The same call moved into a helper function of the module: ``h1(v2, 0.5)``."""
        if not isinstance(term.op, Op) or term.form is None:
            return term
        name = f"h{len(self.helpers) + 1}"
        params = [f"a{i}" for i in range(len(term.args))]
        body = _spell(term.op, term.form, term.aval, term.attrs, [Expr(q) for q in params],
                      _print_inputs(term.args, live, as_params=True))
        source = f"def {name}({', '.join(params)}):\n    return {body.text}\n"
        exec(compile(source, "<fuzz helper>", "exec"), self.namespace)  # noqa: S102
        self.helpers.append(source)
        text = Expr(f"{name}({', '.join(a.text.text for a in term.args)})")
        for p in live:
            np.testing.assert_array_equal(self.evaluate(text.text, p), term.at[p])
        return Term(text, term.at, term.op, term.args, term.attrs, form=term.form,
                    aval=term.aval)

    def fit(self, op, args, live) -> list[Term]:
        """Squash each float argument outside the op's Domain bounds into them."""
        if op.domain is None:
            return list(args)
        bounds, away = op.domain.bounds, op.domain.away_from
        out = []
        for i, arg in enumerate(args):
            b = bounds[min(i, len(bounds) - 1)]
            if _inside(arg, b, away, live) or isinstance(_operand_spec(arg.at[live[0]]), _Fixed):
                out.append(arg)  # an index array is in no float interval: it is as it is
            elif arg.is_float() and not arg.is_const:
                out.append(self.squash(arg, _clear_interval(b, away, SQUASH_MARGIN), live))
            else:
                raise Infeasible("outside the domain")
        return out

    def squash(self, arg: Term, interval, live) -> Term:
        """mid + half * tanh(arg / s): into ``interval`` at every point, never saturated."""
        lo, hi = interval
        mid, half = round((lo + hi) / 2, 3), round((hi - lo) / 2 * 0.95, 3)
        scale = max(float(np.max(np.abs(_floats(arg.at[p])))) for p in live)
        x = arg
        if scale > 1:
            s = float(round(scale * 1.1, 2))
            x = self.apply(OPS["div"], [arg, _literal(s, live)], {}, live, check_domain=False)
        t = self.apply(OPS["tanh"], [x], {}, live, check_domain=False)
        t = self.apply(OPS["mul"], [_literal(half, live), t], {}, live, check_domain=False)
        if mid == 0:
            return t
        return self.apply(OPS["add"], [_literal(mid, live), t], {}, live, check_domain=False)

    def scalarize(self, arg: Term, live) -> Term:
        if all(_scalar_like(arg.at[p]) for p in live):
            return arg
        how = self.draw(st.sampled_from(["sum", "mean", "index"]))
        if how == "index":
            index = tuple(int(self.rng.integers(-d, d)) for d in arg.shape())
            return self.apply(OPS["getitem"], [arg], {"index": index}, live, check_domain=False)
        return self.apply(OPS[how], [arg], {"axis": None, "keepdims": False}, live,
                          check_domain=False)

    # --- operands ---

    def operand(self, live, pred=lambda t: True) -> Term:
        candidates = [t for t in self.pool if all(p in t.at for p in live) and pred(t)]
        if not candidates:
            raise Infeasible("no operand")
        return self.recent(candidates)

    def partner(self, first: Term, bounds, away, live, float_only: bool) -> Term:
        """A second operand broadcasting with ``first``: a value or a constant."""
        shape = first.shape()
        if self.draw(st.integers(0, 2)) == 0:
            cshape = None
            if shape and self.draw(st.booleans()):
                cshape = shape[-self.draw(st.integers(1, len(shape))):]
            return self.const(bounds, away, cshape, live)

        def fits(t):
            if float_only and not t.is_float():
                return False
            try:
                out = np.broadcast_shapes(shape, t.shape())
            except ValueError:
                return False
            return math.prod(out) <= MAX_SIZE

        return self.operand(live, fits)

    # --- statements ---

    def elementwise(self, op, live, first=None) -> Term:
        n = _arity(op)
        bounds = op.domain.bounds if op.domain else ((-3.0, 3.0),) * n
        away = op.domain.away_from if op.domain else ()
        if first is None:
            first = self.operand(live, lambda t: t.is_float() or n == 2)
        args = [first]
        for i in range(1, n):
            b = bounds[min(i, len(bounds) - 1)]
            args.append(self.partner(first, b, away, live, float_only=not first.is_float()))
        if n == 2 and self.draw(st.booleans()):
            args.reverse()
        if not any(a.is_float() for a in args):
            raise Infeasible("no float operand")
        form = self.choice(FORMS[op.name])
        return self.apply(op, args, {}, live, form)

    def array_op(self, op, live) -> Term:
        gen = ARRAY_GENERATORS.get(op.name)
        if gen is None or self.draw(st.integers(0, 9)) == 0:
            return self.from_domain_case(op, live)
        args, attrs, *spellings = gen(self, live)
        forms = [("printer", None)] + [("text", f) for f in (spellings[0] if spellings else ())]
        return self.apply(op, args, attrs, live, self.choice(forms))

    def from_domain_case(self, op, live) -> Term:
        """The op at one of its Domain cases' shapes and attrs, its inputs made from values of
        the program (a scalar of the program times a constant array of the shape)."""
        if op.domain is None or not op.domain.cases:
            raise Infeasible(f"{op.name} has no domain cases")
        shapes, attrs = self.choice(list(op.domain.cases))
        args = []
        for shape in shapes:
            if isinstance(shape, np.ndarray):  # a fixed index or mask: a constant as it is
                args.append(_literal(shape, live))
                continue
            if shape == "py":
                args.append(self.operand(live, lambda t: t.is_float() and all(
                    isinstance(t.at[p], float) for p in live)))
                continue
            scalar = self.scalarize(self.operand(live, Term.is_float), live)
            factor = _literal(np.round(self.rng.uniform(0.5, 1.5, size=shape), 2), live)
            args.append(self.apply(OPS["mul"], [scalar, factor], {}, live, check_domain=False))
        return self.apply(op, args, dict(attrs), live)

    def candidate(self, live) -> Term:
        family = self.draw(st.sampled_from(["smooth"] * 5 + ["array"] * 3 + ["constant"] * 1))
        if family == "smooth":
            return self.elementwise(OPS[self.draw(st.sampled_from(SMOOTH))], live)
        if family == "array":
            return self.array_op(OPS[self.draw(st.sampled_from(ARRAY_OPS))], live)
        return self.elementwise(OPS[self.draw(st.sampled_from(LOCALLY_CONSTANT))], live)

    def statement(self, live, rebind: bool = False) -> Term | None:
        if rebind and self.draw(st.integers(0, 7)) == 0:
            try:
                return self.augmented(live)
            except Infeasible:
                pass
        for _ in range(4):
            try:
                term = self.candidate(live)
            except Infeasible:
                continue
            if self.draw(st.integers(0, 7)) == 0:
                term = self.outline(term, live)
            name = None
            if rebind and term.is_float() and self.draw(st.integers(0, 5)) == 0:  # x = f(x)
                name = self.recent([t.name for t in self.pool])
            return self.assign(term, live, name)
        return None

    def augmented(self, live) -> Term:
        """``v += w`` (or -=, *=, ...) on a Python or NumPy scalar: a rebinding."""
        target = self.operand(live, lambda t: t.is_float() and all(
            isinstance(t.at[p], float | np.generic) for p in live))
        op = OPS[self.draw(st.sampled_from(AUGMENTABLE))]
        bounds = op.domain.bounds if op.domain else ((-3.0, 3.0),) * 2
        away = op.domain.away_from if op.domain else ()
        partner = self.partner(target, bounds[-1], away, live, float_only=False)
        term = self.apply(op, [target, partner], {}, live)
        if term.args[0] is not target or not term.is_float():
            raise Infeasible("the target was squashed")
        return self.assign(term, live, target.name, augmented=_infix(op))

    def assign(self, term: Term, live, name: str | None = None,
               augmented: str | None = None) -> Term:
        name = name or f"v{next(self.count)}"
        self.block.append(Assign(name, term, augmented))
        for used in term.names():
            self.uses[used] = self.uses.get(used, 0) + 1
        self.uses[name] = 0
        self.assigned.add(name)
        for p in live:
            self.env[p][name] = term.at[p]
        named = Term(Expr(name), dict(term.at), name=name)
        self.pool = [t for t in self.pool if t.name != name] + [named]
        return named

    def branch(self) -> bool:
        """``if <scalar> <cmp> c:`` with A on one side and B on the other; both arms end by
        assigning the same variable, shaped like a value computed before the branch."""
        for _ in range(3):
            try:
                cond_value = self.scalarize(self.operand(POINTS, Term.is_float), POINTS)
            except Infeasible:
                continue
            a, b = (float(cond_value.at[p]) for p in POINTS)
            gap = abs(a - b)
            margin = BRANCH_MARGIN * (1 + max(abs(a), abs(b)))
            if gap < 4 * margin:
                continue
            c = round((a + b) / 2, 3)
            if min(abs(a - c), abs(b - c)) < margin:
                c = (a + b) / 2
            cmp = OPS[self.draw(st.sampled_from(THRESHOLDS))]
            threshold = _literal(c, POINTS)
            args = [cond_value, threshold]
            if self.draw(st.booleans()):
                args.reverse()
            condition = self.apply(cmp, args, {}, POINTS, check_domain=False)
            break
        else:
            return False
        outcome = {p: bool(condition.at[p]) for p in POINTS}
        if self.draw(st.booleans()):  # c = x < 0.5; if c: ... (bool() of a traced bool)
            condition = self.assign(condition, POINTS)
        base = self.operand(POINTS, Term.is_float)
        join = f"v{next(self.count)}"
        saved_pool, saved_block = list(self.pool), self.block
        arms: dict[bool, list[Assign]] = {}
        join_at = {}
        for side in (True, False):
            live = tuple(p for p in POINTS if outcome[p] == side)
            self.block = []
            self.pool = list(saved_pool)
            last = base
            for _ in range(self.draw(st.integers(0, 2))):
                made = self.statement(live)
                last = made or last
            term = self.join_term(last, base, live)
            self.assign(term, live, join)
            join_at.update(term.at)
            arms[side] = self.block
        self.pool, self.block = saved_pool, saved_block
        self.block.append(Branch(condition, outcome, arms))
        self.pool.append(Term(Expr(join), join_at, name=join))
        return True

    def join_term(self, last: Term, base: Term, live) -> Term:
        shape = base.shape()
        for _ in range(4):
            try:
                first = last
                try:
                    fits = np.broadcast_shapes(first.shape(), shape) == shape
                except ValueError:
                    fits = False
                if not fits or not first.is_float():
                    first = self.scalarize(first, live) if first.is_float() else base
                op = OPS[self.draw(st.sampled_from(SMOOTH_BINARY))]
                args = [first, base] if self.draw(st.booleans()) else [base, first]
                term = self.apply(op, args, {}, live, self.choice(FORMS[op.name]))
                if term.shape() == shape and term.is_float():
                    return term
            except Infeasible:
                continue
        return Term(base.text, {p: base.at[p] for p in live}, name=base.name)

    def output(self, live) -> Term:
        """The sum of the float values no statement used (scalarized), the last one always;
        the others may be left out (dead code)."""
        assigned = [t for t in self.pool if t.name in self.assigned]
        sinks = [t for t in assigned if self.uses.get(t.name, 0) == 0 and t.is_float()
                 and self.draw(st.integers(0, 3))]
        if assigned and assigned[-1] not in sinks and assigned[-1].is_float():
            sinks.append(assigned[-1])
        if not sinks:
            sinks = [t for t in self.pool if t.is_float()]
        parts = []
        for t in sinks:
            for _ in range(3):
                try:
                    parts.append(self.scalarize(t, live))
                    break
                except Infeasible:
                    continue
        if not parts:
            parts = [self.apply(OPS["sum"], [sinks[-1]], {"axis": None, "keepdims": False},
                                live, check_domain=False)]
        text = sum_expr(parts[0].text, [p.text for p in parts[1:]]) if len(parts) > 1 else \
            parts[0].text
        at = {p: self.evaluate(text.text, p) for p in live}
        return Term(text, at, op="output", args=tuple(parts))


def _literal(value, live) -> Term:
    return Term(literal(value), dict.fromkeys(live, value), const=value)


def _clear_interval(bounds, away, margin) -> tuple[float, float]:
    """The widest part of ``bounds`` at least ``margin`` from every ``away`` point."""
    lo, hi = bounds
    cuts = sorted(a for a in away if lo < a < hi)
    edges = [lo, *itertools.chain.from_iterable((a - margin, a + margin) for a in cuts), hi]
    pieces = [(edges[k], edges[k + 1]) for k in range(0, len(edges), 2)]
    return max(pieces, key=lambda piece: piece[1] - piece[0])


def _inside(arg: Term, bounds, away, live) -> bool:
    lo, hi = bounds
    for p in live:
        v = _floats(arg.at[p])
        if not (np.all(v >= lo) and np.all(v <= hi)):
            return False
        if any(np.any(np.abs(v - a) < AWAY_MARGIN) for a in away):
            return False
    return True


# --- kinks, jumps and singularities, read from the ops' sympy meanings -----------------------


def _hazards(expr) -> list[tuple[str, tuple]]:
    """The places where ``expr`` is not smooth, as (kind, sympy arguments)."""
    out = []
    for node in sp.preorder_traversal(expr):
        if isinstance(node, sp.Abs | sp.sign | sp.Heaviside):
            out.append(("zero", (node.args[0],)))
        elif isinstance(node, sp.floor | sp.ceiling):
            out.append(("integer", (node.args[0],)))
        elif isinstance(node, sp.Max | sp.Min):
            out.extend(("zero", (a - b,)) for a, b in itertools.combinations(node.args, 2))
        elif isinstance(node, sp.core.relational.Relational):
            out.append(("zero", (node.lhs - node.rhs,)))
        elif isinstance(node, sp.log):
            out.append(("positive", (node.args[0],)))
        elif isinstance(node, sp.Pow):
            base, exponent = node.args
            if not exponent.is_Integer:
                out.append(("positive", (base,)))
            elif exponent < 0:
                out.append(("zero", (base,)))
        elif isinstance(node, sp.asin | sp.acos):
            out.append(("unit", (node.args[0],)))
        elif isinstance(node, sp.tan):
            out.append(("zero", (sp.cos(node.args[0]),)))
        elif isinstance(node, sp.atan2):
            out.append(("atan2", node.args))
    return [h for h in out if h[1][0].free_symbols or len(h[1]) > 1]


_HAZARD_CACHE: dict = {}


def _hazard_functions(op, shapes, attrs):
    key = (op.name, shapes, repr(sorted(attrs.items())))
    hit = _HAZARD_CACHE.get(key)
    if hit is not None:
        return hit
    if op.elementwise:
        syms = [sp.Symbol(f"u{i}", real=True) for i in range(len(shapes))]
        flat = syms
        expr = op.sympy(*syms)
    else:
        syms, flat = _sympy_operands(shapes)
        expr = np.ravel(np.asarray(op.sympy(*syms, **attrs), dtype=object)).tolist()
    exprs = expr if isinstance(expr, list) else [expr]
    hazards = [h for e in exprs for h in _hazards(sp.sympify(e))]
    fns = [(kind, sp.lambdify(flat, list(args), modules="numpy")) for kind, args in hazards]
    _HAZARD_CACHE[key] = (op.elementwise, fns)
    return _HAZARD_CACHE[key]


def _require_smooth(op, args, attrs, live) -> None:
    if op.sympy is None:
        return
    shapes = tuple(() if op.elementwise else _operand_spec(a.at[live[0]]) for a in args)
    elementwise, fns = _hazard_functions(op, shapes, attrs)
    if not fns:
        return
    for p in live:
        if elementwise:
            values = list(np.broadcast_arrays(*[_floats(a.at[p]) for a in args]))
        else:
            values = _flat_operands(a.at[p] for a in args)
        for kind, fn in fns:
            with np.errstate(all="ignore"):
                got = [np.asarray(v, dtype=np.float64) for v in fn(*values)]
            if not _clear_of(kind, got):
                raise Infeasible(f"{op.name} near a {kind} hazard")


def _clear_of(kind, got) -> bool:
    if not all(np.all(np.isfinite(g)) for g in got):
        return False
    x = got[0]
    margin = KINK_MARGIN * (1 + np.abs(x))
    if kind == "zero":
        return bool(np.all(np.abs(x) >= margin))
    if kind == "integer":
        return bool(np.all(np.abs(x - np.round(x)) >= margin))
    if kind == "positive":
        return bool(np.all(x >= margin))
    if kind == "unit":
        return bool(np.all(np.abs(x) <= 1 - KINK_MARGIN))
    y, x = got  # atan2(y, x): smooth off the origin and the negative x axis
    return bool(np.all((x >= KINK_MARGIN) | (np.abs(y) >= KINK_MARGIN)))


# --- array ops: how to call each one (a row without an entry is called at its Domain cases) --


def _reduction(fn: str):
    def gen(b: Builder, live):
        x = b.operand(live, Term.is_float)
        ndim = len(x.shape())
        axis = None
        if ndim and b.draw(st.booleans()):
            axes = [k for k in range(ndim) if b.draw(st.booleans())] or [ndim - 1]
            axis = tuple(axes)
        keepdims = b.draw(st.booleans())
        if axis is None:
            written = ""
        elif len(axis) == 1:
            written = f", axis={axis[0] - ndim if b.draw(st.booleans()) else axis[0]}"
        else:
            written = f", axis={tuple(a - ndim for a in axis)}"
        written += ", keepdims=True" if keepdims else ""
        spellings = [lambda t: f"np.{fn}({t}{written})"]
        if _arrays(live)(x):
            spellings.append(lambda t: f"{_atom(t)}.{fn}({written[2:]})")
        return [x], {"axis": axis, "keepdims": keepdims}, spellings

    return gen


def _atom(text: str) -> str:
    """``text`` as the operand of a method call or an index."""
    return text if text.isidentifier() else f"({text})"


def _shapes_of_size(n: int) -> list[tuple]:
    out = [(n,), (1, n), (n, 1)]
    out += [(a, n // a) for a in range(2, n) if n % a == 0]
    out += [(1, a, n // a) for a in range(2, n) if n % a == 0]
    if n == 1:
        out += [(), (1, 1)]
    return out


def _arrays(live):
    return lambda t: t.is_float() and all(_is_arraylike(t.at[p]) for p in live)


def _gen_reshape(b: Builder, live):
    x = b.operand(live, _arrays(live))
    shape = b.choice(_shapes_of_size(math.prod(x.shape())))
    written = list(shape)
    if written and b.draw(st.booleans()):
        written[b.draw(st.integers(0, len(written) - 1))] = -1
    spellings = [lambda t: f"np.reshape({t}, {tuple(written)})",
                 lambda t: f"{_atom(t)}.reshape({tuple(written)})"]
    return [x], {"shape": shape}, spellings


def _gen_transpose(b: Builder, live):
    x = b.operand(live, lambda t: _arrays(live)(t) and len(t.shape()) >= 1)
    ndim = len(x.shape())
    axes = None
    if ndim >= 2 and b.draw(st.booleans()):
        axes = tuple(b.draw(st.permutations(list(range(ndim)))))
    if axes is None:
        spellings = [lambda t: f"np.transpose({t})", lambda t: f"{_atom(t)}.transpose()"]
    else:
        spellings = [lambda t: f"{_atom(t)}.transpose{axes}",
                     lambda t: f"np.transpose({t}, {tuple(a - ndim for a in axes)})"]
    return [x], {"axes": axes}, spellings


def _gen_broadcast_to(b: Builder, live):
    x = b.operand(live, lambda t: t.is_float() and len(t.shape()) <= 2)
    shape = list(x.shape())
    shape = [b.choice([2, 3]) if d == 1 and b.draw(st.booleans()) else d for d in shape]
    if b.draw(st.booleans()) or shape == list(x.shape()):
        shape.insert(0, 2)
    if math.prod(shape) > MAX_SIZE:
        raise Infeasible("too large")
    return [x], {"shape": tuple(shape)}


def _matmul_shape(sa, sb):
    if not sa or not sb:
        return None
    inner_b = sb[0] if len(sb) == 1 else sb[-2]
    if sa[-1] != inner_b:
        return None
    try:
        return np.matmul(np.empty(sa), np.empty(sb)).shape
    except ValueError:
        return None


def _gen_matmul(b: Builder, live):
    a = b.operand(live, lambda t: _arrays(live)(t) and len(t.shape()) >= 1)
    sa = a.shape()
    if b.draw(st.integers(0, 2)) == 0:
        sb = (sa[-1],) if b.draw(st.booleans()) else (sa[-1], b.choice([1, 2, 3]))
        other = b.const((-2.0, 2.0), (), sb, live)
    else:
        other = b.operand(live, lambda t: _arrays(live)(t) and _matmul_shape(sa, t.shape())
                          is not None)
    args = [a, other] if b.draw(st.booleans()) or not _matmul_shape(
        other.shape(), sa) else [other, a]
    spellings = [lambda p, q: f"np.matmul({p}, {q})"]
    if all(len(t.shape()) <= 2 for t in args):
        spellings.append(lambda p, q: f"np.dot({p}, {q})")
        if _arrays(live)(args[0]) and not args[0].is_const:  # W.dot(x) cannot see a tracer
            spellings.append(lambda p, q: f"{_atom(p)}.dot({q})")
    return args, {}, spellings


def _gen_outer(b: Builder, live):
    def vector(t):
        return _arrays(live)(t) and len(t.shape()) == 1

    return [b.operand(live, vector), b.operand(live, vector)], {}


def _gen_norm(b: Builder, live):
    return [b.operand(live, lambda t: _arrays(live)(t) and len(t.shape()) >= 1)], {}


def _gen_getitem(b: Builder, live):
    """A basic index: ints (negative too), slices, None; with ``...`` first, the items index
    the last axes."""
    x = b.operand(live, lambda t: _arrays(live)(t) and len(t.shape()) >= 1)
    shape = x.shape()
    n = b.draw(st.integers(1, len(shape)))
    ellipsis = n < len(shape) and b.draw(st.integers(0, 2)) == 0
    index = []
    for d in shape[-n:] if ellipsis else shape[:n]:
        how = b.draw(st.sampled_from(["int", "slice", "all"]))
        if how == "int":
            index.append(int(b.rng.integers(-d, d)))
        elif how == "slice":
            start = int(b.rng.integers(0, d))
            step = b.choice([None, None, 1, 2])
            index.append(("slice", start, b.choice([None, d, start + 1]), step))
        else:
            index.append(("slice", None, None, None))
    if b.draw(st.integers(0, 3)) == 0:
        index.insert(b.draw(st.integers(0, len(index))), None)
    if ellipsis:
        index.insert(0, "...")
    return [x], {"index": tuple(index)}


def _gen_stack(b: Builder, live):
    first = b.operand(live, Term.is_float)
    shape = first.shape()
    others = [b.operand(live, lambda t: t.is_float() and t.shape() == shape)
              for _ in range(b.draw(st.integers(1, 2)))]
    if math.prod(shape) * (1 + len(others)) > MAX_SIZE:
        raise Infeasible("too large")
    axis = b.draw(st.integers(0, len(shape)))
    spellings = [lambda *ts: f"np.stack(({', '.join(ts)}), axis={axis - len(shape) - 1})"]
    return [first, *others], {"axis": axis}, spellings


ARRAY_GENERATORS = {
    "sum": _reduction("sum"), "mean": _reduction("mean"), "reshape": _gen_reshape,
    "transpose": _gen_transpose, "broadcast_to": _gen_broadcast_to, "matmul": _gen_matmul,
    "outer": _gen_outer, "norm": _gen_norm, "getitem": _gen_getitem, "stack": _gen_stack,
}


# --- the program as source text --------------------------------------------------------------


def generate(data) -> Program:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    b = Builder(data, rng)
    params, args = b.inputs()
    n_statements = b.draw(st.integers(1, 10))
    branch_at = sorted(b.draw(st.lists(st.integers(0, n_statements), max_size=2)))
    branches = 0
    for k in range(n_statements + 1):
        while branch_at and branch_at[0] == k:
            branch_at.pop(0)
            branches += b.branch()
        if k < n_statements:
            b.statement(POINTS, rebind=True)
    output = b.output(POINTS)
    lines = ["import math", "", "import numpy as np", "", ""]
    for helper in b.helpers:
        lines += [*helper.splitlines(), "", ""]
    lines.append(f"def program({', '.join(params)}):")
    for item in b.block:
        if isinstance(item, Branch):
            lines.append(f"    if {item.condition.text.text}:")
            lines += [f"        {s.line()}" for s in item.arms[True]]
            lines.append("    else:")
            lines += [f"        {s.line()}" for s in item.arms[False]]
        else:
            lines.append(f"    {item.line()}")
    lines.append(f"    return {output.text.text}")
    source = "\n".join(lines) + "\n"
    digest = hashlib.sha1(source.encode()).hexdigest()[:12]
    return Program(source, f"<fuzz {digest}>", params, args, b.block, output, branches)


def describe(program: Program) -> str:
    points = "\n".join(f"# {p} = {program.args[p]!r}" for p in POINTS)
    return f"{program.source}{points}\n"


# --- the references ---------------------------------------------------------------------------


def _symbol_array(name, shape):
    if shape == ():
        return sp.Symbol(name, real=True)
    flat = [sp.Symbol(f"{name}_{k}", real=True) for k in range(math.prod(shape))]
    return np.array(flat, dtype=object).reshape(shape)


class _Fixed(NamedTuple):
    """An index array or mask operand (getitem's ``x[[0, 2]]``, ``x[mask]``), hashable: the
    op's sympy meaning reads it as it is. It is no input of that meaning: an index has no
    derivative, and sympy symbols in its place are no index at all."""

    dtype: str
    shape: tuple
    data: bytes

    def array(self) -> np.ndarray:
        return np.frombuffer(self.data, self.dtype).reshape(self.shape)


def _operand_spec(value) -> tuple:
    """How the sympy references take a non-elementwise op's operand: its shape (an array of
    symbols), or the index array or mask itself."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "biu":
        return _Fixed(value.dtype.str, value.shape, value.tobytes())
    return tuple(np.shape(value))


def _sympy_operands(specs) -> tuple[list, list]:
    """The op's sympy arguments for operand ``specs``, and their symbols, flattened."""
    arrays, flat = [], []
    for i, spec in enumerate(specs):
        if isinstance(spec, _Fixed):
            arrays.append(spec.array())
        else:
            arrays.append(_symbol_array(f"u{i}", spec))
            flat.extend(np.ravel(arrays[-1]))
    return arrays, flat


def _flat_operands(values) -> list:
    """The values of ``_sympy_operands``' symbols: every operand's elements but index arrays."""
    out = []
    for v in values:
        if not isinstance(_operand_spec(v), _Fixed):
            out.extend(np.ravel(_floats(v)))
    return out


_DERIVATIVES: dict = {}


def _derivatives(op, shapes, attrs):
    """sympy's meaning of ``op`` and its derivatives, as NumPy functions of the inputs.
    Elementwise ops: (meaning, [d/du_i]) on broadcast elements. Others: (meaning, Jacobian)
    on the flattened inputs, the Jacobian one row per output element."""
    key = (op.name, shapes if not op.elementwise else len(shapes), repr(sorted(attrs.items())))
    hit = _DERIVATIVES.get(key)
    if hit is not None:
        return hit
    if op.elementwise:
        syms = [sp.Symbol(f"u{i}", real=True) for i in range(len(shapes))]
        meaning = op.sympy(*syms)
        derivs = [sp.diff(meaning, s) for s in syms]
        flat = syms
    else:
        arrays, flat = _sympy_operands(shapes)
        meaning = np.ravel(np.asarray(op.sympy(*arrays, **attrs), dtype=object)).tolist()
        derivs = [[sp.diff(m, s) for s in flat] for m in meaning]
    for d in np.ravel(np.asarray(derivs, dtype=object)):
        assert not sp.sympify(d).has(sp.Derivative, sp.Subs), (
            f"sympy cannot differentiate {op.name}'s meaning: {d}")
    hit = (sp.lambdify(flat, meaning, modules="numpy"),
           [sp.lambdify(flat, d, modules="numpy") for d in derivs] if op.elementwise
           else sp.lambdify(flat, derivs, modules="numpy"))
    _DERIVATIVES[key] = hit
    return hit


def _tangent(term: Term, point: str, env: dict, n: int) -> np.ndarray:
    """d term / d(every input element) at ``point``: shape term.shape + (n,). Forward mode
    through sympy's derivative of each op's meaning."""
    value = term.at[point]
    shape = np.shape(value)
    if term.name is not None:
        return env[term.name]
    if term.is_const or (term.op != "output" and term.op.nondiff):
        return np.zeros(shape + (n,))
    tangents = [_tangent(a, point, env, n) for a in term.args]
    if term.op == "output":
        return sum(tangents)
    op = term.op
    values = [_floats(a.at[point]) for a in term.args]
    if op.elementwise:
        meaning, partials = _derivatives(op, tuple(np.shape(v) for v in values), {})
        with np.errstate(all="ignore"):
            _assert_meaning(op, meaning(*values), value)
            out = np.zeros(shape + (n,))
            for partial, t in zip(partials, tangents, strict=True):
                d = np.broadcast_to(np.asarray(partial(*values), dtype=np.float64), shape)
                out = out + d[..., None] * np.broadcast_to(t, shape + (n,))
        return out
    specs = tuple(_operand_spec(a.at[point]) for a in term.args)
    meaning, jacobian = _derivatives(op, specs, term.attrs)
    flat = _flat_operands(a.at[point] for a in term.args)
    _assert_meaning(op, meaning(*flat), np.ravel(value))
    matrix = np.asarray(jacobian(*flat), dtype=np.float64).reshape(-1, len(flat))
    stacked = np.concatenate([np.reshape(t, (-1, n))
                              for t, spec in zip(tangents, specs, strict=True)
                              if not isinstance(spec, _Fixed)])
    return (matrix @ stacked).reshape(shape + (n,))


def _assert_meaning(op, meaning, value) -> None:
    """The derivative is of the op's sympy meaning: it must compute the program's value."""
    np.testing.assert_allclose(np.asarray(meaning, dtype=np.float64).ravel(),
                               _floats(value).ravel(), rtol=1e-9, atol=1e-12,
                               err_msg=f"{op.name}'s sympy meaning disagrees with the program")


def sympy_reference(program: Program, point: str) -> list[np.ndarray]:
    """The program's gradient at ``point``, one array per input: sympy's derivative of each
    op's meaning, chained in forward mode along the path ``point`` takes."""
    args = program.args[point]
    sizes = [int(np.size(a)) for a in args]
    n = sum(sizes)
    env, offset = {}, 0
    for name, a, size in zip(program.params, args, sizes, strict=True):
        seed = np.zeros((size, n))
        seed[:, offset:offset + size] = np.eye(size)
        env[name] = seed.reshape(np.shape(a) + (n,))
        offset += size
    for item in program.body:
        for stmt in item.arms[item.outcome[point]] if isinstance(item, Branch) else [item]:
            env[stmt.target] = _tangent(stmt.term, point, env, n)
    total = _tangent(program.output, point, env, n).reshape(n)
    return [part.reshape(np.shape(a)) for part, a in zip(
        np.split(total, np.cumsum(sizes)[:-1]), args, strict=True)]


def finite_differences(fn, args) -> list[np.ndarray]:
    grads = []
    for i, a in enumerate(args):
        flat = []
        for k in range(np.size(a)):
            values = []
            for sign in (1, -1):
                moved = list(args)
                if isinstance(a, np.ndarray):
                    x = a.copy()
                    h = FD_STEP * max(1.0, abs(float(x.flat[k])))
                    x.flat[k] += sign * h
                else:
                    h = FD_STEP * max(1.0, abs(a))
                    x = a + sign * h
                moved[i] = x
                values.append(float(fn(*moved)))
            flat.append((values[0] - values[1]) / (2 * h))
        grads.append(np.array(flat).reshape(np.shape(a)))
    return grads


# --- the property -------------------------------------------------------------------------------


def _scale(grads) -> float:
    return max([1.0] + [float(np.max(np.abs(g))) for g in grads if np.size(g)])


def _assert_gradients(got, want, args, what: str, rtol=1e-8, atol=1e-9, types=True) -> None:
    assert len(got) == len(want), f"{what}: {len(got)} gradients for {len(want)} inputs"
    scale = _scale(want)
    for k, (g, w, a) in enumerate(zip(got, want, args, strict=True)):
        if not types:
            pass
        elif isinstance(a, float):
            assert type(g) is float, f"{what}: d/dx{k} of a float is a {type(g).__name__}"
        else:
            assert isinstance(g, np.ndarray), f"{what}: d/dx{k} is a {type(g).__name__}"
            assert g.shape == a.shape and g.dtype == np.float64, (
                f"{what}: d/dx{k} is {g.dtype}{list(g.shape)} for {a.dtype}{list(a.shape)}")
        np.testing.assert_allclose(np.asarray(g, dtype=np.float64), w, rtol=rtol,
                                   atol=atol * scale, err_msg=f"{what}: d/dx{k}")


def _assert_owned(grads, args, what: str) -> None:
    """Gradients are the caller's: writable, sharing memory with no argument and no other."""
    arrays = [g for g in grads if isinstance(g, np.ndarray)]
    for k, g in enumerate(arrays):
        assert g.flags.writeable, f"{what}: a gradient is read-only"
        for other in [a for a in args if isinstance(a, np.ndarray)] + arrays[k + 1:]:
            assert not np.shares_memory(g, other), f"{what}: a gradient aliases another array"


def check_program(program: Program) -> None:
    fn = program.function()
    argnums = tuple(range(len(program.params)))
    grad = gradgen.grad(fn, argnums=argnums)
    first = None
    for point in POINTS:
        args = program.args[point]
        want = sympy_reference(program, point)
        _assert_gradients(finite_differences(fn, args), want, args,
                          f"central differences vs sympy at {point}", rtol=1e-4, atol=1e-5,
                          types=False)
        got = grad(*args)
        _assert_gradients(got, want, args, f"gradgen.grad vs sympy at {point}")
        _assert_owned(got, args, f"gradgen.grad at {point}")
        if first is None:
            first = got
    again = grad(*program.args["A"])  # back on the first path: its cached code
    for g, f in zip(again, first, strict=True):
        np.testing.assert_array_equal(g, f)

    source = gradgen.emit(fn, *program.args["A"], argnums=argnums)
    module = run_emitted(source)
    emitted = module["program_grad"](*program.args["A"])
    for g, f in zip(emitted, first, strict=True):
        np.testing.assert_array_equal(g, f, err_msg="the emitted module disagrees with grad")
    _assert_owned(emitted, program.args["A"], "the emitted module")
    value, emitted = module["program_value_and_grad"](*program.args["A"])
    for g, f in zip(emitted, first, strict=True):
        np.testing.assert_array_equal(g, f, err_msg="<f>_value_and_grad disagrees with grad")
    actual = fn(*program.args["A"])
    assert type(value) is type(actual), (
        f"the emitted value is a {type(value).__name__}, the program's a {type(actual).__name__}")
    np.testing.assert_allclose(value, actual, rtol=1e-12, atol=1e-12,
                               err_msg="the emitted value disagrees with the program")
    if program.branches:
        try:
            module["program_grad"](*program.args["B"])
        except module["GuardFailure"]:
            pass
        else:
            raise AssertionError("the emitted module ran B, which takes the other branch")


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
@given(st.data())
def test_random_programs(data):
    program = generate(data)
    note(describe(program))
    try:
        check_program(program)
    finally:
        program.forget()


# --- the generator covers the table ------------------------------------------------------------


def test_every_user_op_can_be_generated():
    for op in USER_OPS:
        if op.elementwise:
            assert op.sympy is not None, op.name
            continue
        assert op.name in ARRAY_GENERATORS or (op.domain and op.domain.cases), (
            f"{op.name}: give it Domain cases (or a generator here) so the fuzzer can call it")


def test_thresholds_and_forms_come_from_the_table():
    assert set(THRESHOLDS) >= {"lt", "gt"}
    assert ("math", "sin") in FORMS["sin"] and ("np", "sin") in FORMS["sin"]
    assert ("np", "add") in FORMS["add"]
