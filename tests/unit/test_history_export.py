"""``history export``: CSV a spreadsheet cannot run, values that stay what they are.

Runs recorded by rlgate whose text starts like a formula (``=``, ``+``, ``-``, ``@``, tab,
carriage return: rlgate accepts such names), with negative measured values. The CSV is read
back with Python's ``csv`` module and pyarrow's reader: every text cell that started like a
formula starts with ``'``, numbers are numbers; Parquet keeps every value as recorded.
"""

from __future__ import annotations

import csv
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
                f"'{FORMULAS[5]}",
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
