"""Find the iterations of Python loops in a traced graph and give each loop back as a region.

Found from the trace alone: a loop shows as a run of nodes that repeats (same op, same source
line, same shapes, same attributes) where each repetition reads only itself, the one before
it (the carried values), values from before the run (invariants), constants equal in every
repetition, and ``xs[t]``-style reads whose integer index moves by a fixed step. A buffer
written row by row (``h[t] = ...``, ``h[t - 1]`` read back) is a carried value whose reads
and writes index a row that moves with the trip (region.Moving); a Python number that
changes every trip is the counter itself (``dt * t``), a formula of it (``0.99 ** t``) or a
table of the traced numbers. Anything else (a branch on some iterations, a value kept from
two iterations back, a value of an early iteration read after the loop) ends the run there:
what cannot be rolled stays unrolled, so rolling never changes what is computed. (Lists
stacked or summed after the loop are moved into it first: gather.py.)
"""

from __future__ import annotations

import ast
import functools
import linecache
from collections import Counter
from dataclasses import dataclass
from itertools import compress, repeat
from operator import attrgetter, is_

import numpy as np

from ..abstract import Pending, concrete
from ..ir import Aval, Graph, Node, Ref, aval_of, readers_of
from ..ops import OPS
from ..optimize.dce import dce
from ..peephole import hashable as _hashable
from ..source import SourceLoc
from .gather import gather_into_trips
from .region import Moving, Region, Slice, loop, loop_out

MIN_TRIPS = 16  # shorter runs stay unrolled (straight-line code is as fast and reads well)
# A run of fewer than ALWAYS_ROLL trips of scalar code is unrolled while the unrolled code
# stays within UNROLL_OPS operations: one Python statement per operation runs faster than a
# loop that keeps each trip's values in lists and reads them back (models.scalar_loop, 20
# trips of 10 ops: 1.0x hand-written unrolled, 1.3x rolled), and the bound keeps the first
# call's cost (which grows with the unrolled ops) near the rolled loop's. Loops over arrays
# stay loops: their backward batches the weights' gradients (loops/batch.py), as fast.
ALWAYS_ROLL = 100
UNROLL_OPS = 500
_FREE = ("input", "const")
_FREE_OPS = frozenset(OPS[name] for name in _FREE)
_LOC, _LINE, _OP = attrgetter("loc"), attrgetter("line"), attrgetter("op")


def _output_value(values, ref: Ref):
    """Output ``ref.index`` of a node's value, as ``values`` holds it (maybe Pending)."""
    value = values[ref.node]
    if ref.node.op.n_out > 1 and type(value) is not Pending:
        return value[ref.index]
    if type(value) is Pending:
        return Pending((value.arrays[ref.index],), (value.views[ref.index],))
    return value


def roll_loops(graph: Graph, values: dict) -> Graph:
    """``graph`` with every run of at least MIN_TRIPS uniform iterations replaced by a loop
    node; repeated so that a loop whose iterations are loops rolls too."""
    if not _may_repeat(graph.nodes):
        return graph  # (nor would it after gather: the trips' own ops do not repeat)
    if any(n.op.extra.get("statement") for n in graph.nodes):
        # ``prev = h[t]`` is read again after every later write into h (a view follows its
        # array); the reads nobody uses would make the first trip look unlike the others
        graph, _ = dce(graph)
    gathered = gather_into_trips(graph, values)
    if gathered is not None:  # np.stack(hs), sum(losses) after the loop: moved into it
        rolled = _roll(gathered[0], values)
        if not gathered[1].intersection(rolled.nodes):
            return rolled  # (kept only when every moved node went into a loop)
    return _roll(graph, values)


def _roll(graph: Graph, values: dict) -> Graph:
    for _ in range(8):
        nodes, outputs, changed = _roll_once(graph.nodes, graph.outputs, values)
        if not changed:
            break
        graph = graph.with_nodes(nodes, outputs)
    return graph


