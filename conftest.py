# The whole suite is one pytest plugin, so `rlgate run` can load it with `-p rlgate.pytest_plugin`.
pytest_plugins = ("rlgate.pytest_plugin",)
