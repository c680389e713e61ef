"""Read the release report's inputs: JUnit files, check-run / swe-compare JSON, recipe facts.

Read-only. Every reader raises :class:`~rlgate._errors.RlgateError` naming the file on
input it cannot trust (not XML, truncated, not JUnit, a JSON of the wrong shape or schema
version); nothing is skipped silently.

JUnit merging: rlgate's tiers write xunit1 (``junit_family = "xunit1"``), whose testcase
``file``/``line`` attributes and ``<properties>`` are not allowed by pytest's
``junit-10.xsd``. The merged file keeps every suite and testcase with its outcome, moves
each testcase's location and properties into its ``<system-out>`` (``[rlgate] key = value``
lines) and records each suite's source file and sha256 as suite properties, so it validates
against the schema and still carries the evidence. The input files are never modified.
"""

from __future__ import annotations

import hashlib
import os
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from junitparser import Error, Failure, JUnitXml, Skipped, TestCase, TestSuite
from pydantic import BaseModel, ConfigDict, ValidationError

from rlgate._errors import RlgateError
from rlgate._io import SCHEMA_VERSION
from rlgate.swe_report import INSTANCE_SUITE

__all__ = [
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


class CaseStatus(Enum):
    """A testcase's outcome as JUnit records it."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"
    XFAILED = "xfailed"


@dataclass(frozen=True, slots=True)
class GateCase:
    """One testcase of one input file, classified."""

    anchor: str
    tier: ReleaseTier
    suite: str
    classname: str
    name: str
    status: CaseStatus
    message: str
    source: str
    properties: tuple[tuple[str, str], ...] = ()
    informational: bool = False

    def prop(self, key: str) -> str | None:
        """The value of property ``key`` (first one), or None."""
        return next((v for k, v in self.properties if k == key), None)

    @property
    def executed(self) -> bool:
        """True when the test body ran to a verdict (not skipped, not an expected failure)."""
        return self.status in (CaseStatus.PASSED, CaseStatus.FAILED, CaseStatus.ERROR)


@dataclass(frozen=True, slots=True)
class JunitEvidence:
    """Every testcase of the inputs, the merged JUnit text and suite-level properties."""

    cases: tuple[GateCase, ...]
    merged_xml: str
    suite_properties: tuple[tuple[str, str, str], ...]  # (source, name, value)


def sha256_path(path: Path) -> str:
    """sha256 of a file (streamed), or ``"directory"`` for a directory."""
    if path.is_dir():
        return "directory"
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


def _parse_root(path: Path) -> ET.Element:
    if not path.is_file():
        raise RlgateError(f"JUnit file not found: {path}")
    try:
        root = ET.parse(path).getroot()
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


def _suites(root: ET.Element) -> list[TestSuite]:
    if root.tag == "testsuite":
        return [TestSuite.fromelem(root)]
    return list(JUnitXml.fromroot(root))


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


def load_junit(paths: Sequence[str | os.PathLike[str]]) -> JunitEvidence:
    """Parse every JUnit file, classify its testcases, and build the merged document."""
    if not paths:
        raise RlgateError("no JUnit file given", hint="pass --junit FILE (one per tier or one)")
    merged = JUnitXml("rlgate release report")
    cases: list[GateCase] = []
    suite_props: list[tuple[str, str, str]] = []
    for raw in paths:
        path = Path(raw)
        digest = sha256_path(path) if path.is_file() else ""
        for suite in _suites(_parse_root(path)):
            out = TestSuite(suite.name or path.stem)
            for attr in ("timestamp", "hostname"):
                if suite._elem.get(attr):
                    out._elem.set(attr, suite._elem.get(attr))
            for prop in suite.properties():
                out.add_property(prop.name, prop.value)
                suite_props.append((str(path), prop.name, prop.value))
            out.add_property("rlgate.source", str(path))
            out.add_property("rlgate.source_sha256", digest)
            for case in suite:
                props = _case_properties(case)
                status, message = _status(case)
                classname = case.classname or ""
                cases.append(
                    GateCase(
                        anchor=f"case-{len(cases) + 1}",
                        tier=classify_tier(classname),
                        suite=out.name,
                        classname=classname,
                        name=case.name or "",
                        status=status,
                        message=message,
                        source=str(path),
                        properties=props,
                        informational=classname.startswith(INSTANCE_SUITE),
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


class _Doc(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class CheckDoc(_Doc):
    """One check of ``rlgate check-run --json``."""

    name: str
    tier: Literal["convergence", "perf"]
    status: Literal["pass", "fail", "error"]
    value: float | str | None = None
    bound: str = ""
    message: str = ""
    metric: str | None = None


class SkipDoc(_Doc):
    """One skipped check of ``rlgate check-run --json``."""

    name: str
    tier: str
    reason: str


class RunDoc(_Doc):
    """``rlgate check-run --json`` (rlgate.checkplan.GateReport.to_dict)."""

    schema_version: int
    recipe: str
    run: str
    passed: bool
    checks: tuple[CheckDoc, ...]
    skipped: tuple[SkipDoc, ...] = ()
    target_step: int | None = None
    warnings: tuple[str, ...] = ()


class SweRunDoc(_Doc):
    """One run (seed) of an arm in ``rlgate swe compare --json``."""

    label: str
    rate: float
    infra_error_rate: float


class ArmDoc(_Doc):
    """One arm of ``rlgate swe compare --json``."""

    runs: tuple[SweRunDoc, ...]
    rate: float
    rate_se: float | None = None
    n_instances: int


class CriterionDoc(_Doc):
    """One gate criterion of ``rlgate swe compare --json``."""

    name: str
    status: Literal["pass", "fail", "error"]
    message: str = ""


class RepoDoc(_Doc):
    """One repository row of ``rlgate swe compare --json``."""

    repo: str
    n: int
    before_resolved: float
    after_resolved: float
    delta_pp: float


class SweDoc(_Doc):
    """``rlgate swe compare --json`` (rlgate.swe_report.comparison_to_dict)."""

    schema_version: int
    verdict: Literal["improved", "regressed", "no_significant_change", "inconclusive"]
    reasons: tuple[str, ...] = ()
    delta_pp: float
    p_value: float
    ci95_pp: tuple[float, float]
    test: str
    alpha: float
    max_infra_error_rate: float
    dataset: dict[str, Any]
    before: ArmDoc
    after: ArmDoc
    lost: int
    gained: int
    criteria: tuple[CriterionDoc, ...]
    per_repo: tuple[RepoDoc, ...] = ()


def _load_doc(path: str | os.PathLike[str], model: type[BaseModel], what: str) -> Any:
    import json

    src = Path(path)
    try:
        text = src.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RlgateError(f"{what} {src}: cannot read: {exc}") from exc
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RlgateError(
            f"{what} {src}: not valid JSON at line {exc.lineno} column {exc.colno} ({exc.msg})",
            hint="the file looks truncated; regenerate it",
        ) from exc
    version = raw.get("schema_version") if isinstance(raw, dict) else None
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
        raise RlgateError(
            f"{what} {src}: unexpected shape: {problems}", hint=f"expected {_COMMANDS[what]}"
        ) from None


_COMMANDS = {
    "run JSON": "`rlgate check-run RUN --recipe R --json FILE`",
    "SWE JSON": "`rlgate swe compare ... --json FILE`",
}


def load_run_doc(path: str | os.PathLike[str]) -> RunDoc:
    """Read and validate a ``rlgate check-run --json`` document."""
    return _load_doc(path, RunDoc, "run JSON")


def load_swe_doc(path: str | os.PathLike[str]) -> SweDoc:
    """Read and validate a ``rlgate swe compare --json`` document."""
    return _load_doc(path, SweDoc, "SWE JSON")
