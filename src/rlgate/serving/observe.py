"""What the served parsers returned, as an observation (:mod:`rlgate.core.observations`)."""

from __future__ import annotations

from typing import Any

from rlgate.serving.parsers import ParsedOutput

__all__ = ["parsed_observation"]


def parsed_observation(parsed: ParsedOutput) -> dict[str, Any]:
    """``tool_calls`` (name, arguments), ``content`` and ``reasoning_content`` of a parse."""
    return {
        "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in parsed.calls],
        "content": parsed.content,
        "reasoning_content": parsed.reasoning,
    }
