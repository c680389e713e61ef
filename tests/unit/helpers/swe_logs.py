"""Harness logs and final reports in swebench's real format, written without Docker.

Test scaffolding (moved out of ``rlgate.swe.harness``): it produces the inputs the SWE
readers and the harness wrapper consume, with swebench 5.0.2's own code --
``make_test_spec`` + ``get_eval_report`` grade a saved ``test_output.txt`` exactly as
``run_instance`` does, and ``make_run_report`` writes the final report.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rlgate.swe.harness import LOG_TEST_OUTPUT
from rlgate.swe.readers import LOG_REPORT, RUN_EVALUATION_LOG_DIR


def grade_test_output(
    instance: Mapping[str, Any], prediction: Mapping[str, Any], test_output: Path
) -> dict[str, Any]:
    """Grade a saved ``test_output.txt`` with swebench's own grader (no Docker)."""
    from swebench.harness.grading import get_eval_report
    from swebench.harness.utils import make_test_spec

    spec = make_test_spec(dict(instance))
    return get_eval_report(spec, dict(prediction), str(test_output), include_tests_status=True)


def write_instance_logs(
    root: Path,
    run_id: str,
    prediction: Mapping[str, Any],
    instance: Mapping[str, Any],
    test_output: str,
) -> Path:
    """Write ``test_output.txt`` and the graded ``report.json`` as ``run_instance`` does."""
    model = str(prediction["model_name_or_path"]).replace("/", "__")
    inst_dir = root / RUN_EVALUATION_LOG_DIR / run_id / model / str(prediction["instance_id"])
    inst_dir.mkdir(parents=True, exist_ok=True)
    (inst_dir / LOG_TEST_OUTPUT).write_text(test_output, encoding="utf-8")
    report = grade_test_output(instance, prediction, inst_dir / LOG_TEST_OUTPUT)
    (inst_dir / LOG_REPORT).write_text(json.dumps(report, indent=4), encoding="utf-8")
    return inst_dir


def write_final_report(
    predictions: Mapping[str, Mapping[str, Any]],
    instances: Sequence[Mapping[str, Any]],
    run_id: str,
    root: Path,
    report_dir: Path,
) -> Path:
    """Write the harness final report with swebench's ``make_run_report`` (no Docker client)."""
    from swebench.harness.reporting import make_run_report

    with contextlib.chdir(root), contextlib.redirect_stdout(io.StringIO()):  # it prints
        path = make_run_report(
            {k: dict(v) for k, v in predictions.items()},
            [dict(i) for i in instances],
            run_id,
            client=None,
            report_dir=str(report_dir.resolve()),
        )
    return Path(path)
