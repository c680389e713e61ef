import json
import os
import re

import pytest

from rlgate.core.errors import RlgateError
from rlgate.core.io import (
    SCHEMA_VERSION,
    read_json,
    read_text,
    read_yaml,
    write_json_atomic,
    write_text_atomic,
)


class TestWriteJsonAtomic:
    def test_write_json_atomic_adds_schema_version(self, tmp_path):
        out = write_json_atomic(tmp_path / "a" / "r.json", {"verdict": "go"})
        doc = json.loads(out.read_text())
        assert doc == {"schema_version": SCHEMA_VERSION, "verdict": "go"}

    def test_write_json_atomic_leaves_no_temp_files(self, tmp_path):
        write_json_atomic(tmp_path / "r.json", {"x": 1})
        assert [p.name for p in tmp_path.iterdir()] == ["r.json"]

    def test_write_text_atomic_refuses_to_overwrite_an_input(self, tmp_path):
        src = tmp_path / "metrics.json"
        src.write_text("{}")
        with pytest.raises(RlgateError, match="one of the inputs"):
            write_text_atomic(src, "clobbered", inputs=[str(src)])
        assert src.read_text() == "{}"


BOMB = "".join(
    f"{k}: &{k} [{', '.join([f'*{p}'] * 9) if p else ', '.join(['x'] * 9)}]\n"
    for p, k in zip(["", "a", "b", "c", "d", "e", "f", "g"], "abcdefgh", strict=True)
)


class TestReadYaml:
    def test_read_yaml_refuses_an_alias_bomb_before_expanding_it(self, tmp_path):
        path = tmp_path / "bomb.yaml"
        path.write_text(BOMB)  # 9**8 = 43 million leaves from ~400 bytes
        with pytest.raises(RlgateError, match="alias bomb"):
            read_yaml(path, what="recipe")

    def test_read_yaml_accepts_modest_aliases(self, tmp_path):
        path = tmp_path / "ok.yaml"
        path.write_text("base: &b {lr: 1.0e-6, steps: 3}\npolicy: *b\nref: *b\n")
        assert read_yaml(path, what="recipe")["ref"] == {"lr": 1.0e-6, "steps": 3}

    def test_read_yaml_refuses_python_tags(self, tmp_path):
        path = tmp_path / "tag.yaml"
        path.write_text("x: !!python/object/apply:os.system ['touch pwned']\n")
        with pytest.raises(RlgateError, match="not valid YAML"):
            read_yaml(path, what="recipe")
        assert not (tmp_path / "pwned").exists()

    def test_read_yaml_refuses_deep_nesting_with_a_message(self, tmp_path):
        path = tmp_path / "deep.yaml"
        path.write_text("a: " + "[" * 20000 + "]" * 20000)
        # PyYAML's own parser recurses (RecursionError); libyaml stops at 1000 levels
        with pytest.raises(RlgateError, match=r"nested too deeply|exceeded maximum nesting depth"):
            read_yaml(path, what="recipe")


class TestReadText:
    def test_read_text_refuses_bytes_that_are_not_utf8_naming_the_offset(self, tmp_path):
        path = tmp_path / "r.yaml"
        path.write_bytes(b"a: 1\n\xff\xfe")
        with pytest.raises(RlgateError, match=r"recipe is not UTF-8 text \(byte 5"):
            read_text(path, what="recipe")

    def test_read_text_replace_mode_keeps_a_torn_log_readable(self, tmp_path):
        path = tmp_path / "driver.log"
        path.write_bytes(b"step 3\n\xe2\x82")
        assert read_text(path, what="log", errors="replace") == "step 3\n\ufffd"

    def test_read_text_names_a_directory(self, tmp_path):
        with pytest.raises(RlgateError, match="a directory, not a file"):
            read_text(tmp_path, what="site config")

    def test_read_json_names_the_file_and_the_syntax_error(self, tmp_path):
        path = tmp_path / "x.json"
        path.write_text('{"a": ')
        with pytest.raises(RlgateError, match=r"x.json: report is not valid JSON"):
            read_json(path, what="report")


