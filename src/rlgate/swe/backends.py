"""``rlgate swe eval --backend gym|nemo-skills``: SWE-bench Verified without a Docker daemon.

Two existing distributed engines run the agent and the grading in Apptainer on a Slurm
cluster; rlgate builds their exact command lines, says what they cost, and resumes:

* **gym** (NeMo Gym 0.7.0): ``ng_run`` starts the ``swe_agents`` resources server
  (``responses_api_agents/swe_agents/configs/swebench_openhands.yaml``: OpenHands in Apptainer
  from ``.sif`` images, spread over the Ray cluster's nodes, graded in a second container of
  the same image) against the vLLM server of the checkpoint (``vllm_model.yaml``,
  ``policy_base_url``); ``ng_collect_rollouts`` then collects N repeats of every instance
  (``num_repeats``) into one rollouts file, one run per ``_ng_rollout_index``. Keys are
  nemo-gym's Hydra config: ``RolloutCollectionConfig`` (``nemo_gym/rollout_collection.py``)
  and ``SWEBenchWrapperConfig`` (``responses_api_agents/swe_agents/app.py``).
  ``+resume_from_cache=true`` makes Gym skip the rollouts its output file already holds.
  Another environment is ``--gym-config`` and ``--gym-agent`` (the agent server's name in it,
  the collection's ``+agent_name``); the swe_agents keys (``container_formatter``,
  ``concurrency``) go only to a swe_agents server, which ``--container-formatter`` names.
* **nemo-skills** (NVIDIA-NeMo/Skills 8b18f39): ``ns eval --benchmarks=swe-bench:N`` (typer,
  ``nemo_skills/pipeline/eval.py``; ``++`` keys are ``SweBenchGenerationConfig`` of
  ``nemo_skills/inference/eval/swebench.py``) submits through its cluster config (Slurm) and
  writes ``output-rs<seed>.jsonl`` per seed; it reruns only seeds without ``.done`` and, within
  a seed, skips the instances already in its ``-async`` file (``++skip_filled=True``, always
  set by its pipeline).

Every command is built by :func:`rlgate.core.commands.command` from validated values. What is
already graded is read from the output directory (:func:`progress`) with the SWE readers'
own parsers, so an instance graded once is not run again. Pure apart from reading that
directory: running the commands is the caller's (``cli/swe.py``).
"""

from __future__ import annotations

import math
import os
import re
import stat
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from rlgate.core.commands import Command, command
from rlgate.core.errors import SweError
from rlgate.swe.readers._common import jsonl_lines, jsonl_objects
from rlgate.swe.readers.formats.gym import (
    ROLLOUT_ID_PATHS,
    ROLLOUT_INDEX_KEY,
    rollout_instance_id,
)
from rlgate.swe.readers.formats.nemo_skills import BENCHMARK_DIR
from rlgate.swe.records import MAX_RUNS_PER_ARM, check_instance_id, parse_json

__all__ = [
    "Backend",
    "ClusterEval",
    "EvalPlan",
    "Progress",
    "gym_writes",
    "plan_eval",
    "progress",
]

GYM_AGENT = "swe_agents"
GYM_AGENT_KEY = "swe_agents.responses_api_agents.swe_agents"
#: An agent server's name: a top-level key of the Gym config (``+agent_name`` of the collection).
_GYM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
GYM_CONFIG = "responses_api_agents/swe_agents/configs/swebench_openhands.yaml"
GYM_MODEL_CONFIG = "responses_api_models/vllm_model/configs/vllm_model.yaml"
GYM_ROLLOUTS = "rollouts.jsonl"
#: Where Gym's two programs keep Hydra's run dir (``hydra.run.dir``; Hydra's default is
#: ``outputs/<date>/<time>`` in the cwd, which is not the user's to write in).
GYM_HYDRA_DIR = "hydra"
HYDRA_FILES = (
    "global_config.log",
    ".hydra/config.yaml",
    ".hydra/hydra.yaml",
    ".hydra/overrides.yaml",
)
#: What ``ng_run`` prints once every server answers (nemo_gym/cli/env.py, 0.7.0); the
#: collection connects to its head server, so it starts only after this line. The pattern
#: means the same to Python's ``re`` and to ``grep -E`` (the launched job's script).
GYM_READY_ERE = r"All [0-9]+ / [0-9]+ servers ready!"
GYM_READY = re.compile(GYM_READY_ERE)
#: How long the server may take to say it is ready (it builds a venv per server first).
SERVER_READY_TIMEOUT_S = 3600
NS_BENCHMARK = "swe-bench"
AGENT_FRAMEWORKS = ("openhands", "swe_agent")  # NeMo-Skills' SupportedAgentFrameworks
#: An override rlgate passes through: ``key=value`` with a dotted key (Hydra's grammar parses
#: the rest); never an option, never a line break.
_OVERRIDE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*=[^\x00-\x1f\x7f]*")
_URL = re.compile(r"https?://[A-Za-z0-9.\-_:\[\]]+(?:/[A-Za-z0-9._~/%-]*)?")


