"""The loop region: one body graph run ``trips`` times, its ops, and its reverse mode.

A ``loop`` node reads ``[carry inits..., sliced arrays..., invariants...]``. Iteration ``k``
runs the body on the carries, one slice of each sliced array (``xs[t]``, the index affine in
``k``) and the invariants, and its outputs are the next carries; the node's value is the
tuple of final carries, read through ``loop_out`` nodes (one per carry, so every edge of the
graph stays a single value). Reverse mode of a ``loop`` is a ``loop_bwd`` node: the same
iterations backwards over the body's own joint graph, carrying the adjoints of the carries
and adding up the gradients of the slices and invariants. Both are ordinary nodes to the
optimizer; the emitter prints them as ``for`` statements (loops/emit.py). Inside a body, an
integer index item may move with the trip (``Moving``: ``h[t] = v`` into a carried buffer),
and the last body inputs may be counters the loop feeds itself (``dt * t``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..abstract import concrete, evaluate
from ..ir import Graph, Node
from ..ops import OPS
from ..ops.index import real_index
from ..ops.registry import Expr, defop
from ..optimize import optimize
from ..source import SourceLoc
from ..symbolic import symbolic_values
from ..tracer import Tracer


@dataclass(frozen=True)
class Slice:
    """``source[index]`` read once per iteration: the index template of iteration 0 and, per
    item, how much an integer item grows each iteration (0 for fixed items)."""

    template: tuple
    step: tuple

    def at(self, k: int) -> tuple:
        return tuple(item + d * k if d else item for item, d in zip(self.template, self.step,
                                                                    strict=True))


class Moving(int):
    """An index item that moves with the loop counter, in a body node that reads or writes a
    row of a value the loop carries (``h[t] = ...``, ``h[t - 1]``): the int is its value on
    the first trip, ``step`` what it grows by per trip. It equals only a Moving of the same
    value and step (a pass that compares rows must not take it for a fixed row; the passes
    that reason about rows ask ``type(i) is int`` and leave it alone)."""

    step: int

    def __new__(cls, value: int, step: int):
        item = int.__new__(cls, value)
        item.step = step
        return item

    def at(self, k: int) -> int:
        return int(self) + self.step * k

    def __eq__(self, other) -> bool:
        return type(other) is Moving and int(self) == int(other) and self.step == other.step

    def __ne__(self, other) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(("moving", int(self), self.step))

    def __repr__(self) -> str:  # the trace listing's index=(k + 1,): k counts the trips
        head = "k" if self.step == 1 else f"{self.step}*k"
        return head if int(self) == 0 else f"{head}{int(self):+d}".replace("+", " + ").replace(
            "-", " - ")

    def __reduce__(self):
        return (Moving, (int(self), self.step))


def attrs_at(attrs: dict, k: int) -> dict:
    """A body node's attributes on trip ``k``: its moving index items made plain ints."""
    index = attrs.get("index")
    if type(index) is not tuple or not any(type(i) is Moving for i in index):
        return attrs
    return {**attrs, "index": tuple(i.at(k) if type(i) is Moving else i for i in index)}


def has_moving(node: Node) -> bool:
    index = node.attrs.get("index")  # (a loop_out's index is an int)
    return type(index) is tuple and any(type(i) is Moving for i in index)


