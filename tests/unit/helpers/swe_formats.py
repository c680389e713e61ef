"""Write one set of per-instance SWE outcomes in every results format rlgate reads.

Each writer lays the files out as its tool does (the module and function it follows are
named in each docstring; ``tests/unit/test_swe_formats.py`` checks the written shape against
the tool's real sample or source), and grades with swebench 5.0.2's own code where the tool
runs the harness: resolved/unresolved entries are ``get_eval_report``'s, final reports
``make_run_report``'s (via :mod:`.swe_inputs`). Only the choice of outcome per instance is
ours.

The outcome kinds every format can express:
``resolved``, ``unresolved``, ``empty_patch`` (the model produced no patch) and ``infra``
(the environment failed the instance: an agent crash, a container that did not start, a
timeout, an evaluation that left no report).
"""

from __future__ import annotations

import functools
import json
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from . import swe_inputs as si
from .swe_logs import grade_test_output

RESOLVED, UNRESOLVED, EMPTY_PATCH, INFRA = "resolved", "unresolved", "empty_patch", "infra"
KINDS = (RESOLVED, UNRESOLVED, EMPTY_PATCH, INFRA)
MODEL = "hosted_vllm/org/model"  # as NeMo-Skills names SWE-agent's model (swebench.py)
PATCH = si.PATCH

Outcomes = Mapping[str, str]


@functools.cache
def graded_entry(iid: str, resolved: bool) -> dict[str, Any]:
    """``report.json[iid]`` as swebench's grader writes it for a patch that (not) resolves."""
    row = si.rows_by_id()[iid]
    pred = {"instance_id": iid, "model_name_or_path": MODEL, "model_patch": PATCH}
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "test_output.txt"
        log.write_text(si.render_test_output(row, resolved), encoding="utf-8")
        return grade_test_output(row, pred, log)[iid]


# --- NeMo-Skills ---------------------------------------------------------------------------

#: What prepare.py adds to every SWE-bench row (nemo_skills/dataset/swe-bench/prepare.py).
NS_CONTAINER = "/sif/swebench_sweb.eval.x86_64.{instance_id}.sif"
NS_DATASET_NAME = "princeton-nlp/SWE-bench_Verified"
#: The prepared row's SWE-bench fields (prepare.py keeps the HF row as is).
NS_ROW_FIELDS = (
    "repo",
    "instance_id",
    "base_commit",
    "patch",
    "test_patch",
    "problem_statement",
    "hints_text",
    "created_at",
    "version",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "environment_setup_commit",
    "difficulty",
)


def nemo_skills_metrics(iid: str, kind: str) -> dict[str, Any]:
    """``swe-bench-metrics`` as SweBenchGenerationTask.process_single_datapoint writes it."""
    if kind in (RESOLVED, UNRESOLVED):
        return graded_entry(iid, kind == RESOLVED)  # the harness's report.json entry
    if kind == EMPTY_PATCH:  # `if not has_patch:` (model_patch is None)
        return {"resolved": False, "patch_exists": False, "patch_successfully_applied": False}
    # the evaluation command failed max_retries times: `except ValueError:`
    return {"resolved": False, "patch_exists": True, "patch_successfully_applied": False}


def nemo_skills_row(iid: str, kind: str, position: int) -> dict[str, Any]:
    """One line of output-rs<seed>.jsonl (process_single_datapoint + dump_outputs)."""
    source = si.rows_by_id()[iid]
    row = {k: source[k] for k in NS_ROW_FIELDS if k in source}
    row |= {
        "container_formatter": NS_CONTAINER,
        "container_id": position,
        "dataset_name": NS_DATASET_NAME,
        "split": "test",
    }
    output = {
        "swe-bench-metrics": nemo_skills_metrics(iid, kind),
        "swe-bench-outputs": {
            "model_name_or_path": MODEL,
            "instance_id": iid,
            "model_patch": None if kind == EMPTY_PATCH else PATCH,
        },
        "generation": "",
        "generation_start_time": 1760000000.0 + position,
        "generation_end_time": 1760000600.0 + position,
        "generation_time": 600.0,
    }
    for key in output:  # dump_outputs: the generation wins over the input row's fields
        row.pop(key, None)
    return output | row


