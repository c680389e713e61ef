"""Every command's exit code agrees with its own JSON, and a list option given twice decides as
the same values given once: ``rlgate triage`` (``--json``'s ``exit_code`` and labels) and
``rlgate swe compare`` (``--json``'s verdict).

Triage runs against a real SQLite history of nightlies holding rlgate Results; the candidate
is JUnit written by rlgate's writer. ``swe compare`` runs on per-instance maps of the bundled
500 Verified ids (``rlgate.demo.build.write_demo_swe``). Only agreement is tested here, not
which label a check gets (``test_triage*.py``).
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlgate.cli.app import main
from rlgate.core.junit import JunitCase, JunitSuite, write_junit
from rlgate.core.results import INFRA_CAUSE, Outcome, Result, Tier
from rlgate.demo.build import BUNDLED_INSTANCES, write_demo_swe
from rlgate.history.store import open_store
from rlgate.swe.records import load_universe

from .helpers.triage_inputs import nightly

RECIPE = "grpo-agreement"
#: check -> its outcome in nightly k (1..6) of main; "new" is in no nightly
HISTORY = {
    "steady": lambda k: Outcome.PASS,
    "broken": lambda k: Outcome.FAIL,
    "flip": lambda k: Outcome.PASS if k % 2 else Outcome.FAIL,
}
CHECKS = (*HISTORY, "new")
#: what triage's exit code is for the labels its JSON states (docs/history.md)
FAILING, RERUN = {"regression", "unknown"}, {"flaky", "infra"}


def _result(name: str, outcome: Outcome, infra: bool = False) -> Result:
    evidence = {INFRA_CAUSE: {"reason": "stalled", "detail": "no new step"}} if infra else {}
    return Result(
        name=name,
        tier=Tier.CONVERGENCE,
        outcome=outcome,
        message=f"{name} {outcome.value}",
        evidence=evidence,
    )


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> str:
    db = str(tmp_path_factory.mktemp("history") / "history.db")
    with open_store(db) as store:
        for k in range(1, 7):
            run = nightly(k, [_result(n, of(k)) for n, of in HISTORY.items()], recipe=RECIPE)
            store.record(run.context, run.results)
    return db


def _run(args: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    assert "Traceback" not in err.getvalue()
    return code, err.getvalue()


def _triage(db: str, groups: list[list[Path]], out: Path) -> tuple[int, dict]:
    args = ["triage", *(a for g in groups for a in ("--candidate", *map(str, g)))]
    code, err = _run([*args, "--db", db, "--last", "5", "--json", str(out)])
    assert code in (0, 1, 3), f"exit {code}: {err}"
    doc = json.loads(out.read_text(encoding="utf-8"))
    return code, doc


OUTCOMES = st.sampled_from(["pass", "fail", "error", "infra", "skip"])
CANDIDATES = st.dictionaries(st.sampled_from(CHECKS), OUTCOMES, min_size=1)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(candidate=CANDIDATES, split=st.integers(0, 4))
def test_triage_exit_code_is_its_jsons_for_any_candidate_and_option_shape(
    history, candidate, split
):
    results = [
        _result(
            name,
            Outcome.ERROR if outcome == "infra" else Outcome(outcome),
            infra=outcome == "infra",
        )
        for name, outcome in sorted(candidate.items())
    ]
    cases = [
        JunitCase.of(r, classname=f"rlgate.convergence.{RECIPE}", facts={"recipe": RECIPE})
        for r in results
    ]
    cut = split % (len(cases) + 1)
    with tempfile.TemporaryDirectory(prefix="rlgate-agreement-") as tmp:
        root = Path(tmp)
        files = []
        for i, part in enumerate(p for p in (cases[:cut], cases[cut:]) if p):
            files.append(root / f"candidate-{i}.xml")
            files[-1].write_text(write_junit([JunitSuite.of("candidate", part)]))
        code, doc = _triage(history, [files], root / "one.json")
        again, repeated = _triage(history, [[f] for f in files], root / "repeated.json")
    labels = {lb["label"] for lb in doc["labels"]}
    assert doc["exit_code"] == code  # the JSON says what the process exits with
    expected = 1 if labels & FAILING else 3 if labels & RERUN else 0
    assert code == expected, (labels, code)
    # each label says whether it blocks, and exit 1 is exactly "some label blocks"
    assert all(lb["blocks"] == (lb["label"] in FAILING) for lb in doc["labels"])
    assert (code == 1) == any(lb["blocks"] for lb in doc["labels"])
    # --candidate A --candidate B is --candidate A B
    assert (again, repeated["exit_code"], repeated["labels"]) == (code, code, doc["labels"])
    failing = {n for n, o in candidate.items() if o in ("fail", "error", "infra")}
    assert {lb["check"] for lb in doc["labels"]} == failing  # every failing check, once


# --- swe compare -------------------------------------------------------------------------------

SWE_EXIT = {"improved": 0, "no_significant_change": 0, "regressed": 1, "inconclusive": 3}


@pytest.fixture(scope="module")
def swe_maps(tmp_path_factory) -> dict[str, list[Path]]:
    root = tmp_path_factory.mktemp("swe")
    ids = list(load_universe(BUNDLED_INSTANCES).ids)
    before, after = write_demo_swe(root, ids, seeds=2, seed=5)
    infra = []
    for path in before:
        doc = json.loads(path.read_text())
        for iid in sorted(doc)[: len(doc) // 3]:
            doc[iid] = {"resolved": False, "infra_failure": True,
                        "infra_failure_reason": "container_unavailable"}  # fmt: skip
        infra.append(path.with_name(f"infra_{path.name}"))
        infra[-1].write_text(json.dumps(doc))
    return {"before": before, "after": after, "infra": infra}


@pytest.mark.parametrize(
    ("before", "after", "verdict"),
    [
        ("before", "after", "improved"),
        ("after", "before", "regressed"),
        ("before", "before", "no_significant_change"),
        ("infra", "after", "inconclusive"),
    ],
    ids=["improved", "regressed", "same_model", "infra"],
)
def test_swe_compare_exit_code_is_its_jsons_verdict_and_repeats_change_nothing(
    swe_maps, tmp_path, before, after, verdict
):
    def compare(shape: str, out: Path) -> tuple[int, dict]:
        args = ["swe", "compare", "--dataset", str(BUNDLED_INSTANCES), "--resamples", "200"]
        for flag, arm in (("--before", before), ("--after", after)):
            paths = [str(p) for p in swe_maps[arm]]
            args += [flag, *paths] if shape == "one" else [a for p in paths for a in (flag, p)]
        code, err = _run([*args, "--json", str(out)])
        assert code in (0, 1, 3), f"exit {code}: {err}"
        return code, json.loads(out.read_text(encoding="utf-8"))

    code, doc = compare("one", tmp_path / "one.json")
    assert doc["verdict"] == verdict and code == SWE_EXIT[verdict]
    assert [len(doc[arm]["runs"]) for arm in ("before", "after")] == [2, 2]
    # --before A --before B is --before A B: every run counts, the same comparison
    again, repeated = compare("repeated", tmp_path / "repeated.json")
    assert again == code and repeated["verdict"] == verdict
    assert [len(repeated[arm]["runs"]) for arm in ("before", "after")] == [2, 2]
    assert repeated["delta_pp"] == doc["delta_pp"] and repeated["p_value"] == doc["p_value"]
