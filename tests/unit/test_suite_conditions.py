"""NeMo RL's own conditions as gates: arithmetic, ``check-run --condition``, ``import-suite``.

The conditions and script lines here are copied from NeMo RL 7ea279a's
``tests/test_suites/llm/*.sh`` (as data); the expected verdicts are ``tests/check_metrics.py``'s
semantics, worked out by hand in the comments. The differential test against
check_metrics.py itself, over every suite condition, is test_nemo_rl_conditions.py
(``NEMO_RL_DIR``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlgate.checks.conditions import evaluate_condition
from rlgate.core.results import Op, Outcome
from rlgate.recipe.conditions import Comparison, Condition, parse_condition
from rlgate.recipe.suite import read_suite
from rlgate.runs.metrics import load_metrics_json
from rlgate.testing.corpus import Fault, write_run

from .helpers.cli import one_error, run_cli

# train/loss falls linearly from 1.0 at step 1 to 0.5 at step 10: loss(s) = 1 - (s - 1) / 18
LOSS = {str(s): 1.0 - (s - 1) / 18 for s in range(1, 11)}
KL = {"0": 1.0, "50": 0.8, "100": 0.7}
ARITHMETIC = [
    # steps -6..-1 of 10 are 5..9: mean 0.6667; (1 - 0.6667) / 1 = 0.333 > 0.20
    (
        '(data["train/loss"]["1"] - mean(data["train/loss"], -6, -1)) / data["train/loss"]["1"]'
        " > 0.20",
        True,
    ),
    # steps -5..-1 are 6..9: mean 0.6389, not < 0.6 * 1.0
    ('mean(data["train/loss"], -5, -1) < 0.6 * data["train/loss"]["1"]', False),
    ('mean(data["train/loss"], -5, -1) < 0.7 * data["train/loss"]["1"]', True),
    ('data["validation/kl_loss"]["100"] < 0.72 * data["validation/kl_loss"]["0"]', True),
    ('data["validation/kl_loss"]["100"] < 0.65 * data["validation/kl_loss"]["0"]', False),
    # the median of the 10 losses is 0.75
    ('abs(median(data["train/loss"])) < 0.05', False),
]


def _metrics(tmp_path: Path, doc: dict[str, dict[str, float]]) -> Path:
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(doc))
    return path


class TestArithmetic:
    @pytest.mark.parametrize(("text", "holds"), ARITHMETIC, ids=[f"suite_{i}" for i in range(6)])
    def test_nemo_rls_arithmetic_conditions_parse_and_evaluate_as_check_metrics_does(
        self, tmp_path: Path, text: str, holds: bool
    ) -> None:
        cond = parse_condition(text)
        assert isinstance(cond, Comparison)
        run = load_metrics_json(_metrics(tmp_path, {"train/loss": LOSS, "validation/kl_loss": KL}))
        result = evaluate_condition(cond, run, name="c", target_step=10)
        assert result.outcome is (Outcome.PASS if holds else Outcome.FAIL), result.message
        assert result.op is cond.op and result.metric == cond.tags[0]

    def test_the_result_carries_both_sides(self, tmp_path: Path) -> None:
        run = load_metrics_json(_metrics(tmp_path, {"train/loss": LOSS}))
        cond = parse_condition(ARITHMETIC[2][0])
        result = evaluate_condition(cond, run, name="c")
        assert result.value == pytest.approx(0.638889, abs=1e-6)
        assert result.threshold == pytest.approx(0.7)
        assert result.bound == '< 0.7 * data["train/loss"]["1"]'

    @pytest.mark.parametrize(("steps", "op"), [(10, "<"), (20, ">")])
    def test_a_mean_equal_to_its_bound_is_not_past_it(
        self, tmp_path: Path, steps: int, op: str
    ) -> None:
        # check_metrics' statistics.mean of ten (twenty) 0.02s is 0.02 exactly; NumPy's
        # pairwise mean is 0.019999999999999997 (0.020000000000000004), which passed
        doc = {"train/gen_kl_error": {str(s): 0.02 for s in range(1, steps + 1)}}
        run = load_metrics_json(_metrics(tmp_path, doc))
        cond = parse_condition(f'mean(data["train/gen_kl_error"]) {op} 0.02')
        assert evaluate_condition(cond, run, name="c").outcome is Outcome.FAIL

    def test_a_plain_condition_stays_a_typed_bound(self) -> None:
        cond = parse_condition('mean(data["train/reward"]) > -0.5')
        assert isinstance(cond, Condition) and cond.threshold == -0.5 and cond.op is Op.GT
        assert isinstance(parse_condition('0.5 < median(data["t"])'), Comparison)

    @pytest.mark.parametrize(
        ("text", "doc", "outcome", "words"),
        [
            (
                'data["t"]["1"] / data["t"]["2"] > 0',
                {"t": {"1": 1.0, "2": 0.0}},
                Outcome.ERROR,
                "division by zero",
            ),
            (
                '2 * mean(data["t"]) < 1',
                {"t": {"1": 0.1, "2": float("nan")}},
                Outcome.FAIL,
                "non-finite value nan at step 2",
            ),
            (
                'abs(data["missing"]["1"]) < 1',
                {"t": {"1": 0.1}},
                Outcome.ERROR,
                "'missing' not found",
            ),
            (
                '-data["t"]["1"] + 3 * (1 - data["t"]["2"]) >= 1.5',
                {"t": {"1": 0.5, "2": 0.0}},
                Outcome.PASS,
                "= 2.5",
            ),
        ],
        ids=["zero_division", "nan", "missing", "precedence"],
    )
    def test_terms_and_operations_never_pass_silently(
        self, tmp_path: Path, text: str, doc: dict, outcome: Outcome, words: str
    ) -> None:
        run = load_metrics_json(_metrics(tmp_path, doc))
        result = evaluate_condition(parse_condition(text), run, name="c")
        assert result.outcome is outcome and words in result.message, result.message


SCRIPT = """#!/bin/bash
SCRIPT_DIR=$( cd -- "$( dirname -- "${BASH_SOURCE[0]}" )" &> /dev/null && pwd)
source $SCRIPT_DIR/common.env

