"""``rlgate recipe import-suite``: a NeMo RL test-suite script's conditions as an ``rlgate:`` block.

Part of the ``rlgate`` CLI (:mod:`rlgate.cli`): the script is read as text
(:mod:`rlgate.recipe.suite`), never run.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

__all__ = ["add_import_suite"]

_DOC = (
    "Write the rlgate: block of a NeMo RL tests/test_suites/**/<name>.sh: its check_metrics.py "
    "conditions on the run's metrics and its MAX_STEPS as the target step, after a defaults: "
    "line naming the script's config (examples/configs/recipes/<...>/<name>.yaml) when it "
    "exists. The result is a recipe for `rlgate check-run LOG_DIR --recipe FILE`. Exit 0 "
    "written, 2 on bad input (unreadable script, no MAX_STEPS, a condition rlgate cannot parse)."
)


def add_import_suite(rsub: argparse._SubParsersAction) -> None:
    """Register ``rlgate recipe import-suite`` under ``rlgate recipe``."""
    p = rsub.add_parser(
        "import-suite", help="a NeMo RL suite script's conditions as a recipe", description=_DOC
    )
    p.add_argument("script", metavar="SCRIPT", help="tests/test_suites/llm/<name>.sh")
    p.add_argument("--out", help="write the recipe here (default: print it)")
    p.set_defaults(func=_cmd_import_suite)


def _config_of(script: Path, out: str | None) -> str | None:
    """The script's config as ``common.env`` finds it, relative to the output's folder."""
    parts = script.resolve().parts
    if "tests" not in parts or "test_suites" not in parts:
        return None
    i = max(k for k, p in enumerate(parts) if p == "test_suites")
    if i == 0 or parts[i - 1] != "tests":
        return None
    config = Path(*parts[: i - 1], "examples", "configs", "recipes", *parts[i + 1 : -1])
    config = config / f"{script.stem}.yaml"
    if not config.is_file():
        return None
    base = Path(out).resolve().parent if out else Path.cwd()
    return os.path.relpath(config, base)


def _cmd_import_suite(args: argparse.Namespace) -> int:
    from rlgate.core.errors import ExitCode
    from rlgate.core.io import write_text_atomic
    from rlgate.recipe.suite import read_suite, render_recipe

    script = read_suite(args.script)
    text, notes = render_recipe(script, _config_of(Path(args.script), args.out))
    for note in notes:
        print(f"rlgate: note: {note}", file=sys.stderr)
    if args.out:
        write_text_atomic(args.out, text, inputs=[args.script])
        print(
            f"wrote {args.out}: {text.count('- condition:')} condition(s), target step "
            f"{script.max_steps}"
        )
    else:
        print(text, end="")
    return ExitCode.OK
