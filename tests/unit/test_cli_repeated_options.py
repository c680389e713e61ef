"""Every option of every ``rlgate`` command that takes a list keeps every value it is given.

``rlgate report --junit A --junit B`` used to keep only B (``nargs="+"`` without
``extend``), so a failing file given first was dropped silently. The test walks every
subparser of the real parser, and for each list option parses it given twice (one value each
time): both values must be kept, in order; given once, its value replaces the default.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from rlgate.cli.app import build_parser
from rlgate.core.options import PLUGIN_OPTIONS

CANDIDATES = ("1", "2", "0.5", "0.25", "200", "300", "a=b", "c=d", "x", "y")
CANDIDATES += ("abcdef1", "1234567", "2026-01-01", "2026-02-01")


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every leaf command: (its words, its parser)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for sub in subs:
        for name, child in sub.choices.items():
            yield from _commands(child, (*path, name))


def _takes_a_list(action: argparse.Action) -> bool:
    if isinstance(action, argparse._AppendAction | argparse._ExtendAction):
        return True
    return action.nargs not in (None, "?", 0, argparse.SUPPRESS)


def _values(action: argparse.Action, count: int = 2) -> list[str]:
    """``count`` distinct tokens ``action`` accepts (by its choices or its type)."""
    if action.choices:
        return [str(c) for c in list(action.choices)[:count]]
    found: list[str] = []
    converted: list[object] = []
    for text in CANDIDATES:
        try:
            value = action.type(text) if callable(action.type) else text
        except (argparse.ArgumentTypeError, TypeError, ValueError):
            continue
        if value not in converted:
            found.append(text)
            converted.append(value)
        if len(found) == count:
            return found
    raise AssertionError(f"no {count} valid values for {action.option_strings or action.dest}")


def _convert(action: argparse.Action, text: str) -> object:
    return action.type(text) if callable(action.type) else text


def _required(parser: argparse.ArgumentParser, skip: argparse.Action) -> list[str]:
    """Tokens for the parser's required positionals and options (``skip`` aside)."""
    out: list[str] = []
    for action in parser._actions:
        if action is skip or isinstance(action, argparse._HelpAction):
            continue
        if not action.option_strings:  # positional
            if action.nargs in ("?", "*", argparse.REMAINDER):
                continue
            out += _values(action, 1)
        elif action.required:
            out += [action.option_strings[0], *_values(action, 1)]
    return out


def _list_options() -> list[tuple[tuple[str, ...], str]]:
    return [
        (words, action.option_strings[-1])
        for words, parser in _commands(build_parser())
        for action in parser._actions
        if action.option_strings and _takes_a_list(action)
    ]


LIST_OPTIONS = _list_options()


def test_the_walk_finds_the_list_options_that_dropped_values():
    found = {(" ".join(words), flag) for words, flag in LIST_OPTIONS}
    assert {
        ("report", "--junit"),
        ("report", "--run"),
        ("report", "--band-run"),
        ("history record", "--junit"),
        ("history record", "--run-json"),
        ("triage", "--candidate"),
        ("swe compare", "--before"),
        ("swe compare", "--after"),
        ("swe power", "--n"),
        ("swe eval", "--instance-ids"),
        ("bench rollout", "--parser-lengths"),
        ("check-run", "--override"),
    } <= found


@pytest.mark.parametrize(
    ("words", "flag"), LIST_OPTIONS, ids=[f"{' '.join(w)} {f}" for w, f in LIST_OPTIONS]
)
def test_a_list_option_given_twice_keeps_both_values(words, flag, capsys):
    parser = build_parser()
    leaf = dict(_commands(parser))[words]
    action = next(a for a in leaf._actions if flag in a.option_strings)
    first, second = _values(action)
    base = [*words, *_required(leaf, action)]
    try:
        twice = parser.parse_args([*base, flag, first, flag, second])
        once = parser.parse_args([*base, flag, second])
    except SystemExit:  # pragma: no cover - shows argparse's message
        pytest.fail(f"rlgate {' '.join(base)} {flag} ...: {capsys.readouterr().err}")
    expected = [_convert(action, first), _convert(action, second)]
    assert getattr(twice, action.dest) == expected, f"rlgate {' '.join(words)} {flag} x2"
    # a default list is replaced by what is given, not extended
    assert getattr(once, action.dest) == expected[1:], f"rlgate {' '.join(words)} {flag} x1"


def test_the_plugins_list_options_keep_every_value_too():
    """The plugin registers the same definitions: a repeated --rlgate-swe-before accumulates."""
    parser = argparse.ArgumentParser()
    for option in PLUGIN_OPTIONS:
        parser.add_argument(*option.pytest_flags, dest=option.dest, **option.kwargs())
    args = parser.parse_args(["--rlgate-swe-before", "a", "b", "--swe-before", "c"])
    assert args.swe_before == ["a", "b", "c"]
    args = parser.parse_args(["--rlgate-band-run", "a", "--band-run", "b"])
    assert args.band_run == ["a", "b"]


def _single_value_options() -> list[tuple[tuple[str, ...], str]]:
    return [
        (words, action.option_strings[-1])
        for words, parser in _commands(build_parser())
        for action in parser._actions
        if action.option_strings
        and action.nargs in (None, "?")
        and not _takes_a_list(action)
        and not isinstance(action, argparse._HelpAction | argparse._StoreConstAction)
        and not hasattr(action, "target")  # a deprecated spelling: test_cli_renamed_options
    ]


SINGLE = _single_value_options()


def test_the_walk_finds_the_single_value_options():
    found = {(" ".join(words), flag) for words, flag in SINGLE}
    assert {("report", "--swe"), ("report", "--recipe"), ("watch", "--junit")} <= found


@pytest.mark.parametrize(("words", "flag"), SINGLE, ids=[f"{' '.join(w)} {f}" for w, f in SINGLE])
def test_a_single_value_option_given_twice_is_a_usage_error(words, flag, capsys):
    """`report --swe A --swe B` used to drop A silently (the last one won)."""
    parser = build_parser()
    leaf = dict(_commands(parser))[words]
    action = next(a for a in leaf._actions if flag in a.option_strings)
    first, second = _values(action)
    base = [*words, *_required(leaf, action)]
    once = parser.parse_args([*base, flag, second])
    assert getattr(once, action.dest) == _convert(action, second)
    assert not hasattr(once, "_rlgate_given")
    with pytest.raises(SystemExit) as stop:
        parser.parse_args([*base, flag, first, flag, second])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {'/'.join(action.option_strings)}: given twice" in err, err