class TestWriteTarget:
    def test_write_text_atomic_refuses_a_directory_naming_it(self, tmp_path):
        with pytest.raises(RlgateError, match=f"cannot write {tmp_path}: it is a directory"):
            write_text_atomic(tmp_path, "x")

    def test_write_text_atomic_replaces_a_symlink_instead_of_writing_through_it(self, tmp_path):
        outside = tmp_path / "outside.txt"
        outside.write_text("keep")
        link = tmp_path / "out" / "report.md"
        link.parent.mkdir()
        link.symlink_to(outside)
        write_text_atomic(link, "new")
        assert outside.read_text() == "keep"
        assert not link.is_symlink() and link.read_text() == "new"


class TestStrictJson:
    def test_write_json_atomic_writes_non_finite_numbers_as_strings(self, tmp_path):
        out = write_json_atomic(tmp_path / "r.json", {"a": float("nan"), "b": [float("-inf"), 1.5]})
        text = out.read_text()
        assert "NaN" not in text and "Infinity" not in text
        doc = json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))
        assert doc["a"] == "nan" and doc["b"] == ["-inf", 1.5]


class TestOutputGuard:
    """The one rule between a command's inputs and its outputs (rlgate.core.io.OutputGuard)."""

    @staticmethod
    def _files(tmp_path):
        run = tmp_path / "run"
        run.mkdir()
        (run / "events").write_bytes(b"ev")
        recipe = tmp_path / "r.yaml"
        recipe.write_text("a: 1\n")
        return run, recipe

    @pytest.mark.parametrize(
        ("target", "says"),
        [
            (lambda t: t / "r.yaml", "it is one of the inputs (--recipe: "),
            (lambda t: t / "run" / ".." / "r.yaml", "it is one of the inputs"),
            (lambda t: t / "run" / "events", "it is inside the input directory"),
            (lambda t: t / "run" / "sub" / "new.json", "it is inside the input directory"),
            (lambda t: t / "link.json", "a symbolic link to one of the inputs"),
            (lambda t: t / "alias" / "new.json", "it is inside the input directory"),
            (lambda t: t / "hard.json", "a hard link to one of the inputs (--recipe: "),
            (lambda t: t / "hard_events", "a hard link to one of the inputs (RUN: "),
        ],
        ids=["same", "dotdot", "file_in_tree", "new_in_tree", "symlink", "linked_folder",
             "hard_link", "hard_link_into_tree"],
    )  # fmt: skip
    def test_an_output_that_is_links_to_or_lies_inside_an_input_is_refused_either_order(
        self, tmp_path, target, says
    ):
        from rlgate.core.io import OutputGuard

        run, recipe = self._files(tmp_path)
        (tmp_path / "link.json").symlink_to(recipe)
        (tmp_path / "alias").symlink_to(run, target_is_directory=True)
        os.link(recipe, tmp_path / "hard.json")
        os.link(run / "events", tmp_path / "hard_events")
        out = target(tmp_path)
        inputs_first = OutputGuard()
        inputs_first.add_input(recipe, "--recipe", check=True)
        inputs_first.add_input(run, "RUN", check=True)
        with pytest.raises(RlgateError, match="refusing to write --json") as caught:
            inputs_first.add_output(out, "--json")
        assert says in caught.value.message
        outputs_first = OutputGuard()
        outputs_first.add_output(out, "--json")
        with pytest.raises(RlgateError, match="refusing to write --json"):
            outputs_first.add_input(recipe, "--recipe", check=True)
            outputs_first.add_input(run, "RUN", check=True)

    def test_an_output_beside_the_inputs_is_fine(self, tmp_path):
        from rlgate.core.io import OutputGuard

        run, recipe = self._files(tmp_path)
        guard = OutputGuard()
        guard.add_input(recipe, "--recipe", check=True)
        guard.add_input(run, "RUN", check=True)
        guard.add_output(tmp_path / "out.json", "--json")
        guard.add_output(tmp_path / "report", "--out", directory=True)
        guard.check_write(tmp_path / "report" / "report.md")

    def test_an_output_directory_is_refused_as_an_input_or_inside_one_not_around_one(
        self, tmp_path
    ):
        from rlgate.core.io import OutputGuard

        run, recipe = self._files(tmp_path)
        guard = OutputGuard()
        guard.add_input(run, "RUN", check=True)
        guard.add_input(recipe, "--recipe", check=True)
        for out, says in ((run, "one of the inputs"), (run / "rep", "inside the input")):
            with pytest.raises(RlgateError, match=says):
                guard.add_output(out, "--out", directory=True)
        guard.add_output(tmp_path, "--out", directory=True)  # holds the inputs: fine ...
        with pytest.raises(RlgateError, match=r"refusing to write .*r\.yaml: it is one of"):
            guard.check_write(recipe)  # ... until a write lands on one of them

    def test_two_outputs_may_not_be_one_file(self, tmp_path):
        from rlgate.core.io import OutputGuard

        guard = OutputGuard()
        guard.add_output(tmp_path / "o.json", "--json")
        with pytest.raises(RlgateError, match="--json and --junit name the same file"):
            guard.add_output(tmp_path / "x" / ".." / "o.json", "--junit")

    def test_what_the_readers_read_joins_the_active_guard(self, tmp_path):
        from rlgate.core.io import note_input, output_guard

        manifest = tmp_path / "m.json"
        manifest.write_text("{}")
        with output_guard() as guard:
            guard.add_output(manifest, "--junit")
            read_json(manifest, what="run manifest")  # never raises: readers only record
            with pytest.raises(RlgateError, match=r"one of the inputs \(run manifest: "):
                write_text_atomic(manifest, "<testsuites/>")
            note_input(tmp_path / "other", "x")
        assert manifest.read_text() == "{}"
        read_json(manifest, what="run manifest")  # no guard: nothing recorded, nothing raised

    def test_a_file_the_command_wrote_is_not_an_input_when_read_back(self, tmp_path):
        """``launch --watch``: the manifest launch wrote, watch reads and updates."""
        from rlgate.core.io import output_guard

        run = tmp_path / "run"
        with output_guard() as guard:
            guard.add_output(run, "--run-dir", directory=True)
            write_json_atomic(run / "m.json", {"status": "submitted"})
            read_json(run / "m.json", what="run manifest")
            write_json_atomic(run / "m.json", {"status": "completed"})
        assert json.loads((run / "m.json").read_text())["status"] == "completed"

    def test_rlgate_records_outside_the_declared_outputs_are_not_held_to_the_inputs(self, tmp_path):
        """``watch RUN`` updates RUN's manifest: RUN is an input, the manifest rlgate's own."""
        from rlgate.core.io import output_guard

        run = tmp_path / "run"
        run.mkdir()
        (run / "m.json").write_text('{"status": "running"}')
        with output_guard() as guard:
            guard.add_input(run, "RUN_DIR", check=True)
            guard.add_output(tmp_path / "watch.xml", "--junit")
            read_json(run / "m.json", what="run manifest")
            write_json_atomic(run / "m.json", {"status": "completed"})
            with pytest.raises(RlgateError, match="inside the input directory"):
                write_text_atomic(run / "m.json", "x", inputs=[run])  # unless its writer says

    def test_explicit_inputs_of_a_writer_are_trees_too(self, tmp_path):
        run = tmp_path / "run"
        run.mkdir()
        with pytest.raises(RlgateError, match="inside the input directory"):
            write_text_atomic(run / "new.xml", "x", inputs=[run])
        assert list(run.iterdir()) == []

    @pytest.mark.parametrize(
        ("make", "says"),
        [
            (lambda t: t, "--json {} is a directory"),
            (lambda t: (t / "f").write_text("") or t / "f" / "o.json", "is not a directory"),
        ],
        ids=["directory", "under_a_file"],
    )
    def test_an_output_that_can_never_be_written_is_refused_naming_its_option(
        self, tmp_path, make, says
    ):
        from rlgate.core.io import OutputGuard

        out = make(tmp_path)
        with pytest.raises(RlgateError, match=re.escape(says.format(out))):
            OutputGuard().add_output(out, "--json")


