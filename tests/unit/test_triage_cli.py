"""``rlgate triage``: the table, JSON and JUnit outputs, the exit codes, and bad input.

The history is a real database (an SQLite file; PostgreSQL for the main case) holding
nightlies of real Results (the corpus runs gated by the real checks); the candidates are
what ``rlgate check-run`` and the SWE gate write.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rlgate.cli.app import main
from rlgate.core.errors import ExitCode
from rlgate.core.junit import read_junit
from rlgate.core.results import Result
from rlgate.report.inputs import load_junit
from rlgate.testing.corpus import Fault

from .helpers.corpus_build import corpus
from .helpers.history_inputs import BACKENDS, database
from .helpers.triage_inputs import commit, gate_results, nightly, recipe_name, record, swe_criteria

STEP = "perf:timing/train/total_step_time"


def nights(results_of, n: int = 6, **kw):
    """Main nightlies of the corpus recipe on its shape (2n8g), as `check-run --db` records."""
    kw.setdefault("hardware", "2n8g")
    return [nightly(k, results_of(k), recipe=recipe_name(), **kw) for k in range(1, n + 1)]


@pytest.fixture(scope="module")
def candidates(tmp_path_factory) -> dict[str, Path]:
    """check-run JUnit/JSON of the slow and healthy corpus runs, and SWE JSONs."""
    out = tmp_path_factory.mktemp("candidates")
    c = corpus()
    files = {}
    for name, fault in (("slow", Fault.STEP_TIME_UP), ("healthy", Fault.HEALTHY)):
        args = ["check-run", str(c.runs[fault]), "--recipe", str(c.recipe)]
        args += ["--baseline", str(c.baseline), "--rollouts", str(c.rollouts["healthy"])]
        args += ["--junit", str(out / f"{name}.xml"), "--json", str(out / f"{name}.json")]
        main(args)
        files[f"{name}_junit"], files[f"{name}_json"] = out / f"{name}.xml", out / f"{name}.json"
    return files


def swe_json(path: Path, infra: bool) -> Path:
    """What `rlgate swe compare --json` writes for a generated comparison."""
    from rlgate.core.io import write_json_atomic
    from rlgate.demo.build import BUNDLED_INSTANCES
    from rlgate.demo.history import demo_swe_comparison
    from rlgate.swe.records import load_universe
    from rlgate.swe.report import comparison_to_dict

    universe = load_universe(BUNDLED_INSTANCES)
    comparison = demo_swe_comparison(path.parent / "swe", universe, 1, 0, infra)
    return write_json_atomic(path, comparison_to_dict(comparison))


class TestLabels:
    @pytest.mark.parametrize("backend", BACKENDS)
    def test_a_regression_exits_1_with_its_table_json_and_junit(
        self, backend, tmp_path, candidates, capsys
    ) -> None:
        db = database(backend, tmp_path)
        record(db, nights(lambda k: gate_results(Fault.HEALTHY)))
        out_json, out_junit = tmp_path / "triage.json", tmp_path / "triage.xml"
        code = main(
            ["triage", "--candidate", str(candidates["slow_junit"]), "--db", db, "--last", "5",
             "--json", str(out_json), "--junit", str(out_junit)]
        )  # fmt: skip
        out = capsys.readouterr().out
        assert code == ExitCode.FAIL
        assert "2 failing gate check(s) of the candidate against 5 main nightlies" in out
        assert "check  " in out and "main last 5" in out
        row = next(line for line in out.splitlines() if STEP in line)
        assert "FAIL 1.2" in row and "..... 5/5 pass" in row and "regression" in row
        doc = json.loads(out_json.read_text())
        assert doc["exit_code"] == 1 and doc["nightlies"] == 5
        assert {lb["check"]: lb["label"] for lb in doc["labels"]} == {
            STEP: "regression",
            "perf:performance/tokens_per_sec_per_gpu": "regression",
        }
        step = next(lb for lb in doc["labels"] if lb["check"] == STEP)
        assert step["last_passing"] == "n06" and step["first_failing"] == "candidate"
        (suite,) = read_junit(out_junit)
        by_name = {c.name: c for c in suite.cases}
        assert by_name[STEP].prop("rlgate.triage.label") == "regression"
        assert json.loads(by_name[STEP].prop("rlgate.triage.nightlies"))[-1]["nightly"] == "n06"
        assert by_name["completion"].prop("rlgate.triage.label") is None  # passed: no label
        assert by_name[STEP].result.outcome.value == "fail"

    def test_only_pre_existing_failures_exit_0(self, tmp_path, candidates, capsys) -> None:
        db = str(tmp_path / "h.db")
        record(db, nights(lambda k: gate_results(Fault.STEP_TIME_UP)))
        code = main(["triage", "--candidate", str(candidates["slow_json"]), "--db", db])
        out = capsys.readouterr().out
        assert code == ExitCode.OK and out.count("pre-existing") == 2

    def test_flaky_failures_exit_3(self, tmp_path, candidates, capsys) -> None:
        db = str(tmp_path / "h.db")
        flip = lambda k: gate_results(Fault.HEALTHY if k % 2 else Fault.STEP_TIME_UP)  # noqa: E731
        record(db, nights(flip))
        code = main(["triage", "--candidate", str(candidates["slow_junit"]), "--db", db])
        assert code == ExitCode.INFRA and capsys.readouterr().out.count(" flaky ") == 2

    def test_infra_errors_exit_3(self, tmp_path, capsys) -> None:
        db = str(tmp_path / "h.db")
        record(db, [nightly(k, swe_criteria(False), recipe="r") for k in range(1, 4)])
        candidate = swe_json(tmp_path / "swe.json", infra=True)
        code = main(["triage", "--candidate", str(candidate), "--db", db])
        out = capsys.readouterr().out
        assert code == ExitCode.INFRA and out.count(" infra ") == 2
        assert "swe_infra_errors" in out

    def test_no_main_history_is_unknown_and_exits_1(self, tmp_path, candidates, capsys) -> None:
        db = str(tmp_path / "h.db")
        record(db, nights(lambda k: gate_results(Fault.HEALTHY), branch="feature"))
        code = main(["triage", "--candidate", str(candidates["slow_junit"]), "--db", db])
        out = capsys.readouterr().out
        assert code == ExitCode.FAIL and out.count("  unknown  ") == 2
        assert "the history holds no 'main' nightly" in out
        again = ["triage", "--candidate", str(candidates["slow_junit"]), "--db", db]
        assert main([*again, "--main-branch", "feature"]) == ExitCode.FAIL
        assert "regression" in capsys.readouterr().out

    def test_a_baseline_commit_replaces_the_main_window(self, tmp_path, candidates, capsys) -> None:
        """Main fails too (pre-existing, exit 0); the PR's merge base passed it: regression."""
        db = str(tmp_path / "h.db")
        record(db, nights(lambda k: gate_results(Fault.STEP_TIME_UP), code="B"))
        healthy = lambda k: gate_results(Fault.HEALTHY)  # noqa: E731
        record(db, nights(healthy, n=3, code="A", branch="release"))
        args = ["triage", "--candidate", str(candidates["slow_junit"]), "--db", db]
        assert main(args) == ExitCode.OK
        assert capsys.readouterr().out.count("pre-existing") == 2
        sha = commit("A")["nemo_rl"][:10]
        out_json = tmp_path / "t.json"
        code = main([*args, "--baseline-commit", f"nemo_rl={sha}", "--json", str(out_json)])
        out = capsys.readouterr().out
        assert code == ExitCode.FAIL and out.count("regression") == 2
        assert f"against 3 baseline nemo_rl@{sha} nightlies (last 30)" in out
        assert f"baseline nemo_rl@{sha} last 30" in out
        doc = json.loads(out_json.read_text())
        assert doc["baseline_commit"] == {"sha": sha, "checkout": "nemo_rl"}
        assert doc["nightlies"] == 3 and doc["exit_code"] == 1
        assert main([*args, "--baseline-commit", "abcdef0123"]) == ExitCode.FAIL
        out = capsys.readouterr().out
        assert "holds no run of commit abcdef0123" in out and out.count("unknown") >= 2

    def test_a_passing_candidate_exits_0(self, tmp_path, candidates, capsys) -> None:
        db = str(tmp_path / "h.db")
        record(db, [])  # a history database with no runs (triage creates none)
        code = main(["triage", "--candidate", str(candidates["healthy_junit"]), "--db", db])
        assert code == ExitCode.OK and "nothing to triage" in capsys.readouterr().out


