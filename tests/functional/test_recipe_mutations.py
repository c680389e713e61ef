"""Each way of breaking the target recipe is caught by the check named for it.

The target recipe is valid (test_recipe_validation.py); here one NeMo RL override at a time
breaks it the way real runs have been broken, and ``rlgate recipe check`` must report an
ERROR with the expected code (and only warnings for keys NeMo RL/Gym accept but ignore).
"""

from __future__ import annotations

import json

import pytest

from rlgate.checks.recipe import check_recipe_file
from rlgate.core.resources import RECIPES
from rlgate.recipe.findings import Severity

TARGET = RECIPES / "grpo-qwen3.5-35ba3b-4n8g-megatron-ep16tp2cp2-async1off-gym-swe-thinking.yaml"
REFERENCE = (
    RECIPES / "grpo-qwen3-30ba3b-thinking-2507-16n8g-megatron-tp4pp2cp4ep8-async1off-gym-swe.yaml"
)
SERVE = "policy.generation.vllm_cfg.http_server_serving_chat_kwargs"
GYM_MODEL = "env.nemo_gym.policy_model.responses_api_models.vllm_model"
SWE = "env.nemo_gym.swe_agents_train.responses_api_agents.swe_agents"

THINK_PENALTY = [
    "++reward_penalties.penalize_malformed_think_tag=true",
    "++reward_penalties.token_ids.think_open=248068",
]
MUTATIONS = {
    "typo_in_rl_key": (["++grpo.async_grpo.max_trajectory_age_step=2"], "unknown-key"),
    "colocated_async_vllm": (["policy.generation.colocated.enabled=true"], "async-colocated"),
    "no_importance_sampling": (
        ["loss_fn.use_importance_sampling_correction=false"],
        "async-importance-sampling",
    ),
    "dynamic_sampling_in_async": (["grpo.use_dynamic_sampling=true"], "async-unsupported"),
    "max_val_samples_on_gym": (["grpo.max_val_samples=16"], "gym-max-val-samples"),
    "top_k_on_gym": (["policy.generation.top_k=20"], "gym-top-k"),
    # force_on_policy_ratio (set by the base) requires equality (grpo.py::setup)
    "batch_size_mismatch": (["policy.train_global_batch_size=48"], "batch-size-on-policy"),
    # without it the step's 64 samples must split into global batches
    "batch_size_not_a_multiple": (
        ["loss_fn.force_on_policy_ratio=false", "policy.train_global_batch_size=48"],
        "batch-size-multiple",
    ),
    "no_training_nodes": (
        ["policy.generation.colocated.resources.num_nodes=4"],
        "topology-generation-nodes",
    ),
    "serving_kwarg_typo": ([f"++{SERVE}.tool_call_parser=qwen3_coder"], "serving-kwarg"),
    "parser_under_vllm_cfg": (
        ["++policy.generation.vllm_cfg.tool_parser=qwen3_coder"],
        "serving-kwarg-level",
    ),
    "hermes_on_qwen35": ([f"{SERVE}.tool_parser=hermes"], "tool-parser-mismatch"),
    "unknown_parser_name": ([f"{SERVE}.tool_parser=qwen3_codr"], "unknown-parser"),
    "no_reasoning_parser": ([f"{SERVE}.reasoning_parser=null"], "reasoning-not-parsed"),
    "stock_qwen35_template": ([f"~{SERVE}.chat_template"], "history-thinking-dropped"),
    "truncate_history_thinking": (
        [f"++{SERVE}.default_chat_template_kwargs.truncate_history_thinking=true"],
        "truncate-history-thinking",
    ),
    "gym_without_reasoning_parser": (
        [f"{GYM_MODEL}.uses_reasoning_parser=false"],
        "gym-reasoning-parser",
    ),
    "gym_reasoning_field": (
        [f"++{GYM_MODEL}.reasoning_field=reasoning_content"],
        "gym-reasoning-field",
    ),
    "gym_key_typo": ([f"++{SWE}.agent_max_turn=50"], "gym-key"),
    "missing_mandatory": (["cluster.num_nodes=???"], "missing-value"),
    # the tokenizer decides: '</reasoning-end>' is 5 Qwen3.5 tokens, so think_close stays unset
    "think_close_not_inferable": (
        [*THINK_PENALTY, "++env.nemo_gym.thinking_tags=['<think>','</reasoning-end>']"],
        "think-token-ids",
    ),
}


@pytest.mark.parametrize("name", list(MUTATIONS), ids=list(MUTATIONS))
def test_mutation_is_rejected_with_the_named_code(name, tokenizers_root, gate_record):
    overrides, code = MUTATIONS[name]
    report = check_recipe_file(TARGET, overrides, tokenizers_root)
    codes = {f.code for f in report.errors}
    gate_record(mutation=name, errors=",".join(sorted(codes)))
    assert code in codes, "\n".join(
        str(f) for f in report.findings if f.severity is not Severity.INFO
    )


def test_unknown_parser_is_an_error_with_did_you_mean_and_parser_checks_not_run(tokenizers_root):
    report = check_recipe_file(TARGET, [f"{SERVE}.tool_parser=qwen3_codr"], tokenizers_root)
    (bad,) = [f for f in report.errors if f.code == "unknown-parser"]
    assert "did you mean qwen3_coder" in bad.message and "ParserManager" in bad.message
    skipped = {c.name for c in report.skipped}
    assert skipped == {"parsers", "tool-call-in-reasoning", "turn-budget", "contiguity"}
    assert report.exit_code == 1  # the error wins over the skipped checks


