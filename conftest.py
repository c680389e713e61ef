# The whole suite is one pytest plugin, so `rlgate run` can load it with `-p rlgate.plugin`.
pytest_plugins = ("rlgate.plugin",)
