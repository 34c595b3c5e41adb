"""Reverse mode: append to a forward graph the backward ops of its VJP, as ordinary IR ops."""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Sequence
from itertools import chain

import numpy as np

from .abstract import not_finite
from .errors import GradgenError
from .function import function_groups, pull_back_function
from .ir import PY_NUMBER_AVALS, Graph, Node, Ref, _new_ref, new_node
from .loops.region import pull_back_loop
from .ops import OPS
from .ops.arrays import broadcast_to, sum_to
from .ops.core import MAX_FUSED_TERMS, _seed_value, add_n, adjoint, cast
from .peephole import NO_DUPLICATES, UNIQUE, Shared
from .tracer import _NO_ATTRS, Trace, Tracer, _new_tracer, at_loc, new_tracer, swap_loc


def active_nodes(graph: Graph, wrt: Sequence[Node]) -> set[Node]:
    """Nodes whose value depends differentiably on a ``wrt`` input."""
    active = {n for n in wrt if n.aval.is_float}
    for node in graph.nodes:  # plain loops: this runs per node of the forward
        op = node.op
        if op.nondiff or op.vjp is None:  # (an input has no rule: a wrt one stays active)
            continue
        for r in node.inputs:
            if r.node in active:
                avals = node.avals
                if avals is _FLOAT or any(aval.dtype.kind == "f" for aval in avals):
                    active.add(node)
                break
    return active


_FLOAT = PY_NUMBER_AVALS[float]  # the avals of most nodes of scalar code


def needed_nodes(graph: Graph, active: set[Node], outputs: Sequence[Ref]) -> set[Node]:
    """Active nodes on some path to an output: the only ones that get adjoints."""
    needed = {r.node for r in outputs if r.node in active}
    for node in reversed(graph.nodes):
        if node in needed:
            for r in node.inputs:
                if r.node in active:
                    needed.add(r.node)
    return needed


def reverse(graph: Graph, wrt: Sequence[int], outputs: Sequence[int] = (0,),
            cotangents: Sequence[Ref] | None = None) -> Graph:
    """The joint graph: ``graph``'s nodes followed by the backward of its ``outputs`` with
    respect to inputs ``wrt``. Its outputs are ``[value_0, ..., grad_wrt0, grad_wrt1, ...]``.

    Each output's cotangent is the seed 1.0, or, for vector-Jacobian products, the matching
    Ref in ``cotangents`` (inputs already in the graph).
    """
    values = graph.meta["values"]
    out_refs = [graph.outputs[i] for i in outputs]
    wrt_nodes = [graph.inputs[i] for i in wrt]
    active = active_nodes(graph, wrt_nodes)
    # What reverse mode asks of ``needed`` is whether an input of a needed node is needed,
    # the same question as whether it is active; and a node that is active but not needed
    # gets no contribution, so it is passed by as one without a cotangent. Only a loop's or a
    # Function's own rules need the set itself.
    plain = _OWN_RULE_OPS.isdisjoint(map(_OP, graph.nodes))
    needed = active if plain else needed_nodes(graph, active, out_refs)
    done: set[Node] = set()
    adjoints: dict[Node, Ref] = {}

    trace = Trace()
    trace.nodes = list(graph.nodes)
    trace.inputs = list(graph.inputs)
    trace.values = dict(values)
    trace.lazy = True  # the backward is built on shapes: the emitted code computes it
    trace.shared = Shared(graph.nodes)
    trace.share_constants(trace.shared.constants)
    contributions: dict[Ref, list[tuple[int, object, Node, int]]] = {}
    read: dict[Node, object] = {}  # what the rules read, by forward value (_pull_back)
    loop_adjoints: dict[Node, dict[int, object]] = {}
    made_early: dict[Node, object] = {}  # adjoints whole before the walk reaches their value

    with trace:
        trace.role = "bwd"
        for k, out_ref in enumerate(out_refs):
            if out_ref.node not in needed:
                continue
            with at_loc(out_ref.node.loc):
                if cotangents is None:
                    seed = _make_seed(trace, out_ref)
                elif isinstance(cotangents[k], Ref):
                    seed = trace.tracer(cotangents[k])
                else:  # a constant cotangent (one row of a Jacobian)
                    seed = Tracer(trace, trace.const(cotangents[k]), cotangents[k])
            contributions.setdefault(out_ref, []).append((-1 - k, seed, out_ref.node, 0))
        site = trace.site  # (_pull_back sets where each node's rules record)
        saved = site.loc, site.origin
        try:
            _pull_back_all(graph, trace, needed, done, contributions, adjoints,
                           loop_adjoints, read, _named_read_once(graph) if plain else None,
                           made_early)
        finally:
            swap_loc(*saved)
        grads = []
        for inp in wrt_nodes:
            g = (made_early.pop(inp) if inp in made_early
                 else _combine(contributions.pop(inp.out, None), inp))
            # a copy belongs to the line that made the gradient, never to grad's caller
            loc = g.ref.node.loc if isinstance(g, Tracer) else None
            with at_loc(loc or graph.meta.get("loc")):
                grads.append(_as_tracer(trace, g) if g is not None else _zeros(trace, inp))
    joint = trace.graph(out_refs + [g.ref for g in grads])
    joint.meta = dict(graph.meta, values=trace.values, wrt=list(wrt), adjoints=adjoints)
    # Shared kept the backward free of duplicates: when it can say so of the whole graph,
    # cse need not look for one (optimize/scan.py). Trace.const hands out one node per
    # scalar number: those of its table are the constants to compare.
    joint.meta.pop(NO_DUPLICATES, None)  # (the forward's, if it had one: other nodes)
    if trace.shared.no_duplicates(list(map(_OP, joint.nodes[len(graph.nodes):])), _UNKEYED,
                                  _CONST, {ref.node for ref in trace._consts.values()}):
        joint.meta[NO_DUPLICATES] = list(joint.nodes)
    return joint


