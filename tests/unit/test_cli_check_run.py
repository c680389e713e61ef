"""``rlgate check-run``: exit codes, JSON and JUnit outputs, inputs never overwritten."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rlgate.cli.app import main
from rlgate.testing.corpus import EXPECTED_CATCHES, Fault

from .helpers.cli import one_error, run_cli
from .helpers.corpus_build import corpus
from .helpers.mlperf_runs import RECIPE, mlperf_path


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

    def test_an_early_stop_success_says_what_passed_in_table_json_and_junit(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """GBS 256 seed 1 reached its target accuracy at step 18 of 30 (a real MLPerf log).

        "PASS completion 18 >= 30" reads as a contradiction: every output says what passed,
        while value, op and threshold stay as recorded (the step reached, >= the max steps).
        """
        out, junit = tmp_path / "r.json", tmp_path / "r.xml"
        args = ["check-run", str(mlperf_path(256, 1)), "--recipe", str(RECIPE)]
        code = main([*args, "--tier", "convergence", "--json", str(out), "--junit", str(junit)])
        table = capsys.readouterr().out
        assert code == 0, table
        line = next(x for x in table.splitlines() if x.split()[1:2] == ["completion"])
        said = "target accuracy reached at step 18 (early stop, max 30)"
        assert line.split()[:3] == ["PASS", "completion", "18"] and said in line, line
        assert ">= 30" not in line and "early stop on success" in line, line
        check = next(c for c in json.loads(out.read_text())["checks"] if c["name"] == "completion")
        assert check["message"].startswith(said + ": MLPerf run_stop status=success")
        assert ">= target_accuracy 0.69" in check["message"]
        assert (check["value"], check["op"], check["threshold"]) == (18, ">=", 30)
        assert check["bound"] == "early stop on success" and check["unit"] == "step"
        case = next(c for c in ET.parse(junit).iter("testcase") if c.get("name") == "completion")
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        assert props["rlgate.message"] == check["message"]
        assert props["rlgate.bound"] == "early stop on success"
        assert (props["rlgate.value"], props["rlgate.threshold"]) == ("18", "30")

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


def recipe(tmp_path: Path, body: str, name: str = "r.yaml") -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


class TestNothingToJudge:
    @pytest.mark.parametrize(
        "body",
        [
            pytest.param("grpo: {max_num_steps: 3}\n", id="no_block"),
            pytest.param("grpo: {max_num_steps: 3}\nrlgate: {}\n", id="empty_block"),
            pytest.param("grpo: {max_num_steps: 3}\nrlgate:\n", id="null_block"),
            pytest.param("rlgate: {tiers: [functional]}\n", id="functional_only"),
            pytest.param("rlgate: {perf: {metrics: {}}}\n", id="perf_without_metrics"),
        ],
    )
    def test_a_recipe_without_gates_is_exit_two_never_zero_passed(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str
    ) -> None:
        metrics = tmp_path / "metrics.json"
        metrics.write_text('{"train/loss": {"1": 0.5}}')
        code, out, err = run_cli(
            ["check-run", str(metrics), "--recipe", str(recipe(tmp_path, body))], capsys
        )
        assert code == 2 and "declares no gates" in one_error(err)
        assert "0 passed" not in out

    def test_a_tier_listed_without_checks_is_exit_two(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        body = "grpo: {max_num_steps: 3}\nrlgate: {tiers: [convergence, perf], convergence: {}}\n"
        code, _, err = run_cli(
            ["check-run", str(mlperf_path(256, 1)), "--recipe", str(recipe(tmp_path, body))], capsys
        )
        assert code == 2 and "lists perf in rlgate.tiers but declares no perf checks" in one_error(
            err
        )

    def test_a_tier_the_recipe_has_no_checks_for_is_exit_two(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        body = "grpo: {max_num_steps: 3}\nrlgate: {convergence: {}}\n"
        args = ["check-run", str(mlperf_path(256, 1)), "--recipe", str(recipe(tmp_path, body))]
        code, _, err = run_cli([*args, "--tier", "perf"], capsys)
        assert code == 2 and "declares no perf checks" in one_error(err)

    def test_every_check_skipped_is_exit_two_naming_the_missing_inputs(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        code, out, err = run_cli(
            ["check-run", str(mlperf_path(256, 1)), "--recipe", str(RECIPE), "--tier", "perf"],
            capsys,
        )
        assert code == 2 and "nothing to evaluate" in one_error(err)
        assert "needs --baseline" in err and "0 passed" not in out


class TestBadNumbers:
    @pytest.mark.parametrize("value", ["0", "-3"])
    def test_non_positive_max_steps_is_refused(
        self, capsys: pytest.CaptureFixture[str], value: str
    ) -> None:
        with pytest.raises(SystemExit) as stop:
            main(
                [
                    "check-run",
                    str(mlperf_path(256, 1)),
                    "--recipe",
                    str(RECIPE),
                    "--max-steps",
                    value,
                ]
            )
        err = capsys.readouterr().err
        assert stop.value.code == 2 and f"--max-steps: must be >= 1, got {value}" in err

    def test_a_non_positive_recipe_target_is_refused(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        body = "grpo: {max_num_steps: 0}\nrlgate: {convergence: {}}\n"
        code, _, err = run_cli(
            ["check-run", str(mlperf_path(256, 1)), "--recipe", str(recipe(tmp_path, body))], capsys
        )
        assert code == 2 and "grpo.max_num_steps = 0 is not a positive step count" in one_error(err)


ESC_NAME = "r\x1b[2Kerased\x07.yaml"


class TestJunitIsAlwaysWellFormed:
    def test_control_characters_from_inputs_are_made_visible_in_valid_xml(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        from junitparser import JUnitXml

        tag = "train/\x1b[31mred\x00\x0c\ud800"
        metrics = tmp_path / "metrics.json"
        metrics.write_text(json.dumps({"train/loss": {"1": 0.5, "2": 0.4}, tag: {"1": 1.0}}))
        check = json.dumps(
            {
                "name": "bad\x1bname",
                # libyaml refuses a lone-surrogate escape in YAML (exit 2): the surrogate
                # reaches the JUnit through the metrics file's tag instead
                "metric": tag.replace("\ud800", "") + "x",
                "reducer": "max",
                "op": "<",
                "threshold": 1,
            }
        )
        body = f"grpo: {{max_num_steps: 2}}\nrlgate:\n  convergence:\n    checks: [{check}]\n"
        junit = tmp_path / "out.xml"
        code, out, _ = run_cli(
            [
                "check-run",
                str(metrics),
                "--recipe",
                str(recipe(tmp_path, body, ESC_NAME)),
                "--junit",
                str(junit),
            ],
            capsys,
        )
        assert code == 1 and "\x1b" not in out
        raw = junit.read_bytes().decode("utf-8")
        assert not any(c in raw for c in "\x1b\x00\x07\x0c\ud800")
        root = ET.fromstring(raw)  # a raw control character would make this raise
        cases = {c.get("name"): c for c in root.iter("testcase")}
        bad = cases["bad\\x1bname"]
        message = bad.find("error").get("message")
        assert "\\x1b[31mred\\x00\\x0cx" in message and "did you mean" in message
        assert "\\ud800" in message  # the metrics file's tag, suggested
        suite = next(iter(JUnitXml.fromfile(str(junit))))
        assert "\\x1b[2Kerased\\x07" in suite.name
        assert {c.name for c in suite} == {"data_integrity", "completion", "bad\\x1bname"}


class TestHostileInputs:
    """Every check-run input, broken on purpose: exit 2 with one message, never 1 or 70."""

    @pytest.mark.parametrize(
        ("make", "match"),
        [
            pytest.param(
                lambda d: d.joinpath("run.bin").write_bytes(bytes(range(256)) * 8),
                "cannot tell what",
                id="binary",
            ),
            pytest.param(
                lambda d: d.joinpath("run.log").write_bytes(b""), "cannot tell what", id="empty"
            ),
            pytest.param(
                lambda d: d.joinpath("m.json").write_text("[1, 2]"), "expected an object", id="list"
            ),
            pytest.param(
                lambda d: d.joinpath("m.json").write_text('{"train/loss": {"1": "x"}}'),
                "is not a number",
                id="non_numeric",
            ),
            pytest.param(
                lambda d: d.joinpath("m.json").write_text('{"a": ' * 20_000 + "1" + "}" * 20_000),
                "nested too deeply",
                id="deep",
            ),
            pytest.param(
                lambda d: d.joinpath("m.json").write_bytes(b'{"train/loss": {"1": 0.5}}\xff'),
                "not UTF-8",
                id="not_utf8",
            ),
            pytest.param(
                lambda d: d.joinpath("m.json").write_text('{"train/loss": {"1e3": 0.5}}'),
                "step key '1e3'",
                id="step_key",
            ),
            pytest.param(
                lambda d: (d / "run").mkdir() or (d / "run" / "loop").symlink_to(".."),
                "symlink loop",
                id="symlink_loop",
            ),
            pytest.param(
                lambda d: (d / "run").mkdir(), "no TensorBoard event files", id="empty_dir"
            ),
            pytest.param(
                lambda d: d.joinpath("events.out.tfevents.1.h").write_bytes(b"\x00" * 40),
                "corrupt record header",
                id="bad_events",
            ),
            pytest.param(
                lambda d: d.joinpath("x.out").write_text(
                    ':::MLLOG {"key": "tracked_stats", "value": {"reward": 1}, '
                    '"metadata": {"step": NaN}}\n'
                ),
                "metadata.step nan",
                id="mlperf_nan_step",
            ),
        ],
    )
    def test_a_broken_run_input_is_exit_two_with_one_message(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], make, match: str
    ) -> None:
        inputs = tmp_path / "in"
        inputs.mkdir()
        make(inputs)
        run = next(inputs.iterdir())
        code, _, err = run_cli(["check-run", str(run), "--recipe", str(RECIPE)], capsys)
        assert code == 2 and match in one_error(err)

    def test_non_finite_metric_values_fail_the_gate_naming_the_step(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        metrics = tmp_path / "m.json"
        metrics.write_text('{"train/loss": {"1": 0.5, "2": NaN, "3": Infinity}}')
        agentic = "{finite: [train/loss], total_tokens_within_limit: false}"
        body = f"grpo: {{max_num_steps: 3}}\nrlgate: {{convergence: {{agentic: {agentic}}}}}\n"
        code, out, _ = run_cli(
            ["check-run", str(metrics), "--recipe", str(recipe(tmp_path, body))], capsys
        )
        assert code == 1 and "FAIL  finite:train/loss" in out and "nan at step 2" in out

    @pytest.mark.parametrize("flag", ["--json", "--junit"])
    def test_an_output_that_is_a_directory_is_refused_before_any_work(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str
    ) -> None:
        code, out, err = run_cli(
            ["check-run", str(mlperf_path(256, 1)), "--recipe", str(RECIPE), flag, str(tmp_path)],
            capsys,
        )
        assert code == 2 and f"{flag} {tmp_path} is a directory" in one_error(err) and out == ""

    def test_a_torn_rollout_line_is_a_warning_in_the_result(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        c = corpus()
        rollouts = tmp_path / "r.jsonl"
        text = c.rollouts["healthy"].read_text()
        rollouts.write_text(text + text.splitlines()[0][:80])
        out_json = tmp_path / "o.json"
        code, out, _ = run_cli(
            ["check-run", str(c.runs[Fault.HEALTHY]), "--recipe", str(c.recipe), "--rollouts",
             str(rollouts), "--tier", "convergence", "--json", str(out_json)],
            capsys,
        )  # fmt: skip
        assert code == 0 and "warning: " in out and "r.jsonl:33: truncated last line" in out
        assert any(
            "r.jsonl:33: truncated last line" in w
            for w in json.loads(out_json.read_text())["warnings"]
        )

    def test_rollouts_with_invalid_utf8_are_exit_two_naming_the_line(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        c = corpus()
        rollouts = tmp_path / "r.jsonl"
        lines = c.rollouts["healthy"].read_bytes().splitlines(keepends=True)
        lines[4] = lines[4][:20] + b"\xc3\x28" + lines[4][20:]
        rollouts.write_bytes(b"".join(lines))
        code, _, err = run_cli(
            [
                "check-run",
                str(c.runs[Fault.HEALTHY]),
                "--recipe",
                str(c.recipe),
                "--rollouts",
                str(rollouts),
            ],
            capsys,
        )
        assert code == 2 and "r.jsonl:5: not UTF-8 text" in one_error(err)
