"""What rlgate ships besides code: package data under ``rlgate/data/`` (``pyproject.toml``).

In a wheel these are files; in a source checkout ``data/recipes`` and ``data/functional`` are
symbolic links to ``recipes/`` and ``tests/functional/``, so the repository holds one copy
and an installed rlgate needs no checkout (``rlgate report --demo`` runs the bundled tier).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["DATA", "FUNCTIONAL_TIER", "RECIPES"]

#: The package-data folder.
DATA = Path(__file__).resolve().parents[1] / "data"
#: rlgate's recipes (``recipes/`` of the repository): ``base/``, ``known-bad/``, ``reference/``.
RECIPES = DATA / "recipes"
#: The functional tier's test modules and conftest (``tests/functional/`` of the repository).
FUNCTIONAL_TIER = DATA / "functional"
