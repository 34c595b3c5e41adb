"""First-call cost on arrays: gradgen builds the backward on shapes (issue 10).

    python benchmarks/first_call.py [--rounds 5]

For each workload, side by side in one process, round-robin, medians over rounds:

- *gradgen first call*: a fresh ``gradgen.grad`` of the function, written to a new file
  with unique text (no per-file cache helps), called once: trace + build + compile + one run
  of the emitted module;
- *hand-written*: the gradient written by hand in plain NumPy, called once;
- *gradgen cached*: the same ``grad`` callable called again;
- for the MLP, ``jax.jit(jax.grad)``'s first call (trace + compile + run, x64) on a fresh
  function, when JAX is installed.

Wall-clock and CPU (process) seconds are both given: the machine these numbers come from is
shared, and CPU time is the steadier of the two. Peak memory is tracemalloc's peak of one
first call (allocations NumPy reports to tracemalloc), next to the hand-written gradient's.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

CHAIN = '''
import numpy as np


def chain(x):
    a = np.sin(x)
    b = np.cos(a) * x
    c = np.exp(-b * b)
    d = np.tanh(c + a)
    e = np.log1p(d * d)
    f = np.sqrt(e + 1.0)
    g = f * np.sin(d) - c
    h = np.arctan(g) + np.exp(-x * x)
    k = h * h / (1.0 + f)
    return np.sum(k)
'''


def chain_grad_by_hand(x):
    """d/dx of ``chain`` (20 elementwise NumPy calls and operators forward) by hand."""
    a = np.sin(x)
    ca = np.cos(a)
    b = ca * x
    c = np.exp(-b * b)
    d = np.tanh(c + a)
    e = np.log1p(d * d)
    f = np.sqrt(e + 1.0)
    sd = np.sin(d)
    g = f * sd - c
    ex = np.exp(-x * x)
    h = np.arctan(g) + ex
    one_f = 1.0 + f
    gh = 2 * h / one_f
    gf = -h * h / (one_f * one_f)
    gg = gh / (1 + g * g)
    gx = gh * ex * (-2 * x)
    gf = gf + gg * sd
    gd = gg * f * np.cos(d)
    gc = -gg
    ge = gf / (2 * f)
    gd = gd + ge * 2 * d / (1 + d * d)
    gca = gd * (1 - d * d)
    gc = gc + gca
    gb = gc * c * (-2 * b)
    ga = gca - gb * x * np.sin(a)
    return gx + gb * ca + ga * np.cos(x)


class Fresh:
    """Functions written to new files with unique text."""

    def __init__(self):
        self.dir = tempfile.TemporaryDirectory(prefix="gradgen_first_call_")
        self.count = 0

    def load(self, text: str, name: str):
        self.count += 1
        path = Path(self.dir.name) / f"fresh_{os.getpid()}_{self.count}.py"
        path.write_text(f"# fresh copy {self.count}\n{text}")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return getattr(module, name)


def timed(call):
    wall, cpu = time.perf_counter(), time.process_time()
    out = call()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def peak_bytes(call) -> int:
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def same(a, b) -> bool:
    from arrays import same_gradient

    return same_gradient(a, b, rtol=1e-9, atol=1e-12)


def run(rounds: int) -> None:
    from arrays import load_example, mlp_grad_by_hand

    import gradgen

    fresh = Fresh()
    x = np.random.default_rng(0).normal(size=1_000_000)
    mlp = load_example("mlp")
    mlp_text = (Path(__file__).resolve().parent.parent / "examples" / "mlp.py").read_text()
    mlp_args = mlp.example_args(n=128, n_in=784, n_hidden=256, n_out=10)
    workloads = [
        ("elementwise chain, 1e6 float64", lambda: fresh.load(CHAIN, "chain"), (x,),
         chain_grad_by_hand),
        ("MLP 784-256-10, batch 128", lambda: fresh.load(mlp_text, "loss"), mlp_args,
         mlp_grad_by_hand),
    ]
    jax_first = _jax_mlp(fresh, mlp_text, mlp_args)
    gradgen.grad(fresh.load(CHAIN, "chain"))(np.ones(3))  # imports and op tables warm
    for title, make, args, hand in workloads:
        rows: dict[str, list] = {"gradgen first call": [], "hand-written": [],
                                 "gradgen cached": []}
        if jax_first and title.startswith("MLP"):
            rows["jax.jit(jax.grad) first call"] = []
        for _ in range(rounds):
            df = gradgen.grad(make())
            wall, cpu, got = timed(lambda df=df, args=args: df(*args))
            rows["gradgen first call"].append((wall, cpu))
            wall, cpu, want = timed(lambda hand=hand, args=args: hand(*args))
            rows["hand-written"].append((wall, cpu))
            if not same(got, want):
                raise SystemExit(f"{title}: gradgen disagrees with the hand-written gradient")
            wall, cpu, _ = timed(lambda df=df, args=args: df(*args))
            rows["gradgen cached"].append((wall, cpu))
            if "jax.jit(jax.grad) first call" in rows:
                rows["jax.jit(jax.grad) first call"].append(jax_first())
        df = gradgen.grad(make())
        mem_gradgen = peak_bytes(lambda df=df, args=args: df(*args))
        mem_hand = peak_bytes(lambda hand=hand, args=args: hand(*args))
        hand_wall = statistics.median(w for w, _ in rows["hand-written"])
        hand_cpu = statistics.median(c for _, c in rows["hand-written"])
        print(f"\n{title} ({rounds} rounds, medians)")
        print(f"  {'':32} {'wall ms':>9} {'ratio':>6} {'cpu ms':>9} {'ratio':>6}")
        for name, samples in rows.items():
            wall = statistics.median(w for w, _ in samples)
            cpu = statistics.median(c for _, c in samples)
            print(f"  {name:32} {wall * 1e3:9.1f} {wall / hand_wall:6.2f} {cpu * 1e3:9.1f} "
                  f"{cpu / hand_cpu:6.2f}")
        print(f"  peak memory (tracemalloc): gradgen first call {mem_gradgen / 1e6:.0f} MB, "
              f"hand-written {mem_hand / 1e6:.0f} MB, ratio {mem_gradgen / mem_hand:.2f}")
    fresh.dir.cleanup()


def _jax_mlp(fresh: Fresh, text: str, args):
    """A callable timing jax.jit(jax.grad) of a fresh copy of the MLP loss, or None."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        print("JAX is not installed: its row is skipped")
        return None
    jax.config.update("jax_enable_x64", True)
    params, X, y = args
    jparams = {k: jnp.asarray(v) for k, v in params.items()}
    jX, jy = jnp.asarray(X), jnp.asarray(y)

    def first():
        loss = fresh.load(text.replace("import numpy as np", "import jax.numpy as np"), "loss")
        g = jax.jit(jax.grad(loss))
        wall, cpu, _ = timed(lambda: jax.block_until_ready(g(jparams, jX, jy)))
        return wall, cpu

    first()  # JAX's own imports and caches warm
    return first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    run(parser.parse_args().rounds)


if __name__ == "__main__":
    main()
