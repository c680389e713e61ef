"""What a functional scenario observed, as one JUnit property, and the difference of two.

A functional testcase that replays the real vLLM parsers or renders a real chat template
records what came back (``tool_calls`` with name and arguments, ``content``,
``reasoning_content``, streaming and non-streaming; a rendered prompt's token ids as a
sha256 prefix and a length, never the ids themselves) as the testcase property
:data:`OBSERVATION_PROPERTY`: canonical compact JSON (sorted keys, ASCII), at most
:data:`MAX_OBSERVATION_CHARS`; a larger one is recorded as its digest only
(``{"digest": ..., "chars": ...}``), so a change still shows, without its content.

:func:`decode_observation` reads one back from an untrusted JUnit: anything that is not a
JSON object within the size and depth bounds is ``None`` with a note. :func:`diff_observations`
lists the leaves that differ (``non_streaming.tool_calls[0].arguments.command: "ls" ->
"ls -la"``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

__all__ = [
    "MAX_OBSERVATION_CHARS",
    "OBSERVATION_PROPERTY",
    "decode_observation",
    "diff_observations",
    "encode_observation",
    "token_digest",
]

OBSERVATION_PROPERTY = "rlgate.observation"
#: An observation's JSON text is at most this long in JUnit (larger: its digest only).
MAX_OBSERVATION_CHARS = 4096
#: Nesting deeper than this is not an observation rlgate writes.
MAX_DEPTH = 12
#: At most this many differences are listed per scenario (the rest counted).
MAX_DIFFS = 20
#: A value shown in a difference is cut to this many characters.
MAX_SHOWN = 160


def _canonical(doc: Any) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def token_digest(ids: Sequence[int]) -> dict[str, Any]:
    """Token ids as ``{"sha256": first 16 hex digits, "len": n}`` (the ids stay out)."""
    text = ",".join(str(int(i)) for i in ids)
    return {"sha256": hashlib.sha256(text.encode()).hexdigest()[:16], "len": len(ids)}


def encode_observation(doc: Mapping[str, Any]) -> str:
    """``doc`` as canonical JSON, or its digest when longer than :data:`MAX_OBSERVATION_CHARS`."""
    text = _canonical(dict(doc))
    if len(text) <= MAX_OBSERVATION_CHARS:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return _canonical({"digest": digest, "chars": len(text)})


def _depth(value: Any, level: int = 0) -> int:
    if level > MAX_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level)
    return level


def decode_observation(text: str | None) -> tuple[dict[str, Any] | None, str]:
    """An observation from a JUnit property: (doc, "") or (None, why it was ignored)."""
    if text is None:
        return None, ""
    if len(text) > 2 * MAX_OBSERVATION_CHARS:
        return None, f"{len(text)} characters, more than {2 * MAX_OBSERVATION_CHARS}"
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return None, "not JSON"
    if not isinstance(doc, dict):
        return None, "not a JSON object"
    if _depth(doc) > MAX_DEPTH:
        return None, f"nested deeper than {MAX_DEPTH}"
    return doc, ""


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _key(key: object) -> str:
    """A key as a path component: plain names as they are, anything else as JSON (one line)."""
    text = str(key)
    return text if _PLAIN_KEY.fullmatch(text) else _canonical(text)


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        for key in sorted(value):
            yield from _leaves(value[key], f"{path}.{_key(key)}" if path else _key(key))
    elif isinstance(value, list) and value:
        for i, item in enumerate(value):
            yield from _leaves(item, f"{path}[{i}]")
    else:
        yield path, value


_ABSENT = object()


def _shown(value: Any) -> str:
    if value is _ABSENT:
        return "(absent)"
    text = _canonical(value)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


def diff_observations(pinned: Mapping[str, Any], candidate: Mapping[str, Any]) -> list[str]:
    """The leaves that differ, ``path: pinned -> candidate`` (at most :data:`MAX_DIFFS`)."""
    before, after = dict(_leaves(dict(pinned))), dict(_leaves(dict(candidate)))
    lines = []
    for path in sorted(set(before) | set(after)):
        b, a = before.get(path, _ABSENT), after.get(path, _ABSENT)
        if b is _ABSENT or a is _ABSENT or _canonical(b) != _canonical(a):
            lines.append(f"{path or '(root)'}: {_shown(b)} -> {_shown(a)}")
    if len(lines) > MAX_DIFFS:
        lines = [*lines[:MAX_DIFFS], f"... and {len(lines) - MAX_DIFFS} more"]
    return lines
