"""Report part: rolled loops against unrolled ones (benchmarks/loops.py does the measuring)."""

from __future__ import annotations

import loops
from harness import Context


def run(ctx: Context) -> str:
    rows = loops.run(ctx.quick)
    for r in rows:
        ctx.target(f"rolled loop's cached call within {loops.TARGET_CACHED}x of the unrolled "
                   f"code: {r['workload']}", f"{r['cached_ratio']:.2f}x",
                   r["cached_ratio"] <= loops.TARGET_CACHED)
    return "\n".join([
        "## Loops stay loops: rolled against unrolled",
        "",
        ("The same function emitted with `loops=\"keep\"` (a forward `for` loop and a reversed "
         "backward loop) and with `loops=\"unroll\"` (straight-line code, one block per trip). "
         "*First call*: trace, differentiate, optimize, emit, compile and one run, medians; "
         "*cached call*: the emitted gradient alone, medians over interleaved repeats; both "
         "gradients are checked equal first."),
        "",
        loops.table(rows),
        "",
    ])
