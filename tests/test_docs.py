"""Code blocks in README.md and docs/ that gradgen prints are regenerated and compared.

A block is marked ``<!-- gradgen-output: emit FILE:FUNC --args "..." -->`` and closed by
``<!-- /gradgen-output -->``. Set GRADGEN_UPDATE_DOCS=1 to rewrite the blocks in place.
"""

from __future__ import annotations

import contextlib
import glob
import io
import os
import re
import shlex
import subprocess
import sys

import pytest

from gradgen.cli import main

from .conftest import ROOT

BLOCK = re.compile(
    r"(<!-- gradgen-output: (?P<cmd>.*?) -->\n)```(?P<lang>\w*)\n(?P<body>.*?)```\n"
    r"(<!-- /gradgen-output -->)",
    re.DOTALL,
)


def _documents():
    return [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))


def _run(command: str) -> str:
    """A gradgen CLI command (``emit ...``) in-process, or ``python SCRIPT`` as a subprocess,
    both from the repository root; returns what it prints."""
    if command.startswith("python "):
        # this checkout's gradgen first: the installed one may be another checkout's
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "src"), ROOT]))
        result = subprocess.run([sys.executable, *shlex.split(command)[1:]], cwd=ROOT,
                                capture_output=True, text=True, env=env, check=False)
        assert result.returncode == 0, result.stderr
        return result.stdout
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out):
            status = main(shlex.split(command))
    finally:
        os.chdir(cwd)
    assert status == 0, command
    return out.getvalue()


@pytest.mark.parametrize("path", _documents(), ids=os.path.basename)
def test_generated_blocks_are_current(path):
    with open(path) as fh:
        text = fh.read()
    blocks = list(BLOCK.finditer(text))

    def regenerate(match):
        body = _run(match["cmd"])
        return f"{match[1]}```{match['lang']}\n{body}```\n{match[5]}"

    fresh = BLOCK.sub(regenerate, text)
    if os.environ.get("GRADGEN_UPDATE_DOCS"):
        with open(path, "w") as fh:
            fh.write(fresh)
        return
    if path.endswith("README.md"):
        assert blocks, "the README must show an emitted module"
    assert fresh == text, f"{path} is stale: run GRADGEN_UPDATE_DOCS=1 pytest tests/test_docs.py"


def test_ops_table_is_current():
    from gradgen.opsdoc import render_ops_markdown

    path = os.path.join(ROOT, "docs", "ops.md")
    fresh = render_ops_markdown()
    if os.environ.get("GRADGEN_UPDATE_DOCS"):
        with open(path, "w") as fh:
            fh.write(fresh)
    with open(path) as fh:
        assert fh.read() == fresh, "docs/ops.md is stale: run python -m gradgen.opsdoc > docs/ops.md"


PAGE = re.compile(r"<!-- gradgen-page: (?P<cmd>.*?) -o (?P<path>\S+) -->")


def _pages():
    found = []
    for document in _documents():
        with open(document) as fh:
            found += [(m["cmd"], m["path"]) for m in PAGE.finditer(fh.read())]
    return found


@pytest.mark.parametrize(("command", "path"), _pages(), ids=[p for _, p in _pages()])
def test_explain_pages_are_current(command, path):
    """The learner's pages the docs link (``<!-- gradgen-page: explain ... -o PATH -->``) are
    what ``gradgen explain`` writes today."""
    fresh = _run(command)
    target = os.path.join(ROOT, path)
    if os.environ.get("GRADGEN_UPDATE_DOCS"):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w") as fh:
            fh.write(fresh)
    again = "run GRADGEN_UPDATE_DOCS=1 pytest tests/test_docs.py"
    assert os.path.exists(target), f"{path} is missing: {again}"
    with open(target) as fh:
        assert fh.read() == fresh, f"{path} is stale: {again}"
