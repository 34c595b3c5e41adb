"""Loop regions as Python: ``for t in range(n):`` forward, ``for t in reversed(range(n)):``
backward, bodies printed by the ordinary emitter inside them.

The forward loop keeps, in lists it allocates, only what its backward reads (the carries at
the start of each trip and the body values the derivative rules reuse); the backward loop
reads them back by the loop variable, carries ``grad_<carry>`` from trip to trip, and adds
each read-only value's gradient into one accumulator (``grad_W += ...``), or, when each
trip's share is an outer product, stores the trip's vectors and multiplies them once after
the loop (loops/batch.py, which also gives the forward ``U @ xs[t]`` as one product, and the
backward's elementwise functions of forward values, ``1.0 - h * h``, as one op over all the
trips' values before the backward loop).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from operator import attrgetter

import numpy as np

from ..ir import Graph, Node, Ref
from ..naming import Held, held_name, part_name
from ..ops import OPS
from ..ops.index import index_text
from ..ops.registry import Expr
from ..optimize import optimize
from .batch import Batched, Operand, batch_sums, hoist_elementwise, hoist_row_products
from .region import BackwardPlan, Moving, Region, Slice, has_moving

_NODE_OP = attrgetter("op")  # loops are found from the set of a graph's ops, in C


@dataclass
class _Split:
    """A backward plan's joint body cut in two: what the forward loop runs (``forward``,
    outputs the next carries then the values it saves) and what the backward loop runs
    (``backward``, its inputs described by ``sources``: ("body", i), ("adjoint", j) or
    ("saved", r))."""

    forward: Graph
    saved: list[Node]
    backward: Graph
    sources: list[tuple[str, int]]


@dataclass
class _Forward:
    """What a backward loop needs to know about its forward loop's text."""

    var: str
    start: int
    carries: list[str]
    sources: list[str]
    invariants: list[str]
    saved_carries: dict[int, str] = field(default_factory=dict)
    saved: list[str | None] = field(default_factory=list)
    next_of: dict[int, int] = field(default_factory=dict)  # saved value -> carry it becomes
    # carries whose list holds only what each trip made of them (the backward reads no
    # trip's value before it): read at [t], not [t + 1], with no value before the first trip
    after_only: set[int] = field(default_factory=set)


def _affine(var: str, a: int, b: int) -> str:
    """``a * var + b`` as a person writes it: t, t + 1, t - 1, 2 * t, 9 - t."""
    if a == 0:
        return str(b)
    head = var if a == 1 else f"-{var}" if a == -1 else f"{a} * {var}"
    if b == 0:
        return head
    if a == -1:
        return f"{b} - {var}"
    return f"{head} + {b}" if b > 0 else f"{head} - {-b}"


def _rows_name(text: str) -> str:
    """The array holding one row per trip of the value named ``text``: ``grad_errs`` for
    ``grad_err``, ``grad_h_parts`` for ``grad_h_part``; ``grad_Wz_h_rows`` for ``grad_Wz_h``,
    whose plural ``s`` would read as part of its last word."""
    if not text.isidentifier():
        return "grad_rows"
    one_word = "_" not in text.removeprefix("grad_")
    return f"{text}s" if one_word or text.endswith("_part") else f"{text}_rows"


def _rows_at(graph: Graph, var: str, start: int) -> Graph:
    """``graph`` with its moving index items (loops/region.py) written in the loop variable:
    ``h[t] = ...``, ``h[t - 1]``."""
    if not any(has_moving(n) for n in graph.nodes):
        return graph
    values = graph.meta.get("values") or {}
    new_values = dict(values)
    mapping: dict[Node, Node] = {}
    nodes = []
    for node in graph.nodes:
        ins = tuple(Ref(mapping.get(r.node, r.node), r.index) for r in node.inputs)
        attrs = node.attrs
        if has_moving(node):
            attrs = {**attrs, "index": tuple(
                _Raw(_affine(var, i.step, int(i) - i.step * start)) if type(i) is Moving else i
                for i in attrs["index"])}
        if ins != node.inputs or attrs is not node.attrs:
            new = Node(node.op, ins, attrs, node.avals, node.loc, node.name, node.role,
                       node.serial, node.origin)
            mapping[node] = new
            if node in values:
                new_values[new] = values[node]
            node = new
        nodes.append(node)
    outputs = [Ref(mapping.get(r.node, r.node), r.index) for r in graph.outputs]
    return Graph(nodes, graph.inputs, outputs, {**graph.meta, "values": new_values})


def _copied_rows(graph: Graph, n_carry: int, buffers: set[Node]) -> Graph:
    """The forward body with each saved row of a buffer (``h[t - 2]``, a view) saved as a
    copy taken where it is read: later trips, and code after the loop, write into the buffer
    in place, and the backward reads the row as it was."""
    saved = {r.node for r in graph.outputs[n_carry:]}
    copies: dict[Node, Node] = {}
    for node in graph.nodes:
        root = node
        while root.is_view:
            root = root.inputs[0].node
        if node in saved and node.is_view and root in buffers:
            copies[node] = Node(OPS["copy"], (node.out,), {}, node.avals, node.loc,
                                node.name or "row", node.role)
    if not copies:
        return graph
    values = dict(graph.meta.get("values") or {})
    nodes = []
    for node in graph.nodes:
        nodes.append(node)
        if node in copies:
            nodes.append(copies[node])
            if node in values:
                values[copies[node]] = values[node]
    outputs = [*graph.outputs[:n_carry],
               *(copies[r.node].out if r.node in copies else r for r in graph.outputs[n_carry:])]
    return Graph(nodes, graph.inputs, outputs, {**graph.meta, "values": values})


