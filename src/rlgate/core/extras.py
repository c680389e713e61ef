"""Which extra of ``pyproject.toml`` provides each optional third-party module rlgate imports.

A command that reaches a module whose extra is not installed stops with exit 3 (the
environment lacks something) and says what to install (:func:`missing_module_error`, used
by the CLI's error boundary), never with "internal error". ``tests/unit/test_packaging.py``
checks this table against ``pyproject.toml`` and against what the code imports.
"""

from __future__ import annotations

from rlgate.core.errors import InfraError

__all__ = ["OPTIONAL_MODULES", "missing_module_error"]

#: Top-level module -> the extra that installs it.
OPTIONAL_MODULES: dict[str, str] = {
    "vllm": "functional",
    "transformers": "functional",
    "huggingface_hub": "functional",
    "torch": "functional",
    "nemo_gym": "gym",
    "responses_api_models": "gym",  # part of the nemo-gym distribution
    "swebench": "swe",
    "docker": "swe",
    "datasets": "swe",
    "ray": "launch",
    "sqlalchemy": "history",
    "alembic": "history",
    "otava": "history",  # history.changes: E-Divisive (installed --no-deps, ci/install.sh)
    "psycopg": "history",  # history.store reads libpq's parameter names to check a URL
    "uv": "canary",  # rlgate canary resolves and builds the candidate stack with uv
}
#: nemo-gym declares Requires-Python >=3.13.14, so no extra can hold it (ci/install.sh).
NEMO_GYM = "pip install --no-deps --ignore-requires-python nemo-gym==0.7.0"
#: apache-otava 0.8.0 pins numpy 2.2 and scipy < 1.17 and pulls in BigQuery, Slack and pg8000
#: clients; ``otava.analysis`` needs only numpy and scipy, so it is installed alone.
OTAVA = "pip install --no-deps apache-otava==0.8.0"


def missing_module_error(exc: ModuleNotFoundError) -> InfraError | None:
    """The error to show for a third-party module that is not installed (None: rlgate's own)."""
    name = (exc.name or "").split(".")[0]
    if not name or name == "rlgate":
        return None  # a module of rlgate itself: a broken install or a bug, not an extra
    extra = OPTIONAL_MODULES.get(name)
    if extra is None:
        hint = "rlgate's own dependencies are incomplete: reinstall rlgate (or run ci/install.sh)"
    elif name in ("nemo_gym", "responses_api_models"):
        hint = f"pip install 'rlgate[gym]' and then {NEMO_GYM} (what ci/install.sh does)"
    elif name == "otava":
        hint = f"pip install 'rlgate[history]' and then {OTAVA} (what ci/install.sh does)"
    else:
        hint = f"pip install 'rlgate[{extra}]' (ci/install.sh installs every extra)"
    return InfraError(f"this needs the Python module {name!r}, which is not installed", hint=hint)
