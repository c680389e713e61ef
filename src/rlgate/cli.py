"""The ``rlgate`` command line: parse arguments, call library functions, map errors to exit codes.

Exit codes: 0 pass, 1 a gate/check failed, 2 usage or invalid input, 3 infrastructure,
70 an internal error (a bug in rlgate), 130 interrupted.
Exceptions become messages in exactly one place (:func:`_handle_errors`).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from typing import TextIO

from rlgate import _cli_report, _cli_runs, _cli_swe
from rlgate._errors import ExitCode, RlgateError
from rlgate._text import printable
from rlgate.versions import format_versions, tested_versions


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


@contextlib.contextmanager
def _handle_errors() -> Iterator[None]:
    """The one place where exceptions become a message on stderr and an exit code.

    * ``RlgateError``: the user's input or environment; its own exit code (2 or 3).
    * ``OSError`` (a path that is a directory, unwritable, vanished): exit 2, naming the path.
    * anything else is a bug in rlgate: exit 70 (``ExitCode.INTERNAL``), never 1 (which
      means "a gate failed"), with how to report it; ``RLGATE_DEBUG=1`` shows the traceback.
    """
    try:
        yield
    except RlgateError as exc:
        print(f"rlgate: error: {printable(exc)}", file=sys.stderr)
        raise _Exit(int(exc.exit_code)) from exc
    except KeyboardInterrupt:
        print("rlgate: interrupted", file=sys.stderr)
        raise _Exit(130) from None
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        print(
            f"rlgate: error: cannot access{printable(where)}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        raise _Exit(int(ExitCode.USAGE)) from exc
    except Exception as exc:
        if os.environ.get("RLGATE_DEBUG"):
            traceback.print_exc()
        print(
            f"rlgate: internal error (a bug in rlgate, not a gate verdict): "
            f"{type(exc).__name__}: {printable(exc)}\n"
            "  please report it with the command line and the output of the same command "
            "run with RLGATE_DEBUG=1",
            file=sys.stderr,
        )
        raise _Exit(int(ExitCode.INTERNAL)) from exc


class _Printable(io.TextIOBase):
    """A text stream that shows control characters visibly (see ``rlgate._text``)."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        self._inner.write(printable(text))
        return len(text)

    def flush(self) -> None:
        self._inner.flush()


@contextlib.contextmanager
def _printable_streams() -> Iterator[None]:
    """Everything the CLI prints goes through ``printable``: no input can drive the terminal."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Printable(saved[0]), _Printable(saved[1])  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = saved


# --- rlgate versions ---------------------------------------------------------


def _add_versions(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("versions", help="print the library versions rlgate tests against")
    p.set_defaults(func=_cmd_versions)


def _cmd_versions(args: argparse.Namespace) -> int:
    print(format_versions(tested_versions()))
    return ExitCode.OK


# --- rlgate run ----------------------------------------------------------------


def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run a tier with pytest (extra arguments go to pytest)",
        description="Run tiers of the suite: `rlgate run functional --junitxml out.xml`.",
    )
    p.add_argument("tier", help="marker expression, e.g. functional or 'convergence or perf'")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, help="arguments passed to pytest")
    p.set_defaults(func=_cmd_run)


def _cmd_run(args: argparse.Namespace) -> int:
    import pytest

    code = pytest.main(["-m", args.tier, *args.pytest_args])
    if code == pytest.ExitCode.NO_TESTS_COLLECTED:
        print(f"rlgate: no tests selected by -m {args.tier!r}", file=sys.stderr)
        return ExitCode.USAGE
    return int(code)


# --- rlgate recipe check ------------------------------------------------------


def _add_recipe(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("recipe", help="validate NeMo RL GRPO configs (rlgate's or NeMo RL's own)")
    rsub = p.add_subparsers(dest="recipe_command", required=True, metavar="ACTION")
    c = rsub.add_parser(
        "check",
        help="joint RL x Gym x template x parser x async validation (no GPU, seconds)",
        description="Exit 0 when compatible (warnings allowed), 1 with one message per problem.",
    )
    c.add_argument("config", help="NeMo RL config YAML (a defaults: chain is followed)")
    c.add_argument("overrides", nargs="*", help="NeMo RL (Hydra) overrides: a.b=c, ++a.b=c, ~a.b")
    c.add_argument(
        "--tokenizers",
        default=os.environ.get("RLGATE_TOKENIZERS"),
        help="tokenizer root, one subfolder per model (default: $RLGATE_TOKENIZERS, else HF)",
    )
    c.add_argument("--json", dest="json_out", help="write the findings as JSON here")
    c.add_argument("-q", "--quiet", action="store_true", help="print errors and warnings only")
    c.set_defaults(func=_cmd_recipe_check)


def _cmd_recipe_check(args: argparse.Namespace) -> int:
    from rlgate._io import write_json_atomic
    from rlgate.compat import check_recipe_file
    from rlgate.findings import Severity

    report = check_recipe_file(args.config, args.overrides, args.tokenizers)
    for finding in report.findings:
        if args.quiet and finding.severity is Severity.INFO:
            continue
        print(finding)
    errors, warnings = (
        len(report.errors),
        sum(f.severity is Severity.WARNING for f in report.findings),
    )
    verdict = "compatible" if report.ok else "INCOMPATIBLE"
    print(f"{report.recipe.name}: {verdict} ({errors} errors, {warnings} warnings)")
    if args.json_out:
        write_json_atomic(args.json_out, report.as_dict(), inputs=[args.config])
    return ExitCode.OK if report.ok else ExitCode.FAIL


# --- parser --------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="rlgate", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    adders = (
        _add_versions,
        _add_run,
        _add_recipe,
        _cli_runs.add_check_run,
        _cli_runs.add_launch,
        _cli_runs.add_watch,
        _cli_runs.add_budget,
        _cli_runs.add_bench,
        _cli_swe.add_swe,
        _cli_report.add_report,
    )
    for add in adders:
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code."""
    parser = build_parser()
    # `rlgate run TIER <pytest args>` forwards unknown options (e.g. --swe-before X) to pytest.
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        if getattr(args, "command", None) != "run":
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        args.pytest_args = [*unknown, *args.pytest_args]
    # `rlgate run` hands the terminal to pytest (colours); every other command's output is
    # made printable, so no untrusted name or message reaches the terminal raw.
    guard = contextlib.nullcontext() if args.command == "run" else _printable_streams()
    try:
        with guard, _handle_errors():
            return int(args.func(args))
    except _Exit as stop:
        return stop.code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
