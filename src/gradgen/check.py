"""gradgen.check: prove generated gradients against sympy's derivative of the traced graph,
or confirm them numerically; name the op whose rule disagrees."""

from __future__ import annotations

import contextlib
import functools
import gc
import signal
import threading
import time
import weakref
from dataclasses import dataclass, field

import numpy as np

from .abstract import concrete, evaluate
from .errors import GradgenError, GradientMismatch
from .ir import Graph, Node
from .ops._sym import sp
from .pytree import flatten, unflatten
from .symbolic import apply_elementwise, symbolic_values, to_sympy_constant

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


def _symbols_for(name: str, value):
    if np.ndim(value) == 0:
        return sp.Symbol(name, real=True)
    flat = [sp.Symbol(f"{name}_{'_'.join(map(str, idx))}", real=True)
            for idx in np.ndindex(np.shape(value))]
    return np.array(flat, dtype=object).reshape(np.shape(value))


# --- the check ---------------------------------------------------------------------------


def check(fn, *args, argnums=0, points: int = 5, rtol: float = 1e-7, atol: float = 1e-9,
          seed: int = 0, prove_seconds: float = 2.0,
          symbolic_seconds: float = 20.0) -> CheckReport:
    """Compare the generated gradient with sympy's derivative of the traced graph at ``args``
    and at ``points`` nearby points on the same guard path (finite differences along random
    directions for arguments with more than SYMBOLIC_SIZE_LIMIT elements, and for all of them
    once the sympy replay and differentiation have used ``symbolic_seconds``: a model's
    check should take seconds, not the minutes sympy needs for a large expression). Raises
    GradientMismatch naming the worst entry and the op or Function whose rule disagrees."""
    from .api import _normalize_argnums, load_function
    from .build import Request, build

    if not isinstance(points, int) or points < 0:
        raise GradgenError(f"points must be a count of nearby points (0 or more), not {points!r}")
    nums, as_tuple = _normalize_argnums(argnums)
    built = build(fn, args, Request(nums, as_tuple))
    namespace = load_function(built, f"{built.fname}_grad")
    grad_fn = namespace[f"{built.fname}_grad"]
    guard_failure = namespace.get("GuardFailure", ())
    forward = built.forward
    leaves = forward.meta["leaves"]
    by_index = {n.attrs["index"]: n for n in forward.inputs}
    nums = tuple(a % len(args) for a in nums)
    # the gradient leaves come back in argnums order, each argument's leaves in order
    order = [k for a in nums for k, leaf in enumerate(leaves) if k in built.wrt and leaf.arg == a]

    symbols = {k: _symbols_for(leaves[k].name, leaves[k].value) for k in order
               if np.size(leaves[k].value) <= SYMBOLIC_SIZE_LIMIT}
    out_expr = None
    budget = _Budget(symbolic_seconds)
    if symbols:
        try:
            with budget:
                env = symbolic_values(forward, {by_index[k]: s for k, s in symbols.items()})
                out_expr = env[forward.outputs[0].node]
        except _SYMPY_GAVE_UP:
            symbols = {}
        if isinstance(out_expr, np.ndarray):
            out_expr = out_expr.reshape(-1)[0]
    rng = np.random.default_rng(seed)
    base = [leaf.value for leaf in leaves]
    call = _caller(grad_fn, forward)
    samples = [base] + _nearby_points(base, order, points, rng, call, guard_failure, forward)
    results = [flatten(call(point))[0] for point in samples]
    sym_order = sorted(symbols)

    report = CheckReport(built.fname)
    worst = (0.0, None)
    for position, k in enumerate(order):
        errors_abs, errors_rel = [], []
        symbolic = k in symbols
        if symbolic:
            try:
                with budget:
                    derivs = [sp.diff(out_expr, s) for s in np.ravel(symbols[k])]
                    all_syms = [s for j in sym_order for s in np.ravel(symbols[j])]
                    fns = _lambdify(all_syms, derivs)
            except _SYMPY_GAVE_UP:
                symbolic = False
        method = "sympy" if symbolic else "finite differences"
        for point, result in zip(samples, results, strict=True):
            got = np.asarray(result[position], dtype=float)
            if symbolic:
                sym_args = [float(v) for j in sym_order for v in np.ravel(point[j])]
                want = np.reshape(np.array(fns(*sym_args), dtype=float), got.shape)
                # the same inf (sqrt's at 0) or both nan is agreement; one finite and the other
                # not is the largest disagreement there is (inf), never a nan that compares
                # as small
                same = (got == want) | np.isnan(got) & np.isnan(want)
                with np.errstate(invalid="ignore"):
                    diff = np.where(same, 0.0, np.abs(got - want))
                diff[np.isnan(diff)] = np.inf
                errors_abs.append(float(np.max(diff)) if diff.size else 0.0)
                scale = float(np.max(np.abs(want))) if want.size else 0.0
            else:
                abs_err, scale = _directional_error(fn, forward, point, k, got, rng)
                errors_abs.append(abs_err)
            errors_rel.append(errors_abs[-1] / max(scale, 1e-300))
        max_abs, max_rel = max(errors_abs), max(errors_rel)
        # a float32 gradient is only as exact as float32 arithmetic
        eps = np.finfo(np.result_type(leaves[k].value)).eps
        tolerance_rel = max(rtol, 100 * eps) if method != "finite differences" else max(
            rtol, 1e-5)
        bad = max_abs > atol and max_rel > tolerance_rel
        small = symbolic and len(forward.nodes) <= PROOF_NODE_LIMIT
        if not bad and small and _prove(built.joint, symbols, derivs, built.wrt.index(k),
                                        prove_seconds):
            method = "proved"
        name = leaves[k].name
        report.results.append(ArgumentResult(name, method, max_abs, max_rel, len(samples)))
        if bad and max_rel > worst[0]:
            worst = (max_rel, (name, max_abs, max_rel))
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


