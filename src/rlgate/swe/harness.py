"""Run the SWE-bench harness (``swebench.harness.run_evaluation``, swebench 5.0.2) for one model.

The only rlgate module that touches Docker and subprocesses for SWE-bench.

Invariants:

* Fail fast: predictions are validated, the Docker daemon is pinged (or Modal
  credentials checked) and every instance image is looked up locally *before*
  the harness starts, so a missing daemon or image costs seconds, not hours.
* The harness runs with ``cwd`` = the run directory (it writes
  ``logs/run_evaluation/<run_id>/…`` relative to it), its output goes to
  ``harness.attempt<N>.log`` there, and each attempt has its own report
  directory. A run directory that already holds this run id is refused:
  swebench reuses existing ``report.json`` files, so a stale verdict would be
  kept silently.
* Infra failures (swebench's own :mod:`swebench.harness.infra_failure` table,
  then rlgate's ordered :data:`HARNESS_FAILURE_SIGNATURES` for instances that
  left no report) trigger one retry with the same run id: swebench then reruns
  every instance without a ``report.json``, and the classified ones that have a
  report are first moved to ``superseded/attempt<N>/`` (never deleted).
  ``rlgate_swe_eval.json`` records the attempts and which failures were infra.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlgate.core.commands import Command, command
from rlgate.core.errors import InfraError, SweError
from rlgate.core.io import write_json_atomic
from rlgate.core.progress import Progress, no_progress
from rlgate.core.text import one_line
from rlgate.swe.readers import (
    APPLY_PATCH_FAIL,
    EVAL_RECORD,
    LOG_INSTANCE,
    LOG_REPORT,
    RUN_EVALUATION_LOG_DIR,
    final_report_lists,
)
from rlgate.swe.records import (
    MAX_INSTANCES,
    check_instance_id,
    check_split,
    parse_json,
    read_text_input,
)

logger = logging.getLogger(__name__)

HARNESS_MODULE = "swebench.harness.run_evaluation"
#: Bounds of ``--max-workers`` (harness worker threads) and ``--timeout-seconds`` (one week).
MAX_WORKERS = 1024
MAX_TIMEOUT_S = 7 * 24 * 3600
DEFAULT_DATASET = "SWE-bench/SWE-bench_Verified"
DEFAULT_DOCKER_SOCKET = "unix:///var/run/docker.sock"
LOG_TEST_OUTPUT = "test_output.txt"
TIER_HARNESS = "harness"
# (reason, pattern) for instances that left no report.json, tried after
# swebench's table; first hit wins. These are faults of the machine running
# the harness, never of the patch.
HARNESS_FAILURE_SIGNATURES: tuple[tuple[str, str], ...] = (
    ("image_pull_failed", r"pull access denied|manifest unknown|toomanyrequests|ImageNotFound"),
    ("disk_full", r"No space left on device"),
    ("docker_api_timeout", r"Read timed out|UnixHTTPConnectionPool|Connection aborted"),
    ("container_start_failed", r"Error (?:creating|starting) container|Conflict\. The container"),
)
_COMPILED = tuple((reason, re.compile(p, re.MULTILINE)) for reason, p in HARNESS_FAILURE_SIGNATURES)
_NO_DOCKER_HINT = (
    "start Docker (or point DOCKER_HOST at a daemon) on this machine, or run on Modal "
    "with `rlgate swe eval ... --modal` (needs `modal token new`)"
)


@dataclass(frozen=True, slots=True)
class HarnessOptions:
    """What to evaluate; mirrors swebench 5.0.2's ``run_evaluation`` flags."""

    predictions: Path
    run_id: str
    dataset: str = DEFAULT_DATASET
    split: str = "test"
    max_workers: int = 4
    timeout: int = 1800
    instance_ids: tuple[str, ...] = ()
    modal: bool = False

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", self.run_id):
            raise SweError(
                f"run id {self.run_id!r:.140} must be 1-128 characters [A-Za-z0-9._-] "
                "(it names directories)"
            )
        if not 1 <= self.max_workers <= MAX_WORKERS:
            raise SweError(f"--max-workers must be in 1..{MAX_WORKERS}, got {self.max_workers}")
        if not 1 <= self.timeout <= MAX_TIMEOUT_S:
            raise SweError(f"--timeout-seconds must be in 1..{MAX_TIMEOUT_S} s, got {self.timeout}")
        check_split(self.split)
        if len(self.instance_ids) > MAX_INSTANCES:
            raise SweError(f"more than {MAX_INSTANCES:,} --instance-ids")
        for iid in self.instance_ids:
            check_instance_id(iid, "--instance-ids")