def _named_read_once(graph: Graph) -> set[Ref]:
    """The numbers the user named (arguments too) that one operand of one node reads: their
    adjoint is whole once that node's rules have run. Numbers only: an array's adjoint may
    be a buffer that later rules write into (``grad_h[t] = 0.0`` once its row is read), and
    its rename made early would stand before that read, forcing a copy. (Counted in C: a pass
    in Python cost 4k instructions per op.)"""
    reads = Counter(chain.from_iterable([node.inputs for node in graph.nodes]))
    return {ref for ref, count in reads.items()
            if count == 1 and ref.node.name and ref.node.op.n_out == 1
            and ref.node.avals[0].py is not None}


def _pull_back_all(graph, trace, needed, done, contributions, adjoints, loop_adjoints,
                   read, read_once=None, made_early=None) -> None:
    """Every needed node's adjoint, last node first: combined from its contributions, then
    pulled back to its inputs by its rules (loops and gradgen.Functions by theirs).

    The adjoint of a named value read once (``read_once``) is made as soon as its reader's
    rules have run, in the order the reader takes its operands: for ``c = a + b``,
    ``grad_a = grad_c`` then ``grad_b = grad_c``, below what they name, as a person writes
    them; made when the walk reached each value, the renames stood in reverse order, after
    whatever the lines between did."""
    function_calls = None
    for node in reversed(graph.nodes):
        if node not in needed:
            continue
        if node.op.name in _OWN_RULES:  # (one test for most nodes: none of these four)
            name = node.op.name
            if name == "input" or node in done:
                continue
            if name == "loop_out" and node.inputs[0].node.op.name == "loop":
                g = _combine(contributions.pop(node.out, None), node)  # one carry's adjoint
                if isinstance(g, Tracer):
                    adjoints[node] = g.ref
                loop_adjoints.setdefault(node.inputs[0].node, {})[node.attrs["index"]] = g
                continue
            if name == "loop":
                with at_loc(node.loc):
                    pull_back_loop(trace, node, loop_adjoints.pop(node, {}), needed,
                                   contributions, reverse)
                continue
            if name == "function_output":
                if function_calls is None:  # (made when a graph has a Function: most have none)
                    function_calls = function_groups(graph)
                siblings = function_calls[node.attrs["call"], node.inputs[1:]]
                done.update(siblings)
                gs = [_combine(contributions.pop(s.out, None), s) for s in siblings]
                adjoints.update((s, g.ref) for s, g in zip(siblings, gs, strict=True)
                                if isinstance(g, Tracer))
                pull_back_function(trace, siblings, gs, needed, contributions)
                continue
        # (a plain tuple is equal to the Ref(node, 0) each contribution is keyed by, and
        # hashes alike: no Ref to make)
        if made_early and node in made_early:
            g = made_early.pop(node)
        else:
            g = _combine(contributions.pop((node, 0), None), node)
        if g is not None:  # (each contribution is recorded at node's line: _pull_back)
            if type(g) is Tracer:
                adjoints[node] = g.ref
            _pull_back(trace, node, g, needed, contributions, read)
            if read_once:
                for ref in node.inputs:
                    if ref in read_once and ref in contributions:
                        made_early[ref.node] = _combine(contributions.pop(ref), ref.node)


