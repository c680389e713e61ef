"""The ``rlgate:`` block of a recipe: its generic keys, and the validator of the whole block.

A recipe is a NeMo RL config plus one top-level ``rlgate:`` mapping (NeMo RL's
``MasterConfig`` allows extra keys, so the recipe stays runnable). Its keys come in two
kinds:

* the keys every tier reads, defined here (:class:`GateSpec`)::

      rlgate:
        tiers: [functional, convergence, perf, swe_gate]   (all four)
        functional:
          expect: pass|reject (pass), reject_codes: [finding codes], data_tool_format: xml|json,
          data_reasoning: bool, known_limitations: [{check: contiguity|round_trip|streaming,
                                                     scenario, reason}]

* the check sections (``convergence``, ``perf``, ``band``...): each is the union of the
  fields its check kinds read, assembled by :mod:`rlgate.checks.registry` from the kinds'
  spec models (schema in its docstring). This layer cannot know the kinds (they live
  above it), so the assembled model is handed to :func:`parse_gate` (``schema=``) and to
  :func:`rlgate.recipe.load.load_recipe` (``gate=``); :func:`rlgate.checks.registry.load_recipe`
  is the loader every command uses.

:func:`parse_gate` validates strictly: unknown keys are errors with a did-you-mean, and
every problem is listed in one :class:`~rlgate.core.errors.RecipeError`. With the generic
:class:`GateSpec` alone, the check sections are kept as given (unvalidated mappings).
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Tag, ValidationError, field_validator

from rlgate.core.errors import RecipeError

__all__ = [
    "TIERS",
    "ContextOverrides",
    "FunctionalGate",
    "GateSpec",
    "KnownLimitation",
    "StrictModel",
    "parse_gate",
]


class StrictModel(BaseModel):
    """Base of every model of the ``rlgate:`` block: unknown keys refused, frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False)


class ContextOverrides(TypedDict, total=False):
    """What the ``rlgate:`` block says about the run context (``rlgate.recipe.facts``)."""

    target_step: int
    agent_max_turns: int


TIERS = ("functional", "convergence", "perf", "swe_gate")
TierName = Literal["functional", "convergence", "perf", "swe_gate"]


class KnownLimitation(StrictModel):
    """A documented, real limitation a functional check is expected to hit (strict xfail)."""

    check: Literal["contiguity", "round_trip", "streaming"]
    scenario: str
    reason: str


class FunctionalGate(StrictModel):
    """The ``rlgate.functional`` block: what the functional tier expects of the served path."""

    expect: Literal["pass", "reject"] = "pass"
    reject_codes: tuple[str, ...] = ()
    data_tool_format: Literal["xml", "json"] | None = None
    data_reasoning: bool | None = None
    known_limitations: tuple[KnownLimitation, ...] = ()


class GateSpec(BaseModel):
    """The generic keys of the ``rlgate:`` block; the check sections are added above.

    ``expect`` and ``reject_reasons`` at the top level are older spellings of the functional
    block's keys: accepted and ignored. Other keys are kept as given (``extra="allow"``):
    the check registry's subclass (``rlgate.checks.registry.gate_model``) types them and
    refuses unknown ones.
    """

    model_config = ConfigDict(extra="allow", frozen=True, use_enum_values=False)

    tiers: tuple[TierName, ...] | None = None
    expect: Any = None
    reject_reasons: Any = None
    functional: FunctionalGate = FunctionalGate()
    #: A check whose value changed inside its bound (triage label ``drift``) blocks the
    #: release instead of being informational (docs/history.md, "Change points").
    block_on_drift: bool = False

    @field_validator("functional", mode="before")
    @classmethod
    def _functional_null(cls, value: Any) -> Any:
        return {} if value is None else value

    def context_overrides(self) -> ContextOverrides:
        """The run-context facts the block sets (none here; the check kinds add theirs)."""
        return {}


def _walk(annotation: Any) -> Iterator[Any]:
    """Every type and ``Annotated`` metadata item reachable from ``annotation``."""
    stack = [annotation]
    while stack:
        item = stack.pop()
        yield item
        if typing.get_origin(item) is Annotated:
            stack += [typing.get_args(item)[0], *item.__metadata__]
        elif isinstance(item, types.UnionType) or typing.get_origin(item) is not None:
            stack += list(typing.get_args(item))


def _schema_words(schema: type[BaseModel]) -> tuple[set[str], set[str]]:
    """Every field name of ``schema`` and its nested models; the tags of its tagged unions."""
    names: set[str] = set()
    tags: set[str] = set()
    seen: set[type[BaseModel]] = set()
    models = [schema]
    while models:
        model = models.pop()
        if model in seen:
            continue
        seen.add(model)
        names.update(model.model_fields)
        for info in model.model_fields.values():
            for item in _walk(info.annotation):
                if isinstance(item, Tag):
                    tags.add(item.tag)
                elif isinstance(item, type) and issubclass(item, BaseModel):
                    models.append(item)
            tags.update(t.tag for t in info.metadata if isinstance(t, Tag))
    return names, tags


def _format_errors(exc: ValidationError, recipe: str, schema: type[BaseModel]) -> str:
    vocab, tags = _schema_words(schema)
    lines = []
    for err in exc.errors():
        parts = list(err["loc"])
        parts = [  # drop the union tag pydantic inserts after a list index
            p
            for i, p in enumerate(parts)
            if not (p in tags and i > 0 and isinstance(parts[i - 1], int))
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


def parse_gate(
    raw: Mapping[str, Any] | GateSpec | None,
    *,
    recipe: str = "<recipe>",
    schema: type[GateSpec] = GateSpec,
) -> GateSpec:
    """Validate a recipe's raw ``rlgate:`` mapping with ``schema``; RecipeError lists every problem.

    A block already validated with ``schema`` (``Recipe.gate``) is returned as it is; one
    validated with the generic :class:`GateSpec` only is validated again with ``schema``.
    """
    if isinstance(raw, schema):
        return raw
    if isinstance(raw, GateSpec):
        raw = raw.model_dump(exclude_unset=True)
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise RecipeError(f"recipe {recipe}: rlgate must be a mapping, got {type(raw).__name__}")
    try:
        return schema.model_validate(dict(raw))
    except ValidationError as exc:
        raise RecipeError(
            _format_errors(exc, recipe, schema),
            hint="the schema is in docs/convergence-and-perf.md",
        ) from None
