"""NeMo Gym rollout JSONL (``ng_collect_rollouts`` output): per-rollout summaries and bounds.

Each line is one rollout: ``{"responses_create_params", "response", "reward", ...}`` where
``response`` is an OpenAI Responses object (validated with nemo-gym's own
``nemo_gym.openai_utils.NeMoGymResponse``). Per rollout we derive:

* ``turns`` — model calls: output items carrying non-empty ``generation_token_ids`` when
  present (NeMo Gym puts them on the last item of each call), else runs of consecutive
  model-produced items (reasoning / assistant message / function_call) between tool outputs;
* ``function_calls`` and ``failed_calls`` — a call fails when its ``arguments`` are not a
  JSON object, its ``name`` is not one of the response's tools, it never got an output
  (except in the final turn), or its output is an error: ``status`` incomplete/failed, a
  JSON object with a truthy ``error``, ``status`` error/failed or ``success: false``, or
  text matching one of ``error_patterns`` (regexes searched from the start of the output);
* unparsed tool-call markup in text and malformed reasoning tags, with NeMo RL's rules
  (``_detect_invalid_tool_call_and_malformed_thinking``): a tool-call pattern in message or
  reasoning text is an unexecuted call; any thinking tag in message text, or a tag
  repeated inside one reasoning summary, is malformed;
* the final turn: ``truncated`` (response ``status: incomplete`` / ``incomplete_details``, or
  an incomplete last message), ``empty`` (no message text and no call: reasoning alone is
  not an answer), ``none`` (no model output at all);
* the reward.

Invariants: a line that is not UTF-8 or not a JSON object is a MetricsError naming file
and line (only a torn last line, with no line break after it, is dropped, with a warning
that reaches the check-run result); a row whose ``response`` fails nemo-gym's model is kept
with ``schema_error`` set and counted by the ``rollouts:invalid_rate`` check; ids, names and
types of any other JSON type than string are treated as absent, never crash; a non-finite
reward makes ``rollouts:reward_mean_min`` FAIL naming the line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

from rlgate.core.errors import MetricsError
from rlgate.core.io import json_number

__all__ = [
    "DEFAULT_ERROR_PATTERNS",
    "DEFAULT_THINKING_TAGS",
    "DEFAULT_TOOL_CALL_PATTERNS",
    "ROLLOUT_CHECKS",
    "FinalTurn",
    "RolloutPatterns",
    "RolloutReport",
    "RolloutSummary",
    "load_rollouts",
    "summarize_rollout",
]

_MODEL_ITEMS = {"reasoning", "function_call"}


_FAILED_STATUS = {"incomplete", "failed"}

# NeMo RL's defaults (nemo_rl/environments/nemo_gym.py DEFAULT_INVALID_TOOL_CALL_PATTERNS,
# DEFAULT_THINKING_TAGS): tool-call markup left in text means the parser did not run.
DEFAULT_TOOL_CALL_PATTERNS = ("<tool_call>", "</tool_call>", "<function_call>", "</function_call>")
DEFAULT_THINKING_TAGS = ("<think>", "</think>")
DEFAULT_ERROR_PATTERNS = (r"^\s*(?:Error|ERROR)\b",)


@dataclass(frozen=True, slots=True)
class RolloutPatterns:
    """How rollout text is read: tool-call markup, thinking tags, error-output regexes.

    The recipe's ``rlgate.convergence.rollouts`` block sets them (the rollouts check kind,
    :mod:`rlgate.checks.kinds.rollouts`, hands them to the reader).
    """

    tool_call_patterns: tuple[str, ...] = DEFAULT_TOOL_CALL_PATTERNS
    thinking_tags: tuple[str, ...] = DEFAULT_THINKING_TAGS
    error_patterns: tuple[str, ...] = DEFAULT_ERROR_PATTERNS


# spec field -> (what is measured, comparison): shares are of rollouts, rates of calls
ROLLOUT_CHECKS: dict[str, str] = {
    "invalid_rate": "share of rows whose response fails NeMoGymResponse validation",
    "max_turns_share": "share of rollouts with turns >= agent_max_turns",
    "failed_call_rate": "failed function calls / function calls",
    "unparsed_tool_call_rate": "share of rollouts with tool-call markup left in text",
    "malformed_reasoning_rate": "share of rollouts with malformed reasoning tags",
    "empty_final_rate": "share of rollouts whose final turn is empty",
    "truncated_final_rate": "share of rollouts whose final turn is truncated",
    "reward_mean_min": "mean reward",
}


class FinalTurn(Enum):
    """How a rollout's last model turn ended."""

    OK = "ok"
    EMPTY = "empty"
    TRUNCATED = "truncated"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class RolloutSummary:
    """What one rollout did."""

    line: int
    reward: float | None
    turns: int
    function_calls: int
    failed_calls: int
    failure_reasons: tuple[str, ...]
    unparsed_tool_calls: int
    malformed_reasoning: int
    final_turn: FinalTurn
    schema_error: str | None = None
    task_index: int | None = None


