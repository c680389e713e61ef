r"""JUnit for results: the ``rlgate.*`` property vocabulary, one writer and one reader.

A :class:`~rlgate.core.results.Result` travels in JUnit as ``rlgate.*`` testcase properties,
one per field (:data:`PROPERTIES`: ``rlgate.name``, ``rlgate.tier``, ``rlgate.verdict`` (the
outcome), ``rlgate.value``, ``rlgate.op``, ``rlgate.threshold``, ``rlgate.unit``,
``rlgate.bound``, ``rlgate.message``, ``rlgate.metric``, ``rlgate.evidence`` (JSON),
``rlgate.informational``, ``rlgate.schema_version``), plus the testcase's own element
(``<failure>`` for FAIL, ``<error>`` for ERROR, ``<skipped>`` for SKIP) so CI shows the
outcome. The same mapping serves :func:`write_junit` (``check-run --junit``, ``swe compare
--junit``, the report's merged file), the pytest tiers (``gate_record(result)`` records the
same properties through pytest's ``record_property``) and :func:`read_junit`, which reads
any JUnit file (rlgate's or pytest's) back into :class:`JunitCase` records, each with its
Result: a testcase that recorded none (a plain pytest test) gets the Result its element says.

Text is untrusted (names, tags and messages come from recipes and logs): every text field
rlgate writes goes through :func:`~rlgate.core.text.escape_controls` (control characters
shown as ``\x1b``, characters XML 1.0 cannot carry escaped, reversibly), so the file is
always well-formed XML and the reader gives the exact Result back. Free facts (``recipe``,
``run_dir``, a template hash) are other ``rlgate.*`` properties, formatted by
:func:`format_value`. Only junitparser's public API is used (custom attributes by
subclassing, as its documentation shows).
"""

from __future__ import annotations

import json
import math
import os
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Literal
from xml.parsers.expat import ErrorString

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import DefusedXMLParser
from junitparser import (
    Attr,
    Error,
    Failure,
    JUnitXml,
    Properties,
    Property,
    Skipped,
    TestCase,
    TestSuite,
)
from pydantic import ValidationError

from rlgate.core.errors import RlgateError
from rlgate.core.io import require_regular_file
from rlgate.core.results import INFRA_CAUSE, Outcome, Result, Tier
from rlgate.core.text import escape_controls, unescape_controls

__all__ = [
    "INFORMATIONAL_PROPERTY",
    "LEGACY_VERDICTS",
    "MAX_JUNIT_BYTES",
    "MAX_XML_DEPTH",
    "PROPERTIES",
    "PROPERTY_PREFIX",
    "VERDICT_PROPERTY",
    "JunitCase",
    "JunitSuite",
    "Layout",
    "classify_tier",
    "format_value",
    "junit_root",
    "read_junit",
    "result_properties",
    "write_junit",
    "xml_text",
]

PROPERTY_PREFIX = "rlgate."
#: Result field -> its JUnit testcase property, in the order they are written.
PROPERTIES: dict[str, str] = {
    f: f"{PROPERTY_PREFIX}{p}"
    for f, p in (
        ("name", "name"),
        ("tier", "tier"),
        ("outcome", "verdict"),
        ("value", "value"),
        ("op", "op"),
        ("threshold", "threshold"),
        ("unit", "unit"),
        ("bound", "bound"),
        ("message", "message"),
        ("metric", "metric"),
        ("evidence", "evidence"),
        ("informational", "informational"),
        ("schema_version", "schema_version"),
    )
}
#: A testcase carrying it recorded its Result: in a check tier, that makes it a gate check.
VERDICT_PROPERTY = PROPERTIES["outcome"]
#: Set (by rlgate's pytest plugin) on a testcase that is evidence but not a gate, e.g. a
#: benchmark: the release report shows it and never counts it as its tier's gate check.
INFORMATIONAL_PROPERTY = PROPERTIES["informational"]
#: ``rlgate.verdict`` values written before the one result model (the rollout-path gate's
#: ``improved``, the SWE comparison's verdict on each criterion): the testcase recorded a
#: result, and its own element says the outcome.
LEGACY_VERDICTS = frozenset({"improved", "regressed", "no_significant_change", "inconclusive"})

