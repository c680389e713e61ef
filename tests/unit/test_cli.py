import json
import textwrap
from pathlib import Path

import pytest

from rlgate.cli.app import main, split_configs_and_overrides
from rlgate.core.errors import worst_exit_code


class TestVersionsCommand:
    def test_versions_prints_the_tested_stack(self, capsys):
        assert main(["versions"]) == 0
        out = capsys.readouterr().out
        for name in ("python=", "vllm=", "transformers=", "nemo-gym="):
            assert name in out


# --- rlgate recipe check (config-level: no tokenizer, no vLLM) ------------------------


# A non-Gym GRPO config: every check that applies runs without a tokenizer.
MINI = """\
grpo:
  num_prompts_per_step: 8
  num_generations_per_prompt: 4
  max_num_steps: 10
loss_fn:
  force_on_policy_ratio: false
policy:
  model_name: Qwen/Qwen2.5-1.5B
  train_global_batch_size: 16
  train_micro_batch_size: 2
  max_total_sequence_length: 1024
  dtensor_cfg:
    enabled: true
  generation:
    backend: vllm
    max_new_tokens: 512
    temperature: 1.0
    top_p: 1.0
    top_k: null
    val_temperature: 1.0
    val_top_p: 1.0
    val_top_k: null
    stop_token_ids: null
    stop_strings: null
    vllm_cfg: {async_engine: false}
    colocated:
      enabled: true
cluster:
  num_nodes: 1
  gpus_per_node: 8
"""


def _write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return str(path)


