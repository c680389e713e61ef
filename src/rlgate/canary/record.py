"""A canary's outputs beyond the table: its JSON document and its record in the history.

:func:`document` is what ``rlgate canary --json`` writes (the report's ``--canary`` reads
it, :mod:`rlgate.report.canary_section`); :func:`record_candidate` records the candidate
stack's functional tier and ``recipe check`` as runs of the branch ``canary/<stack>``
(:mod:`rlgate.history.canary`: never in main's triage windows, bands or quarantine counts).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rlgate.canary.compare import Comparison
from rlgate.core.errors import RlgateError
from rlgate.core.junit import read_junit
from rlgate.core.text import unescape_controls
from rlgate.history.ingest import VERSION_PREFIX

if TYPE_CHECKING:
    from rlgate.canary.stack import Move
    from rlgate.history.model import RunContext
    from rlgate.history.store import Store

__all__ = [
    "check_nightly",
    "document",
    "junit_versions",
    "record_candidate",
    "stack_branch",
]


def junit_versions(paths: Iterable[str | os.PathLike[str]]) -> dict[str, str]:
    """The ``rlgate.version.*`` suite properties of JUnit files: the stack that ran them."""
    out: dict[str, str] = {}
    for path in paths:
        for suite in read_junit(path):
            for key, value in suite.properties:
                if key.startswith(VERSION_PREFIX):
                    name = unescape_controls(key.removeprefix(VERSION_PREFIX))
                    out.setdefault(name, unescape_controls(value))
    return out


def stack_branch(packages: Iterable[str], candidate_junit: Sequence[str | os.PathLike[str]]) -> str:
    """``canary/<pkg>-<version>[_...]``: the moved packages as the candidate reports them.

    Raises:
        RlgateError: the candidate's JUnit states no version of a moved package (exit 2).
    """
    from rlgate.history.canary import canary_branch

    try:
        return canary_branch(packages, junit_versions(candidate_junit))
    except ValueError as exc:
        raise RlgateError(
            f"cannot name the canary branch: {exc}",
            hint="the functional tier's JUnit states rlgate.version.* properties",
        ) from None


def document(
    comparison: Comparison,
    *,
    label: str,
    relaxed: Sequence[str],
    environment: str,
    pinned_junit: Sequence[str | os.PathLike[str]],
    candidate_junit: Sequence[str | os.PathLike[str]],
    packages: Iterable[str],
) -> dict[str, Any]:
    """The ``rlgate canary --json`` document (``report --canary`` reads it)."""
    tracked = ("vllm", "transformers", "tokenizers", "nemo-gym", "torch")
    pinned, candidate = junit_versions(pinned_junit), junit_versions(candidate_junit)
    try:
        branch: str | None = stack_branch(packages, candidate_junit)
    except RlgateError:  # a candidate that reports no version of a moved package
        branch = None
    return {
        "command": "canary",
        "stack": label,
        "branch": branch,
        "pinned_versions": {k: pinned[k] for k in tracked if k in pinned},
        "candidate_versions": {k: candidate[k] for k in tracked if k in candidate},
        "relaxed": list(relaxed),
        "environment": environment,
        **comparison.as_dict(),
    }


def _same_stack(branch: str | None, moves: Sequence[Move]) -> bool:
    """Whether ``branch`` can be the canary branch of ``moves`` (any version of a path move)."""
    from packaging.version import InvalidVersion, Version

    from rlgate.history.canary import CANARY_PREFIX, is_canary

    if branch is None or not is_canary(branch):
        return False
    parts = dict(
        p.rsplit("-", 1) for p in branch.removeprefix(CANARY_PREFIX).split("_") if "-" in p
    )
    if set(parts) != {m.name for m in moves}:
        return False
    for move in moves:
        if move.version is None:
            continue
        try:
            if Version(parts[move.name]) != move.version:
                return False
        except InvalidVersion:
            return False
    return True


def check_nightly(store: Store, moves: Sequence[Move], nightly_id: str) -> None:
    """Before any work: ``nightly_id`` is a valid one and no run of this stack's has it.

    The run ids (``<recipe>@canary/<stack>@<nightly id>``) are known only after the
    candidate ran (its recipes and versions come from its JUnit); what can be checked up
    front is: the nightly id is one line of at most 200 characters without control
    characters, a run id of the functional tier's recipe with it fits, and no run of a
    canary branch of the same moved packages (at the ``==`` versions given; any version
    of a package given as a path) already has it. :func:`record_candidate` checks every
    run id again before it records.

    Raises:
        RlgateError: exit 2, saying which.
    """
    from rlgate.history.canary import CANARY_PREFIX, CANARY_RECIPE
    from rlgate.history.ingest import make_context

    slug = "_".join(f"{m.name}-{m.version or 'x'}".lower() for m in moves)
    make_context(
        run_id=f"{CANARY_RECIPE}@{CANARY_PREFIX}{slug}@{nightly_id}", recipe=CANARY_RECIPE,
        nightly_id=nightly_id,
    )  # fmt: skip
    taken = sorted(c.run_id for c in store.nightly(nightly_id) if _same_stack(c.branch, moves))
    if taken:
        raise RlgateError(
            f"--nightly-id {nightly_id!r}: this stack's run {taken[0]!r} is already recorded "
            f"in {store.shown} with it; nothing was run",
            hint="give this canary another --nightly-id (or leave it out)",
        )


def record_candidate(
    store: Store,
    candidate_junit: Sequence[str | os.PathLike[str]],
    *,
    packages: Iterable[str],
    recipe_doc: Mapping[str, object] | None,
    nightly_id: str,
    recorded_at: datetime,
    commits: Mapping[str, str] | None = None,
    label: str | None = None,
) -> list[RunContext]:
    """Record the candidate's runs (one per recipe) on its canary branch; their contexts.

    Every run id is checked before anything is recorded: one already in the store is
    refused (exit 2) and nothing is recorded.
    """
    from rlgate.history.canary import canary_runs

    try:
        runs = canary_runs(
            candidate_junit, packages=packages, recipe_doc=recipe_doc, nightly_id=nightly_id,
            recorded_at=recorded_at, commits=commits, label=label,
        )  # fmt: skip
    except ValueError as exc:
        raise RlgateError(f"cannot record the canary: {exc}") from None
    for context, _ in runs:
        if store.exists(context.run_id):
            raise RlgateError(
                f"run {context.run_id!r} is already recorded in {store.shown}; nothing was "
                "recorded",
                hint="give this canary another --nightly-id",
            )
    for context, results in runs:
        store.record(context, results, {}, [])
    return [context for context, _ in runs]