def write_nemo_skills(out: Path, seeds: Sequence[Outcomes]) -> Path:
    """``<out>/eval-results/swe-bench/output-rs<seed>.jsonl`` (+ ``.done``) per seed."""
    results = out / "eval-results" / "swe-bench"
    results.mkdir(parents=True, exist_ok=True)
    for seed, outcomes in enumerate(seeds):
        path = results / f"output-rs{seed}.jsonl"
        lines = [
            json.dumps(nemo_skills_row(iid, kind, n))
            for n, (iid, kind) in enumerate(outcomes.items())
        ]
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        (results / f"output-rs{seed}.jsonl.done").touch()
    return out


# --- the swebench harness (final report) -----------------------------------------------------

_HARNESS_KIND = {
    RESOLVED: si.RESOLVED,
    UNRESOLVED: si.UNRESOLVED,
    EMPTY_PATCH: si.EMPTY_PATCH,
    INFRA: si.DOCKER_ERROR,  # swebench classifies it container_unavailable (infra_failure_ids)
}


def write_final_report(root: Path, outcomes: Outcomes, run_id: str = "run") -> Path:
    """What ``run_evaluation`` leaves (report next to logs/): the final report's path."""
    kinds = {i: _HARNESS_KIND[k] for i, k in outcomes.items()}
    return si.write_harness_run(root, run_id, kinds, dataset_ids=list(outcomes)).final_report


def _copy_tree(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src, dest, dirs_exist_ok=True)


def write_yaml(path: Path, doc: Any) -> None:
    path.write_text(yaml.dump(doc, indent=4), encoding="utf-8")


def _harness_kinds(outcomes: Outcomes, *, infra: str) -> dict[str, str]:
    """What the harness sees of each outcome (``infra``: what an infra instance left it)."""
    return {i: infra if k == INFRA else _HARNESS_KIND[k] for i, k in outcomes.items()}


def _graded(directory: Path, kinds: Mapping[str, str], run_id: str) -> si.HarnessRun:
    """Grade the predictions with the harness (``--report_dir DIR``, run from ``DIR``)."""
    run = si.write_harness_run(directory, run_id, kinds, model=MODEL, dataset_ids=list(kinds))
    (directory / "preds.jsonl").unlink()  # the helper's own copy of the predictions
    return run


# --- mini-swe-agent ------------------------------------------------------------------------

MINI_STATUS = {RESOLVED: "Submitted", UNRESOLVED: "Submitted", EMPTY_PATCH: "LimitsExceeded",
               INFRA: "RuntimeError"}  # fmt: skip


def mini_trajectory(iid: str, status: str, submission: str) -> dict[str, Any]:
    """``<id>.traj.json`` as DefaultAgent.serialize + process_instance's extra info write it."""
    return {
        "info": {
            "model_stats": {"instance_cost": 0.0, "api_calls": 12},
            "config": {
                "agent": {"step_limit": 250},
                "agent_type": "minisweagent.agents.default.DefaultAgent",
            },
            "mini_version": "2.4.6",
            "exit_status": status,
            "submission": submission,
        },
        "messages": [{"role": "system", "content": "..."}, {"role": "exit", "content": status}],
        "trajectory_format": "mini-swe-agent-1.1",
        "instance_id": iid,
    }


def write_mini_swe_agent(out: Path, outcomes: Outcomes, run_id: str = "mini") -> Path:
    """``mini-extra swebench -o OUT`` (process_instance), then the harness on preds.json."""
    out.mkdir(parents=True, exist_ok=True)
    preds, by_status = {}, {}
    for iid, kind in outcomes.items():
        patch = PATCH if kind in (RESOLVED, UNRESOLVED) else ""
        status = MINI_STATUS[kind]
        if kind != INFRA:  # the environment raised before an agent existed: no trajectory
            traj = out / iid / f"{iid}.traj.json"
            traj.parent.mkdir(parents=True, exist_ok=True)
            traj.write_text(json.dumps(mini_trajectory(iid, status, patch), indent=2))
        preds[iid] = {"model_name_or_path": MODEL, "instance_id": iid, "model_patch": patch}
        by_status.setdefault(status, []).append(iid)
    (out / "preds.json").write_text(json.dumps(preds, indent=2))
    write_yaml(out / "exit_statuses_1760000000.5.yaml", {"instances_by_exit_status": by_status})
    (out / "minisweagent.log").write_text("")
    _graded(out, _harness_kinds(outcomes, infra=si.EMPTY_PATCH), run_id)
    return out


