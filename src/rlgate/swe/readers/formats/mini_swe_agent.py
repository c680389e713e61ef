"""mini-swe-agent ``mini-extra swebench`` output, graded by the swebench harness.

Read from SWE-agent/mini-swe-agent at commit a83fcae82d2a08f0ee0c688f9d137b3566c097f8:

* ``src/minisweagent/run/benchmarks/swebench.py``: ``process_instance`` writes
  ``<output>/preds.json`` (``update_preds_file``: ``{instance_id: {model_name_or_path,
  instance_id, model_patch}}``) and ``<output>/<id>/<id>.traj.json`` (``agent.save``, whose
  ``info.exit_status`` is the agent's exit status, or the exception's class name when the
  instance raised; no trajectory at all when the environment could not be created, e.g. an
  image pull that failed, while ``preds.json`` still gets an empty patch); ``main`` writes
  ``exit_statuses_<time>.yaml`` per invocation (``RunBatchProgressManager``,
  ``run/benchmarks/utils/batch_progress.py``: ``{instances_by_exit_status: {status: [ids]}}``,
  ``Uncaught <Exception>`` for a worker that raised).
* the agent's own statuses (``agents/default.py``, ``environments/*.py``): ``Submitted``,
  ``LimitsExceeded`` (step or cost limit), ``RepeatedFormatError``, ``TimeExceeded``
  (wall-clock limit); ``models/litellm_model.py`` aborts on ``ContextWindowExceededError``.
* resolution: mini-swe-agent's docs (``docs/usage/swebench.md``) grade ``preds.json`` with
  the swebench harness (``python -m swebench.harness.run_evaluation``) or sb-cli; rlgate
  reads the harness final report in the output directory.

Model failures (the patch, possibly empty, is graded as is): ``Submitted``,
``LimitsExceeded``, ``RepeatedFormatError``, ``FormatError``, ``ContextWindowExceededError``
(Gym's ``max_iteration`` / ``context_window``). Everything else is infrastructure: a timeout
(``TimeExceeded``, as Gym's ``agent_timed_out``), an exception's name (the environment, the
model server or the agent crashed), ``Uncaught …``.
"""

from __future__ import annotations

import re
from pathlib import Path

from rlgate.core.errors import SweError
from rlgate.swe.readers._agent_output import (
    AgentStatus,
    graded_run,
    merge_statuses,
    predictions,
    statuses_from_yaml,
)
from rlgate.swe.readers.registry import Probe, register
from rlgate.swe.records import DatasetUniverse, InputFormat, SweRun, _read_json

MODEL_STATUSES = frozenset(
    {
        "Submitted",
        "LimitsExceeded",
        "RepeatedFormatError",
        "FormatError",
        "ContextWindowExceededError",
    }
)
PREDS = "preds.json"
TRAJECTORY = "{iid}.traj.json"
_STATUS_FILE = re.compile(r"exit_statuses_(?P<time>\d+(?:\.\d+)?)\.yaml")


def is_infra(status: str) -> bool:
    """True when mini-swe-agent's exit status is the environment's failure, not the model's."""
    return status not in MODEL_STATUSES


def _trajectory_statuses(directory: Path) -> list[AgentStatus]:
    found = []
    for path in sorted(directory.glob("*/*.traj.json")):
        iid = path.parent.name
        if path.name != TRAJECTORY.format(iid=iid):
            continue
        doc = _read_json(path, "mini-swe-agent trajectory")
        info = doc.get("info") if isinstance(doc, dict) else None
        status = info.get("exit_status") if isinstance(info, dict) else None
        if not isinstance(status, str):
            raise SweError(f"{path}: info.exit_status must be a string, got {status!r:.80}")
        found.append(AgentStatus(iid, status, is_infra(status), str(path)))
    return found


def _yaml_statuses(directory: Path) -> list[AgentStatus]:
    files = [
        (float(m.group("time")), p)
        for p in directory.iterdir()
        if (m := _STATUS_FILE.fullmatch(p.name))
    ]
    layers = [statuses_from_yaml(p, is_infra).values() for _, p in sorted(files)]
    return list(merge_statuses(*layers).values())


def _claims(probe: Probe) -> bool:
    if not probe.is_dir or not (probe.path / PREDS).is_file():
        return False
    return (
        any(_STATUS_FILE.fullmatch(p.name) for p in probe.path.iterdir())
        or (probe.path / "minisweagent.log").is_file()
    )


@register(
    InputFormat.MINI_SWE_AGENT,
    order=30,
    claims=_claims,
    shape="a mini-swe-agent output directory (preds.json, exit_statuses_*.yaml, "
    "<id>/<id>.traj.json) with the swebench harness report of preds.json",
)
def read_mini_swe_agent(probe: Probe, universe: DatasetUniverse) -> list[SweRun]:
    """A ``mini-extra swebench`` output directory and its harness report."""
    directory = probe.path
    # the trajectory is written when the instance ends; the progress report also names the
    # instances that raised before an agent existed (no trajectory)
    statuses = merge_statuses(_yaml_statuses(directory), _trajectory_statuses(directory))
    return [
        graded_run(
            directory,
            universe,
            InputFormat.MINI_SWE_AGENT,
            tool="mini-swe-agent",
            preds=predictions(directory / PREDS),
            predictions_file=PREDS,
            statuses=statuses,
        )
    ]