def _buffers(graph: Graph, carries) -> set[int]:
    """The carries (positions among ``graph``'s inputs) the body writes rows of in place: the
    loop owns their arrays (a fresh copy of the value it starts from)."""
    positions = {graph.inputs[c]: c for c in carries}
    return {positions[n.inputs[0].node] for n in graph.nodes
            if n.op.extra.get("statement") and n.inputs[0].node in positions}


def _row_name(body: Graph, c: int, var: str) -> str | None:
    """A name for an unnamed carry that is what the trip wrote into a row of a buffer:
    ``h_t`` for the ``v`` of ``h[t] = v``."""
    out = body.outputs[c].node
    for node in body.nodes:
        if (node.op.name == "index_update" and node.inputs[1].node is out
                and node.inputs[0].node in body.inputs and has_moving(node)):
            buffer = node.inputs[0].node.name
            return f"{buffer}_{var}" if buffer else None
    return None


def _start_of(expr, node: Node, c: int):
    """A carry's value before the loop; a Python float that starts a NumPy float carry is
    converted, so every trip runs on the types the body was traced with."""
    region = node.attrs["region"]
    aval = region.body.inputs[c].aval
    if node.inputs[c].aval.py is not None and aval.py is None:
        return Expr(f"np.{aval.dtype.name}({expr.text})")
    return expr


def _zero_text(node: Node, like: str) -> str:
    aval = node.aval
    if aval.py is not None:
        return "0.0"
    if aval.shape == ():
        return f"np.{aval.dtype.name}(0.0)"
    return f"np.zeros_like({like})"


def _last_reads(graph: Graph) -> dict[Node, int]:
    last: dict[Node, int] = {}
    for position, node in enumerate(graph.nodes):
        for ref in node.inputs:
            last[ref.node] = position
    return last


def _old_reads_first(graph: Graph, carries: list[tuple[int, str, Node | None]]) -> Graph:
    """The body with each carry's next value computed after the last statement that reads
    its old value, where nothing in between stops it, so the value can be computed straight
    into the carry's variable (_fixed_names): the pendulum's backward updated grad_theta
    into grad_theta_1, then ``grad_dt += ... + grad_theta * omega_saved[t]`` read the old
    one, then ``grad_theta = grad_theta_1`` copied it back, once per trip. The update moves
    down past plain statements only: no write into an array, no loop, no other carry's next
    value (each of those may rebind or change what the update's operands name), and none
    reads the update. Its operands (inlined or named) then hold what they held."""
    nodes = graph.nodes
    next_values = {graph.outputs[k].node for k, _, _ in carries}
    order = None
    for k, _, old in carries:
        out = graph.outputs[k].node
        if old is None or not _is_statement(out) or out.op.name == "adjoint":
            continue
        current = order or nodes
        at = current.index(out)
        reading = {old}  # what holds a read of the old value (inlined where it is read)
        last = at
        for j, node in enumerate(current):
            if j > at and any(ref.node is out for ref in node.inputs):
                last = at  # the update is read in the body: it stays
                break
            if node is not out and any(ref.node in reading for ref in node.inputs):
                reading.add(node)
                last = max(last, j)
        if last == at or any(
                n in next_values or n.op.extra.get("statement") or n.op.extra.get("region")
                for n in current[at + 1:last + 1]):
            continue
        order = [*current[:at], *current[at + 1:last + 1], out, *current[last + 1:]]
    return graph if order is None else graph.with_nodes(order, graph.outputs)


def _fixed_names(graph: Graph, carries: list[tuple[int, str, Node | None]]) -> dict[Node, str]:
    """Next-carry outputs that may be computed straight into their carry's variable
    (``h = np.tanh(W @ h + ...)``): ``carries`` holds (output position, variable, the input
    holding the old value). Safe when nothing reads the old value later, also through an
    expression inlined into a later statement, and no other carry's update needs it."""
    readers: dict[Node, list[Node]] = {}
    for node in graph.nodes:
        for ref in node.inputs:
            readers.setdefault(ref.node, []).append(node)
    position = {n: i for i, n in enumerate(graph.nodes)}
    next_values = [graph.outputs[k].node for k, _, _ in carries]
    outputs = Counter(r.node for r in graph.outputs)
    after_body = len(graph.nodes)

    def lands(node: Node) -> int:  # where a read by ``node`` can end up after inlining
        while node.name is None:
            users = readers.get(node, ())
            if node in outputs:  # an output read by nothing else: maybe printed after the body
                return after_body if not users and outputs[node] == 1 else position[node]
            if len(users) != 1:
                break
            node = users[0]
        return position[node]

    def old_read_after(old: Node | None, new: Node) -> bool:
        # is the old value read after the new one is written: by a later statement, an
        # expression inlined into one, or the lines after the body (an output: grad_xs[t]
        # += grad_h)?
        return old is not None and (old in next_values or old in outputs or any(
            lands(r) > position[new] for r in readers.get(old, ()) if r is not new))

    fixed: dict[Node, str] = {}
    for k, name, old in carries:
        out = graph.outputs[k].node
        if not _is_statement(out) or out in fixed or next_values.count(out) > 1:
            continue
        inner = out.inputs[0].node if out.op.name == "adjoint" else None
        if (inner is not None and old is not None and _is_statement(inner)
                and inner not in fixed and inner not in next_values and inner not in outputs
                and not old_read_after(old, inner)):
            # the carry's new adjoint is a sum (or product) under the carry's name: computed
            # straight into it, the rename after it reads grad_h = grad_h and is left out
            fixed[inner] = fixed[out] = name
        elif not old_read_after(old, out):
            fixed[out] = name
    return fixed


