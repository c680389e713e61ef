"""NeMo RL's config key schema (generated from its source) and the key check against it.

``data/nemo_rl_schema.json`` is produced by ``tools/gen_nemo_rl_schema.py`` from a NeMo
RL checkout (commit recorded in the file): every key its TypedDict/pydantic schemas
declare, every key its published GRPO configs use, which subtrees are open
(``dict[str, Any]``, kwargs passed through), and which keys nothing in NeMo RL reads.
NeMo RL itself validates in lax mode and keeps unknown keys silently, so a typo
there is a silent no-op; here it is an error with a did-you-mean.

Path syntax in the schema: dotted components, ``*`` matches one component, ``[]``
marks list elements.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from rlgate.findings import Finding, Severity

__all__ = ["KeySchema", "check_keys", "load_schema"]


@dataclass(frozen=True)
class KeySchema:
    """The parsed schema file."""

    keys: Mapping[str, Mapping[str, Any]]
    open_prefixes: tuple[str, ...]
    gym_prefixes: tuple[str, ...]
    commit: str
    wildcards: tuple[tuple[str, Mapping[str, Any]], ...] = ()

    def lookup(self, path: str) -> Mapping[str, Any] | None:
        """Schema entry for ``path`` (exact first, then ``*`` wildcards)."""
        if path in self.keys:
            return self.keys[path]
        for pattern, entry in self.wildcards:
            if _match(pattern, path):
                return entry
        return None

    def is_open(self, path: str) -> bool:
        """True when ``path`` lies strictly inside a subtree where any key is allowed."""
        return _under(path, self.open_prefixes)

    def is_gym(self, path: str) -> bool:
        """True for keys handed to NeMo Gym (validated against Gym's own models)."""
        return _under(path, self.gym_prefixes) and self.lookup(path) is None

    def children(self, parent: str) -> list[str]:
        """Known leaf names directly under ``parent``."""
        depth = parent.count(".") + 1 if parent else 0
        out = set()
        for key in self.keys:
            parts = key.split(".")
            if len(parts) == depth + 1 and (not parent or _match(".".join(parts[:-1]), parent)):
                out.add(parts[-1])
        return sorted(out)


def _match(pattern: str, path: str) -> bool:
    pat, parts = pattern.split("."), path.split(".")
    return len(pat) == len(parts) and all(p in ("*", q) for p, q in zip(pat, parts, strict=True))


def _under(path: str, prefixes: tuple[str, ...]) -> bool:
    parts = path.replace("[]", "").split(".")
    for prefix in prefixes:
        pre = prefix.replace("[]", "").split(".")
        if len(parts) > len(pre) and all(p in ("*", q) for p, q in zip(pre, parts, strict=False)):
            return True
    return False


@cache
def load_schema() -> KeySchema:
    """Load the schema shipped with rlgate."""
    text = resources.files("rlgate").joinpath("data/nemo_rl_schema.json").read_text("utf-8")
    doc = json.loads(text)
    return KeySchema(
        keys=doc["keys"],
        open_prefixes=tuple(doc["open"]),
        gym_prefixes=tuple(doc["gym"]),
        commit=doc["source"]["commit"],
        wildcards=tuple((k, v) for k, v in doc["keys"].items() if "*" in k),
    )


def _walk(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, Mapping):
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            yield path, value
    elif isinstance(node, list):
        for item in node:
            if isinstance(item, Mapping):
                yield from _walk(item, f"{prefix}[]")


def _suggest(schema: KeySchema, path: str) -> str:
    parent, _, leaf = path.rpartition(".")
    siblings = schema.children(parent.replace("[]", "")) if parent else schema.children("")
    close = difflib.get_close_matches(leaf, siblings, n=2, cutoff=0.7)
    if close:
        return (
            " did you mean "
            + " or ".join(f"{parent + '.' if parent else ''}{c}" for c in close)
            + "?"
        )
    # A key put at the wrong level: same leaf name elsewhere.
    elsewhere = sorted(k for k in schema.keys if k.endswith(f".{leaf}"))[:4]
    if elsewhere:
        return " (a key with this name exists at " + ", ".join(elsewhere) + ")"
    return ""


def check_keys(config: Mapping[str, Any], schema: KeySchema | None = None) -> list[Finding]:
    """Unknown keys (errors, with did-you-mean) and keys NeMo RL never reads (warnings)."""
    schema = schema or load_schema()
    findings: list[Finding] = []
    stack = list(_walk(config))
    while stack:
        path, value = stack.pop(0)
        if schema.is_open(path) or schema.is_gym(path):
            continue
        entry = schema.lookup(path)
        if entry is None:
            findings.append(
                Finding(
                    "unknown-key",
                    Severity.ERROR,
                    path,
                    f"NeMo RL (schema @ {schema.commit[:9]}) has no key {path!r}; it would be "
                    f"kept silently and never used.{_suggest(schema, path)}",
                )
            )
            continue
        if entry.get("read") is False:
            evidence = entry.get("evidence", "nothing in nemo_rl reads it")
            findings.append(
                Finding(
                    "unread-key",
                    Severity.WARNING,
                    path,
                    f"NeMo RL accepts {path!r} but never reads it ({evidence}); setting it "
                    "has no effect",
                )
            )
        stack.extend(_walk(value, path))
    return findings