@dataclass(frozen=True, slots=True)
class RolloutReport:
    """All rollouts of one JSONL file."""

    path: Path
    rollouts: tuple[RolloutSummary, ...]
    warnings: tuple[str, ...] = ()

    def summary(self) -> dict[str, Any]:
        """Distribution summary for reports (reward, turns, failure counts)."""
        given = np.array([r.reward for r in self.rollouts if r.reward is not None], float)
        rewards = given[np.isfinite(given)]  # a non-finite reward fails reward_mean_min
        turns = np.array([r.turns for r in self.rollouts], float)
        finals = {k.value: sum(r.final_turn is k for r in self.rollouts) for k in FinalTurn}
        return {
            "rollouts": len(self.rollouts),
            "reward": {
                "n": int(rewards.size),
                "non_finite": int(given.size - rewards.size),
                "mean": float(rewards.mean()) if rewards.size else None,
                "min": float(rewards.min()) if rewards.size else None,
                "max": float(rewards.max()) if rewards.size else None,
                "histogram": np.histogram(rewards, bins=10, range=(0, 1))[0].tolist()
                if rewards.size
                else [],
            },
            "turns": {"mean": float(turns.mean()), "max": float(turns.max())} if turns.size else {},
            "function_calls": sum(r.function_calls for r in self.rollouts),
            "failed_calls": sum(r.failed_calls for r in self.rollouts),
            "final_turn": finals,
            "schema_errors": sum(r.schema_error is not None for r in self.rollouts),
        }


def _text_parts(item: Mapping[str, Any], key: str) -> list[str]:
    parts = item.get(key)
    if isinstance(parts, str):
        return [parts]
    if not isinstance(parts, list):
        return []
    return [p["text"] for p in parts if isinstance(p, Mapping) and isinstance(p.get("text"), str)]


def _str(value: Any) -> str | None:
    """``value`` if it is a string, else None (ids, names and types from untrusted JSON)."""
    return value if isinstance(value, str) else None


def _is_error_output(item: Mapping[str, Any], patterns: Sequence[re.Pattern[str]]) -> bool:
    if _str(item.get("status")) in _FAILED_STATUS:
        return True
    output = item.get("output")
    text = output if isinstance(output, str) else "\n".join(_text_parts(item, "output"))
    try:
        parsed = json.loads(text)
    except (ValueError, TypeError, RecursionError):
        parsed = None
    if isinstance(parsed, Mapping) and (
        parsed.get("error")
        or parsed.get("status") in ("error", "failed")
        or parsed.get("success") is False
    ):
        return True
    return any(p.search(text) for p in patterns)


def _call_failure(item: Mapping[str, Any], tools: set[str]) -> str | None:
    args = item.get("arguments")
    try:
        parsed = json.loads(args) if isinstance(args, str) and args.strip() else {}
    except (ValueError, RecursionError):
        return "bad_arguments"
    if not isinstance(parsed, Mapping):
        return "bad_arguments"
    if tools and _str(item.get("name")) not in tools:
        return "unknown_tool"
    return None


@dataclass
class _Turns:
    segments: list[list[Mapping[str, Any]]]
    token_turns: int

    @classmethod
    def split(cls, output: Sequence[Any]) -> _Turns:
        segments: list[list[Mapping[str, Any]]] = []
        current: list[Mapping[str, Any]] = []
        token_turns = 0
        for item in output:
            if not isinstance(item, Mapping):
                continue
            if item.get("generation_token_ids"):
                token_turns += 1
            is_model = _str(item.get("type")) in _MODEL_ITEMS or (
                item.get("type") == "message" and item.get("role", "assistant") == "assistant"
            )
            if is_model:
                current.append(item)
            elif current:
                segments.append(current)
                current = []
        if current:
            segments.append(current)
        return cls(segments, token_turns)


def _final_turn(response: Mapping[str, Any], turns: _Turns) -> FinalTurn:
    if response.get("status") == "incomplete" or response.get("incomplete_details"):
        return FinalTurn.TRUNCATED
    if not turns.segments:
        return FinalTurn.NONE
    last = turns.segments[-1]
    if any(i.get("type") == "message" and i.get("status") == "incomplete" for i in last):
        return FinalTurn.TRUNCATED
    has_call = any(i.get("type") == "function_call" for i in last)
    # reasoning alone is not an answer (NeMo RL's empty_final_answer penalty has the same view)
    has_text = any(
        t.strip() for i in last if i.get("type") == "message" for t in _text_parts(i, "content")
    )
    return FinalTurn.OK if has_call or has_text else FinalTurn.EMPTY