# ===== BEGIN CONFIG =====
NUM_NODES=1
STEPS_PER_RUN=50
MAX_STEPS=50
NUM_RUNS=$(( (MAX_STEPS + STEPS_PER_RUN - 1) / STEPS_PER_RUN ))
NUM_MINUTES=60
# ===== END CONFIG =====

uv run tests/json_dump_tb_logs.py $LOG_DIR --output_path $JSON_METRICS

# Only run metrics if the target step is reached
if [[ $(jq 'to_entries | .[] | select(.key == "train/loss") | .value | keys | max' \\
        $JSON_METRICS) -ge $MAX_STEPS ]]; then
    uv run tests/check_metrics.py $JSON_METRICS \\
        'median(data["train/token_mult_prob_error"]) < 1.1' \\
        "data[\\"train/token_mult_prob_error\\"][\\"$MAX_STEPS\\"] < 1.1" \\
        'mean(data["timing/train/total_step_time"], -6, -1) < 1000'
fi
#uv run tests/check_metrics.py ${RUN_LOG}-8k-metric.json \\
#    'data["score"] >= 0.2396'
uv run tests/check_metrics.py ${RUN_LOG}-16k-metric.json \\
    'data["score"] >= 0.2396'
"""


def _checkout(tmp_path: Path, script: str = SCRIPT, name: str = "grpo-x-1n8g") -> Path:
    """A NeMo RL-shaped tree: the suite script and its config where common.env finds it."""
    suite = tmp_path / "nemo-rl" / "tests" / "test_suites" / "llm" / f"{name}.sh"
    suite.parent.mkdir(parents=True)
    suite.write_text(script)
    config = tmp_path / "nemo-rl" / "examples" / "configs" / "recipes" / "llm" / f"{name}.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("grpo: {max_num_steps: 50}\n")
    return suite


class TestReadSuite:
    def test_conditions_are_read_as_the_shell_passes_them(self, tmp_path: Path) -> None:
        suite = read_suite(_checkout(tmp_path))
        assert suite.max_steps == 50
        assert suite.conditions(suite_metrics_only=True) == [
            'median(data["train/token_mult_prob_error"]) < 1.1',
            'data["train/token_mult_prob_error"]["50"] < 1.1',  # "$MAX_STEPS" expanded
            'mean(data["timing/train/total_step_time"], -6, -1) < 1000',
        ]
        assert [i.on_suite_metrics for i in suite.invocations] == [True, False]  # '#' skipped
        assert suite.invocations[1].conditions == ('data["score"] >= 0.2396',)

    def test_single_quotes_are_literal_and_unknown_variables_are_noted(
        self, tmp_path: Path
    ) -> None:
        script = (
            "MAX_STEPS=7\nuv run tests/check_metrics.py $JSON_METRICS "
            """'data["t"]["$MAX_STEPS"] < 1' "max(data[\\"t\\"]) < $LIMIT"\n"""
        )
        path = tmp_path / "s.sh"
        path.write_text(script)
        (inv,) = read_suite(path).invocations
        assert inv.conditions == ('data["t"]["$MAX_STEPS"] < 1', 'max(data["t"]) < $LIMIT')
        assert inv.notes and "$LIMIT is not set in the script" in inv.notes[0]


class TestCheckRunCondition:
    @pytest.fixture(scope="class")
    def runs(self, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
        root = tmp_path_factory.mktemp("runs")
        config = root / "grpo-plain.yaml"  # a plain NeMo RL config: no rlgate: block
        config.write_text("grpo: {max_num_steps: 50}\n")
        return {
            "config": config,
            "healthy": write_run(root / "healthy", Fault.HEALTHY, seed=7),
            "stopped": write_run(root / "stopped", Fault.STOPPED_EARLY, seed=7),
        }

    def _check(
        self, runs: dict[str, Path], run: str, capsys, *conditions: str, out: Path | None = None
    ):
        args = ["check-run", str(runs[run]), "--recipe", str(runs["config"])]
        args += [a for c in conditions for a in ("--condition", c)]
        args += ["--json", str(out)] if out else []
        return run_cli(args, capsys)

    def test_a_plain_nemo_rl_config_declares_no_gates_without_conditions(
        self, runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        code, _, err = self._check(runs, "healthy", capsys)
        assert code == 2 and "declares no gates" in one_error(err)

    def test_conditions_are_gates_and_completion_is_still_judged(
        self, runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        holds = 'median(data["train/token_mult_prob_error"]) < 1.1'
        arithmetic = 'mean(data["train/loss"], -5, -1) < data["train/loss"]["1"] + 1'
        out = tmp_path / "o.json"
        code, printed, _ = self._check(runs, "healthy", capsys, holds, arithmetic, out=out)
        assert code == 0, printed
        checks = {c["name"]: c["status"] for c in json.loads(out.read_text())["checks"]}
        assert checks == {
            "data_integrity": "pass",
            "completion": "pass",
            "condition_1": "pass",
            "condition_2": "pass",
        }
        code, printed, _ = self._check(
            runs, "healthy", capsys, holds, 'max(data["train/reward"]) > 5'
        )
        assert code == 1 and "FAIL  condition_2" in printed
        code, printed, _ = self._check(runs, "stopped", capsys, holds)
        assert code == 1 and "ERROR completion" in printed and "PASS  condition_1" in printed

    def test_a_condition_rlgate_cannot_parse_is_exit_2_with_its_column(
        self, runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        code, _, err = self._check(runs, "healthy", capsys, '__import__("os").system("true") < 1')
        assert code == 2 and "column 1" in one_error(err)

    def test_conditions_are_added_after_a_recipes_own_checks(
        self, runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        recipe = tmp_path / "r.yaml"
        recipe.write_text(
            "grpo: {max_num_steps: 50}\nrlgate:\n  convergence:\n    checks:\n"
            "      - {condition: 'max(data[\"train/reward\"]) > 0', name: own}\n"
        )
        out = tmp_path / "o.json"
        code, printed, _ = run_cli(
            [
                *("check-run", str(runs["healthy"]), "--recipe", str(recipe)),
                *("--condition", 'min(data["train/reward"]) < 1', "--json", str(out)),
            ],
            capsys,
        )
        assert code == 0, printed
        names = [c["name"] for c in json.loads(out.read_text())["checks"]]
        assert names == ["data_integrity", "completion", "own", "condition_2"]


class TestImportSuite:
    def test_the_written_recipe_gates_a_run_as_the_conditions_do(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        script = _checkout(tmp_path)
        out = tmp_path / "gates" / "grpo-x-1n8g.rlgate.yaml"
        out.parent.mkdir()
        code, printed, err = run_cli(
            ["recipe", "import-suite", str(script), "--out", str(out)], capsys
        )
        assert code == 0 and "3 condition(s), target step 50" in printed
        assert "16k-metric.json (not the run's $JSON_METRICS) left out" in err
        text = out.read_text()
        assert "defaults: ../nemo-rl/examples/configs/recipes/llm/grpo-x-1n8g.yaml" in text
        assert "target_step: 50" in text and "reason: grpo-x-1n8g.sh:18" in text
        run = write_run(tmp_path / "run", Fault.HEALTHY, seed=3)
        report = tmp_path / "imported.json"
        code, printed, _ = run_cli(
            ["check-run", str(run), "--recipe", str(out), "--json", str(report)], capsys
        )
        assert code == 0, printed
        checks = [(c["name"], c["status"]) for c in json.loads(report.read_text())["checks"]]
        assert checks == [
            ("data_integrity", "pass"),
            ("completion", "pass"),
            ("suite_1", "pass"),
            ("suite_2", "pass"),
            ("suite_3", "pass"),
        ]

    def test_printed_without_out_and_refused_over_its_input(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        script = _checkout(tmp_path)
        code, printed, _ = run_cli(["recipe", "import-suite", str(script)], capsys)
        assert code == 0 and printed.startswith("# rlgate gate imported") and "rlgate:" in printed
        code, _, err = run_cli(
            ["recipe", "import-suite", str(script), "--out", str(script)], capsys
        )
        assert code == 2 and "error:" in one_error(err)
        assert script.read_text() == SCRIPT

    @pytest.mark.parametrize(
        ("script", "words"),
        [
            (
                "uv run tests/check_metrics.py $JSON_METRICS 'mean(data[\"t\"]) < 1'\n",
                "no MAX_STEPS",
            ),
            (
                "MAX_STEPS=5\nuv run tests/check_metrics.py $JSON_METRICS "
                "'mean(data[\"t\"]) ** 2 < 1'\n",
                "s.sh:2",
            ),
            ("MAX_STEPS=5\necho no checks here\n", "no check_metrics.py condition"),
        ],
        ids=["no_max_steps", "unparsable", "no_conditions"],
    )
    def test_a_script_that_cannot_be_imported_is_exit_2_naming_it(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], script: str, words: str
    ) -> None:
        path = tmp_path / "s.sh"
        path.write_text(script)
        code, _, err = run_cli(["recipe", "import-suite", str(path)], capsys)
        assert code == 2 and words in one_error(err)