# A tier's JUnit is a few MB (the 500-instance SWE suite ~1 MB); a nested element deeper
# than a handful of levels is not JUnit (testsuites > testsuite > testcase > properties >
# property). Both bounds keep a hostile file from costing memory or recursion.
MAX_JUNIT_BYTES = 256 * 2**20
MAX_XML_DEPTH = 32

Layout = Literal["xunit1", "junit-10"]


def format_value(value: Any) -> str:
    """Format a free fact's value with fixed precision (floats: 6 significant digits)."""
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return f"{value:.6g}"
    return str(value)


def xml_text(text: object) -> str:
    """``text`` as rlgate writes it into JUnit: controls visible, XML-safe, reversible."""
    return escape_controls(text)


def _number_text(value: float) -> str:
    """Shortest text that reads back as the same float (``18`` for 18.0, ``nan``)."""
    if not math.isfinite(value):
        return str(value)
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


def result_properties(result: Result) -> list[tuple[str, str]]:
    """The ``rlgate.*`` properties of a Result (defaults left out), XML-safe."""
    out = []
    for name, key in PROPERTIES.items():
        value = getattr(result, name)
        if value is None or value == "" or value == {}:
            continue
        if isinstance(value, float):
            text = _number_text(value)
        elif name == "evidence":
            text = json.dumps(value, sort_keys=True, default=str)
        elif isinstance(value, Enum):
            text = str(value.value)
        else:
            text = str(value)
        out.append((key, xml_text(text)))
    return out


def classify_tier(classname: str) -> Tier:
    """Tier of a testcase from its classname (``tests.<tier>.…`` or ``rlgate.<tier>.…``)."""
    for part in classname.split(".")[:2]:
        for tier in Tier:
            if part == tier.value and tier is not Tier.OTHER:
                return tier
    return Tier.OTHER


@dataclass(frozen=True, slots=True)
class JunitCase:
    """One testcase as JUnit holds it, with the Result it carries.

    Text fields are as written in the file (XML-safe); ``result`` is decoded. ``recorded``
    is True when the testcase recorded its Result (``rlgate.verdict``; ``result.outcome`` is
    then the recorded outcome); ``shown`` is the outcome its own element shows (a pytest
    failure, or rlgate's writer's element), which can disagree with the recorded one only in
    a hand-edited or broken file (:attr:`contradicts`).
    """

    name: str
    classname: str
    result: Result
    shown: Outcome
    recorded: bool = False
    message: str = ""  # the shown element's message attribute
    kind: str | None = None  # the shown element's type attribute (pytest.xfail, pytest.skip)
    detail: str = ""  # the shown element's text (a traceback)
    properties: tuple[tuple[str, str], ...] = ()
    time: str | None = None
    file: str | None = None
    line: str | None = None
    system_out: str | None = None
    system_err: str | None = None

    @property
    def xfail(self) -> bool:
        """A pytest expected failure (skipped, type ``pytest.xfail``)."""
        return self.shown is Outcome.SKIP and self.kind == "pytest.xfail"

    @property
    def contradicts(self) -> bool:
        """True when the recorded outcome is not the shown one (in any direction).

        A legacy verdict (``improved``...) records no outcome of its own, so never contradicts.
        """
        return self.recorded and self.result.outcome is not self.shown

    @property
    def tier_contradicts(self) -> bool:
        """True when the classname names one tier and the recorded ``rlgate.tier`` another.

        The tier comes from where a test lives (``tests.<tier>.``, ``rlgate.<tier>.``); a
        recorded tier that disagrees cannot make another tier's gate check.
        """
        by_name = classify_tier(self.classname)
        return by_name is not Tier.OTHER and by_name is not self.result.tier

    @property
    def judged(self) -> Result:
        """The Result as a gate must judge it: a contradiction never hides a shown failure.

        When the element shows a FAIL or ERROR that the recorded verdict does not
        (``<failure>`` recording ``pass``), the Result takes the shown outcome, with no
        infrastructure cause (a self-contradicting testcase is not the infrastructure's
        fault) and a message naming the contradiction; otherwise the recorded Result.
        """
        result = self.result
        bad = (Outcome.FAIL, Outcome.ERROR)
        if not self.contradicts or self.shown not in bad or result.outcome in bad:
            return result
        evidence = {k: v for k, v in result.evidence.items() if k != INFRA_CAUSE}
        why = unescape_controls(self.message) or result.message
        message = (
            f"the JUnit shows {self.shown.value.upper()} but records {VERDICT_PROPERTY} = "
            f"{result.outcome.value}" + (f"; {why}" if why else "")
        )
        return result.model_copy(
            update={"outcome": self.shown, "message": message, "evidence": evidence}
        )

    def prop(self, key: str) -> str | None:
        """The first value of property ``key`` as written, or None."""
        return next((v for k, v in self.properties if k == key), None)

    @classmethod
    def of(
        cls, result: Result, *, classname: str, facts: Mapping[str, object] | None = None
    ) -> JunitCase:
        """The testcase rlgate writes for ``result`` (``facts``: more ``rlgate.*`` properties)."""
        props = result_properties(result)
        props += [
            (f"{PROPERTY_PREFIX}{k}", xml_text(format_value(v))) for k, v in (facts or {}).items()
        ]
        return cls(
            name=xml_text(result.name),
            classname=xml_text(classname),
            result=result,
            shown=result.outcome,
            recorded=True,
            message=xml_text(result.message) if result.outcome is not Outcome.PASS else "",
            properties=tuple(props),
        )


