"""The Ray backend: the driver command as a job on an existing Ray cluster (job submission SDK).

NeMo RL's driver connects to the cluster it runs in (``init_ray`` reads ``RAY_ADDRESS``,
which Ray sets for job drivers), so the same ``COMMAND`` that ray.sub runs is submitted as the
job's entrypoint through :class:`ray.job_submission.JobSubmissionClient` against the
cluster's dashboard address (``http://<head>:8265``). The NeMo RL checkout must exist at the
same path on the head node; the site config's ``env`` and ``pass_env`` go into the job's
``runtime_env.env_vars`` (so ``pass_env`` values are visible in the dashboard's job info).

The job's id is ``rlgate-<run name>``; its driver log is copied to ``<run>/driver.log`` on every
poll. Ray job states map onto :class:`~rlgate.launch.plan.Phase`: ``STOPPED`` (``ray job stop``)
is a failure.

A manifest is input, so the job it names is followed and stopped only when its metadata
(``rlgate_run_dir``, which ``submit`` sets) names the manifest's run directory; the id itself
is one of :data:`rlgate.launch.manifest.RAY_JOB_ID`'s forms (it goes into the job API's URL).

Credentials: an address may carry them (``http://user:password@head:8265`` behind an
authenticating proxy, ``?token=...``). They are used, never shown or stored: every message
names the address through :func:`rlgate.core.text.redact_url` (a library's own text through
:func:`~rlgate.core.text.redact_text`), and the manifest records it
:func:`~rlgate.core.text.without_credentials`. ``rlgate watch`` reconnects with that address,
or with ``$RAY_ADDRESS`` (Ray's own variable) when it is the same address with credentials;
Ray's token authentication (``RAY_AUTH_MODE=token``, ``RAY_AUTH_TOKEN``) is read from the
environment by Ray itself.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rlgate.core.errors import InfraError, LaunchError
from rlgate.core.io import write_text_atomic
from rlgate.core.text import one_line, redact_text, redact_url, without_credentials
from rlgate.launch.job import JobState, LaunchPlan, Phase
from rlgate.launch.manifest import RunManifest
from rlgate.launch.site import SiteConfig

__all__ = ["ADDRESS_ENV", "RayBackend", "reconnect_address", "submission_id"]

#: Ray's own variable for the job API address (``ray job`` reads it): credentials for watch.
ADDRESS_ENV = "RAY_ADDRESS"


def submission_id(run_name: str) -> str:
    """The Ray job submission id of a run."""
    return f"rlgate-{run_name}"


def _connect(address: str) -> Any:
    try:
        from ray.job_submission import JobSubmissionClient
    except ImportError as exc:  # pragma: no cover - ray is in the [launch] extra
        raise LaunchError(
            "the ray backend needs Ray: pip install 'rlgate[launch]'", hint=str(exc)
        ) from exc
    try:
        return JobSubmissionClient(address)
    except Exception as exc:  # ConnectionError, RuntimeError, requests errors
        raise InfraError(
            f"cannot reach the Ray job API at {redact_url(address)}: {_said(exc, address)}",
            hint="pass the dashboard address (http://<head>:8265) with --ray-address or the "
            f"site config's ray.address; the dashboard must be running. {_CREDENTIALS_HINT}",
        ) from exc


_CREDENTIALS_HINT = (
    "A dashboard that asks for credentials: give them in the address at launch, and for "
    f"watch export {ADDRESS_ENV} as the same address with them (http://user:password@head:8265)"
    ", or use Ray's token authentication (RAY_AUTH_TOKEN)"
)


def _said(exc: BaseException, address: str) -> str:
    """What a Ray or HTTP library said, on one line, without the address's credentials."""
    return " ".join(redact_text(exc, address).split())[:500]


def reconnect_address(stored: str) -> str:
    """The address to reach a run's job API with (the manifest keeps no credentials).

    ``$RAY_ADDRESS`` when it is ``stored`` with credentials, else ``stored`` itself.
    """
    given = os.environ.get(ADDRESS_ENV, "")
    if given and given != stored and without_credentials(given) == stored:
        return given
    return stored


RUN_DIR_KEY = "rlgate_run_dir"


def _check_ours(manifest: RunManifest, info: Any, address: str, job_id: str) -> None:
    """Refuse a job rlgate did not submit for this run directory (its metadata says so)."""
    metadata = getattr(info, "metadata", None) or {}
    if metadata.get(RUN_DIR_KEY) != manifest.run_dir:
        raise LaunchError(
            f"Ray job {job_id} at {redact_url(address)} was not submitted by rlgate for "
            f"{manifest.run_dir} (its metadata {RUN_DIR_KEY} is "
            f"{one_line(repr(metadata.get(RUN_DIR_KEY)))[:200]}); nothing was stopped",
            hint="rlgate follows and stops only the job it submitted for the run directory "
            "it is pointed at",
        )


def _iso(millis: int | None) -> str | None:
    if not millis:
        return None
    return datetime.fromtimestamp(millis / 1000, UTC).isoformat(timespec="seconds")