@pytest.fixture
def umask():
    """Set the process's umask for one test (restored after)."""
    saved = os.umask(0o022)
    yield os.umask
    os.umask(saved)


def _mode(path) -> int:
    return path.stat().st_mode & 0o777


class TestModes:
    """Every file rlgate writes has mode 0666 less the umask (issue 24), as ``open`` makes it.

    Regression story: the atomic writer created its temporary sibling with ``mkstemp``
    (0600) and renamed it into place, so every report, JUnit and JSON was unreadable to the
    team on shared storage whatever the umask.
    """

    @pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664),
                                                (0o077, 0o600)])  # fmt: skip
    def test_a_new_file_is_0666_less_the_umask(self, tmp_path, umask, mask, mode) -> None:
        umask(mask)
        assert _mode(write_text_atomic(tmp_path / "r.md", "x")) == mode
        assert _mode(write_json_atomic(tmp_path / "deeper" / "r.json", {})) == mode

    def test_a_replaced_file_gets_the_umask_not_its_old_mode(self, tmp_path, umask) -> None:
        """Decision: an output is a new file (its old mode, e.g. an older rlgate's 0600, goes)."""
        umask(0o022)
        old = tmp_path / "report.json"
        old.write_text("{}")
        old.chmod(0o600)
        write_json_atomic(old, {"x": 1})
        assert _mode(old) == 0o644 and json.loads(old.read_text())["x"] == 1

    def test_the_commands_outputs_follow_the_umask(self, tmp_path, umask, capsys) -> None:
        from rlgate.cli.app import main
        from rlgate.testing.corpus import Fault

        from .helpers.corpus_build import corpus

        umask(0o027)
        c = corpus()
        outputs = ["--json", str(tmp_path / "gate.json"), "--junit", str(tmp_path / "gate.xml")]
        code = main(["check-run", str(c.runs[Fault.HEALTHY]), "--recipe", str(c.recipe), *outputs])
        assert code == 0, capsys.readouterr()
        assert {p.name: _mode(p) for p in tmp_path.iterdir()} == {
            "gate.json": 0o640,
            "gate.xml": 0o640,
        }


