"""NeMo-Skills ``ns eval --benchmarks=swe-bench[:N]`` results: ``output[-rs<seed>].jsonl``.

Read from NVIDIA-NeMo/Skills at commit 8b18f3992854bcb668095228a146e214c567b370:

* ``nemo_skills/inference/eval/swebench.py`` (``SweBenchGenerationTask.process_single_datapoint``)
  writes per instance ``{"swe-bench-metrics": report.json[instance_id], "swe-bench-outputs":
  <the agent's prediction: instance_id, model_name_or_path, model_patch>, "generation": ""}``;
  ``nemo_skills/inference/generate.py`` (``dump_outputs``) adds every field of the input row
  (the prepared dataset: the SWE-bench row plus ``container_formatter``, ``container_id``,
  ``dataset_name``, ``split``, from ``nemo_skills/dataset/swe-bench/prepare.py``) and the
  generation times. When the agent produced no patch, NeMo-Skills writes the metrics
  ``{resolved: false, patch_exists: false, patch_successfully_applied: false}`` itself; when
  its evaluation command failed ``max_retries`` times (no ``report.json``), it writes
  ``{resolved: false, patch_exists: true, patch_successfully_applied: false}``: that is the
  harness error swebench's own final report lists in ``error_ids`` (rlgate: ``error``, infra),
  or a patch that did not apply when the instance's ``apptainer_logs/<id>_eval_attempt<N>.log``
  says so. A real ``report.json`` entry always has ``patch_is_None``; the synthesized ones
  do not, which is how they are told apart.
* ``nemo_skills/pipeline/utils/generation.py`` (``get_chunked_rs_filename``) names the files:
  ``output.jsonl`` (greedy), ``output-rs<seed>.jsonl`` per seed, ``..._chunk<k>.jsonl`` per
  chunk until they are merged, each with ``.done`` once finished and ``-async`` while being
  written (``generate.py``: ``restore_async_order`` writes the final file, then removes it).
* ``nemo_skills/evaluation/metrics/code_metrics.py`` (``SweBenchMetrics``) scores
  ``issues_resolved`` = ``resolved``: the same field rlgate reads.

A file is one run (one seed); a directory (``<output_dir>``, its ``eval-results/swe-bench``)
is one run per finished seed file. A seed still being written (``-async``, chunks not merged)
is refused: comparing fewer seeds than were run would be silent.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rlgate.core.errors import SweError
from rlgate.core.io import read_text
from rlgate.swe.readers._common import (
    APPLY_PATCH_FAIL,
    add_once,
    build_run,
    classify_entry,
    instance_id_of,
    jsonl_objects,
    labels_differ,
)
from rlgate.swe.readers.registry import Probe, register
from rlgate.swe.records import (
    MAX_RUNS_PER_ARM,
    DatasetUniverse,
    InputFormat,
    InstanceOutcome,
    Outcome,
    SweRun,
    _as_tests,
)

METRICS_KEY = "swe-bench-metrics"
OUTPUTS_KEY = "swe-bench-outputs"
BENCHMARK_DIR = Path("eval-results") / "swe-bench"
#: ``output.jsonl`` / ``output-rs<seed>.jsonl``, and the chunk and in-progress files of either.
OUTPUT_FILE = re.compile(r"output(?:-rs(?P<seed>\d{1,6}))?\.jsonl")
PARTIAL_FILE = re.compile(r"output(?:-rs(?P<seed>\d{1,6}))?(?:_chunk\d+)?\.jsonl(?:-async)?")
#: What NeMo-Skills writes when its evaluation command left no report.json.
_EVAL_FAILED = {"resolved": False, "patch_exists": True, "patch_successfully_applied": False}


def _metrics_outcome(iid: str, metrics: Any, row: dict[str, Any], where: str) -> InstanceOutcome:
    if not isinstance(metrics, dict):
        raise SweError(f"{where}: {METRICS_KEY} of {iid} must be an object, got {metrics!r:.100}")
    outputs = row.get(OUTPUTS_KEY)
    if outputs is not None:
        if not isinstance(outputs, dict):
            raise SweError(f"{where}: {OUTPUTS_KEY} of {iid} must be an object")
        if outputs.get("instance_id", iid) != iid:
            raise SweError(
                f"{where}: contradictory row: instance_id {iid} but {OUTPUTS_KEY}.instance_id "
                f"{outputs.get('instance_id')!r:.120}"
            )
        if (
            "model_patch" in outputs
            and outputs["model_patch"] is None
            and metrics.get("patch_exists", False)
        ):
            raise SweError(
                f"{where}: contradictory row for {iid}: the agent's model_patch is null but "
                f"{METRICS_KEY}.patch_exists is true (NeMo-Skills writes patch_exists=false then)"
            )
    outcome = classify_entry(iid, metrics, where)
    if (
        outcome.outcome is Outcome.UNRESOLVED
        and "patch_is_None" not in metrics
        and "tests_status" not in metrics
        and all(metrics.get(k) is v for k, v in _EVAL_FAILED.items())
    ):
        return InstanceOutcome(iid, Outcome.ERROR, "evaluation command failed (no report.json)")
    return outcome


def _patch_failed(logs: Path, iid: str) -> bool:
    """True when the instance's last NeMo-Skills eval log says the patch did not apply."""
    attempts = sorted(
        logs.glob(f"{iid}_eval_attempt*.log"),
        key=lambda p: int(m.group(1)) if (m := re.search(r"attempt(\d+)", p.name)) else 0,
    )
    if not attempts or not attempts[-1].is_file():
        return False
    text = read_text(attempts[-1], what="NeMo-Skills eval log", error=SweError, errors="replace")
    return APPLY_PATCH_FAIL in text


