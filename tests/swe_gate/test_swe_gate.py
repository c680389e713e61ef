"""Tier 4: does the trained model beat its base on SWE-bench (Verified, or the set given)?

    pytest tests/swe_gate --swe-before BASE... --swe-after TRAINED... \
        --swe-dataset SWE-bench_Verified/ --junitxml swe_gate.xml

Each of ``--swe-before`` / ``--swe-after`` takes one or more results (seeds):
harness final reports, ``logs/run_evaluation/<run_id>`` directories,
per-instance ``{id: {resolved}}`` maps or NeMo Gym rollouts JSONL. One testcase
per gate criterion, its Result recorded as ``rlgate.*`` properties (the numbers the
verdict rule decides on are the significance criterion's ``rlgate.evidence``). Infra and input
problems (too many harness errors, different instance sets or dataset
revisions, unreadable results) are detected in fixtures, so JUnit shows
``<error>``; only a significant regression is a ``<failure>``. Without the
three options every test is skipped and says which option is missing.
"""

import pytest

from rlgate.core.results import Outcome
from rlgate.swe.compare import Criterion, GateOptions, compare_arms
from rlgate.swe.readers import load_arm
from rlgate.swe.records import load_universe
from rlgate.swe.report import instance_set_text

REQUIRED = (
    ("swe_before", "--swe-before"),
    ("swe_after", "--swe-after"),
    ("swe_dataset", "--swe-dataset"),
)


def _option(config: pytest.Config, name: str, default):
    value = config.getoption(name, default=None)
    return default if value is None else value


@pytest.fixture(scope="module")
def swe_comparison(request, record_testsuite_property):
    config = request.config
    missing = [flag for dest, flag in REQUIRED if not config.getoption(dest)]
    if missing:
        pytest.skip(f"the SWE gate needs {' and '.join(missing)} (base and trained results)")
    options = GateOptions(
        alpha=_option(config, "swe_alpha", 0.05),
        margin_pp=_option(config, "swe_margin_pp", 0.0),
        max_infra_error_rate=_option(config, "swe_max_infra_error_rate", 0.05),
    )
    universe = load_universe(config.getoption("swe_dataset"))
    before = load_arm("before", config.getoption("swe_before"), universe)
    after = load_arm("after", config.getoption("swe_after"), universe)
    comparison = compare_arms(before, after, universe, options)
    record_testsuite_property("rlgate.swe.verdict", comparison.verdict.value)
    record_testsuite_property("rlgate.swe.dataset", universe.source)
    record_testsuite_property(
        "rlgate.swe.dataset_sha256", universe.file_sha256 or universe.ids_sha256
    )
    record_testsuite_property("rlgate.swe.instance_set", universe.instance_set.value)
    record_testsuite_property("rlgate.swe.instance_set.text", instance_set_text(universe))
    return comparison


@pytest.fixture
def criterion(request, swe_comparison, gate_record):
    """One criterion's result; an input/infra problem errors here, in setup."""
    result = swe_comparison.criterion(request.param)
    gate_record(result)
    if result.outcome is Outcome.ERROR:
        pytest.fail(f"{result.name}: {result.message}", pytrace=False)
    return result


@pytest.mark.parametrize(
    "criterion",
    [
        pytest.param(Criterion.COVERAGE_BEFORE, id="before"),
        pytest.param(Criterion.COVERAGE_AFTER, id="after"),
    ],
    indirect=True,
)
def test_swe_arm_infra_error_rate_within_bound(criterion):
    assert criterion.outcome is Outcome.PASS, criterion.message


@pytest.mark.parametrize("criterion", [Criterion.SAME_INSTANCE_SET], indirect=True, ids=["set"])
def test_swe_arms_cover_the_same_instances(criterion):
    assert criterion.outcome is Outcome.PASS, criterion.message


@pytest.mark.parametrize(
    "criterion", [Criterion.SAME_DATASET_REVISION], indirect=True, ids=["revision"]
)
def test_swe_arms_use_the_same_dataset_revision(criterion):
    assert criterion.outcome is Outcome.PASS, criterion.message


@pytest.mark.parametrize("criterion", [Criterion.SIGNIFICANCE], indirect=True, ids=["verdict"])
def test_swe_trained_model_is_not_significantly_worse(criterion):
    assert criterion.outcome is not Outcome.FAIL, criterion.message
