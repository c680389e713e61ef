"""Read the release report's inputs: JUnit files, check-run / swe-compare JSON, recipe facts.

Read-only. Every reader raises :class:`~rlgate.core.errors.RlgateError` naming the file on
input it cannot trust; nothing is skipped silently. The boundary is here, one reader per
kind of input:

* JUnit: a regular file of at most ``MAX_JUNIT_BYTES``, well-formed XML (expat: no external
  entities, entity-amplification limit) nested at most ``MAX_XML_DEPTH`` deep, rooted at
  ``<testsuites>``/``<testsuite>``; a testcase ``time`` is a finite number of seconds >= 0;
  an ``rlgate.verdict`` property is one of its tier's verdicts (``pass``/``fail``/``error``
  for a check, the SWE verdicts on ``swe_gate``);
* JSON (``check-run --json``, ``swe compare --json``): at most ``MAX_JSON_BYTES`` of strict
  UTF-8 read by :func:`rlgate.core.io.read_json`, then validated by strict pydantic models
  (no coercion of strings or booleans to numbers, finite numbers, rates in [0, 1], counts
  >= 0, both arms and the dataset of the same size).

JUnit merging: rlgate's tiers write xunit1 (``junit_family = "xunit1"``), whose testcase
``file``/``line`` attributes and ``<properties>`` are not allowed by pytest's
``junit-10.xsd``. The merged file keeps every suite and testcase with its outcome, moves
each testcase's location and properties into its ``<system-out>`` (``[rlgate] key = value``
lines) and records each suite's source file and sha256 as suite properties, so it validates
against the schema and still carries the evidence. The input files are never modified.
"""

from __future__ import annotations

import hashlib
import math
import os
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal

from junitparser import Error, Failure, JUnitXml, Skipped, TestCase, TestSuite
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rlgate.core.errors import RlgateError
from rlgate.core.io import SCHEMA_VERSION, read_json
from rlgate.core.junit import INFORMATIONAL_PROPERTY, PROPERTY_PREFIX
from rlgate.core.text import printable
from rlgate.swe.report import INSTANCE_SUITE

__all__ = [
    "CHECK_VERDICTS",
    "MAX_JSON_BYTES",
    "MAX_JUNIT_BYTES",
    "MAX_XML_DEPTH",
    "SWE_VERDICTS",
    "CaseStatus",
    "GateCase",
    "JunitEvidence",
    "ReleaseTier",
    "RunDoc",
    "SweDoc",
    "classify_tier",
    "load_junit",
    "load_run_doc",
    "load_swe_doc",
    "sha256_path",
]

# A tier's JUnit is a few MB (the 500-instance SWE suite ~0.5 MB); a nested element deeper
# than a handful of levels is not JUnit (testsuites > testsuite > testcase > properties >
# property). Both bounds keep a hostile file from costing memory or recursion.
MAX_JUNIT_BYTES = 256 * 2**20
MAX_JSON_BYTES = 64 * 2**20
MAX_XML_DEPTH = 32

VERDICT = f"{PROPERTY_PREFIX}verdict"
# a check's verdict (rlgate.core.results.Status; the rollout-path CPU-time gate's
# rlgate.bench.gate.Verdict adds "improved": faster than its baseline, a pass)
CHECK_VERDICTS = ("pass", "improved", "fail", "error", "skip")
SWE_VERDICTS = ("improved", "regressed", "no_significant_change", "inconclusive")
# numbers a swe_gate criterion records that the report reads (rlgate.swe.report)
SWE_NUMBERS = tuple(f"{PROPERTY_PREFIX}{k}" for k in ("delta_pp", "ci95_low_pp", "ci95_high_pp"))


class ReleaseTier(Enum):
    """Where a testcase's evidence belongs; the first four are the release tiers."""

    FUNCTIONAL = "functional"
    CONVERGENCE = "convergence"
    PERF = "perf"
    SWE_GATE = "swe_gate"
    UNIT = "unit"
    OTHER = "other"


REQUIRED_TIERS = (
    ReleaseTier.FUNCTIONAL,
    ReleaseTier.CONVERGENCE,
    ReleaseTier.PERF,
    ReleaseTier.SWE_GATE,
)
# Tiers whose gating checks record their verdict (``rlgate.verdict``): the convergence and
# perf checks (rlgate.pytest_plugin.tier, check-run --junit, the rollout-path gate) and the SWE
# gate criteria. A testcase of these tiers without a verdict (a benchmark, a sanity test of
# a benchmark's inputs) is evidence, but not a gate check that makes its tier count as run.
VERDICT_TIERS = (ReleaseTier.CONVERGENCE, ReleaseTier.PERF, ReleaseTier.SWE_GATE)


