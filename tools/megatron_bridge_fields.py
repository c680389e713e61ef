"""Write the names a Megatron Bridge model provider can have as fields (``model_overrides``).

NeMo RL merges ``policy.megatron_cfg.model_overrides`` into the provider Megatron Bridge
builds for the model (``nemo_rl/models/megatron/setup.py::_merge_model_overrides``): a name
that is not an ``init`` field of that provider dataclass raises ``AttributeError``, and a
provider that is not a dataclass refuses any override (``setup_model_config``). Which
provider class a model gets needs Megatron Bridge itself; but a name that *no* dataclass of
Megatron Bridge or Megatron-core declares is refused for every model. This tool writes that
union, an over-approximation of every provider's fields (a dataclass that is no provider,
``init=False`` fields and ``ClassVar`` s only make it larger), to
``src/rlgate/data/megatron_bridge_fields.json``; rule ``megatron-model-overrides-field``
reads it.

All static (``ast``): every class decorated ``@dataclass`` (or ``@dataclasses.dataclass(...)``)
in Megatron Bridge's ``src/megatron/bridge/`` and Megatron-core's ``megatron/core/``, its
annotated class-level names.

    git -C <Megatron-Bridge mirror> archive <NeMo RL's submodule commit> src | tar -x -C /tmp/mb
    python tools/megatron_bridge_fields.py /tmp/mb --bridge-ref <commit> \\
        --megatron-lm /tmp/megatron-lm [--check]
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from pathlib import Path

TABLE = Path(__file__).resolve().parents[1] / "src/rlgate/data/megatron_bridge_fields.json"


def _is_dataclass(node: ast.ClassDef) -> bool:
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "dataclass":
            return True
    return False


def dataclass_fields(root: Path) -> set[str]:
    """The annotated class-level names of every ``@dataclass`` class under ``root``."""
    names: set[str] = set()
    for path in sorted(root.rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and _is_dataclass(node):
                for stmt in node.body:
                    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                        names.add(stmt.target.id)
    return names


def _head(root: Path) -> str:
    try:
        git = ["git", "-C", str(root), "rev-parse", "HEAD"]
        return subprocess.run(git, capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return ""


def scan(bridge: Path, bridge_ref: str, megatron_lm: Path, lm_ref: str) -> dict[str, object]:
    """The table: the refs it is of and the sorted union of field names."""
    bridge_src, core = bridge / "src/megatron/bridge", megatron_lm / "megatron/core"
    fields = dataclass_fields(bridge_src) | dataclass_fields(core)
    return {
        "sources": {
            "NVIDIA-NeMo/Megatron-Bridge": {"ref": bridge_ref, "scope": "src/megatron/bridge/**"},
            "NVIDIA/Megatron-LM": {"ref": lm_ref, "scope": "megatron/core/**"},
        },
        "fields": sorted(fields),
    }


def render(table: dict[str, object]) -> str:
    """The table as JSON, one field a line."""
    return json.dumps(table, indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("bridge", type=Path, help="a Megatron Bridge checkout (its root)")
    parser.add_argument("--megatron-lm", type=Path, required=True, help="a Megatron-LM checkout")
    parser.add_argument("--bridge-ref", default="", help="its commit (default: git HEAD)")
    parser.add_argument("--megatron-lm-ref", default="", help="its commit (default: git HEAD)")
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    refs = []
    for root, sub, ref, opt in (
        (args.bridge, "src/megatron/bridge", args.bridge_ref, "--bridge-ref"),
        (args.megatron_lm, "megatron/core", args.megatron_lm_ref, "--megatron-lm-ref"),
    ):
        if not (root / sub).is_dir():
            print(f"error: {root}: no {sub}/ (give the checkout's root)", file=sys.stderr)
            return 2
        refs.append(ref or _head(root))
        if not refs[-1]:
            print(f"error: {root}: not a git checkout; pass {opt}", file=sys.stderr)
            return 2
    table = scan(args.bridge, refs[0], args.megatron_lm, refs[1])
    if args.check:
        old = json.loads(TABLE.read_text())
        gone = sorted(set(old["fields"]) - set(table["fields"]))  # type: ignore[arg-type]
        new = sorted(set(table["fields"]) - set(old["fields"]))  # type: ignore[arg-type]
        if not gone and not new:
            return 0
        print(f"fields no longer declared: {gone}\nfields new: {new}")
        return 1
    TABLE.write_text(render(table))
    print(f"{TABLE}: {len(table['fields'])} field names")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())