class TestBadInput:
    def run(self, capsys, *args: str) -> tuple[int, str]:
        code = main(["triage", *args])
        return code, capsys.readouterr().err

    def test_missing_garbage_and_foreign_candidates_exit_2_with_one_message(
        self, tmp_path, capsys
    ) -> None:
        db = str(tmp_path / "h.db")
        garbage = tmp_path / "notes.txt"
        garbage.write_text("hello")
        foreign = tmp_path / "other.json"
        foreign.write_text('{"schema_version": 1, "rows": []}')
        broken = tmp_path / "broken.xml"
        broken.write_text("<testsuite><testcase name='x'>")
        cases = {
            str(tmp_path / "absent.xml"): "candidate not found",
            str(garbage): "neither JUnit XML nor JSON",
            str(foreign): "neither 'checks' nor 'criteria'",
            str(broken): "not valid XML",
            str(tmp_path): "candidate is a directory",
        }
        for path, message in cases.items():
            code, err = self.run(capsys, "--candidate", path, "--db", db)
            assert code == ExitCode.USAGE and message in err, (path, err)
            assert err.count("rlgate: error:") == 1 and "Traceback" not in err

    def test_bad_options_exit_2(self, tmp_path, candidates, capsys) -> None:
        cases = {
            ("--last", "0"): "argument --last: 0 is outside 1..10,000",
            ("--flaky-rate", "0"): "argument --flaky-rate:",
            ("--flaky-rate", "1.5"): "argument --flaky-rate:",
            ("--baseline-commit", "HEAD~1"): "argument --baseline-commit: 'HEAD~1': a commit is",
            ("--baseline-commit", "=abcdef0"): "name the checkout",
        }
        for opt, message in cases.items():
            with pytest.raises(SystemExit) as exc:
                main(["triage", "--candidate", str(candidates["slow_junit"]), *opt])
            assert exc.value.code == ExitCode.USAGE
            assert message in capsys.readouterr().err

    def test_outputs_never_overwrite_an_input_or_the_database(
        self, tmp_path, candidates, capsys
    ) -> None:
        db = tmp_path / "h.db"
        record(str(db), nights(lambda k: gate_results(Fault.HEALTHY)))
        kept = candidates["slow_json"].read_bytes(), db.read_bytes()
        for target in (candidates["slow_json"], db):
            code, err = self.run(
                capsys, "--candidate", str(candidates["slow_json"]), "--db", str(db),
                "--json", str(target),
            )  # fmt: skip
            assert code == ExitCode.USAGE and "it is one of the inputs" in err
        assert (candidates["slow_json"].read_bytes(), db.read_bytes()) == kept

    def test_an_output_that_is_a_directory_is_refused_before_work(self, tmp_path, capsys) -> None:
        code, err = self.run(
            capsys, "--candidate", str(tmp_path / "absent.xml"), "--junit", str(tmp_path)
        )
        assert code == ExitCode.USAGE and f"--junit {tmp_path} is a directory" in err


