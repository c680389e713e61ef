"""Follow a launched run to its end, then judge it: finished, died, or stopped short.

``rlgate watch RUN_DIR`` reads the run manifest (:mod:`rlgate.launch.manifest`), polls the job
through its backend (Slurm: ``squeue``/``sacct`` and ray.sub's ``ENDED`` marker; Ray: the job
API; local: the process and its exit status file) and, when the job is over, reads the run's
metrics with :func:`rlgate.runs.metrics.load_run`. The target step counts as reached when
``train/loss`` (or, if the run does not log it, any ``train/`` tag) has a value at a step
``>= target`` -- the check NeMo RL's suite scripts make with ``jq`` before they run
``check_metrics.py``, except that here stopping short is a failure, never a silent skip.
An SWE evaluation's job (manifest kind ``swe_eval``, ``rlgate swe eval --launch``) counts
its graded rollouts instead (:func:`rlgate.launch.swe_eval.graded`): its target is instances
x seeds, so a collection that exits 0 with rollouts missing stopped short.

Verdicts and exit codes: ``completed`` 0; ``stopped_short``, ``failed`` and ``lost`` 1;
``failed`` because of an infrastructure fault 3; a watch that times out while the job still
runs 3; ``stalled`` 3. The fault is what ended the process (:func:`classify_failure`): the
backend's final job state, else the driver log's terminating error (the last error of its
last step, matched against :data:`INFRA_SIGNATURES`), never text the rollouts echoed earlier.

A run is **stalled** (wedged, not crashed: async GRPO can hang on a straggler rollout) when
its job is still running but no new training step has been logged for ``stall_factor`` times
its own median step time (``timing/train/total_step_time``, which NeMo RL logs every step),
or for ``stall_minutes`` when given (the only rule before a first step, or for a run that
logs no step time). Progress time is the newest metrics file's modification time (NeMo RL
appends to its event file every step), so a watch started on an already wedged run sees it.

The verdict is also a :class:`~rlgate.core.results.Result` (:func:`run_result`, ``rlgate watch
--junit``): the check ``run_status`` passes for ``completed``, fails for ``stopped_short``,
``failed`` and ``lost``, and is an ERROR whose evidence names its infrastructure cause
(:data:`~rlgate.core.results.INFRA_CAUSE`: the signature's reason, ``stalled`` or
``watch_timeout``) for the exit-3 verdicts, so triage labels those ``infra``.

Invariants: the job is never touched, except that ``cancel_stalled`` cancels a stalled job
through its backend (``scancel``, ``ray job stop``, a signal to the local process group);
the manifest is the only file written, atomically, and only with what was observed;
:func:`judge` and :func:`judge_stall` are pure.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlgate.core.errors import ExitCode, MetricsError
from rlgate.core.results import INFRA_CAUSE, Op, Outcome, Result, Tier
from rlgate.launch.job import JobState, LaunchBackend, Phase
from rlgate.launch.manifest import (
    RunKind,
    RunManifest,
    RunStatus,
    load_manifest,
    now_utc,
    write_manifest,
)
from rlgate.launch.plan import backend_for
from rlgate.runs.metrics import RunMetrics, load_run, run_progress

__all__ = [
    "INFRA_SIGNATURES",
    "FailureCause",
    "Progress",
    "WatchResult",
    "classify_failure",
    "judge",
    "judge_stall",
    "read_progress",
    "run_result",
    "watch_run",
]

logger = logging.getLogger(__name__)

# (reason, pattern): environment faults, most specific first. A match turns a failed run's
# exit code into 3 (infrastructure) instead of 1; the model is not to blame for these.
INFRA_SIGNATURES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (reason, re.compile(pattern))
    for reason, pattern in (
        (
            "gpu_out_of_memory",
            r"torch\.OutOfMemoryError|CUDA out of memory|CUDA error: out of memory",
        ),
        (
            "host_out_of_memory",
            r"oom-kill|OUT_OF_MEMORY|ray\.exceptions\.OutOfMemoryError|Killed process \d+",
        ),
        (
            "nccl",
            r"NCCL error|nccl(?:System|Internal|Remote)Error|NCCL WARN .*[Tt]imeout"
            r"|Watchdog caught collective operation timeout",
        ),
        (
            "ray_node_lost",
            r"ray\.exceptions\.(?:NodeDiedError|RaySystemError|ActorUnavailableError)"
            r"|missed too many heartbeats|Failed to connect to GCS",
        ),
        (
            "slurm_node_or_time_limit",
            r"DUE TO TIME LIMIT|DUE TO NODE FAIL|DUE TO PREEMPTION|NODE_FAIL"
            r"|srun: error: .*(?:Node failure|Task launch for)"
            r"|\bended (?:TIMEOUT|PREEMPTED|BOOT_FAIL|DEADLINE)\b",  # sacct's final state
        ),
        (
            "container_or_cluster_bringup",
            r"pyxis: .*(?:error|failed)|\[ERROR\] Background srun|must be on a shared filesystem"
            r"|Timed out waiting for all workers|ray\.sub wrote .*ENDED",
        ),
        (
            "hf_hub_download",
            r"HfHubHTTPError|LocalEntryNotFoundError|OfflineModeIsEnabled"
            r"|couldn't connect to 'https://huggingface\.co'",
        ),
        ("disk_full", r"No space left on device|Disk quota exceeded"),
    )
)
_TAIL_BYTES = 1 << 20

# The driver log's structure (NeMo RL 7ea279a): grpo.py prints a banner when a step starts;
# Ray prefixes what an actor prints with "(ActorName pid=N[, ip=...])", torchrun with
# "[rankN]:"; Python ends a traceback with an unindented "module.Error: message" line.
_STEP_BANNER = re.compile(r"^=+ Step \d+/\d+ =+$")
_PREFIX = re.compile(
    r"^(?:\((?:(?P<actor>[A-Za-z_][\w.]*) )?pid=(?P<pid>\d+)(?:, ip=[^)]*)?\) ?)?"
    r"(?:\[rank\d+\]: ?)?"
)
# Terminal escape sequences (CSI, e.g. the colour Ray 2.60 gives actor prefixes unless
# RAY_COLOR_PREFIX=0, ray/_private/worker.py print_worker_logs; OSC): not part of the text.
_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_EXCEPTION = re.compile(
    r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt)\b(?:[:(]|$)"
)
_TRACEBACK = "Traceback (most recent call last):"
_CHAINED = (
    "The above exception was the direct cause of the following exception:",
    "During handling of the above exception, another exception occurred:",
)
_ACTOR_DIED = re.compile(r"ray\.exceptions\.(?:ActorDiedError|RayActorError)\b")
_DEAD_PID = re.compile(r"^\s*pid: (\d+)$|\(pid=(\d+)[,)]")
#: Ray actors whose output is the rollouts' own: NeMo RL runs NeMo Gym's servers (and so the
#: agents' tool output and observations) in its ``NemoGym`` environment actor.
ECHO_ACTORS = frozenset({"NemoGym"})
# rich panels: NeMo RL's print_message_log_samples draws sample conversations in them
_PANEL = tuple("│┃║╭╮╰╯┏┓┗┛━─")


@dataclass(frozen=True, slots=True)
class FailureCause:
    """Why a run died, as far as its logs tell."""

    reason: str  # an INFRA_SIGNATURES reason, or "exception" / "unknown"
    infra: bool
    line: str  # the log line that matched
    source: str  # the file it came from


@dataclass(frozen=True, slots=True)
class _Line:
    text: str  # the line as logged
    body: str  # without Ray's actor prefix and torchrun's rank prefix
    actor: str | None
    pid: str | None


def _parse(line: str) -> _Line:
    plain = _ESCAPE.sub("", line)
    m = _PREFIX.match(plain)
    actor, pid = (m.group("actor"), m.group("pid")) if m else (None, None)
    return _Line(line, plain[m.end() :] if m else plain, actor, pid)


def log_lines(data: bytes) -> list[str]:
    r"""``data``'s lines as the process wrote them: split at ``\n`` only.

    A lone ``\r`` of a progress bar, ``\f`` or ``\u2028`` stays inside its line (Ray prefixes
    what an actor prints per ``\n``); a ``\r\n`` ending is one line end.
    """
    lines = data.decode("utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _tail_lines(path: Path) -> list[str]:
    """The whole lines of the last MiB of ``path`` (a line cut by the bound is dropped)."""
    with path.open("rb") as fh:
        start = max(0, path.stat().st_size - _TAIL_BYTES)
        fh.seek(start)
        lines = log_lines(fh.read())
    return lines[1:] if start and lines else lines


def _signature(text: str) -> str | None:
    """The first :data:`INFRA_SIGNATURES` reason ``text`` matches."""
    return next((reason for reason, pattern in INFRA_SIGNATURES if pattern.search(text)), None)


def _evidence(line: _Line) -> bool:
    """A line that can be evidence: not a rollout's output, not a sample in a panel."""
    return line.actor not in ECHO_ACTORS and not line.body.lstrip().startswith(_PANEL)