class Backend(Enum):
    """Where ``rlgate swe eval`` runs the agent and the grading."""

    DOCKER = "docker"  # swebench's harness (rlgate.swe.harness)
    GYM = "gym"
    NEMO_SKILLS = "nemo-skills"


@dataclass(frozen=True, slots=True)
class ClusterEval:
    """What to evaluate with Gym or NeMo-Skills (validated in ``__post_init__``)."""

    backend: Backend
    model: str  # the served model name (vLLM --served-model-name) or checkpoint path
    output_dir: Path
    instance_ids: tuple[str, ...]  # the dataset: the universe every seed covers
    seeds: int = 1
    server_url: str | None = None  # the vLLM server of the checkpoint (OpenAI-compatible /v1)
    server_gpus: int = 8  # GPUs serving the model (cost; nemo-skills hosts it without a URL)
    concurrency: int = 64  # instances in flight
    minutes_per_instance: int = 45  # upper bound: agent timeout + tests timeout
    cpus_per_instance: float = 1.0  # Gym's engineering note: about one core per instance
    gym_input: Path | None = None  # Gym-format SWE-bench Verified rows (gym)
    gym_config: str = GYM_CONFIG
    gym_agent: str = GYM_AGENT  # the agent server in gym_config that collects (+agent_name)
    container_formatter: str | None = None  # .sif path template with {instance_id}
    cluster: str | None = None  # NeMo-Skills cluster config name (nemo-skills)
    agent_framework: str = "openhands"
    overrides: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.backend is Backend.DOCKER:
            raise ValueError("the docker backend is rlgate.swe.harness")
        for name, value, lo, hi in (
            ("--seeds", self.seeds, 1, MAX_RUNS_PER_ARM),
            ("--server-gpus", self.server_gpus, 0, 4096),
            ("--concurrency", self.concurrency, 1, 100_000),
            ("--minutes-per-instance", self.minutes_per_instance, 1, 7 * 24 * 60),
        ):
            if type(value) is not int or not lo <= value <= hi:  # a manifest is JSON: 2.0, true
                raise SweError(f"{name} must be an integer in {lo}..{hi}, got {value!r}")
        if (
            type(self.cpus_per_instance) not in (int, float)
            or not math.isfinite(self.cpus_per_instance)
            or not 0 < self.cpus_per_instance <= 1024
        ):
            raise SweError(
                f"--cpus-per-instance must be in (0, 1024], got {self.cpus_per_instance}"
            )
        check_instance_id(self.model, "--model", "model")
        for iid in self.instance_ids:
            check_instance_id(iid, "dataset")
        if self.server_url is not None and not _URL.fullmatch(self.server_url):
            raise SweError(f"--server-url {self.server_url!r:.120} is not an http(s) URL")
        if self.agent_framework not in AGENT_FRAMEWORKS:
            raise SweError(
                f"--agent-framework {self.agent_framework!r:.40} is not one of {AGENT_FRAMEWORKS}"
            )
        for item in self.overrides:
            if not _OVERRIDE.fullmatch(item):
                raise SweError(f"override {item!r:.120} is not key=value (a dotted key)")
        if not _GYM_NAME.fullmatch(self.gym_agent):
            raise SweError(f"--gym-agent {self.gym_agent!r:.80} is not a Gym server name")
        if self.backend is Backend.GYM:
            # swe_agents runs from .sif images; another agent (--gym-agent) may need none.
            sif = self.gym_agent == GYM_AGENT
            missing = [
                flag
                for flag, value in (
                    ("--server-url", self.server_url),
                    ("--gym-input", self.gym_input),
                    ("--container-formatter", self.container_formatter if sif else ""),
                )
                if value is None
            ]
            if missing:
                raise SweError(
                    f"--backend gym needs {', '.join(missing)}",
                    hint="the vLLM server of the checkpoint, the Gym-format rows"
                    + (
                        " of SWE-bench Verified and the .sif image template (NeMo RL's "
                        "download_swe_images.py)"
                        if sif
                        else " (an instance id in responses_create_params.metadata)"
                    ),
                )
        if self.backend is Backend.NEMO_SKILLS and self.cluster is None:
            raise SweError(
                "--backend nemo-skills needs --cluster (a NeMo-Skills cluster config name)",
                hint="ns eval submits through it, e.g. a Slurm config in cluster_configs/",
            )
        if self.container_formatter is not None and "{instance_id}" not in self.container_formatter:
            raise SweError("--container-formatter must hold {instance_id} (one .sif per instance)")


