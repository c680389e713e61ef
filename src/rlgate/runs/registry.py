"""The run-input format registry: a run-input format is one module of :mod:`rlgate.runs.formats`.

A *format* (:class:`RunFormat`) holds:

* ``name`` (unique), ``kind`` (the :class:`~rlgate.runs.records.SourceKind` its records
  carry; formats of one logger back-end may share it; None for a format recognised only to
  be refused with what to do instead), ``order``
  (its place in detection: the first format whose ``detect`` says yes reads the input) and
  ``shape`` (what the user gives for it, in words: the "cannot tell what X is" hint lists
  every format's that has one);
* ``detect(source)``: whether a :class:`RunSource` (a path, or a URL) is this format; cheap
  (a name, the first bytes of a file, a marker file), never raising for a foreign input;
* ``read(source)``: the :class:`~rlgate.runs.records.RunMetrics` record, built with
  :class:`~rlgate.runs.records.Merger`; malformed input is a
  :class:`~rlgate.core.errors.MetricsError` naming file and line (exit 2), an unreachable
  server an :class:`~rlgate.core.errors.InfraError` (exit 3).

**Registration** is by import, as for check kinds (:mod:`rlgate.checks.registry`):
``@register`` on the class, and the first :func:`formats` call imports every module of
:data:`FORMATS_PACKAGE` (:func:`registered` adds one for a ``with`` block: a test's).
Adding a format is adding a module there (and, for a new kind of input, a member of
``SourceKind``) and its tests; :func:`read_run` (what ``runs.metrics.load_run`` calls) finds it.
A directory that no format detects is read by the format marked ``fallback`` (TensorBoard:
its error says there are no event files, and lists the other shapes).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import urllib.parse
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from rlgate.core.errors import MetricsError
from rlgate.core.io import note_input
from rlgate.runs.records import RunMetrics, SourceKind

__all__ = [
    "FORMATS_PACKAGE",
    "RunFormat",
    "RunSource",
    "formats",
    "get_format",
    "masked_url",
    "read_run",
    "register",
    "registered",
    "shapes_hint",
    "shown_run",
]

#: The package whose every module is a run-input format (imported on first use).
FORMATS_PACKAGE = "rlgate.runs.formats"

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_HEAD = 4096


def masked_url(url: str) -> str:
    """``url`` with the password of its user info replaced by ``***`` (for every message)."""
    try:
        parts = urllib.parse.urlsplit(url)
        password = parts.password
        port = parts.port
    except ValueError:
        return "<a URL that does not parse>"
    if password is None:
        return url
    host = (parts.hostname or "") + (f":{port}" if port is not None else "")
    user = urllib.parse.quote(parts.username or "", safe="")
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


@dataclass
class RunSource:
    """What the user named as a run: a filesystem path, or a URL (``given`` as written).

    ``fragment``: what follows ``#`` in a URL, or in a path whose part before ``#`` exists
    (which run of a store: ``mlruns#<run_id>``); ``memo`` lets a format keep what its
    ``detect`` found (the event files) for its ``read``.
    """

    given: str
    path: Path | None
    url: str | None
    fragment: str | None = None
    memo: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, run: str | os.PathLike[str]) -> RunSource:
        """A source from a CLI string or a path (``scheme://`` strings are URLs)."""
        given = os.fspath(run)
        if isinstance(given, bytes):  # os.PathLike[bytes]: not a run name rlgate is given
            raise MetricsError(f"run name {given!r} is not text")
        if _URL.match(given):
            url, sep, fragment = given.partition("#")
            return cls(given, None, url, fragment if sep else None)
        path, sep, fragment = given.rpartition("#")
        if sep and path and not Path(given).exists() and Path(path).exists():
            return cls(given, Path(path), None, fragment)
        return cls(given, Path(given), None)

    @property
    def shown(self) -> str:
        """``given`` as messages show it (a URL's password masked)."""
        return masked_url(self.given) if self.url is not None else self.given

    @property
    def is_dir(self) -> bool:
        """True for an existing directory."""
        return self.path is not None and self.path.is_dir()

    @property
    def is_file(self) -> bool:
        """True for an existing regular file."""
        return self.path is not None and self.path.is_file()

    def head(self) -> bytes:
        """The first 4 KiB of a regular file (empty for anything else)."""
        if "head" not in self.memo:
            data = b""
            if self.is_file:
                assert self.path is not None
                with self.path.open("rb") as fh:
                    data = fh.read(_HEAD)
            self.memo["head"] = data
        return self.memo["head"]


class RunFormat(ABC):
    """One run-input format: its detection and its reader (see the module docstring)."""

    name: ClassVar[str]
    kind: ClassVar[SourceKind | None] = None  # None: a format recognised only to be refused
    order: ClassVar[int] = 100
    shape: ClassVar[str]
    fallback: ClassVar[bool] = False

    @abstractmethod
    def detect(self, source: RunSource) -> bool:
        """Whether ``source`` is this format (cheap; False for anything foreign)."""

    @abstractmethod
    def read(self, source: RunSource) -> RunMetrics:
        """The run's metrics (MetricsError on malformed input)."""


F = TypeVar("F", bound=type[RunFormat])

_FORMATS: dict[str, RunFormat] = {}
_STATE = {"discovered": False}


def _discover() -> None:
    if _STATE["discovered"]:
        return
    _STATE["discovered"] = True
    package = importlib.import_module(FORMATS_PACKAGE)
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        importlib.import_module(f"{FORMATS_PACKAGE}.{info.name}")


def register(cls: F) -> F:
    """Class decorator: register one instance of the format (its module's import does it)."""
    _discover()
    for attr in ("name", "shape"):
        if not hasattr(cls, attr):
            raise TypeError(f"run format {cls.__name__} does not set {attr}")
    fmt = cls()
    for other in _FORMATS.values():
        if type(other) is cls:
            return cls
        if other.name == fmt.name:
            raise TypeError(f"two run formats are called {fmt.name!r}")
        if fmt.fallback and other.fallback:
            raise TypeError(f"run formats {fmt.name!r} and {other.name!r} are both the fallback")
    _FORMATS[fmt.name] = fmt
    return cls


@contextmanager
def registered(*classes: type[RunFormat]) -> Iterator[None]:
    """Register formats for the ``with`` block only (a test's format; the others stay)."""
    _discover()
    added: list[str] = []
    try:
        for cls in classes:
            register(cls)
            added.append(cls.name)
        yield
    finally:
        for name in added:
            _FORMATS.pop(name, None)


def formats() -> list[RunFormat]:
    """Every registered format, in detection order."""
    _discover()
    return sorted(_FORMATS.values(), key=lambda f: (f.order, f.name))


def get_format(name: str) -> RunFormat:
    """The registered format called ``name``."""
    _discover()
    return _FORMATS[name]


def shown_run(run: str | os.PathLike[str]) -> str:
    """``run`` as it may be printed or recorded (a store URL's password masked)."""
    return masked_url(os.fspath(run)) if _URL.match(os.fspath(run)) else os.fspath(run)


def shapes_hint() -> str:
    """What ``check-run`` accepts, one shape per format (for error hints)."""
    return "expected " + ", ".join(f.shape for f in formats() if f.shape)


def read_run(run: str | os.PathLike[str]) -> RunMetrics:
    """Read ``run`` with the first format that detects it (see the module docstring).

    A run on disk (a directory: everything in it) joins the command's output guard's inputs.
    """
    source = RunSource.of(run)
    if source.path is not None:
        note_input(source.path, "run")
    if source.path is not None and not source.path.exists():
        raise MetricsError(f"run not found: {source.path}")
    for fmt in formats():
        if fmt.detect(source):
            return fmt.read(source)
    if source.is_dir:
        return next(f for f in formats() if f.fallback).read(source)
    if source.path is not None and not source.is_file:
        raise MetricsError(f"{source.path} is neither a directory nor a regular file")
    raise MetricsError(f"cannot tell what {source.shown} is", hint=shapes_hint())
