"""rlgate.schema: unknown keys are errors with a did-you-mean; never-read keys are warnings."""

from __future__ import annotations

from rlgate.findings import Severity
from rlgate.schema import check_keys, load_schema


def _codes(config):
    return {(f.code, f.key) for f in check_keys(config)}


class TestCheckKeys:
    def test_known_keys_pass(self):
        assert not check_keys(
            {"grpo": {"async_grpo": {"enabled": True, "max_trajectory_age_steps": 1}}}
        )

    def test_misspelled_key_is_an_error_with_did_you_mean(self):
        (finding,) = check_keys({"grpo": {"async_grpo": {"max_trajectory_age_step": 2}}})
        assert finding.severity is Severity.ERROR and finding.code == "unknown-key"
        assert "did you mean grpo.async_grpo.max_trajectory_age_steps" in finding.message

    def test_key_at_the_wrong_level_points_to_where_it_lives(self):
        (finding,) = check_keys({"policy": {"max_model_len": 4096}})
        assert "policy.generation.vllm_cfg.max_model_len" in finding.message

    def test_never_read_key_is_a_warning_with_evidence(self):
        (finding,) = check_keys({"grpo": {"penalize_invalid_tool_call": True}})
        assert finding.severity is Severity.WARNING and finding.code == "unread-key"
        assert "penalize_invalid_tool_call" in finding.message

    def test_open_subtrees_accept_any_key(self):
        cfg = {"policy": {"generation": {"vllm_kwargs": {"anything_goes": 1}}}}
        assert not check_keys(cfg)

    def test_gym_section_is_left_to_gym_validation(self):
        cfg = {"env": {"nemo_gym": {"my_agent": {"responses_api_agents": {"x": {"y": 1}}}}}}
        assert not any(f.severity is Severity.ERROR for f in check_keys(cfg))

    def test_unknown_top_level_section_is_an_error(self):
        assert ("unknown-key", "polcy") in _codes({"polcy": {}})

    def test_schema_records_its_nemo_rl_commit(self):
        assert len(load_schema().commit) == 40
