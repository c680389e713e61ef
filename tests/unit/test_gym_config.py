"""rlgate.serving.gym: Gym's config merge and key validation, against the installed nemo-gym."""

from __future__ import annotations

import sys

import pytest

from rlgate.core.errors import RecipeError
from rlgate.serving.gym import GymServer, check_server_keys, gym_servers, vllm_model_config

PATHS = [
    "responses_api_models/vllm_model/configs/vllm_model_for_training.yaml",
    "responses_api_agents/swe_agents/configs/swebench_openhands_training.yaml",
]


class TestGymServers:
    def test_config_paths_merge_with_overrides(self):
        servers = gym_servers(
            {
                "config_paths": PATHS,
                "swe_agents_train": {
                    "responses_api_agents": {"swe_agents": {"agent_max_turns": 7}}
                },
            }
        )
        by_name = {(s.instance, s.implementation): s for s in servers}
        swe = by_name[("swe_agents_train", "swe_agents")]
        assert swe.config["agent_max_turns"] == 7  # override over Gym's yaml default (100)
        assert swe.config["swebench_agent_timeout"] == 1800  # Gym's own yaml default kept
        assert swe.overridden == frozenset({"agent_max_turns"})
        assert vllm_model_config(servers).config["return_token_id_information"] is True

    def test_a_merge_is_kept_by_content_and_handed_out_as_copies(self):
        nemo_gym = {"config_paths": PATHS, "swe_agents_train": {"responses_api_agents": {}}}
        first = gym_servers(nemo_gym)
        swe = next(s for s in first if s.implementation == "swe_agents")
        swe.config["agent_max_turns"] = -1  # a caller's change never reaches the next caller
        again = next(s for s in gym_servers(nemo_gym) if s.implementation == "swe_agents")
        assert again.config["agent_max_turns"] == 100
        for value in (7, 7.0, True):  # equal in Python, different configs: never one entry
            nemo_gym["swe_agents_train"]["responses_api_agents"] = {
                "swe_agents": {"agent_max_turns": value}
            }
            got = next(s for s in gym_servers(nemo_gym) if s.implementation == "swe_agents")
            assert repr(got.config["agent_max_turns"]) == repr(value)

    def test_missing_config_path_is_an_error(self):
        with pytest.raises(RecipeError, match="not a file of nemo-gym"):
            gym_servers({"config_paths": ["responses_api_models/nope.yaml"]})


class TestServerKeys:
    def _swe(self, **override):
        servers = gym_servers(
            {
                "config_paths": PATHS,
                "swe_agents_train": {"responses_api_agents": {"swe_agents": override}},
            }
        )
        return next(s for s in servers if s.instance == "swe_agents_train")

    def test_typo_gets_a_suggestion_from_gyms_own_model(self):
        (finding,) = check_server_keys(self._swe(agent_max_turn=5))
        assert finding.suggestion == "agent_max_turns" and finding.model == "SWEBenchWrapperConfig"

    def test_ignored_key_has_no_suggestion(self):
        (finding,) = check_server_keys(self._swe(run_with_mixed_prompts=True))
        assert finding.suggestion is None

    def test_valid_override_is_clean(self):
        assert not check_server_keys(self._swe(concurrency=64))

    @pytest.mark.parametrize("impl", ["os", "swe_agents.app.x", "..", "nope_server", "a-b"])
    def test_only_installed_gym_servers_are_ever_imported(self, impl):
        server = GymServer("inst", "responses_api_agents", impl, {}, frozenset({"x"}))
        with pytest.raises(RecipeError, match=f"{impl!r} is not a nemo-gym responses_api_agents"):
            check_server_keys(server)
        assert "responses_api_agents.os.app" not in sys.modules
