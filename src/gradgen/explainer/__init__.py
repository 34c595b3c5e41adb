"""The learner's page (``gradgen explain``): source, emitted gradient and graph, linked."""

from __future__ import annotations

import inspect

from ..build import Built
from .page import PageInput, iframe, render_page

__all__ = ["iframe", "page_for_built"]


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
    wrt = ", ".join(names[a] for a in argnums if a < len(names))
    kind = next((k for k in ("hessian", "jacobian") if f"def {built.fname}_{k}(" in built.source),
                "vjp" if built.request.vjp else "gradient")
    what = {"vjp": "the vector-Jacobian product", "hessian": f"the Hessian with respect to {wrt}",
            "jacobian": f"the Jacobian with respect to {wrt}"}.get(
        kind, f"the gradient with respect to {wrt}" if wrt else "")
    page = PageInput(built.annotated_source(), built.joint, built.fname, file, line,
                     list(names), what)
    return render_page(page)