# --- SWE-agent -------------------------------------------------------------------------------

SWE_AGENT_STATUS = {RESOLVED: "submitted", UNRESOLVED: "submitted", EMPTY_PATCH: "exit_cost",
                    INFRA: "Uncaught RuntimeError"}  # fmt: skip


def swe_agent_trajectory(status: str, submission: str | None) -> dict[str, Any]:
    """``<id>.traj`` as DefaultAgent.get_trajectory_data writes it (info is what rlgate reads)."""
    return {
        "trajectory": [],
        "history": [],
        "info": {
            "swe_agent_hash": "3ea751c", "swe_agent_version": "1.1.0", "swe_rex_version": "1.4.0",
            "swe_rex_hash": "unavailable", "submission": submission, "exit_status": status,
            "model_stats": {"instance_cost": 0.0, "tokens_sent": 40858, "tokens_received": 1775,
                            "api_calls": 9},
        },
        "replay_config": "{}",
        "environment": "main",
    }  # fmt: skip


def write_swe_agent(out: Path, outcomes: Outcomes, run_id: str = "sweagent") -> Path:
    """``sweagent run-batch --output_dir OUT`` (RunBatch), then the harness on preds.json."""
    out.mkdir(parents=True, exist_ok=True)
    preds, by_status = {}, {}
    for iid, kind in outcomes.items():
        status = SWE_AGENT_STATUS[kind]
        by_status.setdefault(status, []).append(iid)
        if kind == INFRA:  # run_instance caught the exception: no .traj, no .pred
            continue
        submission = PATCH if kind in (RESOLVED, UNRESOLVED) else None
        (out / iid).mkdir(parents=True, exist_ok=True)
        (out / iid / f"{iid}.traj").write_text(json.dumps(swe_agent_trajectory(status, submission)))
        pred = {"model_name_or_path": MODEL, "instance_id": iid, "model_patch": submission}
        (out / iid / f"{iid}.pred").write_text(json.dumps(pred))
        # merge_predictions: model_patch becomes "" when it is None
        preds[iid] = pred | {"model_patch": submission if submission is not None else ""}
    (out / "preds.json").write_text(json.dumps(preds, indent=4))
    write_yaml(
        out / "run_batch_exit_statuses.yaml",
        {"instances_by_exit_status": by_status, "total_cost": 0},
    )
    (out / "run_batch.config.yaml").write_text(yaml.dump("{}"))
    _graded(out, _harness_kinds(outcomes, infra=si.MISSING), run_id)  # no prediction
    return out


# --- OpenHands -----------------------------------------------------------------------------

OH_MAX_ITERATIONS = (
    "RuntimeError: Agent reached maximum iteration. Current iteration: 100, max iteration: 100"
)


def openhands_row(iid: str, kind: str) -> dict[str, Any]:
    """One ``output.jsonl`` line (run_infer.process_instance / _process_instance_wrapper)."""
    if kind == INFRA:  # EvalTimeoutException: EvalOutput(instance_id, test_result={}, error=...)
        return {"instance_id": iid, "test_result": {}, "instruction": None, "metadata": None,
                "history": None, "metrics": None, "error": "Timeout after 3600 seconds",
                "instance": None}  # fmt: skip
    patch = PATCH if kind in (RESOLVED, UNRESOLVED) else ""
    return {
        "instance_id": iid,
        "test_result": {"git_patch": patch},
        "instruction": "<uploaded_files>\n/workspace/...",
        "metadata": {"agent_class": "CodeActAgent", "llm_config": {"model": MODEL},
                     "max_iterations": 100, "eval_output_dir": "evaluation/evaluation_outputs"},
        "history": [],
        "metrics": {"accumulated_cost": 0.0},
        "error": OH_MAX_ITERATIONS if kind == EMPTY_PATCH else None,
        "instance": {"instance_id": iid, "repo": si.rows_by_id()[iid]["repo"]},
    }  # fmt: skip


