"""Canary runs in the history: the branch canary/<stack>, and never part of main's triage.

The canary's runs are made from the real functional-tier JUnit of vLLM 0.26.0
(tests/unit/data/canary/), recorded by rlgate's own writer into a real SQLite file (and a
real PostgreSQL server where its binaries are installed), and read by the real CLI.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlgate.canary.record import document, junit_versions, record_candidate
from rlgate.cli.app import main
from rlgate.core.errors import ExitCode, RlgateError
from rlgate.core.results import Tier
from rlgate.history.canary import CANARY_RECIPE, canary_branch, canary_runs
from rlgate.history.model import CommitRef, RecordedRun, RunContext
from rlgate.history.triage import triage

from .helpers.history_inputs import BACKENDS, database
from .test_triage_properties import (
    CANDIDATE,
    CHECKS,
    HW,
    RECIPE,
    T0,
    candidates,
    fresh,
    histories,
    outcomes,
    result,
)

DATA = Path(__file__).parent / "data" / "canary"
PIN = DATA / "functional-vllm-0.25.1.xml"
CAND = DATA / "functional-vllm-0.26.0.xml"
BRANCH = "canary/vllm-0.26.0"


def _runs(nightly: str = "c1", k: int = 0, recipe_doc=None):
    return canary_runs(
        [CAND], packages=["vllm"], recipe_doc=recipe_doc, nightly_id=nightly,
        recorded_at=T0 + timedelta(days=k),
    )  # fmt: skip


class TestBranch:
    def test_the_branch_is_the_moved_packages_at_the_candidate_s_versions(self) -> None:
        versions = junit_versions([CAND])
        assert canary_branch(["vllm"], versions) == BRANCH
        assert (
            canary_branch(["vllm", "transformers"], {"vllm": "0.29.0", "transformers": "5.12.0"})
            == "canary/transformers-5.12.0_vllm-0.29.0"
        )
        with pytest.raises(ValueError, match="reports no version of nemo-gym"):
            canary_branch(["nemo-gym"], {"vllm": "0.26.0"})

    @pytest.mark.parametrize(
        "branch", ["canary/", "canary/VLLM-0.26", "canary/vllm 0.26.0", "canary/x/../y",
                   "canary/" + "a" * 200, "canary/<b>vllm</b>"]
    )  # fmt: skip
    def test_a_malformed_canary_branch_is_refused_by_the_model(self, branch: str) -> None:
        with pytest.raises(ValueError, match=r"is not a canary branch|at most 200"):
            RunContext(run_id="r", recipe="x", branch=branch)

    def test_history_record_refuses_a_malformed_canary_branch_with_one_line(
        self, tmp_path: Path, capsys
    ) -> None:
        code = main(["history", "record", "--db", str(tmp_path / "h.db"), "--junit", str(CAND),
                     "--recipe-name", CANARY_RECIPE, "--branch", "canary/vLLM 0.26"])  # fmt: skip
        err = capsys.readouterr().err
        assert code == ExitCode.USAGE
        assert err.count("rlgate: error:") == 1 and "is not a canary branch" in err
        assert "Traceback" not in err


class TestRecord:
    def test_one_run_per_recipe_with_the_candidate_s_versions(self) -> None:
        runs = _runs()
        total = sum(len(results) for _, results in runs)
        assert total == 208  # every testcase of the candidate's functional tier
        recipes = [c.recipe for c, _ in runs]
        assert CANARY_RECIPE in recipes and len(recipes) == len(set(recipes)) > 1
        for context, _ in runs:
            assert context.branch == BRANCH and context.nightly_id == "c1"
            assert context.versions["vllm"] == "0.26.0"
            assert context.versions["transformers"] == "5.8.1"
            assert "swebench" not in context.versions  # "absent" is not a version
            assert context.run_id == f"{context.recipe}@{BRANCH}@c1"

    def test_recipe_check_verdicts_are_testcases_of_their_recipe(self) -> None:
        doc = {"reports": [
            {"name": "functional-tier", "status": "incompatible", "findings": [
                {"severity": "error", "code": "parser-missing", "key": "a"}]},
            {"name": "target-recipe", "status": "compatible", "findings": []},
        ]}  # fmt: skip
        by_recipe = {c.recipe: results for c, results in _runs(recipe_doc=doc)}
        checks = [r for r in by_recipe["functional-tier"] if r.name == "recipe check"]
        assert [(r.outcome.value, r.message) for r in checks] == [
            ("fail", "recipe check: incompatible (parser-missing)")
        ]
        assert [r.outcome.value for r in by_recipe["target-recipe"]] == ["pass"]

    @pytest.mark.parametrize("backend", BACKENDS)
    def test_recorded_runs_are_shown_and_triaged_on_their_branch(
        self, backend, tmp_path: Path, capsys
    ) -> None:
        from rlgate.history.store import open_store

        db = database(backend, tmp_path)
        with open_store(db) as store:
            for k in range(3):
                record_candidate(
                    store, [CAND], packages=["vllm"], recipe_doc=None, nightly_id=f"c{k}",
                    recorded_at=T0 + timedelta(days=k),
                )  # fmt: skip
            with pytest.raises(RlgateError, match="already recorded"):
                record_candidate(
                    store, [CAND], packages=["vllm"], recipe_doc=None, nightly_id="c2",
                    recorded_at=T0 + timedelta(days=9),
                )  # fmt: skip
            assert {r.context.branch for r in store.runs()} == {BRANCH}
        capsys.readouterr()
        assert main(["history", "show", CANARY_RECIPE, "--db", db, "--branch", BRANCH]) == 0
        shown = capsys.readouterr().out
        assert shown.count(BRANCH) >= 3 and "c0" in shown and "c2" in shown
        # a candidate whose one testcase fails where the last 3 canary nightlies passed it
        text = CAND.read_text(encoding="utf-8")
        first = 'name="test_stock_qwen35_template_breaks_on_harness_user_message"'
        end = text.index("/>", text.index(first))  # a passing testcase: one self-closing tag
        broken = text[:end] + '><failure message="tool_calls == []" /></testcase>' + text[end + 2 :]
        candidate = tmp_path / "candidate.xml"
        candidate.write_text(broken, encoding="utf-8")
        out = tmp_path / "triage.json"
        code = main(["triage", "--candidate", str(candidate), "--db", db, "--main-branch",
                     BRANCH, "--last", "3", "--json", str(out)])  # fmt: skip
        doc = json.loads(out.read_text())
        assert code == ExitCode.FAIL
        assert [lb["label"] for lb in doc["labels"]] == ["regression"]
        assert doc["main_branch"] == BRANCH and doc["nightlies"] == 3
        # main has no nightly: the canary's runs are not main's history
        code = main(["triage", "--candidate", str(candidate), "--db", db, "--last", "3",
                     "--json", str(out)])  # fmt: skip
        assert [lb["label"] for lb in json.loads(out.read_text())["labels"]] == ["unknown"]

    def test_a_canary_run_is_never_promoted_nor_a_band(self, tmp_path: Path) -> None:
        from rlgate.history.store import open_store

        with open_store(tmp_path / "h.db") as store:
            (context, *_) = record_candidate(
                store, [CAND], packages=["vllm"], recipe_doc=None, nightly_id="c0",
                recorded_at=T0,
            )  # fmt: skip
            with pytest.raises(RlgateError, match="is a canary run"):
                store.promote(context.run_id, force=True)
            store._set_promoted(context.run_id, True)  # a flag another tool wrote
            assert store.promoted(context.recipe, None) == []

    def test_the_json_document_names_the_branch_and_both_stacks(self) -> None:
        from rlgate.canary.compare import compare

        doc = document(
            compare([PIN], [CAND]), label="vllm==0.26.0", relaxed=["tokenspeed-mla==0.1.2"],
            environment="/cache/x", pinned_junit=[PIN], candidate_junit=[CAND],
            packages=["vllm"],
        )  # fmt: skip
        assert doc["branch"] == BRANCH
        assert doc["pinned_versions"]["vllm"] == "0.25.1"
        assert doc["candidate_versions"]["vllm"] == "0.26.0"
        assert (doc["unchanged"], doc["tests"], doc["regression"]) == (208, [], False)


class TestCanaryOptions:
    def test_bad_db_options_exit_2_before_any_work(self, tmp_path: Path, capsys) -> None:
        tok = tmp_path / "tok"
        tok.mkdir()
        code = main(["canary", "--with", "vllm==0.26.0", "--tokenizers", str(tok), "--db",
                     str(tmp_path / "h.db"), "--commit", "nemo_rl"])  # fmt: skip
        err = capsys.readouterr().err
        assert code == ExitCode.USAGE and "is not KEY=VALUE" in err
        assert err.count("rlgate: error:") == 1 and not (tmp_path / "h.db").exists()
        code = main(["canary", "--with", "vllm==0.26.0", "--tokenizers", str(tok),
                     "--nightly-id", "n1"])  # fmt: skip
        err = capsys.readouterr().err
        assert code == ExitCode.USAGE and "give --db too" in err


# --- canary runs never change main's labels (hypothesis) ---------------------------------------


def _canary_run(i: int, nightly: str | None, when, results) -> RecordedRun:
    branch = f"canary/vllm-0.{26 + i % 3}.0"
    context = RunContext(
        run_id=f"canary{i}", recipe=RECIPE, branch=branch, hardware=HW, nightly_id=nightly,
        recorded_at=when, commits={"nemo_rl": "a" * 40},  # main's code "A", other versions
        versions={"vllm": branch.rsplit("-", 1)[1]},
    )  # fmt: skip
    return RecordedRun(context=context, results=results)


@st.composite
def canaries(draw, history: list[RecordedRun]) -> list[RecordedRun]:
    """Canary runs of main's recipe, checks, hardware, code and nightly ids, at any time."""
    nights = sorted({r.context.nightly_id for r in history if r.context.nightly_id})
    out = []
    for i in range(draw(st.integers(1, 6))):
        nightly = draw(st.sampled_from([*nights, f"c{i}", None]))
        when = T0 + timedelta(days=draw(st.integers(-2, 9)), minutes=draw(st.integers(0, 600)))
        checks = draw(outcomes(CHECKS))
        results = [result(n, Tier.CONVERGENCE, o, fresh()) for n, o in checks.items()]
        out.append(_canary_run(i, nightly, when, results))
    return out