def _lambdify(symbols, exprs):
    """sympy.lambdify with NumPy, minus two costs that made a 5x4 softmax's check take
    minutes: NumPy's printer rewrites each Heaviside (``np.max``'s derivative has them) as a
    Piecewise, then simplifies every Piecewise condition that holds an if-then-else. Here a
    Heaviside prints as np.heaviside, and an if-then-else as the and/or it stands for."""
    return sp.lambdify(symbols, exprs, modules=["numpy", "math"], printer=_printer())


@functools.cache
def _printer_class():
    from sympy.logic.boolalg import ITE
    from sympy.printing.numpy import NumPyPrinter

    class Printer(NumPyPrinter):
        def _print_Piecewise(self, expr):
            expr = expr.replace(lambda e: isinstance(e, ITE),
                                lambda e: e.to_nnf(simplify=False))
            return super()._print_Piecewise(expr)

        def _print_Heaviside(self, expr):  # else: rewritten as a Piecewise first, slowly
            at_zero = expr.args[1] if len(expr.args) > 1 else sp.S.Half  # sympy's H(0)
            return (f"{self._module_format(self._module + '.heaviside')}"
                    f"({self._print(expr.args[0])}, {self._print(at_zero)})")

    return Printer


def _printer():
    # the settings lambdify gives its own NumPy printer
    return _printer_class()({"fully_qualified_modules": False, "inline": True,
                             "allow_unknown_functions": True, "user_functions": {}})


def _caller(grad_fn, forward):
    """Call the emitted gradient with a flat list of leaf values."""
    trees = forward.meta["arg_trees"]

    def call(leaf_values):
        return grad_fn(*_rebuild(trees, leaf_values))

    return call


def _rebuild(trees, leaf_values):
    args, start = [], 0
    for tree in trees:
        args.append(unflatten(tree, leaf_values[start:start + tree.num_leaves]))
        start += tree.num_leaves
    return args