@dataclass(frozen=True, slots=True)
class InfraFailure:
    """An instance whose failure is the environment's, with the matching signature."""

    instance_id: str
    reason: str
    tier: str  # swebench's "environment" / "ambiguous", or "harness"


@dataclass(frozen=True, slots=True)
class Attempt:
    """One harness invocation."""

    number: int
    argv: tuple[str, ...]
    returncode: int
    log: Path
    report: Path
    infra: tuple[InfraFailure, ...]
    error_ids: tuple[str, ...]  # no report.json: the harness reruns these on a retry


@dataclass(frozen=True, slots=True)
class EvalResult:
    """What ``rlgate swe eval`` produced."""

    run_dir: Path
    model: str
    final_report: Path
    attempts: tuple[Attempt, ...]
    remaining_infra: tuple[InfraFailure, ...]
    record: Path


# --- predictions and dataset ----------------------------------------------------------


def read_predictions(path: Path) -> dict[str, dict[str, Any]]:
    """Read a predictions ``.jsonl``/``.json`` file keyed by instance id (one model only)."""
    text = read_text_input(path, "predictions file")
    if path.suffix == ".jsonl":
        rows: Any = [
            parse_json(line, f"{path}:{n}", line=True)
            for n, line in enumerate(text.splitlines(), 1)
            if line.strip()
        ]
    else:
        doc = parse_json(text, str(path)) if text.strip() else []
        rows = list(doc.values()) if isinstance(doc, dict) else doc
    if not isinstance(rows, list) or not rows:
        raise SweError(f"{path}: no predictions")
    preds: dict[str, dict[str, Any]] = {}
    for n, row in enumerate(rows, 1):
        if not isinstance(row, dict) or not {"instance_id", "model_name_or_path"} <= set(row):
            raise SweError(f"{path}: prediction {n} needs instance_id and model_name_or_path")
        iid = check_instance_id(row["instance_id"], f"{path}: prediction {n}")
        if not isinstance(row["model_name_or_path"], str) or not row["model_name_or_path"]:
            raise SweError(f"{path}: prediction {n} ({iid}): model_name_or_path must be a name")
        if "model_patch" not in row:
            raise SweError(f"{path}: prediction {n} ({iid}) has no model_patch")
        if not isinstance(row["model_patch"], str | None):
            raise SweError(f"{path}: prediction {n} ({iid}): model_patch must be a string or null")
        if iid in preds:
            raise SweError(f"{path}: duplicate prediction for {iid}")
        preds[iid] = row
    models = {p["model_name_or_path"] for p in preds.values()}
    if len(models) != 1:
        raise SweError(f"{path}: one model per predictions file, found {sorted(models)}")
    model = next(iter(models))
    if one_line(model) != model or model in (".", "..") or model.startswith("/"):
        # the harness names the log directory after it (with "/" -> "__")
        raise SweError(f"{path}: model_name_or_path {model!r:.120} cannot name a directory")
    return preds


def load_instances(dataset: str, split: str, ids: Sequence[str] | None = None) -> list[dict]:
    """Load full dataset rows (``image``, ``eval_script``…) for ``ids`` (all when None)."""
    check_split(split)
    path = Path(dataset)
    parquet = path / f"{split}.parquet" if path.is_dir() else path
    if parquet.suffix == ".parquet" and parquet.is_file():
        import pyarrow.parquet as pq

        try:
            rows = pq.read_table(parquet).to_pylist()
        except Exception as exc:  # ArrowInvalid, OSError: an unreadable parquet
            raise SweError(f"{parquet}: cannot read the dataset: {exc}") from exc
    else:
        from swebench.harness.utils import load_swebench_dataset

        try:
            rows = load_swebench_dataset(dataset, split)
        except Exception as exc:  # hub/network/format: report which dataset failed
            raise InfraError(f"cannot load dataset {dataset!r}: {exc}") from exc
    for n, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise SweError(f"dataset {dataset}: instance {n} is not an object")
        check_instance_id(row.get("instance_id"), f"dataset {dataset}, instance {n}")
    if ids is None:
        return rows
    wanted = set(ids)
    found = [r for r in rows if r["instance_id"] in wanted]
    if unknown := wanted - {r["instance_id"] for r in found}:
        raise SweError(f"{len(unknown)} predicted id(s) not in {dataset}: {sorted(unknown)[:5]}")
    return found


