"""rlgate.checks.plan: planning a recipe's checks, skipping with reasons, rendering results."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rlgate.checks.plan import (
    GateInputs,
    Need,
    band_run_paths,
    load_inputs,
    load_plan,
    plan_gate,
    render_junit,
    render_table,
    run_gate,
)
from rlgate.checks.registry import parse_gate
from rlgate.core.errors import MetricsError, RecipeError
from rlgate.core.results import Outcome, Tier
from rlgate.recipe.facts import RunContext
from rlgate.testing.corpus import Fault

from .helpers.corpus_build import corpus
from .helpers.mlperf_runs import mlperf_path, mlperf_plan


class TestPlanGate:
    def test_plan_gate_orders_and_tags_the_reference_recipe(self) -> None:
        plan = mlperf_plan(256)
        names = [c.name for c in plan.checks]
        assert names[:2] == ["data_integrity", "completion"]
        assert {c.name: c.need for c in plan.checks if c.need is not Need.RUN} == {
            "band_curve:train/reward": Need.BAND,
            "band_mean:timing/train/total_step_time": Need.BAND,
            "perf:timing/train/total_step_time": Need.BASELINE,
            "perf:timing/train/valid_tokens_per_sec_per_gpu": Need.BASELINE,
        }
        first_perf = next(c.name for c in plan.for_tier(Tier.PERF))
        assert first_perf == "band_mean:timing/train/total_step_time"

    def test_plan_gate_skips_tool_call_rate_the_config_does_not_log(self) -> None:
        gate = parse_gate({"convergence": {"agentic": {"tool_call_failure_rate": 0.05}}})
        plan = plan_gate(gate, RunContext("r", tool_call_metrics_logged=False))
        check = next(c for c in plan.checks if c.name == "tool_call_failure_rate")
        assert check.skip and "grpo.invalid_tool_call_advantage" in check.skip

    def test_plan_gate_of_an_empty_block_is_refused(self) -> None:
        """A gate with nothing to check would pass anything ("0 passed"): it is an error."""
        with pytest.raises(RecipeError, match="recipe r declares no gates"):
            plan_gate(parse_gate({}), RunContext("r"))
        with pytest.raises(RecipeError, match=r"lists perf in rlgate\.tiers but declares no perf"):
            plan_gate(parse_gate({"tiers": ["perf"], "convergence": {}}), RunContext("r"))

    def test_junit_escapes_what_xml_cannot_carry(self) -> None:
        from rlgate.core.junit import xml_text

        assert xml_text("a\x1b[2Kb\x00c\ud800d\uffffe\tf\ng") == (
            "a\\x1b[2Kb\\x00c\\ud800d\\uffffe\tf\ng"
        )


class TestRunGate:
    def test_run_gate_skips_checks_whose_input_is_missing_naming_the_option(self) -> None:
        plan = mlperf_plan(256)
        report = run_gate(plan, load_inputs(plan, mlperf_path(256, 1)))
        reasons = {r.name: r.message for r in report.skipped}
        assert {r.outcome for r in report.skipped} == {Outcome.SKIP}
        assert reasons["perf:timing/train/total_step_time"].endswith("needs --baseline")
        assert "--band-run" in reasons["band_curve:train/reward"]
        assert report.passed and all(r.outcome is Outcome.PASS for r in report.results)

    def test_run_gate_restricts_to_tiers(self) -> None:
        plan = mlperf_plan(256)
        inputs = load_inputs(plan, mlperf_path(256, 1), baseline=mlperf_path(256, 2))
        report = run_gate(plan, inputs, (Tier.PERF,))
        assert {r.tier for r in report.results} == {Tier.PERF}

    def test_band_run_paths_resolve_recipe_globs_and_report_misses(self) -> None:
        plan = load_plan(corpus().recipe)
        assert band_run_paths(plan) == list(corpus().band_runs)
        assert band_run_paths(plan, ["x"]) == [Path("x")]
        broken = load_plan(corpus().recipe, overrides=["++rlgate.band.runs=[nowhere/*]"])
        with pytest.raises(MetricsError, match="matches nothing"):
            band_run_paths(broken)

    def test_report_to_dict_lists_checks_skips_and_warnings(self) -> None:
        plan = load_plan(corpus().recipe)
        report = run_gate(plan, load_inputs(plan, corpus().runs[Fault.RESUMED]))
        doc = report.to_dict()
        assert (
            doc["passed"] is True
            and doc["target_step"] == 50
            and doc["source_kind"] == "tensorboard"
        )
        assert {"name", "tier", "status", "value", "bound", "message"} <= set(doc["checks"][0])
        assert any("later file wins" in w for w in doc["warnings"])
        assert {s["reason"] for s in doc["skipped"]} >= {
            "perf:timing/train/total_step_time needs --baseline"
        }


class TestRender:
    def test_render_junit_one_testcase_per_check_with_properties(self) -> None:
        plan = load_plan(corpus().recipe)
        report = run_gate(
            plan,
            GateInputs(
                run=load_inputs(plan, corpus().runs[Fault.NAN_LOSS]).run,
                band_runs=load_inputs(plan, corpus().baseline).band_runs,
            ),
        )
        root = ET.fromstring(render_junit(report))
        cases = {c.get("name"): c for c in root.iter("testcase")}
        assert len(cases) == len(report.results) + len(report.skipped)
        nan = cases["finite:train/loss"]
        assert nan.find("failure") is not None and "nan at step 31" in nan.find("failure").get(
            "message"
        )
        facts = {p.get("name"): p.get("value") for p in nan.iter("property")}
        assert facts["rlgate.verdict"] == "fail" and facts["rlgate.value"] == "1"
        assert cases["perf:timing/train/total_step_time"].find("skipped") is not None

    def test_render_table_summarises(self) -> None:
        plan = mlperf_plan(256)
        text = render_table(run_gate(plan, load_inputs(plan, mlperf_path(256, 1))))
        assert "PASS  completion" in text and text.rstrip().endswith("skipped")