@dataclass(frozen=True, slots=True)
class JunitSuite:
    """One ``<testsuite>``: its name, properties and testcases (``source``: the file read)."""

    name: str
    cases: tuple[JunitCase, ...]
    properties: tuple[tuple[str, str], ...] = ()
    timestamp: str | None = None
    hostname: str | None = None
    source: str = ""

    @classmethod
    def of(
        cls,
        name: str,
        cases: Iterable[JunitCase],
        properties: Mapping[str, object] | Iterable[tuple[str, object]] = (),
    ) -> JunitSuite:
        """A suite rlgate writes; property values are formatted and made XML-safe."""
        items = properties.items() if isinstance(properties, Mapping) else properties
        props = tuple((xml_text(k), xml_text(format_value(v))) for k, v in items)
        return cls(xml_text(name), tuple(cases), props)

    def prop(self, key: str) -> str | None:
        """The first value of suite property ``key`` as written, or None."""
        return next((v for k, v in self.properties if k == key), None)


# --- writing ----------------------------------------------------------------------------------


class _Case(TestCase):
    """A testcase with pytest's xunit1 location attributes; ``time`` kept as written."""

    time = Attr()
    file = Attr()
    line = Attr()


class _Junit10(JUnitXml):
    """``<testsuites>`` as pytest's junit-10.xsd has it (no ``skipped`` attribute)."""

    def update_statistics(self) -> None:
        """Count tests, failures and errors; time with at most 3 decimals."""
        suites = list(self)
        self.tests = sum(s.tests for s in suites)
        self.failures = sum(s.failures for s in suites)
        self.errors = sum(s.errors for s in suites)
        self.time = round(sum(s.time or 0.0 for s in suites), 3)


_ELEMENTS = {Outcome.FAIL: Failure, Outcome.ERROR: Error, Outcome.SKIP: Skipped}


def _testcase(case: JunitCase, layout: Layout) -> TestCase:
    out = _Case(case.name, classname=case.classname or None)
    if case.time is not None:
        out.time = case.time
    lines = []
    if layout == "xunit1":
        out.file, out.line = case.file, case.line
        if case.properties:
            props = Properties()
            for key, value in case.properties:
                props.add_property(Property(key, value))
            out.append(props)
    else:  # junit-10.xsd: no location attributes and no testcase properties
        if case.file:
            lines.append(f"[rlgate] location = {case.file}:{case.line or '?'}")
        lines += [f"[rlgate] {k} = {v}" for k, v in case.properties]
    element = _ELEMENTS.get(case.shown)
    if element is not None:
        shown = element(case.message or None, case.kind)
        if case.detail:
            shown.text = case.detail
        out.result = [shown]
    body = "\n".join([*lines, *([case.system_out] if case.system_out else [])])
    if body:
        out.system_out = body
    if case.system_err:
        out.system_err = case.system_err
    return out


