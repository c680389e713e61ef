"""rlgate.core.results + rlgate.core.junit: one Result, serialised and read back by the same model.

Round trips: Result -> JSON -> Result and Result -> JUnit -> Result give the same record,
NaN, control characters (made visible in the file, restored on reading) and unicode
included; the junit-10 layout validates against pytest's junit-10.xsd.
"""

import json
import math
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from junitparser import JUnitXml

from rlgate.core.errors import RlgateError
from rlgate.core.junit import (
    JunitCase,
    JunitSuite,
    classify_tier,
    read_junit,
    result_properties,
    write_junit,
)
from rlgate.core.results import Op, Outcome, Result, Tier, render_table
from rlgate.core.text import escape_controls, printable, unescape_controls

XSD = Path(os.environ.get("RLGATE_JUNIT_XSD", Path(sys.prefix) / "share/rlgate/junit-10.xsd"))

HOSTILE = "bad\x1b[2Kname\x00\x07 \ud800 \ufffe é 🙂 \\x1b \\\\ C:\\new\n\tend"


def _result(**over):
    fields = dict(
        name="logprob_error_median",
        tier=Tier.CONVERGENCE,
        outcome=Outcome.FAIL,
        value=1.23456789012345,
        op=Op.LT,
        threshold=1.05,
        message="median(data[...]) = 1.23 < 1.05 does not hold",
        metric="train/token_mult_prob_error",
        evidence={"steps": [1, 2, 3], "note": "x", "nested": {"a": None, "b": 2.5}},
    )
    return Result(**{**fields, **over})


def _same(a: Result, b: Result) -> bool:
    """Equal records (NaN != NaN, so compare the JSON forms, which write it as "nan")."""
    return a.to_json() == b.to_json()


def _junit_round_trip(tmp_path, results, layout="xunit1"):
    cases = [JunitCase.of(r, classname=f"rlgate.{r.tier.value}.recipe") for r in results]
    path = tmp_path / "r.xml"
    path.write_text(write_junit([JunitSuite.of("suite", cases)], layout=layout))
    return path, [c for s in read_junit(path) for c in s.cases]


CASES = [
    pytest.param({}, id="plain"),
    pytest.param({"value": math.nan}, id="nan_value"),
    pytest.param({"value": math.inf, "threshold": -math.inf}, id="infinities"),
    pytest.param({"name": HOSTILE, "message": HOSTILE, "metric": HOSTILE}, id="controls_unicode"),
    pytest.param({"evidence": {"k\x1b": HOSTILE, "n": [math.pi, -0.0]}}, id="hostile_evidence"),
    pytest.param(
        {"outcome": Outcome.SKIP, "value": None, "op": None, "threshold": None}, id="skip"
    ),
    pytest.param({"outcome": Outcome.PASS, "informational": "benchmark"}, id="informational"),
    pytest.param({"bound": "one-sided p < 0.05 and gain >= 0.01", "unit": "gain"}, id="bound"),
]


