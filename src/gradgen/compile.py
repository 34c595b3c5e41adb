"""Run emitted module text under a linecache-registered filename, so tracebacks and
inspect.getsource show the generated code."""

from __future__ import annotations

import hashlib
import linecache


def load_module(text: str, label: str) -> dict:
    """Execute emitted ``text`` and return its namespace. A call compiles a module cut down
    to the function it runs (``emit.Module.text_of``): Python's compiler costs about as much
    per line as writing the line did."""
    digest = hashlib.sha1(text.encode()).hexdigest()[:10]
    filename = f"<gradgen {label} {digest}>"
    code = compile(text, filename, "exec")
    # The lines are made once the compiler is done: its parser needs ~5 KB per op of a
    # scalar function at its peak, and a list of lines (~300 B per op) beside it would
    # only raise that peak. Nothing reads them before the module runs.
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace: dict = {"__name__": f"gradgen_generated_{label}", "__file__": filename}
    exec(code, namespace)  # noqa: S102 - gradgen's own output
    return namespace
