"""rlgate.swe.report: JSON payload, JUnit XML (parsed back with junitparser), summary table."""

import json

import numpy as np
import pytest
from junitparser import Error, Failure, JUnitXml, Properties

from rlgate.core.junit import read_junit
from rlgate.core.results import Outcome
from rlgate.swe.compare import Criterion, GateOptions, compare_arms
from rlgate.swe.readers import load_arm
from rlgate.swe.records import Outcome as Outcome_
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


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    """Two seeds per arm on 30 Verified instances; the before seeds' patches fail on 3 and 2."""
    root = tmp_path_factory.mktemp("seeded")
    ids = [r["instance_id"] for r in si.verified_rows()][::16][:30]
    universe = load_universe(si.write_subset_dataset(root / "u.jsonl", ids))
    rng = np.random.default_rng(REPORT_SEED + 1)
    before = []
    for seed, failed in ((0, 3), (1, 2)):
        solved = rng.random(30) < 0.5
        kinds = {i: si.RESOLVED if s else si.UNRESOLVED for i, s in zip(ids, solved, strict=True)}
        kinds.update(dict.fromkeys(ids[:failed], si.PATCH_FAILED))
        run = si.write_harness_run(root / f"b{seed}", f"b{seed}", kinds, dataset_ids=ids)
        before.append(run.final_report)
    after = []
    for seed in range(2):
        path = root / f"after{seed}.json"
        solved = rng.random(30) < 0.6
        outcomes = {i: {"resolved": bool(s)} for i, s in zip(ids, solved, strict=True)}
        path.write_text(json.dumps(outcomes))
        after.append(path)
    return compare_arms(
        load_arm("before", before, universe),
        load_arm("after", after, universe),
        universe,
        GateOptions(n_resamples=1000, max_infra_error_rate=0.1),
    )


class TestSummaryLabels:
    """What the summary's columns count is said where they are printed (issue 24)."""

    def test_patch_failed_is_named_for_what_it_means(self, seeded):
        lines = render_swe_summary(seeded).splitlines()
        head = next(line for line in lines if line.split()[:2] == ["arm", "runs"])
        assert "nopatch" not in head and "patch-failed" in head.split(), head
        before = next(line for line in lines if line.split()[:1] == ["before"])
        column = head.split().index("patch-failed")
        # the before arm's seeds failed to apply 3 and 2 patches: the column shows the most
        assert before.split()[column] == "3" and seeded.before.counts(Outcome_.PATCH_FAILED) == (
            3,
            2,
        )
        assert any("patch-failed: the patch failed to apply" in line for line in lines), lines
        assert any("the largest count over an arm's runs" in line for line in lines), lines

    def test_per_repository_columns_say_they_are_mean_counts_over_seeds(self, seeded):
        lines = render_swe_summary(seeded).splitlines()
        i = next(k for k, line in enumerate(lines) if line.split()[:1] == ["repository"])
        title = lines[i - 2]
        assert "resolved instances, mean of 2 seeds each (not %)" in title, title
        assert lines[i].split() == ["repository", "n", "before", "after", "d", "pp", "+/-"]
        rows = {line.split()[0]: line.split() for line in lines[i + 1 :] if "/" in line[:30]}
        for repo in seeded.per_repo:
            row = rows[repo.repo]
            assert float(row[2]) == pytest.approx(repo.before_resolved, abs=0.05)
            assert float(row[2]) <= repo.n  # a count of that repository's instances
        assert any(r.before_resolved != int(r.before_resolved) for r in seeded.per_repo)

    def test_json_keys_stay_as_they_were(self, seeded):
        doc = json.loads(json.dumps(comparison_to_dict(seeded)))
        assert doc["before"]["patch_failed"] == [3, 2]
        keys = {"repo", "n", "before_resolved", "after_resolved", "delta_pp", "gained", "lost"}
        assert all(set(r) == keys for r in doc["per_repo"])
