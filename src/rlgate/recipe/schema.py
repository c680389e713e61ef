"""NeMo RL's config key schema (generated from its source) and the key and value checks.

``data/nemo_rl_schema.json`` is produced by ``tools/gen_nemo_rl_schema.py`` from a NeMo
RL checkout (commit recorded in the file). It holds:

* every key NeMo RL's TypedDict/pydantic schema classes declare, with the value types of
  their annotations (``int``, ``float|null``, a ``Literal`` as ``enum``) and the bounds
  pydantic enforces (``PositiveInt``, ``Field(gt=...)``) or NeMo RL asserts (cited);
* every key its published GRPO configs set, and every key its code reads
  (``cfg["a"]["b"]``, ``cfg.get("b")``, ``"b" in cfg``) that no class declares;
* ``closed`` subtrees handed whole to a library as ``**kwargs``: their keys are the fields of
  the library class that receives them (``"by": "library"``: Megatron's ``OptimizerConfig``
  and ``SchedulerConfig``, vLLM's ``AsyncEngineArgs``; versions in ``source.libraries``), or,
  where that library could not be read, the keys NeMo RL's published configs set there
  (``"by": "examples"``);
* ``open`` subtrees whose keys are free-form (environment variables, template variables,
  dataset kwargs...), each with its reason in ``open_why``;
* which keys nothing in NeMo RL reads (``read: false`` with the evidence).

:func:`check_keys` reports, as :class:`~rlgate.recipe.findings.Finding`:

* ``unknown-key`` (ERROR): a key the schema does not know, with a did-you-mean. Under a
  subtree closed by a library, the message names the library class. NeMo RL itself keeps
  unknown keys silently (its pydantic models allow extras), so a typo there is a no-op.
* ``unverified-key`` (WARNING): a key under a subtree closed only by NeMo RL's published
  configs: it may be a valid argument of a library rlgate cannot read.
* ``unread-key`` (WARNING): a key NeMo RL accepts but never reads.
* ``bad-type`` (ERROR): a value that does not validate against the declared type with
  pydantic in lax mode, as ``MasterConfig(**config)`` does at NeMo RL's start (``"3"`` for an
  int passes, ``"abc"`` does not; an int passes for a float). Values that are still
  ``${...}`` interpolations are left to the interpolation check.
* ``null-value`` (WARNING): null for a non-Optional key that ``MasterConfig(**config)``
  validates (``validated`` in the schema): NeMo RL's published configs use it as a
  placeholder to fill on the command line. Null elsewhere is accepted (NeMo RL's code and
  the libraries treat it as unset).
* ``out-of-range`` (ERROR): a number outside the bounds NeMo RL enforces, with the source.

Path syntax in the schema: dotted components, ``*`` matches one component, ``[]``
marks list elements. The schema is loaded once per process (cached).
"""

from __future__ import annotations

import difflib
import json
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from importlib import resources
from typing import Any, Literal, Union

from pydantic import TypeAdapter, ValidationError

from rlgate.recipe.findings import Finding, Severity

__all__ = ["KeySchema", "check_keys", "check_value", "load_schema"]

_PY_TYPES: dict[str, Any] = {
    "int": int,
    "float": float,
    "bool": bool,
    "str": str,
    "list": list,
    "dict": dict,
    "null": None,
}
_BOUND_TEXT = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}


