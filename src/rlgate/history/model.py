"""The history's typed records: what a recorded run was, and what the store gives back.

Plain pydantic models (no SQLAlchemy): :class:`RunContext` is what a recorded run was
(recipe and its content hash, branch, commits, versions, hardware, nightly, time, label);
:class:`RecordedRun` a run with its :class:`~rlgate.core.results.Result` records, as read
back; :class:`SweInstanceRow` one SWE-bench instance's outcome in one SWE run of one model.
Results are never re-declared here: the store keeps each one field for field and gives the
same Result back.

Every text field is one line without control characters (names and ids reach terminals,
CSV files and SQL); a ``recorded_at`` without a time zone is read as UTC. The same models
validate what is recorded and what is read back (:mod:`rlgate.history.rows`): a row that
another tool wrote gets no more trust than an option on the command line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from rlgate.core.results import Result
from rlgate.core.text import one_line
from rlgate.core.validate import LineText, as_utc
from rlgate.swe.records import Outcome as SweOutcome

__all__ = [
    "BISECT_PREFIX",
    "CANARY_PREFIX",
    "MAX_ID_CHARS",
    "CommitRef",
    "RecordedRun",
    "RunContext",
    "SweInstanceRow",
    "SweOutcome",
    "check_canary_branch",
    "is_bisect",
    "is_canary",
    "last_nightlies",
    "nightly_key",
    "utc_now",
]

#: Longest run id, recipe name, nightly id, branch, label or hardware name accepted.
MAX_ID_CHARS = 200


def _stripped(text: str) -> str:
    if text != text.strip():
        raise ValueError("has leading or trailing white space")
    return text


Name = Annotated[LineText, Field(min_length=1, max_length=MAX_ID_CHARS), AfterValidator(_stripped)]


#: The branches of ``rlgate canary --db`` (rlgate.history.canary): never main's history.
CANARY_PREFIX = "canary/"
_PART = r"[a-z0-9][a-z0-9.!+-]*"  # a canonical name, a dash, a normalized PEP 440 version
_SLUG = re.compile(rf"{_PART}(?:_{_PART})*")


#: The branches of ``rlgate bisect`` (rlgate.launch.bisect.bisect_branch): never a baseline.
BISECT_PREFIX = "bisect/"


def is_bisect(branch: str | None) -> bool:
    """True for a bisection's branch (``bisect/...``): its steps judge other commits' code."""
    return branch is not None and branch.startswith(BISECT_PREFIX)


def is_canary(branch: str | None) -> bool:
    """True for a canary branch (``canary/...``)."""
    return branch is not None and branch.startswith(CANARY_PREFIX)


def check_canary_branch(branch: str) -> str:
    """``branch`` if it is a well-formed canary branch (ValueError saying why not)."""
    slug = branch.removeprefix(CANARY_PREFIX)
    if len(branch) > MAX_ID_CHARS or not _SLUG.fullmatch(slug):
        raise ValueError(
            f"{one_line(branch)[:80]!r} is not a canary branch: canary/<package>-<version>"
            "[_<package>-<version>...] in lower case (e.g. canary/vllm-0.26.0)"
        )
    return branch


def utc_now() -> datetime:
    """The current time in UTC, to the microsecond."""
    return datetime.now(UTC)


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RunContext(_Record):
    """What a recorded run was.

    ``run_id`` is unique in a store; ``recipe`` the recipe's name (its file stem) and
    ``recipe_sha256`` the recipe file's content hash; ``overrides`` the NeMo RL overrides the
    run was judged with (a band is built from promoted runs with the same ones);
    ``commits`` maps a checkout (``nemo_rl``, ``nemo_gym``, ``rlgate``) to its commit;
    ``versions`` distribution -> version; ``hardware`` names the machine type the run ran
    on (runs of the same recipe on other hardware never share a band); ``nightly_id``
    groups the runs of one nightly; ``label`` marks generated data (``DEMO``); ``source``
    says what was recorded (the input paths).
    """

    run_id: Name
    recipe: Name
    recipe_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None = None
    branch: Name | None = None
    commits: dict[Name, Name] = {}
    versions: dict[Name, Name] = {}
    hardware: Name | None = None
    nightly_id: Name | None = None
    recorded_at: datetime = Field(default_factory=utc_now)
    label: Name | None = None
    overrides: tuple[LineText, ...] = ()
    source: LineText | None = None

    @field_validator("branch")
    @classmethod
    def _canary(cls, value: str | None) -> str | None:
        return check_canary_branch(value) if is_canary(value) else value

    @field_validator("recorded_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return as_utc(value)


class SweInstanceRow(_Record):
    """One instance's outcome in one SWE run (seed) of one model.

    ``swe_run`` is the SWE run's label (its input path, ``#rolloutN`` for a Gym repeat);
    ``run_id`` is the recorded run the row belongs to: set by the store when it reads rows
    back, ignored when recording (the row belongs to the run being recorded).
    """

    model: Name
    swe_run: LineText = Field(min_length=1)
    instance_id: Name
    outcome: SweOutcome
    reason: str | None = None
    run_id: Name | None = None


class RecordedRun(_Record):
    """A run as the store gives it back: its context, its Results, whether it is promoted."""

    context: RunContext
    results: list[Result]
    promoted: bool = False


def nightly_key(context: RunContext) -> tuple[str, str]:
    """What ``--last N`` counts: the run's nightly id, else the run (a nightly of its own)."""
    return ("nightly", context.nightly_id) if context.nightly_id else ("run", context.run_id)


