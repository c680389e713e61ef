"""Small I/O helpers shared by every writer: versioned, atomic, never clobbering inputs.

Invariants: every JSON document rlgate writes carries ``schema_version``; files
are written to a temporary sibling and ``os.replace``d into place, so a crash
never leaves a half-written report; a path the user passed as an input is never
overwritten by an output.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from rlgate._errors import RlgateError

SCHEMA_VERSION = 1


def _check_not_input(path: Path, inputs: Iterable[str | os.PathLike[str]]) -> None:
    target = path.resolve()
    for item in inputs:
        if Path(item).resolve() == target:
            raise RlgateError(
                f"refusing to write {path}: it is one of the inputs",
                hint="choose another output path; rlgate never overwrites what you gave it",
            )


def write_bytes_atomic(
    path: str | os.PathLike[str],
    data: bytes,
    *,
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> Path:
    """Write ``data`` to ``path`` atomically, refusing to overwrite any of ``inputs``."""
    out = Path(path)
    _check_not_input(out, inputs)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out


def write_text_atomic(
    path: str | os.PathLike[str],
    text: str,
    *,
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically, refusing to overwrite any of ``inputs``."""
    return write_bytes_atomic(path, text.encode("utf-8"), inputs=inputs)


def write_json_atomic(
    path: str | os.PathLike[str],
    payload: dict[str, Any],
    *,
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> Path:
    """Write ``payload`` (plus ``schema_version``) as indented JSON, atomically."""
    doc = {"schema_version": SCHEMA_VERSION, **payload}
    return write_text_atomic(
        path, json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n", inputs=inputs
    )


def read_yaml(
    path: str | os.PathLike[str],
    *,
    what: str,
    error: type[RlgateError] = RlgateError,
    hint: str | None = None,
) -> Any:
    """Parse a YAML file the user gave, with one kind of error for missing and invalid files.

    Args:
        path: the file.
        what: what the file is, for messages ("nightly list", "site config").
        error: the ``RlgateError`` subclass to raise.
        hint: what to do, attached to the error.
    """
    file = Path(path)
    if not file.is_file():
        raise error(f"{what} not found: {file}", hint=hint)
    try:
        return yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise error(f"{file}: not valid YAML: {exc}", hint=hint) from exc
