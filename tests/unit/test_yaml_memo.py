"""Parsed YAML is memoised per process by content: each text is parsed once, every caller
gets its own copy, and a changed file is parsed again (the functional tier and ``recipe
check`` load the same recipe chain and Gym configs dozens of times; issue 25)."""

from __future__ import annotations

import yaml

from rlgate.core import io as core_io
from rlgate.core.errors import RecipeError
from rlgate.recipe import load as recipe_load

TEXT = "a:\n  b: [1, 2]\n  c: 1e-6\n"


def _count_parses(monkeypatch) -> list[int]:
    calls = [0]
    real = yaml.load

    def counting(stream, Loader):
        calls[0] += 1
        return real(stream, Loader=Loader)

    monkeypatch.setattr(yaml, "load", counting)
    return calls


def test_read_yaml_parses_one_text_once_and_hands_out_copies(tmp_path, monkeypatch):
    calls = _count_parses(monkeypatch)
    path = tmp_path / "x.yaml"
    path.write_text(TEXT + "# once\n")
    first = core_io.read_yaml(path, what="x")
    first["a"]["b"].append(3)
    second = core_io.read_yaml(path, what="x")
    assert second == {"a": {"b": [1, 2], "c": "1e-6"}} and calls[0] == 1
    path.write_text(TEXT + "d: 2\n")
    assert core_io.read_yaml(path, what="x")["d"] == 2 and calls[0] == 2


def test_invalid_yaml_is_refused_every_time(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("a: [1\n")
    for _ in range(2):
        try:
            core_io.read_yaml(path, what="x", error=RecipeError)
        except RecipeError as exc:
            assert "not valid YAML" in exc.message
        else:
            raise AssertionError("invalid YAML was accepted")


def test_recipe_yaml_is_loaded_once_per_content_and_copied(tmp_path, monkeypatch):
    calls = _count_parses(monkeypatch)
    path = tmp_path / "r.yaml"
    path.write_text(TEXT + "# recipe\n")
    first = recipe_load._load_yaml(path)
    first.a.pop("b")
    second = recipe_load._load_yaml(path)
    assert list(second.a.b) == [1, 2] and second.a.c == 1e-6  # OmegaConf's float rule
    assert calls[0] == 1  # one parse (OmegaConf's rules with rlgate's budget), once
    path.write_text(TEXT + "d: 2\n")
    assert recipe_load._load_yaml(path).d == 2 and calls[0] == 2  # new content: parsed


def _count_merges(monkeypatch) -> list[int]:
    calls = [0]
    real = recipe_load._merge

    def counting(base, child):
        calls[0] += 1
        return real(base, child)

    monkeypatch.setattr(recipe_load, "_merge", counting)
    return calls


def test_recipe_chain_is_merged_once_per_content_of_every_file(tmp_path, monkeypatch):
    merges = _count_merges(monkeypatch)
    parent, child = tmp_path / "parent.yaml", tmp_path / "child.yaml"
    parent.write_text("a:\n  b: 1\n  c: ${a.b}\nkeep: [1, 2]\n")
    child.write_text("defaults: parent.yaml\na:\n  b: 2\n")
    first = recipe_load.load_recipe(child)
    assert first.config == {"a": {"b": 2, "c": 2}, "keep": [1, 2]} and merges[0] == 2
    assert first.sources == (parent.resolve(), child.resolve())
    first.config["keep"].append(3)
    again = recipe_load.load_recipe(child, ["a.b=5"])
    assert again.config == {"a": {"b": 5, "c": 5}, "keep": [1, 2]} and merges[0] == 2
    deleted = recipe_load.load_recipe(child, ["~keep"])  # overrides work on a fresh copy
    assert deleted.config == {"a": {"b": 2, "c": 2}}
    assert recipe_load.load_recipe(child).config == {"a": {"b": 2, "c": 2}, "keep": [1, 2]}
    parent.write_text("a:\n  b: 1\n  c: ${a.b}\nkeep: [7]\n")  # a parent changed: merged again
    assert recipe_load.load_recipe(child).config["keep"] == [7] and merges[0] == 4
    parent.unlink()  # a hit never skips reading the chain: the missing parent is refused
    try:
        recipe_load.load_recipe(child)
    except RecipeError as exc:
        assert "defaults entry 'parent.yaml' not found" in exc.message
    else:
        raise AssertionError("a chain whose parent is gone was loaded")


def test_defaults_only_omegaconf_can_resolve_are_followed_every_time(tmp_path, monkeypatch):
    (tmp_path / "one.yaml").write_text("x: 1\n")
    (tmp_path / "two.yaml").write_text("x: 2\n")
    child = tmp_path / "child.yaml"
    child.write_text("defaults: ${oc.env:RLGATE_TEST_PARENT}\ny: 0\n")
    for name, x in (("one.yaml", 1), ("two.yaml", 2), ("one.yaml", 1)):
        monkeypatch.setenv("RLGATE_TEST_PARENT", name)
        assert recipe_load.load_recipe(child).config == {"x": x, "y": 0}
