"""The bundled demo report (generated DEMO inputs, the functional tier for real)."""
