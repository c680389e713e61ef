"""``rlgate check-run``: exit codes, JSON and JUnit outputs, inputs never overwritten."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from corpus_build import corpus
from mlperf_runs import RECIPE, mlperf_path

from rlgate.cli import main
from rlgate.testing.corpus import EXPECTED_CATCHES, Fault


class TestCheckRunCommand:
    def test_check_run_exits_zero_on_a_good_mlperf_run(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        out = tmp_path / "result.json"
        code = main(
            [
                "check-run",
                str(mlperf_path(512, 3)),
                "--recipe",
                str(RECIPE),
                "--override",
                "grpo.max_num_steps=20",
                "--baseline",
                str(mlperf_path(512, 4)),
                *[a for s in (1, 2, 4, 5, 6) for a in ("--band-run", str(mlperf_path(512, s)))],
                "--json",
                str(out),
            ]
        )
        assert code == 0, capsys.readouterr().out
        doc = json.loads(out.read_text())
        assert doc["schema_version"] == 1 and doc["passed"] and doc["skipped"] == []
        assert {c["status"] for c in doc["checks"]} == {"pass"} and doc["target_step"] == 20
        assert {"name", "tier", "status", "value", "bound", "message"} <= set(doc["checks"][0])

    def test_check_run_exits_one_and_writes_junit_on_a_fault(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        c = corpus()
        junit = tmp_path / "out.xml"
        code = main(
            [
                "check-run",
                str(c.runs[Fault.STEP_TIME_UP]),
                "--recipe",
                str(c.recipe),
                "--baseline",
                str(c.baseline),
                "--tier",
                "perf",
                "--junit",
                str(junit),
            ]
        )
        assert code == 1
        failed = {
            case.get("name")
            for case in ET.parse(junit).getroot().iter("testcase")
            if case.find("failure") is not None
        }
        assert failed == EXPECTED_CATCHES[Fault.STEP_TIME_UP]
        assert "FAIL  perf:timing/train/total_step_time" in capsys.readouterr().out

    def test_check_run_exits_two_on_unreadable_input(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        bad = tmp_path / "metrics.json"
        bad.write_text('{"train/loss": {"1": 0.5')
        assert main(["check-run", str(bad), "--recipe", str(RECIPE)]) == 2
        assert "not valid JSON" in capsys.readouterr().err

    def test_check_run_exits_two_on_a_bad_gate_block(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        recipe = tmp_path / "r.yaml"
        recipe.write_text("grpo: {max_num_steps: 3}\nrlgate:\n  convergence:\n    chekcs: []\n")
        assert main(["check-run", str(mlperf_path(256, 1)), "--recipe", str(recipe)]) == 2
        assert "did you mean 'checks'" in capsys.readouterr().err

    def test_check_run_refuses_to_overwrite_an_input(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        run = mlperf_path(256, 1)
        before = run.read_bytes()
        assert main(["check-run", str(run), "--recipe", str(RECIPE), "--json", str(run)]) == 2
        assert run.read_bytes() == before and "one of the inputs" in capsys.readouterr().err
