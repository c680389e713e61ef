"""NeMo Gym, for real: its server configs and its Responses <-> Chat conversions.

Two jobs, both done with nemo-gym's own code (0.7.0, imported lazily):

* **Config.** ``env.nemo_gym`` in a NeMo RL config is Gym's global config: the YAML
  files in ``config_paths`` (shipped inside the nemo-gym package) merged with the
  per-server overrides written next to them. :func:`gym_servers` rebuilds that
  merge and :func:`check_server_keys` validates each overridden server against the
  pydantic model Gym itself uses (``VLLMModelConfig``, ``SWEBenchWrapperConfig``...),
  because NeMo RL types ``env`` as ``dict[str, Any]`` and never looks inside.
* **Conversations.** :class:`GymChatPath` carries one assistant turn the way a rollout
  does: vLLM's chat message -> Gym's ``<think>`` wrapping -> Responses output items ->
  the next request's input -> Chat messages -> ``_preprocess_chat_completion_create_params``
  (history reasoning handling) -> the messages vLLM renders next.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import importlib
import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from rlgate.core.errors import RecipeError
from rlgate.core.io import memoise, read_yaml

__all__ = [
    "GymChatPath",
    "GymKeyFinding",
    "GymServer",
    "check_server_keys",
    "gym_package_root",
    "gym_servers",
]

# NeMo RL consumes these env.nemo_gym keys itself (nemo_rl/environments/nemo_gym.py);
# everything else in env.nemo_gym is handed to Gym as its global config.
NEMO_RL_GYM_KEYS = frozenset(
    {
        "config_paths",
        "invalid_tool_call_patterns",
        "thinking_tags",
        "tokenizer_config",
        "pad_dynamic_image_shapes",
        "is_trajectory_collection",
        "uv_venv_dir",
        "skip_venv_if_present",
        "num_gpu_nodes",
        "use_absolute_ip",
        "port_range_low",
        "port_range_high",
    }
)
_SERVER_TYPES = ("responses_api_models", "responses_api_agents", "resources_servers")
# Config classes of the servers SWE recipes use; others are found by scanning app.py.
_KNOWN_CONFIGS = {
    ("responses_api_models", "vllm_model"): "VLLMModelConfig",
    ("responses_api_agents", "swe_agents"): "SWEBenchWrapperConfig",
    ("responses_api_agents", "simple_agent"): "SimpleAgentConfig",
}


@cache
def gym_package_root() -> Path:
    """Site-packages folder holding nemo-gym's top-level packages and their configs."""
    spec = importlib.util.find_spec("nemo_gym")
    if spec is None or spec.origin is None:
        raise RecipeError(
            "nemo-gym is not installed",
            hint="pip install --no-deps --ignore-requires-python nemo-gym==0.7.0 (see README)",
        )
    return Path(spec.origin).parent.parent


@dataclass(frozen=True, slots=True)
class GymServer:
    """One Gym server instance: ``<instance>.<server_type>.<implementation>``."""

    instance: str
    server_type: str
    implementation: str
    config: dict[str, Any]
    overridden: frozenset[str]  # keys the NeMo RL config sets (not only Gym's YAML defaults)


@dataclass(frozen=True, slots=True)
class GymKeyFinding:
    """A key Gym's config model does not declare."""

    path: str
    suggestion: str | None
    model: str


#: Merged Gym configs by the SHA-256 of the inputs' ``repr`` (plain YAML data: the ``repr``
#: tells ``1``, ``1.0`` and ``True`` apart and keeps key order). ``recipe check`` and the
#: functional tier merge the same Gym configs dozens of times per process; callers get a copy.
_MERGED: dict[bytes, dict[str, Any]] = {}


