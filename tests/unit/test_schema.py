"""rlgate.recipe.schema: unknown keys are errors with a did-you-mean; never-read keys warn."""

from __future__ import annotations

from rlgate.recipe.findings import Severity
from rlgate.recipe.schema import check_keys, load_schema


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
        cfg = {"policy": {"hf_config_overrides": {"anything_goes": 1}}}
        assert not check_keys(cfg)

    def test_library_closed_subtree_rejects_a_typo_with_did_you_mean(self):
        cfg = {"policy": {"megatron_cfg": {"optimizer": {"min_Lr": 1e-6, "lrr": 1e-5}}}}
        findings = {f.key: f for f in check_keys(cfg)}
        assert set(findings) == {
            "policy.megatron_cfg.optimizer.min_Lr",
            "policy.megatron_cfg.optimizer.lrr",
        }
        for finding in findings.values():
            assert finding.severity is Severity.ERROR and finding.code == "unknown-key"
            assert "OptimizerConfig" in finding.message and "megatron-bridge" in finding.message
        assert "did you mean policy.megatron_cfg.optimizer.min_lr?" in (
            findings["policy.megatron_cfg.optimizer.min_Lr"].message
        )
        assert "did you mean policy.megatron_cfg.optimizer.lr" in (
            findings["policy.megatron_cfg.optimizer.lrr"].message
        )

    def test_vllm_kwargs_are_closed_by_vllm_engine_args(self):
        ok = {"max_num_seqs": 64, "compilation_config": {"pass_config": {"x": True}}}
        assert not check_keys({"policy": {"generation": {"vllm_kwargs": ok}}})
        (finding,) = check_keys({"policy": {"generation": {"vllm_kwargs": {"max_num_seq": 64}}}})
        assert finding.severity is Severity.ERROR
        assert "AsyncEngineArgs" in finding.message and "vllm 0.25.1" in finding.message
        assert "did you mean policy.generation.vllm_kwargs.max_num_seqs?" in finding.message

    def test_subtree_closed_only_by_published_configs_warns(self):
        cfg = {"policy": {"generation": {"trtllm_kwargs": {"batch_wait_timeout_iter": 4}}}}
        (finding,) = check_keys(cfg)
        assert finding.severity is Severity.WARNING and finding.code == "unverified-key"
        assert "did you mean policy.generation.trtllm_kwargs.batch_wait_timeout_iters?" in (
            finding.message
        )

    def test_keys_only_code_reads_are_known(self):
        # Read by nemo_rl/models/generation/vllm/vllm_worker.py:_build_sampling_params and
        # megatron/setup.py:setup_model_config, declared by no schema class, set by no config.
        cfg = {"policy": {"generation": {"ignore_eos": True}}}
        cfg["policy"]["megatron_cfg"] = {"layernorm_epsilon": 1e-6}
        assert not check_keys(cfg)

    def test_distributed_executor_backend_in_vllm_cfg_is_a_known_unread_key(self):
        # Set by NeMo RL's distillation configs; vllm_worker.py computes the value itself.
        cfg = {"policy": {"generation": {"vllm_cfg": {"distributed_executor_backend": "ray"}}}}
        (finding,) = check_keys(cfg)
        assert finding.severity is Severity.WARNING and finding.code == "unread-key"
        assert "resolve_distributed_executor_backend" in finding.message

    def test_gym_section_is_left_to_gym_validation(self):
        cfg = {"env": {"nemo_gym": {"my_agent": {"responses_api_agents": {"x": {"y": 1}}}}}}
        assert not any(f.severity is Severity.ERROR for f in check_keys(cfg))

    def test_unknown_top_level_section_is_an_error(self):
        assert ("unknown-key", "polcy") in _codes({"polcy": {}})

    def test_schema_records_its_nemo_rl_commit(self):
        assert len(load_schema().commit) == 40
