"""What rlgate ships besides code: package data under ``rlgate/data/`` (``pyproject.toml``).

In a wheel these are files; in a source checkout ``data/recipes`` and ``data/functional`` are
symbolic links to ``recipes/`` and ``tests/functional/``, so the repository holds one copy
and an installed rlgate needs no checkout (``rlgate report --demo`` runs the bundled tier).
"""

from __future__ import annotations

import os
from pathlib import Path

from rlgate.core.commands import command

__all__ = [
    "BUNDLED_TIER",
    "DATA",
    "FUNCTIONAL_TIER",
    "RECIPES",
    "bundled_tier_args",
    "bundled_tier_values",
]

#: The package-data folder.
DATA = Path(__file__).resolve().parents[1] / "data"
#: rlgate's recipes (``recipes/`` of the repository): ``base/``, ``known-bad/``, ``reference/``.
RECIPES = DATA / "recipes"
#: The functional tier's test modules and conftest (``tests/functional/`` of the repository).
FUNCTIONAL_TIER = DATA / "functional"


#: The bundled tier's pytest words, with ``{tier}``, ``{devnull}`` and ``{root}`` to fill
#: (:func:`bundled_tier_values`): ``rlgate run`` outside a checkout and the demo's command
#: line (:func:`rlgate.demo.build.functional_tier_command`) share them.
BUNDLED_TIER = (
    "{tier} -c {devnull} --rootdir {root} --confcutdir {root} -p no:cacheprovider "
    "-p rlgate.pytest_plugin -o junit_family=xunit1"
)


def bundled_tier_values() -> dict[str, str]:
    """The values of :data:`BUNDLED_TIER`'s fields."""
    root = str(FUNCTIONAL_TIER.parent)
    return {"tier": str(FUNCTIONAL_TIER), "devnull": os.devnull, "root": root}


def bundled_tier_args() -> list[str]:
    """Arguments to pytest that run the bundled functional tier from any folder, writing nothing.

    ``-c os.devnull``: no configuration of the folder pytest runs in is read;
    ``--rootdir``/``--confcutdir`` the bundle's parent, so no conftest outside it is loaded
    and test ids (JUnit classnames) are ``functional/<module>``; no cache in the package;
    the plugin (tier markers, ``--tokenizers``) loaded; JUnit xunit1 like the project's.
    """
    return list(command(BUNDLED_TIER, **bundled_tier_values()).argv)