class TestResult:
    def test_bound_is_derived_from_op_and_threshold_unless_stated(self):
        assert _result().bound == "< 1.05"
        assert _result(unit="x baseline").bound == "< 1.05 x baseline"
        assert _result(bound="all finite").bound == "all finite"
        assert _result(op=None, threshold=None).bound == ""

    def test_json_keeps_the_documented_keys_and_writes_nan_as_a_string(self):
        doc = _result(value=math.nan).to_json()
        assert {"name", "tier", "status", "value", "bound", "message", "metric", "evidence"} <= (
            set(doc)
        )
        assert doc["status"] == "fail" and doc["value"] == "nan" and doc["schema_version"] == 1
        json.dumps(doc, allow_nan=False)  # strict JSON: no bare NaN

    @pytest.mark.parametrize("over", CASES)
    def test_json_round_trip(self, over):
        result = _result(**over)
        text = json.dumps(result.to_json(), allow_nan=False)
        back = Result.from_json(json.loads(text))
        assert _same(back, result)
        assert back == result or math.isnan(result.value or 0.0)

    @pytest.mark.parametrize(
        ("field", "value", "says"),
        [
            pytest.param("status", "ok", "Input should be 'pass', 'fail', 'error' or 'skip'",
                         id="unknown_status"),
            pytest.param("value", "0.5", "expected a number", id="number_as_string"),
            pytest.param("value", True, "expected a number", id="bool_as_number"),
            pytest.param("schema_version", 9, "this rlgate reads 1..1", id="newer_schema"),
            pytest.param("op", "~", "Input should be", id="unknown_op"),
        ],
    )  # fmt: skip
    def test_json_refuses_what_is_not_a_result(self, field, value, says):
        doc = {**_result().to_json(), field: value}
        with pytest.raises(ValueError, match=says):
            Result.from_json(doc)

    def test_swe_compare_json_bound_number_reads_as_its_text(self):
        doc = {**_result(bound="0.05", threshold=0.05).to_json(), "bound": 0.05}
        assert Result.from_json(doc).bound == "0.05"

    def test_render_table_lists_every_result_and_counts(self):
        results = [
            _result(),
            _result(name="completion", outcome=Outcome.PASS, value=18.0),
            _result(name="perf:x", outcome=Outcome.SKIP, value=None, message="needs --baseline"),
        ]
        text = render_table(results, ["title"])
        lines = text.splitlines()
        assert lines[0] == "title"
        assert lines[1].split()[:3] == ["FAIL", "logprob_error_median", "1.23457"]
        assert "SKIP  perf:x" in lines[3] and "needs --baseline" in lines[3]
        assert lines[-1] == "1 passed, 1 failed or errored, 1 skipped"


