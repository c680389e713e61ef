"""The canary in CI: the environment ``ci/install.sh`` prepares, and the newest stack on PyPI.

* ``python -m rlgate.canary.ci prepare [--off]`` (``ci/install.sh``, ``RLGATE_CANARY=1``):
  resolves and builds the CI canary's candidate environment (:data:`CI_STACK`) into the
  checkout's :data:`CI_CACHE` and writes the install record (:data:`RECORD`) there **last**:
  ``{"requested": true, "stack": ..., "environment": ...}``; with ``--off`` the record says
  ``"requested": false``. ``tests/unit/test_canary_e2e.py`` finds the cache by that path:
  no record or ``requested: false`` skips (with the reason), a requested environment that is
  missing or broken fails -- a canary CI asked for is never skipped silently.
* ``python -m rlgate.canary.ci newest`` (``ci/scripts/canary.sh``): the newest vLLM release
  on PyPI and the newest transformers release that release accepts, as ``--with`` words.

See docs/canary.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from rlgate.core.errors import RlgateError

__all__ = [
    "CI_CACHE",
    "CI_STACK",
    "RECORD",
    "accepted_spec",
    "ci_cache_dir",
    "newest_accepted",
    "newest_release",
    "prepare",
    "read_record",
    "requested_canary",
]

#: The CI canary's candidate: shares torch 2.11 with the pin, so its build is mostly links.
CI_STACK = ("vllm==0.26.0",)
#: Where ``ci/install.sh`` builds it, relative to the checkout.
CI_CACHE = Path(".cache") / "rlgate-canary"
#: The install record, written last by :func:`prepare`.
RECORD = "install.json"
PYPI = "https://pypi.org/pypi/{name}/json"


def ci_cache_dir() -> Path | None:
    """The checkout's :data:`CI_CACHE` (None when rlgate does not run from a checkout)."""
    from rlgate.canary.env import source_root

    root = source_root()
    return None if root is None else root / CI_CACHE


def read_record(cache_dir: Path) -> dict[str, Any] | None:
    """The install record in ``cache_dir``: None when there is none; a bad one is an error."""
    path = cache_dir / RECORD
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RlgateError(f"the canary install record {path} is unreadable: {exc}") from None
    ok = isinstance(doc, dict) and isinstance(doc.get("requested"), bool)
    if ok and doc["requested"]:
        ok = isinstance(doc.get("environment"), str) and isinstance(doc.get("stack"), str)
    if not ok:
        raise RlgateError(f"the canary install record {path} is not one ci/install.sh wrote")
    return doc


def requested_canary(
    root: Path, environ: Mapping[str, str]
) -> tuple[Path | None, dict[str, Any] | None, str]:
    """The canary a test run of the checkout ``root`` must do: (cache dir, record, why not).

    ``RLGATE_CANARY=0``: none. ``RLGATE_CANARY_CACHE``: that cache, no record. Else the
    checkout's :data:`CI_CACHE` when its install record says ``requested: true``; no record
    or ``requested: false``: none, with the reason. A corrupt record raises.
    """
    if environ.get("RLGATE_CANARY") == "0":
        return None, None, "RLGATE_CANARY=0"
    if environ.get("RLGATE_CANARY_CACHE"):
        return Path(environ["RLGATE_CANARY_CACHE"]), None, ""
    cache = root / CI_CACHE
    record = read_record(cache)
    if record is None:
        return (
            None,
            None,
            (
                f"no canary requested: no {CI_CACHE / RECORD} (run RLGATE_CANARY=1 "
                "ci/install.sh, or set RLGATE_CANARY_CACHE)"
            ),
        )
    if not record["requested"]:
        return None, None, f"ci/install.sh ran with RLGATE_CANARY=0 ({CI_CACHE / RECORD})"
    return cache, record, ""


def _write_record(cache_dir: Path, doc: Mapping[str, Any]) -> None:
    from rlgate.core.io import write_json_atomic

    cache_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(cache_dir / RECORD, dict(doc))


