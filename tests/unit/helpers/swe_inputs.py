"""Build SWE-bench harness outputs for tests with the real swebench 5.0.2 code.

Per-instance ``report.json`` files come from swebench's own grader
(``make_test_spec`` + ``get_eval_report``, via :func:`.swe_logs.write_instance_logs`)
run on ``test_output.txt`` logs written in each repository's test-runner format
for the real FAIL_TO_PASS / PASS_TO_PASS tests of the Verified dataset. Final
reports come from swebench's ``make_run_report`` (no Docker client). Only the
choice of which instance resolves is ours; the grading and the report layout
are swebench's.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rlgate.swe.harness import load_instances

from . import REPO_ROOT
from .swe_logs import write_final_report, write_instance_logs

DATASET = Path(
    os.environ.get("RLGATE_SWE_DATASET", REPO_ROOT.parent / "shared/swebench/SWE-bench_Verified")
)


def _gym_data(package: str, *parts: str) -> Path:
    """A data file shipped in the installed nemo-gym 0.7.0 wheel."""
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations, f"{package} is not installed"
    return Path(spec.submodule_search_locations[0], *parts)


# Real Gym rollouts (swe_agents/opencode on SWE-bench Verified ids) and a
# swebench resources-server file whose ids are not Verified ones.
GYM_EXAMPLE_ROLLOUTS = _gym_data("responses_api_agents", "swe_agents/data/example_opecode.jsonl")
GYM_NON_VERIFIED_ROLLOUTS = _gym_data("resources_servers", "swebench/data/example_rollouts.jsonl")

# A real Gym input row of the swe_agents agent (its example data), the template of
# write_gym_input's rows.
GYM_EXAMPLE_INPUT = _gym_data("responses_api_agents", "swe_agents/data/example.jsonl")


def write_gym_input(path: Path, ids: Sequence[str]) -> Path:
    """``--gym-input`` rows for ``ids``: the real example row, its instance id replaced where
    the row carries it (top level and ``responses_create_params.metadata``)."""
    template = json.loads(GYM_EXAMPLE_INPUT.read_text(encoding="utf-8").splitlines()[0])
    with path.open("w", encoding="utf-8") as fh:
        for iid in ids:
            row = json.loads(json.dumps(template))
            row["instance_id"] = iid
            row["responses_create_params"]["metadata"]["instance_id"] = iid
            fh.write(json.dumps(row) + "\n")
    return path


# What one instance of a synthetic run does (the harness decides the rest).
RESOLVED = "resolved"
UNRESOLVED = "unresolved"
EMPTY_PATCH = "empty_patch"
PATCH_FAILED = "patch_failed"
HARNESS_ERROR = "error"  # no report.json, unclassified
DOCKER_ERROR = "docker_error"  # no report.json, swebench classifies container_unavailable
MISSING = "missing"  # no prediction at all

PATCH = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"


@functools.cache
def verified_rows() -> tuple[dict, ...]:
    if not (DATASET / "test.parquet").is_file():
        raise FileNotFoundError(
            f"SWE-bench Verified v5 parquet not found at {DATASET}/test.parquet; "
            "set RLGATE_SWE_DATASET to its directory"
        )
    return tuple(load_instances(str(DATASET), "test"))


def rows_by_id() -> dict[str, dict]:
    return {r["instance_id"]: r for r in verified_rows()}


def _line(parser: str, test: str, ok: bool) -> str:
    if parser == "parse_log_django":
        return f"{test} ... {'ok' if ok else 'FAIL'}"
    if parser == "parse_log_sympy":
        return f"{test} {'ok' if ok else 'F'}"
    return f"{'PASSED' if ok else 'FAILED'} {test}"  # the pytest-style parsers


def render_test_output(instance: Mapping, resolved: bool) -> str:
    """A test_output.txt whose F2P tests pass iff ``resolved`` (P2P always pass)."""
    f2p = json.loads(instance["FAIL_TO_PASS"])
    p2p = json.loads(instance["PASS_TO_PASS"])
    parser = instance["log_parser"]
    lines = [_line(parser, t, resolved) for t in f2p] + [_line(parser, t, True) for t in p2p]
    return "\n".join(
        [
            "+ git apply -v /tmp/patch.diff",
            ">>>>> Start Test Output",
            *lines,
            ">>>>> End Test Output",
            f">>>>> Test Exit Code: {0 if resolved else 1}",
            "",
        ]
    )


def write_subset_dataset(path: Path, ids: Sequence[str]) -> Path:
    """A smaller universe: the Verified rows of ``ids`` as a .jsonl dataset."""
    rows = rows_by_id()
    path.write_text("".join(json.dumps(rows[i]) + "\n" for i in ids))
    return path


def regrade_with_labels(run: HarnessRun, iid: str, fail_to_pass: list[str]) -> None:
    """Re-grade one instance as if the dataset revision had other FAIL_TO_PASS labels."""
    row = dict(rows_by_id()[iid])
    row["FAIL_TO_PASS"] = json.dumps(fail_to_pass)
    pred = json.loads(
        next(line for line in run.predictions.read_text().splitlines() if iid in line)
    )
    write_instance_logs(run.root, run.log_dir.name, pred, row, render_test_output(row, True))


@dataclass(frozen=True)
class HarnessRun:
    root: Path
    final_report: Path
    log_dir: Path  # logs/run_evaluation/<run_id>
    predictions: Path


def write_harness_run(
    root: Path,
    run_id: str,
    outcomes: Mapping[str, str],
    *,
    model: str = "org/model",
    dataset_ids: Sequence[str] | None = None,
) -> HarnessRun:
    """Lay out what ``run_evaluation`` leaves behind for ``outcomes`` (id -> kind).

    ``dataset_ids`` is the harness's ``--instance_ids`` filter (default: all of Verified).
    """
    rows = rows_by_id()
    root.mkdir(parents=True, exist_ok=True)
    preds = {
        iid: {
            "instance_id": iid,
            "model_name_or_path": model,
            "model_patch": "" if kind == EMPTY_PATCH else PATCH,
        }
        for iid, kind in outcomes.items()
        if kind != MISSING
    }
    model_dir = root / "logs/run_evaluation" / run_id / model.replace("/", "__")
    for iid, kind in outcomes.items():
        if kind in (RESOLVED, UNRESOLVED):
            output = render_test_output(rows[iid], kind == RESOLVED)
            write_instance_logs(root, run_id, preds[iid], rows[iid], output)
        elif kind in (PATCH_FAILED, HARNESS_ERROR, DOCKER_ERROR):
            (model_dir / iid).mkdir(parents=True, exist_ok=True)
            (model_dir / iid / "run_instance.log").write_text(_INSTANCE_LOGS[kind].format(iid=iid))
    from swebench.harness.run_evaluation import write_run_metadata

    with contextlib.chdir(root):
        write_run_metadata(run_id, str(DATASET), "test", None)
    (root / "preds.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds.values()))
    dataset = [rows[i] for i in dataset_ids] if dataset_ids else list(verified_rows())
    report = write_final_report(preds, dataset, run_id, root, root)
    return HarnessRun(root, report, root / "logs/run_evaluation" / run_id, root / "preds.jsonl")


_INSTANCE_LOGS = {
    PATCH_FAILED: (
        "Intermediate patch failed to apply, trying next command\n"
        "swebench.harness.utils.EvaluationError: Error in evaluation for {iid}: "
        ">>>>> Patch Apply Failed:\npatch: **** malformed patch at line 3\n"
    ),
    HARNESS_ERROR: (
        "Error in evaluating model for {iid}: container exited with code 137 while copying\n"
        "Traceback (most recent call last):\n  RuntimeError: copy failed\n"
    ),
    DOCKER_ERROR: (
        "Error in evaluating model for {iid}: 500 Server Error for "
        'http+docker://localhost/v1.47/containers/create: Internal Server Error ("Error '
        'response from daemon: failed to create task for container")\n'
    ),
}
