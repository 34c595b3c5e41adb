"""A backward loop's per-trip gradient terms gathered into one product after the loop.

A weight ``W`` read by every trip of ``h = np.tanh(W @ h + U @ xs[t])`` gets one outer product
per trip, ``grad_W += np.outer(grad_h_part, h_saved[t])``: an allocation, a product and an
addition of a whole matrix, every trip. Summed over the trips that is one matrix product of
the stacked vectors, what a person writes::

    grad_h_parts = np.empty((300, 16))
    for t in reversed(range(300)):
        ...
        grad_h_parts[t] = grad_h_part
    grad_W = grad_h_parts.T @ np.array(h_saved[:-1])
    grad_U = grad_h_parts.T @ xs

A vector the sums stack that is itself a weight's per-trip gradient (the bias of
``W @ h + b``) becomes a sum over those rows, ``grad_b = grad_h_parts.sum(axis=0)``; a
vector times a number per trip (``grad_w += grad_err * X[i]``) becomes ``grad_errs @ X``;
and the gradient of the rows the loop reads, one trip's row each (``grad_xs[t] +=
grad_h_part @ U``), is the stacked vectors times the weight, ``grad_xs = grad_h_parts @ U``.

Each stacked operand comes from where it already is when it can (a forward value the forward
loop keeps per trip, the rows of an input the loop slices); anything else is written into a
row of an array the backward loop fills. BLAS and ``sum`` add the trips in their own order, so
the last bits may differ from trip-by-trip addition (arrays only: a number's gradient is
still added trip by trip, a Python float costs less to add than to store).

The same holds for what a trip computes from forward values only: tanh's derivative ``1.0 -
h * h`` in every trip of the backward loop is one op over the stacked states before it
(``hoist_elementwise``), each trip reading its row, the same numbers (an elementwise op is the
same on a row as on the whole).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import Aval, Graph, Node, Ref
from ..ops import OPS
from ..optimize.dce import dce


@dataclass(frozen=True)
class Operand:
    """A per-trip vector stacked over the trips: ``("input", b)`` is body input ``b``, which
    the emitter reads whole from where the forward keeps it; ``("stored", s)`` is the
    backward loop's ``s``-th stored value (output ``len(outputs) + s`` of the body). Or
    ``("weight", b)``: body input ``b``, the same every trip (a matrix the rows multiply)."""

    kind: str
    index: int


@dataclass(frozen=True)
class Product:
    """One product of stacks: ``left.T @ right`` (the sum of the trips' outer products), or
    ``left @ right`` when ``scaled`` (the sum of vectors ``right[t]`` times numbers
    ``left[t]``, or each trip's row ``left[t] @ W`` when ``right`` is a weight)."""

    left: Operand
    right: Operand
    scaled: bool = False


@dataclass(frozen=True)
class Sum:
    """A weight's total gradient: the sum of ``products``, or of the rows of ``rows``."""

    products: tuple[Product, ...] = ()
    rows: Operand | None = None

    @property
    def operands(self) -> list[Operand]:
        if self.rows is not None:
            return [self.rows]
        return [o for p in self.products for o in (p.left, p.right)]


@dataclass
class Batched:
    """The backward body with its batched outputs taken out of the trip: ``body`` outputs
    the original outputs (a batched one now reads a vector of its sum: nothing to add per
    trip) then the ``stored`` values, one row each per trip; ``sums`` maps an output
    position to how its total is computed after the loop."""

    body: Graph
    stored: list[Ref]
    sums: dict[int, Sum]


def _term(ref: Ref) -> Node:
    node = ref.node
    while node.op.name == "adjoint":  # a rename: the term is what it names
        node = node.inputs[0].node
    return node


def _vector(ref: Ref, like) -> bool:
    return ref.aval.ndim == 1 and ref.aval.dtype == like.dtype and ref.aval.py is None


def _number(ref: Ref, like) -> bool:
    return ref.aval.ndim == 0 and ref.aval.dtype == like.dtype


def _product(node: Node, like) -> tuple[Ref, Ref, bool] | None:
    """(left, right, scaled) when ``node`` is ``np.outer(a, b)`` of vectors or a vector
    times a number, of aval ``like``."""
    if node.aval != like:
        return None
    if node.op.name == "outer":
        a, b = node.inputs
        return (a, b, False) if _vector(a, like) and _vector(b, like) else None
    if node.op.name == "mul" and like.ndim == 1:
        a, b = node.inputs
        if _number(b, like):
            a, b = b, a
        return (a, b, True) if _number(a, like) and _vector(b, like) else None
    return None


def _products(term: Node, like) -> list[tuple[Ref, Ref, bool]] | None:
    """The products a trip's term adds up (``np.outer(a1, x) + np.outer(a2, x)``: two)."""
    if term.op.name in ("add", "add_n") and term.aval == like:
        found = [_product(r.node, like) for r in term.inputs]
        return None if None in found else found
    one = _product(term, like)
    return None if one is None else [one]


def _row_times_weight(node: Node, like, weights: dict[Node, int]) -> tuple[Ref, int] | None:
    """(a, weight input) when ``node`` is ``a @ W`` for a vector a and a loop-invariant W."""
    if node.op.name != "matmul" or node.aval != like or like.ndim != 1:
        return None
    a, w = node.inputs
    if not _vector(a, like) or w.node not in weights or w.aval.ndim != 2:
        return None
    return a, weights[w.node]


def batch_sums(body: Graph, accumulated: list[int], stackable: set[int],
               rows: list[int] = (), weights: set[int] = frozenset()) -> Batched | None:
    """Batch the outputs at positions ``accumulated`` (weights' per-trip gradients the loop
    adds up) that are sums of outer products of vectors or of vectors times numbers
    (``grad_w += grad_err * X[i]``), and the stacked vectors' own sums; ``stackable`` holds
    the positions of body inputs the emitter can read whole. The outputs at ``rows`` are
    each trip's row of a sliced input's gradient (``grad_xs[t] += grad_h_part @ U``): those
    that are vectors times ``weights`` (body inputs the loop only reads) become one product
    of the stacked vectors. None: nothing batches."""
    position = {node: i for i, node in enumerate(body.inputs)}
    stored: list[Ref] = []
    operands: dict[Ref, Operand] = {}

    def operand(ref: Ref) -> Operand:
        if ref not in operands:
            b = position.get(ref.node)
            if b is not None and b in stackable:
                operands[ref] = Operand("input", b)
            else:
                operands[ref] = Operand("stored", len(stored))
                stored.append(ref)
        return operands[ref]

    sums: dict[int, Sum] = {}
    read: dict[int, Ref] = {}  # a batched output -> a vector of its sum (read by the trip)
    for k in accumulated:
        out = body.outputs[k]
        found = _products(_term(out), out.aval)
        if found:
            sums[k] = Sum(tuple(Product(operand(a), operand(b), scaled)
                                for a, b, scaled in found))
            read[k] = found[0][0]
    for k in accumulated:  # a stacked vector's own sum (the bias next to the weight)
        term = _term(body.outputs[k])
        if (k not in sums and term.out in operands and term.aval == body.outputs[k].aval
                and term.aval.ndim == 1):
            sums[k] = Sum(rows=operands[term.out])
            read[k] = term.out
    weight_of = {body.inputs[b]: b for b in weights}
    for k in rows:
        out = body.outputs[k]
        term = _term(out)
        parts = term.inputs if term.op.name in ("add", "add_n") and term.aval == out.aval \
            else (term.out,)
        found = [_row_times_weight(r.node, out.aval, weight_of) for r in parts]
        if found and None not in found:
            sums[k] = Sum(tuple(Product(operand(a), Operand("weight", w), True)
                                for a, w in found))
            read[k] = found[0][0]
    if not sums:
        return None
    outputs = [read.get(k, r) for k, r in enumerate(body.outputs)]
    batched, _ = dce(body.with_nodes(body.nodes, [*outputs, *stored]))
    return Batched(batched, stored, sums)


# --- the forward: a weight times each trip's row, as one product before the loop ---------------


@dataclass(frozen=True)
class RowProduct:
    """Body input ``input`` stands for ``weight @ rows[t]`` (``rows[t] @ weight`` when
    ``row_first``): ``weight`` a body input the loop only reads, ``rows`` a body input that is
    one row of an array per trip. The emitter computes the product for every row at once."""

    input: int
    weight: int
    rows: int
    row_first: bool


def hoist_row_products(body: Graph, rows: set[int], weights: set[int]
                       ) -> tuple[Graph, list[RowProduct]]:
    """``U @ xs[t]`` (or ``xs[t] @ w``) in a loop body, for ``U`` among the body inputs
    ``weights`` and ``xs[t]`` among ``rows``, read from a new body input instead: one product
    ``U_xs = xs @ U.T`` before the loop, a row of it per trip, as batch_rows does for unrolled
    code (BLAS sums each row in its own order: the last bits may differ)."""
    position = {node: i for i, node in enumerate(body.inputs)}
    found: dict[tuple[int, int, bool], Node] = {}  # the product -> the input standing for it
    subst: dict[Ref, Ref] = {}
    inputs = list(body.inputs)
    values = dict(body.meta.get("values") or {})
    nodes: list[Node] = []
    for node in body.nodes:
        key = _row_product(node, position, rows, weights)
        if key is None:
            ins = tuple(subst.get(r, r) for r in node.inputs)
            new = node if ins == node.inputs else node.with_inputs(ins)
            if new is not node and node in values:
                values[new] = values[node]
            for i in range(len(node.avals)):
                subst[Ref(node, i)] = Ref(new, i)
            nodes.append(new)
            continue
        if key not in found:
            found[key] = Node(OPS["input"], (), {"index": len(inputs)}, node.avals, None,
                              node.name, "input")
            inputs.append(found[key])
            nodes.insert(len(body.inputs) + len(found) - 1, found[key])
            if node in values:
                values[found[key]] = values[node]
        subst[node.out] = found[key].out
    if not found:
        return body, []
    outputs = [subst.get(r, r) for r in body.outputs]
    graph = Graph(nodes, inputs, outputs, dict(body.meta, values=values))
    return graph, [RowProduct(n.attrs["index"], *key) for key, n in found.items()]


def _row_product(node: Node, position: dict, rows: set[int], weights: set[int]):
    """(weight, rows, row_first) when ``node`` is ``W @ xs[t]`` or ``xs[t] @ W``."""
    if node.op.name != "matmul":
        return None
    a, b = (position.get(r.node) for r in node.inputs)
    left, right = (r.aval.ndim for r in node.inputs)
    if a in weights and b in rows and left in (1, 2) and right == 1:
        return (a, b, False)
    if a in rows and b in weights and left == 1 and right in (1, 2):
        return (b, a, True)
    return None


# --- the backward: a per-trip function of forward values, as one op over all the trips ----------


@dataclass
class Hoisted:
    """A backward body with its elementwise functions of forward values taken out of the trip
    (``1.0 - h * h`` of ``tanh``'s derivative): ``before`` computes them for every trip at
    once, its inputs the stacked body inputs at positions ``stacked`` (one row per trip), its
    outputs the values the trip reads; ``body`` reads each of those from a new input, one row
    per trip, in ``before``'s output order."""

    body: Graph
    before: Graph
    stacked: list[int]


def _hoistable(node: Node) -> bool:
    aval = node.aval
    return (node.op.elementwise and len(node.avals) == 1 and aval.py is None and aval.ndim >= 1
            and not node.op.extra.get("statement"))


def hoist_elementwise(body: Graph, stackable: set[int], trips: int) -> Hoisted | None:
    """Take out of ``body`` every elementwise op whose operands are numbers, body inputs at
    ``stackable`` (values the emitter can read whole, one row per trip: what the forward loop
    saved) or ops taken out already, all of the op's own shape, so that the same op over the
    stacked rows is each trip's op at once. None when there is no such op (an array's op
    only: a number's op costs less than reading its row)."""
    position = {node: i for i, node in enumerate(body.inputs)}
    values = body.meta.get("values") or {}
    stacked: dict[Node, Node] = {}  # a body input -> the input of ``before`` stacking it
    copies: dict[Node, Node] = {}  # a hoisted body node -> its copy over all the trips
    before_nodes: list[Node] = []

    def fits(ref: Ref, shape: tuple) -> bool:  # an operand the op over all trips can read
        node = ref.node
        if node in copies:
            return ref.aval.shape == shape
        if node.op.name == "const":
            return ref.aval.ndim == 0
        return (position.get(node) in stackable and ref.aval.shape == shape
                and ref.aval.py is None)

    def operand(ref: Ref) -> Ref:
        node = ref.node
        if node in copies:
            return copies[node].out
        if node.op.name == "const":
            return ref
        if node not in stacked:
            aval = ref.aval
            stacked[node] = Node(OPS["input"], (), {"index": len(stacked)},
                                 (Aval((trips, *aval.shape), aval.dtype),), None, node.name,
                                 "input")
        return stacked[node].out

    for node in body.nodes:
        if (node.op.name == "input" or not _hoistable(node)
                or not all(fits(r, node.aval.shape) for r in node.inputs)):
            continue
        ins = [operand(r) for r in node.inputs]
        for r in node.inputs:
            if r.node.op.name == "const" and r.node not in before_nodes:
                before_nodes.append(r.node)
        aval = node.aval
        copies[node] = Node(node.op, tuple(ins), node.attrs, (Aval((trips, *aval.shape),
                            aval.dtype),), node.loc, node.name, node.role, hint=node.hint)
        before_nodes.append(copies[node])
    if not copies:
        return None
    # what the trip still reads of them: each becomes a new body input
    read = [r.node for n in body.nodes if n not in copies for r in n.inputs]
    read += [r.node for r in body.outputs]
    frontier = list(dict.fromkeys(n for n in read if n in copies))
    inputs = list(body.inputs)
    new_values = dict(values)
    subst: dict[Node, Node] = {}
    for node in frontier:
        subst[node] = Node(OPS["input"], (), {"index": len(inputs)}, node.avals, None,
                           node.name, "input", hint=node.hint)
        inputs.append(subst[node])
    nodes = [*inputs]
    for node in body.nodes:
        if node.op.name == "input" or node in copies:
            continue
        ins = tuple(Ref(subst.get(r.node, r.node), r.index) for r in node.inputs)
        new = node if ins == node.inputs else node.with_inputs(ins)
        if new is not node and node in values:
            new_values[new] = values[node]
        subst.setdefault(node, new)
        nodes.append(new)
    outputs = [Ref(subst.get(r.node, r.node), r.index) for r in body.outputs]
    graph, _ = dce(Graph(nodes, inputs, outputs, dict(body.meta, values=new_values)))
    before = Graph([*stacked.values(), *before_nodes], list(stacked.values()),
                   [copies[n].out for n in frontier],
                   {"values": {n: values[n] for n in before_nodes if n in values}})
    return Hoisted(graph, before, [position[n] for n in stacked])