def junit_root(
    suites: Iterable[JunitSuite], *, name: str | None = None, layout: Layout = "xunit1"
) -> JUnitXml:
    """The ``<testsuites>`` document of ``suites`` (``junit-10``: pytest's junit-10.xsd).

    Suite times are the sum of their testcases' times, rounded to 3 decimals (the XSD's).
    """
    root = JUnitXml(name) if layout == "xunit1" else _Junit10(name)
    for suite in suites:
        out = TestSuite(suite.name)
        out.timestamp, out.hostname = suite.timestamp, suite.hostname
        for key, value in suite.properties:
            out.add_property(key, value)
        out.add_testcases([_testcase(c, layout) for c in suite.cases])  # counted once
        root.append(out)  # appended as is: JUnitXml.add_testsuite merges equal suites
    root.update_statistics()
    return root


def write_junit(
    suites: Iterable[JunitSuite], *, name: str | None = None, layout: Layout = "xunit1"
) -> str:
    """JUnit XML text of ``suites`` (always well-formed: every text is XML-safe)."""
    body = junit_root(suites, name=name, layout=layout).tostring().decode("utf-8")
    return '<?xml version="1.0" encoding="utf-8"?>\n' + body + "\n"


# --- reading ----------------------------------------------------------------------------------


class _ProcessingInstruction(ValueError):
    def __init__(self, target: str) -> None:
        super().__init__(target)
        self.target = target


class _JunitParser(DefusedXMLParser):
    """defusedxml's parser with every DTD forbidden, and processing instructions refused.

    A JUnit report needs neither: a document type declaration is where entities are
    defined (expanded without bound, or read from local files and URLs), and an
    instruction (``<?xml-stylesheet?>``, ``<?php?>``) is for some other consumer. The XML
    declaration (``<?xml version="1.0"?>``, which pytest writes) is not an instruction.
    """

    def __init__(self, target: ET.TreeBuilder | None = None) -> None:
        super().__init__(target=target, forbid_dtd=True, forbid_entities=True, forbid_external=True)
        self.parser.ProcessingInstructionHandler = self._instruction

    @staticmethod
    def _instruction(target: str, data: str) -> None:
        raise _ProcessingInstruction(target)


_NO_DTD_HINT = (
    "a JUnit report (pytest's --junitxml, rlgate's --junit) has no DTD, entity or "
    "processing instruction; regenerate it with the tool that wrote it"
)


class _TooDeep(ValueError):
    pass


class _DepthBuilder(ET.TreeBuilder):
    """ElementTree's tree builder, refusing elements nested more than ``max_depth`` deep."""

    def __init__(self, max_depth: int) -> None:
        super().__init__()
        self._depth = 0
        self._max_depth = max_depth

    def start(self, tag: str, attrs: dict[str, str]) -> ET.Element:
        """Open an element, one level deeper."""
        self._depth += 1
        if self._depth > self._max_depth:
            raise _TooDeep
        return super().start(tag, attrs)

    def end(self, tag: str) -> ET.Element:
        """Close an element."""
        self._depth -= 1
        return super().end(tag)


#: The longest single XML token (a tag with its attributes, a comment, an instruction) a
#: JUnit file may hold. expat (2.5.0) costs time quadratic in a token's length, whether the
#: token arrives in chunks (each chunk rescans it) or in one call; text is not a token (it
#: is reported as it arrives), so a long ``<system-out>`` is fine.
MAX_XML_TOKEN = 4 * 2**20
_CHUNK = 2**20


