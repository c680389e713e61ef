"""The ``rlgate`` command line: parse arguments, call library functions, map errors to exit codes.

Exit codes: 0 pass, 1 a gate/check failed, 2 usage or invalid input, 3 infrastructure,
70 an internal error (a bug in rlgate), 130 interrupted; several inputs' codes combine in
the order of :data:`rlgate.core.errors.EXIT_ORDER`.
Exceptions become messages in exactly one place (:func:`_handle_errors`). Everything the
CLI prints, argparse's usage errors and help included, goes through ``printable``
(``rlgate run`` hands the terminal to pytest once its arguments are parsed).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from rlgate.cli import bisect as _cli_bisect
from rlgate.cli import canary as _cli_canary
from rlgate.cli import history as _cli_history
from rlgate.cli import outputs as _cli_outputs
from rlgate.cli import quarantine as _cli_quarantine
from rlgate.cli import report as _cli_report
from rlgate.cli import runs as _cli_runs
from rlgate.cli import swe as _cli_swe
from rlgate.cli import term as _cli_term
from rlgate.cli import triage as _cli_triage
from rlgate.cli.args import split_configs_and_overrides
from rlgate.core.errors import EXIT_ORDER_TEXT, ExitCode, RlgateError, worst_exit_code
from rlgate.core.extras import missing_module_error
from rlgate.core.options import TOKENIZERS, WARNED
from rlgate.core.text import one_line, printable
from rlgate.core.versions import distribution_version, format_versions, tested_versions

if TYPE_CHECKING:
    from rlgate.checks.recipe import CompatReport


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


@contextlib.contextmanager
def _handle_errors() -> Iterator[None]:
    """The one place where exceptions become a message on stderr and an exit code.

    * ``RlgateError``: the user's input or environment; its own exit code (2 or 3).
    * ``ModuleNotFoundError`` of a third-party module (an extra not installed): exit 3,
      naming the module and the extra to install (:mod:`rlgate.core.extras`).
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
    except ModuleNotFoundError as exc:
        missing = missing_module_error(exc)
        if missing is None:
            _internal_error(exc)
        print(f"rlgate: error: {printable(missing)}", file=sys.stderr)
        raise _Exit(int(missing.exit_code)) from exc
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        print(
            f"rlgate: error: cannot access{printable(where)}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        raise _Exit(int(ExitCode.USAGE)) from exc
    except Exception as exc:
        _internal_error(exc)


def _internal_error(exc: BaseException) -> NoReturn:
    if os.environ.get("RLGATE_DEBUG"):
        traceback.print_exception(exc)
    print(
        f"rlgate: internal error (a bug in rlgate, not a gate verdict): "
        f"{type(exc).__name__}: {printable(exc)}\n"
        "  please report it with the command line and the output of the same command "
        "run with RLGATE_DEBUG=1",
        file=sys.stderr,
    )
    raise _Exit(int(ExitCode.INTERNAL)) from exc


class _Printable(io.TextIOBase):
    """A text stream that shows control characters visibly (see ``rlgate.core.text``).

    On a terminal its verdict words are coloured and it writes above a live progress bar
    (:mod:`rlgate.cli.term`).
    """

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    @property
    def raw(self) -> TextIO:
        """The stream written to."""
        return self._inner

    def isatty(self) -> bool:
        """Whether the stream written to is a terminal."""
        return _cli_term.is_tty(self._inner)

    def write(self, text: str) -> int:
        _cli_term.write(self._inner, printable(text))
        return len(text)

    def flush(self) -> None:
        self._inner.flush()


@contextlib.contextmanager
def _printable_streams() -> Iterator[None]:
    """Everything the CLI prints goes through ``printable``: no input can drive the terminal."""
    saved = sys.stdout, sys.stderr
    with contextlib.ExitStack() as closed:  # a closed stream (``2>&-``) is None: discard it
        out, err = (
            s if s is not None else closed.enter_context(open(os.devnull, "w")) for s in saved
        )
        sys.stdout, sys.stderr = _Printable(out), _Printable(err)  # type: ignore[assignment]
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            sys.stdout, sys.stderr = saved


# --- rlgate versions ---------------------------------------------------------


def _add_versions(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "versions",
        help="print the library versions rlgate tests against",
        description="Print name=version of Python, rlgate and every library whose version "
        "changes what the suite tests (absent: not installed here). Exit 0.",
    )
    p.set_defaults(func=_cmd_versions)


def _cmd_versions(args: argparse.Namespace) -> int:
    print(format_versions(tested_versions()))
    return ExitCode.OK


# --- rlgate run ----------------------------------------------------------------


def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run a tier with pytest (extra arguments go to pytest)",
        description="Run tiers of the suite: `rlgate run functional --junitxml out.xml`. "
        "Exit 0 when every selected test passed, 1 when one failed, 2 on a usage error "
        "(pytest's 4: a bad option, an output over an input), when no test is selected "
        "and on pytest's 2 (a collection error or an interruption), 70 on pytest's "
        "internal error (its 3).",
    )
    p.add_argument("tier", help="marker expression, e.g. functional or 'convergence or perf'")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, help="arguments passed to pytest")
    p.set_defaults(func=_cmd_run)


