"""The demo's SWE-bench data: the instance set, and generated per-instance maps (DEMO data).

Shared by :mod:`rlgate.demo.build` and :mod:`rlgate.demo.history` (the package's modules
form a tree: this one imports neither).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from rlgate.swe.records import VERIFIED_IDS_FILE

__all__ = ["BUNDLED_INSTANCES", "DEMO_RECIPE", "SWE_SEEDS", "find_swe_dataset", "write_demo_swe"]

BUNDLED_INSTANCES = VERIFIED_IDS_FILE
DEMO_RECIPE = "grpo-qwen3.5-35ba3b-2n8g-megatron-async1off-gym-swe-demo"
SWE_SEEDS = 4
# Demo SWE model: per-instance solve probabilities ~ Beta(0.12, 0.18) (mean 0.40; a rerun of
# the same model disagrees on ~11% of instances, swebench.md §3.3's E[p(1-p)] ~ 0.055), and
# training "learns" 12% of the instances (p -> p + 0.75 (1 - p)): about +5 pp.
_BETA, _LEARNED, _LIFT = (0.12, 0.18), 0.12, 0.75


def find_swe_dataset() -> Path:
    """The local Verified dataset ``RLGATE_SWE_DATASET`` names, else the bundled id list."""
    env = os.environ.get("RLGATE_SWE_DATASET")
    if env:
        candidate = Path(env)
        if (candidate / "test.parquet").is_file() or candidate.is_file():
            return candidate
    return BUNDLED_INSTANCES


def write_demo_swe(
    root: Path, ids: list[str], *, seeds: int = SWE_SEEDS, seed: int = 0
) -> tuple[list[Path], list[Path]]:
    """Per-instance maps for ``seeds`` runs of a base and a trained model (DEMO data)."""
    rng = np.random.default_rng(seed)
    n = len(ids)
    base = rng.beta(*_BETA, n)
    trained = np.where(rng.random(n) < _LEARNED, base + _LIFT * (1 - base), base)
    arms: dict[str, list[Path]] = {"before": [], "after": []}
    for arm, prob in (("before", base), ("after", trained)):
        for k in range(seeds):
            resolved = rng.random(n) < prob
            no_patch = ~resolved & (rng.random(n) < (0.03 if arm == "before" else 0.015))
            doc = {
                iid: {"resolved": bool(r), "patch_exists": not bool(e)}
                for iid, r, e in zip(ids, resolved, no_patch, strict=True)
            }
            if arm == "before" and k == 0:  # a few Docker faults, under the 5% bound
                for iid in ids[7::167]:
                    doc[iid] = {
                        "resolved": False,
                        "patch_exists": True,
                        "infra_failure": True,
                        "infra_failure_reason": "container_unavailable",
                    }
            path = root / f"{arm}_seed{k}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(doc, indent=0) + "\n", encoding="utf-8")
            arms[arm].append(path)
    return arms["before"], arms["after"]
