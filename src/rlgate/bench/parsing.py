"""The parsing half of the rollout-path bench: long model outputs, streaming vs one-shot.

A model output of about N tokens is built from the real SWE rollouts nemo-gym ships
(:func:`rlgate.bench.trajectory.load_swe_source`): a quarter reasoning (when the served
template thinks), then one ``write`` tool call whose ``content`` is repository code the
agent read, all written in the served template's own format
(:func:`rlgate.serving.contiguity.model_output`). Its length is bisected to within 1% of N tokens.
:func:`measure_parsing` times vLLM's streaming parse (``parse_delta`` token by token, with
incremental detokenization: :meth:`rlgate.serving.parsers.ServedParsers.parse_streaming`) and the
one-shot parse (``parse``) of each output, in CPU time (:mod:`rlgate.bench.cputime`).

Invariant: an output the served parsers do not recover is an error, never timed (the
bench would otherwise time an error path).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rlgate.bench.cputime import fastest
from rlgate.bench.trajectory import SweSource, round_trips
from rlgate.core.errors import RecipeError
from rlgate.serving.contiguity import Call, LoopContext, Turn, model_output
from rlgate.serving.templates import ThinkingMode

__all__ = ["PARSE_BUDGET_S", "ParseRun", "build_parser_outputs", "measure_parsing"]

PARSE_BUDGET_S = 0.1  # CPU seconds spent re-parsing one short output (fastest run counts)

_LINE_NUMBER = re.compile(r"^\s*\d+: ", re.MULTILINE)


def _corpus(source: SweSource, *, reasoning: bool) -> str:
    if reasoning:
        return "\n\n".join(s.reasoning for s in source.steps if s.reasoning)
    code = [o for s in source.steps for o in s.outputs if "<content>" in o]
    body = "\n".join(_LINE_NUMBER.sub("", o.split("<content>", 1)[1]) for o in code)
    return "\n".join(line.rstrip() for line in body.splitlines())


def _take(text: str, tokens: int, encode: Any) -> str:
    """The longest prefix of ``text`` with at most ``tokens`` tokens (no trailing space)."""
    while len(text) < 8 * tokens:  # the corpus is long; repeat only if a caller asks for more
        text = f"{text}\n{text}"
    lo, hi = 0, 8 * tokens  # bisect on characters: a line of code can hold many tokens
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(encode(text[:mid].rstrip())) <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo].strip()


def build_parser_outputs(
    ctx: LoopContext, source: SweSource, lengths: Sequence[int]
) -> list[tuple[str, tuple[int, ...]]]:
    """Model outputs of about ``lengths`` tokens each, as ``(text, ids)`` without the EOS.

    Each is reasoning (a quarter, when the template thinks) and one ``write`` tool call
    whose ``content`` is real repository code read by the source agent.

    Raises:
        RecipeError: the served parsers do not recover the call (the bench would time an
            error path; the functional tier says why).
    """
    ctx.tools = source.tools
    thinking = ctx.thinking is ThinkingMode.OPEN
    prose, code_text = _corpus(source, reasoning=True), _corpus(source, reasoning=False)
    eos = ctx.tokenizer.eos_token_id
    outputs = []
    for tokens in lengths:
        reasoning = _take(prose, tokens // 4, ctx.encode) if thinking else ""
        code_tokens = tokens - len(ctx.encode(reasoning))
        for _ in range(4):  # converge on the target: template overhead is not known up front
            content = _take(code_text, code_tokens, ctx.encode)
            call = Call("write", {"filePath": "/testbed/src/module.py", "content": content})
            text, ids = model_output(ctx, Turn(reasoning, "", (call,)))
            generated = len(ids) - (1 if ids and ids[-1] == eos else 0)  # the EOS is not parsed
            if abs(generated - tokens) <= max(4, tokens // 100):
                break
            code_tokens += tokens - generated
        parsed = ctx.parsers.parse(text, source.tools, ids)
        if not round_trips(Turn(reasoning, "", (call,)), parsed, ctx.thinking):
            raise RecipeError(
                f"the served parsers do not recover a {len(ids)}-token write call written by "
                "the served template; the parsing bench would time an error path"
            )
        outputs.append((text, tuple(ids[:-1] if ids and ids[-1] == eos else ids)))
    return outputs


@dataclass(frozen=True, slots=True)
class ParseRun:
    """Streaming and one-shot parse times of one pass over the outputs (seconds)."""

    tokens: tuple[int, ...]
    streaming_s: tuple[float, ...]
    one_shot_s: tuple[float, ...]


def measure_parsing(
    ctx: LoopContext,
    outputs: Sequence[tuple[str, Sequence[int]]],
    tools: Sequence[Any],
    *,
    budget_s: float = PARSE_BUDGET_S,
) -> ParseRun:
    """Time vLLM's streaming (token by token) and one-shot parse of each output.

    Short outputs are parsed again until ``budget_s`` CPU seconds are spent (at most 5
    times) and the fastest run counts, as ``timeit`` does; a long output runs once.
    """
    stream, one = [], []
    parsers = ctx.parsers
    for text, ids in outputs:
        streaming = functools.partial(parsers.parse_streaming, ids, tools)
        one_shot = functools.partial(parsers.parse, text, tools, ids)
        stream.append(fastest(streaming, budget_s, 5))
        one.append(fastest(one_shot, budget_s, 5))
    return ParseRun(tuple(len(ids) for _, ids in outputs), tuple(stream), tuple(one))