BASE = CommitRef.parse("a" * 40)


def labels(candidate, history, commit=None) -> dict[tuple[str, str], str]:
    found = triage(candidate[0], history, recipe=RECIPE, context=CANDIDATE, last=5, commit=commit)
    return {(lb.tier.value, lb.check): lb.label.value for lb in found}


_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(st.data())
def test_canary_runs_never_change_a_main_label(data) -> None:
    history = data.draw(histories())
    candidate = data.draw(candidates())
    extra = data.draw(canaries(history))
    grown = [*history, *extra]
    assert labels(candidate, grown) == labels(candidate, history)
    # a baseline commit main ran: canaries of that code are not its reruns
    assert labels(candidate, grown, BASE) == labels(candidate, history, BASE)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_store_never_lets_a_canary_take_a_main_nightly_s_place(data) -> None:
    """Read back as the CLI reads (last N nightlies of a baseline commit), labels stay."""
    import tempfile

    from rlgate.history.store import open_store

    history = data.draw(histories())
    candidate = data.draw(candidates())
    extra = data.draw(canaries(history))
    with tempfile.TemporaryDirectory() as tmp:
        with open_store(Path(tmp) / "h.db") as store:
            for r in history:
                store.record(r.context, r.results)
            before = store.runs(commit=BASE, last=6, canaries=False)
            main_before = store.runs(branch="main", last=6)
            for r in extra:
                store.record(r.context, r.results)
            after = store.runs(commit=BASE, last=6, canaries=False)
            main_after = store.runs(branch="main", last=6)
    assert labels(candidate, after, BASE) == labels(candidate, before, BASE)
    assert labels(candidate, main_after) == labels(candidate, main_before)


