"""The array-API target on the array workloads (arrays.py): ``jax.jit`` of the emitted module
against ``jax.jit(jax.grad(f))``, and the emitted module on torch tensors against torch's own
autograd (``torch.autograd.grad``), float64, each pair side by side in one process.

    python benchmarks/array_api.py [--quick] [--out FILE]

prints the report section (markdown) and, with ``--out``, writes it to FILE. ``run(...)``
returns the same lines for the combined report. The peers run the example's own function
with ``np`` rebound to ``jax.numpy`` / ``array_api_compat.torch``; every gradient is checked
against gradgen's NumPy one before anything is timed.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
import types
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import arrays

import gradgen

TARGET_JAX = 1.1  # jax.jit of the emitted module within 1.1x of jax.jit(jax.grad(f))


def log(*args) -> None:
    print(*args, file=sys.stderr, flush=True)


def _median_ratio_timing(pairs: dict[str, object], repeats: int, budget: float) -> dict:
    """Median seconds per call of each callable, timed round-robin ``repeats`` times (each
    sample a loop filling about ``budget`` seconds, GC paused inside a sample)."""
    numbers = {}
    for name, fn in pairs.items():
        for _ in range(3):
            fn()
        t0 = time.perf_counter()
        fn()
        numbers[name] = max(1, int(budget / max(time.perf_counter() - t0, 1e-7)))
    samples: dict[str, list[float]] = {name: [] for name in pairs}
    for _ in range(repeats):
        for name, fn in pairs.items():
            loop = range(numbers[name])
            gc.disable()
            t0 = time.perf_counter()
            for _ in loop:
                fn()
            samples[name].append((time.perf_counter() - t0) / numbers[name])
            gc.enable()
    return samples


def _ratio(a: list[float], b: list[float]) -> float:
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def _rebound(fn, namespace):
    """The example's function with its global ``np`` replaced by another library's."""
    return types.FunctionType(fn.__code__, {**fn.__globals__, "np": namespace}, fn.__name__,
                              fn.__defaults__)


def _tree_map(tree, leaf):
    if isinstance(tree, dict):
        return {k: _tree_map(v, leaf) for k, v in tree.items()}
    if isinstance(tree, tuple | list):
        return type(tree)(_tree_map(v, leaf) for v in tree)
    return leaf(tree)


def _leaves(tree) -> list:
    if isinstance(tree, dict):
        return [leaf for key in sorted(tree) for leaf in _leaves(tree[key])]
    if isinstance(tree, tuple | list):
        return [leaf for item in tree for leaf in _leaves(item)]
    return [tree]


def _workload_args(w, quick):
    sizes = dict(w.sizes)
    if quick and w.key == "rosen1e6":
        sizes["n"] = 100_000
    args = w.module().example_args(**sizes)
    # a Python float argument (logistic regression's b) as a 0-d array: under jax.jit every
    # argument is an array, and the module keeps a 0-d array a 0-d array
    return tuple(np.asarray(a) if isinstance(a, float) else a for a in args)


def _argnums(w):
    return w.argnums if isinstance(w.argnums, tuple) else (w.argnums,)


def _same(a, b) -> bool:
    """Equal gradients, dicts compared key by key (jax.jit hands dicts back in sorted order)."""
    return arrays.same_gradient(_leaves(_tree_map(a, np.asarray)),
                                _leaves(_tree_map(b, np.asarray)))


def _jax_pair(w, fn, module, args, notes):
    import jax

    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    jargs = _tree_map(args, jnp.asarray)
    emitted = jax.jit(module[f"{w.fn_name}_grad"])
    peer = jax.jit(jax.grad(_rebound(fn, jnp), argnums=w.argnums))
    reference = gradgen.grad(fn, argnums=w.argnums)(*args)
    if not _same(emitted(*jargs), reference):
        raise AssertionError(f"{w.key}: jax.jit(module) disagrees with gradgen")
    try:
        if not _same(peer(*jargs), reference):
            raise AssertionError(f"{w.key}: jax.grad disagrees with gradgen")
    except (TypeError, NotImplementedError) as error:  # e.g. h[t] = ... on a JAX array
        notes.append(f"{w.key}: jax.grad of the NumPy-style function fails "
                     f"({type(error).__name__}: {str(error).splitlines()[0][:80]})")
        peer = None
    calls = {"module": lambda: jax.block_until_ready(emitted(*jargs))}
    if peer is not None:
        calls["peer"] = lambda: jax.block_until_ready(peer(*jargs))
    return calls


def _torch_pair(w, fn, module, args, notes):
    import array_api_compat.torch as tnp
    import torch

    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)
    targs = _tree_map(args, torch.from_numpy)
    emitted = module[f"{w.fn_name}_grad"]
    reference = gradgen.grad(fn, argnums=w.argnums)(*args)
    if not _same(_tree_map(emitted(*targs), lambda t: t.numpy()), reference):
        raise AssertionError(f"{w.key}: the module on torch disagrees with gradgen")
    f_torch = _rebound(fn, tnp)
    wanted = [targs[i] for i in _argnums(w)]
    leaves = [leaf for tree in wanted for leaf in _leaves(tree)]

    def autograd():
        inputs = [leaf.detach().requires_grad_(True) for leaf in leaves]
        swap = dict(zip(map(id, leaves), inputs, strict=True))
        call_args = [_tree_map(a, lambda t: swap.get(id(t), t)) if i in _argnums(w) else a
                     for i, a in enumerate(targs)]
        return torch.autograd.grad(f_torch(*call_args), inputs)

    calls = {"module": lambda: emitted(*targs)}
    try:
        flat = [g.numpy() for g in autograd()]
        expected = _leaves(reference if isinstance(w.argnums, tuple) else (reference,))
        if not arrays.same_gradient(flat, expected):
            raise AssertionError(f"{w.key}: torch autograd disagrees with gradgen")
        calls["peer"] = autograd
    except RuntimeError as error:  # e.g. h[t] = ... modifies a value autograd saved
        notes.append(f"{w.key}: torch autograd of the NumPy-style function fails "
                     f"({str(error).splitlines()[0][:90]})")
    return calls


def run(repeats: int = 7, budget: float = 0.05, quick: bool = False) -> list[str]:
    """The report section: one table row per workload, medians and ratios."""
    rows, notes = [], []
    for w in arrays.WORKLOADS:
        fn = getattr(w.module(), w.fn_name)
        args = _workload_args(w, quick)
        log(f"array-api: {w.key}")
        source = gradgen.emit(fn, *args, argnums=w.argnums, target="array-api")
        module: dict = {}
        exec(compile(source, f"{w.fn_name}_array_api.py", "exec"), module)  # noqa: S102
        cells = {}
        for peer, make in (("jax", _jax_pair), ("torch", _torch_pair)):
            try:
                calls = make(w, fn, module, args, notes)
            except ImportError as error:
                notes.append(f"{peer} not installed ({error.name}): skipped")
                continue
            samples = _median_ratio_timing(calls, repeats, budget)
            module_t = statistics.median(samples["module"])
            if "peer" in samples:
                cells[peer] = (module_t, statistics.median(samples["peer"]),
                               _ratio(samples["module"], samples["peer"]))
            else:
                cells[peer] = (module_t, None, None)
        rows.append((w, cells))
    return _report(rows, notes, repeats)


def _fmt(seconds):
    if seconds is None:
        return "n/a"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    return f"{seconds * 1e3:.2f} ms"


def _report(rows, notes, repeats) -> list[str]:
    lines = [
        "## Array-API target: one module on JAX (jit) and PyTorch",
        "",
        ("`gradgen.emit(f, *args, target=\"array-api\")` of each array workload, float64. "
         "JAX: `jax.jit(module.f_grad)` against `jax.jit(jax.grad(f, argnums))` (the example "
         "with `np` rebound to `jax.numpy`). PyTorch (CPU, one thread): the module called on "
         "tensors against `torch.autograd.grad` of the example with `np` rebound to "
         f"`array_api_compat.torch`. Medians over {repeats} rounds; the ratio is the median "
         "of per-round ratios (module / peer: below 1, the module is faster). Target: within "
         f"{TARGET_JAX}x of `jax.jit(jax.grad)`."),
        "",
        ("| workload | jit(module) | jit(jax.grad) | ratio | module, torch | torch autograd "
         "| ratio |"),
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    met = True
    for w, cells in rows:
        parts = [w.title]
        for peer in ("jax", "torch"):
            module_t, peer_t, ratio = cells.get(peer, (None, None, None))
            parts += [_fmt(module_t), _fmt(peer_t), "n/a" if ratio is None else f"{ratio:.2f}x"]
            if peer == "jax" and ratio is not None and ratio > TARGET_JAX:
                met = False
        lines.append("| " + " | ".join(parts) + " |")
    lines += ["", f"Target (jit(module) within {TARGET_JAX}x of jit(jax.grad) where both run): "
              + ("met" if met else "NOT met") + "."]
    if notes:
        lines += ["", *(f"- {note}" for note in notes)]
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds, Rosenbrock at 1e5")
    parser.add_argument("--out", help="also write the section to this file")
    ns = parser.parse_args(argv)
    lines = run(repeats=3 if ns.quick else 7, quick=ns.quick)
    text = "\n".join(lines) + "\n"
    print(text)
    if ns.out:
        Path(ns.out).write_text(text)


if __name__ == "__main__":
    main()
