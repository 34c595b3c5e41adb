"""Fused accumulation: one add_n per adjoint, never a chain of partial sums; slice adjoints of
one array added into one buffer."""

from __future__ import annotations

import numpy as np

from ..ir import Graph, Node, Ref
from ..ops import OPS
from ..ops.core import MAX_FUSED_TERMS, add_n
from ..peephole import names_adjoint
from .rewrite import Rewriter
from .scan import scan


def flatten_sums(graph: Graph) -> tuple[Graph, bool]:
    """add_n(add_n(a, b), c) -> add_n(a, b, c) when the inner sum has no other reader.
    Only the first operand is flattened, so the order of the additions never changes."""
    # Which sums merge is decided on the graph as given: the optimizer's scan lists the
    # nested sums (most graphs have none by the second round, or only sums split at
    # MAX_FUSED_TERMS), and a graph without one that may merge is handed back as it is.
    listed = scan(graph).nested_sums
    nested = [n for n in (graph.nodes if listed is None else listed)
              if n.op is add_n and n.inputs and n.inputs[0].node.op is add_n
              and _fits(n) and not names_adjoint(n.inputs[0].node)]
    if not nested:
        return graph, False
    uses = graph.uses()
    merged_sums = {node for node in nested if uses[node.inputs[0].node] == 1}
    if not merged_sums:
        return graph, False
    rw = Rewriter(graph)
    for node in graph.nodes:
        new = rw.rebuilt(node)
        if node in merged_sums:
            inner = rw.resolve(node.inputs[0].node.out).node
            merged = new.with_inputs(inner.inputs + new.inputs[1:])
            merged.attrs = dict(new.attrs, uses=inner.attrs.get("uses", ()) + new.attrs.get(
                "uses", ()))
            if rw.values is not None:
                rw.values[merged] = rw.values.get(new)
            rw.keep(merged)
            rw.replace(node, merged.out)
            continue
        rw.keep(new)
    return rw.result(), rw.changed


def _fits(node: Node) -> bool:
    """May ``node`` (a sum whose first term is a sum) take in the terms of that inner sum,
    if nothing else reads it? (A sum split over statements at MAX_FUSED_TERMS stays split.)"""
    first = node.inputs[0].node
    return (first.aval == node.aval
            and len(first.inputs) + len(node.inputs) - 1 <= MAX_FUSED_TERMS)


def slice_updates(graph: Graph) -> tuple[Graph, bool]:
    """A sum of the adjoints of slices of one array, ``_scatter(a, x[1:]) + _scatter(b,
    x[:-1])``, becomes one buffer with slice updates, ``g = zeros; g[1:] = a; g[:-1] += b``:
    one full-size array instead of one per slice and one per partial sum. The additions
    happen in the same order, element by element, so every float is unchanged; whole-array
    terms between the slices stay one sum."""
    # Without a slice adjoint (scalar code, whole-array code) there is nothing to gather:
    # one cheap scan instead of a rewrite of the whole graph.
    if not any(n.op.name == "scatter" for n in graph.nodes):
        return graph, False
    uses = graph.uses()
    buffered = {n for n in graph.nodes if n.op is add_n and _has_slice_terms(n, uses)}
    if not buffered:
        return graph, False
    adjoint_names = {n.inputs[0].node: n.name for n in graph.nodes
                     if n.op.name == "adjoint" and n.name}
    rw = Rewriter(graph)
    for node in graph.nodes:
        new = rw.rebuilt(node)
        if node not in buffered:
            rw.keep(new)
            continue
        into = _whole_term_to_add_into(node, uses)
        added = (_buffer_updates(node, new, uses) if into is None
                 else _updates_into(node, new, into))
        # the buffer carries the adjoint's name from its first statement on: grad_x = zeros
        name = new.name or (adjoint_names.get(node) if uses[node] == 1 else None)
        for extra in added:
            if extra.op.name != "const":
                extra.name = name
        rw.add(added)
        rw.replace(node, added[-1].out)
    return rw.result(), rw.changed


