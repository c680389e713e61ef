"""Progress of long work, as a callback the library calls and the CLI renders.

Library code never prints: a long function takes ``progress: Progress = no_progress`` and
calls ``progress(label, done, total, item)`` as it goes; ``rlgate.cli.term`` shows it (a bar
on a terminal, timestamped lines otherwise). ``label`` names the work ("report --demo"),
``done`` of ``total`` steps are finished, ``item`` names the step starting now (a config, a
phase); an empty ``item`` is a mere advance (shown on a terminal only).
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Progress", "no_progress"]


class Progress(Protocol):
    """``progress(label, done, total, item)``: see the module docstring."""

    def __call__(self, label: str, done: int, total: int | None, item: str = "") -> None:
        """Report that ``done`` of ``total`` steps of ``label`` are done; ``item`` starts."""


def no_progress(label: str, done: int, total: int | None, item: str = "") -> None:
    """The default: report nothing."""
