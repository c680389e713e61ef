"""The ``rlgate:`` block of a recipe (convergence / perf / band bounds), validated.

A recipe is a NeMo RL config plus one top-level ``rlgate:`` mapping (NeMo RL's
``MasterConfig`` allows extra keys, so the recipe stays runnable).
:func:`rlgate.recipe.load.load_recipe` validates it with :func:`parse_gate` into
``Recipe.gate`` (a :class:`GateSpec`), strictly: unknown keys are errors with a did-you-mean,
and every problem is listed in one :class:`~rlgate.core.errors.RecipeError`.

Schema (defaults in parentheses; windows are check_metrics ``[range_start, range_end]``)::

    rlgate:
      tiers: [functional, convergence, perf, swe_gate]   (all four)
      functional:
        expect: pass|reject (pass), reject_codes: [finding codes], data_tool_format: xml|json,
        data_reasoning: bool, known_limitations: [{check: contiguity|round_trip|streaming,
                                                   scenario, reason}]
      convergence:
        target_step: int                  (grpo.max_num_steps; --max-steps overrides)
        completion: {metric: train/loss}  (the tag whose last step counts as "reached")
        checks:                           typed checks or check_metrics conditions
          - {name, metric, reducer: min|max|mean|median|last|ratio_above, op: < <= > >= ==,
             threshold, window: [start, end], above: float (ratio_above), ignore_top_p, reason}
          - {condition: 'median(data["train/token_mult_prob_error"]) < 1.1', name, reason}
        reward: {metric: train/reward, test: trend|mannwhitney|bootstrap, window: [1, 0],
                 early: [1, 4], late: [-3, 0], alpha: 0.05, min_improvement: 0.0,
                 require_positive_max: true}
        agentic: {window: [1, 0], turns_mean, max_turns_share, agent_max_turns,
                  truncation_rate, natural_termination_rate, total_tokens_within_limit: true,
                  tool_call_failure_rate, finite: [train/loss, train/grad_norm]}
        rollouts: {max_turns_share, failed_call_rate, unparsed_tool_call_rate,
                   malformed_reasoning_rate, empty_final_rate, truncated_final_rate,
                   reward_mean_min, invalid_rate: 0.0, tool_call_patterns, thinking_tags,
                   error_patterns}
      perf:
        warmup_steps: 3, alpha: 0.01, min_effect: 0.05,
        metrics: {timing/train/total_step_time: lower, performance/tokens_per_sec_per_gpu: higher}
        async_vs_sync: {min_speedup: 1.0, metrics: {timing/train/total_step_time: lower}}
      band:
        min_runs: 5, runs: [paths or globs, relative to the recipe], alpha: 0.01,
        max_outside: 0.2, warmup_steps: 0,
        metrics: {train/reward: higher, timing/train/total_step_time: {better: lower, method: mean}}
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from rlgate.core.errors import RecipeError
from rlgate.recipe.conditions import (
    Condition,
    ConditionSyntaxError,
    Op,
    Reducer,
    SeriesCall,
    parse_condition,
)

__all__ = [
    "DEFAULT_THINKING_TAGS",
    "DEFAULT_TOOL_CALL_PATTERNS",
    "TIERS",
    "AgenticSpec",
    "BandMethod",
    "BandSpec",
    "CheckSpec",
    "ConditionCheckSpec",
    "ConvergenceSpec",
    "Direction",
    "FunctionalGate",
    "GateSpec",
    "KnownLimitation",
    "PerfSpec",
    "RewardSpec",
    "RewardTest",
    "RolloutGateSpec",
    "parse_gate",
]

# NeMo RL's defaults (nemo_rl/environments/nemo_gym.py DEFAULT_INVALID_TOOL_CALL_PATTERNS,
# DEFAULT_THINKING_TAGS): tool-call markup left in text means the parser did not run.
DEFAULT_TOOL_CALL_PATTERNS = ("<tool_call>", "</tool_call>", "<function_call>", "</function_call>")


DEFAULT_THINKING_TAGS = ("<think>", "</think>")


DEFAULT_ERROR_PATTERNS = (r"^\s*(?:Error|ERROR)\b",)


Window = tuple[int, int]


class Direction(Enum):
    """Which way is better for a metric."""

    LOWER = "lower"
    HIGHER = "higher"


class RewardTest(Enum):
    """How reward improvement is tested."""

    TREND = "trend"  # one-sided OLS slope t-test over the window
    MANNWHITNEY = "mannwhitney"  # late window > early window, rank test
    BOOTSTRAP = "bootstrap"  # mean(late) - mean(early), percentile bootstrap


class BandMethod(Enum):
    """Which reference-band statistics a metric is checked with."""

    CURVE = "curve"
    MEAN = "mean"
    BOTH = "both"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False)


class CheckSpec(_Strict):
    """A typed check: ``reducer(metric over window) op threshold``."""

    name: str
    metric: str
    reducer: Reducer
    op: Op
    threshold: float
    window: Window | None = None
    above: float | None = None
    ignore_top_p: float = Field(0.0, ge=0.0, le=1.0)
    reason: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> CheckSpec:
        if (self.reducer is Reducer.RATIO_ABOVE) != (self.above is not None):
            raise ValueError("'above' is required for reducer ratio_above and only for it")
        if self.ignore_top_p and self.reducer is not Reducer.MEAN:
            raise ValueError("ignore_top_p applies to reducer mean only")
        return self

    def to_condition(self) -> Condition:
        """The equivalent condition AST."""
        start, end = self.window or (1, 0)
        call = SeriesCall(self.reducer, self.metric, start, end, self.ignore_top_p, self.above)
        return Condition(call, self.op, self.threshold, call.describe())


class ConditionCheckSpec(_Strict):
    """A NeMo RL ``check_metrics.py`` condition, accepted verbatim."""

    condition: str
    name: str | None = None
    reason: str = ""

    @field_validator("condition")
    @classmethod
    def _parses(cls, value: str) -> str:
        try:
            parse_condition(value)
        except ConditionSyntaxError as exc:  # pydantic reports ValueErrors with the location
            raise ValueError(str(exc)) from None
        return value

    def to_condition(self) -> Condition:
        """The parsed condition AST."""
        return parse_condition(self.condition)


def _check_kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "condition" if "condition" in value else "typed"
    return "condition" if isinstance(value, ConditionCheckSpec) else "typed"


AnyCheck = Annotated[
    Annotated[CheckSpec, Tag("typed")] | Annotated[ConditionCheckSpec, Tag("condition")],
    Discriminator(_check_kind),
]


class CompletionSpec(_Strict):
    """Which tag's last step counts as the step the run reached."""

    metric: str = "train/loss"