def test_the_cli_defaults_are_the_librarys() -> None:
    from rlgate.cli import triage as cli
    from rlgate.history import triage as lib

    assert (cli.DEFAULT_LAST, cli.FLAKY_RATE) == (lib.DEFAULT_LAST, lib.FLAKY_RATE)


def test_results_are_read_back_as_written(candidates) -> None:
    """The candidate's Results reach triage as check-run wrote them (JUnit and JSON agree)."""
    from rlgate.cli.triage import load_candidate

    junit = load_candidate([candidates["slow_junit"]])
    doc = load_candidate([candidates["slow_json"]])
    assert [(r, x.name) for r, x in junit] == [(r, x.name) for r, x in doc]
    assert all(isinstance(x, Result) for _, x in junit) and junit[0][0] == recipe_name()


def test_nightly_id_leaves_the_candidates_own_nightly_out(tmp_path, candidates, capsys) -> None:
    """A nightly that recorded itself first is not compared with itself."""
    db = str(tmp_path / "h.db")
    slow_from_6 = lambda k: gate_results(Fault.STEP_TIME_UP if k == 6 else Fault.HEALTHY)  # noqa: E731
    record(db, nights(slow_from_6))
    args = ["triage", "--candidate", str(candidates["slow_junit"]), "--db", db, "--json"]
    assert main([*args, str(tmp_path / "a.json")]) == ExitCode.FAIL
    assert main([*args, str(tmp_path / "b.json"), "--nightly-id", "n06"]) == ExitCode.FAIL
    capsys.readouterr()
    with_self = json.loads((tmp_path / "a.json").read_text())["labels"][0]
    without = json.loads((tmp_path / "b.json").read_text())["labels"][0]
    assert with_self["first_failing"] == "n06" and len(with_self["nightlies"]) == 6
    assert without["first_failing"] == "candidate" and len(without["nightlies"]) == 5