def _merge(configs: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """Left-to-right ``OmegaConf.merge``, as Gym merges its global config (``global_config.py``).

    Interpolations stay unresolved (Gym resolves them when its servers start).
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    key = hashlib.sha256(repr([dict(c) for _, c in configs]).encode()).digest()
    if key in _MERGED:
        return copy.deepcopy(_MERGED[key])
    nodes = []
    for where, config in configs:
        try:
            nodes.append(OmegaConf.create(dict(config)))
        except OmegaConfBaseException as exc:
            raise RecipeError(f"{where}: not a valid Gym config: {exc}") from exc
    try:
        merged = OmegaConf.to_container(OmegaConf.merge({}, *nodes), resolve=False)
    except OmegaConfBaseException as exc:
        raise RecipeError(f"cannot merge Gym configs: {exc}") from exc
    assert isinstance(merged, dict)
    memoise(_MERGED, key, copy.deepcopy(merged), 0)
    return merged


def _load_config_path(rel: str) -> dict[str, Any]:
    path = Path(rel) if Path(rel).is_absolute() else gym_package_root() / rel
    if not path.is_file():
        raise RecipeError(
            f"env.nemo_gym.config_paths entry {rel!r} is not a file of nemo-gym "
            f"(looked in {gym_package_root()})"
        )
    data = read_yaml(path, what="Gym config", error=RecipeError) or {}
    if not isinstance(data, dict):
        raise RecipeError(f"Gym config {rel} is not a mapping")
    return data


def gym_servers(nemo_gym: Mapping[str, Any]) -> list[GymServer]:
    """Merge ``config_paths`` with the overrides in ``env.nemo_gym`` into server instances."""
    paths = nemo_gym.get("config_paths") or []
    if isinstance(paths, str):
        paths = [paths]
    overrides = {k: v for k, v in nemo_gym.items() if k not in NEMO_RL_GYM_KEYS}
    merged = _merge(
        [(f"Gym config {rel}", _load_config_path(str(rel))) for rel in paths]
        + [("env.nemo_gym", overrides)]
    )
    servers = []
    for instance, body in merged.items():
        if not isinstance(body, Mapping):
            continue
        for server_type in _SERVER_TYPES:
            impls = body.get(server_type)
            if not isinstance(impls, Mapping):
                continue
            for impl, cfg in impls.items():
                if not isinstance(cfg, Mapping):
                    continue
                override = (overrides.get(instance) or {}).get(server_type, {}).get(impl, {})
                servers.append(
                    GymServer(
                        instance,
                        server_type,
                        str(impl),
                        dict(cfg),
                        frozenset(override) if isinstance(override, Mapping) else frozenset(),
                    )
                )
    return servers


@cache
def _config_model(server_type: str, implementation: str) -> type | None:
    module = importlib.import_module(f"{server_type}.{implementation}.app")
    name = _KNOWN_CONFIGS.get((server_type, implementation))
    if name is not None:
        return getattr(module, name)
    from nemo_gym.config_types import BaseRunServerInstanceConfig

    candidates = [
        obj
        for obj in vars(module).values()
        if isinstance(obj, type)
        and issubclass(obj, BaseRunServerInstanceConfig)
        and obj.__module__ == module.__name__
    ]
    return candidates[0] if len(candidates) == 1 else None


def _allowed_keys(model: type) -> set[str]:
    from nemo_gym.config_types import BaseRunServerTypeConfig

    return set(model.model_fields) | set(BaseRunServerTypeConfig.model_fields)  # type: ignore[attr-defined]


def check_server_keys(server: GymServer) -> list[GymKeyFinding]:
    """Keys the NeMo RL config sets on ``server`` that Gym's config model does not declare.

    The server's module is imported only when the config names an installed nemo-gym server
    (``<server_type>/<implementation>/app.py`` under nemo-gym's packages, the implementation a
    plain identifier): a config cannot make rlgate import anything else.
    """
    impl = server.implementation
    app = gym_package_root() / server.server_type / impl / "app.py"
    if not impl.isidentifier() or not app.is_file():
        raise RecipeError(
            f"env.nemo_gym.{server.instance}.{server.server_type}: {impl!r} is not a nemo-gym "
            f"{server.server_type} server (no {server.server_type}/{impl}/app.py in nemo-gym)"
        )
    try:
        model = _config_model(server.server_type, impl)
    except ImportError as exc:
        raise RecipeError(
            f"cannot import Gym server {server.server_type}.{server.implementation}: {exc}"
        ) from exc
    if model is None:
        return []
    allowed = _allowed_keys(model)
    findings = []
    for key in sorted(server.overridden - allowed):
        close = difflib.get_close_matches(key, sorted(allowed), n=1, cutoff=0.8)
        path = f"env.nemo_gym.{server.instance}.{server.server_type}.{server.implementation}.{key}"
        findings.append(GymKeyFinding(path, close[0] if close else None, model.__name__))
    return findings


def vllm_model_config(servers: Sequence[GymServer]) -> GymServer | None:
    """The policy model server (Gym's ``vllm_model``) NeMo RL points at its vLLM."""
    for server in servers:
        if server.server_type == "responses_api_models" and server.implementation == "vllm_model":
            return server
    return None


class GymChatPath:
    """Carry assistant turns through nemo-gym's real converter and vLLM model server code."""

    def __init__(self, server_config: Mapping[str, Any]) -> None:
        from responses_api_models.vllm_model.app import VLLMModel, VLLMModelConfig

        fields = {k: v for k, v in server_config.items() if k in VLLMModelConfig.model_fields}
        placeholders = {
            "host": "127.0.0.1",
            "port": 0,
            "entrypoint": "app.py",
            "name": "policy_model",
            "base_url": "http://127.0.0.1:0/v1",
            "api_key": "rlgate",
            "model": "policy",
        }
        for key, value in placeholders.items():
            if not isinstance(fields.get(key), str | int) or str(fields.get(key)).startswith("${"):
                fields[key] = value
        self.config = VLLMModelConfig(**fields)
        # Only the request/response transformations run; no server is started or called.
        self._server = VLLMModel.model_construct(config=self.config, server_client=None)
        self.converter = self._server._converter

    def response_items(self, message: Mapping[str, Any]) -> list[Any]:
        """VLLM chat message -> Gym Responses output items (as ``/v1/responses`` returns them)."""
        msg = {k: v for k, v in message.items() if v is not None}
        reasoning = msg.pop("reasoning_content", None) or msg.pop("reasoning", None)
        msg.pop("reasoning", None)
        if self.config.uses_reasoning_parser and reasoning:
            msg["content"] = self.converter._wrap_reasoning_in_think_tags([reasoning]) + (
                msg.get("content") or ""
            )
        elif reasoning:
            raise RecipeError(
                "vLLM returned reasoning but the Gym policy model sets uses_reasoning_parser: "
                "false; Gym raises an AssertionError on every such call"
            )
        return self.converter.postprocess_assistant_message_dict({"role": "assistant", **msg})

    def vllm_messages(
        self, input_items: Sequence[Any], tools: Sequence[Mapping[str, Any]] | None
    ) -> list[dict[str, Any]]:
        """A Responses request's input -> the chat messages Gym sends to vLLM."""
        from nemo_gym.openai_utils import NeMoGymResponseCreateParamsNonStreaming

        items = [
            i.model_dump(exclude_none=True) if hasattr(i, "model_dump") else i for i in input_items
        ]
        resp_tools = [
            {"type": "function", "strict": False, **t["function"]}
            if "function" in t
            else {"strict": False, **t}
            for t in tools or ()
        ]
        params = NeMoGymResponseCreateParamsNonStreaming(input=items, tools=resp_tools)
        chat = self.converter.responses_to_chat_completion_create_params(params)
        body = chat.model_dump(exclude_unset=True) if hasattr(chat, "model_dump") else dict(chat)
        body = self._server._preprocess_chat_completion_create_params(None, body)
        return [dict(m) for m in body["messages"]]

    def chat_template_kwargs(self) -> dict[str, Any]:
        """The ``chat_template_kwargs`` Gym attaches to every request (config baseline)."""
        return dict(self.config.chat_template_kwargs or {})
