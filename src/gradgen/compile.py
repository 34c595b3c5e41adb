"""Run emitted module text under a linecache-registered filename, so tracebacks and
inspect.getsource show the generated code while the module's functions live."""

from __future__ import annotations

import hashlib
import linecache
import types
import weakref

# filename -> how many loaded modules of that text are alive. The text is registered in
# linecache while one is: linecache's own checkcache keeps an entry with no mtime forever, so a
# long-running process that builds many gradients (every guard path and signature is a module)
# would keep every text it ever compiled.
_ALIVE: dict[str, int] = {}


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
    function = next((v for v in namespace.values() if isinstance(v, types.FunctionType)), None)
    if function is not None:  # the module's functions and namespace die together (a cycle)
        _ALIVE[filename] = _ALIVE.get(filename, 0) + 1
        weakref.finalize(function, _forget, filename)
    return namespace


def _forget(filename: str) -> None:
    """One module loaded under ``filename`` is gone: drop its text once none is left."""
    left = _ALIVE.pop(filename) - 1
    if left:
        _ALIVE[filename] = left
    else:
        linecache.cache.pop(filename, None)
