"""rlgate.recipe.load: NeMo RL's config loading semantics, reproduced."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from rlgate.core.errors import RecipeError
from rlgate.recipe.load import (
    MAX_DEPTH,
    config_files,
    flatten,
    functional_gate,
    get_path,
    load_recipe,
    recipe_files,
    recipe_tiers,
    require_grpo,
)
from rlgate.recipe.spec import FunctionalGate


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


class TestDefaultsChain:
    def test_child_wins_and_parents_resolve_relative_to_their_file(self, tmp_path):
        _write(tmp_path / "base/grand.yaml", "a: {x: 1, y: 1}\nb: 1\n")
        _write(tmp_path / "base/parent.yaml", "defaults: grand.yaml\na: {y: 2}\n")
        child = _write(tmp_path / "r/child.yaml", "defaults: ../base/parent.yaml\na: {z: 3}\n")
        r = load_recipe(child)
        assert r.config == {"a": {"x": 1, "y": 2, "z": 3}, "b": 1}
        assert [p.name for p in r.sources] == ["grand.yaml", "parent.yaml", "child.yaml"]

    def test_later_default_in_a_list_wins(self, tmp_path):
        _write(tmp_path / "p1.yaml", "k: 1\n")
        _write(tmp_path / "p2.yaml", "k: 2\n")
        assert load_recipe(
            _write(tmp_path / "c.yaml", "defaults: [p1.yaml, p2.yaml]\n")
        ).config == {"k": 2}

    def test_override_marker_replaces_the_parent_section(self, tmp_path):
        _write(tmp_path / "p.yaml", "env: {a: 1, b: 2}\n")
        r = load_recipe(
            _write(tmp_path / "c.yaml", "defaults: p.yaml\nenv: {_override_: true, c: 3}\n")
        )
        assert r.config["env"] == {"c": 3}

    def test_circular_chain_is_an_error(self, tmp_path):
        _write(tmp_path / "a.yaml", "defaults: b.yaml\n")
        _write(tmp_path / "b.yaml", "defaults: a.yaml\n")
        with pytest.raises(RecipeError, match="circular"):
            load_recipe(tmp_path / "a.yaml")

    def test_missing_parent_names_the_file_that_wanted_it(self, tmp_path):
        child = _write(tmp_path / "c.yaml", "defaults: nope.yaml\n")
        with pytest.raises(RecipeError, match=r"c\.yaml: defaults entry 'nope\.yaml' not found"):
            load_recipe(child)

    @pytest.mark.parametrize("text", ["[1, 2]\n", "a: [\n"], ids=["not_a_mapping", "broken_yaml"])
    def test_invalid_yaml_is_a_recipe_error(self, tmp_path, text):
        with pytest.raises(RecipeError):
            load_recipe(_write(tmp_path / "bad.yaml", text))


class TestConfigFiles:
    """The chain's files, named before any merge (the output guard keeps outputs off them)."""

    def test_config_files_are_what_the_loader_reads(self, tmp_path):
        _write(tmp_path / "base/grand.yaml", "a: 1\n")
        _write(tmp_path / "base/other.yaml", "defaults: grand.yaml\nb: 1\n")
        _write(tmp_path / "base/parent.yaml", "defaults: [grand.yaml, other.yaml]\n")
        child = _write(tmp_path / "r/child.yaml", "defaults: ../base/parent.yaml\n")
        files = config_files(child)
        assert [p.name for p in files] == ["grand.yaml", "other.yaml", "parent.yaml", "child.yaml"]
        assert set(files) == set(load_recipe(child).sources)

    @pytest.mark.parametrize(
        ("text", "names"),
        [
            ("defaults: nope.yaml\n", ["c.yaml"]),
            ("defaults: a.yaml\n", ["a.yaml", "c.yaml"]),
            ("defaults: {x: 1}\n", ["c.yaml"]),
            ("a: [\n", ["c.yaml"]),
        ],
        ids=["missing_parent", "circular", "not_a_path", "broken_yaml"],
    )
    def test_a_chain_that_cannot_be_followed_ends_where_it_breaks(self, tmp_path, text, names):
        _write(tmp_path / "a.yaml", "defaults: c.yaml\n")
        child = _write(tmp_path / "c.yaml", text)
        assert [p.name for p in config_files(child)] == names  # the load names the problem


