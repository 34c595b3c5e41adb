"""Part: the seven workloads of issue 10 against the hand-written gradient and the peers:
cached call, peak extra memory, first call in a fresh process and gradgen's first call by stage.
"""

from __future__ import annotations

import math
import pickle
import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import first_call
import methods
import stages
import workloads
from harness import Contender, Context, fmt_bytes, fmt_time, peak_extra_bytes, time_side_by_side

CACHED_WITHIN = 1.10  # gradgen's cached call / hand-written, every workload
FIRST_VS_JAX = {"scalar": 0.25, "mlp": 0.5}  # gradgen's first call / jax.jit(jax.grad)'s
FIRST_VS_HAND = {"chain": 2.0}  # gradgen's first call / the hand-written gradient's first run
MEMORY_SLACK = 1.01  # "at most hand-written's": within 1% (allocator bookkeeping, not arrays)
QUICK_FIRST_CALLS = ("hand", "gradgen", "jax")  # a smoke run measures what the targets need


@dataclass
class Row:
    workload: workloads.Workload
    timed: dict[str, Contender] = field(default_factory=dict)  # method key -> contender
    memory: dict[str, int] = field(default_factory=dict)  # method key -> peak extra bytes
    first: dict[str, list[dict]] = field(default_factory=dict)  # method key -> runs
    problems: dict[str, str] = field(default_factory=dict)  # method key -> what went wrong

    def first_wall(self, key: str) -> float:
        runs = [r["wall"] for r in self.first.get(key, []) if "wall" in r]
        return statistics.median(runs) if runs else float("nan")


def _available(ctx: Context) -> list[methods.Method]:
    return [m for m in methods.METHODS
            if m.module in (None, "gradgen") or ctx.peer(m.module, m.install) is not None]


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {str(error).splitlines()[0][:120] if str(error) else ''}"


def measure_cached(ctx: Context, w: workloads.Workload, available) -> Row:
    """Verify every contender against the hand-written gradient, then time them side by side
    and measure their peak extra memory."""
    row = Row(w)
    workloads.check_by_hand(w)  # raises: a wrong reference must stop the run
    fn, args = w.function(), w.make_args(False)
    reference = w.hand(*args)
    calls = {}
    for m in available:
        try:
            m.setup()
            prepared = m.prepare(w, args)
            grad = m.make(w, fn)
            if not workloads.same_gradient(m.to_numpy(grad(*prepared)), reference):
                row.problems[m.key] = "disagrees with the hand-written gradient"
                continue
        except Exception as e:  # noqa: BLE001 - a failing contender is a result to report
            row.problems[m.key] = _describe(e)
            continue
        calls[m.key] = (grad, prepared)
        row.timed[m.key] = Contender(m.label, lambda g=grad, a=prepared: g(*a))
    for key, problem in row.problems.items():
        ctx.log(f"workloads: {w.key}: {key}: {problem}")
    time_side_by_side(list(row.timed.values()), ctx.pick(15, 5), ctx.pick(0.05, 0.01),
                      warmup=ctx.pick(2, 1))
    for m in available:
        if m.memory and m.key in calls:
            grad, prepared = calls[m.key]
            row.memory[m.key] = peak_extra_bytes(lambda g=grad, a=prepared: g(*a))
    return row


def measure_first_calls(ctx: Context, rows: list[Row], available, rounds: int) -> None:
    """Every (workload, contender) first call in a fresh process, interleaved per round."""
    if ctx.quick:
        rows = [r for r in rows if not r.workload.extra]
        available = [m for m in available if m.key in QUICK_FIRST_CALLS]
    with tempfile.TemporaryDirectory(prefix="gradgen-bench-") as tmp:
        paths = {}
        for row in rows:
            paths[row.workload.key] = Path(tmp) / f"{row.workload.key}.pkl"
            paths[row.workload.key].write_bytes(pickle.dumps(row.workload.make_args(False)))
        for r in range(rounds):
            for row in rows:
                for m in available:
                    if m.key in row.problems:
                        continue
                    result = first_call.run_fresh(row.workload.key, m.key,
                                                  paths[row.workload.key], timeout=600)
                    if "error" in result or not result.get("agrees"):
                        row.problems[m.key] = result.get("error", "first call disagrees")
                        continue
                    row.first.setdefault(m.key, []).append(result)
                ctx.log(f"workloads: first calls, round {r + 1}/{rounds}, {row.workload.key}: "
                        + ", ".join(f"{k} {fmt_time(row.first_wall(k))}" for k in row.first))


