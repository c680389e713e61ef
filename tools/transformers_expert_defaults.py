"""Write rlgate's table of the experts transformers' config classes give a model by default.

vLLM reads a model's experts from the config object transformers builds
(``vllm/transformers_utils/model_arch_config_convertor.py::get_num_experts`` on the
``PretrainedConfig``), and that object holds its class's defaults for the keys the
``config.json`` leaves out: a ``qwen3_moe`` file without ``num_experts`` is 128 experts, not
a dense model. ``recipe check`` reads the ``config.json`` as plain JSON (no transformers, no
remote code), so this tool instantiates every config class of the installed transformers once
(``CONFIG_MAPPING[model_type]()``, offline) and writes, per model type, the default number of
routed experts (``EXPERT_KEYS``, the text config's when nested), into
``src/rlgate/data/transformers_expert_defaults.json``: ``moe`` (model type -> experts) and
``dense`` (model types whose defaults hold no expert). A type in neither is unknown.

    HF_HUB_OFFLINE=1 python tools/transformers_expert_defaults.py           # rewrite the table
    HF_HUB_OFFLINE=1 python tools/transformers_expert_defaults.py --check   # exit 1 if it differs
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from importlib.metadata import version
from pathlib import Path
from typing import Any

TABLE = Path(__file__).resolve().parents[1] / "src/rlgate/data/transformers_expert_defaults.json"
EXPERT_KEYS = ("num_experts", "moe_num_experts", "n_routed_experts", "num_local_experts")
_NESTED = ("text_config", "llm_config", "language_config")


def default_experts(model_type: str) -> int | None:
    """The experts of ``model_type``'s default config (0: none), None: it does not build here."""
    from transformers import CONFIG_MAPPING

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cfg = CONFIG_MAPPING[model_type]()
    except Exception:  # a config that needs arguments, a sub-model from the hub
        return None
    parts = [cfg, *(getattr(cfg, a) for a in _NESTED if not isinstance(getattr(cfg, a, {}), dict))]
    for part in parts:
        for key in EXPERT_KEYS:
            value = getattr(part, key, None)
            if isinstance(value, list):
                value = value[0] if value else None
            if type(value) is int and value > 0:
                return value
    return 0


def table() -> dict[str, Any]:
    """The table for the installed transformers."""
    from transformers import CONFIG_MAPPING

    found = {t: default_experts(t) for t in sorted(CONFIG_MAPPING.keys())}
    return {
        "transformers": version("transformers"),
        "moe": {t: n for t, n in found.items() if n},
        "dense": [t for t, n in found.items() if n == 0],
    }


def main(argv: list[str] | None = None) -> int:
    """Rewrite the table, or (``--check``) compare it with the installed transformers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the table differs")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    doc = table()
    if args.check:
        same = json.loads(TABLE.read_text(encoding="utf-8")) == doc
        print("the table is" + ("" if same else " not") + f" transformers {doc['transformers']}'s")
        return 0 if same else 1
    TABLE.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{TABLE}: {len(doc['moe'])} MoE and {len(doc['dense'])} dense model types")
    return 0


if __name__ == "__main__":
    sys.exit(main())
