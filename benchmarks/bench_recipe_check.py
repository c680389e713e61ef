"""Benchmark ``rlgate recipe check`` on NeMo RL's published GRPO configs: one call vs one each.

    NEMO_RL_DIR=~/nemo-rl RLGATE_TOKENIZERS=../shared/tokenizers \\
        python benchmarks/bench_recipe_check.py [--limit N]

Selects the published GRPO configs of a NeMo RL checkout the way the pre-commit hook does
(``examples/configs/grpo*.yaml``, ``examples/configs/recipes/llm/grpo-*.yaml``,
``examples/nemo_gym/**`` without the ``distillation_``/``prefetch_`` files) and times, as
subprocesses of the installed CLI (what CI and pre-commit run):

* one ``rlgate recipe check A.yaml B.yaml ...`` call on all of them (vLLM, transformers and
  each tokenizer load once), and
* one ``rlgate recipe check X.yaml`` call per config (every call pays the imports again).

Prints wall seconds, seconds per config and the ratio, and checks that both ways give each
config the same exit code. Asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PUBLISHED = (
    "examples/configs/grpo*.yaml",
    "examples/configs/recipes/llm/grpo-*.yaml",
    "examples/nemo_gym/**/*.yaml",
)
NOT_GRPO_PREFIXES = ("distillation_", "prefetch_")


def published_grpo_configs(root: Path) -> list[Path]:
    """The published GRPO configs of a NeMo RL checkout (the pre-commit hook's selection)."""
    files = {p for pattern in PUBLISHED for p in root.glob(pattern) if p.is_file()}
    return sorted(p for p in files if not p.name.startswith(NOT_GRPO_PREFIXES))


def run(configs: list[Path], tokenizers: str | None, json_out: Path | None) -> tuple[float, int]:
    """Wall seconds and exit code of one ``rlgate recipe check`` subprocess."""
    cmd = [sys.executable, "-m", "rlgate.cli", "recipe", "check", *map(str, configs), "-q"]
    if tokenizers:
        cmd += ["--tokenizers", tokenizers]
    if json_out:
        cmd += ["--json", str(json_out)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1, 3):
        sys.stderr.write(proc.stderr[-2000:])
    return elapsed, proc.returncode


def main() -> int:
    """Run the benchmark and print the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nemo-rl-dir", default=os.environ.get("NEMO_RL_DIR"))
    parser.add_argument("--tokenizers", default=os.environ.get("RLGATE_TOKENIZERS"))
    parser.add_argument("--limit", type=int, help="only the first N configs (a quick run)")
    args = parser.parse_args()
    if not args.nemo_rl_dir or not Path(args.nemo_rl_dir).is_dir():
        parser.error("set NEMO_RL_DIR or --nemo-rl-dir to a NeMo RL checkout")
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be >= 1")
    configs = published_grpo_configs(Path(args.nemo_rl_dir))[: args.limit]
    print(f"{len(configs)} published GRPO configs of {args.nemo_rl_dir}")

    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "all.json"
        one_call, code = run(configs, args.tokenizers, report)
        reports = json.loads(report.read_text())["reports"]
    batch_codes = {r["recipe"]: r["exit_code"] for r in reports}
    print(
        f"one call:        {one_call:8.1f} s  ({one_call / len(configs):.2f} s/config), exit {code}"
    )

    per_config, mismatches = 0.0, []
    for config in configs:
        elapsed, code = run([config], args.tokenizers, None)
        per_config += elapsed
        in_batch = batch_codes.get(str(config))
        if code != in_batch:
            mismatches.append(f"{config}: alone {code}, in the batch {in_batch}")
    print(f"one per config:  {per_config:8.1f} s  ({per_config / len(configs):.2f} s/config)")
    print(f"ratio:           {per_config / one_call:8.1f}x faster in one call")
    if mismatches:
        print("exit codes differ between the two ways:\n  " + "\n  ".join(mismatches))
        return 1
    print("same exit code for every config both ways")
    return 0


if __name__ == "__main__":
    sys.exit(main())