def run(ctx: Context) -> str:
    available = _available(ctx)
    rows = []
    for w in workloads.WORKLOADS:
        if w.extra and ctx.quick:
            continue
        ctx.log(f"workloads: {w.key}: verifying and timing {len(available)} contenders")
        rows.append(measure_cached(ctx, w, available))
    rounds = ctx.pick(3, 1)
    measure_first_calls(ctx, rows, available, rounds)
    _add_targets(ctx, rows)
    return "\n".join(_report(ctx, rows, available, rounds))


# --- targets and report ---------------------------------------------------------------------------


def _add_targets(ctx: Context, rows: list[Row]) -> None:
    main = [r for r in rows if not r.workload.extra]
    for row in main:
        hand, ours = row.timed.get("hand"), row.timed.get("gradgen")
        ratio = ours.ratio(hand) if hand and ours else None
        ctx.target(f"cached call within {CACHED_WITHIN:.2f}x of hand-written: "
                   f"{row.workload.title}", f"{ratio:.2f}x" if ratio else "–",
                   None if ratio is None else ratio <= CACHED_WITHIN)
    for row in main:
        key = row.workload.key
        ours = row.first_wall("gradgen")
        if key in FIRST_VS_JAX:
            theirs, limit, whom = row.first_wall("jax"), FIRST_VS_JAX[key], "`jax.jit(jax.grad)`"
        elif key in FIRST_VS_HAND:
            theirs, limit, whom = row.first_wall("hand"), FIRST_VS_HAND[key], "hand-written"
        else:
            continue
        ratio = ours / theirs
        ctx.target(f"first call of {row.workload.title} at most {limit:g}x {whom}'s",
                   f"{fmt_time(ours)} vs {fmt_time(theirs)} = {_times(ours, theirs)}",
                   None if math.isnan(ratio) else ratio <= limit)
    for row in main:
        if row.workload.elements >= 1_000_000:
            ours, hand = row.memory.get("gradgen"), row.memory.get("hand")
            ctx.target(f"peak extra memory at most hand-written's (+1%): {row.workload.title}",
                       f"{ours / 2**20:,.2f} MiB vs {hand / 2**20:,.2f} MiB"
                       if ours is not None and hand else "–",
                       None if ours is None or not hand else ours <= hand * MEMORY_SLACK)


def _times(a: float, b: float, digits: int = 2) -> str:
    ratio = a / b
    if math.isnan(ratio):
        return "–"
    return f"{ratio:,.{digits if ratio < 100 else 0}f}x"


def _cell(row: Row, key: str, bold: bool = False) -> str:
    c, hand = row.timed.get(key), row.timed.get("hand")
    if c is None:
        return "failed" if key in row.problems else "–"
    ratio = c.ratio(hand) if hand else float("nan")
    text = f"{fmt_time(c.median)} ({ratio:.2f}x)"
    return f"**{text}**" if bold else text


