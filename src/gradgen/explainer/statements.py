"""Emitted module text -> its statements, each linked to the user's source lines.

The links are read from the text the emitter prints for people, so they hold for whatever
the emitter does inside: a forward statement ends in ``# file.py:L``; a backward group starts
with ``# file.py:L  source``; a fused sum is announced by ``# y is used by file.py:6 and
file.py:7: one fused sum``; a guard or finite check raises with ``"file.py:L: ..."``. A
statement computing ``grad_v`` is also linked to the line that computed ``v``.
"""

from __future__ import annotations

import ast
import re
import tokenize
from dataclasses import dataclass, field

_LOC = re.compile(r"([\w.<>-]+\.py):(\d+)")
_GROUP = re.compile(r"^#\s+([\w.<>-]+\.py):(\d+)(\s|$)")
_FUSED = re.compile(r"^#\s+(\w+) is used (.*): one fused sum$")


@dataclass
class Item:
    """A run of lines of the emitted module shown as one selectable unit."""

    first: int  # 1-based, inclusive
    last: int
    kind: str  # fwd, bwd, fused, seed, group, banner, guard, check, def, doc, return, other
    lines: list[str] = field(default_factory=list)  # source keys it comes from (strong link)
    also: list[str] = field(default_factory=list)  # keys it relates to (the value's line, uses)
    target: str | None = None


@dataclass
class FunctionView:
    name: str
    first: int
    last: int
    items: list[Item]


class _Keys:
    """Source location text (``file.py:12``) -> the page's key for that line (``0:12``)."""

    def __init__(self, files: dict[str, int]):
        self.files = files  # basename -> file index on the page

    def key(self, base: str, line: str | int) -> str | None:
        index = self.files.get(base)
        return None if index is None else f"{index}:{int(line)}"

    def all_in(self, text: str) -> list[str]:
        keys = (self.key(m[1], m[2]) for m in _LOC.finditer(text))
        return list(dict.fromkeys(k for k in keys if k is not None))


def _comments(tokens: list[tokenize.TokenInfo]) -> dict[int, str]:
    return {tok.start[0]: tok.string for tok in tokens if tok.type == tokenize.COMMENT}


def _flat_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements in order; loops open into their bodies (the header is an item of its own),
    while an ``if`` that only raises stays one item (a guard or a finite check)."""
    out: list[ast.stmt] = []
    stack = [list(reversed(body))]
    while stack:
        if not stack[-1]:
            stack.pop()
            continue
        stmt = stack[-1].pop()
        out.append(stmt)
        if isinstance(stmt, ast.For | ast.While | ast.With) or (
                isinstance(stmt, ast.If) and not _only_raises(stmt)):
            stack.append(list(reversed(stmt.orelse)) if getattr(stmt, "orelse", None) else [])
            stack.append(list(reversed(stmt.body)))
    return out


def _only_raises(stmt: ast.If) -> bool:
    return all(isinstance(s, ast.Raise) for s in stmt.body) and not stmt.orelse


def _target(stmt: ast.stmt) -> str | None:
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        node = stmt.targets[0]
    elif isinstance(stmt, ast.AugAssign | ast.AnnAssign):
        node = stmt.target
    else:
        return None
    while isinstance(node, ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _subscript_root(stmt: ast.stmt) -> str | None:
    """``params`` for ``W1 = params["W1"]`` (a leaf of a dict/list/tuple argument)."""
    value = stmt.value if isinstance(stmt, ast.Assign) else None
    if not isinstance(value, ast.Subscript):
        return None
    while isinstance(value, ast.Subscript):
        value = value.value
    return value.id if isinstance(value, ast.Name) else None


def _header_end(stmt: ast.stmt) -> int:
    """The last line of a compound statement's header (``for t in range(n):``)."""
    return stmt.body[0].lineno - 1 if getattr(stmt, "body", None) else stmt.end_lineno