# --- argv and prechecks -------------------------------------------------------------------


def harness_command(
    opts: HarnessOptions, *, report_dir: Path, python: str = sys.executable
) -> Command:
    """The exact ``python -m swebench.harness.run_evaluation …`` command (5.0.2 flags).

    Built by :func:`rlgate.core.commands.command`: a ``--dataset`` (or any value) that starts
    with ``-`` or holds a line break is refused (SweError), never handed to the harness.
    """
    dataset = opts.dataset
    if Path(dataset).exists():  # the harness runs in the run directory: make it absolute
        dataset = str(Path(dataset).resolve())
    values: dict[str, Any] = {"instances": opts.instance_ids} if opts.instance_ids else {}
    return command(
        "{python} -m {module} --dataset_name {dataset} --split {split} --predictions_path "
        "{predictions} --max_workers {workers} --timeout {timeout} --run_id {run_id} "
        "--report_dir {report_dir} --modal {modal}"
        + (" --instance_ids {instances}" if opts.instance_ids else ""),
        python=python,
        module=HARNESS_MODULE,
        dataset=dataset,
        split=opts.split,
        predictions=opts.predictions.resolve(),
        workers=opts.max_workers,
        timeout=opts.timeout,
        run_id=opts.run_id,
        report_dir=report_dir.resolve(),
        modal="true" if opts.modal else "false",
        error=SweError,
        **values,
    )


def build_harness_argv(
    opts: HarnessOptions, *, report_dir: Path, python: str = sys.executable
) -> list[str]:
    """:func:`harness_command`'s argv as a list."""
    return list(harness_command(opts, report_dir=report_dir, python=python).argv)


def _no_daemon(detail: str) -> InfraError:
    return InfraError(
        f"no Docker daemon is reachable ({detail}); the SWE-bench harness needs one to run "
        "the instance containers",
        hint=_NO_DOCKER_HINT,
    )


def check_docker(*, base_url: str | None = None) -> Any:
    """Return a Docker client whose daemon answered ``ping``, else raise InfraError.

    ``base_url`` defaults to ``$DOCKER_HOST``, else the local socket. A unix
    socket that does not exist fails here without touching the docker SDK
    (whose unix-socket connect leaks the socket when the daemon is absent).
    """
    import docker

    url = base_url or os.environ.get("DOCKER_HOST") or DEFAULT_DOCKER_SOCKET
    if url.startswith("unix://") and not Path(url.removeprefix("unix://")).exists():
        raise _no_daemon(f"{url} does not exist")
    client = None
    try:
        client = docker.DockerClient(base_url=url) if base_url else docker.from_env()
        client.ping()
    except Exception as exc:  # DockerException, requests errors: all mean "no daemon"
        if client is not None:
            client.close()
        raise _no_daemon(str(exc)) from exc
    return client


def check_modal() -> None:
    """Raise InfraError when swebench's Modal credential check fails."""
    from swebench.harness.modal_eval import validate_modal_credentials

    try:
        validate_modal_credentials()
    except RuntimeError as exc:
        raise InfraError(f"Modal is not configured: {exc}", hint="run `modal token new`") from exc


def find_missing_images(client: Any, images: Sequence[str]) -> list[str]:
    """Return the images (from the dataset's ``image`` field) absent from the local daemon."""
    import docker

    missing = []
    for image in sorted(set(images)):
        try:
            client.images.get(image)
        except docker.errors.ImageNotFound:
            missing.append(image)
    return missing


# --- infra classification ---------------------------------------------------------------------