def _is_statement(node: Node) -> bool:
    """Is ``node`` printed as a statement of its own (so it can be given a name or be added
    into an accumulator)? Inputs, constants and a loop's results are not."""
    if node.op.name == "adjoint" and node.inputs[0].node.op.name == "loop_out":
        return False  # the loop's result, under its adjoint's name
    return node.op.name not in ("input", "const", "loop_out")


def _indented(lines: list[str]) -> list[str]:
    return ["\n".join(f"    {part}" if part else part for part in line.split("\n"))
            for line in lines]


def split_plan(plan: BackwardPlan) -> _Split:
    """Cut ``plan.joint``: the forward side computes the next carries (and the guards); every
    other node the gradients need runs in the backward loop, reading the forward values it
    uses from the lists the forward loop fills."""
    cached = getattr(plan, "_split", None)
    if cached is not None:
        return cached
    joint = plan.joint
    n_carry = plan.region.n_carry
    n_body = len(plan.region.body.inputs)
    forward_side = {r.node for r in joint.outputs[:n_carry]}
    forward_side.update(n for n in joint.nodes if n.op.name == "guard")
    for node in reversed(joint.nodes):
        if node in forward_side:
            forward_side.update(r.node for r in node.inputs)
    wanted = {r.node for r in joint.outputs[n_carry:]}
    # A loop inside the body is run again in the backward loop, next to its own reverse,
    # which reads what it saves: each trip of this loop then gets its own inner lists.
    rerun: set[Node] = set()
    for node in reversed(joint.nodes):
        if node in wanted and (node not in forward_side or node in rerun):
            wanted.update(r.node for r in node.inputs)
            if node.op.name == "loop_bwd":
                rerun.add(node.inputs[0].node)
    backward_nodes = [n for n in joint.nodes if n in wanted and (
        n.op.name == "const" or n in rerun
        or (n not in forward_side and n.op.name != "input"))]
    kept = set(backward_nodes)
    boundary: list[Node] = []  # values the backward side reads from elsewhere, in order
    seen: set[Node] = set()
    reads = [r.node for n in backward_nodes for r in n.inputs]
    reads += [r.node for r in joint.outputs[n_carry:]]
    for node in reads:
        if node not in kept and node not in seen:
            seen.add(node)
            boundary.append(node)
    inputs = list(joint.inputs)
    saved = [n for n in boundary if n not in inputs]
    sources: list[tuple[str, int]] = []
    new_inputs: list[Node] = []
    mapping: dict[Node, Node] = {}
    values = joint.meta.get("values") or {}
    new_values: dict[Node, object] = {}
    for node in boundary:
        if node in inputs:
            i = inputs.index(node)
            sources.append(("body", i) if i < n_body else ("adjoint", i - n_body))
        else:
            sources.append(("saved", saved.index(node)))
        new = Node(OPS["input"], (), {"index": len(new_inputs)}, node.avals, None, node.name,
                   "input")
        new_inputs.append(new)
        mapping[node] = new
        if node in values:
            new_values[new] = values[node]
    copied: list[Node] = []
    for node in backward_nodes:
        ins = tuple(Ref(mapping.get(r.node, r.node), r.index) for r in node.inputs)
        new = node if ins == node.inputs else node.with_inputs(ins)
        mapping.setdefault(node, new)
        if node in values:
            new_values[new] = values[node]
        copied.append(new)
    backward = Graph([*new_inputs, *copied], new_inputs,
                     [Ref(mapping.get(r.node, r.node), r.index)
                      for r in joint.outputs[n_carry:]], {"values": new_values})
    forward_nodes = [n for n in joint.nodes
                     if n in forward_side and n.op.name != "input"]
    forward = Graph([*inputs[:n_body], *forward_nodes], inputs[:n_body],
                    [*joint.outputs[:n_carry], *(n.out for n in saved)],
                    {"values": values})
    split = _Split(forward, saved, backward, sources)
    plan._split = split
    return split


def plain_body(region: Region) -> Graph:
    """The body as the forward of a loop nobody differentiates runs it: optimized once."""
    cached = region._plans.get("plain")
    if cached is None:
        cached = region._plans["plain"] = optimize(region.body)
    return cached


