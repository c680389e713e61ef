"""Build the fault-injection corpus once per test process (rlgate.testing.corpus)."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from rlgate.testing.corpus import Corpus, build_corpus


@functools.cache
def corpus() -> Corpus:
    """The corpus, written to a fresh temporary directory removed at exit."""
    root = Path(tempfile.mkdtemp(prefix="rlgate-corpus-"))
    atexit.register(shutil.rmtree, root, True)
    return build_corpus(root / "corpus", seed=0)