def test_without_the_history_extra_triage_exits_3_naming_it(tmp_path, candidates) -> None:
    import os
    import subprocess
    import sys

    from .helpers import REPO_ROOT

    code = (
        "import sys; sys.modules['sqlalchemy'] = None; from rlgate.cli.app import main; "
        "sys.exit(main(sys.argv[1:]))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
    args = ["triage", "--candidate", str(candidates["slow_junit"]), "--db", str(tmp_path / "h")]
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == ExitCode.INFRA, proc.stderr
    assert "'sqlalchemy', which is not installed" in proc.stderr
    assert "pip install 'rlgate[history]'" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "h").exists()


def test_without_the_history_extra_the_demo_history_is_used_unrecorded(
    tmp_path, monkeypatch
) -> None:
    import sys

    from rlgate.demo.history import record_demo_history

    runs = [nightly(k, gate_results(Fault.HEALTHY)) for k in range(1, 3)]
    monkeypatch.delitem(sys.modules, "rlgate.history.store", raising=False)
    monkeypatch.setitem(sys.modules, "sqlalchemy", None)
    got, note = record_demo_history(tmp_path / "h.db", runs)
    assert got == runs and not (tmp_path / "h.db").exists()
    assert "not written to a database (sqlalchemy is not installed" in note


class TestOwnRecording:
    """`check-run --db --branch main` recorded the candidate: triage never reads it as main's."""

    def check_run(self, tmp_path, fault, db: str, name: str, *extra: str) -> tuple[Path, Path]:
        c = corpus()
        out_json, out_junit = tmp_path / f"{name}.json", tmp_path / f"{name}.xml"
        args = ["check-run", str(c.runs[fault]), "--recipe", str(c.recipe), "--baseline",
                str(c.baseline), "--db", db, "--branch", "main", "--run-id", name,
                "--json", str(out_json), "--junit", str(out_junit), *extra]  # fmt: skip
        main(args)
        return out_json, out_junit

    def test_check_run_states_the_hardware_it_records(self, tmp_path) -> None:
        out_json, out_junit = self.check_run(tmp_path, Fault.HEALTHY, str(tmp_path / "h.db"), "a")
        assert json.loads(out_json.read_text())["hardware"] == "2n8g"
        cases = load_junit([out_junit]).cases
        assert cases and {c.fact("rlgate.hardware") for c in cases} == {"2n8g"}
        # --hardware wins over the recipe's (and the manifest's) shape, in both outputs
        out_json, out_junit = self.check_run(
            tmp_path, Fault.HEALTHY, str(tmp_path / "h2.db"), "b", "--hardware", "h100-2x8"
        )
        assert json.loads(out_json.read_text())["hardware"] == "h100-2x8"
        assert {c.fact("rlgate.hardware") for c in load_junit([out_junit]).cases} == {"h100-2x8"}

    def test_a_recorded_failure_is_not_pre_existing_against_itself(self, tmp_path, capsys) -> None:
        db = str(tmp_path / "h.db")
        out_json, out_junit = self.check_run(tmp_path, Fault.STEP_TIME_UP, db, "slow")
        capsys.readouterr()
        for candidate in (out_json, out_junit):
            args = ["triage", "--candidate", str(candidate), "--db", db, "--hardware", "2n8g"]
            code = main([*args, "--json", str(tmp_path / "t.json")])
            out = capsys.readouterr().out
            assert code == ExitCode.FAIL, out
            labels = json.loads((tmp_path / "t.json").read_text())["labels"]
            assert {lb["check"]: lb["label"] for lb in labels} == {
                STEP: "unknown",
                "perf:performance/tokens_per_sec_per_gpu": "unknown",
            }
            assert "pre-existing" not in out and "against 0 main nightlies" in out

    def test_the_recorded_nightlies_before_it_are_its_history(self, tmp_path, capsys) -> None:
        db = str(tmp_path / "h.db")
        for k in range(1, 4):
            self.check_run(tmp_path, Fault.HEALTHY, db, f"n{k}", "--nightly-id", f"n{k}")
        out_json, _ = self.check_run(tmp_path, Fault.STEP_TIME_UP, db, "slow")
        capsys.readouterr()
        args = [
            "triage",
            "--candidate",
            str(out_json),
            "--db",
            db,
            "--json",
            str(tmp_path / "t.json"),
        ]
        assert main([*args, "--hardware", "2n8g"]) == ExitCode.FAIL
        step = next(
            lb
            for lb in json.loads((tmp_path / "t.json").read_text())["labels"]
            if lb["check"] == STEP
        )
        assert step["label"] == "regression" and step["first_failing"] == "candidate"
        assert [n["nightly"] for n in step["nightlies"]] == ["n1", "n2", "n3"]
        assert step["hardware"] == "2n8g"
        # without --hardware: check-run's JSON states the hardware it recorded (2n8g)
        capsys.readouterr()
        assert main(args) == ExitCode.FAIL
        assert "note: the candidate states no hardware" not in capsys.readouterr().out
        labels = json.loads((tmp_path / "t.json").read_text())
        assert labels["hardware"] == ["2n8g"]
        step = next(lb for lb in labels["labels"] if lb["check"] == STEP)
        assert step["label"] == "regression" and step["hardware"] == "2n8g"
        assert [n["nightly"] for n in step["nightlies"]] == ["n1", "n2", "n3"]
        # a JSON that states none (written before rlgate stated it): nothing is comparable
        doc = json.loads(out_json.read_text())
        del doc["hardware"]
        bare = tmp_path / "bare.json"
        bare.write_text(json.dumps(doc))
        assert main([*args[:2], str(bare), *args[3:]]) == ExitCode.FAIL
        out = capsys.readouterr().out
        assert "no main nightly ran it on unrecorded hardware (only on 2n8g)" in out
        assert "note: the candidate states no hardware (--hardware)" in out
        # --run-id names a recording that holds more than the candidate (here: another run)
        assert main([*args, "--hardware", "2n8g", "--run-id", "n3", "--run-id", "n2"]) == 1
        step = next(
            lb
            for lb in json.loads((tmp_path / "t.json").read_text())["labels"]
            if lb["check"] == STEP
        )
        assert [n["nightly"] for n in step["nightlies"]] == ["n1"]


