"""Line breaking for emitted statements, the way ``ruff format`` lays them out.

The emitter prints every statement on one line. A line longer than the limit goes through
here: the statement is parsed, turned into a small document of groups and soft line breaks
(the model ruff's formatter uses, after Wadler's "prettier printer"), and printed at the
line width. Only the constructs the emitter prints are covered: assignments to a name,
``return``, ``if`` tests and ``def`` headers over names, numbers, strings, attributes, calls,
subscripts, unary/binary/comparison/boolean operators, tuples, lists and dicts.

The rules, as ruff applies them:
- A bracket pair (call arguments, list, dict, tuple, parentheses) is a group: on one line if
  it fits, else its contents indented on their own lines, one item per line with a trailing
  comma; call arguments and parameters first try to share one indented line.
- A binary chain breaks before its lowest-precedence operators; tighter runs stay together.
- A statement's value gets parentheses only when it must break: a call, name or attribute
  when it fits parenthesized and not otherwise; an operator chain unless it ends (or starts)
  in a bracket it can break instead and has at most one operator of its loosest kind.
- Comments at the end of the statement count toward the width.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import unicodedata

WIDTH = 100
INDENT = 4
FLAT, EXPANDED = "flat", "expanded"
FIRST_LINE, ALL_LINES, OVERFLOW = 0, 1, 2  # how far a measurement looks, and if text may overflow


class _Line:
    """A line break: soft (nothing when flat), soft-or-space (a space when flat) or hard."""

    __slots__ = ("kind",)

    def __init__(self, kind: str):
        self.kind = kind

    def __repr__(self) -> str:
        return self.kind


SOFT, SPACE, HARD = _Line("soft"), _Line("soft_or_space"), _Line("hard")


def text_width(text: str) -> int:
    if text.isascii():  # nearly always: one column per character
        return len(text)
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


# --- the document ------------------------------------------------------------------------------


class Group:
    """Printed flat when everything up to the next line break fits, else expanded. With
    ``only_if``, it is a group only while that group has that mode, else plain content."""

    __slots__ = ("gid", "items", "only_if")

    def __init__(self, items, gid=None, only_if=None):
        self.items, self.gid, self.only_if = items, gid, only_if


class When:
    """Content printed only when a group (the enclosing one for ``gid=None``) has ``mode``."""

    __slots__ = ("gid", "items", "mode")

    def __init__(self, mode, items, gid=None):
        self.items, self.gid, self.mode = items, gid, mode


class Indent:
    """Indents the lines it contains; with ``gid``, only while that group is expanded."""

    __slots__ = ("gid", "items")

    def __init__(self, items, gid=None):
        self.items, self.gid = items, gid


class FitsExpanded:
    """Brackets inside optional parentheses: while those are measured flat, the bracket's
    contents are measured expanded (so breaking inside the bracket can avoid the parentheses)."""

    __slots__ = ("gid", "items")

    def __init__(self, items, gid):
        self.items, self.gid = items, gid


class Suffix:
    """A trailing comment, printed at the end of the line; its width counts on that line."""

    __slots__ = ("text", "width")

    def __init__(self, comment: str):
        self.text = "  " + comment
        self.width = text_width(self.text)


class BestFit:
    """Parentheses around a value only if that makes it fit (names, calls, attributes)."""

    __slots__ = ("gid", "items")

    def __init__(self, items, gid):
        self.items, self.gid = items, gid


class _Close:
    """End of an expanded BestFit: a line break at the outer indent, then ``)``."""

    __slots__ = ()


# --- the printer -------------------------------------------------------------------------------

_LIST_ITERATOR = type(iter([]))


class _Printer:
    def __init__(self, width: int):
        self.width = width
        self.out: list[str] = []
        self.col = 0
        self.line_empty = True
        self.pending: int | None = 0  # indent to write before the next text
        self.modes: dict[int, str] = {}
        self.suffixes: list[str] = []
        self.measured = False  # a parent group was measured flat: nested groups need not be

    def run(self, doc, indent: int = 0) -> str:
        stack = [(indent, EXPANDED, doc)]
        while stack:
            self._step(stack.pop(), stack)
        self.out.extend(self.suffixes)
        return "".join(self.out)

    def _mode_of(self, gid, mode):
        return mode if gid is None else self.modes.get(gid, FLAT)

    def _step(self, cmd, stack) -> None:
        ind, mode, doc = cmd
        kind = type(doc)  # exact types: no document class is subclassed
        if kind is str:
            if self.pending is not None:
                self.out.append(" " * (self.pending * INDENT))
                self.col += self.pending * INDENT
                self.pending = None
            self.out.append(doc)
            self.col += len(doc) if doc.isascii() else text_width(doc)
            self.line_empty = False
        elif kind is list:
            stack.extend([(ind, mode, d) for d in reversed(doc)])
        elif kind is _Line:
            if mode == FLAT and doc is not HARD:
                if doc is SPACE:
                    self._step((ind, mode, " "), stack)
                return
            if self.suffixes:
                self.out.extend(self.suffixes)
                self.suffixes = []
            if not self.line_empty:
                self.out.append("\n")
            self.col, self.line_empty, self.pending, self.measured = 0, True, ind, False
        elif kind is Group:
            if doc.only_if is not None and self._mode_of(doc.only_if[0], mode) != doc.only_if[1]:
                stack.append((ind, mode, doc.items))
                return
            new = self._group_mode(ind, mode, doc.items, doc.gid, stack)
            if doc.gid is not None:
                self.modes[doc.gid] = new
            stack.append((ind, new, doc.items))
        elif kind is When:
            if self._mode_of(doc.gid, mode) == doc.mode:
                stack.append((ind, mode, doc.items))
        elif kind is Indent:
            deeper = doc.gid is None or self.modes.get(doc.gid) == EXPANDED
            stack.append((ind + deeper, mode, doc.items))
        elif kind is FitsExpanded:
            if self.modes.get(doc.gid) == FLAT:
                self.measured = False  # measured expanded: the inner groups must measure again
            stack.append((ind, mode, doc.items))
        elif kind is Suffix:
            self.col += doc.width
            self.suffixes.append(doc.text)
        elif kind is BestFit:
            self._best_fit(ind, mode, doc, stack)
        elif kind is _Close:
            stack.extend([(ind, EXPANDED, ")"), (ind, EXPANDED, HARD)])
        else:  # pragma: no cover - a bug in a builder
            raise TypeError(f"not a document: {doc!r}")

    def _group_mode(self, ind, mode, items, gid, stack) -> str:
        if mode == FLAT and self.measured:
            return FLAT
        self.measured = True
        if gid is not None:
            self.modes[gid] = FLAT
        fits = self._fits([(ind, FLAT, FIRST_LINE, items)], stack)
        return FLAT if fits else EXPANDED

    def _best_fit(self, ind, mode, doc: BestFit, stack) -> None:
        if self._group_mode(ind, mode, doc.items, doc.gid, stack) == FLAT:
            self.modes[doc.gid] = FLAT
            stack.append((ind, FLAT, doc.items))
            return
        self.modes[doc.gid] = EXPANDED
        parenthesized = [(ind, mode, ALL_LINES, ["(", Indent([HARD, doc.items])]),
                         (ind, mode, ALL_LINES, [HARD, ")"])]
        if self._fits(parenthesized, stack):
            stack.append((ind, EXPANDED, _Close()))
            stack.append((ind, EXPANDED, ["(", Indent([HARD, doc.items])]))
        else:
            self.modes[doc.gid] = FLAT
            stack.append((ind, FLAT, doc.items))

    def _fits(self, cmds, rest) -> bool:
        """Does the content fit, up to the first line break of the rest of the document?"""
        col = self.col
        pending = self.pending
        todo = list(reversed(cmds))
        rest_at = len(rest)
        while True:
            if not todo:
                if rest_at == 0:
                    return True
                rest_at -= 1
                ind, mode, doc = rest[rest_at]
                todo.append((ind, mode, FIRST_LINE, doc))
            ind, mode, measure, doc = todo.pop()
            kind = type(doc)  # exact types: no document class is subclassed
            if kind is str:
                if pending is not None:
                    col += pending * INDENT
                    pending = None
                col += len(doc) if doc.isascii() else text_width(doc)
                if col > self.width and measure != OVERFLOW:
                    return False
            elif kind is list:
                # one item at a time: a long sum stops being measured at the width, not
                # after all its terms were queued (measuring was quadratic in its length)
                if doc:
                    todo.append((ind, mode, measure, iter(doc)))
            elif kind is _LIST_ITERATOR:
                for item in doc:
                    if type(item) is not str:
                        if mode == FLAT and item is SOFT:  # flat: nothing
                            continue
                        if mode == FLAT and item is SPACE:  # flat: a space, measured here
                            item = " "
                        else:
                            todo.append((ind, mode, measure, doc))
                            todo.append((ind, mode, measure, item))
                            break
                    # text, the most common item, measured here rather than queued
                    if pending is not None:
                        col += pending * INDENT
                        pending = None
                    col += len(item) if item.isascii() else text_width(item)
                    if col > self.width and measure != OVERFLOW:
                        return False
            elif kind is _Line:
                if mode == FLAT and doc is not HARD:
                    if doc is SPACE:
                        todo.append((ind, mode, measure, " "))
                elif mode == FLAT or measure == FIRST_LINE:
                    return True
                else:
                    col, pending = 0, ind
            elif kind is Group:
                if doc.gid is not None:
                    self.modes[doc.gid] = mode
                todo.append((ind, mode, measure, doc.items))
            elif kind is When:
                if self._mode_of(doc.gid, mode) == doc.mode:
                    todo.append((ind, mode, measure, doc.items))
            elif kind is Indent:
                deeper = doc.gid is None or self.modes.get(doc.gid) == EXPANDED
                todo.append((ind + deeper, mode, measure, doc.items))
            elif kind is FitsExpanded:
                if mode == FLAT and self.modes.get(doc.gid) == FLAT:
                    todo.append((ind, EXPANDED, OVERFLOW, doc.items))
                else:
                    todo.append((ind, mode, measure, doc.items))
            elif kind is Suffix:
                col += doc.width
                if col > self.width:
                    return False
            elif kind is BestFit:
                self.modes[doc.gid] = mode
                todo.append((ind, mode, measure, doc.items))
            elif kind is _Close:
                todo.extend([(ind, EXPANDED, measure, ")"), (ind, EXPANDED, measure, HARD)])


# --- expressions -> documents ----------------------------------------------------------------

_BINARY_PREC = {ast.Pow: 2, ast.Mult: 4, ast.MatMult: 4, ast.Div: 4, ast.FloorDiv: 4,
                ast.Mod: 4, ast.Add: 5, ast.Sub: 5, ast.LShift: 6, ast.RShift: 6,
                ast.BitAnd: 7, ast.BitXor: 8, ast.BitOr: 9}
_COMPARE, _BOOL = 10, 11  # looser than every binary operator, as in ruff's precedence order
_SYMBOL = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.MatMult: "@", ast.Div: "/",
           ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>",
           ast.BitAnd: "&", ast.BitXor: "^", ast.BitOr: "|", ast.Eq: "==", ast.NotEq: "!=",
           ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Is: "is",
           ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in", ast.And: "and", ast.Or: "or",
           ast.USub: "-", ast.UAdd: "+", ast.Invert: "~", ast.Not: "not"}
_BINARY_LIKE = (ast.BinOp, ast.Compare, ast.BoolOp)


class _Builder:
    """Documents for one parsed statement; knows which expressions the source parenthesizes."""

    def __init__(self, source: bytes):
        self.source = source
        self.lines = source.split(b"\n")
        self.parenthesized = _parenthesized_spans(source)
        self.ids = iter(range(1, 1 << 30))

    def span(self, node) -> tuple[int, int, int, int]:
        return node.lineno, node.col_offset, node.end_lineno, node.end_col_offset

    def is_parenthesized(self, node) -> bool:
        return not isinstance(node, ast.Tuple) and self.span(node) in self.parenthesized

    def text(self, node) -> str:
        assert node.lineno == node.end_lineno, "emitted statements are one line"
        return self.lines[node.lineno - 1][node.col_offset:node.end_col_offset].decode()

    # Context: None outside brackets; "paren" inside brackets or parentheses that will show;
    # ("opt", gid) inside optional parentheses that show only if group gid expands.

    def expr(self, node, ctx, keep_parens: bool = True):
        if keep_parens and self.is_parenthesized(node):
            return self.brackets("(", self.expr(node, "paren", False), ")", ctx)
        if isinstance(node, _BINARY_LIKE):
            return self.in_parens_group(self.chain(self.flatten(node), ctx), ctx)
        if isinstance(node, ast.UnaryOp):
            op = _SYMBOL[type(node.op)]
            operand = node.operand
            if isinstance(operand, ast.BinOp) and isinstance(operand.op, ast.Pow) and (
                    not self.is_parenthesized(operand)):
                inner = self.brackets("(", self.expr(operand, "paren", False), ")", ctx)
            else:
                inner = self.expr(operand, ctx)
            return [op + (" " if op == "not" else ""), inner]
        if isinstance(node, ast.Call):
            return [self.expr(node.func, ctx), self.arguments(node, ctx)]
        if isinstance(node, ast.Attribute):
            return [self.expr(node.value, ctx), "." + node.attr]
        if isinstance(node, ast.Subscript):
            index = node.slice
            if isinstance(index, ast.Tuple) and not _tuple_has_parens(self, index):
                inner = Group(self.sequence(index.elts, "paren"))
            else:
                inner = self.expr(index, "paren")
            return [self.expr(node.value, ctx), self.brackets("[", inner, "]", ctx)]
        if isinstance(node, ast.Tuple):
            if len(node.elts) == 1:
                return self.brackets("(", [self.expr(node.elts[0], "paren"), ","], ")", ctx)
            return self.brackets("(", self.sequence(node.elts, "paren"), ")", ctx)
        if isinstance(node, ast.List):
            return self.brackets("[", self.sequence(node.elts, "paren"), "]", ctx)
        if isinstance(node, ast.Dict):
            items = [Group([self.expr(k, "paren"), ": ", self.expr(v, "paren")])
                     for k, v in zip(node.keys, node.values, strict=True)]
            return self.brackets("{", self.join(items), "}", ctx)
        return self.text(node)  # names, numbers, strings, slices, ...

    def arguments(self, call: ast.Call, ctx):
        parts = [self.expr(a, "paren") for a in call.args]
        parts += [[f"{k.arg}=", self.expr(k.value, "paren")] for k in call.keywords]
        if not parts:
            return "()"
        return self.brackets("(", Group(self.join(parts)), ")", ctx)

    def sequence(self, nodes, ctx):
        return self.join([self.expr(n, ctx) for n in nodes])

    @staticmethod
    def join(parts):
        out = []
        for i, part in enumerate(parts):
            if i:
                out += [",", SPACE]
            out.append(part)
        if len(parts) > 1:
            out.append(When(EXPANDED, [","]))
        return out

    def brackets(self, left, content, right, ctx):
        inner = Group([Indent([SOFT, content]), SOFT])
        if isinstance(ctx, tuple):  # inside optional parentheses: try breaking here first
            inner = FitsExpanded([inner], ctx[1])
        return [left, inner, right]

    def in_parens_group(self, content, ctx):
        if ctx is None:
            return content
        if isinstance(ctx, tuple):
            return Group(content, only_if=(ctx[1], EXPANDED))
        return Group(content)

    def soft_space(self, ctx):
        if ctx is None:
            return " "
        if isinstance(ctx, tuple):
            return [When(EXPANDED, [SPACE], ctx[1]), When(FLAT, [" "], ctx[1])]
        return SPACE

    def soft(self, ctx):
        if ctx is None:
            return []
        if isinstance(ctx, tuple):
            return When(EXPANDED, [SOFT], ctx[1])
        return SOFT

    def space_if_breaks(self, ctx):
        if ctx is None:
            return []
        return When(EXPANDED, [" "], ctx[1] if isinstance(ctx, tuple) else None)

    def flatten(self, node, root: bool = True) -> list:
        """Operands and (precedence, symbol) operators of an unparenthesized operator chain."""
        if not root and self.is_parenthesized(node) or not isinstance(node, _BINARY_LIKE):
            return [node]
        if isinstance(node, ast.BinOp):
            op = type(node.op)
            return [*self.flatten(node.left, False), (_BINARY_PREC[op], _SYMBOL[op]),
                    *self.flatten(node.right, False)]
        if isinstance(node, ast.Compare):
            out = self.flatten(node.left, False)
            for op, right in zip(node.ops, node.comparators, strict=True):
                out += [(_COMPARE, _SYMBOL[type(op)]), *self.flatten(right, False)]
            return out
        out = self.flatten(node.values[0], False)
        for value in node.values[1:]:
            out += [(_BOOL, _SYMBOL[type(node.op)]), *self.flatten(value, False)]
        return out

    def chain(self, parts: list, ctx):
        """Break before the loosest operators of the chain; keep tighter runs together."""
        if len(parts) == 1:
            return self.expr(parts[0], ctx)
        loosest = max(p[0] for p in parts[1::2])
        out = []
        start = 0
        cuts = [i for i in range(1, len(parts), 2) if parts[i][0] == loosest]
        for i in cuts:
            left, right = parts[start:i], parts[i + 1:]
            out.append(self.chain(left, ctx) if len(left) == 1 else
                       self.in_parens_group(self.chain(left, ctx), ctx))
            symbol = parts[i][1]
            if symbol == "**" and _simple_power(left[-1], self) and _simple_power(right[0], self):
                out += [self.soft(ctx), symbol, self.space_if_breaks(ctx)]
            else:
                out += [self.soft_space(ctx), symbol, " "]
            start = i + 1
        right = parts[start:]
        out.append(self.chain(right, ctx) if len(right) == 1 else
                   self.in_parens_group(self.chain(right, ctx), ctx))
        return out

    # --- statement values ------------------------------------------------------------------

    def value(self, node):
        """A statement's value: parentheses that show only if it breaks (ruff's IfBreaks)."""
        kind = _needs_parentheses(node, self)
        if kind == "never":
            return self.expr(node, None, keep_parens=False)
        gid = next(self.ids)
        if kind == "best_fit":
            return BestFit(self.expr(node, ("opt", gid), keep_parens=False), gid)
        if _can_omit_parentheses(node, self):
            return self.optional_parens(self.expr(node, ("opt", gid), keep_parens=False), gid)
        return self.parens_if_breaks(self.expr(node, "paren", keep_parens=False))

    @staticmethod
    def optional_parens(content, gid):
        return Group([When(EXPANDED, ["("], gid), Indent([When(EXPANDED, [SOFT], gid), content],
                                                         gid),
                      When(EXPANDED, [SOFT], gid), When(EXPANDED, [")"], gid)], gid)

    def parens_if_breaks(self, content):
        gid = next(self.ids)
        return Group([When(EXPANDED, ["("], gid), Indent([SOFT, content], gid), SOFT,
                      When(EXPANDED, [")"], gid)], gid)


def _tuple_has_parens(builder: _Builder, node: ast.Tuple) -> bool:
    return builder.text(node).startswith("(")


def _simple_power(node, builder: _Builder) -> bool:
    if not isinstance(node, ast.AST) or builder.is_parenthesized(node):
        return False
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float | complex | bool | type(None))
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.UnaryOp):
        return not isinstance(node.op, ast.Not) and _simple_power(node.operand, builder)
    if isinstance(node, ast.Attribute):
        return _simple_power(node.value, builder)
    return False


def _needs_parentheses(node, builder: _Builder) -> str:
    """ruff's OptionalParentheses for a statement value: never, best_fit or multiline."""
    if isinstance(node, ast.Tuple | ast.List | ast.Dict):
        return "never"
    if isinstance(node, _BINARY_LIKE):
        return "multiline"
    if isinstance(node, ast.UnaryOp):
        if builder.is_parenthesized(node.operand):
            return "never"
        return _needs_parentheses(node.operand, builder)
    if isinstance(node, ast.Call | ast.Attribute | ast.Subscript):
        inner = node.func if isinstance(node, ast.Call) else node.value
        if builder.is_parenthesized(inner):
            return "never"
        return _needs_parentheses(inner, builder)
    return "best_fit"  # names, numbers, strings


