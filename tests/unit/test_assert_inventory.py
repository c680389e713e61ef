"""tools/assert_inventory.py on a small NeMo-RL-shaped tree: sites, reach, the classified diff.

The tree is real Python source parsed by the tool; the data file is the tool's own output,
classified the way src/rlgate/data/nemo_rl_asserts.json is.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def inv() -> ModuleType:
    path = REPO / "tools" / "assert_inventory.py"
    spec = importlib.util.spec_from_file_location("assert_inventory_t", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")


RUNNER = """
    from nemo_rl.algorithms.grpo import setup

    def main(config):
        assert config["policy"]["generation"] is not None, "A generation config is required"
        setup(config)
"""
GRPO = """
    from pydantic import BaseModel, model_validator

    class PenaltyConfig(BaseModel):
        unwanted: list | None = None

        @model_validator(mode="after")
        def _needs_ids(self):
            if self.unwanted == []:
                raise ValueError("token ids must be set")
            return self

    def setup(config):
        PenaltyConfig()
        if config["grpo"]["use_dynamic_sampling"]:
            pass
        else:
            assert config["grpo"]["batch_multiplier"] == 1, "batch_multiplier>1 needs sampling"
        group.run_all_workers_single_data("train")
        try:
            build()
        except OSError:
            raise

    def train(self):
        if self.cp > 1:
            raise ValueError(f"cp {self.cp} needs packing")

    def never_called():
        assert False, "dead"
