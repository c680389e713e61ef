"""Extract NeMo-Skills' ``ns eval`` command line and its SWE-bench Hydra keys from its source.

``ns eval`` is a typer command (``nemo_skills/pipeline/eval.py``, ``def eval(...)``, each
parameter a ``typer.Option``); ``nemo_skills/pipeline/cli.py`` sets
``typer.main.get_command_name = lambda name: name``, so an option keeps its underscores
(``--output_dir``), and a bool option is ``--name/--no-name``. The ``++key=value`` arguments go
to the generation module, for swe-bench ``nemo_skills/inference/eval/swebench.py``, whose
Hydra config is the dataclass ``SweBenchGenerationConfig`` (``inference`` is
``SweBenchInferenceConfig``). NeMo-Skills' dependencies (nemo_run, litellm, ...) are not
installed here, so the source is read with ``ast``, not imported.

    python tools/nemo_skills_cli.py --git /path/to/Skills/.git --commit <sha> \
        --out tests/unit/data/nemo_skills_cli.json
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
from pathlib import Path

EVAL = "nemo_skills/pipeline/eval.py"
SWEBENCH = "nemo_skills/inference/eval/swebench.py"


def _show(git: Path, commit: str, path: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(git), "show", f"{commit}:{path}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def _is_bool(annotation: ast.expr | None) -> bool:
    return isinstance(annotation, ast.Name) and annotation.id == "bool"


def eval_options(source: str) -> dict[str, dict[str, bool]]:
    """``{option: {required, flag}}`` of ``def eval`` (typer.Option parameters, ctx excluded)."""
    tree = ast.parse(source)
    func = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "eval")
    args = func.args.args
    defaults = dict(
        zip(
            [a.arg for a in args[len(args) - len(func.args.defaults) :]],
            func.args.defaults,
            strict=True,
        )
    )
    options = {}
    for arg in args:
        default = defaults.get(arg.arg)
        if not (isinstance(default, ast.Call) and getattr(default.func, "attr", "") == "Option"):
            continue
        hidden = any(
            k.arg == "hidden" and getattr(k.value, "value", False) for k in default.keywords
        )
        first = default.args[0] if default.args else None
        required = isinstance(first, ast.Constant) and first.value is Ellipsis
        if not hidden:
            options[arg.arg] = {"required": required, "flag": _is_bool(arg.annotation)}
    return options


def dataclass_fields(source: str, name: str) -> list[str]:
    """The annotated fields of the dataclass ``name``."""
    tree = ast.parse(source)
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name)
    return [
        s.target.id
        for s in cls.body
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--git", type=Path, required=True, help="NeMo-Skills git directory")
    parser.add_argument("--commit", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    swebench = _show(args.git, args.commit, SWEBENCH)
    doc = {
        "source": {
            "repository": "NVIDIA-NeMo/Skills",
            "commit": args.commit,
            "paths": [EVAL, SWEBENCH],
        },
        "ns_eval_options": eval_options(_show(args.git, args.commit, EVAL)),
        "swebench_generation_keys": dataclass_fields(swebench, "SweBenchGenerationConfig"),
        "swebench_inference_keys": dataclass_fields(swebench, "SweBenchInferenceConfig"),
        "agent_frameworks": ["swe_agent", "openhands"],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
