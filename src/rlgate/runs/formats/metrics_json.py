"""``metrics.json``: ``tests/json_dump_tb_logs.py``'s format, ``{tag: {step_str: value}}``.

Strict: invalid UTF-8, a duplicate key (JSON would keep the last silently), a step key that
is not a canonical non-negative integer below 2**63 (``"010"``, ``"-1"``, ``"1.5"``), a
non-numeric value, or a file with no scalar at all is a MetricsError naming the file.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from rlgate.core.errors import MetricsError
from rlgate.core.io import json_number, read_text
from rlgate.runs.records import MAX_STEP, Merger, RunMetrics, SourceKind, no_scalars
from rlgate.runs.registry import RunFormat, RunSource, register

__all__ = ["MetricsJson", "load_metrics_json"]

CANONICAL_STEP = re.compile(r"(?:0|[1-9][0-9]*)")


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(key)
        out[key] = value
    return out


def load_metrics_json(path: str | os.PathLike[str]) -> RunMetrics:
    """Read ``json_dump_tb_logs.py`` output: ``{tag: {step_str: value}}``."""
    file = Path(path)
    hint = "a truncated metrics.json usually means json_dump_tb_logs.py was interrupted"
    text = read_text(file, what="metrics.json", error=MetricsError)
    try:
        doc = json.loads(text, object_pairs_hook=_unique_object)
    except _Duplicate as dup:
        raise MetricsError(
            f"{file}: key {dup.key!r} appears twice in one object; JSON keeps only the last, "
            "so a value would be dropped silently",
            hint="json_dump_tb_logs.py writes every tag and step once",
        ) from None
    except json.JSONDecodeError as exc:
        raise MetricsError(
            f"{file}: not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}", hint=hint
        ) from exc
    except RecursionError:
        raise MetricsError(f"{file}: not valid metrics.json: nested too deeply") from None
    if not isinstance(doc, dict):
        raise MetricsError(
            f"{file}: expected an object {{tag: {{step: value}}}}, got {type(doc).__name__}"
        )
    merger = Merger()
    index = merger.source(str(file))
    for tag, points in doc.items():
        if not isinstance(points, dict):
            raise MetricsError(
                f"{file}: metric {tag!r} must map step strings to numbers, "
                f"got {type(points).__name__}",
                hint="is this a metrics.json from json_dump_tb_logs.py?",
            )
        steps = np.fromiter((_parse_step(file, tag, k) for k in points), np.int64, len(points))
        values = np.fromiter(
            (_parse_value(file, tag, k, v) for k, v in points.items()), np.float64, len(points)
        )
        order = np.argsort(steps, kind="stable")
        merger.add(tag, steps[order], values[order], index)
    series, conflicts, segments = merger.finish()
    if not series or not any(len(s) for s in series.values()):
        raise no_scalars(file, "the file")
    return RunMetrics(
        source=file,
        kind=SourceKind.METRICS_JSON,
        series=MappingProxyType(series),
        files=(file,),
        conflicts=tuple(conflicts),
        anomalies=tuple(merger.anomalies),
        segments=MappingProxyType(segments),
    )


def _parse_step(file: Path, tag: str, key: str) -> int:
    if CANONICAL_STEP.fullmatch(key) and int(key) <= MAX_STEP:
        return int(key)
    raise MetricsError(
        f"{file}: metric {tag!r} has a step key {key[:40]!r} that is not a non-negative "
        f"integer below 2**63 written plainly",
        hint='steps are written as str(int), as json_dump_tb_logs.py does: "10", not '
        '"010", "+10", "1.5" or "-1"',
    )


def _parse_value(file: Path, tag: str, key: str, value: Any) -> float:
    number = json_number(value)
    if number is None:
        shown = repr(value) if not isinstance(value, dict | list) else type(value).__name__
        raise MetricsError(f"{file}: metric {tag!r} at step {key} is not a number: {shown[:60]}")
    return number


@register
class MetricsJson(RunFormat):
    """A file whose text starts with ``{`` or ``[``, or named ``*.json``."""

    name = "metrics_json"
    kind = SourceKind.METRICS_JSON
    order = 20
    shape = "a metrics.json written by json_dump_tb_logs.py ({tag: {step: value}})"

    def detect(self, source: RunSource) -> bool:
        """JSON by its first character or its suffix."""
        if not source.is_file or source.path is None or source.fragment is not None:
            return False
        text = source.head().decode("utf-8", errors="replace")
        return text.lstrip().startswith(("{", "[")) or source.path.suffix.lower() == ".json"

    def read(self, source: RunSource) -> RunMetrics:
        """:func:`load_metrics_json` on the file."""
        assert source.path is not None
        return load_metrics_json(source.path)