def _check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["recipe", "check", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


class TestRecipeCheckArguments:
    def test_overrides_are_hydra_shaped_arguments(self):
        args = ["a.yaml", "x=1", "~y", "+z=2", "b.yaml", "++w=3", "c.yml"]
        assert split_configs_and_overrides(args) == (
            ["a.yaml", "b.yaml", "c.yml"],
            ["x=1", "~y", "+z=2", "++w=3"],
        )

    @pytest.mark.parametrize(
        ("codes", "worst"),
        [([0, 0], 0), ([0, 3], 3), ([3, 1], 1), ([1, 2, 3], 2), ([2, 70, 0], 70)],
    )
    def test_worst_exit_code_order(self, codes, worst):
        assert worst_exit_code(codes) == worst

    def test_only_overrides_is_a_usage_error(self, capsys):
        code, out, err = _check(capsys, "a.b=1")
        assert code == 2 and "no config given" in err and out == ""


class TestRecipeCheckManyConfigs:
    def test_one_block_per_config_summary_and_json_list(self, tmp_path, capsys):
        a = _write(tmp_path / "a.yaml", MINI)
        b = _write(tmp_path / "sub/b.yaml", "defaults: ../a.yaml\ngrpo: {max_num_steps: 3}\n")
        dist = _write(tmp_path / "distillation_x.yaml", "distillation: {max_num_steps: 1}\n")
        out_json = tmp_path / "out.json"
        code, out, err = _check(capsys, a, b, dist, "--json", str(out_json))
        assert code == 2, out + err  # the non-GRPO config is bad input: the worst here
        assert [line for line in out.splitlines() if line.startswith("== ")] == [
            f"== {a}",
            f"== {b}",
            f"== {dist}",
        ]
        assert "a: compatible (0 errors, 0 warnings)" in out
        assert "b: compatible (0 errors, 0 warnings)" in out
        assert out.splitlines()[-1] == (
            "recipe check: 3 configs: 2 compatible, 0 incompatible, 0 incomplete, "
            "1 not checked; exit 2"
        )
        assert err.count("not a GRPO config (has `distillation:`)") == 1
        doc = json.loads(out_json.read_text())
        assert doc["schema_version"] == 2 and doc["exit_code"] == 2
        assert doc["summary"] == {
            "configs": 3,
            "compatible": 2,
            "incompatible": 0,
            "incomplete": 0,
            "not_checked": 1,
        }
        assert [r["status"] for r in doc["reports"]] == ["compatible", "compatible", "invalid"]
        assert "not a GRPO config" in doc["reports"][2]["error"]
        checks = {c["check"]: c["status"] for c in doc["reports"][0]["checks"]}
        assert checks["batch-size"] == "ran" and checks["parsers"] == "not-applicable"

    def test_overrides_apply_to_every_config_wherever_they_stand(self, tmp_path, capsys):
        a = _write(tmp_path / "a.yaml", MINI)
        b = _write(tmp_path / "b.yaml", MINI)
        # 8 x 4 = 32 samples per step do not split into global batches of 12
        code, out, _ = _check(
            capsys, a, "--json", str(tmp_path / "o.json"), b, "policy.train_global_batch_size=12"
        )
        assert code == 1
        assert out.count("ERROR batch-size-multiple") == 2
        assert "2 incompatible" in out.splitlines()[-1]

    def test_not_a_grpo_config_without_any_algorithm_section(self, tmp_path, capsys):
        prefetch = _write(tmp_path / "prefetch_envs.yaml", "env: {nemo_gym: {config_paths: []}}\n")
        code, out, err = _check(capsys, prefetch)
        assert code == 2 and "not a GRPO config (no `grpo:` section)" in err and out == ""


# Serves chat through vLLM (NeMo Gym on), so the tokenizer-dependent checks apply.
GYM_MINI = (
    MINI.replace("vllm_cfg: {async_engine: false}", "vllm_cfg: {async_engine: true}")
    + "env:\n  should_use_nemo_gym: true\n  nemo_gym: {}\n"
)


class TestRecipeCheckOffline:
    def test_absent_tokenizer_skips_served_checks_with_one_line_and_exit_3(
        self, tmp_path, capsys, monkeypatch
    ):
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        cfg = _write(tmp_path / "gym.yaml", GYM_MINI)
        absent = "policy.model_name=rlgate-test/absent-model"
        out_json = tmp_path / "o.json"
        code, out, _ = _check(
            capsys, cfg, absent, "--tokenizers", str(tmp_path), "--json", str(out_json)
        )
        assert code == 3, out
        (line,) = [x for x in out.splitlines() if x.startswith("NOT RUN")]
        served = "data, thinking, parsers, tool-call-in-reasoning, turn-budget, contiguity"
        assert line.startswith(f"NOT RUN {served}: ")
        assert "tokenizer 'rlgate-test/absent-model' not available" in line
        assert "put its files under --tokenizers DIR as absent-model/" in line
        assert "gym: INCOMPLETE (0 errors, 0 warnings, 6 checks not run)" in out
        (report,) = json.loads(out_json.read_text())["reports"]
        assert report["status"] == "incomplete" and report["exit_code"] == 3
        checks = {c["check"]: c for c in report["checks"]}
        assert checks["batch-size"] == {"check": "batch-size", "status": "ran"}
        assert checks["contiguity"]["status"] == "skipped"
        assert "absent-model" in checks["contiguity"]["reason"]

    def test_placeholder_path_and_unset_model_say_what_to_do(self, tmp_path, capsys):
        cfg = _write(tmp_path / "gym.yaml", GYM_MINI)
        code, out, _ = _check(capsys, cfg, "policy.model_name=/path/to/model")
        assert code == 3 and "tokenizer '/path/to/model' not available (no such directory" in out
        code, out, _ = _check(capsys, cfg, "policy.model_name=null")
        assert code == 3 and "override policy.model_name=<hub id> to check it" in out

    def test_an_error_wins_over_skipped_checks_and_the_worst_config_decides(
        self, tmp_path, capsys, monkeypatch
    ):
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        gym = _write(tmp_path / "gym.yaml", GYM_MINI)
        plain = _write(tmp_path / "plain.yaml", MINI)
        absent = "policy.model_name=rlgate-test/absent-model"
        code, out, _ = _check(capsys, gym, plain, absent, "--tokenizers", str(tmp_path))
        assert code == 3 and "1 compatible, 0 incompatible, 1 incomplete" in out
        bad = "grpo.num_prompts_per_step=0"
        code, out, _ = _check(capsys, gym, plain, absent, bad, "--tokenizers", str(tmp_path))
        assert code == 1 and "0 compatible, 2 incompatible, 0 incomplete" in out


class TestRecipeCheckHostileInputs:
    """Issue 10: every one is exit 2 (or a named finding), one message, no traceback."""

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("defaults: 5\n", "`defaults:` must be a file path or a list of file paths, got 5"),
            ("defaults: [5]\n", "`defaults:` must be a file path or a list of file paths"),
            ("defaults: self.yaml\n", "circular defaults chain"),
            ("defaults: adir\n", "defaults entry 'adir' is a directory"),
            ("a: 1\na: 2\n", "duplicate key"),
        ],
        ids=["defaults_int", "defaults_int_list", "defaults_cycle", "defaults_dir", "dup_key"],
    )
    def test_broken_defaults_and_yaml(self, tmp_path, capsys, text, message):
        (tmp_path / "adir").mkdir()
        cfg = _write(tmp_path / "self.yaml", text)
        code, _, err = _check(capsys, cfg)
        assert code == 2 and message in err and "Traceback" not in err, err

    def test_binary_recipe(self, tmp_path, capsys):
        cfg = tmp_path / "bin.yaml"
        cfg.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
        code, _, err = _check(capsys, str(cfg))
        assert code == 2 and "is not UTF-8 text" in err and "Traceback" not in err

    def test_alias_bomb(self, tmp_path, capsys):
        lines, prev = ['a: &a ["x","x","x","x","x","x","x","x","x"]'], "a"
        for name in "bcdefghi":
            lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
            prev = name
        cfg = _write(tmp_path / "bomb.yaml", "\n".join(lines) + "\n")
        code, _, err = _check(capsys, cfg)
        assert code == 2 and "alias bomb" in err

    def test_json_pointing_at_a_directory_fails_before_checking(self, tmp_path, capsys):
        cfg = _write(tmp_path / "a.yaml", MINI)
        code, out, err = _check(capsys, cfg, "--json", str(tmp_path))
        assert code == 2 and f"--json {tmp_path} is a directory" in err
        assert out == ""  # nothing checked, nothing printed
        assert err.count("rlgate: error:") == 1

    def test_json_pointing_at_an_input_is_refused(self, tmp_path, capsys):
        cfg = _write(tmp_path / "a.yaml", MINI)
        code, _, err = _check(capsys, cfg, "--json", cfg)
        assert code == 2 and f"it is one of the inputs (CONFIG_OR_OVERRIDE: {cfg})" in err
        assert Path(cfg).read_text() == MINI

    def test_interpolation_to_a_missing_key_is_an_error(self, tmp_path, capsys):
        cfg = _write(tmp_path / "a.yaml", MINI)
        code, out, _ = _check(capsys, cfg, "grpo.max_num_steps=${nope}")
        assert code == 1
        assert "ERROR unresolvable-interpolation [grpo.max_num_steps]" in out
        assert "Interpolation key 'nope' not found" in out

    def test_unset_env_interpolation_stays_a_warning(self, tmp_path, capsys, monkeypatch):
        monkeypatch.delenv("RLGATE_TEST_UNSET", raising=False)
        cfg = _write(tmp_path / "a.yaml", MINI)
        code, out, _ = _check(capsys, cfg, "++logger.log_dir=${oc.env:RLGATE_TEST_UNSET}/logs")
        assert code == 0 and "WARNING unresolved-interpolation [logger.log_dir]" in out

    @pytest.mark.parametrize(
        ("override", "key"),
        [
            ("grpo.num_prompts_per_step=-4", "grpo.num_prompts_per_step"),
            ("grpo.num_generations_per_prompt=0", "grpo.num_generations_per_prompt"),
            ("grpo.max_num_steps=-1", "grpo.max_num_steps"),
            ("cluster.gpus_per_node=-8", "cluster.gpus_per_node"),
        ],
    )
    def test_negative_and_zero_counts(self, tmp_path, capsys, override, key):
        code, out, _ = _check(capsys, _write(tmp_path / "a.yaml", MINI), override)
        assert code == 1 and f"ERROR value-range [{key}]" in out

    @pytest.mark.parametrize(
        ("override", "key"),
        [
            ("grpo.max_num_steps=", "grpo.max_num_steps"),
            ("grpo.max_num_steps=abc", "grpo.max_num_steps"),
            ("cluster.gpus_per_node=banana", "cluster.gpus_per_node"),
        ],
        ids=["empty", "abc", "banana"],
    )
    def test_values_of_the_wrong_type(self, tmp_path, capsys, override, key):
        code, out, _ = _check(capsys, _write(tmp_path / "a.yaml", MINI), override)
        errors = [line for line in out.splitlines() if line.startswith("ERROR ")]
        assert code == 1 and any(f"[{key}]" in line for line in errors), out


