"""Final names for emitted values: the user's targets, versioned, unique and keyword-safe."""

from __future__ import annotations

import keyword
import re

from .ir import Node

# Names the emitted code itself uses, so a user variable can never shadow them.
RESERVED = {"math", "np", "numpy", "GuardFailure", "float", "abs", "round", "self"}
_IDENT = re.compile(r"[^0-9a-zA-Z_]")


def _clean(name: str) -> str:
    name = _IDENT.sub("_", name) or "v"
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


def base_name(node: Node, names: dict[Node, str], output_name: str) -> str:
    """The name a statement for ``node`` should have before versioning."""
    if node.name:
        return node.name
    if node.op.name == "seed":
        return f"grad_{output_name}"
    operand = node.inputs[0].node if node.inputs else None
    prefix = "grad_" if node.role == "bwd" else ""
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
    from .source import line_table

    info = line_table(node.loc.file).get(node.loc.line)
    return info.targets if info else ()