def _key(node: Node):
    op = node.op.name
    loc = node.loc
    attrs = node.attrs
    if _row_op(node):
        attrs_key = tuple("int" if type(i) is int else _hashable(i) for i in attrs["index"])
    elif op == "loop":
        attrs_key = attrs["region"].signature
    elif not attrs:
        attrs_key = ()
    else:
        try:
            attrs_key = _hashable(attrs)
            hash(attrs_key)
        except TypeError:
            attrs_key = ("unique", node.serial)
    where = (loc.file, loc.line, loc.func) if loc is not None else None
    return (op, where, node.avals, attrs_key, len(node.inputs), node.role)


def _row_op(node: Node) -> bool:
    """A read ``x[i]`` or a write ``a[i] = v`` whose integer items may move trip by trip."""
    name = node.op.name
    return (name == "getitem" and len(node.inputs) == 1
            or name == "index_update" and len(node.inputs) == 2)


def _const_key(node: Node):
    return ("const", node.avals, _hashable(node.attrs["value"]))


@dataclass(eq=False)
class _Plan:
    """A run of ``trips`` uniform iterations found at ``iters``, with how each input slot of
    the body is fed: ("in", position, index), ("carry", position, index), ("out", node,
    index) for an invariant, ("const", key), ("vary", j, s) for a number new every trip, or
    ("each", j, s) for a value from before the loop that each trip takes its own of (``for x
    in xs`` over a list: one argument per trip). ``moving`` holds the body's reads and
    writes of a carried buffer at a row that moves with the trip (``h[t] = ...``)."""

    iters: list[list[Node]]
    trips: int
    classes: list[list[tuple]]
    inits: dict[tuple[int, int], Ref]
    slices: dict[int, Slice]
    hoisted: list[int]
    moving: dict[int, Slice]
    varying: list[tuple[int, int]]
    gathered: list[tuple[int, int]]


class _Trips:
    """The trips of a candidate run, ``seq[start + k * period:start + (k + 1) * period]``
    for k < trips, each cut out when first asked for: a candidate that fails after a few
    trips costs those trips, not the whole run (the search stays linear)."""

    __slots__ = ("_cut", "_period", "_seq", "_start", "trips")

    def __init__(self, seq: list[Node], start: int, period: int, trips: int):
        self._seq, self._start, self._period, self.trips = seq, start, period, trips
        self._cut: dict[int, list[Node]] = {}

    def __len__(self) -> int:
        return self.trips

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(self.trips))]
        if k < 0:
            k += self.trips
        if not 0 <= k < self.trips:
            raise IndexError(k)
        trip = self._cut.get(k)
        if trip is None:
            begin = self._start + k * self._period
            trip = self._cut[k] = self._seq[begin:begin + self._period]
        return trip

    def __iter__(self):
        return (self[k] for k in range(self.trips))


def _roll_once(nodes: list[Node], outputs: list[Ref], values: dict):
    seq = [n for n in nodes if n.op.name not in _FREE]
    if len(seq) < 2 * MIN_TRIPS or not _may_repeat(seq):
        return nodes, outputs, False
    ids: dict = {}
    keys = [ids.setdefault(_key(n), len(ids)) for n in seq]
    following = [-1] * len(keys)
    last: dict[int, int] = {}
    for i in range(len(keys) - 1, -1, -1):
        following[i] = last.get(keys[i], -1)
        last[keys[i]] = i
    users = readers_of(nodes, outputs)
    plans = []
    runs: dict[int, tuple[int, int]] = {}
    i = 0
    while i < len(seq):
        plan, skip = _find_at(seq, keys, following, i, users, runs)
        if plan is None:
            i += skip
            continue
        plans.append(plan)
        i = seq.index(plan.iters[plan.trips - 1][-1], i) + 1
    if not plans:
        return nodes, outputs, False
    new_nodes, new_outputs = _replace(nodes, outputs, values, plans)
    return new_nodes, new_outputs, True


def _repeats(keys, i: int, period: int, runs: dict[int, tuple[int, int]]) -> int:
    """How many times ``keys[i:i + period]`` repeats from i on. ``runs`` remembers, per
    period, the last stretch where every key equals the one a period later: a search that
    moves on inside that stretch does not compare it again."""
    known = runs.get(period)
    if known is not None and known[0] <= i < known[1]:
        stop = known[1]
    else:
        stop, end = i, len(keys) - period
        while stop < end and keys[stop] == keys[stop + period]:
            stop += 1
        runs[period] = (i, stop)
    return 1 + (stop - i) // period


