"""rlgate.recipe.schema value checks: declared types (pydantic lax mode), enums, bounds, null.

Configs go through rlgate.recipe.load.load_recipe with Hydra overrides, as `recipe check` does
(``strict=False``: invalid facts are the schema's to report), so ``grpo.max_num_steps=abc``
reaches the check exactly as a user types it.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from rlgate.recipe.findings import Finding, Severity
from rlgate.recipe.load import load_recipe
from rlgate.recipe.schema import check_keys

BASE = """\
grpo:
  max_num_steps: 10
  val_num_generations_per_prompt: 1
loss_fn:
  reference_policy_kl_penalty: 0.01
cluster:
  num_nodes: 2
  gpus_per_node: 8
policy:
  model_name: Qwen/Qwen3-0.6B
  generation:
    vllm_cfg:
      kv_cache_dtype: auto
      reasoning_parser_plugin: null
"""


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "grpo.yaml"
    path.write_text(BASE, encoding="utf-8")
    return path


def _findings(path: Path, *overrides: str) -> list[Finding]:
    return check_keys(load_recipe(path, overrides, strict=False).config)


def _only(findings: list[Finding], code: str) -> Finding:
    matching = [f for f in findings if f.code == code]
    assert len(matching) == 1, [str(f) for f in findings]
    return matching[0]


class TestTypes:
    def test_base_config_has_no_findings(self, config_file: Path) -> None:
        assert _findings(config_file) == []

    @pytest.mark.parametrize(
        ("override", "key", "shown", "expected"),
        [
            ("grpo.max_num_steps=abc", "grpo.max_num_steps", "'abc'", "expected int"),
            ("grpo.max_num_steps=", "grpo.max_num_steps", "an empty string", "expected int"),
            ("cluster.gpus_per_node=banana", "cluster.gpus_per_node", "'banana'", "expected int"),
            ("grpo.max_num_steps=2.5", "grpo.max_num_steps", "2.5", "expected int"),
            (
                "loss_fn.reference_policy_kl_penalty=high",
                "loss_fn.reference_policy_kl_penalty",
                "'high'",
                "expected float",
            ),
        ],
        ids=["abc", "empty", "banana", "fractional_int", "str_for_float"],
    )
    def test_wrong_type_is_an_error_naming_key_value_and_type(
        self, config_file: Path, override: str, key: str, shown: str, expected: str
    ) -> None:
        finding = _only(_findings(config_file, override), "bad-type")
        assert finding.severity is Severity.ERROR
        assert finding.key == key
        assert f"{key} = {shown}" in finding.message
        assert expected in finding.message
        assert "declared in nemo_rl/" in finding.message

    @pytest.mark.parametrize(
        "override",
        [
            "grpo.max_num_steps='12'",  # pydantic lax mode coerces, as MasterConfig(**config) does
            "loss_fn.reference_policy_kl_penalty=1",  # an int is a valid float
            "grpo.max_num_steps=${oc.env:RLGATE_TEST_UNSET_STEPS}",  # not resolvable here
        ],
        ids=["numeric_string", "int_for_float", "env_interpolation"],
    )
    def test_values_nemo_rl_accepts_pass(self, config_file: Path, override: str) -> None:
        assert _findings(config_file, override) == []

    def test_literal_is_checked_against_its_values(self, tmp_path: Path) -> None:
        path = tmp_path / "g.yaml"
        path.write_text(
            textwrap.dedent(
                """\
                policy:
                  generation:
                    vllm_kwargs:
                      mamba_cache_mode: alll
                """
            ),
            encoding="utf-8",
        )
        finding = _only(_findings(path), "bad-type")
        assert finding.key == "policy.generation.vllm_kwargs.mamba_cache_mode"
        assert "expected one of 'align', 'all', 'none'" in finding.message
        assert "vllm 0.25.1" in finding.message

    def test_wrong_type_for_a_section_reports_once(self, config_file: Path) -> None:
        findings = _findings(config_file, "cluster=3")
        assert [(f.code, f.key) for f in findings] == [("bad-type", "cluster")]
        assert "expected dict" in findings[0].message


class TestRanges:
    @pytest.mark.parametrize(
        ("override", "where"),
        [
            ("cluster.num_nodes=-1", "grpo.py:setup asserts policy_nodes > 0"),
            ("cluster.num_nodes=0", "grpo.py:setup asserts policy_nodes > 0"),
            ("cluster.gpus_per_node=0", "RayVirtualCluster.__init__ asserts num_gpus_per_node > 0"),
            ("grpo.val_num_generations_per_prompt=0", "grpo.py:setup asserts"),
        ],
        ids=["negative_nodes", "zero_nodes", "zero_gpus", "zero_val_generations"],
    )
    def test_count_nemo_rl_asserts_positive_is_an_error_citing_the_assert(
        self, config_file: Path, override: str, where: str
    ) -> None:
        finding = _only(_findings(config_file, override), "out-of-range")
        assert finding.severity is Severity.ERROR
        assert "must be >= 1" in finding.message
        assert where in finding.message

    def test_pydantic_bound_in_nemo_rl_class_is_enforced(self, tmp_path: Path) -> None:
        path = tmp_path / "g.yaml"
        path.write_text(
            "policy:\n  generation:\n    refit_cfg:\n      sparse:\n        tuning:\n"
            "          zmq_retries: -1\n",
            encoding="utf-8",
        )
        finding = _only(_findings(path), "out-of-range")
        assert finding.key == "policy.generation.refit_cfg.sparse.tuning.zmq_retries"
        assert "must be >= 0" in finding.message
        assert "pydantic constraint (>= 0) in nemo_rl/models/generation/vllm/config.py" in (
            finding.message
        )


class TestNull:
    def test_null_for_a_key_master_config_validates_is_a_placeholder_warning(
        self, config_file: Path
    ) -> None:
        finding = _only(_findings(config_file, "policy.model_name=null"), "null-value")
        assert finding.severity is Severity.WARNING
        assert "MasterConfig(**config) rejects null at startup" in finding.message
        assert "policy.model_name=..." in finding.message

    def test_null_for_a_backend_specific_key_is_accepted(self, config_file: Path) -> None:
        # vllm_cfg.reasoning_parser_plugin is declared `str` on VllmSpecificArgs, which pydantic
        # does not validate (PolicyConfig types generation as GenerationConfig); NeMo RL reads
        # it with .get() and skips None. The base config sets it to null.
        assert not [f for f in _findings(config_file) if f.code in ("null-value", "bad-type")]
