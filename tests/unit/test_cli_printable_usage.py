"""argparse's own output (usage errors, --help) goes through the printable guard too.

``rlgate history show R $'x\\x1b]0;P\\x07'`` used to print argparse's "unrecognized
arguments" error with the raw escape sequence (here: set the terminal's title), because
``main`` parsed the arguments before the guard was installed.
"""

from __future__ import annotations

import pytest

from rlgate.cli.app import main

TITLE = "x\x1b]0;P\x07"  # OSC 0: sets the terminal title; BEL ends it
CLEAR = "\x1b[2J\x1b[H"  # erase the screen, cursor home


def _usage_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as stop:
        main(args)
    assert stop.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    return err


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        pytest.param(
            ["history", "show", "R", TITLE], "x\\x1b]0;P\\x07", id="unrecognized_argument"
        ),
        pytest.param(["versions", CLEAR], "\\x1b[2J\\x1b[H", id="unrecognized_after_a_command"),
        pytest.param(
            ["triage", "--candidate", "c.xml", "--baseline-commit", f"nemo_rl={TITLE}"],
            "\\x1b]0;P\\x07",
            id="argument_type_message",
        ),
        pytest.param(["history", "show"], "the following arguments are required", id="missing"),
    ],
)
def test_usage_errors_show_control_characters_visibly(args, shown, capsys):
    err = _usage_error(args, capsys)
    assert "\x1b" not in err and "\x07" not in err, repr(err)
    assert shown in err and "usage: rlgate" in err


def test_help_is_printed_through_the_guard_and_still_complete(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["report", "--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: rlgate report") and "--junit FILE [FILE ...]" in out
    assert "\x1b" not in out
