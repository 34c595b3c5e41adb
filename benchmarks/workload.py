"""Deterministic scalar workloads for the benchmarks.

``generate(n_ops, seed)`` builds a straight-line program over three float inputs ``x, y, z``
from a realistic mix of ``math`` calls (sin, cos, exp, log, sqrt, tanh) and arithmetic
(``+ - * / **``), every primitive counted as one op. Inputs and intermediates are reused, every
value feeds the result (no dead code), and every value stays in a sane range at ``POINT``, so
the gradient is finite and well conditioned there.

From one program this module prints:

- ``function_source``: the plain user function gradgen and the peers differentiate, written a
  few ops per line the way a person writes a long formula;
- ``hand_grad_source``: the derivative a careful person writes by hand: the forward pass with
  every intermediate named, then one adjoint statement per value, in reverse order, that sums
  the contributions of its users and reuses forward values (``exp`` from its own output,
  ``tanh`` as ``1 - t*t``, ``sqrt`` as ``0.5 / s``, one shared quotient per division).

(``sympy.diff`` + ``sympy.cse`` of the 200-op expression did not finish in ten minutes, so the
reference is the hand-written reverse pass; ``run.py`` checks it against central differences.)
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass

INPUTS = ("x", "y", "z")
POINT = (0.7, 1.3, 0.4)

UNARY = ("sin", "cos", "tanh", "exp", "log", "sqrt")
CONSTANTS = (0.5, 1.5, 2.0, 0.25, 3.0)


@dataclass(frozen=True)
class Op:
    """``target = kind(*args)``; args are value names, or floats / ints for constants."""

    target: str
    kind: str  # a UNARY name, or add sub mul div pow cmul cadd
    args: tuple


def _apply(kind: str, vals: list[float]) -> float:
    if kind in UNARY:
        return getattr(math, kind)(vals[0])
    a, b = vals
    if kind in ("add", "cadd"):
        return a + b
    if kind == "sub":
        return a - b
    if kind in ("mul", "cmul"):
        return a * b
    if kind == "div":
        return a / b
    if kind == "pow":
        return a ** b
    raise ValueError(kind)


def _acceptable(kind: str, vals: list[float]) -> bool:
    a = vals[0]
    if kind in ("sin", "cos") and abs(a) > 20:
        return False
    if kind == "tanh" and abs(a) > 2.5:
        return False
    if kind == "exp" and abs(a) > 2.5:
        return False
    if kind in ("log", "sqrt") and a < 0.1:
        return False
    if kind == "div" and abs(vals[1]) < 0.3:
        return False
    return not (kind == "pow" and abs(a) > 4)


def generate(n_ops: int, seed: int = 0) -> list[Op]:
    """A program of exactly ``n_ops`` primitive ops whose last op is the result."""
    rng = random.Random(seed)
    values = dict(zip(INPUTS, POINT, strict=True))
    order = list(INPUTS)
    unused: list[str] = []  # computed values nobody has read yet, oldest first
    ops: list[Op] = []
    seen: set[tuple] = set()

    def pick(forced_unused: bool) -> str:
        if unused and (forced_unused or rng.random() < 0.55):
            return unused[rng.randrange(len(unused))]
        if rng.random() < 0.2 or len(order) == len(INPUTS):
            return rng.choice(INPUTS)
        return rng.choice(order[-8:])

    while len(ops) < n_ops:
        remaining = n_ops - len(ops)
        target = f"t{len(ops) + 1}"
        if len(unused) > 1 and remaining <= len(unused) - 1 + 2:
            # wind down: fold the values nobody read yet into the result, two at a time
            a, b = unused[-2], unused[-1]
            kind = rng.choice(("add", "mul")) if abs(values[a] * values[b]) < 50 else "add"
            args = (a, b)
        elif len(unused) <= 1 and remaining == 1 and unused:
            args = (unused[0],)
            kind = "sin"
        else:
            for _ in range(1000):
                roll = rng.random()
                force = len(unused) > 5
                if roll < 0.45:
                    kind = rng.choice(UNARY)
                    args = (pick(force),)
                elif roll < 0.9:
                    kind = rng.choice(("add", "sub", "mul", "mul", "div"))
                    args = (pick(force), pick(len(unused) > 3))
                    if args[0] == args[1] and kind in ("sub", "div"):
                        continue
                elif roll < 0.95:
                    kind = "pow"
                    args = (pick(force), rng.choice((2, 3)))
                else:
                    kind = rng.choice(("cmul", "cadd"))
                    c = rng.choice(CONSTANTS)
                    args = (c, pick(force)) if kind == "cmul" else (pick(force), c)
                if (kind, args) in seen:  # a careful person computes a value once
                    continue
                vals = [values[a] if isinstance(a, str) else a for a in args]
                if not _acceptable(kind, vals):
                    continue
                out = _apply(kind, vals)
                if math.isfinite(out) and 1e-2 < abs(out) < 20:
                    break
            else:
                raise RuntimeError("workload generator is stuck")
        vals = [values[a] if isinstance(a, str) else a for a in args]
        values[target] = _apply(kind, vals)
        for a in args:
            if isinstance(a, str) and a in unused:
                unused.remove(a)
        unused.append(target)
        order.append(target)
        ops.append(Op(target, kind, args))
        seen.add((kind, args))
        if kind in ("add", "mul"):
            seen.add((kind, args[::-1]))
    if unused != [ops[-1].target]:
        raise RuntimeError(f"dead values left in the workload: {unused}")
    return ops


# --- printing -------------------------------------------------------------------------------

_PREC = {"add": 5, "cadd": 5, "sub": 5, "mul": 6, "cmul": 6, "div": 6, "pow": 8}
_SYMBOL = {"add": "+", "cadd": "+", "sub": "-", "mul": "*", "cmul": "*", "div": "/"}
_ATOM = 100


def _const(c) -> str:
    return repr(c)


def _expr(op: Op, arg_text) -> tuple[str, int]:
    """Text and precedence of ``op`` given ``arg_text(arg) -> (text, prec)``."""
    if op.kind in UNARY:
        return f"math.{op.kind}({arg_text(op.args[0])[0]})", _ATOM
    if op.kind == "pow":
        text, prec = arg_text(op.args[0])
        base = text if prec > _PREC["pow"] else f"({text})"
        return f"{base} ** {op.args[1]}", _PREC["pow"]
    prec = _PREC[op.kind]
    (lt, lp), (rt, rp) = (arg_text(a) for a in op.args)
    left = lt if lp >= prec else f"({lt})"
    right = rt if rp > prec else f"({rt})"
    return f"{left} {_SYMBOL[op.kind]} {right}", prec


def function_source(ops: list[Op], name: str = "f", max_ops_per_line: int = 3) -> str:
    """The user function: a value read only once, by the next op, is written inline there."""
    uses: dict[str, int] = {}
    for op in ops:
        for a in op.args:
            if isinstance(a, str):
                uses[a] = uses.get(a, 0) + 1
    lines = [f"def {name}({', '.join(INPUTS)}):"]
    pending: tuple[str, str, int, int] | None = None  # (target, text, prec, ops in text)
    for i, op in enumerate(ops):
        merge = (pending is not None and pending[0] in op.args
                 and pending[3] + 1 <= max_ops_per_line)
        if pending is not None and not merge:
            lines.append(f"    {pending[0]} = {pending[1]}")
        held = pending if merge else None
        pending = None

        def arg_text(a, held=held):
            if not isinstance(a, str):
                return _const(a), _ATOM
            if held is not None and a == held[0]:
                return held[1], held[2]
            return a, _ATOM

        text, prec = _expr(op, arg_text)
        count = 1 + (held[3] if held is not None else 0)
        if i + 1 < len(ops) and uses.get(op.target) == 1 and op.target in ops[i + 1].args:
            pending = (op.target, text, prec, count)
        else:
            lines.append(f"    {op.target} = {text}")
    lines.append(f"    return {ops[-1].target}")
    return "\n".join(lines) + "\n"


def _term(scale: str | None, *factors: str) -> str:
    """``scale * f1 * f2 ...`` with a unit adjoint (``None``) left out."""
    parts = ([scale] if scale is not None else []) + list(factors)
    return " * ".join(parts) if parts else "1.0"


def hand_grad_source(ops: list[Op], name: str = "f_grad_by_hand") -> str:
    """Reverse mode written out by hand: one fused adjoint statement per value."""
    contributions: dict[str, list[tuple[str, str]]] = {}  # name -> [(sign, term)]
    out = ops[-1].target
    lines = [f"def {name}({', '.join(INPUTS)}):"]
    for op in ops:
        lines.append(f"    {op.target} = " + _expr(op, lambda v: (
            _const(v) if not isinstance(v, str) else v, _ATOM))[0])
    adjoint: dict[str, str | None] = {out: None}  # None: the unit seed, multiplied away
    for op in reversed(ops):
        t, a = op.target, op.args
        if t != out:
            terms = contributions[t]
            text = "".join(
                (f" {sign} " if k else ("-" if sign == "-" else "")) + term
                for k, (sign, term) in enumerate(terms))
            lines.append(f"    g_{t} = {text}")
            adjoint[t] = f"g_{t}"
        g = adjoint[t]

        def add(v, term, sign="+"):
            if isinstance(v, str):
                contributions.setdefault(v, []).append((sign, term))

        k = op.kind
        if k == "sin":
            add(a[0], _term(g, f"math.cos({a[0]})"))
        elif k == "cos":
            add(a[0], _term(g, f"math.sin({a[0]})"), "-")
        elif k == "tanh":
            add(a[0], _term(g, f"(1.0 - {t} * {t})"))
        elif k == "exp":
            add(a[0], _term(g, t))
        elif k == "log":
            add(a[0], f"{g or '1.0'} / {a[0]}")
        elif k == "sqrt":
            add(a[0], f"0.5 * {g} / {t}" if g else f"0.5 / {t}")
        elif k in ("add", "cadd"):
            if a[0] == a[1]:
                add(a[0], _term("2.0", *([g] if g else [])))
            else:
                add(a[0], g or "1.0")
                add(a[1], g or "1.0")
        elif k == "sub":
            add(a[0], g or "1.0")
            add(a[1], g or "1.0", "-")
        elif k in ("mul", "cmul"):
            if a[0] == a[1]:
                add(a[0], _term("2.0", *([g] if g else []), a[0]))
            else:
                add(a[0], _term(g, _const(a[1]) if not isinstance(a[1], str) else a[1]))
                add(a[1], _term(g, _const(a[0]) if not isinstance(a[0], str) else a[0]))
        elif k == "div":
            q = f"q_{t}"
            lines.append(f"    {q} = {g or '1.0'} / {a[1]}")
            add(a[0], q)
            add(a[1], f"{q} * {t}", "-")
        elif k == "pow":
            if a[1] == 2:
                add(a[0], _term("2.0", *([g] if g else []), a[0]))
            else:
                add(a[0], _term("3.0", *([g] if g else []), f"{a[0]} * {a[0]}"))
        else:
            raise ValueError(k)
    for v in INPUTS:
        terms = contributions.get(v)
        if not terms:
            lines.append(f"    g_{v} = 0.0")
            continue
        text = "".join(
            (f" {sign} " if k else ("-" if sign == "-" else "")) + term
            for k, (sign, term) in enumerate(terms))
        lines.append(f"    g_{v} = {text}")
    lines.append(f"    return {', '.join('g_' + v for v in INPUTS)}")
    return "\n".join(_drop_unused_forward(lines, len(ops))) + "\n"


def _drop_unused_forward(lines: list[str], n_forward: int) -> list[str]:
    """Leave out forward lines (the first ``n_forward`` after the ``def``) nobody reads."""
    forward, backward = lines[1:1 + n_forward], lines[1 + n_forward:]
    needed = set()
    for line in backward:
        needed.update(re.findall(r"[A-Za-z_]\w*", line.split("=", 1)[-1]))
    kept = []
    for line in reversed(forward):
        target, expr = (p.strip() for p in line.split("=", 1))
        if target in needed:
            needed.update(re.findall(r"[A-Za-z_]\w*", expr))
            kept.append(line)
    return [lines[0], *reversed(kept), *backward]


def evaluate(ops: list[Op], point=POINT) -> float:
    values = dict(zip(INPUTS, point, strict=True))
    for op in ops:
        values[op.target] = _apply(op.kind, [values[a] if isinstance(a, str) else a
                                             for a in op.args])
    return values[ops[-1].target]


# --- the checked-in 200-op fixture ----------------------------------------------------------

FIXTURE_OPS = 200
FIXTURE_SEED = 6  # a seed whose gradient at POINT is O(1) and agrees with central differences


def module_source(ops: list[Op], note: str) -> str:
    """A module holding the user function ``f`` and its hand-written gradient."""
    return (
        f'"""{note}"""\n\n'
        "import math\n\n\n"
        f"{function_source(ops)}\n\n"
        f"{hand_grad_source(ops)}"
    )


def fixture_source() -> str:
    ops = generate(FIXTURE_OPS, FIXTURE_SEED)
    return module_source(ops, (
        f"A {FIXTURE_OPS}-op scalar function of x, y, z and its hand-written gradient.\n\n"
        "Generated by `python benchmarks/workload.py` (workload.generate"
        f"({FIXTURE_OPS}, seed={FIXTURE_SEED})); do not edit by hand.\n"))


if __name__ == "__main__":
    import pathlib

    path = pathlib.Path(__file__).with_name("math200.py")
    path.write_text(fixture_source())
    print(f"wrote {path}")
