"""The facts rlgate reads from a NeMo RL config, typed and validated once (:class:`RunFacts`).

:func:`rlgate.recipe.load.load_recipe` reads them with :func:`read_facts` right after the
config is resolved; every command then reads ``recipe.facts`` (``facts.cluster.num_gpus``,
``facts.grpo.max_num_steps``, ``facts.policy.tokenizer_id``...) instead of looking the same
dotted keys up again. The sections mirror NeMo RL's config (``facts.cluster.num_nodes`` is
``cluster.num_nodes``), so a problem is reported under the key the user wrote.

Rules, one place for all of them:

* a value is read as NeMo RL reads it: ``MasterConfig(**config)`` validates with pydantic in
  lax mode, so ``"4"`` or ``4.0`` is the integer 4 and ``"true"`` is True (nemo-rl.md §3.2);
  a bool is never a count, although pydantic would read ``true`` as 1;
* absent, null, ``???`` (OmegaConf's mandatory marker) and an interpolation that did not
  resolve here (kept verbatim, see ``Recipe.unresolved``) are all *unknown*: ``None``. A
  command that needs the fact says so when it is ``None``;
* a count NeMo RL cannot run with (``cluster.num_nodes: 0``, ``grpo.max_num_steps: -1``) and a
  value of the wrong type (``cluster.gpus_per_node: banana``, ``cluster: 3``) are *invalid*.
  ``read_facts(strict=True)`` (every command) raises one :class:`RecipeError` naming each such
  key and value; ``strict=False`` (``rlgate recipe check``, whose rules and schema report the
  same values as findings) leaves them ``None``.

:class:`RunContext` adds what the ``rlgate:`` block and ``--max-steps`` say to the facts the
convergence and perf checks are relative to (target step, token limit, agent turns).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from rlgate.core.errors import RecipeError
from rlgate.recipe.spec import GateSpec

__all__ = [
    "AsyncGrpoFacts",
    "ClusterFacts",
    "EnvFacts",
    "GenerationFacts",
    "GrpoFacts",
    "PolicyFacts",
    "RunContext",
    "RunFacts",
    "ServingKwargsFacts",
    "context_from_config",
    "context_from_facts",
    "is_finite_number",
    "read_facts",
]


# --- value rules ---------------------------------------------------------------------------


def _unknown(value: Any) -> bool:
    """None, OmegaConf's ``???`` or an interpolation kept verbatim: not known here."""
    return value is None or (isinstance(value, str) and ("${" in value or value == "???"))


def _invalid(message: str) -> PydanticCustomError:
    return PydanticCustomError("rlgate_fact", message)


_LAX_INT, _LAX_FLOAT, _LAX_BOOL = TypeAdapter(int), TypeAdapter(float), TypeAdapter(bool)


def _integer(minimum: int | None, noun: str) -> Callable[[Any], int | None]:
    what = f"a positive {noun}" if minimum == 1 else f"an {noun}"

    def read(value: Any) -> int | None:
        if _unknown(value):
            return None
        if isinstance(value, bool):
            raise _invalid(f"is not {what}")
        try:
            number = _LAX_INT.validate_python(value)
        except ValidationError:
            raise _invalid(f"is not {what}") from None
        if minimum is not None and number < minimum:
            raise _invalid(f"is not {what}")
        return number

    return read


def _number(value: Any) -> float | None:
    if _unknown(value):
        return None
    if isinstance(value, bool):
        raise _invalid("is not a number")
    try:
        return _LAX_FLOAT.validate_python(value)
    except ValidationError:
        raise _invalid("is not a number") from None


def _flag(value: Any) -> bool | None:
    if _unknown(value):
        return None
    try:
        return _LAX_BOOL.validate_python(value)
    except ValidationError:
        raise _invalid("is not a boolean (true/false)") from None


def _text(value: Any) -> str | None:
    if _unknown(value):
        return None
    if not isinstance(value, str):
        raise _invalid("is not a string")
    return value