class RayBackend:
    """Submit to and follow jobs on a running Ray cluster."""

    def __init__(self, site: SiteConfig) -> None:
        self.site = site
        self._clients: dict[str, Any] = {}

    def _client(self, address: str) -> Any:
        if address not in self._clients:
            self._clients[address] = _connect(address)
        return self._clients[address]

    def _address(self) -> str:
        if self.site.ray is None:
            raise LaunchError(
                "the ray backend needs the cluster's job API address",
                hint="pass --ray-address http://<head>:8265 or set ray.address in the site config",
            )
        return self.site.ray.address

    def render(self, plan: LaunchPlan) -> str:
        """The job submission request (``pass_env`` values shown as ``$NAME``)."""
        env = {**plan.env, **{name: f"${name}" for name in plan.pass_env}}
        request = {
            "address": redact_url(self._address()),
            "submission_id": submission_id(plan.name),
            "entrypoint": plan.command,
            "runtime_env": {"env_vars": env},
            "metadata": {RUN_DIR_KEY: str(plan.run_dir), "recipe": plan.label},
        }
        return json.dumps(request, indent=2) + "\n"

    def submit(self, plan: LaunchPlan, manifest: RunManifest) -> RunManifest:
        """Submit the job; record its id and the cluster address."""
        address = self._address()
        env = {**plan.env, **{name: os.environ[name] for name in plan.pass_env}}
        client = self._client(address)
        try:
            job_id = client.submit_job(
                entrypoint=plan.command,
                submission_id=submission_id(plan.name),
                runtime_env={"env_vars": env} if env else None,
                metadata={RUN_DIR_KEY: str(plan.run_dir), "recipe": plan.label},
            )
        except Exception as exc:  # RuntimeError (HTTP status), requests errors
            shown = redact_url(address)
            raise InfraError(
                f"Ray job API at {shown}: submitting {submission_id(plan.name)} failed: "
                f"{_said(exc, address)}",
                hint=f"after a timeout the job may exist anyway: ray job status "
                f"{submission_id(plan.name)} --address {shown}",
            ) from exc
        return manifest.model_copy(
            update={
                "job_ids": [job_id],
                "ray_address": without_credentials(address),
                "driver_log": str(plan.run_dir / "driver.log"),
            }
        )

    def poll(self, manifest: RunManifest) -> JobState:
        """The job's status, exit code and times from the job API."""
        address, job_id = self._handle(manifest)
        info = self._job_info(address, job_id)
        _check_ours(manifest, info, address, job_id)
        status = str(getattr(info.status, "value", info.status))
        phase = {
            "PENDING": Phase.PENDING,
            "RUNNING": Phase.RUNNING,
            "SUCCEEDED": Phase.SUCCEEDED,
            "FAILED": Phase.FAILED,
            "STOPPED": Phase.FAILED,
        }.get(status, Phase.UNKNOWN)
        exit_status = info.driver_exit_code
        if phase is Phase.SUCCEEDED and exit_status is None:
            exit_status = 0
        message = "" if phase is Phase.SUCCEEDED else (info.message or status)
        if status == "STOPPED":
            message = f"job was stopped: {info.message or ''}"
        # Ray appends the log tail after this phrase; the logs are collected separately.
        message = message.split(", last available logs", 1)[0].strip()
        return JobState(
            phase,
            exit_status=exit_status,
            message=message.splitlines()[0] if message else "",
            started_at=_iso(info.start_time),
            ended_at=_iso(info.end_time),
        )

    def sync_logs(self, manifest: RunManifest) -> None:
        """Copy the job's driver log to ``<run>/driver.log``."""
        address, job_id = self._handle(manifest)
        try:
            text = self._client(address).get_job_logs(job_id)
        except InfraError:
            raise
        except Exception as exc:
            raise InfraError(
                f"Ray job API at {redact_url(address)}: cannot read logs of {job_id}: "
                f"{_said(exc, address)}"
            ) from exc
        write_text_atomic(Path(manifest.run_dir) / "driver.log", text)

    def log_files(self, manifest: RunManifest) -> list[Path]:
        """``driver.log`` (after :meth:`sync_logs`)."""
        log = Path(manifest.run_dir) / "driver.log"
        return [log] if log.is_file() else []

    @staticmethod
    def _handle(manifest: RunManifest) -> tuple[str, str]:
        """The address to reach the run's job with (:func:`reconnect_address`), and its id."""
        if not manifest.ray_address or not manifest.job_ids:
            raise LaunchError(f"{manifest.run_dir}: the manifest has no Ray job to follow")
        return reconnect_address(manifest.ray_address), manifest.job_ids[0]

    def _job_info(self, address: str, job_id: str) -> Any:
        try:
            return self._client(address).get_job_info(job_id)
        except InfraError:
            raise
        except Exception as exc:
            raise InfraError(
                f"Ray job API at {redact_url(address)}: cannot read job {job_id}: "
                f"{_said(exc, address)}",
                hint=_CREDENTIALS_HINT,
            ) from exc

    def cancel(self, manifest: RunManifest) -> str:
        """Ask Ray to stop the job (``ray job stop``), once its metadata proves it is the run's."""
        address, job_id = self._handle(manifest)
        info = self._job_info(address, job_id)
        _check_ours(manifest, info, address, job_id)
        try:
            stopped = bool(self._client(address).stop_job(job_id))
        except Exception as exc:  # ConnectionError, RuntimeError, requests errors
            raise InfraError(
                f"Ray job API at {redact_url(address)}: cannot stop {job_id}: {_said(exc, address)}"
            ) from exc
        return f"ray job {job_id} stopped" if stopped else f"ray job {job_id} was not running"
