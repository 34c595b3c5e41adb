"""The standard library's ast over source lines: per line, the targets it assigns, its
statement and its branch test.

Only statements are visited (never expressions), so a table costs a few microseconds per
line; ``source.py`` decides which lines to parse (one function, or the whole file).
"""

from __future__ import annotations

import ast
import functools
import keyword
import re
from itertools import compress, count, repeat
from operator import sub
from typing import NamedTuple

# Statements that libcst called "small": one or more of them (``a = 1; b = 2``) make a line.
_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return, ast.Pass,
           ast.Break, ast.Continue, ast.Delete, ast.Import, ast.ImportFrom, ast.Global,
           ast.Nonlocal, ast.Raise, ast.Assert)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_PLACE_HOLDERS = (ast.Pass, ast.Expr)  # what _skeleton writes for the lines it takes out


class LineInfo(NamedTuple):
    """What a source line holds: the targets it assigns, its statement, a branch test. (A
    tuple: one is made per line of every traced function, three times faster than a frozen
    dataclass.)"""

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
    rest = "".join(lines[end - 1:])  # from the def line, whose newline the search starts at
    outside = _code_at_most(indent).search(rest, len(lines[end - 1]) - 1)
    end += rest.count("\n", 0, outside.start()) if outside is not None else len(lines) - end
    # Lines before the def keep the file's line numbers; "if 1:" admits an indented def.
    prefix = _nothing(first - 2) + "if 1:\n" if indent else _nothing(first - 1)
    body_lines, whole = _skeleton(lines[first - 1:end], first)
    if whole and not head.lstrip().startswith("@"):  # plain code, no decorator: no parser?
        node = _straight_def(body_lines, first, indent)
        if node is not None:
            node.whole_lines = whole
            return node
    try:
        module = ast.parse(prefix + "".join(body_lines))
    except (SyntaxError, ValueError):
        return None
    body = module.body[-1].body if indent else module.body[1:] if prefix.strip() else (
        module.body)
    if len(body) != 1 or not isinstance(body[0], _DEFS):
        return None
    node = body[0]
    start = min([d.lineno for d in node.decorator_list] + [node.lineno])
    if start != first or not node.body or node.body[0].lineno == _header_end(node):
        return None
    node.whole_lines = whole  # (see _skeleton: the assignments taken out)
    return node


# A def header on one line, and the statements a skeleton may leave of straight-line code
_HEADER = re.compile(r"[ \t]*def[ \t]+([A-Za-z_]\w*)[ \t]*\(.*\)[^:]*:[ \t]*\n?")
_STRAIGHT = {"pass": ast.Pass, "return": ast.Return}


def _straight_def(body_lines: list[str], first: int, indent: int) -> ast.FunctionDef | None:
    """A def whose skeleton (plain code) is a header on one line and a body of one-line
    ``return``, ``pass`` and _skeleton's place holders, as the parser gives it, without the
    parser (a tenth of a 100-op first call's source analysis); None for anything else. Its
    statements carry what ``line_table_of``, ``block_end`` and ``parse_def`` read: their
    kind, lines and columns."""
    header = _HEADER.fullmatch(body_lines[0])
    if header is None or not body_lines[0].isascii():
        return None
    body: list[ast.stmt] = []
    said: dict[int, LineInfo] = {}  # the LineInfo of each return and pass line
    line, column = first + 1, None
    for text in body_lines[1:]:
        words = text.split(None, 1)
        if words:
            own = len(text) - len(text.lstrip())
            if column is None:
                column = own
            if own != column or own <= indent:
                return None
            if words[0].startswith('"""'):  # a place holder: a string over its run of lines
                last = line + text.count("\n") - 1
                body.append(ast.Expr(lineno=line, col_offset=own, end_lineno=last,
                                     end_col_offset=own + 3))
                line = last + 1
                continue
            kind = _STRAIGHT.get(words[0])
            if kind is None or not text.isascii() or (kind is ast.Pass and len(words) > 1):
                return None
            if len(words) > 1 and (text.count("(") != text.count(")") or text.count("[") != (
                    text.count("]")) or text.count("{") != text.count("}")):
                return None  # (its expression may go on below)
            body.append(kind(lineno=line, col_offset=own, end_lineno=line,
                             end_col_offset=len(text.rstrip())))
            said[line] = LineInfo((), " ".join(text.split()))  # (as _Text.code says it;
            # a ``pass`` that holds an assignment's place is overwritten by line_table_of)
        line += 1
    if not body:
        return None
    node = ast.FunctionDef(name=header[1], body=body, decorator_list=[], lineno=first,
                           col_offset=indent, end_lineno=body[-1].end_lineno,
                           end_col_offset=body[-1].end_col_offset)
    node.own_lines = said  # line_table_of takes them as they are: nothing else to visit
    return node


@functools.cache
def _code_at_most(indent: int) -> re.Pattern:
    """The newline before a line of code (not a comment, not a closing bracket) indented by
    at most ``indent`` characters. (It starts with the newline, not ``^``: the regex engine
    then jumps from newline to newline instead of trying every character.)"""
    return re.compile(rf"\n[^\S\n]{{0,{indent}}}[^\s#)\]}}]")


