"""GPU-hour budgets: the formula, the real ci/nightly.yaml, over-budget and malformed lists."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rlgate.cli.app import main
from rlgate.core.errors import RecipeError
from rlgate.launch.budget import (
    evaluate_budget,
    gpu_hours,
    load_nightly,
    render_budget,
    render_run_table,
    runs_needed,
)
from rlgate.recipe.load import get_path, load_recipe

from .helpers.launch_fixtures import recipe_named

ROOT = Path(__file__).parents[2]
NIGHTLY = ROOT / "ci" / "nightly.yaml"
TARGET = "recipes/grpo-qwen3.5-35ba3b-4n8g-megatron-ep16tp2cp2-async1off-gym-swe-thinking.yaml"


def write_list(path: Path, runs: list[dict], cap: float = 1000.0) -> Path:
    path.write_text(yaml.safe_dump({"cap_gpu_hours": cap, "root": str(ROOT), "runs": runs}))
    return path


def entry(**changes: object) -> dict:
    base = {"recipe": TARGET, "steps": 20, "minutes": 240, "nodes": 4, "gpus": 8}
    return {**base, **changes}


class TestGpuHours:
    def test_gpu_hours_matches_nemo_rl_tools_launch(self) -> None:
        # NeMo RL's SWE1 async-gym nightly: 16 nodes x 8 GPUs x 90 min, one job.
        assert gpu_hours(runs=1, nodes=16, gpus_per_node=8, minutes=90) == 192

    def test_gpu_hours_does_not_round_short_jobs_down_to_zero(self) -> None:
        # tools/launch's integer arithmetic gives 1*1*1*59/60 = 0; the budget must not.
        assert gpu_hours(runs=1, nodes=1, gpus_per_node=1, minutes=59) == pytest.approx(59 / 60)

    @pytest.mark.parametrize(
        ("steps", "per_run", "runs"),
        [
            pytest.param(20, 20, 1, id="one_job"),
            pytest.param(20, 8, 3, id="rounds_up"),
            pytest.param(500, 100, 5, id="exact_multiple"),
        ],
    )
    def test_runs_needed_is_ceil_of_steps_over_steps_per_run(
        self, steps: int, per_run: int, runs: int
    ) -> None:
        assert runs_needed(steps, per_run) == runs

    def test_runs_needed_rejects_zero_steps_per_run(self) -> None:
        with pytest.raises(ValueError, match="must be >= 1"):
            runs_needed(10, 0)


class TestNightlyList:
    def test_nightly_list_is_within_its_cap(self) -> None:
        budget = evaluate_budget(NIGHTLY)
        assert budget.within_cap, render_budget(budget)
        assert budget.total == pytest.approx(sum(line.gpu_hours for line in budget.lines))

    def test_nightly_list_charges_what_each_recipe_allocates(self) -> None:
        for line in evaluate_budget(NIGHTLY).lines:
            recipe = load_recipe(line.recipe, line.overrides)
            assert get_path(recipe.config, "cluster.num_nodes") == line.nodes, line.name
            assert get_path(recipe.config, "cluster.gpus_per_node") == line.gpus_per_node
            expected = line.runs * line.nodes * line.gpus_per_node * line.minutes / 60
            assert line.gpu_hours == pytest.approx(expected)

    def test_nightly_list_holds_the_short_async_runs_and_the_reference(self) -> None:
        names = {line.name for line in evaluate_budget(NIGHTLY).lines}
        assert any(n.endswith("4n8g-megatron-ep16tp2cp2-async1off-gym-swe-thinking") for n in names)
        assert any(n.endswith("4n8g-megatron-ep16tp2cp2-async1off-gym-swe-nothink") for n in names)
        assert any(n.startswith("grpo-qwen3-30ba3b-thinking-2507") for n in names)

    def test_nightly_cap_leaves_less_headroom_than_any_run_costs(self) -> None:
        # The header's argument for the cap: adding any run must fail the budget.
        budget = evaluate_budget(NIGHTLY)
        cheapest = min(line.gpu_hours for line in budget.lines)
        assert budget.cap - budget.total < cheapest

    def test_over_budget_list_fails_the_cap(self, tmp_path: Path) -> None:
        listed = write_list(tmp_path / "n.yaml", [entry(), entry(name="again")], cap=200)
        budget = evaluate_budget(listed)
        assert budget.total == 256 and not budget.within_cap
        assert "OVER the cap of 200" in render_budget(budget)

    def test_chained_jobs_are_charged_per_job(self, tmp_path: Path) -> None:
        listed = write_list(tmp_path / "n.yaml", [entry(steps_per_run=8)])
        (line,) = evaluate_budget(listed).lines
        assert (line.runs, line.gpu_hours) == (3, 3 * 4 * 8 * 240 / 60)

    def test_cap_argument_overrides_the_file(self, tmp_path: Path) -> None:
        listed = write_list(tmp_path / "n.yaml", [entry()], cap=100)
        assert evaluate_budget(listed, cap=128).within_cap


class TestNightlyListErrors:
    def test_typo_key_is_an_error_naming_it(self, tmp_path: Path) -> None:
        bad = entry()
        bad["minute"] = bad.pop("minutes")
        with pytest.raises(RecipeError, match="minute"):
            load_nightly(write_list(tmp_path / "n.yaml", [bad]))

    def test_nodes_disagreeing_with_the_recipe_is_an_error(self, tmp_path: Path) -> None:
        listed = write_list(tmp_path / "n.yaml", [entry(nodes=2)])
        with pytest.raises(RecipeError, match=r"cluster.num_nodes is 4 in the recipe but 2"):
            evaluate_budget(listed)

    def test_override_is_applied_before_comparing_nodes(self, tmp_path: Path) -> None:
        two = entry(nodes=2, overrides=["cluster.num_nodes=2"])
        listed = write_list(tmp_path / "n.yaml", [two])
        assert evaluate_budget(listed).lines[0].nodes == 2

    def test_duplicate_run_names_are_an_error(self, tmp_path: Path) -> None:
        with pytest.raises(RecipeError, match="listed twice"):
            evaluate_budget(write_list(tmp_path / "n.yaml", [entry(), entry()]))

    def test_missing_recipe_is_an_error(self, tmp_path: Path) -> None:
        listed = write_list(tmp_path / "n.yaml", [entry(recipe="recipes/nope.yaml")])
        with pytest.raises(RecipeError, match="not found"):
            evaluate_budget(listed)

    def test_empty_run_list_is_an_error(self, tmp_path: Path) -> None:
        with pytest.raises(RecipeError, match="runs"):
            load_nightly(write_list(tmp_path / "n.yaml", []))

    def test_override_with_a_space_cannot_go_to_a_shell_table(self, tmp_path: Path) -> None:
        listed = write_list(tmp_path / "n.yaml", [entry(overrides=["++rlgate_note='x y'"])])
        with pytest.raises(RecipeError, match="space"):
            render_run_table(evaluate_budget(listed).lines)


class TestBudgetCommand:
    def test_budget_command_passes_the_real_list(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["budget", str(NIGHTLY)]) == 0
        out = capsys.readouterr().out
        assert "within the cap of 800" in out and out.count("GPU-h ") == 3

    def test_budget_command_fails_over_the_cap(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["budget", str(NIGHTLY), "--cap", "700"]) == 1
        assert "OVER the cap of 700" in capsys.readouterr().out

    def test_budget_command_rejects_an_invalid_list(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        bad = tmp_path / "n.yaml"
        bad.write_text("cap_gpu_hours: 10\nrunz: []\n")
        assert main(["budget", str(bad)]) == 2
        assert "runz" in capsys.readouterr().err

    def test_budget_list_prints_one_tab_separated_line_per_run(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["budget", str(NIGHTLY), "--list"]) == 0
        captured = capsys.readouterr()
        rows = [line.split("\t") for line in captured.out.splitlines()]
        assert len(rows) == 3 and all(len(r) == 7 for r in rows)
        name, recipe, steps, per_run, minutes, baseline, overrides = rows[0]
        assert Path(recipe).is_file() and Path(recipe).stem == name
        assert (steps, per_run, minutes, baseline, overrides) == ("20", "20", "240", "-", "")
        assert "total 768.0 GPU-hours" in captured.err


class TestHostileNightlyLists:
    """Every malformed list is exit 2 with one message naming the key, never a traceback."""

    @pytest.mark.parametrize(
        ("content", "message"),
        [
            pytest.param(b"\xff\xfe\x00binary", "not UTF-8", id="binary"),
            pytest.param(b"", "got NoneType", id="empty"),
            pytest.param(b"[1, 2]", "got list", id="list"),
            pytest.param(b"a: &a [*a]", "not valid YAML", id="recursive_alias"),
            pytest.param(b"cap_gpu_hours: 1\nruns: {a: 1}", "runs", id="runs_mapping"),
        ],
    )
    def test_unreadable_or_malformed_file(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
    ) -> None:
        bad = tmp_path / "n.yaml"
        bad.write_bytes(content)
        assert main(["budget", str(bad)]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and "internal error" not in err

    @pytest.mark.parametrize(
        ("cap", "message"),
        [
            pytest.param(float("nan"), "cap_gpu_hours: Input should be a finite number", id="nan"),
            pytest.param(float("inf"), "cap_gpu_hours: Input should be a finite number", id="inf"),
            pytest.param(-1, "cap_gpu_hours: Input should be greater than 0", id="negative"),
            pytest.param(0, "cap_gpu_hours: Input should be greater than 0", id="zero"),
        ],
    )
    def test_cap_in_the_file_must_be_finite_and_positive(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], cap: float, message: str
    ) -> None:
        listed = write_list(tmp_path / "n.yaml", [entry()], cap=cap)
        assert main(["budget", str(listed)]) == 2
        assert message in capsys.readouterr().err

    @pytest.mark.parametrize(
        ("changes", "message"),
        [
            pytest.param(
                {"steps": True}, "runs[0].steps: Input should be a valid integer", id="bool"
            ),
            pytest.param({"steps": 0}, "runs[0].steps: Input should be greater than", id="zero"),
            pytest.param({"minutes": -5}, "runs[0].minutes", id="negative_minutes"),
            pytest.param({"steps_per_run": -3}, "runs[0].steps_per_run", id="negative_per_run"),
            pytest.param({"nodes": 1.5}, "runs[0].nodes", id="fraction"),
            pytest.param({"steps": "20"}, "runs[0].steps", id="string"),
            pytest.param({"recipe": "a\x00b"}, "runs[0].recipe: holds a control", id="nul_path"),
            pytest.param({"name": "../../x"}, "cannot name a run directory", id="name_escapes"),
            pytest.param({"name": "a b;c"}, "cannot name a run directory", id="name_shell"),
            pytest.param({"overrides": ["a=\n"]}, "runs[0].overrides[0]", id="override_newline"),
        ],
    )
    def test_bad_entry_values(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict, message: str
    ) -> None:
        listed = write_list(tmp_path / "n.yaml", [entry(**changes)])
        assert main(["budget", str(listed)]) == 2
        err = capsys.readouterr().err
        assert message in err, err
        assert "Traceback" not in err and "errors.pydantic.dev" not in err

    def test_recipe_file_name_that_cannot_name_a_run_needs_a_name(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        recipe = recipe_named(tmp_path, "r; touch x #")
        listed = write_list(tmp_path / "n.yaml", [entry(recipe=str(recipe))])
        assert main(["budget", str(listed)]) == 2
        assert "cannot name a run directory" in capsys.readouterr().err
        named = write_list(tmp_path / "n.yaml", [entry(recipe=str(recipe), name="plain")])
        assert evaluate_budget(named).lines[0].name == "plain"

    @pytest.mark.parametrize("cap", ["nan", "inf", "-1", "0", "x"])
    def test_cap_option_must_be_a_finite_positive_number(
        self, capsys: pytest.CaptureFixture[str], cap: str
    ) -> None:
        with pytest.raises(SystemExit) as info:
            main(["budget", str(NIGHTLY), f"--cap={cap}"])
        assert info.value.code == 2
        assert "argument --cap:" in capsys.readouterr().err
