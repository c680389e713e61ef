"""The candidate stack's environment: resolved with uv, built beside its cache, reused by key.

* :func:`resolve`: ``uv pip compile`` of rlgate's requirements (core, ``functional``,
  ``gym``, ``launch``: nemo-gym imports ray) with the moved packages replaced, against the
  pinned constraints minus the moved packages; when uv refuses, the constraints its
  explanation names are dropped and the resolution retried, each relaxed pin recorded.
  Still unresolvable: :class:`CandidateError` (exit 3) with uv's message on one line.
* :func:`build`: the cache key is the sha256 of the resolved lock, the Python version and
  rlgate's source digest; the environment is built in a temporary directory beside the
  cache entry (``uv venv --relocatable``, the lock installed exactly, rlgate itself from its
  source tree, nemo-gym alone with ``--no-deps`` as ``ci/install.sh`` does), its completion
  marker written last, then renamed into place. An entry without a valid marker (a build
  that died half-way) is removed and rebuilt, never used. The environment rlgate runs in
  (``sys.prefix``) is never a target.
* :func:`run_functional` / :func:`run_recipe_check`: the bundled functional tier and
  ``rlgate recipe check --json`` with a given interpreter.

Every argv is built by :func:`rlgate.core.commands.command`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

from rlgate.canary.stack import Move, constraints_without, named_constraints, requirements_with
from rlgate.core.commands import Command, command
from rlgate.core.errors import InfraError, RlgateError
from rlgate.core.text import one_line

__all__ = [
    "EXTRAS",
    "MARKER",
    "Built",
    "CandidateError",
    "Resolution",
    "base_requirements",
    "build",
    "cache_key",
    "default_cache_dir",
    "find_uv",
    "marker_ok",
    "pinned_constraints",
    "resolve",
    "run_functional",
    "run_probe",
    "run_recipe_check",
    "source_digest",
    "source_root",
]

#: The extras the candidate environment installs besides rlgate's core dependencies
#: (nemo-gym imports ray, of [launch]: without it the functional tier's Gym tests fail).
EXTRAS = ("functional", "gym", "launch")
#: The completion marker, written last into a built environment.
MARKER = "rlgate-canary.json"
NEMO_GYM_PIN = "nemo-gym==0.7.0"
MAX_RELAXATIONS = 60
RESOLVE_TIMEOUT_S = 900
INSTALL_TIMEOUT_S = 3600
RUN_TIMEOUT_S = 3600


class CandidateError(InfraError):
    """The candidate stack cannot be resolved or built (exit 3)."""


def find_uv() -> str:
    """The uv binary (the ``uv`` package of the ``canary`` extra)."""
    try:
        import uv
    except ModuleNotFoundError:
        raise InfraError(
            "rlgate canary needs uv, which is not installed",
            hint="pip install 'rlgate[canary]' (ci/install.sh installs every extra)",
        ) from None
    return str(uv.find_uv_bin())


def source_root() -> Path | None:
    """The checkout rlgate runs from (with ``pyproject.toml``), or None for a wheel install."""
    root = Path(__file__).resolve().parents[3]
    project = root / "pyproject.toml"
    if project.is_file() and 'name = "rlgate"' in project.read_text(encoding="utf-8"):
        return root
    return None


def base_requirements() -> list[str]:
    """The requirement lines of rlgate for its core and :data:`EXTRAS` (markers evaluated)."""
    root = source_root()
    if root is not None:
        import tomllib

        project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
        lines = list(project["dependencies"])
        for extra in EXTRAS:
            lines += project["optional-dependencies"].get(extra, [])
    else:
        lines = []
        for raw in metadata.requires("rlgate") or []:
            req = Requirement(raw)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in EXTRAS):
                req.marker = None
                lines.append(str(req))
    seen: set[str] = set()
    out = []
    for line in lines:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate():
            continue
        key = str(req)
        if key not in seen:
            seen.add(key)
            out.append(key)
    return out


def pinned_constraints(path: Path | None) -> list[str]:
    """The pin: ``path`` (default the checkout's ``ci/constraints.txt``, else this env's freeze)."""
    root = source_root()
    if path is None and root is not None and (root / "ci" / "constraints.txt").is_file():
        path = root / "ci" / "constraints.txt"
    if path is not None:
        return constraints_without(path.read_text(encoding="utf-8").splitlines(), ())
    return sorted(
        f"{d.metadata['Name']}=={d.version}"
        for d in metadata.distributions()
        if d.metadata["Name"] and d.metadata["Name"].lower() != "rlgate"
    )


def source_digest() -> str:
    """sha256 of rlgate's package files (code and data; no bytecode)."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for top, dirs, files in os.walk(package, followlinks=True):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = Path(top) / name
            digest.update(str(path.relative_to(package)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class Resolution:
    """A resolved candidate: the lock's text and the pins that had to be relaxed."""

    lock: str
    relaxed: tuple[str, ...]
    gym: str  # the nemo-gym requirement, installed alone
    seconds: float


def _run(cmd: Command, timeout: float, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd.argv, capture_output=True, text=True, timeout=timeout, check=False, **kwargs
    )


def _one_line(text: str) -> str:
    """A tool's multi-line message as one line (its own ``error:`` prefix dropped)."""
    words = " ".join(line.strip() for line in text.splitlines() if line.strip())
    return one_line(words.removeprefix("error: "))


def _python_version() -> str:
    return ".".join(str(v) for v in sys.version_info[:3])


def resolve(
    moves: Sequence[Move], constraints: Sequence[str], workdir: Path, uv: str | None = None
) -> Resolution:
    """Resolve the candidate stack (see the module docstring); exit 3 when uv cannot."""
    start = time.monotonic()
    uv = uv or find_uv()
    moved = {m.name for m in moves}
    reqs = requirements_with(base_requirements(), moves)
    cons = constraints_without(constraints, moved)
    gym = next((m.requirement for m in moves if m.name == "nemo-gym"), NEMO_GYM_PIN)
    workdir.mkdir(parents=True, exist_ok=True)
    req_in, cons_txt, lock = (
        workdir / "requirements.in",
        workdir / "constraints.txt",
        workdir / "lock.txt",
    )
    req_in.write_text("\n".join(reqs) + "\n", encoding="utf-8")
    relaxed: list[str] = []
    for _ in range(MAX_RELAXATIONS):
        cons_txt.write_text("\n".join(cons) + "\n", encoding="utf-8")
        cmd = command(
            "{uv} pip compile {req} --constraints {cons} --python-version {py} --output-file "
            "{lock} --no-header --no-annotate --quiet",
            error=CandidateError,
            uv=uv,
            req=req_in,
            cons=cons_txt,
            py=_python_version(),
            lock=lock,
        )
        proc = _run(cmd, RESOLVE_TIMEOUT_S)
        if proc.returncode == 0:
            return Resolution(
                lock.read_text(encoding="utf-8"), tuple(relaxed), gym, time.monotonic() - start
            )
        named = named_constraints(proc.stderr, cons)
        if not named:
            message = _one_line(proc.stderr) or f"uv pip compile exited {proc.returncode}"
            raise CandidateError(
                f"the candidate stack cannot be resolved: {message[:2000]}",
                hint=f"pins relaxed before giving up: {', '.join(relaxed) or 'none'}",
            )
        relaxed += named
        cons = [c for c in cons if c not in named]
    raise CandidateError(f"the candidate stack did not resolve after {MAX_RELAXATIONS} relaxations")


def cache_key(resolution: Resolution) -> str:
    """sha256 of the lock, nemo-gym's line, the Python version and rlgate's source digest."""
    parts = (resolution.lock, resolution.gym, _python_version(), source_digest())
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/rlgate/canary`` (``~/.cache/rlgate/canary``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rlgate" / "canary"


def marker_ok(env: Path, key: str) -> bool:
    """True when ``env`` holds a completion marker for ``key`` and its interpreter."""
    try:
        doc = json.loads((env / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("key") == key and (env / "bin" / "python").exists()


def _refuse_running_env(target: Path) -> None:
    running = Path(sys.prefix).resolve()
    real = target.resolve()
    if real == running or running in real.parents or real in running.parents:
        raise RlgateError(
            f"the canary environment {target} would be, hold or lie inside the environment "
            f"rlgate runs in ({running}); give another --cache-dir"
        )


@dataclass(frozen=True, slots=True)
class Built:
    """A usable candidate environment."""

    path: Path
    python: Path
    reused: bool
    seconds: float


def _installs(uv: str, python: Path, lock: Path, gym: str, root: Path) -> list[Command]:
    gym_word = gym.replace(" ", "")
    return [
        command(
            "{uv} pip install --python {py} --no-deps --requirement {lock} --quiet",
            error=CandidateError,
            uv=uv,
            py=python,
            lock=lock,
        ),
        command(
            "{uv} pip install --python {py} --no-deps --reinstall-package rlgate {src} --quiet",
            error=CandidateError,
            uv=uv,
            py=python,
            src=root,
        ),
        # nemo-gym declares Requires-Python >= 3.13.14 but runs on 3.11 (ci/install.sh)
        command(
            "{uv} pip install --python {py} --no-deps --python-version 3.13.14 {gym} --quiet",
            error=CandidateError,
            uv=uv,
            py=python,
            gym=gym_word,
        ),
    ]


def build(
    resolution: Resolution, cache_dir: Path, *, uv: str | None = None, label: str = ""
) -> Built:
    """The candidate environment for ``resolution``: reused when complete, else built atomically."""
    start = time.monotonic()
    key = cache_key(resolution)
    target = cache_dir / key[:24]
    _refuse_running_env(target)
    if marker_ok(target, key):
        return Built(target, target / "bin" / "python", True, time.monotonic() - start)
    root = source_root()
    if root is None:
        raise CandidateError(
            "rlgate canary installs rlgate into the candidate environment from its source "
            "tree, and this rlgate is not running from one",
            hint="run rlgate canary from a checkout (ci/install.sh installs it editable)",
        )
    uv = uv or find_uv()
    cache_dir.mkdir(parents=True, exist_ok=True)
    if target.exists():  # no valid marker: a build that died half-way, never reused
        shutil.rmtree(target)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key[:24]}.", dir=cache_dir))
    try:
        venv = command(
            "{uv} venv --relocatable --python {py} {dir} --quiet",
            error=CandidateError,
            uv=uv,
            py=sys.executable,
            dir=tmp / "env",
        )
        lock = tmp / "lock.txt"
        lock.write_text(resolution.lock, encoding="utf-8")
        python = tmp / "env" / "bin" / "python"
        for cmd in [venv, *_installs(uv, python, lock, resolution.gym, root)]:
            proc = _run(cmd, INSTALL_TIMEOUT_S, env=_clean_env())
            if proc.returncode != 0:
                raise CandidateError(
                    f"building the candidate environment failed ({' '.join(cmd.argv[1:3])}): "
                    + _one_line(proc.stderr)[:2000]
                )
        # everything inside one directory: the environment is tmp/env; move it up
        for item in (tmp / "env").iterdir():
            item.rename(tmp / item.name)
        (tmp / "env").rmdir()
        marker = {
            "key": key,
            "stack": label,
            "python": _python_version(),
            "relaxed": list(resolution.relaxed),
            "nemo_gym": resolution.gym,
            "built_seconds": round(time.monotonic() - start, 1),
        }
        (tmp / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
        try:
            tmp.rename(target)
        except OSError:
            if not marker_ok(target, key):  # another build won the race and is complete
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Built(target, target / "bin" / "python", False, time.monotonic() - start)


def _clean_env() -> dict[str, str]:
    """The environment for a process in the candidate env: no PYTHONPATH or VIRTUAL_ENV."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    return env


def _env_for(python: Path) -> dict[str, str]:
    if Path(python).resolve() == Path(sys.executable).resolve():
        env = dict(os.environ)
        if env.get("PYTHONPATH"):  # the runs' cwd is their output folder: keep paths meaning here
            env["PYTHONPATH"] = os.pathsep.join(
                str(Path(p).resolve()) if p else p for p in env["PYTHONPATH"].split(os.pathsep)
            )
        env.setdefault("HF_HUB_OFFLINE", "1")
        env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
        return env
    return _clean_env()


def run_functional(python: Path, out: Path, tokenizers: str) -> tuple[int, float]:
    """Run the bundled functional tier with ``python``; JUnit to ``out/functional.xml``."""
    from rlgate.demo.build import functional_tier_command

    out.mkdir(parents=True, exist_ok=True)
    cmd = functional_tier_command(out / "functional.xml", tokenizers, python=python)
    return _run_logged(cmd, python, out, "functional.log")


def run_recipe_check(
    python: Path, out: Path, recipes: Sequence[Path], tokenizers: str
) -> tuple[int, float]:
    """``rlgate recipe check --json out/recipes.json`` on ``recipes`` with ``python``."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = command(
        "{python} -m rlgate.cli recipe check {recipes} --tokenizers {tok} --json {json} --quiet",
        python=python,
        recipes=[Path(r).resolve() for r in recipes],
        tok=Path(tokenizers).resolve(),
        json=out / "recipes.json",
    )
    return _run_logged(cmd, python, out, "recipes.log")


def run_probe(python: Path, out: Path, tokenizers: str | None) -> tuple[int, float]:
    """:mod:`rlgate.canary.probe` with ``python``: its document to ``out/probe.json``."""
    from rlgate.canary.probe import probe_command

    out.mkdir(parents=True, exist_ok=True)
    return _run_logged(
        probe_command(python, out / "probe.json", tokenizers), python, out, "probe.log"
    )


def _run_logged(cmd: Command, python: Path, out: Path, log_name: str) -> tuple[int, float]:
    """``cmd`` run in ``out`` (``python``'s environment, output to ``log_name``): code, seconds."""
    start = time.monotonic()
    with (out / log_name).open("wb") as log:
        proc = subprocess.run(
            cmd.argv,
            cwd=out,
            env=_env_for(python),
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
    return proc.returncode, time.monotonic() - start
