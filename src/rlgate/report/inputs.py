"""Read the release report's inputs: JUnit files, check-run / swe-compare JSON, recipe facts.

Read-only. Every reader raises :class:`~rlgate.core.errors.RlgateError` naming the file on
input it cannot trust; nothing is skipped silently. The boundary is here, one reader per
kind of input, and what they give is typed results:

* JUnit: :func:`rlgate.core.junit.read_junit` (a regular file of at most
  ``MAX_JUNIT_BYTES``, well-formed XML nested at most ``MAX_XML_DEPTH`` deep, testcase
  ``time`` a number of seconds >= 0, every recorded ``rlgate.*`` field of its type, an
  ``rlgate.verdict`` one of pass/fail/error/skip); each testcase becomes a :class:`Case`
  holding its :class:`~rlgate.core.results.Result`. A swe_gate criterion's evidence numbers
  (delta, CI) must be finite;
* JSON (``check-run --json``, ``swe compare --json``): at most ``MAX_JSON_BYTES`` of strict
  UTF-8 read by :func:`rlgate.core.io.read_json`, then validated by the models that write
  them (``checks.document.RunDocument``, whose checks are Results) or strict pydantic models
  (no coercion of strings or booleans to numbers, finite numbers, rates in [0, 1], counts
  >= 0, both arms and the dataset of the same size; criteria are Results).

JUnit merging: rlgate's tiers write xunit1 (``junit_family = "xunit1"``), whose testcase
``file``/``line`` attributes and ``<properties>`` are not allowed by pytest's
``junit-10.xsd``. The merged file (core's writer, ``junit-10`` layout) keeps every suite
and testcase with its outcome, moves each testcase's location and properties into its
``<system-out>`` (``[rlgate] key = value`` lines) and records each suite's source file and
sha256 as suite properties, so it validates against the schema and still carries the
evidence. The input files are never modified.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rlgate.checks.document import RunDocument
from rlgate.core.errors import RlgateError
from rlgate.core.io import SCHEMA_VERSION, read_json, require_regular_file
from rlgate.core.junit import (
    MAX_JUNIT_BYTES,
    MAX_XML_DEPTH,
    VERDICT_PROPERTY,
    JunitCase,
    JunitSuite,
    read_junit,
    write_junit,
    xml_text,
)
from rlgate.core.results import Outcome, Result, Tier
from rlgate.core.text import unescape_controls
from rlgate.swe.compare import Verdict as SweVerdict
from rlgate.swe.report import INSTANCE_SUITE, REDUCED, REDUCED_SUITE

__all__ = [
    "DIRECTORY_DIGEST",
    "MAX_JSON_BYTES",
    "MAX_JUNIT_BYTES",
    "MAX_XML_DEPTH",
    "SWE_NUMBERS",
    "VERDICT",
    "VERDICT_TIERS",
    "Case",
    "JunitEvidence",
    "RunDocument",
    "SweComparisonDoc",
    "SweDoc",
    "load_junit",
    "load_run_doc",
    "load_swe_doc",
    "sha256_path",
]

MAX_JSON_BYTES = 64 * 2**20

VERDICT = VERDICT_PROPERTY
# Tiers whose gate checks record their Result (``rlgate.verdict``): the convergence and perf
# checks (rlgate.pytest_plugin.tier, check-run --junit, the rollout-path gate) and the SWE
# gate criteria. A testcase of these tiers without one (a benchmark, a sanity test of a
# benchmark's inputs) is evidence, but not a gate check that makes its tier count as run.
VERDICT_TIERS = (Tier.CONVERGENCE, Tier.PERF, Tier.SWE_GATE)
#: ``Result.informational`` kinds honoured only in the suite rlgate writes them in.
PLACED_KINDS = {"instance": INSTANCE_SUITE, REDUCED: REDUCED_SUITE}
#: ``Result.informational`` kinds honoured anywhere (rlgate's pytest plugin's
#: ``INFORMATIONAL_MARKERS``; a test checks the two agree).
FREE_KINDS = frozenset({"benchmark"})
# the numbers a swe_gate significance criterion carries in its evidence (rlgate.swe.compare)
SWE_NUMBERS = ("delta_pp", "ci95_low_pp", "ci95_high_pp")


@dataclass(frozen=True, slots=True)
class Case:
    """One testcase of one input file: its Result, where it came from, its anchor.

    ``informational`` is empty for a gate testcase, else why it is not one (the Result's:
    ``instance`` for the per-instance suite of ``swe compare``, ``benchmark`` set by
    rlgate's pytest plugin on benchmarks). ``shown`` is the outcome the JUnit shows,
    ``recorded`` the one its ``rlgate.verdict`` records; when both exist and differ the
    testcase ``contradicts`` itself (docs/recommendation-rule.md: never GO).
    """

    anchor: str
    source: str
    suite: str
    junit: JunitCase

    @property
    def result(self) -> Result:
        """The Result the testcase carries."""
        return self.junit.result

    @property
    def name(self) -> str:
        """The check's name (the testcase's, when it recorded none)."""
        return self.junit.result.name

    @property
    def tier(self) -> Tier:
        """The Result's tier."""
        return self.junit.result.tier

    @property
    def shown(self) -> Outcome:
        """The outcome the JUnit shows."""
        return self.junit.shown

    @property
    def message(self) -> str:
        """The Result's message on one line."""
        return " ".join(self.junit.result.message.split())

    @property
    def status(self) -> str:
        """``passed`` / ``failed`` / ``error`` / ``skipped`` / ``xfailed``, as tables say it."""
        if self.junit.xfail:
            return "xfailed"
        return {
            Outcome.PASS: "passed",
            Outcome.FAIL: "failed",
            Outcome.ERROR: "error",
            Outcome.SKIP: "skipped",
        }[self.shown]

    @property
    def informational(self) -> str:
        """Why the testcase never gates ("" for a gate testcase).

        A kind is honoured only where rlgate writes it: ``instance`` in the per-instance
        suite, ``reduced`` in the reduced comparison's suite (:data:`PLACED_KINDS`),
        ``benchmark`` anywhere (:data:`FREE_KINDS`); any other kind, or a placed kind
        elsewhere, does not take a testcase out of the gate.
        """
        kind = self.result.informational
        if not kind and self.junit.classname.startswith(INSTANCE_SUITE):
            kind = "instance"
        if kind in PLACED_KINDS:
            return kind if self.junit.classname.startswith(PLACED_KINDS[kind]) else ""
        return kind if kind in FREE_KINDS else ""

    @property
    def hides_failure(self) -> bool:
        """An informational testcase that could be anywhere (a benchmark) failed or errored.

        Never a gate check, but never waved through either: the report is at best
        INCOMPLETE, and triage labels it (a failing check cannot be hidden by marking it).
        """
        bad = (Outcome.FAIL, Outcome.ERROR)
        return self.informational in FREE_KINDS and (
            self.shown in bad or (self.junit.recorded and self.result.outcome in bad)
        )

    @property
    def executed(self) -> bool:
        """True when the test body ran to a verdict (not skipped, not an expected failure)."""
        return self.shown is not Outcome.SKIP

    @property
    def gating(self) -> bool:
        """A gate check: not informational and, in a verdict tier, it records its Result."""
        if self.informational:
            return False
        return self.tier not in VERDICT_TIERS or self.junit.recorded

    @property
    def recorded(self) -> Outcome | None:
        """The outcome the testcase records (``rlgate.verdict``), None when it records none."""
        return self.result.outcome if self.junit.recorded else None

    @property
    def contradicts(self) -> bool:
        """The recorded outcome is not the shown one: which of the two is true is unknown."""
        return self.junit.contradicts

    @property
    def judged(self) -> Result:
        """The Result as a gate must judge it (:attr:`rlgate.core.junit.JunitCase.judged`)."""
        return self.junit.judged

    @property
    def evaluated(self) -> bool:
        """A gate check judged to PASS or FAIL, shown and recorded alike (its tier ran).

        A skip, an expected failure, an ERROR (the check could not judge) and a testcase
        whose element contradicts its recorded verdict were not evaluated.
        """
        return (
            self.gating
            and not self.contradicts
            and not self.junit.tier_contradicts
            and self.shown in (Outcome.PASS, Outcome.FAIL)
        )

    @property
    def allowed_skip(self) -> bool:
        """A skipped or expected-failure gate testcase the report allows (and lists)."""
        return (
            self.shown is Outcome.SKIP
            and not self.informational
            and not self.contradicts
            and not self.junit.tier_contradicts
        )

    def fact(self, key: str) -> str | None:
        """A free ``rlgate.*`` fact (``rlgate.template_sha256``) as recorded, or None."""
        raw = self.junit.prop(key)
        return unescape_controls(raw) if raw is not None else None

    def flag(self, key: str) -> bool:
        """A boolean ``rlgate.*`` fact (``rlgate.block_on_drift``): absent is false.

        Raises:
            RlgateError: the value is neither ``true`` nor ``false`` (exit 2).
        """
        raw = self.fact(key)
        if raw is None or raw == "false":
            return False
        if raw == "true":
            return True
        raise RlgateError(
            f"{self.source}: testcase {self.name!r}: property {key} is {raw[:80]!r}, "
            "not true or false",
            hint="rlgate writes it from the recipe's rlgate: block (check-run, the gate tiers)",
        )