def _parse_root(path: Path, max_depth: int) -> ET.Element:
    """The root element of ``path`` (already bounded in size), in time linear in its size.

    The bytes go to expat in chunks of ``_CHUNK``; after each, the token expat is still
    waiting to complete (from its current byte index to what it was given) must stay within
    :data:`MAX_XML_TOKEN`, so no tag costs more than a bounded amount of work
    (benchmarks/bench_junit_attribute.py: a 25 MB attribute took 101 s).
    """
    parser = _JunitParser(target=_DepthBuilder(max_depth))
    fed = 0
    try:
        with path.open("rb") as fh:
            while chunk := fh.read(_CHUNK):
                parser.feed(chunk)
                fed += len(chunk)
                start = parser.parser.CurrentByteIndex
                if fed - start > MAX_XML_TOKEN:
                    raise RlgateError(
                        f"{path}: not read: the XML tag (or comment) at byte {start} is longer "
                        f"than {MAX_XML_TOKEN // 2**20} MiB",
                        hint="a JUnit report's tags and attributes are short (rlgate reads at "
                        f"most {MAX_XML_TOKEN // 2**20} MiB per tag); is this the right file?",
                    )
        root = parser.close()
    except OSError as exc:
        raise RlgateError(f"cannot read JUnit file {path}: {exc.strerror or exc}") from exc
    except _TooDeep:
        raise RlgateError(
            f"{path}: not a JUnit report: elements nested more than {max_depth} deep",
            hint="a JUnit report nests testsuites > testsuite > testcase > result",
        ) from None
    except ET.ParseError as exc:
        line, column = exc.position
        raise RlgateError(  # expat's own text ("syntax error: line 1, column 0") reworded
            f"{path}: not valid XML ({ErrorString(exc.code)} at line {line}, column {column})",
            hint="the file looks truncated or is not a JUnit report; rerun the tier with "
            "--junitxml / --junit",
        ) from exc
    except _ProcessingInstruction as exc:
        raise RlgateError(
            f"{path}: refusing XML with a processing instruction <?{exc.target[:40]} ...?>",
            hint=_NO_DTD_HINT,
        ) from None
    except DefusedXmlException as exc:  # DTDForbidden (entities need a DTD to be declared)
        name = str(getattr(exc, "name", None) or "")[:40]
        raise RlgateError(
            f"{path}: refusing XML with a document type declaration (<!DOCTYPE {name} ...>): "
            "a DTD can define entities that expand without bound or read local files",
            hint=_NO_DTD_HINT,
        ) from None
    if root.tag not in ("testsuites", "testsuite"):
        raise RlgateError(
            f"{path}: not a JUnit report (root element <{root.tag}>, expected <testsuites> "
            "or <testsuite>)"
        )
    return root


_REGENERATE = "regenerate the JUnit with the rlgate command or tier that wrote it"


def _field(key: str, raw: str, where: str) -> Any:
    text = unescape_controls(raw)
    if key in (PROPERTIES["value"], PROPERTIES["threshold"]):
        try:
            return float(text)
        except ValueError:
            raise RlgateError(
                f"{where}: {key} = {raw!r} is not a number", hint=_REGENERATE
            ) from None
    if key == PROPERTIES["evidence"]:
        try:
            evidence = json.loads(text)
        except (ValueError, RecursionError):
            evidence = None
        if not isinstance(evidence, dict):
            raise RlgateError(f"{where}: {key} is not a JSON object", hint=_REGENERATE)
        return evidence
    if key == PROPERTIES["schema_version"]:
        if not text.isdigit():
            raise RlgateError(f"{where}: {key} = {raw!r} is not a version", hint=_REGENERATE)
        return int(text)
    return text


def _case_result(
    name: str,
    classname: str,
    shown: Outcome,
    message: str,
    props: Sequence[tuple[str, str]],
    where: str,
) -> tuple[Result, bool]:
    """The Result a testcase carries: its recorded fields over what its element says.

    An ``rlgate.*`` property recorded twice with two values is refused: which of the two is
    true is unknown, and the first or last winning silently would hide one of them.
    """
    given: dict[str, str] = {}
    for key, raw in props:
        if key.startswith(PROPERTY_PREFIX) and given.setdefault(key, raw) != raw:
            raise RlgateError(
                f"{where}: {key} is recorded twice, as {unescape_controls(given[key])!r} and "
                f"{unescape_controls(raw)!r}",
                hint=_REGENERATE,
            )
    fields: dict[str, Any] = {
        "name": name,
        "tier": classify_tier(classname),
        "outcome": shown,
        "message": message,
    }
    recorded = False
    seen = set()
    keys = {v: k for k, v in PROPERTIES.items()}
    for key, raw in props:
        if key not in keys or key in seen:
            continue
        seen.add(key)
        field = keys[key]
        if field != "outcome":
            fields[field] = _field(key, raw, where)
            continue
        recorded = True
        verdict = unescape_controls(raw)
        if verdict in LEGACY_VERDICTS:
            continue
        try:
            fields["outcome"] = Outcome(verdict)
        except ValueError:
            tier = next((unescape_controls(v) for k, v in props if k == PROPERTIES["tier"]), None)
            raise RlgateError(
                f"{where}: {key} = {verdict!r} is not a {tier or fields['tier'].value} verdict "
                f"(expected one of {', '.join(o.value for o in Outcome)})",
                hint=_REGENERATE,
            ) from None
    try:
        return Result.model_validate(fields), recorded
    except ValidationError as exc:
        problems = "; ".join(
            f"{PROPERTIES.get(str(e['loc'][0]), e['loc'][0]) if e['loc'] else 'result'}: {e['msg']}"
            for e in exc.errors()[:3]
        )
        raise RlgateError(f"{where}: {problems}", hint=_REGENERATE) from None


