"""Rollout-path bench: record baselines, measure the gate's false alarms and detection.

    python benchmarks/bench_rollout_path.py --record [--rounds 3] [--full] [--tokenizers DIR]
    python benchmarks/bench_rollout_path.py --false-alarms 10 [--inject all]

``--record`` measures every recipe that lists the perf tier (tokenizer available) at the
perf tier's configuration (``rlgate.bench.rollout.TIER_*``): ``--rounds`` rounds of
``TIER_REPEATS`` passes, interleaved across recipes so the samples span changes of machine
load, and writes ``benchmarks/rollout_baselines/<environment key>.json`` (entries of other
recipes or configurations in that file are kept). ``--full`` also records the CLI
configuration (``agent_max_turns`` turns, 1k/4k/16k-token parser outputs) and prints its
report: the numbers in docs/rollout-path.md.

``--false-alarms K`` takes K fresh tier measurements per recipe (``TIER_REPEATS`` passes
each, as ``pytest -m perf`` does) and compares each with the stored baseline: every FAIL
is a false alarm. ``--inject`` then repeats that with real slowdowns wrapped around the
real code, and counts how often the gate catches them:

* ``encode_x2``: every tokenization runs twice (an extra full pass, like NeMo RL's splice);
* ``encode_x1.5``: every tokenization also tokenizes half the text again;
* ``stream_full_decode``: streaming detokenization re-decodes the whole output each token
  (the naive detokenizer: quadratic);
* ``gym_x2``: Gym converts the whole history twice per call.

Prints tables; asserts nothing. Set ``HF_HUB_OFFLINE=1`` here (no hub).
"""

from __future__ import annotations

import argparse
import logging
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlgate.bench.gate import (
    BaselineEntry,
    Verdict,
    compare_metrics,
    environment,
    environment_key,
    load_baseline,
    write_baseline,
)
from rlgate.bench.report import bench_summary, render_bench
from rlgate.bench.rollout import (
    TIER_REPEATS,
    BenchInputs,
    bench_config,
    bench_metrics,
    collect_bench,
    gym_pass,
    parse_pass,
    prepare_bench,
    prompt_pass,
    run_rollout_bench,
    tier_config,
    tokenizer_unavailable,
    warm_up,
)
from rlgate.recipe.load import load_recipe, recipe_files, recipe_tiers
from rlgate.serving.setup import serving_setup

REPO = Path(__file__).resolve().parents[1]
BASELINES = REPO / "benchmarks" / "rollout_baselines"


def perf_recipes(tokenizers: str | None) -> list[Path]:
    out = []
    for path in recipe_files(REPO / "recipes"):
        if "perf" not in recipe_tiers(path):
            continue
        reason = tokenizer_unavailable(load_recipe(path), tokenizers)
        if reason:
            print(f"skip {path.stem}: {reason}")
            continue
        out.append(path)
    return out


def tier_samples(inputs: BenchInputs, repeats: int = TIER_REPEATS) -> dict[str, tuple[float, ...]]:
    prompts = [prompt_pass(inputs) for _ in range(repeats)]
    gyms = [gym_pass(inputs) for _ in range(repeats)]
    parses = [parse_pass(inputs) for _ in range(repeats)]
    return bench_metrics(collect_bench(inputs, prompts, gyms, parses))


def prepared(paths: list[Path], tokenizers: str | None) -> dict[Path, BenchInputs]:
    out = {}
    for path in paths:
        recipe = load_recipe(path)
        inputs = prepare_bench(serving_setup(recipe, tokenizers), tier_config(recipe))
        warm_up(inputs)
        out[path] = inputs
    return out


def merged_entries(path: Path, new: list[BaselineEntry]) -> list[BaselineEntry]:
    if not path.is_file():
        return new
    replaced = {(e.recipe, str(e.config)) for e in new}
    old = [e for e in load_baseline(path).entries if (e.recipe, str(e.config)) not in replaced]
    return old + new


def record(paths: list[Path], tokenizers: str | None, rounds: int, full: bool) -> None:
    env = environment()
    inputs = prepared(paths, tokenizers)
    pooled: dict[Path, dict[str, list[float]]] = {p: {} for p in paths}
    for r in range(rounds):
        for path, inp in inputs.items():
            for name, values in tier_samples(inp).items():
                pooled[path].setdefault(name, []).extend(values)
            print(f"round {r + 1}/{rounds}: {path.stem}")
    entries = [
        BaselineEntry(
            p.stem, inputs[p].config.as_dict(), {k: tuple(v) for k, v in pooled[p].items()}
        )
        for p in paths
    ]
    if full:
        for path in paths:
            recipe = load_recipe(path)
            inp = prepare_bench(serving_setup(recipe, tokenizers), bench_config(recipe))
            summary = bench_summary(run_rollout_bench(inp, repeats=3))
            print(render_bench(summary), "\n")
            metrics = {k: tuple(v) for k, v in summary["metrics"].items()}
            entries.append(BaselineEntry(path.stem, inp.config.as_dict(), metrics))
    out = BASELINES / f"{environment_key(env)}.json"
    write_baseline(out, env, merged_entries(out, entries))
    print(f"wrote {out}")