@dataclass(frozen=True, slots=True)
class JunitEvidence:
    """Every testcase of the inputs, the suites they came in and the merged JUnit text."""

    cases: tuple[Case, ...]
    suites: tuple[JunitSuite, ...]
    merged_xml: str

    @property
    def suite_properties(self) -> tuple[tuple[str, str, str], ...]:
        """Every suite property as (source, name, value)."""
        return tuple(
            (s.source, name, unescape_controls(value))
            for s in self.suites
            for name, value in s.properties
        )


#: What :func:`sha256_path` gives for a directory (its files are not hashed).
DIRECTORY_DIGEST = "directory"


def sha256_path(path: Path) -> str:
    """sha256 of a regular file (streamed), :data:`DIRECTORY_DIGEST` for a folder, else ``""``."""
    if path.is_dir():
        return DIRECTORY_DIGEST
    if not path.is_file():  # a FIFO or device would block or never end
        return ""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _check_swe_numbers(case: JunitCase, source: str) -> None:
    """A swe_gate criterion's evidence numbers are finite (the report recomputes with them)."""
    result = case.result
    if result.tier is not Tier.SWE_GATE or result.informational or not case.recorded:
        return
    for key in SWE_NUMBERS:
        value = result.evidence.get(key)
        finite = isinstance(value, int | float) and not isinstance(value, bool)
        if key in result.evidence and not (finite and math.isfinite(value)):
            raise RlgateError(
                f"{source}: testcase {case.name!r}: {result.name} evidence {key} = {value!r} "
                "is not a finite number",
                hint="regenerate the JUnit with the rlgate command or tier that wrote it",
            )