class TestOverridesAndInterpolation:
    def test_hydra_overrides_follow_nemo_rl_struct_mode(self, tmp_path):
        cfg = _write(tmp_path / "c.yaml", "a: {b: 1}\n")
        assert load_recipe(cfg, ["a.b=2"]).config["a"]["b"] == 2
        assert load_recipe(cfg, ["++a.c=3"]).config["a"] == {"b": 1, "c": 3}
        assert load_recipe(cfg, ["~a.b"]).config["a"] == {}
        with pytest.raises(RecipeError, match="Could not override"):
            load_recipe(cfg, ["a.typo=2"])

    def test_interpolations_and_nemo_rl_resolvers_resolve(self, tmp_path):
        cfg = _write(tmp_path / "c.yaml", "n: 4\nm: 8\nprod: ${mul:${n}, ${m}}\nref: ${n}\n")
        assert load_recipe(cfg).config == {"n": 4, "m": 8, "prod": 32, "ref": 4}

    def test_unset_env_interpolation_is_kept_and_reported(self, tmp_path, monkeypatch):
        monkeypatch.delenv("RLGATE_TEST_UNSET", raising=False)
        r = load_recipe(_write(tmp_path / "c.yaml", "p: ${oc.env:RLGATE_TEST_UNSET}/x\nq: ${p}\n"))
        assert r.config["p"] == "${oc.env:RLGATE_TEST_UNSET}/x"
        assert {u.key for u in r.unresolved} == {"p", "q"}
        monkeypatch.setenv("RLGATE_TEST_UNSET", "/data")
        assert load_recipe(tmp_path / "c.yaml").config["q"] == "/data/x"