class TestSweSeries:
    """Two models' comparisons in every nightly: each pair of models is a series of its own."""

    def maps(self, root: Path, name: str, rate: float, seed: int) -> Path:
        from .helpers import swe_inputs as si

        ids = [r["instance_id"] for r in si.verified_rows()]
        rng = np.random.default_rng(seed)
        path = root / f"{name}.json"
        path.write_text(json.dumps({i: {"resolved": bool(rng.random() < rate)} for i in ids}))
        return path

    def compare(self, root: Path, k: int, after_model: str, rate: float, *extra: str) -> int:
        from .helpers import swe_inputs as si

        before = self.maps(root, f"base-{k}-{after_model}", 0.45, 100 * k)
        after = self.maps(root, f"{after_model}-{k}", rate, 100 * k + 1)
        args = ["swe", "compare", "--before", str(before), "--after", str(after), "--dataset",
                str(si.DATASET), "--resamples", "1000", "--before-model", "base",
                "--after-model", after_model, *extra]  # fmt: skip
        return main(args)

    def test_another_models_passing_comparison_never_makes_a_regression_flaky(
        self, tmp_path, capsys
    ) -> None:
        db = str(tmp_path / "h.db")
        for k in range(1, 4):
            night = ["--db", db, "--branch", "main", "--nightly-id", f"n{k}"]
            assert self.compare(tmp_path, k, "ckpt-a", 0.30, *night, "--run-id", f"a{k}") == 1
            assert self.compare(tmp_path, k, "ckpt-b", 0.60, *night, "--run-id", f"b{k}") == 0
        out_json = tmp_path / "candidate.json"
        assert self.compare(tmp_path, 4, "ckpt-a", 0.30, "--json", str(out_json)) == 1
        criteria = json.loads(out_json.read_text())["criteria"]
        assert {c["evidence"]["models"]["after"] for c in criteria} == {"ckpt-a"}
        capsys.readouterr()
        code = main(["triage", "--candidate", str(out_json), "--db", db, "--json",
                     str(tmp_path / "t.json")])  # fmt: skip
        labels = json.loads((tmp_path / "t.json").read_text())["labels"]
        assert code == ExitCode.OK, capsys.readouterr().out
        assert labels and {lb["label"] for lb in labels} == {"pre-existing"}
        assert all(lb["models"] == ["base", "ckpt-a"] for lb in labels)
        assert all("M" not in lb["main"] and len(lb["nightlies"]) == 3 for lb in labels)