def _can_omit_parentheses(node, builder: _Builder) -> bool:
    """An operator chain may break in its last (or first) bracket instead of being
    parenthesized when its loosest operator occurs once (ruff/black's rule)."""
    state = {"max": 0, "count": 0, "any": False, "first": None, "last": None}

    def update(prec, count=1):
        if prec > state["max"]:
            state["max"], state["count"] = prec, count
        elif prec == state["max"]:
            state["count"] += count

    def visit(expr):
        state["last"] = expr
        if builder.is_parenthesized(expr):
            state["any"] = True
        else:
            visit_sub(expr)
        if state["first"] is None:
            state["first"] = expr

    def visit_sub(expr):
        if isinstance(expr, ast.List | ast.Dict) or (
                isinstance(expr, ast.Tuple) and _tuple_has_parens(builder, expr)):
            state["any"] = True
            return
        if isinstance(expr, ast.BoolOp):
            update(_BOOL, len(expr.values) - 1)
        elif isinstance(expr, ast.BinOp):
            update(_BINARY_PREC[type(expr.op)])
        elif isinstance(expr, ast.Compare):
            update(_COMPARE, len(expr.ops))
        elif isinstance(expr, ast.Call | ast.Subscript):
            state["any"] = True
            visit(expr.func if isinstance(expr, ast.Call) else expr.value)
            state["last"] = expr
            return
        elif isinstance(expr, ast.Attribute):
            visit(expr.value)
            if builder.is_parenthesized(expr.value) or isinstance(
                    expr.value, ast.Call | ast.Subscript | ast.List | ast.Dict):
                update(1)  # ruff's "attribute" precedence
            state["last"] = expr
            return
        elif isinstance(expr, ast.UnaryOp):
            if isinstance(expr.op, ast.Invert):
                update(3)
            if state["first"] is None:
                state["first"] = "token"
        elif not isinstance(expr, ast.Tuple):
            return  # names, constants, slices
        for child in ast.iter_child_nodes(expr):
            if isinstance(child, ast.expr):
                visit(child)

    visit_sub(node)
    if not state["any"] or state["count"] > 1:
        return False
    if state["max"] in (0, 1):
        return True

    def bracketed(expr) -> bool:
        if not isinstance(expr, ast.AST) or isinstance(expr, ast.Subscript):
            return False
        if builder.is_parenthesized(expr):
            return True
        if isinstance(expr, ast.Call):
            return bool(expr.args or expr.keywords)
        if isinstance(expr, ast.List | ast.Dict):
            return bool(expr.elts if isinstance(expr, ast.List) else expr.keys)
        return isinstance(expr, ast.Tuple) and _tuple_has_parens(builder, expr) and bool(
            expr.elts)

    return bracketed(state["last"]) or bracketed(state["first"])


