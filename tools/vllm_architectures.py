"""Write rlgate's table of vLLM's model architectures: pipeline parallelism and multimodality.

``recipe check``'s model rules ``vllm-pp-architecture`` and ``vllm-mm-torch-shm`` need two
facts vLLM's model registry knows of each architecture a ``config.json`` names: whether its
implementation supports pipeline parallelism (``ModelRegistry.is_pp_supported_model``: the
class implements ``SupportsPP``) and whether it is multimodal (``is_multimodal_model``: vLLM
then builds a ``multimodal_config``). ``recipe check`` does not import vLLM (its base
install has none, and loading the model classes takes tens of seconds), so this tool reads
the installed vLLM once and writes ``src/rlgate/data/vllm_architectures.json``.

Each architecture is loaded as the registry loads it (``_BaseRegisteredModel
.load_model_cls``) and inspected with vLLM's own ``supports_pp`` / ``supports_multimodal``
(what ``_ModelInfo.from_model_cls`` records). One whose class cannot be imported here (a
package vLLM leaves optional, a compiled op) is written as ``null``: registered, unknown.

    python tools/vllm_architectures.py            # rewrite the table
    python tools/vllm_architectures.py --check    # exit 1 when it differs from the vLLM here
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

TABLE = Path(__file__).resolve().parents[1] / "src/rlgate/data/vllm_architectures.json"


def architecture(arch: str) -> dict[str, bool] | None:
    """One architecture's facts from the installed vLLM (None: its class does not import)."""
    from vllm.model_executor.models.interfaces import supports_multimodal, supports_pp
    from vllm.model_executor.models.registry import ModelRegistry

    try:
        cls = ModelRegistry.models[arch].load_model_cls()
    except Exception:  # an optional dependency of that one model, a compiled op
        return None
    return {"pp": bool(supports_pp(cls)), "multimodal": bool(supports_multimodal(cls))}


def scan() -> dict[str, Any]:
    """The table of every architecture the installed vLLM registers."""
    from vllm.model_executor.models.registry import ModelRegistry

    archs = {a: architecture(a) for a in sorted(ModelRegistry.get_supported_archs())}
    return {"vllm": version("vllm"), "architectures": archs}


def render(table: dict[str, Any]) -> str:
    """The table as JSON, one architecture a line."""
    lines = [
        f"{json.dumps(a)}: {json.dumps(v, sort_keys=True)}"
        for a, v in table["architectures"].items()
    ]
    body = ",\n  ".join(lines)
    return f'{{"vllm": {json.dumps(table["vllm"])},\n "architectures": {{\n  {body}\n}}}}\n'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    table = scan()
    if args.check:
        old = json.loads(TABLE.read_text())
        if old == table:
            return 0
        was, now = old.get("architectures", {}), table["architectures"]
        for arch in sorted(set(was) | set(now)):
            if was.get(arch, "absent") != now.get(arch, "absent"):
                print(f"{arch}: table {was.get(arch, 'absent')}, vLLM {now.get(arch, 'absent')}")
        print(f"table of vLLM {old.get('vllm')}, installed {table['vllm']}")
        return 1
    TABLE.write_text(render(table))
    print(f"{TABLE}: {len(table['architectures'])} architectures of vLLM {table['vllm']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
