"""One name, one meaning: renamed options and their deprecated spellings (issue 24).

``--timeout`` was minutes in ``watch`` and seconds in ``swe eval``; ``--run-id`` was the
harness's id in ``swe eval`` and the history's id elsewhere; ``swe compare --recipe`` took a
name where every other command takes a YAML file. The new names say their unit or meaning;
each old spelling still parses to the same value and prints one warning line.
"""

from __future__ import annotations

import argparse

import pytest

from rlgate.cli.app import build_parser, main
from rlgate.cli.outputs import leaf_commands
from rlgate.core.options import Extend, add_renamed

from .helpers.cli import run_cli as run
from .helpers.mlperf_runs import RECIPE, mlperf_path

#: (command, the old spelling, the new one, a value, what the command receives).
RENAMED = [
    (["watch", "RUN"], "--timeout", "--timeout-minutes", "2.5", ("timeout_minutes", 2.5)),
    (["swe", "eval"], "--timeout", "--timeout-seconds", "600", ("timeout_seconds", 600)),
    (["swe", "eval"], "--run-id", "--harness-run-id", "base_s0", ("harness_run_id", "base_s0")),
]


def _warning(old: str, new: str) -> str:
    return f"rlgate: warning: {old} is deprecated; use {new}\n"


def _parse(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(argv)


@pytest.mark.parametrize(("words", "old", "new", "value", "expected"), RENAMED)
def test_an_old_spelling_gives_the_same_value_with_one_warning(
    words, old, new, value, expected, capsys
):
    by_new = _parse([*words, new, value])
    assert capsys.readouterr().err == ""
    by_old = _parse([*words, old, value])
    assert capsys.readouterr().err == _warning(old, new)
    assert vars(by_old) == vars(by_new)
    dest, received = expected
    assert getattr(by_new, dest) == received


def test_every_deprecated_spelling_in_the_cli_maps_to_its_new_option(capsys):
    """A walk: each alias shares its option's destination, type and shape; help says so."""
    found = set()
    for key, leaf in leaf_commands(build_parser()):
        for action in leaf._actions:
            target = getattr(action, "target", None)
            if target is None:
                continue
            found.add((key, action.option_strings[0], target.option_strings[0]))
            assert target in leaf._actions
            assert (action.dest, action.type, action.nargs) == (
                target.dest,
                target.type,
                target.nargs,
            )
            assert action.help == f"deprecated: use {target.option_strings[0]}"
            assert action.default is argparse.SUPPRESS  # the new option's default stands
    assert found == {
        ("watch", "--timeout", "--timeout-minutes"),
        ("swe eval", "--timeout", "--timeout-seconds"),
        ("swe eval", "--run-id", "--harness-run-id"),
    }


@pytest.mark.parametrize(
    ("words", "flag", "deprecated"),
    [
        (["watch"], "--timeout-minutes", "--timeout"),
        (["swe", "eval"], "--timeout-seconds", "--timeout"),
        (["swe", "eval"], "--harness-run-id", "--run-id"),
    ],
)
def test_help_says_which_spelling_is_deprecated(words, flag, deprecated, capsys):
    with pytest.raises(SystemExit):
        main([*words, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert f"{deprecated} " in out and f"deprecated: use {flag}" in out
    assert "Not a history run id" in out or flag != "--harness-run-id"


def test_the_old_and_new_spelling_together_are_one_option_given_twice(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["watch", "RUN", "--timeout-minutes", "1", "--timeout", "2"])
    out, err = capsys.readouterr()
    assert stop.value.code == 2 and not out
    assert "--timeout-minutes: given twice (1.0, then 2.0); give it once" in err


def test_a_renamed_list_option_keeps_every_value_and_warns_once(capsys):
    parser = argparse.ArgumentParser()
    add_renamed(parser, "--junit", "--junit-xml", action=Extend, default=[], help="JUnit")
    add_renamed(parser, "--override", "-O", action="append", default=[], help="a=b")
    junit = ["--junit", "a", "--junit-xml", "b", "c", "--junit-xml", "d"]
    args = parser.parse_args([*junit, "-O", "x=1", "--override", "y=2", "-O", "z=3"])
    assert args.junit == ["a", "b", "c", "d"]
    assert args.override == ["x=1", "y=2", "z=3"]
    assert capsys.readouterr().err == _warning("--junit-xml", "--junit") + _warning(
        "-O", "--override"
    )
    assert parser.parse_args([]).junit == []  # the default is the new option's


# --- swe compare / history record: --recipe takes the YAML, --recipe-name a name -----------


def _record(db: str, junit: str, *recipe: str) -> list[str]:
    return ["history", "record", "--db", db, "--junit", junit, *recipe]


@pytest.fixture(scope="module")
def junit(tmp_path_factory) -> str:
    """check-run's real JUnit of an MLPerf run."""
    path = tmp_path_factory.mktemp("junit") / "r.xml"
    code = main(
        ["check-run", str(mlperf_path(256, 1)), "--recipe", str(RECIPE), "--junit", str(path)]
    )
    assert code in (0, 1)
    return str(path)


def test_a_recipe_name_is_recorded_alike_by_recipe_name_and_by_the_old_recipe(
    junit, tmp_path, capsys
):
    pytest.importorskip("sqlalchemy", reason="the [history] extra is not installed")
    from rlgate.history.store import open_store

    db = str(tmp_path / "h.db")
    code, _, err = run([*_record(db, junit, "--recipe-name", "swe_gate"), "--run-id", "a"], capsys)
    assert code == 0 and "warning" not in err, err
    code, _, err = run([*_record(db, junit, "--recipe", "swe_gate"), "--run-id", "b"], capsys)
    assert code == 0, err
    assert "rlgate: warning: --recipe NAME is deprecated; use --recipe-name NAME" in err
    with open_store(db) as store:
        runs = {r.context.run_id: r.context for r in store.runs(recipe="swe_gate")}
    assert sorted(runs) == ["a", "b"]
    assert runs["a"].recipe_sha256 is None and runs["b"].recipe_sha256 is None


@pytest.mark.parametrize("words", [["swe", "compare"], ["history", "record"]])
def test_recipe_refuses_a_missing_file_and_recipe_name_with_it(words, tmp_path, capsys):
    base = [*words, "--before", "b", "--after", "a"] if words[0] == "swe" else words
    for bad, message in (
        (["--recipe", str(tmp_path / "gone.yaml")], "no such recipe file"),
        (["--recipe", str(RECIPE), "--recipe-name", "x"], "not allowed with argument"),
    ):
        with pytest.raises(SystemExit) as stop:
            main([*base, *bad])
        out, err = capsys.readouterr()
        assert stop.value.code == 2 and not out and message in err, err