def _may_repeat(nodes: list[Node]) -> bool:
    """Does some op of some source line (inputs and constants aside) occur MIN_TRIPS times?
    A loop of MIN_TRIPS trips repeats each op of its body that often: straight-line code is
    given back after this one count, before any key is built."""
    # A bound first, by C loops: the ops of each line, whatever they are (most functions
    # have no line of MIN_TRIPS ops), and the ops no line placed (inputs and constants aside)
    locs = list(map(_LOC, nodes))
    unplaced = list(compress(map(_OP, nodes), map(is_, locs, repeat(None))))
    if max(Counter(map(_LINE, filter(None, locs))).values(), default=0) < MIN_TRIPS and (
            len(unplaced) - sum(map(_FREE_OPS.__contains__, unplaced)) < MIN_TRIPS):
        return False
    lines = Counter([(n.op.name, n.loc.line if n.loc is not None else 0) for n in nodes
                     if n.op.name not in _FREE])
    return bool(lines) and max(lines.values()) >= MIN_TRIPS


def _find_at(seq, keys, following, i, users, runs) -> tuple[_Plan | None, int]:
    """The loop starting at ``seq[i]``, if any; else how far to move on."""
    j = following[i]
    skip = 1
    for _ in range(4):  # the next occurrences of this op: one of them starts the next trip
        if j == -1:
            break
        period = j - i
        if i + MIN_TRIPS * period > len(keys):
            break
        reps = _repeats(keys, i, period, runs)
        if reps >= MIN_TRIPS and not _unrolls(seq[i:j], reps):
            # Where a trip starts: here, a trip later (the first may differ), or a few ops
            # later (``steps[t]`` read on a later line belongs to the next trip, not to this).
            # The first source line of the body is where a trip most likely starts.
            offsets = sorted(range(min(period, 8)), key=lambda r: (_line(seq[i + r]), r))
            for start in (s for r in offsets for s in (i + r, i + r + period)):
                plan = _plan(_Trips(seq, start, period, reps - (start > i)), users)
                if isinstance(plan, _Plan):
                    return plan, 0
                if isinstance(plan, int):  # the uniform trips ended too soon: look after them
                    skip = max(skip, start - i + plan * period)
            skip = max(skip, period)
        j = following[j]
    return None, skip


