"""The bottom layer: errors, safe I/O, text escaping, validators, versions, results."""
