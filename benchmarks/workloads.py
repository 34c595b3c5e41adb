"""The seven benchmark workloads (and one extra), each with a gradient written by hand.

Each workload names a user function in a file of its own (examples/*.py, benchmarks/models.py,
benchmarks/math200.py), so gradgen's first call reads the user's file as it would for a user.
The hand-written gradients below are what a careful person writes in plain NumPy / ``math``:
the forward values they need computed once, adjoints fused, batched matrix products instead of
per-step outer products, no scatter where a slice assignment does.

    python benchmarks/workloads.py

checks every hand-written gradient against central differences (at small sizes) and against
gradgen's gradient (at the benchmark sizes); run.py checks every contender against the
hand-written gradient again before timing.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
EXAMPLES = ROOT / "examples"
POINT = (0.7, 1.3, 0.4)  # where the scalar workloads are differentiated


def load_file(path: Path, name: str | None = None):
    """Import a file as a module of its own (a user's file, not part of a package)."""
    spec = importlib.util.spec_from_file_location(name or f"bench_user_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- hand-written gradients ---------------------------------------------------------------------


def scalar_loop_grad_by_hand(x, y, z, steps=20):
    """d/dx, d/dy, d/dz of models.scalar_loop: the loop forward keeping what the backward
    needs, then the loop backward."""
    tape = []
    h = x
    for _ in range(steps):
        s = math.sin(h)
        a = s * y + z
        b = math.exp(-0.5 * a * a)
        t = math.tanh(h * b + a)
        tape.append((h, a, b, s, t))
        h = h + t
    g_h, g_y, g_z = 1.0, 0.0, 0.0
    for h, a, b, s, t in reversed(tape):
        g_u = g_h * (1.0 - t * t)  # u = h * b + a, t = tanh(u)
        g_a = g_u * (1.0 - h * b * a)  # a reaches u directly and through b = exp(-a*a/2)
        g_h += g_u * b + g_a * y * math.cos(h)
        g_y += g_a * s
        g_z += g_a
    return g_h, g_y, g_z


def chain_grad_by_hand(x):
    """d/dx of models.chain, every forward value computed once."""
    s = np.sin(x)
    e = np.exp(s)
    p = s * e
    t = np.tanh(p)
    u = t + x
    c = np.cos(u)
    r = np.sqrt(c * c + 1.0)
    log_r = np.log(r)
    q = log_r * x
    a = np.arctan(q) - e
    m = np.exp(-(a * a))
    w = m / r
    log1p_w = np.log1p(w)
    v = log1p_w * u
    # backward, one fused expression per value
    g_v = 2.0 * v
    g_w = g_v * u / (1.0 + w)
    g_u = g_v * log1p_w
    g_a = -2.0 * a * m / r * g_w
    g_q = g_a / (1.0 + q * q)
    g_r = (g_q * x - g_w * w) / r  # through log(r) and through w = m / r
    g_u -= g_r * c / r * np.sin(u)
    g_p = g_u * (1.0 - t * t)
    g_e = g_p * s - g_a
    return g_q * log_r + g_u + (g_p * e + g_e * e) * np.cos(x)


def rnn_grad_by_hand(W, U, xs, target):
    """d/dW and d/dU of models.rnn: backpropagation through time, one matrix-vector product
    per step, the weight gradients as two batched products at the end."""
    T, n = xs.shape[0], W.shape[0]
    hs = np.zeros((T + 1, n))  # hs[t + 1] is the state after step t
    inputs = xs @ U.T  # U @ xs[t] for every t at once
    for t in range(T):
        hs[t + 1] = np.tanh(W @ hs[t] + inputs[t])
    d_a = np.empty((T, n))  # adjoint of each step's pre-activation
    g_h = hs[T] - target
    for t in range(T - 1, -1, -1):
        d_a[t] = g_h * (1.0 - hs[t + 1] * hs[t + 1])
        g_h = d_a[t] @ W
    return d_a.T @ hs[:-1], d_a.T @ xs


def logistic_grad_by_hand(w, b, X, y, lam=0.01):
    """d/dw and d/db of mean(logaddexp(0, -y * (X @ w + b))) + lam / 2 * |w|^2."""
    margin = y * (X @ w + b)
    # d logaddexp(0, -m) / dm = -sigmoid(-m) = -exp(-logaddexp(0, m)), stable for any m
    s = y * np.exp(-np.logaddexp(0.0, margin)) * (-1.0 / X.shape[0])
    return X.T @ s + lam * w, float(np.sum(s))


def mlp_grad_by_hand(params, X, y):
    """d/dparams of the mean softmax cross-entropy of the tanh MLP in examples/mlp.py."""
    W1, b1, W2, b2 = params["W1"], params["b1"], params["W2"], params["b2"]
    n = X.shape[0]
    h = np.tanh(X @ W1 + b1)
    logits = h @ W2 + b2
    e = np.exp(logits - np.max(logits, axis=1, keepdims=True))
    d_logits = e / np.sum(e, axis=1, keepdims=True)  # softmax
    d_logits[np.arange(n), y] -= 1.0
    d_logits /= n
    d_a = (d_logits @ W2.T) * (1.0 - h * h)
    return {"W1": X.T @ d_a, "b1": d_a.sum(axis=0), "W2": h.T @ d_logits,
            "b2": d_logits.sum(axis=0)}


def rosenbrock_grad_by_hand(x):
    """The banded Rosenbrock gradient: one buffer, two slice updates."""
    head = x[:-1]
    d = x[1:] - head * head
    g = np.empty_like(x)
    g[:-1] = -400.0 * head * d - 2.0 * (1.0 - head)
    g[-1] = 0.0
    g[1:] += 200.0 * d
    return g


def math200_grad_by_hand(x, y, z):
    import math200

    return math200.f_grad_by_hand(x, y, z)


# --- arguments ----------------------------------------------------------------------------------


def _point(small: bool):
    return POINT


def _chain_args(small: bool):
    return (np.random.default_rng(0).uniform(-1.0, 1.0, size=7 if small else 1_000_000),)


def _rnn_args(small: bool):
    T, n, d = (5, 4, 3) if small else (50, 64, 32)
    rng = np.random.default_rng(0)
    W = 0.5 * rng.normal(size=(n, n)) / np.sqrt(n)
    U = rng.normal(size=(n, d)) / np.sqrt(d)
    xs = rng.normal(size=(T, d))
    target = 0.5 * rng.normal(size=n)
    return W, U, xs, target


def _example_args(example: str, small_sizes: dict, sizes: dict):
    def make(small: bool):
        return load_file(EXAMPLES / f"{example}.py").example_args(
            **(small_sizes if small else sizes))
    return make


# --- the workloads ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    key: str  # short name: logs, command lines, pickles
    title: str  # for the report
    path: Path  # the file holding the user function
    fn_name: str
    argnums: int | tuple
    make_args: Callable[[bool], tuple]  # make_args(small): benchmark size, or small for FD
    hand: Callable  # the hand-written gradient, same arguments as the function
    library: str  # "math" (scalar code) or "np": the module the peers rebind
    note: str = ""
    elements: int = 0  # floats per array argument, for the memory target (1e6 workloads)
    extra: bool = False  # information only, not one of the seven

    def function(self):
        return getattr(load_file(self.path), self.fn_name)


WORKLOADS = [
    Workload("scalar", "200 scalar `math` ops, 20-step loop", HERE / "models.py", "scalar_loop",
             (0, 1, 2), _point, scalar_loop_grad_by_hand, "math",
             "`models.scalar_loop`: `for _ in range(20)` over a 10-op body (sin, exp, tanh, "
             "`* +`), 0-d float inputs"),
    Workload("rosen1e3", "Rosenbrock, 1e3 floats", EXAMPLES / "rosenbrock.py", "rosenbrock", 0,
             _example_args("rosenbrock", {"n": 9}, {"n": 1000}), rosenbrock_grad_by_hand, "np",
             "`examples/rosenbrock.py`: `x[1:]` and `x[:-1]`"),
    Workload("rosen1e6", "Rosenbrock, 1e6 floats", EXAMPLES / "rosenbrock.py", "rosenbrock", 0,
             _example_args("rosenbrock", {"n": 9}, {"n": 1_000_000}), rosenbrock_grad_by_hand,
             "np", "the same function on 1e6 floats", elements=1_000_000),
    Workload("chain", "elementwise chain, 20 ufuncs on 1e6 floats", HERE / "models.py", "chain",
             0, _chain_args, chain_grad_by_hand, "np",
             "`models.chain`: sin, exp, tanh, cos, sqrt, log, arctan, log1p, square and "
             "`+ - * /`, then `np.sum`", elements=1_000_000),
    Workload("logreg", "logistic regression, X 10000x100", EXAMPLES / "logistic_regression.py",
             "loss", (0, 1), _example_args("logistic_regression", {"n": 30, "d": 4},
                                           {"n": 10000, "d": 100}),
             logistic_grad_by_hand, "np",
             "`examples/logistic_regression.py`: `np.mean(np.logaddexp(0, -margin))` + L2; "
             "gradient w.r.t. w and b"),
    Workload("mlp", "MLP 784-256-10, batch 128", EXAMPLES / "mlp.py", "loss", 0,
             _example_args("mlp", {"n": 7, "n_in": 5, "n_hidden": 6, "n_out": 3},
                           {"n": 128, "n_in": 784, "n_hidden": 256, "n_out": 10}),
             mlp_grad_by_hand, "np",
             "`examples/mlp.py`: tanh hidden layer, log-softmax with the `np.max` shift, "
             "params dict"),
    Workload("rnn", "tanh RNN, hidden 64, 50 steps", HERE / "models.py", "rnn", (0, 1),
             _rnn_args, rnn_grad_by_hand, "np",
             "`models.rnn`: `h = np.tanh(W @ h + U @ xs[t])` over a Python loop, inputs of 32, "
             "gradient w.r.t. W and U"),
    Workload("math200", "200 scalar `math` ops, straight-line", HERE / "math200.py", "f",
             (0, 1, 2), _point, math200_grad_by_hand, "math",
             "`math200.f`: 200 generated ops (sin, cos, exp, log, sqrt, tanh, `+ - * / **`), "
             "values reused; the hand-written gradient is generated too", extra=True),
]
BY_KEY = {w.key: w for w in WORKLOADS}


# --- checking -----------------------------------------------------------------------------------


def as_leaves(tree) -> list[np.ndarray]:
    if isinstance(tree, dict):
        return [leaf for key in sorted(tree) for leaf in as_leaves(tree[key])]
    if isinstance(tree, tuple | list):
        return [leaf for item in tree for leaf in as_leaves(item)]
    return [np.asarray(tree, dtype=float)]


def same_gradient(a, b, rtol=1e-9, atol=1e-12) -> bool:
    leaves_a, leaves_b = as_leaves(a), as_leaves(b)
    return len(leaves_a) == len(leaves_b) and all(
        u.shape == v.shape and np.allclose(u, v, rtol=rtol, atol=atol)
        for u, v in zip(leaves_a, leaves_b, strict=True))


def central_differences(fn, args, argnum, h=1e-6):
    """Central differences of fn w.r.t. args[argnum] (array, float or dict of arrays)."""
    def moved(value, key, index, delta):
        if key is not None:
            return {**value, key: moved(value[key], None, index, delta)}
        if isinstance(value, np.ndarray):
            out = value.copy()
            out[index] += delta
            return out
        return value + delta

    def partial(key, index):
        up, down = list(args), list(args)
        up[argnum] = moved(args[argnum], key, index, h)
        down[argnum] = moved(args[argnum], key, index, -h)
        return (fn(*up) - fn(*down)) / (2 * h)

    value = args[argnum]
    if isinstance(value, dict):
        return {k: np.array([partial(k, i) for i in np.ndindex(v.shape)]).reshape(v.shape)
                for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return np.array([partial(None, i) for i in np.ndindex(value.shape)]).reshape(value.shape)
    return partial(None, None)


def check_by_hand(w: Workload) -> None:
    """The hand-written gradient against central differences, at the small size."""
    fn, args = w.function(), w.make_args(True)
    nums = w.argnums if isinstance(w.argnums, tuple) else (w.argnums,)
    fd = tuple(central_differences(fn, args, i) for i in nums)
    if not same_gradient(w.hand(*args), fd if isinstance(w.argnums, tuple) else fd[0],
                         rtol=1e-6, atol=1e-7):
        raise SystemExit(f"{w.key}: the hand-written gradient disagrees with central "
                         "differences")


def main() -> None:
    import gradgen

    for w in WORKLOADS:
        check_by_hand(w)
        args = w.make_args(False)
        ours = gradgen.grad(w.function(), argnums=w.argnums)(*args)
        if not same_gradient(w.hand(*args), ours):
            raise SystemExit(f"{w.key}: the hand-written gradient disagrees with gradgen")
        print(f"{w.title}: hand-written gradient agrees with central differences and gradgen")


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(HERE))
    main()
