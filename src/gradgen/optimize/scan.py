"""One look at a graph for what the passes may find: most graphs reach the optimizer with
nothing for cse or fold (reverse records the backward without duplicates or identities),
and one walk over the nodes and their inputs says so for every pass."""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import PY_NUMBER_AVALS, Graph, Node
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
_FLOAT_AVALS = PY_NUMBER_AVALS[float]


@dataclass(frozen=True, eq=False)
class Scan:
    """What one walk found. ``foldable`` is, for scalar code, every node a fold rewrite may
    apply to (a superset: fold decides), and None for code with arrays (fold looks at every
    node). Valid while the graph's nodes are ``nodes``."""

    nodes: list[Node]
    ops: set[str]  # the names of the ops in the graph
    duplicates: bool  # do two nodes have one cse key?
    foldable: set[Node] | None
    # the sums whose first term is a sum (flatten_sums; None: look at every node)
    nested_sums: list[Node] | None


def scan(graph: Graph) -> Scan:
    """The graph's Scan, from graph.meta when its nodes are the ones scanned (a pass that
    changes nothing hands the same nodes on; comparing them is one list comparison in C)."""
    nodes = graph.nodes
    found = graph.meta.get(_SCAN)
    if found is not None and found.nodes == nodes:
        return found
    # One walk (it runs on every node of the joint graph): the special nodes and the unit
    # constants are collected on the way, before anything reads them (the order is
    # topological), and most nodes of scalar code hold the one shared avals tuple of a float.
    special: set[tuple] = set()  # what a node reads from the special nodes: their Refs
    weighty: set[tuple] = set()  # those of the constants and broadcasts among them
    units: set[Node] = set()  # the constants of x * 1, x + 0
    plain: list[tuple] = []  # cse keys of the nodes without attributes (most of them)
    keyed: list[tuple] = []
    foldable: set[Node] | None = set()
    names: list[str] = []
    nested_sums: list[Node] = []
    # no cse keys where reverse proved there is no duplicate among these very nodes
    proven = graph.meta.get(NO_DUPLICATES)
    keys_wanted = proven is None or proven != nodes
    for node in nodes:
        name = node.op.name
        names.append(name)
        ins = node.inputs
        if keys_wanted and name not in UNIQUE:
            if node.attrs:
                keyed.append(node_key(name, ins, node.attrs))
            else:
                plain.append((name, ins))
        if name in SPECIAL_INPUTS:
            outs = [(node, i) for i in range(len(node.avals))]
            special.update(outs)
            if name in WEIGHTY:
                weighty.update(outs)
            if name == "const" and (is_number(node.out, 0) or is_number(node.out, 1)):
                units.add(node)
        elif name == "add_n" and ins and ins[0][0].op.name == "add_n":
            nested_sums.append(node)
        if foldable is None:
            continue
        avals = node.avals
        if avals is not _FLOAT_AVALS:
            for aval in avals:
                if aval.shape:
                    foldable = None
                    break
            if foldable is None:
                continue
        if name in BY_NAME:
            foldable.add(node)
        elif not special.isdisjoint(ins):
            if weighty.isdisjoint(ins):  # only the seed or a negation: -(-x) (may_fold_scalar)
                if name == "neg" and ins[0][0].op.name == "neg":
                    foldable.add(node)
            elif may_fold_scalar(node, units):
                foldable.add(node)
        elif name == "add_n" and len(ins) == 2 and ins[0] == ins[1]:
            foldable.add(node)
    duplicates = keys_wanted and (len(set(plain)) != len(plain) or len(set(keyed)) != len(keyed))
    found = Scan(list(nodes), set(names), duplicates, foldable, nested_sums)
    graph.meta[_SCAN] = found
    return found


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
    op = node.op
    if op.name in KEEP or op.n_out != 1:
        return False
    constants = 0
    for ref in node.inputs:  # (one look at each input: this runs per reader of a constant)
        kind = ref[0].op.name
        if kind == "broadcast_to":
            return True
        if kind == "const":
            if ref[0] in units:
                return True
            constants += 1
    if not constants:
        return op.name == "neg" and node.inputs[0][0].op.name == "neg"
    if constants == len(node.inputs):
        return True
    if op.name in PRODUCTS:
        for ref in node.inputs:
            if ref[0].op.name == "mul" and is_seed_product(ref[0]):
                return True
    return False
