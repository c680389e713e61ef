"""Nightly history: every Result rlgate produces, stored with its context, and its triage.

``model`` holds the plain typed records (:class:`~rlgate.history.model.RunContext`,
:class:`~rlgate.history.model.RecordedRun`); ``triage`` labels a candidate's failing gate
checks against the recorded nightlies (pure). See ``docs/history.md``.
"""