def test_a_contradictory_testcase_is_triaged_as_the_failure_it_shows(tmp_path, capsys) -> None:
    """A ``<failure>`` recording ``rlgate.verdict = pass`` is a failing check, never waved
    through as passing (report.inputs.Case.judged), and its message names the contradiction."""
    import dataclasses

    from rlgate.core.junit import JunitCase, JunitSuite, write_junit
    from rlgate.core.results import Outcome

    db = str(tmp_path / "h.db")
    record(db, nights(lambda k: gate_results(Fault.HEALTHY)))
    facts = {"recipe": recipe_name(), "hardware": "2n8g"}
    cases = []
    for result in gate_results(Fault.HEALTHY):  # every check passed and records pass
        case = JunitCase.of(result, classname=f"rlgate.perf.{recipe_name()}", facts=facts)
        if result.name == STEP:  # ... but this one's element shows a failure
            case = dataclasses.replace(case, shown=Outcome.FAIL, message="edited")
        cases.append(case)
    junit = tmp_path / "edited.xml"
    junit.write_text(write_junit([JunitSuite.of("edited", cases)]), encoding="utf-8")
    out_json = tmp_path / "t.json"
    code = main(["triage", "--candidate", str(junit), "--db", db, "--json", str(out_json)])
    capsys.readouterr()
    labels = json.loads(out_json.read_text())["labels"]
    assert [lb["check"] for lb in labels] == [STEP]
    assert labels[0]["label"] == "regression" and code == ExitCode.FAIL
    assert labels[0]["candidate"]["outcome"] == "fail"
    assert "shows FAIL but records rlgate.verdict = pass" in labels[0]["candidate"]["message"]
