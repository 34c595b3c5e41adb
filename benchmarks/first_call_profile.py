"""Where a first call's time goes: per-stage breakdown and the per-op curve.

    python benchmarks/first_call_profile.py                  # 1e2, 1e3, 1e4 ops, and JAX
    python benchmarks/first_call_profile.py --sizes 100 100000 --no-jax

For each size, a fresh unrolled scalar function (benchmarks/workload.py, the generator behind
math200.py) is written to a new file with unique text, so no per-file cache helps, and
``gradgen.grad(f, argnums=(0, 1, 2))`` is called once. The stages are the ones the benchmark
report splits a first call into, timed the same way (``stages.StageTimer``: exclusive times,
so source analysis is not counted again inside trace); fresh files are
``part_first_call.FreshModules``'.

``observer`` is measured apart: the same trace again on the same file (source analysis now
cached) with and without gradgen's line observer. With ``--jax``, the 200-op fixture's
``jax.jit(jax.grad(f))`` first call (trace + compile) is measured side by side with gradgen's.
Times are CPU seconds (``time.process_time``, which a loaded machine disturbs less than wall
time; ``--wall`` for wall-clock), medians over ``--rounds`` fresh files.
``run.py`` (part 2) reports the same per-op curve; this script is the one to profile with.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import resource
import statistics
import sys
import time
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import stages
import workload
from part_first_call import FreshModules

import gradgen
import gradgen.tracing

ARGNUMS = (0, 1, 2)
POINT = workload.POINT
CLOCK = time.process_time  # --wall: time.perf_counter


def first_call(f) -> tuple[float, dict[str, float], dict[str, float | None]]:
    """Seconds of one fresh ``gradgen.grad`` call, its stages, and its memory (``faults``,
    ``peak`` growth in KB, None where an older peak hides it)."""
    gc.collect()
    rss_before, before = current_rss_kb(), resource.getrusage(resource.RUSAGE_SELF)
    with stages.StageTimer(clock=CLOCK) as timer:
        start = CLOCK()
        df = gradgen.grad(f, argnums=ARGNUMS)
        df(*POINT)
        total = CLOCK() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    # Dropped once the clock has stopped: freeing the function and everything its build keeps
    # is not part of a first call (a user keeps df), and was counted as "first run".
    del df
    peak = None  # ru_maxrss is in KB on Linux
    if rss_before is not None and after.ru_maxrss > before.ru_maxrss:
        peak = after.ru_maxrss - rss_before
    memory = {"faults": after.ru_minflt - before.ru_minflt, "peak": peak}
    return total, timer.split(total), memory


def current_rss_kb() -> int | None:
    """The process's resident set now, in KB (Linux), or None."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * resource.getpagesize() // 1024
    except (OSError, IndexError, ValueError):
        return None


@contextlib.contextmanager
def observer_off():
    """Keep gradgen's line observer out, as gradgen does when another tracer is active."""
    observer = getattr(gradgen.tracing, "BindingObserver", None)
    if observer is None or getattr(observer, "_active", 0) is not None:
        yield False
        return
    observer._active = object()
    try:
        yield True
    finally:
        observer._active = None


def trace_seconds(f) -> float:
    gc.collect()
    start = CLOCK()
    gradgen.tracing.trace_function(f, POINT)
    return CLOCK() - start


def profile_sizes(sizes: list[int], rounds: int) -> None:
    fresh = FreshModules()
    first_call(fresh.load("unrolled", 20).f)  # imports, op tables
    print("First call of gradgen.grad(f, argnums=(0, 1, 2)) on unrolled scalar `math` code; "
          f"µs per op, medians over fresh files ({'wall' if CLOCK is time.perf_counter else 'CPU'}"
          " time)")
    header = ["ops", "rounds", "first call", "per op", *stages.STAGE_NAMES, "observer",
              "faults", "peak KB"]
    print(" | ".join(f"{h:>15}" if i > 1 else h for i, h in enumerate(header)))
    for n in sizes:
        runs = max(1, rounds if n <= 10_000 else 1)
        totals, split_by, observer = [], {s: [] for s in stages.STAGE_NAMES}, []
        faults, peaks = [], []
        for _ in range(runs):
            module = fresh.load("unrolled", n)
            total, split, memory = first_call(module.f)
            totals.append(total)
            faults.append(memory["faults"])
            if memory["peak"] is not None:
                peaks.append(memory["peak"])
            for stage in stages.STAGE_NAMES:
                split_by[stage].append(split[stage])
            with_observer = trace_seconds(module.f)
            with observer_off() as off:
                without = trace_seconds(module.f) if off else float("nan")
            observer.append(with_observer - without)
        total = statistics.median(totals)
        cells = [f"{n:,}", f"{runs}", f"{total * 1e3:.1f} ms", f"{total / n * 1e6:.0f} µs"]
        cells += [f"{statistics.median(split_by[s]) / n * 1e6:.1f}" for s in stages.STAGE_NAMES]
        cells.append(f"{statistics.median(observer) / n * 1e6:.1f}")
        cells.append(f"{statistics.median(faults) / n:.2f}")
        cells.append(f"{statistics.median(peaks) / n:.2f}" if peaks else "-")
        print(" | ".join(f"{c:>15}" if i > 1 else c for i, c in enumerate(cells)), flush=True)
    fresh.dir.cleanup()


def compare_jax(rounds: int) -> None:
    """The 200-op fixture's first call: gradgen.grad vs jax.jit(jax.grad) (trace + compile)."""
    try:
        import jax
    except ImportError:
        print("JAX is not installed: no side-by-side first call")
        return
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    fresh = FreshModules()
    shim = types.SimpleNamespace(**{n: getattr(jnp, n) for n in workload.UNARY})
    ours, theirs = [], []
    for _ in range(rounds + 1):  # the first round warms both up
        module = fresh.load("unrolled", workload.FIXTURE_OPS)
        gc.collect()
        start = time.perf_counter()  # wall time on both sides: XLA compiles on many threads
        gradgen.grad(module.f, argnums=ARGNUMS)(*POINT)
        ours.append(time.perf_counter() - start)
        fj = types.FunctionType(module.f.__code__, {"math": shim}, "f")
        gc.collect()
        start = time.perf_counter()
        jax.block_until_ready(jax.jit(jax.grad(fj, argnums=ARGNUMS))(*POINT))
        theirs.append(time.perf_counter() - start)
    mine, jit = statistics.median(ours[1:]), statistics.median(theirs[1:])
    print(f"\n{workload.FIXTURE_OPS}-op fixture, first call: gradgen.grad {mine * 1e3:.1f} ms, "
          f"jax.jit(jax.grad) trace + compile {jit * 1e3:.1f} ms (wall): ratio {mine / jit:.2f} "
          "(target <= 0.25)")
    fresh.dir.cleanup()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000, 10_000])
    parser.add_argument("--rounds", type=int, default=3, help="fresh files per size")
    parser.add_argument("--no-jax", action="store_true", help="skip the JAX comparison")
    parser.add_argument("--wall", action="store_true", help="wall-clock instead of CPU time")
    args = parser.parse_args(argv)
    global CLOCK
    CLOCK = time.perf_counter if args.wall else time.process_time
    profile_sizes(args.sizes, args.rounds)
    if not args.no_jax:
        compare_jax(args.rounds)


if __name__ == "__main__":
    main()