def summarize_rollout(row: Mapping[str, Any], line: int, spec: RolloutPatterns) -> RolloutSummary:
    """Summarise one rollout row (see the module docstring for the definitions)."""
    response = row.get("response")
    schema_error = _validate(response)
    response = response if isinstance(response, Mapping) else {}
    output = response.get("output") if isinstance(response.get("output"), list) else []
    listed = response.get("tools")
    listed = listed if isinstance(listed, list) else []
    tools = {name for t in listed if isinstance(t, Mapping) and (name := _str(t.get("name")))}
    patterns = [re.compile(p) for p in spec.error_patterns]
    turns = _Turns.split(output)
    outputs = {
        _str(i.get("call_id")): i
        for i in output
        if isinstance(i, Mapping) and i.get("type") == "function_call_output"
    }
    final_ids = {_str(i.get("call_id")) for i in (turns.segments[-1] if turns.segments else [])}
    calls, reasons, unparsed, malformed = 0, [], 0, 0
    for item in (i for seg in turns.segments for i in seg):
        kind = item.get("type")
        if kind == "function_call":
            calls += 1
            reason = _call_failure(item, tools)
            call_id = _str(item.get("call_id"))
            out = outputs.get(call_id)
            if reason is None and out is None and call_id not in final_ids:
                reason = "no_output"
            if reason is None and out is not None and _is_error_output(out, patterns):
                reason = "error_output"
            if reason:
                reasons.append(reason)
            continue
        texts = _text_parts(item, "summary" if kind == "reasoning" else "content")
        if any(p in t for t in texts for p in spec.tool_call_patterns):
            unparsed += 1
        if kind == "reasoning":
            malformed += any(t.count(tag) > 1 for t in texts for tag in spec.thinking_tags)
        else:
            malformed += any(tag in t for t in texts for tag in spec.thinking_tags)
    task = row.get("_ng_task_index")
    return RolloutSummary(
        line=line,
        reward=json_number(row.get("reward")),
        turns=turns.token_turns or len(turns.segments),
        function_calls=calls,
        failed_calls=len(reasons),
        failure_reasons=tuple(reasons),
        unparsed_tool_calls=unparsed,
        malformed_reasoning=malformed,
        final_turn=_final_turn(response, turns),
        schema_error=schema_error,
        task_index=task if isinstance(task, int) and not isinstance(task, bool) else None,
    )


def _validate(response: Any) -> str | None:
    if not isinstance(response, Mapping):
        return f"response is {type(response).__name__}, not an object"
    from nemo_gym.openai_utils import NeMoGymResponse  # heavy import, only when rollouts are given
    from pydantic import ValidationError

    try:
        NeMoGymResponse.model_validate(response)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{exc.error_count()} schema error(s), first at response.{where}: {first['msg']}"
    except RecursionError:
        return "response nested too deeply to validate"
    return None


def load_rollouts(path: str | Path, spec: RolloutPatterns | None = None) -> RolloutReport:
    """Read and summarise a rollout JSONL file (one JSON object per line).

    A crashed writer can leave one torn last line, without a line break after it: that
    line is dropped with a warning that travels to the check-run result. Any other line
    that is not UTF-8, not JSON or not an object is a MetricsError naming file and line.
    """
    spec = spec or RolloutPatterns()
    file = Path(path)
    if not file.is_file():
        kind = "is a directory, not a file" if file.is_dir() else "not found"
        raise MetricsError(f"rollouts file {kind}: {file}")
    rows, warnings = [], []
    with file.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            torn = not raw.endswith(b"\n")  # only the last line can lack its line break
            body = raw.rstrip(b"\r\n")
            if not body.strip():
                continue
            try:
                row = json.loads(body.decode("utf-8"))
            except UnicodeDecodeError as exc:
                if torn:
                    warnings.append(f"{file}:{lineno}: truncated last line dropped (torn write)")
                    continue
                raise MetricsError(
                    f"{file}:{lineno}: not UTF-8 text (byte {exc.start} of the line: {exc.reason})",
                    hint="a rollout JSONL is UTF-8 JSON, one object per line",
                ) from exc
            except json.JSONDecodeError as exc:
                if torn:
                    warnings.append(
                        f"{file}:{lineno}: truncated last line dropped (no line break after "
                        f"it: the writer stopped mid-line; {exc.msg})"
                    )
                    continue
                raise MetricsError(
                    f"{file}:{lineno}: not valid JSON ({exc.msg})",
                    hint="a rollout JSONL has one JSON object per line; only a torn last line "
                    "(no line break after it) is tolerated",
                ) from exc
            except RecursionError:
                raise MetricsError(f"{file}:{lineno}: JSON nested too deeply") from None
            if not isinstance(row, Mapping):
                raise MetricsError(
                    f"{file}:{lineno}: expected a JSON object, got {type(row).__name__}"
                )
            rows.append(summarize_rollout(row, lineno, spec))
    if not rows:
        raise MetricsError(f"{file}: no rollouts", hint="is this ng_collect_rollouts output?")
    return RolloutReport(file, tuple(rows), tuple(warnings))