@dataclass(frozen=True)
class KeySchema:
    """The parsed schema file."""

    keys: Mapping[str, Mapping[str, Any]]
    open_prefixes: tuple[str, ...]
    gym_prefixes: tuple[str, ...]
    commit: str
    wildcards: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    closed: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    _children: dict[str, list[str]] = field(default_factory=dict, compare=False, repr=False)

    def lookup(self, path: str) -> Mapping[str, Any] | None:
        """Schema entry for ``path`` (exact first, then ``*`` wildcards)."""
        if path in self.keys:
            return self.keys[path]
        for pattern, entry in self.wildcards:
            if _match(pattern, path):
                return entry
        return None

    @cached_property
    def _open_parts(self) -> _Prefixes:
        return _Prefixes.of(self.open_prefixes)

    @cached_property
    def _gym_parts(self) -> _Prefixes:
        return _Prefixes.of(self.gym_prefixes)

    def is_open(self, path: str) -> bool:
        """True when ``path`` lies strictly inside a subtree where any key is allowed."""
        return _under(path, self._open_parts)

    def is_gym(self, path: str) -> bool:
        """True for keys handed to NeMo Gym (validated against Gym's own models)."""
        return _under(path, self._gym_parts) and self.lookup(path) is None

    def closed_by(self, path: str) -> tuple[str, Mapping[str, str]] | None:
        """The closed subtree ``path`` lies directly in: (prefix, how it is closed)."""
        parent = path.replace("[]", "").rpartition(".")[0]
        for prefix, how in self.closed.items():
            if _match(prefix.replace("[]", ""), parent):
                return prefix, how
        return None

    def children(self, parent: str) -> list[str]:
        """Known leaf names directly under ``parent``."""
        if parent not in self._children:
            depth = parent.count(".") + 1 if parent else 0
            out = set()
            for key in self.keys:
                parts = key.split(".")
                if len(parts) == depth + 1 and (not parent or _match(".".join(parts[:-1]), parent)):
                    out.add(parts[-1])
            self._children[parent] = sorted(out)
        return self._children[parent]


def _match(pattern: str, path: str) -> bool:
    pat, parts = pattern.split("."), path.split(".")
    return len(pat) == len(parts) and all(p in ("*", q) for p, q in zip(pat, parts, strict=True))


@dataclass(frozen=True)
class _Prefixes:
    """Path prefixes split into components: exact ones in a set, ``*`` ones in a list."""

    exact: frozenset[tuple[str, ...]]
    wild: tuple[tuple[str, ...], ...]

    @classmethod
    def of(cls, prefixes: tuple[str, ...]) -> _Prefixes:
        split = [tuple(p.replace("[]", "").split(".")) for p in prefixes]
        return cls(frozenset(p for p in split if "*" not in p), tuple(p for p in split if "*" in p))


def _under(path: str, prefixes: _Prefixes) -> bool:
    parts = tuple(path.replace("[]", "").split("."))
    if any(parts[:k] in prefixes.exact for k in range(1, len(parts))):
        return True
    for pre in prefixes.wild:
        if len(parts) > len(pre) and all(p in ("*", q) for p, q in zip(pre, parts, strict=False)):
            return True
    return False


