"""Small I/O helpers shared by every writer: versioned, atomic, never clobbering inputs.

Invariants: every JSON document rlgate writes carries ``schema_version``; files
are written to a temporary sibling and ``os.replace``d into place, so a crash
never leaves a half-written report; a path the user passed as an input is never
overwritten by an output.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from rlgate.core.errors import RlgateError

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
    if out.is_dir():
        raise RlgateError(
            f"cannot write {out}: it is a directory", hint="give a file path for this output"
        )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    except OSError as exc:
        raise RlgateError(f"cannot write {out}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, out)  # replaces a symlink at ``out`` itself, never its target
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise RlgateError(f"cannot write {out}: {exc.strerror or exc}") from exc
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
    """Write ``payload`` (plus ``schema_version``) as indented, strict JSON, atomically.

    Non-finite floats become the strings ``"nan"``, ``"inf"``, ``"-inf"``: a NaN loss is
    shown, not dropped, and the file stays valid for strict JSON parsers (no bare ``NaN``).
    """
    doc = {"schema_version": SCHEMA_VERSION, **payload}
    text = json.dumps(_finite(doc), indent=2, sort_keys=False, default=str, allow_nan=False)
    return write_text_atomic(path, text + "\n", inputs=inputs)


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by its string form."""
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


# A NeMo RL config expands to a few thousand nodes; a YAML alias bomb ("billion laughs")
# is a few hundred bytes that expand to billions. Aliases are fine below this budget.
MAX_YAML_NODES = 200_000


class _BudgetLoader(yaml.SafeLoader):
    """``SafeLoader`` that refuses a document whose alias-expanded size exceeds a budget."""

    def compose_document(self) -> yaml.Node | None:  # type: ignore[override]
        node = super().compose_document()
        if node is not None and _expanded_size(node, MAX_YAML_NODES) > MAX_YAML_NODES:
            raise yaml.YAMLError(
                f"the document expands to more than {MAX_YAML_NODES:,} nodes through its "
                "aliases (&anchor/*alias); refusing it as an alias bomb"
            )
        return node


def _expanded_size(root: yaml.Node, budget: int) -> int:
    """Node count with every alias expanded, computed over distinct nodes (memoised).

    An alias to one of its own ancestors (``a: &a [*a]``) expands without end: over budget.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # on the path from the root: seeing one again is a cycle
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        if not children_done:
            if id(node) in open_nodes:
                return budget + 1
            open_nodes.add(id(node))
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
            continue
        open_nodes.discard(id(node))
        sizes[id(node)] = min(budget + 1, 1 + sum(sizes.get(id(c), 0) for c in children))
    return sizes[id(root)]


def require_regular_file(path: Path, what: str, limit: int) -> None:
    """Refuse what is not a regular file of at most ``limit`` bytes (exit 2, naming it).

    A directory, a missing path, a FIFO or device (which would block or never end) and a
    file over ``limit`` are each one clear error.
    """
    if not path.is_file():
        kind = "is a directory" if path.is_dir() else "not found"
        if path.exists() and not path.is_dir():
            kind = "is not a regular file"
        raise RlgateError(f"{what} {kind}: {path}")
    size = path.stat().st_size
    if size > limit:
        raise RlgateError(
            f"{what} {path} is {size / 2**20:.0f} MiB; rlgate reads at most "
            f"{limit // 2**20} MiB of it",
            hint="is this the right file? a tier's JUnit or an rlgate JSON is a few MB",
        )


def read_text(
    path: str | os.PathLike[str],
    *,
    what: str,
    error: type[RlgateError] = RlgateError,
    hint: str | None = None,
    errors: str = "strict",
) -> str:
    """Read a text file the user gave: a missing, unreadable or non-UTF-8 file is ``error``.

    Args:
        path: the file.
        what: what the file is, for messages ("nightly list", "site config").
        error: the ``RlgateError`` subclass to raise.
        hint: what to do, attached to the error.
        errors: ``"strict"`` (default: refuse bytes that are not UTF-8) or ``"replace"``
            for logs, where a crashed writer may leave a torn multi-byte character.
    """
    file = Path(path)
    if not file.is_file():
        kind = "a directory, not a file" if file.is_dir() else "not found"
        raise error(f"{what} {kind}: {file}", hint=hint)
    try:
        return file.read_bytes().decode("utf-8", errors=errors)
    except UnicodeDecodeError as exc:
        raise error(
            f"{file}: {what} is not UTF-8 text (byte {exc.start}: {exc.reason})", hint=hint
        ) from exc
    except OSError as exc:
        raise error(f"cannot read {what} {file}: {exc.strerror or exc}", hint=hint) from exc


def read_yaml(
    path: str | os.PathLike[str],
    *,
    what: str,
    error: type[RlgateError] = RlgateError,
    hint: str | None = None,
) -> Any:
    """Parse a YAML file the user gave, with one kind of error for missing and invalid files.

    The loader is safe (no ``!!python`` tags) and refuses alias bombs (``MAX_YAML_NODES``).

    Args:
        path: the file.
        what: what the file is, for messages ("nightly list", "site config").
        error: the ``RlgateError`` subclass to raise.
        hint: what to do, attached to the error.
    """
    file = Path(path)
    text = read_text(file, what=what, error=error, hint=hint)
    try:
        return yaml.load(text, Loader=_BudgetLoader)
    except (yaml.YAMLError, RecursionError) as exc:
        detail = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise error(f"{file}: not valid YAML: {detail}", hint=hint) from exc


def json_number(value: Any) -> float | None:
    """A parsed JSON number as a float (NaN/inf kept, for a check to name); else None.

    ``bool`` is not a number here; an integer literal beyond float range is +/-inf.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def read_json(
    path: str | os.PathLike[str],
    *,
    what: str,
    error: type[RlgateError] = RlgateError,
    hint: str | None = None,
) -> Any:
    """Parse a JSON file the user gave; missing, non-UTF-8 or invalid JSON is ``error``.

    ``NaN``/``Infinity`` literals are accepted (Python writers emit them); callers that
    need finite numbers check them.
    """
    file = Path(path)
    text = read_text(file, what=what, error=error, hint=hint)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        detail = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise error(f"{file}: {what} is not valid JSON: {detail}", hint=hint) from exc