class TestHostileFiles:
    """Every file of the defaults chain is refused with one RecipeError, never a traceback."""

    def test_binary_parent_is_refused_naming_the_parent(self, tmp_path):
        (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00\x81grpo: {}")
        child = _write(tmp_path / "c.yaml", "defaults: bin.yaml\n")
        with pytest.raises(RecipeError, match=r"bin\.yaml: config file is not UTF-8"):
            load_recipe(child)

    @pytest.mark.parametrize(
        "value",
        ["5", "[5]", "null", "{a: b}", "[[a.yaml]]"],
        ids=["int", "int_list", "null", "map", "nested"],
    )
    def test_defaults_must_be_paths(self, tmp_path, value):
        child = _write(tmp_path / "c.yaml", f"defaults: {value}\na: 1\n")
        with pytest.raises(RecipeError, match="`defaults:` must be a file path or a list"):
            load_recipe(child)

    def test_defaults_pointing_at_a_directory(self, tmp_path):
        (tmp_path / "adir").mkdir()
        child = _write(tmp_path / "c.yaml", "defaults: adir\n")
        with pytest.raises(RecipeError, match="defaults entry 'adir' is a directory"):
            load_recipe(child)

    def test_self_cycle_is_an_error(self, tmp_path):
        child = _write(tmp_path / "c.yaml", "defaults: c.yaml\n")
        with pytest.raises(RecipeError, match="circular defaults chain"):
            load_recipe(child)

    def test_alias_bomb_in_a_parent_is_refused_before_omegaconf_expands_it(self, tmp_path):
        lines, prev = ['a: &a ["x","x","x","x","x","x","x","x","x"]'], "a"
        for name in "bcdefghi":
            lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
            prev = name
        (tmp_path / "bomb.yaml").write_text("\n".join(lines) + "\n")
        child = _write(tmp_path / "c.yaml", "defaults: bomb.yaml\n")
        with pytest.raises(RecipeError, match="alias bomb"):
            load_recipe(child)

    def test_deep_nesting_is_refused_not_a_recursion_error(self, tmp_path):
        deep = "x: " + "{a: " * 300 + "1" + "}" * 300 + "\n"
        with pytest.raises(RecipeError, match=f"nested more than {MAX_DEPTH} levels"):
            load_recipe(_write(tmp_path / "deep.yaml", deep))

    def test_duplicate_keys_are_refused_as_omegaconf_does(self, tmp_path):
        with pytest.raises(RecipeError, match="duplicate key"):
            load_recipe(_write(tmp_path / "dup.yaml", "a: 1\na: 2\n"))


class TestInterpolationKinds:
    def test_each_unresolved_interpolation_says_if_it_can_ever_resolve(self, tmp_path, monkeypatch):
        monkeypatch.delenv("RLGATE_TEST_UNSET", raising=False)
        cfg = _write(
            tmp_path / "c.yaml",
            """\
            n: 4
            missing: ${nope}
            chained: ${missing}
            env: ${oc.env:RLGATE_TEST_UNSET}
            both: x${oc.env:RLGATE_TEST_UNSET}${nope2}
            resolver: ${nosuch:1}
            arithmetic: ${div:${oc.env:RLGATE_TEST_UNSET},2}
            listed: ["${nope3}"]
            """,
        )
        kinds = {u.key: u.kind for u in load_recipe(cfg).unresolved}
        assert kinds == {
            "missing": "missing-key",
            "chained": "missing-key",
            "env": "env",
            "both": "missing-key",  # the env variable would not save it
            "resolver": "resolver",
            "arithmetic": "env",  # depends on the variable's value
            "listed[0]": "missing-key",
        }
        # the placeholder env resolver is gone again: oc.env reads the environment
        monkeypatch.setenv("RLGATE_TEST_UNSET", "/data")  # (not a NeMo RL env: section: lenient)
        assert load_recipe(cfg, strict=False).config["env"] == "/data"


class TestGrpoDetection:
    def test_other_algorithm_is_named(self, tmp_path):
        r = load_recipe(
            _write(tmp_path / "d.yaml", "distillation: {max_num_steps: 1}\npolicy: {}\n")
        )
        with pytest.raises(RecipeError, match=r"not a GRPO config \(has `distillation:`\)"):
            require_grpo(r)

    def test_config_without_grpo_section(self, tmp_path):
        r = load_recipe(_write(tmp_path / "p.yaml", "env: {nemo_gym: {}}\n"))
        with pytest.raises(RecipeError, match=r"not a GRPO config \(no `grpo:` section\)"):
            require_grpo(r)

    def test_grpo_inherited_through_defaults_is_grpo(self, tmp_path):
        _write(tmp_path / "base.yaml", "grpo: {num_prompts_per_step: 4}\n")
        require_grpo(load_recipe(_write(tmp_path / "c.yaml", "defaults: base.yaml\n")))


class TestGateBlock:
    def test_gate_block_is_split_off_the_nemo_rl_config(self, tmp_path):
        r = load_recipe(_write(tmp_path / "c.yaml", "a: 1\nrlgate: {tiers: [functional]}\n"))
        assert r.config == {"a": 1} and r.gate.tiers == ("functional",)
        assert functional_gate(r) == FunctionalGate()  # defaults when absent

    def test_functional_block_rejects_unknown_keys_at_load(self, tmp_path):
        path = _write(tmp_path / "c.yaml", "rlgate: {functional: {expectt: pass}}\n")
        with pytest.raises(RecipeError, match=r"rlgate\.functional\.expectt: unknown key; did you"):
            load_recipe(path)

    def test_recipe_tiers_rejects_unknown_tier(self, tmp_path):
        path = _write(tmp_path / "c.yaml", "rlgate: {tiers: [functional, speed]}\n")
        with pytest.raises(RecipeError, match="speed"):
            recipe_tiers(path)

    def test_recipe_files_skip_the_base_folder(self, tmp_path):
        for rel in ("a.yaml", "base/b.yaml", "known-bad/c.yaml"):
            _write(tmp_path / rel, "x: 1\n")
        assert [p.name for p in recipe_files(tmp_path)] == ["a.yaml", "c.yaml"]


class TestPaths:
    def test_get_path_and_flatten(self):
        cfg = {"a": {"b": {"c": 1}}, "l": [1, 2]}
        assert get_path(cfg, "a.b.c") == 1 and get_path(cfg, "a.x", "d") == "d"
        assert flatten(cfg) == {"a": {"b": {"c": 1}}, "a.b": {"c": 1}, "a.b.c": 1, "l": [1, 2]}
