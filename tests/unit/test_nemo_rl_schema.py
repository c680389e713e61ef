"""The committed NeMo RL key schema, and the generator that produces it."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SCHEMA_PATH = REPO / "src" / "rlgate" / "data" / "nemo_rl_schema.json"
GENERATOR_PATH = REPO / "tools" / "gen_nemo_rl_schema.py"
TINY_COMMIT = "0123456789abcdef0123456789abcdef01234567"

# nemo-rl.md section 3.2: set in the SWE recipes, read by nothing in nemo_rl/.
NEVER_READ_KEYS = [
    "grpo.invalid_tool_call_strategy",
    "grpo.penalize_invalid_tool_call",
    "grpo.penalize_malformed_thinking",
    "policy.generation.vllm_cfg.enable_thinking",
    "policy.generation.vllm_cfg.enforce_monotonicity",
]
TARGET_YAMLS = [
    "examples/nemo_gym/grpo_qwen3_30ba3b_thinking_swe1.yaml",
    "examples/nemo_gym/grpo_qwen3_30ba3b_thinking_swe2.yaml",
    "examples/configs/grpo_math_1B.yaml",
    "examples/configs/recipes/llm/grpo-qwen3-30ba3b-thinking-swe1-16n8g-megatron-cp2-r3-async-gym.yaml",
    "examples/nemo_gym/nemotron-3-super/stage2_swe1.yaml",
    "examples/nemo_gym/nemotron-3-super/stage2_swe2.yaml",
    "examples/swe_bench/grpo_qwen3_30b_async_swe_trtllm.yaml",
]
# Keys the target async Gym/SWE recipes rely on.
CORE_KEYS = [
    "grpo.async_grpo.enabled",
    "grpo.async_grpo.max_trajectory_age_steps",
    "grpo.async_grpo.in_flight_weight_updates",
    "grpo.max_val_samples",
    "loss_fn.use_importance_sampling_correction",
    "policy.generation.colocated.enabled",
    "policy.generation.colocated.resources.num_nodes",
    "policy.generation.vllm_cfg.max_model_len",
    "policy.generation.vllm_cfg.http_server_serving_chat_kwargs",
    "policy.generation.top_k",
    "policy.generation.stop_strings",
    "policy.max_total_sequence_length",
    "policy.tokenizer.name",
    "policy.tokenizer.chat_template",
    "cluster.num_nodes",
    "cluster.gpus_per_node",
    "logger.log_dir",
    "checkpointing.enabled",
]


def _ids(keys: list[str]) -> list[str]:
    return [key.replace(".", "_") for key in keys]


def _under(path: str, prefixes: list[str]) -> bool:
    """Mirror the schema's prefix rule: equal or below, ``*`` = one component."""
    parts = path.replace("[]", "").split(".")
    for prefix in prefixes:
        pat = prefix.replace("[]", "").split(".")
        if len(parts) >= len(pat) and all(p in ("*", q) for p, q in zip(pat, parts, strict=False)):
            return True
    return False


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_nemo_rl_schema", GENERATOR_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class TestCommittedSchema:
    def test_schema_records_version_and_full_commit(self, schema: dict[str, Any]) -> None:
        assert schema["schema_version"] == 1
        assert schema["source"]["repo"] == "NVIDIA-NeMo/RL"
        assert re.fullmatch(r"[0-9a-f]{40}", schema["source"]["commit"])
        assert schema["source"]["generator"] == "tools/gen_nemo_rl_schema.py"

    def test_schema_file_is_sorted_and_one_key_per_line(self, schema: dict[str, Any]) -> None:
        assert list(schema["keys"]) == sorted(schema["keys"])
        assert schema["open"] == sorted(schema["open"])
        text = SCHEMA_PATH.read_text(encoding="utf-8")
        assert sum(line.startswith('  "') for line in text.splitlines()) >= len(schema["keys"])

    @pytest.mark.parametrize("key", NEVER_READ_KEYS, ids=_ids(NEVER_READ_KEYS))
    def test_never_read_key_is_flagged_with_evidence(
        self, schema: dict[str, Any], key: str
    ) -> None:
        entry = schema["keys"][key]
        assert entry["read"] is False
        assert entry["declared"] is False
        assert key.rpartition(".")[2] in entry["evidence"]

    def test_every_unread_key_has_evidence(self, schema: dict[str, Any]) -> None:
        missing = [k for k, v in schema["keys"].items() if not v["read"] and not v.get("evidence")]
        assert missing == []

    @pytest.mark.parametrize("key", CORE_KEYS, ids=_ids(CORE_KEYS))
    def test_core_recipe_key_is_declared_and_read(self, schema: dict[str, Any], key: str) -> None:
        entry = schema["keys"][key]
        assert entry["declared"] is True
        assert entry["read"] is True
        assert entry["where"].startswith("nemo_rl/")

    @pytest.mark.parametrize(
        "prefix",
        [
            "policy.generation.vllm_cfg.http_server_serving_chat_kwargs",
            "policy.hf_config_overrides",
            "env.*",
        ],
        ids=["serving_chat_kwargs", "hf_config_overrides", "env"],
    )
    def test_free_form_section_is_open_with_a_reason(
        self, schema: dict[str, Any], prefix: str
    ) -> None:
        assert prefix in schema["open"]
        assert schema["open_why"][prefix]

    def test_every_open_section_has_a_reason(self, schema: dict[str, Any]) -> None:
        assert sorted(schema["open_why"]) == schema["open"]
        assert all(reason.strip() for reason in schema["open_why"].values())

    @pytest.mark.parametrize(
        ("prefix", "library", "cls", "fields"),
        [
            (
                "policy.megatron_cfg.optimizer",
                "megatron-bridge",
                "OptimizerConfig",
                ["lr", "min_lr", "adam_beta2", "use_distributed_optimizer"],
            ),
            (
                "policy.megatron_cfg.scheduler",
                "megatron-bridge",
                "SchedulerConfig",
                ["lr_warmup_iters", "lr_decay_style", "override_opt_param_scheduler"],
            ),
            (
                "policy.generation.vllm_kwargs",
                "vllm",
                "AsyncEngineArgs",
                ["max_num_seqs", "enable_chunked_prefill", "speculative_config"],
            ),
        ],
        ids=["megatron_optimizer", "megatron_scheduler", "vllm_kwargs"],
    )
    def test_kwargs_section_is_closed_by_its_library_fields(
        self, schema: dict[str, Any], prefix: str, library: str, cls: str, fields: list[str]
    ) -> None:
        assert prefix not in schema["open"]
        closed = schema["closed"][prefix]
        assert closed["by"] == "library"
        assert closed["source"].startswith(f"{library} {schema['source']['libraries'][library]}")
        assert closed["source"].endswith(f":{cls}")
        assert closed["consumer"].startswith("nemo_rl/")
        for name in fields:
            assert schema["keys"][f"{prefix}.{name}"]["read"] is True
        assert f"{prefix}.min_Lr" not in schema["keys"]

    def test_libraries_and_their_versions_are_recorded(self, schema: dict[str, Any]) -> None:
        libraries = schema["source"]["libraries"]
        assert set(libraries) == {"megatron-core", "megatron-bridge", "vllm"}
        assert libraries["vllm"] == "0.25.1"  # the version NeMo RL 7ea279a pins
        assert all(re.fullmatch(r"\d+\.\d+\.\d+\S*", v) for v in libraries.values())

    def test_other_closed_sections_fall_back_to_published_keys(
        self, schema: dict[str, Any]
    ) -> None:
        by = {prefix: closed["by"] for prefix, closed in schema["closed"].items()}
        assert by["policy.generation.trtllm_kwargs"] == "examples"
        assert by["policy.generation.sglang_kwargs"] == "examples"
        assert "policy.generation.trtllm_kwargs.kv_cache_config" in schema["keys"]
        assert set(by.values()) == {"library", "examples"}

    @pytest.mark.parametrize(
        ("key", "where"),
        [
            ("policy.generation.ignore_eos", "vllm/vllm_worker.py:_build_sampling_params"),
            ("policy.megatron_cfg.layernorm_epsilon", "megatron/setup.py:setup_model_config"),
            (
                "policy.megatron_cfg.virtual_pipeline_model_parallel_size",
                "megatron/router_replay.py:validate_router_replay_config",
            ),
        ],
        ids=["ignore_eos", "layernorm_epsilon", "virtual_pipeline"],
    )
    def test_key_only_code_reads_is_in_the_schema(
        self, schema: dict[str, Any], key: str, where: str
    ) -> None:
        entry = schema["keys"][key]
        assert entry["read"] is True and entry["via"] == "code"
        assert where in entry["where"]

    def test_vllm_cfg_distributed_executor_backend_is_known_and_unread(
        self, schema: dict[str, Any]
    ) -> None:
        entry = schema["keys"]["policy.generation.vllm_cfg.distributed_executor_backend"]
        assert entry["read"] is False
        assert entry["where"] in schema["source"]["policy_yaml_files"]
        assert "resolve_distributed_executor_backend" in entry["evidence"]

    @pytest.mark.parametrize(
        ("key", "types", "validated"),
        [
            ("grpo.max_num_steps", "int", True),
            ("cluster.gpus_per_node", "int", True),
            ("grpo.async_grpo.enabled", "bool", True),
            ("policy.generation.vllm_cfg.reasoning_parser_plugin", "str", False),
        ],
        ids=["max_num_steps", "gpus_per_node", "async_enabled", "reasoning_parser_plugin"],
    )
    def test_value_types_and_startup_validation_are_recorded(
        self, schema: dict[str, Any], key: str, types: str, validated: bool
    ) -> None:
        entry = schema["keys"][key]
        assert entry["type"] == types
        assert entry.get("validated", False) is validated

    def test_literal_and_bounds_are_recorded(self, schema: dict[str, Any]) -> None:
        keys = schema["keys"]
        assert keys["policy.generation.vllm_cfg.logprobs_mode"]["enum"] == [
            "processed_logprobs",
            "raw_logprobs",
        ]
        assert keys["cluster.num_nodes"]["bounds"]["ge"] == 1
        assert "grpo.py:setup" in keys["cluster.num_nodes"]["bounds"]["why"]
        bounds = keys["policy.generation.refit_cfg.sparse.tuning.zmq_retries"]["bounds"]
        assert bounds["ge"] == 0 and "VllmRefitTuningConfig" in bounds["why"]

    def test_env_nemo_gym_is_gym_and_its_nemo_rl_keys_are_recorded(
        self, schema: dict[str, Any]
    ) -> None:
        assert schema["gym"] == ["env.nemo_gym"]
        for key in ("invalid_tool_call_patterns", "thinking_tags", "is_trajectory_collection"):
            assert schema["keys"][f"env.nemo_gym.{key}"]["read"] is True
        assert schema["keys"]["env.should_use_nemo_gym"]["type"] == "bool"
        assert "env" not in schema["open"]

    def test_overwritten_gym_port_range_is_unread(self, schema: dict[str, Any]) -> None:
        """YAML port ranges under env.nemo_gym are replaced by NeMo RL's defaults."""
        entry = schema["keys"]["env.nemo_gym.port_range_low"]
        assert entry["read"] is False
        assert "_spinup" in entry["evidence"]

    @pytest.mark.parametrize("path", TARGET_YAMLS, ids=[Path(p).stem for p in TARGET_YAMLS])
    def test_target_recipe_yaml_was_scanned(self, schema: dict[str, Any], path: str) -> None:
        assert path in schema["source"]["yaml_files"]

    def test_undeclared_keys_come_from_scanned_yamls_or_code(self, schema: dict[str, Any]) -> None:
        files = schema["source"]["yaml_files"]
        assert any(f.startswith("examples/configs/recipes/llm/grpo-qwen3.5-") for f in files)
        assert not any("distillation" in f or f.endswith("/sft.yaml") for f in files)
        shared = schema["source"]["policy_yaml_files"]
        assert "examples/configs/distillation_math.yaml" in shared
        undeclared = [(k, v) for k, v in schema["keys"].items() if not v["declared"]]
        from_yaml = {v["where"] for _, v in undeclared if not v.get("via", "").startswith("code")}
        assert from_yaml <= set(files) | set(shared)
        shared_only = {k for k, v in undeclared if v["where"] in set(shared) - set(files)}
        assert all(k.startswith("policy.") for k in shared_only)
        from_code = [v["where"] for _, v in undeclared if v.get("via", "").startswith("code")]
        assert from_code and all(w.startswith("nemo_rl/") for w in from_code)

    def test_undeclared_keys_do_not_hide_under_open_prefixes(self, schema: dict[str, Any]) -> None:
        prefixes = schema["open"] + schema["gym"]
        hidden = [
            k
            for k, v in schema["keys"].items()
            if not v["declared"] and _under(k.rpartition(".")[0], prefixes)
        ]
        assert hidden == []


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def tiny_nemo_rl(tmp_path: Path) -> Path:
    """A NeMo-RL-shaped tree: two schema modules, one example YAML, one reader script."""
    _write(tmp_path, "nemo_rl/__init__.py", "")
    _write(tmp_path, "nemo_rl/algorithms/__init__.py", "")
    _write(
        tmp_path,
        "nemo_rl/models/policy.py",
        "from typing import Any, NotRequired, TypedDict\n\n\n"
        "class TokenizerConfig(TypedDict):\n    name: str\n\n\n"
        "class OptimConfig(TypedDict):\n    name: str\n\n\n"
        "class PolicyConfig(TypedDict):\n"
        "    model_name: str\n"
        "    tokenizer: TokenizerConfig\n"
        "    optimizer: NotRequired[OptimConfig | None]\n"
        "    hf_config_overrides: NotRequired[dict[str, Any]]\n\n\n"
        "def build(cfg: PolicyConfig):\n"
        "    return Optim(**cfg['optimizer'])\n",
    )
    _write(
        tmp_path,
        "nemo_rl/algorithms/grpo.py",
        "from typing import Any, Optional\n\n"
        "from pydantic import BaseModel\n\n"
        "from ..models.policy import PolicyConfig\n\n\n"
        "class AsyncConfig(BaseModel, extra='allow'):\n    enabled: bool = False\n\n\n"
        "class GRPOConfig(BaseModel, extra='allow'):\n"
        "    num_prompts_per_step: int = 8\n"
        "    never_used: Optional[float] = None\n"
        "    async_grpo: AsyncConfig | None = None\n\n\n"
        "class MasterConfig(BaseModel, extra='allow'):\n"
        "    policy: PolicyConfig\n"
        "    grpo: GRPOConfig\n"
        "    env: dict[str, Any]\n\n\n"
        "def train(master_config: MasterConfig):\n"
        "    policy = master_config.policy\n"
        "    tok = policy['tokenizer']['name'] + policy['model_name']\n"
        "    grpo = master_config.grpo\n"
        "    return grpo.async_grpo.enabled, grpo.num_prompts_per_step\n",
    )
    _write(
        tmp_path,
        "examples/run_tiny.py",
        "def main(config):\n    return config['grpo']['extra_used']\n",
    )
    _write(
        tmp_path,
        "examples/configs/grpo_tiny.yaml",
        "grpo:\n"
        "  num_prompts_per_step: 4\n"
        "  penalize_typo: true\n"
        "  extra_used: 3\n"
        "  async_grpo:\n    enabled: true\n"
        "policy:\n"
        "  model_name: m\n"
        "  tokenizer: {name: m}\n"
        "  hf_config_overrides: {rope_theta: 1}\n"
        "env:\n"
        "  should_use_nemo_gym: true\n"
        "  nemo_gym: {config_paths: [a.yaml]}\n"
        "  math: {num_workers: 2}\n",
    )
    _write(tmp_path, "examples/configs/sft.yaml", "sft:\n  max_num_epochs: 1\n")
    return tmp_path


