"""rlgate.checks.recipe_rules's config rules, each against the NeMo RL code it cites (7ea279a).

These run on in-memory configs: no tokenizer, no vLLM. Each rule is tested on both sides
of the condition NeMo RL asserts, and the message must name the file and function.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlgate.checks import recipe_rules
from rlgate.checks.recipe import CONFIG_CHECKS
from rlgate.recipe.findings import Finding, Severity
from rlgate.recipe.load import Recipe, Unresolved

ERROR, WARNING, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO


def _base() -> dict[str, Any]:
    """A sync, colocated, one-node GRPO config (the shape of NeMo RL's grpo_math_1B.yaml)."""
    return {
        "grpo": {
            "num_prompts_per_step": 32,
            "num_generations_per_prompt": 16,
            "max_num_steps": 100,
            "max_num_epochs": 1,
            "val_num_generations_per_prompt": 1,
            "async_grpo": {"enabled": False, "max_trajectory_age_steps": 1},
        },
        "loss_fn": {"force_on_policy_ratio": False, "use_importance_sampling_correction": False},
        "policy": {
            "train_global_batch_size": 512,
            "train_micro_batch_size": 4,
            "max_total_sequence_length": 512,
            "generation": {
                "backend": "vllm",
                "temperature": 1.0,
                "top_p": 1.0,
                "top_k": None,
                "val_temperature": 1.0,
                "val_top_p": 1.0,
                "val_top_k": None,
                "colocated": {
                    "enabled": True,
                    "resources": {"gpus_per_node": None, "num_nodes": None},
                },
                "vllm_cfg": {"async_engine": False, "max_model_len": 512},
            },
        },
        "env": {},
        "cluster": {"num_nodes": 1, "gpus_per_node": 8},
    }


def _recipe(cfg: dict[str, Any], unresolved: tuple[Unresolved, ...] = ()) -> Recipe:
    return Recipe(name="t", path=Path("t.yaml"), config=cfg, gate={}, unresolved=unresolved)


def _set(cfg: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    node = cfg
    *parents, leaf = dotted.split(".")
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[leaf] = value
    return cfg


def _with(**changes: Any) -> Recipe:
    cfg = _base()
    for key, value in changes.items():
        _set(cfg, key.replace("__", "."), value)
    return _recipe(cfg)


def _codes(findings: list[Finding], severity: Severity = ERROR) -> set[str]:
    return {f.code for f in findings if f.severity is severity}


def _one(findings: list[Finding], code: str) -> Finding:
    matches = [f for f in findings if f.code == code]
    assert len(matches) == 1, findings
    return matches[0]


class TestBatchSize:
    """grpo.py: equality only under force_on_policy_ratio; otherwise a multiple."""

    def test_on_policy_ratio_requires_equality(self):
        findings = recipe_rules.check_batch(
            _with(loss_fn__force_on_policy_ratio=True, policy__train_global_batch_size=128)
        )
        f = _one(findings, "batch-size-on-policy")
        assert f.severity is ERROR and "nemo_rl/algorithms/grpo.py::setup" in f.message
        assert "32 x 16 = 512" in f.message and "128" in f.message

    def test_on_policy_ratio_with_equal_sizes_passes(self):
        findings = recipe_rules.check_batch(
            _with(loss_fn__force_on_policy_ratio=True, policy__train_global_batch_size=512)
        )
        assert findings == []

    def test_smaller_global_batch_is_several_optimizer_steps_not_an_error(self):
        # NeMo RL's grpo_math_8B.yaml: 64 x 32 prompts x generations in global batches of 512.
        findings = recipe_rules.check_batch(_with(policy__train_global_batch_size=128))
        assert _codes(findings) == set()
        info = _one(findings, "batch-size")
        assert info.severity is INFO and "4 optimizer steps per GRPO step" in info.message

    def test_global_batch_that_does_not_divide_the_step_is_an_error(self):
        findings = recipe_rules.check_batch(_with(policy__train_global_batch_size=48))
        f = _one(findings, "batch-size-multiple")
        assert f.severity is ERROR
        assert "BatchedDataDict.shard_by_batch_size" in f.message
        assert "not a multiple of batch_size (48)" in f.message

    def test_global_batch_larger_than_the_step_is_an_error(self):
        findings = recipe_rules.check_batch(_with(policy__train_global_batch_size=1024))
        assert _codes(findings) == {"batch-size-multiple"}


class TestTopology:
    """grpo.py::setup's node and GPU split."""

    def _noncolocated(self, nodes: int, gen_nodes: Any, gen_gpn: Any, gpn: int = 8) -> Recipe:
        return _with(
            cluster__num_nodes=nodes,
            cluster__gpus_per_node=gpn,
            policy__generation__colocated={
                "enabled": False,
                "resources": {"num_nodes": gen_nodes, "gpus_per_node": gen_gpn},
            },
        )

    def test_valid_splits_pass(self):
        assert recipe_rules.check_topology(self._noncolocated(4, 2, 8)) == []
        assert recipe_rules.check_topology(self._noncolocated(1, None, 4)) == []
        assert recipe_rules.check_topology(_with()) == []

    @pytest.mark.parametrize(
        ("nodes", "gen_nodes", "gen_gpn", "code"),
        [
            (4, 4, 8, "topology-generation-nodes"),  # no training node left
            (4, None, 8, "topology-generation-nodes"),
            (4, 2, 4, "topology-gpus-per-node"),
            (1, 2, 4, "topology-single-node"),
            (1, None, 8, "topology-train-gpus"),  # all 8 GPUs of the one node generate
            (1, None, None, "topology-generation-gpus"),
        ],
    )
    def test_each_assert_of_setup(self, nodes, gen_nodes, gen_gpn, code):
        findings = recipe_rules.check_topology(self._noncolocated(nodes, gen_nodes, gen_gpn))
        assert code in _codes(findings), findings
        assert all("grpo.py::setup" in f.message for f in findings)

    def test_reward_model_nodes_count_against_the_policy(self):
        recipe = self._noncolocated(3, 1, 8)
        recipe.config["data"] = {"train": {"env_name": "reward_model"}}
        recipe.config["env"]["reward_model"] = {"resources": {"num_nodes": 2, "gpus_per_node": 8}}
        # 3 nodes - 2 reward-model nodes = 1 policy node: the single-node rules apply.
        assert "topology-single-node" not in _codes(recipe_rules.check_topology(recipe))
        assert "topology-train-gpus" in _codes(recipe_rules.check_topology(recipe))


class TestAsyncAndGym:
    def _gym_async(self, **changes: Any) -> Recipe:
        recipe = _with(
            grpo__async_grpo__enabled=True,
            loss_fn__use_importance_sampling_correction=True,
            env__should_use_nemo_gym=True,
            policy__generation__colocated__enabled=False,
        )
        for key, value in changes.items():
            _set(recipe.config, key.replace("__", "."), value)
        return recipe

    def test_valid_async_gym_config_passes(self):
        assert _codes(recipe_rules.check_async(self._gym_async())) == set()

    def test_async_needs_importance_sampling_default_is_false(self):
        recipe = self._gym_async()
        del recipe.config["loss_fn"]["use_importance_sampling_correction"]
        f = _one(recipe_rules.check_async(recipe), "async-importance-sampling")
        assert "grpo.py::async_grpo_train" in f.message

    def test_async_engine_is_forced_on_the_gym_path_only(self):
        assert "async-engine" not in _codes(recipe_rules.check_async(self._gym_async()))
        recipe = self._gym_async(env__should_use_nemo_gym=False)
        f = _one(recipe_rules.check_async(recipe), "async-engine")
        assert "should_use_async_rollouts" in f.message

    def test_dynamo_in_flight_updates_refused_in_setup_even_when_sync(self):
        recipe = _with(
            policy__generation__backend="dynamo", grpo__async_grpo__in_flight_weight_updates=True
        )
        f = _one(recipe_rules.check_async(recipe), "dynamo-inflight")
        assert "grpo.py::setup raises ValueError" in f.message

    @pytest.mark.parametrize(
        ("top_k", "error"), [(None, False), (0, False), (20, True), (-1, True)]
    )
    def test_gym_top_k_follows_the_rollout_assert(self, top_k, error):
        findings = recipe_rules.check_async(self._gym_async(policy__generation__top_k=top_k))
        assert ("gym-top-k" in _codes(findings)) is error

    @pytest.mark.parametrize(("val_top_k", "error"), [(None, False), (0, False), (5, True)])
    def test_gym_val_top_k(self, val_top_k, error):
        findings = recipe_rules.check_sampling(
            self._gym_async(policy__generation__val_top_k=val_top_k)
        )
        assert ("gym-val-top-k" in _codes(findings)) is error

    def test_val_sampling_override_only_on_vllm_gym(self):
        on_gym = self._gym_async(policy__generation__val_top_p=0.9)
        assert _codes(recipe_rules.check_sampling(on_gym)) == set()
        sync = _with(policy__generation__val_temperature=0.6)
        f = _one(recipe_rules.check_sampling(sync), "val-sampling")
        assert f.severity is ERROR and "grpo.py::setup" in f.message

    def test_greedy_training_is_a_warning_not_an_assert(self):
        findings = recipe_rules.check_sampling(self._gym_async(policy__generation__temperature=0))
        assert _codes(findings) == set() and _codes(findings, WARNING) == {"greedy-sampling"}

    def test_async_unsupported_names_the_entry_point(self):
        f = _one(
            recipe_rules.check_async(self._gym_async(grpo__use_dynamic_sampling=True)),
            "async-unsupported",
        )
        assert "run_grpo_nemo_gym.py::main raises NotImplementedError" in f.message


class TestRanges:
    @pytest.mark.parametrize(
        ("key", "value"),
        [
            ("grpo.num_prompts_per_step", -4),
            ("grpo.num_generations_per_prompt", 0),
            ("grpo.max_num_steps", -1),
            ("grpo.val_num_generations_per_prompt", 0),
            ("cluster.gpus_per_node", 0),
        ],
    )
    def test_counts_below_one_are_errors(self, key, value):
        findings = recipe_rules.check_ranges(_recipe(_set(_base(), key, value)))
        f = _one(findings, "value-range")
        assert f.severity is ERROR and f.key == key and f"={value} must be >= 1" in f.message

    def test_valid_counts_pass(self):
        assert recipe_rules.check_ranges(_with()) == []


class TestInterpolations:
    def test_missing_key_is_an_error_and_env_a_warning(self):
        recipe = _recipe(
            _base(),
            (
                Unresolved("a", "${nope}", "Interpolation key 'nope' not found", "missing-key"),
                Unresolved("b", "${oc.env:X}", "Environment variable 'X' not found", "env"),
            ),
        )
        findings = recipe_rules.check_unresolved(recipe)
        assert _codes(findings) == {"unresolvable-interpolation"}
        assert _codes(findings, WARNING) == {"unresolved-interpolation"}


# Values a hostile or broken override can put anywhere: no config check may crash on them.
_JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def _leaf_paths(node: Any, prefix: str = "") -> list[str]:
    if isinstance(node, dict):
        out = [prefix] if prefix else []
        for key, value in node.items():
            out += _leaf_paths(value, f"{prefix}.{key}" if prefix else key)
        return out
    return [prefix]


_PATHS = _leaf_paths(_base())


@settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=300,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.lists(st.tuples(st.sampled_from(_PATHS), _JUNK), min_size=1, max_size=4))
def test_config_checks_never_crash_on_junk_values(replacements):
    cfg = copy.deepcopy(_base())
    cfg["env"]["should_use_nemo_gym"] = True
    cfg["grpo"]["async_grpo"]["enabled"] = True
    for path, value in replacements:
        _set(cfg, path, value)
    recipe = _recipe(cfg)
    for name, check in CONFIG_CHECKS:
        if name in ("keys", "gym"):
            continue  # schema and nemo-gym have their own tests
        findings = check(recipe)
        assert all(isinstance(f, Finding) for f in findings), name