@cache
def load_schema() -> KeySchema:
    """Load the schema shipped with rlgate (once per process)."""
    text = resources.files("rlgate").joinpath("data/nemo_rl_schema.json").read_text("utf-8")
    doc = json.loads(text)
    return KeySchema(
        keys=doc["keys"],
        open_prefixes=tuple(doc["open"]),
        gym_prefixes=tuple(doc["gym"]),
        commit=doc["source"]["commit"],
        wildcards=tuple((k, v) for k, v in doc["keys"].items() if "*" in k),
        closed=doc.get("closed", {}),
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
    by_lower = {s.lower(): s for s in siblings}
    close = difflib.get_close_matches(leaf.lower(), list(by_lower), n=2, cutoff=0.7)
    if close:
        return (
            " did you mean "
            + " or ".join(f"{parent + '.' if parent else ''}{by_lower[c]}" for c in close)
            + "?"
        )
    # A key put at the wrong level: same leaf name elsewhere.
    elsewhere = sorted(k for k in schema.keys if k.endswith(f".{leaf}"))[:4]
    if elsewhere:
        return " (a key with this name exists at " + ", ".join(elsewhere) + ")"
    return ""


def _unknown(schema: KeySchema, path: str) -> Finding:
    hint = _suggest(schema, path)
    closed = schema.closed_by(path)
    if closed and closed[1].get("by") == "examples":
        return Finding(
            "unverified-key",
            Severity.WARNING,
            path,
            f"{path!r} is not among the keys NeMo RL's published configs set under "
            f"{closed[0]!r}, which is handed as keyword arguments to a library rlgate cannot "
            f"read; check the spelling.{hint}",
        )
    if closed:
        how = closed[1]
        return Finding(
            "unknown-key",
            Severity.ERROR,
            path,
            f"{path!r} is not a field of {how.get('source', 'the library class')}, which "
            f"receives {closed[0]!r} ({how.get('consumer', 'as keyword arguments')}).{hint}",
        )
    return Finding(
        "unknown-key",
        Severity.ERROR,
        path,
        f"NeMo RL (schema @ {schema.commit[:9]}) has no key {path!r}; it would be "
        f"kept silently and never used.{hint}",
    )


@cache
def _adapter(types: str, enum: tuple[Any, ...] | None) -> TypeAdapter[Any] | None:
    """A lax pydantic validator for a schema type string (None: anything goes)."""
    names = types.split("|")
    if "any" in names or not all(n in _PY_TYPES for n in names):
        return None
    members: list[Any] = []
    for name in names:
        if enum and name in ("str", "int", "float", "bool"):
            continue  # these came from the Literal, whose values are checked instead
        members.append(_PY_TYPES[name])
    if enum:
        members.append(Literal[enum])
    return TypeAdapter(Union[tuple(members)] if len(members) > 1 else members[0])  # noqa: UP007


def _expected(entry: Mapping[str, Any]) -> str:
    enum = entry.get("enum")
    names = [n for n in str(entry.get("type", "any")).split("|") if n]
    if enum:
        alternatives = [", ".join(repr(v) for v in enum)]
        alternatives += ["null"] if "null" in names else []
        return "one of " + " or ".join(alternatives)
    return " or ".join(names)


def _is_interpolation(value: Any) -> bool:
    return isinstance(value, str) and ("${" in value or value == "???")


def check_value(path: str, value: Any, entry: Mapping[str, Any]) -> Finding | None:
    """``bad-type`` or ``out-of-range`` for one value against its schema entry, else None."""
    if _is_interpolation(value):
        return None  # unresolved here; reported by the interpolation check
    types = str(entry.get("type", "any")).split("|")
    if value is None and "null" not in types and "any" not in types:
        if not entry.get("validated"):
            return None  # NeMo RL's code and the libraries take null as "unset" here
        return Finding(
            "null-value",
            Severity.WARNING,
            path,
            f"{path} is null but {entry.get('where', 'NeMo RL')} declares "
            f"{_expected(entry)}: NeMo RL's MasterConfig(**config) rejects null at startup, "
            f"so set it (e.g. {path}=... on the command line); published configs use null "
            "as a placeholder",
        )
    enum = entry.get("enum")
    adapter = _adapter(str(entry.get("type", "any")), tuple(enum) if enum else None)
    where = entry.get("where", "")
    if adapter is not None:
        try:
            value = adapter.validate_python(value)
        except ValidationError:
            shown = "an empty string" if value == "" else repr(value)
            return Finding(
                "bad-type",
                Severity.ERROR,
                path,
                f"{path} = {shown} ({type(value).__name__}): expected {_expected(entry)} "
                f"(declared in {where})",
            )
    bounds = entry.get("bounds")
    if bounds and isinstance(value, int | float) and not isinstance(value, bool):
        for op, limit in bounds.items():
            if op not in _BOUND_TEXT:
                continue
            ok = {
                "gt": value > limit,
                "ge": value >= limit,
                "lt": value < limit,
                "le": value <= limit,
            }[op]
            if not ok:
                return Finding(
                    "out-of-range",
                    Severity.ERROR,
                    path,
                    f"{path} = {value!r}: must be {_BOUND_TEXT[op]} {limit} ({bounds.get('why')})",
                )
    return None


def check_keys(config: Mapping[str, Any], schema: KeySchema | None = None) -> list[Finding]:
    """All schema findings for ``config``: unknown, unverified and unread keys, bad values."""
    schema = schema or load_schema()
    findings: list[Finding] = []
    stack = deque(_walk(config))
    while stack:
        path, value = stack.popleft()
        if schema.is_open(path) or schema.is_gym(path):
            continue
        entry = schema.lookup(path)
        if entry is None:
            findings.append(_unknown(schema, path))
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
        bad = check_value(path, value, entry)
        if bad is not None:
            findings.append(bad)
            if bad.code == "bad-type":
                continue  # its children (if any) would only repeat the problem
        stack.extend(_walk(value, path))
    return findings
