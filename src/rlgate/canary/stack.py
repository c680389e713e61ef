"""A candidate stack: which packages ``rlgate canary --with`` moves, and to what (pure).

``--with PKG==VER`` moves one package rlgate knows to change what it tests (:data:`KNOWN`)
to an exact release; ``--with PKG@PATH`` to a wheel file or a source checkout (a release
candidate). Anything else is bad input (exit 2). This module also holds the pure steps of
resolving the candidate: the requirement lines with the moved packages replaced, the pinned
constraints minus the moved packages, and which constraints a resolver's refusal names
(:func:`named_constraints`), so that the environment builder can relax exactly those.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from rlgate.core.errors import RlgateError
from rlgate.core.text import one_line

__all__ = [
    "KNOWN",
    "NO_DEPS",
    "CanaryError",
    "Move",
    "constraints_without",
    "named_constraints",
    "parse_moves",
    "parse_with",
    "requirements_with",
    "stack_label",
]

#: The packages whose version changes what rlgate tests (parsers, templates, Gym's code).
KNOWN = ("vllm", "transformers", "nemo-gym", "tokenizers")
#: Installed alone, without its dependency tree (it declares Requires-Python >= 3.13.14;
#: ci/install.sh), so it is never part of the resolution.
NO_DEPS = frozenset({"nemo-gym"})


class CanaryError(RlgateError):
    """A bad ``--with`` (an unknown package, a version that is not one): exit 2."""


@dataclass(frozen=True, slots=True)
class Move:
    """One package of the candidate stack: an exact version or a local wheel/checkout."""

    name: str  # canonical (``nemo-gym``)
    version: Version | None = None
    path: Path | None = None

    @property
    def requirement(self) -> str:
        """The requirement line that installs it (``vllm==0.26.0``, ``vllm @ file:///...``)."""
        if self.path is not None:
            return f"{self.name} @ {self.path.resolve().as_uri()}"
        return f"{self.name}=={self.version}"

    def __str__(self) -> str:
        return (
            f"{self.name}@{self.path}" if self.path is not None else f"{self.name}=={self.version}"
        )


_WITH = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?P<op>==|@)\s*(?P<rest>.+)")


def parse_with(text: str) -> Move:
    """``vllm==0.26.0`` or ``vllm@/path/to/vllm.whl`` (or a source checkout) as a Move.

    Raises:
        CanaryError: not ``PKG==VER``/``PKG@PATH``, a package rlgate does not know to matter,
            a version that is not a PEP 440 release, or a path that is no wheel or checkout.
    """
    shown = one_line(repr(text))[:120]
    match = _WITH.fullmatch(text.strip())
    if match is None:
        raise CanaryError(
            f"--with {shown}: not PKG==VERSION or PKG@PATH",
            hint="e.g. --with vllm==0.29.0 or --with vllm@/path/to/vllm-0.30.0rc1.whl",
        )
    name = canonicalize_name(match["name"])
    if name not in KNOWN:
        raise CanaryError(
            f"--with {shown}: rlgate does not know {name!r} to change what it tests",
            hint=f"the packages a canary can move: {', '.join(KNOWN)}",
        )
    rest = match["rest"].strip()
    if match["op"] == "@":
        return Move(name, path=_local(name, rest, shown))
    try:
        version = Version(rest)
    except InvalidVersion:
        raise CanaryError(f"--with {shown}: {rest!r} is not a version (PEP 440)") from None
    if str(version) != rest and rest.lstrip("v") != str(version):
        raise CanaryError(f"--with {shown}: give the version exactly, as {version}")
    return Move(name, version=version)


def _local(name: str, where: str, shown: str) -> Path:
    path = Path(where.removeprefix("file://")).expanduser()
    if name in NO_DEPS:
        raise CanaryError(f"--with {shown}: {name} is installed by version only (PKG==VER)")
    if path.is_file() and path.suffix == ".whl":
        dist = path.name.split("-")[0]
        if canonicalize_name(dist) != name:
            raise CanaryError(f"--with {shown}: the wheel {path.name} is not a {name} wheel")
        return path.resolve()
    if path.is_dir() and any((path / f).is_file() for f in ("pyproject.toml", "setup.py")):
        return path.resolve()
    raise CanaryError(
        f"--with {shown}: {one_line(str(path))[:200]} is neither a .whl file nor a source "
        "checkout (a directory with pyproject.toml or setup.py)"
    )


def parse_moves(texts: Sequence[str]) -> tuple[Move, ...]:
    """Every ``--with``, at least one, each package once (sorted by name)."""
    if not texts:
        raise CanaryError(
            "no candidate stack: give --with PKG==VERSION at least once",
            hint="e.g. rlgate canary --with vllm==0.29.0",
        )
    moves: dict[str, Move] = {}
    for text in texts:
        move = parse_with(text)
        if move.name in moves:
            raise CanaryError(f"--with moves {move.name} twice ({moves[move.name]}, then {move})")
        moves[move.name] = move
    return tuple(sorted(moves.values(), key=lambda m: m.name))


def stack_label(moves: Iterable[Move]) -> str:
    """``transformers==5.12.0,vllm==0.29.0``: the candidate stack in one word."""
    return ",".join(str(m) for m in moves)


def _name(line: str) -> str | None:
    try:
        return canonicalize_name(Requirement(line).name)
    except InvalidRequirement:
        return None


def requirements_with(base: Iterable[str], moves: Iterable[Move]) -> list[str]:
    """``base`` requirement lines with each moved package's line replaced (or added).

    A package installed alone (:data:`NO_DEPS`) is left out: it is never resolved.
    """
    by_name = {m.name: m for m in moves if m.name not in NO_DEPS}
    out: list[str] = []
    for line in base:
        name = _name(line)
        if name in NO_DEPS:
            continue
        out.append(by_name.pop(name).requirement if name in by_name else line)
    return out + [m.requirement for m in by_name.values()]


def constraints_without(lines: Iterable[str], names: Iterable[str]) -> list[str]:
    """The ``name==version`` lines of a constraints file, minus packages ``names``."""
    drop = {canonicalize_name(n) for n in names}
    out = []
    for raw in lines:
        line = raw.split("#", 1)[0].strip()
        if line and (name := _name(line)) is not None and name not in drop:
            out.append(line)
    return out


def named_constraints(message: str, constraints: Iterable[str]) -> list[str]:
    """The constraint lines (``name==version``) a resolver's refusal names, pin included.

    uv's explanation names each conflicting requirement as ``name==version`` (possibly with
    ``[extra]`` or ``{marker}`` after the name): a constraint it quotes exactly is one of the
    causes.
    """
    text = message.lower()
    hits = []
    for line in constraints:
        name, _, version = line.partition("==")
        if not version:
            continue
        spelled = r"[-_.]+".join(re.escape(p) for p in re.split(r"[-_.]+", name.lower()))
        pattern = (
            rf"(?<![\w.-]){spelled}(?:\{{[^}}]*\}}|\[[^\]]*\])?"
            rf"=={re.escape(version.lower())}(?![\w.])"
        )
        if re.search(pattern, text):
            hits.append(line)
    return hits
