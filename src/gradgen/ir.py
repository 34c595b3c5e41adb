"""The graph IR: abstract values, SSA nodes, references to their outputs, and graphs."""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from .source import SourceLoc

_DTYPE_SHORT = {"float64": "f64", "float32": "f32", "float16": "f16", "int64": "i64",
                "int32": "i32", "bool": "bool", "complex128": "c128", "int8": "i8",
                "int16": "i16", "uint8": "u8", "complex64": "c64"}


@dataclass(frozen=True, slots=True)
class Aval:
    """What is known about a value at trace time: shape, dtype, and whether it is a Python
    scalar (``py`` is float/int/bool) rather than a NumPy array or scalar."""

    shape: tuple[int, ...]
    dtype: np.dtype
    py: type | None = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def is_float(self) -> bool:
        return self.dtype.kind == "f"

    def __str__(self) -> str:
        if self.py is not None:
            return self.py.__name__
        short = _DTYPE_SHORT.get(self.dtype.name, self.dtype.name)
        return f"{short}[{','.join(map(str, self.shape))}]"


_PY_AVALS = {float: Aval((), np.dtype(np.float64), float), int: Aval((), np.dtype(np.int64), int),
             bool: Aval((), np.dtype(bool), bool)}
# The avals of a node with one Python number as its value: one tuple shared by all of them
# (most nodes of scalar code), not one per node for the cyclic GC to walk once a build ends.
PY_NUMBER_AVALS = {aval.py: (aval,) for aval in _PY_AVALS.values()}


def aval_of(value: Any) -> Aval:
    """The Aval of a concrete value; raises TypeError for values that are not numeric."""
    exact = _PY_AVALS.get(type(value))
    if exact is not None:  # the common case of scalar code: no isinstance chain
        return exact
    if isinstance(value, np.ndarray | np.generic):
        if value.dtype.kind not in "biuf":
            raise TypeError(f"unsupported dtype {value.dtype}")
        return Aval(tuple(value.shape), value.dtype)
    if isinstance(value, bool):
        return Aval((), np.dtype(bool), bool)
    if isinstance(value, int):
        return Aval((), np.dtype(np.int64), int)
    if isinstance(value, float):
        return Aval((), np.dtype(np.float64), float)
    raise TypeError(f"unsupported type {type(value).__name__}")


class Ref(NamedTuple):
    """One output of a node: the edge of the graph (the index travels with the edge)."""

    node: Node
    index: int = 0

    @property
    def aval(self) -> Aval:
        return self.node.avals[self.index]

    def __repr__(self) -> str:
        return f"Ref(%{self.node.serial}, {self.index})"


_new_ref = tuple.__new__  # Ref(node, 0) without NamedTuple's Python __new__ (hot paths)


class _SerialCounter:
    """Node serials: creation order, used for deterministic ordering (never id())."""

    def __init__(self):
        self._next = itertools.count()
        self.peek = 0

    def take(self) -> int:
        self.peek += 1
        return next(self._next)


SERIALS = _SerialCounter()
_NEXT_SERIAL = SERIALS._next


