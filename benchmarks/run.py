"""gradgen benchmarks: one command, all contenders side by side in one process.

    pip install -e ".[bench]" && python benchmarks/run.py

1. Cached gradient call of a 200-op scalar ``math`` function of x, y, z (benchmarks/math200.py)
   against a hand-written gradient in plain Python, HIPS autograd, PyTorch eager and JAX.
2. First-call cost (trace + differentiate + optimize + emit + compile) per op for functions of
   about 1e2, 1e3 and 1e4 ops, unrolled and as a loop.
3. Array workloads (benchmarks/arrays.py): the model examples at realistic sizes (logistic
   regression, an MLP, a tanh RNN, Rosenbrock) against gradients written by hand in NumPy,
   cached call and first call.

Writes docs/performance.md. Peers that are not installed are skipped with a note. Timings are
medians over interleaved repeats after a warmup; ratios compare medians from this same run.
NumPy's BLAS runs on one thread (set below before NumPy loads, unless the environment says
otherwise).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.metadata
import importlib.util
import itertools
import math
import os
import platform
import statistics
import sys
import tempfile
import time
import types
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

# one BLAS/OpenMP thread for every contender: set before NumPy is imported; an explicit
# setting in the environment wins (reported in part 3)
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
               "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
for _var in THREAD_VARS:
    os.environ.setdefault(_var, "1")

import array_api
import arrays
import math200
import workload

import gradgen

POINT = workload.POINT
ARGNUMS = (0, 1, 2)

# targets from the brief; reported, never asserted
TARGET_HAND = 1.5  # gradgen cached call within 1.5x of the hand-written gradient
TARGET_PEERS = 20.0  # and at least 20x faster than autograd and PyTorch eager
TARGET_FLAT = 1.5  # first-call cost per op flat within 1.5x from 1e2 to 1e4 ops


def log(*args) -> None:
    print(*args, file=sys.stderr, flush=True)


# --- timing --------------------------------------------------------------------------------


@dataclass
class Contender:
    name: str
    call: object
    note: str = ""
    info_only: bool = False  # shown for context, not part of a target
    number: int = 1
    samples: list[float] = field(default_factory=list)  # seconds per call

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def ratio(self, other: Contender) -> float:
        """Median over rounds of this sample / the other's sample of the same round: robust
        to the machine's load drifting during the run."""
        return statistics.median(
            a / b for a, b in zip(self.samples, other.samples, strict=True))


def _calibrate(fn, budget: float) -> int:
    """How many calls fill about ``budget`` seconds."""
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    return max(1, int(budget / one))


def time_side_by_side(contenders: list[Contender], repeats: int, budget: float) -> None:
    """Warm up, then time every contender once per round, round-robin, ``repeats`` rounds."""
    for c in contenders:
        for _ in range(3):
            c.call()
        c.number = _calibrate(c.call, budget)
    loops = {c.name: range(c.number) for c in contenders}
    for _ in range(repeats):
        for c in contenders:
            fn, rng = c.call, loops[c.name]
            gc.disable()
            t0 = time.perf_counter()
            for _ in rng:
                fn()
            elapsed = time.perf_counter() - t0
            gc.enable()
            c.samples.append(elapsed / c.number)


# --- part 1: cached gradient call of the 200-op function -----------------------------------


def _rebind_math(fn, namespace):
    """``fn`` with the same code, its global ``math`` replaced by another library's functions."""
    shim = types.SimpleNamespace(**{n: getattr(namespace, n) for n in workload.UNARY})
    return types.FunctionType(fn.__code__, {"math": shim, "__builtins__": __builtins__},
                              fn.__name__)


def _close(a, b, rtol=1e-9) -> bool:
    return all(math.isclose(float(u), float(v), rel_tol=rtol, abs_tol=1e-12)
               for u, v in zip(a, b, strict=True))


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""


def peer_autograd(f, reference, notes):
    try:
        import autograd
        import autograd.numpy as anp
    except ImportError:
        notes.append("HIPS autograd is not installed: skipped (`pip install autograd`).")
        return []
    g = autograd.grad(_rebind_math(f, anp), argnum=ARGNUMS)
    if not _close(g(*POINT), reference):
        raise SystemExit(f"autograd disagrees: {g(*POINT)} vs {reference}")
    return [Contender(f"HIPS autograd {_version('autograd')}", lambda: g(*POINT),
                      "`autograd.grad(f, argnum=(0, 1, 2))`, float inputs")]