class RewardSpec(_Strict):
    """Reward must improve over the run and must not be all zero."""

    metric: str = "train/reward"
    test: RewardTest = RewardTest.TREND
    window: Window = (1, 0)
    early: Window | None = None
    late: Window | None = None
    alpha: float = Field(0.05, gt=0.0, lt=0.5)
    min_improvement: float = 0.0
    require_positive_max: bool = True


class AgenticSpec(_Strict):
    """Bounds on NeMo RL's Gym rollout metrics (``train/turns_per_sample/*`` …)."""

    window: Window = (1, 0)
    turns_mean: float | None = None
    max_turns_share: float | None = Field(None, ge=0.0, le=1.0)
    agent_max_turns: int | None = Field(None, gt=0)
    truncation_rate: float | None = Field(None, ge=0.0, le=1.0)
    natural_termination_rate: float | None = Field(None, ge=0.0, le=1.0)
    total_tokens_within_limit: bool = True
    tool_call_failure_rate: float | None = Field(None, ge=0.0, le=1.0)
    finite: tuple[str, ...] = ("train/loss", "train/grad_norm")


class RolloutGateSpec(_Strict):
    """Bounds on a NeMo Gym rollout JSONL (``ng_collect_rollouts`` output)."""

    max_turns_share: float | None = Field(None, ge=0.0, le=1.0)
    failed_call_rate: float | None = Field(None, ge=0.0, le=1.0)
    unparsed_tool_call_rate: float | None = Field(None, ge=0.0, le=1.0)
    malformed_reasoning_rate: float | None = Field(None, ge=0.0, le=1.0)
    empty_final_rate: float | None = Field(None, ge=0.0, le=1.0)
    truncated_final_rate: float | None = Field(None, ge=0.0, le=1.0)
    reward_mean_min: float | None = None
    invalid_rate: float = Field(0.0, ge=0.0, le=1.0)
    tool_call_patterns: tuple[str, ...] = DEFAULT_TOOL_CALL_PATTERNS
    thinking_tags: tuple[str, ...] = DEFAULT_THINKING_TAGS
    error_patterns: tuple[str, ...] = DEFAULT_ERROR_PATTERNS


class ConvergenceSpec(_Strict):
    """The ``rlgate.convergence`` block."""

    target_step: int | None = Field(None, gt=0)
    completion: CompletionSpec = CompletionSpec()
    checks: tuple[AnyCheck, ...] = ()
    reward: RewardSpec | None = None
    agentic: AgenticSpec | None = None
    rollouts: RolloutGateSpec | None = None

    @model_validator(mode="after")
    def _unique_names(self) -> ConvergenceSpec:
        seen: set[str] = set()
        for i, check in enumerate(self.checks):
            name = check.name or f"condition_{i + 1}"
            if name in seen:
                raise ValueError(f"duplicate check name {name!r}")
            seen.add(name)
        return self

    def named_conditions(self) -> list[tuple[str, Condition, str]]:
        """``(name, condition, reason)`` for every declared check, in order."""
        return [
            (c.name or f"condition_{i + 1}", c.to_condition(), c.reason)
            for i, c in enumerate(self.checks)
        ]


class AsyncVsSyncSpec(_Strict):
    """An async run must be at least ``min_speedup`` times faster than its sync twin."""

    min_speedup: float = Field(1.0, gt=0.0)
    metrics: dict[str, Direction] = {"timing/train/total_step_time": Direction.LOWER}


