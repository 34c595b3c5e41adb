"""``Graph._repr_html_``: the graph drawn as inline SVG, with its listing, for notebooks."""

from __future__ import annotations

import hashlib
import html
from typing import TYPE_CHECKING

from .svg import graph_svg

if TYPE_CHECKING:  # a view of a graph: ir calls down into it (tests/test_layering.py)
    from ..ir import Graph

_PALETTE = ("--fg: #1b1f24; --muted: #57606a; --edge: #6e7781; --fwd-fill: #ddeeff; "
            "--fwd-line: #0550ae; --bwd-fill: #ffe6cc; --bwd-line: #9a4a00;")
_DARK = ("--fg: #e6edf3; --muted: #9da7b3; --edge: #8b949e; --fwd-fill: #0c2d6b; "
         "--fwd-line: #79c0ff; --bwd-fill: #4a2600; --bwd-line: #f0883e;")


def _style(scope: str) -> str:
    """The drawing's styles, scoped to one element so they cannot leak into the notebook."""
    s = f"#{scope}"
    return "\n".join([
        f"{s} {{ {_PALETTE} color: var(--fg); }}",
        f"@media (prefers-color-scheme: dark) {{ {s} {{ {_DARK} }} }}",
        f"{s} .scroll {{ overflow-x: auto; }}",
        f"{s} svg .node rect {{ stroke-width: 1.5; }}",
        f"{s} svg .node.fwd rect {{ fill: var(--fwd-fill); stroke: var(--fwd-line); }}",
        f"{s} svg .node.bwd rect {{ fill: var(--bwd-fill); stroke: var(--bwd-line); }}",
        f"{s} svg .node.guard rect {{ stroke-dasharray: 4 2; }}",
        f"{s} svg text {{ font-family: ui-monospace, Menlo, Consolas, monospace; }}",
        f"{s} svg .node text {{ fill: var(--fg); font-size: 12px; text-anchor: middle; }}",
        f"{s} svg .node text.aval {{ fill: var(--muted); font-size: 11px; }}",
        f"{s} svg .edge {{ fill: none; stroke: var(--edge); stroke-width: 1.2; }}",
        f"{s} svg .edge.bwd {{ stroke: var(--bwd-line); }}",
        f"{s} svg .edge.cross {{ stroke-dasharray: 3 3; opacity: 0.7; }}",
        f"{s} svg .arrowhead {{ fill: var(--edge); }}",
        f"{s} svg .side-title, {s} svg .edge-label {{ fill: var(--muted); font-size: 12px; }}",
        f"{s} pre {{ font-size: 12px; overflow-x: auto; }}",
    ])


def graph_html(graph: Graph) -> str:
    """An HTML fragment: the SVG drawing (no Graphviz needed) above ``str(graph)``."""
    listing = str(graph)
    scope = "gradgen-graph-" + hashlib.sha256(listing.encode()).hexdigest()[:12]
    svg = graph_svg(graph, where=lambda n: str(n.loc) if n.loc is not None else "",
                    id_prefix=scope)
    # nothing to select here: the nodes are not controls
    svg = svg.replace(' tabindex="-1" role="button" aria-pressed="false"', "")
    return (f'<div id="{scope}" class="gradgen-graph"><style>{_style(scope)}</style>'
            f'<div class="scroll">{svg}</div>'
            f"<details><summary>listing</summary><pre>{html.escape(listing)}</pre></details>"
            "</div>")
