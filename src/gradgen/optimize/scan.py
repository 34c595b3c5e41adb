"""One look at a graph for what the passes may find: most graphs reach the optimizer with
nothing for cse or fold (reverse records the backward without duplicates or identities),
and one look at the nodes and their inputs says so for every pass."""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass

from ..ir import Graph, Node
from ..peephole import NO_DUPLICATES, UNIQUE, is_number, node_key

# fold: not folded (side effects, names, the visible seed)
KEEP = {"input", "const", "seed", "guard", "adjoint", "copy"}
PRODUCTS = ("mul", "div")  # what fold's seed_outward sheds the seed from
# A scalar node may be rewritten by fold only when its op is one of these, or when it reads
# one of the SPECIAL_INPUTS (a constant, the seed, -x, a broadcast), or when it is a sum of
# a value with itself.
BY_NAME = {"transpose", "stack", "reshape", "broadcast_to", "cast"}
SPECIAL_INPUTS = {"const", "seed", "neg", "broadcast_to"}
WEIGHTY = {"const", "broadcast_to"}  # what a rewrite of more than -(-x) needs among them
_SCAN = "optimize.scan"  # graph.meta key


@dataclass(frozen=True, eq=False)
class Scan:
    """What one look found. ``foldable`` is, for scalar code, every node a fold rewrite may
    apply to (a superset: fold decides), and None for code with arrays (fold looks at every
    node). Valid while the graph's nodes are ``nodes``."""

    nodes: list[Node]
    ops: set[str]  # the names of the ops in the graph
    duplicates: bool  # do two nodes have one cse key?
    foldable: set[Node] | None
    nested_sums: list[Node]  # the sums whose first term is a sum, in order (a superset)


_OP = operator.attrgetter("op")
_INPUTS = operator.attrgetter("inputs")
_AVALS = operator.attrgetter("avals")


def scan(graph: Graph) -> Scan:
    """The graph's Scan, from graph.meta when its nodes are the ones scanned (a pass that
    changes nothing hands the same nodes on; comparing them is one list comparison in C)."""
    nodes = graph.nodes
    found = graph.meta.get(_SCAN)
    if found is not None and found.nodes == nodes:
        return found
    # This runs on every node of the joint graph, so what it asks of every node is asked in C
    # (maps of attrgetters and of set methods): the node's op, its avals, whether it reads a
    # special node. Python looks only at the few nodes that answer yes: the sums, the
    # special nodes, and those that read them.
    ops = set(map(_OP, nodes))
    names = {op.name for op in ops}
    proven = graph.meta.get(NO_DUPLICATES)  # reverse proved these very nodes have none
    duplicates = (proven is None or proven != nodes) and _has_duplicates(nodes)
    sums = _of(nodes, {op for op in ops if op.name == "add_n"})
    nested_sums = [node for node in sums if node.inputs
                   and node.inputs[0][0].op.name == "add_n"]
    avals = list(map(_AVALS, nodes))  # (most nodes of scalar code share one avals tuple)
    distinct = dict(zip(map(id, avals), avals)).values()  # (an Aval hashes in Python)
    scalar = all(not aval.shape for node_avals in distinct for aval in node_avals)
    foldable = _foldable(nodes, ops, sums) if scalar else None
    found = Scan(list(nodes), names, duplicates, foldable, nested_sums)
    graph.meta[_SCAN] = found
    return found


def _of(nodes: list[Node], ops: set) -> list[Node]:
    """The nodes whose op is one of ``ops``, in order (the test in C)."""
    if not ops:
        return []
    return list(itertools.compress(nodes, map(ops.__contains__, map(_OP, nodes))))


def _foldable(nodes: list[Node], ops: set, sums: list[Node]) -> set[Node]:
    """Scan.foldable of scalar code: a node whose op fold may rewrite by name, a sum of a
    value with itself, or one that reads a constant, the seed, a negation or a broadcast and
    passes ``may_fold_scalar`` (only -(-x) when what it reads is the seed or a negation)."""
    foldable = set(_of(nodes, {op for op in ops if op.name in BY_NAME}))
    foldable.update(node for node in sums if len(node.inputs) == 2
                    and node.inputs[0] == node.inputs[1])
    special: set[tuple] = set()  # the Refs of the special nodes, and of the weighty ones
    weighty: set[tuple] = set()
    units: set[Node] = set()  # the constants of x * 1, x + 0
    for node in _of(nodes, {op for op in ops if op.name in SPECIAL_INPUTS}):
        outs = [(node, i) for i in range(len(node.avals))]
        special.update(outs)
        if node.op.name in WEIGHTY:
            weighty.update(outs)
            if node.op.name == "const" and (is_number(node.out, 0) or is_number(node.out, 1)):
                units.add(node)
    readers = itertools.compress(nodes, map(operator.not_, map(special.isdisjoint,
                                                                map(_INPUTS, nodes))))
    for node in readers:
        if node in foldable:
            continue
        ins = node.inputs
        if weighty.isdisjoint(ins):  # only the seed or a negation: -(-x) (may_fold_scalar)
            if node.op.name == "neg" and ins[0][0].op.name == "neg":
                foldable.add(node)
        elif may_fold_scalar(node, units):
            foldable.add(node)
    return foldable


def _has_duplicates(nodes: list[Node]) -> bool:
    """Do two nodes of ``nodes`` (UNIQUE ones aside) have one cse key?"""
    plain: list[tuple] = []  # cse keys of the nodes without attributes (most of them)
    keyed: list[tuple] = []
    for node in nodes:
        name = node.op.name
        if name not in UNIQUE:
            if node.attrs:
                keyed.append(node_key(name, node.inputs, node.attrs))
            else:
                plain.append((name, node.inputs))
    return len(set(plain)) != len(plain) or len(set(keyed)) != len(keyed)


def forget_scan(graph: Graph) -> Graph:
    """``graph`` without its Scan and reverse's mark, once the passes are done with them
    (what they say is of no use later, and each holds a list of every node)."""
    graph.meta.pop(_SCAN, None)
    graph.meta.pop(NO_DUPLICATES, None)
    return graph


def is_seed_product(node: Node) -> bool:
    """Is ``node`` ``seed * k`` (what fold's seed_outward takes apart)?"""
    a, b = node.inputs
    return a.node.op.name == "seed" or b.node.op.name == "seed"


def may_fold_scalar(node: Node, units: set[Node]) -> bool:
    """May a fold rewrite apply to ``node``, a scalar op that reads a constant, the seed, a
    negation or a broadcast? Each rewrite's precondition on scalars: a broadcast, constants
    only (folded), an identity (``-(-x)``, or ``x * 1`` and ``x + 0`` with a constant of
    ``units``), or ``seed * c`` times a constant."""
    name = node.op.name
    if name in KEEP or node.op.n_out != 1:
        return False
    kinds = [ref.node.op.name for ref in node.inputs]
    if "broadcast_to" in kinds:
        return True
    if "const" not in kinds:
        return name == "neg" and kinds[0] == "neg"
    if kinds.count("const") == len(kinds):
        return True
    for ref in node.inputs:
        if ref[0] in units:
            return True
    if name in PRODUCTS:
        for kind, ref in zip(kinds, node.inputs, strict=True):
            if kind == "mul" and is_seed_product(ref.node):
                return True
    return False
