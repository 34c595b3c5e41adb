"""Exact one-node rewrites, shared by the optimizer and the backward as it is built: a node
equal to one already in the graph (CSE), or to one of its own inputs (``x ** 1``)."""

from __future__ import annotations

import numpy as np

from .ir import Node, Ref, _new_ref

# Never merged: inputs, the seed, guards (side effects) and adjoints (each carries a name).
UNIQUE = {"input", "seed", "guard", "adjoint"}
# graph.meta key: the nodes of a graph in which no two nodes have one cse key, as reverse
# proved it (Shared.no_duplicates). Valid only while the graph's nodes are exactly these: a
# pass that rewrites nodes makes a new list, and the mark no longer applies to it.
NO_DUPLICATES = "peephole.no_duplicates"


def hashable(value):
    """An attribute value as a key: arrays by their bytes, floats by their repr."""
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, dict):
        return tuple(sorted((k, hashable(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(hashable(v) for v in value)
    if isinstance(value, float | np.floating):
        return (type(value), repr(value))  # keeps 0.0 and -0.0 apart, and nan equal to itself
    return (type(value), value)


def node_key(name: str, inputs: tuple[Ref, ...], attrs: dict):
    """What makes two nodes the same value: op, inputs and attributes. The Refs themselves
    (hashed in C): with every input resolved to the one node object that holds its serial,
    equal Refs are equal (serial, index) pairs."""
    if not attrs:  # most nodes: skip the generic (slow) attribute hashing
        return (name, inputs)
    if name == "add_n" and len(attrs) == 1:  # a fused sum: the lines it adds up (strings)
        return (name, inputs, "uses", attrs["uses"])
    if name == "const" and len(attrs) == 1 and type(attrs["value"]) in (int, bool):
        return ("const", type(attrs["value"]), attrs["value"])
    return (name, inputs, hashable(attrs))


def names_adjoint(node: Node) -> bool:
    """Does ``node`` carry a value's adjoint under its name (``grad_y``)? Reverse mode names
    the node a rule made for a value's whole adjoint (and says whose: ``grad_of``), instead
    of renaming it in an ``adjoint`` node (reverse._own_statement). Such a node is a
    statement of its own, as the rename was: a rewrite never looks through it into a reader
    (``-(-g)``, ``x.T.T``, a sum's first term), or the name, and the line, would be gone.
    (A partial sum, ``grad_x_partial``, is only a step of one: passes may merge it.)"""
    return node.grad_of is not None and node.name is not None


# --- identities -----------------------------------------------------------------------------


def is_number(ref: Ref, number) -> bool:
    """Is ``ref`` a constant that equals ``number`` everywhere?"""
    node = ref.node
    if node.op.name != "const":
        return False
    value = node.attrs["value"]
    if type(value) is float or type(value) is int:  # the common case, without NumPy's cost
        return value == number
    if isinstance(value, bool | np.bool_):
        return False
    try:
        return bool(np.all(np.asarray(value) == number))
    except (TypeError, ValueError):
        return False


_SAME_VALUE = {"reshape", "broadcast_to", "cast"}  # identities when nothing changes


def identical_input(name: str, ins: tuple[Ref, ...], attrs: dict, aval) -> Ref | None:
    """The input that the node ``name(*ins, **attrs)`` of value ``aval`` equals exactly
    (same value, shape, dtype, kind), if any."""
    candidates: list[Ref] = []
    if name == "mul":
        candidates = ([ins[0]] if is_number(ins[1], 1) else [ins[1]] if is_number(ins[0], 1)
                      else [])
        if aval.shape and not candidates:  # an array times the seed (1): scalar code
            seeds = [i for i, r in enumerate(ins) if r.node.op.name == "seed"]  # keeps it
            candidates = [ins[1 - seeds[0]]] if seeds else []
    elif name == "add":
        candidates = ([ins[0]] if is_number(ins[1], 0) else [ins[1]] if is_number(ins[0], 0)
                      else [])
    elif (name == "sub" and is_number(ins[1], 0) or name == "div" and is_number(ins[1], 1)
          or name == "pow" and is_number(ins[1], 1)):
        candidates = [ins[0]]
    elif name == "neg" and ins[0].node.op.name == "neg" and not names_adjoint(ins[0].node):
        candidates = [ins[0].node.inputs[0]]
    elif name == "transpose":
        axes, ndim = attrs.get("axes"), ins[0].aval.ndim
        if (axes is None and ndim <= 1) or axes == tuple(range(ndim)):
            candidates = [ins[0]]
    elif name == "stack" and attrs.get("axis") == 0:
        whole = _rows_in_order(ins)
        candidates = [whole] if whole is not None else []
    elif name in _SAME_VALUE:
        candidates = [ins[0]]  # only when nothing changes: the aval check below
    for ref in candidates:
        if ref.aval == aval:
            return ref
    return None


def _rows_in_order(ins) -> Ref | None:
    """``np.stack([x[0], x[1], ..., x[n - 1]])`` is ``x``: the array whose rows these are."""
    whole = ins[0].node.inputs[0] if ins[0].node.op.name == "getitem" else None
    if whole is None or whole.aval.shape[:1] != (len(ins),):
        return None
    for i, ref in enumerate(ins):
        node = ref.node
        if (node.op.name != "getitem" or len(node.inputs) != 1 or node.inputs[0] != whole
                or node.attrs["index"] not in ((i,), (i - len(ins),)) or names_adjoint(node)):
            return None
    return whole


# --- signs ----------------------------------------------------------------------------------

# A negation moves through * and / without changing a bit: IEEE rounding is symmetric in sign,
# so -(a * b) == (-a) * b and -(a / b) == (-a) / b exactly (zeros and infinities included;
# only a NaN's sign bit may differ, which no comparison sees). Likewise u - (-v) == u + v.
SIGN_CARRIERS = {"mul", "div"}
MAX_SIGN_DEPTH = 8  # how far down the left operands a sign is looked for


def negated_path(ref: Ref, sole: Node | None = None) -> list[Node] | None:
    """The backward products and quotients down the left operands of ``ref`` to a negation
    of a float (``-g * s / c`` is [div, mul, neg]), or None: ``ref`` is exactly minus what
    the path, rebuilt without that negation, computes. Only nodes reverse mode made (role
    "bwd"), so a forward value is never computed twice, and only a rule's own intermediates:
    an adjoint (a node with grad_of) is read by each of its node's rules, and rebuilt for one
    of them it would be computed twice; but ``sole``, the adjoint only one rule reads, may
    head the path (-(-g * s) * t for a cos of a cos)."""
    node = ref.node
    if node.role != "bwd" or node.avals[ref.index].dtype.kind != "f" or (
            node.grad_of is not None and node is not sole) or node.name is not None:
        return None
    path = []
    while len(path) < MAX_SIGN_DEPTH:
        path.append(node)
        name = node.op.name
        if name == "neg":  # of a float (-x of the most negative int is that int again)
            return path if node.avals[0].dtype.kind == "f" else None
        if name not in SIGN_CARRIERS or node.attrs:
            return None
        node = node.inputs[0].node
        if node.role != "bwd" or node.grad_of is not None or node.name is not None:
            return None
    return None


# --- the backward as it is built --------------------------------------------------------------


# Never looked up: UNIQUE, and constants (the trace hands out one node per number itself,
# Trace.const; an array constant is left to cse)
_NOT_SHARED = UNIQUE | {"const"}
# The ops identical_input may find an identity of (for a Python number)
_IDENTITIES = {"mul", "add", "sub", "div", "pow", "neg", *_SAME_VALUE}
_CONST_OR_NEG = {"const", "neg"}


class Shared:
    """The nodes of a graph being extended (reverse mode), by what they compute: an op about
    to be recorded that some node already computes is that node, and a Python number that is
    one of its inputs (``x ** 1``, ``-(-x)``) is that input. What the optimizer's cse and fold
    would do to the backward afterwards, done before the node exists: the passes then find
    nothing to change, and nothing downstream is rebuilt. Identities only for Python numbers
    (for an array one may hand the caller an alias of an argument, which only fold can tell
    once the outputs are known); views, and arrays built on shapes, are left to cse."""

    __slots__ = ("constants", "known", "n_forward")

    def __init__(self, nodes):
        self.known: dict[tuple, Node] = {}
        # the graph's constants, seen on the way (the trace shares its scalar ones)
        self.constants: list[Node] = []
        # how many entries of ``known`` are the graph's; None when some node of the graph is
        # not one of them (a duplicate, an op of several outputs): no_duplicates
        self.n_forward: int | None = 0
        setdefault = self.known.setdefault
        clean = True
        for node in nodes:  # (node_key, written out for the common case: this runs per node)
            name = node.op.name
            if name not in _NOT_SHARED:
                if node.op.n_out != 1:
                    clean = False
                    continue
                attrs = node.attrs
                if setdefault((name, node.inputs) if not attrs else node_key(
                        name, node.inputs, attrs), node) is not node:
                    clean = False
            elif name == "const":
                self.constants.append(node)
        self.n_forward = len(self.known) if clean else None

    def no_duplicates(self, backward_ops: list, unkeyed: tuple, const, constants) -> bool:
        """Has no node of the graph extended (the joint graph) the cse key of another?
        Every node of the graph but the ``unkeyed`` ops (UNIQUE) and the constants is in
        ``known``, one per key, when ``n_forward`` is set; reverse mode records each node it
        makes there too, after looking it up: so when the ops of the nodes it made,
        ``backward_ops``, other than those, are as many as the entries it added, none was
        made beside the table (a view, an op of several outputs). ``constants`` are the
        constant nodes the trace hands out, one per number (Trace.const): when the graph has
        no other constant, their keys are compared (a few: the numbers of the rules)."""
        if self.n_forward is None:
            return False
        n_const = backward_ops.count(const)
        made = len(backward_ops) - n_const - sum(map(backward_ops.count, unkeyed))
        return (made == len(self.known) - self.n_forward
                and len(self.constants) + n_const == len(constants)
                and len({node_key("const", (), node.attrs) for node in constants})
                == len(constants))



    def find(self, op, inputs: tuple[Ref, ...], attrs: dict, aval):
        """(the Ref equal to ``op(*inputs, **attrs)``, or None; the key under which to
        record the node made instead, in ``known``)."""
        kind = _KINDS.get(op)
        if kind is None:
            kind = _KINDS[op] = _kind(op)
        if kind is _NEVER:
            return None, None
        if kind is _IDENTITY and aval.py is not None:
            for ref in inputs:  # an arithmetic identity reads a constant or a negation
                if ref.node.op.name in _CONST_OR_NEG or op.name in _SAME_VALUE:
                    same = identical_input(op.name, inputs, attrs, aval)
                    if same is not None:
                        return same, None
                    break
        key = (op.name, inputs) if not attrs else node_key(op.name, inputs, attrs)
        node = self.known.get(key)
        return (_new_ref(Ref, (node, 0)) if node is not None else None), key


# What find may do for an op, read once per op: nothing (never merged), merge equal nodes,
# or also look for an identity first
_NEVER, _EQUAL, _IDENTITY = "never", "equal", "identity"
_KINDS: dict = {}


def _kind(op) -> str:
    if op.name in _NOT_SHARED or op.n_out != 1 or op.extra.get("view"):
        return _NEVER
    return _IDENTITY if op.name in _IDENTITIES else _EQUAL


# --- the backward's int literals in float arithmetic -------------------------------------------

_FLOAT_ARITHMETIC = frozenset({"add", "sub", "mul", "div"})
_EXACT = 2**53  # every int up to this is a double exactly


def float_literal(op_name: str, value: int, other) -> int | float:
    """The int operand ``value`` of a backward ``op_name`` beside ``other`` (a traced value)
    as the float it becomes, where that is exact: the rules' ``1 - t * t`` (tanh) and
    ``g * 2 * x`` (``x ** 2``) are written ``1.0 - t * t`` and ``g * 2.0 * x``.

    An int costs on every call: CPython specializes float arithmetic for two floats only
    (``t * 2`` takes about twice the time of ``t * 2.0``), and NumPy 2 resolves a Python int
    against a float array's dtype per call (about 0.2 µs more than a float, a fifth of an
    operation on a thousand floats). The float is the value the operation converts the int to
    anyway, so no result changes by a bit: Python converts the int to a double, NumPy casts
    it to the other operand's dtype, exactly, for ints up to 2**53. Only where that holds in
    every NumPy: beside a float64 value or a Python float, or a float array of another dtype
    (``np.float32(3) * 2.0`` was float64 before NEP 50; a float32 array stays float32)."""
    aval = getattr(other, "aval", None)
    if (op_name in _FLOAT_ARITHMETIC and aval is not None and aval.dtype.kind == "f"
            and (aval.dtype.itemsize == 8 or aval.shape) and -_EXACT <= value <= _EXACT):
        return float(value)
    return value