def _mapping(value: Any) -> dict[Any, Any] | None:
    if _unknown(value):
        return None
    if not isinstance(value, Mapping):
        raise _invalid("is not a mapping")
    return dict(value)


Count = Annotated[int | None, BeforeValidator(_integer(1, "integer"))]
StepCount = Annotated[int | None, BeforeValidator(_integer(1, "step count"))]
Integer = Annotated[int | None, BeforeValidator(_integer(None, "integer"))]
Number = Annotated[float | None, BeforeValidator(_number)]
Flag = Annotated[bool | None, BeforeValidator(_flag)]
Text = Annotated[str | None, BeforeValidator(_text)]
Table = Annotated[dict[Any, Any] | None, BeforeValidator(_mapping)]


class _Section(BaseModel):
    """A config section: other keys are NeMo RL's business; null or unresolved reads as empty."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _a_mapping(cls, data: Any) -> Any:
        if _unknown(data):
            return {}
        if isinstance(data, Mapping | BaseModel):
            return data
        raise _invalid("is not a mapping")


# --- the sections ----------------------------------------------------------------------------


class ClusterFacts(_Section):
    """``cluster.*``: the nodes and GPUs per node NeMo RL allocates (``ClusterConfig``)."""

    num_nodes: Count = None
    gpus_per_node: Count = None

    @property
    def num_gpus(self) -> int | None:
        """Every GPU of the run (``num_nodes x gpus_per_node``), None when either is unknown."""
        if self.num_nodes is None or self.gpus_per_node is None:
            return None
        return self.num_nodes * self.gpus_per_node

    @property
    def shape(self) -> str | None:
        """The cluster shape as runs are recorded by (``64n4g``), None when either is unknown."""
        if self.num_nodes is None or self.gpus_per_node is None:
            return None
        return f"{self.num_nodes}n{self.gpus_per_node}g"


class AsyncGrpoFacts(_Section):
    """``grpo.async_grpo.*``."""

    enabled: Flag = None
    in_flight_weight_updates: Flag = None
    max_trajectory_age_steps: Integer = None


class GrpoFacts(_Section):
    """``grpo.*``: steps, batch per step, async mode, early stop, tool-call penalties."""

    max_num_steps: StepCount = None
    num_prompts_per_step: Count = None
    num_generations_per_prompt: Count = None
    async_grpo: AsyncGrpoFacts = AsyncGrpoFacts()
    stop_at_validation_metric: Text = None
    stop_at_validation_threshold: Number = None
    invalid_tool_call_advantage: Number = None
    malformed_thinking_advantage: Number = None

    @property
    def rollouts_per_step(self) -> int | None:
        """``num_prompts_per_step x num_generations_per_prompt`` (None when either is unknown)."""
        prompts, gens = self.num_prompts_per_step, self.num_generations_per_prompt
        return prompts * gens if prompts and gens else None

    @property
    def is_async(self) -> bool:
        """Async GRPO (``grpo.async_grpo.enabled: true``)."""
        return self.async_grpo.enabled is True


def _auto_tools(value: Any) -> bool:
    # NeMo RL: {"enable_auto_tools": True, ...} | kwargs, so an explicit null switches it off.
    if value is None:
        return False
    return True if _unknown(value) else bool(_flag(value))


class ServingKwargsFacts(_Section):
    """``policy.generation.vllm_cfg.http_server_serving_chat_kwargs``: vLLM's chat server.

    NeMo RL merges them over its defaults (``VllmAsyncGenerationWorkerImpl.
    _setup_vllm_openai_api_server``): ``enable_auto_tools`` is True unless set;
    ``chat_template_kwargs`` is the older spelling of ``default_chat_template_kwargs``.
    """

    chat_template: Text = None
    tool_parser: Text = None
    reasoning_parser: Text = None
    enable_auto_tools: Annotated[bool, BeforeValidator(_auto_tools)] = True
    default_chat_template_kwargs: Table = None
    chat_template_kwargs: Table = None

    @property
    def template_kwargs(self) -> dict[Any, Any]:
        """The server's default template kwargs (``default_chat_template_kwargs`` or the alias)."""
        if self.default_chat_template_kwargs is not None:
            return self.default_chat_template_kwargs
        return self.chat_template_kwargs or {}