@dataclass(frozen=True, slots=True)
class Progress:
    """What the output directory already holds: graded (instance, seed) pairs."""

    done: frozenset[tuple[str, int]]
    finished_seeds: frozenset[int]
    notes: tuple[str, ...] = ()  # what was read but not counted (one line each)


@dataclass(frozen=True, slots=True)
class EvalPlan:
    """The exact commands, what remains, and what it costs."""

    eval: ClusterEval
    commands: tuple[Command, ...]
    background: tuple[bool, ...]  # run in the background (a server the next command uses)
    ready: tuple[re.Pattern[str] | None, ...]  # a background command's "I am up" log line
    total: int  # instances x seeds
    remaining: int
    results: Path  # what `swe compare` reads
    notes: tuple[str, ...] = ()  # rows of the output not counted (Progress.notes)

    @property
    def wall_hours(self) -> float:
        """Upper bound: the remaining rollouts in waves of ``concurrency``."""
        waves = math.ceil(self.remaining / self.eval.concurrency)
        return waves * self.eval.minutes_per_instance / 60

    @property
    def gpu_hours(self) -> float:
        """The serving GPUs for the wall time."""
        return self.eval.server_gpus * self.wall_hours

    @property
    def cpu_hours(self) -> float:
        """One agent and one grading container per instance, for its minutes."""
        per = self.eval.minutes_per_instance / 60 * self.eval.cpus_per_instance
        return self.remaining * per


def _gym_rows(path: Path) -> tuple[list[tuple[str, dict[str, Any]]], str | None]:
    """The rows of a Gym rollouts file, and where its torn final line is (or None).

    A final line with no line break that is not JSON is a row being written (the job is
    running) or cut short (the job was killed): it is left out and named. Gym does the same
    when it resumes (``_drop_truncated_tail`` in ``nemo_gym/rollout_collection.py``, 0.7.0:
    with ``+resume_from_cache=true`` it truncates such a line before appending, and adds the
    line break to a final line that is JSON). A bad line anywhere else is refused.
    """
    rows: list[tuple[str, dict[str, Any]]] = []
    torn = None
    for lineno, line in jsonl_lines(path):
        where = f"{path}:{lineno}"
        try:
            row = parse_json(line, where, line=True)
        except SweError:
            if line.endswith("\n"):
                raise
            torn = where
            continue
        if not isinstance(row, dict):
            raise SweError(f"{where}: expected a JSON object per line, got {type(row).__name__}")
        rows.append((where, row))
    return rows, torn


def _gym_progress(path: Path, ids: frozenset[str], seeds: int) -> Progress:
    """The graded (instance, ``_ng_rollout_index``) pairs of this evaluation in ``path``.

    Only an instance of the evaluation with an index in ``0..seeds-1`` counts; other rows are
    named in ``notes``. The same pair twice is refused, as ``swe compare`` refuses it.
    """
    done: set[tuple[str, int]] = set()
    seen: dict[tuple[str, int], str] = {}
    outside: list[str] = []
    notes: list[str] = []
    if path.is_file():
        rows, torn = _gym_rows(path)
        for where, row in rows:
            iid = rollout_instance_id(row)
            index = row.get(ROLLOUT_INDEX_KEY, 0)
            if iid is None or type(index) is not int or index < 0:
                raise SweError(f"{where}: not a rollout of this evaluation (no instance id/index)")
            if (iid, index) in seen:
                raise SweError(
                    f"{where}: rollout {index} of {iid!r:.80} already at {seen[iid, index]}",
                    hint="two collections wrote the same output (a second launch of the same "
                    "--output-dir?); swe compare refuses it too: keep one of them",
                )
            seen[iid, index] = where
            if iid in ids and index < seeds:
                done.add((iid, index))
            else:
                outside.append(where)
        if outside:
            notes.append(
                f"{len(outside)} row(s) not of this evaluation's instances x {seeds} seed(s), "
                f"not counted (first: {outside[0]})"
            )
        if torn:
            notes.append(f"a torn final line, not counted: {torn}")
    return Progress(frozenset(done), frozenset(), tuple(notes))