def classify_instance(inst_dir: Path) -> InfraFailure | None:
    """Classify why an instance failed: swebench's table first, then rlgate's."""
    from swebench.harness.infra_failure import classify_logs

    iid = inst_dir.name
    hit = classify_logs(inst_dir / LOG_TEST_OUTPUT, inst_dir / LOG_INSTANCE)
    if hit:
        return InfraFailure(iid, hit[0], hit[1])
    if (inst_dir / LOG_REPORT).is_file():
        return None  # graded: a test failure, not a harness fault
    log = inst_dir / LOG_INSTANCE
    if not log.is_file():
        return InfraFailure(iid, "never_started", TIER_HARNESS)
    text = log.read_text(encoding="utf-8", errors="replace")
    if APPLY_PATCH_FAIL in text:
        return None  # the model's patch did not apply
    for reason, pattern in _COMPILED:
        if pattern.search(text):
            return InfraFailure(iid, reason, TIER_HARNESS)
    return None


def classify_failures(model_dir: Path, report: Mapping[str, Any]) -> tuple[InfraFailure, ...]:
    """Environment/harness faults among a final report's unresolved and error ids."""
    from swebench.harness.infra_failure import TIER_ENVIRONMENT

    found = []
    for iid in sorted(set(report.get("error_ids", [])) | set(report.get("unresolved_ids", []))):
        hit = classify_instance(model_dir / iid)
        if hit and hit.tier in (TIER_ENVIRONMENT, TIER_HARNESS):
            found.append(hit)
    return tuple(found)


# --- running ----------------------------------------------------------------------------------


def _run_attempt(opts: HarnessOptions, run_dir: Path, model: str, number: int) -> Attempt:
    cmd = harness_command(opts, report_dir=run_dir / "reports" / f"attempt{number}")
    argv = list(cmd.argv)
    log = run_dir / f"harness.attempt{number}.log"
    logger.info("attempt %d: %s (log %s)", number, cmd, log)
    with log.open("w", encoding="utf-8") as fh:
        proc = subprocess.run(
            cmd.argv, cwd=run_dir, stdout=fh, stderr=subprocess.STDOUT, check=False
        )
    return collect_attempt(opts, run_dir, model, number, argv=argv, returncode=proc.returncode)


def collect_attempt(
    opts: HarnessOptions,
    run_dir: Path,
    model: str,
    number: int,
    *,
    argv: Sequence[str],
    returncode: int,
) -> Attempt:
    """Find an attempt's final report and classify its infra failures."""
    report_dir = run_dir / "reports" / f"attempt{number}"
    log = run_dir / f"harness.attempt{number}.log"
    report = report_dir / f"{model.replace('/', '__')}.{opts.run_id}.json"
    if not report.is_file() and (run_dir / report.name).is_file():
        # with --modal the harness writes the report to its cwd, ignoring --report_dir
        report_dir.mkdir(parents=True, exist_ok=True)
        shutil.move(str(run_dir / report.name), str(report))
    if not report.is_file():
        text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
        tail = "".join(text.splitlines(True)[-20:])
        raise InfraError(
            f"the SWE-bench harness exited with {returncode} and wrote no report "
            f"({report}); last lines of {log}:\n{tail}"
        )
    try:
        doc = parse_json(read_text_input(report, "harness final report"), str(report))
        lists = final_report_lists(report, doc)
    except SweError as exc:  # the harness wrote it: an infrastructure fault, not user input
        raise InfraError(f"the harness wrote an unusable report: {exc.message}") from exc
    model_dir = run_dir / RUN_EVALUATION_LOG_DIR / opts.run_id / model.replace("/", "__")
    infra = classify_failures(model_dir, doc)
    errors = tuple(sorted(lists["error_ids"]))
    return Attempt(number, tuple(argv), returncode, log, report, infra, errors)


def supersede_logs(
    run_dir: Path, model_dir: Path, infra: Sequence[InfraFailure], number: int
) -> None:
    """Move the logs of instances to retry aside so the harness reruns them."""
    dest = run_dir / "superseded" / f"attempt{number}"
    for failure in infra:
        src = model_dir / failure.instance_id
        if src.exists():
            dest.mkdir(parents=True, exist_ok=True)
            shutil.move(str(src), str(dest / failure.instance_id))