def parse_module(text: str, tokens: list[tokenize.TokenInfo], files: dict[str, int],
                 params: dict[str, str]) -> tuple[list[int], list[FunctionView]]:
    """The module's preamble lines (header, imports, classes, helpers) and its functions,
    each split into linked items. ``tokens`` are the text's tokens; ``files`` maps a file's
    basename to its index on the page; ``params`` maps each parameter name to the key of the
    ``def`` line."""
    tree = ast.parse(text)
    comments = _comments(tokens)
    keys = _Keys(files)
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)
                 and not n.name.startswith("_")]
    first_def = min((f.lineno for f in functions), default=len(text.splitlines()) + 1)
    preamble = list(range(1, first_def))
    # Where each forward value is computed: the line in its trailing comment.
    defined: dict[str, str] = dict(params)
    for fn in functions:
        for stmt in _flat_statements(fn.body):
            name = _target(stmt)
            loc = comments.get(stmt.end_lineno, "")
            found = keys.all_in(loc) if name and not name.startswith("grad_") else []
            if found and not loc.lstrip("# ").startswith("seed"):
                defined.setdefault(name, found[0])
    views = [_function_view(fn, comments, keys, defined) for fn in functions]
    return preamble, views


def _function_view(fn: ast.FunctionDef, comments: dict[int, str], keys: _Keys,
                   defined: dict[str, str]) -> FunctionView:
    items: list[Item] = []
    header_last = fn.body[0].lineno - 1
    def_keys = sorted({defined[p.arg] for p in fn.args.args if p.arg in defined})
    items.append(Item(fn.lineno, header_last, "def", def_keys))
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        doc = body[0]
        items.append(Item(doc.lineno, doc.end_lineno, "doc"))
        body = body[1:]
    previous_end = items[-1].last
    group: list[str] = []
    fused: tuple[str, list[str]] | None = None
    banners: list[Item] = []  # a Function's banner belongs to the group header under it
    backward = False
    for stmt in _flat_statements(body):
        # comment-only lines before the statement: banners, group headers, fused-sum notes
        for line in range(previous_end + 1, stmt.lineno):
            text = comments.get(line)
            if text is None:
                continue
            # a vjp has no seed: its backward starts at the first group
            if (m := _FUSED.match(text)) is not None:
                backward = True
                fused = (m[1], keys.all_in(m[2]))
                items.append(Item(line, line, "note", [], fused[1]))
            elif (m := _GROUP.match(text)) is not None:
                backward = True
                group = [k for k in [keys.key(m[1], m[2])] if k]
                fused = None
                items.append(Item(line, line, "group", group))
                for banner in banners:
                    banner.lines = list(group)
                banners = []
            else:
                banners.append(Item(line, line, "banner", []))
                items.append(banners[-1])
        last = _header_end(stmt)
        trailing = " ".join(comments.get(n, "") for n in range(stmt.lineno, last + 1))
        name = _target(stmt)
        item = Item(stmt.lineno, last, "other", target=name)
        if isinstance(stmt, ast.If) and _only_raises(stmt):
            message = ast.unparse(stmt.body[0])
            item.lines = keys.all_in(message)[:1]
            item.kind = "check" if "NonFiniteGradient" in message else "guard"
            item.last = stmt.end_lineno
        elif isinstance(stmt, ast.Return):
            item.kind = "return"
        elif "# seed" in trailing:
            item.kind, backward = "seed", True
            item.also = [defined[name[5:]]] if name and name[5:] in defined else []
        elif not backward:
            item.kind = "fwd"
            item.lines = keys.all_in(trailing)
            root = _subscript_root(stmt)
            if not item.lines and root in defined:  # W1 = params["W1"]: from the def line
                item.lines = [defined[root]]
        else:
            value = name[5:] if name and name.startswith("grad_") else None
            own = [defined[value]] if value in defined else []
            if fused is not None and value == fused[0]:
                item.kind, item.lines, item.also = "fused", own, fused[1]
                fused = None
            else:
                item.kind, item.lines = "bwd", list(group)
                item.also = [k for k in own if k not in group]
        items.append(item)
        if isinstance(stmt, ast.For | ast.While) and item.kind == "other":
            item.lines = keys.all_in(trailing)
        compound = isinstance(stmt, ast.For | ast.While | ast.With | ast.If)
        previous_end = last if compound and item.kind not in ("guard", "check") else (
            stmt.end_lineno)
    return FunctionView(fn.name, fn.lineno, fn.end_lineno, items)