def peer_torch(f, reference, notes):
    try:
        import torch
    except ImportError:
        notes.append("PyTorch is not installed: skipped (`pip install torch==2.13.0`).")
        return []
    ft = _rebind_math(f, torch)
    f64 = torch.float64

    def grad_torch():
        x = torch.tensor(POINT[0], dtype=f64, requires_grad=True)
        y = torch.tensor(POINT[1], dtype=f64, requires_grad=True)
        z = torch.tensor(POINT[2], dtype=f64, requires_grad=True)
        ft(x, y, z).backward()
        return x.grad, y.grad, z.grad

    if not _close(grad_torch(), reference):
        raise SystemExit(f"torch disagrees: {grad_torch()} vs {reference}")
    return [Contender(f"PyTorch {torch.__version__} eager", grad_torch,
                      "float64 0-d tensors with requires_grad built per call, `.backward()`")]


def peer_jax(f, reference, notes):
    try:
        import jax
    except ImportError:
        notes.append("JAX is not installed: skipped (`pip install jax`); extra information only.")
        return []
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    fj = _rebind_math(f, jnp)
    g_eager = jax.grad(fj, argnums=ARGNUMS)
    g_jit = jax.jit(jax.grad(fj, argnums=ARGNUMS))
    for g in (g_eager, g_jit):
        if not _close(g(*POINT), reference):
            raise SystemExit(f"jax disagrees: {g(*POINT)} vs {reference}")
    return [
        Contender(f"JAX {jax.__version__} `jax.jit(jax.grad(f))`",
                  lambda: jax.block_until_ready(g_jit(*POINT)),
                  "x64 enabled; compiled once, then one XLA call", info_only=True),
        Contender(f"JAX {jax.__version__} `jax.grad(f)` (not jitted)",
                  lambda: jax.block_until_ready(g_eager(*POINT)),
                  "op-by-op dispatch every call", info_only=True),
    ]


def central_differences(f, h=1e-6):
    out = []
    for i in range(3):
        up, down = list(POINT), list(POINT)
        up[i] += h
        down[i] -= h
        out.append((f(*up) - f(*down)) / (2 * h))
    return out


def part1(repeats: int, budget: float, notes: list[str]):
    f, hand = math200.f, math200.f_grad_by_hand
    reference = hand(*POINT)
    fd = central_differences(f)
    if not _close(reference, fd, rtol=1e-5):
        raise SystemExit(f"hand-written gradient disagrees with central differences: "
                         f"{reference} vs {fd}")

    g = gradgen.grad(f, argnums=ARGNUMS)
    if not _close(g(*POINT), reference):
        raise SystemExit(f"gradgen disagrees with the hand-written gradient: {g(*POINT)} vs "
                         f"{reference}")
    # the emitted f_grad on its own, to separate the generated code from the call dispatch
    namespace: dict = {}
    exec(compile(g.source, "<gradgen f_grad>", "exec"), namespace)  # noqa: S102
    emitted = namespace["f_grad"]

    contenders = [
        Contender("hand-written gradient, plain `math`", lambda: hand(*POINT),
                  "reverse pass written out, intermediates reused (math200.f_grad_by_hand)"),
        Contender("**gradgen** `grad(f)(x, y, z)`, cached", lambda: g(*POINT),
                  "what users call: signature check + guard-path lookup + emitted code"),
        Contender("gradgen emitted `f_grad` called directly", lambda: emitted(*POINT),
                  "the generated code alone, without the `grad` dispatch", info_only=True),
        Contender("`f` itself (forward only, no gradient)", lambda: f(*POINT),
                  "lower bound for any gradient", info_only=True),
    ]
    for peer in (peer_autograd, peer_torch, peer_jax):
        try:
            contenders += peer(f, reference, notes)
        except SystemExit:
            raise
        except Exception as e:  # noqa: BLE001 - a broken peer install must not end the run
            notes.append(f"{peer.__name__[5:]} failed to run: {type(e).__name__}: {e}")
    log(f"part 1: {len(contenders)} contenders, {repeats} rounds")
    time_side_by_side(contenders, repeats, budget)
    return contenders, emitted


