"""rlgate.swe.harness: argv checked by swebench's own parser, fail-fast prechecks, real grading.

No Docker daemon exists here, so running the harness cannot be exercised; what
can be is: the command line (parsed by swebench 5.0.2's own argparse, so a flag
typo fails there), the prechecks against a real docker SDK client with no
daemon, and grading/classification on logs graded by swebench's grader.
"""

import argparse
import json
import runpy
import sys
import time
import warnings
from pathlib import Path

import pytest

from rlgate.cli.app import main
from rlgate.core.errors import InfraError, SweError
from rlgate.swe import harness

from .helpers import swe_inputs as si
from .helpers import swe_logs

UNREACHABLE = "unix:///nonexistent/rlgate-test/docker.sock"


class _ParsedBySwebench(Exception):
    pass


def parse_with_swebench(argv, monkeypatch) -> argparse.Namespace:
    """Run swebench's ``run_evaluation`` __main__ block up to its parse_args, for real."""
    assert argv[1:3] == ["-m", harness.HARNESS_MODULE]
    captured = {}
    original = argparse.ArgumentParser.parse_args

    def stop_after_parsing(self, args=None, namespace=None):
        captured["ns"] = original(self, args, namespace)
        raise _ParsedBySwebench

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", stop_after_parsing)
    monkeypatch.setattr(sys, "argv", ["run_evaluation.py", *argv[3:]])
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", ".*found in sys.modules.*", RuntimeWarning)
        with pytest.raises(_ParsedBySwebench):
            runpy.run_module(harness.HARNESS_MODULE, run_name="__main__")
    return captured["ns"]


@pytest.fixture
def preds(tmp_path):
    rows = [
        {"instance_id": "django__django-11099", "model_name_or_path": "org/m", "model_patch": "d"},
        {"instance_id": "sympy__sympy-20590", "model_name_or_path": "org/m", "model_patch": ""},
    ]
    path = tmp_path / "preds.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


class TestBuildHarnessArgv:
    def test_argv_is_accepted_by_swebench_5_parser(self, preds, tmp_path, monkeypatch):
        opts = harness.HarnessOptions(
            predictions=preds, run_id="rl_s0", dataset=str(si.DATASET), max_workers=6, timeout=900
        )
        argv = harness.build_harness_argv(opts, report_dir=tmp_path / "reports")
        ns = parse_with_swebench(argv, monkeypatch)
        assert ns.dataset_name == str(si.DATASET.resolve())
        assert ns.predictions_path == str(preds.resolve())
        assert (ns.run_id, ns.split, ns.max_workers, ns.timeout) == ("rl_s0", "test", 6, 900)
        assert ns.report_dir == str((tmp_path / "reports").resolve())
        assert ns.modal is False and ns.instance_ids is None and ns.rewrite_reports is False

    def test_argv_passes_instance_ids_and_modal(self, preds, tmp_path, monkeypatch):
        opts = harness.HarnessOptions(
            predictions=preds,
            run_id="r",
            instance_ids=("django__django-11099", "sympy__sympy-20590"),
            modal=True,
        )
        ns = parse_with_swebench(harness.build_harness_argv(opts, report_dir=tmp_path), monkeypatch)
        assert ns.instance_ids == ["django__django-11099", "sympy__sympy-20590"]
        assert ns.modal is True
        assert ns.dataset_name == "SWE-bench/SWE-bench_Verified"

    def test_swebench_parser_rejects_4x_only_flags(self, preds, tmp_path, monkeypatch, capsys):
        """The check is real: swebench 5.x has no --namespace, so its parser exits 2."""
        opts = harness.HarnessOptions(predictions=preds, run_id="r")
        argv = [*harness.build_harness_argv(opts, report_dir=tmp_path), "--namespace", "swebench"]
        with pytest.raises(SystemExit) as info:
            parse_with_swebench(argv, monkeypatch)
        assert info.value.code == 2
        assert "--namespace" in capsys.readouterr().err

    @pytest.mark.parametrize(
        ("changes", "message"),
        [
            pytest.param({"dataset": "--rewrite_reports"}, "starts with '-'", id="dataset_option"),
            pytest.param(
                {"instance_ids": ("django__django-11099", "--modal")},
                "starts with '-'",
                id="instance_id_option",
            ),
            pytest.param({"dataset": "SWE-bench/x\n--modal"}, "a line break", id="dataset_newline"),
        ],
    )
    def test_a_value_the_harness_would_read_as_an_option_is_refused(
        self, preds, tmp_path, changes, message
    ):
        opts = harness.HarnessOptions(predictions=preds, run_id="r", **changes)
        with pytest.raises(SweError, match=message):
            harness.build_harness_argv(opts, report_dir=tmp_path)

    @pytest.mark.parametrize("option", ["--dataset=--rewrite_reports", "--instance-ids=--modal"])
    def test_swe_eval_refuses_it_before_the_docker_check(self, preds, tmp_path, capsys, option):
        argv = ["swe", "eval", "--predictions", str(preds), "--harness-run-id", "r", option]
        assert main([*argv, "--run-dir", str(tmp_path / "run")]) == 2  # not 3: no Docker here
        err = capsys.readouterr().err
        assert err.startswith("rlgate: error: ") and "starts with '-'" in err, err

    def test_harness_options_reject_a_run_id_with_a_path(self, preds):
        with pytest.raises(SweError, match="run id"):
            harness.HarnessOptions(predictions=preds, run_id="../other")


