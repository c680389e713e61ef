"""The registry of SWE result formats: one module per format in :mod:`rlgate.swe.readers.formats`.

Format detection happens here and nowhere else. Each format module registers one
:class:`Reader` with :func:`register`: its :class:`~rlgate.swe.records.InputFormat`, an
``order`` (detection tries readers from the lowest; specific shapes before the catch-alls),
``claims`` (does this path have the format's shape? it may look at the path, a directory's
entries, and the :class:`Probe`'s parsed JSON document or first JSON Lines row), ``read``
(the path into runs over the universe) and ``shape`` (one line for the "unrecognised" hint).
Nothing lists the modules: :func:`readers` imports every module of the package once, as
``checks.registry`` finds the check kinds.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlgate.core.errors import SweError
from rlgate.swe.readers._common import jsonl_lines
from rlgate.swe.records import DatasetUniverse, InputFormat, SweRun, _read_json, parse_json

__all__ = ["FORMATS_PACKAGE", "Probe", "Reader", "detect", "readers", "register"]

FORMATS_PACKAGE = "rlgate.swe.readers.formats"
_UNSET = object()


class Probe:
    """One input path as detection sees it; its JSON is parsed at most once, when asked."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.is_dir = path.is_dir()
        self._doc: Any = _UNSET
        self._first: Any = _UNSET

    @property
    def suffix(self) -> str:
        """The file's suffix (``.json``, ``.jsonl``)."""
        return self.path.suffix

    def doc(self) -> Any:
        """The whole file as one JSON document (SweError: unreadable, empty, not JSON)."""
        if self._doc is _UNSET:
            self._doc = _read_json(self.path)
        return self._doc

    def first_row(self) -> Any:
        """The first non-blank line of a JSON Lines file, parsed (None: no such line)."""
        if self._first is _UNSET:
            self._first = None
            for lineno, line in jsonl_lines(self.path):
                self._first = parse_json(line, f"{self.path}:{lineno}", line=True)
                break
        return self._first

    def first_keys(self) -> frozenset[str]:
        """The keys of :meth:`first_row` (empty when it is not an object)."""
        row = self.first_row()
        return frozenset(row) if isinstance(row, dict) else frozenset()


@dataclass(frozen=True, slots=True)
class Reader:
    """One registered result format."""

    fmt: InputFormat
    order: int
    claims: Callable[[Probe], bool]
    read: Callable[[Probe, DatasetUniverse], list[SweRun]]
    shape: str


_READERS: dict[InputFormat, Reader] = {}
_STATE = {"discovered": False}


def register(
    fmt: InputFormat, *, order: int, claims: Callable[[Probe], bool], shape: str
) -> Callable[
    [Callable[[Probe, DatasetUniverse], list[SweRun]]],
    Callable[[Probe, DatasetUniverse], list[SweRun]],
]:
    """Decorate a format module's read function to register it (one reader per format)."""

    def decorate(
        read: Callable[[Probe, DatasetUniverse], list[SweRun]],
    ) -> Callable[[Probe, DatasetUniverse], list[SweRun]]:
        known = _READERS.get(fmt)
        if known is not None and known.read is not read:
            raise ValueError(f"SWE format {fmt.value!r} is already registered by {known.read!r}")
        if any(r.order == order and r.fmt is not fmt for r in _READERS.values()):
            raise ValueError(f"SWE format {fmt.value!r}: detection order {order} is taken")
        _READERS[fmt] = Reader(fmt, order, claims, read, shape)
        return read

    return decorate


def readers() -> list[Reader]:
    """Every registered reader, in detection order (the format modules imported once)."""
    if not _STATE["discovered"]:
        _STATE["discovered"] = True
        package = importlib.import_module(FORMATS_PACKAGE)
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
            importlib.import_module(f"{FORMATS_PACKAGE}.{info.name}")
    return sorted(_READERS.values(), key=lambda r: r.order)


def detect(path: Path) -> tuple[Reader, Probe]:
    """The reader whose format ``path`` has (SweError naming the path when none has it)."""
    if not path.exists():
        raise SweError(f"{path}: no such file or directory")
    if not path.is_dir() and not path.is_file():  # a FIFO or device would block or never end
        raise SweError(f"{path}: not a regular file or directory")
    probe = Probe(path)
    for reader in readers():
        if reader.claims(probe):
            return reader, probe
    doc = probe.doc()
    shape = f"keys {sorted(doc)[:8]}" if isinstance(doc, dict) else type(doc).__name__
    raise SweError(
        f"{path}: unrecognised SWE-bench result ({shape})",
        hint="expected one of: " + "; ".join(r.shape for r in readers()),
    )
