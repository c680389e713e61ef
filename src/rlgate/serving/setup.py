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

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlgate.core.errors import RecipeError
from rlgate.recipe.facts import RunFacts
from rlgate.recipe.load import Recipe
from rlgate.serving.contiguity import (
    SCENARIOS,
    LoopContext,
    LoopResult,
    replay,
)
from rlgate.serving.gym import GymChatPath, GymServer, gym_servers, vllm_model_config
from rlgate.serving.parsers import ServedParsers, template_variables
from rlgate.serving.parsers import serving_chat_parameters as parsers_serving_parameters
from rlgate.serving.templates import (
    SERVING_KWARGS,
    ChatTemplate,
    TemplateProfile,
    ThinkingMode,
    load_tokenizer,
    profile_template,
    resolve_tokenizer_source,
    served_template,
    tokenizer_folder,
    tokenizer_model_id,
)

__all__ = [
    "NoChatTemplate",
    "ServingSetup",
    "TokenizerUnavailable",
    "serving_chat_parameters",
    "serving_setup",
]


_PROFILES: dict[tuple[str, str, str], TemplateProfile] = {}


def serving_chat_parameters() -> frozenset[str]:
    """Keys ``http_server_serving_chat_kwargs`` may hold (plus NeMo RL's alias)."""
    return parsers_serving_parameters() | {"chat_template_kwargs"}


def _template_variables(template: ChatTemplate) -> frozenset[str]:
    return template_variables(template.text)


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
    _replays: dict[str, LoopResult] = field(default_factory=dict, repr=False)
    _context: LoopContext | None = field(default=None, repr=False)
    _profile: TemplateProfile | None = field(default=None, repr=False)

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
        """The measured behaviour of the served template under the served kwargs.

        Cached per process by (tokenizer, template hash, kwargs): checking many configs of
        one model renders each template once.
        """
        if self._profile is None:
            key = (
                self.tokenizer_source,
                self.template.sha256,
                json.dumps(self.template_kwargs, sort_keys=True, default=repr),
            )
            if key not in _PROFILES:
                _PROFILES[key] = profile_template(
                    self.tokenizer, self.template, self.template_kwargs
                )
            self._profile = _PROFILES[key]
        return self._profile

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
        """A context for :func:`rlgate.serving.contiguity.replay` (through Gym's code if used)."""
        gym = None
        if through_gym and self.gym_model is not None:
            gym = GymChatPath(self.gym_model.config)
        return LoopContext(
            self.tokenizer, self.template, self.parsers(), self.template_kwargs, gym=gym
        )

    def replay(self, scenario: str) -> LoopResult:
        """Replay a named scenario through Gym's path (cached: tests and checks share it)."""
        if scenario not in self._replays:
            if self._context is None:
                self._context = self.loop_context(through_gym=True)
            self._replays[scenario] = replay(self._context, SCENARIOS[scenario])
        return self._replays[scenario]

    def scenarios(self) -> list[str]:
        """Scenario names that apply: empty reasoning only exists when the model thinks."""
        thinking = self.profile().thinking
        return [n for n in SCENARIOS if n != "empty_reasoning" or thinking is ThinkingMode.OPEN]


class TokenizerUnavailable(RecipeError):
    """The config's tokenizer cannot be loaded here (offline, gated, a placeholder path).

    ``reason`` is one line: the tokenizer id, why, and what to do.
    """

    def __init__(self, model_id: str, source: str, cause: str) -> None:
        if not model_id:
            todo = (
                "the config leaves policy.model_name unset (a launcher fills it); override "
                "policy.model_name=<hub id> to check it"
            )
        elif Path(model_id).expanduser().is_dir():
            todo = (
                "the folder exists but transformers refuses its files (config.json, "
                "tokenizer_config.json); fix them, or override policy.tokenizer.name=<hub id>"
            )
        elif model_id.startswith(("/", "./", "../", "~")):
            todo = (
                "the config names a local path that does not exist here; override "
                "policy.tokenizer.name=<hub id> (or policy.model_name) to check it"
            )
        else:
            todo = (
                f"put its files under --tokenizers DIR as {tokenizer_folder(model_id)}/ "
                "(or RLGATE_TOKENIZERS), or run with Hugging Face hub access (HF_TOKEN for a "
                "gated model)"
            )
        self.model_id = model_id
        named = f"tokenizer {model_id!r} not available ({cause})" if model_id else cause
        self.reason = f"{named}: {todo}"
        super().__init__(f"cannot load tokenizer {source!r}: {cause}", hint=todo)


class NoChatTemplate(RecipeError):
    """Neither the config nor the tokenizer provides a chat template."""


def _load_tokenizer(model_id: str, source: str) -> Any:
    if model_id.startswith(("/", "./", "../", "~")) and not Path(source).exists():
        raise TokenizerUnavailable(model_id, source, "no such directory here")
    try:
        return load_tokenizer(source)
    except RecipeError as exc:
        cause = str(exc.message).split(": ", 1)[-1]
        raise TokenizerUnavailable(model_id, source, cause) from exc


def _dict(value: Any, key: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RecipeError(f"{key} must be a mapping, got {value!r}")
    return dict(value)


def _served_template(facts: RunFacts, tokenizer: Any) -> ChatTemplate:
    try:
        return served_template(facts, tokenizer)
    except RecipeError as exc:
        raise NoChatTemplate(exc.message, hint=exc.hint) from exc
    except (OSError, UnicodeDecodeError) as exc:  # chat_template names a file
        path = facts.policy.generation.serving_kwargs.chat_template
        raise RecipeError(f"{SERVING_KWARGS}.chat_template: cannot read {path!r}: {exc}") from exc


def serving_setup(recipe: Recipe, tokenizer_root: str | Path | None) -> ServingSetup:
    """Resolve the serving setup of ``recipe`` (loads the tokenizer; no GPU, no server)."""
    facts = recipe.facts
    kwargs = facts.policy.generation.serving_kwargs
    try:
        model_id = tokenizer_model_id(facts)
    except RecipeError as exc:
        raise TokenizerUnavailable("", "", exc.message) from exc
    source = resolve_tokenizer_source(model_id, tokenizer_root)
    tokenizer = _load_tokenizer(model_id, source)
    servers: list[GymServer] = []
    gym_model = None
    if facts.env.gym is not None:
        servers = gym_servers(facts.env.gym)
        gym_model = vllm_model_config(servers)
    gym_kwargs = _dict(
        gym_model.config.get("chat_template_kwargs") if gym_model else None,
        "Gym chat_template_kwargs",
    )
    return ServingSetup(
        recipe=recipe,
        tokenizer_source=source,
        tokenizer=tokenizer,
        template=_served_template(facts, tokenizer),
        tool_parser=kwargs.tool_parser or None,
        reasoning_parser=kwargs.reasoning_parser or None,
        enable_auto_tools=kwargs.enable_auto_tools,
        server_kwargs=dict(kwargs.template_kwargs),
        gym_kwargs=gym_kwargs,
        servers=servers,
        gym_model=gym_model,
    )