def _anchor(line: _Line) -> bool:
    return _evidence(line) and bool(_EXCEPTION.match(line.body) or _signature(line.body))


def _same_stream(a: _Line, b: _Line) -> bool:
    return (a.actor, a.pid) == (b.actor, b.pid)


def _error_unit(lines: Sequence[_Line], at: int) -> list[_Line]:
    r"""The error that ends at ``lines[at]``: its traceback, chained causes and message.

    Walks up through the traceback (indented frames, the exception lines of a
    ``RayTaskError``'s remote traceback) to its ``Traceback`` header, and on through
    ``The above exception was the direct cause ...`` to the chained ones; then down through
    the message's continuation lines (``\tclass_name: ...``). Only lines of the same
    process count (Ray interleaves the actors' output).
    """
    anchor = lines[at]
    unit = [anchor]
    i = at - 1
    while i >= 0:
        line = lines[i]
        if not _same_stream(line, anchor):
            i -= 1
            continue
        body = line.body
        if body.startswith(_TRACEBACK):
            unit.append(line)
            j = i - 1  # a chained cause: its separator, then the cause's own last line
            while j >= 0 and (not _same_stream(lines[j], anchor) or not lines[j].body.strip()):
                j -= 1
            if j >= 0 and lines[j].body.strip() in _CHAINED:
                i = j - 1
                continue
            break
        if body[:1].isspace() or not body.strip() or _EXCEPTION.match(body):
            unit.append(line)
            i -= 1
            continue
        break
    unit.reverse()
    for line in lines[at + 1 :]:
        if not _same_stream(line, anchor):
            continue
        if not (line.body[:1].isspace() or line.body.startswith("The actor is dead")):
            break
        unit.append(line)
    return unit