def test_a_canary_run_does_not_count_toward_a_quarantine_s_runs(tmp_path: Path) -> None:
    from rlgate.history.model import Quarantine
    from rlgate.history.quarantine import add_quarantine, states
    from rlgate.history.store import open_store

    with open_store(tmp_path / "h.db") as store:
        entry = Quarantine(
            id=0, recipe=CANARY_RECIPE, check="functional:x", hardware=None, reason="flaky",
            owner="me", added_at=T0 - timedelta(days=1), added_by=None, until=None, runs=2,
        )  # fmt: skip
        add_quarantine(store, entry)
        for k in range(3):
            record_candidate(
                store, [CAND], packages=["vllm"], recipe_doc=None, nightly_id=f"c{k}",
                recorded_at=T0 + timedelta(days=k),
            )  # fmt: skip
        (state,) = states(store, T0 + timedelta(days=5))
    assert state.active and state.runs_seen == 0


# --- `canary --db`: the nightly id before any work, the comparison before the record ------------


@pytest.fixture
def stand_ins(monkeypatch, tmp_path: Path) -> dict:
    """Stand-ins for the hour-long parts of `rlgate canary` (uv resolve/build, pytest, probe).

    They copy the real JUnit of tests/unit/data/canary (``junit["candidate"]`` may be replaced)
    and log that they ran.
    """
    import shutil
    import sys
    import types

    from rlgate.canary import env

    state = {"calls": [], "candidate": CAND}

    def resolve(moves, constraints, work):
        state["calls"].append("resolve")
        return types.SimpleNamespace(relaxed=[], seconds=3600)

    def build(resolution, cache, label):
        state["calls"].append("build")
        return types.SimpleNamespace(
            reused=False, seconds=3600, path=tmp_path / "env", python=tmp_path / "env/bin/python"
        )

    def functional(python, out, tokenizers):
        state["calls"].append("functional")
        out.mkdir(parents=True, exist_ok=True)
        shutil.copy(PIN if python == Path(sys.executable) else state["candidate"],
                    out / "functional.xml")  # fmt: skip
        return 0, 900.0

    monkeypatch.setattr(env, "resolve", resolve)
    monkeypatch.setattr(env, "build", build)
    monkeypatch.setattr(env, "run_functional", functional)
    monkeypatch.setattr(env, "run_probe", lambda python, out, tokenizers: (1, 0.0))
    (tmp_path / "tok").mkdir()
    return state