class Node:
    """One SSA operation. Created once; only the name may be filled in later, when the
    tracer sees which assignment bound the value (and ``hint``/``grad_of``, below).

    ``role`` is 'input', 'const', 'fwd' or 'bwd'; ``name`` is the user's name for the value
    (an assignment target, a parameter, ``grad_<name>`` for an adjoint) when there is one.

    For a value the user did not name, whoever makes it may say what it holds, for the
    emitter's names (naming.py): ``hint`` is a name a pass chose (``h_stack``), and
    ``grad_of`` the forward value this one is the adjoint of (named ``grad_<its name>``).
    Neither makes the value a statement of its own; a single-use one is still inlined.
    """

    __slots__ = ("attrs", "avals", "grad_of", "hint", "inputs", "loc", "name", "op", "origin",
                 "role", "serial")

    def __init__(self, op, inputs, attrs, avals, loc=None, name=None, role="fwd", serial=None,
                 origin=None, hint=None):
        if serial is None:  # SERIALS.take(), written out: this runs per node
            SERIALS.peek += 1
            serial = next(_NEXT_SERIAL)
        self.serial = serial
        self.op = op
        self.inputs: tuple[Ref, ...] = tuple(inputs)
        self.attrs: dict[str, Any] = attrs
        shared = PY_NUMBER_AVALS.get(avals[0].py) if len(avals) == 1 else None
        self.avals: tuple[Aval, ...] = (
            shared if shared is not None and shared[0] is avals[0] else tuple(avals))
        self.loc: SourceLoc | None = loc
        self.name: str | None = name
        self.role: str = role
        # For a backward node: (forward op, input index) whose VJP rule created it.
        self.origin = origin
        self.hint: str | None = hint
        self.grad_of: Node | None = None

    @property
    def next_functions(self) -> tuple[tuple[Node, int], ...]:
        """What this node reads: (producing node, output index) per input, like PyTorch's
        ``grad_fn.next_functions`` (the output index is how a gradient finds its output)."""
        return tuple((ref.node, ref.index) for ref in self.inputs)

    @property
    def is_leaf(self) -> bool:
        """An argument of the traced function: where gradients end (PyTorch's AccumulateGrad)."""
        return self.op.name == "input"

    def with_inputs(self, inputs) -> Node:
        """This node reading other inputs (same serial: it takes this node's place)."""
        node = Node(self.op, inputs, self.attrs, self.avals, self.loc, self.name, self.role,
                    self.serial, self.origin, self.hint)
        node.grad_of = self.grad_of
        return node

    def takes_hints_of(self, other: Node) -> None:
        """``other`` is replaced by this node (the same value): what ``other`` was said to hold
        names this node too, unless the node already has a name, a hint or an adjoint's."""
        if (self.name is None and self.hint is None and self.grad_of is None
                and self.role == other.role and len(self.avals) == 1):
            self.hint = other.hint
            self.grad_of = other.grad_of

    @property
    def is_view(self) -> bool:
        """Does NumPy hand back a view of the first input (x[1:], x.T, x.reshape)? Reads with
        index arrays (x[[0, 2]]) copy."""
        return bool(self.op.extra.get("view")) and len(self.inputs) == 1

    @property
    def out(self) -> Ref:
        return _new_ref(Ref, (self, 0))  # Ref(self, 0) without NamedTuple's Python __new__

    @property
    def aval(self) -> Aval:
        return self.avals[0]

    def __repr__(self) -> str:
        return f"<Node %{self.serial} {self.op.name}>"


_new_node = object.__new__


def new_node(op, inputs: tuple, attrs: dict, avals: tuple, loc, name, role: str,
             origin) -> Node:
    """``Node(op, inputs, attrs, avals, loc, name, role, origin=origin)`` for the recorders
    (bind, reverse mode), which hold tuples already: the fields set by a plain function, as
    ``Node.__init__`` sets them. Calling a class with a Python ``__init__`` costs CPython
    several times what the stores do, and this runs per recorded op."""
    SERIALS.peek += 1
    node = _new_node(Node)
    node.serial = next(_NEXT_SERIAL)
    node.op = op
    node.inputs = inputs
    node.attrs = attrs
    node.avals = avals
    node.loc = loc
    node.name = name
    node.role = role
    node.origin = origin
    node.hint = node.grad_of = None
    return node


_REF_NODE = operator.attrgetter("node")
_NODE_INPUTS = operator.attrgetter("inputs")


