"""Time arguments: ``history prune --before`` takes any ISO date or time, or says why not.

One argument type (``rlgate.core.validate.utc_time``) and one conversion to UTC
(``as_utc``, which the run context's model uses too): hypothesis over ISO times in every
offset, near both ends of the calendar, and over any text; a time outside the years
1..9999 once in UTC (``0001-01-01T00:00+14:00``) is one message, never an
``OverflowError`` traceback.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlgate.core.errors import ExitCode, RlgateError
from rlgate.core.validate import utc_time
from rlgate.history.ingest import make_context

from .helpers.cli import run_cli as run


def cli(args: list[str], capsys) -> tuple[int, str, str]:
    """``run_cli``, with argparse's exit (a bad argument) as its exit code."""
    try:
        return run(args, capsys)
    except SystemExit as stop:
        out, err = capsys.readouterr()
        return int(stop.code), out, err


# --- time arguments -----------------------------------------------------------------------------

OFFSETS = st.builds(
    lambda minutes: timezone(timedelta(minutes=minutes)), st.integers(-23 * 60 - 59, 23 * 60 + 59)
)
# anywhere, and near both ends, where a zone's offset takes the UTC time out of range
TIMES = st.one_of(
    st.datetimes(datetime(1, 1, 1), datetime(9999, 12, 31, 23, 59), timezones=OFFSETS),
    st.datetimes(datetime(1, 1, 1), datetime(1, 1, 2), timezones=OFFSETS),
    st.datetimes(datetime(9999, 12, 30), datetime(9999, 12, 31, 23, 59), timezones=OFFSETS),
)


@settings(max_examples=500, deadline=None)
@given(when=TIMES, form=st.sampled_from(["seconds", "minutes", "date", "Z"]))
def test_before_takes_every_iso_time_or_refuses_it_in_one_message(when, form) -> None:
    text = {
        "seconds": when.isoformat(),
        "minutes": when.isoformat(timespec="minutes"),
        "date": when.date().isoformat(),
        "Z": when.replace(tzinfo=None).isoformat() + "Z",
    }[form]
    try:
        parsed = utc_time(text)
    except argparse.ArgumentTypeError as exc:
        assert "is outside the years 1..9999 once in UTC" in str(exc) and text in str(exc)
        return
    assert parsed.tzinfo is UTC
    expected = datetime.fromisoformat(text)
    expected = expected.replace(tzinfo=UTC) if expected.tzinfo is None else expected
    assert parsed == expected


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=40))
def test_before_refuses_any_other_text_with_an_argument_error(text: str) -> None:
    try:
        parsed = utc_time(text)
    except argparse.ArgumentTypeError as exc:
        assert str(exc).startswith(repr(text[:80]))
    else:
        assert parsed.tzinfo is UTC


@pytest.mark.parametrize("before", ["0001-01-01T00:00+14:00", "9999-12-31T23:59-14:00"])
def test_prune_before_out_of_range_is_one_message(before: str, tmp_path: Path, capsys) -> None:
    db = str(tmp_path / "h.db")
    code, out, err = cli(["history", "prune", "--before", before, "--db", db], capsys)
    assert code == ExitCode.USAGE and "Traceback" not in err and not out
    assert [line for line in err.splitlines() if "error:" in line] == [
        f"rlgate history prune: error: argument --before: {before!r} is outside the years "
        "1..9999 once in UTC"
    ]
    assert not Path(db).exists()


def test_a_time_out_of_range_is_refused_by_the_record_model_too() -> None:
    with pytest.raises(RlgateError, match=r"outside the years 1\.\.9999"):
        make_context(
            run_id="r",
            recipe="x",
            recorded_at=datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
        )