# --- injected regressions (wrapped around the real code) ------------------------------------


def _encode_twice(inputs: BenchInputs) -> Callable[[], None]:
    ctx, original = inputs.ctx, inputs.ctx.encode
    ctx.encode = lambda text: (original(text), original(text))[1]
    return lambda: setattr(ctx, "encode", original)


def _encode_half_again(inputs: BenchInputs) -> Callable[[], None]:
    ctx, original = inputs.ctx, inputs.ctx.encode
    ctx.encode = lambda text: (original(text[: len(text) // 2]), original(text))[1]
    return lambda: setattr(ctx, "encode", original)


def _stream_full_decode(inputs: BenchInputs) -> Callable[[], None]:
    parsers = inputs.ctx.parsers
    original = parsers.parse_streaming

    def naive(token_ids: Any, tools: Any = None, prompt_token_ids: Any = None) -> Any:
        ids = list(token_ids)
        for i in range(len(ids)):  # what a detokenizer without offsets does per token
            parsers.tokenizer.decode(ids[: i + 1])
        return original(token_ids, tools, prompt_token_ids)

    parsers.parse_streaming = naive
    return lambda: setattr(parsers, "parse_streaming", original)


def _gym_twice(inputs: BenchInputs) -> Callable[[], None]:
    gym = inputs.gym
    original = gym.vllm_messages
    gym.vllm_messages = lambda items, tools: (original(items, tools), original(items, tools))[1]
    return lambda: setattr(gym, "vllm_messages", original)


INJECTIONS: dict[str, Callable[[BenchInputs], Callable[[], None]]] = {
    "encode_x2": _encode_twice,
    "encode_x1.5": _encode_half_again,
    "stream_full_decode": _stream_full_decode,
    "gym_x2": _gym_twice,
}


def evaluate(
    inputs: dict[Path, BenchInputs], trials: int, inject: str | None
) -> tuple[Counter[str], Counter[str], int]:
    env = environment()
    baseline = load_baseline(BASELINES / f"{environment_key(env)}.json")
    baseline.require_environment(env)
    fails: Counter[str] = Counter()
    any_fail: Counter[str] = Counter()
    for path, inp in inputs.items():
        entry = baseline.entry(path.stem, inp.config.as_dict())
        if entry is None:
            print(f"no baseline entry for {path.stem}")
            continue
        restore = INJECTIONS[inject](inp) if inject else None
        try:
            for _ in range(trials):
                verdicts = compare_metrics(tier_samples(inp), entry.metrics)
                failed = [v.metric for v in verdicts if v.verdict is Verdict.FAIL]
                fails.update(failed)
                any_fail[path.stem] += bool(failed)
        finally:
            if restore:
                restore()
    return fails, any_fail, trials


def report(title: str, fails: Counter[str], any_fail: Counter[str], trials: int, n: int) -> None:
    print(f"\n== {title}: {trials} trials x {n} recipes")
    for recipe, count in sorted(any_fail.items()):
        print(f"  {recipe[:70]:70s} runs with >=1 FAIL: {count}/{trials}")
    for metric, count in sorted(fails.items()):
        print(f"  {metric:45s} FAIL {count}/{trials * n}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizers", default=os.environ.get("RLGATE_TOKENIZERS"))
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--full", action="store_true", help="also record the CLI config")
    parser.add_argument("--false-alarms", type=int, default=0, metavar="K")
    parser.add_argument("--inject", choices=[*INJECTIONS, "all"])
    parser.add_argument("--recipe", action="append", default=[], help="restrict (file stem)")
    args = parser.parse_args()
    logging.getLogger("vllm").setLevel(logging.CRITICAL)
    paths = perf_recipes(args.tokenizers)
    if args.recipe:
        paths = [p for p in paths if p.stem in args.recipe]
    if args.record:
        record(paths, args.tokenizers, args.rounds, args.full)
    if args.false_alarms:
        inputs = prepared(paths, args.tokenizers)
        fails, any_fail, trials = evaluate(inputs, args.false_alarms, None)
        report("no change (false alarms)", fails, any_fail, trials, len(inputs))
        names = list(INJECTIONS) if args.inject == "all" else [args.inject] if args.inject else []
        for name in names:
            fails, any_fail, trials = evaluate(inputs, max(3, args.false_alarms // 2), name)
            report(f"injected {name} (detection)", fails, any_fail, trials, len(inputs))


if __name__ == "__main__":
    main()
