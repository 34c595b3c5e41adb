"""The gradgen command line: ``gradgen emit FILE.py:FUNC --args "PY_EXPR"``."""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import shlex
import sys
import traceback

import numpy as np

from .errors import GradgenError

EMIT_EXAMPLE = 'gradgen emit examples/reused_value.py:f --args "(2.0,)"'


class UserError(Exception):
    """A mistake on the command line: one line on stderr, exit status 2."""


def load_function(target: str):
    path, sep, name = target.rpartition(":")
    if not sep or not path or not name:
        raise UserError(f"expected FILE.py:FUNC, got {target!r}")
    if not os.path.isfile(path):
        raise UserError(f"{path}: no such file")
    module_name = "gradgen_cli_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise UserError(f"{path}: importing it failed: {type(e).__name__}: {e}") from e
    finally:
        sys.path.pop(0)
    fn = getattr(module, name, None)
    if fn is None or not callable(fn):
        raise UserError(f"{path} has no function {name!r}")
    return fn


def parse_args_expr(text: str) -> tuple:
    try:
        value = eval(text, {"np": np, "numpy": np, "math": math, "__builtins__": __builtins__})
    except Exception as e:  # noqa: BLE001 - any error in the user's expression is theirs
        raise UserError(f"--args {text!r} is not a valid expression: {type(e).__name__}: {e}")
    return value if isinstance(value, tuple) else (value,)


def parse_argnums(text: str):
    try:
        nums = tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise UserError(f"--argnums expects integers like 0 or 0,1; got {text!r}") from None
    if not nums:
        raise UserError("--argnums is empty")
    return nums[0] if len(nums) == 1 else nums


def cmd_emit(ns, argv) -> int:
    from .api import emit

    fn = load_function(ns.target)
    args = parse_args_expr(ns.args)
    argnums = parse_argnums(ns.argnums)
    command = _regenerate_command(ns)
    source = emit(fn, *args, argnums=argnums, command=command)
    if ns.output:
        try:
            with open(ns.output, "w") as fh:
                fh.write(source)
        except OSError as e:
            raise UserError(f"cannot write {ns.output}: {e.strerror}") from None
    else:
        sys.stdout.write(source)
    return 0


def _regenerate_command(ns) -> str:
    parts = ["gradgen", "emit", ns.target, "--args", ns.args]
    if ns.argnums != "0":
        parts += ["--argnums", ns.argnums]
    if ns.output:
        parts += ["-o", ns.output]
    return " ".join(shlex.quote(p) if p != ns.args else f'"{p}"' for p in parts)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gradgen",
        description="Emit readable, dependency-free Python gradients of Python/NumPy functions.",
        epilog=f"example:\n  {EMIT_EXAMPLE}",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = parser.add_subparsers(dest="command", required=True)
    emit_p = sub.add_parser(
        "emit", help="write the gradient module of FILE.py:FUNC",
        description="Trace FILE.py:FUNC at example arguments and print (or write) a Python "
        "module with FUNC_grad and FUNC_value_and_grad.",
        epilog=f"example:\n  {EMIT_EXAMPLE}\n  gradgen emit model.py:loss --args "
        '"(np.ones(3), 2.0)" --argnums 0,1 -o loss_grad.py',
        formatter_class=argparse.RawDescriptionHelpFormatter)
    emit_p.add_argument("target", help="FILE.py:FUNC")
    emit_p.add_argument("--args", required=True, metavar="PY_EXPR",
                        help="tuple of example arguments; np, numpy and math are in scope")
    emit_p.add_argument("--argnums", default="0", help="which arguments to differentiate: 0,1")
    emit_p.add_argument("-o", "--output", help="write the module here instead of stdout")
    emit_p.set_defaults(run=cmd_emit)
    return parser


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    ns = parser.parse_args(argv)
    try:
        return ns.run(ns, argv)
    except (UserError, GradgenError) as e:
        if ns.debug:
            traceback.print_exc()
        print(f"gradgen: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - the user's own code raised while being traced
        if ns.debug:
            traceback.print_exc()
        print(f"gradgen: error: {_user_location(e) or ns.target}: {type(e).__name__}: {e}",
              file=sys.stderr)
        return 2


def _user_location(error: Exception) -> str | None:
    """The innermost line of the user's code in the error's traceback, as file.py:line."""
    from .source import is_user_file

    where = None
    for frame, line in traceback.walk_tb(error.__traceback__):
        filename = frame.f_code.co_filename
        if is_user_file(filename) and not filename.endswith("cli.py"):
            where = f"{os.path.basename(filename)}:{line}"
    return where


if __name__ == "__main__":
    sys.exit(main())