def zeros_ref(joint: Graph, node: Node) -> Ref:
    """A constant zero shaped like ``node``: the adjoint of a value the output ignores."""
    aval = node.aval
    value = aval.py(0) if aval.py is not None else np.zeros(aval.shape, aval.dtype)[()]
    const = Node(OPS["const"], (), {"value": value}, (aval,), None, None, "const")
    joint.nodes.append(const)
    joint.meta["values"][const] = value
    return const.out


def _make_seed(trace: Trace, out_ref: Ref) -> Tracer:
    aval = out_ref.aval
    if not aval.is_float:
        raise GradgenError(f"the output is {aval}, not a float: it has no gradient")
    name = f"grad_{out_ref.node.name}" if out_ref.node.name else None
    node = trace.add(OPS["seed"], (), {}, (aval,), name=name)
    value = _seed_value(aval)
    trace.values[node] = value
    return Tracer(trace, node.out, value)


def _pull_back(trace, node, g, needed, contributions, read) -> None:
    values = trace.values
    op = node.op
    inputs = node.inputs
    # What the rules read: constants as their values, others as tracers, made once per value
    # in ``read`` (a forward value read by many rules, then as its own rule's ``ans``)
    if op.n_out == 1:
        ans = read.get(node)
        if ans is None:
            ans = read[node] = new_tracer(trace, _new_ref(Ref, (node, 0)), values[node])
    else:
        ans = trace.tracer(node.out)
    ins = []
    wanted = []  # the inputs that get a contribution, by index
    for k, r in enumerate(inputs):
        source = r.node
        if source in needed:
            wanted.append(k)
        x = read.get(source)  # (a value of several outputs is never kept there: one per Ref)
        if x is None:
            if source.op.n_out != 1:
                x = trace.tracer(r)
            elif source.op is _CONST:
                x = read[source] = values[source]
            else:  # new_tracer(trace, r, values[source]) written out
                x = read[source] = _new_tracer(Tracer)
                x._trace, x.ref, x._value = trace, r, values[source]
        ins.append(x)
    layout = _LAYOUTS.get(op)
    rules, plain, origins = layout if layout is not None else _rule_layout(op)
    site = trace.site
    site.loc = node.loc  # each contribution is recorded at node's line (reverse restores it)
    trace.sole_adjoint = g.ref.node if len(wanted) == 1 and type(g) is Tracer else None
    try:
        if plain and not node.attrs:  # (most nodes: a rule per input, called plainly)
            serial = node.serial
            n_in = len(ins)
            for k in wanted:
                rule = rules[k]
                if rule is None:
                    continue
                site.origin = origins[k]  # (swap_loc's, for the one field that changes)
                # (a plain call where it can be: CPython's fast path for a Python function)
                if n_in == 2:
                    c = rule(g, ans, ins[0], ins[1])
                elif n_in == 1:
                    c = rule(g, ans, ins[0])
                else:
                    c = rule(g, ans, *ins)
                r = inputs[k]
                if type(c) is not Tracer or c.ref.node.avals is not _FLOAT or (
                        r.node.avals is not _FLOAT):  # (_fit's common case, inline: floats)
                    c = _fit(c, r)
                entries = contributions.get(r)
                if entries is None:
                    contributions[r] = [(serial, c, node, k)]
                else:
                    entries.append((serial, c, node, k))
        else:
            _pull_back_rules(node, g, ans, ins, wanted, contributions, site)
    except (ArithmeticError, ValueError) as e:  # a scalar evaluated at the traced values
        raise not_finite(node, e) from e
    finally:
        trace.sole_adjoint = None


