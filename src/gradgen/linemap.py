"""The standard library's ast over source lines: per line, the targets it assigns, its
statement and its branch test.

Only statements are visited (never expressions), so a table costs a few microseconds per
line; ``source.py`` decides which lines to parse (one function, or the whole file).
"""

from __future__ import annotations

import ast
import keyword
import re
from dataclasses import dataclass

# Statements that libcst called "small": one or more of them (``a = 1; b = 2``) make a line.
_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return, ast.Pass,
           ast.Break, ast.Continue, ast.Delete, ast.Import, ast.ImportFrom, ast.Global,
           ast.Nonlocal, ast.Raise, ast.Assert)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True, slots=True)
class LineInfo:
    """What a source line holds: the targets it assigns, its statement, a branch test."""

    targets: tuple[str, ...] = ()
    statement: str = ""
    condition: str | None = None


def parse_def(lines: list[str], first: int) -> ast.stmt | None:
    """The ``def`` (with its decorators) that starts at line ``first`` (1-based), parsed from
    its own lines only; None when that is not a function with its body on later lines (a
    lambda, a comprehension, module code), so the caller parses the whole file instead."""
    if not 0 < first <= len(lines):
        return None
    head = lines[first - 1]
    stripped = head.lstrip()
    if not stripped.startswith(("def ", "async ", "@")):
        return None
    indent = len(head) - len(stripped)
    end = first
    while stripped.startswith("@") and end < len(lines):  # decorators, then the def line
        stripped = lines[end].lstrip()
        end += 1
    # The block ends before the next line of code indented no deeper than the def (a closing
    # bracket of its header, ``):``, does not end it); a string or bracket that goes on at a
    # smaller indent makes the guess unparsable, never wrong.
    while end < len(lines):
        line = lines[end]
        text = line.lstrip()
        if (text and text[0] not in "#)]}" and len(line) - len(text) <= indent):
            break
        end += 1
    # Blank lines before the def keep the file's line numbers; "if 1:" admits an indented def.
    prefix = "\n" * (first - 2) + "if 1:\n" if indent else "\n" * (first - 1)
    body_lines, whole = _skeleton(lines[first - 1:end], first)
    try:
        module = ast.parse(prefix + "".join(body_lines))
    except (SyntaxError, ValueError):
        return None
    body = module.body[0].body if indent else module.body
    if len(body) != 1 or not isinstance(body[0], _DEFS):
        return None
    node = body[0]
    start = min([d.lineno for d in node.decorator_list] + [node.lineno])
    if start != first or not node.body or node.body[0].lineno == _header_end(node):
        return None
    node.whole_lines = whole  # (see _skeleton: the assignments parsed as `pass`)
    return node


# An assignment that is a whole line: names, an operator (= or +=, ...), a value that
# holds no "=" (keyword arguments, a = b = c) and no ":" (lambda, walrus, annotation).
_WHOLE_ASSIGNMENT = re.compile(
    r"([ \t]*)([A-Za-z_]\w*(?:[ \t]*,[ \t]*[A-Za-z_]\w*)*)[ \t]*"
    r"(?:[-+*/%@&|^]|//|\*\*|>>|<<)?=(?!=)[ \t]*[^=:\s][^=:]*$")
_NOT_PLAIN = re.compile(r"[\\'\"#;]")  # strings, comments, continuations, a; b
_DEPTH = str.maketrans("([{)]}", "((()))")


def _skeleton(lines: list[str], first: int) -> tuple[list[str], dict[int, tuple[str, ...]]]:
    """The def's lines with each one-line assignment replaced by ``pass``, and the names
    each of those lines assigns, by line number. The line table needs statements, not
    expressions, and building the expressions of a long unrolled function is most of the
    parser's time: a ``pass`` keeps the line's place and column, its targets are read here
    and its text from the source (_Text). Only for plain code (no string, comment,
    backslash or semicolon, so brackets can be counted by characters); anything else is
    parsed as written."""
    if _NOT_PLAIN.search("".join(lines)):
        return lines, {}
    out, whole, depth = [], {}, 0
    match_assignment = _WHOLE_ASSIGNMENT.match
    for number, line in enumerate(lines, first):
        counted = line.translate(_DEPTH)
        opened = counted.count("(") - counted.count(")")
        match = match_assignment(line) if depth == 0 and opened == 0 else None
        depth += opened
        if match is not None:
            targets = tuple(name.strip() for name in match[2].split(","))
            if not any(map(keyword.iskeyword, targets)):
                out.append(f"{match[1]}pass\n")
                whole[number] = targets
                continue
        out.append(line)
    return out, whole


def parse_file(lines: list[str]) -> list[ast.stmt]:
    try:
        return ast.parse("".join(lines)).body
    except (SyntaxError, ValueError):  # unparsable source only costs names, never correctness
        return []


def _header_end(node) -> int:
    """The line of a def's colon, as far as statements can tell: its body's first line when
    that shares the line (``def f(x): return x``)."""
    return node.body[0].lineno if node.body[0].lineno == node.lineno else -1


def block_end(lines: list[str], node) -> int:
    """The last line ``inspect.getsource`` gives for a parsed def: its last statement, then
    comment lines indented like its body up to the next code (as ``inspect.BlockFinder``)."""
    last = node.end_lineno
    body_col = node.body[0].col_offset
    k = last
    while k < len(lines):
        text = lines[k].lstrip()
        if text.startswith("#"):
            if len(lines[k]) - len(text) >= body_col:
                last = k + 1
        elif text:
            break
        k += 1
    return last


