"""The terminal: progress of long work on stderr and coloured verdict words, on a tty only.

* :func:`session` (around every command) holds its :class:`rlgate.core.progress.Progress`
  (:func:`current`, :func:`shown`): on a terminal (stderr is a tty) a transient tqdm bar,
  cleared when the work ends; otherwise one plain timestamped line per named step that runs
  longer than ``RLGATE_PROGRESS_AFTER`` seconds (default 5; 0: every step)
  (``[03:52:51] recipe check: 2 of 5: b.yaml``), no line per mere advance.
* :func:`colour` colours the verdict words (PASS / FAIL / ERROR, GO / NO-GO / INCOMPLETE,
  INCOMPATIBLE, IMPROVED / REGRESSED / INCONCLUSIVE) when
  the stream is a terminal, ``NO_COLOR`` is unset or empty and ``TERM`` is not ``dumb``;
  never in a file or a pipe (and files rlgate writes, JSON and JUnit, never pass here).

Everything here is written after :func:`rlgate.core.text.printable`: the only escape
sequences on the terminal are the ones this module adds.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, TextIO

from rlgate.core.progress import Progress, no_progress
from rlgate.core.text import one_line, printable

__all__ = ["colour", "colour_wanted", "current", "is_tty", "session", "shown", "write"]

_SGR = {
    "PASS": "32",
    "GO": "1;32",
    "FAIL": "31",
    "NO-GO": "1;31",
    "INCOMPATIBLE": "1;31",
    "ERROR": "33",
    "INCOMPLETE": "1;33",
    "IMPROVED": "1;32",
    "REGRESSED": "1;31",
    "INCONCLUSIVE": "1;33",
}
_VERDICT = re.compile(
    r"(?<![\w-])(" + "|".join(sorted(_SGR, key=len, reverse=True)) + r")(?![\w-])"
)


def raw(stream: Any) -> Any:
    """The stream under the CLI's printable wrapper (``stream`` itself if unwrapped)."""
    return getattr(stream, "raw", stream)


def is_tty(stream: Any) -> bool:
    """Whether ``stream`` (or the one it wraps) is a terminal."""
    try:
        return bool(raw(stream).isatty())
    except (AttributeError, ValueError, OSError):  # closed, or not a file
        return False


def colour_wanted(stream: Any) -> bool:
    """Colour on ``stream``: a terminal, ``NO_COLOR`` unset or empty, ``TERM`` not dumb."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return is_tty(stream)


def colour(text: str) -> str:
    """``text`` with its verdict words in ANSI colour (call on printable text only)."""
    return _VERDICT.sub(lambda m: f"\x1b[{_SGR[m.group(1)]}m{m.group(1)}\x1b[0m", text)


class _Bar(Progress):
    """A transient tqdm bar on a terminal (a new bar per label)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._bar: Any = None
        self._label = ""

    def __call__(self, label: str, done: int, total: int | None, item: str = "") -> None:
        from tqdm import tqdm

        if self._bar is None or label != self._label:
            self.close()
            self._label = label
            self._bar = tqdm(
                total=total,
                desc=printable(label),
                file=self._stream,
                leave=False,
                dynamic_ncols=True,
                mininterval=0.2,
                bar_format="{desc}: {n_fmt}/{total_fmt} {bar} {elapsed} {postfix}"
                if total
                else "{desc}: {n_fmt} {elapsed} {postfix}",
            )
        if total is not None and self._bar.total != total:
            self._bar.total = total
        if item:
            self._bar.set_postfix_str(printable(item)[:60], refresh=False)
        self._bar.update(done - self._bar.n)

    def clear(self) -> None:
        if self._bar is not None:
            self._bar.clear()

    def refresh(self) -> None:
        if self._bar is not None:
            self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()  # leave=False: the line is erased
            self._bar = None


#: Seconds a step runs before its line is written when stderr is not a terminal (a quick
#: command, or one that fails at once, stays one result or one error line).
QUIET_SECONDS = 5.0


def _quiet_seconds() -> float:
    try:
        return max(0.0, float(os.environ.get("RLGATE_PROGRESS_AFTER", QUIET_SECONDS)))
    except ValueError:
        return QUIET_SECONDS


class _Lines(Progress):
    """One timestamped line per named step that runs a while (not a terminal: a log, CI)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._label = ""
        self._after = _quiet_seconds()
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()

    def __call__(self, label: str, done: int, total: int | None, item: str = "") -> None:
        if not item and label == self._label:
            return
        self._label = label
        self._cancel()
        if not item:
            return
        of = f"{done + 1} of {total}" if total is not None and done < total else f"{done}"
        line = one_line(f"[{time.strftime('%H:%M:%S')}] {label}: {of}: {item}") + "\n"
        if self._after == 0:
            self._write(line)
        else:
            self._timer = threading.Timer(self._after, self._write, (line,))
            self._timer.daemon = True
            self._timer.start()

    def _write(self, line: str) -> None:
        with self._lock:
            self._stream.write(line)
            self._stream.flush()

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def close(self) -> None:
        """A step still waiting to be written is not."""
        self._cancel()


_ACTIVE: list[_Bar] = []
_CURRENT: list[_Bar | _Lines] = []


@contextlib.contextmanager
def session() -> Iterator[Progress]:
    """The progress of one command (on ``sys.stderr``), cleared when it ends (``main``)."""
    stream = raw(sys.stderr)
    shown_: _Bar | _Lines = _Bar(stream) if is_tty(stream) else _Lines(stream)
    _CURRENT.append(shown_)
    if isinstance(shown_, _Bar):
        _ACTIVE.append(shown_)
    try:
        yield shown_
    finally:
        _CURRENT.remove(shown_)
        if isinstance(shown_, _Bar):
            _ACTIVE.remove(shown_)
            shown_.close()  # the bar's line is erased, then what waited for a newline
            _flush_pending()
        else:
            shown_.close()


def current() -> Progress:
    """The running command's progress (to pass down to the library), else a silent one."""
    return _CURRENT[-1] if _CURRENT else no_progress


def shown(label: str, done: int, total: int | None, item: str = "") -> None:
    """Report progress of the running command (see :mod:`rlgate.core.progress`)."""
    current()(label, done, total, item)


_PENDING: dict[int, tuple[TextIO, str]] = {}


def _flush_pending() -> None:
    for stream, text in list(_PENDING.values()):
        _emit(stream, text)
    _PENDING.clear()


def _emit(stream: TextIO, text: str) -> None:
    for bar in _ACTIVE:
        bar.clear()
    stream.write(text)
    stream.flush()
    for bar in _ACTIVE:
        bar.refresh()


def write(stream: TextIO, text: str) -> None:
    """Write printable ``text`` to ``stream``: coloured on a terminal, above a live bar."""
    if colour_wanted(stream):
        text = colour(text)
    if not _ACTIVE or not is_tty(stream):
        stream.write(text)
        return
    # a bar is live on this terminal: whole lines only, written with the bar cleared
    _, pending = _PENDING.pop(id(stream), (stream, ""))
    text = pending + text
    head, newline, tail = text.rpartition("\n")
    if newline:
        _emit(stream, head + newline)
    if tail:
        _PENDING[id(stream)] = (stream, tail)
