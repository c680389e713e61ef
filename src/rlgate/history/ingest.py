"""What ``rlgate history record`` and the ``--db`` options record, from what a command read.

Nothing is parsed here: JUnit files are read by :func:`rlgate.core.junit.read_junit`, runs
by :func:`rlgate.runs.metrics.load_run`, SWE results by :mod:`rlgate.swe.readers`, and the
check-run / swe compare JSON documents by the report's readers (the CLI hands their
Results over). This module turns those typed records into what
:meth:`rlgate.history.store.Store.record` takes, and builds the :class:`RunContext` from
the options given, then from what the inputs say (``rlgate.recipe`` and
``rlgate.version.*`` JUnit properties, a run manifest's facts), the options winning.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rlgate.core.errors import RlgateError
from rlgate.core.junit import PROPERTY_PREFIX, read_junit
from rlgate.core.results import Result
from rlgate.core.text import one_line, unescape_controls
from rlgate.history.model import RunContext, SweInstanceRow
from rlgate.runs.metrics import RunMetrics
from rlgate.swe.records import SweArm

__all__ = [
    "Facts",
    "JunitInput",
    "make_context",
    "parse_pairs",
    "read_junit_results",
    "recipe_identity",
    "steps_of",
    "summary",
    "swe_rows",
]

VERSION_PREFIX = f"{PROPERTY_PREFIX}version."
RECIPE_PROPERTY = f"{PROPERTY_PREFIX}recipe"
RUN_DIR_PROPERTY = f"{PROPERTY_PREFIX}run_dir"
HARDWARE_PROPERTY = f"{PROPERTY_PREFIX}hardware"


@dataclass
class Facts:
    """Context facts an input states (the options override them); empty = unknown."""

    recipe: str | None = None
    recipe_sha256: str | None = None
    run_id: str | None = None
    hardware: str | None = None
    commits: dict[str, str] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    overrides: tuple[str, ...] = ()
    sources: list[str] = field(default_factory=list)

    def merge(self, other: Facts) -> Facts:
        """These facts, completed by ``other``'s where these are unknown."""
        return Facts(
            recipe=self.recipe or other.recipe,
            recipe_sha256=self.recipe_sha256 or other.recipe_sha256,
            run_id=self.run_id or other.run_id,
            hardware=self.hardware or other.hardware,
            commits={**other.commits, **self.commits},
            versions={**other.versions, **self.versions},
            overrides=self.overrides or other.overrides,
            sources=[*self.sources, *(s for s in other.sources if s not in self.sources)],
        )


@dataclass(frozen=True)
class JunitInput:
    """Every Result of some JUnit files, and the facts their properties state."""

    results: tuple[Result, ...]
    facts: Facts
    run_dirs: tuple[str, ...]


def add_versions(versions: dict[str, str], suite: Any) -> None:
    """Add a JUnit suite's ``rlgate.version.*`` properties to ``versions`` (first one wins)."""
    for key, value in suite.properties:
        if key.startswith(VERSION_PREFIX):
            versions.setdefault(
                unescape_controls(key.removeprefix(VERSION_PREFIX)), unescape_controls(value)
            )


def read_junit_results(paths: Iterable[str | os.PathLike[str]]) -> JunitInput:
    """Every testcase's Result (rlgate's and plain pytest ones), in file order.

    Facts: the suites' ``rlgate.version.*`` properties (versions), the testcases'
    ``rlgate.recipe`` and ``rlgate.hardware`` (each when they all name one) and
    ``rlgate.run_dir``.

    Raises:
        RlgateError: a file is not a readable JUnit report (core.junit's message).
    """
    results: list[Result] = []
    versions: dict[str, str] = {}
    recipes: set[str] = set()
    hardware: set[str] = set()
    run_dirs: list[str] = []
    sources = []
    for path in paths:
        sources.append(str(path))
        for suite in read_junit(path):
            add_versions(versions, suite)
            for case in suite.cases:
                results.append(case.judged)  # a contradiction is recorded as its shown failure
                recipe, run_dir = case.prop(RECIPE_PROPERTY), case.prop(RUN_DIR_PROPERTY)
                if recipe:
                    recipes.add(unescape_controls(recipe))
                if (stated := case.prop(HARDWARE_PROPERTY)) is not None:
                    hardware.add(unescape_controls(stated))
                if run_dir and unescape_controls(run_dir) not in run_dirs:
                    run_dirs.append(unescape_controls(run_dir))
    facts = Facts(
        recipe=next(iter(recipes)) if len(recipes) == 1 else None,
        hardware=next(iter(hardware)) if len(hardware) == 1 else None,
        versions=versions,
        sources=sources,
    )
    return JunitInput(tuple(results), facts, tuple(run_dirs))


