"""Where user code lives: source locations of traced ops and the names the user assigned."""

from __future__ import annotations

import bisect
import codecs
import inspect
import linecache
import os
import sys
import sysconfig
import types
import weakref
from dataclasses import dataclass, field
from itertools import accumulate, compress, repeat
from operator import and_, itemgetter, ne, truth
from typing import NamedTuple

import numpy as np

from . import linemap
from .linemap import LineInfo

_GRADGEN_DIR = os.path.dirname(os.path.abspath(__file__))
# Frames inside NumPy, the standard library and installed packages are never "the user's
# line", even when they call our ops (and the line watcher never follows them).
_LIBRARY_DIRS = tuple(sorted({
    os.path.abspath(p) + os.sep
    for p in (os.path.dirname(np.__file__), *(sysconfig.get_paths().get(k) for k in (
        "stdlib", "platstdlib", "purelib", "platlib")))
    if p
}))


@dataclass(slots=True, unsafe_hash=True)
class SourceLoc:
    """A user source position: the innermost frame outside gradgen and NumPy. A value, never
    changed once made (the ops of one line share it); not a frozen dataclass because the
    tracer makes one per traced line and a frozen one costs three times as much."""

    file: str
    line: int
    func: str
    # what short and text() say, once asked (the emitter asks for every statement it writes)
    _short: str | None = field(default=None, init=False, repr=False, compare=False)
    _text: str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def short(self) -> str:
        short = self._short
        if short is None:
            base = _BASENAMES.get(self.file)
            if base is None:
                if len(_BASENAMES) >= 4096:  # (exec'd code may name a new file each time)
                    _BASENAMES.clear()
                base = _BASENAMES[self.file] = os.path.basename(self.file)
            short = self._short = f"{base}:{self.line}"
        return short

    def __str__(self) -> str:
        return self.short

    def text(self) -> str:
        """The source statement at this line, stripped, or '' when there is no source (as
        the file read when the line was first asked about)."""
        text = self._text
        if text is None:
            text = self._text = statement_text(self.file, self.line)
        return text


# filename -> its base name, for SourceLoc.short: the emitter asks for the short form of every
# line's SourceLoc, and os.path.basename was a Python call per line
_BASENAMES: dict[str, str] = {}

# filename -> is_user_file(filename): the tracer reads it for every frame between a traced op
# and the user's line, where a dict lookup costs a third of a cached function's call
USER_FILES: dict[str, bool] = {}


def is_user_file(filename: str) -> bool:
    """True for code the user wrote: neither gradgen itself nor the libraries it wraps."""
    known = USER_FILES.get(filename)
    if known is None:
        if len(USER_FILES) >= 4096:  # (exec'd code may name a new file each time)
            USER_FILES.clear()
        known = USER_FILES[filename] = _is_user_path(filename)
    return known


def _is_user_path(filename: str) -> bool:
    if filename.startswith(("<__array_function__", "<frozen")):
        return False
    path = os.path.abspath(filename) if not filename.startswith("<") else filename
    if path.startswith(_GRADGEN_DIR + os.sep):
        return False
    return not path.startswith(_LIBRARY_DIRS)