def prepare(cache_dir: Path, stack: Sequence[str] = CI_STACK, *, requested: bool = True) -> dict:
    """Build the CI canary's environment into ``cache_dir`` (or record that it was not asked)."""
    from rlgate.canary import env as canary_env
    from rlgate.canary.stack import parse_moves, stack_label

    if not requested:
        doc: dict[str, Any] = {"requested": False}
        _write_record(cache_dir, doc)
        return doc
    (cache_dir / RECORD).unlink(missing_ok=True)  # a build that dies leaves no record
    moves = parse_moves(list(stack))
    label = stack_label(moves)
    constraints = canary_env.pinned_constraints(None)
    resolution = canary_env.resolve(moves, constraints, cache_dir / ".resolve")
    built = canary_env.build(resolution, cache_dir, label=label)
    doc = {
        "requested": True,
        "stack": label,
        "environment": str(built.path),
        "relaxed": list(resolution.relaxed),
        "resolve_seconds": round(resolution.seconds, 1),
        "build_seconds": round(built.seconds, 1),
        "reused": built.reused,
    }
    _write_record(cache_dir, doc)
    return doc


def _versions(doc: Mapping[str, Any]) -> list[Version]:
    """The final, unyanked releases of a PyPI JSON document (``/pypi/NAME/json``)."""
    out = []
    releases = doc.get("releases")
    if not isinstance(releases, dict):
        raise RlgateError("a PyPI JSON document without 'releases'")
    for raw, files in releases.items():
        try:
            version = Version(str(raw))
        except InvalidVersion:
            continue
        if version.is_prerelease or version.is_devrelease or not isinstance(files, list):
            continue
        if files and all(isinstance(f, dict) and f.get("yanked") for f in files):
            continue
        if files:
            out.append(version)
    return sorted(out)


def newest_release(doc: Mapping[str, Any]) -> Version:
    """The newest final, unyanked release with files in a PyPI JSON document."""
    versions = _versions(doc)
    if not versions:
        raise RlgateError("PyPI lists no final release with files")
    return versions[-1]


def accepted_spec(release_doc: Mapping[str, Any], name: str) -> Requirement | None:
    """What the release a PyPI JSON document's ``info`` describes requires of ``name``."""
    info = release_doc.get("info")
    deps = info.get("requires_dist") if isinstance(info, dict) else None
    for raw in deps or []:
        try:
            req = Requirement(str(raw))
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) != canonicalize_name(name):
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        return req
    return None


def newest_accepted(doc: Mapping[str, Any], req: Requirement | None) -> Version:
    """The newest release in ``doc`` that ``req`` accepts (any release when ``req`` is None)."""
    versions = [v for v in _versions(doc) if req is None or req.specifier.contains(v)]
    if not versions:
        raise RlgateError(f"PyPI lists no release that {req} accepts")
    return versions[-1]


def _fetch(url: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            doc = json.loads(response.read())
    except (OSError, ValueError) as exc:
        raise RlgateError(f"{url}: {exc}") from None
    if not isinstance(doc, dict):
        raise RlgateError(f"{url}: not a PyPI JSON document")
    return doc


def newest_stack() -> list[str]:
    """``vllm==NEWEST`` and ``transformers==`` the newest release NEWEST accepts (PyPI)."""
    doc = _fetch(PYPI.format(name="vllm"))
    vllm = newest_release(doc)
    info = doc.get("info")
    if not (isinstance(info, dict) and info.get("version") == str(vllm)):  # info: the latest
        doc = _fetch(f"https://pypi.org/pypi/vllm/{vllm}/json")
    release = doc
    transformers = newest_accepted(
        _fetch(PYPI.format(name="transformers")), accepted_spec(release, "transformers")
    )
    return [f"vllm=={vllm}", f"transformers=={transformers}"]


def main(argv: Sequence[str] | None = None) -> int:
    """``prepare [--off] [--cache-dir DIR]`` or ``newest`` (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m rlgate.canary.ci")
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("prepare", help="build the CI canary's environment (ci/install.sh)")
    p.add_argument("--off", action="store_true", help="record that no canary was requested")
    p.add_argument("--cache-dir", help=f"default: the checkout's {CI_CACHE}")
    sub.add_parser("newest", help="print the newest vLLM and transformers as --with words")
    args = parser.parse_args(argv)
    try:
        if args.what == "newest":
            print("\n".join(newest_stack()))
            return 0
        cache = Path(args.cache_dir) if args.cache_dir else ci_cache_dir()
        if cache is None:
            raise RlgateError("not running from a checkout: pass --cache-dir")
        doc = prepare(cache, requested=not args.off)
    except RlgateError as exc:
        print(f"rlgate: error: {exc}", file=sys.stderr)
        return int(getattr(exc, "exit_code", 2))
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