class VllmFacts(_Section):
    """``policy.generation.vllm_cfg.*``."""

    max_model_len: Count = None
    tensor_parallel_size: Count = None
    pipeline_parallel_size: Count = None
    http_server_serving_chat_kwargs: ServingKwargsFacts = ServingKwargsFacts()


class ResourcesFacts(_Section):
    """``policy.generation.colocated.resources.*``: generation's own GPUs when not colocated."""

    num_nodes: Count = None
    gpus_per_node: Count = None


class ColocatedFacts(_Section):
    """``policy.generation.colocated.*``."""

    enabled: Flag = None
    resources: ResourcesFacts = ResourcesFacts()


class GenerationFacts(_Section):
    """``policy.generation.*``."""

    backend: Text = None
    colocated: ColocatedFacts = ColocatedFacts()
    vllm_cfg: VllmFacts = VllmFacts()

    @property
    def serving_kwargs(self) -> ServingKwargsFacts:
        """What NeMo RL hands vLLM's ``OpenAIServingChat`` (the served template and parsers)."""
        return self.vllm_cfg.http_server_serving_chat_kwargs

    @property
    def vllm_servers(self) -> int | None:
        """Non-colocated vLLM servers: generation GPUs / (TP x PP); None when colocated/unknown."""
        nodes, per_node = self.colocated.resources.num_nodes, self.colocated.resources.gpus_per_node
        if not nodes or not per_node:
            return None
        tp = self.vllm_cfg.tensor_parallel_size or 1
        pp = self.vllm_cfg.pipeline_parallel_size or 1
        return (nodes * per_node) // (tp * pp) or None


class TokenizerFacts(_Section):
    """``policy.tokenizer.*``."""

    name: Text = None


class PolicyFacts(_Section):
    """``policy.*``: the model, its tokenizer, sequence limit and generation setup."""

    model_name: Text = None
    tokenizer: TokenizerFacts = TokenizerFacts()
    max_total_sequence_length: Count = None
    generation: GenerationFacts = GenerationFacts()

    @property
    def tokenizer_id(self) -> str | None:
        """The tokenizer NeMo RL loads: ``policy.tokenizer.name``, else ``policy.model_name``."""
        return self.tokenizer.name or self.model_name or None


class EnvFacts(_Section):
    """``env.*``: whether rollouts go through NeMo Gym, and Gym's global config."""

    should_use_nemo_gym: Flag = None
    nemo_gym: Table = None

    @property
    def gym(self) -> dict[Any, Any] | None:
        """``env.nemo_gym`` when the run uses NeMo Gym (else None): handed to Gym as-is."""
        return self.nemo_gym if self.should_use_nemo_gym else None


class CheckpointingFacts(_Section):
    """``checkpointing.*``."""

    enabled: Flag = None


class LoggerFacts(_Section):
    """``logger.*``."""

    log_dir: Text = None


SECTIONS = ("cluster", "grpo", "policy", "env", "checkpointing", "logger")


