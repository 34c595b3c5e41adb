"""The contenders: how each one computes the gradient of a workload.

A method splits the work the way a first call is measured:

- ``setup()``: import the library (timed apart, as "import");
- ``prepare(w, args)``: the arguments in the library's own types (data preparation, not part
  of any timing: NumPy arrays become tensors / device arrays once);
- ``make(w, fn)``: the gradient callable (part of the first call: e.g. ``jax.jit(jax.grad(f))``,
  ``gradgen.grad(f)``);
- the callable returns the finished gradient (JAX: ``block_until_ready``); ``to_numpy`` turns
  it into NumPy arrays and floats for the comparison with the hand-written gradient.

The peers run the very code of the user function with its module-level ``np`` or ``math``
rebound to the peer's namespace, except where the peer's API differs (PyTorch's ``max`` and
``logaddexp``, float64 ``zeros``): those three are written out below, line for line.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from workloads import Workload

MATH_NAMES = ("sin", "cos", "tan", "tanh", "exp", "log", "sqrt")


def _rebind(fn, library: str, namespace):
    """``fn`` with the same code, its global ``np`` (or ``math``) replaced by ``namespace``."""
    if library == "math":
        namespace = types.SimpleNamespace(
            **{n: getattr(namespace, n) for n in MATH_NAMES if hasattr(namespace, n)})
    return types.FunctionType(fn.__code__, {**fn.__globals__, library: namespace},
                              fn.__name__, fn.__defaults__)


def _map(tree, leaf: Callable):
    if isinstance(tree, dict):
        return {k: _map(v, leaf) for k, v in tree.items()}
    if isinstance(tree, tuple | list):
        return type(tree)(_map(v, leaf) for v in tree)
    return leaf(tree)


def _argnums(w: Workload) -> tuple[int, ...]:
    return w.argnums if isinstance(w.argnums, tuple) else (w.argnums,)


def _identity(value):
    return value


@dataclass(frozen=True)
class Method:
    key: str  # "hand", "gradgen", "autograd", "torch", "jax"
    label: str  # column header
    module: str | None  # the peer's import name (None: NumPy only)
    install: str  # what to pip install when it is missing
    make: Callable[[Workload, Callable], Callable]
    prepare: Callable[[Workload, tuple], tuple] = lambda w, args: args
    to_numpy: Callable[[object], object] = _identity
    memory: bool = True  # tracemalloc sees its allocations (not true of PyTorch and XLA)
    describe: str = ""

    def setup(self):
        if self.module is None:
            return None
        import importlib

        library = importlib.import_module(self.module)
        if self.key == "jax":
            library.config.update("jax_enable_x64", True)
        if self.key == "torch":
            library.set_num_threads(1)
        return library


# --- the hand-written gradient and gradgen ------------------------------------------------------


def _make_hand(w: Workload, fn):
    return w.hand


def _make_gradgen(w: Workload, fn):
    import gradgen

    return gradgen.grad(fn, argnums=w.argnums)


# --- HIPS autograd ------------------------------------------------------------------------------


def _make_autograd(w: Workload, fn):
    import autograd
    import autograd.numpy as anp

    return autograd.grad(_rebind(fn, w.library, anp), argnum=w.argnums)


# --- PyTorch eager ------------------------------------------------------------------------------


def _torch_logreg(torch):
    def loss(w, b, X, y, lam=0.01):
        margin = y * (X @ w + b)
        data = torch.mean(torch.logaddexp(torch.zeros((), dtype=margin.dtype), -margin))
        return data + 0.5 * lam * torch.sum(w * w)
    return loss


def _torch_mlp(torch):
    def loss(params, X, y):
        h = torch.tanh(X @ params["W1"] + params["b1"])
        logits = h @ params["W2"] + params["b2"]
        shifted = logits - torch.amax(logits, dim=1, keepdim=True)
        logp = shifted - torch.log(torch.sum(torch.exp(shifted), dim=1, keepdim=True))
        n = X.shape[0]
        return -torch.mean(logp[torch.arange(n), y])
    return loss


def _torch_rnn(torch):
    def rnn(W, U, xs, target):
        h = torch.zeros(W.shape[0], dtype=W.dtype)
        for t in range(xs.shape[0]):
            h = torch.tanh(W @ h + U @ xs[t])
        return 0.5 * torch.sum((h - target) ** 2)
    return rnn


TORCH_WRITTEN_OUT = {"logreg": _torch_logreg, "mlp": _torch_mlp, "rnn": _torch_rnn}


def _torch_prepare(w: Workload, args):
    import torch

    def leaf(value):
        if isinstance(value, np.ndarray):
            return torch.from_numpy(value)
        if isinstance(value, float):
            return torch.tensor(value, dtype=torch.float64)
        return value
    return tuple(_map(a, leaf) for a in args)


def _make_torch(w: Workload, fn):
    import torch

    loss = (TORCH_WRITTEN_OUT[w.key](torch) if w.key in TORCH_WRITTEN_OUT
            else _rebind(fn, w.library, torch))
    nums = _argnums(w)

    def grad_torch(*args):
        args = list(args)
        leaves = []

        def requiring_grad(t):
            t = t.detach().requires_grad_()
            leaves.append(t)
            return t
        for i in nums:
            args[i] = _map(args[i], requiring_grad)
        grads = iter(torch.autograd.grad(loss(*args), leaves))
        out = tuple(_map(args[i], lambda _: next(grads)) for i in nums)
        return out if isinstance(w.argnums, tuple) else out[0]
    return grad_torch


def _torch_to_numpy(tree):
    return _map(tree, lambda t: t.detach().numpy())


# --- JAX ------------------------------------------------------------------------------------------


def _jax_prepare(w: Workload, args):
    import jax

    return tuple(_map(a, lambda v: jax.device_put(v) if isinstance(v, np.ndarray) else v)
                 for a in args)


def _make_jax(w: Workload, fn):
    import jax
    import jax.numpy as jnp

    compiled = jax.jit(jax.grad(_rebind(fn, w.library, jnp), argnums=w.argnums))
    return lambda *args: jax.block_until_ready(compiled(*args))


def _jax_to_numpy(tree):
    return _map(tree, np.asarray)


METHODS = [
    Method("hand", "hand-written", None, "", _make_hand,
           describe="the gradient written by hand in plain NumPy / `math` (workloads.py)"),
    Method("gradgen", "**gradgen**", "gradgen", "-e .", _make_gradgen,
           describe="`gradgen.grad(f, argnums)(*args)`"),
    Method("autograd", "HIPS autograd", "autograd", "autograd", _make_autograd,
           describe="`autograd.grad(f, argnum)` with `np`/`math` rebound to `autograd.numpy`"),
    Method("torch", "PyTorch eager", "torch", "torch==2.13.0", _make_torch,
           prepare=_torch_prepare, to_numpy=_torch_to_numpy, memory=False,
           describe=("float64 tensors made leaves per call (`detach().requires_grad_()`), "
                     "`torch.autograd.grad`; one thread")),
    Method("jax", "`jax.jit(jax.grad)`", "jax", "jax", _make_jax, prepare=_jax_prepare,
           to_numpy=_jax_to_numpy, memory=False,
           describe="x64, arrays `device_put` once, `block_until_ready`; one XLA thread"),
]
BY_KEY = {m.key: m for m in METHODS}
