"""A cache of what ``rlgate recipe check``'s vLLM-, Gym- and tokenizer-dependent checks learn.

The checks from ``gym`` on (Gym server keys, serving kwargs against vLLM's
``OpenAIServingChat`` parameters, parser names against vLLM's registries, and the served
checks: template profile, parser replays, contiguity replays) import vLLM, nemo-gym and
transformers (15-20 s on 2 cores). Their result for one config is a pure function of:

* the config as loaded (every key, with ``defaults:`` and overrides applied), its path;
* the tokenizer folder's files (tokenizer and chat template) or a ``chat_template`` file
  the config names;
* the installed stack (:func:`rlgate.core.versions.tested_versions`: vLLM, transformers,
  tokenizers, nemo-gym, torch, python) and rlgate's own code and data files (a digest of
  the package, so any rule change is a miss) and :data:`CACHE_FORMAT`.

:func:`cache_key` hashes all of that; one entry is one JSON file ``<key>.json`` under
``<cache dir>/recipe-check/``. An entry is untrusted input: it is parsed with pydantic
(no pickle, nothing executed), must carry the expected key, format and a digest of its
payload; anything else (corrupt, truncated, another key's file, an edited payload) is
ignored and rebuilt. A tokenizer named by a hub id (not a local folder) cannot be hashed
here, so such a config is never cached; nor is a result with a check skipped for what
is installed or reachable here (a Gym module that does not import, a tokenizer not
available), which the key does not hold.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from rlgate.core.errors import RlgateError

__all__ = [
    "CACHE_FORMAT",
    "CachedChecks",
    "RecipeCheckCache",
    "cache_key",
    "default_cache_dir",
    "source_digest",
]

log = logging.getLogger(__name__)

#: Bump when what an entry holds, or how it is keyed, changes.
CACHE_FORMAT = 1

_MAX_ENTRY_BYTES = 8 * 1024 * 1024
_MAX_HASHED_BYTES = 512 * 1024 * 1024  # a tokenizer folder larger than this is not cached


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/rlgate``, else ``~/.cache/rlgate``."""
    base = os.environ.get("XDG_CACHE_HOME")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".cache"
    return root / "rlgate"


