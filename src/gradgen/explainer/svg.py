"""Graph -> inline SVG, laid out in Python (no Graphviz): forward and backward side by side.

A layered layout in the Sugiyama style, kept small: every drawn node gets a row (the longest
path from the inputs; the seed sits on the row of the value it seeds), rows are ordered by
the mean position of what each node reads, and nodes are packed left to right as near that
mean as they fit. The backward nodes are placed in a second column; a backward node that
reads forward values is placed as its forward counterparts are, so ``grad_y`` sits in the
backward column where ``y`` sits in the forward one. Every pass is a loop over the nodes in
graph order (already topological): no recursion, linear in the graph's size.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..printing import _names

if TYPE_CHECKING:  # a view of a graph: ir calls down into it (tests/test_layering.py)
    from ..ir import Graph, Node

CHAR_W = 7.3  # width of one character at the 12 px monospace font the page uses
NODE_H = 38
ROW_GAP = 34
COL_GAP = 18
SIDE_GAP = 44
FIT_WIDTH = 700  # narrower drawings scale down to fit their pane; wider ones scroll
PAD = 12


@dataclass
class Box:
    node: Node
    name: str  # the user's name for the value ("" when it has none)
    label: str
    detail: str
    side: str  # fwd or bwd
    kind: str  # input, op, seed, guard
    row: int = 0
    x: float = 0.0
    width: float = 0.0

    @property
    def center(self) -> float:
        return self.x + self.width / 2


def _label(node: Node, name: str | None) -> tuple[str, str, str]:
    """(first line, second line, kind) of a node's box."""
    op = node.op.name
    aval = str(node.aval) if node.avals else ""
    if op == "input":
        return name or "input", aval, "input"
    if op == "seed":
        return f"{name} = 1", f"seed {aval}", "seed"
    if op == "guard":
        return f"guard == {node.attrs.get('expect')}", "", "guard"
    if op == "adjoint":  # a rename: the value under its adjoint's name
        return name or "adjoint", aval, "op"
    show = node.op.extra.get("show_attrs")
    what = "sum" if op == "add_n" else op  # add_n: the fused sum of a value's adjoints
    what += f"[{show(node.attrs)}]" if show is not None else ""
    if len(what) > 28:
        what = what[:27] + "…"
    return (f"{name} = {what}" if name else what), aval, "op"


def _drawn(graph: Graph) -> tuple[list[Node], dict[Node, Node], dict[Node, str]]:
    """The nodes to draw, the node drawn for each hidden one, and display names. Constants
    are not drawn (they are in the labels' ops); an ``adjoint`` rename whose input is used
    only by it is drawn as that input, named as the adjoint."""
    names = _names(graph)
    uses = graph.uses()
    rep: dict[Node, Node] = {}
    shown: dict[Node, str] = {}
    drawn: list[Node] = []
    for node in graph.nodes:
        if node.op.name == "const":
            continue
        if node.op.name == "adjoint" and node.inputs:
            source = rep.get(node.inputs[0].node, node.inputs[0].node)
            if source.role == "bwd" and uses.get(node.inputs[0].node) == 1 and (
                    source.op.name != "const") and source not in shown:
                rep[node] = source
                shown[source] = names.get(node, node.name or "")
                continue
        drawn.append(node)
    for node in drawn:
        if node not in shown and node.avals:
            shown[node] = names.get(node, "") if node.name else ""
    return drawn, rep, shown


