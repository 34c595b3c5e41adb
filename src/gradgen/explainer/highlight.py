"""A small Python highlighter: source text -> one HTML string per line, tokens in spans."""

from __future__ import annotations

import html
import io
import keyword
import re
import tokenize

_BUILTINS = frozenset({"float", "int", "bool", "len", "range", "reversed", "abs", "min", "max",
                       "sum", "isinstance", "tuple", "list", "dict", "Exception",
                       "ArithmeticError", "ValueError", "None", "True", "False"})
LOC_COMMENT = re.compile(r"^#\s+[\w.<>-]+\.py:\d+$")


def _kind(tok: tokenize.TokenInfo) -> str | None:
    """The CSS class of a token (None: plain text)."""
    if tok.type == tokenize.COMMENT:
        return "com"
    if tok.type == tokenize.STRING:
        return "str"
    if tok.type == tokenize.NUMBER:
        return "num"
    if tok.type == tokenize.NAME:
        if keyword.iskeyword(tok.string) and tok.string not in ("None", "True", "False"):
            return "kw"
        if tok.string in _BUILTINS:
            return "bi"
        return None
    if tok.type == tokenize.OP:
        return "op"
    return None


def comment_class(text: str) -> str:
    """How a trailing comment reads on the page: a source location, the seed, or a rule."""
    if LOC_COMMENT.match(text):
        return "com loc"
    if text.startswith("# seed"):
        return "com seed"
    return "com rule"


def tokens_of(text: str) -> list[tokenize.TokenInfo] | None:
    """Python's tokens of ``text`` (None if it does not tokenize)."""
    try:
        return list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return None


def highlight_lines(text: str, tokens: list[tokenize.TokenInfo] | None = None) -> list[str]:
    """``text`` as HTML, one string per line (no newline), every token escaped and wrapped in
    a ``<span class=...>`` by kind. Text the tokenizer rejects is escaped as plain text."""
    lines = text.splitlines()
    out = [[] for _ in lines]
    cursor = [0] * len(lines)  # columns already written per line
    tokens = tokens_of(text) if tokens is None else tokens
    if tokens is None:
        return [html.escape(line) for line in lines]

    def put(row: int, upto: int, css: str | None, until: int | None = None) -> None:
        """Write line ``row`` from its cursor up to column ``upto`` as plain text, then up to
        ``until`` in class ``css``."""
        line = lines[row]
        if upto > cursor[row]:
            out[row].append(html.escape(line[cursor[row]:upto]))
            cursor[row] = upto
        if until is not None and until > cursor[row]:
            piece = html.escape(line[cursor[row]:until])
            out[row].append(f'<span class="{css}">{piece}</span>' if css else piece)
            cursor[row] = until

    for tok in tokens:
        if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT,
                        tokenize.ENDMARKER):
            continue
        css = _kind(tok)
        if tok.type == tokenize.COMMENT:
            before = lines[tok.start[0] - 1][: tok.start[1]]
            css = "com" if not before.strip() else comment_class(tok.string)
        (r0, c0), (r1, c1) = tok.start, tok.end
        for row in range(r0 - 1, r1):
            start = c0 if row == r0 - 1 else 0
            end = c1 if row == r1 - 1 else len(lines[row])
            put(row, start, css, end)
    for row, line in enumerate(lines):
        put(row, len(line), None)
    return ["".join(parts) for parts in out]
