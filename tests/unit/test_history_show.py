"""``rlgate history show``: check runs and SWE runs in tables of their own, ``--last`` per table.

The history holds what a nightly records: the corpus run gated by its recipe's real checks
(``check-run --db``) and the SWE gate's real criteria (``swe compare --db``), the two under
the same recipe and nightly id, a few minutes apart, in a real SQLite store.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy", reason="the [history] extra is not installed")

from rlgate.core.results import Tier
from rlgate.history.store import open_store
from rlgate.testing.corpus import Fault

from .helpers.cli import run_cli as run
from .helpers.triage_inputs import RECIPE, gate_results, nightly, swe_criteria

NIGHTLIES = 12


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    """12 nightlies, each a check run then a SWE run; nightly 12 also has a run with both."""
    path = str(tmp_path_factory.mktemp("show") / "h.db")
    checks, swe = gate_results(Fault.HEALTHY), swe_criteria(False)
    with open_store(path) as store:
        for k in range(1, NIGHTLIES + 1):
            for run_ in (nightly(k, checks), nightly(k, swe, part="swe", hours=0.5)):
                store.record(run_.context, run_.results)
    return path


def sections(out: str) -> dict[str, list[str]]:
    """The lines of each section (``check runs``, ``SWE runs``), keyed by its title."""
    found: dict[str, list[str]] = {}
    current = None
    for line in out.splitlines():
        title = re.match(r"(check runs|SWE runs)\b", line)
        if title:
            current = title.group(1)
            found[current] = [line]
        elif current is not None:
            found[current].append(line)
    return found


def run_rows(lines: list[str]) -> list[str]:
    return [line for line in lines if re.match(r"  \d+ +\d{4}-\d\d-\d\d ", line)]


def marks_of(lines: list[str], name: str) -> str:
    row = next(line for line in lines if line.split()[:1] == [name])
    return row.split()[1]


def test_check_runs_and_swe_runs_are_separate_tables_with_no_blank_marks(db, capsys) -> None:
    code, out, err = run(["history", "show", RECIPE, "--db", db], capsys)
    assert code == 0, err
    parts = sections(out)
    assert set(parts) == {"check runs", "SWE runs"}, out
    checks, swe = parts["check runs"], parts["SWE runs"]
    assert len(run_rows(checks)) == len(run_rows(swe)) == NIGHTLIES
    assert all("-checks-" in row for row in run_rows(checks)), checks
    assert all("-swe-" in row for row in run_rows(swe)), swe
    gate = [r for r in gate_results(Fault.HEALTHY) if not r.informational]
    criteria = [r for r in swe_criteria(False) if not r.informational]
    assert {r.tier for r in criteria} == {Tier.SWE_GATE} and Tier.SWE_GATE not in {
        r.tier for r in gate
    }
    for r in gate:  # every check recorded in every check run: a mark per run, none blank
        assert len(marks_of(checks, r.name)) == NIGHTLIES, r.name
        assert not any(line.split()[:1] == [r.name] for line in swe)
    for r in criteria:
        assert len(marks_of(swe, r.name)) == NIGHTLIES, r.name
        assert not any(line.split()[:1] == [r.name] for line in checks)
    assert "12 run(s)" in checks[0] and "12 run(s)" in swe[0]


def test_last_n_is_n_nightlies_in_each_table(db, capsys) -> None:
    """``--last 10`` printed 20 runs (a check run and a SWE run per nightly), every row half
    blank; now each table shows the runs of its 10 newest nightlies: 10 runs each."""
    code, out, err = run(["history", "show", RECIPE, "--db", db, "--last", "10"], capsys)
    assert code == 0, err
    parts = sections(out)
    for title, part in (("check runs", "checks"), ("SWE runs", "swe")):
        rows = run_rows(parts[title])
        assert [row.split()[0] for row in rows] == [str(i) for i in range(1, 11)], rows
        assert f"n03-{part}-main" in rows[0] and f"n12-{part}-main" in rows[-1], rows
        assert "10 run(s)" in parts[title][0]
        assert "n02" not in "\n".join(parts[title])


def test_one_check_is_shown_from_the_table_that_records_it(db, capsys) -> None:
    gate_name = next(r.name for r in gate_results(Fault.HEALTHY) if not r.informational)
    swe_name = next(r.name for r in swe_criteria(False) if not r.informational)
    for name, title, other in (
        (gate_name, "check runs", "SWE runs"),
        (swe_name, "SWE runs", "check runs"),
    ):
        cmd = ["history", "show", RECIPE, "--db", db, "--check", name, "--last", "3"]
        code, out, err = run(cmd, capsys)
        assert code == 0, err
        parts = sections(out)
        assert title in parts and other not in parts, out
        values = [
            line for line in parts[title] if re.match(r"  \d+ +(PASS|FAIL|ERROR|SKIP) ", line)
        ]
        assert len(values) == 3 and not re.search(r"^  \d+ +-$", out, flags=re.M), out


def test_a_run_holding_both_kinds_is_in_both_tables_with_its_own_results(
    tmp_path: Path, capsys
) -> None:
    """``history record --run-json --swe-json`` records one run with checks and criteria."""
    path = str(tmp_path / "h.db")
    both = nightly(1, [*gate_results(Fault.HEALTHY), *swe_criteria(False)], part="both")
    with open_store(path) as store:
        store.record(both.context, both.results)
    code, out, err = run(["history", "show", RECIPE, "--db", path], capsys)
    assert code == 0, err
    parts = sections(out)
    assert [len(run_rows(parts[t])) for t in ("check runs", "SWE runs")] == [1, 1], out
    criterion = next(r.name for r in swe_criteria(False) if not r.informational)
    assert marks_of(parts["SWE runs"], criterion) in {".", "F", "E", "s"}
    assert not any(line.split()[:1] == [criterion] for line in parts["check runs"])


def test_a_history_without_swe_runs_says_so(tmp_path: Path, capsys) -> None:
    path = str(tmp_path / "h.db")
    only = nightly(1, gate_results(Fault.HEALTHY))
    with open_store(path) as store:
        store.record(only.context, only.results)
    code, out, err = run(["history", "show", RECIPE, "--db", path], capsys)
    assert code == 0, err
    parts = sections(out)
    assert len(run_rows(parts["check runs"])) == 1
    assert parts.get("SWE runs", [""])[0].startswith("SWE runs: none"), out


def test_canary_and_bisection_runs_are_not_the_recipe_s_history_unless_asked(
    tmp_path: Path, capsys
) -> None:
    """Without --branch: main's (and feature branches') runs only, the rest counted and named."""
    path = str(tmp_path / "h.db")
    healthy, broken = gate_results(Fault.HEALTHY), gate_results(Fault.REWARD_FLAT)
    with open_store(path) as store:
        for k in (1, 2):
            main = nightly(k, healthy)
            store.record(main.context, main.results)
        for branch in ("canary/vllm-0.26.0", "bisect/r/abc..def", "pr-7"):
            other = nightly(3, broken, branch=branch)
            store.record(other.context, other.results)
    code, out, err = run(["history", "show", RECIPE, "--db", path], capsys)
    assert code == 0, err
    rows = run_rows(sections(out)["check runs"])
    assert [r.split()[3] for r in rows] == ["n01-checks-main", "n02-checks-main",
                                            "n03-checks-pr-7"], rows  # fmt: skip
    assert out.splitlines()[-1] == (
        "not shown: 1 run(s) of bisect/r/abc..def, 1 run(s) of canary/vllm-0.26.0 "
        "(--branch BRANCH shows them)"
    )
    code, out, err = run(["history", "show", RECIPE, "--db", path, "--branch",
                          "canary/vllm-0.26.0"], capsys)  # fmt: skip
    assert code == 0 and "not shown" not in out, err
    assert [r.split()[3] for r in run_rows(sections(out)["check runs"])] == [
        "n03-checks-canary/vllm-0.26.0"]  # fmt: skip


def test_a_recipe_with_only_canary_runs_says_so(tmp_path: Path, capsys) -> None:
    path = str(tmp_path / "h.db")
    canary = nightly(1, gate_results(Fault.HEALTHY), branch="canary/vllm-0.26.0")
    with open_store(path) as store:
        store.record(canary.context, canary.results)
    code, _, err = run(["history", "show", RECIPE, "--db", path], capsys)
    assert code == 2 and "has only canary and bisection runs" in err, err
    assert "1 run(s) of canary/vllm-0.26.0" in err and "Traceback" not in err
