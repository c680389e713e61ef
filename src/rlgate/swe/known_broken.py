"""Published lists of SWE-bench Verified instances known to be broken in their environment.

``data/swe_known_broken.json`` ships each list as its source published it (instance ids, the
source, where and when it was observed); see that file's ``about``. A list is a claim about a
harness setup, not about the model: excluding it is a *second* comparison shown beside the
full one, never a silent change of the denominator.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from rlgate.core.errors import SweError
from rlgate.swe.records import verified_ids

__all__ = ["KNOWN_BROKEN_FILE", "KnownBrokenList", "known_broken", "known_broken_ids"]

KNOWN_BROKEN_FILE = Path(__file__).parents[1] / "data" / "swe_known_broken.json"


@dataclass(frozen=True, slots=True)
class KnownBrokenList:
    """One published list: its name, the ids, and where they come from."""

    name: str
    ids: frozenset[str]
    source: str
    observed: str


@cache
def known_broken() -> tuple[KnownBrokenList, ...]:
    """Every bundled list, checked: each id must be a SWE-bench Verified instance."""
    doc = json.loads(KNOWN_BROKEN_FILE.read_text(encoding="utf-8"))
    verified = verified_ids()
    lists = []
    for name, entry in doc["lists"].items():
        ids = frozenset(entry["ids"])
        if unknown := sorted(ids - verified):
            raise SweError(f"{KNOWN_BROKEN_FILE.name}: list {name} has non-Verified ids {unknown}")
        lists.append(KnownBrokenList(name, ids, entry["source"], entry["observed"]))
    return tuple(lists)


def known_broken_ids(names: tuple[str, ...] | None = None) -> frozenset[str]:
    """The union of the named lists (all lists when ``names`` is None)."""
    lists = {item.name: item for item in known_broken()}
    if names is not None and (missing := sorted(set(names) - set(lists))):
        raise SweError(
            f"unknown known-broken list {', '.join(missing)}",
            hint=f"bundled lists: {', '.join(sorted(lists))}",
        )
    chosen = lists.values() if names is None else [lists[n] for n in names]
    return frozenset().union(*(item.ids for item in chosen))