def _report(ctx: Context, rows: list[Row], available, rounds: int) -> list[str]:
    keys = [m.key for m in available]
    labels = [m.label for m in available]
    out = [
        "## The seven workloads",
        "",
        ("Float64, one thread, each contender's gradient checked against the hand-written one "
         "before anything is timed (and the hand-written one against central differences at a "
         "small size: `python benchmarks/workloads.py`). The user functions are the files in "
         "`examples/` and `benchmarks/models.py`; the peers run the same code with `np` or "
         "`math` rebound to their namespace (PyTorch: three functions written out line for line "
         "in `benchmarks/methods.py`)."
         + ("" if ctx.quick else " The last row is extra information, not one of the seven.")),
        "",
        "| workload | what |",
        "|---|---|",
        *[f"| {r.workload.title} | {r.workload.note} |" for r in rows],
        "",
        "Contenders:",
        "",
        *[f"- {m.label}: {m.describe}." for m in available],
        "",
        "### Cached call",
        "",
        ("Median time per gradient call after a warmup, and in parentheses the ratio to the "
         "hand-written gradient: the median over rounds of (this sample / the hand-written "
         "sample of the same round). Contenders run round-robin, "
         f"{ctx.pick(15, 5)} rounds; a sample is a loop of calls filling "
         f"~{ctx.pick(50, 10)} ms, the GC paused inside it."),
        "",
        "| workload | " + " | ".join(labels) + " |",
        "|---|" + "---:|" * len(labels),
    ]
    for row in rows:
        out.append(f"| {row.workload.title} | "
                   + " | ".join(_cell(row, k, bold=k == "gradgen") for k in keys) + " |")
    problems = [f"- {row.workload.title}: {methods.BY_KEY[k].label} {p}."
                for row in rows for k, p in row.problems.items()]
    out += ["", *problems, *([""] if problems else [])]

    mem_methods = [m for m in available if m.memory]
    out += [
        "### Peak extra memory",
        "",
        ("Peak bytes allocated during one cached call beyond what was allocated before it, as "
         "`tracemalloc` sees them: Python objects and NumPy's array buffers (NumPy reports "
         "its data allocations to tracemalloc), the returned gradient included. PyTorch and "
         "XLA allocate outside Python's allocators, where tracemalloc cannot see: n/a."),
        "",
        "| workload | " + " | ".join(m.label for m in mem_methods) + " | gradgen ÷ hand |",
        "|---|" + "---:|" * (len(mem_methods) + 1),
    ]
    for row in rows:
        cells = [fmt_bytes(row.memory[m.key]) if m.key in row.memory else "–"
                 for m in mem_methods]
        ours, hand = row.memory.get("gradgen"), row.memory.get("hand")
        ratio = _times(ours, hand) if ours is not None and hand else "–"
        out.append(f"| {row.workload.title} | " + " | ".join(cells) + f" | {ratio} |")

    out += [
        "",
        "### First call",
        "",
        ("Each contender's first call in a fresh Python process (`benchmarks/first_call.py`), "
         "so imports and caches are cold the same way for everyone: the library is imported "
         "and the arguments unpickled and converted to its types first (not timed), then "
         "making the gradient function and its first run to a finished result are timed. "
         "For the hand-written gradient that is its first run, including NumPy's one-time "
         "costs (unpickling runs no arithmetic, so each ufunc loop and BLAS are first used "
         "inside it). For `jax.jit(jax.grad)` it is trace + compile + first run. "
         f"Median of {rounds} process(es) per cell."),
        "",
        "| workload | " + " | ".join(labels) + " | gradgen ÷ jax.jit | gradgen ÷ hand |",
        "|---|" + "---:|" * (len(labels) + 2),
    ]
    for row in [r for r in rows if r.first]:
        cells = [fmt_time(row.first_wall(k)) for k in keys]
        ours = row.first_wall("gradgen")
        out.append(f"| {row.workload.title} | " + " | ".join(cells)
                   + f" | {_times(ours, row.first_wall('jax'))}"
                   + f" | {_times(ours, row.first_wall('hand'), 1)} |")
    if ctx.quick:
        out += ["", ("(`--quick`: only the first calls the targets need, one process each; the "
                "other peers' first calls are left out.)")]
    imports = []
    for m in available:
        runs = [r["import"] for row in rows for r in row.first.get(m.key, [])]
        if runs and m.module:
            imports.append(f"{m.module} {fmt_time(statistics.median(runs))}")
    numpy_runs = [r["numpy_import"] for row in rows for runs in row.first.values() for r in runs]
    if numpy_runs:
        imports.insert(0, f"numpy {fmt_time(statistics.median(numpy_runs))}")
    out += ["", (f"Import times in those processes (median, not included above): "
            f"{', '.join(imports)}."), ""]

    out += [
        "### gradgen's first call by stage",
        "",
        ("The gradgen column of the table above, split by timing gradgen's stage functions "
         "from outside (`benchmarks/stages.py`, wrapped only for the measurement): exclusive "
         "wall time per stage, milliseconds; source analysis includes importing whatever "
         "parser gradgen loads on first use. *first run* is the rest: the emitted code's "
         "first run and the `grad` call itself."),
        "",
        "| workload | first call | " + " | ".join(stages.STAGE_NAMES) + " |",
        "|---|---:|" + "---:|" * len(stages.STAGE_NAMES),
    ]
    missing = set()
    for row in rows:
        runs = row.first.get("gradgen", [])
        if not runs:
            continue
        missing.update(m for r in runs for m in r.get("missing_stages", []))
        cells = [f"{statistics.median(r['stages'][s] for r in runs) * 1e3:,.1f}"
                 for s in stages.STAGE_NAMES]
        out.append(f"| {row.workload.title} | {fmt_time(row.first_wall('gradgen'))} | "
                   + " | ".join(cells) + " |")
    if missing:
        out += ["", (f"(Not found in this gradgen, so counted in neighbouring stages: "
                f"{', '.join(sorted(missing))}.)")]
    out.append("")
    return out
