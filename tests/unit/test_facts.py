"""rlgate.recipe.facts: the config facts read once, typed, in load_recipe; every consumer uses them.

A fact of the wrong type is one RecipeError (exit 2) naming key and value for every command
but ``recipe check``, which loads leniently and reports the value as a finding (exit 1).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from rlgate.bench.rollout import cluster_shape
from rlgate.checks.plan import load_plan
from rlgate.checks.registry import load_recipe
from rlgate.cli.app import main
from rlgate.core.errors import RecipeError
from rlgate.launch.budget import evaluate_budget
from rlgate.launch.manifest import Backend
from rlgate.launch.plan import plan_launch
from rlgate.recipe.facts import ClusterFacts, RunFacts, read_facts
from rlgate.recipe.load import recipe_files
from rlgate.report.story import load_recipe_facts
from rlgate.serving.gym import gym_servers
from rlgate.serving.templates import tokenizer_model_id

from .helpers.launch_fixtures import STANDIN, TARGET, local_site

ROOT = Path(__file__).parents[2]
NIGHTLY = ROOT / "ci" / "nightly.yaml"

BASE = """\
grpo:
  max_num_steps: 10
  num_prompts_per_step: 4
  num_generations_per_prompt: 8
  async_grpo: {enabled: true, in_flight_weight_updates: true, max_trajectory_age_steps: 1}
cluster: {num_nodes: 2, gpus_per_node: 8}
checkpointing: {enabled: true}
policy:
  model_name: Qwen/Qwen3-0.6B
  max_total_sequence_length: 4096
  generation:
    backend: vllm
    colocated: {enabled: false, resources: {num_nodes: 1, gpus_per_node: 8}}
    vllm_cfg:
      max_model_len: 8192
      tensor_parallel_size: 2
      http_server_serving_chat_kwargs: {tool_parser: hermes}
env:
  should_use_nemo_gym: true
  nemo_gym:
    swe_agents_train: {responses_api_agents: {swe_agents: {agent_max_turns: 50}}}