def _nearby_points(base, order, count, rng, call, guard_failure, forward):
    """Leaf values near ``base`` that stay on the traced guard path and keep every locally
    constant value (see _same_local_constants)."""
    out = []
    tries = 0
    while len(out) < count and tries < count * 8:
        tries += 1
        scale = 1e-2 / (1 + tries // count)
        point = list(base)
        for k in order:
            value = base[k]
            noise = rng.normal(size=np.shape(value)) * scale * (1 + np.abs(value))
            moved = np.asarray(value) + noise
            point[k] = float(moved) if isinstance(value, float) else moved.astype(
                np.asarray(value).dtype)
        try:
            call(point)
        except guard_failure:
            continue
        except (ArithmeticError, ValueError):
            continue
        if not _same_local_constants(forward, point):
            continue
        out.append(point)
    return out


def _same_local_constants(forward: Graph, point: list) -> bool:
    """Whether every locally constant value (a comparison, mask, floor, argmax...) at
    ``point`` equals the traced one. The symbolic reference keeps those values as traced
    (symbolic_values), so a point that flips one (``np.where(a < delta, ...)`` with some
    ``a`` near ``delta``) is on another path of the function: its reference would be the
    traced branch's derivative, not the function's, and a right gradient would look wrong."""
    traced = forward.meta["values"]
    env: dict[Node, object] = {n: point[n.attrs["index"]] for n in forward.inputs}
    env.update((n, concrete(traced, n.out)) for n in forward.nodes if n.op.name == "seed")
    # an op this evaluator cannot replay stops it: the point is judged by the values computed
    # before it (a mismatch elsewhere stays loud)
    with contextlib.suppress(Exception):
        evaluate(forward.nodes, env)
    return all(_equal_values(env[n], _traced(traced, n))
               for n in forward.nodes if n.op.nondiff and n in env)


def _traced(values: dict, node: Node):
    concrete(values, node.out)  # computes the node when the build left it pending
    return values[node]


def _equal_values(a, b) -> bool:
    if isinstance(a, tuple):
        return len(a) == len(b) and all(map(_equal_values, a, b))
    return np.shape(a) == np.shape(b) and bool(np.all(np.asarray(a) == np.asarray(b)))


def _directional_error(fn, forward, point, k, got, rng):
    """|grad . v - (f(x + hv) - f(x - hv)) / 2h| along a random unit direction v."""
    x = np.asarray(point[k], dtype=float)
    v = rng.normal(size=x.shape)
    v /= np.linalg.norm(v) or 1.0
    h = 1e-6 * (1 + float(np.max(np.abs(x))))
    trees = forward.meta["arg_trees"]

    def at(t):
        moved = list(point)
        moved[k] = (x + t * v).astype(np.asarray(point[k]).dtype)
        return float(np.sum(fn(*_rebuild(trees, moved))))

    numeric = (at(h) - at(-h)) / (2 * h)
    analytic = float(np.sum(got * v))
    return abs(analytic - numeric), max(abs(numeric), abs(analytic))


class _Timeout(BaseException):
    """The budget is spent. A BaseException: sympy's own ``except Exception`` blocks (there
    are many) must not swallow it, or simplify runs on for minutes with no alarm left."""


# sympy walks expressions recursively: one nested a few hundred deep (a 200-step loop of
# np.sin) exceeds Python's recursion limit, and the reference falls back to finite
# differences, as after a timeout
_SYMPY_GAVE_UP = (_Timeout, RecursionError)


def _can_time_out() -> bool:
    return threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGALRM")


class _Budget:
    """Seconds of sympy work shared by several steps: each ``with budget:`` block raises
    _Timeout once the total is spent (no limit off the main thread, where no alarm can be
    set; sympy then simply takes as long as it takes)."""

    REPEAT = 0.1  # seconds between alarms once the budget is spent (see _on_alarm)

    def __init__(self, seconds: float):
        self.left = seconds
        self.armed = False

    def __enter__(self):
        if not _can_time_out():
            return self
        if self.left <= 0:
            raise _Timeout
        self.started = time.monotonic()
        self.armed = True
        self.previous = signal.signal(signal.SIGALRM, self._on_alarm)
        signal.setitimer(signal.ITIMER_REAL, self.left, self.REPEAT)
        return self

    def __exit__(self, *exc):
        if _can_time_out():
            self.armed = False  # first: an alarm arriving from here on raises nothing
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)
            self.left -= time.monotonic() - self.started

    def _on_alarm(self, signum, frame):
        # The alarm repeats until the block ends: one swallowed by a bare ``except:`` in
        # sympy is followed by the next, a tenth of a second later. One that lands in a
        # finalizer or a gc callback raises nothing: Python would print the exception there
        # ("Exception ignored in ...") and go on; the next alarm raises in sympy's code.
        if self.armed and not _in_finalizer(frame):
            raise _Timeout


def _in_finalizer(frame) -> bool:
    """Does ``frame`` run inside a ``__del__``, a weakref finalizer or a gc callback, where an
    exception cannot reach the code that the garbage collector interrupted?"""
    codes = {getattr(callback, "__code__", None) for callback in gc.callbacks}
    codes.add(weakref.finalize.__call__.__code__)
    while frame is not None:
        if frame.f_code in codes or frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def _prove(vg_graph, symbols, derivs, position, seconds) -> bool:
    """Try to show the emitted backward equals sympy's derivative exactly."""
    if not _can_time_out():
        return False
    try:
        with _Budget(seconds):
            return _proved(vg_graph, symbols, derivs, position)
    except (*_SYMPY_GAVE_UP, TypeError, ValueError, ZeroDivisionError):
        return False


