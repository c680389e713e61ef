"""``rlgate --help``, ``--version`` and every command's help (docs/running-tiers.md).

The walks go over the real parser (``build_parser``), every subparser recursively, so a
command or option added later without help text, or a command without its exit codes, fails
here naming it.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from rlgate.cli.app import build_parser, main
from rlgate.core import versions

#: Options deliberately hidden from ``--help`` (``help=argparse.SUPPRESS``): none today.
HIDDEN: frozenset[tuple[str, ...]] = frozenset()

#: ``rlgate ... --help`` states the exit codes: "Exit 0 ...", "exit codes: 0 ...".
EXIT_CODES = re.compile(r"\bexit(?: codes:)? 0\b", re.IGNORECASE)


def _parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every parser (the top one, every group and leaf command): (its words, its parser)."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _parsers(child, (*path, name))


def _leaves() -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    return [
        (path, parser)
        for path, parser in _parsers(build_parser())
        if not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)
    ]


def _without_help() -> list[str]:
    """``"swe power --json"`` for each argument (option or positional) with no help text."""
    missing = []
    for path, parser in _parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            name = "/".join(action.option_strings) or action.dest
            key = (*path, name)
            if action.help == argparse.SUPPRESS and key in HIDDEN:
                continue
            if not action.help or not action.help.strip() or action.help == argparse.SUPPRESS:
                missing.append(" ".join(key))
    return missing


def _commands_without_help() -> list[str]:
    """Subcommands listed in their parent's help without a line saying what they do."""
    missing = []
    for path, parser in _parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helped = {a.dest for a in action._choices_actions if a.help}
                missing += [" ".join((*path, n)) for n in action.choices if n not in helped]
    return missing


def _help(words: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as stop:
        main([*words, "--help"])
    assert stop.value.code == 0
    return capsys.readouterr().out


def test_the_walk_reaches_every_command():
    leaves = {" ".join(path) for path, _ in _leaves()}
    assert {"swe power", "swe eval", "history record", "launch", "versions"} <= leaves
    assert len(leaves) >= 20


def test_every_option_of_every_command_has_help():
    assert _without_help() == []


def test_every_command_has_a_line_of_help():
    assert _commands_without_help() == []


def test_every_command_states_its_exit_codes(capsys):
    silent = [
        " ".join(path)
        for path, parser in _leaves()
        if not EXIT_CODES.search(f"{parser.description or ''} {parser.epilog or ''}")
    ]
    assert silent == []
    for words in (["swe", "eval"], ["swe", "power"]):  # the two that did not say
        assert EXIT_CODES.search(" ".join(_help(words, capsys).split())), words


def test_swe_power_help_says_what_each_option_is(capsys):
    out = " ".join(_help(["swe", "power"], capsys).split())
    for text in ("share of instances", "probability", "--json JSON", "Exit codes: 0"):
        assert text in out


def test_top_level_help_is_for_users(capsys):
    out = " ".join(_help([], capsys).split())
    assert "parse arguments" not in out and "``" not in out
    assert "release gate" in out
    for command in ("recipe", "check-run", "launch", "swe", "report", "history", "triage"):
        assert f" {command} " in out
    assert "docs/" in out and "--version" in out
    assert "Exit codes: 0" in out


def test_version_prints_rlgate_version_and_exits_0(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out == f"rlgate {versions.tested_versions()['rlgate']}\n"


def test_version_from_the_command_line():
    done = subprocess.run(
        [sys.executable, "-m", "rlgate.cli", "--version"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"rlgate \S+\n", done.stdout)
    assert done.stdout.split()[1] == versions.tested_versions()["rlgate"]


def test_history_record_db_help_is_its_own(capsys):
    record = " ".join(_help(["history", "record"], capsys).split())
    assert "promoted runs" not in record and "also record" not in record
    assert "--db DB the history database to record into" in record
    swe = " ".join(_help(["swe", "compare"], capsys).split())
    assert "promoted runs" not in swe  # swe compare builds no band either
    check = " ".join(_help(["check-run"], capsys).split())
    assert "built from the recipe's promoted runs" in check  # where it applies, it stays
