"""Part: gradgen's first call per op from 1e2 to 1e5 ops, split by stage, with a plot
(docs/performance-first-call.svg)."""

from __future__ import annotations

import gc
import importlib.util
import itertools
import statistics
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import stages
import svgchart
import workload
from harness import Context, fmt_time

import gradgen

US_PER_OP = 100.0  # target: at most 100 µs per op at every size, 1e2 to 1e5 ops
ARGNUMS = (0, 1, 2)
POINT = workload.POINT
SVG_NAME = "performance-first-call.svg"

LOOP_OPS_PER_STEP = 10
LOOP_TEMPLATE = '''"""{salt}"""
import math


def f(x, y, z):
    h = x
    for _ in range({steps}):
        a = math.sin(h) * y + z
        b = math.exp(-0.5 * a * a)
        h = h + math.tanh(h * b + a)
    return h
'''  # the body of benchmarks/models.py:scalar_loop, 10 ops per step


class FreshModules:
    """Writes each function to a new file with unique text, so no per-file or per-text cache
    (linecache, gradgen's source tables) makes a "first call" cheaper than it is."""

    def __init__(self):
        self.dir = tempfile.TemporaryDirectory(prefix="gradgen-bench-")
        self.count = 0
        self._programs: dict[int, list] = {}

    def load(self, kind: str, n_ops: int):
        self.count += 1
        salt = f"fresh copy {self.count} of a {n_ops}-op {kind} function"
        if kind == "loop":
            text = LOOP_TEMPLATE.format(salt=salt, steps=n_ops // LOOP_OPS_PER_STEP)
        else:
            if n_ops not in self._programs:
                self._programs[n_ops] = workload.generate(n_ops, seed=workload.FIXTURE_SEED)
            text = f'"""{salt}"""\nimport math\n\n\n' + workload.function_source(
                self._programs[n_ops])
        path = Path(self.dir.name) / f"bench_fresh_{self.count}.py"
        path.write_text(text)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


@dataclass
class Size:
    kind: str  # "unrolled" or "loop"
    n_ops: int
    runs: list[tuple[float, dict[str, float]]] = field(default_factory=list)  # (wall, split)
    failure: str | None = None

    @property
    def wall(self) -> float:
        return statistics.median(w for w, _ in self.runs)

    def stage(self, name: str) -> float:
        return statistics.median(split[name] for _, split in self.runs)


def _describe_failure(error: BaseException) -> str:
    """``RecursionError at gradgen/layout.py:559 (visit_sub)``: the innermost gradgen frame."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if "gradgen" in f.filename]
    where = ""
    if frames:
        f = frames[-1]
        where = f" at gradgen/{f.filename.split('gradgen/')[-1]}:{f.lineno} ({f.name})"
    return f"{type(error).__name__}{where}: {str(error)[:120]}"


def spread_rounds(rows: list[Size], repeats: dict[int, int]) -> list[Size]:
    """The order to run every row's rounds in, so each row's rounds are spread evenly over the
    whole run rather than packed at its start. This machine's speed drifts by up to ~1.6x over
    minutes; packed rounds gave 1e2 (15 rounds of ~10 ms, 13 of them after the last 1e5 round) one
    moment's speed and 1e5 another's, so "flat" compared moments, not sizes. Each step runs the
    row furthest behind its even share (round k of R due at (k + 1/2) / R of the run), a round
    costing about its op count."""
    total = sum(repeats[row.n_ops] * row.n_ops for row in rows)
    done = dict.fromkeys(range(len(rows)), 0)
    elapsed, order = 0, []
    while any(done[i] < repeats[row.n_ops] for i, row in enumerate(rows)):
        behind = max((i for i, row in enumerate(rows) if done[i] < repeats[row.n_ops]),
                     key=lambda i: (elapsed / total - (done[i] + 0.5) / repeats[rows[i].n_ops], -i))
        order.append(rows[behind])
        done[behind] += 1
        elapsed += rows[behind].n_ops
    return order


def measure(ctx: Context, sizes: list[int], repeats: dict[int, int]) -> list[Size]:
    fresh = FreshModules()
    rows = [Size(kind, n) for kind in ("unrolled", "loop") for n in sizes]
    with stages.StageTimer() as timer:
        for kind in ("unrolled", "loop"):  # imports, op tables: not per-op costs
            gradgen.grad(fresh.load(kind, 20).f, argnums=ARGNUMS)(*POINT)
        for row in spread_rounds(rows, repeats):
            if row.failure:
                continue
            r = len(row.runs)
            f = fresh.load(row.kind, row.n_ops).f
            gc.collect()
            timer.reset()
            try:
                t0 = time.perf_counter()
                df = gradgen.grad(f, argnums=ARGNUMS)
                df(*POINT)
                wall = time.perf_counter() - t0
                # Dropped once the clock has stopped: freeing the function and everything
                # its build keeps is not part of a first call (a user keeps df).
                del df
            except Exception as e:  # noqa: BLE001 - a gradgen failure is a result
                row.failure = _describe_failure(e)
                ctx.log(f"first call: {row.kind} {row.n_ops} ops FAILED: {row.failure}")
                continue
            row.runs.append((wall, timer.split(wall)))
            ctx.log(f"first call: {row.kind} {row.n_ops:,} ops, round {r + 1}: "
                    f"{fmt_time(wall)} ({wall / row.n_ops * 1e6:,.0f} µs/op)")
        missing = timer.missing
    fresh.dir.cleanup()
    if missing:
        ctx.notes.append(f"stages.py found no {', '.join(missing)} in this gradgen: that "
                         "time is counted in neighbouring stages.")
    return rows


def run(ctx: Context) -> str:
    sizes = ctx.pick([100, 1000, 10_000, 100_000], [100, 1000])
    # Medians over more rounds where a round is cheap: one 1e2 round is ~10 ms, so a pause
    # of the shared machine moves its number by half (round 1 76, round 3 150 µs/op, same code)
    repeats = ctx.pick({100: 15, 1000: 7, 10_000: 3, 100_000: 2}, {100: 3, 1000: 1})
    rows = measure(ctx, sizes, repeats)
    unrolled = [r for r in rows if r.kind == "unrolled"]
    per_op = [r.wall / r.n_ops * 1e6 for r in unrolled if r.runs]
    worst = max(per_op) if per_op else float("nan")
    failed = any(r.failure for r in unrolled)
    ctx.target(f"first call at most {US_PER_OP:.0f} µs per op, flat from {sizes[0]:,} to "
               f"{sizes[-1]:,} ops (unrolled scalar code)",
               f"worst {worst:,.0f} µs/op; max/min {worst / min(per_op):.2f}x"
               if per_op else "–", None if not per_op else worst <= US_PER_OP and not failed)
    _write_chart(ctx, rows)
    return "\n".join(_report(ctx, rows, sizes, repeats))


def _write_chart(ctx: Context, rows: list[Size]) -> None:
    series = []
    for kind, label in (("unrolled", "straight-line code"), ("loop", "a Python loop")):
        points = [(r.n_ops, r.wall / r.n_ops * 1e6) for r in rows if r.kind == kind and r.runs]
        if points:
            series.append(svgchart.Series(label, points))
    if not series:
        return
    xs = [x for s in series for x, _ in s.points]
    series.append(svgchart.Series(f"target {US_PER_OP:.0f} µs/op",
                                  [(min(xs), US_PER_OP), (max(xs), US_PER_OP)], dashed=True))
    svg = svgchart.line_chart(series, "gradgen first call: time per op", "ops in the function",
                              "µs per op (first call)")
    (ctx.out.parent / SVG_NAME).write_text(svg)


def _report(ctx: Context, rows: list[Size], sizes, repeats) -> list[str]:
    out = [
        f"## First call per op, {sizes[0]:,} to {sizes[-1]:,} ops",
        "",
        f"![first call per op]({SVG_NAME})",
        "",
        ("A fresh `gradgen.grad(f, argnums=(0, 1, 2))` called once on a scalar `math` "
         "function just written to a new file with unique text, so no per-file cache helps "
         "(in this process, after one small warmup call of each kind, so imports, parsers and "
         "op tables are loaded). *unrolled*: straight-line code from "
         "`benchmarks/workload.py` (the generator of `math200.py`), a few ops per line; "
         f"*loop*: `for _ in range(n)` over the {LOOP_OPS_PER_STEP}-op body of "
         "`models.scalar_loop`. Stages as in the workloads' first-call table, in µs per op (exclusive wall time, "
         "median over runs; the rounds of all sizes are interleaved evenly over the part's run, "
         "so every size sees the same mix of this shared machine's moments)."),
        "",
        "| function | ops | runs | first call | **µs per op** | "
        + " | ".join(stages.STAGE_NAMES) + " |",
        "|---|---:|---:|---:|---:|" + "---:|" * len(stages.STAGE_NAMES),
    ]
    for row in rows:
        if row.failure or not row.runs:
            out.append(f"| {row.kind} | {row.n_ops:,} | – | **failed** | – |"
                       + " – |" * len(stages.STAGE_NAMES))
            continue
        cells = [f"{row.stage(s) / row.n_ops * 1e6:,.1f}" for s in stages.STAGE_NAMES]
        out.append(f"| {row.kind} | {row.n_ops:,} | {len(row.runs)} | {fmt_time(row.wall)} | "
                   f"**{row.wall / row.n_ops * 1e6:,.0f}** | " + " | ".join(cells) + " |")
    out.append("")
    for row in rows:
        if row.failure:
            out.append(f"- **{row.kind}, {row.n_ops:,} ops: the first call raised** "
                       f"`{row.failure}`")
    for kind in ("unrolled", "loop"):
        points = [(r.n_ops, r.wall) for r in rows if r.kind == kind and r.runs]
        if len(points) < 2:
            continue
        per_op = [t / n * 1e6 for n, t in points]
        marginal = ", ".join(
            f"{n0:,}→{n1:,}: {(t1 - t0) / (n1 - n0) * 1e6:,.0f} µs"
            for (n0, t0), (n1, t1) in itertools.pairwise(points))
        out.append(f"- {kind}: µs per op max/min = **{max(per_op) / min(per_op):.2f}x** over "
                   f"{points[0][0]:,}–{points[-1][0]:,} ops; marginal cost per added op "
                   f"{marginal}.")
    out.append("")
    return out
