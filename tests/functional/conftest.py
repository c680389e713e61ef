"""Functional tier: real templates, tokenizers, vLLM parsers and nemo-gym code; CPU only.

Parametrized at collection time over every recipe (``recipes/``, or ``--recipe``) and every
tokenizer folder under the tokenizer root (``--tokenizers`` / ``RLGATE_TOKENIZERS``).
The recipes are read as package data (:data:`rlgate.core.resources.RECIPES`, a link to
``recipes/`` in a checkout), and nothing here may depend on the checkout's layout: an
installed rlgate runs this folder as shipped in the wheel (``rlgate report --demo``).
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rlgate.checks.registry import load_recipe
from rlgate.core.resources import RECIPES
from rlgate.recipe.load import Recipe, functional_gate, recipe_files, recipe_tiers
from rlgate.serving.setup import ServingSetup, serving_setup


def selected_recipes(config: pytest.Config) -> list[Path]:
    """Recipes given with --recipe, else every recipe whose ``rlgate.tiers`` lists functional."""
    chosen = config.getoption("recipe") or []
    if chosen:
        return [Path(p) for p in chosen]
    return [p for p in recipe_files(RECIPES) if "functional" in recipe_tiers(p)]


def tokenizer_dirs(config: pytest.Config) -> list[Path]:
    root = config.getoption("tokenizers")
    if not root:
        return []
    return sorted(p for p in Path(root).iterdir() if p.is_dir())


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "recipe_path" in metafunc.fixturenames:
        paths = selected_recipes(metafunc.config)
        metafunc.parametrize("recipe_path", paths, ids=[p.stem for p in paths])
    if "negative_recipe_path" in metafunc.fixturenames:
        paths = [p for p in selected_recipes(metafunc.config) if _expects_reject(p)]
        metafunc.parametrize("negative_recipe_path", paths, ids=[p.stem for p in paths])
    if "tokenizer_dir" in metafunc.fixturenames:
        dirs = tokenizer_dirs(metafunc.config)
        if not dirs:
            raise pytest.UsageError(
                "the functional tier needs tokenizer folders: pass --tokenizers DIR or set "
                "RLGATE_TOKENIZERS (one subfolder per model, e.g. qwen3.5-35b-a3b/)"
            )
        metafunc.parametrize("tokenizer_dir", dirs, ids=[p.name for p in dirs])


@pytest.fixture(scope="session", autouse=True)
def _quiet_vllm() -> None:
    # vLLM logs every failed parse at ERROR with a traceback; the tests assert on results.
    logging.getLogger("vllm").setLevel(logging.CRITICAL)


_SETUPS: dict[Path, ServingSetup | Exception] = {}


def _expects_reject(path: Path) -> bool:
    return functional_gate(load_recipe(path)).expect == "reject"


_RECIPES: dict[Path, Recipe | Exception] = {}


@pytest.fixture
def recipe(recipe_path: Path) -> Recipe:
    """The loaded recipe alone, for tests of the file itself (no tokenizer, no vLLM).

    Loaded once per session; a recipe that cannot load is an error of every test using it.
    """
    if recipe_path not in _RECIPES:
        try:
            _RECIPES[recipe_path] = load_recipe(recipe_path)
        except Exception as exc:
            _RECIPES[recipe_path] = exc
    cached = _RECIPES[recipe_path]
    if isinstance(cached, Exception):
        raise cached
    return cached


@pytest.fixture
def setup(recipe_path: Path, request: pytest.FixtureRequest) -> ServingSetup:
    """The served setup of one recipe (cached for the session: tests share replays).

    A recipe or tokenizer that cannot load is an error of every test using it (in setup,
    so JUnit writes <error>), computed once.
    """
    return _serving(recipe_path, request.config)


@pytest.fixture
def negative_setup(negative_recipe_path: Path, request: pytest.FixtureRequest) -> ServingSetup:
    """The served setup of a negative-control recipe (``rlgate.functional.expect: reject``)."""
    return _serving(negative_recipe_path, request.config)


def _serving(recipe_path: Path, config: pytest.Config) -> ServingSetup:
    if recipe_path not in _SETUPS:
        try:
            recipe = load_recipe(recipe_path)
            _SETUPS[recipe_path] = serving_setup(recipe, config.getoption("tokenizers"))
        except Exception as exc:
            _SETUPS[recipe_path] = exc
    cached = _SETUPS[recipe_path]
    if isinstance(cached, Exception):
        raise cached
    return cached


@pytest.fixture
def known_limitation(request: pytest.FixtureRequest, setup: ServingSetup):
    """``known_limitation(check, scenario)``: strict-xfail the test if the recipe documents it."""

    def apply(check: str, scenario: str) -> str | None:
        for lim in functional_gate(setup.recipe).known_limitations:
            if lim.check == check and lim.scenario == scenario:
                request.applymarker(pytest.mark.xfail(strict=True, reason=lim.reason))
                return lim.reason
        return None

    return apply


@pytest.fixture(scope="session")
def tokenizers_root(request: pytest.FixtureRequest) -> Path:
    """The tokenizer root (``--tokenizers``); its absence is an error, not a skip."""
    root = request.config.getoption("tokenizers")
    if not root or not Path(root).is_dir():
        pytest.fail("pass --tokenizers DIR or set RLGATE_TOKENIZERS", pytrace=False)
    return Path(root)


def pytest_configure(config: pytest.Config) -> None:
    # Property tests are part of a release gate: same examples on every run, no local database.
    from hypothesis import settings

    settings.register_profile("rlgate", derandomize=True, database=None, deadline=None)
    settings.load_profile("rlgate")