def _terminating(lines: Sequence[_Line], name: str) -> tuple[FailureCause, bool] | None:
    """The error that ended ``lines`` (a cause, and whether it is only a consequence).

    Only the run's last step counts (a step that started means the earlier ones were
    survived); in it, the last error line that can be evidence, with its whole unit.
    """
    banners = [
        i for i, line in enumerate(lines) if not line.actor and _STEP_BANNER.match(line.body)
    ]
    segment = lines[banners[-1] + 1 :] if banners else lines
    at = next((i for i in range(len(segment) - 1, -1, -1) if _anchor(segment[i])), None)
    if at is None:
        return None
    unit = [line for line in _error_unit(segment, at) if _evidence(line)]
    for reason, pattern in INFRA_SIGNATURES:  # within the one error, most specific first
        for line in unit:
            if pattern.search(line.body):
                return FailureCause(reason, True, line.text.strip()[:300], name), False
    last = next(line for line in reversed(unit) if _EXCEPTION.match(line.body))
    died = next((line for line in unit if _ACTOR_DIED.search(line.body)), None)
    if died is not None:  # an actor died: its own last error says why
        pid = next(
            (m.group(1) or m.group(2) for line in unit if (m := _DEAD_PID.search(line.body))), None
        )
        own = [line for line in segment[:at] if pid is not None and line.pid == pid]
        found = _terminating(own, name) if own else None
        if found is not None and found[0].infra:
            return found
        return FailureCause("exception", False, last.text.strip()[:300], name), True
    return FailureCause("exception", False, last.text.strip()[:300], name), False


