"""libcst over a source text: for each line, the targets it assigns and its branch test."""

from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from .source import LineInfo


class _LineCollector(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, module: cst.Module):
        self.module = module
        self.lines: dict[int, LineInfo] = {}

    def _span(self, node):
        pos = self.get_metadata(PositionProvider, node)
        return pos.start.line, pos.end.line

    def _code(self, node) -> str:
        return " ".join(self.module.code_for_node(node).split())

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        first, last = self._span(node)
        for small in node.body:
            targets: tuple[str, ...] = ()
            if isinstance(small, cst.Assign):
                names = [t.target for t in small.targets]
                if len(names) == 1 and isinstance(names[0], cst.Name):
                    targets = (names[0].value,)
                elif len(names) == 1 and isinstance(names[0], cst.Tuple | cst.List):
                    elts = [e.value for e in names[0].elements]
                    if all(isinstance(e, cst.Name) for e in elts):
                        targets = tuple(e.value for e in elts)
            elif isinstance(small, cst.AugAssign | cst.AnnAssign) and isinstance(
                    small.target, cst.Name):
                targets = (small.target.value,)
            info = LineInfo(targets, self._code(small))
            for line in range(first, last + 1):
                self.lines[line] = info

    def _branch(self, node, test) -> None:
        first, _ = self._span(node)
        test_first, test_last = self._span(test)
        info = LineInfo((), self._code(test), self._code(test))
        for line in {first, *range(test_first, test_last + 1)}:
            self.lines[line] = info

    def visit_If(self, node: cst.If) -> None:
        self._branch(node, node.test)

    def visit_While(self, node: cst.While) -> None:
        self._branch(node, node.test)


def line_table_of(text: str) -> dict[int, LineInfo]:
    """Line number -> what the line assigns, its statement, and its branch test."""
    try:
        module = cst.parse_module(text)
    except Exception:  # noqa: BLE001 - unparsable source only costs names, never correctness
        return {}
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    collector = _LineCollector(wrapper.module)
    wrapper.visit(collector)
    return collector.lines
