# The whole suite is one pytest plugin, so `rlgate run` can load it with `-p rlgate.pytest_plugin`.
pytest_plugins = ("rlgate.pytest_plugin",)

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _private_rlgate_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test gets its own empty ``rlgate recipe check`` cache (never the user's)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