@dataclass(eq=False)
class Region:
    """What a loop node runs: ``body`` (inputs carries, slices, invariants; outputs the next
    carries), ``trips`` times. ``header`` is the loop's source line, ``var`` the user's loop
    variable, when the source shows one."""

    body: Graph
    trips: int
    n_carry: int
    slices: tuple[Slice, ...]
    header: SourceLoc | None = None
    var: str | None = None
    signature: tuple = ()
    # (step, first): Python ints the body reads that count with the trips (``dt * t``): the
    # last body inputs, after the ones the loop node feeds
    counters: tuple[tuple[int, int], ...] = ()
    _plans: dict = field(default_factory=dict)

    @property
    def n_slice(self) -> int:
        return len(self.slices)

    @property
    def n_outer(self) -> int:
        """How many inputs the loop node has: the body's, but the counters."""
        return len(self.body.inputs) - len(self.counters)

    def kind(self, i: int) -> str:
        """What body input ``i`` is: 'carry', 'slice', 'invariant' or 'counter'."""
        if i < self.n_carry:
            return "carry"
        if i >= self.n_outer:
            return "counter"
        return "slice" if i < self.n_carry + self.n_slice else "invariant"

    @property
    def has_guards(self) -> bool:
        return any(n.op.name == "guard" or n.attrs.get("guarded") for n in self.body.nodes)

    def inputs_at(self, k: int, carries, outer) -> list:
        sources = outer[self.n_carry:self.n_carry + self.n_slice]
        sliced = [src[real_index(s.at(k))] for src, s in zip(sources, self.slices,
                                                                strict=True)]
        counted = [first + step * k for step, first in self.counters]
        return [*carries, *sliced, *outer[self.n_carry + self.n_slice:self.n_outer], *counted]

    def backward_plan(self, wrt: tuple[int, ...], reverse) -> BackwardPlan:
        """The reverse of the body for ``wrt``, made once; ``reverse`` is reverse.reverse."""
        plan = self._plans.get(wrt)
        if plan is None:
            plan = self._plans[wrt] = _backward_plan(self, wrt, reverse)
        return plan

    def __repr__(self) -> str:
        return f"<loop of {self.trips} trips>"


@dataclass(eq=False)
class BackwardPlan:
    """The reverse of one region for one set of differentiated inputs: ``joint`` is the body's
    optimized joint graph, inputs ``[body inputs..., adjoints of the float carries...]``,
    outputs ``[next carries..., gradient per ``wrt`` input...]``."""

    region: Region
    joint: Graph
    carries: tuple[int, ...]  # float carries: the ones with an adjoint
    wrt: tuple[int, ...]  # body inputs whose gradients ``joint`` computes, in output order
    targets: tuple[int, ...]  # loop inputs the loop_bwd node returns gradients for

    def __repr__(self) -> str:
        return f"<reverse of {self.region!r}>"


# --- evaluation: run a body graph on values (build-time values, never the emitted code) -----


def run_graph(graph: Graph, inputs: list, k: int = 0) -> list:
    """Evaluate ``graph`` on concrete input values, as trip ``k`` of its loop (the moving
    index items at their values on that trip); returns its output values."""
    env = evaluate(graph.nodes, dict(zip(graph.inputs, inputs, strict=True)),
                   lambda node: attrs_at(node.attrs, k))
    return [env[r.node] for r in graph.outputs]


def _loop_impl(*outer, region: Region, guarded: bool = False):
    carries = list(outer[:region.n_carry])
    for k in range(region.trips):
        carries = run_graph(region.body, region.inputs_at(k, carries, outer), k)
    return tuple(carries)


def _loop_bwd_impl(_final, *rest, plan: BackwardPlan):
    region = plan.region
    n_in = region.n_outer
    outer, cotangents = rest[:n_in], list(rest[n_in:])
    carries = list(outer[:region.n_carry])
    history = []
    for k in range(region.trips):
        history.append(carries)
        carries = run_graph(region.body, region.inputs_at(k, carries, outer), k)
    adjoints = {c: cotangents[c] for c in plan.carries}
    totals: dict[int, object] = {}
    n_carry = region.n_carry
    for k in reversed(range(region.trips)):
        ins = region.inputs_at(k, history[k], outer) + [adjoints[c] for c in plan.carries]
        grads = run_graph(plan.joint, ins, k)[n_carry:]
        for i, g in zip(plan.wrt, grads, strict=True):
            if i < n_carry:
                adjoints[i] = g
            elif region.kind(i) == "slice":
                s = region.slices[i - n_carry]
                total = totals.get(i)
                if total is None:
                    total = totals[i] = np.zeros(np.shape(outer[i]), np.result_type(outer[i]))
                total[real_index(s.at(k))] += g
            else:
                totals[i] = g if i not in totals else totals[i] + g
    result = []
    for i in plan.targets:
        if i < n_carry:
            result.append(adjoints[i])
        elif i in totals:
            result.append(totals[i])
        else:
            result.append(np.zeros_like(outer[i]))
    return tuple(result)


def _loop_sympy(*outer, region: Region, guarded: bool = False):
    carries = list(outer[:region.n_carry])
    body = region.body
    for k in range(region.trips):
        ins = region.inputs_at(k, carries, outer)
        env = symbolic_values(body, dict(zip(body.inputs, ins, strict=True)),
                              lambda node, _k=k: attrs_at(node.attrs, _k))
        carries = [env[r.node] for r in body.outputs]
    return tuple(carries)