def write_openhands(out: Path, outcomes: Outcomes, run_id: str = "20260101_000000") -> Path:
    """run_infer.sh's output.jsonl, then eval_infer.sh: report.json and eval_outputs/."""
    out.mkdir(parents=True, exist_ok=True)
    rows = [openhands_row(i, k) for i, k in outcomes.items()]
    (out / "output.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    preds = {
        r["instance_id"]: {
            "instance_id": r["instance_id"],
            "model_name_or_path": MODEL,
            "model_patch": r["test_result"].get("git_patch", ""),
        }
        for r in rows
    }
    (out / "output.swebench.jsonl").write_text(
        "".join(json.dumps(p) + "\n" for p in preds.values())
    )
    kinds = _harness_kinds(outcomes, infra=si.EMPTY_PATCH)  # convert: no git_patch -> ''
    with tempfile.TemporaryDirectory() as tmp:
        run = si.write_harness_run(Path(tmp), run_id, kinds, model=MODEL, dataset_ids=list(kinds))
        shutil.move(str(run.final_report), out / "report.json")  # mv $REPORT_PATH report.json
        model_dir = run.log_dir / MODEL.replace("/", "__")
        if model_dir.is_dir():
            shutil.move(str(model_dir), out / "eval_outputs")  # mv logs/.../$MODEL eval_outputs
    (out / "run_id.txt").write_text(f"RUN_ID: {run_id}\n")
    return out


# --- NeMo Gym --------------------------------------------------------------------------------


@functools.cache
def _gym_template() -> str:
    """The first real rollout shipped in nemo-gym 0.7.0 (swe_agents, OpenHands)."""
    return si.GYM_EXAMPLE_ROLLOUTS.read_text().splitlines()[0]


def gym_row(iid: str, kind: str, task: int, repeat: int) -> dict[str, Any]:
    """A swe_agents verify response for ``iid``, from the real row (SWEBenchWrapper.run)."""
    row = json.loads(_gym_template())
    source = si.rows_by_id()[iid]
    resolved = kind == RESOLVED
    row["response"] = {"id": f"resp_{task}_{repeat}", "output": []}
    row |= {
        "reward": 1.0 if resolved else 0.0,
        "resolved": resolved,
        "patch_exists": kind != EMPTY_PATCH,
        "model_patch": "" if kind == EMPTY_PATCH else PATCH,
        "agent_timed_out": kind == INFRA,  # the agent hit swebench_agent_timeout
        "agent_error_kind": None,
        "_ng_task_index": task,
        "_ng_rollout_index": repeat,
    }
    row["instance_config"]["mask_sample"] = kind == INFRA  # Gym masks a timed-out agent
    row["instance_config"]["problem_info"]["instance_id"] = iid
    meta = row["responses_create_params"]["metadata"]
    meta["instance_id"] = iid
    meta["instance_dict"] = json.dumps(
        {k: source[k] for k in ("instance_id", "repo", "FAIL_TO_PASS", "PASS_TO_PASS")}
    )
    return row


def write_gym_rollouts(path: Path, repeats: Sequence[Outcomes]) -> Path:
    """``ng_collect_rollouts`` output: one row per (task, repeat), repeats numbered."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for repeat, outcomes in enumerate(repeats):
            for task, (iid, kind) in enumerate(outcomes.items()):
                fh.write(json.dumps(gym_row(iid, kind, task, repeat)) + "\n")
    return path


# --- every format ---------------------------------------------------------------------------

#: format -> writer of one run (a seed) of outcomes into a path it returns
WRITERS = {
    "final_report": lambda root, outcomes: write_final_report(root, outcomes),
    "gym_rollouts": lambda root, outcomes: write_gym_rollouts(root / "rollouts.jsonl", [outcomes]),
    "nemo_skills": lambda root, outcomes: write_nemo_skills(root, [outcomes]),
    "mini_swe_agent": write_mini_swe_agent,
    "swe_agent": write_swe_agent,
    "openhands": write_openhands,
}
