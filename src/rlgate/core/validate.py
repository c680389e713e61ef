"""Validators shared by the inputs of the run commands: CLI numbers, names, pydantic messages.

One definition each, used by every command and file format that needs it:

* :func:`positive_int`, :func:`positive_float`, :func:`poll_seconds`, :func:`int_in`,
  :func:`float_in`, :func:`nonempty`, :func:`existing_path`: argparse ``type=`` functions
  (pytest's ``addoption`` takes them too and turns the error into a usage error); a count
  or duration that is zero, negative, NaN, infinite, out of its documented range or not a
  number is a usage error (exit 2) before any work starts. ``float("nan")`` compares false
  with everything, so a bare ``lo <= x <= hi`` test would let NaN through: these refuse
  NaN and infinities first, and bound integers on both sides so a tiny argument cannot ask
  for hours of work (``--n 100000000``) or crash a library (``--seed -1``);
* :data:`PositiveInt`, :data:`PositiveFloat`: the same rules inside pydantic models (strict:
  ``true`` or ``"20"`` is not a count);
* :func:`utc_time`: an argparse type for an ISO date or time, and :func:`as_utc`, the one
  conversion of a time to aware UTC (naive is UTC): a time whose UTC form falls outside
  years 1..9999 (``0001-01-01T00:00+14:00``) is refused, not an ``OverflowError``;
* :func:`check_env_name`: a POSIX environment-variable name (``[A-Za-z_][A-Za-z0-9_]*``);
* :data:`LineText`: a string without control characters (a path or value from a file);
* :func:`problems`: a pydantic ``ValidationError`` as one line per problem, naming the key.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, Field, ValidationError

from rlgate.core.text import one_line, redact_text

__all__ = [
    "MAX_POLL_SECONDS",
    "POSIX_NAME",
    "LineText",
    "PositiveFloat",
    "PositiveInt",
    "as_utc",
    "check_env_name",
    "existing_path",
    "float_in",
    "int_in",
    "nonempty",
    "poll_seconds",
    "positive_float",
    "positive_int",
    "problems",
    "utc_time",
]

POSIX_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A poll interval beyond a day is a typo; time.sleep() overflows near 1e10 s anyway.
MAX_POLL_SECONDS = 86_400.0

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _no_control(text: str) -> str:
    if _CONTROL.search(text):
        raise ValueError("holds a control character (newline, tab, NUL, ...)")
    return text


LineText = Annotated[str, AfterValidator(_no_control)]
PositiveInt = Annotated[int, Field(strict=True, ge=1)]
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]


def positive_int(text: str) -> int:
    """Argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def positive_float(text: str) -> float:
    """Argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def poll_seconds(text: str) -> float:
    """Argparse type: seconds between polls, finite, > 0 and at most a day."""
    value = positive_float(text)
    if value > MAX_POLL_SECONDS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_POLL_SECONDS:g} s, got {text!r}")
    return value


def int_in(lo: int, hi: int) -> Callable[[str], int]:
    """A ``type=`` parser for an integer in ``[lo, hi]``."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is outside {lo:,}..{hi:,}")
        return value

    parse.__name__ = "integer"  # argparse names the type in "invalid <name> value"
    return parse


def float_in(
    lo: float, hi: float, *, open_lo: bool = False, open_hi: bool = False
) -> Callable[[str], float]:
    """A ``type=`` parser for a finite number between ``lo`` and ``hi`` (open or closed ends)."""
    lo_text = f"({lo}" if open_lo else f"[{lo}"
    hi_text = f"{hi})" if open_hi else f"{hi}]"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        below = value <= lo if open_lo else value < lo
        above = value >= hi if open_hi else value > hi
        if below or above:
            raise argparse.ArgumentTypeError(f"{value} is outside {lo_text}, {hi_text}")
        return value

    parse.__name__ = "number"
    return parse


def nonempty(text: str) -> str:
    """Argparse type: a string that is not empty or blank."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def existing_path(text: str) -> Path:
    """Argparse type: a path (``~`` expanded) that exists, as a :class:`~pathlib.Path`."""
    path = Path(nonempty(text)).expanduser()
    if not path.exists():
        raise argparse.ArgumentTypeError(f"path does not exist: {text}")
    return path


def as_utc(value: datetime) -> datetime:
    """``value`` as an aware UTC time (a naive one is UTC); ValueError when out of range."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+14:00 is in year 0 in UTC
        raise ValueError(_OUT_OF_RANGE) from None


_OUT_OF_RANGE = "outside the years 1..9999 once in UTC"


def utc_time(text: str) -> datetime:
    """Argparse type: an ISO date or time (UTC unless it names a zone), as aware UTC."""
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text[:80]!r} is not an ISO date or time (e.g. 2026-06-01 or 2026-06-01T12:00Z)"
        ) from None
    try:
        return as_utc(when)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is {exc}") from None


def check_env_name(name: str) -> str:
    """``name`` if it is a POSIX environment-variable name, else ``ValueError`` naming it."""
    if not POSIX_NAME.fullmatch(name):
        raise ValueError(
            f"{name!r} is not an environment variable name (letters, digits and _, "
            "not starting with a digit)"
        )
    return name


def problems(exc: ValidationError) -> str:
    """One line per problem: ``  <key path>: <what is wrong> (got <value>)``."""
    lines = []
    for err in exc.errors():
        parts = [p for p in err["loc"] if p != "[key]"]  # pydantic's marker for a bad dict key
        loc = ".".join(f"[{p}]" if isinstance(p, int) else one_line(p) for p in parts)
        loc = loc.replace(".[", "[") or "(top level)"
        if err["type"] == "extra_forbidden":
            lines.append(f"  {loc}: unknown key")
            continue
        value = err.get("input")
        # a URL's credentials never shown, also where free text cuts the URL short (a raw
        # space or bracket in its password): its own secrets are replaced wherever they are
        urls = (value,) if isinstance(value, str) and "://" in value else ()
        msg = redact_text(err["msg"].removeprefix("Value error, "), *urls)
        shown = one_line(redact_text(repr(value), *urls))[:80]
        got = "" if isinstance(value, dict | list) else f" (got {shown})"
        lines.append(f"  {loc}: {msg}{got}")
    return "\n".join(lines)
