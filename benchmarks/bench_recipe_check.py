"""Benchmark ``rlgate recipe check``: its cache (cold vs warm vs ``import vllm``), and NeMo RL's
published GRPO configs in one call vs one each.

    RLGATE_TOKENIZERS=../shared/tokenizers python benchmarks/bench_recipe_check.py \\
        [--config recipes/X.yaml] [--nemo-rl-dir ~/nemo-rl [--limit N]]

**The cache** (always run, on ``--config``, default one of rlgate's thinking recipes): one
``rlgate recipe check CONFIG`` subprocess with an empty ``--cache-dir`` (cold: vLLM, nemo-gym
and the tokenizer are imported and every check runs), the same again (warm: the vLLM, Gym
and tokenizer checks come from the cache), one with ``--no-cache``, and ``python -c 'import
vllm'``, all in the same run. Prints each wall time and the ratios warm/cold and
warm/``import vllm``, and checks that the three runs write the same JSON verdict.

Selects the published GRPO configs of a NeMo RL checkout the way the pre-commit hook does
(``examples/configs/grpo*.yaml``, ``examples/configs/recipes/llm/grpo-*.yaml``,
``examples/nemo_gym/**`` without the ``distillation_``/``prefetch_`` files) and times, as
subprocesses of the installed CLI (what CI and pre-commit run):

* one ``rlgate recipe check A.yaml B.yaml ...`` call on all of them (vLLM, transformers and
  each tokenizer load once), and
* one ``rlgate recipe check X.yaml`` call per config (every call pays the imports again;
  ``--no-cache``), and
* the one call again with the cache the first one filled (warm).

Prints wall seconds, seconds per config and the ratio, and checks that both ways give each
config the same exit code. Asserts nothing about speed (a mismatched verdict exits 1).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

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


DEFAULT_CONFIG = (
    Path(__file__).resolve().parents[1]
    / "recipes/grpo-qwen3.5-35ba3b-4n8g-megatron-ep16tp2cp2-async1off-gym-swe-thinking.yaml"
)


def run(
    configs: list[Path], tokenizers: str | None, json_out: Path | None, *extra: str
) -> tuple[float, int]:
    """Wall seconds and exit code of one ``rlgate recipe check`` subprocess."""
    cmd = [sys.executable, "-m", "rlgate.cli", "recipe", "check", *map(str, configs), "-q"]
    if tokenizers:
        cmd += ["--tokenizers", tokenizers]
    if json_out:
        cmd += ["--json", str(json_out)]
    cmd += list(extra)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1, 3):
        sys.stderr.write(proc.stderr[-2000:])
    return elapsed, proc.returncode


def _children_cpu() -> float:
    """User + system CPU seconds of every finished subprocess so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _with_cpu(fn: Callable[..., T], *args: Any) -> tuple[T, float]:
    """``fn(*args)`` and the CPU seconds of the subprocesses it ran."""
    before = _children_cpu()
    result = fn(*args)
    return result, _children_cpu() - before


def import_vllm_seconds() -> float:
    """Wall seconds of ``python -c 'import vllm'`` (the baseline the warm run is held to)."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "import vllm"],
        capture_output=True,
        check=True,
        env={**os.environ, "VLLM_CONFIGURE_LOGGING": "0"},
    )
    return time.perf_counter() - start


def bench_cache(config: Path, tokenizers: str | None) -> int:
    """Cold, warm and ``--no-cache`` runs of one config and ``import vllm``, in one run."""
    print(f"cache: {config.name}")
    with tempfile.TemporaryDirectory() as tmp:
        cache = ["--cache-dir", str(Path(tmp) / "cache")]
        outs = {name: Path(tmp) / f"{name}.json" for name in ("cold", "warm", "no-cache")}
        (cold, code), cpu_cold = _with_cpu(run, [config], tokenizers, outs["cold"], *cache)
        (warm, _), cpu_warm = _with_cpu(run, [config], tokenizers, outs["warm"], *cache)
        (uncached, _), cpu_uncached = _with_cpu(
            run, [config], tokenizers, outs["no-cache"], "--no-cache"
        )
        vllm, cpu_vllm = _with_cpu(import_vllm_seconds)
        docs = {name: json.loads(path.read_text()) for name, path in outs.items()}
    print("  (wall seconds; CPU seconds of the subprocess in brackets: on a loaded machine)")
    print(f"  cold:          {cold:8.2f} s  ({cpu_cold:6.2f} s CPU, exit {code})")
    print(f"  warm:          {warm:8.2f} s  ({cpu_warm:6.2f} s CPU)")
    print(f"  --no-cache:    {uncached:8.2f} s  ({cpu_uncached:6.2f} s CPU)")
    print(f"  import vllm:   {vllm:8.2f} s  ({cpu_vllm:6.2f} s CPU)")
    print(f"  warm / cold:        {warm / cold:6.3f}  ({cold / warm:.1f}x faster)")
    print(f"  warm / import vllm: {warm / vllm:6.3f}  (goal: <= 0.5, warm <= 3 s)")
    if not docs["cold"] == docs["warm"] == docs["no-cache"]:
        print("  the JSON verdicts differ between cold, warm and --no-cache")
        return 1
    print("  the same JSON verdict cold, warm and with --no-cache")
    return 0


def main() -> int:
    """Run the benchmarks and print the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="the cache's config")
    parser.add_argument("--nemo-rl-dir", default=os.environ.get("NEMO_RL_DIR"))
    parser.add_argument("--tokenizers", default=os.environ.get("RLGATE_TOKENIZERS"))
    parser.add_argument("--limit", type=int, help="only the first N configs (a quick run)")
    args = parser.parse_args()
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be >= 1")
    status = bench_cache(args.config, args.tokenizers)
    if not args.nemo_rl_dir:
        print("(NEMO_RL_DIR / --nemo-rl-dir not set: NeMo RL's configs not benchmarked)")
        return status
    if not Path(args.nemo_rl_dir).is_dir():
        parser.error("--nemo-rl-dir must be a NeMo RL checkout")
    configs = published_grpo_configs(Path(args.nemo_rl_dir))[: args.limit]
    print(f"{len(configs)} published GRPO configs of {args.nemo_rl_dir}")

    with tempfile.TemporaryDirectory() as tmp:
        report, warm_report = Path(tmp) / "all.json", Path(tmp) / "warm.json"
        cache = ["--cache-dir", str(Path(tmp) / "cache")]
        one_call, code = run(configs, args.tokenizers, report, *cache)  # cold: fills the cache
        warm_call, _ = run(configs, args.tokenizers, warm_report, *cache)
        reports = json.loads(report.read_text())["reports"]
        same = reports == json.loads(warm_report.read_text())["reports"]
    batch_codes = {r["recipe"]: r["exit_code"] for r in reports}
    print(
        f"one call:        {one_call:8.1f} s  ({one_call / len(configs):.2f} s/config), exit {code}"
    )
    print(
        f"one call, warm:  {warm_call:8.1f} s  ({warm_call / len(configs):.2f} s/config), "
        f"{'the same' if same else 'DIFFERENT'} verdicts"
    )
    if not same:
        status = 1

    per_config, mismatches = 0.0, []
    for config in configs:
        elapsed, code = run([config], args.tokenizers, None, "--no-cache")
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
    return status


if __name__ == "__main__":
    sys.exit(main())