class TestPrechecks:
    def test_check_docker_without_a_daemon_fails_fast_naming_modal(self):
        start = time.monotonic()
        with pytest.raises(InfraError) as info:
            harness.check_docker(base_url=UNREACHABLE)
        assert time.monotonic() - start < 10
        text = str(info.value)
        assert "no Docker daemon is reachable" in text and "--modal" in text

    def test_check_modal_without_credentials_is_infra(self, tmp_path, monkeypatch):
        monkeypatch.setenv("HOME", str(tmp_path))
        with pytest.raises(InfraError, match="modal token new"):
            harness.check_modal()

    def test_run_swebench_eval_stops_before_the_harness_without_docker(
        self, preds, tmp_path, monkeypatch
    ):
        monkeypatch.setenv("DOCKER_HOST", UNREACHABLE)
        opts = harness.HarnessOptions(predictions=preds, run_id="r1", dataset=str(si.DATASET))
        with pytest.raises(InfraError, match="no Docker daemon"):
            harness.run_swebench_eval(opts, tmp_path / "run")
        assert not (tmp_path / "run").exists()  # nothing started, nothing written

    def test_run_swebench_eval_refuses_a_reused_run_id(self, preds, tmp_path):
        (tmp_path / "run/logs/run_evaluation/r1").mkdir(parents=True)
        opts = harness.HarnessOptions(predictions=preds, run_id="r1", dataset=str(si.DATASET))
        with pytest.raises(SweError, match="already exists") as info:
            harness.run_swebench_eval(opts, tmp_path / "run")
        assert "fresh --harness-run-id" in str(info.value)

    @pytest.mark.docker
    def test_find_missing_images_on_a_real_daemon(self):
        try:
            client = harness.check_docker()
        except InfraError as exc:
            pytest.skip(f"needs a Docker daemon: {exc.message}")
        missing = harness.find_missing_images(client, ["rlgate/does-not-exist:never"])
        assert missing == ["rlgate/does-not-exist:never"]


class TestReadPredictions:
    def test_read_predictions_keys_by_instance(self, preds):
        got = harness.read_predictions(preds)
        assert list(got) == ["django__django-11099", "sympy__sympy-20590"]

    @pytest.mark.parametrize(
        ("rows", "match"),
        [
            pytest.param(
                [{"instance_id": "a", "model_name_or_path": "m"}],
                "no model_patch",
                id="no_patch_key",
            ),
            pytest.param(
                [{"instance_id": "a", "model_name_or_path": "m", "model_patch": ""}] * 2,
                "duplicate prediction",
                id="duplicate",
            ),
            pytest.param(
                [
                    {"instance_id": "a", "model_name_or_path": "m1", "model_patch": ""},
                    {"instance_id": "b", "model_name_or_path": "m2", "model_patch": ""},
                ],
                "one model per predictions file",
                id="two_models",
            ),
        ],
    )
    def test_read_predictions_rejects_bad_files(self, tmp_path, rows, match):
        path = tmp_path / "p.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        with pytest.raises(SweError, match=match):
            harness.read_predictions(path)


PARSER_FAMILIES = [
    pytest.param("django__django-11099", id="django"),
    pytest.param("sympy__sympy-20590", id="sympy"),
    pytest.param("pytest-dev__pytest-5262", id="pytest"),
    pytest.param("astropy__astropy-12907", id="pytest_v2"),
    pytest.param("psf__requests-2317", id="pytest_options"),
    pytest.param("matplotlib__matplotlib-13989", id="matplotlib"),
    pytest.param("mwaskom__seaborn-3069", id="seaborn"),
]


