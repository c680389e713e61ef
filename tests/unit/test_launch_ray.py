"""The Ray backend against a real Ray cluster started here, on 127.0.0.1.

One cluster per module (``ray start --head --block`` with the dashboard, whose job API the
backend uses): real jobs run the launched command, a failure is detected through Ray's job
status, logs are collected into the run directory. The cluster is stopped by its process
group id in a ``finally``; nothing else on the machine is touched.
"""

from __future__ import annotations

import base64
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

from rlgate.cli.app import main
from rlgate.core.errors import ExitCode, InfraError, LaunchError
from rlgate.launch.manifest import Backend, RunStatus, load_manifest, write_manifest
from rlgate.launch.plan import backend_for, initial_manifest, launch, plan_launch
from rlgate.launch.ray_jobs import RayBackend, submission_id
from rlgate.launch.site import RaySite, SiteConfig
from rlgate.launch.watch import watch_run

from .helpers.launch_fixtures import ONE_NODE, STANDIN, TARGET, swe_env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _up(address: str) -> bool:
    try:
        with urllib.request.urlopen(f"{address}/api/version", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    ray_cli = Path(sys.executable).with_name("ray")
    temp = Path(tempfile.mkdtemp(prefix="rlg-ray-", dir="/tmp"))  # short: unix socket paths
    dashboard = free_port()
    argv = [str(ray_cli), "start", "--head", "--block", "--disable-usage-stats"]
    argv += ["--node-ip-address=127.0.0.1", "--num-cpus=1", "--include-dashboard=true"]
    argv += [f"--port={free_port()}", f"--dashboard-port={dashboard}"]
    argv += ["--dashboard-host=127.0.0.1", f"--ray-client-server-port={free_port()}"]
    argv += [f"--dashboard-agent-listen-port={free_port()}", f"--temp-dir={temp}"]
    log = (temp / "ray-start.log").open("wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    address = f"http://127.0.0.1:{dashboard}"
    try:
        deadline = time.monotonic() + 120
        while not _up(address):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"Ray did not start: {(temp / 'ray-start.log').read_text()[-3000:]}")
            time.sleep(0.5)
        yield address
    finally:
        _stop_jobs(address)
        proc.terminate()  # `ray start --block` drains and stops the processes it started
        try:
            proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # leftovers of the group it leads, if any
        except ProcessLookupError:
            pass
        proc.wait()
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def _stop_jobs(address: str) -> None:
    """Stop jobs of ours that still run (their drivers live in their own sessions)."""
    from ray.job_submission import JobSubmissionClient

    try:
        client = JobSubmissionClient(address)
        for job in client.list_jobs():
            if not job.status.is_terminal() and job.submission_id:
                client.stop_job(job.submission_id)
    except Exception:  # the cluster may already be gone; teardown goes on
        pass


def plan_ray(tmp_path: Path, address: str, name: str, *entry_args: str, steps: int = 3):
    site = SiteConfig(ray=RaySite(address=address), env=swe_env(tmp_path))
    return plan_launch(
        TARGET,
        backend=Backend.RAY,
        site=site,
        overrides=ONE_NODE,
        steps=steps,
        run_dir=tmp_path / name,
        entrypoint=(*STANDIN, *entry_args),
    )


class TestRayBackend:
    def test_ray_job_runs_and_watch_sees_it_complete(
        self, ray_address: str, tmp_path: Path
    ) -> None:
        from ray.job_submission import JobSubmissionClient

        plan = plan_ray(tmp_path, ray_address, "ok")
        manifest = launch(plan)
        assert manifest.job_ids == [submission_id("ok")] and manifest.ray_address == ray_address
        events: list[str] = []
        result = watch_run(plan.run_dir, interval=0.5, timeout=180, on_event=events.append)
        assert (result.status, result.exit_code) == (RunStatus.COMPLETED, ExitCode.OK), events
        assert "running" in " ".join(events) and "step 3/3" in events
        info = JobSubmissionClient(ray_address).get_job_info(submission_id("ok"))
        assert info.status.value == "SUCCEEDED" and info.entrypoint == plan.command
        assert info.runtime_env["env_vars"] == swe_env(tmp_path)
        driver_log = (plan.run_dir / "driver.log").read_text()
        assert "Step 3/3" in driver_log  # collected from Ray, not written by the driver
        saved = load_manifest(plan.run_dir)
        assert (saved.exit_status, saved.last_step, saved.started_at is not None) == (0, 3, True)

    @pytest.mark.parametrize(
        ("line", "code", "reason"),
        [
            pytest.param(
                "ValueError: policy.max_total_sequence_length must be set",
                ExitCode.FAIL,
                "exception",
                id="driver_error",
            ),
            pytest.param(
                "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL",
                ExitCode.INFRA,
                "nccl",
                id="nccl_infra",
            ),
        ],
    )
    def test_ray_job_failure_is_detected_and_its_logs_collected(
        self, ray_address: str, tmp_path: Path, line: str, code: ExitCode, reason: str
    ) -> None:
        args = ("--stop-at-step", "0", "--exit-code", "3", "--fail-with", line)
        plan = plan_ray(tmp_path, ray_address, f"bad-{reason}", *args)
        launch(plan)
        result = watch_run(plan.run_dir, interval=0.5, timeout=180)
        assert (result.status, result.exit_code) == (RunStatus.FAILED, code), result.message
        assert result.cause is not None and result.cause.reason == reason
        assert line in (plan.run_dir / "driver.log").read_text()
        saved = load_manifest(plan.run_dir)
        assert saved.exit_status == 3 and saved.last_step is None and saved.ended_at

    def test_stopped_ray_job_is_a_failure(self, ray_address: str, tmp_path: Path) -> None:
        plan = plan_ray(tmp_path, ray_address, "stopped", "--seconds", "120")
        manifest = launch(plan)
        backend = backend_for(Backend.RAY, plan.site)
        assert isinstance(backend, RayBackend)
        deadline = time.monotonic() + 60
        while backend.poll(manifest).phase.value != "running" and time.monotonic() < deadline:
            time.sleep(0.5)
        backend.cancel(manifest)
        result = watch_run(plan.run_dir, interval=0.5, timeout=120)
        assert result.status is RunStatus.FAILED and "stopped" in result.message

    def test_a_manifest_naming_another_ray_job_is_refused_and_that_job_keeps_running(
        self, ray_address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A crafted manifest points at a job rlgate did not submit: watch stops nothing."""
        from ray.job_submission import JobSubmissionClient

        client = JobSubmissionClient(ray_address)
        foreign = client.submit_job(entrypoint="sleep 300", submission_id="raysubmit_notours01")
        try:
            plan = plan_ray(tmp_path, ray_address, "crafted")
            plan.run_dir.mkdir()
            manifest = initial_manifest(plan).model_copy(
                update={"job_ids": [foreign], "ray_address": ray_address}
            )
            write_manifest(manifest)
            argv = ["watch", str(plan.run_dir), "--interval", "0.2", "--stall-minutes", "0.002"]
            assert main([*argv, "--cancel-stalled"]) == ExitCode.USAGE
            err = capsys.readouterr().err
            assert f"Ray job {foreign} at {ray_address} was not submitted by rlgate" in err
            with pytest.raises(LaunchError, match="nothing was stopped"):
                backend_for(Backend.RAY, plan.site).cancel(manifest)
            assert not client.get_job_status(foreign).is_terminal()  # still running
        finally:
            client.stop_job(foreign)

    def test_dry_run_prints_the_job_request(
        self, ray_address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        site = tmp_path / "site.yaml"
        site.write_text(SiteConfig(env=swe_env(tmp_path)).model_dump_json())
        argv = ["launch", str(TARGET), *ONE_NODE, "--backend", "ray", "--site", str(site)]
        argv += ["--ray-address", ray_address, "--entrypoint", " ".join(STANDIN)]
        argv += ["--run-dir", str(tmp_path / "dry"), "--dry-run", "--no-check"]
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert f'"address": "{ray_address}"' in out and '"entrypoint": "' in out
        assert not (tmp_path / "dry").exists()


class TestRayUnreachable:
    def test_unreachable_job_api_is_an_infra_error(self, tmp_path: Path) -> None:
        plan = plan_ray(tmp_path, f"http://127.0.0.1:{free_port()}", "nowhere")
        with pytest.raises(InfraError, match="cannot reach the Ray job API"):
            launch(plan)
        assert load_manifest(plan.run_dir).status is RunStatus.FAILED


class _FailingJobApi(http.server.BaseHTTPRequestHandler):
    """A dashboard that answers the version check and times out every job request (504)."""

    def do_GET(self) -> None:
        if self.path.startswith("/api/version"):
            body = json.dumps({"version": "4", "ray_version": ray.__version__}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_error(504)

    def do_POST(self) -> None:
        self.send_error(504)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def failing_job_api() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FailingJobApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class TestRayJobApiErrors:
    def test_submission_rejected_by_the_job_api_is_exit_3_not_a_crash(
        self, tmp_path: Path, failing_job_api: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        site = tmp_path / "site.yaml"
        site.write_text(SiteConfig(env=swe_env(tmp_path)).model_dump_json())
        argv = ["launch", str(TARGET), *ONE_NODE, "--backend", "ray", "--site", str(site)]
        argv += ["--ray-address", failing_job_api, "--entrypoint", " ".join(STANDIN)]
        argv += ["--run-dir", str(tmp_path / "run"), "--no-check"]
        assert main(argv) == 3
        err = capsys.readouterr().err
        assert "submitting rlgate-run failed" in err and "504" in err
        assert "internal error" not in err
        saved = load_manifest(tmp_path / "run")
        assert saved.status is RunStatus.FAILED and "504" in saved.message


# --- credentials in the address -------------------------------------------------------------

SECRET = "S3CRET"
USER = "rlgate"


class _AuthProxy(http.server.BaseHTTPRequestHandler):
    """The dashboard behind HTTP basic authentication (a proxy as sites put in front of it)."""

    upstream = ""
    expected = "Basic " + base64.b64encode(f"{USER}:{SECRET}".encode()).decode()

    def _forward(self) -> None:
        if self.headers.get("Authorization") != self.expected:
            self.send_error(401, "credentials required")
            return
        length = int(self.headers.get("Content-Length") or 0)
        request = urllib.request.Request(
            self.upstream + self.path,
            data=self.rfile.read(length) if length else None,
            method=self.command,
            headers={"Content-Type": self.headers.get("Content-Type") or "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status, body = response.status, response.read()
                kind = response.headers.get("Content-Type") or "application/json"
        except urllib.error.HTTPError as exc:
            status, body = exc.code, exc.read()
            kind = exc.headers.get("Content-Type") or "text/plain"
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = _forward

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def authenticated(ray_address: str) -> Iterator[str]:
    """The real cluster's job API behind a proxy that wants rlgate:S3CRET; its plain URL."""
    handler = type("Proxy", (_AuthProxy,), {"upstream": ray_address})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _launch_argv(tmp_path: Path, address: str, *extra: str) -> list[str]:
    site = tmp_path / "site.yaml"
    site.write_text(SiteConfig(env=swe_env(tmp_path)).model_dump_json())
    argv = ["launch", str(TARGET), *ONE_NODE, "--backend", "ray", "--site", str(site)]
    argv += ["--ray-address", address, "--entrypoint", " ".join(STANDIN), "--steps", "2"]
    return [*argv, "--run-dir", str(tmp_path / "run"), "--no-check", *extra]


def _with_secret(plain: str) -> str:
    return plain.replace("http://", f"http://{USER}:{SECRET}@") + f"/?token={SECRET}tok"


class TestRayCredentials:
    """An address's credentials are used, never printed, never written to the manifest."""

    def test_an_unreachable_address_with_credentials_shows_none_of_them(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        address = _with_secret(f"http://127.0.0.1:{free_port()}")
        assert main(_launch_argv(tmp_path, address)) == ExitCode.INFRA
        out, err = capsys.readouterr()
        assert f"{USER}:***@127.0.0.1" in err and "token=***" in err, err
        saved = (tmp_path / "run" / "rlgate_manifest.json").read_text()
        assert main(["watch", str(tmp_path / "run")]) == ExitCode.FAIL  # nothing to watch
        watched = "".join(capsys.readouterr())
        assert "submission failed: cannot reach the Ray job API" in watched
        for text in (out, err, saved, watched):
            assert SECRET not in text

    def test_dry_run_and_a_bad_address_show_no_credentials(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(_launch_argv(tmp_path, _with_secret("http://head:8265"), "--dry-run")) == 0
        out, _ = capsys.readouterr()
        assert f'"address": "http://{USER}:***@head:8265/?token=***"' in out
        bad = _with_secret("http://head:8265") + " x"
        assert main(_launch_argv(tmp_path, bad)) == ExitCode.USAGE
        out2, err = capsys.readouterr()
        assert "is not an address" in err and f"{USER}:***@" in err, err
        assert SECRET not in out + out2 + err

    def test_a_dashboard_behind_authentication_is_followed_with_ray_address(
        self,
        authenticated: str,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        address = authenticated.replace("http://", f"http://{USER}:{SECRET}@")
        assert main(_launch_argv(tmp_path, address)) == ExitCode.OK
        run = tmp_path / "run"
        manifest = load_manifest(run)
        assert manifest.ray_address == authenticated  # stored without the credentials
        assert SECRET not in (run / "rlgate_manifest.json").read_text()
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
        assert main(["watch", str(run), "--interval", "0.5"]) == ExitCode.INFRA  # 401
        _, err = capsys.readouterr()
        assert err.count("\n") == 2 and err.count("rlgate: error:") == 1, err  # + its hint
        assert "401" in err and "export RAY_ADDRESS" in err and SECRET not in err, err
        monkeypatch.setenv("RAY_ADDRESS", address)
        assert (
            main(["watch", str(run), "--interval", "0.5", "--timeout-minutes", "3"]) == ExitCode.OK
        )
        out, err = capsys.readouterr()
        assert "COMPLETED" in out and SECRET not in out + err, out + err
        assert SECRET not in (run / "rlgate_manifest.json").read_text()
