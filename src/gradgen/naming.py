"""Final names for emitted values: the user's targets, versioned, unique and keyword-safe."""

from __future__ import annotations

import keyword
import re

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
        self.taken: set[str] = set(RESERVED) | set(taken)
        self.versions: dict[str, int] = {}

    def fresh(self, base: str) -> str:
        base = _clean(base)
        if base not in self.taken and not keyword.iskeyword(base):
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


_UNARY_NAMED = {"sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "exp",
                "expm1", "log", "log1p", "log2", "log10", "sqrt", "abs", "fabs", "sign",
                "square", "norm", "sum", "mean"}


def base_name(node: Node, names: dict[Node, str], output_name: str,
              writes: dict[Node, list[Node]] | None = None) -> str:
    """The name a statement for ``node`` should have before versioning. ``writes`` maps a
    value to the index updates that write it into an array (see ``index_writes``)."""
    if node.name:
        return node.name
    if node.op.name == "seed":
        return f"grad_{output_name}"
    operand = node.inputs[0].node if node.inputs else None
    prefix = "grad_" if node.role == "bwd" else ""
    if node.op.name == "getitem" and node.role != "bwd" and operand is not None:
        whole = names.get(operand) or operand.name
        if whole:
            return f"{whole}_{part_name(node.attrs['index'])}"
    written = written_into(node, writes or {}, names)
    if written is not None and node.role != "bwd":
        return written
    if node.op.name in _UNARY_NAMED and operand is not None and operand in names:
        operand_name = names[operand]
        if node.role == "bwd" or operand_name.startswith("grad_"):
            operand_name = operand_name.removeprefix("grad_")
            return f"{prefix}{node.op.name}_{operand_name}"
        return f"{node.op.name}_{operand_name}"
    info_targets = _line_targets(node)
    if info_targets:
        return f"{prefix}{info_targets[0]}_part"
    return f"{prefix}tmp"


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
