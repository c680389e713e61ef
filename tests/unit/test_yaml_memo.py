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
