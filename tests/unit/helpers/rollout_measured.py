"""One real rollout-path measurement, for the unit tests of the bench's numbers.

Measured with ``rlgate bench rollout --recipe
recipes/grpo-qwen3.5-35ba3b-4n8g-megatron-ep16tp2cp2-async1off-gym-swe-thinking.yaml
--turns 24 --parser-lengths 256 512 1024 --repeats 3`` (CPU milliseconds per call, medians
of the 3 passes; Qwen3.5 tokenizer, transformers 5.8.1, vLLM 0.25.1 qwen3_coder + qwen3
parsers, nemo-gym 0.7.0; AMD EPYC, shared 2-core CI machine).
"""

from __future__ import annotations

import itertools

from rlgate.bench.parsing import ParseRun
from rlgate.bench.rollout import BenchConfig, ClusterShape, GymRun, PromptRun, RolloutBench
from rlgate.recipe.load import load_recipe

PROMPT_TOKENS = (
    9396, 10000, 10587, 11029, 11640, 12184, 12735, 13322, 14139, 15452, 15814, 16498,
    16627, 16729, 17124, 17789, 18352, 18916, 19496, 20074, 20639, 21171, 21555, 22292,
)  # fmt: skip
RENDER_MS = (
    0.569, 0.722, 0.752, 0.826, 0.808, 0.963, 0.844, 1.093, 0.962, 1.252, 1.217, 1.304,
    1.292, 2.43, 1.417, 1.441, 1.649, 2.17, 1.833, 1.71, 1.959, 1.993, 1.967, 2.109,
)  # fmt: skip
TOKENIZE_MS = (
    16.462, 16.236, 15.83, 18.307, 18.627, 19.782, 22.666, 21.132, 26.164, 30.787, 24.991,
    26.6, 33.075, 30.625, 25.829, 26.385, 27.87, 34.533, 32.263, 32.152, 32.48, 36.651,
    32.716, 35.193,
)  # fmt: skip
INCREMENTAL_MS = (
    17.032, 1.398, 1.243, 0.982, 1.959, 0.886, 0.827, 0.783, 0.613, 0.955, 0.643, 0.699,
    1.034, 0.775, 1.087, 1.403, 1.568, 1.473, 1.356, 1.617, 1.62, 1.434, 1.312, 1.465,
)  # fmt: skip
GYM_MS = (
    0.266, 0.278, 0.334, 0.364, 0.432, 0.439, 0.493, 0.512, 0.575, 0.59, 0.663, 0.688,
    0.732, 0.742, 0.788, 0.85, 0.839, 0.893, 0.867, 0.904, 0.96, 0.996, 0.991,
)  # fmt: skip
PARSER_LENGTHS = (256, 512, 1024)
PARSER_TOKENS = (233, 596, 1003)
STREAMING_US = (137.015, 210.025, 258.674)
ONE_SHOT_US = (15.684, 19.613, 16.593)

RECIPE = "recipes/grpo-qwen3.5-35ba3b-4n8g-megatron-ep16tp2cp2-async1off-gym-swe-thinking.yaml"


def new_tokens() -> tuple[int, ...]:
    """Tokens each call added (the trajectory is token-contiguous for this recipe)."""
    diffs = [b - a for a, b in itertools.pairwise(PROMPT_TOKENS)]
    return (PROMPT_TOKENS[0], *diffs)


def prompt_run(scale: float = 1.0) -> PromptRun:
    """The measured prompt pass (costs multiplied by ``scale``)."""
    return PromptRun(
        PROMPT_TOKENS,
        new_tokens(),
        tuple(v * scale for v in RENDER_MS),
        tuple(v * scale for v in TOKENIZE_MS),
        tuple(v * scale for v in INCREMENTAL_MS),
        (),
    )


def parse_run(scale: float = 1.0) -> ParseRun:
    """The measured parse pass (seconds per output, from the per-token costs)."""
    return ParseRun(
        PARSER_TOKENS,
        tuple(scale * us * n / 1e6 for us, n in zip(STREAMING_US, PARSER_TOKENS, strict=True)),
        tuple(scale * us * n / 1e6 for us, n in zip(ONE_SHOT_US, PARSER_TOKENS, strict=True)),
    )


def measured_bench(*, gym: bool = True, passes: int = 1) -> RolloutBench:
    """A RolloutBench holding the measurement ``passes`` times."""
    config = BenchConfig(24, 100, 65536, PARSER_LENGTHS)
    return RolloutBench(
        recipe=load_recipe(RECIPE).name,
        config=config,
        cluster=ClusterShape(64, 768, 4),
        prompt_tokens=PROMPT_TOKENS,
        generated_tokens=5766,  # measured: tokens the model wrote over the 24 calls
        skipped_steps=0,
        prompt_runs=tuple(prompt_run() for _ in range(passes)),
        gym_runs=tuple(GymRun(GYM_MS) for _ in range(passes)) if gym else (),
        parse_runs=tuple(parse_run() for _ in range(passes)),
    )
