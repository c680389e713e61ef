"""One order combines several inputs' exit codes: 70 > 2 > 1 > 3 > 0 (rlgate.core.errors).

A failure (1) is never hidden by an infrastructure or incomplete result (3): ``watch`` over a
dead run and a stalled one used to exit 3 ("rerun") because it took the maximum.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlgate.cli.app import build_parser, main
from rlgate.core.errors import EXIT_ORDER, EXIT_ORDER_TEXT, ExitCode, worst_exit_code
from rlgate.launch.manifest import load_manifest
from rlgate.launch.watch import read_progress

from .helpers.launch_fixtures import launch_local, stop_local_run, wait_for

CODES = st.lists(st.sampled_from([int(c) for c in ExitCode]), min_size=1, max_size=8)


def test_the_order_is_the_documented_one():
    assert [int(c) for c in EXIT_ORDER] == [70, 2, 1, 3, 0]
    assert EXIT_ORDER_TEXT == "70 > 2 > 1 > 3 > 0"


@settings(max_examples=60, deadline=None)
@given(CODES)
def test_the_worst_code_is_the_first_of_the_order_present(codes):
    worst = worst_exit_code(codes)
    assert worst == next(int(c) for c in EXIT_ORDER if c in codes)
    if ExitCode.FAIL in codes and not {ExitCode.INTERNAL, ExitCode.USAGE} & set(codes):
        assert worst == ExitCode.FAIL  # never hidden by 3 (infra, incomplete) or 0
    assert worst_exit_code(list(reversed(codes))) == worst  # the order of inputs is irrelevant


def test_an_unknown_code_ranks_worst_and_nothing_given_is_usage():
    assert worst_exit_code([0, 1, 130]) == 130
    assert worst_exit_code([]) == ExitCode.USAGE


@pytest.mark.parametrize("command", [("watch",), ("recipe", "check")])
def test_commands_that_combine_codes_document_the_order(command):
    parser = build_parser()
    for word in command:
        parser = next(
            a.choices[word]
            for a in parser._actions
            if getattr(a, "choices", None) and word in a.choices
        )
    assert EXIT_ORDER_TEXT in parser.description


def test_watch_over_a_dead_run_and_a_stalled_one_exits_1(tmp_path: Path, capsys) -> None:
    """A run that died of a bug (1) next to a stalled one (3): the failure decides."""
    dead = launch_local(
        tmp_path / "dead",
        "--stop-at-step", "0", "--exit-code", "1", "--fail-with", "ValueError: loss is NaN",
    )  # fmt: skip
    stalled = launch_local(tmp_path / "stalled", "--stop-at-step", "1", "--hang", steps=4)
    try:
        wait_for(lambda: read_progress(load_manifest(stalled).log_dir).last_step == 1)
        code = main(
            ["watch", str(dead), str(stalled), "--interval", "0.2", "--stall-minutes", "0.05"]
        )
        out = capsys.readouterr().out
        assert "run: FAILED" in out and "run: STALLED" in out, out
        assert code == ExitCode.FAIL
    finally:
        stop_local_run(stalled)


def test_watch_over_a_bad_run_dir_and_a_dead_run_exits_2(tmp_path: Path, capsys) -> None:
    dead = launch_local(
        tmp_path / "dead",
        "--stop-at-step", "0", "--exit-code", "1", "--fail-with", "ValueError: loss is NaN",
    )  # fmt: skip
    (tmp_path / "empty").mkdir()
    assert main(["watch", str(dead), str(tmp_path / "empty"), "--interval", "0.2"]) == 2
    assert "no run manifest" in capsys.readouterr().err
