"""Final names for emitted values: the user's targets, versioned, unique and keyword-safe, and
for the values the user did not name, names made from what they hold (x_head_sq)."""

from __future__ import annotations

import itertools
import keyword
import re
from operator import attrgetter

import numpy as np

from .ir import Node
from .source import line_targets

# Names the emitted code itself uses, so a user variable can never shadow them.
RESERVED = {"math", "np", "numpy", "GuardFailure", "float", "abs", "round", "self"}
_IDENT = re.compile(r"[^0-9a-zA-Z_]")


def _clean(name: str) -> str:
    if name.isascii() and name.isidentifier():  # nearly always: nothing to clean, no regex
        return name
    # xs[t] (a loop's row, read inside the loop) -> xs_t; t - 1 -> t_1
    name = re.sub(r"__+", "_", _IDENT.sub("_", name)).rstrip("_") or "v"
    if name[0].isdigit():
        name = f"v_{name}"
    return name


class Namer:
    """Hands out unique names in statement order: ``h``, then ``h_1``, ``h_2`` ..."""

    def __init__(self, taken=()):
        # Python's keywords are taken from the start: ``lambda`` becomes ``lambda_1`` the way
        # any name in use does, with no keyword test per name
        self.taken: set[str] = set(RESERVED) | set(keyword.kwlist) | set(taken)
        self.versions: dict[str, int] = {}

    def fresh(self, base: str) -> str:
        if not (base.isascii() and base.isidentifier()):  # nearly always clean already
            base = _clean(base)
        if base not in self.taken:
            self.taken.add(base)
            return base
        n = self.versions.get(base, 0)
        while True:
            n += 1
            candidate = f"{base}_{n}"
            if candidate not in self.taken:
                self.versions[base] = n
                self.taken.add(candidate)
                return candidate

    def claim(self, name: str) -> None:
        self.taken.add(name)


_NAME, _SERIAL = attrgetter("name"), attrgetter("serial")


class Held:
    """What the values of one graph hold, for the names of those the user did not name: the
    names given so far (shared with the emitter), the names the user's code binds (a made-up
    name never takes one), and the graph's node for each serial (the adjoint of a value was
    noted on a node that optimization may since have rebuilt under the same serial).

    The emitter hands over what its one pass over the graph found: the user's names, the
    last reader of each value and the values that more than one node reads. The node of each
    serial is found when first asked of a value the graph no longer has (rarely: the nodes
    a name is made from are the graph's own)."""

    def __init__(self, nodes, names: dict[Node, str], user_names: set[str] | None = None,
                 last_reader: dict[Node, Node] | None = None, several: set[Node] | None = None):
        self.nodes = nodes
        self.names = names
        if user_names is None:
            user_names = set(map(_NAME, nodes))
            user_names.discard(None)
        self.user_names = user_names
        # the last reader of each value, and the values read by more than one node: found
        # when first asked, if not given
        self._last_reader, self._several = last_reader, several
        self._current: dict[int, Node] | None = None
        self._gradient: dict[Node, bool] = {}  # is_gradient's answers so far
        self.fallbacks: set[Node] = set()  # named by the line (h_part) or tmp
        self.taken: set[str] = set()  # the names handed out (the emitter's Namer's)

    def current(self, node: Node) -> Node:
        """The graph's node under ``node``'s serial: ``node`` itself when the graph has it (it
        is named, or some node reads it), unless optimization has rebuilt it since it was
        noted."""
        if node in self.names or node in self._last_readers():
            return node
        if self._current is None:  # first asked of a value not in the graph: each serial's
            self._current = dict(zip(map(_SERIAL, self.nodes), self.nodes))
        return self._current.get(node.serial, node)

    def is_gradient(self, node: Node) -> bool:
        """Is ``node`` computed from an adjoint (not only from forward values, like the
        sign(x) a derivative multiplies by)? Asked only where a name falls back (h_part), so
        it looks back from ``node`` through backward values only as far as the first adjoint
        it meets, remembering what it saw (a stack, not recursion: graphs are deep)."""
        known = self._gradient
        stack = [node]
        while stack:
            value = stack[-1]
            if value in known:
                stack.pop()
            elif (value.op.name == "seed" or value.grad_of is not None
                  or (value.name or "").startswith("grad_")):
                known[stack.pop()] = True
            elif value.role != "bwd":
                known[stack.pop()] = False
            else:  # an adjoint's when one of its inputs is: the first one not yet known next
                for ref in value.inputs:
                    answer = known.get(ref.node)
                    if answer is None:
                        stack.append(ref.node)
                        break
                    if answer:
                        known[stack.pop()] = True
                        break
                else:
                    known[stack.pop()] = False
        return known[node]

    def _last_readers(self) -> dict[Node, Node]:
        if self._last_reader is None:  # first asked: who reads each value, once
            self._last_reader, self._several = {}, set()
            for reader in self.nodes:
                for ref in reader.inputs:
                    if self._last_reader.get(ref.node, reader) is not reader:
                        self._several.add(ref.node)
                    self._last_reader[ref.node] = reader
        return self._last_reader

    def reader(self, node: Node) -> Node | None:
        """The one node that reads ``node``, if only one does: the last node that reads it,
        when all of its reads are that node's."""
        last_reader = self._last_readers()
        return None if node in self._several else last_reader.get(node)

    def argument_name(self, node: Node) -> str | None:
        """``node`` is read once, by a one-input op whose statement has a name (h_row =
        np.tanh(W @ h + b)): the op's argument, h_row_arg."""
        reader = self.reader(node)
        name = self.names.get(reader) if reader is not None and len(reader.inputs) == 1 else None
        return self.made(f"{name}_arg") if name and name.isidentifier() else None

    def made(self, name: str | None) -> str | None:
        """A name made up for a value, if it is short, names at most one version of a value,
        and is not one the user's code binds."""
        if name is None or len(name) > MAX_HELD or name in self.user_names:
            return None
        if sum(map(str.isdigit, name.split("_"))) > 1:
            return None  # W_h_98_plus_U_xs_99: versions of several values no longer read
        return name


