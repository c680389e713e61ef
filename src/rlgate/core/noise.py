"""Third-party log noise kept out of rlgate's output, real problems kept in.

Importing vLLM imports torch's C++-extension helpers, whose module-level probe logs
``No CUDA runtime is found, using CUDA_HOME=...`` (``torch.utils.cpp_extension``,
``_find_cuda_home``) on every machine without a GPU: every ``rlgate`` command that reads a
recipe's parsers printed it on stderr. :data:`NOISE` names each such record by its logger
and the start of its message; :func:`quiet_third_party` drops exactly those records, and only
below ``ERROR``, so an error of the same library, every other record and rlgate's own
messages are shown as before. Called before vLLM is imported
(:mod:`rlgate.serving.parsers`); idempotent.
"""

from __future__ import annotations

import logging

__all__ = ["NOISE", "quiet_third_party"]

#: (logger, start of the message template) of each third-party record that is noise.
NOISE: tuple[tuple[str, str], ...] = (
    # torch/utils/cpp_extension.py::_find_cuda_home, run when the module is imported
    ("torch.utils.cpp_extension", "No CUDA runtime is found"),
)


class _DropNoise(logging.Filter):
    """Drops the records of one logger whose message template starts with ``prefix``."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        """False (drop) for the noise below ERROR; True for everything else."""
        return record.levelno >= logging.ERROR or not str(record.msg).startswith(self.prefix)


def quiet_third_party() -> None:
    """Install the filters of :data:`NOISE` on their loggers (once)."""
    for name, prefix in NOISE:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropNoise) and f.prefix == prefix for f in logger.filters):
            logger.addFilter(_DropNoise(prefix))
