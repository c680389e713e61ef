"""The chat serving setup a NeMo RL config produces: tokenizer, template, parsers, kwargs, Gym.

NeMo RL builds vLLM's ``OpenAIServingChat`` from
``policy.generation.vllm_cfg.http_server_serving_chat_kwargs`` (``enable_auto_tools``
defaulting to True; ``chat_template_kwargs`` accepted as an alias of
``default_chat_template_kwargs``); NeMo Gym's ``vllm_model`` server adds its own
``chat_template_kwargs`` to every request, which win over the server defaults. vLLM
passes the merged kwargs to the parsers as they are, and to the template only the
ones the template references. :func:`serving_setup` reproduces all of that for one
recipe so that checks and tests look at what would really be served.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from rlgate._errors import RecipeError
from rlgate.contiguity import LoopContext
from rlgate.gym import GymChatPath, GymServer, gym_servers, vllm_model_config
from rlgate.parsers import ServedParsers
from rlgate.recipes import Recipe, get_path
from rlgate.templates import (
    SERVING_KWARGS,
    ChatTemplate,
    TemplateProfile,
    load_tokenizer,
    profile_template,
    resolve_tokenizer_source,
    served_template,
    tokenizer_model_id,
)

__all__ = ["ServingSetup", "serving_chat_parameters", "serving_setup"]

# Keys NeMo RL itself passes to OpenAIServingChat; a recipe cannot meaningfully set them.
_NEMO_RL_OWNED = frozenset({"engine_client", "models", "online_renderer", "self"})


@cache
def serving_chat_parameters() -> frozenset[str]:
    """Parameters vLLM's ``OpenAIServingChat`` accepts (what the serving kwargs may hold)."""
    from rlgate.parsers import _import_vllm

    _import_vllm()
    from vllm.entrypoints.openai.chat_completion.serving import OpenAIServingChat

    params = set(inspect.signature(OpenAIServingChat.__init__).parameters) - _NEMO_RL_OWNED
    return frozenset(params | {"chat_template_kwargs"})  # NeMo RL's alias


def _template_variables(template: ChatTemplate) -> frozenset[str]:
    from vllm.renderers.hf import _cached_resolve_chat_template_kwargs

    return frozenset(_cached_resolve_chat_template_kwargs(template.text))


@dataclass
class ServingSetup:
    """Everything that decides the tokens of a rollout, for one recipe."""

    recipe: Recipe
    tokenizer_source: str
    tokenizer: Any
    template: ChatTemplate
    tool_parser: str | None
    reasoning_parser: str | None
    enable_auto_tools: bool
    server_kwargs: dict[str, Any]  # default_chat_template_kwargs of the vLLM server
    gym_kwargs: dict[str, Any]  # chat_template_kwargs Gym's vllm_model adds to requests
    servers: list[GymServer]
    gym_model: GymServer | None

    @property
    def effective_kwargs(self) -> dict[str, Any]:
        """Merged chat_template_kwargs (request/Gym over server defaults), as parsers see them."""
        return {**self.server_kwargs, **self.gym_kwargs}

    @property
    def template_kwargs(self) -> dict[str, Any]:
        """The kwargs vLLM actually passes to the template (those it references)."""
        used = _template_variables(self.template)
        return {k: v for k, v in self.effective_kwargs.items() if k in used}

    @property
    def ignored_kwargs(self) -> dict[str, Any]:
        """Kwargs vLLM silently drops because the template never reads them."""
        used = _template_variables(self.template)
        return {k: v for k, v in self.effective_kwargs.items() if k not in used}

    def profile(self) -> TemplateProfile:
        """The measured behaviour of the served template under the served kwargs."""
        return profile_template(self.tokenizer, self.template, self.template_kwargs)

    def parsers(self) -> ServedParsers:
        """The vLLM parser pair, constructed as the chat server constructs it."""
        return ServedParsers(
            self.tokenizer,
            self.tool_parser,
            self.reasoning_parser,
            self.effective_kwargs,
            enable_auto_tools=self.enable_auto_tools,
        )

    def loop_context(self, *, through_gym: bool = True) -> LoopContext:
        """A context for :func:`rlgate.contiguity.replay` (through Gym's code when it is used)."""
        gym = None
        if through_gym and self.gym_model is not None:
            gym = GymChatPath(self.gym_model.config)
        return LoopContext(
            self.tokenizer, self.template, self.parsers(), self.template_kwargs, gym=gym
        )


def _dict(value: Any, key: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RecipeError(f"{key} must be a mapping, got {value!r}")
    return dict(value)


def serving_setup(recipe: Recipe, tokenizer_root: str | Path | None) -> ServingSetup:
    """Resolve the serving setup of ``recipe`` (loads the tokenizer; no GPU, no server)."""
    config = recipe.config
    kwargs = _dict(get_path(config, SERVING_KWARGS), SERVING_KWARGS)
    source = resolve_tokenizer_source(tokenizer_model_id(config), tokenizer_root)
    tokenizer = load_tokenizer(source)
    server_kwargs = kwargs.get("default_chat_template_kwargs")
    if server_kwargs is None:
        server_kwargs = kwargs.get("chat_template_kwargs")
    servers: list[GymServer] = []
    gym_model = None
    nemo_gym = get_path(config, "env.nemo_gym")
    if get_path(config, "env.should_use_nemo_gym") and isinstance(nemo_gym, dict):
        servers = gym_servers(nemo_gym)
        gym_model = vllm_model_config(servers)
    gym_kwargs = _dict(
        gym_model.config.get("chat_template_kwargs") if gym_model else None,
        "Gym chat_template_kwargs",
    )
    return ServingSetup(
        recipe=recipe,
        tokenizer_source=source,
        tokenizer=tokenizer,
        template=served_template(config, tokenizer),
        tool_parser=kwargs.get("tool_parser") or None,
        reasoning_parser=kwargs.get("reasoning_parser") or None,
        enable_auto_tools=bool(kwargs.get("enable_auto_tools", True)),
        server_kwargs=_dict(server_kwargs, f"{SERVING_KWARGS}.default_chat_template_kwargs"),
        gym_kwargs=gym_kwargs,
        servers=servers,
        gym_model=gym_model,
    )