def load_junit(paths: Sequence[str | os.PathLike[str]]) -> JunitEvidence:
    """Read every JUnit file into Cases, and build the merged (junit-10.xsd) document."""
    if not paths:
        raise RlgateError("no JUnit file given", hint="pass --junit FILE (one per tier or one)")
    cases: list[Case] = []
    read: list[JunitSuite] = []
    merged: list[JunitSuite] = []
    for raw in paths:
        path = Path(raw)
        suites = read_junit(path)
        digest = sha256_path(path)
        for suite in suites:
            named = replace(suite, name=suite.name or xml_text(path.stem))
            for case in suite.cases:
                _check_swe_numbers(case, str(path))
                cases.append(Case(f"case-{len(cases) + 1}", str(path), named.name, case))
            source = (("rlgate.source", xml_text(path)), ("rlgate.source_sha256", digest))
            merged.append(replace(named, properties=(*suite.properties, *source), source=""))
            read.append(named)
    text = write_junit(merged, name="rlgate release report", layout="junit-10")
    return JunitEvidence(tuple(cases), tuple(read), text)


# --- JSON inputs ------------------------------------------------------------------------

Finite = Annotated[float, Field(allow_inf_nan=False)]
Rate = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
Points = Annotated[float, Field(ge=-100.0, le=100.0, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0)]