def _ns_progress(output_dir: Path, ids: frozenset[str], seeds: int) -> Progress:
    results = output_dir / BENCHMARK_DIR
    done: set[tuple[str, int]] = set()
    finished: set[int] = set()
    for seed in range(seeds):
        final = results / f"output-rs{seed}.jsonl"
        if final.is_file() and (results / f"output-rs{seed}.jsonl.done").is_file():
            finished.add(seed)
            files = [final]
        else:
            files = sorted(results.glob(f"output-rs{seed}*.jsonl-async"))
        for path in files:
            for _, row in jsonl_objects(path):
                if isinstance(iid := row.get("instance_id"), str) and iid in ids:
                    done.add((iid, seed))
    return Progress(frozenset(done), frozenset(finished))


def progress(e: ClusterEval) -> Progress:
    """The (instance, seed) pairs already graded in ``e.output_dir`` (read, never changed)."""
    ids = frozenset(e.instance_ids)
    if e.backend is Backend.GYM:
        return _gym_progress(e.output_dir / GYM_ROLLOUTS, ids, e.seeds)
    return _ns_progress(e.output_dir, ids, e.seeds)


def gym_writes(output_dir: Path) -> tuple[Path, ...]:
    """The files a Gym evaluation writes in ``output_dir``.

    The server's log, the rollouts and Gym's sidecars (``nemo_gym/path_utils.py`` 0.7.0:
    ``failures_path_for``, ``materialized_path_for``, ``aggregate_metrics_path_for``; the
    upload spool of ``rollout_collection.py``; ``rollout_health.py::_write_reports``, run after
    every collection: ``quality_summary.json``, ``rollout_verdicts.jsonl`` next to the rollouts);
    Hydra's run dir of each program (its job log is named after ``nemo_gym/global_config.py``,
    where ``@hydra.main`` is).
    """
    results = output_dir / GYM_ROLLOUTS
    return (
        output_dir / "ng_run.log",
        results,
        results.with_name(f"{results.stem}_failures.jsonl"),
        results.with_name(f"{results.stem}_materialized_inputs.jsonl"),
        results.with_name(f"{results.stem}_aggregate_metrics.json"),
        results.with_name(f"{results.name}.upload.tmp"),
        output_dir / "quality_summary.json",
        output_dir / "rollout_verdicts.jsonl",
        *(
            output_dir / GYM_HYDRA_DIR / program / name
            for program in ("ng_run", "ng_collect_rollouts")
            for name in HYDRA_FILES
        ),
    )


def hydra_string(value: str | Path, what: str) -> str:
    """``value`` as one quoted string of Hydra's override grammar (``{``, ``,``, ``[`` are its).

    Gym reads its command line with ``@hydra.main``; a quote or backslash in a value is
    refused rather than escaped, and so is ``${`` (an interpolation, resolved in quoted
    strings as well).
    """
    text = str(value)
    if "'" in text or "\\" in text:
        raise SweError(f"{what} {text!r:.120} holds a quote or a backslash")
    if "${" in text:  # Hydra and OmegaConf resolve an interpolation inside a quoted string too
        raise SweError(
            f"{what} {text!r:.120} holds '${{', which Gym's Hydra would resolve as an "
            "interpolation (another path or value than the one given)",
            hint="rename the folder or value so that it holds no '${'",
        )
    return f"'{text}'"


def images_folder(formatter: str) -> Path | None:
    """The images folder of a path-like ``--container-formatter``, as the host resolves it.

    Absolute, ``..`` and symlinks followed; None for a URI (``docker://...``).
    """
    if "://" in formatter:
        return None
    prefix = formatter.split("{", 1)[0]
    folder = prefix if prefix.endswith("/") else os.path.dirname(prefix)
    try:
        return Path(folder or ".").resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError before 3.13)
        raise SweError(f"--container-formatter's folder {folder!r:.200}: {exc}") from None


