import math

import pytest

from rlgate.core.junit import format_value


class TestFormatValue:
    @pytest.mark.parametrize(
        ("value", "text"),
        [
            pytest.param(1.0203040506, "1.0203", id="float_six_significant"),
            pytest.param(True, "true", id="bool_lowercase"),
            pytest.param(None, "none", id="none"),
            pytest.param(math.nan, "nan", id="nan_kept_visible"),
            pytest.param(3, "3", id="int"),
        ],
    )
    def test_format_value_is_fixed_precision(self, value, text):
        assert format_value(value) == text


class TestSuiteProperties:
    def test_junitxml_carries_the_tested_versions(self, tmp_path):
        """Regression: the properties used to be added after junitxml had written the file."""
        import subprocess
        import sys
        from pathlib import Path

        from junitparser import JUnitXml

        repo = Path(__file__).resolve().parents[2]
        out = tmp_path / "j.xml"
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "tests/unit/test_io.py::TestWriteJsonAtomic", f"--junitxml={out}"],
            cwd=repo, capture_output=True, text=True,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        suite = next(iter(JUnitXml.fromfile(str(out))))
        props = {p.name: p.value for p in suite.properties()}
        assert props.get("rlgate.version.vllm") and props.get("rlgate.version.nemo-gym")


class TestJudged:
    """``JunitCase.judged``: what a gate (triage, the history) takes a testcase's Result to be."""

    @staticmethod
    def case(recorded, shown, **extra):
        import dataclasses

        from rlgate.core.junit import JunitCase
        from rlgate.core.results import Result, Tier

        result = Result(name="completion", tier=Tier.CONVERGENCE, outcome=recorded, **extra)
        case = JunitCase.of(result, classname="rlgate.convergence.r")
        return dataclasses.replace(case, shown=shown, message="reached step 7 of 50")

    @pytest.mark.parametrize("shown", ["fail", "error"])
    @pytest.mark.parametrize("recorded", ["pass", "skip"])
    def test_a_shown_failure_is_never_hidden_by_what_is_recorded(self, recorded, shown) -> None:
        from rlgate.core.results import INFRA_CAUSE, Outcome

        cause = {INFRA_CAUSE: {"reason": "nccl", "detail": "x"}}
        judged = self.case(Outcome(recorded), Outcome(shown), evidence=cause).judged
        assert judged.outcome is Outcome(shown)
        assert judged.infra_cause is None  # a self-contradicting testcase is not infra
        assert judged.message == (
            f"the JUnit shows {shown.upper()} but records rlgate.verdict = {recorded}; "
            "reached step 7 of 50"
        )

    @pytest.mark.parametrize(
        ("recorded", "shown"),
        [("pass", "pass"), ("fail", "skip"), ("fail", "pass"), ("error", "fail"), ("pass", "skip")],
    )
    def test_otherwise_the_recorded_result(self, recorded, shown) -> None:
        from rlgate.core.results import Outcome

        case = self.case(Outcome(recorded), Outcome(shown))
        assert case.judged is case.result
