"""The check kinds: one module per kind (spec model, planner, evaluator), found by the registry.

:mod:`rlgate.checks.registry` imports every module here the first time it is asked, and each
registers its kind with ``@register``; nothing else lists them. A kind's ``order`` places its
checks in the plan (the convergence kinds 10-60, band 70, perf 80-90).
"""
