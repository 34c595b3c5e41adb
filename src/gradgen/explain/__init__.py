"""``gradgen explain``: one offline HTML page linking source, emitted gradient and graph."""

from __future__ import annotations

import inspect

from ..build import Built
from .page import PageInput, iframe, render_page

__all__ = ["explain", "iframe", "page_for_built"]


def _def_line(fn) -> tuple[str | None, int | None, list[str]]:
    from ..tracing import function_loc

    loc = function_loc(fn)
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    if loc is None:
        return None, None, params
    return loc.file, loc.line, params


def page_for_built(built: Built, fn) -> str:
    """The page for one compiled path of ``fn``."""
    file, line, params = _def_line(fn)
    names = params or built.forward.meta.get("arg_names", [])
    argnums = built.request.argnums
    if built.request.vjp:
        what = "the vector-Jacobian product"
    else:
        wrt = ", ".join(names[a] for a in argnums if a < len(names))
        what = f"the gradient with respect to {wrt}" if wrt else ""
    page = PageInput(built.annotated_source(), built.joint, built.fname, file, line,
                     list(names), what)
    return render_page(page)


def explain(fn, *args, argnums=0, vjp: bool = False, intermediates=(), check_finite=False,
            command: str | None = None) -> str:
    """One self-contained HTML page (inline CSS and JS, nothing fetched) showing ``fn``'s
    source, the emitted gradient module annotated with its rules, and the forward and
    backward graph as inline SVG, linked line by line."""
    from ..api import _normalize_argnums
    from ..build import Request, build

    nums, as_tuple = _normalize_argnums(argnums)
    request = Request(nums, as_tuple, tuple(intermediates), vjp, check_finite)
    built = build(fn, args, request, command, annotate=True)
    return page_for_built(built, fn)