# Every line of a def, one match each: when the line is one whole assignment, its targets
# (else an empty string). That is names, an operator (= or +=, ...) and a value that holds
# no "=" (keyword arguments, a = b = c, a == b) and no ":" (lambda, walrus, annotation).
# Possessive repeats (nothing they take can be given back to a match) and the plain "="
# first: a quarter fewer instructions per line than backtracking repeats. Each match starts
# at the newline before its line (``_assignment_targets`` puts one before the first): with a
# literal first, the regex engine jumps from newline to newline, where ``^`` had it try a
# match at every character (3% fewer instructions; the matching itself, ~90 instructions
# per character, is the rest, and C loops of str methods that decide the common
# ``name = value`` line cost half as much again).
_TARGETS = re.compile(
    r"\n[ \t]*(?:([A-Za-z_]\w*+(?:[ \t]*+,[ \t]*+[A-Za-z_]\w*+)*+)[ \t]*+"
    r"(?:=|[-+*/%@&|^]=|//=|\*\*=|>>=|<<=)[ \t]*+[^=:\s][^=:\n]*+$)?", re.MULTILINE)


def _assignment_targets(text: str) -> list[str]:
    """Per line of ``text`` (and one more after its last newline): the targets of the line
    when it is one whole assignment, else an empty string (see _TARGETS)."""
    return _TARGETS.findall("\n" + text)


_NOT_PLAIN = ("\\", "'", '"', "#", ";")  # strings, comments, continuations, a; b
_OTHER_SPACES = "\t\x0b\x0c\r\x1c\x1d\x1e\x1f"  # what str.split() splits ASCII on, but " \n"
_NOT_BRACKET = bytes(set(range(256)) - set(b"()[]{}\n"))  # bytes.translate deletes these
_KEYWORDS = frozenset(keyword.kwlist)
_NOT_ONE, _NEXT = (1).__ne__, (1).__add__


def _skeleton(lines: list[str], first: int) -> tuple[list[str], dict[int, LineInfo]]:
    """The def's lines with its one-line assignments taken out, and the LineInfo of each of
    those lines, by line number. The line table needs statements, not expressions, and
    building the expressions of a long unrolled function is most of the parser's time: such a
    line's targets are read here and its statement is the line itself, so the parser only
    sees one placeholder per run of them: a ``pass`` for one line, else a string that spans
    the run's lines (a block is never left empty, the def's end line stays, and the
    tokenizer reads the string at once where it took half a microsecond per blank line).
    Only for plain code (no string, comment, backslash or semicolon, so brackets can be
    counted by characters); anything else is parsed as written. The text is read by one
    regex scan and the LineInfos are made by C loops (map, zip, compress): Python code that
    ran once per line cost more than the parser it saves. (``tuple.__new__`` mapped over
    ``repeat(LineInfo)`` makes each LineInfo from its tuple in half the time a
    ``functools.partial`` of it takes.)"""
    text = "".join(lines)
    if any(map(text.__contains__, _NOT_PLAIN)):  # (C loops: a generator costs 5x)
        return lines, {}
    names = _assignment_targets(text)[:len(lines)]
    assigned = list(compress(range(len(lines)), names))  # (0-based) the assignment lines
    inside = _bracketed_lines(text)
    if inside:
        assigned = [k for k in assigned if k not in inside]
    targets = list(zip(map(names.__getitem__, assigned)))  # ("t1",) for t1 = ...
    if not _KEYWORDS.isdisjoint(names) or "," in "".join(names):  # a, b = ...; if = ...
        split = [tuple(name.strip() for name in names[k].split(",")) for k in assigned]
        keep = [_KEYWORDS.isdisjoint(found) for found in split]
        assigned, targets = list(compress(assigned, keep)), list(compress(split, keep))
    said = list(map(str.strip, map(lines.__getitem__, assigned)))
    spaced = " ".join(said)
    # whitespace other than single spaces? (in ASCII text, a scan per kind of space costs
    # less than isprintable's look at every character)
    if "  " in spaced or (any(map(spaced.__contains__, _OTHER_SPACES)) if spaced.isascii()
                          else not spaced.isprintable()):
        said = [" ".join(statement.split()) for statement in said]  # as written, evenly
    whole = dict(zip(map(first.__add__, assigned),
                     map(tuple.__new__, repeat(LineInfo), zip(targets, said, repeat(None)))))
    # Runs of assignment lines (first, last): a run ends where the next assignment line is
    # not the next line (found by C loops; set differences cost ten times as much)
    breaks = list(compress(count(), map(_NOT_ONE, map(sub, assigned[1:], assigned))))
    runs = zip([*assigned[:1], *map(assigned.__getitem__, map(_NEXT, breaks))],
               [*map(assigned.__getitem__, breaks), *assigned[-1:]])
    out: list[str] = []
    done = 0
    for start, last in runs:
        out += lines[done:start]
        line = lines[start]
        indent = line[:len(line) - len(line.lstrip())]
        out.append(f"{indent}pass\n" if start == last else indent + _nothing(last - start + 1))
        done = last + 1
    out += lines[done:]
    return out, whole


