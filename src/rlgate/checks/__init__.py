"""Checks over typed records: conditions, convergence, perf, rollouts, recipe rules."""