class TestGenerator:
    def test_build_schema_classifies_declared_undeclared_and_open(
        self, generator: ModuleType, tiny_nemo_rl: Path
    ) -> None:
        schema = generator.build_schema(tiny_nemo_rl, TINY_COMMIT)
        keys = schema["keys"]
        assert keys["grpo.async_grpo.enabled"] == {
            "type": "bool",
            "declared": True,
            "read": True,
            "validated": True,
            "where": "nemo_rl/algorithms/grpo.py:AsyncConfig",
        }
        assert keys["policy.tokenizer.name"]["where"] == "nemo_rl/models/policy.py:TokenizerConfig"
        assert keys["grpo.never_used"]["type"] == "float|null"
        assert keys["grpo.penalize_typo"]["declared"] is False
        assert keys["grpo.penalize_typo"]["where"] == "examples/configs/grpo_tiny.yaml"
        assert "policy.hf_config_overrides" in schema["open"]
        assert "policy.hf_config_overrides.rope_theta" not in keys
        assert schema["source"]["yaml_files"] == ["examples/configs/grpo_tiny.yaml"]
        assert not any(key.startswith("sft") for key in keys)

    def test_build_schema_marks_unread_keys_with_evidence(
        self, generator: ModuleType, tiny_nemo_rl: Path
    ) -> None:
        keys = generator.build_schema(tiny_nemo_rl, TINY_COMMIT)["keys"]
        assert keys["grpo.extra_used"]["read"] is True
        for key in ("grpo.penalize_typo", "grpo.never_used"):
            assert keys[key]["read"] is False
            assert key.rpartition(".")[2] in keys[key]["evidence"]

    def test_build_schema_closes_kwargs_splats_and_opens_other_envs(
        self, generator: ModuleType, tiny_nemo_rl: Path
    ) -> None:
        schema = generator.build_schema(tiny_nemo_rl, TINY_COMMIT)
        # Optim(**cfg["optimizer"]) with no library to read: closed by the published keys.
        assert "policy.optimizer" not in schema["open"]
        assert schema["closed"]["policy.optimizer"]["by"] == "examples"
        assert "env.*" in schema["open"]
        assert schema["open_why"]["env.*"].startswith("environment configs")
        assert schema["gym"] == ["env.nemo_gym"]
        assert "env.math.num_workers" not in schema["keys"]
        assert "env.nemo_gym.config_paths" not in schema["keys"]
        assert schema["keys"]["env.should_use_nemo_gym"]["declared"] is True

    def test_main_writes_deterministic_json(
        self, generator: ModuleType, tiny_nemo_rl: Path, tmp_path: Path
    ) -> None:
        out_a, out_b = tmp_path / "a.json", tmp_path / "b.json"
        for out in (out_a, out_b):
            argv = ["--nemo-rl", str(tiny_nemo_rl), "--out", str(out), "--commit", TINY_COMMIT]
            assert generator.main(argv) == 0
        assert out_a.read_bytes() == out_b.read_bytes()
        assert json.loads(out_a.read_text(encoding="utf-8"))["source"]["commit"] == TINY_COMMIT

    def test_main_rejects_missing_checkout_and_missing_commit(
        self, generator: ModuleType, tiny_nemo_rl: Path, tmp_path: Path
    ) -> None:
        out = str(tmp_path / "s.json")
        assert generator.main(["--nemo-rl", str(tmp_path / "nope"), "--out", out]) == 2
        assert generator.main(["--nemo-rl", str(tiny_nemo_rl), "--out", out]) == 2