class RegionWriter:
    """Writes the loop nodes of one emitted function (or loop body) as statements, and knows
    the variables their results are left in."""

    def __init__(self, graph: Graph, namer, spec, constants, emit_body, ops=None):
        self.namer = namer
        self.spec = spec
        self.constants = constants
        self.emit_body = emit_body  # emit.emit_loop_body: bodies print like functions
        self.results: dict[Node, list[str]] = {}
        self.forward: dict[Node, _Forward] = {}
        self.arrays: dict[str, str] = {}  # a forward loop's list -> the array made of it
        # ``ops``: the graph's ops, when the caller has them (the emitter's survey does)
        ops = set(map(_NODE_OP, graph.nodes)) if ops is None else ops
        has_loops = any(op.extra.get("region") for op in ops)
        self.backward_of = {n.inputs[0].node: n for n in graph.nodes
                            if n.op.name == "loop_bwd"} if has_loops else {}
        # Where each value is read last. A loop_bwd's own text reads only the adjoints; its
        # other inputs are there for the graph's sake (its forward loop saved what it needs).
        self.last: dict[Node, int] = {}
        self.position = ({node: position for position, node in enumerate(graph.nodes)}
                         if has_loops else {})
        for position, node in enumerate(graph.nodes if has_loops else ()):
            reads = node.inputs
            if node.op.name == "loop_bwd":
                reads = reads[1 + node.attrs["plan"].region.n_outer:]
            for ref in reads:
                self.last[ref.node] = position
        for ref in graph.outputs if has_loops else ():
            self.last[ref.node] = len(graph.nodes)
        self.wanted_names: dict[Node, str] = {}  # a loop_out -> the name its adjoint has
        self.aliased: dict[Node, Node] = {}  # that adjoint -> the loop_out
        if not self.backward_of:
            return
        readers: dict[Node, list[Node]] = {}
        for node in graph.nodes:
            for ref in node.inputs:
                readers.setdefault(ref.node, []).append(node)
        for node in graph.nodes:
            if node.op.name != "loop_out" or node.inputs[0].node.op.name != "loop_bwd":
                continue
            users = readers.get(node, [])
            if len(users) == 1 and users[0].op.name == "adjoint" and users[0].name:
                self.wanted_names[node] = users[0].name
                self.aliased[users[0]] = node

    # --- what the enclosing emitter asks ----------------------------------------------------

    def result(self, node: Node) -> str:
        return self.results[node.inputs[0].node][node.attrs["index"]]

    def alias(self, node: Node) -> str | None:
        out = self.aliased.get(node)
        return None if out is None else self.result(out)

    def write(self, node: Node, args, position: int) -> tuple[list[str], list]:
        if node.op.name == "loop":
            return self._forward(node, args, position)
        return self._backward(node, args, position)

    # --- helpers ----------------------------------------------------------------------------

    def _loop_var(self, wanted: str) -> str:
        """The user's loop variable, or a fresh name while an enclosing loop has it."""
        free = self._free_vars()
        if wanted in free:
            free.discard(wanted)
            return wanted
        return wanted if wanted == "_" else self.namer.fresh(wanted)

    def _free_vars(self) -> set[str]:
        # loop variables of loops that have ended, shared by the nested bodies' writers
        free = getattr(self.namer, "free_loop_vars", None)
        if free is None:
            free = self.namer.free_loop_vars = set()
        return free

    def _bound(self, expr, base: str | None, lines: list[str]) -> str:
        """A name for a value the loop reads every trip (computed once, before the loop)."""
        text = expr.text
        if text.isidentifier():
            return text
        row = re.fullmatch(r"(\w+)\[(\w+)\]", text)  # P[i] read by an inner loop: P_i
        name = self.namer.fresh(base or (f"{row[1]}_{row[2]}" if row else "tmp"))
        lines.append(f"{name} = {text}")
        return name

    def _carry_var(self, base: str, expr, node: Node, owner: Node, position: int,
                   lines: list[str], buffer: bool = False) -> str:
        """The variable a carry lives in: the user's name; the value before the loop is
        assigned to it unless it already is that variable and nothing reads it later. A
        buffer the body writes rows of starts from a copy unless the loop may take the
        value's own array (a new literal, or a value computed here that nothing else reads)."""
        dead = (self.last.get(node, position) <= position
                and sum(r.node is node for r in owner.inputs) == 1)
        text = expr.text
        if buffer and not (self._fresh(node, text) and (dead or node.op.name == "const")):
            text = f"{text}.copy()" if re.fullmatch(r"[\w.]+", text) else f"np.array({text})"
        elif text == base and dead:
            return base
        name = self.namer.fresh(base)
        lines.append(f"{name} = {text}")
        return name

    def _fresh(self, node: Node, text: str) -> bool:
        """Is ``node``'s array the module's own, free to be written into once nothing else
        reads it? (A literal, ``np.zeros(...)``, is a new array wherever it is written.)"""
        if node.op.name == "const":
            return text not in self.constants.by_key.values()
        while node.op.name == "adjoint":  # grad_h, a name for 2 * h: that array if only it reads it
            inner = node.inputs[0].node
            if self.last.get(inner) != self.position[node]:
                return False
            node = inner
        return not (node.is_view or node.op.name in ("input", "seed", "loop_out"))

    def _body(self, graph: Graph, input_names: dict[int, str], preset: dict[Node, str],
              accumulate: dict[Node, str], owned: frozenset = frozenset(),
              all_trips: bool = False):
        # A trip's value read by index more than once (h_saved[t + 1] in ``1 - h * h``) is
        # read once, into a name, as a person writes it. Read for all trips at once (a
        # hoisted op's h_rows[1:]), it is named after those rows (h_rows_tail), not after
        # the one trip's value (h_1).
        reads = Counter(r.node for node in graph.nodes for r in node.inputs)
        reads.update(r.node for r in graph.outputs)
        bound: list[str] = []
        input_names = dict(input_names)
        for node in graph.inputs:
            index = node.attrs["index"]
            text = input_names.get(index, "")
            if reads[node] > 1 and "[" in text:
                rows = _ROWS_PART.fullmatch(text) if all_trips else None
                name = self.namer.fresh(
                    f"{rows[1]}_{part_name((('slice', rows[2] and 1, rows[3] and -1, None),))}"
                    if rows else node.name or text.partition("[")[0].removesuffix("_saved"))
                bound.append(f"{name} = {text}")
                input_names[index] = name
        emitted = self.emit_body(self.spec, self.namer, self.constants, graph, input_names,
                                 preset, accumulate, owned)
        emitted.lines[:0] = bound
        return emitted

    def _comment(self, region: Region, suffix: str = "") -> list[str]:
        loc = region.header
        if loc is None:
            return []
        text = loc.text()
        line = f"# {loc}  {text}{suffix}" if text else f"# {loc}{suffix}"
        return [line if len(line) <= 96 else line[:93] + "..."]

    # --- the forward loop -------------------------------------------------------------------

    def _forward(self, node: Node, args, position: int):
        region: Region = node.attrs["region"]
        n_carry, n_slice = region.n_carry, region.n_slice
        reverse = self.backward_of.get(node)
        split = split_plan(reverse.attrs["plan"]) if reverse is not None else None
        graph = split.forward if split is not None else plain_body(region)
        lines = self._comment(region)
        body_inputs = region.body.inputs
        user_var = region.var if region.var and region.var != "_" else "t"
        buffers = _buffers(graph, range(n_carry))
        carries = [self._carry_var(body_inputs[c].name or _row_name(region.body, c, user_var)
                                   or "carry", _start_of(args[c], node, c),
                                   node.inputs[c].node, node, position, lines, c in buffers)
                   for c in range(n_carry)]
        sources = [self._bound(args[n_carry + s], node.inputs[n_carry + s].node.name, lines)
                   for s in range(n_slice)]
        invariants = [self._bound(a, body_inputs[n_carry + n_slice + i].name, lines)
                      for i, a in enumerate(args[n_carry + n_slice:])]
        rows = [*region.slices, *(Slice(n.attrs["index"], tuple(
            i.step if type(i) is Moving else 0 for i in n.attrs["index"]))
            for n in region.body.nodes if has_moving(n))]
        start = next((x for s in rows for x, d in zip(s.template, s.step, strict=True)
                      if d == 1), None)
        if start is None:  # the loop counts as the user's does: for t in range(1, n)
            start = next((first for step, first in region.counters if step == 1), None)
        uses_var = bool(rows) or bool(region.counters) or split is not None
        var = self._loop_var(user_var) if uses_var else "_"
        graph = _rows_at(graph, var, start or 0)
        if buffers and split is not None:
            graph = _copied_rows(graph, n_carry, {graph.inputs[c] for c in buffers})
        info = _Forward(var, start or 0, carries, sources, invariants)
        names = {c: carries[c] for c in range(n_carry)}
        for s, sl in enumerate(region.slices):
            names[n_carry + s] = self._slice_text(sources[s], sl, info)
        for i, name in enumerate(invariants):
            names[n_carry + n_slice + i] = name
        for i in range(region.n_outer, len(body_inputs)):
            names[i] = self._counter_text(region, i, info)
        graph = self._hoist_products(graph, region, node.inputs[n_carry:n_carry + n_slice],
                                     info, names, lines)
        preset = _fixed_names(graph, [(c, carries[c], graph.inputs[c])
                                      for c in range(n_carry)])
        owned = frozenset(graph.inputs[c] for c in buffers)
        emitted = self._body(graph, names, preset, {}, owned)
        end: list[str] = []
        after: list[str] = []
        if split is not None:  # lists for what the backward loop reads, named after it
            # A carry's list holds its value before the first trip and after each one, so
            # the backward reads a trip's carry at [t] and what the trip made of it at [t + 1];
            # when it reads only the latter, the list starts empty and it reads them at [t]
            # (an index computed per trip and a value saved for nothing are gone).
            # (read from the outputs: the body may have been rewritten, its nodes are new)
            next_values = {graph.outputs[c].node: c for c in range(n_carry)}
            saved = [r.node for r in graph.outputs[n_carry:]]
            for c in range(n_carry):
                read = any(kind == "body" and i == c for kind, i in split.sources)
                if read or any(next_values.get(v) == c for v in saved):
                    # a buffer written in place is saved as a copy of each trip's version
                    kept = f"{carries[c]}.copy()" if c in buffers else carries[c]
                    info.saved_carries[c] = self.namer.fresh(f"{carries[c]}_saved")
                    lines.append(f"{info.saved_carries[c]} = [{kept if read else ''}]")
                    after.append(f"{info.saved_carries[c]}.append({kept})")
                    if not read:
                        info.after_only.add(c)
            for r, value in enumerate(saved):
                if value in next_values:
                    info.saved.append(None)
                    info.next_of[r] = next_values[value]
                    continue
                text = emitted.results[n_carry + r]
                base = text if text.isidentifier() else value.name or "value"
                info.saved.append(self.namer.fresh(f"{base}_saved"))
                lines.append(f"{info.saved[-1]} = []")
                end.append(f"{info.saved[-1]}.append({text})")
        end += self._updates(carries, emitted.results[:n_carry]) + after
        lines += self._loop(var, info.start, region.trips, emitted.lines + end, reverse=False)
        self.forward[node] = info
        self.results[node] = carries
        return lines, emitted.guards * region.trips

    @staticmethod
    def _counter_text(region: Region, i: int, info: _Forward) -> str:
        step, first = region.counters[i - region.n_outer]
        return _affine(info.var, step, first - step * info.start)

    def _hoist_products(self, graph: Graph, region: Region, sources: list[Ref],
                        info: _Forward, names: dict[int, str], lines: list[str]) -> Graph:
        """``U @ xs[t]`` in the forward body as one product before the loop, ``U_xs = xs @
        U.T``, of which each trip reads its row."""
        n_carry, n_slice = region.n_carry, region.n_slice
        rows = {n_carry + s: text for s in range(n_slice) if (text := self._rows_text(
            region, s, info.sources[s], sources[s].aval.shape)) is not None}
        weights = set(range(n_carry + n_slice, len(region.body.inputs)))
        graph, products = hoist_row_products(graph, set(rows), weights)
        at = _affine(info.var, 1, -info.start)
        for p in products:
            weight, source = names[p.weight], info.sources[p.rows - n_carry]
            if p.row_first:
                name, text = f"{source}_{weight}", f"{rows[p.rows]} @ {weight}"
            else:  # W @ x for each row x: the rows times W transposed (a vector needs no .T)
                matrix = graph.inputs[p.weight].aval.ndim == 2
                name = f"{weight}_{source}"
                text = f"{rows[p.rows]} @ {weight}{'.T' if matrix else ''}"
            name = self.namer.fresh(name)
            lines.append(f"{name} = {text}")
            names[p.input] = f"{name}[{at}]"
        return graph

    def _rows_text(self, region: Region, s: int, source: str, shape: tuple) -> str | None:
        """The rows the loop's slice ``s`` reads, one per trip, as one 2-D array: ``xs``
        itself, or ``xs[1:201]``; None when the slice is not a row per trip."""
        sl = region.slices[s]
        first, *rest = sl.template
        if (sl.step[0] != 1 or any(sl.step[1:]) or type(first) is not int or first < 0
                or any(item != slice(None) for item in rest) or len(shape) != 2):
            return None
        end = first + region.trips
        if end == shape[0]:
            return f"{source}[{first}:]" if first else source
        return f"{source}[{first}:{end}]"

    def _slice_text(self, source: str, sl, info: _Forward) -> str:
        items = tuple(_Raw(_affine(info.var, d, x - d * info.start)) if d else x
                      for x, d in zip(sl.template, sl.step, strict=True))
        return f"{source}[{index_text(items)}]"

    @staticmethod
    def _updates(variables: list[str], texts: list[str]) -> list[str]:
        pending = [(v, t) for v, t in zip(variables, texts, strict=True) if v != t]
        if not pending:
            return []
        if len(pending) == 1:
            return [f"{pending[0][0]} = {pending[0][1]}"]
        return [f"{', '.join(v for v, _ in pending)} = {', '.join(t for _, t in pending)}"]

    # --- the backward loop ------------------------------------------------------------------

    def _backward(self, node: Node, args, position: int):
        plan: BackwardPlan = node.attrs["plan"]
        region = plan.region
        split = split_plan(plan)
        info = self.forward[node.inputs[0].node]
        n_in = region.n_outer
        n_carry, n_slice = region.n_carry, region.n_slice
        lines = self._comment(region, "  (backward)")
        cot_args = args[1 + n_in:]
        adjoints: dict[int, str] = {}
        graph = _rows_at(split.backward, info.var, info.start)
        adjoint_in = {i: graph.inputs[b] for b, (kind, i) in enumerate(split.sources)
                      if kind == "adjoint"}
        buffers: set[int] = set()  # carries whose adjoint the body writes rows of
        written_into = {n.inputs[0].node for n in graph.nodes if n.op.extra.get("statement")}
        for j, c in enumerate(plan.carries):
            written = j in adjoint_in and adjoint_in[j] in written_into
            if written:
                buffers.add(c)
            adjoints[c] = self._carry_var(f"grad_{info.carries[c]}", cot_args[j],
                                          node.inputs[1 + n_in + j].node, node, position,
                                          lines, written)
        saved_at = _affine(info.var, 1, -info.start)
        next_at = _affine(info.var, 1, 1 - info.start)
        names: dict[int, str] = {}
        for b, (kind, i) in enumerate(split.sources):
            if kind == "adjoint":
                names[b] = adjoints[plan.carries[i]]
            elif kind == "saved" and i in info.next_of:
                c = info.next_of[i]
                at = saved_at if c in info.after_only else next_at
                names[b] = f"{info.saved_carries[c]}[{at}]"
            elif kind == "saved":
                names[b] = f"{info.saved[i]}[{saved_at}]"
            elif i >= n_in:
                names[b] = self._counter_text(region, i, info)
            elif i < n_carry:
                names[b] = f"{info.saved_carries[i]}[{saved_at}]"
            elif i < n_carry + n_slice:
                names[b] = self._slice_text(info.sources[i - n_carry],
                                            region.slices[i - n_carry], info)
            else:
                names[b] = info.invariants[i - n_carry - n_slice]
        outputs = self._outputs_of(node)
        accumulated = [plan.wrt.index(i) for i in plan.targets if region.kind(i) == "invariant"]
        stackable = {b for b in range(len(split.sources))
                     if self._stack_text(Operand("input", b), split, info, node) is not None}
        graph = self._hoist(graph, stackable, split, info, node, names, lines)
        row_targets = [plan.wrt.index(i) for i in plan.targets if region.kind(i) == "slice"
                       and self._rows_of(node, i) is not None]
        weights = {b for b, (kind, i) in enumerate(split.sources)
                   if kind == "body" and region.kind(i) == "invariant"}
        batched = batch_sums(graph, accumulated, stackable, row_targets, weights)
        graph = batched.body if batched is not None else graph
        sums = batched.sums if batched is not None else {}
        targets: dict[int, str] = {}  # wrt position -> accumulator text
        totals: dict[int, str] = {}  # wrt position -> a batched total, made after the loop
        results: list[str] = []
        for j, i in enumerate(plan.targets):
            if i < n_carry:
                results.append(adjoints[i])
                continue
            wanted = self.wanted_names.get(outputs.get(j)) if outputs.get(j) else None
            k = plan.wrt.index(i)
            if region.kind(i) == "slice":
                source = info.sources[i - n_carry]
                total = self.namer.fresh(wanted or f"grad_{source}")
                rows = self._rows_of(node, i, total) if k in sums else None
                if rows == total:  # every row is one trip's: the product is the gradient
                    totals[k] = total
                else:
                    lines.append(f"{total} = np.zeros_like({source})")
                    if k in sums:
                        totals[k] = rows  # grad_xs[1:] = ...
                    else:
                        targets[k] = self._slice_text(total, region.slices[i - n_carry], info)
            else:
                inv = info.invariants[i - n_carry - n_slice]
                total = self.namer.fresh(wanted or f"grad_{inv}")
                if k in sums:
                    totals[k] = total
                else:
                    lines.append(f"{total} = {_zero_text(node.inputs[1 + i].node, inv)}")
                    targets[k] = total
            results.append(total)
        carry_pairs = [(plan.wrt.index(c), adjoints[c]) for c in plan.carries]
        old = {plan.carries[i]: graph.inputs[b] for b, (kind, i) in enumerate(split.sources)
               if kind == "adjoint"}
        carried = [(k, name, old.get(c)) for (k, name), c in
                   zip(carry_pairs, plan.carries, strict=True)]
        graph = _old_reads_first(graph, carried)
        preset = _fixed_names(graph, carried)
        accumulate = {}
        reads = _last_reads(graph)
        output_nodes = [r.node for r in graph.outputs]
        for k, text in targets.items():
            out = output_nodes[k]
            if (_is_statement(out) and out not in reads and out not in preset
                    and out not in accumulate and output_nodes.count(out) == 1):
                accumulate[out] = text
        # the loop variable is taken before the body is written: loops inside must not use it
        var = self._loop_var(info.var) if info.var != "_" else "_"
        if var != info.var:
            raise AssertionError("a backward loop reuses its forward loop's variable")
        owned = frozenset(adjoint_in[j] for j, c in enumerate(plan.carries) if c in buffers)
        emitted = self._body(graph, names, preset, accumulate, owned)
        end = [f"{text} += {emitted.results[k]}" for k, text in targets.items()
               if output_nodes[k] not in accumulate]
        after: list[str] = []
        if batched is not None:
            rows = self._stored_rows(batched, emitted.results, info, region.trips, lines, end)
            after += self._sums(totals, sums, split, info, node, rows)
        end += self._updates([a for _, a in carry_pairs],
                             [emitted.results[k] for k, _ in carry_pairs])
        lines += self._loop(var, info.start, region.trips, emitted.lines + end, reverse=True)
        lines += after
        self.results[node] = results
        return lines, emitted.guards * region.trips

    def _hoist(self, graph: Graph, stackable: set[int], split: _Split, info: _Forward,
               node: Node, names: dict[int, str], lines: list[str]) -> Graph:
        """The backward body's elementwise functions of forward values (``1.0 - h * h``)
        computed for every trip at once before the loop (loops/batch.py): one array op in
        place of one per trip; each trip reads its row. Returns the body left in the loop."""
        hoisted = hoist_elementwise(graph, stackable, node.attrs["plan"].region.trips)
        if hoisted is None:
            return graph
        before = hoisted.before
        inputs = {j: self._stack_text(Operand("input", b), split, info, node, lines=lines)
                  for j, b in enumerate(hoisted.stacked)}
        # an unnamed value (a row a buffer's trip wrote) is named after the variable it is in
        held = Held(before.nodes, {n: base for n, text in zip(before.inputs, inputs.values(),
                                                             strict=True)
                                   if n.name is None and (base := _stacked_base(text))})
        preset = {r.node: self.namer.fresh(held_name(r.node, held) or "rows")
                  for r in before.outputs}
        emitted = self._body(before, inputs, preset, {}, all_trips=True)
        lines += emitted.lines
        at = _affine(info.var, 1, -info.start)
        for k, ref in enumerate(before.outputs):
            names[len(graph.inputs) + k] = f"{preset[ref.node]}[{at}]"
        return hoisted.body

    def _rows_of(self, node: Node, i: int, source: str | None = None) -> str | None:
        """The rows loop input ``i`` (a slice) takes, one per trip, in ``source`` (by default
        the sliced variable): ``xs``, ``xs[1:]``; None when it is not a row per trip."""
        region = node.attrs["plan"].region
        s = i - region.n_carry
        info = self.forward[node.inputs[0].node]
        return self._rows_text(region, s, source or info.sources[s],
                               node.inputs[1 + i].aval.shape)

    def _stored_rows(self, batched: Batched, results: list[str], info: _Forward, trips: int,
                     lines: list[str], end: list[str]) -> list[str]:
        """The arrays a backward loop fills, one row per trip, with what each trip stores in
        them (``grad_h_parts[t] = grad_h_part``); returns their names."""
        names = []
        first = len(batched.body.outputs) - len(batched.stored)
        at = _affine(info.var, 1, -info.start)
        for s, ref in enumerate(batched.stored):
            text = results[first + s]
            name = self.namer.fresh(_rows_name(text))
            aval = ref.aval
            dtype = "" if aval.dtype == np.float64 else f", dtype=np.{aval.dtype.name}"
            shape = f"({', '.join(str(d) for d in (trips, *aval.shape))})" if aval.shape else trips
            lines.append(f"{name} = np.empty({shape}{dtype})")
            end.append(f"{name}[{at}] = {text}")
            names.append(name)
        return names

    def _sums(self, totals: dict[int, str], sums: dict, split: _Split, info: _Forward,
              node: Node, rows: list[str]) -> list[str]:
        """The batched totals after the loop: ``grad_W = grad_h_parts.T @ h_rows``,
        ``grad_w = grad_errs @ X``, ``grad_b = grad_h_parts.sum(axis=0)``. A forward list
        that two of them read as an array (h's states, for W_z and W_h) is made one once."""
        lines = []
        uses = Counter(o for k in totals for o in sums[k].operands)
        stacks: dict[Operand, str] = {}
        for o in uses:
            text = self._stack_text(o, split, info, node, rows)
            if uses[o] > 1 and text.startswith("np.array("):
                base = text.removeprefix("np.array(").partition("[")[0].rstrip(")")
                name = self.namer.fresh(f"{base.removesuffix('_saved')}_rows")
                lines.append(f"{name} = {text}")
                text = name
            stacks[o] = text
        for k, total in totals.items():
            sum_ = sums[k]
            if sum_.rows is not None:
                lines.append(f"{total} = {stacks[sum_.rows]}.sum(axis=0)")
                continue
            terms = [f"{stacks[p.left]} @ {stacks[p.right]}" if p.scaled
                     else f"{stacks[p.left]}.T @ {stacks[p.right]}" for p in sum_.products]
            lines.append(f"{total} = {' + '.join(terms)}")
        return lines

    def _stack_text(self, operand: Operand, split: _Split, info: _Forward, node: Node,
                    rows: list[str] | None = None, lines: list[str] | None = None
                    ) -> str | None:
        """A batched sum's operand stacked over the trips, one row per trip: an array the
        backward loop filled, or what the forward keeps of a body input (its list as an
        array, or the rows of an input the loop slices). None: not kept whole anywhere.
        With ``lines``, a list is made an array once, there (``h_rows = np.array(h_saved)``),
        and every later stack of it reads that array."""
        if operand.kind == "stored":
            return rows[operand.index]
        region = node.attrs["plan"].region
        source, i = split.sources[operand.index]
        if operand.kind == "weight":
            return info.invariants[i - region.n_carry - region.n_slice]
        if source == "saved" and i in info.next_of:
            c = info.next_of[i]
            return self._stacked(info.saved_carries[c], "" if c in info.after_only else "[1:]",
                                 lines)
        if source == "saved":
            return self._stacked(info.saved[i], "", lines)
        if source != "body" or region.kind(i) in ("invariant", "counter"):
            return None  # a counter (loops/region.py) is a number per trip, not a kept row
        if i < region.n_carry:
            return self._stacked(info.saved_carries[i], "[:-1]", lines)
        s = i - region.n_carry
        return self._rows_text(region, s, info.sources[s], node.inputs[1 + i].aval.shape)

    def _stacked(self, saved: str, part: str, lines: list[str] | None) -> str:
        """The list ``saved`` (``part`` of it: ``[1:]``) as one array, one row per trip."""
        arrays = self.arrays
        if saved not in arrays and lines is not None:
            arrays[saved] = self.namer.fresh(f"{saved.removesuffix('_saved')}_rows")
            lines.append(f"{arrays[saved]} = np.array({saved})")
        if saved in arrays:
            return f"{arrays[saved]}{part}"
        return f"np.array({saved}{part})"

    def _loop(self, var: str, start: int, trips: int, body: list[str], reverse: bool):
        """``for var in range(...)`` (or ``reversed(range(...))``) over ``body``; the
        variable is free again after the loop."""
        span = f"range({start}, {start + trips})" if start else f"range({trips})"
        header = f"for {var} in reversed({span}):" if reverse else f"for {var} in {span}:"
        if var != "_":
            self._free_vars().add(var)
        return [header, *_indented(body)]

    def _outputs_of(self, node: Node) -> dict[int, Node]:
        return {out.attrs["index"]: out for out in self.wanted_names
                if out.inputs[0].node is node}


_ROWS_PART = re.compile(r"(\w+)\[(1)?:(-1)?\]")  # what _stacked reads: h_rows[1:], h_rows[:-1]


def _stacked_base(text: str) -> str | None:
    """The variable a stack of rows holds the values of: ``h`` for ``h_rows[1:]``."""
    match = re.fullmatch(r"(\w+?)_rows(\[[^\]]*\])?", text)
    return match[1] if match else text if text.isidentifier() else None


class _Raw(str):
    """An index item printed as it is (the loop variable's expression)."""

    __slots__ = ()
