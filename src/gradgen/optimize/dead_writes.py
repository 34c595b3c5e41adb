"""Writes nobody reads: ``a[i] = v`` whose row i no later reader looks at."""

from __future__ import annotations

from ..ir import Graph, Node
from .rewrite import Rewriter

# Readers that pass the rest of an array on: later versions or renames of it.
_PASS_ON = ("index_update", "index_add", "adjoint")


def drop_dead_writes(graph: Graph) -> tuple[Graph, bool]:
    """``a[i] = v`` is dropped when no reader of the new version (or of a later version or
    rename of it) reads row i: every reader takes other rows, ``a[j]`` with j != i. That is
    the backward of ``h[t] = ...`` in an unrolled loop: it zeroes the adjoint's row t, which
    the earlier steps, reading rows t-1, t-2, ..., never look at. The values read are the
    same, so no float changes; a write whose array is returned or read whole stays."""
    readers: dict[Node, list[Node]] = {}
    for node in graph.nodes:
        for ref in node.inputs:
            readers.setdefault(ref.node, []).append(node)
    returned = {r.node for r in graph.outputs}
    rw = Rewriter(graph)
    for node in graph.nodes:
        new = rw.rebuilt(node)
        row = _written_row(node)
        if row is not None and _row_unread(node, row, readers, returned):
            rw.replace(node, new.inputs[0])
            continue
        rw.keep(new)
    return rw.result(), rw.changed


def _written_row(node: Node) -> int | None:
    """i for ``a[i] = v`` with one integer i (counted from the front)."""
    if node.op.name != "index_update" or len(node.inputs) != 2:
        return None
    index = node.attrs["index"]
    if len(index) != 1 or type(index[0]) is not int:
        return None
    return index[0] % node.aval.shape[0]


def _row_unread(write: Node, row: int, readers, returned) -> bool:
    todo, seen = [write], set()
    while todo:  # every value that still holds the written row, and who reads it
        node = todo.pop()
        if node in returned:
            return False
        for reader in readers.get(node, ()):
            if reader in seen:
                continue
            seen.add(reader)
            if reader.op.name in _PASS_ON and reader.inputs[0].node is node and all(
                    r.node is not node for r in reader.inputs[1:]):
                todo.append(reader)
            elif reader.op.name == "getitem" and len(reader.inputs) == 1:
                index = reader.attrs["index"]
                if len(index) != 1 or type(index[0]) is not int or (
                        index[0] % node.aval.shape[0] == row):
                    return False
            else:
                return False
    return True
