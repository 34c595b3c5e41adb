"""Flatten and rebuild dict/list/tuple structures, with readable leaf names and accessors
(``params["W1"]`` -> ``W1``)."""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass

from .errors import GradgenError


@dataclass(frozen=True)
class TreeDef:
    """The shape of a nested structure: ``kind`` is 'leaf', 'tuple', 'list' or 'dict'."""

    kind: str
    keys: tuple = ()
    children: tuple[TreeDef, ...] = ()

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)

    def __str__(self) -> str:
        if self.kind == "leaf":
            return "*"
        inner = ", ".join(
            f"{k!r}: {c}" if self.kind == "dict" else str(c)
            for k, c in zip(self.keys or range(len(self.children)), self.children, strict=True))
        if self.kind == "tuple" and len(self.children) == 1:
            inner += ","  # (*,) is a 1-tuple; (*) would read as a bare leaf
        return {"tuple": f"({inner})", "list": f"[{inner}]", "dict": f"{{{inner}}}"}[self.kind]


LEAF = TreeDef("leaf")


def flatten(value) -> tuple[list, TreeDef]:
    """Leaves in order (dicts in insertion order) and the structure to rebuild them.
    (Recursion here follows the nesting of the user's containers, never the graph.)"""
    leaves: list = []
    return leaves, _flatten_into(value, leaves)


def _flatten_into(value, leaves: list) -> TreeDef:
    if isinstance(value, dict):
        children = tuple(_flatten_into(v, leaves) for v in value.values())
        return TreeDef("dict", tuple(value.keys()), children)
    if isinstance(value, tuple | list):
        if type(value) not in (tuple, list):
            raise _subclass_error(value)
        children = tuple(_flatten_into(v, leaves) for v in value)
        return TreeDef(type(value).__name__, (), children)
    leaves.append(value)
    return LEAF


def _subclass_error(value) -> GradgenError:
    """A namedtuple (or another tuple or list subclass) would come back as a plain tuple: its
    fields gone (``p.w`` an AttributeError) or, worse, its methods silently plain ones."""
    kind = "a namedtuple" if hasattr(value, "_fields") else (
        f"a {type(value).__bases__[0].__name__} subclass")
    spelled = ("a dict (its ._asdict()) or a plain tuple" if kind == "a namedtuple"
               else f"a plain {type(value).__bases__[0].__name__}")
    return GradgenError(f"a {type(value).__name__} ({kind}), a structure gradgen does not rebuild",
                        None, f"pass {spelled}")


def unflatten(tree: TreeDef, leaves):
    it = iter(leaves)
    return _build(tree, it)


def _build(tree: TreeDef, it):
    if tree.kind == "leaf":
        return next(it)
    items = [_build(c, it) for c in tree.children]
    if tree.kind == "dict":
        return dict(zip(tree.keys, items, strict=True))
    return tuple(items) if tree.kind == "tuple" else items


def leaf_paths(tree: TreeDef) -> list[tuple]:
    """The key path of each leaf: () for a bare leaf, ("W1",) for params["W1"] ..."""
    paths: list[tuple] = []
    stack = [(tree, ())]
    while stack:
        node, path = stack.pop()
        if node.kind == "leaf":
            paths.append(path)
            continue
        keys = node.keys if node.kind == "dict" else range(len(node.children))
        for key, child in reversed(list(zip(keys, node.children, strict=True))):
            stack.append((child, (*path, key)))
    return paths


def _key_text(key) -> str:
    """A dict key or index as source, with the double quotes ruff format prefers."""
    if isinstance(key, str) and '"' not in key and "\\" not in key:
        return f'"{key}"'
    return repr(key)


def access_text(root: str, path: tuple) -> str:
    return root + "".join(f"[{_key_text(k)}]" for k in path)


_NOT_IDENT = re.compile(r"\W")


def leaf_name(root: str, path: tuple) -> str:
    """A readable variable name for a leaf: the last dict key when it is an identifier
    (params["W1"] -> W1), else the root with the path joined (xs[0] -> xs_0)."""
    if path and isinstance(path[-1], str) and path[-1].isidentifier() and not keyword.iskeyword(
            path[-1]):
        return path[-1]
    parts = [root] + [_NOT_IDENT.sub("_", str(k)) for k in path]
    return "_".join(p for p in parts if p)


def format_structure(tree: TreeDef, texts: list[str]) -> str:
    """Python source that rebuilds ``tree`` from leaf expressions."""
    return _format(tree, iter(texts))


def _format(tree: TreeDef, it) -> str:
    if tree.kind == "leaf":
        return next(it)
    parts = [_format(c, it) for c in tree.children]
    if tree.kind == "dict":
        body = ", ".join(f"{_key_text(k)}: {p}" for k, p in zip(tree.keys, parts, strict=True))
        return f"{{{body}}}"
    if tree.kind == "list":
        return f"[{', '.join(parts)}]"
    return f"({', '.join(parts)}{',' if len(parts) == 1 else ''})"