def base_name(node: Node, names: dict[Node, str], output_name: str,
              writes: dict[Node, list[Node]] | None = None, held: Held | None = None) -> str:
    """The name a statement for ``node`` should have before versioning. ``writes`` maps a
    value to the index updates that write it into an array (see ``index_writes``)."""
    if node.name:
        return node.name
    if node.op.name == "seed":
        return f"grad_{output_name}"
    if node.role != "bwd":
        written = written_into(node, writes or {}, names)
        if written is not None:
            return written
    held = held or Held((), names)
    made = held_name(node, held)
    if made is not None:
        return made
    held.fallbacks.add(node)  # h_part, tmp: say nothing a name made from them could repeat
    info_targets = _line_targets(node)
    prefix = "grad_" if node.role == "bwd" and held.is_gradient(node) else ""
    if info_targets:
        return f"{prefix}{info_targets[0]}_part"
    reader = held.reader(node)
    into = held_name(reader, held, 1) if reader is not None else None
    if into is not None:
        return f"{into}_part"  # what goes into grad_lam (a sum of it, say)
    written = _written_on_line(node, held)
    if written is None:
        return f"{prefix}tmp"
    if prefix and node.origin is not None and node.origin[0].name in _ONE_ARGUMENT:
        for ref in node.inputs:  # what np.tanh's rule makes of grad_hs_row: its argument's
            made = held.names.get(ref.node)  # adjoint, grad_hs_row_arg (as argument_name)
            if made and ref.node in held.fallbacks and unversioned(made) == prefix + written:
                return f"{made}_arg"
    return f"{prefix}{written}"  # h[k] = h[k - 1] + x[k] * w: h_part, grad_h_part


# ``h[k] = ...``, ``hs[t + 1] += ...``: the array a line writes into, and its index
_WRITTEN = re.compile(r"([A-Za-z_]\w*)\[([^\]]*)\] *(?:[-+*/@%&|^]|//|\*\*)?= ")


def _written_on_line(node: Node, held: Held) -> str | None:
    """A value of a line that writes into an array, named as ``written_into`` names the
    value written (``hs_row``, ``h_part``) when the array's write is no longer in the graph
    (``f_grad`` needs the rows, not ``hs``) or the value is a part of it: the line's target
    says more than ``tmp``. A row when a whole row is written (an index, no slice) and the
    value is an array; else a part. None if that is a name the user's code binds."""
    if node.loc is None:
        return None
    found = _WRITTEN.match(node.loc.text())
    if found is None:
        return None
    array, index = found.groups()
    row = node.avals[0].ndim >= 1 and ":" not in index and "," not in index
    name = f"{array}_row" if row else f"{array}_part"
    if node.role == "bwd" and name in held.taken:  # a forward h_part: grad_h_part is its
        name = _clean(f"{array}_{index}")  # adjoint's, so this one is after h[k]: grad_h_k
    return held.made(name)


# --- names after what a value holds ---------------------------------------------------------
#
# A value the user did not name is named after what it holds, mechanically, from its op and
# its operands' names: x[:-1] is x_head, x_head ** 2 is x_head_sq, 1.0 - x_head is
# one_minus_x_head, np.exp(z) is exp_z, W @ h is W_h, the adjoint of x_head_sq is
# grad_x_head_sq. Nothing is guessed (no "residual", no "dx"): a name only says which op made
# the value from which operands. A name past MAX_HELD characters no longer reads at a glance;
# the value then gets the line's target (``h_part``) or ``tmp``. An adjoint is grad_ and its
# value's name, however long that is, so the two always read as a pair.