class _Doc(BaseModel):
    """Strict: no string or boolean read as a number, no NaN or infinity unless declared."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True, allow_inf_nan=False)


class SweRunDoc(_Doc):
    """One run (seed) of an arm in ``rlgate swe compare --json``."""

    label: str
    rate: Rate
    infra_error_rate: Rate


class ArmDoc(_Doc):
    """One arm of ``rlgate swe compare --json``."""

    runs: tuple[SweRunDoc, ...] = Field(strict=False, min_length=1)
    rate: Rate
    rate_se: Annotated[float, Field(ge=0.0, allow_inf_nan=False)] | None = None
    n_instances: Annotated[int, Field(ge=1)]


class RepoDoc(_Doc):
    """One repository row of ``rlgate swe compare --json``."""

    repo: str
    n: Annotated[int, Field(ge=1)]
    before_resolved: Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
    after_resolved: Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
    delta_pp: Points

    @model_validator(mode="after")
    def _within_n(self) -> RepoDoc:
        if max(self.before_resolved, self.after_resolved) > self.n:
            raise ValueError(f"{self.repo}: more instances resolved than its n = {self.n}")
        return self


class DatasetDoc(_Doc):
    """The instance set of ``rlgate swe compare --json`` (``instance_set`` since rlgate 0.1)."""

    source: str
    n_instances: Annotated[int, Field(ge=1)]
    instance_set: Literal["swe-bench-verified", "verified-subset", "unknown"] | None = None
    file_sha256: str | None = None
    ids_sha256: str
    labels_sha256: str | None = None


class FlakyDoc(_Doc):
    """The flaky instances of ``rlgate swe compare --json`` (``flaky``, rlgate.swe.flaky)."""

    count: Count
    ids: tuple[str, ...] = Field(default=(), strict=False)
    measured_arms: tuple[str, ...] = Field(default=(), strict=False)


class SweComparisonDoc(_Doc):
    """One comparison of ``rlgate swe compare --json``: the full one, or the reduced one."""

    verdict: Annotated[SweVerdict, Field(strict=False)]
    reasons: tuple[str, ...] = Field(default=(), strict=False)
    delta_pp: Points
    p_value: Rate
    ci95_pp: tuple[Points, Points] = Field(strict=False)
    test: str
    alpha: Annotated[float, Field(gt=0.0, lt=1.0, allow_inf_nan=False)]
    margin_pp: Annotated[float, Field(ge=0.0, allow_inf_nan=False)] | None = None
    max_infra_error_rate: Rate
    dataset: DatasetDoc
    before: ArmDoc
    after: ArmDoc
    lost: Count
    gained: Count
    criteria: tuple[Result, ...] = Field(strict=False, min_length=1)
    per_repo: tuple[RepoDoc, ...] = Field(default=(), strict=False)
    flaky: FlakyDoc | None = None

    @model_validator(mode="after")
    def _one_universe(self) -> SweComparisonDoc:
        n = self.dataset.n_instances
        if not self.before.n_instances == self.after.n_instances == n:
            raise ValueError(
                f"the arms and the dataset disagree on the number of instances "
                f"(before {self.before.n_instances}, after {self.after.n_instances}, "
                f"dataset {n})"
            )
        if self.lost + self.gained > n:
            raise ValueError(f"lost {self.lost} + gained {self.gained} exceeds n = {n}")
        if self.ci95_pp[0] > self.ci95_pp[1]:
            raise ValueError(f"ci95_pp {list(self.ci95_pp)} has its low end above its high end")
        return self


class ExcludedSetDoc(_Doc):
    """One ``--exclude`` set of the reduced comparison (``known-broken:<list>``, ``flaky``)."""

    label: str
    count: Count


class ReducedDoc(_Doc):
    """``reduced`` of ``rlgate swe compare --exclude ... --json``: shown, never a verdict."""

    exclude: tuple[str, ...] = Field(strict=False, min_length=1)
    excluded_count: Count
    sets: tuple[ExcludedSetDoc, ...] = Field(default=(), strict=False)
    comparison: SweComparisonDoc


class UnformedDoc(_Doc):
    """``reduced_not_formed``: the ``--exclude`` comparison asked for could not be formed."""

    exclude: tuple[str, ...] = Field(strict=False, min_length=1)
    reason: str


class SweDoc(SweComparisonDoc):
    """``rlgate swe compare --json`` (rlgate.swe.report.comparison_to_dict).

    Its top level is the full comparison (the verdict); ``reduced`` the ``--exclude`` one,
    ``reduced_not_formed`` why it could not be formed.
    """

    schema_version: int
    reduced: ReducedDoc | None = None
    reduced_not_formed: UnformedDoc | None = None

    @model_validator(mode="after")
    def _reduced_is_a_subset(self) -> SweDoc:
        if self.reduced is not None:
            n, kept = self.dataset.n_instances, self.reduced.comparison.dataset.n_instances
            if kept + self.reduced.excluded_count != n:
                raise ValueError(
                    f"reduced: {kept} instances kept + {self.reduced.excluded_count} excluded "
                    f"is not the full comparison's {n}"
                )
        return self


_COMMANDS = {
    "run JSON": "`rlgate check-run RUN --recipe R --json FILE`",
    "SWE JSON": "`rlgate swe compare ... --json FILE`",
}


def _load_doc(path: str | os.PathLike[str], model: type[BaseModel], what: str) -> Any:
    src = Path(path)
    hint = f"expected the output of {_COMMANDS[what]}"
    require_regular_file(src, what, MAX_JSON_BYTES)
    raw = read_json(src, what=what, hint=hint)
    if not isinstance(raw, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
            type(raw), "a number"
        )
        raise RlgateError(f"{what} {src}: the JSON is {kind}, not an object", hint=hint)
    version = raw.get("schema_version")
    if version != SCHEMA_VERSION:
        raise RlgateError(
            f"{what} {src}: schema_version {version!r}, this rlgate reads {SCHEMA_VERSION}",
            hint=f"is this the output of the right command? ({_COMMANDS[what]})",
        )
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}"
            for e in exc.errors()[:5]
        )
        raise RlgateError(f"{what} {src}: unexpected shape: {problems}", hint=hint) from None


def load_run_doc(path: str | os.PathLike[str]) -> RunDocument:
    """Read and validate a ``rlgate check-run --json`` document."""
    return _load_doc(path, RunDocument, "run JSON")


def load_swe_doc(path: str | os.PathLike[str]) -> SweDoc:
    """Read and validate a ``rlgate swe compare --json`` document."""
    return _load_doc(path, SweDoc, "SWE JSON")