class TestPreCommitHook:
    """.pre-commit-hooks.yaml, validated with pre-commit's own manifest schema."""

    def test_manifest_is_valid_and_runs_every_changed_config_in_one_call(self):
        from pre_commit.clientlib import load_manifest

        (hook,) = load_manifest(str(Path(__file__).parents[2] / ".pre-commit-hooks.yaml"))
        assert hook["id"] == "rlgate-recipe-check" and hook["entry"] == "rlgate recipe check"
        assert hook["pass_filenames"] is True and hook["require_serial"] is True

    @pytest.mark.parametrize(
        ("path", "selected"),
        [
            ("examples/configs/grpo_math_1B.yaml", True),
            ("examples/configs/recipes/llm/grpo-qwen3-30ba3b-8n8g-megatron.yaml", True),
            ("examples/nemo_gym/grpo_qwen3_30ba3b_thinking_swe1.yaml", True),
            ("examples/nemo_gym/nemotron-3-super/stage2_swe1.yaml", True),
            ("examples/nemo_gym/distillation_qwen3_0_6b.yaml", False),
            ("examples/nemo_gym/prefetch_super_all_envs.yaml", False),
            ("examples/configs/sft.yaml", False),
            ("examples/configs/recipes/llm/dpo-llama3.1-8b-instruct-4n8g-fsdp2tp4.yaml", False),
        ],
    )
    def test_hook_selects_the_published_grpo_configs(self, path, selected):
        import re

        from pre_commit.clientlib import load_manifest

        (hook,) = load_manifest(str(Path(__file__).parents[2] / ".pre-commit-hooks.yaml"))
        chosen = bool(re.search(hook["files"], path)) and not re.search(hook["exclude"], path)
        assert chosen is selected