"""
SCOPE = ("examples/run_grpo.py", "nemo_rl/algorithms/grpo.py")


@pytest.fixture
def tree(inv, tmp_path, monkeypatch):
    root = tmp_path / "nemo-rl"
    _write(root, "examples/run_grpo.py", RUNNER)
    _write(root, "examples/nemo_gym/run_grpo_nemo_gym.py", RUNNER)
    _write(root, "nemo_rl/algorithms/grpo.py", GRPO)
    small = inv.Tree(
        "NVIDIA-NeMo/RL",
        "nemo_rl",
        scope=SCOPE,
        entries=(("examples/run_grpo.py", "main"),),
        graph=("nemo_rl/**/*.py",),
    )
    monkeypatch.setattr(inv, "NEMO_RL", small)
    monkeypatch.setattr(inv, "TREES", (small,))
    return root


def _sites(inv, root):
    return {(s.function, s.kind, s.test): s for s in inv.scan(inv.NEMO_RL, root).sites}


class TestScan:
    def test_assert_has_its_condition_message_and_enclosing_branch(self, inv, tree):
        site = _sites(inv, tree)[("setup", "assert", "config['grpo']['batch_multiplier'] == 1")]
        assert site.when == "not (config['grpo']['use_dynamic_sampling'])"
        assert site.message == "batch_multiplier>1 needs sampling"
        assert site.file == "nemo_rl/algorithms/grpo.py" and site.line > 1

    def test_raise_records_its_type_condition_and_formatted_message(self, inv, tree):
        site = _sites(inv, tree)[("train", "raise", "ValueError")]
        assert site.when == "self.cp > 1" and site.message == "cp {self.cp} needs packing"

    def test_bare_reraise_is_not_a_site(self, inv, tree):
        assert [k for k in _sites(inv, tree) if k[0] == "setup" and k[1] == "raise"] == []

    def test_reach_follows_calls_ray_method_names_and_pydantic_validators(self, inv, tree):
        sites = _sites(inv, tree)
        assert sites[("main", "assert", "config['policy']['generation'] is not None")].reached
        assert sites[("train", "raise", "ValueError")].reached  # "train" sent to Ray workers
        assert sites[("PenaltyConfig._needs_ids", "raise", "ValueError")].reached
        assert not sites[("never_called", "assert", "False")].reached

    def test_a_tree_without_its_scope_files_is_refused(self, inv, tmp_path):
        with pytest.raises(SystemExit, match="not a NVIDIA-NeMo/RL tree"):
            inv.scan(inv.NEMO_RL, tmp_path)


def _classified(inv, root, data_path):
    code = inv.main([str(root), "--nemo-rl-ref", COMMIT, "--data", str(data_path), "--update"])
    data = json.loads(data_path.read_text())
    for entry in data["sites"]:
        entry["class"], entry["why"] = "runtime", "test"
    data_path.write_text(inv.render(data))
    return code, data


class TestDiff:
    def test_new_sites_fail_until_classified(self, inv, tree, tmp_path, capsys):
        data_path = tmp_path / "asserts.json"
        code, data = _classified(inv, tree, data_path)
        assert code == 1 and "5 site(s) not classified" in capsys.readouterr().out
        assert len(data["sites"]) == 5 and data["sources"]["NVIDIA-NeMo/RL"]["ref"] == COMMIT
        assert inv.main([str(tree), "--nemo-rl-ref", COMMIT, "--data", str(data_path)]) == 0

    def test_a_moved_site_keeps_its_class_and_an_edited_one_shows_new_and_vanished(
        self, inv, tree, tmp_path, capsys
    ):
        data_path = tmp_path / "asserts.json"
        _classified(inv, tree, data_path)
        edited = GRPO.replace("self.cp > 1", "self.cp > 2").replace(
            "\n    def setup", "\n    # moved down" * 9 + "\n    def setup"
        )
        _write(tree, "nemo_rl/algorithms/grpo.py", edited)
        capsys.readouterr()
        args = [str(tree), "--nemo-rl-ref", COMMIT, "--data", str(data_path), "--update"]
        assert inv.main(args) == 1
        out = capsys.readouterr().out
        assert "1 site(s) not classified" in out and "1 classified site(s) vanished" in out
        assert "[when self.cp > 2]" in out.split("vanished")[0]
        assert "[when self.cp > 1]" in out.split("vanished")[1]
        merged = json.loads(data_path.read_text())["sites"]
        moved = next(e for e in merged if e["function"] == "setup")
        assert moved["class"] == "runtime" and moved["line"] > 20

    def test_an_implicit_site_lives_while_its_expression_does(self, inv, tree, tmp_path, capsys):
        data_path = tmp_path / "asserts.json"
        _, data = _classified(inv, tree, data_path)
        implicit = {
            "id": "implicit0001",
            "repo": "NVIDIA-NeMo/RL",
            "file": "nemo_rl/algorithms/grpo.py",
            "function": "setup",
            "line": 0,
            "kind": "implicit",
            "test": "config['grpo']['use_dynamic_sampling']",
            "when": "",
            "message": "KeyError when grpo.use_dynamic_sampling is absent",
            "reached": True,
            "class": "config",
            "rules": [],
            "why": "test",
        }
        data["sites"].append(implicit)
        data_path.write_text(inv.render(data))
        assert inv.main([str(tree), "--nemo-rl-ref", COMMIT, "--data", str(data_path)]) == 0
        _write(tree, "nemo_rl/algorithms/grpo.py", GRPO.replace("use_dynamic_sampling", "x"))
        capsys.readouterr()
        assert inv.main([str(tree), "--nemo-rl-ref", COMMIT, "--data", str(data_path)]) == 1
        assert "implicit config['grpo']['use_dynamic_sampling']" in capsys.readouterr().out

    def test_coverage_numbers_replace_the_marked_block(self, inv, tree, tmp_path):
        data_path = tmp_path / "asserts.json"
        _classified(inv, tree, data_path)
        page = tmp_path / "coverage.md"
        page.write_text("# Coverage\n<!-- inventory:begin -->\nold\n<!-- inventory:end -->\nend\n")
        args = [str(tree), "--nemo-rl-ref", COMMIT, "--data", str(data_path), "--coverage"]
        assert inv.main([*args, str(page)]) == 0
        text = page.read_text()
        assert "old" not in text and text.endswith("<!-- inventory:end -->\nend\n")
        assert "| runtime-only | 5 | 5 |" in text and "| sites found" in text

    def test_a_checkout_without_a_commit_is_exit_2(self, inv, tree, tmp_path, capsys):
        assert inv.main([str(tree), "--data", str(tmp_path / "a.json")]) == 2
        assert "pass --nemo-rl-ref" in capsys.readouterr().err


def test_an_or_condition_keeps_its_parentheses_in_when(inv, tmp_path):
    root = tmp_path / "nemo-rl"
    _write(root, "examples/run_grpo.py", RUNNER)
    _write(
        root,
        "nemo_rl/algorithms/grpo.py",
        """
        def setup(config):
            if config["peft"]:
                if "dim" not in config or config["dim"] is None:
                    raise ValueError("dim must be set")
        """,
    )
    tree = inv.Tree("NVIDIA-NeMo/RL", "nemo_rl", scope=SCOPE)
    (site,) = [s for s in inv.scan(tree, root).sites if s.kind == "raise"]
    assert site.when == "config['peft'] and ('dim' not in config or config['dim'] is None)"


def test_megatron_bridge_is_scanned_for_its_listed_functions_only(
    inv, tree, tmp_path, monkeypatch, capsys
):
    bridge = tmp_path / "megatron-bridge"
    _write(
        bridge,
        "src/megatron/bridge/training/config.py",
        """
        class ConfigContainer:
            def validate(self):
                assert self.train.micro_batch_size == 1, "mbs"

            def log_non_default_values(self):
                raise ValueError("not in the listed functions")
        """,
    )
    small = inv.Tree(
        "NVIDIA-NeMo/Megatron-Bridge",
        "megatron_bridge",
        scope=("src/megatron/bridge/training/config.py",),
        functions=("ConfigContainer.validate",),
    )
    monkeypatch.setattr(inv, "MEGATRON_BRIDGE", small)
    monkeypatch.setattr(inv, "TREES", (inv.NEMO_RL, small))
    data = tmp_path / "asserts.json"
    args = [str(tree), "--nemo-rl-ref", COMMIT, "--data", str(data), "--megatron-bridge"]
    assert inv.main([*args, str(bridge)]) == 2  # not a git checkout and no ref
    assert "pass --megatron-bridge-ref" in capsys.readouterr().err
    assert inv.main([*args, str(bridge), "--megatron-bridge-ref", COMMIT, "--update"]) == 1
    assert f"NVIDIA-NeMo/Megatron-Bridge `{COMMIT[:10]}`" in capsys.readouterr().out
    saved = json.loads(data.read_text())
    sites = [s for s in saved["sites"] if s["repo"] == small.repo]
    assert [(s["function"], s["test"], s["class"]) for s in sites] == [
        ("ConfigContainer.validate", "self.train.micro_batch_size == 1", None)
    ]
    assert saved["sources"][small.repo]["functions"] == ["ConfigContainer.validate"]
