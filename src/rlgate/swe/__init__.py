"""SWE-bench gate: result records and readers, paired comparison, stats, harness."""
