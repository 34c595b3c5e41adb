"""Part: target="array-api" on the NumPy workloads (workloads.py): ``jax.jit`` of the emitted
module against ``jax.jit(jax.grad(f))``, and the emitted module on torch tensors against
torch's own autograd (``torch.autograd.grad``), float64, each pair side by side.

    python benchmarks/run.py --only array_api     or alone: python benchmarks/array_api.py

``run(ctx)`` returns the report section and adds the 1.1x target per workload. The peers run the example's own function
with ``np`` rebound to ``jax.numpy`` / ``array_api_compat.torch``; every gradient is checked
against gradgen's NumPy one before anything is timed.
"""

from __future__ import annotations

import argparse
import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import harness

harness.pin_threads()  # before NumPy, PyTorch or JAX is imported

import numpy as np
import workloads
from harness import Contender, Context, fmt_time, time_side_by_side

import gradgen

TARGET_JAX = 1.1  # jax.jit of the emitted module within 1.1x of jax.jit(jax.grad(f))
log = harness.log


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
    args = w.make_args(quick and w.elements > 0)  # a smoke run keeps the 1e6 arrays small
    # a Python float argument (logistic regression's b) as a 0-d array: under jax.jit every
    # argument is an array, and the module keeps a 0-d array a 0-d array
    return tuple(np.asarray(a) if isinstance(a, float) else a for a in args)


def _argnums(w):
    return w.argnums if isinstance(w.argnums, tuple) else (w.argnums,)


def _same(a, b) -> bool:
    """Equal gradients, dicts compared key by key (jax.jit hands dicts back in sorted order)."""
    return workloads.same_gradient(_leaves(_tree_map(a, np.asarray)),
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
        if not workloads.same_gradient(flat, expected):
            raise AssertionError(f"{w.key}: torch autograd disagrees with gradgen")
        calls["peer"] = autograd
    except RuntimeError as error:  # e.g. h[t] = ... modifies a value autograd saved
        notes.append(f"{w.key}: torch autograd of the NumPy-style function fails "
                     f"({str(error).splitlines()[0][:90]})")
    return calls


def run(ctx: Context) -> str:
    """The report section: one table row per NumPy workload, medians and ratios."""
    rows, notes = [], []
    # 15 rounds: a 1e6 call (~0.1 s) is one call per sample, and 7 single calls gave the
    # elementwise chain 0.98x in one run and 1.15x in the next (same code, same module)
    repeats, budget = ctx.pick(15, 3), ctx.pick(0.05, 0.01)
    for w in workloads.WORKLOADS:
        if w.library != "np" or w.extra:
            continue
        fn = w.function()
        args = _workload_args(w, ctx.quick)
        log(f"array-api: {w.key}")
        source = gradgen.emit(fn, *args, argnums=w.argnums, target="array-api")
        module: dict = {}
        exec(compile(source, f"{w.fn_name}_array_api.py", "exec"), module)  # noqa: S102
        cells = {}
        for peer, make in (("jax", _jax_pair), ("torch", _torch_pair)):
            if ctx.peer(peer, "torch==2.13.0" if peer == "torch" else peer) is None:
                continue
            contenders = [Contender(name, call)
                          for name, call in make(w, fn, module, args, notes).items()]
            time_side_by_side(contenders, repeats, budget)
            timed = {c.name: c for c in contenders}
            peer_c = timed.get("peer")
            cells[peer] = (timed["module"].median, peer_c and peer_c.median,
                           peer_c and timed["module"].ratio(peer_c))
        ratio = cells.get("jax", (None, None, None))[2]
        ctx.target(f"jax.jit of the array-API module within {TARGET_JAX}x of "
                   f"jax.jit(jax.grad): {w.title}",
                   "n/a" if ratio is None else f"{ratio:.2f}x",
                   None if ratio is None else ratio <= TARGET_JAX)
        rows.append((w, cells))
    return "\n".join(_report(rows, notes, repeats)) + "\n"


def _fmt(seconds):
    return "n/a" if seconds is None else fmt_time(seconds)


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
    parser.add_argument("--quick", action="store_true", help="3 rounds, small 1e6 workloads")
    parser.add_argument("--out", help="also write the section to this file")
    ns = parser.parse_args(argv)
    ctx = Context(quick=ns.quick, out=Path(ns.out or "array_api.md"))
    text = run(ctx)
    print(text)
    if ns.out:
        Path(ns.out).write_text(text)


if __name__ == "__main__":
    main()