def _row_labels(row: dict[str, Any], where: str) -> tuple[frozenset[str], frozenset[str]] | None:
    if "FAIL_TO_PASS" in row and "PASS_TO_PASS" in row:
        return _as_tests(row["FAIL_TO_PASS"], where), _as_tests(row["PASS_TO_PASS"], where)
    return None


def output_run(path: Path, universe: DatasetUniverse) -> SweRun:
    """One ``output[-rs<seed>].jsonl`` as one run."""
    seed = m.group("seed") if (m := OUTPUT_FILE.fullmatch(path.name)) else None
    logs = path.parent / (f"rs{seed}" if seed is not None else "") / "apptainer_logs"
    found: dict[str, InstanceOutcome] = {}
    seen_at: dict[str, str] = {}
    mismatch: list[str] = []
    names: set[str] = set()
    for where, row in jsonl_objects(path):
        iid = instance_id_of(row, where)
        if METRICS_KEY not in row:
            raise SweError(
                f"{where}: no {METRICS_KEY!r} in a NeMo-Skills row for {iid}",
                hint="a NeMo-Skills swe-bench output line holds swe-bench-metrics; is the file "
                "from another benchmark, or not evaluated?",
            )
        outcome = _metrics_outcome(iid, row[METRICS_KEY], row, where)
        if outcome.outcome is Outcome.ERROR and logs.is_dir() and _patch_failed(logs, iid):
            outcome = InstanceOutcome(iid, Outcome.PATCH_FAILED, "patch did not apply")
        add_once(found, seen_at, outcome, where, hint="NeMo-Skills writes one line per instance")
        labels = _row_labels(row, where)
        if labels is not None and iid in universe.labels and labels != universe.labels[iid]:
            mismatch.append(iid)
        elif labels_differ(iid, row[METRICS_KEY], universe, where):
            mismatch.append(iid)
        if isinstance(name := row.get("dataset_name"), str):
            names.add(name)
    if not found:
        raise SweError(f"{path}: no rows (empty file)")
    return build_run(
        str(path),
        InputFormat.NEMO_SKILLS,
        found,
        universe,
        scope=frozenset(found),
        dataset_name=", ".join(sorted(names)) or None,
        label_mismatch=mismatch,
    )


def _results_dir(path: Path) -> Path:
    """``<output_dir>/eval-results/swe-bench`` when ``path`` is ns eval's output directory."""
    nested = path / BENCHMARK_DIR
    return nested if nested.is_dir() else path


def _seed_files(directory: Path) -> list[Path]:
    """The finished seed files of a NeMo-Skills results directory (unfinished: SweError)."""
    files = {p.name: p for p in directory.iterdir() if p.is_file()}
    finished = sorted(
        (p for n, p in files.items() if OUTPUT_FILE.fullmatch(n)),
        key=lambda p: int(m.group("seed") or -1) if (m := OUTPUT_FILE.fullmatch(p.name)) else -1,
    )
    merged = {p.name for p in finished}
    # a seed's -async file is removed right after its final file is written (generate.py,
    # restore_async_order): both together mean it is being written; a chunk left beside its
    # merged file is done
    unfinished = sorted(
        n
        for n in files
        if PARTIAL_FILE.fullmatch(n)
        and not OUTPUT_FILE.fullmatch(n)
        and (
            n.endswith("-async")
            or n.split("_chunk")[0].removesuffix(".jsonl") + ".jsonl" not in merged
        )
    )
    if unfinished:
        raise SweError(
            f"{directory}: NeMo-Skills has not finished {len(unfinished)} file(s): "
            f"{', '.join(unfinished[:5])}",
            hint="the evaluation is still running or stopped part-way; resume it (`ns eval` "
            "with the same --output_dir, or `rlgate swe eval --backend nemo-skills`) or pass "
            "the finished output-rs*.jsonl files",
        )
    if any(p.name == "output.jsonl" for p in finished) and len(finished) > 1:
        raise SweError(
            f"{directory}: holds both the greedy output.jsonl and seeded output-rs*.jsonl",
            hint="pass the files of one evaluation",
        )
    if len(finished) > MAX_RUNS_PER_ARM:
        raise SweError(f"{directory}: more than {MAX_RUNS_PER_ARM} seed files")
    return finished


def _is_results_dir(probe: Probe) -> bool:
    if not probe.is_dir:
        return False
    directory = _results_dir(probe.path)
    names = {p.name for p in directory.iterdir() if p.is_file()}
    outputs = [n for n in names if PARTIAL_FILE.fullmatch(n)]
    # output-rs<seed> and .done markers are NeMo-Skills' own; a lone output.jsonl (OpenHands
    # writes one too) must hold swe-bench-metrics
    return any(
        "-rs" in n or f"{n}.done" in names or METRICS_KEY in Probe(directory / n).first_keys()
        for n in outputs
    )


@register(
    InputFormat.NEMO_SKILLS,
    order=20,
    claims=lambda p: (
        _is_results_dir(p)
        or (not p.is_dir and p.suffix == ".jsonl" and METRICS_KEY in p.first_keys())
    ),
    shape="NeMo-Skills swe-bench results: output[-rs<seed>].jsonl (swe-bench-metrics), or "
    "the ns eval --output_dir / its eval-results/swe-bench (one run per seed)",
)
def read_nemo_skills(probe: Probe, universe: DatasetUniverse) -> list[SweRun]:
    """A NeMo-Skills output file (one run) or results directory (one run per seed file)."""
    if not probe.is_dir:
        return [output_run(probe.path, universe)]
    directory = _results_dir(probe.path)
    files = _seed_files(directory)
    if not files:
        raise SweError(f"{directory}: no finished NeMo-Skills output file")
    return [output_run(p, universe) for p in files]