#: What makes the current folder a suite of its own (a checkout, or a tree of the user's tests).
_OWN_SUITE = ("tests", "conftest.py", "pytest.ini", ".pytest.ini")
_TEST_FILES = ("test_*.py", "*_test.py", "*/test_*.py", "*/*_test.py")


def _outside_checkout(pytest_args: Sequence[str]) -> bool:
    """No suite here and no test path given: the package's tier runs.

    A suite here: a :data:`_OWN_SUITE` entry, or a test file in the folder or a subfolder.
    """
    from pathlib import Path

    here = Path()
    if any(Path(m).exists() for m in _OWN_SUITE) or any(
        next(here.glob(p), None) for p in _TEST_FILES
    ):
        return False
    return not any(not a.startswith("-") and Path(a.split("::")[0]).exists() for a in pytest_args)


def _cmd_run(args: argparse.Namespace) -> int:
    """Run pytest; its exit code in rlgate's meaning (its 3 and 4 are rlgate's 70 and 2).

    Outside a checkout (no ``tests``, ``conftest.py``, ``pytest.ini`` or test file in the
    current folder or a subfolder, no test path given)
    the functional tier shipped in the package runs
    (:func:`rlgate.core.resources.bundled_tier_args`), writing no bytecode into the package.
    """
    import pytest

    bundled: list[str] = []
    if _outside_checkout(args.pytest_args):
        from rlgate.core.resources import bundled_tier_args

        bundled = bundled_tier_args()
        sys.dont_write_bytecode = True  # pytest's assertion rewriting honours it
        print(f"rlgate: no checkout here: running the bundled tier {bundled[0]}", file=sys.stderr)
    code = pytest.main([*bundled, "-m", args.tier, *args.pytest_args])
    if code == pytest.ExitCode.NO_TESTS_COLLECTED:
        where = " in the bundled functional tier" if bundled else ""
        print(f"rlgate: no tests selected by -m {args.tier!r}{where}", file=sys.stderr)
        return ExitCode.USAGE
    mapped = {
        pytest.ExitCode.USAGE_ERROR: ExitCode.USAGE,  # e.g. an output over an input
        pytest.ExitCode.INTERNAL_ERROR: ExitCode.INTERNAL,  # else 3 would read "infra"
    }
    return int(mapped.get(code, code))  # type: ignore[call-overload]


# --- rlgate recipe check ------------------------------------------------------

RECIPE_CHECK_JSON_VERSION = 2