def _pull_back_rules(node, g, ans, ins, wanted, contributions, site) -> None:
    """``_pull_back``'s rule calls for a node whose rules are not one plain call per input:
    attributes, one rule for all inputs (variadic), contributions that come first (a[i] = v
    reads grad_a[i] for v before it zeroes it) or are built only when their input's adjoint
    is combined."""
    op = node.op
    variadic, order, deferred = _SPECIAL_LAYOUTS[op]
    rules, origins = op.vjp, _origins_of(op)
    if order:
        wanted = [k for k in (*order, *(k for k in wanted if k not in order)) if k in wanted]
    attrs = node.attrs
    for i in wanted:
        r = node.inputs[i]
        rule = rules[0] if variadic else rules[i]
        if rule is None:
            continue
        k = 0 if variadic else i
        if i in deferred:
            c = _Deferred((node, k, r, rule, g, ans, ins))
        else:
            site.origin = origins[k]
            c = _fit(rule(g, ans, *ins, **attrs), r)
        contributions.setdefault(r, []).append((node.serial, c, node, k))


_CONST = OPS["const"]
# The nodes whose adjoints _pull_back_all hands on by their own rules, not by _pull_back
_OWN_RULES = {"input", "loop_out", "loop", "function_output"}
_OWN_RULE_OPS = {OPS[name] for name in _OWN_RULES - {"input"}}
_OP = operator.attrgetter("op")
_UNKEYED = tuple(OPS[name] for name in sorted(UNIQUE))  # (list.count compares by identity)
_LAYOUTS: dict = {}
_SPECIAL_LAYOUTS: dict = {}


def _rule_layout(op) -> tuple:
    """How ``op``'s VJP rules are laid out, read once per op: (its rules, whether they are
    plain, the ``origin`` of each rule's nodes). Plain: one rule per input, none of whose
    contributions comes first or is deferred (``_pull_back_rules`` says what those are)."""
    extra = op.extra
    special = _SPECIAL_LAYOUTS[op] = (extra.get("variadic", False), extra.get("vjp_order", ()),
                                      extra.get("deferred_vjp", ()))
    layout = _LAYOUTS[op] = (op.vjp, special == (False, (), ()), _origins_of(op))
    return layout


class _Origins(dict):
    """``(op, k)`` by input index ``k``: the origin of the nodes that op's k-th rule records,
    one tuple per rule, made when first asked for. Every backward node keeps its origin: a
    tuple made per node would be one more object per node for the cyclic GC to walk once a
    build ends. (By index, not by the rows a table lists: a row may hand one rule to any
    number of inputs, as concatenate's does.)"""

    __slots__ = ("op",)

    def __init__(self, op):
        super().__init__()
        self.op = op

    def __missing__(self, k: int) -> tuple:
        origin = self[k] = (self.op, k)
        return origin


_ORIGINS: dict = {}


def _origins_of(op) -> _Origins:
    origins = _ORIGINS.get(op)
    if origins is None:
        origins = _ORIGINS[op] = _Origins(op)
    return origins


def rule_origin(op, k: int) -> tuple:
    """``(op, k)``: where the nodes of op's k-th rule come from, one tuple per rule."""
    return _origins_of(op)[k]


def _contribution(node: Node, k: int, r: Ref, rule, g, ans, ins):
    """Input ``r``'s (the k-th) share of ``node``'s adjoint ``g``: what ``rule`` writes."""
    saved = swap_loc(node.loc, rule_origin(node.op, k))  # (at_loc without a with: per edge)
    try:
        return _fit(rule(g, ans, *ins, **node.attrs), r)
    except (ArithmeticError, ValueError) as e:  # a scalar evaluated at the traced values
        raise not_finite(node, e) from e
    finally:
        swap_loc(*saved)


class _Deferred:
    """A contribution built only when its input's adjoint is put together. ``a[i] = v``
    zeroes grad_a[i] for the old ``a``; built late, that write comes after every use of
    the row grad_a[i] that went to ``v``, so the module can zero it in place."""

    def __init__(self, args):
        self.args = args

    def build(self):
        return _contribution(*self.args)


