"""What every benchmark part shares: the run's Context, interleaved timing, peak-memory
measurement and formatting. A part is a module with ``run(ctx) -> str`` (benchmarks/README.md).
"""

from __future__ import annotations

import gc
import importlib
import math
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

# one BLAS/OpenMP/XLA thread for every contender, set before NumPy, PyTorch or JAX is imported
# (and inherited by the first-call subprocesses); an explicit setting in the environment wins
THREAD_VARS = {
    "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
    "BLIS_NUM_THREADS": "1", "VECLIB_MAXIMUM_THREADS": "1", "NUMEXPR_NUM_THREADS": "1",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
}


def pin_threads() -> None:
    for var, value in THREAD_VARS.items():
        os.environ.setdefault(var, value)


_STARTED = time.perf_counter()


def log(*args) -> None:
    print(f"[{time.perf_counter() - _STARTED:6.0f} s]", *args, file=sys.stderr, flush=True)


# --- the run's context ----------------------------------------------------------------------


@dataclass
class Target:
    """One target of the issue: reported, never asserted."""

    what: str  # "gradgen cached call within 1.10x of hand-written: MLP"
    measured: str  # "1.04x"
    met: bool | None  # None: not measured (a peer is missing, a run failed)


@dataclass
class Context:
    """Handed to every part's ``run``. Parts read the settings, add targets and notes, and
    return their markdown section; they may write assets (an SVG) next to the report."""

    quick: bool  # a smoke run: fewer repeats and sizes
    out: Path  # the report being written; assets go to out.parent
    targets: list[Target] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # shown once under the targets
    _peers: dict[str, object] = field(default_factory=dict)

    def pick(self, full, quick):
        """``quick`` in a smoke run, ``full`` otherwise."""
        return quick if self.quick else full

    def target(self, what: str, measured: str, met: bool | None) -> None:
        self.targets.append(Target(what, measured, met))

    def peer(self, module: str, install: str):
        """The imported peer module, or None with a note (once) saying how to install it."""
        if module not in self._peers:
            try:
                self._peers[module] = importlib.import_module(module)
            except ImportError:
                self._peers[module] = None
                self.notes.append(f"`{module}` is not installed: its columns are skipped "
                                  f"(`pip install {install}`, or the `bench` extra).")
        return self._peers[module]

    def log(self, *args) -> None:
        log(*args)


# --- timing ---------------------------------------------------------------------------------


@dataclass
class Contender:
    name: str
    call: Callable[[], object]
    number: int = 1  # calls per sample
    samples: list[float] = field(default_factory=list)  # seconds per call, one per round

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
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    return max(1, int(budget / one))


def time_side_by_side(contenders: list[Contender], repeats: int, budget: float,
                      warmup: int = 2) -> None:
    """Warm up, then time every contender once per round, round-robin, ``repeats`` rounds;
    a sample is a loop of calls filling about ``budget`` seconds, the GC paused inside it."""
    for c in contenders:
        for _ in range(warmup):
            c.call()
        c.number = _calibrate(c.call, budget)
    for _ in range(repeats):
        for c in contenders:
            fn = c.call
            gc.collect()
            gc.disable()
            t0 = time.perf_counter()
            for _ in range(c.number):
                fn()
            elapsed = time.perf_counter() - t0
            gc.enable()
            c.samples.append(elapsed / c.number)


def peak_extra_bytes(call: Callable[[], object]) -> int:
    """Peak bytes allocated during one call beyond what was allocated before it, as
    tracemalloc sees them: Python objects and NumPy array buffers (NumPy reports its data
    allocations to tracemalloc), the returned gradient included. PyTorch and XLA allocate
    outside Python's allocators, so tracemalloc cannot see them."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        gc.collect()
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        result = call()
        peak = tracemalloc.get_traced_memory()[1]
        del result
        return peak - before
    finally:
        if started:
            tracemalloc.stop()


# --- formatting -------------------------------------------------------------------------------


def fmt_time(seconds: float) -> str:
    if math.isnan(seconds):  # not measured
        return "–"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def fmt_bytes(n: float) -> str:
    if n < 1024 * 1024:
        return f"{n / 1024:,.0f} KiB"
    return f"{n / 1024 / 1024:,.1f} MiB"


def verdict(met: bool | None) -> str:
    return {True: "**met**", False: "**missed**", None: "not measured"}[met]
