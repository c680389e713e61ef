"""rlgate canary's comparison, on JUnit written by real pytest runs (and two real stacks)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rlgate.canary.compare import Kind, State, compare, compare_recipes, read_states
from rlgate.cli.canary import junit_text, table
from rlgate.core.junit import read_junit

DATA = Path(__file__).parent / "data" / "canary"

SUITE = """
import os
import pytest

FLIP = os.environ["FLIP"] == "1"

def test_stays():
    pass

def test_breaks():
    assert not FLIP, "tool_calls == [] on the candidate"

def test_heals():
    assert FLIP

@pytest.mark.xfail(strict=True, reason="F-7: qwen3_coder drops a call inside <think>")
def test_limitation():
    assert FLIP

@pytest.mark.skipif(FLIP, reason="needs the pinned tokenizer")
def test_skipped_on_candidate():
    pass
"""


def _junit(tmp_path: Path, flip: str) -> Path:
    root = tmp_path / "suite"
    root.mkdir(exist_ok=True)
    (root / "test_stack.py").write_text(SUITE)
    out = tmp_path / f"junit-{flip}.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", "/dev/null",
         "--rootdir", str(root), "-o", "junit_family=xunit1", f"--junitxml={out}", str(root)],
        env={"FLIP": flip, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        check=False,
        timeout=120,
    )  # fmt: skip
    assert out.is_file()
    return out


@pytest.fixture(scope="module")
def pytest_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("canary")
    return _junit(tmp, "0"), _junit(tmp, "1")


def test_each_kind_of_change_from_real_pytest_junit(pytest_pair: tuple[Path, Path]) -> None:
    pinned, candidate = pytest_pair
    result = compare([pinned], [candidate])
    by_test = {c.test.split("::")[1]: c for c in result.tests}
    assert by_test["test_breaks"].kind is Kind.NEWLY_FAILING
    assert "tool_calls == [] on the candidate" in by_test["test_breaks"].detail
    assert by_test["test_heals"].kind is Kind.NEWLY_PASSING
    lifted = by_test["test_limitation"]
    assert (lifted.kind, lifted.pinned, lifted.candidate) == (
        Kind.LIMITATION_LIFTED,
        State.XFAIL,
        State.XPASS_STRICT,
    )
    assert "F-7: qwen3_coder drops a call inside <think>" in lifted.detail  # the finding named
    assert by_test["test_skipped_on_candidate"].kind is Kind.CHANGED
    assert "test_stays" not in by_test and result.unchanged == 1
    assert [c.test.split("::")[1] for c in result.regressions] == ["test_breaks"]  # type: ignore[union-attr]


def test_the_same_stack_twice_changes_nothing(pytest_pair: tuple[Path, Path]) -> None:
    result = compare([pytest_pair[0]], [pytest_pair[0]])
    assert result.tests == () and result.unchanged == 5 and not result.regressions


def test_the_junit_output_fails_only_the_regressions(
    pytest_pair: tuple[Path, Path], tmp_path: Path
) -> None:
    result = compare(
        [pytest_pair[0]],
        [pytest_pair[1]],
        {"reports": [{"name": "target", "status": "compatible", "findings": []}]},
        {"reports": [{"name": "target", "status": "incompatible", "findings": [
            {"severity": "error", "code": "parser-missing", "key": "policy.generation"}]}]},
    )  # fmt: skip
    out = tmp_path / "canary.xml"
    out.write_text(junit_text(result, "vllm==0.26.0"))
    cases = {c.name: c for s in read_junit(out) for c in s.cases}
    failed = sorted(n.split("::")[-1] for n, c in cases.items() if c.shown.value == "fail")
    assert failed == ["target", "test_breaks"]
    assert len(cases) == len(result.tests) + 1  # a testcase per change and per recipe
    shown = table(result, "vllm==0.26.0")
    assert "REGRESSION (2 regressions)" in shown
    assert "+error parser-missing [policy.generation]" in shown


def test_a_recipe_verdict_change_and_its_findings() -> None:
    pinned = {"reports": [{"name": "r", "status": "compatible", "findings": [
        {"severity": "warning", "code": "unread-key", "key": "a.b"}]}]}  # fmt: skip
    same = compare_recipes(pinned, pinned)
    assert same == []
    incomplete = {"reports": [{"name": "r", "status": "incomplete", "findings": []}]}
    (change,) = compare_recipes(pinned, incomplete)
    assert (change.pinned, change.candidate, change.went) == (
        "compatible",
        "incomplete",
        ("warning unread-key [a.b]",),
    )
    assert not change.regression  # not run is not broken


PIN = DATA / "functional-vllm-0.25.1.xml"
CANDIDATE = DATA / "functional-vllm-0.26.0.xml"


@pytest.mark.skipif(not CANDIDATE.is_file(), reason="the real two-stack JUnit is not committed")
def test_the_real_two_stacks_compare_testcase_by_testcase() -> None:
    pinned, candidate = read_states([PIN]), read_states([CANDIDATE])
    assert len(pinned) > 100 and set(pinned) == set(candidate)  # the same tier, both stacks
    result = compare([PIN], [CANDIDATE])
    assert result.unchanged + len(result.tests) == len(pinned)
    assert all(c.kind is not Kind.ADDED and c.kind is not Kind.REMOVED for c in result.tests)
    # measured: vLLM 0.26.0 changes nothing the functional tier sees (tests/unit/data/canary)
    assert (len(pinned), result.tests, result.unchanged) == (208, (), 208)
    assert sum(c.state is State.XFAIL for c in candidate.values()) == 10
