"""Versions of the libraries a gate result depends on.

The functional tier is only as good as the parser, template and converter code it
ran against, so every report, JUnit file and pytest header names them. Versions
are read from installed distribution metadata; nothing is imported.
"""

from __future__ import annotations

import platform
from importlib import metadata

# Distribution names whose versions change what the suite tests.
TRACKED_DISTRIBUTIONS: tuple[str, ...] = (
    "rlgate",
    "vllm",
    "transformers",
    "tokenizers",
    "nemo-gym",
    "torch",
    "swebench",
    "ray",
    "tensorboard",
    "pydantic",
    "junitparser",
)


def tested_versions() -> dict[str, str]:
    """Return ``{distribution: version}`` for the tracked stack (``"absent"`` if missing)."""
    found = {"python": platform.python_version()}
    for dist in TRACKED_DISTRIBUTIONS:
        found[dist] = distribution_version(dist)
    return found


def distribution_version(dist: str) -> str:
    """One installed distribution's version (``"absent"`` if it is not installed)."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "absent"


def format_versions(versions: dict[str, str]) -> str:
    """Render versions as one ``name=version`` line."""
    return " ".join(f"{name}={ver}" for name, ver in versions.items())