# The tokens of a statement without strings, comments or other than ASCII (nearly every one
# the emitter lays out): names, numbers, and one character of anything else.
_PLAIN_TOKEN = re.compile(rb"[A-Za-z_]\w*|\d[\w.]*|\.\d[\w.]*|\S")
_OPENING, _CLOSING = frozenset(b"([{"), frozenset(b")]}")


def _parenthesized_spans(source: bytes) -> set[tuple]:
    """(line, col, end_line, end_col) of the contents of every pair of grouping parentheses
    (not call or def parentheses), in the UTF-8 offsets ast uses."""
    if not source.isascii() or any(c in source for c in (b'"', b"'", b"#", b"\\", b"\n")):
        return _tokenized_spans(source)
    # One regex scan (tokenize costs ten times as much): a "(" after a name that is not a
    # keyword, or after a closing bracket, is a call's; any other "(" groups.
    spans = set()
    opened: list[int | None] = []
    previous = b""
    for token in _PLAIN_TOKEN.finditer(source):
        text = token.group()
        char = text[0]
        if len(text) == 1 and char in _OPENING:
            grouping = char == 40 and not (  # "("
                (previous[:1].isalpha() or previous[:1] == b"_")
                and previous.decode() not in _KEYWORDS_BEFORE_PAREN
                or len(previous) == 1 and previous[0] in _CLOSING)
            opened.append(token.end() if grouping else None)
        elif len(text) == 1 and char in _CLOSING:
            start = opened.pop() if opened else None
            if start is not None:
                spans.add((1, start, 1, token.start()))
        previous = text
    return {_strip(source, s) for s in spans}


