"""rlgate: release gates for async SWE RL with NeMo RL + NeMo Gym + vLLM.

Layers (data flows one way): inputs → typed records (``recipes``, ``metrics``,
``swebench``) → pure logic (``templates``, ``parsers``, ``gym``, ``compat``,
``checks``, ``stats``) → results → effects (``junit``, ``report``, ``launch``)
→ entry points (``cli``, ``plugin``).
"""

from rlgate.core.errors import (
    ExitCode,
    InfraError,
    LaunchError,
    MetricsError,
    RecipeError,
    RlgateError,
    SweError,
)

__all__ = [
    "ExitCode",
    "InfraError",
    "LaunchError",
    "MetricsError",
    "RecipeError",
    "RlgateError",
    "SweError",
    "__version__",
]

__version__ = "0.1.0"
