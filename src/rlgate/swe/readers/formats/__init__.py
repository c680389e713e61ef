"""One module per SWE result format; each registers its reader (``readers.registry``)."""