def _tokenized_spans(source: bytes) -> set[tuple]:
    """:func:`_parenthesized_spans` for any source, by Python's tokenizer."""
    spans = set()
    opened: list[tuple | None] = []
    previous = None
    tokens = tokenize.tokenize(io.BytesIO(source).readline)
    line_bytes = source.split(b"\n")

    def byte_col(row, col):
        return len(line_bytes[row - 1].decode()[:col].encode())

    for tok in tokens:
        if tok.type == tokenize.OP and tok.string in "([{":
            grouping = tok.string == "(" and not (
                previous is not None and (previous.type in (tokenize.NAME, tokenize.STRING)
                                          and previous.string not in _KEYWORDS_BEFORE_PAREN
                                          or previous.string in (")", "]", "}")))
            opened.append((tok.end[0], byte_col(*tok.end)) if grouping else None)
        elif tok.type == tokenize.OP and tok.string in ")]}":
            start = opened.pop() if opened else None
            if start is not None:
                spans.add((*start, tok.start[0], byte_col(*tok.start)))
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.ENCODING):
            previous = tok
    return {_strip(source, s) for s in spans}


_KEYWORDS_BEFORE_PAREN = {"return", "if", "not", "and", "or", "in", "is", "else", "elif",
                          "raise", "assert", "while", "for", "lambda", "yield", "await"}