MAX_HELD = 24
MAX_OPERAND_DEPTH = 3  # ops deep into an inlined operand's expression, at most

_NAMED_CALLS = frozenset({
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh",
    "atanh", "exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sqrt", "cbrt", "abs",
    "fabs", "sign", "norm", "sum", "mean", "max", "min", "prod", "std", "var", "erf", "erfc",
    "floor", "ceil", "round", "trunc", "inv", "det", "trace", "diag", "diagonal", "cumsum",
    "cumprod", "tril", "triu", "outer", "solve", "maximum", "minimum", "hypot", "logaddexp",
    "cholesky", "pinv", "nansum", "nanmean", "nanmax", "nanmin", "atan2", "sinc", "argsort",
    "argmax", "argmin",
})
_INFIX = {"add": "plus", "sub": "minus", "mul": "times", "div": "over", "eq": "eq", "ne": "ne",
          "lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "mod": "mod", "floordiv": "floordiv"}
_SUFFIX = {"transpose": "T", "reshape": "reshaped", "broadcast_to": "broadcast",
           "square": "sq", "copy": "copy", "isnan": "isnan", "isfinite": "isfinite"}
_SCALED = {"mul": "scaled", "div": "scaled", "add": "shifted", "sub": "shifted"}
_POWER = {2: "{x}_sq", 3: "{x}_cube", 0.5: "sqrt_{x}"}
_NUMBER_WORDS = {0: "zero", 1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six",
                 7: "seven", 8: "eight", 9: "nine", 10: "ten", 0.5: "half"}


def held_name(node: Node, held: Held, depth: int = MAX_OPERAND_DEPTH) -> str | None:
    """A name saying what ``node`` holds, made from its op and its operands' names (their
    statements' names, or what they hold when they are inlined, at most ``depth`` ops deep),
    or None when the rule has nothing short and honest to say. The adjoint of a value is
    ``grad_`` and that value's name."""
    if node in held.fallbacks:
        return None  # sin_tmp_1 would say no more than tmp_1
    known = held.names.get(node) or node.name or node.hint
    if known is not None:
        return known if known.isidentifier() else None  # a loop body reads xs[t]: no name
    forward = node.grad_of
    if forward is not None:
        forward = held.current(forward)
        name = held_name(forward, held, depth) or held.argument_name(forward)
        return f"grad_{name}" if name is not None else None
    if depth == 0 or node.op.n_out != 1:
        return None
    op = node.op.name
    if op == "getitem":
        whole = held_name(node.inputs[0].node, held, depth - 1)
        return held.made(f"{whole}_{part_name(node.attrs['index'])}") if whole else None
    if op == "stack":
        return held.made(_stack_name(node, held))
    if op == "take_along_axis" and _sorts_its_input(node):  # np.sort(x): x_sorted
        whole = held_name(node.inputs[0].node, held, depth - 1)
        return held.made(f"{whole}_sorted") if whole else None
    if op in ("cast", "adjoint"):  # the same numbers (in another dtype)
        return held_name(node.inputs[0].node, held, depth)
    operands = []
    for ref in node.inputs:
        operand = ref.node
        text = (_constant_word(operand.attrs["value"]) if operand.op.name == "const"
                else held_name(operand, held, depth - 1))
        if text is None:
            return None
        operands.append(text)
    return held.made(_compose(op, operands))


def _compose(op: str, operands: list[str]) -> str | None:
    """The name of ``op`` applied to operands with these names."""
    if "" in operands:  # a constant without a word: 100.0 * x is x_scaled, x + 0.3 x_shifted
        if op not in _SCALED or len(operands) != 2 or operands == ["", ""]:
            return None
        if operands[0] == "" and op in ("sub", "div"):  # 0.3 - x, 0.3 / x: neither
            return None
        return f"{operands[0] or operands[1]}_{_SCALED[op]}"
    if op == "mul" and len(operands) == 2 and operands[0] == operands[1]:
        return f"{operands[0]}_sq"  # h * h
    if (len(operands) == 2 and op in _BINARY and not _WORD_NUMBERS.keys() & operands
            and any(map(_has_number, operands))):
        return None  # W_h_plus_U_xs_1: two values, one of them a loop step's version
    if op in _INFIX and len(operands) == 2:
        return f"{operands[0]}_{_INFIX[op]}_{operands[1]}"
    if op in ("pow", "math_pow") and len(operands) == 2:
        x, exponent = operands
        shape = _POWER.get(_WORD_NUMBERS.get(exponent))
        return shape.format(x=x) if shape else f"{x}_pow_{exponent}"
    if op == "neg":
        return f"neg_{operands[0]}"
    if op == "matmul" and len(operands) == 2:
        return f"{operands[0]}_{operands[1]}"  # W @ h: W_h, as a person writes the product
    if op in _SUFFIX and operands:
        return f"{operands[0]}_{_SUFFIX[op]}"
    if op in _NAMED_CALLS and operands:
        return f"{op}_{'_'.join(operands)}"
    return None


_BINARY = frozenset(_INFIX) | {"matmul", "pow", "math_pow"}
_ONE_ARGUMENT = _NAMED_CALLS - {"maximum", "minimum", "hypot", "logaddexp", "atan2", "outer",
                                "solve"}


def _has_number(name: str) -> bool:
    """Does the name carry a version or an index (h_3, xs_0)? (C-level: per operand)"""
    return any(map(str.isdigit, name.split("_")))


_WORD_NUMBERS = {word: number for number, word in _NUMBER_WORDS.items()}


def _constant_word(value) -> str:
    """A small constant as a word (1.0 - x: one_minus_x); "" for any other constant."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        return ""
    number = float(value)
    if number.is_integer() and 0 <= number <= 10:
        return _NUMBER_WORDS[int(number)]
    return _NUMBER_WORDS.get(number, "")


def _sorts_its_input(node: Node) -> bool:
    """``np.take_along_axis(x, np.argsort(x))``: what np.sort(x) records."""
    x_ref, order = node.inputs
    return order.node.op.name == "argsort" and order.node.inputs[0] == x_ref


def _stack_name(node: Node, held: Held) -> str | None:
    """``np.stack([h_row, h_row_1, h_row_2])``, versions of one name: h_rows. A constant
    row, or an argument first (where a recurrence starts from), does not change that."""
    base = None
    for i, ref in enumerate(node.inputs):
        if ref.node.op.name == "const" or i == 0 and ref.node.op.name == "input":
            continue  # np.stack([h0, h, h_1]): the state a recurrence starts from, then h's
        name = held_name(ref.node, held, 1)
        if name is None:
            return None
        stem = unversioned(name)
        if base is None:
            base = stem
        elif stem != base:
            return None
    if base is None:
        return None
    return f"{base}_stack" if base.endswith("s") else f"{base}s"


def unversioned(name: str) -> str:
    """h_row_2 -> h_row, h_row_2_arg -> h_row_arg: the name without its version numbers."""
    parts = name.split("_")
    if not any(map(str.isdigit, parts)):
        return name
    return "_".join(itertools.filterfalse(str.isdigit, parts)) or name


def _line_targets(node: Node) -> tuple[str, ...]:
    if node.loc is None:
        return ()
    return line_targets(node.loc.file, node.loc.line)


def part_name(index: tuple) -> str:
    """What an index picks, for a name: x[0] -> x_0, x[-1] -> x_last, x[1:] -> x_tail,
    x[:-1] -> x_head, x[[0, 2]] -> x_picked."""
    if len(index) == 1:
        item = index[0]
        if isinstance(item, int):
            return "last" if item == -1 else f"{item}" if item >= 0 else f"m{-item}"
        if isinstance(item, tuple) and item[0] == "slice" and item[3] in (None, 1):
            start, stop = item[1], item[2]
            if stop is None and start is not None:
                return "tail"
            if start is None and stop is not None:
                return "head"
        if isinstance(item, tuple) and item[0] == "array":
            return "picked"
    if index and isinstance(index[0], int) and all(
            isinstance(i, tuple) and i[:2] == ("slice", None) and i[2:] == (None, None)
            for i in index[1:]):
        return f"{index[0]}"
    return "part"


def written_into(node: Node, writes: dict[Node, list[Node]], names) -> str | None:
    """A value computed to be written into a named array (``h[t] = np.tanh(...)``): h_row."""
    for user in writes.get(node, ()):
        base = user.inputs[0].node
        name = names.get(base) or base.name or user.name
        if name:
            index = user.attrs.get("index") or (None,)
            row = base.aval.ndim >= 2 and isinstance(index[0], int)
            return f"{name}_row" if row else f"{name}_part"
    return None


def index_writes(nodes) -> dict[Node, list[Node]]:
    """value node -> the index updates (``a[i] = value``) that write it."""
    writes: dict[Node, list[Node]] = {}
    for node in nodes:
        if node.op.extra.get("statement") and len(node.inputs) > 1:
            writes.setdefault(node.inputs[1].node, []).append(node)
    return writes