def layout(graph: Graph) -> tuple[list[Box], list[tuple[Box, Box, int, bool]]]:
    """Boxes with rows and x positions, and edges (source, target, output index, crossing)."""
    drawn, rep, shown = _drawn(graph)
    boxes: dict[Node, Box] = {}
    n_leaves = len(graph.meta.get("leaves", ())) or len(graph.inputs)
    for node in drawn:
        first, second, kind = _label(node, shown.get(node))
        # a vjp's cotangent is an input of the backward pass: it starts the backward column
        cotangent = node.op.name == "input" and node.attrs.get("index", 0) >= n_leaves
        side = "bwd" if node.role == "bwd" or cotangent else "fwd"
        width = max(len(first), len(second)) * CHAR_W + 18
        boxes[node] = Box(node, shown.get(node, ""), first, second, side, kind, width=width)
    preds: dict[Node, list[tuple[Node, int]]] = {n: [] for n in drawn}
    edges = []
    for node in drawn:
        seen = set()
        for ref in node.inputs:
            src = rep.get(ref.node, ref.node)
            if src in boxes and (src, ref.index) not in seen:
                seen.add((src, ref.index))
                preds[node].append((src, ref.index))
    # rows: longest path; the seed joins the row of the output it seeds
    out_rows = []
    for node in drawn:
        box = boxes[node]
        if node.op.name == "seed":
            box.row = max(out_rows, default=0)
        else:
            box.row = 1 + max((boxes[p].row for p, _ in preds[node]), default=-1)
        if node.role != "bwd":
            out_rows.append(box.row)
    # columns: forward first, then backward to its right, each row packed near its readers
    right = 0.0
    for side in ("fwd", "bwd"):
        origin = right + SIDE_GAP if side == "bwd" else 0.0
        rows: dict[int, list[Box]] = {}
        for node in drawn:
            if boxes[node].side == side:
                rows.setdefault(boxes[node].row, []).append(boxes[node])
        for row in sorted(rows):
            wanted = []
            for order, box in enumerate(rows[row]):
                # a backward node follows the backward values it reads; only one that reads
                # forward values alone is placed under them, mirrored into its column
                own = [boxes[p].center for p, _ in preds[box.node] if boxes[p].side == side]
                xs = own or [boxes[p].center + origin for p, _ in preds[box.node]]
                wanted.append((sum(xs) / len(xs) if xs else None, order, box))
            placed_end = origin
            known = [w for w, _, _ in wanted if w is not None]
            fill = max(known, default=origin)
            for want, _, box in sorted(wanted, key=lambda t: (
                    fill + t[1] if t[0] is None else t[0], t[1])):
                target = (want - box.width / 2) if want is not None else placed_end
                box.x = max(target, placed_end)
                placed_end = box.x + box.width + COL_GAP
            right = max(right, placed_end - COL_GAP)
    for node in drawn:
        for src, index in preds[node]:
            multi = len(src.avals) > 1
            crossing = boxes[src].side != boxes[node].side
            edges.append((boxes[src], boxes[node], index if multi else -1, crossing))
    return [boxes[n] for n in drawn], edges


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def graph_svg(graph: Graph,
              links: Callable[[Node, str], tuple[list[str], list[str]]] | None = None,
              where: Callable[[Node], str] | None = None, id_prefix: str = "g") -> str:
    """The graph as an ``<svg>`` element. ``links(node, name)`` gives the source keys a node
    drawn as ``name`` links to (strong, related): they become its ``data-lines`` and
    ``data-also`` attributes; ``where(node)`` gives the location text of its tooltip."""
    boxes, edges = layout(graph)
    if not boxes:
        return '<svg xmlns="http://www.w3.org/2000/svg" width="0" height="0"></svg>'
    min_x = min(b.x for b in boxes)
    for box in boxes:
        box.x += PAD - min_x
    width = max(b.x + b.width for b in boxes) + PAD
    height = (max(b.row for b in boxes) + 1) * (NODE_H + ROW_GAP) - ROW_GAP + 2 * PAD + 20
    marker = f"{id_prefix}-arrow"
    css = "graph fit" if width <= FIT_WIDTH else "graph"
    parts = [
        (f'<svg xmlns="http://www.w3.org/2000/svg" class="{css}" width="{width:.0f}" '
         f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" role="group" '
         'aria-label="forward and backward graph">'),
        (f'<defs><marker id="{marker}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
         'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
         'class="arrowhead"/></marker></defs>'),
    ]
    fwd = [b for b in boxes if b.side == "fwd"]
    bwd = [b for b in boxes if b.side == "bwd"]
    for title, side in (("forward", fwd), ("backward", bwd)):
        if side:
            x = min(b.x for b in side)
            parts.append(f'<text class="side-title" x="{x:.1f}" y="{PAD + 2}">{title}</text>')

    def top(box: Box) -> float:
        return PAD + 20 + box.row * (NODE_H + ROW_GAP)

    for src, dst, index, crossing in edges:
        x1, y1 = src.center, top(src) + NODE_H
        x2, y2 = dst.center, top(dst)
        if y2 <= y1:  # same row (the seed beside its output): a short horizontal link
            y1, y2 = top(src) + NODE_H / 2, top(dst) + NODE_H / 2
            x1, x2 = (src.x + src.width, dst.x) if x1 < x2 else (src.x, dst.x + dst.width)
            path = f"M{x1:.1f},{y1:.1f} L{x2:.1f},{y2:.1f}"
        else:
            bend = max((y2 - y1) / 2, 12)
            path = (f"M{x1:.1f},{y1:.1f} C{x1:.1f},{y1 + bend:.1f} {x2:.1f},{y2 - bend:.1f} "
                    f"{x2:.1f},{y2:.1f}")
        css = "edge cross" if crossing else f"edge {dst.side}"
        parts.append(f'<path class="{css}" d="{path}" marker-end="url(#{marker})"/>')
        if index >= 0:
            parts.append(f'<text class="edge-label" x="{(x1 + x2) / 2 + 3:.1f}" '
                         f'y="{(y1 + y2) / 2:.1f}">{index}</text>')
    for box in boxes:
        y = top(box)
        strong, also = links(box.node, box.name) if links is not None else ([], [])
        loc = where(box.node) if where is not None else ""
        label = box.label + (f", {box.detail}" if box.detail else "")
        label += f", {'backward' if box.side == 'bwd' else 'forward'}"
        label += f", from {loc}" if loc else ""
        attrs = f'class="node {box.side} {box.kind}" tabindex="-1" role="button"'
        attrs += ' aria-pressed="false"'
        attrs += f' aria-label="{_esc(label)}"'
        if strong:
            attrs += f' data-lines="{" ".join(strong)}"'
        if also:
            attrs += f' data-also="{" ".join(also)}"'
        parts.append(f"<g {attrs}><title>{_esc(label)}</title>")
        rx = 3 if box.kind == "input" else 16 if box.kind == "op" else 8
        parts.append(f'<rect x="{box.x:.1f}" y="{y:.1f}" width="{box.width:.1f}" '
                     f'height="{NODE_H}" rx="{rx}"/>')
        cx = box.center
        if box.detail:
            parts.append(f'<text x="{cx:.1f}" y="{y + 16:.1f}">{_esc(box.label)}</text>')
            parts.append(f'<text class="aval" x="{cx:.1f}" y="{y + 30:.1f}">'
                         f"{_esc(box.detail)}</text>")
        else:
            parts.append(f'<text x="{cx:.1f}" y="{y + 23:.1f}">{_esc(box.label)}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    return "\n".join(parts)