def _strip(source: bytes, span):
    """Contents' span without surrounding spaces (the parenthesized expression's own span)."""
    row, col, end_row, end_col = span
    line = source.split(b"\n")[row - 1]
    while col < end_col and line[col:col + 1] == b" ":
        col += 1
    end_line = source.split(b"\n")[end_row - 1]
    while end_col > 0 and end_line[end_col - 1:end_col] == b" ":
        end_col -= 1
    return row, col, end_row, end_col


# --- statements ------------------------------------------------------------------------------


def fits(line: str, indent: int, comment: str = "", width: int = WIDTH) -> bool:
    comment_width = text_width("  " + comment) if comment else 0
    return indent * INDENT + text_width(line) + comment_width <= width


def lay_out(line: str, indent: int = 0, width: int = WIDTH) -> str:
    """:func:`statement` for a line that may end in a ``# comment``."""
    if fits(line, indent, "", width):
        return line
    code, comment = line, ""
    if "#" not in line:
        pass
    elif "'" not in line and '"' not in line:  # no string: the comment starts at the first #
        at = line.index("#")
        code, comment = line[:at].rstrip(), line[at:]
    else:
        for tok in tokenize.generate_tokens(io.StringIO(line).readline):
            if tok.type == tokenize.COMMENT:
                code, comment = line[:tok.start[1]].rstrip(), tok.string
                break
    return statement(code, indent, comment, width)