class PerfSpec(_Strict):
    """The ``rlgate.checks.perf`` block (see :mod:`rlgate.checks.perf` for the statistics)."""

    warmup_steps: int = Field(3, ge=0)
    alpha: float = Field(0.01, gt=0.0, lt=0.5)
    min_effect: float = Field(0.05, ge=0.0)
    metrics: dict[str, Direction] = {
        "timing/train/total_step_time": Direction.LOWER,
        "performance/tokens_per_sec_per_gpu": Direction.HIGHER,
    }
    async_vs_sync: AsyncVsSyncSpec | None = None


class BandMetricSpec(_Strict):
    """One band metric: which side is bad and which statistics to check."""

    better: Direction
    method: BandMethod = BandMethod.BOTH


class BandSpec(_Strict):
    """The ``rlgate.band`` block: a reference band from earlier good runs."""

    min_runs: int = Field(5, ge=3)
    runs: tuple[str, ...] = ()
    alpha: float = Field(0.01, gt=0.0, lt=0.5)
    max_outside: float = Field(0.2, ge=0.0, le=1.0)
    warmup_steps: int = Field(0, ge=0)
    metrics: dict[str, BandMetricSpec] = {}

    @field_validator("metrics", mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        if isinstance(value, list | tuple):  # [tag, ...]: direction must be explicit
            raise ValueError("give each band metric a direction: {tag: higher|lower}")
        if isinstance(value, Mapping):
            return {k: {"better": v} if isinstance(v, str) else v for k, v in value.items()}
        return value


TIERS = ("functional", "convergence", "perf", "swe_gate")
TierName = Literal["functional", "convergence", "perf", "swe_gate"]


class KnownLimitation(_Strict):
    """A documented, real limitation a functional check is expected to hit (strict xfail)."""

    check: Literal["contiguity", "round_trip", "streaming"]
    scenario: str
    reason: str


class FunctionalGate(_Strict):
    """The ``rlgate.functional`` block: what the functional tier expects of the served path."""

    expect: Literal["pass", "reject"] = "pass"
    reject_codes: tuple[str, ...] = ()
    data_tool_format: Literal["xml", "json"] | None = None
    data_reasoning: bool | None = None
    known_limitations: tuple[KnownLimitation, ...] = ()


class GateSpec(_Strict):
    """The whole ``rlgate:`` block.

    ``expect`` and ``reject_reasons`` at the top level are older spellings of the functional
    block's keys: accepted and ignored.
    """

    tiers: tuple[TierName, ...] | None = None
    expect: Any = None
    reject_reasons: Any = None
    functional: FunctionalGate = FunctionalGate()
    convergence: ConvergenceSpec | None = None
    perf: PerfSpec | None = None
    band: BandSpec | None = None

    @field_validator("functional", mode="before")
    @classmethod
    def _functional_null(cls, value: Any) -> Any:
        return {} if value is None else value


def _vocabulary() -> set[str]:
    names: set[str] = set()
    for model in (
        CheckSpec,
        ConditionCheckSpec,
        CompletionSpec,
        RewardSpec,
        AgenticSpec,
        RolloutGateSpec,
        ConvergenceSpec,
        AsyncVsSyncSpec,
        PerfSpec,
        BandMetricSpec,
        BandSpec,
        KnownLimitation,
        FunctionalGate,
        GateSpec,
    ):
        names.update(model.model_fields)
    return names


def _format_errors(exc: ValidationError, recipe: str) -> str:
    vocab = _vocabulary()
    lines = []
    for err in exc.errors():
        parts = list(err["loc"])
        parts = [  # drop the union tag pydantic inserts after a list index
            p
            for i, p in enumerate(parts)
            if not (p in ("typed", "condition") and i > 0 and isinstance(parts[i - 1], int))
        ]
        loc = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in parts).replace(".[", "[")
        where = f"rlgate.{loc}" if loc else "rlgate"
        if err["type"] == "extra_forbidden":
            key = str(err["loc"][-1])
            close = difflib.get_close_matches(key, vocab, n=1, cutoff=0.6)
            tip = f"; did you mean {close[0]!r}?" if close else ""
            lines.append(f"  {where}: unknown key{tip}")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(f"  {where}: {msg} (got {err.get('input')!r})")
    return f"recipe {recipe}: invalid rlgate block:\n" + "\n".join(lines)


def parse_gate(raw: Mapping[str, Any] | GateSpec | None, *, recipe: str = "<recipe>") -> GateSpec:
    """Validate a recipe's raw ``rlgate:`` mapping; RecipeError lists every problem.

    ``Recipe.gate`` is already parsed (by ``load_recipe``) and is returned as it is.
    """
    if isinstance(raw, GateSpec):
        return raw
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise RecipeError(f"recipe {recipe}: rlgate must be a mapping, got {type(raw).__name__}")
    try:
        return GateSpec.model_validate(dict(raw))
    except ValidationError as exc:
        raise RecipeError(
            _format_errors(exc, recipe), hint="the schema is in docs/convergence-and-perf.md"
        ) from None