class TestRemoveTree:
    """A directory rlgate deletes is checked against the command's inputs first."""

    def test_a_tree_holding_an_input_is_kept(self, tmp_path) -> None:
        from rlgate.core.io import output_guard, remove_tree

        tree = tmp_path / "generated"
        (tree / "tok" / "m").mkdir(parents=True)
        (tree / "tok" / "m" / "tokenizer.json").write_text("{}")
        with output_guard() as guard:
            guard.add_input(tree / "tok" / "m", "a tokenizer of --tokenizers", tree=True)
            with pytest.raises(
                RlgateError, match=r"refusing to delete the folder .*: it holds the"
            ):
                remove_tree(tree, what="the folder")
        assert (tree / "tok" / "m" / "tokenizer.json").read_text() == "{}"

    def test_a_tree_inside_an_input_is_kept(self, tmp_path) -> None:
        from rlgate.core.io import remove_tree

        (tmp_path / "run" / "sub").mkdir(parents=True)
        with pytest.raises(RlgateError, match="inside the input directory"):
            remove_tree(tmp_path / "run" / "sub", what="x", inputs=[tmp_path / "run"])
        assert (tmp_path / "run" / "sub").is_dir()

    def test_a_link_is_never_deleted_through(self, tmp_path) -> None:
        from rlgate.core.io import remove_tree

        (tmp_path / "real").mkdir()
        (tmp_path / "real" / "f").write_text("kept")
        (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
        with pytest.raises(RlgateError, match="symbolic link"):
            remove_tree(tmp_path / "link", what="x")
        assert (tmp_path / "real" / "f").read_text() == "kept"

    def test_a_tree_with_no_input_in_it_is_deleted(self, tmp_path) -> None:
        from rlgate.core.io import output_guard, remove_tree

        (tmp_path / "gen" / "a").mkdir(parents=True)
        with output_guard() as guard:
            guard.add_input(tmp_path / "elsewhere", "--run", tree=True)
            remove_tree(tmp_path / "gen", what="x")
        assert not (tmp_path / "gen").exists()