_T = TypeVar("_T")


def last_nightlies(items: Iterable[_T], last: int, context: Callable[[_T], RunContext]) -> list[_T]:
    """The items (given newest first) of the ``last`` newest nightlies (:func:`nightly_key`)."""
    keep, nightlies = [], set()
    for item in items:
        key = nightly_key(context(item))
        if key not in nightlies:
            if len(nightlies) == last:
                continue
            nightlies.add(key)
        keep.append(item)
    return keep


_SHA = re.compile(r"[0-9a-f]{7,64}")


@dataclass(frozen=True, slots=True)
class CommitRef:
    """A baseline commit runs are looked up by: ``[CHECKOUT=]SHA`` (``rlgate triage``).

    ``sha`` is a hexadecimal commit of at least 7 characters (an abbreviation matches the
    full commit a run recorded, and a full one matches a recorded abbreviation);
    ``checkout`` (``nemo_rl``, ``nemo_gym``, ``rlgate``, ...) limits the match to that
    checkout's commit, else any recorded checkout at that commit matches.
    """

    sha: str
    checkout: str | None = None

    @classmethod
    def parse(cls, text: str) -> CommitRef:
        """``SHA`` or ``CHECKOUT=SHA`` (ValueError saying what is wrong)."""
        checkout, sep, sha = text.strip().rpartition("=")
        sha = sha.strip().lower()
        if not _SHA.fullmatch(sha):
            raise ValueError(
                f"{text[:80]!r}: a commit is 7 to 64 hexadecimal characters (CHECKOUT=SHA or SHA)"
            )
        checkout = checkout.strip()
        if sep and (not checkout or len(checkout) > MAX_ID_CHARS or not checkout.isprintable()):
            raise ValueError(f"{text[:80]!r}: name the checkout before '=' (e.g. nemo_rl=SHA)")
        return cls(sha=sha, checkout=checkout or None)

    def matches(self, commits: dict[str, str]) -> bool:
        """True when the recorded ``commits`` hold this commit (in ``checkout`` if set)."""
        recorded = commits.values() if self.checkout is None else [commits.get(self.checkout, "")]
        return any(
            len(c) >= 7 and (c.lower().startswith(self.sha) or self.sha.startswith(c.lower()))
            for c in recorded
        )

    def __str__(self) -> str:
        sha = self.sha[:12]
        return f"{self.checkout}@{sha}" if self.checkout else sha


# --- quarantine entries (rlgate.history.quarantine: their lifecycle; rows: their reader) ---

MAX_REASON = 500
MAX_OWNER = 100
MAX_CHECK = 1000
MAX_NAME = 200  # recipe, hardware, who (schema._ID)
MAX_RUNS = 10_000


class State(Enum):
    """Where an entry is in its lifecycle."""

    ACTIVE = "active"
    EXPIRED = "expired"
    REMOVED = "removed"


@dataclass(frozen=True, slots=True)
class Quarantine:
    """One quarantine entry as stored (``id`` 0: not stored yet)."""

    id: int
    recipe: str
    check: str
    hardware: str | None
    reason: str
    owner: str
    added_at: datetime
    added_by: str | None
    until: datetime | None
    runs: int | None
    removed_at: datetime | None = None
    removed_by: str | None = None

    def scope(self) -> str:
        """``check (recipe[, on hw])`` as messages name it (one line)."""
        where = f", on {self.hardware}" if self.hardware else ""
        return one_line(f"{self.check} ({self.recipe}{where})")


def _line(what: str, value: Any, limit: int, *, null: bool = False) -> None:
    if value is None and null:
        return
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what} must be non-empty text")
    if len(value) > limit:
        raise ValueError(f"{what} is {len(value)} characters long (at most {limit})")
    if one_line(value) != value:
        raise ValueError(f"{what} holds a control character or line break")


def check_entry(q: Quarantine) -> Quarantine:
    """``q`` if it keeps the rules (ValueError naming the field otherwise)."""
    _line("recipe", q.recipe, MAX_NAME)
    _line("check", q.check, MAX_CHECK)
    _line("hardware", q.hardware, MAX_NAME, null=True)
    _line("reason", q.reason, MAX_REASON)
    _line("owner", q.owner, MAX_OWNER)
    _line("added_by", q.added_by, MAX_NAME, null=True)
    _line("removed_by", q.removed_by, MAX_NAME, null=True)
    if (q.until is None) == (q.runs is None):
        raise ValueError("exactly one of until and runs must be set")
    if q.runs is not None and not (type(q.runs) is int and 1 <= q.runs <= MAX_RUNS):
        raise ValueError(f"runs must be an integer in 1..{MAX_RUNS}")
    if q.removed_by is not None and q.removed_at is None:
        raise ValueError("removed_by is set but removed_at is not")
    return q
