"""Running the ``rlgate`` CLI in-process in tests, and reading its one error message."""

from __future__ import annotations

import pytest

from rlgate.cli.app import main


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``main(args)``'s exit code, then what it printed to stdout and stderr."""
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def one_error(err: str) -> str:
    """The single ``rlgate: error:`` message (never a traceback)."""
    assert "Traceback" not in err and err.count("rlgate: error:") == 1, err
    return err