def _plan(iters: list[list[Node]], users) -> _Plan | int | None:
    """The loop these trips make, or, when fewer than MIN_TRIPS of them are uniform, how
    many are (None when the run fails for another reason)."""
    if any(n.op.n_out > 1 or n.op.extra.get("statement") and not _row_op(n)
           for n in iters[0]):
        return None  # np.add.at, out=, ...: their versions stay unrolled
    where: dict[Node, tuple[int, int]] = {}  # trip and place of each node, trips 0..k

    def locate(k: int) -> None:  # trips are placed as the checks reach them
        for j, node in enumerate(iters[k]):
            where[node] = (k, j)

    locate(0)
    locate(1)

    def classify(k: int, ref: Ref) -> tuple:
        node = ref.node
        if node.op.name == "const":
            return ("const", _const_key(node))
        kj = where.get(node)
        if kj is None:
            return ("out", node, ref.index)
        if kj[0] == k:
            return ("in", kj[1], ref.index)
        if kj[0] == k - 1:
            return ("carry", kj[1], ref.index)
        return ("far",)

    classes = [[classify(1, r) for r in n.inputs] for n in iters[1]]
    if any(c[0] == "far" for cl in classes for c in cl):
        return None
    valid = len(iters)
    varying: set[tuple[int, int]] = set()  # dt * t, gamma ** t: a number new every trip
    for j, node in enumerate(iters[1]):
        for s, c in enumerate(classes[j]):
            if c[0] == "const" and type(node.inputs[s].node.attrs["value"]) in (int, float):
                run = _const_run(iters, j, s)
                numbers = [trip[j].inputs[s].node.attrs["value"] for trip in iters[:run]]
                if len(set(numbers)) > 1 and (_per_trip_number(node, s)
                                              or _counter(numbers) is not None
                                              or _formula(numbers) is not None):
                    varying.add((j, s))
                    classes[j][s] = ("vary", j, s)
                    valid = min(valid, run)
    gathered: set[tuple[int, int]] = set()  # for x in xs: each trip's own outside value
    for j, (a, b) in enumerate(zip(iters[0], iters[1], strict=True)):
        for s, (c, ref) in enumerate(zip(classes[j], b.inputs, strict=True)):
            # (NumPy values only: a row of a stack of Python floats would be a NumPy float)
            if c[0] == "out" and not _row_op(b) and ref.aval.py is None:
                before = classify(0, a.inputs[s])
                if before[0] == "out" and before != c and a.inputs[s].aval == ref.aval:
                    gathered.add((j, s))
                    classes[j][s] = ("each", j, s)
    slices: dict[int, Slice] = {}  # xs[t] of a value from before the loop: a body input
    moving: dict[int, Slice] = {}  # h[t] = ..., h[t - 1] of a carried buffer: in the body
    for j, (a, b) in enumerate(zip(iters[0], iters[1], strict=True)):
        if _row_op(a) and a.attrs != b.attrs:
            template = a.attrs["index"]
            step = tuple(y - x if type(x) is int else 0
                         for x, y in zip(template, b.attrs["index"], strict=True))
            if a.op.name == "getitem" and classes[j][0][0] in ("out", "const"):
                slices[j] = Slice(template, step)
            elif classes[j][0][0] in ("in", "carry"):
                moving[j] = Slice(template, step)
            else:
                return None
    reads = {j for j, n in enumerate(iters[0]) if _row_op(n)}
    for s in (*slices.values(), *moving.values()):  # h[t - 1] must not wrap from h[-1] to h[0]
        for x, d in zip(s.template, s.step, strict=True):
            if d > 0 and x < 0:
                valid = min(valid, -(x // d) if x % d else -x // d)
            elif d < 0 and x >= 0:
                valid = min(valid, x // -d + 1)
    for k in range(2, valid):
        locate(k)
        same = True
        for j, node in enumerate(iters[k]):
            expected = classes[j]
            for s, ref in enumerate(node.inputs):
                if classify(k, ref) != expected[s] and (j, s) not in varying and not (
                        (j, s) in gathered and classify(k, ref)[0] == "out"
                        and ref.aval == node.inputs[s].aval == iters[0][j].inputs[s].aval):
                    same = False
                    break
            row = slices.get(j) or moving.get(j)
            if same and j in reads and node.attrs["index"] != (
                    row.at(k) if row is not None else iters[0][j].attrs["index"]):
                same = False
            if not same:
                break
        if not same:
            valid = k
            break
    if valid < MIN_TRIPS:
        return valid
    inits: dict[tuple[int, int], Ref] = {}
    for j, node in enumerate(iters[0]):
        for s, ref in enumerate(node.inputs):
            expected = classes[j][s]
            first = classify(0, ref)
            if expected[0] != "carry":
                if first != expected and expected[0] not in ("vary", "each"):
                    return None
                continue
            if first[0] not in ("out", "const"):
                return None
            key = (expected[1], expected[2])
            if inits.setdefault(key, ref) != ref:
                return None
    carried = {q for q, _ in inits}
    for (q, index), ref in inits.items():
        if q in slices or not _fits(ref.aval, iters[0][q].avals[index]):
            return None
        if moving and iters[0][q].is_view:
            return None  # a row of a buffer carried to the next trip, which writes the buffer
    trips = _rolled_trips(iters, valid, carried, where, users)
    if trips < MIN_TRIPS:
        return None
    if _unrolls(iters[0], trips):
        return trips  # (as if only these were uniform: the search goes on after them)
    hoisted: list[int] = []  # loop-invariant code: computed once, before the loop
    for j, node in enumerate(iters[0]):
        if (j not in slices and j not in moving and j not in carried
                and node.op.name != "guard" and node.avals
                and all(c[0] in ("out", "const") or c[0] == "in" and c[1] in hoisted
                        for c in classes[j])):
            hoisted.append(j)
    return _Plan(iters[:trips], trips, classes, inits, slices, hoisted, moving, sorted(varying),
                 sorted(gathered))


def _per_trip_number(node: Node, s: int) -> bool:
    """May input ``s`` of ``node``, a Python number, become a per-trip input read from a
    float64 array? When NumPy gives the same result either way: an elementwise op whose
    result is a float64 NumPy value (a Python number is weakly typed; a float64 is not, so
    next to float32 arrays it would change the dtype)."""
    value = node.inputs[s].node.attrs["value"]
    aval = node.avals[0] if len(node.avals) == 1 else None
    return (type(value) in (float, int) and node.op.elementwise and aval is not None
            and aval.py is None and aval.dtype == np.float64
            and (type(value) is float or abs(value) < 2**53))


def _counter(numbers: list) -> tuple[int, int] | None:
    """(step, first) when ``numbers`` are the Python ints first, first + step, ...: the loop
    counter, or an affine function of it (``dt * t``, ``x ** (t + 1)``)."""
    if any(type(n) is not int for n in numbers) or len(numbers) < 2:
        return None
    step = numbers[1] - numbers[0]
    return (step, numbers[0]) if all(
        n == numbers[0] + step * k for k, n in enumerate(numbers)) else None


def _formula(numbers: list) -> tuple | None:
    """How Python computed these per-trip floats from a counter ``k + offset``, when one of
    the forms people write gives every one of them bit for bit: ``s * k`` (``dt * t``),
    ``g ** k`` (``gamma ** t``) or ``p * g ** k``. (offset, scale, base) with None for the
    parts a form lacks; None when no form fits (the numbers become a table)."""
    if any(type(n) is not float for n in numbers) or len(numbers) < 3:
        return None
    first, second = numbers[0], numbers[1]
    candidates = []  # the user's constants are short decimals: try those near the ratios
    for offset in (0, 1, 2):
        for scale in _short(second - first):
            candidates.append((offset, scale, None))
        if first != 0.0:
            for base in _short(second / first):
                for scale in _short(first / base**offset):
                    candidates.append((offset, None if scale == 1.0 else scale, base))
    for offset, scale, base in candidates:
        if all(_formula_at(offset, scale, base, k) == n for k, n in enumerate(numbers)):
            return offset, scale, base
    return None


def _short(x: float) -> list[float]:
    return list(dict.fromkeys((x, float(f"{x:.15g}"), float(f"{x:.12g}"))))


def _formula_at(offset, scale, base, k: int) -> float:
    counter = k + offset
    if base is None:
        return scale * counter
    return base**counter if scale is None else scale * base**counter


def _formula_nodes(formula: tuple, counter: Node, loc) -> list[Node]:
    """The body nodes computing ``formula`` from the ``counter`` input, the last one its
    value: ``0.01 * t``, ``0.99 ** t``, ``0.01 * 0.99 ** t``."""
    _, scale, base = formula
    made: list[Node] = []
    float_aval = aval_of(1.0)

    def const(value: float) -> Ref:
        made.append(Node(OPS["const"], (), {"value": value}, (float_aval,), None, None, "const"))
        return made[-1].out

    value = counter.out
    if base is not None:
        made.append(Node(OPS["pow"], (const(base), value), {}, (float_aval,), loc, None, "fwd"))
        value = made[-1].out
    if scale is not None:
        made.append(Node(OPS["mul"], (const(scale), value), {}, (float_aval,), loc, None,
                         "fwd"))
    return made


def _formula_value(node: Node, values: dict):
    if node.op.name == "const":
        return node.attrs["value"]
    return node.op.impl(*(values[r.node] for r in node.inputs))


def _const_run(iters, j: int, s: int) -> int:
    """How many trips from the first have a Python number of one type at input ``s`` of
    their node ``j``."""
    kind = type(iters[1][j].inputs[s].node.attrs["value"])
    for k, trip in enumerate(iters):
        if j >= len(trip) or s >= len(trip[j].inputs):  # (the last trip may run past the run)
            return k
        node = trip[j].inputs[s].node
        if node.op.name != "const" or type(node.attrs["value"]) is not kind:
            return k
    return len(iters)


def _unrolls(trip: list[Node], trips: int) -> bool:
    """Is a run better left unrolled: short, on scalars only, and small once unrolled?"""
    return (trips < ALWAYS_ROLL and trips * len(trip) <= UNROLL_OPS
            and all(aval.shape == () for node in trip for aval in node.avals))


def _line(node: Node) -> int:
    return node.loc.line if node.loc is not None else 0


def _fits(init, carry) -> bool:
    """Can a value of aval ``init`` start a carry of aval ``carry``? The same aval, or a
    Python float or int starting a NumPy float scalar (``total = 0.0`` before ``total +=
    x @ w``, the 0 that ``sum(losses)`` starts from):
    the loop starts from it converted, which gives the same numbers."""
    return init == carry or (init.py in (float, int) and carry.py is None
                             and carry.shape == () and carry.dtype.kind == "f")


def _rolled_trips(iters, valid, carried, where, users) -> int:
    """How many of the ``valid`` iterations can become the loop: every value of a rolled trip
    is read only by that trip or, if carried, by the next one; the last rolled trip's carried
    values may be read anywhere later (they are the loop's results)."""
    far_ok = [True] * valid
    last_ok = [True] * valid
    for k in range(valid):
        for j, node in enumerate(iters[k]):
            for user in users.get(node, ()):
                w = where.get(user) if user is not None else None
                if w is not None and w[0] == k:
                    continue
                if j not in carried:
                    last_ok[k] = False
                if w is None or w[0] != k + 1 or k + 1 >= valid:
                    far_ok[k] = False
    first_bad = next((k for k in range(valid) if not far_ok[k]), valid)
    trips = min(valid, first_bad + 1)
    while trips >= MIN_TRIPS and not last_ok[trips - 1]:
        trips -= 1
    return trips


def _replace(nodes: list[Node], outputs: list[Ref], values: dict, plans: list[_Plan]):
    subst: dict[Ref, Ref] = {}
    removed: set[Node] = set()
    starts: dict[Node, _Plan] = {}
    hoisted: dict[_Plan, list[Node]] = {}
    position = {n: i for i, n in enumerate(nodes)}
    for plan in plans:
        first, last = plan.iters[0][0], plan.iters[-1][-1]
        removed.update(n for trip in plan.iters for n in trip)
        starts[first] = plan
        hoisted[plan] = [n for n in nodes[position[first]:position[last] + 1]
                         if n.op.name in _FREE]
    moved = {n for group in hoisted.values() for n in group}
    new_nodes: list[Node] = []
    for node in nodes:
        plan = starts.get(node)
        if plan is not None:
            new_nodes += hoisted[plan]
            new_nodes += _build(plan, values, subst)
            continue
        if node in removed or node in moved:
            continue
        inputs = tuple(subst.get(r, r) for r in node.inputs)
        if inputs != node.inputs:
            new = node.with_inputs(inputs)
            if node in values:
                values[new] = values[node]
            for i in range(len(node.avals)):
                subst[Ref(node, i)] = Ref(new, i)
            node = new
        new_nodes.append(node)
    return new_nodes, [subst.get(r, r) for r in outputs]


def _build(plan: _Plan, values: dict, subst: dict) -> list[Node]:
    """The loop node and its outputs for ``plan``; ``subst`` learns what replaces the last
    trip's carried values."""
    first, last = plan.iters[0], plan.iters[-1]
    body_values: dict[Node, object] = {}
    inputs: list[Node] = []

    def new_input(aval, name, value) -> Node:
        # a body input holds a number (computed now if the trace let it go: abstract.py),
        # so the body can be evaluated and reversed from it
        node = Node(OPS["input"], (), {"index": len(inputs)}, (aval,), None, name, "input")
        inputs.append(node)
        body_values[node] = value
        return node

    carried = sorted(plan.inits)
    carry_in = {}
    for key in carried:
        aval = first[key[0]].avals[key[1]]
        value = concrete(values, plan.inits[key])
        if aval.py is None and not isinstance(value, np.generic | np.ndarray):
            value = aval.dtype.type(value)  # a Python float starting a NumPy float carry
        carry_in[key] = new_input(aval, first[key[0]].name, value)
    slice_at = sorted(plan.slices)
    slice_in = {j: new_input(first[j].aval, first[j].name, concrete(values, first[j].out))
                for j in slice_at}
    tables: list[Node] = []  # gamma ** t: each trip's number, read from an array
    per_trip: dict[tuple[int, int], Node] = {}
    counted: list[tuple[tuple[int, int], tuple[int, int]]] = []  # dt * t: the counter itself
    formulas: dict[tuple[int, int], tuple] = {}  # 0.01 * t, 0.99 ** t: written with it
    for j, s in plan.varying:
        numbers = [trip[j].inputs[s].node.attrs["value"] for trip in plan.iters]
        counter = _counter(numbers)
        if counter is not None:
            counted.append(((j, s), counter))
            continue
        formula = _formula(numbers)
        if formula is not None:
            counted.append(((j, s), (1, formula[0])))
            formulas[(j, s)] = formula
            continue
        table_value = np.array(numbers, dtype=np.float64)
        table = Node(OPS["const"], (), {"value": table_value}, (aval_of(table_value),), None,
                     None, "const")
        values[table] = table_value
        tables.append(table)
        per_trip[(j, s)] = new_input(aval_of(table_value[0]), None, table_value[0])
    for j, s in plan.gathered:  # for x in xs: the trips' own values, stacked before the loop
        refs = [subst.get(r, r) for r in (trip[j].inputs[s] for trip in plan.iters)]
        row = refs[0].aval
        stacked = Node(OPS["stack"], refs, {"axis": 0},
                       (Aval((plan.trips, *row.shape), row.dtype),), first[j].loc, None, "fwd")
        values[stacked] = np.stack([concrete(values, r) for r in refs])
        tables.append(stacked)
        per_trip[(j, s)] = new_input(row, refs[0].node.name, values[stacked][0])
    outside: list[Node] = []  # the loop-invariant nodes, moved before the loop
    hoisted: dict[int, Node] = {}
    for j in plan.hoisted:
        node = first[j]
        ins = tuple(Ref(hoisted[c[1]], c[2]) if c[0] == "in" else subst.get(r, r)
                    for c, r in zip(plan.classes[j], node.inputs, strict=True))
        moved = node if ins == node.inputs else node.with_inputs(ins)
        values[moved] = values[node]
        hoisted[j] = moved
        outside.append(moved)
    invariants: dict[Ref, Node] = {}

    def invariant(ref: Ref) -> Node:
        if ref not in invariants:
            invariants[ref] = new_input(ref.aval, ref.node.name, concrete(values, ref))
        return invariants[ref]

    for j, node in enumerate(first):
        if j in plan.slices or j in hoisted:
            continue
        for c, ref in zip(plan.classes[j], node.inputs, strict=True):
            if c[0] == "out":
                invariant(ref)
            elif c[0] == "in" and c[1] in hoisted:
                invariant(Ref(hoisted[c[1]], c[2]))
    for (j, s), (_, start) in counted:  # the last body inputs, fed by no loop input
        per_trip[(j, s)] = new_input(aval_of(start), None, start)
    body_nodes: list[Node] = []
    made: dict[int, Node] = {}
    consts: set[Node] = set()
    for j, node in enumerate(first):
        if j in plan.slices or j in hoisted:
            continue
        ins = []
        for c, ref in zip(plan.classes[j], node.inputs, strict=True):
            if c[0] == "const":
                if ref.node not in consts:
                    consts.add(ref.node)
                    body_nodes.append(ref.node)
                    body_values[ref.node] = values[ref.node]
                ins.append(ref)
            elif c[0] == "in" and c[1] in hoisted:
                ins.append(invariants[Ref(hoisted[c[1]], c[2])].out)
            elif c[0] == "in":
                ins.append(slice_in[c[1]].out if c[1] in slice_in else Ref(made[c[1]], c[2]))
            elif c[0] == "carry":
                ins.append(carry_in[(c[1], c[2])].out)
            elif c[0] == "vary" and (c[1], c[2]) in formulas:
                counter = per_trip[(c[1], c[2])]
                made_nodes = _formula_nodes(formulas[(c[1], c[2])], counter, node.loc)
                body_nodes += made_nodes
                body_values.update((n, _formula_value(n, body_values)) for n in made_nodes)
                ins.append(made_nodes[-1].out)
            elif c[0] in ("vary", "each"):
                ins.append(per_trip[(c[1], c[2])].out)
            else:
                ins.append(invariants[ref].out)
        attrs = node.attrs
        if j in plan.moving:
            row = plan.moving[j]
            attrs = {**attrs, "index": tuple(Moving(x, d) if d else x
                                             for x, d in zip(row.template, row.step,
                                                             strict=True))}
        new = Node(node.op, ins, attrs, node.avals, node.loc, node.name, node.role,
                   origin=node.origin)
        made[j] = new
        body_nodes.append(new)
        if node in values:  # guards have none
            body_values[new] = values[node]
    header, var = _header(first)
    body = Graph([*inputs, *body_nodes], inputs, [Ref(made[q], i) for q, i in carried],
                 {"values": body_values, "loc": header})
    body = roll_loops(body, body_values)
    slices = (*(plan.slices[j] for j in slice_at), *(Slice((0,), (1,)) for _ in tables))
    counters = tuple(counter for _, counter in counted)
    region = Region(body, plan.trips, len(carried), slices, header, var,
                    _signature(body, plan.trips, (slices, counters)), counters)
    outer = [*(plan.inits[key] for key in carried), *(first[j].inputs[0] for j in slice_at),
             *(t.out for t in tables), *invariants]
    outer = [subst.get(r, r) for r in outer]  # (hoisted refs are never in subst)
    attrs = {"region": region}
    if region.has_guards:
        attrs["guarded"] = True  # dce keeps it: the guards inside are checks to run
    avals = tuple(first[q].avals[i] for q, i in carried)
    node = Node(loop, outer, attrs, avals, header or first[0].loc, None, "fwd")
    final = tuple(_output_value(values, Ref(last[q], i)) for q, i in carried)
    if any(type(v) is Pending for v in final):
        # a carry the trace let go (abstract.py): the loop's values are computed if asked for
        final = tuple(v if type(v) is Pending else Pending.of(v) for v in final)
        values[node] = Pending(tuple(v.arrays[0] for v in final))
    else:
        values[node] = final
    made_nodes = [*tables, *outside, node]
    for c, (q, i) in enumerate(carried):
        out = Node(loop_out, (node.out,), {"index": c}, (avals[c],), last[q].loc, last[q].name,
                   "fwd")
        values[out] = final[c]
        subst[Ref(last[q], i)] = out.out
        made_nodes.append(out)
    return made_nodes


def _signature(body: Graph, trips: int, slices) -> tuple:
    """Equal for two loops that compute the same thing (so a loop of loops can roll)."""
    position = {n: i for i, n in enumerate(body.nodes)}
    parts = []
    for node in body.nodes:
        if node.op.name == "const":
            parts.append(_const_key(node))
        elif node.op.name == "input":
            parts.append(("input", node.avals))
        else:
            parts.append((_key(node), tuple((position[r.node], r.index) for r in node.inputs)))
    return ("loop", trips, slices, tuple(parts))


@functools.lru_cache(maxsize=64)
def _loops_in(filename: str) -> tuple[tuple[int, int, str | None], ...]:
    try:
        tree = ast.parse("".join(linecache.getlines(filename)))
    except (SyntaxError, ValueError):
        return ()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.For | ast.While):
            # the user's name for the counter: only ``for t in range(...)`` has one (in ``for x
            # in xs`` x is a row, and the rolled loop counts with t)
            counts = (isinstance(node, ast.For) and isinstance(node.target, ast.Name)
                      and isinstance(node.iter, ast.Call)
                      and isinstance(node.iter.func, ast.Name) and node.iter.func.id == "range")
            var = node.target.id if counts else None
            found.append((node.lineno, node.end_lineno or node.lineno, var))
    return tuple(found)


def _header(trip: list[Node]) -> tuple[SourceLoc | None, str | None]:
    """The innermost ``for``/``while`` statement around every line of one trip (read from the
    source only to quote it and to reuse the loop variable's name)."""
    locs = [n.loc for n in trip if n.loc is not None]
    if not locs:
        return None, None
    file = locs[0].file
    lines = [loc.line for loc in locs if loc.file == file]
    low, high = min(lines), max(lines)
    inner = [n.loc.line for n in trip if n.op.name == "loop" and n.loc is not None]
    best = None
    for start, end, var in _loops_in(file):
        if (start <= low and high <= end and all(start < line for line in inner)
                and (best is None or start > best[0])):
            best = (start, var)
    if best is None:
        return None, None
    return SourceLoc(file, best[0], locs[0].func), best[1]
