"""gradgen.check: prove generated gradients against sympy's derivative of the traced graph,
or confirm them numerically; name the op whose rule disagrees."""

from __future__ import annotations

import signal
import threading
from dataclasses import dataclass, field

import numpy as np

from .errors import GradgenError, GradientMismatch
from .ir import Graph, Node
from .ops._sym import sp

SYMBOLIC_SIZE_LIMIT = 64  # input elements per argument replayed as sympy symbols
PROOF_NODE_LIMIT = 60  # graph nodes under which a symbolic proof is attempted


@dataclass
class ArgumentResult:
    name: str
    method: str  # "proved", "sympy" or "finite differences"
    max_abs_error: float
    max_rel_error: float
    points: int


@dataclass
class CheckReport:
    function: str
    results: list[ArgumentResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return True

    def table(self) -> str:
        rows = [("argument", "method", "max abs error", "max rel error", "points")]
        for r in self.results:
            rows.append((r.name, r.method, f"{r.max_abs_error:.2e}", f"{r.max_rel_error:.2e}",
                         str(r.points)))
        widths = [max(len(row[i]) for row in rows) for i in range(5)]
        lines = [f"gradient of {self.function}:"]
        for k, row in enumerate(rows):
            lines.append(("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))).rstrip())
            if k == 0:
                lines.append("  " + "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


# --- symbolic replay ---------------------------------------------------------------------


def _elementwise(fn, *args):
    if any(isinstance(a, np.ndarray) for a in args):
        return np.frompyfunc(fn, len(args), 1)(*args)
    return fn(*args)


def _to_sympy_constant(value):
    if isinstance(value, np.ndarray):
        return np.vectorize(_to_sympy_constant, otypes=[object])(value) if value.size else value
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return sp.Integer(int(value))
    return sp.Float(float(value), 17)


def symbolic_values(graph: Graph, inputs: dict[Node, object]) -> dict[Node, object]:
    """Each node's value as a sympy expression (object arrays for arrays). Locally constant
    ops (comparisons, floor, ...) keep their traced values: their derivative is zero."""
    values = graph.meta["values"]
    env: dict[Node, object] = {}
    for node in graph.nodes:
        op = node.op
        if op.name == "input":
            env[node] = inputs.get(node, _to_sympy_constant(values[node]))
        elif op.name == "const":
            env[node] = _to_sympy_constant(node.attrs["value"])
        elif op.name == "guard":
            continue
        elif op.name == "seed" or op.nondiff:
            env[node] = _to_sympy_constant(values[node])
        else:
            if op.sympy is None:
                raise GradgenError(f"op {op.name} has no sympy meaning; it cannot be checked",
                                   node.loc)
            args = [env[r.node] for r in node.inputs]
            if op.elementwise:
                env[node] = _elementwise(lambda *a, _op=op, _n=node: _op.sympy(*a), *args)
            else:
                env[node] = op.sympy(*args, **node.attrs)
    return env


def _symbols_for(name: str, value):
    if np.ndim(value) == 0:
        return sp.Symbol(name, real=True)
    flat = [sp.Symbol(f"{name}_{'_'.join(map(str, idx))}", real=True)
            for idx in np.ndindex(np.shape(value))]
    return np.array(flat, dtype=object).reshape(np.shape(value))


# --- the check ---------------------------------------------------------------------------


def check(fn, *args, argnums=0, points: int = 5, rtol: float = 1e-7, atol: float = 1e-9,
          seed: int = 0, prove_seconds: float = 2.0) -> CheckReport:
    """Compare the generated gradient with sympy's derivative of the traced graph at ``args``
    and at ``points`` nearby points on the same guard path (finite differences along random
    directions for arguments with more than SYMBOLIC_SIZE_LIMIT elements)."""
    from .api import _normalize_argnums
    from .build import Request, build
    from .compile import load_module

    nums, as_tuple = _normalize_argnums(argnums)
    built = build(fn, args, Request(nums, as_tuple))
    namespace = load_module(built.source, built.fname)
    grad_fn = namespace[f"{built.fname}_grad"]
    guard_failure = namespace.get("GuardFailure", ())
    forward = built.forward
    names = forward.meta["arg_names"]
    nums = tuple(a % len(args) for a in nums)
    by_index = {n.attrs["index"]: n for n in forward.inputs}

    symbols: dict[int, object] = {}
    for a in nums:
        if np.size(args[a]) <= SYMBOLIC_SIZE_LIMIT:
            symbols[a] = _symbols_for(names[a], args[a])
    out_expr = None
    if symbols:
        env = symbolic_values(forward, {by_index[a]: s for a, s in symbols.items()})
        out_expr = env[forward.outputs[0].node]
        if isinstance(out_expr, np.ndarray):
            out_expr = out_expr.reshape(-1)[0]
    rng = np.random.default_rng(seed)
    samples = [args] + _nearby_points(args, nums, points, rng, grad_fn, guard_failure)

    report = CheckReport(built.fname)
    worst = (0.0, None)
    for k, a in enumerate(nums):
        errors_abs, errors_rel = [], []
        if a in symbols:
            flat_syms = list(np.ravel(symbols[a])) if np.ndim(args[a]) else [symbols[a]]
            derivs = [sp.diff(out_expr, s) for s in flat_syms]
            all_syms = [s for b in sorted(symbols) for s in np.ravel(symbols[b])]
            fns = sp.lambdify(all_syms, derivs, modules=["numpy", "math"])
            method = "sympy"
        for point in samples:
            got = _as_tuple(grad_fn(*point), as_tuple)[k]
            if a in symbols:
                sym_args = [float(v) for b in sorted(symbols) for v in np.ravel(point[b])]
                want = np.reshape(np.array(fns(*sym_args), dtype=float), np.shape(args[a]))
            else:
                method = "finite differences"
                want = None
                abs_err, scale = _directional_error(fn, point, a, got, rng)
                errors_abs.append(abs_err)
                errors_rel.append(abs_err / max(scale, 1e-300))
                continue
            diff = np.abs(np.asarray(got, dtype=float) - want)
            errors_abs.append(float(np.max(diff)) if diff.size else 0.0)
            scale = float(np.max(np.abs(want))) if np.size(want) else 0.0
            errors_rel.append(errors_abs[-1] / max(scale, 1e-300))
        max_abs, max_rel = max(errors_abs), max(errors_rel)
        tolerance_rel = rtol if method != "finite differences" else max(rtol, 1e-5)
        bad = max_abs > atol and max_rel > tolerance_rel
        small = a in symbols and len(forward.nodes) <= PROOF_NODE_LIMIT
        if not bad and small and _prove(built.joint, symbols, derivs, k, prove_seconds):
            method = "proved"
        report.results.append(ArgumentResult(names[a], method, max_abs, max_rel, len(samples)))
        if bad and max_rel > worst[0]:
            worst = (max_rel, (names[a], max_abs, max_rel))
    if worst[1] is not None:
        name, max_abs, max_rel = worst[1]
        culprit = localize(forward, rtol=max(rtol, 1e-6))
        where = f"; the rule that disagrees: {culprit}" if culprit else ""
        error = GradientMismatch(
            f"the gradient of {built.fname} with respect to {name} disagrees with the reference "
            f"(max abs error {max_abs:.3g}, max rel error {max_rel:.3g}){where}",
            forward.meta.get("loc"))
        error.report = report
        error.report_text = report.table() + "\n"
        raise error
    return report


def _as_tuple(result, as_tuple):
    return result if as_tuple else (result,)


def _nearby_points(args, nums, count, rng, grad_fn, guard_failure):
    """Points near ``args`` that stay on the traced guard path."""
    out = []
    tries = 0
    while len(out) < count and tries < count * 8:
        tries += 1
        scale = 1e-2 / (1 + tries // count)
        point = list(args)
        for a in nums:
            value = args[a]
            noise = rng.normal(size=np.shape(value)) * scale * (1 + np.abs(value))
            moved = np.asarray(value) + noise
            point[a] = float(moved) if isinstance(value, float) else moved.astype(
                np.asarray(value).dtype)
        try:
            grad_fn(*point)
        except guard_failure:
            continue
        except (ArithmeticError, ValueError):
            continue
        out.append(tuple(point))
    return out


def _directional_error(fn, point, a, got, rng):
    """|grad . v - (f(x + hv) - f(x - hv)) / 2h| along a random unit direction v."""
    x = np.asarray(point[a], dtype=float)
    v = rng.normal(size=x.shape)
    v /= np.linalg.norm(v) or 1.0
    h = 1e-6 * (1 + float(np.max(np.abs(x))))

    def at(t):
        moved = list(point)
        moved[a] = (x + t * v).astype(np.asarray(point[a]).dtype)
        return float(np.sum(fn(*moved)))

    numeric = (at(h) - at(-h)) / (2 * h)
    analytic = float(np.sum(np.asarray(got, dtype=float) * v))
    return abs(analytic - numeric), max(abs(numeric), abs(analytic))


class _Timeout(Exception):
    pass


def _prove(vg_graph, symbols, derivs, k, seconds) -> bool:
    """Try to show the emitted backward equals sympy's derivative exactly."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal,
                                                                                 "SIGALRM"):
        return False

    def on_alarm(signum, frame):
        raise _Timeout

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        inputs = {}
        for node in vg_graph.inputs:
            index = node.attrs["index"]
            if index in symbols:
                inputs[node] = symbols[index]
        env = symbolic_values(vg_graph, inputs)
        emitted = env[vg_graph.outputs[1 + k].node]
        emitted = list(np.ravel(emitted)) if isinstance(emitted, np.ndarray) else [emitted]
        return all(sp.simplify(e - d) == 0 for e, d in zip(emitted, derivs, strict=True))
    except (_Timeout, TypeError, ValueError, ZeroDivisionError):
        return False
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# --- localisation ------------------------------------------------------------------------


def localize(graph: Graph, rtol: float = 1e-6) -> str | None:
    """Check each node's VJP alone, at its traced inputs, against sympy; name the first one
    that disagrees with its source line."""
    from .api import GradFunction

    values = graph.meta["values"]
    seen: set[tuple] = set()
    for node in graph.nodes:
        op = node.op
        if op.vjp is None or op.nondiff or op.name in ("input", "const", "adjoint", "copy"):
            continue
        ins = [values[r.node] for r in node.inputs]
        float_inputs = [i for i, v in enumerate(ins) if np.asarray(v).dtype.kind == "f"]
        if not float_inputs:
            continue
        key = (op.name, tuple(np.shape(v) for v in ins), tuple(sorted(node.attrs)))
        if key in seen:
            continue
        seen.add(key)
        rng = np.random.default_rng(1)
        weight = rng.normal(size=np.shape(values[node]))

        def alone(*xs, _op=op, _attrs=node.attrs, _w=weight):
            return np.sum(_w * _op(*xs, **_attrs))

        try:
            got = GradFunction(alone, tuple(float_inputs))(*ins)
        except GradgenError:
            continue
        syms = [_symbols_for(f"u{i}", v) if i in float_inputs else _to_sympy_constant(v)
                for i, v in enumerate(ins)]
        if op.elementwise:
            result = _elementwise(lambda *a, _op=op: _op.sympy(*a), *syms)
        else:
            result = op.sympy(*syms, **node.attrs)
        total = np.sum(np.asarray(_to_sympy_constant(weight), dtype=object) * result)
        for i, g in zip(float_inputs, got, strict=True):
            flat = list(np.ravel(syms[i])) if isinstance(syms[i], np.ndarray) else [syms[i]]
            subs = {s: float(v) for j in float_inputs
                    for s, v in zip(np.ravel(syms[j]), np.ravel(ins[j]), strict=True)}
            want = np.array([float(sp.diff(total, s).subs(subs)) for s in flat])
            have = np.ravel(np.asarray(g, dtype=float))
            if not np.allclose(have, want, rtol=rtol, atol=1e-9 * (1 + np.max(np.abs(want)))):
                where = f" at {node.loc}" if node.loc else ""
                label = op.extra.get("describe", lambda n: f"op {n.op.name}")(node)
                return f"{label}{where} (input {i}: VJP gives {have[:3]}, sympy {want[:3]})"
    return None


__all__ = ["ArgumentResult", "CheckReport", "check", "localize"]
