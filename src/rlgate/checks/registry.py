"""The check-kind registry: a kind of check is one spec model, one planner, one evaluator.

A *check kind* (:class:`CheckKind`) is one module of :mod:`rlgate.checks.kinds` holding:

* ``name`` (unique), ``tier`` (its checks' tier; ``None`` when each planned check says, as
  the band's do by metric), ``order`` (its place in the plan);
* ``section`` and ``spec_model``: the key of the recipe's ``rlgate:`` block it reads and a
  pydantic model (:class:`~rlgate.recipe.spec.StrictModel`) of the fields it reads there,
  given as the class's base: ``class Reward(CheckKind[RewardFields])``;
* ``plan(spec, context)``: the :class:`PlannedCheck` s the recipe declares (may be none);
* ``evaluate(spec, check, inputs, context)``: one planned check on the loaded
  :class:`GateInputs`, a :class:`~rlgate.core.results.Result`; pure, and never raising for
  bad data (a missing metric is an ERROR Result, a regression a FAIL);
* optionally ``context(spec)``: the run-context facts the block sets (the target step, the
  agent's turn limit), and ``inputs(spec)``: what the block says about an input
  (:class:`InputDefaults`: reference-run globs, how rollouts are read).

**Registration** is by import: ``@register`` on the class. The first time the registry is
asked (:func:`kinds`, :func:`gate_model`), it imports every module of
:mod:`rlgate.checks.kinds`; adding a kind is adding a module there, and its test. A kind
defined elsewhere (a test, a site's plugin) is registered by importing its module, or for
a while with :func:`registered`.

**The ``rlgate:`` schema** is assembled from the kinds (:func:`gate_model`): each section's
model inherits the spec models of the kinds that read it, so each contributes its fields
and validators; a kind that reads another kind's fields subclasses its model
(``async_vs_sync`` reads the perf section's ``warmup_steps`` and ``alpha``). The sections
sit on the generic :class:`~rlgate.recipe.spec.GateSpec` (tiers, functional), unknown keys
refused everywhere. :func:`load_recipe` is :func:`rlgate.recipe.load.load_recipe` with that
schema: every command loads through it, so the whole block is validated once, at load.

The sections of the registered kinds (defaults in parentheses; windows are check_metrics
``[range_start, range_end]``)::

    rlgate:
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

import importlib
import os
import pkgutil
import typing
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, create_model

from rlgate.core.results import Outcome, Result, Tier
from rlgate.recipe.facts import RunContext
from rlgate.recipe.load import Recipe
from rlgate.recipe.load import load_recipe as _load_recipe
from rlgate.recipe.spec import ContextOverrides, GateSpec, StrictModel
from rlgate.recipe.spec import parse_gate as _parse_gate
from rlgate.runs.metrics import RunMetrics
from rlgate.runs.rollouts import RolloutPatterns, RolloutReport

__all__ = [
    "KINDS_PACKAGE",
    "NEED_OPTION",
    "CheckKind",
    "GateInputs",
    "InputDefaults",
    "Need",
    "PlannedCheck",
    "gate_model",
    "get_kind",
    "kinds",
    "load_recipe",
    "parse_gate",
    "register",
    "registered",
]

#: The package whose every module is a check kind (imported on first use).
KINDS_PACKAGE = "rlgate.checks.kinds"


class Need(Enum):
    """The input a check needs besides the run itself."""

    RUN = "run"
    BASELINE = "baseline"
    ROLLOUTS = "rollouts"
    BAND = "band"
    SYNC = "sync"


# Need -> the option that provides it (CLI spelling; pytest uses the same names).
NEED_OPTION = {
    Need.BASELINE: "--baseline",
    Need.ROLLOUTS: "--rollouts",
    Need.BAND: "--band-run (or rlgate.band.runs in the recipe; check-run: --db and promoted runs)",
    Need.SYNC: "--sync-run",
}


@dataclass(frozen=True, slots=True)
class PlannedCheck:
    """One check the recipe declares; ``skip`` says why it cannot run with this recipe.

    ``kind`` names the :class:`CheckKind` that planned it and evaluates it; ``params`` is
    what that kind's planner left for its evaluator (which bound, which statistic).
    """

    name: str
    tier: Tier
    need: Need = Need.RUN
    metric: str | None = None
    reason: str = ""
    skip: str | None = None
    kind: str = ""
    params: Any = field(default=None, hash=False)


@dataclass(frozen=True, slots=True)
class GateInputs:
    """Everything a plan is evaluated on.

    ``band_origin`` says where ``band_runs`` came from when they are not the runs given
    (``rlgate check-run --db``: the recipe's promoted runs in the history); with it, the
    band checks run even on fewer runs than the band's minimum, and say so as an ERROR.
    """

    run: RunMetrics
    baseline: RunMetrics | None = None
    rollouts: RolloutReport | None = None
    band_runs: tuple[RunMetrics, ...] = ()
    sync_run: RunMetrics | None = None
    band_origin: str | None = None

    def has(self, need: Need) -> bool:
        """Whether the input ``need`` was given."""
        return {
            Need.RUN: True,
            Need.BASELINE: self.baseline is not None,
            Need.ROLLOUTS: self.rollouts is not None,
            Need.BAND: bool(self.band_runs) or self.band_origin is not None,
            Need.SYNC: self.sync_run is not None,
        }[need]


@dataclass(frozen=True, slots=True)
class InputDefaults:
    """What a recipe's ``rlgate:`` block says about the optional inputs.

    ``band_runs``: the reference runs (globs, relative to the recipe) used when no
    ``--band-run`` is given; ``rollout_patterns``: how ``--rollouts`` is read.
    """

    band_runs: tuple[str, ...] = ()
    rollout_patterns: RolloutPatterns | None = None

    def merged(self, other: InputDefaults) -> InputDefaults:
        """These defaults, with each field this one leaves unset taken from ``other``."""
        unset = InputDefaults()
        return replace(
            self,
            **{
                f.name: getattr(other, f.name)
                for f in fields(self)
                if getattr(self, f.name) == getattr(unset, f.name)
            },
        )


S = TypeVar("S", bound=BaseModel)


class CheckKind(ABC, Generic[S]):
    """One kind of check (module docstring); subclass, set the class attributes, register."""

    name: ClassVar[str]
    tier: ClassVar[Tier | None]
    section: ClassVar[str]
    spec_model: ClassVar[type[StrictModel]]  # the ``S`` of ``CheckKind[S]``
    order: ClassVar[int] = 1000

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Take ``spec_model`` from the class's ``CheckKind[S]`` base."""
        super().__init_subclass__(**kwargs)
        for base in cls.__dict__.get("__orig_bases__", ()):
            args = typing.get_args(base) if typing.get_origin(base) is CheckKind else ()
            if args and isinstance(args[0], type):
                cls.spec_model = args[0]

    @abstractmethod
    def plan(self, spec: S, context: RunContext) -> list[PlannedCheck]:
        """The checks the recipe declares, given the section (``spec``) that holds them."""

    @abstractmethod
    def evaluate(
        self, spec: S, check: PlannedCheck, inputs: GateInputs, context: RunContext
    ) -> Result:
        """One planned check of this kind on the inputs (which hold what ``check.need`` says)."""

    def context(self, spec: S) -> ContextOverrides:
        """The run-context facts this kind's fields set (none by default)."""
        return {}

    def inputs(self, spec: S) -> InputDefaults:
        """What this kind's fields say about the optional inputs (nothing by default)."""
        return InputDefaults()

    def check(
        self,
        name: str,
        *,
        tier: Tier | None = None,
        need: Need = Need.RUN,
        metric: str | None = None,
        reason: str = "",
        skip: str | None = None,
        params: Any = None,
    ) -> PlannedCheck:
        """A :class:`PlannedCheck` of this kind (tier: the kind's unless given)."""
        chosen = tier or self.tier
        if chosen is None:
            raise TypeError(f"check kind {self.name!r} has no tier: give each check its own")
        return PlannedCheck(name, chosen, need, metric, reason, skip, self.name, params)

    @staticmethod
    def error(check: PlannedCheck, message: str, **comparison: Any) -> Result:
        """The ERROR of a check whose input lacks what it needs (the value is unknown)."""
        return Result(
            name=check.name,
            tier=check.tier,
            outcome=Outcome.ERROR,
            message=message,
            metric=check.metric,
            **({"bound": "?"} | comparison),
        )


_KINDS: dict[str, CheckKind[Any]] = {}
_STATE: dict[str, Any] = {"discovered": False, "model": None}


def _discover() -> None:
    """Import every module of :data:`KINDS_PACKAGE` once (each registers its kind)."""
    if _STATE["discovered"]:
        return
    _STATE["discovered"] = True
    package = importlib.import_module(KINDS_PACKAGE)
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        importlib.import_module(f"{KINDS_PACKAGE}.{info.name}")


def _check_kind(kind: CheckKind[Any]) -> None:
    """Refuse a kind whose declaration is incomplete or clashes with a registered one."""
    cls = type(kind)
    for attr in ("name", "tier", "section", "spec_model"):
        if not hasattr(cls, attr):
            raise TypeError(f"check kind {cls.__name__} does not set {attr}")
    if not isinstance(kind.name, str) or not kind.name:
        raise TypeError(f"check kind {cls.__name__}: name must be a non-empty string")
    if not kind.section.isidentifier() or kind.section in GateSpec.model_fields:
        raise TypeError(f"check kind {kind.name!r}: section {kind.section!r} cannot be used")
    if not (isinstance(kind.spec_model, type) and issubclass(kind.spec_model, StrictModel)):
        raise TypeError(f"check kind {kind.name!r}: spec_model must be a StrictModel")
    if kind.tier is not None and not isinstance(kind.tier, Tier):
        raise TypeError(f"check kind {kind.name!r}: tier must be a Tier or None")
    known = _KINDS.get(kind.name)
    if known is not None and type(known) is not cls:
        raise ValueError(f"check kind name {kind.name!r} is already registered by {known!r}")
    for other in _KINDS.values():
        if other.section != kind.section or other.name == kind.name:
            continue
        a, b = kind.spec_model, other.spec_model
        if issubclass(a, b) or issubclass(b, a):
            continue
        clash = set(a.model_fields) & set(b.model_fields)
        if clash:
            raise ValueError(
                f"check kinds {kind.name!r} and {other.name!r} both declare "
                f"rlgate.{kind.section}.{sorted(clash)[0]}"
            )


K = TypeVar("K", bound=type[CheckKind[Any]])


def register(cls: K) -> K:
    """Class decorator: register one instance of the kind (its module's import does it)."""
    _discover()  # the shipped kinds first, so a clash with one of them is seen
    kind = cls()
    _check_kind(kind)
    _KINDS[kind.name] = kind
    _STATE["model"] = None
    return cls


@contextmanager
def registered(*classes: type[CheckKind[Any]]) -> Iterator[None]:
    """Register kinds for the ``with`` block only (a test's kind; the others stay)."""
    _discover()
    added = []
    try:
        for cls in classes:
            name = getattr(cls, "name", None)
            if name in _KINDS:
                raise ValueError(f"check kind name {name!r} is already registered")
            register(cls)
            added.append(name)
        yield
    finally:
        for name in added:
            _KINDS.pop(name, None)
        _STATE["model"] = None


def kinds() -> list[CheckKind[Any]]:
    """Every registered kind, in plan order (``order``, then name)."""
    _discover()
    return sorted(_KINDS.values(), key=lambda k: (k.order, k.name))


def get_kind(name: str) -> CheckKind[Any]:
    """The registered kind called ``name`` (KeyError when there is none)."""
    _discover()
    return _KINDS[name]


class _CheckedGate(GateSpec):
    """The generic block with the kinds' sections: unknown keys refused."""

    model_config = ConfigDict(extra="forbid")

    def context_overrides(self) -> ContextOverrides:
        """The run-context facts the kinds' fields set (the first kind to set one wins)."""
        out: ContextOverrides = {}
        for kind in kinds():
            spec = getattr(self, kind.section, None)
            if spec is not None:
                out = kind.context(spec) | out  # type: ignore[assignment]
        return out


def _section_model(section: str, members: Sequence[CheckKind[Any]]) -> type[BaseModel]:
    """The section's model: it inherits every member's spec model (subclasses first)."""
    bases: list[type[StrictModel]] = []
    for kind in members:
        if kind.spec_model not in bases:
            bases.append(kind.spec_model)
    bases = [b for b in bases if not any(o is not b and issubclass(o, b) for o in bases)]
    name = "".join(part.title() for part in section.split("_")) + "Spec"  # ConvergenceSpec...
    # pydantic lists the fields of later bases first: reversed, they follow the plan order
    return create_model(name, __base__=tuple(reversed(bases)), __module__=__name__)


def gate_model() -> type[GateSpec]:
    """The ``rlgate:`` block's schema: the generic keys and every registered kind's section."""
    model = _STATE["model"]
    if model is not None:
        return model
    sections: dict[str, list[CheckKind[Any]]] = {}
    for kind in kinds():
        sections.setdefault(kind.section, []).append(kind)
    typed: dict[str, Any] = {
        section: (_section_model(section, members) | None, None)
        for section, members in sections.items()
    }
    model = create_model("GateSpec", __base__=_CheckedGate, __module__=__name__, **typed)
    _STATE["model"] = model
    return model


def parse_gate(raw: Any, *, recipe: str = "<recipe>") -> GateSpec:
    """Validate a raw ``rlgate:`` mapping with :func:`gate_model` (RecipeError lists problems).

    A block :func:`load_recipe` validated is returned as it is.
    """
    return _parse_gate(raw, recipe=recipe, schema=gate_model())


def load_recipe(
    path: str | os.PathLike[str], overrides: Sequence[str] = (), *, strict: bool = True
) -> Recipe:
    """:func:`rlgate.recipe.load.load_recipe` with the kinds' schema: what every command uses."""
    return _load_recipe(path, overrides, strict=strict, gate=gate_model())