def statement(line: str, indent: int = 0, comment: str = "", width: int = WIDTH) -> str:
    """``line`` (one statement, no indentation) laid out at ``indent`` levels the way ruff
    format would, without the indentation of its first line; ``comment`` (``# ...``) trails
    it. A line that fits is returned as it is."""
    flat = line + (f"  {comment}" if comment else "")
    if fits(line, indent, comment, width):
        return flat
    if not comment:  # the common long statement: an arithmetic value in parentheses
        target, assign, value = line.partition(" = ")
        wrapped = assign and parenthesized_assignment(target, value, indent, width)
        if wrapped:
            return wrapped
    block = "\n    pass" if line.endswith(":") else ""
    try:
        tree = ast.parse(line + block)
        builder = _Builder(line.encode())
        doc = _statement_doc(tree.body[0], builder, line, Suffix(comment) if comment else None)
        text = _print(doc, indent, width)
    except (SyntaxError, ValueError):  # not a statement the layout knows: leave it long
        return flat
    if _compiled(text + block) != _compiled(line + block):  # pragma: no cover - a layout bug
        return flat
    return text


# A bracket, or a binary + or - (printed with a space on each side; a sign has none after it).
_SUM_SPLIT = re.compile(r"[()\[\]{}]| [+-] ")


def _outside_brackets(pattern: re.Pattern, value: str) -> list[re.Match] | None:
    """The matches of ``pattern`` (which also matches every bracket) in ``value`` that are
    outside all brackets; None when the brackets do not balance."""
    depth, found = 0, []
    for match in pattern.finditer(value):
        token = match.group()
        if token in "([{":
            depth += 1
        elif token in ")]}":
            depth -= 1
            if depth < 0:  # closed before it was opened: ``a)(b``
                return None
        elif depth == 0:
            found.append(match)
    return found if depth == 0 else None