class RunFacts(_Section):
    """Everything rlgate reads from a NeMo RL config, typed (see the module docstring)."""

    cluster: ClusterFacts = ClusterFacts()
    grpo: GrpoFacts = GrpoFacts()
    policy: PolicyFacts = PolicyFacts()
    env: EnvFacts = EnvFacts()
    checkpointing: CheckpointingFacts = CheckpointingFacts()
    logger: LoggerFacts = LoggerFacts()
    # Not a config key: env.nemo_gym.<instance>.responses_api_agents.<agent>.agent_max_turns,
    # per Gym instance (read by read_facts; the largest of an instance's agents).
    gym_agent_turns: Mapping[str, int] = Field(default_factory=dict, exclude=True)

    @property
    def agent_max_turns(self) -> int | None:
        """The training agents' turn limit: the ``*_train`` instances' if any, else the largest."""
        train = [v for k, v in self.gym_agent_turns.items() if k.endswith("_train")]
        if train:
            return max(train)
        return max(self.gym_agent_turns.values(), default=None)

    @property
    def token_limit(self) -> int | None:
        """Per-sample token ceiling: the smaller of max_total_sequence_length and max_model_len."""
        limits = [
            x
            for x in (
                self.policy.max_total_sequence_length,
                self.policy.generation.vllm_cfg.max_model_len,
            )
            if x
        ]
        return min(limits) if limits else None

    @property
    def tool_call_metrics_logged(self) -> bool:
        """NeMo RL logs tool-call failure metrics when a tool-call/thinking penalty is set."""
        return (
            self.grpo.invalid_tool_call_advantage is not None
            or self.grpo.malformed_thinking_advantage is not None
        )


# --- reading ---------------------------------------------------------------------------------


_SHOWN = 120  # a value longer than this (a whole mapping) is cut in the message


@dataclass(frozen=True, slots=True)
class _Problem:
    key: str
    value: Any
    message: str

    def __str__(self) -> str:
        shown = "an empty string" if self.value == "" else repr(self.value)
        if len(shown) > _SHOWN:
            shown = shown[: _SHOWN - 3] + "..."
        text = f"{self.key} = {shown} {self.message}"
        where = _declared_in(self.key)
        return f"{text} (NeMo RL: {where})" if where else text


def _declared_in(key: str) -> str | None:
    from rlgate.recipe.schema import load_schema

    entry = load_schema().lookup(key)
    return str(entry["where"]) if entry and entry.get("where") else None


def _key(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in loc)


def _without(node: Mapping[Any, Any], loc: tuple[int | str, ...]) -> dict[Any, Any]:
    """``node`` with the value at ``loc`` removed (copies along the path only)."""
    out = dict(node)
    head, rest = loc[0], loc[1:]
    if head not in out:
        return out
    child = out[head]
    if rest and isinstance(child, Mapping) and rest[0] in child:
        out[head] = _without(child, rest)
    else:
        out.pop(head)
    return out


_AGENT_TURNS = _integer(1, "integer")


def _gym_agent_turns(nemo_gym: Mapping[str, Any] | None) -> tuple[dict[str, int], list[_Problem]]:
    """``agent_max_turns`` of every Gym agent in ``env.nemo_gym``, per instance."""
    turns: dict[str, int] = {}
    problems: list[_Problem] = []
    for instance, body in (nemo_gym or {}).items():
        agents = body.get("responses_api_agents") if isinstance(body, Mapping) else None
        if not isinstance(agents, Mapping):
            continue
        for agent, cfg in agents.items():
            if not isinstance(cfg, Mapping) or "agent_max_turns" not in cfg:
                continue
            raw = cfg["agent_max_turns"]
            key = f"env.nemo_gym.{instance}.responses_api_agents.{agent}.agent_max_turns"
            try:
                value = _AGENT_TURNS(raw)
            except PydanticCustomError as exc:
                problems.append(_Problem(key, raw, exc.message()))
                continue
            if value is not None:
                turns[str(instance)] = max(value, turns.get(str(instance), 0))
    return turns, problems