class TestGrading:
    @pytest.mark.parametrize("iid", PARSER_FAMILIES)
    @pytest.mark.parametrize("resolved", [True, False], ids=["passing", "failing"])
    def test_grade_test_output_uses_swebench_grader(self, tmp_path, iid, resolved):
        row = si.rows_by_id()[iid]
        log = tmp_path / "test_output.txt"
        log.write_text(si.render_test_output(row, resolved))
        pred = {"instance_id": iid, "model_name_or_path": "m", "model_patch": "x"}
        report = swe_logs.grade_test_output(row, pred, log)[iid]
        assert report["resolved"] is resolved
        assert report["patch_successfully_applied"] is True
        f2p = report["tests_status"]["FAIL_TO_PASS"]
        assert set(f2p["success"] + f2p["failure"]) == set(json.loads(row["FAIL_TO_PASS"]))

    def test_grade_test_output_without_end_marker_is_not_applied(self, tmp_path):
        row = si.rows_by_id()["django__django-11099"]
        log = tmp_path / "test_output.txt"
        log.write_text(si.render_test_output(row, True).split(">>>>> End Test Output")[0])
        pred = {"instance_id": row["instance_id"], "model_name_or_path": "m", "model_patch": "x"}
        report = swe_logs.grade_test_output(row, pred, log)[row["instance_id"]]
        assert report["resolved"] is False and report["patch_successfully_applied"] is False


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory):
    ids = ["django__django-11099", "sympy__sympy-20590", "psf__requests-2317",
           "astropy__astropy-12907", "pytest-dev__pytest-5262"]  # fmt: skip
    kinds = [si.UNRESOLVED, si.DOCKER_ERROR, si.PATCH_FAILED, si.HARNESS_ERROR, si.RESOLVED]
    return si.write_harness_run(
        tmp_path_factory.mktemp("failed"), "r", dict(zip(ids, kinds, strict=True))
    )


class TestInfraClassification:
    def test_classify_instance_prefers_swebench_signatures(self, failed_run):
        hit = harness.classify_instance(failed_run.log_dir / "org__model/sympy__sympy-20590")
        assert (hit.reason, hit.tier) == ("container_unavailable", "environment")

    def test_classify_instance_leaves_model_failures_alone(self, failed_run):
        model = failed_run.log_dir / "org__model"
        assert harness.classify_instance(model / "psf__requests-2317") is None  # patch failed
        assert harness.classify_instance(model / "django__django-11099") is None  # graded
        assert harness.classify_instance(model / "astropy__astropy-12907") is None  # unknown

    def test_classify_instance_reads_rlgate_harness_table(self, tmp_path):
        inst = tmp_path / "django__django-11099"
        inst.mkdir()
        (inst / "run_instance.log").write_text(
            "docker.errors.ImageNotFound: 404 Client Error: pull access denied for "
            "swebench/sweb.eval.x86_64.django_1776_django-11099"
        )
        hit = harness.classify_instance(inst)
        assert (hit.reason, hit.tier) == ("image_pull_failed", "harness")
        assert harness.classify_instance(tmp_path / "never_started").reason == "never_started"

    def test_classify_failures_on_a_final_report_picks_the_retryable(self, failed_run):
        report = json.loads(failed_run.final_report.read_text())
        found = harness.classify_failures(failed_run.log_dir / "org__model", report)
        assert [f.instance_id for f in found] == ["sympy__sympy-20590"]

    def test_supersede_logs_moves_instead_of_deleting(self, failed_run, tmp_path):
        import shutil

        run_dir = tmp_path / "run"
        shutil.copytree(failed_run.root, run_dir)
        model = run_dir / "logs/run_evaluation/r/org__model"
        failure = harness.InfraFailure("sympy__sympy-20590", "container_unavailable", "environment")
        harness.supersede_logs(run_dir, model, [failure], 1)
        assert not (model / "sympy__sympy-20590").exists()
        moved = run_dir / "superseded/attempt1/sympy__sympy-20590/run_instance.log"
        assert "Error response from daemon" in moved.read_text()


class TestFinalReportWriter:
    def test_write_final_report_matches_the_rlgate_reader(self, failed_run):
        from rlgate.swe.readers import load_runs
        from rlgate.swe.records import Outcome, load_universe

        (run,) = load_runs(failed_run.final_report, load_universe(si.DATASET))
        assert run.outcomes["pytest-dev__pytest-5262"].outcome is Outcome.RESOLVED
        assert run.outcomes["sympy__sympy-20590"].outcome is Outcome.INFRA
        assert Path(failed_run.final_report).name == "org__model.r.json"