def user_frame(start=None):
    """The innermost frame whose code is the user's (None when gradgen is called directly)."""
    frame = start if start is not None else sys._getframe(1)
    while frame is not None and not is_user_file(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def loc_of_frame(frame) -> SourceLoc | None:
    if frame is None:
        return None
    return SourceLoc(frame.f_code.co_filename, frame_line(frame), frame.f_code.co_name)


# Python 3.11 finds ``frame.f_lineno`` by walking the code's line table from its start, so in
# a long unrolled function each lookup costs as much as the function is long (0.7 ms at
# 20,000 lines). A long function's table is read once and searched by bisection.
# The table holds spans of one line (the instructions of one line in a row), which the
# tracer's next op checks before it asks the table again; they are read by C loops (map,
# compress, accumulate). (Filling a list with the line of every instruction cost a
# microsecond per op; unpacking co_lines' ranges with ``zip(*...)`` grows faster than the
# function from 10,000 ops on.)
_LONG_CODE = 2048  # bytes of bytecode above which the table pays for itself
_first, _third = itemgetter(0), itemgetter(2)
# id(code) -> _LineTable; code objects hash by their whole contents, so they are not keys
_LINES_OF_CODE: dict[int, _LineTable] = {}


class _LineTable(NamedTuple):
    """A code object's spans of one line, one list per field: lists of ints
    are three objects for the cyclic GC where a tuple per range was one per statement."""

    code: weakref.ref  # (the code object itself would be kept alive by the cache)
    starts: list[int]  # byte offset where each span of one line starts, for bisect
    lines: list[int | None]  # the line of each span (None: no line, ask the frame)
    # the offset where each span ends: the next one's start, then the code's end
    ends: list[int]

    def span(self, lasti: int) -> tuple[int, int, int] | None:
        """(line, start, stop) around instruction offset ``lasti``; None where the table
        says no line (ask the frame)."""
        _, starts, lines, ends = self  # (unpacked: a named field's read is slow, and the
        k = bisect.bisect_right(starts, lasti) - 1  # tracer asks this once per source line)
        if k >= 0:
            line, end = lines[k], ends[k]
            if lasti < end and line is not None:
                return line, starts[k], end
        return None


def frame_line(frame) -> int:
    """``frame.f_lineno``, in logarithmic time however long the frame's function is."""
    return line_span(frame, frame.f_lasti)[0]


def line_span(frame, lasti: int) -> tuple[int, int, int]:
    """(line, start, stop): the line ``frame`` runs at instruction offset ``lasti``, and the
    offsets [start, stop) around it that run that line too (the tracer's location of the
    next op is the same while the frame stays in them)."""
    table = line_table(frame.f_code)
    span = table.span(lasti) if table is not None else None
    return span if span is not None else (frame.f_lineno, lasti, lasti + 1)


def line_table(code) -> _LineTable | None:
    """The merged line table of a long function (``line_span`` searches it; the tracer keeps
    the one of the frame it follows), None for a short one: its ``f_lineno`` is cheap."""
    table = _last_table
    if table.code() is code:  # (the ops of a trace come from one long function, mostly)
        return table
    if len(code.co_code) < _LONG_CODE:
        return None
    return _line_table(code)


def _line_table(code) -> _LineTable:
    global _last_table
    key = id(code)
    table = _LINES_OF_CODE.get(key)
    if table is None or table.code() is not code:
        starts, lines = _line_spans(code)
        table = _LINES_OF_CODE[key] = _LineTable(
            weakref.ref(code, lambda _, key=key: _LINES_OF_CODE.pop(key, None)), starts,
            lines, [*starts[1:], len(code.co_code)])
    _last_table = table  # one assignment: another thread sees the old table or the new
    return table


def _spans_of_lines(code) -> tuple[list[int], list[int | None]]:
    """(starts, lines) of the spans of one line, from ``co_lines``: one range per
    instruction, merged where the line stays the same (offsets with no line merge too: they
    are asked of the frame)."""
    ranges = list(code.co_lines())
    lines = list(map(_third, ranges))
    # a span starts where the line differs from the one before
    changed = [True, *map(ne, lines[1:], lines[:-1])] if ranges else []
    spans = list(compress(ranges, changed))
    return list(map(_first, spans)), list(map(_third, spans))


def _spans_of_lnotab(code) -> tuple[list[int], list[int | None]]:
    """(starts, lines) of the spans of one line, from Python 3.11's ``co_lnotab``: C walks
    the location table and writes one (offset step, line step) byte pair per change of line,
    where ``co_lines`` makes a tuple per instruction (a fifth of the cost at 1,000 lines).
    An instruction with no line (cleanup code: MAKE_CELL, RERAISE, a loop's jump back; never
    one that records an op) counts as the line before it. A step too long for a byte is
    written as several pairs: the ones that do not change the line, or that another pair
    continues at the same offset, are not spans of their own."""
    table = code.co_lnotab
    steps = table[0::2]
    moves = memoryview(table[1::2]).cast("b")  # (signed: a line may come back)
    starts = list(accumulate(steps, initial=0))
    lines = list(accumulate(moves, initial=code.co_firstlineno))
    if 0 not in table[1::2] and 0 not in steps[1:]:  # (bytes: searched by memchr)
        return starts, lines  # no step too long for a byte: every pair is a span
    own = [True, *map(and_, map(truth, moves), map(truth, [*steps[1:], 1]))]
    return list(compress(starts, own)), list(compress(lines, own))


# co_lnotab says what co_lines does, in C, up to Python 3.11; later versions warn that it goes
_line_spans = _spans_of_lnotab if sys.version_info < (3, 12) else _spans_of_lines


class _Gone:
    pass


_last_table = _LineTable(weakref.ref(_Gone()), [], [], [])  # a dead reference: no table yet


def current_loc() -> SourceLoc | None:
    return loc_of_frame(user_frame(sys._getframe(1)))


# --- what the source says at a line -------------------------------------------------------


class _FileLines:
    """What is known of one file's lines: parsed a function at a time (the ones traced), or
    whole when a line outside them is asked about."""

    __slots__ = ("blocks", "covered", "lines", "table", "whole")

    def __init__(self, lines: list[str]):
        self.lines = lines  # linecache's list: a new one means the file changed
        self.table: dict[int, LineInfo] = {}
        self.covered: set[int] = set()  # lines whose statements are in the table
        self.blocks: dict[int, int] = {}  # first line of a parsed def -> its last line
        self.whole = False


_FILES: dict[str, _FileLines] = {}


def _file_lines(filename: str) -> _FileLines:
    lines = _getlines(filename)
    known = _FILES.get(filename)
    if known is not None and known.lines is lines:  # linecache keeps the list until reload
        return known
    known = _FILES[filename] = _FileLines(lines)
    return known


_OTHER_LINE_ENDS = "\x0b\x0c\x1c\x1d\x1e"  # where str.splitlines ends an ASCII line, but "\n"


def _getlines(filename: str) -> list[str]:
    """``linecache.getlines(filename)``. A file not yet cached is read here when it is plain
    UTF-8 (no BOM, no coding cookie), into linecache as linecache reads it: where
    ``tokenize.open`` decides the encoding in Python and wraps the file in a text reader, a
    tenth of the fixed cost of tracing a function. Anything else is linecache's to read."""
    entry = linecache.cache.get(filename)
    if entry is not None and len(entry) != 1:
        return entry[2]
    if filename.startswith("<") or not os.path.isabs(filename):
        return linecache.getlines(filename)
    try:  # (os.read: a file object is a third of the cost)
        file = os.open(filename, os.O_RDONLY)
        try:
            stat = os.fstat(file)
            data = os.read(file, stat.st_size)
        finally:
            os.close(file)
        if len(data) != stat.st_size or data.startswith(codecs.BOM_UTF8) or (
                b"coding" in b"\n".join(data.split(b"\n", 2)[:2])):
            return linecache.getlines(filename)
        text = data.decode()
    except (OSError, UnicodeDecodeError):
        return linecache.getlines(filename)
    if "\r" in text:  # universal newlines, as a text file reads them
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    # Split at "\n" only, as readlines does: str.splitlines also ends a line at a few other
    # characters, which ASCII text rarely holds (io.StringIO's readlines cost twice as much).
    if text.isascii() and not any(map(text.__contains__, _OTHER_LINE_ENDS)):
        lines = text.splitlines(True)
    else:
        lines = text.split("\n")
        last = lines.pop()  # (what follows the last newline)
        lines = [*map(str.__add__, lines, repeat("\n")), *filter(None, [last])]
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"  # (as linecache)
    linecache.cache[filename] = stat.st_size, stat.st_mtime, lines, filename
    return lines


def refresh(filename: str) -> None:
    """Forget what a file said if it changed on disk since (one stat, as inspect does)."""
    linecache.checkcache(filename)


def analyse_code(code) -> dict[int, LineInfo]:
    """Line number -> LineInfo for the file of a code object, covering at least the lines of
    its function: only that function is parsed, unless it is a lambda or module code."""
    known = _file_lines(code.co_filename)
    first = code.co_firstlineno
    if known.whole or first in known.covered:
        return known.table
    node = linemap.parse_def(known.lines, first)
    if node is None:
        return analyse_file(code.co_filename)
    linemap.line_table_of([node], known.lines, known.table)
    known.covered.update(range(first, node.end_lineno + 1))
    known.blocks[first] = linemap.block_end(known.lines, node)
    return known.table


def analyse_file(filename: str) -> dict[int, LineInfo]:
    """Line number -> LineInfo for a whole file (or notebook cell); {} if it has no source."""
    known = _file_lines(filename)
    if not known.whole:
        known.table.clear()  # the same statements again, from the whole file
        linemap.line_table_of(linemap.parse_file(known.lines), known.lines, known.table)
        known.whole = True
    return known.table


def line_info(filename: str, line: int) -> LineInfo:
    known = _file_lines(filename)
    if not known.whole and line not in known.covered:
        analyse_file(filename)
    return known.table.get(line) or LineInfo((), linecache.getline(filename, line).strip())


def line_targets(filename: str, line: int) -> tuple[str, ...]:
    return line_info(filename, line).targets


def statement_text(filename: str, line: int) -> str:
    return line_info(filename, line).statement


def function_source(code) -> str | None:
    """The text ``inspect.getsource`` gives for a function's code, from the lines parsed for
    names (no tokenizing); None when only inspect knows (a lambda, a one-line def)."""
    known = _file_lines(code.co_filename)
    first = code.co_firstlineno
    last = known.blocks.get(first)
    if last is None:
        node = linemap.parse_def(known.lines, first)
        if node is None:
            return None
        last = known.blocks[first] = linemap.block_end(known.lines, node)
    return "".join(known.lines[first - 1:last])


def parameter_names(fn, n: int, skip: int = 0) -> list[str]:
    """Names for ``n`` positional arguments of ``fn`` (after the first ``skip`` parameters,
    e.g. a Function's ctx): its own parameter names, ``args_1``... for ``*args``."""
    params = _parameters(fn)[skip:]
    names = []
    for i in range(n):
        if i < len(params) and params[i][1] == _POSITIONAL:
            names.append(params[i][0])
        elif params and params[-1][1] == _VAR_POSITIONAL:
            names.append(f"{params[-1][0]}_{i - len(params) + 1}")
        else:
            names.append(f"arg{i}")
    return names


_POSITIONAL, _VAR_POSITIONAL, _OTHER = range(3)
_CO_VARARGS, _CO_VARKEYWORDS = inspect.CO_VARARGS, inspect.CO_VARKEYWORDS


def _parameters(fn) -> list[tuple[str, int]]:
    """(name, kind) of each parameter of ``fn``, in order. A plain function's are read from
    its code object (``inspect.signature`` costs as much as tracing a dozen ops); anything
    else (a method, a partial, a wrapped or annotated-signature callable) asks inspect."""
    # (a function's own attributes live in its __dict__: asked there, a missing one raises
    # no AttributeError inside hasattr, two of which cost as much as the rest)
    if type(fn) is types.FunctionType and "__wrapped__" not in fn.__dict__ and (
            "__signature__" not in fn.__dict__):
        code = fn.__code__
        names = code.co_varnames
        positional = code.co_argcount  # (positional-only ones included)
        keyword_only = code.co_kwonlyargcount
        params = [(name, _POSITIONAL) for name in names[:positional]]
        rest = positional + keyword_only
        if code.co_flags & _CO_VARARGS:
            params.append((names[rest], _VAR_POSITIONAL))
            rest += 1
        params += [(name, _OTHER) for name in names[positional:positional + keyword_only]]
        if code.co_flags & _CO_VARKEYWORDS:
            params.append((names[rest], _OTHER))
        return params
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    kinds = {inspect.Parameter.POSITIONAL_ONLY: _POSITIONAL,
             inspect.Parameter.POSITIONAL_OR_KEYWORD: _POSITIONAL,
             inspect.Parameter.VAR_POSITIONAL: _VAR_POSITIONAL}
    return [(p.name, kinds.get(p.kind, _OTHER)) for p in signature.parameters.values()]