def _canary_cli(tmp_path: Path, nightly: str, *extra: str) -> int:
    return main(["canary", "--with", "vllm==0.26.0", "--tokenizers", str(tmp_path / "tok"),
                 "--db", str(tmp_path / "h.db"), "--nightly-id", nightly, "--json",
                 str(tmp_path / "canary.json"), "--work-dir", str(tmp_path / "w"),
                 *extra])  # fmt: skip


@pytest.mark.parametrize(
    ("nightly", "said"),
    [
        ("n1", "is already recorded"),
        ("a\nb", "--nightly-id"),
        ("x" * 250, "--nightly-id"),
        ("y" * 190, "--run-id"),  # the nightly fits, the run id it makes does not
    ],
)
def test_a_taken_or_invalid_nightly_id_exits_2_before_any_work(
    tmp_path: Path, stand_ins: dict, capsys, nightly: str, said: str
) -> None:
    from rlgate.history.store import open_store

    with open_store(tmp_path / "h.db") as store:
        before = record_candidate(store, [CAND], packages=["vllm"], recipe_doc=None,
                                  nightly_id="n1", recorded_at=T0)  # fmt: skip
    capsys.readouterr()
    code = _canary_cli(tmp_path, nightly)
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE, err
    assert err.count("rlgate: error:") == 1 and said in err and "Traceback" not in err
    assert stand_ins["calls"] == []  # refused before resolve, build and the tiers
    assert not (tmp_path / "canary.json").exists()
    with open_store(tmp_path / "h.db") as store:
        assert sorted(c.run_id for c in store.nightly("n1")) == sorted(c.run_id for c in before)
        assert f"{CANARY_RECIPE}@{BRANCH}@n1" in {c.run_id for c in before}


