"""The ``rlgate`` command line: parse arguments, call library functions, map errors to exit codes.

Exit codes: 0 pass, 1 a gate/check failed, 2 usage or invalid input, 3 infrastructure.
Exceptions become messages in exactly one place (:func:`_handle_errors`).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator, Sequence

from rlgate._errors import ExitCode, RlgateError
from rlgate.versions import format_versions, tested_versions


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


@contextlib.contextmanager
def _handle_errors() -> Iterator[None]:
    try:
        yield
    except RlgateError as exc:
        print(f"rlgate: error: {exc}", file=sys.stderr)
        raise _Exit(int(exc.exit_code)) from exc
    except KeyboardInterrupt:
        print("rlgate: interrupted", file=sys.stderr)
        raise _Exit(130) from None


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


# --- parser --------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="rlgate", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_add_versions, _add_run):
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with _handle_errors():
            return int(args.func(args))
    except _Exit as stop:
        return stop.code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