class _Finding(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    code: str
    severity: Literal["error", "warning", "info"]
    key: str
    message: str


class _Check(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    check: str
    status: Literal["ran", "skipped", "not-applicable"]
    reason: str = ""
    findings: list[_Finding] = []  # this check's own (recipe check --junit: its testcase)


class _Template(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    source: str
    sha256: str


class CachedChecks(BaseModel):
    """What the cached checks produced for one config (in report order)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    findings: list[_Finding]
    checks: list[_Check]
    tokenizer: str | None = None
    template: _Template | None = None
    profile: dict[str, Any] | None = None


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    format: Literal[1]
    key: str
    digest: str
    payload: CachedChecks


def _payload_digest(payload: CachedChecks) -> str:
    text = json.dumps(payload.model_dump(mode="json"), sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _package_root() -> Path:
    import rlgate

    return Path(rlgate.__file__).resolve().parent


@cache
def source_digest() -> str:
    """sha256 over rlgate's code and data files (the rules, their tables, the loaders)."""
    root = _package_root()
    h = hashlib.sha256()
    files = sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".json", ".yaml")
    )
    for path in files:
        h.update(str(path.relative_to(root)).encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def _tree_digest(folder: Path) -> str | None:
    """sha256 over a folder's files (names and contents); None when too large to hash."""
    h, total = hashlib.sha256(), 0
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        total += path.stat().st_size
        if total > _MAX_HASHED_BYTES:
            return None
        h.update(str(path.relative_to(folder)).encode() + b"\0")
        with path.open("rb") as fh:
            h.update(hashlib.file_digest(fh, "sha256").digest())
    return h.hexdigest()


def _file_digest(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _tokenizer_part(recipe: Any, tokenizer_root: str | Path | None) -> dict[str, Any] | None:
    """What decides the tokenizer and template; None when it cannot be hashed here."""
    from rlgate.checks.recipe_rules import chat_server_not_applicable
    from rlgate.core.errors import RecipeError
    from rlgate.serving.templates import resolve_tokenizer_source, tokenizer_model_id

    if chat_server_not_applicable(recipe.config):
        return {"needed": False}
    part: dict[str, Any] = {"needed": True}
    try:
        model_id = tokenizer_model_id(recipe.facts)
    except RecipeError:
        return {**part, "model_id": None}
    source = resolve_tokenizer_source(model_id, tokenizer_root)
    part.update(model_id=model_id, source=source)
    folder = Path(source)
    if folder.is_dir():
        digest = _tree_digest(folder.resolve())
        if digest is None:
            return None
        part["files"] = digest
    elif model_id.startswith(("/", "./", "../", "~")):
        part["files"] = "missing" if not folder.exists() else None
        if part["files"] is None:
            return None
    else:
        return None  # a hub id: the HF cache / hub decides, which is not hashed here
    inline = recipe.facts.policy.generation.serving_kwargs.chat_template
    if isinstance(inline, str) and inline.strip() and "{" not in inline:
        template = Path(inline)
        part["chat_template_file"] = _file_digest(template) if template.is_file() else "absent"
    return part


def cache_key(recipe: Any, tokenizer_root: str | Path | None) -> str | None:
    """The key of ``recipe``'s cached checks, or None when they cannot be cached."""
    from rlgate.core.versions import tested_versions

    try:
        tokenizer = _tokenizer_part(recipe, tokenizer_root)
    except OSError as exc:  # an unreadable tokenizer file: the checks will say so, uncached
        log.debug("recipe-check cache not used: %s", exc)
        return None
    if tokenizer is None:
        return None
    try:
        config = json.dumps(recipe.config, sort_keys=True, ensure_ascii=True, allow_nan=True)
    except (TypeError, ValueError):
        return None  # not plain data: do not cache what cannot be keyed exactly
    parts = {
        "format": CACHE_FORMAT,
        "rlgate": source_digest(),
        "versions": tested_versions(),
        "recipe": [str(recipe.path), recipe.name, list(recipe.overrides)],
        "config": hashlib.sha256(config.encode()).hexdigest(),
        "tokenizer": tokenizer,
    }
    text = json.dumps(parts, sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


class RecipeCheckCache:
    """Entries under ``<directory>/recipe-check/``; ``hits``/``misses`` count lookups."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory) / "recipe-check"
        self.hits = self.misses = 0

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def load(self, key: str) -> CachedChecks | None:
        """The entry for ``key``, or None (absent, unreadable, malformed, foreign, edited)."""
        entry = self._read(key)
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        return entry

    def _read(self, key: str) -> CachedChecks | None:
        path = self._path(key)
        try:
            if not path.is_file() or path.is_symlink():
                return None
            if path.stat().st_size > _MAX_ENTRY_BYTES:
                return None
            entry = _Entry.model_validate_json(path.read_bytes())
        except (OSError, ValidationError, ValueError) as exc:
            log.debug("recipe-check cache entry %s ignored: %s", path, exc)
            return None
        if entry.key != key or entry.digest != _payload_digest(entry.payload):
            return None
        return entry.payload

    def store(
        self, key: str, payload: CachedChecks, *, inputs: Sequence[str | os.PathLike[str]] = ()
    ) -> None:
        """Write the entry atomically, never into one of ``inputs``; a failed write is logged."""
        from rlgate.core.io import write_text_atomic

        entry = _Entry(
            format=CACHE_FORMAT, key=key, digest=_payload_digest(payload), payload=payload
        )
        try:  # creates the folder only once the guard and ``inputs`` allow the file
            write_text_atomic(self._path(key), entry.model_dump_json(), inputs=inputs)
        except (OSError, RlgateError) as exc:
            log.warning("recipe-check cache not written (%s): %s", self.directory, exc)
