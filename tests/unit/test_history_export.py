"""``history export``: CSV a spreadsheet cannot run, values that stay what they are.

Runs recorded by rlgate whose text starts like a formula (``=``, ``+``, ``-``, ``@``, tab,
carriage return: rlgate accepts such names), with negative measured values, or holds
terminal controls (ESC, C1, NUL, bidi). The CSV is read back with Python's ``csv`` module and
pyarrow's reader: controls are escaped as ``\x1b`` (reversibly), every text cell that still
starts like a formula starts with ``'``, numbers are numbers; Parquet keeps every value as
recorded.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest

pytest.importorskip("sqlalchemy", reason="the [history] extra is not installed")

from rlgate.core.results import Result, Tier
from rlgate.history.ingest import make_context
from rlgate.history.store import open_store
from rlgate.testing.corpus import Fault

from .helpers.cli import run_cli as run
from .helpers.triage_inputs import gate_results

FORMULAS = ("=HYPERLINK(\"http://evil.example\",\"x\")", "+1+cmd|' /C calc'!A0", "-2+3",
            "@SUM(A1:A9)", "\t=1+1", "\r=1+1")  # fmt: skip


@pytest.fixture
def formula_db(tmp_path: Path) -> str:
    """Runs whose text is formulas (rlgate accepts them), with negative measured values."""
    db = str(tmp_path / "h.db")
    real = [r for r in gate_results(Fault.HEALTHY) if r.value is not None][:2]
    with open_store(db) as store:
        store.record(
            make_context(run_id=FORMULAS[0], recipe=FORMULAS[1], nightly_id=FORMULAS[2],
                         branch=FORMULAS[3], hardware="-64n4g", label="@DEMO"),
            [*real, Result(name=FORMULAS[0], tier=Tier.PERF, status="fail", value=-1.5,
                           threshold=-2.0, message=FORMULAS[4], bound=FORMULAS[5])],
            {FORMULAS[2]: [(1, -0.25), (2, -3.0)]},
        )  # fmt: skip
    return db


def test_csv_export_neutralises_formulas_and_keeps_numbers(
    formula_db: str, tmp_path: Path, capsys
) -> None:
    for table in ("results", "runs", "steps"):
        out = tmp_path / f"{table}.csv"
        code, _, err = run(["history", "export", str(out), "--db", formula_db, "--table",
                            table], capsys)  # fmt: skip
        assert code == 0, err
        with out.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        cells = [v for row in rows for v in row.values()]
        text_cells = [v for row in rows for k, v in row.items() if k not in NUMBERS]
        assert not [c for c in text_cells if c.startswith(("=", "+", "-", "@", "\t", "\r"))]
        assert f"'{FORMULAS[0]}" in cells and f"'{FORMULAS[3]}" in cells
        if table == "results":
            mine = rows[-1]
            assert (mine["name"], mine["message"], mine["bound"]) == (
                f"'{FORMULAS[0]}",
                f"'{FORMULAS[4]}",
                "\\x0d=1+1",  # a carriage return is a control: escaped, then not a formula
            )
            assert (mine["value"], mine["threshold"]) == ("-1.5", "-2")  # numbers, unprefixed
            typed = pa_csv.read_csv(out).to_pylist()
            assert typed[-1]["value"] == -1.5 and typed[-1]["threshold"] == -2.0
        if table == "steps":
            assert [r["value"] for r in rows] == ["-0.25", "-3"]
            assert {r["tag"] for r in rows} == {f"'{FORMULAS[2]}"}
        if table == "runs":
            assert rows[0]["hardware"] == "'-64n4g" and rows[0]["label"] == "'@DEMO"


NUMBERS = {"value", "threshold", "position", "step", "schema_version"}


def test_parquet_export_keeps_every_value_as_it_is(formula_db: str, tmp_path: Path, capsys) -> None:
    out = tmp_path / "r.parquet"
    assert run(["history", "export", str(out), "--db", formula_db], capsys)[0] == 0
    table = pq.read_table(out)
    rows = table.to_pylist()
    assert rows[-1]["name"] == FORMULAS[0] and rows[-1]["message"] == FORMULAS[4]
    assert rows[-1]["run_id"] == FORMULAS[0] and rows[-1]["value"] == -1.5
    assert table.schema.field("value").type == pa.float64()
    assert table.schema.field("position").type == pa.int64()
    assert table.schema.field("recorded_at").type == pa.timestamp("us", tz="UTC")


#: Text that drives a terminal when a CSV is ``cat``-ed: an OSC 8 hyperlink, a C1 CSI
#: (U+009B), a bidi override, NUL and BEL; and a backslash that reads like an escape.
CONTROLS = ("\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\ \x9b31mred \u202ebidi "
            "\x00nul \x07bel C:\\x1b")  # fmt: skip


@pytest.fixture
def control_db(tmp_path: Path) -> str:
    """A run whose checks' text holds terminal controls (rlgate records them as they are)."""
    db = str(tmp_path / "c.db")
    with open_store(db) as store:
        store.record(
            make_context(run_id="r1", recipe="rec", nightly_id="n1", branch="main"),
            [Result(name="check\x1b[2J", tier=Tier.PERF, status="fail", value=1.0,
                    message=CONTROLS, bound="\r\x9b2J=1")],
            {"train/\x1b[1mreward": [(1, 0.5)]},
        )  # fmt: skip
    return db


_RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def test_csv_export_escapes_terminal_controls_reversibly(
    control_db: str, tmp_path: Path, capsys
) -> None:
    """``cat results.csv`` shows the controls as ``\\x1b``; unescape_controls gives them back."""
    from rlgate.core.text import escape_controls, unescape_controls

    for table, column, value in (("results", "message", CONTROLS),
                                 ("results", "name", "check\x1b[2J"),
                                 ("steps", "tag", "train/\x1b[1mreward")):  # fmt: skip
        out = tmp_path / f"{table}.csv"
        code, _, err = run(["history", "export", str(out), "--db", control_db, "--table", table],
                           capsys)  # fmt: skip
        assert code == 0, err
        raw = out.read_text(encoding="utf-8")
        assert not _RAW.findall(raw), [c for c in _RAW.findall(raw)]
        with out.open(newline="", encoding="utf-8") as fh:
            (row,) = list(csv.DictReader(fh))
        assert row[column] == escape_controls(value)
        assert unescape_controls(row[column]) == value
    with (tmp_path / "results.csv").open(newline="", encoding="utf-8") as fh:
        (row,) = list(csv.DictReader(fh))
    assert row["bound"] == "\\x0d\\x9b2J=1"  # escaped first: no longer starts like a formula


def test_parquet_export_keeps_controls_as_recorded(control_db: str, tmp_path: Path, capsys) -> None:
    out = tmp_path / "r.parquet"
    assert run(["history", "export", str(out), "--db", control_db], capsys)[0] == 0
    (row,) = pq.read_table(out).to_pylist()
    assert row["message"] == CONTROLS and row["bound"] == "\r\x9b2J=1"
