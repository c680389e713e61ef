"""rlgate.swe.records / rlgate.swe.readers: the universe and the four result readers.

Inputs are real: the Verified v5 parquet, per-instance reports graded by
swebench's own grader, final reports written by swebench's make_run_report,
and the rollout files shipped in the nemo-gym 0.7.0 wheel.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlgate.core.errors import SweError
from rlgate.swe import readers as _swe_formats
from rlgate.swe.readers import load_arm, load_runs
from rlgate.swe.records import InputFormat, Outcome, load_universe

from .helpers import swe_inputs as si
from .helpers import swe_logs

# sha256 of the v5 Verified parquet recorded in swebench.md section 1.7
VERIFIED_SHA256 = "9cf3c8d406a3878dffdec80e1933b2601d00fd5868aabbe6f268c0a29484f21a"


@pytest.fixture(scope="module")
def universe():
    return load_universe(si.DATASET)


@pytest.fixture(scope="module")
def ids(universe):
    # one of each parser family: astropy (pytest v2), django, sympy, pytest-dev, requests
    pick = [
        "astropy__astropy-12907",
        "django__django-11099",
        "django__django-11133",
        "sympy__sympy-13031",
        "pytest-dev__pytest-5262",
        "psf__requests-2317",
        "django__django-10097",
        "sympy__sympy-20590",
        "django__django-13012",
    ]
    assert all(i in universe.repos for i in pick)
    return pick


KINDS = [
    si.RESOLVED,
    si.UNRESOLVED,
    si.EMPTY_PATCH,
    si.PATCH_FAILED,
    si.HARNESS_ERROR,
    si.DOCKER_ERROR,
    si.MISSING,
    si.RESOLVED,
    si.RESOLVED,
]
EXPECTED = {
    si.RESOLVED: Outcome.RESOLVED,
    si.UNRESOLVED: Outcome.UNRESOLVED,
    si.EMPTY_PATCH: Outcome.EMPTY_PATCH,
    si.PATCH_FAILED: Outcome.PATCH_FAILED,
    si.HARNESS_ERROR: Outcome.ERROR,
    si.DOCKER_ERROR: Outcome.INFRA,
    si.MISSING: Outcome.MISSING,
}


@pytest.fixture(scope="module")
def harness_run(tmp_path_factory, ids):
    return si.write_harness_run(
        tmp_path_factory.mktemp("run"), "base_s0", dict(zip(ids, KINDS, strict=True))
    )


class TestLoadUniverse:
    def test_load_universe_pins_the_verified_parquet(self, universe):
        assert universe.n == 500
        assert universe.file_sha256 == VERIFIED_SHA256
        assert universe.repos["django__django-11099"] == "django/django"
        assert len({r for r in universe.repos.values()}) == 12
        assert universe.labels_sha256 is not None

    def test_load_universe_reads_a_jsonl_subset_with_the_same_labels(self, universe, tmp_path):
        rows = [r for r in si.verified_rows() if r["repo"] == "psf/requests"]
        subset = tmp_path / "requests.jsonl"
        subset.write_text("".join(json.dumps(r) + "\n" for r in rows))
        small = load_universe(subset)
        assert small.n == 8
        assert all(small.labels[i] == universe.labels[i] for i in small.ids)
        assert small.ids_sha256 != universe.ids_sha256

    def test_load_universe_rejects_a_directory_without_the_split(self, tmp_path):
        with pytest.raises(SweError, match=r"no dev\.parquet"):
            load_universe(tmp_path, split="dev")

    def test_load_universe_rejects_duplicate_ids(self, tmp_path):
        row = {"instance_id": "a__b-1", "repo": "a/b"}
        (tmp_path / "d.json").write_text(json.dumps([row, row]))
        with pytest.raises(SweError, match="duplicate instance_id a__b-1"):
            load_universe(tmp_path / "d.json")


class TestMirroredConstants:
    def test_mirrored_constants_equal_swebench_5_constants(self):
        from swebench.harness import constants

        assert _swe_formats.LOG_REPORT == constants.LOG_REPORT
        assert _swe_formats.LOG_INSTANCE == constants.LOG_INSTANCE
        assert _swe_formats.LOG_RUN_METADATA == constants.LOG_RUN_METADATA
        assert _swe_formats.RUN_EVALUATION_LOG_DIR == constants.RUN_EVALUATION_LOG_DIR
        assert _swe_formats.APPLY_PATCH_FAIL == constants.APPLY_PATCH_FAIL
        from rlgate.swe import harness

        assert harness.LOG_TEST_OUTPUT == constants.LOG_TEST_OUTPUT


class TestFinalReport:
    def test_final_report_maps_every_harness_category(self, harness_run, universe, ids):
        (run,) = load_runs(harness_run.final_report, universe)
        assert run.input_format is InputFormat.FINAL_REPORT
        for iid, kind in zip(ids, KINDS, strict=True):
            assert run.outcomes[iid].outcome is EXPECTED[kind], (iid, kind)
        assert run.outcomes[ids[5]].reason == "container_unavailable"  # swebench's classifier
        assert run.count(Outcome.MISSING) == 500 - len(ids) + 1
        assert run.scope == frozenset(universe.ids)
        assert run.dataset_name == str(si.DATASET)  # from the harness's run.json

    def test_final_report_lists_empty_patch_instances_as_not_resolved(self, harness_run, universe):
        (run,) = load_runs(harness_run.final_report, universe)
        report = json.loads(harness_run.final_report.read_text())
        assert run.ids(Outcome.EMPTY_PATCH) == report["empty_patch_ids"]
        assert run.count(Outcome.RESOLVED) == len(report["resolved_ids"]) == 3

    def test_final_report_without_logs_keeps_patch_failures_as_errors(
        self, harness_run, universe, ids, tmp_path
    ):
        alone = tmp_path / harness_run.final_report.name
        alone.write_text(harness_run.final_report.read_text())
        (run,) = load_runs(alone, universe)
        assert run.outcomes[ids[3]].outcome is Outcome.ERROR
        assert run.dataset_name is None

    def test_truncated_final_report_names_the_file(self, harness_run, universe, tmp_path):
        text = harness_run.final_report.read_text()
        cut = tmp_path / "model.cut.json"
        cut.write_text(text[: len(text) // 2])
        with pytest.raises(SweError, match=r"model\.cut\.json: not valid JSON at line"):
            load_runs(cut, universe)

    def test_final_report_missing_keys_is_an_error(self, harness_run, universe, tmp_path):
        doc = json.loads(harness_run.final_report.read_text())
        del doc["error_ids"]
        (tmp_path / "r.json").write_text(json.dumps(doc))
        with pytest.raises(SweError, match="missing error_ids"):
            load_runs(tmp_path / "r.json", universe)

    def test_final_report_with_inconsistent_counts_is_an_error(
        self, harness_run, universe, tmp_path
    ):
        doc = json.loads(harness_run.final_report.read_text())
        doc["resolved_ids"] = doc["resolved_ids"][:-1]
        (tmp_path / "r.json").write_text(json.dumps(doc))
        with pytest.raises(SweError, match="resolved_instances=3 but resolved_ids lists 2"):
            load_runs(tmp_path / "r.json", universe)

    def test_final_report_with_ids_outside_the_dataset_is_an_error(
        self, harness_run, universe, tmp_path
    ):
        doc = json.loads(harness_run.final_report.read_text())
        doc["resolved_ids"].append("octo__repo-1")
        doc["resolved_instances"] += 1
        (tmp_path / "r.json").write_text(json.dumps(doc))
        with pytest.raises(
            SweError, match=r"1 instance id\(s\) are not in the dataset.*octo__repo-1"
        ):
            load_runs(tmp_path / "r.json", universe)


class TestLogDir:
    def test_log_dir_agrees_with_the_final_report_where_reports_exist(
        self, harness_run, universe, ids
    ):
        (logs,) = load_runs(harness_run.log_dir, universe)
        (final,) = load_runs(harness_run.final_report, universe)
        assert logs.input_format is InputFormat.LOG_DIR and logs.scope is None
        for iid in ids:
            if final.outcomes[iid].outcome in (Outcome.RESOLVED, Outcome.UNRESOLVED):
                assert logs.outcomes[iid].outcome is final.outcomes[iid].outcome
        assert logs.outcomes[ids[3]].outcome is Outcome.PATCH_FAILED
        assert logs.outcomes[ids[4]].outcome is Outcome.ERROR
        # no directory for an empty patch: a log dir cannot tell it from missing
        assert logs.outcomes[ids[2]].outcome is Outcome.MISSING

    def test_log_dir_accepts_the_model_directory(self, harness_run, universe):
        (run_level,) = load_runs(harness_run.log_dir, universe)
        (model_level,) = load_runs(harness_run.log_dir / "org__model", universe)
        assert run_level.outcomes == model_level.outcomes

    def test_corrupt_instance_report_names_the_file(self, harness_run, universe, ids, tmp_path):
        import shutil

        copy = tmp_path / "logs"
        shutil.copytree(harness_run.log_dir, copy)
        report = copy / "org__model" / ids[0] / "report.json"
        report.write_text(report.read_text()[:40])
        with pytest.raises(SweError, match=rf"{ids[0]}/report\.json: not valid JSON"):
            load_runs(copy, universe)

    def test_log_dir_with_two_models_is_ambiguous(self, harness_run, universe, tmp_path):
        import shutil

        copy = tmp_path / "logs"
        shutil.copytree(harness_run.log_dir, copy)
        shutil.copytree(copy / "org__model", copy / "other")
        with pytest.raises(SweError, match="holds logs of 2 models"):
            load_runs(copy, universe)

    def test_directory_without_harness_logs_is_rejected(self, universe, tmp_path):
        (tmp_path / "empty").mkdir()
        with pytest.raises(SweError, match="not a harness log directory"):
            load_runs(tmp_path, universe)

    def test_log_dir_graded_with_other_labels_is_a_revision_mismatch(self, universe, tmp_path):
        """A report graded against another dataset revision lists other F2P tests."""
        row = dict(si.rows_by_id()["django__django-11099"])
        row["FAIL_TO_PASS"] = json.dumps(json.loads(row["FAIL_TO_PASS"])[:-1])  # old labels
        pred = {"instance_id": row["instance_id"], "model_name_or_path": "m", "model_patch": "x"}
        swe_logs.write_instance_logs(tmp_path, "r", pred, row, si.render_test_output(row, True))
        (run,) = load_runs(tmp_path / "logs/run_evaluation/r", universe)
        assert run.label_mismatch == ("django__django-11099",)


class TestInstanceMap:
    def test_merged_report_json_files_read_like_the_log_dir(self, harness_run, universe):
        merged = {}
        for report in sorted(harness_run.log_dir.glob("*/*/report.json")):
            merged.update(json.loads(report.read_text()))
        (tmp := harness_run.root / "merged.json").write_text(json.dumps(merged))
        (run,) = load_runs(tmp, universe)
        (logs,) = load_runs(harness_run.log_dir, universe)
        assert run.input_format is InputFormat.INSTANCE_MAP
        assert {i: o.outcome for i, o in run.outcomes.items() if i in merged} == {
            i: logs.outcomes[i].outcome for i in merged
        }
        assert run.scope == frozenset(merged)

    def test_instance_map_requires_boolean_resolved(self, universe, tmp_path):
        (tmp_path / "m.json").write_text(json.dumps({"django__django-11099": {"resolved": "yes"}}))
        with pytest.raises(SweError, match="needs a boolean 'resolved'"):
            load_runs(tmp_path / "m.json", universe)

    def test_unrecognised_json_shape_lists_the_accepted_shapes(self, universe, tmp_path):
        (tmp_path / "x.json").write_text(json.dumps({"accuracy": 0.4}))
        with pytest.raises(SweError, match="unrecognised SWE-bench result") as info:
            load_runs(tmp_path / "x.json", universe)
        assert "rollouts" in str(info.value)

    def test_missing_path_is_an_error(self, universe, tmp_path):
        with pytest.raises(SweError, match="no such file"):
            load_runs(tmp_path / "nope.json", universe)


def _gym_rows():
    return [json.loads(line) for line in si.GYM_EXAMPLE_ROLLOUTS.read_text().splitlines()]


def _write_rows(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


class TestGymRollouts:
    def test_real_gym_rollouts_read_against_their_instances(self, tmp_path):
        rows = _gym_rows()
        iids = {r["responses_create_params"]["metadata"]["instance_id"] for r in rows}
        subset = [r for r in si.verified_rows() if r["instance_id"] in iids]
        _write_rows(tmp_path / "subset.jsonl", subset)
        small = load_universe(tmp_path / "subset.jsonl")
        (run,) = load_runs(si.GYM_EXAMPLE_ROLLOUTS, small)
        assert run.input_format is InputFormat.GYM_ROLLOUTS
        assert run.count(Outcome.RESOLVED) == sum(r["reward"] == 1.0 for r in rows) == 7
        assert run.count(Outcome.UNRESOLVED) == 3
        assert run.dataset_name == "princeton-nlp/SWE-bench_Verified"
        assert run.label_mismatch == ()  # its labels agree with the v5 parquet

    def test_real_gym_rollouts_leave_the_rest_of_verified_missing(self, universe):
        (run,) = load_runs(si.GYM_EXAMPLE_ROLLOUTS, universe)
        assert run.count(Outcome.MISSING) == 490
        assert run.infra_error_rate == pytest.approx(0.98)

    def test_rollouts_of_another_benchmark_are_rejected(self, universe):
        with pytest.raises(SweError, match="not in the dataset") as info:
            load_runs(si.GYM_NON_VERIFIED_ROLLOUTS, universe)
        assert "jqlang__jq-2681" in str(info.value)

    def test_rollout_repeats_become_one_run_per_index(self, universe, tmp_path):
        rows = _gym_rows()
        repeats = []
        for index in range(3):
            for r in rows:
                repeats.append({**r, "_ng_rollout_index": index})
        runs = load_runs(_write_rows(tmp_path / "r.jsonl", repeats), universe)
        assert [r.label.rsplit("#", 1)[1] for r in runs] == ["rollout0", "rollout1", "rollout2"]
        assert load_arm("after", [tmp_path / "r.jsonl"], universe).runs == tuple(runs)

    def test_duplicate_instances_without_a_rollout_index_are_an_error(self, universe, tmp_path):
        rows = [{k: v for k, v in r.items() if k != "_ng_rollout_index"} for r in _gym_rows()]
        path = _write_rows(tmp_path / "r.jsonl", rows + rows[:1])
        with pytest.raises(
            SweError, match=r"r\.jsonl:11: django__django-10999 already seen at line 1"
        ):
            load_runs(path, universe)

    def test_truncated_rollouts_name_the_line(self, universe, tmp_path):
        text = si.GYM_EXAMPLE_ROLLOUTS.read_text()
        cut = tmp_path / "cut.jsonl"
        cut.write_text(text[: len(text) - 500])
        with pytest.raises(SweError, match=r"cut\.jsonl:10: not valid JSON"):
            load_runs(cut, universe)

    def test_rollout_without_an_instance_id_lists_where_it_looked(self, universe, tmp_path):
        path = _write_rows(tmp_path / "r.jsonl", [{"reward": 1.0, "uuid": "x"}])
        with pytest.raises(SweError, match=r"cannot find the instance id.*task_id.*'uuid'"):
            load_runs(path, universe)

    def test_non_binary_reward_is_an_error(self, universe, tmp_path):
        path = _write_rows(
            tmp_path / "r.jsonl", [{"instance_id": "django__django-11099", "reward": 0.5}]
        )
        with pytest.raises(SweError, match="not 0 or 1"):
            load_runs(path, universe)

    def test_predictions_file_is_not_mistaken_for_results(self, universe, tmp_path):
        pred = {"instance_id": "django__django-11099", "model_name_or_path": "m", "model_patch": ""}
        with pytest.raises(SweError, match="predictions file") as info:
            load_runs(_write_rows(tmp_path / "p.jsonl", [pred]), universe)
        assert "rlgate swe eval" in str(info.value)

    @pytest.mark.parametrize(
        ("extra", "expected"),
        [
            pytest.param({"evaluation_completed": False}, Outcome.ERROR, id="eval_not_completed"),
            pytest.param({"eval_timed_out": True}, Outcome.INFRA, id="eval_timeout"),
            pytest.param({"eval_oom_killed": True}, Outcome.INFRA, id="eval_oom"),
            pytest.param({"patch_exists": False}, Outcome.EMPTY_PATCH, id="no_patch"),
            pytest.param({"mask_sample": True}, Outcome.INFRA, id="masked_infra"),
            pytest.param(
                {"mask_sample": True, "agent_error_kind": "max_iteration"},
                Outcome.UNRESOLVED,
                id="masked_max_iteration_is_model_failure",
            ),
            pytest.param({"agent_error_kind": "other"}, Outcome.INFRA, id="agent_crash"),
            pytest.param(
                {"agent_error_kind": "other", "patch_exists": False},
                Outcome.INFRA,
                id="agent_crash_without_patch",
            ),
            pytest.param(
                {"agent_error_kind": "stuck_in_loop"}, Outcome.UNRESOLVED, id="stuck_is_the_model"
            ),
        ],
    )
    def test_gym_failure_flags_map_to_categories(self, universe, tmp_path, extra, expected):
        row = {"instance_id": "django__django-11099", "reward": 0.0, "resolved": False, **extra}
        (run,) = load_runs(_write_rows(tmp_path / "r.jsonl", [row]), universe)
        assert run.outcomes["django__django-11099"].outcome is expected


class TestPurity:
    # Import contracts (pyproject [tool.importlinter], tests/unit/test_layering.py) keep the
    # pure SWE modules free of docker and the swebench harness; this checks it at run time.
    def test_reading_and_comparing_does_not_load_docker(self):
        code = (
            "import sys, rlgate.swe.records, rlgate.swe.compare, rlgate.swe.report, "
            "rlgate.swe.readers;"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('docker', 'swebench')))"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == "[]"


class TestLoadUniverseErrors:
    def test_load_universe_names_a_corrupt_parquet(self, tmp_path):
        bad = tmp_path / "test.parquet"
        bad.write_bytes((si.DATASET / "test.parquet").read_bytes()[:5000])
        with pytest.raises(SweError, match=r"test\.parquet: cannot read the dataset"):
            load_universe(tmp_path)

    def test_load_universe_rejects_rows_without_repo(self, tmp_path):
        (tmp_path / "d.jsonl").write_text(json.dumps({"instance_id": "a__b-1"}) + "\n")
        with pytest.raises(SweError, match="needs instance_id and repo"):
            load_universe(tmp_path / "d.jsonl")
