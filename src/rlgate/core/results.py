"""The one result model: every check, criterion and gate of every tier is a :class:`Result`.

A :class:`Result` is what leaves a check (``rlgate.checks``), the SWE gate's criteria
(``rlgate.swe.compare``) and the rollout-path gate (``rlgate.bench.gate``); the CLI prints
it (:func:`render_table`), writes it as JSON (:meth:`Result.to_json`) and JUnit
(:mod:`rlgate.core.junit`), and the release report reads it back from both with the same
model. Decisions over results (the SWE comparison's verdict, the report's GO / NO-GO /
INCOMPLETE) are made elsewhere; their inputs are Results.

JSON form (``schema_version`` 1): ``{name, tier, status, value, op, threshold, unit, bound,
message, metric, evidence, informational, schema_version}``; ``status`` is the
:class:`Outcome`; a non-finite ``value``/``threshold`` is written as the string ``"nan"``,
``"inf"`` or ``"-inf"`` (strict JSON, and a NaN loss is shown, not dropped).

An ERROR whose cause is the infrastructure, not the code under test, says so in its
evidence under :data:`INFRA_CAUSE`: ``{"reason": <signature name>, "detail": <what matched>}``
(the SWE coverage criteria over their infra error rate, ``rlgate watch``'s infra signatures
and stalled runs); :attr:`Result.infra_cause` reads it, and triage labels such an ERROR
``infra`` (``docs/history.md``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from enum import Enum
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    PlainSerializer,
    field_validator,
    model_validator,
)

__all__ = [
    "CHECK_TIERS",
    "INFRA_CAUSE",
    "MODELS",
    "RELEASE_TIERS",
    "RESULT_SCHEMA_VERSION",
    "Op",
    "Outcome",
    "Result",
    "Tier",
    "number_text",
    "render_table",
]

#: Version of the Result's serialised form (JSON and the ``rlgate.*`` JUnit properties).
RESULT_SCHEMA_VERSION = 1


class Tier(Enum):
    """Where a result belongs: the four release tiers, then what the report also classifies."""

    FUNCTIONAL = "functional"
    CONVERGENCE = "convergence"
    PERF = "perf"
    SWE_GATE = "swe_gate"
    UNIT = "unit"  # rlgate's own tests: they gate (a broken gate vouches for nothing)
    OTHER = "other"  # a testcase whose classname names no tier


#: The tiers a release needs (``docs/recommendation-rule.md``).
RELEASE_TIERS = (Tier.FUNCTIONAL, Tier.CONVERGENCE, Tier.PERF, Tier.SWE_GATE)
#: The tiers of a recipe's planned checks (``rlgate check-run --tier``).
CHECK_TIERS = (Tier.CONVERGENCE, Tier.PERF)


#: Evidence key of an ERROR caused by the infrastructure: ``{"reason": str, "detail": str}``.
INFRA_CAUSE = "infra_cause"
#: Evidence key naming the models a Result judged: ``{"before": str, "after": str}`` (the SWE
#: gate's criteria, ``swe compare --before-model/--after-model``); triage keeps each pair of
#: models a series of its own.
MODELS = "models"


class Outcome(Enum):
    """PASS held; FAIL a regression; ERROR the check could not judge (input/infra); SKIP not run."""

    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    SKIP = "skip"


class Op(Enum):
    """A comparison of a value with its threshold (the ``check_metrics`` operators)."""

    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    EQ = "=="

    def holds(self, left: float, right: float) -> bool:
        """Apply the comparison (False for NaN, as in Python)."""
        return {
            Op.LT: left < right,
            Op.LE: left <= right,
            Op.GT: left > right,
            Op.GE: left >= right,
            Op.EQ: left == right,
        }[self]


_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
_NON_FINITE.update({"infinity": math.inf, "-infinity": -math.inf})


def _number(value: Any) -> Any:
    """A JSON number, or the string form of a non-finite one (``"nan"``, ``"inf"``...)."""
    if isinstance(value, str) and value.strip().lower() in _NON_FINITE:
        return _NON_FINITE[value.strip().lower()]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected a number (or 'nan', 'inf', '-inf'), got {value!r}")
    return float(value)


def _json_number(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


Number = Annotated[
    float,
    BeforeValidator(_number),
    PlainSerializer(_json_number, return_type=float | str, when_used="json"),
]


def number_text(value: float) -> str:
    """A threshold as a bound shows it (``0.05``, ``1e+03``, ``nan``)."""
    return f"{value:g}"


class Result(BaseModel):
    """One check's outcome with the numbers behind it.

    ``value`` is compared with ``threshold`` by ``op`` when the check is one comparison (it
    may be NaN: a NaN loss is what the check caught); ``bound`` is the bound as a person
    reads it (derived from ``op threshold`` when not given, e.g. ``"< 1.05"``; checks with a
    compound rule state it, e.g. ``"one-sided p < 0.05 and gain >= 0.02"``). ``unit`` says
    what ``value`` and ``threshold`` measure when that is not ``metric`` itself (``"x
    baseline"``, ``"share of steps"``, ``"step"``, ``"run mean"``); empty means they are
    values of ``metric`` (a condition's reduced value), so a plot of ``metric`` can draw the
    threshold. ``evidence`` is a JSON mapping of what a reader needs to re-check the
    outcome; ``informational`` is empty for a gate, else why it never gates (``benchmark``,
    ``instance``): it is shown, never counted.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="ignore",
        populate_by_name=True,
        serialize_by_alias=True,
        validate_by_name=True,
    )

    name: str
    tier: Tier
    outcome: Outcome = Field(alias="status")
    value: Number | None = None
    op: Op | None = None
    threshold: Number | None = None
    unit: str = ""
    bound: str = ""
    message: str = ""
    metric: str | None = None
    evidence: dict[str, JsonValue] = Field(default_factory=dict)
    informational: str = ""
    schema_version: int = RESULT_SCHEMA_VERSION

    @model_validator(mode="before")
    @classmethod
    def _bound_number(cls, data: Any) -> Any:
        # `rlgate swe compare --json` writes a criterion's bound as its threshold, a number
        if isinstance(data, dict) and not isinstance(data.get("bound"), bool | str | None):
            bound = data["bound"]
            if isinstance(bound, int | float):
                return {**data, "bound": number_text(bound)}
        return data

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, version: int) -> int:
        if not 1 <= version <= RESULT_SCHEMA_VERSION:
            raise ValueError(
                f"result schema_version {version}: this rlgate reads 1..{RESULT_SCHEMA_VERSION}"
            )
        return version

    def model_post_init(self, context: Any, /) -> None:
        """Derive ``bound`` from ``op threshold [unit]`` when it was not given."""
        if not self.bound and self.op is not None and self.threshold is not None:
            unit = f" {self.unit}" if self.unit else ""
            bound = f"{self.op.value} {number_text(self.threshold)}{unit}"
            object.__setattr__(self, "bound", bound)

    @property
    def passed(self) -> bool:
        """True for PASS."""
        return self.outcome is Outcome.PASS

    @property
    def executed(self) -> bool:
        """True when the check ran to an outcome (not skipped)."""
        return self.outcome is not Outcome.SKIP

    @property
    def infra_cause(self) -> str | None:
        """The infrastructure reason of an ERROR (evidence :data:`INFRA_CAUSE`), else None.

        Only an ERROR can have one (a FAIL judged the code); a malformed entry is none.
        """
        cause = self.evidence.get(INFRA_CAUSE)
        if self.outcome is not Outcome.ERROR or not isinstance(cause, dict):
            return None
        reason = cause.get("reason")
        return reason if isinstance(reason, str) and reason.strip() else None

    def to_json(self) -> dict[str, Any]:
        """The JSON form (module docstring); :meth:`from_json` reads it back."""
        return self.model_dump(mode="json")

    @classmethod
    def from_json(cls, data: Any) -> Result:
        """Read a JSON form (raises pydantic's ``ValidationError`` on a bad one)."""
        return cls.model_validate(data)


# --- the text table (rlgate check-run, swe compare's criteria, bench rollout's gate) --------


def _value_text(value: float | None) -> str:
    if value is None:
        return ""
    return str(value) if not math.isfinite(value) else f"{value:.6g}"


def render_table(results: Sequence[Result], lines: Iterable[str] = ()) -> str:
    """One line per result (outcome, name, value, bound, message), then the counts.

    ``lines`` (a title, warnings) are printed first, as given.
    """
    width = max((len(r.name) for r in results), default=4)
    out = list(lines)
    for r in results:
        status = r.outcome.value.upper()
        out.append(
            f"  {status:<5} {r.name:<{width}}  {_value_text(r.value):>10}  {r.bound:<24} "
            f"{r.message}"
        )
    ran = [r for r in results if r.executed]
    failed = sum(not r.passed for r in ran)
    out.append(
        f"{len(ran) - failed} passed, {failed} failed or errored, {len(results) - len(ran)} skipped"
    )
    return "\n".join(out) + "\n"