def _fit(c, ref: Ref):
    """Match a contribution to its input: sum over broadcast axes, cast back to its dtype."""
    if type(c) is Tracer and c.ref.node.avals[c.ref.index] is ref.node.avals[ref.index]:
        return c  # the common case (Python floats share one Aval): nothing to match
    aval = ref.aval
    shape = c.aval.shape if isinstance(c, Tracer) else np.shape(c)
    if shape != aval.shape:
        if len(shape) >= aval.ndim:
            c = sum_to(c, aval.shape)
        else:
            c = broadcast_to(c, shape=aval.shape)
    dtype = c.aval.dtype if isinstance(c, Tracer) else np.result_type(c)
    if dtype != aval.dtype and aval.is_float:
        c = cast(c, dtype=aval.dtype.name)
    return c


def _combine(entries, node: Node):
    """One adjoint from all contributions: a single fused sum in forward-use order, named
    ``grad_<name>`` when the user named the value (the node that computes it takes the name
    when it can, _own_statement; else an ``adjoint`` node renames it). It is placed at the
    first user's line."""
    if not entries:
        return None
    if len(entries) == 1:  # (most values: one use, nothing to add up)
        key, first, user, index = entries[0]
        if type(first) is _Deferred:
            first = first.build()
        if key < 0 or type(first) is not Tracer:
            return first  # the seed, or a constant: nothing to add up, to name or to place
        made = first.ref.node
        if not node.name:
            _note_adjoint(made, node)  # what it holds names it (naming.py)
            return first
        # named grad_<name>, it keeps its rule (grad_a = grad_c comes from d(u + v)/du = 1)
        origin = rule_origin(user.op, index) if user.role != "bwd" else None
        loc = made.loc if user.op.name == "function_output" else user.loc
        if _own_statement(made, loc, origin):
            made.name = f"grad_{node.name}"  # the rule's own node: no rename to add
            made.grad_of = node
            return first
        _note_adjoint(made, node)
        return _named(first, f"grad_{node.name}", loc, origin)
    for e in entries:
        if type(e[1]) is _Deferred:
            entries = [(e[0], e[1].build(), *e[2:]) if type(e[1]) is _Deferred else e
                       for e in entries]
            break
    entries.sort(key=_first)  # stable: a node's two uses of one input stay in order
    first, user = entries[0][1:3]
    loc = user.loc
    if user.op.name == "function_output" and isinstance(first, Tracer):
        loc = first.ref.node.loc  # the line of the user's backward that computed it
    saved = swap_loc(loc, None)
    try:
        terms, uses = [], []
        for e in entries:
            terms.append(e[1])
            if e[2].loc is not None:
                uses.append(e[2].loc.short)
        partial = f"grad_{node.name}_partial" if node.name else None
        g = _fused_sum(terms, tuple(uses), partial)
        if isinstance(g, Tracer):
            made = g.ref.node
            if node.name and _own_statement(made, loc, None):
                made.name = f"grad_{node.name}"  # the fused sum itself: no rename to add
                made.grad_of = node
            else:
                _note_adjoint(made, node)  # a buffer it is built in: grad_<name> too
                if node.name:
                    g = _named(g, f"grad_{node.name}", loc, None)
    finally:
        swap_loc(*saved)
    return g


_first = operator.itemgetter(0)


def _named(g: Tracer, name: str, loc, origin) -> Tracer:
    """``g`` under the user's name for it: an ``adjoint`` node (an identity that carries the
    name), recorded at ``loc`` from the rule ``origin``. A Python number's is made directly:
    what bind would do, step by step."""
    ref = g.ref
    aval = ref.node.avals[ref.index]
    trace = g._trace
    value = g._value
    if type(value) is float and aval.py is float and loc is not None:
        node = new_node(adjoint, (ref,), _NO_ATTRS, PY_NUMBER_AVALS[float], loc, name,
                        trace.role, origin)
        trace.nodes.append(node)
        trace.values[node] = value
        g = _new_tracer(Tracer)  # new_tracer(trace, node.out, value) written out
        g._trace, g.ref, g._value = trace, _new_ref(Ref, (node, 0)), value
        return g
    saved = swap_loc(loc, origin)
    try:
        g = adjoint(g)
    finally:
        swap_loc(*saved)
    g.ref.node.name = name
    return g


