"""``rlgate canary``: a candidate stack's environment, its runs, and what changed (docs/canary.md).

:mod:`~rlgate.canary.stack` and :mod:`~rlgate.canary.compare` are pure;
:mod:`~rlgate.canary.env` resolves and builds environments with uv and runs the tiers there.
"""