def _add_recipe(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("recipe", help="validate NeMo RL GRPO configs (rlgate's or NeMo RL's own)")
    rsub = p.add_subparsers(dest="recipe_command", required=True, metavar="ACTION")
    c = rsub.add_parser(
        "check",
        help="joint RL x Gym x template x parser x async validation (no GPU, seconds)",
        description="Check one or more NeMo RL GRPO configs in one process. Exit 0 when every "
        "check ran and passed (warnings allowed), 1 when a config is incompatible (one "
        "message per problem), 3 when no error was found but checks could not run here "
        "(e.g. the tokenizer is not available offline), 2 on bad input (unreadable file, "
        "not a GRPO config, bad override), 70 on a bug in rlgate. With several configs: "
        f"the worst of them, in the order {EXIT_ORDER_TEXT}.",
    )
    c.add_argument(
        "args",
        nargs="+",
        metavar="CONFIG_OR_OVERRIDE",
        help="NeMo RL config YAMLs (a defaults: chain is followed) and NeMo RL (Hydra) "
        "overrides a.b=c, ++a.b=c, ~a.b: an argument containing '=' or starting with '~' "
        "or '+' is an override and applies to every config",
    )
    TOKENIZERS.add_to(c)
    c.add_argument(
        "--model-config",
        metavar="FILE",
        help="the model's config.json for the rules that need it (heads, experts, layers, "
        "maximum length), used instead of the one found for policy.model_name in the "
        "tokenizer root or the Hugging Face cache; the JSON report names the file used",
    )
    c.add_argument(
        "--json",
        dest="json_out",
        help="write {schema_version: 2, exit_code, summary, reports: [one per config]} here",
    )
    c.add_argument(
        "--junit",
        dest="junit_out",
        metavar="FILE",
        help="write JUnit XML here: a testcase per config and check (rule family), a "
        "failure carrying its findings and their NeMo RL sources",
    )
    c.add_argument("-q", "--quiet", action="store_true", help="print errors and warnings only")
    c.add_argument(
        "--cache-dir",
        help="where the results of the vLLM/Gym/tokenizer checks are cached, keyed by "
        "everything that decides them (default: $XDG_CACHE_HOME/rlgate, else ~/.cache/rlgate)",
    )
    c.add_argument(
        "--no-cache",
        action="store_true",
        help="neither read nor write the cache (every check runs, vLLM is imported)",
    )
    c.set_defaults(func=_cmd_recipe_check)
    from rlgate.cli.suite import add_import_suite

    add_import_suite(rsub)


def _failure(exc: BaseException) -> tuple[int, str]:
    """Exit code and one message for a config that could not be checked (as _handle_errors)."""
    if isinstance(exc, ModuleNotFoundError) and (missing := missing_module_error(exc)):
        exc = missing
    if isinstance(exc, RlgateError):
        return int(exc.exit_code), str(exc)
    if isinstance(exc, OSError):
        where = f" {exc.filename}" if exc.filename else ""
        return int(ExitCode.USAGE), f"cannot access{where}: {exc.strerror or exc}"
    if os.environ.get("RLGATE_DEBUG"):
        traceback.print_exception(exc)
    return int(ExitCode.INTERNAL), (
        f"internal error (a bug in rlgate, not a gate verdict): {type(exc).__name__}: {exc}\n"
        "  please report it with the command line and the output of the same command run "
        "with RLGATE_DEBUG=1"
    )


def _print_report(report: CompatReport, quiet: bool) -> None:
    from rlgate.recipe.findings import Severity

    for finding in report.findings:
        if quiet and finding.severity is Severity.INFO:
            continue
        print(finding)
    by_reason: dict[str, list[str]] = {}
    for check in report.skipped:
        by_reason.setdefault(check.reason, []).append(check.name)
    for reason, names in by_reason.items():
        print(f"NOT RUN {', '.join(names)}: {reason}")
    counts = f"{len(report.errors)} errors, {len(report.warnings)} warnings"
    if report.skipped:
        counts += f", {len(report.skipped)} checks not run"
    verdict = {"compatible": "compatible", "incompatible": "INCOMPATIBLE"}.get(
        report.status, "INCOMPLETE"
    )
    print(f"{one_line(report.recipe.name)}: {verdict} ({counts})")


def _cmd_recipe_check(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rlgate.checks.cache import RecipeCheckCache, default_cache_dir
    from rlgate.checks.recipe import check_recipe_file
    from rlgate.core.errors import RecipeError
    from rlgate.core.io import write_json_atomic

    configs, overrides = split_configs_and_overrides(args.args)
    if not configs:
        raise RecipeError(
            f"no config given, only overrides {overrides}",
            hint="rlgate recipe check CONFIG.yaml [CONFIG.yaml ...] [key=value ...]",
        )
    from rlgate.checks.recipe_junit import recipe_check_junit, report_cases, unchecked_case

    model_config = None
    if args.model_config is not None:  # an untrusted file: one exit-2 error before any check
        from rlgate.serving.model_config import load_model_config

        model_config = load_model_config(args.model_config)
    many = len(configs) > 1
    cases: list[Any] = []
    cache = None if args.no_cache else RecipeCheckCache(args.cache_dir or default_cache_dir())
    docs: list[dict[str, object]] = []
    statuses: list[str] = []
    for i, config in enumerate(configs):
        if many:
            _cli_term.shown("recipe check", i, len(configs), config)
            print(f"== {one_line(config)}")  # a file name cannot forge a verdict line
        try:
            report = check_recipe_file(
                config,
                overrides,
                args.tokenizers,
                skip_unavailable=True,
                cache=cache,
                model_config=model_config,
            )
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # one config's failure must not hide the others' results
            code, message = _failure(exc)
            print(f"rlgate: error: {message}", file=sys.stderr)
            status = "error" if code == ExitCode.INTERNAL else "invalid"
            if many:
                print(f"{one_line(Path(config).stem)}: NOT CHECKED ({status}, exit {code})")
            docs.append(
                {
                    "recipe": config,
                    "name": Path(config).stem,
                    "overrides": list(overrides),
                    "status": status,
                    "exit_code": code,
                    "compatible": False,
                    "error": message,
                    "checks": [],
                    "findings": [],
                }
            )
            statuses.append(status)
            cases.append(unchecked_case(config, Path(config).stem, message))
            continue
        _print_report(report, args.quiet)
        cases += report_cases(report)
        docs.append(report.as_dict())
        statuses.append(report.status)
    code = worst_exit_code([int(d["exit_code"]) for d in docs])  # type: ignore[call-overload]
    summary = {s: statuses.count(s) for s in ("compatible", "incompatible", "incomplete")}
    summary["not_checked"] = sum(s in ("invalid", "error") for s in statuses)
    if many:
        print(
            f"recipe check: {len(configs)} configs: {summary['compatible']} compatible, "
            f"{summary['incompatible']} incompatible, {summary['incomplete']} incomplete, "
            f"{summary['not_checked']} not checked; exit {code}"
        )
    if args.json_out:
        payload = {
            "schema_version": RECIPE_CHECK_JSON_VERSION,
            "command": "recipe check",
            "exit_code": code,
            "overrides": list(overrides),
            "summary": {"configs": len(configs), **summary},
            "reports": docs,
        }
        write_json_atomic(args.json_out, payload)
    if args.junit_out:  # kept off every config and tokenizer by the output guard (cli.outputs)
        from rlgate.core.io import write_text_atomic

        write_text_atomic(args.junit_out, recipe_check_junit(cases))
    return code


# --- parser --------------------------------------------------------------------


_GIVEN = "_rlgate_given"  # the namespace's record of the single-value options given


class _StoreOnce(argparse.Action):
    """argparse's ``store``, but a second occurrence is a usage error, not "the last wins".

    ``report --swe A --swe B`` would silently drop A (list options keep every value:
    :class:`rlgate.core.options.Extend`).
    """

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        """Store ``values``; refuse an option given before."""
        given = vars(namespace).setdefault(_GIVEN, {})
        if self.option_strings and self.dest in given:
            parser.error(
                f"argument {'/'.join(self.option_strings)}: given twice ({given[self.dest]!r}, "
                f"then {values!r}); give it once"
            )
        given[self.dest] = values
        setattr(namespace, self.dest, values)


class _Parser(argparse.ArgumentParser):
    """rlgate's parser (and its subcommands'): single-value options are :class:`_StoreOnce`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """argparse's, without the records of what was given and warned about."""
        parsed, rest = super().parse_known_args(args, namespace)
        vars(parsed).pop(_GIVEN, None)
        vars(parsed).pop(WARNED, None)
        return parsed, rest


_DESCRIPTION = """\
rlgate: release gates for async RL training with NeMo RL + NeMo Gym + vLLM.

It checks a recipe before any GPU is spent (recipe check), launches and follows
runs (launch, watch), judges a run's convergence and throughput against its
recipe's bounds (check-run), compares SWE-bench results before and after
training (swe), and merges every tier into one go/no-go report (report), with
a nightly history to compare against (history, triage)."""

_EPILOG = """\
`rlgate COMMAND --help` shows a command's options and exit codes.
Exit codes: 0 pass, 1 a gate or check failed, 2 usage or invalid input,
3 infrastructure (a check could not run here), 70 a bug in rlgate,
130 interrupted.
Docs: README.md and docs/ in the rlgate repository: docs/running-tiers.md
(the tiers), docs/launching.md, docs/swe-gate.md, docs/history.md."""


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every subcommand (a subcommand's parser is a _Parser)."""
    parser = _Parser(
        prog="rlgate",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"rlgate {distribution_version('rlgate')}",
        help="print rlgate's version and exit",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    adders = (
        _add_versions,
        _add_run,
        _add_recipe,
        _cli_runs.add_check_run,
        _cli_runs.add_launch,
        _cli_runs.add_watch,
        _cli_bisect.add_bisect,
        _cli_runs.add_budget,
        _cli_runs.add_bench,
        _cli_swe.add_swe,
        _cli_report.add_report,
        _add_history,
        _cli_triage.add_triage,
        _cli_canary.add_canary,
    )
    for add in adders:
        add(sub)
    return parser


def _add_history(sub: argparse._SubParsersAction) -> None:
    """``rlgate history`` and its ``quarantine`` actions (cli.quarantine uses cli.history)."""
    _cli_quarantine.add_quarantine(_cli_history.add_history(sub))


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse ``argv``; a usage error exits 2 with argparse's message (SystemExit)."""
    # `rlgate run TIER <pytest args>` forwards unknown options (e.g. --swe-before X) to pytest.
    args, unknown = parser.parse_known_args(argv)
    # `rlgate recipe check A.yaml --json o.json B.yaml k=v`: argparse stops the positional
    # list at the first option; configs and overrides after it are positionals too.
    if unknown and getattr(args, "func", None) is _cmd_recipe_check:
        if not any(u.startswith("-") for u in unknown):
            args.args, unknown = [*args.args, *unknown], []
    if unknown:
        if getattr(args, "command", None) != "run":
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        args.pytest_args = [*unknown, *args.pytest_args]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code."""
    parser = build_parser()
    # argparse prints usage errors and --help itself (and exits): through the guard too, so
    # an argument it echoes (`rlgate history show R $'\x1b]0;title\x07'`) stays inert.
    with _printable_streams():
        args = _parse(parser, argv)
    # `rlgate run` hands the terminal to pytest (colours); every other command's output is
    # made printable, so no untrusted name or message reaches the terminal raw.
    guard = contextlib.nullcontext() if args.command == "run" else _printable_streams()
    try:
        # every output is kept off every input (rlgate.cli.outputs): declared before any work
        # a progress bar is cleared before any error message (rlgate.cli.term)
        with guard, _handle_errors(), _cli_outputs.guarded(parser, args), _cli_term.session():
            return int(args.func(args))
    except _Exit as stop:
        return stop.code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
