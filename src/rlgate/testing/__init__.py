"""Public test helpers of rlgate: the fault-injection corpus, run perturbations, tier glue.

* :mod:`rlgate.testing.corpus` writes NeMo RL-shaped TensorBoard runs with injected faults
  (``python -m rlgate.testing.corpus OUT_DIR`` rebuilds the corpus);
* :mod:`rlgate.testing.perturb` derives modified copies of a loaded run (flattened reward,
  scaled step time) for band and perf sensitivity tests;
* :mod:`rlgate.pytest_plugin.tier` is the pytest glue of the convergence and perf tiers.
"""