def _precheck(opts: HarnessOptions, preds: Mapping[str, Any], allow_pull: bool) -> None:
    if opts.modal:
        check_modal()
        return
    client = check_docker()
    rows = load_instances(opts.dataset, opts.split, list(opts.instance_ids or preds))
    missing = find_missing_images(client, [r["image"] for r in rows if r.get("image")])
    if missing and not allow_pull:
        raise InfraError(
            f"{len(missing)} instance image(s) are not present locally, e.g. {missing[:3]}",
            hint="pre-pull them (`docker pull IMAGE`), or pass --allow-pull to let the "
            "harness pull them during the run",
        )


def _write_record(
    opts: HarnessOptions, run_dir: Path, model: str, attempts: Sequence[Attempt], final: Path
) -> Path:
    def infra(a: Attempt) -> list[dict[str, str]]:
        return [{"instance_id": f.instance_id, "reason": f.reason, "tier": f.tier} for f in a.infra]

    def rel(path: Path) -> str:
        return str(path.relative_to(run_dir))

    # paths are relative to the run directory, so the record stays true wherever it is read
    payload = {
        "run_id": opts.run_id,
        "model": model,
        "dataset": opts.dataset,
        "final_report": rel(final),
        "attempts": [
            {
                "attempt": a.number,
                "argv": list(a.argv),
                "returncode": a.returncode,
                "log": rel(a.log),
                "report": rel(a.report),
                "infra": infra(a),
            }
            for a in attempts
        ],
        # swebench reruns every instance without a report.json, plus those moved aside
        "retried": sorted({f.instance_id for f in attempts[0].infra} | set(attempts[0].error_ids))
        if len(attempts) > 1
        else [],
        "remaining_infra": infra(attempts[-1]),
    }
    return write_json_atomic(run_dir / EVAL_RECORD, payload, inputs=[opts.predictions])


def run_swebench_eval(
    opts: HarnessOptions,
    run_dir: Path,
    *,
    allow_pull: bool = False,
    retry: bool = True,
    progress: Progress = no_progress,
) -> EvalResult:
    """Precheck, run the harness, retry infra failures once, and record what happened.

    ``progress`` hears of each step (:mod:`rlgate.core.progress`): the precheck, each
    attempt, the record.
    """
    preds = read_predictions(opts.predictions)
    harness_command(opts, report_dir=run_dir / "reports" / "attempt1")  # bad input: before Docker
    model = next(iter(preds.values()))["model_name_or_path"]
    model_dir = run_dir / RUN_EVALUATION_LOG_DIR / opts.run_id / str(model).replace("/", "__")
    if (run_dir / RUN_EVALUATION_LOG_DIR / opts.run_id).exists():
        raise SweError(
            f"{run_dir / RUN_EVALUATION_LOG_DIR / opts.run_id} already exists",
            hint="use a fresh --harness-run-id: the harness would silently reuse the old reports",
        )
    total = 4 if retry else 3
    progress("swe eval", 0, total, "checking Docker and the images")
    _precheck(opts, preds, allow_pull)
    run_dir.mkdir(parents=True, exist_ok=True)
    progress("swe eval", 1, total, f"attempt 1: {len(preds)} prediction(s) (harness.attempt1.log)")
    attempt = _run_attempt(opts, run_dir, model, 1)
    attempts = [attempt]
    if retry and attempt.infra:
        progress("swe eval", 2, total, f"attempt 2: {len(attempt.infra)} infra failure(s) again")
        supersede_logs(run_dir, model_dir, attempt.infra, 1)
        attempt = _run_attempt(opts, run_dir, model, 2)
        attempts.append(attempt)
    progress("swe eval", total - 1, total, "writing the record")
    result = finalize_eval(opts, run_dir, model, attempts)
    progress("swe eval", total, total)
    return result


def finalize_eval(
    opts: HarnessOptions, run_dir: Path, model: str, attempts: Sequence[Attempt]
) -> EvalResult:
    """Put the last report next to ``logs/`` and write ``rlgate_swe_eval.json``."""
    last = attempts[-1]
    # the harness's default layout (report next to logs/) lets `swe compare` read the logs too
    final = run_dir / last.report.name
    shutil.copy2(last.report, final)
    record = _write_record(opts, run_dir, model, attempts, final)
    return EvalResult(run_dir, model, final, tuple(attempts), last.infra, record)