class CaseStatus(Enum):
    """A testcase's outcome as JUnit records it."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"
    XFAILED = "xfailed"


@dataclass(frozen=True, slots=True)
class GateCase:
    """One testcase of one input file, classified.

    ``informational`` is empty for a gate testcase, else why it is not one: ``"instance"``
    (the per-instance suite of ``swe compare``) or what the ``rlgate.informational``
    property says (``"benchmark"``, set by rlgate's pytest plugin on benchmarks).
    """

    anchor: str
    tier: ReleaseTier
    suite: str
    classname: str
    name: str
    status: CaseStatus
    message: str
    source: str
    properties: tuple[tuple[str, str], ...] = ()
    informational: str = ""

    def prop(self, key: str) -> str | None:
        """The value of property ``key`` (first one), or None."""
        return next((v for k, v in self.properties if k == key), None)

    def number(self, key: str) -> float | None:
        """Property ``key`` as a finite number (None if absent); anything else is an error."""
        raw = self.prop(key)
        if raw is None:
            return None
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise RlgateError(
                f"{self.source}: testcase {self.name!r}: property {key} = {raw!r} is not a "
                "finite number",
                hint="regenerate the JUnit with the rlgate command or tier that wrote it",
            )
        return value

    @property
    def executed(self) -> bool:
        """True when the test body ran to a verdict (not skipped, not an expected failure)."""
        return self.status in (CaseStatus.PASSED, CaseStatus.FAILED, CaseStatus.ERROR)

    @property
    def gating(self) -> bool:
        """A gate check: not informational and, in a verdict tier, it records its verdict."""
        if self.informational:
            return False
        return self.tier not in VERDICT_TIERS or self.prop(VERDICT) is not None


@dataclass(frozen=True, slots=True)
class JunitEvidence:
    """Every testcase of the inputs, the merged JUnit text and suite-level properties."""

    cases: tuple[GateCase, ...]
    merged_xml: str
    suite_properties: tuple[tuple[str, str, str], ...]  # (source, name, value)


def sha256_path(path: Path) -> str:
    """sha256 of a regular file (streamed), ``"directory"`` for a directory, else ``""``."""
    if path.is_dir():
        return "directory"
    if not path.is_file():  # a FIFO or device would block or never end
        return ""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def classify_tier(classname: str) -> ReleaseTier:
    """Tier of a testcase from its classname (``tests.<tier>.…`` or ``rlgate.<tier>.…``)."""
    for part in classname.split(".")[:2]:
        for tier in ReleaseTier:
            if part == tier.value and tier is not ReleaseTier.OTHER:
                return tier
    return ReleaseTier.OTHER


def _regular_file(path: Path, what: str, limit: int) -> None:
    """Refuse what is not a regular file of at most ``limit`` bytes (exit 2, naming it)."""
    if not path.is_file():
        kind = "is a directory" if path.is_dir() else "not found"
        if path.exists() and not path.is_dir():
            kind = "is not a regular file"
        raise RlgateError(f"{what} {kind}: {path}")
    size = path.stat().st_size
    if size > limit:
        raise RlgateError(
            f"{what} {path} is {size / 2**20:.0f} MiB; rlgate reads at most "
            f"{limit // 2**20} MiB of it",
            hint="is this the right file? a tier's JUnit or an rlgate JSON is a few MB",
        )


def _parse_root(path: Path) -> ET.Element:
    _regular_file(path, "JUnit file", MAX_JUNIT_BYTES)
    depth = 0
    try:
        with path.open("rb") as fh:
            events = ET.iterparse(fh, events=("start", "end"))
            for event, _ in events:
                depth += 1 if event == "start" else -1
                if depth > MAX_XML_DEPTH:
                    raise RlgateError(
                        f"{path}: not a JUnit report: elements nested more than "
                        f"{MAX_XML_DEPTH} deep",
                        hint="a JUnit report nests testsuites > testsuite > testcase > result",
                    )
            root = events.root  # type: ignore[attr-defined]
    except ET.ParseError as exc:
        raise RlgateError(
            f"{path}: not valid XML ({exc})",
            hint="the file looks truncated or is not a JUnit report; rerun the tier with "
            "--junitxml / --junit",
        ) from exc
    if root.tag not in ("testsuites", "testsuite"):
        raise RlgateError(
            f"{path}: not a JUnit report (root element <{root.tag}>, expected <testsuites> "
            "or <testsuite>)"
        )
    return root


def _suites(root: ET.Element, path: Path) -> list[TestSuite]:
    """Every ``<testsuite>``, nested ones included; a testcase outside any suite is refused."""
    elems = list(root.iter("testsuite"))
    attributed = sum(len(e.findall("testcase")) for e in elems)
    total = sum(1 for _ in root.iter("testcase"))
    if attributed != total:
        raise RlgateError(
            f"{path}: not a JUnit report: {total - attributed} <testcase> element(s) outside "
            "a <testsuite>"
        )
    return [TestSuite.fromelem(e) for e in elems]


def _status(case: TestCase) -> tuple[CaseStatus, str]:
    results = list(case.result)
    for kind, status in ((Error, CaseStatus.ERROR), (Failure, CaseStatus.FAILED)):
        hit = [r for r in results if isinstance(r, kind)]
        if hit:
            return status, _result_text(hit[0])
    skips = [r for r in results if isinstance(r, Skipped)]
    if skips:
        xfail = skips[0].type == "pytest.xfail"
        return (CaseStatus.XFAILED if xfail else CaseStatus.SKIPPED), _result_text(skips[0])
    return CaseStatus.PASSED, ""


def _result_text(result: Any) -> str:
    text = result.message or (result.text or "").strip()
    return " ".join(str(text).split())


def _case_properties(case: TestCase) -> tuple[tuple[str, str], ...]:
    found = case._elem.find("properties")  # junitparser has no testcase properties accessor
    if found is None:
        return ()
    return tuple((p.get("name", ""), p.get("value", "")) for p in found.iter("property"))


def _schema_case(case: TestCase, props: tuple[tuple[str, str], ...]) -> TestCase:
    """A copy of ``case`` that junit-10.xsd accepts (location and properties to system-out)."""
    out = TestCase(case.name or "", classname=case.classname)
    if case._elem.get("time") is not None:
        out._elem.set("time", case._elem.get("time"))
    lines = []
    if case._elem.get("file"):
        lines.append(f"[rlgate] location = {case._elem.get('file')}:{case._elem.get('line', '?')}")
    lines += [f"[rlgate] {k} = {v}" for k, v in props]
    out.result = list(case.result)
    original = case.system_out
    if lines or original:
        out.system_out = "\n".join([*lines, *([original] if original else [])])
    if case.system_err:
        out.system_err = case.system_err
    return out


def _check_case(path: Path, case: TestCase, tier: ReleaseTier, informational: str) -> None:
    """Refuse a testcase rlgate would misread: a bad ``time`` or an unknown verdict."""
    where = f"{path}: testcase {case.name or ''!r}"
    seconds = case._elem.get("time")
    if seconds is not None:
        if not (_finite(seconds) and float(seconds) >= 0):
            raise RlgateError(f"{where}: time={seconds!r} is not a number of seconds >= 0")
    props = _case_properties(case)
    if tier is ReleaseTier.SWE_GATE and not informational:
        for key, raw in props:
            if key in SWE_NUMBERS and not _finite(raw):
                raise RlgateError(
                    f"{where}: property {key} = {raw!r} is not a finite number",
                    hint="regenerate the JUnit with the rlgate command or tier that wrote it",
                )
    verdict = next((v for k, v in props if k == VERDICT), None)
    if verdict is None or informational or tier not in VERDICT_TIERS:
        return
    allowed = SWE_VERDICTS if tier is ReleaseTier.SWE_GATE else CHECK_VERDICTS
    if verdict not in allowed:
        raise RlgateError(
            f"{where}: {VERDICT} = {verdict!r} is not a {tier.value} verdict "
            f"(expected one of {', '.join(allowed)})",
            hint="regenerate the JUnit with the rlgate command or tier that wrote it",
        )


def _finite(raw: str) -> bool:
    try:
        return math.isfinite(float(raw))
    except ValueError:
        return False


def _informational(classname: str, props: tuple[tuple[str, str], ...]) -> str:
    if classname.startswith(INSTANCE_SUITE):
        return "instance"
    flag = next((v for k, v in props if k == INFORMATIONAL_PROPERTY), "")
    return flag.strip()


def load_junit(paths: Sequence[str | os.PathLike[str]]) -> JunitEvidence:
    """Parse every JUnit file, classify its testcases, and build the merged document."""
    if not paths:
        raise RlgateError("no JUnit file given", hint="pass --junit FILE (one per tier or one)")
    merged = JUnitXml("rlgate release report")
    cases: list[GateCase] = []
    suite_props: list[tuple[str, str, str]] = []
    for raw in paths:
        path = Path(raw)
        root = _parse_root(path)
        digest = sha256_path(path)
        for suite in _suites(root, path):
            out = TestSuite(suite.name or printable(path.stem))
            for attr in ("timestamp", "hostname"):
                if suite._elem.get(attr):
                    out._elem.set(attr, suite._elem.get(attr))
            for prop in suite.properties():
                name, value = prop.name or "", prop.value or ""
                out.add_property(name, value)
                suite_props.append((str(path), name, value))
            out.add_property("rlgate.source", printable(path))  # a name may hold controls
            out.add_property("rlgate.source_sha256", digest)
            for case in suite:
                props = _case_properties(case)
                classname = case.classname or ""
                tier = classify_tier(classname)
                informational = _informational(classname, props)
                _check_case(path, case, tier, informational)
                status, message = _status(case)
                cases.append(
                    GateCase(
                        anchor=f"case-{len(cases) + 1}",
                        tier=tier,
                        suite=out.name,
                        classname=classname,
                        name=case.name or "",
                        status=status,
                        message=message,
                        source=str(path),
                        properties=props,
                        informational=informational,
                    )
                )
                out._add_testcase_no_update_stats(_schema_case(case, props))
            merged.add_testsuite(out)
    return JunitEvidence(tuple(cases), _merged_text(merged), tuple(suite_props))


def _merged_text(merged: JUnitXml) -> str:
    merged.update_statistics()
    merged._elem.attrib.pop("skipped", None)  # not an attribute of <testsuites> in junit-10.xsd
    total = 0.0
    for suite in merged:
        seconds = sum(float(c._elem.get("time") or 0.0) for c in suite)
        suite._elem.set("time", f"{seconds:.3f}")  # junit-10.xsd: at most 3 decimals
        total += seconds
    merged._elem.set("time", f"{total:.3f}")
    body = ET.tostring(merged._elem, encoding="unicode")
    return '<?xml version="1.0" encoding="utf-8"?>\n' + body + "\n"


# --- JSON inputs ------------------------------------------------------------------------

Finite = Annotated[float, Field(allow_inf_nan=False)]
Rate = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
Points = Annotated[float, Field(ge=-100.0, le=100.0, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0)]


class _Doc(BaseModel):
    """Strict: no string or boolean read as a number, no NaN or infinity unless declared."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True, allow_inf_nan=False)


class CheckDoc(_Doc):
    """One check of ``rlgate check-run --json``."""

    name: str
    tier: Literal["convergence", "perf"]
    status: Literal["pass", "fail", "error"]
    # a check's value may be NaN (a NaN loss is what the check caught)
    value: Annotated[float, Field(allow_inf_nan=True)] | str | None = None
    bound: str = ""
    message: str = ""
    metric: str | None = None


class SkipDoc(_Doc):
    """One skipped check of ``rlgate check-run --json``."""

    name: str
    tier: str
    reason: str


class RunDoc(_Doc):
    """``rlgate check-run --json`` (rlgate.checks.plan.GateReport.to_dict)."""

    schema_version: int
    recipe: Annotated[str, Field(min_length=1)]
    run: Annotated[str, Field(min_length=1)]
    passed: bool
    checks: tuple[CheckDoc, ...] = Field(strict=False)
    skipped: tuple[SkipDoc, ...] = Field(default=(), strict=False)
    target_step: Count | None = None
    warnings: tuple[str, ...] = Field(default=(), strict=False)


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


class CriterionDoc(_Doc):
    """One gate criterion of ``rlgate swe compare --json``."""

    name: str
    status: Literal["pass", "fail", "error"]
    message: str = ""


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


class SweDoc(_Doc):
    """``rlgate swe compare --json`` (rlgate.swe.report.comparison_to_dict)."""

    schema_version: int
    verdict: Literal["improved", "regressed", "no_significant_change", "inconclusive"]
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
    criteria: tuple[CriterionDoc, ...] = Field(strict=False, min_length=1)
    per_repo: tuple[RepoDoc, ...] = Field(default=(), strict=False)

    @model_validator(mode="after")
    def _one_universe(self) -> SweDoc:
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


_COMMANDS = {
    "run JSON": "`rlgate check-run RUN --recipe R --json FILE`",
    "SWE JSON": "`rlgate swe compare ... --json FILE`",
}


def _load_doc(path: str | os.PathLike[str], model: type[BaseModel], what: str) -> Any:
    src = Path(path)
    hint = f"expected the output of {_COMMANDS[what]}"
    _regular_file(src, what, MAX_JSON_BYTES)
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


def load_run_doc(path: str | os.PathLike[str]) -> RunDoc:
    """Read and validate a ``rlgate check-run --json`` document."""
    return _load_doc(path, RunDoc, "run JSON")


def load_swe_doc(path: str | os.PathLike[str]) -> SweDoc:
    """Read and validate a ``rlgate swe compare --json`` document."""
    return _load_doc(path, SweDoc, "SWE JSON")