def read_facts(
    config: Mapping[str, Any], *, strict: bool = True, source: str = "config"
) -> RunFacts:
    """Read the facts of a resolved NeMo RL config.

    Args:
        config: the resolved config (``Recipe.config``).
        strict: raise on an invalid value; else leave it None (``recipe check`` reports it).
        source: what to call the config in the error (the recipe path).

    Raises:
        RecipeError: (strict) one message naming every invalid key and its value.
    """
    sections: dict[Any, Any] = {k: config[k] for k in SECTIONS if k in config}
    problems: list[_Problem] = []
    while True:
        try:
            facts = RunFacts.model_validate(sections)
            break
        except ValidationError as exc:
            errors = exc.errors()
            for err in errors:
                problems.append(_Problem(_key(err["loc"]), err["input"], err["msg"]))
            pruned = sections
            for err in errors:
                pruned = _without(pruned, err["loc"])
            if pruned == sections:  # an error below a key it cannot name: drop its section
                pruned = {k: v for k, v in sections.items() if k != errors[0]["loc"][0]}
            sections = pruned
    turns, gym_problems = _gym_agent_turns(facts.env.nemo_gym)
    problems += gym_problems
    if problems and strict:
        listed = [str(p) for p in problems]
        text = listed[0] if len(listed) == 1 else f"{len(listed)} invalid values:"
        if len(listed) > 1:
            text += "".join(f"\n  {line}" for line in listed)
        raise RecipeError(
            f"{source}: {text}",
            hint="fix the value in the recipe or override it (key=value); "
            "`rlgate recipe check` reports every problem of the config",
        )
    return facts.model_copy(update={"gym_agent_turns": turns}) if turns else facts


# --- the run context -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunContext:
    """Facts from the recipe's NeMo RL config that bounds are relative to."""

    recipe: str
    target_step: int | None = None
    max_total_sequence_length: int | None = None
    max_model_len: int | None = None
    agent_max_turns: int | None = None
    stop_metric: str | None = None
    stop_threshold: float | None = None
    tool_call_metrics_logged: bool = False
    base_dir: Path = Path(".")
    cluster: ClusterFacts = field(default_factory=ClusterFacts)

    @property
    def num_gpus(self) -> int | None:
        """The run's GPUs (``cluster``: the same record the launch and budget read)."""
        return self.cluster.num_gpus

    @property
    def token_limit(self) -> int | None:
        """The per-sample token ceiling: the smaller of the two configured limits."""
        limits = [x for x in (self.max_total_sequence_length, self.max_model_len) if x]
        return min(limits) if limits else None


def context_from_facts(
    facts: RunFacts,
    gate: GateSpec,
    *,
    recipe: str,
    max_steps: int | None = None,
    base_dir: Path = Path("."),
) -> RunContext:
    """The run context: the facts, with ``--max-steps`` and the ``rlgate:`` block's overrides.

    The target step is ``--max-steps``, else the block's (``rlgate.convergence.target_step``),
    else ``grpo.max_num_steps``; the agent turn limit is the block's
    (``rlgate.convergence.agentic.agent_max_turns``), else the training Gym agents'. The
    block says what it sets through :meth:`GateSpec.context_overrides` (the check kinds').

    Raises:
        RecipeError: ``max_steps`` is not a positive step count.
    """
    block = gate.context_overrides()
    if max_steps is not None and (isinstance(max_steps, bool) or max_steps < 1):
        raise RecipeError(f"--max-steps must be a positive step count, got {max_steps!r}")
    target = max_steps or block.get("target_step") or facts.grpo.max_num_steps
    turns = block.get("agent_max_turns")
    return RunContext(
        recipe=recipe,
        target_step=target,
        max_total_sequence_length=facts.policy.max_total_sequence_length,
        max_model_len=facts.policy.generation.vllm_cfg.max_model_len,
        agent_max_turns=turns or facts.agent_max_turns,
        stop_metric=facts.grpo.stop_at_validation_metric,
        stop_threshold=facts.grpo.stop_at_validation_threshold,
        tool_call_metrics_logged=facts.tool_call_metrics_logged,
        base_dir=base_dir,
        cluster=facts.cluster,
    )


def context_from_config(
    config: Mapping[str, Any],
    *,
    recipe: str,
    gate: GateSpec,
    max_steps: int | None = None,
    base_dir: Path = Path("."),
) -> RunContext:
    """:func:`context_from_facts` of a config read with :func:`read_facts` (strict)."""
    facts = read_facts(config, source=f"recipe {recipe}")
    return context_from_facts(facts, gate, recipe=recipe, max_steps=max_steps, base_dir=base_dir)


def is_finite_number(value: Any) -> bool:
    """True for an int/float that is not NaN/inf."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