@dataclass
class Graph:
    """Topologically ordered nodes, the input nodes in argument order, and the outputs."""

    nodes: list[Node] = field(default_factory=list)
    inputs: list[Node] = field(default_factory=list)
    outputs: list[Ref] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def with_nodes(self, nodes, outputs, inputs=None) -> Graph:
        return Graph(list(nodes), list(self.inputs if inputs is None else inputs),
                     list(outputs), dict(self.meta))

    @property
    def leaves(self) -> list[Node]:
        """The inputs: the nodes whose gradients a backward pass computes."""
        return list(self.inputs)

    def find(self, name: str) -> Node:
        """The last node the user's code bound to ``name`` (a loop's ``y`` is its last version,
        listed as ``y_2``), its adjoint for ``grad_<name>``, or else the node listed as
        ``name`` (``y_1``, ``grad_y_1``)."""
        last_bound = self.meta.get("last_bound", {})
        base = name.removeprefix("grad_")
        wanted = name
        if name in last_bound:
            wanted = last_bound[name].name or name
        elif base in last_bound and last_bound[base].name:
            wanted = f"grad_{last_bound[base].name}"
        for node in reversed(self.nodes):
            if node.name == wanted:
                return node
        raise KeyError(f"no node named {name!r} in this graph")

    @property
    def forward_nodes(self) -> list[Node]:
        return [n for n in self.nodes if n.role in ("fwd", "input")]

    @property
    def backward_nodes(self) -> list[Node]:
        return [n for n in self.nodes if n.role == "bwd"]

    def uses(self) -> dict[Node, int]:
        """How many times each node's outputs are read (outputs of the graph count)."""
        counts: dict[Node, int] = dict.fromkeys(self.nodes, 0)
        # A plain loop: on 3.11 it costs ~0.3 µs per node where a Counter over chained
        # attrgetter maps cost ~0.5 (a 3,000-op scalar build's joint graph). A value from
        # outside the graph, as a loop body reads, is counted too.
        get = counts.get
        for node in self.nodes:
            for ref in node.inputs:
                read = ref.node
                counts[read] = get(read, 0) + 1
        for ref in self.outputs:
            counts[ref.node] = get(ref.node, 0) + 1
        return counts

    def readers(self) -> dict[Node, list[Node | None]]:
        """readers_of(self.nodes, self.outputs)."""
        return readers_of(self.nodes, self.outputs)

    def verify(self) -> None:
        """Check the invariants (like torch.fx's lint); raises AssertionError on a broken graph."""
        seen: set[Node] = set()
        for node in self.nodes:
            assert node not in seen, f"{node} appears twice"
            for ref in node.inputs:
                assert ref.node in seen, f"{node} reads {ref} before it is defined"
                assert 0 <= ref.index < len(ref.node.avals), f"{node} reads a missing output"
            seen.add(node)
        for inp in self.inputs:
            assert inp in seen and inp.op.name == "input", f"bad input {inp}"
        for ref in self.outputs:
            assert ref.node in seen, f"output {ref} is not in the graph"

    def __str__(self) -> str:
        from .printing import graph_listing

        return graph_listing(self)

    def to_dot(self) -> str:
        from .dot import graph_to_dot

        return graph_to_dot(self)

    def _repr_html_(self) -> str:
        """Notebooks: the graph drawn as inline SVG (no Graphviz needed), with its listing."""
        from .explainer.graphview import graph_html

        return graph_html(self)

    def render(self, path: str) -> str:
        """Write the graph drawing to ``path`` (.svg, .png, .pdf or .dot); needs Graphviz's
        ``dot`` for the images. Returns the path."""
        from .dot import render

        return render(self, path)


def readers_of(nodes, outputs) -> dict[Node, list[Node | None]]:
    """The nodes that read each value, in order, once per input that reads it; None once per
    output it is (the caller reads it). A value nobody reads has no entry."""
    readers: dict[Node, list[Node | None]] = {}
    for node in nodes:
        for ref in node.inputs:
            readers.setdefault(ref.node, []).append(node)
    for ref in outputs:
        readers.setdefault(ref.node, []).append(None)
    return readers
