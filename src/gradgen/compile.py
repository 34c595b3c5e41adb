"""Run emitted module text under a linecache-registered filename, so tracebacks and
inspect.getsource show the generated code."""

from __future__ import annotations

import hashlib
import linecache


def load_module(text: str, label: str, only: str | None = None) -> dict:
    """Execute emitted ``text``. With ``only``, the other ``<label>_...`` functions of the
    module (the value_and_grad beside a grad) are not compiled: Python's compiler costs as
    much per line as building the code did. Line numbers and the registered text are the
    whole module's, so tracebacks and inspect still show every line."""
    digest = hashlib.sha1(text.encode()).hexdigest()[:10]
    filename = f"<gradgen {label} {digest}>"
    lines = text.splitlines(True)
    linecache.cache[filename] = (len(text), None, lines, filename)
    compiled = text if only is None else _without_others(lines, f"{label}_", only)
    namespace: dict = {"__name__": f"gradgen_generated_{label}", "__file__": filename}
    exec(compile(compiled, filename, "exec"), namespace)  # noqa: S102 - gradgen's own output
    return namespace


def _without_others(lines: list[str], prefix: str, keep: str) -> str:
    """The module with the lines of its top-level ``def <prefix>...`` functions other than
    ``keep`` left blank (emitted code has no string that goes on at column 0)."""
    out = []
    skipping = False
    for line in lines:
        if line[:1] not in ("", " ", "\n", ")"):  # a top-level statement starts here
            name = line[4:].split("(", 1)[0] if line.startswith("def ") else None
            skipping = name is not None and name.startswith(prefix) and name != keep
        out.append("\n" if skipping else line)
    return "".join(out)
