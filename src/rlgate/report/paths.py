"""Local paths in the report, shown relative to the report's directory or the inputs' root.

A report is opened by a team elsewhere (shared storage, a CI artifact): an absolute path of
the machine that built it (``/tmp/rlgate-x/check-run/run.json``) says little and leaks a
home directory. :func:`path_roots` picks the roots, :func:`shorten` rewrites a text, and
:func:`shorten_document` / :func:`shorten_json` apply it to every text of the report's
:class:`~rlgate.report.document.Document` and of report.json — one place, after the facts
are gathered and before the backends escape them (escaping is still decided by type).

* a path under ``--out`` reads relative to it (``demo-inputs/functional.xml``);
* else a path under the inputs' common root reads relative to that root, which report.json
  names once (``path_roots``);
* anything else (a file of the installed package, a path outside both) is left as it is.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from rlgate.report.document import Code, Document, Escaped, Figure, Link, Own, Paragraph

__all__ = ["PathRoots", "path_roots", "shorten", "shorten_document", "shorten_json"]

T = TypeVar("T")


@dataclass(frozen=True)
class PathRoots:
    """The absolute directories paths are shown relative to, in the order they are tried."""

    out: str
    inputs: str | None = None

    def as_json(self) -> dict[str, str | None]:
        """What report.json says the relative paths are relative to."""
        return {"out": self.out, "inputs": self.inputs}


def _absolute(path: str | os.PathLike[str]) -> str:
    return os.path.normpath(os.path.abspath(os.fspath(path)))


def path_roots(
    out_dir: str | os.PathLike[str], inputs: Sequence[str | os.PathLike[str]]
) -> PathRoots:
    """``out_dir``, and the common directory of the ``inputs`` outside it (None: none, or /)."""
    out = _absolute(out_dir)
    outside = [_absolute(p) for p in inputs]
    outside = [p for p in outside if p != out and not p.startswith(out + os.sep)]
    common = None
    if outside:
        dirs = [p if Path(p).is_dir() else os.path.dirname(p) for p in outside]
        common = os.path.commonpath(dirs)
        if common == os.path.dirname(common):  # the filesystem's root: nothing to gain
            common = None
    return PathRoots(out=out, inputs=common)


def _pattern(root: str) -> re.Pattern[str]:
    # the root as a whole path: not inside a longer name, and followed by a separator or an end
    return re.compile(r"(?<![\w.+/-])" + re.escape(root) + r"(?:/|(?![\w.-]))")


def shorten(text: str, roots: PathRoots) -> str:
    """``text`` with every path under a root written relative to it (the root alone: ``.``)."""
    for root in (roots.out, roots.inputs):
        if root and root in text:
            text = _pattern(root).sub(lambda m: "" if m.group(0).endswith("/") else ".", text)
    return text


def _walk(value: T, roots: PathRoots) -> T:
    if isinstance(value, str):
        return shorten(value, roots)  # type: ignore[return-value]
    if isinstance(value, tuple):
        return tuple(_walk(v, roots) for v in value)  # type: ignore[return-value]
    if isinstance(value, Escaped):  # escaped by its producer: a rewrite could break it
        return value
    if isinstance(value, Link):  # its URL is rlgate's own configuration, never rewritten
        return dataclasses.replace(value, text=_walk(value.text, roots))  # type: ignore[return-value]
    if isinstance(value, Figure):  # its data URI and key are no paths
        return dataclasses.replace(
            value, title=shorten(value.title, roots), caption=shorten(value.caption, roots)
        )  # type: ignore[return-value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _walk(getattr(value, f.name), roots) for f in dataclasses.fields(value)}
        return dataclasses.replace(value, **changes)  # type: ignore[return-value]
    return value


def shorten_document(document: Document, roots: PathRoots) -> Document:
    """``document`` with :func:`shorten` applied to each of its texts (types kept).

    Its Inputs section says what the paths are relative to.
    """
    said: tuple[Own | Code, ...] = (Own("Relative paths are relative to the report's directory"),)
    if roots.inputs:
        said += (Own(", else to "), Code(roots.inputs))
    note = Paragraph((*said, Own(".")))
    shortened = _walk(document, roots)
    sections = tuple(
        dataclasses.replace(s, blocks=(*s.blocks, note)) if s.title == Own("Inputs") else s
        for s in shortened.sections
    )
    return dataclasses.replace(shortened, sections=sections)


def shorten_json(value: Any, roots: PathRoots) -> Any:
    """A JSON value with :func:`shorten` applied to each string (keys included)."""
    if isinstance(value, str):
        return shorten(value, roots)
    if isinstance(value, list | tuple):
        return [shorten_json(v, roots) for v in value]
    if isinstance(value, dict):
        return {shorten_json(k, roots): shorten_json(v, roots) for k, v in value.items()}
    return value