# --- part 2: first-call cost per op --------------------------------------------------------

LOOP_OPS_PER_STEP = 10
LOOP_TEMPLATE = '''"""{salt}"""
import math


def f(x, y, z):
    h = x
    for _ in range({steps}):
        a = math.sin(h) * y + z
        b = math.exp(-0.5 * a * a)
        h = math.tanh(h * b + a) * 0.9
    return h
'''  # 10 ops per step: sin * + (*, *, exp) (*, +, tanh, *)


class FreshModules:
    """Writes each function to a new file with unique text, so no per-file or per-text cache
    (linecache, gradgen's source tables) makes a "first call" cheaper than it is."""

    def __init__(self):
        self.dir = tempfile.TemporaryDirectory(prefix="gradgen-bench-")
        self.count = 0
        self._programs: dict[int, list] = {}

    def load(self, text: str):
        self.count += 1
        name = f"bench_fresh_{self.count}"
        path = Path(self.dir.name) / f"{name}.py"
        path.write_text(text)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    def source(self, kind: str, n_ops: int) -> str:
        salt = f"fresh copy {self.count + 1} of a {n_ops}-op {kind} function"
        if kind == "loop":
            return LOOP_TEMPLATE.format(salt=salt, steps=n_ops // LOOP_OPS_PER_STEP)
        return f'"""{salt}"""\nimport math\n\n\n{workload.function_source(self._ops(n_ops))}'

    def _ops(self, n_ops: int):
        if n_ops not in self._programs:
            self._programs[n_ops] = workload.generate(n_ops, seed=workload.FIXTURE_SEED)
        return self._programs[n_ops]


def _first_call(module) -> tuple[float, float]:
    """Wall-clock and CPU seconds of a fresh ``gradgen.grad`` of ``module.f`` called once."""
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    gradgen.grad(module.f, argnums=ARGNUMS)(*POINT)
    return time.perf_counter() - t0, time.process_time() - c0


@contextlib.contextmanager
def binding_observer_off():
    """Keep gradgen's line-by-line binding observer out, the way gradgen itself does when one
    is already active. Yields False (and changes nothing) if gradgen has no such observer."""
    observer = getattr(getattr(gradgen, "tracing", None), "BindingObserver", None)
    if observer is None or getattr(observer, "_active", 0) is not None:
        yield False
        return
    observer._active = object()  # what gradgen sees while another trace owns the observer
    try:
        yield True
    finally:
        observer._active = None


@dataclass
class FirstCall:
    """Per round, three timings on the same fresh module:

    - ``cold``: the real first call (the file has never been seen);
    - ``warm_file``: a new ``grad`` object on the same file, per-file source analysis cached;
    - ``no_observer``: as ``warm_file`` with gradgen's line-by-line binding observer kept out
      (``tracing.BindingObserver``; NaN if gradgen no longer has one).
    """

    kind: str
    n_ops: int
    cold: list[tuple[float, float]] = field(default_factory=list)  # (wall, CPU) seconds
    warm_file: list[tuple[float, float]] = field(default_factory=list)
    no_observer: list[tuple[float, float]] = field(default_factory=list)
    failure: str | None = None  # gradgen raised: the row is reported as failed, not timed


def _describe_failure(error: BaseException) -> str:
    """``RecursionError at gradgen/layout.py:559 (visit_sub)``: the innermost gradgen frame."""
    import traceback

    frames = [f for f in traceback.extract_tb(error.__traceback__) if "gradgen" in f.filename]
    where = ""
    if frames:
        f = frames[-1]
        where = f" at {'gradgen/' + f.filename.split('gradgen/')[-1]}:{f.lineno} ({f.name})"
    return f"{type(error).__name__}{where}: {str(error)[:120]}"


def part2(sizes: list[int], repeats: dict[int, int]) -> list[FirstCall]:
    fresh = FreshModules()
    _first_call(fresh.load(fresh.source("unrolled", 20)))  # warm up imports and op tables
    _first_call(fresh.load(fresh.source("loop", 20)))
    rows = [FirstCall(kind, n) for kind in ("unrolled", "loop") for n in sizes]
    for r in range(max(repeats.values())):
        for row in rows:
            if r >= repeats[row.n_ops] or row.failure:
                continue
            module = fresh.load(fresh.source(row.kind, row.n_ops))
            try:
                cold = _first_call(module)
                warm = _first_call(module)
                with binding_observer_off() as off:
                    bare = _first_call(module) if off else (math.nan, math.nan)
            except Exception as e:  # noqa: BLE001 - a gradgen failure is a result to report
                row.failure = _describe_failure(e)
                log(f"part 2: {row.kind} {row.n_ops} ops FAILED: {row.failure}")
                continue
            row.cold.append(cold)
            row.warm_file.append(warm)
            row.no_observer.append(bare)
            log(f"part 2: {row.kind} {row.n_ops} ops, round {r + 1}: first call "
                f"{row.cold[-1][0]:.3f} s (CPU {row.cold[-1][1]:.3f} s), file seen "
                f"{row.warm_file[-1][0]:.3f} s, no observer {row.no_observer[-1][0]:.3f} s")
    fresh.dir.cleanup()
    return rows


# --- part 3: array workloads ---------------------------------------------------------------


@dataclass
class ArrayRow:
    """One workload of benchmarks/arrays.py: the contenders timed side by side (hand-written
    first, gradgen's cached call second) and the first calls' (wall, CPU) seconds."""

    workload: arrays.Workload
    contenders: list[Contender]
    first: list[tuple[float, float]] = field(default_factory=list)
    failure: str | None = None


def _emitted_grad(g, fn_name: str):
    namespace: dict = {}
    exec(compile(g.source, f"<gradgen {fn_name}_grad>", "exec"), namespace)  # noqa: S102
    return namespace[f"{fn_name}_grad"]


def part3(repeats: int, budget: float, first_rounds: int) -> list[ArrayRow]:
    fresh = FreshModules()
    rows = []
    for w in arrays.WORKLOADS:
        fn = getattr(w.module(), w.fn_name)
        args = w.args()
        try:
            g = gradgen.grad(fn, argnums=w.argnums)
            ours = g(*args)
        except Exception as e:  # noqa: BLE001 - a gradgen failure is a result to report
            rows.append(ArrayRow(w, [], failure=_describe_failure(e)))
            log(f"part 3: {w.key} FAILED: {rows[-1].failure}")
            continue
        if not arrays.same_gradient(w.hand(*args), ours):
            raise SystemExit(f"{w.key}: gradgen disagrees with the hand-written gradient")
        emitted = _emitted_grad(g, w.fn_name)
        contenders = [
            Contender("hand-written", lambda w=w, a=args: w.hand(*a)),
            Contender("gradgen cached", lambda g=g, a=args: g(*a)),
            Contender("emitted directly", lambda e=emitted, a=args: e(*a), info_only=True),
            Contender("f itself", lambda f=fn, a=args: f(*a), info_only=True),
        ]
        log(f"part 3: {w.key}, {repeats} rounds")
        time_side_by_side(contenders, repeats, budget)
        row = ArrayRow(w, contenders)
        # first call: a fresh grad of the example copied to a new file with unique text
        text = (arrays.EXAMPLES / f"{w.example}.py").read_text()
        for _ in range(first_rounds):
            module = fresh.load(f"# fresh copy {fresh.count + 1}\n{text}")
            gc.collect()
            c0, t0 = time.process_time(), time.perf_counter()
            gradgen.grad(getattr(module, w.fn_name), argnums=w.argnums)(*args)
            row.first.append((time.perf_counter() - t0, time.process_time() - c0))
        log(f"part 3: {w.key}: hand {fmt_time(contenders[0].median)}, gradgen "
            f"{fmt_time(contenders[1].median)}, first call {fmt_time(row.first[-1][0])}")
        rows.append(row)
    fresh.dir.cleanup()
    return rows


def report_arrays(rows: list[ArrayRow], repeats: int) -> list[str]:
    threads = ", ".join(f"{v}={os.environ.get(v, '')}" for v in THREAD_VARS[:3])
    lines = [
        "## 3. Array workloads",
        "",
        ("The model examples (`examples/logistic_regression.py`, `mlp.py`, `rnn.py`, "
         "`rosenbrock.py`, the very functions a newcomer runs) at realistic sizes, float64, "
         "against gradients written by hand in plain NumPy (`benchmarks/arrays.py`: forward "
         "values computed once, batched matrix products, slice updates instead of scatters). "
         "Every hand-written gradient is checked against central differences at small sizes "
         "(`python benchmarks/arrays.py`) and against gradgen's gradient at these sizes before "
         f"timing. NumPy's BLAS on one thread ({threads})."),
        "",
        ("*gradgen cached*: `gradgen.grad(f, argnums)(*args)` after its first call; *emitted*: "
         "the generated `f_grad` called directly; *f*: the function alone (forward only); "
         "*first call*: a fresh `gradgen.grad` of the example copied to a new file, called "
         "once (trace + differentiate + optimize + emit + compile, and the function's own "
         "forward run on the traced values)."),
        "",
        ("| workload | hand-written | **gradgen cached** | **÷ hand** | emitted | ÷ hand "
         "| f (forward) | first call | first ÷ cached |"),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        w = row.workload
        if row.failure:
            lines.append(f"| {w.title} | – | **failed** | – | – | – | – | – | – |")
            continue
        hand, ours, direct, forward = row.contenders
        first = statistics.median(t for t, _ in row.first)
        lines.append(
            f"| {w.title} | {fmt_time(hand.median)} | **{fmt_time(ours.median)}** | "
            f"**{ours.ratio(hand):.2f}x** | {fmt_time(direct.median)} | "
            f"{direct.ratio(hand):.2f}x | {fmt_time(forward.median)} | {fmt_time(first)} | "
            f"{first / ours.median:,.0f}x |")
    first_runs = max((len(r.first) for r in rows), default=0)
    lines += ["", (f"(Medians over {repeats} interleaved rounds after a warmup; *÷ hand*: median "
                   "over rounds of this sample / the hand-written sample of the same round; "
                   f"first call: median of {first_runs} run(s).)"), ""]
    for row in rows:
        w = row.workload
        if row.failure:
            lines.append(f"- **{w.title}: gradgen raised** `{row.failure}`")
        else:
            lines.append(f"- {w.title}: {w.ops_note}.")
    lines += ["- Peers (autograd, PyTorch, JAX) are not run on these workloads.", ""]
    return lines


# --- report ----------------------------------------------------------------------------------


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def versions() -> list[str]:
    out = [(f"Python {platform.python_version()} ({platform.python_implementation()}), "
           f"{platform.system()} {platform.machine()}, {os.cpu_count()} logical CPUs")]
    try:
        import numpy
        out.append(f"gradgen {gradgen.__version__}, NumPy {numpy.__version__}")
    except ImportError:
        out.append(f"gradgen {gradgen.__version__}")
    return out


def verdict(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


def report(contenders, rows, notes, args, wall, array_lines=()) -> str:
    hand_c, gg_c = contenders[0], contenders[1]
    gg = gg_c.median
    lines = [
        "# gradgen performance",
        "",
        "Generated by `python benchmarks/run.py"
        + (" " + " ".join(args) if args else "") + "`; do not edit by hand "
        "(see benchmarks/README.md).",
        "",
        ("> **Machine note.** Measured on a 2-core shared machine: absolute times are noise, the "
        "ratios are what matters. Every number below is a median over interleaved repeats "
        "after a warmup, all contenders measured side by side in the same process run."),
        "",
        *[f"- {v}" for v in versions()],
        f"- total run time {wall:.0f} s",
        "",
        "## 1. Cached gradient call, 200-op scalar `math` function",
        "",
        ("`benchmarks/math200.py`: `f(x, y, z)`, 200 primitive ops (sin, cos, exp, log, sqrt, "
        "tanh, `+ - * / **`; inputs and intermediates reused), generated by "
        "`benchmarks/workload.py`, and `f_grad_by_hand`, its gradient written out the way a "
        "careful person would (forward values named and reused, one fused adjoint per value). "
        "All gradients are checked against it before timing (and it against central "
        "differences). Each contender returns all three partial derivatives at "
        f"`{POINT}`."),
        "",
        "| contender | median per call | ÷ hand-written | ÷ gradgen | notes |",
        "|---|---:|---:|---:|---|",
    ]
    for c in contenders:
        lines.append(
            f"| {c.name} | {fmt_time(c.median)} | {c.ratio(hand_c):.2f}x | "
            f"{c.ratio(gg_c):.1f}x | {c.note}{' (information only)' if c.info_only else ''} |")
    lines += ["", (f"({contenders[0].number}–{max(c.number for c in contenders)} calls per "
              f"sample, {len(contenders[0].samples)} samples per contender. *÷ hand-written*: "
              "median over rounds of (this sample / the hand-written sample of the same round); "
              "*÷ gradgen*: the same against gradgen, i.e. how many times faster gradgen is.)"),
              ""]
    vs_hand = gg_c.ratio(hand_c)
    targets = [(f"- gradgen within {TARGET_HAND}x of hand-written: {vs_hand:.2f}x, "
               f"{verdict(vs_hand <= TARGET_HAND)}.")]
    for c in contenders:
        if c.name.startswith(("HIPS", "PyTorch")):
            targets.append(f"- gradgen at least {TARGET_PEERS:.0f}x faster than {c.name}: "
                           f"{c.ratio(gg_c):.0f}x, {verdict(c.ratio(gg_c) >= TARGET_PEERS)}.")
    for peer in ("HIPS", "PyTorch"):
        if not any(c.name.startswith(peer) for c in contenders):
            targets.append(f"- gradgen at least {TARGET_PEERS:.0f}x faster than {peer}: "
                           "not measured (not installed, see the notes).")
    direct = contenders[2].median
    targets.append(f"- Of gradgen's {fmt_time(gg)}, the emitted code takes {fmt_time(direct)} "
                   f"({contenders[2].ratio(hand_c):.2f}x hand-written) and the `grad` call "
                   f"dispatch {fmt_time(gg - direct)}.")
    lines += targets
    for note in notes:
        lines.append(f"- Note: {note}")

    lines += [
        "",
        "## 2. First call: trace + differentiate + optimize + emit + compile",
        "",
        ("A fresh `gradgen.grad(f, argnums=(0, 1, 2))` called once on a function just written "
         "to a new file with unique text, so no per-file cache helps. *unrolled*: straight-line "
         "code from the same generator as part 1, a few ops per line; *loop*: "
         f"`for _ in range(n)` over a {LOOP_OPS_PER_STEP}-op body (sin, exp, tanh, `* +`)."),
        "",
        ("*CPU per op* is `time.process_time`, which a loaded machine disturbs less than wall "
         "time. The last three columns split the first call's CPU time (paired within a round, "
         "median over rounds) using two more calls on the same module: *source analysis* = "
         "first call − a second fresh `grad` on the same file (gradgen's per-file source "
         "tables, built with libcst, are then cached); *line observer* = that second call − a "
         "third one with gradgen's `sys.settrace` binding observer kept out (it names values "
         "after the user's variables; the gradient is the same without it); *core* = the third "
         "call: trace, reverse, optimize, emit, compile."),
        "",
        ("| function | ops | runs | first call | **per op** | CPU per op | source analysis "
         "| line observer | core |"),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    medians: dict[str, list[tuple[int, float, float]]] = {}
    failures: list[str] = []
    for row in rows:
        if row.failure:
            lines.append(f"| {row.kind} | {row.n_ops:,} | – | **failed** | – | – | – | – | – |")
            failures.append(f"- **{row.kind}, {row.n_ops:,} ops: the first call raised** "
                            f"`{row.failure}`")
            continue
        cold = statistics.median(w for w, _ in row.cold)
        cold_cpu = statistics.median(c for _, c in row.cold)
        # CPU time, paired within each round, then the median over rounds
        analysis = statistics.median(
            c[1] - w[1] for c, w in zip(row.cold, row.warm_file, strict=True))
        observer = statistics.median(
            w[1] - o[1] for w, o in zip(row.warm_file, row.no_observer, strict=True))
        core = statistics.median(o[1] for o in row.no_observer)  # NaN: no observer to stop
        medians.setdefault(row.kind, []).append((row.n_ops, cold, cold_cpu))

        def us(seconds, n=row.n_ops):
            return f"{seconds / n * 1e6:,.0f} µs"

        lines.append(
            f"| {row.kind} | {row.n_ops:,} | {len(row.cold)} | {fmt_time(cold)} | "
            f"**{us(cold)}** | {us(cold_cpu)} | {us(analysis)} | {us(observer)} | {us(core)} |")
    lines.append("")
    if not rows:
        lines.append("- Skipped in this run (`--skip-first-call`).")
    lines += failures
    for kind, points in medians.items():
        per_op = [t / n for n, t, _ in points]
        per_op_cpu = [c / n for n, _, c in points]
        ratio = max(per_op) / min(per_op)
        trend = "grows" if per_op[-1] > per_op[0] else "falls"
        failed = [r.n_ops for r in rows if r.kind == kind and r.failure]
        met = ratio <= TARGET_FLAT and not failed
        lines.append(
            f"- {kind}: per-op cost max/min over {points[0][0]:,}–{points[-1][0]:,} ops = "
            f"**{ratio:.2f}x** (target ≤ {TARGET_FLAT}x: {verdict(met)}"
            + (f", the {failed[0]:,}-op first call failed" if failed else "")
            + f"); it {trend} with size. In CPU time: "
            f"{max(per_op_cpu) / min(per_op_cpu):.2f}x.")
        marginal = [(t1 - t0) / (n1 - n0)
                    for (n0, t0, _), (n1, t1, _) in itertools.pairwise(points)]
        if marginal:
            steps = ", ".join(
                f"{n0:,}→{n1:,} ops: {m * 1e6:,.0f} µs"
                for ((n0, _, _), (n1, _, _)), m in zip(itertools.pairwise(points), marginal,
                                                        strict=True))
            fixed = points[0][1] - points[0][0] * marginal[0]
            lines.append(
                f"  Marginal wall time per added op, {steps}"
                + (f" (last/first {marginal[-1] / marginal[0]:.2f}x; flat means linear)"
                   if len(marginal) > 1 and marginal[0] > 0 else "")
                + f"; implied fixed cost per first call ≈ {fmt_time(max(fixed, 0.0))}.")
    lines += ["", *array_lines]
    lines += [
        "## How to reproduce",
        "",
        "```",
        'pip install -e ".[bench]"',
        "python benchmarks/run.py",
        "```",
        "",
        ("Targets (reported, never asserted; tests/ has no timing checks): gradgen's cached call "
        f"within {TARGET_HAND}x of the hand-written gradient and at least {TARGET_PEERS:.0f}x "
        "faster than HIPS autograd and PyTorch eager; first-call cost per op flat within "
        f"{TARGET_FLAT}x from 1e2 to 1e4 ops. JAX is extra information."),
        "",
    ]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="fewer repeats and sizes up to 1e3 ops (a smoke run, not for docs)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "performance.md"),
                        help="where to write the report (default docs/performance.md)")
    parser.add_argument("--skip-first-call", action="store_true",
                        help="skip part 2 (first-call cost per op)")
    parser.add_argument("--skip-arrays", action="store_true",
                        help="skip part 3 (array workloads)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    notes: list[str] = []
    if args.quick:
        contenders, _ = part1(repeats=5, budget=0.02, notes=notes)
        sizes, repeats = [100, 1000], {100: 3, 1000: 2}
        array_repeats, array_budget, first_rounds = 5, 0.02, 1
    else:
        contenders, _ = part1(repeats=21, budget=0.05, notes=notes)
        sizes, repeats = [100, 1000, 10000], {100: 9, 1000: 5, 10000: 3}
        array_repeats, array_budget, first_rounds = 15, 0.05, 3
    rows = [] if args.skip_first_call else part2(sizes, repeats)
    array_lines = [] if args.skip_arrays else report_arrays(
        part3(array_repeats, array_budget, first_rounds), array_repeats)
    if not args.skip_arrays:  # part 4: the array-API target against jax.jit(grad) and torch
        array_lines += ["", *array_api.run(3 if args.quick else 7, quick=args.quick)]
    flags = [a for a in (argv if argv is not None else sys.argv[1:]) if not a.startswith("--out")]
    text = report(contenders, rows, notes, flags, time.perf_counter() - started, array_lines)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(text)
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