def resolved_formatter(formatter: str) -> str:
    """``formatter`` with its images folder as :func:`images_folder` resolves it.

    Gym opens the formatter as given, in the job's working directory (the NeMo RL checkout)
    and inside the container; the job mounts the resolved folder: both are this one.
    """
    folder = images_folder(formatter)
    if folder is None:
        return formatter
    prefix = formatter.split("{", 1)[0]
    cut = len(prefix) if prefix.endswith("/") else len(os.path.dirname(prefix))
    return f"{folder}/{formatter[cut:].lstrip('/')}"


#: The largest ``--gym-input`` read to check its rows (500 Verified rows are ~30 MB).
MAX_GYM_INPUT_BYTES = 1 << 30


def gym_input_ids(path: Path) -> list[str]:
    """The instance id of every row of a Gym input file (``--gym-input``), in order.

    The id is where Gym's rows carry it (:data:`rlgate.swe.readers.formats.gym.ROLLOUT_ID_PATHS`:
    the row's ``instance_id``, ``responses_create_params.metadata.instance_id``, ...).

    Raises:
        SweError: not a regular readable file, too large, not JSON Lines of objects, or a
            row without an instance id.
    """
    try:
        info = path.stat()
    except OSError as exc:
        raise SweError(f"--gym-input {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise SweError(f"--gym-input {path} is not a regular file")
    if info.st_size > MAX_GYM_INPUT_BYTES:
        raise SweError(f"--gym-input {path} is over {MAX_GYM_INPUT_BYTES >> 20} MiB")
    ids = []
    for where, row in jsonl_objects(path):
        iid = rollout_instance_id(row)
        if iid is None:
            raise SweError(
                f"--gym-input {where}: a row without an instance id (looked at "
                f"{', '.join('.'.join(p) for p in ROLLOUT_ID_PATHS)})"
            )
        ids.append(check_instance_id(iid, where))
    return ids


def _check_gym_input(e: ClusterEval) -> None:
    """The rows Gym will run are the evaluation's instances, each once (SweError if not).

    ``ng_collect_rollouts`` runs every row of ``--gym-input`` ``num_repeats`` times: a plan
    over other instances (``--instance-ids``, another dataset) would count, size and wait for
    a different evaluation than the job runs.
    """
    assert e.gym_input is not None
    rows = gym_input_ids(e.gym_input)
    twice = sorted(i for i, n in Counter(rows).items() if n > 1)
    if twice:
        raise SweError(f"--gym-input {e.gym_input}: instance(s) in more than one row: {twice[:5]}")
    wanted = set(e.instance_ids)
    extra, missing = sorted(set(rows) - wanted), sorted(wanted - set(rows))
    if extra or missing:
        raise SweError(
            f"--gym-input {e.gym_input} holds {len(rows)} instance(s), the evaluation "
            f"{len(wanted)}: ng_collect_rollouts runs every row of it"
            + (f"; rows not evaluated: {extra[:5]}" if extra else "")
            + (f"; instances with no row: {missing[:5]}" if missing else ""),
            hint="give --gym-input the rows of exactly the instances evaluated (--instance-ids "
            "or --dataset): filter the file, or drop --instance-ids",
        )


def _check_materialized(e: ClusterEval) -> None:
    """A resumed collection runs what Gym materialized, not the command line (SweError if other).

    nemo-gym 0.7.0 ``rollout_collection.py`` (``RolloutCollectionHelper``): with
    ``resume_from_cache`` and both the materialized inputs and the output present, the rows
    run are those of ``materialized_jsonl_fpath`` (``_load_from_cache``), written at the first
    run for its rows x ``num_repeats``. They must be this plan's (instance, seed) pairs.
    """
    results = e.output_dir / GYM_ROLLOUTS
    materialized = results.with_name(f"{results.stem}_materialized_inputs.jsonl")
    if not (materialized.is_file() and results.is_file()):
        return
    pairs = set()
    for where, row in jsonl_objects(materialized):
        iid = rollout_instance_id(row)
        index = row.get(ROLLOUT_INDEX_KEY)
        if iid is None or type(index) is not int:
            raise SweError(f"{where}: a materialized row without an instance id or rollout index")
        pairs.add((iid, index))
    planned = {(i, k) for i in e.instance_ids for k in range(e.seeds)}
    if pairs != planned:
        seeds = len({k for _, k in pairs})
        raise SweError(
            f"{materialized}: Gym resumes from these {len(pairs)} materialized rollouts "
            f"({len({i for i, _ in pairs})} instance(s) x {seeds} seed(s)), not from the "
            f"command line; this plan is {len(e.instance_ids)} x {e.seeds}",
            hint="resume with the --seeds and rows of the first run, or use a new --output-dir",
        )


def _gym_commands(e: ClusterEval) -> tuple[Command, ...]:
    assert e.gym_input is not None and e.server_url
    hydra = (e.output_dir / GYM_HYDRA_DIR).resolve()
    extra: dict[str, Any] = {"overrides": [f"+{o}" for o in e.overrides]} if e.overrides else {}
    swe = ""  # SWEBenchWrapperConfig's keys, for a swe_agents server only
    if e.container_formatter is not None:
        key = f"{e.gym_agent}.responses_api_agents.swe_agents"
        swe = f" +{key}.container_formatter={{formatter}} +{key}.concurrency={{concurrency}}"
        extra |= {
            "formatter": hydra_string(
                resolved_formatter(e.container_formatter), "--container-formatter"
            ),
            "concurrency": e.concurrency,
        }
    serve = command(
        "ng_run +config_paths=[{config},{model_config}] +policy_base_url={url} "
        "+policy_api_key=dummy +policy_model_name={model} hydra.run.dir={hydra}"
        + swe
        + (" {overrides}" if e.overrides else ""),
        hydra=hydra_string(hydra / "ng_run", "--output-dir"),
        config=hydra_string(e.gym_config, "--gym-config"),
        model_config=hydra_string(GYM_MODEL_CONFIG, "the model config"),
        url=hydra_string(e.server_url, "--server-url"),
        model=hydra_string(e.model, "--model"),
        error=SweError,
        **extra,
    )
    collect = command(
        "ng_collect_rollouts +agent_name={agent} +input_jsonl_fpath={input} "
        "+output_jsonl_fpath={output} +num_repeats={seeds} +num_samples_in_parallel={concurrency} "
        "+resume_from_cache=true hydra.run.dir={hydra}",
        hydra=hydra_string(hydra / "ng_collect_rollouts", "--output-dir"),
        agent=e.gym_agent,
        input=hydra_string(e.gym_input.resolve(), "--gym-input"),
        output=hydra_string((e.output_dir / GYM_ROLLOUTS).resolve(), "--output-dir"),
        seeds=e.seeds,
        concurrency=e.concurrency,
        error=SweError,
    )
    return serve, collect


def _ns_command(e: ClusterEval) -> Command:
    server = (
        ("--server_address={server}", e.server_url)
        if e.server_url
        else ("--server_gpus={server}", e.server_gpus)
    )
    extra = [f"++{o}" for o in e.overrides]
    return command(
        f"ns eval --cluster={{cluster}} --model={{model}} --server_type=vllm {server[0]} "
        "--benchmarks={benchmark} --output_dir={output} --expname={expname} "
        "++agent_framework={framework} ++max_concurrent_requests={concurrency}"
        + (" {extra}" if extra else ""),
        cluster=e.cluster or "",
        model=e.model,
        server=server[1],
        benchmark=f"{NS_BENCHMARK}:{e.seeds}",
        output=e.output_dir.resolve(),
        expname=f"rlgate-swe-{e.output_dir.name}",
        framework=e.agent_framework,
        concurrency=e.concurrency,
        error=SweError,
        **({"extra": extra} if extra else {}),
    )


def plan_eval(e: ClusterEval) -> EvalPlan:
    """The commands for ``e`` and what of it remains to be run (read from its output dir)."""
    done = progress(e)
    total = len(e.instance_ids) * e.seeds
    if e.backend is Backend.GYM:
        _check_gym_input(e)
        _check_materialized(e)
        commands: Sequence[Command] = _gym_commands(e)
        background, ready = (True, False), (GYM_READY, None)
        results = e.output_dir / GYM_ROLLOUTS
    else:
        commands, background, ready = (_ns_command(e),), (False,), (None,)
        results = e.output_dir
    remaining = total - len(done.done)
    return EvalPlan(e, tuple(commands), background, ready, total, remaining, results, done.notes)