class TestCollectAndFinalize:
    def test_collect_attempt_then_finalize_gives_a_run_dir_compare_can_read(self, tmp_path):
        from rlgate.swe.readers import load_runs
        from rlgate.swe.records import Outcome, load_universe

        ids = ["django__django-11099", "sympy__sympy-20590", "psf__requests-2317"]
        kinds = [si.RESOLVED, si.DOCKER_ERROR, si.PATCH_FAILED]
        # swebench wrote its report into its cwd, as it does with --modal
        run = si.write_harness_run(tmp_path / "run", "rl_s0", dict(zip(ids, kinds, strict=True)))
        opts = harness.HarnessOptions(predictions=run.predictions, run_id="rl_s0")
        attempt = harness.collect_attempt(
            opts, run.root, "org/model", 1, argv=["python"], returncode=0
        )
        assert attempt.report == run.root / "reports/attempt1/org__model.rl_s0.json"
        assert [(f.instance_id, f.reason) for f in attempt.infra] == [
            ("sympy__sympy-20590", "container_unavailable")
        ]
        result = harness.finalize_eval(opts, run.root, "org/model", [attempt])
        record = json.loads(result.record.read_text())
        # paths in the record are relative to the run directory (read from anywhere)
        assert result.final_report == run.root / "org__model.rl_s0.json"
        assert record["final_report"] == "org__model.rl_s0.json"
        assert record["attempts"][0]["report"] == "reports/attempt1/org__model.rl_s0.json"
        assert record["remaining_infra"][0]["tier"] == "environment"
        (loaded,) = load_runs(run.root, load_universe(si.DATASET))
        assert loaded.outcomes["psf__requests-2317"].outcome is Outcome.PATCH_FAILED
        assert loaded.outcomes["sympy__sympy-20590"].outcome is Outcome.INFRA

    def test_collect_attempt_without_a_report_is_infra_with_the_log_tail(self, preds, tmp_path):
        (tmp_path / "harness.attempt1.log").write_text(
            "Running 2 instances...\ndocker.errors.DockerException: Error while fetching "
            "server API version\n"
        )
        opts = harness.HarnessOptions(predictions=preds, run_id="r")
        with pytest.raises(InfraError, match="exited with 1 and wrote no report") as info:
            harness.collect_attempt(opts, tmp_path, "org/m", 1, argv=["python"], returncode=1)
        assert "Error while fetching server API version" in str(info.value)

    @pytest.mark.parametrize(
        ("content", "match"),
        [
            pytest.param(b"\x00\xff", r"unusable report: .*is not UTF-8", id="binary"),
            pytest.param(b"[]", r"unusable report: .*is a JSON object, got list", id="a_list"),
            pytest.param(
                json.dumps(
                    {k: [] for k in ("completed_ids", "submitted_ids", "unresolved_ids",
                                     "empty_patch_ids")}
                    | {"resolved_ids": ["a__b-1"], "error_ids": ["a__b-1"]}
                ).encode(),
                r"unusable report: .*a__b-1 listed in both resolved_ids and error_ids",
                id="contradictory",
            ),
        ],
    )  # fmt: skip
    def test_collect_attempt_with_an_unusable_report_is_infra(
        self, preds, tmp_path, content, match
    ):
        """The harness wrote it, so a bad report is an infrastructure fault (exit 3)."""
        report = tmp_path / "reports/attempt1/org__m.r.json"
        report.parent.mkdir(parents=True)
        report.write_bytes(content)
        opts = harness.HarnessOptions(predictions=preds, run_id="r")
        with pytest.raises(InfraError, match=match):
            harness.collect_attempt(opts, tmp_path, "org/m", 1, argv=["python"], returncode=0)

    def test_finalize_records_what_the_retry_reran(self, tmp_path):
        ids = ["django__django-11099", "sympy__sympy-20590", "psf__requests-2317"]
        kinds = [si.RESOLVED, si.DOCKER_ERROR, si.HARNESS_ERROR]
        run = si.write_harness_run(tmp_path / "run", "r", dict(zip(ids, kinds, strict=True)))
        opts = harness.HarnessOptions(predictions=run.predictions, run_id="r")
        first = harness.collect_attempt(opts, run.root, "org/model", 1, argv=["p"], returncode=0)
        assert first.error_ids == ("psf__requests-2317", "sympy__sympy-20590")
        # the rerun's final report over the same logs, as swebench writes it
        swe_logs.write_final_report(
            {i: {"instance_id": i, "model_name_or_path": "org/model", "model_patch": si.PATCH}
             for i in ids},
            [si.rows_by_id()[i] for i in ids], "r", run.root, run.root / "reports/attempt2",
        )  # fmt: skip
        again = harness.collect_attempt(opts, run.root, "org/model", 2, argv=["p"], returncode=0)
        result = harness.finalize_eval(opts, run.root, "org/model", [first, again])
        record = json.loads(result.record.read_text())
        assert record["retried"] == ["psf__requests-2317", "sympy__sympy-20590"]
        assert [a["attempt"] for a in record["attempts"]] == [1, 2]
        assert result.final_report.read_text() == again.report.read_text()