def _read_case(elem: ET.Element, path: Path) -> JunitCase:
    case = _Case.fromelem(elem)
    name, classname = case.name or "", case.classname or ""
    where = f"{path}: testcase {name!r}"
    seconds = case.time
    if seconds is not None:
        try:
            ok = math.isfinite(float(seconds)) and float(seconds) >= 0
        except ValueError:
            ok = False
        if not ok:
            raise RlgateError(f"{where}: time={seconds!r} is not a number of seconds >= 0")
    shown, element = Outcome.PASS, None
    results = case.result
    for kind, outcome in ((Error, Outcome.ERROR), (Failure, Outcome.FAIL), (Skipped, Outcome.SKIP)):
        hit = [r for r in results if isinstance(r, kind)]
        if hit:
            shown, element = outcome, hit[0]
            break
    message = (element.message or "") if element is not None else ""
    detail = (element.text or "") if element is not None else ""
    props = tuple(
        (p.name or "", p.value or "") for group in case.iterchildren(Properties) for p in group
    )
    result, recorded = _case_result(name, classname, shown, message or detail.strip(), props, where)
    return JunitCase(
        name=name,
        classname=classname,
        result=result,
        shown=shown,
        recorded=recorded,
        message=message,
        kind=element.type if element is not None else None,
        detail=detail,
        properties=props,
        time=seconds,
        file=case.file,
        line=case.line,
        system_out=case.system_out,
        system_err=case.system_err,
    )


def read_junit(
    path: str | os.PathLike[str],
    *,
    max_bytes: int = MAX_JUNIT_BYTES,
    max_depth: int = MAX_XML_DEPTH,
) -> tuple[JunitSuite, ...]:
    """Read a JUnit file (rlgate's or pytest's) into suites of typed testcases.

    The file must be a regular file of at most ``max_bytes``, well-formed XML without a DTD
    (so without entities) or a processing instruction (defusedxml's parser, ``forbid_dtd``),
    nested at most ``max_depth`` deep, no tag or comment longer than :data:`MAX_XML_TOKEN`,
    rooted at ``<testsuites>``/``<testsuite>``, with every testcase inside a suite, every
    ``time`` a number of seconds >= 0 and every recorded field of its type; anything else is
    an :class:`~rlgate.core.errors.RlgateError` naming the file (and the testcase).
    """
    file = Path(path)
    require_regular_file(file, "JUnit file", max_bytes)
    root = _parse_root(file, max_depth)
    elems = list(root.iter("testsuite"))
    attributed = sum(len(e.findall("testcase")) for e in elems)
    total = sum(1 for _ in root.iter("testcase"))
    if attributed != total:
        raise RlgateError(
            f"{file}: not a JUnit report: {total - attributed} <testcase> element(s) outside "
            "a <testsuite>"
        )
    suites = []
    for elem in elems:
        suite = TestSuite.fromelem(elem)
        props = tuple((p.name or "", p.value or "") for p in suite.properties())
        cases = tuple(_read_case(c, file) for c in elem.findall("testcase"))
        suites.append(
            JunitSuite(
                name=suite.name or "",
                cases=cases,
                properties=props,
                timestamp=suite.timestamp,
                hostname=suite.hostname,
                source=str(file),
            )
        )
    return tuple(suites)