def _nothing(count: int) -> str:
    """``count`` lines the parser reads as one token, a string (blank lines cost it half a
    microsecond each): they hold the place of lines it need not see."""
    return '"""' + "\n" * (count - 1) + '"""\n' if count > 1 else "\n" * count


def _bracketed_lines(text: str) -> set[int]:
    """The lines (0-based) that open or close a bracket pair left open at their end, or lie
    inside one: their text is not a whole statement. Pairs closed on their own line, like the
    parentheses of ``math.sin(x)``, are removed from the brackets of the text first."""
    brackets = text.encode().translate(None, _NOT_BRACKET)
    while True:
        fewer = brackets.replace(b"()", b"").replace(b"[]", b"").replace(b"{}", b"")
        if len(fewer) == len(brackets):
            break
        brackets = fewer
    inside: set[int] = set()
    if len(brackets) == brackets.count(b"\n"):  # every line closes what it opens
        return inside
    depth, previous = 0, 0
    for k, left in enumerate(brackets.split(b"\n")):
        if not left:
            continue
        if depth > 0:
            inside.update(range(previous + 1, k))
        inside.add(k)
        depth += sum(map(b"([{".count, left)) - sum(map(b")]}".count, left))
        previous = k
    if depth > 0:
        inside.update(range(previous + 1, text.count("\n") + 1))
    return inside


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
    whole: dict[int, LineInfo] = {}
    for stmt in statements:
        whole.update(getattr(stmt, "whole_lines", {}))
    # A def _straight_def read has its other lines' LineInfo too (one line each: return,
    # pass), where a ``pass`` may hold the place of an assignment, which ``whole`` has.
    straight = [stmt for stmt in statements if hasattr(stmt, "own_lines")]
    for stmt in straight:
        table.update(stmt.own_lines)
    table.update(whole)  # the one-line assignments, read by _skeleton
    if straight:
        statements = [stmt for stmt in statements if not hasattr(stmt, "own_lines")]
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
            if isinstance(stmt, _BRANCHES):
                test = text.condition(stmt)
                info = LineInfo((), test, test)
                for line in {stmt.lineno, *range(stmt.test.lineno, stmt.test.end_lineno + 1)}:
                    table[line] = info
            bodies, parts = _BLOCKS.get(type(stmt)) or _blocks(type(stmt))
            for field in bodies:
                inner = getattr(stmt, field, None)
                if inner:
                    pending.append(inner)
            for field in parts:
                for part in getattr(stmt, field, ()):
                    pending.append(part.body)
        _record(group, text, table)


_BRANCHES = (ast.If, ast.While)
# kind of compound statement -> (its fields that are blocks, its fields of handlers or cases)
_BLOCKS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _blocks(kind: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Where a compound statement keeps its blocks, from its kind's fields, once per kind:
    ``getattr(stmt, "orelse", None)`` on a def raised and caught an AttributeError each time
    (a def has no else), four of which cost as much as the rest of a short function's table."""
    fields = kind._fields
    found = _BLOCKS[kind] = (
        tuple(f for f in ("body", "orelse", "finalbody") if f in fields),
        tuple(f for f in ("handlers", "cases") if f in fields))
    return found


def _record(group: list[ast.stmt], text: _Text, table: dict[int, LineInfo]) -> None:
    """One line of simple statements: every line it spans says what its last statement does
    (a statement after ``if c:`` on the same line belongs to the if, and says nothing)."""
    if not group or not text.starts_line(group[0]):
        return
    stmt = group[-1]
    if stmt.lineno in text.whole and type(stmt) in _PLACE_HOLDERS:
        return  # one-line assignments parsed as `pass` or a string: line_table_of has them
    info = LineInfo(_targets(stmt), text.code(stmt))
    first, last = group[0].lineno, stmt.end_lineno
    if first == last:  # most statements
        table[first] = info
        return
    for line in range(first, last + 1):
        table[line] = info


# (tuples, not ``ast.Tuple | ast.List``: a union written in a function is made on every call)
_SEQUENCES, _NAMED_ONCE = (ast.Tuple, ast.List), (ast.AugAssign, ast.AnnAssign)


def _targets(stmt: ast.stmt) -> tuple[str, ...]:
    if isinstance(stmt, ast.Assign):
        if len(stmt.targets) != 1:
            return ()  # a = b = value: no one name for the value
        target = stmt.targets[0]
        if isinstance(target, ast.Name):
            return (target.id,)
        if isinstance(target, _SEQUENCES):
            elts = [e.value if isinstance(e, ast.Starred) else e for e in target.elts]
            if all(isinstance(e, ast.Name) for e in elts):
                return tuple(e.id for e in elts)
        return ()
    if isinstance(stmt, _NAMED_ONCE) and isinstance(stmt.target, ast.Name):
        return (stmt.target.id,)
    return ()


class _Text:
    """Source text of ast nodes, whitespace collapsed to single spaces (offsets are UTF-8)."""

    def __init__(self, lines: list[str], whole: dict[int, LineInfo] | None = None):
        self.lines = lines
        self.whole = whole or {}  # the lines of the assignments taken out (_skeleton)

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
