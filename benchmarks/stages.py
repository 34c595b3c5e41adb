"""gradgen's first call split by stage, measured from outside: the stage functions are wrapped
for the duration of a measurement, nothing in src/ knows about it.

Each stage's time is exclusive (a stage called inside another, like source analysis inside the
trace, counts for itself only). What no wrapped function covers is the first run of the emitted
code plus the ``grad`` call's own work: ``first call - sum of the stages``.
"""

from __future__ import annotations

import functools
import importlib
import sys
import time
from collections import defaultdict
from typing import Self

# stage -> the functions that implement it ("module:attribute"); a stage whose first list is
# missing from this gradgen (a renamed function) falls back to the second
STAGES: list[tuple[str, list[str], list[str]]] = [
    ("source analysis", ["gradgen.source:analyse_code", "gradgen.source:analyse_file"],
     ["gradgen.source:_line_table_for_text", "gradgen.source:line_table"]),
    ("trace", ["gradgen.tracing:trace_function"], []),
    ("reverse", ["gradgen.reverse:reverse"], []),
    ("optimize", ["gradgen.optimize:optimize", "gradgen.optimize:dce"], []),
    # a call writes only the function it runs (Module.text_of); the rest when read (text)
    ("emit", ["gradgen.emit:emit_module", "gradgen.emit:Module.text_of",
              "gradgen.emit:Module.text"], []),
    ("compile", ["gradgen.compile:load_module"], []),
    # everything else the build does: argument checks, output selection, the module header
    ("other build work", ["gradgen.api:GradFunction._compile"], []),
]
FIRST_RUN = "first run"  # the remainder: the emitted code's first run and the call itself
STAGE_NAMES = [name for name, _, _ in STAGES] + [FIRST_RUN]


def _resolve(target: str):
    """(owner, attribute name, function) for "module:Class.attr" or "module:function"; None
    if this gradgen has no such thing. Only modules gradgen has already imported are used:
    importing one here would move its import cost out of the first call."""
    module_name, _, path = target.partition(":")
    owner = sys.modules.get(module_name)
    *classes, attr = path.split(".")
    for name in classes:
        owner = getattr(owner, name, None)
    fn = getattr(owner, attr, None) if owner is not None else None
    return (owner, attr, fn) if callable(fn) else None


class StageTimer:
    """``with StageTimer() as timer: ...`` wraps the stage functions; ``timer.seconds`` maps a
    stage to its exclusive time on ``clock`` (wall time unless told, e.g. time.process_time);
    ``timer.missing`` lists targets this gradgen lacks."""

    def __init__(self, clock=time.perf_counter):
        self.clock = clock
        self.seconds: dict[str, float] = defaultdict(float)
        self.missing: list[str] = []
        self._stack: list[float] = []  # time spent in nested stages, per active call
        self._undo: list[tuple[object, str, object]] = []

    def _wrap(self, stage: str, fn):
        stack, seconds, clock = self._stack, self.seconds, self.clock

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            stack.append(0.0)
            t0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = clock() - t0
                seconds[stage] += elapsed - stack.pop()
                if stack:
                    stack[-1] += elapsed

        return timed

    def __enter__(self) -> Self:
        importlib.import_module("gradgen")
        for stage, targets, fallback in STAGES:
            found = [(t, r) for t in targets if (r := _resolve(t)) is not None]
            if not found:
                self.missing += targets
                found = [(t, r) for t in fallback if (r := _resolve(t)) is not None]
            for _, (owner, attr, fn) in found:
                wrapped = self._wrap(stage, fn)
                if isinstance(owner, type):
                    self._patch(owner, attr, wrapped)
                    continue
                # a module-level function is also imported by name into other modules
                for module in [m for n, m in sys.modules.items()
                               if n == "gradgen" or n.startswith("gradgen.")]:
                    for name, value in list(vars(module).items()):
                        if value is fn:
                            self._patch(module, name, wrapped)
        return self

    def _patch(self, owner, name: str, value) -> None:
        self._undo.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, value)

    def __exit__(self, *exc) -> None:
        for owner, name, value in reversed(self._undo):
            setattr(owner, name, value)
        self._undo.clear()

    def reset(self) -> None:
        self.seconds.clear()

    def split(self, total: float) -> dict[str, float]:
        """Every stage's seconds, the first run being what the stages leave of ``total``."""
        out = {name: self.seconds.get(name, 0.0) for name, _, _ in STAGES}
        out[FIRST_RUN] = max(total - sum(out.values()), 0.0)
        return out
