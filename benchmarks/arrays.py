"""Array workloads for benchmarks/run.py (part 3): the model examples at realistic sizes, each
with a gradient written by hand in plain NumPy.

The functions timed are the very ones in examples/ (logistic_regression.py, mlp.py, rnn.py,
rosenbrock.py), loaded from there, so the benchmark measures what a newcomer runs. The
hand-written gradients below are what a careful person would write: the forward values they
need computed once, adjoints fused, batched matrix products instead of per-step outer
products, no scatter where a slice assignment does.

    python benchmarks/arrays.py

checks every hand-written gradient against central differences (small sizes) and against
gradgen's gradient (the benchmark sizes); run.py checks the latter again before timing.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def load_example(name: str):
    path = EXAMPLES / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- hand-written gradients ---------------------------------------------------------------------


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


def rnn_grad_by_hand(W, U, b, xs, targets):
    """d/dW, d/dU, d/db of the tanh RNN loss in examples/rnn.py: backpropagation through
    time, one matrix-vector product per step, the weight gradients as three batched products
    at the end."""
    T, n = xs.shape[0], W.shape[0]
    h = np.zeros((T, n))
    prev = np.zeros(n)
    inputs = xs @ U.T + b  # U @ xs[t] + b for every t at once
    for t in range(T):
        h[t] = prev = np.tanh(W @ prev + inputs[t])
    d_h = np.repeat((2.0 / T) * (h.sum(axis=1) - targets)[:, None], n, axis=1)
    d_h[-1] += 0.2 * h[-1]
    d_a = np.empty((T, n))  # adjoint of the pre-activation of each step
    carry = np.zeros(n)
    for t in range(T - 1, -1, -1):
        d_a[t] = (d_h[t] + carry) * (1.0 - h[t] * h[t])
        carry = d_a[t] @ W
    return d_a[1:].T @ h[:-1], d_a.T @ xs, d_a.sum(axis=0)


def rosenbrock_grad_by_hand(x):
    """The banded Rosenbrock gradient: one buffer, two slice updates."""
    head = x[:-1]
    d = x[1:] - head * head
    g = np.empty_like(x)
    g[:-1] = -400.0 * head * d - 2.0 * (1.0 - head)
    g[-1] = 0.0
    g[1:] += 200.0 * d
    return g


# --- the workloads ------------------------------------------------------------------------------


@dataclass
class Workload:
    key: str  # short name for logs
    title: str  # for the report
    example: str  # examples/<example>.py
    fn_name: str
    argnums: object
    sizes: dict  # keyword arguments of the example's example_args
    hand: object  # hand-written gradient, same arguments as the function
    ops_note: str = ""

    def module(self):
        return load_example(self.example)

    def args(self):
        return self.module().example_args(**self.sizes)


WORKLOADS = [
    Workload("logreg", "logistic regression, X 10000x100", "logistic_regression", "loss",
             (0, 1), {"n": 10000, "d": 100}, logistic_grad_by_hand,
             "`np.mean(np.logaddexp(0, -margin))` + L2; gradient w.r.t. w and b"),
    Workload("mlp", "MLP 784-256-10, batch 128", "mlp", "loss", 0,
             {"n": 128, "n_in": 784, "n_hidden": 256, "n_out": 10}, mlp_grad_by_hand,
             "tanh hidden layer, log-softmax with the `np.max` shift, params dict"),
    Workload("rnn", "tanh RNN, hidden 64, 50 steps", "rnn", "loss", (0, 1, 2),
             {"T": 50, "n": 64, "d": 32}, rnn_grad_by_hand,
             "`h[t] = np.tanh(W @ prev + U @ xs[t] + b)` into a (50, 64) buffer, inputs of 32"),
    Workload("rosen1e3", "Rosenbrock, 1e3 floats", "rosenbrock", "rosenbrock", 0,
             {"n": 1000}, rosenbrock_grad_by_hand, "`x[1:]` and `x[:-1]`"),
    Workload("rosen1e6", "Rosenbrock, 1e6 floats", "rosenbrock", "rosenbrock", 0,
             {"n": 1_000_000}, rosenbrock_grad_by_hand, "`x[1:]` and `x[:-1]`"),
]


def as_leaves(tree) -> list[np.ndarray]:
    if isinstance(tree, dict):
        return [leaf for key in tree for leaf in as_leaves(tree[key])]
    if isinstance(tree, tuple | list):
        return [leaf for item in tree for leaf in as_leaves(item)]
    return [np.asarray(tree)]


def same_gradient(a, b, rtol=1e-9, atol=1e-12) -> bool:
    leaves_a, leaves_b = as_leaves(a), as_leaves(b)
    return len(leaves_a) == len(leaves_b) and all(
        u.shape == v.shape and np.allclose(u, v, rtol=rtol, atol=atol)
        for u, v in zip(leaves_a, leaves_b, strict=True))


def _central_differences(fn, args, argnum, h=1e-6):
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


SMALL = {"logreg": {"n": 30, "d": 4}, "mlp": {"n": 7, "n_in": 5, "n_hidden": 6, "n_out": 3},
         "rnn": {"T": 6, "n": 4, "d": 3}, "rosen1e3": {"n": 9}, "rosen1e6": {"n": 9}}


def check_by_hand_small() -> None:
    """Every hand-written gradient against central differences at small sizes."""
    for w in WORKLOADS:
        module = w.module()
        fn = getattr(module, w.fn_name)
        args = module.example_args(**SMALL[w.key])
        nums = w.argnums if isinstance(w.argnums, tuple) else (w.argnums,)
        fd = tuple(_central_differences(fn, args, i) for i in nums)
        hand = w.hand(*args)
        if not same_gradient(hand, fd if isinstance(w.argnums, tuple) else fd[0], rtol=1e-6,
                             atol=1e-7):
            raise SystemExit(f"{w.key}: the hand-written gradient disagrees with central "
                             "differences")


def main() -> None:
    import gradgen

    check_by_hand_small()
    print("hand-written gradients agree with central differences (small sizes)")
    for w in WORKLOADS:
        fn = getattr(w.module(), w.fn_name)
        args = w.args()
        if not same_gradient(w.hand(*args), gradgen.grad(fn, argnums=w.argnums)(*args)):
            raise SystemExit(f"{w.key}: the hand-written gradient disagrees with gradgen")
        print(f"{w.title}: hand-written gradient agrees with gradgen")


if __name__ == "__main__":
    main()
