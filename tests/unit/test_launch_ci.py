"""The CI definitions and the job scripts they share.

Both CI files (GitLab, GitHub Actions on self-hosted runners) must call the same scripts; the
scripts must be valid bash and use only subcommands and flags the real CLI parser accepts. The
nightly job is then run for real on this machine: ``--backend local`` with NeMo RL's entry
point replaced by ``rlgate.testing.standin``, so launch, watch, the convergence/perf pytest
tiers and the JUnit output are the production path.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from rlgate.cli.app import build_parser

from .helpers.launch_fixtures import ROOT, STANDIN, TARGET, swe_env

SCRIPTS = ROOT / "ci" / "scripts"
JOB_SCRIPTS = {"ci/scripts/nightly_convergence.sh", "ci/scripts/release_gate.sh"}
_INVOCATION = re.compile(r'"\$\{RLGATE\[@\]\}" ([a-z-]+)(?: ([a-z-]+))?(.*)$')


def gitlab() -> dict:
    return yaml.safe_load((ROOT / "ci" / "gitlab-ci.yml").read_text())


def github() -> dict:
    return yaml.safe_load((ROOT / "ci" / "github-actions.yml").read_text())


def scripts_called(lines: list[str]) -> set[str]:
    return {word for line in lines for word in line.split() if word.startswith("ci/scripts/")}


def logical_lines(text: str) -> list[str]:
    return text.replace("\\\n", " ").splitlines()


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


class TestCiDefinitions:
    def test_both_ci_files_call_the_same_job_scripts(self) -> None:
        lab = gitlab()
        lab_calls = {
            name: scripts_called(job["script"])
            for name, job in lab.items()
            if isinstance(job, dict) and "script" in job
        }
        hub_calls = {
            name: scripts_called([step.get("run", "") for step in job["steps"]])
            for name, job in github()["jobs"].items()
        }
        expected = {
            "nightly-convergence": {"ci/scripts/nightly_convergence.sh"},
            "release-gate": {"ci/scripts/release_gate.sh"},
            "nightly-canary": {"ci/scripts/canary.sh"},
        }
        assert lab_calls == expected and hub_calls == expected

    def test_ci_jobs_run_on_self_hosted_runners_and_publish_junit(self) -> None:
        for job in github()["jobs"].values():
            assert "self-hosted" in job["runs-on"]
            upload = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/upl"))
            assert upload["if"] == "always()" and upload["with"]["path"].startswith("reports/")
        lab = gitlab()
        assert lab["default"]["tags"] == ["rlgate-cluster"]
        nightly = lab["nightly-convergence"]
        assert nightly["artifacts"]["when"] == "always"
        assert nightly["artifacts"]["reports"]["junit"] == "reports/nightly/*.xml"
        assert nightly["variables"]["RLGATE_REPORTS"] == "reports/nightly"

    def test_github_workflow_triggers_nightly_on_a_schedule(self) -> None:
        doc = github()
        triggers = doc.get("on", doc.get(True))  # YAML 1.1 reads the key `on` as True
        assert triggers["schedule"][0]["cron"] and "workflow_dispatch" in triggers

    def test_each_github_schedule_starts_exactly_one_job(self) -> None:
        doc = github()
        crons = [t["cron"] for t in doc.get("on", doc.get(True))["schedule"]]
        for cron in crons:
            starts = [n for n, j in doc["jobs"].items() if f"'{cron}'" in j.get("if", "")]
            assert len(starts) == 1, (cron, starts)
        assert "'0 4 * * *'" in doc["jobs"]["nightly-canary"]["if"]

    def test_the_canary_job_publishes_its_junit(self) -> None:
        canary = gitlab()["nightly-canary"]
        assert canary["artifacts"]["reports"]["junit"] == "reports/canary/canary.xml"
        assert canary["variables"]["RLGATE_REPORTS"] == "reports/canary"
        job = github()["jobs"]["nightly-canary"]
        assert job["env"]["RLGATE_CANARY_WITH"] == "${{ inputs.with }}"  # env, not in `run:`
        assert all("inputs." not in step.get("run", "") for step in job["steps"])

    @pytest.mark.parametrize("script", sorted({*JOB_SCRIPTS, "ci/scripts/canary.sh"}))
    def test_job_scripts_are_executable_valid_bash(self, script: str) -> None:
        path = ROOT / script
        assert os.access(path, os.X_OK)
        check = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert check.returncode == 0, check.stderr

    @pytest.mark.parametrize("script", sorted({*JOB_SCRIPTS, "ci/scripts/canary.sh"}))
    def test_job_scripts_use_only_real_subcommands_and_flags(self, script: str) -> None:
        commands = subparsers(build_parser())
        seen = 0
        for line in logical_lines((ROOT / script).read_text()):
            match = _INVOCATION.search(line)
            if not match:
                continue
            name, sub, rest = match.groups()
            assert name in commands, f"{script}: rlgate {name} does not exist"
            parser = commands[name]
            if sub and sub in subparsers_or_empty(parser):
                parser = subparsers_or_empty(parser)[sub]
            for flag in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", rest.split("||")[0]):
                assert flag in parser._option_string_actions, f"{script}: {name} {flag}"
            seen += 1
        assert seen >= (1 if script.endswith("canary.sh") else 3)


def subparsers_or_empty(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    try:
        return subparsers(parser)
    except StopIteration:
        return {}


def run_nightly(tmp_path: Path, *standin_args: str) -> tuple[subprocess.CompletedProcess, Path]:
    nightly = tmp_path / "nightly.yaml"
    entry = {
        "recipe": str(TARGET),
        "name": "thinking-smoke",
        "steps": 6,
        "minutes": 10,
        "nodes": 1,
        "gpus": 8,
        "overrides": ["cluster.num_nodes=1"],
    }
    nightly.write_text(yaml.safe_dump({"cap_gpu_hours": 10, "runs": [entry]}))
    site = tmp_path / "site.yaml"
    site.write_text(yaml.safe_dump({"env": swe_env(tmp_path)}))
    reports = tmp_path / "reports"
    env = {
        **os.environ,
        "RLGATE_BACKEND": "local",
        "RLGATE_SITE": str(site),
        "RLGATE_NIGHTLY": str(nightly),
        "RLGATE_RUNS_ROOT": str(tmp_path / "runs"),
        "RLGATE_REPORTS": str(reports),
        "RLGATE_WATCH_INTERVAL": "0.5",
        "RLGATE_NO_CHECK": "1",
        "RLGATE_PYTHON": sys.executable,
        "RLGATE_ENTRYPOINT": shlex.join([*STANDIN, *standin_args]),
        # The rollout-path CPU benchmark (perf tier, no run dir, ~1 min per recipe on real
        # tokenizers) has its own tests; this job test is about the run-dir gates.
        "RLGATE_PYTEST_ARGS": "--ignore=tests/perf/test_rollout_path.py",
        "HF_HUB_OFFLINE": "1",
    }
    script = SCRIPTS / "nightly_convergence.sh"
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    return done, reports


def junit_cases(path: Path) -> dict[str, str]:
    outcome = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcome[case.get("name")] = kinds[0] if kinds else "passed"
    return outcome


class TestReleaseJob:
    def test_release_job_refuses_to_start_without_its_swe_inputs(self, tmp_path: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RLGATE_SWE_")}
        env |= {"RLGATE_TOKENIZERS": str(tmp_path), "RLGATE_REPORTS": str(tmp_path / "r")}
        done = subprocess.run(
            ["bash", str(SCRIPTS / "release_gate.sh")], env=env, capture_output=True, text=True
        )
        assert done.returncode != 0 and "RLGATE_SWE_BEFORE" in done.stderr
        assert not (tmp_path / "r").exists()


class TestNightlyJob:
    def test_nightly_job_launches_watches_and_gates_a_healthy_run(self, tmp_path: Path) -> None:
        done, reports = run_nightly(tmp_path)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        cases = junit_cases(reports / "thinking-smoke.xml")
        assert cases["test_convergence_check[completion]"] == "passed"
        assert "failure" not in cases.values() and "error" not in cases.values()
        assert (reports / "thinking-smoke.check.json").is_file()
        (run_dir,) = (reports / "run_dirs.txt").read_text().split()
        assert (Path(run_dir) / "rlgate_manifest.json").is_file()

    def test_nightly_job_fails_and_still_publishes_junit_for_a_short_run(
        self, tmp_path: Path
    ) -> None:
        done, reports = run_nightly(tmp_path, "--stop-at-step", "3")
        assert done.returncode == 1
        assert "STOPPED_SHORT" in done.stdout
        cases = junit_cases(reports / "thinking-smoke.xml")
        assert cases["test_convergence_check[completion]"] in ("failure", "error")


def run_canary_script(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("RLGATE_")}
    base.update(RLGATE_PYTHON=sys.executable, RLGATE_REPORTS=str(tmp_path / "reports"), **env)
    (tmp_path / "tok").mkdir(exist_ok=True)
    return subprocess.run(
        ["bash", str(SCRIPTS / "canary.sh")], env=base, capture_output=True, text=True, timeout=300
    )


class TestCanaryJob:
    def test_an_unknown_package_is_exit_2_with_rlgates_one_line(self, tmp_path: Path) -> None:
        done = run_canary_script(
            tmp_path, RLGATE_TOKENIZERS=str(tmp_path / "tok"), RLGATE_CANARY_WITH="torch==2.12.0"
        )
        assert done.returncode == 2, done.stderr
        assert "rlgate canary --with torch==2.12.0 --recipe recipes/" in done.stdout
        assert done.stderr.count("rlgate: error: ") == 1 and "torch" in done.stderr

    def test_a_wheel_path_reaches_rlgates_own_validation(self, tmp_path: Path) -> None:
        wheel = tmp_path / "vllm-0.34.0rc1-cp38-abi3-manylinux_2_28_x86_64.whl"
        done = run_canary_script(
            tmp_path, RLGATE_TOKENIZERS=str(tmp_path / "tok"), RLGATE_CANARY_WITH=f"vllm@{wheel}"
        )
        assert done.returncode == 2, done.stderr  # no such wheel: bad input, before any build
        assert f"--with vllm@{wheel}" in done.stdout
        assert done.stderr.count("rlgate: error: ") == 1 and wheel.name in done.stderr

    def test_no_tokenizer_root_stops_before_anything_runs(self, tmp_path: Path) -> None:
        done = run_canary_script(tmp_path, RLGATE_CANARY_WITH="vllm==0.26.0")
        assert done.returncode != 0
        assert "RLGATE_TOKENIZERS" in done.stderr
        assert not (tmp_path / "reports").exists()
