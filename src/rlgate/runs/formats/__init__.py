"""Run-input formats, one module each; :mod:`rlgate.runs.registry` imports every module here."""
