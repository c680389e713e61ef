"""Every recipe, checked jointly (RL keys x Gym x template x parsers x async) as users run it.

Regression story: the first attempt at this benchmark served data written for qwen3_coder-style
XML tool calls to a model whose template writes hermes JSON, with the hermes parser and
thinking disabled, and found out after a 16-node run. recipes/known-bad/ keeps that
combination; it must be rejected here, with messages naming the mismatch.
"""

from __future__ import annotations

import re
from pathlib import Path

from rlgate.checks.recipe import check_recipe
from rlgate.recipe.findings import Severity
from rlgate.recipe.load import functional_gate, get_path
from rlgate.recipe.schema import check_keys
from rlgate.serving.setup import ServingSetup

# NeMo RL's naming convention: <algo>-<model>-<nodes>n<gpus>g-<strategy...>.yaml
NAME = re.compile(r"^(grpo|dapo|gdpo)-[a-z0-9.]+(-[a-z0-9.]+)*?-(\d+)n(\d+)g-[a-z0-9.-]+$")

_REPORTS: dict[Path, object] = {}


def _report(setup: ServingSetup):
    if setup.recipe.path not in _REPORTS:
        _REPORTS[setup.recipe.path] = check_recipe(setup.recipe, None, setup)
    return _REPORTS[setup.recipe.path]


class TestRecipeFiles:
    def test_recipe_name_follows_nemo_rl_convention_and_matches_cluster(self, recipe, gate_record):
        match = NAME.match(recipe.name)
        assert match, f"{recipe.name}: not <algo>-<model>-<N>n<G>g-<strategy>"
        nodes, gpus = int(match.group(3)), int(match.group(4))
        cfg = recipe.config
        gate_record(recipe=recipe.name, nodes=nodes, gpus_per_node=gpus)
        assert (get_path(cfg, "cluster.num_nodes"), get_path(cfg, "cluster.gpus_per_node")) == (
            nodes,
            gpus,
        ), "the file name's NnGg must match cluster.num_nodes / cluster.gpus_per_node"

    def test_recipe_gate_block_is_valid(self, recipe):
        gate = functional_gate(recipe)
        assert gate.expect in ("pass", "reject")
        if gate.expect == "reject":
            assert gate.reject_codes, "a negative control must name the findings it expects"

    def test_recipe_sets_only_keys_nemo_rl_reads(self, recipe):
        findings = check_keys(recipe.config)
        assert not findings, "\n".join(str(f) for f in findings)


class TestJointValidation:
    def test_recipe_verdict_matches_its_expectation(self, setup, gate_record):
        report = _report(setup)
        gate = functional_gate(setup.recipe)
        codes = sorted({f.code for f in report.errors})
        gate_record(recipe=setup.recipe.name, expect=gate.expect, errors=",".join(codes) or "none")
        if gate.expect == "pass":
            assert report.ok, "\n".join(str(f) for f in report.errors)
        else:
            assert not report.ok, f"{setup.recipe.name} is a negative control but passed"
            missing = set(gate.reject_codes) - set(codes)
            assert not missing, f"expected rejections {sorted(missing)} not raised; got {codes}"

    def test_negative_control_messages_name_the_mismatch(self, negative_setup):
        setup = negative_setup
        messages = {f.code: f.message for f in _report(setup).errors}
        if "data-tool-format-mismatch" in messages:
            text = messages["data-tool-format-mismatch"]
            assert "XML" in text and "JSON" in text and repr(setup.tool_parser) in text, text
        if "data-reasoning-without-thinking" in messages:
            assert "enable_thinking=False" in messages["data-reasoning-without-thinking"]

    def test_recipe_has_no_unknown_gym_keys(self, setup):
        report = _report(setup)
        bad = [f for f in report.findings if f.code == "gym-key" and f.severity is Severity.ERROR]
        assert not bad, "\n".join(str(f) for f in bad)