class TestJunit:
    @pytest.mark.parametrize("over", CASES)
    def test_junit_round_trip(self, tmp_path, over):
        result = _result(**over)
        _, (case,) = _junit_round_trip(tmp_path, [result])
        assert case.recorded and _same(case.result, result)
        assert case.shown is result.outcome

    def test_the_file_shows_controls_visibly_and_is_well_formed(self, tmp_path):
        path, _ = _junit_round_trip(tmp_path, [_result(name=HOSTILE, message=HOSTILE)])
        raw = path.read_text(encoding="utf-8")
        assert not any(c in raw for c in "\x1b\x00\x07\ud800\ufffe")
        root = ET.fromstring(raw)  # a raw control character would make this raise
        case = next(root.iter("testcase"))
        assert case.get("name") == escape_controls(HOSTILE)
        assert case.find("failure").get("message").startswith(printable("bad\x1b[2Kname\x00"))

    def test_one_testcase_per_result_with_its_element(self, tmp_path):
        results = [
            _result(),
            _result(name="e", outcome=Outcome.ERROR, value=None),
            _result(name="s", outcome=Outcome.SKIP),
            _result(name="p", outcome=Outcome.PASS),
        ]
        path, cases = _junit_round_trip(tmp_path, results)
        xml = JUnitXml.fromfile(str(path))
        assert (xml.tests, xml.failures, xml.errors, xml.skipped) == (4, 1, 1, 1)
        assert [c.shown for c in cases] == [r.outcome for r in results]

    def test_junit_10_layout_validates_against_pytests_schema(self, tmp_path):
        import xmlschema

        if not XSD.is_file():
            pytest.fail(f"pytest's junit-10.xsd not found at {XSD} (ci/install.sh)", pytrace=False)
        results = [_result(name=HOSTILE), _result(name="p", outcome=Outcome.PASS, value=math.nan)]
        path, cases = _junit_round_trip(tmp_path, results, layout="junit-10")
        schema = xmlschema.XMLSchema(str(XSD))
        assert not list(schema.iter_errors(str(path)))
        assert "[rlgate] rlgate.verdict = fail" in path.read_text()
        assert [c.shown for c in cases] == [Outcome.FAIL, Outcome.PASS]

    def test_a_plain_pytest_testcase_reads_as_the_result_its_element_says(self, tmp_path):
        path = tmp_path / "p.xml"
        path.write_text(
            '<testsuites><testsuite name="pytest"><testcase classname="tests.functional.test_x" '
            'name="test_y" time="0.1"><properties><property name="rlgate.informational" '
            'value="benchmark"/><property name="rlgate.recipe" value="r"/></properties>'
            '<skipped type="pytest.xfail" message="known"/></testcase></testsuite></testsuites>'
        )
        ((case,),) = [s.cases for s in read_junit(path)]
        assert not case.recorded and case.xfail and case.prop("rlgate.recipe") == "r"
        assert case.result == Result(
            name="test_y",
            tier=Tier.FUNCTIONAL,
            outcome=Outcome.SKIP,
            message="known",
            informational="benchmark",
        )

    @pytest.mark.parametrize(
        ("prop", "value", "says"),
        [
            pytest.param("rlgate.verdict", "maybe", "is not a convergence verdict", id="verdict"),
            pytest.param("rlgate.value", "x", "rlgate.value = 'x' is not a number", id="value"),
            pytest.param("rlgate.evidence", "[1]", "is not a JSON object", id="evidence"),
            pytest.param("rlgate.tier", "nightly", "rlgate.tier: Input should be", id="tier"),
        ],
    )
    def test_a_recorded_field_of_the_wrong_type_names_file_testcase_and_property(
        self, tmp_path, prop, value, says
    ):
        path = tmp_path / "bad.xml"
        props = {"rlgate.verdict": "pass", prop: value}
        body = "".join(f'<property name="{k}" value="{v}"/>' for k, v in props.items())
        path.write_text(
            '<testsuites><testsuite name="s"><testcase classname="rlgate.convergence.r" name="c">'
            f"<properties>{body}</properties></testcase></testsuite></testsuites>"
        )
        with pytest.raises(RlgateError, match=f"bad.xml: testcase 'c': .*{says}"):
            read_junit(path)

    def test_legacy_verdicts_keep_the_testcases_own_outcome(self, tmp_path):
        path = tmp_path / "old.xml"
        path.write_text(
            '<testsuites><testsuite name="s"><testcase classname="tests.perf.t" name="g">'
            '<properties><property name="rlgate.verdict" value="improved"/></properties>'
            "</testcase></testsuite></testsuites>"
        )
        ((case,),) = [s.cases for s in read_junit(path)]
        assert case.recorded and case.result.outcome is Outcome.PASS

    def test_properties_are_the_vocabulary_and_leave_defaults_out(self):
        keys = [k for k, _ in result_properties(_result(evidence={}, metric=None))]
        assert keys == [
            "rlgate.name",
            "rlgate.tier",
            "rlgate.verdict",
            "rlgate.value",
            "rlgate.op",
            "rlgate.threshold",
            "rlgate.bound",
            "rlgate.message",
            "rlgate.schema_version",
        ]

    @pytest.mark.parametrize(
        ("classname", "tier"),
        [
            ("tests.convergence.test_convergence", Tier.CONVERGENCE),
            ("rlgate.swe_gate.instances.django__django", Tier.SWE_GATE),
            ("tests.unit.test_io.TestX", Tier.UNIT),
            ("somewhere.else", Tier.OTHER),
        ],
    )
    def test_classify_tier_reads_the_classname(self, classname, tier):
        assert classify_tier(classname) is tier


class TestEscapeControls:
    @settings(max_examples=500, deadline=None)
    @given(
        st.text(alphabet=st.sampled_from(list("\\xu0123456789abcdefAB\x1b\x00\n\t\ud800\ufffe")))
        | st.text()
    )
    def test_escape_controls_is_reversible(self, text):
        assert unescape_controls(escape_controls(text)) == text

    def test_escape_controls_shows_controls_as_printable_does(self):
        text = "a\x1b[2Kb\x00c\ud800d\uffffe\tf\ng C:\\new"
        assert escape_controls(text) == "a\\x1b[2Kb\\x00c\\ud800d\\uffffe\tf\ng C:\\new"
        assert escape_controls("\\x1b literally") == "\\\\x1b literally"
