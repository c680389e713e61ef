"""rlgate.swe.report: JSON payload, JUnit XML (parsed back with junitparser), summary table."""

import json

import numpy as np
import pytest
from junitparser import Error, Failure, JUnitXml, Properties

from rlgate.core.junit import read_junit
from rlgate.core.results import Outcome
from rlgate.swe.compare import Criterion, GateOptions, compare_arms
from rlgate.swe.readers import load_arm
from rlgate.swe.records import load_universe
from rlgate.swe.report import (
    CRITERIA_SUITE,
    INSTANCE_SUITE,
    build_swe_junit,
    comparison_to_dict,
    render_swe_summary,
)

from .helpers import swe_inputs as si

REPORT_SEED = 77


@pytest.fixture(scope="module")
def comparison(tmp_path_factory):
    """Before: real harness run on 30 instances; after: a per-instance mapping."""
    root = tmp_path_factory.mktemp("report")
    ids = [r["instance_id"] for r in si.verified_rows()][::16][:30]
    universe = load_universe(si.write_subset_dataset(root / "u.jsonl", ids))
    rng = np.random.default_rng(REPORT_SEED)
    solved = rng.random(30) < 0.5
    kinds = {i: si.RESOLVED if s else si.UNRESOLVED for i, s in zip(ids, solved, strict=True)}
    kinds[ids[0]] = si.EMPTY_PATCH
    kinds[ids[1]] = si.DOCKER_ERROR
    before = si.write_harness_run(root / "b", "b", kinds, dataset_ids=ids)
    flipped = solved ^ (rng.random(30) < 0.3)
    after = root / "after.json"
    after.write_text(
        json.dumps({i: {"resolved": bool(f)} for i, f in zip(ids, flipped, strict=True)})
    )
    return compare_arms(
        load_arm("before", [before.final_report], universe),
        load_arm("after", [after], universe),
        universe,
        GateOptions(n_resamples=1000, max_infra_error_rate=0.1),
    )


def _props(case) -> dict[str, str]:
    props = case.child(Properties)
    return {p.name: p.value for p in props} if props is not None else {}


class TestComparisonToDict:
    def test_json_payload_has_the_documented_keys(self, comparison):
        doc = json.loads(json.dumps(comparison_to_dict(comparison)))
        for key in ("delta_pp", "p_value", "ci95_pp", "test", "verdict", "reasons", "per_repo"):
            assert key in doc
        for arm in ("before", "after"):
            for key in (
                "runs",
                "resolved",
                "rate",
                "n_instances",
                "empty_patch",
                "errors",
                "missing",
            ):
                assert key in doc[arm], (arm, key)
        assert doc["verdict"] == comparison.verdict.value
        assert doc["before"]["n_instances"] == 30

    def test_json_lists_empty_patch_and_infra_instances(self, comparison):
        doc = comparison_to_dict(comparison)
        run = doc["before"]["runs"][0]
        ids = comparison.universe.ids
        assert run["ids"]["empty_patch"] == [ids[0]]
        assert run["ids"]["infra"] == [ids[1]]
        assert run["reasons"] == {ids[1]: "container_unavailable"}
        assert doc["before"]["empty_patch"] == [1]

    def test_json_discordant_entries_match_the_flips(self, comparison):
        doc = comparison_to_dict(comparison)
        assert [d["instance_id"] for d in doc["discordant"]] == [
            f.instance_id for f in comparison.flips
        ]
        assert sum(d["direction"] == "gained" for d in doc["discordant"]) == doc["gained"]


class TestBuildSweJunit:
    def test_junit_round_trips_through_junitparser(self, comparison, tmp_path):
        out = tmp_path / "swe.xml"
        out.write_bytes(build_swe_junit(comparison).tostring())
        xml = JUnitXml.fromfile(str(out))
        suites = {s.name: s for s in xml}
        assert set(suites) == {CRITERIA_SUITE, INSTANCE_SUITE}
        names = [c.name for c in suites[CRITERIA_SUITE]]
        assert names == [c.name for c in comparison.criteria]
        assert suites[INSTANCE_SUITE].tests == 30

    def test_junit_instance_suite_shows_which_instances_flipped(self, comparison, tmp_path):
        xml = JUnitXml.fromstring(build_swe_junit(comparison).tostring().decode())
        cases = {c.name: c for s in xml if s.name == INSTANCE_SUITE for c in s}
        lost = {f.instance_id for f in comparison.flips if not f.gained}
        infra = comparison.universe.ids[1]
        failed = {n for n, c in cases.items() if any(isinstance(r, Failure) for r in c.result)}
        errored = {n for n, c in cases.items() if any(isinstance(r, Error) for r in c.result)}
        assert errored == {infra}
        assert failed == lost - {infra}
        gained = next(f for f in comparison.flips if f.gained)
        path = tmp_path / "swe.xml"
        path.write_bytes(build_swe_junit(comparison).tostring())
        read = {c.result.name: c.result for s in read_junit(path) for c in s.cases}
        assert read[gained.instance_id].evidence["flip"] == "gained"
        assert read[gained.instance_id].informational == "instance"
        assert read[infra].outcome is Outcome.ERROR

    def test_junit_criteria_carry_the_numbers_as_properties(self, comparison):
        xml = JUnitXml.fromstring(build_swe_junit(comparison).tostring().decode())
        crit = next(s for s in xml if s.name == CRITERIA_SUITE)
        sig = next(c for c in crit if c.name == "significance")
        props = _props(sig)
        assert float(props["rlgate.value"]) == pytest.approx(comparison.p_value, rel=1e-5)
        assert props["rlgate.bound"] == "0.05" and props["rlgate.threshold"] == "0.05"
        assert props["rlgate.verdict"] == comparison.criterion(Criterion.SIGNIFICANCE).outcome.value
        evidence = json.loads(props["rlgate.evidence"])
        assert evidence["verdict"] == comparison.verdict.value
        assert evidence["delta_pp"] == pytest.approx(comparison.delta_pp)
        suite = {p.name: p.value for p in crit.properties()}
        assert suite["rlgate.verdict"] == comparison.verdict.value

    def test_junit_reads_back_as_the_comparisons_results(self, comparison, tmp_path):
        path = tmp_path / "swe.xml"
        path.write_bytes(build_swe_junit(comparison).tostring())
        criteria = next(s for s in read_junit(path) if s.name == CRITERIA_SUITE)
        assert [c.result for c in criteria.cases] == list(comparison.criteria)


class TestRenderSweSummary:
    def test_summary_names_the_verdict_arms_and_repositories(self, comparison):
        text = render_swe_summary(comparison)
        assert f"SWE gate verdict: {comparison.verdict.value.upper()}" in text
        assert "before" in text and "after" in text
        for row in comparison.per_repo:
            assert row.repo in text