def sum_assignment(target: str, value: str, indent: int = 0, width: int = WIDTH) -> str | None:
    """``target = a + b - c ...`` laid out as :func:`statement` lays it out, without parsing,
    for the long fused sums of a backward pass (thousands of terms in large functions, where
    the general layout costs more than the rest of the statement's emission). ``value``
    must be a sum printed with minimal parentheses: nothing outside brackets binds looser
    than its ``+`` and ``-``. With two or more of those, ruff always parenthesizes the value:
    on one line inside the parentheses if it fits there, else one term per line, each
    operator leading its term. None (ask :func:`statement`) for anything else: a line that
    fits, a comment or a string, fewer than three terms, or a term too long for its line."""
    line = f"{target} = {value}"
    if fits(line, indent, "", width) or not line.isascii() or any(
            c in value for c in "#'\""):
        return None
    signs = _outside_brackets(_SUM_SPLIT, value)
    if signs is None:
        return None
    terms, start = [], 0
    for match in signs:
        terms.append(value[start:match.start()])
        start = match.start() + 1  # the next term starts with its operator: "+ b"
    terms.append(value[start:])
    if len(terms) < 3:
        return None  # one operator: ruff may break in a bracket instead
    inner = (indent + 1) * INDENT
    if inner + len(value) <= width:
        return f"{target} = (\n    {value}\n)"
    if inner + max(map(len, terms)) > width:
        return None  # a term breaks inside itself
    return f"{target} = (\n    " + "\n    ".join(terms) + "\n)"


# A bracket, or a binary operator as the printer writes it: spaced, or ** between simple
# operands (t**2); anything else that binds looser than + and - sends a value to statement.
_OPERATOR_SPLIT = re.compile(r"[()\[\]{}]| (?:[-+*/%@]|//) |\*\*")
_LOOSER = re.compile(r" (?:if|else|and|or|not|in|is|lambda|for)\b|[<>=!]=?|,|:")
_PRIORITY = {"+": 3, "-": 3, "*": 2, "/": 2, "//": 2, "%": 2, "@": 2, "**": 1}


def parenthesized_assignment(target: str, value: str, indent: int = 0,
                             width: int = WIDTH) -> str | None:
    """``target = a * b / c - d ...`` that does not fit, laid out as :func:`statement` (and
    ruff format) lays it out, without parsing, where the value is an arithmetic chain that
    ruff cannot split any other way (two or more operators of its loosest kind, or one whose
    operands at both ends hold no bracket): the value on one line of its own inside
    parentheses, or, too long for that, one term per line, each of the loosest operators
    leading its term. A chain whose one loosest operator leaves a call or a group at the
    end: see :func:`_last_bracket_split`. None for anything else (a line that fits, a
    comment, a string, a comparison, a group at the start, a term too long for its line)."""
    line = f"{target} = {value}"
    if fits(line, indent, "", width):
        return None
    if not line.isascii() or not target.isidentifier() or any(c in value for c in "#'\"\\"):
        return None
    found = _outside_brackets(_OPERATOR_SPLIT, value)
    if not found or _LOOSER.search(value.replace("**", "")):
        return None
    operators = [match.group().strip() for match in found]
    operands = [value[:found[0].start()], value[found[-1].end():]]  # the two at the ends
    loosest = max(map(_PRIORITY.__getitem__, operators))
    if sum(_PRIORITY[o] == loosest for o in operators) == 1 and any(
            c in operands[0] or c in operands[-1] for c in "([{"):
        # ruff may break inside the bracket at an end instead
        return _last_bracket_split(target, value, operands, operators[-1], indent, width)
    if (indent + 1) * INDENT + len(value) <= width:
        return f"{target} = (\n    {value}\n)"
    if loosest == _PRIORITY["**"]:
        return None
    # too long for one line: a term per line, each of the loosest operators leading its term
    terms, start = [], 0
    for match, operator in zip(found, operators, strict=True):
        if _PRIORITY[operator] == loosest:
            terms.append(value[start:match.start()])
            start = match.start() + 1
    terms.append(value[start:])
    if (indent + 1) * INDENT + max(map(len, terms)) > width:
        return None  # a term breaks inside itself
    return f"{target} = (\n    " + "\n    ".join(terms) + "\n)"


# The last operand of a chain, when it ends in a call of one argument or a group: the name
# called (if any), then the bracket's content
_LAST_BRACKET = re.compile(r"((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)?\((.+)\)")