def _proved(vg_graph, symbols, derivs, position) -> bool:
    inputs = {node: symbols[node.attrs["index"]] for node in vg_graph.inputs
              if node.attrs["index"] in symbols}
    env = symbolic_values(vg_graph, inputs)
    emitted = env[vg_graph.outputs[1 + position].node]
    emitted = list(np.ravel(emitted)) if isinstance(emitted, np.ndarray) else [emitted]
    return all(sp.simplify(e - d) == 0 for e, d in zip(emitted, derivs, strict=True))


# --- localisation ------------------------------------------------------------------------


def localize(graph: Graph, rtol: float = 1e-6) -> str | None:
    """Check each node's VJP alone, at its traced inputs, against sympy; name the first one
    that disagrees with its source line."""
    from .api import GradFunction

    values = graph.meta["values"]
    culprit = _localize_functions(graph, values, rtol)
    if culprit:
        return culprit
    seen: set[tuple] = set()
    for node in graph.nodes:
        op = node.op
        if op.vjp is None or op.nondiff or op.name in ("input", "const", "adjoint", "copy",
                                                       "function_output"):
            continue
        ins = [concrete(values, r) for r in node.inputs]
        float_inputs = [i for i, v in enumerate(ins) if np.asarray(v).dtype.kind == "f"]
        if not float_inputs:
            continue
        key = (op.name, tuple(np.shape(v) for v in ins), tuple(sorted(node.attrs)))
        if key in seen:
            continue
        seen.add(key)
        rng = np.random.default_rng(1)
        weight = rng.normal(size=node.aval.shape)

        def alone(*xs, _op=op, _attrs=node.attrs, _w=weight):
            return np.sum(_w * _op(*xs, **_attrs))

        try:
            got = GradFunction(alone, tuple(float_inputs))(*ins)
        except GradgenError:
            continue
        syms = [_symbols_for(f"u{i}", v) if i in float_inputs else to_sympy_constant(v)
                for i, v in enumerate(ins)]
        if op.elementwise:
            result = apply_elementwise(op.sympy, *syms)
        else:
            result = op.sympy(*syms, **node.attrs)
        total = np.sum(np.asarray(to_sympy_constant(weight), dtype=object) * result)
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


def _localize_functions(graph: Graph, values, rtol: float) -> str | None:
    """A user Function whose backward disagrees with the derivative of its own forward."""
    from .api import GradFunction
    from .function import Context, backward_loc, function_groups

    for (_, refs), nodes in function_groups(graph).items():
        cls = nodes[0].attrs["function"]
        ins = [concrete(values, r) for r in refs[:nodes[0].attrs["n_args"]]]
        floats = [i for i, v in enumerate(ins) if np.asarray(v).dtype.kind == "f"]
        if not floats:
            continue
        rng = np.random.default_rng(2)
        weights = [rng.normal(size=n.aval.shape) for n in nodes]
        indices = [n.attrs["index"] for n in nodes]

        def total(outs, _w=weights, _idx=indices):
            outs = outs if isinstance(outs, tuple) else (outs,)
            return sum(np.sum(w * outs[i]) for w, i in zip(_w, _idx, strict=True))

        def by_rule(*xs, _cls=cls):
            return total(_cls.apply(*xs))

        def by_forward(*xs, _cls=cls):
            return total(_cls.forward(Context(), *xs))

        try:
            want = GradFunction(by_forward, tuple(floats))(*ins)
            got = GradFunction(by_rule, tuple(floats))(*ins)
        except GradgenError:
            continue
        for i, g, w in zip(floats, got, want, strict=True):
            if not np.allclose(g, w, rtol=rtol, atol=1e-9 * (1 + np.max(np.abs(w)))):
                where = backward_loc(cls)
                at = f" ({where})" if where else ""
                return (f"{cls.__name__}.backward{at} gives {np.ravel(g)[:3]} for input {i}, "
                        f"but the derivative of {cls.__name__}.forward is {np.ravel(w)[:3]}")
    return None
