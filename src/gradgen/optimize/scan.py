"""One look at a graph for what the passes may find: most graphs reach the optimizer with
nothing for cse or fold (reverse records the backward without duplicates or identities),
and one walk over the nodes and their inputs says so for every pass."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import compress, repeat
from operator import attrgetter, is_not, not_

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
# (read in C: a Node's fields, and its op compared by identity)
_OP = attrgetter("op")
_INPUTS = attrgetter("inputs")
_AVALS = attrgetter("avals")


@dataclass(frozen=True, eq=False)
class Scan:
    """What one walk found. ``foldable`` is, for scalar code, every node a fold rewrite may
    apply to (a superset: fold decides), and None for code with arrays (fold looks at every
    node). Valid while the graph's nodes are ``nodes``."""

    nodes: list[Node]
    ops: set[str]  # the names of the ops in the graph
    duplicates: bool  # do two nodes have one cse key?
    foldable: set[Node] | None
    nested_sums: bool  # is the first term of some sum a sum (flatten_sums)?


def scan(graph: Graph) -> Scan:
    """The graph's Scan, from graph.meta when its nodes are the ones scanned (a pass that
    changes nothing hands the same nodes on; comparing them is one list comparison in C)."""
    nodes = graph.nodes
    found = graph.meta.get(_SCAN)
    if found is not None and found.nodes == nodes:
        return found
    # It runs on every node of the joint graph, and on most of them finds nothing: the
    # walks over all nodes are C iterators (map, compress) that pick out the few a pass may
    # rewrite, and only those are looked at one by one in Python.
    ops = list(map(_OP, nodes))
    kinds = set(ops)  # (a few: the walks below compare ops, a name is one lookup more)
    special_ops = {op for op in kinds if op.name in SPECIAL_INPUTS}
    sum_ops = {op for op in kinds if op.name == "add_n"}
    # no cse keys where reverse proved there is no duplicate among these very nodes
    proven = graph.meta.get(NO_DUPLICATES)
    duplicates = (proven is None or proven != nodes) and _has_duplicates(nodes)
    special: set[tuple] = set()  # the Refs of the special nodes, which their readers read
    weighty: set[tuple] = set()  # those of the constants and broadcasts among them
    units: set[Node] = set()  # the constants of x * 1, x + 0
    for node in compress(nodes, map(special_ops.__contains__, ops)):
        outs = [(node, i) for i in range(len(node.avals))]
        special.update(outs)
        if node.op.name in WEIGHTY:
            weighty.update(outs)
            if node.op.name == "const" and (is_number(node.out, 0) or is_number(node.out, 1)):
                units.add(node)
    sums = list(compress(nodes, map(sum_ops.__contains__, ops))) if sum_ops else []
    nested_sums = False
    for node in sums:
        ins = node.inputs
        if ins and ins[0][0].op.name == "add_n":
            nested_sums = True
            break
    foldable = _scalar_foldable(nodes, ops, kinds, sums, special, weighty, units)
    found = Scan(list(nodes), {op.name for op in kinds}, duplicates, foldable, nested_sums)
    graph.meta[_SCAN] = found
    return found


def _scalar_foldable(nodes, ops, kinds, sums, special, weighty, units) -> set[Node] | None:
    """Scan.foldable: None when some value is an array."""
    # most nodes of scalar code hold the one shared avals tuple of a float: the others are
    # looked at
    for node in compress(nodes, map(is_not, map(_AVALS, nodes), repeat(_FLOAT_AVALS))):
        for aval in node.avals:
            if aval.shape:
                return None
    by_name = {op for op in kinds if op.name in BY_NAME}
    foldable = set(compress(nodes, map(by_name.__contains__, ops))) if by_name else set()
    # the readers of a special node: a rewrite may apply when what they read allows it
    readers = compress(nodes, map(not_, map(special.isdisjoint, map(_INPUTS, nodes))))
    for node in readers:
        if node in foldable:
            continue
        ins = node.inputs
        if weighty.isdisjoint(ins):  # only the seed or a negation: -(-x) (may_fold_scalar)
            if node.op.name == "neg" and ins[0][0].op.name == "neg":
                foldable.add(node)
        elif may_fold_scalar(node, units):
            foldable.add(node)
    for node in sums:  # x + x (a sum that reads a special node was decided above)
        ins = node.inputs
        if len(ins) == 2 and ins[0] == ins[1] and special.isdisjoint(ins):
            foldable.add(node)
    return foldable


def _has_duplicates(nodes) -> bool:
    """Do two nodes have one cse key?"""
    plain: list[tuple] = []  # the keys of the nodes without attributes (most of them)
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