def line_table_of(statements: list[ast.stmt], lines: list[str],
                  table: dict[int, LineInfo]) -> None:
    """Fill ``table`` (line number -> LineInfo) for ``statements`` and everything inside."""
    whole: dict[int, tuple[str, ...]] = {}
    for stmt in statements:
        whole.update(getattr(stmt, "whole_lines", {}))
    text = _Text(lines, whole)
    pending = [statements]
    while pending:
        body = pending.pop()
        group: list[ast.stmt] = []  # simple statements sharing a line: ``a = 1; b = 2``
        for stmt in body:
            if isinstance(stmt, _SIMPLE):
                if group and group[-1].end_lineno == stmt.lineno:
                    group.append(stmt)
                    continue
                _record(group, text, table)
                group = [stmt]
                continue
            _record(group, text, table)
            group = []
            if isinstance(stmt, ast.If | ast.While):
                test = text.condition(stmt)
                info = LineInfo((), test, test)
                for line in {stmt.lineno, *range(stmt.test.lineno, stmt.test.end_lineno + 1)}:
                    table[line] = info
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, field, None)
                if inner:
                    pending.append(inner)
            for part in getattr(stmt, "handlers", ()) or getattr(stmt, "cases", ()):
                pending.append(part.body)
        _record(group, text, table)


def _record(group: list[ast.stmt], text: _Text, table: dict[int, LineInfo]) -> None:
    """One line of simple statements: every line it spans says what its last statement does
    (a statement after ``if c:`` on the same line belongs to the if, and says nothing)."""
    if not group or not text.starts_line(group[0]):
        return
    stmt = group[-1]
    targets = text.whole.get(stmt.lineno) if type(stmt) is ast.Pass else None
    info = LineInfo(_targets(stmt) if targets is None else targets, text.code(stmt))
    first, last = group[0].lineno, stmt.end_lineno
    if first == last:  # most statements
        table[first] = info
        return
    for line in range(first, last + 1):
        table[line] = info


def _targets(stmt: ast.stmt) -> tuple[str, ...]:
    if isinstance(stmt, ast.Assign):
        if len(stmt.targets) != 1:
            return ()  # a = b = value: no one name for the value
        target = stmt.targets[0]
        if isinstance(target, ast.Name):
            return (target.id,)
        if isinstance(target, ast.Tuple | ast.List):
            elts = [e.value if isinstance(e, ast.Starred) else e for e in target.elts]
            if all(isinstance(e, ast.Name) for e in elts):
                return tuple(e.id for e in elts)
        return ()
    if isinstance(stmt, ast.AugAssign | ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return (stmt.target.id,)
    return ()


class _Text:
    """Source text of ast nodes, whitespace collapsed to single spaces (offsets are UTF-8)."""

    def __init__(self, lines: list[str], whole: dict[int, tuple[str, ...]] | None = None):
        self.lines = lines
        self.whole = whole or {}  # line -> names of an assignment parsed as `pass`

    def starts_line(self, stmt: ast.stmt) -> bool:
        line = self.lines[stmt.lineno - 1]
        return not line[:stmt.col_offset].strip() if line.isascii() else not (
            line.encode()[:stmt.col_offset].strip())

    def segment(self, first: int, col: int, last: int, end_col: int) -> str:
        lines = self.lines[first - 1:last]
        if all(line.isascii() for line in lines):
            if first == last:
                return lines[0][col:end_col]
            return lines[0][col:] + "".join(lines[1:-1]) + lines[-1][:end_col]
        data = [line.encode() for line in lines]
        if first == last:
            return data[0][col:end_col].decode()
        return (data[0][col:] + b"".join(data[1:-1]) + data[-1][:end_col]).decode()

    def code(self, node) -> str:
        first = node.lineno
        if first in self.whole:  # the statement is the rest of its line
            return " ".join(self.lines[first - 1].encode()[node.col_offset:].decode().split())
        if first == node.end_lineno:  # one ASCII line (most statements): a slice of it
            line = self.lines[first - 1]
            if line.isascii():
                return " ".join(line[node.col_offset:node.end_col_offset].split())
        return " ".join(self.segment(first, node.col_offset, node.end_lineno,
                                     node.end_col_offset).split())

    def condition(self, stmt) -> str:
        """A branch test as written, with the parentheses around it: ``if (x > 0):``."""
        test = stmt.test
        first = stmt.lineno
        last = max(test.end_lineno, stmt.body[0].lineno - 1)  # the header, up to its colon
        data = "".join(self.lines[first - 1:last]).encode()
        starts = [0]
        for line in self.lines[first - 1:last - 1]:
            starts.append(starts[-1] + len(line.encode()))
        begin = starts[test.lineno - first] + test.col_offset
        end = starts[test.end_lineno - first] + test.end_col_offset
        while True:
            before, after = data[:begin].rstrip(), data[end:].lstrip()
            if not (before.endswith(b"(") and after.startswith(b")")):
                break
            begin = len(before) - 1
            end = len(data) - len(after) + 1
        return " ".join(data[begin:end].decode().split())