def _own_statement(made: Node, loc, origin) -> bool:
    """May ``made``, the node a rule (or the fused sum) just recorded as a value's whole
    adjoint, carry the name ``grad_<name>`` itself, in place of an ``adjoint`` node renaming
    it? When it is an ordinary backward op that says nothing of its own (no name, no hint, no
    adjoint's) at the line and rule the rename would have had: the statement then reads the
    same (``grad_y = <what the rule computes>``, under the same comment), standing where the
    rule made it, and the graph has one node fewer per named value. Anything else (the seed,
    another value's adjoint, a forward value, a constant, a write into an array) keeps the
    rename: ``grad_a = grad_c``."""
    if (made.role != "bwd" or made.name is not None or made.grad_of is not None
            or made.hint is not None or made.origin is not origin
            or made.loc is not loc and made.loc != loc):
        return False
    op = made.op
    nameable = _NAMEABLE.get(op)
    if nameable is None:
        nameable = _NAMEABLE[op] = (op.name not in _NOT_NAMED and op.n_out == 1 and not (
            op.extra.get("statement") or op.extra.get("region")))
    return nameable


# Ops whose node never prints as ``name = expression``: what the emitter writes of them is a
# literal, a loop's variable or a write into an array (a[i] = v), so the rename names them.
_NOT_NAMED = UNIQUE | {"const", "loop_out", "loop", "function_output"}
_NAMEABLE: dict = {}  # by op: none of the above, one output, not a statement or a region


def _note_adjoint(made: Node, node: Node) -> None:
    """``made`` is the adjoint of ``node``, a value the user did not name: the emitter names
    it after that value (``grad_x_tail``) unless something already says what it holds."""
    if (made.role == "bwd" and made.name is None and made.hint is None
            and made.grad_of is None and made.op.name != "seed"):
        made.grad_of = node


def _fused_sum(terms: list, uses: tuple, partial_name: str | None):
    """``t1 + t2 + ... + tk`` left to right. Past MAX_FUSED_TERMS the running sum becomes the
    first term of the next add_n: the same additions in the same order, in statements a
    reader (and Python's compiler) can take in. A scalar added to itself is ``2 * t``
    (exact in binary floating point), as fold would make it."""
    terms = _counted(terms)
    if len(terms) == 1:
        return terms[0]  # t + t: 2 * t
    total = add_n(*terms[:MAX_FUSED_TERMS], uses=uses)
    for start in range(MAX_FUSED_TERMS, len(terms), MAX_FUSED_TERMS - 1):
        total.ref.node.name = partial_name
        total = add_n(total, *terms[start:start + MAX_FUSED_TERMS - 1], uses=())
    return total


def _counted(terms: list) -> list:
    """A computed scalar that comes k times among a sum's terms (``x * x``, or ``x * x``
    inside ``x * sin(x) + x * x``) is one term ``k * t`` where it first comes, not ``t + t``
    (Shared made the equal contributions one value): the order of a value's contributions is
    reverse mode's own, never the user's."""
    refs = [t.ref for t in terms if isinstance(t, Tracer)]
    if len(set(refs)) == len(refs):
        return terms  # (most sums: no term twice)
    refs = [t.ref if isinstance(t, Tracer) and t.ref.aval.shape == ()
            and t.ref.node.op.name != "const" else None for t in terms]
    counts = Counter(ref for ref in refs if ref is not None)
    if not counts or max(counts.values()) == 1:
        return terms
    counted, seen = [], set()
    for term, ref in zip(terms, refs):
        k = counts[ref] if ref is not None else 1
        if k == 1:
            counted.append(term)
        elif ref not in seen:
            seen.add(ref)
            counted.append(OPS["mul"](k, term))
    return counted


def _as_tracer(trace: Trace, g):
    """A gradient as a node of the joint graph (a constant one when nothing traced reached it).
    Whether the caller may mutate it is settled once, after optimization: own_outputs."""
    return g if isinstance(g, Tracer) else Tracer(trace, trace.const(g), g)


def _zeros(trace: Trace, inp: Node):
    """The gradient of an input the output does not depend on."""
    aval = inp.aval
    value = 0.0 if aval.py is not None else np.zeros(aval.shape, aval.dtype)
    if aval.py is None and aval.shape == ():
        value = np.zeros((), aval.dtype)[()]
    return Tracer(trace, trace.const(value), value)