def classify_failure(
    sources: Iterable[tuple[str, Sequence[str]]], *, state: str = ""
) -> FailureCause | None:
    """The cause of a run's end: what ended the process, never text its rollouts echoed.

    Args:
        sources: ``(name, lines)`` pairs: the driver log first, then the other logs
            (Slurm's output, with its end-of-job lines).
        state: the backend's final job state (Slurm's state, ray.sub's ``ENDED``, Ray's job
            status, the local exit status).

    A job state that names an infrastructure end (a time limit, a node failure, a failed
    bring-up) decides. Else the driver log's terminating error does: the last error of its
    last step (a step that started means the earlier ones were survived) -- the final
    traceback with its chained causes and any remote traceback it carries, or the last
    error line -- and for an ``ActorDiedError`` the dead actor's own last error. Lines of
    the rollout actors (:data:`ECHO_ACTORS`) and sample panels are never evidence. When the
    driver log has no error, or only an actor death it does not explain, an infrastructure
    end in the other logs (``slurmstepd: error: ... oom-kill``) decides.
    """
    if state and (reason := _signature(state)):
        return FailureCause(reason, True, state.strip()[:300], "job state")
    found = [_terminating([_parse(line) for line in lines], name) for name, lines in sources]
    driver, others = (found[0], found[1:]) if found else (None, [])
    if driver is not None and not driver[1]:
        return driver[0]
    later = [cause for cause, _ in filter(None, others)]
    infra = next((cause for cause in later if cause.infra), None)
    if infra is not None:
        return infra
    if driver is not None:
        return driver[0]
    return later[0] if later else None


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a run got according to its metrics."""

    last_step: int | None  # reached on the latest attempt with no gap from step 1
    metric: str | None  # the tag the step was read from
    note: str = ""  # gaps, attempts and restarts; or why there is no step at all
    median_step_seconds: float | None = None  # the run's own timing/train/total_step_time
    updated_at: float | None = None  # epoch seconds: newest metrics file's modification time


def read_progress(log_dir: str | os.PathLike[str]) -> Progress:
    """The step a run reached under ``log_dir``, judged as ``check-run``'s completion is.

    :func:`rlgate.runs.metrics.run_progress` on ``train/loss`` (else the ``train/`` tag that got
    furthest): the latest attempt and contiguous progress count, so a stray far step or a
    stale earlier attempt does not make a run that stopped short look complete; gaps and
    restarts are named in ``note``.
    """
    try:
        run = load_run(log_dir)
    except MetricsError as exc:
        return Progress(None, None, str(exc).splitlines()[0])
    tags = (
        ["train/loss"]
        if len(run.series.get("train/loss", ()))
        else [tag for tag, series in run.series.items() if tag.startswith("train/") and len(series)]
    )
    judged = [p for p in (run_progress(run, tag) for tag in tags) if p is not None]
    if not judged:
        return Progress(None, None, f"no train/ metrics under {log_dir}")
    best = max(judged, key=lambda p: p.reached)
    return Progress(
        best.reached, best.tag, best.describe(), _median_step_seconds(run), _updated_at(run.files)
    )


STEP_TIME = "timing/train/total_step_time"


def _median_step_seconds(run: RunMetrics) -> float | None:
    series = run.series.get(STEP_TIME)
    if series is None:
        return None
    values = series.values[np.isfinite(series.values) & (series.values > 0)]
    return float(np.median(values)) if values.size else None


def _updated_at(files: Iterable[Path]) -> float | None:
    times = []
    for file in files:
        try:
            times.append(file.stat().st_mtime)
        except OSError:
            continue
    return max(times, default=None)


def _progress(manifest: RunManifest) -> Progress:
    """A training run's steps (:func:`read_progress`), or an SWE eval's graded rollouts."""
    if manifest.kind is RunKind.SWE_EVAL:
        from rlgate.launch.swe_eval import graded

        count, updated_at, note = graded(manifest)
        return Progress(count, "graded rollouts", note, updated_at=updated_at)
    return read_progress(manifest.log_dir)


def judge_stall(
    progress: Progress,
    *,
    now: float,
    watching_since: float,
    stall_factor: float | None,
    stall_minutes: float | None,
) -> str | None:
    """Why the run counts as stalled (one line), or None while it is making progress.

    Args:
        progress: the latest read of the run's metrics.
        now: the current epoch time.
        watching_since: when this watch started (the clock for a run with no metrics yet).
        stall_factor: stalled after this many times the run's median step time (None: off).
        stall_minutes: stalled after this many minutes without a new step (None: off).
    """
    since = progress.updated_at if progress.updated_at is not None else watching_since
    idle = max(0.0, now - since)
    limits = []
    if stall_minutes is not None:
        limits.append((stall_minutes * 60.0, f"--stall-minutes {stall_minutes:g}"))
    if stall_factor is not None and progress.median_step_seconds:
        limit = stall_factor * progress.median_step_seconds
        limits.append(
            (limit, f"{stall_factor:g} x its median step time {progress.median_step_seconds:.0f} s")
        )
    hit = [(limit, why) for limit, why in limits if idle > limit]
    if not hit:
        return None
    limit, why = min(hit)
    where = f"last step {progress.last_step}" if progress.last_step is not None else "no step"
    return (
        f"stalled: {where}, no new step for {idle / 60:.1f} min (limit {limit / 60:.1f} min: {why})"
    )


def judge(
    state: JobState, progress: Progress, target: int, cause: FailureCause | None
) -> tuple[RunStatus, ExitCode, str]:
    """The verdict on a finished job: status, exit code and a one-line explanation."""
    reached = progress.last_step is not None and progress.last_step >= target
    where = (
        f"last step {progress.last_step} of {target} ({progress.metric})"
        + (f"; {progress.note}" if progress.note else "")
        if progress.last_step is not None
        else f"no step logged ({progress.note})"
    )
    why = f"; {cause.reason}: {cause.line}" if cause else ""
    if state.phase is Phase.FAILED:
        code = ExitCode.INFRA if cause and cause.infra else ExitCode.FAIL
        return RunStatus.FAILED, code, f"run died: {state.message or 'failed'}; {where}{why}"
    if state.phase is Phase.SUCCEEDED:
        if reached:
            return RunStatus.COMPLETED, ExitCode.OK, f"completed: {where}"
        return RunStatus.STOPPED_SHORT, ExitCode.FAIL, f"exited 0 but stopped short: {where}"
    if reached:  # UNKNOWN: no exit status, but the metrics say it got there
        message = f"completed: {where} (exit status unknown: {state.message})"
        return RunStatus.COMPLETED, ExitCode.OK, message
    message = f"job gone without a final state ({state.message}); {where}{why}"
    return RunStatus.LOST, ExitCode.FAIL, message


@dataclass(frozen=True, slots=True)
class WatchResult:
    """The outcome of watching one run."""

    manifest: RunManifest
    status: RunStatus
    exit_code: ExitCode
    message: str
    cause: FailureCause | None = None


RUN_STATUS_CHECK = "run_status"


def run_result(result: WatchResult) -> Result:
    """The verdict as the ``run_status`` check (module docstring): value = last step logged."""
    manifest, status = result.manifest, result.status
    evidence: dict[str, object] = {"status": status.value, "run_name": manifest.run_name}
    if status is RunStatus.COMPLETED:
        outcome = Outcome.PASS
    elif result.exit_code is ExitCode.INFRA:
        outcome = Outcome.ERROR
        if status is RunStatus.STALLED:
            reason = "stalled"
        elif result.cause is not None and result.cause.infra:
            reason = result.cause.reason
        else:  # still running when the watch gave up: not judged
            reason = "watch_timeout"
        detail = result.cause.line if result.cause is not None else result.message
        evidence[INFRA_CAUSE] = {"reason": reason, "detail": detail}
    else:
        outcome = Outcome.FAIL
    return Result(
        name=RUN_STATUS_CHECK,
        tier=Tier.CONVERGENCE,
        outcome=outcome,
        value=float(manifest.last_step) if manifest.last_step is not None else None,
        op=Op.GE,
        threshold=float(manifest.target_step),
        unit="step",
        message=result.message,
        evidence=evidence,
    )


class _LogFollower:
    """Hands new lines of the driver log to a callback."""

    def __init__(self, emit: Callable[[str], None] | None) -> None:
        self.emit, self.offset = emit, 0

    def __call__(self, files: list[Path]) -> None:
        if self.emit is None or not files or not files[0].is_file():
            return
        with files[0].open("rb") as fh:
            fh.seek(self.offset)
            while chunk := fh.read(_TAIL_BYTES):  # bounded memory, however large the log
                complete = chunk.rfind(b"\n") + 1  # only whole lines; the rest next time
                if complete == 0 and len(chunk) == _TAIL_BYTES:
                    complete = len(chunk)  # a line longer than the bound: passed on in pieces
                self.offset += complete
                for line in log_lines(chunk[:complete]):
                    self.emit(line)
                if len(chunk) < _TAIL_BYTES:  # end of file (a partial line waits)
                    break
                fh.seek(self.offset)


DEFAULT_STALL_FACTOR = 5.0


def watch_run(
    run_dir: str | os.PathLike[str],
    *,
    interval: float = 60.0,
    timeout: float | None = None,
    stall_factor: float | None = DEFAULT_STALL_FACTOR,
    stall_minutes: float | None = None,
    cancel_stalled: bool = False,
    on_event: Callable[[str], None] | None = None,
    on_log: Callable[[str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> WatchResult:
    """Poll the run in ``run_dir`` until its job ends (or ``timeout`` seconds pass), then judge.

    Args:
        run_dir: a directory created by ``rlgate launch``.
        interval: seconds between polls.
        timeout: give up after this many seconds (exit code 3, the run keeps going).
        stall_factor: a running job with no new step for this many times its median step
            time is ``stalled`` (exit 3); None turns the rule off.
        stall_minutes: ... or with no new step for this many minutes.
        cancel_stalled: cancel a stalled job through its backend.
        on_event: receives status and progress lines ("running", "step 5/20").
        on_log: receives each new line of the driver log.
        sleep: the wait between polls (tests pass a fast one).

    Raises:
        LaunchError: no or invalid manifest. InfraError: the backend cannot be queried.
    """
    manifest = load_manifest(run_dir)
    if not manifest.job_ids:  # the submission itself failed; launch recorded why
        message = f"nothing to watch: {manifest.message or 'no job was submitted'}"
        return WatchResult(manifest, RunStatus.FAILED, ExitCode.FAIL, message)
    backend = backend_for(manifest.backend)
    follow = _LogFollower(on_log)
    emit = on_event or (lambda _: None)
    deadline = None if timeout is None else time.monotonic() + timeout
    watching_since = time.time()
    seen_phase, seen_step = None, None
    while True:
        state = backend.poll(manifest)
        backend.sync_logs(manifest)
        if state.phase is not seen_phase:
            emit(f"{state.phase.value}{': ' + state.message if state.message else ''}")
            seen_phase = state.phase
            if state.phase is Phase.RUNNING and manifest.status is not RunStatus.RUNNING:
                manifest = manifest.model_copy(
                    update={
                        "status": RunStatus.RUNNING,
                        "started_at": state.started_at or manifest.started_at or now_utc(),
                    }
                )
                write_manifest(manifest)
        follow(backend.log_files(manifest))
        progress = _progress(manifest)
        if progress.last_step is not None and progress.last_step != seen_step:
            emit(f"step {progress.last_step}/{manifest.target_step}")
            seen_step = progress.last_step
        if state.phase.terminal:
            return _finish(manifest, backend, state, progress)
        stalled = None
        if state.phase is Phase.RUNNING:
            stalled = judge_stall(
                progress,
                now=time.time(),
                watching_since=watching_since,
                stall_factor=stall_factor,
                stall_minutes=stall_minutes,
            )
        if stalled is not None:
            return _stalled(manifest, backend, progress, stalled, cancel=cancel_stalled)
        if deadline is not None and time.monotonic() >= deadline:
            message = f"still {state.phase.value} after {timeout:g} s; watch again later"
            return WatchResult(manifest, manifest.status, ExitCode.INFRA, message)
        sleep(interval)


def _stalled(
    manifest: RunManifest, backend: LaunchBackend, progress: Progress, why: str, *, cancel: bool
) -> WatchResult:
    if cancel:
        why += f"; cancelled: {backend.cancel(manifest)}"
    else:
        why += "; still running (rerun with --cancel-stalled to cancel it)"
    manifest = manifest.model_copy(
        update={
            "status": RunStatus.STALLED,
            "last_step": progress.last_step,
            "message": why,
            "ended_at": now_utc() if cancel else manifest.ended_at,
        }
    )
    write_manifest(manifest)
    logger.info("%s: %s", manifest.run_name, why)
    return WatchResult(manifest, RunStatus.STALLED, ExitCode.INFRA, why)


def _finish(
    manifest: RunManifest, backend: LaunchBackend, state: JobState, progress: Progress
) -> WatchResult:
    cause = None
    if state.phase is not Phase.SUCCEEDED:
        logs = [(str(p), _tail_lines(p)) for p in backend.log_files(manifest)]
        cause = classify_failure(logs, state=state.message)
    status, code, message = judge(state, progress, manifest.target_step, cause)
    manifest = manifest.model_copy(
        update={
            "status": status,
            "started_at": manifest.started_at or state.started_at,
            "ended_at": state.ended_at or now_utc(),
            "exit_status": state.exit_status,
            "last_step": progress.last_step,
            "message": message,
            "driver_log": str(files[0]) if (files := backend.log_files(manifest)) else None,
        }
    )
    write_manifest(manifest)
    logger.info("%s: %s", manifest.run_name, message)
    return WatchResult(manifest, status, code, message, cause)