def test_off_policy_smaller_global_batch_is_not_an_error(tokenizers_root):
    """NeMo RL runs 2 optimizer steps per GRPO step here (grpo_math_8B.yaml does 4)."""
    off = ["loss_fn.force_on_policy_ratio=false", "policy.train_global_batch_size=32"]
    report = check_recipe_file(TARGET, off, tokenizers_root)
    assert report.ok, "\n".join(str(f) for f in report.errors)
    (info,) = [f for f in report.findings if f.code == "batch-size"]
    assert "2 optimizer steps per GRPO step" in info.message


def test_thinking_cannot_be_disabled_on_thinking_2507(tokenizers_root):
    off = [
        f"{SERVE}.default_chat_template_kwargs.enable_thinking=false",
        f"{GYM_MODEL}.chat_template_kwargs.enable_thinking=false",
    ]
    report = check_recipe_file(REFERENCE, off, tokenizers_root)
    bad = [f for f in report.errors if f.code == "template-ignores-kwarg"]
    assert bad and "thinking stays on" in bad[0].message


def test_gym_kwargs_win_over_server_defaults(tokenizers_root):
    """Gym's chat_template_kwargs ride on every request and override the server's defaults."""
    report = check_recipe_file(
        REFERENCE, [f"{SERVE}.default_chat_template_kwargs.enable_thinking=false"], tokenizers_root
    )
    assert report.setup.effective_kwargs["enable_thinking"] is True
    assert not [f for f in report.errors if f.code == "template-ignores-kwarg"]


def test_gym_ignored_key_is_only_a_warning(tokenizers_root):
    report = check_recipe_file(TARGET, [f"++{SWE}.run_with_mixed_prompts=true"], tokenizers_root)
    assert report.ok
    assert any(f.code == "gym-key" and f.severity is Severity.WARNING for f in report.findings)


def test_cli_exit_codes_and_json(tmp_path, tokenizers_root, capsys):
    from rlgate.cli.app import main

    def run(*args):
        code = main(["recipe", "check", *args, "--tokenizers", str(tokenizers_root)])
        out = capsys.readouterr()
        return code, out.out, out.err

    code, out, err = run(str(TARGET), "--json", str(tmp_path / "ok.json"), "-q")
    assert code == 0, out + err
    doc = json.loads((tmp_path / "ok.json").read_text())
    assert doc["schema_version"] == 2 and doc["exit_code"] == 0
    (report,) = doc["reports"]
    assert report["compatible"] is True and report["status"] == "compatible"
    assert report["profile"]["tool_format"] == "xml" and report["profile"]["thinking"] == "open"
    checks = {c["check"]: c for c in report["checks"]}
    model = checks.pop("model-config")  # Qwen3.5's folder has no config.json: named, not run
    assert {c["status"] for c in checks.values()} == {"ran"}
    assert model["status"] == "not-applicable" and "vllm-heads-tp" in model["reason"]
    code, out, _ = run(str(TARGET), f"{SERVE}.tool_parser=hermes")
    assert code == 1 and "tool-parser-mismatch" in out
    code, _, err = run(str(tmp_path / "nope.yaml"))
    assert code == 2 and "not found" in err


def test_offline_missing_tokenizer_runs_config_checks_and_exits_3(
    tmp_path, tokenizers_root, capsys, monkeypatch
):
    """No hub, tokenizer absent: config checks run, served checks reported as not run."""
    from rlgate.cli.app import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    empty = tmp_path / "no-tokenizers"
    empty.mkdir()
    absent = [
        "policy.model_name=rlgate-test/absent-model",
        "policy.tokenizer.name=rlgate-test/absent-model",
    ]
    out_json = tmp_path / "offline.json"
    argv = ["recipe", "check", str(TARGET), *absent, "--tokenizers", str(empty)]
    code = main([*argv, "--json", str(out_json)])
    out, err = capsys.readouterr()
    assert code == 3, out + err
    not_run = [line for line in out.splitlines() if line.startswith("NOT RUN")]
    assert len(not_run) == 1 and "'rlgate-test/absent-model'" in not_run[0]
    assert "--tokenizers DIR as absent-model/" in not_run[0]
    assert "INCOMPLETE (0 errors" in out
    (report,) = json.loads(out_json.read_text())["reports"]
    status = {c["check"]: c for c in report["checks"]}
    assert status["async"]["status"] == "ran" and status["keys"]["status"] == "ran"
    for name in (
        "data",
        "thinking",
        "parsers",
        "tool-call-in-reasoning",
        "turn-budget",
        "contiguity",
    ):
        assert status[name]["status"] == "skipped" and "absent-model" in status[name]["reason"]
    # an error found by a config check still wins: exit 1, checks still reported skipped
    code = main([*argv, "policy.generation.colocated.enabled=true"])
    out, _ = capsys.readouterr()
    assert code == 1 and "async-colocated" in out and "NOT RUN" in out


def test_one_think_token_id_is_enough_when_the_other_tag_is_one_token(tokenizers_root):
    """'</think>' is one Qwen3.5 token: resolve_reward_penalty_config infers think_close."""
    report = check_recipe_file(TARGET, THINK_PENALTY, tokenizers_root)
    assert not [f for f in report.findings if f.code == "think-token-ids"]
    assert {c.name: c.status for c in report.checks}["thinking"] == "ran"