"""


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "grpo.yaml"
    path.write_text(BASE, encoding="utf-8")
    return path


GYM_TURNS = "env.nemo_gym.swe_agents_train.responses_api_agents.swe_agents.agent_max_turns"

# (override, key, value as the message shows it, what it must say)
WRONG = [
    ("cluster.num_nodes=two", "cluster.num_nodes", "'two'", "is not a positive integer"),
    ("cluster.num_nodes=0", "cluster.num_nodes", "0", "is not a positive integer"),
    ("cluster.gpus_per_node=banana", "cluster.gpus_per_node", "'banana'", "positive integer"),
    ("cluster.gpus_per_node=true", "cluster.gpus_per_node", "True", "is not a positive integer"),
    ("grpo.max_num_steps=abc", "grpo.max_num_steps", "'abc'", "is not a positive step count"),
    ("grpo.max_num_steps=2.5", "grpo.max_num_steps", "2.5", "is not a positive step count"),
    ("grpo.max_num_steps=", "grpo.max_num_steps", "an empty string", "positive step count"),
    ("grpo.num_prompts_per_step=-4", "grpo.num_prompts_per_step", "-4", "positive integer"),
    ("grpo.num_generations_per_prompt=x", "grpo.num_generations_per_prompt", "'x'", "integer"),
    ("grpo.async_grpo.enabled=maybe", "grpo.async_grpo.enabled", "'maybe'", "not a boolean"),
    (
        "policy.max_total_sequence_length=long",
        "policy.max_total_sequence_length",
        "'long'",
        "is not a positive integer",
    ),
    (
        "policy.generation.vllm_cfg.max_model_len=[1]",
        "policy.generation.vllm_cfg.max_model_len",
        "[1]",
        "is not a positive integer",
    ),
    ("policy.model_name=123", "policy.model_name", "123", "is not a string"),
    (
        "policy.generation.vllm_cfg.http_server_serving_chat_kwargs.tool_parser=[a]",
        "policy.generation.vllm_cfg.http_server_serving_chat_kwargs.tool_parser",
        "['a']",
        "is not a string",
    ),
    ("checkpointing.enabled=sometimes", "checkpointing.enabled", "'sometimes'", "boolean"),
    ("env.should_use_nemo_gym=7", "env.should_use_nemo_gym", "7", "is not a boolean"),
    (f"{GYM_TURNS}=many", GYM_TURNS, "'many'", "is not a positive integer"),
    ("cluster=3", "cluster", "3", "is not a mapping"),
    ("policy.generation=gen", "policy.generation", "'gen'", "is not a mapping"),
]
WRONG_IDS = [w[0].split("=")[0].rsplit(".", 1)[-1] + "=" + w[0].split("=")[1] for w in WRONG]


class TestStrictAtLoad:
    @pytest.mark.parametrize(("override", "key", "shown", "says"), WRONG, ids=WRONG_IDS)
    def test_an_invalid_fact_is_one_error_naming_key_and_value(
        self, config_file: Path, override: str, key: str, shown: str, says: str
    ) -> None:
        with pytest.raises(RecipeError) as info:
            load_recipe(config_file, [override])
        message = info.value.message
        assert message.startswith(f"{config_file}: {key} = {shown} is not "), message
        assert says in message
        assert "\n" not in message  # one problem, one line
        assert "rlgate recipe check" in str(info.value.hint)

    def test_the_declaring_nemo_rl_class_is_named(self, config_file: Path) -> None:
        with pytest.raises(RecipeError, match=r"\(NeMo RL: nemo_rl/distributed/virtual_cluster"):
            load_recipe(config_file, ["cluster.num_nodes=two"])

    def test_every_invalid_fact_is_listed_in_the_one_error(self, config_file: Path) -> None:
        overrides = ["cluster.num_nodes=two", "grpo.max_num_steps=0", f"{GYM_TURNS}=0"]
        with pytest.raises(RecipeError) as info:
            load_recipe(config_file, overrides)
        first, *lines = info.value.message.splitlines()
        assert first == f"{config_file}: 3 invalid values:"
        assert [line.split(" = ")[0].strip() for line in lines] == [
            "cluster.num_nodes",
            "grpo.max_num_steps",
            GYM_TURNS,
        ]

    @pytest.mark.parametrize(
        ("argv_tail", "key"),
        [
            (["cluster.num_nodes=two"], "cluster.num_nodes = 'two'"),
            (["grpo.num_prompts_per_step=abc"], "grpo.num_prompts_per_step = 'abc'"),
        ],
        ids=["nodes", "prompts"],
    )
    def test_launch_exits_2_with_one_message(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv_tail: list[str], key: str
    ) -> None:
        site = tmp_path / "site.yaml"
        site.write_text(yaml.safe_dump({"env": local_site(tmp_path).env}), encoding="utf-8")
        argv = ["launch", str(TARGET), *argv_tail, "--backend", "local", "--site", str(site)]
        argv += ["--run-dir", str(tmp_path / "run"), "--dry-run", "--no-check"]
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2 and err.count("rlgate: error:") == 1 and "Traceback" not in err
        assert key in err
        assert not (tmp_path / "run").exists()

    def test_budget_exits_2_naming_the_recipe_value(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        listed = tmp_path / "nightly.yaml"
        doc = yaml.safe_load(NIGHTLY.read_text(encoding="utf-8"))
        doc["root"] = str((NIGHTLY.parent / doc.get("root", ".")).resolve())
        doc["runs"] = doc["runs"][:1]
        doc["runs"][0]["overrides"] = ["cluster.gpus_per_node=eight"]
        listed.write_text(yaml.safe_dump(doc), encoding="utf-8")
        assert main(["budget", str(listed)]) == 2
        err = capsys.readouterr().err
        assert err.count("rlgate: error:") == 1
        assert "cluster.gpus_per_node = 'eight' is not a positive integer" in err


class TestLenientForRecipeCheck:
    @pytest.mark.parametrize(("override", "key", "shown", "says"), WRONG, ids=WRONG_IDS)
    def test_lenient_load_leaves_the_fact_unknown_and_the_config_raw(
        self, config_file: Path, override: str, key: str, shown: str, says: str
    ) -> None:
        recipe = load_recipe(config_file, [override], strict=False)
        strict = load_recipe(config_file)  # the same config without the bad value
        assert recipe.facts != strict.facts
        assert recipe.config != strict.config  # the value is still there for the rules

    def test_recipe_check_reports_the_value_as_a_finding(
        self, config_file: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        code = main(["recipe", "check", str(config_file), "cluster.num_nodes=two", "-q"])
        out = capsys.readouterr().out
        assert code == 1 and "ERROR bad-type [cluster.num_nodes]" in out


class TestValueRules:
    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            (4, 4),
            ("4", 4),  # MasterConfig(**config) is pydantic in lax mode
            (4.0, 4),
            ("${oc.env:NODES}", None),  # unresolved here: unknown, not invalid
            ("???", None),
            (None, None),
        ],
        ids=["int", "numeric_str", "integral_float", "interpolation", "missing", "null"],
    )
    def test_counts_are_read_as_nemo_rl_reads_them(self, value: object, expected: object) -> None:
        facts = read_facts({"cluster": {"num_nodes": value, "gpus_per_node": 8}})
        assert facts.cluster.num_nodes == expected

    def test_absent_and_null_sections_are_empty(self) -> None:
        assert read_facts({}) == RunFacts()
        assert read_facts({"cluster": None, "policy": {"generation": None}}) == RunFacts()

    def test_derived_facts(self, config_file: Path) -> None:
        facts = load_recipe(config_file).facts
        assert facts.cluster.num_gpus == 16
        assert facts.grpo.rollouts_per_step == 32 and facts.grpo.is_async
        assert facts.policy.tokenizer_id == "Qwen/Qwen3-0.6B"
        assert facts.policy.generation.vllm_servers == 4  # 1 node x 8 GPUs / TP 2
        assert facts.token_limit == 4096 and facts.agent_max_turns == 50
        assert facts.env.gym is not None and "swe_agents_train" in facts.env.gym
        assert facts.policy.generation.serving_kwargs.tool_parser == "hermes"

    def test_enable_auto_tools_follows_nemo_rl_defaults(self) -> None:
        def auto(kwargs: dict) -> bool:
            vllm = {"vllm_cfg": {"http_server_serving_chat_kwargs": kwargs}}
            facts = read_facts({"policy": {"generation": vllm}})
            return facts.policy.generation.serving_kwargs.enable_auto_tools

        # NeMo RL: {"enable_auto_tools": True, ...} | kwargs (vllm_worker_async.py)
        assert auto({}) is True and auto({"enable_auto_tools": None}) is False
        assert auto({"enable_auto_tools": "false"}) is False


def _published(root: Path) -> list[Path]:
    patterns = ("examples/configs/**/*.yaml", "examples/nemo_gym/**/*.yaml")
    return sorted({p for pattern in patterns for p in root.glob(pattern) if p.is_file()})


class TestConfigsLoad:
    def test_rlgate_recipes_load_strictly(self) -> None:
        files = recipe_files(ROOT / "recipes")
        assert len(files) >= 5
        for path in files:
            facts = load_recipe(path).facts
            assert facts == load_recipe(path, strict=False).facts, path
            assert facts.cluster.num_gpus and facts.grpo.max_num_steps, path

    @pytest.mark.skipif(
        not os.environ.get("NEMO_RL_DIR"), reason="set NEMO_RL_DIR to a NeMo RL checkout"
    )
    def test_nemo_rl_published_configs_load_strictly(self) -> None:
        """NeMo RL runs these: no fact of any of them (GRPO or not) may be refused."""
        files = _published(Path(os.environ["NEMO_RL_DIR"]))
        assert len(files) > 300, f"expected NeMo RL's published configs, found {len(files)}"
        refused = {}
        for path in files:
            try:
                load_recipe(path)
            except RecipeError as exc:
                refused[str(path)] = exc.message
        assert refused == {}


class TestConsumersAgree:
    """Every command reads the same typed record, so their numbers cannot drift apart."""

    @pytest.mark.parametrize("path", recipe_files(ROOT / "recipes"), ids=lambda p: p.stem)
    def test_run_context_shares_the_recipe_cluster(self, path: Path) -> None:
        recipe = load_recipe(path)
        ctx = recipe.run_context()
        assert ctx.cluster is recipe.facts.cluster  # the same object, not a re-read
        assert ctx.num_gpus == recipe.facts.cluster.num_gpus
        assert ctx.target_step == (
            recipe.gate.convergence.target_step
            if recipe.gate.convergence and recipe.gate.convergence.target_step
            else recipe.facts.grpo.max_num_steps
        )
        story = load_recipe_facts(path)
        assert (story.nodes, story.gpus_per_node) == (
            recipe.facts.cluster.num_nodes,
            recipe.facts.cluster.gpus_per_node,
        )
        assert story.model == recipe.facts.policy.model_name
        assert tokenizer_model_id(recipe.facts) == recipe.facts.policy.tokenizer_id
        assert cluster_shape(recipe).rollouts_per_step == recipe.facts.grpo.rollouts_per_step

    def test_budget_launch_and_perf_tier_count_the_same_gpus(self, tmp_path: Path) -> None:
        budget = evaluate_budget(NIGHTLY)
        assert budget.lines
        for i, line in enumerate(budget.lines):
            recipe = load_recipe(line.recipe, line.overrides)
            plan = plan_launch(
                line.recipe,
                backend=Backend.LOCAL,
                site=local_site(tmp_path),
                overrides=line.overrides,
                steps=line.steps,
                run_dir=tmp_path / f"run{i}",
                entrypoint=STANDIN,
            )
            gate_plan = load_plan(line.recipe, overrides=line.overrides)
            gpus = recipe.facts.cluster.num_gpus
            assert gpus == line.nodes * line.gpus_per_node, line.name
            assert gpus == plan.nodes * plan.gpus_per_node, line.name
            assert gpus == gate_plan.context.num_gpus, line.name
            assert (
                gate_plan.context.cluster
                == recipe.facts.cluster
                == ClusterFacts(num_nodes=plan.nodes, gpus_per_node=plan.gpus_per_node)
            )


class TestGymMerge:
    def test_gym_configs_merge_as_gym_merges_them(self) -> None:
        """OmegaConf.merge, as Gym's global config: a ``???`` override keeps Gym's value."""
        path = "responses_api_models/vllm_model/configs/vllm_model_for_training.yaml"
        (base,) = [
            s for s in gym_servers({"config_paths": [path]}) if s.implementation == "vllm_model"
        ]
        key = next(k for k, v in base.config.items() if isinstance(v, bool))
        instance = base.instance
        overrides = {
            "config_paths": [path],
            instance: {"responses_api_models": {"vllm_model": {key: "???", "extra": "${x}"}}},
        }
        (merged,) = [s for s in gym_servers(overrides) if s.implementation == "vllm_model"]
        assert merged.config[key] == base.config[key]
        assert merged.config["extra"] == "${x}"  # interpolations stay for Gym to resolve