def _buffer_updates(node: Node, new: Node, uses) -> list[Node]:
    """The nodes that build ``node``'s sum in one buffer, the last one holding the total."""
    added: list[Node] = []
    acc: Ref | None = None
    run: list[Ref] = []  # whole-array terms not yet added, summed as one add_n

    def total_so_far() -> Ref | None:
        parts = ([acc] if acc is not None else []) + run
        if len(parts) > 1:
            added.append(_node(add_n, parts, {"uses": ()}, node))
            return added[-1].out
        return parts[0] if parts else None

    rows: set[int] | None = set()  # rows written into fresh zeros so far, while that is all
    for old, ref in zip(node.inputs, new.inputs, strict=True):
        if not _is_slice_term(old, node, uses):
            run.append(ref)
            rows = None
            continue
        acc, run = total_so_far(), []
        scatter = ref.node
        index = {"index": scatter.attrs["index"]}
        row = _row(scatter)
        if acc is not None and rows is not None and row is not None and row not in rows:
            # a row still zero: ``g[1] = v`` (``g[1] += v`` would add it to 0.0)
            added.append(_node(OPS["index_update"], [acc, scatter.inputs[0]], index, node))
        elif acc is None:
            zeros = np.zeros(node.aval.shape, node.aval.dtype)
            added.append(Node(OPS["const"], (), {"value": zeros}, node.avals, None, None,
                              "const"))
            added.append(_node(OPS["index_update"], [added[-1].out, scatter.inputs[0]], index,
                               node))
        else:
            added.append(_node(OPS["index_add"], [acc, scatter.inputs[0]], index, node))
        acc = added[-1].out
        rows = rows | {row} if rows is not None and row is not None else None
    if run:
        total_so_far()
    return added


def _whole_term_to_add_into(node: Node, uses) -> int | None:
    """The position of the sum's one whole-array term, when the slice terms can be added into
    it in place of a buffer of zeros: ``grad_h[0] += v`` instead of ``g = zeros; g[0] = v;
    g + grad_h``. Only an array the function computed that nothing else reads, and only
    slices of distinct single rows: each item then gets at most one addition, ``w + v``,
    equal to the sum's ``v + w`` bit for bit (the order of a sum of two is never a question;
    an item no slice writes keeps ``w`` where the sum made ``0.0 + w``, the same number)."""
    whole = [i for i, ref in enumerate(node.inputs) if not _is_slice_term(ref, node, uses)]
    if len(whole) != 1:
        return None
    term = node.inputs[whole[0]].node
    if (term.is_view or names_adjoint(term) or term.op.n_out != 1 or uses[term] != 1
            or term.op.name in ("input", "const", "seed", "adjoint")):
        return None
    rows = [_row(ref.node) for i, ref in enumerate(node.inputs) if i != whole[0]]
    if None in rows or len(set(rows)) != len(rows):
        return None
    return whole[0]


def _updates_into(node: Node, new: Node, into: int) -> list[Node]:
    """The slice terms of ``node``'s sum added into its whole-array term, in order."""
    added: list[Node] = []
    acc = new.inputs[into]
    for i, ref in enumerate(new.inputs):
        if i != into:
            scatter = ref.node
            added.append(_node(OPS["index_add"], [acc, scatter.inputs[0]],
                               {"index": scatter.attrs["index"]}, node))
            acc = added[-1].out
    return added


def _row(scatter: Node) -> int | None:
    """i when a scatter places its values at ``[i]``, one integer (counted from the front)."""
    index = scatter.attrs["index"]
    if len(index) != 1 or type(index[0]) is not int:
        return None
    return index[0] % scatter.attrs["shape"][0]


def _node(op, inputs, attrs, like: Node) -> Node:
    return Node(op, tuple(inputs), attrs, like.avals, like.loc, None, like.role)


def _is_slice_term(ref: Ref, total: Node, uses) -> bool:
    node = ref.node
    return (node.op.name == "scatter" and uses[node] == 1 and ref.aval == total.aval
            and node.inputs[0].aval.dtype == total.aval.dtype and not names_adjoint(node))


def _has_slice_terms(node: Node, uses) -> bool:
    """Worth a buffer: the sum is an array, some terms are slice adjoints, and the first term
    is one of them or an array the function computed (an argument or a view would be copied
    first, which costs what it saves)."""
    if node.aval.shape == () or any(r.aval != node.aval for r in node.inputs):
        return False
    first = node.inputs[0]
    owned = (not first.node.is_view and not names_adjoint(first.node)
             and first.node.op.name not in ("input", "const", "seed", "adjoint"))
    return (owned or _is_slice_term(first, node, uses)) and any(
        _is_slice_term(r, node, uses) for r in node.inputs)
