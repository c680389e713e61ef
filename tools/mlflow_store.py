"""Write MLflow runs the way NeMo RL writes them: its own ``MLflowLogger``, real MLflow.

For tests of rlgate's MLflow reader (``rlgate.runs.formats.mlflow``). Runs in an environment
that has MLflow (NeMo RL pins ``mlflow==3.15.1``; rlgate's own pins cannot hold it, see
docs/running-tiers.md), never in rlgate's: ``RLGATE_MLFLOW_PYTHON`` names its interpreter.

NeMo RL's ``MLflowLogger`` (with the helpers it calls: ``flatten_dict``,
``_summarize_list``, ``_merge_generation_logger_workers``) is taken from
``nemo_rl/utils/logger.py`` of a NeMo RL checkout with ``ast`` and executed here against the
real MLflow, so the metric names, steps and values in the store are the ones a NeMo RL run
writes (the rest of that module, which needs torch and Ray, is not loaded). Each run is
given as a ``metrics.json`` (``json_dump_tb_logs.py``'s format: rlgate's
``to_metrics_json``); every step's values are logged as NeMo RL's GRPO loop does, one
``log_metrics(metrics, step, prefix=...)`` call per prefix (``train``, ``timing/train``,
...). ``--nested`` adds, per step, a nested dict and per-worker lists under
``generation_logger_metrics`` (what the async vLLM logger passes), whose MLflow names differ
from TensorBoard's (TensorBoard skips them).

Usage::

    $RLGATE_MLFLOW_PYTHON tools/mlflow_store.py --nemo-rl-dir /tmp/nemo-rl \\
        --tracking-uri sqlite:////tmp/s/mlflow.db --experiment rlgate \\
        --run healthy=healthy.json --run nan_loss=nan.json [--nested]

Prints one line per run: ``<name> <run_id>``.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional

_TAKEN = ("flatten_dict", "_summarize_list", "_merge_generation_logger_workers", "MLflowLogger")


def nemo_rl_mlflow_logger(nemo_rl_dir: Path) -> type:
    """NeMo RL's ``MLflowLogger`` class, from its source, bound to the real ``mlflow``."""
    import mlflow
    import numpy as np

    source = (nemo_rl_dir / "nemo_rl" / "utils" / "logger.py").read_text()
    tree = ast.parse(source)
    nodes = [n for n in tree.body if getattr(n, "name", None) in _TAKEN]
    missing = set(_TAKEN) - {n.name for n in nodes}
    if missing:
        raise SystemExit(f"nemo_rl/utils/logger.py has no {sorted(missing)}")
    namespace: dict[str, Any] = {
        "mlflow": mlflow,
        "np": np,
        "os": os,
        "Any": Any,
        "Optional": Optional,
        "Mapping": Mapping,
        "LoggerInterface": object,  # its abstract base: nothing MLflowLogger calls
        "MLflowConfig": dict,
        "plt": None,
    }
    module = ast.Module(body=nodes, type_ignores=[])
    exec(compile(module, str(nemo_rl_dir / "nemo_rl/utils/logger.py"), "exec"), namespace)
    return namespace["MLflowLogger"]


def by_prefix(doc: Mapping[str, Mapping[str, float]]) -> dict[int, dict[str, dict[str, float]]]:
    """``{step: {prefix: {name: value}}}`` from ``{tag: {step: value}}``."""
    out: dict[int, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for tag, points in doc.items():
        prefix, _, name = tag.rpartition("/")
        for step, value in points.items():
            out[int(step)][prefix][name] = value
    return out


def main(argv: list[str] | None = None) -> int:
    """Write the runs; print ``<name> <run_id>`` per run."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nemo-rl-dir", type=Path, required=True)
    p.add_argument("--tracking-uri", required=True)
    p.add_argument("--experiment", required=True)
    p.add_argument("--run", action="append", required=True, metavar="NAME=METRICS_JSON")
    p.add_argument("--nested", action="store_true", help="also log nested and list metrics")
    p.add_argument("--run-id", help="resume this run (NeMo RL's logger.mlflow.run_id)")
    args = p.parse_args(argv)
    import mlflow

    logger_cls = nemo_rl_mlflow_logger(args.nemo_rl_dir)
    mlflow.set_tracking_uri(args.tracking_uri)
    for spec in args.run:
        name, _, path = spec.partition("=")
        doc = json.loads(Path(path).read_text())
        cfg = {"experiment_name": args.experiment, "run_name": name, "run_id": args.run_id}
        logger = logger_cls(cfg, log_dir=None)
        for step, groups in sorted(by_prefix(doc).items()):
            for prefix, metrics in groups.items():
                logger.log_metrics(metrics, step, prefix=prefix)
            if args.nested:
                extra = {
                    "generation_logger_metrics": {
                        "inflight_batch_sizes": {"0": [4, 6, 8], "1": [5, 7]},
                    },
                    "moe": {"aux_loss": 0.01 * step},
                }
                logger.log_metrics(extra, step, prefix="train")
        print(name, logger.run_id, flush=True)
        mlflow.end_run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