def steps_of(run: RunMetrics) -> dict[str, list[tuple[int, float]]]:
    """A run's per-step scalars, tag -> [(step, value)] (the seconds-indexed ``ray/*`` left out)."""
    return {
        tag: [(int(s), float(v)) for s, v in zip(series.steps, series.values, strict=True)]
        for tag, series in sorted(run.series.items())
        if not series.time_indexed
    }


def swe_rows(arm: SweArm, model: str) -> list[SweInstanceRow]:
    """One row per instance per SWE run of ``arm``, recorded as ``model``'s."""
    return [
        SweInstanceRow(
            model=model,
            swe_run=run.label,
            instance_id=outcome.instance_id,
            outcome=outcome.outcome,
            reason=outcome.reason,
        )
        for run in arm.runs
        for outcome in run.outcomes.values()
    ]


def recipe_identity(recipe: str | os.PathLike[str]) -> tuple[str, str | None]:
    """(name, sha256 of the file): a recipe file's stem and hash, or a bare name as given."""
    path = Path(recipe)
    if path.is_file():
        digest = hashlib.sha256()
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        return path.stem, digest.hexdigest()
    return os.fspath(recipe), None


def parse_pairs(items: Sequence[str], option: str) -> dict[str, str]:
    """``KEY=VALUE`` options (``--commit nemo_rl=abc123``) as a mapping.

    A key given twice with two values is an error (the last one would win silently).
    """
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise RlgateError(
                f"{option} {item!r} is not KEY=VALUE", hint=f"e.g. {option} nemo_rl=7ea279a"
            )
        key, value = key.strip(), value.strip()
        if out.get(key, value) != value:
            raise RlgateError(
                f"{option} {key} is given twice: {out[key]!r} and {value!r}",
                hint=f"give each {option} key once",
            )
        out[key] = value
    return out


_FIELD_OPTION = {
    "run_id": "--run-id",
    "recipe": "--recipe",
    "branch": "--branch",
    "nightly_id": "--nightly-id",
    "hardware": "--hardware",
    "label": "--label",
    "commits": "--commit",
    "versions": "versions",
    "recorded_at": "--recorded-at",
}


def make_context(**fields: Any) -> RunContext:
    """A :class:`RunContext`, or an RlgateError naming the option whose value is invalid."""
    try:
        return RunContext(**{k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        found = []
        for error in exc.errors():
            key = str(error["loc"][0]) if error["loc"] else "context"
            value = one_line(repr(error.get("input")))[:80]
            message = error["msg"].removeprefix("Value error, ")
            found.append(f"{_FIELD_OPTION.get(key, key)} {value}: {message}")
        raise RlgateError(
            f"cannot record this run: {'; '.join(found)}",
            hint="run ids, recipe names, branches and labels are one line of at most 200 "
            "characters without control characters",
        ) from None


def summary(
    results: Sequence[Result], steps: Mapping[str, Sequence[Any]], swe: Sequence[Any]
) -> str:
    """``N results, M per-step values of T tags, K SWE instance outcomes``."""
    values = sum(len(v) for v in steps.values())
    return (
        f"{len(results)} results, {values} per-step values of {len(steps)} tags, "
        f"{len(swe)} SWE instance outcomes"
    )