def _no_printer(node, args):  # loops/emit.py prints regions as statements
    return Expr(f"<{node.op.name}>")


def _show_region(attrs) -> str:
    region = attrs.get("region") or attrs["plan"].region
    where = f" from {region.header}" if region.header else ""
    return f"{region.trips} trips{where}"


loop = defop("loop", _loop_impl, _no_printer, vjp=(), sympy=_loop_sympy,
             extra={"region": True, "structural": True, "show_attrs": _show_region})
loop_bwd = defop("loop_bwd", _loop_bwd_impl, _no_printer, vjp=None, nondiff=True,
                 extra={"region": True, "show_attrs": _show_region})
loop_out = defop("loop_out", lambda value, index: value[index], _no_printer, vjp=(),
                 sympy=lambda value, index: value[index],
                 extra={"show_attrs": lambda attrs: f"output {attrs['index']}"})


# --- reverse mode ------------------------------------------------------------------------------


def _backward_plan(region: Region, wrt: tuple[int, ...], reverse) -> BackwardPlan:
    body = region.body
    values = dict(body.meta["values"])
    carries = tuple(c for c in range(region.n_carry) if body.outputs[c].aval.is_float)
    cotangents = []
    for c in carries:
        aval = body.outputs[c].aval
        name = body.inputs[c].name
        node = Node(OPS["input"], (), {"index": len(body.inputs) + len(cotangents)}, (aval,),
                    None, f"grad_{name}" if name else None, "input")
        values[node] = aval.py(1) if aval.py is not None else np.ones(aval.shape, aval.dtype)[()]
        cotangents.append(node)
    graph = Graph([*cotangents, *body.nodes], [*body.inputs, *cotangents], list(body.outputs),
                  dict(body.meta, values=values))
    joint = reverse(graph, wrt, [c for c in carries], [n.out for n in cotangents])
    # reverse returns [float carry outputs..., grads]: put every next carry back in front
    joint = joint.with_nodes(joint.nodes, [*body.outputs, *joint.outputs[len(carries):]])
    joint = optimize(joint)
    return BackwardPlan(region, joint, carries, wrt, ())


def pull_back_loop(trace, node: Node, cotangents: dict, needed, contributions,
                   reverse) -> None:
    """Reverse mode of one loop node: a loop_bwd node and its gradients, one ``loop_out``
    per loop input that needs one, added to ``contributions`` like any rule's. The body's
    backward is made by ``reverse`` (reverse.reverse, which calls this: handed down)."""
    region: Region = node.attrs["region"]
    body = region.body
    targets = tuple(i for i, r in enumerate(node.inputs)
                    if r.node in needed and r.aval.is_float)
    if not targets:
        return
    wrt = tuple(sorted({c for c in range(region.n_carry) if body.inputs[c].aval.is_float}
                       | set(targets)))
    base = region.backward_plan(wrt, reverse)
    plan = BackwardPlan(region, base.joint, base.carries, base.wrt, targets)
    cots = []
    for c in plan.carries:
        g = cotangents.get(c)
        if g is None:
            aval = body.outputs[c].aval
            zero = aval.py(0) if aval.py is not None else np.zeros(aval.shape, aval.dtype)[()]
            g = Tracer(trace, trace.const(zero), zero)
        elif not isinstance(g, Tracer):
            g = Tracer(trace, trace.const(g), g)
        cots.append(g)
    values = trace.values
    refs = [node.out, *node.inputs, *(g.ref for g in cots)]
    # the backward loop runs here on numbers (abstract.py's lazy values are computed now)
    value = _loop_bwd_impl(None, *(concrete(values, r) for r in node.inputs),
                           *(g.value for g in cots), plan=plan)
    avals = tuple(node.inputs[i].aval for i in targets)
    bwd = trace.add(loop_bwd, refs, {"plan": plan}, avals)
    values[bwd] = value
    for j, i in enumerate(targets):
        out = trace.add(loop_out, (bwd.out,), {"index": j}, (avals[j],))
        values[out] = value[j]
        contributions.setdefault(node.inputs[i], []).append(
            (node.serial, Tracer(trace, out.out, value[j]), node, i))
