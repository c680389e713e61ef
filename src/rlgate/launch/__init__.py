"""Launching and following runs: plan, site, Slurm/Ray/local, manifest, watch, budget."""
