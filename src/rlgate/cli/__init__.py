"""The ``rlgate`` command line (entry point ``rlgate.cli:main``)."""

from rlgate.cli.app import main

__all__ = ["main"]
