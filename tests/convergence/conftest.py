# The tier's fixtures (plan, inputs, one evaluated check per test): rlgate.pytest_plugin.tier.
from rlgate.pytest_plugin.tier import check_result, gate_inputs, gate_plan  # noqa: F401