def test_a_nightly_id_taken_by_another_stack_only_is_accepted(tmp_path: Path) -> None:
    from rlgate.canary.record import check_nightly
    from rlgate.canary.stack import parse_moves
    from rlgate.history.store import open_store

    with open_store(tmp_path / "h.db") as store:
        record_candidate(store, [CAND], packages=["vllm"], recipe_doc=None, nightly_id="n1",
                         recorded_at=T0)  # fmt: skip
        check_nightly(store, parse_moves(["vllm==0.29.0"]), "n1")  # another version
        check_nightly(store, parse_moves(["transformers==5.12.0"]), "n1")  # another package
        check_nightly(store, parse_moves(["vllm==0.26.0", "transformers==5.12.0"]), "n1")
        with pytest.raises(RlgateError, match="already recorded"):
            check_nightly(store, parse_moves(["vllm==0.26"]), "n1")  # the same version
        wheel = tmp_path / "vllm-0.30.0-py3-none-any.whl"
        wheel.write_bytes(b"")
        with pytest.raises(RlgateError, match="already recorded"):  # a path: any version
            check_nightly(store, parse_moves([f"vllm@{wheel}"]), "n1")


def _no_vllm_version(tmp_path: Path) -> Path:
    text = CAND.read_text()
    stripped = re.sub(r'<property name="rlgate\.version\.vllm" value="[^"]*" ?/>', "", text)
    assert stripped != text
    (tmp_path / "cand.xml").write_text(stripped)
    return tmp_path / "cand.xml"


@pytest.mark.parametrize(
    ("nightly", "said"),
    [
        # fits with the functional tier's recipe, not with the long recipe names the JUnit
        # names (known only after the run)
        ("z" * 150, "at most 200"),
        ("n2", "reports no version of vllm"),  # the candidate's JUnit names no vllm version
    ],
)
def test_a_refused_record_keeps_the_comparison(
    tmp_path: Path, stand_ins: dict, capsys, nightly: str, said: str
) -> None:
    """A record refused only after the run loses no output: table, --json, --junit."""
    if nightly == "n2":
        stand_ins["candidate"] = _no_vllm_version(tmp_path)
    capsys.readouterr()
    code = _canary_cli(tmp_path, nightly, "--junit", str(tmp_path / "canary.xml"))
    out, err = capsys.readouterr()
    assert code == ExitCode.USAGE, err
    assert stand_ins["calls"] == ["resolve", "build", "functional", "functional"]
    assert err.count("rlgate: error:") == 1 and said in err and "Traceback" not in err
    assert "only the record failed" in err and str(tmp_path / "canary.json") in err
    assert "canary vllm==0.26.0: no regression" in out  # the table was printed
    doc = json.loads((tmp_path / "canary.json").read_text())
    assert doc["command"] == "canary" and doc["unchanged"] == 208
    assert "rlgate.canary." in (tmp_path / "canary.xml").read_text()
    from rlgate.history.store import open_store

    with open_store(tmp_path / "h.db") as store:
        assert store.nightly(nightly) == []  # nothing recorded