def _last_bracket_split(target: str, value: str, operands: list[str], operator: str,
                        indent: int, width: int) -> str | None:
    """``target = a * b - c * (d - e)`` whose one loosest operator leaves a group or a call
    of one argument at the end (and nothing bracketed at the start): ruff omits the optional
    parentheses and breaks that last bracket when the line up to it fits (``target = a * b
    - c * (`` / ``    d - e`` / ``)``); when it does not, and nothing before that bracket
    is bracketed either, the value goes on a line of its own in parentheses. None where ruff
    breaks anything else (statement() lays those out)."""
    first, last = operands
    match = _LAST_BRACKET.fullmatch(last)
    if match is None or operator == "**" or any(c in first for c in "([{"):
        return None  # (a subscript, a power, a group at the start)
    inner = match.group(2)
    if _outside_brackets(_COMMA, inner) != []:
        return None  # several arguments, or the brackets close before the end
    head = value[:len(value) - len(inner) - 1]  # up to the last bracket, opened
    if indent * INDENT + len(target) + 3 + len(head) <= width:
        if (indent + 1) * INDENT + len(inner) > width:
            return None
        return f"{target} = {head}\n    {inner}\n)"
    if (indent + 1) * INDENT + len(value) > width or any(c in head for c in "([{"):
        return None  # (ruff breaks an earlier bracket of the line then)
    return f"{target} = (\n    {value}\n)"


_COMMA = re.compile(r"[()\[\]{}]|,")


def _compiled(source: str) -> tuple:
    """What the statement computes: its bytecode, names and constants (not the line numbers
    they are on). Layout may move operands over lines and add parentheses that only group;
    any change of what is computed, or in which order (``a + (b + c)``), changes this. The
    constants are compared by type and text (``0.0 == -0.0``, ``1 == 1.0``). A ``return``
    is compiled as an assignment of its value (a module has no return)."""
    if source.startswith("return "):
        source = "_ = " + source[len("return "):]
    code = compile(source, "<layout>", "exec")
    return code.co_code, code.co_names, [(type(c), repr(c)) for c in code.co_consts]


def _print(doc, indent: int, width: int) -> str:
    """Print at ``indent`` levels (counted in the width), without that indentation."""
    printer = _Printer(width)
    printer.col, printer.pending, printer.line_empty = indent * INDENT, None, False
    text = printer.run(doc, indent)
    prefix = " " * (indent * INDENT)
    lines = text.split("\n")
    assert all(line.startswith(prefix) for line in lines[1:])
    return "\n".join([lines[0], *(line[len(prefix):] for line in lines[1:])])


def _statement_doc(stmt, builder: _Builder, line: str, suffix):
    tail = [suffix] if suffix else []
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = builder.text(stmt.targets[0])
        return [f"{target} = ", _assigned(stmt.value, builder, suffix)]
    if isinstance(stmt, ast.Return) and stmt.value is not None:
        value = stmt.value
        if isinstance(value, ast.Tuple) and not _tuple_has_parens(builder, value):
            if len(value.elts) == 2:
                gid = next(builder.ids)
                content = builder.sequence(value.elts, ("opt", gid))
                return ["return ", builder.optional_parens(content, gid), *tail]
            sequence = builder.sequence(value.elts, "paren")
            return ["return ", builder.parens_if_breaks(sequence), *tail]
        return ["return ", _assigned(value, builder, suffix)]
    if isinstance(stmt, ast.If):
        return ["if ", builder.value(stmt.test), ":", *tail]
    if isinstance(stmt, ast.Expr):
        return [builder.value(stmt.value), *tail]
    if isinstance(stmt, ast.Raise) and stmt.exc is not None and stmt.cause is None:
        return ["raise ", builder.value(stmt.exc), *tail]
    raise ValueError(f"cannot lay out {line!r}")


def _assigned(value, builder: _Builder, suffix):
    """The value of an assignment or return; a trailing comment after a plain name or number
    moves inside the parentheses when they show."""
    if isinstance(value, ast.Name | ast.Constant) and suffix is not None:
        gid = next(builder.ids)
        inline = BestFit([builder.expr(value, None, False), When(EXPANDED, [suffix], gid)], gid)
        return [inline, When(FLAT, [suffix], gid)]
    tail = [suffix] if suffix else []
    if builder.is_parenthesized(value) and isinstance(value, ast.Tuple):
        return [builder.expr(value, None), *tail]
    return [builder.value(value), *tail]


def header(name: str, params: list[str], indent: int = 0, width: int = WIDTH) -> str:
    """``def name(params):``, the parameters on their own lines when the line is too long."""
    line = f"def {name}({', '.join(params)}):"
    if fits(line, indent, "", width) or not params:
        return line
    joined = _Builder.join(list(params))[:-1] if len(params) > 1 else list(params)
    joined.append(When(EXPANDED, [","]))  # parameters always get the trailing comma
    inner = Group(joined) if len(params) > 1 else joined
    doc = [f"def {name}", Group(["(", Indent([SOFT, inner]), SOFT, ")"]), ":"]
    return _print(doc, indent, width)

